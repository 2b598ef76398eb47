//! Record and replay against a real headless Chromium, everything on loopback: the
//! two-hostname synthetic page recorded into a HAR and replayed over h1, h2 and h3 with the
//! protocol forced (every resource from the archive, byte-identical), a DevTools-style HAR
//! made here, HAR files that cannot be replayed, and what a real recording holds besides
//! answers (a failed request, a declared icon, a host it never saw), none of them a miss.

mod common;

use base64::Engine;
use common::{hxlab, require_peer, run_with_timeout, tempfile_dir::TempDir};
use hxlab_contract::{NearMissRule, PageReport, ReplayCounts};
use hxlab_core::page::Outcome;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

/// Chromium is heavy on a 2-core machine: one browser test at a time.
static BROWSER: Mutex<()> = Mutex::new(());

/// `hxlab page ARGS` with TMPDIR=tmp; returns (exit code, the `--json -` report if one was
/// written, stderr).
fn page(tmp: &Path, args: &[&str]) -> (Option<i32>, Option<PageReport>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("page").args(args).env("TMPDIR", tmp);
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(90));
    (code, PageReport::from_json(&out).ok(), err)
}

/// The body of a HAR entry, decoded.
fn body(e: &Value) -> Vec<u8> {
    let c = &e["response"]["content"];
    let text = c["text"].as_str().expect("recorded body");
    if c["encoding"] == "base64" {
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .expect("base64")
    } else {
        text.as_bytes().to_vec()
    }
}

/// Replays `har` over `proto`; returns the report, its run checked to be clean.
fn replay(tmp: &Path, har: &Path, proto: &str, want: &str, entries: usize) -> PageReport {
    let out = tmp.join(format!("replayed-{proto}"));
    std::fs::create_dir_all(&out).expect("dir");
    let (code, json, err) = page(
        tmp,
        &[
            "--replay",
            &har.display().to_string(),
            "--proto",
            proto,
            "--runs",
            "1",
            "--timeout",
            "40s",
            "--record",
            &tmp.join(format!("again-{proto}.har")).display().to_string(),
            "--json",
            "-",
        ],
    );
    assert_eq!(code, Some(0), "{proto}: stderr: {err}");
    let json = json.expect("a --json document");
    let entry = &json.runs[0];
    let Outcome::Measured(run) = &entry.outcome else {
        panic!("{proto}: the run failed: {:?}", entry.outcome);
    };
    assert!(entry.counted(), "{proto}: {:?}", run.flag);
    let counts = entry
        .replay
        .clone()
        .flatten()
        .expect("the run's replay counts");
    let t = counts.tally;
    assert_eq!(t.hits, entries as u64, "{proto}: {counts:?}");
    assert_eq!(t.near_misses, 0, "{proto}: {counts:?}");
    assert_eq!(t.served_without_body, 0, "{proto}: {counts:?}");
    // The browser's own /favicon.ico is counted apart: a fresh recording has no miss.
    assert_eq!(t.misses, 0, "{proto}: {counts:?}");
    for r in &run.resources {
        assert_eq!(r.protocol, want, "{proto}: {}", r.url);
        assert_eq!(r.status, 200, "{proto}: {}", r.url);
    }
    assert_eq!(run.resources.len(), entries);
    json
}

