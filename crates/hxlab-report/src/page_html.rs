//! The page of `hxlab page --html FILE`: one self-contained HTML page (inline CSS and SVG,
//! no script, nothing fetched) with the summary figures, a row per run, and one waterfall
//! and filmstrip per run and view.

use crate::waterfall::{escape, waterfall_svg};
use hxlab_core::page::{Outcome, PageRun, PageSummary, PageTotals, View};
use std::fmt::Write;

const STYLE: &str = "body{font-family:DejaVu Sans,Arial,sans-serif;margin:1.5em;color:#111;max-width:1240px}\
h1{font-size:1.3em}h2{font-size:1.1em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.5em 0 1em}\
th,td{padding:2px 10px;text-align:right;border-bottom:1px solid #ddd;font-variant-numeric:tabular-nums}\
th:first-child,td:first-child,td.note{text-align:left}td.note{color:#B2182B}\
figure{margin:1em 0 2em}svg.waterfall{max-width:100%;height:auto;border:1px solid #ddd}\
figcaption{color:#444;font-size:.9em;margin-top:.3em}.failed{color:#B2182B}\
.filmstrip{display:flex;flex-wrap:wrap;gap:6px;margin:.4em 0}.filmstrip figure{margin:0;text-align:center}\
.filmstrip img{width:160px;height:auto;border:1px solid #bbb;display:block}\
.filmstrip figcaption{margin:0;font-size:.8em}";

/// A time in ms for a table cell ("-" when not measured).
fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() && v >= 0.0 => format!("{v:.1}"),
        _ => "-".into(),
    }
}

