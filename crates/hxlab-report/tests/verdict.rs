//! The verdict block on the cases it must tell apart: a significant effect (ranked by size,
//! with its interval and shift), no significant difference (`~` with p and n), a protocol
//! that fell back to another, and a cell with errors.

mod common;

use common::{experiment, record};
use hxlab_report::export::{MarkdownExporter, TerminalExporter};
use hxlab_report::verdict::Kind;
use hxlab_report::{Exporter, Report};

#[test]
fn significant_effects_come_ranked_with_interval_and_shift() {
    let (meta, records) = experiment();
    let r = Report::build(meta, records);
    let v = r.verdict();
    let sig: Vec<&str> = v
        .lines
        .iter()
        .filter(|l| l.kind == Kind::Significant)
        .map(|l| l.text.as_str())
        .collect();
    // h2 vs h1-tls: 5.6/1.2 = 4.67× at both delays; the largest effects come first.
    assert!(
        sig[0].starts_with("h2 is 4.") && sig[0].contains("× faster than h1-tls (95 % CI "),
        "{sig:?}"
    );
    assert!(sig[0].contains("; shift −"), "{sig:?}");
    // h3 at 20 ms is slower than h2: named as such, after the large effects.
    let h3 = sig
        .iter()
        .position(|s| s.starts_with("h3 is 1.2") && s.contains("slower than h2"))
        .expect("h3 vs h2 at 20ms");
    assert!(h3 > 1, "{sig:?}");
    assert!(
        v.headline.starts_with("Fastest: h2 in 2 of 2 conditions."),
        "{}",
        v.headline
    );
    assert!(
        v.headline.contains("Largest effect: h2 is 4."),
        "{}",
        v.headline
    );
    assert!(
        v.lines.iter().all(|l| l.kind != Kind::Problem),
        "{:?}",
        v.lines
    );
}

#[test]
fn no_significant_difference_is_a_tilde_with_p_and_n() {
    let (meta, records) = experiment();
    let r = Report::build(meta, records);
    let v = r.verdict();
    let same: Vec<&hxlab_report::verdict::Line> =
        v.lines.iter().filter(|l| l.kind == Kind::Same).collect();
    assert_eq!(same.len(), 1, "{:?}", v.lines);
    assert!(
        same[0]
            .text
            .starts_with("h3 ~ h2: no significant difference (ratio 1.00"),
        "{}",
        same[0].text
    );
    assert!(
        same[0].text.contains("p = 1.000, n = 5+5"),
        "{}",
        same[0].text
    );
    assert_eq!(same[0].condition, "delay 50ms");
    assert!(
        v.headline
            .contains("1 of 6 comparisons show no significant difference (~)"),
        "{}",
        v.headline
    );
    let term = TerminalExporter.render(&r).expect("terminal");
    assert!(term.starts_with("verdict: Fastest: h2"), "{term}");
    assert!(
        term.contains("\n  ~ h3 ~ h2: no significant difference"),
        "{term}"
    );
}

#[test]
fn a_fallback_and_errors_are_named_in_the_verdict() {
    let (meta, mut records) = experiment();
    for r in records
        .iter_mut()
        .filter(|r| r.cell.starts_with("protocol=h3 delay=20ms"))
    {
        let res = r.result.as_mut().expect("result");
        res.negotiated.clear();
        res.negotiated.insert("h2".into(), 1);
    }
    for r in records
        .iter_mut()
        .filter(|r| r.cell.starts_with("protocol=h2 delay=50ms") && r.repetition >= 3)
    {
        let res = r.result.as_mut().expect("result");
        res.requests_failed = 4;
        res.error_samples.push("connection reset by peer".into());
    }
    let r = Report::build(meta, records);
    let v = r.verdict();
    let problems: Vec<&str> = v
        .lines
        .iter()
        .filter(|l| l.kind == Kind::Problem)
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems
            .iter()
            .any(|p| p.starts_with("h3 fell back: its connections negotiated h2 ×5")),
        "{problems:?}"
    );
    assert!(problems.iter().any(|p| p.starts_with("h2 had errors in 2 of 5 repetitions (first: 4 of 30 requests failed (connection reset by peer))")), "{problems:?}");
    assert_eq!(v.lines[0].kind, Kind::Problem, "problems come first");
    assert!(
        v.headline.contains("2 cell(s) have problems (!)"),
        "{}",
        v.headline
    );
    // Cells with problems win no condition in the headline: at 20 ms h2 wins (h3 fell back),
    // at 50 ms h3 does (h2 had errors).
    assert!(
        v.headline
            .starts_with("Fastest: h2 in 1 of 2 conditions, h3 in 1 of 2 conditions."),
        "{}",
        v.headline
    );
    let md = MarkdownExporter.render(&r).expect("markdown");
    let verdict_at = md.find("## Verdict").expect("verdict section");
    assert!(
        verdict_at < md.find("## time to last byte").expect("table"),
        "verdict first"
    );
    assert!(md.contains("- ⚠ h3 fell back"), "{md}");
}

