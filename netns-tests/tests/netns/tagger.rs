//! Tagger's tables in the data path on real namespaces: tags rewritten with valid
//! checksums, unplanned tags made lossy, and the ring that deadlocks without tables and
//! stays live with them.

use netns_tests::*;
use pfcswitch::core::config::TaggerConfig;
use pfcswitch::core::stats::TagCounters;
use pfcswitch::core::Priority;
use pfctools::bench::lab;
use pfctools::harness::{RingLab, RingOptions};

/// sw1 of a two-host star: hosts enter with tag 2 (priority 4) and leave with tag 1
/// (priority 3), in both directions.
const TABLE: &str = r#"
switch = "sw1"
algorithm = "hand-made"
lossless_tags = 2
initial_tag = 2
priorities = [3, 4]
[default]
tag = 0
priority = 0
[[ingress]]
port = 1
tag = 2
priority = 4
[[ingress]]
port = 2
tag = 2
priority = 4
[[rewrite]]
ingress = 1
tag = 2
egress = 2
new_tag = 1
[[rewrite]]
ingress = 2
tag = 2
egress = 1
new_tag = 1
"#;

/// A two-host star whose switch applies [`TABLE`].
fn tagged_star(tag: &str) -> (Testbed, SwitchProc) {
    let tb = star(tag, 2);
    let path = tb.work_dir().join("sw1-table.toml");
    std::fs::write(&path, TABLE).unwrap();
    let mut c = switch_config(&tb, "sw1");
    c.pfc.lossless = None;
    c.tagger = Some(TaggerConfig { table: path.display().to_string(), switch: Some("sw1".into()) });
    let sw = SwitchProc::start(&tb, "sw1", &c, &RunArgs::default()).unwrap();
    (tb, sw)
}

fn counters(sw: &SwitchProc, port: &str, tag: u8) -> TagCounters {
    let s = sw.stats().unwrap();
    let t = s.switch.tagger.expect("the switch reports its table");
    t.tags.iter().find(|r| r.port == port && r.tag == Some(tag)).map(|r| r.counters).unwrap_or_default()
}

#[test]
fn tagged_frames_leave_with_the_rewritten_dscp_and_a_checksum_kernel_hosts_accept() {
    let _serial = serial();
    let (tb, sw) = tagged_star("tag-rewrite");
    let s = sw.stats().unwrap();
    assert_eq!(
        s.tagger.as_ref().map(|t| (t.rules, t.lossless.clone())),
        Some((4, vec![Priority::new(3), Priority::new(4)]))
    );
    assert!(s.ports[0].priorities[3].lossless && s.ports[0].priorities[4].lossless);

    // ToS 8 is DSCP 2: the request reaches h2 as DSCP 1, and h2's kernel only answers a
    // packet whose IPv4 header checksum is right.
    let out = tb.exec("h1", &["ping", "-c", "3", "-i", "0.2", "-W", "2", "-Q", "8", "10.0.0.2"]).expect("ping");
    assert!(out.contains("3 received"), "{out}");
    let c = counters(&sw, "p1", 2);
    assert!(c.classified >= 3 && c.rewritten >= 3, "{c:?}");

    // The same with stamped UDP frames, read by a sink: every one with tag 1, none with
    // a bad checksum, each queued under tag 1's priority. Frames a sink's ring or a
    // testbed link dropped while their CPU was elsewhere, or that a switch stall longer
    // than its headroom lasts at the sender's rate left to overflow, are the machine's:
    // the attempt is repeated.
    let headroom_lasts_us = sw.stats().unwrap().ports[0].priorities[4].headroom_size as f64 / (20e3 * 200.0) * 1e6;
    let dst = mac_of(&tb, "h2");
    let drops = |s: &pfcswitch::stats::Stats| s.ports.iter().map(|p| p.counters.drops.total()).sum::<u64>();
    let ((r, tx_frames, dropped), _) = judged_attempt(|_| {
        let (before, watch) = (sw.stats().unwrap(), AttemptWatch::begin(&tb));
        let sink =
            SinkProc::start(&tb, "h2", "sink", &sink_flags(&["--expect-per-flow", "2000", "--idle", "1"])).unwrap();
        let g = run_gen(
            &tb,
            "h1",
            "gen",
            &gen_flags(&[
                "--dst-mac",
                &dst,
                "--initial-tag",
                "2",
                "--prio",
                "4",
                "--count",
                "2000",
                "--rate",
                "20k",
                "--size",
                "200",
            ]),
            GEN_TIMEOUT,
        )
        .unwrap();
        assert_eq!(g.sent, 2000);
        let r = sink.finish(SINK_TIMEOUT).unwrap();
        let after = sw.stats().unwrap();
        match watch.lost(&[&g], &r, &after.stalls, headroom_lasts_us) {
            Some(why) => Attempt::Disturbed(why),
            None => Attempt::Judge((
                r,
                after.ports[1].priorities[3].counters.tx_frames - before.ports[1].priorities[3].counters.tx_frames,
                drops(&after) - drops(&before),
            )),
        }
    });
    let f = &r.flows[0];
    assert_eq!((f.received, f.lost, f.dscp, f.bad_ip_checksum), (2000, 0, 1, 0), "{r:?}");
    assert_eq!(tx_frames, 2000);
    assert_eq!(dropped, 0);
    assert!(sw.stop().success());
}

