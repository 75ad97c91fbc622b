use super::*;
use crate::priorities::names::*;

#[test]
fn frame_caps_share_what_the_rings_leave_unless_given() {
    let mut c = Config::for_interfaces(&["a", "b"]);
    let ring = crate::pool::DEFAULT_RING_SIZE;
    assert_eq!(ring, 8192);
    let pool = PoolSize::for_rings(2, 2, ring, None);
    assert_eq!(pool.frames, 2 * ring * 2 + 16384);
    assert_eq!(c.frame_caps(pool), FrameCaps { lossy_port: 4096, slowpath: 4096, lossless: 4096 });
    // Four rx queues per port: their fill rings take more frames, not the spare.
    let pool4 = PoolSize::for_rings(2, 8, ring, None);
    assert_eq!(pool4.frames, 10 * ring + 16384);
    assert_eq!(c.frame_caps(pool4), FrameCaps { lossy_port: 4096, slowpath: 4096, lossless: 4096 });
    c.buffer.lossy_port_frames = Some(10);
    c.buffer.slowpath_frames = Some(20);
    c.buffer.lossless_frames = Some(30);
    assert_eq!(c.frame_caps(pool), FrameCaps { lossy_port: 10, slowpath: 20, lossless: 30 });
    c.buffer.slowpath_frames = Some(0);
    assert!(c.validate().unwrap_err().to_string().contains("buffer.slowpath_frames"));
}

#[test]
fn minimal_file_gets_defaults() {
    let c = Config::from_toml("[[port]]\niface = \"a\"\n[[port]]\niface = \"b\"\n").unwrap();
    assert_eq!(c.ports.len(), 2);
    assert_eq!((c.ports[0].speed, c.ports[0].speed()), (None, Speed::gbps(10)));
    assert_eq!(c.lossless(), Priorities::from_bits(0b1_1000));
    assert_eq!(c.classify.dscp_table()[3], P3);
    assert_eq!(c.classify.dscp_table()[46], P0);
    assert_eq!(c.port_name(1), "b");
    assert_eq!(c, Config::for_interfaces(&["a", "b"]));
}

#[test]
fn full_file_parses() {
    let c = Config::from_toml(
        r#"
        name = "leaf1"
        switch_id = 11
        [buffer]
        shared_bytes = 1000000
        xoff_alpha = 0.5
        xon_offset_bytes = 1000
        headroom_bytes = 20000
        [pfc]
        lossless = [3]
        quanta = 1000
        refresh_us = 10
        [classify]
        dscp = { 26 = 3, 46 = 5 }
        default_priority = 1
        [dcfit]
        resolution = "drop"
        drop_ms = 50
        [[fdb_entry]]
        mac = "02:00:00:00:00:09"
        port = "up"
        [[port]]
        name = "up"
        iface = "veth1"
        mac = "02:00:00:00:00:01"
        speed = "25G"
        cable_m = 100
        pause_mode = "global-pause"
        scheduler = { drr = { weights = [1, 1, 1, 2, 2, 0, 0, 0] } }
        "#,
    )
    .unwrap();
    assert_eq!(c.buffer.xoff_rule(), XoffRule::Dynamic(0.5));
    assert_eq!(c.buffer.xon_rule(), XonRule::BelowXoff(1000));
    assert_eq!(c.classify.dscp_table()[26], P3);
    assert_eq!(c.classify.dscp_table()[0], P1);
    assert_eq!(c.ports[0].pause_mode, PauseMode::GlobalPause);
    assert_eq!(c.switch_id(), 11);
    assert_eq!(c.port_name(0), "up");
    assert_eq!(c.port_index("veth1"), Some(0));
    assert_eq!(c.dcfit.resolution, DeadlockResolution::Drop);
    assert_eq!(c.fdb_entries[0].port, "up");
    // What we print we can read back.
    assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
}

