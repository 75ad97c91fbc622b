//! The two netlink questions `pfcswitch doctor` asks of an interface: which XDP features
//! its driver has (the generic-netlink `netdev` family, linux/netdev.h, kernel 6.3 and
//! later; what `ynl` and xdp-tools read), and whether its IEEE DCB PFC is on (rtnetlink
//! `RTM_GETDCB`, linux/dcbnl.h; what `dcb pfc show` reads). Messages are built and
//! parsed here as bytes, so the parsing is tested without a kernel.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::priorities::Priorities;

const NLMSG_HDR: usize = 16;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
/// Nested and byte-order flags in an attribute's type.
const NLA_TYPE_MASK: u16 = 0x3fff;

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

const NETDEV_CMD_DEV_GET: u8 = 1;
const NETDEV_A_DEV_IFINDEX: u16 = 1;
const NETDEV_A_DEV_XDP_FEATURES: u16 = 3;
const NETDEV_A_DEV_XDP_ZC_MAX_SEGS: u16 = 4;
const NETDEV_XDP_ACT_BASIC: u64 = 1;
const NETDEV_XDP_ACT_REDIRECT: u64 = 2;
const NETDEV_XDP_ACT_XSK_ZEROCOPY: u64 = 8;

const RTM_GETDCB: u16 = 78;
const DCB_CMD_IEEE_GET: u8 = 21;
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_IEEE_PFC: u16 = 2;

/// The driver's XDP features, as the kernel reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct XdpFeatures {
    /// XDP in the driver (native mode): the basic actions.
    pub native: bool,
    /// XDP_REDIRECT in native mode, which AF_XDP needs.
    pub redirect: bool,
    /// AF_XDP zero-copy.
    pub zero_copy: bool,
    /// The raw `xdp-features` bits.
    pub bits: u64,
    /// The most fragments a zero-copy frame may have (1: no multi-buffer).
    pub zc_max_segs: u32,
}

/// The NIC's own DCB PFC state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum DcbState {
    /// The driver has no DCB: PFC frames are ordinary frames to it.
    NotSupported,
    /// IEEE 802.1Qaz PFC: how many priorities the NIC can pause (`capable`), and those it
    /// pauses and honours itself (`enabled`).
    Pfc { capable: u8, enabled: Priorities },
    /// The driver has DCB but reports no IEEE PFC (CEE only, or firmware-managed).
    NoIeeePfc,
}

/// A netlink message: header, a family header, attributes.
pub fn message(ty: u16, family_header: [u8; 4], attrs: &[(u16, &[u8])]) -> Vec<u8> {
    let mut m = vec![0u8; NLMSG_HDR];
    m[4..6].copy_from_slice(&ty.to_ne_bytes());
    m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m[8..12].copy_from_slice(&1u32.to_ne_bytes());
    m.extend_from_slice(&family_header);
    for (t, payload) in attrs {
        put_attr(&mut m, *t, payload);
    }
    let len = m.len() as u32;
    m[0..4].copy_from_slice(&len.to_ne_bytes());
    m
}

fn put_attr(m: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    m.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(payload);
    m.resize(m.len().next_multiple_of(4), 0);
}

/// The attributes in `buf`: (type without flags, payload). Stops at the first malformed one.
pub fn attrs(mut buf: &[u8]) -> impl Iterator<Item = (u16, &[u8])> {
    std::iter::from_fn(move || {
        if buf.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([buf[0], buf[1]]));
        let ty = u16::from_ne_bytes([buf[2], buf[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > buf.len() {
            return None;
        }
        let payload = &buf[4..len];
        buf = &buf[len.next_multiple_of(4).min(buf.len())..];
        Some((ty, payload))
    })
}

fn attr(buf: &[u8], ty: u16) -> Option<&[u8]> {
    attrs(buf).find(|(t, _)| *t == ty).map(|(_, p)| p)
}

fn u16_of(p: &[u8]) -> Option<u16> {
    Some(u16::from_ne_bytes(p.get(..2)?.try_into().ok()?))
}

fn u32_of(p: &[u8]) -> Option<u32> {
    Some(u32::from_ne_bytes(p.get(..4)?.try_into().ok()?))
}

fn u64_of(p: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(p.get(..8)?.try_into().ok()?))
}

/// A reply's payload (after the netlink header), or the error the kernel answered with.
fn reply_payload(reply: &[u8]) -> io::Result<&[u8]> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "a malformed netlink reply");
    if reply.len() < NLMSG_HDR {
        return Err(bad());
    }
    let len = (u32_of(reply).ok_or_else(bad)? as usize).min(reply.len());
    let ty = u16_of(&reply[4..]).ok_or_else(bad)?;
    let payload = reply.get(NLMSG_HDR..len).ok_or_else(bad)?;
    match ty {
        NLMSG_ERROR => {
            // The kernel sends a negative errno; whatever the bytes say, never overflow.
            let errno = u32_of(payload).ok_or_else(bad)? as i32;
            Err(io::Error::from_raw_os_error(errno.wrapping_neg()))
        }
        NLMSG_DONE => Err(bad()),
        _ => Ok(payload),
    }
}

