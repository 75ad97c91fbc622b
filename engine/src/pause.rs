//! The egress side of flow control: which priorities the link partner has paused, and
//! for how long. Also accounts the time each priority spent paused.

use std::time::Duration;

use super::priorities::PRIORITIES;
use super::priorities::{Priorities, Priority};
use super::time::Time;

/// What one pause timer remembers besides its end: its paused-time accounting and the
/// watchdog's view of it.
#[derive(Clone, Copy, Debug, Default)]
struct History {
    since: Time,
    /// Paused time of intervals already closed.
    closed: Duration,
    /// Since when the timer has run without a break (meaningful while paused).
    run_start: Time,
    /// When the last pause (not a resume) arrived.
    last_pause: Option<Time>,
    /// Runs started: pauses that found the timer expired.
    runs: u64,
}

/// What SONiC's `pfcstat --history` shows of one priority: how often the link partner
/// paused it, for how long in all, and when its latest pause began and how long it
/// lasted (or has lasted, if it still holds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PauseHistory {
    /// Pauses that found the priority running: each begins a run of pauses.
    pub transitions: u64,
    /// Time the priority has been paused in all, µs.
    pub paused_us: u64,
    /// When the latest run began (the switch's monotonic clock, ns); `None` if none has
    /// (0 in JSON).
    #[serde(with = "crate::time::ns_or_zero")]
    pub recent_start_ns: Option<u64>,
    /// How long the latest run lasted, up to now if it holds, µs.
    pub recent_us: u64,
}

/// The index of the 802.3x timer (the whole port) after the per-priority ones.
const PORT: usize = PRIORITIES;

/// The pauses a link partner sent one port: per priority (PFC) or for the whole link (802.3x), with
/// when each ends and how long each priority has been paused.
///
/// The timers' ends are kept apart from their histories, which are out of line: the pause
/// gate reads all nine ends for every frame a port sends, and side by side they fill two
/// cache lines, where nine whole timers spread them over eight (in a fabric of hundreds
/// of ports, each a wait for memory).
#[derive(Clone, Debug, Default)]
pub struct EgressPause {
    /// When each timer ends: per priority, then the port's ([`PORT`]).
    until: [Time; PRIORITIES + 1],
    history: Box<[History; PRIORITIES + 1]>,
}

impl EgressPause {
    /// PFC for one priority: pause for `d` from `now` (zero = resume).
    pub fn pause_priority(&mut self, now: Time, prio: Priority, d: Duration) {
        self.apply(now, prio.index(), d);
    }

    /// 802.3x PAUSE: the whole port.
    pub fn pause_port(&mut self, now: Time, d: Duration) {
        self.apply(now, PORT, d);
    }

    /// A newer frame replaces timer `t`; zero resumes at once.
    fn apply(&mut self, now: Time, t: usize, d: Duration) {
        let h = &mut self.history[t];
        if !d.is_zero() {
            if now >= self.until[t] {
                h.run_start = now;
                h.runs += 1;
            }
            h.last_pause = Some(now);
        }
        let end = self.until[t].min(now);
        h.closed += end.saturating_since(h.since);
        h.since = now;
        self.until[t] = now + d;
    }

    fn timer_paused(&self, now: Time, t: usize) -> bool {
        now < self.until[t]
    }

    fn total(&self, now: Time, t: usize) -> Duration {
        let h = &self.history[t];
        h.closed + self.until[t].min(now).saturating_since(h.since)
    }

    /// Priorities that may not transmit at `now`.
    pub fn paused(&self, now: Time) -> Priorities {
        if self.timer_paused(now, PORT) {
            return Priorities::ALL;
        }
        Priorities::matching(|p| self.timer_paused(now, p.index()))
    }

    /// Whether an 802.3x PAUSE holds the port at `now`, or a PFC pause any of `prios`:
    /// what [`EgressPause::paused`] says of them, without building the whole set.
    pub fn any_paused(&self, now: Time, prios: Priorities) -> bool {
        self.timer_paused(now, PORT) || prios.iter().any(|p| self.timer_paused(now, p.index()))
    }

    /// When the earliest of `prios` resumes, if any is paused.
    pub fn resume_at(&self, now: Time, prios: Priorities) -> Option<Time> {
        let per_prio =
            prios.iter().map(Priority::index).filter(|&p| self.timer_paused(now, p)).map(|p| self.until[p]).min();
        if self.timer_paused(now, PORT) {
            // Blocked until both the port and the priority timers allow.
            let port = self.until[PORT];
            return Some(per_prio.map_or(port, |t| t.max(port)));
        }
        per_prio
    }

    /// Since when the partner has kept `prio` paused without a break, if it does now
    /// (PFC only: the PFC watchdog's view).
    pub fn paused_since(&self, now: Time, prio: Priority) -> Option<Time> {
        self.timer_paused(now, prio.index()).then(|| self.history[prio.index()].run_start)
    }

    /// When the last PFC pause for `prio` arrived.
    pub fn last_pause(&self, prio: Priority) -> Option<Time> {
        self.history[prio.index()].last_pause
    }

    /// Since when an 802.3x PAUSE has held the whole port without a break, if it holds now.
    pub fn port_paused_since(&self, now: Time) -> Option<Time> {
        self.timer_paused(now, PORT).then(|| self.history[PORT].run_start)
    }

    /// When the last 802.3x PAUSE arrived.
    pub fn last_port_pause(&self) -> Option<Time> {
        self.history[PORT].last_pause
    }

