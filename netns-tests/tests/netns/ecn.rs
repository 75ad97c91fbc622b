//! ECN marking on real namespaces: a congested lossless port marks ECN-capable frames
//! (what the sink counts as CE is what the switch counts as marked, and the IPv4 headers
//! stay valid), and a kernel TCP flow with ECN through a marking lossy port sees CE and
//! backs off without a tail drop.

use netns_tests::*;
use pfcswitch::core::config::{EcnMode, WredSettings};
use pfcswitch::core::speed::Speed;
use pfcswitch::core::Priority;
use pfctools::traffic::gen::GenReport;
use pfctools::traffic::sink::SinkReport;

/// Two ECT(0) senders at 80 % of a 100 Mb/s port each, lossless priority 3, into a third
/// 100 Mb/s port: the egress queue stands above the default marking band while PFC keeps
/// it from overflowing.
#[test]
fn a_congested_lossless_port_marks_ect_frames_ce_and_the_sink_counts_what_the_switch_marked() {
    let _serial = serial();
    let tb = star("ecn", 3);
    let config = config_at(&tb, Speed::mbps(100));
    let ((g1, g2, rx, s), attempt) = judged_attempt(|_| two_senders(&tb, &config, (2, "ect0"), &[]));
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
}

/// Two senders (h1, h2) of frames with ECN field `ecn` at 80 % of a 100 Mb/s port each,
/// lossless priority 3, into h3's 100 Mb/s port for `secs`, the sink answering marked
/// frames with CNPs; `more` is added to the senders' flags (`--roce` for RoCEv2 frames,
/// `--dcqcn` to react to the CNPs): what each sender and the sink reported and the
/// switch's stats at the end, or why the machine spoiled the attempt.
fn two_senders(
    tb: &Testbed,
    config: &pfcswitch::config::RunConfig,
    (secs, ecn): (u32, &str),
    more: &[&str],
) -> Attempt<(GenReport, GenReport, SinkReport, pfcswitch::stats::Stats)> {
    let headroom_lasts_us = config.buffer.headroom_bytes as f64 / (80e6 / 8.0) * 1e6;
    let watch = AttemptWatch::begin(tb);
    let sw = SwitchProc::start(tb, "sw1", config, &RunArgs::default()).unwrap();
    let sink = SinkProc::start(tb, "h3", "sink", &sink_flags(&["--idle", "1.5", "--cnp"])).unwrap();
    let (dst, secs) = (mac_of(tb, "h3"), secs.to_string());
    let gen = |flow: &str| {
        let mut a = vec![
            "--dst-mac",
            &dst,
            "--size",
            "1000",
            "--dscp",
            "3",
            "--ecn",
            ecn,
            "--speed",
            "100M",
            "--load",
            "80",
            "--duration",
            &secs,
            "--flow-base",
            flow,
        ];
        a.extend(more);
        gen_flags(&a)
    };
    let g1 = start_gen(tb, "h1", "gen1", &gen("1")).unwrap();
    let g2 = start_gen(tb, "h2", "gen2", &gen("2")).unwrap();
    let (g1, g2) = (g1.finish(GEN_TIMEOUT).unwrap(), g2.finish(GEN_TIMEOUT).unwrap());
    let rx = sink.finish(SINK_TIMEOUT).unwrap();
    let s = sw.stats().unwrap();
    assert!(sw.stop().success());
    match watch.lost(&[&g1, &g2], &rx, &s.stalls, headroom_lasts_us) {
        Some(why) => Attempt::Disturbed(why),
        None => Attempt::Judge((g1, g2, rx, s)),
    }
}

