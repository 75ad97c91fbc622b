//! The report as text (its tables and notes) or JSON.

use super::*;

/// The report as text or JSON, and its chart if asked for.
pub(super) fn output(report: &Report, args: &Rfc2544Args) -> Result<()> {
    if let Some(path) = &args.plot {
        plot(report, path).map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", text(report));
    }
    Ok(())
}

/// The confirmation trials, when any lost frames: each one's rate, what it lost and where,
/// and what the switch saw of it.
pub(super) fn confirmation_note(r: &SizeResult) -> String {
    if r.latency_trials.iter().all(|t| t.lost() == 0) {
        return String::new();
    }
    let each: Vec<String> = r
        .latency_trials
        .iter()
        .map(|t| {
            let at = format!("at {:.0} f/s", t.asked_fps.unwrap_or(t.offered_fps));
            match &t.switch {
                _ if t.lost() == 0 => format!("{at} nothing"),
                Some(sw) => format!(
                    "{at} {} ({} on the switch's rx rings, {} of them while it was off its CPU for longer than a ring \
                     lasts; {} dropped by it; {} at the sink's socket; its longest stall {:.1} ms)",
                    t.lost(),
                    sw.rx_lost,
                    sw.machine_explains,
                    sw.dropped,
                    t.sink_dropped,
                    sw.longest_stall_us as f64 / 1e3
                ),
                None => format!("{at} {} ({} at the sink's socket)", t.lost(), t.sink_dropped),
            }
        })
        .collect();
    format!("; confirming, lost {}{}", each.join(", "), if r.confirmed { "" } else { ": not confirmed" })
}

/// The trials the host disturbed, when there were any: how many, and the most it took.
pub(super) fn host_note(r: &SizeResult) -> String {
    let took = r.host_disturbed.iter().map(|t| t.host_took_ms).max().unwrap_or(0);
    match r.host_disturbed.len() {
        0 => String::new(),
        n => format!(
            "; {n} trial(s) made again, having lost frames while the host held a vCPU (up to {took} ms of steal)"
        ),
    }
}

