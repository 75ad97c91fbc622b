//! A sender's reaction to PFC, like a NIC: received pauses take effect after a
//! configurable response delay (test equipment's "PFC delay", in quanta).

use std::collections::VecDeque;
use std::time::Duration;

use pfcswitch::core::pause::EgressPause;
use pfcswitch::core::pfc::{ControlFrame, MacControl, PRIORITIES};
use pfcswitch::core::priorities::Priorities;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::time::Time;
use pfcswitch::core::Priority;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug)]
struct Pending {
    at: Time,
    /// Per priority: pause for this long, if set.
    durations: [Option<Duration>; PRIORITIES],
    global: Option<Duration>,
}

/// Counts of what the responder saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseCounts {
    /// PFC frames naming the priority with non-zero quanta.
    pub xoff: [u64; PRIORITIES],
    /// PFC frames naming the priority with zero quanta.
    pub xon: [u64; PRIORITIES],
    pub pfc_frames: u64,
    pub pause_frames: u64,
}

#[derive(Debug)]
pub struct PauseResponder {
    speed: Speed,
    delay: Duration,
    honour: bool,
    pending: VecDeque<Pending>,
    state: EgressPause,
    pub counts: PauseCounts,
}

impl PauseResponder {
    /// `delay_quanta`: how long (in quanta at `speed`) the sender keeps transmitting after
    /// a pause arrives. With `honour` false pauses are only counted.
    pub fn new(speed: Speed, delay_quanta: u32, honour: bool) -> PauseResponder {
        let delay = speed.bit_times(u64::from(delay_quanta) * pfcswitch::core::speed::BITS_PER_QUANTUM);
        PauseResponder {
            speed,
            delay,
            honour,
            pending: VecDeque::with_capacity(256),
            state: EgressPause::default(),
            counts: PauseCounts::default(),
        }
    }

    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// A MAC control frame arrived at `now`.
    pub fn on_frame(&mut self, now: Time, frame: &ControlFrame) {
        let mut p = Pending { at: now + self.delay, durations: [None; PRIORITIES], global: None };
        match frame.body {
            MacControl::Pfc(pfc) => {
                self.counts.pfc_frames += 1;
                for (prio, quanta) in pfc.classes() {
                    if quanta == 0 {
                        self.counts.xon[prio] += 1;
                    } else {
                        self.counts.xoff[prio] += 1;
                    }
                    p.durations[prio] = Some(self.speed.quanta_duration(quanta));
                }
            }
            MacControl::Pause { quanta } => {
                self.counts.pause_frames += 1;
                p.global = Some(self.speed.quanta_duration(quanta));
            }
        }
        if self.honour {
            self.pending.push_back(p);
        }
    }

    fn apply_due(&mut self, now: Time) {
        while self.pending.front().is_some_and(|p| p.at <= now) {
            let p = self.pending.pop_front().expect("checked");
            for (prio, d) in Priority::all().zip(&p.durations) {
                if let Some(d) = d {
                    self.state.pause_priority(p.at, prio, *d);
                }
            }
            if let Some(d) = p.global {
                self.state.pause_port(p.at, d);
            }
        }
    }

    /// Priorities the sender may not transmit at `now`.
    pub fn paused(&mut self, now: Time) -> Priorities {
        self.apply_due(now);
        self.state.paused(now)
    }

    /// When the paused state may next change (a pending pause applies or one expires).
    pub fn next_change(&self, now: Time) -> Option<Time> {
        let pending = self.pending.front().map(|p| p.at);
        let resume = self.state.resume_at(now, Priorities::ALL);
        match (pending, resume) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn paused_time(&self, now: Time, prio: Priority) -> Duration {
        self.state.paused_time(now, prio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcswitch::core::mac::MacAddr;
    use pfcswitch::core::pfc::Pfc;

    fn pfc(prios: Priorities, quanta: u16) -> ControlFrame {
        ControlFrame { src: MacAddr::local(1), body: MacControl::Pfc(Pfc::pause(prios, quanta)), short: false }
    }

    #[test]
    fn pauses_after_the_response_delay() {
        // 10G: one quantum is 51.2 ns; 1000 quanta = 51.2 µs.
        let mut r = PauseResponder::new(Speed::gbps(10), 1000, true);
        let t = Time::from_millis(1);
        r.on_frame(t, &pfc(Priorities::only(Priority::new(3)), 65535));
        assert_eq!(r.paused(t), Priorities::NONE, "still sending during the delay");
        assert_eq!(r.next_change(t), Some(t + Duration::from_nanos(51_200)));
        let applied = t + Duration::from_nanos(51_200);
        assert_eq!(r.paused(applied), Priorities::only(Priority::new(3)));
        // The pause lasts its quanta from when it took effect.
        let end = applied + Speed::gbps(10).quanta_duration(65535);
        assert_eq!(r.paused(end - Duration::from_nanos(1)), Priorities::only(Priority::new(3)));
        assert_eq!(r.paused(end), Priorities::NONE);
        assert_eq!(r.counts.xoff[3], 1);
    }

    #[test]
    fn resume_and_ignore_modes() {
        let mut r = PauseResponder::new(Speed::gbps(10), 0, true);
        let t = Time::from_millis(1);
        r.on_frame(t, &pfc(Priorities::only(Priority::new(4)), 65535));
        assert_eq!(r.paused(t), Priorities::only(Priority::new(4)));
        r.on_frame(t + Duration::from_micros(3), &pfc(Priorities::only(Priority::new(4)), 0));
        assert_eq!(r.paused(t + Duration::from_micros(3)), Priorities::NONE);
        assert_eq!(r.counts.xon[4], 1);

        let mut ignoring = PauseResponder::new(Speed::gbps(10), 0, false);
        ignoring.on_frame(t, &pfc(Priorities::only(Priority::new(4)), 65535));
        assert_eq!(ignoring.paused(t), Priorities::NONE);
        assert_eq!(ignoring.counts.xoff[4], 1);
    }
}
