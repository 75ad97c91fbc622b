//! The PFC pause-response test plan as written (SONiC's "PFC pause response headroom"):
//! two cases on the `tx — DUT — rx` testbed, each one run of [`super::sweep`]'s steps
//! with the plan's timings, judged check by check.
//!
//! - **lossless**: a sender response delay the headroom must absorb: no test frame
//!   arrives, the test bytes all sit in the DUT's buffer, and no ingress drop;
//! - **lossy**: a delay it must not absorb: more test bytes are sent than the DUT can
//!   hold for the priority, and the DUT drops at ingress.
//!
//! In both, the storm keeps the test priorities paused throughout and every background
//! frame arrives. A run the testbed disturbed (see [`super::sweep`]) is repeated; one
//! disturbed every time gives no verdict rather than a FAIL of the device.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Result};
use pfcswitch::core::Priority;
use serde::{Deserialize, Serialize};

use super::sweep::{self, RunOutcome, SweepOptions};
use crate::harness;
use crate::testbed::TestbedTopology;
use crate::testbed::{unique_name, Testbed, Topology};

/// The plan's timings: the storm alone for a second, then five seconds of traffic.
pub const PLAN_SETTLE: Duration = Duration::from_secs(1);
pub const PLAN_TRAFFIC: Duration = Duration::from_secs(5);

/// Which outcome a case expects of the headroom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Case {
    /// The headroom absorbs the sender's delay: nothing dropped.
    Lossless,
    /// It does not: the DUT drops at ingress.
    Lossy,
}

/// One of the plan's checks, for one case (and one priority, where it is per priority).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub case: Case,
    /// Stable names: `storm_continuous`, `background_all_arrived`,
    /// `no_test_frame_arrived`, `test_bytes_against_buffer`, `ingress_drops`.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prio: Option<Priority>,
    pub passed: bool,
    /// What the check looked at, by name (bytes, frames, or 0/1).
    pub figures: BTreeMap<String, f64>,
}

/// One case's run, as kept.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseRun {
    pub case: Case,
    pub delay_quanta: u32,
    pub delay_us: f64,
    /// The testbed disturbed every attempt: this case's checks give no verdict.
    pub disturbed: bool,
    pub run: RunOutcome,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// A case the testbed disturbed in every attempt, and no check failed elsewhere.
    NoVerdict,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanReport {
    pub options: SweepOptions,
    pub background_prios: Vec<Priority>,
    pub cases: Vec<CaseRun>,
    pub checks: Vec<Check>,
    /// Runs the testbed disturbed, set aside and repeated.
    pub disturbed: Vec<RunOutcome>,
    pub verdict: Verdict,
}

/// The calculator's choice of delays for the configured headroom: the lossless case's
/// needs half of each priority's headroom, the lossy case's twice of it, so that neither
/// sits near the edge that the testbed's own tens of µs could move.
pub fn pick_delays(opts: &SweepOptions) -> (u32, u32) {
    // The quanta of sender delay after which a priority needs `target` bytes.
    let delay_needing = |target: f64| -> f64 {
        let input = opts.calc_input(Duration::ZERO);
        let fixed = input.calculate().total_bytes as f64;
        let per_s = input.bytes_during(Duration::from_secs(1));
        let response_s = ((target - fixed) / per_s).max(0.0);
        response_s * opts.speed.bps() as f64 / pfcswitch::core::speed::BITS_PER_QUANTUM as f64
    };
    let lossless =
        opts.prios.iter().map(|&p| delay_needing(opts.headroom_for(p) as f64 / 2.0)).fold(f64::MAX, f64::min);
    let lossy = opts.prios.iter().map(|&p| delay_needing(opts.headroom_for(p) as f64 * 2.0)).fold(0.0, f64::max);
    (lossless.floor() as u32, lossy.ceil() as u32)
}

/// The plan's checks of one case's run.
pub fn checks(opts: &SweepOptions, case: Case, run: &RunOutcome) -> Vec<Check> {
    let frame_len = opts.frame_size as u64 - 4;
    let check = |name: &str, prio: Option<Priority>, passed: bool, figures: &[(&str, f64)]| Check {
        case,
        name: name.to_string(),
        prio,
        passed,
        figures: figures.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
    };
    let mut out = vec![check(
        "storm_continuous",
        None,
        run.storm_continuous,
        &[("continuous", f64::from(u8::from(run.storm_continuous)))],
    )];
    if !opts.background().is_empty() {
        out.push(check(
            "background_all_arrived",
            None,
            run.background_sent > 0 && run.background_received == run.background_sent,
            &[("sent_frames", run.background_sent as f64), ("received_frames", run.background_received as f64)],
        ));
    }
    for p in &run.prios {
        let prio = Some(p.prio);
        out.push(check(
            "no_test_frame_arrived",
            prio,
            p.test_received == 0,
            &[("sent_frames", p.test_sent_frames as f64), ("received_frames", p.test_received as f64)],
        ));
        // What the DUT can hold for the priority: its shared part up to XOFF, then headroom.
        let can_hold = opts.xoff_for(p.prio) + opts.headroom_for(p.prio);
        let held_all = p.held_bytes + p.drops * frame_len == p.test_sent_bytes;
        let passed = match case {
            Case::Lossless => held_all && p.test_sent_bytes <= can_hold,
            Case::Lossy => held_all && p.test_sent_bytes > can_hold,
        };
        out.push(check(
            "test_bytes_against_buffer",
            prio,
            passed,
            &[
                ("sent_bytes", p.test_sent_bytes as f64),
                ("held_bytes", p.held_bytes as f64),
                ("dropped_bytes", (p.drops * frame_len) as f64),
                ("can_hold_bytes", can_hold as f64),
                ("shared_bytes", opts.shared_bytes as f64),
            ],
        ));
        let passed = match case {
            Case::Lossless => p.drops == 0,
            Case::Lossy => p.drops > 0,
        };
        out.push(check(
            "ingress_drops",
            prio,
            passed,
            &[("dropped_frames", p.drops as f64), ("headroom_watermark_bytes", p.headroom_watermark as f64)],
        ));
    }
    out
}

