//! HTTP/3 header compression of `hxlab serve` (QPACK with the dynamic table, both ways)
//! against independent clients: aioquic (pylsqpack, `tests/peers/qpack_client.py`),
//! gtlsclient (ngtcp2 with nghttp3's QPACK) and Chromium. Every body must arrive intact and
//! the dynamic table must actually be used: `/stats` counts the clients' references we
//! decoded, and aioquic sees our responses reference its table.

mod common;

use common::{hxlab, require_peer, run_with_timeout, serve_stats, Server};
use hxlab_contract::H3QpackStats;
use hxlab_core::Protocol;
use std::process::Command;
use std::time::Duration;

/// The Python with aioquic (see [`common::aioquic_python`]).
fn python() -> Option<String> {
    common::aioquic_python()
}

/// Runs the aioquic client against `server` with `args`: its JSON report.
fn aioquic_client(py: &str, server: &Server, args: &[&str]) -> serde_json::Value {
    let port = server.ready.tls.port().to_string();
    let mut cmd = Command::new(py);
    cmd.arg(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/peers/qpack_client.py"
    ))
    .args(["127.0.0.1", &port, "--timeout", "60"])
    .args(args);
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(90));
    assert_eq!(code, Some(0), "qpack_client.py: {out}\n{err}");
    let line = out
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON from qpack_client.py: {out}\n{err}"));
    serde_json::from_str(line).expect("client JSON")
}

fn qpack_stats(server: &Server) -> H3QpackStats {
    serve_stats(&server.ready.plain.to_string()).h3_qpack
}

