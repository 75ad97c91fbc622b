//! The binary search of RFC 2544 §26.1, its confirmation, and the loss curve's rates:
//! plain functions over a trial closure, tested without a network.

use super::*;

/// The binary search of §26.1 over `trial`, given the unpaced trial `ceiling`: the
/// highest rate that lost nothing (0 when none did), and every trial it made after the
/// unpaced one. A trial the sender could not keep up with counts at the rate it offered.
/// A rate that lost frames is tried up to `retries` more times, and passes if one of
/// them loses nothing.
pub fn search(
    ceiling: &Trial,
    resolution: f64,
    max_trials: usize,
    retries: usize,
    mut trial: impl FnMut(f64) -> Result<Trial>,
) -> Result<(f64, Vec<Trial>)> {
    let mut trials = Vec::new();
    if ceiling.lost() == 0 {
        return Ok((ceiling.offered_fps, trials));
    }
    let (mut lo, mut hi) = (0.0, ceiling.offered_fps);
    let mut rates = 0;
    while rates + 1 < max_trials && hi > 0.0 && (hi - lo) / hi > resolution {
        rates += 1;
        let rate = (lo + hi) / 2.0;
        let mut t = trial(rate)?;
        for _ in 0..retries {
            if t.lost() == 0 {
                break;
            }
            trials.push(t);
            t = trial(rate)?;
        }
        if t.lost() == 0 {
            lo = t.offered_fps.max(lo);
        } else {
            hi = t.offered_fps.min(hi);
        }
        trials.push(t);
    }
    Ok((lo, trials))
}

/// A confirmation that lost frames at a rate lowers it by this share of itself ...
pub(super) const CONFIRM_STEP: f64 = 0.05;
/// ... up to this many times.
pub(super) const CONFIRM_STEPS: usize = 4;

/// The search's answer after [`confirm`].
#[derive(Clone, Debug, PartialEq)]
pub struct Confirmed {
    /// The rate that held, or the search's when none did.
    pub rate: f64,
    pub held: bool,
    /// Every confirmation trial, in order; the last gives the latency.
    pub trials: Vec<Trial>,
}

/// Confirms the rate the search `found`: a zero-loss trial at a rate where the DUT is at
/// its limit can be luck, and the same rate may lose frames in the next. Trials at the
/// rate (which also give its latency) must lose nothing, a lossy one made again as a
/// search trial is (`retries`); a rate that still lost frames gives way to one
/// `CONFIRM_STEP` lower, up to `CONFIRM_STEPS` times.
pub fn confirm(found: f64, retries: usize, mut trial: impl FnMut(f64) -> Result<Trial>) -> Result<Confirmed> {
    let mut trials = Vec::new();
    let mut rate = found;
    for _ in 0..=CONFIRM_STEPS {
        for _ in 0..=retries {
            let t = trial(rate)?;
            let clean = t.lost() == 0;
            let offered = t.offered_fps;
            trials.push(t);
            if clean {
                return Ok(Confirmed { rate: offered.min(rate), held: true, trials });
            }
        }
        rate *= 1.0 - CONFIRM_STEP;
    }
    Ok(Confirmed { rate: found, held: false, trials })
}

/// The rates of the loss curve: steps of a tenth of `ceiling` above `throughput`, then
/// the ceiling itself.
pub fn loss_rates(throughput: f64, ceiling: f64) -> Vec<f64> {
    let step = ceiling / 10.0;
    let mut rates: Vec<f64> =
        (1..10).map(|k| throughput + step * k as f64).take_while(|&r| r < ceiling * 0.99).collect();
    if throughput < ceiling * 0.99 {
        rates.push(ceiling);
    }
    rates
}
