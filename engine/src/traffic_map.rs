//! The DCFIT traffic map: which ingress ports have traffic waiting for which egress ports.
//!
//! An N×N bitmap over (ingress, egress). A pair is marked while frames of it wait:
//!
//! - at the slowpath (a blocked egress): marked just before a frame is handed over, and
//!   cleared when the last frame of the pair at the slowpath (or on its way there or back)
//!   comes back. That frame joins its egress queue at once, which marks the pair in turn,
//!   so the pair stays marked until it is sent. The map alone counts what the slowpath
//!   holds: the slowpath keeps the frames, not their count per pair.
//! - in the egress queues (typically behind a received pause): marked while any frame of
//!   the pair is queued. Without this, a deadlock whose frames all sit in paused queues —
//!   the usual kind, once the port that started it is unblocked — would leave the map
//!   empty and checking messages could not follow the cycle.

use serde::{Deserialize, Serialize};

use super::ports::{PortId, PortSet, MAX_PORTS};
use super::priorities::{Priority, PRIORITIES};

#[derive(Clone, Debug)]
pub(crate) struct TrafficMap {
    n: usize,
    slowpath_rows: Vec<PortSet>,
    /// Frames of (i, e) at the slowpath, index i * n + e.
    at_slowpath: Vec<u32>,
    /// The same frames by (egress, priority): the one count of what the slowpath holds.
    held: Vec<[u32; PRIORITIES]>,
    /// The pool buffers all of `held` take together (what the slowpath's frame cap counts).
    held_buffers: u32,
    /// Frames of (i, e) in e's egress queues.
    queued: Vec<u32>,
    queued_rows: Vec<PortSet>,
}

impl TrafficMap {
    pub fn new(ports: usize) -> TrafficMap {
        assert!(ports <= MAX_PORTS, "at most {MAX_PORTS} ports");
        TrafficMap {
            n: ports,
            slowpath_rows: vec![PortSet::EMPTY; ports],
            at_slowpath: vec![0; ports * ports],
            held: vec![[0; PRIORITIES]; ports],
            held_buffers: 0,
            queued: vec![0; ports * ports],
            queued_rows: vec![PortSet::EMPTY; ports],
        }
    }

    /// A frame of (i, e), for e's queue `prio`, in `buffers` pool buffers, is about to be
    /// handed to the slowpath.
    pub fn handed_to_slowpath(&mut self, i: PortId, e: PortId, prio: Priority, buffers: u8) {
        self.slowpath_rows[i].insert(e);
        self.at_slowpath[i.index() * self.n + e.index()] += 1;
        self.held[e][prio] += 1;
        self.held_buffers += u32::from(buffers);
    }

    /// A frame of (i, e) for e's queue `prio` that was handed to the slowpath is back:
    /// released (it joins e's queue at once, which keeps the pair marked), or dropped on
    /// its way there or back. The last one of the pair clears the pair's slowpath mark.
    pub fn returned_from_slowpath(&mut self, i: PortId, e: PortId, prio: Priority, buffers: u8) {
        let c = &mut self.at_slowpath[i.index() * self.n + e.index()];
        *c = c.saturating_sub(1);
        if *c == 0 {
            self.slowpath_rows[i].remove(e);
        }
        let h = &mut self.held[e][prio];
        if *h > 0 {
            *h -= 1;
            self.held_buffers = self.held_buffers.saturating_sub(u32::from(buffers));
        }
    }

    /// Frames for egress `e`'s queue `prio` the slowpath holds (or that are on their way
    /// to or from it).
    pub fn held_at_slowpath(&self, e: PortId, prio: Priority) -> u32 {
        self.held[e][prio]
    }

    /// Pool buffers the frames the slowpath holds take, for every port together.
    pub fn held_buffers(&self) -> u32 {
        self.held_buffers
    }

    /// Frames for egress `e` the slowpath holds, all priorities.
    pub fn held_at_slowpath_for(&self, e: PortId) -> u64 {
        self.held[e].iter().map(|&n| u64::from(n)).sum()
    }

    pub fn queued(&mut self, i: PortId, e: PortId) {
        let c = &mut self.queued[i.index() * self.n + e.index()];
        *c += 1;
        if *c == 1 {
            self.queued_rows[i].insert(e);
        }
    }

    pub fn dequeued(&mut self, i: PortId, e: PortId) {
        let c = &mut self.queued[i.index() * self.n + e.index()];
        *c = c.saturating_sub(1);
        if *c == 0 {
            self.queued_rows[i].remove(e);
        }
    }

