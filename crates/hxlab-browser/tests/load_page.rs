//! The library entry point the lab uses: `load_page` against a real Chromium and a plain
//! HTTP/1.1 server (python3 -m http.server), called both outside and inside a tokio runtime,
//! and its timeout against a browser that never answers.

mod common;

use common::Peer;
use hxlab_browser::{load_page, BrowserError, PageConfig, Proto};
use hxlab_core::page::summarize;
use hxlab_testkit::require_peer;
use std::path::Path;
use std::time::{Duration, Instant};

/// A plain HTTP/1.1 server on a free port serving a page with two scripts.
fn python_site(dir: &Path) -> (Peer, u16) {
    common::python_site(
        dir,
        &[
            (
                "index.html",
                "<!doctype html><h1>lab</h1><script src=a.js></script><script src=b.js></script>",
            ),
            ("a.js", "var a = 1;"),
            ("b.js", "var b = 2;"),
        ],
    )
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    common::temp_dir("browser", name)
}

#[test]
fn load_page_measures_a_real_page_inside_and_outside_a_runtime() {
    if require_peer("chromium").is_none() || require_peer("python3").is_none() {
        return;
    }
    let dir = temp_dir("site");
    let (_server, port) = python_site(&dir);
    let mut cfg = PageConfig::new(format!("http://127.0.0.1:{port}/index.html"), Proto::H1);
    cfg.timeout = Duration::from_secs(40);
    cfg.collect_har = true;

    let outside = load_page(cfg.clone()).expect("load outside a runtime");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let inside = rt
        .block_on(async { load_page(cfg.clone()) })
        .expect("load inside a runtime");
    for run in [&outside, &inside] {
        assert!(run.is_valid(), "{:?}", run.flag);
        assert_eq!(
            run.protocols.get("http/1.1"),
            Some(&3),
            "{:?}",
            run.protocols
        );
        assert_eq!(run.resources_loaded, 3);
        assert!(run.ttfb_ms > 0.0 && run.ttfb_ms <= run.dom_content_loaded_ms);
        assert!(run.dom_content_loaded_ms <= run.load_ms);
        let har = run.har.as_ref().expect("HAR collected");
        assert_eq!(har["log"]["entries"].as_array().map(Vec::len), Some(3));
    }
    let summary = summarize(&[outside, inside]);
    assert_eq!(summary.valid_runs, 2);
    assert_eq!(summary.metrics["resources_loaded"].median, 3.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn load_page_times_out_and_kills_a_silent_browser() {
    let dir = temp_dir("silent");
    let fake = dir.join("silent-browser");
    std::fs::write(&fake, "#!/bin/sh\nexec sleep 300\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut cfg = PageConfig::new("http://127.0.0.1:1/", Proto::H2);
    cfg.chromium = fake;
    cfg.timeout = Duration::from_millis(800);
    let started = Instant::now();
    match load_page(cfg) {
        Err(BrowserError::Timeout(_)) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    let _ = std::fs::remove_dir_all(&dir);

    let mut cfg = PageConfig::new("http://127.0.0.1:1/", Proto::H2);
    cfg.chromium = "/nonexistent/chromium".into();
    let err = load_page(cfg).expect_err("missing browser");
    assert!(
        err.to_string().contains("Debian package `chromium`"),
        "{err}"
    );
}
