//! Frames in several pool buffers (jumbo frames over AF_XDP multi-buffer): one unit from
//! arrival to transmit, counted in buffers where the pool's room is at stake.

use super::*;

/// `n` ports taking frames up to MTU 9000's, with 1000-byte pool buffers.
fn jumbo_rig(n: usize, config: impl FnOnce(&mut Config)) -> Rig {
    let mut c = Rig::ports(n);
    for p in &mut c.ports {
        p.max_frame = Some(crate::config::max_frame_for_mtu(9000));
    }
    config(&mut c);
    Rig::with_buffer_size(c, 1000)
}

#[test]
fn a_jumbo_frame_in_several_buffers_is_flooded_whole_and_every_buffer_comes_back() {
    let mut r = jumbo_rig(3, |_| {});
    let frame = data(1, 9, 0, 9000);
    r.rx(0, &frame);
    assert_eq!(r.pool.free_count(), POOL as usize - 18, "the frame and one copy, nine buffers each");
    assert_eq!(r.tx(1), vec![frame.clone()], "the copy, every byte");
    assert_eq!(r.tx(2), vec![frame]);
    assert_eq!(r.pool.free_count(), POOL as usize, "every buffer back");
    let s = r.stats();
    assert_eq!((s.ports[0].counters.rx_bytes, s.ports[1].counters.tx_bytes), (9000, 9000));
}

#[test]
fn a_multi_buffer_frame_above_the_port_limit_is_oversize_and_gives_back_every_buffer() {
    let mut r = Rig::with_buffer_size(Rig::ports(2), 1000);
    r.rx(0, &data(1, 9, 0, 3000));
    assert_eq!(r.stats().ports[0].counters.drops.oversize, 1);
    assert_eq!(r.pool.free_count(), POOL as usize);
    assert!(r.tx(1).is_empty());
}

#[test]
fn the_lossy_frame_cap_counts_the_buffers_a_frame_takes() {
    let mut r = jumbo_rig(3, |c| c.buffer.lossy_port_frames = Some(10));
    r.rx(1, &data(2, 9, 0, 64));
    r.tx(0);
    r.tx(2);
    r.rx(1, &pfc_with(Priorities::only(P0), 65535, None));
    for _ in 0..10 {
        r.rx(0, &data(1, 2, 0, 2500));
    }
    // Three buffers each: admitted while fewer than 10 were taken (0, 3, 6, 9).
    let s = r.stats();
    assert_eq!(s.ports[1].priorities[0].egress_queue_frames, 4);
    assert_eq!(s.ports[0].counters.drops.frame_cap, 6);
    assert_eq!(r.pool.free_count(), POOL as usize - 12);
}

#[test]
fn a_lossy_queue_holds_256_of_its_ports_largest_frames_unless_the_config_sets_its_bytes() {
    // 512 KiB would hold 58 frames of 9000 bytes; 256 of MTU 9000's largest (9022) hold 256.
    for (set, admitted) in [(None, 256), (Some(512 << 10), 58)] {
        let mut r = jumbo_rig(3, |c| {
            c.buffer.lossy_queue_bytes = set;
            c.buffer.lossy_port_frames = Some(4000);
        });
        r.rx(1, &data(2, 9, 0, 64));
        r.tx(0);
        r.tx(2);
        r.rx(1, &pfc_with(Priorities::only(P0), 65535, None));
        for _ in 0..300 {
            r.rx(0, &data(1, 2, 0, 9000));
        }
        let s = r.stats();
        assert_eq!(s.ports[1].priorities[0].egress_queue_frames, admitted, "limit {set:?}");
        assert_eq!(s.ports[0].counters.drops.lossy, 300 - u64::from(admitted));
    }
}

#[test]
fn a_flood_copy_that_cannot_have_all_its_buffers_is_not_made_and_is_counted() {
    let mut r = jumbo_rig(4, |_| {});
    let mut taken = Vec::new();
    // Room for the frame (three buffers) and two more: a copy needs three beyond the reserve.
    while r.pool.free_count() > crate::switch::PAUSE_RESERVE + 3 + 2 {
        taken.push(r.pool.alloc().unwrap());
    }
    r.rx(0, &data(1, 9, 0, 2500));
    assert_eq!(r.stats().ports[0].counters.drops.no_buffer, 2, "neither copy made");
    assert_eq!(r.pool.free_count(), crate::switch::PAUSE_RESERVE + 2, "no buffer taken for a copy in part");
    assert_eq!(r.tx(3).len(), 1, "the last port gets the frame itself");
    for id in taken {
        r.pool.free(id);
    }
    assert_eq!(r.pool.free_count(), POOL as usize);
}

#[test]
fn a_tag_rewrite_reaches_the_headers_in_a_multi_buffer_frames_first_buffer() {
    let mut c = Rig::switch_ports(3);
    for p in &mut c.ports {
        p.max_frame = Some(crate::config::max_frame_for_mtu(9000));
    }
    let mut r = Rig::tagged(c, crate::tagging::tests::TABLE);
    r.pool = VecPool::with_buffer_size(POOL, 1000);
    r.rx(1, &data(2, 99, 0, 64));
    r.rx(2, &data(3, 99, 0, 64));
    for p in 0..3 {
        r.tx(p);
    }
    let frame = data(1, 2, 2, 5000);
    r.rx(0, &frame);
    let out = r.tx(1);
    assert_eq!(out.len(), 1);
    let h = crate::ether::parse_header(&out[0]).unwrap();
    assert_eq!(h.dscp, Some(1), "rewritten by (ingress 1, tag 2, egress 2) → 1");
    assert_eq!(out[0].len(), 5000);
    assert_eq!(out[0][64..], frame[64..], "nothing but the headers changed");
}
