//! WRED and ECN marking on the egress queues: the decision a frame gets as it joins a
//! queue, from the queue's bytes at that moment and the queue's profile
//! ([`crate::config::WredProfile`]).
//!
//! Decided at enqueue, as the switch ASICs SONiC drives do (their WRED thresholds are the
//! queue's occupancy when a frame arrives): the frame that finds the queue long carries
//! the news. Marking at dequeue would send it a queue's wait sooner; enqueue keeps a
//! frame's fate settled before it is charged to any buffer, so that a dropped one costs
//! nothing.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::{Config, EcnMode};
use crate::ports::PortId;
use crate::priorities::{Priority, PRIORITIES};

/// What a queue's profile says about a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Below the minimum, or a draw that missed: nothing to do.
    Pass,
    /// ECN-capable and hit: mark it CE.
    Mark,
    /// Not ECN-capable (or the profile does not mark) and hit, on a lossy queue: drop it.
    Drop,
    /// Not ECN-capable, above the minimum of a lossless queue: it passes, counted.
    PassNotCapable,
}

/// One queue's curve, as the engine reads it per frame.
#[derive(Clone, Copy, Debug, Default)]
struct Curve {
    enabled: bool,
    marks: bool,
    min: u64,
    max: u64,
    /// The chance at `max`, 0..1.
    p_max: f64,
}

/// Every egress queue's curve, and the seeded draws.
#[derive(Debug)]
pub(super) struct Wred {
    curves: Vec<[Curve; PRIORITIES]>,
    rng: ChaCha8Rng,
}

impl Wred {
    pub(super) fn new(config: &Config) -> Wred {
        let curves = (0..config.ports.len())
            .map(|port| {
                Priority::table(|prio| {
                    let p = config.wred_profile(port, prio);
                    Curve {
                        enabled: p.wred_green_enable,
                        marks: p.ecn == EcnMode::EcnAll,
                        min: p.green_min_threshold,
                        max: p.green_max_threshold,
                        p_max: f64::from(p.green_drop_probability.min(100)) / 100.0,
                    }
                })
            })
            .collect();
        Wred { curves, rng: ChaCha8Rng::seed_from_u64(config.wred.seed) }
    }

    /// The verdict on a frame joining queue `q` of `egress`, which holds `depth` bytes:
    /// `capable` when the frame is ECN-capable, `lossless` when the queue is. A draw is
    /// made only between the thresholds, so runs stay reproducible whatever the traffic
    /// below them.
    pub(super) fn verdict(
        &mut self,
        egress: PortId,
        q: Priority,
        depth: u64,
        capable: bool,
        lossless: bool,
    ) -> Verdict {
        let c = self.curves[egress][q];
        if !c.enabled || depth < c.min {
            return Verdict::Pass;
        }
        let marks = capable && c.marks;
        if lossless && !marks {
            return Verdict::PassNotCapable;
        }
        let hit = depth >= c.max || {
            let p = c.p_max * (depth - c.min) as f64 / (c.max - c.min) as f64;
            self.rng.random::<f64>() < p
        };
        match (hit, marks) {
            (false, _) => Verdict::Pass,
            (true, true) => Verdict::Mark,
            (true, false) => Verdict::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, WredSettings};
    use crate::priorities::names::*;

    fn wred(settings: WredSettings) -> Wred {
        let mut c = Config::for_interfaces(&["a", "b"]);
        c.wred.priority.insert(P0, settings);
        Wred::new(&c)
    }

    fn curve(min: u64, max: u64, pct: u32) -> WredSettings {
        WredSettings {
            ecn: Some(EcnMode::EcnAll),
            wred_green_enable: Some(true),
            green_min_threshold: Some(min),
            green_max_threshold: Some(max),
            green_drop_probability: Some(pct),
        }
    }

    #[test]
    fn below_the_minimum_nothing_happens_and_above_the_maximum_everything_does() {
        let mut w = wred(curve(1000, 2000, 10));
        assert_eq!(w.verdict(PortId::new(0), P0, 999, true, false), Verdict::Pass);
        assert_eq!(w.verdict(PortId::new(0), P0, 2000, true, false), Verdict::Mark);
        assert_eq!(w.verdict(PortId::new(0), P0, 5000, false, false), Verdict::Drop, "not capable, lossy: dropped");
        assert_eq!(w.verdict(PortId::new(0), P0, 5000, false, true), Verdict::PassNotCapable, "lossless never drops");
        assert_eq!(w.verdict(PortId::new(0), P0, 1500, false, true), Verdict::PassNotCapable);
    }

    #[test]
    fn the_marking_fraction_between_the_thresholds_follows_the_line() {
        // Half way: 5 % of 10 %. 40000 draws: the binomial's standard deviation is 0.11 %,
        // so 5 % ± 0.5 % is over four of them.
        let mut w = wred(curve(1000, 3000, 10));
        let n = 40_000;
        let marked = (0..n).filter(|_| w.verdict(PortId::new(0), P0, 2000, true, false) == Verdict::Mark).count();
        let f = marked as f64 / f64::from(n);
        assert!((f - 0.05).abs() < 0.005, "{f}");
    }

    #[test]
    fn a_profile_that_does_not_mark_drops_capable_frames_on_lossy_queues_too() {
        let mut w = wred(WredSettings { ecn: Some(EcnMode::EcnNone), ..curve(0, 100, 100) });
        assert_eq!(w.verdict(PortId::new(0), P0, 100, true, false), Verdict::Drop);
        assert_eq!(w.verdict(PortId::new(0), P0, 100, true, true), Verdict::PassNotCapable);
    }

    #[test]
    fn the_defaults_mark_lossless_queues_only() {
        let c = Config::for_interfaces(&["a"]);
        let mut w = Wred::new(&c);
        let lossless = c.lossless_priorities()[0];
        assert_eq!(w.verdict(PortId::new(0), lossless, 64 << 10, true, true), Verdict::Mark);
        assert_eq!(w.verdict(PortId::new(0), P0, 1 << 20, false, false), Verdict::Pass, "lossy queues have WRED off");
    }

    #[test]
    fn the_same_seed_draws_the_same_verdicts() {
        let run = || {
            let mut w = wred(curve(0, 1000, 50));
            (0..1000).map(|i| w.verdict(PortId::new(0), P0, i, true, false)).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}