#[test]
fn errors_name_the_field() {
    let cases = [
        ("[[port]]\niface = \"a\"\nspeed = \"10X\"\n", "speed"),
        ("[[port]]\niface = \"a\"\nspeeed = \"10G\"\n", "speeed"),
        ("[[port]]\n", "iface"),
        ("", "port"),
        // A priority out of range is refused by its parser: the error shows the line.
        ("[pfc]\nlossless = [9]\n[[port]]\niface = \"a\"\n", "lossless = [9]"),
        ("[pfc]\nlossless = [9]\n[[port]]\niface = \"a\"\n", "priority 9 is not in 0..8"),
        ("[classify]\ndscp = { 3 = 8 }\n[[port]]\niface = \"a\"\n", "priority 8 is not in 0..8"),
        ("[classify]\ndefault_priority = 8\n[[port]]\niface = \"a\"\n", "default_priority = 8"),
        ("[classify]\ndscp = { 64 = 1 }\n[[port]]\niface = \"a\"\n", "classify.dscp.64"),
        ("[buffer]\nxoff_bytes = 1\nxoff_alpha = 1.0\n[[port]]\niface = \"a\"\n", "buffer.xoff_alpha"),
        ("[buffer]\nxoff_bytes = 100\nxon_bytes = 200\n[[port]]\niface = \"a\"\n", "buffer.xon_bytes"),
        ("[[port]]\niface = \"a\"\n[[port]]\niface = \"a\"\n", "port[1].iface"),
        ("[[port]]\niface = \"a\"\nmac = \"01:00:00:00:00:01\"\n", "port[0].mac"),
        ("[pfc]\nquanta = 0\n[[port]]\niface = \"a\"\n", "pfc.quanta"),
        ("[[port]]\niface = \"a\"\n[[fdb_entry]]\nmac = \"02:00:00:00:00:01\"\nport = \"b\"\n", "fdb_entry[0].port"),
        ("[dcfit]\nresolution = \"reboot\"\n[[port]]\niface = \"a\"\n", "resolution"),
        ("[[port]]\niface = \"a\"\nspeed = \"1k\"\n", "port[0].speed"),
        ("[[port]]\niface = \"a\"\nspeed = \"2T\"\n", "port[0].speed"),
        ("[pfc]\nrefresh_us = 4000\n[[port]]\niface = \"a\"\n", "pfc.refresh_us"),
        ("[fdb]\naging_s = 0\n[[port]]\niface = \"a\"\n", "fdb.aging_s"),
        ("[fdb]\nmax_entries = 100000000\n[[port]]\niface = \"a\"\n", "fdb.max_entries"),
        ("[buffer]\nxoff_alpha = 1.0\nxon_bytes = 1000\n[[port]]\niface = \"a\"\n", "buffer.xon_bytes"),
        ("[buffer]\nxoff_bytes = 1000\nxon_offset_bytes = 1000\n[[port]]\niface = \"a\"\n", "xon_offset_bytes"),
        ("[buffer]\nxoff_bytes = 0\n[[port]]\niface = \"a\"\n", "buffer.xoff_bytes"),
        ("[buffer]\nlossy_queue_bytes = 0\n[[port]]\niface = \"a\"\n", "buffer.lossy_queue_bytes"),
        ("[buffer]\nshared_bytes = 100000000000\n[[port]]\niface = \"a\"\n", "buffer.shared_bytes"),
        ("[[port]]\niface = \"a\"\ncable_m = 1e9\n", "port[0].cable_m"),
        ("[[port]]\niface = \"a\"\nxoff_bytes = 0\n", "port[0].xoff_bytes"),
    ];
    for (text, field) in cases {
        let err = Config::from_toml(text).unwrap_err().to_string();
        assert!(err.contains(field), "{text:?}: {err}");
    }
}

#[test]
fn switch_id_is_stable() {
    let mut c = Config::for_interfaces(&["a"]);
    c.name = "sw1".into();
    assert_eq!(c.switch_id(), Config { name: "sw1".into(), ..c.clone() }.switch_id());
    c.name = "sw2".into();
    assert_ne!(c.switch_id(), Config { name: "sw1".into(), ..c.clone() }.switch_id());
}

