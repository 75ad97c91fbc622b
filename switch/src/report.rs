//! Human-readable tables of what the switch reports.

use std::fmt::Write;

use crate::core::fdb::FdbRow;
use crate::core::stats::{DropReason, PrioStats, TaggerStats};
use crate::core::traffic_map::TrafficMapView;
use crate::nic::netlink::DcbState;
use crate::nic::{Diagnosis, Level};
use crate::stats::SpeedSource;
use crate::stats::Stats;
use pfcswitch_table::Table;

fn n(v: u64) -> String {
    v.to_string()
}

fn active(p: &PrioStats) -> bool {
    let c = &p.counters;
    c.rx_frames + c.tx_frames + c.xoff_sent + c.xon_sent + c.xoff_received + c.xon_received + p.ingress_watermark > 0
        || p.paused_us > 0
        || c.lossless_drops + c.lossy_drops > 0
        || c.ecn_marked + c.wred_dropped + c.ecn_not_capable_passed > 0
}

/// `pfcswitch doctor`: per interface, the facts, what `run` would do, and the findings
/// (worst first).
pub fn doctor_text(reports: &[Diagnosis]) -> String {
    let mut out = String::new();
    for d in reports {
        let f = &d.facts;
        let driver = f.driver.as_ref().map_or("unknown".to_string(), |d| {
            let mut s = d.name.clone();
            for (what, v) in [("version", &d.version), ("firmware", &d.firmware), ("bus", &d.bus_info)] {
                if !v.is_empty() {
                    let _ = write!(s, ", {what} {v}");
                }
            }
            s
        });
        let _ = writeln!(out, "{} (index {}): driver {driver}", f.iface, f.ifindex);
        let _ = writeln!(
            out,
            "  link {}, speed {}, MTU {}, queues {} rx / {} tx{}",
            if f.link_up { "up" } else { "down" },
            match (f.speed_mbps, f.physical) {
                (Some(m), true) => format!("{m} Mb/s"),
                (Some(m), false) => format!("none ({m} Mb/s nominal, virtual)"),
                (None, _) => "not reported".into(),
            },
            f.mtu,
            f.rx_queues,
            f.tx_queues,
            f.channels.map_or(String::new(), |c| format!(
                ", channels {} combined / {} rx / {} tx (max {} / {} / {})",
                c.combined, c.rx, c.tx, c.max_combined, c.max_rx, c.max_tx
            ))
        );
        let _ = writeln!(
            out,
            "  XDP: {}; NIC pause: {}; DCB: {}",
            f.xdp.map_or("not known".to_string(), |x| format!(
                "native {}, zero-copy {} (features {:#x})",
                yes_no(x.native && x.redirect),
                yes_no(x.zero_copy),
                x.bits
            )),
            f.pause.map_or("none".to_string(), |p| format!(
                "autoneg {}, rx {}, tx {}",
                on_off(p.autoneg),
                on_off(p.rx),
                on_off(p.tx)
            )),
            match &f.dcb {
                None => "not read".to_string(),
                Some(DcbState::NotSupported) => "none".into(),
                Some(DcbState::NoIeeePfc) => "no IEEE PFC state".into(),
                Some(DcbState::Pfc { capable, enabled }) =>
                    format!("PFC on priorities {enabled:?} of {capable} capable"),
            }
        );
        let r = &d.run;
        let _ = writeln!(
            out,
            "  `pfcswitch run` would bind {} rx queues, attach XDP {}, bind {} mode, use {} UMEM frames, shape to {} ({})",
            r.rx_queues,
            r.xdp_mode.as_str(),
            r.bind_mode.as_str(),
            r.frame_size.map_or("no".to_string(), |s| format!("{s}-byte")),
            r.speed,
            match r.speed_from {
                SpeedSource::Nic => "from the NIC",
                _ => "the default; set `speed`",
            }
        );
        let mut findings: Vec<_> = d.findings.iter().collect();
        findings.sort_by_key(|f| std::cmp::Reverse(f.level));
        for f in findings {
            let tag = match f.level {
                Level::Error => "ERROR",
                Level::Warn => "WARN ",
                Level::Note => "note ",
                Level::Ok => "ok   ",
            };
            let _ = writeln!(out, "  {tag} {}", f.text);
        }
        out.push('\n');
    }
    out
}

fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

