//! `bench dcfit`: how soon DCFIT reports a PFC deadlock after the cycle of pauses closes,
//! on the three-switch ring, against SONiC's PFC watchdog default of 200 ms.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;

use pfcswitch::core::speed::Speed;
use pfcswitch::core::Priority;
use pfcswitch::stats::Stats;
use pfcswitch_table::Table;

use super::median;
use crate::harness::{RingLab, RingOptions};

/// SONiC's PFC watchdog detection time by default.
pub const SONIC_WATCHDOG_MS: f64 = 200.0;

#[derive(Args, Clone, Debug)]
pub struct DcfitArgs {
    /// Deadlocks to time (at 10G a blocked port does not always close the cycle: up to
    /// three times as many attempts are made).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Speed of every port.
    #[arg(long, default_value = "10G")]
    pub speed: Speed,
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct DcfitRun {
    /// The switch that reported first.
    pub detector: String,
    /// From the last ring pause of the cycle starting to the deadlock event, µs.
    pub detection_us: f64,
    pub path_length: u64,
}

/// When the cycle closed as of `t`: every switch's ring ingress (`ccw`) was pausing its
/// upstream at `t`; the cycle closed when the last of those pauses started.
fn cycle_closed_at(stats: &[Stats], t: u64) -> Option<u64> {
    let mut closed = 0;
    for s in stats {
        let ccw = s.ports.iter().find(|p| p.name == "ccw")?;
        let start = ccw
            .xoff_episodes
            .iter()
            .filter(|e| e.prio == Priority::new(3) && e.start_ns <= t && e.end_ns.is_none_or(|end| end >= t))
            .map(|e| e.start_ns)
            .max()?;
        closed = closed.max(start);
    }
    Some(closed)
}

fn one_run(speed: Speed) -> Result<DcfitRun> {
    let lab = RingLab::start("bench-dcfit", &RingOptions { speed, ..RingOptions::default() })?;
    let gens = lab.traffic(1.5)?;
    std::thread::sleep(Duration::from_millis(300));
    lab.block_briefly(Duration::from_millis(300))?;
    std::thread::sleep(Duration::from_millis(300));
    let switches = &lab.switches;
    let stats: Vec<Stats> = switches.iter().map(|s| s.stats()).collect::<Result<_>>()?;
    let mut first: Option<(u64, String, u64)> = None;
    for s in switches {
        for d in s.deadlocks()?.deadlocks {
            let t = d.event.detected_ns;
            if first.as_ref().is_none_or(|f| t < f.0) {
                first = Some((t, s.name.clone(), u64::from(d.event.path_length)));
            }
        }
    }
    for g in gens {
        let _ = g.finish(Duration::from_secs(30));
    }
    for s in lab.switches {
        s.stop();
    }
    let Some((t, detector, path_length)) = first else { bail!("no deadlock formed and was reported in this run") };
    let Some(closed) = cycle_closed_at(&stats, t) else {
        bail!("{detector} reported a deadlock at {t} ns when not every ring port was paused")
    };
    Ok(DcfitRun { detector, detection_us: (t - closed) as f64 / 1e3, path_length })
}

pub fn run(args: &DcfitArgs) -> Result<()> {
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    for k in 0..args.runs * 3 {
        if runs.len() == args.runs {
            break;
        }
        match one_run(args.speed) {
            Ok(r) => {
                eprintln!("  run {k}: {} reported after {:.0} µs", r.detector, r.detection_us);
                runs.push(r);
            }
            Err(e) => {
                eprintln!("  run {k}: {e}");
                failures.push(e.to_string());
            }
        }
    }
    let times: Vec<f64> = runs.iter().map(|r| r.detection_us).collect();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "runs": runs, "failures": failures }))?);
        return Ok(());
    }
    println!(
        "bench dcfit: three-switch ring at {}, deadlock driven by a 300 ms block; detection time from the cycle \
         closing (the last ring pause starting) to the deadlock event",
        args.speed
    );
    let mut t = Table::new(&["run", "detected by", "detection µs", "path length"]);
    for (k, r) in runs.iter().enumerate() {
        t.row(vec![k.to_string(), r.detector.clone(), format!("{:.0}", r.detection_us), r.path_length.to_string()]);
    }
    print!("{}", t.render());
    if !times.is_empty() {
        let max = times.iter().copied().fold(0.0, f64::max);
        println!(
            "median {:.2} ms, max {:.2} ms over {} deadlocks; SONiC's PFC watchdog detects after {} ms by default \
             ({:.0}× slower than the median)",
            median(&times) / 1e3,
            max / 1e3,
            times.len(),
            SONIC_WATCHDOG_MS,
            SONIC_WATCHDOG_MS * 1e3 / median(&times).max(1.0)
        );
    }
    if !failures.is_empty() {
        println!("{} attempts formed no deadlock (the cycle did not close): {:?}", failures.len(), failures);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcswitch::core::stats::{PortStats, SwitchStats, XoffEpisode};
    use pfcswitch::stats::PortReport;

    fn switch(starts: &[(u64, u64)]) -> Stats {
        let ccw = PortStats {
            name: "ccw".into(),
            xoff_episodes: starts
                .iter()
                .map(|&(s, e)| XoffEpisode { prio: Priority::new(3), start_ns: s, end_ns: Some(e).filter(|&e| e != 0) })
                .collect(),
            ..Default::default()
        };
        let switch =
            SwitchStats { ports: vec![PortReport { engine: ccw, ..Default::default() }], ..Default::default() };
        Stats { switch, ..Default::default() }
    }

    #[test]
    fn the_cycle_closes_with_the_last_pause_still_active() {
        let stats = [switch(&[(100, 0)]), switch(&[(50, 80), (300, 0)]), switch(&[(200, 0)])];
        assert_eq!(cycle_closed_at(&stats, 400), Some(300));
        // At 250 the second switch was not pausing: no cycle.
        assert_eq!(cycle_closed_at(&stats, 250), None);
    }
}
