//! `pfctools deadlock-lab`: a three-switch ring driven into a real PFC deadlock by a brief
//! block, and what DCFIT makes of it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use pfcswitch::core::config::DeadlockResolution;
use pfcswitch::core::speed::Speed;
use pfcswitch::report::Table;

use crate::harness::{RingLab, RingOptions};

#[derive(Args, Clone, Debug)]
pub struct LabArgs {
    /// Speed of every port (at 1G the deadlock forms every time, even on a small VM).
    #[arg(long, default_value = "1G")]
    pub speed: Speed,
    /// Break the deadlock by dropping the stopped lossless queue on the detecting port.
    #[arg(long)]
    pub resolve: bool,
    /// Keep the ring running afterwards for `pfcswitch ctl`, until Ctrl-C.
    #[arg(long)]
    pub keep: bool,
    /// Do not block anything: the control experiment (the ring runs without deadlocking).
    #[arg(long)]
    pub no_block: bool,
    /// Frames per second each host sends.
    #[arg(long, default_value_t = RingOptions::default().rate)]
    pub rate: u64,
}

pub fn run(args: &LabArgs) -> Result<()> {
    let resolution = if args.resolve { DeadlockResolution::Drop } else { DeadlockResolution::Report };
    let opts = RingOptions { speed: args.speed, resolution, drop_ms: 100, refresh_us: Some(500), rate: args.rate };
    let lab = RingLab::start("lab", &opts)?;
    println!("ring: sw1 → sw2 → sw3 → sw1 (cw ports to the next switch's ccw), host h_i on sw_i's host port");
    println!("traffic: h1 → h3, h2 → h1, h3 → h2, lossless priority 3, {} frames/s each, all clockwise", args.rate);
    let gens = lab.traffic(3.0)?;
    std::thread::sleep(Duration::from_millis(400));
    let unblocked = if args.no_block {
        std::thread::sleep(Duration::from_millis(500));
        println!("(no block: the ring should keep flowing)");
        pfcswitch::dataplane::sys::now().as_nanos()
    } else {
        println!("blocking sw2's cw port for 500 ms...");
        let t = lab.block_briefly(Duration::from_millis(500))?;
        println!("unblocked; the senders run on for 2 s");
        t
    };
    let reports: Vec<_> = gens.into_iter().map(|g| g.finish(Duration::from_secs(60))).collect::<Result<_>>()?;

    let when = if args.no_block { "last one, ms after 0.9 s in" } else { "last one, ms after the unblock" };
    let mut t = Table::new(&["host", "frames received", when]);
    for (i, r) in reports.iter().enumerate() {
        let f = r.received.first();
        let last = f.map_or("-".to_string(), |f| format!("{:+.1}", (f.last_ns as f64 - unblocked as f64) / 1e6));
        t.row(vec![format!("h{}", i + 1), f.map_or(0, |f| f.received).to_string(), last]);
    }
    print!("{}", t.render());
    if args.no_block {
        println!("(the control: frames kept arriving until the senders stopped)");
    } else {
        println!("(a deadlock: nothing arrives after the unblock although the senders keep trying for 2 s)");
    }

    let mut ports = Table::new(&["switch", "ccw pausing upstream", "cw paused by next", "frames stuck at cw"]);
    for sw in &lab.switches {
        let s = sw.stats()?;
        let port = |n: &str| s.ports.iter().find(|p| p.name == n).cloned().unwrap_or_default();
        let (ccw, cw) = (port("ccw"), port("cw"));
        ports.row(vec![
            sw.name.clone(),
            ccw.priorities.get(3).is_some_and(|q| q.xoff).to_string(),
            cw.priorities.get(3).is_some_and(|q| q.egress_paused).to_string(),
            (cw.queues_total() + cw.held_by_slowpath).to_string(),
        ]);
    }
    print!("\n{}", ports.render());

    println!("\nDCFIT:");
    for doc in lab.deadlocks()? {
        for d in doc["deadlocks"].as_array().into_iter().flatten() {
            println!(
                "  {}: deadlock #{} — its message left through {} and came back on {} after {} pauses; \
                 confirmed {} more times; resolved: {}",
                d["switch"].as_str().unwrap_or("?"),
                d["id"],
                d["origin_port_name"].as_str().unwrap_or("?"),
                d["return_port_name"].as_str().unwrap_or("?"),
                d["path_length"],
                d["confirmations"],
                d["resolved"]
            );
        }
    }
    if args.keep {
        println!("\nthe ring keeps running; for example:");
        for sw in &lab.switches {
            println!("  pfcswitch ctl --socket {} deadlocks", sw.socket.display());
        }
        println!("  pfcswitch ctl --socket {} traffic-map", lab.switches[1].socket.display());
        println!("Ctrl-C tears it down.");
        let stop = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone())?;
        signal_hook::flag::register(signal_hook::consts::SIGTERM, stop.clone())?;
        while !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for sw in lab.switches {
        sw.stop();
    }
    Ok(())
}
