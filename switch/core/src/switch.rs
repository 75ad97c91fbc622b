//! The switch engine: every forwarding and flow-control decision, with no IO.
//!
//! The dataplane hands it received frames ([`Switch::receive`]) and asks it what to put on
//! each port's tx ring ([`Switch::transmit`]); frame bytes live in a [`FramePool`] the
//! caller owns (the UMEM in the dataplane, plain vectors in tests). Time is passed in.

use std::time::Duration;

use super::buffer::SharedBuffer;
use super::checking::CheckingMessage;
use super::classify::Classifier;
use super::config::{Config, DcfitConfig, DeadlockResolution, FrameCaps, GroupProfile, PauseMode, PortRole, Scheduler};
use super::dcfit::{self, Cause, CheckChoice, DeadlockTracker, PortChecks};
use super::ether::{self, FrameHeader, IpAt};
use super::fdb::{Fdb, Learned, PortId};
use super::histogram::Histogram;
use super::mac::MacAddr;
use super::pause::EgressPause;
use super::pfc::{self, MacControl, Pfc, PRIORITIES};
use super::pfcwd::{Observed, PortWatchdog, WatchdogAction, WatchdogEvent, WatchdogEvents};
use super::priorities::Priorities;
use super::queue::{Fifo, FrameId, FrameTable, NO_PORT};
use super::ring::Ring;
use super::shaper::Shaper;
use super::slowpath::{HeldFrame, Released, ToSlowpath};
use super::speed::Speed;
use super::stats::{
    CheckCounters, DropReason, PortCounters, PortStats, PrioCounters, PrioStats, SpeedSource, SwitchStats, TagCounters,
    TagRow, TaggerStats, WatchdogStats, XoffEpisode,
};
use super::tagging::{TagTable, TAGS};
use super::time::Time;
use super::traffic_map::{TrafficMap, TrafficMapView};

/// Frame buffers owned by the caller. Frames are identified by index.
pub trait FramePool {
    /// A free frame for a frame the switch builds itself.
    fn alloc(&mut self) -> Option<FrameId>;
    /// Gives a frame back.
    fn free(&mut self, id: FrameId);
    /// The frame's current contents.
    fn bytes(&self, id: FrameId) -> &[u8];
    /// Sets the frame's length and returns its contents for writing.
    fn write(&mut self, id: FrameId, len: usize) -> &mut [u8];
    /// The frame's contents for rewriting in place (its length unchanged).
    fn bytes_mut(&mut self, id: FrameId) -> &mut [u8];
    /// Copies the contents of `from` into `to`.
    fn copy(&mut self, from: FrameId, to: FrameId);
    /// How many frames [`FramePool::alloc`] could hand out now.
    fn free_frames(&self) -> usize;
    /// When a received frame arrived, if the receive path stamped it; else the switch
    /// takes the time it was handed over.
    fn arrival(&self, _id: FrameId) -> Option<Time> {
        None
    }
}

/// One frame to put on a tx ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFrame {
    pub id: FrameId,
    pub len: u32,
    /// For a pause frame sent because a queue crossed XOFF: when that frame was received.
    pub xoff_trigger: Option<Time>,
}

/// Frames for one port's tx ring, filled by [`Switch::transmit`]. Never allocates.
#[derive(Debug)]
pub struct TxBatch {
    frames: [TxFrame; TxBatch::CAPACITY],
    len: usize,
    limit: usize,
}

impl TxBatch {
    pub const CAPACITY: usize = 256;

    pub fn new() -> TxBatch {
        let empty = TxFrame { id: FrameId(0), len: 0, xoff_trigger: None };
        TxBatch { frames: [empty; TxBatch::CAPACITY], len: 0, limit: TxBatch::CAPACITY }
    }

    /// Empties the batch and accepts at most `limit` frames (the room on the ring).
    pub fn reset(&mut self, limit: usize) {
        self.len = 0;
        self.limit = limit.min(TxBatch::CAPACITY);
    }

    fn has_room(&self) -> bool {
        self.len < self.limit
    }

    fn push(&mut self, f: TxFrame) {
        self.frames[self.len] = f;
        self.len += 1;
    }

