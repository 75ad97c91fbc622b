//! SONiC's views of a switch, worked out from a stats snapshot and what `ctl clear` kept:
//! `ctl pfcstat` (SONiC's `pfcstat`, and `--history`), `ctl pfcwd` (`pfcwd show stats`)
//! and `ctl watermark` (`show queue watermark`, `show priority-group watermark`). Each is
//! a plain value (its JSON is `ctl --json`'s answer) with a `render` that lays it out as
//! SONiC's tools do, so that an engineer who reads SONiC's output reads this one.
//!
//! Counters are shown as gained since the latest `ctl clear`, as SONiC shows them since
//! `sonic-clear pfccounters`; the switch's own counters stay as they are.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::control::{Cleared, Views};
use crate::core::stats::PrioStats;
use crate::core::{Priority, PRIORITIES};
use crate::stats::{PortReport, Stats};
use pfcswitch_table::Table;

/// How the views turn the switch's monotonic clock into wall-clock time: the reader's own
/// reading of both clocks (the switch runs on the same machine).
#[derive(Clone, Copy, Debug)]
pub struct Clocks {
    /// The monotonic clock now, ns.
    pub monotonic_ns: u64,
    /// The wall clock at the same moment.
    pub wall: SystemTime,
}

impl Clocks {
    pub fn now() -> Clocks {
        Clocks { monotonic_ns: crate::sys::now().as_nanos(), wall: SystemTime::now() }
    }

    /// The wall-clock time of monotonic instant `ns` (if it happened), in RFC 3339 (UTC, ms).
    fn wall_time(&self, ns: Option<u64>) -> Option<String> {
        let ns = ns?;
        let back = Duration::from_nanos(self.monotonic_ns.saturating_sub(ns));
        Some(humantime::format_rfc3339_millis(self.wall - back).to_string())
    }
}

fn unix_ms(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The same port in the snapshot `ctl clear` kept, if it was run.
fn baseline<'a>(cleared: Option<&'a Cleared>, port: &PortReport) -> Option<&'a PortReport> {
    cleared?.stats.ports.iter().find(|p| p.name == port.name)
}

/// What a counter gained since the baseline (all of it without one). A counter below its
/// baseline (the switch restarted under the same name) shows what it holds.
fn gained(now: u64, then: Option<u64>) -> u64 {
    match then {
        Some(t) if t <= now => now - t,
        _ => now,
    }
}

/// `1234567` as SONiC prints counts: `1,234,567`.
pub fn with_commas(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// When `ctl clear` was run, as the views say it.
fn since(cleared: Option<&Cleared>) -> Option<String> {
    cleared.map(|c| unix_ms(c.at_unix_ms))
}

/// SONiC's line above a view shown since a clear.
fn cached_line(since: Option<&str>) -> String {
    since.map_or(String::new(), |t| format!("Last cached time was {t}\n"))
}

/// A header row: `first`, then one column per priority, `prefix` and its number.
fn priority_headers(first: &str, prefix: &str) -> Vec<String> {
    std::iter::once(first.to_string()).chain((0..PRIORITIES).map(|q| format!("{prefix}{q}"))).collect()
}

/// `ctl pfcstat`: per port, the PFC frames received and sent with each priority enabled
/// (SONiC's `PFC<n>_RX_PKTS`/`TX_PKTS`). A frame that enables three priorities counts for
/// each of them. Received frames count for the lossless priorities; a class the switch
/// holds lossy is ignored and counted as `lossy_class_ignored` in `ctl stats`. 802.3x
/// PAUSE frames are not PFC frames: `ctl stats` counts them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PfcStat {
    /// When `ctl clear` was run (RFC 3339), if it was: the counts are since then.
    pub since: Option<String>,
    pub ports: Vec<PfcStatPort>,
}

/// One port's row in [`PfcStat`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PfcStatPort {
    pub port: String,
    /// PFC frames received, by priority.
    pub rx: [u64; PRIORITIES],
    /// PFC frames sent, by priority.
    pub tx: [u64; PRIORITIES],
}

