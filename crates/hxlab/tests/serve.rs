//! `hxlab serve` against real peers: curl (h1, h2 by ALPN, h2c, fallback to h1), nghttp
//! (push, early hints), h2load (h1, h1+TLS, h2, h2c), gtlsclient (h3), h2spec on both ports,
//! plus the contract: ready file, stdout lines, 400s, exact sizes, /stats, static dir, SIGTERM.

mod common;

use common::{hxlab, require_peer, run_with_timeout, Server};
use hxlab_contract::{ProtoStats, StatsSnapshot};
use hxlab_core::Protocol;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

fn tls_port(s: &Server) -> String {
    s.ready.tls.port().to_string()
}

fn plain_port(s: &Server) -> String {
    s.ready.plain.port().to_string()
}

/// curl with `args`, returning (http_version, status, size_download, body).
fn curl(s: &Server, args: &[&str], url: &str) -> (String, u16, u64, String) {
    let body_path = s.dir.path().join(format!("body-{}", rand_suffix()));
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--max-time", "30", "--cacert"])
        .arg(s.cert())
        .args(["-o"])
        .arg(&body_path)
        .args(["-w", "%{http_version} %{http_code} %{size_download}"])
        .args(args)
        .arg(url);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "curl {args:?} {url} failed: {err}");
    let mut parts = out.split_whitespace();
    let version = parts.next().unwrap_or("").to_string();
    let status = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let size = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let body = std::fs::read(&body_path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let _ = std::fs::remove_file(&body_path);
    (version, status, size, body)
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn stats(s: &Server) -> StatsSnapshot {
    let (_, status, _, body) = curl(s, &[], &format!("http://127.0.0.1:{}/stats", plain_port(s)));
    assert_eq!(status, 200);
    StatsSnapshot::from_json(&body).expect("a /stats document")
}

/// The `/stats` counters of `p` (every protocol is listed).
fn counters(st: &StatsSnapshot, p: Protocol) -> ProtoStats {
    st.protocol(p)
        .cloned()
        .unwrap_or_else(|| panic!("/stats lists no {}: {st:?}", p.name()))
}

#[test]
fn ready_file_and_stdout_follow_the_contract() {
    let dir = common::tempfile_dir::TempDir::new("hxlab-serve-contract");
    let ready = dir.path().join("ready.json");
    let child = Command::new(hxlab())
        .args([
            "serve",
            "--tls-port",
            "0",
            "--plain-port",
            "0",
            "--ready-file",
        ])
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn hxlab serve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !ready.exists() {
        assert!(Instant::now() < deadline, "no ready file");
        std::thread::sleep(Duration::from_millis(20));
    }
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&ready).expect("read")).expect("json");
    let child_pid = child.id();
    let _ = Command::new("kill")
        .args(["-TERM", &child_pid.to_string()])
        .status();
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(doc["pid"].as_u64(), Some(u64::from(child_pid)));
    assert_eq!(doc["h3"], doc["tls"], "h3 uses the TLS port number");
    assert!(doc["cert"].is_null(), "no --cert-out given");
    let spki = doc["spki_sha256"].as_str().expect("spki");
    assert_eq!(spki.len(), 44, "base64 of 32 bytes");
    let tls = doc["tls"].as_str().expect("tls");
    let plain = doc["plain"].as_str().expect("plain");
    assert!(
        stdout.contains(&format!("listen proto=h1,h2 tls=1 addr={tls}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("listen proto=h1,h2c tls=0 addr={plain}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("listen proto=h3 tls=1 addr={tls} (udp)\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("spki_sha256={spki}\n")),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "SIGTERM exits 0");
}

#[test]
fn curl_speaks_h1_h2_h2c_and_falls_back_to_h1() {
    if require_peer("curl").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    assert_eq!(
        curl(&s, &[], &format!("http://127.0.0.1:{p}/bytes/5k")).0,
        "1.1"
    );
    let (v, st, n, _) = curl(
        &s,
        &["--http2"],
        &format!("https://127.0.0.1:{t}/bytes/10KiB"),
    );
    assert_eq!((v.as_str(), st, n), ("2", 200, 10240));
    let (v, st, n, _) = curl(&s, &["--http2"], &format!("https://localhost:{t}/bytes/1"));
    assert_eq!(
        (v.as_str(), st, n),
        ("2", 200, 1),
        "certificate is valid for localhost"
    );
    let (v, st, n, _) = curl(
        &s,
        &["--http2-prior-knowledge"],
        &format!("http://127.0.0.1:{p}/bytes/1M"),
    );
    assert_eq!((v.as_str(), st, n), ("2", 200, 1_000_000));
    let (v, st, n, _) = curl(
        &s,
        &["--http1.1"],
        &format!("https://127.0.0.1:{t}/bytes/1"),
    );
    assert_eq!(
        (v.as_str(), st, n),
        ("1.1", 200, 1),
        "TLS without h2 in ALPN falls back to HTTP/1.1"
    );
    let (v, st, n, _) = curl(
        &s,
        &["--http1.1", "--tlsv1.2", "--tls-max", "1.2"],
        &format!("https://127.0.0.1:{t}/bytes/7"),
    );
    assert_eq!((v.as_str(), st, n), ("1.1", 200, 7), "TLS 1.2 works");
    // Alt-Svc advertises h3 on the TLS port, on TCP responses.
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "-D", "-", "-o", "/dev/null", "--cacert"])
        .arg(s.cert())
        .arg(format!("https://127.0.0.1:{t}/bytes/1"));
    let (_, headers, _) = run_with_timeout(&mut cmd, LIMIT);
    assert!(
        headers
            .to_ascii_lowercase()
            .contains(&format!("alt-svc: h3=\":{t}\"")),
        "{headers}"
    );
    // /option: floor(size × 1 MiB) after the delay.
    let started = Instant::now();
    let (_, st, n, _) = curl(
        &s,
        &[],
        &format!("http://127.0.0.1:{p}/option?size=0.5&delay=200"),
    );
    assert_eq!((st, n), (200, 524288));
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "delay honoured"
    );
    let (_, _, _, body) = curl(&s, &["--http2"], &format!("https://127.0.0.1:{t}/headers"));
    let doc: serde_json::Value = serde_json::from_str(&body).expect("headers JSON");
    assert_eq!(doc["protocol"], "h2");
    assert!(doc["headers"]["user-agent"]
        .as_str()
        .unwrap_or("")
        .starts_with("curl/"));
    let (_, st, _, body) = curl(
        &s,
        &["--http2"],
        &format!("https://127.0.0.1:{t}/status/418"),
    );
    assert_eq!(st, 418);
    assert!(body.contains("418"));
    let (_, st, _, body) = curl(&s, &[], &format!("http://127.0.0.1:{p}/"));
    assert_eq!(st, 200);
    assert!(
        body.contains("HTTP/1.1") && body.contains(&t),
        "demo page names both origins"
    );
}