    pub fn frames(&self) -> &[TxFrame] {
        &self.frames[..self.len]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for TxBatch {
    fn default() -> TxBatch {
        TxBatch::new()
    }
}

/// How a received frame was classified: the priority it is charged to at ingress and,
/// under a Tagger table, its tag.
#[derive(Clone, Copy, Debug)]
struct Class {
    prio: u8,
    tag: Tagged,
    ip: Option<IpAt>,
    vlan: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tagged {
    /// No table: the priority is the frame's, unchanged on every egress.
    Off,
    /// Matched the ingress rule for this tag: lossless while the egress has a rewrite rule.
    Lossless(u8),
    /// Matched no rule (or has no IP header): the table's default, lossy.
    Default,
}

/// Where a classified frame goes on one egress: the ingress group it is charged to, the
/// egress queue it waits in, and the tag it leaves with (when it is rewritten).
#[derive(Clone, Copy, Debug)]
struct Placement {
    group: u8,
    queue: u8,
    tag: Option<u8>,
    /// The tag comes from a rewrite rule (not the default).
    by_rule: bool,
}

/// Tag counters per (ingress port, tag); the slot after the last tag is for frames
/// without an IP header.
const TAG_SLOTS: usize = TAGS + 1;

/// DRR quantum per unit of weight.
const DRR_QUANTUM: u32 = 1536;
/// Frames a flood copy leaves in the pool, for the pause frames the switch must still
/// be able to send.
pub const PAUSE_RESERVE: usize = 64;
/// Shaper burst: how far ahead of the wire frames may be handed to the kernel.
const SHAPER_BURST: Duration = Duration::from_micros(30);
/// How much wire time a port with frames waiting may make up after a long loop turn or
/// a stall: longer than a turn with large frames, short enough that what a port sends
/// after a stall stays a brief burst.
const SHAPER_CATCH_UP: Duration = Duration::from_millis(1);
const FDB_AGING_PERIOD: Duration = Duration::from_secs(1);
/// XOFF episodes remembered per port.
const EPISODES: usize = 64;
/// Arrival times of pausing PFC frames remembered per port.
const PAUSE_ARRIVALS: usize = 64;
/// Own checking messages remembered per port: more than are in flight around a cycle.
const ORIGINATED: usize = 16;
/// A priority counts as flowing when a pause arrives if it sent within this long before.
const RESPONSE_WINDOW: Duration = Duration::from_millis(1);

/// A checking message this switch originated: when, and for which paused groups.
#[derive(Clone, Copy, Debug, Default)]
struct Originated {
    seq: u32,
    at: Time,
    groups: Priorities,
}

#[derive(Debug)]
struct Drr {
    weights: [u32; PRIORITIES],
    deficit: [u32; PRIORITIES],
    current: usize,
    credited: bool,
}

/// Pauses this port owes its link partner, built into a frame at the next transmit.
#[derive(Debug, Default)]
struct PendingPause {
    pause: Priorities,
    resume: Priorities,
    /// Receive time of the frame that crossed XOFF, for the reaction-time histogram.
    trigger: Option<Time>,
    refresh_at: [Time; PRIORITIES],
}

#[derive(Debug)]
struct Port {
    name: String,
    iface: String,
    mac: MacAddr,
    speed: Speed,
    mode: PauseMode,
    role: PortRole,
    /// The link carries frames (see [`Switch::set_link`]).
    link_up: bool,
    flood: bool,
    max_frame: usize,
    refresh: Duration,
    shaper: Shaper,
    pause: EgressPause,
    queues: [Fifo; PRIORITIES],
    control: Fifo,
    drr: Option<Drr>,
    pending: PendingPause,
    /// Per priority: when a received pause ends, until its next frame goes out.
    resume_due: [Option<Time>; PRIORITIES],
    /// Per priority: since when this port has been pausing its upstream (XOFF).
    xoff_since: [Time; PRIORITIES],
    /// Per priority: the longest a frame arrived after its XOFF episode began.
    upstream_response: [Duration; PRIORITIES],
    /// Per priority: when its last frame was handed out for transmission.
    last_tx: [Time; PRIORITIES],
    /// The latest XOFF episodes.
    episodes: Ring<XoffEpisode, EPISODES>,
    /// When the latest pausing PFC frames arrived (ns): a test tool matches them with
    /// when it sent its pauses, to tell the testbed's delay from the switch's.
    pause_arrivals: Ring<u64, PAUSE_ARRIVALS>,
    /// The latest messages originated on this port since it last stopped pausing its
    /// upstream (emptied when the pausing stops): a returning message not among them no
    /// longer proves a standing cycle; one among them is judged by the groups it left for
    /// and what moved since.
    originated: Ring<Originated, ORIGINATED>,
    /// Per ingress group: when a frame charged to it last left the switch.
    departed: [Option<Time>; PRIORITIES],
    /// Deadlock resolution: drop these priorities' frames for this egress until then.
    deadlock_drop: Option<(Time, Priorities)>,
    pfcwd: PortWatchdog,
    counters: PortCounters,
    checks: CheckCounters,
    prio: [PrioCounters; PRIORITIES],
}

#[derive(Debug)]
pub struct Switch {
    name: String,
    switch_id: u32,
    started: Time,
    ports: Vec<Port>,
    fdb: Fdb,
    buffer: SharedBuffer,
    frames: FrameTable,
    classifier: Classifier,
    tags: Option<TagTable>,
    tag_counters: Vec<TagCounters>,
    lossless: Priorities,
    quanta: u16,
    lossy_queue_bytes: u64,
    frame_caps: FrameCaps,
    next_aging: Time,
    reaction: Histogram,
    resume_lateness: Histogram,
    pause_response: Histogram,
    /// Ports whose frames go to the slowpath (`ctl block`): kept here only; the slowpath
    /// reads it through [`Switch::stopped`].
    blocked: u64,
    map: TrafficMap,
    dcfit: DcfitConfig,
    port_checks: Vec<PortChecks>,
    tracker: DeadlockTracker,
    check_seq: u32,
    deadlocks: u64,
    /// Events for the slowpath, drained by the dataplane after every turn.
    outbox: Vec<ToSlowpath>,
    /// What the PFC watchdog did, for the shell to log (bounded).
    pfcwd_events: WatchdogEvents,
    /// The latest time the switch was given (for events timed where no time is passed).
    clock: Time,
}

impl Switch {
    /// A switch for `config` (validated, with every port's MAC filled in) holding frames
    /// with ids below `frame_capacity`, applying `tags` if given (compiled for this config
    /// by [`TagTable::apply`], which makes its priorities the lossless ones).
    pub fn new(config: &Config, tags: Option<TagTable>, frame_capacity: u32, now: Time) -> Switch {
        let quanta = config.pfc.quanta;
        let ports = config
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let refresh = match config.pfc.refresh_us {
                    Some(us) => Duration::from_micros(us),
                    None => p.speed().quanta_duration(quanta) / 2,
                };
                Port {
                    name: config.port_name(i).to_string(),
                    iface: p.iface.clone(),
                    // The source of our pause frames: never all-zero (some peers ignore that).
                    mac: p.mac.filter(|m| !m.is_zero() && !m.is_multicast()).unwrap_or(MacAddr::local(i as u64 + 1)),
                    speed: p.speed(),
                    mode: p.pause_mode,
                    role: p.role,
                    link_up: true,
                    flood: p.flood,
                    max_frame: p.max_frame,
                    refresh,
                    shaper: Shaper::new(p.speed(), SHAPER_BURST, SHAPER_CATCH_UP),
                    pause: EgressPause::default(),
                    queues: Default::default(),
                    control: Fifo::default(),
                    drr: match &p.scheduler {
                        Scheduler::Strict => None,
                        Scheduler::Drr { weights } => {
                            Some(Drr { weights: *weights, deficit: [0; PRIORITIES], current: 0, credited: false })
                        }
                    },
                    pending: PendingPause::default(),
                    resume_due: [None; PRIORITIES],
                    xoff_since: [Time::ZERO; PRIORITIES],
                    upstream_response: [Duration::ZERO; PRIORITIES],
                    last_tx: [Time::ZERO; PRIORITIES],
                    episodes: Ring::default(),
                    pause_arrivals: Ring::default(),
                    originated: Ring::default(),
                    departed: [None; PRIORITIES],
                    deadlock_drop: None,
                    pfcwd: PortWatchdog::new(&config.pfcwd.with(p.pfcwd.as_ref())),
                    counters: PortCounters::default(),
                    checks: CheckCounters::default(),
                    prio: Default::default(),
                }
            })
            .collect();
        let mut fdb = Fdb::new(config.fdb.max_entries, Duration::from_secs(config.fdb.aging_s));
        for e in &config.fdb_entries {
            if let Some(port) = config.port_index(&e.port) {
                fdb.add_static(e.mac, port);
            }
        }
        let n = config.ports.len();
        let wide = GroupProfile {
            xoff: config.buffer.xoff_rule(),
            xon: config.buffer.xon_rule(),
            headroom_bytes: config.buffer.headroom_bytes,
        };
        let profiles = (0..n).map(|port| std::array::from_fn(|prio| config.group_profile(port, prio as u8))).collect();
        let buffer = SharedBuffer::new(config.buffer.shared_bytes, wide, profiles);
        Switch {
            name: config.name.clone(),
            switch_id: config.switch_id(),
            started: now,
            ports,
            fdb,
            buffer,
            frames: FrameTable::new(frame_capacity),
            classifier: Classifier::new(&config.classify),
            lossless: tags.as_ref().map_or(config.lossless(), TagTable::lossless),
            tag_counters: if tags.is_some() { vec![TagCounters::default(); n * TAG_SLOTS] } else { Vec::new() },
            tags,
            quanta,
            lossy_queue_bytes: config.buffer.lossy_queue_bytes,
            frame_caps: config.frame_caps(frame_capacity, config.ports.len()),
            next_aging: now + FDB_AGING_PERIOD,
            reaction: Histogram::default(),
            resume_lateness: Histogram::default(),
            pause_response: Histogram::default(),
            blocked: 0,
            map: TrafficMap::new(n),
            dcfit: config.dcfit.clone(),
            port_checks: vec![PortChecks::default(); n],
            tracker: DeadlockTracker::default(),
            check_seq: 0,
            deadlocks: 0,
            outbox: Vec::with_capacity(n * 256 + 64),
            pfcwd_events: WatchdogEvents::default(),
            clock: now,
        }
    }

    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    pub fn fdb(&self) -> &Fdb {
        &self.fdb
    }

    pub fn fdb_mut(&mut self) -> &mut Fdb {
        &mut self.fdb
    }

    fn is_lossless(&self, prio: usize) -> bool {
        self.lossless.contains(prio)
    }

    /// Takes ownership of frame `id`, received on `port`: it is queued for transmission
    /// or given back to the pool.
    pub fn receive<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId, id: FrameId) {
        self.clock = self.clock.max(now);
        // Pauses and XOFF reactions count from when the frame arrived, not from when the
        // loop got to it (it may have been asleep).
        let arrived = pool.arrival(id).filter(|&t| t <= now).unwrap_or(now);
        let data = pool.bytes(id);
        let len = data.len();
        let Some(header) = ether::parse_header(data) else {
            self.ports[port].counters.drops.count(DropReason::Runt);
            pool.free(id);
            return;
        };
        if header.ethertype == pfc::MAC_CONTROL_ETHERTYPE {
            let decoded = pfc::decode(data, self.ports[port].mac);
            pool.free(id);
            self.on_mac_control(arrived, port, decoded);
            return;
        }
        let p = &mut self.ports[port];
        p.counters.rx_frames += 1;
        p.counters.rx_bytes += len as u64;
        if let Some(reason) = reject_reason(&header, len, p.max_frame) {
            p.counters.drops.count(reason);
            pool.free(id);
            return;
        }
        if !header.src.is_zero() {
            match self.fdb.learn(header.src, port, now) {
                Learned::Moved => p.counters.fdb_moves += 1,
                Learned::TableFull => p.counters.fdb_full += 1,
                Learned::New | Learned::Refreshed | Learned::Static => {}
            }
        }
        let class = self.classify(port, &header);
        self.ports[port].prio[usize::from(class.prio)].rx_frames += 1;
        let destination = if header.dst.is_multicast() { None } else { self.fdb.lookup(header.dst, now) };
        match destination {
            Some(egress) if egress == port => self.drop_frame(pool, port, id, DropReason::Filtered),
            Some(egress) => self.enqueue(arrived, pool, port, egress, id, len, class),
            None => {
                if !header.dst.is_multicast() {
                    self.ports[port].counters.unknown_unicast_flooded += 1;
                }
                self.flood(arrived, pool, port, id, len, class)
            }
        }
    }

