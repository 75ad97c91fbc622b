//! The few Ethernet header fields a switch decides on.

use etherparse::{EtherType, Ethernet2HeaderSlice, LaxIpSlice, SingleVlanHeaderSlice};

use super::mac::MacAddr;
use super::priorities::Priority;

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
    pub pcp: Option<Priority>,
    /// DSCP of an IPv4/IPv6 header behind the Ethernet header and at most two VLAN tags.
    pub dscp: Option<u8>,
    /// The ECN field of that header (RFC 3168: 0 not ECN-capable, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: Option<u8>,
    /// Where that IP header is, for rewriting its DSCP in place.
    pub ip: Option<IpAt>,
}

/// The position and version of a frame's IP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpAt {
    pub offset: u16,
    pub v6: bool,
}

/// VLAN tags looked through to find an IP header (802.1Q, and 802.1ad Q-in-Q).
const MAX_VLAN_TAGS: usize = 2;

fn is_vlan_tpid(t: EtherType) -> bool {
    matches!(t, EtherType::VLAN_TAGGED_FRAME | EtherType::PROVIDER_BRIDGING | EtherType::VLAN_DOUBLE_TAGGED_FRAME)
}

/// Parses the header of `frame`; `None` for a runt shorter than an Ethernet header.
///
/// Never fails on the payload: a frame whose IP header does not parse is still switched,
/// only without a DSCP.
pub fn parse_header(frame: &[u8]) -> Option<FrameHeader> {
    let eth = Ethernet2HeaderSlice::from_slice(frame).ok()?;
    let ethertype = eth.ether_type();
    let mut pcp = None;
    let (mut inner, mut offset) = (ethertype, ETH_HEADER_LEN);
    for _ in 0..MAX_VLAN_TAGS {
        if !is_vlan_tpid(inner) {
            break;
        }
        let Ok(tag) = SingleVlanHeaderSlice::from_slice(&frame[offset..]) else { break };
        pcp.get_or_insert(Priority::from_pcp(tag.priority_code_point().value()));
        inner = tag.ether_type();
        offset += VLAN_TAG_LEN;
    }
    let ip = match inner {
        EtherType::IPV4 | EtherType::IPV6 if !is_vlan_tpid(inner) => {
            ip_tos(&frame[offset..]).map(|(tos, v6)| (tos, IpAt { offset: offset as u16, v6 }))
        }
        _ => None,
    };
    Some(FrameHeader {
        dst: MacAddr(eth.destination()),
        src: MacAddr(eth.source()),
        ethertype: ethertype.0,
        pcp,
        dscp: ip.map(|(tos, _)| tos >> 2),
        ecn: ip.map(|(tos, _)| tos & ECN_MASK),
        ip: ip.map(|(_, at)| at),
    })
}

/// The ECN field's bits in the TOS byte (traffic class), and its Congestion Experienced
/// codepoint (RFC 3168 §5).
pub const ECN_MASK: u8 = 0x03;
pub const ECN_CE: u8 = 0x03;

/// Whether an ECN field says ECN-capable: ECT(0), ECT(1), or already CE.
pub fn ecn_capable(ecn: u8) -> bool {
    ecn & ECN_MASK != 0
}

/// The TOS byte (IPv4) or traffic class (IPv6), and whether it is IPv6.
fn ip_tos(ip: &[u8]) -> Option<(u8, bool)> {
    // Lax: a wrong total length must not change the frame's priority.
    match LaxIpSlice::from_slice(ip).ok()?.0 {
        LaxIpSlice::Ipv4(v4) => {
            let h = v4.header();
            Some((h.dcp().value() << 2 | h.ecn().value(), false))
        }
        LaxIpSlice::Ipv6(v6) => Some((v6.header().traffic_class(), true)),
    }
}

