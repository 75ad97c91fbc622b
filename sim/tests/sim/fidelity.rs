//! The simulator's fidelity, checked on exact figures: deterministic runs, the ring
//! deadlock and DCFIT's detection, Tagger's prevention, the length of a pause, the
//! headroom a sender's delay needs. No root, no network; seconds.

use std::time::Duration;

use pfcsim::scenario::{Action, FlowSpec, Scenario};
use pfcsim::trace::Sent;
use pfcsim::{simulate, simulate_recording, SimReport};
use pfcswitch_core::pfc;
use pfcswitch_core::priorities::names::*;
use pfcswitch_core::speed::Speed;
use pfcswitch_core::Priority;
use pfctestkit::headroom::CalcInput;

fn built_in(name: &str) -> Scenario {
    Scenario::built_in(name).unwrap()
}

#[test]
fn the_same_scenario_and_seed_give_byte_identical_reports() {
    for name in ["ring-deadlock", "fattree-storm"] {
        let s = built_in(name);
        let a = serde_json::to_string(&simulate(&s, 7, None).unwrap().report).unwrap();
        let b = serde_json::to_string(&simulate(&s, 7, None).unwrap().report).unwrap();
        assert!(a == b, "{name}: two runs with seed 7 differ");
    }
    // The seed decides who sends to whom in a permutation.
    let s = built_in("fattree-storm");
    let pairs = |seed| -> Vec<(String, String)> {
        simulate(&s, seed, None).unwrap().report.flows.iter().map(|f| (f.from.clone(), f.to.clone())).collect()
    };
    assert_ne!(pairs(1), pairs(2));
}

#[test]
fn the_ring_deadlocks_after_the_block_and_dcfit_names_the_cycle_three_pauses_round() {
    let r = simulate(&built_in("ring-deadlock"), 1, None).unwrap().report;
    assert!(r.deadlock_formed, "lossless frames stay stuck in the ring after the senders stop");
    assert!(r.stuck_lossless_frames > 100, "{}", r.stuck_lossless_frames);
    assert_eq!(r.lossless_dropped, 0, "a deadlock holds frames, it does not drop them");
    assert!(r.deadlocks >= 1);
    for d in &r.deadlock_events {
        assert_eq!(d.event.path_length, 3, "{d:?}");
        assert_eq!((d.origin_port_name.as_str(), d.return_port_name.as_str()), ("ccw", "cw"), "{d:?}");
    }
    // Every flow lost what the cycle holds.
    assert!(r.flows.iter().all(|f| f.lost > 0), "{:?}", r.flows);
}

#[test]
fn with_taggers_tables_the_ring_never_deadlocks_whatever_the_block() {
    for (block_ms, hold_ms) in [(10.0, 5.0), (20.0, 30.0), (15.0, 80.0)] {
        let mut s = built_in("ring-tagger");
        s.event[0].at_ms = block_ms;
        s.event[1].at_ms = block_ms + hold_ms;
        let r = simulate(&s, 1, None).unwrap().report;
        let what = format!("block at {block_ms} ms for {hold_ms} ms");
        assert!(!r.deadlock_formed, "{what}: {} frames stuck", r.stuck_lossless_frames);
        assert_eq!((r.deadlocks, r.lossless_lost, r.lossless_dropped), (0, 0, 0), "{what}");
        assert!(r.flows.iter().all(|f| f.received == f.sent && f.sent > 0), "{what}: {:?}", r.flows);
        // The same block without the tables deadlocks the ring.
        let mut plain = built_in("ring-deadlock");
        plain.event[0].at_ms = block_ms;
        plain.event[1].at_ms = block_ms + hold_ms;
        if hold_ms >= 30.0 {
            assert!(simulate(&plain, 1, None).unwrap().report.deadlock_formed, "{what}, without tables");
        }
    }
}

#[test]
fn bounce_routes_after_two_link_failures_deadlock_the_fat_tree_and_dcfit_finds_the_eight_hop_cycle() {
    let r = simulate(&built_in("fattree-bounce"), 1, None).unwrap().report;
    assert!(r.deadlock_formed, "lossless frames stay stuck after the senders stop");
    assert_eq!(r.lossless_dropped, 0);
    assert!(r.deadlocks >= 1);
    for d in &r.deadlock_events {
        assert_eq!(d.event.path_length, 8, "{d:?}");
        // Where the two bounces enter the other flow's route.
        let ends = (d.switch.as_str(), d.origin_port_name.as_str(), d.return_port_name.as_str());
        assert!(matches!(ends, ("edge0-1", "p4", "p3") | ("edge1-1", "p3", "p4")), "{ends:?}");
    }
}