/// The same load, not ECN-capable: a lossless queue passes every frame and counts those
/// above its minimum; none is marked or dropped for WRED.
#[test]
fn a_lossless_queue_passes_frames_that_are_not_ecn_capable_and_counts_them() {
    let _serial = serial();
    let tb = star("noect", 3);
    let config = config_at(&tb, Speed::mbps(100));
    let ((g1, g2, rx, s), _) = judged_attempt(|_| two_senders(&tb, &config, (2, "not-ect"), &[]));
    let p3 = s.ports[2].priorities[3].counters;
    assert_eq!(rx.flows.iter().map(|f| f.ce).sum::<u64>(), 0);
    assert_eq!((p3.ecn_marked, p3.wred_dropped), (0, 0));
    assert!(p3.ecn_not_capable_passed > 0, "{p3:?}");
    assert!(p3.ecn_not_capable_passed <= g1.sent + g2.sent);
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
        Priority::new(0),
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
    // What arrives CE-marked at h3, as Wireshark reads it (h3's kernel receives: no XDP
    // program hides the frames from a capture there).
    let pcap = tb.work_dir().join("ce-at-h3.pcap");
    let pcap = pcap.to_str().unwrap();
    let capture =
        tb.spawn("h3", "tshark", &["tshark", "-q", "-i", "eth0", "-f", "tcp and ip[1] & 3 == 3", "-w", pcap]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !capture.stderr_so_far().contains("Capturing on") {
        assert!(std::time::Instant::now() < deadline, "tshark did not start: {}", capture.stderr_so_far());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let ce_before = in_ce_pkts(&tb, "h3");
    let got = tcp_transfer(&tb, "h1", "h3", "10.0.0.3", 40 << 20).unwrap();
    assert_eq!(got, 40 << 20);
    let ce = in_ce_pkts(&tb, "h3") - ce_before;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let stopped = capture.stop(std::time::Duration::from_secs(5));
    let read = std::process::Command::new("tshark")
        .args(["-r", pcap, "-Y", "ip.dsfield.ecn == 3 && tcp", "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    let seen = String::from_utf8_lossy(&read.stdout).lines().count() as u64;
    let s = sw.stats().unwrap();
    let q0 = s.ports[2].priorities[0].counters;
    eprintln!(
        "TCP through a marking lossy queue: {} marked, {ce} CE at the receiver, {seen} CE in its capture, {} tail drops",
        q0.ecn_marked, q0.lossy_drops
    );
    assert!(q0.ecn_marked > 0 && ce > 0, "marked {q0:?}, CE at the receiver {ce}");
    // Every mark the switch made toward h3 reached h3's kernel (pure ACKs go the other way).
    assert_eq!(ce, q0.ecn_marked, "{q0:?}");
    // The capture holds CE segments (fewer if the kernel merged some before the tap).
    assert!(seen > 0 && seen <= ce, "tshark saw {seen} CE segments of {ce}: {}", stopped.stderr);
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

/// The CNP the notification point sends, as Wireshark reads it: RoCE's BTH behind UDP
/// 4791 with opcode CNP, for the flow's queue pair, on DSCP 48, not ECN-capable.
#[test]
fn tshark_reads_a_cnp_as_a_rocev2_congestion_notification_for_the_flows_queue_pair() {
    let spec = roce::ReplySpec {
        src_mac: [2, 0, 0, 0, 0, 3],
        dst_mac: [2, 0, 0, 0, 0, 1],
        src_ip: std::net::Ipv4Addr::new(10, 0, 0, 3),
        dst_ip: std::net::Ipv4Addr::new(10, 0, 0, 1),
        dest_qp: 0x01_0007,
        dscp: roce::wire::DEFAULT_CNP_DSCP,
        src_port: 0xc007,
    };
    let fields = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "ip.dsfield.dscp",
        "ip.dsfield.ecn",
        "ip.checksum.status",
        "_ws.col.Protocol",
        "_ws.col.Info",
    ];
    let (rows, text) = tshark_fields("cnp", &[roce::cnp_frame(&spec)], &fields);
    let row = &rows[0];
    assert_eq!(
        row[..5],
        ["129", "0x010007", "48", "0", "1"],
        "opcode CNP, its QP, DSCP 48, Not-ECT, checksum good: {text}"
    );
    // Routable RoCE, as Wireshark calls RoCEv2. (Wireshark 4.0, Debian 12's, decodes the
    // BTH but has no name for opcode 129 yet: its Info column says "Unknown OpCode".)
    assert_eq!(row[5], "RRoCE", "{text}");
}

/// `frames` written to a pcap and read back by tshark (IPv4 checksums checked): each
/// frame's `fields`, and tshark's whole output for messages.
fn tshark_fields(name: &str, frames: &[Vec<u8>], fields: &[&str]) -> (Vec<Vec<String>>, String) {
    let dir = std::env::temp_dir().join(unique_name(name));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.pcapng"));
    let mut w = pfctestkit::pcap::CaptureWriter::create_one(&path, name).unwrap();
    for f in frames {
        w.received_now(f);
    }
    w.flush().unwrap();
    drop(w);
    let mut args = vec!["-r", path.to_str().unwrap(), "-o", "ip.check_checksum:TRUE", "-T", "fields"];
    for f in fields {
        args.extend(["-e", f]);
    }
    let out = std::process::Command::new("tshark").args(&args).output().expect("tshark (scripts/setup.sh installs it)");
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let rows = text.lines().map(|l| l.split('\t').map(str::to_string).collect()).collect();
    (rows, text)
}

/// A RoCEv2 data frame of `gen --roce`, as Wireshark reads it: BTH opcode RC Send Only
/// for the flow's queue pair, the frame's sequence as its PSN, ECT(0), a valid IPv4
/// checksum and ICRC.
#[test]
fn tshark_reads_a_roce_test_frame_as_an_rc_send_with_the_flows_qp_and_psn() {
    let spec = pfctestkit::flow::FlowSpec {
        id: 7,
        src_mac: pfcswitch::core::mac::MacAddr::local(1),
        dst_mac: pfcswitch::core::mac::MacAddr::local(3),
        vlan: None,
        dscp: 3,
        ecn: 2,
        src_ip: std::net::Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: std::net::Ipv4Addr::new(10, 0, 0, 3),
        wire_size: 1000,
        roce: true,
    };
    let t = pfctestkit::flow::FlowTemplate::build(&spec).unwrap();
    let frames: Vec<Vec<u8>> = [41, 42]
        .iter()
        .map(|&seq| {
            let mut frame = vec![0u8; t.len()];
            t.write(&mut frame, seq, 1000 + seq);
            frame
        })
        .collect();
    let fields = [
        "infiniband.bth.opcode",
        "infiniband.bth.destqp",
        "infiniband.bth.psn",
        "ip.dsfield.dscp",
        "ip.dsfield.ecn",
        "ip.checksum.status",
        "infiniband.invariant.crc",
        "_ws.col.Protocol",
    ];
    let (rows, text) = tshark_fields("roce", &frames, &fields);
    assert_eq!(rows.len(), 2, "{text}");
    for (row, psn) in rows.iter().zip(["41", "42"]) {
        assert_eq!(row[..6], ["4", "0x010007", psn, "3", "2", "1"], "RC Send Only, QP, PSN, DSCP, ECT(0): {text}");
        assert_eq!(row[7], "RRoCE", "{text}");
    }
    // The ICRC Wireshark shows (its bytes in frame order; it does not check it) is the one
    // in the frame, which the template's own test checks against soft-RoCE's computation.
    let last = &frames[1];
    let icrc = u32::from_be_bytes(last[last.len() - 4..].try_into().unwrap());
    assert_eq!(rows[1][6], format!("0x{icrc:08x}"), "{text}");
}

/// Two RoCEv2 senders (`gen --roce`: BTH and ICRC, ECT(0)) at 80 % of a 100 Mb/s port
/// each into one 100 Mb/s port, lossless: the same run with and without DCQCN at the
/// senders (the sink answering marked frames with CNPs). Without it the port can only
/// pause them; with it the CNPs cut their rates, and the pauses fall by a large factor.
#[test]
fn cnps_from_the_sink_slow_dcqcn_senders_and_the_port_pauses_them_far_less() {
    let _serial = serial();
    let tb = star("dcqcn", 3);
    let config = config_at(&tb, Speed::mbps(100));
    // Two seconds a run: the CNPs slow the senders within the first tenths of a second
    // (0 pauses against 370 and more), and each second less is a second less in which the
    // host can take the switch's vCPU for 100 ms and spoil the attempt.
    let run = |more: &[&str]| judged_attempt(|_| two_senders(&tb, &config, (2, "ect0"), more)).0;
    let (o1, o2, orx, os) = run(&["--roce"]);
    let (d1, d2, drx, ds) = run(&["--roce", "--dcqcn"]);
    let pauses = |s: &pfcswitch::stats::Stats| {
        s.ports[0].priorities[3].counters.xoff_sent + s.ports[1].priorities[3].counters.xoff_sent
    };
    let (open, braked) = (pauses(&os), pauses(&ds));
    let cnps: u64 = d1.dcqcn.iter().chain(&d2.dcqcn).map(|f| f.cnps).sum();
    let rates: Vec<String> = d1.dcqcn.iter().chain(&d2.dcqcn).map(|f| format!("{:.1}", f.rate_mbps)).collect();
    eprintln!(
        "open loop: {open} pauses, {} CE, {} CNPs sent; DCQCN: {braked} pauses, {} CE, {} CNPs sent, {cnps} taken, end rates {rates:?} Mb/s",
        orx.flows.iter().map(|f| f.ce).sum::<u64>(),
        orx.cnps_sent,
        drx.flows.iter().map(|f| f.ce).sum::<u64>(),
        drx.cnps_sent
    );
    for (g, rx, s) in [(o1.sent + o2.sent, &orx, &os), (d1.sent + d2.sent, &drx, &ds)] {
        let sockets: Vec<_> = s.ports.iter().map(|p| (p.socket.rx_dropped, p.socket.rx_ring_full)).collect();
        assert_eq!(rx.received, g, "lossless either way; the switch's sockets' (dropped, ring full): {sockets:?}");
        assert_eq!(s.ports.iter().map(|p| p.counters.drops.total()).sum::<u64>(), 0);
    }
    assert!(cnps > 0 && cnps <= drx.cnps_sent, "the senders took the sink's CNPs: {cnps} of {}", drx.cnps_sent);
    assert!(d1.dcqcn.iter().chain(&d2.dcqcn).all(|f| f.cuts > 0));
    assert!(open > 0, "open-loop senders at 160 % are paused");
    assert!(braked * 5 < open, "DCQCN cut the pauses by a large factor: {open} -> {braked}");
}