pub fn stats_table(s: &Stats) -> String {
    let mut out = format!(
        "switch {} (id {:#010x}), up {:.1} s, {} FDB entries ({} sources not learned: table full; {} unknown unicast flooded), \
         shared buffer {}/{} B (XOFF {} B, XON {} B), {} free frames\n\
         loop stalls of 1 ms or more: {} (longest {:.1} ms, most of one waiting for a CPU {:.1} ms); waited for a CPU {}{}\n\n",
        s.name,
        s.switch_id,
        s.uptime_s,
        s.fdb_entries,
        s.ports.iter().map(|p| p.counters.fdb_full).sum::<u64>(),
        s.ports.iter().map(|p| p.counters.unknown_unicast_flooded).sum::<u64>(),
        s.shared_buffer_used,
        s.shared_buffer_bytes,
        s.xoff_threshold,
        s.xon_threshold,
        s.free_frames,
        s.stalls.stalls,
        s.stalls.longest_us as f64 / 1e3,
        s.stalls.longest_cpu_wait_us as f64 / 1e3,
        s.stalls.cpu_wait_us.map_or("(not known)".to_string(), |us| format!("{:.1} ms", us as f64 / 1e3)),
        s.stalls.backlogs.last().map_or(String::new(), |b| format!(
            "\nlatest rx loss: {} of {} frames in {:.1} ms behind the rings, {:.1} ms of it off the CPU{}",
            b.rx_lost,
            b.arrived(),
            b.us as f64 / 1e3,
            b.off_cpu_us as f64 / 1e3,
            b.on_cpu_rate_fps().map_or(String::new(), |r| format!(", taking {:.0} k frames/s while on it", r / 1e3))
        ))
    );
    let mut ports = Table::new(&[
        "port",
        "iface",
        "speed",
        "mode",
        "rx queues",
        "xdp/bind",
        "rx frames",
        "rx bytes",
        "tx frames",
        "tx bytes",
        "drops",
        "pfc rx",
        "pfc tx",
        "pause rx",
        "ctl bad",
    ]);
    for p in &s.ports {
        let c = &p.counters;
        let m = &c.mac_control;
        ports.row(vec![
            p.name.clone(),
            p.iface.clone(),
            match p.speed_from {
                SpeedSource::Config => p.speed.to_string(),
                from => format!("{} ({})", p.speed, from.as_str()),
            },
            p.pause_mode.as_str().to_string() + if p.blocked { " BLOCKED" } else { "" },
            n(u64::from(p.rx_queues)),
            format!("{}/{}", p.xdp_mode.map_or("?", |m| m.as_str()), p.bind_mode.map_or("?", |m| m.as_str())),
            n(c.rx_frames),
            n(c.rx_bytes),
            n(c.tx_frames),
            n(c.tx_bytes),
            n(c.drops.total()),
            n(m.pfc_received),
            n(m.pfc_sent),
            n(m.pause_received),
            n(m.rejected()),
        ]);
    }
    out += &ports.render();

    let headers = ["drops"].into_iter().chain(DropReason::ALL.iter().map(|r| r.title()));
    let mut drops = Table::new(&headers.chain(["sock rx drop", "fill empty"]).collect::<Vec<_>>());
    for p in &s.ports {
        let d = &p.counters.drops;
        if d.total() + p.socket.rx_dropped + p.socket.rx_fill_ring_empty > 0 {
            let counts = d.iter().map(|(_, v)| v).chain([p.socket.rx_dropped, p.socket.rx_fill_ring_empty]);
            drops.row([p.name.clone()].into_iter().chain(counts.map(n)).collect());
        }
    }
    if !drops.is_empty() {
        out += "\n";
        out += &drops.render();
    }

    let rejects = crate::core::pfc::ControlReject::ALL;
    let titles: Vec<&str> = ["mac control", "received"]
        .into_iter()
        .chain(rejects.iter().map(|r| r.title()))
        .chain(["zero src", "short", "lossy cls", "802.3x ign", "pfc ign"])
        .collect();
    let mut control = Table::new(&titles);
    for p in &s.ports {
        let m = &p.counters.mac_control;
        if m.received > 0 {
            let mut row = vec![p.name.clone(), n(m.received)];
            row.extend(rejects.iter().map(|&r| n(m.rejects(r))));
            row.extend([m.zero_source, m.short, m.lossy_class_ignored, m.pause_ignored, m.pfc_ignored].map(n));
            control.row(row);
        }
    }
    if !control.is_empty() {
        out += "\n";
        out += &control.render();
    }

    let mut prios = Table::new(&[
        "port/prio",
        "rx",
        "tx",
        "xoff tx",
        "xon tx",
        "xoff rx",
        "xon rx",
        "ingress B",
        "watermark",
        "XOFF/XON/headroom B",
        "headroom B",
        "hr watermark",
        "upstream resp max µs",
        "queue",
        "paused µs",
        "lossless drop",
        "lossy drop",
        "ECN marked",
        "WRED drop",
        "not ECT passed",
    ]);
    for p in &s.ports {
        for q in p.priorities.iter().filter(|q| active(q)) {
            let c = &q.counters;
            prios.row(vec![
                format!(
                    "{}/{}{}{}",
                    p.name,
                    q.priority,
                    if q.lossless { " L" } else { "" },
                    if q.xoff { " XOFF" } else { "" }
                ),
                n(c.rx_frames),
                n(c.tx_frames),
                n(c.xoff_sent),
                n(c.xon_sent),
                n(c.xoff_received),
                n(c.xon_received),
                n(q.ingress_bytes),
                n(q.ingress_watermark),
                if q.lossless {
                    format!("{}/{}/{}", q.xoff_threshold, q.xon_threshold, q.headroom_size)
                } else {
                    "-".into()
                },
                n(q.headroom_bytes),
                n(q.headroom_watermark),
                format!("{:.1}", q.upstream_response_max_us),
                n(u64::from(q.egress_queue_frames)),
                format!("{}{}", q.paused_us, if q.egress_paused { "*" } else { "" }),
                n(c.lossless_drops),
                n(c.lossy_drops),
                n(c.ecn_marked),
                n(c.wred_dropped),
                n(c.ecn_not_capable_passed),
            ]);
        }
    }
    if !prios.is_empty() {
        out += "\n";
        out += &prios.render();
        out += "(L lossless, XOFF: pausing the upstream, XOFF/XON/headroom: the group's buffer profile, upstream resp: the longest frames kept arriving \
                after an XOFF, *: paused by the link partner now; ECN marked, WRED drop, not ECT passed: the egress queue's WRED/ECN profile)\n";
    }

    // The PFC watchdog: one row per (port, lossless priority) it has acted on or acts on now.
    let mut wd =
        Table::new(&["pfcwd", "prio", "action", "active", "storms", "restored", "dropped", "detected after ms"]);
    for p in &s.ports {
        for w in p.pfcwd.iter().filter(|w| w.active || w.counters.storms_detected > 0) {
            wd.row(vec![
                p.name.clone(),
                w.priority.to_string(),
                format!("{:?}", w.action).to_lowercase(),
                if w.active { "yes".into() } else { "no".into() },
                n(w.counters.storms_detected),
                n(w.counters.restored),
                n(w.counters.dropped_frames),
                format!("{:.1}", w.counters.last_detection_us as f64 / 1e3),
            ]);
        }
    }
    if !wd.is_empty() {
        out += "\n";
        out += &wd.render();
    }

    let mut xdp = Table::new(&["xdp classes", "pause", "pfc", "mac ctl", "vlan", "ipv4", "ipv6", "other", "runt"]);
    for p in &s.ports {
        let x = &p.xdp;
        xdp.row(vec![
            p.name.clone(),
            n(x.pause),
            n(x.pfc),
            n(x.mac_control_other),
            n(x.vlan),
            n(x.ipv4),
            n(x.ipv6),
            n(x.other),
            n(x.runt),
        ]);
    }
    out += "\n";
    out += &xdp.render();
    if let Some(t) = &s.tagger {
        out += &tagger_table(t);
    }
    if let Some(k) = &s.kernel_paths {
        out += "\n";
        for line in k.lines() {
            let _ = writeln!(out, "{line}");
        }
        if s.unstamped_frames > 0 {
            let _ = writeln!(
                out,
                "frames that came without an arrival stamp (the rx clock stood in): {}",
                s.unstamped_frames
            );
        }
    }
    let l = &s.latency;
    let stage = |p: &crate::core::histogram::Percentiles| format!("p50 {:.0} / p99 {:.0} µs", p.p50_us, p.p99_us);
    if l.rx_ring.count > 0 {
        let _ = writeln!(
            out,
            "\nwhere frames waited (since start or `ctl clear`): rx ring {}, engine {}, tx ring {}",
            stage(&l.rx_ring),
            stage(&l.engine),
            stage(&l.tx_ring)
        );
    } else if l.engine.count > 0 {
        // Without arrival stamps the rx ring's wait cannot be seen: say so, not 0.
        let _ = writeln!(
            out,
            "\nwhere frames waited (since start or `ctl clear`): rx ring not measured (no arrival stamps), engine {}, \
             tx ring {}",
            stage(&l.engine),
            stage(&l.tx_ring)
        );
    }
    let r = &s.pfc_reaction;
    if r.count > 0 {
        let _ = writeln!(
            out,
            "\nPFC reaction (XOFF-crossing frame read → pause handed to the kernel): {} pauses, p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs{}",
            r.count,
            r.p50_us,
            r.p99_us,
            r.max_us,
            s.kernel_paths.as_ref().map_or(String::new(), |k| format!(
                " (received pauses count from their arrival stamps: {})",
                k.arrival_stamp.path
            ))
        );
    }
    out
}

