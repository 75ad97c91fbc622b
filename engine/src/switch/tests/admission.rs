//! Frame slots: the caps that keep the pool from running dry.

use super::*;

#[test]
fn many_small_lossy_frames_stop_at_the_port_frame_cap_and_leave_the_pool_to_others() {
    let mut c = Rig::ports(3);
    c.buffer.lossy_port_frames = Some(100);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 9, 0, 64));
    r.rx(2, &data(3, 9, 0, 64));
    r.tx(0);
    r.tx(2);
    r.tx(1);
    // Port 1's partner stops priority 0 for good: 64-byte frames pile up far below
    // any byte limit.
    r.rx(1, &pfc_with(Priorities::only(P0), 65535, None));
    for _ in 0..300 {
        r.rx(0, &data(1, 2, 0, 64));
    }
    let s = r.stats();
    assert_eq!(s.ports[1].priorities[0].egress_queue_frames, 100, "the cap, not the bytes, stopped them");
    assert_eq!(s.ports[0].counters.drops.frame_cap, 200);
    assert_eq!(s.ports[0].priorities[0].counters.lossy_drops, 200);
    assert_eq!(r.pool.free_count(), POOL as usize - 100, "only the capped frames are held");
    // The other ports still forward.
    r.rx(0, &data(1, 3, 0, 64));
    assert_eq!(r.tx(2).len(), 1);
}

#[test]
fn frames_for_a_port_blocked_for_ever_stop_at_the_slowpath_cap_and_release_their_buffer() {
    let mut c = Rig::ports(2);
    c.buffer.slowpath_frames = Some(50);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 9, 0, 64));
    r.tx(0);
    r.sw.set_blocked(PortId::new(1), true);
    for _ in 0..80 {
        r.rx(0, &data(1, 2, 0, 64));
    }
    let (held, _) = r.outbox();
    assert_eq!(held.len(), 50);
    let s = r.stats();
    assert_eq!(s.ports[0].counters.drops.frame_cap, 30);
    assert_eq!(s.ports[1].held_by_slowpath, 50);
    assert_eq!(s.ports[0].priorities[0].ingress_bytes, 50 * 64, "the dropped frames' buffer is released");
    assert_eq!(r.pool.free_count(), POOL as usize - 50);
}

#[test]
fn a_held_frame_the_slowpath_refused_gives_back_its_slot_its_charge_and_its_mark() {
    let (mut r, _) = congested(true);
    r.sw.set_blocked(PortId::new(1), true);
    let free_before = r.pool.free_count();
    for n in 0..60 {
        r.rx(0, &numbered(1, 2, 3, n));
    }
    assert!(r.stats().ports[0].priorities[3].xoff, "the held frames paused the upstream");
    assert_eq!(r.sw.traffic_map_row(PortId::new(0)), PortSet::only(PortId::new(1)));
    // The channel to the slowpath was full: every event comes back to the engine.
    r.sw.poll_slowpath(&mut r.pool, Err);
    assert_eq!(r.pool.free_count(), free_before, "no frame leaked");
    let s = r.stats();
    assert_eq!(s.ports[0].counters.drops.slowpath_refused, 60);
    assert_eq!(s.slowpath_overflow, 60, "every refused event is counted");
    assert_eq!(s.ports[0].priorities[3].ingress_bytes, 0, "no buffer stays charged");
    assert!(!s.ports[0].priorities[3].xoff, "and the upstream is resumed");
    assert_eq!(s.ports[1].held_by_slowpath, 0);
    assert_eq!(r.sw.traffic_map_row(PortId::new(0)), PortSet::EMPTY, "no pair stays marked");
    r.sw.set_blocked(PortId::new(1), false);
    r.outbox();
    r.rx(0, &numbered(1, 2, 3, 99));
    let sent: Vec<u8> = r.tx(1).iter().map(|f| f[199]).collect();
    assert_eq!(sent, vec![99], "nothing stale is left in front of new frames");
}

#[test]
fn flood_copies_leave_the_pause_reserve_in_the_pool() {
    let mut r = Rig::new(Rig::ports(4));
    let mut taken = Vec::new();
    while r.pool.free_count() > crate::switch::PAUSE_RESERVE + 2 {
        taken.push(r.pool.alloc().unwrap());
    }
    // The frame received takes one: with PAUSE_RESERVE + 1 free, one copy may be made, not two.
    r.rx(0, &data(1, 9, 0, 64));
    assert_eq!(r.pool.free_count(), crate::switch::PAUSE_RESERVE, "the copies stopped at the reserve");
    assert_eq!(r.stats().ports[0].counters.drops.no_buffer, 1);
    for id in taken {
        r.pool.free(id);
    }
}

#[test]
fn many_small_lossless_frames_pause_their_sender_at_the_groups_frame_share_before_its_bytes() {
    let mut c = Rig::ports(2);
    // XOFF at the whole free pool: 64-byte frames would take 65 000 buffers first.
    c.buffer.xoff_alpha = Some(1.0);
    c.buffer.xoff_bytes = None;
    // Two ports, lossless priorities 3 and 4: four groups of 100 buffers each.
    c.buffer.lossless_frames = Some(400);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 9, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_with(Priorities::only(P3), 65535, None));
    for _ in 0..100 {
        r.rx(0, &data(1, 2, 3, 64));
    }
    assert!(r.tx(0).is_empty(), "100 buffers: the share, not past it");
    r.rx(0, &data(1, 2, 3, 64));
    let out = r.tx(0);
    assert_eq!(out.len(), 1);
    assert!(pfc_of(&out[0]).enabled.contains(P3), "the 101st frame pauses priority 3 upstream");
    let s = r.stats();
    assert_eq!(s.ports[0].priorities[3].counters.xoff_by_frames, 1);
    assert_eq!(s.ports[0].priorities[3].counters.lossless_drops, 0, "it went to headroom");
    // The partner resumes: once the group holds 75 buffers or fewer it resumes too.
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    let mut sent = 0;
    while sent < 26 {
        sent += r.tx_limited(1, 1).len();
    }
    let resumed = r.tx(0);
    assert_eq!(resumed.len(), 1, "XON at 75 buffers");
    assert_eq!(pfc_of(&resumed[0]).quanta[3], 0);
}
