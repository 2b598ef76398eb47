//! `hxlab trace` against real servers: nghttpd (h2 over TLS, h2c, push), nginx without http2
//! (the ALPN fallback to HTTP/1.1) and `hxlab serve` (h2 with push, h3). The checks read the
//! `--json` event stream and assert the order and stream ids of the frames that crossed the wire.

mod common;

use common::{
    free_port, hxlab, make_cert, require_peer, run_with_timeout, start_nghttpd,
    tempfile_dir::TempDir, PeerProcess, Server,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(30);

/// A docroot with an index page, a style sheet to push and a 100 kB object.
fn make_docroot(dir: &Path) -> PathBuf {
    let root = dir.join("www");
    std::fs::create_dir_all(&root).expect("docroot");
    std::fs::write(root.join("index.html"), "<html>hello</html>\n").expect("index");
    std::fs::write(root.join("style.css"), "body{}\n").expect("css");
    std::fs::write(root.join("big"), vec![b'x'; 100_000]).expect("big");
    root
}

/// A peer the test started (stopped with SIGTERM first: an nginx master killed with SIGKILL
/// leaves its workers running).
struct Peer {
    _process: PeerProcess,
    port: u16,
    /// nginx only: a cleartext HTTP/1.1 port.
    plain_port: u16,
    dir: TempDir,
}

impl Peer {
    fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }

    /// nghttpd over TLS (pushing /style.css with /) or with --no-tls (h2c).
    fn nghttpd(tls: bool) -> Option<Peer> {
        let dir = TempDir::new("hxlab-trace-nghttpd");
        let root = make_docroot(dir.path());
        let tls = if tls {
            Some(make_cert(dir.path())?)
        } else {
            None
        };
        let (process, port) = start_nghttpd(&root, tls, &["--push=/=/style.css"])?;
        Some(Peer {
            _process: process.with_grace(Duration::from_secs(5)),
            port,
            plain_port: 0,
            dir,
        })
    }

    /// nginx with TLS and without http2: ALPN can only give http/1.1.
    fn nginx_h1_only() -> Option<Peer> {
        let bin = require_peer("nginx")?;
        let dir = TempDir::new("hxlab-trace-nginx");
        let root = make_docroot(dir.path());
        let (cert, key) = make_cert(dir.path())?;
        let port = free_port();
        let plain_port = free_port();
        let d = dir.path().display();
        let conf = format!(
            "daemon off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
             events {{ worker_connections 64; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n\
             server {{\n    listen 127.0.0.1:{port} ssl;\n    listen 127.0.0.1:{plain_port};\n    ssl_certificate {};\n    ssl_certificate_key {};\n\
             root {};\n  }}\n}}\n",
            cert.display(),
            key.display(),
            root.display()
        );
        let conf_path = dir.path().join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("nginx.conf");
        let mut cmd = Command::new(bin);
        cmd.arg("-c").arg(&conf_path).arg("-p").arg(dir.path());
        Some(Peer {
            _process: PeerProcess::start(cmd.stdout(Stdio::null()), &[port])
                .with_grace(Duration::from_secs(5)),
            port,
            plain_port,
            dir,
        })
    }
}

/// Runs `hxlab trace ARGS --json`, expects success, returns the events.
fn trace_json(args: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(hxlab());
    cmd.arg("trace")
        .args(args)
        .args(["--json", "--timeout", "20s"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "hxlab trace {args:?} failed: {err}\n{out}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn is_frame(e: &Value, dir: &str, ty: &str) -> bool {
    e["event"] == "frame" && e["dir"] == dir && e["type"] == ty
}

fn position(events: &[Value], f: impl Fn(&Value) -> bool) -> Option<usize> {
    events.iter().position(f)
}

fn header<'a>(e: &'a Value, name: &str) -> Option<&'a str> {
    e["headers"]
        .as_array()?
        .iter()
        .find(|h| h[0] == name)
        .and_then(|h| h[1].as_str())
}

fn summary(events: &[Value]) -> &Value {
    events
        .iter()
        .find(|e| e["event"] == "summary")
        .expect("a summary event")
}

