//! A page load drawn as a waterfall: hand-written SVG, one row per resource in request order,
//! one fixed colour per phase (the Okabe–Ito palette, readable with every common colour-vision
//! deficiency), the page's milestones as dashed lines, exact figures in tooltips. The legend
//! sits above the plot, never over a bar. [`report_section`] gives the HTML report its
//! waterfalls: one per browser cell, the repetition with the median load time.

use crate::Record;
use hxlab_core::waterfall::{Phase, Span, Waterfall, WaterfallRow};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Width of the whole drawing, px.
const WIDTH: f64 = 1200.0;
/// Width of the left column (path, protocol and connection), px.
const LABEL_W: f64 = 380.0;
/// Left and right edges of the time axis, px.
const PLOT_X0: f64 = LABEL_W + 12.0;
const PLOT_X1: f64 = WIDTH - 28.0;
/// Height of one resource row, and of the bar in it, px.
const ROW_H: f64 = 18.0;
const BAR_H: f64 = 10.0;
/// Where the legend starts (below the title), the height of one legend line, px.
const LEGEND_TOP: f64 = 34.0;
const LEGEND_LINE: f64 = 18.0;
/// Lanes for the milestone labels, so close milestones do not print over each other.
const MARK_LANES: usize = 3;
const LANE_H: f64 = 13.0;
/// Rough width of one character of 11 px sans-serif, px (legend layout only).
const CHAR_W: f64 = 6.2;
/// Longest left-column path, characters.
const LABEL_CHARS: usize = 46;
/// Colour of failures: text, outlines and markers.
const FAILED: &str = "#B2182B";

/// The fill of a phase: the Okabe–Ito palette, a light grey for waiting in the queue.
pub fn phase_colour(phase: Phase) -> &'static str {
    match phase {
        Phase::Queued => "#BBBBBB",
        Phase::Dns => "#009E73",
        Phase::Connect => "#E69F00",
        Phase::Tls => "#CC79A7",
        Phase::Request => "#F0E442",
        Phase::Wait => "#56B4E9",
        Phase::Download => "#0072B2",
    }
}

/// The class a phase's bars carry (`phase queued`, `phase dns`, …).
fn phase_class(phase: Phase) -> &'static str {
    match phase {
        Phase::Queued => "queued",
        Phase::Dns => "dns",
        Phase::Connect => "connect",
        Phase::Tls => "tls",
        Phase::Request => "request",
        Phase::Wait => "wait",
        Phase::Download => "download",
    }
}

/// Text made safe for SVG and HTML: markup characters escaped, control characters (which
/// XML does not allow) replaced.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// Where things go: the rows start below the legend, the milestone lanes and the axis.
struct Layout {
    /// Top of the plot group (milestone labels, axis, rows).
    plot_top: f64,
    /// Top of the first row.
    rows_top: f64,
    /// Bottom of the last row.
    rows_bottom: f64,
    /// Total height.
    height: f64,
    /// The time at the right edge, ms, and the tick step, ms.
    t_max: f64,
    step: f64,
}

impl Layout {
    fn new(w: &Waterfall, legend_lines: usize) -> Layout {
        let legend_bottom = LEGEND_TOP + legend_lines as f64 * LEGEND_LINE;
        let plot_top = legend_bottom + 12.0;
        let rows_top = plot_top + MARK_LANES as f64 * LANE_H + 20.0;
        let rows_bottom = rows_top + w.rows.len().max(1) as f64 * ROW_H;
        let (t_max, step) = axis_range(w.end_ms());
        Layout {
            plot_top,
            rows_top,
            rows_bottom,
            height: rows_bottom + 14.0,
            t_max,
            step,
        }
    }

    /// The x of time `t_ms`.
    fn x(&self, t_ms: f64) -> f64 {
        PLOT_X0 + t_ms.clamp(0.0, self.t_max) / self.t_max * (PLOT_X1 - PLOT_X0)
    }
}

