//! The verdict on the cases it must tell apart: one line per protocol pair across
//! conditions (direction, range, largest effect with its interval), differences too small
//! to matter ("equal within 2 %"), differences too few repetitions can test ("looks"),
//! problems grouped by kind, a browser experiment judged by LCP and by the load event, and
//! the `hxlab compare` matrix in twelve terminal lines, the same text in every format.

mod common;

use common::{experiment, record};
use hxlab_core::sched::{Scheduler, Scheduling};
use hxlab_report::export::{HtmlExporter, MarkdownExporter, SummaryJsonExporter, TerminalExporter};
use hxlab_report::verdict::{Direction, Kind, Problem};
use hxlab_report::{ExperimentMeta, Exporter, FactorLevels, Record, Report, Workload};

/// The pair lines of a verdict, by text.
fn texts(r: &Report, kind: Kind) -> Vec<String> {
    r.verdict()
        .lines
        .into_iter()
        .filter(|l| l.kind == kind)
        .map(|l| l.text)
        .collect()
}

/// Seconds of one repetition of the `hxlab compare` matrix: HTTP/1.1 pays the server delay
/// once per 6 resources, h2 and h3 about once; h1 ties h1-tls within 1 %; h3 is a little
/// slower than h2 at 20 ms and a little faster at 50 ms; on Regular 4G the link's bandwidth
/// makes every protocol the same, with a wide spread.
fn compare_secs(protocol: &str, profile: &str, delay_ms: f64, resources: f64, rep: u32) -> f64 {
    let spread = if profile == "none" { 0.01 } else { 0.08 };
    let jitter = [0.0, 0.7, -0.4, 0.3, -0.2][rep as usize % 5] * spread;
    if profile != "none" {
        return 1.5 * (1.0 + jitter);
    }
    let h1 = delay_ms * (resources / 6.0).ceil() / 1000.0 + 0.005;
    let h2 = delay_ms * (1.2 + resources / 100.0) / 1000.0;
    let base = match protocol {
        "h1-tls" => h1,
        "h1" => h1 * 0.99,
        "h2" => h2,
        _ if delay_ms < 30.0 => h2 * 1.1,
        _ => h2 * 0.95,
    };
    base * (1.0 + jitter)
}

/// The `hxlab compare` matrix with `reps` repetitions a cell: h1, h1-tls, h2, h3 (baseline
/// h1-tls) × delay {20, 50 ms} × resources {30, 120} on profile none, plus Regular 4G at
/// 20 ms and 30 resources. h3's server sends with cubic and the others' with bbr, as
/// `hxlab compare` without `cc` does.
fn compare_matrix(reps: u32) -> Report {
    compare_matrix_with(reps, |p, r| {
        let cc = if p == "h3" { "cubic" } else { "bbr" };
        r.server_cc.insert(cc.into(), 1);
    })
}

/// The same matrix, each record of protocol `p` given what `read_back(p, record)` sets.
fn compare_matrix_with(reps: u32, read_back: impl Fn(&str, &mut Record)) -> Report {
    let protocols = ["h1", "h1-tls", "h2", "h3"];
    let mut conditions = Vec::new();
    for delay in ["20ms", "50ms"] {
        for resources in ["30", "120"] {
            conditions.push(("none", delay, resources));
        }
    }
    conditions.push(("Regular 4G", "20ms", "30"));
    let mut records = Vec::new();
    let mut cells = Vec::new();
    for &(profile, delay, resources) in &conditions {
        for p in protocols {
            let d: f64 = delay.trim_end_matches("ms").parse().unwrap_or(0.0);
            let n: f64 = resources.parse().unwrap_or(0.0);
            let alpn = if p.starts_with("h1") { "http/1.1" } else { p };
            let key = format!("protocol={p} profile={profile} delay={delay} resources={resources}");
            cells.push(key.clone());
            for rep in 0..reps {
                let mut r = record(p, delay, rep, compare_secs(p, profile, d, n, rep), alpn, 20);
                r.cell = key.clone();
                r.factors.insert("profile".into(), profile.into());
                r.factors.insert("resources".into(), resources.into());
                read_back(p, &mut r);
                records.push(r);
            }
        }
    }
    let factor = |name: &str, levels: &[&str]| FactorLevels {
        name: name.into(),
        levels: levels.iter().map(|s| s.to_string()).collect(),
    };
    let meta = ExperimentMeta {
        name: "compare".into(),
        title: "hxlab compare".into(),
        workload: Some(Workload::Resources),
        repetitions: reps,
        factors: vec![
            factor("protocol", &protocols),
            factor("profile", &["none", "Regular 4G"]),
            factor("delay", &["20ms", "50ms"]),
            factor("resources", &["30", "120"]),
            factor("size", &["10KiB"]),
        ],
        columns: Some("resources".into()),
        baseline: Some("h1-tls".into()),
        cells,
        ..Default::default()
    };
    Report::build(meta, records)
}