    /// The priority a frame is charged to at ingress: its PCP or mapped DSCP, or under a
    /// Tagger table the priority of its tag's ingress rule (else the table's default).
    fn classify(&mut self, port: PortId, h: &FrameHeader) -> Class {
        let (ip, vlan) = (h.ip, h.pcp.is_some());
        let Some(table) = &self.tags else {
            return Class { prio: self.classifier.priority(h), tag: Tagged::Off, ip, vlan };
        };
        let slot = port * TAG_SLOTS + h.dscp.map_or(TAGS, usize::from);
        match h.dscp.and_then(|tag| Some((tag, table.ingress(port, tag)?))) {
            Some((tag, prio)) => {
                self.tag_counters[slot].classified += 1;
                Class { prio, tag: Tagged::Lossless(tag), ip, vlan }
            }
            None => {
                self.tag_counters[slot].default_ingress += 1;
                Class { prio: table.default_priority, tag: Tagged::Default, ip, vlan }
            }
        }
    }

    /// Where a frame of `class` from `ingress` waits on `egress`, and the tag it leaves with.
    fn place(&mut self, ingress: PortId, egress: PortId, class: Class) -> Placement {
        let Some(table) = &self.tags else {
            return Placement { group: class.prio, queue: class.prio, tag: None, by_rule: false };
        };
        let (prio, tag) = (table.default_priority, table.default_tag);
        let default = Placement { group: prio, queue: prio, tag: Some(tag), by_rule: false };
        match class.tag {
            Tagged::Off | Tagged::Default => default,
            Tagged::Lossless(tag) => match table.rewrite(ingress, tag, egress) {
                Some(next) => {
                    Placement { group: class.prio, queue: table.priority_of(next), tag: Some(next), by_rule: true }
                }
                None => {
                    self.tag_counters[ingress * TAG_SLOTS + usize::from(tag)].default_egress += 1;
                    default
                }
            },
        }
    }

    /// Writes the tag (DSCP) and, in a VLAN-tagged frame, the egress priority (PCP).
    fn rewrite<P: FramePool>(&mut self, pool: &mut P, ingress: PortId, id: FrameId, class: Class, at: Placement) {
        let Some(tag) = at.tag else { return };
        let frame = pool.bytes_mut(id);
        if class.vlan {
            ether::set_pcp(frame, at.queue);
        }
        let changed = class.ip.is_some_and(|ip| ether::set_dscp(frame, ip, tag));
        if let (true, true, Tagged::Lossless(from)) = (changed, at.by_rule, class.tag) {
            self.tag_counters[ingress * TAG_SLOTS + usize::from(from)].rewritten += 1;
        }
    }

    fn flood<P: FramePool>(&mut self, now: Time, pool: &mut P, ingress: PortId, id: FrameId, len: usize, class: Class) {
        let targets: u64 = self
            .ports
            .iter()
            .enumerate()
            .filter(|(i, p)| *i != ingress && p.flood && p.link_up)
            .fold(0, |m, (i, _)| m | (1 << i));
        if targets == 0 {
            self.drop_frame(pool, ingress, id, DropReason::Filtered);
            return;
        }
        let last = 63 - targets.leading_zeros() as usize;
        for egress in (0..self.ports.len()).filter(|e| targets & (1 << e) != 0) {
            if egress == last {
                self.enqueue(now, pool, ingress, egress, id, len, class);
            } else if let Some(copy) = (pool.free_frames() > PAUSE_RESERVE).then(|| pool.alloc()).flatten() {
                pool.copy(id, copy);
                self.enqueue(now, pool, ingress, egress, copy, len, class);
            } else {
                self.ports[ingress].counters.drops.count(DropReason::NoBuffer);
            }
        }
    }

    fn drop_frame<P: FramePool>(&mut self, pool: &mut P, port: PortId, id: FrameId, reason: DropReason) {
        self.ports[port].counters.drops.count(reason);
        pool.free(id);
    }

