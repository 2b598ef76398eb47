//! Robustness: bad input to every subcommand gets one clear line and exit 1 or 2 (never a
//! panic or a hang); `hxlab serve` answers hostile peers with a 4xx or a closed connection
//! and keeps serving with bounded memory; `hxlab load` and `hxlab trace` survive hostile
//! servers run here on loopback. Every wait below is bounded.

mod common;

use common::{
    h2_frame, hxlab, run_with_timeout, tempfile_dir::TempDir, Server, Serving, ThreadServer,
};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(30);

/// Asserts that stderr is one `hxlab: error:` line (the last), or clap's usage error (exit 2:
/// that line, clap's indented details and its usage line), and that nothing panicked.
fn assert_one_error_line(what: &str, code: Option<i32>, stdout: &str, stderr: &str) {
    for text in [stdout, stderr] {
        assert!(
            !text.contains("panicked") && !text.contains("RUST_BACKTRACE"),
            "{what}: panic\n{stderr}"
        );
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let errors: Vec<&&str> = lines
        .iter()
        .filter(|l| l.starts_with("hxlab: error: "))
        .collect();
    assert_eq!(
        errors.len(),
        1,
        "{what}: expected exactly one `hxlab: error:` line\n{stderr}"
    );
    if lines.last() != errors.last().copied() {
        assert_eq!(code, Some(2), "{what}: lines after the error\n{stderr}");
        let at = stderr.find("hxlab: error: ").unwrap_or_default();
        common::usage_error_of(what, &stderr[at..]);
    }
}

/// Runs hxlab with `args` and checks: the expected exit code, one error line, no panic.
fn expect_failure(args: &[&str], want: i32) -> String {
    let (code, out, err) = run_with_timeout(Command::new(hxlab()).args(args), LIMIT);
    let what = format!("hxlab {}", args.join(" "));
    assert_eq!(code, Some(want), "{what}: exit code\n{out}\n{err}");
    assert_one_error_line(&what, code, &out, &err);
    err
}

#[test]
fn bad_flags_and_values_get_one_line_on_every_subcommand() {
    let dir = TempDir::new("hxlab-robust-cli");
    let d = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(d("garbage.json"), "{\"schema\": 1, \"tool_ver").expect("write");
    std::fs::write(d("garbage.toml"), "name = [\n\u{0}\u{1}").expect("write");
    std::fs::write(d("binary.bin"), [0xffu8, 0xfe, 0, 1, 2, 0x80]).expect("write");
    std::fs::write(d("not-a-cert.pem"), "hello\n").expect("write");
    std::fs::create_dir_all(d("empty")).expect("mkdir");
    // An experiment whose name would put the default results directory elsewhere.
    std::fs::write(
        d("escape.toml"),
        "name = \"../../tmp/x\"\nprotocol = [\"h1\"]\n",
    )
    .expect("write");
    std::fs::write(d("bad-factor.toml"), "protocol = [\"h1\"]\nstreams = [0]\n").expect("write");
    let (escape, bad_factor) = (d("escape.toml"), d("bad-factor.toml"));
    let missing = d("missing/nothing");
    let empty = d("empty");
    let (g_json, g_toml, bin, pem) = (
        d("garbage.json"),
        d("garbage.toml"),
        d("binary.bin"),
        d("not-a-cert.pem"),
    );
    // A port nobody listens on (bound, then released).
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let url = format!("http://127.0.0.1:{closed}/");
    let surl = format!("https://127.0.0.1:{closed}/");
    let u = url.as_str();
    let s = surl.as_str();
    let cases: Vec<(Vec<&str>, i32)> = vec![
        // serve
        (vec!["serve", "--threads", "0"], 2),
        (vec!["serve", "--threads", "-1"], 2),
        (vec!["serve", "--threads", "99999999999999999999"], 2),
        (vec!["serve", "--max-size", "5X"], 2),
        (
            vec!["serve", "--cert", "/dev/zero", "--key", "/dev/zero"],
            1,
        ),
        (vec!["serve", "--max-size", "99999999999999T"], 2),
        (vec!["serve", "--max-delay", "abc"], 2),
        (vec!["serve", "--max-streams", "0"], 2),
        (vec!["serve", "--max-header-size", "0"], 2),
        (vec!["serve", "--max-header-size", "1TiB"], 2),
        (vec!["serve", "--drain-timeout", "soon"], 2),
        (vec!["serve", "--bind", "not-an-ip"], 2),
        (vec!["serve", "--tls-port", "70000"], 2),
        (
            vec![
                "serve",
                "--plain-port",
                "0",
                "--tls-port",
                "0",
                "--cert",
                &missing,
                "--key",
                &missing,
            ],
            1,
        ),
        (
            vec![
                "serve",
                "--plain-port",
                "0",
                "--tls-port",
                "0",
                "--cert",
                &pem,
                "--key",
                &pem,
            ],
            1,
        ),
        (
            vec![
                "serve",
                "--plain-port",
                "0",
                "--tls-port",
                "0",
                "--dir",
                &missing,
            ],
            1,
        ),
        // load
        (vec!["load", u, "-n", "0"], 2),
        (vec!["load", u, "-n", "-1"], 2),
        (vec!["load", u, "-c", "0"], 2),
        (vec!["load", u, "-c", "99999999999"], 2),
        (vec!["load", u, "-t", "0"], 2),
        (vec!["load", u, "-t", "5000"], 2),
        (vec!["load", u, "-c", "1000000", "-n", "1"], 2),
        (vec!["load", u, "-m", "0"], 2),
        (vec!["load", u, "-D", "5parsecs"], 2),
        (vec!["load", u, "-D", "0s"], 2),
        (vec!["load", u, "--rate", "abc"], 2),
        (vec!["load", u, "--rate", "-5"], 2),
        (vec!["load", u, "--timeout", "0s"], 2),
        (vec!["load", u, "--proto", "h9"], 2),
        (vec!["load", u, "-H", "no-colon"], 2),
        (vec!["load", u, "--cc", "nope"], 2),
        (vec!["load", "ftp://127.0.0.1/"], 2),
        (vec!["load", "http:///path"], 2),
        (vec!["load", "not-a-url"], 2),
        (vec!["load", "http://[::1"], 2),
        (vec!["load", "http://127.0.0.1:99999/"], 2),
        (vec!["load", u, "--data-file", &missing], 2),
        (vec!["load", u, "-d", "literal=data"], 2),
        (vec!["load", "-i", &missing], 2),
        (vec!["load", u, "--rps", "0"], 2),
        (vec!["load", u, "--rps", "x"], 2),
        (vec!["load", u, "-p", "h3"], 2),
        (vec!["load", u, "--connect-to", "127.0.0.1:0"], 2),
        (vec!["load", u, "-T", "0s"], 2),
        (vec!["load", u, "-N", "soon"], 2),
        (
            vec!["load", u, "--log-file", "/nonexistent-dir/requests.log"],
            2,
        ),
        (vec!["load", u, "-r", "10"], 2),
        (vec!["load", s, "--cacert", &pem], 2),
        (vec!["load", s, "--cacert", &missing], 2),
        (vec!["load", u, "-n", "1"], 1),
        // Endless or huge files are refused at a size cap, not read until memory runs out.
        (vec!["load", u, "--data-file", "/dev/zero"], 2),
        (vec!["load", "--config", "/dev/zero"], 2),
        (vec!["load", s, "--cacert", "/dev/zero"], 2),
        (vec!["load", u, "--timeout", "-1s"], 2),
        (vec!["link", "--down-trace", "/dev/zero", "--", "true"], 2),
        (vec!["run", "/dev/zero"], 2),
        (vec!["merge", "/dev/zero"], 2),
        // link (all rejected before any namespace is made)
        (vec!["link", "--delay", "abc", "--", "true"], 2),
        (vec!["link", "--delay", "-5ms", "--", "true"], 2),
        (vec!["link", "--delay", "999999h", "--", "true"], 2),
        (vec!["link", "--loss", "150%", "--", "true"], 2),
        (vec!["link", "--loss", "ge:1,2", "--", "true"], 2),
        (vec!["link", "--down", "0mbit", "--", "true"], 2),
        (vec!["link", "--down", "10parsecs", "--", "true"], 2),
        (vec!["link", "--queue", "0p", "--", "true"], 2),
        (vec!["link", "--aqm", "red", "--", "true"], 2),
        (vec!["link", "--profile", "nope", "--", "true"], 2),
        (vec!["link", "--down-trace", &missing, "--", "true"], 2),
        (vec!["link", "--down-trace", &bin, "--", "true"], 2),
        (vec!["link"], 2),
        // run / compare / report
        (vec!["run", &missing], 2),
        (vec!["run", &g_toml], 2),
        (vec!["run", &bin], 2),
        (vec!["run", "--scenario", "nope"], 2),
        (vec!["run", &escape, "--dry-run"], 2),
        (vec!["run", &bad_factor, "--dry-run"], 2),
        (vec!["run", "--scenario", "compare", "--timeout", "abc"], 2),
        (
            vec!["run", "--scenario", "compare", "-r", "0", "--dry-run"],
            2,
        ),
        (vec!["compare", "-r", "0"], 2),
        (vec!["compare", "-r", "99999999999999999999"], 2),
        (vec!["compare", "--set", "nonsense=1"], 2),
        (vec!["compare", "--set", "protocol=h9"], 2),
        (vec!["compare", "--set", "no-equals"], 2),
        (vec!["compare", "--warm-up", "abc"], 2),
        (vec!["report", &missing], 2),
        (vec!["report", &empty], 2),
        // merge
        (vec!["merge"], 2),
        (vec!["merge", &missing], 2),
        (vec!["merge", &g_json], 2),
        (vec!["merge", &bin], 2),
        // page (rejected before Chromium starts)
        (vec!["page", "--proto", "h2", "--runs", "0", u], 2),
        (vec!["page", "--proto", "h9", u], 2),
        (vec!["page", "--proto", "h2", "--synthetic", "n=abc"], 2),
        (
            vec!["page", "--proto", "h2", "--synthetic", "n=1000000000"],
            2,
        ),
        (vec!["page", "--proto", "h2", "ftp://x/"], 2),
        (vec!["page", "--proto", "h2", "http:///x"], 2),
        (vec!["page", "--proto", "h2", "--timeout", "0s", u], 2),
        (vec!["page", "--proto", "h2", "--delay", "abc", u], 2),
        (vec!["page", "--proto", "h2", "--spki", "!!!", u], 2),
        (vec!["page", "--proto", "h2", "--chromium", &missing, u], 1),
        // trace
        (vec!["trace", "ftp://x/"], 2),
        (vec!["trace", "http:///x"], 2),
        (vec!["trace", "not-a-url"], 2),
        (vec!["trace", "http://127.0.0.1:99999/"], 2),
        (vec!["trace", u, "--proto", "h9"], 2),
        (vec!["trace", u, "-m", "0"], 2),
        (vec!["trace", u, "-m", "99999999"], 2),
        (vec!["trace", u, "--timeout", "abc"], 2),
        (vec!["trace", u, "-H", "bad"], 2),
        (vec!["trace", s, "--cacert", &pem], 2),
        (vec!["trace", s, "--cacert", &missing], 2),
        (vec!["trace", u], 1),
    ];
    for (args, want) in &cases {
        expect_failure(args, *want);
    }
}

// ---------------------------------------------------------------------------------------
// Raw clients against `hxlab serve`

fn connect(addr: SocketAddr) -> TcpStream {
    let c = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    c.set_write_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c
}

/// Reads until the peer closes or `limit` passes, keeping at most `cap` bytes. Returns the
/// bytes and whether the peer closed (EOF or reset).
fn read_until_closed(c: &mut TcpStream, limit: Duration, cap: usize) -> (Vec<u8>, bool) {
    let deadline = Instant::now() + limit;
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    while Instant::now() < deadline {
        match c.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => {
                if got.len() < cap {
                    got.extend_from_slice(&buf[..n.min(cap - got.len())]);
                }
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (got, true),
        }
    }
    (got, false)
}

/// One raw HTTP/1.1 exchange: returns (status, body) of a response the server must close.
fn raw_h1(addr: SocketAddr, request: &[u8]) -> (u16, String) {
    let mut c = connect(addr);
    c.write_all(request).expect("send");
    let (got, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 20);
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(closed, "server did not close after {request:?}: {text}");
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "no status line for {:?}: {text:?}",
                String::from_utf8_lossy(request)
            )
        });
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