impl PfcStat {
    pub fn new(v: &Views) -> PfcStat {
        let cleared = v.cleared.as_ref();
        let ports = v
            .stats
            .ports
            .iter()
            .map(|p| {
                let then = baseline(cleared, p);
                let count = |f: fn(&PrioStats) -> u64| {
                    std::array::from_fn(|q| gained(f(&p.priorities[q]), then.map(|t| f(&t.priorities[q]))))
                };
                PfcStatPort {
                    port: p.name.clone(),
                    rx: count(|q| q.counters.pfc_received()),
                    tx: count(|q| q.counters.pfc_sent()),
                }
            })
            .collect();
        PfcStat { since: since(cleared), ports }
    }

    /// Two tables, received then sent, as SONiC's `pfcstat` prints them.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (title, rx) in [("Port Rx", true), ("Port Tx", false)] {
            let mut t = Table::new(&priority_headers(title, "PFC"));
            for p in &self.ports {
                let counts = if rx { &p.rx } else { &p.tx };
                t.row(std::iter::once(p.port.clone()).chain(counts.iter().map(|&n| with_commas(n))).collect());
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&cached_line(self.since.as_deref()));
            out.push_str(&t.render_simple());
        }
        out
    }
}

/// `ctl pfcstat --history`: per port and priority, how the link partner paused it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PfcHistory {
    /// When `ctl clear` was run (RFC 3339), if it was: transitions and time are since then.
    pub since: Option<String>,
    pub rows: Vec<PfcHistoryRow>,
}

/// One port and priority in [`PfcHistory`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PfcHistoryRow {
    pub port: String,
    pub priority: Priority,
    /// PFC pauses that found the priority running.
    pub rx_pause_transitions: u64,
    /// Time the partner kept it paused, µs.
    pub total_rx_pause_us: u64,
    /// How long the latest pause lasted (so far, if it holds), µs.
    pub recent_rx_pause_us: u64,
    /// When the latest pause began (RFC 3339), if one ever came.
    pub recent_rx_pause_timestamp: Option<String>,
}

impl PfcHistory {
    pub fn new(v: &Views, clocks: &Clocks) -> PfcHistory {
        let cleared = v.cleared.as_ref();
        let mut rows = Vec::new();
        for p in &v.stats.ports {
            let then = baseline(cleared, p);
            for q in &p.priorities {
                let h = q.pfc_history;
                let h0 = then.map(|t| t.priorities[q.priority.index()].pfc_history);
                rows.push(PfcHistoryRow {
                    port: p.name.clone(),
                    priority: q.priority,
                    rx_pause_transitions: gained(h.transitions, h0.map(|h| h.transitions)),
                    total_rx_pause_us: gained(h.paused_us, h0.map(|h| h.paused_us)),
                    recent_rx_pause_us: h.recent_us,
                    recent_rx_pause_timestamp: clocks.wall_time(h.recent_start_ns),
                });
            }
        }
        PfcHistory { since: since(cleared), rows }
    }

    /// As SONiC's `pfcstat --history` prints it: a blank line between ports; times in
    /// ms (to the µs, where SONiC rounds to whole ms).
    pub fn render(&self) -> String {
        let mut t = Table::new(&[
            "Port",
            "Priority",
            "RX Pause Transitions",
            "Total RX Pause Time MS",
            "Recent RX Pause Time MS",
            "Recent RX Pause Timestamp",
        ]);
        let ms = |us: u64| format!("{:.3}", us as f64 / 1000.0);
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 && r.port != self.rows[i - 1].port {
                t.blank_row();
            }
            t.row(vec![
                r.port.clone(),
                format!("PFC{}", r.priority),
                with_commas(r.rx_pause_transitions),
                ms(r.total_rx_pause_us),
                ms(r.recent_rx_pause_us),
                r.recent_rx_pause_timestamp.clone().unwrap_or_else(|| "N/A".into()),
            ]);
        }
        cached_line(self.since.as_deref()) + &t.render_simple()
    }
}

/// `ctl pfcwd`: SONiC's `pfcwd show stats`, one row per watched queue (`port:priority`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PfcwdStats {
    /// When `ctl clear` was run (RFC 3339), if it was: counts are since then.
    pub since: Option<String>,
    pub queues: Vec<PfcwdQueue>,
}

