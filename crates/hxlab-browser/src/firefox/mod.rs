//! One page load in Firefox (Gecko, Necko, neqo) over WebDriver BiDi.
//!
//! `firefox-esr --headless --remote-debugging-port 0 --profile DIR` serves BiDi at
//! `ws://127.0.0.1:PORT/session` (no geckodriver) and writes the port it took into
//! `DIR/WebDriverBiDiServer.json`. Each run gets a fresh profile with a `user.js` (prefs.rs:
//! background traffic off, the protocol forced, names mapped) and the origin's certificate
//! imported into its NSS store with `certutil`; the process tree is the same
//! [`BrowserProcess`] as Chromium's, killed as a group whatever the outcome. Behind a link the
//! browser listens on the namespace's loopback, so the socket is opened by the caller's
//! [`crate::Connector`] from inside it.

mod drive;
mod prefs;
mod records;

use crate::bidi::Bidi;
use crate::process::{BrowserDir, BrowserProcess};
use crate::ws::WebSocket;
use crate::{BrowserError, PageConfig, PageRun, View};
use serde_json::json;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the browser gets to exit after `browser.close` before its group is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// How long Firefox may take to open its BiDi port.
const LISTEN_WITHIN: Duration = Duration::from_secs(30);

/// Finds the Firefox binary: an explicit path must exist; a bare name is looked up on PATH.
pub fn find_firefox(firefox: &Path) -> Result<PathBuf, BrowserError> {
    crate::load::resolve_program(firefox).map_err(BrowserError::FirefoxNotFound)
}

/// Checks what a Firefox run would be started with, without starting it.
pub(crate) fn check(cfg: &PageConfig) -> Result<(), BrowserError> {
    prefs::prefs(&with_page_origin(cfg)?).map(|_| ())
}

/// `cfg` with the page's own origin among the QUIC origins when h3 is asked for over https.
fn with_page_origin(cfg: &PageConfig) -> Result<PageConfig, BrowserError> {
    let (scheme, host, port) = crate::load::origin_host_port(&cfg.url)?;
    let mut cfg = cfg.clone();
    if scheme == "https" && !cfg.quic_origins.iter().any(|(h, _)| *h == host) {
        cfg.quic_origins.push((host, port));
    }
    Ok(cfg)
}

/// Loads one page within `cfg.timeout`; the browser is gone and its profile removed when
/// this returns (or the future is dropped).
pub(crate) async fn load(cfg: &PageConfig) -> Result<PageRun, BrowserError> {
    let program = find_firefox(&cfg.firefox)?;
    let cfg = with_page_origin(cfg)?;
    let user_js = prefs::user_js(&prefs::prefs(&cfg)?);
    match tokio::time::timeout(cfg.timeout, run(&cfg, &program, &user_js)).await {
        Ok(r) => r,
        Err(_) => Err(BrowserError::Timeout(cfg.timeout)),
    }
}

async fn run(cfg: &PageConfig, program: &Path, user_js: &str) -> Result<PageRun, BrowserError> {
    let dir = BrowserDir::fresh()?;
    prepare_profile(&dir.profile(), user_js, &cfg.trust_certs)?;
    let mut first = one_browser(cfg, program, &dir, View::First).await?;
    if cfg.returning_visit {
        match one_browser(cfg, program, &dir, View::Returning).await {
            Ok(back) => first.repeat_view = Some(Box::new(back)),
            Err(e) => {
                let why = format!("the returning visit failed: {e}");
                first.flag = Some(match first.flag.take() {
                    Some(f) => format!("{f}; {why}"),
                    None => why,
                });
            }
        }
    }
    Ok(first)
}

/// Writes `user.js` and imports each certificate into the profile's NSS store as a trusted
/// root (`certutil -A -t "C,,"`): Firefox then checks the origin's chain and name as it
/// would a real site's, with no `acceptInsecureCerts`.
fn prepare_profile(profile: &Path, user_js: &str, certs: &[PathBuf]) -> Result<(), BrowserError> {
    std::fs::write(profile.join("user.js"), user_js)
        .map_err(|e| BrowserError::Launch(format!("writing the profile's user.js: {e}")))?;
    if certs.is_empty() {
        return Ok(());
    }
    let db = format!("sql:{}", profile.display());
    certutil(&["-N", "-d", &db, "--empty-password"])?;
    for (n, cert) in certs.iter().enumerate() {
        let name = format!("hxlab-{n}");
        let file = cert.display().to_string();
        certutil(&["-A", "-d", &db, "-t", "C,,", "-n", &name, "-i", &file])?;
    }
    Ok(())
}