/// The verdict part of the terminal's output: up to the first blank line.
fn terminal_verdict(r: &Report) -> String {
    let term = TerminalExporter.render(r).expect("terminal");
    term.split("\n\n").next().unwrap_or_default().to_string()
}

#[test]
fn one_line_per_pair_across_conditions() {
    let (meta, records) = experiment();
    let r = Report::build(meta, records);
    let v = r.verdict();
    let lines: Vec<&str> = v.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        lines,
        [
            "h2 vs h1-tls: holds across delay — h2 faster under delay 20ms (4.67×, CI 4.63–4.70) and 50ms (4.67×, CI 4.63–4.70)",
            "h3 vs h1-tls: holds across delay — h3 faster under delay 20ms (3.86×, CI 3.84–3.89) and 50ms (4.67×, CI 4.63–4.70)",
            "h3 vs h2: depends on delay — h3 slower under delay 20ms (1.21×, CI 1.20–1.22), equal within 2 % under 50ms (1.00×)",
        ]
    );
    assert!(v.lines.iter().all(|l| l.kind == Kind::Significant));
    assert_eq!(
        v.headline,
        "Fastest: h2 in 1 of 2 conditions; h2 and h3 tie within 2 % in 1 of 2 conditions. Largest effect: h2 is 4.67× faster than h1-tls (95 % CI 4.63–4.70; shift −88.0 ms) at delay 20ms."
    );
}

#[test]
fn a_significant_difference_within_two_percent_is_equal() {
    // 10 a side, h2 0.5 % faster than h1-tls with a tight spread: significant, not useful.
    let mut records = Vec::new();
    for rep in 0..10u32 {
        let j = 1.0 + f64::from(rep) * 0.0001;
        records.push(record("h1-tls", "20ms", rep, 0.100 * j, "http/1.1", 20_000));
        records.push(record("h2", "20ms", rep, 0.0995 * j, "h2", 20_000));
    }
    let mut meta = common::meta(&["h1-tls", "h2"]);
    meta.factors.retain(|f| f.name == "protocol");
    let r = Report::build(meta, records);
    assert!(r.comparisons[0].significant(), "{:?}", r.comparisons[0]);
    let v = r.verdict();
    assert_eq!(v.lines.len(), 1, "{:?}", v.lines);
    assert_eq!(v.lines[0].kind, Kind::Same);
    assert!(
        v.lines[0]
            .text
            .starts_with("h2 vs h1-tls: equal within 2 % (1.00×, p = 0.000, n = 10+10)"),
        "{}",
        v.lines[0].text
    );
    assert!(
        v.headline
            .ends_with("No significant difference larger than 2 %."),
        "{}",
        v.headline
    );
}

#[test]
fn three_repetitions_a_side_are_never_called_no_difference() {
    let r = compare_matrix(3);
    let term = terminal_verdict(&r);
    eprintln!("{term}");
    assert!(!term.contains("no significant difference"), "{term}");
    assert!(!term.contains(" ~ "), "{term}");
    let h2 = texts(&r, Kind::Untested)
        .into_iter()
        .find(|t| t.starts_with("h2 vs h1-tls: "))
        .expect("h2 vs h1-tls untested");
    assert!(
        h2.starts_with("h2 vs h1-tls: h2 looks faster in 4 of 5 conditions, 3.4"),
        "{h2}"
    );
    assert!(
        h2.ends_with("3+3 repetitions are too few to test at 5 %: use -r 5"),
        "{h2}"
    );
    let v = r.verdict();
    assert!(
        v.headline
            .contains("Largest difference, untested: h3 looks 8.82× faster than h1-tls at profile none, delay 50ms, resources 120 (3+3 repetitions)."),
        "{}",
        v.headline
    );
    assert!(v.lines.iter().all(|l| l.kind != Kind::Significant));
}