/// One queue in [`PfcwdStats`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PfcwdQueue {
    pub queue: String,
    /// `operational`, or `stormed` while the watchdog acts on it.
    pub status: &'static str,
    pub storms_detected: u64,
    pub storms_restored: u64,
    /// Frames during storms: sent, dropped at the queue, received, dropped on receipt.
    pub tx_ok: u64,
    pub tx_drop: u64,
    pub rx_ok: u64,
    pub rx_drop: u64,
    /// The same during the latest storm (so far, if it goes on), if it began since the
    /// clear.
    pub tx_last_ok: u64,
    pub tx_last_drop: u64,
    pub rx_last_ok: u64,
    pub rx_last_drop: u64,
}

impl PfcwdQueue {
    fn is_zero(&self) -> bool {
        [
            self.storms_detected,
            self.storms_restored,
            self.tx_ok,
            self.tx_drop,
            self.rx_ok,
            self.rx_drop,
            self.tx_last_ok,
            self.tx_last_drop,
            self.rx_last_ok,
            self.rx_last_drop,
        ] == [0; 10]
    }
}

impl PfcwdStats {
    /// The watched queues; those with nothing to show only when `empty` asks for them
    /// (SONiC's `--empty`).
    pub fn new(v: &Views, empty: bool) -> PfcwdStats {
        let cleared = v.cleared.as_ref();
        let mut queues = Vec::new();
        for p in &v.stats.ports {
            let then = baseline(cleared, p);
            for w in &p.pfcwd {
                let w0 = then.and_then(|t| t.pfcwd.iter().find(|x| x.priority == w.priority)).map(|x| x.counters);
                let (c, all, all0) = (w.counters, w.counters.storm_traffic, w0.map(|c| c.storm_traffic));
                // The latest storm, if it began since the clear.
                let storms = gained(c.storms_detected, w0.map(|c| c.storms_detected));
                let last = if storms > 0 { c.last_storm_traffic } else { Default::default() };
                let q = PfcwdQueue {
                    queue: format!("{}:{}", p.name, w.priority),
                    status: if w.active { "stormed" } else { "operational" },
                    storms_detected: storms,
                    storms_restored: gained(c.restored, w0.map(|c| c.restored)),
                    tx_ok: gained(all.tx_ok, all0.map(|t| t.tx_ok)),
                    tx_drop: gained(all.tx_dropped, all0.map(|t| t.tx_dropped)),
                    rx_ok: gained(all.rx_ok, all0.map(|t| t.rx_ok)),
                    rx_drop: gained(all.rx_dropped, all0.map(|t| t.rx_dropped)),
                    tx_last_ok: last.tx_ok,
                    tx_last_drop: last.tx_dropped,
                    rx_last_ok: last.rx_ok,
                    rx_last_drop: last.rx_dropped,
                };
                if empty || !q.is_zero() || w.active {
                    queues.push(q);
                }
            }
        }
        PfcwdStats { since: since(cleared), queues }
    }

    pub fn render(&self) -> String {
        let mut t = Table::new(&[
            "QUEUE",
            "STATUS",
            "STORM DETECTED/RESTORED",
            "TX OK/DROP",
            "RX OK/DROP",
            "TX LAST OK/DROP",
            "RX LAST OK/DROP",
        ]);
        let pair = |a: u64, b: u64| format!("{a}/{b}");
        for q in &self.queues {
            t.row(vec![
                q.queue.clone(),
                q.status.into(),
                pair(q.storms_detected, q.storms_restored),
                pair(q.tx_ok, q.tx_drop),
                pair(q.rx_ok, q.rx_drop),
                pair(q.tx_last_ok, q.tx_last_drop),
                pair(q.rx_last_ok, q.rx_last_drop),
            ]);
        }
        cached_line(self.since.as_deref()) + &t.render_simple()
    }
}

/// `ctl watermark`: the most each queue and priority group held since the watermarks
/// were last cleared (`ctl clear`, `ctl clear-watermarks`), bytes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Watermarks {
    pub ports: Vec<PortWatermarks>,
}

