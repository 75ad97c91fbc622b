//! The pause timeline as one picture: a row per port that was paused, a bar per pause,
//! coloured by priority — which ports pause when, over the whole fabric.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::trace::PauseTimeline;

const COLOURS: [RGBColor; 8] = [
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
    let height = 120 + 22 * rows.len().max(1) as u32;
    let root = SVGBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(&root)
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
        root.draw(&Text::new(label.clone(), (px - 8, py), style.clone()))?;
        for (prio, list) in t.intervals.iter().enumerate() {
            let colour = COLOURS[prio];
            chart.draw_series(list.iter().map(|&(a, b)| {
                let (a, b) = (a as f64 / 1e6, (b as f64 / 1e6).min(total_ms));
                Rectangle::new([(a, y + 0.15), (b.max(a + total_ms / 2000.0), y + 0.85)], colour.filled())
            }))?;
        }
    }
    root.present()?;
    Ok(())
}