#[test]
fn records_a_two_host_page_and_replays_it_over_h1_h2_h3() {
    // Each replay is itself recorded (--record), so the bodies the browser got from the
    // archive are compared with the recording byte for byte.
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("hxlab-replay-test");
    let har = tmp.path().join("site.har");
    let (code, json, err) = page(
        tmp.path(),
        &[
            "--synthetic",
            "n=6,size=3KiB,delay=1ms,origins=2",
            "--proto",
            "h2",
            "--runs",
            "1",
            "--timeout",
            "40s",
            "--record",
            &har.display().to_string(),
            "--json",
            "-",
        ],
    );
    assert_eq!(code, Some(0), "stderr: {err}");
    let recording = json.expect("a --json document").recorded;
    assert_eq!(
        recording.map(|r| (r.har, r.written)),
        Some((har.clone(), true))
    );
    let recorded: Value =
        serde_json::from_slice(&std::fs::read(&har).expect("HAR written")).expect("JSON");
    assert_eq!(recorded["log"]["version"], "1.2");
    assert_eq!(recorded["log"]["creator"]["name"], "hxlab");
    let entries = recorded["log"]["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 7, "page + 6 resources");
    let hosts: std::collections::BTreeSet<&str> = entries
        .iter()
        .filter_map(|e| e["request"]["url"].as_str())
        .filter_map(|u| u.split('/').nth(2)?.split(':').next())
        .collect();
    assert_eq!(
        hosts.into_iter().collect::<Vec<_>>(),
        vec!["a.hxlab.test", "b.hxlab.test"]
    );
    for e in entries {
        assert_eq!(e["response"]["status"], 200);
        let b = body(e);
        let url = e["request"]["url"].as_str().unwrap_or("");
        if url.contains("/bytes/") {
            assert_eq!(b, vec![b'x'; 3072], "{url}");
        }
    }
    for (proto, want) in [("h1", "http/1.1"), ("h2", "h2"), ("h3", "h3")] {
        let json = replay(tmp.path(), &har, proto, want, entries.len());
        assert_eq!(
            Some(json.url.as_str()),
            recorded["log"]["pages"][0]["title"].as_str()
        );
        // What the browser got from the replay is what was recorded, byte for byte.
        let again: Value = serde_json::from_slice(
            &std::fs::read(tmp.path().join(format!("again-{proto}.har"))).expect("re-recorded"),
        )
        .expect("JSON");
        let again = again["log"]["entries"].as_array().expect("entries");
        assert_eq!(again.len(), entries.len(), "{proto}");
        for e in entries {
            let url = &e["request"]["url"];
            let twin = again
                .iter()
                .find(|a| &a["request"]["url"] == url)
                .unwrap_or_else(|| panic!("{proto}: {url} not loaded in the replay"));
            assert_eq!(body(twin), body(e), "{proto}: body of {url}");
        }
    }
}

#[test]
fn a_devtools_style_har_replays() {
    if require_peer("chromium").is_none() {
        return;
    }
    let _one = BROWSER.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = TempDir::new("hxlab-replay-devtools");
    let png = base64::engine::general_purpose::STANDARD.encode([0u8, 1, 2, 250, 255]);
    let har = serde_json::json!({ "log": {
        "version": "1.2",
        "creator": { "name": "WebInspector", "version": "537.36" },
        "pages": [{ "startedDateTime": "2026-01-01T00:00:00.000Z", "id": "page_1",
            "title": "https://shop.example.test/", "pageTimings": {} }],
        "entries": [
            { "request": { "method": "GET", "url": "https://shop.example.test/", "httpVersion": "h2", "headers": [] },
              "response": { "status": 200, "statusText": "", "httpVersion": "h2",
                "headers": [{ "name": ":status", "value": "200" },
                            { "name": "content-type", "value": "text/html" },
                            { "name": "content-encoding", "value": "br" }],
                "content": { "size": 150, "mimeType": "text/html",
                  "text": "<!doctype html><title>t</title><link rel=\"icon\" href=\"data:,\"><script src=\"https://cdn.example.test/app.js?v=3\"></script><script>fetch('/logo.bin').then(r => r.arrayBuffer())</script>" } } },
            { "request": { "method": "GET", "url": "https://cdn.example.test/app.js?v=3", "headers": [] },
              "response": { "status": 200, "headers": [{ "name": "Content-Type", "value": "text/javascript" }],
                "content": { "size": 15, "mimeType": "text/javascript", "text": "window.ok = 1;\n" } } },
            { "request": { "method": "GET", "url": "https://shop.example.test/logo.bin", "headers": [] },
              "response": { "status": 200, "headers": [],
                "content": { "size": 5, "mimeType": "application/octet-stream", "text": png, "encoding": "base64" } } }
        ] } });
    let path = tmp.path().join("devtools.har");
    std::fs::write(&path, serde_json::to_vec(&har).expect("json")).expect("write");
    for (proto, want) in [("h2", "h2"), ("h3", "h3")] {
        let json = replay(tmp.path(), &path, proto, want, 3);
        assert_eq!(json.url, "https://shop.example.test/");
        let again: Value = serde_json::from_slice(
            &std::fs::read(tmp.path().join(format!("again-{proto}.har"))).expect("re-recorded"),
        )
        .expect("JSON");
        let logo = again["log"]["entries"]
            .as_array()
            .and_then(|a| {
                a.iter()
                    .find(|e| e["request"]["url"] == "https://shop.example.test/logo.bin")
            })
            .expect("logo loaded")
            .clone();
        assert_eq!(body(&logo), vec![0u8, 1, 2, 250, 255], "{proto}");
    }
}

#[test]
fn a_bad_har_is_one_line_and_exit_2() {
    let tmp = TempDir::new("hxlab-replay-bad");
    let not_json = tmp.path().join("not.har");
    std::fs::write(&not_json, "<html>not a har</html>").expect("write");
    let old = tmp.path().join("old.har");
    std::fs::write(&old, r#"{"log":{"version":"0.9","entries":[]}}"#).expect("write");
    let huge = tmp.path().join("huge.har");
    // Sparse: 600 MiB on paper, nothing on disk; refused by its size before any read.
    std::fs::File::create(&huge)
        .and_then(|f| f.set_len(600 << 20))
        .expect("sparse file");
    for (file, says) in [
        (&not_json, "not a HAR file"),
        (&old, "version"),
        (&huge, "512 MiB"),
    ] {
        for sub in ["serve", "page"] {
            let mut cmd = Command::new(hxlab());
            cmd.arg(sub).arg("--replay").arg(file);
            if sub == "serve" {
                cmd.args(["--tls-port", "0", "--plain-port", "0"]);
            } else {
                cmd.args(["--proto", "h2"]);
            }
            let (code, _, err) = run_with_timeout(&mut cmd, Duration::from_secs(20));
            assert_eq!(code, Some(2), "{sub} {}: {err}", file.display());
            let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(lines.len(), 1, "{sub}: one line: {err}");
            assert!(lines[0].contains(says), "{sub}: {err}");
        }
    }
}

/// A HAR of one page on `shop.example.test` for the replay server alone.
fn small_har(path: &Path) {
    let har = serde_json::json!({ "log": {
        "version": "1.2",
        "creator": { "name": "WebInspector", "version": "537.36" },
        "pages": [{ "startedDateTime": "2026-01-01T00:00:00.000Z", "id": "page_1",
            "title": "https://shop.example.test/", "pageTimings": {} }],
        "entries": [
            { "request": { "method": "GET", "url": "https://shop.example.test/?v=1", "headers": [] },
              "response": { "status": 200, "headers": [],
                "content": { "size": 2, "mimeType": "text/html", "text": "ok" } } },
            { "request": { "method": "GET", "url": "data:,x", "headers": [] },
              "response": { "status": 200, "headers": [], "content": { "size": 0 } } }
        ] } });
    std::fs::write(path, serde_json::to_vec(&har).expect("json")).expect("write");
}

/// The body of `GET path` on the plain port `plain` (the replay server sends it whole, with
/// a Content-Length).
fn plain_get(plain: &str, path: &str, host: &str) -> String {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let text = common::h1_exchange(plain, request.as_bytes()).expect("an answer");
    text.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .expect("a body")
}

/// A real `/replay-stats` body reads as [`ReplayCounts`] and writes back byte for byte: a
/// near miss, a miss and the skipped entry are in it, so every field is filled.
#[test]
fn replay_stats_read_back_as_replay_counts() {
    let tmp = TempDir::new("hxlab-replay-stats");
    let har = tmp.path().join("shop.har");
    small_har(&har);
    let server = common::Server::start(&["--replay", &har.display().to_string()]);
    let plain = server.ready.plain.to_string();
    // No page on the plain port matches exactly (it was recorded over https): a near miss
    // on the path, then a miss.
    plain_get(&plain, "/?v=2", "shop.example.test");
    plain_get(&plain, "/gone", "shop.example.test");
    let body = plain_get(&plain, "/replay-stats", "127.0.0.1");
    let counts = ReplayCounts::from_json(&body).expect("a /replay-stats document");
    assert_eq!(
        counts.to_json(),
        body,
        "ReplayCounts writes back what it read"
    );
    assert_eq!(counts.entries, 1);
    assert_eq!(counts.tally.near_misses, 1, "{body}");
    assert_eq!(counts.tally.misses, 1, "{body}");
    assert_eq!(
        counts.near_miss_urls.first().map(|n| n.rule),
        Some(NearMissRule::Host),
        "{body}"
    );
    assert_eq!(
        counts.miss_urls,
        vec!["GET http://shop.example.test/gone".to_string()]
    );
    assert!(counts.skipped.is_some(), "{body}");
}

/// The answer to `GET path` with `Host: host` on the plain port: its status line and its
/// `x-hxlab-replay` tag.
fn plain_tag(plain: &str, path: &str, host: &str) -> (String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    let text = common::h1_exchange(plain, request.as_bytes()).expect("an answer");
    let status = text.lines().next().unwrap_or("").to_string();
    let tag = text
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("x-hxlab-replay")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_default();
    (status, tag)
}

/// What a real page's recording holds besides answers: a request that failed on a host
/// that answered others is answered at once with an error status, an icon the page
/// declares on another host is the browser's own, and a host the recording never saw is
/// outside it; none of them is a miss.
#[test]
fn recorded_failures_declared_icons_and_outside_hosts_are_not_misses() {
    let tmp = TempDir::new("hxlab-replay-imperfect");
    let har = tmp.path().join("imperfect.har");
    let doc = serde_json::json!({ "log": {
        "version": "1.2",
        "pages": [{ "id": "page_1", "title": "http://shop.example.test/" }],
        "entries": [
            { "request": { "method": "GET", "url": "http://shop.example.test/" },
              "response": { "status": 200, "headers": [{ "name": "Content-Type", "value": "text/html" }],
                "content": { "size": 70, "mimeType": "text/html",
                  "text": "<link rel=\"icon\" href=\"http://cdn.example.test/brand.png?v=2\"><p>shop</p>" } } },
            { "request": { "method": "GET", "url": "http://shop.example.test/beacon" },
              "response": { "status": 0, "headers": [], "content": { "size": 0 },
                "_error": "net::ERR_CONNECTION_RESET" } }
        ] } });
    std::fs::write(&har, serde_json::to_vec(&doc).expect("json")).expect("write");
    let server = common::Server::start(&["--replay", &har.display().to_string()]);
    let plain = server.ready.plain.to_string();
    let (status, tag) = plain_tag(&plain, "/beacon", "shop.example.test");
    assert!(status.contains(" 502"), "{status}");
    assert_eq!(tag, "recorded-failure");
    let (status, tag) = plain_tag(&plain, "/brand.png?v=2", "cdn.example.test");
    assert!(status.contains(" 404"), "{status}");
    assert_eq!(tag, "browser-own");
    let (status, tag) = plain_tag(&plain, "/t.js", "tracker.example.test");
    assert!(status.contains(" 404"), "{status}");
    assert_eq!(tag, "outside");
    let (_, tag) = plain_tag(&plain, "/gone", "shop.example.test");
    assert_eq!(tag, "miss");
    let body = plain_get(&plain, "/replay-stats", "127.0.0.1");
    let counts = ReplayCounts::from_json(&body).expect("a /replay-stats document");
    let t = counts.tally;
    assert_eq!(
        (t.recorded_failures, t.browser_own, t.outside, t.misses),
        (1, 1, 1, 1),
        "{body}"
    );
    assert_eq!(
        counts.outside_urls,
        vec!["GET http://tracker.example.test/t.js"]
    );
    assert_eq!(counts.miss_urls, vec!["GET http://shop.example.test/gone"]);
}
