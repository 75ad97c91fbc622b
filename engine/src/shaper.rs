//! The egress shaper: paces a port at its configured line rate.
//!
//! veth has no line rate of its own, so without pacing no queue would ever build.
//! The shaper tracks when the (virtual) wire becomes free; a frame may be handed to the
//! kernel once the wire is free within `burst` of now.
//!
//! The switch looks at a port once per loop turn, and a turn can last longer than the
//! burst (hundreds of µs with large frames). While frames wait, the wire is taken to
//! have been busy since it was last free, so the time between two looks is not lost
//! (else a 10G port would carry 30 µs of frames per turn, whatever the turn's length),
//! back to at most `catch_up` ago. Time in which the port had nothing it could send is
//! idle and never banked: the caller says so with [`Shaper::idle`].

use std::time::Duration;

use super::speed::Speed;
use super::time::Time;

#[derive(Clone, Debug)]
pub struct Shaper {
    speed: Speed,
    burst: Duration,
    catch_up: Duration,
    wire_free_at: Time,
    /// The port had nothing to send when last looked at: the next frame starts now at
    /// the earliest.
    idle: bool,
}

impl Shaper {
    pub fn new(speed: Speed, burst: Duration, catch_up: Duration) -> Shaper {
        Shaper { speed, burst, catch_up, wire_free_at: Time::ZERO, idle: true }
    }

    /// Whether a frame may go out now.
    pub fn ready(&self, now: Time) -> bool {
        self.wire_free_at <= now + self.burst
    }

    /// When [`Shaper::ready`] becomes true.
    pub fn ready_at(&self) -> Time {
        Time::from_nanos(self.wire_free_at.as_nanos().saturating_sub(self.burst.as_nanos() as u64))
    }

    /// Books the wire for a frame of `len` bytes (without FCS) sent at `now`: it follows
    /// the previous frame, or, if the wire has been free since, starts now after an idle
    /// spell and at most `catch_up` ago while frames were waiting.
    pub fn send(&mut self, now: Time, len: usize) {
        let earliest = if self.idle { now } else { now - self.catch_up };
        self.idle = false;
        self.wire_free_at = self.wire_free_at.max(earliest) + self.speed.wire_time(len);
    }

    /// The port had nothing it could send (queues empty or paused): the wire idles until
    /// the next frame, and that time is not banked.
    pub fn idle(&mut self) {
        self.idle = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1G, 1514-byte frames: 12.304 µs each on the wire.
    fn one_gig() -> Shaper {
        Shaper::new(Speed::gbps(1), Duration::from_micros(20), Duration::from_millis(1))
    }

    /// Looks at the port every `turn` for 10 ms with frames always waiting; returns how
    /// many went out.
    fn sent_in_10ms(s: &mut Shaper, start: Time, turn: Duration) -> u64 {
        let (mut now, end) = (start, start + Duration::from_millis(10));
        let mut sent = 0;
        while now < end {
            while s.ready(now) {
                s.send(now, 1514);
                sent += 1;
            }
            now = now + turn;
        }
        sent
    }

    #[test]
    fn paces_at_line_rate_when_looked_at_often() {
        let sent = sent_in_10ms(&mut one_gig(), Time::from_millis(1), Duration::from_micros(7));
        // 10 ms / 12.304 µs = 812.7 frames, plus at most the burst.
        assert!((812..=815).contains(&sent), "{sent}");
    }

    #[test]
    fn turns_longer_than_the_burst_still_fill_the_wire() {
        // A turn of 300 µs is 15 burst lengths: only the burst per turn would be 3 frames
        // per turn, 100 in 10 ms.
        let sent = sent_in_10ms(&mut one_gig(), Time::from_millis(1), Duration::from_micros(300));
        // The last look is 300 µs before the end: 795 frames at least.
        assert!((795..=815).contains(&sent), "{sent}");
    }

    #[test]
    fn idle_time_is_not_banked() {
        let mut s = one_gig();
        let t = Time::from_millis(5);
        s.send(t, 1514);
        s.idle();
        let later = t + Duration::from_millis(3);
        let mut burst = 0;
        while s.ready(later) {
            s.send(later, 1514);
            burst += 1;
        }
        // The burst only: 20 µs ahead of the wire, 2 frames.
        assert_eq!(burst, 2);
        assert!(s.ready_at() > later);
    }

    #[test]
    fn a_gap_with_frames_waiting_is_made_up_to_the_catch_up_limit() {
        let mut s = one_gig();
        let t = Time::from_millis(5);
        s.send(t, 1514);
        // The loop stalled 50 ms with frames waiting: at most 1 ms of wire (81 frames)
        // plus the burst is made up, not 50 ms.
        let later = t + Duration::from_millis(50);
        let mut burst = 0;
        while s.ready(later) {
            s.send(later, 1514);
            burst += 1;
        }
        assert!((81..=84).contains(&burst), "{burst}");
    }
}