/// The verdict over the cases' checks: a failed check in a case the testbed did not
/// disturb fails the plan; a disturbed case otherwise leaves it without a verdict.
pub fn verdict(cases: &[CaseRun], checks: &[Check]) -> Verdict {
    let disturbed = |c: Case| cases.iter().any(|r| r.case == c && r.disturbed);
    if checks.iter().any(|k| !k.passed && !disturbed(k.case)) {
        Verdict::Fail
    } else if cases.iter().any(|r| r.disturbed) {
        Verdict::NoVerdict
    } else {
        Verdict::Pass
    }
}

/// Runs both cases; `progress` hears about each run (disturbed ones too).
pub fn run(opts: &SweepOptions, delays: (u32, u32), progress: &dyn Fn(Case, &RunOutcome)) -> Result<PlanReport> {
    opts.validate()?;
    if delays.0 >= delays.1 {
        bail!("the lossless case's delay ({}) must be shorter than the lossy case's ({})", delays.0, delays.1);
    }
    let tb = Testbed::up(&unique_name("plan"), Topology::star(2))?;
    let (mut cases, mut disturbed, mut checks) = (Vec::new(), Vec::new(), Vec::new());
    for (case, delay) in [(Case::Lossless, delays.0), (Case::Lossy, delays.1)] {
        let run = harness::undisturbed(
            opts.retries,
            harness::RETRY_PAUSE,
            sweep::is_disturbed,
            |r| disturbed.push(r),
            || {
                let r = sweep::trial(&tb, opts, delay)?;
                progress(case, &r);
                Ok(r)
            },
        )?;
        checks.extend(self::checks(opts, case, &run));
        cases.push(CaseRun { case, delay_quanta: delay, delay_us: run.delay_us, disturbed: run.disturbed, run });
    }
    let verdict = verdict(&cases, &checks);
    Ok(PlanReport { options: opts.clone(), background_prios: opts.background(), cases, checks, disturbed, verdict })
}

