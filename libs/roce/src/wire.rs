//! RoCEv2 on the wire, as far as congestion control and go-back-N need it: the Base
//! Transport Header (InfiniBand Architecture Specification vol. 1, §9.2) behind UDP port
//! 4791 (annex A17), what a receiver sends back (the Congestion Notification Packet,
//! opcode 0x81 with 16 reserved bytes; the NAK of a PSN sequence error, an RC Acknowledge
//! whose AETH, §9.3.5, says so), and the invariant CRC that ends every RoCEv2 packet.
//!
//! Fields as named ranges with checked accessors over a byte slice ([`Bth`]), and whole
//! frames built by [`cnp_frame`] and [`nak_frame`]; nothing here allocates per frame
//! except the builders' output.

use std::net::Ipv4Addr;

/// The UDP destination port of RoCEv2.
pub const ROCEV2_PORT: u16 = 4791;
/// BTH opcode of a Congestion Notification Packet.
pub const OPCODE_CNP: u8 = 0x81;
/// BTH opcode of an RC SEND Only packet, which the traffic generator's RoCE data uses.
pub const OPCODE_RC_SEND_ONLY: u8 = 0x04;
/// BTH opcode of an RC Acknowledge, which carries an AETH: an ACK or a NAK.
pub const OPCODE_RC_ACKNOWLEDGE: u8 = 0x11;
/// The AETH syndrome of a NAK for a PSN sequence error: bits 6-5 `11` (NAK), code 0.
pub const AETH_NAK_PSN_SEQUENCE_ERROR: u8 = 0x60;
/// Bytes of an AETH: the syndrome, then a 24-bit message sequence number.
pub const AETH_LEN: usize = 4;
/// The default partition key (full membership).
pub const DEFAULT_PKEY: u16 = 0xffff;
/// The DSCP CNPs are sent with by default, as common RoCE setups configure (CS6).
pub const DEFAULT_CNP_DSCP: u8 = 48;
/// Bytes of a BTH, of a CNP's reserved payload, and of the ICRC.
pub const BTH_LEN: usize = 12;
pub const CNP_PAYLOAD_LEN: usize = 16;
pub const ICRC_LEN: usize = 4;

mod field {
    use std::ops::Range;
    pub const OPCODE: usize = 0;
    /// Solicited event, migration request, pad count, transport header version.
    pub const FLAGS: usize = 1;
    pub const PKEY: Range<usize> = 2..4;
    /// Reserved in InfiniBand; in RoCEv2 its top bits are FECN and BECN.
    pub const RESV8A: usize = 4;
    pub const DEST_QP: Range<usize> = 5..8;
    /// Acknowledge request in the top bit, then seven reserved bits.
    pub const ACK_REQ: usize = 8;
    pub const PSN: Range<usize> = 9..12;
}

/// A Base Transport Header over a byte slice.
#[derive(Clone, Copy, Debug)]
pub struct Bth<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Bth<T> {
    /// The header at the start of `buf`, if `buf` holds one.
    pub fn new_checked(buf: T) -> Option<Bth<T>> {
        (buf.as_ref().len() >= BTH_LEN).then_some(Bth { buf })
    }

    pub fn opcode(&self) -> u8 {
        self.buf.as_ref()[field::OPCODE]
    }

