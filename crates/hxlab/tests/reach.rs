//! The emulated link reaches what this machine reaches: a "remote host" (a network namespace
//! this test makes, with a veth pair and addresses of its own) through translation, servers
//! bound to 127.0.0.1 here through `--expose`, names through a resolver the test runs
//! (dnsmasq in the remote namespace), and nothing global is left changed — not even after
//! SIGKILL. Root, `ip`, `nft`, `curl`, `dnsmasq` and Chromium are needed (the one skip rule:
//! it fails under CI).

mod common;

use common::{hxlab, run_with_timeout, PeerProcess};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The tests here compare global network state before and after; one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What a link could change and must not leave changed: every nftables rule, forwarding and
/// route_localnet of every device (and globally), routes and rules. Devices a link makes are
/// part of it while it runs, so after it has gone they must be gone too.
fn network_state() -> String {
    let mut s = sh(&["nft", "list", "ruleset"]);
    s += &sh(&["ip", "route", "show", "table", "all"]);
    s += &sh(&["ip", "rule"]);
    s += &std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap();
    let mut devs: Vec<_> = std::fs::read_dir("/proc/sys/net/ipv4/conf")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    devs.sort();
    for d in devs {
        for key in ["forwarding", "route_localnet"] {
            let v = std::fs::read_to_string(format!("/proc/sys/net/ipv4/conf/{d}/{key}"))
                .unwrap_or_default();
            s += &format!("{d}.{key}={v}");
        }
    }
    s
}