/// The whole page for `url` loaded over `proto`: heading, summary, runs, waterfalls.
pub fn render(url: &str, proto: &str, outcomes: &[Outcome], rep: &PageTotals) -> String {
    let title = format!("hxlab page: {url} over {proto}");
    let mut out = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    let s = &rep.summary;
    let _ = writeln!(
        out,
        "<p>{}: {} of {} run(s) counted. Every run is a first view: a fresh browser with a fresh profile{}.</p>",
        escape(&rep.browser),
        s.valid_runs,
        s.runs,
        match (rep.repeat_summary.is_some(), returning(outcomes)) {
            (true, true) => "; its returning visitor is a new browser on the profile the first view left (HTTP cache and Alt-Svc records kept, connections closed)",
            (true, false) => "; its repeat view loads the page again in the same browser, cache and connections kept",
            (false, _) => "",
        }
    );
    summary(&mut out, &rep.summary, "Summary");
    if let Some(r) = &rep.repeat_summary {
        let title = if returning(outcomes) {
            "Summary of the returning visitors"
        } else {
            "Summary of the repeat views"
        };
        summary(&mut out, r, title);
    }
    runs_table(&mut out, outcomes);
    out.push_str("<h2>Waterfalls</h2>\n<p>Phases per resource from the browser's own timing, in ms since the navigation started; hover a bar for its figures. Bold connection ids are new connections, ↺ marks a reused one. Under each waterfall, the filmstrip: what the page showed at fixed ticks, one picture per change, with its visual progress.</p>\n");
    for (i, o) in outcomes.iter().enumerate() {
        let n = i + 1;
        match o {
            Outcome::Measured(run) => {
                view_figure(&mut out, run, proto, &format!("run {n}"));
                if let Some(rv) = &run.repeat_view {
                    let name = second_view_name(rv);
                    view_figure(&mut out, rv, proto, &format!("run {n}, {name}"));
                }
            }
            Outcome::Failed(e) => {
                let _ = writeln!(out, "<p class=\"failed\">Run {n} failed: {}</p>", escape(e));
            }
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

/// One view's waterfall, with its filmstrip below.
fn view_figure(out: &mut String, run: &PageRun, proto: &str, name: &str) {
    let svg = waterfall_svg(&run.waterfall(), &format!("{proto} {name}"));
    let note = match &run.flag {
        Some(f) => format!(" <span class=\"failed\">Left out: {}</span>", escape(f)),
        None => String::new(),
    };
    let _ = write!(out, "<figure>{svg}");
    filmstrip(out, run);
    let _ = writeln!(
        out,
        "<figcaption>{} over {}: {} resource(s), load {} ms, Speed Index {} ms.{note}</figcaption></figure>",
        escape(&capitalized(name)),
        escape(proto),
        run.resources.len(),
        ms(Some(run.load_ms)),
        ms(run.speed_index_ms)
    );
}

/// "run 3" → "Run 3".
fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The filmstrip as a row of thumbnails (JPEG data URIs), each with its time and progress.
fn filmstrip(out: &mut String, run: &PageRun) {
    if run.filmstrip.is_empty() {
        return;
    }
    out.push_str("<div class=\"filmstrip\">");
    for f in &run.filmstrip {
        // Base64 has no markup characters; anything else is not shown.
        if !f
            .jpeg_base64
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/' || b == b'=')
        {
            continue;
        }
        let _ = write!(
            out,
            "<figure><img alt=\"the page at {t:.0} ms\" src=\"data:image/jpeg;base64,{}\"><figcaption>{t:.0} ms · {:.0}%</figcaption></figure>",
            f.jpeg_base64,
            f.progress_pct,
            t = f.time_ms
        );
    }
    out.push_str("</div>");
}

/// Medians with their 95 % intervals, and the runs left out.
fn summary(out: &mut String, s: &PageSummary, title: &str) {
    let _ = writeln!(
        out,
        "<h2>{title}</h2>\n<table>\n<tr><th>metric</th><th>median</th><th>95% CI</th></tr>"
    );
    for (key, label) in [
        ("ttfb_ms", "TTFB (ms)"),
        ("dom_content_loaded_ms", "DOMContentLoaded (ms)"),
        ("load_ms", "load (ms)"),
        ("fcp_ms", "first contentful paint (ms)"),
        ("lcp_ms", "largest contentful paint (ms)"),
        ("speed_index_ms", "Speed Index (ms)"),
        ("visually_complete_ms", "visually complete (ms)"),
        ("cls", "cumulative layout shift"),
        ("connections", "connections"),
        ("bytes", "bytes"),
        ("resources_loaded", "resources loaded"),
    ] {
        if let Some(m) = s.metrics.get(key) {
            let digits = if key == "cls" { 4 } else { 1 };
            let _ = writeln!(
                out,
                "<tr><td>{label}</td><td>{:.digits$}</td><td>[{:.digits$}, {:.digits$}]</td></tr>",
                m.median, m.ci95_low, m.ci95_high
            );
        }
    }
    out.push_str("</table>\n");
    for l in &s.left_out {
        let _ = writeln!(out, "<p class=\"failed\">Left out: {}</p>", escape(l));
    }
}

/// Whether the runs' second views are returning visitors (`hxlab page --discovery`) rather
/// than same-browser repeat views.
fn returning(outcomes: &[Outcome]) -> bool {
    outcomes.iter().any(|o| {
        matches!(o, Outcome::Measured(r)
            if r.repeat_view.as_ref().is_some_and(|rv| rv.view == View::Returning))
    })
}

/// What a run's second view is called.
fn second_view_name(view: &PageRun) -> &'static str {
    match view.view {
        View::Returning => "returning visitor",
        _ => "repeat view",
    }
}

/// One table row per run.
fn runs_table(out: &mut String, outcomes: &[Outcome]) {
    out.push_str("<h2>Runs</h2>\n<table>\n<tr><th>run</th><th>protocols</th><th>loaded</th><th>connections</th><th>bytes</th><th>TTFB (ms)</th><th>DCL (ms)</th><th>load (ms)</th><th>FCP (ms)</th><th>LCP (ms)</th><th>SI (ms)</th><th>CLS</th><th>note</th></tr>\n");
    for (i, o) in outcomes.iter().enumerate() {
        let n = i + 1;
        match o {
            Outcome::Measured(r) => {
                let _ = writeln!(out, "<tr><td>{n}</td>{}</tr>", run_cells(r));
                if let Some(rv) = &r.repeat_view {
                    let name = second_view_name(rv);
                    let _ = writeln!(out, "<tr><td>{n} {name}</td>{}</tr>", run_cells(rv));
                }
            }
            Outcome::Failed(e) => {
                let _ = writeln!(
                    out,
                    "<tr><td>{n}</td><td colspan=\"11\"></td><td class=\"note\">failed: {}</td></tr>",
                    escape(e)
                );
            }
        }
    }
    out.push_str("</table>\n");
}

/// The cells of a measured run's row, after its number.
fn run_cells(r: &PageRun) -> String {
    let protocols = r.protocol_counts();
    format!(
        "<td>{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"note\">{}</td>",
        escape(&protocols.join(", ")),
        r.resources_loaded,
        r.resources.len(),
        r.connections,
        r.bytes,
        ms(Some(r.ttfb_ms)),
        ms(Some(r.dom_content_loaded_ms)),
        ms(Some(r.load_ms)),
        ms(r.fcp_ms),
        ms(r.lcp_ms),
        ms(r.speed_index_ms),
        r.cls.map(|c| format!("{c:.4}")).unwrap_or_else(|| "-".into()),
        r.flag.as_deref().map(escape).unwrap_or_default()
    )
}
