//! Small multiples: one panel per condition, every panel with the same axes and the same
//! protocols in the same style, the legend in a band above the panels (never over data).

use super::svg::{esc, line, marker, nice_max, text, tick_label, Scale, Style};
use std::fmt::Write;

/// Width of one panel when a row is full, px.
pub const PANEL_W: f64 = 315.0;
/// Height of one panel when a row is full, px.
pub const PANEL_H: f64 = 235.0;
/// Width of a lone panel, px (fewer panels get wider, up to this).
pub const PANEL_W_MAX: f64 = 560.0;
const LEFT: f64 = 58.0;
const RIGHT: f64 = 24.0;
const TOP: f64 = 26.0;
const BOTTOM: f64 = 46.0;
const LEGEND_H: f64 = 30.0;
/// Panels per row at most.
pub const COLUMNS: usize = 4;

/// A point: a median (or one value) with its interval and the repetitions behind it.
#[derive(Clone, Debug, Default)]
pub struct Point {
    /// x in data units (for categorical axes: the level's index).
    pub x: f64,
    /// y in data units.
    pub y: f64,
    /// The interval of `y`, drawn as an error bar.
    pub ci: Option<(f64, f64)>,
    /// Every repetition's value, drawn as faint dots behind the median.
    pub reps: Vec<f64>,
    /// Tooltip text.
    pub tip: String,
    /// Whether the point gets a marker in a series drawn without markers (percentile
    /// lines mark p0, p50, p90, p99, ...).
    pub mark: bool,
}

/// One series in a panel.
#[derive(Clone, Debug)]
pub struct Series {
    /// Its label (a protocol).
    pub label: String,
    /// Its style.
    pub style: Style,
    /// Its points, by x.
    pub points: Vec<Point>,
    /// Whether the points are joined by a line (numeric and time axes only).
    pub line: bool,
    /// Whether every point gets a marker (false: only points with `mark`).
    pub markers: bool,
}

/// One panel: a condition.
#[derive(Clone, Debug, Default)]
pub struct Panel {
    /// The condition, shown above the panel.
    pub title: String,
    /// Its series.
    pub series: Vec<Series>,
}

/// The x axis shared by every panel.
#[derive(Clone, Debug)]
pub enum XAxis {
    /// Levels as categories at 0, 1, ...; series side by side within a category.
    Categorical(Vec<String>),
    /// A true linear scale from `lo` to `hi`; tick labels from `labels` when given as
    /// (value, text), else round numbers.
    Linear {
        /// Range start.
        lo: f64,
        /// Range end.
        hi: f64,
        /// Fixed ticks, if any.
        labels: Vec<(f64, String)>,
    },
}

/// A grid of panels with its legend.
#[derive(Clone, Debug)]
pub struct Grid {
    /// The x axis.
    pub x: XAxis,
    /// Label under the x axis.
    pub x_label: String,
    /// Label of the y axis.
    pub y_label: String,
    /// The panels.
    pub panels: Vec<Panel>,
    /// Legend entries: label and style, in order.
    pub legend: Vec<(String, Style)>,
}

impl Grid {
    /// Draws the grid as one SVG element.
    pub fn render(&self, id: &str) -> String {
        let n = self.panels.len().max(1);
        let cols = n.min(COLUMNS);
        let rows = n.div_ceil(cols);
        let (pw, ph) = self.panel_size();
        let width = cols as f64 * pw;
        let height = LEGEND_H + rows as f64 * ph;
        let mut o = String::new();
        let _ = write!(
            o,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" id=\"{}\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"system-ui,sans-serif\">",
            esc(id)
        );
        self.legend_svg(&mut o, width);
        for (i, p) in self.panels.iter().enumerate() {
            let x0 = (i % cols) as f64 * pw;
            let y0 = LEGEND_H + (i / cols) as f64 * ph;
            self.panel_svg(&mut o, p, x0, y0);
        }
        o.push_str("</svg>");
        o
    }

