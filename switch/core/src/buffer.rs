//! Shared-buffer accounting, modelled on a switch ASIC's ingress priority groups.
//!
//! Every frame the switch holds is charged to its (ingress port, priority) group until
//! it leaves. A lossless group draws from the shared pool until its XOFF threshold; from
//! then on (while XOFF is asserted) what still arrives — the frames already in flight
//! when the pause went upstream — lands in the group's private headroom. Only a frame
//! that does not fit the headroom is dropped. The group returns to XON once its total
//! falls to the XON threshold.
//!
//! A lossy group draws from the shared pool only and never pauses anyone; its frames are
//! tail-dropped by the egress queue limit or when the pool is exhausted.

use super::config::{XoffRule, XonRule};
use super::pfc::PRIORITIES;

/// Per (ingress port, priority) state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Group {
    pub shared: u64,
    pub headroom: u64,
    /// XOFF asserted: the upstream has been told to pause.
    pub xoff: bool,
    pub watermark: u64,
    pub headroom_watermark: u64,
}

impl Group {
    pub fn occupancy(&self) -> u64 {
        self.shared + self.headroom
    }
}

/// The outcome of offering a frame to a lossless group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Admission {
    pub admitted: bool,
    /// This frame took the group from XON to XOFF: a pause must go upstream.
    pub crossed_xoff: bool,
}

#[derive(Clone, Debug)]
pub struct SharedBuffer {
    shared_total: u64,
    shared_used: u64,
    xoff: XoffRule,
    xon: XonRule,
    /// Headroom size per ingress port.
    headroom: Vec<u64>,
    /// Static XOFF overriding the rule, per ingress port.
    xoff_override: Vec<Option<u64>>,
    groups: Vec<[Group; PRIORITIES]>,
}

impl SharedBuffer {
    pub fn new(shared_total: u64, xoff: XoffRule, xon: XonRule, headroom_per_port: Vec<u64>) -> SharedBuffer {
        let ports = headroom_per_port.len();
        SharedBuffer {
            shared_total,
            shared_used: 0,
            xoff,
            xon,
            headroom: headroom_per_port,
            xoff_override: vec![None; ports],
            groups: vec![[Group::default(); PRIORITIES]; ports],
        }
    }

    /// Gives `port` a static XOFF threshold of its own.
    pub fn set_port_xoff(&mut self, port: usize, bytes: u64) {
        self.xoff_override[port] = Some(bytes);
    }

    /// The XOFF threshold `port`'s groups are held to right now.
    pub fn xoff_threshold_for(&self, port: usize) -> u64 {
        self.xoff_override[port].unwrap_or_else(|| self.xoff_threshold())
    }

    pub fn xon_threshold_for(&self, port: usize) -> u64 {
        match self.xon {
            XonRule::Static(b) => b,
            XonRule::BelowXoff(offset) => self.xoff_threshold_for(port).saturating_sub(offset),
        }
    }

    pub fn group(&self, port: usize, prio: usize) -> &Group {
        &self.groups[port][prio]
    }

    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    pub fn shared_total(&self) -> u64 {
        self.shared_total
    }

    pub fn headroom_size(&self, port: usize) -> u64 {
        self.headroom[port]
    }

    /// The XOFF threshold a group is held to right now.
    pub fn xoff_threshold(&self) -> u64 {
        match self.xoff {
            XoffRule::Static(b) => b,
            XoffRule::Dynamic(alpha) => (alpha * self.shared_total.saturating_sub(self.shared_used) as f64) as u64,
        }
    }

    pub fn xon_threshold(&self) -> u64 {
        match self.xon {
            XonRule::Static(b) => b,
            XonRule::BelowXoff(offset) => self.xoff_threshold().saturating_sub(offset),
        }
    }

    /// Offers `len` bytes to a lossless group.
    pub fn admit_lossless(&mut self, port: usize, prio: usize, len: u64) -> Admission {
        let threshold = self.xoff_threshold_for(port);
        let fits_pool = self.shared_used + len <= self.shared_total;
        let headroom_size = self.headroom[port];
        let g = &mut self.groups[port][prio];
        if !g.xoff && g.shared + len <= threshold && fits_pool {
            g.shared += len;
            self.shared_used += len;
            g.watermark = g.watermark.max(g.occupancy());
            return Admission { admitted: true, crossed_xoff: false };
        }
        let crossed_xoff = !g.xoff;
        g.xoff = true;
        let admitted = g.headroom + len <= headroom_size;
        if admitted {
            g.headroom += len;
            g.headroom_watermark = g.headroom_watermark.max(g.headroom);
            g.watermark = g.watermark.max(g.occupancy());
        }
        Admission { admitted, crossed_xoff }
    }

    /// Offers `len` bytes to a lossy group whose egress queue already holds `queued` bytes.
    pub fn admit_lossy(&mut self, port: usize, prio: usize, len: u64, queued: u64, queue_limit: u64) -> bool {
        if queued + len > queue_limit || self.shared_used + len > self.shared_total {
            return false;
        }
        let g = &mut self.groups[port][prio];
        g.shared += len;
        self.shared_used += len;
        g.watermark = g.watermark.max(g.occupancy());
        true
    }

    /// A frame of `len` bytes charged to the group left the switch (or was dropped after
    /// admission). Returns true when this took a lossless group back to XON.
    pub fn release(&mut self, port: usize, prio: usize, len: u64) -> bool {
        let g = &mut self.groups[port][prio];
        // Headroom first: it is what must be free before the next burst after XOFF.
        let from_headroom = len.min(g.headroom);
        g.headroom -= from_headroom;
        let from_shared = (len - from_headroom).min(g.shared);
        g.shared -= from_shared;
        self.shared_used -= from_shared;
        if g.xoff && g.occupancy() <= self.xon_threshold_for(port) {
            self.groups[port][prio].xoff = false;
            return true;
        }
        false
    }

