//! `headroom --compare`: the headroom sweep on the netns testbed and in the simulator,
//! side by side, with the testbed's disturbance beside each row: where the real path
//! departs from the model, and by how much. A benchmark, not a test.
//!
//! Both run the production engine with the same buffer configuration, the same sender
//! delays, loads and frame size. The testbed adds veth, the kernel's softirq work and
//! the loop's turns to every response; the simulator adds nothing (its response is the
//! sender's delay, its links have the scenario's cable). The difference between the two
//! columns is what this machine adds, which no headroom figure accounts for.

use std::time::Duration;

use anyhow::{Context, Result};
use pfcswitch::core::Priority;
use serde::Serialize;

use pfcsim::scenario::Scenario;
use pfcswitch_table::Table;

use super::sweep::{self, SweepOptions, SweepReport};

/// One (delay, priority): the need on the testbed, in the simulator, and by the calculator.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgreementRow {
    pub delay_quanta: u32,
    pub prio: Priority,
    /// The calculator's figure for the sender's delay alone (no cable), bytes.
    pub calculator_bytes: u64,
    /// The simulator: headroom used (or, where it dropped, the headroom and what it
    /// dropped), and frames dropped.
    pub sim_bytes: u64,
    pub sim_drops: u64,
    /// The testbed: the same over its runs (mean without the extremes), and the frames
    /// dropped in all of them.
    pub testbed_bytes: u64,
    pub testbed_drops: u64,
    /// Testbed less simulator, bytes and frames.
    pub difference_bytes: i64,
    pub difference_frames: f64,
    /// What the testbed added to the sender's delay (mean without the extremes), µs.
    pub testbed_added_us: f64,
    /// The most the switch waited for a CPU in a run at this delay, µs.
    pub switch_cpu_wait_max_us: Option<u64>,
    /// Runs at this delay the testbed disturbed, set aside and repeated.
    pub set_aside: usize,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct AgreementReport {
    pub speed: String,
    pub frame_size: usize,
    pub headroom_bytes: u64,
    pub xoff_bytes: u64,
    pub rows: Vec<AgreementRow>,
}

/// The simulated run of the sweep's trial at `delay`: tx → DUT → rx, rx storming the
/// priorities under test, tx sending test and background traffic and answering pauses
/// after `delay` quanta.
pub fn scenario(opts: &SweepOptions, delay: u32) -> Result<Scenario> {
    let background = opts.background();
    let lossless = opts.dut_lossless();
    let list = |v: &[Priority]| v.iter().map(Priority::to_string).collect::<Vec<_>>().join(", ");
    let dscp = opts.prios.iter().chain(&background).map(|p| format!("{p} = {p}")).collect::<Vec<_>>().join(", ");
    let response_ns = opts.speed.bit_times(u64::from(delay) * 512).as_nanos();
    // The storm refreshes every half pause, from before the traffic to after it.
    let pause = opts.speed.quanta_duration(u16::MAX);
    let interval_us = (pause.as_secs_f64() * 1e6 / 2.0).max(1.0);
    // A few ms of traffic: the sender is paused within the first, and what it still
    // sends after that lands in the headroom.
    let (traffic_ms, start_ms) = (20.0, 2.0);
    let mut text = format!(
        r#"
        name = "agreement"
        speed = "{speed}"
        cable_m = 0
        duration_ms = {duration}
        drain_ms = 5
        [topology]
        host = [{{ name = "tx" }}, {{ name = "rx" }}]
        switch = [{{ name = "dut" }}]
        link = [{{ a = "tx:eth0", b = "dut:p1" }}, {{ a = "rx:eth0", b = "dut:p2" }}]
        [switch_defaults.pfc]
        lossless = [{lossless}]
        [switch_defaults.pfcwd]
        action = "off"
        [switch_defaults.buffer]
        xoff_bytes = {xoff}
        xon_offset_bytes = {xon_offset}
        headroom_bytes = {headroom}
        shared_bytes = {shared}
        [switch_defaults.classify]
        dscp = {{ {dscp} }}
        [host.tx]
        response_delay_ns = {response_ns}
        [[event]]
        at_ms = 1
        storm = {{ host = "rx", priorities = [{prios}], quanta = 65535, interval_us = {interval_us}, duration_ms = {storm_ms} }}
        "#,
        speed = opts.speed,
        duration = start_ms + traffic_ms,
        lossless = list(&lossless),
        xoff = opts.xoff_bytes,
        xon_offset = opts.xoff_bytes / 4,
        headroom = opts.headroom_bytes,
        shared = opts.shared_bytes,
        prios = list(&opts.prios),
        storm_ms = start_ms + traffic_ms,
    );
    // Per-priority profiles, as the sweep gives them to the DUT.
    for &p in &opts.prios {
        let (headroom, xoff) = (opts.prio_headroom.get(&p), opts.prio_xoff.get(&p));
        if headroom.is_some() || xoff.is_some() {
            text += &format!("\n[switch_defaults.buffer.priority.{p}]\n");
            if let Some(h) = headroom {
                text += &format!("headroom_bytes = {h}\n");
            }
            if let Some(x) = xoff {
                text += &format!("xoff_bytes = {x}\nxon_offset_bytes = {}\n", x / 4);
            }
        }
    }
    let flow = |p: Priority, load: f64| {
        format!(
            "\n[[flow]]\nfrom = \"tx\"\nto = \"rx\"\npriority = {p}\ndscp = {p}\nsize = {}\nload = {load}\nstart_ms = {start_ms}\n",
            opts.frame_size
        )
    };
    for &p in &opts.prios {
        text += &flow(p, opts.test_load_per_prio());
    }
    for &b in &background {
        text += &flow(b, opts.background_load / background.len() as f64);
    }
    Scenario::from_toml(&text).with_context(|| format!("the agreement's scenario at delay {delay}"))
}