    /// Panel width and height: full rows use [`PANEL_W`] × [`PANEL_H`]; one to three
    /// panels share about four panels' width, each at most [`PANEL_W_MAX`] wide.
    fn panel_size(&self) -> (f64, f64) {
        let n = self.panels.len().clamp(1, COLUMNS) as f64;
        let w = (COLUMNS as f64 * PANEL_W / n).clamp(PANEL_W, PANEL_W_MAX);
        (w, PANEL_H + (w - PANEL_W) * 0.25)
    }

    fn legend_svg(&self, o: &mut String, width: f64) {
        let _ = write!(o, "<g class=\"legend\"><rect x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{:.0}\" fill=\"none\"/>", LEGEND_H - 6.0);
        let mut x = LEFT;
        for (label, style) in &self.legend {
            let y = 12.0;
            line(o, x, y, x + 22.0, y, style.colour, " stroke-width=\"2\"");
            marker(o, style.marker, x + 11.0, y, 5.0, style.colour, "");
            text(o, x + 28.0, y + 4.5, "start", 13.0, label, "");
            x += 40.0 + label.chars().count() as f64 * 7.5;
        }
        o.push_str("</g>");
    }

    fn x_scale(&self, x0: f64) -> Scale {
        let (lo, hi) = match &self.x {
            XAxis::Categorical(levels) => (-0.5, levels.len().max(1) as f64 - 0.5),
            XAxis::Linear { lo, hi, .. } => (*lo, *hi),
        };
        Scale {
            lo,
            hi,
            p0: x0 + LEFT,
            p1: x0 + self.panel_size().0 - RIGHT,
        }
    }

    fn panel_svg(&self, o: &mut String, p: &Panel, x0: f64, y0: f64) {
        let xs = self.x_scale(x0);
        let y_max = p
            .series
            .iter()
            .flat_map(|s| s.points.iter())
            .flat_map(|pt| {
                let mut v = vec![pt.y];
                if let Some((_, hi)) = pt.ci {
                    v.push(hi);
                }
                v.extend(pt.reps.iter().copied());
                v
            })
            .filter(|v| v.is_finite())
            .fold(0.0_f64, f64::max);
        let ys = Scale {
            lo: 0.0,
            hi: nice_max(y_max),
            p0: y0 + self.panel_size().1 - BOTTOM,
            p1: y0 + TOP,
        };
        let (left, right, top, bottom) = (xs.p0, xs.p1, ys.p1, ys.p0);
        o.push_str("<g class=\"panel\">");
        text(
            o,
            (left + right) / 2.0,
            y0 + 16.0,
            "middle",
            12.0,
            &p.title,
            " font-weight=\"600\"",
        );
        let _ = write!(
            o,
            "<g class=\"plot\"><rect class=\"plot-area\" x=\"{left:.1}\" y=\"{top:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#fafafa\" stroke=\"#bbb\"/>",
            right - left,
            bottom - top
        );
        for t in ys.ticks(5) {
            let y = ys.at(t);
            line(o, left, y, right, y, "#e4e4e4", "");
            text(o, left - 5.0, y + 4.0, "end", 11.0, &tick_label(t), "");
        }
        self.x_ticks(o, &xs, top, bottom);
        let k = p.series.len();
        for (si, s) in p.series.iter().enumerate() {
            let dx = self.offset(si, k, &xs);
            series_svg(o, s, &xs, &ys, dx);
        }
        o.push_str("</g>");
        text(
            o,
            (left + right) / 2.0,
            bottom + 36.0,
            "middle",
            12.0,
            &self.x_label,
            "",
        );
        let yl = (top + bottom) / 2.0;
        let _ = write!(
            o,
            "<text x=\"{:.1}\" y=\"{yl:.1}\" text-anchor=\"middle\" font-size=\"11\" transform=\"rotate(-90 {:.1} {yl:.1})\">{}</text>",
            x0 + 13.0,
            x0 + 13.0,
            esc(&self.y_label)
        );
        o.push_str("</g>");
    }