#[test]
fn with_taggers_tables_the_bounce_routes_never_deadlock_at_any_load() {
    for load in [30.0, 60.0, 90.0, 100.0] {
        let mut s = built_in("fattree-bounce-tagger");
        s.flow.iter_mut().for_each(|f| f.load = Some(load));
        let r = simulate(&s, 1, None).unwrap().report;
        assert!(!r.deadlock_formed, "{load} %: {} frames stuck", r.stuck_lossless_frames);
        assert_eq!((r.deadlocks, r.lossless_lost, r.lossless_dropped), (0, 0, 0), "{load} %");
        assert!(r.flows.iter().all(|f| f.received == f.sent && f.sent > 0), "{load} %: {:?}", r.flows);
        // Hosts queue on the initial tag's priority, the one the edge pauses them on.
        assert!(r.flows.iter().all(|f| f.priority == P4), "{:?}", r.flows);
    }
    // The same routes and load without the tables deadlock.
    let mut plain = built_in("fattree-bounce");
    plain.flow.iter_mut().for_each(|f| f.load = Some(90.0));
    assert!(simulate(&plain, 1, None).unwrap().report.deadlock_formed, "90 %, without tables");
}

/// One switch between a sender at line rate and a receiver whose NIC sends one pause.
fn pause_scenario(speed: Speed, quanta: u16) -> Scenario {
    let text = format!(
        r#"
        name = "one-pause"
        speed = "{speed}"
        duration_ms = 3
        drain_ms = 1
        [topology]
        host = [{{ name = "tx" }}, {{ name = "rx" }}]
        switch = [{{ name = "dut" }}]
        link = [{{ a = "tx:eth0", b = "dut:p1" }}, {{ a = "rx:eth0", b = "dut:p2" }}]
        [switch_defaults.pfc]
        lossless = [3]
        [[flow]]
        from = "tx"
        to = "rx"
        size = 1518
        load = 100
        [[event]]
        at_ms = 1
        storm = {{ host = "rx", priorities = [3], quanta = {quanta}, interval_us = 10000, duration_ms = 0.001 }}
        "#
    );
    Scenario::from_toml(&text).unwrap()
}

#[test]
fn a_pause_of_q_quanta_stops_a_priority_for_exactly_q_times_512_bit_times() {
    for (speed, quanta) in
        [(Speed::gbps(10), 100), (Speed::gbps(1), 1000), (Speed::gbps(100), 65535), (Speed::gbps(25), 3)]
    {
        let s = pause_scenario(speed, quanta);
        let (_, sent) = simulate_recording(&s, 1, None, &["rx", "dut:p2"]).unwrap();
        let pause = sent.iter().find(|f| f.frame[12..14] == [0x88, 0x08]).expect("rx sent its pause");
        // The pause's last bit reaches the switch after its wire time and 2 m of cable.
        let arrives = pause.at_ns + speed.wire_time(pfc::MIN_FRAME_LEN).as_nanos() as u64 + 10;
        let data: Vec<(u64, usize)> =
            sent.iter().filter(|f| f.port != pause.port).map(|f| (f.at_ns, f.frame.len())).collect();
        let resumed = data.iter().find(|(t, _)| *t >= arrives).expect("data goes on after the pause").0;
        // The frame that was on the wire when the pause arrived completes; the next one
        // starts exactly when the pause ends (or when that frame ends, after a shorter pause).
        let (before, len) = *data.iter().rev().find(|(t, _)| *t < arrives).unwrap();
        let on_wire_until = before + speed.wire_time(len).as_nanos() as u64;
        assert!(on_wire_until > arrives, "the switch was sending when the pause arrived");
        let pause_ends = arrives + speed.quanta_duration(quanta).as_nanos() as u64;
        assert_eq!(resumed, pause_ends.max(on_wire_until), "{quanta} quanta at {speed}");
        if quanta >= 100 {
            let exact = (u64::from(quanta) * 512 * 1_000_000_000).div_ceil(speed.bps());
            assert_eq!(resumed - arrives, exact, "{quanta} quanta (rounded up to the ns)");
        }
    }
}

