//! The switch configuration: a TOML file, or the same structure built from command-line flags.
//!
//! Every field has a default except the ports' interfaces, so `[[port]] iface = "eth1"` twice
//! is a working switch. Errors name the offending field.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::mac::MacAddr;
use super::pfc::PRIORITIES;
use super::pfcwd::{WatchdogConfig, WatchdogOverride};
use super::priorities::Priorities;
use super::speed::Speed;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Names the switch in logs, in its control socket path and in DCFIT messages.
    #[serde(default = "default_name")]
    pub name: String,
    /// The id carried in DCFIT checking messages; derived from `name` when absent.
    #[serde(default)]
    pub switch_id: Option<u32>,
    #[serde(default)]
    pub buffer: BufferConfig,
    #[serde(default)]
    pub pfc: PfcConfig,
    #[serde(default)]
    pub classify: ClassifyConfig,
    #[serde(default)]
    pub fdb: FdbConfig,
    #[serde(default)]
    pub dataplane: DataplaneConfig,
    #[serde(default)]
    pub dcfit: DcfitConfig,
    /// The PFC watchdog (see [`crate::pfcwd`]); a port's `pfcwd` overrides it.
    #[serde(default)]
    pub pfcwd: WatchdogConfig,
    /// A Tagger table to apply (deadlock prevention); see [`crate::tagging`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagger: Option<TaggerConfig>,
    #[serde(rename = "port", default)]
    pub ports: Vec<PortConfig>,
    /// Static forwarding entries: never learned over, never aged (rings and Clos
    /// topologies need them instead of flooding).
    #[serde(rename = "fdb_entry", default)]
    pub fdb_entries: Vec<StaticFdbEntry>,
}

/// Port speeds the switch accepts.
const MIN_PORT_SPEED: Speed = Speed::mbps(1);
const MAX_PORT_SPEED: Speed = Speed::gbps(800);
/// The longest cable the headroom calculator takes (10 km: beyond, PFC is not used).
const MAX_CABLE_M: f64 = 10_000.0;
/// The largest buffer, headroom or queue size (1 GiB).
const MAX_BUFFER_BYTES: u64 = 1 << 30;
const MAX_FDB_ENTRIES: usize = 1 << 20;
/// A week.
const MAX_AGING_S: u64 = 7 * 24 * 3600;

/// `[tagger]`: the tag table this switch applies.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TaggerConfig {
    /// One switch's file exactly as `tagger compute` writes it (TOML or JSON).
    pub table: String,
    /// The switch name the table must have been written for; this switch's `name` when
    /// absent (a testbed's switches carry a prefix the topology file does not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticFdbEntry {
    pub mac: MacAddr,
    /// The port's name (or interface).
    pub port: String,
}

/// What the switch does when it finds a PFC deadlock.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum DeadlockResolution {
    /// Record, log and count it.
    #[default]
    Report,
    /// Also drop the lossless queue on the detecting port for `drop_ms`, like a PFC watchdog.
    Drop,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DcfitConfig {
    /// Carry checking messages in pause frames and detect cycles of pauses.
    pub enabled: bool,
    pub resolution: DeadlockResolution,
    /// How long the detecting port's lossless queue is dropped with `resolution = "drop"`.
    pub drop_ms: u64,
}

impl Default for DcfitConfig {
    fn default() -> DcfitConfig {
        DcfitConfig { enabled: true, resolution: DeadlockResolution::Report, drop_ms: 200 }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// The port's name in stats and commands; the interface name when absent.
    #[serde(default)]
    pub name: Option<String>,
    /// The Linux interface the port's AF_XDP socket binds to.
    pub iface: String,
    /// Source address of the frames the switch itself sends on this port (PFC);
    /// the interface's own address when absent.
    #[serde(default)]
    pub mac: Option<MacAddr>,
    /// Line rate, enforced by the egress shaper. Absent: the NIC's link speed, where it
    /// has one (`pfcswitch run` reads it), else [`DEFAULT_PORT_SPEED`].
    #[serde(default)]
    pub speed: Option<Speed>,
    /// Cable length in metres, used by the headroom calculator.
    #[serde(default = "default_cable_m")]
    pub cable_m: f64,
    #[serde(default)]
    pub pause_mode: PauseMode,
    /// What is at the other end: a host (the default) or another switch. Only
    /// switch-facing ports carry DCFIT checking messages, in either direction.
    #[serde(default)]
    pub role: PortRole,
    /// Whether unknown-unicast, broadcast and multicast frames are flooded out of this port.
    #[serde(default = "default_true")]
    pub flood: bool,
    /// Largest frame accepted, without FCS; larger frames are dropped and counted.
    #[serde(default = "default_max_frame")]
    pub max_frame: usize,
    /// Overrides `buffer.headroom_bytes` for this port's lossless priorities.
    #[serde(default)]
    pub headroom_bytes: Option<u64>,
    /// A static XOFF threshold for this port's lossless priorities, overriding the
    /// buffer's rule (per-port buffer profiles).
    #[serde(default)]
    pub xoff_bytes: Option<u64>,
    /// `[port.priority.N]`: this port's own profile for priority N, overriding every
    /// other level.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub priority: BTreeMap<String, BufferProfile>,
    #[serde(default)]
    pub scheduler: Scheduler,
    /// Overrides `[pfcwd]` for this port, e.g. `pfcwd = { action = "alert" }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pfcwd: Option<WatchdogOverride>,
}

/// How a port sends and obeys link-level flow control.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PauseMode {
    /// 802.1Qbb per-priority flow control on the lossless priorities; 802.3x PAUSE is ignored.
    #[default]
    Pfc,
    /// 802.3x PAUSE for the whole port.
    GlobalPause,
    /// Neither sends nor obeys pause frames.
    Off,
}