    fn x_ticks(&self, o: &mut String, xs: &Scale, top: f64, bottom: f64) {
        let ticks: Vec<(f64, String)> = match &self.x {
            XAxis::Categorical(levels) => levels
                .iter()
                .enumerate()
                .map(|(i, l)| (i as f64, l.clone()))
                .collect(),
            XAxis::Linear { labels, .. } if !labels.is_empty() => labels.clone(),
            XAxis::Linear { .. } => xs
                .ticks(5)
                .into_iter()
                .map(|t| (t, tick_label(t)))
                .collect(),
        };
        for (v, label) in ticks {
            let x = xs.at(v);
            line(o, x, bottom, x, bottom + 4.0, "#666", "");
            if matches!(self.x, XAxis::Linear { .. }) {
                line(o, x, top, x, bottom, "#e4e4e4", " class=\"vgrid\"");
            }
            text(o, x, bottom + 17.0, "middle", 11.0, &label, "");
        }
    }

    /// Sideways offset in px of series `i` of `k`, so error bars in one category (or at one
    /// x of a numeric axis) do not hide each other.
    fn offset(&self, i: usize, k: usize, xs: &Scale) -> f64 {
        if k <= 1 {
            return 0.0;
        }
        let centre = i as f64 - (k as f64 - 1.0) / 2.0;
        match &self.x {
            XAxis::Categorical(levels) => {
                let group = (xs.p1 - xs.p0) / levels.len().max(1) as f64;
                centre * (group * 0.7 / k as f64).min(16.0)
            }
            XAxis::Linear { .. } => centre * 3.0,
        }
    }
}

/// One series: faint repetitions, the line, error bars, then the medians' markers.
fn series_svg(o: &mut String, s: &Series, xs: &Scale, ys: &Scale, dx: f64) {
    let c = s.style.colour;
    let _ = write!(o, "<g class=\"series\" data-label=\"{}\">", esc(&s.label));
    for pt in &s.points {
        let x = xs.at(pt.x) + dx;
        for (j, r) in pt.reps.iter().enumerate() {
            let jitter = (j % 3) as f64 - 1.0;
            let _ = write!(
                o,
                "<circle class=\"rep\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.2\" fill=\"{c}\" fill-opacity=\"0.28\"/>",
                x + jitter * 1.5,
                ys.at(*r)
            );
        }
    }
    if s.line && s.points.len() > 1 {
        let d: Vec<String> = s
            .points
            .iter()
            .enumerate()
            .map(|(i, pt)| {
                format!(
                    "{}{:.1} {:.1}",
                    if i == 0 { 'M' } else { 'L' },
                    xs.at(pt.x) + dx,
                    ys.at(pt.y)
                )
            })
            .collect();
        let _ = write!(
            o,
            "<path d=\"{}\" fill=\"none\" stroke=\"{c}\" stroke-width=\"2\"/>",
            d.join("")
        );
    }
    for pt in &s.points {
        let x = xs.at(pt.x) + dx;
        if let Some((lo, hi)) = pt.ci {
            let (a, b) = (ys.at(lo), ys.at(hi));
            line(o, x, a, x, b, c, " stroke-width=\"1.5\"");
            line(o, x - 4.0, a, x + 4.0, a, c, " stroke-width=\"1.5\"");
            line(o, x - 4.0, b, x + 4.0, b, c, " stroke-width=\"1.5\"");
        }
        if s.markers || pt.ci.is_some() || pt.mark {
            let _ = write!(o, "<g><title>{}</title>", esc(&pt.tip));
            marker(
                o,
                s.style.marker,
                x,
                ys.at(pt.y),
                4.5,
                c,
                " stroke=\"#fff\" stroke-width=\"0.8\"",
            );
            o.push_str("</g>");
        }
    }
    o.push_str("</g>");
}
