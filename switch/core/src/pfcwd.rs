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

use super::ports::PortId;
use super::priorities::Priorities;
use super::priorities::PRIORITIES;
use super::time::Time;

/// What the watchdog does to a stormed priority.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WatchdogAction {
    /// Drop the priority's queue and every frame arriving for it until restored.
    #[default]
    Drop,
    /// Send the priority's frames as if the partner had not paused it.
    Forward,
    /// Only count and log.
    Alert,
    /// No watchdog.
    Off,
}

/// `[pfcwd]`: SONiC's defaults (200 ms, 200 ms, drop).
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WatchdogConfig {
    /// What a stormed priority leads to.
    pub action: WatchdogAction,
    /// How long a priority must stay paused, with frames waiting, before the watchdog acts.
    pub detection_ms: u64,
    /// How long without a pause on the priority before it is restored.
    pub restoration_ms: u64,
}

impl Default for WatchdogConfig {
    fn default() -> WatchdogConfig {
        WatchdogConfig { action: WatchdogAction::Drop, detection_ms: 200, restoration_ms: 200 }
    }
}

/// A port's `pfcwd = { ... }`: any field given overrides `[pfcwd]` for that port.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WatchdogOverride {
    /// This port's action, if not the switch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<WatchdogAction>,
    /// This port's detection time, if not the switch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detection_ms: Option<u64>,
    /// This port's restoration time, if not the switch's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restoration_ms: Option<u64>,
}

impl WatchdogConfig {
    /// This configuration with a port's override applied.
    pub fn with(&self, over: Option<&WatchdogOverride>) -> WatchdogConfig {
        let Some(o) = over else { return self.clone() };
        WatchdogConfig {
            action: o.action.unwrap_or(self.action),
            detection_ms: o.detection_ms.unwrap_or(self.detection_ms),
            restoration_ms: o.restoration_ms.unwrap_or(self.restoration_ms),
        }
    }
}

/// What the watchdog did on one priority of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchdogCounters {
    /// Storms detected.
    pub storms_detected: u64,
    /// Storms over (the priority restored).
    pub restored: u64,
    /// Frames dropped while the priority was stormed (action `drop`).
    pub dropped_frames: u64,
    /// From the start of the continuous pause to the last detection, µs.
    pub last_detection_us: u64,
    /// When the last detection happened (the switch's monotonic clock, ns; 0: never),
    /// for comparing with when a storm tool started.
    #[serde(default)]
    pub last_detection_ns: u64,
}