/// The calculator adds worst cases for two things that depend on timing: the pause waits
/// for a whole frame in transmission on the switch's port, and the sender has just begun
/// a frame when it stops. One simulated run has one timing, so the headroom a delay
/// needs is the most the switch used over the timings: the phase of the traffic the
/// other way, whose frame the pause waits behind, over 32 steps of a frame. That agrees
/// with the calculator within one frame (never above it); and in each single run, once
/// the calculator is given the pause's actual wait (read from the simulated wire), it
/// agrees within one frame too — the sender's frame left to complete.
#[test]
fn the_headroom_a_sender_delay_needs_agrees_with_the_calculator_within_one_frame() {
    let speed = Speed::gbps(10);
    let frame = 1514u32;
    let frame_wire = speed.wire_time(frame as usize).as_nanos() as u64;
    let prop = 10; // 2 m of cable
    for delay_quanta in [0u32, 250, 1000, 2000, 4000] {
        let mut s = built_in("headroom");
        s.flow.truncate(1);
        s.flow[0].load = Some(100.0);
        // Traffic the other way keeps the switch's port to the sender busy: the pause
        // waits for the frame in transmission there.
        let mut back = s.flow[0].clone();
        (back.from, back.to, back.priority, back.dscp) = ("rx".into(), "tx".into(), P1, Some(1));
        s.flow.push(back);
        s.switch_defaults.insert("buffer".into(), toml::Value::Table(toml::toml! { headroom_bytes = 1048576 }));
        let input = CalcInput {
            speed,
            cable_m: s.cable_m,
            max_frame: frame,
            response: Duration::ZERO,
            switch_delay: Duration::ZERO,
            load: 1.0,
        };
        let response = input.quanta(delay_quanta);
        s.host.get_mut("tx").unwrap().response_delay_ns = Some(response.as_nanos() as u64);
        let worst = CalcInput { response, ..input.clone() }.calculate().total_bytes;
        let (outcome, sent) = simulate_recording(&s, 1, None, &["tx", "dut:p1"]).unwrap();
        let r = outcome.report;
        assert_eq!(r.lossless_lost, 0);
        let used = r.switches[0].ports[0].priorities[3].headroom_watermark;
        let what =
            format!("delay {delay_quanta} quanta: the switch used {used} B of headroom, the calculator says {worst} B");
        let needed = (1..32u64)
            .map(|k| {
                let mut shifted = s.clone();
                shifted.flow[1].start_ms += (k * frame_wire) as f64 / 32.0 / 1e6;
                let r = simulate(&shifted, 1, None).unwrap().report;
                assert_eq!(r.lossless_lost, 0);
                r.switches[0].ports[0].priorities[3].headroom_watermark
            })
            .fold(used, u64::max);
        assert!(needed <= worst && worst - needed < u64::from(frame), "{what}; needed {needed} B over all timings");

        // The first pause the switch sent, and the frame from the sender that crossed XOFF
        // just before it (the last to arrive by then).
        let pause = sent.iter().find(|f| f.frame[12..14] == [0x88, 0x08]).expect("the switch paused the sender");
        let crossed = sent
            .iter()
            .filter(|f| f.port != pause.port)
            .map(|f| f.at_ns + frame_wire + prop)
            .filter(|&arrived| arrived <= pause.at_ns)
            .max()
            .unwrap();
        let waited = Duration::from_nanos(pause.at_ns - crossed);
        let calc = CalcInput { response, ..input.clone() };
        let with_wait = worst as f64 - calc.bytes_during(speed.wire_time(frame as usize)) + calc.bytes_during(waited);
        assert!(
            (with_wait - used as f64).abs() <= f64::from(frame),
            "{what}; with the pause's actual wait of {} ns it says {with_wait:.0} B",
            waited.as_nanos()
        );
    }
}

