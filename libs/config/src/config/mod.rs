//! The switch configuration: a TOML file, or the same structure built from command-line flags.
//!
//! Every field has a default except the ports' interfaces, so `[[port]] iface = "eth1"` twice
//! is a working switch. Errors name the offending field.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::mac::MacAddr;
use crate::pool::PoolSize;
use crate::ports::MAX_PORTS;
use crate::priorities::{Priorities, Priority};
use crate::speed::Speed;
use crate::watchdog::WatchdogConfig;

mod buffer;
mod port;
pub mod sonic;
mod wred;

pub use buffer::*;
use buffer::{check_group, check_profiles};
pub use port::*;
pub use wred::*;

/// A switch configuration: the TOML `pfcswitch run --config` reads, validated by
/// [`Config::validate`].
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Names the switch in logs, in its control socket path and in DCFIT messages.
    #[serde(default = "default_name")]
    pub name: String,
    /// The id carried in DCFIT checking messages; derived from `name` when absent.
    #[serde(default)]
    pub switch_id: Option<u32>,
    /// The shared buffer (`[buffer]`).
    #[serde(default)]
    pub buffer: BufferConfig,
    /// Lossless priorities and pause timing (`[pfc]`).
    #[serde(default)]
    pub pfc: PfcConfig,
    /// How frames get their priority (`[classify]`).
    #[serde(default)]
    pub classify: ClassifyConfig,
    /// Learning and aging (`[fdb]`).
    #[serde(default)]
    pub fdb: FdbConfig,
    /// Deadlock detection (`[dcfit]`).
    #[serde(default)]
    pub dcfit: DcfitConfig,
    /// The PFC watchdog (see [`crate::watchdog`]); a port's `pfcwd` overrides it.
    #[serde(default)]
    pub pfcwd: WatchdogConfig,
    /// A Tagger table to apply (deadlock prevention); see `pfcswitch_core::tagging`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tagger: Option<TaggerConfig>,
    /// WRED and ECN marking on the egress queues (`[wred]`); a port's `wred` overrides it.
    #[serde(default)]
    pub wred: WredConfig,
    /// The ports, in order: a port's index here is its [`crate::ports::PortId`].
    #[serde(rename = "port", default)]
    pub ports: Vec<PortConfig>,
    /// Static forwarding entries: never learned over, never aged (rings and Clos
    /// topologies need them instead of flooding).
    #[serde(rename = "fdb_entry", default)]
    pub fdb_entries: Vec<StaticFdbEntry>,
    /// Static multipath entries: a station reached by any of several ports, one chosen
    /// per flow (ECMP towards a fabric's next hops, or the links of a LAG).
    #[serde(rename = "fdb_group", default, skip_serializing_if = "Vec::is_empty")]
    pub fdb_groups: Vec<StaticFdbGroup>,
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

/// A `[[fdb_entry]]`: a station pinned to a port.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticFdbEntry {
    /// The station's address.
    pub mac: MacAddr,
    /// The port's name (or interface).
    pub port: String,
}

/// A `[[fdb_group]]`: a station reached by any of `ports`, one chosen per flow by a hash
/// of the flow's key and `fdb.ecmp_seed` (`pfcswitch_core::ecmp`).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StaticFdbGroup {
    /// The station's address.
    pub mac: MacAddr,
    /// The ports' names (or interfaces), at least one.
    pub ports: Vec<String>,
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

/// The `[dcfit]` table.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DcfitConfig {
    /// Carry checking messages in pause frames and detect cycles of pauses.
    pub enabled: bool,
    /// What a detected deadlock leads to.
    pub resolution: DeadlockResolution,
    /// How long the detecting port's lossless queue is dropped with `resolution = "drop"`.
    pub drop_ms: u64,
}

impl Default for DcfitConfig {
    fn default() -> DcfitConfig {
        DcfitConfig { enabled: true, resolution: DeadlockResolution::Report, drop_ms: 200 }
    }
}

/// The `[pfc]` table.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PfcConfig {
    /// Priorities that are lossless: they send and obey PFC. The others are lossy.
    /// Default: 3 and 4, or with a Tagger table the priorities its rules use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lossless: Option<Vec<Priority>>,
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

