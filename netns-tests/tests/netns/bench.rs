//! The benchmark commands end to end, at their shortest: what they report, not how fast.

use std::time::Duration;

use netns_tests::*;
use pfctools::testbed::{existing_namespaces, namespace_pids};

/// Runs `pfctools` with `args` (a `--json` report among them) and asserts it succeeded:
/// the report, and what it said on stderr.
fn pfctools_json(args: &[&str]) -> (serde_json::Value, String) {
    let out = std::process::Command::new(harness::bin("pfctools").unwrap()).args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (report, stderr)
}

#[test]
fn rfc2544_reports_throughput_latency_and_the_switchs_view_per_dut_with_ratios_and_a_plot() {
    let _serial = serial_as_the_machine_is();
    let plot = std::env::temp_dir().join(format!("pfcs-rfc2544-{}.svg", std::process::id()));
    // One 64-byte size, a coarse search of one-second trials: the report's shape, not the
    // rates (the bench's own runs give those). Three trials, so that the search reaches a
    // quarter of the sender's ceiling when half of it is beyond the switch (at 64 bytes
    // the sender's ceiling was up to 809 k frames/s, the switch's zero-loss rate 330-380 k).
    let (r, stderr) = pfctools_json(&[
        "bench",
        "rfc2544",
        "--sizes",
        "64",
        "--duts",
        "pfcswitch,direct",
        "--max-trials",
        "3",
        "--resolution",
        "0.5",
        "--trial-s",
        "1",
        "--json",
        "--plot",
        plot.to_str().expect("a temporary path in UTF-8"),
    ]);
    assert_eq!(r["trial_s"], 1.0, "the report says how long its trials were");
    let results = r["results"].as_array().unwrap();
    let duts: Vec<&str> = results.iter().map(|x| x["dut"].as_str().unwrap()).collect();
    assert_eq!(duts, ["pfcswitch", "direct"], "{stderr}");
    for x in results {
        let dut = x["dut"].as_str().unwrap();
        assert_eq!(x["size"], 64);
        let fps = x["throughput_fps"].as_f64().unwrap();
        assert!(fps > 0.0 && fps <= x["sender_max_fps"].as_f64().unwrap(), "{dut}: {x}");
        let latency_trials = x["latency_trials"].as_array().unwrap();
        assert!(!latency_trials.is_empty(), "{dut}");
        assert!(x["latency"]["count"].as_u64().unwrap() > 0, "{dut}: latency measured at the throughput rate");
        let last_lost = latency_trials.last().map(|t| t["sent"].as_u64().unwrap() - t["received"].as_u64().unwrap());
        let confirmed = x["confirmed"].as_bool().unwrap();
        assert_eq!(confirmed, last_lost == Some(0), "{dut}");
        if confirmed {
            assert!(fps <= x["search_fps"].as_f64().unwrap(), "{dut}: confirmed at or below the search's rate");
        }
        // Every DUT at the same offered loads: shares of the lower zero-loss rate.
        let lowest = results.iter().map(|y| y["throughput_fps"].as_f64().unwrap()).fold(f64::INFINITY, f64::min);
        let loads = x["equal_load"].as_array().unwrap();
        let shares: Vec<f64> = loads.iter().map(|p| p["share"].as_f64().unwrap()).collect();
        assert_eq!(shares, [0.1, 0.5, 0.9], "{dut}");
        for p in loads {
            let asked = p["trial"]["asked_fps"].as_f64().unwrap();
            assert!((asked - lowest * p["share"].as_f64().unwrap()).abs() < 1.0, "{dut}: {p}");
            assert!(p["trial"]["latency"]["count"].as_u64().unwrap() > 0, "{dut}: {p}");
        }
        // Only a trial through pfcswitch carries the switch's own account of it, and that
        // says where the trial's frames waited: every stage saw them.
        let equal_load_trials: Vec<&serde_json::Value> = loads.iter().map(|p| &p["trial"]).collect();
        for t in x["trials"].as_array().unwrap().iter().chain(latency_trials).chain(equal_load_trials) {
            assert_eq!(t.get("switch").is_some(), dut == "pfcswitch", "{dut}: {t}");
            if let Some(sw) = t.get("switch").filter(|_| t["received"].as_u64().unwrap() > 0) {
                for stage in ["rx_ring", "engine", "tx_ring"] {
                    assert!(sw["stages"][stage]["count"].as_u64().unwrap() > 0, "{stage}: {t}");
                }
            }
        }
    }
    let ratio = r["ratios"][0]["vs_direct"].as_f64().unwrap();
    let expect = results[0]["throughput_fps"].as_f64().unwrap() / results[1]["throughput_fps"].as_f64().unwrap();
    assert!((ratio - expect).abs() < 1e-9, "{ratio} against {expect}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    let _ = std::fs::remove_file(&plot);
    assert!(svg.contains("RFC 2544 throughput") && svg.contains("pfcswitch"), "the plot names the DUTs");
}

#[test]
fn pause_response_reports_each_speed_beside_802_3_and_the_storms_it_ran() {
    let _serial = serial_as_the_machine_is();
    let (r, _) =
        pfctools_json(&["bench", "pause-response", "--speeds", "1G,25G", "--repeats", "5", "--storms", "2", "--json"]);
    let (frame, batch) = (r["frame_bytes"].as_u64().unwrap(), r["batch"].as_u64().unwrap());
    // The figures below count from arrival stamps taken where each frame arrived (the
    // metadata area, or in front of the frame where a kernel refuses that): the bound is
    // judged for those stamps. The rx clock would place the probe's frames late by their
    // wait on its ring, and is what `--arrival-stamp rx-clock` measures.
    let stamp = r["arrival_stamp"].as_str().unwrap_or_else(|| panic!("the report names its arrival stamps: {r}"));
    assert!(["metadata", "in-frame"].contains(&stamp), "{stamp}");
    let rows = r["rows"].as_array().unwrap();
    let speeds: Vec<&str> = rows.iter().map(|x| x["speed"].as_str().unwrap()).collect();
    assert_eq!(speeds, ["1G", "25G"]);
    // 802.3's allowance where this project tables it (1G: 2 quanta), none at 25G.
    assert_eq!(rows[0]["allowance_quanta"].as_u64(), Some(2));
    assert_eq!(rows[0]["allowance_bytes"].as_u64(), Some(2 * 64 + 1518));
    assert!(rows[1]["allowance_quanta"].is_null());
    for x in rows {
        // Twice the trials asked for are sent, so that disturbed ones can be left out.
        assert_eq!(x["trials"].as_u64(), Some(10), "{x}");
        assert!(x["placed"].as_u64().unwrap() <= 10, "{x}");
        let most = x["after_pause_max_frames"].as_u64().unwrap();
        assert_eq!(x["after_pause_max_bytes"].as_u64(), Some(most * frame), "{x}");
        assert_eq!(x["bound_bytes"].as_u64(), Some(1518 + batch * frame), "{x}");
        // What left after a pause is within one maximum frame and one tx batch: the
        // switch reads a pause before it puts more of that priority on a tx ring.
        let placed = x["placed"].as_u64().unwrap() > 0;
        if placed {
            assert!(most * frame <= 1518 + batch * frame, "{x}");
        }
        assert_eq!(x["within_bound"].as_bool(), Some(placed), "{x}");
        assert_eq!(x["storms"].as_u64(), Some(2), "{x}");
        assert!(x["storms_judged"].as_u64().unwrap() <= 2, "{x}");
        // The switch's own count of frames through its storms is reported; whether it is
        // zero hangs on the loop reading each refresh in time, which a busy machine
        // decides (the engine's unit tests check how it counts).
        assert!(x["storm_sent_past_pause"].is_u64(), "{x}");
    }
}

#[test]
fn ping_reports_each_devices_round_trips_the_cpu_its_process_spent_and_the_machines_wake() {
    let _serial = serial_as_the_machine_is();
    let (r, _) = pfctools_json(&[
        "bench",
        "ping",
        "--duts",
        "pfcswitch,pfcswitch-polling,bridge",
        "--count",
        "20",
        "--interval-ms",
        "10",
        "--rounds",
        "1",
        "--json",
    ]);
    let results = r["results"].as_array().unwrap();
    let duts: Vec<&str> = results.iter().map(|x| x["dut"].as_str().unwrap()).collect();
    assert_eq!(duts, ["pfcswitch", "pfcswitch-polling", "bridge"]);
    for x in results {
        // An idle device answers every request.
        assert_eq!((x["sent"].as_u64(), x["received"].as_u64()), (Some(20), Some(20)), "{x}");
        let f = |k: &str| x[k].as_f64().unwrap();
        assert!(0.0 < f("p50_us") && f("p50_us") <= f("p99_us") && f("p99_us") <= f("max_us"), "{x}");
        // Only a device with a process of its own has a CPU figure; no OVS, no ratio.
        assert_eq!(x["cpu_pct"].is_number(), x["dut"] != "bridge", "{x}");
        assert!(x["p50_vs_ovs"].is_null(), "{x}");
    }
    // A loop that never sleeps spends a CPU whenever it has one (a quarter even with
    // three others wanting the machine's two); one that sleeps when idle spends less.
    let cpu = |i: usize| results[i]["cpu_pct"].as_f64().unwrap();
    assert!(cpu(1) > 25.0 && cpu(0) < cpu(1), "{} against {}", cpu(0), cpu(1));
    // The machine's wake, once per request for a sleeper and for a spinner, on two CPUs
    // (none on a machine of one).
    let w = &r["wake"];
    if w.is_null() {
        // The bench's own reading of this process's CPUs (affinity, not a cgroup quota).
        assert_eq!(pfcswitch::sys::allowed_cpus().unwrap().len(), 1);
        return;
    }
    let n = |k: &str| w[k]["count"].as_u64().unwrap();
    assert_eq!(n("asleep") + n("spinning") + w["lost"].as_u64().unwrap(), 40, "{w}");
    assert_ne!(w["waker_cpu"], w["woken_cpu"], "{w}");
}

#[test]
fn headroom_compare_puts_the_testbeds_headroom_beside_the_simulators_at_each_delay() {
    let _serial = serial();
    let (r, _) = pfctools_json(&["headroom", "--compare", "--delays", "0,3000", "--repeats", "1", "--json"]);
    let rows = r["rows"].as_array().unwrap();
    let delays: Vec<u64> = rows.iter().map(|x| x["delay_quanta"].as_u64().unwrap()).collect();
    assert_eq!(delays, [0, 3000]);
    let n = |x: &serde_json::Value, k: &str| x[k].as_i64().unwrap_or_else(|| panic!("{k} in {x}"));
    for x in rows {
        // The simulator never needs more than the calculator's worst case.
        assert!(n(x, "sim_bytes") <= n(x, "calculator_bytes"), "{x}");
        assert_eq!(n(x, "difference_bytes"), n(x, "testbed_bytes") - n(x, "sim_bytes"), "{x}");
    }
    // 48 KiB hold an immediate response on both sides; 3000 quanta need about twice that.
    let (now, late) = (&rows[0], &rows[1]);
    assert_eq!((n(now, "sim_drops"), n(now, "testbed_drops")), (0, 0), "{now}");
    assert!(n(late, "sim_drops") > 0 && n(late, "testbed_drops") > 0, "{late}");
}

#[test]
fn scrape_compares_runs_without_and_with_scrapers_and_accounts_for_every_frame() {
    let _serial = serial_as_the_machine_is();
    let (r, stderr) = pfctools_json(&[
        "bench",
        "scrape",
        "--rounds",
        "1",
        "--seconds",
        "1",
        "--rate",
        "50k",
        "--scrapers",
        "2",
        "--json",
    ]);
    let runs = r["runs"].as_array().unwrap();
    let scrapers: Vec<u64> = runs.iter().map(|x| x["scrapers"].as_u64().unwrap()).collect();
    assert_eq!(scrapers, [0, 2], "round 0 runs without scrapers first: {stderr}");
    for x in runs {
        let (sent, received, lost) =
            (x["sent"].as_u64().unwrap(), x["received"].as_u64().unwrap(), x["lost"].as_u64().unwrap());
        assert_eq!(sent, 50_000, "{x}");
        assert_eq!(received + lost, sent, "{x}");
        let scraped = x["scrapers"].as_u64().unwrap() > 0;
        // Each scrape read the endpoint's whole answer, kernel counters filled in off the
        // forwarding thread.
        assert_eq!(x["scrapes"].as_u64().unwrap() > 0, scraped, "{x}");
        assert_eq!(x["scrape_p50_ms"].as_f64().unwrap() > 0.0, scraped, "{x}");
    }
}

#[test]
fn a_short_soak_accounts_for_every_frame_sent_through_random_faults() {
    // Not a measure of speed but of PFC's timing: the senders must obey pauses within
    // what the headroom covers, which a vCPU waking milliseconds late breaks (one run
    // without the wake-latency request lost 571 lossless frames with no sender that
    // ignores pauses). So it holds the request, as the PFC tests do; and a run whose
    // switch or a sender was kept off its CPU for longer than a headroom lasts, and
    // overflowed one, says nothing about the switch (the soak reports it as disturbed):
    // it is repeated.
    let _serial = serial();
    let (r, attempt) = judged_attempt(|_| {
        let out = std::process::Command::new(harness::bin("pfctools").unwrap())
            .args(["bench", "soak", "--minutes", "0.5", "--seed", "7", "--raised", "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        assert_eq!(out.status.success(), r["passed"].as_bool().unwrap(), "{stderr}");
        match r["disturbed"].as_str() {
            Some(why) => Attempt::Disturbed(why.to_string()),
            None => Attempt::Judge(r),
        }
    });
    let a = &r["accounting"];
    assert_eq!(a["unaccounted"], 0, "attempt {attempt}: {r:#}");
    assert_eq!(a["duplicates"], 0, "{r:#}");
    assert!(a["received"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(r["drops_unexplained"], serde_json::json!({}), "attempt {attempt}: {r:#}");
    assert_eq!(r["free_frames_end"], r["free_frames_idle"], "{r:#}");
    assert_eq!(r["shared_buffer_used_end"], 0, "{r:#}");
    assert_eq!(r["churn_failures"], 0, "{r:#}");
    assert!(r["control_requests"].as_u64().unwrap() > 0 && r["scrapes"].as_u64().unwrap() > 0, "{r:#}");
    // The seed's draw: several kinds of fault, each counted.
    let faults = r["faults"].as_object().unwrap();
    assert!(faults.len() >= 3, "{r:#}");
    assert!(r["passed"].as_bool().unwrap(), "{r:#}");
}

#[test]
fn a_bench_stopped_by_ctrl_c_removes_its_namespaces_and_the_switch_in_them() {
    let _serial = serial();
    let child = std::process::Command::new(harness::bin("pfctools").unwrap())
        .args(["bench", "rfc2544", "--duts", "pfcswitch", "--sizes", "64", "--trial-s", "1", "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Until its testbed is up with the switch running in it.
    let mut made = Vec::new();
    wait_until("the bench's switch runs in its testbed", Duration::from_secs(60), Duration::from_millis(50), || {
        made =
            pfctools::testbed::list().into_iter().filter(|s| s.owner_pid == pid).flat_map(|s| s.namespaces).collect();
        made.iter().any(|ns| namespace_pids(ns).iter().any(|&p| comm(p) == "pfcswitch"))
    });
    let inside: Vec<i32> = made.iter().flat_map(|ns| namespace_pids(ns)).collect();
    // SAFETY: plain kill(2) of the child we started.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "exits as stopped by SIGINT: {stderr}");
    assert!(stderr.contains("stopped by signal 2; removed the testbeds"), "{stderr}");
    let left = existing_namespaces().unwrap();
    for ns in &made {
        assert!(!left.contains(ns), "{ns} is still there");
    }
    assert!(pfctools::testbed::list().iter().all(|s| s.owner_pid != pid), "its state file is gone");
    wait_until("the processes in its namespaces end", Duration::from_secs(5), Duration::from_millis(50), || {
        inside.iter().all(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
    });
}

/// A process's command name ("" once it is gone).
fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string()
}
