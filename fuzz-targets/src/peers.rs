//! What peers and local clients send the switch and its tools, beyond the frames the
//! engine takes: the control socket's lines and requests, the metrics endpoint's request
//! heads, the kernel's netlink replies, and the test frames the sink reads.

use std::net::Ipv4Addr;

use pfcswitch::control::http::parse_head;
use pfcswitch::control::server::{decode_request, take_line};
use pfcswitch::nic::netlink::{attrs, message, read_reply};
use pfcswitch_core::mac::MacAddr;
use pfctestkit::flow::{read_stamp, read_stamp_in, FlowSpec, FlowTemplate};

/// Control socket lines: the same lines come out however the bytes arrive (the first
/// byte picks the chunk size), each ends at its one newline, and whatever decodes as a
/// request encodes back to itself.
pub fn control_lines(data: &[u8]) {
    let Some((&step, rest)) = data.split_first() else { return };
    let step = usize::from(step % 16) + 1;
    let mut whole = rest.to_vec();
    let mut expected = Vec::new();
    while let Some(line) = take_line(&mut whole) {
        expected.push(line);
    }
    let (mut pending, mut got) = (Vec::new(), Vec::new());
    for chunk in rest.chunks(step) {
        pending.extend_from_slice(chunk);
        while let Some(line) = take_line(&mut pending) {
            got.push(line);
        }
    }
    assert_eq!(got, expected, "framing depends on how the bytes arrived");
    assert_eq!(pending, whole, "the same partial line is left");
    for line in &got {
        assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(line.last(), Some(&b'\n'));
        if let Some(Ok(request)) = decode_request(line) {
            let again = serde_json::to_string(&request).expect("a request serialises");
            assert_eq!(decode_request(again.as_bytes()), Some(Ok(request)));
        }
    }
}

/// Metrics request heads: a head that parses names an alphabetic method and a path with
/// no query or space, and a request line rebuilt from them parses to the same.
pub fn metrics_head(data: &[u8]) {
    let Ok(head) = parse_head(data) else { return };
    assert!(!head.method.is_empty() && head.method.bytes().all(|b| b.is_ascii_alphabetic()), "{head:?}");
    assert!(head.path.starts_with('/') && !head.path.contains(['?', ' ']), "{head:?}");
    let line = format!("{} {} HTTP/1.1\r\n\r\n", head.method, head.path);
    let again = parse_head(line.as_bytes()).expect("a line built from a parsed head parses");
    assert_eq!((again.method, again.path), (head.method, head.path));
}

/// Netlink replies: any bytes are read without a panic; attributes our encoder writes
/// (types and payloads from the bytes) read back as written.
pub fn netlink_reply(data: &[u8]) {
    let _ = read_reply(data);
    let mut written: Vec<(u16, &[u8])> = Vec::new();
    let mut rest = data;
    while let [ty, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        written.push((u16::from(*ty) << 6 | u16::from(*len & 0x3f), &tail[..n]));
        rest = &tail[n..];
    }
    let m = message(0x10, [1, 2, 0, 0], &written);
    let read: Vec<(u16, &[u8])> = attrs(&m[20..]).collect();
    assert_eq!(read, written);
    let _ = read_reply(&m);
}

/// Test frames: any bytes, whole or cut, are read without a panic; a frame a flow
/// template writes (its fields from the bytes) reads back with its stamp, also from its
/// first 128 bytes alone, as the sink reads a jumbo frame's first buffer.
pub fn sink_stamp(data: &[u8]) {
    let _ = read_stamp(data);
    for cut in [14, 18, 34, 42, 46, 54, data.len() / 2] {
        let _ = read_stamp_in(&data[..cut.min(data.len())], data.len());
    }
    let [a, b, c, d, e, f, g, h, ..] = *data else { return };
    let spec = FlowSpec {
        id: u16::from_be_bytes([a, b]),
        src_mac: MacAddr([0x02, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([0x02, 0, 0, 0, 0, 2]),
        vlan: (c & 1 == 1).then_some((u16::from(d) << 4 | 1, c >> 5)),
        dscp: e >> 2,
        ecn: e & 0x03,
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip: Ipv4Addr::new(10, 0, 0, 2),
        wire_size: 64 + usize::from(u16::from_be_bytes([f, g])) % (9216 - 63),
        roce: c & 2 == 2,
    };
    let Ok(t) = FlowTemplate::build(&spec) else { return };
    let mut frame = vec![0u8; t.len()];
    let (seq, tx_ns) = (u32::from(h) * 7919, u32::from(a) << 24 | u32::from(h));
    t.write(&mut frame, seq, tx_ns);
    let s = read_stamp(&frame).unwrap_or_else(|| panic!("{spec:?} did not read back"));
    assert_eq!(
        (s.flow, s.seq, s.tx_ns, s.dscp, s.ecn, s.ip_checksum_ok),
        (spec.id, seq, tx_ns, spec.dscp, spec.ecn, true)
    );
    assert_eq!(s.pcp, spec.vlan.map(|(_, pcp)| pcp));
    let head = &frame[..frame.len().min(128)];
    assert_eq!(read_stamp_in(head, frame.len()), Some(s), "from the first bytes alone");
}
