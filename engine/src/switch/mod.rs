//! The switch engine: every forwarding and flow-control decision, with no IO.
//!
//! The dataplane hands it received frames ([`Switch::handle_frame`]) and asks it what to put on
//! each port's tx ring ([`Switch::poll_transmit`]); frame bytes live in a [`FramePool`] the
//! caller owns (the UMEM in the dataplane, plain vectors in tests). Time is passed in.
//!
//! # Call order
//!
//! As in quinn-proto's `Connection`, inputs are `handle_*` and outputs `poll_*`. A turn
//! is, in this order:
//!
//! 1. [`Switch::handle_released`]: the frames the slowpath released rejoin their queues;
//! 2. [`Switch::handle_frame`] for every frame received this turn;
//! 3. [`Switch::handle_timeout`]: the timers due run (each port's table, `timers`: the
//!    watchdog, the frames a drop window owes, XOFF refreshes; then FDB aging); a
//!    received pause needs none, its end is a time the pause gate compares with `now`;
//! 4. [`Switch::poll_transmit`] per port with room on its tx ring: the pause frames owed,
//!    then data;
//! 5. [`Switch::stopped`] per port for the slowpath's next release, then
//!    [`Switch::poll_slowpath`]: the turn's events to the slowpath;
//! 6. [`Switch::poll_watchdog_event`] until it returns `None`, then
//!    [`Switch::poll_timeout`] or [`Switch::poll_port_timeout`] for when to look again.
//!
//! [`Switch::poll`] is that turn as code, over a driver's rings ([`Ports`]): the
//! dataplane, the fuzz target, the examples and the tests call it. The simulator calls
//! the steps per port, each at its port's instant (see `poll`'s module).
//!
//! The orders that matter: released frames go in before new arrivals, so they keep their
//! place ahead of what came after them; the timers run before the port transmits, so the
//! frames a drop window owes are emptied, not sent, and a refresh leaves before the pause
//! it renews runs out upstream. A driver that keeps a timer per port calls
//! [`Switch::handle_port_timeout`] for a port just before it polls it, and
//! [`Switch::handle_switch_timeout`] for the rest.
//!
//! [`Switch::set_blocked`], [`Switch::set_link`], [`Switch::stats`] and
//! [`Switch::traffic_map`] may come between turns.
//!
//! The work is split along the data path: `ingress` (parse, classify, place, admit),
//! `egress` (the pause gate, scheduler, shaper, transmit), `flow_control` (PFC and 802.3x
//! frames in and out), `deadlock` (DCFIT orchestration), `handoff` (the round trip to the
//! slowpath), `watchdog` and `snapshot` (the stats). A port's state is grouped the same
//! way (a port's `tx`, `upstream` and `dcfit`).

mod deadlock;
mod egress;
mod flow_control;
mod handoff;
mod ingress;
mod multipath;
mod poll;
mod snapshot;
mod timers;
mod watchdog;
mod wred;

pub use crate::pool::FramePool;
pub use egress::{TxBatch, TxFrame};
pub use poll::{Ports, Turn};
pub use timers::{PortTimer, PortTimers};

use std::time::Duration;

use deadlock::PortDcfit;
use egress::PortTx;
use flow_control::{PendingPause, Upstream};
use multipath::Multipaths;

use crate::buffer::SharedBuffer;
use crate::classify::Classifier;
use crate::config::{Config, DcfitConfig, FrameCaps, GroupProfile, PauseMode, PortRole};
use crate::dcfit::{DeadlockTracker, PortChecks};
use crate::fdb::Fdb;
use crate::histogram::Histogram;
use crate::mac::MacAddr;
use crate::pause::EgressPause;
use crate::pfcwd::{PortWatchdog, WatchdogEvents};
use crate::pool::PoolSize;
use crate::ports::{PortId, PortSet};
use crate::priorities::PRIORITIES;
use crate::priorities::{Priorities, Priority};
use crate::queue::FrameTable;
use crate::slowpath::ToSlowpath;
use crate::speed::Speed;
use crate::stats::{CheckCounters, DropReason, PortCounters, PrioCounters, TagCounters};
use crate::tagging::{TagTable, TAGS};
use crate::time::Time;
use crate::traffic_map::{TrafficMap, TrafficMapView};

/// Tag counters per (ingress port, tag); the slot after the last tag is for frames
/// without an IP header.
const TAG_SLOTS: usize = TAGS + 1;

/// Frames a flood copy leaves in the pool, for the pause frames the switch must still
/// be able to send.
pub const PAUSE_RESERVE: usize = 64;

