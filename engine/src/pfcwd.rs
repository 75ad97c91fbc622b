//! The PFC watchdog, as SONiC's pfcwd: a link partner that keeps a lossless priority
//! paused for `detection_ms` while frames wait to go out on it is taken to be broken — a
//! NIC flooding pauses, or a deadlock no one resolves. Per `action` the switch then drops
//! that queue and what arrives for it (`drop`), ignores the partner's pauses on it
//! (`forward`), or only reports (`alert`); once no pause has arrived for `restoration_ms`
//! it restores the priority.
//!
//! Why "while frames wait": a partner may pause an idle priority as long as it likes, it
//! holds nothing back; the time counts from when both hold, the pause and the waiting. Why continuously: a partner that resumes now and then, however
//! briefly, is congested, not broken — the queue drains in those gaps. SONiC polls every
//! 200 ms by default; here the deadline is part of the port's next wakeup, so detection
//! comes at `detection_ms` after the pause began, to the precision of the dataplane's loop.
//!
//! Beyond SONiC, whose pfcwd watches PFC only: on a port in 802.3x mode a PAUSE stops
//! every priority, so every priority with frames waiting is watched there, against the
//! port's PAUSE (see `Switch::watched`).

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::counters::counters;
use super::ports::PortId;
use super::priorities::PRIORITIES;
use super::priorities::{Priorities, Priority};
use super::time::Time;

pub use pfcswitch_config::watchdog::{WatchdogAction, WatchdogConfig, WatchdogOverride};

counters! {
/// What the watchdog did on one priority of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogCounters {
    /// PFC storms the watchdog detected on the priority.
    pub storms_detected: u64 => count,
    /// Storms over: the watchdog restored the priority.
    pub restored: u64 => count,
    /// Frames dropped while the priority was stormed (action `drop`).
    pub dropped_frames: u64 => count,
    /// From the start of the continuous pause to the last detection, µs.
    pub last_detection_us: u64,
    /// When the last detection happened (the switch's monotonic clock, ns; `None`: never,
    /// 0 in JSON), for comparing with when a storm tool started.
    #[serde(default, with = "crate::time::ns_or_zero")]
    pub last_detection_ns: Option<u64>,
    /// The priority's frames during every storm so far, the one going on included
    /// (SONiC's `pfcwd show stats` TX OK/DROP and RX OK/DROP).
    #[serde(default)]
    pub storm_traffic: StormTraffic,
    /// The same during the latest storm, up to now if it goes on (SONiC's LAST columns).
    #[serde(default)]
    pub last_storm_traffic: StormTraffic,
}
}

/// One priority's frames while it was stormed: what its egress queue sent and dropped,
/// and what its port received. The watchdog drops at the egress queue only, so
/// `rx_dropped` stays zero; it is there because SONiC's view has the column.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StormTraffic {
    /// Frames the egress queue sent.
    pub tx_ok: u64,
    /// Frames bound for the egress queue that the watchdog dropped.
    pub tx_dropped: u64,
    /// Frames of the priority the port received.
    pub rx_ok: u64,
    /// Frames of the priority the port received and dropped (none: see above).
    pub rx_dropped: u64,
}

impl StormTraffic {
    fn since(self, earlier: StormTraffic) -> StormTraffic {
        StormTraffic {
            tx_ok: self.tx_ok.saturating_sub(earlier.tx_ok),
            tx_dropped: self.tx_dropped.saturating_sub(earlier.tx_dropped),
            rx_ok: self.rx_ok.saturating_sub(earlier.rx_ok),
            rx_dropped: self.rx_dropped.saturating_sub(earlier.rx_dropped),
        }
    }

    fn add(self, more: StormTraffic) -> StormTraffic {
        StormTraffic {
            tx_ok: self.tx_ok + more.tx_ok,
            tx_dropped: self.tx_dropped + more.tx_dropped,
            rx_ok: self.rx_ok + more.rx_ok,
            rx_dropped: self.rx_dropped + more.rx_dropped,
        }
    }
}