/// The built-in plan with `prios` under test (lossless, stormed, test traffic sharing 50 %
/// of line rate) and background on every other priority; the sender answers after
/// `delay_quanta`. Returns the report and the frames the DUT sent to rx and tx sent.
fn pause_response_plan(prios: &[u8], delay_quanta: u64) -> (SimReport, Vec<Sent>, Vec<Sent>) {
    let mut s = built_in("headroom");
    let list = toml::Value::Array(prios.iter().map(|&p| toml::Value::Integer(p.into())).collect());
    s.switch_defaults.insert("pfc".into(), toml::Value::Table(toml::Table::from_iter([("lossless".into(), list)])));
    let (test, background) = (s.flow[0].clone(), s.flow[1].clone());
    s.flow.clear();
    for &p in prios {
        let load = Some(50.0 / prios.len() as f64);
        s.flow.push(FlowSpec { priority: Priority::new(p), dscp: Some(p), load, ..test.clone() });
    }
    for p in (0..8).filter(|p| !prios.contains(p)) {
        s.flow.push(FlowSpec { priority: Priority::new(p), dscp: Some(p), ..background.clone() });
    }
    let Action::Storm(storm) = &mut s.event[0].action else { panic!("the plan's storm") };
    storm.priorities = prios.iter().map(|&p| Priority::new(p)).collect();
    s.host.get_mut("tx").unwrap().response_delay_ns = Some(delay_quanta * 512 / 10);
    // The same run twice (it is deterministic), recording one port each time.
    let (outcome, to_rx) = simulate_recording(&s, 1, None, &["dut:p2"]).unwrap();
    let (_, from_tx) = simulate_recording(&s, 1, None, &["tx"]).unwrap();
    (outcome.report, to_rx, from_tx)
}

#[test]
fn the_pause_response_plan_passes_each_of_its_checks_exactly_on_priorities_3_4_and_both() {
    const FRAME: u64 = 1514; // 1518 on the wire, as buffered
    const STORM_END_NS: u64 = 13_000_000;
    let (xoff, headroom) = (65536u64, 98304u64);
    for prios in [&[3u8][..], &[4], &[3, 4]] {
        let long = 6000 * prios.len() as u64;
        for (delay, enough) in [(0, true), (2000, true), (long, false)] {
            let what = format!("priorities {prios:?}, sender delay {delay} quanta");
            let (r, to_rx, from_tx) = pause_response_plan(prios, delay);
            let dut = &r.switches[0];
            // 1. The storm kept every tested priority paused from 1 ms to its end.
            let stormed = r.links.iter().find(|l| l.from == "dut:p2").unwrap();
            for &p in prios {
                assert!(stormed.paused_us[usize::from(p)] >= 12_000.0, "{what}: {stormed:?}");
            }
            // 2. Every background frame arrived, and the storm paused no background
            // priority at any port: the background kept its rate through the storm.
            for f in r.flows.iter().filter(|f| !prios.contains(&f.priority.get())) {
                assert!(f.sent > 500 && f.received == f.sent, "{what}: {f:?}");
                for l in &r.links {
                    assert_eq!(l.paused_us[f.priority.index()], 0.0, "{what}: {l:?}");
                }
            }
            // Test frames of priority `p` put on the wire during the storm.
            let during_storm = |sent: &[Sent], p: u8| {
                sent.iter()
                    .filter(|f| f.at_ns < STORM_END_NS && f.frame[12..14] == [0x08, 0x00] && f.frame[15] >> 2 == p)
                    .count() as u64
            };
            for &p in prios {
                let f = r.flows.iter().find(|f| f.priority.get() == p).unwrap();
                let g = &dut.ports[0].priorities[usize::from(p)];
                // 3. No test frame left the DUT while the storm lasted.
                assert_eq!(during_storm(&to_rx, p), 0, "{what}");
                // 4. What tx sent meanwhile and the DUT did not drop, it held, exactly,
                // within XOFF + headroom.
                let held = (during_storm(&from_tx, p) - g.counters.lossless_drops) * FRAME;
                assert_eq!(g.ingress_watermark, held, "{what}: {g:?}");
                assert!(g.ingress_watermark <= xoff + headroom + FRAME, "{what}: {g:?}");
                assert!(g.ingress_watermark < dut.shared_buffer_bytes);
                assert!(g.counters.xoff_sent > 0, "{what}: the DUT paused the sender");
                // 5. Ingress drops: none while the headroom covers the delay, some once it
                // does not, and only after the headroom filled. Held frames are delivered.
                if enough {
                    assert_eq!(g.counters.lossless_drops, 0, "{what}: {g:?}");
                    assert!(g.headroom_watermark < headroom, "{what}: {g:?}");
                    assert_eq!(f.received, f.sent, "{what}");
                } else {
                    assert!(g.counters.lossless_drops > 0, "{what}: {g:?}");
                    assert!(g.headroom_watermark + FRAME > headroom, "{what}: {g:?}");
                    assert_eq!(f.received, f.sent - g.counters.lossless_drops, "{what}");
                }
            }
        }
    }
}