/// The Tagger table in use and its counters per (ingress port, tag).
pub fn tagger_table(t: &TaggerStats) -> String {
    let mut out = format!(
        "\nTagger table {} (for {}): {} rules ({} ingress, {} rewrite); lossless priorities {:?}; hosts stamp tag {}; \
         unplanned frames leave with tag {} at priority {}\n",
        t.source,
        t.table_switch,
        t.rules,
        t.ingress_rules,
        t.rewrite_rules,
        t.lossless,
        t.initial_tag,
        t.default_tag,
        t.default_priority
    );
    let mut rows =
        Table::new(&["port/tag", "classified", "rewritten", "default (no ingress rule)", "default (no rewrite rule)"]);
    for r in &t.tags {
        let c = &r.counters;
        let tag = r.tag.map_or("not IP".to_string(), |t| t.to_string());
        rows.row(vec![
            format!("{}/{tag}", r.port),
            n(c.classified),
            n(c.rewritten),
            n(c.default_ingress),
            n(c.default_egress),
        ]);
    }
    if !rows.is_empty() {
        out += &rows.render();
    }
    out
}

pub fn fdb_table(rows: &[FdbRow]) -> String {
    let mut t = Table::new(&["mac", "port", "age s", "static"]);
    for r in rows {
        t.row(vec![
            r.mac.to_string(),
            r.port.to_string(),
            r.age_s.to_string(),
            if r.is_static { "yes".into() } else { String::new() },
        ]);
    }
    t.render()
}

