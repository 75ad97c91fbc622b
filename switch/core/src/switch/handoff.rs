//! The hand-off to the slowpath: blocked ports' frames leave through the outbox and come
//! back through [`Switch::reinject`](super::Switch::reinject).

use crate::fdb::PortId;
use crate::pool::FramePool;
use crate::slowpath::{Released, ToSlowpath};
use crate::stats::DropReason;
use crate::time::Time;

use super::Switch;

impl Switch {
    /// An event from [`Switch::drain_outbox`] the shell could not deliver to the slowpath.
    /// A held frame comes back here rather than leak: its pair's mark, its buffer charge
    /// and its frame are given back, and it is counted as dropped at its ingress.
    pub fn slowpath_refused<P: FramePool>(&mut self, pool: &mut P, event: ToSlowpath) {
        if let ToSlowpath::Held(f) = event {
            let (i, e, q) = (usize::from(f.ingress), usize::from(f.egress), usize::from(f.prio));
            self.map.dropped_from_slowpath(i, e, q);
            self.ports[i].counters.drops.count(DropReason::SlowpathRefused);
            self.give_back(pool, f.id);
        }
    }

    /// Blocks `port` (its frames go to the slowpath) or unblocks it. Unblocking tells the
    /// slowpath to give back what it holds; until it has, new frames for the port's
    /// queues still go through it, behind the held ones.
    pub fn set_blocked(&mut self, port: PortId, blocked: bool) {
        if blocked {
            self.blocked |= 1 << port;
        } else if self.is_blocked(port) {
            self.blocked &= !(1 << port);
            self.outbox.push(ToSlowpath::Unblocked { port: port as u16 });
        }
    }

    pub fn is_blocked(&self, port: PortId) -> bool {
        self.blocked & (1 << port) != 0
    }

    /// A frame the slowpath held comes back: it joins its egress queue (it was admitted
    /// when it arrived and has stayed charged to its ingress group since), unless its queue
    /// is being emptied to break a deadlock.
    pub fn reinject<P: FramePool>(&mut self, now: Time, pool: &mut P, released: Released) {
        let f = released.frame;
        let (i, e, p) = (usize::from(f.ingress), usize::from(f.egress), usize::from(f.prio));
        if !self.ports[e].link_up {
            self.map.dropped_from_slowpath(i, e, p);
            self.ports[e].counters.drops.count(DropReason::LinkDown);
            self.give_back(pool, f.id);
            return;
        }
        if self.dropping(now, e).contains(p) {
            self.map.dropped_from_slowpath(i, e, p);
            self.discard(pool, e, p, f.id);
            return;
        }
        self.map.returned_from_slowpath(i, e, p);
        let port = &mut self.ports[e];
        self.frames.get_mut(f.id).last_of_pair = released.last_of_pair;
        port.tx.queues[p].push(&mut self.frames, f.id);
        self.map.queued(i, e);
    }

    /// Events for the slowpath since the last call.
    pub fn drain_outbox(&mut self) -> std::vec::Drain<'_, ToSlowpath> {
        self.outbox.drain(..)
    }
}
