//! What each fuzz target checks, as plain functions of the fuzzer's bytes: cargo-fuzz
//! (`fuzz/`) drives them with coverage guidance, and `tests/corpus.rs` runs them over
//! the committed seed corpora and a few seconds of mutations on every test run.
//!
//! Each one panics only on a real fault: the engine losing a frame or a byte of buffer,
//! a codec whose output does not read back as its input, a parser that accepts what it
//! cannot write back.

pub mod engine;
pub mod peers;

pub use peers::{control_lines, metrics_head, netlink_reply, sink_stamp};

use pfcswitch_core::checking::{CheckingMessage, ENCODED_LEN};
use pfcswitch_core::config::Config;
use pfcswitch_core::mac::MacAddr;
use pfcswitch_core::pfc::{self, MacControl, Pfc};
use pfcswitch_core::pool::{PoolSize, DEFAULT_RING_SIZE};
use pfcswitch_core::ports::PortId;
use pfcswitch_core::priorities::{Priorities, Priority};
use pfcswitch_core::tagging::TagTable;

/// A fuzz target: takes any bytes, panics only on a fault.
pub type Target = fn(&[u8]);

/// The fuzz targets by name (the names of `fuzz/fuzz_targets/*.rs` and of the corpora).
pub const TARGETS: &[(&str, Target)] = &[
    ("engine_rx", engine::run),
    ("pfc_codec", pfc_codec),
    ("checking_codec", checking_codec),
    ("config", config),
    ("sonic_config", sonic_config),
    ("tagger_table", tagger_table),
    ("control_lines", control_lines),
    ("metrics_head", metrics_head),
    ("netlink_reply", netlink_reply),
    ("sink_stamp", sink_stamp),
];

/// PAUSE/PFC frames: whatever decodes encodes back to a frame that decodes the same (and
/// is not short); a frame shorter than the minimum that decodes says the same as its
/// zero-padded copy and is marked short; and any PFC the bytes describe survives
/// encode → decode.
pub fn pfc_codec(data: &[u8]) {
    let own = MacAddr([0x02, 0, 0, 0, 0, 1]);
    if let Ok(frame) = pfc::decode(data, own) {
        let mut buf = [0u8; pfc::MIN_FRAME_LEN];
        let len = pfc::encode(&mut buf, frame.src, &frame.body);
        let again = pfc::decode(&buf[..len], own).expect("an encoded frame decodes");
        assert_eq!((again.src, again.body, again.short), (frame.src, frame.body, false), "{data:02x?}");
        assert_eq!(frame.short, data.len() < pfc::MIN_FRAME_LEN, "{data:02x?}");
        if frame.short {
            let mut padded = [0u8; pfc::MIN_FRAME_LEN];
            padded[..data.len()].copy_from_slice(data);
            let read = pfc::decode(&padded, own).expect("its padded copy decodes");
            assert_eq!((read.src, read.body), (frame.src, frame.body), "{data:02x?}");
        }
    }
    if data.len() >= 19 {
        let mut p = Pfc::pause(Priorities::from_bits(data[0]), 0);
        for (i, q) in p.quanta.iter_mut().enumerate() {
            *q = u16::from_be_bytes([data[1 + 2 * i], data[2 + 2 * i]]);
        }
        p.checking = (data[17] & 1 == 1).then(|| message(&data[18..]));
        let mut buf = [0u8; pfc::MIN_FRAME_LEN];
        let len = pfc::encode(&mut buf, own, &MacControl::Pfc(p));
        match pfc::decode(&buf[..len], own) {
            Ok(f) => assert_eq!(f.body, MacControl::Pfc(p)),
            Err(reject) => assert!(p.enabled.is_empty(), "{p:?} did not read back: {reject:?}"),
        }
    }
}

/// A checking message from bytes (missing bytes are zero).
fn message(data: &[u8]) -> CheckingMessage {
    let b = |i: usize| data.get(i).copied().unwrap_or(0);
    CheckingMessage {
        origin_switch: u32::from_be_bytes([b(0), b(1), b(2), b(3)]),
        origin_port: u16::from_be_bytes([b(4), b(5)]),
        seq: u32::from_be_bytes([b(6), b(7), b(8), b(9)]),
        hops: u16::from_be_bytes([b(10), b(11)]),
        prios: Priorities::from_bits(b(12)),
    }
}

/// DCFIT checking messages in PFC padding: decode → encode → decode is the identity,
/// and every message encodes to padding that decodes to it.
pub fn checking_codec(data: &[u8]) {
    if let Some(m) = CheckingMessage::decode(data) {
        let mut pad = [0u8; ENCODED_LEN];
        m.encode(&mut pad);
        assert_eq!(CheckingMessage::decode(&pad), Some(m));
    }
    let m = message(data);
    let mut pad = [0u8; ENCODED_LEN];
    m.encode(&mut pad);
    assert_eq!(CheckingMessage::decode(&pad), Some(m));
}

/// The configuration file: never a panic; what is accepted writes back to a file that
/// reads as the same configuration.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(c) = Config::from_toml(text) else { return };
    let written = c.to_toml();
    let again = Config::from_toml(&written).unwrap_or_else(|e| panic!("{text:?} was accepted, {written:?} not: {e}"));
    assert_eq!(again, c, "{text:?}");
    // What the engine derives from it must not panic either.
    let _ = (
        c.switch_id(),
        c.frame_caps(PoolSize::for_rings(c.ports.len(), c.ports.len(), DEFAULT_RING_SIZE, Some(1 << 16))),
        c.lossless(),
    );
    for i in 0..c.ports.len() {
        let _ = c.ports[i].speed().quanta_duration(c.pfc.quanta);
    }
}

/// A SONiC CONFIG_DB document, its first ports mapped: never a panic; what translates is
/// a valid configuration that writes and reads back as itself.
pub fn sonic_config(data: &[u8]) {
    use pfcswitch_core::config::sonic::{translate, PortMap};
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ports: Vec<PortMap> = ["Ethernet0=p1", "Ethernet4=p2"].iter().map(|p| p.parse().expect("a mapping")).collect();
    let Ok(t) = translate(text, &ports) else { return };
    let again = Config::from_toml(&t.config.to_toml())
        .unwrap_or_else(|e| panic!("{text:?} translated to a config that does not read back: {e}"));
    assert_eq!(again, t.config, "{text:?}");
}

/// A Tagger table file (TOML or JSON): parsed and compiled for switches of 1..=8 ports,
/// and every lookup of a compiled table answered, never a panic.
pub fn tagger_table(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(tables) = tagger::system::parse_table("fuzz", text, false) else { return };
    for ports in 1..=8 {
        let lossless = [Priority::new(3), Priority::new(4)];
        for wanted in [None, Some(&lossless[..])] {
            let Ok(t) = TagTable::compile(&tables, "fuzz", ports, wanted) else { continue };
            for tag in 0..=255u8 {
                for i in PortId::all(ports) {
                    let _ = t.ingress(i, tag);
                    for e in PortId::all(ports) {
                        let _ = t.rewrite(i, tag, e);
                        let _ = t.egress_queues(i, Priorities::from_bits(tag), e);
                    }
                }
                let _ = t.priority_of(tag);
            }
            for prio in Priority::all() {
                let _ = t.tag_of(prio);
            }
        }
    }
}
