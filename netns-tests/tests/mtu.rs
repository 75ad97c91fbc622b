//! Frames as large as the ports' MTU: a port's frame limit follows its interface.

use std::time::Duration;

use netns_tests::*;

/// Two hosts on sw1, every link at `mtu`.
fn star_at_mtu(tag: &str, mtu: u32) -> Testbed {
    let mut topology = Topology::star(2);
    for link in &mut topology.links {
        link.mtu = Some(mtu);
    }
    Testbed::up(&unique_name(tag), topology).unwrap_or_else(|e| panic!("testbed: {e}"))
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

#[test]
fn at_mtu_3500_the_largest_unfragmented_ping_and_a_tcp_transfer_cross_the_switch() {
    let _serial = serial();
    let tb = star_at_mtu("mtu3500", 3500);
    let sw = SwitchProc::start(&tb, "sw1", &switch_config(&tb, "sw1"), &RunArgs::default()).unwrap();
    // 3500 less 20 bytes of IPv4 and 8 of ICMP header: the largest that fits the MTU.
    assert_eq!(pings_back(&tb, 3472), 3, "the largest ping at MTU 3500");
    let carried = tcp_transfer(&tb, "h1", "h2", "10.0.0.2", 20_000_000).expect("a TCP transfer at MTU 3500");
    assert_eq!(carried, 20_000_000, "TCP carried every byte");
    let s = sw.stats().unwrap();
    let oversize: u64 = s.ports.iter().map(|p| p.counters.drops.oversize).sum();
    assert_eq!(oversize, 0, "nothing the MTU allows is dropped as oversize");
    let biggest = s.ports.iter().map(|p| p.counters.rx_bytes / p.counters.rx_frames.max(1)).max().unwrap();
    assert!(biggest > 1522, "frames above the old fixed limit went through (mean {biggest} bytes)");
}

#[test]
fn a_max_frame_below_the_mtu_is_said_at_start_and_what_it_refuses_counts_as_oversize() {
    let _serial = serial();
    let tb = star_at_mtu("mtu-below", 3500);
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
