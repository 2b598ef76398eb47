//! `hxlab link` and the `hxlab_link::Link` API against real sockets, namespaces and TUN
//! devices (root needed: without it each test skips through the one skip rule, which fails under CI).

mod common;

use common::{hxlab, run_with_timeout};
use hxlab_link::model::{direction_seed, Rng};
use hxlab_link::{Direction, Link, LinkConfig, Loss, Server};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A UDP echo server outside (on 0.0.0.0), for a bounded time.
fn udp_echo() -> (u16, std::thread::JoinHandle<()>) {
    let sock = UdpSocket::bind("0.0.0.0:0").expect("bind echo");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let port = sock.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 2048];
        let mut idle = 0;
        while Instant::now() < deadline && idle < 25 {
            match sock.recv_from(&mut buf) {
                Ok((n, from)) => {
                    idle = 0;
                    let _ = sock.send_to(&buf[..n], from);
                }
                Err(_) => idle += 1,
            }
        }
    });
    (port, h)
}

#[test]
fn delay_20ms_each_way_gives_40ms_rtt() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let link = Link::start(LinkConfig::default().with_delay(Duration::from_millis(20)))
        .expect("start link");
    let (port, echo) = udp_echo();
    let host = link.host_addr();
    let rtts = link
        .spawn_inside(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut rtts = Vec::new();
            let mut buf = [0u8; 64];
            for i in 0..30u32 {
                let t = Instant::now();
                s.send_to(&i.to_be_bytes(), (host, port)).unwrap();
                if s.recv_from(&mut buf).is_ok() {
                    rtts.push(t.elapsed());
                }
            }
            rtts
        })
        .unwrap()
        .join()
        .unwrap()
        .expect("enter namespace");
    let stats = link.stop();
    echo.join().unwrap();
    assert!(
        rtts.len() >= 28,
        "only {} of 30 probes came back",
        rtts.len()
    );
    let mut sorted = rtts.clone();
    sorted.sort();
    let p50 = sorted[sorted.len() / 2];
    assert!(
        p50 >= Duration::from_millis(39) && p50 <= Duration::from_millis(50),
        "p50 RTT {p50:?}"
    );
    assert!(
        stats.up.packets_out >= 28 && stats.down.packets_out >= 28,
        "{stats:?}"
    );
}

#[test]
fn rate_10mbit_limits_tcp_goodput() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let mut cfg = LinkConfig::default().with_delay(Duration::from_millis(5));
    cfg.down.server = Server::Rate(10_000_000);
    let link = Link::start(cfg).expect("start link");
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    const TOTAL: usize = 3_000_000;
    let server = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut sent = 0;
        while sent < TOTAL {
            let n = chunk.len().min(TOTAL - sent);
            if c.write_all(&chunk[..n]).is_err() {
                break;
            }
            sent += n;
        }
    });
    let host = link.host_addr();
    let (bytes, secs) = link
        .spawn_inside(move || {
            let mut c =
                std::net::TcpStream::connect_timeout(&(host, port).into(), Duration::from_secs(5))
                    .unwrap();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            // Time from the first byte, so the handshake and slow start's first RTT do not count.
            let mut got = c.read(&mut buf).unwrap();
            let t = Instant::now();
            let start_bytes = got;
            while got < TOTAL {
                match c.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
            }
            (got - start_bytes, t.elapsed().as_secs_f64())
        })
        .unwrap()
        .join()
        .unwrap()
        .expect("enter namespace");
    server.join().unwrap();
    let stats = link.stop();
    let mbit = bytes as f64 * 8.0 / secs / 1e6;
    // 10 Mbit/s less TCP/IP header overhead is ≈ 9.6 Mbit/s; loose bounds for a busy machine.
    assert!((7.5..=10.1).contains(&mbit), "goodput {mbit:.2} Mbit/s");
    assert!(stats.down.bytes_out as usize > TOTAL, "{stats:?}");
}

