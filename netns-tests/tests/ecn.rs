//! ECN marking on real namespaces: a congested lossless port marks ECN-capable frames
//! (what the sink counts as CE is what the switch counts as marked, and the IPv4 headers
//! stay valid), and a kernel TCP flow with ECN through a marking lossy port sees CE and
//! backs off without a tail drop.

use netns_tests::*;
use pfcswitch::core::config::{EcnMode, WredSettings};
use pfcswitch::core::speed::Speed;

/// Two ECT(0) senders at 80 % of a 100 Mb/s port each, lossless priority 3, into a third
/// 100 Mb/s port: the egress queue stands above the default marking band while PFC keeps
/// it from overflowing.
#[test]
fn a_congested_lossless_port_marks_ect_frames_ce_and_the_sink_counts_what_the_switch_marked() {
    let _serial = serial();
    let tb = star("ecn", 3);
    let config = config_at(&tb, Speed::mbps(100));
    let headroom_lasts_us = config.buffer.headroom_bytes as f64 / (80e6 / 8.0) * 1e6;
    let ((sw, g1, g2, rx), attempt) = judged_attempt(|_| {
        let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
        let sink = SinkProc::start(&tb, "h3", "sink", &sink_flags(&["--idle", "1.5"])).unwrap();
        let dst = mac_of(&tb, "h3");
        let gen = |flow: &str| {
            gen_flags(&[
                "--dst-mac",
                &dst,
                "--size",
                "1000",
                "--dscp",
                "3",
                "--ecn",
                "ect0",
                "--speed",
                "100M",
                "--load",
                "80",
                "--duration",
                "2",
                "--flow-base",
                flow,
            ])
        };
        let g1 = start_gen(&tb, "h1", "gen1", &gen("1")).unwrap();
        let g2 = start_gen(&tb, "h2", "gen2", &gen("2")).unwrap();
        let (g1, g2) = (g1.finish(GEN_TIMEOUT).unwrap(), g2.finish(GEN_TIMEOUT).unwrap());
        let rx = sink.finish(SINK_TIMEOUT).unwrap();
        let stalls = sw.stats().unwrap().stalls;
        if rx.received < g1.sent + g2.sent && (rx.socket_dropped > 0 || stalls.longest_us as f64 > headroom_lasts_us) {
            assert!(sw.stop().success());
            return Attempt::Disturbed(format!(
                "frames lost with sink socket drops {} and a longest switch stall of {} µs",
                rx.socket_dropped, stalls.longest_us
            ));
        }
        Attempt::Judge((sw, g1, g2, rx))
    });
    let s = sw.stats().unwrap();
    let p3 = &s.ports[2].priorities[3].counters;
    let ce: u64 = rx.flows.iter().map(|f| f.ce).sum();
    eprintln!("{} frames received, {ce} CE; the switch marked {}", rx.received, p3.ecn_marked);
    assert_eq!(rx.received, g1.sent + g2.sent, "lossless: nothing lost (attempt {attempt}): {rx:?}");
    assert!(ce > 0, "a queue held above the marking band marks: {p3:?}");
    assert_eq!(ce, p3.ecn_marked, "what arrived CE is what the switch marked");
    assert!(ce < rx.received, "the queue starts empty: the first frames pass unmarked ({ce} of {})", rx.received);
    assert_eq!(rx.flows.iter().map(|f| f.bad_ip_checksum).sum::<u64>(), 0, "marking keeps IPv4 checksums valid");
    assert!(rx.flows.iter().all(|f| f.dscp == 3), "marking leaves the DSCP alone");
    assert_eq!((p3.wred_dropped, p3.ecn_not_capable_passed), (0, 0));
    assert_eq!(s.ports.iter().map(|p| p.counters.drops.total()).sum::<u64>(), 0);
    assert!(sw.stop().success());
}

