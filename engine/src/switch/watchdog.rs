//! The PFC watchdog's view of each port: a priority paused with frames waiting for
//! longer than the detection time is stormed; its queue is emptied or forwarded as
//! configured.

use crate::config::PauseMode;
use crate::pfcwd::{Observed, WatchdogAction, WatchdogEvent};
use crate::pool::FramePool;
use crate::ports::PortId;
use crate::priorities::PRIORITIES;
use crate::priorities::{Priorities, Priority};
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
        let watched = self.watched(port);
        for prio in watched.iter() {
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
        }
        seen.waiting = self.pfcwd_waiting(port, watched);
        Some(seen)
    }

    /// The priorities of `watched` with frames waiting to leave `port`: queued, or held
    /// at the slowpath.
    fn pfcwd_waiting(&self, port: PortId, watched: Priorities) -> Priorities {
        let queued = self.ports[port].tx.queues.nonempty() & watched;
        let held: Priorities = watched.iter().filter(|&prio| self.map.held_at_slowpath(port, prio) > 0).collect();
        queued | held
    }

    /// Whether `port`'s watchdog, on, has nothing to judge at `now`: none of the
    /// priorities it watches is paused by the partner or stormed. A check then only notes
    /// what waits ([`PortWatchdog::note_waiting`]) and has no deadline; the data path
    /// checks every port on every turn (the simulator on every frame), and most of the
    /// time a port is in this state, so it skips building the whole view.
    /// `watched` is [`Switch::watched`]`(port)`, which the callers have at hand.
    pub(super) fn pfcwd_quiet(&self, now: Time, port: PortId, watched: Priorities) -> bool {
        let p = &self.ports[port];
        // A superset of what the view reads as paused: an 802.3x PAUSE counts for every
        // priority.
        p.pfcwd.stormed().is_empty() && !p.tx.pause.any_paused(now, watched)
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

    /// Runs `port`'s PFC watchdog: notes what waits (at every look), then, if its
    /// judgement is due ([`PortTimer::Watchdog`](super::PortTimer::Watchdog)), detects
    /// storms and restores quiet priorities.
    pub(super) fn run_pfcwd(&mut self, now: Time, port: PortId) {
        if self.ports[port].pfcwd.action() == WatchdogAction::Off {
            return;
        }
        let watched = self.watched(port);
        let waiting = self.pfcwd_waiting(port, watched);
        self.ports[port].pfcwd.note_waiting(now, watched, waiting);
        let Some((seen, Some(at))) = self.watchdog_judgement(now, port) else { return };
        if at > now {
            return;
        }
        let events = &mut self.pfcwd_events;
        let p = &mut self.ports[port];
        let prio = &p.prio;
        let frames = |q: Priority| prio[q].frames();
        p.pfcwd.check(now, port, watched, &seen, frames, |e| events.push(e));
    }

    /// Empties the queues of `port` whose frames are being dropped (see [`Switch::dropping`]).
    pub(super) fn empty_dropped_queues<P: FramePool>(&mut self, now: Time, pool: &mut P, port: PortId) {
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
