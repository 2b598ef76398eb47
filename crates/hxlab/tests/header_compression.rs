//! Header compression (issue 42) against real peers: `hxlab serve`'s HPACK encoder indexes
//! response fields in a per-connection table, as nginx and h2o do; nghttp2 (nghttp, h2load),
//! an independent decoder, reads what it sends; `--header-table 0` keeps both ends
//! static-only; a load run records the tables read from the SETTINGS exchanged.

mod common;

use common::{hxlab, require_peer, run_with_timeout, serve_stats, Server};
use hxlab_core::header_table::HeaderTableSeen;
use hxlab_core::RunResult;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The HEADERS frames of one `hxlab trace -m 3` connection: (sent lengths, received lengths,
/// the `date` of every response).
struct Heads {
    sent: Vec<u64>,
    received: Vec<u64>,
    dates: Vec<String>,
}

fn trace_heads(url: &str, cacert: &str, extra: &[&str]) -> Heads {
    let mut cmd = Command::new(hxlab());
    cmd.args(["trace", url, "-m", "3", "--cacert", cacert, "--json"])
        .args(extra);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "hxlab trace failed: {err}\n{out}");
    let mut h = Heads {
        sent: Vec::new(),
        received: Vec::new(),
        dates: Vec::new(),
    };
    for line in out.lines() {
        let e: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if e["event"] != "frame" || e["type"] != "HEADERS" {
            continue;
        }
        let len = e["length"].as_u64().expect("length");
        if e["dir"] == "send" {
            h.sent.push(len);
        } else {
            h.received.push(len);
            let date = e["headers"]
                .as_array()
                .and_then(|a| a.iter().find(|f| f[0] == "date"))
                .and_then(|f| f[1].as_str())
                .unwrap_or_default();
            h.dates.push(date.to_string());
        }
    }
    assert_eq!((h.sent.len(), h.received.len()), (3, 3), "{out}");
    h
}

/// A trace whose three responses carry the same `date` (a second boundary between them
/// changes the field; two in a row within milliseconds do not happen).
fn trace_same_second(url: &str, cacert: &str, extra: &[&str]) -> Heads {
    let h = trace_heads(url, cacert, extra);
    if h.dates.iter().all(|d| *d == h.dates[0]) {
        return h;
    }
    trace_heads(url, cacert, extra)
}

#[test]
fn repeated_heads_shrink_on_one_connection_and_table_zero_stays_static() {
    let s = Server::start(&[]);
    let cert = s.cert();
    let cacert = cert.to_str().expect("utf-8");
    let url = format!("https://{}/bytes/100", s.ready.tls);
    let h = trace_same_second(&url, cacert, &[]);
    assert!(h.sent[2] <= 10, "third request HEADERS: {:?}", h.sent);
    assert!(
        h.received[2] * 10 <= h.received[0] * 4,
        "third response HEADERS over 40 % of the first: {:?}",
        h.received
    );
    // /stats: the connection's encoder used 4096, and head bytes were counted both ways.
    let stats = serve_stats(&s.ready.plain.to_string());
    let h2 = stats.protocol(hxlab_core::Protocol::H2).expect("h2 stats");
    assert_eq!(h2.encoder_tables.get("4096"), Some(&h2.connections));
    // At least this trace's (a trace taken again after a second boundary adds its own).
    assert!(h2.response_header_bytes >= h.received.iter().sum::<u64>());
    assert!(h2.request_header_bytes >= h.sent.iter().sum::<u64>());

    // HTTP/1.1 counts its heads too: the request line and fields, the status line and fields.
    let plain = s.ready.plain.to_string();
    let request = b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let answer = common::h1_exchange(&plain, request).expect("an h1 answer");
    let head = answer.split("\r\n\r\n").next().unwrap_or_default().len() as u64 + 4;
    let h1 = serve_stats(&plain);
    let h1 = h1.protocol(hxlab_core::Protocol::H1).expect("h1 stats");
    // This request and the /stats requests before it.
    assert!(h1.request_header_bytes >= request.len() as u64, "{h1:?}");
    assert!(h1.response_header_bytes >= head, "{h1:?}");
    assert!(h1.encoder_tables.is_empty());

    let z = Server::start(&["--header-table", "0"]);
    let cert = z.cert();
    let cacert = cert.to_str().expect("utf-8");
    let url = format!("https://{}/bytes/100", z.ready.tls);
    let s0 = trace_same_second(&url, cacert, &["--header-table", "0"]);
    // The first block opens with the one-byte size update to 0; then every head is the
    // same static-only block.
    assert_eq!(s0.received[0], s0.received[1] + 1, "{:?}", s0.received);
    assert_eq!(s0.received[1], s0.received[2], "{:?}", s0.received);
    assert!(
        s0.received[2] > h.received[2],
        "{:?} vs {:?}",
        s0.received,
        h.received
    );
    assert_eq!(
        s0.sent[1], s0.sent[2],
        "requests static-only too: {:?}",
        s0.sent
    );
    assert!(s0.sent[2] > h.sent[2]);
    let stats = serve_stats(&z.ready.plain.to_string());
    let h2 = stats.protocol(hxlab_core::Protocol::H2).expect("h2 stats");
    assert_eq!(h2.encoder_tables.get("0"), Some(&h2.connections));
}

