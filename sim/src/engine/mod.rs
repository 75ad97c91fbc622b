//! The discrete-event run: links that serialize frames at their rate and delay them by
//! their length, hosts that send paced flows and answer pauses, and on every switch the
//! engine and slowpath of `pfcswitch run` — the same code, fed simulated time.
//!
//! One queue of timed events, ordered by (time, insertion) ([`EventQueue`]): the same
//! scenario and seed replay exactly. Frame bytes live in one arena of buffers; a switch's frame pool maps
//! its frame ids onto them, so a frame is never copied on its way through a switch.

use std::collections::VecDeque;
use std::time::Duration;

use pfcswitch_core::histogram::Histogram;
use pfcswitch_core::pfc::{self, MacControl, Pfc, PRIORITIES};
use pfcswitch_core::pool::{PoolSize, DEFAULT_RING_SIZE};
use pfcswitch_core::ports::PortId;
use pfcswitch_core::prefetch::prefetch;
use pfcswitch_core::priorities::Priorities;
use pfcswitch_core::queue::FrameId;
use pfcswitch_core::slowpath::{DeadlockRecord, HeldFrame, Slowpath, ToSlowpath};
use pfcswitch_core::stats::SwitchStats;
use pfcswitch_core::switch::{FramePool, Switch, TxBatch};
use pfcswitch_core::time::Time;
use pfcswitch_core::Priority;

use crate::fabric::{host_ip, Fabric, Owner};
use crate::ids::{FabricPort, FlowIx, HostIx, SwitchIx};
use crate::monitor::{Monitor, WatchedFlow, WatchedQueue};
use crate::queue::EventQueue;
use crate::scenario::{invalid, Action, MonitorSpec, OutOfOrder, Scenario, ScenarioError, StormSpec};
use crate::split::Split;
use crate::trace::{PauseTimeline, Trace};
use pfctestkit::flow::{read_stamp_in, FlowSpec as TemplateSpec, FlowTemplate};

/// Simulated time starts here. The engine no longer needs it (its "not yet" is an
/// `Option`, and a switch started at zero works: see the core's
/// `a_switch_whose_clock_starts_at_zero_...` test), but the reports carry the switches'
/// own clock readings (pause arrivals, XOFF episodes), and starting here keeps them
/// byte-identical to every report written before.
pub const EPOCH: Time = Time::from_millis(1000);
/// How often the slowpath looks at its held frames again (as its thread does).
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A frame's last bit reaches `port`.
    Arrive {
        port: FabricPort,
        buf: u32,
        epoch: u32,
    },
    /// `port` finished putting a frame on the wire.
    TxDone {
        port: FabricPort,
    },
    /// `port` may have something to send now (a timer).
    Wake {
        port: FabricPort,
    },
    Flow {
        flow: FlowIx,
    },
    /// A host's NIC acts on the pause frame in `buf` (after its response delay).
    HostPause {
        host: HostIx,
        buf: u32,
    },
    SlowIn {
        sw: SwitchIx,
    },
    SlowOut {
        sw: SwitchIx,
    },
    SlowTick {
        sw: SwitchIx,
    },
    Action {
        index: u32,
    },
    Storm {
        index: u32,
    },
    /// `[monitor]` takes its samples.
    Sample,
    /// A DCQCN sender's reaction point has a timer due (rate increase, a pending cut).
    Rp {
        flow: FlowIx,
    },
}

mod arena;
mod dcqcn;
mod events;
mod hosts;
mod links;
mod results;
pub(crate) use results::Gathered;
pub use results::SimPortStats;
mod sampling;
mod switches;

use arena::*;

/// What a link's sending end is doing: read by nearly every event, so four ports share a
/// cache line (their counts are in [`LinkCounts`]).
struct PortState {
    busy: bool,
    up: bool,
    /// Bumped when the link goes down: frames on the wire then never arrive.
    epoch: u32,
    /// When a Wake event is due for it (`Time::MAX`: none).
    wake_at: Time,
}

/// What went over a link, from its sending end.
#[derive(Clone, Copy, Default)]
struct LinkCounts {
    tx_frames: u64,
    tx_bytes: u64,
    pause_frames: u64,
    lost_link_down: u64,
}

