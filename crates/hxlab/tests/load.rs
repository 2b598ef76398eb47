//! `hxlab load` and `hxlab merge` against real peers on loopback: nginx (h1, h1+TLS, h2),
//! nghttpd (h2 over TLS, h2c), and small servers written here for what nginx cannot do
//! (stall once, die mid-run).

mod common;

use common::{
    free_port, hxlab, make_cert, require_peer, run_with_timeout, serve_stats, start_nghttpd,
    tempfile_dir::TempDir, PeerProcess, Serving, ThreadServer,
};
use hxlab_contract::{ProtoStats, StatsSnapshot};
use hxlab_core::Protocol;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);
const OBJECT: usize = 100;

/// nginx with one worker: h1 on `plain`, TLS+h2 on `h2`, TLS h1-only on `tls_h1`.
struct Nginx {
    _process: PeerProcess,
    dir: TempDir,
    plain: u16,
    h2: u16,
    tls_h1: u16,
}

impl Nginx {
    fn start() -> Option<Nginx> {
        let nginx = require_peer("nginx")?;
        let dir = TempDir::new("hxlab-load-nginx");
        let (cert, key) = make_cert(dir.path())?;
        let www = dir.path().join("www");
        std::fs::create_dir_all(&www).unwrap();
        std::fs::write(www.join("obj"), vec![b'x'; OBJECT]).unwrap();
        std::fs::write(www.join("big"), vec![b'y'; 1_000_000]).unwrap();
        let (plain, h2, tls_h1) = (free_port(), free_port(), free_port());
        let d = dir.path().display();
        let conf = format!(
            "master_process off; worker_processes 1; daemon off; error_log {d}/error.log; pid {d}/nginx.pid;\n\
             events {{ worker_connections 1024; }}\n\
             http {{ access_log off; keepalive_requests 100000;\n\
               client_body_temp_path {d}/b; proxy_temp_path {d}/p; fastcgi_temp_path {d}/f; uwsgi_temp_path {d}/u; scgi_temp_path {d}/s;\n\
               server {{ listen 127.0.0.1:{plain}; listen 127.0.0.1:{h2} ssl http2; listen 127.0.0.1:{tls_h1} ssl;\n\
                 ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate {}; ssl_certificate_key {}; root {}; }} }}\n",
            cert.display(),
            key.display(),
            www.display()
        );
        std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
        let process = PeerProcess::start(
            Command::new(nginx)
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(dir.path().join("nginx.conf"))
                .stdout(Stdio::null()),
            &[plain, h2, tls_h1],
        );
        Some(Nginx {
            _process: process,
            dir,
            plain,
            h2,
            tls_h1,
        })
    }

    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }
}

/// nghttpd serving a directory with a 100-byte object, TLS or cleartext (h2c).
struct Nghttpd {
    _process: PeerProcess,
    _dir: TempDir,
    port: u16,
}

impl Nghttpd {
    fn start(tls: bool) -> Option<Nghttpd> {
        let dir = TempDir::new("hxlab-load-nghttpd");
        std::fs::write(dir.path().join("obj"), vec![b'z'; OBJECT]).unwrap();
        let tls = if tls {
            Some(make_cert(dir.path())?)
        } else {
            None
        };
        let (process, port) = start_nghttpd(dir.path(), tls, &[])?;
        Some(Nghttpd {
            _process: process,
            _dir: dir,
            port,
        })
    }
}

/// A tiny HTTP/1.1 keep-alive server: 100-byte bodies; request number `stall_at` (1-based,
/// over all connections) is answered after a 1 s stall; after `die_after` responses it
/// closes every connection and stops listening.
fn tiny_server(stall_at: u64, die_after: u64) -> ThreadServer {
    tiny_server_closing(stall_at, die_after, u64::MAX)
}

/// Like `tiny_server`, and each connection is closed silently (no `Connection: close`) after
/// `close_every` responses, as servers close idle keep-alive connections.
fn tiny_server_closing(stall_at: u64, die_after: u64, close_every: u64) -> ThreadServer {
    let count = AtomicU64::new(0);
    ThreadServer::start(LIMIT, move |conn, serving| {
        serve_conn(conn, &count, serving, stall_at, die_after, close_every)
    })
}

fn serve_conn(
    mut conn: TcpStream,
    count: &AtomicU64,
    serving: &Serving,
    stall_at: u64,
    die_after: u64,
    close_every: u64,
) {
    let mut served = 0u64;
    let _ = conn.set_nodelay(true);
    let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    while serving.running() {
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            buf.drain(..end + 4);
            let n = count.fetch_add(1, Ordering::SeqCst) + 1;
            if n > die_after {
                serving.stop();
                return;
            }
            if n == stall_at {
                std::thread::sleep(Duration::from_secs(1));
            }
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {OBJECT}\r\n\r\n{}",
                "a".repeat(OBJECT)
            );
            if conn.write_all(resp.as_bytes()).is_err() {
                return;
            }
            served += 1;
            if served >= close_every {
                // FIN first and drain what the client already sent, so the close is a clean
                // EOF and never a reset that could discard the last response.
                let _ = conn.shutdown(std::net::Shutdown::Write);
                let until = Instant::now() + Duration::from_secs(2);
                while Instant::now() < until && matches!(conn.read(&mut chunk), Ok(n) if n > 0) {}
                return;
            }
        }
        match conn.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return,
        }
    }
}

