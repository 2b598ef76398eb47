//! report.html: one self-contained file (inline CSS and SVG, no scripts, nothing fetched):
//! the verdict first, then the charts (small multiples, percentile plots, time series; see
//! [`crate::charts`]), the tables, every comparison, warnings and the cells.

use super::document::{Document, List};
use super::{
    cc_text, cell_figures, figure_text, fixed_line, negotiated_text, scheduling_text,
    secondary_text, swept_line,
};
use crate::baseline::BeforeAfter;
use crate::charts::{self, svg::esc};
use crate::comparisons::fmt_ratio;
use crate::report::Report;
use crate::verdict::judge;
use std::fmt::Write;

/// HTML report with SVG charts (`report.html`).
pub struct HtmlExporter;

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1300px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}\
td:first-child,th:first-child{text-align:left}tr.published td{color:#666;font-style:italic;background:#f6f6f6}\
.warn{color:#a40}figure{margin:1.5em 0}figcaption{color:#555;font-size:13px}code{background:#f2f2f2;padding:0 3px}\
.verdict{border:2px solid #0072B2;border-radius:6px;padding:0.6em 1em;margin:1em 0;background:#f4f9fd}\
.verdict p.headline{font-size:17px;font-weight:600;margin:0.2em 0 0.6em}.verdict ul{list-style:none;padding-left:0;margin:0}\
.verdict li{margin:0.15em 0}.verdict .sign{display:inline-block;width:1.4em;font-weight:700}\
.verdict li.problem{color:#a40}.verdict li.same,.verdict li.untested{color:#666}.verdict p.more{margin:0.5em 0 0;font-size:13px}";

impl Document for HtmlExporter {
    const FILE: Option<&'static str> = Some("report.html");

    /// The document head, title, description, what was swept and fixed, and how to read it.
    fn heading(&self, o: &mut String, r: &Report) {
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

    /// The verdict block: the headline, then its lines (the same text as the terminal's).
    fn verdict(&self, o: &mut String, r: &Report) {
        let v = r.verdict();
        let _ = writeln!(
            o,
            "<section class=\"verdict\" id=\"verdict\"><h2>Verdict</h2><p class=\"headline\">{}</p><ul>",
            esc(&v.headline)
        );
        for l in &v.lines {
            let _ = writeln!(
                o,
                "<li class=\"{}\"><span class=\"sign\">{}</span>{}</li>",
                l.kind.class(),
                esc(l.kind.sign()),
                esc(&l.text)
            );
        }
        let more = if r.comparisons.is_empty() {
            ""
        } else {
            "<p class=\"more\"><a href=\"#comparisons\">Every comparison, condition by condition</a></p>"
        };
        let _ = writeln!(o, "</ul>{more}</section>");
    }

    fn before_after(&self, o: &mut String, b: &BeforeAfter) {
        o.push_str(&b.html());
    }

    /// Every chart as a figure with its caption, then the page loads' waterfalls.
    fn charts(&self, o: &mut String, r: &Report) {
        for c in charts::all(r) {
            let _ = writeln!(
                o,
                "<figure><h3>{}</h3>{}<figcaption>{}</figcaption></figure>",
                esc(&c.title),
                c.svg,
                esc(&c.caption)
            );
        }
        o.push_str(&crate::waterfall::report_section(&r.records));
    }

    /// Each table under its heading, published rows and figures with warnings marked by class.
    fn tables(&self, o: &mut String, r: &Report) {
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

    /// Every comparison as a table row: ratio with interval, Hodges–Lehmann shift, p and n.
    fn comparisons(&self, o: &mut String, r: &Report) {
        if r.comparisons.is_empty() {
            return;
        }
        let _ = writeln!(o, "<h2 id=\"comparisons\">Comparisons</h2><table><tr><th>conditions</th><th>protocol</th><th>vs</th><th>ratio of medians</th><th>95 % CI</th><th>shift (Hodges–Lehmann)</th><th>p (Mann-Whitney)</th><th>n</th><th></th></tr>");
        for c in &r.comparisons {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}×</td><td>{}–{}</td><td>{}</td><td>{:.3}</td><td>{}+{}</td><td>{}</td></tr>",
                esc(&c.condition),
                esc(&c.protocol),
                esc(&c.baseline),
                fmt_ratio(c.ratio),
                fmt_ratio(c.ci.0),
                fmt_ratio(c.ci.1),
                esc(&c.shift_text()),
                c.p_value,
                c.n.0,
                c.n.1,
                judge(c).text()
            );
        }
        let _ = writeln!(o, "</table>");
    }

    /// A section titled as the list is, with one `<li>` per item, warnings marked by class (no
    /// items: no section).
    fn list(&self, o: &mut String, which: List, items: &[String]) {
        if items.is_empty() {
            return;
        }
        let li_attrs = match which {
            List::Warnings => " class=\"warn\"",
            List::Notes => "",
        };
        let _ = writeln!(o, "<h2>{}</h2><ul>", which.title());
        for item in items {
            let _ = writeln!(o, "<li{li_attrs}>{}</li>", esc(item));
        }
        let _ = writeln!(o, "</ul>");
    }

    /// The cells table: one row per cell with its statistics, or why it was skipped.
    fn cells(&self, o: &mut String, r: &Report) {
        let _ = writeln!(o, "<h2>Cells</h2><table><tr><th>cell</th><th>n</th><th>median</th><th>mean</th><th>stdev</th><th>95 % CI</th><th>server CPU µs/req</th><th>negotiated</th><th>cc server/client (read back)</th><th>scheduler / TCP mark / priorities (read back)</th></tr>");
        for c in &r.cells {
            let [n, median, mean, stdev, ci] = cell_figures(c);
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{n}</td><td>{median}</td><td>{mean}</td><td>{stdev}</td><td>{ci}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&c.key),
                secondary_text(c, "server_cpu_us_per_req"),
                esc(&c.skipped.as_ref().map(|s| format!("skipped: {s}")).unwrap_or_else(|| negotiated_text(&c.negotiated))),
                esc(&cc_text(&c.server_cc, &c.client_cc)),
                esc(&scheduling_text(c.scheduling.as_ref()))
            );
        }
        let _ = writeln!(o, "</table>");
    }

    fn end(&self, o: &mut String) {
        let _ = writeln!(o, "</body></html>");
    }
}
