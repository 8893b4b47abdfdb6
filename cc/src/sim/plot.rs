//! SVG plots of a run (plotters, SVG backend only): the bottleneck queue over time, and the
//! tracked flows' rates with the goodput over time.

use plotters::prelude::*;
use std::path::Path;

use super::metrics::RunResult;

/// Plot failures (I/O or drawing), as text from the plotting library.
#[derive(Debug, thiserror::Error)]
#[error("plot {path}: {message}")]
pub struct PlotError {
    /// The file being written.
    pub path: String,
    /// What went wrong.
    pub message: String,
}

fn err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Queue (KB) against time (ms).
pub fn queue_svg(r: &RunResult, path: &Path) -> Result<(), PlotError> {
    let pts: Vec<(f64, f64)> = r
        .samples
        .iter()
        .map(|s| (s.t.as_secs_f64() * 1e3, s.queue as f64 / 1e3))
        .collect();
    let x_max = pts.last().map_or(1.0, |p| p.0).max(1e-3);
    let y_max = pts.iter().map(|p| p.1).fold(1.0, f64::max) * 1.1;
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} / {}: bottleneck queue", r.scenario, r.label),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("queue (KB)")
        .draw()
        .map_err(|e| err(path, e))?;
    chart
        .draw_series(LineSeries::new(pts, &BLUE))
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

/// Tracked flows' rates (Mb/s, log scale) and the goodput (Gb/s ×1000 on the same axis).
pub fn rates_svg(r: &RunResult, path: &Path) -> Result<(), PlotError> {
    let x_max = r
        .samples
        .last()
        .map_or(1.0, |s| s.t.as_secs_f64() * 1e3)
        .max(1e-3);
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} / {}: flow rates and goodput", r.scenario, r.label),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, (1.0..200_000.0).log_scale())
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("time (ms)")
        .y_desc("Mb/s")
        .draw()
        .map_err(|e| err(path, e))?;
    let goodput: Vec<(f64, f64)> = r
        .samples
        .iter()
        .map(|s| (s.t.as_secs_f64() * 1e3, (s.goodput_gbps * 1e3).max(1.0)))
        .collect();
    chart
        .draw_series(LineSeries::new(goodput, &BLACK))
        .map_err(|e| err(path, e))?
        .label("goodput")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK));
    for (i, flow) in r.tracked.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = r
            .samples
            .iter()
            .filter_map(|s| {
                s.rates_mbps
                    .get(i)
                    .filter(|v| v.is_finite())
                    .map(|v| (s.t.as_secs_f64() * 1e3, v.max(1.0)))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(pts, color))
            .map_err(|e| err(path, e))?
            .label(format!("flow {flow}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}
