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
use pfcswitch_core::prefetch::prefetch;
use pfcswitch_core::priorities::Priorities;
use pfcswitch_core::queue::FrameId;
use pfcswitch_core::slowpath::{HeldFrame, Slowpath, ToSlowpath};
use pfcswitch_core::switch::{FramePool, Switch, TxBatch};
use pfcswitch_core::time::Time;

use crate::fabric::{Fabric, Owner};
use crate::monitor::{Monitor, WatchedFlow, WatchedQueue};
use crate::queue::EventQueue;
use crate::scenario::{invalid, Action, MonitorSpec, Scenario, ScenarioError, StormSpec};
use crate::trace::{PauseTimeline, Trace};
use pfclab::flow::{read_stamp_in, FlowSpec as TemplateSpec, FlowTemplate};

/// Simulated time starts here, not at zero: the engine reads "zero" as "never".
pub const EPOCH: Time = Time::from_millis(1000);
/// How often the slowpath looks at its held frames again (as its thread does).
const NONE: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A frame's last bit reaches `port`.
    Arrive {
        port: u32,
        buf: u32,
        epoch: u32,
    },
    /// `port` finished putting a frame on the wire.
    TxDone {
        port: u32,
    },
    /// `port` may have something to send now (a timer).
    Wake {
        port: u32,
    },
    Flow {
        flow: u32,
    },
    /// A host's NIC acts on the pause frame in `buf` (after its response delay).
    HostPause {
        host: u32,
        buf: u32,
    },
    SlowIn {
        sw: u32,
    },
    SlowOut {
        sw: u32,
    },
    SlowTick {
        sw: u32,
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
        flow: u32,
    },
}

/// How much of a frame the simulator keeps: more than any header the engine reads or
/// writes (Ethernet, two VLAN tags, IPv6, UDP and a test frame's stamp come to 94 bytes)
/// and every MAC control frame whole.
const HEAD: usize = 124;

/// How much a short buffer keeps: a test frame's headers and stamp (54 bytes, 58 with a
/// VLAN tag) and a MAC control frame whole (60), with the length in one cache line.
const SHORT_HEAD: usize = 60;

/// A frame's length and its first `N` bytes, in cache lines of its own. The length sits
/// beside the headers, so that a hop that reads both (an arrival: the length bounds the
/// headers it parses) waits for memory once.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Buf<const N: usize> {
    len: u32,
    head: [u8; N],
}

/// Buffers of one size, reused.
#[derive(Default)]
struct Bufs<const N: usize> {
    bufs: Vec<Buf<N>>,
    free: Vec<u32>,
}

impl<const N: usize> Bufs<N> {
    fn take(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.bufs[i as usize].len = 0;
                i
            }
            None => {
                self.bufs.push(Buf { len: 0, head: [0; N] });
                (self.bufs.len() - 1) as u32
            }
        }
    }

    fn give(&mut self, i: u32) {
        self.free.push(i);
    }

    fn len(&self, i: u32) -> usize {
        self.bufs[i as usize].len as usize
    }

    fn prefetch(&self, i: u32) {
        prefetch(&self.bufs[i as usize]);
    }

    fn head(&self, i: u32) -> &[u8] {
        let b = &self.bufs[i as usize];
        &b.head[..(b.len as usize).min(N)]
    }

    fn head_mut(&mut self, i: u32) -> &mut [u8] {
        let b = &mut self.bufs[i as usize];
        &mut b.head[..(b.len as usize).min(N)]
    }

    /// Makes buffer `i` a `len`-byte frame of zeros; returns its head for writing.
    fn write(&mut self, i: u32, len: usize) -> &mut [u8] {
        self.bufs[i as usize].len = len as u32;
        let head = self.head_mut(i);
        head.fill(0);
        head
    }

    /// A buffer holding a copy of buffer `from`.
    fn duplicate(&mut self, from: u32) -> u32 {
        let to = self.take();
        self.bufs[to as usize] = self.bufs[from as usize];
        to
    }
}

/// Frame buffers, reused. Past its head, every frame the simulator makes is zeros (a
/// test frame's payload after its stamp: [`FlowTemplate::write_head`]), and nothing reads
/// or writes there, so it is not stored. Whole 1536-byte buffers, one allocation each,
/// made the fabric's frames in flight its largest working set (23 MB at k=8, each frame's
/// headers on a page of their own), and a host's send wrote all of a frame.
///
/// A buffer is short (one cache line) or long (two). A host's test frame, the fabric's
/// commonest, needs only its first 54 bytes: a long buffer for it would carry a line of
/// zeros that every send writes and the caches hold while it waits in queues (some
/// 15 000 frames at k=8). Frames the engine builds, whose length it says only after it
/// has its buffer, and frames of a few dozen bytes more than a short buffer holds (which
/// a long one holds whole, and readers may parse as whole frames) take long ones. A
/// buffer's id says which ([`Size::of`]).
#[derive(Default)]
struct Arena {
    short: Bufs<SHORT_HEAD>,
    long: Bufs<HEAD>,
}

/// A buffer id read: the size of the buffer and its index among buffers of that size.
enum Size {
    Short(u32),
    Long(u32),
}

impl Size {
    /// The bit of a buffer id that marks a long buffer.
    const LONG: u32 = 1 << 31;

    fn of(id: u32) -> Size {
        if id & Size::LONG != 0 {
            Size::Long(id & !Size::LONG)
        } else {
            Size::Short(id)
        }
    }

    fn id(self) -> u32 {
        match self {
            Size::Short(i) => i,
            Size::Long(i) => i | Size::LONG,
        }
    }
}