/// The simulator's need and drops for each priority under test at `delay`.
fn simulated(opts: &SweepOptions, delay: u32) -> Result<Vec<(u64, u64)>> {
    let r = pfcsim::simulate(&scenario(opts, delay)?, 1, None)?.report;
    let port = &r.switches[0].ports[0];
    let frame_len = opts.frame_size as u64 - 4;
    Ok(opts
        .prios
        .iter()
        .map(|&p| {
            let g = &port.priorities[p.index()];
            let drops = g.counters.lossless_drops;
            (sweep::headroom_needed(drops, g.headroom_watermark, opts.headroom_for(p), frame_len), drops)
        })
        .collect())
}

/// Side by side, from a testbed sweep and the simulator.
pub fn compare(opts: &SweepOptions, testbed: &SweepReport) -> Result<AgreementReport> {
    let frame_len = opts.frame_size as u64 - 4;
    let mut rows = Vec::new();
    for &delay in &opts.delays {
        let sim = simulated(opts, delay)?;
        let runs: Vec<&sweep::RunOutcome> = testbed.runs.iter().filter(|r| r.delay_quanta == delay).collect();
        for (i, &prio) in opts.prios.iter().enumerate() {
            let check = testbed.checks.iter().find(|c| c.delay_quanta == delay && c.prio == prio);
            let testbed_bytes = check.map_or(0, |c| c.measured_bytes);
            let (sim_bytes, sim_drops) = sim[i];
            let delay_us = opts.speed.bit_times(u64::from(delay) * 512).as_secs_f64() * 1e6;
            let calculator_bytes = opts.calc_input(Duration::from_secs_f64(delay_us / 1e6)).calculate().total_bytes;
            let difference = testbed_bytes as i64 - sim_bytes as i64;
            rows.push(AgreementRow {
                delay_quanta: delay,
                prio,
                calculator_bytes,
                sim_bytes,
                sim_drops,
                testbed_bytes,
                testbed_drops: runs.iter().filter_map(|r| r.prios.get(i)).map(|p| p.drops).sum(),
                difference_bytes: difference,
                difference_frames: difference as f64 / frame_len as f64,
                testbed_added_us: check.map_or(0.0, |c| c.response_us - delay_us),
                switch_cpu_wait_max_us: runs.iter().filter_map(|r| r.dut_cpu_wait_us).max(),
                set_aside: testbed.disturbed.iter().filter(|r| r.delay_quanta == delay).count(),
            });
        }
    }
    Ok(AgreementReport {
        speed: opts.speed.to_string(),
        frame_size: opts.frame_size,
        headroom_bytes: opts.headroom_bytes,
        xoff_bytes: opts.xoff_bytes,
        rows,
    })
}

