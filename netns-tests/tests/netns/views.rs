//! SONiC's views on a running switch: `ctl pfcstat` (and `--history`), `ctl pfcwd`,
//! `ctl watermark` and `ctl clear`, run as a user runs them and compared with the
//! counters `ctl stats --json` gives.

use std::process::Command;
use std::time::{Duration, SystemTime};

use netns_tests::*;
use pfcswitch::core::speed::Speed;
use serde_json::Value;

/// `pfcswitch ctl ARGS` against `sw`: its standard output.
fn ctl(sw: &SwitchProc, args: &[&str]) -> String {
    let out = Command::new(harness::bin("pfcswitch").unwrap())
        .arg("ctl")
        .arg("--socket")
        .arg(&sw.socket)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn ctl_json(sw: &SwitchProc, args: &[&str]) -> Value {
    let text = ctl(sw, &[&["--json"][..], args].concat());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("ctl {args:?}: {e}: {text}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Seconds since the Unix epoch of an RFC 3339 time the views print.
fn unix_s(text: &str) -> f64 {
    let t = humantime::parse_rfc3339(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// h3 storms priority 3 for 1 s while h1 sends it 0.5 s of priority-3 frames: the switch
/// receives PFC from h3, its queue to h3 fills and its watchdog drops it, and h1's
/// ingress crosses XOFF, so the switch sends PFC to h1. Then every view agrees with the
/// counters, and `ctl clear` starts the views from zero without changing a counter.
#[test]
fn sonics_views_show_what_the_counters_hold_and_clear_starts_them_from_zero_without_touching_a_counter() {
    let _serial = serial();
    let tb = star("views", 3);
    let sw = SwitchProc::start(&tb, "sw1", &config_at(&tb, Speed::gbps(1)), &RunArgs::default()).unwrap();
    let started = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs_f64();
    let pfctools = harness::bin("pfctools").unwrap().display().to_string();
    let storm = tb
        .spawn("h3", "storm", &[&pfctools, "storm", "-i", "eth0", "--prio", "3", "-s", "1", "--speed", "1G"])
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let dst = mac_of(&tb, "h3");
    let gen = ["--dst-mac", &dst, "--dscp", "3", "--rate", "5k", "--duration", "0.5", "--tx-only", "--speed", "1G"];
    run_gen(&tb, "h1", "gen", &gen_flags(&gen), GEN_TIMEOUT).unwrap();
    assert!(storm.wait(Duration::from_secs(10)).status.success());
    // The watchdog restores priority 3 once no pause came for its restoration time.
    std::thread::sleep(Duration::from_millis(600));

    let stats = ctl_json(&sw, &["stats"]);
    let ports = stats["ports"].as_array().unwrap();
    let prio = |p: usize, q: usize, field: &str| u(&ports[p]["priorities"][q][field]);

    // pfcstat: PFC frames per port and priority, received and sent.
    let pfcstat = ctl_json(&sw, &["pfcstat"]);
    for (p, row) in pfcstat["ports"].as_array().unwrap().iter().enumerate() {
        assert_eq!(row["port"], ports[p]["name"]);
        for q in 0..8 {
            assert_eq!(u(&row["rx"][q]), prio(p, q, "xoff_received") + prio(p, q, "xon_received"), "port {p} PFC{q}");
            assert_eq!(u(&row["tx"][q]), prio(p, q, "xoff_sent") + prio(p, q, "xon_sent"), "port {p} PFC{q}");
        }
    }
    let storm_frames = u(&pfcstat["ports"][2]["rx"][3]);
    let paused_h1 = u(&pfcstat["ports"][0]["tx"][3]);
    eprintln!("PFC3 received from h3: {storm_frames}; sent to h1: {paused_h1}");
    // The storm refreshes its pause well before it expires: some tens of frames a second.
    assert!(storm_frames >= 20 && paused_h1 > 0, "{pfcstat}");
    for view in [&["pfcstat"][..], &["pfcstat", "--history"], &["pfcwd"], &["watermark"]] {
        eprintln!("$ pfcswitch ctl {}\n{}", view.join(" "), ctl(&sw, view));
    }
    let text = ctl(&sw, &["pfcstat"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].trim_start().starts_with("Port Rx") && lines[1].starts_with("-----"), "{text}");
    let h3_rx: Vec<&str> = lines[4].split_whitespace().collect();
    assert_eq!(h3_rx[4], pfcswitch::views::with_commas(storm_frames), "{text}");

    // --history: one run of pauses on h3's priority 3, as long as the storm.
    let history = ctl_json(&sw, &["pfcstat", "--history"]);
    let row = history["rows"].as_array().unwrap().iter().find(|r| r["port"] == ports[2]["name"] && r["priority"] == 3);
    let row = row.expect("h3's priority 3");
    let h = &ports[2]["priorities"][3]["pfc_history"];
    assert_eq!(row["rx_pause_transitions"], h["transitions"]);
    assert_eq!(row["total_rx_pause_us"], h["paused_us"]);
    assert!(u(&h["transitions"]) >= 1, "{h}");
    let paused_s = u(&h["paused_us"]) as f64 / 1e6;
    assert!((0.9..1.3).contains(&paused_s), "the storm lasted 1 s: {paused_s} s");
    let began = unix_s(row["recent_rx_pause_timestamp"].as_str().unwrap());
    assert!(began >= started - 0.01 && began <= started + 1.0, "the latest run began with the storm: {row}");

    // pfcwd: h3's priority 3 was stormed and restored; what it dropped is what the
    // watchdog counted.
    let pfcwd = ctl_json(&sw, &["pfcwd"]);
    let queue = format!("{}:3", ports[2]["name"].as_str().unwrap());
    let q = pfcwd["queues"].as_array().unwrap().iter().find(|q| q["queue"] == queue.as_str()).expect("h3:3 listed");
    let w = ports[2]["pfcwd"].as_array().unwrap().iter().find(|w| w["priority"] == 3).unwrap();
    assert_eq!(q["status"], "operational", "{q}");
    assert_eq!((&q["storms_detected"], &q["storms_restored"]), (&w["storms_detected"], &w["restored"]));
    assert!(u(&w["storms_detected"]) >= 1);
    assert_eq!(u(&q["tx_drop"]), u(&w["dropped_frames"]));
    assert!(u(&q["tx_drop"]) > 0 && u(&q["tx_last_drop"]) > 0, "{q}");
    assert!(ctl(&sw, &["pfcwd"]).lines().any(|l| l.trim_start().starts_with(&queue) && l.contains("operational")));

    // Watermarks: h3's queue and h1's priority group held frames.
    let marks = ctl_json(&sw, &["watermark"]);
    for (p, row) in marks["ports"].as_array().unwrap().iter().enumerate() {
        for q in 0..8 {
            assert_eq!(u(&row["queue"][q]), prio(p, q, "egress_queue_watermark"));
            assert_eq!(u(&row["pg_shared"][q]), prio(p, q, "ingress_shared_watermark"));
            assert_eq!(u(&row["pg_headroom"][q]), prio(p, q, "headroom_watermark"));
        }
    }
    assert!(u(&marks["ports"][2]["queue"][3]) > 0 && u(&marks["ports"][0]["pg_shared"][3]) > 0, "{marks}");

    // Clear: the views start from zero, the counters stay as they were.
    ctl(&sw, &["clear"]);
    let after = ctl_json(&sw, &["pfcstat"]);
    assert!(after["since"].is_string());
    assert!(
        after["ports"].as_array().unwrap().iter().all(|r| r["rx"]
            .as_array()
            .unwrap()
            .iter()
            .chain(r["tx"].as_array().unwrap())
            .all(|n| n == 0)),
        "{after}"
    );
    assert!(ctl_json(&sw, &["pfcwd"])["queues"].as_array().unwrap().is_empty());
    assert!(ctl(&sw, &["pfcstat"]).starts_with("Last cached time was "));
    let still = ctl_json(&sw, &["stats"]);
    // What pause frames and the watchdog did (the hosts' kernels may still send a
    // frame of their own now and then, so not the frame counts).
    let counters = |s: &Value| -> Vec<Value> {
        let pfc = |q: &Value| serde_json::json!([q["xoff_received"], q["xon_received"], q["xoff_sent"], q["xon_sent"]]);
        let port = |p: &Value| {
            let prios: Vec<Value> = p["priorities"].as_array().unwrap().iter().map(pfc).collect();
            serde_json::json!([p["counters"]["mac_control"], p["pfcwd"], prios])
        };
        s["ports"].as_array().unwrap().iter().map(port).collect()
    };
    assert_eq!(counters(&still), counters(&stats), "ctl clear changed no counter");
    assert_eq!(
        u(&ctl_json(&sw, &["watermark"])["ports"][2]["queue"][3]),
        0,
        "the watermarks start again from what is held"
    );
    assert!(sw.stop().success());
}

/// h1 sends h2 5000 frames/s of 500 bytes on priority 3 for 2 s while `ctl watch` looks
/// every 0.5 s: the rates it shows are the generator's, and without a terminal it writes
/// one table per interval and no escape sequence.
#[test]
fn watch_shows_the_rates_the_generator_sent_at_and_writes_plain_tables_when_not_on_a_terminal() {
    let _serial = serial();
    let tb = star("watch", 2);
    let sw = SwitchProc::start(&tb, "sw1", &config_at(&tb, Speed::gbps(1)), &RunArgs::default()).unwrap();
    let dst = mac_of(&tb, "h2");
    let gen = ["--dst-mac", &dst, "--dscp", "3", "--rate", "5k", "--size", "500", "--duration", "2", "--tx-only"];
    let gen = start_gen(&tb, "h1", "gen", &gen_flags(&gen)).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let json = ctl(&sw, &["--json", "watch", "--interval", "0.5", "--count", "3"]);
    let plain = ctl(&sw, &["watch", "--interval", "0.2", "--count", "2"]);
    let sent = gen.finish(GEN_TIMEOUT).unwrap();
    let views: Vec<Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(views.len(), 3, "{json}");
    let rate = sent.sent as f64 / sent.elapsed_s;
    eprintln!("generator: {} frames at {rate:.0}/s", sent.sent);
    for v in &views {
        let dt = v["interval_s"].as_f64().unwrap();
        assert!((0.45..0.8).contains(&dt), "{v}");
        let row = |port: &str, prio: Option<u64>| {
            let rows = v["rows"].as_array().unwrap();
            rows.iter()
                .find(|r| r["port"] == port && r["priority"].as_u64() == prio)
                .cloned()
                .unwrap_or_else(|| panic!("{port} {prio:?}: {v}"))
        };
        for r in [row("p1", None), row("p1", Some(3))] {
            let (fps, bps) = (r["rx_fps"].as_f64().unwrap(), r["rx_bps"].as_f64().unwrap());
            assert!((fps - rate).abs() < 0.2 * rate, "p1 received at {fps}/s, sent at {rate}/s: {r}");
            assert!((bps / fps / 8.0 - 496.0).abs() < 0.5, "496-byte frames without their FCS: {r}");
        }
        let out = row("p2", Some(3))["tx_fps"].as_f64().unwrap();
        assert!((out - rate).abs() < 0.2 * rate, "p2 sent them on at {out}/s");
    }
    assert_eq!(plain.matches("rates over the last").count(), 2, "{plain}");
    assert!(!plain.contains('\x1b'), "no escape sequence in a pipe: {plain:?}");
    assert!(sw.stop().success());
}