/// The `space savings` percentage of an h2load run of 100 requests over one connection,
/// after checking that every response was 2xx.
fn h2load_savings(h2load: &std::path::Path, url: &str) -> f64 {
    let mut cmd = Command::new(h2load);
    cmd.args(["-n100", "-c1", "-m10", url]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "h2load: {err}\n{out}");
    assert!(out.contains("status codes: 100 2xx"), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("space savings"))
        .unwrap_or_else(|| panic!("no space savings in {out}"));
    let pct = line
        .split("space savings ")
        .nth(1)
        .and_then(|r| r.split('%').next())
        .and_then(|p| p.parse::<f64>().ok());
    pct.unwrap_or_else(|| panic!("cannot read {line}"))
}

#[test]
fn nghttp2_decodes_indexed_responses() {
    let (Some(nghttp), Some(h2load)) = (require_peer("nghttp"), require_peer("h2load")) else {
        return;
    };
    let s = Server::start(&[]);
    let url = format!("https://{}/bytes/100", s.ready.tls);
    // nghttp's own HPACK decoder: three responses on one connection, every one 200.
    let mut cmd = Command::new(nghttp);
    cmd.args(["-nv", "-m", "3", &url]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "nghttp: {err}\n{out}");
    assert_eq!(out.matches(":status: 200").count(), 3, "{out}");
    assert!(!out.contains("COMPRESSION_ERROR"), "{out}");

    let indexed = h2load_savings(&h2load, &url);

    let z = Server::start(&["--header-table", "0"]);
    let url0 = format!("https://{}/bytes/100", z.ready.tls);
    let static_only = h2load_savings(&h2load, &url0);
    assert!(
        indexed > static_only + 20.0,
        "space savings: {indexed}% indexed vs {static_only}% static-only"
    );
}