struct SwitchState {
    switch: Switch,
    slowpath: Slowpath,
    slots: Slots,
    /// Events on their way to the slowpath, and released frames on their way back.
    slow_in: VecDeque<(Time, ToSlowpath)>,
    slow_out: VecDeque<(Time, HeldFrame)>,
    /// The slowpath's look that a `SlowTick` is scheduled for.
    slow_look: Option<Time>,
    /// No port of this switch has a timer due before this (a lower bound: a timer that
    /// fired or moved leaves it where it was until the next look at every port). The
    /// engine's timer table answers for one port when asked; this is the simulator's own
    /// summary of the wakes it scheduled, so an arrival need not ask every port.
    earliest_wake: Time,
    /// Per port: frames that arrived when the pool had no free frame (dropped).
    rx_no_frame: Vec<u64>,
}

struct HostState {
    queues: [VecDeque<u32>; PRIORITIES],
    control: VecDeque<u32>,
    paused_until: [Time; PRIORITIES],
    honour: bool,
    /// Flows waiting for room in a priority's queue.
    waiting: [Vec<FlowIx>; PRIORITIES],
}

/// What a host received of one flow.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Received {
    pub frames: u64,
    pub next_seq: u32,
    pub reordered: u64,
    pub latency: Histogram,
    pub last_ns: u64,
    /// Bytes of the frames received, FCS included.
    pub bytes: u64,
    /// Frames that arrived marked Congestion Experienced.
    pub ce: u64,
    /// A flow with a count: when its last frame arrived, if all of them did (ns since the
    /// run's start).
    pub completed_ns: Option<u64>,
    /// Under go-back-N: the frame the last NAK asked for (one NAK a gap).
    #[serde(default)]
    pub nak_for: Option<u32>,
}

struct FlowState {
    template: FlowTemplate,
    /// A workload's flow whose last frame is shorter: that frame's template.
    last: Option<FlowTemplate>,
    /// Frames sent, sent again after a NAK included.
    sent: u64,
    /// The next frame's sequence number: `sent` until a NAK sends the flow back.
    next: u64,
    /// The most frames it had sent at any time (where `next` was furthest): frames sent
    /// beyond these were sent again.
    highest: u64,
    done: bool,
    blocked: bool,
    rx: Received,
    /// Under `[dcqcn]`: its sender's rate control and its receiver's CNP pacing.
    cc: Option<Box<FlowCc>>,
}

/// A flow under DCQCN.
struct FlowCc {
    rp: roce::ReactionPoint,
    np: roce::CnpPacer,
    /// Bits a frame takes on the wire (preamble and gap included).
    frame_bits: f64,
    /// When its next frame is due at its current rate: a flow event before it is early.
    due: Time,
    /// The flow event scheduled for it, if any ([`Sim::schedule_flow`]).
    pending: Option<Time>,
    /// The reaction point's timer event scheduled, if any.
    timer_at: Option<Time>,
    /// CNPs its receiver sent.
    cnps_sent: u64,
}

impl FlowCc {
    /// A frame's time on the wire at the reaction point's rate: the gap between sends.
    fn frame_time(&self) -> Duration {
        Duration::from_secs_f64(self.frame_bits / self.rp.rate_bps())
    }
}

struct Storm {
    spec: StormSpec,
    host: HostIx,
    until: Time,
}

/// Every event a run scheduled, with where it ran and what it scheduled in turn: the run's
/// event pattern without its work, so that event engines can be compared on it
/// (`cargo bench -p pfcsim --features des-bench --bench des_engines`).
#[derive(Clone, Debug, Default)]
pub struct Schedule {
    /// Switches first (0..switches), then hosts; [`Schedule::WORLD`] for scenario actions.
    pub nodes: u32,
    /// Per node, the nodes at the other end of its links.
    pub neighbours: Vec<Vec<u32>>,
    /// Per event, by the order it was scheduled in: when it is due (ns) and at which node.
    pub at: Vec<u64>,
    pub node: Vec<u32>,
    /// Per event that ran: the first event it scheduled and how many (they are consecutive).
    pub children: Vec<(u32, u32)>,
    /// Events scheduled before the run started.
    pub roots: u32,
    /// The run's end (ns); events due later never ran.
    pub end: u64,
}