/// A change of state, for the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchdogEvent {
    /// `prio` on `port` was paused, with frames waiting, for the detection time: stormed.
    StormDetected {
        /// The port whose link partner stormed.
        port: PortId,
        /// The stormed priority.
        prio: u8,
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
        prio: u8,
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
    /// Out of line: written at a storm's start and end, read by the stats.
    counters: Box<[WatchdogCounters; PRIORITIES]>,
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
            counters: Box::new([WatchdogCounters::default(); PRIORITIES]),
        }
    }

    pub fn action(&self) -> WatchdogAction {
        self.action
    }

    /// Priorities the watchdog currently acts on.
    pub fn stormed(&self) -> Priorities {
        self.stormed
    }

    /// Since when `prio` has been stormed, if it is.
    fn stormed_at(&self, prio: usize) -> Option<Time> {
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

    pub fn counters(&self, prio: usize) -> WatchdogCounters {
        self.counters[prio]
    }

    pub fn note_dropped(&mut self, prio: usize) {
        self.counters[prio].dropped_frames += 1;
    }

    /// Detects storms and restores priorities among `lossless` as of `now`; reports each
    /// change through `event`.
    pub fn check(
        &mut self,
        now: Time,
        port: PortId,
        lossless: Priorities,
        seen: &Observed,
        mut event: impl FnMut(WatchdogEvent),
    ) {
        if self.action == WatchdogAction::Off {
            return;
        }
        for prio in lossless.iter() {
            let w = &mut self.watch[prio];
            w.waiting_since = if seen.waiting.contains(prio) { Some(w.waiting_since.unwrap_or(now)) } else { None };
            match self.stormed_at(prio) {
                None => {
                    let Some(since) = self.stalled_since(prio, seen) else { continue };
                    if now.saturating_since(since) >= self.detection {
                        self.stormed.insert(prio);
                        self.watch[prio].stormed_at = now;
                        let c = &mut self.counters[prio];
                        c.storms_detected += 1;
                        c.last_detection_us = now.saturating_since(since).as_micros() as u64;
                        c.last_detection_ns = now.as_nanos();
                        event(WatchdogEvent::StormDetected {
                            port,
                            prio: prio as u8,
                            at: now,
                            stalled_since: since,
                            action: self.action,
                        });
                    }
                }
                Some(stormed_at) => {
                    if now >= self.restore_at(stormed_at, prio, seen) {
                        self.stormed.remove(prio);
                        self.counters[prio].restored += 1;
                        event(WatchdogEvent::Restored {
                            port,
                            prio: prio as u8,
                            at: now,
                            stormed_for: now.saturating_since(stormed_at),
                        });
                    }
                }
            }
        }
    }

    /// When a priority stormed since `stormed_at` is restored if no pause comes before.
    fn restore_at(&self, stormed_at: Time, prio: usize, seen: &Observed) -> Time {
        seen.last_pause[prio].unwrap_or(stormed_at) + self.restoration
    }

    /// Since when `prio` has been both paused and waiting, if it is (waiting as of the
    /// last check).
    fn stalled_since(&self, prio: usize, seen: &Observed) -> Option<Time> {
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
    const P3: Priorities = Priorities::only(3);
    const NONE: Priorities = Priorities::NONE;

    fn seen(paused_since: Option<Time>, last_pause: Option<Time>, waiting: bool) -> Observed {
        let mut o = Observed { paused_since: [None; 8], last_pause: [None; 8], waiting: NONE };
        o.paused_since[3] = paused_since;
        o.last_pause[3] = last_pause;
        o.waiting = if waiting { Priorities::only(3) } else { Priorities::NONE };
        o
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
        w.check(t0, 1, P3, &paused, |e| events.push(e));
        assert_eq!(w.deadline(t0, P3, &paused), Some(t0 + 200 * MS));
        w.check(t0 + 199 * MS, 1, P3, &paused, |e| events.push(e));
        assert!(events.is_empty() && w.stormed().is_empty());
        w.check(t0 + 200 * MS, 1, P3, &paused, |e| events.push(e));
        assert_eq!(w.dropping(), P3);
        assert!(
            matches!(events[0], WatchdogEvent::StormDetected { port: 1, prio: 3, stalled_since, .. } if stalled_since == t0)
        );
        assert_eq!(w.counters(3).last_detection_us, 200_000);
        // Pauses keep coming until 300 ms: restored 100 ms after the last one.
        let storming = seen(Some(t0), Some(t0 + 300 * MS), true);
        assert_eq!(w.deadline(t0, P3, &storming), Some(t0 + 400 * MS));
        w.check(t0 + 399 * MS, 1, P3, &storming, |e| events.push(e));
        assert_eq!(w.stormed(), P3);
        w.check(t0 + 400 * MS, 1, P3, &seen(None, Some(t0 + 300 * MS), true), |e| events.push(e));
        assert_eq!(w.stormed(), NONE);
        assert!(matches!(events[1], WatchdogEvent::Restored { prio: 3, stormed_for, .. } if stormed_for == 200 * MS));
        assert_eq!((w.counters(3).storms_detected, w.counters(3).restored), (1, 1));
    }

    #[test]
    fn the_time_counts_from_when_frames_began_to_wait_under_a_standing_pause() {
        let mut w = watchdog(WatchdogAction::Drop);
        let t0 = Time::from_millis(1000);
        // Paused since t0, idle until 500 ms: nothing held back until frames arrive.
        w.check(t0 + 500 * MS, 0, P3, &seen(Some(t0), Some(t0), false), |_| panic!("idle"));
        w.check(t0 + 500 * MS, 0, P3, &seen(Some(t0), Some(t0), true), |_| panic!("just began to wait"));
        w.check(t0 + 699 * MS, 0, P3, &seen(Some(t0), Some(t0), true), |_| panic!("199 ms"));
        let mut fired = false;
        w.check(t0 + 700 * MS, 0, P3, &seen(Some(t0), Some(t0), true), |_| fired = true);
        assert!(fired && w.counters(3).last_detection_us == 200_000);
    }

    #[test]
    fn an_idle_priority_or_a_lossy_one_or_a_watchdog_that_is_off_never_fires() {
        let t0 = Time::from_millis(1000);
        let late = t0 + 10_000 * MS;
        let mut w = watchdog(WatchdogAction::Drop);
        w.check(late, 0, P3, &seen(Some(t0), Some(t0), false), |_| panic!("idle"));
        w.check(late, 0, Priorities::only(4), &seen(Some(t0), Some(t0), true), |_| {
            panic!("priority 3 is not lossless here")
        });
        assert_eq!(w.deadline(late, P3, &seen(Some(t0), Some(t0), false)), None);
        let mut off = watchdog(WatchdogAction::Off);
        off.check(late, 0, P3, &seen(Some(t0), Some(t0), true), |_| panic!("off"));
        assert_eq!(off.deadline(late, P3, &seen(Some(t0), Some(t0), true)), None);
    }

    #[test]
    fn forward_and_alert_act_on_nothing_but_their_own_priorities() {
        let t0 = Time::from_millis(1000);
        for (action, dropping, forwarding) in
            [(WatchdogAction::Forward, NONE, P3), (WatchdogAction::Alert, NONE, NONE), (WatchdogAction::Drop, P3, NONE)]
        {
            let mut w = watchdog(action);
            w.check(t0, 0, P3, &seen(Some(t0), Some(t0), true), |_| {});
            w.check(t0 + 200 * MS, 0, P3, &seen(Some(t0), Some(t0), true), |_| {});
            assert_eq!((w.stormed(), w.dropping(), w.forwarding()), (P3, dropping, forwarding), "{action:?}");
        }
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