/// `hxlab load ARGS --json -`: its exit code and record.
fn load(args: &[&str]) -> (Option<i32>, Option<RunResult>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("load")
        .args(args)
        .args(["--json", "-", "--no-progress"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    let record = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok());
    (code, record, err)
}

#[test]
fn a_load_record_carries_the_tables_both_ends_advertised() {
    let s = Server::start(&["--header-table", "1024"]);
    let cert = s.cert();
    let cacert = cert.to_str().expect("utf-8");
    let url = format!("https://{}/bytes/100", s.ready.tls);
    let base = ["-c1", "-m1", "-n3", "--proto", "h2", "--cacert", cacert];
    let (code, r, err) = load(&[&base[..], &[url.as_str()]].concat());
    assert_eq!(code, Some(0), "{err}");
    let r = r.expect("a record");
    assert_eq!(r.requests_succeeded, 3);
    let want = HeaderTableSeen {
        protocol: "h2".into(),
        client_advertised: 4096,
        server_advertised: Some(1024),
        encoder_table: 1024,
        connections: 1,
        ..HeaderTableSeen::default()
    };
    assert_eq!(r.header_tables, vec![want]);
    assert!(r.bytes.header_sent > 0 && r.bytes.header_received > 0);

    // h2load's flags: the decoder table we advertise, our encoder's own limit.
    let flags = [
        "--header-table-size",
        "0",
        "--encoder-header-table-size",
        "512",
    ];
    let (code, r, err) = load(&[&base[..], &flags[..], &[url.as_str()]].concat());
    assert_eq!(code, Some(0), "{err}");
    let t = &r.expect("a record").header_tables;
    assert_eq!(t.len(), 1, "{t:?}");
    assert_eq!(
        (
            t[0].client_advertised,
            t[0].server_advertised,
            t[0].encoder_table
        ),
        (0, Some(1024), 512)
    );
    // The server's encoder followed our advertised 0.
    let stats = serve_stats(&s.ready.plain.to_string());
    let h2 = stats.protocol(hxlab_core::Protocol::H2).expect("h2 stats");
    assert_eq!(h2.encoder_tables.get("0"), Some(&1));
    assert_eq!(h2.encoder_tables.get("1024"), Some(&1));
}

#[test]
fn a_table_over_64k_is_a_usage_error() {
    for args in [
        vec!["serve", "--header-table", "70000"],
        vec!["load", "--header-table", "70000", "http://127.0.0.1:9/"],
        vec![
            "load",
            "--encoder-header-table-size",
            "1MiB",
            "http://127.0.0.1:9/",
        ],
    ] {
        let (code, out, err) = run_with_timeout(Command::new(hxlab()).args(&args), LIMIT);
        assert_eq!(code, Some(2), "{args:?}: {out}{err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("65536"), "{args:?}: {err}");
    }
}

/// Against h2o (an independent HPACK encoder and decoder): its SETTINGS say no table size, so
/// the record carries the protocol's 4096 as what it advertised, and our encoder uses 4096.
#[test]
fn a_load_record_against_h2o_reads_its_settings() {
    let Some(h2o) = require_peer("h2o") else {
        return;
    };
    let tmp = common::tempfile_dir::TempDir::new("hxlab-hpack-h2o");
    let Some((cert, key)) = common::make_cert(tmp.path()) else {
        return;
    };
    let www = tmp.path().join("www/bytes");
    std::fs::create_dir_all(&www).expect("docroot");
    std::fs::write(www.join("100"), [b'x'; 100]).expect("a file");
    let tls = common::free_port();
    let conf = format!(
        "pid-file: {d}/h2o.pid\nerror-log: {d}/error.log\ntemp-buffer-path: {d}\nnum-threads: 1\n{user}\
         listen:\n  host: 127.0.0.1\n  port: {tls}\n  ssl:\n    certificate-file: {c}\n    key-file: {k}\n    ocsp-update-interval: 0\n\
         hosts:\n  default:\n    paths:\n      /:\n        file.dir: {w}\n",
        d = tmp.path().display(),
        user = if common::is_root() { "user: root\n" } else { "" },
        c = cert.display(),
        k = key.display(),
        w = tmp.path().join("www").display(),
    );
    let conf_path = tmp.path().join("h2o.conf");
    std::fs::write(&conf_path, conf).expect("h2o.conf");
    let _h2o = common::PeerProcess::start(
        Command::new(h2o)
            .args(["-m", "worker", "-c"])
            .arg(&conf_path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null()),
        &[tls],
    );
    let url = format!("https://localhost:{tls}/bytes/100");
    let cacert = cert.display().to_string();
    let (code, r, err) = load(&[
        "-c1", "-m1", "-n3", "--proto", "h2", "--cacert", &cacert, &url,
    ]);
    assert_eq!(code, Some(0), "{err}");
    let r = r.expect("a record");
    assert_eq!(r.requests_succeeded, 3);
    let want = HeaderTableSeen {
        protocol: "h2".into(),
        client_advertised: 4096,
        server_advertised: Some(4096),
        encoder_table: 4096,
        connections: 1,
        ..HeaderTableSeen::default()
    };
    assert_eq!(r.header_tables, vec![want]);
}

/// HEADERS frames of one direction, in order: (length, encoder-stream bytes before it).
type HeadCosts = Vec<(u64, u64)>;

/// One `hxlab trace -m 3 --serial` connection, in order: for each HEADERS frame its
/// direction, its length, and the QPACK encoder-stream bytes that came the same way since the
/// previous HEADERS in that direction (the inserts it may reference: part of its cost).
fn serial_heads(url: &str, cacert: &str, extra: &[&str]) -> (HeadCosts, HeadCosts) {
    let mut cmd = Command::new(hxlab());
    cmd.args([
        "trace", url, "-m", "3", "--serial", "--cacert", cacert, "--json",
    ])
    .args(extra);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "hxlab trace failed: {err}\n{out}");
    let (mut sent, mut recv) = (Vec::new(), Vec::new());
    let (mut enc_sent, mut enc_recv) = (0, 0);
    for line in out.lines() {
        let e: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        let send = e["dir"] == "send";
        let len = e["length"].as_u64().unwrap_or(0);
        let pending = if send { &mut enc_sent } else { &mut enc_recv };
        if e["event"] == "qpack_instruction"
            && e["text"]
                .as_str()
                .unwrap_or("")
                .contains("encoder instruction")
        {
            *pending += len;
        } else if e["event"] == "frame" && e["type"] == "HEADERS" {
            let list = if send { &mut sent } else { &mut recv };
            list.push((len, std::mem::take(pending)));
        }
    }
    assert_eq!((sent.len(), recv.len()), (3, 3), "{out}");
    (sent, recv)
}

#[test]
fn h3_heads_shrink_as_h2_heads_do_and_table_zero_stays_static_on_both() {
    let s = Server::start(&[]);
    let cert = s.cert();
    let cacert = cert.to_str().expect("utf-8");
    let url = format!("https://{}/bytes/100", s.ready.tls);
    let (h2_sent, h2_recv) = serial_heads(&url, cacert, &["--proto", "h2"]);
    let (h3_sent, h3_recv) = serial_heads(&url, cacert, &["--proto", "h3"]);
    for (proto, sent, recv) in [("h2", &h2_sent, &h2_recv), ("h3", &h3_sent, &h3_recv)] {
        assert!(sent[2].0 <= 10, "{proto} third request HEADERS: {sent:?}");
        // The first response's cost is its HEADERS and the inserts it brought.
        let first = recv[0].0 + recv[0].1;
        assert!(
            recv[2].0 * 10 <= first * 4,
            "{proto} third response HEADERS over 40 % of the first's cost: {recv:?}"
        );
    }
    assert!(
        h3_recv[2].0.abs_diff(h2_recv[2].0) <= 5,
        "third responses, h3 {h3_recv:?} against h2 {h2_recv:?}"
    );
    // /stats: the client's references decoded, and head bytes counted for h3 as for h2.
    let stats = serve_stats(&s.ready.plain.to_string());
    assert!(
        stats.h3_qpack.dynamic_refs_decoded >= 2 * 3,
        "{:?}",
        stats.h3_qpack
    );
    let h3 = stats.protocol(hxlab_core::Protocol::H3).expect("h3 stats");
    assert!(h3.request_header_bytes >= h3_sent.iter().map(|h| h.0 + h.1).sum::<u64>());
    assert!(h3.response_header_bytes >= h3_recv.iter().map(|h| h.0 + h.1).sum::<u64>());
    assert_eq!(h3.encoder_tables.get("4096"), Some(&1), "{h3:?}");

    // A table of 0 on both ends: every head at its static-only size, on both protocols.
    let z = Server::start(&["--header-table", "0"]);
    let cert = z.cert();
    let cacert = cert.to_str().expect("utf-8");
    let url = format!("https://{}/bytes/100", z.ready.tls);
    let (sent, recv) = serial_heads(&url, cacert, &["--proto", "h3", "--header-table", "0"]);
    assert!(sent.iter().all(|h| *h == (sent[0].0, 0)), "{sent:?}");
    assert!(recv.iter().all(|h| *h == (recv[0].0, 0)), "{recv:?}");
    assert!(sent[2].0 > h3_sent[2].0 && recv[2].0 > h3_recv[2].0);
    let (sent, _) = serial_heads(&url, cacert, &["--proto", "h2", "--header-table", "0"]);
    assert_eq!(sent[1], sent[2], "{sent:?}");
}