impl Arena {
    /// An empty long buffer.
    fn take(&mut self) -> u32 {
        Size::Long(self.long.take()).id()
    }

    /// An empty buffer for a frame of `len` bytes that is zeros from byte `zeros_from` on:
    /// a short one if that is all a long one would hold but for zeros.
    fn take_for(&mut self, len: usize, zeros_from: Option<usize>) -> u32 {
        let short = zeros_from.is_some_and(|z| z <= SHORT_HEAD) && (len <= SHORT_HEAD || len > HEAD);
        if short {
            Size::Short(self.short.take()).id()
        } else {
            self.take()
        }
    }

    fn give(&mut self, id: u32) {
        match Size::of(id) {
            Size::Short(i) => self.short.give(i),
            Size::Long(i) => self.long.give(i),
        }
    }

    /// The frame's length on its way (FCS not included).
    fn len(&self, id: u32) -> usize {
        match Size::of(id) {
            Size::Short(i) => self.short.len(i),
            Size::Long(i) => self.long.len(i),
        }
    }

    /// The bytes of the frame that are kept: all of it up to what its buffer holds.
    fn head(&self, id: u32) -> &[u8] {
        match Size::of(id) {
            Size::Short(i) => self.short.head(i),
            Size::Long(i) => self.long.head(i),
        }
    }

    fn head_mut(&mut self, id: u32) -> &mut [u8] {
        match Size::of(id) {
            Size::Short(i) => self.short.head_mut(i),
            Size::Long(i) => self.long.head_mut(i),
        }
    }

    /// Makes buffer `id` a `len`-byte frame of zeros; returns its head for writing.
    fn write(&mut self, id: u32, len: usize) -> &mut [u8] {
        match Size::of(id) {
            Size::Short(i) => self.short.write(i, len),
            Size::Long(i) => self.long.write(i, len),
        }
    }

    /// Asks the cache for buffer `id`'s first line (its length and headers) without waiting.
    fn prefetch(&self, id: u32) {
        match Size::of(id) {
            Size::Short(i) => self.short.prefetch(i),
            Size::Long(i) => self.long.prefetch(i),
        }
    }

    /// A buffer of buffer `from`'s size holding a copy of it.
    fn duplicate(&mut self, from: u32) -> u32 {
        match Size::of(from) {
            Size::Short(i) => Size::Short(self.short.duplicate(i)).id(),
            Size::Long(i) => Size::Long(self.long.duplicate(i)).id(),
        }
    }
}

/// A switch's frame ids and the arena buffers behind them.
///
/// Ids are handed out as a stack of the pool's `capacity` ids would give them (lowest
/// first, the latest freed next), but the tables grow only as far as the highest id in
/// use: a switch of a large fabric holds a few hundred frames of the hundreds of
/// thousands its pool could, and tables for all of them made a k=16 fat-tree need
/// gigabytes.
struct Slots {
    buf: Vec<u32>,
    free: Vec<u32>,
    capacity: u32,
}

impl Slots {
    fn new(capacity: u32) -> Slots {
        Slots { buf: Vec::new(), free: Vec::new(), capacity }
    }

    /// A free id for arena buffer `b`.
    fn take(&mut self, b: u32) -> Option<u32> {
        let id = match self.free.pop() {
            Some(id) => id,
            None if (self.buf.len() as u32) < self.capacity => {
                self.buf.push(NONE);
                (self.buf.len() - 1) as u32
            }
            None => return None,
        };
        self.buf[id as usize] = b;
        Some(id)
    }

    /// Frees `id`; returns its buffer.
    fn give(&mut self, id: u32) -> u32 {
        let b = std::mem::replace(&mut self.buf[id as usize], NONE);
        self.free.push(id);
        b
    }

    fn free_count(&self) -> usize {
        self.free.len() + (self.capacity as usize - self.buf.len())
    }
}

/// The [`FramePool`] a switch sees: its slots over the arena.
struct Pool<'a> {
    slots: &'a mut Slots,
    arena: &'a mut Arena,
}

impl FramePool for Pool<'_> {
    fn alloc(&mut self) -> Option<FrameId> {
        self.hold(Arena::take)
    }

    fn free(&mut self, id: FrameId) {
        let b = self.slots.give(id.0);
        self.arena.give(b);
    }

    fn bytes(&self, id: FrameId) -> &[u8] {
        self.arena.head(self.slots.buf[id.0 as usize])
    }

    fn len(&self, id: FrameId) -> usize {
        self.arena.len(self.slots.buf[id.0 as usize])
    }

    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8] {
        self.arena.write(self.slots.buf[id.0 as usize], len)
    }

    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8] {
        self.arena.head_mut(self.slots.buf[id.0 as usize])
    }

    fn free_frames(&self) -> usize {
        self.slots.free_count()
    }

    fn duplicate(&mut self, from: FrameId) -> Option<FrameId> {
        let from = self.slots.buf[from.0 as usize];
        self.hold(|arena| arena.duplicate(from))
    }
}

impl Pool<'_> {
    /// A frame id for the buffer `take` gets from the arena, when the switch has an id
    /// free: that is asked first, so that no buffer is taken for a frame it cannot hold.
    fn hold(&mut self, take: impl FnOnce(&mut Arena) -> u32) -> Option<FrameId> {
        if self.slots.free_count() == 0 {
            return None;
        }
        let b = take(self.arena);
        self.slots.take(b).map(FrameId)
    }
}

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
    /// No port of this switch has a timer due before this (a lower bound: a timer that
    /// fired or moved leaves it where it was until the next look at every port).
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
    waiting: [Vec<u32>; PRIORITIES],
}

