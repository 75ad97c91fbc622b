//! The PFC watchdog's view of each port: a priority paused with frames waiting for
//! longer than the detection time is stormed; its queue is emptied or forwarded as
//! configured.

use crate::config::PauseMode;
use crate::pfcwd::{Observed, PrioFrames, WatchdogAction, WatchdogEvent};
use crate::pool::FramePool;
use crate::ports::PortId;
use crate::priorities::Priorities;
use crate::priorities::PRIORITIES;
use crate::time::Time;

use super::Switch;

impl Switch {
    /// What the PFC watchdog of `port` sees now; nothing when it is off (the view is not
    /// built on every turn for nothing).
    pub(super) fn pfcwd_view(&self, now: Time, port: PortId) -> Option<Observed> {
        let p = &self.ports[port];
        if p.pfcwd.action() == WatchdogAction::Off {
            return None;
        }
        let mut seen =
            Observed { paused_since: [None; PRIORITIES], last_pause: [None; PRIORITIES], waiting: Priorities::NONE };
        let global = p.mode == PauseMode::GlobalPause;
        let stormed = p.pfcwd.stormed();
        for prio in self.watched(port).iter() {
            if global {
                seen.paused_since[prio] = p.tx.pause.port_paused_since(now);
            } else {
                seen.paused_since[prio] = p.tx.pause.paused_since(now, prio);
            }
            // Read only where it is used (a stormed priority's restoration), not for every
            // frame the port sends.
            if stormed.contains(prio) {
                seen.last_pause[prio] = if global { p.tx.pause.last_port_pause() } else { p.tx.pause.last_pause(prio) };
            }
            if p.tx.queues.nonempty().contains(prio) || self.map.held_at_slowpath(port, prio) > 0 {
                seen.waiting.insert(prio);
            }
        }
        Some(seen)
    }

    /// The priorities `port`'s watchdog watches: the lossless ones, or on a port in
    /// 802.3x mode every one, since a PAUSE stops them all (SONiC's pfcwd watches PFC only,
    /// and a partner flooding 802.3x PAUSE would hold such a port for ever unseen).
    pub(super) fn watched(&self, port: PortId) -> Priorities {
        if self.ports[port].mode == PauseMode::GlobalPause {
            Priorities::ALL
        } else {
            self.lossless
        }
    }

    /// Runs `port`'s PFC watchdog: detects storms, restores quiet priorities.
    pub(super) fn check_pfcwd(&mut self, now: Time, port: PortId) {
        let Some(seen) = self.pfcwd_view(now, port) else { return };
        let (watched, events) = (self.watched(port), &mut self.pfcwd_events);
        let p = &mut self.ports[port];
        let prio = &p.prio;
        let frames = |q: usize| PrioFrames::of(&prio[q]);
        p.pfcwd.check(now, port, watched, &seen, frames, |e| events.push(e));
    }

    /// Empties the queues of `port` whose frames are being dropped (see [`Switch::dropping`]).
    pub(super) fn empty_dropped_queues<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
        if self.ports[port].dcfit.deadlock_drop.is_some_and(|(until, _)| now >= until) {
            self.ports[port].dcfit.deadlock_drop = None;
        }
        for prio in self.dropping(now, port).iter() {
            while let Some(id) = self.unqueue(port, prio) {
                self.discard(pool, port, prio, id);
            }
        }
    }

    /// The next watchdog event (a storm detected, a priority restored), oldest first.
    pub fn poll_watchdog_event(&mut self) -> Option<WatchdogEvent> {
        self.pfcwd_events.pop()
    }
}