/// The same load, not ECN-capable: a lossless queue passes every frame and counts those
/// above its minimum; none is marked or dropped for WRED.
#[test]
fn a_lossless_queue_passes_frames_that_are_not_ecn_capable_and_counts_them() {
    let _serial = serial();
    let tb = star("noect", 3);
    let config = config_at(&tb, Speed::mbps(100));
    let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
    let sink = SinkProc::start(&tb, "h3", "sink", &sink_flags(&["--idle", "1.5"])).unwrap();
    let dst = mac_of(&tb, "h3");
    let gen = |flow: &str| {
        gen_flags(&[
            "--dst-mac",
            &dst,
            "--size",
            "1000",
            "--dscp",
            "3",
            "--speed",
            "100M",
            "--load",
            "80",
            "--count",
            "20000",
            "--flow-base",
            flow,
        ])
    };
    let g1 = start_gen(&tb, "h1", "gen1", &gen("1")).unwrap();
    let g2 = start_gen(&tb, "h2", "gen2", &gen("2")).unwrap();
    let (g1, g2) = (g1.finish(GEN_TIMEOUT).unwrap(), g2.finish(GEN_TIMEOUT).unwrap());
    let rx = sink.finish(SINK_TIMEOUT).unwrap();
    let p3 = sw.stats().unwrap().ports[2].priorities[3].counters;
    assert_eq!(rx.flows.iter().map(|f| f.ce).sum::<u64>(), 0);
    assert_eq!((p3.ecn_marked, p3.wred_dropped), (0, 0));
    assert!(p3.ecn_not_capable_passed > 0, "{p3:?}");
    assert!(p3.ecn_not_capable_passed <= g1.sent + g2.sent);
    assert!(sw.stop().success());
}

/// A kernel TCP flow (cubic, ECN negotiated in both namespaces) through a 100 Mb/s port
/// whose lossy queue 0 marks: the receiver's kernel counts CE packets (`IpExt:
/// InCEPkts`, an independent check), the switch counts as many marks, and the queue
/// never tail-drops (the sender backed off before the queue filled).
#[test]
fn a_kernel_tcp_flow_with_ecn_through_a_marking_lossy_port_sees_ce_and_backs_off_without_tail_drops() {
    let _serial = serial();
    let tb = star("tcpecn", 3);
    let mut config = config_at(&tb, Speed::mbps(100));
    config.wred.priority.insert(
        "0".into(),
        WredSettings {
            ecn: Some(EcnMode::EcnAll),
            wred_green_enable: Some(true),
            green_min_threshold: Some(30_000),
            green_max_threshold: Some(90_000),
            green_drop_probability: Some(10),
        },
    );
    for h in ["h1", "h3"] {
        tb.exec(h, &["sysctl", "-q", "-w", "net.ipv4.tcp_ecn=1"]).unwrap();
    }
    let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
    let ce_before = in_ce_pkts(&tb, "h3");
    let got = tcp_transfer(&tb, "h1", "h3", "10.0.0.3", 40 << 20).unwrap();
    assert_eq!(got, 40 << 20);
    let ce = in_ce_pkts(&tb, "h3") - ce_before;
    let s = sw.stats().unwrap();
    let q0 = s.ports[2].priorities[0].counters;
    eprintln!(
        "TCP through a marking lossy queue: {} marked, {ce} CE at the receiver, {} tail drops",
        q0.ecn_marked, q0.lossy_drops
    );
    assert!(q0.ecn_marked > 0 && ce > 0, "marked {q0:?}, CE at the receiver {ce}");
    // Every mark the switch made toward h3 reached h3's kernel (pure ACKs go the other way).
    assert_eq!(ce, q0.ecn_marked, "{q0:?}");
    assert_eq!(q0.lossy_drops, 0, "no tail drop: {q0:?}");
    let drops: u64 = s.ports.iter().map(|p| p.counters.drops.lossy).sum();
    assert_eq!(drops, 0);
    assert!(sw.stop().success());
}

/// `IpExt: InCEPkts` in `node`'s /proc/net/netstat: CE-marked packets its kernel received.
fn in_ce_pkts(tb: &Testbed, node: &str) -> u64 {
    let text = tb.exec(node, &["cat", "/proc/net/netstat"]).unwrap();
    let mut lines = text.lines().filter(|l| l.starts_with("IpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let at = names.split_whitespace().position(|n| n == "InCEPkts").expect("InCEPkts");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}