/// The `[classify]` table.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifyConfig {
    /// DSCP → priority for untagged IP frames, e.g. `dscp = { 3 = 3, 4 = 4, 46 = 5 }`.
    pub dscp: BTreeMap<String, Priority>,
    /// Priority of frames with neither a VLAN tag nor a mapped DSCP.
    pub default_priority: Priority,
}

impl Default for ClassifyConfig {
    fn default() -> ClassifyConfig {
        ClassifyConfig {
            dscp: BTreeMap::from([("3".into(), Priority::new(3)), ("4".into(), Priority::new(4))]),
            default_priority: Priority::new(0),
        }
    }
}

impl ClassifyConfig {
    /// The DSCP map as a table; call after [`Config::validate`].
    pub fn dscp_table(&self) -> [Priority; 64] {
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

/// The `[fdb]` table.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FdbConfig {
    /// Learned entries older than this are forgotten.
    pub aging_s: u64,
    /// Most learned entries; beyond it new addresses are flooded, not learned.
    pub max_entries: usize,
    /// Most stations one port learns (port security's limit): a host that sends from
    /// ever new source addresses then cannot fill the table for every other port.
    /// Absent: no limit but `max_entries`, as switches ship.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_per_port: Option<u32>,
    /// The seed of the hash that picks a multipath entry's port per flow: switches of
    /// one fabric want different seeds, or every tier splits flows alike.
    pub ecmp_seed: u64,
    /// How a multipath entry's port is picked: per flow by the hash (ECMP, a LAG), per
    /// frame by the members' queues (adaptive routing), or per flowlet.
    pub multipath: Multipath,
    /// Under `multipath = "flowlet"`: a flow's frame after a pause longer than this
    /// starts a new flowlet, which may take another member.
    pub flowlet_gap_us: u64,
}

/// How a `[[fdb_group]]`'s member is picked for a frame.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Multipath {
    /// Per flow, by a hash of its key and `ecmp_seed`: a flow's frames keep their order.
    #[default]
    Hash,
    /// Per frame: the member whose queue for the frame's priority holds the fewest bytes,
    /// ties taken in turn (a quiet group is sprayed round robin), as a switch's adaptive
    /// routing or packet spraying does. Every member carries traffic; a flow's frames
    /// may arrive out of order.
    Adaptive,
    /// Per flowlet: the first frame of a flow, and the first after a pause longer than
    /// `flowlet_gap_us`, takes the member the adaptive rule picks, and the frames after
    /// it follow while they come closer together (a flow keeps its order where the pause
    /// outlasts the paths' difference in delay), as a switch's dynamic load balancing
    /// in flowlet mode does.
    Flowlet,
}

impl Default for FdbConfig {
    fn default() -> FdbConfig {
        FdbConfig {
            aging_s: 300,
            max_entries: 16384,
            max_per_port: None,
            ecmp_seed: 0,
            multipath: Multipath::Hash,
            flowlet_gap_us: 10,
        }
    }
}

fn default_name() -> String {
    "pfcswitch".into()
}

/// A static entry's station: a unicast, non-zero address (an entry for a group or for
/// nobody would steer frames no station sent).
fn check_station(field: &str, mac: MacAddr) -> Result<(), ConfigError> {
    if mac.is_multicast() || mac.is_zero() {
        return Err(invalid(field, "must be a unicast, non-zero address"));
    }
    Ok(())
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
    /// The text is not valid TOML for a configuration.
    Parse(String),
    #[error("{field}: {problem}")]
    /// A field holds a value the switch cannot run with.
    Invalid {
        /// The field, as written in the file (`port[1].speed`).
        field: String,
        /// What is wrong with it.
        problem: String,
    },
}

impl ConfigError {
    /// `field` (as written in the file) holds a value the switch cannot run with.
    pub fn invalid(field: impl fmt::Display, problem: impl fmt::Display) -> ConfigError {
        ConfigError::Invalid { field: field.to_string(), problem: problem.to_string() }
    }
}

