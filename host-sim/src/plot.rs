//! SVG plots of a run (with `plotters`): IOPS and latency over virtual time, the failure and
//! the rebuild marked; the baseline (if run) drawn beside the main run on the same axes.
//! Y axes are logarithmic, since the two runs differ by orders of magnitude.

use std::path::Path;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::runner::RunResult;

/// One run to draw and its label.
#[derive(Debug, Clone, Copy)]
pub struct Series<'a> {
    /// Legend label.
    pub label: &'a str,
    /// The run.
    pub run: &'a RunResult,
}

const COLOURS: [RGBColor; 2] = [RGBColor(0x1f, 0x77, 0xb4), RGBColor(0xd6, 0x27, 0x28)];

/// Points of a line: (seconds, value).
type Points = Vec<(f64, f64)>;

/// Points (seconds, IOPS) of a run's timeline.
fn iops_points(r: &RunResult) -> Points {
    let w = r.bucket_ns as f64 / 1e9;
    r.timeline
        .iter()
        .enumerate()
        .filter(|(i, _)| (*i as u64 + 1) * r.bucket_ns <= r.duration_ns)
        .map(|(i, b)| ((i as f64 + 0.5) * w, (b.ops as f64 / w).max(1.0)))
        .collect()
}

/// Points (seconds, mean latency ms) and (seconds, max latency ms).
fn latency_points(r: &RunResult) -> (Points, Points) {
    let w = r.bucket_ns as f64 / 1e9;
    let mut mean = Vec::new();
    let mut max = Vec::new();
    for (i, b) in r.timeline.iter().enumerate() {
        if b.ops == 0 || (i as u64 + 1) * r.bucket_ns > r.duration_ns {
            continue;
        }
        let t = (i as f64 + 0.5) * w;
        mean.push((t, (b.latency_sum_ns as f64 / b.ops as f64 / 1e6).max(1e-3)));
        max.push((t, (b.latency_max_ns as f64 / 1e6).max(1e-3)));
    }
    (mean, max)
}

fn marks(r: &RunResult) -> Vec<(f64, &'static str)> {
    let mut m = Vec::new();
    if let Some(f) = r.fail_ns {
        m.push((f as f64 / 1e9, "disk fails"));
    }
    if let Some(s) = r.rebuild_start_ns {
        m.push((s as f64 / 1e9, "rebuild starts"));
    }
    if let Some(d) = r.rebuild_done_ns {
        m.push((d as f64 / 1e9, "rebuild done"));
    }
    m
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<RangedCoordf64, plotters::coord::combinators::LogCoord<f64>>,
>;

fn draw_marks(
    chart: &mut Chart<'_, '_>,
    series: &[Series<'_>],
    y: (f64, f64),
) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| e.to_string();
    for (k, s) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        for (j, (t, what)) in marks(s.run).into_iter().enumerate() {
            chart
                .draw_series(LineSeries::new(
                    vec![(t, y.0), (t, y.1)],
                    colour.mix(0.6).stroke_width(1),
                ))
                .map_err(e)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("{} {what}", s.label),
                    // One row per label (log axis: rows are factors apart).
                    (
                        t,
                        y.1 / 1.45f64.powi(i32::try_from(k * 3 + j + 1).unwrap_or(8)),
                    ),
                    ("sans-serif", 12).into_font().color(&colour),
                )))
                .map_err(e)?;
        }
    }
    Ok(())
}

/// Writes the plot of `series` (one or two runs) to `path` as SVG, titled `title`.
pub fn write_svg(path: &Path, title: &str, series: &[Series<'_>]) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<_>| format!("drawing {}: {e}", path.display());
    let root = SVGBackend::new(path, (1100, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(e)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(e)?;
    let (top, bottom) = root.split_vertically(400);
    let t_max = series
        .iter()
        .map(|s| s.run.duration_ns as f64 / 1e9)
        .fold(0.1, f64::max);

    // IOPS.
    let pts: Vec<Vec<(f64, f64)>> = series.iter().map(|s| iops_points(s.run)).collect();
    let y_max = pts.iter().flatten().map(|p| p.1).fold(10.0, f64::max) * 3.0;
    let mut chart = ChartBuilder::on(&top)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .caption(
            "IOPS (reads + writes per virtual second)",
            ("sans-serif", 16),
        )
        .build_cartesian_2d(0.0..t_max, (1.0..y_max).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc("IOPS")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(e)?;
    for (k, (s, p)) in series.iter().zip(&pts).enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(p.clone(), colour.stroke_width(2)))
            .map_err(e)?
            .label(s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
    }
    draw_marks(&mut chart, series, (1.0, y_max))?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(e)?;

    // Latency.
    let lat: Vec<_> = series.iter().map(|s| latency_points(s.run)).collect();
    let l_max = lat
        .iter()
        .flat_map(|(_, m)| m.iter())
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 8.0;
    let l_min = lat
        .iter()
        .flat_map(|(m, _)| m.iter())
        .map(|p| p.1)
        .fold(f64::INFINITY, f64::min)
        .clamp(1e-3, 1.0)
        / 2.0;
    let mut chart = ChartBuilder::on(&bottom)
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .caption(
            "latency per bucket: mean (solid), max (thin), ms of virtual time",
            ("sans-serif", 16),
        )
        .build_cartesian_2d(0.0..t_max, (l_min..l_max).log_scale())
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("virtual time (s)")
        .y_desc("latency (ms)")
        .y_label_formatter(&|v| format!("{v}"))
        .draw()
        .map_err(e)?;
    for (k, (s, (mean, max))) in series.iter().zip(&lat).enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(mean.clone(), colour.stroke_width(2)))
            .map_err(e)?
            .label(format!("{} mean", s.label))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
        chart
            .draw_series(LineSeries::new(
                max.clone(),
                colour.mix(0.5).stroke_width(1),
            ))
            .map_err(e)?;
    }
    draw_marks(&mut chart, series, (l_min, l_max))?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)?;
    Ok(())
}