fn get(addr: SocketAddr, target: &str) -> (u16, String) {
    raw_h1(
        addr,
        format!("GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
}

fn assert_serves_normally(addr: SocketAddr) {
    let (status, body) = get(addr, "/bytes/10");
    assert_eq!(
        (status, body.len()),
        (200, 10),
        "normal request after probes"
    );
}

#[test]
fn serve_answers_bad_parameters_with_4xx_one_line() {
    let site = TempDir::new("hxlab-robust-site");
    std::fs::write(site.path().join("ok.txt"), "fine\n").expect("write");
    let dir = site.path().display().to_string();
    let server = Server::start(&["--dir", &dir]);
    let plain = server.ready.plain;
    let cases = [
        "/bytes/-1",
        "/bytes/99999999999T",
        "/bytes/abc",
        "/bytes/1M?delay=-5",
        "/delay/abc",
        "/delay/99999999",
        "/delay/-1",
        "/status/999",
        "/status/abc",
        "/status/99999999999999999999",
        "/option?size=-1",
        "/option?size=abc",
        "/option?size=1e30",
        "/option?size=NaN",
        "/option?size=1&delay=abc",
        "/bytes/1?delay=abc",
        "/bytes/1?delay=99999999",
        "/page?n=1&delay=-1",
        "/page?n=1&size=-5",
        "/page?n=1&push=maybe",
        "/page?n=1000000",
        "/page?n=-1",
        "/page?size=huge",
        "/static/../../etc/passwd",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2fetc%2fpasswd",
        "/static/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/static/%252e%252e/etc/passwd",
        "/static//etc/passwd",
        "/static/ok.txt/../../../etc/passwd",
        "/static/%00",
    ];
    for target in cases {
        let (status, body) = get(plain, target);
        assert!(
            (400..500).contains(&status),
            "{target}: expected 4xx, got {status}: {body}"
        );
        assert!(
            !body.contains("root:"),
            "{target}: leaked a file outside --dir"
        );
        let trimmed = body.trim_end();
        assert!(
            !trimmed.is_empty() && !trimmed.contains('\n') && trimmed.len() < 300,
            "{target}: body must be one line: {body:?}"
        );
    }
    let (status, body) = get(plain, "/static/ok.txt");
    assert_eq!((status, body.as_str()), (200, "fine\n"));
    assert_serves_normally(plain);
}

#[test]
fn serve_closes_malformed_and_oversized_requests() {
    let server = Server::start(&[]);
    let plain = server.ready.plain;
    // Not HTTP at all: closed without an answer (RFC 9113 section 3.4 for a bad preface).
    for bad in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"\x00\x01\x02\x03\r\n\r\n",
    ] {
        let mut c = connect(plain);
        let _ = c.write_all(bad);
        let (got, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
        let what = String::from_utf8_lossy(bad);
        assert!(closed, "{what:?}: connection left open");
        assert!(
            got.is_empty() || got.starts_with(b"HTTP/1.1 400"),
            "{what:?}: {:?}",
            String::from_utf8_lossy(&got)
        );
    }
    // A request line with a version we do not speak, or a malformed one: answered, then
    // closed (RFC 9110 section 15.6.6, RFC 9112 section 2.3), never closed silently.
    let answered: [(&[u8], &[u8]); 3] = [
        (b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", b"HTTP/1.1 505"),
        (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", b"HTTP/1.1 505"),
        (b"GET / http/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 400"),
    ];
    for (bad, want) in answered {
        let mut c = connect(plain);
        let _ = c.write_all(bad);
        let (got, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
        let what = String::from_utf8_lossy(bad);
        assert!(closed, "{what:?}: connection left open");
        assert!(
            got.starts_with(want),
            "{what:?}: {:?}",
            String::from_utf8_lossy(&got)
        );
    }
    // An HTTP/1.1 request with a malformed head: 400, then closed.
    for bad in [
        &b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"[..],
        b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET /bytes/1 HTTP/1.1\r\nBad Header Name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\n\x00\x01\x02\r\n\r\n",
    ] {
        let (status, _) = raw_h1(plain, bad);
        assert_eq!(status, 400, "{:?}", String::from_utf8_lossy(bad));
    }
    // A malformed chunked body: whatever the answer, the connection ends.
    let mut c = connect(plain);
    let _ = c.write_all(
        b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    );
    let (_, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
    assert!(closed, "bad chunk size: connection left open");
    // A header block past the 64 KiB default limit: 431 (or 400), then the connection closes.
    let mut c = connect(plain);
    let mut req = b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..2000 {
        req.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "a".repeat(100)).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    // The server may close before the whole request is written; that is fine.
    let _ = c.write_all(&req);
    let (got, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with("HTTP/1.1 431") || text.starts_with("HTTP/1.1 400"),
        "huge header: {text:?}"
    );
    assert!(closed, "huge header: connection left open");
    // Binary garbage on the plain port (which also takes h2c): closed, never a hang.
    let mut c = connect(plain);
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i * 7919 % 251) as u8).collect();
    let _ = c.write_all(&garbage);
    let (_, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
    assert!(closed, "garbage on the plain port: connection left open");
    // Garbage datagrams on the HTTP/3 port, some shaped like QUIC Initial packets with a
    // version and connection IDs but no valid protection: dropped, the server lives on.
    let h3 = server.ready.h3.expect("an h3 listener");
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp bind");
    for i in 0..300u32 {
        let len = [1usize, 20, 1200, 1500][(i % 4) as usize];
        let mut d: Vec<u8> = (0..len as u32).map(|j| (j * 131 + i * 17) as u8).collect();
        if i % 2 == 0 && len >= 20 {
            d[0] = 0xc0; // long header, Initial
            d[1..5].copy_from_slice(&1u32.to_be_bytes()); // QUIC v1
            d[5] = 8; // destination connection ID length
            d[14] = 8; // source connection ID length
        }
        let _ = udp.send_to(&d, h3);
    }
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "trace",
            &format!("https://{h3}/bytes/10"),
            "--proto",
            "h3",
            "-k",
            "--timeout",
            "10s",
        ]),
        LIMIT,
    );
    assert_eq!(
        code,
        Some(0),
        "HTTP/3 after garbage datagrams:\n{out}\n{err}"
    );
    // Garbage on the TLS port: the handshake fails and the connection closes.
    let tls = server.ready.tls;
    let mut c = connect(tls);
    let _ = c.write_all(&garbage);
    let (_, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
    assert!(closed, "garbage on the TLS port: connection left open");
    assert_serves_normally(plain);
}

/// True when `bytes` (server → client HTTP/2) contain a GOAWAY frame.
fn has_goaway(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i + 9 <= bytes.len() {
        let len = (bytes[i] as usize) << 16 | (bytes[i + 1] as usize) << 8 | bytes[i + 2] as usize;
        if bytes[i + 3] == 7 {
            return true;
        }
        i += 9 + len;
    }
    false
}

#[test]
fn serve_h2c_preface_then_garbage_frames_gets_goaway() {
    let server = Server::start(&[]);
    let plain = server.ready.plain;
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let probes: Vec<(&str, Vec<u8>)> = vec![
        // HEADERS on stream 0 instead of the client's SETTINGS.
        ("HEADERS as the first frame", h2_frame(1, 4, 0, &[0x82])),
        // A frame header announcing 16 MiB, past the 16 KiB maximum frame size.
        (
            "oversized garbage frame",
            [h2_frame(4, 0, 0, &[]), vec![0xff; 64]].concat(),
        ),
        // A SETTINGS frame with a length that is not a multiple of 6.
        ("bad SETTINGS length", h2_frame(4, 0, 0, &[0, 1, 0])),
        // DATA on stream 0.
        (
            "DATA on stream 0",
            [h2_frame(4, 0, 0, &[]), h2_frame(0, 0, 0, b"hello")].concat(),
        ),
        // A frame larger than the 16 KiB default maximum frame size.
        (
            "oversized frame",
            [h2_frame(4, 0, 0, &[]), h2_frame(0, 0, 1, &vec![0u8; 20000])].concat(),
        ),
        // HEADERS with an undecodable HPACK block.
        (
            "bad HPACK",
            [h2_frame(4, 0, 0, &[]), h2_frame(1, 5, 1, &[0xff; 32])].concat(),
        ),
    ];
    for (what, frames) in probes {
        let mut c = connect(plain);
        let _ = c.write_all(preface);
        let _ = c.write_all(&frames);
        let (got, closed) = read_until_closed(&mut c, Duration::from_secs(10), 1 << 16);
        assert!(closed, "{what}: connection left open");
        assert!(has_goaway(&got), "{what}: no GOAWAY in {got:?}");
    }
    assert_serves_normally(plain);
}

/// HPACK integer with an `n`-bit prefix (RFC 7541 section 5.1); `first` holds the flag bits.
fn hpack_int(first: u8, n: u32, mut v: usize) -> Vec<u8> {
    let max = (1usize << n) - 1;
    if v < max {
        return vec![first | v as u8];
    }
    let mut out = vec![first | max as u8];
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
    out
}

/// A literal header field without indexing, new name (RFC 7541 section 6.2.2).
fn hpack_literal(name: &str, value: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8];
    out.extend(hpack_int(0, 7, name.len()));
    out.extend_from_slice(name.as_bytes());
    out.extend(hpack_int(0, 7, value.len()));
    out.extend_from_slice(value);
    out
}

/// GET `path` on stream 1: :method GET, :scheme http, :path, :authority x.
fn h2_get_block(path: &str) -> Vec<u8> {
    let mut block = vec![0x82, 0x86];
    block.extend(hpack_int(0, 4, 4)); // literal without indexing, name :path
    block.extend(hpack_int(0, 7, path.len()));
    block.extend_from_slice(path.as_bytes());
    block.extend(hpack_int(0, 4, 1)); // name :authority
    block.extend(hpack_int(0, 7, 1));
    block.push(b'x');
    block
}

#[test]
fn serve_h2c_bounds_header_blocks_and_continuation_floods() {
    let server = Server::start(&[]);
    let plain = server.ready.plain;
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    let before = rss_kib(server.child.id());
    // One request whose header block (100 KiB) is past the 64 KiB limit, in CONTINUATIONs:
    // the stream is refused (431 or RST_STREAM) or the connection ended; never a 200.
    {
        let mut c = connect(plain);
        let mut block = h2_get_block("/bytes/1");
        block.extend(hpack_literal("x-big", &vec![b'a'; 100 * 1024]));
        let mut wire = preface.to_vec();
        wire.extend(h2_frame(4, 0, 0, &[]));
        let pieces: Vec<&[u8]> = block.chunks(16 * 1024).collect();
        for (i, piece) in pieces.iter().enumerate() {
            let end = if i + 1 == pieces.len() { 4 } else { 0 };
            let kind = if i == 0 { 1 } else { 9 };
            let flags = end | if i == 0 { 1 } else { 0 };
            wire.extend(h2_frame(kind, flags, 1, piece));
        }
        let _ = c.write_all(&wire);
        let (got, _) = read_until_closed(&mut c, Duration::from_secs(3), 1 << 20);
        let mut i = 0;
        let mut answered = false;
        while i + 9 <= got.len() {
            let len = (got[i] as usize) << 16 | (got[i + 1] as usize) << 8 | got[i + 2] as usize;
            let stream =
                u32::from_be_bytes([got[i + 5], got[i + 6], got[i + 7], got[i + 8]]) & 0x7fff_ffff;
            assert!(
                !(got[i + 3] == 0 && stream == 1),
                "oversized header block got a body"
            );
            if (got[i + 3] == 1 || got[i + 3] == 3) && stream == 1 || got[i + 3] == 7 {
                answered = true;
            }
            i += 9 + len;
        }
        assert!(
            answered,
            "oversized header block: no 431, RST_STREAM or GOAWAY: {got:?}"
        );
    }
    // CONTINUATION flood: a header block that never ends (RFC 9113 has no limit on the
    // number of CONTINUATION frames). The server must cut it off, not buffer it.
    {
        let mut c = connect(plain);
        let mut wire = preface.to_vec();
        wire.extend(h2_frame(4, 0, 0, &[]));
        wire.extend(h2_frame(1, 1, 1, &h2_get_block("/bytes/1")));
        let _ = c.write_all(&wire);
        let fragment = hpack_literal("x-flood", &[b'f'; 1000]);
        let frame = h2_frame(9, 0, 1, &fragment);
        let started = Instant::now();
        let mut sent = 0usize;
        let mut cut_off = false;
        while started.elapsed() < Duration::from_secs(10) && sent < 256 << 20 {
            if c.write_all(&frame).is_err() {
                cut_off = true;
                break;
            }
            sent += frame.len();
        }
        if !cut_off {
            let (_, closed) = read_until_closed(&mut c, Duration::from_secs(5), 1 << 20);
            cut_off = closed;
        }
        assert!(cut_off, "CONTINUATION flood of {sent} bytes was accepted");
    }
    let after = rss_kib(server.child.id());
    assert!(
        after < before + 64 * 1024,
        "server RSS grew from {before} KiB to {after} KiB"
    );
    assert_serves_normally(plain);
}

/// VmRSS of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn serve_memory_stays_bounded_when_clients_abandon_huge_bodies() {
    let server = Server::start(&[]);
    let plain = server.ready.plain;
    assert_serves_normally(plain);
    let before = rss_kib(server.child.id());
    assert!(before > 0, "no VmRSS for the server");
    for round in 0..20 {
        let mut c = connect(plain);
        c.write_all(b"GET /bytes/100G HTTP/1.1\r\nHost: x\r\n\r\n")
            .expect("send");
        // Read the start of the body, then vanish without reading the rest.
        let mut got = 0usize;
        let mut buf = [0u8; 65536];
        let deadline = Instant::now() + Duration::from_secs(5);
        while got < 1 << 20 && Instant::now() < deadline {
            match c.read(&mut buf) {
                Ok(0) => panic!("round {round}: server closed the 100G body early"),
                Ok(n) => got += n,
                Err(_) => {}
            }
        }
        assert!(got >= 1 << 20, "round {round}: only {got} bytes in 5 s");
        // Keep a few abandoned-but-open connections too: they must not buffer either.
        if round % 5 == 0 {
            std::mem::forget(c);
        } else {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_kib(server.child.id());
    assert!(
        after < before + 64 * 1024,
        "server RSS grew from {before} KiB to {after} KiB"
    );
    assert_serves_normally(plain);
}

#[test]
fn serve_closes_slowloris_stalled_h2_and_silent_tls_clients() {
    let server = Server::start(&[]);
    let plain = server.ready.plain;
    let tls = server.ready.tls;
    // A TLS client that never sends a ClientHello: the 10 s handshake limit closes it.
    let silent = std::thread::spawn(move || {
        let mut c = connect(tls);
        let started = Instant::now();
        let (_, closed) = read_until_closed(&mut c, Duration::from_secs(25), 1024);
        (closed, started.elapsed())
    });
    // HTTP/2 peers that stall: only the preface, or a frame header whose payload never
    // comes. The idle limit sends GOAWAY after 15 s and drops the connection 15 s later.
    let stalled_h2: Vec<_> = [
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(),
        [
            &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
            &h2_frame(4, 0, 0, &[]),
            &[0, 0x10, 0, 0, 0, 0, 0, 0, 1, b'x'],
        ]
        .concat(),
    ]
    .into_iter()
    .map(|bytes| {
        std::thread::spawn(move || {
            let mut c = connect(plain);
            let _ = c.write_all(&bytes);
            let started = Instant::now();
            let (got, closed) = read_until_closed(&mut c, Duration::from_secs(45), 1 << 16);
            (closed, has_goaway(&got), started.elapsed())
        })
    })
    .collect();
    // Slowloris: one byte of a request head per second. docs/serve.md: an idle HTTP/1.1
    // connection is closed after 15–30 s; a head that never completes is idle.
    let mut c = connect(plain);
    let started = Instant::now();
    let head = b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut closed_after = None;
    let mut i = 0usize;
    while started.elapsed() < Duration::from_secs(45) {
        let byte = head.get(i).copied().unwrap_or(b'a');
        i += 1;
        if c.write_all(&[byte]).is_err() {
            closed_after = Some(started.elapsed());
            break;
        }
        let (_, closed) = read_until_closed(&mut c, Duration::from_secs(1), 4096);
        if closed {
            closed_after = Some(started.elapsed());
            break;
        }
    }
    let took = closed_after.expect("slowloris connection still open after 45 s");
    assert!(
        took <= Duration::from_secs(40),
        "slowloris held for {took:?}"
    );
    let (closed, took) = silent.join().expect("silent TLS thread");
    assert!(closed, "silent TLS client still open after {took:?}");
    assert!(
        took <= Duration::from_secs(20),
        "silent TLS client held {took:?}"
    );
    for h in stalled_h2 {
        let (closed, goaway, took) = h.join().expect("stalled h2 thread");
        assert!(closed, "stalled HTTP/2 peer still open after {took:?}");
        assert!(goaway, "stalled HTTP/2 peer got no GOAWAY");
        assert!(
            took <= Duration::from_secs(40),
            "stalled HTTP/2 peer held {took:?}"
        );
    }
    assert_serves_normally(plain);
}

// ---------------------------------------------------------------------------------------
// Hostile servers for `hxlab load` and `hxlab trace`

#[derive(Clone, Copy, Debug)]
enum Hostile {
    /// Accepts, reads, never answers.
    Silent,
    /// Accepts and closes at once.
    CloseAtOnce,
    /// Answers with a status line that is not HTTP.
    GarbageStatus,
    /// Promises 100000 body bytes, sends 3, closes.
    ShortBody,
    /// A header line that never ends.
    EndlessHeader,
    /// A chunked body that never ends.
    EndlessChunked,
    /// h2c: SETTINGS, then a 16 MB header block (HEADERS and CONTINUATIONs).
    H2HugeHeaderBlock,
}

/// A hostile HTTP/1.1 server on loopback; stops (and its threads end) when dropped.
fn hostile_server(kind: Hostile) -> ThreadServer {
    ThreadServer::start(Duration::from_secs(60), move |c, serving| {
        misbehave(kind, c, serving)
    })
}

/// The URL the client under test asks a hostile server for.
fn hostile_url(server: &ThreadServer) -> String {
    format!("http://{}/x", server.addr)
}

fn misbehave(kind: Hostile, mut c: TcpStream, serving: &Serving) {
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
    let _ = c.set_write_timeout(Some(Duration::from_millis(500)));
    let running = || serving.running();
    if let Hostile::CloseAtOnce = kind {
        return;
    }
    // Read the request head (or give up after a while).
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let head_deadline = Instant::now() + Duration::from_secs(5);
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && Instant::now() < head_deadline {
        match c.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    match kind {
        Hostile::CloseAtOnce => {}
        Hostile::Silent => {
            while running() {
                if let Ok(0) = c.read(&mut buf) {
                    return;
                }
            }
        }
        Hostile::GarbageStatus => {
            let _ = c.write_all(b"BANANA 2OO NOT-HTTP\r\nfoo\r\n\r\n");
            std::thread::sleep(Duration::from_millis(200));
        }
        Hostile::ShortBody => {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nabc");
            std::thread::sleep(Duration::from_millis(100));
        }
        Hostile::EndlessHeader => {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nX-Endless: ");
            let chunk = vec![b'a'; 65536];
            while running() && c.write_all(&chunk).is_ok() {}
        }
        Hostile::H2HugeHeaderBlock => {
            let _ = c.write_all(&h2_frame(4, 0, 0, &[]));
            // A literal header whose value goes on and on: 16 MB without END_HEADERS.
            let mut first = vec![0x00, 0x01, b'x', 0x7f];
            first.extend_from_slice(&[0xff; 4]);
            first.extend_from_slice(&[0x07]);
            first.resize(16_384, b'v');
            let _ = c.write_all(&h2_frame(1, 0, 1, &first));
            let more = h2_frame(9, 0, 1, &[b'v'; 16_384]);
            for _ in 0..1024 {
                if !running() || c.write_all(&more).is_err() {
                    break;
                }
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Hostile::EndlessChunked => {
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            let mut chunk = b"10000\r\n".to_vec();
            chunk.extend_from_slice(&vec![b'z'; 65536]);
            chunk.extend_from_slice(b"\r\n");
            while running() && c.write_all(&chunk).is_ok() {}
        }
    }
}

/// Runs a command with a time limit while sampling its VmRSS; returns (code, stdout,
/// stderr, peak RSS in KiB, wall time).
fn run_sampled(cmd: &mut Command, limit: Duration) -> (Option<i32>, String, String, u64, Duration) {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hxlab");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut peak = 0;
    let code = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s.code();
        }
        peak = peak.max(rss_kib(child.id()));
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = started.elapsed();
    (
        code,
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
        peak,
        took,
    )
}

/// Parses "errors: connect 1, tls 0, timeout 0, reset 0, protocol 0, other 0".
fn error_counts(summary: &str) -> Vec<(String, u64)> {
    let line = summary
        .lines()
        .find_map(|l| l.strip_prefix("errors: "))
        .unwrap_or_else(|| panic!("no errors line in:\n{summary}"));
    line.split(", ")
        .filter_map(|part| {
            let (k, v) = part.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

#[test]
fn load_survives_hostile_servers() {
    // (behaviour, error kinds that may count the failure)
    let cases: [(Hostile, &[&str]); 7] = [
        (Hostile::Silent, &["timeout"]),
        (Hostile::CloseAtOnce, &["reset"]),
        (Hostile::GarbageStatus, &["protocol"]),
        (Hostile::ShortBody, &["reset"]),
        (Hostile::EndlessHeader, &["protocol"]),
        (Hostile::EndlessChunked, &["timeout"]),
        (Hostile::H2HugeHeaderBlock, &["protocol"]),
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .map(|(kind, kinds)| {
            std::thread::spawn(move || {
                let server = hostile_server(kind);
                let dir = TempDir::new("hxlab-robust-load");
                let json = dir.path().join("result.json");
                let proto = match kind {
                    Hostile::H2HugeHeaderBlock => "h2c",
                    _ => "h1",
                };
                let (code, out, err, peak, took) = run_sampled(
                    Command::new(hxlab()).args([
                        "load",
                        "--proto",
                        proto,
                        &hostile_url(&server),
                        "-n",
                        "2",
                        "-c",
                        "1",
                        "--timeout",
                        "2s",
                        "--connect-timeout",
                        "2s",
                        "--no-progress",
                        "--json",
                        &json.display().to_string(),
                    ]),
                    Duration::from_secs(40),
                );
                let what = format!("load vs {kind:?}");
                assert_eq!(
                    code,
                    Some(1),
                    "{what}: no request can succeed\n{out}\n{err}"
                );
                assert_one_error_line(&what, code, &out, &err);
                assert!(took < Duration::from_secs(25), "{what}: took {took:?}");
                assert!(peak < 300 * 1024, "{what}: peak RSS {peak} KiB");
                // The partial result is printed and written to --json.
                let summary = format!("{out}{err}");
                let counts = error_counts(&summary);
                let counted: u64 = counts
                    .iter()
                    .filter(|(k, _)| kinds.contains(&k.as_str()))
                    .map(|(_, v)| v)
                    .sum();
                assert!(
                    counted >= 1,
                    "{what}: errors not counted as {kinds:?}: {counts:?}\n{summary}"
                );
                let text = std::fs::read_to_string(&json)
                    .unwrap_or_else(|e| panic!("{what}: no --json result: {e}\n{summary}"));
                let result: serde_json::Value = serde_json::from_str(&text).expect("json");
                assert_eq!(result["requests_succeeded"], 0, "{what}");
            })
        })
        .collect();
    for h in handles {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
}

#[test]
fn trace_survives_hostile_servers() {
    let kinds = [
        Hostile::Silent,
        Hostile::CloseAtOnce,
        Hostile::GarbageStatus,
        Hostile::ShortBody,
        Hostile::EndlessHeader,
        Hostile::EndlessChunked,
    ];
    let handles: Vec<_> = kinds
        .into_iter()
        .map(|kind| {
            std::thread::spawn(move || {
                let server = hostile_server(kind);
                let (code, out, err, peak, took) = run_sampled(
                    Command::new(hxlab()).args(["trace", &hostile_url(&server), "--timeout", "2s"]),
                    Duration::from_secs(40),
                );
                let what = format!("trace vs {kind:?}");
                assert_eq!(code, Some(1), "{what}\n{out}\n{err}");
                assert_one_error_line(&what, code, &out, &err);
                assert!(took < Duration::from_secs(20), "{what}: took {took:?}");
                assert!(peak < 300 * 1024, "{what}: peak RSS {peak} KiB");
            })
        })
        .collect();
    for h in handles {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Result files: merge and report

fn write_result(path: &std::path::Path, schema: u32) {
    let r = hxlab_core::RunResult {
        schema,
        requests_started: 10,
        requests_done: 10,
        requests_succeeded: 10,
        ..Default::default()
    };
    std::fs::write(path, serde_json::to_string(&r).expect("json")).expect("write");
}

#[test]
fn merge_rejects_damaged_and_foreign_results() {
    let dir = TempDir::new("hxlab-robust-merge");
    let p = |n: &str| dir.path().join(n);
    write_result(&p("good.json"), hxlab_core::result::SCHEMA_VERSION);
    write_result(&p("future.json"), hxlab_core::result::SCHEMA_VERSION + 1);
    let good = std::fs::read_to_string(p("good.json")).expect("read");
    std::fs::write(p("truncated.json"), &good[..good.len() / 2]).expect("write");
    std::fs::write(p("lines.json"), format!("{good}\n{}\n", &good[..20])).expect("write");
    std::fs::write(p("other.json"), "{\"name\": \"not a result\"}").expect("write");
    std::fs::write(p("empty.json"), "").expect("write");
    let s = |n: &str| p(n).display().to_string();
    // The good file alone merges.
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args(["merge", &s("good.json")]),
        LIMIT,
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("\"requests_done\":10"), "{out}");
    for bad in [
        "truncated.json",
        "lines.json",
        "other.json",
        "empty.json",
        "future.json",
    ] {
        let err = expect_failure(&["merge", &s("good.json"), &s(bad)], 2);
        assert!(
            err.contains(bad),
            "{bad}: the error must name the file: {err}"
        );
    }
}

#[test]
fn report_rejects_a_corrupt_results_line() {
    let dir = TempDir::new("hxlab-robust-report");
    let meta = serde_json::json!({
        "name": "robust", "title": "robust", "workload": "throughput", "repetitions": 1,
        "factors": [{"name": "protocol", "levels": ["h1", "h2"]}],
    });
    std::fs::write(dir.path().join("experiment.json"), meta.to_string()).expect("meta");
    let d = dir.path().display().to_string();
    // No results yet: an empty report, not a failure or a panic.
    let (code, out, err) = run_with_timeout(Command::new(hxlab()).args(["report", &d]), LIMIT);
    assert!(
        !out.contains("panicked") && !err.contains("panicked"),
        "{out}\n{err}"
    );
    assert!(code == Some(0) || code == Some(1), "{err}");
    // A last line cut short (an interrupted run) is left out, and said so.
    std::fs::write(dir.path().join("results.jsonl"), "{\"experiment\":\"rob").expect("records");
    let (code, _, err) = run_with_timeout(Command::new(hxlab()).args(["report", "-q", &d]), LIMIT);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("line 1 was cut short"), "{err}");
    // A damaged line in the middle is reported with its line number.
    std::fs::write(
        dir.path().join("results.jsonl"),
        "{\"experiment\":\"robust\"\n{}\n",
    )
    .expect("records");
    let err = expect_failure(&["report", &d], 2);
    assert!(
        err.contains("results.jsonl line 1: not a result record: EOF while parsing"),
        "{err}"
    );
    // A record of the wrong shape: the file, the line and what is wrong in it.
    std::fs::write(
        dir.path().join("results.jsonl"),
        "{\"experiment\":\"robust\",\"cell\":3}\n",
    )
    .expect("records");
    let err = expect_failure(&["report", &d], 2);
    assert!(
        err.contains("results.jsonl line 1: not a result record: invalid type: integer `3`"),
        "{err}"
    );
    // A corrupt experiment.json is named as itself, not as a bad result record.
    std::fs::write(dir.path().join("experiment.json"), "{\"name\": ").expect("meta");
    let err = expect_failure(&["report", &d], 2);
    assert!(
        err.contains("experiment.json: not an experiment description: EOF while parsing"),
        "{err}"
    );
    assert!(!err.contains("result record"), "{err}");
}

#[test]
fn load_and_trace_time_out_on_silent_tls_quic_and_h2c_peers() {
    let server = hostile_server(Hostile::Silent);
    // A UDP socket on the same port that swallows QUIC Initials.
    let _udp = std::net::UdpSocket::bind(server.addr).expect("udp bind");
    let https = format!("https://{}/", server.addr);
    let http = format!("http://{}/", server.addr);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![&https, "-k"], "TLS"),
        (vec![&https, "-k", "--proto", "h3"], "QUIC"),
        (vec![&http, "--proto", "h2c"], ""),
    ];
    let handles: Vec<_> = cases
        .into_iter()
        .flat_map(|(args, what)| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            ["load", "trace"].into_iter().map(move |sub| {
                let args = args.clone();
                let what = what.to_string();
                std::thread::spawn(move || {
                    let mut cmd = Command::new(hxlab());
                    cmd.arg(sub).args(&args).args(["--timeout", "2s"]);
                    if sub == "load" {
                        cmd.args(["-n", "1", "--connect-timeout", "2s", "--no-progress"]);
                    }
                    let started = Instant::now();
                    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
                    let label = format!("{sub} {args:?}");
                    assert_eq!(code, Some(1), "{label}\n{out}\n{err}");
                    assert_one_error_line(&label, code, &out, &err);
                    assert!(
                        err.contains("timed out") || err.contains("within 2s"),
                        "{label}: not a timeout: {err}"
                    );
                    assert!(err.contains(&what), "{label}: {err}");
                    assert!(started.elapsed() < Duration::from_secs(15), "{label}");
                    if sub == "load" {
                        let counts = error_counts(&format!("{out}{err}"));
                        assert!(
                            counts.iter().any(|(k, v)| k == "timeout" && *v == 1),
                            "{label}: {counts:?}"
                        );
                    }
                })
            })
        })
        .collect();
    for h in handles {
        if let Err(e) = h.join() {
            std::panic::resume_unwind(e);
        }
    }
}
