//! Learning, flooding, filtering, static FDB entries and bad frames.

use super::*;

#[test]
fn learns_floods_and_then_switches_unicast() {
    let mut r = Rig::new(Rig::ports(3));
    let a_to_b = data(1, 2, 0, 100);
    let frame_len = a_to_b.len() as u64;
    r.rx(0, &a_to_b);
    assert_eq!(r.tx(1), vec![a_to_b.clone()], "unknown unicast floods");
    assert_eq!(r.tx(2), vec![a_to_b.clone()]);
    assert!(r.tx(0).is_empty(), "never back out of the ingress port");

    let b_to_a = data(2, 1, 0, 100);
    r.rx(1, &b_to_a);
    assert_eq!(r.tx(0), vec![b_to_a]);
    assert!(r.tx(2).is_empty(), "known unicast does not reach the third port");

    r.rx(0, &a_to_b);
    assert_eq!(r.tx(1), vec![a_to_b]);
    assert!(r.tx(2).is_empty());
    assert_eq!(r.pool.free_count(), POOL as usize, "every frame is back in the pool");
    let s = r.stats();
    assert_eq!((s.ports[0].counters.rx_frames, s.ports[1].counters.tx_frames), (2, 2));
    let (rx, tx) = (s.ports[0].priorities[0].counters, s.ports[1].priorities[0].counters);
    assert_eq!((rx.rx_bytes, tx.tx_bytes), (2 * frame_len, 2 * frame_len), "bytes per priority");
    assert_eq!(s.fdb_entries, 2);
}

#[test]
fn broadcast_floods_and_tags_pass_untouched() {
    let mut r = Rig::new(Rig::ports(3));
    let tagged = udp_frame(mac(1), MacAddr::BROADCAST, 0, Some((42, 5)), b"hello");
    r.rx(2, &tagged);
    assert_eq!(r.tx(0), vec![tagged.clone()]);
    assert_eq!(r.tx(1), vec![tagged]);
    assert_eq!(r.stats().ports[2].priorities[5].counters.rx_frames, 1, "classified by PCP");
}

#[test]
fn flooding_can_be_disabled_per_port() {
    let mut c = Rig::ports(3);
    c.ports[2].flood = false;
    let mut r = Rig::new(c);
    r.rx(0, &data(1, 2, 0, 64));
    assert_eq!(r.tx(1).len(), 1);
    assert!(r.tx(2).is_empty());
}

#[test]
fn destination_on_the_ingress_port_is_filtered() {
    let mut r = Rig::new(Rig::ports(2));
    r.rx(0, &data(1, 9, 0, 64));
    r.tx(1);
    r.rx(0, &data(2, 1, 0, 64));
    assert!(r.tx(0).is_empty() && r.tx(1).is_empty());
    assert_eq!(r.stats().ports[0].counters.drops.filtered, 1);
}

#[test]
fn bad_frames_are_counted_and_do_not_stop_forwarding() {
    let mut c = Rig::ports(2);
    c.ports[0].max_frame = Some(1000);
    let mut r = Rig::new(c);
    r.rx(0, &[0u8; 10]);
    r.rx(0, &data(1, 2, 0, 1001));
    let mut lldp = data(1, 2, 0, 64);
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0, 0, 0x0e]);
    r.rx(0, &lldp);
    let mut bad_src = data(1, 2, 0, 64);
    bad_src[6] = 0x01;
    r.rx(0, &bad_src);
    let mut unknown = data(1, 2, 0, 64);
    unknown[12..14].copy_from_slice(&[0x12, 0x34]);
    r.rx(0, &unknown);
    r.rx(0, &data(1, 2, 0, 1000));
    assert_eq!(r.tx(1), vec![unknown, data(1, 2, 0, 1000)]);
    let d = r.stats().ports[0].counters.drops;
    assert_eq!((d.runt, d.oversize, d.link_local, d.bad_source), (1, 1, 1, 1));
    assert_eq!(r.pool.free_count(), POOL as usize);
}

#[test]
fn static_fdb_entries_are_used_and_never_learned_over() {
    let mut c = Rig::switch_ports(3);
    c.fdb_entries.push(crate::config::StaticFdbEntry { mac: mac(2), port: "p2".into() });
    let mut r = Rig::new(c);
    r.rx(0, &data(1, 2, 0, 64));
    assert!(r.tx(1).is_empty(), "not flooded: the static entry says p2");
    assert_eq!(r.tx(2).len(), 1);
    // A frame from mac 2 on p1 does not move it.
    r.rx(1, &data(2, 1, 0, 64));
    r.tx(0);
    r.rx(0, &data(1, 2, 0, 64));
    assert_eq!(r.tx(2).len(), 1);
}

