//! The PFC engine on real namespaces: lossless congestion, storms, resumes, 802.3x, and
//! the PFC frames the switch puts on the wire.

use std::time::Duration;

use netns_tests::*;
use pfcswitch::core::config::PauseMode;
use pfcswitch::core::speed::Speed;
use pfcswitch::core::Priority;
use pfctools::testbed::Proc;
use pfctools::traffic::sink::SinkReport;

#[test]
fn two_lossless_senders_share_a_slow_port_without_loss_and_its_pfc_frames_are_valid() {
    lossless_senders_share_a_slow_port(Paths::AsTheKernelAllows);
}

#[test]
fn with_every_optional_xdp_part_off_two_lossless_senders_still_share_a_slow_port_without_loss() {
    lossless_senders_share_a_slow_port(Paths::EveryOptionalPartOff);
}

fn lossless_senders_share_a_slow_port(paths: Paths) {
    let _serial = serial();
    let tb = star("lossless", 3);
    // A run the machine disturbed is repeated (`judged_attempt`): one in which the
    // sink's socket dropped frames (the receiver was off its CPU for longer than its ring
    // holds), or the switch's loop stalled for longer than the headroom lasts at one
    // sender's 80 Mb/s (frames then wait unseen in its rx ring past the point of pausing);
    // or one in which the port idled while the switch's loop, which paces it, waited for a
    // CPU (`port_idled_by_machine`: 25 % of the line rate missing in a suite run on a
    // VM whose switch waited 40-110 ms for a CPU in each headroom run, 2026-12-02).
    let config = paths.apply(config_at(&tb, Speed::mbps(100)));
    let headroom_lasts_us = config.buffer.headroom_bytes as f64 / (80e6 / 8.0) * 1e6;
    let line_rate = 100e6 / 8.0 / 1024.0; // 1000-byte frames: 1024 bytes on the wire
    let cpu_wait = |sw: &SwitchProc| sw.stats().unwrap().stalls.cpu_wait_us;
    let ((sw, capture, g1, g2, rx, delivered, waited_us), _) = judged_attempt(|attempt| {
        let watch = AttemptWatch::begin(&tb);
        let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
        let waited_before = cpu_wait(&sw);
        let capture = tb.work_dir().join(format!("pfc-at-h1-{attempt}.pcapng"));
        let (g1, g2, rx) = congest(&tb, "3", Some(capture.to_str().unwrap()));
        let sw = match watch.keep_switch(sw, &[&g1, &g2], &rx, headroom_lasts_us) {
            Ok(sw) => sw,
            Err(why) => return Attempt::Disturbed(why),
        };
        let waited_us = cpu_wait(&sw).zip(waited_before).map(|(after, before)| after.saturating_sub(before));
        let delivered: f64 = rx.flows.iter().map(|f| f.pps).sum();
        let first = rx.flows.iter().map(|f| f.first_ns).min().unwrap_or(0);
        let span_s = rx.flows.iter().map(|f| f.last_ns).max().unwrap_or(0).saturating_sub(first) as f64 / 1e9;
        if let Some(why) = port_idled_by_machine(delivered, line_rate, 0.85, span_s, waited_us) {
            assert!(sw.stop().success());
            return Attempt::Disturbed(why);
        }
        Attempt::Judge((sw, capture, g1, g2, rx, delivered, waited_us))
    });

    // Nothing lost: every frame each sender sent arrived.
    for (g, flow) in [(&g1, 1), (&g2, 2)] {
        let f = rx.flows.iter().find(|f| f.flow == flow).unwrap_or_else(|| panic!("flow {flow} missing: {rx:?}"));
        assert_eq!(
            (f.received, f.lost, f.duplicates),
            (g.sent, 0, 0),
            "flow {flow}: {f:?}; switch drops {:?}; sink socket drops {}",
            sw.stats().unwrap().ports.iter().map(|p| p.counters.drops).collect::<Vec<_>>(),
            rx.socket_dropped
        );
        // Both senders were paused and resumed.
        assert!(g.pauses.xoff[3] > 0 && g.pauses.xon[3] > 0, "flow {flow} pauses: {:?}", g.pauses);
    }
    let stats = sw.stats().unwrap();
    paths.check(&stats);
    assert_eq!(stats.ports.iter().map(|p| p.counters.drops.total()).sum::<u64>(), 0, "{stats:?}");
    for p in &stats.ports[..2] {
        assert!(p.priorities[3].counters.xoff_sent > 0 && p.priorities[3].counters.xon_sent > 0, "{p:?}");
    }
    // The two share the port, and together they fill it.
    let (a, b) = (rx.flows[0].received as f64, rx.flows[1].received as f64);
    assert!((0.35..=0.65).contains(&(a / (a + b))), "unfair share {a} / {b}");
    assert!(
        delivered > 0.85 * line_rate,
        "port underused: {delivered:.0} of {line_rate:.0} frames/s (the switch waited {waited_us:?} µs for a CPU)"
    );

    // Every PFC frame the switch sent to h1 is a well-formed 802.1Qbb frame.
    let frames = pfctools::pcap::read_frames(&capture).unwrap();
    assert!(!frames.is_empty(), "no PFC captured at h1");
    let port_mac = stats.ports[0].mac.to_string().replace(':', "");
    let (mut xoff, mut xon) = (0, 0);
    for f in &frames {
        assert_eq!(f.len(), 60, "padded to the minimum frame");
        assert_eq!(&f[0..6], &[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01], "destination");
        let src: String = f[6..12].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(src, port_mac, "source is the switch port's own MAC");
        assert_eq!(&f[12..14], &[0x88, 0x08], "EtherType");
        assert_eq!(&f[14..16], &[0x01, 0x01], "PFC opcode");
        assert_eq!(&f[16..18], &[0x00, 0x08], "class-enable vector: priority 3, reserved byte zero");
        let quanta: Vec<u16> = (0..8).map(|p| u16::from_be_bytes([f[18 + 2 * p], f[19 + 2 * p]])).collect();
        assert!(quanta.iter().enumerate().all(|(p, &q)| p == 3 || q == 0), "{quanta:?}");
        match quanta[3] {
            65535 => xoff += 1,
            0 => xon += 1,
            q => panic!("unexpected quanta {q}"),
        }
        // The padding is zeros: DCFIT's checking messages go only to other switches,
        // never to a host (h1's port is host-facing, the default).
        assert!(f[34..].iter().all(|&b| b == 0), "padding {:?}", &f[34..]);
    }
    assert!(xoff > 0 && xon > 0, "{xoff} XOFF, {xon} XON");
    assert_eq!(stats.ports[0].checks.originated, 0, "no checking message for a host");
    assert!(sw.stop().success());
}