/// Frames one priority has sent from its port's egress queue and received on the port,
/// as the port's counters have them: what the watchdog reads at a storm's start and end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PrioFrames {
    pub tx: u64,
    pub rx: u64,
}

/// A change of state, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchdogEvent {
    /// `prio` on `port` was paused, with frames waiting, for the detection time: stormed.
    StormDetected {
        /// The port whose link partner stormed.
        port: PortId,
        /// The stormed priority.
        prio: Priority,
        /// When the storm was detected.
        at: Time,
        /// Since when the priority had been paused with frames waiting.
        stalled_since: Time,
        /// What the watchdog does about it.
        action: WatchdogAction,
    },
    /// No pause came on `prio` for the restoration time: the priority is restored.
    Restored {
        /// The port.
        port: PortId,
        /// The restored priority.
        prio: Priority,
        /// When it was restored.
        at: Time,
        /// How long the storm lasted.
        stormed_for: Duration,
    },
}

/// Events not yet taken by the shell, oldest first; the oldest is forgotten (and counted)
/// when the shell falls behind, so a flapping partner cannot grow memory.
#[derive(Clone, Debug, Default)]
pub(crate) struct WatchdogEvents {
    queue: VecDeque<WatchdogEvent>,
    pub forgotten: u64,
}

impl WatchdogEvents {
    const CAPACITY: usize = 256;

    pub fn push(&mut self, e: WatchdogEvent) {
        if self.queue.len() == Self::CAPACITY {
            self.queue.pop_front();
            self.forgotten += 1;
        }
        self.queue.push_back(e);
    }

    pub fn pop(&mut self) -> Option<WatchdogEvent> {
        self.queue.pop_front()
    }
}

/// The watchdog of one port.
#[derive(Clone, Debug)]
pub(crate) struct PortWatchdog {
    action: WatchdogAction,
    detection: Duration,
    restoration: Duration,
    /// The priorities stormed now. The pause gate asks for every frame the port sends, so
    /// the answer is one word beside `action`, not a look at every priority's state.
    stormed: Priorities,
    watch: [PrioWatch; PRIORITIES],
    /// Out of line: written at a storm's start and end, read by the stats. Made at the
    /// port's first storm (one allocation in its life): most ports never see one, and a
    /// simulated fabric has thousands.
    counters: Option<Box<[PrioRecord; PRIORITIES]>>,
}

/// One priority's counters, and its traffic when its storm began (while it lasts).
#[derive(Clone, Copy, Debug, Default)]
struct PrioRecord {
    counters: WatchdogCounters,
    /// Storms that ended: their traffic.
    closed: StormTraffic,
    at_storm: StormTraffic,
}

/// What the watchdog keeps of one priority between checks.
#[derive(Clone, Copy, Debug, Default)]
struct PrioWatch {
    /// Since when it has been stormed (meaningful while it is in `stormed`).
    stormed_at: Time,
    /// Since when frames have waited without a break, as last checked.
    waiting_since: Option<Time>,
}

/// What the watchdog sees of a port's priorities at one moment.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Observed {
    /// Per priority: since when the partner has paused it without a break, if it does.
    pub paused_since: [Option<Time>; PRIORITIES],
    /// Per priority: when the partner's last pause (not a resume) for it arrived; given
    /// for the stormed priorities only, since only their restoration reads it.
    pub last_pause: [Option<Time>; PRIORITIES],
    /// Priorities with frames waiting to go out on the port (queued or held).
    pub waiting: Priorities,
}

impl PortWatchdog {
    pub fn new(config: &WatchdogConfig) -> PortWatchdog {
        PortWatchdog {
            action: config.action,
            detection: Duration::from_millis(config.detection_ms),
            restoration: Duration::from_millis(config.restoration_ms),
            stormed: Priorities::NONE,
            watch: [PrioWatch::default(); PRIORITIES],
            counters: None,
        }
    }