#[test]
fn a_full_fdb_and_unknown_unicast_floods_are_counted() {
    let mut c = Rig::ports(3);
    c.fdb.max_entries = 2;
    let mut r = Rig::new(c);
    for src in 1..=4 {
        r.rx(0, &data(src, 99, 0, 64));
    }
    r.rx(0, &udp_frame(mac(1), MacAddr::BROADCAST, 0, None, b"hello"));
    for p in 1..3 {
        assert_eq!(r.tx(p).len(), 5, "everything still floods");
    }
    let s = r.stats();
    assert_eq!(s.fdb_entries, 2);
    assert_eq!(s.ports[0].counters.fdb_full, 2, "sources 3 and 4 were not learned");
    assert_eq!(s.ports[0].counters.unknown_unicast_flooded, 4, "the broadcast is not unknown unicast");
}

/// A frame from mac 1 to mac 9 of the UDP flow from source port `sport`.
fn flow_frame(sport: u16) -> Vec<u8> {
    let mut f = data(1, 9, 0, 100);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f
}

#[test]
fn a_multipath_entry_sends_each_flow_by_one_of_its_ports_and_flows_spread_over_all_of_them() {
    let mut c = Rig::switch_ports(4);
    c.fdb_groups
        .push(crate::config::StaticFdbGroup { mac: mac(9), ports: vec!["p1".into(), "p2".into(), "p3".into()] });
    let mut r = Rig::new(c);
    let mut by_port = [0usize; 4];
    for sport in 0..60u16 {
        for _ in 0..2 {
            r.rx(0, &flow_frame(sport));
        }
        let took: Vec<usize> = (1..4).filter(|&p| !r.tx(p).is_empty()).collect();
        assert_eq!(took.len(), 1, "flow {sport}: both frames by one port, not {took:?}");
        by_port[took[0]] += 1;
    }
    assert_eq!(by_port[0], 0);
    assert!(by_port[1..].iter().all(|&n| n >= 10), "60 flows over three ports: {by_port:?}");
}

#[test]
fn a_multipath_member_whose_link_is_down_hands_its_flows_to_the_others_and_the_rest_keep_theirs() {
    let mut c = Rig::switch_ports(3);
    c.fdb_groups.push(crate::config::StaticFdbGroup { mac: mac(9), ports: vec!["p1".into(), "p2".into()] });
    let mut r = Rig::new(c);
    let port_of = |r: &mut Rig, sport: u16| {
        r.rx(0, &flow_frame(sport));
        (1..3).find(|&p| !r.tx(p).is_empty()).expect("forwarded")
    };
    let before: Vec<usize> = (0..20).map(|s| port_of(&mut r, s)).collect();
    assert!(before.contains(&1) && before.contains(&2), "{before:?}");
    r.sw.set_link(&mut r.pool, PortId::new(1), false);
    let after: Vec<usize> = (0..20).map(|s| port_of(&mut r, s)).collect();
    assert!(after.iter().all(|&p| p == 2), "{after:?}");
    r.sw.set_link(&mut r.pool, PortId::new(1), true);
    let back: Vec<usize> = (0..20).map(|s| port_of(&mut r, s)).collect();
    assert_eq!(back, before, "the same flows return to the port that came back");
}

/// Stations 8, 10 and 11 behind p1, p2 and p3 alone (to keep a member busy), and
/// station 9 behind all three, picked as `multipath` says.
const ALONE: [u64; 4] = [0, 8, 10, 11];

fn three_ways(multipath: crate::config::Multipath) -> Rig {
    let mut c = Rig::switch_ports(4);
    c.fdb.multipath = multipath;
    c.fdb.flowlet_gap_us = 10;
    for (p, &m) in ALONE.iter().enumerate().skip(1) {
        c.fdb_entries.push(crate::config::StaticFdbEntry { mac: mac(m), port: format!("p{p}") });
    }
    c.fdb_groups
        .push(crate::config::StaticFdbGroup { mac: mac(9), ports: vec!["p1".into(), "p2".into(), "p3".into()] });
    Rig::new(c)
}