    pub fn pkey(&self) -> u16 {
        let b = &self.buf.as_ref()[field::PKEY];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The destination queue pair, 24 bits.
    pub fn dest_qp(&self) -> u32 {
        let b = &self.buf.as_ref()[field::DEST_QP];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    /// The packet sequence number, 24 bits.
    pub fn psn(&self) -> u32 {
        let b = &self.buf.as_ref()[field::PSN];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    /// Writes a whole header: `opcode`, the default partition key, transport version 0,
    /// `dest_qp` and `psn` (both taken modulo 2^24).
    pub fn emit(&mut self, opcode: u8, dest_qp: u32, psn: u32) {
        let b = self.buf.as_mut();
        b[field::OPCODE] = opcode;
        b[field::FLAGS] = 0;
        b[field::PKEY].copy_from_slice(&DEFAULT_PKEY.to_be_bytes());
        b[field::RESV8A] = 0;
        b[field::DEST_QP].copy_from_slice(&dest_qp.to_be_bytes()[1..]);
        b[field::ACK_REQ] = 0;
        self.set_psn(psn);
    }

    /// Sets the packet sequence number (taken modulo 2^24).
    pub fn set_psn(&mut self, psn: u32) {
        self.buf.as_mut()[field::PSN].copy_from_slice(&psn.to_be_bytes()[1..]);
    }
}

/// Where a frame's RoCEv2 parts are: the IPv4 header's offset, and the BTH's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceAt {
    pub ip: usize,
    pub bth: usize,
}

/// The RoCEv2 packet in an Ethernet frame (untagged or behind one 802.1Q tag), IPv4 and
/// UDP port 4791, with room for a BTH; `None` for any other frame.
pub fn locate(frame: &[u8]) -> Option<RoceAt> {
    let mut ip = 14;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        ip = 18;
    }
    let ihl = usize::from(frame.get(ip)? & 0x0f) * 4;
    if ethertype != 0x0800 || frame[ip] >> 4 != 4 || ihl < 20 || *frame.get(ip + 9)? != 17 {
        return None;
    }
    let udp = ip + ihl;
    let dport = u16::from_be_bytes([*frame.get(udp + 2)?, *frame.get(udp + 3)?]);
    let bth = udp + 8;
    (dport == ROCEV2_PORT && frame.len() >= bth + BTH_LEN).then_some(RoceAt { ip, bth })
}

/// The invariant CRC of the RoCEv2 packet whose IPv4 header starts at `ip` and which
/// ends `end` bytes into `frame` (before the ICRC): CRC-32 over eight bytes of ones in
/// place of an InfiniBand LRH, then the packet with the fields routers may change masked
/// to ones (the IPv4 TOS, TTL and header checksum, the UDP checksum, the BTH's reserved
/// byte), as soft-RoCE computes it; sent least significant byte first.
pub fn icrc(frame: &[u8], ip: usize, end: usize) -> [u8; ICRC_LEN] {
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xff; 8]);
    let ihl = usize::from(frame[ip] & 0x0f) * 4;
    let mut iph = [0u8; 60];
    iph[..ihl].copy_from_slice(&frame[ip..ip + ihl]);
    iph[1] = 0xff;
    iph[8] = 0xff;
    iph[10] = 0xff;
    iph[11] = 0xff;
    h.update(&iph[..ihl]);
    let udp = ip + ihl;
    let mut udph = [0u8; 8];
    udph.copy_from_slice(&frame[udp..udp + 8]);
    udph[6] = 0xff;
    udph[7] = 0xff;
    h.update(&udph);
    let bth = udp + 8;
    let mut bthb = [0u8; BTH_LEN];
    bthb.copy_from_slice(&frame[bth..bth + BTH_LEN]);
    bthb[field::RESV8A] = 0xff;
    h.update(&bthb);
    h.update(&frame[bth + BTH_LEN..end]);
    h.finalize().to_le_bytes()
}

/// The queue pair a test flow's frames name: its id above 0x10000 (a 24-bit number that
/// is never 0 or 1, which InfiniBand reserves). The sender's and the CNPs' are the same:
/// a CNP names the flow it slows.
pub fn flow_qp(flow: u16) -> u32 {
    0x01_0000 | u32::from(flow)
}

/// The UDP source port of a test flow's frames and of the CNPs that answer them (RoCEv2
/// uses the source port for entropy): one per flow, within the dynamic range.
pub fn flow_src_port(flow: u16) -> u16 {
    49152 + (flow & 0x3fff)
}

/// The test flow a queue pair number names, if it names one.
pub fn qp_flow(qp: u32) -> Option<u16> {
    (qp >> 16 == 1).then_some(qp as u16)
}

/// The addresses and labels of what the receiver of a flow sends back to its sender (a
/// CNP, a NAK).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplySpec {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// The queue pair at the sender the CNP is for.
    pub dest_qp: u32,
    /// Its DSCP (and so, through the switches' DSCP maps, its priority).
    pub dscp: u8,
    /// The UDP source port (RoCEv2 uses it for entropy).
    pub src_port: u16,
}