#[test]
fn a_single_repetition_each_is_never_called_significant() {
    let mut records = Vec::new();
    for (p, s) in [("h1-tls", 0.5), ("h2", 0.1)] {
        let alpn = if p == "h2" { "h2" } else { "http/1.1" };
        records.push(record(p, "20ms", 0, s, alpn, 20_000));
        records.push(record(p, "50ms", 0, s * 2.0, alpn, 50_000));
    }
    let r = Report::build(common::meta(&["h1-tls", "h2"]), records);
    let v = r.verdict();
    assert_eq!(v.lines.len(), 1, "{:?}", v.lines);
    assert_eq!(v.lines[0].kind, Kind::Untested);
    assert_eq!(
        v.lines[0].text,
        "h2 vs h1-tls: looks to hold across delay — h2 looks faster under delay 20ms (5.00×) and 50ms (5.00×); 1+1 repetitions are too few to test at 5 %: use -r 5"
    );
}

#[test]
fn the_compare_matrix_fits_twelve_terminal_lines() {
    let r = compare_matrix(5);
    let term = terminal_verdict(&r);
    eprintln!("{term}");
    assert!(term.lines().count() <= 12, "{term}");
    let lines: Vec<&str> = term.lines().collect();
    assert!(lines[0].starts_with("verdict: Fastest: h2 in "), "{term}");
    let pair = |start: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no line {start:?}:\n{term}"))
            .to_string()
    };
    let h2 = pair("  > h2 vs h1-tls: ");
    assert!(
        h2.starts_with("  > h2 vs h1-tls: h2 faster in 4 of 5 conditions, 3.4"),
        "{h2}"
    );
    assert!(
        h2.contains("(largest 8.44×, CI 8.38–8.50, delay 20ms, resources 120)"),
        "{h2}"
    );
    // What the network changes, and what it does not: one line still.
    assert!(
        h2.ends_with("; profile Regular 4G: no significant difference (1.00×) — depends on profile (faster under profile none; no significant difference under Regular 4G); holds across delay and resources"),
        "{h2}"
    );
    // Mixed directions are said as such.
    let h3 = pair("  > h3 vs h2: ");
    assert!(
        h3.starts_with("  > h3 vs h2: h3 faster in 2, slower in 2 of 5 conditions: faster 1.05× ("),
        "{h3}"
    );
    // h1 within 1 % of h1-tls: equal, not "1.01× faster".
    let h1 = pair("  ~ h1 vs h1-tls: ");
    assert!(
        h1.starts_with("  ~ h1 vs h1-tls: equal within 2 % in 4 conditions (0.99×)"),
        "{h1}"
    );
}

/// One controller on both ends, but the origin's h3 encoder ran no table while h2's ran
/// 4096 bytes: the comparisons of h3 with h2 say so, those with HTTP/1.1 (no table) do not.
#[test]
fn different_header_tables_are_not_like_for_like() {
    let r = compare_matrix_with(5, |p, r| {
        r.server_cc.insert("cubic".into(), 1);
        match p {
            "h2" => r.server_encoder_tables.insert("4096".into(), 1),
            "h3" => r.server_encoder_tables.insert("0".into(), 1),
            _ => None,
        };
    });
    let v = r.verdict();
    let problems: Vec<_> = v.lines.iter().filter(|l| l.kind == Kind::Problem).collect();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].problem, Some(Problem::NotLikeForLike));
    assert_eq!(
        problems[0].count, 5,
        "h3 vs h2 in 5 conditions: {}",
        problems[0].text
    );
    assert!(
        problems[0].text.starts_with(
            "not like for like ×5 (first: h3 vs h2: the origin compressed their response heads with header tables of 0 and 4096 bytes (read back), so the difference mixes the protocol with header compression; set header_table for both"
        ),
        "{}",
        problems[0].text
    );
    // The same table on both: nothing to say.
    let r = compare_matrix_with(5, |p, r| {
        r.server_cc.insert("cubic".into(), 1);
        if p == "h2" || p == "h3" {
            r.server_encoder_tables.insert("4096".into(), 1);
        }
    });
    assert!(
        !r.verdict().lines.iter().any(|l| l.kind == Kind::Problem),
        "{:?}",
        r.verdict().lines
    );
}

