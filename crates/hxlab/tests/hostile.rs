//! Hostile peers against `hxlab serve`: each attack runs for a bounded time while a
//! legitimate request must still be answered, and the server's CPU or memory must stay far
//! below what the attack cost before its defence (bounds chosen so a working defence passes
//! with a wide margin and a missing one fails by an order of magnitude).

mod common;

use common::{h1_exchange, h2_frame, hxlab, run_with_timeout, PeerProcess, Server};
use hxlab_core::Protocol;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// User + system CPU seconds of process `pid` so far (/proc/PID/stat, clock ticks).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read stat");
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').expect("comm") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = f[11].parse::<f64>().expect("utime") + f[12].parse::<f64>().expect("stime");
    ticks / clock_ticks()
}

fn clock_ticks() -> f64 {
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(100.0)
}

/// One GET over cleartext HTTP/1.1; true when a 200 came back within `limit`.
fn legit_get(addr: &str, limit: Duration) -> bool {
    let Ok(mut c) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(limit));
    if c.write_all(b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut text = String::new();
    let _ = c.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200")
}

/// 400 connections that send 16 of the 24 bytes of the HTTP/2 preface and stop: the
/// plain port's classifier must sleep until more bytes come, not poll (it used to re-peek
/// every millisecond: ~1.8 of 2 cores for 4,000 such sockets).
#[test]
fn a_partial_h2_preface_costs_no_cpu() {
    let server = Server::start(&["--no-h3"]);
    let addr = server.ready.plain.to_string();
    let pid = server.child.id();
    let mut held = Vec::new();
    for _ in 0..400 {
        let mut c = TcpStream::connect(&addr).expect("connect");
        c.write_all(&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..16])
            .expect("send part of the preface");
        held.push(c);
    }
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = cpu_seconds(pid);
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        legit_get(&addr, Duration::from_secs(10)),
        "a request during the attack"
    );
    let used = cpu_seconds(pid) - cpu0;
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        used < 0.1 * wall,
        "the server spent {used:.2} s of CPU in {wall:.1} s on idle half-prefaces"
    );
    // The rest of the preface still makes them h2c connections.
    for c in held.iter_mut().take(5) {
        c.write_all(&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[16..])
            .expect("rest");
        c.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).expect("SETTINGS");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut head = [0u8; 9];
        c.read_exact(&mut head).expect("the server's SETTINGS");
        assert_eq!(head[3], 4, "a SETTINGS frame first");
    }
    drop(held);
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "-n", "10", "--proto", "h2c", "-q"])
            .arg(format!("http://{addr}/bytes/10")),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
}

/// `hxlab trace -m N` above the server's SETTINGS_MAX_CONCURRENT_STREAMS (it once failed with
/// REFUSED_STREAM), on h2 and h2c: streams opened before the server's SETTINGS arrived may be
/// refused (the client assumes 100 until then, as nghttp2 does) and are sent again; every
/// request is answered.
#[test]
fn trace_keeps_to_the_servers_stream_limit() {
    let server = Server::start(&["--no-h3", "--max-streams", "10"]);
    let plain = server.ready.plain.to_string();
    let tls = server.ready.tls.to_string();
    for (proto, url) in [
        ("h2c", format!("http://{plain}/bytes/10")),
        ("h2", format!("https://{tls}/bytes/10")),
    ] {
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab()).args(["trace", "-k", "-m", "25", "--proto", proto, &url]),
            Duration::from_secs(30),
        );
        assert_eq!(code, Some(0), "{proto}: {err}");
        let all = format!("{out}{err}");
        assert!(
            all.matches("REFUSED_STREAM").count() <= 15,
            "{proto}: more refused than were sent before SETTINGS: {all}"
        );
        assert!(all.contains("25 response(s)"), "{proto}: {all}");
    }
}

/// `hxlab load -k --proto h3 -n N` for a small body at `tls`: a legitimate client is answered
/// (`what` says when, for the failure message).
fn h3_requests_answered(tls: &str, n: u32, what: &str) {
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "-k", "--proto", "h3", "-n", &n.to_string(), "-q"])
            .arg(format!("https://{tls}/bytes/10")),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{what}: {err}");
}

/// Resident memory of process `pid`, bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// A stopped process (SIGSTOP): it neither reads nor acknowledges; killed when dropped.
struct Frozen(PeerProcess);

impl Frozen {
    fn start(cmd: &mut Command, after: Duration) -> Frozen {
        let child = PeerProcess::spawn(cmd.stdout(std::process::Stdio::null()));
        std::thread::sleep(after);
        let ok = Command::new("kill")
            .args(["-STOP", &child.id().to_string()])
            .status()
            .expect("kill -STOP");
        assert!(ok.success());
        Frozen(child)
    }

    /// Starts `cmd` and stops it once `ready()` holds (checked every 100 ms, for at most
    /// `limit`; then it is stopped anyway and the caller's assertions tell).
    fn start_when(cmd: &mut Command, ready: impl Fn() -> bool, limit: Duration) -> Frozen {
        let frozen = Frozen(PeerProcess::spawn(cmd.stdout(std::process::Stdio::null())));
        let deadline = Instant::now() + limit;
        while !ready() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        // Let the transfers run a moment, so the windows fill.
        std::thread::sleep(Duration::from_millis(500));
        let ok = Command::new("kill")
            .args(["-STOP", &frozen.0.id().to_string()])
            .status()
            .expect("kill -STOP");
        assert!(ok.success());
        frozen
    }
}

/// 60 HTTP/3 clients ask for /bytes/1G with large flow-control windows, then stop reading and
/// acknowledging (the client process is stopped): each connection may pin only
/// --quic-window of the server's memory (quinn's default let each pin ~10 MB: 60 took the
/// server from 13 MB to 629 MB). Past --quic-max-connections, new connections are refused.
#[test]
fn http3_clients_that_stop_acknowledging_pin_only_the_quic_window() {
    let server = Server::start(&["--quic-window", "1MiB", "--quic-max-connections", "60"]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let pid = server.child.id();
    let before = rss(pid);
    // The client is stopped once all 60 are established (bounded wait), however slowly a
    // loaded machine runs it: the 61st below must find the limit reached.
    let open = || {
        common::serve_stats(&plain)
            .protocol(Protocol::H3)
            .map(|p| p.open_connections)
    };
    let frozen = Frozen::start_when(
        Command::new(hxlab())
            .args(["load", "-k", "--proto", "h3", "-c", "60", "-n", "60"])
            .args(["--timeout", "60s", "-q", "--no-progress"])
            .arg(format!("https://{tls}/bytes/1G")),
        || open() == Some(60),
        Duration::from_secs(30),
    );
    assert_eq!(open(), Some(60), "60 stalled HTTP/3 connections open");
    std::thread::sleep(Duration::from_secs(1));
    let grown = rss(pid).saturating_sub(before);
    assert!(
        grown < 60 * (1 << 20) + (64 << 20),
        "the server grew by {} MB for 60 stalled connections of 1 MiB",
        grown >> 20
    );
    assert!(
        legit_get(&plain, Duration::from_secs(10)),
        "h1 during the stall"
    );
    // The 61st connection is refused, with a clear error.
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .args([
                "load",
                "-k",
                "--proto",
                "h3",
                "-n",
                "1",
                "--connect-timeout",
                "5s",
            ])
            .arg(format!("https://{tls}/bytes/10")),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(1), "{err}");
    assert!(err.to_lowercase().contains("refused"), "{err}");
    drop(frozen);
}

/// An HPACK request block (static-table indices and literals, no Huffman): `method` is the
/// static index of :method (2 GET, 3 POST), then :scheme http, :path, :authority, and an
/// optional content-length.
fn h2_request(method: u8, path: &str, content_length: Option<u64>) -> Vec<u8> {
    let mut b = vec![0x80 | method, 0x86, 0x44, path.len() as u8];
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x41, 1, b'x']);
    if let Some(n) = content_length {
        let v = n.to_string();
        b.extend_from_slice(&[0x40 | 28, v.len() as u8]);
        b.extend_from_slice(v.as_bytes());
    }
    b
}

/// Reads frames until every stream in `streams` was reset by the server or `limit` passes;
/// returns the streams reset.
fn h2_resets(c: &mut TcpStream, streams: &[u32], limit: Duration) -> Vec<u32> {
    let deadline = Instant::now() + limit;
    let mut reset = Vec::new();
    let mut head = [0u8; 9];
    while reset.len() < streams.len() && Instant::now() < deadline {
        let _ = c.set_read_timeout(Some(
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(10)),
        ));
        if c.read_exact(&mut head).is_err() {
            break;
        }
        let n = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; n];
        if c.read_exact(&mut payload).is_err() {
            break;
        }
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        match head[3] {
            3 if streams.contains(&id) => reset.push(id),
            // SETTINGS without ACK: acknowledge, as a client must.
            4 if head[4] & 1 == 0 => {
                let _ = c.write_all(&h2_frame(4, 1, 0, &[]));
            }
            _ => {}
        }
    }
    reset.sort_unstable();
    reset
}

/// HTTP/2 streams the client never gives window to (SETTINGS_INITIAL_WINDOW_SIZE 0), and
/// request bodies announced and never sent, are reset after --send-timeout and
/// --body-timeout (they were held past 420 s); HTTP/1.1 answers a stalled body with 408.
#[test]
fn stalled_streams_and_bodies_time_out() {
    let server = Server::start(&["--no-h3", "--send-timeout", "2s", "--body-timeout", "2s"]);
    let addr = server.ready.plain.to_string();
    let t0 = Instant::now();
    // Zero window: the responses' HEADERS go out, their DATA never can.
    let mut stall = TcpStream::connect(&addr).expect("connect");
    stall
        .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .unwrap();
    stall
        .write_all(&h2_frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]))
        .unwrap();
    for id in [1, 3, 5] {
        stall
            .write_all(&h2_frame(1, 0x5, id, &h2_request(2, "/bytes/100000", None)))
            .unwrap();
    }
    // A body of 10 GB announced, none sent.
    let mut body = TcpStream::connect(&addr).expect("connect");
    body.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    body.write_all(&h2_frame(4, 0, 0, &[])).unwrap();
    body.write_all(&h2_frame(
        1,
        0x4,
        1,
        &h2_request(3, "/bytes/10", Some(10_000_000_000)),
    ))
    .unwrap();
    // The same on HTTP/1.1.
    let mut h1 = TcpStream::connect(&addr).expect("connect");
    h1.write_all(b"POST /bytes/10 HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000000\r\n\r\n")
        .unwrap();
    assert!(
        legit_get(&addr, Duration::from_secs(10)),
        "a request meanwhile"
    );

    let limit = Duration::from_secs(20);
    assert_eq!(
        h2_resets(&mut stall, &[1, 3, 5], limit),
        [1, 3, 5],
        "zero-window streams reset"
    );
    assert_eq!(h2_resets(&mut body, &[1], limit), [1], "stalled body reset");
    h1.set_read_timeout(Some(limit)).unwrap();
    let mut text = String::new();
    let _ = h1.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    // Each after its timeout, not at once.
    assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
}