#[test]
fn random_loss_within_binomial_bounds() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let mut cfg = LinkConfig::default();
    cfg.up.loss = Loss::Random(0.05);
    cfg.seed = 11;
    let link = Link::start(cfg).expect("start link");
    let sink = UdpSocket::bind("0.0.0.0:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let port = sink.local_addr().unwrap().port();
    let host = link.host_addr();
    const N: u32 = 2000;
    // Receive concurrently, so the socket buffer never overflows.
    let receiver = std::thread::spawn(move || {
        let mut received = 0u32;
        let mut buf = [0u8; 64];
        while received < N && sink.recv_from(&mut buf).is_ok() {
            received += 1;
        }
        received
    });
    link.spawn_inside(move || {
        let s = UdpSocket::bind("0.0.0.0:0").unwrap();
        for i in 0..N {
            let _ = s.send_to(&i.to_be_bytes(), (host, port));
            // Paced so that no kernel queue overflows: only the link may lose packets.
            if i % 20 == 19 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    })
    .unwrap()
    .join()
    .unwrap()
    .expect("enter namespace");
    let received = receiver.join().unwrap();
    let stats = link.stop();
    let lost = N - received;
    // n = 2000, p = 5 %: mean 100, sd ≈ 9.7; ±4 sd (99.99 %) is 61..=139.
    assert!((61..=139).contains(&lost), "lost {lost} of {N}");
    assert_eq!(
        stats.up.dropped_loss, lost as u64,
        "link counters disagree with what arrived: {stats:?}"
    );
}

/// A tiny HTTP/1.1 server outside that answers every request with `size` bytes.
fn http_server(size: usize) -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(40);
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((mut c, _)) => {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let mut r = BufReader::new(c.try_clone().unwrap());
                    let mut line = String::new();
                    while r.read_line(&mut line).map(|n| n > 0).unwrap_or(false) {
                        if line == "\r\n" {
                            break;
                        }
                        line.clear();
                    }
                    let _ = write!(
                        c,
                        "HTTP/1.1 200 OK\r\ncontent-length: {size}\r\nconnection: close\r\n\r\n"
                    );
                    let _ = c.write_all(&vec![b'x'; size]);
                    return;
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    (port, h)
}

#[test]
fn profile_end_to_end_with_curl() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let Some(curl) = common::require_peer("curl") else {
        return;
    };
    let (port, server) = http_server(600_000);
    let dir = common::tempfile_dir::TempDir::new("hxlab-link");
    let stats_path = dir.path().join("stats.json");
    // wpt:Cable: 5 Mbit/s down, 1 Mbit/s up, 28 ms RTT.
    let script = format!(
        "{} -s -o /dev/null -w '%{{time_connect}} %{{speed_download}}\\n' http://$HXLAB_LINK_HOST:{port}/x",
        curl.display()
    );
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["link", "--profile", "WPT:cable", "--stats"])
            .arg(&stats_path)
            .args(["--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    server.join().unwrap();
    assert_eq!(code, Some(0), "stdout {out} stderr {err}");
    let mut it = out.split_whitespace();
    let connect: f64 = it
        .next()
        .and_then(|x| x.parse().ok())
        .expect("curl time_connect");
    let speed: f64 = it.next().and_then(|x| x.parse().ok()).expect("curl speed");
    assert!(
        (0.027..0.2).contains(&connect),
        "TCP connect {connect} s through a 28 ms RTT"
    );
    let mbit = speed * 8.0 / 1e6;
    assert!(
        (1.5..=5.1).contains(&mbit),
        "download at {mbit:.2} Mbit/s through a 5 Mbit/s link"
    );
    let stats =
        hxlab_contract::LinkStatsFile::from_json(&std::fs::read_to_string(&stats_path).unwrap())
            .expect("hxlab link --stats");
    assert_eq!(stats.profile.as_deref(), Some("wpt:Cable"));
    assert!(stats.down.bytes_out > 600_000, "{stats:?}");
    assert!(stats.up.packets_out > 10, "{stats:?}");
}

#[test]
fn exit_status_and_environment_propagate() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "link",
            "--",
            "sh",
            "-c",
            "echo $HXLAB_LINK_HOST $HXLAB_LINK_CLIENT; ip route show default; exit 7",
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(7), "stderr {err}");
    let mut words = out.split_whitespace();
    let host: std::net::Ipv4Addr = words
        .next()
        .and_then(|x| x.parse().ok())
        .expect("HXLAB_LINK_HOST");
    let client: std::net::Ipv4Addr = words
        .next()
        .and_then(|x| x.parse().ok())
        .expect("HXLAB_LINK_CLIENT");
    assert_eq!(host.octets()[0], 100);
    assert_eq!(u32::from(client), u32::from(host) + 1);
    assert!(
        out.contains("default dev hxlab-i-"),
        "inside default route: {out}"
    );
}