/// One port's row in [`Watermarks`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortWatermarks {
    pub port: String,
    /// Per egress queue (priority): the most bytes it held.
    pub queue: [u64; PRIORITIES],
    /// Per ingress priority group: the most bytes of the shared pool it held.
    pub pg_shared: [u64; PRIORITIES],
    /// Per ingress priority group: the most headroom it used (lossless groups only).
    pub pg_headroom: [u64; PRIORITIES],
}

/// Which of [`Watermarks`]' tables to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WatermarkKind {
    /// Egress queues (`show queue watermark unicast`).
    Queue,
    /// Ingress priority groups' shared-pool use (`show priority-group watermark shared`).
    PgShared,
    /// Ingress priority groups' headroom (`show priority-group watermark headroom`).
    PgHeadroom,
}

impl Watermarks {
    pub fn new(stats: &Stats) -> Watermarks {
        let ports = stats
            .ports
            .iter()
            .map(|p| PortWatermarks {
                port: p.name.clone(),
                queue: std::array::from_fn(|q| p.priorities[q].egress_queue_watermark),
                pg_shared: std::array::from_fn(|q| p.priorities[q].ingress_shared_watermark),
                pg_headroom: std::array::from_fn(|q| p.priorities[q].headroom_watermark),
            })
            .collect();
        Watermarks { ports }
    }

    /// The tables `kinds` names, in SONiC's layout.
    pub fn render(&self, kinds: &[WatermarkKind]) -> String {
        let mut out = String::new();
        for &kind in kinds {
            let (title, column) = match kind {
                WatermarkKind::Queue => ("Egress shared pool occupancy per unicast queue:", "UC"),
                WatermarkKind::PgShared => ("Ingress shared pool occupancy per PG:", "PG"),
                WatermarkKind::PgHeadroom => ("Ingress headroom per PG:", "PG"),
            };
            let pick = |p: &PortWatermarks| match kind {
                WatermarkKind::Queue => p.queue,
                WatermarkKind::PgShared => p.pg_shared,
                WatermarkKind::PgHeadroom => p.pg_headroom,
            };
            let mut t = Table::new(&priority_headers("Port", column));
            for p in &self.ports {
                t.row(std::iter::once(p.port.clone()).chain(pick(p).iter().map(|b| b.to_string())).collect());
            }
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(title);
            out.push('\n');
            out.push_str(&t.render_simple());
        }
        out
    }
}

/// `ctl watch`: what the switch did between two snapshots, per second: per port, and per
/// priority for the lossless ones and any other that carried or paused something.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rates {
    /// The switch's uptime at the later snapshot, s.
    pub uptime_s: f64,
    /// The time between the two snapshots, on the switch's clock, s.
    pub interval_s: f64,
    pub rows: Vec<RateRow>,
}

/// One port (`priority` absent) or one of its priorities in [`Rates`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RateRow {
    pub port: String,
    pub priority: Option<Priority>,
    /// Data frames and bits received and sent per second (bits of the frames without
    /// preamble, gap and FCS).
    pub rx_fps: f64,
    pub rx_bps: f64,
    pub tx_fps: f64,
    pub tx_bps: f64,
    /// Pause frames received and sent per second: PFC frames naming the priority, or for
    /// the port every PFC and 802.3x PAUSE frame.
    pub pauses_rx_ps: f64,
    pub pauses_tx_ps: f64,
    /// Bytes the port's ingress holds now (for the priority, or in all).
    pub ingress_bytes: u64,
    /// Bytes waiting in the port's egress queues now.
    pub egress_queue_bytes: u64,
    /// Priorities the port is pausing its upstream on now (XOFF).
    pub xoff: Vec<Priority>,
    /// Priorities the link partner keeps paused now.
    pub paused: Vec<Priority>,
}

