//! An AF_PACKET socket for sending raw frames. Storms use it rather than AF_XDP so they
//! can share an interface with an AF_XDP sink (a queue takes only one XDP socket).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result};

pub struct RawSender {
    fd: OwnedFd,
    pub iface: String,
}

impl RawSender {
    pub fn open(iface: &str) -> Result<RawSender> {
        let info = pfcswitch::sys::interface(iface)?;
        // SAFETY: socket(2) with constant arguments; protocol 0 means "receive nothing".
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("creating an AF_PACKET socket (needs CAP_NET_RAW)");
        }
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid start.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = info.ifindex as i32;
        // SAFETY: binding with a correctly sized sockaddr_ll.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("binding to {iface}"));
        }
        // Straight to the driver, as test equipment would: no qdisc in the way.
        let one: libc::c_int = 1;
        // SAFETY: setsockopt with an int option value.
        unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                &one as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as u32,
            )
        };
        Ok(RawSender { fd, iface: iface.to_string() })
    }

    /// Sends one frame; `Ok(false)` if the device queue was full (try again).
    pub fn send(&self, frame: &[u8]) -> Result<bool> {
        // SAFETY: sending from a valid slice on our bound socket.
        let n = unsafe {
            libc::send(self.fd.as_raw_fd(), frame.as_ptr() as *const libc::c_void, frame.len(), libc::MSG_DONTWAIT)
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::ENOBUFS)) {
                return Ok(false);
            }
            return Err(e).with_context(|| format!("sending on {}", self.iface));
        }
        Ok(true)
    }
}
