//! The library entry point the lab uses: `load_page` against a real Chromium and a plain
//! HTTP/1.1 server (python3 -m http.server), called both outside and inside a tokio runtime,
//! and its timeout against a browser that never answers.

use hxlab_browser::{load_page, BrowserError, PageConfig, Proto};
use hxlab_core::page::summarize;
use hxlab_testkit::require_peer;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A plain HTTP/1.1 server on a free port serving a page with two scripts.
fn python_site(dir: &Path) -> (Peer, u16) {
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><h1>lab</h1><script src=a.js></script><script src=b.js></script>",
    )
    .expect("write");
    std::fs::write(dir.join("a.js"), "var a = 1;").expect("write");
    std::fs::write(dir.join("b.js"), "var b = 2;").expect("write");
    let script = "import http.server,sys,os\n\
        os.chdir(sys.argv[1])\n\
        class Q(http.server.SimpleHTTPRequestHandler):\n    protocol_version='HTTP/1.1'\n    def log_message(self,*a): pass\n\
        s=http.server.ThreadingHTTPServer(('127.0.0.1',0),Q)\n\
        print(s.server_address[1],flush=True)\n\
        s.serve_forever()\n";
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("port");
    let port = line.trim().parse().expect("port number");
    (Peer(child), port)
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("hxlab-browser-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
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
