//! `hxlab load`'s h2load flags with h2load's meanings, against real peers on loopback:
//! `hxlab serve` (h1, h2, h2c and h3), nghttpd (h2c), and h2load itself where its output
//! is the reference (the `requests:` line, the `--log-file` columns). Each test fails when
//! its flag stops doing what h2load's does.

mod common;

use common::{hxlab, require_peer, run_with_timeout, tempfile_dir::TempDir, Server, ThreadServer};
use hxlab_core::RunResult;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(60);

/// `hxlab load ARGS --json -`: exit code, the RunResult (if one was printed), the summary
/// (stderr, where it goes with `--json -`).
fn load(args: &[&str]) -> (i32, Option<RunResult>, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("load")
        .args(args)
        .args(["--json", "-", "--no-progress"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    let result = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok());
    (code.unwrap_or(-1), result, err)
}

/// [`load`] that must succeed.
fn load_ok(args: &[&str]) -> (RunResult, String) {
    let (code, r, err) = load(args);
    assert_eq!(code, 0, "hxlab load {args:?}: {err}");
    (r.expect("a RunResult"), err)
}

fn plain(s: &Server) -> String {
    format!("http://{}", s.ready.plain)
}

fn tls(s: &Server) -> String {
    format!("https://{}", s.ready.tls)
}

/// `-d FILE` sends the file's contents (h2load's meaning, not a literal string), on every
/// protocol; a literal given as before fails with one line naming `--data-string`, which
/// sends it.
#[test]
fn d_sends_a_files_contents_and_a_literal_fails_loudly() {
    let server = Server::start(&[]);
    let dir = TempDir::new("hxlab-h2load-d");
    let file = dir.path().join("body");
    std::fs::write(&file, vec![b'q'; 5000]).expect("write body");
    let file = file.to_str().unwrap();
    for (proto, base) in [
        ("h1", plain(&server)),
        ("h2c", plain(&server)),
        ("h2", tls(&server)),
        ("h3", tls(&server)),
    ] {
        let url = format!("{base}/bytes/10");
        let common = ["-n", "10", "-c", "2", "-m", "2", "--proto", proto, "-k"];
        let (without, _) = load_ok(&[&common[..], &[url.as_str()]].concat());
        let (with, _) = load_ok(&[&common[..], &["-d", file, url.as_str()]].concat());
        assert_eq!(with.requests_succeeded, 10, "{proto}");
        let extra = with.bytes.total_sent - without.bytes.total_sent;
        assert!(
            (10 * 5000..10 * 5000 + 10 * 100).contains(&extra),
            "{proto}: -d FILE sent {extra} more bytes for 10 requests of a 5000-byte file"
        );
    }
    let url = format!("{}/bytes/10", plain(&server));
    let (code, _, err) = load(&["-d", "hello=world", &url]);
    assert_eq!(code, 2, "{err}");
    let line = err.lines().find(|l| l.contains("error")).unwrap_or(&err);
    assert!(
        line.contains("-d/--data hello=world: no such file") && line.contains("--data-string"),
        "{err}"
    );
    let (r, _) = load_ok(&["--data-string", "hello=world", "-n", "3", &url]);
    let (r0, _) = load_ok(&["-n", "3", &url]);
    assert_eq!(
        r.config.extra.get("body_bytes").map(String::as_str),
        Some("11")
    );
    assert!(r.bytes.total_sent >= r0.bytes.total_sent + 3 * 11, "{r:?}");
}

/// How many HTTP/1.1 requests `hxlab load -n 4 -c 1 -m 4 EXTRA` has sent before the first
/// answer: a server of the test's own (no real one tells its pipelining depth) reads until
/// the client falls silent for 300 ms, counts the request lines, then answers each.
fn pipelined_before_the_first_answer(extra: &[&str]) -> u64 {
    let seen = Arc::new(AtomicU64::new(0));
    let counted = seen.clone();
    let server = ThreadServer::start(Duration::from_secs(30), move |mut conn, serving| {
        let _ = conn.set_read_timeout(Some(Duration::from_millis(300)));
        let (mut got, mut answered, mut first) = (Vec::new(), 0, true);
        let mut chunk = vec![0u8; 1 << 16];
        while serving.running() {
            match conn.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => {
                    got.extend_from_slice(&chunk[..n]);
                    if first {
                        continue;
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
            let heads = got.windows(11).filter(|w| w == b" HTTP/1.1\r\n").count() as u64;
            if first {
                counted.store(heads, Ordering::Relaxed);
                first = false;
            }
            while answered < heads {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
                answered += 1;
            }
        }
    });
    let url = format!("http://127.0.0.1:{}/", server.port);
    let (r, _) = load_ok(
        &[
            &["-n", "4", "-c", "1", "-m", "4", "--h1"][..],
            extra,
            &[&url],
        ]
        .concat(),
    );
    assert_eq!(r.requests_succeeded, 4);
    seen.load(Ordering::Relaxed)
}

/// h2load: with `-d`, HTTP/1.1 sends one request at a time; without, `-m` are pipelined.
#[test]
fn d_turns_http1_pipelining_off_as_in_h2load() {
    let dir = TempDir::new("hxlab-h2load-d-pipeline");
    let file = dir.path().join("body");
    std::fs::write(&file, b"0123456789").unwrap();
    assert_eq!(pipelined_before_the_first_answer(&[]), 4);
    assert_eq!(
        pipelined_before_the_first_answer(&["-d", file.to_str().unwrap()]),
        1
    );
}

/// `-i FILE` (and `-i -`) reads the URLs one per line, a bare path after the first on its
/// origin, requested round-robin as URLs on the command line are; URLs beside it are a
/// usage error.
#[test]
fn i_reads_urls_from_a_file_or_stdin() {
    let server = Server::start(&[]);
    let dir = TempDir::new("hxlab-h2load-i");
    let list = dir.path().join("urls");
    let base = plain(&server);
    std::fs::write(&list, format!("{base}/bytes/5\n\n/bytes/7\n")).unwrap();
    let list = list.to_str().unwrap();
    let (r, _) = load_ok(&["-i", list, "-n", "4"]);
    assert_eq!(r.bytes.body_received, 2 * 5 + 2 * 7, "{r:?}");
    assert_eq!(
        r.config.urls,
        [format!("{base}/bytes/5"), "/bytes/7".into()]
    );

    let mut child = Command::new(hxlab())
        .args(["load", "-i", "-", "-n", "2", "--json", "-", "-q"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hxlab load");
    write!(
        child.stdin.take().unwrap(),
        "{base}/bytes/3\n{base}/bytes/9\n"
    )
    .unwrap();
    let out = child.wait_with_output().expect("hxlab load -i -");
    assert!(out.status.success(), "{out:?}");
    let r: RunResult = serde_json::from_slice(&out.stdout).expect("RunResult");
    assert_eq!(r.bytes.body_received, 12);

    let (code, _, err) = load(&["-i", list, &format!("{base}/bytes/1")]);
    assert_eq!(code, 2, "{err}");
}

/// `--rps N`: each client sends at most N requests per second (2 clients × 10 at 10/s:
/// about 0.9 s), and h2load's `req/s` row shows each client's rate; latency stays the
/// answer's (closed model), not a schedule's.
#[test]
fn rps_paces_each_client() {
    let server = Server::start(&[]);
    let url = format!("{}/bytes/10", plain(&server));
    let t0 = Instant::now();
    let (r, summary) = load_ok(&["-p", "h2c", "-n", "20", "-c", "2", "--rps", "10", &url]);
    let took = t0.elapsed();
    assert_eq!(r.requests_succeeded, 20);
    assert!(
        r.duration_s > 0.85 && took < Duration::from_secs(5),
        "20 requests over 2 clients at 10/s each took {} s",
        r.duration_s
    );
    assert_eq!(r.client_request_rates.len(), 2, "{r:?}");
    for rate in &r.client_request_rates {
        assert!((9.0..12.5).contains(rate), "{:?}", r.client_request_rates);
    }
    assert_eq!(r.config.rps, Some(10.0));
    assert!(summary.contains("req/s (per client):"), "{summary}");
    // Without --rps the same run takes a few milliseconds.
    let (fast, _) = load_ok(&["-p", "h2c", "-n", "20", "-c", "2", &url]);
    assert!(fast.duration_s < 0.5, "{}", fast.duration_s);
    assert!(fast.client_request_rates.iter().all(|r| *r > 20.0));
    let (code, _, err) = load(&["--rps", "10", "--rate", "10", &url]);
    assert_eq!(code, 2, "{err}");
}

/// `--warm-up-time` is h2load's name for the warm-up of a `-D` run: requests go out, none is
/// measured.
#[test]
fn warm_up_time_is_the_warm_up() {
    let server = Server::start(&[]);
    let url = format!("{}/bytes/10", plain(&server));
    let (r, _) = load_ok(&["-D", "600ms", "--warm-up-time", "300ms", &url]);
    assert!(r.warm_up_requests_done > 0, "{r:?}");
    assert!(r.requests_done > 0);
    assert_eq!(
        r.config.extra.get("warm_up_s").map(String::as_str),
        Some("0.3")
    );
    let (code, _, err) = load(&["--warm-up-time", "300ms", &url]);
    assert_eq!(code, 2, "without -D: {err}");
}

/// `-p/--no-tls-proto`: what an http:// URL speaks without --proto: h2c against nghttpd
/// (which speaks nothing else in cleartext), HTTP/1.1 when asked or by default; contradicting
/// --proto is a usage error.
#[test]
fn p_picks_the_cleartext_protocol() {
    let server = Server::start(&[]);
    let url = format!("{}/bytes/10", plain(&server));
    let (h1, _) = load_ok(&["-n", "4", &url]);
    assert_eq!(h1.negotiated.keys().collect::<Vec<_>>(), ["http/1.1"]);
    let (h1, _) = load_ok(&["-p", "http/1.1", "-n", "4", &url]);
    assert_eq!(h1.negotiated.keys().collect::<Vec<_>>(), ["http/1.1"]);
    let (h2c, _) = load_ok(&["-p", "h2c", "-n", "4", &url]);
    assert_eq!(h2c.negotiated.keys().collect::<Vec<_>>(), ["h2c"]);
    assert_eq!(
        h2c.config.no_tls_proto,
        Some(hxlab_core::protocol::Proto::H2c)
    );
    let (code, _, err) = load(&["-p", "h2c", "--h1", &url]);
    assert_eq!(code, 2, "{err}");

    let dir = TempDir::new("hxlab-h2load-p");
    std::fs::write(dir.path().join("obj"), vec![b'x'; 100]).unwrap();
    let Some((_nghttpd, port)) = common::start_nghttpd(dir.path(), None, &[]) else {
        return;
    };
    let (r, _) = load_ok(&[
        "-p",
        "h2c",
        "-n",
        "6",
        "-m",
        "3",
        &format!("http://127.0.0.1:{port}/obj"),
    ]);
    assert_eq!((r.requests_succeeded, r.bytes.body_received), (6, 600));
}

/// `--connect-to` dials elsewhere while Host/:authority and SNI stay the URL's (the echoed
/// request grows with the URL's host name, which is never looked up), on TCP and QUIC;
/// `--sni` names the server in the handshake, so the certificate check follows it.
#[test]
fn connect_to_and_sni_keep_the_urls_name_or_replace_it() {
    let server = Server::start(&[]);
    let cert = server.cert();
    let cert = cert.to_str().unwrap();
    let to = server.ready.plain.to_string();
    let short = load_ok(&["-n", "2", "--connect-to", &to, "http://a.invalid:1/headers"]).0;
    let long = load_ok(&[
        "-n",
        "2",
        "--connect-to",
        &to,
        "http://a-much-longer-name.invalid:1/headers",
    ])
    .0;
    let grown = long.bytes.body_received - short.bytes.body_received;
    assert_eq!(grown, 2 * ("a-much-longer-name".len() - 1) as u64);
    assert_eq!(long.config.connect_to.as_deref(), Some(to.as_str()));

    let port = server.ready.tls.port();
    for proto in ["h2", "h3", "h1"] {
        let (r, _) = load_ok(&[
            "-n",
            "2",
            "--proto",
            proto,
            "--cacert",
            cert,
            "--connect-to",
            &format!("127.0.0.1:{port}"),
            "https://localhost:1/bytes/10",
        ]);
        assert_eq!(r.requests_succeeded, 2, "{proto}");
    }
    let url = format!("https://127.0.0.1:{port}/bytes/10");
    for proto in ["h2", "h3"] {
        let (r, _) = load_ok(&[
            "--proto",
            proto,
            "--cacert",
            cert,
            "--sni",
            "localhost",
            &url,
        ]);
        assert_eq!(r.config.sni.as_deref(), Some("localhost"));
        let (code, r, err) = load(&["--proto", proto, "--cacert", cert, "--sni", "x.test", &url]);
        assert_eq!(
            code, 1,
            "{proto}: a certificate without x.test passed: {err}"
        );
        assert!(r.is_some_and(|r| r.errors.tls > 0), "{proto}: {err}");
    }
}

/// `-N`: a connection silent that long ends, its requests failing as timeouts long before
/// `--timeout`, and the client is done (h2load); `-T`: once a client has sent its last
/// request, its connection stays that long at most.
#[test]
fn connection_timeouts_end_silent_and_lingering_connections() {
    let server = Server::start(&[]);
    let slow = format!("{}/delay/3000", plain(&server));
    let t0 = Instant::now();
    let (code, r, err) = load(&["-n", "4", "-c", "2", "-N", "300ms", &slow]);
    assert!(t0.elapsed() < Duration::from_secs(2), "{err}");
    assert_eq!(code, 1, "nothing answered: {err}");
    let r = r.expect("RunResult");
    assert_eq!((r.requests_started, r.errors.timeout), (2, 2), "{r:?}");
    assert_eq!(
        r.requests_failed, 4,
        "the retired clients' requests fail too"
    );
    assert!(err.contains("-N/--connection-inactivity-timeout"), "{err}");

    let slow = format!("{}/delay/3000", tls(&server));
    for proto in ["h2", "h3"] {
        let t0 = Instant::now();
        let (code, r, err) = load(&[
            "-n", "3", "-m", "3", "-T", "400ms", "--proto", proto, "-k", &slow,
        ]);
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(2), "{proto}: {took:?}: {err}");
        assert_eq!(code, 1, "{err}");
        let r = r.expect("RunResult");
        assert_eq!((r.requests_failed, r.errors.timeout), (3, 3), "{proto}");
        assert!(err.contains("-T/--connection-active-timeout"), "{err}");
    }
    // A server that answers in time is not cut.
    let quick = format!("{}/delay/50", tls(&server));
    let (r, _) = load_ok(&[
        "-n", "6", "-m", "3", "-T", "2s", "-N", "1s", "--proto", "h2", "-k", &quick,
    ]);
    assert_eq!(r.requests_succeeded, 6);
}

/// Splits a `--log-file` line into h2load's three columns.
fn columns(line: &str) -> (u64, i64, u64) {
    let f: Vec<&str> = line.split('\t').collect();
    assert_eq!(f.len(), 3, "{line:?}");
    (
        f[0].parse().expect("start µs"),
        f[1].parse().expect("status"),
        f[2].parse().expect("duration µs"),
    )
}

/// `--log-file` appends h2load's lines: start in µs since the epoch, status (-1: failed),
/// µs to the end; checked beside h2load's own log of the same server.
#[test]
fn log_file_lines_are_h2loads() {
    let server = Server::start(&[]);
    let dir = TempDir::new("hxlab-h2load-log");
    let ours = dir.path().join("hxlab.log");
    let url = format!("{}/status/404", plain(&server));
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let ours_s = ours.to_str().unwrap();
    load_ok(&[
        "-p",
        "h2c",
        "-n",
        "5",
        "-c",
        "2",
        "--log-file",
        ours_s,
        &url,
    ]);
    let ok = format!("{}/bytes/10", plain(&server));
    load_ok(&["-n", "3", "--log-file", ours_s, &ok]);
    let slow = format!("{}/delay/3000", plain(&server));
    load(&["-n", "1", "-N", "200ms", "--log-file", ours_s, &slow]);
    let after = before + 60_000_000;
    let text = std::fs::read_to_string(&ours).unwrap();
    let rows: Vec<(u64, i64, u64)> = text.lines().map(columns).collect();
    assert_eq!(rows.len(), 9, "appended, one line per request: {text}");
    assert!(
        rows.iter().all(|(t, _, _)| (before..after).contains(t)),
        "{text}"
    );
    let statuses: Vec<i64> = rows.iter().map(|r| r.1).collect();
    assert_eq!(statuses, [404, 404, 404, 404, 404, 200, 200, 200, -1]);
    assert!(rows[8].2 >= 200_000, "the failed one ended at -N: {text}");

    if require_peer("h2load").is_none() {
        return;
    }
    let theirs = dir.path().join("h2load.log");
    let (code, _, err) = run_with_timeout(
        Command::new("h2load")
            .args(["-n", "5", "-c", "2", "--log-file"])
            .arg(&theirs)
            .arg(&url),
        LIMIT,
    );
    assert_eq!(code, Some(0), "{err}");
    let text = std::fs::read_to_string(&theirs).unwrap();
    let theirs: Vec<(u64, i64, u64)> = text.lines().map(columns).collect();
    assert_eq!(theirs.len(), 5);
    assert!(theirs
        .iter()
        .all(|(t, s, _)| (before..after).contains(t) && *s == 404));
}

/// `-v` tells each connection and each request on stderr.
#[test]
fn verbose_tells_connections_and_requests() {
    let server = Server::start(&[]);
    let url = format!("{}/bytes/10", tls(&server));
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args(["load", "-v", "-q", "-n", "3", "--proto", "h2", "-k", &url]),
        LIMIT,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err.matches("connected: h2 TLSv1.3, cc ").count(),
        1,
        "{err}"
    );
    assert_eq!(err.matches("client 0: 200 in ").count(), 3, "{err}");
}

/// The summary's `requests:` line is h2load's, number for number, for the same requests to
/// the same server (404s count as done but failed).
#[test]
fn the_requests_line_reads_as_h2loads() {
    let Some(_) = require_peer("h2load") else {
        return;
    };
    let server = Server::start(&[]);
    for path in ["/bytes/10", "/status/404"] {
        let url = format!("{}{path}", plain(&server));
        let (code, out, err) = run_with_timeout(
            Command::new("h2load").args(["-n", "12", "-c", "3", "-m", "2", &url]),
            LIMIT,
        );
        assert_eq!(code, Some(0), "{err}");
        let theirs = out.lines().find(|l| l.starts_with("requests:")).unwrap();
        let (_, summary) = load_ok(&["-p", "h2c", "-n", "12", "-c", "3", "-m", "2", &url]);
        let ours = summary
            .lines()
            .find(|l| l.starts_with("requests:"))
            .unwrap();
        assert_eq!(ours, theirs, "{path}");
        assert!(summary.contains("req/s (per client):"), "{summary}");
    }
}

/// One controller on every protocol by default: `load --proto h2` and `--proto h3` against
/// `hxlab serve` report cubic, read back from the socket and from quinn (this machine's
/// TCP default may be another); `--cc reno` is read back as reno on both, and `--cc system`
/// gives TCP the kernel's default.
#[test]
fn one_congestion_controller_on_every_protocol() {
    let server = Server::start(&[]);
    let url = format!("{}/bytes/10", tls(&server));
    let ran = |extra: &[&str], proto: &str| {
        let (r, summary) =
            load_ok(&[&["-n", "2", "-k", "--proto", proto][..], extra, &[&url]].concat());
        let names: Vec<String> = r.congestion_control.keys().cloned().collect();
        assert!(
            summary.contains(&format!("cc {} (read back)", names.join(", "))),
            "{summary}"
        );
        (names, r.config.cc)
    };
    let cubic = hxlab_core::cc::CongestionControl::Cubic;
    assert_eq!(ran(&[], "h2"), (vec!["cubic".to_string()], Some(cubic)));
    assert_eq!(ran(&[], "h3"), (vec!["cubic".to_string()], Some(cubic)));
    let reno = Some(hxlab_core::cc::CongestionControl::Reno);
    assert_eq!(
        ran(&["--cc", "reno"], "h2"),
        (vec!["reno".to_string()], reno)
    );
    assert_eq!(
        ran(&["--cc", "reno"], "h3"),
        (vec!["reno".to_string()], reno)
    );
    let system = hxlab_core::cc::system_default_name();
    assert_eq!(ran(&["--cc", "system"], "h2"), (vec![system], None));
}

/// Without CAP_NET_ADMIN a process may set only the controllers the kernel allows (here
/// typically "reno" and the default): `hxlab load` as an unprivileged user still runs one
/// controller on h2 and h3 alike — cubic, or, where cubic is not allowed, the system's
/// default with a note saying why — and a `--cc` it may not set is one line and exit 2
/// before anything is sent.
#[test]
fn unprivileged_runs_keep_one_controller_or_say_why() {
    if !common::require_root("dropping privileges with setpriv") {
        return;
    }
    let Some(setpriv) = require_peer("setpriv") else {
        return;
    };
    let server = Server::start(&[]);
    let url = format!("{}/bytes/10", tls(&server));
    let as_nobody = |args: &[&str]| {
        let (code, out, err) = run_with_timeout(
            Command::new(&setpriv)
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(hxlab())
                .args(["load", "-n", "3", "-k", "--no-progress", "--json", "-"])
                .args(args)
                .arg(&url),
            LIMIT,
        );
        let r: Option<RunResult> = out
            .lines()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok());
        (code, r, err)
    };
    let allowed = hxlab_core::cc::tcp_allowed().expect("allowed controllers");
    let cubic_allowed = allowed.iter().any(|a| a == "cubic");
    let mut ran = Vec::new();
    for proto in ["h2", "h3"] {
        let (code, r, err) = as_nobody(&["--proto", proto]);
        assert_eq!(code, Some(0), "{proto}: {err}");
        let names: Vec<String> = r
            .expect("RunResult")
            .congestion_control
            .into_keys()
            .collect();
        assert_eq!(names.len(), 1, "{proto}: {names:?}");
        assert_eq!(
            err.contains("note: congestion control cubic: this process may not set it"),
            !cubic_allowed,
            "{err}"
        );
        ran.push(names);
    }
    assert_eq!(ran[0], ran[1], "one controller on h2 and h3");
    let available = hxlab_core::cc::tcp_available().expect("available controllers");
    for cc in available.iter().filter(|a| !allowed.contains(a)) {
        if hxlab_core::cc::CongestionControl::parse(cc).is_none() {
            continue;
        }
        let (code, _, err) = as_nobody(&["--proto", "h2", "--cc", cc]);
        assert_eq!(code, Some(2), "--cc {cc}: {err}");
        assert!(err.contains("may not set it on TCP sockets"), "{err}");
    }
}

/// One command line of h2load's flags runs under both, against the same server, and the two
/// `requests:` lines agree (h2load checks no certificate; hxlab is told `-k`).
#[test]
fn an_h2load_command_line_runs_under_hxlab_load() {
    let Some(_) = require_peer("h2load") else {
        return;
    };
    let server = Server::start(&[]);
    let dir = TempDir::new("hxlab-h2load-line");
    let urls = dir.path().join("urls");
    std::fs::write(&urls, format!("{}/bytes/100\n/bytes/200\n", tls(&server))).unwrap();
    let log = dir.path().join("log");
    let (urls, log) = (urls.to_str().unwrap(), log.to_str().unwrap());
    let line = [
        "-n",
        "40",
        "-c",
        "4",
        "-m",
        "2",
        "-t",
        "2",
        "-H",
        "x-test: 1",
        "--npn-list",
        "h2",
        "--header-table-size",
        "4096",
        "--encoder-header-table-size",
        "4K",
        "-T",
        "5s",
        "-N",
        "5s",
        "--rps",
        "500",
        "-i",
        urls,
        "--log-file",
        log,
    ];
    let (code, out, err) = run_with_timeout(Command::new("h2load").args(line), LIMIT);
    assert_eq!(code, Some(0), "{err}");
    let theirs = out.lines().find(|l| l.starts_with("requests:")).unwrap();
    let (r, summary) = load_ok(&[&line[..], &["-k"]].concat());
    let ours = summary
        .lines()
        .find(|l| l.starts_with("requests:"))
        .unwrap();
    assert_eq!(ours, theirs);
    assert_eq!(r.negotiated.keys().collect::<Vec<_>>(), ["h2"]);
    assert_eq!(r.bytes.body_received, 20 * 100 + 20 * 200);
    let lines = std::fs::read_to_string(log).unwrap().lines().count();
    assert_eq!(lines, 80, "both appended 40 lines");
}