#[test]
fn bytes_sizes_are_exact_on_every_tcp_protocol() {
    if require_peer("curl").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    for (spec, n) in [
        ("0", 0u64),
        ("100", 100),
        ("5k", 5000),
        ("10KiB", 10240),
        ("1M", 1_000_000),
        ("1MiB", 1_048_576),
        ("100000", 100_000),
    ] {
        for (args, base) in [
            (vec![], format!("http://127.0.0.1:{p}")),
            (
                vec!["--http2-prior-knowledge"],
                format!("http://127.0.0.1:{p}"),
            ),
            (vec!["--http2"], format!("https://127.0.0.1:{t}")),
            (vec!["--http1.1"], format!("https://127.0.0.1:{t}")),
        ] {
            let (_, st, got, _) = curl(&s, &args, &format!("{base}/bytes/{spec}"));
            assert_eq!((st, got), (200, n), "/bytes/{spec} with {args:?}");
        }
    }
}

#[test]
fn bad_parameters_get_400_with_one_line() {
    if require_peer("curl").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    for path in [
        "/bytes/abc",
        "/bytes/12parsecs",
        "/bytes/5T",
        "/bytes/1k?delay=-5",
        "/bytes/1k?delay=9999999",
        "/option?size=lots",
        "/option?size=1&delay=soon",
        "/delay/forever",
        "/status/42",
        "/page?n=many",
        "/page?n=100000",
        "/page?push=maybe",
        "/page?early_hints=2",
    ] {
        for (args, base) in [
            (vec![], format!("http://127.0.0.1:{p}")),
            (vec!["--http2"], format!("https://127.0.0.1:{t}")),
        ] {
            let (_, st, _, body) = curl(&s, &args, &format!("{base}{path}"));
            assert_eq!(st, 400, "{path} {args:?}: {body}");
            assert!(body.starts_with("bad request: "), "{path}: {body}");
            assert_eq!(
                body.trim_end().lines().count(),
                1,
                "{path}: one line: {body}"
            );
        }
    }
    let (_, st, _, _) = curl(&s, &[], &format!("http://127.0.0.1:{p}/no/such/thing"));
    assert_eq!(st, 404);
}