#[test]
fn a_port_idle_while_the_switch_waited_for_a_cpu_is_the_machines_and_idle_while_it_ran_the_switchs() {
    // 12 207 frames/s of line rate, 2 s of transfer, 85 % wanted.
    let judge = |delivered, waited_us| port_idled_by_machine(delivered, 12_207.0, 0.85, 2.0, waited_us);
    // Full enough: nothing to explain, whatever the machine did.
    assert_eq!(judge(11_000.0, Some(500_000)), None);
    // 75 %, with the loop off its CPU for 0.2 s of 2: 85 % of the 1.8 s it ran is 76.5 %
    // of the whole, just above what arrived, so the switch fell short by itself...
    assert_eq!(judge(9_173.0, Some(200_000)), None);
    // ...and with 0.25 s off it, 85 % of the 1.75 s is 74.4 %: the machine's.
    assert!(judge(9_173.0, Some(250_000)).is_some_and(|why| why.contains("0.250 s of the 2.000 s")));
    // Half the line rate with the switch on its CPU throughout, or where the kernel does
    // not say how long it waited: the switch's.
    assert_eq!(judge(6_100.0, Some(0)), None);
    assert_eq!(judge(6_100.0, None), None);
}

#[test]
fn lossy_priority_drops_under_the_same_load_and_sends_no_pfc() {
    let _serial = serial();
    let tb = star("lossy", 3);
    let config = config_at(&tb, Speed::mbps(100));
    // Every missing frame must be a tail drop the switch counted. An attempt in which the
    // machine lost frames too (a receiver off its CPU for longer than its ring holds: the
    // sink's socket, the switch's rx rings, a veth queue) says nothing about that, and is
    // repeated.
    let ((sw, g1, g2, rx, stats, lossy, machine), attempt) = judged_attempt(|_| {
        let drops_before = link_drops(&tb);
        let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
        let (g1, g2, rx) = congest(&tb, "0", None);
        let stats = sw.stats().unwrap();
        let lossy: u64 = stats.ports.iter().map(|p| p.counters.drops.lossy).sum();
        let switch_sockets: u64 = stats.ports.iter().map(|p| p.socket.rx_lost()).sum();
        let links = link_drops(&tb) - drops_before;
        let machine = format!(
            "lost by the machine: sink socket {}, switch sockets {switch_sockets}, links {links}",
            rx.socket_dropped
        );
        if lossy != (g1.sent + g2.sent).saturating_sub(rx.received) && rx.socket_dropped + switch_sockets + links > 0 {
            assert!(sw.stop().success());
            return Attempt::Disturbed(machine);
        }
        Attempt::Judge((sw, g1, g2, rx, stats, lossy, machine))
    });
    let sent = g1.sent + g2.sent;
    assert!(rx.received < sent, "an oversubscribed lossy queue must drop: {} of {sent}", rx.received);
    assert_eq!(g1.pauses.pfc_frames + g2.pauses.pfc_frames, 0, "no PFC for a lossy priority");
    assert_eq!(lossy, sent - rx.received, "every missing frame is a counted tail drop (attempt {attempt}; {machine})");
    assert_eq!(stats.ports.iter().map(|p| p.counters.mac_control.pfc_sent).sum::<u64>(), 0);
    assert!(sw.stop().success());
}

