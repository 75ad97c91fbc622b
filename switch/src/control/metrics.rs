//! `pfcswitch run --metrics ADDR:PORT`: the `ctl stats` counters on `/metrics`, in the
//! OpenMetrics text format that Prometheus scrapes.
//!
//! A scrape asks the dataplane for a snapshot the way `ctl stats` does (it answers
//! between two batches, a bounded piece of work, so a scrape never holds up frames), and
//! encodes it with `prometheus-client` on the metrics thread. Counters keep the switch's
//! names with `_total`; labels are `port`, `priority` and `reason`.

use std::hash::Hash;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::http::{Answer, Head, HttpServer, Limits, Refusal, Refusals};
use super::server::{ask, Routes};
use super::{ControlError, Request, Response};
use crate::core::counters::CounterField;
use crate::core::stats::{DropCounters, MacControlCounters};
use crate::stats::Stats;

/// What Prometheus is told the body is.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PortLabels {
    port: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PrioLabels {
    port: String,
    priority: u8,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    port: String,
    reason: Reason,
}

/// A drop or MAC-control reason, as the label value.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Reason(&'static str);

impl EncodeLabelValue for Reason {
    fn encode(&self, encoder: &mut prometheus_client::encoding::LabelValueEncoder) -> std::fmt::Result {
        EncodeLabelValue::encode(&self.0, encoder)
    }
}

fn drop_reasons(d: &DropCounters) -> impl Iterator<Item = (Reason, u64)> + '_ {
    d.iter().map(|(r, v)| (Reason(r.name()), v))
}

/// MAC-control frames received and not acted on, by why.
fn control_rejects(m: &MacControlCounters) -> impl Iterator<Item = (Reason, u64)> + '_ {
    m.not_acted_on().map(|(name, v)| (Reason(name), v))
}

/// One scrape's registry, filled from a snapshot.
struct Scrape {
    registry: Registry,
}

impl Scrape {
    fn counters<L>(&mut self, name: &str, help: &str, rows: impl IntoIterator<Item = (L, u64)>)
    where
        L: EncodeLabelSet + Clone + Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
    {
        let rows: Vec<(L, u64)> = rows.into_iter().collect();
        // A family without samples is left out: some parsers take its metadata for the
        // next family's.
        if rows.is_empty() {
            return;
        }
        let family = Family::<L, Counter>::default();
        for (labels, v) in rows {
            family.get_or_create(&labels).inc_by(v);
        }
        self.registry.register(name, help, family);
    }

