//! The pause timeline as one picture: a row per port that was paused, a bar per pause,
//! coloured by priority — which ports pause when, over the whole fabric.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::trace::PauseTimeline;

pub(crate) const COLOURS: [RGBColor; 8] = [
    RGBColor(120, 120, 120),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
];

/// Draws the ports of `timelines` that were ever paused, over `total_ms`.
pub fn timeline(path: &Path, title: &str, timelines: &[(String, PauseTimeline)], total_ms: f64) -> Result<()> {
    draw(path, title, timelines, total_ms).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw(
    path: &Path,
    title: &str,
    timelines: &[(String, PauseTimeline)],
    total_ms: f64,
) -> Result<(), Box<dyn std::error::Error>> {
    let rows: Vec<&(String, PauseTimeline)> = timelines.iter().filter(|(_, t)| !t.is_empty()).collect();
    let height = 150 + 22 * rows.len().max(1) as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    // The legend goes under the chart, off the rows.
    let (plot, legend) = root.split_vertically(height - 30);
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&plot)
        .caption(format!("{title}: ports paused by their link partner (colour: priority)"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(140)
        .build_cartesian_2d(0f64..total_ms.max(1e-3), 0f64..n)?;
    // Row labels are drawn beside each row's middle: the axis's own labels sit where
    // plotters puts ticks, not on the rows.
    chart.configure_mesh().x_desc("simulated time (ms)").disable_y_axis().disable_y_mesh().draw()?;
    let style = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Right, VPos::Center));
    for (row, (label, t)) in rows.iter().enumerate() {
        let y = row as f64;
        let (px, py) = chart.backend_coord(&(0.0, y + 0.5));
        plot.draw(&Text::new(label.clone(), (px - 8, py), style.clone()))?;
        for (prio, list) in t.intervals.iter().enumerate() {
            let colour = COLOURS[prio];
            chart.draw_series(list.iter().map(|&(a, b)| {
                let (a, b) = (a as f64 / 1e6, (b as f64 / 1e6).min(total_ms));
                Rectangle::new([(a, y + 0.15), (b.max(a + total_ms / 2000.0), y + 0.85)], colour.filled())
            }))?;
        }
    }
    let shown: Vec<usize> =
        (0..COLOURS.len()).filter(|&p| rows.iter().any(|(_, t)| !t.intervals[p].is_empty())).collect();
    let text = TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    legend.draw(&Text::new("priority", (140, 12), text.clone()))?;
    for (i, &prio) in shown.iter().enumerate() {
        let x = 200 + 70 * i as i32;
        legend.draw(&Rectangle::new([(x, 5), (x + 14, 19)], COLOURS[prio].filled()))?;
        legend.draw(&Text::new(prio.to_string(), (x + 20, 12), text.clone()))?;
    }
    root.present()?;
    Ok(())
}

/// `path` with `-what` before its extension: `run.svg` → `run-fct.svg`.
pub fn beside(path: &Path, what: &str) -> std::path::PathBuf {
    let stem = path.file_stem().map_or_else(|| "plot".into(), |s| s.to_string_lossy().into_owned());
    path.with_file_name(format!("{stem}-{what}.svg"))
}