/// Runs the sweep `opts` on the testbed, then each of its delays in the simulator, and
/// prints both side by side.
pub fn run(opts: &SweepOptions, json: bool) -> Result<()> {
    eprintln!("  the sweep on the testbed ({} delays, {} runs each)", opts.delays.len(), opts.repeats);
    let testbed = sweep::run(opts, &|_| {})?;
    let report = compare(opts, &testbed)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

fn render(r: &AgreementReport) -> String {
    let mut out = format!(
        "Headroom used after XOFF, testbed against simulator: {} ports, {} B frames, XOFF {} B, headroom {} B. \
         Calculator: the sender's delay alone, no cable. Where a side dropped, its figure is the headroom and \
         what it dropped. Added: what the testbed added to the sender's delay (veth, softirq work, the loop's \
         turns); CPU wait: the most the switch waited for a CPU in a run; set aside: runs the testbed disturbed.\n",
        r.speed, r.frame_size, r.xoff_bytes, r.headroom_bytes
    );
    let mut t = Table::new(&[
        "delay q",
        "prio",
        "calculator B",
        "simulator B",
        "drops",
        "testbed B",
        "drops",
        "testbed − sim",
        "added µs",
        "CPU wait µs",
        "set aside",
    ]);
    for x in &r.rows {
        t.row(vec![
            x.delay_quanta.to_string(),
            x.prio.to_string(),
            x.calculator_bytes.to_string(),
            x.sim_bytes.to_string(),
            x.sim_drops.to_string(),
            x.testbed_bytes.to_string(),
            x.testbed_drops.to_string(),
            format!("{:+} B ({:+.1} frames)", x.difference_bytes, x.difference_frames),
            format!("{:.0}", x.testbed_added_us),
            x.switch_cpu_wait_max_us.map_or("-".into(), |u| u.to_string()),
            x.set_aside.to_string(),
        ]);
    }
    out.push_str(&t.render());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_trial_is_the_sweeps_configuration_and_needs_more_at_a_longer_delay() {
        let opts = SweepOptions { delays: vec![0, 1000], ..SweepOptions::default() };
        let s = scenario(&opts, 1000).unwrap();
        assert_eq!(s.host["tx"].response_delay_ns, Some(512_000), "1000 quanta at 1G");
        assert_eq!(s.flow.len(), 1 + opts.background().len());
        let (short, long) = (simulated(&opts, 0).unwrap()[0], simulated(&opts, 1000).unwrap()[0]);
        assert_eq!((short.1, long.1), (0, 0), "48 KiB hold both at 50 % of 1G");
        // 1000 quanta at 1G and 50 % load: 32 000 wire bytes more, 996 of each 1020 buffered.
        let grew = long.0 as f64 - short.0 as f64;
        assert!((grew - 1000.0 * 32.0 * 996.0 / 1020.0).abs() < 2.0 * 996.0, "grew {grew} B");
        // Past the headroom the simulator drops, and its figure says by how much.
        let tight = SweepOptions { headroom_bytes: 16 << 10, ..opts };
        let (need, drops) = simulated(&tight, 1000).unwrap()[0];
        assert!(drops > 0 && need == (16 << 10) + drops * 996, "{need} {drops}");
        // A priority's own profile reaches the simulated switch as it reaches the DUT.
        let mut own = SweepOptions { delays: vec![1000], ..SweepOptions::default() };
        own.prio_headroom.insert(Priority::new(3), 16 << 10);
        assert_eq!(simulated(&own, 1000).unwrap()[0], (need, drops));
    }
}
