//! WRED and ECN marking on egress queues, in SONiC's words: `[wred.priority.N]` for
//! priority N's queue on every port, `[port.wred.priority.N]` for one port's.
//!
//! A profile's curve: below `green_min_threshold` bytes in the queue nothing happens; from
//! there to `green_max_threshold` the chance rises linearly from 0 to
//! `green_drop_probability` percent; at and above the maximum it is certain. What a hit
//! does: an ECN-capable frame (ECT(0) or ECT(1)) is marked Congestion Experienced when
//! `ecn = "ecn_all"`; any other frame is dropped on a lossy queue and passes a lossless
//! one (PFC, not WRED, keeps a lossless queue from overflowing). Without
//! `wred_green_enable` the profile does nothing.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::priorities::PerPriority;

use super::{invalid, ConfigError, MAX_BUFFER_BYTES};

/// What a WRED hit does to an ECN-capable frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnMode {
    /// Not marked: treated as a frame that is not ECN-capable.
    EcnNone,
    /// Marked Congestion Experienced.
    EcnAll,
}

/// One level's WRED settings for a priority, each optional: a setting left out comes from
/// the level above ([`super::Config::wred_profile`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WredSettings {
    /// Whether a hit marks ECN-capable frames (`ecn_all`) or treats them as any other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<EcnMode>,
    /// Whether the profile acts at all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wred_green_enable: Option<bool>,
    /// Bytes in the egress queue where marking (or dropping) may start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green_min_threshold: Option<u64>,
    /// Bytes in the egress queue where it becomes certain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green_max_threshold: Option<u64>,
    /// The chance at the maximum threshold, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub green_drop_probability: Option<u32>,
}

/// `[wred]`: the profiles of every port's queues, and the seed of the draws.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WredConfig {
    /// Seeds the switch's random draws, so that a run (the simulator's above all) is
    /// reproducible.
    pub seed: u64,
    /// `[wred.priority.N]`.
    #[serde(skip_serializing_if = "PerPriority::is_empty")]
    pub priority: PerPriority<WredSettings>,
}

/// `[port.wred]`: one port's own profiles.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PortWred {
    /// `[port.wred.priority.N]`.
    #[serde(skip_serializing_if = "PerPriority::is_empty")]
    pub priority: PerPriority<WredSettings>,
}

/// A queue's WRED profile, every level resolved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WredProfile {
    /// What a hit does to an ECN-capable frame.
    pub ecn: EcnMode,
    /// Whether the profile acts at all.
    pub wred_green_enable: bool,
    /// Queue bytes where the chance starts rising from 0.
    pub green_min_threshold: u64,
    /// Queue bytes where it becomes certain.
    pub green_max_threshold: u64,
    /// The chance just below the maximum, percent.
    pub green_drop_probability: u32,
}

/// Defaults, sized to this switch's default buffer: marking starts at a quarter of the
/// default XOFF (65536 bytes) and is certain by the time one ingress would pause, so that
/// ECN acts before PFC; 5 % at the maximum, SONiC's lossless profile's figure.
pub const DEFAULT_GREEN_MIN_THRESHOLD: u64 = 16 << 10;
/// See [`DEFAULT_GREEN_MIN_THRESHOLD`].
pub const DEFAULT_GREEN_MAX_THRESHOLD: u64 = 64 << 10;
/// See [`DEFAULT_GREEN_MIN_THRESHOLD`].
pub const DEFAULT_GREEN_DROP_PROBABILITY: u32 = 5;

impl WredProfile {
    /// The defaults for a queue: SONiC marks its lossless queues (WRED on, `ecn_all`) and
    /// leaves lossy ones alone.
    pub fn default_for(lossless: bool) -> WredProfile {
        WredProfile {
            ecn: if lossless { EcnMode::EcnAll } else { EcnMode::EcnNone },
            wred_green_enable: lossless,
            green_min_threshold: DEFAULT_GREEN_MIN_THRESHOLD,
            green_max_threshold: DEFAULT_GREEN_MAX_THRESHOLD,
            green_drop_probability: DEFAULT_GREEN_DROP_PROBABILITY,
        }
    }

    /// The profile with `s`'s settings over it.
    pub fn with(self, s: &WredSettings) -> WredProfile {
        WredProfile {
            ecn: s.ecn.unwrap_or(self.ecn),
            wred_green_enable: s.wred_green_enable.unwrap_or(self.wred_green_enable),
            green_min_threshold: s.green_min_threshold.unwrap_or(self.green_min_threshold),
            green_max_threshold: s.green_max_threshold.unwrap_or(self.green_max_threshold),
            green_drop_probability: s.green_drop_probability.unwrap_or(self.green_drop_probability),
        }
    }

    /// As settings, every one given (what `check-config` prints).
    pub fn settings(&self) -> WredSettings {
        WredSettings {
            ecn: Some(self.ecn),
            wred_green_enable: Some(self.wred_green_enable),
            green_min_threshold: Some(self.green_min_threshold),
            green_max_threshold: Some(self.green_max_threshold),
            green_drop_probability: Some(self.green_drop_probability),
        }
    }
}

/// Checks one level's settings (their keys were checked as they were read): thresholds within the buffer's bounds
/// and in order where both are given, a probability in percent.
pub(super) fn check_settings(prefix: impl fmt::Display, levels: &PerPriority<WredSettings>) -> Result<(), ConfigError> {
    for (key, s) in levels.iter() {
        let field = |f: &str| format!("{prefix}.{key}.{f}");
        for (name, v) in
            [("green_min_threshold", s.green_min_threshold), ("green_max_threshold", s.green_max_threshold)]
        {
            if v.is_some_and(|v| v > MAX_BUFFER_BYTES) {
                return Err(invalid(field(name), format!("at most {MAX_BUFFER_BYTES}")));
            }
        }
        if s.green_drop_probability.is_some_and(|p| p > 100) {
            return Err(invalid(field("green_drop_probability"), "a percentage, 0..100"));
        }
    }
    Ok(())
}

/// Checks a resolved profile: the curve must rise.
pub(super) fn check_profile(field: impl fmt::Display, p: &WredProfile) -> Result<(), ConfigError> {
    if p.green_min_threshold > p.green_max_threshold {
        return Err(invalid(
            field,
            format!(
                "green_min_threshold ({}) above green_max_threshold ({})",
                p.green_min_threshold, p.green_max_threshold
            ),
        ));
    }
    Ok(())
}
