//! The slowpath's part of blocked ports: which ports are blocked, the frames it holds for
//! them, and which of those may go.
//!
//! Frames stay in the UMEM; the slowpath holds their ids, in arrival order per ingress
//! port. They stay charged to their ingress (port, priority) group while held, so holding
//! them builds buffer and triggers XOFF upstream exactly as congestion would.

use std::collections::VecDeque;

use super::queue::FrameId;

/// A frame the dataplane handed to the slowpath because its egress was blocked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldFrame {
    pub id: FrameId,
    pub len: u32,
    pub ingress: u16,
    pub egress: u16,
    pub prio: u8,
}

/// A held frame going back to the dataplane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Released {
    pub frame: HeldFrame,
    /// No other frame of its (ingress, egress) pair is held any more: sending it clears
    /// the pair in the traffic map.
    pub last_of_pair: bool,
}

#[derive(Debug)]
pub struct SlowpathBuffer {
    blocked: u64,
    /// Per ingress port, in arrival order.
    held: Vec<VecDeque<HeldFrame>>,
}

impl SlowpathBuffer {
    /// Room for `frames` held frames per ingress port is reserved up front.
    pub fn new(ports: usize, frames: usize) -> SlowpathBuffer {
        SlowpathBuffer { blocked: 0, held: (0..ports).map(|_| VecDeque::with_capacity(frames)).collect() }
    }

    pub fn block(&mut self, port: usize) {
        self.blocked |= 1 << port;
    }

    pub fn unblock(&mut self, port: usize) {
        self.blocked &= !(1 << port);
    }

    pub fn is_blocked(&self, port: usize) -> bool {
        self.blocked & (1 << port) != 0
    }

    pub fn blocked_mask(&self) -> u64 {
        self.blocked
    }

    pub fn hold(&mut self, frame: HeldFrame) {
        self.held[usize::from(frame.ingress)].push_back(frame);
    }

    pub fn held(&self) -> usize {
        self.held.iter().map(VecDeque::len).sum()
    }

    /// Frames held for `egress`.
    pub fn held_for(&self, egress: usize) -> usize {
        self.held.iter().flatten().filter(|f| usize::from(f.egress) == egress).count()
    }

    /// Gives back every frame that may go — its egress not blocked and its priority not
    /// paused there (`paused(egress)` is a priority bit mask) — walking each ingress port's
    /// frames in arrival order, so order within each (ingress, egress, priority) holds.
    pub fn release(&mut self, paused: impl Fn(usize) -> u8, out: &mut Vec<Released>) {
        let start = out.len();
        for queue in &mut self.held {
            let blocked = self.blocked;
            queue.retain(|f| {
                let e = usize::from(f.egress);
                let may_go = blocked & (1 << e) == 0 && paused(e) & (1 << f.prio) == 0;
                if may_go {
                    out.push(Released { frame: *f, last_of_pair: false });
                }
                !may_go
            });
        }
        // Pairs with frames still held, as bit rows per ingress.
        let mut remaining = vec![0u64; self.held.len()];
        for (i, q) in self.held.iter().enumerate() {
            for f in q {
                remaining[i] |= 1 << f.egress;
            }
        }
        let mut marked = vec![0u64; self.held.len()];
        for r in out[start..].iter_mut().rev() {
            let (i, e) = (usize::from(r.frame.ingress), r.frame.egress);
            if marked[i] & (1 << e) == 0 {
                marked[i] |= 1 << e;
                r.last_of_pair = remaining[i] & (1 << e) == 0;
            }
        }
    }

    /// Gives back every held frame, whatever its egress's state (at shutdown).
    pub fn drain(&mut self) -> Vec<HeldFrame> {
        self.held.iter_mut().flat_map(|q| q.drain(..)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(id: u32, ingress: u16, egress: u16, prio: u8) -> HeldFrame {
        HeldFrame { id: FrameId(id), len: 100, ingress, egress, prio }
    }

    #[test]
    fn block_hold_unblock_releases_in_order_with_the_last_of_pair_bit() {
        let mut s = SlowpathBuffer::new(3, 16);
        s.block(2);
        assert!(s.is_blocked(2) && !s.is_blocked(1));
        for id in 0..4 {
            s.hold(frame(id, 0, 2, 3));
        }
        s.hold(frame(9, 1, 2, 3));
        let mut out = Vec::new();
        s.release(|_| 0, &mut out);
        assert!(out.is_empty(), "nothing goes while the egress is blocked");
        s.unblock(2);
        s.release(|_| 0, &mut out);
        let ids: Vec<u32> = out.iter().map(|r| r.frame.id.0).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 9]);
        let last: Vec<bool> = out.iter().map(|r| r.last_of_pair).collect();
        assert_eq!(last, vec![false, false, false, true, true]);
        assert_eq!(s.held(), 0);
    }

    #[test]
    fn paused_priorities_stay_and_keep_their_pair_marked() {
        let mut s = SlowpathBuffer::new(2, 16);
        s.hold(frame(1, 0, 1, 3));
        s.hold(frame(2, 0, 1, 4));
        s.hold(frame(3, 0, 1, 3));
        let mut out = Vec::new();
        // Priority 4 is paused at egress 1.
        s.release(|e| if e == 1 { 1 << 4 } else { 0 }, &mut out);
        let ids: Vec<(u32, bool)> = out.iter().map(|r| (r.frame.id.0, r.last_of_pair)).collect();
        assert_eq!(ids, vec![(1, false), (3, false)], "frame 2 is still held for the pair");
        assert_eq!(s.held_for(1), 1);
        out.clear();
        s.release(|_| 0, &mut out);
        assert_eq!((out[0].frame.id.0, out[0].last_of_pair), (2, true));
    }

    #[test]
    fn drain_returns_everything() {
        let mut s = SlowpathBuffer::new(2, 4);
        s.block(1);
        s.hold(frame(1, 0, 1, 3));
        assert_eq!(s.drain().len(), 1);
        assert_eq!(s.blocked_mask(), 0b10);
    }
}

/// What the dataplane tells the slowpath.
#[derive(Clone, Debug, PartialEq)]
pub enum ToSlowpath {
    /// A frame for a blocked egress, to hold.
    Held(HeldFrame),
    /// A pause on egress `from` brought another switch's checking message, which ingress
    /// `to` passes upstream on its next pause (for the slowpath's record of forwards).
    CheckForwarded { from: u16, to: u16, msg: super::checking::CheckingMessage },
    /// This switch's own checking message came back: a new deadlock.
    Deadlock(super::dcfit::DeadlockEvent),
    /// An own message came back again over a known cycle.
    Confirmed { id: u64, at_ns: u64 },
}

/// What the slowpath tells the dataplane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToDataplane {
    SetBlocked { port: u16, blocked: bool },
    Release(Released),
}
