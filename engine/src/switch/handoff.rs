//! The round trip to the slowpath, one implementation for every driver: a blocked
//! port's frames and the engine's events leave through [`Switch::poll_slowpath`], and the
//! frames the slowpath releases come back through [`Switch::handle_released`]. How they travel
//! is the driver's: crossbeam channels to the slowpath thread in `pfcswitch run`, a CPU
//! delay in the simulator, a direct call in the fuzz targets.
//!
//! Which ports are blocked and how many frames the slowpath holds for each pair and
//! queue, the engine alone keeps (here and in the traffic map); the slowpath keeps the
//! frames themselves, in order.

use crate::pool::FramePool;
use crate::ports::PortId;
use crate::slowpath::{HeldFrame, ToSlowpath};
use crate::stats::DropReason;
use crate::time::Time;

use super::Switch;

impl Switch {
    /// Hands the events since the last call to the slowpath through `send`, in order
    /// (called once per turn, after receiving and transmitting). An event `send` gives
    /// back (a full channel) is not lost: a held frame's pair mark, buffer charge and
    /// frame are given back, and it is counted as dropped at its ingress and in the
    /// stats' `slowpath_overflow`.
    pub fn poll_slowpath<P: FramePool>(
        &mut self,
        pool: &mut P,
        mut send: impl FnMut(ToSlowpath) -> Result<(), ToSlowpath>,
    ) {
        // Taken out and put back: refusals need the switch while the events drain, and
        // the outbox keeps its capacity (nothing is allocated per turn).
        let mut events = std::mem::take(&mut self.outbox);
        for ev in events.drain(..) {
            if let Err(ev) = send(ev) {
                self.slowpath_overflow += 1;
                self.slowpath_refused(pool, ev);
            }
        }
        // A refusal queues no event today; should one ever, it waits for the next turn.
        events.append(&mut self.outbox);
        self.outbox = events;
    }

    /// Takes back the frames the slowpath released (in the order it released them):
    /// each joins its egress queue. Returns how many came back.
    pub fn handle_released<P: FramePool>(
        &mut self,
        now: Time,
        pool: &mut P,
        released: impl IntoIterator<Item = HeldFrame>,
    ) -> usize {
        self.all_ready();
        let mut n = 0;
        for f in released {
            self.reinject(now, pool, f);
            n += 1;
        }
        n
    }

    fn slowpath_refused<P: FramePool>(&mut self, pool: &mut P, event: ToSlowpath) {
        if let ToSlowpath::Held(f) = event {
            let (i, e, q) = (f.ingress, f.egress, f.prio);
            self.map.returned_from_slowpath(i, e, q, self.frames.get(f.id).buffers);
            self.ports[i].counters.drops.count(DropReason::SlowpathRefused);
            self.give_back(pool, f.id);
        }
    }

    /// Blocks `port` (its frames go to the slowpath) or unblocks it. Unblocking tells the
    /// slowpath to give back what it holds; until it has, new frames for the port's
    /// queues still go through it, behind the held ones.
    pub fn set_blocked(&mut self, port: PortId, blocked: bool) {
        self.all_ready();
        if blocked {
            self.blocked.insert(port);
        } else if self.is_blocked(port) {
            self.blocked.remove(port);
            self.outbox.push(ToSlowpath::Unblocked { port });
        }
    }

    /// Whether `port` is blocked.
    pub fn is_blocked(&self, port: PortId) -> bool {
        self.blocked.contains(port)
    }

    /// A frame the slowpath held comes back: it joins its egress queue (it was admitted
    /// when it arrived and has stayed charged to its ingress group since), unless its link
    /// is down or its queue is being emptied to break a deadlock.
    fn reinject<P: FramePool>(&mut self, now: Time, pool: &mut P, f: HeldFrame) {
        let (i, e, p) = (f.ingress, f.egress, f.prio);
        self.map.returned_from_slowpath(i, e, p, self.frames.get(f.id).buffers);
        if !self.ports[e].link_up {
            self.ports[e].counters.drops.count(DropReason::LinkDown);
            self.give_back(pool, f.id);
            return;
        }
        if self.dropping(now, e).contains(p) {
            self.discard(pool, e, p, f.id);
            return;
        }
        let port = &mut self.ports[e];
        port.tx.queues.push(p, &mut self.frames, f.id);
        self.map.queued(i, e);
    }
}