#[test]
fn a_tag_off_the_table_lands_in_the_lossy_default_with_the_default_tag() {
    let _serial = serial();
    let (tb, sw) = tagged_star("tag-default");
    let sink = SinkProc::start(&tb, "h2", "sink", &sink_flags(&["--expect-per-flow", "500", "--idle", "1"])).unwrap();
    let dst = mac_of(&tb, "h2");
    let g = run_gen(
        &tb,
        "h1",
        "gen",
        &gen_flags(&["--dst-mac", &dst, "--dscp", "5", "--count", "500", "--rate", "20k"]),
        GEN_TIMEOUT,
    )
    .unwrap();
    assert_eq!(g.sent, 500);
    let r = sink.finish(SINK_TIMEOUT).unwrap();
    let f = &r.flows[0];
    assert_eq!((f.received, f.dscp, f.bad_ip_checksum), (500, 0, 0), "{r:?}");
    let c = counters(&sw, "p1", 5);
    assert_eq!((c.classified, c.default_ingress), (0, 500));
    let s = sw.stats().unwrap();
    assert!(s.ports[0].priorities[0].counters.rx_frames >= 500, "charged to the lossy default");
    assert!(s.ports[1].priorities[0].counters.tx_frames >= 500);
    assert!(sw.stop().success());
}

#[test]
fn a_table_the_switch_cannot_apply_stops_it_at_start_with_the_rule_named() {
    let _serial = serial();
    let tb = star("tag-bad", 2);
    let path = tb.work_dir().join("sw1-table.toml");
    std::fs::write(&path, TABLE.replace("port = 2\ntag = 2", "port = 5\ntag = 2")).unwrap();
    let mut c = switch_config(&tb, "sw1");
    c.pfc.lossless = None;
    c.tagger = Some(TaggerConfig { table: path.display().to_string(), switch: Some("sw1".into()) });
    let err =
        SwitchProc::start(&tb, "sw1", &c, &RunArgs::default()).err().expect("the switch refuses the table").to_string();
    assert!(err.contains("ingress rule #2 (port 5, tag 2 → priority 4): the switch has no port 5"), "{err}");
    // A table written for another switch needs --force.
    std::fs::write(&path, TABLE.replace("switch = \"sw1\"", "switch = \"leaf9\"")).unwrap();
    let err = SwitchProc::start(&tb, "sw1", &c, &RunArgs::default())
        .err()
        .expect("another switch's table is refused")
        .to_string();
    assert!(err.contains("the table is for switch \"leaf9\""), "{err}");
    let sw = SwitchProc::start(&tb, "sw1", &c, &run_flags(&["--force"])).unwrap();
    assert_eq!(sw.stats().unwrap().switch.tagger.map(|t| t.table_switch), Some("leaf9".into()));
    assert!(sw.stop().success());
}

fn ring(tagger: bool) -> lab::LabRun {
    let opts =
        RingOptions { refresh_us: Some(500), tagger, processes: Placement::raised(None), ..RingOptions::default() };
    let l = RingLab::start("tagger-ring", &opts).unwrap();
    let run = lab::drive(&l, true, true);
    for sw in l.switches {
        sw.stop();
    }
    run.unwrap()
}

