//! The shaper and the scheduler.

use super::*;

#[test]
fn shaper_paces_egress_at_the_port_speed() {
    let mut r = slow_port_rig();
    for _ in 0..200 {
        r.rx(0, &data(1, 2, 0, 1000));
    }
    // 10 ms carry 122 frames (+ burst).
    let sent = sent_by_slow_port(&mut r, 1000, Duration::from_micros(10));
    assert!((122..=123).contains(&sent), "{sent}");
}

#[test]
fn a_port_looked_at_once_per_long_turn_still_carries_its_line_rate() {
    // A loop turn forwarding large frames lasts hundreds of µs, far longer than the
    // shaper's burst; the time between two turns must not be lost to the wire.
    let mut r = slow_port_rig();
    for _ in 0..200 {
        r.rx(0, &data(1, 2, 0, 1000));
    }
    let sent = sent_by_slow_port(&mut r, 20, Duration::from_micros(500));
    // The last look is at 9.5 ms: 116 frames, plus the burst. (Only the burst per turn
    // would be 20.)
    assert!((116..=118).contains(&sent), "{sent}");
}

#[test]
fn a_paused_spell_is_not_made_up_afterwards() {
    let mut r = slow_port_rig();
    // Priority 3 paused for 1000 quanta (5.12 ms at 100 Mb/s), with frames waiting.
    r.rx(1, &pfc_frame(Priorities::only(P3), 1000));
    for _ in 0..50 {
        r.rx(0, &data(1, 2, 3, 1000));
    }
    assert_eq!(sent_by_slow_port(&mut r, 10, Duration::from_micros(100)), 0);
    // Once the pause is over, the first turn sends the burst's worth, not the paused
    // time's (1 ms of catch-up would be 12 frames).
    r.advance(Duration::from_millis(5));
    assert_eq!(r.tx(1).len(), 1);
}

#[test]
fn drr_shares_by_weight_and_strict_goes_first() {
    let mut c = Rig::ports(2);
    c.pfc.lossless = Some(vec![]);
    c.classify.dscp = [("1", P1), ("2", P2), ("5", P5)].iter().map(|(d, p)| (d.to_string(), *p)).collect();
    c.ports[1].scheduler = Scheduler::Drr { weights: [1, 1, 3, 1, 1, 0, 1, 1] };
    c.buffer.lossy_queue_bytes = Some(1 << 20);
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    for _ in 0..200 {
        r.rx(0, &data(1, 2, 1, 1000));
        r.rx(0, &data(1, 2, 2, 1000));
    }
    r.rx(0, &data(1, 2, 5, 1000));
    let mut order = Vec::new();
    while order.len() < 161 {
        for f in r.tx(1) {
            order.push(f[15] >> 2);
        }
        r.advance(Duration::from_micros(50));
    }
    assert_eq!(order[0], 5, "weight 0 is strict");
    let twos = order[1..161].iter().filter(|&&d| d == 2).count();
    assert!((115..=125).contains(&twos), "3:1 share, got {twos} of 160");
}

#[test]
fn ready_ports_are_the_egresses_a_frame_joins_and_every_port_after_a_mac_control_frame() {
    use crate::ports::PortSet;
    let mut r = Rig::new(Rig::ports(4));
    assert!(r.sw.poll_ready_ports().is_empty());
    r.rx(1, &data(2, 9, 0, 100));
    assert_eq!(
        r.sw.poll_ready_ports(),
        [0, 2, 3].map(PortId::new).into_iter().collect::<PortSet>(),
        "an unknown unicast floods"
    );
    assert!(r.sw.poll_ready_ports().is_empty(), "asked again: nothing new");
    r.rx(0, &data(1, 2, 0, 100));
    assert_eq!(r.sw.poll_ready_ports(), PortSet::only(PortId::new(1)), "a known station's port only");
    r.rx(2, &pfc_frame(Priorities::only(P3), 100));
    assert_eq!(r.sw.poll_ready_ports(), PortId::all(4).collect::<PortSet>());
}

#[test]
fn an_ingress_that_crosses_xoff_is_ready_to_send_its_pause() {
    let (mut r, frame) = congested(true);
    r.sw.poll_ready_ports();
    let mut pausing = false;
    for _ in 0..2000 {
        r.rx(0, &frame);
        if r.sw.poll_ready_ports().contains(PortId::new(0)) {
            pausing = true;
            break;
        }
    }
    assert!(pausing, "port 0 never became ready");
    assert!(r.tx(0).iter().any(|f| f.len() >= 60 && f[12..14] == [0x88, 0x08]), "and what it sends is a pause");
}
