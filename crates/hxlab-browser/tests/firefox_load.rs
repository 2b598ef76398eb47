//! The library's Firefox engine against real peers: a page over plain HTTP/1.1 from a
//! python3 server (every request read back, the metrics Firefox lacks left out), and the
//! timeout against a server that accepts and never answers, after which no Firefox process
//! of ours is left.

mod common;

use common::Peer;
use hxlab_browser::{load_page, BrowserError, Engine, PageConfig, Proto};
use hxlab_testkit::require_peer;
use std::path::Path;
use std::time::{Duration, Instant};

/// A plain HTTP/1.1 server on a free port serving a page with a stylesheet and an image.
fn python_site(dir: &Path) -> (Peer, u16) {
    common::python_site(
        dir,
        &[
            (
                "index.html",
                "<!doctype html><link rel=stylesheet href=a.css><h1>lab</h1><img src=i.svg width=300 height=200>",
            ),
            ("a.css", "h1 { color: #333 }"),
            (
                "i.svg",
                "<svg xmlns='http://www.w3.org/2000/svg' width='300' height='200'><rect width='300' height='200' fill='red'/></svg>",
            ),
        ],
    )
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    common::temp_dir("firefox", name)
}

/// Processes of this test process's browsers: their profile lives under `hxc-<our pid>-`.
fn our_browsers() -> Vec<u32> {
    let mark = format!("hxc-{}-", std::process::id());
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&mark))
        })
        .collect()
}

/// The tests count the browsers this process left, so they run one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn firefox_loads_a_page_and_reads_every_request_back() {
    if require_peer("firefox-esr").is_none() || require_peer("python3").is_none() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let dir = temp_dir("site");
    let (_server, port) = python_site(&dir);
    let mut cfg = PageConfig::new(format!("http://127.0.0.1:{port}/index.html"), Proto::H1);
    cfg.engine = Engine::Firefox;
    cfg.timeout = Duration::from_secs(60);
    cfg.collect_har = true;
    let run = load_page(cfg).expect("a Firefox page load");
    assert!(run.is_valid(), "{:?}", run.flag);
    assert_eq!(run.engine, Engine::Firefox);
    assert!(run.browser.starts_with("Firefox 1"), "{}", run.browser);
    assert!(run.browser_major >= 115, "{}", run.browser_major);
    // Every request on HTTP/1.1, read back from the browser; each of the three resources
    // at least once (Firefox may revalidate a stylesheet its preload scanner fetched).
    let mut urls: Vec<&str> = run.resources.iter().map(|r| r.url.as_str()).collect();
    assert_eq!(
        run.protocols.keys().collect::<Vec<_>>(),
        vec!["http/1.1"],
        "{urls:?}"
    );
    urls.dedup();
    let base = format!("http://127.0.0.1:{port}/");
    let names: Vec<&str> = urls.iter().filter_map(|u| u.strip_prefix(&base)).collect();
    assert_eq!(names, vec!["index.html", "a.css", "i.svg"], "{urls:?}");
    assert!(run.resources_loaded >= 3);
    assert!(run.ttfb_ms > 0.0 && run.ttfb_ms <= run.dom_content_loaded_ms);
    assert!(run.dom_content_loaded_ms <= run.load_ms);
    assert!(
        run.fcp_ms.is_some() && run.lcp_ms.is_some(),
        "{:?} {:?}",
        run.fcp_ms,
        run.lcp_ms
    );
    // No layout-shift entries in Firefox: CLS is absent, not 0.
    assert_eq!(run.cls, None);
    assert!(run.resources.iter().all(|r| r.response_ms.is_some()));
    assert!(run.connections >= 1);
    let har = run.har.as_ref().expect("HAR collected");
    let entries = har["log"]["entries"].as_array().map(Vec::len);
    assert_eq!(entries, Some(run.resources.len()));
    assert_eq!(har["log"]["browser"]["name"], "Firefox");
    assert!(
        our_browsers().is_empty(),
        "Firefox left running: {:?}",
        our_browsers()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn firefox_times_out_on_a_silent_server_and_leaves_nothing_running() {
    if require_peer("firefox-esr").is_none() {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    // Accepts and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let mut cfg = PageConfig::new(format!("http://127.0.0.1:{port}/"), Proto::H1);
    cfg.engine = Engine::Firefox;
    cfg.strict = true;
    cfg.timeout = Duration::from_secs(8);
    let started = Instant::now();
    match load_page(cfg) {
        Err(BrowserError::Timeout(_)) => {}
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(
        our_browsers().is_empty(),
        "Firefox left running: {:?}",
        our_browsers()
    );

    let mut cfg = PageConfig::new("http://127.0.0.1:1/", Proto::H1);
    cfg.engine = Engine::Firefox;
    cfg.firefox = "/nonexistent/firefox-esr".into();
    let err = load_page(cfg).expect_err("missing browser");
    assert!(matches!(err, BrowserError::FirefoxNotFound(_)), "{err:?}");
    assert!(err.to_string().contains("`firefox-esr`"), "{err}");
}
