//! Text reports of the generator and the sink.

use std::fmt::Write;

use pfcswitch_table::Table;

use crate::traffic::gen::GenReport;
use crate::traffic::latency::us3;
use crate::traffic::sink::SinkReport;

pub fn gen_text(r: &GenReport) -> String {
    let mut out = format!("sent {} frames in {:.3} s ({:.0} frames/s)\n", r.sent, r.elapsed_s, r.pps);
    let mut t = Table::new(&["flow", "prio", "sent", "bytes"]);
    for f in &r.flows {
        t.row(vec![f.flow.to_string(), f.priority.to_string(), f.sent.to_string(), f.bytes.to_string()]);
    }
    out += &t.render();
    let p = &r.pauses;
    if p.pfc_frames + p.pause_frames > 0 {
        let _ = writeln!(out, "received {} PFC and {} PAUSE frames", p.pfc_frames, p.pause_frames);
        for prio in 0..8 {
            if p.xoff[prio] + p.xon[prio] > 0 {
                let _ = writeln!(
                    out,
                    "  priority {prio}: {} pauses, {} resumes, paused {} µs",
                    p.xoff[prio], p.xon[prio], r.paused_us[prio]
                );
            }
        }
    }
    for d in &r.dcqcn {
        // The rate over time, as the mean of each tenth of the run.
        let tenth = d.samples.len().div_ceil(10).max(1);
        let means: Vec<String> = d
            .samples
            .chunks(tenth)
            .map(|c| format!("{:.1}", c.iter().map(|s| s.1).sum::<f64>() / c.len() as f64))
            .collect();
        let _ = writeln!(
            out,
            "DCQCN flow {}: {} CNPs, {} cuts, rate {:.1} of {:.1} Mb/s at the end; by tenths of the run: {}",
            d.flow,
            d.cnps,
            d.cuts,
            d.rate_mbps,
            d.line_mbps,
            means.join(" ")
        );
    }
    if r.cnps_unknown > 0 {
        let _ = writeln!(out, "{} CNPs for no flow of this generator", r.cnps_unknown);
    }
    out
}

pub fn sink_text(r: &SinkReport) -> String {
    let mut out =
        format!("received {} test frames in {:.3} s ({} other frames)\n", r.received, r.elapsed_s, r.other_frames);
    if r.untracked_frames > 0 {
        out += &format!(
            "{} test frames not followed (more than {} flows, or sequence numbers too far apart)\n",
            r.untracked_frames,
            crate::traffic::rxstats::MAX_FLOWS
        );
    }
    let mut t = Table::new(&[
        "flow",
        "vlan",
        "pcp",
        "dscp",
        "received",
        "lost",
        "reordered",
        "duplicates",
        "CE",
        "frames/s",
        "lat p50 µs",
        "p99",
        "p99.9",
        "max",
    ]);
    for f in &r.flows {
        t.row(vec![
            f.flow.to_string(),
            f.vlan.map_or("-".into(), |v| v.to_string()),
            f.pcp.map_or("-".into(), |p| p.to_string()),
            f.dscp.to_string(),
            f.received.to_string(),
            f.lost.to_string(),
            f.reordered.to_string(),
            f.duplicates.to_string(),
            f.ce.to_string(),
            format!("{:.0}", f.pps),
            us3(f.latency.p50_us),
            us3(f.latency.p99_us),
            us3(f.latency.p999_us),
            us3(f.latency.max_us),
        ]);
    }
    out += &t.render();
    let m = &r.mac_control;
    if m.pfc + m.pause + m.invalid > 0 {
        let _ = writeln!(out, "MAC control frames: {} PFC, {} PAUSE, {} invalid", m.pfc, m.pause, m.invalid);
    }
    if r.socket_dropped > 0 {
        let _ =
            writeln!(out, "the kernel dropped {} frames before the socket (ring full / no buffers)", r.socket_dropped);
    }
    if r.cnps_sent + r.cnps_unsent > 0 {
        let _ = writeln!(out, "CNPs sent for marked frames: {} ({} could not be sent)", r.cnps_sent, r.cnps_unsent);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::rxstats::FlowReport;

    #[test]
    fn sink_table_columns_line_up() {
        let r = SinkReport {
            flows: vec![FlowReport {
                flow: 3,
                received: 10,
                vlan: Some(100),
                pcp: Some(5),
                dscp: 0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = sink_text(&r);
        let lines: Vec<&str> = text.lines().collect();
        let header: Vec<&str> = lines[1].split_whitespace().collect();
        let row: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(header.len(), row.len() + 2, "{text}"); // "frames/s" and "lat p50 µs" are one header cell each
        assert_eq!(&row[..5], &["3", "100", "5", "0", "10"]);
    }
}
