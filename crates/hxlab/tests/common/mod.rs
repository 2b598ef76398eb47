//! Shared helpers for the integration tests: the built binary, real peers, and an
//! `hxlab serve` started on free ports that is stopped when dropped. Every peer a test
//! starts goes through one guard, [`PeerProcess`] for a process and [`ThreadServer`] for a
//! server on the test's threads, and every missing peer through one skip rule
//! ([`require_peer`], [`require_root`]).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// GET /stats from `hxlab serve` at `plain` (its cleartext address) over HTTP/1.1.
pub fn serve_stats(plain: &str) -> hxlab_contract::StatsSnapshot {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(plain).expect("connect to serve");
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read timeout");
    conn.write_all(b"GET /stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("send GET /stats");
    let mut text = String::new();
    conn.read_to_string(&mut text).expect("read /stats");
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b)
        .unwrap_or_default();
    // The body may be chunked; the JSON object is the part between the outer braces.
    let (start, end) = (
        body.find('{').expect("json"),
        body.rfind('}').expect("json"),
    );
    hxlab_contract::StatsSnapshot::from_json(&body[start..=end]).expect("a /stats document")
}

/// PIDs whose command line is exactly `argv` (read from /proc).
pub fn pids_running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv.iter().flat_map(|a| a.bytes().chain([0])).collect();
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// An HTTP/2 frame: 9-byte head (length, type, flags, stream id) and `payload`.
pub fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// Path of the `hxlab` binary cargo built for these tests.
pub fn hxlab() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hxlab"))
}

// Missing peers and root go through the one skip rule (fails under CI, says why elsewhere).
// Not every test file uses every one.
#[allow(unused_imports)]
pub use hxlab_testkit::{is_root, require_peer, require_root};

/// The parts of a command line clap refused, as `hxlab` prints them (exit 2): the
/// `hxlab: error:` line, clap's indented details after it (missing arguments, possible
/// values, "tip: a similar argument exists"), and its usage line.
pub struct UsageError {
    /// The first line, without `hxlab: error: `.
    pub what: String,
    /// The indented lines between the first and the usage line, trimmed.
    pub details: Vec<String>,
    /// The `Usage: hxlab ...` line, when clap gave one.
    pub usage: Option<String>,
}

/// Reads `stderr` as a usage error clap refused; panics (naming `what` ran) when it is not one:
/// another first line, a line of another kind, or more than a few lines.
pub fn usage_error_of(what: &str, stderr: &str) -> UsageError {
    let lines: Vec<&str> = stderr.lines().collect();
    let first = lines.first().copied().unwrap_or_default();
    let Some(text) = first.strip_prefix("hxlab: error: ") else {
        panic!("{what}: stderr does not start with `hxlab: error:`\n{stderr}");
    };
    assert!(lines.len() <= 6, "{what}: not a few lines\n{stderr}");
    let mut error = UsageError {
        what: text.to_string(),
        details: Vec::new(),
        usage: None,
    };
    for (i, line) in lines.iter().enumerate().skip(1) {
        if line.starts_with("Usage: hxlab") && i == lines.len() - 1 {
            error.usage = Some(line.to_string());
        } else if line.starts_with("  ") && error.usage.is_none() {
            error.details.push(line.trim().to_string());
        } else {
            panic!(
                "{what}: line {} is neither a detail nor the usage line\n{stderr}",
                i + 1
            );
        }
    }
    error
}

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// How long a peer may take to accept on its ports.
const PEER_READY: Duration = Duration::from_secs(15);

/// The most of a peer's stderr kept for messages (the tail).
const STDERR_KEPT: usize = 64 * 1024;

/// A peer process a test started (a server it talks to, or a client it holds open), the one
/// guard every test uses for one: stopped and reaped when dropped, even when an assertion
/// fails, and its stderr kept for the message when it does not come up or a test fails.
/// Derefs to its [`Child`] (pid, pipes, `try_wait`).
pub struct PeerProcess {
    child: Child,
    name: String,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
    /// Time between SIGTERM and SIGKILL on drop (zero: SIGKILL at once).
    grace: Duration,
}

