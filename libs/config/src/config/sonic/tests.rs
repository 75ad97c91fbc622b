use super::*;
use crate::headroom::CalcInput;
use crate::priorities::names::*;

const SAMPLE: &str = include_str!("sample_config_db.json");

fn map(pairs: &[(&str, &str)]) -> Vec<PortMap> {
    pairs.iter().map(|(s, i)| PortMap { sonic: s.to_string(), iface: i.to_string() }).collect()
}

fn sample() -> Translation {
    translate(SAMPLE, &map(&[("Ethernet0", "p1"), ("Ethernet4", "p2"), ("Ethernet8", "p3")])).unwrap()
}

fn note<'a>(t: &'a Translation, table: &str, key: &str) -> &'a Note {
    t.notes
        .iter()
        .find(|n| n.table == table && n.key == key)
        .unwrap_or_else(|| panic!("no note {table} {key}: {:#?}", t.notes))
}

/// The document with `edit` applied to its JSON.
fn edited(edit: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(SAMPLE).unwrap();
    edit(&mut v);
    v.to_string()
}

fn error_of(text: &str) -> String {
    translate(text, &map(&[("Ethernet0", "p1"), ("Ethernet4", "p2")])).unwrap_err().to_string()
}

#[test]
fn the_sample_document_becomes_a_switch_with_sonics_port_names_speeds_lossless_priorities_and_dscp_map() {
    let c = sample().config;
    assert_eq!(c.pfc.lossless, Some(vec![P3, P4]));
    let names: Vec<&str> = (0..3).map(|i| c.port_name(i)).collect();
    assert_eq!(names, ["Ethernet0", "Ethernet4", "Ethernet8"]);
    assert_eq!(c.ports[1].iface, "p2");
    assert_eq!((c.ports[0].speed, c.ports[2].speed), (Some(Speed::gbps(100)), Some(Speed::gbps(40))));
    assert_eq!(c.ports[0].max_frame, Some(max_frame_for_mtu(9100)));
    assert_eq!((c.ports[0].cable_m, c.ports[1].cable_m), (5.0, 300.0));
    let dscp = c.classify.dscp_table();
    assert_eq!((dscp[3], dscp[4], dscp[46], dscp[48], dscp[0], dscp[8]), (P3, P4, P5, P6, P1, P0));
    assert_eq!(c.buffer.shared_bytes, 10_875_072);
    assert_eq!(c.name, "lab-t0", "DEVICE_METADATA's hostname");
}

#[test]
fn a_lossless_pg_profile_becomes_an_alpha_a_headroom_and_an_xon_offset_and_what_is_left_out_is_said() {
    let t = sample();
    let p = t.config.ports[0].priority.get(P3).expect("Ethernet0|3 has its profile");
    assert_eq!(
        (p.xoff_alpha, p.headroom_bytes, p.xon_offset_bytes, p.xon_bytes),
        (Some(1.0), Some(96_928), Some(2_496), None)
    );
    assert_eq!(t.config.ports[0].priority.get(P4), t.config.ports[0].priority.get(P3), "the range 3-4");
    assert_eq!(note(&t, "BUFFER_PROFILE", "pg_lossless_100000_5m_profile.xon").kind, NoteKind::NotHonoured);
    assert_eq!(note(&t, "BUFFER_PROFILE", "pg_lossless_100000_5m_profile.size").kind, NoteKind::NotHonoured);
    assert_eq!(note(&t, "BUFFER_POOL", "ingress_lossless_pool.xoff").kind, NoteKind::NotHonoured);
    assert!(t.config.ports[0].priority.get(P0).is_none(), "a lossy PG has no ingress profile");
}