#[test]
fn nghttp_sees_push_promise_and_early_hints() {
    if require_peer("nghttp").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let t = tls_port(&s);
    let url = format!("https://127.0.0.1:{t}/page?n=3&size=2k&push=1&early_hints=1");
    let (code, out, err) = run_with_timeout(Command::new("nghttp").args(["-v", "-n", &url]), LIMIT);
    assert_eq!(code, Some(0), "nghttp: {err}");
    assert_eq!(out.matches("recv PUSH_PROMISE frame").count(), 3, "{out}");
    for i in 0..3 {
        assert!(
            out.contains(&format!(":path: /bytes/2000?r={i}")),
            "promised path {i}: {out}"
        );
    }
    assert!(out.contains(":status: 103"), "early hints: {out}");
    assert!(
        out.contains("link: </bytes/2000?r=0>; rel=preload"),
        "{out}"
    );
    // With push disabled by the client the page is served normally, without promises.
    let (code, out, _) = run_with_timeout(
        Command::new("nghttp").args(["-v", "-n", "--no-push", &url]),
        LIMIT,
    );
    assert_eq!(code, Some(0));
    assert!(!out.contains("PUSH_PROMISE"), "{out}");
    assert!(out.contains(":status: 200"));
    // h2c gets push too.
    let p = plain_port(&s);
    let (code, out, _) = run_with_timeout(
        Command::new("nghttp").args(["-v", "-n", &format!("http://127.0.0.1:{p}/page?n=2&push=1")]),
        LIMIT,
    );
    assert_eq!(code, Some(0));
    assert_eq!(out.matches("recv PUSH_PROMISE frame").count(), 2, "{out}");
}

fn h2load(args: &[&str], url: &str) {
    let (code, out, err) = run_with_timeout(Command::new("h2load").args(args).arg(url), LIMIT);
    assert_eq!(code, Some(0), "h2load {args:?} {url}: {err}");
    let line = out
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap_or_else(|| panic!("no summary: {out}"));
    assert!(
        line.contains(" 2000 succeeded, 0 failed, 0 errored, 0 timeout"),
        "h2load {args:?} {url}: {line}"
    );
}

#[test]
fn h2load_runs_clean_on_h1_h2_and_h2c() {
    if require_peer("h2load").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    h2load(
        &["-n", "2000", "-c", "8", "--h1"],
        &format!("http://127.0.0.1:{p}/bytes/100"),
    );
    h2load(
        &["-n", "2000", "-c", "8", "--h1"],
        &format!("https://127.0.0.1:{t}/bytes/100"),
    );
    h2load(
        &["-n", "2000", "-c", "8", "-m", "10"],
        &format!("https://127.0.0.1:{t}/bytes/1k"),
    );
    h2load(
        &["-n", "2000", "-c", "8", "-m", "10"],
        &format!("http://127.0.0.1:{p}/bytes/1k"),
    );
    let st = stats(&s);
    for proto in [Protocol::H1, Protocol::H1Tls, Protocol::H2, Protocol::H2c] {
        assert!(
            counters(&st, proto).requests >= 2000,
            "{}: {st:?}",
            proto.name()
        );
    }
}

