//! The report's chart (SVG): throughput, latency at each DUT's own rate, and p99 by load.

use super::*;

/// The equal-load trials' p99 against the load, a line per DUT and size (labelled with
/// the size at its end), on a logarithmic scale: tails differ by orders of magnitude.
pub(super) fn plot_by_load<DB: DrawingBackend>(
    r: &Report,
    area: &DrawingArea<DB, plotters::coord::Shift>,
    duts: &[Dut],
    palette: &[RGBColor],
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let p99s = r.results.iter().flat_map(|s| s.equal_load.iter().map(|p| p.trial.latency.p99_us));
    let ymax = p99s.clone().fold(10.0, f64::max) * 2.0;
    let ymin = p99s.fold(ymax, f64::min).clamp(1.0, 10.0) / 2.0;
    let mut chart = ChartBuilder::on(area)
        .caption("one-way latency at equal offered loads (p99)", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..100f64, (ymin..ymax).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("offered load (% of the lowest zero-loss rate)")
        .y_desc("µs")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()?;
    for (i, &dut) in duts.iter().enumerate() {
        let colour = palette[i % palette.len()];
        for s in r.results.iter().filter(|s| s.dut == dut && !s.equal_load.is_empty()) {
            let points: Vec<(f64, f64)> =
                s.equal_load.iter().map(|p| (p.share * 100.0, p.trial.latency.p99_us.max(ymin))).collect();
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, colour.filled())))?;
            if let Some(&(x, y)) = points.last() {
                chart.draw_series(std::iter::once(Text::new(
                    format!("{} B", s.size),
                    (x + 1.5, y),
                    ("sans-serif", 12),
                )))?;
            }
        }
    }
    Ok(())
}

pub(super) fn plot(r: &Report, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1000, 1080)).into_drawing_area();
    root.fill(&WHITE)?;
    // The legend gets a column of its own: inside the plot it covered a line.
    let (plots, legend) = root.split_horizontally(860);
    let (top, rest) = plots.split_vertically(360);
    let (bottom, by_load) = rest.split_vertically(360);
    let xmax = r.results.iter().map(|s| s.size).max().unwrap_or(1518) as f64 * 1.05;
    let duts: Vec<Dut> = {
        let mut d: Vec<Dut> = r.results.iter().map(|s| s.dut).collect();
        d.sort_by_key(|d| d.as_str());
        d.dedup();
        d
    };
    let palette = [RED, BLUE, GREEN, MAGENTA];
    let series = |dut: Dut, y: fn(&SizeResult) -> f64| -> Vec<(f64, f64)> {
        r.results.iter().filter(|s| s.dut == dut).map(|s| (s.size as f64, y(s))).collect()
    };
    for (area, title, y_desc, y) in [
        (
            &top,
            "RFC 2544 throughput (zero loss)",
            "frames/s (thousands)",
            (|s: &SizeResult| s.throughput_fps / 1e3) as fn(&SizeResult) -> f64,
        ),
        (&bottom, "one-way latency at the throughput rate (p50)", "µs", |s: &SizeResult| s.latency.p50_us),
    ] {
        let ymax = r.results.iter().map(y).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;
        chart
            .configure_mesh()
            .x_desc("frame size (bytes)")
            .y_desc(y_desc)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0}"))
            .draw()?;
        for (i, &dut) in duts.iter().enumerate() {
            let colour = palette[i % palette.len()];
            let points = series(dut, y);
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            chart.draw_series(points.iter().map(|p| Circle::new(*p, 4, colour.filled())))?;
        }
    }
    plot_by_load(r, &by_load, &duts, &palette)?;
    for (i, &dut) in duts.iter().enumerate() {
        let colour = palette[i % palette.len()];
        let y = 60 + 24 * i as i32;
        legend.draw(&PathElement::new(vec![(8, y), (36, y)], colour.stroke_width(3)))?;
        legend.draw(&Circle::new((22, y), 4, colour.filled()))?;
        legend.draw(&Text::new(dut.as_str(), (44, y - 7), ("sans-serif", 15)))?;
    }
    root.present()?;
    Ok(())
}