#[test]
fn switches_left_with_the_default_name_get_different_ids_from_their_addresses() {
    let mut a = Config::for_interfaces(&["eth1", "eth2"]);
    let mut b = a.clone();
    a.ports[0].mac = Some(MacAddr([2, 0, 0, 0, 0, 1]));
    b.ports[0].mac = Some(MacAddr([2, 0, 0, 0, 0, 2]));
    assert_eq!(a.name, b.name);
    assert_ne!(a.switch_id(), b.switch_id());
    assert_eq!(a.switch_id(), a.clone().switch_id(), "and each keeps its own");
    b.switch_id = Some(7);
    assert_eq!(b.switch_id(), 7);
}

const PROFILES: &str = r#"
    [buffer]
    xoff_bytes = 65536
    xon_offset_bytes = 16384
    headroom_bytes = 49152

    [buffer.priority.4]
    xoff_alpha = 0.5
    headroom_bytes = 98304

    [[port]]
    iface = "a"
    headroom_bytes = 40000

    [[port]]
    iface = "b"
    [port.priority.3]
    xoff_bytes = 20000
    xon_bytes = 10000
"#;

#[test]
fn a_group_takes_each_rule_from_the_most_specific_level_that_sets_it() {
    let c = Config::from_toml(PROFILES).unwrap();
    let (static_, offset) = (XoffRule::Static(65536), XonRule::BelowXoff(16384));
    // Port a, priority 3: the buffer's rules, the port's own headroom.
    assert_eq!(c.group_profile(0, P3), GroupProfile { xoff: static_, xon: offset, headroom_bytes: 40000 });
    // Priority 4's profile: a dynamic XOFF everywhere; its headroom is overridden again
    // by port a's, not by port b, which sets none.
    let dynamic = XoffRule::Dynamic(0.5);
    assert_eq!(c.group_profile(0, P4), GroupProfile { xoff: dynamic, xon: offset, headroom_bytes: 40000 });
    assert_eq!(c.group_profile(1, P4), GroupProfile { xoff: dynamic, xon: offset, headroom_bytes: 98304 });
    // Port b's own profile for priority 3 replaces both threshold rules, and keeps
    // the buffer's headroom.
    let own = GroupProfile { xoff: XoffRule::Static(20000), xon: XonRule::Static(10000), headroom_bytes: 49152 };
    assert_eq!(c.group_profile(1, P3), own);
    // With nothing configured: the defaults.
    let d = Config::for_interfaces(&["a"]).group_profile(0, P3);
    let defaults = GroupProfile {
        xoff: XoffRule::Static(DEFAULT_XOFF_BYTES),
        xon: XonRule::BelowXoff(DEFAULT_XON_OFFSET_BYTES),
        headroom_bytes: BufferConfig::default().headroom_bytes,
    };
    assert_eq!(d, defaults);
    // What we print we can read back.
    assert_eq!(Config::from_toml(&c.to_toml()).unwrap(), c);
}

#[test]
fn profiles_are_checked_alone_and_as_resolved() {
    let base = "[[port]]\niface = \"a\"\n";
    let cases = [
        ("[buffer.priority.8]\nxoff_bytes = 1000\n", "buffer.priority.8"),
        ("[buffer.priority.x]\nxoff_bytes = 1000\n", "buffer.priority.x"),
        ("[buffer.priority.3]\nxoff_bytes = 1000\nxoff_alpha = 1.0\n", "buffer.priority.3.xoff_alpha"),
        ("[buffer.priority.3]\nxon_bytes = 1\nxon_offset_bytes = 1\n", "buffer.priority.3.xon_bytes"),
        ("[buffer.priority.3]\nxoff_alpha = 100.0\n", "buffer.priority.3.xoff_alpha"),
        ("[buffer.priority.3]\nheadroom_bytes = 2000000000\n", "buffer.priority.3.headroom_bytes"),
        ("[buffer.priority.3]\nsize = 1\n", "size"),
        // Each level is fine alone; together the XON lies above the XOFF.
        ("[buffer]\nxon_bytes = 30000\n[buffer.priority.3]\nxoff_bytes = 20000\n", "port a priority 3"),
        // A dynamic XOFF for priority 4 under the buffer's static XON.
        ("[buffer]\nxon_bytes = 3000\n[buffer.priority.4]\nxoff_alpha = 1.0\n", "port a priority 4"),
        ("[buffer.priority.3]\nxoff_bytes = 10000\n", "port a priority 3"),
        ("[buffer.priority.3]\nxoff_bytes = 8000000\n", "exceeds the shared buffer"),
    ];
    for (text, field) in cases {
        let err = Config::from_toml(&format!("{text}{base}")).unwrap_err().to_string();
        assert!(err.contains(field), "{text:?}: {err}");
    }
    let per_port = format!("{base}[port.priority.3]\nxoff_bytes = 1000\nxoff_alpha = 1.0\n");
    let err = Config::from_toml(&per_port).unwrap_err().to_string();
    assert!(err.contains("port[0].priority.3.xoff_alpha"), "{err}");
}

