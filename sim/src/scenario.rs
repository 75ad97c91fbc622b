//! A simulation scenario: the fabric, the switches' configuration, the traffic and the
//! timed events, as a TOML file (the built-in ones are in `scenarios/`).

use std::collections::BTreeMap;
use std::path::Path;

use pfcswitch_core::speed::Speed;
use pfcswitch_core::Priority;
use serde::{Deserialize, Serialize};

/// The built-in scenarios: name, one line on what they show, the file.
pub const BUILT_IN: &[(&str, &str, &str)] = &[
    (
        "ring-deadlock",
        "three switches in a ring, each host sending two hops clockwise; a brief block closes a PFC deadlock \
         that DCFIT detects",
        include_str!("scenarios/ring-deadlock.toml"),
    ),
    (
        "ring-tagger",
        "the same ring and block with Tagger's tables: the cycle of buffers is broken, no deadlock",
        include_str!("scenarios/ring-tagger.toml"),
    ),
    (
        "headroom",
        "the pause-response test plan on one switch: a storm pauses the egress, the sender answers late, \
         the headroom absorbs it",
        include_str!("scenarios/headroom.toml"),
    ),
    (
        "fattree-storm",
        "a k=4 fat-tree under all-to-all load; one host's NIC floods pauses and the pause spreads",
        include_str!("scenarios/fattree-storm.toml"),
    ),
    (
        "fattree-bounce",
        "a k=4 fat-tree where two failed links make bounce routes close a cycle of buffers: a PFC deadlock \
         that DCFIT detects eight pauses round",
        include_str!("scenarios/fattree-bounce.toml"),
    ),
    (
        "fattree-bounce-tagger",
        "the same bounce routes with Tagger's tables: a bounced frame changes priority, no deadlock",
        include_str!("scenarios/fattree-bounce-tagger.toml"),
    ),
    (
        "dcqcn-convergence",
        "two then four DCQCN flows on one 100G bottleneck: the switch marks ECN, the receiver sends CNPs, \
         the senders share the port without a pause",
        include_str!("scenarios/dcqcn-convergence.toml"),
    ),
    (
        "incast-dcqcn",
        "an 8:1 incast of 8 MB flows on one 100G switch under DCQCN: a few pauses as the senders first cut, \
         then the queue stays in the marking band (--no-dcqcn: paused throughout)",
        include_str!("scenarios/incast-dcqcn.toml"),
    ),
    (
        "fattree-dcqcn",
        "a k=4 fat-tree under the web-search workload (Poisson arrivals, 50 % load; --load to change it) with \
         DCQCN at every host: FCT slowdown by flow size",
        include_str!("scenarios/fattree-dcqcn.toml"),
    ),
    (
        "parking-lot",
        "four senders on a chain of four switches into one receiver: each switch crossed halves a flow's \
         share of the receiver's link (PFC per input port, one FIFO per egress), the nearest finishes first",
        include_str!("scenarios/parking-lot.toml"),
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{0}")]
    Parse(String),
    #[error("{field}: {problem}")]
    Invalid { field: String, problem: String },
    #[error("no built-in scenario {0:?}; `pfctools sim --list` names them")]
    Unknown(String),
}

pub fn invalid(field: impl Into<String>, problem: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid { field: field.into(), problem: problem.into() }
}

/// How a switch with several equal-cost next hops towards a destination uses them.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// All of them, one per flow by a hash of its 5-tuple, each switch with a seed of its
    /// own (its index), as a fabric's ECMP does: a `[[fdb_group]]` per destination.
    #[default]
    Ecmp,
    /// One per destination, the destination host's index modulo their number: every
    /// switch picks alike, so a fat-tree's edge and aggregation switches agree and only
    /// one core switch in k/2 carries traffic (how the simulator routed until 2026-12).
    Single,
    /// Destination-mod-k: one per destination, the destination's index modulo their
    /// number at a switch an even number of hops from the destination's own switch (a
    /// fat-tree's edge), and its index divided by their number, modulo it, an odd number
    /// (an aggregation switch): a fat-tree's flows to distinct destinations then use
    /// distinct cores.
    Dmodk,
    /// All of them, one per frame: the one whose queue for the frame's priority holds
    /// the fewest bytes, ties taken in turn (`fdb.multipath = "adaptive"`), as a switch's
    /// adaptive routing does. Every equal-cost link carries traffic; a flow's frames may
    /// arrive out of order (each flow's report counts them).
    Adaptive,
    /// All of them, one per flowlet (`fdb.multipath = "flowlet"`): a flow's first frame,
    /// and its first after a pause longer than the switches' `fdb.flowlet_gap_us` (10 µs
    /// unless `[switch_defaults.fdb]` says otherwise), takes the next hop the adaptive
    /// rule picks, and the frames after it follow, as a switch's dynamic load balancing
    /// does in flowlet mode.
    Flowlet,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default = "default_name")]
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub topology: TopologySource,
    /// Links down from the start, as pairs of node names.
    #[serde(default)]
    pub failed_links: Vec<[String; 2]>,
    /// Every link's rate unless a `[[link]]` says otherwise.
    #[serde(default = "default_speed")]
    pub speed: Speed,
    /// Every link's MTU: a switch port takes frames up to what it lets through (jumbo
    /// fabrics run at 4200 or 9000), and a flow's frames must fit it.
    #[serde(default = "default_mtu", skip_serializing_if = "is_standard_mtu")]
    pub mtu: u32,
    /// Every cable's length (propagation 5 ns/m) unless a `[[link]]` says otherwise.
    #[serde(default = "default_cable_m")]
    pub cable_m: f64,
    /// How long the senders send (a flow's own `stop_ms` overrides).
    #[serde(default = "default_duration_ms")]
    pub duration_ms: f64,
    /// How long the run goes on after that, for queues to drain: lossless frames still in
    /// the fabric at the end are stuck.
    #[serde(default = "default_drain_ms")]
    pub drain_ms: f64,
    /// How frames find their way: host-to-host paths of node names, or (none) shortest
    /// paths, spread over equal-cost next hops as `routing` says.
    #[serde(default)]
    pub routes: Vec<Vec<String>>,
    /// How shortest routes use equal-cost next hops (without `routes`).
    #[serde(default)]
    pub routing: Routing,
    /// The fabric's ECMP seed: switch i hashes with a seed made of this and i (0, the
    /// default: switch i's seed is i). Another value places the same flows on other
    /// equal-cost paths, as another fabric's hashes would: how much a result hangs on
    /// where the hash put the flows.
    #[serde(default)]
    pub ecmp_seed: u64,
    /// Compute Tagger's tables for the routes the flows take and apply them.
    #[serde(default)]
    pub tagger: bool,
    /// The lossless priorities of Tagger's tags 1, 2, ...
    #[serde(default = "default_tagger_priorities")]
    pub tagger_priorities: Vec<Priority>,
    /// The time the slowpath (a CPU thread beside the dataplane) takes to see an event and
    /// to hand a released frame back.
    #[serde(default = "default_slowpath_delay_us")]
    pub slowpath_delay_us: f64,
    /// A SONiC CONFIG_DB document (`config_db.json`) every switch starts from, as
    /// `pfcswitch run --sonic-config` would (a path relative to the scenario file); the
    /// fabric's links still set each port's speed and cable, and `switch_defaults` and
    /// `[switch.NAME]` are merged over it.
    #[serde(default)]
    pub sonic_config: Option<String>,
    /// With `sonic_config`: the document's port names, given to each switch's ports in
    /// its order (a switch uses as many as it has ports).
    #[serde(default)]
    pub sonic_ports: Vec<String>,
    /// Merged into every switch's configuration (the TOML of `pfcswitch run`).
    #[serde(default)]
    pub switch_defaults: toml::Table,
    /// Per switch, merged after the defaults.
    #[serde(default)]
    pub switch: BTreeMap<String, toml::Table>,
    #[serde(default)]
    pub link: Vec<LinkSpec>,
    #[serde(default)]
    pub host_defaults: HostSpec,
    #[serde(default)]
    pub host: BTreeMap<String, HostSpec>,
    #[serde(default)]
    pub flow: Vec<FlowSpec>,
    /// `[[workload]]`: flows of sizes drawn from a distribution, arriving as a Poisson
    /// process at each sender.
    #[serde(default)]
    pub workload: Vec<WorkloadSpec>,
    /// `[[flow_file]]`: the flows a file lists, in htsim's or the HPCC simulator's format.
    #[serde(default)]
    pub flow_file: Vec<FlowFileSpec>,
    /// `[monitor]`: time series sampled during the run (queues, flows' rates).
    #[serde(default)]
    pub monitor: Option<MonitorSpec>,
    #[serde(default)]
    pub event: Vec<EventSpec>,
    /// `[dcqcn]`: every host runs DCQCN (roce's, as the traffic tools do): its
    /// flows' frames are ECN-capable (ECT(0)), a receiver answers CE-marked frames with
    /// CNPs on `cnp_priority`, and a sender's rate follows its reaction point. The NIC's
    /// parameter names; a table left empty takes their defaults.
    #[serde(default)]
    pub dcqcn: Option<roce::DcqcnParams>,
    /// The host queue CNPs leave by (their DSCP is 48: a switch's `classify.dscp` should
    /// map 48 to the same priority, as RoCE setups put CNPs on a high one).
    #[serde(default = "default_cnp_priority")]
    pub cnp_priority: Priority,
}