#[test]
fn gtlsclient_gets_the_body_over_h3() {
    if require_peer("gtlsclient").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let t = tls_port(&s);
    let dl = s.dir.path().join("dl");
    std::fs::create_dir_all(&dl).expect("mkdir");
    let mut cmd = Command::new("gtlsclient");
    cmd.args([
        "-q",
        "--exit-on-all-streams-close",
        "--timeout=10s",
        "--download",
    ])
    .arg(&dl)
    .args([
        "127.0.0.1",
        &t,
        &format!("https://127.0.0.1:{t}/bytes/100k"),
        &format!("https://127.0.0.1:{t}/page?n=2"),
    ]);
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "gtlsclient: {err}");
    let body = std::fs::read(dl.join("100k")).expect("downloaded /bytes/100k");
    assert_eq!(body.len(), 100_000);
    let page = std::fs::read_to_string(dl.join("page?n=2")).expect("downloaded /page?n=2");
    assert!(page.contains("/bytes/1000?r=1"), "{page}");
    let st = stats(&s);
    let h3 = counters(&st, Protocol::H3);
    assert_eq!(h3.requests, 2, "{st:?}");
    assert_eq!(h3.body_bytes, 100_000 + page.len() as u64, "{st:?}");
    // 103 Early Hints go out over HTTP/3 too, before the 200.
    let mut cmd = Command::new("gtlsclient");
    cmd.args([
        "--exit-on-all-streams-close",
        "--timeout=10s",
        "--no-quic-dump",
        "--no-http-dump",
    ])
    .args([
        "127.0.0.1",
        &t,
        &format!("https://127.0.0.1:{t}/page?n=2&early_hints=1"),
    ]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "gtlsclient: {err}");
    let log = format!("{out}{err}");
    let hints = log
        .find("[:status: 103]")
        .unwrap_or_else(|| panic!("no 103 over h3: {log}"));
    let ok = log
        .find("[:status: 200]")
        .unwrap_or_else(|| panic!("no 200 over h3: {log}"));
    assert!(hints < ok, "103 before 200");
    assert!(
        log.contains("[link: </bytes/1000?r=0>; rel=preload"),
        "{log}"
    );
}

fn h2spec(args: &[&str]) {
    let (_, out, err) =
        run_with_timeout(Command::new("h2spec").args(args), Duration::from_secs(90));
    let summary = out
        .lines()
        .rev()
        .find(|l| l.contains(" tests, "))
        .unwrap_or_else(|| panic!("h2spec {args:?}: {out}{err}"));
    let failed = summary.contains(" 0 failed") && summary.contains(" 0 skipped");
    if !failed {
        let failures = out.split("Failures:").nth(1).unwrap_or(&out);
        panic!("h2spec {args:?}: {summary}\n{failures}");
    }
}

#[test]
fn h2spec_passes_fully_on_tls_and_h2c() {
    if require_peer("h2spec").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    // Strict (-S): the RFC's SHOULDs too, 146 cases.
    h2spec(&["-S", "-t", "-k", "-p", &t, "-h", "127.0.0.1", "-o", "5"]);
    h2spec(&["-S", "-p", &p, "-h", "127.0.0.1", "-o", "5"]);
}

#[test]
fn stats_count_requests_bytes_and_connections_per_protocol() {
    if require_peer("curl").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    for _ in 0..3 {
        curl(&s, &[], &format!("http://127.0.0.1:{p}/bytes/100"));
    }
    for _ in 0..2 {
        curl(
            &s,
            &["--http2-prior-knowledge"],
            &format!("http://127.0.0.1:{p}/bytes/1k"),
        );
    }
    curl(&s, &["--http2"], &format!("https://127.0.0.1:{t}/bytes/7"));
    curl(
        &s,
        &["--http1.1"],
        &format!("https://127.0.0.1:{t}/bytes/9"),
    );
    let first = stats(&s);
    let second = stats(&s);
    let (h1, h2c) = (
        counters(&second, Protocol::H1),
        counters(&second, Protocol::H2c),
    );
    let h2 = counters(&second, Protocol::H2);
    assert_eq!(h1.requests, 3, "{second:?}");
    assert_eq!(h1.body_bytes, 300);
    assert_eq!(h2c.requests, 2);
    assert_eq!(h2c.body_bytes, 2000);
    assert_eq!(h2.requests, 1);
    assert_eq!(h2.body_bytes, 7);
    assert_eq!(counters(&second, Protocol::H1Tls).requests, 1);
    assert_eq!(counters(&second, Protocol::H3).requests, 0);
    assert_eq!(second.total.requests, 7, "/stats does not count itself");
    assert_eq!(first.total.requests, second.total.requests);
    assert!(h1.connections >= 3, "{second:?}");
    assert_eq!(h2c.connections, 2);
    assert_eq!(h2.open_connections, 0);
    assert!(second.uptime_s > 0.0);
    // Both CPU times are read (the type requires them); none runs backwards.
    assert!(second.cpu_user_s >= 0.0 && second.cpu_sys_s >= 0.0);
}

