//! One-way latency of a flow's frames, in an HDR histogram (the `hdrhistogram` crate):
//! three significant digits at every scale, from a microsecond on a veth to seconds under
//! a pause storm. The engine's own histogram, which the switch keeps for its reaction
//! times, is exact to the microsecond up to 1 ms and coarse beyond; a flow's latency is
//! what a test engineer reads first, and a pause stretches it to milliseconds, so here it
//! is measured as finely there as anywhere.

use std::time::Duration;

use hdrhistogram::Histogram;
use pfcswitch::core::histogram::Percentiles;

/// The longest latency recorded as it is (1 hour); longer ones count as this long.
const HIGHEST_NS: u64 = 3_600_000_000_000;

/// Latencies in ns, three significant digits. The histogram grows with the largest
/// value recorded (a few tens of KiB for milliseconds), not to its whole range up front:
/// a sink may follow thousands of flows.
#[derive(Debug)]
pub struct Latency {
    hist: Histogram<u64>,
    sum_ns: u128,
    /// The longest, exactly (the histogram knows it to its bucket).
    max_ns: u64,
}

impl Default for Latency {
    fn default() -> Latency {
        let mut hist = Histogram::new(3).expect("3 significant digits is a valid precision");
        hist.auto(true);
        Latency { hist, sum_ns: 0, max_ns: 0 }
    }
}

impl Latency {
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).clamp(1, HIGHEST_NS);
        // Cannot fail: auto-resize is on and the value is within the histogram's reach.
        let _ = self.hist.record(ns);
        self.sum_ns += u128::from(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// The summary: each percentile the value its bucket stands for, to three
    /// significant digits, and never above the longest, which is exact (the top bucket
    /// stands for values up to its end, which the longest may fall short of).
    pub fn percentiles(&self) -> Percentiles {
        let n = self.hist.len();
        if n == 0 {
            return Percentiles::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        let at = |q: f64| us(self.hist.value_at_quantile(q).min(self.max_ns));
        Percentiles {
            count: n,
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: us(self.max_ns),
            mean_us: self.sum_ns as f64 / n as f64 / 1000.0,
        }
    }
}

/// A latency as the reports print it: three significant digits, µs.
pub fn us3(us: f64) -> String {
    if us >= 100.0 || us == 0.0 {
        format!("{us:.0}")
    } else if us >= 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_of_a_few_milliseconds_keep_three_significant_digits() {
        // What a paused flow sees: 4.1 to 7.9 ms. Power-of-two buckets said 8000 µs for all.
        let mut l = Latency::default();
        for i in 0..1000u64 {
            l.record(Duration::from_micros(4100 + i * 38 / 10));
        }
        let p = l.percentiles();
        assert_eq!(p.count, 1000);
        assert!((p.p50_us - 6000.0).abs() < 10.0, "{p:?}");
        assert!((p.p99_us - 7862.0).abs() < 10.0, "{p:?}");
        assert!((p.p999_us - 7893.0).abs() < 10.0 && p.max_us == 7896.0, "{p:?}");
        assert!((p.mean_us - 5997.7).abs() < 0.1, "{p:?}");
    }

    #[test]
    fn microsecond_latencies_are_kept_to_the_nanosecond_and_nothing_recorded_is_all_zero() {
        let mut l = Latency::default();
        for ns in [12_345u64, 12_345, 12_345, 80_000] {
            l.record(Duration::from_nanos(ns));
        }
        let p = l.percentiles();
        assert!((p.p50_us - 12.345).abs() < 0.01, "{p:?}");
        assert_eq!(p.max_us, 80.0);
        assert_eq!(Latency::default().percentiles(), Percentiles::default());
    }

    #[test]
    fn no_percentile_is_said_to_be_longer_than_the_longest_latency() {
        // 113 833 ns lies in a bucket that stands for up to 113 855 ns.
        let mut l = Latency::default();
        for ns in [29_135u64, 69_887, 113_833] {
            l.record(Duration::from_nanos(ns));
        }
        let p = l.percentiles();
        assert_eq!(p.max_us, 113.833);
        assert_eq!((p.p99_us, p.p999_us), (113.833, 113.833), "{p:?}");
        assert!((p.p50_us - 69.887).abs() < 0.07, "{p:?}");
    }

    #[test]
    fn latencies_print_with_three_significant_digits() {
        assert_eq!([us3(0.0), us3(1.234), us3(12.34), us3(123.4), us3(6012.0)], ["0", "1.23", "12.3", "123", "6012"]);
    }
}
