//! The PFC pause-response test plan (storm from the rx side, test and background traffic
//! from the tx side with a sender response delay) with both outcomes, for priorities 3, 4
//! and 3+4; the calculator against the sweep; the DUT's response time.

use std::time::Duration;

use netns_tests::*;
use pfcswitch::core::Priority;
use pfctools::headroom::sweep::{self, SweepOptions, SweepReport};

/// The runs a sweep set aside as disturbed, for a failure's message: at each, the delay
/// in quanta, how much later than the delay the paused frames kept arriving (µs), and
/// how long the switch waited for a CPU (µs).
fn set_aside(report: &SweepReport) -> Vec<(u32, f64, Option<u64>)> {
    report.disturbed.iter().map(|r| (r.delay_quanta, r.overhead_us.round(), r.dut_cpu_wait_us)).collect()
}

/// A sweep, with each run it set aside and repeated noted as a repeat for the machine.
fn sweep_noted(opts: &SweepOptions) -> SweepReport {
    let report = sweep::run(opts, &|_| {}).unwrap();
    for (delay, overhead_us, cpu_wait_us) in set_aside(&report) {
        note_repeat(&format!(
            "a run at delay {delay} was set aside (the testbed added {overhead_us} µs; the switch waited \
             {cpu_wait_us:?} µs for a CPU)"
        ));
    }
    report
}

/// One run with a short sender delay (the headroom holds) and one with a long delay
/// (it does not), checking every step of the test plan, with `frame_size`-byte frames on
/// the wire (above 1518, on links at a jumbo MTU).
fn test_plan(prios: &[u8], frame_size: usize) {
    let _serial = serial();
    // As buffered: without the FCS.
    let frame_len = frame_size as u64 - 4;
    // Test traffic shares 50 % of line rate among the priorities: the longer the delay
    // must be to overrun each priority's headroom.
    let long = 3000 * prios.len() as u32;
    // A run the machine disturbed (the DUT or the sender off its CPU after the pause) is
    // repeated (`retries`); a case disturbed in every attempt fails as such, not as a
    // drop count the headroom would be blamed for.
    // A run counts as disturbed only if the testbed moved its response by enough to
    // turn its verdict (half the headroom's surplus or shortfall, by the calculator).
    let opts = SweepOptions {
        prios: prios.iter().map(|&p| Priority::new(p)).collect(),
        delays: vec![0, long],
        frame_size,
        judge_by_margin: true,
        ..SweepOptions::default()
    };
    // Background frames in the run: 50 % of 1G for 0.4 s (20 bytes of preamble and gap each).
    let background = 0.5e9 / 8.0 * opts.traffic.as_secs_f64() / (frame_len + 20) as f64;
    let report = sweep_noted(&opts);
    assert_eq!(report.runs.len(), 2);
    for run in &report.runs {
        assert!(
            !run.disturbed,
            "the machine disturbed all {} attempts at delay {} (the last added {:.0} µs to the response; set aside: {:?})",
            opts.retries + 1,
            run.delay_quanta,
            run.overhead_us,
            set_aside(&report)
        );
        // 1. The storm kept the tested priorities paused throughout.
        assert!(run.storm_continuous, "delay {}: storm had a gap", run.delay_quanta);
        // 2./4. Every background frame arrived; no test frame did.
        assert!(
            run.background_sent as f64 > background * 0.4,
            "background at 50 % of 1G for 0.4 s: {} of about {background:.0}",
            run.background_sent
        );
        assert_eq!(
            run.background_received, run.background_sent,
            "delay {}: background lost: {run:?}",
            run.delay_quanta
        );
        assert_eq!(run.prios.len(), prios.len());
        for p in &run.prios {
            assert_eq!(p.test_received, 0, "priority {} got through the storm", p.prio);
            assert!(p.xoff_sent > 0, "the DUT paused the sender on priority {}", p.prio);
            // 4. What was sent and not dropped sits in the DUT's buffer, within XOFF + headroom,
            // well inside the shared buffer.
            assert_eq!(p.held_bytes, p.test_sent_bytes - p.drops * frame_len, "{p:?}");
            assert!(p.held_bytes <= opts.xoff_bytes + opts.headroom_bytes + frame_len, "{p:?}");
            assert!(p.held_bytes < opts.shared_bytes);
        }
    }
    let (enough, exceeded) = (&report.runs[0], &report.runs[1]);
    for p in &enough.prios {
        assert_eq!(
            p.drops,
            0,
            "headroom enough for an immediate response: {p:?}; testbed added {:.0} µs, {} disturbed run(s) repeated",
            enough.overhead_us,
            report.disturbed.len()
        );
        assert!(p.headroom_watermark < opts.headroom_bytes);
    }
    for p in &exceeded.prios {
        assert!(p.drops > 0, "{long} quanta of delay overrun {} B of headroom: {p:?}", opts.headroom_bytes);
        assert!(p.headroom_watermark + frame_len > opts.headroom_bytes, "headroom filled before dropping");
    }
    assert_eq!(report.largest_lossless_delay_quanta, Some(0));
}

