//! A PFC deadlock made, detected and resolved, on a simulated three-switch ring: the
//! engine of `pfcswitch run` in simulated time, no network, no root, the same result
//! every run.
//!
//! 1. DCFIT reports: the ring deadlocks after a brief block, DCFIT names the cycle, and
//!    the frames caught in it never arrive (the simulator sees them still in the fabric).
//! 2. DCFIT drops: the detecting port's lossless queue is dropped for 20 ms, which breaks
//!    the cycle; the rest flows again, at the price of the frames dropped.
//! 3. Tagger's tables: the same ring, flows and block, and no deadlock forms at all.
//!
//! Run with `cargo run -p pfcsim --example deadlock`.

use pfcsim::scenario::Scenario;
use pfcsim::{simulate, SimReport};

fn run(s: &Scenario) -> SimReport {
    simulate(s, 1, None).expect("a built-in scenario runs").report
}

fn say(what: &str, r: &SimReport) {
    let (sent, received): (u64, u64) = r.flows.iter().fold((0, 0), |(s, g), f| (s + f.sent, g + f.received));
    println!(
        "{what}: {} deadlock(s) detected, formed: {}, {} lossless frames stuck, {} dropped; {received} of {sent} frames arrived",
        r.deadlocks, r.deadlock_formed, r.stuck_lossless_frames, r.lossless_dropped
    );
}

pub fn main() {
    let report = Scenario::built_in("ring-deadlock").expect("built in");
    let r = run(&report);
    say("DCFIT reports", &r);
    assert!(r.deadlock_formed && r.deadlocks >= 1 && r.stuck_lossless_frames > 0);

    let mut drop = report.clone();
    let dcfit: toml::Table = toml::from_str("resolution = \"drop\"\ndrop_ms = 20").expect("valid TOML");
    drop.switch_defaults.insert("dcfit".into(), toml::Value::Table(dcfit));
    let d = run(&drop);
    say("DCFIT drops", &d);
    assert!(d.deadlocks >= 1 && !d.deadlock_formed && d.stuck_lossless_frames == 0 && d.lossless_dropped > 0);

    let t = run(&Scenario::built_in("ring-tagger").expect("built in"));
    say("Tagger's tables", &t);
    assert!(t.deadlocks == 0 && !t.deadlock_formed && t.lossless_lost == 0);
}