/// A server killed mid-run sends no RST over UDP: HTTP/3 load must notice the silence (its
/// keep-alive PINGs go unanswered for --connect-timeout) and count the failures, instead of
/// running out -D with 0 errors (or, with -n, waiting another 40 s).
#[test]
fn http3_load_notices_a_dead_server() {
    let server = Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let pid = server.child.id();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    });
    let t0 = Instant::now();
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "-k", "--proto", "h3", "-c", "2", "-D", "30s"])
            .args([
                "--connect-timeout",
                "2s",
                "--no-progress",
                "--json",
                "-",
                "-q",
            ])
            .arg(format!("https://{tls}/bytes/10")),
        Duration::from_secs(60),
    );
    killer.join().expect("killer");
    let took = t0.elapsed();
    assert_eq!(
        code,
        Some(0),
        "requests were answered before the kill: {err}"
    );
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert!(v["requests_done"].as_u64().unwrap_or(0) > 0, "{v}");
    let errors = v["errors"]["timeout"].as_u64().unwrap_or(0);
    assert!(errors > 0, "the silence is counted: {}", v["errors"]);
    assert!(
        took < Duration::from_secs(20),
        "gave up after {took:?}, not at -D 30s"
    );
    drop(server);
}

/// A server killed mid-run while every connection has `-m 3` requests in flight (each a
/// 300 ms `/delay`, after several were answered): exactly those requests count as failed,
/// 3 per connection, on HTTP/1.1 as on HTTP/2 (4 × 3 = 12, plus 3 for each reconnect the
/// dying process's listener still completed in the kernel). HTTP/1.1 used to give them back
/// to be sent again (as if the server had closed an idle keep-alive connection), so a dead
/// server showed 0 failed requests there, only connect errors.
#[test]
fn requests_in_flight_when_the_server_dies_fail_on_h1_as_on_h2() {
    for (proto, port, counted_as) in [
        ("h1", "plain", Protocol::H1),
        ("h1", "tls", Protocol::H1Tls),
        ("h2", "tls", Protocol::H2),
    ] {
        let server = Server::start(&[]);
        let plain = server.ready.plain.to_string();
        let scheme = if port == "tls" { "https" } else { "http" };
        let url = format!(
            "{scheme}://{}/delay/300",
            if port == "tls" {
                server.ready.tls
            } else {
                server.ready.plain
            }
        );
        let load = std::thread::spawn(move || {
            run_with_timeout(
                Command::new(hxlab())
                    .args([
                        "load", "-k", "--proto", proto, "-c", "4", "-m", "3", "-D", "30s",
                    ])
                    .args(["--no-progress", "--json", "-", "-q"])
                    .arg(url),
                Duration::from_secs(60),
            )
        });
        // Killed once every connection is open and some requests were answered (the /stats
        // request's own connection counts as open on the plain port).
        let open_wanted = if counted_as == Protocol::H1 { 5 } else { 4 };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let stats = common::serve_stats(&plain);
            let s = stats.protocol(counted_as).cloned().unwrap_or_default();
            if (s.open_connections >= open_wanted && s.requests >= 8) || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = Command::new("kill")
            .args(["-KILL", &server.child.id().to_string()])
            .status();
        let (_, out, err) = load.join().expect("load");
        let v: serde_json::Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("{proto} over {port}: {e}: {out} {err}"));
        eprintln!(
            "{proto} over {port}: {} done, {} failed, errors {}",
            v["requests_done"], v["requests_failed"], v["errors"]
        );
        assert!(
            v["requests_done"].as_u64().unwrap_or(0) >= 4,
            "{proto}: {v}"
        );
        let connections = v["connections"].as_u64().unwrap_or(0);
        assert!(connections >= 4, "{proto} over {port}: {v}");
        assert_eq!(
            v["requests_failed"].as_u64(),
            Some(3 * connections),
            "{proto} over {port}: 3 in flight on each of {connections} connections: {}",
            v["errors"]
        );
        drop(server);
    }
}

/// A kept-alive HTTP/1.1 connection the server closes while it is idle (`--idle-timeout
/// 1s`, a request every 4 s) is noticed before the next request goes on it: that request
/// goes on a new connection and nothing fails, although requests in flight when a
/// connection ends now do.
#[test]
fn a_keep_alive_connection_closed_while_idle_fails_nothing() {
    let server = Server::start(&["--idle-timeout", "1s"]);
    for port in ["plain", "tls"] {
        let scheme = if port == "tls" { "https" } else { "http" };
        let url = format!(
            "{scheme}://{}/bytes/10",
            if port == "tls" {
                server.ready.tls
            } else {
                server.ready.plain
            }
        );
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab())
                .args([
                    "load", "-k", "--proto", "h1", "-c", "1", "--rate", "0.25", "-D", "9s",
                ])
                .args(["--no-progress", "--json", "-", "-q"])
                .arg(url),
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
        let done = v["requests_done"].as_u64().unwrap_or(0);
        assert_eq!(
            v["requests_failed"].as_u64(),
            Some(0),
            "{port}: {}",
            v["errors"]
        );
        assert!(done >= 2, "{port}: {v}");
        assert_eq!(
            v["connections"].as_u64(),
            Some(done),
            "{port}: one connection per request"
        );
    }
}

/// SIGKILL of `hxlab link` takes everything its command started with it — the command
/// runs in a PID namespace of its own — so no grandchild lives on in an orphaned network
/// namespace (`sh -c 'sleep & sleep'` used to leave both sleeps behind).
#[test]
fn killing_the_link_leaves_no_process_behind() {
    if !common::require_root("hxlab link") {
        return;
    }
    // Durations no other test uses, so the processes are ours.
    let (a, b) = (["sleep", "9707"], ["sleep", "9808"]);
    let mut link = Command::new(hxlab())
        .args([
            "link",
            "--delay",
            "1ms",
            "--",
            "sh",
            "-c",
            "sleep 9707 & sleep 9808",
        ])
        .env("HXLAB_LINK_QUIET", "1")
        .spawn()
        .expect("start hxlab link");
    let deadline = Instant::now() + Duration::from_secs(20);
    while (common::pids_running(&a).is_empty() || common::pids_running(&b).is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !common::pids_running(&a).is_empty() && !common::pids_running(&b).is_empty(),
        "both sleeps started"
    );
    link.kill().expect("SIGKILL the link");
    let _ = link.wait();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !(common::pids_running(&a).is_empty() && common::pids_running(&b).is_empty())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left: Vec<u32> = common::pids_running(&a)
        .into_iter()
        .chain(common::pids_running(&b))
        .collect();
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(left.is_empty(), "processes outlived the link: {left:?}");
}

/// Opens an h2c connection (preface + empty SETTINGS) to `addr`.
fn h2c_connect(addr: &str) -> TcpStream {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    c.write_all(&h2_frame(4, 0, 0, &[])).unwrap();
    c
}

/// Rapid reset (CVE-2023-44487): HEADERS then RST_STREAM at once, 20,000 times on one
/// connection, and a flood of SETTINGS and PINGs from a client that never reads: the
/// server stays within bounded memory and CPU and a legitimate request is answered.
#[test]
fn rapid_reset_and_control_frame_floods_stay_bounded() {
    let server = Server::start(&["--no-h3"]);
    let addr = server.ready.plain.to_string();
    let pid = server.child.id();
    let before = rss(pid);
    let attack = |kind: &'static str| {
        let addr = addr.clone();
        std::thread::spawn(move || {
            let mut c = h2c_connect(&addr);
            let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
            let deadline = Instant::now() + Duration::from_secs(8);
            let mut id = 1u32;
            let mut batch = Vec::with_capacity(64 << 10);
            for _ in 0..200 {
                batch.clear();
                for _ in 0..100 {
                    match kind {
                        "reset" => {
                            batch.extend(h2_frame(1, 0x5, id, &h2_request(2, "/delay/1000", None)));
                            batch.extend(h2_frame(3, 0, id, &8u32.to_be_bytes()));
                            id += 2;
                        }
                        "settings" => batch.extend(h2_frame(4, 0, 0, &[0, 3, 0, 0, 0, 100])),
                        _ => batch.extend(h2_frame(6, 0, 0, &[7; 8])),
                    }
                }
                // The server may stop reading (or close) once it has had enough: fine.
                if Instant::now() > deadline || c.write_all(&batch).is_err() {
                    break;
                }
            }
            c
        })
    };
    let attackers: Vec<_> = ["reset", "settings", "ping"]
        .into_iter()
        .map(attack)
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let t0 = Instant::now();
    assert!(
        legit_get(&addr, Duration::from_secs(10)),
        "a request during the floods"
    );
    let answered_in = t0.elapsed();
    let held: Vec<TcpStream> = attackers
        .into_iter()
        .map(|a| a.join().expect("attacker"))
        .collect();
    let grown = rss(pid).saturating_sub(before);
    assert!(grown < 200 << 20, "the server grew by {} MB", grown >> 20);
    assert!(
        answered_in < Duration::from_secs(5),
        "answered in {answered_in:?}"
    );
    drop(held);
    assert!(
        legit_get(&addr, Duration::from_secs(10)),
        "a request after the floods"
    );
}

/// 100 HTTP/3 connections that stall a large download and are then abandoned (the client
/// dies): the server closes them at the QUIC idle timeout and its memory comes back —
/// RSS within 2× of what it was before the attack (freed buffers are handed back to the
/// system; without that, glibc kept ~200 MB after every connection was gone).
#[test]
fn abandoned_http3_connections_are_reclaimed() {
    let server = Server::start(&["--quic-window", "1MiB"]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let pid = server.child.id();
    let url = |path: &str| format!("https://{tls}{path}");
    // One ordinary h3 request first, so what the runtime keeps anyway is in `before`.
    h3_requests_answered(&tls, 10, "h3 before the attack");
    let before = rss(pid);
    let frozen = Frozen::start(
        Command::new(hxlab())
            .args([
                "load", "-k", "--proto", "h3", "-c", "100", "-n", "100", "-q",
            ])
            .args([
                "--timeout",
                "60s",
                "--connect-timeout",
                "2s",
                "--no-progress",
            ])
            .arg(url("/bytes/1G")),
        Duration::from_millis(2500),
    );
    std::thread::sleep(Duration::from_secs(1));
    let peak = rss(pid);
    drop(frozen);
    let open = || {
        common::serve_stats(&plain)
            .protocol(Protocol::H3)
            .map(|p| p.open_connections)
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while open() != Some(0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        open(),
        Some(0),
        "abandoned connections closed at the idle timeout"
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    while rss(pid) > 2 * before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let after = rss(pid);
    assert!(
        after <= 2 * before,
        "RSS {} MB before, {} MB at the peak, {} MB after the connections were gone",
        before >> 20,
        peak >> 20,
        after >> 20
    );
}

/// A one-connection TCP server on loopback that reads the request bytes and answers `reply`.
fn one_shot_server(reply: &'static [u8]) -> (String, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr").to_string();
    let h = std::thread::spawn(move || {
        if let Ok((mut c, _)) = l.accept() {
            let _ = c.set_read_timeout(Some(Duration::from_millis(500)));
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = c.write_all(reply);
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    (addr, h)
}

/// A protocol error from a server that plainly spoke HTTP/2 (it sent its SETTINGS) does not
/// ask "does the server speak h2c?"; one from a server that answered in HTTP/1.1 does.
#[test]
fn the_h2c_hint_only_when_the_server_did_not_speak_http2() {
    // SETTINGS, then DATA on stream 0: a connection error in HTTP/2's own terms.
    let spoke: &'static [u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, b'x'];
    let h1: &'static [u8] = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    for (reply, want_hint) in [(spoke, false), (h1, true)] {
        let (addr, server) = one_shot_server(reply);
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab())
                .args(["load", "--proto", "h2c", "-n", "1", "--timeout", "5s"])
                .arg(format!("http://{addr}/")),
            Duration::from_secs(30),
        );
        server.join().expect("server");
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.contains("does the server speak"), want_hint, "{err}");
    }
}

/// A server that answers every request with an endless stream of `100 Continue`: the request
/// timeout is kept (--timeout 2s ended after 53 s when the endless input was always polled
/// before the timer).
#[test]
fn endless_interim_responses_end_at_the_request_timeout() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    let server = std::thread::spawn(move || {
        if let Ok((mut c, _)) = l.accept() {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let flood = b"HTTP/1.1 100 Continue\r\n\r\n".repeat(2000);
            let _ = c.set_write_timeout(Some(Duration::from_secs(1)));
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                if c.write_all(&flood).is_err() {
                    break;
                }
            }
        }
    });
    let t0 = Instant::now();
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "-n", "1", "--timeout", "2s"])
            .arg(format!("http://{addr}/")),
        Duration::from_secs(90),
    );
    let took = t0.elapsed();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().expect("server");
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("no response within 2s"), "{err}");
    assert!(
        took < Duration::from_secs(10),
        "a 2 s timeout took {took:?}"
    );
}