fn addr_present(addr: &str) -> bool {
    let out = Command::new("ip")
        .args(["-o", "addr"])
        .output()
        .expect("run ip");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .any(|w| w == addr || w.starts_with(&format!("{addr}/")))
}

fn pid_alive(pid: u32) -> bool {
    // A zombie is as good as gone: it holds no namespace or device.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

/// Starts `hxlab link -- sleep 30`; returns the child, the HOST address and the pid of its
/// child (the process that holds COMMAND's PID namespace; it exits when COMMAND does).
fn start_sleeper() -> (std::process::Child, String, u32) {
    let mut child = Command::new(hxlab())
        .args(["link", "--delay", "1ms", "--", "sleep", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hxlab link");
    let mut line = String::new();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    err.read_line(&mut line).unwrap();
    std::thread::spawn(move || for _ in err.lines() {});
    let host = line
        .split_whitespace()
        .nth(3)
        .expect("banner with HOST")
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    let sleep_pid = loop {
        let children =
            std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id()))
                .unwrap_or_default();
        if let Some(p) = children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "COMMAND did not start");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        addr_present(&host),
        "HOST {host} not configured while running"
    );
    (child, host, sleep_pid)
}

fn wait_gone(host: &str, pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while (addr_present(host) || pid_alive(pid)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!addr_present(host), "TUN device with {host} left behind");
    assert!(!pid_alive(pid), "COMMAND (pid {pid}) left behind");
}

#[test]
fn nothing_left_behind_after_exit_sigterm_and_sigkill() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    // Normal exit, including a background grandchild COMMAND left in the namespace (found by
    // its command line: COMMAND runs in a PID namespace of its own, so `$!` is not a PID
    // out here). A duration no other test uses.
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "link",
            "--",
            "sh",
            "-c",
            "sleep 3071 & echo $HXLAB_LINK_HOST",
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(0), "{err}");
    let host = out.split_whitespace().next().expect("host").to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !common::pids_running(&["sleep", "3071"]).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        common::pids_running(&["sleep", "3071"]).is_empty(),
        "the background sleep outlived the link"
    );
    wait_gone(&host, 0);

    // SIGTERM is forwarded to COMMAND; hxlab returns its status (128 + 15).
    let (mut child, host, pid) = start_sleeper();
    Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "hxlab link did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(143));
    wait_gone(&host, pid);

    // SIGKILL: the kernel cleans up (PDEATHSIG, non-persistent TUN, namespace refcount).
    let (mut child, host, pid) = start_sleeper();
    child.kill().unwrap();
    child.wait().unwrap();
    wait_gone(&host, pid);
}