fn num(v: &serde_json::Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// 100 requests on one aioquic connection (10 at a time), then three identical ones: every
/// body intact, the dynamic table used both ways, and the third identical response's header
/// bytes at most 40 % of the first's.
#[test]
fn aioquic_and_the_origin_use_each_others_dynamic_tables() {
    let Some(py) = python() else { return };
    let server = Server::start(&[]);
    let r = aioquic_client(
        &py,
        &server,
        &["--requests", "100", "--concurrency", "10", "--repeat", "3"],
    );
    eprintln!("aioquic: {r}");
    assert_eq!(num(&r, "ok"), 103, "{r}");
    assert_eq!(r["bad"].as_array().map(Vec::len), Some(0), "{r}");
    // We advertised 4096 bytes and 100 blocked streams.
    assert_eq!(r["server_settings"]["1"].as_u64(), Some(4096), "{r}");
    assert_eq!(r["server_settings"]["7"].as_u64(), Some(100), "{r}");
    // aioquic's requests referenced our decoder's table, and our responses its table.
    assert!(num(&r, "request_sections_with_refs") > 0, "{r}");
    assert_eq!(num(&r, "response_sections"), 103, "{r}");
    assert!(num(&r, "response_sections_with_refs") > 50, "{r}");
    let st = qpack_stats(&server);
    eprintln!("/stats h3_qpack: {st:?}");
    assert!(st.dynamic_refs_decoded > 0, "{st:?}");
    assert!(st.inserts_received > 0, "{st:?}");
    assert!(st.inserts_made > 0 && st.dynamic_refs_encoded > 0, "{st:?}");
    assert_eq!(st.table_capacity, 4096);
    assert_eq!(st.blocked_streams_allowed, 100);
    assert_eq!(
        st.client_settings.get("capacity=4096,blocked=16"),
        Some(&1),
        "{st:?}"
    );
    assert!(st.request_header_bytes > 0 && st.response_header_bytes > 0);
    let h3 = serve_stats(&server.ready.plain.to_string())
        .protocol(Protocol::H3)
        .cloned()
        .unwrap_or_default();
    assert_eq!(h3.requests, 103);

    // Three identical requests on a fresh connection: the first response's header cost is
    // its HEADERS payload plus the inserts it brought on our encoder stream (with blocked
    // streams allowed it may reference them at once; before aioquic's SETTINGS arrive it
    // is static-only). The third references what is in the table (a `date` of a new second
    // may be inserted for it, and is referenced as well).
    let r = aioquic_client(&py, &server, &["--requests", "0", "--repeat", "3"]);
    let rep = r["repeat"].as_array().expect("repeat");
    let cost = |i: usize| num(&rep[i], "headers") + num(&rep[i], "encoder_stream");
    eprintln!("three identical: {rep:?}");
    assert!(
        num(&rep[2], "headers") * 10 <= cost(0) * 4,
        "third HEADERS {} bytes against the first's {} (with its inserts): {r}",
        num(&rep[2], "headers"),
        cost(0)
    );
}

/// With `--header-table 0` the origin advertises no table and its responses reference none
/// (the static-only head, cached per thread), while aioquic still gets every body.
#[test]
fn a_zero_header_table_is_static_only() {
    let Some(py) = python() else { return };
    let server = Server::start(&["--header-table", "0"]);
    let r = aioquic_client(&py, &server, &["--requests", "20", "--repeat", "3"]);
    assert_eq!(num(&r, "ok"), 23, "{r}");
    assert_eq!(r["server_settings"]["1"].as_u64(), Some(0), "{r}");
    assert_eq!(num(&r, "request_sections_with_refs"), 0, "{r}");
    assert_eq!(num(&r, "response_sections_with_refs"), 0, "{r}");
    let st = qpack_stats(&server);
    assert_eq!(
        (st.dynamic_refs_decoded, st.inserts_made, st.table_capacity),
        (0, 0, 0),
        "{st:?}"
    );
}

/// gtlsclient (nghttp3's QPACK) sends 60 requests on one connection: every body arrives
/// whole, its request heads referenced our table and our responses referenced its table.
#[test]
fn gtlsclient_requests_reference_the_dynamic_table() {
    if require_peer("gtlsclient").is_none() {
        return;
    }
    let server = Server::start(&[]);
    let t = server.ready.tls.port().to_string();
    let dl = server.dir.path().join("dl");
    std::fs::create_dir_all(&dl).expect("mkdir");
    let sizes: Vec<u64> = (0..60).map(|i| 1000 + i * 37).collect();
    let urls: Vec<String> = sizes
        .iter()
        .map(|n| format!("https://127.0.0.1:{t}/bytes/{n}"))
        .collect();
    let mut cmd = Command::new("gtlsclient");
    // Requests sent with the handshake would go before our SETTINGS arrive, when a client
    // may not use our table yet: they wait 300 ms (a loopback round trip is well under 1 ms).
    cmd.args([
        "-q",
        "--exit-on-all-streams-close",
        "--timeout=10s",
        "--delay-stream=300ms",
        "--download",
    ])
    .arg(&dl)
    .args(["127.0.0.1", &t])
    .args(&urls);
    let (code, _, err) = run_with_timeout(&mut cmd, Duration::from_secs(60));
    assert_eq!(code, Some(0), "gtlsclient: {err}");
    for n in &sizes {
        let body = std::fs::read(dl.join(n.to_string()))
            .unwrap_or_else(|e| panic!("/bytes/{n} not downloaded: {e}"));
        assert!(
            body.len() as u64 == *n && body.iter().all(|b| *b == b'x'),
            "/bytes/{n}: {} bytes",
            body.len()
        );
    }
    let snapshot = serve_stats(&server.ready.plain.to_string());
    let h3 = snapshot.protocol(Protocol::H3).cloned().unwrap_or_default();
    assert_eq!((h3.requests, h3.connections), (60, 1), "{h3:?}");
    let st = snapshot.h3_qpack;
    eprintln!("gtlsclient /stats h3_qpack: {st:?}");
    assert!(st.dynamic_refs_decoded > 0, "{st:?}");
    assert!(st.inserts_received > 0, "{st:?}");
    assert!(st.dynamic_refs_encoded > 0, "{st:?}");
}

/// A Chromium page load over HTTP/3 from `hxlab serve`: its request heads reference our
/// dynamic table (counted in /stats), and what it advertised is recorded.
#[test]
fn chromium_request_heads_reference_the_dynamic_table() {
    if require_peer("chromium").is_none() {
        return;
    }
    let server = Server::start(&[]);
    let tmp = server.dir.path().join("page");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    let url = format!("https://127.0.0.1:{}/page?n=20", server.ready.tls.port());
    let mut cmd = Command::new(hxlab());
    cmd.args([
        "page",
        &url,
        "--proto",
        "h3",
        "--runs",
        "1",
        "--spki",
        &server.ready.spki_sha256,
        "--json",
        "-",
    ])
    .env("TMPDIR", &tmp);
    let (code, out, err) = run_with_timeout(&mut cmd, Duration::from_secs(80));
    assert_eq!(code, Some(0), "hxlab page: {out}\n{err}");
    let snapshot = serve_stats(&server.ready.plain.to_string());
    let h3 = snapshot.protocol(Protocol::H3).cloned().unwrap_or_default();
    assert!(h3.requests >= 21, "{h3:?}");
    let st = snapshot.h3_qpack;
    eprintln!("chromium /stats h3_qpack: {st:?}");
    assert!(st.dynamic_refs_decoded > 0, "{st:?}");
    assert!(!st.client_settings.is_empty(), "{st:?}");
}