/// Waits (≤ 10 s) until the state is `before` again; the difference if it never is.
fn back_to(before: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = network_state();
        if now == before {
            return Ok(());
        }
        if Instant::now() > deadline {
            let diff: Vec<_> = now
                .lines()
                .filter(|l| !before.lines().any(|b| b == *l))
                .chain(
                    before
                        .lines()
                        .filter(|b| !now.lines().any(|l| l == *b))
                        .map(|_| "(a line gone)"),
                )
                .collect();
            return Err(diff.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A "remote host": a network namespace with a veth pair to this one, its end at
/// 10.253.X.2/30 and ours at .1 (no forwarding here, no route beyond). Deleted on drop.
struct Remote {
    ns: String,
    addr: String,
    /// The veth end on this side.
    outer: String,
}

impl Remote {
    fn new() -> Remote {
        static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = (std::process::id() + 7 * n) % 250;
        let ns = format!("hxt-reach-{}-{n}", std::process::id());
        let (outer, inner) = (format!("hxr{id}o"), format!("hxr{id}i"));
        let _ = Command::new("ip")
            .args(["netns", "del", &ns])
            .stderr(Stdio::null())
            .status();
        sh(&["ip", "netns", "add", &ns]);
        let r = Remote {
            ns: ns.clone(),
            addr: format!("10.253.{id}.2"),
            outer: outer.clone(),
        };
        sh(&[
            "ip", "link", "add", &outer, "type", "veth", "peer", "name", &inner,
        ]);
        // No IPv6 link-local addresses: they come a moment later and would change the
        // routes the tests compare before and after a link.
        for dev in [&outer, &inner] {
            sh(&["ip", "link", "set", "dev", dev, "addrgenmode", "none"]);
        }
        sh(&["ip", "link", "set", &inner, "netns", &ns]);
        sh(&[
            "ip",
            "addr",
            "add",
            &format!("10.253.{id}.1/30"),
            "dev",
            &outer,
        ]);
        sh(&["ip", "link", "set", &outer, "up"]);
        let addr = format!("{}/30", r.addr);
        for args in [
            ["addr", "add", addr.as_str(), "dev", inner.as_str()].as_slice(),
            &["link", "set", &inner, "up"],
            &["link", "set", "lo", "up"],
        ] {
            let mut full = vec!["ip", "-n", ns.as_str()];
            full.extend_from_slice(args);
            sh(&full);
        }
        r
    }

    /// `program args…` inside the remote namespace.
    fn command(&self, program: &std::path::Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns]).arg(program);
        c
    }

    /// `hxlab serve` on the remote's address: the process and its TLS (= h3) and plain ports.
    fn serve(&self, dir: &std::path::Path) -> (PeerProcess, u16, u16) {
        serve(self.command(&hxlab()), &self.addr, dir)
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        // The pair goes at once with its end here; the namespace's own teardown is deferred.
        let _ = Command::new("ip")
            .args(["link", "del", &self.outer])
            .stderr(Stdio::null())
            .status();
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

/// `hxlab serve` bound to `bind` (started by `cmd`, which runs hxlab): the process and its TLS
/// and plain ports.
fn serve(mut cmd: Command, bind: &str, dir: &std::path::Path) -> (PeerProcess, u16, u16) {
    let ready = dir.join("ready.json");
    let _ = std::fs::remove_file(&ready);
    let mut server = PeerProcess::spawn(
        cmd.args([
            "serve",
            "--bind",
            bind,
            "--tls-port",
            "0",
            "--plain-port",
            "0",
        ])
        .args(["--threads", "1", "--ready-file"])
        .arg(&ready)
        .stdin(Stdio::null())
        .stdout(Stdio::null()),
    );
    let r = server.wait_until("ready (--ready-file)", Duration::from_secs(20), || {
        hxlab_contract::ReadyFile::read(&ready).ok()
    });
    (server, r.tls.port(), r.plain.port())
}

/// `hxlab link ARGS -- hxlab load --proto P -k -n 10 -c 1 URL`: the median latency (µs) of
/// ten requests that all got 200.
fn load_through_link(link: &[&str], proto: &str, url: &str) -> u64 {
    let script = format!(
        "exec {} load --proto {proto} -k -n 10 -c 1 --no-progress -q --json - {url}",
        hxlab().display()
    );
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("link")
            .args(link)
            .args(["--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{proto} {url}: {err}");
    let v: serde_json::Value = out
        .lines()
        .find(|l| l.starts_with('{'))
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("{proto}: no RunResult in {out} / {err}"));
    assert_eq!(v["status"]["200"], 10, "{proto} {url}: {v}");
    hxlab_core::LatencyHistogram::from_base64(v["histograms"]["latency"].as_str().unwrap())
        .expect("histogram")
        .quantile(0.5)
}

fn peers(names: &[&str]) -> bool {
    common::require_root("the link (network namespaces, TUN devices, nftables)")
        && names.iter().all(|n| common::require_peer(n).is_some())
}

/// A host beyond this machine is reached through the link — by curl, and by hxlab load over
/// h1, h2 and h3 — with the link's delay in every round trip; and afterwards forwarding,
/// nftables, routes and rules are exactly as before.
#[test]
fn a_remote_host_is_reached_through_the_link_over_h1_h2_and_h3() {
    if !peers(&["ip", "nft", "curl"]) {
        return;
    }
    let _one = serial();
    let remote = Remote::new();
    let dir = common::tempfile_dir::TempDir::new("hxlab-reach-remote");
    let (_server, tls, plain) = remote.serve(dir.path());
    let before = network_state();
    // 10 ms each way: connecting takes one 20 ms round trip; without the link it takes < 5 ms.
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .args(["link", "--delay", "10ms", "--", "curl", "-s", "-m", "10"])
            .args([
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{time_connect}",
                &format!("http://{}:{plain}/bytes/10", remote.addr),
            ]),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "curl through the link: {out} {err}");
    let (status, connect) = out.split_once(' ').expect("curl's -w");
    assert_eq!(status, "200", "{out}");
    let connect: f64 = connect.trim().parse().expect("time_connect");
    assert!(
        (0.019..5.0).contains(&connect),
        "connect took {connect} s through a 20 ms RTT"
    );
    for proto in ["h1", "h2", "h3"] {
        let url = format!("https://{}:{tls}/bytes/1000", remote.addr);
        let p50 = load_through_link(&["--delay", "10ms"], proto, &url);
        // One request at a time on a kept connection: one 20 ms round trip each, at least.
        assert!(
            (19_000..2_000_000).contains(&p50),
            "{proto}: p50 {p50} µs through a 20 ms RTT link"
        );
    }
    back_to(&before).unwrap_or_else(|d| panic!("left behind after the link exited:\n{d}"));
}

/// A server bound to 127.0.0.1 here is out of the namespace's reach (its loopback is its
/// own) until its port is exposed; then h2 and h3 reach it at $HXLAB_LINK_HOST.
#[test]
fn a_server_bound_to_loopback_is_reached_on_the_ports_exposed() {
    if !peers(&["ip", "nft"]) {
        return;
    }
    let _one = serial();
    let dir = common::tempfile_dir::TempDir::new("hxlab-reach-loopback");
    let (_server, tls, _) = serve(Command::new(hxlab()), "127.0.0.1", dir.path());
    let url = format!("https://$HXLAB_LINK_HOST:{tls}/bytes/1000");
    let expose = tls.to_string();
    for proto in ["h2", "h3"] {
        let p50 = load_through_link(&["--delay", "5ms", "--expose", &expose], proto, &url);
        assert!(
            (9_000..2_000_000).contains(&p50),
            "{proto}: p50 {p50} µs through a 10 ms RTT link"
        );
    }
    let script = format!(
        "exec {} load --proto h2 -k -n 1 --no-progress -q {url}",
        hxlab().display()
    );
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab()).args(["link", "--delay", "5ms", "--", "sh", "-c", &script]),
        Duration::from_secs(60),
    );
    assert_ne!(code, Some(0), "reached 127.0.0.1 without --expose: {err}");
}