/// `n` frames of the flow from source port 7 to station 9 arrive at p0; then what p1,
/// p2 and p3 each send.
fn spread(r: &mut Rig, n: usize) -> Vec<usize> {
    for _ in 0..n {
        r.rx(0, &flow_frame(7));
    }
    (1..4).map(|p| r.tx(p).len()).collect()
}

#[test]
fn under_adaptive_routing_each_frame_takes_the_member_with_the_shortest_queue_so_one_flow_uses_them_all() {
    let mut r = three_ways(crate::config::Multipath::Adaptive);
    // Nine frames of one flow with nothing sent meanwhile: each goes where the fewest
    // bytes wait, three a member.
    assert_eq!(spread(&mut r, 9), [3, 3, 3]);
    // Three frames for another station wait at p1: the next four avoid it.
    for _ in 0..3 {
        r.rx(0, &data(1, ALONE[1], 0, 100));
    }
    assert_eq!(spread(&mut r, 4), [3, 2, 2]);
    // A member whose link is down takes nothing.
    r.sw.set_link(&mut r.pool, PortId::new(2), false);
    assert_eq!(spread(&mut r, 6), [3, 0, 3]);
}

#[test]
fn under_flowlet_routing_a_flow_keeps_its_member_until_it_pauses_longer_than_the_gap() {
    let mut r = three_ways(crate::config::Multipath::Flowlet);
    // Nine frames of one flow at once: one flowlet, one member, though its queue grows.
    let sent = spread(&mut r, 9);
    let member = 1 + sent.iter().position(|&n| n == 9).unwrap_or_else(|| panic!("one member: {sent:?}"));
    // Its member busy, the flow's next frame 5 µs later is still in the flowlet.
    let busy = |r: &mut Rig| {
        for _ in 0..3 {
            r.rx(0, &data(1, ALONE[member], 0, 100));
        }
    };
    busy(&mut r);
    r.advance(Duration::from_micros(5));
    let sent = spread(&mut r, 1);
    let mut expected = [0; 3];
    expected[member - 1] = 4;
    assert_eq!(sent, expected);
    // After a pause of 20 µs a new flowlet takes the least busy member.
    busy(&mut r);
    r.advance(Duration::from_micros(20));
    let sent = spread(&mut r, 1);
    assert_eq!(sent[member - 1], 3, "{sent:?}");
    assert_eq!(sent.iter().sum::<usize>(), 4, "{sent:?}");
}

#[test]
fn a_multipath_entry_on_an_unknown_port_or_beside_a_single_entry_is_refused() {
    let mut c = Rig::switch_ports(3);
    c.fdb_groups.push(crate::config::StaticFdbGroup { mac: mac(9), ports: vec!["p2".into(), "p9".into()] });
    assert!(c.validate().unwrap_err().to_string().contains("fdb_group[0].ports"));
    c.fdb_groups[0].ports = vec![];
    assert!(c.validate().unwrap_err().to_string().contains("at least one port"));
    c.fdb_groups[0].ports = vec!["p1".into(), "p2".into()];
    assert_eq!(c.validate(), Ok(()));
    c.fdb_entries.push(crate::config::StaticFdbEntry { mac: mac(9), port: "p2".into() });
    assert!(c.validate().unwrap_err().to_string().contains("has an fdb_entry too"));
}

#[test]
fn a_route_added_by_ports_forwards_each_flow_as_the_same_configured_entry_does() {
    let mut c = Rig::switch_ports(4);
    c.fdb_groups
        .push(crate::config::StaticFdbGroup { mac: mac(9), ports: vec!["p1".into(), "p2".into(), "p3".into()] });
    let mut configured = Rig::new(c);
    let mut added = Rig::new(Rig::switch_ports(4));
    // A port the switch lacks (9) is left out, as a name it lacks is refused.
    let ports = [PortId::new(1), PortId::new(2), PortId::new(3)];
    added.sw.add_static_route(mac(9), &[ports[0], ports[1], ports[2], PortId::new(9)]);
    let port_of = |r: &mut Rig, sport: u16| {
        r.rx(0, &flow_frame(sport));
        (1..4).find(|&p| !r.tx(p).is_empty()).expect("forwarded")
    };
    for sport in 0..40 {
        assert_eq!(port_of(&mut added, sport), port_of(&mut configured, sport), "flow {sport}");
    }
    assert_eq!(added.stats().fdb_entries, configured.stats().fdb_entries, "the route and the learned source");
}