const FDB_AGING_PERIOD: Duration = Duration::from_secs(1);

/// One port's state, grouped by what uses it.
///
/// In declared order (`repr(C)`): the settings every frame reads and the port's frame
/// counters first, side by side, instead of wherever the compiler puts them (it had put
/// them in three cache lines far apart). A fabric's simulated switches take turns event
/// by event, so each line a frame touches is likely a wait for memory.
#[derive(Debug)]
#[repr(C, align(64))]
struct Port {
    /// The link carries frames (see [`Switch::set_link`]).
    link_up: bool,
    flood: bool,
    mode: PauseMode,
    role: PortRole,
    mac: MacAddr,
    max_frame: usize,
    counters: PortCounters,
    /// The tail-drop limit of each of its lossy queues (it follows `max_frame` by default).
    lossy_queue_bytes: u64,
    speed: Speed,
    /// What it sends: queues, scheduler, shaper, and the pauses its link partner sent.
    tx: PortTx,
    /// The pauses it sends its upstream, and what it measured of them.
    upstream: Upstream,
    /// What DCFIT remembers of it.
    dcfit: PortDcfit,
    pfcwd: PortWatchdog,
    checks: CheckCounters,
    prio: [PrioCounters; PRIORITIES],
    name: String,
    iface: String,
}

/// One switch: its ports, FDB, shared buffer, classifier, Tagger table, traffic map and DCFIT
/// state. See the module documentation for the order of the calls.
#[derive(Debug)]
pub struct Switch {
    name: String,
    switch_id: u32,
    started: Time,
    ports: Vec<Port>,
    fdb: Fdb,
    /// How a multipath entry's port is picked, and what the choices keep.
    multipath: Multipaths,
    buffer: SharedBuffer,
    frames: FrameTable,
    classifier: Classifier,
    tags: Option<TagTable>,
    tag_counters: Vec<TagCounters>,
    lossless: Priorities,
    quanta: u16,
    frame_caps: FrameCaps,
    next_aging: Time,
    reaction: Histogram,
    resume_lateness: Histogram,
    pause_response: Histogram,
    /// Ports whose frames go to the slowpath (`ctl block`): kept here only; the slowpath
    /// reads it through [`Switch::stopped`].
    blocked: PortSet,
    map: TrafficMap,
    dcfit: DcfitConfig,
    port_checks: Vec<PortChecks>,
    tracker: DeadlockTracker,
    check_seq: u32,
    deadlocks: u64,
    /// Events for the slowpath, handed over after every turn ([`Switch::poll_slowpath`]).
    outbox: Vec<ToSlowpath>,
    /// Events the driver's way to the slowpath refused (it is sized never to be full).
    slowpath_overflow: u64,
    /// What the PFC watchdog did, for the shell to log (bounded).
    pfcwd_events: WatchdogEvents,
    /// The latest time the switch was given (for events timed where no time is passed).
    clock: Time,
    /// Ports whose queues, pauses or pending pause frames changed since the driver last
    /// asked ([`Switch::poll_ready_ports`]).
    ready: PortSet,
    /// The egress queues' WRED and ECN marking.
    wred: wred::Wred,
}

