//! `hxlab page --browser firefox` against a real Firefox (Debian's `firefox-esr`, over
//! WebDriver BiDi): a synthetic page from `hxlab serve` over h1, h2 and h3 with every request
//! on the forced protocol, its certificate trusted through the profile's NSS store (no -k);
//! a URL whose self-signed certificate Firefox refuses until -k; a run behind "Regular 4G"
//! whose TTFB shows the link's delay; a server that never answers (the timeout); bad
//! input. No Firefox process and no profile is left after any of them.

mod common;

use common::{
    hxlab, measured, page_report_of, require_peer, require_root, run_with_timeout,
    tempfile_dir::TempDir, Server,
};
use hxlab_core::page::{Engine, PageRun};
use hxlab_core::Proto;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Firefox is heavy on a 2-core machine: one browser test at a time.
static BROWSER: Mutex<()> = Mutex::new(());

fn browser_lock() -> std::sync::MutexGuard<'static, ()> {
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asserts that no browser started with a profile under `tmp` is alive and no profile
/// directory is left there.
fn assert_no_firefox_left(tmp: &Path) {
    let needle = format!("{}/hxc-", tmp.display());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| {
                let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                cmd.contains(&needle).then_some(cmd)
            })
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "Firefox left running: {left:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let profiles: Vec<String> = std::fs::read_dir(tmp)
        .expect("tmp")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("hxc-"))
        .collect();
    assert!(profiles.is_empty(), "profiles left: {profiles:?}");
}

/// `hxlab page --browser firefox ARGS --json -` with TMPDIR in `tmp`: (exit code, stdout,
/// stderr).
fn firefox_page(tmp: &Path, args: &[&str], limit: Duration) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(hxlab());
    cmd.args(["page", "--browser", "firefox"])
        .args(args)
        .env("TMPDIR", tmp);
    run_with_timeout(&mut cmd, limit)
}

/// The only run of a `--json -` document that measured.
fn only_run(stdout: &str, stderr: &str) -> PageRun {
    let report = page_report_of(stdout).unwrap_or_else(|| panic!("no JSON: {stderr}"));
    assert_eq!(report.engine, Engine::Firefox);
    assert_eq!(report.runs.len(), 1);
    measured(&report.runs[0]).clone()
}

/// Firefox loaded the synthetic page over `proto`: every request on it as the browser read it
/// back, LCP present, CLS absent and said to be so.
fn assert_forced(run: &PageRun, proto: Proto, stderr: &str) {
    assert!(run.is_valid(), "{proto}: {:?}", run.flag);
    assert_eq!(run.engine, Engine::Firefox);
    assert!(run.browser.starts_with("Firefox "), "{}", run.browser);
    assert!(run.protocol_ok, "{proto}: {:?}", run.protocols);
    assert!(run.resources.len() >= 4, "{proto}: {:?}", run.resources);
    for r in &run.resources {
        assert_eq!(
            Proto::of_reported(&r.protocol),
            Some(proto),
            "{proto}: {} came over {:?}",
            r.url,
            r.protocol
        );
    }
    assert!(run.lcp_ms.is_some_and(|l| l > 0.0), "{proto}: no LCP");
    assert!(run.fcp_ms.is_some(), "{proto}: no FCP");
    assert_eq!(run.cls, None, "{proto}: CLS is not measurable in Firefox");
    assert!(run.ttfb_ms > 0.0 && run.ttfb_ms <= run.load_ms, "{run:?}");
    assert!(stderr.contains("not available in Firefox"), "{stderr}");
}

#[test]
fn firefox_loads_a_synthetic_page_over_h1_h2_and_h3_trusting_the_origin_in_nss() {
    if require_peer("firefox-esr").is_none() || require_peer("certutil").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-firefox");
    for proto in [Proto::H1, Proto::H2, Proto::H3] {
        // No -k: the origin's certificate is imported into the profile's NSS store.
        let (code, out, err) = firefox_page(
            tmp.path(),
            &[
                "--synthetic",
                "n=4,size=8KiB",
                "--proto",
                proto.name(),
                "--runs",
                "1",
                "--json",
                "-",
            ],
            Duration::from_secs(120),
        );
        assert_eq!(code, Some(0), "{proto}: {err}");
        assert_forced(&only_run(&out, &err), proto, &err);
        assert_no_firefox_left(tmp.path());
    }
}

#[test]
fn firefox_refuses_an_unknown_certificate_until_k() {
    if require_peer("firefox-esr").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-firefox-k");
    let server = Server::start(&[]);
    let url = format!("https://{}/page?n=2&size=1000", server.ready.tls);
    let limit = Duration::from_secs(90);
    let (code, out, err) = firefox_page(tmp.path(), &[&url, "--proto", "h2", "--runs", "1"], limit);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("MOZILLA_PKIX_ERROR_SELF_SIGNED_CERT"), "{out}");
    assert!(out.contains("pass -k"), "{out}");
    assert_no_firefox_left(tmp.path());
    let args = [
        url.as_str(),
        "-k",
        "--proto",
        "h2",
        "--runs",
        "1",
        "--json",
        "-",
    ];
    let (code, out, err) = firefox_page(tmp.path(), &args, limit);
    assert_eq!(code, Some(0), "{err}");
    let run = only_run(&out, &err);
    assert_eq!(run.protocols.keys().collect::<Vec<_>>(), vec!["h2"]);
    assert_eq!(run.resources.len(), 3, "{:?}", run.resources);
    assert_no_firefox_left(tmp.path());
}