fn default_cnp_priority() -> Priority {
    Priority::new(6)
}

/// A pfctools testbed file or a `tagger` generator spec (`fattree:k=4`), or the testbed
/// tables inline.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(untagged)]
pub enum TopologySource {
    Spec(String),
    Inline(pfctestkit::topology::Topology),
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    pub a: String,
    pub b: String,
    #[serde(default)]
    pub speed: Option<Speed>,
    #[serde(default)]
    pub cable_m: Option<f64>,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// How long after a pause arrives the host's NIC stops sending (test equipment answers
    /// in a few hundred ns; the plan's "response delay").
    #[serde(default)]
    pub response_delay_ns: Option<u64>,
    /// Frames a host queues per priority before its senders wait.
    #[serde(default)]
    pub queue_frames: Option<usize>,
    /// What the host does with a frame of a flow it receives that comes before one it
    /// still waits for (default: takes it).
    #[serde(default)]
    pub out_of_order: Option<OutOfOrder>,
}

/// What a receiving host does with a flow's frame that arrives before one it still waits
/// for (adaptive routing sends a flow's frames over several paths).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum OutOfOrder {
    /// Takes it, counted as reordered: a receiver that places data where it belongs, as
    /// test equipment and NICs with out-of-order placement do.
    #[default]
    Accept,
    /// Drops it, and every frame after it until the one it waits for comes, and asks the
    /// sender once per gap to go back to that one (a RoCE NAK for a PSN sequence error);
    /// the sender sends again from there: RoCE's go-back-N, as NICs without out-of-order
    /// placement do (and htsim's RoCE receiver, which asks at every frame). No timer
    /// recovers a NAK that is lost: put such flows on a lossless priority.
    GoBackN,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// A host, or "*" for every host.
    pub from: String,
    /// A host, or "*" for a seeded random permutation (every host sends to another one,
    /// every host receives from one).
    pub to: String,
    #[serde(default = "default_priority")]
    pub priority: Priority,
    /// The DSCP the frames carry (default: the priority; under Tagger, the initial tag).
    #[serde(default)]
    pub dscp: Option<u8>,
    /// The ECN field the frames carry (RFC 3168: 0 Not-ECT, 2 ECT(0), 1 ECT(1)); default 0,
    /// or ECT(0) under `[dcqcn]`.
    #[serde(default)]
    pub ecn: Option<u8>,
    /// Frame size on the wire with FCS.
    #[serde(default = "default_size")]
    pub size: usize,
    /// Frames per second...
    #[serde(default)]
    pub rate_fps: Option<f64>,
    /// ... or percent of the sender's link rate.
    #[serde(default)]
    pub load: Option<f64>,
    #[serde(default)]
    pub start_ms: f64,
    #[serde(default)]
    pub stop_ms: Option<f64>,
    #[serde(default)]
    pub count: Option<u64>,
}

