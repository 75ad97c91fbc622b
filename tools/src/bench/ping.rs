//! `bench ping`: the round trip through an otherwise idle device, as a new user first
//! meets it: the kernel's `ping` from one host to the other, through pfcswitch as it
//! comes and with its two latency settings, Open vSwitch's AF_XDP datapath, a Linux
//! bridge and the direct veth path; beside each, the CPU its process spent meanwhile.
//!
//! An idle pfcswitch loop sleeps, and on a VM an idle vCPU halts: a frame that finds
//! both asleep waits for the host to run that vCPU again. `dataplane.wake_latency_us = 0`
//! keeps idle CPUs out of deep sleep while the switch runs, where the kernel has a
//! cpuidle driver to ask; `busy_poll_us = 1000000` keeps the loop from sleeping at all,
//! as OVS's PMD thread never does. The bench shows what each costs in latency and in
//! CPU, so that a user can choose, and beneath them what this machine takes to wake a
//! thread asleep on another CPU ([`super::wake`]): the floor under a loop that sleeps.
//!
//! Each device runs alone (its testbed up only while it is measured): a polling loop or
//! a wake-latency request would otherwise change the others' figures.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use pfcswitch::config::RunConfig;
use pfcswitch_table::Table;
use pfctestkit::quantile;

use super::rfc2544::{Bed, Dut};
use crate::harness;

#[derive(Args, Clone, Debug)]
pub struct PingArgs {
    /// Echo requests per device and round (and wakes of each kind measured per round).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..))]
    pub count: u32,
    /// Between two requests, ms (ping's -i; below 200 needs root).
    #[arg(long, default_value_t = 20.0, value_parser = crate::cli::parse_positive)]
    pub interval_ms: f64,
    /// Rounds over every device, each in a rotated order.
    #[arg(long, default_value_t = 2)]
    pub rounds: usize,
    /// The devices (default: every pfcswitch setting, OVS where installed, the bridge
    /// and the direct path).
    #[arg(long, value_delimiter = ',')]
    pub duts: Vec<PingDut>,
    #[arg(long)]
    pub json: bool,
}

/// A device and, for pfcswitch, how its loop waits when idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum PingDut {
    /// pfcswitch with its defaults: the loop sleeps when idle, and so may its CPU.
    Pfcswitch,
    /// pfcswitch with `dataplane.wake_latency_us = 0`: idle CPUs stay out of deep sleep
    /// (where the kernel has a cpuidle driver).
    PfcswitchAwake,
    /// pfcswitch with `dataplane.busy_poll_us = 1000000`: the loop never sleeps.
    PfcswitchPolling,
    /// Open vSwitch's userspace datapath with AF_XDP ports.
    Ovs,
    /// A Linux bridge.
    Bridge,
    /// A veth from host to host.
    Direct,
}

impl PingDut {
    fn bed_dut(self) -> Dut {
        match self {
            PingDut::Pfcswitch | PingDut::PfcswitchAwake | PingDut::PfcswitchPolling => Dut::Pfcswitch,
            PingDut::Ovs => Dut::Ovs,
            PingDut::Bridge => Dut::Bridge,
            PingDut::Direct => Dut::Direct,
        }
    }

    fn tune(self, config: &mut RunConfig) {
        match self {
            PingDut::PfcswitchAwake => config.dataplane.wake_latency_us = Some(0),
            PingDut::PfcswitchPolling => config.dataplane.busy_poll_us = 1_000_000,
            _ => {}
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            PingDut::Pfcswitch => "pfcswitch",
            PingDut::PfcswitchAwake => "pfcswitch, wake_latency_us = 0",
            PingDut::PfcswitchPolling => "pfcswitch, busy_poll_us = 1000000",
            PingDut::Ovs => "ovs-afxdp",
            PingDut::Bridge => "bridge",
            PingDut::Direct => "direct",
        }
    }

    /// Each of `bench rfc2544`'s default devices, pfcswitch in each of its settings.
    fn defaults() -> Vec<PingDut> {
        Dut::defaults()
            .into_iter()
            .flat_map(|d| match d {
                Dut::Pfcswitch => vec![PingDut::Pfcswitch, PingDut::PfcswitchAwake, PingDut::PfcswitchPolling],
                Dut::Ovs => vec![PingDut::Ovs],
                Dut::Bridge => vec![PingDut::Bridge],
                Dut::Direct => vec![PingDut::Direct],
            })
            .collect()
    }
}

