//! WRED and ECN marking through the engine: which frames a queue marks, drops or lets
//! pass, what the marked bytes look like, and what is counted where.

use super::*;
use crate::config::{EcnMode, WredSettings};
use crate::ether::{parse_header, ECN_CE};

/// A frame from host 1 to host 2 on priority `dscp` with ECN field `ecn` (the IPv4
/// checksum to match).
fn ect(dscp: u8, ecn: u8, len: usize) -> Vec<u8> {
    let mut f = data(1, 2, dscp, len);
    f[15] = f[15] & !0x03 | ecn;
    let mut ip = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap().to_header();
    ip.header_checksum = ip.calc_header_checksum();
    f[24..26].copy_from_slice(&ip.header_checksum.to_be_bytes());
    f
}

/// Everything queued on `port`, however many turns of the shaper that takes.
fn drain(r: &mut Rig, port: usize, frames: usize) -> Vec<Vec<u8>> {
    let mut out = r.tx(port);
    for _ in 0..1000 {
        if out.len() >= frames {
            break;
        }
        r.advance(Duration::from_micros(100));
        out.extend(r.tx(port));
    }
    out
}

fn checksum_ok(f: &[u8]) -> bool {
    let ip = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap().to_header();
    ip.header_checksum == ip.calc_header_checksum()
}

/// Two ports, host 2 known on port 1, whose partner has paused `prio` for good: what
/// arrives for it stays queued, so the queue's bytes are what the test sends.
fn held(mut c: Config, prio: Priority) -> Rig {
    c.buffer.xoff_bytes = Some(1 << 20);
    c.buffer.headroom_bytes = 1 << 20;
    let mut r = Rig::new(c);
    r.rx(1, &data(2, 99, 0, 64));
    r.tx(0);
    r.rx(1, &pfc_with(Priorities::only(prio), 65535, None));
    r
}

#[test]
fn a_lossless_queue_marks_ect_frames_beyond_its_maximum_and_leaves_those_below_its_minimum() {
    // Defaults: priority 3 is lossless and marks from 16 KiB, certainly from 64 KiB.
    let mut r = held(Rig::ports(2), P3);
    for _ in 0..100 {
        r.rx(0, &ect(3, 0x02, 1000));
    }
    let c = r.stats().ports[1].priorities[3].counters;
    // Frames 0..=16 found the queue below 16 KiB (at most 16000 bytes); frame 66 and
    // later found it at 64 KiB or more (66000 bytes).
    assert!(c.ecn_marked >= 100 - 66 && c.ecn_marked <= 100 - 17, "{c:?}");
    r.rx(1, &pfc_with(Priorities::only(P3), 0, None));
    let out = drain(&mut r, 1, 100);
    assert_eq!(out.len(), 100);
    let ce = out.iter().filter(|f| parse_header(f).unwrap().ecn == Some(ECN_CE)).count() as u64;
    assert_eq!(ce, c.ecn_marked, "what is counted marked left marked");
    assert!(out[..17].iter().all(|f| parse_header(f).unwrap().ecn == Some(0x02)), "below the minimum: untouched");
    assert!(out[66..].iter().all(|f| parse_header(f).unwrap().ecn == Some(ECN_CE)), "beyond the maximum: all");
    assert!(out.iter().all(|f| checksum_ok(f) && parse_header(f).unwrap().dscp == Some(3)));
}

#[test]
fn a_lossless_queue_never_drops_frames_that_are_not_ecn_capable_and_counts_them_above_its_minimum() {
    let mut r = held(Rig::ports(2), P3);
    for _ in 0..100 {
        r.rx(0, &ect(3, 0, 1000));
    }
    let s = r.stats();
    let c = s.ports[1].priorities[3].counters;
    assert_eq!((c.ecn_marked, c.wred_dropped), (0, 0));
    assert_eq!(c.ecn_not_capable_passed, 100 - 17, "{c:?}");
    assert_eq!(s.ports[1].priorities[3].egress_queue_frames, 100);
    assert_eq!(s.ports[0].counters.drops.total(), 0);
}

#[test]
fn a_lossy_queue_with_wred_drops_what_is_not_ecn_capable_and_marks_what_is() {
    let mut c = Rig::ports(2);
    c.buffer.lossy_queue_bytes = Some(1 << 20);
    let all = WredSettings {
        ecn: Some(EcnMode::EcnAll),
        wred_green_enable: Some(true),
        green_min_threshold: Some(0),
        green_max_threshold: Some(0),
        green_drop_probability: Some(100),
    };
    c.wred.priority.insert(P0, all);
    let mut r = held(c, P0);
    r.rx(0, &ect(0, 0x01, 500));
    r.rx(0, &ect(0, 0x00, 500));
    let s = r.stats();
    let q = s.ports[1].priorities[0].counters;
    assert_eq!((q.ecn_marked, q.wred_dropped), (1, 1));
    assert_eq!(s.ports[0].counters.drops.wred, 1, "the drop is counted at ingress, by its reason");
    assert_eq!(s.ports[1].priorities[0].egress_queue_frames, 1, "a dropped frame takes no buffer");
    r.rx(1, &pfc_with(Priorities::only(P0), 0, None));
    let out = drain(&mut r, 1, 1);
    assert_eq!(parse_header(&out[0]).unwrap().ecn, Some(ECN_CE), "ECT(1) counts as capable");
}

#[test]
fn a_port_of_its_own_overrides_the_switch_wide_profile() {
    let mut c = Rig::ports(2);
    let off = WredSettings { wred_green_enable: Some(false), ..Default::default() };
    c.ports[1].wred.priority.insert(P3, off);
    let mut r = held(c, P3);
    for _ in 0..100 {
        r.rx(0, &ect(3, 0x02, 1000));
    }
    assert_eq!(r.stats().ports[1].priorities[3].counters.ecn_marked, 0);
}
