//! Test frames: Ethernet (optionally VLAN-tagged) / IPv4 / UDP, with a stamp at the start
//! of the UDP payload that the sink reads back. A RoCEv2 test frame goes to UDP port 4791
//! and carries an InfiniBand BTH (RC Send Only to the flow's queue pair, its PSN the
//! frame's sequence) before the stamp and the invariant CRC after the payload, as a RoCE
//! NIC's would.
//!
//! Stamp (12 bytes, fits a tagged 64-byte frame):
//! ```text
//! 0  magic "PS" (0x5053)   2  flow id (u16)   4  sequence (u32)   8  tx time, ns (u32, wraps)
//! ```

use std::net::Ipv4Addr;

use etherparse::{
    EtherType, IpHeaders, IpNumber, Ipv4Dscp, Ipv4Ecn, Ipv4Header, PacketBuilder, SingleVlanHeader, SlicedPacket,
    VlanHeader, VlanId, VlanPcp,
};
use pfcswitch_core::mac::MacAddr;
use serde::{Deserialize, Serialize};

pub const STAMP_MAGIC: u16 = 0x5053;
pub const STAMP_LEN: usize = 12;
/// UDP destination port of test frames.
pub const UDP_PORT: u16 = 7123;
/// Smallest and largest frame sizes, counted on the wire with the FCS (RFC 2544 style).
pub const MIN_WIRE_SIZE: usize = 64;
pub const MAX_WIRE_SIZE: usize = 9216;
pub const FCS_LEN: usize = 4;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowSpec {
    pub id: u16,
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    /// 802.1Q tag: (VLAN id, PCP).
    pub vlan: Option<(u16, u8)>,
    pub dscp: u8,
    /// The ECN field of its IPv4 header (RFC 3168: 0 Not-ECT, 2 ECT(0), 1 ECT(1)).
    pub ecn: u8,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// Frame size on the wire including the FCS; the buffer handed to the NIC is 4 bytes shorter.
    pub wire_size: usize,
    /// A RoCEv2 frame: UDP to 4791, a BTH before the stamp, the invariant CRC at the end.
    #[serde(default)]
    pub roce: bool,
}