/// Sets the DSCP of the IP header at `at` to `dscp` (0..63), keeping the ECN bits.
/// Returns whether the frame changed (see [`set_tos`]).
pub fn set_dscp(frame: &mut [u8], at: IpAt, dscp: u8) -> bool {
    set_tos(frame, at, |tos| dscp << 2 | (tos & ECN_MASK))
}

/// Marks the IP header at `at` Congestion Experienced, keeping the DSCP; the caller has
/// seen that it is ECN-capable. Returns whether the frame changed (a frame already CE does
/// not).
pub fn set_ce(frame: &mut [u8], at: IpAt) -> bool {
    set_tos(frame, at, |tos| tos | ECN_CE)
}

/// Rewrites the TOS byte (IPv4) or traffic class (IPv6) of the IP header at `at` to
/// `new(old)`: the one place both DSCP and ECN are written.
///
/// IPv4 (RFC 791 §3.1): the TOS byte is byte 1, the header checksum bytes 10–11; the
/// checksum is updated incrementally (RFC 1624 eqn. 3, HC' = ~(~HC + ~m + m')) over the
/// 16-bit word holding version/IHL and TOS, so options and the rest of the header are
/// never re-read. IPv6 (RFC 8200 §3): the traffic class spans the low nibble of byte 0
/// and the high nibble of byte 1; there is no header checksum. Returns whether the frame
/// changed; does nothing if the header does not fit in `frame`.
fn set_tos(frame: &mut [u8], at: IpAt, new: impl FnOnce(u8) -> u8) -> bool {
    let o = usize::from(at.offset);
    if at.v6 {
        let Some(h) = frame.get_mut(o..o + 2) else { return false };
        let tc = (h[0] & 0x0f) << 4 | h[1] >> 4;
        let next = new(tc);
        if next == tc {
            return false;
        }
        h[0] = (h[0] & 0xf0) | next >> 4;
        h[1] = (h[1] & 0x0f) | (next & 0x0f) << 4;
        return true;
    }
    let Some(h) = frame.get_mut(o..o + 12) else { return false };
    let next = new(h[1]);
    if next == h[1] {
        return false;
    }
    let old_word = u16::from_be_bytes([h[0], h[1]]);
    h[1] = next;
    let new_word = u16::from_be_bytes([h[0], h[1]]);
    let hc = u16::from_be_bytes([h[10], h[11]]);
    let sum = u32::from(!hc) + u32::from(!old_word) + u32::from(new_word);
    let folded = (sum & 0xffff) + (sum >> 16);
    let folded = (folded & 0xffff) + (folded >> 16);
    h[10..12].copy_from_slice(&(!(folded as u16)).to_be_bytes());
    true
}

