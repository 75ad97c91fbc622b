//! Port speed, wire time and PFC pause quanta.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bits in one pause quantum (IEEE 802.3 Annex 31B, 802.1Qbb).
pub const BITS_PER_QUANTUM: u64 = 512;

/// Bytes a frame occupies on the wire beyond the bytes handed to the NIC:
/// 4 FCS + 7 preamble + 1 SFD + 12 inter-frame gap.
pub const WIRE_OVERHEAD: u64 = 24;

/// Smallest frame handed to a NIC (64 on the wire minus the FCS).
pub const MIN_FRAME_NO_FCS: u64 = 60;

/// A port's line rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Speed(u64);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid speed {0:?}: expected a rate such as 100M, 1G, 10G, 25G, 40G, 100G or bits per second")]
/// Text that is not a speed such as `10G`, `100M` or `25000000000`.
pub struct SpeedParseError(String);

impl Speed {
    /// A speed of `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Speed {
        Speed(bps)
    }

    /// A speed of `g` Gb/s.
    pub const fn gbps(g: u64) -> Speed {
        Speed(g * 1_000_000_000)
    }

    /// A speed of `m` Mb/s.
    pub const fn mbps(m: u64) -> Speed {
        Speed(m * 1_000_000)
    }

    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }

    /// How long `quanta` pause quanta last at this speed; zero quanta is zero time.
    pub fn quanta_duration(self, quanta: u16) -> Duration {
        self.bit_times(u64::from(quanta) * BITS_PER_QUANTUM)
    }

    /// How long `bits` bit times last at this speed (rounded up to the nanosecond).
    pub fn bit_times(self, bits: u64) -> Duration {
        Duration::from_nanos(div_ceil_ns(bits, self.0))
    }

    /// The fewest quanta that pause for at least `d` at this speed, capped at 65535.
    pub fn quanta_for(self, d: Duration) -> u16 {
        let bits = d.as_nanos() * u128::from(self.0);
        let quanta = div_ceil_u128(bits, u128::from(BITS_PER_QUANTUM) * 1_000_000_000);
        u16::try_from(quanta).unwrap_or(u16::MAX)
    }

    /// Time a frame of `len` bytes (as handed to the NIC, without FCS) occupies the wire,
    /// padding and preamble, SFD, FCS and inter-frame gap included.
    pub fn wire_time(self, len: usize) -> Duration {
        Duration::from_nanos(div_ceil_ns(wire_bytes(len) * 8, self.0))
    }

    /// Bytes per second on the wire.
    pub fn bytes_per_sec(self) -> u64 {
        self.0 / 8
    }
}

/// Bytes a frame of `len` bytes (without FCS) takes on the wire.
pub fn wire_bytes(len: usize) -> u64 {
    (len as u64).max(MIN_FRAME_NO_FCS) + WIRE_OVERHEAD
}

/// `bits` at `bps`, in nanoseconds rounded up. Every frame's time on the wire is worked
/// out here, in the simulator twice per hop: in 64 bits whenever the product fits (any
/// frame's bits do), since a 128-bit division is a call several times as slow.
fn div_ceil_ns(bits: u64, bps: u64) -> u64 {
    match bits.checked_mul(1_000_000_000) {
        Some(a) => a.div_ceil(bps.max(1)),
        None => div_ceil_u128(u128::from(bits) * 1_000_000_000, u128::from(bps)),
    }
}

fn div_ceil_u128(a: u128, b: u128) -> u64 {
    u64::try_from(a.div_ceil(b.max(1))).unwrap_or(u64::MAX)
}

impl FromStr for Speed {
    type Err = SpeedParseError;

    fn from_str(s: &str) -> Result<Speed, SpeedParseError> {
        let err = || SpeedParseError(s.to_string());
        let t = s.trim();
        let t = t.strip_suffix("bps").or_else(|| t.strip_suffix("b")).unwrap_or(t);
        let (num, mult) = match t.char_indices().last() {
            Some((i, 'k' | 'K')) => (&t[..i], 1e3),
            Some((i, 'm' | 'M')) => (&t[..i], 1e6),
            Some((i, 'g' | 'G')) => (&t[..i], 1e9),
            Some((i, 't' | 'T')) => (&t[..i], 1e12),
            Some(_) => (t, 1.0),
            None => return Err(err()),
        };
        let value: f64 = num.trim().parse().map_err(|_| err())?;
        let bps = value * mult;
        if !(bps.is_finite() && (1.0..=1e13).contains(&bps)) {
            return Err(err());
        }
        Ok(Speed(bps.round() as u64))
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bps = self.0;
        for (unit, div) in [("T", 1_000_000_000_000), ("G", 1_000_000_000), ("M", 1_000_000), ("K", 1_000)] {
            if bps >= div && bps.is_multiple_of(div / 10) {
                let whole = bps / div;
                let tenth = (bps % div) / (div / 10);
                return if tenth == 0 { write!(f, "{whole}{unit}") } else { write!(f, "{whole}.{tenth}{unit}") };
            }
        }
        write!(f, "{bps}")
    }
}