impl FlowSpec {
    /// Flow 7 of `wire_size`-byte frames from 10.0.0.1 to 10.0.0.2 between two locally
    /// administered MACs, DSCP 3, not ECN-capable, tagged as `vlan` says: what tests and
    /// examples start from, changing what they need.
    pub fn example(wire_size: usize, vlan: Option<(u16, u8)>) -> FlowSpec {
        FlowSpec {
            id: 7,
            src_mac: MacAddr::local(1),
            dst_mac: MacAddr::local(2),
            vlan,
            dscp: 3,
            ecn: 0,
            src_ip: Ipv4Addr::new(10, 0, 0, 1),
            dst_ip: Ipv4Addr::new(10, 0, 0, 2),
            wire_size,
            roce: false,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FlowError {
    #[error("frame size {size} B: {problem}")]
    Size { size: usize, problem: String },
    #[error("{0}")]
    Field(String),
}

/// A flow's frame, built once; sending stamps it.
#[derive(Clone, Debug)]
pub struct FlowTemplate {
    pub id: u16,
    bytes: Vec<u8>,
    stamp_at: usize,
    /// A RoCEv2 frame's IPv4 header and BTH offsets (its PSN and ICRC change per frame).
    roce: Option<roce::wire::RoceAt>,
    /// The PCP if tagged, else None (the switch's DSCP map decides).
    pub pcp: Option<u8>,
    pub dscp: u8,
}

impl FlowTemplate {
    pub fn build(spec: &FlowSpec) -> Result<FlowTemplate, FlowError> {
        let header_len = 14 + spec.vlan.map_or(0, |_| 4) + 20 + 8;
        // A RoCEv2 frame carries its BTH before the stamp and its ICRC after the payload.
        let (before_stamp, trailer) = if spec.roce { (roce::wire::BTH_LEN, roce::wire::ICRC_LEN) } else { (0, 0) };
        let min = header_len + before_stamp + STAMP_LEN + trailer + FCS_LEN;
        let size = spec.wire_size;
        if size < MIN_WIRE_SIZE.max(min) || size > MAX_WIRE_SIZE {
            return Err(FlowError::Size {
                size,
                problem: format!("must be {}..={MAX_WIRE_SIZE} (on the wire, FCS included)", MIN_WIRE_SIZE.max(min)),
            });
        }
        let payload_len = size - FCS_LEN - header_len;
        let mut ip = Ipv4Header::new(0, 64, IpNumber::UDP, spec.src_ip.octets(), spec.dst_ip.octets())
            .map_err(|e| FlowError::Field(e.to_string()))?;
        ip.dscp = Ipv4Dscp::try_new(spec.dscp).map_err(|e| FlowError::Field(format!("dscp: {e}")))?;
        ip.ecn = Ipv4Ecn::try_new(spec.ecn).map_err(|e| FlowError::Field(format!("ecn: {e}")))?;
        let eth = PacketBuilder::ethernet2(spec.src_mac.0, spec.dst_mac.0);
        let ip_headers = IpHeaders::Ipv4(ip, Default::default());
        let src_port = roce::wire::flow_src_port(spec.id);
        let dst_port = if spec.roce { roce::wire::ROCEV2_PORT } else { UDP_PORT };
        let payload = vec![0u8; payload_len];
        let mut bytes = Vec::with_capacity(size);
        let written = match spec.vlan {
            Some((vid, pcp)) => {
                let tag = SingleVlanHeader {
                    pcp: VlanPcp::try_new(pcp).map_err(|e| FlowError::Field(format!("pcp: {e}")))?,
                    drop_eligible_indicator: false,
                    vlan_id: VlanId::try_new(vid).map_err(|e| FlowError::Field(format!("vlan: {e}")))?,
                    ether_type: EtherType::IPV4,
                };
                eth.vlan(VlanHeader::Single(tag)).ip(ip_headers).udp(src_port, dst_port).write(&mut bytes, &payload)
            }
            None => eth.ip(ip_headers).udp(src_port, dst_port).write(&mut bytes, &payload),
        };
        written.map_err(|e| FlowError::Field(e.to_string()))?;
        debug_assert_eq!(bytes.len(), size - FCS_LEN);
        let roce = if spec.roce {
            let at = roce::wire::locate(&bytes).ok_or_else(|| FlowError::Field("not a RoCEv2 frame".into()))?;
            // RoCEv2 frames carry no UDP checksum (RFC-wise optional for IPv4; NICs send 0).
            bytes[at.bth - 2..at.bth].fill(0);
            let bth = &mut bytes[at.bth..at.bth + roce::wire::BTH_LEN];
            roce::wire::Bth::new_checked(bth).ok_or_else(|| FlowError::Field("no room for a BTH".into()))?.emit(
                roce::wire::OPCODE_RC_SEND_ONLY,
                roce::wire::flow_qp(spec.id),
                0,
            );
            Some(at)
        } else {
            None
        };
        Ok(FlowTemplate {
            id: spec.id,
            bytes,
            stamp_at: header_len + before_stamp,
            roce,
            pcp: spec.vlan.map(|v| v.1),
            dscp: spec.dscp,
        })
    }

    /// Bytes handed to the NIC per frame.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Bits a frame takes on the wire, FCS, preamble and gap included: what a rate in bits
    /// per second divides by to pace the flow.
    pub fn wire_bits(&self) -> f64 {
        8.0 * pfcswitch_core::speed::wire_bytes(self.bytes.len()) as f64
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Writes the whole frame into `buf`.
    pub fn write(&self, buf: &mut [u8], seq: u32, tx_ns: u32) {
        buf[..self.bytes.len()].copy_from_slice(&self.bytes);
        self.stamp(buf, seq, tx_ns);
        self.seal(buf);
    }

    /// Where a frame of this flow turns to zeros to its end: past its stamp, unless it is
    /// a RoCEv2 frame, whose invariant CRC ends it. What a holder of heads must keep.
    pub fn zeros_from(&self) -> Option<usize> {
        self.roce.is_none().then_some(self.stamp_at + STAMP_LEN)
    }

    /// Writes the first `head.len()` bytes of a frame (at least its headers and stamp):
    /// past its stamp, a test frame is zeros, so a holder of frames that keeps only their
    /// heads (the simulator) has the rest without storing it.
    pub fn write_head(&self, head: &mut [u8], seq: u32, tx_ns: u32) {
        let n = head.len().min(self.bytes.len());
        head[..n].copy_from_slice(&self.bytes[..n]);
        self.stamp(head, seq, tx_ns);
    }

    /// Rewrites only the headers and the stamp: the rest of a frame this template wrote
    /// before is unchanged, so re-sending a buffer costs a few dozen bytes of copying.
    /// A RoCEv2 frame's ICRC covers it all, so that is computed again (crc32fast, some
    /// 100 ns for 1500 bytes).
    pub fn rewrite(&self, buf: &mut [u8], seq: u32, tx_ns: u32) {
        buf[..self.stamp_at].copy_from_slice(&self.bytes[..self.stamp_at]);
        self.stamp(buf, seq, tx_ns);
        self.seal(buf);
    }

    /// A RoCEv2 frame's invariant CRC, over the whole frame in `buf`.
    fn seal(&self, buf: &mut [u8]) {
        if let Some(at) = self.roce {
            let end = self.bytes.len() - roce::wire::ICRC_LEN;
            let crc = roce::wire::icrc(&buf[..self.bytes.len()], at.ip, end);
            buf[end..self.bytes.len()].copy_from_slice(&crc);
        }
    }

    fn stamp(&self, buf: &mut [u8], seq: u32, tx_ns: u32) {
        if let Some(at) = self.roce {
            // The PSN counts the flow's frames, as a queue pair's do (24 bits, wrapping).
            if let Some(mut bth) = roce::wire::Bth::new_checked(&mut buf[at.bth..]) {
                bth.set_psn(seq);
            }
        }
        let s = &mut buf[self.stamp_at..self.stamp_at + STAMP_LEN];
        s[0..2].copy_from_slice(&STAMP_MAGIC.to_be_bytes());
        s[2..4].copy_from_slice(&self.id.to_be_bytes());
        s[4..8].copy_from_slice(&seq.to_be_bytes());
        s[8..12].copy_from_slice(&tx_ns.to_be_bytes());
    }
}

/// What a received test frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    pub flow: u16,
    pub seq: u32,
    pub tx_ns: u32,
    pub pcp: Option<u8>,
    pub vlan: Option<u16>,
    pub dscp: u8,
    /// Its ECN field (3: marked Congestion Experienced on the way).
    pub ecn: u8,
    /// The IPv4 header checksum is right (a switch that rewrote the DSCP kept it so).
    pub ip_checksum_ok: bool,
}

/// Reads the stamp of a test frame; `None` for any other frame.
pub fn read_stamp(frame: &[u8]) -> Option<Stamp> {
    read_stamp_in(frame, frame.len())
}

/// Reads the stamp of a `len`-byte test frame from its first `head` bytes (a jumbo
/// frame's first buffer: its headers and the stamp are all there, though its IP length
/// reaches beyond); `None` for any other frame.
pub fn read_stamp_in(head: &[u8], len: usize) -> Option<Stamp> {
    if head.len() >= len {
        let p = SlicedPacket::from_ethernet(head).ok()?;
        let Some(etherparse::NetSlice::Ipv4(v4)) = &p.net else { return None };
        stamp_of(&p.vlan, &v4.header(), &p.transport)
    } else {
        let p = etherparse::LaxSlicedPacket::from_ethernet(head).ok()?;
        let Some(etherparse::LaxNetSlice::Ipv4(v4)) = &p.net else { return None };
        stamp_of(&p.vlan, &v4.header(), &p.transport)
    }
}

fn stamp_of(
    vlan: &Option<etherparse::VlanSlice>,
    ip: &etherparse::Ipv4HeaderSlice,
    transport: &Option<etherparse::TransportSlice>,
) -> Option<Stamp> {
    let (dscp, ecn) = (ip.dcp().value(), ip.ecn().value());
    let ip_checksum_ok = ip.to_header().calc_header_checksum() == ip.header_checksum();
    // A RoCEv2 test frame's stamp follows its BTH.
    let s = match transport {
        Some(etherparse::TransportSlice::Udp(u)) if u.destination_port() == UDP_PORT => u.payload(),
        Some(etherparse::TransportSlice::Udp(u)) if u.destination_port() == roce::wire::ROCEV2_PORT => {
            u.payload().get(roce::wire::BTH_LEN..)?
        }
        _ => return None,
    };
    if s.len() < STAMP_LEN || u16::from_be_bytes([s[0], s[1]]) != STAMP_MAGIC {
        return None;
    }
    let outer = match vlan {
        Some(etherparse::VlanSlice::SingleVlan(v)) => Some(v.clone()),
        Some(etherparse::VlanSlice::DoubleVlan(v)) => Some(v.outer()),
        None => None,
    };
    let pcp = outer.as_ref().map(|v| v.priority_code_point().value());
    let vlan = outer.as_ref().map(|v| v.vlan_identifier().value());
    Some(Stamp {
        flow: u16::from_be_bytes([s[2], s[3]]),
        seq: u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
        tx_ns: u32::from_be_bytes([s[8], s[9], s[10], s[11]]),
        pcp,
        vlan,
        dscp,
        ecn,
        ip_checksum_ok,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(wire_size: usize, vlan: Option<(u16, u8)>) -> FlowSpec {
        FlowSpec::example(wire_size, vlan)
    }

    #[test]
    fn a_roce_frame_carries_a_bth_with_the_flows_qp_and_a_psn_per_frame_then_the_stamp_and_its_icrc() {
        for vlan in [None, Some((100, 3))] {
            let t = FlowTemplate::build(&FlowSpec { roce: true, ecn: 2, ..spec(1518, vlan) }).unwrap();
            assert_eq!(t.len(), 1514);
            let mut buf = vec![0u8; t.len()];
            t.write(&mut buf, 0x0123_4567, 99);
            let at = roce::wire::locate(&buf).expect("UDP 4791 with a BTH");
            let bth = roce::wire::Bth::new_checked(&buf[at.bth..]).unwrap();
            assert_eq!(bth.opcode(), roce::wire::OPCODE_RC_SEND_ONLY);
            assert_eq!(bth.dest_qp(), roce::wire::flow_qp(7));
            assert_eq!(bth.psn(), 0x23_4567, "the sequence's low 24 bits");
            let s = read_stamp(&buf).unwrap();
            assert_eq!((s.flow, s.seq, s.tx_ns, s.ecn), (7, 0x0123_4567, 99, 2));
            let end = buf.len() - 4;
            assert_eq!(buf[end..], roce::wire::icrc(&buf, at.ip, end));
            assert_eq!(t.zeros_from(), None, "the ICRC ends the frame");
            // Rewritten for the next frame: a new PSN and a new ICRC.
            t.rewrite(&mut buf, 8, 100);
            let bth = roce::wire::Bth::new_checked(&buf[at.bth..]).unwrap();
            assert_eq!(bth.psn(), 8);
            assert_eq!(buf[end..], roce::wire::icrc(&buf, at.ip, end));
            // Not a CNP: a sink does not take it for one.
            assert_eq!(roce::wire::cnp_dest_qp(&buf), None);
        }
        assert!(FlowTemplate::build(&FlowSpec { roce: true, ..spec(64, None) }).is_err(), "74 bytes at least");
        assert!(FlowTemplate::build(&FlowSpec { roce: true, ..spec(74, None) }).is_ok());
    }

    #[test]
    fn a_frames_head_is_the_whole_frames_start_and_the_rest_is_zeros() {
        for vlan in [None, Some((100, 5))] {
            let t = FlowTemplate::build(&spec(1518, vlan)).unwrap();
            let mut whole = vec![0xaa; t.len()];
            t.write(&mut whole, 41, 999);
            let mut head = [0xaa; 128];
            t.write_head(&mut head, 41, 999);
            assert_eq!(&whole[..128], &head[..]);
            let stamp_end = t.zeros_from().expect("not RoCEv2");
            assert_eq!(stamp_end, t.stamp_at + STAMP_LEN);
            assert!(whole[stamp_end..].iter().all(|&b| b == 0), "zeros past the stamp at {stamp_end}");
            assert_eq!(read_stamp_in(&head, t.len()).unwrap(), read_stamp(&whole).unwrap());
        }
    }

    #[test]
    fn frames_have_the_wire_size_minus_fcs_and_round_trip() {
        for (size, vlan) in [(64, None), (64, Some((100, 5))), (1500, None), (1518, Some((4094, 0)))] {
            let t = FlowTemplate::build(&spec(size, vlan)).unwrap();
            assert_eq!(t.len(), size - 4);
            let mut buf = vec![0u8; 2048];
            t.write(&mut buf, 41, 999);
            let s = read_stamp(&buf[..t.len()]).unwrap();
            assert_eq!((s.flow, s.seq, s.tx_ns, s.pcp, s.dscp), (7, 41, 999, vlan.map(|v| v.1), 3));
            assert_eq!(s.vlan, vlan.map(|v| v.0));
            t.rewrite(&mut buf, 42, 1000);
            assert_eq!(read_stamp(&buf[..t.len()]).unwrap().seq, 42);
            // The IPv4 header is valid: a kernel would accept it.
            let p = SlicedPacket::from_ethernet(&buf[..t.len()]).unwrap();
            assert!(matches!(p.net, Some(etherparse::NetSlice::Ipv4(_))));
        }
    }

    #[test]
    fn a_jumbo_frames_stamp_is_read_from_its_first_buffer_alone() {
        let t = FlowTemplate::build(&spec(9018, Some((100, 3)))).unwrap();
        let mut buf = vec![0u8; t.len()];
        t.write(&mut buf, 5, 77);
        assert_eq!(read_stamp_in(&buf[..3840], t.len()), read_stamp(&buf));
        assert_eq!(read_stamp_in(&buf[..3840], t.len()).map(|s| (s.flow, s.seq, s.pcp)), Some((7, 5, Some(3))));
        assert_eq!(read_stamp(&buf[..3840]), None, "a cut frame alone is not a test frame");
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        assert!(FlowTemplate::build(&spec(63, None)).is_err());
        assert!(FlowTemplate::build(&spec(9217, None)).is_err());
        let mut bad = spec(64, None);
        bad.dscp = 64;
        assert!(FlowTemplate::build(&bad).is_err());
    }

    #[test]
    fn other_frames_have_no_stamp() {
        assert_eq!(read_stamp(&[0u8; 60]), None);
        let t = FlowTemplate::build(&spec(64, None)).unwrap();
        let mut buf = vec![0u8; 60];
        t.write(&mut buf, 1, 1);
        buf[42] = 0; // magic
        assert_eq!(read_stamp(&buf), None);
    }
}
