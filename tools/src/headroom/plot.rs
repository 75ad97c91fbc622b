//! The sweep as an SVG chart: headroom needed (measured and calculated) and lossless
//! drops against the sender's response delay.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use super::sweep::SweepReport;

pub fn svg(report: &SweepReport, path: &Path) -> Result<()> {
    draw(report, path).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

fn draw(report: &SweepReport, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 640)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(420);
    let xmax = report.checks.iter().map(|c| c.delay_quanta).max().unwrap_or(1).max(1) as f64 * 1.05;
    let ymax = report
        .checks
        .iter()
        .flat_map(|c| [c.measured_bytes, c.predicted_bytes])
        .chain(report.prio_headroom.values().copied())
        .chain([report.headroom_configured])
        .max()
        .unwrap_or(1) as f64
        * 1.1
        / 1024.0;
    let prios: Vec<String> = report.prios.iter().map(|p| p.to_string()).collect();
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!(
                "PFC headroom at {}, lossless priorities {}, {} B frames",
                report.speed,
                prios.join("+"),
                report.frame_size
            ),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
    chart
        .configure_mesh()
        .x_desc("sender response delay (quanta)")
        .y_desc("headroom (KiB)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    // One colour per priority under test: measured solid with points, calculated thin,
    // its configured headroom dashed-thin across.
    let palette = [RED, BLUE, GREEN, MAGENTA, CYAN, BLACK];
    for (i, &prio) in report.prios.iter().enumerate() {
        let colour = palette[i % palette.len()];
        let of_prio = || report.checks.iter().filter(move |c| c.prio == prio);
        let measured: Vec<(f64, f64)> =
            of_prio().map(|c| (f64::from(c.delay_quanta), c.measured_bytes as f64 / 1024.0)).collect();
        let predicted: Vec<(f64, f64)> =
            of_prio().map(|c| (f64::from(c.delay_quanta), c.predicted_bytes as f64 / 1024.0)).collect();
        chart
            .draw_series(LineSeries::new(measured.clone(), colour.stroke_width(2)))?
            .label(format!("priority {prio}: needed (measured)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
        chart.draw_series(measured.iter().map(|p| Circle::new(*p, 4, colour.filled())))?;
        chart
            .draw_series(LineSeries::new(predicted, colour.mix(0.5).stroke_width(1)))?
            .label(format!("priority {prio}: calculated"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.mix(0.5)));
        let h = report.prio_headroom.get(&prio).copied().unwrap_or(report.headroom_configured) as f64 / 1024.0;
        chart
            .draw_series(LineSeries::new(vec![(0.0, h), (xmax, h)], colour.mix(0.3).stroke_width(1)))?
            .label(format!("priority {prio}: configured headroom"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.mix(0.3)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;

    let drops: Vec<(f64, f64)> = report
        .runs
        .iter()
        .map(|r| (f64::from(r.delay_quanta), r.prios.iter().map(|p| p.drops).sum::<u64>() as f64))
        .collect();
    let dmax = drops.iter().map(|d| d.1).fold(1.0, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&bottom)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..xmax, 0f64..dmax)?;
    // Quanta and frames are whole numbers: so are their labels.
    chart
        .configure_mesh()
        .x_desc("sender response delay (quanta)")
        .y_desc("lossless drops (frames)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    chart.draw_series(drops.iter().map(|p| Circle::new(*p, 4, MAGENTA.filled())))?;
    root.present()?;
    Ok(())
}