/// Flows as a workload generator makes them: at each sender, flows arrive as a Poisson
/// process whose rate makes their bytes `load` percent of the sender's link; each goes to
/// a receiver drawn at random and sends its size at line rate (or its DCQCN rate), in
/// frames of `frame` bytes and a last one with the rest. A flow's size counts its frames'
/// UDP payload; its completion time runs from its arrival to its last frame's last bit at
/// the receiver.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// `web-search`, `hadoop`, or a CDF file (lines of `bytes percent`).
    pub sizes: String,
    /// Percent of each sender's link rate, on average.
    pub load: f64,
    /// A host, or "*" for every host.
    #[serde(default = "default_all")]
    pub from: String,
    /// A host (every flow goes to it: an incast), or "*" for any host but the sender.
    #[serde(default = "default_all")]
    pub to: String,
    #[serde(default = "default_priority")]
    pub priority: Priority,
    #[serde(default)]
    pub dscp: Option<u8>,
    /// The largest frame, on the wire with FCS.
    #[serde(default = "default_workload_frame")]
    pub frame: usize,
    #[serde(default)]
    pub start_ms: f64,
    /// When arrivals stop (default: the scenario's `duration_ms`); flows already begun
    /// send to their end.
    #[serde(default)]
    pub stop_ms: Option<f64>,
}

