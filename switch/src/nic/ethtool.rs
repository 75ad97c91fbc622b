//! The ethtool ioctls `pfcswitch doctor` reads (`SIOCETHTOOL`, linux/ethtool.h): driver
//! facts (`ethtool -i`), pause parameters (`ethtool -a`) and channels (`ethtool -l`).
//! A driver that does not implement one answers EOPNOTSUPP: that is a fact, not an error.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use serde::{Deserialize, Serialize};

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GDRVINFO: u32 = 0x03;
const ETHTOOL_GPAUSEPARAM: u32 = 0x12;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// `struct ethtool_drvinfo`.
#[repr(C)]
struct DrvInfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `struct ethtool_pauseparam`.
#[repr(C)]
#[derive(Default)]
struct PauseParam {
    cmd: u32,
    autoneg: u32,
    rx_pause: u32,
    tx_pause: u32,
}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct ChannelsRaw {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// What `ethtool -i` shows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Driver {
    pub name: String,
    pub version: String,
    pub firmware: String,
    pub bus_info: String,
}

/// What `ethtool -a` shows: whether the NIC itself acts on received 802.3x PAUSE frames
/// (`rx`), sends its own (`tx`), and negotiates both with the link partner (`autoneg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PauseSettings {
    pub autoneg: bool,
    pub rx: bool,
    pub tx: bool,
}

/// What `ethtool -l` shows: the most and the current rx, tx and combined channels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Channels {
    pub max_rx: u32,
    pub max_tx: u32,
    pub max_combined: u32,
    pub rx: u32,
    pub tx: u32,
    pub combined: u32,
}

/// An ioctl socket for one interface.
pub struct Ethtool {
    sock: OwnedFd,
    name: [libc::c_char; libc::IFNAMSIZ],
}

impl Ethtool {
    pub fn new(iface: &str) -> io::Result<Ethtool> {
        if iface.is_empty() || iface.len() >= libc::IFNAMSIZ {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        let mut name = [0 as libc::c_char; libc::IFNAMSIZ];
        for (d, s) in name.iter_mut().zip(iface.bytes()) {
            *d = s as libc::c_char;
        }
        // SAFETY: a plain socket call; the fd is owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Ethtool { sock: unsafe { OwnedFd::from_raw_fd(fd) }, name })
    }

    /// Runs one ethtool command on `data`, a struct starting with its `cmd` field.
    fn call<T>(&self, data: &mut T) -> io::Result<()> {
        let mut req: libc::ifreq = {
            // SAFETY: ifreq is plain data; all-zero is a valid value.
            unsafe { std::mem::zeroed() }
        };
        req.ifr_name = self.name;
        req.ifr_ifru.ifru_data = data as *mut T as *mut libc::c_char;
        // SAFETY: SIOCETHTOOL reads `cmd` from `data` and writes at most size_of::<T>()
        // bytes of the struct that command names, which T is.
        if unsafe { libc::ioctl(self.sock.as_raw_fd(), SIOCETHTOOL, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub fn driver(&self) -> io::Result<Driver> {
        let mut d = DrvInfo {
            cmd: ETHTOOL_GDRVINFO,
            driver: [0; 32],
            version: [0; 32],
            fw_version: [0; 32],
            bus_info: [0; 32],
            erom_version: [0; 32],
            reserved2: [0; 12],
            n_priv_flags: 0,
            n_stats: 0,
            testinfo_len: 0,
            eedump_len: 0,
            regdump_len: 0,
        };
        self.call(&mut d)?;
        Ok(Driver {
            name: c_string(&d.driver),
            version: c_string(&d.version),
            firmware: c_string(&d.fw_version),
            bus_info: c_string(&d.bus_info),
        })
    }

    /// `None` when the driver has no pause settings (it neither sends nor acts on PAUSE).
    pub fn pause(&self) -> io::Result<Option<PauseSettings>> {
        let mut p = PauseParam { cmd: ETHTOOL_GPAUSEPARAM, ..Default::default() };
        match self.call(&mut p) {
            Ok(()) => Ok(Some(PauseSettings { autoneg: p.autoneg != 0, rx: p.rx_pause != 0, tx: p.tx_pause != 0 })),
            Err(e) if unsupported(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `None` when the driver does not report channels.
    pub fn channels(&self) -> io::Result<Option<Channels>> {
        let mut c = ChannelsRaw { cmd: ETHTOOL_GCHANNELS, ..Default::default() };
        match self.call(&mut c) {
            Ok(()) => Ok(Some(Channels {
                max_rx: c.max_rx,
                max_tx: c.max_tx,
                max_combined: c.max_combined,
                rx: c.rx_count,
                tx: c.tx_count,
                combined: c.combined_count,
            })),
            Err(e) if unsupported(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

pub fn unsupported(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EOPNOTSUPP)
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structs_have_the_kernels_sizes() {
        // linux/ethtool.h: drvinfo is 196 bytes, pauseparam 16, channels 36.
        assert_eq!(std::mem::size_of::<DrvInfo>(), 196);
        assert_eq!(std::mem::size_of::<PauseParam>(), 16);
        assert_eq!(std::mem::size_of::<ChannelsRaw>(), 36);
        assert_eq!(c_string(b"veth\0\0junk"), "veth");
    }

    #[test]
    fn a_name_too_long_for_an_interface_is_refused() {
        assert!(Ethtool::new("a-name-far-too-long-for-linux").is_err());
        assert!(Ethtool::new("").is_err());
    }
}