/// Runs `hxlab load ARGS --json - --no-progress`; returns (exit code, parsed JSON, stderr).
fn load(args: &[&str]) -> (i32, Option<Value>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("load")
        .args(args)
        .args(["--json", "-", "--no-progress"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    let json = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok());
    (code.unwrap_or(-1), json, err)
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut x = v;
    for p in path {
        x = &x[*p];
    }
    x.as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

/// The `/stats` counters of the protocol named `key` ("h1-tls"); every protocol is listed.
fn counters(s: &StatsSnapshot, key: &str) -> ProtoStats {
    let p = Protocol::parse(key).unwrap_or_else(|| panic!("{key} is not a protocol"));
    s.protocol(p)
        .cloned()
        .unwrap_or_else(|| panic!("/stats lists no {key}: {s:?}"))
}

fn hist_count(v: &Value, name: &str) -> u64 {
    let text = v["histograms"][name].as_str().expect("histogram string");
    hxlab_core::LatencyHistogram::from_base64(text)
        .expect("histogram")
        .len()
}

fn hist_p99(v: &Value, name: &str) -> u64 {
    let text = v["histograms"][name].as_str().expect("histogram string");
    hxlab_core::LatencyHistogram::from_base64(text)
        .expect("histogram")
        .quantile(0.99)
}

/// Checks the counts every successful run of `n` requests of the 100-byte object must show.
fn assert_counts(v: &Value, n: u64, proto: &str, conns: u64) {
    assert_eq!(u(v, &["requests_done"]), n, "{v}");
    assert_eq!(u(v, &["requests_started"]), n);
    assert_eq!(u(v, &["requests_succeeded"]), n);
    assert_eq!(u(v, &["requests_failed"]), 0);
    assert_eq!(u(v, &["status", "200"]), n);
    assert_eq!(u(v, &["bytes", "body_received"]), n * OBJECT as u64);
    assert_eq!(
        u(v, &["negotiated", proto]),
        conns,
        "negotiated: {}",
        v["negotiated"]
    );
    assert_eq!(u(v, &["connections"]), conns);
    assert_eq!(hist_count(v, "latency"), n);
    assert_eq!(hist_count(v, "ttfb"), n);
    assert!(u(v, &["bytes", "header_received"]) > 0);
    assert!(u(v, &["bytes", "total_received"]) > u(v, &["bytes", "body_received"]));
    assert!(v["duration_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn nginx_h1_counts_keepalive_pipelining_and_no_keepalive() {
    let Some(ngx) = Nginx::start() else { return };
    let url = format!("http://127.0.0.1:{}/obj", ngx.plain);
    let (code, v, err) = load(&["-n", "300", "-c", "6", "-t", "2", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_counts(&v, 300, "http/1.1", 6);
    // h1: header bytes are the raw head, no compression.
    assert_eq!(
        u(&v, &["bytes", "header_received"]),
        u(&v, &["bytes", "header_uncompressed"])
    );
    assert_eq!(
        u(&v, &["bytes", "total_received"]),
        u(&v, &["bytes", "header_received"]) + u(&v, &["bytes", "body_received"])
    );
    assert_eq!(hist_count(&v, "connect"), 6);

    let (code, v, err) = load(&["-n", "200", "-c", "2", "-m", "8", &url]);
    assert_eq!(code, 0, "{err}");
    assert_counts(&v.expect("json"), 200, "http/1.1", 2);

    let (code, v, err) = load(&["-n", "20", "-c", "2", "--no-keepalive", &url]);
    assert_eq!(code, 0, "{err}");
    assert_counts(&v.expect("json"), 20, "http/1.1", 20);

    // Several URLs round-robin: 10 × 100 B + 10 × 1 MB.
    let big = format!("http://127.0.0.1:{}/big", ngx.plain);
    let (code, v, err) = load(&["-n", "20", "-c", "1", &url, &big]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(
        u(&v, &["bytes", "body_received"]),
        10 * 100 + 10 * 1_000_000
    );
}

#[test]
fn nginx_tls_h2_h1_auto_and_resumption() {
    let Some(ngx) = Nginx::start() else { return };
    let h2 = format!("https://127.0.0.1:{}/obj", ngx.h2);
    let (code, v, err) = load(&[
        "-n", "400", "-c", "4", "-m", "10", "--proto", "h2", "-k", &h2,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_counts(&v, 400, "h2", 4);
    assert_eq!(hist_count(&v, "handshake"), 4);
    // HPACK: the wire size of headers is smaller than the decoded size.
    let b = &v["bytes"];
    assert!(
        b["header_received"].as_u64() < b["header_uncompressed"].as_u64(),
        "{b}"
    );
    assert!(
        b["header_sent"].as_u64().unwrap() > 0
            && b["header_sent"].as_u64() < b["header_sent_uncompressed"].as_u64()
    );

    // auto picks h2 by ALPN; --cacert verifies the real certificate.
    let cacert = ngx.cert().display().to_string();
    let (code, v, err) = load(&["-n", "50", "-c", "2", "-m", "5", "--cacert", &cacert, &h2]);
    assert_eq!(code, 0, "{err}");
    assert_counts(&v.expect("json"), 50, "h2", 2);

    // HTTP/1.1 over TLS, and auto falling back to http/1.1 on an h1-only TLS port.
    let tls_h1 = format!("https://127.0.0.1:{}/obj", ngx.tls_h1);
    let (code, v, err) = load(&["-n", "60", "-c", "3", "--h1", "-k", &h2]);
    assert_eq!(code, 0, "{err}");
    assert_counts(&v.expect("json"), 60, "http/1.1", 3);
    let (code, v, err) = load(&["-n", "60", "-c", "3", "-k", &tls_h1]);
    assert_eq!(code, 0, "{err}");
    assert_counts(&v.expect("json"), 60, "http/1.1", 3);

    // Resumption: every connection after the first resumes.
    let (code, v, err) = load(&[
        "-n",
        "10",
        "-c",
        "1",
        "--no-keepalive",
        "--tls-resume",
        "-k",
        "--h1",
        &tls_h1,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_counts(&v, 10, "http/1.1", 10);
    assert!(u(&v, &["resumed"]) >= 8, "resumed: {}", v["resumed"]);
    assert_eq!(hist_count(&v, "handshake_resumed"), u(&v, &["resumed"]));

    // A CA file without certificates is bad input: one line, exit 2 and no result.
    let (code, v, err) = load(&["-n", "5", "--cacert", "/dev/null", &h2]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no PEM certificate"), "{err}");
    assert!(v.is_none());
}

#[test]
fn nghttpd_h2_tls_and_h2c() {
    let Some(tls) = Nghttpd::start(true) else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/obj", tls.port);
    let (code, v, err) = load(&["-n", "300", "-c", "3", "-m", "10", "-t", "2", "-k", &url]);
    assert_eq!(code, 0, "{err}");
    assert_counts(&v.expect("json"), 300, "h2", 3);

    let Some(plain) = Nghttpd::start(false) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/obj", plain.port);
    let (code, v, err) = load(&["-n", "300", "-c", "3", "-m", "10", "--proto", "h2c", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_counts(&v, 300, "h2c", 3);
    let b = &v["bytes"];
    assert!(
        b["header_received"].as_u64() < b["header_uncompressed"].as_u64(),
        "{b}"
    );

    // A 404 is a response (done, not succeeded) and is counted by status.
    let missing = format!("http://127.0.0.1:{}/missing", plain.port);
    let (code, v, _) = load(&["-n", "10", "--proto", "h2c", &missing]);
    assert_eq!(code, 0);
    let v = v.expect("json");
    assert_eq!(u(&v, &["status", "404"]), 10);
    assert_eq!(u(&v, &["requests_succeeded"]), 0);
}

#[test]
fn open_model_rate_is_kept() {
    let Some(ngx) = Nginx::start() else { return };
    let url = format!("http://127.0.0.1:{}/obj", ngx.plain);
    // 3 s at 200/s over 4 connections: the timetable has 600 requests due (count-based).
    let (code, v, err) = load(&["-D", "3s", "--rate", "200", "-c", "4", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    let started = u(&v, &["requests_started"]) as f64;
    assert!(
        (started - 600.0).abs() <= 6.0,
        "started {started}, expected 600 ± 1 %"
    );
    assert!(u(&v, &["requests_done"]) as f64 >= 594.0);
    assert_eq!(v["config"]["rate"].as_f64(), Some(200.0));
    // And count-bound: 100 requests at 100/s take about one second, never much less.
    let (code, v, err) = load(&["-n", "100", "--rate", "100", "-c", "2", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_done"]), 100);
    let d = v["duration_s"].as_f64().unwrap();
    assert!((0.98..5.0).contains(&d), "duration {d}");
}

#[test]
fn coordinated_omission_is_corrected() {
    // One connection at 100/s; the 50th request stalls 1 s, delaying ~100 requests behind it.
    let server = tiny_server(50, u64::MAX);
    let url = format!("http://127.0.0.1:{}/", server.port);
    let (code, v, err) = load(&["-n", "300", "--rate", "100", "-c", "1", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_done"]), 300);
    let corrected = hist_p99(&v, "latency");
    let uncorrected = hist_p99(&v, "latency_uncorrected");
    assert!(
        corrected >= 500_000,
        "corrected p99 {corrected} us should show the 1 s stall"
    );
    assert!(
        uncorrected < 200_000,
        "uncorrected p99 {uncorrected} us should not"
    );
}

/// A server that closes each connection silently after 7 responses, with pipelined
/// requests still on it: the client reopens and goes on, and the requests the close caught
/// in flight (sent, never answered: at most the pipeline depth per connection) count as
/// failed, as on h2 and h3, rather than being sent again.
#[test]
fn keepalive_connections_closed_by_the_server_are_reopened() {
    let server = tiny_server_closing(0, u64::MAX, 7);
    let url = format!("http://127.0.0.1:{}/", server.port);
    let (code, v, err) = load(&["-n", "100", "-c", "2", "-m", "3", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    let (done, failed) = (u(&v, &["requests_done"]), u(&v, &["requests_failed"]));
    let connections = u(&v, &["connections"]);
    assert_eq!(done + failed, 100, "every request ends once: {v}");
    assert_eq!(u(&v, &["requests_started"]), 100);
    assert_eq!(u(&v, &["errors", "reset"]), failed, "{v}");
    assert!(
        failed <= 3 * connections,
        "{failed} failed on {connections} connections"
    );
    assert!(connections >= 100 / 10, "{}", v["connections"]);
}

#[test]
fn server_dying_mid_run_gives_partial_result() {
    let server = tiny_server(0, 100);
    let url = format!("http://127.0.0.1:{}/", server.port);
    let t0 = Instant::now();
    let (code, v, err) = load(&["-n", "1000", "-c", "2", "--timeout", "5s", &url]);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "took {:?}",
        t0.elapsed()
    );
    assert_eq!(code, 0, "some requests were answered: {err}");
    let v = v.expect("partial json");
    let done = u(&v, &["requests_done"]);
    assert!((1..=100).contains(&done), "done {done}");
    assert_eq!(
        done + u(&v, &["requests_failed"]),
        1000,
        "every request is done or failed: {v}"
    );
    assert!(u(&v, &["errors", "reset"]) + u(&v, &["errors", "connect"]) > 0);
}

#[test]
fn merge_of_two_shards_is_their_sum_and_checks_the_parts() {
    let Some(ngx) = Nginx::start() else { return };
    let url = format!("http://127.0.0.1:{}/obj", ngx.plain);
    let dir = TempDir::new("hxlab-merge");
    let (a, b, m) = (
        dir.path().join("a.json"),
        dir.path().join("b.json"),
        dir.path().join("m.json"),
    );
    for (path, shard) in [(&a, "0/2"), (&b, "1/2")] {
        let mut cmd = Command::new(hxlab());
        cmd.args([
            "load",
            "-n",
            "100",
            "-c",
            "3",
            "--shard",
            shard,
            "-q",
            "--no-progress",
        ])
        .arg("--json")
        .arg(path)
        .arg(&url);
        let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
        assert_eq!(code, Some(0), "{err}");
    }
    let mut cmd = Command::new(hxlab());
    cmd.arg("merge").arg(&a).arg(&b).arg("-o").arg(&m);
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "{err}");
    let read =
        |p: &Path| -> Value { serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap() };
    let (va, vb, vm) = (read(&a), read(&b), read(&m));
    for path in [
        &["requests_done"][..],
        &["requests_started"],
        &["status", "200"],
        &["connections"],
        &["bytes", "total_received"],
        &["bytes", "header_received"],
        &["bytes", "body_received"],
        &["bytes", "total_sent"],
    ] {
        assert_eq!(u(&vm, path), u(&va, path) + u(&vb, path), "{path:?}");
    }
    assert_eq!(u(&vm, &["requests_done"]), 100);
    // Shard 0 has 1 of the 3 connections and 33 of the 100 requests.
    assert_eq!(u(&va, &["requests_done"]), 33);
    assert_eq!(va["shards"][0]["clients"], 1);
    assert_eq!(vm["shards"].as_array().map(Vec::len), Some(2));
    // A shard missing, or a shard twice: one line, exit 1; --allow-partial says what is absent.
    for args in [vec![&a], vec![&a, &b, &b]] {
        let mut cmd = Command::new(hxlab());
        cmd.arg("merge").args(args);
        let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let mut cmd = Command::new(hxlab());
    cmd.args(["merge", "--allow-partial", "-q"]).arg(&a);
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("shard 1 of 2 absent"), "{err}");
    for h in ["latency", "latency_uncorrected", "ttfb", "connect"] {
        assert_eq!(
            hist_count(&vm, h),
            hist_count(&va, h) + hist_count(&vb, h),
            "{h}"
        );
    }
    let max = |v: &Value| {
        hxlab_core::LatencyHistogram::from_base64(v["histograms"]["latency"].as_str().unwrap())
            .unwrap()
            .raw()
            .max()
    };
    assert_eq!(max(&vm), max(&va).max(max(&vb)));

    // Bad input to merge: a file that is not a RunResult (exit 2, as every bad input).
    std::fs::write(dir.path().join("bad.json"), "{\"not\": 1}").unwrap();
    let mut cmd = Command::new(hxlab());
    cmd.arg("merge").arg(dir.path().join("bad.json"));
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(2));
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn bad_input_gives_one_line_and_the_right_exit_code() {
    // Refused connection: exit 1, one error line, and still the (empty) result.
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let (code, v, err) = load(&["-n", "10", "-c", "2", &url]);
    assert_eq!(code, 1);
    let line = err
        .lines()
        .find(|l| l.starts_with("hxlab: error:"))
        .expect("error line");
    assert!(
        line.contains("connection refused") && line.contains(&port.to_string()),
        "{err}"
    );
    assert_eq!(
        err.lines()
            .filter(|l| l.starts_with("hxlab: error:"))
            .count(),
        1
    );
    let v = v.expect("partial result is still written");
    assert_eq!(u(&v, &["requests_done"]), 0);
    assert_eq!(u(&v, &["requests_failed"]), 10);
    assert!(u(&v, &["errors", "connect"]) >= 1);

    // Usage errors: exit 2.
    for args in [
        &["--bogus-flag", "http://127.0.0.1:1/"][..],
        &["-n", "x", "http://127.0.0.1:1/"],
        &["--proto", "h4", "http://127.0.0.1:1/"],
        &["--cc", "vegas", "http://127.0.0.1:1/"],
        &["--rate", "-5", "http://127.0.0.1:1/"],
        &["--rate", "1e12", "http://127.0.0.1:1/"],
        &["-c", "0", "http://127.0.0.1:1/"],
        &["ftp://127.0.0.1/"],
        &["--proto", "h3", "http://127.0.0.1:1/"],
        &["--warm-up", "1s", "http://127.0.0.1:1/"],
        &["-H", "no colon", "http://127.0.0.1:1/"],
    ] {
        let mut cmd = Command::new(hxlab());
        cmd.arg("load").args(args);
        let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }

    // A protocol the server does not speak: one clear line, exit 1.
    let Some(ngx) = Nginx::start() else { return };
    let tls_h1 = format!("https://127.0.0.1:{}/obj", ngx.tls_h1);
    let (code, _, err) = load(&["-n", "5", "--proto", "h2", "-k", &tls_h1]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("ALPN") && err.contains("--proto h1"), "{err}");
    let plain = format!("http://127.0.0.1:{}/obj", ngx.plain);
    let (code, _, err) = load(&["-n", "5", "--proto", "h2c", &plain]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("h2c"), "{err}");
    // Certificate not trusted (no -k, no --cacert): a TLS error.
    let (code, v, err) = load(&["-n", "5", &tls_h1]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("TLS"), "{err}");
    assert!(u(&v.expect("json"), &["errors", "tls"]) >= 1);
}

#[test]
fn duration_warm_up_cc_and_summary() {
    let Some(ngx) = Nginx::start() else { return };
    let url = format!("http://127.0.0.1:{}/obj", ngx.plain);
    let t0 = Instant::now();
    let (code, v, err) = load(&[
        "-D",
        "1s",
        "--warm-up",
        "500ms",
        "-c",
        "2",
        "--cc",
        "reno",
        &url,
    ]);
    let took = t0.elapsed();
    assert_eq!(code, 0, "{err}");
    assert!(
        took >= Duration::from_millis(1400) && took < Duration::from_secs(15),
        "{took:?}"
    );
    let v = v.expect("json");
    let d = v["duration_s"].as_f64().unwrap();
    assert!((0.9..=1.2).contains(&d), "measured duration {d}");
    assert!(u(&v, &["requests_done"]) > 10);
    assert_eq!(v["config"]["cc"].as_str(), Some("reno"));
    // Connections opened during warm-up carry the measured requests and are reported.
    assert_eq!(u(&v, &["negotiated", "http/1.1"]), 2, "{}", v["negotiated"]);
    assert!(v["cpu_user_s"].as_f64().unwrap() + v["cpu_sys_s"].as_f64().unwrap() > 0.0);
    // The human summary (stderr when the JSON goes to stdout).
    assert!(
        err.contains("req/s") && err.contains("time for request:"),
        "{err}"
    );
}

#[test]
fn hxlab_serve_every_protocol_agrees_with_its_stats() {
    let server = common::Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let h3 = server.ready.h3.expect("h3 addr").to_string();
    let cacert = server.cert().display().to_string();
    let cases: [(&str, String, &str, &str, &[&str]); 5] = [
        (
            "h1",
            format!("http://{plain}/bytes/1000"),
            "h1",
            "http/1.1",
            &["-m", "4"],
        ),
        (
            "h1",
            format!("https://{tls}/bytes/1000"),
            "h1-tls",
            "http/1.1",
            &[],
        ),
        (
            "h2",
            format!("https://{tls}/bytes/1000"),
            "h2",
            "h2",
            &["-m", "10"],
        ),
        (
            "h2c",
            format!("http://{plain}/bytes/1000"),
            "h2c",
            "h2c",
            &["-m", "10"],
        ),
        (
            "h3",
            format!("https://{h3}/bytes/1000"),
            "h3",
            "h3",
            &["-m", "10"],
        ),
    ];
    for (proto, url, key, negotiated, extra) in cases {
        let before = serve_stats(&plain);
        let mut args = vec!["-n", "300", "-c", "3", "-t", "2", "--proto", proto, "-k"];
        args.extend_from_slice(extra);
        args.push(&url);
        let (code, v, err) = load(&args);
        assert_eq!(code, 0, "{proto}: {err}");
        let v = v.expect("json");
        let after = serve_stats(&plain);
        let served = counters(&after, key).requests - counters(&before, key).requests;
        let bytes = counters(&after, key).body_bytes - counters(&before, key).body_bytes;
        assert_eq!(u(&v, &["requests_done"]), 300, "{proto}");
        assert_eq!(served, 300, "{proto}: server counted {served}");
        assert_eq!(u(&v, &["status", "200"]), 300);
        assert_eq!(
            u(&v, &["bytes", "body_received"]),
            bytes,
            "{proto}: body bytes disagree with /stats"
        );
        assert_eq!(bytes, 300_000);
        assert_eq!(
            u(&v, &["negotiated", negotiated]),
            3,
            "{proto}: {}",
            v["negotiated"]
        );
        if proto == "h2" || proto == "h3" || proto == "h2c" {
            let b = &v["bytes"];
            assert!(
                b["header_received"].as_u64() < b["header_uncompressed"].as_u64(),
                "{proto}: {b}"
            );
            assert!(b["header_received"].as_u64().unwrap() > 0, "{proto}: {b}");
        }
    }

    // More streams asked than the server allows (100): requests wait for stream credit and
    // the run completes without stalls.
    let url = format!("https://{h3}/bytes/100");
    let (code, v, err) = load(&[
        "-n",
        "1000",
        "-c",
        "1",
        "-m",
        "150",
        "--proto",
        "h3",
        "-k",
        "--timeout",
        "5s",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_done"]), 1000, "{v}");
    assert_eq!(u(&v, &["connections"]), 1);
    assert!(
        v["duration_s"].as_f64().unwrap() < 4.0,
        "{}",
        v["duration_s"]
    );

    // Certificate verification against the served certificate, on TCP and QUIC.
    for (proto, addr) in [("h2", &tls), ("h3", &h3)] {
        let url = format!("https://{addr}/bytes/10");
        let (code, v, err) = load(&[
            "-n", "20", "-c", "2", "--proto", proto, "--cacert", &cacert, &url,
        ]);
        assert_eq!(code, 0, "{proto}: {err}");
        assert_eq!(u(&v.expect("json"), &["requests_done"]), 20);
    }

    // QUIC 0-RTT / resumption. The server answers 0-RTT requests at once (0.5-RTT data) and
    // sends the next session ticket only after the client's Finished, so a client that closes
    // right after its answer may leave without a new ticket: at least every other connection
    // after the first resumes, each with its 0-RTT counted as accepted or rejected.
    let url = format!("https://{h3}/bytes/100");
    let (code, v, err) = load(&[
        "-n",
        "10",
        "-c",
        "1",
        "--no-keepalive",
        "--0rtt",
        "--proto",
        "h3",
        "-k",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["connections"]), 10, "{v}");
    assert!(
        u(&v, &["resumed"]) >= 4,
        "h3 0-RTT resumed: {}",
        v["resumed"]
    );
    assert_eq!(
        v["early_data_accepted"]["h3"].as_u64().unwrap_or(0)
            + v["early_data_rejected"]["h3"].as_u64().unwrap_or(0),
        u(&v, &["resumed"]),
        "every resumed connection sent 0-RTT: {v}"
    );
    assert_eq!(
        hist_count(&v, "handshake_resumed"),
        u(&v, &["resumed"]),
        "{v}"
    );

    // Server-side delay and statuses are counted as they come.
    let url = format!("http://{plain}/status/503");
    let (code, v, _) = load(&["-n", "10", "--proto", "h2c", &url]);
    assert_eq!(code, 0);
    assert_eq!(u(&v.expect("json"), &["status", "503"]), 10);
    let url = format!("https://{h3}/delay/300");
    let (code, v, err) = load(&["-n", "4", "-c", "1", "-m", "4", "--proto", "h3", "-k", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    let p50 =
        hxlab_core::LatencyHistogram::from_base64(v["histograms"]["latency"].as_str().unwrap())
            .unwrap()
            .quantile(0.5);
    assert!(p50 >= 290_000, "h3 /delay/300 p50 {p50} us");
    // A request timeout on a stalled response is a timeout error, not a hang.
    let url = format!("https://{tls}/delay/5000");
    let (code, v, err) = load(&[
        "-n",
        "2",
        "-c",
        "1",
        "-m",
        "2",
        "--proto",
        "h2",
        "-k",
        "--timeout",
        "300ms",
        &url,
    ]);
    assert_eq!(code, 1, "{err}");
    assert_eq!(u(&v.expect("json"), &["errors", "timeout"]), 2);
}

/// h2load's "traffic:" line: (total, header, data) bytes and the header space savings (%).
fn h2load_traffic(out: &str) -> Option<(u64, u64, u64, f64)> {
    let line = out.lines().find(|l| l.starts_with("traffic:"))?;
    let nums: Vec<&str> = line
        .split(['(', ')'])
        .enumerate()
        .filter(|(k, _)| k % 2 == 1)
        .map(|(_, s)| s)
        .collect();
    let savings = line.split("space savings ").nth(1)?.split('%').next()?;
    Some((
        nums.first()?.parse().ok()?,
        nums.get(1)?.parse().ok()?,
        nums.get(3)?.parse().ok()?,
        savings.parse().ok()?,
    ))
}

#[test]
fn h2_byte_counts_equal_h2loads_on_nginx_and_bodies_follow_flow_control() {
    let Some(ngx) = Nginx::start() else { return };
    let Some(h2load) = require_peer("h2load") else {
        return;
    };
    // nginx answers with the same header block every time (no dynamic-table insertion), so
    // the two clients must see exactly the same bytes; the 1 MB object needs WINDOW_UPDATEs
    // from the server's side and many DATA frames per stream.
    for (path, object) in [("obj", OBJECT as u64), ("big", 1_000_000)] {
        let url = format!("https://127.0.0.1:{}/{path}", ngx.h2);
        let (code, v, err) = load(&[
            "-n", "60", "-c", "2", "-m", "10", "--proto", "h2", "-k", &url,
        ]);
        assert_eq!(code, 0, "{err}");
        let v = v.expect("json");
        let mut cmd = Command::new(&h2load);
        cmd.args(["-n", "60", "-c", "2", "-m", "10", &url]);
        let (hcode, out, herr) = run_with_timeout(&mut cmd, LIMIT);
        assert_eq!(hcode, Some(0), "{herr}");
        let (total, header, data, savings) = h2load_traffic(&out).expect("h2load traffic line");
        assert_eq!(u(&v, &["requests_done"]), 60, "{v}");
        assert_eq!(u(&v, &["status", "200"]), 60);
        assert_eq!(u(&v, &["bytes", "body_received"]), 60 * object);
        assert_eq!(data, 60 * object, "h2load: {out}");
        assert_eq!(u(&v, &["bytes", "total_received"]), total, "{path}: {out}");
        assert_eq!(
            u(&v, &["bytes", "header_received"]),
            header,
            "{path}: {out}"
        );
        // h2load prints the savings to two decimals: the uncompressed size within 0.1 %.
        let unc = u(&v, &["bytes", "header_uncompressed"]) as f64;
        let theirs = header as f64 / (1.0 - savings / 100.0);
        assert!(
            (unc - theirs).abs() <= theirs * 0.001,
            "{unc} vs {theirs}: {out}"
        );
    }

    // A request body larger than the server's windows (nghttpd: 64 KiB) goes out in full.
    let Some(plain) = Nghttpd::start(false) else {
        return;
    };
    let dir = TempDir::new("hxlab-load-body");
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'b'; 300_000]).unwrap();
    let url = format!("http://127.0.0.1:{}/obj", plain.port);
    let (code, v, err) = load(&[
        "-n",
        "40",
        "-c",
        "2",
        "-m",
        "5",
        "--proto",
        "h2c",
        "--data-file",
        body.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_done"]), 40, "{v}");
    assert!(u(&v, &["bytes", "total_sent"]) > 40 * 300_000, "{v}");
    assert_eq!(u(&v, &["requests_failed"]), 0);
}

/// The body of a plain HTTP/1.1 GET of `path` on `addr` (read to the close).
fn plain_get_body(addr: &str, path: &str) -> Vec<u8> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).expect("read response");
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response head");
    let head = String::from_utf8_lossy(&all[..at]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(!head.contains("chunked"), "{head}");
    all[at + 4..].to_vec()
}

#[test]
fn push_against_hxlab_serve_counts_pushed_streams() {
    let server = common::Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let cacert = server.cert().display().to_string();
    let path = "/page?n=3&size=10k&push=1";
    let html = plain_get_body(&plain, path).len() as u64;
    assert!(html > 0);
    for (proto, url) in [
        ("h2", format!("https://{tls}{path}")),
        ("h2c", format!("http://{plain}{path}")),
    ] {
        let (code, v, err) = load(&[
            "--proto", proto, "--cacert", &cacert, "--push", "-n", "5", "-c", "1", &url,
        ]);
        assert_eq!(code, 0, "{proto}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_done"]), 5, "{proto}: {v}");
        assert_eq!(u(&v, &["requests_failed"]), 0, "{proto}: {v}");
        assert_eq!(u(&v, &["pushed"]), 15, "{proto}: {v}");
        assert_eq!(
            u(&v, &["bytes", "body_received"]),
            5 * (html + 30_000),
            "{proto}: {v}"
        );
        assert_eq!(v["config"]["extra"]["push"], "true", "{proto}");
        // Several pages in flight at once on one connection: all complete, all pushed.
        let (code, v, err) = load(&[
            "--proto", proto, "--cacert", &cacert, "--push", "-n", "40", "-c", "2", "-m", "4", &url,
        ]);
        assert_eq!(code, 0, "{proto}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_done"]), 40, "{proto}: {v}");
        assert_eq!(u(&v, &["pushed"]), 120, "{proto}: {v}");
        assert_eq!(
            u(&v, &["bytes", "body_received"]),
            40 * (html + 30_000),
            "{proto}: {v}"
        );
    }
    // Without --push nothing is pushed: only the page itself.
    let url = format!("http://{plain}{path}");
    let (code, v, err) = load(&["--proto", "h2c", "-n", "5", "-c", "1", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["pushed"]), 0);
    assert_eq!(u(&v, &["bytes", "body_received"]), 5 * html);
    // --push is HTTP/2 only.
    for proto in ["h1", "h3"] {
        let (code, _, err) = load(&["--proto", proto, "--push", "-n", "1", &url]);
        assert_eq!(code, 2, "{proto}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("--push"), "{err}");
    }
}

#[test]
fn push_against_nghttpd() {
    let dir = TempDir::new("hxlab-load-nghttpd-push");
    let page: &[u8] = b"<html>pushed page</html>\n";
    std::fs::write(dir.path().join("index.html"), page).unwrap();
    std::fs::write(dir.path().join("a"), vec![b'a'; 5_000]).unwrap();
    std::fs::write(dir.path().join("b"), vec![b'b'; 70_000]).unwrap();
    let Some((process, port)) =
        start_nghttpd(dir.path(), None, &["-p/index.html=/a,/b", "-b", "7"])
    else {
        return;
    };
    let server = Nghttpd {
        _process: process,
        _dir: dir,
        port,
    };
    let url = format!("http://127.0.0.1:{}/index.html", server.port);
    let (code, v, err) = load(&["--proto", "h2c", "--push", "-n", "6", "-c", "2", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_done"]), 6, "{v}");
    assert_eq!(u(&v, &["pushed"]), 12, "{v}");
    assert_eq!(
        u(&v, &["bytes", "body_received"]),
        6 * (page.len() as u64 + 75_000),
        "{v}"
    );
}

/// A TCP server that accepts and reads but never answers; stops after `LIMIT`.
fn silent_server() -> ThreadServer {
    ThreadServer::start(LIMIT, |mut conn, serving| {
        let _ = conn.set_read_timeout(Some(Duration::from_millis(200)));
        let mut chunk = [0u8; 4096];
        while serving.running() {
            match conn.read(&mut chunk) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return,
            }
        }
    })
}

/// The open model's books balance: every scheduled request was sent or not, and every sent
/// one was answered, failed, or was still in flight at the end; the corrected latency counts
/// every scheduled request due before the end (answered or not), the uncorrected one only
/// the answered.
fn assert_open_books(v: &Value) {
    let scheduled = u(v, &["requests_scheduled"]);
    let started = u(v, &["requests_started"]);
    assert_eq!(
        started + u(v, &["requests_not_sent"]),
        scheduled,
        "scheduled = started + not sent: {v}"
    );
    assert_eq!(
        u(v, &["requests_done"])
            + u(v, &["requests_failed"])
            + u(v, &["requests_in_flight_at_end"]),
        started,
        "started = done + failed + in flight: {v}"
    );
    assert_eq!(
        hist_count(v, "latency"),
        scheduled - u(v, &["requests_failed"])
    );
    assert_eq!(
        hist_count(v, "latency_uncorrected"),
        u(v, &["requests_done"])
    );
    // The time series holds the same: the unanswered in its last interval's latency.
    let r: hxlab_core::RunResult = serde_json::from_value(v.clone()).expect("a RunResult");
    assert!(!r.intervals.is_empty(), "a series: {v}");
    let done: u64 = r.intervals.iter().map(|i| i.requests_done).sum();
    let latencies: u64 = r.intervals.iter().map(|i| i.latency.len()).sum();
    assert_eq!(done, r.requests_done);
    assert_eq!(latencies, r.histograms.latency.len());
}

#[test]
fn open_model_accounts_for_requests_a_silent_server_never_answers() {
    let server = silent_server();
    let url = format!("http://127.0.0.1:{}/", server.port);
    let t0 = Instant::now();
    let (code, v, err) = load(&[
        "--rate",
        "200",
        "-D",
        "2s",
        "-c",
        "2",
        "--timeout",
        "30s",
        &url,
    ]);
    // The run ends at -D, not at the 30 s request timeout.
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    assert_eq!(code, 1, "nothing was answered: {err}");
    assert!(
        err.contains("no response before the run ended"),
        "one line says why: {err}"
    );
    let v = v.expect("json");
    // 2 s at 200/s: the timetable holds exactly the requests due before the deadline.
    let scheduled = u(&v, &["requests_scheduled"]);
    assert!((300..=500).contains(&scheduled), "scheduled {scheduled}");
    assert_eq!(scheduled, 400);
    assert_eq!(u(&v, &["requests_done"]), 0);
    assert_eq!(u(&v, &["requests_failed"]), 0);
    // Two connections, one request each (no pipelining): the rest could not be sent.
    let started = u(&v, &["requests_started"]);
    assert!((1..=2).contains(&started), "started {started}");
    assert_eq!(u(&v, &["requests_in_flight_at_end"]), started);
    assert_open_books(&v);
    // Never answered, yet in the corrected latency: waits up to the whole run.
    let text = v["histograms"]["latency"].as_str().unwrap();
    let h = hxlab_core::LatencyHistogram::from_base64(text).unwrap();
    assert!(h.quantile(1.0) >= 1_900_000, "max {}", h.quantile(1.0));
    assert!(h.quantile(0.5) >= 800_000, "p50 {}", h.quantile(0.5));
    let line = format!(
        "unanswered: {} scheduled but not sent, {started} in flight at the end (of 400 scheduled)",
        400 - started
    );
    assert!(err.contains(&line), "summary line {line:?} in: {err}");
}

#[test]
fn open_model_counts_requests_in_flight_at_the_deadline() {
    let server = common::Server::start(&[]);
    let plain = server.ready.plain.to_string();
    // 50/s for 2 s, each answered after 500 ms, on enough streams: about the last 25 are in
    // flight when -D ends.
    let url = format!("http://{plain}/delay/500");
    let (code, v, err) = load(&[
        "--rate", "50", "-D", "2s", "-c", "4", "-m", "20", "--proto", "h2c", &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_scheduled"]), 100, "{v}");
    let in_flight = u(&v, &["requests_in_flight_at_end"]);
    assert!((5..=80).contains(&in_flight), "in flight {in_flight}: {v}");
    assert!(u(&v, &["requests_done"]) >= 20, "{v}");
    assert_eq!(u(&v, &["requests_failed"]), 0, "{v}");
    assert_open_books(&v);
    assert!(
        err.contains("in flight at the end (of 100 scheduled)"),
        "{err}"
    );

    // A finished -n run leaves nothing unsent or in flight, and says nothing about it.
    let url = format!("http://{plain}/bytes/100");
    let (code, v, err) = load(&["-n", "40", "--rate", "100", "-c", "2", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_scheduled"]), 40);
    assert_eq!(u(&v, &["requests_not_sent"]), 0);
    assert_eq!(u(&v, &["requests_in_flight_at_end"]), 0);
    assert_open_books(&v);
    assert!(!err.contains("unanswered:"), "{err}");
    // The closed model has no timetable: the open-model counts stay 0.
    let (code, v, err) = load(&["-n", "40", "-c", "2", &url]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    for k in [
        "requests_scheduled",
        "requests_not_sent",
        "requests_in_flight_at_end",
    ] {
        assert_eq!(u(&v, &[k]), 0, "{k}: {v}");
    }
}

/// HTTP/3 session resumption without 0-RTT is reported as TCP's is: every connection after
/// the first resumes (one request per connection), with `-k` and with the certificate
/// verified against the served one; without --tls-resume every handshake is full.
#[test]
fn h3_tls_resume_without_0rtt_reports_resumed_handshakes() {
    let server = common::Server::start(&[]);
    let h3 = server.ready.h3.expect("h3 addr").to_string();
    let cacert = server.cert().display().to_string();
    let url = format!("https://{h3}/bytes/100");
    let cases: [&[&str]; 2] = [&["-k", "-c", "1"], &["--cacert", &cacert, "-c", "2"]];
    for trust in cases {
        let mut args = vec![
            "--proto",
            "h3",
            "--tls-resume",
            "-n",
            "20",
            "--no-keepalive",
        ];
        args.extend_from_slice(trust);
        args.push(&url);
        let (code, v, err) = load(&args);
        assert_eq!(code, 0, "{trust:?}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_done"]), 20, "{v}");
        let conns = u(&v, &["connections"]);
        assert_eq!(conns, 20, "{v}");
        let resumed = u(&v, &["resumed"]);
        // Each client's first handshake is a full one; later ones find its ticket.
        assert!(
            resumed >= 1 && resumed < conns,
            "{trust:?}: resumed {resumed} of {conns}"
        );
        assert!(
            resumed >= conns / 2,
            "{trust:?}: resumed {resumed} of {conns}"
        );
        assert_eq!(hist_count(&v, "handshake_resumed"), resumed, "{v}");
        assert_eq!(hist_count(&v, "handshake"), conns, "{v}");
    }
    let (code, v, err) = load(&[
        "--proto",
        "h3",
        "-k",
        "-n",
        "10",
        "-c",
        "1",
        "--no-keepalive",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["connections"]), 10);
    assert_eq!(u(&v, &["resumed"]), 0, "{v}");
    assert_eq!(hist_count(&v, "handshake_resumed"), 0);
}

/// HTTP/3 against hxlab serve beyond 200s: error statuses are counted as they come, a
/// request body (--data-string, and a -d file larger than one write) reaches the server, which
/// answers only after reading it to its end, and an interim 103 head is not counted as a
/// response.
#[test]
fn h3_statuses_request_bodies_and_interim_heads() {
    let server = common::Server::start(&[]);
    let h3 = server.ready.h3.expect("h3 addr").to_string();
    let plain = server.ready.plain.to_string();
    for status in ["404", "503"] {
        let url = format!("https://{h3}/status/{status}");
        let (code, v, err) = load(&[
            "-n", "40", "-c", "2", "-m", "5", "--proto", "h3", "-k", &url,
        ]);
        assert_eq!(code, 0, "{status}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_done"]), 40, "{v}");
        assert_eq!(u(&v, &["status", status]), 40, "{v}");
        assert_eq!(u(&v, &["requests_succeeded"]), 0, "{v}");
        assert_eq!(v["errors"]["protocol"].as_u64().unwrap_or(0), 0, "{v}");
    }

    // Request bodies: the same run with and without a body differs on the wire by the DATA
    // frames (body + frame head) and a slightly different head, and the server, which
    // reads every request to its end before answering, answers all of them.
    let url = format!("https://{h3}/bytes/10");
    let body = "b".repeat(4000);
    let mut sent = Vec::new();
    for data in [None, Some(body.as_str())] {
        let before = serve_stats(&plain);
        let mut args = vec!["-n", "50", "-c", "2", "-m", "5", "--proto", "h3", "-k"];
        if let Some(d) = data {
            args.extend_from_slice(&["--data-string", d]);
        }
        args.push(&url);
        let (code, v, err) = load(&args);
        assert_eq!(code, 0, "{err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["status", "200"]), 50, "{v}");
        let after = serve_stats(&plain);
        assert_eq!(
            counters(&after, "h3").requests - counters(&before, "h3").requests,
            50
        );
        sent.push(u(&v, &["bytes", "total_sent"]));
    }
    let extra = sent[1] - sent[0];
    assert!(
        (50 * 4003..=50 * 4040).contains(&extra),
        "with -d the client sent {extra} more bytes"
    );

    // A body larger than one packet or write, from a file.
    let dir = TempDir::new("hxlab-h3-body");
    let file = dir.path().join("body.bin");
    std::fs::write(&file, vec![b'z'; 300_000]).expect("write body");
    let file = file.display().to_string();
    let (code, v, err) = load(&[
        "-n",
        "6",
        "-c",
        "2",
        "-m",
        "3",
        "--proto",
        "h3",
        "-k",
        "--data-file",
        &file,
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["status", "200"]), 6, "{v}");
    assert!(u(&v, &["bytes", "total_sent"]) >= 6 * 300_000, "{v}");

    // A 103 Early Hints head before the page: one 200 response per request.
    let url = format!("https://{h3}/page?n=2&early_hints=1");
    let (code, v, err) = load(&[
        "-n", "20", "-c", "1", "-m", "4", "--proto", "h3", "-k", &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_done"]), 20, "{v}");
    assert_eq!(u(&v, &["status", "200"]), 20, "{v}");
    assert!(v["status"].get("103").is_none(), "{v}");
}

/// `hxlab serve --cc reno`: every TCP and QUIC connection it serves runs reno, as read back
/// from the sockets and quinn's controller; the client's controllers are read back too, and
/// with `--cc system` they are whatever the system gives (not echoed from a flag).
#[test]
fn serve_cc_applies_to_every_protocol_and_both_ends_read_back() {
    let server = common::Server::start(&["--cc", "reno"]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let h3 = server.ready.h3.expect("h3").to_string();
    let cases = [
        ("h1", format!("http://{plain}/bytes/100"), "h1"),
        ("h1", format!("https://{tls}/bytes/100"), "h1-tls"),
        ("h2", format!("https://{tls}/bytes/100"), "h2"),
        ("h2c", format!("http://{plain}/bytes/100"), "h2c"),
        ("h3", format!("https://{h3}/bytes/100"), "h3"),
    ];
    for (proto, url, key) in &cases {
        let (code, v, err) = load(&[
            "-n", "20", "-c", "2", "--proto", proto, "-k", "--cc", "cubic", url,
        ]);
        assert_eq!(code, 0, "{proto}: {err}");
        let v = v.expect("json");
        // The client's two connections ran cubic, read back per connection.
        assert_eq!(
            v["congestion_control"],
            serde_json::json!({"cubic": 2}),
            "{key}"
        );
        assert!(err.contains("cc cubic"), "{err}");
    }
    let stats = serve_stats(&plain);
    for (_, _, key) in &cases {
        let cc = counters(&stats, key).cc;
        assert_eq!(cc.keys().collect::<Vec<_>>(), ["reno"], "{key}: {cc:?}");
        assert!(cc["reno"] >= 2, "{key}: {cc:?}");
    }
    // `--cc system` on the client: what the connection actually ran, whatever it is.
    let (code, v, err) = load(&[
        "-n",
        "4",
        "--proto",
        "h3",
        "-k",
        "--cc",
        "system",
        &cases[4].1,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(v["config"]["cc"], Value::Null);
    assert_eq!(
        v["congestion_control"],
        serde_json::json!({"cubic": 1}),
        "quinn's default"
    );
}

#[test]
fn serve_cc_refuses_what_the_kernel_does_not_offer() {
    let mut cmd = Command::new(hxlab());
    cmd.args([
        "serve",
        "--cc",
        "vegas",
        "--tls-port",
        "0",
        "--plain-port",
        "0",
    ]);
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("vegas"), "{err}");
}

/// `--0rtt` on h1-tls and h2: resumed connections send their first request as TLS 1.3 early
/// data, the server (hxlab serve) accepts it, and both ends count the same connections; a
/// server that refuses early data gets none and every request still succeeds.
#[test]
fn tcp_0rtt_early_data_is_accepted_and_counted_by_both_ends() {
    let server = common::Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    for (proto, key, negotiated) in [("h2", "h2", "h2"), ("h1", "h1-tls", "http/1.1")] {
        let url = format!("https://{tls}/bytes/1000");
        let before = serve_stats(&plain);
        let (code, v, err) = load(&[
            "-n",
            "12",
            "-c",
            "1",
            "--no-keepalive",
            "--0rtt",
            "-k",
            "--proto",
            proto,
            &url,
        ]);
        assert_eq!(code, 0, "{proto}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_succeeded"]), 12, "{proto}");
        let after = serve_stats(&plain);
        let accepted = v["early_data_accepted"][negotiated].as_u64().unwrap_or(0);
        let served =
            counters(&after, key).early_data_accepted - counters(&before, key).early_data_accepted;
        assert!(accepted >= 1, "{proto}: no early data accepted: {v}");
        assert_eq!(accepted, served, "{proto}: client and server disagree");
        assert!(u(&v, &["resumed"]) >= accepted, "{proto}");
        assert!(err.contains("early data (0-RTT)"), "{err}");
    }
    let refusing = common::Server::start(&["--no-early-data"]);
    let tls = refusing.ready.tls.to_string();
    let url = format!("https://{tls}/bytes/1000");
    let (code, v, err) = load(&[
        "-n",
        "6",
        "-c",
        "1",
        "--no-keepalive",
        "--0rtt",
        "-k",
        "--proto",
        "h2",
        &url,
    ]);
    assert_eq!(code, 0, "{err}");
    let v = v.expect("json");
    assert_eq!(u(&v, &["requests_succeeded"]), 6);
    assert_eq!(
        v["early_data_accepted"]
            .get("h2")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        0
    );
    assert!(u(&v, &["resumed"]) >= 1, "resumption still works: {v}");
}

/// A network namespace of the test's own, deleted when dropped.
struct Netns(String);

impl Netns {
    fn new() -> Netns {
        let name = format!("hxtfo{}", std::process::id());
        let ip = |args: &[&str]| {
            let st = Command::new("ip").args(args).status().expect("run ip");
            assert!(st.success(), "ip {args:?}");
        };
        let _ = Command::new("ip").args(["netns", "del", &name]).status();
        ip(&["netns", "add", &name]);
        let ns = Netns(name);
        ip(&["-n", &ns.0, "link", "set", "lo", "up"]);
        ns
    }
    fn exec(&self, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.0]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `--tfo`: in a namespace whose kernel lets servers take TCP Fast Open (sysctl 3, set in
/// that namespace only), every connection after the first (which fetches the cookie) puts
/// its first flight in the SYN — the request on h1, the ClientHello with its early data on
/// h2 — and the client's count of acknowledged SYN data equals the server's.
#[test]
fn tcp_fast_open_carries_the_first_flight_and_both_ends_count_it() {
    if !common::require_root("a network namespace with its own tcp_fastopen") {
        return;
    }
    let ns = Netns::new();
    let mut sysctl = ns.exec(Path::new("sh"));
    sysctl.args(["-c", "echo 3 > /proc/sys/net/ipv4/tcp_fastopen"]);
    assert!(sysctl.status().expect("sh").success());
    let dir = TempDir::new("hxlab-tfo");
    let ready = dir.path().join("ready.json");
    let mut server = ns.exec(&hxlab());
    server
        .args([
            "serve",
            "--tls-port",
            "0",
            "--plain-port",
            "0",
            "--ready-file",
        ])
        .arg(&ready)
        .stdout(Stdio::null());
    let mut child = PeerProcess::spawn(&mut server);
    let addrs = child.wait_until("ready (--ready-file)", Duration::from_secs(20), || {
        hxlab_contract::ReadyFile::read(&ready).ok()
    });
    let (plain, tls) = (addrs.plain.to_string(), addrs.tls.to_string());
    let stats = || -> StatsSnapshot {
        let mut c = ns.exec(Path::new("curl"));
        c.args(["-s", &format!("http://{plain}/stats")]);
        let body = c.output().expect("curl").stdout;
        StatsSnapshot::from_json(&String::from_utf8_lossy(&body)).expect("a /stats document")
    };
    for (proto, url, key, negotiated) in [
        ("h1", format!("http://{plain}/bytes/100"), "h1", "http/1.1"),
        ("h2", format!("https://{tls}/bytes/100"), "h2", "h2"),
    ] {
        let before = stats();
        let mut load = ns.exec(&hxlab());
        load.args([
            "load",
            "-n",
            "10",
            "-c",
            "1",
            "--no-keepalive",
            "--tfo",
            "--0rtt",
            "-k",
        ])
        .args(["--proto", proto, &url, "--json", "-", "--no-progress"]);
        let (code, out, err) = run_with_timeout(&mut load, LIMIT);
        assert_eq!(code, Some(0), "{proto}: {err}");
        let v: Value =
            serde_json::from_str(out.lines().find(|l| l.starts_with('{')).unwrap()).expect("json");
        assert_eq!(u(&v, &["requests_succeeded"]), 10, "{proto}");
        let acked = v["tfo_syn_data_acked"][negotiated].as_u64().unwrap_or(0);
        let not = v["tfo_syn_data_not_acked"][negotiated]
            .as_u64()
            .unwrap_or(0);
        assert_eq!(acked + not, 10, "{proto}: every connection read back: {v}");
        assert!(
            acked >= 8,
            "{proto}: SYN data acknowledged on {acked} of 10"
        );
        let after = stats();
        let served = counters(&after, key).tfo_accepted - counters(&before, key).tfo_accepted;
        assert_eq!(acked, served, "{proto}: client and server disagree");
        assert!(err.contains("TCP Fast Open:"), "{err}");
    }
}

/// `--timeout` is one rule on every protocol: a request must be answered (its last byte)
/// within the timeout of being sent; the oldest request in flight sets the connection's
/// deadline, and reaching it fails the requests in flight as `timeout`.
#[test]
fn timeout_counts_from_the_send_of_each_request_on_every_protocol() {
    let server = common::Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let h3 = server.ready.h3.expect("h3 addr").to_string();
    let cases = [
        ("h1", format!("http://{plain}")),
        ("h1", format!("https://{tls}")),
        ("h2", format!("https://{tls}")),
        ("h2c", format!("http://{plain}")),
        ("h3", format!("https://{h3}")),
    ];
    for (proto, base) in &cases {
        // A server that never answers in time: 2 clients × 2 requests in flight each (h1:
        // pipelined), all four fail as timeouts after ≈ the timeout, nothing else.
        let url = format!("{base}/delay/10000");
        let started = Instant::now();
        let (code, v, err) = load(&[
            "-n",
            "4",
            "-c",
            "2",
            "-m",
            "2",
            "--proto",
            proto,
            "-k",
            "--timeout",
            "500ms",
            &url,
        ]);
        let took = started.elapsed();
        assert_eq!(code, 1, "{proto} {base}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_done"]), 0, "{proto} {base}: {v}");
        assert_eq!(u(&v, &["requests_failed"]), 4, "{proto} {base}: {v}");
        assert_eq!(u(&v, &["errors", "timeout"]), 4, "{proto} {base}: {v}");
        assert_eq!(v["errors"]["reset"].as_u64().unwrap_or(0), 0, "{v}");
        let d = v["duration_s"].as_f64().unwrap();
        assert!((0.45..1.5).contains(&d), "{proto} {base}: duration {d}");
        assert!(took < Duration::from_secs(5), "{proto} {base}: {took:?}");
    }
    // Each request's time counts from its own send, not from the last progress on the
    // connection: A (5 s) and B (300 ms) go out at 0; B's answer frees a stream for C (5 s)
    // at 0.3 s; at 1 s A is due, and the connection ends with A and C as timeouts (C's own
    // deadline would be 1.3 s, as would a deadline counted from B's answer).
    for (proto, base) in &cases[2..] {
        let slow = format!("{base}/delay/5000");
        let fast = format!("{base}/delay/300");
        let (code, v, err) = load(&[
            "-n",
            "3",
            "-c",
            "1",
            "-m",
            "2",
            "--proto",
            proto,
            "-k",
            "--timeout",
            "1s",
            &slow,
            &fast,
        ]);
        assert_eq!(code, 0, "{proto}: {err}");
        let v = v.expect("json");
        assert_eq!(u(&v, &["requests_done"]), 1, "{proto}: {v}");
        assert_eq!(u(&v, &["errors", "timeout"]), 2, "{proto}: {v}");
        assert_eq!(u(&v, &["requests_failed"]), 2, "{proto}: {v}");
        let d = v["duration_s"].as_f64().unwrap();
        assert!((0.95..1.25).contains(&d), "{proto}: duration {d}");
    }
}

/// `hxlab load --jobs`, the lab's load generator inside a link: each job line runs in turn
/// and gets one answer line with the exit status that run alone would have had; loopback
/// URLs go to `$HXLAB_LINK_HOST` (here `[::1]` → 127.0.0.1, where the only server listens);
/// a run still going at its job's limit is answered as stopped and ends the command.
#[test]
fn load_jobs_answer_each_line_in_turn() {
    let server = common::Server::start(&[]);
    let port = server.ready.plain.port();
    let tmp = TempDir::new("hxlab-load-jobs");
    let job = |n: u32, path: &str, clients: u64, limit_ms: u64| {
        let config = hxlab_contract::LoadConfig {
            urls: vec![format!("http://[::1]:{port}{path}")],
            requests: 5,
            clients,
            ..Default::default()
        };
        let job = hxlab_contract::LoadJob {
            config,
            result: tmp.path().join(format!("r{n}.json")),
            limit_ms,
        };
        serde_json::to_string(&job).expect("a job is JSON") + "\n"
    };
    let input = [
        job(0, "/bytes/100", 1, 20_000),
        job(1, "/bytes/100", 0, 20_000),
        job(2, "/delay/20000", 1, 300),
        job(3, "/bytes/100", 1, 20_000),
    ]
    .concat();
    let mut child = PeerProcess::spawn(
        Command::new(hxlab())
            .args(["load", "--jobs"])
            .env("HXLAB_LINK_HOST", "127.0.0.1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).expect("jobs written");
    drop(stdin);
    let mut stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut out = String::new();
        let _ = stdout.read_to_string(&mut out);
        let _ = tx.send(out);
    });
    let out = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("no end of answers in 60 s\n{}", child.stderr_text()));
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "load --jobs did not exit after its last answer"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let answers: Vec<hxlab_contract::JobDone> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("an answer line"))
        .collect();
    assert_eq!(answers.len(), 3, "answers: {out}");
    assert_eq!(
        (answers[0].exit, answers[0].error.as_deref()),
        (Some(0), None)
    );
    assert_eq!(
        answers[1].exit,
        Some(2),
        "clients = 0 is refused as a usage error"
    );
    assert_eq!(answers[2].exit, None);
    assert!(answers[2]
        .error
        .as_deref()
        .unwrap_or("")
        .contains("stopped"));
    assert_eq!(status.code(), Some(1), "a stopped run ends the command");
    let r: Value = serde_json::from_str(
        &std::fs::read_to_string(tmp.path().join("r0.json")).expect("result 0 written"),
    )
    .expect("result JSON");
    assert_eq!(r["requests_done"], 5);
    assert!(
        !tmp.path().join("r3.json").exists(),
        "nothing runs after a stop"
    );
}
