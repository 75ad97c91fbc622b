//! A simulated switch started from a SONiC CONFIG_DB document, as `pfcswitch run
//! --sonic-config` starts a real one: its classes, pauses and derived headroom, exactly.

use pfcsim::scenario::Scenario;
use pfcsim::simulate;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../libs/config/src/config/sonic/sample_config_db.json");

/// One switch from the sample document (its ports Ethernet0, 4 and 8), hosts a, b and c
/// on them at 10G, and `rest` (flows, events) after.
fn on_the_sample(name: &str, duration_ms: u32, rest: &str) -> Scenario {
    Scenario::from_toml(&format!(
        r#"
        name = "{name}"
        speed = "10G"
        cable_m = 5
        duration_ms = {duration_ms}
        drain_ms = 20
        sonic_config = "{DOC}"
        sonic_ports = ["Ethernet0", "Ethernet4", "Ethernet8"]
        [topology]
        host = [{{ name = "a" }}, {{ name = "b" }}, {{ name = "c" }}]
        switch = [{{ name = "sw" }}]
        link = [{{ a = "a:eth0", b = "sw:p1" }}, {{ a = "b:eth0", b = "sw:p2" }}, {{ a = "c:eth0", b = "sw:p3" }}]
        {rest}
        "#
    ))
    .unwrap()
}

/// Two hosts at 90 % each on DSCP 3 into a third's 10G port, and a lossy trickle on
/// DSCP 46, through one switch whose configuration is the sample document's.
fn scenario() -> Scenario {
    on_the_sample(
        "sonic",
        4,
        r#"
        [[flow]]
        from = "a"
        to = "c"
        priority = 3
        dscp = 3
        size = 1518
        load = 90
        [[flow]]
        from = "b"
        to = "c"
        priority = 3
        dscp = 3
        size = 1518
        load = 90
        [[flow]]
        from = "a"
        to = "c"
        priority = 5
        dscp = 46
        size = 500
        load = 1
        "#,
    )
}

#[test]
fn a_switch_from_a_sonic_document_keeps_dscp_3_lossless_by_its_pauses_and_counts_dscp_46_on_lossy_priority_5() {
    let r = simulate(&scenario(), 1, None).unwrap().report;
    let sw = &r.switches[0].switch;
    let names: Vec<&str> = sw.ports.iter().map(|p| p.engine.name.as_str()).collect();
    assert_eq!(names, ["Ethernet0", "Ethernet4", "Ethernet8"]);
    // 180 % of a port's rate on a lossless class: both senders paused, nothing lost.
    assert_eq!((r.lossless_lost, r.lossless_dropped), (0, 0));
    for (i, f) in r.flows.iter().take(2).enumerate() {
        assert_eq!(f.received, f.sent, "flow {i}: {f:?}");
        assert!(sw.ports[i].engine.priorities[3].counters.xoff_sent > 0, "port {i} paused its sender");
    }
    // Ethernet0's group has the document's profile; Ethernet4's headroom was derived.
    assert_eq!(sw.ports[0].engine.priorities[3].headroom_size, 96_928);
    assert!(sw.ports[1].engine.priorities[3].headroom_size > 0);
    // DSCP 46 is TC 5, lossy: counted on priority 5 at Ethernet0, never paused.
    let p5 = &sw.ports[0].engine.priorities[5];
    assert_eq!(p5.counters.rx_frames, r.flows[2].sent);
    assert!(!p5.lossless && p5.counters.xoff_sent == 0);
}

#[test]
fn a_switch_with_more_ports_than_the_scenario_names_is_refused() {
    let mut s = scenario();
    s.sonic_ports.truncate(2);
    let e = simulate(&s, 1, None).err().expect("refused").to_string();
    assert!(e.contains("sonic_ports") && e.contains("3 ports; 2 are named"), "{e}");
}

#[test]
fn a_storm_from_the_receiver_pauses_the_documents_lossless_class_and_it_loses_nothing() {
    let s = on_the_sample(
        "sonic-storm",
        4,
        r#"
        [[flow]]
        from = "a"
        to = "c"
        priority = 3
        dscp = 3
        size = 1518
        load = 20
        [[event]]
        at_ms = 1
        storm = { host = "c", priorities = [3], quanta = 65535, interval_us = 500, duration_ms = 2 }
        "#,
    );
    let r = simulate(&s, 1, None).unwrap().report;
    let sw = &r.switches[0].switch;
    let e8 = &sw.ports[2].engine.priorities[3];
    assert!(e8.counters.xoff_received >= 4, "the storm reached Ethernet8: {}", e8.counters.xoff_received);
    assert!(e8.paused_us >= 2_000, "Ethernet8's priority 3 paused for the storm: {} µs", e8.paused_us);
    assert_eq!((r.lossless_lost, r.lossless_dropped), (0, 0));
    assert_eq!(r.flows[0].received, r.flows[0].sent, "held through the storm, delivered after it");
}