/// What a host received of one flow.
#[derive(Clone, Debug, Default)]
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
}

struct FlowState {
    template: FlowTemplate,
    /// A workload's flow whose last frame is shorter: that frame's template.
    last: Option<FlowTemplate>,
    sent: u64,
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
    host: usize,
    until: Time,
}

/// Every event a run scheduled, with where it ran and what it scheduled in turn: the run's
/// event pattern without its work, so that event engines can be compared on it
/// (`cargo bench -p tools --bench des_engines`).
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
#[derive(Clone, Copy, Debug, Default)]
pub struct RunCounts {
    pub events: u64,
    pub frame_hops: u64,
}

pub struct Sim<'f> {
    pub fabric: &'f Fabric,
    /// Simulated time: the engine's [`Time`], from [`EPOCH`] on.
    now: Time,
    seq: u64,
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
    cnp_priority: usize,
    monitor: Option<Monitor>,
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// Host `h`'s IPv4 address in every frame the simulator builds.
fn host_ip(h: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(10, 0, (h >> 8) as u8, h as u8)
}

/// Simulated time since [`EPOCH`], ns: what traces and reports show.
fn since_epoch(now: Time) -> u64 {
    ns(now - EPOCH)
}

impl<'f> Sim<'f> {
    pub fn new(scenario: &Scenario, fabric: &'f Fabric, trace: Trace) -> Result<Sim<'f>, ScenarioError> {
        let start = EPOCH;
        let switches = fabric
            .switches
            .iter()
            .map(|s| {
                // The pool `pfcswitch run` would have on these ports (one queue each).
                let n = s.config.ports.len();
                let pool = PoolSize::for_rings(n, n, DEFAULT_RING_SIZE, None);
                let frames = pool.frames;
                let switch = Switch::new(&s.config, s.tags.clone(), pool, start);
                let names = switch.port_names();
                SwitchState {
                    slowpath: Slowpath::new(&s.name, names, 64),
                    switch,
                    slots: Slots::new(frames),
                    slow_in: VecDeque::new(),
                    slow_out: VecDeque::new(),
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
            let dscp = f.dscp.unwrap_or(fabric.initial_tag.unwrap_or(f.priority));
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
            flows.push(FlowState { template, last, sent: 0, done: false, blocked: false, rx: Received::default(), cc });
        }
        let mut sim = Sim {
            fabric,
            now: start,
            seq: 0,
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
            cnp_priority: usize::from(scenario.cnp_priority).min(PRIORITIES - 1),
            monitor: None,
        };
        if let Some(m) = &scenario.monitor {
            sim.monitor = Some(watch(m, fabric)?);
            let every = sim.monitor.as_ref().map_or(0, |m| m.every_ns);
            sim.at(start + Duration::from_nanos(every), Ev::Sample);
        }
        for (i, f) in fabric.flows.iter().enumerate() {
            sim.at(start + f.start, Ev::Flow { flow: i as u32 });
        }
        for (i, e) in scenario.event.iter().enumerate() {
            let at = start + Duration::from_nanos((e.at_ms * 1e6).round() as u64);
            sim.actions.push(e.action.clone());
            sim.at(at, Ev::Action { index: i as u32 });
        }
        Ok(sim)
    }

    fn at(&mut self, at: Time, ev: Ev) {
        let node = if self.schedule.is_some() { self.node_of(&ev) } else { 0 };
        if let Some(s) = &mut self.schedule {
            s.at.push(at.as_nanos());
            s.node.push(node);
            s.children.push((0, 0));
        }
        self.seq += 1;
        self.queue.push(at.as_nanos(), self.seq, ev);
    }

    pub fn now(&self) -> Time {
        self.now
    }

    /// Runs every event up to `until` (simulated time since the start).
    pub fn run_until(&mut self, until: Duration) {
        let end = EPOCH + until;
        while let Some((at, seq, ev)) = self.queue.pop_until(end.as_nanos()) {
            let at = Time::from_nanos(at);
            self.now = at;
            self.counts.events += 1;
            let first_child = self.seq;
            self.dispatch(at, ev);
            if let Some(s) = &mut self.schedule {
                let id = (seq - 1) as usize;
                s.children[id] = (first_child as u32, (self.seq - first_child) as u32);
            }
        }
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
        let mut s = Schedule { nodes, neighbours, roots: self.seq as u32, ..Schedule::default() };
        let mut roots = self.queue.pending();
        roots.sort_by_key(|&(_, seq, _)| seq);
        for (at, _, ev) in roots {
            s.at.push(at);
            s.node.push(self.node_of(&ev));
            s.children.push((0, 0));
        }
        self.schedule = Some(s);
    }

    pub fn take_schedule(&mut self) -> Option<Schedule> {
        self.schedule.take()
    }

    fn node_of_port(&self, owner: Owner) -> u32 {
        match owner {
            Owner::Switch(sw, _) => sw as u32,
            Owner::Host(h) => (self.fabric.switches.len() + h) as u32,
        }
    }

    fn node_of(&self, ev: &Ev) -> u32 {
        let host = |h: usize| (self.fabric.switches.len() + h) as u32;
        match *ev {
            Ev::Arrive { port, .. } | Ev::TxDone { port } | Ev::Wake { port } => {
                self.node_of_port(self.fabric.ports[port as usize].owner)
            }
            Ev::Flow { flow } => host(self.fabric.flows[flow as usize].from),
            Ev::HostPause { host: h, .. } => host(h as usize),
            Ev::SlowIn { sw } | Ev::SlowOut { sw } | Ev::SlowTick { sw } => sw,
            Ev::Action { .. } => Schedule::WORLD,
            Ev::Storm { index } => host(self.storms[index as usize].host),
            Ev::Rp { flow } => host(self.fabric.flows[flow as usize].from),
            Ev::Sample => Schedule::WORLD,
        }
    }

    fn dispatch(&mut self, at: Time, ev: Ev) {
        match ev {
            Ev::Arrive { port, buf, epoch } => self.arrive(port as usize, buf, epoch),
            Ev::TxDone { port } => {
                self.ports[port as usize].busy = false;
                self.try_tx(port as usize);
            }
            Ev::Wake { port } => {
                let p = &mut self.ports[port as usize];
                if p.wake_at == at {
                    p.wake_at = Time::MAX;
                    self.try_tx(port as usize);
                }
            }
            Ev::Flow { flow } => self.flow_send(flow as usize),
            Ev::HostPause { host, buf } => self.host_pause(host as usize, buf),
            Ev::SlowIn { sw } => self.slow_in(sw as usize),
            Ev::SlowOut { sw } => self.slow_out(sw as usize),
            Ev::SlowTick { sw } => {
                if self.switches[sw as usize].slowpath.handle_timeout(at) {
                    self.slow_release(sw as usize);
                }
            }
            Ev::Action { index } => self.action(index as usize),
            Ev::Storm { index } => self.storm(index as usize),
            Ev::Rp { flow } => self.rp_timer(flow as usize, at),
            Ev::Sample => self.sample(at),
        }
    }

    // --- Links ---

    /// Puts frame `buf` of `len` bytes (a pause frame or not) on `port`'s link. The frame
    /// itself is not read here unless a capture records it: a frame that waited in a queue
    /// is seldom still in the cache, and its arrival at the link's far end, a few hundred
    /// events later, is the first to need it. So the cache is asked for it now, and that
    /// wait overlaps the events in between.
    fn send(&mut self, port: usize, buf: u32, len: usize, pause: bool) {
        self.arena.prefetch(buf);
        let spec = &self.fabric.ports[port];
        let wire = spec.speed.wire_time(len);
        self.ports[port].busy = true;
        let p = &mut self.link_counts[port];
        p.tx_frames += 1;
        p.tx_bytes += len as u64;
        if pause {
            p.pause_frames += 1;
        }
        let epoch = self.ports[spec.peer].epoch;
        self.counts.frame_hops += 1;
        if self.trace.captures(port) {
            self.trace.capture(port, since_epoch(self.now), self.arena.head(buf), len);
        }
        self.at(self.now + wire, Ev::TxDone { port: port as u32 });
        self.at(self.now + wire + spec.propagation, Ev::Arrive { port: spec.peer as u32, buf, epoch });
    }

    fn arrive(&mut self, port: usize, buf: u32, epoch: u32) {
        if self.ports[port].epoch != epoch || !self.ports[port].up {
            self.link_counts[self.fabric.ports[port].peer].lost_link_down += 1;
            self.arena.give(buf);
            return;
        }
        if is_mac_control(self.arena.head(buf)) {
            self.note_pause(port, buf);
        }
        match self.fabric.ports[port].owner {
            Owner::Switch(sw, local) => self.switch_rx(sw, local, buf),
            Owner::Host(h) => self.host_rx(h, buf),
        }
    }

    /// Records in `port`'s timeline the pause a frame arriving there asks for.
    fn note_pause(&mut self, port: usize, buf: u32) {
        let spec = &self.fabric.ports[port];
        let Ok(frame) = pfc::decode(self.arena.head(buf), spec.mac) else { return };
        let at = since_epoch(self.now);
        let tl: &mut PauseTimeline = self.trace.timeline(port);
        match frame.body {
            MacControl::Pfc(p) => {
                for (prio, quanta) in p.classes() {
                    tl.pause(prio, at, ns(spec.speed.quanta_duration(quanta)));
                }
            }
            MacControl::Pause { quanta } => {
                for prio in 0..PRIORITIES {
                    tl.pause(prio, at, ns(spec.speed.quanta_duration(quanta)));
                }
            }
        }
    }

    fn try_tx(&mut self, port: usize) {
        if self.ports[port].busy || !self.ports[port].up {
            return;
        }
        match self.fabric.ports[port].owner {
            Owner::Switch(sw, local) => self.switch_tx(sw, local, port),
            Owner::Host(h) => self.host_tx(h, port),
        }
    }

    fn wake(&mut self, port: usize, at: Time) {
        let at = at.max(self.now + Duration::from_nanos(1));
        if at < self.ports[port].wake_at {
            self.ports[port].wake_at = at;
            self.at(at, Ev::Wake { port: port as u32 });
            if let Owner::Switch(sw, _) = self.fabric.ports[port].owner {
                let s = &mut self.switches[sw];
                s.earliest_wake = s.earliest_wake.min(at);
            }
        }
    }

    // --- Switches ---

    fn switch_rx(&mut self, sw: usize, local: usize, buf: u32) {
        let s = &mut self.switches[sw];
        let Some(id) = s.slots.take(buf) else {
            s.rx_no_frame[local] += 1;
            self.arena.give(buf);
            return;
        };
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        s.switch.handle_frame(self.now, &mut pool, local, FrameId(id));
        self.after_switch(sw);
    }

    fn switch_tx(&mut self, sw: usize, local: usize, port: usize) {
        let now = self.now;
        let s = &mut self.switches[sw];
        self.batch.reset(1);
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        s.switch.poll_transmit(now, &mut pool, local, &mut self.batch);
        if let Some(f) = self.batch.frames().first().copied() {
            let buf = s.slots.give(f.id.0);
            if let Some(trigger) = f.xoff_trigger {
                s.switch.record_pause_sent(trigger, now);
            }
            self.send(port, buf, f.len as usize, f.pause);
        } else if let Some(w) = s.switch.poll_port_timeout(now, local) {
            self.wake(port, w);
        }
        // What it sent may have given other ports something to send: a frame that left
        // released its ingress group, which may owe its upstream a resume now. The
        // switch's loop would send that on its next turn, so the other ports look now,
        // as after an arrival.
        let ready = self.switches[sw].switch.poll_ready_ports();
        self.try_idle(sw, ready.iter().filter(|&l| l != local));
    }

    /// Switch `sw`'s ports `locals` (its own numbering) that are idle send what they may.
    fn try_idle(&mut self, sw: usize, locals: impl Iterator<Item = usize>) {
        let ports = &self.fabric.switches[sw].ports;
        for local in locals {
            if !self.ports[ports[local]].busy {
                self.try_tx(ports[local]);
            }
        }
    }

    /// After the switch took input: events to its slowpath, and every idle port that may
    /// have something new to send sends, as the switch's loop would find it on its next
    /// turn. Those are the ports the engine marked ready, and those whose timer is due at
    /// this very time but comes later in the queue; any other idle port would find
    /// nothing (it was looked at when it last went idle), so it is not asked again:
    /// asking every port made each arrival cost as much as the switch has ports.
    fn after_switch(&mut self, sw: usize) {
        self.switches[sw].switch.handle_timeout(self.now);
        self.pass_to_slowpath(sw);
        let ready = self.switches[sw].switch.poll_ready_ports();
        let fabric = self.fabric;
        let ports = &fabric.switches[sw].ports;
        if self.switches[sw].earliest_wake > self.now {
            // No timer of this switch is due: only the ready ports (usually one or two,
            // in a switch of dozens) need a look.
            self.try_idle(sw, ready.iter());
            return;
        }
        for (local, &port) in ports.iter().enumerate() {
            let p = &self.ports[port];
            if !p.busy && (ready.contains(local) || p.wake_at <= self.now) {
                self.try_tx(port);
            }
        }
        let earliest = ports.iter().map(|&p| self.ports[p].wake_at).min().unwrap_or(Time::MAX);
        self.switches[sw].earliest_wake = earliest;
    }

    fn pass_to_slowpath(&mut self, sw: usize) {
        let at = self.now + self.slowpath_delay;
        let s = &mut self.switches[sw];
        let was_empty = s.slow_in.is_empty();
        let mut any = false;
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        s.switch.poll_slowpath(&mut pool, |ev| {
            s.slow_in.push_back((at, ev));
            any = true;
            Ok(())
        });
        if any && was_empty {
            self.at(at, Ev::SlowIn { sw: sw as u32 });
        }
    }

    fn slow_in(&mut self, sw: usize) {
        let now = self.now;
        let s = &mut self.switches[sw];
        while s.slow_in.front().is_some_and(|(at, _)| *at <= now) {
            let (_, ev) = s.slow_in.pop_front().expect("checked");
            s.slowpath.handle_event(ev);
        }
        if let Some(&(at, _)) = s.slow_in.front() {
            self.at(at, Ev::SlowIn { sw: sw as u32 });
        }
        let s = &mut self.switches[sw];
        if s.slowpath.wants_release() {
            self.slow_release(sw);
        } else if let Some(at) = s.slowpath.looked(now) {
            self.at(at, Ev::SlowTick { sw: sw as u32 });
        }
    }

    fn slow_release(&mut self, sw: usize) {
        let now = self.now;
        let at = self.now + self.slowpath_delay;
        let s = &mut self.switches[sw];
        let was_empty = s.slow_out.is_empty();
        let switch = &s.switch;
        let released = s.slowpath.release(|e| switch.stopped(now, e));
        let any = !released.is_empty();
        for r in released {
            s.slow_out.push_back((at, *r));
        }
        if any && was_empty {
            self.at(at, Ev::SlowOut { sw: sw as u32 });
        }
        if let Some(at) = self.switches[sw].slowpath.looked(now) {
            self.at(at, Ev::SlowTick { sw: sw as u32 });
        }
    }

    fn slow_out(&mut self, sw: usize) {
        let now = self.now;
        let s = &mut self.switches[sw];
        let mut pool = Pool { slots: &mut s.slots, arena: &mut self.arena };
        let due = std::iter::from_fn(|| match s.slow_out.front() {
            Some(&(at, _)) if at <= now => s.slow_out.pop_front().map(|(_, f)| f),
            _ => None,
        });
        s.switch.handle_released(now, &mut pool, due);
        if let Some(&(at, _)) = s.slow_out.front() {
            self.at(at, Ev::SlowOut { sw: sw as u32 });
        }
        self.after_switch(sw);
    }

    // --- Hosts ---

    fn host_tx(&mut self, h: usize, port: usize) {
        let now = self.now;
        let host = &mut self.hosts[h];
        if let Some(buf) = host.control.pop_front() {
            self.send(port, buf, self.arena.len(buf), true);
            return;
        }
        let mut earliest = Time::MAX;
        for prio in (0..PRIORITIES).rev() {
            if host.queues[prio].is_empty() {
                continue;
            }
            let until = if host.honour { host.paused_until[prio] } else { Time::ZERO };
            if until > now {
                earliest = earliest.min(until);
                continue;
            }
            let buf = host.queues[prio].pop_front().expect("not empty");
            let waiting = std::mem::take(&mut host.waiting[prio]);
            for f in waiting {
                self.flows[f as usize].blocked = false;
                self.at(now, Ev::Flow { flow: f });
            }
            self.send(port, buf, self.arena.len(buf), false);
            return;
        }
        if earliest != Time::MAX {
            self.wake(port, earliest);
        }
    }

    fn host_rx(&mut self, h: usize, buf: u32) {
        let bytes = self.arena.head(buf);
        if is_mac_control(bytes) {
            if self.hosts[h].honour {
                let delay = self.fabric.hosts[h].response_delay;
                self.at(self.now + delay, Ev::HostPause { host: h as u32, buf });
            } else {
                self.arena.give(buf);
            }
            return;
        }
        if self.dcqcn.is_some() {
            if let Some(qp) = roce::cnp_dest_qp(bytes) {
                self.arena.give(buf);
                self.take_cnp(h, qp);
                return;
            }
        }
        if let Some(stamp) = read_stamp_in(bytes, self.arena.len(buf)) {
            let (flow, seq, tx_ns) = (usize::from(stamp.flow), stamp.seq, stamp.tx_ns);
            // A frame of a flow this host receives (a stray stamp is ignored).
            let ours = self.fabric.flows.get(flow).is_some_and(|f| f.to == h);
            if ours && stamp.ecn == 3 && self.dcqcn.is_some() {
                self.answer_ce(flow, h);
            }
            if let Some(f) = self.flows.get_mut(flow).filter(|_| ours) {
                let rx = &mut f.rx;
                rx.frames += 1;
                if seq < rx.next_seq {
                    rx.reordered += 1;
                } else {
                    rx.next_seq = seq + 1;
                }
                let now32 = since_epoch(self.now) as u32;
                rx.latency.record(Duration::from_nanos(u64::from(now32.wrapping_sub(tx_ns))));
                rx.last_ns = since_epoch(self.now);
                rx.bytes += self.arena.len(buf) as u64 + 4;
                rx.ce += u64::from(stamp.ecn == 3);
                if self.fabric.flows[flow].count == Some(rx.frames) {
                    rx.completed_ns = Some(rx.last_ns);
                }
            }
        }
        self.arena.give(buf);
    }

    fn host_pause(&mut self, h: usize, buf: u32) {
        let port = self.fabric.hosts[h].port;
        let spec = &self.fabric.ports[port];
        let decoded = pfc::decode(self.arena.head(buf), spec.mac);
        self.arena.give(buf);
        let Ok(frame) = decoded else { return };
        if !self.hosts[h].honour {
            return;
        }
        let host = &mut self.hosts[h];
        match frame.body {
            MacControl::Pfc(p) => {
                for (prio, quanta) in p.classes() {
                    host.paused_until[prio] = self.now + spec.speed.quanta_duration(quanta);
                }
            }
            MacControl::Pause { quanta } => {
                host.paused_until = [self.now + spec.speed.quanta_duration(quanta); PRIORITIES]
            }
        }
        self.try_tx(port);
    }

    fn flow_send(&mut self, i: usize) {
        let plan = &self.fabric.flows[i];
        let f = &mut self.flows[i];
        if let Some(cc) = f.cc.as_mut().filter(|cc| cc.pending.is_some_and(|p| p <= self.now)) {
            // This is (or comes after) the event scheduled for it.
            cc.pending = None;
        }
        if f.done || f.blocked {
            return;
        }
        let stop = EPOCH + plan.stop;
        if self.now >= stop || plan.count.is_some_and(|c| f.sent >= c) {
            f.done = true;
            return;
        }
        if let Some(cc) = f.cc.as_mut() {
            if self.now < cc.due {
                // Scheduled at an earlier rate, or woken by room in its queue: the frame is
                // due later.
                let due = cc.due;
                self.schedule_flow(i, due);
                return;
            }
        }
        let h = plan.from;
        let prio = usize::from(plan.priority);
        let host = &mut self.hosts[h];
        if host.queues[prio].len() >= self.fabric.hosts[h].queue_frames {
            f.blocked = true;
            host.waiting[prio].push(i as u32);
            return;
        }
        let seq = f.sent as u32;
        let template = match &f.last {
            Some(last) if plan.count == Some(f.sent + 1) => last,
            _ => &f.template,
        };
        let len = template.len();
        let buf = self.arena.take_for(len, template.zeros_from());
        template.write_head(self.arena.write(buf, len), seq, since_epoch(self.now) as u32);
        f.sent += 1;
        host.queues[prio].push_back(buf);
        match f.cc.as_mut() {
            // Paced at its reaction point's rate, one frame after another.
            Some(cc) => {
                cc.rp.handle_sent(self.now, len as u64);
                cc.due = self.now + cc.frame_time();
                let due = cc.due;
                self.schedule_flow(i, due);
            }
            // Paced from the flow's start: the k-th frame is due at start + k × interval,
            // or at once when the sender fell behind (its queue was full).
            None => {
                let due =
                    EPOCH + plan.start + Duration::from_nanos((f.sent as f64 * plan.interval.as_nanos() as f64) as u64);
                self.at(due.max(self.now), Ev::Flow { flow: i as u32 });
            }
        }
        self.try_tx(self.fabric.hosts[h].port);
    }

    // --- DCQCN at the hosts ---

    /// Host `h`, flow `i`'s receiver, got a CE-marked frame of it: a CNP back to the
    /// sender, unless one went less than `min_time_between_cnps` ago.
    fn answer_ce(&mut self, i: usize, h: usize) {
        let (Some(params), Some(cc)) = (self.dcqcn.as_ref(), self.flows[i].cc.as_mut()) else { return };
        if !cc.np.handle_marked(self.now, params) {
            return;
        }
        cc.cnps_sent += 1;
        let (sender, fabric) = (self.fabric.flows[i].from, self.fabric);
        let mac = |host: usize| fabric.ports[fabric.hosts[host].port].mac.0;
        let spec = roce::CnpSpec::for_flow(
            self.flows[i].template.id,
            (mac(h), host_ip(h)),
            (mac(sender), host_ip(sender)),
            roce::wire::DEFAULT_CNP_DSCP,
        );
        let frame = roce::cnp_frame(&spec);
        let buf = self.arena.take();
        self.arena.write(buf, frame.len()).copy_from_slice(&frame);
        // A NIC sends its CNPs whatever its data queues hold.
        self.hosts[h].queues[self.cnp_priority].push_back(buf);
        self.try_tx(self.fabric.hosts[h].port);
    }

    /// Host `h` got a CNP for queue pair `qp`: its flow's reaction point cuts.
    fn take_cnp(&mut self, h: usize, qp: u32) {
        let Some(i) = roce::qp_flow(qp).map(usize::from).filter(|&i| i < self.flows.len()) else { return };
        if self.fabric.flows[i].from != h {
            return;
        }
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        cc.rp.handle_cnp(self.now);
        self.schedule_rp(i);
    }

    /// Schedules flow `i`'s reaction point timer, if it is due before the one scheduled.
    fn schedule_rp(&mut self, i: usize) {
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        let Some(t) = cc.rp.poll_timeout() else { return };
        if cc.timer_at.is_none_or(|s| t < s) {
            cc.timer_at = Some(t);
            self.at(t.max(self.now), Ev::Rp { flow: i as u32 });
        }
    }

    /// Flow `i`'s reaction point timer event, due at `at` (stale if another was
    /// scheduled since). A rate that rose makes the next frame due sooner.
    fn rp_timer(&mut self, i: usize, at: Time) {
        let now = self.now;
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        if cc.timer_at != Some(at) {
            return;
        }
        cc.timer_at = None;
        cc.rp.handle_timeout(now);
        let sooner = now + cc.frame_time();
        if sooner < cc.due {
            cc.due = sooner;
            self.schedule_flow(i, sooner);
        }
        self.schedule_rp(i);
    }

    /// Makes sure a DCQCN flow has an event at `at` or before: one scheduled earlier
    /// looks again when it comes, so a flow has at most one pending.
    fn schedule_flow(&mut self, i: usize, at: Time) {
        let Some(cc) = self.flows[i].cc.as_mut() else { return };
        if cc.pending.is_some_and(|p| p <= at) {
            return;
        }
        cc.pending = Some(at);
        self.at(at.max(self.now), Ev::Flow { flow: i as u32 });
    }

    /// Flow `i`'s sending rate now under DCQCN, b/s, its CNPs taken and sent.
    pub fn dcqcn_state(&self, i: usize) -> Option<(f64, u64, u64)> {
        self.flows[i].cc.as_ref().map(|cc| (cc.rp.rate_bps(), cc.rp.cnps(), cc.cnps_sent))
    }

    // --- The monitor ---

    /// Takes `[monitor]`'s samples and schedules the next.
    fn sample(&mut self, at: Time) {
        let Some(m) = self.monitor.as_mut() else { return };
        for q in &mut m.queues {
            let sw = &self.switches[q.switch].switch;
            q.samples.push(std::array::from_fn(|prio| sw.egress_queue_bytes(q.local, prio)));
        }
        let period = m.every_ns as f64;
        for f in &mut m.flows {
            let state = &self.flows[f.flow];
            f.received_gbps.push((state.rx.bytes - f.bytes_before) as f64 * 8.0 / period);
            f.bytes_before = state.rx.bytes;
            if let Some(cc) = &state.cc {
                f.dcqcn_gbps.push(cc.rp.rate_bps() / 1e9);
            }
        }
        let next = at + Duration::from_nanos(m.every_ns);
        self.at(next, Ev::Sample);
    }

    /// What `[monitor]` sampled, if the scenario has one.
    pub fn series(&self) -> Option<crate::monitor::Series> {
        let m = self.monitor.as_ref()?;
        Some(m.series(|i| self.fabric.flows[i].id, self.dcqcn.is_some()))
    }

    // --- Scenario events ---

    fn action(&mut self, index: usize) {
        match self.actions[index].clone() {
            Action::Block(label) => self.set_blocked(&label, true),
            Action::Unblock(label) => self.set_blocked(&label, false),
            Action::LinkDown([a, b]) => self.set_link(&a, &b, false),
            Action::LinkUp([a, b]) => self.set_link(&a, &b, true),
            Action::Storm(spec) => {
                let Some(host) = self.fabric.host_named(&spec.host) else { return };
                let until = self.now + Duration::from_nanos((spec.duration_ms * 1e6).round() as u64);
                self.storms.push(Storm { spec, host, until });
                self.at(self.now, Ev::Storm { index: (self.storms.len() - 1) as u32 });
            }
            Action::IgnorePauses(name) => self.set_honour(&name, false),
            Action::HonourPauses(name) => self.set_honour(&name, true),
        }
    }

    fn set_blocked(&mut self, label: &str, blocked: bool) {
        let Some(port) = self.fabric.port_named(label) else { return };
        let Owner::Switch(sw, local) = self.fabric.ports[port].owner else { return };
        self.switches[sw].switch.set_blocked(local, blocked);
        self.after_switch(sw);
    }

    /// Both directions of the links between nodes `a` and `b` go down or up.
    fn set_link(&mut self, a: &str, b: &str, up: bool) {
        let fabric = self.fabric;
        let ends: Vec<usize> = fabric.link_ports(a, b).into_iter().flat_map(|p| [p, fabric.ports[p].peer]).collect();
        for &p in &ends {
            let st = &mut self.ports[p];
            if st.up != up {
                st.up = up;
                st.epoch += 1;
            }
        }
        if up {
            for p in ends {
                self.try_tx(p);
            }
        }
    }

    fn set_honour(&mut self, host: &str, honour: bool) {
        if let Some(h) = self.fabric.host_named(host) {
            self.hosts[h].honour = honour;
            self.try_tx(self.fabric.hosts[h].port);
        }
    }

    fn storm(&mut self, index: usize) {
        let s = &self.storms[index];
        if self.now >= s.until {
            return;
        }
        let prios: Priorities = s.spec.priorities.iter().map(|&p| usize::from(p)).collect();
        let port = self.fabric.hosts[s.host].port;
        let buf = self.arena.take();
        pfc::encode(
            self.arena.write(buf, pfc::MIN_FRAME_LEN),
            self.fabric.ports[port].mac,
            &MacControl::Pfc(Pfc::pause(prios, s.spec.quanta)),
        );
        self.hosts[s.host].control.push_back(buf);
        let next = self.now + Duration::from_nanos((s.spec.interval_us * 1e3).round() as u64);
        self.at(next, Ev::Storm { index: index as u32 });
        self.try_tx(port);
    }

    // --- Results ---

    pub fn switch(&self, sw: usize) -> &Switch {
        &self.switches[sw].switch
    }

    pub fn slowpath(&self, sw: usize) -> &Slowpath {
        &self.switches[sw].slowpath
    }

    pub fn free_frames(&self, sw: usize) -> usize {
        self.switches[sw].slots.free_count()
    }

    pub fn rx_no_frame(&self, sw: usize, port: usize) -> u64 {
        self.switches[sw].rx_no_frame[port]
    }

    pub fn sent(&self, flow: usize) -> u64 {
        self.flows[flow].sent
    }

    pub fn received(&self, flow: usize) -> &Received {
        &self.flows[flow].rx
    }

    /// Frames on a link: sent, of which pause frames, lost to the link going down.
    pub fn link_counts(&self, port: usize) -> (u64, u64, u64, u64) {
        let p = &self.link_counts[port];
        (p.tx_frames, p.tx_bytes, p.pause_frames, p.lost_link_down)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn template(wire_size: usize, vlan: Option<(u16, u8)>, roce: bool) -> FlowTemplate {
        FlowTemplate::build(&TemplateSpec { roce, ..TemplateSpec::example(wire_size, vlan) }).expect("a valid flow")
    }

    fn is_long(id: u32) -> bool {
        matches!(Size::of(id), Size::Long(_))
    }

    /// Writes one frame of `t` into a buffer chosen for it and one into a long buffer.
    fn both(arena: &mut Arena, t: &FlowTemplate) -> (u32, u32) {
        let chosen = arena.take_for(t.len(), t.zeros_from());
        let long = arena.take();
        for b in [chosen, long] {
            t.write_head(arena.write(b, t.len()), 41, 999);
        }
        (chosen, long)
    }

    #[test]
    fn a_test_frame_takes_one_cache_line_and_reads_as_it_would_from_two() {
        let mut arena = Arena::default();
        for (size, vlan) in [(1518, None), (1518, Some((100, 5))), (64, None), (9000, None)] {
            let t = template(size, vlan, false);
            let (short, long) = both(&mut arena, &t);
            assert!(!is_long(short), "{size} B, tag {vlan:?}: a short buffer");
            assert_eq!(arena.len(short), arena.len(long));
            let (a, b) = (arena.head(short), arena.head(long));
            assert_eq!(a, &b[..a.len()], "the same first bytes");
            assert!(b[a.len()..].iter().all(|&x| x == 0), "and only zeros past them");
            assert_eq!(read_stamp_in(a, t.len()), read_stamp_in(b, t.len()));
            assert!(read_stamp_in(a, t.len()).is_some());
        }
    }

    #[test]
    fn frames_a_short_buffer_would_cut_or_hold_in_part_take_long_ones() {
        let mut arena = Arena::default();
        // A RoCEv2 frame ends in its ICRC; a 100-byte frame fits a long buffer whole,
        // where a short one would hold only its start.
        for t in [template(1518, None, true), template(100, None, false)] {
            let (chosen, _) = both(&mut arena, &t);
            assert!(is_long(chosen), "{} B: a long buffer", t.len());
        }
    }

    #[test]
    fn a_copy_keeps_its_buffers_size_and_bytes_and_freed_buffers_are_reused_by_size() {
        let mut arena = Arena::default();
        let (short, long) = both(&mut arena, &template(1518, None, false));
        for b in [short, long] {
            let copy = arena.duplicate(b);
            assert_eq!(is_long(copy), is_long(b));
            assert_eq!((arena.len(copy), arena.head(copy)), (arena.len(b), arena.head(b)));
            arena.give(copy);
            let again = if is_long(b) { arena.take() } else { arena.take_for(1514, Some(54)) };
            assert_eq!(again, copy);
        }
    }
}