#[test]
fn storm_stops_its_priority_only_and_pauses_propagate_upstream() {
    storm_stops_its_priority_only(Paths::AsTheKernelAllows);
}

#[test]
fn with_every_optional_xdp_part_off_a_storm_still_stops_its_priority_only_and_pauses_propagate_upstream() {
    storm_stops_its_priority_only(Paths::EveryOptionalPartOff);
}

fn storm_stops_its_priority_only(paths: Paths) {
    let _serial = serial();
    let tb = star("storm", 2);
    // A storm generator that lost its CPU for longer than a pause (33.5 ms at 1G) let
    // priority 3 through: such an attempt says nothing about the switch and is repeated.
    let ((sw, g, rx, stats), _) = judged_attempt(|_| {
        let (sw, g, rx, storm) = storm_attempt(&tb, paths);
        if !storm.continuous {
            assert!(sw.stop().success());
            return Attempt::Disturbed(format!(
                "the storm's largest gap {:.1} ms, longer than a pause",
                storm.largest_gap_us / 1e3
            ));
        }
        // A sender kept off its CPU sends less of what its 1.5 s asked (a paced sender
        // does not burst to catch up): beside `yes`, under 3000 of the background's
        // 15 000, and too few priority-3 frames to fill p1 to XOFF. The switch cannot
        // cause that while it never paused priority 0 (judged below), so only then is
        // the attempt the machine's.
        let sent_bg = g.flows.iter().find(|f| f.flow == 1).map_or(0, |f| f.sent);
        if sent_bg < 3000 && g.pauses.xoff[0] == 0 {
            assert!(sw.stop().success());
            return Attempt::Disturbed(format!(
                "the sender sent {sent_bg} of its 15 000 background frames (its longest stall {} µs, {} µs of it \
                 waiting for a CPU)",
                g.longest_stall_us, g.longest_cpu_wait_us
            ));
        }
        // The stormed queue's frames fill p1's ingress to XOFF only until the watchdog
        // cuts the queue off, 200 ms after its first frame: a sender kept off its CPU
        // for most of those 200 ms sends too few (beside `yes`, with a switch polling for
        // a second after its last frame, one run in three).
        // The switch's own account of what p1 held says whether XOFF was due; when it
        // was, it must have been sent (judged below, on the same account).
        let stats = sw.stats().unwrap();
        let p1 = &stats.ports[0].priorities[3];
        if p1.counters.xoff_sent == 0 && p1.ingress_watermark < p1.xoff_threshold {
            assert!(sw.stop().success());
            return Attempt::Disturbed(format!(
                "the sender's priority-3 frames filled p1 to {} of its {} B XOFF before the watchdog cut the \
                 queue off (its longest stall {} µs, {} µs of it waiting for a CPU)",
                p1.ingress_watermark, p1.xoff_threshold, g.longest_stall_us, g.longest_cpu_wait_us
            ));
        }
        Attempt::Judge((sw, g, rx, stats))
    });

    // The storm stops priority 3 only: every background frame (priority 0) the sender
    // sent arrived, and nothing paused priority 0 at any hop (below). How fast the
    // sender sent it is the sender's CPU, not the switch (beside a cargo build it managed
    // 5.5 to 8.8 k of its 10 k frames/s); so the test asks only that it flowed throughout
    // (at least 3000 of its 15 000 frames; an attempt whose sender could not is repeated,
    // above); that a storm leaves the background's rate alone is judged where the sender
    // is exact, in the simulator (the pause-response plan: no background priority paused
    // at any port, every frame arrived; sim/tests/sim/fidelity.rs).
    let background = rx.flows.iter().find(|f| f.flow == 1).expect("background flow arrived");
    let sent_bg = g.flows.iter().find(|f| f.flow == 1).unwrap().sent;
    assert_eq!((background.received, background.lost), (sent_bg, 0), "all the background arrived: {background:?}");
    assert!(sent_bg >= 3000, "the background flowed throughout the storm: {sent_bg} frames");
    let stormed = rx.flows.iter().find(|f| f.flow == 0).map_or(0, |f| f.received);
    assert_eq!(stormed, 0, "priority 3 must not get through the storm");

    paths.check(&stats);
    let (p1, p2) = (&stats.ports[0], &stats.ports[1]);
    assert!(p2.priorities[3].counters.xoff_received > 5);
    assert!(p2.priorities[3].paused_us > 1_500_000, "p2/3 paused {} µs", p2.priorities[3].paused_us);
    assert_eq!(p2.priorities[0].paused_us, 0);
    // The queued priority-3 frames pushed p1 over XOFF: the switch paused h1, which obeyed.
    assert!(p1.priorities[3].ingress_watermark >= p1.priorities[3].xoff_threshold, "{:?}", p1.priorities[3]);
    assert!(p1.priorities[3].counters.xoff_sent > 0);
    assert!(g.pauses.xoff[3] > 0 && g.pauses.xoff[0] == 0, "{:?}", g.pauses);
    assert_eq!(p1.counters.drops.lossless, 0);
    // The paused priority's frames waited in the engine, not on the stormed port's tx
    // ring: it never held more than two batches there (the background's).
    let batch = switch_config(&tb, "sw1").dataplane.batch as u32;
    assert!(p2.socket.tx_in_flight_max <= 2 * batch, "{:?}", p2.socket);
    // The PFC watchdog (SONiC's default: drop after 200 ms) cut the stormed queue off once
    // frames had waited under the storm for 200 ms, never earlier.
    let wd = p2.pfcwd.iter().find(|w| w.priority == Priority::new(3)).unwrap();
    assert_eq!(wd.counters.storms_detected, 1, "{wd:?}");
    assert!(wd.counters.dropped_frames > 0 && wd.counters.last_detection_us >= 200_000, "{wd:?}");
    assert_eq!(p2.counters.drops.watchdog, wd.counters.dropped_frames);
    assert!(sw.stop().success());
}