    fn record(&self, prio: Priority) -> PrioRecord {
        self.counters.as_ref().map_or_else(PrioRecord::default, |r| r[prio])
    }

    fn record_mut(&mut self, prio: Priority) -> &mut PrioRecord {
        &mut self.counters.get_or_insert_with(|| Box::new([PrioRecord::default(); PRIORITIES]))[prio]
    }

    pub fn action(&self) -> WatchdogAction {
        self.action
    }

    /// Priorities the watchdog currently acts on.
    pub fn stormed(&self) -> Priorities {
        self.stormed
    }

    /// Since when `prio` has been stormed, if it is.
    fn stormed_at(&self, prio: Priority) -> Option<Time> {
        self.stormed.contains(prio).then_some(self.watch[prio].stormed_at)
    }

    /// Stormed priorities whose frames are dropped.
    pub fn dropping(&self) -> Priorities {
        if self.action == WatchdogAction::Drop {
            self.stormed()
        } else {
            Priorities::NONE
        }
    }

    /// Stormed priorities whose partner's pauses are ignored.
    pub fn forwarding(&self) -> Priorities {
        if self.action == WatchdogAction::Forward {
            self.stormed()
        } else {
            Priorities::NONE
        }
    }

    /// `prio`'s counters, given its frames as the port counts them now.
    pub fn counters(&self, prio: Priority, frames: PrioFrames) -> WatchdogCounters {
        let r = self.record(prio);
        let mut c = r.counters;
        c.storm_traffic = r.closed;
        if self.stormed.contains(prio) {
            c.last_storm_traffic = self.traffic(prio, frames).since(r.at_storm);
            c.storm_traffic = c.storm_traffic.add(c.last_storm_traffic);
        }
        c
    }

    /// `prio`'s traffic counts as of now: `frames`, and the drops the watchdog counted.
    fn traffic(&self, prio: Priority, frames: PrioFrames) -> StormTraffic {
        let dropped = self.record(prio).counters.dropped_frames;
        StormTraffic { tx_ok: frames.tx, tx_dropped: dropped, rx_ok: frames.rx, rx_dropped: 0 }
    }

    pub fn note_dropped(&mut self, prio: Priority) {
        self.record_mut(prio).counters.dropped_frames += 1;
    }

    /// Notes what waits ([`PortWatchdog::note_waiting`]), then detects storms and restores
    /// priorities among `lossless` as of `now`; reports each change through `event`.
    /// `frames` gives a priority's frames as the port counts them, read where a storm
    /// begins or ends. Before [`PortWatchdog::deadline`] (read after the note) it changes
    /// nothing but the note.
    pub fn check(
        &mut self,
        now: Time,
        port: PortId,
        lossless: Priorities,
        seen: &Observed,
        frames: impl Fn(Priority) -> PrioFrames,
        mut event: impl FnMut(WatchdogEvent),
    ) {
        if self.action == WatchdogAction::Off {
            return;
        }
        self.note_waiting(now, lossless, seen.waiting);
        for prio in lossless.iter() {
            match self.stormed_at(prio) {
                None => {
                    let Some(since) = self.stalled_since(prio, seen) else { continue };
                    if now.saturating_since(since) >= self.detection {
                        self.stormed.insert(prio);
                        self.watch[prio].stormed_at = now;
                        let at_storm = self.traffic(prio, frames(prio));
                        self.record_mut(prio).at_storm = at_storm;
                        let c = &mut self.record_mut(prio).counters;
                        c.storms_detected += 1;
                        c.last_detection_us = now.saturating_since(since).as_micros() as u64;
                        c.last_detection_ns = Some(now.as_nanos());
                        event(WatchdogEvent::StormDetected {
                            port,
                            prio,
                            at: now,
                            stalled_since: since,
                            action: self.action,
                        });
                    }
                }
                Some(stormed_at) => {
                    if now >= self.restore_at(stormed_at, prio, seen) {
                        let storm = self.traffic(prio, frames(prio)).since(self.record(prio).at_storm);
                        self.stormed.remove(prio);
                        let r = self.record_mut(prio);
                        r.counters.restored += 1;
                        r.counters.last_storm_traffic = storm;
                        r.closed = r.closed.add(storm);
                        event(WatchdogEvent::Restored {
                            port,
                            prio,
                            at: now,
                            stormed_for: now.saturating_since(stormed_at),
                        });
                    }
                }
            }
        }
    }