/// The `netdev` family's id from a CTRL_CMD_GETFAMILY reply payload.
fn family_id(payload: &[u8]) -> Option<u16> {
    attr(payload.get(4..)?, CTRL_ATTR_FAMILY_ID).and_then(u16_of)
}

/// XDP features from a NETDEV_CMD_DEV_GET reply payload.
fn xdp_features(payload: &[u8]) -> Option<XdpFeatures> {
    let body = payload.get(4..)?;
    let bits = u64_of(attr(body, NETDEV_A_DEV_XDP_FEATURES)?)?;
    Some(XdpFeatures {
        native: bits & NETDEV_XDP_ACT_BASIC != 0,
        redirect: bits & NETDEV_XDP_ACT_REDIRECT != 0,
        zero_copy: bits & NETDEV_XDP_ACT_XSK_ZEROCOPY != 0,
        bits,
        zc_max_segs: attr(body, NETDEV_A_DEV_XDP_ZC_MAX_SEGS).and_then(u32_of).unwrap_or(0),
    })
}

/// The DCB state from a DCB_CMD_IEEE_GET reply payload: `struct ieee_pfc` begins with
/// `pfc_cap` and `pfc_en`.
fn ieee_pfc(payload: &[u8]) -> DcbState {
    let pfc = payload.get(4..).and_then(|b| attr(b, DCB_ATTR_IEEE)).and_then(|ieee| attr(ieee, DCB_ATTR_IEEE_PFC));
    match pfc {
        Some(p) if p.len() >= 2 => DcbState::Pfc { capable: p[0], enabled: Priorities::from_bits(p[1]) },
        _ => DcbState::NoIeeePfc,
    }
}

/// What the switch reads from one netlink reply, whichever query it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyFacts {
    pub family_id: Option<u16>,
    pub xdp: Option<XdpFeatures>,
    pub dcb: DcbState,
}

/// Reads a reply as each query would, from its bytes alone: a plain function, so that the
/// fuzz checks drive the parsing the kernel's answers go through without a socket.
pub fn read_reply(reply: &[u8]) -> io::Result<ReplyFacts> {
    let payload = reply_payload(reply)?;
    Ok(ReplyFacts { family_id: family_id(payload), xdp: xdp_features(payload), dcb: ieee_pfc(payload) })
}

/// Sends `request` on a new netlink socket of `protocol` and returns the first reply.
fn ask(protocol: libc::c_int, request: &[u8]) -> io::Result<Vec<u8>> {
    // SAFETY: a plain socket call; the fd is owned below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // A kernel that never answers must not hang the doctor.
    let timeout = Duration::from_secs(2);
    let tv = libc::timeval { tv_sec: timeout.as_secs() as libc::time_t, tv_usec: 0 };
    // SAFETY: setsockopt with a valid timeval of the size given.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    // SAFETY: sockaddr_nl is plain data; all-zero is the kernel as the destination.
    let mut to: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: sends `request` to the kernel; `to` is a valid sockaddr_nl of the size given.
    let sent = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            request.as_ptr() as *const libc::c_void,
            request.len(),
            0,
            &to as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u8; 16384];
    // SAFETY: receives into `buf`, within its length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// The XDP features of interface `ifindex`; `None` when the kernel cannot say (older