#[test]
fn firefox_behind_regular_4g_shows_the_link_delay_in_ttfb() {
    if require_peer("firefox-esr").is_none()
        || require_peer("certutil").is_none()
        || !require_root("the emulated link")
    {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-firefox-4g");
    let link = hxlab_link::LinkConfig::from_profile("Regular 4G").expect("the profile");
    let rtt_ms = (link.down.delay + link.up.delay).as_secs_f64() * 1000.0;
    let args = [
        "--synthetic",
        "n=3,size=4KiB",
        "--proto",
        "h2",
        "--profile",
        "Regular 4G",
        "--runs",
        "1",
        "--json",
        "-",
    ];
    let (code, out, err) = firefox_page(tmp.path(), &args, Duration::from_secs(150));
    assert_eq!(code, Some(0), "{err}");
    let run = only_run(&out, &err);
    // The browser's TCP controller is read back inside the link's namespace.
    let report = page_report_of(&out).expect("JSON");
    assert!(report.client_tcp_cc.is_some_and(|cc| !cc.is_empty()));
    assert!(run.is_valid(), "{:?}", run.flag);
    // TCP, TLS and the request each cross the link: at least two round trips before the
    // first byte.
    assert!(
        run.ttfb_ms >= 2.0 * rtt_ms,
        "TTFB {} ms behind a {rtt_ms} ms round trip",
        run.ttfb_ms
    );
    assert_no_firefox_left(tmp.path());
}

#[test]
fn firefox_times_out_on_a_server_that_never_answers_and_leaves_nothing() {
    if require_peer("firefox-esr").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-firefox-timeout");
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/", silent.local_addr().expect("addr"));
    let args = [
        url.as_str(),
        "--proto",
        "h1",
        "--strict",
        "--timeout",
        "6s",
        "--runs",
        "1",
    ];
    let started = Instant::now();
    let (code, out, err) = firefox_page(tmp.path(), &args, Duration::from_secs(60));
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.contains("timed out"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(40));
    assert_no_firefox_left(tmp.path());
}

#[test]
fn a_wrong_browser_or_a_missing_firefox_is_one_line_and_exit_2() {
    let tmp = TempDir::new("hxlab-firefox-bad");
    let mut cmd = Command::new(hxlab());
    cmd.args([
        "page",
        "--browser",
        "netscape",
        "--synthetic",
        "n=1",
        "--proto",
        "h2",
    ]);
    let (code, _, err) = run_with_timeout(&mut cmd, Duration::from_secs(20));
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("netscape") && err.contains("chromium or firefox"),
        "{err}"
    );

    let args = [
        "--firefox",
        "/nonexistent/firefox-esr",
        "--synthetic",
        "n=1",
        "--proto",
        "h2",
    ];
    let (code, _, err) = firefox_page(tmp.path(), &args, Duration::from_secs(20));
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("install the Debian package `firefox-esr`"),
        "{err}"
    );
}

#[test]
fn firefox_records_bodies_that_chromium_replays_without_a_miss() {
    if require_peer("firefox-esr").is_none()
        || require_peer("certutil").is_none()
        || require_peer("chromium").is_none()
    {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-firefox-record");
    let har = tmp.path().join("firefox.har");
    let har_arg = har.display().to_string();
    let args = [
        "--synthetic",
        "n=3,size=6KiB",
        "--proto",
        "h2",
        "--runs",
        "1",
        "--record",
        har_arg.as_str(),
    ];
    let (code, _, err) = firefox_page(tmp.path(), &args, Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    // Bodies came through BiDi's network data collection (network.addDataCollector,
    // network.getData): every 200 entry has its text.
    let log: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&har).expect("HAR written")).expect("JSON");
    assert_eq!(log["log"]["browser"]["name"], "Firefox");
    let entries = log["log"]["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 4, "{entries:?}");
    for e in entries {
        let text = e["response"]["content"]["text"].as_str().unwrap_or("");
        assert!(!text.is_empty(), "no body: {}", e["request"]["url"]);
    }
    let mut cmd = Command::new(hxlab());
    cmd.args(["page", "--replay", &har_arg, "--proto", "h2", "--runs", "1"])
        .args(["--json", "-"])
        .env("TMPDIR", tmp.path());
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let report = page_report_of(&out).expect("JSON");
    assert_eq!(report.engine, Engine::Chromium);
    let counts = report.runs[0]
        .replay
        .clone()
        .flatten()
        .expect("replay counts");
    assert_eq!(counts.tally.misses, 0, "{counts:?}");
    assert_eq!(counts.tally.hits, 4, "{counts:?}");
    assert_no_firefox_left(tmp.path());
}

#[test]
fn firefox_repeat_view_reuses_its_connection_and_cache() {
    if require_peer("firefox-esr").is_none() || require_peer("certutil").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-firefox-repeat");
    let args = [
        "--synthetic",
        "n=3,size=4KiB,cache=1h",
        "--proto",
        "h2",
        "--repeat-view",
        "--runs",
        "1",
        "--json",
        "-",
    ];
    let (code, out, err) = firefox_page(tmp.path(), &args, Duration::from_secs(120));
    assert_eq!(code, Some(0), "{err}");
    let first = only_run(&out, &err);
    let repeat = first.repeat_view.as_ref().expect("a repeat view");
    // Every request of the repeat view is listed (the load event of the about:blank before
    // it does not end it early), the cacheable ones from the cache, over the kept connection.
    assert_eq!(repeat.resources.len(), first.resources.len(), "{repeat:?}");
    assert!(repeat.resources.iter().filter(|r| r.from_cache).count() >= 3);
    assert_eq!(
        repeat.connections, 0,
        "the first view's connection is reused"
    );
    assert_no_firefox_left(tmp.path());
}