/// The frames of a two-request (-m 2) h2 exchange: preface and client SETTINGS first, HEADERS
/// on streams 1 and 3 both sent before the first response DATA, responses on the same ids.
fn assert_two_request_h2_order(events: &[Value], path: &str) {
    let preface = position(events, |e| e["event"] == "preface").expect("client preface");
    // Each side's first frame is its SETTINGS (RFC 9113 §3.4); how the two directions
    // interleave depends on timing (an h2c server sends its SETTINGS at once).
    let first_sent =
        position(events, |e| e["event"] == "frame" && e["dir"] == "send").expect("sent frames");
    assert!(
        preface < first_sent,
        "the preface comes before any frame the client sends"
    );
    let f = &events[first_sent];
    assert!(
        is_frame(f, "send", "SETTINGS") && f["ack"] == false,
        "the client's first frame is SETTINGS: {f}"
    );
    let first_recv =
        position(events, |e| e["event"] == "frame" && e["dir"] == "recv").expect("received frames");
    let f = &events[first_recv];
    assert!(
        is_frame(f, "recv", "SETTINGS") && f["ack"] == false,
        "the server's first frame is SETTINGS: {f}"
    );
    let sent: Vec<(usize, u64)> = events
        .iter()
        .enumerate()
        .filter(|(_, e)| is_frame(e, "send", "HEADERS"))
        .map(|(i, e)| (i, e["stream_id"].as_u64().expect("stream id")))
        .collect();
    assert_eq!(
        sent.iter().map(|s| s.1).collect::<Vec<_>>(),
        [1, 3],
        "request HEADERS on streams 1 and 3"
    );
    for (i, _) in &sent {
        assert_eq!(header(&events[*i], ":path"), Some(path));
        assert_eq!(header(&events[*i], ":method"), Some("GET"));
        assert!(events[*i]["header_block_size"].as_u64().unwrap_or(0) > 0);
    }
    // The second block repeats the first from the HPACK dynamic table: smaller on the wire,
    // the same fields once decoded (the decoder's table follows the client's encoder).
    let (a, b) = (&events[sent[0].0], &events[sent[1].0]);
    assert_eq!(a["headers"], b["headers"]);
    assert!(
        b["header_block_size"].as_u64() < a["header_block_size"].as_u64(),
        "{a}\n{b}"
    );
    let first_data = position(events, |e| is_frame(e, "recv", "DATA")).expect("response DATA");
    assert!(
        sent[1].0 < first_data,
        "the second HEADERS left before the first response DATA"
    );
    for sid in [1, 3] {
        let h = position(events, |e| {
            is_frame(e, "recv", "HEADERS") && e["stream_id"] == sid
        })
        .unwrap_or_else(|| panic!("response HEADERS on stream {sid}"));
        assert_eq!(header(&events[h], ":status"), Some("200"));
        assert!(h > sent[0].0);
        let end = position(events, |e| {
            e["event"] == "frame"
                && e["dir"] == "recv"
                && e["stream_id"] == sid
                && e["end_stream"] == true
        });
        assert!(
            end.is_some_and(|end| end > h),
            "stream {sid} ends after its HEADERS"
        );
    }
    let server_settings = position(events, |e| {
        is_frame(e, "recv", "SETTINGS") && e["ack"] == false
    });
    assert!(server_settings.is_some(), "server SETTINGS");
    assert!(
        position(events, |e| is_frame(e, "send", "SETTINGS")
            && e["ack"] == true)
        .is_some(),
        "client ACKs"
    );
}