/// The plan's checks as a table, PASS or FAIL each.
pub fn text(r: &PlanReport) -> String {
    let o = &r.options;
    let mut out = format!(
        "PFC pause-response test plan at {}: test priorities {:?} at {}% of line rate, background on {:?} at {}%, \
         {} B frames; storm alone {:.1} s, then traffic {:.1} s\n",
        o.speed,
        o.prios,
        o.test_load,
        r.background_prios,
        o.background_load,
        o.frame_size,
        o.settle.as_secs_f64(),
        o.traffic.as_secs_f64()
    );
    for p in &o.prios {
        out += &format!(
            "  priority {p}: XOFF {} B, headroom {} B (shared buffer {} B)\n",
            o.xoff_for(*p),
            o.headroom_for(*p),
            o.shared_bytes
        );
    }
    for c in &r.cases {
        out += &format!(
            "\n{} case: sender response delay {} quanta ({:.1} µs){}\n",
            match c.case {
                Case::Lossless => "lossless",
                Case::Lossy => "lossy",
            },
            c.delay_quanta,
            c.delay_us,
            if c.disturbed { " — DISTURBED by the testbed in every attempt: no verdict" } else { "" }
        );
        let mut t = pfcswitch_table::Table::new(&["check", "prio", "result", "figures"]);
        for k in r.checks.iter().filter(|k| k.case == c.case) {
            let figures: Vec<String> = k.figures.iter().map(|(n, v)| format!("{n} {v}")).collect();
            t.row(vec![
                k.name.clone(),
                k.prio.map_or("-".into(), |p| p.to_string()),
                match (k.passed, c.disturbed) {
                    (_, true) => "n/a".into(),
                    (true, false) => "PASS".into(),
                    (false, false) => "FAIL".into(),
                },
                figures.join(", "),
            ]);
        }
        out += &t.render();
    }
    if !r.disturbed.is_empty() {
        out += &format!("\n{} run(s) the testbed disturbed were set aside and repeated\n", r.disturbed.len());
    }
    out += &format!(
        "\nverdict: {}\n",
        match r.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NoVerdict => "NO VERDICT (the testbed disturbed a case in every attempt)",
        }
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headroom::calc::CalcInput;
    use crate::headroom::sweep::PrioOutcome;

    fn outcome(sent: u64, held: u64, drops: u64) -> RunOutcome {
        RunOutcome {
            storm_continuous: true,
            background_sent: 1000,
            background_received: 1000,
            prios: vec![PrioOutcome {
                prio: Priority::new(3),
                test_sent_frames: sent / 996,
                test_sent_bytes: sent,
                held_bytes: held,
                drops,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn failed(checks: &[Check]) -> Vec<&str> {
        checks.iter().filter(|k| !k.passed).map(|k| k.name.as_str()).collect()
    }

    #[test]
    fn a_headroom_that_holds_passes_the_lossless_case_and_fails_the_lossy_one() {
        let opts = SweepOptions::default();
        // 64 KiB XOFF + 48 KiB headroom; 100 frames sent, all held.
        let held = outcome(99_600, 99_600, 0);
        assert!(failed(&checks(&opts, Case::Lossless, &held)).is_empty());
        assert_eq!(failed(&checks(&opts, Case::Lossy, &held)), ["test_bytes_against_buffer", "ingress_drops"]);
        // 130 frames sent, 15 dropped: more than the DUT can hold.
        let over = outcome(129_480, 114_540, 15);
        assert!(failed(&checks(&opts, Case::Lossy, &over)).is_empty());
        assert_eq!(failed(&checks(&opts, Case::Lossless, &over)), ["test_bytes_against_buffer", "ingress_drops"]);
    }

    #[test]
    fn lost_background_a_leaked_test_frame_or_a_storm_gap_fail_either_case() {
        let opts = SweepOptions::default();
        let mut r = outcome(99_600, 99_600, 0);
        r.background_received = 999;
        r.prios[0].test_received = 1;
        r.storm_continuous = false;
        assert_eq!(
            failed(&checks(&opts, Case::Lossless, &r)),
            ["storm_continuous", "background_all_arrived", "no_test_frame_arrived"]
        );
        // Bytes that are neither held nor counted as dropped are a failure too.
        let missing = outcome(99_600, 90_000, 0);
        assert_eq!(failed(&checks(&opts, Case::Lossless, &missing)), ["test_bytes_against_buffer"]);
    }

    #[test]
    fn a_disturbed_case_gives_no_verdict_but_never_hides_a_failure_elsewhere() {
        let opts = SweepOptions::default();
        let case = |case, disturbed| CaseRun { case, delay_quanta: 0, delay_us: 0.0, disturbed, run: outcome(0, 0, 0) };
        let good = outcome(99_600, 99_600, 0);
        let mut all = checks(&opts, Case::Lossless, &good);
        all.extend(checks(&opts, Case::Lossy, &good));
        // The lossy case fails its checks, but it was disturbed: no verdict.
        assert_eq!(verdict(&[case(Case::Lossless, false), case(Case::Lossy, true)], &all), Verdict::NoVerdict);
        assert_eq!(verdict(&[case(Case::Lossless, false), case(Case::Lossy, false)], &all), Verdict::Fail);
        // A failure in an undisturbed case fails the plan whatever else happened.
        assert_eq!(verdict(&[case(Case::Lossless, true), case(Case::Lossy, false)], &all), Verdict::Fail);
    }

    #[test]
    fn the_calculator_picks_a_delay_each_side_of_the_headroom() {
        let opts = SweepOptions::default();
        let (lossless, lossy) = pick_delays(&opts);
        let need = |q: u32| {
            let input = CalcInput {
                speed: opts.speed,
                cable_m: 0.0,
                max_frame: 996,
                response: opts.speed.bit_times(u64::from(q) * 512),
                switch_delay: Duration::ZERO,
                load: 0.5,
            };
            input.calculate().total_bytes
        };
        let headroom = opts.headroom_bytes;
        assert!(need(lossless) <= headroom / 2 && need(lossless + 1) > headroom / 2, "{lossless}");
        assert!(need(lossy) >= headroom * 2 && need(lossy - 1) < headroom * 2, "{lossy}");
        // Two priorities with different headroom: one delay for both, each side.
        let mut two = SweepOptions { prios: vec![Priority::new(3), Priority::new(4)], ..SweepOptions::default() };
        two.prio_headroom.insert(Priority::new(4), headroom * 3);
        let (l2, y2) = pick_delays(&two);
        assert!(l2 < y2);
        let mut only4 =
            SweepOptions { prios: vec![Priority::new(4)], headroom_bytes: headroom * 3, ..SweepOptions::default() };
        only4.test_load = 25.0;
        assert_eq!(pick_delays(&only4).1, y2, "the lossy delay overruns the larger headroom too");
    }
}