    /// The PFC pauses `prio` has had, up to `now` (802.3x pauses not included).
    pub fn history(&self, now: Time, prio: Priority) -> PauseHistory {
        let t = prio.index();
        let h = &self.history[t];
        let recent = (h.runs > 0).then(|| (h.run_start, self.until[t].min(now).saturating_since(h.run_start)));
        PauseHistory {
            transitions: h.runs,
            paused_us: self.total(now, t).as_micros() as u64,
            recent_start_ns: recent.map(|(start, _)| start.as_nanos()),
            recent_us: recent.map_or(0, |(_, d)| d.as_micros() as u64),
        }
    }

    /// Time `prio` has spent unable to transmit, up to `now`.
    pub fn paused_time(&self, now: Time, prio: Priority) -> Duration {
        self.total(now, prio.index()) + self.total(now, PORT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn newer_frame_replaces_timer_and_zero_resumes() {
        let mut e = EgressPause::default();
        let t0 = Time::from_millis(10);
        e.pause_priority(t0, P3, 5 * MS);
        assert_eq!(e.paused(t0), Priorities::only(P3));
        assert_eq!(e.resume_at(t0, Priorities::ALL), Some(t0 + 5 * MS));
        // A shorter pause replaces a longer one.
        e.pause_priority(t0 + MS, P3, MS);
        assert_eq!(e.resume_at(t0 + MS, Priorities::ALL), Some(t0 + 2 * MS));
        assert_eq!(e.paused(t0 + 2 * MS), Priorities::NONE);
        // Zero quanta resume at once.
        e.pause_priority(t0 + 3 * MS, P3, 10 * MS);
        e.pause_priority(t0 + 4 * MS, P3, Duration::ZERO);
        assert_eq!(e.paused(t0 + 4 * MS), Priorities::NONE);
        // Paused: 0..2 ms, then 3..4 ms.
        assert_eq!(e.paused_time(t0 + 20 * MS, P3), 3 * MS);
        assert_eq!(e.paused_time(t0 + 20 * MS, P4), Duration::ZERO);
    }

    #[test]
    fn any_paused_agrees_with_the_paused_set_and_counts_a_port_pause_for_every_priority() {
        let mut e = EgressPause::default();
        let t0 = Time::from_millis(10);
        let (p3, p4) = (Priorities::only(P3), Priorities::only(P4));
        e.pause_priority(t0, P3, 5 * MS);
        for at in [t0, t0 + 4 * MS, t0 + 5 * MS] {
            for prios in [p3, p4, p3 | p4, Priorities::NONE] {
                assert_eq!(e.any_paused(at, prios), !(e.paused(at) & prios).is_empty(), "{at:?} {prios:?}");
            }
        }
        e.pause_port(t0 + 6 * MS, MS);
        assert!(e.any_paused(t0 + 6 * MS, p4) && e.any_paused(t0 + 6 * MS, Priorities::NONE));
        assert!(!e.any_paused(t0 + 7 * MS, p3 | p4));
    }

    #[test]
    fn refreshes_before_expiry_extend_one_run_and_a_gap_starts_a_new_one() {
        let mut e = EgressPause::default();
        let t0 = Time::from_millis(10);
        e.pause_priority(t0, P3, 5 * MS);
        e.pause_priority(t0 + 4 * MS, P3, 5 * MS);
        assert_eq!(e.paused_since(t0 + 8 * MS, P3), Some(t0));
        assert_eq!(e.last_pause(P3), Some(t0 + 4 * MS));
        // Expired at 9 ms: the next pause starts a new run; a resume ends it.
        assert_eq!(e.paused_since(t0 + 9 * MS, P3), None);
        e.pause_priority(t0 + 10 * MS, P3, 5 * MS);
        assert_eq!(e.paused_since(t0 + 11 * MS, P3), Some(t0 + 10 * MS));
        e.pause_priority(t0 + 12 * MS, P3, Duration::ZERO);
        assert_eq!((e.paused_since(t0 + 12 * MS, P3), e.last_pause(P3)), (None, Some(t0 + 10 * MS)));
    }

    #[test]
    fn the_history_counts_runs_not_frames_and_remembers_the_latest_run() {
        let mut e = EgressPause::default();
        let t0 = Time::from_millis(10);
        assert_eq!(e.history(t0, P3), PauseHistory::default());
        // One run of three frames (0 to 9 ms), then a run of 2 ms cut short by a resume.
        e.pause_priority(t0, P3, 5 * MS);
        e.pause_priority(t0 + 2 * MS, P3, 5 * MS);
        e.pause_priority(t0 + 4 * MS, P3, 5 * MS);
        e.pause_priority(t0 + 20 * MS, P3, 5 * MS);
        let during = e.history(t0 + 21 * MS, P3);
        assert_eq!((during.transitions, during.recent_us, during.paused_us), (2, 1000, 10_000));
        e.pause_priority(t0 + 22 * MS, P3, Duration::ZERO);
        let h = e.history(t0 + 30 * MS, P3);
        assert_eq!(h.transitions, 2);
        assert_eq!(h.paused_us, 11_000);
        assert_eq!(h.recent_start_ns, Some((t0 + 20 * MS).as_nanos()));
        assert_eq!(h.recent_us, 2000);
        // An 802.3x pause is not a PFC run.
        e.pause_port(t0 + 40 * MS, MS);
        assert_eq!(e.history(t0 + 50 * MS, P3).transitions, 2);
    }

    #[test]
    fn global_pause_stops_every_priority() {
        let mut e = EgressPause::default();
        let t = Time::from_millis(1);
        e.pause_port(t, MS);
        assert_eq!(e.paused(t), Priorities::ALL);
        assert_eq!(e.resume_at(t, Priorities::only(P0)), Some(t + MS));
        assert_eq!(e.paused_time(t + 5 * MS, P7), MS);
        assert_eq!(e.paused(t + MS), Priorities::NONE);
    }
}