impl ReplySpec {
    /// The CNP a receiver (`mac`, `ip`) sends for test flow `flow` back to its sender
    /// (`to_mac`, `to_ip`): for the flow's queue pair, on `dscp`, from a UDP port the flow's
    /// id sets (RoCEv2 uses it for entropy).
    pub fn for_flow(
        flow: u16,
        (mac, ip): ([u8; 6], Ipv4Addr),
        (to_mac, to_ip): ([u8; 6], Ipv4Addr),
        dscp: u8,
    ) -> ReplySpec {
        ReplySpec {
            src_mac: mac,
            dst_mac: to_mac,
            src_ip: ip,
            dst_ip: to_ip,
            dest_qp: flow_qp(flow),
            dscp,
            src_port: flow_src_port(flow),
        }
    }
}

/// A whole CNP frame (without the Ethernet FCS, which the NIC adds): Ethernet, IPv4 (not
/// ECN-capable, don't fragment), UDP to 4791 (checksum 0, as RoCEv2 allows), BTH with
/// opcode CNP and PSN 0, 16 reserved bytes, ICRC: 74 bytes, above Ethernet's minimum.
pub fn cnp_frame(spec: &ReplySpec) -> Vec<u8> {
    reply_frame(spec, OPCODE_CNP, 0, &[0; CNP_PAYLOAD_LEN])
}

/// A whole NAK frame for a PSN sequence error: the receiver expects `psn` next (and
/// drops what comes after it until it arrives), so the sender goes back to it. As a CNP,
/// with an RC Acknowledge's BTH (PSN `psn`) and an AETH (the NAK's syndrome, message
/// sequence number 0) for the payload: 62 bytes.
pub fn nak_frame(spec: &ReplySpec, psn: u32) -> Vec<u8> {
    reply_frame(spec, OPCODE_RC_ACKNOWLEDGE, psn, &[AETH_NAK_PSN_SEQUENCE_ERROR, 0, 0, 0])
}

