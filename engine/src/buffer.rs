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
//!
//! Groups also count the frame-pool buffers they hold. Bytes alone let minimum-size
//! frames take a buffer of 2 or 4 KiB each for 64 bytes charged: a lossless group under a
//! generous XOFF (a dynamic one over a large pool) could hold tens of thousands and leave
//! the receive rings without buffers. So a lossless group also goes XOFF when its buffers
//! reach the frame limit ([`SharedBuffer::set_frame_limit`]), whichever runs out first,
//! and back to XON only when both are below their XON levels.

use super::config::{GroupProfile, XoffRule, XonRule};
use super::priorities::{Priority, PRIORITIES};
use crate::ports::PortId;

/// Per (ingress port, priority) state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)] // what admission reads first (see `Cell`)
pub struct Group {
    pub shared: u64,
    pub headroom: u64,
    /// Frame-pool buffers its frames take.
    pub buffers: u32,
    /// XOFF asserted: the upstream has been told to pause.
    pub xoff: bool,
    pub watermark: u64,
    pub headroom_watermark: u64,
    /// The most `shared` has been (SONiC's shared-pool watermark per priority group).
    pub shared_watermark: u64,
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
    /// It was the frame limit that ran out, not the bytes.
    pub by_frames: bool,
}

#[derive(Clone, Debug)]
pub struct SharedBuffer {
    shared_total: u64,
    shared_used: u64,
    /// The buffer-wide rules, for what a group without a profile of its own would get.
    wide: GroupProfile,
    /// Per port and priority: the group and its profile.
    cells: Vec<[Cell; PRIORITIES]>,
    /// The buffers at which a lossless group goes XOFF, and at or below which it may go
    /// back to XON.
    xoff_buffers: u32,
    xon_buffers: u32,
}

/// A group beside its thresholds and headroom size (see
/// [`crate::config::Config::group_profile`]). Every frame's admission and release read
/// both: in two tables, a 40-byte group straddling lines, that was two or three cache
/// lines; here the group and its XOFF rule share the cell's first line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Cell {
    group: Group,
    profile: GroupProfile,
}

impl SharedBuffer {
    /// A pool of `shared_total` bytes; `profiles` holds one profile per (port, priority).
    pub fn new(shared_total: u64, wide: GroupProfile, profiles: Vec<[GroupProfile; PRIORITIES]>) -> SharedBuffer {
        let cells =
            profiles.into_iter().map(|row| row.map(|profile| Cell { group: Group::default(), profile })).collect();
        SharedBuffer { shared_total, shared_used: 0, wide, cells, xoff_buffers: u32::MAX, xon_buffers: u32::MAX }
    }

    /// A lossless group goes XOFF once its frames take `xoff` buffers, and may resume at
    /// three quarters of that (the bytes' own XON must hold too).
    pub fn set_frame_limit(&mut self, xoff: u32) {
        self.xoff_buffers = xoff.max(1);
        self.xon_buffers = self.xoff_buffers - self.xoff_buffers / 4;
    }

    /// Every group of `ports` ports held to the same profile.
    #[cfg(test)]
    pub fn uniform(shared_total: u64, profile: GroupProfile, ports: usize) -> SharedBuffer {
        SharedBuffer::new(shared_total, profile, vec![[profile; PRIORITIES]; ports])
    }

    pub fn profile(&self, port: PortId, prio: Priority) -> &GroupProfile {
        &self.cells[port][prio].profile
    }

    /// The XOFF threshold `port`'s group for `prio` is held to right now.
    pub fn xoff_threshold(&self, port: PortId, prio: Priority) -> u64 {
        self.xoff_of(&self.cells[port][prio].profile)
    }

    pub fn xon_threshold(&self, port: PortId, prio: Priority) -> u64 {
        self.xon_of(&self.cells[port][prio].profile)
    }

    /// The buffer-wide rules' XOFF and XON thresholds right now.
    pub fn wide_thresholds(&self) -> (u64, u64) {
        (self.xoff_of(&self.wide), self.xon_of(&self.wide))
    }

    fn xoff_of(&self, p: &GroupProfile) -> u64 {
        match p.xoff {
            XoffRule::Static(b) => b,
            XoffRule::Dynamic(alpha) => (alpha * self.shared_total.saturating_sub(self.shared_used) as f64) as u64,
        }
    }

    fn xon_of(&self, p: &GroupProfile) -> u64 {
        match p.xon {
            XonRule::Static(b) => b,
            XonRule::BelowXoff(offset) => self.xoff_of(p).saturating_sub(offset),
        }
    }

    pub fn group(&self, port: PortId, prio: Priority) -> &Group {
        &self.cells[port][prio].group
    }

    pub fn shared_used(&self) -> u64 {
        self.shared_used
    }

    pub fn shared_total(&self) -> u64 {
        self.shared_total
    }

