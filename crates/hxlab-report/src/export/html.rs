//! report.html: one self-contained file (inline CSS and SVG, no scripts, nothing fetched)
//! with the tables and one chart per swept factor, drawn with plotters' SVG backend, error
//! bars showing each median's 95 % interval.

use super::{cc_text, figure_text, fixed_line, negotiated_text, swept_line, Exporter};
use crate::summary::{fmt_num, ChartData, Report};
use crate::ReportError;
use plotters::prelude::*;
use std::fmt::Write;

/// HTML report with SVG charts (`report.html`).
pub struct HtmlExporter;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
td:first-child,th:first-child{text-align:left}tr.published td{color:#666;font-style:italic;background:#f6f6f6}\
.warn{color:#a40}figure{margin:1.5em 0}code{background:#f2f2f2;padding:0 3px}";

/// Draws one chart as an SVG string.
pub fn chart_svg(c: &ChartData) -> Result<String, ReportError> {
    let fail = |e: String| ReportError::Chart {
        title: c.title.clone(),
        reason: e,
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (760, 420)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| fail(e.to_string()))?;
        let y_max = c
            .series
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.3.max(p.1)))
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max);
        let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
        let n = c.levels.len().max(1);
        let levels = c.levels.clone();
        let mut chart = ChartBuilder::on(&root)
            .caption(&c.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_max)
            .map_err(|e| fail(e.to_string()))?;
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    levels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc(c.factor.as_str())
            .y_desc(c.y_label.as_str())
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        let count = c.series.len().max(1) as f64;
        for (si, (label, points)) in c.series.iter().enumerate() {
            let color = Palette99::pick(si).to_rgba();
            // Spread the series a little sideways so error bars do not hide each other.
            let dx = (si as f64 - (count - 1.0) / 2.0) * 0.25 / count;
            let line: Vec<(f64, f64)> = points.iter().map(|p| (p.0 as f64 + dx, p.1)).collect();
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))
                .map_err(|e| fail(e.to_string()))?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                });
            chart
                .draw_series(points.iter().map(|p| {
                    ErrorBar::new_vertical(p.0 as f64 + dx, p.2, p.1, p.3, color.stroke_width(1), 8)
                }))
                .map_err(|e| fail(e.to_string()))?;
            chart
                .draw_series(
                    line.iter()
                        .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
                )
                .map_err(|e| fail(e.to_string()))?;
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .position(SeriesLabelPosition::UpperLeft)
            .draw()
            .map_err(|e| fail(e.to_string()))?;
        root.present().map_err(|e| fail(e.to_string()))?;
    }
    Ok(svg)
}

impl Exporter for HtmlExporter {
    fn file_name(&self) -> Option<&'static str> {
        Some("report.html")
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let mut o = String::new();
        write_heading(&mut o, r);
        write_tables(&mut o, r);
        for c in &r.charts {
            let _ = writeln!(o, "<figure>{}<figcaption>{} (error bars: 95 % CI of the median)</figcaption></figure>", chart_svg(c)?, esc(&c.title));
        }
        write_comparisons(&mut o, r);
        write_list(&mut o, "Warnings", " class=\"warn\"", &r.warnings);
        write_list(&mut o, "Notes", "", &r.meta.notes);
        write_cells(&mut o, r);
        let _ = writeln!(o, "</body></html>");
        Ok(o)
    }
}

