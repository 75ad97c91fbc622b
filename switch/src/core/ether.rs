//! The few Ethernet header fields a switch decides on.

use etherparse::{EtherType, Ethernet2HeaderSlice, LaxIpSlice, SingleVlanHeaderSlice};

use super::mac::MacAddr;

pub const ETH_HEADER_LEN: usize = 14;
pub const VLAN_TAG_LEN: usize = 4;

/// What the forwarding and classification logic needs from a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// The EtherType in the Ethernet header itself (a TPID when tagged).
    pub ethertype: u16,
    /// PCP of the outermost VLAN tag, when tagged.
    pub pcp: Option<u8>,
    /// DSCP of an IPv4/IPv6 header directly behind the Ethernet header (untagged only).
    pub dscp: Option<u8>,
}

/// Parses the header of `frame`; `None` for a runt shorter than an Ethernet header.
///
/// Never fails on the payload: a frame whose IP header does not parse is still switched,
/// only without a DSCP.
pub fn parse_header(frame: &[u8]) -> Option<FrameHeader> {
    let eth = Ethernet2HeaderSlice::from_slice(frame).ok()?;
    let ethertype = eth.ether_type();
    let rest = &frame[ETH_HEADER_LEN..];
    let (pcp, dscp) = match ethertype {
        EtherType::VLAN_TAGGED_FRAME | EtherType::PROVIDER_BRIDGING | EtherType::VLAN_DOUBLE_TAGGED_FRAME => {
            let pcp = SingleVlanHeaderSlice::from_slice(rest).ok().map(|v| v.priority_code_point().value());
            (pcp, None)
        }
        EtherType::IPV4 | EtherType::IPV6 => (None, ip_dscp(rest)),
        _ => (None, None),
    };
    Some(FrameHeader { dst: MacAddr(eth.destination()), src: MacAddr(eth.source()), ethertype: ethertype.0, pcp, dscp })
}

fn ip_dscp(ip: &[u8]) -> Option<u8> {
    // Lax: a wrong total length must not change the frame's priority.
    match LaxIpSlice::from_slice(ip).ok()?.0 {
        LaxIpSlice::Ipv4(v4) => Some(v4.header().dcp().value()),
        LaxIpSlice::Ipv6(v6) => Some(v6.header().traffic_class() >> 2),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    pub(crate) fn udp_frame(src: MacAddr, dst: MacAddr, dscp: u8, vlan: Option<(u16, u8)>, payload: &[u8]) -> Vec<u8> {
        let mut ip =
            etherparse::Ipv4Header::new(0, 64, etherparse::IpNumber::UDP, [10, 0, 0, 1], [10, 0, 0, 2]).unwrap();
        ip.dscp = etherparse::Ipv4Dscp::try_new(dscp).unwrap();
        let eth = PacketBuilder::ethernet2(src.0, dst.0);
        let mut out = Vec::new();
        match vlan {
            Some((vid, pcp)) => {
                let tag = etherparse::SingleVlanHeader {
                    pcp: etherparse::VlanPcp::try_new(pcp).unwrap(),
                    drop_eligible_indicator: false,
                    vlan_id: etherparse::VlanId::try_new(vid).unwrap(),
                    ether_type: EtherType::IPV4,
                };
                eth.vlan(etherparse::VlanHeader::Single(tag))
                    .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
                    .udp(1000, 2000)
                    .write(&mut out, payload)
                    .unwrap();
            }
            None => eth
                .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
                .udp(1000, 2000)
                .write(&mut out, payload)
                .unwrap(),
        }
        out
    }

    #[test]
    fn reads_pcp_when_tagged_and_dscp_when_not() {
        let a = MacAddr::local(1);
        let b = MacAddr::local(2);
        let untagged = parse_header(&udp_frame(a, b, 26, None, b"x")).unwrap();
        assert_eq!((untagged.src, untagged.dst, untagged.pcp, untagged.dscp), (a, b, None, Some(26)));
        assert_eq!(untagged.ethertype, 0x0800);
        let tagged = parse_header(&udp_frame(a, b, 26, Some((100, 5)), b"x")).unwrap();
        assert_eq!((tagged.pcp, tagged.dscp, tagged.ethertype), (Some(5), None, 0x8100));
    }

    #[test]
    fn tolerates_broken_payloads() {
        assert_eq!(parse_header(&[0u8; 13]), None);
        let mut f = udp_frame(MacAddr::local(1), MacAddr::local(2), 4, None, b"");
        // A total length far beyond the frame still yields the DSCP.
        f[16] = 0xff;
        assert_eq!(parse_header(&f).unwrap().dscp, Some(4));
        // An IPv4 header with a bad IHL has no DSCP but still parses at L2.
        f[14] = 0x41;
        assert_eq!(parse_header(&f).unwrap().dscp, None);
        // Tagged, but the tag is cut off.
        let mut t = vec![0u8; 14];
        t[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_header(&t).unwrap().pcp, None);
    }
}