#[test]
fn a_lossy_queue_follows_the_largest_frame_unless_its_bytes_are_set() {
    let mut b = BufferConfig::default();
    assert_eq!(b.lossy_queue_limit(max_frame_for_mtu(1500)), 512 << 10, "unchanged at the standard MTU");
    assert_eq!(b.lossy_queue_limit(max_frame_for_mtu(9000)), 256 * 9022);
    assert_eq!(b.lossy_queue_limit(max_frame_for_mtu(4200)), 256 * 4222);
    b.lossy_queue_bytes = Some(100_000);
    assert_eq!(b.lossy_queue_limit(max_frame_for_mtu(9000)), 100_000, "what the config sets is the limit");
}

#[test]
fn wred_profiles_resolve_port_then_switch_wide_then_the_defaults_setting_by_setting() {
    let text = r#"
[wred.priority.3]
green_min_threshold = 8192
[wred.priority.0]
wred_green_enable = true
ecn = "ecn_all"
[[port]]
iface = "a"
[port.wred.priority.3]
green_drop_probability = 20
[[port]]
iface = "b"
"#;
    let c = Config::from_toml(text).unwrap();
    let a3 = c.wred_profile(0, P3);
    assert_eq!(
        (a3.ecn, a3.wred_green_enable, a3.green_min_threshold, a3.green_max_threshold, a3.green_drop_probability),
        (EcnMode::EcnAll, true, 8192, DEFAULT_GREEN_MAX_THRESHOLD, 20)
    );
    assert_eq!(c.wred_profile(1, P3).green_drop_probability, DEFAULT_GREEN_DROP_PROBABILITY);
    assert_eq!(c.wred_profile(1, P4), WredProfile::default_for(true), "lossless 4: the defaults");
    assert_eq!(c.wred_profile(1, P1), WredProfile::default_for(false), "lossy 1: off");
    let q0 = c.wred_profile(1, P0);
    assert!(q0.wred_green_enable && q0.ecn == EcnMode::EcnAll);
    // What check-config prints reads back as the same profiles.
    let mut printed = c.clone();
    printed.wred = c.wred_filled();
    let again = Config::from_toml(&printed.to_toml()).unwrap();
    for port in 0..2 {
        for prio in Priority::all() {
            assert_eq!(again.wred_profile(port, prio), c.wred_profile(port, prio));
        }
    }
}

#[test]
fn wred_profiles_that_make_no_sense_are_refused_naming_the_field() {
    let base = "[[port]]\niface = \"a\"\n";
    let err = |extra: &str| Config::from_toml(&format!("{extra}\n{base}")).unwrap_err().to_string();
    assert!(err("[wred.priority.9]\necn = \"ecn_all\"").contains("wred.priority.9"));
    assert!(err("[wred.priority.3]\ngreen_drop_probability = 101").contains("green_drop_probability"));
    let e = err("[wred.priority.3]\ngreen_min_threshold = 100000");
    assert!(e.contains("priority 3") && e.contains("green_min_threshold"), "{e}");
    assert!(err("[wred.priority.3]\necn = \"ecn_some\"").contains("ecn"));
    assert!(err("[wred.priority.3]\ngreen_min = 1").contains("green_min"));
}