#[test]
fn problems_are_grouped_by_kind() {
    let r = compare_matrix(5);
    let v = r.verdict();
    let problems: Vec<_> = v.lines.iter().filter(|l| l.kind == Kind::Problem).collect();
    // h3 against h1-tls and against h2 in 5 conditions each: one line, counted.
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].problem, Some(Problem::NotLikeForLike));
    assert_eq!(problems[0].count, 10);
    assert!(
        problems[0].text.starts_with(
            "not like for like ×10 (first: h3 vs h1-tls: their servers sent with cubic and bbr (read back)"
        ),
        "{}",
        problems[0].text
    );
    assert!(
        problems[0]
            .text
            .ends_with("[profile none, delay 20ms, resources 30])"),
        "{}",
        problems[0].text
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
    assert_eq!(
        texts(&r, Kind::Problem),
        [
            "fell back: h3 fell back: its connections negotiated h2 ×5, so these figures are not h3's [delay 20ms]",
            "errors: h2 had errors in 2 of 5 repetitions (first: 4 of 30 requests failed (connection reset by peer)) [delay 50ms]",
        ]
    );
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
    assert!(md.contains("- ⚠ fell back: h3 fell back"), "{md}");
}

#[test]
fn the_verdict_is_the_same_text_in_every_format() {
    let r = compare_matrix(5);
    let v = r.verdict();
    let md = MarkdownExporter.render(&r).expect("markdown");
    let html = HtmlExporter.render(&r).expect("html");
    let json: serde_json::Value =
        serde_json::from_str(&SummaryJsonExporter.render(&r).expect("json")).expect("json");
    let term = terminal_verdict(&r);
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    assert!(md.contains(&format!("**{}**", v.headline)));
    assert!(html.contains(&esc(&v.headline)));
    assert_eq!(json["verdict"]["headline"], v.headline.as_str());
    for (i, l) in v.lines.iter().enumerate() {
        assert!(
            term.contains(&format!(" {} {}\n", l.kind.sign(), l.text)) || term.ends_with(&l.text),
            "{}",
            l.text
        );
        assert!(md.contains(&format!(" {}\n", l.text)), "{}", l.text);
        assert!(html.contains(&esc(&l.text)), "{}", l.text);
        assert_eq!(json["verdict"]["lines"][i]["text"], l.text.as_str());
    }
    // The per-condition list is in the Comparisons sections, not on the terminal.
    assert!(md.contains("## Comparisons"));
    assert!(html.contains("<h2 id=\"comparisons\">Comparisons</h2>"));
    assert!(!term.contains("[delay 20ms]"), "{term}");
}

/// A browser page comparison of h2 and h3: LCP and load per repetition, page TTFB,
/// connections and bytes.
fn browser_records(lcp: bool) -> Vec<Record> {
    let mut records = Vec::new();
    for (p, lcp_ms, load_s, conns) in [("h2", 200.0, 1.0, 1u64), ("h3", 160.0, 1.0, 2)] {
        for rep in 0..5u32 {
            let mut r = record(p, "20ms", rep, load_s + f64::from(rep) * 0.001, p, 20_000);
            let res = r.result.as_mut().expect("result");
            let extra = &mut res.config.extra;
            if lcp {
                extra.insert("lcp_ms".into(), format!("{:.1}", lcp_ms + f64::from(rep)));
            }
            extra.insert("ttfb_ms".into(), format!("{:.1}", 40.0 + f64::from(rep)));
            res.connections = conns;
            res.bytes.total_received = 1_200_000;
            r.cell = format!("protocol={p}");
            r.factors.remove("delay");
            r.factors.remove("resources");
            records.push(r);
        }
    }
    records
}

