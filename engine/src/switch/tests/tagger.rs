//! Tagger tables in the data path.

use crate::ether::{parse_header, IpAt};
use crate::tagging::tests::TABLE;

use super::*;

/// The table's switch with host 2 learned on port 2 (index 1) and host 3 on port 3.
fn rig() -> Rig {
    let mut r = Rig::tagged(Rig::switch_ports(3), TABLE);
    r.rx(1, &data(2, 99, 0, 64));
    r.rx(2, &data(3, 99, 0, 64));
    for p in 0..3 {
        r.tx(p);
    }
    r
}

fn checksum_ok(f: &[u8], at: IpAt) -> bool {
    let h = etherparse::Ipv4HeaderSlice::from_slice(&f[usize::from(at.offset)..]).unwrap().to_header();
    h.header_checksum == h.calc_header_checksum()
}

fn tags(r: &Rig) -> TaggerStats {
    r.stats().tagger.expect("the switch reports its table")
}

fn row(r: &Rig, port: &str, tag: Option<u8>) -> TagCounters {
    tags(r).tags.iter().find(|t| t.port == port && t.tag == tag).map(|t| t.counters).unwrap_or_default()
}

#[test]
fn a_tagged_frame_is_charged_to_its_tags_priority_and_leaves_with_the_rewritten_tag() {
    let mut r = rig();
    r.rx(0, &data(1, 2, 2, 200));
    let out = r.tx(1);
    assert_eq!(out.len(), 1);
    let h = parse_header(&out[0]).unwrap();
    assert_eq!(h.dscp, Some(1), "rewritten by (ingress 1, tag 2, egress 2) → 1");
    assert!(checksum_ok(&out[0], h.ip.unwrap()));
    let s = r.stats();
    assert_eq!(s.ports[0].priorities[4].counters.rx_frames, 1, "charged to tag 2's priority at ingress");
    assert_eq!(s.ports[1].priorities[3].counters.tx_frames, 1, "queued under tag 1's priority at egress");
    let c = row(&r, "p0", Some(2));
    assert_eq!((c.classified, c.rewritten, c.to_default()), (1, 1, 0));
    // A rule that keeps the tag leaves the frame as it was.
    let original = data(1, 3, 2, 200);
    r.rx(0, &original);
    assert_eq!(r.tx(2), vec![original]);
    assert_eq!(row(&r, "p0", Some(2)).rewritten, 1);
    assert_eq!(s.tagger.as_ref().map(|t| (t.rules, t.lossless.clone())), Some((5, vec![P3, P4])));
}

#[test]
fn the_egress_queue_obeys_pauses_of_the_new_tags_priority_only() {
    let mut r = rig();
    r.rx(1, &pfc_frame(Priorities::only(P4), 65535));
    r.rx(0, &data(1, 2, 2, 200));
    assert_eq!(r.tx(1).len(), 1, "a pause of the old tag's priority does not stop it");
    r.rx(1, &pfc_frame(Priorities::only(P3), 65535));
    r.rx(0, &data(1, 2, 2, 200));
    assert!(r.tx(1).is_empty(), "a pause of the new tag's priority does");
    r.rx(1, &pfc_frame(Priorities::only(P3), 0));
    assert_eq!(r.tx(1).len(), 1);
}

#[test]
fn the_ingress_group_of_the_arriving_tag_pauses_the_upstream() {
    // The frames wait in priority 3's queue, paused; they are charged to priority 4.
    let (mut r, _) = congested_toward_a_pause(Priorities::only(P3));
    let sent = r.tx(0);
    assert_eq!(sent.len(), 1);
    assert_eq!(pfc_of(&sent[0]).enabled, Priorities::only(P4), "the upstream sent tag 2: its priority is paused");
}

#[test]
fn a_tag_without_an_ingress_rule_goes_lossy_with_the_default_tag() {
    let mut r = rig();
    let lossy_sent = r.stats().ports[1].priorities[0].counters.tx_frames;
    r.rx(0, &data(1, 2, 5, 200));
    let out = r.tx(1);
    let h = parse_header(&out[0]).unwrap();
    assert_eq!(h.dscp, Some(0));
    assert!(checksum_ok(&out[0], h.ip.unwrap()));
    let s = r.stats();
    assert_eq!(s.ports[0].priorities[0].counters.rx_frames, 1);
    assert_eq!(s.ports[1].priorities[0].counters.tx_frames, lossy_sent + 1);
    assert_eq!(row(&r, "p0", Some(5)).default_ingress, 1);
    // Tag 1 has a rule on port 2, not on port 1.
    r.rx(0, &data(1, 2, 1, 200));
    assert_eq!(parse_header(&r.tx(1)[0]).unwrap().dscp, Some(0));
    assert_eq!(row(&r, "p0", Some(1)).default_ingress, 1);
}