/// HTTP/1.1 pipelined requests whose responses are never read: once the socket buffers are
/// full the server's writes stall, and after --send-timeout it drops the connection (it used
/// to hold it 200+ s); a delayed response (think time) is not a stall.
#[test]
fn unread_pipelined_responses_do_not_hold_the_connection() {
    let server = Server::start(&["--no-h3", "--send-timeout", "2s"]);
    let addr = server.ready.plain.to_string();
    let open = || {
        common::serve_stats(&addr)
            .protocol(Protocol::H1)
            .map(|p| p.open_connections)
    };
    let base = open().expect("open connections");
    // Think time longer than --send-timeout is answered.
    let mut slow = TcpStream::connect(&addr).expect("connect");
    slow.write_all(b"GET /bytes/10?delay=8000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut c = TcpStream::connect(&addr).expect("connect");
    let req = b"GET /bytes/1M HTTP/1.1\r\nHost: x\r\n\r\n".repeat(50);
    c.write_all(&req).expect("pipeline");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(open(), Some(base + 2), "both connections open");
    // Before the slow one's 8 s are up.
    let deadline = Instant::now() + Duration::from_secs(6);
    while open() != Some(base + 1) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        open(),
        Some(base + 1),
        "the stalled connection was dropped, the slow one kept"
    );
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut text = String::new();
    let _ = slow.read_to_string(&mut text);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    drop(c);
}

/// A server announcing SETTINGS_HEADER_TABLE_SIZE 2³²−1: the client's HPACK encoder keeps to
/// its own bound instead of sizing a 4 GiB table, and the request is answered.
#[test]
fn a_huge_header_table_size_from_the_server_is_harmless() {
    const REPLY: &[u8] = &[
        0, 0, 6, 4, 0, 0, 0, 0, 0, // SETTINGS
        0, 1, 0xff, 0xff, 0xff, 0xff, // HEADER_TABLE_SIZE = 2^32 - 1
        0, 0, 1, 1, 0x5, 0, 0, 0, 1,    // HEADERS, stream 1, END_STREAM | END_HEADERS
        0x88, // :status 200
    ];
    let (addr, server) = one_shot_server(REPLY);
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["load", "--proto", "h2c", "-n", "1", "--timeout", "5s"])
            .arg(format!("http://{addr}/")),
        Duration::from_secs(30),
    );
    server.join().expect("server");
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("1 succeeded"), "{out}");
}

/// An HTTP/2 connection over TLS (ALPN h2) through `openssl s_client`, as a byte pipe: what
/// is written goes to the server; what the server sends collects in the buffer.
struct TlsPipe {
    /// Stopped and reaped with the pipe.
    _child: PeerProcess,
    input: std::process::ChildStdin,
    received: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
}

impl TlsPipe {
    fn open(addr: &str) -> Option<TlsPipe> {
        let openssl = common::require_peer("openssl")?;
        let mut child = PeerProcess::spawn(
            Command::new(openssl)
                .args(["s_client", "-quiet", "-alpn", "h2", "-connect", addr])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped()),
        );
        let input = child.stdin.take().expect("stdin");
        let mut out = child.stdout.take().expect("stdout");
        let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = received.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 16384];
            while let Ok(n) = out.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().expect("lock").extend_from_slice(&buf[..n]);
            }
        });
        let mut pipe = TlsPipe {
            _child: child,
            input,
            received,
        };
        pipe.input
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .ok()?;
        Some(pipe)
    }

    /// Stream ids the server reset (RST_STREAM) in what it sent so far.
    fn resets(&self) -> Vec<u32> {
        let data = self.received.lock().expect("lock").clone();
        let mut out = Vec::new();
        let mut i = 0;
        while i + 9 <= data.len() {
            let n = (usize::from(data[i]) << 16)
                | (usize::from(data[i + 1]) << 8)
                | usize::from(data[i + 2]);
            let id = u32::from_be_bytes([data[i + 5], data[i + 6], data[i + 7], data[i + 8]])
                & 0x7fff_ffff;
            if data[i + 3] == 3 {
                out.push(id);
            }
            i += 9 + n;
        }
        out.sort_unstable();
        out
    }
}

/// The TLS port has the defences of the h2c port: zero-window streams are reset after
/// --send-timeout, and a rapid-reset flood leaves memory bounded and requests answered.
#[test]
fn the_tls_port_resets_stalled_streams_and_survives_rapid_reset() {
    let server = Server::start(&["--no-h3", "--send-timeout", "2s"]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let pid = server.child.id();
    let Some(mut stall) = TlsPipe::open(&tls) else {
        return;
    };
    stall
        .input
        .write_all(&h2_frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]))
        .unwrap();
    for id in [1, 3, 5] {
        stall
            .input
            .write_all(&h2_frame(1, 0x5, id, &h2_request(2, "/bytes/100000", None)))
            .unwrap();
    }
    let before = rss(pid);
    let Some(mut flood) = TlsPipe::open(&tls) else {
        return;
    };
    flood.input.write_all(&h2_frame(4, 0, 0, &[])).unwrap();
    let mut id = 1u32;
    for _ in 0..100 {
        let mut batch = Vec::new();
        for _ in 0..100 {
            batch.extend(h2_frame(1, 0x5, id, &h2_request(2, "/delay/1000", None)));
            batch.extend(h2_frame(3, 0, id, &8u32.to_be_bytes()));
            id += 2;
        }
        if flood.input.write_all(&batch).is_err() {
            break;
        }
    }
    assert!(
        legit_get(&plain, Duration::from_secs(10)),
        "a request during the flood"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while stall.resets() != [1, 3, 5] && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        stall.resets(),
        [1, 3, 5],
        "zero-window streams reset over TLS"
    );
    let grown = rss(pid).saturating_sub(before);
    assert!(grown < 200 << 20, "the server grew by {} MB", grown >> 20);
}

/// An HTTP/3 HEADERS frame for GET `path` (QPACK: static references and literals only).
fn h3_request(path: &str, authority: &str) -> Vec<u8> {
    h3_request_with([0, 0], path, authority, &[])
}

/// A HEADERS frame for GET `path` whose field section has the prefix `prefix` (Required
/// Insert Count, Base: `[0, 0]` for static only): :method GET (17), :scheme https (23)
/// indexed; :path and :authority as literals with static name references (1, 0); then the
/// field lines `extra` (dynamic references).
fn h3_request_with(prefix: [u8; 2], path: &str, authority: &str, extra: &[u8]) -> Vec<u8> {
    let mut fields = prefix.to_vec();
    fields.extend_from_slice(&[0xc0 | 17, 0xc0 | 23, 0x51, path.len() as u8]);
    fields.extend_from_slice(path.as_bytes());
    fields.extend_from_slice(&[0x50, authority.len() as u8]);
    fields.extend_from_slice(authority.as_bytes());
    fields.extend_from_slice(extra);
    let mut frame = vec![0x01];
    hxlab_wire::varint::put(&mut frame, fields.len() as u64);
    frame.extend(fields);
    frame
}

/// HTTP/3 "rapid reset": streams opened with a request and reset at once, thousands of them
/// on one connection: the server's memory stays bounded and it keeps answering.
#[test]
fn http3_streams_opened_and_reset_stay_bounded() {
    let server = Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let pid = server.child.id();
    let before = rss(pid);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let opened = rt.block_on(async {
        let (ep, conn, _control) = common::h3_connect(addr).await;
        let request = h3_request("/delay/1000", "localhost");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut opened = 0u32;
        while opened < 5000 && Instant::now() < deadline {
            let Ok(Ok((mut send, recv))) =
                tokio::time::timeout(Duration::from_secs(5), conn.open_bi()).await
            else {
                break;
            };
            let _ = send.write_all(&request).await;
            let _ = send.reset(quinn::VarInt::from_u32(0x10c));
            drop(recv);
            opened += 1;
        }
        conn.close(quinn::VarInt::from_u32(0), b"done");
        ep.wait_idle().await;
        opened
    });
    assert!(
        opened >= 1000,
        "only {opened} streams could be opened and reset"
    );
    let grown = rss(pid).saturating_sub(before);
    assert!(grown < 200 << 20, "the server grew by {} MB", grown >> 20);
    h3_requests_answered(&tls, 10, "h3 after the attack");
}

