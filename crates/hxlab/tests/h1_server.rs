//! The origin's own HTTP/1.1 (crates/hxlab-serve/src/h1, on hxlab-wire's request framer)
//! against raw sockets: the framing cases tests/hostile.rs does not cover get 400 and a close,
//! requests split anywhere across writes are answered in order (bodies, HEAD, HTTP/1.0
//! keep-alive, `Expect: 100-continue`), a head over --max-header-size gets 431, an
//! unfinished head does not hold a connection past --idle-timeout, and the Host, chunk-size,
//! trailer, version and leading-CRLF rules hold on the cleartext and the TLS port alike.

mod common;

use common::{h1_exchange, Server};
use hxlab_core::Protocol;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn plain(server: &Server) -> String {
    server.ready.plain.to_string()
}

/// One response read off `c`: (status line, lower-cased head, body). `head_request`: no body.
fn response(c: &mut TcpStream, head_request: bool) -> (String, String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = c.read(&mut byte).expect("read head");
        assert_eq!(
            n,
            1,
            "closed inside a head: {}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = head.lines().next().unwrap_or("").to_string();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; if head_request { 0 } else { len }];
    c.read_exact(&mut body).expect("read body");
    (status, head, body)
}

#[test]
fn every_other_ambiguous_framing_gets_400_and_a_close() {
    let server = Server::start(&["--no-h3"]);
    let addr = plain(&server);
    let cases: &[(&str, &[u8])] = &[
        ("bare CR", b"GET /bytes/1 HTTP/1.1\r\nHost: x\rX-A: 1\r\n\r\n"),
        ("space before the colon", b"GET /bytes/1 HTTP/1.1\r\nHost : x\r\n\r\n"),
        ("space before the first field", b"GET /bytes/1 HTTP/1.1\r\n Host: x\r\n\r\n"),
        ("obs-fold with a tab", b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\t2\r\n\r\n"),
        ("a field line without a colon", b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n"),
        ("NUL in a value", b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
        ("DEL in a value", b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n"),
        ("two spaces in the request line", b"GET  /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("a non-ASCII target", b"GET /bytes/\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n"),
        (
            "Transfer-Encoding gzip",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
        ),
        (
            "Transfer-Encoding gzip, chunked",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "Transfer-Encoding twice",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "Transfer-Encoding on HTTP/1.0",
            b"POST /bytes/1 HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "Transfer-Encoding before Content-Length",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        ),
        (
            "a Content-Length list",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1, 1\r\n\r\na",
        ),
        ("a signed Content-Length", b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nContent-Length: +1\r\n\r\na"),
        (
            "chunk data not followed by CRLF",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naXY0\r\n\r\n",
        ),
        (
            "a chunk size with junk after it",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\na\r\n0\r\n\r\n",
        ),
        (
            "a bare LF in the trailers",
            b"POST /bytes/1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\r\n",
        ),
    ];
    for (what, request) in cases {
        let reply = h1_exchange(&addr, request)
            .unwrap_or_else(|| panic!("{what}: the connection was kept open"));
        assert!(reply.starts_with("HTTP/1.1 400"), "{what}: {reply}");
        assert_eq!(reply.matches("HTTP/1.1 ").count(), 1, "{what}: {reply}");
        assert!(reply.contains("connection: close"), "{what}: {reply}");
    }
    // Not counted as requests; the server goes on serving.
    let stats = common::serve_stats(&addr);
    assert_eq!(
        stats.protocol(Protocol::H1).map(|p| p.requests),
        Some(0),
        "{stats:?}"
    );
    let reply = h1_exchange(
        &addr,
        b"GET /bytes/2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(reply.is_some_and(|r| r.starts_with("HTTP/1.1 200") && r.ends_with("xx")));
}

/// Requests pipelined on one connection and written a few bytes at a time, split inside
/// heads, chunk lines and bodies: every one is answered, in order, with the right body.
#[test]
fn requests_split_anywhere_are_answered_in_order() {
    let server = Server::start(&["--no-h3"]);
    let addr = plain(&server);
    let requests: &[u8] = b"GET /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n\
        POST /bytes/3 HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world\
        POST /bytes/4 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
        5;name=v\r\nabcde\r\n10\r\n0123456789abcdef\r\n0\r\nX-Trailer: 1\r\n\r\n\
        HEAD /bytes/100 HTTP/1.1\r\nHost: x\r\n\r\n\
        GET /bytes/70000 HTTP/1.1\r\nHost: x\r\n\r\n\
        \r\nGET /bytes/1?delay=20 HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut c = TcpStream::connect(&addr).expect("connect");
    c.set_nodelay(true).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for piece in requests.chunks(7) {
        c.write_all(piece).expect("send");
        std::thread::sleep(Duration::from_millis(2));
    }
    let want: &[(usize, bool)] = &[
        (5, false),
        (3, false),
        (4, false),
        (0, true),
        (70000, false),
        (1, false),
    ];
    for (i, &(len, head_request)) in want.iter().enumerate() {
        let (status, head, body) = response(&mut c, head_request);
        assert_eq!(status, "http/1.1 200 ok", "response {i}: {head}");
        assert_eq!(body.len(), len, "response {i}: {head}");
        assert!(body.iter().all(|&b| b == b'x'), "response {i}");
        if head_request {
            assert!(head.contains("content-length: 100\r\n"), "HEAD: {head}");
        }
    }
    // Still open: one more request on the same connection.
    c.write_all(b"GET /bytes/2 HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(response(&mut c, false).2, b"xx");
    let stats = common::serve_stats(&addr);
    assert_eq!(
        stats.protocol(Protocol::H1).map(|p| p.requests),
        Some(7),
        "{stats:?}"
    );
}

/// `Expect: 100-continue` gets `100 Continue` before the body is sent; HTTP/1.0 keep-alive
/// is kept (and said), HTTP/1.0 without it and `Connection: close` close after the answer.
#[test]
fn continue_and_connection_rules() {
    let server = Server::start(&["--no-h3"]);
    let addr = plain(&server);
    let mut c = TcpStream::connect(&addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(
        b"PUT /bytes/2 HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n",
    )
    .unwrap();
    let mut interim = [0u8; 25];
    c.read_exact(&mut interim).expect("100 Continue");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"data").unwrap();
    assert_eq!(response(&mut c, false).2, b"xx");

    let mut c = TcpStream::connect(&addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    for _ in 0..2 {
        c.write_all(b"GET /bytes/3 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            .unwrap();
        let (_, head, body) = response(&mut c, false);
        assert!(head.contains("connection: keep-alive"), "{head}");
        assert_eq!(body, b"xxx");
    }
    let reply = h1_exchange(&addr, b"GET /bytes/3 HTTP/1.0\r\n\r\n").expect("HTTP/1.0 closes");
    assert!(
        reply.contains("connection: close") && reply.ends_with("xxx"),
        "{reply}"
    );
}

#[test]
fn a_head_over_max_header_size_gets_431() {
    let server = Server::start(&["--no-h3", "--max-header-size", "1KiB"]);
    let addr = plain(&server);
    let mut request = b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n".to_vec();
    request.extend_from_slice(format!("X-Big: {}\r\n\r\n", "a".repeat(1100)).as_bytes());
    let reply = h1_exchange(&addr, &request).expect("closed");
    assert!(reply.starts_with("HTTP/1.1 431"), "{reply}");
    // Within the limit: served.
    let reply = h1_exchange(
        &addr,
        format!(
            "GET /bytes/1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-A: {}\r\n\r\n",
            "a".repeat(800)
        )
        .as_bytes(),
    );
    assert!(reply.is_some_and(|r| r.starts_with("HTTP/1.1 200")));
}

/// A head that never completes is closed after --idle-timeout, like an idle connection (its
/// bytes do not count as activity); a connection with a request in flight is not.
#[test]
fn an_unfinished_head_does_not_outlive_the_idle_timeout() {
    let server = Server::start(&["--no-h3", "--idle-timeout", "1s"]);
    let addr = plain(&server);
    let t0 = Instant::now();
    let mut partial = TcpStream::connect(&addr).expect("connect");
    partial
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    slow.write_all(b"GET /bytes/1?delay=2500 HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // A byte every 200 ms, never the end of the head.
    let head = b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut closed = None;
    for i in 0..40 {
        if partial.write_all(&[*head.get(i).unwrap_or(&b'a')]).is_err() {
            closed = Some(t0.elapsed());
            break;
        }
        partial
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut buf = [0u8; 64];
        match partial.read(&mut buf) {
            Ok(0) => {
                closed = Some(t0.elapsed());
                break;
            }
            Ok(_) => panic!("an unfinished head got an answer"),
            Err(_) => {}
        }
    }
    let closed = closed.expect("the unfinished head was held for 8 s");
    assert!(
        closed >= Duration::from_millis(900) && closed < Duration::from_secs(3),
        "closed after {closed:?}"
    );
    let (status, _, body) = response(&mut slow, false);
    assert_eq!((status.as_str(), body.len()), ("http/1.1 200 ok", 1));
}

/// Plain HTTP/1.1 between requests is served from the server's epoll sets (h1::Sets); a
/// request they do not answer themselves (here a 100 KiB body, sent after the head) hands the
/// connection to the task server with the requests behind it and the answers before it, and
/// the client sees one ordered stream: every answer, in order, whole, then the close it asked
/// for. Every request is counted once, and connections reuse the set's slots.
#[test]
fn a_pipeline_handed_over_mid_way_is_answered_in_order_and_counted_once() {
    let server = Server::start(&["--no-h3"]);
    let addr = plain(&server);
    let mut c = TcpStream::connect(&addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let asks: &[(&str, usize)] = &[
        ("GET /bytes/5", 5),
        ("HEAD /bytes/7", 0),
        ("GET /bytes/102400", 102_400),
        ("GET /bytes/3", 3),
        ("GET /bytes/1?delay=50", 1),
        ("GET /bytes/2", 2),
    ];
    let mut pipeline = Vec::new();
    for (line, _) in asks {
        pipeline.extend_from_slice(format!("{line} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    }
    pipeline.extend_from_slice(b"GET /bytes/4 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    c.write_all(&pipeline).expect("send the pipeline");
    for (line, len) in asks {
        let (status, head, body) = response(&mut c, line.starts_with("HEAD"));
        assert_eq!(status, "http/1.1 200 ok", "{line}");
        assert_eq!(body.len(), *len, "{line}: body");
        let declared = if line.starts_with("HEAD") { 7 } else { *len };
        assert!(
            head.contains(&format!("content-length: {declared}\r\n")),
            "{line}: {head}"
        );
    }
    let (status, head, body) = response(&mut c, false);
    assert_eq!((status.as_str(), body.len()), ("http/1.1 200 ok", 4));
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(c.read(&mut [0u8; 16]).expect("read the close"), 0);

    // 40 connections one after another, 25 requests each, one at a time: the set's slots
    // are taken and given back; every answer comes.
    for _ in 0..40 {
        let mut c = TcpStream::connect(&addr).expect("connect");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for _ in 0..25 {
            c.write_all(b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\n")
                .unwrap();
            let (status, _, body) = response(&mut c, false);
            assert_eq!((status.as_str(), body.len()), ("http/1.1 200 ok", 10));
        }
    }
    let stats = common::serve_stats(&addr);
    assert_eq!(
        stats.protocol(Protocol::H1).map(|p| p.requests),
        Some(7 + 40 * 25),
        "each request counted once: {stats:?}"
    );
}

/// A connection idle in an epoll set is closed after --idle-timeout, counted from its last
/// answer; one that keeps asking is not.
#[test]
fn an_idle_connection_in_a_set_is_closed_after_the_idle_timeout() {
    let server = Server::start(&["--no-h3", "--idle-timeout", "1s"]);
    let addr = plain(&server);
    let mut idle = TcpStream::connect(&addr).expect("connect");
    let mut busy = TcpStream::connect(&addr).expect("connect");
    for c in [&mut idle, &mut busy] {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert_eq!(response(c, false).0, "http/1.1 200 ok");
    }
    let answered = Instant::now();
    let watcher = std::thread::spawn(move || {
        let n = idle.read(&mut [0u8; 16]).expect("read the close");
        (n, answered.elapsed())
    });
    // The busy one asks every 250 ms for 2 s: it outlives the timeout twice over.
    for _ in 0..8 {
        std::thread::sleep(Duration::from_millis(250));
        busy.write_all(b"GET /bytes/1 HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert_eq!(response(&mut busy, false).0, "http/1.1 200 ok");
    }
    let (n, closed) = watcher.join().expect("the watcher");
    assert_eq!(n, 0, "the idle connection got bytes, not a close");
    assert!(
        closed >= Duration::from_millis(950) && closed < Duration::from_secs(2),
        "closed {closed:?} after its answer"
    );
    let open = common::serve_stats(&addr)
        .protocol(Protocol::H1)
        .map(|p| p.open_connections);
    // The busy connection and the one asking for the stats.
    assert_eq!(open, Some(2));
}

/// How long a request may take to be answered, and a refused connection to be closed.
const WITHIN: Duration = Duration::from_secs(5);

/// A byte stream both ways: the cleartext port's TCP, or a TLS session over TCP.
trait Conn: Read + Write {}
impl<T: Read + Write> Conn for T {}

/// The HTTP/1.1 ports: the cleartext one (classified, then epoll sets or the task server) and
/// the TLS one (ALPN http/1.1, the task server), which reach the framer by different roads.
const PORTS: [&str; 2] = ["plain", "tls"];

/// A connection to `port` ("plain" or "tls") of `server`; over TLS the handshake is done and
/// http/1.1 chosen, the server's own certificate trusted. Reads wait 250 ms at most, so the
/// callers' deadlines hold.
fn connect(server: &Server, port: &str) -> Box<dyn Conn> {
    let addr = if port == "plain" {
        server.ready.plain
    } else {
        server.ready.tls
    };
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_millis(250)))
        .expect("read timeout");
    if port == "plain" {
        return Box::new(tcp);
    }
    let pem = std::fs::read(server.cert()).expect("the server's certificate");
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots.add(cert.expect("a PEM certificate")).expect("a root");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
    let client = rustls::ClientConnection::new(std::sync::Arc::new(config), name).expect("TLS");
    let mut tls = rustls::StreamOwned::new(client, tcp);
    let deadline = Instant::now() + WITHIN;
    while tls.conn.is_handshaking() {
        match tls.conn.complete_io(&mut tls.sock) {
            Ok(_) => {}
            Err(e) if waiting(&e) && Instant::now() < deadline => {}
            Err(e) => panic!("TLS handshake: {e}"),
        }
    }
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"http/1.1"[..]), "ALPN");
    Box::new(tls)
}

/// A read that timed out (nothing yet), not an end.
fn waiting(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::{Interrupted, TimedOut, WouldBlock};
    matches!(e.kind(), WouldBlock | TimedOut | Interrupted)
}

/// Everything `c` receives within [`WITHIN`], and whether the server closed it by then.
fn read_until_closed(c: &mut dyn Conn) -> (String, bool) {
    let deadline = Instant::now() + WITHIN;
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    let closed = loop {
        match c.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if waiting(&e) => {}
            // A close without TLS close_notify, or a reset after the answer: closed as well.
            Err(_) => break true,
        }
        if Instant::now() >= deadline {
            break false;
        }
    };
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

/// The responses in `text`, in order: (status line, lower-cased head, body), each body as
/// long as its Content-Length says (or what is left).
fn responses(mut text: &str) -> Vec<(String, String, String)> {
    let mut found = Vec::new();
    while let Some((head, rest)) = text.split_once("\r\n\r\n") {
        let status = head.lines().next().unwrap_or("").to_string();
        let head = head.to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
            .min(rest.len());
        found.push((status, head, rest[..len].to_string()));
        text = &rest[len..];
    }
    found
}

/// `request` on `port` gets one answer starting `want` (`HTTP/1.1 400 `), saying
/// `Connection: close`, and the server closes the connection within [`WITHIN`].
fn refused(server: &Server, port: &str, what: &str, request: &[u8], want: &str) {
    let mut c = connect(server, port);
    c.write_all(request).expect("send");
    let (text, closed) = read_until_closed(&mut *c);
    assert!(text.starts_with(want), "{port}: {what}: {text:?}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{port}: {what}: {text:?}"
    );
    assert!(closed, "{port}: {what}: left open after {text:?}");
}

/// `request` on `port` (keep-alive, no `Connection: close`) is answered `HTTP/1.1 200 OK` with
/// `len` bytes, and the connection stays usable: a request pipelined behind it is answered
/// too, then the close it asks for comes.
fn answered(server: &Server, port: &str, what: &str, request: &[u8], len: usize) {
    let mut c = connect(server, port);
    c.write_all(request).expect("send");
    c.write_all(b"GET /bytes/2 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send the second request");
    let (text, closed) = read_until_closed(&mut *c);
    let got = responses(&text);
    assert_eq!(got.len(), 2, "{port}: {what}: {text:?}");
    assert_eq!(got[0].0, "HTTP/1.1 200 OK", "{port}: {what}: {text:?}");
    assert_eq!(got[0].2, "x".repeat(len), "{port}: {what}: {text:?}");
    assert_eq!(
        (got[1].0.as_str(), got[1].2.as_str()),
        ("HTTP/1.1 200 OK", "xx"),
        "{port}: {what}: {text:?}"
    );
    assert!(
        closed,
        "{port}: {what}: not closed after `Connection: close`"
    );
}

/// Host must be empty or `uri-host [":" port]` (RFC 9112 §3.2, RFC 3986 §3.2.2): whitespace
/// and userinfo get 400 and a close; an IPv6 literal with a port and a name with a port are
/// served.
#[test]
fn host_values_are_checked_on_both_ports() {
    let server = Server::start(&["--no-h3"]);
    for port in PORTS {
        for (what, host) in [("a space", "a b"), ("userinfo", "u@evil")] {
            let request = format!("GET /bytes/10 HTTP/1.1\r\nHost: {host}\r\n\r\n");
            refused(&server, port, what, request.as_bytes(), "HTTP/1.1 400 ");
        }
        for (what, host) in [
            ("an IPv6 literal and a port", "[::1]:8080"),
            ("a name and a port", "example.com:80"),
        ] {
            let request = format!("GET /bytes/10 HTTP/1.1\r\nHost: {host}\r\n\r\n");
            answered(&server, port, what, request.as_bytes(), 10);
        }
    }
}

/// A chunk-size line ending in whitespace (no chunk-ext ends so, RFC 9112 §7.1.1) and obs-fold
/// in the trailers (§7.1.2) get 400 and a close; whitespace before a `;` and a plain trailer
/// are taken, so it is those two the framer refuses, not extensions or trailers.
#[test]
fn chunk_size_whitespace_and_trailer_obs_fold_get_400_and_a_close() {
    let server = Server::start(&["--no-h3"]);
    let chunked = |body: &str| {
        format!("POST /bytes/10 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
    };
    for port in PORTS {
        for (what, body) in [
            ("a chunk size then a space", "3 \r\nabc\r\n0\r\n\r\n"),
            (
                "a trailer continued on a line starting with a space",
                "3\r\nabc\r\n0\r\nX-T: 1\r\n 2\r\n\r\n",
            ),
            (
                "a first trailer line starting with a space",
                "3\r\nabc\r\n0\r\n X-T: 1\r\n\r\n",
            ),
        ] {
            refused(
                &server,
                port,
                what,
                chunked(body).as_bytes(),
                "HTTP/1.1 400 ",
            );
        }
        let body = "3 ;a=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
        answered(
            &server,
            port,
            "an extension after a space, a trailer",
            chunked(body).as_bytes(),
            10,
        );
    }
}

/// The request line: one empty line before it is skipped (RFC 9112 §2.2); HTTP/1.2 is served
/// as HTTP/1.1, keep-alive included, and answered with HTTP/1.1 (RFC 9110 §2.5); another major
/// version gets 505 and a close; a version that is not `HTTP/` DIGIT `.` DIGIT gets 400 and a
/// close (RFC 9112 §2.3). On the cleartext port none of these is taken for the h2 preface.
#[test]
fn request_line_versions_and_a_leading_crlf_on_both_ports() {
    let server = Server::start(&["--no-h3"]);
    for port in PORTS {
        answered(
            &server,
            port,
            "one CRLF before the request line",
            b"\r\nGET /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\n",
            10,
        );
        answered(
            &server,
            port,
            "HTTP/1.2",
            b"GET /bytes/10 HTTP/1.2\r\nHost: x\r\n\r\n",
            10,
        );
        for (version, want) in [
            ("HTTP/2.0", "HTTP/1.1 505 "),
            ("HTTP/3.0", "HTTP/1.1 505 "),
            ("http/1.1", "HTTP/1.1 400 "),
            ("HTTP/1.10", "HTTP/1.1 400 "),
        ] {
            let request = format!("GET /bytes/10 {version}\r\nHost: x\r\n\r\n");
            refused(&server, port, version, request.as_bytes(), want);
        }
    }
}
