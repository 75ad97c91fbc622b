//! The egress shaper: paces a port at its configured line rate.
//!
//! veth has no line rate of its own, so without pacing no queue would ever build.
//! The shaper tracks when the (virtual) wire becomes free; a frame may be handed to the
//! kernel once the wire is free within `burst` of now. Idle time is never banked.

use std::time::Duration;

use super::speed::Speed;
use super::time::Time;

#[derive(Clone, Debug)]
pub struct Shaper {
    speed: Speed,
    burst: Duration,
    wire_free_at: Time,
}

impl Shaper {
    pub fn new(speed: Speed, burst: Duration) -> Shaper {
        Shaper { speed, burst, wire_free_at: Time::ZERO }
    }

    pub fn speed(&self) -> Speed {
        self.speed
    }

    /// Whether a frame may go out now.
    pub fn ready(&self, now: Time) -> bool {
        self.wire_free_at <= now + self.burst
    }

    /// When [`Shaper::ready`] becomes true.
    pub fn ready_at(&self) -> Time {
        Time::from_nanos(self.wire_free_at.as_nanos().saturating_sub(self.burst.as_nanos() as u64))
    }

    /// Books the wire for a frame of `len` bytes (without FCS) sent at `now`.
    pub fn send(&mut self, now: Time, len: usize) {
        let start = self.wire_free_at.max(now);
        self.wire_free_at = start + self.speed.wire_time(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paces_at_line_rate_without_banking_idle_time() {
        // 1G, 1514-byte frames: 12.304 µs each on the wire.
        let mut s = Shaper::new(Speed::gbps(1), Duration::from_micros(20));
        let mut now = Time::from_millis(1);
        let mut sent = 0u64;
        let end = now + Duration::from_millis(10);
        while now < end {
            while s.ready(now) {
                s.send(now, 1514);
                sent += 1;
            }
            now = now + Duration::from_micros(7);
        }
        // 10 ms / 12.304 µs = 812.7 frames, plus at most the burst.
        assert!((812..=815).contains(&sent), "{sent}");

        // After a long idle period only a burst's worth goes out at once.
        let later = end + Duration::from_secs(1);
        let mut burst = 0;
        while s.ready(later) {
            s.send(later, 1514);
            burst += 1;
        }
        assert_eq!(burst, 2);
        assert!(s.ready_at() > later);
    }
}