/// `hxlab link --config FILE` runs the link the JSON describes (the lab's way in): the
/// delay it names is the delay the packets see.
#[test]
fn a_link_from_its_json_form() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let dir = common::tempfile_dir::TempDir::new("hxlab-link-json");
    let file = dir.path().join("link.json");
    let cfg = LinkConfig {
        seed: 5,
        ..LinkConfig::default()
    }
    .with_delay(Duration::from_millis(30));
    std::fs::write(&file, cfg.to_json().unwrap()).unwrap();
    let stats = dir.path().join("stats.json");
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("link")
            .arg("--config")
            .arg(&file)
            .arg("--stats")
            .arg(&stats)
            .args(["--", "sh", "-c", "ping -c 2 -i 0.2 -W 2 $HXLAB_LINK_HOST"]),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    // "rtt min/avg/max/mdev = 60.2/60.3/60.4/0.1 ms": 30 ms each way.
    let min: f64 = out
        .rsplit("= ")
        .next()
        .and_then(|t| t.split('/').next())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or_else(|| panic!("no ping summary in {out}"));
    assert!(
        (60.0..80.0).contains(&min),
        "ping RTT {min} ms through 2 × 30 ms"
    );
    assert!(
        err.contains("delay 30ms"),
        "the banner describes the file's link: {err}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(v["seed"], 5);
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let dir = common::tempfile_dir::TempDir::new("hxlab-link-bad");
    let trace = dir.path().join("bad.trace");
    std::fs::write(&trace, "1\n2\nthree\n").unwrap();
    let trace = trace.display().to_string();
    // The JSON form is held to the same bounds (LinkConfig::validate).
    let slow = dir.path().join("slow.json");
    std::fs::write(&slow, r#"{"down": {"server": {"rate": 1}}}"#).unwrap();
    let slow = slow.display().to_string();
    let typo = dir.path().join("typo.json");
    std::fs::write(&typo, r#"{"dwon": {}}"#).unwrap();
    let typo = typo.display().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--config", &slow, "--", "true"], "1kbit"),
        (vec!["--config", &typo, "--", "true"], "dwon"),
        (
            vec!["--config", "/nonexistent.json", "--", "true"],
            "--config",
        ),
        (vec!["--profile", "5G", "--", "true"], "wpt:LTE"),
        (vec!["--profile", "3G", "--", "true"], "chrome:3G"),
        (vec!["--down-trace", &trace, "--", "true"], "bad.trace:3"),
        (vec!["--delay", "-5ms", "--", "true"], "negative"),
        (vec!["--delay", "2h", "--", "true"], "10 minutes"),
        (vec!["--loss", "150%", "--", "true"], "loss"),
        (vec!["--loss", "ge:1%,x", "--", "true"], "probability"),
        (vec!["--down", "0.5bit", "--", "true"], "rate"),
        (vec!["--queue", "0p", "--", "true"], "queue"),
        (vec!["--aqm", "red", "--", "true"], "codel"),
        (vec!["--seed", "-1", "--", "true"], "seed"),
        (vec!["--delay", "20ms"], "missing COMMAND"),
    ];
    for (args, needle) in cases {
        let (code, _out, err) = run_with_timeout(
            Command::new(hxlab()).arg("link").args(&args),
            Duration::from_secs(10),
        );
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim().lines().count(),
            1,
            "{args:?}: not one line: {err}"
        );
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
    }
    let (code, out, _) = run_with_timeout(
        Command::new(hxlab()).args(["link", "--list-profiles"]),
        Duration::from_secs(10),
    );
    assert_eq!(code, Some(0));
    assert!(
        out.contains("wpt:3G")
            && out.contains("chrome-legacy:Regular 2G")
            && out.contains("NetworkManager.ts")
    );
}

/// `hxlab serve` outside on 0.0.0.0; returns the process and the TLS (= h3 UDP) port.
fn serve_outside(dir: &std::path::Path) -> (common::PeerProcess, u16) {
    let ready = dir.join("ready.json");
    let mut server = common::PeerProcess::spawn(
        Command::new(hxlab())
            .args(["serve", "--bind", "0.0.0.0", "--tls-port", "0"])
            .args(["--plain-port", "0", "--threads", "1", "--ready-file"])
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    let port = server.wait_until("ready (--ready-file)", Duration::from_secs(20), || {
        hxlab_contract::ReadyFile::read(&ready)
            .ok()
            .map(|r| r.tls.port())
    });
    (server, port)
}

#[test]
fn h2_and_h3_through_the_link() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let dir = common::tempfile_dir::TempDir::new("hxlab-link-h3");
    // Killed and reaped even when an assertion fails.
    let (_server, port) = serve_outside(dir.path());
    for proto in ["h3", "h2"] {
        // 10 ms each way and 20 Mbit/s down: every request takes at least one 20 ms RTT.
        let script = format!(
            "exec {} load --proto {proto} -k -n 20 -c 2 --no-progress -q --json - https://$HXLAB_LINK_HOST:{port}/bytes/50000",
            hxlab().display()
        );
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab()).args([
                "link", "--delay", "10ms", "--down", "20mbit", "--", "sh", "-c", &script,
            ]),
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{proto}: {err}");
        let v: serde_json::Value = out
            .lines()
            .find(|l| l.starts_with('{'))
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| panic!("{proto}: no RunResult in {out} / {err}"));
        assert_eq!(v["status"]["200"], 20, "{proto}: {v}");
        let p50 = hxlab_core::LatencyHistogram::from_base64(
            v["histograms"]["latency"].as_str().expect("latency"),
        )
        .expect("histogram")
        .quantile(0.5);
        // 50 kB at 20 Mbit/s is 20 ms on the wire, plus the 20 ms RTT: ≥ 35 ms, well under 2 s.
        assert!(
            (35_000..2_000_000).contains(&p50),
            "{proto}: p50 {p50} µs through a 20 ms RTT link"
        );
    }
}