#[test]
fn zero_quanta_resumes_at_once() {
    zero_quanta_resumes(Paths::AsTheKernelAllows);
}

#[test]
fn with_every_optional_xdp_part_off_zero_quanta_still_resumes_at_once() {
    zero_quanta_resumes(Paths::EveryOptionalPartOff);
}

fn zero_quanta_resumes(paths: Paths) {
    let _serial = serial();
    let tb = star("resume", 2);
    // At 100 Mb/s, 65535 quanta pause for 335 ms.
    let mut config = paths.apply(config_at(&tb, Speed::mbps(100)));
    let full_pause = Speed::mbps(100).quanta_duration(65535);
    // The watchdog is not what this test checks. The XON comes from a second storm
    // process 100 ms after the first: beside two `yes` (and a switch polling for a second
    // after its last frame) it started late in three runs of five, the pause outlasted
    // the watchdog's 200 ms, and the watchdog dropped the queue (683 frames), as it should.
    config.pfcwd.action = pfcswitch::core::pfcwd::WatchdogAction::Off;
    let pfctools = harness::bin("pfctools").unwrap().display().to_string();
    let dst = mac_of(&tb, "h2");
    // The sender's 10 k frames/s of 100 bytes fill the headroom in this long: a longer
    // switch stall is the machine's doing, as are frames a sink's ring or a testbed link
    // dropped while their CPU was elsewhere. Beside a package install one run lost 685
    // frames, and the test judged it as the switch's without asking.
    let headroom_lasts_us = config.buffer.headroom_bytes as f64 / (10e3 * 100.0) * 1e6;
    let ((sw, g, rx, stats), _) = judged_attempt(|_| {
        let watch = AttemptWatch::begin(&tb);
        let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default()).unwrap();
        let sink = SinkProc::start(&tb, "h2", "sink", &sink_flags(&["--idle", "1"])).unwrap();
        let gen = start_gen(
            &tb,
            "h1",
            "gen",
            &gen_flags(&[
                "--dst-mac",
                &dst,
                "--dscp",
                "3",
                "--size",
                "100",
                "--rate",
                "10k",
                "--duration",
                "1.5",
                "--speed",
                "100M",
            ]),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let storm = |quanta: &str| {
            tb.exec(
                "h2",
                &[&pfctools, "storm", "-i", "eth0", "--prio", "3", "-n", "1", "-t", quanta, "--speed", "100M"],
            )
            .unwrap();
        };
        let xoff_started = std::time::Instant::now();
        storm("65535");
        std::thread::sleep(Duration::from_millis(100));
        storm("0");
        // At most this long after the XOFF was sent the XON was.
        let xon_within = xoff_started.elapsed();
        let g = gen.finish(GEN_TIMEOUT).unwrap();
        let rx = sink.finish(SINK_TIMEOUT).unwrap();
        let sw = match watch.keep_switch(sw, &[&g], &rx, headroom_lasts_us) {
            Ok(sw) => sw,
            Err(why) => return Attempt::Disturbed(why),
        };
        // Only an XON that reached the switch before the XOFF ran out can cut it short:
        // its sender, or the switch's loop, may have been off their CPUs for that long.
        let stats = sw.stats().unwrap();
        let stall = Duration::from_micros(stats.stalls.longest_us);
        if xon_within + stall >= full_pause {
            assert!(sw.stop().success());
            return Attempt::Disturbed(format!(
                "the XON left up to {xon_within:?} after the XOFF and the switch stalled for {stall:?}: it may \
                 have come after the {full_pause:?} pause ran out"
            ));
        }
        Attempt::Judge((sw, g, rx, stats))
    });
    paths.check(&stats);
    let f = &rx.flows[0];
    assert_eq!((f.received, f.lost), (g.sent, 0));
    // The XON ended the pause where it arrived, not the 335 ms the XOFF carried: the
    // switch's own account of how long priority 3 stood paused.
    let p2 = &stats.ports[1];
    let paused = Duration::from_micros(p2.priorities[3].paused_us);
    assert!(!paused.is_zero() && paused < full_pause, "paused {paused:?} of the XOFF's {full_pause:?}");
    assert_eq!((p2.priorities[3].counters.xoff_received, p2.priorities[3].counters.xon_received), (1, 1));
    assert!(sw.stop().success());
}

