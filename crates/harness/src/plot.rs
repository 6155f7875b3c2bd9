//! The report's chart: throughput against threads, one line per series, each with its linear
//! ideal (the 1-thread throughput times the thread count) dashed in the same colour.

use crate::report::Report;
use crate::HarnessError;
use plotters::prelude::*;
use std::path::Path;

/// Writes an SVG chart of `report` to `path`.
pub fn write_svg(report: &Report, path: &Path) -> Result<(), HarnessError> {
    let plot_err = |e: &dyn std::fmt::Display| HarnessError::Plot(e.to_string());
    let max_threads = report
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.threads))
        .max()
        .unwrap_or(1)
        .max(2);
    let max_ops = report
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.ops_per_sec))
        .fold(1.0, f64::max);
    let y_top = max_ops * 1.15;
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(&e))?;
    let title = format!(
        "{}: throughput vs threads ({} cpus, {} nodes)",
        report.config.workload, report.machine.cpus, report.machine.nodes
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(1f64..max_threads as f64, 0f64..y_top)
        .map_err(|e| plot_err(&e))?;
    chart
        .configure_mesh()
        .x_desc("threads (backends); dashed: linear ideal from 1 thread")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("operations per second")
        .y_label_formatter(&|v| crate::render::si(*v))
        .draw()
        .map_err(|e| plot_err(&e))?;
    for (i, s) in report.series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let pts: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (p.threads as f64, p.ops_per_sec))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| plot_err(&e))?
            .label(s.label())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| plot_err(&e))?;
        if let Some(one) = s.points.iter().find(|p| p.threads == 1) {
            // The ideal stops where it leaves the chart, so it is drawn inside the frame.
            let edge = (y_top / one.ops_per_sec).clamp(1.0, max_threads as f64);
            let ideal = [(1.0, one.ops_per_sec), (edge, edge * one.ops_per_sec)];
            chart
                .draw_series(DashedLineSeries::new(ideal, 6, 4, color.stroke_width(1)))
                .map_err(|e| plot_err(&e))?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| plot_err(&e))?;
    root.present().map_err(|e| plot_err(&e))?;
    Ok(())
}
