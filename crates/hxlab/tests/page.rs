//! `hxlab page` against a real headless Chromium: synthetic pages from `hxlab serve` over h1,
//! h2 and h3, a static page from nghttpd, a protocol fallback that must be flagged, a missing,
//! hung or crashing browser, and bad flags. Every browser test checks that no Chromium process
//! and no profile directory is left behind.

mod common;

use common::{
    hxlab, make_cert, measured, page_report_of, require_peer, run_with_timeout, start_nghttpd,
    tempfile_dir::TempDir, PeerProcess,
};
use hxlab_contract::{PageReport, PageRunEntry};
use hxlab_core::page::ResourceTiming;
use hxlab_core::waterfall::Phase;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Chromium is heavy on a 2-core machine: one browser test at a time.
static BROWSER: Mutex<()> = Mutex::new(());

fn browser_lock() -> std::sync::MutexGuard<'static, ()> {
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Processes whose command line mentions `needle`, as "pid cmdline" (zombies have none).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(raw) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{name} {cmd}"));
            }
        }
    }
    found
}

/// Asserts that no browser started with a profile under `tmp` is alive and no profile is left.
fn assert_no_browser_left(tmp: &Path) {
    let needle = format!("--user-data-dir={}/hxc-", tmp.display());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_mentioning(&needle);
        if left.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "browser processes left behind: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let profiles: Vec<_> = std::fs::read_dir(tmp)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("hxc-") || n.contains("org.chromium."))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        profiles.is_empty(),
        "profile dirs left behind: {profiles:?}"
    );
}

/// `hxlab page ARGS --json -` with TMPDIR=tmp; returns (exit code, the report if one was
/// written, stderr).
fn page(tmp: &Path, args: &[&str]) -> (Option<i32>, Option<PageReport>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("page").args(args).env("TMPDIR", tmp);
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(80));
    (code, page_report_of(&out), err)
}

/// Checks one counted run of a page of `n` sub-resources of at least `size` bytes each.
fn check_run(entry: &PageRunEntry, want_protocol: &str, n: u32, size: u64) {
    let run = measured(entry);
    assert!(entry.counted(), "run not counted: {:?}", run.flag);
    assert!(run.protocol_ok);
    let protocols = &run.protocols;
    assert_eq!(
        protocols.keys().collect::<Vec<_>>(),
        vec![want_protocol],
        "every resource must use {want_protocol}: {protocols:?}"
    );
    assert_eq!(
        protocols[want_protocol],
        n + 1,
        "document + {n} sub-resources"
    );
    for r in &run.resources {
        assert_eq!(r.protocol, want_protocol, "resource {}", r.url);
        assert_eq!(r.status, 200, "resource {}", r.url);
    }
    assert_eq!(run.resources_loaded, n + 1);
    assert_eq!(run.resources_failed, 0);
    let (ttfb, dcl, load) = (run.ttfb_ms, run.dom_content_loaded_ms, run.load_ms);
    assert!(ttfb > 0.0, "ttfb {ttfb}");
    assert!(
        ttfb <= dcl && dcl <= load,
        "timings out of order: ttfb {ttfb} dcl {dcl} load {load}"
    );
    assert_eq!(run.resources_incomplete, 0);
    let connections = run.connections;
    if want_protocol == "http/1.1" {
        // Chromium's pool: at most 6 connections per origin for HTTP/1.1.
        assert!((1..=6).contains(&connections), "connections {connections}");
    } else {
        assert_eq!(connections, 1, "one multiplexed {want_protocol} connection");
    }
    // The browser's byte count can be a little under the bodies (it books some bytes of a
    // reused HTTP/1.1 connection elsewhere), so the bound is loose.
    assert!(
        run.bytes >= u64::from(n) * size * 3 / 4,
        "bytes {} for {n} × {size} B",
        run.bytes
    );
}