/// The netns test of this (`two_lossless_priorities_...` in netns-tests/tests/netns/headroom.rs)
/// checks the drops alone; the figures live here, where they are exact.
#[test]
fn two_lossless_priorities_with_their_own_headroom_take_the_same_delay_each_as_the_calculator_says() {
    const FRAME: u64 = 1514;
    // 4000 quanta at 10G (205 µs) at 25 % of line rate each: about 64 KiB in flight after
    // XOFF, which overruns priority 3's 32 KiB and fits priority 4's 128 KiB.
    let delay_quanta = 4000;
    let mut s = built_in("headroom");
    s.switch_defaults.insert("pfc".into(), toml::Value::Table(toml::toml! { lossless = [3, 4] }));
    s.switch_defaults.insert(
        "buffer".into(),
        toml::Value::Table(toml::toml! {
            xoff_bytes = 65536
            headroom_bytes = 32768
            [priority.4]
            headroom_bytes = 131072
        }),
    );
    let (test, background) = (s.flow[0].clone(), s.flow[1].clone());
    s.flow.clear();
    for p in [3u8, 4] {
        s.flow.push(FlowSpec { priority: Priority::new(p), dscp: Some(p), load: Some(25.0), ..test.clone() });
    }
    for p in [0u8, 1, 2, 5, 6, 7] {
        s.flow.push(FlowSpec { priority: Priority::new(p), dscp: Some(p), ..background.clone() });
    }
    let Action::Storm(storm) = &mut s.event[0].action else { panic!("the plan's storm") };
    storm.priorities = vec![P3, P4];
    let response_ns = delay_quanta * 512 / 10;
    s.host.get_mut("tx").unwrap().response_delay_ns = Some(response_ns);
    let r = simulate(&s, 1, None).unwrap().report;
    let port = &r.switches[0].ports[0];
    let (p3, p4) = (&port.priorities[3], &port.priorities[4]);
    // The calculator, per priority at its share of the load: both need more than 32 KiB
    // and less than 128 KiB.
    let calc = CalcInput {
        speed: Speed::gbps(10),
        cable_m: s.cable_m,
        max_frame: FRAME as u32,
        response: Duration::from_nanos(response_ns),
        switch_delay: Duration::ZERO,
        load: 0.25,
    }
    .calculate()
    .total_bytes;
    assert!(calc > 32 << 10 && calc < 128 << 10, "the calculator says {calc} B");
    assert!(p3.counters.lossless_drops > 0, "32 KiB overrun: {p3:?}");
    assert!(p3.headroom_watermark + FRAME > 32 << 10 && p3.headroom_watermark <= 32 << 10, "{p3:?}");
    assert_eq!(p4.counters.lossless_drops, 0, "128 KiB hold the same delay: {p4:?}");
    assert!(p4.headroom_watermark > 32 << 10, "priority 4 used more than priority 3 could: {p4:?}");
    // What priority 4 used is the calculator's figure, never above it, within a frame
    // and the pause's wait behind a frame in transmission (the calculator's worst case).
    assert!(p4.headroom_watermark <= calc && calc - p4.headroom_watermark < 2 * FRAME, "{p4:?} against {calc} B");
}

#[test]
fn a_sender_that_ignores_pauses_overruns_the_headroom_and_one_that_honours_them_loses_nothing() {
    let honours = simulate(&built_in("headroom"), 1, None).unwrap().report;
    assert_eq!((honours.lossless_lost, honours.lossless_dropped), (0, 0));
    let mut s = built_in("headroom");
    s.event.push(toml::from_str("at_ms = 0\nignore_pauses = \"tx\"").unwrap());
    let ignores = simulate(&s, 1, None).unwrap().report;
    assert!(ignores.lossless_dropped > 0, "the headroom overflowed: {ignores:?}");
    assert_eq!(ignores.lossless_lost, ignores.lossless_dropped, "what was lost is what the switch dropped");
    // The switch kept pausing the sender all along.
    let paused = ignores.links.iter().find(|l| l.from == "tx").unwrap();
    assert!(paused.paused_us[3] > 9000.0, "{paused:?}");
}