#[test]
fn stop_returns_promptly_with_packets_in_flight() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    for _ in 0..5 {
        let mut cfg = LinkConfig::default().with_delay(Duration::from_millis(30));
        cfg.up.server = Server::Rate(1_000_000);
        let link = Link::start(cfg).expect("start link");
        let sink = UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = sink.local_addr().unwrap().port();
        let host = link.host_addr();
        link.spawn_inside(move || {
            let s = UdpSocket::bind("0.0.0.0:0").unwrap();
            for i in 0..50u32 {
                let _ = s.send_to(&[i as u8; 1000], (host, port));
            }
        })
        .unwrap()
        .join()
        .unwrap()
        .expect("enter namespace");
        // Packets are queued behind a 1 Mbit/s bottleneck and 30 ms of delay; stopping must
        // still finish within its linger time (≤ 2 s), never hang.
        let t = Instant::now();
        let stats = link.stop();
        assert!(
            t.elapsed() < Duration::from_secs(3),
            "stop took {:?}",
            t.elapsed()
        );
        assert!(stats.up.packets_in >= 50, "{stats:?}");
    }
}

/// FNV-1a over a byte stream.
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= *b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// Byte `i` of the bulk transfers: not periodic at any segment size.
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 11)) as u8
}

/// Sends `total` pattern bytes over TCP from outside to inside through `link` (a bulk
/// download: the sender's kernel hands the outer TUN TSO super-packets); returns the bytes
/// and the FNV-1a hash the inside received.
fn bulk_down(link: &Link, total: usize) -> (usize, u64) {
    let listener = TcpListener::bind("0.0.0.0:0").expect("bind");
    let port = listener.local_addr().unwrap().port();
    let sender = std::thread::spawn(move || {
        let (mut c, _) = listener.accept().expect("accept");
        let mut chunk = vec![0u8; 64 * 1024];
        let mut sent = 0;
        while sent < total {
            let n = chunk.len().min(total - sent);
            for (k, b) in chunk[..n].iter_mut().enumerate() {
                *b = pattern(sent + k);
            }
            c.write_all(&chunk[..n]).expect("send");
            sent += n;
        }
    });
    let host = link.host_addr();
    let got = link
        .spawn_inside(move || {
            let mut c = std::net::TcpStream::connect((host, port)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
            let mut buf = vec![0u8; 256 * 1024];
            let (mut n, mut h) = (0usize, FNV_START);
            loop {
                match c.read(&mut buf) {
                    Ok(0) => break,
                    Ok(k) => {
                        h = fnv1a(h, &buf[..k]);
                        n += k;
                    }
                    Err(e) => panic!("read after {n} bytes: {e}"),
                }
            }
            (n, h)
        })
        .unwrap()
        .join()
        .unwrap()
        .expect("enter namespace");
    sender.join().unwrap();
    got
}

fn expected_hash(total: usize) -> u64 {
    let bytes: Vec<u8> = (0..total).map(pattern).collect();
    fnv1a(FNV_START, &bytes)
}

/// Every counted packet is at most one MTU: a GSO super-packet (up to 64 KiB) counted as one
/// packet would break this by far.
fn assert_counts_wire_packets(s: &hxlab_link::DirectionStats) {
    assert!(
        s.packets_in * 1500 >= s.bytes_in,
        "{} bytes in {} packets: more than 1500 bytes per packet",
        s.bytes_in,
        s.packets_in
    );
    assert!(s.packets_out * 1500 >= s.bytes_out, "{s:?}");
}

#[test]
fn bulk_tcp_through_a_pure_delay_link_is_intact_and_counted_in_segments() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let link = Link::start(LinkConfig::default().with_delay(Duration::from_millis(2)))
        .expect("start link");
    const TOTAL: usize = 48 << 20;
    let (n, h) = bulk_down(&link, TOTAL);
    let stats = link.stop();
    assert_eq!(n, TOTAL, "bytes delivered");
    assert_eq!(h, expected_hash(TOTAL), "content hash");
    assert_counts_wire_packets(&stats.down);
    assert_counts_wire_packets(&stats.up);
    // The payload alone needs this many 1500-byte packets; headers only add to it.
    assert!(stats.down.packets_in >= (TOTAL / 1500) as u64, "{stats:?}");
    assert!(stats.down.bytes_in >= TOTAL as u64, "{stats:?}");
    assert_eq!(stats.down.dropped(), 0, "{stats:?}");
}

