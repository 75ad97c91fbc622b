//! Pauses sent at XOFF and XON, refreshed, and pauses received (PFC and 802.3x).

use super::*;

#[test]
fn each_lossless_priority_pauses_at_its_own_profile() {
    let mut c = Rig::ports(2);
    c.buffer.xoff_bytes = Some(10_000);
    c.buffer.headroom_bytes = 5_000;
    // Priority 4 pauses at 3000 B and may take 20 000 B after its pause.
    c.buffer
        .priority
        .insert(P4, BufferProfile { xoff_bytes: Some(3_000), headroom_bytes: Some(20_000), ..Default::default() });
    c.buffer.xon_offset_bytes = Some(1_000);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    let (p3, p4) = (data(1, 2, 3, 1000), data(1, 2, 4, 1000));
    for _ in 0..4 {
        r.rx(0, &p4);
        r.rx(0, &p3);
    }
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1, "priority 4 passed its 3000 B; priority 3 is below its 10 000 B");
    assert_eq!(pfc_of(&sent[0]).enabled, Priorities::only(P4));
    for _ in 0..15 {
        r.rx(0, &p4);
    }
    let s = r.stats();
    let (g3, g4) = (&s.ports[0].priorities[3], &s.ports[0].priorities[4]);
    assert_eq!(
        (g4.counters.lossless_drops, g4.headroom_bytes),
        (0, 16_000),
        "its headroom holds what priority 3's could not"
    );
    assert!(!g3.xoff);
    assert_eq!((g3.xoff_threshold, g3.xon_threshold, g3.headroom_size), (10_000, 9_000, 5_000));
    assert_eq!((g4.xoff_threshold, g4.xon_threshold, g4.headroom_size), (3_000, 2_000, 20_000));
    assert_eq!(s.ports[0].priorities[0].xoff_threshold, 0, "a lossy priority has no profile");
}

#[test]
fn lossless_queue_pauses_upstream_and_resumes_at_xon() {
    let (mut r, frame) = congested(true);
    for _ in 0..10 {
        r.rx(0, &frame);
    }
    assert!(r.tx(0).is_empty(), "below XOFF: no pause");
    r.rx(0, &frame);
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    let pause = pfc_of(&sent[0]);
    assert_eq!((pause.enabled, pause.quanta[3]), (Priorities::only(P3), 65535));
    assert_eq!(&sent[0][6..12], &[0x02, 0xee, 0, 0, 0, 0], "sent from the port's own MAC");
    // Frames in flight after XOFF land in headroom; beyond it they are dropped.
    for _ in 0..5 {
        r.rx(0, &frame);
    }
    let s = r.stats();
    let g = &s.ports[0].priorities[3];
    assert!(g.xoff);
    let open: Vec<_> = s.ports[0].xoff_episodes.iter().map(|e| (e.prio, e.start_ns > 0, e.end_ns)).collect();
    assert_eq!(open, [(P3, true, None)], "an XOFF episode lasts while the group is above XON");
    assert_eq!((g.headroom_bytes, g.counters.lossless_drops), (5_000, 1));
    assert_eq!(s.ports[0].counters.drops.lossless, 1);

    // Drain the egress port.
    let mut delivered = 0;
    let mut resumes = 0;
    for _ in 0..100 {
        delivered += r.tx(1).len();
        for f in r.tx(0) {
            let p = pfc_of(&f);
            if p.quanta[3] == 0 {
                resumes += 1;
            }
        }
        r.advance(Duration::from_micros(10));
    }
    assert_eq!(delivered, 15);
    assert_eq!(resumes, 1);
    let s = r.stats();
    let c = s.ports[0].priorities[3].counters;
    assert_eq!((c.xoff_sent, c.xon_sent), (1, 1));
    assert_eq!(s.ports[0].counters.mac_control.pfc_sent, 2);
    assert_eq!(s.ports[0].counters.tx_frames, 1, "PFC frames are not data tx");
    let episodes = &s.ports[0].xoff_episodes;
    assert_eq!(episodes.len(), 1);
    // The rig's clock has not moved since the pause: the episode ended when it began.
    assert_eq!((episodes[0].prio, episodes[0].end_ns), (P3, Some(episodes[0].start_ns)), "the resume ended it");
}