#[test]
fn a_link_that_goes_down_loses_only_the_frame_on_it_and_carries_traffic_again_once_up() {
    let mut s = pause_scenario(Speed::gbps(10), 1);
    s.event.clear();
    s.flow[0].load = Some(20.0);
    for e in ["at_ms = 1\nlink_down = [\"dut\", \"rx\"]", "at_ms = 1.5\nlink_up = [\"dut\", \"rx\"]"] {
        s.event.push(toml::from_str(e).unwrap());
    }
    let r = simulate(&s, 1, None).unwrap().report;
    let down = r.links.iter().find(|l| l.from == "dut:p2").unwrap();
    let f = &r.flows[0];
    assert!(down.lost_link_down <= 1, "{down:?}");
    assert_eq!(f.lost, down.lost_link_down, "the rest waited in the switch: {f:?}");
    // 0.5 ms of 20 % load queued in the switch, above XOFF: the sender was paused.
    let tx = r.links.iter().find(|l| l.from == "tx").unwrap();
    assert!(tx.paused_us[3] > 0.0, "{tx:?}");
    // The first frame after the link went down waited out the rest of the 0.5 ms outage:
    // all of it but at most one frame interval (1538 bytes at 20 % of 10G: 6.2 µs).
    assert!(f.received > 0 && f.latency.max_us >= 500.0 - 6.2, "frames waited out the outage: {f:?}");
}

