//! The shared buffer: XOFF and XON rules, headroom, per-priority profiles and the
//! frame caps that keep the pool from running dry.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::priorities::{PerPriority, Priority};

use super::{invalid, ConfigError, MAX_BUFFER_BYTES};

/// The `[buffer]` table: the shared pool, the XOFF and XON rules, headroom, lossy queue sizes and
/// frame caps.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BufferConfig {
    /// The shared buffer all ports and priorities draw from.
    pub shared_bytes: u64,
    /// Static XOFF threshold per (ingress port, lossless priority).
    pub xoff_bytes: Option<u64>,
    /// Dynamic XOFF threshold: alpha × the free shared buffer. Exclusive with `xoff_bytes`.
    pub xoff_alpha: Option<f64>,
    /// XON = XOFF − offset. Exclusive with `xon_bytes`.
    pub xon_offset_bytes: Option<u64>,
    /// Static XON threshold.
    pub xon_bytes: Option<u64>,
    /// Headroom per (ingress port, lossless priority) for what arrives after XOFF.
    pub headroom_bytes: u64,
    /// Tail-drop limit of each lossy egress queue. Absent: see
    /// [`BufferConfig::lossy_queue_limit`], which follows the port's largest frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossy_queue_bytes: Option<u64>,
    /// Most frames a port's lossy queues hold together, whatever their bytes: many small
    /// frames must not empty the frame pool. Counted in pool buffers: a jumbo frame in
    /// several (AF_XDP multi-buffer) counts each. Absent: see [`Config::frame_caps`](super::Config::frame_caps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossy_port_frames: Option<u32>,
    /// Most frames the slowpath holds for blocked ports together: a port blocked for
    /// ever must not empty the frame pool. Counted in pool buffers, as `lossy_port_frames`. Absent: see [`Config::frame_caps`](super::Config::frame_caps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowpath_frames: Option<u32>,
    /// Most frames lossless groups hold together below XOFF: each (ingress port, lossless
    /// priority) goes XOFF at its even share, whatever its bytes (what arrives after XOFF
    /// is bounded by the headroom's bytes). Counted in pool buffers, as `lossy_port_frames`.
    /// Absent: see [`Config::frame_caps`](super::Config::frame_caps).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossless_frames: Option<u32>,
    /// `[buffer.priority.N]`: priority N's own profile on every port, overriding the
    /// buffer-wide XOFF, XON and headroom rules it sets.
    #[serde(default, skip_serializing_if = "PerPriority::is_empty")]
    pub priority: PerPriority<BufferProfile>,
}

/// A priority group's buffer settings, every one optional: `[buffer.priority.N]` for
/// priority N on every port, `[port.priority.N]` for one port's. A rule a profile leaves
/// out comes from the level above (see [`Config::group_profile`](super::Config::group_profile)). Exactly one form of
/// each rule per level: `xoff_bytes` or `xoff_alpha`, `xon_bytes` or `xon_offset_bytes`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BufferProfile {
    /// Static XOFF threshold, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xoff_bytes: Option<u64>,
    /// Dynamic XOFF threshold: alpha × the free shared buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xoff_alpha: Option<f64>,
    /// XON threshold, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xon_bytes: Option<u64>,
    /// XON this many bytes below XOFF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xon_offset_bytes: Option<u64>,
    /// Headroom the group may fill after XOFF, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<u64>,
}

impl BufferProfile {
    pub(super) fn xoff(&self) -> Option<XoffRule> {
        self.xoff_alpha.map(XoffRule::Dynamic).or(self.xoff_bytes.map(XoffRule::Static))
    }

    pub(super) fn xon(&self) -> Option<XonRule> {
        self.xon_bytes.map(XonRule::Static).or(self.xon_offset_bytes.map(XonRule::BelowXoff))
    }
}

/// What one (ingress port, priority) group is held to, every level resolved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[repr(C)] // the XOFF rule first: admission reads it for every frame, beside the group
pub struct GroupProfile {
    /// When the group pauses its upstream.
    pub xoff: XoffRule,
    /// When it resumes it.
    pub xon: XonRule,
    /// What it may still take after XOFF, bytes.
    pub headroom_bytes: u64,
}

/// How many frames (not bytes) lossy queues and the slowpath may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameCaps {
    /// Per egress port, its lossy queues together.
    pub lossy_port: u32,
    /// The slowpath, all blocked ports together.
    pub slowpath: u32,
    /// Lossless frames before their groups pause: each (port, lossless priority) group
    /// goes XOFF at its even share of this.
    pub lossless: u32,
}

/// A lossy egress queue's tail-drop limit at the standard MTU, when the config sets none.
pub const DEFAULT_LOSSY_QUEUE_BYTES: u64 = 512 << 10;

/// The fewest of its port's largest frames a lossy queue holds when the config sets no
/// limit. The switch drains a queue at a cost per frame more than per byte (5.9 µs for a
/// 9018-byte frame against 2.5 µs for a 1518-byte one, copy mode on veth), so a limit in
/// bytes alone covers a much shorter stall of the switch with jumbo frames: 512 KiB is 58
/// of them, and at MTU 9000 that lost frames after the scheduler's stalls of a few ms at
/// 60 % of what the switch forwards; 256 of them (2.3 MB) lost none.
pub const LOSSY_QUEUE_MIN_FRAMES: u64 = 256;

impl BufferConfig {
    /// The tail-drop limit of a lossy egress queue on a port whose largest frame is
    /// `max_frame` bytes: `lossy_queue_bytes` when set, otherwise
    /// [`DEFAULT_LOSSY_QUEUE_BYTES`] or [`LOSSY_QUEUE_MIN_FRAMES`] of the largest frames,
    /// whichever is more (the first up to MTU 1986, so at 1500 it is 512 KiB).
    pub fn lossy_queue_limit(&self, max_frame: usize) -> u64 {
        self.lossy_queue_bytes.unwrap_or(DEFAULT_LOSSY_QUEUE_BYTES.max(LOSSY_QUEUE_MIN_FRAMES * max_frame as u64))
    }
}