#[test]
fn pause_frames_never_come_from_a_zero_source() {
    let (_, frame) = congested(true);
    let mut c = Rig::ports(2);
    c.ports[0].mac = Some(MacAddr::ZERO);
    c.buffer.xoff_bytes = Some(2_000);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    for _ in 0..3 {
        r.rx(0, &frame);
    }
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    assert_ne!(&sent[0][6..12], &[0u8; 6]);
}

#[test]
fn pause_is_refreshed_while_above_xon() {
    let (mut r, frame) = congested(true);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_eq!(r.tx(0).len(), 1);
    // Default refresh: half of 65535 quanta at 10G = 1.678 ms.
    r.advance(Duration::from_micros(1600));
    assert!(r.tx(0).is_empty());
    assert!(r.sw.poll_timeout(r.now) <= r.now + Duration::from_micros(78));
    r.advance(Duration::from_micros(80));
    let again = r.tx(0);
    assert_eq!(again.len(), 1);
    assert_eq!(pfc_of(&again[0]).quanta[3], 65535);
}

#[test]
fn lossy_priority_drops_and_never_pauses() {
    let (mut r, frame) = congested(false);
    for _ in 0..20 {
        r.rx(0, &frame);
    }
    assert!(r.tx(0).is_empty(), "no PFC for a lossy priority");
    let s = r.stats();
    assert_eq!(s.ports[0].priorities[3].counters.lossy_drops, 8);
    assert_eq!(s.ports[0].counters.mac_control.pfc_sent, 0);
}

/// Two ports, the second at 40G with station 99 learned on it, just paused on P3 for
/// 65535 quanta: 838 848 ns at 40G.
fn paused_at_40g() -> Rig {
    let mut c = Rig::ports(2);
    c.ports[1].speed = Some(Speed::gbps(40));
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    r
}

#[test]
fn received_pfc_pauses_one_priority_for_its_quanta() {
    let mut r = paused_at_40g();
    r.rx(0, &data(1, 2, 3, 200));
    r.rx(0, &data(1, 2, 0, 200));
    let out = r.tx(1);
    assert_eq!(out.len(), 1, "priority 0 flows while 3 is paused");
    assert_eq!(r.sw.poll_timeout(r.now), r.now + Duration::from_nanos(838_848));
    r.advance(Duration::from_nanos(838_847));
    assert!(r.tx(1).is_empty());
    r.advance(Duration::from_nanos(1));
    assert_eq!(r.tx(1).len(), 1, "resumes when the quanta expire");
    let s = r.stats();
    assert_eq!(s.ports[1].priorities[3].paused_us, 838);
    assert_eq!(s.ports[1].priorities[3].counters.xoff_received, 1);
    assert_eq!(s.ports[1].counters.rx_frames, 1, "PFC frames are not data rx");
    assert_eq!(s.ports[1].counters.drops.total(), 0);
}

#[test]
fn zero_quanta_resumes_at_once_and_newer_frames_replace_the_timer() {
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_frame(Priorities::only(P4), 65535));
    r.rx(0, &data(1, 2, 4, 200));
    assert!(r.tx(1).is_empty());
    r.advance(Duration::from_micros(5));
    r.rx(1, &pfc_frame(Priorities::only(P4), 0));
    assert_eq!(r.tx(1).len(), 1);
    assert_eq!(r.stats().ports[1].priorities[4].counters.xon_received, 1);
}

