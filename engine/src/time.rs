//! Time as the core sees it: a monotonic instant passed in by the caller.
//!
//! The core never reads a clock, so every state machine can be driven by tests with
//! made-up instants and replayed exactly.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point on a monotonic clock, in nanoseconds since an arbitrary origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The clock's zero.
    pub const ZERO: Time = Time(0);
    /// Later than any time the switch sees ("never").
    pub const MAX: Time = Time(u64::MAX);

    /// `nanos` ns after zero.
    pub const fn from_nanos(nanos: u64) -> Time {
        Time(nanos)
    }

    /// `micros` µs after zero.
    pub const fn from_micros(micros: u64) -> Time {
        Time(micros * 1_000)
    }

    /// `millis` ms after zero.
    pub const fn from_millis(millis: u64) -> Time {
        Time(millis * 1_000_000)
    }

    /// Nanoseconds since zero.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed since `earlier`, zero when `earlier` is in the future.
    pub fn saturating_since(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Time {
    type Output = Time;

    fn add(self, d: Duration) -> Time {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_add(nanos))
    }
}

impl Sub<Duration> for Time {
    type Output = Time;

    /// Saturating at the clock's origin.
    fn sub(self, d: Duration) -> Time {
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Time(self.0.saturating_sub(nanos))
    }
}

impl Sub<Time> for Time {
    type Output = Duration;

    /// Saturating: an instant minus a later one is zero.
    fn sub(self, earlier: Time) -> Duration {
        self.saturating_since(earlier)
    }
}

/// An instant that may not have happened (`None`), as the snapshots' JSON has always
/// written it: nanoseconds of the monotonic clock, with 0 for none. The engine's types
/// say `Option<u64>`; only the wire keeps the zero, for the readers of `ctl stats --json`
/// and of the simulator's reports (a monotonic clock never reads 0 once running).
pub mod ns_or_zero {
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `None` as 0.
    pub fn serialize<S: Serializer>(at: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(at.unwrap_or(0))
    }

    /// Reads 0 as `None`.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Ok(Some(u64::deserialize(d)?).filter(|&ns| ns != 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        let t = Time::from_micros(5);
        assert_eq!((t + Duration::from_nanos(10)).as_nanos(), 5_010);
        assert_eq!(t - Time::from_micros(7), Duration::ZERO);
        assert_eq!(Time::MAX + Duration::from_secs(1), Time::MAX);
    }
}
