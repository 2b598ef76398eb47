//! What a series of page loads adds up to ([`report`]) and the document of
//! `hxlab page --json` ([`report_json`]).

use crate::options::PageOptions;
use crate::page::PageSession;
use hxlab_contract::{
    EarlyHintsReport, PageLink, PageReport, PageRunEntry, PushReport, SyntheticPage,
};
use hxlab_core::page::{
    Outcome, PageRun, PageSummary, PageTotals, ProblemsAcross, PUSH_REMOVED_IN,
};

/// Sums up the runs; left-out runs are numbered by their position among all runs.
pub fn report(outcomes: &[Outcome], push: bool) -> PageTotals {
    let repeat_summary = repeat_summary(outcomes);
    let measured: Vec<PageRun> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Measured(r) => Some((**r).clone()),
            Outcome::Failed(_) => None,
        })
        .collect();
    let mut summary = hxlab_core::page::summarize(&measured);
    summary.left_out = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match o {
            Outcome::Measured(r) => r.flag.as_ref().map(|f| format!("run {}: {f}", i + 1)),
            Outcome::Failed(e) => Some(format!("run {}: failed: {e}", i + 1)),
        })
        .collect();
    summary.runs = outcomes.len();
    let browser = measured
        .first()
        .map(|r| r.browser.clone())
        .unwrap_or_else(|| "the browser (no run finished)".to_string());
    let browser_major = measured.first().map(|r| r.browser_major).unwrap_or(0);
    let push_ignored = measured.first().is_some_and(PageRun::push_ignored);
    let push_note = if !push {
        None
    } else if measured.is_empty() {
        Some(
            "push was requested; no run finished, so whether the browser honours it is unknown"
                .to_string(),
        )
    } else if push_ignored {
        Some(format!(
            "push was requested, but {browser} ignores HTTP/2 server push (removed in Chromium {PUSH_REMOVED_IN}, Firefox 132); these figures show no push effect"
        ))
    } else {
        Some(format!("push was requested and {browser} supports it"))
    };
    PageTotals {
        summary,
        repeat_summary,
        browser,
        browser_major,
        push_ignored,
        push_note,
        finished_runs: measured.len(),
        early_hints_runs: measured.iter().filter(|r| r.early_hints > 0).count(),
        preloads_used: measured.iter().map(|r| r.early_hint_preloads_used).sum(),
        problems: problems_across(&measured),
    }
}

/// What went wrong with resources over the runs that finished.
fn problems_across(measured: &[PageRun]) -> ProblemsAcross {
    let mut across = ProblemsAcross::default();
    for r in measured {
        across.add(&r.problems);
    }
    across
}

/// The summary of the repeat views (`None` when no run has one). A run whose repeat view is
/// missing (the run failed) or flagged is listed in `left_out` by its number.
fn repeat_summary(outcomes: &[Outcome]) -> Option<PageSummary> {
    let any = outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Measured(r) if r.repeat_view.is_some()));
    if !any {
        return None;
    }
    let repeats: Vec<PageRun> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Measured(r) => r.repeat_view.as_deref().cloned(),
            Outcome::Failed(_) => None,
        })
        .collect();
    let mut summary = hxlab_core::page::summarize(&repeats);
    summary.left_out = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match o {
            Outcome::Measured(r) => match &r.repeat_view {
                Some(rv) => rv.flag.as_ref().map(|f| format!("run {}: {f}", i + 1)),
                None => Some(format!("run {}: no repeat view", i + 1)),
            },
            Outcome::Failed(e) => Some(format!("run {}: failed: {e}", i + 1)),
        })
        .collect();
    summary.runs = outcomes.len();
    Some(summary)
}

/// The document of `hxlab page --json`: every run, the summary and what was asked (the
/// caller adds the replay's counts and the recording).
pub fn report_json(
    session: &PageSession,
    opts: &PageOptions,
    outcomes: &[Outcome],
    rep: &PageTotals,
) -> PageReport {
    let runs = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| PageRunEntry {
            run: i + 1,
            outcome: o.clone(),
            replay: None,
        })
        .collect();
    let link = session.link.as_ref().map(|l| PageLink {
        link: opts.link.clone(),
        host: l.host_addr().to_string(),
        client: l.client_addr().to_string(),
    });
    PageReport {
        tool: PageReport::TOOL.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        url: session.url.clone(),
        protocol: opts.proto,
        discovery: opts.discovery,
        link_stats: None,
        engine: opts.engine,
        browser: rep.browser.clone(),
        browser_major: rep.browser_major,
        link,
        synthetic: opts.synthetic.as_ref().map(|s| SyntheticPage {
            n: s.n,
            size: s.size,
            delay_ms: s.delay.as_secs_f64() * 1000.0,
            cache_s: s.cache.map(|d| d.as_secs()),
        }),
        cpu_slowdown: opts.cpu_slowdown,
        repeat_view: opts.repeat_view,
        server_cc: session.server_cc(),
        client_tcp_cc: session.client_tcp_cc(),
        // A browser asked for HTTP/1.1 sends one request at a time per connection.
        scheduling: session.scheduling(opts.proto != hxlab_core::Proto::H1),
        push: PushReport {
            requested: opts.push,
            ignored_by_browser: opts.push && rep.push_ignored,
            note: rep.push_note.clone(),
        },
        early_hints: EarlyHintsReport {
            requested: opts.early_hints,
            runs_with_103: rep.early_hints_runs,
            resources_from_preloads: rep.preloads_used,
        },
        runs,
        summary: rep.summary.clone(),
        repeat_view_summary: rep.repeat_summary.clone(),
        replay: None,
        recorded: None,
    }
}
