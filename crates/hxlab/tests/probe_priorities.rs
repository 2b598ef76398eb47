//! `hxlab probe URL --priorities` against a real `hxlab serve` behind the real link: the
//! scorecard's shape, the verdict for each of serve's scheduling modes in 20 of 20 runs, and
//! the flags' usage errors. The link here is faster than the default (40 Mbit/s, 10 ms) so
//! that 60 runs fit in about a minute; the bulk is still far larger than what the server
//! commits ahead, so the classes mean the same as at the default.

mod common;

use common::{hxlab, require_root, run_with_timeout, Server};
use hxlab_contract::{PriorityScorecard, ProbeReport, SchedulingClass};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// One link and one probe at a time: the classes are judged on timing, and two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs of each mode that must all classify correctly.
const RUNS: usize = 20;

fn probe(args: &[&str]) -> (Option<i32>, String, String) {
    run_with_timeout(
        Command::new(hxlab()).arg("probe").args(args),
        Duration::from_secs(120),
    )
}

/// `hxlab probe --priorities` against `server` over the fast test link, with `extra` flags;
/// the typed report.
fn scorecards(server: &Server, extra: &[&str]) -> ProbeReport {
    let base = format!("https://127.0.0.1:{}", server.ready.tls.port());
    let bulk = format!("{base}/bytes/3MB");
    let small = format!("{base}/bytes/20KB");
    let mut args = vec![
        "-k",
        &bulk,
        "--priorities",
        "--small",
        &small,
        "--rate",
        "40mbit",
        "--rtt",
        "10ms",
        "--json",
        "-",
    ];
    args.extend_from_slice(extra);
    let (code, out, err) = probe(&args);
    assert_eq!(code, Some(0), "stdout:\n{out}\nstderr:\n{err}");
    ProbeReport::from_json(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn card<'a>(r: &'a ProbeReport, protocol: &str) -> &'a PriorityScorecard {
    r.priorities
        .as_ref()
        .and_then(|p| p.scorecards.iter().find(|c| c.protocol == protocol))
        .unwrap_or_else(|| panic!("no {protocol} scorecard: {r:?}"))
}

/// Whether this `hxlab serve` has `--scheduler` (the modes other than its default need it).
fn serve_has_scheduler() -> bool {
    let (_, out, _) = run_with_timeout(
        Command::new(hxlab()).args(["serve", "--help"]),
        Duration::from_secs(30),
    );
    out.contains("--scheduler")
}