/// One device's round trips over every round.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PingResult {
    pub dut: Option<PingDut>,
    pub sent: u64,
    pub received: u64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// The device's process's CPU time over the pings' wall time, % of one CPU (None
    /// for the kernel's bridge and the direct path, which have no process).
    pub cpu_pct: Option<f64>,
    /// Against OVS's in the same run, where it ran.
    pub p50_vs_ovs: Option<f64>,
    pub p99_vs_ovs: Option<f64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PingReport {
    pub count: u32,
    pub interval_ms: f64,
    pub rounds: usize,
    pub results: Vec<PingResult>,
    /// This machine's wake of a thread asleep on another CPU, against one spinning,
    /// measured alone before each round's devices (`None` with one CPU): the floor
    /// under the round trip of a loop that sleeps.
    #[serde(default)]
    pub wake: Option<super::wake::WakeFigures>,
}

/// What one device gave over every round.
#[derive(Default)]
struct Tally {
    sent: u64,
    /// Round trips, µs.
    rtts_us: Vec<f64>,
    /// The device's CPU time and the wall time it was measured over, s.
    cpu_s: Option<(f64, f64)>,
}

pub fn run(args: &PingArgs) -> Result<()> {
    let duts = if args.duts.is_empty() { PingDut::defaults() } else { args.duts.clone() };
    let mut tallies: Vec<Tally> = duts.iter().map(|_| Tally::default()).collect();
    let mut wake = super::wake::Samples::default();
    let interval = std::time::Duration::from_secs_f64(args.interval_ms / 1e3);
    for round in 0..args.rounds {
        if !args.json {
            eprintln!("  round {}: this machine's wakes", round + 1);
        }
        wake.measure(args.count, interval)?;
        for k in 0..duts.len() {
            let i = (round + k) % duts.len();
            if !args.json {
                eprintln!("  round {}: {}", round + 1, duts[i].label());
            }
            let m = measure(duts[i], args)?;
            let t = &mut tallies[i];
            t.sent += u64::from(args.count);
            t.rtts_us.extend(m.rtts_us);
            if let Some((c, w)) = m.cpu_s {
                let (cs, ws) = t.cpu_s.get_or_insert((0.0, 0.0));
                *cs += c;
                *ws += w;
            }
        }
    }
    let mut results: Vec<PingResult> = duts
        .iter()
        .zip(&mut tallies)
        .map(|(&dut, t)| {
            let r = &mut t.rtts_us;
            r.sort_by(f64::total_cmp);
            PingResult {
                dut: Some(dut),
                sent: t.sent,
                received: r.len() as u64,
                p50_us: quantile(r, 0.5),
                p90_us: quantile(r, 0.9),
                p99_us: quantile(r, 0.99),
                max_us: r.last().copied().unwrap_or(0.0),
                cpu_pct: t.cpu_s.map(|(c, w)| 100.0 * c / w.max(1e-9)),
                ..Default::default()
            }
        })
        .collect();
    against_ovs(&mut results);
    let report = PingReport {
        count: args.count,
        interval_ms: args.interval_ms,
        rounds: args.rounds,
        results,
        wake: wake.figures(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(())
}

/// One device, one round.
struct Measured {
    rtts_us: Vec<f64>,
    /// The device's CPU time and the wall time it was measured over, s.
    cpu_s: Option<(f64, f64)>,
}

fn measure(dut: PingDut, args: &PingArgs) -> Result<Measured> {
    let mut bed = Bed::up_tuned(dut.bed_dut(), 1500, &Default::default(), |c| dut.tune(c))?;
    let result = (|| {
        bed.measuring()?;
        let iface = bed.tb.host_iface("h2")?;
        let addr = iface.addr.as_deref().context("h2 has no address")?;
        let addr = addr.split('/').next().unwrap_or(addr).to_string();
        let interval = format!("{:.3}", args.interval_ms / 1e3);
        // The first requests resolve the address and warm the path: not measured.
        let _ = bed.tb.exec("h1", &["ping", "-c", "3", "-i", &interval, "-W", "1", &addr]);
        let pid = bed.dut_pid();
        let before = pid.and_then(harness::cpu_time);
        let started = Instant::now();
        let count = args.count.to_string();
        let out = bed.tb.exec("h1", &["ping", "-c", &count, "-i", &interval, "-W", "1", &addr]);
        let wall = started.elapsed().as_secs_f64();
        let after = pid.and_then(harness::cpu_time);
        let out = out.with_context(|| format!("ping through {}", dut.label()))?;
        let rtts_us = parse_rtts_us(&out);
        if rtts_us.is_empty() {
            bail!("ping through {} had no reply: {out}", dut.label());
        }
        let cpu_s = before.zip(after).map(|(a, b)| (b.saturating_sub(a).as_secs_f64(), wall));
        Ok(Measured { rtts_us, cpu_s })
    })();
    bed.idle();
    bed.down();
    result
}

/// The round trips in ping's output, µs ("... time=0.126 ms").
pub fn parse_rtts_us(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| {
            let mut w = t.split_whitespace();
            let v: f64 = w.next()?.parse().ok()?;
            match w.next() {
                Some("ms") => Some(v * 1e3),
                Some("us") | Some("µs") => Some(v),
                Some("s") => Some(v * 1e6),
                _ => None,
            }
        })
        .collect()
}

fn against_ovs(results: &mut [PingResult]) {
    let Some(ovs) = results.iter().find(|r| r.dut == Some(PingDut::Ovs) && r.received > 0).cloned() else {
        return;
    };
    for r in results.iter_mut() {
        r.p50_vs_ovs = Some(r.p50_us / ovs.p50_us.max(1e-9));
        r.p99_vs_ovs = Some(r.p99_us / ovs.p99_us.max(1e-9));
    }
}

fn render(r: &PingReport) -> String {
    let mut t = Table::new(&["device", "replies", "p50 µs", "p90 µs", "p99 µs", "max µs", "CPU %", "p50 / p99 × OVS"]);
    for x in &r.results {
        t.row(vec![
            x.dut.map_or("", PingDut::label).to_string(),
            format!("{} of {}", x.received, x.sent),
            format!("{:.0}", x.p50_us),
            format!("{:.0}", x.p90_us),
            format!("{:.0}", x.p99_us),
            format!("{:.0}", x.max_us),
            x.cpu_pct.map_or("-".into(), |c| format!("{c:.1}")),
            match (x.p50_vs_ovs, x.p99_vs_ovs) {
                (Some(a), Some(b)) => format!("{a:.2} / {b:.2}"),
                _ => "-".into(),
            },
        ]);
    }
    format!(
        "Round trips of the kernel's ping through each idle device, {} requests {} ms apart per device and round, \
         {} rounds; CPU: the device's process over the pings' wall time.\n{}{}",
        r.count,
        r.interval_ms,
        r.rounds,
        t.render(),
        r.wake.as_ref().map_or(String::new(), |w| format!("{}\n", w.line()))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_are_read_from_pings_replies_and_nothing_else() {
        let out = "PING 10.0.0.2 (10.0.0.2) 56(84) bytes of data.\n\
                   64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=0.126 ms\n\
                   64 bytes from 10.0.0.2: icmp_seq=2 ttl=64 time=1.05 ms\n\
                   \n--- 10.0.0.2 ping statistics ---\n\
                   2 packets transmitted, 2 received, 0% packet loss, time 20ms\n\
                   rtt min/avg/max/mdev = 0.126/0.588/1.050/0.462 ms\n";
        let v = parse_rtts_us(out);
        assert_eq!(v.len(), 2);
        assert!((v[0] - 126.0).abs() < 1e-9 && (v[1] - 1050.0).abs() < 1e-9, "{v:?}");
    }

    #[test]
    fn the_machines_wake_floor_is_said_beneath_the_table_where_it_was_measured() {
        let mut r = PingReport { count: 3, interval_ms: 20.0, rounds: 1, ..Default::default() };
        assert!(!render(&r).contains("This machine"));
        let p = |p50_us| pfcswitch::core::histogram::Percentiles { count: 3, p50_us, ..Default::default() };
        r.wake = Some(super::super::wake::WakeFigures {
            waker_cpu: 0,
            woken_cpu: 1,
            asleep: p(79.0),
            spinning: p(1.0),
            lost: 0,
        });
        let text = render(&r);
        assert!(text.contains("asleep in ppoll on CPU 1 ran again p50 / p90 / p99 79 /"), "{text}");
        assert!(text.contains("after a thread on CPU 0 woke it, a spinning one saw the signal in 1 /"), "{text}");
    }

    #[test]
    fn ratios_are_against_ovs_in_the_same_run_and_absent_without_it() {
        let r =
            |dut, p50, p99| PingResult { dut: Some(dut), received: 1, p50_us: p50, p99_us: p99, ..Default::default() };
        let mut with = vec![r(PingDut::Pfcswitch, 60.0, 150.0), r(PingDut::Ovs, 30.0, 100.0)];
        against_ovs(&mut with);
        assert_eq!((with[0].p50_vs_ovs, with[0].p99_vs_ovs), (Some(2.0), Some(1.5)));
        let mut without = vec![r(PingDut::Pfcswitch, 60.0, 150.0)];
        against_ovs(&mut without);
        assert_eq!(without[0].p50_vs_ovs, None);
    }
}