#[test]
fn the_ring_deadlocks_without_tables_and_with_them_stays_live_and_lossless() {
    let _serial = serial();
    // The control shows the ring can deadlock: now and then a run forms no standing cycle
    // (the senders' timing), so it gets up to three attempts. A run in which a switch lost
    // its CPU for longer than a ring port's headroom covers drops frames, and the drops can
    // undo the cycle (the machine, not the switch: a control once deadlocked, then kept
    // flowing after a 101 ms stall): it is repeated as well, as `judged_attempt` repeats
    // (at most `ATTEMPTS` runs the machine disturbed).
    let mut controls: Vec<lab::LabRun> = Vec::new();
    let (mut unformed, mut stalled) = (0, 0);
    loop {
        let r = ring(false);
        let (formed, machine, stall_ms) = (r.deadlock_formed, r.machine_stalled, r.longest_stall_ms);
        controls.push(r);
        if machine && stalled < ATTEMPTS - 1 {
            note_repeat(&format!("repeating the control: a switch stalled for {stall_ms:.1} ms"));
            stalled += 1;
            pause_before_repeat(stalled);
        } else if !formed && unformed < 2 {
            note_repeat("repeating the control: the senders' timing formed no standing cycle");
            unformed += 1;
        } else {
            break;
        }
    }
    let without = controls.last().unwrap();
    assert!(without.deadlock_formed && without.deadlocks >= 1, "the control never deadlocked: {controls:?}");
    assert!(without.lossless_lost > 0 && !without.kept_flowing, "{without:?}");
    // Three runs with the tables, each lossless. A run in which a switch lost its CPU for
    // longer than a ring port's headroom covers may drop (the machine, not the switch): it
    // is repeated, as `judged_attempt` repeats.
    let (mut lossless, mut stalled) = (0, 0);
    for attempt in 1..=3 + (ATTEMPTS - 1) {
        let with = ring(true);
        let why = format!("attempt {attempt}: {with:?}");
        assert!(!with.deadlock_formed, "{why}");
        assert_eq!(with.deadlocks, 0, "{why}");
        assert!(with.kept_flowing && with.delivered_after_unblock > 0, "{why}");
        assert!(with.hosts.iter().all(|h| h.sent > 0 && h.received > 0), "{why}");
        assert!(with.rewrites.values().sum::<u64>() > 0, "a demoted hop rewrites tags: {why}");
        if (with.lossless_lost, with.lossless_drops) == (0, 0) {
            lossless += 1;
        } else if with.machine_stalled && stalled < ATTEMPTS - 1 {
            note_repeat(&format!(
                "repeating: a switch stalled for {:.1} ms and the ring dropped: {why}",
                with.longest_stall_ms
            ));
            stalled += 1;
            pause_before_repeat(stalled);
        } else {
            panic!("every lossless frame arrives: {why}");
        }
        if lossless == 3 {
            return;
        }
    }
}

/// The three commands a user runs, through the real binaries: the lab's files, `tagger
/// compute` on them, and each switch's configuration checked with its table.
#[test]
fn lab_files_through_tagger_compute_give_tables_every_ring_switch_accepts() {
    let dir = std::env::temp_dir().join(format!("pfcs-tagger-pipeline-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = |exe: &str, args: &[&str]| {
        let out = std::process::Command::new(harness::bin(exe).unwrap()).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{exe} {args:?}: {text}");
        text
    };
    let d = dir.display().to_string();
    run("pfctools", &["deadlock-lab", "--export", &d]);
    let (topo, routes, tables) = (format!("{d}/testbed.toml"), format!("file:{d}/routes.toml"), format!("{d}/tables"));
    let out =
        run("tagger", &["compute", "--topology", &topo, "--routes", &routes, "--priorities", "3,4", "--out", &tables]);
    assert!(out.contains("greedy: 2 lossless tags"), "{out}");
    // The switches' ports in the testbed's order: sw_i has host, then its links in file order.
    let ports = [("sw1", ["host", "cw", "ccw"]), ("sw2", ["host", "ccw", "cw"]), ("sw3", ["host", "ccw", "cw"])];
    for (sw, ifaces) in ports {
        let config = format!(
            "name = \"{sw}\"\n[tagger]\ntable = \"tables/{sw}.toml\"\n{}",
            ifaces.iter().map(|i| format!("[[port]]\niface = \"{i}\"\n")).collect::<String>()
        );
        let path = dir.join(format!("{sw}.toml"));
        std::fs::write(&path, config).unwrap();
        let out = run("pfcswitch", &["check-config", &path.display().to_string()]);
        assert!(out.contains("lossless = [\n    3,\n    4,\n]") || out.contains("lossless = [3, 4]"), "{out}");
        assert!(out.contains(&format!("# Tagger table {d}/tables/{sw}.toml for {sw}")), "{out}");
        assert!(out.contains("hosts stamp tag 2"), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