#[test]
fn a_single_repetition_each_is_never_called_significant() {
    let mut records = Vec::new();
    for (p, s) in [("h1-tls", 0.5), ("h2", 0.1)] {
        records.push(record(
            p,
            "20ms",
            0,
            s,
            if p == "h2" { "h2" } else { "http/1.1" },
            20_000,
        ));
        records.push(record(
            p,
            "50ms",
            0,
            s * 2.0,
            if p == "h2" { "h2" } else { "http/1.1" },
            50_000,
        ));
    }
    let r = Report::build(common::meta(&["h1-tls", "h2"]), records);
    let v = r.verdict();
    assert!(
        v.lines.iter().all(|l| l.kind == Kind::Same),
        "{:?}",
        v.lines
    );
    assert!(
        v.lines[0]
            .text
            .contains("n = 1+1; too few repetitions to tell"),
        "{:?}",
        v.lines
    );
}

#[test]
fn a_browser_experiment_can_judge_by_largest_contentful_paint() {
    // Load times tie; LCP does not: h3 paints its largest element 40 ms sooner.
    let mut records = Vec::new();
    for (p, lcp) in [("h2", 200.0), ("h3", 160.0)] {
        for rep in 0..5u32 {
            let mut r = record(p, "20ms", rep, 1.0 + f64::from(rep) * 0.001, p, 20_000);
            let res = r.result.as_mut().expect("result");
            res.config
                .extra
                .insert("lcp_ms".into(), format!("{:.1}", lcp + f64::from(rep)));
            r.cell = format!("protocol={p}");
            r.factors.remove("delay");
            r.factors.remove("resources");
            records.push(r);
        }
    }
    // One repetition that painted nothing has no LCP: left out and said.
    records[9]
        .result
        .as_mut()
        .expect("result")
        .config
        .extra
        .remove("lcp_ms");
    let mut meta = common::meta(&["h2", "h3"]);
    meta.workload = Some(hxlab_report::Workload::Browser);
    meta.factors.retain(|f| f.name == "protocol");
    meta.metric = Some(hxlab_report::Metric::LcpS);
    let r = Report::build(meta, records);
    assert_eq!(r.metric, hxlab_report::Metric::LcpS);
    let h3 = r
        .cells
        .iter()
        .find(|c| c.key == "protocol=h3")
        .expect("h3 cell");
    assert_eq!(h3.values.len(), 4);
    assert!(
        h3.warnings
            .iter()
            .any(|w| w == "repetition 4: no largest contentful paint (s) recorded"),
        "{:?}",
        h3.warnings
    );
    let v = r.verdict();
    let sig: Vec<&str> = v
        .lines
        .iter()
        .filter(|l| l.kind == Kind::Significant)
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(sig.len(), 1, "{:?}", v.lines);
    assert!(
        sig[0].starts_with("h3 is 1.2")
            && sig[0].contains("faster than h2")
            && sig[0].contains("shift −40"),
        "{}",
        sig[0]
    );
    let md = MarkdownExporter.render(&r).expect("markdown");
    assert!(md.contains("| protocol | LCP (s) |"), "{md}");
    let json = hxlab_report::export::SummaryJsonExporter
        .render(&r)
        .expect("json");
    assert!(json.contains("\"metric\": \"lcp_s\""), "{json}");
}

#[test]
fn different_congestion_controllers_are_named_as_not_like_for_like() {
    let (meta, mut records) = experiment();
    for r in &mut records {
        let cc = if r.factors["protocol"] == "h3" {
            "cubic"
        } else {
            "bbr"
        };
        r.server_cc.insert(cc.into(), 1);
    }
    let r = Report::build(meta, records);
    let v = r.verdict();
    let problems: Vec<&str> = v
        .lines
        .iter()
        .filter(|l| l.kind == Kind::Problem)
        .map(|l| l.text.as_str())
        .collect();
    // h3 against h1-tls and against h2, at both delays; h2 against h1-tls ran the same.
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(
        problems.iter().all(|p| p.starts_with("h3 vs ")
            && p.contains("not like for like: their servers sent with cubic and bbr (read back)")),
        "{problems:?}"
    );
}