impl Switch {
    /// A switch for `config` (validated, with every port's MAC filled in) working on the
    /// frames of `pool` (ids below `pool.frames`), applying `tags` if given (compiled for
    /// this config by [`TagTable::apply`], which makes its priorities the lossless ones).
    pub fn new(config: &Config, tags: Option<TagTable>, pool: PoolSize, now: Time) -> Switch {
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
                    max_frame: p.max_frame(),
                    lossy_queue_bytes: config.buffer.lossy_queue_limit(p.max_frame()),
                    tx: PortTx::new(p.speed(), &p.scheduler),
                    upstream: Upstream::new(refresh),
                    dcfit: PortDcfit::default(),
                    pfcwd: PortWatchdog::new(&config.pfcwd.with(p.pfcwd.as_ref())),
                    counters: PortCounters::default(),
                    checks: CheckCounters::default(),
                    prio: Default::default(),
                }
            })
            .collect();
        let aging = Duration::from_secs(config.fdb.aging_s);
        let mut fdb = Fdb::new(config.fdb.max_entries, aging, config.ports.len(), config.fdb.max_per_port);
        for e in &config.fdb_entries {
            if let Some(port) = config.port_index(&e.port) {
                fdb.add_static(e.mac, PortId::new(port));
            }
        }
        for g in &config.fdb_groups {
            let ports: Vec<PortId> = g.ports.iter().filter_map(|p| config.port_index(p)).map(PortId::new).collect();
            fdb.add_static_group(g.mac, &ports);
        }
        let n = config.ports.len();
        let wide = GroupProfile {
            xoff: config.buffer.xoff_rule(),
            xon: config.buffer.xon_rule(),
            headroom_bytes: config.buffer.headroom_bytes,
        };
        let profiles = (0..n).map(|port| Priority::table(|prio| config.group_profile(port, prio))).collect();
        let mut buffer = SharedBuffer::new(config.buffer.shared_bytes, wide, profiles);
        let frame_caps = config.frame_caps(pool);
        let lossless = tags.as_ref().map_or(config.lossless(), TagTable::lossless);
        let groups = (n * lossless.len()).max(1) as u32;
        buffer.set_frame_limit(frame_caps.lossless / groups);
        Switch {
            name: config.name.clone(),
            switch_id: config.switch_id(),
            started: now,
            ports,
            fdb,
            buffer,
            frames: FrameTable::new(pool.frames),
            multipath: Multipaths::new(&config.fdb),
            classifier: Classifier::new(&config.classify),
            lossless,
            tag_counters: if tags.is_some() { vec![TagCounters::default(); n * TAG_SLOTS] } else { Vec::new() },
            tags,
            quanta,
            frame_caps,
            next_aging: now + FDB_AGING_PERIOD,
            reaction: Histogram::default(),
            resume_lateness: Histogram::default(),
            pause_response: Histogram::default(),
            blocked: PortSet::EMPTY,
            map: TrafficMap::new(n),
            dcfit: config.dcfit.clone(),
            port_checks: vec![PortChecks::default(); n],
            tracker: DeadlockTracker::default(),
            check_seq: 0,
            deadlocks: 0,
            outbox: Vec::new(),
            slowpath_overflow: 0,
            pfcwd_events: WatchdogEvents::default(),
            clock: now,
            ready: PortSet::EMPTY,
            wred: wred::Wred::new(config),
        }
    }

    /// How many ports it has.
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// Its forwarding database.
    pub fn fdb(&self) -> &Fdb {
        &self.fdb
    }

    /// Adds a static entry: `mac` is reached by `ports`, one port as the configuration's
    /// `[[fdb]]` gives it, several as its `[[fdb_group]]` (one chosen per flow). For a
    /// driver that computes a fabric's routes (the simulator) and has ports, not names:
    /// a k=16 fat-tree's routes written into each switch's configuration as port names
    /// held 48 MiB until the run began. Ports the switch lacks are left out.
    pub fn add_static_route(&mut self, mac: MacAddr, ports: &[PortId]) {
        let n = self.ports.len();
        if ports.iter().all(|p| p.index() < n) {
            self.fdb.add_static_group(mac, ports);
        } else {
            let known: Vec<PortId> = ports.iter().copied().filter(|p| p.index() < n).collect();
            self.fdb.add_static_group(mac, &known);
        }
    }

    fn is_lossless(&self, prio: Priority) -> bool {
        self.lossless.contains(prio)
    }

    /// Egress ports where `ingress`'s traffic waits (a row of the traffic map).
    pub fn traffic_map_row(&self, ingress: PortId) -> PortSet {
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
        self.all_ready();
        self.ports[port].link_up = up;
        if up {
            return;
        }
        self.ports[port].counters.link_downs += 1;
        self.fdb.flush_port(port);
        for prio in Priority::all() {
            while let Some(id) = self.unqueue(port, prio) {
                self.ports[port].counters.drops.count(DropReason::LinkDown);
                self.give_back(pool, id);
            }
        }
        while let Some(id) = self.ports[port].tx.control.pop(&mut self.frames) {
            pool.free(id);
        }
        let p = &mut self.ports[port];
        p.tx.pause = EgressPause::default();
        p.tx.sent.iter_mut().for_each(|s| s.resume_due = None);
        p.upstream.pending = PendingPause::default();
    }

    /// Fills out the tables that otherwise grow with use (the per-frame table to the whole
    /// pool, the FDB to `fdb.max_entries`, the slowpath's outbox to a turn's worst case),
    /// so that the data path never allocates. A
    /// driver whose pool is all in use from the start calls it once, before the first
    /// frame: the AF_XDP shell, where a table growing under the first frames held one
    /// turn of the loop up for hundreds of microseconds (a late pause). The simulator
    /// does not: a simulated switch uses a few hundred of its pool's frames and stations.
    pub fn reserve_tables(&mut self) {
        self.frames.reserve_all();
        self.fdb.reserve_all();
        // A turn holds at most a batch per port for blocked egresses, and a few DCFIT
        // records; a simulated switch sends a handful of events a turn, so it grows the
        // outbox as it needs (up front, a k=16 fat-tree's would take 96 MiB).
        self.outbox.reserve(self.ports.len() * 256 + 64);
    }

    /// Ports whose queues, received pauses or pending pause frames changed since the last
    /// call: what [`Switch::poll_transmit`] may now find to send. A driver that does not
    /// look at every port after every input (the simulator, where a fat-tree switch has
    /// dozens of idle ports) looks at these, and at the ports whose
    /// [`Switch::poll_port_timeout`] is due; a port in neither has nothing new to send.
    /// The AF_XDP loop looks at every port on every turn and need not call it.
    pub fn poll_ready_ports(&mut self) -> PortSet {
        std::mem::replace(&mut self.ready, PortSet::EMPTY)
    }

    /// Every port may have something new to send (after a rare input that reaches many:
    /// a MAC control frame, a release from the slowpath, a link or block change).
    pub(super) fn all_ready(&mut self) {
        self.ready = PortId::all(self.ports.len()).collect();
    }

    /// Whether `port`'s link is up (as the shell last said).
    pub fn link_up(&self, port: PortId) -> bool {
        self.ports[port].link_up
    }

    /// Runs every timer due by `now`: each port's ([`Switch::handle_port_timeout`]) and
    /// the switch's own (FDB aging). The dataplane and the tests call it once per turn,
    /// before [`Switch::poll_transmit`]; [`Switch::poll_timeout`] says when it is next due.
    pub fn handle_timeout<P: FramePool>(&mut self, now: Time, pool: &mut P) {
        for port in PortId::all(self.ports.len()) {
            self.handle_port_timeout(now, pool, port);
        }
        self.handle_switch_timeout(now);
    }

    /// The timers of one port that is up, as its table ([`Switch::port_timers`]) says:
    /// the watchdog notes what waits, then each of the port's own timers that has expired
    /// runs, in this order: the PFC watchdog's judgement (a storm detected or a priority
    /// restored), the frames a drop window owes (emptied), the XOFF refreshes (what a
    /// paused ingress owes its upstream before the last pause runs out there). The frames
    /// they call for leave through [`Switch::poll_transmit`]. A driver that keeps a timer
    /// per port (the simulator, through [`Switch::poll_port_timeout`]) calls it for a port
    /// before it polls that port, and [`Switch::handle_switch_timeout`] for the rest.
    pub fn handle_port_timeout<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
        self.clock = self.clock.max(now);
        if !self.ports[port].link_up {
            return;
        }
        // Each entry is read just before it runs, after the ones before it: a storm
        // detected now opens the drop window that empties its queue in the same call.
        self.run_pfcwd(now, port);
        if self.port_timer(now, port, PortTimer::DropWindow).is_some() {
            self.empty_dropped_queues(now, pool, port);
        }
        if self.port_timer(now, port, PortTimer::XoffRefresh).is_some_and(|at| at <= now) {
            self.due_refreshes(now, port);
        }
    }

    /// The switch's own timer, not tied to a port: FDB aging.
    pub fn handle_switch_timeout(&mut self, now: Time) {
        if now >= self.next_aging {
            self.fdb.age(now);
            self.next_aging = now + FDB_AGING_PERIOD;
        }
    }

    /// When the switch next has something to do without new input; `Some(now)` or earlier
    /// means right away.
    pub fn poll_timeout(&self, now: Time) -> Time {
        PortId::all(self.ports.len()).filter_map(|i| self.poll_port_timeout(now, i)).fold(self.next_aging, Time::min)
    }

    /// When `port` next has something to do without new input (`now` or earlier: right
    /// away), if it has anything at all: the earliest entry of its timer table
    /// ([`Switch::port_timers`]): a pause to send or refresh, a watchdog's judgement, a
    /// queue that the shaper or a received pause holds back.
    pub fn poll_port_timeout(&self, now: Time, port: PortId) -> Option<Time> {
        self.port_timers(now, port).next()
    }

    /// Bytes queued at `port`'s egress for `prio` (what a monitor samples); 0 for a port
    /// the switch does not have.
    pub fn egress_queue_bytes(&self, port: PortId, prio: Priority) -> u64 {
        self.ports.get(port.index()).map_or(0, |p| p.tx.queues[prio].bytes())
    }

    /// Frames held in egress queues.
    pub fn queued_frames(&self) -> u64 {
        self.ports.iter().flat_map(|p| p.tx.queues.iter().chain([&p.tx.control])).map(|q| u64::from(q.len())).sum()
    }
}

#[cfg(test)]
mod tests;