impl Schedule {
    pub const WORLD: u32 = u32::MAX;
}

/// Counts of what the run did.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct RunCounts {
    pub events: u64,
    pub frame_hops: u64,
}

pub struct Sim<'f> {
    pub fabric: &'f Fabric,
    /// Simulated time: the engine's [`Time`], from [`EPOCH`] on.
    now: Time,
    /// Per node (the world first, then switches, then hosts: [`Sim::key_node`]), the
    /// events it has scheduled: an event's key is its scheduler and that count, so the
    /// order of events due at one time never depends on when they were pushed. That is
    /// what lets a fabric split over several ranks keep the one-rank order.
    scheduled: Vec<u64>,
    /// The key node of the event being dispatched (0, the world, outside the run and in
    /// scenario actions: what those schedule counts as scheduled by the node it is for).
    origin: u32,
    /// The key of the event being dispatched (what orders the frames a capture records
    /// when several ranks' are put together).
    current: u64,
    /// Events scheduled since the schedule's recording began (its roots included), and
    /// which one each pending key is: for [`Schedule`] only.
    scheduled_total: u64,
    schedule_ids: std::collections::HashMap<u64, u32>,
    /// Each port's key node, and each flow's sender's.
    port_node: Vec<u32>,
    flow_node: Vec<u32>,
    /// When the fabric is split over ranks: which nodes this rank runs, and the frames
    /// its nodes sent to other ranks' ([`crate::split`]).
    split: Option<Split>,
    queue: EventQueue<Ev>,
    arena: Arena,
    ports: Vec<PortState>,
    link_counts: Vec<LinkCounts>,
    switches: Vec<SwitchState>,
    hosts: Vec<HostState>,
    flows: Vec<FlowState>,
    actions: Vec<Action>,
    storms: Vec<Storm>,
    batch: TxBatch,
    slowpath_delay: Duration,
    pub counts: RunCounts,
    pub trace: Trace,
    schedule: Option<Schedule>,
    /// DCQCN at the hosts, and the queue their CNPs leave by.
    dcqcn: Option<roce::DcqcnParams>,
    cnp_priority: Priority,
    /// Whether any host receives under go-back-N (and so senders read NAKs).
    go_back_n: bool,
    monitor: Option<Monitor>,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// An event key's low bits count the events its scheduler has scheduled; the bits above
/// rank the scheduler among those with events due at the same time ([`tie_rank`]).
const KEY_COUNT_BITS: u32 = 39;

/// Key nodes are below this: a tie rank is a permutation of 24 bits, plus one.
const MAX_KEY_NODES: u64 = 1 << 24;

/// Where events node `origin` scheduled stand among those other nodes scheduled for the
/// same nanosecond `at`: the world's first, the nodes' in an order drawn afresh for
/// each nanosecond. Drawn, not by node number: with a fixed order the lowest-numbered of
/// several senders whose frames reach a switch at the same nanosecond would always go
/// first, and a fabric of equal links and equal flows ties all the time. Drawn from `at`
/// alone, not from the order events were pushed in, so that a rank of a split run,
/// which sees only its own nodes, draws the same.
///
/// The draw is a permutation of 24 bits (times an odd number, then an exclusive or, both
/// from `at`): two nodes never tie, and the exclusive or puts either of two first with
/// even odds.
#[inline]
fn tie_rank(at: u64, origin: u32) -> u64 {
    if origin == 0 {
        return 0;
    }
    // Fibonacci hashing: one multiplication spreads consecutive nanoseconds over the
    // high bits (the mask), and gives each its own odd multiplier.
    let z = at.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let (odd, mask) = ((z >> 20) | 1, z >> 40);
    1 + ((u64::from(origin).wrapping_mul(odd) ^ mask) & (MAX_KEY_NODES - 1))
}

/// Simulated time since [`EPOCH`], ns: what traces and reports show.
fn since_epoch(now: Time) -> u64 {
    ns(now - EPOCH)
}