/// A frame from a flow's receiver back to its sender: headers as [`cnp_frame`] says,
/// a BTH of `opcode` and `psn`, then `payload` and the ICRC.
fn reply_frame(spec: &ReplySpec, opcode: u8, psn: u32, payload: &[u8]) -> Vec<u8> {
    let udp_len = 8 + BTH_LEN + payload.len() + ICRC_LEN;
    let ip_len = 20 + udp_len;
    let mut f = vec![0u8; 14 + ip_len];
    f[0..6].copy_from_slice(&spec.dst_mac);
    f[6..12].copy_from_slice(&spec.src_mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = 14;
    f[ip] = 0x45;
    f[ip + 1] = spec.dscp << 2;
    f[ip + 2..ip + 4].copy_from_slice(&(ip_len as u16).to_be_bytes());
    f[ip + 6] = 0x40;
    f[ip + 8] = 64;
    f[ip + 9] = 17;
    f[ip + 12..ip + 16].copy_from_slice(&spec.src_ip.octets());
    f[ip + 16..ip + 20].copy_from_slice(&spec.dst_ip.octets());
    let sum = ipv4_checksum(&f[ip..ip + 20]);
    f[ip + 10..ip + 12].copy_from_slice(&sum.to_be_bytes());
    let udp = ip + 20;
    f[udp..udp + 2].copy_from_slice(&spec.src_port.to_be_bytes());
    f[udp + 2..udp + 4].copy_from_slice(&ROCEV2_PORT.to_be_bytes());
    f[udp + 4..udp + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    let bth = udp + 8;
    Bth { buf: &mut f[bth..bth + BTH_LEN] }.emit(opcode, spec.dest_qp, psn);
    f[bth + BTH_LEN..bth + BTH_LEN + payload.len()].copy_from_slice(payload);
    let end = f.len() - ICRC_LEN;
    let crc = icrc(&f, ip, end);
    f[end..].copy_from_slice(&crc);
    f
}

/// The queue pair a frame that is a RoCEv2 CNP is for; `None` for any other frame.
pub fn cnp_dest_qp(frame: &[u8]) -> Option<u32> {
    let at = locate(frame)?;
    let bth = Bth::new_checked(&frame[at.bth..])?;
    (bth.opcode() == OPCODE_CNP).then(|| bth.dest_qp())
}

/// The queue pair and the expected PSN of a frame that is a RoCEv2 NAK for a PSN
/// sequence error; `None` for any other frame (an ACK, another NAK, a CNP, data).
pub fn nak_psn(frame: &[u8]) -> Option<(u32, u32)> {
    let at = locate(frame)?;
    let bth = Bth::new_checked(&frame[at.bth..])?;
    let syndrome = *frame.get(at.bth + BTH_LEN)?;
    (bth.opcode() == OPCODE_RC_ACKNOWLEDGE
        && syndrome == AETH_NAK_PSN_SEQUENCE_ERROR
        && frame.len() >= at.bth + BTH_LEN + AETH_LEN)
        .then(|| (bth.dest_qp(), bth.psn()))
}

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header.chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ReplySpec {
        ReplySpec {
            src_mac: [2, 0, 0, 0, 0, 3],
            dst_mac: [2, 0, 0, 0, 0, 1],
            src_ip: Ipv4Addr::new(10, 0, 0, 3),
            dst_ip: Ipv4Addr::new(10, 0, 0, 1),
            dest_qp: 0x01_0007,
            dscp: DEFAULT_CNP_DSCP,
            src_port: 0xc007,
        }
    }

    #[test]
    fn a_cnp_reads_back_as_one_for_its_queue_pair_with_valid_lengths_and_checksum() {
        let f = cnp_frame(&spec());
        assert_eq!(f.len(), 14 + 20 + 8 + 12 + 16 + 4);
        assert_eq!(cnp_dest_qp(&f), Some(0x01_0007));
        assert_eq!(ipv4_checksum(&f[14..34]), 0, "a header with its checksum sums to zero");
        assert_eq!((f[15] >> 2, f[15] & 3), (48, 0), "DSCP 48, not ECN-capable");
        let bth = Bth::new_checked(&f[42..]).unwrap();
        assert_eq!((bth.opcode(), bth.pkey(), bth.psn()), (OPCODE_CNP, DEFAULT_PKEY, 0));
        assert_eq!(&f[54..70], &[0u8; 16]);
    }

    #[test]
    fn the_icrc_ignores_the_fields_routers_change_and_catches_any_other() {
        let f = cnp_frame(&spec());
        let end = f.len() - ICRC_LEN;
        let mut routed = f.clone();
        routed[15] = 48 << 2 | 3; // marked CE on the way
        routed[22] = 61; // three hops
        routed[24] ^= 0x5a; // the checksum that follows
        assert_eq!(icrc(&routed, 14, end), f[end..]);
        let mut corrupt = f.clone();
        corrupt[50] ^= 1; // the queue pair
        assert_ne!(icrc(&corrupt, 14, end), f[end..]);
    }

    #[test]
    fn a_nak_reads_back_with_its_queue_pair_and_psn_and_nothing_else_reads_as_one() {
        let f = nak_frame(&spec(), 0x12_3456);
        assert_eq!(f.len(), 14 + 20 + 8 + 12 + 4 + 4);
        assert_eq!(nak_psn(&f), Some((0x01_0007, 0x12_3456)));
        assert_eq!(cnp_dest_qp(&f), None);
        assert_eq!(nak_psn(&cnp_frame(&spec())), None);
        let end = f.len() - ICRC_LEN;
        assert_eq!(icrc(&f, 14, end), f[end..], "its ICRC covers the AETH");
        let mut ack = f.clone();
        ack[54] = 0; // syndrome 0: an ACK
        assert_eq!(nak_psn(&ack), None);
        assert_eq!(nak_psn(&f[..54]), None, "cut before its AETH");
    }

    #[test]
    fn other_frames_are_not_cnps() {
        let mut f = cnp_frame(&spec());
        f[42] = OPCODE_RC_SEND_ONLY;
        assert_eq!(cnp_dest_qp(&f), None, "RoCE data");
        let mut udp = cnp_frame(&spec());
        udp[36..38].copy_from_slice(&9000u16.to_be_bytes());
        assert_eq!(cnp_dest_qp(&udp), None, "another UDP port");
        assert_eq!(cnp_dest_qp(&f[..40]), None, "truncated");
    }
}
