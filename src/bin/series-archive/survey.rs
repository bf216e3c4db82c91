//! `survey` and `fold`: budgeted buckets and statistics, printed, as JSON or CSV, or drawn.

use crate::{reading_within, Failure};
use plotters::prelude::*;
use series_archive::archive::Survey;
use series_archive::Aggregate;
use std::ops::Bound;
use std::path::Path;

fn bounds(from: Option<u64>, to: Option<u64>) -> Result<(Bound<u64>, Bound<u64>), Failure> {
    if let (Some(f), Some(t)) = (from, to) {
        if t <= f {
            return Err(
                format!("--to {t} is not above --from {f}; the axis range is [from, to)").into(),
            );
        }
    }
    Ok((
        from.map_or(Bound::Unbounded, Bound::Included),
        to.map_or(Bound::Unbounded, Bound::Excluded),
    ))
}

#[allow(clippy::too_many_arguments)]
pub fn survey(
    archive: &Path,
    stream: &str,
    track: &[String],
    from: Option<u64>,
    to: Option<u64>,
    budget: usize,
    json: bool,
    csv: bool,
    plot: Option<&Path>,
) -> Result<(), Failure> {
    let (start, end) = bounds(from, to)?;
    if let Some(path) = plot {
        // A plot is redrawn often: replacing one is allowed, landing in the archive is not.
        crate::output::check_target(archive, path, true)?;
    }
    let s = reading_within(archive, stream, track, |a| {
        crate::note_unknown_track(a, stream, track);
        a.survey(stream, track, start, end, budget)
    })?;
    if json {
        crate::output::json(&s)?;
    } else if csv {
        out!("field,first_axis,first,last_axis,last,min_axis,min,max_axis,max,count,sum,sum_sq");
        for b in &s.buckets {
            out!(
                "{},{},{},{},{},{},{},{},{},{},{},{}",
                s.fields[b.field as usize],
                b.first.axis,
                b.first.value,
                b.last.axis,
                b.last.value,
                b.min.axis,
                b.min.value,
                b.max.axis,
                b.max.value,
                b.count,
                b.sum,
                b.sum_sq
            );
        }
    } else {
        describe(&s);
    }
    if let Some(path) = plot {
        draw(&s, path)?;
        eprintln!("drew {} bucket(s) to {}", s.buckets.len(), path.display());
    }
    Ok(())
}

fn describe(s: &Survey) {
    match (&s.plan, &s.span) {
        (Some(p), Some([a, b])) => out!(
            "{} bucket(s) for {} field(s) under a budget of {} points ({} per field): level {} (cell width {}{}), whole cells covering axis [{a}, {b})",
            s.buckets.len(),
            s.fields.len(),
            s.budget,
            s.cells_per_field,
            p.level,
            p.cell_width,
            if p.merge > 1 { format!(", {} coarsest cells merged per bucket", p.merge) } else { String::new() }
        ),
        _ => out!("the range holds no rows"),
    }
    out!(
        "{:<12} {:>14} {:>14} {:>14} {:>14} {:>14} {:>10} {:>14}",
        "field",
        "first_axis",
        "first",
        "last",
        "min",
        "max",
        "count",
        "mean"
    );
    for b in &s.buckets {
        out!(
            "{:<12} {:>14} {:>14.6} {:>14.6} {:>14.6} {:>14.6} {:>10} {:>14.6}",
            s.fields[b.field as usize],
            b.first.axis,
            b.first.value,
            b.last.value,
            b.min.value,
            b.max.value,
            b.count,
            b.mean()
        );
    }
}