fn browser_meta(metric: hxlab_report::Metric) -> ExperimentMeta {
    let mut meta = common::meta(&["h2", "h3"]);
    meta.workload = Some(Workload::Browser);
    meta.factors.retain(|f| f.name == "protocol");
    meta.metric = Some(metric);
    meta
}

#[test]
fn a_browser_experiment_is_judged_by_lcp_and_by_load() {
    // Load times tie; LCP does not: h3 paints its largest element 40 ms sooner.
    let mut records = browser_records(true);
    // One repetition that painted nothing has no LCP: left out and said.
    records[9]
        .result
        .as_mut()
        .expect("result")
        .config
        .extra
        .remove("lcp_ms");
    let r = Report::build(browser_meta(hxlab_report::Metric::LcpS), records);
    let h3 = r
        .cells
        .iter()
        .find(|c| c.key == "protocol=h3")
        .expect("h3 cell");
    assert_eq!(h3.values.len(), 4);
    let v = r.verdict();
    let lines: Vec<&str> = v.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    assert!(
        lines[0].starts_with("LCP: h3 vs h2: h3 1.2") && lines[0].contains("× faster (CI "),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with("load: h3 vs h2: equal within 2 % (1.00×"),
        "{lines:?}"
    );
    assert_eq!(
        lines[2],
        "medians: h2 TTFB 42 ms, 1 connections, 1.20 MB; h3 TTFB 42 ms, 2 connections, 1.20 MB"
    );
    assert_eq!(
        lines[3],
        "metric not recorded: h3: 1 of 5 clean repetitions recorded no figure for the metric"
    );
    assert!(
        v.headline.starts_with("Fastest by LCP: h3."),
        "{}",
        v.headline
    );
    let md = MarkdownExporter.render(&r).expect("markdown");
    assert!(md.contains("| protocol | LCP (s) |"), "{md}");
}

#[test]
fn a_browser_experiment_without_lcp_is_judged_by_load() {
    let r = Report::build(
        browser_meta(hxlab_report::Metric::TimeS),
        browser_records(false),
    );
    let v = r.verdict();
    let lines: Vec<&str> = v.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("load: h3 vs h2: "), "{lines:?}");
    assert!(lines[1].ends_with("; not recorded: LCP"), "{lines:?}");
}

#[test]
fn a_replay_that_missed_the_recording_is_named() {
    let mut records = browser_records(true);
    for r in &mut records {
        r.replay = Some(hxlab_core::har::ReplayOutcome {
            tally: hxlab_core::har::ReplayTally {
                hits: 12,
                ..Default::default()
            },
            ..Default::default()
        });
    }
    records[7].replay = Some(hxlab_core::har::ReplayOutcome {
        tally: hxlab_core::har::ReplayTally {
            hits: 11,
            misses: 1,
            ..Default::default()
        },
        first_miss: Some("GET https://static.test/app.js".into()),
    });
    let r = Report::build(browser_meta(hxlab_report::Metric::LcpS), records);
    let h3 = r
        .cells
        .iter()
        .find(|c| c.key == "protocol=h3")
        .expect("h3 cell");
    let replay = h3.replay.as_ref().expect("replay counts");
    assert_eq!((replay.tally.hits, replay.tally.misses), (5 * 12 - 1, 1));
    assert_eq!(h3.replay_missed_runs, 1);
    let lines = texts(&r, Kind::Problem);
    assert_eq!(
        lines,
        vec!["replay missed the recording: h3: the replay missed 1 request(s) in 1 of 5 repetitions (first: GET https://static.test/app.js)"],
        "{lines:?}"
    );
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("protocol=h3") && w.contains("missed 1 request(s)")));
}

/// A page load's one failed resource, a beacon of another site, as `hxlab page` counts it;
/// the record's RunResult has it as a failed request, as `PageRun::to_run_result` writes it.
fn with_failed_beacon(r: &mut Record) {
    use hxlab_core::page::{Party, ProblemKind, ProblemResource, ResourceProblems};
    let mut p = ResourceProblems::default();
    p.add(ProblemResource {
        method: "POST".into(),
        url: "https://beacon.example/collect".into(),
        kind: ProblemKind::Failed,
        detail: "net::ERR_CONNECTION_REFUSED".into(),
        party: Party::Third,
    });
    r.page_problems = Some(p);
    let res = r.result.as_mut().expect("result");
    res.requests_started += 1;
    res.requests_failed += 1;
    res.errors.other += 1;
}

