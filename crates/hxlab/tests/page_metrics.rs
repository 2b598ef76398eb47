//! `hxlab page` at WebPageTest depth, against a real headless Chromium and `hxlab serve`:
//! LCP, CLS, Speed Index and the filmstrip; first and repeat view on a delayed origin whose
//! resources may be cached; `--proto auto` finding HTTP/3 through Alt-Svc; bad flags.

mod common;

use common::{
    hxlab, measured, page_report_of, require_peer, run_with_timeout, tempfile_dir::TempDir,
};
use hxlab_contract::PageReport;
use hxlab_core::page::{PageRun, View};
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// Chromium is heavy on a 2-core machine: one browser test at a time.
static BROWSER: Mutex<()> = Mutex::new(());

fn browser_lock() -> std::sync::MutexGuard<'static, ()> {
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

/// `hxlab page ARGS --json -` with TMPDIR=tmp; returns (exit code, the report if one was
/// written, stderr).
fn page(tmp: &Path, args: &[&str]) -> (Option<i32>, Option<PageReport>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("page")
        .args(args)
        .args(["--json", "-"])
        .env("TMPDIR", tmp);
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(120));
    (code, page_report_of(&out), err)
}

/// Asserts that no browser started with a profile under `tmp` is alive or left a profile.
fn assert_no_browser_left(tmp: &Path) {
    let needle = format!("--user-data-dir={}/hxc-", tmp.display());
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let alive: Vec<String> = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
                    .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                    .filter(|cmd| cmd.contains(&needle))
                    .collect()
            })
            .unwrap_or_default();
        if alive.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "browsers left behind: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let profiles = std::fs::read_dir(tmp)
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("hxc-"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(profiles, 0, "profile dirs left behind in {}", tmp.display());
}

/// A metric the run must have.
fn f(run: &PageRun, key: &str, v: Option<f64>) -> f64 {
    v.unwrap_or_else(|| panic!("{key} missing in {}", brief(run)))
}

/// A run without its filmstrip and resources, for assertion messages.
fn brief(run: &PageRun) -> String {
    let mut r = run.clone();
    r.filmstrip.clear();
    r.resources.clear();
    r.repeat_view = None;
    format!("{r:?}")
}

/// Frame times of a paint (screencast, compositor swap time) and the browser's paint timing
/// (presentation time) may differ by about a frame; on a busy 2-core machine, by a few.
const FRAME_SLACK_MS: f64 = 50.0;

/// The filmstrip of a view: JPEG frames at ascending multiples of 100 ms, ending at 100 %.
fn check_filmstrip(run: &PageRun) {
    let strip = &run.filmstrip;
    assert!(!strip.is_empty(), "no filmstrip: {}", brief(run));
    let mut last = -1.0;
    for frame in strip {
        let t = frame.time_ms;
        assert!(t > last && t % 100.0 == 0.0, "tick {t} after {last}");
        last = t;
        let jpeg = &frame.jpeg_base64;
        assert!(jpeg.starts_with("/9j/"), "not a base64 JPEG: {:.20}", jpeg);
        assert!(frame.painted_ms <= t);
    }
    assert_eq!(strip.last().map(|fr| fr.progress_pct), Some(100.0));
}

/// Paint metrics of a view that paints its content once, before its delayed resources.
fn check_paint_metrics(run: &PageRun) {
    let fcp = f(run, "fcp_ms", run.fcp_ms);
    let lcp = f(run, "lcp_ms", run.lcp_ms);
    let si = f(run, "speed_index_ms", run.speed_index_ms);
    let load = run.load_ms;
    assert!(lcp >= fcp, "LCP {lcp} before FCP {fcp}");
    assert!(
        si >= fcp - FRAME_SLACK_MS && si <= load,
        "Speed Index {si} not between FCP {fcp} and load {load}"
    );
    assert!(
        f(run, "visually_complete_ms", run.visually_complete_ms)
            >= f(run, "first_visual_change_ms", run.first_visual_change_ms)
    );
    // The page does not move: the observer ran and saw no shift.
    assert_eq!(run.cls, Some(0.0), "{}", brief(run));
}

