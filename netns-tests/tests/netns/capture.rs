//! `pfcswitch ctl capture`: what the switch receives and sends on AF_XDP ports (where
//! tcpdump sees nothing), pause frames included, compared with what the test's tools sent.

use std::process::{Command, Stdio};
use std::time::Duration;

use netns_tests::*;
use pfcswitch::core::speed::Speed;
use pfctestkit::pcap::{read_capture, read_interfaces, Direction};

const IPV4: [u8; 2] = [0x08, 0x00];
const MAC_CONTROL: [u8; 2] = [0x88, 0x08];

fn ctl_capture(sw: &SwitchProc, args: &[&str]) -> Command {
    let mut c = Command::new(harness::bin("pfcswitch").unwrap());
    c.arg("ctl").arg("--socket").arg(&sw.socket).arg("capture").args(args);
    c
}

#[test]
fn capture_records_the_frames_each_port_takes_and_sends_pauses_included_and_counts_what_its_rate_skips() {
    let _serial = serial();
    let tb = star("capture", 2);
    let sw = SwitchProc::start(&tb, "sw1", &config_at(&tb, Speed::gbps(1)), &RunArgs::default()).unwrap();
    let file = tb.work_dir().join("sw1.pcapng");
    let capture = ctl_capture(&sw, &["p1", "p2", "--duration", "2.5", "-w", file.to_str().unwrap()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // h2 sends PFC for priority 3 for half a second; h1 sends it 500 lossy frames.
    let pfctools = harness::bin("pfctools").unwrap().display().to_string();
    let storm = tb
        .spawn(
            "h2",
            "storm",
            &[&pfctools, "storm", "-i", "eth0", "--prio", "3", "-s", "0.5", "--speed", "1G", "--json"],
        )
        .unwrap();
    let dst = mac_of(&tb, "h2");
    let gen = ["--dst-mac", &dst, "--dscp", "0", "--rate", "1k", "--count", "500", "--tx-only"];
    let sent = run_gen(&tb, "h1", "gen", &gen_flags(&gen), GEN_TIMEOUT).unwrap().sent;
    let storm = storm.wait(Duration::from_secs(10));
    let storm: pfctools::storm::StormReport = serde_json::from_str(storm.stdout.trim()).unwrap();
    let done = capture.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));

    let frames = read_capture(&file).unwrap();
    let interfaces = read_interfaces(&file).unwrap();
    let names: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["p1", "p2"]);
    let count = |iface: u32, way: Direction, ethertype: [u8; 2]| {
        frames
            .iter()
            .filter(|f| f.interface == iface && f.direction == Some(way) && f.data[12..14] == ethertype)
            .count() as u64
    };
    let stats = sw.stats().unwrap();
    eprintln!(
        "h1 sent {sent} frames and h2 {} PFC frames; the capture holds {} frames: p1 in {}, p2 out {}, p2 PFC in {}",
        storm.frames_sent,
        frames.len(),
        count(0, Direction::Inbound, IPV4),
        count(1, Direction::Outbound, IPV4),
        count(1, Direction::Inbound, MAC_CONTROL)
    );
    assert_eq!(count(0, Direction::Inbound, IPV4), sent, "what h1 sent, as p1 took it");
    assert_eq!(count(1, Direction::Outbound, IPV4), sent, "the same frames, as p2 sent them on");
    assert_eq!(count(1, Direction::Inbound, MAC_CONTROL), storm.frames_sent, "every PFC frame of the storm");
    assert_eq!(count(1, Direction::Inbound, MAC_CONTROL), stats.ports[1].counters.mac_control.pfc_received);
    assert!(frames.windows(2).all(|w| w[0].at <= w[1].at + Duration::from_millis(1)), "in time order, near enough");
    for i in &interfaces {
        assert_eq!(i.dropped, Some(0), "nothing skipped at this rate: {i:?}");
        let written = frames.iter().filter(|f| interfaces[f.interface as usize].name == i.name).count() as u64;
        assert_eq!(i.received, Some(written), "{i:?}");
    }
    // tshark reads the file: every frame, on its named interface.
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&file)
        .args(["-T", "fields", "-e", "frame.interface_name", "-e", "frame.packet_flags_direction"])
        .output()
        .expect("tshark");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), frames.len(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.lines().any(|l| l.starts_with("p2\t") && l.ends_with("0x00000001")), "inbound on p2: {text:.300}");

    // At 200 frames a second, to stdout: the burst and the rate are written, the rest
    // skipped and counted, and written plus skipped is what p1 took.
    let capped = ctl_capture(&sw, &["p1", "--rx", "--rate", "200", "--duration", "1.5", "-w", "-"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let gen = ["--dst-mac", &dst, "--dscp", "0", "--rate", "5k", "--count", "3000", "--tx-only"];
    let sent = run_gen(&tb, "h1", "gen2", &gen_flags(&gen), GEN_TIMEOUT).unwrap().sent;
    let done = capped.wait_with_output().unwrap();
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
    let piped = tb.work_dir().join("capped.pcapng");
    std::fs::write(&piped, &done.stdout).unwrap();
    let (frames, p1) = (read_capture(&piped).unwrap(), read_interfaces(&piped).unwrap().remove(0));
    eprintln!("at 200/s: {} written, {p1:?}, of {sent} sent", frames.len());
    assert!(frames.iter().all(|f| f.direction == Some(Direction::Inbound)));
    let (received, dropped) = (p1.received.unwrap(), p1.dropped.unwrap());
    assert!(received >= sent && dropped > 0, "{p1:?}");
    assert_eq!(frames.len() as u64 + dropped, received);
    assert!(frames.len() < 600, "about a burst and 200 a second: {}", frames.len());
    assert!(sw.stop().success());
}