#[test]
fn a_lossless_frame_on_a_hop_without_a_rewrite_rule_never_stays_lossless() {
    let mut r = rig();
    r.rx(0, &data(1, 9, 0, 64));
    for p in 0..3 {
        r.tx(p);
    }
    // Port 2's tag 1 has a rule to port 3 only: to port 1 it falls to the default.
    r.rx(1, &data(2, 1, 1, 200));
    let waiting = r.stats();
    let group = |prio: Priority| waiting.ports[1].priorities[prio].ingress_bytes;
    assert_eq!((group(P3), group(P0)), (0, 200), "charged to the lossy default, not to tag 1's priority");
    let lossy_sent = waiting.ports[0].priorities[0].counters.tx_frames;
    let out = r.tx(0);
    assert_eq!(parse_header(&out[0]).unwrap().dscp, Some(0));
    assert_eq!(r.stats().ports[0].priorities[0].counters.tx_frames, lossy_sent + 1, "and queued as lossy");
    let c = row(&r, "p1", Some(1));
    assert_eq!((c.classified, c.default_egress, c.rewritten), (1, 1, 0));
}

#[test]
fn flooded_copies_each_carry_their_own_egress_tag() {
    let mut r = Rig::tagged(Rig::switch_ports(3), TABLE);
    r.rx(0, &data(1, 7, 2, 200));
    let (to2, to3) = (r.tx(1), r.tx(2));
    assert_eq!(parse_header(&to2[0]).unwrap().dscp, Some(1));
    assert_eq!(parse_header(&to3[0]).unwrap().dscp, Some(2));
    assert_eq!(r.pool.free_count(), POOL as usize);
}

#[test]
fn a_vlan_tagged_frame_gets_the_egress_priority_in_its_pcp() {
    let mut r = rig();
    let f = udp_frame(mac(1), mac(2), 2, Some((100, 0)), &[0; 100]);
    r.rx(0, &f);
    let out = r.tx(1);
    let h = parse_header(&out[0]).unwrap();
    assert_eq!((h.pcp, h.dscp), (Some(P3), Some(1)));
    assert!(checksum_ok(&out[0], h.ip.unwrap()));
    assert_eq!(u16::from_be_bytes([out[0][14], out[0][15]]) & 0x0fff, 100, "VLAN id kept");
    // Off the table: the default priority.
    r.rx(0, &udp_frame(mac(1), mac(2), 9, Some((100, 4)), &[0; 100]));
    let h = parse_header(&r.tx(1)[0]).unwrap();
    assert_eq!((h.pcp, h.dscp), (Some(P0), Some(0)));
}

#[test]
fn ipv6_frames_are_tagged_in_the_traffic_class() {
    let mut r = rig();
    let mut f = Vec::new();
    let ip = etherparse::Ipv6Header {
        traffic_class: 2 << 2 | 2,
        next_header: etherparse::IpNumber::UDP,
        hop_limit: 64,
        ..Default::default()
    };
    etherparse::PacketBuilder::ethernet2(mac(1).0, mac(2).0)
        .ip(etherparse::IpHeaders::Ipv6(ip, Default::default()))
        .udp(1, 2)
        .write(&mut f, &[0; 100])
        .unwrap();
    r.rx(0, &f);
    let out = r.tx(1);
    let v6 = etherparse::Ipv6HeaderSlice::from_slice(&out[0][14..]).unwrap();
    assert_eq!(v6.traffic_class(), 1 << 2 | 2, "tag 1, ECN kept");
}

/// Port 1 (index 0) congested with tag-2 frames (priority 4) that leave port 2 with
/// tag 1 (priority 3), while port 2's partner pauses `paused` with its own message.
fn congested_toward_a_pause(paused: Priorities) -> (Rig, CheckingMessage) {
    let mut c = Rig::switch_ports(3);
    c.buffer.xoff_bytes = Some(2_000);
    c.buffer.xon_offset_bytes = Some(1_000);
    let mut r = Rig::tagged(c, TABLE);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.tx(2);
    let theirs = CheckingMessage { origin_switch: 77, origin_port: 5, seq: 1, hops: 2, prios: paused };
    r.rx(1, &pfc_with(paused, 65535, Some(theirs)));
    for _ in 0..3 {
        r.rx(0, &data(1, 2, 2, 1000));
    }
    (r, theirs)
}

#[test]
fn dcfit_follows_a_pause_only_through_the_queue_the_traffic_waits_in() {
    // Paused on the arriving tag's priority, which these frames no longer use at
    // port 2: the congestion at port 1 has a local cause, and its pause originates.
    let (mut r, _) = congested_toward_a_pause(Priorities::only(P4));
    let m = pfc_of(&r.tx(0)[0]).checking.expect("a checking message");
    assert_eq!((m.origin_switch, m.hops), (my_id(&r), 0));
    let waiting = |r: &Rig| {
        r.sw.groups_waiting_in(
            PortId::new(0),
            r.sw.xoff(PortId::new(0)),
            PortId::new(1),
            r.sw.paused(r.now, PortId::new(1)),
        )
    };
    assert_eq!(waiting(&r), Priorities::NONE);
    // Paused on the new tag's priority, the one they wait in: the pause is passed on.
    let (mut r, theirs) = congested_toward_a_pause(Priorities::only(P3));
    assert_eq!(pfc_of(&r.tx(0)[0]).checking, Some(CheckingMessage { hops: 3, prios: Priorities::only(P4), ..theirs }));
    assert_eq!(waiting(&r), Priorities::only(P4), "group 4 waits in the paused queue 3");
}