/// A switch whose h2 port pauses the whole link on 802.3x (global-pause mode) and whose h3
/// port is in PFC mode; h2 and h3 storm with `storms` (pfctools storm's flags after the
/// interface, for 3 s, longer than h2's sink listens) while h1 sends each of them 2 500
/// frames with `gen_more` at 5 k/s, one after the other, once the switch has counted both
/// storms' first frames: the switch, what h1 sent h3, what the two sinks got, and the
/// storms, still running or done. h2's sink listens for 2 s, inside the storm; h3's sink
/// listens with `sink3`'s flags. The senders go by count, not by time: beside `yes` a
/// starved sender sent 677 to 1 882 of the frames a 0.5 s window asked of it.
fn storm_two_ports_while_h1_sends(
    tb: &Testbed,
    storms: [&[&str]; 2],
    gen_more: &[&str],
    sink3: &[&str],
) -> (SwitchProc, u64, SinkReport, SinkReport, Vec<Proc>) {
    let mut config = config_at(tb, Speed::gbps(1));
    config.ports[1].pause_mode = PauseMode::GlobalPause;
    let sw = SwitchProc::start(tb, "sw1", &config, &RunArgs::default()).unwrap();
    let pfctools = harness::bin("pfctools").unwrap().display().to_string();
    let sinks = [
        SinkProc::start(tb, "h2", "sink2", &sink_flags(&["--duration", "2"])).unwrap(),
        SinkProc::start(tb, "h3", "sink3", &sink_flags(sink3)).unwrap(),
    ];
    let storms: Vec<Proc> = ["h2", "h3"]
        .iter()
        .zip(storms)
        .map(|(h, flags)| {
            let mut a = vec![pfctools.as_str(), "storm", "-i", "eth0"];
            a.extend(flags);
            tb.spawn(h, &format!("storm-{h}"), &a).unwrap()
        })
        .collect();
    // Both storms under way at the switch (acted on or ignored, each counted) before the
    // first test frame, however long the machine took to start them.
    wait_until("the switch counts both storms' frames", Duration::from_secs(10), Duration::from_millis(20), || {
        sw.stats().is_ok_and(|st| [1, 2].iter().all(|&i| st.ports[i].counters.mac_control.received > 0))
    });
    let mut sent_h3 = 0;
    for (h, flow) in [("h2", "0"), ("h3", "1")] {
        let dst = mac_of(tb, h);
        let mut a = vec!["--dst-mac", &dst, "--rate", "5k", "--count", "2500", "--flow-base", flow, "--tx-only"];
        a.extend(gen_more);
        sent_h3 = run_gen(tb, "h1", &format!("gen-{h}"), &gen_flags(&a), GEN_TIMEOUT).unwrap().sent;
    }
    let [s2, s3] = sinks;
    let (rx2, rx3) = (s2.finish(SINK_TIMEOUT).unwrap(), s3.finish(SINK_TIMEOUT).unwrap());
    (sw, sent_h3, rx2, rx3, storms)
}