/// FCT slowdown by flow size: p50, p95 and p99 per size bucket, on a log scale.
pub fn fct(path: &Path, title: &str, summary: &crate::workload::FctSummary) -> Result<()> {
    draw_fct(path, title, summary).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw_fct(path: &Path, title: &str, summary: &crate::workload::FctSummary) -> Result<(), Box<dyn std::error::Error>> {
    let buckets: Vec<&crate::workload::FctBucket> = summary.buckets.iter().filter(|b| b.completed > 0).collect();
    let root = SVGBackend::new(path, (800, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = buckets.iter().map(|b| b.slowdown_p99).fold(2.0, f64::max) * 1.5;
    let n = buckets.len().max(1);
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{title}: FCT slowdown by flow size"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, (0.4f64..top).log_scale())?;
    let labels: Vec<String> = buckets.iter().map(|b| format!("{} ({})", b.sizes, b.completed)).collect();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("flow size (flows completed)")
        .y_desc("FCT / ideal FCT")
        .draw()?;
    let quantiles = [("p50", 0, COLOURS[1]), ("p95", 1, COLOURS[4]), ("p99", 2, COLOURS[3])];
    for (name, which, colour) in quantiles {
        let value = |b: &crate::workload::FctBucket| [b.slowdown_p50, b.slowdown_p95, b.slowdown_p99][which];
        let points: Vec<(f64, f64)> = buckets.iter().enumerate().map(|(i, b)| (i as f64, value(b).max(0.9))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        chart.draw_series(points.into_iter().map(|p| Circle::new(p, 4, colour.filled())))?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}

/// The series' labels in a framed box at `at`.
pub(crate) fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    at: SeriesLabelPosition,
) -> Result<(), String> {
    let mut labels = chart.configure_series_labels();
    labels.position(at).background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|e| e.to_string())
}

/// `[monitor]`'s series: the queues' bytes above, the flows' rates below, over time.
pub fn series(path: &Path, title: &str, s: &crate::monitor::Series) -> Result<()> {
    draw_series(path, title, s).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw_series(path: &Path, title: &str, s: &crate::monitor::Series) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (upper, lower) = root.split_vertically(350);
    let samples = s.queues.iter().map(|q| q.bytes.len()).chain(s.flows.iter().map(|f| f.received_gbps.len())).max();
    let end_ms = samples.unwrap_or(1) as f64 * s.every_us / 1e3;
    let t = |k: usize| (k + 1) as f64 * s.every_us / 1e3;
    let most_kib = s.queues.iter().flat_map(|q| q.bytes.iter()).copied().max().unwrap_or(1) as f64 / 1024.0;
    let mut chart = ChartBuilder::on(&upper)
        .caption(format!("{title}: egress queues"), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..end_ms.max(1e-3), 0f64..most_kib.max(1.0) * 1.1)?;
    chart.configure_mesh().x_desc("simulated time (ms)").y_desc("queued KiB").draw()?;
    for (i, q) in s.queues.iter().enumerate() {
        let colour = COLOURS[(i + 1) % COLOURS.len()];
        let points = q.bytes.iter().enumerate().map(|(k, &b)| (t(k), b as f64 / 1024.0));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(1)))?
            .label(format!("{} priority {}", q.port, q.priority))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
    }
    if !s.queues.is_empty() {
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    }
    let most_gbps = s.flows.iter().flat_map(|f| f.received_gbps.iter()).copied().fold(1.0, f64::max);
    let mut chart = ChartBuilder::on(&lower)
        .caption("flows: received (solid), DCQCN's allowed rate (thin)", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..end_ms.max(1e-3), 0f64..most_gbps * 1.1)?;
    chart.configure_mesh().x_desc("simulated time (ms)").y_desc("Gb/s").draw()?;
    for (i, f) in s.flows.iter().enumerate() {
        let colour = COLOURS[(i + 1) % COLOURS.len()];
        let points = f.received_gbps.iter().enumerate().map(|(k, &g)| (t(k), g));
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(format!("flow {}", f.flow))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        if let Some(allowed) = &f.dcqcn_gbps {
            let points = allowed.iter().enumerate().map(|(k, &g)| (t(k), g.min(most_gbps * 1.1)));
            chart.draw_series(LineSeries::new(points, colour.mix(0.6).stroke_width(1)))?;
        }
    }
    if !s.flows.is_empty() {
        chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw()?;
    }
    root.present()?;
    Ok(())
}

/// One case of [`fct_cdfs`]: pfcsim's runs' FCTs and another simulator's, each in order.
pub struct FctPanel {
    pub name: String,
    pub pfcsim: Vec<Vec<f64>>,
    pub others: Vec<Vec<f64>>,
}

/// The distribution of flow completion times, a panel per case: each pfcsim run's (one
/// per ECMP seed) and each htsim run's.
pub fn fct_cdfs(path: &Path, title: &str, panels: &[FctPanel]) -> Result<()> {
    draw_cdfs(path, title, panels).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw_cdfs(path: &Path, title: &str, panels: &[FctPanel]) -> Result<(), Box<dyn std::error::Error>> {
    let n = panels.len().max(1);
    let root = SVGBackend::new(path, (420 * n as u32, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let cdf = |v: &[f64]| -> Vec<(f64, f64)> {
        let len = v.len().max(1) as f64;
        v.iter().enumerate().map(|(i, &x)| (x, (i + 1) as f64 / len)).collect()
    };
    for (panel, area) in panels.iter().zip(root.split_evenly((1, n))) {
        let top = panel.others.iter().chain(&panel.pfcsim).flatten().fold(1.0f64, |a, &b| a.max(b)) * 1.05;
        let mut chart = ChartBuilder::on(&area)
            .caption(&panel.name, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(46)
            .build_cartesian_2d(0f64..top, 0f64..1.0)?;
        chart.configure_mesh().x_desc("FCT (µs)").y_desc("fraction of flows").x_labels(5).draw()?;
        let sides = [
            (&panel.others, COLOURS[4], 1, "htsim, each run"),
            (&panel.pfcsim, COLOURS[1], 2, "pfcsim, each ECMP seed"),
        ];
        for (runs, colour, width, label) in sides {
            for (i, run) in runs.iter().enumerate() {
                let series = chart.draw_series(LineSeries::new(cdf(run), colour.stroke_width(width)))?;
                if i == 0 {
                    series
                        .label(label)
                        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(width)));
                }
            }
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    root.present()?;
    Ok(())
}