/// Ambiguous HTTP/1.1 framing (RFC 9112 §2.2, §3.2, §5.2, §6.3) gets 400 and a close, each
/// of which hyper alone answered with 200 (a proxy splitting only on CRLF, or taking the
/// first Host, would read these requests differently); a valid request on the same port is
/// answered, and requests pipelined before a refused one are answered first.
#[test]
fn ambiguous_http1_framing_gets_400_and_a_close() {
    let server = Server::start(&["--no-h3"]);
    let plain = server.ready.plain.to_string();
    let cases: &[(&str, &[u8])] = &[
        ("bare LF", b"GET /bytes/10 HTTP/1.1\nHost: x\n\n"),
        (
            "bare LF after Transfer-Encoding",
            b"POST /bytes/10 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\n\r\n0\r\n\r\n",
        ),
        ("no Host", b"GET /bytes/10 HTTP/1.1\r\n\r\n"),
        (
            "two Hosts",
            b"GET /headers HTTP/1.1\r\nHost: aaa\r\nHost: bbb\r\n\r\n",
        ),
        (
            "Content-Length and Transfer-Encoding",
            b"POST /bytes/10 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        ),
        (
            "differing Content-Lengths",
            b"POST /bytes/10 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
        ),
        (
            "obs-fold",
            b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n",
        ),
        (
            "bare LF in a chunk-size line",
            b"POST /bytes/10 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\na\r\n0\r\n\r\n",
        ),
    ];
    for (what, request) in cases {
        let reply = h1_exchange(&plain, request);
        let reply = reply.unwrap_or_else(|| panic!("{what}: the connection was kept open"));
        assert!(reply.starts_with("HTTP/1.1 400"), "{what}: {reply}");
        assert_eq!(reply.matches("HTTP/1.1 ").count(), 1, "{what}: {reply}");
    }
    // Pipelined: the valid request before a refused one is answered, then 400, then close.
    let reply = h1_exchange(
        &plain,
        b"GET /bytes/3 HTTP/1.1\r\nHost: x\r\n\r\nGET /bytes/4 HTTP/1.1\nHost: x\r\n\r\n",
    )
    .expect("closed after the refused request");
    let statuses: Vec<&str> = reply
        .match_indices("HTTP/1.1 ")
        .map(|(i, _)| &reply[i..i + 12])
        .collect();
    assert_eq!(statuses, ["HTTP/1.1 200", "HTTP/1.1 400"], "{reply}");
    // Valid requests, bodies included, are still served.
    let reply = h1_exchange(
        &plain,
        b"POST /bytes/2 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;a=b\r\nabc\r\n0\r\nX-T: 1\r\n\r\n\
          POST /bytes/2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nxyz\
          GET /bytes/2 HTTP/1.0\r\n\r\n",
    )
    .expect("HTTP/1.0 closes");
    assert_eq!(reply.matches(" 200 OK").count(), 3, "{reply}");
    assert!(legit_get(&plain, Duration::from_secs(10)));
}

/// The first `sent` bytes of an HTTP/3 HEADERS frame announcing `len` bytes of field section
/// (the section itself is filler: it is never completed).
fn h3_partial_headers(len: u64, sent: usize) -> Vec<u8> {
    let mut frame = vec![0x01];
    hxlab_wire::varint::put(&mut frame, len);
    frame.resize(sent, b'a');
    frame
}

/// Whether `recv` was reset by the server (rather than still open) within `limit`.
async fn h3_reset_within(recv: &mut quinn::RecvStream, limit: Duration) -> bool {
    let mut buf = [0u8; 256];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, recv.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Err(quinn::ReadError::Reset(_))) => return true,
            Ok(Err(_)) | Ok(Ok(None)) => return false,
            Ok(Ok(Some(_))) => {}
        }
    }
}