fn invalid(field: impl fmt::Display, problem: impl fmt::Display) -> ConfigError {
    ConfigError::invalid(field, problem)
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
            dcfit: DcfitConfig::default(),
            pfcwd: WatchdogConfig::default(),
            tagger: None,
            wred: WredConfig::default(),
            ports: ifaces.iter().map(|i| PortConfig::new(i.as_ref())).collect(),
            fdb_entries: Vec::new(),
            fdb_groups: Vec::new(),
        }
    }

    /// Parses and validates a TOML configuration.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// The configuration as TOML (what `check-config` prints).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a Config always serializes")
    }

    /// The name of port `index`: its `name`, or its interface.
    pub fn port_name(&self, index: usize) -> &str {
        let p = &self.ports[index];
        p.name.as_deref().unwrap_or(&p.iface)
    }

    /// The index of the port called `name` (its name, or its interface).
    pub fn port_index(&self, name: &str) -> Option<usize> {
        (0..self.ports.len()).find(|&i| self.port_name(i) == name || self.ports[i].iface == name)
    }

    /// The lossless priorities: as configured, or 3 and 4.
    pub fn lossless_priorities(&self) -> &[Priority] {
        self.pfc.lossless.as_deref().unwrap_or(&DEFAULT_LOSSLESS)
    }

    /// The lossless priorities: `pfc.lossless`, or the defaults.
    pub fn lossless(&self) -> Priorities {
        self.lossless_priorities().iter().copied().collect()
    }

    /// The buffer profile of `port`'s group for `prio`. Each rule (XOFF, XON, headroom)
    /// comes from the most specific level that sets it: the port's own profile for the
    /// priority, then the port's `xoff_bytes`/`headroom_bytes`, then
    /// `[buffer.priority.N]`, then `[buffer]`, then the defaults.
    pub fn group_profile(&self, port: usize, prio: Priority) -> GroupProfile {
        let p = &self.ports[port];
        let port_wide =
            BufferProfile { xoff_bytes: p.xoff_bytes, headroom_bytes: p.headroom_bytes, ..Default::default() };
        let wide = self.buffer.wide_profile();
        let levels = [p.priority.get(prio), Some(&port_wide), self.buffer.priority.get(prio), Some(&wide)];
        let levels = || levels.iter().flatten();
        GroupProfile {
            xoff: levels().find_map(|l| l.xoff()).unwrap_or(XoffRule::Static(DEFAULT_XOFF_BYTES)),
            xon: levels().find_map(|l| l.xon()).unwrap_or(XonRule::BelowXoff(DEFAULT_XON_OFFSET_BYTES)),
            headroom_bytes: levels().find_map(|l| l.headroom_bytes).unwrap_or(self.buffer.headroom_bytes),
        }
    }

    /// The WRED profile of `port`'s egress queue for `prio`. Each setting comes from the
    /// most specific level that gives it: `[port.wred.priority.N]`, then
    /// `[wred.priority.N]`, then the defaults ([`WredProfile::default_for`]: marking on
    /// lossless queues, nothing on lossy ones).
    pub fn wred_profile(&self, port: usize, prio: Priority) -> WredProfile {
        let wide = self.wred_wide(prio);
        self.ports[port].wred.priority.get(prio).map_or(wide, |s| wide.with(s))
    }

    /// `[wred.priority.N]` for every priority, each setting given: what the switch-wide
    /// level comes to with the defaults (`check-config` prints it).
    pub fn wred_filled(&self) -> WredConfig {
        let priority = Priority::all().map(|prio| (prio, self.wred_wide(prio).settings())).collect();
        WredConfig { seed: self.wred.seed, priority }
    }

    /// Priority `prio`'s profile at the switch-wide level: `[wred.priority.N]` over the
    /// defaults.
    fn wred_wide(&self, prio: Priority) -> WredProfile {
        let base = WredProfile::default_for(self.lossless().contains(prio));
        self.wred.priority.get(prio).map_or(base, |s| base.with(s))
    }

    /// The frame caps for a switch with frame pool `pool`. By default the frames the
    /// driver's rings do not take are shared: half among the ports' lossy queues, a
    /// quarter for the slowpath, and the last quarter left for lossless frames (bounded by
    /// their bytes, XOFF and headroom), flood copies and pause frames. A pool no larger
    /// than its rings (a test's) is shared whole.
    pub fn frame_caps(&self, pool: PoolSize) -> FrameCaps {
        let ports = self.ports.len().max(1) as u32;
        let (frames, rings) = (pool.frames, pool.in_rings);
        let spare = if frames > rings { frames - rings } else { frames };
        FrameCaps {
            lossy_port: self.buffer.lossy_port_frames.unwrap_or((spare / 2 / ports).max(1)),
            slowpath: self.buffer.slowpath_frames.unwrap_or((spare / 4).max(1)),
            lossless: self.buffer.lossless_frames.unwrap_or((spare / 4).max(1)),
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

    /// Checks every field and their combinations; the error names the field at fault.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.name.is_empty() || self.name.contains('/') {
            return Err(invalid("name", "must be non-empty and contain no '/'"));
        }
        if self.ports.is_empty() {
            return Err(invalid("port", "at least one [[port]] is needed"));
        }
        if self.ports.len() > MAX_PORTS {
            return Err(invalid("port", format!("at most {MAX_PORTS} ports are supported")));
        }
        for (i, p) in self.ports.iter().enumerate() {
            let field = |f: &str| format!("port[{i}].{f}");
            if p.iface.is_empty() {
                return Err(invalid(field("iface"), "must not be empty"));
            }
            if p.max_frame.is_some_and(|m| !(60..=9216).contains(&m)) {
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
        if b.lossy_queue_bytes.is_some_and(|q| q == 0 || q > MAX_BUFFER_BYTES) {
            return Err(invalid("buffer.lossy_queue_bytes", format!("must be 1..{MAX_BUFFER_BYTES}")));
        }
        if b.lossy_port_frames == Some(0) {
            return Err(invalid("buffer.lossy_port_frames", "must be above zero"));
        }
        if b.slowpath_frames == Some(0) {
            return Err(invalid("buffer.slowpath_frames", "must be above zero"));
        }
        if b.lossless_frames == Some(0) {
            return Err(invalid("buffer.lossless_frames", "must be above zero"));
        }
        check_profiles("buffer.priority", &b.priority)?;
        wred::check_settings("wred.priority", &self.wred.priority)?;
        for (i, p) in self.ports.iter().enumerate() {
            wred::check_settings(format!("port[{i}].wred.priority"), &p.wred.priority)?;
            for prio in Priority::all() {
                let field = format!("WRED profile of port {} priority {prio}", self.port_name(i));
                wred::check_profile(field, &self.wred_profile(i, prio))?;
            }
        }
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
        // A priority out of 0..7 is refused as the file is parsed (Priority's own parser).
        for dscp in self.classify.dscp.keys() {
            match dscp.parse::<u8>() {
                Ok(d) if d < 64 => {}
                _ => return Err(invalid(format!("classify.dscp.{dscp}"), "DSCP must be 0..63")),
            }
        }
        if !(1..=MAX_FDB_ENTRIES).contains(&self.fdb.max_entries) {
            // The table grows up to it: a huge bound would let a flood of source
            // addresses take memory nobody asked for.
            return Err(invalid("fdb.max_entries", format!("must be 1..{MAX_FDB_ENTRIES}")));
        }
        if self.fdb.max_per_port == Some(0) {
            return Err(invalid(
                "fdb.max_per_port",
                "must be above zero (a port that learns nothing floods every answer)",
            ));
        }
        if !(1..=MAX_AGING_S).contains(&self.fdb.aging_s) {
            return Err(invalid(
                "fdb.aging_s",
                format!("must be 1..{MAX_AGING_S} (0 would forget every address at once)"),
            ));
        }
        for (i, e) in self.fdb_entries.iter().enumerate() {
            if self.port_index(&e.port).is_none() {
                return Err(invalid(format!("fdb_entry[{i}].port"), format!("no port called {:?}", e.port)));
            }
            check_station(&format!("fdb_entry[{i}].mac"), e.mac)?;
        }
        for (i, g) in self.fdb_groups.iter().enumerate() {
            if g.ports.is_empty() {
                return Err(invalid(format!("fdb_group[{i}].ports"), "must name at least one port"));
            }
            if let Some(p) = g.ports.iter().find(|p| self.port_index(p).is_none()) {
                return Err(invalid(format!("fdb_group[{i}].ports"), format!("no port called {p:?}")));
            }
            check_station(&format!("fdb_group[{i}].mac"), g.mac)?;
            if self.fdb_entries.iter().any(|e| e.mac == g.mac) {
                return Err(invalid(format!("fdb_group[{i}].mac"), "has an fdb_entry too"));
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

#[cfg(test)]
mod tests;
