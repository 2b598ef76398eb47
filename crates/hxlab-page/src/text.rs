//! What `hxlab page` tells a person while it runs: the head of the table, one row per run
//! (and per repeat view) with its replay counts and why it was left out, and the summary
//! after the runs. The caller chooses where the text goes (stdout, or stderr when the JSON
//! owns stdout).

use crate::page::PageSession;
use hxlab_contract::{Discovery, PageJob, PageReport, ReplayCounts};
use hxlab_core::page::{PageRun, PageSummary, PageTotals, View};
use std::io::Write;

/// The lines before the runs: what is loaded, behind what, and the table's head.
pub fn header(text: &mut dyn Write, job: &PageJob, session: &PageSession) -> std::io::Result<()> {
    let over = match job.discovery {
        Discovery::Forced => job.proto.to_string(),
        d => format!("the protocol the browser finds (--discovery {})", d.name()),
    };
    writeln!(
        text,
        "hxlab page: {} over {over}, {} run(s)",
        session.url, job.runs
    )?;
    if let Some(l) = &session.link {
        let what = match job.link.as_ref().and_then(|l| l.profile.as_deref()) {
            Some(p) => format!("profile {p}"),
            None => "the link options".to_string(),
        };
        writeln!(
            text,
            "the browser runs behind an emulated link ({what}) at {}, the origin at {}",
            l.client_addr(),
            l.host_addr()
        )?;
    }
    if job.repeat_view {
        writeln!(
            text,
            "run Nr is run N's repeat view: the same browser, its cache and connections kept"
        )?;
    } else if job.discovery.discovers() {
        writeln!(
            text,
            "run N is a first visit from a fresh profile; run Nret the returning visitor: a new browser on the profile N left (Alt-Svc and HTTP caches kept, connections closed)"
        )?;
    }
    if job.discovery == Discovery::UdpBlocked {
        writeln!(
            text,
            "the link drops every UDP packet: QUIC cannot pass, so the browser falls back to TCP"
        )?;
    }
    writeln!(
        text,
        "{:>4}  {:<16} {:>9} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "run", "protocols", "loaded", "conns", "bytes", "TTFB", "DCL", "load", "FCP", "LCP", "SI"
    )
}

/// The rows of one measured run `i`: its figures, its replay counts, and its repeat view.
pub fn run_rows(
    text: &mut dyn Write,
    i: u32,
    run: &PageRun,
    replay: Option<&ReplayCounts>,
) -> std::io::Result<()> {
    writeln!(text, "{}", run_row(&i.to_string(), run))?;
    writeln!(text, "     used: {}", run.shares.describe())?;
    if let Some(c) = replay {
        writeln!(text, "     replay: {}", replay_line(c))?;
    }
    problem_rows(text, run)?;
    if let Some(flag) = &run.flag {
        writeln!(text, "     ^ left out: {flag}")?;
    }
    if let Some(rv) = &run.repeat_view {
        let label = match rv.view {
            View::Returning => format!("{i}ret"),
            _ => format!("{i}r"),
        };
        writeln!(text, "{}", run_row(&label, rv))?;
        writeln!(text, "     used: {}", rv.shares.describe())?;
        problem_rows(text, rv)?;
        if let Some(flag) = &rv.flag {
            writeln!(text, "     ^ {} left out: {flag}", view_name(rv.view))?;
        }
    }
    Ok(())
}

/// A run's resources that did not load cleanly (up to [`hxlab_core::page::MAX_NAMED`] of
/// them named), and the hosts the protocol check left out.
fn problem_rows(text: &mut dyn Write, run: &PageRun) -> std::io::Result<()> {
    if let Some(line) = run.problems.text() {
        writeln!(text, "     resources: {line}")?;
        for r in run.problems.first.iter().skip(1) {
            writeln!(text, "       also: {}", r.text())?;
        }
    }
    if !run.outside_protocol_check.is_empty() {
        writeln!(
            text,
            "     protocol check: not counted, hosts outside the origins under test: {}",
            run.outside_protocol_check.join("; ")
        )?;
    }
    Ok(())
}