    /// Admits a frame against its ingress group and queues it on `egress`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue<P: FramePool>(
        &mut self,
        now: Time,
        pool: &mut P,
        ingress: PortId,
        egress: PortId,
        id: FrameId,
        len: usize,
        class: Class,
    ) {
        if !self.ports[egress].link_up {
            self.ports[egress].counters.drops.count(DropReason::LinkDown);
            pool.free(id);
            return;
        }
        let at = self.place(ingress, egress, class);
        let (p, q) = (usize::from(at.group), usize::from(at.queue));
        let bytes = len as u64;
        let admitted = if self.is_lossless(p) {
            let a = self.buffer.admit_lossless(ingress, p, bytes);
            if a.crossed_xoff {
                self.request_pause(now, ingress, p);
            }
            if self.buffer.group(ingress, p).xoff {
                let port = &mut self.ports[ingress];
                let after = now.saturating_since(port.xoff_since[p]);
                port.upstream_response[p] = port.upstream_response[p].max(after);
            }
            if !a.admitted {
                self.ports[ingress].prio[p].lossless_drops += 1;
                self.drop_frame(pool, ingress, id, DropReason::Lossless);
            }
            a.admitted
        } else if self.lossy_frames(egress) >= self.frame_caps.lossy_port {
            self.ports[ingress].prio[p].lossy_drops += 1;
            self.drop_frame(pool, ingress, id, DropReason::FrameCap);
            false
        } else {
            let queued = self.ports[egress].queues[q].bytes();
            let ok = self.buffer.admit_lossy(ingress, p, bytes, queued, self.lossy_queue_bytes);
            if !ok {
                self.ports[ingress].prio[p].lossy_drops += 1;
                self.drop_frame(pool, ingress, id, DropReason::Lossy);
            }
            ok
        };
        if !admitted {
            return;
        }
        self.rewrite(pool, ingress, id, class, at);
        self.frames.set(id, len as u32, ingress as u16, at.group, now);
        if self.dropping(now, egress).contains(q) {
            // A deadlock is being broken, or a storm is being cut off, on this queue.
            self.discard(pool, egress, q, id);
            return;
        }
        let e = &self.ports[egress];
        // Paused takes precedence over blocked: a paused priority queues as usual. But a
        // frame never overtakes earlier frames of its (egress, priority) the slowpath holds.
        let paused = e.pause.paused(now).contains(q);
        let to_slowpath = self.map.held_at_slowpath(egress, q) > 0 || (self.blocked & (1 << egress) != 0 && !paused);
        if to_slowpath {
            if self.map.held_total() >= self.frame_caps.slowpath {
                self.ports[ingress].counters.drops.count(DropReason::FrameCap);
                self.give_back(pool, id);
                return;
            }
            self.map.handed_to_slowpath(ingress, egress, q);
            let held =
                HeldFrame { id, len: len as u32, ingress: ingress as u16, egress: egress as u16, prio: at.queue };
            self.outbox.push(ToSlowpath::Held(held));
        } else {
            self.ports[egress].queues[q].push(&mut self.frames, id);
            self.map.queued(ingress, egress);
        }
    }

    /// Priorities whose frames for `port` are dropped now: a deadlock being broken
    /// (DCFIT's `drop` resolution) or a PFC storm being cut off (the watchdog's `drop`).
    fn dropping(&self, now: Time, port: PortId) -> Priorities {
        let p = &self.ports[port];
        let deadlock = p.deadlock_drop.filter(|(until, _)| now < *until).map_or(Priorities::NONE, |(_, prios)| prios);
        deadlock | p.pfcwd.dropping()
    }

    /// Frames in `egress`'s lossy queues.
    fn lossy_frames(&self, egress: PortId) -> u32 {
        let queues = &self.ports[egress].queues;
        (0..PRIORITIES).filter(|&q| !self.is_lossless(q)).map(|q| queues[q].len()).sum()
    }

    /// Drops an admitted frame bound for queue `q` of `egress` (see [`Switch::dropping`]).
    fn discard<P: FramePool>(&mut self, pool: &mut P, egress: PortId, q: usize, id: FrameId) {
        self.ports[egress].counters.drops.watchdog += 1;
        if self.ports[egress].pfcwd.dropping().contains(q) {
            self.ports[egress].pfcwd.note_dropped(q);
        }
        self.give_back(pool, id);
    }

    /// Frees an admitted frame that will not be sent: its buffer is released as if it had
    /// been (which may resume its ingress).
    fn give_back<P: FramePool>(&mut self, pool: &mut P, id: FrameId) {
        let meta = *self.frames.get(id);
        if meta.ingress != NO_PORT {
            let (ingress, group) = (usize::from(meta.ingress), usize::from(meta.prio));
            if self.buffer.release(ingress, group, u64::from(meta.len)) {
                self.request_resume(ingress, group);
            }
        }
        pool.free(id);
    }

    /// An event from [`Switch::drain_outbox`] the shell could not deliver to the slowpath.
    /// A held frame comes back here rather than leak: its pair's mark, its buffer charge
    /// and its frame are given back, and it is counted as dropped at its ingress.
    pub fn slowpath_refused<P: FramePool>(&mut self, pool: &mut P, event: ToSlowpath) {
        if let ToSlowpath::Held(f) = event {
            let (i, e, q) = (usize::from(f.ingress), usize::from(f.egress), usize::from(f.prio));
            self.map.dropped_from_slowpath(i, e, q);
            self.ports[i].counters.drops.count(DropReason::SlowpathRefused);
            self.give_back(pool, f.id);
        }
    }

    /// Blocks `port` (its frames go to the slowpath) or unblocks it. Unblocking tells the
    /// slowpath to give back what it holds; until it has, new frames for the port's
    /// queues still go through it, behind the held ones.
    /// Replaces the frame caps [`Switch::new`] derived for one rx socket per port: the
    /// shell, which knows how many rings it bound, passes [`Config::frame_caps`] for them.
    pub fn set_frame_caps(&mut self, caps: FrameCaps) {
        self.frame_caps = caps;
    }

    pub fn set_blocked(&mut self, port: PortId, blocked: bool) {
        if blocked {
            self.blocked |= 1 << port;
        } else if self.is_blocked(port) {
            self.blocked &= !(1 << port);
            self.outbox.push(ToSlowpath::Unblocked { port: port as u16 });
        }
    }

    pub fn is_blocked(&self, port: PortId) -> bool {
        self.blocked & (1 << port) != 0
    }

    /// A frame the slowpath held comes back: it joins its egress queue (it was admitted
    /// when it arrived and has stayed charged to its ingress group since), unless its queue
    /// is being emptied to break a deadlock.
    pub fn reinject<P: FramePool>(&mut self, now: Time, pool: &mut P, released: Released) {
        let f = released.frame;
        let (i, e, p) = (usize::from(f.ingress), usize::from(f.egress), usize::from(f.prio));
        if !self.ports[e].link_up {
            self.map.dropped_from_slowpath(i, e, p);
            self.ports[e].counters.drops.count(DropReason::LinkDown);
            self.give_back(pool, f.id);
            return;
        }
        if self.dropping(now, e).contains(p) {
            self.map.dropped_from_slowpath(i, e, p);
            self.discard(pool, e, p, f.id);
            return;
        }
        self.map.returned_from_slowpath(i, e, p);
        let port = &mut self.ports[e];
        self.frames.get_mut(f.id).last_of_pair = released.last_of_pair;
        port.queues[p].push(&mut self.frames, f.id);
        self.map.queued(i, e);
    }

    /// Records that a message with `seq` was originated on `port` (as pause frames do;
    /// for tests that stage a cycle without sending the pause that started it).
    #[cfg(test)]
    pub(crate) fn note_originated(&mut self, port: PortId, seq: u32, groups: Priorities) {
        self.check_seq = self.check_seq.max(seq);
        self.remember_originated(port, seq, groups);
    }

    fn remember_originated(&mut self, port: PortId, seq: u32, groups: Priorities) {
        let p = &mut self.ports[port];
        p.originated.push(Originated { seq, at: self.clock, groups });
    }

    /// Events for the slowpath since the last call.
    pub fn drain_outbox(&mut self) -> std::vec::Drain<'_, ToSlowpath> {
        self.outbox.drain(..)
    }

    /// Egress ports where `ingress`'s traffic waits (a row of the traffic map).
    pub fn traffic_map_row(&self, ingress: PortId) -> u64 {
        self.map.row(ingress)
    }

    /// The traffic map with port names (`ctl traffic-map`).
    pub fn traffic_map(&self) -> TrafficMapView {
        self.map.view(self.ports.iter().map(|p| p.name.clone()).collect())
    }

    /// The ports' names, in order.
    pub fn port_names(&self) -> Vec<String> {
        self.ports.iter().map(|p| p.name.clone()).collect()
    }

    /// The egress queues at `egress` that frames of `ingress` charged to
    /// `groups` wait in: the same priorities, or under a Tagger table their new tags'.
    fn egress_queues(&self, ingress: PortId, groups: Priorities, egress: PortId) -> Priorities {
        self.tags.as_ref().map_or(groups, |t| t.egress_queues(ingress, groups, egress))
    }

    /// Of `groups` (priorities `ingress` pauses its upstream for), those whose traffic
    /// waits at `egress` in one of `queues`: DCFIT follows a pause only
    /// through the queue the paused traffic actually waits in.
    fn groups_waiting_in(&self, ingress: PortId, groups: Priorities, egress: PortId, queues: Priorities) -> Priorities {
        if ingress == egress || self.map.row(ingress) & (1 << egress) == 0 {
            return Priorities::NONE;
        }
        groups
            .iter()
            .filter(|&g| !(self.egress_queues(ingress, Priorities::only(g), egress) & queues).is_empty())
            .collect()
    }

    /// Priorities for which `port` is pausing its upstream.
    pub fn xoff(&self, port: PortId) -> Priorities {
        self.lossless.iter().filter(|&p| self.buffer.group(port, p).xoff).collect()
    }

    /// Priorities the link partner has paused on `port`.
    pub fn paused(&self, now: Time, port: PortId) -> Priorities {
        self.ports[port].pause.paused(now)
    }

    /// A lossless group of `port` crossed XOFF: the port must pause its link partner.
    fn request_pause(&mut self, now: Time, port: PortId, prio: usize) {
        let p = &mut self.ports[port];
        p.xoff_since[prio] = now;
        p.episodes.push(XoffEpisode { prio: prio as u8, start_ns: now.as_nanos(), end_ns: 0 });
        let pending = &mut self.ports[port].pending;
        pending.pause.insert(prio);
        pending.resume.remove(prio);
        pending.trigger.get_or_insert(now);
    }

    fn request_resume(&mut self, port: PortId, prio: usize) {
        let now = self.clock;
        let p = &mut self.ports[port];
        if let Some(e) = p.episodes.iter_mut().find(|e| e.prio == prio as u8 && e.start_ns != 0 && e.end_ns == 0) {
            e.end_ns = now.as_nanos().max(e.start_ns);
        }
        if !self.lossless.iter().any(|q| self.buffer.group(port, q).xoff) {
            p.originated.clear();
            self.port_checks[port].retry = Priorities::NONE;
        }
        let pending = &mut self.ports[port].pending;
        pending.resume.insert(prio);
        pending.pause.remove(prio);
    }

    fn on_mac_control(&mut self, now: Time, port: PortId, decoded: Result<pfc::ControlFrame, pfc::ControlReject>) {
        let lossless = self.lossless;
        let p = &mut self.ports[port];
        let c = &mut p.counters.mac_control;
        c.received += 1;
        let frame = match decoded {
            Ok(f) => f,
            Err(reason) => {
                c.reject(reason);
                return;
            }
        };
        if frame.src.is_zero() {
            c.zero_source += 1;
        }
        match frame.body {
            MacControl::Pause { quanta } => {
                c.pause_received += 1;
                if p.mode == PauseMode::GlobalPause {
                    p.pause.pause_port(now, p.speed.quanta_duration(quanta));
                } else {
                    c.pause_ignored += 1;
                }
            }
            MacControl::Pfc(pfc) => {
                c.pfc_received += 1;
                if p.mode != PauseMode::Pfc {
                    c.pfc_ignored += 1;
                    return;
                }
                if pfc.classes().any(|(_, q)| q > 0) {
                    p.pause_arrivals.push(now.as_nanos());
                }
                for (prio, quanta) in pfc.classes() {
                    if !lossless.contains(prio) {
                        p.counters.mac_control.lossy_class_ignored += 1;
                        continue;
                    }
                    let d = p.speed.quanta_duration(quanta);
                    // How long after the pause arrived did this priority keep going out?
                    // Only meaningful while it was flowing (a frame in the last millisecond).
                    if quanta > 0 && p.last_tx[prio] + RESPONSE_WINDOW >= now && !p.pause.paused(now).contains(prio) {
                        self.pause_response.record(p.last_tx[prio].saturating_since(now));
                    }
                    p.pause.pause_priority(now, prio, d);
                    p.resume_due[prio] = Some(now + d);
                    if quanta == 0 {
                        p.prio[prio].xon_received += 1;
                    } else {
                        p.prio[prio].xoff_received += 1;
                    }
                }
                if self.dcfit.enabled {
                    let mut msg = pfc.checking;
                    if msg.is_some() && p.role == PortRole::Host {
                        p.checks.from_host_ignored += 1;
                        msg = None;
                    }
                    let paused: Priorities = pfc.classes().filter(|&(_, q)| q > 0).map(|(p, _)| p).collect();
                    self.on_checking(now, port, msg, paused & lossless);
                }
            }
        }
    }

    /// A PFC frame on `port` (an egress, seen from the traffic it carries) brought `msg`.
    /// `paused`: the lossless priorities the frame pauses (none: it resumes them all).
    fn on_checking(&mut self, now: Time, port: PortId, msg: Option<CheckingMessage>, paused: Priorities) {
        let resumes_all = paused.is_empty();
        let Some(mut msg) = msg.filter(|_| !resumes_all) else {
            self.port_checks[port].on_pause(None, resumes_all);
            return;
        };
        if msg.prios.is_empty() {
            // From a sender that does not name priorities: all those its pause stops.
            msg.prios = paused;
        }
        self.ports[port].checks.received += 1;
        if msg.origin_switch != self.switch_id {
            self.port_checks[port].on_pause(Some(msg), false);
            // Passed on upstream by every ingress whose paused traffic waits here in one of
            // the queues this message follows, on its next pause.
            for i in 0..self.ports.len() {
                let groups = self.groups_waiting_in(i, self.xoff(i), port, msg.prios);
                if !groups.is_empty() {
                    let forwarded = msg.forwarded(groups);
                    self.port_checks[i].to_forward = Some(forwarded);
                    self.outbox.push(ToSlowpath::CheckForwarded { from: port as u16, to: i as u16, msg: forwarded });
                }
            }
            return;
        }
        // Our own message came back. It proves a standing cycle of pauses only if the port
        // it left through has kept pausing its upstream ever since (temporal consistency):
        // otherwise the chain it travelled was broken behind it. And only if the groups
        // it left for wait in a queue paused here: a message that came back through
        // another group's or another priority's pauses closed no cycle of buffers.
        self.ports[port].checks.own_returned += 1;
        let origin = usize::from(msg.origin_port);
        let sent = self.ports.get(origin).and_then(|o| o.originated.iter().find(|m| m.seq == msg.seq).copied());
        let waiting = sent.map_or(Priorities::NONE, |m| {
            self.groups_waiting_in(origin, m.groups & self.xoff(origin), port, msg.prios)
        });
        let Some(sent) = sent.filter(|_| !waiting.is_empty()) else {
            self.ports[port].checks.stale_returns += 1;
            // The chain it travelled broke behind it, yet pauses still lead round to this
            // port. If the port pauses its upstream again, a cycle may have formed since
            // (with no local cause left anywhere to originate a message, only the old one
            // would go round for ever): its next pause carries a fresh message.
            if self.ports.get(origin).is_some() {
                let xoff = self.xoff(origin);
                self.port_checks[origin].retry |= xoff;
            }
            return;
        };
        // A cycle of pauses is a deadlock only if nothing in it moves. Around a ring at
        // line rate every hop pauses the next now and then while all of them still drain
        // (into their hosts), and a message can come all the way round such a cycle.
        // So: if traffic of the waiting groups left this switch since the message did,
        // the cycle drains; the port sends a fresh message with its next pause, and in a
        // deadlock that one finds everything still.
        let o = &self.ports[origin];
        if !waiting.iter().any(|g| o.departed[g].is_none_or(|left| left < sent.at)) {
            self.ports[port].checks.draining_returns += 1;
            self.port_checks[origin].retry |= waiting;
            return;
        }
        self.port_checks[port].in_cycle = true;
        let resolved = self.resolve(now, port);
        match self.tracker.observe(now, port, msg) {
            Ok(mut event) => {
                self.deadlocks += 1;
                event.resolved = resolved;
                self.outbox.push(ToSlowpath::Deadlock(event));
            }
            Err(id) => self.outbox.push(ToSlowpath::Confirmed { id, at_ns: now.as_nanos() }),
        }
    }

    /// With `resolution = "drop"`, empties the lossless queues the cycle stopped on `port`
    /// for `drop_ms` (frames queued, held by the slowpath, or arriving), as a PFC
    /// watchdog would. Re-armed each time the cycle is seen again after a window ended.
    fn resolve(&mut self, now: Time, port: PortId) -> bool {
        if self.dcfit.resolution != DeadlockResolution::Drop {
            return false;
        }
        let p = &mut self.ports[port];
        if p.deadlock_drop.is_none_or(|(until, _)| now >= until) {
            let prios = p.pause.paused(now) & self.lossless;
            p.deadlock_drop = Some((now + Duration::from_millis(self.dcfit.drop_ms), prios));
        }
        true
    }

    /// Priorities a held frame for `port` may not be released on: all while the port is
    /// blocked; else those paused by the link partner, unless their queue is being emptied
    /// (a deadlock or a storm being cut off) or the watchdog ignores the pauses.
    pub fn stopped(&self, now: Time, port: PortId) -> Priorities {
        if self.is_blocked(port) {
            return Priorities::ALL;
        }
        self.effective_paused(now, port) & !self.dropping(now, port)
    }

    /// The priorities the link partner holds back on `port`: those it paused, less those
    /// whose pauses the watchdog ignores.
    fn effective_paused(&self, now: Time, port: PortId) -> Priorities {
        let p = &self.ports[port];
        p.pause.paused(now) & !p.pfcwd.forwarding()
    }

    /// Fills `out` with what `port` sends now: its pause frames first (they bypass the
    /// pause gate and the queues), then data as the shaper and the scheduler allow.
    /// The frames in `out` belong to the caller, who frees them once sent.
    pub fn transmit<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId, out: &mut TxBatch) {
        self.clock = self.clock.max(now);
        if !self.ports[port].link_up {
            return;
        }
        self.check_pfcwd(now, port);
        self.empty_dropped_queues(now, pool, port);
        self.build_pause_frame(now, pool, port);
        let p = &mut self.ports[port];
        while out.has_room() {
            let Some(id) = p.control.pop(&mut self.frames) else { break };
            let len = self.frames.get(id).len;
            p.shaper.send(now, len as usize);
            out.push(TxFrame { id, len, xoff_trigger: p.pending.trigger.take() });
        }
        while out.has_room() && self.ports[port].shaper.ready(now) {
            let Some(prio) = self.pick_queue(now, port) else {
                // Nothing it may send: the wire idles from now, and that is not banked.
                self.ports[port].shaper.idle();
                break;
            };
            let p = &mut self.ports[port];
            let id = p.queues[prio].pop(&mut self.frames).expect("picked queue is not empty");
            let meta = *self.frames.get(id);
            if let Some(due) = p.resume_due[prio].take() {
                if meta.enqueued < due {
                    // The frame waited out the pause: how late after its end did it leave?
                    self.resume_lateness.record(now.saturating_since(due));
                }
            }
            p.shaper.send(now, meta.len as usize);
            p.last_tx[prio] = now;
            p.counters.tx_frames += 1;
            p.counters.tx_bytes += u64::from(meta.len);
            p.prio[prio].tx_frames += 1;
            out.push(TxFrame { id, len: meta.len, xoff_trigger: None });
            if meta.ingress != NO_PORT {
                let (ingress, group) = (usize::from(meta.ingress), usize::from(meta.prio));
                self.ports[ingress].departed[group] = Some(now);
                self.map.dequeued(ingress, port);
                if meta.last_of_pair {
                    self.map.sent_last_of_pair(ingress, port);
                }
                if self.buffer.release(ingress, group, u64::from(meta.len)) {
                    self.request_resume(ingress, group);
                }
            }
        }
    }

    /// What the PFC watchdog of `port` sees now; nothing when it is off (the view is not
    /// built on every turn for nothing).
    fn pfcwd_view(&self, now: Time, port: PortId) -> Option<Observed> {
        let p = &self.ports[port];
        if p.pfcwd.action() == WatchdogAction::Off {
            return None;
        }
        let mut seen =
            Observed { paused_since: [None; PRIORITIES], last_pause: [None; PRIORITIES], waiting: Priorities::NONE };
        for prio in self.lossless.iter() {
            seen.paused_since[prio] = p.pause.paused_since(now, prio);
            seen.last_pause[prio] = p.pause.last_pause(prio);
            if !p.queues[prio].is_empty() || self.map.held_at_slowpath(port, prio) > 0 {
                seen.waiting.insert(prio);
            }
        }
        Some(seen)
    }

    /// Runs `port`'s PFC watchdog: detects storms, restores quiet priorities.
    fn check_pfcwd(&mut self, now: Time, port: PortId) {
        let Some(seen) = self.pfcwd_view(now, port) else { return };
        let (lossless, events) = (self.lossless, &mut self.pfcwd_events);
        self.ports[port].pfcwd.check(now, port as u16, lossless, &seen, |e| events.push(e));
    }

    /// Empties the queues of `port` whose frames are being dropped (see [`Switch::dropping`]).
    fn empty_dropped_queues<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
        if self.ports[port].deadlock_drop.is_some_and(|(until, _)| now >= until) {
            self.ports[port].deadlock_drop = None;
        }
        for prio in self.dropping(now, port).iter() {
            while let Some(id) = self.unqueue(port, prio) {
                self.discard(pool, port, prio, id);
            }
        }
    }

    /// Takes the head of a queue that will not be sent, keeping the traffic map right.
    fn unqueue(&mut self, port: PortId, prio: usize) -> Option<FrameId> {
        let id = self.ports[port].queues[prio].pop(&mut self.frames)?;
        let meta = *self.frames.get(id);
        if meta.ingress != NO_PORT {
            self.map.dequeued(usize::from(meta.ingress), port);
            if meta.last_of_pair {
                self.map.sent_last_of_pair(usize::from(meta.ingress), port);
            }
        }
        Some(id)
    }

    /// The link of `port` went down (its interface may even be gone) or came up again.
    /// Down: what it learned is forgotten, what waits for it is dropped (its buffer
    /// released, so its ingresses resume), the pauses it received are void, and frames
    /// for it are dropped until it is up. The shell decides what "up" means and neither
    /// receives from nor sends on a port that is down.
    pub fn set_link<P: FramePool>(&mut self, pool: &mut P, port: PortId, up: bool) {
        if self.ports[port].link_up == up {
            return;
        }
        self.ports[port].link_up = up;
        if up {
            return;
        }
        self.ports[port].counters.link_downs += 1;
        self.fdb.flush_port(port);
        for prio in 0..PRIORITIES {
            while let Some(id) = self.unqueue(port, prio) {
                self.ports[port].counters.drops.count(DropReason::LinkDown);
                self.give_back(pool, id);
            }
        }
        while let Some(id) = self.ports[port].control.pop(&mut self.frames) {
            pool.free(id);
        }
        let p = &mut self.ports[port];
        p.pause = EgressPause::default();
        p.resume_due = [None; PRIORITIES];
        p.pending = PendingPause::default();
    }

    /// Whether `port`'s link is up (as the shell last said).
    pub fn link_up(&self, port: PortId) -> bool {
        self.ports[port].link_up
    }

    /// The next watchdog event (a storm detected, a priority restored), oldest first.
    pub fn poll_watchdog_event(&mut self) -> Option<WatchdogEvent> {
        self.pfcwd_events.pop()
    }

    /// The caller handed a pause frame to the kernel at `sent`; records the reaction time.
    pub fn record_pause_sent(&mut self, trigger: Time, sent: Time) {
        self.reaction.record(sent.saturating_since(trigger));
    }

    /// Builds one frame carrying every pause, refresh and resume `port` owes.
    fn build_pause_frame<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
        let p = &mut self.ports[port];
        if p.mode == PauseMode::Off {
            p.pending = PendingPause { refresh_at: p.pending.refresh_at, ..PendingPause::default() };
            return;
        }
        // Refresh pauses before they expire upstream while the group is still above XON.
        for prio in self.lossless.iter() {
            if self.buffer.group(port, prio).xoff && now >= p.pending.refresh_at[prio] {
                p.pending.pause.insert(prio);
            }
        }
        let (pause, resume) = (p.pending.pause, p.pending.resume);
        if (pause | resume).is_empty() {
            return;
        }
        let global = p.mode == PauseMode::GlobalPause;
        let Some(id) = pool.alloc() else {
            p.counters.mac_control.send_deferred += 1;
            return;
        };
        let body = if global {
            let any_xoff = self.lossless.iter().any(|prio| self.buffer.group(port, prio).xoff);
            MacControl::Pause { quanta: if any_xoff { self.quanta } else { 0 } }
        } else {
            let mut pfc = Pfc::pause(pause, self.quanta);
            pfc.enabled |= resume;
            if self.dcfit.enabled && !pause.is_empty() && p.role == PortRole::Switch {
                pfc.checking = self.checking_for(now, port, pause);
            }
            MacControl::Pfc(pfc)
        };
        let p = &mut self.ports[port];
        let len = pfc::encode(pool.write(id, pfc::MIN_FRAME_LEN), p.mac, &body);
        self.frames.set(id, len as u32, NO_PORT, 0, now);
        p.control.push(&mut self.frames, id);
        for prio in pause.iter() {
            p.pending.refresh_at[prio] = now + p.refresh;
        }
        match body {
            MacControl::Pause { .. } => p.counters.mac_control.pause_sent += 1,
            MacControl::Pfc(_) => {
                p.counters.mac_control.pfc_sent += 1;
                for prio in pause.iter() {
                    p.prio[prio].xoff_sent += 1;
                }
                for prio in resume.iter() {
                    p.prio[prio].xon_sent += 1;
                }
            }
        }
        p.pending.pause = Priorities::NONE;
        p.pending.resume = Priorities::NONE;
    }

    /// The checking message a pause for `prios` sent on `port` carries (see
    /// [`crate::dcfit`] for the rule).
    fn checking_for(&mut self, now: Time, port: PortId, prios: Priorities) -> Option<CheckingMessage> {
        let mut causes = [Cause::default(); 64];
        let mut n = 0;
        for e in 0..self.ports.len() {
            let paused = self.ports[e].pause.paused(now);
            let groups = self.groups_waiting_in(port, prios, e, paused);
            if !groups.is_empty() {
                causes[n] = Cause { port: e, groups, queues: paused & self.egress_queues(port, groups, e) };
                n += 1;
            }
        }
        let choice = dcfit::choose(port, prios, &causes[..n], &mut self.port_checks);
        let counters = &mut self.ports[port].checks;
        match choice {
            CheckChoice::Forward(m) => {
                counters.forwarded += 1;
                Some(m)
            }
            CheckChoice::Originate(groups) => {
                counters.originated += 1;
                let group = self.port_checks[port].take_turn(groups);
                self.check_seq = self.check_seq.wrapping_add(1);
                self.remember_originated(port, self.check_seq, group);
                Some(CheckingMessage {
                    origin_switch: self.switch_id,
                    origin_port: port as u16,
                    seq: self.check_seq,
                    hops: 0,
                    prios: group,
                })
            }
            CheckChoice::Plain => None,
        }
    }

    /// The queue the scheduler serves next on `port`, skipping paused priorities.
    fn pick_queue(&mut self, now: Time, port: PortId) -> Option<usize> {
        let paused = self.effective_paused(now, port);
        let p = &mut self.ports[port];
        let ready = Priorities::matching(|q| !p.queues[q].is_empty()) & !paused;
        let Some(drr) = &mut p.drr else {
            return ready.highest();
        };
        if ready.is_empty() {
            return None;
        }
        // Weight-0 queues stay strict and go first.
        let strict = Priorities::matching(|q| drr.weights[q] == 0) & ready;
        if let Some(q) = strict.highest() {
            return Some(q);
        }
        for q in 0..PRIORITIES {
            if p.queues[q].is_empty() {
                drr.deficit[q] = 0;
            }
        }
        // Each visit credits one quantum × weight; a frame needs at most 9216 / 1536 visits.
        for _ in 0..PRIORITIES * 8 {
            let q = drr.current;
            if ready.contains(q) {
                let head = p.queues[q].peek().expect("ready queue has a head");
                let need = self.frames.get(head).len;
                if drr.deficit[q] >= need {
                    drr.deficit[q] -= need;
                    return Some(q);
                }
                if !drr.credited {
                    drr.deficit[q] += drr.weights[q] * DRR_QUANTUM;
                    drr.credited = true;
                    continue;
                }
            }
            drr.current = (q + 1) % PRIORITIES;
            drr.credited = false;
        }
        ready.highest()
    }

    /// Periodic work not tied to a frame: FDB aging.
    pub fn on_timer(&mut self, now: Time) {
        if now >= self.next_aging {
            self.fdb.age(now);
            self.next_aging = now + FDB_AGING_PERIOD;
        }
    }

    /// When the switch next has something to do without new input; `Some(now)` or earlier
    /// means right away.
    pub fn next_wakeup(&self, now: Time) -> Time {
        (0..self.ports.len()).filter_map(|i| self.port_wakeup(now, i)).fold(self.next_aging, Time::min)
    }

    /// When `port` next has something to send without new input (`now` or earlier: right
    /// away), if it has anything at all: a pause to send or refresh, a queue that the
    /// shaper or a received pause holds back.
    pub fn port_wakeup(&self, now: Time, port: PortId) -> Option<Time> {
        let p = &self.ports[port];
        if !p.link_up {
            // Nothing goes out of it; what it still owes its partner (a resume) waits.
            return None;
        }
        if !(p.pending.pause | p.pending.resume).is_empty() || !p.control.is_empty() {
            return Some(now);
        }
        let mut next: Option<Time> = None;
        if p.mode != PauseMode::Off {
            for prio in self.lossless.iter() {
                if self.buffer.group(port, prio).xoff {
                    next = Some(next.map_or(p.pending.refresh_at[prio], |n| n.min(p.pending.refresh_at[prio])));
                }
            }
        }
        if let Some(deadline) = self.pfcwd_view(now, port).and_then(|seen| p.pfcwd.deadline(now, self.lossless, &seen))
        {
            next = Some(next.map_or(deadline, |n| n.min(deadline)));
        }
        let queued = Priorities::matching(|q| !p.queues[q].is_empty());
        if queued.is_empty() {
            return next;
        }
        let paused = self.effective_paused(now, port);
        let at = if !(queued & !paused).is_empty() {
            p.shaper.ready_at()
        } else {
            p.pause.resume_at(now, queued).unwrap_or(now).max(p.shaper.ready_at())
        };
        Some(next.map_or(at, |n| n.min(at)))
    }

    /// Frames held in egress queues.
    pub fn queued_frames(&self) -> u64 {
        self.ports.iter().flat_map(|p| p.queues.iter().chain([&p.control])).map(|q| u64::from(q.len())).sum()
    }

    pub fn stats(&self, now: Time) -> SwitchStats {
        SwitchStats {
            name: self.name.clone(),
            switch_id: self.switch_id,
            uptime_s: now.saturating_since(self.started).as_secs_f64(),
            fdb_entries: self.fdb.len(),
            shared_buffer_bytes: self.buffer.shared_total(),
            shared_buffer_used: self.buffer.shared_used(),
            xoff_threshold: self.buffer.wide_thresholds().0,
            xon_threshold: self.buffer.wide_thresholds().1,
            free_frames: 0,
            pfc_reaction: self.reaction.percentiles(),
            resume_lateness: self.resume_lateness.percentiles(),
            pause_response: self.pause_response.percentiles(),
            deadlocks_detected: self.deadlocks,
            slowpath_overflow: 0,
            pfcwd_events_forgotten: self.pfcwd_events.forgotten,
            stalls: Default::default(),
            ports: self.ports.iter().enumerate().map(|(i, p)| self.port_stats(now, i, p)).collect(),
            tagger: self.tags.as_ref().map(|t| self.tagger_stats(t)),
        }
    }

    fn tagger_stats(&self, t: &TagTable) -> TaggerStats {
        let tags = self
            .tag_counters
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_zero())
            .map(|(k, c)| TagRow {
                port: self.ports[k / TAG_SLOTS].name.clone(),
                tag: u8::try_from(k % TAG_SLOTS).ok().filter(|&tag| usize::from(tag) < TAGS),
                counters: *c,
            })
            .collect();
        TaggerStats {
            table_switch: t.switch.clone(),
            source: t.source.clone(),
            rules: t.ingress_rules + t.rewrite_rules,
            ingress_rules: t.ingress_rules,
            rewrite_rules: t.rewrite_rules,
            lossless: t.lossless_priorities(),
            initial_tag: t.initial_tag,
            default_tag: t.default_tag,
            default_priority: t.default_priority,
            tags,
        }
    }

    fn port_stats(&self, now: Time, index: usize, p: &Port) -> PortStats {
        let paused = p.pause.paused(now);
        let priorities = (0..PRIORITIES)
            .map(|prio| {
                let g = self.buffer.group(index, prio);
                let lossless = self.is_lossless(prio);
                let profile = |v: u64| if lossless { v } else { 0 };
                PrioStats {
                    priority: prio as u8,
                    lossless,
                    counters: p.prio[prio],
                    ingress_bytes: g.occupancy(),
                    ingress_watermark: g.watermark,
                    headroom_bytes: g.headroom,
                    headroom_watermark: g.headroom_watermark,
                    xoff_threshold: profile(self.buffer.xoff_threshold(index, prio)),
                    xon_threshold: profile(self.buffer.xon_threshold(index, prio)),
                    headroom_size: profile(self.buffer.profile(index, prio).headroom_bytes),
                    xoff: g.xoff,
                    egress_queue_frames: p.queues[prio].len(),
                    egress_queue_bytes: p.queues[prio].bytes(),
                    egress_paused: paused.contains(prio),
                    paused_us: p.pause.paused_time(now, prio).as_micros() as u64,
                    xoff_since_ns: if g.xoff { p.xoff_since[prio].as_nanos() } else { 0 },
                    upstream_response_max_us: p.upstream_response[prio].as_secs_f64() * 1e6,
                }
            })
            .collect();
        PortStats {
            name: p.name.clone(),
            iface: p.iface.clone(),
            mac: p.mac.to_string(),
            speed: p.speed.to_string(),
            speed_from: SpeedSource::Config,
            pause_mode: format!("{:?}", p.mode).to_lowercase(),
            role: format!("{:?}", p.role).to_lowercase(),
            link_up: p.link_up,
            // The shell's to say.
            rx_queues: 0,
            xdp_mode: None,
            bind_mode: None,
            blocked: self.is_blocked(index),
            held_by_slowpath: self.map.held_at_slowpath_for(index),
            watchdog_active: p.deadlock_drop.is_some_and(|(until, _)| now < until),
            pfcwd: self
                .lossless
                .iter()
                .map(|prio| WatchdogStats {
                    priority: prio as u8,
                    action: p.pfcwd.action(),
                    active: p.pfcwd.stormed().contains(prio),
                    counters: p.pfcwd.counters(prio),
                })
                .collect(),
            checks: p.checks,
            xoff_episodes: p.episodes.iter().copied().collect(),
            pause_arrivals_ns: p.pause_arrivals.iter().copied().collect(),
            counters: p.counters,
            xdp: Default::default(),
            socket: Default::default(),
            priorities,
        }
    }

    /// Clears every watermark (for a fresh measurement).
    pub fn clear_watermarks(&mut self) {
        self.buffer.clear_watermarks();
    }
}

/// Frames a bridge refuses before learning from them.
fn reject_reason(h: &FrameHeader, len: usize, max_frame: usize) -> Option<DropReason> {
    if len > max_frame {
        Some(DropReason::Oversize)
    } else if h.dst.is_link_local() {
        Some(DropReason::LinkLocal)
    } else if h.src.is_multicast() {
        Some(DropReason::BadSource)
    } else {
        None
    }
}

#[cfg(test)]
#[path = "switch_tests.rs"]
mod tests;