impl PeerProcess {
    /// Spawns `cmd` (see [`PeerProcess::spawn`]) and waits (at most 15 s) until every port in
    /// `ports` accepts on 127.0.0.1; panics with the peer's stderr if it exits first.
    pub fn start(cmd: &mut Command, ports: &[u16]) -> PeerProcess {
        let mut peer = PeerProcess::spawn(cmd);
        for &port in ports {
            peer.wait_until(&format!("accepting on port {port}"), PEER_READY, || {
                std::net::TcpStream::connect(("127.0.0.1", port)).ok()
            });
        }
        peer
    }

    /// Spawns `cmd` with its stderr kept, and returns at once (for a peer that says it is
    /// ready another way; see [`PeerProcess::wait_until`]). Stdin and stdout are the caller's.
    pub fn spawn(cmd: &mut Command) -> PeerProcess {
        let name = Path::new(cmd.get_program())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut child = cmd
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let reader = child.stderr.take().map(|err| {
            let kept = stderr.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
                    kept.push_str(&line);
                    kept.push('\n');
                    if kept.len() > STDERR_KEPT {
                        let cut = kept.len() - STDERR_KEPT / 2;
                        let cut = (cut..kept.len()).find(|&i| kept.is_char_boundary(i));
                        kept.drain(..cut.unwrap_or(0));
                    }
                }
            })
        });
        PeerProcess {
            child,
            name,
            stderr,
            reader,
            grace: Duration::ZERO,
        }
    }

    /// On drop, SIGTERM first and SIGKILL only after `grace` (an nginx master killed with
    /// SIGKILL leaves its workers running).
    pub fn with_grace(mut self, grace: Duration) -> PeerProcess {
        self.grace = grace;
        self
    }

    /// Polls `ready` every 20 ms for at most `limit` and returns what it found; panics, with
    /// the peer's stderr, if the peer exits first or the time runs out. `what` names the state
    /// awaited, for the message ("accepting on port 8080", "ready (--ready-file)").
    pub fn wait_until<T>(
        &mut self,
        what: &str,
        limit: Duration,
        mut ready: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(found) = ready() {
                return found;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                let said = self.stderr_text();
                panic!("{} exited ({status}) before {what}\n{said}", self.name);
            }
            if Instant::now() >= deadline {
                let said = self.stderr_text();
                panic!("{} not {what} within {limit:?}\n{said}", self.name);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the peer wrote to stderr so far (its tail), under a heading.
    pub fn stderr_text(&mut self) -> String {
        // An exited peer's last lines may still be in the pipe: give the reader a moment.
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            let until = Instant::now() + Duration::from_secs(1);
            while self.reader.as_ref().is_some_and(|r| !r.is_finished()) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let kept = self.stderr.lock().unwrap_or_else(|e| e.into_inner());
        format!("{} stderr:\n{}", self.name, kept.trim_end())
    }
}

impl std::ops::Deref for PeerProcess {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for PeerProcess {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        if !self.grace.is_zero() {
            // SAFETY: kill(2) on the pid of a child not reaped yet (it cannot be reused).
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
            let deadline = Instant::now() + self.grace;
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            // The test failed: what the peer said is part of the story.
            eprintln!("{}", self.stderr_text());
        }
    }
}

/// nghttpd serving `root` on a free port, over TLS with `tls` (certificate, key) or in
/// cleartext (h2c) without, `extra` options (push rules, ...) before the port. None (the
/// skip rule) when nghttpd is missing.
pub fn start_nghttpd(
    root: &Path,
    tls: Option<(PathBuf, PathBuf)>,
    extra: &[&str],
) -> Option<(PeerProcess, u16)> {
    let bin = require_peer("nghttpd")?;
    let port = free_port();
    let mut cmd = Command::new(bin);
    cmd.arg("-d").arg(root).args(extra);
    match tls {
        Some((cert, key)) => cmd.arg(port.to_string()).arg(key).arg(cert),
        None => cmd.arg("--no-tls").arg(port.to_string()),
    };
    Some((PeerProcess::start(cmd.stdout(Stdio::null()), &[port]), port))
}

/// Whether a [`ThreadServer`] still serves: its connection handlers poll it and may stop it.
#[derive(Clone)]
pub struct Serving {
    stop: Arc<AtomicBool>,
    deadline: Instant,
}

impl Serving {
    /// False once the server was dropped or stopped, or its time limit passed.
    pub fn running(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && Instant::now() < self.deadline
    }

    /// Stops the server: it accepts no more connections (its listener is closed) and every
    /// handler sees [`Serving::running`] false.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// When the server's time limit passes.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// A server on threads of the test, for behaviour no real peer has (stalls, silence, hostile
/// answers), the one guard every such server uses: it accepts on 127.0.0.1 until it is
/// dropped, stopped or `limit` passes, and runs `handle` on a thread per connection.
pub struct ThreadServer {
    /// The address it listens on.
    pub addr: std::net::SocketAddr,
    /// Its port.
    pub port: u16,
    serving: Serving,
}

impl ThreadServer {
    /// Binds a free port and starts accepting.
    pub fn start<F>(limit: Duration, handle: F) -> ThreadServer
    where
        F: Fn(std::net::TcpStream, &Serving) + Send + Sync + 'static,
    {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("local address");
        let serving = Serving {
            stop: Arc::new(AtomicBool::new(false)),
            deadline: Instant::now() + limit,
        };
        let (accepting, handle) = (serving.clone(), Arc::new(handle));
        std::thread::spawn(move || {
            while accepting.running() {
                match listener.accept() {
                    Ok((conn, _)) => {
                        let (serving, handle) = (accepting.clone(), handle.clone());
                        std::thread::spawn(move || handle(conn, &serving));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            // Dropping the listener here refuses new connections.
        });
        ThreadServer {
            addr,
            port: addr.port(),
            serving,
        }
    }
}

impl Drop for ThreadServer {
    fn drop(&mut self) {
        self.serving.stop();
    }
}

/// A self-signed leaf certificate and key for localhost/127.0.0.1 in `dir`, made with
/// openssl (not a CA: rustls refuses a CA as end entity). None when openssl is missing.
pub fn make_cert(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    make_cert_for(dir, "localhost", "DNS:localhost,IP:127.0.0.1")
}

/// A self-signed leaf certificate named `cn` with subject alternative names `san`
/// (`DNS:a.test,IP:127.0.0.1`), and its key, in `dir`. None when openssl is missing.
pub fn make_cert_for(dir: &Path, cn: &str, san: &str) -> Option<(PathBuf, PathBuf)> {
    let openssl = require_peer("openssl")?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new(openssl)
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj"])
        .arg(format!("/CN={cn}"))
        .arg("-addext")
        .arg(format!("subjectAltName={san}"))
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run openssl");
    assert!(status.success(), "openssl could not make a certificate");
    Some((cert, key))
}

/// A running `hxlab serve`, killed when dropped.
pub struct Server {
    pub child: PeerProcess,
    pub dir: tempfile_dir::TempDir,
    /// The ready file as written by the server.
    pub ready: hxlab_contract::ReadyFile,
}

impl Server {
    /// Starts `hxlab serve` on 127.0.0.1 with free ports and extra args; waits for --ready-file.
    pub fn start(extra: &[&str]) -> Server {
        Server::start_bound("127.0.0.1", extra)
    }

    /// [`Server::start`] listening on `bind` (`0.0.0.0`: reachable through `hxlab link`).
    pub fn start_bound(bind: &str, extra: &[&str]) -> Server {
        let dir = tempfile_dir::TempDir::new("hxlab-serve");
        let ready_path = dir.path().join("ready.json");
        let cert_path = dir.path().join("cert.pem");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--bind".into(),
            bind.into(),
            "--tls-port".into(),
            "0".into(),
            "--plain-port".into(),
            "0".into(),
            "--ready-file".into(),
            ready_path.display().to_string(),
            "--cert-out".into(),
            cert_path.display().to_string(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut child =
            PeerProcess::spawn(Command::new(hxlab()).args(&args).stdout(Stdio::piped()));
        // Drain stdout so the server never blocks on a full pipe.
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || for _ in BufReader::new(out).lines() {});
        }
        // Read through the one type `hxlab serve` writes it with.
        let ready = child.wait_until("ready (--ready-file)", Duration::from_secs(20), || {
            hxlab_contract::ReadyFile::read(&ready_path).ok()
        });
        Server { child, dir, ready }
    }

    /// The certificate the server wrote with --cert-out.
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }
}

/// Runs a command with a hard time limit; returns (status code, stdout, stderr).
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> (Option<i32>, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let out = child
        .stdout
        .take()
        .map(|o| std::thread::spawn(move || read_all(o)));
    let err = child
        .stderr
        .take()
        .map(|o| std::thread::spawn(move || read_all(o)));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let out = out
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    let err = err
        .map(|h| h.join().unwrap_or_default())
        .unwrap_or_default();
    (status, out, err)
}

fn read_all(mut r: impl std::io::Read) -> String {
    let mut v = Vec::new();
    let _ = r.read_to_end(&mut v);
    String::from_utf8_lossy(&v).into_owned()
}

/// A minimal temporary directory (removed on drop), to keep test dependencies small.
pub mod tempfile_dir {
    use std::path::{Path, PathBuf};

    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(prefix: &str) -> TempDir {
            use std::sync::atomic::{AtomicU64, Ordering};
            static N: AtomicU64 = AtomicU64::new(0);
            let p = std::env::temp_dir().join(format!(
                "{prefix}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p).expect("create temp dir");
            TempDir(p)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A raw HTTP/3 connection to `addr` (certificate not checked) with the client's control
/// stream open (empty SETTINGS, as HTTP/3 requires), for tests that write HTTP/3 by hand.
/// Keep the endpoint and the control stream alive as long as the connection.
pub async fn h3_connect(
    addr: std::net::SocketAddr,
) -> (quinn::Endpoint, quinn::Connection, quinn::SendStream) {
    let (ep, conn) = h3_handshake("127.0.0.1:0".parse().expect("local"), addr)
        .await
        .expect("handshake");
    let mut control = conn.open_uni().await.expect("control stream");
    control
        .write_all(&[0x00, 0x04, 0x00])
        .await
        .expect("SETTINGS");
    (ep, conn, control)
}

/// A QUIC handshake (ALPN h3, any certificate) from `local` to `addr`: the connection, or
/// why the server would not have it.
pub async fn h3_handshake(
    local: std::net::SocketAddr,
    addr: std::net::SocketAddr,
) -> Result<(quinn::Endpoint, quinn::Connection), quinn::ConnectionError> {
    let ep = h3_client_endpoint(local);
    let conn = ep.connect(addr, "localhost").expect("connect").await?;
    Ok((ep, conn))
}

/// A quinn client endpoint on `local` set up as hxlab load's h3 client (any certificate).
pub fn h3_client_endpoint(local: std::net::SocketAddr) -> quinn::Endpoint {
    let cfg = hxlab_load::LoadConfig {
        urls: vec!["https://localhost/".to_string()],
        insecure: true,
        proto: hxlab_load::Proto::H3,
        ..Default::default()
    };
    let (client, _) = hxlab_load::tls::quic_config(&cfg)
        .expect("quic config")
        .for_connection();
    let mut ep = quinn::Endpoint::client(local).expect("endpoint");
    ep.set_default_client_config(client);
    ep
}

/// Sends `request` on a fresh HTTP/1.1 connection and reads until the server closes it
/// (None when it kept the connection open for 10 s).
pub fn h1_exchange(addr: &str, request: &[u8]) -> Option<String> {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(request).expect("send");
    let mut got = Vec::new();
    c.read_to_end(&mut got).ok()?;
    Some(String::from_utf8_lossy(&got).into_owned())
}

/// The `--json` document of `hxlab page` in `text` as a [`hxlab_contract::PageReport`] (None
/// when `text` is no JSON), checked to write back the same JSON: a field the type drops,
/// renames or turns from null into omitted fails here, on a real document.
pub fn page_report_of(text: &str) -> Option<hxlab_contract::PageReport> {
    let raw: serde_json::Value = serde_json::from_str(text).ok()?;
    let report = hxlab_contract::PageReport::from_json(text)
        .expect("the --json document reads as a PageReport");
    let back: serde_json::Value =
        serde_json::from_str(&report.to_json().expect("writes")).expect("writes JSON");
    assert_eq!(back, raw, "PageReport does not write back what it read");
    Some(report)
}

/// The figures of a page run that measured (a test failure otherwise).
pub fn measured(run: &hxlab_contract::PageRunEntry) -> &hxlab_core::page::PageRun {
    match &run.outcome {
        hxlab_core::page::Outcome::Measured(r) => r,
        hxlab_core::page::Outcome::Failed(e) => panic!("run {} failed: {e}", run.run),
    }
}

/// The Python with python-h2 and aioquic (`.ci/run` makes it at /opt/hxlab-ci/priority, or
/// `HXLAB_PRIORITY_PYTHON`), or None after skipping (a failure under CI).
pub fn aioquic_python() -> Option<String> {
    let py = std::env::var("HXLAB_PRIORITY_PYTHON")
        .unwrap_or_else(|_| "/opt/hxlab-ci/priority/bin/python".to_string());
    let ok = std::process::Command::new(&py)
        .args(["-c", "import h2, aioquic"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        hxlab_testkit::skip(&format!(
            "no Python with python-h2 and aioquic at {py}: python3 -m venv /opt/hxlab-ci/priority && /opt/hxlab-ci/priority/bin/pip install h2==4.1.0 aioquic==1.2.0 (or set HXLAB_PRIORITY_PYTHON)"
        ));
        return None;
    }
    Some(py)
}

/// The Python with `jsonschema` (`.ci/run` makes it at /opt/hxlab-ci/jsonschema, or
/// `HXLAB_JSONSCHEMA_PYTHON`), or None after skipping (a failure under CI).
pub fn jsonschema_python() -> Option<String> {
    let py = std::env::var("HXLAB_JSONSCHEMA_PYTHON")
        .unwrap_or_else(|_| "/opt/hxlab-ci/jsonschema/bin/python".to_string());
    let ok = std::process::Command::new(&py)
        .args(["-c", "import jsonschema"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        hxlab_testkit::skip(&format!(
            "no Python with jsonschema at {py}: python3 -m venv /opt/hxlab-ci/jsonschema && /opt/hxlab-ci/jsonschema/bin/pip install jsonschema==4.26.0 (or set HXLAB_JSONSCHEMA_PYTHON)"
        ));
        return None;
    }
    Some(py)
}

/// Container images the tests build with podman, and the limits `podman run` needs here.
pub mod podman {
    use std::path::{Path, PathBuf};
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// An image a test built, removed (`podman rmi -f`) when dropped.
    pub struct Image {
        podman: PathBuf,
        /// Its tag, e.g. `localhost/hxlab-test:1234`.
        pub tag: String,
    }

    impl Drop for Image {
        fn drop(&mut self) {
            let _ = Command::new(&self.podman)
                .args(["rmi", "-f", &self.tag])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Builds stage `target` of the repository's Containerfile with the named build context
    /// `context=dir` (where the stage copies its root filesystem from) as `tag`; panics with
    /// podman's message when the build fails.
    pub fn build(podman: &Path, target: &str, context: (&str, &Path), tag: &str) -> Image {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut cmd = Command::new(podman);
        cmd.args(["build", "--quiet", "--target", target, "-t", tag])
            .arg(format!(
                "--build-context={}={}",
                context.0,
                context.1.display()
            ))
            .arg("-f")
            .arg(repo.join("Containerfile"))
            .arg(&repo);
        let (code, _, err) = super::run_with_timeout(&mut cmd, Duration::from_secs(600));
        assert_eq!(code, Some(0), "podman build --target {target}: {err}");
        Image {
            podman: podman.to_path_buf(),
            tag: tag.to_string(),
        }
    }

    /// `podman run --rm` with the runtime and limits this kind of machine needs: runc (crun
    /// refuses hybrid cgroup hosts) and the hard open-files limit here (podman's default
    /// asks for more than a machine without CAP_SYS_RESOURCE grants).
    pub fn run_command(podman: &Path) -> Command {
        let out = Command::new("sh")
            .args(["-c", "ulimit -Hn"])
            .output()
            .expect("sh");
        let text = String::from_utf8_lossy(&out.stdout);
        let n = text.trim().parse::<u64>().unwrap_or(1 << 20).min(1 << 20);
        let mut c = Command::new(podman);
        c.args(["--runtime", "runc", "run", "--rm"])
            .arg(format!("--ulimit=nofile={n}:{n}"))
            .arg("--ulimit=nproc=32768:32768");
        c
    }
}