/// than 6.3: no `netdev` family).
pub fn query_xdp_features(ifindex: u32) -> io::Result<Option<XdpFeatures>> {
    let get_family = message(GENL_ID_CTRL, [CTRL_CMD_GETFAMILY, 2, 0, 0], &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")]);
    let reply = ask(libc::NETLINK_GENERIC, &get_family)?;
    let family = match reply_payload(&reply) {
        Ok(p) => family_id(p),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(family) = family else { return Ok(None) };
    let dev_get = message(family, [NETDEV_CMD_DEV_GET, 1, 0, 0], &[(NETDEV_A_DEV_IFINDEX, &ifindex.to_ne_bytes())]);
    let reply = ask(libc::NETLINK_GENERIC, &dev_get)?;
    Ok(xdp_features(reply_payload(&reply)?))
}

/// The IEEE DCB PFC state of interface `iface`.
pub fn query_dcb(iface: &str) -> io::Result<DcbState> {
    let mut name = iface.as_bytes().to_vec();
    name.push(0);
    let get = message(RTM_GETDCB, [libc::AF_UNSPEC as u8, DCB_CMD_IEEE_GET, 0, 0], &[(DCB_ATTR_IFNAME, &name)]);
    let reply = ask(libc::NETLINK_ROUTE, &get)?;
    match reply_payload(&reply) {
        Ok(p) => Ok(ieee_pfc(p)),
        Err(e) if super::ethtool::unsupported(&e) => Ok(DcbState::NotSupported),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply as the kernel would send it: `ty`, a family header, attributes.
    fn reply(ty: u16, attrs: &[(u16, &[u8])]) -> Vec<u8> {
        message(ty, [0; 4], attrs)
    }

    #[test]
    fn requests_are_padded_attributes_behind_the_headers() {
        let m = message(GENL_ID_CTRL, [CTRL_CMD_GETFAMILY, 2, 0, 0], &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0")]);
        // 16 (nlmsghdr) + 4 (genlmsghdr) + 4 + 7 bytes of name, padded to 12.
        assert_eq!(m.len(), 16 + 4 + 12);
        assert_eq!(u32_of(&m).unwrap() as usize, m.len());
        assert_eq!(attrs(&m[20..]).collect::<Vec<_>>(), vec![(CTRL_ATTR_FAMILY_NAME, &b"netdev\0"[..])]);
    }

    #[test]
    fn the_family_id_and_the_xdp_features_are_read_from_their_replies() {
        let r =
            reply(GENL_ID_CTRL, &[(CTRL_ATTR_FAMILY_NAME, b"netdev\0"), (CTRL_ATTR_FAMILY_ID, &33u16.to_ne_bytes())]);
        assert_eq!(family_id(reply_payload(&r).unwrap()), Some(33));
        // veth: basic, redirect, rx scatter-gather; no zero-copy.
        let r = reply(
            33,
            &[(NETDEV_A_DEV_IFINDEX, &7u32.to_ne_bytes()), (NETDEV_A_DEV_XDP_FEATURES, &35u64.to_ne_bytes())],
        );
        let f = xdp_features(reply_payload(&r).unwrap()).unwrap();
        assert_eq!((f.native, f.redirect, f.zero_copy, f.bits), (true, true, false, 35));
        let r = reply(33, &[(NETDEV_A_DEV_XDP_FEATURES, &15u64.to_ne_bytes())]);
        assert!(xdp_features(reply_payload(&r).unwrap()).unwrap().zero_copy);
    }

    #[test]
    fn kernel_errors_come_back_as_errors() {
        // struct nlmsgerr: the negative errno, then the request's header.
        let mut r = vec![0u8; NLMSG_HDR];
        r[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        r.extend_from_slice(&(-libc::EOPNOTSUPP).to_ne_bytes());
        r.extend_from_slice(&[0; NLMSG_HDR]);
        let len = r.len() as u32;
        r[0..4].copy_from_slice(&len.to_ne_bytes());
        assert_eq!(reply_payload(&r).unwrap_err().raw_os_error(), Some(libc::EOPNOTSUPP));
        assert!(reply_payload(&[1, 2, 3]).is_err(), "too short");
    }

    #[test]
    fn ieee_pfc_reads_the_capable_and_enabled_priorities() {
        let mut pfc = vec![8u8, 0b0001_1000, 0, 0];
        pfc.resize(136, 0);
        let mut ieee = Vec::new();
        put_attr(&mut ieee, DCB_ATTR_IEEE_PFC, &pfc);
        let r = reply(RTM_GETDCB, &[(DCB_ATTR_IFNAME, b"eth0\0"), (DCB_ATTR_IEEE | 0x8000, &ieee)]);
        assert_eq!(
            ieee_pfc(reply_payload(&r).unwrap()),
            DcbState::Pfc { capable: 8, enabled: Priorities::from_bits(0b0001_1000) }
        );
        let r = reply(RTM_GETDCB, &[(DCB_ATTR_IFNAME, b"eth0\0")]);
        assert_eq!(ieee_pfc(reply_payload(&r).unwrap()), DcbState::NoIeeePfc);
    }

    #[test]
    fn malformed_attributes_end_the_walk_without_a_panic() {
        assert_eq!(attrs(&[8, 0, 1, 0, 1, 2]).count(), 0, "longer than the buffer");
        assert_eq!(attrs(&[2, 0, 1, 0]).count(), 0, "shorter than its header");
        assert_eq!(attrs(&[5, 0, 1, 0, 9]).count(), 1, "the last one needs no padding");
    }
}
