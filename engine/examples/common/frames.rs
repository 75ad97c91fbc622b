//! Frames for the examples, as hosts' stacks would send them.

use pfcswitch_core::MacAddr;

/// A UDP datagram from `src` to `dst` marked with `dscp` (by default DSCP 3 is priority
/// 3, lossless; DSCP 0 is priority 0, lossy), with `payload` zero bytes.
pub fn udp(src: MacAddr, dst: MacAddr, dscp: u8, payload: usize) -> Vec<u8> {
    let mut ip =
        etherparse::Ipv4Header::new(0, 64, etherparse::IpNumber::UDP, [10, 0, 0, src.0[5]], [10, 0, 0, dst.0[5]])
            .expect("a valid IPv4 header");
    ip.dscp = etherparse::Ipv4Dscp::try_new(dscp).expect("DSCP is 0..63");
    let builder = etherparse::PacketBuilder::ethernet2(src.0, dst.0)
        .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        .udp(4000, 4000);
    let mut frame = Vec::with_capacity(builder.size(payload));
    builder.write(&mut frame, &vec![0u8; payload]).expect("a frame into a Vec");
    frame
}