    /// Egress ports ingress `i` has traffic waiting for.
    pub fn row(&self, i: PortId) -> PortSet {
        self.slowpath_rows[i] | self.queued_rows[i]
    }

    /// The slowpath part of the row alone.
    pub fn slowpath_row(&self, i: PortId) -> PortSet {
        self.slowpath_rows[i]
    }

    #[cfg(test)]
    pub fn ports(&self) -> usize {
        self.n
    }
}

/// The map as `ctl traffic-map` shows it: `waiting[i][e]` when ingress `i` has frames
/// waiting for egress `e` (queued or at the slowpath), `at_slowpath[i][e]` for the latter.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrafficMapView {
    /// The ports' names, in order.
    pub ports: Vec<String>,
    /// `waiting[i][e]`: frames of ingress `i` wait for egress `e` (queued or at the slowpath).
    pub waiting: Vec<Vec<bool>>,
    /// `at_slowpath[i][e]`: some of them wait at the slowpath.
    pub at_slowpath: Vec<Vec<bool>>,
}

impl TrafficMap {
    /// The map with the ports' names.
    pub fn view(&self, ports: Vec<String>) -> TrafficMapView {
        let rows = |row: &dyn Fn(PortId) -> PortSet| -> Vec<Vec<bool>> {
            PortId::all(self.n).map(|i| PortId::all(self.n).map(|e| row(i).contains(e)).collect()).collect()
        };
        TrafficMapView { ports, waiting: rows(&|i| self.row(i)), at_slowpath: rows(&|i| self.slowpath_row(i)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;

    fn p(i: usize) -> PortId {
        PortId::new(i)
    }

    #[test]
    fn slowpath_marks_until_the_last_frame_leaves() {
        let mut m = TrafficMap::new(3);
        m.handed_to_slowpath(p(0), p(2), P3, 1);
        m.handed_to_slowpath(p(0), p(2), P3, 1);
        assert_eq!(m.row(p(0)), PortSet::only(p(2)));
        assert_eq!(
            (m.held_at_slowpath(p(2), P3), m.held_at_slowpath(p(2), P4), m.held_at_slowpath_for(p(2))),
            (2, 0, 2)
        );
        m.returned_from_slowpath(p(0), p(2), P3, 1);
        m.returned_from_slowpath(p(0), p(2), P3, 1);
        // Back from the slowpath but still queued: marked.
        m.queued(p(0), p(2));
        m.queued(p(0), p(2));
        m.dequeued(p(0), p(2));
        assert_eq!(m.row(p(0)), PortSet::only(p(2)), "the first frame was not the last of the pair");
        m.dequeued(p(0), p(2));
        assert_eq!(m.row(p(0)), PortSet::EMPTY, "sending the last frame clears the pair");
    }

    #[test]
    fn a_frame_handed_over_later_keeps_the_pair_marked() {
        let mut m = TrafficMap::new(2);
        m.handed_to_slowpath(p(1), p(0), P3, 1);
        m.returned_from_slowpath(p(1), p(0), P3, 1);
        m.handed_to_slowpath(p(1), p(0), P3, 1);
        assert_eq!(m.slowpath_row(p(1)), PortSet::only(p(0)), "one frame of the pair is still at the slowpath");
        m.returned_from_slowpath(p(1), p(0), P3, 1);
        assert_eq!(m.slowpath_row(p(1)), PortSet::EMPTY);
    }

    #[test]
    fn frames_dropped_on_the_way_to_or_from_the_slowpath_unmark_their_pair_with_the_last() {
        let mut m = TrafficMap::new(2);
        m.handed_to_slowpath(p(0), p(1), P3, 1);
        m.handed_to_slowpath(p(0), p(1), P3, 1);
        m.returned_from_slowpath(p(0), p(1), P3, 1);
        assert_eq!((m.row(p(0)), m.held_buffers()), (PortSet::only(p(1)), 1), "one frame still held");
        m.returned_from_slowpath(p(0), p(1), P3, 1);
        assert_eq!((m.row(p(0)), m.held_buffers(), m.held_at_slowpath(p(1), P3)), (PortSet::EMPTY, 0, 0));
    }

    #[test]
    fn queued_frames_mark_their_pair() {
        let mut m = TrafficMap::new(4);
        m.queued(p(3), p(1));
        m.queued(p(2), p(1));
        assert_eq!((m.row(p(3)), m.row(p(2)), m.row(p(0))), (PortSet::only(p(1)), PortSet::only(p(1)), PortSet::EMPTY));
        m.dequeued(p(3), p(1));
        assert_eq!(m.row(p(3)), PortSet::EMPTY);
        assert_eq!(m.ports(), 4);
    }
}