#[test]
fn a_lossless_pg_without_a_profile_gets_the_calculators_headroom_for_its_speed_and_cable_and_says_so() {
    let t = sample();
    let expect = |speed: Speed, cable_m: f64, quanta: u32| {
        let mut i = CalcInput {
            speed,
            cable_m,
            max_frame: max_frame_for_mtu(9100) as u32,
            response: Duration::ZERO,
            switch_delay: Duration::ZERO,
            load: 1.0,
        };
        i.response = i.quanta(quanta);
        i.calculate().total_bytes
    };
    let e4 = t.config.ports[1].priority.get(P3).unwrap();
    assert_eq!(e4.headroom_bytes, Some(expect(Speed::gbps(100), 300.0, 394)));
    assert_eq!(e4.xoff_alpha, Some(1.0), "the dynamic pool's threshold, 2^0 where the document gives no default");
    let n = note(&t, "BUFFER_PG", "Ethernet4|3");
    assert_eq!(n.kind, NoteKind::Derived);
    assert!(n.text.contains("300 m") && n.text.contains("802.3 Annex 31B.3.7"), "{}", n.text);
    // 40G: 802.3ba's 118 quanta.
    assert_eq!(t.config.ports[2].priority.get(P4).unwrap().headroom_bytes, Some(expect(Speed::gbps(40), 40.0, 118)));
    assert!(note(&t, "BUFFER_PG", "Ethernet8|4").text.contains("802.3 Annex 31B.3.7"));
    // 25G is not tabled here: 100G's quanta, and the note says so.
    let t = translate(
        &SAMPLE.replace(r#""speed": "40000""#, r#""speed": "25000""#),
        &map(&[("Ethernet0", "p1"), ("Ethernet4", "p2"), ("Ethernet8", "p3")]),
    )
    .unwrap();
    assert_eq!(t.config.ports[2].priority.get(P4).unwrap().headroom_bytes, Some(expect(Speed::gbps(25), 40.0, 394)));
    assert!(note(&t, "BUFFER_PG", "Ethernet8|4").text.contains("tables none for this speed"));
}

#[test]
fn the_watchdog_takes_each_ports_pfc_wd_entry_and_is_off_where_there_is_none() {
    let t = sample();
    let wd = |i: usize| t.config.ports[i].pfcwd.clone().unwrap();
    assert_eq!(
        wd(0),
        WatchdogOverride { action: Some(WatchdogAction::Drop), detection_ms: Some(400), restoration_ms: Some(400) }
    );
    assert_eq!(wd(1).action, Some(WatchdogAction::Forward));
    assert_eq!(wd(2).action, Some(WatchdogAction::Off));
    assert_eq!(note(&t, "PFC_WD", "GLOBAL.POLL_INTERVAL").kind, NoteKind::NotHonoured);
}

#[test]
fn queues_take_their_schedulers_dwrr_weights_and_their_wred_profiles_green_settings() {
    let t = sample();
    for i in [0, 1] {
        assert_eq!(
            t.config.ports[i].scheduler,
            Scheduler::Drr { weights: [14, 14, 14, 15, 15, 14, 14, 14] },
            "port {i}: queue 7, named by no scheduler, takes the least weight"
        );
        let w = t.config.ports[i].wred.priority.get(P3).unwrap();
        assert_eq!(
            (w.ecn, w.wred_green_enable, w.green_min_threshold, w.green_max_threshold, w.green_drop_probability),
            (Some(EcnMode::EcnAll), Some(true), Some(1_048_576), Some(2_097_152), Some(5))
        );
    }
    assert_eq!(t.config.ports[2].scheduler, Scheduler::Strict, "no QUEUE entry: strict");
    let unprofiled = t.config.wred_profile(2, P3);
    assert!(
        !unprofiled.wred_green_enable,
        "a queue no WRED_PROFILE names neither marks nor drops early: {unprofiled:?}"
    );
    assert!(t.config.wred_profile(0, P3).wred_green_enable);
    assert_eq!(note(&t, "WRED_PROFILE", "AZURE_LOSSLESS.yellow/red").kind, NoteKind::NotHonoured);
}

#[test]
fn tables_off_the_lossless_path_are_said_once_and_the_translation_prints_and_reads_back() {
    let t = sample();
    for table in ["VLAN", "BUFFER_QUEUE"] {
        assert_eq!(t.notes.iter().filter(|n| n.table == table).count(), 1, "{table}");
    }
    assert_eq!(t.notes.iter().filter(|n| n.table == "PORT" && n.key == "lanes").count(), 1, "once for all ports");
    assert_eq!(Config::from_toml(&t.config.to_toml()).unwrap(), t.config);
}

#[test]
fn what_contradicts_itself_is_an_error_naming_its_table_and_key() {
    let cases: Vec<(String, &str)> = vec![
        (
            edited(|v| v["BUFFER_PG"]["Ethernet0|3-4"]["profile"] = "pg_missing".into()),
            "BUFFER_PROFILE|pg_missing: named by BUFFER_PG|Ethernet0|3-4",
        ),
        (edited(|v| v["PORT_QOS_MAP"]["Ethernet0"]["dscp_to_tc_map"] = "OTHER".into()), "PORT_QOS_MAP|dscp_to_tc_map"),
        (
            edited(|v| {
                v["PORT_QOS_MAP"]["Ethernet0"]["dscp_to_tc_map"] = "OTHER".into();
                v["PORT_QOS_MAP"]["Ethernet4"]["dscp_to_tc_map"] = "OTHER".into();
            }),
            "DSCP_TO_TC_MAP|OTHER: named by PORT_QOS_MAP",
        ),
        (
            edited(|v| {
                v["BUFFER_PROFILE"]["pg_lossless_100000_5m_profile"]["static_th"] = "99999999".into();
                v["BUFFER_PROFILE"]["pg_lossless_100000_5m_profile"].as_object_mut().unwrap().remove("dynamic_th");
            }),
            "pg_lossless_100000_5m_profile.static_th: 99999999 is larger than its pool",
        ),
        (
            edited(|v| v["TC_TO_QUEUE_MAP"]["AZURE"]["3"] = "1".into()),
            "TC_TO_QUEUE_MAP|AZURE: moves a lossless class (3→1)",
        ),
        (edited(|v| v["PORT_QOS_MAP"]["Ethernet4"]["pfc_enable"] = "3".into()), "Ethernet4.pfc_enable"),
        (edited(|v| v["PORT"]["Ethernet0"]["speed"] = "fast".into()), "PORT|Ethernet0.speed: `fast` is not a number"),
        (edited(|v| v["QUEUE"]["Ethernet0|3"]["scheduler"] = "scheduler.9".into()), "SCHEDULER|scheduler.9"),
        (
            edited(|v| v["BUFFER_PG"]["Ethernet0|3-9"] = serde_json::json!({"profile": "ingress_lossy_profile"})),
            "BUFFER_PG|Ethernet0|3-9",
        ),
        (edited(|v| v["PFC_WD"]["Ethernet0"]["action"] = "reboot".into()), "PFC_WD|Ethernet0.action"),
        ("[1, 2]".into(), "not a CONFIG_DB document"),
        ("{".into(), "not a CONFIG_DB document"),
    ];
    for (text, expected) in cases {
        let e = error_of(&text);
        assert!(e.contains(expected), "expected {expected:?} in: {e}");
    }
    let unmapped = translate(SAMPLE, &map(&[("Ethernet99", "p1")])).unwrap_err().to_string();
    assert!(unmapped.contains("PORT|Ethernet99: named by --port Ethernet99=p1"), "{unmapped}");
    let twice = translate(SAMPLE, &map(&[("Ethernet0", "p1"), ("Ethernet4", "p1")])).unwrap_err();
    assert!(matches!(twice, SonicError::PortMapping(..)), "{twice}");
    assert!("Ethernet0".parse::<PortMap>().is_err());
}

#[test]
fn a_document_past_its_bounds_is_refused_before_it_is_read() {
    let huge = " ".repeat(MAX_DOCUMENT_BYTES + 1);
    assert!(matches!(translate(&huge, &map(&[("Ethernet0", "p1")])), Err(SonicError::TooLarge(_))));
    // A reader is taken only up to the bound plus one byte, whatever the source holds.
    let endless = std::io::repeat(b' ');
    assert!(matches!(read_document(endless), Err(SonicError::TooLarge(_))));
    assert_eq!(read_document(SAMPLE.as_bytes()).unwrap(), SAMPLE);
    let many: Map<String, Value> = (0..=MAX_ENTRIES).map(|i| (format!("k{i}"), Value::Object(Map::new()))).collect();
    let text = serde_json::json!({ "VLAN": many }).to_string();
    assert!(matches!(translate(&text, &map(&[("Ethernet0", "p1")])), Err(SonicError::TooLarge(_))));
}

#[test]
fn a_document_without_pfc_makes_a_switch_with_no_lossless_priority_and_no_pauses() {
    let text = edited(|v| {
        for p in ["Ethernet0", "Ethernet4", "Ethernet8"] {
            v["PORT_QOS_MAP"][p].as_object_mut().unwrap().remove("pfc_enable");
        }
    });
    let t = translate(&text, &map(&[("Ethernet0", "p1"), ("Ethernet4", "p2")])).unwrap();
    assert_eq!(t.config.pfc.lossless, Some(vec![]));
    assert!(t.config.ports.iter().all(|p| p.pause_mode == PauseMode::Off && p.priority.is_empty()));
    assert_eq!(note(&t, "PORT_QOS_MAP", "Ethernet0.pfc_enable").kind, NoteKind::Derived);
}

#[test]
fn a_database_dump_with_flat_table_keys_reads_as_the_nested_document() {
    let nested: Value = serde_json::from_str(SAMPLE).unwrap();
    let mut flat = Map::new();
    for (table, entries) in nested.as_object().unwrap() {
        for (key, fields) in entries.as_object().unwrap() {
            // Half as plain fields, half as sonic-db-dump's hashes.
            let value =
                if key.len() % 2 == 0 { serde_json::json!({"type": "hash", "value": fields}) } else { fields.clone() };
            flat.insert(format!("{table}|{key}"), value);
        }
    }
    let ports = map(&[("Ethernet0", "p1"), ("Ethernet4", "p2"), ("Ethernet8", "p3")]);
    let from_flat = translate(&Value::Object(flat).to_string(), &ports).unwrap();
    assert_eq!(from_flat.config, sample().config);
}