impl Rates {
    /// The rates from snapshot `then` to `now` of the same switch; `None` when they are
    /// not a pair (no time between them, or another switch).
    pub fn between(then: &Stats, now: &Stats) -> Option<Rates> {
        let dt = now.uptime_s - then.uptime_s;
        if dt <= 0.0 || then.ports.len() != now.ports.len() {
            return None;
        }
        let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
        let mut rows = Vec::new();
        for (p0, p) in then.ports.iter().zip(&now.ports) {
            let (c0, c) = (&p0.counters, &p.counters);
            let (m0, m) = (&c0.mac_control, &c.mac_control);
            let which = |f: fn(&PrioStats) -> bool| p.priorities.iter().filter(|q| f(q)).map(|q| q.priority).collect();
            rows.push(RateRow {
                port: p.name.clone(),
                priority: None,
                rx_fps: per_s(c0.rx_frames, c.rx_frames),
                rx_bps: 8.0 * per_s(c0.rx_bytes, c.rx_bytes),
                tx_fps: per_s(c0.tx_frames, c.tx_frames),
                tx_bps: 8.0 * per_s(c0.tx_bytes, c.tx_bytes),
                pauses_rx_ps: per_s(m0.pfc_received + m0.pause_received, m.pfc_received + m.pause_received),
                pauses_tx_ps: per_s(m0.pfc_sent + m0.pause_sent, m.pfc_sent + m.pause_sent),
                ingress_bytes: p.priorities.iter().map(|q| q.ingress_bytes).sum(),
                egress_queue_bytes: p.priorities.iter().map(|q| q.egress_queue_bytes).sum(),
                xoff: which(|q| q.xoff),
                paused: which(|q| q.egress_paused),
            });
            for (q0, q) in p0.priorities.iter().zip(&p.priorities) {
                let (k0, k) = (&q0.counters, &q.counters);
                let row = RateRow {
                    port: p.name.clone(),
                    priority: Some(q.priority),
                    rx_fps: per_s(k0.rx_frames, k.rx_frames),
                    rx_bps: 8.0 * per_s(k0.rx_bytes, k.rx_bytes),
                    tx_fps: per_s(k0.tx_frames, k.tx_frames),
                    tx_bps: 8.0 * per_s(k0.tx_bytes, k.tx_bytes),
                    pauses_rx_ps: per_s(k0.pfc_received(), k.pfc_received()),
                    pauses_tx_ps: per_s(k0.pfc_sent(), k.pfc_sent()),
                    ingress_bytes: q.ingress_bytes,
                    egress_queue_bytes: q.egress_queue_bytes,
                    xoff: if q.xoff { vec![q.priority] } else { Vec::new() },
                    paused: if q.egress_paused { vec![q.priority] } else { Vec::new() },
                };
                let busy = row.rx_fps + row.tx_fps + row.pauses_rx_ps + row.pauses_tx_ps > 0.0
                    || row.ingress_bytes + row.egress_queue_bytes > 0;
                if q.lossless || busy {
                    rows.push(row);
                }
            }
        }
        Some(Rates { uptime_s: now.uptime_s, interval_s: dt, rows })
    }

    /// A table of the rates, headed by the switch's name and uptime.
    pub fn render(&self, switch: &str) -> String {
        let mut t = Table::new(&[
            "port",
            "prio",
            "rx f/s",
            "rx b/s",
            "tx f/s",
            "tx b/s",
            "pause rx/s",
            "pause tx/s",
            "ingress B",
            "egress B",
            "XOFF",
            "paused",
        ]);
        let list = |v: &[Priority]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.iter().map(Priority::to_string).collect::<Vec<_>>().join(",")
            }
        };
        for r in &self.rows {
            t.row(vec![
                if r.priority.is_none() { r.port.clone() } else { String::new() },
                r.priority.map_or("all".into(), |q| q.to_string()),
                si(r.rx_fps),
                si(r.rx_bps),
                si(r.tx_fps),
                si(r.tx_bps),
                si(r.pauses_rx_ps),
                si(r.pauses_tx_ps),
                r.ingress_bytes.to_string(),
                r.egress_queue_bytes.to_string(),
                list(&r.xoff),
                list(&r.paused),
            ]);
        }
        format!("{switch}: up {:.1} s, rates over the last {:.2} s\n{}", self.uptime_s, self.interval_s, t.render())
    }
}