#[test]
fn failed_page_resources_are_grouped_and_a_pair_whose_failures_differ_says_so() {
    // The beacon failed in every h2 run and in no h3 run.
    let mut records = browser_records(true);
    for r in records.iter_mut().filter(|r| r.cell == "protocol=h2") {
        with_failed_beacon(r);
        r.page_problems.get_or_insert_with(Default::default);
    }
    for r in records.iter_mut().filter(|r| r.cell == "protocol=h3") {
        r.page_problems = Some(Default::default());
    }
    let r = Report::build(browser_meta(hxlab_report::Metric::LcpS), records.clone());
    // The runs with the failed beacon still count: LCP and load in every cell.
    for c in &r.cells {
        assert_eq!((c.values.len(), c.failed), (5, 0), "{}", c.key);
    }
    let v = r.verdict();
    let problems: Vec<&str> = v
        .lines
        .iter()
        .filter(|l| l.problem == Some(Problem::ResourcesFailed))
        .map(|l| l.text.as_str())
        .collect();
    assert_eq!(
        problems,
        vec!["page resources failed: h2: 1 resource failed in 5 of 5 runs: POST https://beacon.example/collect (net::ERR_CONNECTION_REFUSED, third party)"]
    );
    assert!(
        v.headline.ends_with(
            "Page resources failed in 1 cell(s) (!); the pages loaded, so their runs count."
        ),
        "{}",
        v.headline
    );
    assert!(!v.headline.contains("have problems"), "{}", v.headline);
    let pairs = texts(&r, Kind::Significant);
    assert!(
        pairs[0].starts_with("LCP: h3 vs h2: ")
            && pairs[0].ends_with("; their failures differ, so the difference is not the protocol's alone: h3 none, h2 1 failed in 5 of 5 (POST https://beacon.example/collect)"),
        "{pairs:?}"
    );
    // The same failure on both sides: grouped, but the pair is like for like.
    for r in records.iter_mut().filter(|r| r.cell == "protocol=h3") {
        with_failed_beacon(r);
    }
    let r = Report::build(browser_meta(hxlab_report::Metric::LcpS), records);
    let v = r.verdict();
    assert!(v.lines.iter().all(|l| !l.text.contains("failures differ")));
    let grouped: Vec<&hxlab_report::verdict::Line> = v
        .lines
        .iter()
        .filter(|l| l.problem == Some(Problem::ResourcesFailed))
        .collect();
    assert_eq!(grouped.len(), 1);
    assert!(
        grouped[0]
            .text
            .starts_with("page resources failed ×2 (first: h2: 1 resource failed in 5 of 5 runs"),
        "{}",
        grouped[0].text
    );
}

/// One repetition of a scheduler sweep: `secs` to the last byte, with what hxlab's origin
/// read back (the scheduler it ran, the 16 KiB mark on every TCP connection, and on h2 the
/// default priority of its 30 responses).
fn scheduled(p: &str, scheduler: &str, profile: Option<&str>, rep: u32, secs: f64) -> Record {
    let alpn = if p == "h2" { "h2" } else { "http/1.1" };
    let mut r = record(p, "20ms", rep, secs, alpn, 20_000);
    r.factors.remove("delay");
    r.factors.remove("resources");
    r.factors.insert("scheduler".into(), scheduler.into());
    r.cell = format!("protocol={p} scheduler={scheduler}");
    if let Some(profile) = profile {
        r.factors.insert("profile".into(), profile.into());
        r.cell.push_str(&format!(" profile={profile}"));
    }
    let multiplexed = p != "h1-tls";
    r.scheduling = Some(Scheduling {
        scheduler: Scheduler::parse(scheduler).ok(),
        scheduler_applies: multiplexed,
        notsent_lowat: [("16384".to_string(), if multiplexed { 1 } else { 6 })].into(),
        priorities: if multiplexed {
            [("u=3".to_string(), 30)].into()
        } else {
            Default::default()
        },
    });
    r
}