#[test]
fn pause_802_3x_stops_a_global_pause_port_its_watchdog_sees_the_storm_and_a_pfc_port_ignores_it() {
    let _serial = serial();
    let tb = star("global", 3);
    // 802.3x from h2 (global-pause port) and from h3 (PFC port).
    let global: &[&str] = &["-g", "-s", "3", "--speed", "1G"];
    // h3's sink waits for all of h3's frames (a bound of 20 s for a switch that lost some).
    let sink3 = ["--expect", "2500", "--duration", "20"];
    let (sw, sent_h3, rx2, rx3, storms) = storm_two_ports_while_h1_sends(&tb, [global, global], &[], &sink3);
    drop(storms);
    assert_eq!(rx2.received, 0, "a global-pause port stops everything while paused");
    assert_eq!((sent_h3, rx3.received), (2500, 2500), "a PFC port ignores 802.3x: every frame arrived");
    let stats = sw.stats().unwrap();
    assert!(stats.ports[1].counters.mac_control.pause_received > 0);
    assert_eq!(stats.ports[1].counters.mac_control.pause_ignored, 0);
    assert!(stats.ports[2].counters.mac_control.pause_ignored > 0);
    // The watchdog sees the 802.3x storm too: priority 0's frames waited past 200 ms.
    let p0 = stats.ports[1]
        .pfcwd
        .iter()
        .find(|w| w.priority == Priority::new(0))
        .expect("every priority watched on a global port");
    assert!(p0.counters.storms_detected >= 1, "{p0:?}");
    assert!(stats.ports[1].counters.drops.watchdog > 0, "and its action (drop) took the waiting frames");
    assert!(stats.ports[2].pfcwd.iter().all(|w| w.counters.storms_detected == 0), "the PFC port ignored the PAUSE");
    assert!(sw.stop().success());
}