#[test]
fn unusable_numbers_in_a_scenario_are_errors_that_name_the_field() {
    let base = pause_scenario(Speed::gbps(10), 100);
    let mut s = base.clone();
    s.flow[0].stop_ms = Some(-1.0);
    let err = simulate(&s, 1, None).err().expect("a negative stop is refused").to_string();
    assert!(err.contains("flow[0]") && err.contains("stop_ms"), "{err}");
    let mut s = base.clone();
    (s.flow[0].load, s.flow[0].rate_fps) = (None, Some(1e-300));
    let err = simulate(&s, 1, None).err().expect("a rate too small to pace is refused").to_string();
    assert!(err.contains("flow[0]"), "{err}");
    let mut s = base;
    s.link.push(toml::from_str("a = \"tx\"\nb = \"dut\"\ncable_m = nan").unwrap());
    let err = simulate(&s, 1, None).err().expect("a cable of NaN metres is refused").to_string();
    assert!(err.contains("link[0].cable_m"), "{err}");
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("pfcsim-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The records of a nanosecond pcap: (time in ns, frame).
/// A link direction's capture: each frame's time stamp (ns) and bytes, after checking
/// that it is one interface named after the file, every frame sent out of it, whole.
fn pcap_records(path: &std::path::Path) -> Vec<(u64, Vec<u8>)> {
    let frames = pfctestkit::pcap::read_capture(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    frames
        .into_iter()
        .map(|f| {
            assert_eq!((f.interface, f.direction), (0, Some(pfctestkit::pcap::Direction::Outbound)), "{path:?}");
            assert_eq!(f.original_len as usize, f.data.len(), "{path:?}: whole frames");
            (f.at.as_nanos() as u64, f.data)
        })
        .collect()
}

#[test]
fn pcap_writes_every_frame_of_each_link_direction_at_its_simulated_nanosecond() {
    let dir = scratch("pcap");
    let r = simulate(&built_in("headroom"), 1, Some(&dir)).unwrap().report;
    assert_eq!(r.links.len(), 4);
    for l in &r.links {
        let path = dir.join(format!("{}-to-{}.pcapng", l.from, l.to).replace(':', "_"));
        let records = pcap_records(&path);
        assert_eq!(records.len() as u64, l.frames, "{path:?}");
        assert!(records.windows(2).all(|w| w[0].0 <= w[1].0), "{path:?}: times never go back");
        let pauses = records.iter().filter(|(_, f)| f[12..14] == [0x88, 0x08]).count() as u64;
        assert_eq!(pauses, l.pause_frames, "{path:?}");
    }
    // The storm's first pause leaves rx at 1 ms to the nanosecond, a PFC frame stopping
    // priority 3 for 65535 quanta.
    let (at, frame) = pcap_records(&dir.join("rx-to-dut_p2.pcapng")).swap_remove(0);
    assert_eq!(at, 1_000_000);
    let mac = pfcswitch_core::mac::MacAddr(frame[0..6].try_into().unwrap());
    let pfc::MacControl::Pfc(p) = pfc::decode(&frame, mac).unwrap().body else { panic!("a PFC frame") };
    assert_eq!(p.classes().collect::<Vec<_>>(), vec![(P3, 65535)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plot_draws_one_bar_per_pause_interval_on_a_row_per_paused_port() {
    let dir = scratch("plot");
    let svg = dir.join("timeline.svg");
    let outcome = simulate(&built_in("headroom"), 1, None).unwrap();
    pfcsim::plot::timeline(&svg, "headroom", &outcome.timelines, outcome.report.simulated_ms).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    let paused: Vec<&str> =
        outcome.timelines.iter().filter(|(_, t)| !t.is_empty()).map(|(label, _)| label.as_str()).collect();
    assert_eq!(paused, ["dut:p2", "tx"], "the DUT's port to rx, and the sender the DUT paused");
    for label in &paused {
        assert!(text.lines().any(|l| l.trim() == *label), "a row labelled {label}");
    }
    // Priority 3's colour, once per interval and once in the legend under the chart.
    let intervals: usize = outcome.timelines.iter().map(|(_, t)| t.intervals[3].len()).sum();
    assert!(intervals >= 2);
    assert_eq!(text.matches("fill=\"#D62728\"").count(), intervals + 1);
    assert!(text.lines().any(|l| l.trim() == "priority"), "the legend names what the colours are");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_pfc_watchdog_cuts_off_a_storming_nic_at_the_detection_time_and_restores_after_it_stops() {
    let mut s = pause_scenario(Speed::gbps(10), 65535);
    (s.duration_ms, s.drain_ms) = (900.0, 100.0);
    s.flow[0].load = Some(10.0);
    // From 100 ms to 600 ms rx's NIC refreshes a pause on priority 3 every millisecond.
    s.event[0] = toml::from_str(
        "at_ms = 100\nstorm = { host = \"rx\", priorities = [3], quanta = 65535, interval_us = 1000, duration_ms = 500 }",
    )
    .unwrap();
    let r = simulate(&s, 1, None).unwrap().report;
    let port = &r.switches[0].ports[1];
    let wd = port.pfcwd.iter().find(|w| w.priority == P3).unwrap();
    assert_eq!((wd.counters.storms_detected, wd.counters.restored), (1, 1), "{wd:?}");
    // Detected 200 ms after the first pause, to the microsecond.
    assert_eq!(wd.counters.last_detection_us, 200_000);
    // Until then the frames waited; then the queue was dropped, and every frame for it
    // until 200 ms after the last pause (at 599 ms): 10 % of 10G from 100 ms to 799 ms.
    let per_ms = 10e9 * 0.10 / (1538.0 * 8.0) / 1e3;
    let dropped = wd.counters.dropped_frames as f64;
    assert!(
        (dropped - per_ms * 699.0).abs() <= per_ms,
        "{dropped} frames dropped, about {:.0} expected",
        per_ms * 699.0
    );
    assert_eq!(port.counters.drops.watchdog, wd.counters.dropped_frames);
    // Lost are exactly those; the sender was paused only briefly (the ingress released).
    assert_eq!(r.lossless_lost, wd.counters.dropped_frames);
    assert!(!wd.active);
}

#[test]
fn a_jumbo_fabric_carries_9000_byte_frames_losslessly_and_a_frame_above_the_mtu_is_refused() {
    let text = |mtu: u32| {
        format!(
            "topology = \"fattree:k=4\"\nspeed = \"100G\"\ncable_m = 10\nduration_ms = 1\ndrain_ms = 1\nmtu = {mtu}\n\
             [[flow]]\nfrom = \"*\"\nto = \"*\"\nsize = 9018\nload = 60\n"
        )
    };
    let r = simulate(&Scenario::from_toml(&text(9000)).unwrap(), 1, None).unwrap().report;
    assert!(r.flows.iter().all(|f| f.sent > 0 && f.received == f.sent), "{:?}", r.flows);
    assert_eq!((r.lossless_lost, r.lossless_dropped), (0, 0));
    let err = simulate(&Scenario::from_toml(&text(1500)).unwrap(), 1, None).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("size 9018 is above what MTU 1500 carries (1518 bytes)"), "{err}");
}