/// HTTP/3 request heads that never complete: 20 connections each send 60 KB of a 65,042-byte
/// HEADERS frame and drip the rest a byte every 100 ms. Each stream is reset at
/// --head-timeout (they were held for as long as the drip lasted, ~7 MB a connection), the
/// server's memory stays bounded, and a legitimate h3 request is answered meanwhile.
#[test]
fn http3_heads_that_never_complete_are_reset() {
    let server = Server::start(&["--head-timeout", "2s"]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let pid = server.child.id();
    let before = rss(pid);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let t0 = Instant::now();
    let attackers: Vec<_> = (0..20)
        .map(|_| {
            rt.spawn(async move {
                let (ep, conn, control) = common::h3_connect(addr).await;
                let (mut send, mut recv) = conn.open_bi().await.expect("stream");
                send.write_all(&h3_partial_headers(65_042, 60_000))
                    .await
                    .expect("part of a head");
                let drip = async {
                    loop {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        if send.write_all(b"a").await.is_err() {
                            break;
                        }
                    }
                };
                let reset = tokio::select! {
                    r = h3_reset_within(&mut recv, Duration::from_secs(30)) => r,
                    _ = drip => false,
                };
                (reset, t0.elapsed(), ep, conn, control)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let peak_during = rss(pid);
    h3_requests_answered(&tls, 5, "h3 during the attack");
    let outcomes: Vec<_> = attackers
        .into_iter()
        .map(|a| rt.block_on(a).expect("attacker"))
        .collect();
    let grown = peak_during.max(rss(pid)).saturating_sub(before);
    let latest = outcomes.iter().map(|o| o.1).max();
    eprintln!(
        "dripping heads: grew {} MB, last reset at {latest:?}",
        grown >> 20
    );
    for (reset, at, ..) in &outcomes {
        assert!(*reset, "a dripping head was not reset (at {at:?})");
        assert!(*at < Duration::from_secs(15), "reset only at {at:?}");
    }
    assert!(
        grown < 64 << 20,
        "the server grew by {} MB for 20 dripping heads",
        grown >> 20
    );
    drop(outcomes);
}

/// Partial HTTP/3 heads count against a per-connection budget (4 × --max-header-size): six
/// streams each holding 60 KB of an unfinished 64 KiB head close the connection with
/// H3_EXCESSIVE_LOAD, where they were held before; a legitimate connection is served.
#[test]
fn http3_partial_heads_past_the_budget_close_the_connection() {
    let server = Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (closed, took) = rt.block_on(async {
        let (_ep, conn, _control) = common::h3_connect(addr).await;
        let t0 = Instant::now();
        let mut streams = Vec::new();
        for _ in 0..6 {
            let Ok((mut send, recv)) = conn.open_bi().await else {
                break;
            };
            let _ = send.write_all(&h3_partial_headers(65_042, 60_000)).await;
            streams.push((send, recv));
        }
        let closed = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
        (closed, t0.elapsed())
    });
    let code = match closed {
        Ok(quinn::ConnectionError::ApplicationClosed(c)) => c.error_code.into_inner(),
        other => panic!("the connection was not closed by the server: {other:?}"),
    };
    assert_eq!(code, 0x107, "H3_EXCESSIVE_LOAD");
    eprintln!("partial heads over budget: closed after {took:?}");
    h3_requests_answered(&tls, 5, "h3 after the attack");
}

/// The worst HTTP/3 clients can pin, all at once on a full table: each of
/// --quic-max-connections connections holds unfinished heads just under its budget
/// (4 × --max-header-size) and a response it never reads (the server's send buffer fills
/// to --quic-window). The server grows by no more than docs/serve.md's bound, connections ×
/// (4 × max-header-size + 2 × quic-window + 64 KiB of connection state), and h1 is
/// answered meanwhile.
#[test]
fn http3_worst_case_memory_stays_within_the_stated_bound() {
    const CONNS: u64 = 24;
    const HEADER: u64 = 16 << 10;
    const WINDOW: u64 = 1 << 20;
    let server = Server::start(&[
        "--quic-max-connections",
        &CONNS.to_string(),
        "--quic-max-per-address",
        &CONNS.to_string(),
        "--quic-window",
        "1MiB",
        "--max-header-size",
        "16KiB",
        "--head-timeout",
        "120s",
        "--idle-timeout",
        "120s",
    ]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let pid = server.child.id();
    let before = rss(pid);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let held: Vec<_> = rt.block_on(async {
        let mut held = Vec::new();
        for _ in 0..CONNS {
            let (ep, conn, control) = common::h3_connect(addr).await;
            let (mut send, recv) = conn.open_bi().await.expect("stream");
            send.write_all(&h3_request("/bytes/1G", "localhost"))
                .await
                .expect("request");
            let _ = send.finish();
            let mut heads = Vec::new();
            for _ in 0..3 {
                let (mut s, r) = conn.open_bi().await.expect("stream");
                s.write_all(&h3_partial_headers(16_000, 15_000))
                    .await
                    .expect("part of a head");
                heads.push((s, r));
            }
            held.push((ep, conn, control, send, recv, heads));
        }
        held
    });
    // Let the unread responses fill the server's send buffers.
    std::thread::sleep(Duration::from_secs(2));
    let grown = rss(pid).saturating_sub(before);
    let open = common::serve_stats(&plain)
        .protocol(Protocol::H3)
        .map(|p| p.open_connections);
    assert_eq!(open, Some(CONNS), "every attacking connection still open");
    assert!(
        held.iter().all(|h| h.1.close_reason().is_none()),
        "an attacking connection was closed: the worst case was not reached"
    );
    let bound = CONNS * (4 * HEADER + 2 * WINDOW + (64 << 10)) + (32 << 20);
    eprintln!(
        "worst-case HTTP/3: {CONNS} connections grew the server by {} KiB (bound {} KiB)",
        grown >> 10,
        bound >> 10
    );
    assert!(
        grown < bound,
        "the server grew by {} KiB, over the stated bound of {} KiB",
        grown >> 10,
        bound >> 10
    );
    assert!(
        legit_get(&plain, Duration::from_secs(10)),
        "h1 during the attack"
    );
    drop(held);
}

/// HTTP/3 connections that send no request, only QUIC PINGs, filled --quic-max-connections
/// for good and locked legitimate clients out. Now each is closed (GOAWAY, H3_NO_ERROR)
/// after one to two --idle-timeout periods, as h1 and h2 are, and a legitimate client gets
/// in; a connection whose request is still running (a delay longer than the period) is not
/// idle.
#[test]
fn idle_http3_connections_are_closed() {
    let server = Server::start(&["--idle-timeout", "1s", "--quic-max-connections", "20"]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let busy = std::thread::spawn({
        let tls = tls.clone();
        move || {
            std::thread::sleep(Duration::from_millis(300));
            run_with_timeout(
                Command::new(hxlab())
                    .args(["load", "-k", "--proto", "h3", "-n", "1", "-q"])
                    .arg(format!("https://{tls}/delay/3500")),
                Duration::from_secs(30),
            )
        }
    });
    let closes = rt.block_on(async {
        let t0 = Instant::now();
        let mut held = Vec::new();
        // 19 idle connections and the busy one fill the table.
        for _ in 0..19 {
            held.push(common::h3_connect(addr).await);
        }
        let mut closes = Vec::new();
        for (_ep, conn, _control) in &held {
            let r = tokio::time::timeout(Duration::from_secs(10), conn.closed()).await;
            closes.push((r, t0.elapsed()));
        }
        closes
    });
    for (r, at) in &closes {
        match r {
            Ok(quinn::ConnectionError::ApplicationClosed(c)) => {
                assert_eq!(c.error_code.into_inner(), 0x100, "H3_NO_ERROR")
            }
            other => panic!("an idle connection was not closed: {other:?} at {at:?}"),
        }
        assert!(*at < Duration::from_secs(6), "closed only at {at:?}");
    }
    eprintln!(
        "idle h3 connections: last closed at {:?}",
        closes.iter().map(|c| c.1).max()
    );
    let (code, _, err) = busy.join().expect("busy client");
    assert_eq!(
        code,
        Some(0),
        "a request longer than the idle period: {err}"
    );
    h3_requests_answered(&tls, 5, "h3 once the idle ones are gone");
}

/// What an attacker saw of the server while it waited for a PING's ACK.
#[derive(Default)]
struct H2Seen {
    ping_ack: bool,
    /// The GOAWAY error code, if one came.
    goaway: Option<u32>,
    closed: bool,
}

/// Reads frames until a PING ACK, a GOAWAY or the end of the connection (or the read
/// timeout the caller set).
fn h2_until_ping_ack(c: &mut impl ReadWrite) -> H2Seen {
    let mut seen = H2Seen::default();
    let mut head = [0u8; 9];
    while !seen.ping_ack {
        if c.read_exact(&mut head).is_err() {
            seen.closed = true;
            break;
        }
        let n = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; n];
        if c.read_exact(&mut payload).is_err() {
            seen.closed = true;
            break;
        }
        match (head[3], head[4] & 1) {
            (6, 1) => seen.ping_ack = true,
            (4, 0) => {
                let _ = c.write_all(&h2_frame(4, 1, 0, &[]));
            }
            (7, _) if n >= 8 => {
                seen.goaway = Some(u32::from_be_bytes([
                    payload[4], payload[5], payload[6], payload[7],
                ]));
                break;
            }
            _ => {}
        }
    }
    seen
}

/// A byte stream both ways: a TCP connection, or a TLS session over one.
trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// An HTTP/2 connection to the TLS port (ALPN h2, the server's own certificate trusted),
/// preface and SETTINGS sent; reads time out after 10 s.
fn h2_tls_connect(
    addr: &str,
    cert: &Path,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let pem = std::fs::read(cert).expect("the server's certificate");
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut pem.as_slice()) {
        roots
            .add(c.expect("a PEM certificate"))
            .expect("a trusted root");
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("a name");
    let conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).expect("TLS");
    let tcp = TcpStream::connect(addr).expect("connect");
    tcp.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .and_then(|()| s.write_all(&h2_frame(4, 0, 0, &[])))
        .expect("preface over TLS");
    assert_eq!(s.conn.alpn_protocol(), Some(&b"h2"[..]), "ALPN h2");
    s
}

/// The attack of [`reset_streams_waiting_for_window_get_enhance_your_calm`] on one
/// connection, for at most 8 s: what the client saw last, the rounds, and the peak RSS.
fn reset_streams_without_window(c: &mut impl ReadWrite, pid: u32) -> (H2Seen, u32, u64, Duration) {
    let t0 = Instant::now();
    let mut id = 1u32;
    let mut rounds = 0u32;
    let mut peak = 0u64;
    let closed = || H2Seen {
        closed: true,
        ..H2Seen::default()
    };
    let outcome = loop {
        let first = id;
        let mut batch = Vec::with_capacity(90 * 40);
        for _ in 0..90 {
            batch.extend(h2_frame(1, 0x5, id, &h2_request(2, "/bytes/1000", None)));
            id += 2;
        }
        batch.extend(h2_frame(6, 0, 0, &[1; 8]));
        if c.write_all(&batch).and_then(|()| c.flush()).is_err() {
            break closed();
        }
        let seen = h2_until_ping_ack(c);
        if !seen.ping_ack {
            break seen;
        }
        let resets: Vec<u8> = (first..id)
            .step_by(2)
            .flat_map(|s| h2_frame(3, 0, s, &8u32.to_be_bytes()))
            .collect();
        if c.write_all(&resets).and_then(|()| c.flush()).is_err() {
            break closed();
        }
        rounds += 1;
        if rounds.is_multiple_of(50) {
            peak = peak.max(rss(pid));
        }
        if t0.elapsed() > Duration::from_secs(8) {
            break seen;
        }
    };
    (outcome, rounds, peak, t0.elapsed())
}

/// Reset streams waiting for connection window: the client opens 90 streams, sends a PING,
/// waits for its ACK, resets the 90 and repeats, and never sends a connection-level
/// WINDOW_UPDATE. The `h2` crate kept every such stream (~325 bytes) until the window
/// opened, so memory grew without bound (one h2c connection: 10 → 413 MB in 20 s; one TLS
/// connection: 599 MB in 30 s). Now a reset stream is freed at once, a connection that keeps
/// resetting more streams than it lets finish (past --max-streams + 1000) gets GOAWAY
/// ENHANCE_YOUR_CALM, memory stays flat, and a legitimate request is answered meanwhile —
/// on the cleartext port and on the TLS port alike.
#[test]
fn reset_streams_waiting_for_window_get_enhance_your_calm() {
    let server = Server::start(&["--no-h3"]);
    let plain = server.ready.plain.to_string();
    let tls = server.ready.tls.to_string();
    let cert = server.cert();
    let pid = server.child.id();
    for port in ["h2c", "h2 over TLS"] {
        let before = rss(pid);
        let attacker = {
            let (plain, tls, cert) = (plain.clone(), tls.clone(), cert.clone());
            std::thread::spawn(move || {
                if port == "h2c" {
                    let mut c = h2c_connect(&plain);
                    c.set_read_timeout(Some(Duration::from_secs(10)))
                        .expect("timeout");
                    reset_streams_without_window(&mut c, pid)
                } else {
                    reset_streams_without_window(&mut h2_tls_connect(&tls, &cert), pid)
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            legit_get(&plain, Duration::from_secs(10)),
            "{port}: a request during the attack"
        );
        let (seen, rounds, peak, took) = attacker.join().expect("attacker");
        let grown = peak.max(rss(pid)).saturating_sub(before);
        eprintln!(
            "{port}: reset streams without window: {rounds} rounds ({} streams) in {took:?}, \
             grew {} MB, goaway {:?}, closed {}",
            rounds * 90,
            grown >> 20,
            seen.goaway,
            seen.closed
        );
        assert_eq!(seen.goaway, Some(0xb), "{port}: GOAWAY ENHANCE_YOUR_CALM");
        assert!(
            grown < 32 << 20,
            "{port}: the server grew by {} MB",
            grown >> 20
        );
    }
}

/// Inputs that never end (`/dev/zero`, also as the results.jsonl of a results directory) are
/// refused with exit status 2 and one line, after reading at most a capped amount: `report`
/// read 4 GiB (4.2 GB resident, 9 s) and exited 1; merge, diff, run and --data-file exited 1.
#[cfg(target_os = "linux")]
#[test]
fn endless_inputs_are_refused_with_exit_2() {
    let dir = common::tempfile_dir::TempDir::new("hxlab-zero");
    let results = dir.path().join("results");
    std::fs::create_dir_all(&results).expect("mkdir");
    std::fs::write(
        results.join("experiment.json"),
        r#"{"name":"x","title":"x","workload":null,"repetitions":1,"factors":[]}"#,
    )
    .expect("experiment.json");
    std::os::unix::fs::symlink("/dev/zero", results.join("results.jsonl")).expect("symlink");
    let results = results.display().to_string();
    let cases: &[&[&str]] = &[
        &["report", &results],
        &["merge", "/dev/zero"],
        &["diff", "/dev/zero", "/dev/zero"],
        &["run", "/dev/zero"],
        &[
            "load",
            "--data-file",
            "/dev/zero",
            "-n",
            "1",
            "http://127.0.0.1:1/",
        ],
        &[
            "serve",
            "--replay",
            "/dev/zero",
            "--plain-port",
            "0",
            "--tls-port",
            "0",
        ],
    ];
    for args in cases {
        let t0 = Instant::now();
        let (code, _, err) =
            run_with_timeout(Command::new(hxlab()).args(*args), Duration::from_secs(30));
        let took = t0.elapsed();
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    }
}

/// `n` QUIC Initial datagrams, each opening a connection of its own (its own connection
/// ID), taken from a real quinn client pointed at a socket that never answers. Replayed to
/// the server from a socket that never reads, each one is an abandoned handshake.
async fn captured_initials(n: usize) -> Vec<Vec<u8>> {
    let sink = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("sink");
    let to = sink.local_addr().expect("sink address");
    let ep = common::h3_client_endpoint("127.0.0.1:0".parse().expect("local"));
    let mut attempts = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut initials = Vec::new();
    let mut buf = vec![0u8; 65536];
    // One attempt at a time, so the sink's receive buffer never overflows.
    while initials.len() < n && attempts.len() < 2 * n {
        attempts.push(ep.connect(to, "localhost").expect("connect"));
        let Ok(Ok(len)) = tokio::time::timeout(Duration::from_secs(2), sink.recv(&mut buf)).await
        else {
            continue;
        };
        let d = &buf[..len];
        // A long header: flags, version (4 bytes), DCID length, DCID.
        let cid = d
            .get(5)
            .and_then(|&l| d.get(6..6 + usize::from(l)))
            .filter(|_| d[0] & 0x80 != 0);
        if let Some(cid) = cid {
            if seen.insert(cid.to_vec()) {
                initials.push(d.to_vec());
            }
        }
    }
    drop(attempts);
    ep.close(quinn::VarInt::from_u32(0), b"");
    initials
}

/// Sends `initials` to `server` from one socket that never reads what comes back, ten at a
/// time every 5 ms (so loopback drops none); the socket is returned to keep its address.
async fn flood(initials: &[Vec<u8>], server: std::net::SocketAddr) -> tokio::net::UdpSocket {
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0")
        .await
        .expect("flood socket");
    for burst in initials.chunks(10) {
        for d in burst {
            socket.send_to(d, server).await.expect("send");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    socket
}

/// Whether a handshake was refused by the server (CONNECTION_REFUSED).
fn refused<T>(r: &Result<T, quinn::ConnectionError>) -> bool {
    matches!(r, Err(quinn::ConnectionError::ConnectionClosed(c))
        if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED)
}

/// A flood of abandoned QUIC handshakes: 300 Initials, replayed from a socket that never
/// answers. Half-open connections count against --quic-max-connections (64 here), so
/// without Retry the flood fills the table for the 10 s handshake timeout and a legitimate
/// client is refused (shown first, with the threshold out of reach). With
/// --quic-retry-threshold 8, every Initial past the 8th gets a stateless Retry, which an
/// abandoned handshake never answers and a real client does: it is served during the flood,
/// and /stats counts the Retries.
#[test]
fn a_handshake_flood_gets_retry_and_legitimate_clients_get_in() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let local: std::net::SocketAddr = "127.0.0.1:0".parse().expect("local");
    let initials = rt.block_on(captured_initials(300));
    assert_eq!(initials.len(), 300, "captured Initials");
    // Without Retry: the table is full of half-open connections.
    {
        let server = Server::start(&[
            "--quic-retry-threshold",
            "100000",
            "--quic-max-connections",
            "64",
        ]);
        let addr: std::net::SocketAddr = server.ready.tls;
        let legit = rt.block_on(async {
            let _flood = flood(&initials, addr).await;
            common::h3_handshake(local, addr).await.map(|_| ())
        });
        assert!(
            refused(&legit),
            "no Retry: a full table refuses ({legit:?})"
        );
    }
    let server = Server::start(&[
        "--quic-retry-threshold",
        "8",
        "--quic-max-connections",
        "64",
    ]);
    let tls = server.ready.tls.to_string();
    let plain = server.ready.plain.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let (flood_socket, took) = rt.block_on(async {
        let socket = flood(&initials, addr).await;
        let t0 = Instant::now();
        let (_ep, conn) = common::h3_handshake(local, addr)
            .await
            .expect("a legitimate handshake during the flood");
        let took = t0.elapsed();
        conn.close(quinn::VarInt::from_u32(0), b"");
        (socket, took)
    });
    eprintln!("handshake flood: a legitimate handshake (with its Retry) took {took:?}");
    // A whole request too, while the flood's 8 half-open connections still wait for their
    // 10 s handshake timeout.
    h3_requests_answered(&tls, 5, "h3 during the flood");
    let stats = common::serve_stats(&plain);
    let h3 = stats.protocol(Protocol::H3).expect("h3 counters");
    let retries = h3.retries;
    eprintln!("handshake flood: {retries} Retries sent");
    // 292 flood Initials and the legitimate clients' first ones; half of that leaves
    // room for datagrams the loopback dropped.
    assert!(
        retries >= 150,
        "{retries} Retries for 300 abandoned Initials"
    );
    assert_eq!(h3.refused, 0, "nothing refused");
    drop(flood_socket);
}

/// Many HTTP/3 connections from one address: past --quic-max-per-address the next one is
/// refused (CONNECTION_REFUSED, counted in /stats), a client from another address is
/// served meanwhile, and a slot comes back when one of the connections closes.
#[test]
fn one_address_cannot_take_the_whole_http3_table() {
    let server = Server::start(&["--quic-max-per-address", "4"]);
    let plain = server.ready.plain.to_string();
    let addr: std::net::SocketAddr = server.ready.tls;
    let here: std::net::SocketAddr = "127.0.0.1:0".parse().expect("local");
    let elsewhere: std::net::SocketAddr = "127.0.0.2:0".parse().expect("local");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (answer, again) = rt.block_on(async {
        let mut held = Vec::new();
        for _ in 0..4 {
            held.push(
                common::h3_handshake(here, addr)
                    .await
                    .expect("within the cap"),
            );
        }
        let fifth = common::h3_handshake(here, addr).await;
        assert!(refused(&fifth), "the fifth from one address: {fifth:?}");
        let (_ep, conn) = common::h3_handshake(elsewhere, addr)
            .await
            .expect("another address");
        let mut control = conn.open_uni().await.expect("control stream");
        control
            .write_all(&[0x00, 0x04, 0x00])
            .await
            .expect("SETTINGS");
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        send.write_all(&h3_request("/bytes/10", "localhost"))
            .await
            .expect("request");
        send.finish().expect("finish");
        let answer = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 16))
            .await
            .expect("answered in time")
            .expect("response");
        let (ep, first) = held.remove(0);
        first.close(quinn::VarInt::from_u32(0), b"");
        ep.wait_idle().await;
        // The server gives the slot back once it has seen the close.
        let deadline = Instant::now() + Duration::from_secs(10);
        let again = loop {
            let r = common::h3_handshake(here, addr).await;
            if r.is_ok() || Instant::now() > deadline {
                break r.map(|_| ());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        (answer, again)
    });
    assert_eq!(answer.first(), Some(&0x01), "a HEADERS frame first");
    assert!(again.is_ok(), "a slot freed by a close: {again:?}");
    let refused = common::serve_stats(&plain)
        .protocol(Protocol::H3)
        .expect("h3 counters")
        .refused;
    assert!(refused >= 1, "/stats counts the refused connection");
}

// Round three (issue 38): unread pipelines, HTTP/2 connections whose peer is gone, a FIFO in
// --dir, one address holding every connection.

/// The peak resident memory of `pid` while `f` runs (sampled every 50 ms), and `f`'s result.
fn peak_rss_during<T>(pid: u32, f: impl FnOnce() -> T) -> (T, u64) {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut peak = 0;
            // Bounded: at most 10 minutes of samples, whatever `f` does.
            for _ in 0..12_000 {
                peak = peak.max(rss(pid));
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            peak
        })
    };
    let out = f();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    (out, sampler.join().expect("sampler"))
}

/// 64 KiB of pipelined `GET /bytes/N` (about 1,700 requests); each asks for a different size
/// (14,000 + its index, all small enough to be answered beside their heads, as `/bytes/16k`
/// is), so the answers tell which request they are. Returns the bytes and the sizes in order.
fn numbered_pipeline() -> (Vec<u8>, Vec<u64>) {
    let mut bytes = Vec::with_capacity(64 << 10);
    let mut sizes = Vec::new();
    loop {
        let n = 14_000 + sizes.len() as u64;
        let req = format!("GET /bytes/{n} HTTP/1.1\r\nHost: x\r\n\r\n");
        if bytes.len() + req.len() > 64 << 10 {
            return (bytes, sizes);
        }
        bytes.extend_from_slice(req.as_bytes());
        sizes.push(n);
    }
}

/// Memory returns to within `slack` of `idle` within `limit`; the last reading.
fn rss_settles(pid: u32, idle: u64, slack: u64, limit: Duration) -> u64 {
    let deadline = Instant::now() + limit;
    loop {
        let now = rss(pid);
        if now <= idle + slack || Instant::now() >= deadline {
            return now;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// 100 connections each write 64 KiB of pipelined `GET /bytes/16k…` and never read: the
/// server answers one write batch a turn as the socket drains, so it holds about 150 KiB per
/// connection, not every answer (it grew by 2.6 GB in 6 s, 28 MB a connection). A legitimate
/// request is answered meanwhile, and the memory comes back once the clients leave.
#[test]
fn unread_pipelines_hold_a_write_batch_not_every_answer() {
    let server = Server::start(&["--no-h3"]);
    let plain = server.ready.plain.to_string();
    let pid = server.child.id();
    assert!(
        legit_get(&plain, Duration::from_secs(5)),
        "before the attack"
    );
    let idle = rss(pid);
    let (pipeline, _) = numbered_pipeline();
    let ((clients, answered), peak) = peak_rss_during(pid, || {
        let clients: Vec<TcpStream> = (0..100)
            .map(|_| {
                let mut c = TcpStream::connect(&plain).expect("connect");
                c.set_write_timeout(Some(Duration::from_secs(10)))
                    .expect("timeout");
                c.write_all(&pipeline).expect("the pipeline");
                c
            })
            .collect();
        // Long enough for the server to answer all it would (it took 6 s to reach 2.6 GB).
        std::thread::sleep(Duration::from_secs(4));
        let answered = legit_get(&plain, Duration::from_secs(3));
        std::thread::sleep(Duration::from_secs(2));
        (clients, answered)
    });
    assert!(answered, "a legitimate request during the attack");
    let grown = peak.saturating_sub(idle);
    assert!(
        grown <= 200 << 20,
        "the server grew by {} MB (idle {} MB)",
        grown >> 20,
        idle >> 20
    );
    drop(clients);
    let after = rss_settles(pid, idle, 40 << 20, Duration::from_secs(20));
    assert!(
        after <= idle + (40 << 20),
        "after the clients left: {} MB (idle {} MB)",
        after >> 20,
        idle >> 20
    );
    assert!(
        legit_get(&plain, Duration::from_secs(5)),
        "after the attack"
    );
}

/// Reads one HTTP/1.1 response with a Content-Length body of filler; returns that length.
fn read_filler_response(r: &mut impl std::io::BufRead) -> u64 {
    let mut len = None;
    let mut line = String::new();
    loop {
        line.clear();
        let n = r.read_line(&mut line).expect("a response head line");
        assert!(n > 0, "the connection ended inside a response head");
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l
            .to_ascii_lowercase()
            .strip_prefix("content-length:")
            .map(|v| v.trim().to_string())
        {
            len = v.parse().ok();
        }
    }
    let len: u64 = len.expect("a Content-Length");
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body).expect("the whole body");
    assert!(body.iter().all(|&b| b == b'x'), "a body of filler");
    len
}

/// A slow reader (1 KiB/s for 3 s, then at full speed) of the same pipeline gets every answer,
/// whole and in order: the budget above holds answers back, it drops none.
#[test]
fn a_slow_reader_of_a_long_pipeline_gets_every_answer_in_order() {
    let server = Server::start(&["--no-h3"]);
    let plain = server.ready.plain.to_string();
    let (pipeline, sizes) = numbered_pipeline();
    let mut c = TcpStream::connect(&plain).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let mut writer = c.try_clone().expect("clone");
    let w = std::thread::spawn(move || writer.write_all(&pipeline));
    let mut first = [0u8; 1024];
    let mut slow = Vec::new();
    for _ in 0..3 {
        let n = c.read(&mut first).expect("a slow read");
        slow.extend_from_slice(&first[..n]);
        std::thread::sleep(Duration::from_secs(1));
    }
    w.join().expect("writer").expect("the pipeline");
    let mut r = std::io::BufReader::new(std::io::Read::chain(slow.as_slice(), c));
    for (i, want) in sizes.iter().enumerate() {
        assert_eq!(
            read_filler_response(&mut r),
            *want,
            "answer {i} of {}",
            sizes.len()
        );
    }
}

/// The server's own TCP sockets on `port` in CLOSE-WAIT (the peer sent FIN, the server has
/// not closed), from /proc/net/tcp and tcp6.
fn close_wait_on(port: u16) -> usize {
    let local = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|t| {
            t.lines()
                .skip(1)
                .filter(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.len() > 3 && f[1].ends_with(&local) && f[3] == "08"
                })
                .count()
        })
        .sum::<usize>()
}

/// What a window-blocking attacker sends after the preface: SETTINGS with an initial window
/// of 0, then HEADERS for `/bytes/1G` on 10 streams.
fn zero_window_requests() -> Vec<u8> {
    let mut b = h2_frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]);
    for id in (1..20).step_by(2) {
        b.extend(h2_frame(1, 0x5, id, &h2_request(2, "/bytes/1G", None)));
    }
    b
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port")
}

/// 2,000 h2c and 200 TLS connections whose streams wait for window then send FIN (and keep
/// reading, as a half-closed client may): nothing they asked for can finish, so the server
/// closes each at once (they sat in CLOSE-WAIT until --send-timeout, 60 s: 6,000 of them,
/// then the file limit, and every TCP port stopped answering). Legitimate h1, h2 and h2c
/// requests are answered during the attack.
#[test]
fn window_blocked_connections_close_at_the_peers_fin() {
    let server = Server::start(&["--no-h3"]);
    let plain = server.ready.plain.to_string();
    let tls = server.ready.tls.to_string();
    let mut h2c: Vec<TcpStream> = (0..2000)
        .map(|_| {
            let mut c = h2c_connect(&plain);
            c.write_all(&zero_window_requests()).expect("requests");
            c
        })
        .collect();
    let mut over_tls: Vec<_> = (0..200)
        .map(|_| {
            let mut s = h2_tls_connect(&tls, &server.cert());
            s.write_all(&zero_window_requests()).expect("requests");
            s.flush().expect("flush");
            s
        })
        .collect();
    assert!(
        legit_get(&plain, Duration::from_secs(5)),
        "h1 during the attack"
    );
    for (proto, url) in [
        ("h2", format!("https://{tls}/bytes/10")),
        ("h2c", format!("http://{plain}/bytes/10")),
    ] {
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab()).args(["load", "-k", "--proto", proto, "-n", "5", "-q", &url]),
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(0), "{proto} during the attack: {err}");
    }
    // FIN on each (the sockets stay open: a reset would end them without the fix).
    for c in &mut h2c {
        c.shutdown(std::net::Shutdown::Write).expect("FIN");
    }
    for s in &mut over_tls {
        s.sock.shutdown(std::net::Shutdown::Write).expect("FIN");
    }
    std::thread::sleep(Duration::from_secs(2));
    let (on_plain, on_tls) = (close_wait_on(port_of(&plain)), close_wait_on(port_of(&tls)));
    assert_eq!(
        (on_plain, on_tls),
        (0, 0),
        "server sockets in CLOSE-WAIT 2 s after the last FIN (h2c, TLS)"
    );
    drop((h2c, over_tls));
}

/// A client that half-closes after its request but gave window for the whole response gets
/// it whole, on h2c and HTTP/1.1: at FIN, only what can no longer finish is dropped.
#[test]
fn a_half_closed_client_with_window_gets_the_whole_response() {
    let server = Server::start(&["--no-h3"]);
    let plain = server.ready.plain.to_string();
    let mut c = h2c_connect(&plain);
    let big = 16u32 << 20;
    c.write_all(&h2_frame(4, 0, 0, &[0, 4, 1, 0, 0, 0]))
        .expect("SETTINGS 16 MiB");
    c.write_all(&h2_frame(8, 0, 0, &big.to_be_bytes()))
        .expect("WINDOW_UPDATE");
    c.write_all(&h2_frame(1, 0x5, 1, &h2_request(2, "/bytes/1000000", None)))
        .expect("HEADERS");
    c.shutdown(std::net::Shutdown::Write).expect("FIN");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let (mut got, mut ended) = (0usize, false);
    let mut head = [0u8; 9];
    while !ended && c.read_exact(&mut head).is_ok() {
        let n = (usize::from(head[0]) << 16) | (usize::from(head[1]) << 8) | usize::from(head[2]);
        let mut payload = vec![0u8; n];
        c.read_exact(&mut payload).expect("a frame's payload");
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        if head[3] == 0 && id == 1 {
            got += n;
            ended = head[4] & 1 != 0;
        }
    }
    assert_eq!(
        (got, ended),
        (1_000_000, true),
        "h2c: DATA bytes, END_STREAM"
    );

    let mut c = TcpStream::connect(&plain).expect("connect");
    c.write_all(b"GET /bytes/1000000 HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    c.shutdown(std::net::Shutdown::Write).expect("FIN");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut r = std::io::BufReader::new(c);
    assert_eq!(read_filler_response(&mut r), 1_000_000, "HTTP/1.1");
}

/// One request for `path` over cleartext HTTP/1.1: the status code and how long it took.
fn h1_status(addr: &str, path: &str) -> (u16, Duration) {
    let t0 = Instant::now();
    let answer = h1_exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap_or_default();
    let code = answer.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (code, t0.elapsed())
}

/// A FIFO and a symlink to one in --dir: 403 at once on HTTP/1.1 and HTTP/2, and another file
/// from the same server is answered meanwhile (opening the FIFO blocked a runtime thread
/// until a writer came: the other file timed out on h1 and h2).
#[test]
fn a_fifo_in_dir_gets_403_and_stalls_nothing() {
    let dir = common::tempfile_dir::TempDir::new("hxlab-fifo");
    std::fs::write(dir.path().join("a.txt"), b"hello").expect("a file");
    let fifo = std::ffi::CString::new(dir.path().join("fifo").to_string_lossy().as_bytes())
        .expect("a path");
    // SAFETY: a NUL-terminated path we own.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "mkfifo");
    std::os::unix::fs::symlink(dir.path().join("fifo"), dir.path().join("to-fifo"))
        .expect("a symlink");
    let d = dir.path().display().to_string();
    let server = Server::start(&["--no-h3", "--dir", &d]);
    let plain = server.ready.plain.to_string();
    let tls = server.ready.tls.to_string();
    for path in ["/static/fifo", "/static/to-fifo"] {
        let waiting: Vec<_> = (0..4)
            .map(|_| {
                let (plain, path) = (plain.clone(), path.to_string());
                std::thread::spawn(move || h1_status(&plain, &path))
            })
            .collect();
        let (code, took) = h1_status(&plain, "/static/a.txt");
        assert_eq!(code, 200, "another file meanwhile");
        assert!(took < Duration::from_secs(1), "another file took {took:?}");
        for w in waiting {
            let (code, took) = w.join().expect("client");
            assert_eq!(code, 403, "{path}");
            assert!(took < Duration::from_secs(1), "{path} took {took:?}");
        }
        for (flag, url) in [
            ("--http2-prior-knowledge", format!("http://{plain}{path}")),
            ("--http2", format!("https://{tls}{path}")),
        ] {
            let t0 = Instant::now();
            let (_, out, err) = run_with_timeout(
                Command::new("curl").args([
                    "-sk",
                    flag,
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code} %{http_version}",
                    &url,
                ]),
                Duration::from_secs(5),
            );
            assert_eq!(out.trim(), "403 2", "{url} over h2 ({flag}): {err}");
            assert!(
                t0.elapsed() < Duration::from_secs(2),
                "{url}: {:?}",
                t0.elapsed()
            );
        }
    }
}

/// A TCP connection to `to` from the local address `from` (another loopback address).
fn connect_from(from: std::net::Ipv4Addr, to: &str) -> std::io::Result<TcpStream> {
    use std::os::fd::FromRawFd;
    let to: std::net::SocketAddrV4 = to.parse().expect("an IPv4 address");
    let sa = |a: std::net::SocketAddrV4| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a new socket, owned at once by the TcpStream (closed on every path).
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is ours and open.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let local = sa(std::net::SocketAddrV4::new(from, 0));
    // SAFETY: a live sockaddr_in of `len` bytes.
    if unsafe { libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let remote = sa(to);
    // SAFETY: as above.
    if unsafe { libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(stream)
}

/// How many of `held` the server has closed: a read within `wait` sees EOF or a reset.
fn closed_by_server(held: &[TcpStream], wait: Duration) -> usize {
    held.iter()
        .filter(|c| {
            c.set_read_timeout(Some(wait)).expect("timeout");
            let mut byte = [0u8; 1];
            match (&mut &**c).read(&mut byte) {
                Ok(0) => true,
                Err(e) => !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ),
                Ok(_) => false,
            }
        })
        .count()
}

/// One address (127.0.0.2) opening far more connections than --tcp-max-per-address gets that
/// many, the rest closed at accept (counted, logged); a client on 127.0.0.1 is answered.
#[test]
fn one_address_cannot_take_every_tcp_connection() {
    let mut server = Server::start(&["--no-h3", "--tcp-max-per-address", "50"]);
    let plain = server.ready.plain.to_string();
    let attacker = std::net::Ipv4Addr::new(127, 0, 0, 2);
    let held: Vec<TcpStream> = (0..200)
        .filter_map(|_| connect_from(attacker, &plain).ok())
        .collect();
    assert_eq!(held.len(), 200, "the kernel completes every handshake");
    // The server has decided on all 200 once it counted 150 refusals (at most 20 s, however
    // loaded the machine); from 127.0.0.1, which the cap does not touch.
    let refused = |plain: &str| {
        common::serve_stats(plain)
            .protocol(Protocol::H1)
            .map(|p| p.refused)
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while refused(&plain) < Some(150) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    // The ones over the cap were closed: a read sees EOF or a reset at once.
    let closed = closed_by_server(&held, Duration::from_millis(200));
    assert_eq!(closed, 150, "connections over the cap closed");
    assert!(
        legit_get(&plain, Duration::from_secs(5)),
        "a client on 127.0.0.1"
    );
    assert_eq!(refused(&plain), Some(150), "refusals counted");
    drop(held);
    let log = server.child.stderr_text();
    assert!(log.contains("--tcp-max-per-address"), "logged: {log}");
}

/// Past --tcp-max-connections new connections are closed at accept (counted and logged), and
/// the slots come back when connections close.
#[test]
fn the_tcp_connection_cap_refuses_and_gives_slots_back() {
    let mut server = Server::start(&["--no-h3", "--tcp-max-connections", "20"]);
    let plain = server.ready.plain.to_string();
    let held: Vec<TcpStream> = (0..30)
        .map(|_| TcpStream::connect(&plain).expect("connect"))
        .collect();
    // Every connection over the cap is closed at once: a read sees EOF or a reset.
    let deadline = Instant::now() + Duration::from_secs(20);
    let closed = loop {
        let closed = closed_by_server(&held, Duration::from_millis(50));
        if closed >= 10 || Instant::now() >= deadline {
            break closed;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(closed, 10, "connections over the cap of 20 closed");
    drop(held);
    // The slots came back: a request is answered (retried while the closes land).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !legit_get(&plain, Duration::from_secs(2)) {
        assert!(Instant::now() < deadline, "no slot came back");
        std::thread::sleep(Duration::from_millis(100));
    }
    // At least the 10 (a retry above may have come before a slot was back).
    let stats = common::serve_stats(&plain);
    let refused = stats.protocol(Protocol::H1).map_or(0, |p| p.refused);
    assert!(refused >= 10, "refusals counted: {refused}");
    let log = server.child.stderr_text();
    assert!(log.contains("--tcp-max-connections"), "logged: {log}");
}

/// A million PRIORITY_UPDATE frames (16 MB) on one h2c connection, after one real request:
/// the server grows by at most 16 MB, spends CPU in proportion to what it read (it stops
/// reading once it has sent GOAWAY ENHANCE_YOUR_CALM, past 1,000 + 16 per request), and a
/// legitimate request is still answered.
#[test]
fn a_million_priority_updates_get_enhance_your_calm_in_bounded_memory() {
    let server = Server::start(&["--no-h3"]);
    let addr = server.ready.plain.to_string();
    let pid = server.child.id();
    let before = rss(pid);
    let cpu_before = cpu_seconds(pid);
    let mut c = h2c_connect(&addr);
    let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
    c.write_all(&h2_frame(1, 0x5, 1, &h2_request(2, "/bytes/10", None)))
        .unwrap();
    let mut batch = Vec::with_capacity(16 * 10_000);
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(20);
    'send: for round in 0..100u32 {
        batch.clear();
        for i in 0..10_000u32 {
            // Updates for streams not opened yet (kept, up to 16) and for closed ones.
            let id = 3 + 2 * ((round * 10_000 + i) % 100_000);
            let mut payload = id.to_be_bytes().to_vec();
            payload.extend_from_slice(b"u=0,i");
            batch.extend(h2_frame(0x10, 0, 0, &payload));
        }
        if Instant::now() > deadline || c.write_all(&batch).is_err() {
            break 'send;
        }
        sent += 10_000;
    }
    // What came back: the response, then GOAWAY ENHANCE_YOUR_CALM (0xb).
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut got = Vec::new();
    let mut buf = [0u8; 16384];
    while let Ok(n) = c.read(&mut buf) {
        if n == 0 {
            break;
        }
        got.extend_from_slice(&buf[..n]);
        if got.len() > 1 << 20 {
            break;
        }
    }
    let mut at = 0;
    let mut goaway = None;
    while at + 9 <= got.len() {
        let len = u32::from_be_bytes([0, got[at], got[at + 1], got[at + 2]]) as usize;
        if got[at + 3] == 7 && at + 9 + 8 <= got.len() {
            let p = &got[at + 9..];
            goaway = Some(u32::from_be_bytes([p[4], p[5], p[6], p[7]]));
        }
        at += 9 + len;
    }
    assert_eq!(
        goaway,
        Some(0xb),
        "GOAWAY ENHANCE_YOUR_CALM after {sent} updates"
    );
    let grown = rss(pid).saturating_sub(before);
    assert!(grown <= 16 << 20, "the server grew by {} MB", grown >> 20);
    // Reading and refusing 16 MB of frames would be well under a second of CPU; the server
    // stopped at the budget.
    let cpu = cpu_seconds(pid) - cpu_before;
    assert!(cpu < 2.0, "{cpu:.2} s of CPU for {sent} updates");
    assert!(
        legit_get(&addr, Duration::from_secs(10)),
        "a request after the flood"
    );
}

/// QPACK encoder-stream bytes of a client that sets the table to 4096 bytes (what the origin
/// advertises by default) and inserts `x-a: b` with a literal name, after the stream type.
const QPACK_INSERT_X_A: &[u8] = &[0x02, 0x3f, 0xe1, 0x1f, 0x43, b'x', b'-', b'a', 0x01, b'b'];

/// A HEADERS frame for GET / on localhost with the prefix `prefix` and the field lines
/// `extra` (see [`h3_request_with`]).
fn h3_dynamic_request(prefix: [u8; 2], extra: &[u8]) -> Vec<u8> {
    h3_request_with(prefix, "/", "localhost", extra)
}

/// The error code the server closed `conn` with within `limit`, if it did.
async fn h3_closed_with(conn: &quinn::Connection, limit: Duration) -> Option<u64> {
    match tokio::time::timeout(limit, conn.closed()).await {
        Ok(quinn::ConnectionError::ApplicationClosed(c)) => Some(c.error_code.into_inner()),
        _ => None,
    }
}

/// On a fresh h3 connection: opens a client uni stream with `uni` (its type first), then a
/// request stream with `request` (when not empty); the code the server closed with.
fn h3_qpack_attack(addr: std::net::SocketAddr, uni: &[u8], request: &[u8]) -> Option<u64> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_ep, conn, _control) = common::h3_connect(addr).await;
        let mut s = conn.open_uni().await.expect("uni stream");
        s.write_all(uni).await.expect("QPACK stream bytes");
        let mut streams = Vec::new();
        if !request.is_empty() {
            let (mut send, recv) = conn.open_bi().await.expect("request stream");
            send.write_all(request).await.expect("request");
            let _ = send.finish();
            streams.push((send, recv));
        }
        let code = h3_closed_with(&conn, Duration::from_secs(10)).await;
        drop(s);
        code
    })
}

/// A client's QPACK encoder stream that breaks the table's rules (an insert larger than the
/// capacity, a capacity above what we advertised) closes the connection with
/// QPACK_ENCODER_STREAM_ERROR; a field section referencing an entry outside its Required
/// Insert Count, or one evicted, with QPACK_DECOMPRESSION_FAILED. Each time a legitimate
/// client is served afterwards.
#[test]
fn qpack_encoder_stream_and_reference_violations_close_the_connection() {
    let server = Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    // Capacity 4096, then "x: <5000 bytes>" inserted with a literal name.
    let mut big = vec![0x02, 0x3f, 0xe1, 0x1f, 0x41, b'x'];
    hxlab_wire::prefix::write(&mut big, 0x00, 7, 5000);
    big.extend(std::iter::repeat_n(b'v', 5000));
    assert_eq!(
        h3_qpack_attack(addr, &big, &[]),
        Some(0x201),
        "insert past capacity"
    );
    // Capacity 8192 against the 4096 we advertised.
    let over = [0x02, 0x3f, 0xe1, 0x3f];
    assert_eq!(
        h3_qpack_attack(addr, &over, &[]),
        Some(0x201),
        "capacity above ours"
    );
    // One insert, then a section with Required Insert Count 1 (encoded 2), Base 1, whose
    // post-base reference 0 is absolute index 1: not below the Required Insert Count.
    let beyond = h3_dynamic_request([0x02, 0x00], &[0x10]);
    assert_eq!(
        h3_qpack_attack(addr, QPACK_INSERT_X_A, &beyond),
        Some(0x200),
        "a reference past the Required Insert Count"
    );
    // Capacity 64: "a: b" (34 bytes) then "c: d" evicts it; a section with Required Insert
    // Count 2 (encoded 3), Base 2, referencing relative index 1 (the evicted entry).
    let evicting = [
        0x02, 0x3f, 0x21, 0x41, b'a', 0x01, b'b', 0x41, b'c', 0x01, b'd',
    ];
    let evicted = h3_dynamic_request([0x03, 0x00], &[0x81]);
    assert_eq!(
        h3_qpack_attack(addr, &evicting, &evicted),
        Some(0x200),
        "a reference to an evicted entry"
    );
    h3_requests_answered(&tls, 5, "h3 after the QPACK violations");
}

/// A request head blocked forever (its Required Insert Count never reached) is reset with
/// H3_REQUEST_CANCELLED after the 5 s deadline and cancelled on our decoder stream, while the
/// same connection goes on serving; one whose stream the client resets is cancelled at once;
/// more blocked streams than the 100 we advertised close it with QPACK_DECOMPRESSION_FAILED.
#[test]
fn blocked_qpack_streams_are_bounded_in_time_and_number() {
    let server = Server::start(&["--max-streams", "200"]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_ep, conn, _control) = common::h3_connect(addr).await;
        // The server's decoder stream (type 0x03), read as it comes.
        let decoder_stream = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c2, seen) = (conn.clone(), decoder_stream.clone());
        tokio::spawn(async move {
            while let Ok(mut r) = c2.accept_uni().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut kind = [0u8; 1];
                    if r.read_exact(&mut kind).await.is_err() || kind[0] != 0x03 {
                        return;
                    }
                    let mut buf = [0u8; 256];
                    while let Ok(Some(n)) = r.read(&mut buf).await {
                        seen.lock().expect("lock").extend_from_slice(&buf[..n]);
                    }
                });
            }
        });
        // Required Insert Count 5 (encoded 6): nothing is ever inserted.
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        send.write_all(&h3_dynamic_request([0x06, 0x00], &[0x80]))
            .await
            .expect("blocked head");
        let _ = send.finish();
        let t0 = Instant::now();
        // A static-only request on the same connection is answered meanwhile.
        let (mut s2, mut r2) = conn.open_bi().await.expect("stream");
        s2.write_all(&h3_request("/bytes/10", "localhost"))
            .await
            .expect("request");
        let _ = s2.finish();
        let answer = tokio::time::timeout(Duration::from_secs(4), r2.read_to_end(1 << 16))
            .await
            .expect("answered within 4 s")
            .expect("a response");
        assert!(answer.ends_with(b"xxxxxxxxxx"), "{answer:02x?}");
        let mut buf = [0u8; 64];
        let reset = tokio::time::timeout(Duration::from_secs(15), recv.read(&mut buf)).await;
        let took = t0.elapsed();
        match reset {
            Ok(Err(quinn::ReadError::Reset(c))) => assert_eq!(c.into_inner(), 0x10c),
            other => panic!("the blocked stream was not reset: {other:?}"),
        }
        assert!(
            took >= Duration::from_millis(4500) && took < Duration::from_secs(10),
            "reset after {took:?}"
        );
        // The decoder forgot it and told our encoder: Stream Cancellation of stream 0.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(*decoder_stream.lock().expect("lock"), vec![0x40]);
        // A blocked head whose stream the client resets is cancelled at once (stream 8).
        let (mut send, _recv) = conn.open_bi().await.expect("stream");
        send.write_all(&h3_dynamic_request([0x06, 0x00], &[0x80]))
            .await
            .expect("blocked head");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = send.reset(quinn::VarInt::from_u32(0x10c));
        let t1 = Instant::now();
        while decoder_stream.lock().expect("lock").len() < 2
            && t1.elapsed() < Duration::from_secs(3)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(*decoder_stream.lock().expect("lock"), vec![0x40, 0x48]);
        assert!(
            t1.elapsed() < Duration::from_secs(2),
            "cancelled after {:?}",
            t1.elapsed()
        );
    });
    let st = common::serve_stats(&server.ready.plain.to_string()).h3_qpack;
    assert_eq!((st.blocked_streams, st.blocked_resets), (2, 1), "{st:?}");
    // 101 blocked streams against the 100 we allow.
    let code = rt.block_on(async {
        let (_ep, conn, _control) = common::h3_connect(addr).await;
        let mut held = Vec::new();
        for _ in 0..101 {
            let Ok((mut send, recv)) = conn.open_bi().await else {
                break;
            };
            if send
                .write_all(&h3_dynamic_request([0x06, 0x00], &[0x80]))
                .await
                .is_err()
            {
                break;
            }
            held.push((send, recv));
        }
        h3_closed_with(&conn, Duration::from_secs(10)).await
    });
    assert_eq!(code, Some(0x200), "101 blocked streams");
    h3_requests_answered(&tls, 5, "h3 after the blocked streams");
}