/// SONiC's storm script (sonic-mgmt's `pfc_gen.py`) writes its frames to a raw socket
/// unpadded: 802.3x PAUSE in 18 bytes, PFC in 32 without class 7's timer. A NIC would pad
/// them; a veth delivers them short. The switch reads them as padded, acts on them and
/// counts them short: h2's global-pause port stops everything, h3's PFC port stops
/// priority 3, for as long as the storms last.
#[test]
fn unpadded_pause_frames_laid_out_as_sonics_storm_script_sends_them_pause_the_port() {
    let _serial = serial();
    let tb = star("sonicstorm", 3);
    let unpadded = ["--mode", "unpadded", "-s", "3", "--speed", "1G", "--json"];
    let (global, pfc) = ([&["-g"][..], &unpadded].concat(), [&["--prio", "3"][..], &unpadded].concat());
    // Both sinks listen inside the storms' 3 s.
    let (sw, _, rx2, rx3, storms) =
        storm_two_ports_while_h1_sends(&tb, [&global, &pfc], &["--dscp", "3"], &["--duration", "2"]);
    let sent: Vec<u64> = storms
        .into_iter()
        .map(|p| {
            let done = p.wait(Duration::from_secs(10));
            assert!(done.status.success(), "{}", done.stderr);
            serde_json::from_str::<pfctools::storm::StormReport>(&done.stdout).unwrap().frames_sent
        })
        .collect();
    assert_eq!((rx2.received, rx3.received), (0, 0), "both ports paused while the storms lasted");
    let stats = sw.stats().unwrap();
    let (m2, m3) = (stats.ports[1].counters.mac_control, stats.ports[2].counters.mac_control);
    eprintln!("802.3x: {} sent, {m2:?}\nPFC: {} sent, {m3:?}", sent[0], sent[1]);
    assert_eq!((m2.pause_received, m2.short, m2.rejected.truncated, m2.pause_ignored), (sent[0], sent[0], 0, 0));
    assert_eq!((m3.pfc_received, m3.short, m3.rejected.truncated, m3.pfc_ignored), (sent[1], sent[1], 0, 0));
    assert!(stats.ports[2].priorities[3].counters.xoff_received > 0);
    assert!(sw.stop().success());
}