#[test]
fn invalid_and_lossy_pfc_is_counted_and_ignored() {
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    let mut reserved = pfc_frame(Priorities::only(P3), 100);
    reserved[16] = 0x80;
    r.rx(1, &reserved);
    r.rx(1, &pfc_frame(Priorities::NONE, 100));
    // Cut inside class 0's timer: no padding explains that.
    r.rx(1, &pfc_frame(Priorities::only(P3), 100)[..21]);
    r.rx(1, &pfc_frame(Priorities::only(P1), 65535));
    let mut zero_src = pfc_frame(Priorities::only(P3), 65535);
    zero_src[6..12].fill(0);
    r.rx(1, &zero_src);
    r.rx(0, &data(1, 2, 0, 200));
    r.rx(0, &data(1, 2, 3, 200));
    assert_eq!(r.tx(1).len(), 1, "priority 1 is lossy: not paused; 3 is paused by the zero-source frame");
    let c = r.stats().ports[1].counters.mac_control;
    assert_eq!((c.rejected.reserved_bits, c.rejected.no_class_enabled, c.rejected.truncated), (1, 1, 1));
    assert_eq!((c.lossy_class_ignored, c.zero_source, c.received), (1, 1, 5));
    assert_eq!(r.stats().ports[1].counters.drops.total(), 0);
}

#[test]
fn an_unpadded_pfc_frame_pauses_its_priority_and_is_counted_short() {
    // As a raw socket on a veth delivers what SONiC's storm script writes: 32 bytes, the
    // vector and the timers of classes 0 to 6.
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535)[..32]);
    r.rx(0, &data(1, 2, 3, 200));
    assert!(r.tx(1).is_empty(), "priority 3 is paused");
    let c = r.stats().ports[1].counters.mac_control;
    assert_eq!((c.pfc_received, c.short, c.rejected.truncated), (1, 1, 0));
    assert_eq!(r.stats().ports[1].priorities[3].counters.xoff_received, 1);
}

#[test]
fn global_pause_applies_only_in_global_mode() {
    let pause = {
        let mut b = vec![0u8; 60];
        pfc::encode(&mut b, mac(2), &MacControl::Pause { quanta: 65535 });
        b
    };
    let mut r = Rig::new(Rig::ports(2));
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pause);
    r.rx(0, &data(1, 2, 0, 200));
    assert_eq!(r.tx(1).len(), 1, "PFC mode ignores 802.3x");
    assert_eq!(r.stats().ports[1].counters.mac_control.pause_ignored, 1);

    let mut c = Rig::ports(2);
    c.ports[1].pause_mode = PauseMode::GlobalPause;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pause);
    r.rx(0, &data(1, 2, 0, 200));
    r.rx(1, &pfc_frame(Priorities::only(P3), 1));
    assert!(r.tx(1).is_empty(), "the whole port is paused");
    assert_eq!(r.stats().ports[1].counters.mac_control.pfc_ignored, 1);
}

#[test]
fn global_pause_mode_sends_802_3x() {
    let mut c = Rig::ports(2);
    c.ports[0].pause_mode = PauseMode::GlobalPause;
    c.buffer.xoff_bytes = Some(2_000);
    c.buffer.xon_offset_bytes = Some(1_000);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(pfc::decode(&sent[0], MacAddr::ZERO).unwrap().body, MacControl::Pause { quanta: 65535 });
}

#[test]
fn upstream_response_is_the_longest_frames_kept_arriving_after_xoff() {
    let (mut r, frame) = congested(true);
    let upstream = |r: &Rig| r.stats().ports[0].priorities[3].upstream_response_max_us;
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let xoff_at = r.now;
    assert_eq!(upstream(&r), 0.0, "just crossed");
    // The partner keeps sending for 40 µs (the last frame dropped beyond headroom still counts).
    for us in [10, 25, 40] {
        r.now = xoff_at + Duration::from_micros(us);
        r.rx(0, &frame);
    }
    // A frame of another priority does not move it.
    r.now = xoff_at + Duration::from_micros(90);
    r.rx(0, &data(1, 2, 0, 1000));
    assert!(r.stats().ports[0].priorities[3].xoff);
    assert_eq!(upstream(&r), 40.0);
    // Drained to XON, then a second episode with a quicker partner: the longest stays.
    while r.stats().ports[0].priorities[3].xoff {
        r.tx(1);
        r.tx(0);
        r.advance(Duration::from_micros(10));
    }
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert!(r.stats().ports[0].priorities[3].xoff);
    r.advance(Duration::from_micros(5));
    r.rx(0, &frame);
    assert_eq!(upstream(&r), 40.0);
}

