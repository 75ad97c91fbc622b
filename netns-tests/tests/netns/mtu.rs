//! Frames as large as the ports' MTU: a port's frame limit follows its interface.

use std::time::Duration;

use netns_tests::*;

/// `hosts` hosts on sw1, every link at `mtu`.
fn star_at_mtu(tag: &str, mtu: u32, hosts: usize) -> Testbed {
    let mut topology = Topology::star(hosts);
    for link in &mut topology.links {
        link.mtu = Some(mtu);
    }
    up(tag, topology)
}

/// `ping -M do` (no fragmenting) from h1 to h2 with `payload` bytes of ICMP data: how
/// many of three came back.
fn pings_back(tb: &Testbed, payload: u32) -> u32 {
    let size = payload.to_string();
    let out = tb
        .exec("h1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "-M", "do", "-s", &size, "10.0.0.2"])
        .unwrap_or_else(|e| e.to_string());
    (0..=3).rev().find(|n| out.contains(&format!("{n} received"))).unwrap_or(0)
}

/// At `mtu`, the largest unfragmented ping and a 20 MB kernel TCP transfer cross the
/// switch whole, and nothing the MTU allows is dropped as oversize.
fn the_largest_ping_and_a_tcp_transfer_cross_at(mtu: u32) {
    let _serial = serial();
    let tb = star_at_mtu(&format!("mtu{mtu}"), mtu, 2);
    let sw = SwitchProc::start(&tb, "sw1", &switch_config(&tb, "sw1"), &RunArgs::default()).unwrap();
    // Less 20 bytes of IPv4 and 8 of ICMP header: the largest that fits the MTU.
    assert_eq!(pings_back(&tb, mtu - 28), 3, "the largest ping at MTU {mtu}");
    assert_eq!(pings_back(&tb, mtu - 27), 0, "one byte more does not leave h1 unfragmented");
    let carried = tcp_transfer(&tb, "h1", "h2", "10.0.0.2", 20_000_000).expect("a TCP transfer");
    assert_eq!(carried, 20_000_000, "TCP carried every byte at MTU {mtu}");
    let s = sw.stats().unwrap();
    // (TCP on a lossy priority may still see a tail drop or two: cubic fills queues.)
    let oversize: u64 = s.ports.iter().map(|p| p.counters.drops.oversize).sum();
    assert_eq!(oversize, 0, "nothing the MTU allows is dropped as oversize");
    let biggest = s.ports.iter().map(|p| p.counters.rx_bytes / p.counters.rx_frames.max(1)).max().unwrap();
    // The sender's port carries the data segments: full-sized frames.
    assert!(biggest > u64::from(mtu) * 3 / 4, "frames of about the MTU went through (mean {biggest} bytes)");
    assert!(sw.stop().success());
}

#[test]
fn at_mtu_3500_the_largest_unfragmented_ping_and_a_tcp_transfer_cross_the_switch() {
    the_largest_ping_and_a_tcp_transfer_cross_at(3500);
}

#[test]
fn at_mtu_4200_frames_in_two_umem_frames_cross_the_switch_whole() {
    the_largest_ping_and_a_tcp_transfer_cross_at(4200);
}

#[test]
fn at_mtu_9000_frames_in_three_umem_frames_cross_the_switch_whole() {
    the_largest_ping_and_a_tcp_transfer_cross_at(9000);
}

#[test]
fn at_mtu_9000_pfc_keeps_two_jumbo_lossless_senders_into_a_slow_port_lossless() {
    let _serial = serial();
    let tb = star_at_mtu("mtu9000-pfc", 9000, 3);
    let config = config_at(&tb, pfcswitch::core::speed::Speed::mbps(100));
    // One sender's 80 Mb/s fills the headroom in this long: a switch stall longer than it
    // is the machine's doing, not the switch's.
    let headroom_lasts_us = config.buffer.headroom_bytes as f64 / (80e6 / 8.0) * 1e6;
    let dst = mac_of(&tb, "h3");
    let ((sw, g1, g2, rx), _) = judged_attempt(|_| {
        let watch = AttemptWatch::begin(&tb);
        let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
        let sink = SinkProc::start(&tb, "h3", "sink", &sink_flags(&["--idle", "1.5"])).unwrap();
        let common =
            ["--dst-mac", &dst, "--size", "9018", "--dscp", "3", "--speed", "100M", "--load", "80", "--duration", "2"];
        let with_flow = |flow: &'static str| {
            let mut a = common.to_vec();
            a.extend_from_slice(&["--flow-base", flow]);
            gen_flags(&a)
        };
        let g1 = start_gen(&tb, "h1", "gen1", &with_flow("1")).unwrap();
        let g2 = start_gen(&tb, "h2", "gen2", &with_flow("2")).unwrap();
        let (g1, g2) = (g1.finish(GEN_TIMEOUT).unwrap(), g2.finish(GEN_TIMEOUT).unwrap());
        let rx = sink.finish(SINK_TIMEOUT).unwrap();
        watch.keep_switch(sw, &[&g1, &g2], &rx, headroom_lasts_us).map(|sw| (sw, g1, g2, rx)).into()
    });
    for (g, flow) in [(&g1, 1), (&g2, 2)] {
        let f = rx.flows.iter().find(|f| f.flow == flow).unwrap_or_else(|| panic!("flow {flow} missing: {rx:?}"));
        assert_eq!((f.received, f.lost, f.duplicates), (g.sent, 0, 0), "flow {flow}: {f:?}");
        assert!(g.pauses.xoff[3] > 0 && g.pauses.xon[3] > 0, "flow {flow} was paused and resumed: {:?}", g.pauses);
        assert!(g.sent > 1000, "flow {flow} sent {} jumbo frames", g.sent);
    }
    let stats = sw.stats().unwrap();
    assert_eq!(stats.ports.iter().map(|p| p.counters.drops.total()).sum::<u64>(), 0, "{stats:?}");
    let mean = stats.ports[2].counters.tx_bytes / stats.ports[2].counters.tx_frames.max(1);
    assert!(mean > 8900, "the slow port carried jumbo frames (mean {mean} bytes)");
    assert!(sw.stop().success());
}

#[test]
fn a_max_frame_below_the_mtu_is_said_at_start_and_what_it_refuses_counts_as_oversize() {
    let _serial = serial();
    let tb = star_at_mtu("mtu-below", 3500, 2);
    let mut config = switch_config(&tb, "sw1");
    config.ports[0].max_frame = Some(1522);
    let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let said = sw.proc.stderr_so_far();
    assert!(said.contains("max_frame 1522 is below what MTU 3500 lets through"), "{said}");
    assert_eq!(pings_back(&tb, 1400), 3, "frames under the limit pass");
    assert_eq!(pings_back(&tb, 3000), 0, "frames over it do not");
    let oversize = sw.stats().unwrap().ports[0].counters.drops.oversize;
    assert_eq!(oversize, 3, "each refused echo request counted as oversize");
}