/// The summary after the runs: medians with intervals, push and early hints, left-out runs,
/// and the origin's congestion control, scheduler and mark as read back from it (`server_cc`,
/// `scheduling`).
pub fn footer(
    text: &mut dyn Write,
    job: &PageJob,
    rep: &PageTotals,
    doc: &PageReport,
) -> std::io::Result<()> {
    let summary = &rep.summary;
    let (first, second) = match (job.repeat_view, job.discovery.discovers()) {
        (true, _) => (" (first view)", " (repeat view)"),
        (false, true) => (" (first visit)", " (returning visitor)"),
        (false, false) => ("", ""),
    };
    let asked = match job.discovery {
        Discovery::Forced => job.proto.to_string(),
        d => format!("--discovery {}", d.name()),
    };
    let views = [
        (first, Some(summary)),
        (second, rep.repeat_summary.as_ref()),
    ];
    for (view, s) in views {
        let Some(s) = s else { continue };
        writeln!(text)?;
        writeln!(
            text,
            "{}, {asked}{view}: {} of {} run(s) counted; median [95% CI]",
            rep.browser, s.valid_runs, s.runs
        )?;
        summary_lines(text, s)?;
        // What this engine cannot measure is said, never shown as a number.
        for metric in job.browser.lacks().iter().filter(|_| s.valid_runs > 0) {
            writeln!(
                text,
                "  {metric:<24} not available in {}",
                job.browser.label()
            )?;
        }
    }
    if let Some(stats) = &doc.link_stats {
        writeln!(text, "  link: {}", link_line(stats))?;
    }
    if let Some(note) = &rep.push_note {
        writeln!(text, "  push: {note}")?;
    }
    if job.early_hints {
        writeln!(
            text,
            "  early hints: the browser received 103 in {} of {} run(s); {} resource(s) were served from the preloads it started on them",
            rep.early_hints_runs, rep.finished_runs, rep.preloads_used
        )?;
    }
    for l in rep.problems.lines("runs") {
        writeln!(text, "  resources: {l}")?;
    }
    for l in &summary.left_out {
        writeln!(text, "  left out: {l}")?;
    }
    for l in rep.repeat_summary.iter().flat_map(|s| &s.left_out) {
        writeln!(
            text,
            "  {} left out: {l}",
            second.trim_matches([' ', '(', ')'])
        )?;
    }
    if let Some(cc) = &doc.server_cc {
        let counts = hxlab_core::cc::counts_text(cc);
        writeln!(
            text,
            "  origin's congestion control, read back from its connections: {counts}"
        )?;
    }
    if let Some(cc) = &doc.client_tcp_cc {
        writeln!(
            text,
            "  browser's TCP congestion control (its network namespace's default, read back): {cc}"
        )?;
    }
    if let Some(s) = &doc.scheduling {
        let scheduler = match (s.scheduler, s.scheduler_applies) {
            (_, false) => "none (HTTP/1.1 sends one response at a time per connection)".into(),
            (Some(sched), true) => sched.name().to_string(),
            (None, true) => "not said".into(),
        };
        writeln!(
            text,
            "  origin's scheduler, read back: {scheduler}; TCP_NOTSENT_LOWAT of its connections: {}",
            s.lowat_text()
        )?;
    }
    Ok(())
}

/// What a second view is called in the text.
fn view_name(view: View) -> &'static str {
    match view {
        View::First => "first view",
        View::Repeat => "repeat view",
        View::Returning => "returning visit",
    }
}

