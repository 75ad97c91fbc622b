//! The Wireshark dissector for DCFIT checking messages (`wireshark/dcfit.lua`), read by
//! tshark on the simulator's captures of a PFC deadlock, against the switch's own decoder
//! on the same bytes.

use std::path::Path;
use std::process::Command;

use pfcswitch_core::checking::CheckingMessage;
use pfcswitch_core::pfc::{self, MacControl};
use pfcswitch_core::MacAddr;

/// What tshark shows of each frame's DCFIT message in `pcap`: frame number (from 1),
/// origin switch, origin port, sequence number, hops and priorities.
fn tshark_messages(pcap: &Path) -> Vec<(usize, CheckingMessage)> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../wireshark/dcfit.lua");
    let out = Command::new("tshark")
        .arg("-X")
        .arg(format!("lua_script:{}", script.display()))
        .arg("-r")
        .arg(pcap)
        .args(["-Y", "dcfit", "-T", "fields", "-E", "separator=,"])
        .args(["-e", "frame.number", "-e", "dcfit.origin_switch", "-e", "dcfit.origin_port"])
        .args(["-e", "dcfit.seq", "-e", "dcfit.hops", "-e", "dcfit.prios"])
        .output()
        .expect("tshark (scripts/setup.sh installs it)");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 6, "{l}");
            let n = |i: usize| f[i].parse::<u64>().unwrap_or_else(|e| panic!("{l}: field {i}: {e}"));
            let prios = u8::from_str_radix(f[5].trim_start_matches("0x"), 16).unwrap();
            let msg = CheckingMessage {
                origin_switch: n(1) as u32,
                origin_port: n(2) as u16,
                seq: n(3) as u32,
                hops: n(4) as u16,
                prios: pfcswitch_core::Priorities::from_bits(prios),
            };
            (n(0) as usize, msg)
        })
        .collect()
}

#[test]
fn tshark_with_the_lua_dissector_shows_every_dcfit_message_the_switch_sent_field_for_field() {
    let dir = std::env::temp_dir().join(format!("dcfit-dissector-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sim = Command::new(env!("CARGO_BIN_EXE_pfctools"))
        .args(["sim", "--scenario", "ring-deadlock", "--pcap"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(sim.status.success(), "{}", String::from_utf8_lossy(&sim.stderr));
    let (mut messages, mut hops_seen) = (0, std::collections::BTreeSet::new());
    let mut pcaps: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    pcaps.sort();
    for pcap in &pcaps {
        // The switch's decoder on the same frames: every PFC frame whose padding holds a
        // message.
        let expected: Vec<(usize, CheckingMessage)> = pfctestkit::pcap::read_frames(pcap)
            .unwrap()
            .iter()
            .enumerate()
            .filter_map(|(i, frame)| match pfc::decode(frame, MacAddr::local(999)).ok()?.body {
                MacControl::Pfc(p) => Some((i + 1, p.checking?)),
                _ => None,
            })
            .collect();
        let shown = tshark_messages(pcap);
        assert_eq!(shown, expected, "{}", pcap.display());
        messages += shown.len();
        hops_seen.extend(shown.iter().map(|(_, m)| m.hops));
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("{messages} DCFIT messages in {} captures, hops {hops_seen:?}", pcaps.len());
    assert!(messages >= 10, "the deadlock's switches exchanged checking messages: {messages}");
    assert!(hops_seen.len() >= 2, "messages relayed as well as originated: {hops_seen:?}");
}
