//! `pfctools demo`: a three-host testbed around one pfcswitch, shown working.

use std::time::Duration;

use anyhow::{ensure, Context, Result};
use clap::Args;

use pfcswitch::cli::RunArgs;
use pfcswitch::core::speed::Speed;
use pfcswitch::report;

use super::report::{gen_text, sink_text};
use crate::cli::{GenArgs, SinkArgs};
use crate::harness::{self, SinkProc, SwitchProc};
use crate::testbed::TestbedTopology;
use crate::testbed::{unique_name, Testbed, Topology};

#[derive(Args, Clone, Debug)]
pub struct DemoArgs {
    /// Keep the testbed after the demo (remove it with `pfctools testbed down NAME`).
    #[arg(long)]
    pub keep: bool,
}

fn step(title: &str) {
    println!("\n=== {title}");
}

pub fn run(args: &DemoArgs) -> Result<()> {
    let tb = Testbed::up(&unique_name("demo"), Topology::star(3))?;
    step(&format!("testbed {}: h1, h2, h3 — sw1 (namespaces pfcs-{}-*)", tb.name(), tb.name()));
    let mut config = harness::switch_config(&tb, "sw1");
    // p3 is a slow port: traffic from two hosts toward it congests it.
    config.ports[2].speed = Some(Speed::mbps(200));
    config.buffer.xoff_bytes = Some(64 << 10);
    config.buffer.xon_offset_bytes = Some(16 << 10);
    // On a shared 2-core VM, scheduling delays act like a long cable: what arrives after
    // XOFF needs more headroom than the wire alone would (`pfctools headroom` measures it).
    config.buffer.headroom_bytes = 160 << 10;
    let sw = SwitchProc::start(&tb, "sw1", &config, &RunArgs::default())?;
    println!("pfcswitch running on p1 p2 p3 (p3 shaped to 200 Mb/s), lossless priorities 3 and 4");

    step("kernel hosts ping each other through the switch");
    for dst in ["10.0.0.2", "10.0.0.3"] {
        let out =
            tb.exec("h1", &["ping", "-c", "2", "-i", "0.2", "-W", "1", dst]).context("ping through the switch")?;
        println!("{}", out.lines().filter(|l| l.contains("packets transmitted")).collect::<String>());
    }

    step("100 000 frames h1 → h2 (64 B, lossy priority 0)");
    let idle = Duration::from_secs(1);
    let sink_args = SinkArgs { expect_per_flow: Some(100_000), idle, ..harness::sink_defaults() };
    let sink = SinkProc::start(&tb, "h2", "sink-h2", &sink_args)?;
    let gen_args = GenArgs { count: Some(100_000), rate: Some(150e3), ..harness::gen_to(tb.host_iface("h2")?.mac) };
    let g = harness::run_gen(&tb, "h1", "gen-h1", &gen_args, Duration::from_secs(60))?;
    print!("{}", gen_text(&g));
    print!("{}", sink_text(&sink.finish(Duration::from_secs(30))?));

    step("h1 and h2 both send lossless DSCP 3 at 200 Mb/s into the 200 Mb/s port p3: PFC keeps it lossless");
    let sink = SinkProc::start(&tb, "h3", "sink-h3", &SinkArgs { idle, ..harness::sink_defaults() })?;
    let common = GenArgs {
        size: 1000,
        dscp: vec![3],
        duration: Some(Duration::from_secs(2)),
        speed: Speed::mbps(200),
        load: Some(100.0),
        ..harness::gen_to(tb.host_iface("h3")?.mac)
    };
    let g1 = harness::start_gen(&tb, "h1", "gen-h1b", &GenArgs { flow_base: 1, ..common.clone() })?;
    let g2 = harness::start_gen(&tb, "h2", "gen-h2b", &GenArgs { flow_base: 2, ..common })?;
    let (r1, r2) = (g1.finish(Duration::from_secs(60))?, g2.finish(Duration::from_secs(60))?);
    print!("h1: {}h2: {}", gen_text(&r1), gen_text(&r2));
    let rx = sink.finish(Duration::from_secs(30))?;
    print!("h3: {}", sink_text(&rx));
    let lost: u64 = rx.flows.iter().map(|f| f.lost).sum();
    ensure!(rx.received > 0, "nothing reached h3");

    step("pfcswitch ctl stats");
    print!("{}", report::stats_table(&sw.stats()?));
    println!(
        "\nlossless flows lost {lost} frames; pauses received by the senders: h1 {}, h2 {}",
        r1.pauses.pfc_frames, r2.pauses.pfc_frames
    );
    let finished = sw.stop();
    ensure!(finished.success(), "pfcswitch did not stop cleanly: {}", finished.stderr);
    step("switch stopped (XDP detached); tearing the testbed down");
    if args.keep {
        let name = tb.name().to_string();
        tb.keep()?;
        println!("kept: remove with `pfctools testbed down {name}`");
    }
    Ok(())
}