#[test]
fn an_own_message_back_through_another_prioritys_pauses_is_no_deadlock() {
    let (mut r, _) = congested_toward_a_pause(Priorities::only(P4));
    let mine = pfc_of(&r.tx(0)[0]).checking.expect("originated");
    assert_eq!(mine.prios, Priorities::only(P4), "it follows the pause of tag 2's priority");
    // Back, following priority 4's pauses, on port 2: port 1's frames wait in queue 3.
    r.rx(1, &pfc_with(Priorities::only(P4), 65535, Some(CheckingMessage { hops: 3, ..mine })));
    let s = r.stats();
    assert_eq!((s.deadlocks_detected, s.ports[1].checks.stale_returns), (0, 1));
    // Back following priority 3's pauses, the queue they wait in: a cycle of buffers.
    r.rx(
        1,
        &pfc_with(Priorities::only(P3), 65535, Some(CheckingMessage { hops: 3, prios: Priorities::only(P3), ..mine })),
    );
    assert_eq!(r.stats().deadlocks_detected, 1);
}

/// The middle switch of a ring under a Tagger table, seen from its ccw port (index 1):
/// tag 2 (priority 4) goes on round the ring through cw (index 2), tag 1 (priority 3,
/// demoted upstream) ends at the host (index 0).
fn ring_middle() -> String {
    crate::tagging::tests::table_with(
        r#"
        [[ingress]]
        port = 2
        tag = 2
        priority = 4
        [[ingress]]
        port = 2
        tag = 1
        priority = 3
        [[rewrite]]
        ingress = 2
        tag = 2
        egress = 3
        new_tag = 2
        [[rewrite]]
        ingress = 2
        tag = 1
        egress = 1
        new_tag = 1
        "#,
    )
}

#[test]
fn a_message_leaves_for_one_group_so_a_return_along_another_groups_chain_is_no_deadlock() {
    let mut c = Rig::switch_ports(3);
    c.buffer.xoff_bytes = Some(2_000);
    c.buffer.xon_offset_bytes = Some(1_000);
    let mut r = Rig::tagged(c, &ring_middle());
    // The host's station behind port 0, the next switch's behind port 2.
    r.rx(0, &data(10, 99, 0, 64));
    r.rx(2, &data(20, 99, 0, 64));
    for p in 0..3 {
        r.tx(p);
    }
    // Both of ccw's groups cross XOFF at once, each congested locally: one pause
    // frame stops both, and the message it carries is for one of them.
    for _ in 0..3 {
        r.rx(1, &data(1, 20, 2, 1000));
        r.rx(1, &data(1, 10, 1, 1000));
    }
    let first = pfc_of(&r.tx(1)[0]);
    assert_eq!(first.enabled, Priorities::only(P3) | Priorities::only(P4), "one frame pauses both groups");
    let mine = first.checking.expect("a local cause originates");
    assert_eq!(mine.prios, Priorities::only(P3), "for one group: priority 3's traffic, which waits at the host");
    // It comes back at cw following priority 4's pauses: that is group 4's chain (the
    // ring demotes it to 3 two hops on), not the one group 3 waits behind. No cycle.
    r.rx(
        2,
        &pfc_with(Priorities::only(P4), 65535, Some(CheckingMessage { hops: 2, prios: Priorities::only(P4), ..mine })),
    );
    let s = r.stats();
    assert_eq!((s.deadlocks_detected, s.ports[2].checks.stale_returns), (0, 1));
    // Group 4's own message, back along the same pauses, closes a cycle of buffers.
    let mut for4 = None;
    for _ in 0..4 {
        r.advance(Duration::from_millis(2));
        let sent = r.tx(1).iter().filter_map(|f| pfc::decode(f, MacAddr::ZERO).ok()).find_map(|f| match f.body {
            MacControl::Pfc(p) => p.checking,
            _ => None,
        });
        if let Some(m) = sent.filter(|m| m.origin_switch == my_id(&r) && m.prios == Priorities::only(P4)) {
            for4 = Some(m);
            break;
        }
    }
    let for4 = for4.expect("group 4 gets its turn");
    r.rx(2, &pfc_with(Priorities::only(P4), 65535, Some(CheckingMessage { hops: 2, ..for4 })));
    assert_eq!(r.stats().deadlocks_detected, 1);
}

#[test]
fn frames_without_an_ip_header_take_the_default_priority() {
    let mut r = rig();
    let mut arp = data(1, 2, 0, 64);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    r.rx(0, &arp);
    assert_eq!(r.tx(1), vec![arp], "passed on unchanged");
    assert_eq!(row(&r, "p0", None).default_ingress, 1);
    assert_eq!(r.stats().ports[0].priorities[0].counters.rx_frames, 1);
}