    /// What a check does when none of `lossless` is paused or stormed: it notes which
    /// of them have frames waiting (`waiting`), and since when, and nothing else.
    pub fn note_waiting(&mut self, now: Time, lossless: Priorities, waiting: Priorities) {
        for prio in lossless.iter() {
            let w = &mut self.watch[prio];
            w.waiting_since = if waiting.contains(prio) { Some(w.waiting_since.unwrap_or(now)) } else { None };
        }
    }

    /// When a priority stormed since `stormed_at` is restored if no pause comes before.
    fn restore_at(&self, stormed_at: Time, prio: Priority, seen: &Observed) -> Time {
        seen.last_pause[prio].unwrap_or(stormed_at) + self.restoration
    }

    /// Since when `prio` has been both paused and waiting, if it is (waiting as of the
    /// last check).
    fn stalled_since(&self, prio: Priority, seen: &Observed) -> Option<Time> {
        match (seen.paused_since[prio], self.watch[prio].waiting_since) {
            (Some(paused), Some(waiting)) if seen.waiting.contains(prio) => Some(paused.max(waiting)),
            _ => None,
        }
    }

    /// The next time [`PortWatchdog::check`] could change something without new input
    /// (`now` if frames wait that it has not seen yet).
    pub fn deadline(&self, now: Time, lossless: Priorities, seen: &Observed) -> Option<Time> {
        if self.action == WatchdogAction::Off {
            return None;
        }
        lossless
            .iter()
            .filter_map(|prio| match self.stormed_at(prio) {
                None if seen.waiting.contains(prio) && seen.paused_since[prio].is_some() => {
                    Some(self.stalled_since(prio, seen).map_or(now, |s| s + self.detection))
                }
                None => None,
                Some(at) => Some(self.restore_at(at, prio, seen)),
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const PRIO3: Priority = Priority::new(3);
    const P3: Priorities = Priorities::only(PRIO3);
    const NONE: Priorities = Priorities::NONE;

    fn seen(paused_since: Option<Time>, last_pause: Option<Time>, waiting: bool) -> Observed {
        let mut o = Observed { paused_since: [None; 8], last_pause: [None; 8], waiting: NONE };
        o.paused_since[3] = paused_since;
        o.last_pause[3] = last_pause;
        o.waiting = if waiting { P3 } else { Priorities::NONE };
        o
    }

    fn no_frames(_: Priority) -> PrioFrames {
        PrioFrames::default()
    }

    fn watchdog(action: WatchdogAction) -> PortWatchdog {
        PortWatchdog::new(&WatchdogConfig { action, detection_ms: 200, restoration_ms: 100 })
    }

    #[test]
    fn a_priority_paused_with_frames_waiting_for_the_detection_time_is_stormed_then_restored_when_quiet() {
        let mut w = watchdog(WatchdogAction::Drop);
        let t0 = Time::from_millis(1000);
        let mut events = Vec::new();
        let paused = seen(Some(t0), Some(t0 + 150 * MS), true);
        // Frames it has not seen waiting yet: look now.
        assert_eq!(w.deadline(t0, P3, &paused), Some(t0));
        w.check(t0, PortId::new(1), P3, &paused, no_frames, |e| events.push(e));
        assert_eq!(w.deadline(t0, P3, &paused), Some(t0 + 200 * MS));
        w.check(t0 + 199 * MS, PortId::new(1), P3, &paused, no_frames, |e| events.push(e));
        assert!(events.is_empty() && w.stormed().is_empty());
        w.check(t0 + 200 * MS, PortId::new(1), P3, &paused, no_frames, |e| events.push(e));
        assert_eq!(w.dropping(), P3);
        assert!(
            matches!(events[0], WatchdogEvent::StormDetected { port, prio: PRIO3, stalled_since, .. } if port == PortId::new(1) && stalled_since == t0)
        );
        assert_eq!(w.counters(PRIO3, PrioFrames::default()).last_detection_us, 200_000);
        // Pauses keep coming until 300 ms: restored 100 ms after the last one.
        let storming = seen(Some(t0), Some(t0 + 300 * MS), true);
        assert_eq!(w.deadline(t0, P3, &storming), Some(t0 + 400 * MS));
        w.check(t0 + 399 * MS, PortId::new(1), P3, &storming, no_frames, |e| events.push(e));
        assert_eq!(w.stormed(), P3);
        w.check(t0 + 400 * MS, PortId::new(1), P3, &seen(None, Some(t0 + 300 * MS), true), no_frames, |e| {
            events.push(e)
        });
        assert_eq!(w.stormed(), NONE);
        assert!(
            matches!(events[1], WatchdogEvent::Restored { prio: PRIO3, stormed_for, .. } if stormed_for == 200 * MS)
        );
        assert_eq!(
            (
                w.counters(PRIO3, PrioFrames::default()).storms_detected,
                w.counters(PRIO3, PrioFrames::default()).restored
            ),
            (1, 1)
        );
    }

    #[test]
    fn the_time_counts_from_when_frames_began_to_wait_under_a_standing_pause() {
        let mut w = watchdog(WatchdogAction::Drop);
        let t0 = Time::from_millis(1000);
        // Paused since t0, idle until 500 ms: nothing held back until frames arrive.
        w.check(t0 + 500 * MS, PortId::new(0), P3, &seen(Some(t0), Some(t0), false), no_frames, |_| panic!("idle"));
        w.check(t0 + 500 * MS, PortId::new(0), P3, &seen(Some(t0), Some(t0), true), no_frames, |_| {
            panic!("just began to wait")
        });
        w.check(t0 + 699 * MS, PortId::new(0), P3, &seen(Some(t0), Some(t0), true), no_frames, |_| panic!("199 ms"));
        let mut fired = false;
        w.check(t0 + 700 * MS, PortId::new(0), P3, &seen(Some(t0), Some(t0), true), no_frames, |_| fired = true);
        assert!(fired && w.counters(PRIO3, PrioFrames::default()).last_detection_us == 200_000);
    }

    #[test]
    fn an_idle_priority_or_a_lossy_one_or_a_watchdog_that_is_off_never_fires() {
        let t0 = Time::from_millis(1000);
        let late = t0 + 10_000 * MS;
        let mut w = watchdog(WatchdogAction::Drop);
        w.check(late, PortId::new(0), P3, &seen(Some(t0), Some(t0), false), no_frames, |_| panic!("idle"));
        w.check(
            late,
            PortId::new(0),
            Priorities::only(Priority::new(4)),
            &seen(Some(t0), Some(t0), true),
            no_frames,
            |_| panic!("priority 3 is not lossless here"),
        );
        assert_eq!(w.deadline(late, P3, &seen(Some(t0), Some(t0), false)), None);
        let mut off = watchdog(WatchdogAction::Off);
        off.check(late, PortId::new(0), P3, &seen(Some(t0), Some(t0), true), no_frames, |_| panic!("off"));
        assert_eq!(off.deadline(late, P3, &seen(Some(t0), Some(t0), true)), None);
    }

    #[test]
    fn forward_and_alert_act_on_nothing_but_their_own_priorities() {
        let t0 = Time::from_millis(1000);
        for (action, dropping, forwarding) in
            [(WatchdogAction::Forward, NONE, P3), (WatchdogAction::Alert, NONE, NONE), (WatchdogAction::Drop, P3, NONE)]
        {
            let mut w = watchdog(action);
            w.check(t0, PortId::new(0), P3, &seen(Some(t0), Some(t0), true), no_frames, |_| {});
            w.check(t0 + 200 * MS, PortId::new(0), P3, &seen(Some(t0), Some(t0), true), no_frames, |_| {});
            assert_eq!((w.stormed(), w.dropping(), w.forwarding()), (P3, dropping, forwarding), "{action:?}");
        }
    }

    #[test]
    fn a_storms_traffic_is_what_the_counters_gained_while_it_lasted_and_the_latest_storm_is_kept_apart() {
        let mut w = watchdog(WatchdogAction::Drop);
        let t0 = Time::from_millis(1000);
        let frames = |tx, rx| move |_: Priority| PrioFrames { tx, rx };
        let stalled = seen(Some(t0), Some(t0), true);
        w.check(t0, PortId::new(0), P3, &stalled, frames(100, 50), |_| {});
        w.check(t0 + 200 * MS, PortId::new(0), P3, &stalled, frames(100, 50), |_| {});
        for _ in 0..7 {
            w.note_dropped(PRIO3);
        }
        // While it lasts, the storm so far is both the latest and all there has been.
        let during = w.counters(PRIO3, PrioFrames { tx: 101, rx: 60 });
        let so_far = StormTraffic { tx_ok: 1, tx_dropped: 7, rx_ok: 10, rx_dropped: 0 };
        assert_eq!((during.storm_traffic, during.last_storm_traffic), (so_far, so_far));
        w.check(t0 + 300 * MS, PortId::new(0), P3, &seen(None, Some(t0), true), frames(102, 70), |_| {});
        assert_eq!(w.stormed(), NONE);
        // Frames after the storm count for nothing; a second storm adds to the total.
        let after = w.counters(PRIO3, PrioFrames { tx: 500, rx: 500 });
        let first = StormTraffic { tx_ok: 2, tx_dropped: 7, rx_ok: 20, rx_dropped: 0 };
        assert_eq!((after.storm_traffic, after.last_storm_traffic), (first, first));
        let t1 = t0 + 1000 * MS;
        let stalled = seen(Some(t1), Some(t1), true);
        w.check(t1, PortId::new(0), P3, &stalled, frames(500, 500), |_| {});
        w.check(t1 + 200 * MS, PortId::new(0), P3, &stalled, frames(500, 500), |_| {});
        w.note_dropped(PRIO3);
        w.check(t1 + 300 * MS, PortId::new(0), P3, &seen(None, Some(t1), true), frames(503, 504), |_| {});
        let both = w.counters(PRIO3, PrioFrames { tx: 900, rx: 900 });
        let second = StormTraffic { tx_ok: 3, tx_dropped: 1, rx_ok: 4, rx_dropped: 0 };
        assert_eq!(both.last_storm_traffic, second);
        assert_eq!(both.storm_traffic, StormTraffic { tx_ok: 5, tx_dropped: 8, rx_ok: 24, rx_dropped: 0 });
    }

    #[test]
    fn a_port_override_replaces_only_the_fields_it_names() {
        let global = WatchdogConfig::default();
        let over =
            WatchdogOverride { action: Some(WatchdogAction::Alert), detection_ms: None, restoration_ms: Some(50) };
        assert_eq!(
            global.with(Some(&over)),
            WatchdogConfig { action: WatchdogAction::Alert, detection_ms: 200, restoration_ms: 50 }
        );
        assert_eq!(global.with(None), global);
    }
}
