//! How long the polling loop was kept from polling: a switch process that loses its CPU
//! for 10 ms receives 10 ms of traffic in one burst, too late to pause it in time. Tests
//! and benches read this to tell the machine's stalls from the switch's faults.

use std::time::Duration;

use crate::core::stats::{Stall, StallStats};
use crate::core::time::Time;

/// Gaps at least this long count as stalls.
pub const STALL: Duration = Duration::from_millis(1);
/// Stalls remembered with their time.
const RECENT: usize = 32;

/// Measures gaps between polls, not counting sleeps the loop chose: after a sleep, only
/// the time past its deadline counts. (A sleep cut short by an arriving frame whose
/// wake-up came late is not seen.)
#[derive(Debug)]
pub struct StallMeter {
    last_poll: Option<Time>,
    sleep_until: Option<Time>,
    stalls: u64,
    longest_us: u64,
    /// A ring of the latest stalls (oldest overwritten).
    recent: [Stall; RECENT],
    next: usize,
}

impl Default for StallMeter {
    fn default() -> StallMeter {
        StallMeter {
            last_poll: None,
            sleep_until: None,
            stalls: 0,
            longest_us: 0,
            recent: [Stall::default(); RECENT],
            next: 0,
        }
    }
}

impl StallMeter {
    /// The loop polls its rings at `now`.
    pub fn poll(&mut self, now: Time) {
        if let Some(expected) = self.sleep_until.take().or(self.last_poll) {
            let gap = now.saturating_since(expected);
            if gap >= STALL {
                let us = gap.as_micros() as u64;
                self.stalls += 1;
                self.longest_us = self.longest_us.max(us);
                self.recent[self.next % RECENT] = Stall { ended_ns: now.as_nanos(), us };
                self.next += 1;
            }
        }
        self.last_poll = Some(now);
    }

    /// The loop goes to sleep until `deadline` at the latest.
    pub fn sleeping(&mut self, deadline: Time) {
        self.sleep_until = Some(deadline);
    }

    pub fn stats(&self) -> StallStats {
        let kept = self.next.min(RECENT);
        let recent = (self.next - kept..self.next).map(|i| self.recent[i % RECENT]).collect();
        StallStats { stalls: self.stalls, longest_us: self.longest_us, recent, cpu_wait_us: None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Time {
        Time::from_micros(us)
    }

    #[test]
    fn gaps_between_polls_count_and_chosen_sleeps_do_not() {
        let mut m = StallMeter::default();
        m.poll(at(0));
        m.poll(at(20));
        m.poll(at(3_020)); // preempted for 3 ms
        m.sleeping(at(50_000));
        m.poll(at(40_000)); // woken early by a frame
        m.sleeping(at(90_000));
        m.poll(at(91_500)); // woke 1.5 ms late
        m.poll(at(91_600));
        let s = m.stats();
        assert_eq!((s.stalls, s.longest_us), (2, 3_000));
        let stall = |ended_us: u64, us| Stall { ended_ns: ended_us * 1000, us };
        assert_eq!(s.recent, vec![stall(3_020, 3_000), stall(91_500, 1_500)]);
        assert_eq!(s.longest_since(4_000_000), Some(stall(91_500, 1_500)));
    }

    #[test]
    fn only_the_latest_stalls_are_kept() {
        let mut m = StallMeter::default();
        for i in 0..(RECENT as u64 + 5) {
            m.poll(at(i * 10_000));
        }
        let s = m.stats();
        assert_eq!(s.stalls, RECENT as u64 + 4);
        assert_eq!(s.recent.len(), RECENT);
        assert_eq!(s.recent.last().unwrap().ended_ns, (RECENT as u64 + 4) * 10_000_000);
        assert!(s.recent.windows(2).all(|w| w[0].ended_ns < w[1].ended_ns), "oldest first");
    }
}