/// The axis's end and tick step for times up to `end_ms`: steps of 1, 2 or 5 × 10ⁿ ms,
/// about eight ticks.
fn axis_range(end_ms: f64) -> (f64, f64) {
    let end = if end_ms.is_finite() && end_ms > 0.0 {
        end_ms
    } else {
        1.0
    };
    let raw = end / 8.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * magnitude);
    ((end / step).ceil() * step, step)
}

/// A number of ms as the tooltips and labels print it.
fn ms(v: f64) -> String {
    format!("{v:.1}")
}

/// The legend's entries: each phase, then the failure and reuse markers and the milestones.
fn legend_entries() -> Vec<(String, String)> {
    let mut entries: Vec<(String, String)> = Phase::ALL
        .iter()
        .map(|p| {
            let swatch = format!(
                r##"<rect class="swatch {}" width="12" height="10" fill="{}" stroke="#555" stroke-width="0.5"/>"##,
                phase_class(*p),
                phase_colour(*p)
            );
            (swatch, p.label().to_string())
        })
        .collect();
    entries.push((
        format!(r##"<rect width="12" height="10" fill="none" stroke="{FAILED}" stroke-dasharray="3 2"/>"##),
        "failed".into(),
    ));
    entries.push((
        r##"<text x="6" y="9" text-anchor="middle" fill="#333">↺</text>"##.into(),
        "reused connection".into(),
    ));
    entries.push((
        r##"<line x1="6" y1="-1" x2="6" y2="11" stroke="#333" stroke-dasharray="3 2"/>"##.into(),
        "milestone (TTFB, FCP, LCP, DCL, load)".into(),
    ));
    entries
}

/// Lays the legend entries out in lines across the width; returns the SVG group and the
/// number of lines.
fn legend() -> (String, usize) {
    let mut out = String::from(r##"<g class="legend">"##);
    let (mut x, mut line) = (8.0, 0usize);
    for (swatch, text) in legend_entries() {
        let w = 18.0 + text.chars().count() as f64 * CHAR_W + 14.0;
        if x + w > WIDTH - 8.0 && x > 8.0 {
            x = 8.0;
            line += 1;
        }
        let y = LEGEND_TOP + line as f64 * LEGEND_LINE;
        let _ = write!(
            out,
            r##"<g transform="translate({x:.1},{y:.1})">{swatch}<text x="18" y="9" fill="#222">{}</text></g>"##,
            escape(&text)
        );
        x += w;
    }
    out.push_str("</g>");
    (out, line + 1)
}

/// The time axis: a tick label and a faint grid line per step.
fn axis(out: &mut String, l: &Layout) {
    let label_y = l.rows_top - 6.0;
    let _ = write!(
        out,
        r##"<text class="axis-title" x="{:.1}" y="{label_y:.1}" text-anchor="end" fill="#555">ms since navigation start</text>"##,
        LABEL_W - 8.0
    );
    let decimals = if l.step < 1.0 { 1 } else { 0 };
    let ticks = (l.t_max / l.step).round() as usize;
    for i in 0..=ticks {
        let t = i as f64 * l.step;
        let x = l.x(t);
        let _ = write!(
            out,
            r##"<line class="tick" x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text class="tick-label" x="{x:.1}" y="{label_y:.1}" text-anchor="middle" fill="#555">{t:.decimals$}</text>"##,
            l.rows_top - 2.0,
            l.rows_bottom
        );
    }
}

/// The protocol and connection a row came over, e.g. `h2 #3` (`↺` when reused), then its
/// priority ([`priority_tag`]) when known.
fn connection_label(row: &WaterfallRow) -> String {
    let proto = if row.protocol.is_empty() {
        "-"
    } else {
        row.protocol.as_str()
    };
    let conn = match (row.connection_id, row.connection_reused) {
        (0, _) => proto.to_string(),
        (id, false) => format!("{proto} #{id}"),
        (id, true) => format!("{proto} #{id} ↺"),
    };
    match priority_tag(row) {
        Some(tag) => format!("{tag} {conn}"),
        None => conn,
    }
}

/// A row's priorities in a few characters: the browser's (VH, H, M, L, VL) and the
/// `priority` header it sent (`u0i` for `u=0, i`), e.g. `VH·u0i`.
fn priority_tag(row: &WaterfallRow) -> Option<String> {
    let browser = match row.priority.as_str() {
        "VeryHigh" => "VH",
        "High" => "H",
        "Medium" => "M",
        "Low" => "L",
        "VeryLow" => "VL",
        _ => "",
    };
    let header: String = row
        .priority_header
        .as_deref()
        .map(|h| {
            h.chars()
                .filter(|c| !matches!(c, ' ' | '=' | ','))
                .collect()
        })
        .unwrap_or_default();
    match (browser.is_empty(), header.is_empty()) {
        (true, true) => None,
        (false, true) => Some(browser.to_string()),
        (true, false) => Some(header),
        (false, false) => Some(format!("{browser}·{header}")),
    }
}

/// What a row's tooltip says about the resource as a whole.
fn row_summary(row: &WaterfallRow) -> String {
    let mut s = format!("{}\n{} {}", row.url, row.resource_type, row.status);
    let _ = write!(
        s,
        ", {}, connection {}{}, {} B",
        if row.protocol.is_empty() {
            "no protocol"
        } else {
            &row.protocol
        },
        row.connection_id,
        if row.connection_reused {
            " (reused)"
        } else {
            " (new)"
        },
        row.bytes
    );
    if !row.priority.is_empty() || row.priority_header.is_some() {
        let _ = write!(
            s,
            "\npriority {}{}",
            if row.priority.is_empty() {
                "?"
            } else {
                &row.priority
            },
            row.priority_header
                .as_deref()
                .map(|h| format!(", sent priority: {h}"))
                .unwrap_or_default()
        );
    }
    if let Some(t) = row.starved_ms.filter(|t| *t > 0.0) {
        let _ = write!(
            s,
            "\nwaited {} ms for its first byte while others were sent",
            ms(t)
        );
    }
    let _ = write!(s, "\nissued at {} ms", ms(row.start_ms));
    if let Some(end) = row.end_ms {
        let _ = write!(
            s,
            ", done at {} ms ({} ms)",
            ms(end),
            ms(end - row.start_ms)
        );
    }
    if let Some(e) = &row.error {
        let _ = write!(s, "\nfailed: {e}");
    } else if row.status >= 400 {
        s.push_str("\nfailed: HTTP error status");
    }
    s
}

/// One resource: its stripe, left-column text, phase bars and failure marker.
fn row_svg(out: &mut String, l: &Layout, i: usize, row: &WaterfallRow) {
    let top = l.rows_top + i as f64 * ROW_H;
    let text_y = top + 13.0;
    let bar_y = top + (ROW_H - BAR_H) / 2.0;
    let failed = row.failed();
    let _ = write!(
        out,
        r##"<g class="row{}"><title>{}</title>"##,
        if failed { " failed" } else { "" },
        escape(&row_summary(row))
    );
    let colour = if failed { FAILED } else { "#222" };
    let prefix = if failed { "✕ " } else { "" };
    let label: String = if row.label.chars().count() > LABEL_CHARS {
        row.label
            .chars()
            .take(LABEL_CHARS - 1)
            .chain(['…'])
            .collect()
    } else {
        row.label.clone()
    };
    let _ = write!(
        out,
        r##"<text class="label" x="8" y="{text_y:.1}" fill="{colour}">{}{}</text>"##,
        prefix,
        escape(&label)
    );
    let weight = if row.connection_reused {
        "normal"
    } else {
        "bold"
    };
    let _ = write!(
        out,
        r##"<text class="conn" x="{:.1}" y="{text_y:.1}" text-anchor="end" font-weight="{weight}" fill="{}">{}</text>"##,
        LABEL_W - 8.0,
        if row.connection_reused {
            "#666"
        } else {
            "#222"
        },
        escape(&connection_label(row))
    );
    for (phase, span) in row.phases.present() {
        phase_rect(out, l, bar_y, phase, span);
    }
    if failed || row.phases.is_empty() {
        outline(out, l, bar_y, row, failed);
    }
    out.push_str("</g>");
}

/// One phase's bar with its exact figures in the tooltip.
fn phase_rect(out: &mut String, l: &Layout, y: f64, phase: Phase, span: Span) {
    let x = l.x(span.start_ms);
    // A phase shorter than a pixel still shows, as a hairline.
    let w = (l.x(span.end_ms) - x).max(if span.len_ms() > 0.0 { 1.0 } else { 0.0 });
    let _ = write!(
        out,
        r##"<rect class="phase {}" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" fill="{}"><title>{}: {} → {} ms ({} ms)</title></rect>"##,
        phase_class(phase),
        phase_colour(phase),
        escape(phase.label()),
        ms(span.start_ms),
        ms(span.end_ms),
        ms(span.len_ms())
    );
}

/// The whole of a request without phases (failed before a response, or served without a
/// timing) as an outline, and a cross after a failed one.
fn outline(out: &mut String, l: &Layout, y: f64, row: &WaterfallRow, failed: bool) {
    let end = row.end_ms.unwrap_or(row.start_ms).max(row.start_ms);
    let x = l.x(row.start_ms);
    let w = (l.x(end) - x).max(2.0);
    let stroke = if failed { FAILED } else { "#777" };
    if row.phases.is_empty() {
        let _ = write!(
            out,
            r##"<rect class="outline" x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{BAR_H}" fill="none" stroke="{stroke}" stroke-dasharray="3 2"/>"##
        );
    }
    if failed {
        let cx = l.x(row.last_ms()) + 8.0;
        let _ = write!(
            out,
            r##"<text class="failed-mark" x="{cx:.1}" y="{:.1}" fill="{FAILED}" font-weight="bold">✕</text>"##,
            y + BAR_H - 1.0
        );
    }
}

/// The milestones: a dashed line across the rows and a label in the first free lane.
fn marks_svg(out: &mut String, l: &Layout, w: &Waterfall) {
    let mut sorted: Vec<_> = w.marks.iter().filter(|m| m.at_ms.is_finite()).collect();
    sorted.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    let mut lane_end = [f64::NEG_INFINITY; MARK_LANES];
    for m in sorted {
        let x = l.x(m.at_ms);
        let text = format!("{} {} ms", m.name, ms(m.at_ms));
        let width = text.chars().count() as f64 * CHAR_W;
        let left = x - width / 2.0;
        let lane = (0..MARK_LANES)
            .find(|i| lane_end[*i] + 4.0 <= left)
            .unwrap_or_else(|| {
                (0..MARK_LANES)
                    .min_by(|a, b| lane_end[*a].total_cmp(&lane_end[*b]))
                    .unwrap_or(0)
            });
        lane_end[lane] = left + width;
        let y = l.plot_top + 10.0 + lane as f64 * LANE_H;
        let _ = write!(
            out,
            r##"<g class="mark"><title>{}: {} ms</title><line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="#333" stroke-width="1" stroke-dasharray="4 3"/><text x="{x:.1}" y="{y:.1}" text-anchor="middle" fill="#333">{}</text></g>"##,
            escape(&m.name),
            ms(m.at_ms),
            y + 3.0,
            l.rows_bottom,
            escape(&text)
        );
    }
}

/// The waterfall of one page load as a standalone SVG element: root `<svg class="waterfall">`
/// with explicit size and viewBox, the legend in `<g class="legend">` above the plot in
/// `<g class="plot">`, one `<g class="row">` per resource in request order. All text from
/// the page (URLs) is escaped.
pub fn waterfall_svg(w: &Waterfall, title: &str) -> String {
    let (legend, lines) = legend();
    let l = Layout::new(w, lines);
    let mut out = String::new();
    let _ = write!(
        out,
        r##"<svg xmlns="http://www.w3.org/2000/svg" class="waterfall" width="{WIDTH}" height="{h:.0}" viewBox="0 0 {WIDTH} {h:.0}" font-family="DejaVu Sans, Arial, sans-serif" font-size="11" role="img"><title>{}</title>"##,
        escape(title),
        h = l.height.ceil()
    );
    let _ = write!(
        out,
        r##"<rect width="100%" height="100%" fill="#fff"/><text class="title" x="8" y="20" font-size="14" font-weight="bold" fill="#111">{}</text>"##,
        escape(title)
    );
    out.push_str(&legend);
    out.push_str(r#"<g class="plot">"#);
    // Stripes, then the grid, then the bars: the grid shows between bars, never over them.
    for i in (1..w.rows.len()).step_by(2) {
        let _ = write!(
            out,
            r##"<rect class="stripe" x="0" y="{:.1}" width="{WIDTH}" height="{ROW_H}" fill="#f5f5f5"/>"##,
            l.rows_top + i as f64 * ROW_H
        );
    }
    axis(&mut out, &l);
    for (i, row) in w.rows.iter().enumerate() {
        row_svg(&mut out, &l, i, row);
    }
    marks_svg(&mut out, &l, w);
    if w.rows.is_empty() {
        let _ = write!(
            out,
            r##"<text x="{PLOT_X0}" y="{:.1}" fill="#555">no resources recorded</text>"##,
            l.rows_top + 13.0
        );
    }
    out.push_str("</g></svg>");
    out
}

/// The load time a record's waterfall is ranked by, ms: its load milestone, else the run's
/// duration.
fn load_ms(r: &Record, w: &Waterfall) -> f64 {
    w.mark("load")
        .or_else(|| r.result.as_ref().map(|res| res.duration_s * 1000.0))
        .unwrap_or_else(|| w.end_ms())
}

/// The report's waterfall section: `<h2>Waterfalls</h2>` and, per cell whose records carry a
/// waterfall (the browser workload), the repetition with the median load time (the lower of
/// the two middle ones for an even count; clean repetitions preferred), captioned with the
/// cell key. An empty string when no record has a waterfall.
pub fn report_section(records: &[Record]) -> String {
    let mut order: Vec<&str> = Vec::new();
    let mut cells: BTreeMap<&str, Vec<(&Record, &Waterfall)>> = BTreeMap::new();
    for r in records {
        if let Some(w) = &r.waterfall {
            if !cells.contains_key(r.cell.as_str()) {
                order.push(&r.cell);
            }
            cells.entry(&r.cell).or_default().push((r, w));
        }
    }
    if order.is_empty() {
        return String::new();
    }
    let mut out = String::from("<h2>Waterfalls</h2>\n");
    for cell in order {
        let all = &cells[cell];
        let clean: Vec<_> = all.iter().filter(|(r, _)| r.error.is_none()).collect();
        let mut pool: Vec<_> = if clean.is_empty() {
            all.iter().collect()
        } else {
            clean
        };
        pool.sort_by(|a, b| {
            load_ms(a.0, a.1)
                .total_cmp(&load_ms(b.0, b.1))
                .then(a.0.repetition.cmp(&b.0.repetition))
        });
        let (r, w) = pool[(pool.len() - 1) / 2];
        let title = format!("{cell} (repetition {})", r.repetition);
        let _ = writeln!(
            out,
            "<figure class=\"waterfall\">{}<figcaption>{} — repetition {}, the median load time ({} ms) of {} repetition(s)</figcaption></figure>",
            waterfall_svg(w, &title),
            escape(cell),
            r.repetition,
            ms(load_ms(r, w)),
            pool.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_core::waterfall::{Mark, Phases};

    fn span(a: f64, b: f64) -> Option<Span> {
        Span::new(a, b)
    }

    /// A page, an image over the same connection, a script whose URL carries markup and that
    /// failed before a response, and a 404.
    fn sample() -> Waterfall {
        let doc = WaterfallRow {
            label: "/".into(),
            url: "https://127.0.0.1:8443/".into(),
            resource_type: "Document".into(),
            protocol: "h2".into(),
            connection_id: 3,
            connection_reused: false,
            status: 200,
            start_ms: 0.0,
            end_ms: Some(30.0),
            phases: Phases {
                queued: span(0.0, 3.0),
                dns: span(3.0, 3.5),
                connect: span(3.5, 5.0),
                tls: span(5.0, 11.0),
                request: span(11.5, 11.75),
                wait: span(11.75, 22.0),
                download: span(22.0, 30.0),
            },
            bytes: 900,
            error: None,
            priority: "VeryHigh".into(),
            priority_header: Some("u=0, i".into()),
            starved_ms: Some(0.0),
        };
        let img = WaterfallRow {
            label: "/a.png".into(),
            url: "https://127.0.0.1:8443/a.png".into(),
            resource_type: "Image".into(),
            connection_reused: true,
            start_ms: 40.0,
            end_ms: Some(70.0),
            phases: Phases {
                queued: span(40.0, 45.5),
                request: span(45.5, 45.5),
                wait: span(45.5, 55.0),
                download: span(55.0, 70.0),
                ..Phases::default()
            },
            bytes: 5000,
            priority: "Low".into(),
            priority_header: Some("u=4, i".into()),
            starved_ms: Some(4.5),
            ..doc.clone()
        };
        let hostile = WaterfallRow {
            label: "/x?<script>&\"'".into(),
            url: "https://127.0.0.1:8443/x?<script>&\"'".into(),
            resource_type: "Script".into(),
            protocol: String::new(),
            connection_id: 0,
            status: 0,
            start_ms: 50.0,
            end_ms: Some(60.0),
            phases: Phases::default(),
            bytes: 0,
            error: Some("net::ERR_FAILED <boom>".into()),
            ..doc.clone()
        };
        let missing = WaterfallRow {
            label: "/missing.css".into(),
            url: "https://127.0.0.1:8443/missing.css".into(),
            status: 404,
            connection_reused: true,
            start_ms: 41.0,
            end_ms: Some(52.0),
            phases: Phases {
                queued: span(41.0, 42.0),
                wait: span(42.0, 50.0),
                download: span(50.0, 52.0),
                ..Phases::default()
            },
            ..doc.clone()
        };
        let marks = [("TTFB", 21.0), ("FCP", 40.0), ("DCL", 35.0), ("load", 72.0)]
            .iter()
            .map(|(n, t)| Mark {
                name: n.to_string(),
                at_ms: *t,
            })
            .collect();
        Waterfall {
            url: "https://127.0.0.1:8443/".into(),
            rows: vec![doc, img, hostile, missing],
            marks,
        }
    }

    /// The numbers of attribute `name` in `svg` (e.g. every `y="…"`).
    fn attr_values(svg: &str, name: &str) -> Vec<f64> {
        let pat = format!(" {name}=\"");
        svg.match_indices(&pat)
            .filter_map(|(i, _)| {
                let rest = &svg[i + pat.len()..];
                rest[..rest.find('"')?].parse().ok()
            })
            .collect()
    }

    /// The vertical extent of everything in a piece of SVG: rects from y to y+height, lines
    /// from y1 to y2, text from 11 px above its baseline to 3 below, shifted by translates.
    fn y_range(svg: &str) -> (f64, f64) {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        let mut add = |a: f64, b: f64| {
            lo = lo.min(a);
            hi = hi.max(b);
        };
        // The legend's entries are groups translated to their place.
        let mut pieces: Vec<(f64, &str)> = Vec::new();
        for part in svg.split("<g transform=\"translate(").skip(1) {
            let dy: f64 = part
                .split(')')
                .next()
                .and_then(|xy| xy.split(',').nth(1))
                .and_then(|v| v.parse().ok())
                .expect("translate");
            pieces.push((dy, part));
        }
        if pieces.is_empty() {
            pieces.push((0.0, svg));
        }
        for (dy, part) in pieces {
            for tag in part.split('<').skip(1) {
                let (name, _) = tag.split_once(' ').unwrap_or((tag, ""));
                let one = |n: &str| attr_values(&format!(" {tag}"), n).first().copied();
                match name {
                    "rect" => {
                        let y = one("y").unwrap_or(0.0) + dy;
                        add(y, y + one("height").unwrap_or(0.0));
                    }
                    "line" => {
                        let (a, b) = (one("y1").unwrap_or(0.0), one("y2").unwrap_or(0.0));
                        add(a.min(b) + dy, a.max(b) + dy);
                    }
                    "text" => {
                        let y = one("y").unwrap_or(0.0) + dy;
                        add(y - 11.0, y + 3.0);
                    }
                    _ => {}
                }
            }
        }
        (lo, hi)
    }

    fn between<'a>(s: &'a str, start: &str, end: &str) -> &'a str {
        let i = s.find(start).expect("start");
        let rest = &s[i..];
        &rest[..rest.find(end).map(|j| j + end.len()).unwrap_or(rest.len())]
    }

    #[test]
    fn one_row_per_resource_with_every_phase_drawn() {
        let w = sample();
        let svg = waterfall_svg(&w, "h2 run 1");
        assert!(svg.starts_with(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"waterfall\" width=\"1200\""
        ));
        assert!(svg.contains(" viewBox=\"0 0 1200 ") && svg.ends_with("</g></svg>"));
        assert_eq!(svg.matches("<g class=\"row").count(), 4);
        assert_eq!(svg.matches("<g class=\"row failed\"").count(), 2);
        let phases: usize = w.rows.iter().map(|r| r.phases.present().count()).sum();
        assert_eq!(svg.matches("<rect class=\"phase ").count(), phases);
        for p in Phase::ALL {
            let class = format!("<rect class=\"phase {}\"", phase_class(p));
            assert!(svg.contains(&class), "no {class}");
        }
        let bars: Vec<&str> = svg.split("<rect class=\"phase ").skip(1).collect();
        for bar in bars {
            let wv = attr_values(&format!(" {bar}"), "width")[0];
            let x = attr_values(&format!(" {bar}"), "x")[0];
            assert!(
                wv >= 0.0 && x >= PLOT_X0 && x + wv <= PLOT_X1 + 0.05,
                "{bar}"
            );
        }
        // The request phase of zero length is still there, zero wide.
        assert!(svg.contains("request: 45.5 → 45.5 ms (0.0 ms)"));
        // Tooltips carry exact figures; the connection column marks reuse.
        assert!(svg.contains("<title>TLS: 5.0 → 11.0 ms (6.0 ms)</title>"));
        assert!(svg.contains(">VH·u0i h2 #3</text>") && svg.contains(">L·u4i h2 #3 ↺</text>"));
        assert!(svg.contains("priority Low, sent priority: u=4, i"));
        assert!(svg.contains("waited 4.5 ms for its first byte while others were sent"));
        assert!(svg.contains("class=\"failed-mark\"") && svg.contains("class=\"outline\""));
        for m in ["TTFB 21.0 ms", "FCP 40.0 ms", "DCL 35.0 ms", "load 72.0 ms"] {
            assert!(svg.contains(&format!(">{m}</text>")), "mark {m}");
        }
        assert_eq!(svg.matches("<g class=\"mark\">").count(), 4);
    }

    #[test]
    fn text_from_the_page_is_escaped() {
        let svg = waterfall_svg(&sample(), "a <title> & \"quotes\"");
        assert!(!svg.contains("<script>") && !svg.contains("<boom>") && !svg.contains("<title> &"));
        assert!(svg.contains("/x?&lt;script&gt;&amp;&quot;&#39;"));
        assert!(svg.contains("net::ERR_FAILED &lt;boom&gt;"));
        assert!(svg.contains("a &lt;title&gt; &amp; &quot;quotes&quot;"));
        // Every tag is one the renderer writes: nothing from the page opened an element.
        for tag in svg.split('<').skip(1) {
            let name: String = tag.chars().take_while(|c| *c != ' ' && *c != '>').collect();
            assert!(
                [
                    "svg", "/svg", "g", "/g", "rect", "/rect", "text", "/text", "title", "/title",
                    "line"
                ]
                .contains(&name.as_str()),
                "unexpected tag <{name}"
            );
        }
        assert_eq!(escape("a\u{7}b"), "a\u{FFFD}b");
    }

    #[test]
    fn the_legend_is_outside_the_plot() {
        let svg = waterfall_svg(&sample(), "h2 run 1");
        let legend = between(&svg, "<g class=\"legend\">", "</g></g>");
        let plot = &svg[svg.find("<g class=\"plot\">").expect("plot")..];
        let (l_lo, l_hi) = y_range(legend);
        let (p_lo, p_hi) = y_range(plot);
        assert!(l_lo.is_finite() && p_lo.is_finite());
        assert!(
            l_hi < p_lo,
            "legend {l_lo}..{l_hi} overlaps plot {p_lo}..{p_hi}"
        );
        let height = attr_values(&svg, "height")[0];
        assert!(p_hi <= height, "plot reaches {p_hi}, svg is {height} high");
        assert_eq!(legend.matches("<rect class=\"swatch ").count(), 7);
    }

    #[test]
    fn rendering_matches_the_golden_file() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/waterfall.svg");
        let svg = waterfall_svg(&sample(), "h2 run 1");
        assert_eq!(
            svg,
            waterfall_svg(&sample(), "h2 run 1"),
            "not deterministic"
        );
        if std::env::var_os("HXLAB_UPDATE_GOLDEN").is_some() {
            std::fs::write(path, &svg).expect("writing the golden file");
        }
        let golden = std::fs::read_to_string(path).expect(
            "golden file (HXLAB_UPDATE_GOLDEN=1 cargo test -p hxlab-report waterfall writes it)",
        );
        assert_eq!(
            svg, golden,
            "the SVG changed; if on purpose, rerun with HXLAB_UPDATE_GOLDEN=1"
        );
    }

    #[test]
    fn an_empty_waterfall_still_draws() {
        let svg = waterfall_svg(&Waterfall::default(), "nothing");
        assert!(svg.contains("no resources recorded"));
        assert_eq!(svg.matches("<g class=\"row").count(), 0);
    }

    #[test]
    fn axis_steps_are_round() {
        assert_eq!(axis_range(72.0), (80.0, 10.0));
        assert_eq!(axis_range(1234.0), (1400.0, 200.0));
        assert_eq!(axis_range(0.0), (1.0, 0.2));
        assert_eq!(axis_range(f64::NAN), (1.0, 0.2));
    }

    fn record(cell: &str, rep: u32, load: f64, error: Option<&str>) -> Record {
        let mut w = sample();
        w.marks.retain(|m| m.name != "load");
        w.marks.push(Mark {
            name: "load".into(),
            at_ms: load,
        });
        Record {
            cell: cell.into(),
            repetition: rep,
            error: error.map(str::to_string),
            waterfall: Some(w),
            ..Record::default()
        }
    }

    #[test]
    fn the_report_shows_the_median_repetition_per_cell() {
        assert_eq!(report_section(&[Record::default()]), "");
        let records = vec![
            record("protocol=h2", 0, 300.0, None),
            record("protocol=h2", 1, 100.0, None),
            record("protocol=h2", 2, 200.0, None),
            record("protocol=h3 <x>", 0, 50.0, Some("flagged")),
            record("protocol=h3 <x>", 1, 900.0, None),
            Record {
                cell: "protocol=h1".into(),
                ..Record::default()
            },
        ];
        let html = report_section(&records);
        assert!(html.starts_with("<h2>Waterfalls</h2>"));
        assert_eq!(html.matches("<svg ").count(), 2);
        assert!(html.contains("protocol=h2 — repetition 2, the median load time (200.0 ms) of 3"));
        // The clean repetition wins over the flagged one; the key is escaped.
        assert!(html.contains("protocol=h3 &lt;x&gt; — repetition 1"));
        assert!(!html.contains("protocol=h1"));
        assert!(html.find("protocol=h2").unwrap_or(0) < html.find("protocol=h3").unwrap_or(0));
    }
}