/// The traffic map as a matrix: rows are ingress ports, columns egress ports; `*` when
/// the pair waits at the slowpath, `q` when it waits in an egress queue.
pub fn traffic_map_table(map: &TrafficMapView) -> String {
    let cell = |m: &[Vec<bool>], i: usize, e: usize| m.get(i).and_then(|r| r.get(e)).copied().unwrap_or(false);
    let mut header = vec!["ingress \\ egress".to_string()];
    header.extend(map.ports.iter().cloned());
    let mut t = Table::new(&header);
    for (i, name) in map.ports.iter().enumerate() {
        let mut row = vec![name.clone()];
        for e in 0..map.ports.len() {
            row.push(match (cell(&map.at_slowpath, i, e), cell(&map.waiting, i, e)) {
                (true, _) => "*".into(),
                (false, true) => "q".into(),
                _ => ".".into(),
            });
        }
        t.row(row);
    }
    t.render() + "(* waiting at the slowpath, q waiting in an egress queue)\n"
}

/// The buffer profile every (port, lossless priority) ends up with, as TOML comments
/// (after `check-config`'s TOML, which stays valid), and the profiles that do nothing.
pub fn profiles_comment(config: &crate::core::config::Config) -> String {
    use crate::core::config::{XoffRule, XonRule};
    let mut t = Table::new(&["port", "prio", "XOFF", "XON", "headroom B"]);
    for port in 0..config.ports.len() {
        for &prio in config.lossless_priorities() {
            let g = config.group_profile(port, prio);
            t.row(vec![
                config.port_name(port).to_string(),
                prio.to_string(),
                match g.xoff {
                    XoffRule::Static(b) => format!("{b} B"),
                    XoffRule::Dynamic(alpha) => format!("{alpha} × free shared"),
                },
                match g.xon {
                    XonRule::Static(b) => format!("{b} B"),
                    XonRule::BelowXoff(offset) => format!("XOFF − {offset} B"),
                },
                n(g.headroom_bytes),
            ]);
        }
    }
    let mut out = String::from("\n# Effective buffer profile of each (port, lossless priority):\n");
    for line in t.render().lines() {
        let _ = writeln!(out, "# {line}");
    }
    let lossless = config.lossless_priorities();
    let wide = config.buffer.priority.iter().map(|(k, _)| ("buffer.priority".to_string(), k));
    let per_port = config
        .ports
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.priority.iter().map(move |(k, _)| (format!("port[{i}].priority"), k)));
    for (level, key) in wide.chain(per_port) {
        if !lossless.contains(&key) {
            let _ = writeln!(out, "# {level}.{key}: priority {key} is lossy here; its profile has no effect");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::stats::PortStats;
    use crate::core::Priority;

    #[test]
    fn check_config_lists_every_lossless_group_and_the_profiles_that_do_nothing() {
        let c = crate::core::config::Config::from_toml(
            "[buffer.priority.4]\nxoff_alpha = 0.5\n[buffer.priority.2]\nheadroom_bytes = 1\n\
             [[port]]\niface = \"a\"\n[port.priority.3]\nxon_bytes = 100\n",
        )
        .unwrap();
        let text = profiles_comment(&c);
        let rows: Vec<Vec<&str>> =
            text.lines().filter(|l| l.starts_with("# a ")).map(|l| l.split_whitespace().collect()).collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert_eq!(rows[0][2..], ["3", "98304", "B", "100", "B", "65536"]);
        assert_eq!(rows[1][3..6], ["0.5", "×", "free"]);
        assert!(text.contains("buffer.priority.2: priority 2 is lossy"), "{text}");
        assert!(text.lines().all(|l| l.is_empty() || l.starts_with('#')), "the TOML stays valid");
    }

    #[test]
    fn tables_align_and_show_active_rows() {
        let mut t = Table::new(&["a", "bb"]);
        t.row(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(), "a     bb\nlong   1\n");

        let mut s = Stats::default();
        s.switch.name = "sw".into();
        let mut p = PortStats { name: "p0".into(), priorities: PrioStats::for_priorities(), ..Default::default() };
        p.priorities[3].counters.xoff_sent = 2;
        s.switch.ports.push(crate::stats::PortReport { engine: p, ..Default::default() });
        let text = stats_table(&s);
        assert!(text.contains("p0/3"), "{text}");
        assert!(!text.contains("p0/4"), "{text}");
    }

    #[test]
    fn the_tagger_section_names_the_table_and_counts_per_port_and_tag() {
        use crate::core::stats::{TagCounters, TagRow};
        let t = TaggerStats {
            table_switch: "sw1".into(),
            source: "tables/sw1.toml".into(),
            rules: 5,
            ingress_rules: 2,
            rewrite_rules: 3,
            lossless: vec![Priority::new(3), Priority::new(4)],
            initial_tag: 2,
            default_tag: 0,
            default_priority: Priority::new(0),
            tags: vec![
                TagRow {
                    port: "ccw".into(),
                    tag: Some(2),
                    counters: TagCounters { classified: 10, rewritten: 7, default_ingress: 0, default_egress: 1 },
                },
                TagRow {
                    port: "host".into(),
                    tag: None,
                    counters: TagCounters { default_ingress: 2, ..Default::default() },
                },
            ],
        };
        let text = tagger_table(&t);
        assert!(text.contains("Tagger table tables/sw1.toml (for sw1): 5 rules (2 ingress, 3 rewrite)"), "{text}");
        let row = text.lines().find(|l| l.starts_with("ccw/2")).expect(&text);
        assert_eq!(row.split_whitespace().collect::<Vec<_>>(), ["ccw/2", "10", "7", "0", "1"]);
        assert!(text.contains("host/not IP"), "{text}");
    }

    #[test]
    fn traffic_map_matrix() {
        let map = TrafficMapView {
            ports: vec!["a".into(), "b".into()],
            waiting: vec![vec![false, true], vec![false, false]],
            at_slowpath: vec![vec![false, true], vec![false, false]],
        };
        let text = traffic_map_table(&map);
        assert!(text.lines().nth(1).unwrap().ends_with('*'), "{text}");
    }
}
