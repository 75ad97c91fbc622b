//! A fixed-size latency histogram: 1 µs buckets up to 1 ms, then power-of-two buckets.
//! Recording allocates at most [`CHUNKS`] times in a histogram's life, never per record.

use serde::Serialize;
use std::time::Duration;

const LINEAR: usize = 1000;
const LOG: usize = 32;
const BUCKETS: usize = LINEAR + LOG;

/// Buckets are kept in chunks of this many, each made at its first count.
const CHUNK: usize = 64;
const CHUNKS: usize = BUCKETS.div_ceil(CHUNK);

/// Durations in 1 µs, then power-of-two, buckets.
///
/// The buckets are made a chunk at a time, where a duration first falls: what one
/// histogram records (a flow's frame latencies, a switch's reaction times) spans a few
/// chunks of its 17, and a simulated fabric keeps thousands of histograms (8 KiB each
/// made whole, 16 of a k=16 fat-tree's 137 MiB).
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    chunks: [Option<Box<[u64; CHUNK]>>; CHUNKS],
    count: u64,
    max_ns: u64,
    sum_ns: u128,
}

/// A summary of recorded durations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Percentiles {
    /// Durations recorded.
    pub count: u64,
    /// Median, µs (the upper bound of its bucket).
    pub p50_us: f64,
    /// 90th percentile, µs (the upper bound of its bucket).
    pub p90_us: f64,
    /// 99th percentile, µs (the upper bound of its bucket).
    pub p99_us: f64,
    /// 99.9th percentile, µs (the upper bound of its bucket).
    #[serde(default)]
    pub p999_us: f64,
    /// The longest, µs.
    pub max_us: f64,
    /// The mean, µs.
    pub mean_us: f64,
}

/// A histogram as it travels (between the ranks of a split simulation): the buckets that
/// hold anything, as `(index, count)`.
#[derive(Serialize, serde::Deserialize)]
struct Sparse {
    buckets: Vec<(u16, u64)>,
    count: u64,
    max_ns: u64,
    sum_ns: u128,
}

impl Serialize for Histogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let buckets = self.buckets().enumerate().filter(|&(_, n)| n > 0).map(|(i, n)| (i as u16, n)).collect();
        Sparse { buckets, count: self.count, max_ns: self.max_ns, sum_ns: self.sum_ns }.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for Histogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Histogram, D::Error> {
        let sparse = Sparse::deserialize(d)?;
        let mut h =
            Histogram { count: sparse.count, max_ns: sparse.max_ns, sum_ns: sparse.sum_ns, ..Histogram::default() };
        for (i, n) in sparse.buckets {
            if usize::from(i) >= BUCKETS {
                return Err(serde::de::Error::custom(format!("no bucket {i}")));
            }
            *h.bucket_mut(usize::from(i)) = n;
        }
        Ok(h)
    }
}

impl Histogram {
    /// Every bucket's count, in order.
    fn buckets(&self) -> impl Iterator<Item = u64> + '_ {
        self.chunks.iter().flat_map(|c| c.as_deref().map_or([0; CHUNK], |c| *c)).take(BUCKETS)
    }

    /// Bucket `i` (below [`BUCKETS`]), its chunk made if it was not.
    fn bucket_mut(&mut self, i: usize) -> &mut u64 {
        &mut self.chunks[i / CHUNK].get_or_insert_with(|| Box::new([0; CHUNK]))[i % CHUNK]
    }

    /// Records one duration.
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let us = ns / 1000;
        let idx = if (us as usize) < LINEAR {
            us as usize
        } else {
            // 1 ms..2 ms → LINEAR, 2..4 ms → LINEAR + 1, ...
            let doublings = 63 - (us / LINEAR as u64).leading_zeros() as usize;
            LINEAR + doublings.min(LOG - 1)
        };
        *self.bucket_mut(idx) += 1;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
        self.sum_ns += u128::from(ns);
    }

    /// Upper bound (µs) of the bucket holding the `q` quantile.
    fn quantile_us(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, n) in self.buckets().enumerate() {
            seen += n;
            if seen >= rank {
                let upper = if i < LINEAR { (i + 1) as f64 } else { (LINEAR << (i - LINEAR + 1)) as f64 };
                return upper.min(self.max_ns as f64 / 1000.0);
            }
        }
        self.max_ns as f64 / 1000.0
    }

    /// The summary of what was recorded.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            count: self.count,
            p50_us: self.quantile_us(0.5),
            p90_us: self.quantile_us(0.9),
            p99_us: self.quantile_us(0.99),
            p999_us: self.quantile_us(0.999),
            max_us: self.max_ns as f64 / 1000.0,
            mean_us: if self.count == 0 { 0.0 } else { self.sum_ns as f64 / self.count as f64 / 1000.0 },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_travels_whole() {
        let mut h = Histogram::default();
        for us in [1, 3, 3, 999, 1500, 70_000] {
            h.record(Duration::from_micros(us) + Duration::from_nanos(7));
        }
        let back: Histogram = serde_json::from_str(&serde_json::to_string(&h).unwrap()).unwrap();
        let whole = |h: &Histogram| (h.buckets().collect::<Vec<_>>(), h.count, h.max_ns, h.sum_ns);
        assert_eq!(whole(&back), whole(&h));
        assert_eq!(h.chunks.iter().flatten().count(), 2, "the chunks of 0-63 µs and of 960 µs on");
        assert!(serde_json::from_str::<Histogram>(r#"{"buckets":[[5000,1]],"count":1,"max_ns":1,"sum_ns":1}"#).is_err());
    }

    #[test]
    fn quantiles_within_a_bucket() {
        let mut h = Histogram::default();
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us) - Duration::from_nanos(500));
        }
        let p = h.percentiles();
        assert_eq!(p.count, 100);
        assert_eq!(p.p50_us, 50.0);
        assert_eq!(p.p99_us, 99.0);
        assert!((p.max_us - 99.5).abs() < 1e-9);
        h.record(Duration::from_millis(3));
        assert_eq!(h.percentiles().max_us, 3000.0);
        assert_eq!(Histogram::default().percentiles(), Percentiles::default());
    }
}