/// Probes serve started with `--scheduler MODE` [`RUNS`] times; every run's verdict must be
/// `want` for each protocol in `protocols`.
fn classifies(mode: &str, protocols: &[&str], want: SchedulingClass) {
    if !require_root("the priorities probe runs behind hxlab link") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let args: Vec<&str> = if serve_has_scheduler() {
        vec!["--scheduler", mode]
    } else if mode == "round-robin" {
        // Before --scheduler, serve interleaved every response (one DATA frame per stream).
        Vec::new()
    } else {
        hxlab_testkit::skip(&format!(
            "this hxlab serve has no --scheduler, so it has no {mode} mode to classify"
        ));
        return;
    };
    let server = Server::start_bound("0.0.0.0", &args);
    let mut wrong = Vec::new();
    for run in 0..RUNS {
        let r = scorecards(&server, &["--tests", "none"]);
        for &p in protocols {
            let c = card(&r, p);
            if c.verdict != Some(want) {
                wrong.push(format!("run {run} {p}: {:?} {:?}", c.verdict, c));
            }
        }
    }
    // HTTP/2: every run. HTTP/3: a burst loss at the full queue can still hide the order of
    // one run in ten or twenty (docs/priorities-probe.md); at most 3 of 20 may miss.
    let h2_wrong = wrong.iter().filter(|w| w.contains(" h2:")).count();
    let h3_wrong = wrong.len() - h2_wrong;
    assert!(
        h2_wrong == 0 && h3_wrong <= 3,
        "{mode}: {} of {RUNS} runs misclassified:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The protocols whose class a mode fixes: before --scheduler, serve's HTTP/3 left the order
/// to quinn and was classified as what it is (`other` in most runs), not asserted.
fn protocols() -> &'static [&'static str] {
    if serve_has_scheduler() {
        &["h2", "h3"]
    } else {
        &["h2"]
    }
}

#[test]
fn serve_round_robin_is_round_robin_in_20_of_20_runs() {
    classifies("round-robin", protocols(), SchedulingClass::RoundRobin);
}

#[test]
fn serve_fifo_is_first_come_first_served_in_20_of_20_runs() {
    classifies("fifo", protocols(), SchedulingClass::FirstComeFirstServed);
}

#[test]
fn serve_rfc9218_is_urgency_first_in_20_of_20_runs() {
    classifies("rfc9218", protocols(), SchedulingClass::UrgencyFirst);
}

/// Every test of both protocols runs, the figures hang together, and the report says which
/// link they were measured behind.
#[test]
fn the_full_scorecard_says_its_link_and_every_figure() {
    if !require_root("the priorities probe runs behind hxlab link") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start_bound("0.0.0.0", &[]);
    let r = scorecards(&server, &[]);
    let offered: Vec<_> = r.protocols.iter().filter(|p| p.offered).collect();
    assert_eq!(
        offered.len(),
        3,
        "the plain probe ran too: {:?}",
        r.protocols
    );
    let p = r.priorities.as_ref().expect("priorities");
    assert_eq!(p.link.rate_bits_per_sec, 40_000_000);
    assert_eq!(p.link.rtt_ms, 10.0);
    assert_eq!(p.link.queue_bytes, 50_000, "the BDP by default");
    let names: Vec<_> = p.scorecards.iter().map(|c| c.protocol.as_str()).collect();
    assert_eq!(names, ["h2", "h3"]);
    for c in &p.scorecards {
        assert_eq!(c.error, None, "{c:?}");
        let u = c.urgency.as_ref().expect("urgency figures");
        assert_eq!(c.verdict, Some(u.class));
        assert!(u.bulk_bytes_before >= 300_000, "{u:?}");
        assert!(u.small_bytes >= 20_000 && u.small_bytes < 20_100, "{u:?}");
        let wait = u.wait_ms.expect("the small completed");
        // Nothing beats one round trip plus the small's own bytes at 40 Mbit/s.
        assert!(wait >= 10.0 + 20_000.0 * 8.0 / 40_000.0, "{u:?}");
        assert!(u.small_first_byte_ms.expect("a first byte") <= wait);
        assert!((u.committed_ms - u.committed_bytes as f64 * 8.0 / 40_000.0).abs() < 1e-6);
        assert!(
            c.incremental.is_some() && c.priority_update.is_some(),
            "{c:?}"
        );
        assert_eq!(c.rfc7540.is_some(), c.protocol == "h2", "{c:?}");
    }
    // The lines say it ran behind an emulated link, and with what.
    let base = format!("https://127.0.0.1:{}", server.ready.tls.port());
    let (code, out, err) = probe(&[
        "-k",
        &format!("{base}/bytes/3MB"),
        "--priorities",
        "--small",
        &format!("{base}/bytes/20KB"),
        "--rate",
        "40mbit",
        "--rtt",
        "10ms",
        "--tests",
        "none",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("behind an emulated link of 40 Mbit/s each way, 10 ms RTT"),
        "{out}"
    );
    assert!(out.contains("h2 (") && out.contains("h3 ("), "{out}");
}

/// Bad flags are usage errors (exit 2, one line or clap's few), before any link or connection.
#[test]
fn bad_priority_flags_are_usage_errors() {
    let url = "https://127.0.0.1:1/bytes/3MB";
    let small = "https://127.0.0.1:1/bytes/20KB";
    for bad in [
        vec![url, "--priorities"],
        vec![url, "--small", small],
        vec![url, "--priorities", "--small", "https://127.0.0.2:1/x"],
        vec![url, "--priorities", "--small", "http://127.0.0.1:1/x"],
        vec![url, "--priorities", "--small", small, "--rate", "fast"],
        vec![url, "--priorities", "--small", small, "--rtt", "soon"],
        vec![
            url,
            "--priorities",
            "--small",
            small,
            "--queue",
            "unlimited",
        ],
        vec![url, "--priorities", "--small", small, "--tests", "speed"],
        vec![
            url,
            "--priorities",
            "--small",
            small,
            // The emulated link carries IPv4 only.
            "--connect-to",
            "[2001:db8::1]:443",
        ],
    ] {
        let (code, _, err) = probe(&bad);
        assert_eq!(code, Some(2), "{bad:?}: {err}");
        // One line, or clap's few (the missing argument, usage) after it.
        common::usage_error_of(&format!("{bad:?}"), &err);
    }
}