/// What a port faces. A host is not trusted with DCFIT: a checking message it sends
/// could make the switch see (and with `resolution = "drop"` break) a deadlock that is
/// not there.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum PortRole {
    /// Checking messages it sends are counted and ignored; its pauses carry none.
    #[default]
    Host,
    /// A link to another DCFIT switch: checking messages cross it both ways.
    Switch,
}

/// Egress scheduling among a port's eight priority queues.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub enum Scheduler {
    /// Highest priority first.
    #[default]
    Strict,
    /// Deficit round robin with a weight per priority (0..7); weight 0 keeps that queue strict,
    /// served before the weighted ones.
    Drr { weights: [u32; PRIORITIES] },
}

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
    /// Tail-drop limit of each lossy egress queue.
    pub lossy_queue_bytes: u64,
    /// Most frames a port's lossy queues hold together, whatever their bytes: many small
    /// frames must not empty the frame pool. Absent: see [`Config::frame_caps`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossy_port_frames: Option<u32>,
    /// Most frames the slowpath holds for blocked ports together: a port blocked for
    /// ever must not empty the frame pool. Absent: see [`Config::frame_caps`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slowpath_frames: Option<u32>,
    /// `[buffer.priority.N]`: priority N's own profile on every port, overriding the
    /// buffer-wide XOFF, XON and headroom rules it sets.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub priority: BTreeMap<String, BufferProfile>,
}

/// A priority group's buffer settings, every one optional: `[buffer.priority.N]` for
/// priority N on every port, `[port.priority.N]` for one port's. A rule a profile leaves
/// out comes from the level above (see [`Config::group_profile`]). Exactly one form of
/// each rule per level: `xoff_bytes` or `xoff_alpha`, `xon_bytes` or `xon_offset_bytes`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BufferProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xoff_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xoff_alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xon_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xon_offset_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_bytes: Option<u64>,
}

impl BufferProfile {
    fn xoff(&self) -> Option<XoffRule> {
        self.xoff_alpha.map(XoffRule::Dynamic).or(self.xoff_bytes.map(XoffRule::Static))
    }

    fn xon(&self) -> Option<XonRule> {
        self.xon_bytes.map(XonRule::Static).or(self.xon_offset_bytes.map(XonRule::BelowXoff))
    }
}

/// What one (ingress port, priority) group is held to, every level resolved.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GroupProfile {
    pub xoff: XoffRule,
    pub xon: XonRule,
    pub headroom_bytes: u64,
}

/// How many frames (not bytes) lossy queues and the slowpath may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameCaps {
    /// Per egress port, its lossy queues together.
    pub lossy_port: u32,
    /// The slowpath, all blocked ports together.
    pub slowpath: u32,
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
            lossy_queue_bytes: 512 << 10,
            lossy_port_frames: None,
            slowpath_frames: None,
            priority: BTreeMap::new(),
        }
    }
}

/// The resolved XOFF rule.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XoffRule {
    Static(u64),
    Dynamic(f64),
}

/// The resolved XON rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XonRule {
    BelowXoff(u64),
    Static(u64),
}

pub const DEFAULT_XOFF_BYTES: u64 = 96 << 10;
pub const DEFAULT_LOSSLESS: [u8; 2] = [3, 4];
pub const DEFAULT_XON_OFFSET_BYTES: u64 = 16 << 10;

impl BufferConfig {
    /// The buffer-wide rules as a profile, the last level before the defaults.
    fn wide_profile(&self) -> BufferProfile {
        BufferProfile {
            xoff_bytes: self.xoff_bytes,
            xoff_alpha: self.xoff_alpha,
            xon_bytes: self.xon_bytes,
            xon_offset_bytes: self.xon_offset_bytes,
            headroom_bytes: Some(self.headroom_bytes),
        }
    }

    pub fn xoff_rule(&self) -> XoffRule {
        match (self.xoff_bytes, self.xoff_alpha) {
            (_, Some(alpha)) => XoffRule::Dynamic(alpha),
            (Some(b), None) => XoffRule::Static(b),
            (None, None) => XoffRule::Static(DEFAULT_XOFF_BYTES),
        }
    }