    /// A family per count of a struct declared with `counters!`, named `PREFIX_FIELD`
    /// with the field's doc as help, and a sample per row.
    fn counts<L, I>(&mut self, prefix: &str, rows: impl IntoIterator<Item = (L, I)>)
    where
        L: EncodeLabelSet + Clone + Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
        I: Iterator<Item = (&'static CounterField, u64)>,
    {
        let mut families: Vec<(&'static CounterField, Vec<(L, u64)>)> = Vec::new();
        for (labels, counts) in rows {
            for (i, (counter, v)) in counts.enumerate() {
                if families.len() == i {
                    families.push((counter, Vec::new()));
                }
                families[i].1.push((labels.clone(), v));
            }
        }
        for (counter, rows) in families {
            self.counters(&format!("{prefix}_{}", counter.name), counter.help(), rows);
        }
    }

    fn gauges<L>(&mut self, name: &str, help: &str, rows: impl IntoIterator<Item = (L, f64)>)
    where
        L: EncodeLabelSet + Clone + Hash + Eq + std::fmt::Debug + Send + Sync + 'static,
    {
        let rows: Vec<(L, f64)> = rows.into_iter().collect();
        if rows.is_empty() {
            return;
        }
        let family = Family::<L, Gauge<f64, AtomicU64>>::default();
        for (labels, v) in rows {
            family.get_or_create(&labels).set(v);
        }
        self.registry.register(name, help, family);
    }

    fn counter(&mut self, name: &str, help: &str, v: u64) {
        let c = Counter::<u64>::default();
        c.inc_by(v);
        self.registry.register(name, help, c);
    }

    fn gauge(&mut self, name: &str, help: &str, v: f64) {
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(v);
        self.registry.register(name, help, g);
    }
}

/// The snapshot as OpenMetrics text.
pub fn encode(s: &Stats) -> String {
    encode_with(s, &[])
}

/// The snapshot as OpenMetrics text, with the endpoint's own refusals by reason.
fn encode_with(s: &Stats, refused: &[(Reason, u64)]) -> String {
    let mut m = Scrape { registry: Registry::with_prefix("pfcswitch") };
    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct RefusalLabels {
        reason: Reason,
    }
    m.counters(
        "metrics_requests_refused",
        "Requests to this endpoint refused (busy, head_too_large, timeout, malformed)",
        refused.iter().map(|&(reason, v)| (RefusalLabels { reason }, v)),
    );
    m.gauge("uptime_seconds", "Time since the switch started", s.uptime_s);
    m.gauge("fdb_entries", "Addresses in the forwarding database", s.fdb_entries as f64);
    m.gauge("shared_buffer_size_bytes", "The shared buffer pool", s.shared_buffer_bytes as f64);
    m.gauge("shared_buffer_used_bytes", "Bytes of the shared pool in use", s.shared_buffer_used as f64);
    m.gauge("free_frames", "UMEM frames free for reception", s.free_frames as f64);
    m.counter("deadlocks_detected", "PFC deadlocks DCFIT detected", s.deadlocks_detected);
    m.counter("slowpath_overflow", "Events the slowpath channel refused", s.slowpath_overflow);
    m.counter("loop_stalls", "Gaps of 1 ms or more in the dataplane's polling", s.stalls.stalls);
    if let Some(us) = s.stalls.cpu_wait_us {
        let waited = Counter::<f64, AtomicU64>::default();
        waited.inc_by(us as f64 / 1e6);
        m.registry.register("loop_cpu_wait_seconds", "Time the dataplane thread waited for a CPU", waited);
    }

    #[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
    struct StageLabels {
        stage: &'static str,
        quantile: &'static str,
    }
    let l = &s.latency;
    let stages = [("rx_ring", &l.rx_ring), ("engine", &l.engine), ("tx_ring", &l.tx_ring)];
    m.gauges(
        "stage_wait_seconds",
        "How long forwarded frames waited in each stage (rx_ring, engine, tx_ring) since start or ctl clear",
        stages.iter().filter(|(_, p)| p.count > 0).flat_map(|&(stage, p)| {
            [("0.5", p.p50_us), ("0.99", p.p99_us), ("1", p.max_us)]
                .map(|(quantile, us)| (StageLabels { stage, quantile }, us / 1e6))
        }),
    );

    let port = |name: &str| PortLabels { port: name.to_string() };
    let ports = &s.ports;
    let per_port = |f: fn(&crate::stats::PortReport) -> u64| ports.iter().map(move |p| (port(&p.name), f(p)));
    // The engine's counts, each under its field's name with its doc as help.
    m.counts("port", ports.iter().map(|p| (port(&p.name), p.counters.counts())));
    m.counts("port", ports.iter().map(|p| (port(&p.name), p.counters.mac_control.counts())));
    m.counters(
        "port_mac_control_short",
        "MAC-control frames shorter than Ethernet's minimum, read as padded with zeros",
        per_port(|p| p.counters.mac_control.short),
    );
    m.counters(
        "port_socket_rx_ring_full",
        "Frames the kernel dropped: the AF_XDP rx ring was full",
        per_port(|p| p.socket.rx_ring_full),
    );
    m.counters(
        "port_socket_rx_dropped",
        "Frames the kernel dropped for the AF_XDP socket",
        per_port(|p| p.socket.rx_dropped),
    );
    m.gauges(
        "port_link_up",
        "1 while the link is up",
        ports.iter().map(|p| (port(&p.name), f64::from(u8::from(p.link_up)))),
    );
    m.gauges(
        "port_held_by_slowpath_frames",
        "Frames for this egress held by the slowpath",
        ports.iter().map(|p| (port(&p.name), p.held_by_slowpath as f64)),
    );
    m.counters(
        "port_drops",
        "Frames not forwarded, by reason",
        ports.iter().flat_map(|p| {
            drop_reasons(&p.counters.drops).map(move |(r, v)| (ReasonLabels { port: p.name.clone(), reason: r }, v))
        }),
    );
    m.counters(
        "port_mac_control_rejected",
        "MAC-control frames received and not acted on, by reason",
        ports.iter().flat_map(|p| {
            control_rejects(&p.counters.mac_control).map(|(r, v)| (ReasonLabels { port: p.name.clone(), reason: r }, v))
        }),
    );

    let prios = || {
        ports.iter().flat_map(|p| {
            p.priorities.iter().map(move |q| (PrioLabels { port: p.name.clone(), priority: q.priority.get() }, q))
        })
    };
    m.counts("priority", prios().map(|(l, q)| (l, q.counters.counts())));
    let lossless = || prios().filter(|(_, q)| q.lossless);
    m.gauges(
        "priority_ingress_bytes",
        "Bytes the port's ingress holds for the priority",
        prios().map(|(l, q)| (l, q.ingress_bytes as f64)),
    );
    m.gauges(
        "priority_ingress_watermark_bytes",
        "The most it held since the watermarks were cleared",
        prios().map(|(l, q)| (l, q.ingress_watermark as f64)),
    );
    m.gauges("priority_headroom_used_bytes", "Headroom in use", lossless().map(|(l, q)| (l, q.headroom_bytes as f64)));
    m.gauges(
        "priority_headroom_watermark_bytes",
        "The most headroom used since the watermarks were cleared",
        lossless().map(|(l, q)| (l, q.headroom_watermark as f64)),
    );
    m.gauges(
        "priority_xoff_threshold_bytes",
        "The group's XOFF threshold now",
        lossless().map(|(l, q)| (l, q.xoff_threshold as f64)),
    );
    m.gauges(
        "priority_xon_threshold_bytes",
        "The group's XON threshold now",
        lossless().map(|(l, q)| (l, q.xon_threshold as f64)),
    );
    m.gauges(
        "priority_headroom_size_bytes",
        "The group's headroom",
        lossless().map(|(l, q)| (l, q.headroom_size as f64)),
    );
    m.gauges(
        "priority_xoff",
        "1 while the port pauses its upstream on the priority",
        lossless().map(|(l, q)| (l, f64::from(u8::from(q.xoff)))),
    );
    m.gauges(
        "priority_egress_paused",
        "1 while the link partner pauses the priority",
        lossless().map(|(l, q)| (l, f64::from(u8::from(q.egress_paused)))),
    );
    m.gauges(
        "priority_egress_queue_frames",
        "Frames waiting in the egress queue",
        prios().map(|(l, q)| (l, f64::from(q.egress_queue_frames))),
    );
    m.gauges(
        "priority_egress_queue_bytes",
        "Bytes waiting in the egress queue",
        prios().map(|(l, q)| (l, q.egress_queue_bytes as f64)),
    );
    m.gauges(
        "priority_egress_queue_watermark_bytes",
        "The most the egress queue held since the watermarks were cleared",
        prios().map(|(l, q)| (l, q.egress_queue_watermark as f64)),
    );
    m.counters(
        "priority_paused_microseconds",
        "Time the link partner kept the priority paused",
        prios().map(|(l, q)| (l, q.paused_us)),
    );
    m.counters(
        "priority_pfc_pause_transitions",
        "PFC pauses that found the priority running (pfcstat --history)",
        prios().map(|(l, q)| (l, q.pfc_history.transitions)),
    );

    let wd = || {
        ports.iter().flat_map(|p| {
            p.pfcwd.iter().map(move |w| (PrioLabels { port: p.name.clone(), priority: w.priority.get() }, w))
        })
    };
    m.counts("pfcwd", wd().map(|(l, w)| (l, w.counters.counts())));
    m.gauges(
        "pfcwd_active",
        "1 while the watchdog acts on the priority",
        wd().map(|(l, w)| (l, f64::from(u8::from(w.active)))),
    );

    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut out, &m.registry);
    out
}

/// The HTTP listener behind `--metrics` (see [`super::http`] for its limits); stops when
/// dropped.
pub struct MetricsServer {
    http: HttpServer,
}

impl MetricsServer {
    pub fn start(addr: SocketAddr, routes: Routes) -> Result<MetricsServer, ControlError> {
        Self::start_with(addr, routes, Limits::default())
    }