fn certutil(args: &[&str]) -> Result<(), BrowserError> {
    let out = std::process::Command::new("certutil")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BrowserError::Launch(
                "certutil not found: install the Debian package `libnss3-tools` to trust the origin's certificate in Firefox (or pass -k)".into(),
            ),
            _ => BrowserError::Launch(format!("certutil: {e}")),
        })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(BrowserError::Launch(format!(
            "certutil {}: {}",
            args.first().unwrap_or(&""),
            err.trim()
        )));
    }
    Ok(())
}

/// One Firefox process on the profile in `dir`.
async fn one_browser(
    cfg: &PageConfig,
    program: &Path,
    dir: &BrowserDir,
    view: View,
) -> Result<PageRun, BrowserError> {
    let profile = dir.profile();
    let port_file = profile.join("WebDriverBiDiServer.json");
    // A returning visit starts on the profile the first left: its port is not this one's.
    let _ = std::fs::remove_file(&port_file);
    let args: Vec<String> = vec![
        "--headless".into(),
        "--no-remote".into(),
        "--remote-debugging-port".into(),
        "0".into(),
        "--profile".into(),
        profile.display().to_string(),
        "about:blank".into(),
    ];
    let mut browser = BrowserProcess::spawn_listening(program, &args, cfg.launcher.as_ref(), dir)?;
    let outcome = async {
        let port = listening_port(&port_file, &mut browser).await?;
        let stream = connect(cfg, SocketAddr::from(([127, 0, 0, 1], port))).await?;
        let mut bidi = Bidi::new(WebSocket::open(stream, "/session").await?);
        let run = drive::drive(cfg, &mut bidi, view).await;
        if run.is_ok() {
            let _ = tokio::time::timeout(
                Duration::from_millis(500),
                bidi.call("browser.close", json!({})),
            )
            .await;
        }
        run
    }
    .await;
    let outcome = browser.explain_crash(outcome, "Firefox").await;
    browser.shutdown(CLOSE_GRACE).await;
    outcome
}

/// Waits for Firefox to write the port its BiDi server took.
async fn listening_port(file: &Path, browser: &mut BrowserProcess) -> Result<u16, BrowserError> {
    #[derive(serde::Deserialize)]
    struct Listening {
        ws_port: u16,
    }
    let deadline = tokio::time::Instant::now() + LISTEN_WITHIN;
    loop {
        if let Ok(text) = std::fs::read_to_string(file) {
            if let Ok(l) = serde_json::from_str::<Listening>(&text) {
                return Ok(l.ws_port);
            }
        }
        if browser.exited() {
            return Err(BrowserError::Crashed(
                "Firefox exited before it opened its WebDriver BiDi port".into(),
            ));
        }
        if tokio::time::Instant::now() > deadline {
            return Err(BrowserError::Launch(format!(
                "Firefox opened no WebDriver BiDi port within {LISTEN_WITHIN:?}"
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A connection to `addr`, made by the config's connector (inside a namespace) or here.
async fn connect(
    cfg: &PageConfig,
    addr: SocketAddr,
) -> Result<tokio::net::TcpStream, BrowserError> {
    let connector = cfg.connector.clone();
    let std_stream = tokio::task::spawn_blocking(move || match connector {
        Some(c) => c(addr),
        None => std::net::TcpStream::connect(addr),
    })
    .await
    .map_err(|e| BrowserError::Launch(format!("connecting to Firefox: {e}")))?
    .map_err(|e| BrowserError::Launch(format!("connecting to Firefox at {addr}: {e}")))?;
    std_stream
        .set_nonblocking(true)
        .and_then(|()| {
            std_stream.set_nodelay(true)?;
            tokio::net::TcpStream::from_std(std_stream)
        })
        .map_err(|e| BrowserError::Launch(format!("Firefox's BiDi socket: {e}")))
}