/// h1-tls and h2 under each of `schedulers` (and `profiles`, when given), five repetitions
/// a cell; `h2_over_h1` gives h2's time as a share of h1-tls's under a scheduler.
fn scheduler_sweep(
    schedulers: &[&str],
    profiles: &[&str],
    h2_over_h1: &dyn Fn(&str, &str) -> f64,
) -> Report {
    let mut records = Vec::new();
    let profile_levels: Vec<Option<&str>> = if profiles.is_empty() {
        vec![None]
    } else {
        profiles.iter().map(|p| Some(*p)).collect()
    };
    for &profile in &profile_levels {
        for s in schedulers {
            for rep in 0..5u32 {
                let h1 = common::secs("h1-tls", 30.0, rep);
                let share = h2_over_h1(s, profile.unwrap_or(""));
                records.push(scheduled("h1-tls", s, profile, rep, h1));
                records.push(scheduled("h2", s, profile, rep, h1 * share));
            }
        }
    }
    let mut meta = common::meta(&["h1-tls", "h2"]);
    meta.factors.retain(|f| f.name == "protocol");
    meta.factors.push(FactorLevels {
        name: "scheduler".into(),
        levels: schedulers.iter().map(|s| s.to_string()).collect(),
    });
    if !profiles.is_empty() {
        meta.factors.push(FactorLevels {
            name: "profile".into(),
            levels: profiles.iter().map(|s| s.to_string()).collect(),
        });
    }
    Report::build(meta, records)
}

#[test]
fn the_verdict_says_when_the_protocol_verdict_depends_on_the_scheduler() {
    let r = scheduler_sweep(&["rfc9218", "round-robin", "fifo"], &[], &|s, _| match s {
        "rfc9218" => 1.0 / 1.7,
        "round-robin" => 1.0 / 1.5,
        _ => 1.6,
    });
    let v = r.verdict();
    let lines: Vec<&str> = v.lines.iter().map(|l| l.text.as_str()).collect();
    assert_eq!(
        lines,
        [
            "h2 vs h1-tls: depends on scheduler — h2 faster under scheduler rfc9218 (1.70×, CI 1.69–1.71) and round-robin (1.50×, CI 1.49–1.51), slower under fifo (1.60×, CI 1.59–1.61)",
            "origin hxlab, read back: scheduler rfc9218, round-robin and fifo (h1-tls: none, one response at a time per connection); TCP_NOTSENT_LOWAT 16384",
        ]
    );
    assert_eq!(v.lines[1].kind, Kind::Info);
    let across = &v.lines[0].across;
    assert_eq!(across.len(), 1);
    assert_eq!(
        (across[0].factor.as_str(), across[0].holds),
        ("scheduler", false)
    );
    let directions: Vec<(&str, Vec<Direction>)> = across[0]
        .levels
        .iter()
        .map(|l| (l.level.as_str(), l.directions.clone()))
        .collect();
    assert_eq!(
        directions,
        [
            ("rfc9218", vec![Direction::Better]),
            ("round-robin", vec![Direction::Better]),
            ("fifo", vec![Direction::Worse]),
        ]
    );
    // summary.json carries the same, for machines.
    let json: serde_json::Value =
        serde_json::from_str(&SummaryJsonExporter.render(&r).expect("json")).expect("json");
    assert_eq!(json["verdict"]["lines"][0]["across"][0]["holds"], false);
    assert_eq!(
        json["verdict"]["lines"][0]["across"][0]["levels"][2],
        serde_json::json!({"level": "fifo", "directions": ["worse"]})
    );
    let h2 = json["cells"]
        .as_array()
        .and_then(|cells| {
            cells
                .iter()
                .find(|c| c["key"] == "protocol=h2 scheduler=rfc9218")
        })
        .expect("h2 cell");
    assert_eq!(h2["scheduling"]["scheduler"], "rfc9218");
    assert_eq!(h2["scheduling"]["priorities"]["u=3"], 150);
}

