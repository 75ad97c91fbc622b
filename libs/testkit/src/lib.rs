//! What pfctools and the simulator share, without the AF_XDP shell: the test frames and
//! the stamp the generator writes and the sink reads ([`flow`]), the testbed's topology
//! file ([`topology`]), the PFC headroom calculator ([`headroom`] (the engine's, re-exported)), pcap files
//! ([`pcap`]) and the progress bar of long work ([`progress`]). The simulator builds on this crate and the engine alone, so it needs no
//! clang, libbpf or root.

pub mod flow;
/// Captures in pcapng, a crate of its own so that the switch can write them without the rest of this one.
pub use pfcpcap as pcap;
/// The headroom calculator lives with the buffer model it sizes, in the engine.
pub use pfcswitch_core::headroom;
pub mod progress;
pub mod topology;

use tagger::routes::explicit::{RouteEntry, RoutesFile};

/// The `q`-quantile of `sorted` samples by nearest rank (the smallest sample with at least
/// a `q` share of them at or below it): a sample itself, never a bucket's bound. 0 when
/// there are none.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The median of `v`, in any order (the mean of the middle two for an even count); 0
/// when there are none.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Host-to-host paths of node names as a routes file.
pub fn routes_file(paths: &[Vec<String>]) -> RoutesFile {
    RoutesFile { routes: paths.iter().map(|p| RouteEntry { path: Some(p.clone()), ..RouteEntry::default() }).collect() }
}

#[cfg(test)]
mod tests {
    #[test]
    fn quantiles_take_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(
            (super::quantile(&v, 0.5), super::quantile(&v, 0.99), super::quantile(&v, 1.0)),
            (50.0, 99.0, 100.0)
        );
        assert_eq!(super::quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(super::median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(super::median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(super::median(&[]), 0.0);
    }
}