/// `x` to three significant digits with an SI prefix: `5.00k`, `12.3M`, `0`.
pub fn si(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let (value, prefix) = [(1e9, "G"), (1e6, "M"), (1e3, "k")]
        .iter()
        .find(|(scale, _)| x.abs() >= *scale)
        .map_or((x, ""), |&(scale, p)| (x / scale, p));
    let digits = if value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$}{prefix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::stats::{PauseHistory, WatchdogStats};

    fn port(name: &str) -> PortReport {
        let mut p = PortReport::default();
        p.engine.name = name.into();
        p.engine.priorities = Priority::all().map(|q| PrioStats { priority: q, ..Default::default() }).collect();
        p
    }

    fn views(ports: Vec<PortReport>, cleared: Option<Vec<PortReport>>) -> Views {
        let stats = |ports| {
            let mut s = Stats::default();
            s.switch.ports = ports;
            s
        };
        Views {
            stats: stats(ports),
            cleared: cleared.map(|c| Cleared { at_unix_ms: 1_700_000_000_000, stats: stats(c) }),
        }
    }

    #[test]
    fn counts_print_with_thousands_separators_as_sonic_prints_them() {
        assert_eq!(with_commas(0), "0");
        assert_eq!(with_commas(999), "999");
        assert_eq!(with_commas(1000), "1,000");
        assert_eq!(with_commas(1_234_567), "1,234,567");
    }

    #[test]
    fn pfcstat_counts_a_frame_for_every_priority_it_enables_and_shows_what_was_gained_since_clear() {
        let mut p1 = port("p1");
        p1.engine.priorities[3].counters.xoff_received = 1500;
        p1.engine.priorities[3].counters.xon_received = 20;
        p1.engine.priorities[4].counters.xoff_sent = 7;
        let mut then = port("p1");
        then.engine.priorities[3].counters.xoff_received = 500;
        let plain = PfcStat::new(&views(vec![p1.clone()], None));
        assert_eq!((plain.ports[0].rx[3], plain.ports[0].tx[4], plain.since), (1520, 7, None));
        let v = views(vec![p1], Some(vec![then]));
        let cleared = PfcStat::new(&v);
        assert_eq!(cleared.ports[0].rx[3], 1020);
        let text = cleared.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "Last cached time was 2023-11-14T22:13:20.000Z");
        assert_eq!(lines[1], "  Port Rx    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7");
        assert_eq!(lines[2], "---------  ------  ------  ------  ------  ------  ------  ------  ------");
        assert_eq!(lines[3], "       p1       0       0       0   1,020       0       0       0       0");
        assert!(text.contains("Port Tx"), "{text}");
    }

    #[test]
    fn history_times_are_shown_in_ms_and_the_latest_pause_on_the_wall_clock() {
        let mut p1 = port("p1");
        p1.engine.priorities[3].pfc_history =
            PauseHistory { transitions: 4, paused_us: 12_345, recent_start_ns: Some(9_000_000_000), recent_us: 2_500 };
        let clocks = Clocks { monotonic_ns: 10_000_000_000, wall: UNIX_EPOCH + Duration::from_secs(1_700_000_000) };
        let h = PfcHistory::new(&views(vec![p1, port("p2")], None), &clocks);
        let r = &h.rows[3];
        assert_eq!((r.rx_pause_transitions, r.total_rx_pause_us, r.recent_rx_pause_us), (4, 12_345, 2_500));
        assert_eq!(r.recent_rx_pause_timestamp.as_deref(), Some("2023-11-14T22:13:19.000Z"), "1 s before now");
        assert_eq!(h.rows[0].recent_rx_pause_timestamp, None);
        let text = h.render();
        let row: Vec<&str> = text.lines().nth(5).unwrap().split_whitespace().collect();
        assert_eq!(row, ["p1", "PFC3", "4", "12.345", "2.500", "2023-11-14T22:13:19.000Z"], "{text}");
        assert!(text.lines().any(|l| l.is_empty()), "a blank line between ports:\n{text}");
    }

    #[test]
    fn pfcwd_lists_queues_with_something_to_show_unless_asked_for_all() {
        let mut p1 = port("p1");
        let mut stormed = WatchdogStats { priority: Priority::new(3), active: true, ..Default::default() };
        stormed.counters.storms_detected = 2;
        stormed.counters.restored = 1;
        stormed.counters.storm_traffic.tx_dropped = 40;
        stormed.counters.last_storm_traffic.tx_dropped = 15;
        p1.engine.pfcwd = vec![stormed, WatchdogStats { priority: Priority::new(4), ..Default::default() }];
        let v = views(vec![p1], None);
        let s = PfcwdStats::new(&v, false);
        assert_eq!(s.queues.len(), 1);
        assert_eq!((s.queues[0].queue.as_str(), s.queues[0].status), ("p1:3", "stormed"));
        assert_eq!(PfcwdStats::new(&v, true).queues.len(), 2);
        // Cleared since: nothing gained, and the latest storm is older than the clear.
        let mut quiet = v.clone();
        quiet.stats.switch.ports[0].engine.pfcwd[0].active = false;
        let v = views(quiet.stats.switch.ports.clone(), Some(quiet.stats.switch.ports.clone()));
        assert!(PfcwdStats::new(&v, false).queues.is_empty());
        assert!(PfcwdStats::new(&v, true).queues.iter().all(PfcwdQueue::is_zero));
        let text = s.render();
        assert_eq!(
            text.lines().nth(2).unwrap().split_whitespace().collect::<Vec<_>>(),
            ["p1:3", "stormed", "2/1", "0/40", "0/0", "0/15", "0/0"]
        );
    }

    #[test]
    fn rates_are_what_the_counters_gained_over_the_switchs_own_interval() {
        let stats = |uptime_s, frames: u64, pauses: u64, xoff| {
            let mut p = port("p1");
            p.engine.counters.rx_frames = frames;
            p.engine.counters.rx_bytes = frames * 1000;
            p.engine.counters.mac_control.pfc_sent = pauses;
            p.engine.priorities[3].lossless = true;
            p.engine.priorities[3].counters.rx_frames = frames;
            p.engine.priorities[3].counters.rx_bytes = frames * 1000;
            p.engine.priorities[3].counters.xoff_sent = pauses;
            p.engine.priorities[3].xoff = xoff;
            p.engine.priorities[3].ingress_bytes = 40_960;
            let mut s = Stats::default();
            s.switch.uptime_s = uptime_s;
            s.switch.ports = vec![p];
            s
        };
        let r = Rates::between(&stats(10.0, 1000, 2, false), &stats(10.5, 3500, 32, true)).unwrap();
        assert_eq!(r.interval_s, 0.5);
        let (all, p3) = (&r.rows[0], &r.rows[1]);
        assert_eq!((all.priority, all.rx_fps, all.rx_bps, all.pauses_tx_ps), (None, 5000.0, 40e6, 60.0));
        assert_eq!(
            (p3.priority, p3.rx_fps, p3.pauses_tx_ps, p3.ingress_bytes),
            (Some(Priority::new(3)), 5000.0, 60.0, 40_960)
        );
        assert_eq!((all.xoff.clone(), p3.xoff.clone()), (vec![Priority::new(3)], vec![Priority::new(3)]));
        assert_eq!(r.rows.len(), 2, "idle lossy priorities are left out");
        assert!(Rates::between(&stats(10.5, 0, 0, false), &stats(10.5, 0, 0, false)).is_none());
        let text = r.render("sw1");
        assert!(text.starts_with("sw1: up 10.5 s, rates over the last 0.50 s\n"), "{text}");
        assert_eq!(
            text.lines().nth(2).unwrap().split_whitespace().take(4).collect::<Vec<_>>(),
            ["p1", "all", "5.00k", "40.0M"]
        );
        assert_eq!([si(0.0), si(999.0), si(1234.0), si(12_345_678.0)], ["0", "999", "1.23k", "12.3M"]);
    }

    #[test]
    fn watermarks_print_one_table_per_kind_in_sonics_words() {
        let mut p1 = port("p1");
        p1.engine.priorities[3].egress_queue_watermark = 9000;
        p1.engine.priorities[3].headroom_watermark = 3000;
        let w = Watermarks::new(&views(vec![p1], None).stats);
        assert_eq!((w.ports[0].queue[3], w.ports[0].pg_headroom[3]), (9000, 3000));
        let text = w.render(&[WatermarkKind::Queue, WatermarkKind::PgHeadroom]);
        assert!(text.starts_with("Egress shared pool occupancy per unicast queue:\n  Port    UC0"), "{text}");
        assert!(text.contains("\nIngress headroom per PG:\n"), "{text}");
    }
}