/// Flows another simulator's workload file lists, each sending its size as a workload's
/// flow does (line rate or its DCQCN rate, frames of `frame` bytes and a last one with the
/// rest), its completion time reported with its slowdown. Hosts are numbered as those
/// simulators number them: the topology's hosts in order (a fat-tree's host i under edge
/// switch i / (k/2), as `fattree:k=K` builds it).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlowFileSpec {
    /// The file's path.
    pub path: String,
    pub format: FlowFileFormat,
    /// Every flow's priority; absent, an HPCC file's priority group, else 3.
    #[serde(default)]
    pub priority: Option<Priority>,
    #[serde(default)]
    pub dscp: Option<u8>,
    /// The largest frame, on the wire with FCS.
    #[serde(default = "default_workload_frame")]
    pub frame: usize,
}

/// Whose format a flow file is in.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum FlowFileFormat {
    /// htsim's connection matrix (`-tm`): `Nodes N`, `Connections M`, `a->b start US size BYTES`.
    Htsim,
    /// The HPCC ns-3 simulator's flow file: `N`, then `src dst pg dport size start_s`.
    Hpcc,
}

/// What the run samples every `every_us`: the bytes queued at switch egress ports, and
/// flows' rates (the bytes their receivers got in the interval, and the rate their
/// DCQCN reaction point allows).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MonitorSpec {
    #[serde(default = "default_every_us")]
    pub every_us: f64,
    /// Egress ports, "switch:port": their queued bytes, per priority that holds any.
    #[serde(default)]
    pub queues: Vec<String>,
    /// Flow ids (as the report numbers them); default: every `[[flow]]` flow.
    #[serde(default)]
    pub flows: Option<Vec<u16>>,
}