/// Draws each field's envelope: the min/max band over each bucket's cell, and the M4 line
/// through first, min, max and last in axis order.
fn draw(s: &Survey, path: &Path) -> Result<(), Failure> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if !matches!(ext.as_deref(), Some("svg" | "png")) {
        return Err(format!("{}: --plot writes .svg or .png", path.display()).into());
    }
    let (Some(plan), Some([x0, x1])) = (s.plan, s.span) else {
        return Err("nothing to draw: the range holds no rows".into());
    };
    let fields = s.fields.len().max(1);
    let mut svg = String::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (1100, 280 * fields as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| format!("plot: {e}"))?;
        for (f, panel) in root.split_evenly((fields, 1)).iter().enumerate() {
            let buckets: Vec<_> = s.buckets.iter().filter(|b| b.field as usize == f).collect();
            let lo = buckets
                .iter()
                .map(|b| b.min.value)
                .filter(|v| v.is_finite())
                .fold(f64::INFINITY, f64::min);
            let hi = buckets
                .iter()
                .map(|b| b.max.value)
                .filter(|v| v.is_finite())
                .fold(f64::NEG_INFINITY, f64::max);
            let (lo, hi) = if lo.is_finite() && hi > lo {
                (lo, hi)
            } else if lo.is_finite() {
                (lo - 1.0, lo + 1.0)
            } else {
                (0.0, 1.0)
            };
            let pad = (hi - lo) * 0.05;
            let mut chart = ChartBuilder::on(panel)
                .caption(
                    format!(
                        "{} — level {}, cell width {}, {} buckets",
                        s.fields[f],
                        plan.level,
                        plan.cell_width,
                        buckets.len()
                    ),
                    ("sans-serif", 16),
                )
                .margin(8)
                .x_label_area_size(28)
                .y_label_area_size(70)
                .build_cartesian_2d(x0 as f64..x1 as f64, (lo - pad)..(hi + pad))
                .map_err(|e| format!("plot: {e}"))?;
            chart
                .configure_mesh()
                .x_desc(s.axis.as_str())
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(|e| format!("plot: {e}"))?;
            let band = RGBColor(70, 110, 200).mix(0.25).filled();
            chart
                .draw_series(buckets.iter().map(|b| {
                    let cell = b.first.axis / plan.cell_width * plan.cell_width;
                    Rectangle::new(
                        [
                            (cell as f64, b.min.value),
                            ((cell + plan.cell_width) as f64, b.max.value),
                        ],
                        band,
                    )
                }))
                .map_err(|e| format!("plot: {e}"))?;
            let mut points = Vec::with_capacity(buckets.len() * 4);
            for b in &buckets {
                let mut four = [b.first, b.min, b.max, b.last];
                four.sort_by_key(|p| p.axis);
                points.extend(four.iter().map(|p| (p.axis as f64, p.value)));
            }
            chart
                .draw_series(LineSeries::new(
                    points,
                    RGBColor(30, 60, 150).stroke_width(1),
                ))
                .map_err(|e| format!("plot: {e}"))?;
        }
        root.present().map_err(|e| format!("plot: {e}"))?;
    }
    if ext.as_deref() == Some("svg") {
        return std::fs::write(path, svg).map_err(|e| format!("{}: {e}", path.display()).into());
    }
    let mut options = resvg::usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // plotters asks for the generic `sans-serif`; map it to a sans face this system has.
    let family = [
        "DejaVu Sans",
        "Liberation Sans",
        "Arial",
        "Noto Sans",
        "FreeSans",
    ]
    .into_iter()
    .find(|want| {
        fonts
            .faces()
            .any(|f| f.families.iter().any(|(name, _)| name == want))
    })
    .map(str::to_owned)
    .or_else(|| {
        fonts
            .faces()
            .next()
            .and_then(|f| f.families.first().map(|(n, _)| n.clone()))
    });
    match family {
        Some(family) => fonts.set_sans_serif_family(family),
        None => eprintln!(
            "note: no system font found; the PNG has no text (write .svg to keep the labels)"
        ),
    }
    let tree = resvg::usvg::Tree::from_str(&svg, &options).map_err(|e| format!("plot: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        resvg::tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("plot: empty image")?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .save_png(path)
        .map_err(|e| format!("{}: {e}", path.display()).into())
}

pub fn fold(
    archive: &Path,
    stream: &str,
    track: &[String],
    from: Option<u64>,
    to: Option<u64>,
    aggregate: Aggregate,
    json: bool,
) -> Result<(), Failure> {
    let (start, end) = bounds(from, to)?;
    let f = reading_within(archive, stream, track, |a| {
        crate::note_unknown_track(a, stream, track);
        a.fold(stream, track, start, end, aggregate)
    })?;
    if json {
        crate::output::json(&f)?;
        return Ok(());
    }
    match f.span {
        Some([a, b]) => out!("{} from {} over axis [{a}, {b})", f.kind, f.source),
        None => out!("{}: the range holds no rows", f.kind),
    }
    for a in &f.answers {
        let value = a.value.map_or("-".to_owned(), |v| v.to_string());
        out!(
            "  {:<12} {:>20}   ({} values)",
            f.fields[a.field as usize],
            value,
            a.count
        );
    }
    Ok(())
}