/// `--dns` gives the command the resolver named (dnsmasq in the remote namespace, never this
/// machine's): a name only it knows is resolved and reached through the link.
#[test]
fn dns_inside_uses_the_resolver_given() {
    if !peers(&["ip", "nft", "curl", "dnsmasq"]) {
        return;
    }
    let _one = serial();
    let remote = Remote::new();
    let dir = common::tempfile_dir::TempDir::new("hxlab-reach-dns");
    let (_server, _, plain) = remote.serve(dir.path());
    let dnsmasq = common::require_peer("dnsmasq").unwrap();
    let _dns = PeerProcess::spawn(
        remote
            .command(&dnsmasq)
            .args([
                "--keep-in-foreground",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
            ])
            .args(["--user=root", "--port=53", "--log-facility=-"])
            .arg(format!("--listen-address={}", remote.addr))
            .arg(format!("--address=/site.hxlab-test/{}", remote.addr))
            .arg(format!(
                "--pid-file={}",
                dir.path().join("dnsmasq.pid").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    let url = format!("http://site.hxlab-test:{plain}/bytes/10");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab())
                .args(["link", "--delay", "5ms", "--dns", &remote.addr, "--"])
                .args([
                    "curl",
                    "-s",
                    "-m",
                    "5",
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    &url,
                ]),
            Duration::from_secs(30),
        );
        if code == Some(0) && out == "200" {
            break;
        }
        // dnsmasq may still be starting.
        assert!(
            Instant::now() < deadline,
            "curl {url} with --dns {}: {code:?} {out} {err}",
            remote.addr
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// SIGKILL of `hxlab link` mid-run (with a port exposed, so every kind of change is made)
/// leaves forwarding, nftables, routes and rules exactly as before.
#[test]
fn sigkill_leaves_no_network_state_behind() {
    if !peers(&["ip", "nft"]) {
        return;
    }
    let _one = serial();
    let before = network_state();
    let mut link = PeerProcess::spawn(
        Command::new(hxlab())
            .args([
                "link", "--delay", "5ms", "--expose", "9", "--", "sleep", "60",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    );
    link.wait_until("its nftables table", Duration::from_secs(15), || {
        sh(&["nft", "list", "tables"])
            .contains("hxlab-link-")
            .then_some(())
    });
    assert_ne!(network_state(), before, "the running link changed nothing");
    // SAFETY: kill has no memory preconditions; the pid is our child's.
    unsafe { libc::kill(link.id() as i32, libc::SIGKILL) };
    let _ = link.wait();
    back_to(&before).unwrap_or_else(|d| panic!("left behind after SIGKILL:\n{d}"));
}

/// `hxlab page` behind a link reaches a server bound to 127.0.0.1 here, by address and by a
/// name that leads to loopback (`*.localhost`, which the browser resolves itself), over h2
/// and h3: the URL's port is exposed on its own.
#[test]
fn page_reaches_a_server_bound_to_loopback_by_address_and_by_name() {
    if !peers(&["ip", "nft", "chromium"]) {
        return;
    }
    let _one = serial();
    let dir = common::tempfile_dir::TempDir::new("hxlab-reach-page");
    let ready = dir.path().join("ready.json");
    let (_server, tls, _) = serve(Command::new(hxlab()), "127.0.0.1", dir.path());
    let spki = hxlab_contract::ReadyFile::read(&ready)
        .unwrap()
        .spki_sha256
        .clone();
    for (host, proto) in [("127.0.0.1", "h2"), ("book.localhost", "h3")] {
        let url = format!("https://{host}:{tls}/page?n=2&size=1000");
        let (code, out, err) = run_with_timeout(
            Command::new(hxlab()).args([
                "page", &url, "--spki", &spki, "--proto", proto, "--delay", "10ms", "--runs", "1",
                "--json", "-",
            ]),
            Duration::from_secs(120),
        );
        assert_eq!(code, Some(0), "{url} over {proto}: {err}");
        let report = common::page_report_of(&out).expect("page report");
        assert_eq!(report.runs.len(), 1, "{url}: {out}");
        let run = common::measured(&report.runs[0]);
        assert_eq!(run.resources_loaded, 3, "{url} over {proto}: {out}");
        assert_eq!(
            run.protocols.get(proto),
            Some(&3),
            "{url}: {:?}",
            run.protocols
        );
    }
}
