//! The switch engine: every forwarding and flow-control decision, with no IO.
//!
//! The dataplane hands it received frames ([`Switch::receive`]) and asks it what to put on
//! each port's tx ring ([`Switch::transmit`]); frame bytes live in a [`FramePool`] the
//! caller owns (the UMEM in the dataplane, plain vectors in tests). Time is passed in.

mod deadlock;
mod egress;
mod flow_control;
mod handoff;
mod ingress;
mod snapshot;
mod watchdog;

pub use crate::pool::FramePool;
pub use egress::{TxBatch, TxFrame};

use std::time::Duration;

use crate::buffer::SharedBuffer;
use crate::classify::Classifier;
use crate::config::{Config, DcfitConfig, FrameCaps, GroupProfile, PauseMode, PortRole, Scheduler};
use crate::dcfit::{DeadlockTracker, PortChecks};
use crate::ether::IpAt;
use crate::fdb::{Fdb, PortId};
use crate::histogram::Histogram;
use crate::mac::MacAddr;
use crate::pause::EgressPause;
use crate::pfc::PRIORITIES;
use crate::pfcwd::{PortWatchdog, WatchdogEvents};
use crate::priorities::Priorities;
use crate::queue::{Fifo, FrameTable};
use crate::ring::Ring;
use crate::shaper::Shaper;
use crate::slowpath::ToSlowpath;
use crate::speed::Speed;
use crate::stats::{CheckCounters, DropReason, PortCounters, PrioCounters, TagCounters, XoffEpisode};
use crate::tagging::{TagTable, TAGS};
use crate::time::Time;
use crate::traffic_map::{TrafficMap, TrafficMapView};

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

    /// Replaces the frame caps [`Switch::new`] derived for one rx socket per port: the
    /// shell, which knows how many rings it bound, passes [`Config::frame_caps`] for them.
    pub fn set_frame_caps(&mut self, caps: FrameCaps) {
        self.frame_caps = caps;
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
}

#[cfg(test)]
mod tests;