#[test]
fn malformed_pause_frames_are_counted_per_reason_and_never_acted_on() {
    let _serial = serial();
    let tb = star("badpfc", 2);
    let sw = SwitchProc::start(&tb, "sw1", &config_at(&tb, Speed::gbps(1)), &RunArgs::default()).unwrap();
    let pfctools = harness::bin("pfctools").unwrap().display().to_string();
    for mode in ["zero-vector", "truncated", "wrong-opcode", "reserved-bits", "wrong-destination"] {
        let out = tb.exec("h2", &[&pfctools, "storm", "-i", "eth0", "--prio", "3", "-n", "3", "--mode", mode]).unwrap();
        assert!(out.contains("sent 3"), "{out}");
    }
    // A lossy priority and a zero source: counted; the zero source is still honoured.
    tb.exec("h2", &[&pfctools, "storm", "-i", "eth0", "--prio", "1", "-n", "2"]).unwrap();
    tb.exec("h2", &[&pfctools, "storm", "-i", "eth0", "--prio", "4", "-n", "1", "--mode", "zero-source", "-t", "0"])
        .unwrap();
    let sink = SinkProc::start(&tb, "h2", "sink", &sink_flags(&["--idle", "1"])).unwrap();
    let dst = mac_of(&tb, "h2");
    let g = run_gen(
        &tb,
        "h1",
        "gen",
        &gen_flags(&["--dst-mac", &dst, "--dscp", "3", "--count", "500", "--rate", "10k"]),
        GEN_TIMEOUT,
    )
    .unwrap();
    let rx = sink.finish(SINK_TIMEOUT).unwrap();
    assert_eq!(rx.received, g.sent, "no malformed frame paused anything");
    let m = sw.stats().unwrap().ports[1].counters.mac_control;
    assert_eq!(
        (
            m.rejected.no_class_enabled,
            m.rejected.truncated,
            m.rejected.unknown_opcode,
            m.rejected.reserved_bits,
            m.rejected.wrong_destination
        ),
        (3, 3, 3, 3, 3)
    );
    assert_eq!((m.lossy_class_ignored, m.zero_source), (2, 1));
    let stats = sw.stats().unwrap();
    assert_eq!(stats.ports[1].counters.rx_frames, 0, "pause frames are not data");
    assert_eq!(stats.ports[1].counters.drops.total(), 0, "nor drops");
    assert!(sw.stop().success());
}

/// One attempt of the storm test on `tb`: a fresh switch, the storm from h2, the traffic
/// from h1; the switch still running, the generator's, sink's and storm's reports.
fn storm_attempt(
    tb: &Testbed,
    paths: Paths,
) -> (SwitchProc, pfctools::traffic::gen::GenReport, pfctools::traffic::sink::SinkReport, pfctools::storm::StormReport)
{
    let sw = SwitchProc::start(tb, "sw1", &paths.apply(config_at(tb, Speed::gbps(1))), &RunArgs::default()).unwrap();
    let pfctools = harness::bin("pfctools").unwrap().display().to_string();
    let sink = SinkProc::start(tb, "h2", "sink", &sink_flags(&["--duration", "2.2"])).unwrap();
    // A PFC storm from h2 on priority 3, for longer than the traffic runs.
    let storm = tb
        .spawn(
            "h2",
            "storm",
            &[&pfctools, "storm", "-i", "eth0", "--prio", "3", "-s", "3.5", "--speed", "1G", "--json"],
        )
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let dst = mac_of(tb, "h2");
    // Flow 0 on lossless priority 3, flow 1 on priority 0, 10k frames/s each.
    let g = run_gen(
        tb,
        "h1",
        "gen",
        &gen_flags(&[
            "--dst-mac",
            &dst,
            "--dscp",
            "3",
            "--dscp",
            "0",
            "--flows",
            "2",
            "--size",
            "200",
            "--rate",
            "20k",
            "--duration",
            "1.5",
            "--speed",
            "1G",
        ]),
        GEN_TIMEOUT,
    )
    .unwrap();
    let rx = sink.finish(SINK_TIMEOUT).unwrap();
    let storm = storm.wait(Duration::from_secs(10));
    let storm: pfctools::storm::StormReport = serde_json::from_str(storm.stdout.trim()).unwrap();

    (sw, g, rx, storm)
}