/// The link's counters in a line: packets each way and what it dropped, UDP apart.
fn link_line(stats: &hxlab_link::LinkStats) -> String {
    let (down, up) = (&stats.down, &stats.up);
    let mut line = format!(
        "{} packet(s) down, {} up; dropped {} down, {} up",
        down.packets_in,
        up.packets_in,
        down.dropped(),
        up.dropped()
    );
    let udp = down.dropped_udp + up.dropped_udp;
    if udp > 0 {
        line.push_str(&format!(
            " ({udp} UDP packet(s) blocked: {} down, {} up)",
            down.dropped_udp, up.dropped_udp
        ));
    }
    line
}

/// One line per metric: median and interval.
fn summary_lines(text: &mut dyn Write, s: &PageSummary) -> std::io::Result<()> {
    for (key, label, unit) in [
        ("ttfb_ms", "TTFB", "ms"),
        ("dom_content_loaded_ms", "DOMContentLoaded", "ms"),
        ("load_ms", "load", "ms"),
        ("fcp_ms", "first contentful paint", "ms"),
        ("lcp_ms", "largest contentful paint", "ms"),
        ("speed_index_ms", "Speed Index", "ms"),
        ("visually_complete_ms", "visually complete", "ms"),
        ("connections", "connections", ""),
        ("bytes", "bytes", "B"),
        ("resources_loaded", "resources loaded", ""),
    ] {
        if let Some(m) = s.metrics.get(key) {
            writeln!(
                text,
                "  {label:<24} {:>10.1} {unit:<2} [{:.1}, {:.1}]",
                m.median, m.ci95_low, m.ci95_high
            )?;
        }
    }
    if let Some(m) = s.metrics.get("cls") {
        writeln!(
            text,
            "  {:<24} {:>10.4}    [{:.4}, {:.4}]",
            "cumulative layout shift", m.median, m.ci95_low, m.ci95_high
        )?;
    }
    Ok(())
}

/// One run's replay counts in a line: hits, near misses, misses.
fn replay_line(c: &ReplayCounts) -> String {
    let t = &c.tally;
    let mut line = format!(
        "{} from the archive, {} near miss(es), {} miss(es)",
        t.hits, t.near_misses, t.misses
    );
    if t.browser_own > 0 {
        line.push_str(&format!(
            " ({} request(s) the browser made on its own, /favicon.ico or an icon the page declares, not in the recording: answered 404, not counted as misses)",
            t.browser_own
        ));
    }
    if t.outside > 0 {
        line.push_str(&format!(
            ", {} outside the recording (hosts it never saw: failed at once, not misses)",
            t.outside
        ));
    }
    if t.recorded_failures > 0 {
        line.push_str(&format!(
            ", {} failed as recorded (answered {})",
            t.recorded_failures,
            hxlab_core::har::RECORDED_FAILURE_STATUS
        ));
    }
    for u in c.miss_urls.iter().take(5) {
        line.push_str(&format!("\n       missed: {u}"));
    }
    for u in c.outside_urls.iter().take(3) {
        line.push_str(&format!("\n       outside the recording: {u}"));
    }
    line
}

/// Milliseconds with one decimal; `-` for a time the browser did not report (negative).
fn ms(v: f64) -> String {
    if v >= 0.0 {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// A run's row of the table, labelled `i` (`3`, or `3r` for its repeat view).
fn run_row(i: &str, r: &PageRun) -> String {
    let protocols: Vec<String> = r
        .protocols
        .iter()
        .map(|(p, n)| format!("{n}×{}", if p.is_empty() { "?" } else { p }))
        .collect();
    format!(
        "{i:>4}  {:<16} {:>9} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        protocols.join(","),
        format!("{}/{}", r.resources_loaded, r.resources.len()),
        r.connections,
        hxlab_core::units::format_bytes(r.bytes),
        ms(r.ttfb_ms),
        ms(r.dom_content_loaded_ms),
        ms(r.load_ms),
        r.fcp_ms.map(ms).unwrap_or_else(|| "-".into()),
        r.lcp_ms.map(ms).unwrap_or_else(|| "-".into()),
        r.speed_index_ms.map(ms).unwrap_or_else(|| "-".into()),
    )
}
