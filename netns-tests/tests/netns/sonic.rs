//! SONiC's configuration as written: a CONFIG_DB document (the engine's sample, assembled
//! from sonic-buildimage's rendered buffer and QoS samples) runs the switch, its ports
//! mapped to the testbed's interfaces. What the translation computes is checked exactly
//! by the engine's tests; here, what only the real path shows: the document's classes,
//! pauses and watchdog at work, with margins a slow machine cannot cross.

use netns_tests::*;
use pfcswitch::core::pfcwd::WatchdogAction;

const SAMPLE: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../libs/config/src/config/sonic/sample_config_db.json"));

/// The sample with every port at 100 Mb/s (the testbed's line rate: veth has none of
/// its own) and its three ports' names, written into the testbed's directory.
fn document(tb: &Testbed) -> std::path::PathBuf {
    let mut doc: serde_json::Value = serde_json::from_str(SAMPLE).unwrap();
    for port in ["Ethernet0", "Ethernet4", "Ethernet8"] {
        doc["PORT"][port]["speed"] = "100".into();
    }
    let path = tb.work_dir().join("config_db.json");
    std::fs::write(&path, doc.to_string()).unwrap();
    path
}

#[test]
fn a_sonic_config_db_runs_the_switch_its_dscp_3_lossless_under_congestion_dscp_46_lossy_and_its_watchdog_as_pfc_wd_says(
) {
    let _serial = serial();
    let tb = star("sonic", 3);
    let ifaces: Vec<String> = switch_config(&tb, "sw1").ports.iter().map(|p| p.iface.clone()).collect();
    let ports: Vec<String> = ["Ethernet0", "Ethernet4", "Ethernet8"]
        .iter()
        .zip(&ifaces)
        .map(|(sonic, iface)| format!("{sonic}={iface}"))
        .collect();
    let doc = document(&tb);
    let (h1, h3) = (mac_of(&tb, "h1"), mac_of(&tb, "h3"));
    let ((sw, g1, g2, rx), _) = judged_attempt(|_| {
        let watch = AttemptWatch::begin(&tb);
        let sw = SwitchProc::start_sonic(&tb, "sw1", "sonic-sw1", &doc, &ports).unwrap();
        // h3 speaks first, so that the senders' frames go to its port alone.
        run_gen(&tb, "h3", "learn", &gen_flags(&["--dst-mac", &h1, "--count", "20", "--rate", "1k"]), GEN_TIMEOUT)
            .unwrap();
        // Two senders at 80 % of 100 Mb/s each on DSCP 3 into the third port.
        let (g1, g2, rx) = congest(&tb, "3", None);
        // The profile's headroom (96 928 B) lasts ~10 ms at one sender's 80 Mb/s.
        watch.keep_switch(sw, &[&g1, &g2], &rx, 9_000.0).map(|sw| (sw, g1, g2, rx)).into()
    });

    // DSCP 3 is lossless priority 3: paused, nothing lost.
    for (g, flow) in [(&g1, 1), (&g2, 2)] {
        let f = rx.flows.iter().find(|f| f.flow == flow).unwrap_or_else(|| panic!("flow {flow} missing: {rx:?}"));
        assert_eq!((f.received, f.lost), (g.sent, 0), "flow {flow}: {f:?}");
    }
    assert!(g1.pauses.xoff[3] + g2.pauses.xoff[3] > 0, "the senders were paused on priority 3");
    let s = sw.stats().unwrap();
    let names: Vec<&str> = s.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Ethernet0", "Ethernet4", "Ethernet8"], "ctl stats speaks SONiC's port names");
    assert_eq!(s.ports.iter().map(|p| p.counters.drops.lossless).sum::<u64>(), 0);
    // Ethernet4's group has no profile in the document: the translation derived one.
    assert!(s.ports[1].priorities[3].headroom_size > 0);
    assert_eq!(s.ports[0].priorities[3].headroom_size, 96_928, "Ethernet0's profile: its xoff");

    // DSCP 46 is TC 5, a lossy class: counted on priority 5, never paused.
    let before = s.ports[0].priorities[5].counters.rx_frames;
    let g = run_gen(
        &tb,
        "h1",
        "dscp46",
        &gen_flags(&["--dst-mac", &h3, "--dscp", "46", "--count", "200", "--rate", "2k"]),
        GEN_TIMEOUT,
    )
    .unwrap();
    let s = sw.stats().unwrap();
    let p5 = &s.ports[0].priorities[5];
    assert_eq!(p5.counters.rx_frames - before, g.sent, "DSCP 46 is priority 5");
    assert!(!p5.lossless && p5.counters.xoff_sent == 0);

    // The watchdog as PFC_WD says: drop on Ethernet0, forward on Ethernet4, none on
    // Ethernet8 (no entry).
    let action = |i: usize| s.ports[i].pfcwd.first().map(|w| w.action);
    assert_eq!((action(0), action(1)), (Some(WatchdogAction::Drop), Some(WatchdogAction::Forward)));
    assert!(matches!(action(2), None | Some(WatchdogAction::Off)), "{:?}", s.ports[2].pfcwd);
    assert!(sw.stop().success());
}