#[test]
fn the_verdict_says_when_the_protocol_verdict_holds_across_the_scheduler() {
    let r = scheduler_sweep(&["rfc9218", "fifo"], &[], &|s, _| {
        if s == "rfc9218" {
            1.0 / 1.7
        } else {
            1.0 / 1.2
        }
    });
    let v = r.verdict();
    assert_eq!(
        v.lines[0].text,
        "h2 vs h1-tls: holds across scheduler — h2 faster under scheduler rfc9218 (1.70×, CI 1.69–1.71) and fifo (1.20×, CI 1.19–1.21)"
    );
    assert!(v.lines[0].across[0].holds);
}

/// Two factors swept: the line keeps its conditions and ends with what depends on which
/// factor, one line for the pair still.
#[test]
fn several_swept_factors_fold_into_the_pair_line() {
    let r = scheduler_sweep(
        &["rfc9218", "fifo"],
        &["none", "wpt:3G"],
        &|s, profile| match (s, profile) {
            ("rfc9218", "none") => 1.0 / 1.7,
            ("rfc9218", _) => 1.0 / 1.3,
            (_, "none") => 1.6,
            _ => 1.2,
        },
    );
    let v = r.verdict();
    assert_eq!(
        v.lines[0].text,
        "h2 vs h1-tls: h2 faster in 2, slower in 2 of 4 conditions: faster 1.30–1.70× (largest 1.70×, CI 1.69–1.71, scheduler rfc9218, profile none), slower 1.20–1.60× (largest 1.60×, CI 1.59–1.61, scheduler fifo, profile none) — depends on scheduler (faster under scheduler rfc9218; slower under fifo); holds across profile"
    );
    assert_eq!(v.lines.len(), 2, "{:?}", v.plain());
}

/// A cell whose origin ran another scheduler than it asked for is named, as a controller
/// that was not as asked is.
#[test]
fn an_origin_that_did_not_run_as_asked_is_named() {
    let (meta, mut records) = {
        let r = scheduler_sweep(&["rfc9218", "fifo"], &[], &|_, _| 0.5);
        (r.meta, r.records)
    };
    for r in records
        .iter_mut()
        .filter(|r| r.cell == "protocol=h2 scheduler=fifo")
    {
        let s = r.scheduling.as_mut().expect("read back");
        s.scheduler = Some(Scheduler::Rfc9218);
        s.notsent_lowat = [("off".to_string(), 1)].into();
    }
    let r = Report::build(meta, records);
    assert_eq!(
        texts(&r, Kind::Problem),
        ["origin not as asked: h2: asked for scheduler fifo but the origin ran rfc9218 [scheduler fifo]"]
    );
}

/// Two browser engines swept: each pair is judged per engine (never pooled), and the line
/// names the engines as people do: `faster in Chromium (…), equal within 2 % in Firefox`.
#[test]
fn the_verdict_says_per_engine_whether_the_direction_holds() {
    let mut records = Vec::new();
    for engine in ["chromium", "firefox"] {
        for rep in 0..5u32 {
            let h2 = common::secs("h2", 30.0, rep);
            let h3 = if engine == "chromium" {
                h2 / 1.2
            } else {
                h2 * 1.001
            };
            for (p, secs, alpn) in [("h2", h2, "h2"), ("h3", h3, "h3")] {
                let mut r = record(p, "20ms", rep, secs, alpn, 20_000);
                r.factors.remove("delay");
                r.factors.remove("resources");
                r.factors.insert("browser".into(), engine.into());
                r.cell = format!("protocol={p} browser={engine}");
                records.push(r);
            }
        }
    }
    let mut meta = common::meta(&["h2", "h3"]);
    meta.factors.retain(|f| f.name == "protocol");
    meta.factors.push(FactorLevels {
        name: "browser".into(),
        levels: vec!["chromium".into(), "firefox".into()],
    });
    let v = Report::build(meta, records).verdict();
    let line = &v.lines[0].text;
    assert!(
        line.starts_with("h3 vs h2: depends on browser — h3 faster in Chromium (1.20×"),
        "{line}"
    );
    assert!(line.contains(", equal within 2 % in Firefox"), "{line}");
    assert!(!line.contains("under browser"), "{line}");
}