/// A client's QPACK decoder stream flooding a million Stream Cancellations costs bounded
/// memory and leaves the connection serving; a Section Acknowledgment for a section never
/// sent, or an Insert Count Increment past our inserts, closes it with
/// QPACK_DECODER_STREAM_ERROR.
#[test]
fn a_qpack_decoder_stream_flood_is_bounded_and_bogus_acks_are_errors() {
    let server = Server::start(&[]);
    let tls = server.ready.tls.to_string();
    let addr: std::net::SocketAddr = tls.parse().expect("addr");
    let pid = server.child.id();
    let before = rss(pid);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (_ep, conn, _control) = common::h3_connect(addr).await;
        let mut dec = conn.open_uni().await.expect("decoder stream");
        dec.write_all(&[0x03]).await.expect("type");
        // Stream Cancellation (01xxxxxx) of streams 0..63, a million of them.
        let batch: Vec<u8> = (0..100_000u32).map(|i| 0x40 | (i % 64) as u8).collect();
        for _ in 0..10 {
            dec.write_all(&batch).await.expect("cancellations");
        }
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        send.write_all(&h3_request("/bytes/10", "localhost"))
            .await
            .expect("request");
        let _ = send.finish();
        let answer = tokio::time::timeout(Duration::from_secs(10), recv.read_to_end(1 << 16))
            .await
            .expect("answered after the flood")
            .expect("a response");
        assert!(answer.ends_with(b"xxxxxxxxxx"));
        drop(dec);
    });
    let grown = rss(pid).saturating_sub(before);
    assert!(grown < 16 << 20, "the server grew by {} MB", grown >> 20);
    // Section Acknowledgment (1xxxxxxx) for stream 0, which had no dynamic section.
    assert_eq!(h3_qpack_attack(addr, &[0x03, 0x80], &[]), Some(0x202));
    // Insert Count Increment (00xxxxxx) of 5: we inserted nothing.
    assert_eq!(h3_qpack_attack(addr, &[0x03, 0x05], &[]), Some(0x202));
    h3_requests_answered(&tls, 5, "h3 after the decoder-stream attacks");
}