impl Serialize for Speed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Speed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Speed, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Bps(u64),
        }
        match Raw::deserialize(d)? {
            Raw::Text(s) => s.parse().map_err(serde::de::Error::custom),
            Raw::Bps(0) => Err(serde::de::Error::custom("speed must be above zero")),
            Raw::Bps(b) => Ok(Speed(b)),
        }
    }
}

/// Frames are padded to this length (64 bytes on the wire with the FCS).
pub const MIN_FRAME_LEN: usize = 60;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_pause_lasts_as_the_standard_says() {
        // 65535 quanta × 512 bit times.
        assert_eq!(Speed::gbps(40).quanta_duration(65535), Duration::from_nanos(838_848));
        assert_eq!(Speed::gbps(100).quanta_duration(65535), Duration::from_nanos(335_540));
        assert_eq!(Speed::gbps(10).quanta_duration(65535), Duration::from_nanos(3_355_392));
        assert_eq!(Speed::gbps(1).quanta_duration(1), Duration::from_nanos(512));
        assert_eq!(Speed::gbps(25).quanta_duration(0), Duration::ZERO);
    }

    #[test]
    fn quanta_for_is_the_fewest_quanta_covering_a_duration() {
        for speed in [Speed::gbps(1), Speed::gbps(10), Speed::gbps(25), Speed::gbps(100)] {
            for ns in [1u64, 52, 1_000, 123_457, 1_000_000] {
                let d = Duration::from_nanos(ns);
                let q = speed.quanta_for(d);
                if q == u16::MAX {
                    continue; // longer than one frame can pause
                }
                assert!(speed.quanta_duration(q) >= d, "{speed} {ns}");
                // Within the nanosecond rounding of quanta_duration.
                assert!(q == 0 || speed.quanta_duration(q - 1) <= d, "{speed} {ns}");
            }
        }
        assert_eq!(Speed::gbps(1).quanta_for(Duration::from_secs(1)), u16::MAX);
        assert_eq!(Speed::gbps(1).quanta_for(Duration::from_nanos(512)), 1);
    }

    #[test]
    fn wire_time_counts_padding_and_overhead() {
        // A minimum frame is 84 bytes on the wire: 14.88 Mpps at 10G.
        assert_eq!(Speed::gbps(10).wire_time(60), Duration::from_nanos(68));
        assert_eq!(Speed::gbps(10).wire_time(10), Duration::from_nanos(68));
        assert_eq!(Speed::gbps(1).wire_time(1514), Duration::from_nanos(12_304));
    }

    #[test]
    fn the_64_bit_division_rounds_as_the_128_bit_one_and_huge_counts_still_work() {
        for bps in [1_000_000_000u64, 25_000_000_000, 100_000_000_000, 400_000_000_000, 3] {
            for bits in [0u64, 1, 672, 12_304, 9_999_999, u64::MAX / 1_000_000_000, u64::MAX / 999_999_999] {
                assert_eq!(
                    div_ceil_ns(bits, bps),
                    div_ceil_u128(u128::from(bits) * 1_000_000_000, u128::from(bps)),
                    "{bits} bits at {bps}"
                );
            }
        }
    }

    #[test]
    fn parses_and_prints_common_speeds() {
        for (s, bps) in [
            ("10G", 10_000_000_000u64),
            ("25g", 25_000_000_000),
            ("100M", 100_000_000),
            ("2.5G", 2_500_000_000),
            ("40Gbps", 40_000_000_000),
            ("1000000", 1_000_000),
        ] {
            let speed: Speed = s.parse().unwrap();
            assert_eq!(speed.bps(), bps, "{s}");
        }
        assert_eq!(Speed::from_bps(2_500_000_000).to_string(), "2.5G");
        assert_eq!(Speed::gbps(100).to_string(), "100G");
        assert_eq!(Speed::mbps(100).to_string(), "100M");
        for bad in ["", "G", "10X", "-1G", "0", "fastG"] {
            assert!(bad.parse::<Speed>().is_err(), "{bad:?}");
        }
    }
}