/// Sets the PCP of the outermost VLAN tag (IEEE 802.1Q §9.6: the top three bits of the
/// TCI, right behind the TPID). The caller knows the frame is tagged.
pub fn set_pcp(frame: &mut [u8], pcp: Priority) {
    if let Some(tci) = frame.get_mut(ETH_HEADER_LEN) {
        *tci = (*tci & 0x1f) | pcp.get() << 5;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::priorities::names::*;
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
    fn reads_pcp_when_tagged_and_dscp_behind_the_tags() {
        let a = MacAddr::local(1);
        let b = MacAddr::local(2);
        let untagged = parse_header(&udp_frame(a, b, 26, None, b"x")).unwrap();
        assert_eq!((untagged.src, untagged.dst, untagged.pcp, untagged.dscp), (a, b, None, Some(26)));
        assert_eq!(untagged.ethertype, 0x0800);
        assert_eq!(untagged.ip, Some(IpAt { offset: 14, v6: false }));
        let tagged = parse_header(&udp_frame(a, b, 26, Some((100, 5)), b"x")).unwrap();
        assert_eq!((tagged.pcp, tagged.dscp, tagged.ethertype), (Some(P5), Some(26), 0x8100));
        assert_eq!(tagged.ip, Some(IpAt { offset: 18, v6: false }));
        // Q-in-Q: the outer tag's PCP, the IP header behind both tags.
        let mut qinq = udp_frame(a, b, 26, Some((100, 5)), b"x");
        qinq.splice(12..12, [0x88, 0xa8, 0x40, 0x07]);
        let h = parse_header(&qinq).unwrap();
        assert_eq!((h.pcp, h.dscp, h.ip), (Some(P2), Some(26), Some(IpAt { offset: 22, v6: false })));
        // ARP behind a tag has no DSCP.
        let mut arp = udp_frame(a, b, 26, Some((100, 5)), b"x");
        arp[16..18].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse_header(&arp).unwrap().ip, None);
    }

    fn ipv4_checksum_ok(frame: &[u8], at: IpAt) -> bool {
        let h = etherparse::Ipv4HeaderSlice::from_slice(&frame[usize::from(at.offset)..]).unwrap().to_header();
        h.header_checksum == h.calc_header_checksum()
    }

    #[test]
    fn set_dscp_keeps_ecn_and_the_ipv4_checksum_valid() {
        let mut f = udp_frame(MacAddr::local(1), MacAddr::local(2), 2, None, b"payload");
        f[15] |= 0x03; // ECN CE, with the checksum to match
        let mut ip = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap().to_header();
        ip.header_checksum = ip.calc_header_checksum();
        f[24..26].copy_from_slice(&ip.header_checksum.to_be_bytes());
        let at = parse_header(&f).unwrap().ip.unwrap();
        assert!(set_dscp(&mut f, at, 1));
        assert_eq!(f[15], 1 << 2 | 0x03);
        assert!(ipv4_checksum_ok(&f, at));
        assert_eq!(parse_header(&f).unwrap().dscp, Some(1));
        assert!(!set_dscp(&mut f, at, 1), "the same DSCP changes nothing");
    }

    /// An untagged IPv6/UDP frame with traffic class `tc` and flow label 0xabcde.
    fn ipv6_udp(tc: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let mut ip = etherparse::Ipv6Header {
            traffic_class: tc,
            flow_label: etherparse::Ipv6FlowLabel::try_new(0xabcde).unwrap(),
            hop_limit: 64,
            ..Default::default()
        };
        ip.next_header = etherparse::IpNumber::UDP;
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ip(etherparse::IpHeaders::Ipv6(ip, Default::default()))
            .udp(1, 2)
            .write(&mut out, b"x")
            .unwrap();
        out
    }

    #[test]
    fn set_dscp_on_ipv6_rewrites_the_traffic_class_only() {
        let mut out = ipv6_udp(2 << 2 | 1);
        let h = parse_header(&out).unwrap();
        assert_eq!((h.dscp, h.ip), (Some(2), Some(IpAt { offset: 14, v6: true })));
        assert!(set_dscp(&mut out, h.ip.unwrap(), 45));
        let v6 = etherparse::Ipv6HeaderSlice::from_slice(&out[14..]).unwrap();
        assert_eq!(v6.traffic_class(), 45 << 2 | 1);
        assert_eq!(v6.flow_label().value(), 0xabcde);
        assert_eq!(v6.version(), 6);
    }

    #[test]
    fn set_ce_marks_ipv4_behind_two_tags_keeping_dscp_and_a_valid_checksum() {
        for ect in [0x01, 0x02] {
            let mut f = udp_frame(MacAddr::local(1), MacAddr::local(2), 26, Some((100, 5)), b"payload");
            f.splice(12..12, [0x88, 0xa8, 0x40, 0x07]);
            let at = parse_header(&f).unwrap().ip.unwrap();
            let o = usize::from(at.offset);
            f[o + 1] |= ect;
            let mut ip = etherparse::Ipv4HeaderSlice::from_slice(&f[o..]).unwrap().to_header();
            ip.header_checksum = ip.calc_header_checksum();
            f[o + 10..o + 12].copy_from_slice(&ip.header_checksum.to_be_bytes());
            let h = parse_header(&f).unwrap();
            assert!(h.ecn.is_some_and(ecn_capable), "ECT({}) is capable", 2 - ect);
            assert!(set_ce(&mut f, at));
            let h = parse_header(&f).unwrap();
            assert_eq!((h.dscp, h.ecn), (Some(26), Some(ECN_CE)));
            assert!(ipv4_checksum_ok(&f, at));
            assert!(!set_ce(&mut f, at), "a CE frame stays as it is");
        }
        let plain = parse_header(&udp_frame(MacAddr::local(1), MacAddr::local(2), 26, None, b"x")).unwrap();
        assert!(!plain.ecn.is_some_and(ecn_capable), "Not-ECT is not capable");
    }

    #[test]
    fn set_ce_on_ipv6_sets_the_traffic_class_ecn_bits_only() {
        let mut out = ipv6_udp(46 << 2 | 0x02);
        let h = parse_header(&out).unwrap();
        assert_eq!(h.ecn, Some(0x02));
        assert!(set_ce(&mut out, h.ip.unwrap()));
        let v6 = etherparse::Ipv6HeaderSlice::from_slice(&out[14..]).unwrap();
        assert_eq!((v6.traffic_class(), v6.flow_label().value()), (46 << 2 | ECN_CE, 0xabcde));
    }

    #[test]
    fn set_pcp_rewrites_the_outer_tag_only() {
        let mut f = udp_frame(MacAddr::local(1), MacAddr::local(2), 0, Some((0xabc, 3)), b"x");
        f[14] |= 0x10; // DEI
        set_pcp(&mut f, P4);
        let tag = SingleVlanHeaderSlice::from_slice(&f[14..]).unwrap();
        assert_eq!(tag.priority_code_point().value(), 4);
        assert!(tag.drop_eligible_indicator());
        assert_eq!(tag.vlan_identifier().value(), 0xabc);
    }

    proptest::proptest! {
        /// The incremental update gives the checksum a from-scratch computation gives, for
        /// any header (options, flags, addresses, TTL) and any old and new DSCP and ECN.
        #[test]
        fn incremental_checksum_matches_a_fresh_one(
            dscp in 0u8..64, ecn in 0u8..4, new_dscp in 0u8..64, ttl: u8, id: u16,
            src: [u8; 4], dst: [u8; 4], options in proptest::collection::vec(proptest::num::u8::ANY, 0..=10),
            len in 0usize..1400, df: bool,
        ) {
            let mut ip = etherparse::Ipv4Header::new(len as u16, ttl, etherparse::IpNumber::UDP, src, dst).unwrap();
            ip.dscp = etherparse::Ipv4Dscp::try_new(dscp).unwrap();
            ip.ecn = etherparse::Ipv4Ecn::try_new(ecn).unwrap();
            ip.identification = id;
            ip.dont_fragment = df;
            let mut opt = options.clone();
            opt.resize(options.len().div_ceil(4) * 4, 0);
            ip.options = etherparse::Ipv4Options::try_from(&opt[..]).unwrap();
            ip.header_checksum = ip.calc_header_checksum();
            let mut f = vec![0u8; 14];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            ip.write(&mut f).unwrap();
            f.resize(f.len() + len, 0);
            let at = parse_header(&f).unwrap().ip.unwrap();
            set_dscp(&mut f, at, new_dscp);
            let back = etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap().to_header();
            proptest::prop_assert_eq!(back.dscp.value(), new_dscp);
            proptest::prop_assert_eq!(back.ecn.value(), ecn);
            proptest::prop_assert_eq!(back.header_checksum, back.calc_header_checksum());
        }
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
        // A header that claims more than the frame holds is left alone.
        let mut short = udp_frame(MacAddr::local(1), MacAddr::local(2), 4, None, b"");
        assert!(!set_dscp(&mut short, IpAt { offset: 60, v6: false }, 1));
        assert!(!set_dscp(&mut short, IpAt { offset: 60, v6: true }, 1));
    }
}