    /// Clears the watermarks (after they were read).
    pub fn clear_watermarks(&mut self) {
        for g in self.groups.iter_mut().flatten() {
            g.watermark = g.occupancy();
            g.headroom_watermark = g.headroom;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn buffer(xoff: u64, offset: u64, headroom: u64) -> SharedBuffer {
        SharedBuffer::new(1 << 20, XoffRule::Static(xoff), XonRule::BelowXoff(offset), vec![headroom; 2])
    }

    #[test]
    fn xoff_then_headroom_then_drop_then_xon() {
        let mut b = buffer(3000, 1000, 2000);
        assert_eq!(b.admit_lossless(0, 3, 1000), Admission { admitted: true, crossed_xoff: false });
        assert_eq!(b.admit_lossless(0, 3, 1000), Admission { admitted: true, crossed_xoff: false });
        assert_eq!(b.admit_lossless(0, 3, 1000), Admission { admitted: true, crossed_xoff: false });
        // 3000 + 1000 > XOFF: the frame goes to headroom and XOFF is asserted once.
        assert_eq!(b.admit_lossless(0, 3, 1000), Admission { admitted: true, crossed_xoff: true });
        assert_eq!(b.admit_lossless(0, 3, 1000), Admission { admitted: true, crossed_xoff: false });
        assert_eq!(b.group(0, 3).headroom, 2000);
        // Headroom is exhausted: dropped.
        assert_eq!(b.admit_lossless(0, 3, 1), Admission { admitted: false, crossed_xoff: false });
        // The other priority and port are unaffected.
        assert!(b.admit_lossless(0, 4, 1000).admitted && !b.group(0, 4).xoff);
        assert!(b.admit_lossless(1, 3, 1000).admitted && !b.group(1, 3).xoff);
        // Drain: XON at XOFF − offset = 2000 bytes.
        assert!(!b.release(0, 3, 1000));
        assert!(!b.release(0, 3, 1000));
        assert_eq!(b.group(0, 3).headroom, 0, "headroom is freed first");
        assert!(b.release(0, 3, 1000));
        assert!(!b.group(0, 3).xoff);
        assert_eq!(b.group(0, 3).watermark, 5000);
        assert_eq!(b.group(0, 3).headroom_watermark, 2000);
    }

    #[test]
    fn dynamic_threshold_shrinks_as_the_pool_fills() {
        let mut b = SharedBuffer::new(10_000, XoffRule::Dynamic(1.0), XonRule::BelowXoff(0), vec![0; 2]);
        assert_eq!(b.xoff_threshold(), 10_000);
        for _ in 0..5 {
            assert!(b.admit_lossless(0, 3, 1000).admitted);
        }
        // alpha × free = 5000: the group at 5000 cannot grow.
        assert_eq!(b.xoff_threshold(), 5000);
        assert!(b.admit_lossless(0, 3, 1000).crossed_xoff);
    }

    #[test]
    fn a_port_can_have_its_own_xoff() {
        let mut b = buffer(3000, 1000, 2000);
        b.set_port_xoff(1, 1000);
        assert!(b.admit_lossless(1, 3, 1000).admitted);
        assert!(b.admit_lossless(1, 3, 1000).crossed_xoff, "port 1 pauses at 1000 bytes");
        assert!(!b.admit_lossless(0, 3, 2000).crossed_xoff, "port 0 keeps the rule's 3000");
        assert_eq!((b.xoff_threshold_for(1), b.xon_threshold_for(1)), (1000, 0));
    }

    #[test]
    fn lossy_tail_drops_at_the_queue_limit() {
        let mut b = buffer(3000, 1000, 2000);
        assert!(b.admit_lossy(0, 0, 1000, 0, 1500));
        assert!(!b.admit_lossy(0, 0, 1000, 1000, 1500));
        assert!(!b.release(0, 0, 1000));
        assert_eq!(b.shared_used(), 0);
    }

    proptest! {
        /// If what arrives after XOFF never exceeds the headroom, a lossless group never drops.
        #[test]
        fn lossless_never_drops_within_headroom(
            lens in proptest::collection::vec(64u64..=1518, 1..400),
            drains in proptest::collection::vec(0usize..4, 1..400),
            in_flight in 0usize..8,
        ) {
            let max_frame = 1518;
            // Headroom sized for the in-flight frames after the pause goes out.
            let headroom = (in_flight as u64 + 1) * max_frame;
            let mut b = buffer(20_000, 5_000, headroom);
            let mut queue: std::collections::VecDeque<u64> = Default::default();
            // A sender that keeps sending `in_flight` frames after it is paused, then stops
            // until XON.
            let mut paused_after: Option<usize> = None;
            let mut sent_since_pause = 0;
            for (i, &len) in lens.iter().enumerate() {
                let may_send = match paused_after {
                    None => true,
                    Some(_) => sent_since_pause < in_flight,
                };
                if may_send {
                    let a = b.admit_lossless(0, 3, len);
                    prop_assert!(a.admitted, "drop at frame {}", i);
                    queue.push_back(len);
                    if paused_after.is_some() { sent_since_pause += 1; }
                    if a.crossed_xoff { paused_after = Some(i); sent_since_pause = 0; }
                }
                for _ in 0..drains[i % drains.len()] {
                    if let Some(l) = queue.pop_front() {
                        if b.release(0, 3, l) { paused_after = None; }
                    }
                }
            }
            while let Some(l) = queue.pop_front() { b.release(0, 3, l); }
            prop_assert_eq!(b.group(0, 3).occupancy(), 0);
            prop_assert_eq!(b.shared_used(), 0);
        }
    }
}