#[test]
fn nghttpd_h2_two_requests_push_and_h2c() {
    let Some(tls) = Peer::nghttpd(true) else {
        return;
    };
    let base = format!("https://127.0.0.1:{}", tls.port);
    let cert = tls.cert();
    let cacert = cert.to_str().expect("utf-8 path");

    // -m 2 on a 100 kB object: interleaving, flow control (WINDOW_UPDATE), GOAWAY at the end.
    let url = format!("{base}/big");
    let ev = trace_json(&[
        &url,
        "-m",
        "2",
        "--cacert",
        cacert,
        "-H",
        "x-trace-test: yes",
    ]);
    assert_two_request_h2_order(&ev, "/big");
    let tls_ev = ev.iter().find(|e| e["event"] == "tls").expect("tls event");
    assert_eq!(tls_ev["alpn"], "h2");
    assert!(
        tls_ev["version"]
            .as_str()
            .unwrap_or("")
            .starts_with("TLSv1_"),
        "{tls_ev}"
    );
    assert!(
        tls_ev["cipher"].as_str().unwrap_or("").starts_with("TLS"),
        "{tls_ev}"
    );
    let h = ev
        .iter()
        .find(|e| is_frame(e, "send", "HEADERS"))
        .expect("HEADERS");
    assert_eq!(
        header(h, "x-trace-test"),
        Some("yes"),
        "-H goes into the request"
    );
    assert!(ev
        .iter()
        .any(|e| is_frame(e, "send", "WINDOW_UPDATE")
            && e["window_size_increment"].as_u64() > Some(0)));
    assert!(ev
        .iter()
        .any(|e| is_frame(e, "send", "GOAWAY") && e["error"] == "NO_ERROR"));
    let bytes: u64 = ev
        .iter()
        .filter(|e| e["event"] == "response")
        .map(|e| e["body_bytes"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(bytes, 200_000);
    // DATA lengths on the wire add up to the bodies.
    let data: u64 = ev
        .iter()
        .filter(|e| is_frame(e, "recv", "DATA"))
        .map(|e| e["length"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(data, 200_000);
    assert_eq!(summary(&ev)["protocol"], "h2");

    // Without --push the client says ENABLE_PUSH=0 and nothing is promised.
    let index = format!("{base}/");
    let ev = trace_json(&[&index, "--cacert", cacert]);
    let s = ev
        .iter()
        .find(|e| is_frame(e, "send", "SETTINGS"))
        .expect("client SETTINGS");
    assert!(
        s["settings"]
            .as_array()
            .expect("list")
            .iter()
            .any(|x| x["id"] == 2 && x["value"] == 0),
        "{s}"
    );
    assert!(!ev.iter().any(|e| is_frame(e, "recv", "PUSH_PROMISE")));

    // With --push: PUSH_PROMISE on stream 1 promising an even stream with the pushed request.
    let ev = trace_json(&[&index, "--cacert", cacert, "--push"]);
    let pp = ev
        .iter()
        .find(|e| is_frame(e, "recv", "PUSH_PROMISE"))
        .expect("PUSH_PROMISE");
    assert_eq!(pp["stream_id"], 1);
    let promised = pp["promised_stream_id"].as_u64().expect("promised id");
    assert!(
        promised > 0 && promised % 2 == 0,
        "server streams are even: {promised}"
    );
    assert_eq!(header(pp, ":path"), Some("/style.css"));
    assert!(ev
        .iter()
        .any(|e| is_frame(e, "recv", "HEADERS") && e["stream_id"] == promised));
    assert!(ev
        .iter()
        .any(|e| e["event"] == "response" && e["pushed"] == true && e["stream_id"] == promised));
    assert_eq!(summary(&ev)["pushed"], 1);

    // h2c with prior knowledge against nghttpd --no-tls.
    let Some(plain) = Peer::nghttpd(false) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", plain.port);
    let ev = trace_json(&[&url, "--proto", "h2c", "-m", "2"]);
    assert_two_request_h2_order(&ev, "/");
    assert!(!ev.iter().any(|e| e["event"] == "tls"), "h2c has no TLS");
    assert_eq!(summary(&ev)["protocol"], "h2c");

    // HTTP/1.1 to that h2c-only server: its SETTINGS frame is recognised and named.
    let mut cmd = Command::new(hxlab());
    cmd.args(["trace", &url, "--proto", "h1", "--timeout", "20s"]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("HTTP/2 SETTINGS frame"), "{out}");
    assert!(err.contains("try --proto h2c"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn nginx_without_http2_shows_the_fallback() {
    let Some(nginx) = Peer::nginx_h1_only() else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/", nginx.port);
    let cert = nginx.cert();
    let ev = trace_json(&[
        &url,
        "--proto",
        "h2",
        "--cacert",
        cert.to_str().expect("utf-8"),
        "-m",
        "2",
    ]);
    let tls = position(&ev, |e| e["event"] == "tls").expect("tls event");
    assert_eq!(ev[tls]["alpn"], "http/1.1");
    assert_eq!(
        ev[tls]["alpn_offered"],
        serde_json::json!(["h2", "http/1.1"])
    );
    let fb = position(&ev, |e| e["event"] == "fallback").expect("a fallback line");
    assert!(fb > tls);
    assert_eq!(ev[fb]["using"], "http/1.1");
    assert!(
        !ev.iter()
            .any(|e| e["event"] == "frame" || e["event"] == "preface"),
        "no HTTP/2 was spoken"
    );
    let reqs: Vec<usize> = ev
        .iter()
        .enumerate()
        .filter(|(_, e)| e["event"] == "h1_request")
        .map(|(i, _)| i)
        .collect();
    let resps: Vec<usize> = ev
        .iter()
        .enumerate()
        .filter(|(_, e)| e["event"] == "h1_response")
        .map(|(i, _)| i)
        .collect();
    assert_eq!((reqs.len(), resps.len()), (2, 2));
    // HTTP/1.1 without pipelining: request, response, request, response.
    assert!(fb < reqs[0] && reqs[0] < resps[0] && resps[0] < reqs[1] && reqs[1] < resps[1]);
    assert_eq!(ev[reqs[0]]["line"], "GET / HTTP/1.1");
    assert_eq!(ev[resps[0]]["status"], 200);
    let s = summary(&ev);
    assert_eq!(s["protocol"], "h1");
    assert_eq!(s["fell_back"], true);

    // --resume: a second connection resumes the first one's TLS session.
    let ev = trace_json(&[&url, "--cacert", cert.to_str().expect("utf-8"), "--resume"]);
    let tls: Vec<&Value> = ev.iter().filter(|e| e["event"] == "tls").collect();
    assert_eq!(tls.len(), 2);
    assert_eq!(
        (&tls[0]["resumed"], &tls[1]["resumed"]),
        (&Value::Bool(false), &Value::Bool(true))
    );
    assert_eq!(summary(&ev)["resumed"], true);
    assert_eq!(ev.iter().filter(|e| e["event"] == "response").count(), 2);

    // h2c prior knowledge to an HTTP/1.1-only port: the 400 status line, then one clear error.
    let url = format!("http://127.0.0.1:{}/", nginx.plain_port);
    let mut cmd = Command::new(hxlab());
    cmd.args([
        "trace",
        &url,
        "--proto",
        "h2c",
        "--json",
        "--timeout",
        "20s",
    ]);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.contains("HTTP/1.1 400"), "{out}");
    assert!(err.contains("answered in HTTP/1.1"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn hxlab_serve_h2_push_page_and_h3() {
    let s = Server::start(&[]);
    let cert = s.cert();
    let cacert = cert.to_str().expect("utf-8");
    let tls = s.ready.tls.to_string();

    let url = format!("https://{tls}/bytes/20000");
    let ev = trace_json(&[&url, "-m", "2", "--cacert", cacert]);
    assert_two_request_h2_order(&ev, "/bytes/20000");
    // hxlab serve advertises its HTTP/3 port; the trace points at it.
    assert!(
        ev.iter()
            .any(|e| e["event"] == "info"
                && e["alt_svc"].as_str().is_some_and(|a| a.contains("h3="))),
        "an Alt-Svc h3 hint"
    );

    let url = format!("https://{tls}/page?n=3&push=1");
    let ev = trace_json(&[&url, "--cacert", cacert, "--push"]);
    let promises: Vec<&Value> = ev
        .iter()
        .filter(|e| is_frame(e, "recv", "PUSH_PROMISE"))
        .collect();
    assert_eq!(promises.len(), 3, "three pushed resources");
    let mut promised: Vec<u64> = promises
        .iter()
        .map(|p| p["promised_stream_id"].as_u64().expect("id"))
        .collect();
    promised.sort();
    promised.dedup();
    assert_eq!(promised.len(), 3);
    for p in &promises {
        assert_eq!(p["stream_id"], 1);
        assert!(
            header(p, ":path").is_some_and(|x| x.starts_with("/bytes/")),
            "{p}"
        );
    }
    assert_eq!(summary(&ev)["pushed"], 3);

    let h3 = s.ready.h3.expect("h3 address").to_string();
    let url = format!("https://{h3}/bytes/1000");
    let ev = trace_json(&[&url, "--proto", "h3", "-m", "2", "--cacert", cacert]);
    let hs = ev
        .iter()
        .find(|e| e["event"] == "quic_handshake")
        .expect("QUIC handshake");
    assert_eq!(hs["alpn"], "h3");
    assert!(hs["handshake_ms"].as_f64().is_some_and(|ms| ms > 0.0));
    // The server's control stream: stream type 0x00, then SETTINGS on the same stream.
    let ctl = ev
        .iter()
        .find(|e| e["event"] == "h3_stream" && e["dir"] == "recv" && e["stream_type"] == 0)
        .expect("server control stream");
    let ctl_id = ctl["stream_id"].as_u64().expect("id");
    assert_eq!(ctl_id % 4, 3, "a server-initiated unidirectional stream");
    let settings = ev
        .iter()
        .find(|e| is_frame(e, "recv", "SETTINGS"))
        .expect("server SETTINGS");
    assert_eq!(settings["stream_id"], ctl_id);
    assert!(!settings["settings"].as_array().expect("list").is_empty());
    assert!(ev
        .iter()
        .any(|e| e["event"] == "h3_stream" && e["dir"] == "send" && e["stream_type"] == 0));
    assert!(
        ev.iter()
            .any(|e| e["event"] == "h3_stream" && e["stream_type"] == 2),
        "QPACK encoder stream"
    );
    // Requests on client bidi streams 0 and 4, both sent before the first response DATA.
    let sent: Vec<usize> = ev
        .iter()
        .enumerate()
        .filter(|(_, e)| is_frame(e, "send", "HEADERS"))
        .map(|(i, _)| i)
        .collect();
    let ids: Vec<&Value> = sent.iter().map(|i| &ev[*i]["stream_id"]).collect();
    assert_eq!(ids, [0, 4]);
    assert_eq!(header(&ev[sent[0]], ":path"), Some("/bytes/1000"));
    let first_data = position(&ev, |e| is_frame(e, "recv", "DATA")).expect("DATA");
    assert!(sent[1] < first_data);
    for sid in [0, 4] {
        let h = ev
            .iter()
            .find(|e| is_frame(e, "recv", "HEADERS") && e["stream_id"] == sid)
            .expect("response HEADERS");
        assert_eq!(header(h, ":status"), Some("200"));
        let n: u64 = ev
            .iter()
            .filter(|e| is_frame(e, "recv", "DATA") && e["stream_id"] == sid)
            .map(|e| e["length"].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(n, 1000, "DATA on stream {sid}");
    }
    assert_eq!(summary(&ev)["protocol"], "h3");
}

#[test]
fn bad_input_gives_one_line_and_the_right_exit_code() {
    let port = free_port();
    let refused = format!("https://127.0.0.1:{port}/");
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        (vec![refused.clone(), "-k".into()], 1, "connection refused"),
        (vec!["ftp://example/".into()], 2, "bad URL"),
        (vec!["not a url".into()], 2, "bad URL"),
        (
            vec![refused.clone(), "-H".into(), "no-colon".into()],
            2,
            "-H",
        ),
        (
            vec![refused.clone(), "--proto".into(), "h2c".into()],
            2,
            "h2c",
        ),
        (
            vec![refused.clone(), "--timeout".into(), "soon".into()],
            2,
            "--timeout",
        ),
        (vec![refused.clone(), "-m".into(), "0".into()], 2, "-m"),
        (
            vec![
                refused.clone(),
                "--proto".into(),
                "h3".into(),
                "--resume".into(),
            ],
            2,
            "--resume",
        ),
        (
            vec![
                refused.clone(),
                "--cacert".into(),
                "/nonexistent.pem".into(),
            ],
            2,
            "--cacert",
        ),
        (
            vec![refused.clone(), format!("https://127.0.0.2:{port}/")],
            2,
            "must share scheme, host and port",
        ),
    ];
    // A server that accepts TCP (the kernel backlog) but never answers: the TLS wait times out.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_url = format!("https://{}/", silent.local_addr().expect("addr"));
    // Nothing listens on this UDP port: the QUIC handshake times out.
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
    let quiet_h3 = format!("https://{}/", udp.local_addr().expect("addr"));
    drop(udp);
    let mut cases = cases;
    cases.push((
        vec![silent_url, "-k".into(), "--timeout".into(), "1s".into()],
        1,
        "TLS handshake with",
    ));
    cases.push((
        vec![
            quiet_h3,
            "-k".into(),
            "--proto".into(),
            "h3".into(),
            "--timeout".into(),
            "1s".into(),
        ],
        1,
        "QUIC",
    ));
    for (args, want, text) in cases {
        let mut cmd = Command::new(hxlab());
        cmd.arg("trace").args(&args).args(["--timeout", "5s"]);
        if args.iter().any(|a| a == "--timeout") {
            cmd = Command::new(hxlab());
            cmd.arg("trace").args(&args);
        }
        let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
        assert_eq!(code, Some(want), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.contains(text), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
