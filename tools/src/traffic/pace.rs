//! Rate pacing without drift: the number of frames due is computed from the start time,
//! not accumulated interval by interval.

use pfcswitch::core::time::Time;

#[derive(Clone, Debug)]
pub struct Pacer {
    start: Time,
    /// Frames per second; `None` is as fast as possible.
    rate: Option<f64>,
    /// Most frames released at once after a stall (a late wake-up does not turn into a burst).
    burst: u64,
    credited: u64,
}

impl Pacer {
    pub fn new(start: Time, rate: Option<f64>, burst: u64) -> Pacer {
        Pacer { start, rate: rate.filter(|r| *r > 0.0), burst: burst.max(1), credited: 0 }
    }

    /// How many frames may be sent at `now` (at most `want`); call [`Pacer::sent`] after.
    pub fn due(&mut self, now: Time, want: u64) -> u64 {
        let Some(rate) = self.rate else { return want };
        let target = (now.saturating_since(self.start).as_secs_f64() * rate) as u64;
        if target > self.credited + self.burst {
            // Behind after a stall: forget the backlog beyond one burst.
            self.credited = target - self.burst;
        }
        target.saturating_sub(self.credited).min(want)
    }

    pub fn sent(&mut self, n: u64) {
        self.credited += n;
    }

    /// When the next frame becomes due, if paced.
    pub fn next_due(&self) -> Option<Time> {
        self.due_at(1)
    }

    /// When half a burst is due: a sender that sleeps until then wakes once per few
    /// frames instead of once per frame, keeps the other half of the burst as slack for
    /// waking late, and never exceeds its rate over a burst.
    pub fn next_burst_due(&self) -> Option<Time> {
        self.due_at((self.burst / 2).max(1))
    }

    /// From `now` on, paces at `rate` frames per second (a congestion control changed
    /// it): frames the old rate made due and not yet sent are forgotten, as a NIC's rate
    /// limiter starts over.
    pub fn set_rate(&mut self, now: Time, rate: f64) {
        if self.rate != Some(rate) {
            self.start = now.max(self.start);
            self.credited = 0;
            self.rate = Some(rate).filter(|r| *r > 0.0);
        }
    }

    /// How long the oldest frame due at `now` has waited past its time (zero when none
    /// has, or unpaced): a sender whose loop keeps up stays within a turn of its schedule.
    pub fn lag(&self, now: Time) -> std::time::Duration {
        self.next_due().map_or(std::time::Duration::ZERO, |due| now.saturating_since(due))
    }

    fn due_at(&self, frames: u64) -> Option<Time> {
        let rate = self.rate?;
        let secs = (self.credited + frames) as f64 / rate;
        Some(self.start + std::time::Duration::from_secs_f64(secs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_new_rate_paces_from_when_it_is_set() {
        let t0 = Time::from_millis(0);
        let mut p = Pacer::new(t0, Some(1000.0), 1000);
        let n = p.due(Time::from_millis(100), 1000);
        p.sent(n);
        assert_eq!(n, 100);
        p.set_rate(Time::from_millis(100), 100.0);
        assert_eq!(p.due(Time::from_millis(200), 1000), 10, "100 frames/s for 100 ms");
    }

    #[test]
    fn paces_exactly_and_limits_bursts() {
        let t0 = Time::from_millis(5);
        let mut p = Pacer::new(t0, Some(1000.0), 8);
        let mut sent = 0;
        let mut now = t0;
        for _ in 0..1000 {
            now = now + Duration::from_micros(700);
            let n = p.due(now, 100);
            p.sent(n);
            sent += n;
        }
        assert_eq!(sent, 700, "0.7 s at 1000 pps");
        // A 1 s stall releases only a burst.
        now = now + Duration::from_secs(1);
        assert_eq!(p.lag(now), Duration::from_secs(1) - Duration::from_millis(1), "due since the stall began");
        assert_eq!(p.due(now, 100), 8);
        assert!(p.next_due().unwrap() > t0);
        assert!(p.next_burst_due().unwrap() > p.next_due().unwrap());
        // The backlog beyond a burst is forgotten: the oldest frame still due is a burst old.
        assert_eq!(p.lag(now), Duration::from_millis(7));
        let mut free = Pacer::new(t0, None, 1);
        assert_eq!(free.due(t0, 64), 64);
    }
}