impl Default for BufferConfig {
    fn default() -> BufferConfig {
        BufferConfig {
            shared_bytes: 4 << 20,
            xoff_bytes: None,
            xoff_alpha: None,
            xon_offset_bytes: None,
            xon_bytes: None,
            headroom_bytes: 64 << 10,
            lossy_queue_bytes: None,
            lossy_port_frames: None,
            slowpath_frames: None,
            lossless_frames: None,
            priority: PerPriority::default(),
        }
    }
}

/// The resolved XOFF rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XoffRule {
    /// XOFF at this many bytes.
    Static(u64),
    /// XOFF at alpha × the free shared buffer.
    Dynamic(f64),
}

/// The resolved XON rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XonRule {
    /// XON this many bytes below the XOFF threshold.
    BelowXoff(u64),
    /// XON at this many bytes.
    Static(u64),
}

/// XOFF threshold when nothing sets one.
pub const DEFAULT_XOFF_BYTES: u64 = 96 << 10;

/// The lossless priorities when nothing sets them (the common RoCE choice).
pub const DEFAULT_LOSSLESS: [Priority; 2] = [Priority::new(3), Priority::new(4)];

/// How far below XOFF XON lies when nothing sets it.
pub const DEFAULT_XON_OFFSET_BYTES: u64 = 16 << 10;

impl BufferConfig {
    /// The buffer-wide rules as a profile, the last level before the defaults.
    pub(super) fn wide_profile(&self) -> BufferProfile {
        BufferProfile {
            xoff_bytes: self.xoff_bytes,
            xoff_alpha: self.xoff_alpha,
            xon_bytes: self.xon_bytes,
            xon_offset_bytes: self.xon_offset_bytes,
            headroom_bytes: Some(self.headroom_bytes),
        }
    }

    /// The buffer-wide XOFF rule, defaults applied.
    pub fn xoff_rule(&self) -> XoffRule {
        match (self.xoff_bytes, self.xoff_alpha) {
            (_, Some(alpha)) => XoffRule::Dynamic(alpha),
            (Some(b), None) => XoffRule::Static(b),
            (None, None) => XoffRule::Static(DEFAULT_XOFF_BYTES),
        }
    }

    /// The buffer-wide XON rule, defaults applied.
    pub fn xon_rule(&self) -> XonRule {
        match (self.xon_bytes, self.xon_offset_bytes) {
            (Some(b), _) => XonRule::Static(b),
            (None, Some(o)) => XonRule::BelowXoff(o),
            (None, None) => XonRule::BelowXoff(DEFAULT_XON_OFFSET_BYTES),
        }
    }
}

/// One level's profiles on their own (their keys were checked as they were read): one
/// form of each rule, sizes in range.
pub(super) fn check_profiles(
    prefix: impl fmt::Display,
    profiles: &PerPriority<BufferProfile>,
) -> Result<(), ConfigError> {
    for (key, p) in profiles.iter() {
        let field = |f: &str| format!("{prefix}.{key}.{f}");
        if p.xoff_bytes.is_some() && p.xoff_alpha.is_some() {
            return Err(invalid(field("xoff_alpha"), "give either xoff_bytes or xoff_alpha, not both"));
        }
        if p.xon_bytes.is_some() && p.xon_offset_bytes.is_some() {
            return Err(invalid(field("xon_bytes"), "give either xon_bytes or xon_offset_bytes, not both"));
        }
        if p.xoff_alpha.is_some_and(|a| !(a.is_finite() && a > 0.0 && a <= 64.0)) {
            return Err(invalid(field("xoff_alpha"), "must be above 0 and at most 64"));
        }
        if p.xoff_bytes.is_some_and(|x| x == 0 || x > MAX_BUFFER_BYTES) {
            return Err(invalid(field("xoff_bytes"), format!("must be 1..{MAX_BUFFER_BYTES}")));
        }
        for (name, v) in
            [("xon_bytes", p.xon_bytes), ("xon_offset_bytes", p.xon_offset_bytes), ("headroom_bytes", p.headroom_bytes)]
        {
            if v.is_some_and(|v| v > MAX_BUFFER_BYTES) {
                return Err(invalid(field(name), format!("at most {MAX_BUFFER_BYTES}")));
            }
        }
    }
    Ok(())
}

/// A group's resolved profile as a whole: an XON below its XOFF, an XOFF within the pool.
pub(super) fn check_group(field: String, g: &GroupProfile, shared_bytes: u64) -> Result<(), ConfigError> {
    match (g.xoff, g.xon) {
        (XoffRule::Static(xoff), _) if xoff > shared_bytes => {
            Err(invalid(field, format!("XOFF ({xoff} B) exceeds the shared buffer ({shared_bytes} B)")))
        }
        (XoffRule::Static(xoff), XonRule::Static(xon)) if xon > xoff => {
            Err(invalid(field, format!("XON ({xon} B) must not exceed XOFF ({xoff} B)")))
        }
        (XoffRule::Static(xoff), XonRule::BelowXoff(offset)) if offset >= xoff => Err(invalid(
            field,
            format!("an XON offset of {offset} B leaves no XON below XOFF ({xoff} B): the group would never resume"),
        )),
        (XoffRule::Dynamic(_), XonRule::Static(_)) => Err(invalid(
            field,
            "a static XON cannot go with a dynamic XOFF (it could lie above it); use xon_offset_bytes",
        )),
        _ => Ok(()),
    }
}