#[test]
fn first_and_repeat_view_on_a_delayed_cacheable_origin() {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-pagemetrics");
    let html = tmp.path().join("page.html");
    let html_arg = html.display().to_string();
    let (code, json, err) = page(
        tmp.path(),
        &[
            "--synthetic",
            "n=4,size=4KiB,delay=400ms,cache=1h",
            "--proto",
            "h2",
            "--runs",
            "1",
            "--repeat-view",
            "--html",
            &html_arg,
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    assert!(json.repeat_view);
    let entry = &json.runs[0];
    let first = measured(entry);
    let repeat = first.repeat_view.as_deref().expect("a repeat view");
    assert_eq!((first.view, repeat.view), (View::First, View::Repeat));
    assert!(entry.counted(), "{}", brief(first));
    assert!(repeat.is_valid(), "{}", brief(repeat));
    check_paint_metrics(first);
    check_filmstrip(first);
    check_filmstrip(repeat);
    assert!(first.load_ms >= 400.0, "{}", brief(first));

    // The returning visitor takes the delayed resources from its cache, over the connection
    // it kept.
    let (first_load, repeat_load) = (first.load_ms, repeat.load_ms);
    assert!(
        repeat_load + 200.0 < first_load,
        "repeat view {repeat_load} ms not faster than first view {first_load} ms"
    );
    let resources = &repeat.resources;
    assert_eq!(resources.len(), 5);
    assert!(
        resources[1..].iter().all(|r| r.from_cache),
        "sub-resources not from the cache: {resources:?}"
    );
    assert!(!resources[0].from_cache, "the page itself is not cacheable");
    assert_eq!(repeat.connections, 1);
    assert!(
        resources
            .iter()
            .all(|r| r.connection_reused || r.from_cache),
        "the repeat view opened a new connection: {resources:?}"
    );

    let s = &json.summary.metrics;
    let rs = &json
        .repeat_view_summary
        .as_ref()
        .expect("a repeat view summary")
        .metrics;
    for key in ["lcp_ms", "speed_index_ms", "cls", "load_ms"] {
        assert!(s.contains_key(key), "summary lacks {key}");
        assert!(rs.contains_key(key), "repeat summary lacks {key}");
    }
    let median = |m: &std::collections::BTreeMap<String, hxlab_core::page::MetricSummary>| {
        m.get("load_ms").map(|x| x.median)
    };
    assert!(median(rs) < median(s));

    // The HTML shows a filmstrip under each view's waterfall.
    let page = std::fs::read_to_string(&html).expect("HTML written");
    assert_eq!(page.matches("<div class=\"filmstrip\">").count(), 2);
    assert!(page.contains("src=\"data:image/jpeg;base64,/9j/"));
    assert!(page.contains("Summary of the repeat views"));
    assert!(page.contains(">LCP "), "LCP mark in the waterfall");
    // The human summary names both views.
    assert!(
        err.contains("(repeat view)") && err.contains("Speed Index"),
        "{err}"
    );
    assert_no_browser_left(tmp.path());
}

#[test]
fn proto_auto_finds_http3_through_alt_svc() {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-pagemetrics-auto");
    let (code, json, err) = page(
        tmp.path(),
        &[
            "--synthetic",
            "n=4,size=4KiB,delay=20ms",
            "--proto",
            "auto",
            "--runs",
            "1",
            "--repeat-view",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    assert_eq!(json.protocol, hxlab_core::Proto::Auto);
    let entry = &json.runs[0];
    let first = measured(entry);
    let repeat = first.repeat_view.as_deref().expect("a repeat view");
    assert!(entry.counted(), "{}", brief(first));
    assert!(repeat.is_valid(), "{}", brief(repeat));
    // A first visit knows nothing of HTTP/3: the page comes over HTTP/2 and carries the
    // Alt-Svc header (sub-resources may already switch once the browser has a QUIC
    // connection).
    let first_res = &first.resources;
    assert_eq!(first_res[0].protocol, "h2", "{first_res:?}");
    // The returning visitor uses what Alt-Svc advertised, for every resource.
    let repeat_res = &repeat.resources;
    assert_eq!(repeat_res.len(), 5);
    for r in repeat_res {
        assert_eq!(r.protocol, "h3", "repeat view resource {}", r.url);
        assert!(!r.from_cache);
    }
    assert_no_browser_left(tmp.path());
}

#[test]
fn cpu_slowdown_slows_the_page_script_and_bad_values_exit_2() {
    for bad in ["0.5", "x", "nan", "inf", "-3", "101"] {
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab()).args([
                "page",
                "--synthetic",
                "n=1",
                "--proto",
                "h2",
                "--cpu-slowdown",
                bad,
            ]),
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(2), "--cpu-slowdown {bad}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("--cpu-slowdown"), "{err}");
    }
    for bad in ["cache=0s", "cache=soon", "n=1,cache=400d"] {
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab()).args(["page", "--synthetic", bad, "--proto", "auto"]),
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(2), "--synthetic {bad}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    // A page whose parsing runs a fixed amount of script work before DOMContentLoaded.
    let www = TempDir::new("hxlab-pagemetrics-www");
    std::fs::write(
        www.path().join("busy.html"),
        "<!doctype html><html><body><h1>busy</h1><script>\n\
         let x = 0; for (let i = 0; i < 40000000; i++) { x = (x + i * 7) % 1000003; }\n\
         document.title = String(x);\n</script></body></html>\n",
    )
    .expect("write the page");
    let www_arg = www.path().display().to_string();
    let server = common::Server::start(&["--dir", &www_arg]);
    let url = format!("https://{}/static/busy.html", server.ready.tls);
    let spki = server.ready.spki_sha256.clone();
    let tmp = TempDir::new("hxlab-pagemetrics-cpu");
    let dcl = |slowdown: &str| {
        let (code, json, err) = page(
            tmp.path(),
            &[
                &url,
                "--proto",
                "h2",
                "--spki",
                &spki,
                "--runs",
                "1",
                "--cpu-slowdown",
                slowdown,
            ],
        );
        assert_eq!(code, Some(0), "stderr: {err}");
        let json = json.expect("a --json document");
        let run = measured(&json.runs[0]);
        assert_eq!(run.cpu_slowdown, slowdown.parse::<f64>().unwrap_or(0.0));
        assert!(run.repeat_view.is_none());
        run.dom_content_loaded_ms
    };
    let normal = dcl("1");
    let slowed = dcl("6");
    assert!(
        slowed > 2.0 * normal,
        "6× CPU slowdown: DOMContentLoaded {slowed} ms against {normal} ms without"
    );
    drop(server);
    assert_no_browser_left(tmp.path());
}

/// A page that paints in steps after its load event: a dark heading at once, a red block at
/// 300 ms, and at 600 ms a green block inserted on top that pushes everything down.
const STEPS_PAGE: &str = "<!doctype html><html><body style=\"margin:0\">\n\
<h1 style=\"margin:0;height:200px;background:#000;color:#fff\">step one</h1>\n\
<div id=\"b\" style=\"height:200px\"></div><div style=\"height:200px;background:#00c\"></div>\n\
<script>\n\
setTimeout(() => { document.getElementById('b').style.background = '#c00'; }, 300);\n\
setTimeout(() => { const s = document.createElement('div'); s.style.height = '150px';\n\
  s.style.background = '#0a0'; document.body.insertBefore(s, document.body.firstChild); }, 600);\n\
</script></body></html>\n";

#[test]
fn a_page_painting_in_steps_has_speed_index_between_its_first_and_last_change() {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    let www = TempDir::new("hxlab-pagemetrics-steps");
    std::fs::write(www.path().join("steps.html"), STEPS_PAGE).expect("write the page");
    let www_arg = www.path().display().to_string();
    let server = common::Server::start(&["--dir", &www_arg]);
    let url = format!("https://{}/static/steps.html", server.ready.tls);
    let spki = server.ready.spki_sha256.clone();
    let tmp = TempDir::new("hxlab-pagemetrics-steps-run");
    let (code, json, err) = page(
        tmp.path(),
        &[&url, "--proto", "h2", "--spki", &spki, "--runs", "1"],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    let run = measured(&json.runs[0]);
    let fcp = f(run, "fcp_ms", run.fcp_ms);
    let first_change = f(run, "first_visual_change_ms", run.first_visual_change_ms);
    let complete = f(run, "visually_complete_ms", run.visually_complete_ms);
    let si = f(run, "speed_index_ms", run.speed_index_ms);
    assert!(
        (first_change - fcp).abs() <= FRAME_SLACK_MS,
        "first visual change {first_change} ms, FCP {fcp} ms"
    );
    assert!(complete >= 550.0, "visually complete at {complete} ms");
    assert!(
        si > first_change + 50.0 && si < complete - 50.0,
        "Speed Index {si} not inside ({first_change}, {complete})"
    );
    // The filmstrip shows the steps with growing progress, ending complete.
    let progress: Vec<f64> = run.filmstrip.iter().map(|fr| fr.progress_pct).collect();
    assert!(progress.len() >= 3, "filmstrip {progress:?}");
    assert_eq!(progress.last(), Some(&100.0));
    assert!(progress[0] < 100.0 && progress[1] < 100.0, "{progress:?}");
    // The inserted block moved the heading and the blocks: a layout shift without input.
    let cls = f(run, "cls", run.cls);
    assert!(cls > 0.05, "CLS {cls}");
    assert!(f(run, "lcp_ms", run.lcp_ms) >= fcp);
    drop(server);
    assert_no_browser_left(tmp.path());
}