pub fn text(r: &Report) -> String {
    let mut out = format!(
        "bench rfc2544: h1 → DUT → h2 on veth, {} s trials, search to {:.0} %, a lossy rate tried {} more time(s); \
         pfcswitch with its defaults{}\n",
        r.trial_s,
        r.resolution * 100.0,
        r.retries,
        if r.isolate {
            " but its loop's CPU; the tester on CPUs of its own, each DUT's forwarding thread on the last CPU \
             (--isolate)"
        } else {
            ""
        }
    );
    let mut t = Table::new(&[
        "frame B",
        "DUT",
        "throughput f/s",
        "Mb/s",
        "sender max f/s",
        "latency p50/p99/p99.9/max µs",
        "DUT CPU ns/frame",
        "loss % above (offered f/s)",
    ]);
    for s in r.results.iter().filter(|s| s.searched()) {
        let loss: Vec<String> = s.loss.iter().map(|l| format!("{:.1} ({:.0})", l.loss_pct, l.offered_fps)).collect();
        t.row(vec![
            s.size.to_string(),
            s.dut.as_str().into(),
            format!(
                "{:.0}{}{}",
                s.throughput_fps,
                if s.sender_limited { "*" } else { "" },
                if s.throughput_fps > 0.0 && !s.confirmed { "†" } else { "" }
            ),
            format!("{:.0}", s.throughput_bps / 1e6),
            format!("{:.0}", s.sender_max_fps),
            [s.latency.p50_us, s.latency.p99_us, s.latency.p999_us, s.latency.max_us].map(us3).join(" / "),
            s.dut_cpu_ns_per_frame.map_or("-".into(), |ns| format!("{ns:.0}")),
            if loss.is_empty() { "-".into() } else { loss.join(", ") },
        ]);
    }
    if !t.is_empty() {
        out += &t.render();
        out += "* nothing lost at the sender's ceiling: the DUT's own limit is higher\n";
    }
    let jumbo: Vec<String> = r
        .results
        .iter()
        .filter(|s| mtu_for(s.size) != 1500)
        .map(|s| format!("{} B at MTU {}", s.size, mtu_for(s.size)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !jumbo.is_empty() {
        out += &format!(
            "frames above 1518 B ran on testbeds whose links have the smallest standard MTU they fit: {} \
             (pfcswitch carries them as AF_XDP multi-buffer frames)\n",
            jumbo.join(", ")
        );
    }
    let disturbed: Vec<String> = r
        .results
        .iter()
        .filter(|s| !s.host_disturbed.is_empty())
        .map(|s| format!("{} at {} B {}", s.dut.as_str(), s.size, s.host_disturbed.len()))
        .collect();
    if !disturbed.is_empty() {
        out += &format!(
            "trials that lost frames while the host held one of the vCPUs for {} ms or more (steal, /proc/stat) were \
             made again, up to {HOST_REPEATS} times each, for every DUT alike: {}\n",
            HOST_TOOK.as_millis(),
            disturbed.join(", ")
        );
    }
    if r.results.iter().any(|s| s.throughput_fps > 0.0 && !s.confirmed) {
        out += &format!(
            "† not confirmed: trials after the search lost frames at its rate and at {CONFIRM_STEPS} steps of {:.0} % \
             below it (see --json)\n",
            CONFIRM_STEP * 100.0
        );
    }
    out += &equal_load_text(r);
    out += &stages_text(r);
    if r.ratios.is_empty() {
        return out;
    }
    let mut t = Table::new(&[
        "frame B",
        "pfcswitch / bridge",
        "pfcswitch / direct",
        "pfcswitch / OVS",
        "frames per CPU-s, pfcswitch / OVS",
    ]);
    for x in &r.ratios {
        let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
        t.row(vec![x.size.to_string(), f(x.vs_bridge), f(x.vs_direct), f(x.vs_ovs), f(x.cpu_efficiency_vs_ovs)]);
    }
    out += "DUT CPU: the DUT process's CPU time (user and system, all its threads) per frame forwarded in the \
            last confirmation trial; none for the bridge and the direct path, which run in the kernel\n";
    out += &t.render();
    out
}

/// p50 / p99 of a latency summary, µs.
pub(super) fn p50_p99(p: &Percentiles) -> String {
    format!("{} / {}", us3(p.p50_us), us3(p.p99_us))
}

/// Every DUT's one-way latency at the same offered loads, a row per size and load.
pub(super) fn equal_load_text(r: &Report) -> String {
    let mut duts: Vec<Dut> = r.results.iter().filter(|s| !s.equal_load.is_empty()).map(|s| s.dut).collect();
    if duts.is_empty() {
        return String::new();
    }
    duts.sort_by_key(|d| r.results.iter().position(|s| s.dut == *d));
    duts.dedup();
    let mut head = vec!["frame B".to_string(), "load".to_string(), "offered f/s".to_string()];
    head.extend(duts.iter().map(|d| format!("{} p50 / p99 / p99.9 µs", d.as_str())));
    let mut t = Table::new(&head);
    let mut sizes: Vec<usize> = r.results.iter().map(|s| s.size).collect();
    sizes.dedup();
    for size in sizes {
        for (k, share) in EQUAL_LOADS.iter().enumerate() {
            let at =
                |dut: Dut| r.results.iter().find(|s| s.size == size && s.dut == dut).and_then(|s| s.equal_load.get(k));
            let Some(first) = duts.iter().find_map(|&d| at(d)) else { continue };
            let mut row = vec![
                size.to_string(),
                format!("{:.0} %", share * 100.0),
                format!("{:.0}", first.trial.asked_fps.unwrap_or(first.trial.offered_fps)),
            ];
            for &d in &duts {
                row.push(at(d).map_or("-".into(), |p| {
                    let l = &p.trial.latency;
                    let lost = if p.trial.lost() > 0 { format!(" ({} lost)", p.trial.lost()) } else { String::new() };
                    format!("{} / {} / {}{lost}", us3(l.p50_us), us3(l.p99_us), us3(l.p999_us))
                }));
            }
            t.row(row);
        }
    }
    let of = if r.results.iter().any(SizeResult::searched) {
        "the lowest zero-loss rate at each size"
    } else {
        "the rate given to --equal-loads-of"
    };
    format!("latency at equal offered loads (shares of {of}):\n{}", t.render())
}

/// Where pfcswitch's frames waited, stage by stage, at the equal loads and at its own
/// zero-loss rate: what of the one-way latency its rings hold, out of its queues' reach.
pub(super) fn stages_text(r: &Report) -> String {
    let mut t = Table::new(&[
        "frame B",
        "load",
        "offered f/s",
        "one-way p50 / p99 µs",
        "rx ring p50 / p99",
        "engine p50 / p99",
        "tx ring p50 / p99",
    ]);
    for s in r.results.iter().filter(|s| s.dut == Dut::Pfcswitch) {
        let own = s.latency_trials.last().map(|t| ("zero-loss".to_string(), t));
        let loads = s.equal_load.iter().map(|p| (format!("{:.0} %", p.share * 100.0), &p.trial));
        for (load, trial) in loads.chain(own) {
            let Some(sw) = &trial.switch else { continue };
            t.row(vec![
                s.size.to_string(),
                load,
                format!("{:.0}", trial.offered_fps),
                p50_p99(&trial.latency),
                p50_p99(&sw.stages.rx_ring),
                p50_p99(&sw.stages.engine),
                p50_p99(&sw.stages.tx_ring),
            ]);
        }
    }
    if t.is_empty() {
        return String::new();
    }
    format!(
        "where pfcswitch's frames waited (µs): on its rx ring (from the XDP program's stamp), in the engine (its \
         queues), on its tx ring (until the kernel completed the send):\n{}",
        t.render()
    )
}
