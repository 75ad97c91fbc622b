//! Ethernet MAC addresses.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An Ethernet MAC address.
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid MAC address {0:?}: expected six hex bytes such as 02:00:00:00:00:01")]
/// Text that is not six colon-separated hex bytes.
pub struct MacParseError(String);

impl MacAddr {
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);

    /// Reads the first six bytes of `bytes`; the caller guarantees the length.
    pub fn from_slice(bytes: &[u8]) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&bytes[..6]);
        MacAddr(a)
    }

    /// A group address (the I/G bit set), broadcast included.
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 == 1
    }

    /// All zero.
    pub fn is_zero(self) -> bool {
        self == MacAddr::ZERO
    }

    /// 01:80:C2:00:00:00–0F: link-local group addresses a bridge must never forward
    /// (IEEE 802.1Q 8.6.3): MAC control, LACP, LLDP, STP...
    pub fn is_link_local(self) -> bool {
        self.0[..5] == [0x01, 0x80, 0xc2, 0x00, 0x00] && self.0[5] <= 0x0f
    }

    /// A locally administered unicast address derived from `seed`, for tools and tests.
    pub fn local(seed: u64) -> MacAddr {
        let b = seed.to_be_bytes();
        MacAddr([0x02, b[3], b[4], b[5], b[6], b[7]])
    }

    /// The address in the low 48 bits, as a map key.
    pub fn as_u64(self) -> u64 {
        let mut b = [0u8; 8];
        b[2..].copy_from_slice(&self.0);
        u64::from_be_bytes(b)
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", a[0], a[1], a[2], a[3], a[4], a[5])
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for MacAddr {
    type Err = MacParseError;

    fn from_str(s: &str) -> Result<MacAddr, MacParseError> {
        let err = || MacParseError(s.to_string());
        let parts: Vec<&str> = s.trim().split([':', '-']).collect();
        if parts.len() != 6 {
            return Err(err());
        }
        let mut a = [0u8; 6];
        for (byte, part) in a.iter_mut().zip(parts) {
            if part.len() != 2 {
                return Err(err());
            }
            *byte = u8::from_str_radix(part, 16).map_err(|_| err())?;
        }
        Ok(MacAddr(a))
    }
}

impl Serialize for MacAddr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for MacAddr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<MacAddr, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_prints_and_classifies() {
        let m: MacAddr = "01:80:C2:00:00:01".parse().unwrap();
        assert!(m.is_multicast() && m.is_link_local());
        assert_eq!(m.to_string(), "01:80:c2:00:00:01");
        assert!(!"01:80:c2:00:00:10".parse::<MacAddr>().unwrap().is_link_local());
        assert_eq!("02-00-00-00-00-0a".parse::<MacAddr>().unwrap(), MacAddr([2, 0, 0, 0, 0, 10]));
        for bad in ["", "02:00:00:00:00", "02:00:00:00:00:0g", "2:0:0:0:0:1"] {
            assert!(bad.parse::<MacAddr>().is_err(), "{bad:?}");
        }
        assert!(!MacAddr::local(7).is_multicast());
        assert_eq!(MacAddr([0, 0, 0, 0, 1, 2]).as_u64(), 0x0102);
    }
}
