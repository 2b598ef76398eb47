//! Shared helpers for the integration tests: the built binary, real peers, and an
//! `hxlab serve` started on free ports that is stopped when dropped.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// GET /stats from `hxlab serve` at `plain` (its cleartext address) over HTTP/1.1.
pub fn serve_stats(plain: &str) -> serde_json::Value {
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
    serde_json::from_str(&body[start..=end]).expect("stats json")
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

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

/// Waits (at most 15 s) until something accepts on 127.0.0.1:`port`; fails if `child` exits.
pub fn wait_port(port: u16, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Ok(Some(s)) = child.try_wait() {
            panic!("server on port {port} exited early: {s}");
        }
        assert!(
            Instant::now() < deadline,
            "server on port {port} not ready in 15 s"
        );
        std::thread::sleep(Duration::from_millis(20));
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
    pub child: Child,
    pub dir: tempfile_dir::TempDir,
    /// The ready file as written by the server (read as `hxlab_core::ReadyFile`).
    pub ready: serde_json::Value,
}

impl Server {
    /// Starts `hxlab serve` on 127.0.0.1 with free ports and extra args; waits for --ready-file.
    pub fn start(extra: &[&str]) -> Server {
        let dir = tempfile_dir::TempDir::new("hxlab-serve");
        let ready_path = dir.path().join("ready.json");
        let cert_path = dir.path().join("cert.pem");
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--bind".into(),
            "127.0.0.1".into(),
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
        let mut child = Command::new(hxlab())
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start hxlab serve");
        // Drain stdout so the server never blocks on a full pipe.
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || for _ in BufReader::new(out).lines() {});
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // Read through the one type `hxlab serve` writes it with; tests index the JSON.
            if let Ok(ready) = hxlab_core::ReadyFile::read(&ready_path) {
                let ready = serde_json::to_value(&ready).expect("a ReadyFile is JSON");
                return Server { child, dir, ready };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("hxlab serve exited early: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "hxlab serve did not become ready in 20 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The certificate the server wrote with --cert-out.
    pub fn cert(&self) -> PathBuf {
        self.dir.path().join("cert.pem")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
