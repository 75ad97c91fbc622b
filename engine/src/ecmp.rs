//! Equal-cost multipath: which member of a group of egress ports a frame leaves by, chosen
//! per flow by a hash of its flow key, as a switch's ECMP or LAG does. Every frame of a
//! flow takes the same member (no reordering), and different flows spread.
//!
//! The flow key is the IPv4/IPv6 5-tuple (addresses, protocol, and TCP/UDP ports where the
//! frame is not a later fragment), else the MAC addresses and the priority. The hash is
//! this module's own rather than a crate's: it must be the same on every machine (the
//! simulator's reports are byte-identical across runs and hosts; aHash changes with the
//! CPU's AES support, std's SipHash is not promised across releases), and each switch's
//! seed must give an unrelated choice. A CRC with the seed as its initial value (what many
//! switch ASICs offer) only XORs a constant into the result for keys of one length, so
//! every tier of a fabric would split flows the same way (hash polarization): a fat-tree
//! whose edge and aggregation switches agree uses one core switch in k/2.

use crate::ether::{FrameHeader, IpAt};
use crate::priorities::Priority;

/// The longest key: version, protocol, two IPv6 addresses, two ports.
const KEY_LEN: usize = 2 + 16 + 16 + 4;

const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// What identifies a frame's flow for ECMP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    bytes: [u8; KEY_LEN],
    len: u8,
}

impl FlowKey {
    /// An IPv4 flow: addresses, protocol, ports (0 where it has none).
    pub fn ipv4(src: [u8; 4], dst: [u8; 4], protocol: u8, ports: (u16, u16)) -> FlowKey {
        FlowKey::of_parts([4, protocol], &src, &dst, [ports.0.to_be_bytes(), ports.1.to_be_bytes()].as_flattened())
    }

    /// An IPv6 flow: addresses, next header, ports (0 where it has none).
    pub fn ipv6(src: [u8; 16], dst: [u8; 16], next_header: u8, ports: (u16, u16)) -> FlowKey {
        FlowKey::of_parts([6, next_header], &src, &dst, [ports.0.to_be_bytes(), ports.1.to_be_bytes()].as_flattened())
    }

    /// A frame without an IP header: its addresses and priority.
    pub fn ethernet(src: [u8; 6], dst: [u8; 6], prio: Priority) -> FlowKey {
        FlowKey::of_parts([0, prio.get()], &src, &dst, &[])
    }

    /// The key of a kind (IP version, or 0 for Ethernet) and what identifies its flow,
    /// one after the other.
    fn of_parts(kind: [u8; 2], src: &[u8], dst: &[u8], rest: &[u8]) -> FlowKey {
        let mut k = FlowKey { bytes: [0; KEY_LEN], len: 0 };
        for part in [&kind[..], src, dst, rest] {
            let at = usize::from(k.len);
            k.bytes[at..at + part.len()].copy_from_slice(part);
            k.len += part.len() as u8;
        }
        k
    }

    /// The key of `frame`, whose header is `h` and whose priority is `prio`. An IP header
    /// cut short by the frame's end falls back to the Ethernet key.
    pub fn of(frame: &[u8], h: &FrameHeader, prio: Priority) -> FlowKey {
        h.ip.and_then(|at| ip_key(frame, at)).unwrap_or_else(|| FlowKey::ethernet(h.src.0, h.dst.0, prio))
    }

    /// The key's hash under `seed`: the same on every machine.
    pub fn hash(&self, seed: u64) -> u64 {
        let mut h = mix(seed ^ 0x9e37_79b9_7f4a_7c15);
        for chunk in self.bytes[..usize::from(self.len)].chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            h = mix(h ^ u64::from_le_bytes(word));
        }
        h
    }
}