/// The document head, title, description, what was swept and fixed, and how to read it.
fn write_heading(o: &mut String, r: &Report) {
    let m = &r.meta;
    let title = if m.title.is_empty() {
        m.name.clone()
    } else {
        m.title.clone()
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    if !m.description.is_empty() {
        let _ = writeln!(o, "<p>{}</p>", esc(m.description.trim()));
    }
    let _ = writeln!(
        o,
        "<ul><li>experiment <code>{}</code>, metric: {}, {} repetitions per cell</li><li>swept: {}</li><li>fixed: {}</li></ul>",
        esc(&m.name),
        esc(r.metric.label()),
        m.repetitions,
        esc(&swept_line(r)),
        esc(&fixed_line(r))
    );
    let _ = writeln!(o, "<p>Medians over repetitions with their 95 % bootstrap interval; grey italic rows are the published figures; <span class=\"warn\">!</span> marks a figure with a warning.</p>");
}

/// Each table under its heading, published rows and figures with warnings marked by class.
fn write_tables(o: &mut String, r: &Report) {
    for t in &r.tables {
        let _ = writeln!(
            o,
            "<h2>{}</h2>\n<table><tr><th>{}</th>",
            esc(&t.title),
            esc(&t.corner)
        );
        for c in &t.columns {
            let _ = write!(o, "<th>{}</th>", esc(c));
        }
        let _ = writeln!(o, "</tr>");
        for row in &t.rows {
            let _ = write!(
                o,
                "<tr{}><td>{}</td>",
                if row.published {
                    " class=\"published\""
                } else {
                    ""
                },
                esc(&row.label)
            );
            for f in &row.cells {
                let warn = f.as_ref().is_some_and(|f| f.warn);
                let _ = write!(
                    o,
                    "<td{}>{}</td>",
                    if warn { " class=\"warn\"" } else { "" },
                    esc(&figure_text(f, !row.published))
                );
            }
            let _ = writeln!(o, "</tr>");
        }
        let _ = writeln!(o, "</table>");
    }
}

/// The comparisons section, one item per comparison with its p-value (none: nothing).
fn write_comparisons(o: &mut String, r: &Report) {
    if r.comparisons.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>Comparisons</h2><ul>");
    for c in &r.comparisons {
        let cond = if c.condition.is_empty() {
            String::new()
        } else {
            format!("{}: ", c.condition)
        };
        let _ = writeln!(
            o,
            "<li>{}{} (p = {:.3})</li>",
            esc(&cond),
            esc(&c.sentence()),
            c.p_value
        );
    }
    let _ = writeln!(o, "</ul>");
}

/// A section titled `title` with one `<li{li_attrs}>` per item (no items: no section).
fn write_list(o: &mut String, title: &str, li_attrs: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(o, "<h2>{title}</h2><ul>");
    for item in items {
        let _ = writeln!(o, "<li{li_attrs}>{}</li>", esc(item));
    }
    let _ = writeln!(o, "</ul>");
}

/// The cells table: one row per cell with its statistics, or why it was skipped.
fn write_cells(o: &mut String, r: &Report) {
    let _ = writeln!(o, "<h2>Cells</h2><table><tr><th>cell</th><th>n</th><th>median</th><th>mean</th><th>stdev</th><th>95 % CI</th><th>server CPU µs/req</th><th>negotiated</th><th>cc server/client (read back)</th></tr>");
    for c in &r.cells {
        let _ = writeln!(
            o,
            "<tr><td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}–{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.key),
            c.values.len(),
            c.repetitions,
            fmt_num(c.median),
            fmt_num(c.mean),
            fmt_num(c.stdev),
            fmt_num(c.ci.0),
            fmt_num(c.ci.1),
            c.secondary.get("server_cpu_us_per_req").map(|v| fmt_num(*v)).unwrap_or_else(|| "—".into()),
            esc(&c.skipped.as_ref().map(|s| format!("skipped: {s}")).unwrap_or_else(|| negotiated_text(&c.negotiated))),
            esc(&cc_text(&c.server_cc, &c.client_cc))
        );
    }
    let _ = writeln!(o, "</table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_is_an_svg_with_error_bars_and_labels() {
        let c = ChartData {
            title: "time by delay".into(),
            factor: "delay".into(),
            levels: vec!["0ms".into(), "10ms".into(), "20ms".into()],
            y_label: "s".into(),
            series: vec![
                (
                    "h1".into(),
                    vec![
                        (0, 0.38, 0.36, 0.40),
                        (1, 0.51, 0.5, 0.52),
                        (2, 0.62, 0.6, 0.64),
                    ],
                ),
                (
                    "h2".into(),
                    vec![(0, 0.48, 0.47, 0.49), (2, 0.49, 0.48, 0.5)],
                ),
            ],
        };
        let svg = chart_svg(&c).expect("chart");
        assert!(svg.starts_with("<svg"), "{}", &svg[..50.min(svg.len())]);
        assert!(svg.contains("10ms") && svg.contains("h2") && svg.contains("time by delay"));
        assert!(svg.matches("<line").count() + svg.matches("<polyline").count() >= 5);
    }
}