#[test]
fn bulk_tcp_through_a_lossy_rate_limited_link_is_intact_and_loss_is_per_segment() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    let mut cfg = LinkConfig::default();
    cfg.down.loss = Loss::Random(0.01);
    cfg.down.server = Server::Rate(200_000_000);
    cfg.seed = 5;
    let link = Link::start(cfg).expect("start link");
    const TOTAL: usize = 12 << 20;
    let (n, h) = bulk_down(&link, TOTAL);
    let stats = link.stop();
    assert_eq!(n, TOTAL, "bytes delivered");
    assert_eq!(h, expected_hash(TOTAL), "content hash");
    let d = &stats.down;
    assert_counts_wire_packets(d);
    assert!(d.packets_in >= (TOTAL / 1500) as u64, "{stats:?}");
    // Loss is drawn once per wire packet: binomial on packets_in, ±6 sd.
    assert_binomial_loss("down", d, 0.01);
}

/// Asserts that `s.dropped_loss` is within ±6 standard deviations of a binomial draw of
/// `s.packets_in` segments at probability `p` (cannot flake: ~2e-9 per side).
fn assert_binomial_loss(what: &str, s: &hxlab_link::DirectionStats, p: f64) {
    let n = s.packets_in as f64;
    let (mean, sd) = (n * p, (n * p * (1.0 - p)).sqrt());
    let lost = s.dropped_loss as f64;
    assert!(
        (mean - 6.0 * sd..=mean + 6.0 * sd).contains(&lost),
        "{what}: lost {lost} of {n} segments (expected {mean:.0} ± {:.0}): {s:?}",
        6.0 * sd
    );
}

/// [`assert_binomial_loss`], and every segment that came in is accounted for exactly once:
/// delivered or dropped.
fn assert_binomial_loss_in_segments(what: &str, s: &hxlab_link::DirectionStats, p: f64) {
    assert_binomial_loss(what, s, p);
    assert_eq!(
        s.packets_out + s.dropped(),
        s.packets_in,
        "{what}: segments delivered + dropped ≠ segments in: {s:?}"
    );
}

#[test]
fn bulk_tcp_through_1pct_random_loss_is_intact_and_loss_is_binomial_in_segments() {
    if !common::require_root("the link (network namespaces, TUN devices)") {
        return;
    }
    // Loss only (no rate, no jitter): the link keeps super-packets whole between lost
    // segments, and each segment still draws its own loss.
    let mut cfg = LinkConfig::default();
    cfg.down.loss = Loss::Random(0.01);
    cfg.up.loss = Loss::Random(0.01);
    cfg.seed = 29;
    let link = Link::start(cfg).expect("start link");
    const TOTAL: usize = 32 << 20;
    let (n, h) = bulk_down(&link, TOTAL);
    let stats = link.stop();
    assert_eq!(n, TOTAL, "bytes delivered");
    assert_eq!(h, expected_hash(TOTAL), "content hash");
    assert_counts_wire_packets(&stats.down);
    assert_counts_wire_packets(&stats.up);
    assert!(stats.down.packets_in >= (TOTAL / 1500) as u64, "{stats:?}");
    assert_binomial_loss_in_segments("down", &stats.down, 0.01);
    assert_binomial_loss_in_segments("up", &stats.up, 0.01);
    // With a seed and nothing else drawing from the generator, the drops are fixed by how
    // many segments came in: one draw per segment, in order. A link that drew once per
    // super-packet would have made far fewer draws.
    for (dir, s) in [(Direction::Down, &stats.down), (Direction::Up, &stats.up)] {
        let mut rng = Rng::new(direction_seed(29, dir));
        let expected = (0..s.packets_in).filter(|_| rng.chance(0.01)).count() as u64;
        assert_eq!(
            s.dropped_loss, expected,
            "{dir:?}: one loss draw per segment: {s:?}"
        );
    }
}