impl<'f> Sim<'f> {
    pub fn new(scenario: &Scenario, fabric: &'f Fabric, trace: Trace) -> Result<Sim<'f>, ScenarioError> {
        if (1 + fabric.switches.len() + fabric.hosts.len()) as u64 > MAX_KEY_NODES {
            return Err(invalid("topology", "at most 16 million switches and hosts"));
        }
        let start = EPOCH;
        let switches = fabric
            .switches
            .iter()
            .map(|s| {
                // The pool `pfcswitch run` would have on these ports (one queue each).
                let n = s.config.ports.len();
                let pool = PoolSize::for_rings(n, n, DEFAULT_RING_SIZE, None);
                let frames = pool.frames;
                let mut switch = Switch::new(&s.config, s.tags.clone(), pool, start);
                for (mac, next) in s.routes.iter(fabric) {
                    switch.add_static_route(mac, next);
                }
                let names = switch.port_names();
                SwitchState {
                    // No room reserved for held frames: a simulated switch holds frames
                    // only while a port is blocked, and its queues grow as they need
                    // (reserved, they were 5 MiB of a k=16 fat-tree).
                    slowpath: Slowpath::new(&s.name, names, 0),
                    switch,
                    slots: Slots::new(frames),
                    slow_in: VecDeque::new(),
                    slow_out: VecDeque::new(),
                    slow_look: None,
                    earliest_wake: Time::MAX,
                    rx_no_frame: vec![0; s.config.ports.len()],
                }
            })
            .collect();
        let ports = fabric
            .ports
            .iter()
            .map(|p| PortState { busy: false, up: !p.failed, epoch: 0, wake_at: Time::MAX })
            .collect();
        let hosts = fabric
            .hosts
            .iter()
            .map(|_| HostState {
                queues: Default::default(),
                control: VecDeque::new(),
                paused_until: [Time::ZERO; PRIORITIES],
                honour: true,
                waiting: Default::default(),
            })
            .collect();
        let mut flows = Vec::new();
        for f in &fabric.flows {
            let (a, b) = (&fabric.hosts[f.from], &fabric.hosts[f.to]);
            let dscp = fabric.dscp_of(f);
            let spec = TemplateSpec {
                id: f.id,
                src_mac: fabric.ports[a.port].mac,
                dst_mac: fabric.ports[b.port].mac,
                vlan: None,
                dscp,
                // ECT(0) under DCQCN; otherwise not ECN-capable, and the switches' WRED only
                // counts them on lossless queues.
                ecn: f.ecn.unwrap_or(if scenario.dcqcn.is_some() { 2 } else { 0 }),
                src_ip: host_ip(f.from),
                dst_ip: host_ip(f.to),
                wire_size: f.size,
                roce: false,
            };
            let build = |wire_size| {
                FlowTemplate::build(&TemplateSpec { wire_size, ..spec.clone() })
                    .map_err(|e| invalid(format!("flow {}", f.id), e.to_string()))
            };
            let template = build(f.size)?;
            let last = if f.last_size != f.size { Some(build(f.last_size)?) } else { None };
            let cc = scenario.dcqcn.as_ref().map(|p| {
                let frame_bits = template.wire_bits();
                let line = 1e9 / f.interval.as_nanos().max(1) as f64 * frame_bits;
                Box::new(FlowCc {
                    rp: roce::ReactionPoint::new(p, line),
                    np: roce::CnpPacer::default(),
                    frame_bits,
                    due: start + f.start,
                    pending: Some(start + f.start),
                    timer_at: None,
                    cnps_sent: 0,
                })
            });
            flows.push(FlowState {
                template,
                last,
                sent: 0,
                next: 0,
                highest: 0,
                done: false,
                blocked: false,
                rx: Received::default(),
                cc,
            });
        }
        let mut sim = Sim {
            fabric,
            now: start,
            scheduled: vec![0; 1 + fabric.switches.len() + fabric.hosts.len()],
            origin: 0,
            current: 0,
            scheduled_total: 0,
            schedule_ids: std::collections::HashMap::new(),
            split: None,
            port_node: fabric
                .ports
                .iter()
                .map(|p| match p.owner {
                    Owner::Switch(sw, _) => 1 + sw.raw(),
                    Owner::Host(h) => 1 + (fabric.switches.len() + h.index()) as u32,
                })
                .collect(),
            flow_node: fabric.flows.iter().map(|f| 1 + (fabric.switches.len() + f.from.index()) as u32).collect(),
            queue: EventQueue::new(start.as_nanos()),
            arena: Arena::default(),
            link_counts: vec![LinkCounts::default(); fabric.ports.len()],
            ports,
            switches,
            hosts,
            flows,
            actions: Vec::new(),
            storms: Vec::new(),
            batch: TxBatch::new(),
            slowpath_delay: Duration::from_nanos((scenario.slowpath_delay_us * 1e3).round() as u64),
            counts: RunCounts::default(),
            trace,
            schedule: None,
            dcqcn: scenario.dcqcn.clone(),
            cnp_priority: scenario.cnp_priority,
            go_back_n: fabric.hosts.iter().any(|h| h.out_of_order == OutOfOrder::GoBackN),
            monitor: None,
        };
        if let Some(m) = &scenario.monitor {
            sim.monitor = Some(watch(m, fabric)?);
            let every = sim.monitor.as_ref().map_or(0, |m| m.every_ns);
            sim.at(start + Duration::from_nanos(every), Ev::Sample);
        }
        for (i, f) in fabric.flows.iter().enumerate() {
            sim.at(start + f.start, Ev::Flow { flow: FlowIx::new(i) });
        }
        for (i, e) in scenario.event.iter().enumerate() {
            let at = start + Duration::from_nanos((e.at_ms * 1e6).round() as u64);
            sim.actions.push(e.action.clone());
            sim.at(at, Ev::Action { index: i as u32 });
        }
        Ok(sim)
    }

    /// Schedules `ev` at `at`; returns its key.
    #[inline]
    fn at(&mut self, at: Time, ev: Ev) -> u64 {
        let origin = if self.origin == 0 { self.key_node(&ev) } else { self.origin };
        let count = &mut self.scheduled[origin as usize];
        *count += 1;
        let key = (tie_rank(at.as_nanos(), origin) << KEY_COUNT_BITS) | *count;
        if self.split.is_some() || self.schedule.is_some() {
            self.at_split_or_recorded(at, key, ev);
        } else {
            self.queue.push(at.as_nanos(), key, ev);
        }
        key
    }

    /// [`Sim::at`] under a split (an event for another rank's node) or while the
    /// schedule is recorded: out of the way of the usual run.
    #[inline(never)]
    fn at_split_or_recorded(&mut self, at: Time, key: u64, ev: Ev) {
        let target = if self.split.is_some() { self.key_node(&ev) } else { 0 };
        if let Some(split) = &mut self.split {
            let rank = split.rank_of(target);
            if rank != split.rank {
                // Another rank's node: a frame goes to it at the window's end; anything
                // else is a scenario action's part at that node, which its rank does.
                if let Ev::Arrive { port, buf, epoch } = ev {
                    let (len, long) = (self.arena.len(buf), Arena::is_long(buf));
                    split.post(rank, at.as_nanos(), key, port.raw(), epoch, len, self.arena.head(buf), long);
                    self.arena.give(buf);
                }
                return;
            }
        }
        let node = if self.schedule.is_some() { self.node_of(&ev) } else { 0 };
        if let Some(s) = &mut self.schedule {
            s.at.push(at.as_nanos());
            s.node.push(node);
            s.children.push((0, 0));
            self.schedule_ids.insert(key, self.scheduled_total as u32);
            self.scheduled_total += 1;
        }
        self.queue.push(at.as_nanos(), key, ev);
    }

    /// Makes this the part of the run that `split.rank` does: only its nodes' events run
    /// here. Call before the run.
    pub(crate) fn set_split(&mut self, split: Split) {
        // What the start scheduled for other ranks' nodes is theirs to run (each rank
        // scheduled the same, so every node's count is the same everywhere).
        let pending = self.queue.pending();
        self.queue = EventQueue::new(self.now.as_nanos());
        for (at, key, ev) in pending {
            if split.rank_of(self.key_node(&ev)) == split.rank {
                self.queue.push(at, key, ev);
            }
        }
        self.split = Some(split);
    }

    /// Whether this rank runs key node `node` (every rank runs the world's events).
    fn runs(&self, node: u32) -> bool {
        self.split.as_ref().is_none_or(|s| s.rank_of(node) == s.rank)
    }

    /// What goes to each rank at a window's end: the frames this rank's nodes sent to
    /// its nodes since the last exchange, stamped with when this rank's next event is due
    /// ([`Split::seal`]). Empty when the run is not split.
    pub(crate) fn seal_posted(&mut self) -> Vec<Vec<u8>> {
        let next = self.next_event_at();
        self.split.as_mut().map_or_else(Vec::new, |s| s.seal(next))
    }

    /// Hands the buffers an exchange returned back for the next window's frames.
    pub(crate) fn recycle_posted(&mut self, buffers: Vec<Vec<u8>>) {
        if let Some(s) = &mut self.split {
            s.recycle(buffers);
        }
    }

    /// Frames this rank's nodes sent to other ranks' in all.
    pub(crate) fn frames_posted(&self) -> u64 {
        self.split.as_ref().map_or(0, |s| s.frames_posted)
    }

    /// When this rank's next event is due, ns (`u64::MAX` if none is).
    pub(crate) fn next_event_at(&self) -> u64 {
        self.queue.next_at().unwrap_or(u64::MAX)
    }

    /// Schedules the frames another rank posted to this one (see [`Split::post`]).
    pub(crate) fn accept(&mut self, bytes: &[u8]) {
        for f in crate::split::Posted::read(bytes) {
            let buf = self.arena.take_sized(f.long);
            self.arena.write(buf, f.len)[..f.head.len()].copy_from_slice(f.head);
            self.queue.push(f.at, f.key, Ev::Arrive { port: FabricPort::from_raw(f.port), buf, epoch: f.epoch });
        }
    }

    /// Runs every event due at `end` or before (a time, not a span from the start).
    pub(crate) fn run_to(&mut self, end: Time) {
        self.run_until(end - EPOCH);
    }

    /// Runs `work`, a scenario action's part at one node (key numbering), as that node's
    /// own: what it schedules is that node's, as it would be had the node done it itself.
    fn as_node(&mut self, node: u32, work: impl FnOnce(&mut Self)) {
        if !self.runs(node) {
            return;
        }
        let outer = std::mem::replace(&mut self.origin, node);
        work(self);
        self.origin = outer;
    }

    /// Host `h`'s key node.
    fn host_node(&self, h: HostIx) -> u32 {
        1 + (self.fabric.switches.len() + h.index()) as u32
    }

    /// The node an event runs at, numbered for keys: 0 for the world (scenario actions,
    /// samples), then switches from 1, then hosts.
    #[inline]
    fn key_node(&self, ev: &Ev) -> u32 {
        let host = |h: HostIx| self.host_node(h);
        match *ev {
            Ev::Arrive { port, .. } | Ev::TxDone { port } | Ev::Wake { port } => self.port_node[port],
            Ev::Flow { flow } | Ev::Rp { flow } => self.flow_node[flow],
            Ev::HostPause { host: h, .. } => host(h),
            Ev::SlowIn { sw } | Ev::SlowOut { sw } | Ev::SlowTick { sw } => 1 + sw.raw(),
            Ev::Storm { index } => host(self.storms[index as usize].host),
            Ev::Action { .. } | Ev::Sample => 0,
        }
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Runs every event up to `until` (simulated time since the start).
    pub fn run_until(&mut self, until: Duration) {
        let end = EPOCH + until;
        while let Some((at, key, ev)) = self.queue.pop_until(end.as_nanos()) {
            let at = Time::from_nanos(at);
            self.now = at;
            let first_child = self.scheduled_total;
            self.current = key;
            self.counts.events += 1;
            // The next frame to arrive, if it arrives now, was written a wire time ago
            // and is seldom still in the cache: ask for its first line while this event
            // runs (its length read there was a quarter of a k=16 permutation's run).
            if let Some(&Ev::Arrive { buf, .. }) = self.queue.peek_current() {
                self.arena.prefetch(buf);
            }
            self.dispatch(at, ev);
            // The world's events run on every rank and count on the first.
            if self.origin == 0 && self.split.as_ref().is_some_and(|s| s.rank != 0) {
                self.counts.events -= 1;
            }
            if let Some(s) = &mut self.schedule {
                let id = self.schedule_ids.remove(&key).expect("every key scheduled is recorded") as usize;
                s.children[id] = (first_child as u32, (self.scheduled_total - first_child) as u32);
            }
        }
        self.origin = 0;
        self.now = self.now.max(end);
        if let Some(s) = &mut self.schedule {
            s.end = end.as_nanos();
        }
    }

    /// Starts recording the [`Schedule`]; call before the run.
    pub fn record_schedule(&mut self) {
        let f = self.fabric;
        let nodes = (f.switches.len() + f.hosts.len()) as u32;
        let mut neighbours = vec![Vec::new(); nodes as usize];
        for p in &f.ports {
            let (a, b) = (self.node_of_port(p.owner), self.node_of_port(f.ports[p.peer].owner));
            neighbours[a as usize].push(b);
        }
        // The events scheduled before this call are the roots.
        let mut roots = self.queue.pending();
        // Events get their ids in the order they are scheduled, after the roots'.
        self.scheduled_total = roots.len() as u64;
        let mut s = Schedule { nodes, neighbours, roots: roots.len() as u32, ..Schedule::default() };
        roots.sort_by_key(|&(at, key, _)| (at, key));
        for (i, (at, key, ev)) in roots.into_iter().enumerate() {
            s.at.push(at);
            s.node.push(self.node_of(&ev));
            s.children.push((0, 0));
            self.schedule_ids.insert(key, i as u32);
        }
        self.schedule = Some(s);
    }

    pub fn take_schedule(&mut self) -> Option<Schedule> {
        self.schedule.take()
    }

    fn node_of_port(&self, owner: Owner) -> u32 {
        match owner {
            Owner::Switch(sw, _) => sw.raw(),
            Owner::Host(h) => (self.fabric.switches.len() + h.index()) as u32,
        }
    }

    fn node_of(&self, ev: &Ev) -> u32 {
        let host = |h: HostIx| (self.fabric.switches.len() + h.index()) as u32;
        match *ev {
            Ev::Arrive { port, .. } | Ev::TxDone { port } | Ev::Wake { port } => {
                self.node_of_port(self.fabric.ports[port].owner)
            }
            Ev::Flow { flow } => host(self.fabric.flows[flow].from),
            Ev::HostPause { host: h, .. } => host(h),
            Ev::SlowIn { sw } | Ev::SlowOut { sw } | Ev::SlowTick { sw } => sw.raw(),
            Ev::Action { .. } => Schedule::WORLD,
            Ev::Storm { index } => host(self.storms[index as usize].host),
            Ev::Rp { flow } => host(self.fabric.flows[flow].from),
            Ev::Sample => Schedule::WORLD,
        }
    }

    /// Runs `ev`, first making its node the origin of what it schedules (here, in each
    /// arm, rather than through [`Sim::key_node`]: one branch on the event's kind, not two).
    ///
    /// A port's events, nearly all of a run's, are told apart by compares, and the other
    /// kinds go to [`Sim::dispatch_other`]. One `match` of them all was a jump through a
    /// table, and since ties are ordered by a draw per node, a nanosecond's kinds come in
    /// no pattern for the jump's predictor to learn. Split so, a k=4 fat-tree took 0.983
    /// of the time (20 pairs); with random destinations it and `fattree-dcqcn` then ran
    /// as fast as before the split, and the bench's k=4 case was still 3 to 5 % slower
    /// until LTO across crates (docs/bench/2026-12-02-huge-pages.md and
    /// 2026-12-02-thin-lto.md).
    fn dispatch(&mut self, at: Time, ev: Ev) {
        match ev {
            Ev::Arrive { port, buf, epoch } => {
                self.origin = self.port_node[port];
                self.arrive(port, buf, epoch);
            }
            Ev::TxDone { port } => {
                self.origin = self.port_node[port];
                self.ports[port].busy = false;
                self.try_tx(port);
            }
            Ev::Wake { port } => {
                self.origin = self.port_node[port];
                let p = &mut self.ports[port];
                if p.wake_at == at {
                    p.wake_at = Time::MAX;
                    self.try_tx(port);
                }
            }
            _ => self.dispatch_other(at, ev),
        }
    }

    /// [`Sim::dispatch`] for the kinds other than a port's (flows, hosts' pauses, the
    /// slowpath, scenario actions, storms, DCQCN's timers, samples).
    #[inline(never)]
    fn dispatch_other(&mut self, at: Time, ev: Ev) {
        match ev {
            Ev::Arrive { .. } | Ev::TxDone { .. } | Ev::Wake { .. } => unreachable!("a port's event"),
            Ev::Flow { flow } => {
                self.origin = self.flow_node[flow];
                self.flow_send(flow);
            }
            Ev::HostPause { host, buf } => {
                self.origin = self.host_node(host);
                self.host_pause(host, buf);
            }
            Ev::SlowIn { sw } => {
                self.origin = 1 + sw.raw();
                self.slow_in(sw);
            }
            Ev::SlowOut { sw } => {
                self.origin = 1 + sw.raw();
                self.slow_out(sw);
            }
            Ev::SlowTick { sw } => {
                self.origin = 1 + sw.raw();
                self.switches[sw].slowpath.handle_timeout(at);
                self.slow_look(sw);
            }
            Ev::Action { index } => {
                self.origin = 0;
                self.action(index as usize);
            }
            Ev::Storm { index } => {
                self.origin = self.host_node(self.storms[index as usize].host);
                self.storm(index as usize);
            }
            Ev::Rp { flow } => {
                self.origin = self.flow_node[flow];
                self.rp_timer(flow, at);
            }
            Ev::Sample => {
                self.origin = 0;
                self.sample(at);
            }
        }
    }
}

/// The monitor for `spec`: its queues resolved to switch ports, its flows to indices.
fn watch(spec: &MonitorSpec, fabric: &Fabric) -> Result<Monitor, ScenarioError> {
    if spec.queues.len() > 64 {
        return Err(invalid("monitor.queues", "at most 64 ports"));
    }
    let mut queues = Vec::new();
    for label in &spec.queues {
        let port = fabric.port_named(label).ok_or_else(|| invalid("monitor.queues", format!("no port {label:?}")))?;
        let Owner::Switch(switch, local) = fabric.ports[port].owner else {
            return Err(invalid("monitor.queues", format!("{label:?} is a host's: name a switch's port")));
        };
        queues.push(WatchedQueue { label: fabric.ports[port].label.clone(), switch, local, samples: Vec::new() });
    }
    let flows: Vec<usize> = match &spec.flows {
        Some(ids) => ids
            .iter()
            .map(|&id| {
                fabric
                    .flows
                    .iter()
                    .position(|f| f.id == id)
                    .ok_or_else(|| invalid("monitor.flows", format!("no flow {id}")))
            })
            .collect::<Result<_, _>>()?,
        None => (0..fabric.flows.len()).filter(|&i| fabric.flows[i].bytes.is_none()).take(64).collect(),
    };
    if flows.len() > 64 {
        return Err(invalid("monitor.flows", "at most 64 flows"));
    }
    let flows = flows
        .into_iter()
        .map(|flow| WatchedFlow { flow, bytes_before: 0, received_gbps: Vec::new(), dcqcn_gbps: Vec::new() })
        .collect();
    Ok(Monitor { every_ns: ((spec.every_us * 1e3).round() as u64).max(100), queues, flows })
}

fn is_mac_control(frame: &[u8]) -> bool {
    frame.len() >= 14 && u16::from_be_bytes([frame[12], frame[13]]) == pfc::MAC_CONTROL_ETHERTYPE
}