    /// Offers a frame of `len` bytes in `buffers` pool buffers to a lossless group. In
    /// headroom (after XOFF) only its bytes count: they bound what may still arrive.
    pub fn admit_lossless(&mut self, port: PortId, prio: Priority, len: u64, buffers: u32) -> Admission {
        let threshold = self.xoff_threshold(port, prio);
        let fits_pool = self.shared_used + len <= self.shared_total;
        let Cell { group: g, profile } = &mut self.cells[port][prio];
        let frames_fit = g.buffers + buffers <= self.xoff_buffers;
        let bytes_fit = g.shared + len <= threshold && fits_pool;
        if !g.xoff && bytes_fit && frames_fit {
            g.shared += len;
            g.buffers += buffers;
            self.shared_used += len;
            g.watermark = g.watermark.max(g.occupancy());
            g.shared_watermark = g.shared_watermark.max(g.shared);
            return Admission { admitted: true, crossed_xoff: false, by_frames: false };
        }
        let crossed_xoff = !g.xoff;
        g.xoff = true;
        let admitted = g.headroom + len <= profile.headroom_bytes;
        if admitted {
            g.headroom += len;
            g.buffers += buffers;
            g.headroom_watermark = g.headroom_watermark.max(g.headroom);
            g.watermark = g.watermark.max(g.occupancy());
        }
        Admission { admitted, crossed_xoff, by_frames: crossed_xoff && bytes_fit }
    }

    /// Offers a frame of `len` bytes in `buffers` pool buffers to a lossy group whose egress
    /// queue already holds `queued` bytes.
    pub fn admit_lossy(
        &mut self,
        port: PortId,
        prio: Priority,
        (len, buffers): (u64, u32),
        queued: u64,
        queue_limit: u64,
    ) -> bool {
        if queued + len > queue_limit || self.shared_used + len > self.shared_total {
            return false;
        }
        let g = &mut self.cells[port][prio].group;
        g.shared += len;
        g.buffers += buffers;
        self.shared_used += len;
        g.watermark = g.watermark.max(g.occupancy());
        g.shared_watermark = g.shared_watermark.max(g.shared);
        true
    }

    /// A frame of `len` bytes in `buffers` buffers charged to the group left the switch
    /// (or was dropped after admission). Returns true when this took a lossless group back
    /// to XON.
    pub fn release(&mut self, port: PortId, prio: Priority, len: u64, buffers: u32) -> bool {
        let xon_buffers = self.xon_buffers;
        let g = &mut self.cells[port][prio].group;
        g.buffers = g.buffers.saturating_sub(buffers);
        let frames_below = g.buffers <= xon_buffers;
        // Headroom first: it is what must be free before the next burst after XOFF.
        let from_headroom = len.min(g.headroom);
        g.headroom -= from_headroom;
        let from_shared = (len - from_headroom).min(g.shared);
        g.shared -= from_shared;
        self.shared_used -= from_shared;
        if g.xoff && frames_below && g.occupancy() <= self.xon_threshold(port, prio) {
            self.cells[port][prio].group.xoff = false;
            return true;
        }
        false
    }

