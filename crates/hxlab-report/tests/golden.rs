//! Every exporter on a fixed experiment, compared with the files under tests/golden/: a
//! change to a report's content or layout shows up here as a diff to look at. Re-render them
//! with `HXLAB_UPDATE_GOLDEN=1 cargo test -p hxlab-report --test golden` after a deliberate change.

mod common;

use hxlab_report::export::{
    CsvExporter, HtmlExporter, MarkdownExporter, SummaryJsonExporter, TerminalExporter,
};
use hxlab_report::{Exporter, Report};
use std::path::PathBuf;

fn check(name: &str, text: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("HXLAB_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, text).expect("write golden file");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with HXLAB_UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if want != text {
        let line = want
            .lines()
            .zip(text.lines())
            .position(|(a, b)| a != b)
            .map_or(want.lines().count().min(text.lines().count()), |i| i);
        panic!(
            "{name} differs from {} at line {}:\n want: {}\n  got: {}\n(HXLAB_UPDATE_GOLDEN=1 re-renders it after a deliberate change)",
            path.display(),
            line + 1,
            want.lines().nth(line).unwrap_or("<end>"),
            text.lines().nth(line).unwrap_or("<end>")
        );
    }
}

fn report() -> Report {
    let (meta, records) = common::experiment();
    Report::build(meta, records)
}

#[test]
fn exporters_render_the_fixture_as_the_golden_files() {
    let r = report();
    check("report.md", &MarkdownExporter.render(&r).expect("md"));
    check("report.html", &HtmlExporter.render(&r).expect("html"));
    check(
        "summary.json",
        &SummaryJsonExporter.render(&r).expect("json"),
    );
    check("results.csv", &CsvExporter.render(&r).expect("csv"));
    check(
        "terminal.txt",
        &TerminalExporter.render(&r).expect("terminal"),
    );
}

#[test]
fn rendering_twice_gives_the_same_bytes() {
    let a = HtmlExporter.render(&report()).expect("html");
    let b = HtmlExporter.render(&report()).expect("html");
    assert_eq!(a, b);
}

#[test]
fn summary_json_has_cells_comparisons_and_verdict() {
    let r = report();
    let v: serde_json::Value =
        serde_json::from_str(&SummaryJsonExporter.render(&r).expect("json")).expect("valid JSON");
    assert_eq!(v["schema"], 1);
    assert_eq!(v["metric"], "time_s");
    let cells = v["cells"].as_array().expect("cells");
    assert_eq!(cells.len(), 6);
    let h2 = cells
        .iter()
        .find(|c| c["key"] == "protocol=h2 delay=20ms resources=30")
        .expect("h2 cell");
    assert_eq!(h2["n"], 5);
    let median = h2["median"].as_f64().expect("median");
    assert!(
        (median - common::secs("h2", 20.0, 0)).abs() < 1e-12,
        "{median}"
    );
    let ci = h2["ci"].as_array().expect("ci");
    assert!(ci[0].as_f64().expect("lo") <= median && median <= ci[1].as_f64().expect("hi"));
    assert_eq!(h2["latency_ms"]["count"], 150);
    let cmp = v["comparisons"].as_array().expect("comparisons");
    // h2 and h3 against h1-tls at two delays, and h3 against h2 at two delays.
    assert_eq!(cmp.len(), 6);
    let c = cmp
        .iter()
        .find(|c| c["protocol"] == "h2" && c["conditions"]["delay"] == "20ms")
        .expect("h2 vs h1-tls at 20ms");
    assert_eq!(c["baseline"], "h1-tls");
    assert!((c["ratio"].as_f64().expect("ratio") - 1.2 / 5.6).abs() < 0.01);
    assert_eq!(c["significant"], true);
    assert_eq!(c["shift_unit"], "ms");
    assert!(v["verdict"]["headline"]
        .as_str()
        .expect("headline")
        .starts_with("Fastest: h2"));
    assert!(v["before_after"].is_null());
}

#[test]
fn chart_titles_name_the_unit_of_their_axis() {
    let r = report();
    let charts = hxlab_report::charts::all(&r);
    let by_delay = charts
        .iter()
        .find(|c| c.id == "chart-delay")
        .expect("chart by delay");
    // The y axis is in ms, so the title is too; the table beside it keeps seconds.
    assert_eq!(by_delay.title, "time to last byte (ms) by delay");
    assert!(
        by_delay.svg.contains(">time to last byte (ms)</text>"),
        "the axis says ms"
    );
    assert!(
        charts.iter().all(|c| !c.title.contains("(s)")),
        "no title in seconds"
    );
    assert_eq!(
        r.tables[0].title,
        "time to last byte (s) by delay — resources 30"
    );
}