    pub fn xon_rule(&self) -> XonRule {
        match (self.xon_bytes, self.xon_offset_bytes) {
            (Some(b), _) => XonRule::Static(b),
            (None, Some(o)) => XonRule::BelowXoff(o),
            (None, None) => XonRule::BelowXoff(DEFAULT_XON_OFFSET_BYTES),
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PfcConfig {
    /// Priorities that are lossless: they send and obey PFC. The others are lossy.
    /// Default: 3 and 4, or with a Tagger table the priorities its rules use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossless: Option<Vec<u8>>,
    /// Quanta carried by the pauses this switch sends.
    pub quanta: u16,
    /// How often a pause is repeated while the queue stays above XON; half the pause time
    /// at the port's speed when absent.
    pub refresh_us: Option<u64>,
}

impl Default for PfcConfig {
    fn default() -> PfcConfig {
        PfcConfig { lossless: None, quanta: 65535, refresh_us: None }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// DSCP → priority for untagged IP frames, e.g. `dscp = { 3 = 3, 4 = 4, 46 = 5 }`.
    pub dscp: BTreeMap<String, u8>,
    /// Priority of frames with neither a VLAN tag nor a mapped DSCP.
    pub default_priority: u8,
}

impl Default for ClassifyConfig {
    fn default() -> ClassifyConfig {
        ClassifyConfig { dscp: BTreeMap::from([("3".into(), 3), ("4".into(), 4)]), default_priority: 0 }
    }
}

impl ClassifyConfig {
    /// The DSCP map as a table; call after [`Config::validate`].
    pub fn dscp_table(&self) -> [u8; 64] {
        let mut table = [self.default_priority; 64];
        for (dscp, prio) in &self.dscp {
            if let Ok(d) = dscp.parse::<usize>() {
                if d < 64 {
                    table[d] = *prio;
                }
            }
        }
        table
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FdbConfig {
    /// Learned entries older than this are forgotten.
    pub aging_s: u64,
    /// Most learned entries; beyond it new addresses are flooded, not learned.
    pub max_entries: usize,
}

impl Default for FdbConfig {
    fn default() -> FdbConfig {
        FdbConfig { aging_s: 300, max_entries: 16384 }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DataplaneConfig {
    /// UMEM frames shared by all ports; bounds how many frames the switch can hold.
    /// Absent: a fill ring's worth per rx queue, a tx ring's worth per port, and 16384
    /// for queued frames (see [`DataplaneConfig::umem_frames_for`]).
    pub umem_frames: Option<u32>,
    /// UMEM frame size: 2048 or 4096; chosen from the interfaces' MTU when absent.
    pub frame_size: Option<u32>,
    /// Descriptors per AF_XDP ring. What arrives while the loop is behind (off its CPU,
    /// or slower than the traffic for a while on a CPU it shares) waits on the rx ring:
    /// 8192 frames last 27 ms at 300 k frames/s.
    pub ring_size: u32,
    /// Frames handled per ring per loop turn.
    pub batch: usize,
    /// How long the loop keeps polling without sleeping after the last work it did.
    pub busy_poll_us: u64,
    /// Without a socket on a queue, drop frames instead of passing them to the kernel.
    pub drop_without_socket: bool,
    /// Pin the dataplane thread to this CPU.
    pub cpu: Option<usize>,
    /// Bind at most this many rx queues of each port (queues 0..N-1); every queue the
    /// interface has when absent. Frames the NIC steers to a queue left out are dropped
    /// by the classifier, never passed around the switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<u32>,
    /// How the classifier is attached: native (in the driver) or generic (after the
    /// kernel built an skb). Absent: native where the driver takes it, else generic.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub xdp_mode: Option<XdpMode>,
    /// How the AF_XDP sockets use the UMEM: zero-copy (the NIC writes frames into it) or
    /// copy. Absent: zero-copy where the driver offers it, else copy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bind_mode: Option<BindMode>,
}

/// Where an XDP program runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    /// In the driver, before any skb is built.
    Native,
    /// In the kernel's generic path, on an skb: works on any interface, slower.
    Generic,
}

impl XdpMode {
    /// The mode's name in logs, messages and stats tables.
    pub fn as_str(self) -> &'static str {
        match self {
            XdpMode::Native => "native",
            XdpMode::Generic => "generic",
        }
    }
}

/// How an AF_XDP socket gets its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BindMode {
    /// The driver receives into (and sends from) the UMEM itself.
    ZeroCopy,
    /// The kernel copies each frame between its buffers and the UMEM.
    Copy,
}

impl BindMode {
    pub fn as_str(self) -> &'static str {
        match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
        }
    }
}

impl Default for DataplaneConfig {
    fn default() -> DataplaneConfig {
        DataplaneConfig {
            umem_frames: None,
            frame_size: None,
            ring_size: 8192,
            batch: 64,
            busy_poll_us: 200,
            drop_without_socket: false,
            cpu: None,
            queues: None,
            xdp_mode: None,
            bind_mode: None,
        }
    }
}

fn default_name() -> String {
    "pfcswitch".into()
}
/// The speed of a port whose `speed` is not set and whose NIC reports none.
pub const DEFAULT_PORT_SPEED: Speed = Speed::gbps(10);
fn default_cable_m() -> f64 {
    10.0
}
fn default_true() -> bool {
    true
}
pub const DEFAULT_MAX_FRAME: usize = 1522;
fn default_max_frame() -> usize {
    DEFAULT_MAX_FRAME
}

fn check_watchdog(field: impl fmt::Display, w: &WatchdogConfig) -> Result<(), ConfigError> {
    if !(1..=60_000).contains(&w.detection_ms) {
        return Err(invalid(format!("{field}.detection_ms"), "must be 1..60000"));
    }
    if !(1..=60_000).contains(&w.restoration_ms) {
        return Err(invalid(format!("{field}.restoration_ms"), "must be 1..60000"));
    }
    Ok(())
}

/// A configuration error, naming the field at fault.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("{0}")]
    Parse(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
}

fn invalid(field: impl fmt::Display, problem: impl fmt::Display) -> ConfigError {
    ConfigError::Invalid { field: field.to_string(), problem: problem.to_string() }
}

impl Config {
    /// A switch on these interfaces with every other setting at its default.
    pub fn for_interfaces<S: AsRef<str>>(ifaces: &[S]) -> Config {
        Config {
            name: default_name(),
            switch_id: None,
            buffer: BufferConfig::default(),
            pfc: PfcConfig::default(),
            classify: ClassifyConfig::default(),
            fdb: FdbConfig::default(),
            dataplane: DataplaneConfig::default(),
            dcfit: DcfitConfig::default(),
            pfcwd: WatchdogConfig::default(),
            tagger: None,
            ports: ifaces.iter().map(|i| PortConfig::new(i.as_ref())).collect(),
            fdb_entries: Vec::new(),
        }
    }

    /// Parses and validates a TOML configuration.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a Config always serializes")
    }

    pub fn port_name(&self, index: usize) -> &str {
        let p = &self.ports[index];
        p.name.as_deref().unwrap_or(&p.iface)
    }

    /// The index of the port called `name` (its name, or its interface).
    pub fn port_index(&self, name: &str) -> Option<usize> {
        (0..self.ports.len()).find(|&i| self.port_name(i) == name || self.ports[i].iface == name)
    }

    /// The lossless priorities: as configured, or 3 and 4.
    pub fn lossless_priorities(&self) -> &[u8] {
        self.pfc.lossless.as_deref().unwrap_or(&DEFAULT_LOSSLESS)
    }

    pub fn lossless(&self) -> Priorities {
        self.lossless_priorities().iter().map(|&p| usize::from(p)).collect()
    }

    /// The buffer profile of `port`'s group for `prio`. Each rule (XOFF, XON, headroom)
    /// comes from the most specific level that sets it: the port's own profile for the
    /// priority, then the port's `xoff_bytes`/`headroom_bytes`, then
    /// `[buffer.priority.N]`, then `[buffer]`, then the defaults.
    pub fn group_profile(&self, port: usize, prio: u8) -> GroupProfile {
        let key = prio.to_string();
        let p = &self.ports[port];
        let port_wide =
            BufferProfile { xoff_bytes: p.xoff_bytes, headroom_bytes: p.headroom_bytes, ..Default::default() };
        let wide = self.buffer.wide_profile();
        let levels = [p.priority.get(&key), Some(&port_wide), self.buffer.priority.get(&key), Some(&wide)];
        let levels = || levels.iter().flatten();
        GroupProfile {
            xoff: levels().find_map(|l| l.xoff()).unwrap_or(XoffRule::Static(DEFAULT_XOFF_BYTES)),
            xon: levels().find_map(|l| l.xon()).unwrap_or(XonRule::BelowXoff(DEFAULT_XON_OFFSET_BYTES)),
            headroom_bytes: levels().find_map(|l| l.headroom_bytes).unwrap_or(self.buffer.headroom_bytes),
        }
    }

    /// The frame caps for a switch of `frame_capacity` frames. By default the frames the
    /// AF_XDP rings do not take are shared: half among the ports' lossy queues, a quarter
    /// for the slowpath, and the last quarter left for lossless frames (bounded by their
    /// bytes, XOFF and headroom), flood copies and pause frames. A pool no larger than
    /// the rings would be has none (a test's), and is shared whole.
    pub fn frame_caps(&self, frame_capacity: u32, rx_sockets: usize) -> FrameCaps {
        let ports = self.ports.len().max(1) as u32;
        let rings = self.dataplane.ring_frames(self.ports.len(), rx_sockets);
        let spare = if frame_capacity > rings { frame_capacity - rings } else { frame_capacity };
        FrameCaps {
            lossy_port: self.buffer.lossy_port_frames.unwrap_or((spare / 2 / ports).max(1)),
            slowpath: self.buffer.slowpath_frames.unwrap_or((spare / 4).max(1)),
        }
    }

    /// The DCFIT switch id: configured, or a stable hash of the name and the ports'
    /// addresses. The addresses make it differ between switches left with the default
    /// name (their interfaces' MACs differ), and stay the same across restarts.
    pub fn switch_id(&self) -> u32 {
        self.switch_id.unwrap_or_else(|| {
            // FNV-1a: stable across runs and builds, unlike the std hasher.
            let macs = self.ports.iter().filter_map(|p| p.mac).flat_map(|m| m.0);
            self.name.bytes().chain(macs).fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
        })
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.name.is_empty() || self.name.contains('/') {
            return Err(invalid("name", "must be non-empty and contain no '/'"));
        }
        if self.ports.is_empty() {
            return Err(invalid("port", "at least one [[port]] is needed"));
        }
        if self.ports.len() > 64 {
            return Err(invalid("port", "at most 64 ports are supported"));
        }
        for (i, p) in self.ports.iter().enumerate() {
            let field = |f: &str| format!("port[{i}].{f}");
            if p.iface.is_empty() {
                return Err(invalid(field("iface"), "must not be empty"));
            }
            if !(60..=9216).contains(&p.max_frame) {
                return Err(invalid(field("max_frame"), "must be between 60 and 9216 bytes"));
            }
            if !(p.cable_m.is_finite() && (0.0..=MAX_CABLE_M).contains(&p.cable_m)) {
                return Err(invalid(field("cable_m"), format!("must be a length in metres, 0..{MAX_CABLE_M}")));
            }
            if !(MIN_PORT_SPEED..=MAX_PORT_SPEED).contains(&p.speed()) {
                return Err(invalid(
                    field("speed"),
                    format!("{} is not a port speed: {MIN_PORT_SPEED}..{MAX_PORT_SPEED}", p.speed()),
                ));
            }
            let pause = p.speed().quanta_duration(self.pfc.quanta);
            if let Some(us) = self.pfc.refresh_us.filter(|&us| std::time::Duration::from_micros(us) >= pause) {
                return Err(invalid(
                    "pfc.refresh_us",
                    format!(
                        "{us} µs is not shorter than a pause of {} quanta at {}'s {} ({:.1} µs): the pause would lapse before its refresh",
                        self.pfc.quanta,
                        self.port_name(i),
                        p.speed(),
                        pause.as_secs_f64() * 1e6
                    ),
                ));
            }
            if p.headroom_bytes.is_some_and(|h| h > MAX_BUFFER_BYTES) {
                return Err(invalid(field("headroom_bytes"), format!("at most {MAX_BUFFER_BYTES}")));
            }
            if p.xoff_bytes.is_some_and(|x| x == 0 || x > MAX_BUFFER_BYTES) {
                return Err(invalid(field("xoff_bytes"), format!("must be 1..{MAX_BUFFER_BYTES}")));
            }
            if let (Some(xoff), XonRule::Static(xon)) = (p.xoff_bytes, self.buffer.xon_rule()) {
                if xon > xoff {
                    return Err(invalid(field("xoff_bytes"), format!("below the static XON ({xon})")));
                }
            }
            if let Some(mac) = p.mac {
                if mac.is_multicast() || mac.is_zero() {
                    return Err(invalid(field("mac"), "must be a unicast, non-zero address"));
                }
            }
            if let Scheduler::Drr { weights } = &p.scheduler {
                if weights.iter().any(|&w| w > 1_000_000) {
                    return Err(invalid(field("scheduler.drr.weights"), "weights must be at most 1000000"));
                }
            }
            for (j, q) in self.ports.iter().enumerate().skip(i + 1) {
                if q.iface == p.iface {
                    return Err(invalid(format!("port[{j}].iface"), format!("{} is already port[{i}]", q.iface)));
                }
                if self.port_name(i) == self.port_name(j) {
                    return Err(invalid(
                        format!("port[{j}].name"),
                        format!("{} is already port[{i}]", self.port_name(j)),
                    ));
                }
            }
        }
        let b = &self.buffer;
        if b.xoff_bytes.is_some() && b.xoff_alpha.is_some() {
            return Err(invalid("buffer.xoff_alpha", "give either xoff_bytes or xoff_alpha, not both"));
        }
        if b.xon_bytes.is_some() && b.xon_offset_bytes.is_some() {
            return Err(invalid("buffer.xon_bytes", "give either xon_bytes or xon_offset_bytes, not both"));
        }
        if let Some(alpha) = b.xoff_alpha {
            if !(alpha.is_finite() && alpha > 0.0 && alpha <= 64.0) {
                return Err(invalid("buffer.xoff_alpha", "must be above 0 and at most 64"));
            }
        }
        if let (XoffRule::Static(xoff), XonRule::Static(xon)) = (b.xoff_rule(), b.xon_rule()) {
            if xon > xoff {
                return Err(invalid("buffer.xon_bytes", format!("XON ({xon}) must not exceed XOFF ({xoff})")));
            }
        }
        if b.shared_bytes == 0 || b.shared_bytes > MAX_BUFFER_BYTES {
            return Err(invalid("buffer.shared_bytes", format!("must be 1..{MAX_BUFFER_BYTES}")));
        }
        if b.xoff_bytes.is_some_and(|x| x == 0 || x > b.shared_bytes) {
            return Err(invalid("buffer.xoff_bytes", "must be above zero and at most shared_bytes"));
        }
        if b.xon_bytes.is_some() && b.xoff_alpha.is_some() {
            return Err(invalid(
                "buffer.xon_bytes",
                "a static XON cannot go with a dynamic XOFF (it could lie above it); use xon_offset_bytes",
            ));
        }
        if let (Some(offset), XoffRule::Static(xoff)) = (b.xon_offset_bytes, b.xoff_rule()) {
            if offset >= xoff {
                return Err(invalid(
                    "buffer.xon_offset_bytes",
                    format!("{offset} leaves no XON below XOFF ({xoff}): the group would never resume"),
                ));
            }
        }
        if b.headroom_bytes > MAX_BUFFER_BYTES {
            return Err(invalid("buffer.headroom_bytes", format!("at most {MAX_BUFFER_BYTES}")));
        }
        if b.lossy_queue_bytes == 0 || b.lossy_queue_bytes > MAX_BUFFER_BYTES {
            return Err(invalid("buffer.lossy_queue_bytes", format!("must be 1..{MAX_BUFFER_BYTES}")));
        }
        if b.lossy_port_frames == Some(0) {
            return Err(invalid("buffer.lossy_port_frames", "must be above zero"));
        }
        if b.slowpath_frames == Some(0) {
            return Err(invalid("buffer.slowpath_frames", "must be above zero"));
        }
        for (i, &p) in self.lossless_priorities().iter().enumerate() {
            if usize::from(p) >= PRIORITIES {
                return Err(invalid(format!("pfc.lossless[{i}]"), format!("priority {p} is not 0..7")));
            }
        }
        check_profiles("buffer.priority", &b.priority)?;
        for (i, p) in self.ports.iter().enumerate() {
            check_profiles(format!("port[{i}].priority"), &p.priority)?;
        }
        // Rules from different levels must still make sense together.
        for i in 0..self.ports.len() {
            for &prio in self.lossless_priorities() {
                let field = format!("buffer profile of port {} priority {prio}", self.port_name(i));
                check_group(field, &self.group_profile(i, prio), b.shared_bytes)?;
            }
        }
        if self.pfc.quanta == 0 {
            return Err(invalid("pfc.quanta", "a pause of zero quanta is a resume; use 1..65535"));
        }
        if self.pfc.refresh_us == Some(0) {
            return Err(invalid("pfc.refresh_us", "must be above zero"));
        }
        for (dscp, &prio) in &self.classify.dscp {
            let field = format!("classify.dscp.{dscp}");
            match dscp.parse::<u8>() {
                Ok(d) if d < 64 => {}
                _ => return Err(invalid(field, "DSCP must be 0..63")),
            }
            if usize::from(prio) >= PRIORITIES {
                return Err(invalid(field, format!("priority {prio} is not 0..7")));
            }
        }
        if usize::from(self.classify.default_priority) >= PRIORITIES {
            return Err(invalid("classify.default_priority", "must be 0..7"));
        }
        let d = &self.dataplane;
        if d.umem_frames.is_some_and(|f| !(256..=1 << 20).contains(&f)) {
            return Err(invalid("dataplane.umem_frames", "must be 256..1048576"));
        }
        if let Some(fs) = d.frame_size {
            if fs != 2048 && fs != 4096 {
                return Err(invalid("dataplane.frame_size", "must be 2048 or 4096"));
            }
        }
        if !d.ring_size.is_power_of_two() || !(64..=16384).contains(&d.ring_size) {
            return Err(invalid("dataplane.ring_size", "must be a power of two from 64 to 16384"));
        }
        if !(1..=256).contains(&d.batch) {
            return Err(invalid("dataplane.batch", "must be 1..256"));
        }
        if !(1..=MAX_FDB_ENTRIES).contains(&self.fdb.max_entries) {
            // The table is reserved up front: a huge one is memory nobody asked for.
            return Err(invalid("fdb.max_entries", format!("must be 1..{MAX_FDB_ENTRIES}")));
        }
        if !(1..=MAX_AGING_S).contains(&self.fdb.aging_s) {
            return Err(invalid(
                "fdb.aging_s",
                format!("must be 1..{MAX_AGING_S} (0 would forget every address at once)"),
            ));
        }
        if d.queues.is_some_and(|q| !(1..=1024).contains(&q)) {
            return Err(invalid("dataplane.queues", "must be 1..1024"));
        }
        if d.busy_poll_us > 1_000_000 {
            return Err(invalid("dataplane.busy_poll_us", "at most 1000000"));
        }
        for (i, e) in self.fdb_entries.iter().enumerate() {
            if self.port_index(&e.port).is_none() {
                return Err(invalid(format!("fdb_entry[{i}].port"), format!("no port called {:?}", e.port)));
            }
            if e.mac.is_multicast() || e.mac.is_zero() {
                return Err(invalid(format!("fdb_entry[{i}].mac"), "must be a unicast, non-zero address"));
            }
        }
        if self.dcfit.drop_ms == 0 || self.dcfit.drop_ms > 60_000 {
            return Err(invalid("dcfit.drop_ms", "must be 1..60000"));
        }
        check_watchdog("pfcwd", &self.pfcwd)?;
        for (i, p) in self.ports.iter().enumerate() {
            check_watchdog(format!("port[{i}].pfcwd"), &self.pfcwd.with(p.pfcwd.as_ref()))?;
        }
        if let Some(t) = &self.tagger {
            if t.table.is_empty() {
                return Err(invalid("tagger.table", "must name a table file"));
            }
        }
        Ok(())
    }
}

/// One level's profiles on their own: keys that are priorities, one form of each rule,
/// sizes in range.
fn check_profiles(prefix: impl fmt::Display, profiles: &BTreeMap<String, BufferProfile>) -> Result<(), ConfigError> {
    for (key, p) in profiles {
        let field = |f: &str| format!("{prefix}.{key}.{f}");
        if !key.parse::<u8>().is_ok_and(|prio| usize::from(prio) < PRIORITIES) {
            return Err(invalid(format!("{prefix}.{key}"), "profiles are keyed by priority, 0..7"));
        }
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
fn check_group(field: String, g: &GroupProfile, shared_bytes: u64) -> Result<(), ConfigError> {
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

impl DataplaneConfig {
    /// The UMEM size to use for `ports` ports.
    /// The UMEM size for `ports` ports with `rx_sockets` sockets in all (one per bound
    /// rx queue): a fill ring's worth per socket, a tx ring's worth per port (ports send
    /// on their first queue), and 16384 for the frames the switch holds.
    pub fn umem_frames_for(&self, ports: usize, rx_sockets: usize) -> u32 {
        self.umem_frames.unwrap_or(self.ring_frames(ports, rx_sockets) + 16384)
    }

    /// Frames the AF_XDP rings take: see [`DataplaneConfig::umem_frames_for`].
    pub fn ring_frames(&self, ports: usize, rx_sockets: usize) -> u32 {
        (ports + rx_sockets) as u32 * self.ring_size
    }
}

impl PortConfig {
    pub fn new(iface: &str) -> PortConfig {
        PortConfig {
            name: None,
            iface: iface.to_string(),
            mac: None,
            speed: None,
            cable_m: default_cable_m(),
            pause_mode: PauseMode::default(),
            role: PortRole::default(),
            flood: true,
            max_frame: DEFAULT_MAX_FRAME,
            headroom_bytes: None,
            xoff_bytes: None,
            priority: BTreeMap::new(),
            scheduler: Scheduler::default(),
            pfcwd: None,
        }
    }

    /// The line rate: the configured one, else [`DEFAULT_PORT_SPEED`] (the dataplane
    /// fills in the NIC's own before the engine starts, where it has one).
    pub fn speed(&self) -> Speed {
        self.speed.unwrap_or(DEFAULT_PORT_SPEED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_caps_share_what_the_rings_leave_unless_given() {
        let mut c = Config::for_interfaces(&["a", "b"]);
        let ring = c.dataplane.ring_size;
        assert_eq!(ring, 8192);
        let umem = c.dataplane.umem_frames_for(2, 2);
        assert_eq!(umem, 2 * ring * 2 + 16384);
        assert_eq!(c.frame_caps(umem, 2), FrameCaps { lossy_port: 4096, slowpath: 4096 });
        // Four rx queues per port: their fill rings take more frames, not the spare.
        let umem4 = c.dataplane.umem_frames_for(2, 8);
        assert_eq!(umem4, 10 * ring + 16384);
        assert_eq!(c.frame_caps(umem4, 8), FrameCaps { lossy_port: 4096, slowpath: 4096 });
        c.buffer.lossy_port_frames = Some(10);
        c.buffer.slowpath_frames = Some(20);
        assert_eq!(c.frame_caps(umem, 2), FrameCaps { lossy_port: 10, slowpath: 20 });
        c.buffer.slowpath_frames = Some(0);
        assert!(c.validate().unwrap_err().to_string().contains("buffer.slowpath_frames"));
    }

    #[test]
    fn minimal_file_gets_defaults() {
        let c = Config::from_toml("[[port]]\niface = \"a\"\n[[port]]\niface = \"b\"\n").unwrap();
        assert_eq!(c.ports.len(), 2);
        assert_eq!((c.ports[0].speed, c.ports[0].speed()), (None, Speed::gbps(10)));
        assert_eq!(c.lossless(), Priorities::from_bits(0b1_1000));
        assert_eq!(c.classify.dscp_table()[3], 3);
        assert_eq!(c.classify.dscp_table()[46], 0);
        assert_eq!(c.port_name(1), "b");
        assert_eq!(c, Config::for_interfaces(&["a", "b"]));
    }

    #[test]
    fn full_file_parses() {
        let c = Config::from_toml(
            r#"
            name = "leaf1"
            switch_id = 11
            [buffer]
            shared_bytes = 1000000
            xoff_alpha = 0.5
            xon_offset_bytes = 1000
            headroom_bytes = 20000
            [pfc]
            lossless = [3]
            quanta = 1000
            refresh_us = 10
            [classify]
            dscp = { 26 = 3, 46 = 5 }
            default_priority = 1
            [dcfit]
            resolution = "drop"
            drop_ms = 50
            [[fdb_entry]]
            mac = "02:00:00:00:00:09"
            port = "up"
            [[port]]
            name = "up"
            iface = "veth1"
            mac = "02:00:00:00:00:01"
            speed = "25G"
            cable_m = 100
            pause_mode = "global-pause"
            scheduler = { drr = { weights = [1, 1, 1, 2, 2, 0, 0, 0] } }
            "#,
        )
        .unwrap();
        assert_eq!(c.buffer.xoff_rule(), XoffRule::Dynamic(0.5));
        assert_eq!(c.buffer.xon_rule(), XonRule::BelowXoff(1000));
        assert_eq!(c.classify.dscp_table()[26], 3);
        assert_eq!(c.classify.dscp_table()[0], 1);
        assert_eq!(c.ports[0].pause_mode, PauseMode::GlobalPause);
        assert_eq!(c.switch_id(), 11);
        assert_eq!(c.port_name(0), "up");
        assert_eq!(c.port_index("veth1"), Some(0));
        assert_eq!(c.dcfit.resolution, DeadlockResolution::Drop);
        assert_eq!(c.fdb_entries[0].port, "up");
        // What we print we can read back.
        assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("[[port]]\niface = \"a\"\nspeed = \"10X\"\n", "speed"),
            ("[[port]]\niface = \"a\"\nspeeed = \"10G\"\n", "speeed"),
            ("[[port]]\n", "iface"),
            ("", "port"),
            ("[pfc]\nlossless = [9]\n[[port]]\niface = \"a\"\n", "pfc.lossless[0]"),
            ("[classify]\ndscp = { 64 = 1 }\n[[port]]\niface = \"a\"\n", "classify.dscp.64"),
            ("[buffer]\nxoff_bytes = 1\nxoff_alpha = 1.0\n[[port]]\niface = \"a\"\n", "buffer.xoff_alpha"),
            ("[buffer]\nxoff_bytes = 100\nxon_bytes = 200\n[[port]]\niface = \"a\"\n", "buffer.xon_bytes"),
            ("[[port]]\niface = \"a\"\n[[port]]\niface = \"a\"\n", "port[1].iface"),
            ("[[port]]\niface = \"a\"\nmac = \"01:00:00:00:00:01\"\n", "port[0].mac"),
            ("[pfc]\nquanta = 0\n[[port]]\niface = \"a\"\n", "pfc.quanta"),
            ("[dataplane]\nring_size = 1000\n[[port]]\niface = \"a\"\n", "dataplane.ring_size"),
            (
                "[[port]]\niface = \"a\"\n[[fdb_entry]]\nmac = \"02:00:00:00:00:01\"\nport = \"b\"\n",
                "fdb_entry[0].port",
            ),
            ("[dcfit]\nresolution = \"reboot\"\n[[port]]\niface = \"a\"\n", "resolution"),
            ("[[port]]\niface = \"a\"\nspeed = \"1k\"\n", "port[0].speed"),
            ("[[port]]\niface = \"a\"\nspeed = \"2T\"\n", "port[0].speed"),
            ("[pfc]\nrefresh_us = 4000\n[[port]]\niface = \"a\"\n", "pfc.refresh_us"),
            ("[fdb]\naging_s = 0\n[[port]]\niface = \"a\"\n", "fdb.aging_s"),
            ("[fdb]\nmax_entries = 100000000\n[[port]]\niface = \"a\"\n", "fdb.max_entries"),
            ("[buffer]\nxoff_alpha = 1.0\nxon_bytes = 1000\n[[port]]\niface = \"a\"\n", "buffer.xon_bytes"),
            ("[buffer]\nxoff_bytes = 1000\nxon_offset_bytes = 1000\n[[port]]\niface = \"a\"\n", "xon_offset_bytes"),
            ("[buffer]\nxoff_bytes = 0\n[[port]]\niface = \"a\"\n", "buffer.xoff_bytes"),
            ("[buffer]\nlossy_queue_bytes = 0\n[[port]]\niface = \"a\"\n", "buffer.lossy_queue_bytes"),
            ("[buffer]\nshared_bytes = 100000000000\n[[port]]\niface = \"a\"\n", "buffer.shared_bytes"),
            ("[[port]]\niface = \"a\"\ncable_m = 1e9\n", "port[0].cable_m"),
            ("[[port]]\niface = \"a\"\nxoff_bytes = 0\n", "port[0].xoff_bytes"),
        ];
        for (text, field) in cases {
            let err = Config::from_toml(text).unwrap_err().to_string();
            assert!(err.contains(field), "{text:?}: {err}");
        }
    }

    #[test]
    fn switch_id_is_stable() {
        let mut c = Config::for_interfaces(&["a"]);
        c.name = "sw1".into();
        assert_eq!(c.switch_id(), Config { name: "sw1".into(), ..c.clone() }.switch_id());
        c.name = "sw2".into();
        assert_ne!(c.switch_id(), Config { name: "sw1".into(), ..c.clone() }.switch_id());
    }

    #[test]
    fn switches_left_with_the_default_name_get_different_ids_from_their_addresses() {
        let mut a = Config::for_interfaces(&["eth1", "eth2"]);
        let mut b = a.clone();
        a.ports[0].mac = Some(MacAddr([2, 0, 0, 0, 0, 1]));
        b.ports[0].mac = Some(MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(a.name, b.name);
        assert_ne!(a.switch_id(), b.switch_id());
        assert_eq!(a.switch_id(), a.clone().switch_id(), "and each keeps its own");
        b.switch_id = Some(7);
        assert_eq!(b.switch_id(), 7);
    }

    const PROFILES: &str = r#"
        [buffer]
        xoff_bytes = 65536
        xon_offset_bytes = 16384
        headroom_bytes = 49152

        [buffer.priority.4]
        xoff_alpha = 0.5
        headroom_bytes = 98304

        [[port]]
        iface = "a"
        headroom_bytes = 40000

        [[port]]
        iface = "b"
        [port.priority.3]
        xoff_bytes = 20000
        xon_bytes = 10000
    "#;

    #[test]
    fn a_group_takes_each_rule_from_the_most_specific_level_that_sets_it() {
        let c = Config::from_toml(PROFILES).unwrap();
        let (static_, offset) = (XoffRule::Static(65536), XonRule::BelowXoff(16384));
        // Port a, priority 3: the buffer's rules, the port's own headroom.
        assert_eq!(c.group_profile(0, 3), GroupProfile { xoff: static_, xon: offset, headroom_bytes: 40000 });
        // Priority 4's profile: a dynamic XOFF everywhere; its headroom is overridden again
        // by port a's, not by port b, which sets none.
        let dynamic = XoffRule::Dynamic(0.5);
        assert_eq!(c.group_profile(0, 4), GroupProfile { xoff: dynamic, xon: offset, headroom_bytes: 40000 });
        assert_eq!(c.group_profile(1, 4), GroupProfile { xoff: dynamic, xon: offset, headroom_bytes: 98304 });
        // Port b's own profile for priority 3 replaces both threshold rules, and keeps
        // the buffer's headroom.
        let own = GroupProfile { xoff: XoffRule::Static(20000), xon: XonRule::Static(10000), headroom_bytes: 49152 };
        assert_eq!(c.group_profile(1, 3), own);
        // With nothing configured: the defaults.
        let d = Config::for_interfaces(&["a"]).group_profile(0, 3);
        let defaults = GroupProfile {
            xoff: XoffRule::Static(DEFAULT_XOFF_BYTES),
            xon: XonRule::BelowXoff(DEFAULT_XON_OFFSET_BYTES),
            headroom_bytes: BufferConfig::default().headroom_bytes,
        };
        assert_eq!(d, defaults);
        // What we print we can read back.
        assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn profiles_are_checked_alone_and_as_resolved() {
        let base = "[[port]]\niface = \"a\"\n";
        let cases = [
            ("[buffer.priority.8]\nxoff_bytes = 1000\n", "buffer.priority.8"),
            ("[buffer.priority.x]\nxoff_bytes = 1000\n", "buffer.priority.x"),
            ("[buffer.priority.3]\nxoff_bytes = 1000\nxoff_alpha = 1.0\n", "buffer.priority.3.xoff_alpha"),
            ("[buffer.priority.3]\nxon_bytes = 1\nxon_offset_bytes = 1\n", "buffer.priority.3.xon_bytes"),
            ("[buffer.priority.3]\nxoff_alpha = 100.0\n", "buffer.priority.3.xoff_alpha"),
            ("[buffer.priority.3]\nheadroom_bytes = 2000000000\n", "buffer.priority.3.headroom_bytes"),
            ("[buffer.priority.3]\nsize = 1\n", "size"),
            // Each level is fine alone; together the XON lies above the XOFF.
            ("[buffer]\nxon_bytes = 30000\n[buffer.priority.3]\nxoff_bytes = 20000\n", "port a priority 3"),
            // A dynamic XOFF for priority 4 under the buffer's static XON.
            ("[buffer]\nxon_bytes = 3000\n[buffer.priority.4]\nxoff_alpha = 1.0\n", "port a priority 4"),
            ("[buffer.priority.3]\nxoff_bytes = 10000\n", "port a priority 3"),
            ("[buffer.priority.3]\nxoff_bytes = 8000000\n", "exceeds the shared buffer"),
        ];
        for (text, field) in cases {
            let err = Config::from_toml(&format!("{text}{base}")).unwrap_err().to_string();
            assert!(err.contains(field), "{text:?}: {err}");
        }
        let per_port = format!("{base}[port.priority.3]\nxoff_bytes = 1000\nxoff_alpha = 1.0\n");
        let err = Config::from_toml(&per_port).unwrap_err().to_string();
        assert!(err.contains("port[0].priority.3.xoff_alpha"), "{err}");
    }
}