#[test]
fn reaction_time_is_recorded_for_the_xoff_frame() {
    let (mut r, frame) = congested(true);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    let (now, mut batch) = (r.now, TxBatch::new());
    r.sw.poll_transmit(now, &mut r.pool, PortId::new(0), &mut batch);
    let f = batch.frames()[0];
    assert_eq!(f.xoff_trigger, Some(now));
    r.sw.record_pause_sent(now, now + Duration::from_micros(7));
    assert_eq!(r.stats().pfc_reaction.count, 1);
    assert_eq!(r.stats().pfc_reaction.p50_us, 7.0);
}

/// Time zero is an instant like any other: the engine's "not yet" is an `Option`, not a
/// zero, so a switch whose clock starts at zero (a simulation from its first instant)
/// keeps a pause that begins then, and ends it.
#[test]
fn a_switch_whose_clock_starts_at_zero_records_a_pause_that_begins_at_zero_and_its_end() {
    let mut c = Rig::ports(2);
    c.buffer.xoff_bytes = Some(10_000);
    c.buffer.xon_offset_bytes = Some(4_000);
    c.buffer.headroom_bytes = 5_000;
    let mut r = Rig::new_at(c, Time::ZERO);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    let frame = data(1, 2, 3, 1000);
    for _ in 0..11 {
        r.rx(0, &frame);
    }
    assert_eq!(pfc_of(&r.tx(0)[0]).quanta[3], 65535, "XOFF at time zero");
    let s = r.stats();
    assert_eq!(s.ports[0].priorities[3].xoff_since_ns, Some(0));
    let e = s.ports[0].xoff_episodes[0];
    assert_eq!((e.start_ns, e.end_ns), (0, None), "open, from zero");
    while r.stats().ports[0].priorities[3].xoff {
        r.advance(Duration::from_micros(10));
        r.tx(1);
        r.tx(0);
        assert!(r.now < Time::from_millis(10), "the queue drains and the group resumes");
    }
    let e = r.stats().ports[0].xoff_episodes[0];
    assert_eq!((e.start_ns, e.end_ns), (0, Some(r.now.as_nanos())), "ended by the resume");
}

#[test]
fn frames_sent_after_a_pause_ran_out_while_its_refresh_waited_on_the_rx_ring_count_as_sent_past_pause() {
    let mut r = paused_at_40g();
    // The pause runs out 838 848 ns after it arrived.
    r.advance(Duration::from_nanos(838_848));
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 3, 200));
    }
    assert_eq!(r.tx(1).len(), 3, "by the switch's clock the pause ran out");
    // The storm's next pause had arrived 100 µs before that, and waited on the ring.
    r.rx_late(1, &pfc_frame(Priorities::only(P3), 65535), Duration::from_micros(100));
    let s = r.stats();
    assert_eq!(s.ports[1].priorities[3].counters.sent_past_pause, 3);
    assert_eq!(s.ports[1].priorities[0].counters.sent_past_pause, 0);
    r.rx(0, &data(1, 2, 3, 200));
    assert!(r.tx(1).is_empty(), "the late refresh holds the priority from its arrival");
}

#[test]
fn frames_sent_in_a_gap_between_two_pauses_or_after_a_resume_are_not_sent_past_pause() {
    let mut r = paused_at_40g();
    r.advance(Duration::from_nanos(838_848 + 10_000));
    r.rx(0, &data(1, 2, 3, 200));
    assert_eq!(r.tx(1).len(), 1);
    // The next pause arrived after the first ran out: the frame left in a gap of the
    // storm, not through it.
    r.rx_late(1, &pfc_frame(Priorities::only(P3), 65535), Duration::from_micros(5));
    // A resume, then frames, then a pause: those frames left while nothing paused them.
    r.rx(1, &pfc_frame(Priorities::only(P3), 0));
    r.rx(0, &data(1, 2, 3, 200));
    assert_eq!(r.tx(1).len(), 1);
    r.advance(Duration::from_micros(1));
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    assert_eq!(r.stats().ports[1].priorities[3].counters.sent_past_pause, 0);
}