    pub fn start_with(addr: SocketAddr, routes: Routes, limits: Limits) -> Result<MetricsServer, ControlError> {
        // The refusals are the server's own, known only once it runs: handed to the
        // handler through a cell set right after the start.
        let refusals: Arc<std::sync::OnceLock<Arc<Refusals>>> = Arc::default();
        let seen = refusals.clone();
        let http = HttpServer::start(addr, limits, move |head: &Head| answer(head, &routes, seen.get()))
            .map_err(|e| ControlError::Metrics(addr.to_string(), e.to_string()))?;
        let _ = refusals.set(http.refusals());
        Ok(MetricsServer { http })
    }

    /// Where it listens (the port the kernel chose, if given port 0).
    pub fn addr(&self) -> SocketAddr {
        self.http.addr()
    }
}

fn answer(head: &Head, routes: &Routes, refusals: Option<&Arc<Refusals>>) -> Answer {
    let plain = |status, body: String| Answer { status, content_type: "text/plain; charset=utf-8", body };
    if head.method != "GET" || head.path != "/metrics" {
        return plain(404, "pfcswitch serves /metrics only\n".into());
    }
    match ask(Request::Stats, routes) {
        Ok(Response::Stats(s)) => {
            let refused: Vec<(Reason, u64)> = match refusals {
                Some(r) => Refusal::ALL.iter().map(|&x| (Reason(x.name()), r.get(x))).collect(),
                None => Vec::new(),
            };
            Answer { status: 200, content_type: CONTENT_TYPE, body: encode_with(&s, &refused) }
        }
        Ok(_) => plain(500, "unexpected reply\n".into()),
        Err(e) => plain(503, format!("{e}\n")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::stats::{PortStats, PrioStats, SwitchStats};
    use crate::core::Priority;
    use crate::stats::PortReport;
    use openmetrics_parser::{openmetrics::parse_openmetrics, OpenMetricsValue};

    fn snapshot() -> Stats {
        let mut p = PortStats { name: "p1".into(), link_up: true, ..Default::default() };
        p.counters.rx_frames = 42;
        p.counters.drops.lossy = 7;
        p.counters.mac_control.rejected.truncated = 2;
        p.priorities = Priority::all()
            .map(|q| PrioStats {
                priority: q,
                lossless: [3, 4].contains(&q.get()),
                xoff_threshold: 98304,
                ..Default::default()
            })
            .collect();
        p.priorities[3].counters.xoff_sent = 5;
        p.pfcwd =
            vec![crate::core::stats::WatchdogStats { priority: Priority::new(3), active: true, ..Default::default() }];
        p.pfcwd[0].counters.storms_detected = 1;
        let p2 = PortStats { name: "p2".into(), ..p.clone() };
        let ports = [p, p2].map(|engine| PortReport { engine, ..Default::default() }).into();
        let mut s = Stats {
            switch: SwitchStats { name: "sw".into(), uptime_s: 1.5, ports, ..Default::default() },
            ..Default::default()
        };
        s.stalls.cpu_wait_us = Some(2_500_000);
        s.latency.rx_ring =
            crate::core::histogram::Percentiles { count: 9, p50_us: 12.0, p99_us: 250.0, ..Default::default() };
        s
    }

    /// The value of `family`'s sample whose labels include every `(name, value)` given,
    /// read back by an OpenMetrics parser (which also checks the whole text's syntax).
    fn value(text: &str, family: &str, labels: &[(&str, &str)]) -> f64 {
        let exposition = parse_openmetrics(text).unwrap_or_else(|e| panic!("not OpenMetrics: {e:?}\n{text}"));
        let f = exposition.families.get(family).unwrap_or_else(|| panic!("no family {family}"));
        let sample = f
            .iter_samples()
            .find(|s| {
                let set = s.get_labelset().expect("labels");
                labels.iter().all(|(k, v)| set.get_label_value(k) == Some(*v))
            })
            .unwrap_or_else(|| panic!("no {family} sample with {labels:?}"));
        match &sample.value {
            OpenMetricsValue::Counter(c) => c.value.as_f64(),
            OpenMetricsValue::Gauge(g) => g.as_f64(),
            other => panic!("{family}: {other:?}"),
        }
    }

    #[test]
    fn a_snapshot_is_valid_openmetrics_with_ports_priorities_and_reasons_as_labels() {
        let text = encode(&snapshot());
        assert_eq!(value(&text, "pfcswitch_port_rx_frames", &[("port", "p1")]), 42.0);
        assert_eq!(value(&text, "pfcswitch_port_drops", &[("port", "p2"), ("reason", "lossy")]), 7.0);
        assert_eq!(value(&text, "pfcswitch_port_mac_control_rejected", &[("reason", "truncated")]), 2.0);
        assert_eq!(value(&text, "pfcswitch_priority_xoff_sent", &[("port", "p1"), ("priority", "3")]), 5.0);
        assert_eq!(value(&text, "pfcswitch_priority_xoff_threshold_bytes", &[("priority", "4")]), 98304.0);
        assert_eq!(value(&text, "pfcswitch_uptime_seconds", &[]), 1.5);
        assert_eq!(value(&text, "pfcswitch_loop_cpu_wait_seconds", &[]), 2.5);
        let rx_ring_p99 = [("stage", "rx_ring"), ("quantile", "0.99")];
        assert_eq!(value(&text, "pfcswitch_stage_wait_seconds", &rx_ring_p99), 250e-6);
        assert!(!text.contains("stage=\"engine\""), "a stage that saw no frame has no samples");
        assert_eq!(value(&text, "pfcswitch_pfcwd_storms_detected", &[("port", "p2"), ("priority", "3")]), 1.0);
        assert_eq!(value(&text, "pfcswitch_pfcwd_active", &[("port", "p1")]), 1.0);
        assert!(text.contains("pfcswitch_port_rx_frames_total{port=\"p1\"} 42"), "{text}");
        assert!(
            !text.contains("priority_xoff_threshold_bytes{port=\"p1\",priority=\"0\"}"),
            "lossy priorities have no profile"
        );
    }

    /// The engine declares each count once (`counters!`): every one is served under its
    /// field's name, with the field's doc as help, without this file naming it.
    #[test]
    fn every_count_the_engine_declares_is_served_with_its_doc_as_help() {
        use crate::core::counters::CounterKind;
        use crate::core::pfcwd::WatchdogCounters;
        use crate::core::stats::{PortCounters, PrioCounters};
        let text = encode(&snapshot());
        let declared = [
            ("port", PortCounters::FIELDS),
            ("port", MacControlCounters::FIELDS),
            ("priority", PrioCounters::FIELDS),
            ("pfcwd", WatchdogCounters::FIELDS),
        ];
        let mut served = 0;
        for (prefix, fields) in declared {
            for c in fields.iter().filter(|c| c.kind == CounterKind::Count) {
                let help = format!("# HELP pfcswitch_{prefix}_{} {}.\n", c.name, c.help());
                assert!(text.contains(&help), "{prefix} {}: no family with its doc as help\n{text}", c.name);
                served += 1;
            }
        }
        assert_eq!(served, 9 + 4 + 15 + 3);
    }

    /// The Grafana dashboard in `docs/grafana` queries the switch by name: a name it asks
    /// for that the switch does not serve would be an empty panel, found only by a user.
    #[test]
    fn every_metric_the_grafana_dashboard_queries_is_one_the_switch_serves() {
        let dashboard: serde_json::Value =
            serde_json::from_str(include_str!("../../../docs/grafana/pfcswitch.json")).expect("the dashboard is JSON");
        let served: std::collections::BTreeSet<String> = encode(&snapshot())
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.split(['{', ' ']).next())
            .map(str::to_string)
            .collect();
        let mut queries: Vec<String> = Vec::new();
        for panel in dashboard["panels"].as_array().expect("panels") {
            for t in panel["targets"].as_array().expect("targets") {
                queries.push(t["expr"].as_str().expect("a PromQL expression").to_string());
            }
        }
        for v in dashboard["templating"]["list"].as_array().expect("variables") {
            if let Some(q) = v["query"]["query"].as_str() {
                queries.push(q.to_string());
            }
        }
        let mut asked = 0;
        for q in &queries {
            let mut rest = q.as_str();
            while let Some(at) = rest.find("pfcswitch_") {
                let name: String = rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                assert!(served.contains(&name), "the dashboard asks for {name}, which the switch does not serve ({q})");
                asked += 1;
                rest = &rest[at + name.len()..];
            }
        }
        assert!(asked >= 30, "the dashboard's queries name the switch's metrics: {asked}");
    }
}