fn default_all() -> String {
    "*".into()
}
fn default_workload_frame() -> usize {
    1518
}
fn default_every_us() -> f64 {
    10.0
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    pub at_ms: f64,
    #[serde(flatten)]
    pub action: Action,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// "switch:port": its frames go to the slowpath (`ctl block`).
    Block(String),
    Unblock(String),
    /// The link between two nodes goes down (frames on it are lost) or up.
    LinkDown([String; 2]),
    LinkUp([String; 2]),
    /// A host's NIC sends pause frames.
    Storm(StormSpec),
    /// A host stops honouring the pauses it receives, or honours them again.
    IgnorePauses(String),
    HonourPauses(String),
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StormSpec {
    pub host: String,
    #[serde(default = "default_storm_priorities")]
    pub priorities: Vec<Priority>,
    #[serde(default = "default_quanta")]
    pub quanta: u16,
    /// Between two pause frames.
    pub interval_us: f64,
    pub duration_ms: f64,
}

fn default_name() -> String {
    "scenario".into()
}
fn default_mtu() -> u32 {
    1500
}
fn is_standard_mtu(mtu: &u32) -> bool {
    *mtu == 1500
}
fn default_speed() -> Speed {
    Speed::gbps(10)
}
fn default_cable_m() -> f64 {
    2.0
}
fn default_duration_ms() -> f64 {
    10.0
}
fn default_drain_ms() -> f64 {
    20.0
}
fn default_tagger_priorities() -> Vec<Priority> {
    vec![Priority::new(3), Priority::new(4)]
}
fn default_slowpath_delay_us() -> f64 {
    20.0
}
/// The priority a flow, a workload's or a flow file's flows take when nothing says.
pub(crate) fn default_priority() -> Priority {
    Priority::new(3)
}
fn default_size() -> usize {
    1000
}
fn default_storm_priorities() -> Vec<Priority> {
    vec![Priority::new(3)]
}
fn default_quanta() -> u16 {
    65535
}

impl Scenario {
    pub fn from_toml(text: &str) -> Result<Scenario, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        s.check()?;
        Ok(s)
    }

    pub fn read(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ScenarioError::Parse(format!("reading {}: {e}", path.display())))?;
        let mut s = Scenario::from_toml(&text).map_err(|e| ScenarioError::Parse(format!("{}: {e}", path.display())))?;
        // A SONiC document named relative to the scenario.
        if let Some(doc) = &s.sonic_config {
            let beside = path.parent().unwrap_or(Path::new(".")).join(doc);
            if !Path::new(doc).is_file() && beside.is_file() {
                s.sonic_config = Some(beside.display().to_string());
            }
        }
        // A topology file named relative to the scenario.
        if let TopologySource::Spec(spec) = &s.topology {
            let beside = path.parent().unwrap_or(Path::new(".")).join(spec);
            if !Path::new(spec).is_file() && beside.is_file() {
                s.topology = TopologySource::Spec(beside.display().to_string());
            }
        }
        Ok(s)
    }

    pub fn built_in(name: &str) -> Result<Scenario, ScenarioError> {
        let (_, _, text) =
            BUILT_IN.iter().find(|(n, _, _)| *n == name).ok_or_else(|| ScenarioError::Unknown(name.into()))?;
        Scenario::from_toml(text)
    }

    /// The simulated time a run covers: the senders' time and the drain after it.
    pub fn run_time(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64((self.duration_ms + self.drain_ms) / 1e3)
    }

    /// The same scenario with every workload at `load` percent.
    pub fn with_workload_load(mut self, load: f64) -> Result<Scenario, ScenarioError> {
        for w in &mut self.workload {
            w.load = load;
        }
        self.check()?;
        Ok(self)
    }

    fn check(&self) -> Result<(), ScenarioError> {
        let finite = |field: &str, v: f64| {
            if v.is_finite() && v >= 0.0 {
                Ok(())
            } else {
                Err(invalid(field, format!("{v} must be a number of at least 0")))
            }
        };
        finite("duration_ms", self.duration_ms)?;
        finite("drain_ms", self.drain_ms)?;
        finite("cable_m", self.cable_m)?;
        finite("slowpath_delay_us", self.slowpath_delay_us)?;
        if self.speed.bps() == 0 {
            return Err(invalid("speed", "must be above 0"));
        }
        if self.duration_ms + self.drain_ms > 60_000.0 {
            return Err(invalid("duration_ms", "a run simulates at most 60 s"));
        }
        for (i, f) in self.flow.iter().enumerate() {
            let field = format!("flow[{i}]");
            // A priority out of 0..7 is refused as the file is read (Priority's parser).
            if f.dscp.is_some_and(|d| d > 63) || f.ecn.is_some_and(|e| e > 3) {
                return Err(invalid(field, "dscp 0..=63, ecn 0..=3"));
            }
            finite(&format!("{field}.start_ms"), f.start_ms)?;
            match (f.rate_fps, f.load) {
                (Some(r), None) if r.is_finite() && r > 0.0 => {}
                (None, Some(l)) if l.is_finite() && l > 0.0 && l <= 100.0 => {}
                _ => return Err(invalid(field, "give rate_fps (above 0) or load (percent, 0 < load <= 100)")),
            }
        }
        for (i, w) in self.workload.iter().enumerate() {
            let field = format!("workload[{i}]");
            if w.dscp.is_some_and(|d| d > 63) {
                return Err(invalid(field, "dscp 0..=63"));
            }
            if !(w.load.is_finite() && w.load > 0.0 && w.load <= 100.0) {
                return Err(invalid(format!("{field}.load"), "percent, 0 < load <= 100"));
            }
            finite(&format!("{field}.start_ms"), w.start_ms)?;
            if let Some(stop) = w.stop_ms {
                finite(&format!("{field}.stop_ms"), stop)?;
            }
        }
        for (i, f) in self.flow_file.iter().enumerate() {
            if f.dscp.is_some_and(|d| d > 63) {
                return Err(invalid(format!("flow_file[{i}]"), "dscp 0..=63"));
            }
        }
        if let Some(m) = &self.monitor {
            if !(m.every_us.is_finite() && m.every_us >= 0.1) {
                return Err(invalid("monitor.every_us", "must be at least 0.1"));
            }
            if (self.duration_ms + self.drain_ms) * 1e3 / m.every_us > 1e6 {
                return Err(invalid("monitor.every_us", "at most a million samples a run"));
            }
        }
        for (i, e) in self.event.iter().enumerate() {
            finite(&format!("event[{i}].at_ms"), e.at_ms)?;
            if let Action::Storm(s) = &e.action {
                if !(s.interval_us.is_finite() && s.interval_us >= 0.1) {
                    return Err(invalid(format!("event[{i}].storm.interval_us"), "must be at least 0.1"));
                }
                finite(&format!("event[{i}].storm.duration_ms"), s.duration_ms)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_scenario_parses() {
        for (name, _, _) in BUILT_IN {
            let s = Scenario::built_in(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(&s.name, name);
        }
        assert!(matches!(Scenario::built_in("nope"), Err(ScenarioError::Unknown(_))));
    }

    #[test]
    fn bad_values_are_named() {
        let err = Scenario::from_toml("topology = \"fattree:k=4\"\nduration_ms = -1").unwrap_err();
        assert!(err.to_string().contains("duration_ms"), "{err}");
        let err = Scenario::from_toml("topology = \"x\"\n[[flow]]\nfrom = \"h1\"\nto = \"h2\"").unwrap_err();
        assert!(err.to_string().contains("rate_fps"), "{err}");
        let err = Scenario::from_toml("topology = \"x\"\nbogus = 1").unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }
}