#[test]
fn static_dir_is_served_and_never_left() {
    if require_peer("curl").is_none() {
        return;
    }
    let root = common::tempfile_dir::TempDir::new("hxlab-static");
    let site = root.path().join("site");
    std::fs::create_dir_all(site.join("sub")).expect("mkdir");
    std::fs::write(site.join("sub/hello.txt"), "hello static\n").expect("write");
    std::fs::write(root.path().join("secret.txt"), "top secret\n").expect("write");
    let site_arg = site.display().to_string();
    let s = Server::start(&["--dir", &site_arg]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    let (_, st, _, body) = curl(
        &s,
        &[],
        &format!("http://127.0.0.1:{p}/static/sub/hello.txt"),
    );
    assert_eq!((st, body.as_str()), (200, "hello static\n"));
    let (_, st, _, body) = curl(
        &s,
        &["--http2"],
        &format!("https://127.0.0.1:{t}/static/sub/hello.txt"),
    );
    assert_eq!((st, body.as_str()), (200, "hello static\n"));
    for path in [
        "/static/../secret.txt",
        "/static/sub/../../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/..%2fsecret.txt",
    ] {
        for (args, base) in [
            (vec!["--path-as-is"], format!("http://127.0.0.1:{p}")),
            (
                vec!["--path-as-is", "--http2"],
                format!("https://127.0.0.1:{t}"),
            ),
        ] {
            let (_, st, _, body) = curl(&s, &args, &format!("{base}{path}"));
            assert!(st == 403 || st == 404 || st == 400, "{path}: {st}");
            assert!(!body.contains("top secret"), "{path} leaked the file");
        }
    }
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[test]
fn huge_bodies_are_streamed_without_growing_memory() {
    if require_peer("curl").is_none() {
        return;
    }
    let s = Server::start(&[]);
    let p = plain_port(&s);
    let pid = s.child.id();
    let before = rss_kib(pid);
    for args in [vec![], vec!["--http2-prior-knowledge"]] {
        let mut cmd = Command::new("curl");
        cmd.args([
            "-s",
            "-o",
            "/dev/null",
            "--max-time",
            "2",
            "-w",
            "%{size_download}",
        ])
        .args(&args)
        .arg(format!("http://127.0.0.1:{p}/bytes/100G"));
        let (code, out, _) = run_with_timeout(&mut cmd, LIMIT);
        assert_eq!(code, Some(28), "curl stopped by its own --max-time");
        let got: u64 = out.trim().parse().unwrap_or(0);
        assert!(got > 20_000_000, "{args:?}: only {got} bytes arrived");
    }
    let after = rss_kib(pid);
    assert!(
        before > 0 && after < before + 64 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
}

#[test]
fn sigterm_finishes_requests_in_flight_and_exits_0() {
    if require_peer("curl").is_none() {
        return;
    }
    let mut s = Server::start(&[]);
    let (t, p) = (tls_port(&s), plain_port(&s));
    // One slow request in flight on each TCP protocol when the signal arrives.
    let slow: Vec<_> = [
        (
            vec![],
            format!("http://127.0.0.1:{p}/bytes/5000?delay=1000"),
        ),
        (
            vec!["--http2-prior-knowledge"],
            format!("http://127.0.0.1:{p}/bytes/5000?delay=1000"),
        ),
        (
            vec!["--http2"],
            format!("https://127.0.0.1:{t}/bytes/5000?delay=1000"),
        ),
    ]
    .into_iter()
    .map(|(args, url)| {
        Command::new("curl")
            .args([
                "-s",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{size_download}",
                "--max-time",
                "20",
                "--cacert",
            ])
            .arg(s.cert())
            .args(args)
            .arg(url)
            .stdout(Stdio::piped())
            .spawn()
            .expect("curl")
    })
    .collect();
    std::thread::sleep(Duration::from_millis(400));
    let pid = s.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill")
        .success());
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(st) = s.child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "server did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
    for (i, c) in slow.into_iter().enumerate() {
        let out = c.wait_with_output().expect("curl output");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "200 5000",
            "request {i} in flight was finished"
        );
    }
    // And nothing accepts any more.
    let (code, _, _) = run_with_timeout(
        Command::new("curl").args([
            "-s",
            "--max-time",
            "5",
            &format!("http://127.0.0.1:{p}/bytes/1"),
        ]),
        LIMIT,
    );
    assert_ne!(code, Some(0), "still accepting after shutdown");
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        vec!["serve", "--bind", "not-an-ip"],
        vec!["serve", "--cert", "/nonexistent.pem"],
        vec!["serve", "--max-size", "lots"],
        vec!["serve", "--max-streams", "0"],
    ] {
        let (code, _, err) = run_with_timeout(Command::new(hxlab()).args(&args), LIMIT);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim_end().lines().count(),
            1,
            "{args:?}: one line: {err}"
        );
    }
}