fn synthetic(proto: &str, want_protocol: &str) {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-page-test");
    let har = tmp.path().join("har");
    let har_arg = har.display().to_string();
    let (code, json, err) = page(
        tmp.path(),
        &[
            "--synthetic",
            "n=4,size=4KiB,delay=5ms",
            "--proto",
            proto,
            "--runs",
            "1",
            "--timeout",
            "40s",
            "--har",
            &har_arg,
            "--json",
            "-",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    assert_eq!(json.protocol.name(), proto);
    assert!(json.browser.starts_with("Chromium "));
    let runs = &json.runs;
    assert_eq!(runs.len(), 1);
    check_run(&runs[0], want_protocol, 4, 4096);
    assert_eq!(json.summary.valid_runs, 1);
    assert!(
        json.summary
            .metrics
            .get("load_ms")
            .map_or(-1.0, |m| m.median)
            > 0.0
    );
    // The HAR holds the same resources with the same protocol.
    let har: Value =
        serde_json::from_slice(&std::fs::read(har.join("run-1.har")).expect("HAR written"))
            .expect("HAR is JSON");
    assert_eq!(har["log"]["version"], "1.2");
    let entries = har["log"]["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 5);
    assert!(entries
        .iter()
        .all(|e| e["response"]["httpVersion"] == want_protocol));
    assert_no_browser_left(tmp.path());
}

#[test]
fn synthetic_page_over_h1() {
    synthetic("h1", "http/1.1");
}

#[test]
fn synthetic_page_over_h2() {
    synthetic("h2", "h2");
}

#[test]
fn synthetic_page_over_h3() {
    synthetic("h3", "h3");
}

/// The texts of the elements of `class` in `svg` (`<text class="conn" …>h2 #3</text>`).
fn texts_of_class<'a>(svg: &'a str, class: &str) -> Vec<&'a str> {
    let open = format!("<text class=\"{class}\"");
    svg.match_indices(&open)
        .filter_map(|(i, _)| {
            let rest = &svg[i..];
            let start = rest.find('>')? + 1;
            let end = rest.find("</text>")?;
            Some(&rest[start..end])
        })
        .collect()
}

/// Checks one resource's phases as `--json` gives them: within the load, each one not
/// ending before it starts, and in the order they happen.
fn check_phases(r: &ResourceTiming) {
    let url = &r.url;
    let mut last_start = 0.0;
    for name in Phase::ALL {
        let Some(p) = r.phases.get(name) else {
            continue;
        };
        let (s, e) = (p.start_ms, p.end_ms);
        assert!(s >= 0.0 && e >= s, "{url}: {name:?} {s}..{e}");
        assert!(
            s >= last_start,
            "{url}: {name:?} starts at {s}, before the phase before it ({last_start})"
        );
        last_start = s;
    }
}

/// `--html` writes one self-contained page with one waterfall per run: a row per resource,
/// each over the forced protocol, and phases from the browser's own timing.
fn waterfall_html(proto: &str, want_protocol: &str) {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-page-test");
    let html_path = tmp.path().join("out.html");
    let html_arg = html_path.display().to_string();
    let (code, json, err) = page(
        tmp.path(),
        &[
            "--synthetic",
            "n=4,size=4KiB,delay=5ms",
            "--proto",
            proto,
            "--runs",
            "2",
            "--timeout",
            "40s",
            "--html",
            &html_arg,
            "--json",
            "-",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    let html = std::fs::read_to_string(&html_path).expect("HTML written");
    assert!(html.starts_with("<!DOCTYPE html>") && html.ends_with("</html>\n"));
    // Self-contained: nothing fetched, nothing run (the filmstrip's frames are data: URIs).
    assert!(
        html.contains("src=\"data:image/jpeg;base64,"),
        "no filmstrip"
    );
    let without_frames = html.replace("src=\"data:image/jpeg;base64,", "");
    for bad in ["<script", "src=", "href=", "url(", "@import"] {
        assert!(!without_frames.contains(bad), "the page holds {bad}");
    }
    let runs = &json.runs;
    assert_eq!(runs.len(), 2);
    let svgs: Vec<&str> = html.split("<svg ").skip(1).collect();
    assert_eq!(
        html.matches("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"waterfall\"")
            .count(),
        2,
        "one waterfall per run"
    );
    for (i, (run, svg)) in runs.iter().zip(&svgs).enumerate() {
        check_run(run, want_protocol, 4, 4096);
        assert!(
            svg.contains(&format!(">{proto} run {}</text>", i + 1)),
            "title of run {}",
            i + 1
        );
        let resources = &measured(run).resources;
        assert_eq!(svg.matches("<g class=\"row").count(), resources.len());
        let conns = texts_of_class(svg, "conn");
        assert_eq!(conns.len(), resources.len());
        for c in &conns {
            // `VH·u0i h2 #3`: Chromium's priority and the priority header it sent, then
            // the protocol and connection.
            let (tag, conn) = c.split_once(' ').unwrap_or(("", c));
            assert!(
                conn.starts_with(&format!("{want_protocol} #")),
                "row label {c:?}"
            );
            assert!(
                ["VH", "H", "M", "L", "VL"]
                    .iter()
                    .any(|p| tag.split('·').next() == Some(*p)),
                "row label {c:?} has no priority"
            );
        }
        assert_eq!(
            conns.iter().filter(|c| !c.ends_with('↺')).count(),
            1,
            "one new connection: {conns:?}"
        );
        for r in resources {
            check_phases(r);
            for name in [Phase::Queued, Phase::Wait, Phase::Download] {
                assert!(
                    r.phases.get(name).is_some(),
                    "{}: no {name:?} phase: {:?}",
                    r.url,
                    r.phases
                );
            }
        }
        // The document's request was sent and answered. (Its handshake is not always its own:
        // Chromium may preconnect while navigating, and the request then waits in the queue.)
        let doc = &resources[0].phases;
        assert!(doc.request.is_some(), "document phases: {doc:?}");
        let drawn = svg.matches("<rect class=\"phase ").count();
        let phases: usize = resources.iter().map(|r| r.phases.present().count()).sum();
        assert_eq!(drawn, phases, "one bar per phase");
    }
    assert_no_browser_left(tmp.path());
}

#[test]
fn html_waterfall_over_h2() {
    waterfall_html("h2", "h2");
}

#[test]
fn html_waterfall_over_h3() {
    waterfall_html("h3", "h3");
}

#[test]
fn html_to_a_missing_directory_is_one_line() {
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "page",
            "--synthetic",
            "n=1,size=1KiB,delay=0ms",
            "--proto",
            "h2",
            "--html",
            "/nonexistent-hxlab-dir/out.html",
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "stdout: {out}\nstderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "stderr: {err}");
    assert!(
        err.contains("/nonexistent-hxlab-dir") && err.contains("does not exist"),
        "stderr: {err}"
    );
}

#[test]
fn push_is_reported_as_ignored_and_early_hints_arrive() {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-page-test");
    let (code, json, err) = page(
        tmp.path(),
        &[
            "--synthetic",
            "n=2,size=1KiB,delay=0ms",
            "--proto",
            "h2",
            // Chromium's DevTools event for a 103 (responseReceivedEarlyHints) is missed now
            // and then (seen 1 run in ~10 under CI load) although the origin sent it: three
            // runs, and at least one must report it, so a broken 103 still fails.
            "--runs",
            "3",
            "--push",
            "--early-hints",
            "--json",
            "-",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    let major = json.browser_major;
    assert!(json.push.requested);
    assert_eq!(json.push.ignored_by_browser, major >= 106);
    if major >= 106 {
        assert!(err.contains("ignores HTTP/2 server push"), "stderr: {err}");
    }
    check_run(&json.runs[0], "h2", 2, 1024);
    // The origin answered with a 103 before the page, and the browser saw it.
    let hints = &json.early_hints;
    assert!((1..=3).contains(&hints.runs_with_103), "{hints:?}");
    let runs = &json.runs;
    assert_eq!(runs.len(), 3);
    let seen = runs.iter().filter(|r| measured(r).early_hints >= 1).count();
    assert_eq!(seen, hints.runs_with_103, "{hints:?}");
    assert_no_browser_left(tmp.path());
}

/// A self-signed certificate and key in `dir`; returns the base64 SHA-256 of its SPKI.
fn self_signed(dir: &Path) -> Option<String> {
    make_cert(dir)?;
    let out = Command::new("sh")
        .arg("-c")
        .arg(
            "openssl x509 -in \"$1\" -pubkey -noout | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | base64",
        )
        .arg("sh")
        .arg(dir.join("cert.pem"))
        .output()
        .expect("openssl spki");
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn static_site(dir: &Path) -> PathBuf {
    let www = dir.join("www");
    std::fs::create_dir_all(&www).expect("www");
    let mut html = String::from("<!doctype html><html><body><h1>static</h1>");
    for i in 0..3 {
        std::fs::write(
            www.join(format!("r{i}.js")),
            format!("var r{i} = '{}';", "x".repeat(5000)),
        )
        .expect("write");
        html.push_str(&format!("<script src=\"r{i}.js\"></script>"));
    }
    html.push_str("</body></html>");
    std::fs::write(www.join("index.html"), html).expect("write");
    www
}

#[test]
fn url_mode_loads_from_nghttpd_and_flags_a_protocol_fallback() {
    if require_peer("chromium").is_none()
        || require_peer("nghttpd").is_none()
        || require_peer("python3").is_none()
    {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-page-test");
    let Some(spki) = self_signed(tmp.path()) else {
        return;
    };
    let www = static_site(tmp.path());

    // nghttpd speaks h2 only: asked for h2, every resource must be h2.
    let tls = (tmp.path().join("cert.pem"), tmp.path().join("key.pem"));
    let Some((_nghttpd, port)) = start_nghttpd(&www, Some(tls), &[]) else {
        return;
    };
    let url = format!("https://127.0.0.1:{port}/index.html");
    let (code, json, err) = page(
        tmp.path(),
        &[
            &url, "--proto", "h2", "--runs", "1", "--spki", &spki, "--json", "-",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    check_run(&json.expect("a --json document").runs[0], "h2", 3, 5000);

    // A TLS server without h2: asked for h2, the browser falls back to HTTP/1.1. The run is
    // flagged, left out of the figures, and with nothing left the command fails.
    let script = "import http.server,ssl,sys,os\n\
        os.chdir(sys.argv[1])\n\
        class Q(http.server.SimpleHTTPRequestHandler):\n    protocol_version='HTTP/1.1'\n    def log_message(self,*a): pass\n\
        s=http.server.ThreadingHTTPServer(('127.0.0.1',0),Q)\n\
        c=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); c.load_cert_chain(sys.argv[2],sys.argv[3])\n\
        s.socket=c.wrap_socket(s.socket,server_side=True)\n\
        print(s.server_address[1],flush=True)\n\
        s.serve_forever()\n";
    let mut py = PeerProcess::spawn(
        Command::new("python3")
            .arg("-c")
            .arg(script)
            .arg(&www)
            .arg(tmp.path().join("cert.pem"))
            .arg(tmp.path().join("key.pem"))
            .stdout(Stdio::piped()),
    );
    let mut line = String::new();
    BufReader::new(py.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("python port");
    let port: u16 = line.trim().parse().expect("port");
    let url = format!("https://127.0.0.1:{port}/index.html");
    let json_file = tmp.path().join("fallback.json");
    let json_arg = json_file.display().to_string();
    let mut cmd = Command::new(hxlab());
    cmd.args([
        "page", &url, "--proto", "h2", "--runs", "1", "--spki", &spki, "--json", &json_arg,
    ])
    .env("TMPDIR", tmp.path());
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(60));
    assert_eq!(code, Some(1), "stdout: {out}\nstderr: {err}");
    assert!(err.contains("no run counted"), "stderr: {err}");
    assert!(out.contains("left out"), "stdout: {out}");
    let json = page_report_of(&std::fs::read_to_string(&json_file).expect("json written"))
        .expect("a --json document");
    let entry = &json.runs[0];
    let run = measured(entry);
    assert!(!entry.counted());
    assert!(!run.protocol_ok);
    assert_eq!(
        run.protocols.get("http/1.1"),
        Some(&4),
        "{:?}",
        run.protocols
    );
    assert!(
        run.flag.as_deref().unwrap_or("").contains("asked for h2"),
        "{:?}",
        run.flag
    );
    assert_eq!(json.summary.valid_runs, 0);
    assert!(json.summary.metrics.is_empty());
    assert_no_browser_left(tmp.path());
}

#[test]
fn missing_browser_is_one_line_and_exit_1() {
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "page",
            "https://127.0.0.1:9/",
            "--proto",
            "h2",
            "--chromium",
            "/nonexistent/chromium",
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(1), "stdout: {out}\nstderr: {err}");
    assert_eq!(err.trim().lines().count(), 1, "stderr: {err}");
    assert!(err.contains("Debian package `chromium`"), "stderr: {err}");
}

/// A fake browser that hangs (with a child of its own) must be killed at the timeout, and one
/// that dies at once must be reported as crashed; neither may leave a process behind.
#[test]
fn hung_or_crashing_browser_fails_cleanly() {
    let tmp = TempDir::new("hxlab-page-test");
    let pids = tmp.path().join("pids");
    let hang = tmp.path().join("hang-browser");
    std::fs::write(
        &hang,
        format!(
            "#!/bin/sh\necho $$ >> {0}\nsleep 300 &\necho $! >> {0}\nwait\n",
            pids.display()
        ),
    )
    .expect("write script");
    let crash = tmp.path().join("crash-browser");
    std::fs::write(&crash, "#!/bin/sh\necho 'fatal: no display' >&2\nexit 3\n")
        .expect("write script");
    use std::os::unix::fs::PermissionsExt;
    for p in [&hang, &crash] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    let started = Instant::now();
    let hang_arg = hang.display().to_string();
    let (code, _, err) = page(
        tmp.path(),
        &[
            "https://127.0.0.1:9/",
            "--proto",
            "h2",
            "--runs",
            "1",
            "--timeout",
            "2s",
            "--chromium",
            &hang_arg,
        ],
    );
    assert_eq!(code, Some(1), "stderr: {err}");
    assert!(err.contains("timed out"), "stderr: {err}");
    assert!(started.elapsed() < Duration::from_secs(30));
    let text = std::fs::read_to_string(&pids).expect("fake browser ran");
    let deadline = Instant::now() + Duration::from_secs(5);
    for pid in text.split_whitespace() {
        loop {
            let status = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for init to reap it.
            if status.is_empty() || status.contains(") Z ") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "process {pid} of the hung browser is still alive"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    assert_no_browser_left(tmp.path());

    let crash_arg = crash.display().to_string();
    let (code, _, err) = page(
        tmp.path(),
        &[
            "https://127.0.0.1:9/",
            "--proto",
            "h2",
            "--runs",
            "1",
            "--chromium",
            &crash_arg,
        ],
    );
    assert_eq!(code, Some(1), "stderr: {err}");
    assert!(
        err.contains("crashed") && err.contains("no display"),
        "stderr: {err}"
    );
    assert_no_browser_left(tmp.path());
}

#[test]
fn bad_flags_exit_2() {
    for args in [
        vec!["page", "https://127.0.0.1:9/", "--proto", "h4"],
        vec![
            "page",
            "https://127.0.0.1:9/",
            "--proto",
            "h2",
            "--runs",
            "0",
        ],
        vec!["page", "--synthetic", "n=lots", "--proto", "h2"],
        vec!["page", "--synthetic", "n=3,colour=red", "--proto", "h2"],
        vec![
            "page",
            "--synthetic",
            "n=3",
            "--proto",
            "h2",
            "--server-cc",
            "vegas",
        ],
        vec!["page", "--proto", "h2"],
        vec!["page", "ftp://127.0.0.1/", "--proto", "h2"],
        vec![
            "page",
            "https://127.0.0.1:9/",
            "--proto",
            "h2",
            "--timeout",
            "soon",
        ],
        vec!["page", "https://127.0.0.1:9/", "--proto", "h2", "--push"],
        vec!["page", "https://:9/", "--proto", "h2"],
        vec!["page", "http://127.0.0.1:9/", "--proto", "h3"],
        vec![
            "page",
            "https://127.0.0.1:9/",
            "--proto",
            "h2",
            "--spki",
            "nope",
        ],
        vec![
            "page",
            "--synthetic",
            "n=2",
            "--proto",
            "h2",
            "--profile",
            "no-such-profile",
        ],
        vec![
            "page",
            "--synthetic",
            "n=2",
            "--proto",
            "h2",
            "--loss",
            "150%",
        ],
        // The link's bounds hold here as in `hxlab link` (LinkConfig::validate).
        vec![
            "page",
            "--synthetic",
            "n=2",
            "--proto",
            "h2",
            "--down",
            "1bit",
        ],
        vec![
            "page",
            "--synthetic",
            "n=2",
            "--proto",
            "h2",
            "--delay",
            "11min",
        ],
    ] {
        let (code, _, err) =
            run_with_timeout(Command::new(hxlab()).args(&args), Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?}: stderr: {err}");
        // One line, or clap's few (possible values, usage) after it.
        common::usage_error_of(&format!("{args:?}"), &err);
    }
}

/// Without --proto (required unless --config), the usage error names it among clap's missing
/// arguments and shows it on the usage line.
#[test]
fn a_missing_proto_is_named_in_the_usage_error() {
    let tmp = TempDir::new("hxlab-page-noproto");
    let har = tmp.path().join("site.har").display().to_string();
    for args in [
        vec!["page", "--replay", har.as_str()],
        vec!["page", "https://127.0.0.1:9/"],
        vec!["page", "--synthetic", "n=2"],
        vec!["page"],
    ] {
        let (code, out, err) =
            run_with_timeout(Command::new(hxlab()).args(&args), Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?}: stderr: {err}");
        let error = common::usage_error_of(&format!("{args:?}"), &err);
        assert_eq!(error.details, ["--proto <PROTO>"], "{args:?}: {err}");
        let usage = error.usage.unwrap_or_default();
        assert!(usage.contains("--proto <PROTO>"), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?}: stdout: {out}");
    }
}

/// Behind `hxlab link` with 50 ms each way, the browser (in the link's namespace) still gets
/// every resource over the protocol asked for, and the first byte takes at least the
/// handshake and request round trips.
#[test]
fn synthetic_page_behind_an_emulated_link() {
    if require_peer("chromium").is_none() {
        return;
    }
    if !common::require_root("the emulated link (network namespaces, TUN devices)") {
        return;
    }
    let _one = browser_lock();
    for (proto, want) in [("h2", "h2"), ("h3", "h3")] {
        let tmp = TempDir::new("hxlab-page-test");
        let (code, json, err) = page(
            tmp.path(),
            &[
                "--synthetic",
                "n=3,size=4KiB,delay=0ms",
                "--proto",
                proto,
                "--runs",
                "1",
                "--delay",
                "50ms",
                "--down",
                "20mbit",
                "--up",
                "5mbit",
                "--timeout",
                "40s",
                "--json",
                "-",
            ],
        );
        assert_eq!(code, Some(0), "{proto}: stderr: {err}");
        let json = json.expect("a --json document");
        let run = &json.runs[0];
        check_run(run, want, 3, 4096);
        // TCP+TLS or QUIC handshake, then the request: at least two 100 ms round trips.
        let ttfb = measured(run).ttfb_ms;
        assert!(
            ttfb >= 150.0,
            "{proto}: TTFB {ttfb} ms behind a 100 ms RTT link"
        );
        assert!(
            !json.url.contains("127.0.0.1"),
            "the page is served on the link's host address: {}",
            json.url
        );
        assert_no_browser_left(tmp.path());
    }
}

/// A page whose load event never comes (an image the server never answers) still counts
/// by its largest paint: the wait for the load ends in time to measure it (15 s limit: at
/// 5 s), the image is listed as unfinished, and there is no load time.
#[test]
fn a_page_whose_load_event_never_comes_counts_by_its_largest_paint() {
    if require_peer("chromium").is_none() || require_peer("python3").is_none() {
        return;
    }
    let _one = browser_lock();
    let tmp = TempDir::new("hxlab-page-hung");
    let script = "import http.server,time\n\
        class Q(http.server.BaseHTTPRequestHandler):\n    protocol_version='HTTP/1.1'\n    def log_message(self,*a): pass\n    def do_GET(self):\n        if self.path=='/hang':\n            time.sleep(120)\n            return\n        b=b'<!doctype html><h1>a heading that paints</h1><img src=\"/hang\">'\n        self.send_response(200); self.send_header('content-type','text/html'); self.send_header('content-length',str(len(b))); self.end_headers(); self.wfile.write(b)\n\
        s=http.server.ThreadingHTTPServer(('127.0.0.1',0),Q)\n\
        print(s.server_address[1],flush=True)\n\
        s.serve_forever()\n";
    let mut py = PeerProcess::spawn(
        Command::new("python3")
            .arg("-c")
            .arg(script)
            .stdout(Stdio::piped()),
    );
    let mut line = String::new();
    BufReader::new(py.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("python port");
    let port: u16 = line.trim().parse().expect("port");
    let url = format!("http://127.0.0.1:{port}/");
    let (code, json, err) = page(
        tmp.path(),
        &[
            &url,
            "--proto",
            "h1",
            "--runs",
            "1",
            "--timeout",
            "15s",
            "--json",
            "-",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let json = json.expect("a --json document");
    let entry = &json.runs[0];
    let run = measured(entry);
    assert!(entry.counted(), "{:?}", run.flag);
    assert!(run.lcp_ms.is_some_and(|l| l > 0.0), "{:?}", run.lcp_ms);
    assert!(
        run.load_ms < 0.0,
        "no load event, no load time: {}",
        run.load_ms
    );
    let p = &run.problems;
    assert_eq!((p.unfinished, p.failed), (1, 0), "{p:?}");
    assert_eq!(p.first[0].url, format!("http://127.0.0.1:{port}/hang"));
    assert!(
        !json.summary.metrics.contains_key("load_ms") || json.summary.metrics["load_ms"].n == 0
    );
    assert_no_browser_left(tmp.path());
}