    /// Clears the watermarks (after they were read).
    pub fn clear_watermarks(&mut self) {
        for g in self.cells.iter_mut().flatten().map(|c| &mut c.group) {
            g.watermark = g.occupancy();
            g.headroom_watermark = g.headroom;
            g.shared_watermark = g.shared;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priorities::names::*;
    use proptest::prelude::*;

    fn profile(xoff: u64, offset: u64, headroom: u64) -> GroupProfile {
        GroupProfile { xoff: XoffRule::Static(xoff), xon: XonRule::BelowXoff(offset), headroom_bytes: headroom }
    }

    fn buffer(xoff: u64, offset: u64, headroom: u64) -> SharedBuffer {
        SharedBuffer::uniform(1 << 20, profile(xoff, offset, headroom), 2)
    }

    #[test]
    fn xoff_then_headroom_then_drop_then_xon() {
        let mut b = buffer(3000, 1000, 2000);
        assert_eq!(
            b.admit_lossless(PortId::new(0), P3, 1000, 1),
            Admission { admitted: true, crossed_xoff: false, by_frames: false }
        );
        assert_eq!(
            b.admit_lossless(PortId::new(0), P3, 1000, 1),
            Admission { admitted: true, crossed_xoff: false, by_frames: false }
        );
        assert_eq!(
            b.admit_lossless(PortId::new(0), P3, 1000, 1),
            Admission { admitted: true, crossed_xoff: false, by_frames: false }
        );
        // 3000 + 1000 > XOFF: the frame goes to headroom and XOFF is asserted once.
        assert_eq!(
            b.admit_lossless(PortId::new(0), P3, 1000, 1),
            Admission { admitted: true, crossed_xoff: true, by_frames: false }
        );
        assert_eq!(
            b.admit_lossless(PortId::new(0), P3, 1000, 1),
            Admission { admitted: true, crossed_xoff: false, by_frames: false }
        );
        assert_eq!(b.group(PortId::new(0), P3).headroom, 2000);
        // Headroom is exhausted: dropped.
        assert_eq!(
            b.admit_lossless(PortId::new(0), P3, 1, 1),
            Admission { admitted: false, crossed_xoff: false, by_frames: false }
        );
        // The other priority and port are unaffected.
        assert!(b.admit_lossless(PortId::new(0), P4, 1000, 1).admitted && !b.group(PortId::new(0), P4).xoff);
        assert!(b.admit_lossless(PortId::new(1), P3, 1000, 1).admitted && !b.group(PortId::new(1), P3).xoff);
        // Drain: XON at XOFF − offset = 2000 bytes.
        assert!(!b.release(PortId::new(0), P3, 1000, 1));
        assert!(!b.release(PortId::new(0), P3, 1000, 1));
        assert_eq!(b.group(PortId::new(0), P3).headroom, 0, "headroom is freed first");
        assert!(b.release(PortId::new(0), P3, 1000, 1));
        assert!(!b.group(PortId::new(0), P3).xoff);
        assert_eq!(b.group(PortId::new(0), P3).watermark, 5000);
        assert_eq!(b.group(PortId::new(0), P3).headroom_watermark, 2000);
        assert_eq!(b.group(PortId::new(0), P3).shared_watermark, 3000, "the shared part alone");
    }

    #[test]
    fn dynamic_threshold_shrinks_as_the_pool_fills() {
        let dynamic = GroupProfile { xoff: XoffRule::Dynamic(1.0), xon: XonRule::BelowXoff(0), headroom_bytes: 0 };
        let mut b = SharedBuffer::uniform(10_000, dynamic, 2);
        assert_eq!(b.xoff_threshold(PortId::new(0), P3), 10_000);
        for _ in 0..5 {
            assert!(b.admit_lossless(PortId::new(0), P3, 1000, 1).admitted);
        }
        // alpha × free = 5000: the group at 5000 cannot grow.
        assert_eq!(b.xoff_threshold(PortId::new(0), P3), 5000);
        assert_eq!(b.wide_thresholds(), (5000, 5000));
        assert!(b.admit_lossless(PortId::new(0), P3, 1000, 1).crossed_xoff);
    }

    #[test]
    fn each_group_is_held_to_its_own_profile() {
        // Port 1's priority 3 pauses at 1000 B with 500 B of headroom; priority 4 beside
        // it, and port 0, keep 3000 B and 2000 B.
        let wide = profile(3000, 1000, 2000);
        let mut port1 = [wide; PRIORITIES];
        port1[3] = profile(1000, 1000, 500);
        let mut b = SharedBuffer::new(1 << 20, wide, vec![[wide; PRIORITIES], port1]);
        assert!(b.admit_lossless(PortId::new(1), P3, 1000, 1).admitted);
        assert!(b.admit_lossless(PortId::new(1), P3, 500, 1).crossed_xoff, "port 1 pauses priority 3 above 1000 B");
        assert!(!b.admit_lossless(PortId::new(1), P3, 1, 1).admitted, "its 500 B of headroom are full");
        assert!(!b.admit_lossless(PortId::new(1), P4, 2500, 1).crossed_xoff, "priority 4 keeps the buffer-wide 3000 B");
        assert!(!b.admit_lossless(PortId::new(0), P3, 2500, 1).crossed_xoff, "so does port 0");
        assert_eq!((b.xoff_threshold(PortId::new(1), P3), b.xon_threshold(PortId::new(1), P3)), (1000, 0));
        assert_eq!((b.xoff_threshold(PortId::new(1), P4), b.xon_threshold(PortId::new(1), P4)), (3000, 2000));
        assert_eq!(b.profile(PortId::new(1), P3).headroom_bytes, 500);
    }

    #[test]
    fn lossy_tail_drops_at_the_queue_limit() {
        let mut b = buffer(3000, 1000, 2000);
        assert!(b.admit_lossy(PortId::new(0), P0, (1000, 1), 0, 1500));
        assert!(!b.admit_lossy(PortId::new(0), P0, (1000, 1), 1000, 1500));
        assert!(!b.release(PortId::new(0), P0, 1000, 1));
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
                    let a = b.admit_lossless(PortId::new(0), P3, len, 1);
                    prop_assert!(a.admitted, "drop at frame {}", i);
                    queue.push_back(len);
                    if paused_after.is_some() { sent_since_pause += 1; }
                    if a.crossed_xoff { paused_after = Some(i); sent_since_pause = 0; }
                }
                for _ in 0..drains[i % drains.len()] {
                    if let Some(l) = queue.pop_front() {
                        if b.release(PortId::new(0), P3, l, 1) { paused_after = None; }
                    }
                }
            }
            while let Some(l) = queue.pop_front() { b.release(PortId::new(0), P3, l, 1); }
            prop_assert_eq!(b.group(PortId::new(0), P3).occupancy(), 0);
            prop_assert_eq!(b.shared_used(), 0);
        }
    }
}