/// splitmix64's finalizer: every input bit changes about half the output bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn ip_key(frame: &[u8], at: IpAt) -> Option<FlowKey> {
    let ip = frame.get(usize::from(at.offset)..)?;
    let ports = |l4: &[u8], proto: u8| match (proto, l4.get(..4)) {
        (PROTO_TCP | PROTO_UDP, Some(p)) => (u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])),
        _ => (0, 0),
    };
    if at.v6 {
        let h = ip.get(..40)?;
        let (nh, src, dst) = (h[6], h[8..24].try_into().ok()?, h[24..40].try_into().ok()?);
        Some(FlowKey::ipv6(src, dst, nh, ports(&ip[40..], nh)))
    } else {
        let h = ip.get(..20)?;
        let ihl = usize::from(h[0] & 0x0f) * 4;
        let proto = h[9];
        // A later fragment has no ports: every fragment of a datagram then goes by its
        // addresses alone, so that none overtakes another.
        let fragmented = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
        let l4 = if fragmented || ihl < 20 { &[][..] } else { ip.get(ihl..).unwrap_or(&[]) };
        Some(FlowKey::ipv4(h[12..16].try_into().ok()?, h[16..20].try_into().ok()?, proto, ports(l4, proto)))
    }
}

/// Which of `n` members a hash picks: the high bits scaled to `n`, so that every bit of
/// the hash counts and members with a common factor of `n` are not favoured.
pub fn member(hash: u64, n: usize) -> usize {
    ((u128::from(hash) * n as u128) >> 64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ether::parse_header;

    fn udp_frame(src_port: u16) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = PROTO_UDP;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&src_port.to_be_bytes());
        f[36..38].copy_from_slice(&7123u16.to_be_bytes());
        f
    }

    fn key(f: &[u8]) -> FlowKey {
        FlowKey::of(f, &parse_header(f).unwrap(), Priority::new(0))
    }

    #[test]
    fn a_udp_frames_key_is_its_five_tuple_and_a_later_fragment_goes_by_its_addresses() {
        let f = udp_frame(4000);
        assert_eq!(key(&f), FlowKey::ipv4([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (4000, 7123)));
        let mut frag = f.clone();
        frag[14 + 6..14 + 8].copy_from_slice(&0x0010u16.to_be_bytes());
        assert_eq!(key(&frag), FlowKey::ipv4([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (0, 0)));
        let mut cut = f.clone();
        cut.truncate(30);
        let eth = FlowKey::ethernet([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], Priority::new(0));
        assert_eq!(key(&cut), eth, "an IP header cut short is keyed by the Ethernet header");
    }

    #[test]
    fn flows_spread_evenly_over_the_members_and_each_flow_keeps_its_member() {
        let n = 4;
        let mut per = [0usize; 4];
        for sport in 0..4000u16 {
            let k = key(&udp_frame(sport));
            let m = member(k.hash(7), n);
            assert_eq!(m, member(key(&udp_frame(sport)).hash(7), n), "the same flow, the same member");
            per[m] += 1;
        }
        assert!(per.iter().all(|&c| (900..=1100).contains(&c)), "{per:?}");
    }

    #[test]
    fn two_seeds_split_flows_independently_so_tiers_of_a_fabric_do_not_polarize() {
        // With independent choices at two tiers of two members each, every pair of
        // members is taken by about a quarter of the flows; a polarized pair of hashes
        // would give two of the four pairs nothing.
        let mut pairs = [[0usize; 2]; 2];
        for sport in 0..4000u16 {
            let k = key(&udp_frame(sport));
            pairs[member(k.hash(1), 2)][member(k.hash(2), 2)] += 1;
        }
        assert!(pairs.iter().flatten().all(|&c| (850..=1150).contains(&c)), "{pairs:?}");
    }

    #[test]
    fn the_hash_is_pinned_so_reports_are_the_same_on_every_machine() {
        let k = FlowKey::ipv4([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, (4000, 7123));
        assert_eq!(k.hash(0), k.hash(0));
        assert_ne!(k.hash(0), k.hash(1));
        // Pinned: a change here changes every simulated fabric's routes.
        assert_eq!(k.hash(0), PINNED);
    }

    const PINNED: u64 = 10_098_003_148_325_151_213;
}