#[test]
fn headroom_test_plan_on_priority_3() {
    test_plan(&[3], 1000);
}

#[test]
fn headroom_test_plan_at_mtu_9000_with_jumbo_frames_on_priority_3() {
    test_plan(&[3], 9018);
}

#[test]
fn headroom_test_plan_on_priority_4() {
    test_plan(&[4], 1000);
}

#[test]
fn headroom_test_plan_on_priorities_3_and_4() {
    test_plan(&[3, 4], 1000);
}

/// `pfctools headroom --plan` at short timings: JSON verdicts, and the exit status.
fn plan(extra: &[&str]) -> (std::process::Output, serde_json::Value) {
    let pfctools = harness::bin("pfctools").unwrap();
    let out = std::process::Command::new(pfctools)
        // A run the machine disturbed is repeated, up to four times.
        .args(["headroom", "--plan", "--settle-s", "0.3", "--traffic-s", "0.4", "--retries", "4", "--json"])
        .args(extra)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    for r in report["disturbed"].as_array().into_iter().flatten() {
        note_repeat(&format!(
            "the plan set a run aside: delay {} quanta, the testbed added {} µs",
            r["delay_quanta"], r["overhead_us"]
        ));
    }
    (out, report)
}

#[test]
fn the_plan_passes_with_enough_headroom_and_fails_when_the_lossless_delay_overruns_it() {
    let _serial = serial();
    // The calculator's delays: half and twice the 48 KiB of headroom.
    let (out, r) = plan(&[]);
    assert!(out.status.success(), "{}\n{r}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(r["verdict"], "pass");
    let checks = r["checks"].as_array().unwrap();
    for case in ["lossless", "lossy"] {
        let names: Vec<&str> =
            checks.iter().filter(|k| k["case"] == case).map(|k| k["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "storm_continuous",
                "background_all_arrived",
                "no_test_frame_arrived",
                "test_bytes_against_buffer",
                "ingress_drops"
            ],
            "{case}"
        );
    }
    assert!(checks.iter().all(|k| k["passed"] == true), "{r}");
    let lossy_drops = checks.iter().find(|k| k["case"] == "lossy" && k["name"] == "ingress_drops").unwrap();
    assert!(lossy_drops["figures"]["dropped_frames"].as_f64().unwrap() > 0.0, "{lossy_drops}");
    // Background on every priority neither tested nor lossless, as the plan says.
    assert_eq!(r["background_prios"], serde_json::json!([0, 1, 2, 5, 6, 7]));

    // 3000 quanta at 1G need about 96 KiB: the headroom cannot absorb that "lossless" delay.
    let (out, r) = plan(&["--lossless-delay", "3000", "--lossy-delay", "6000"]);
    assert!(!out.status.success(), "{r}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("failed the plan"), "{stderr}");
    assert_eq!(r["verdict"], "fail");
    let failed: Vec<(&str, &str)> = r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["passed"] == false)
        .map(|k| (k["case"].as_str().unwrap(), k["name"].as_str().unwrap()))
        .collect();
    assert_eq!(failed, [("lossless", "test_bytes_against_buffer"), ("lossless", "ingress_drops")], "{r}");
}

#[test]
fn two_lossless_priorities_with_different_headroom_are_tested_side_by_side() {
    let _serial = serial();
    // 32 KiB of headroom on priority 3, 128 KiB on priority 4 (its own profile); each
    // carries 25 % of 1G, which a 4000-quanta delay turns into about 65 KiB in flight.
    // Judged by margin: a run counts as disturbed only if the testbed moved a response by
    // enough to turn that priority's verdict. How much each priority used against the
    // calculator is checked where it is exact, in the simulator
    // (`two_lossless_priorities_with_their_own_headroom_...` in sim/tests/sim/fidelity.rs).
    let mut opts = SweepOptions {
        prios: vec![Priority::new(3), Priority::new(4)],
        delays: vec![0, 4000],
        headroom_bytes: 32 << 10,
        judge_by_margin: true,
        ..SweepOptions::default()
    };
    opts.prio_headroom.insert(Priority::new(4), 128 << 10);
    let report = sweep_noted(&opts);
    let run = report.runs.iter().find(|r| r.delay_quanta == 4000).unwrap();
    assert!(
        !run.disturbed,
        "the machine disturbed every attempt (set aside: {:?}); the last: {run:?}",
        set_aside(&report)
    );
    let (p3, p4) = (&run.prios[0], &run.prios[1]);
    assert!(p3.drops > 0, "32 KiB overrun: {p3:?}");
    assert_eq!(p4.drops, 0, "128 KiB hold the same delay: {p4:?}");
    assert!(p4.headroom_watermark > 32 << 10, "priority 4 used more than priority 3 could: {p4:?}");
    assert!(p3.headroom_watermark <= 32 << 10);
    // Each priority is reported against its own headroom.
    let check = |prio| report.checks.iter().find(|c| c.delay_quanta == 4000 && c.prio == prio).unwrap();
    let (c3, c4) = (check(Priority::new(3)), check(Priority::new(4)));
    assert_eq!((c3.headroom_configured, c4.headroom_configured), (32 << 10, 128 << 10));
    assert!(!c3.lossless && c4.lossless, "{c3:?} {c4:?}");
    assert!(run.storm_continuous && run.background_received == run.background_sent, "{run:?}");
}

#[test]
fn the_real_switch_needs_headroom_growing_with_the_delay_as_the_calculator_says() {
    let _serial = serial();
    // How much the need grows per quantum, against the calculator to within one frame at
    // every delay, is checked where it is exact, in the simulator
    // (`the_headroom_a_sender_delay_needs_agrees_with_the_calculator_within_one_frame`).
    // Here, on real veth: the real switch takes both delays losslessly, and needs more at
    // the longer one by about what the calculator says, within what the testbed may add
    // to a run without it counting as disturbed (150 µs, 9.4 kB at this rate).
    let opts = SweepOptions {
        delays: vec![0, 1200],
        headroom_bytes: 96 << 10,
        repeats: 3,
        settle: Duration::from_millis(150),
        traffic: Duration::from_millis(150),
        ..SweepOptions::default()
    };
    let report = sweep_noted(&opts);
    assert!(
        report.runs.iter().all(|r| !r.disturbed),
        "the machine disturbed every attempt of a run (set aside: {:?})",
        set_aside(&report)
    );
    for c in &report.checks {
        assert!(c.lossless, "{c:?}");
    }
    // 1200 quanta at 1G are 614 µs; at 50 % of 1G with 1000-byte frames that is 32 wire
    // bytes per quantum, 996 of each 1020 buffered: about 37.5 kB more.
    let (first, last) = (&report.checks[0], &report.checks[1]);
    let grew = last.measured_bytes as f64 - first.measured_bytes as f64;
    let says = 1200.0 * 32.0 * 996.0 / 1020.0;
    let testbed = opts.max_overhead.as_secs_f64() * 0.5e9 / 8.0;
    assert!((grew - says).abs() <= testbed + 2.0 * 996.0, "grew {grew:.0} B where the calculator says {says:.0} B");
    // The plain calculator from the command line.
    let pfctools = harness::bin("pfctools").unwrap();
    let out = std::process::Command::new(pfctools)
        .args(["headroom", "--calc", "--speed", "10G", "--cable-m", "100", "--mtu", "1500", "--response-quanta", "500"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("37358 B  total per lossless priority"), "{text}");
}

#[test]
fn dut_response_time_is_measured_in_quanta_and_microseconds() {
    let _serial = serial();
    let pfctools = harness::bin("pfctools").unwrap();
    // A run whose every trial the machine disturbed (the flow held up in the testbed)
    // measures nothing: it is repeated.
    let (out, _) = judged_attempt(|_| {
        let out = std::process::Command::new(&pfctools)
            .args(["headroom", "--response-time", "--speed", "10G", "--repeats", "7", "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match stderr.contains("the machine disturbed them") {
            true => Attempt::Disturbed(stderr.into_owned()),
            false => Attempt::Judge(out),
        }
    });
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The DUT's own account: every pause measured, in µs and in quanta (51.2 ns at 10G).
    let dut = &r["dut"];
    // (A pause counts when its priority was flowing; the smooth flow nearly always is.)
    assert!(dut["count"].as_u64().unwrap() >= 4, "{r}");
    let (p50_us, p50_quanta) = (dut["p50_us"].as_f64().unwrap(), r["dut_p50_quanta"].as_f64().unwrap());
    assert!(p50_us < 1_000.0, "a software switch stops within microseconds, not milliseconds: {r}");
    assert!((p50_quanta - p50_us / 0.0512).abs() < 1.0, "{r}");
    // Seen from the receiver: at least some trials place the stop, and it is not stuck.
    assert!(r["external_count"].as_u64().unwrap() >= 1, "{r}");
    assert!(r["external_p50_us"].as_f64().unwrap() < 1_000.0, "{r}");
}
