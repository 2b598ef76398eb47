//! The origin a lab run or `hxlab page` measures against: one `hxlab serve` started as a
//! child and known by its [`ReadyFile`], and how a browser or client behind a link reaches
//! this side's addresses.

use crate::child::{tail, DieWithParent};
use hxlab_contract::ReadyFile;
use hxlab_core::cc::CongestionControl;
use hxlab_core::sched::{Lowat, Scheduler};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the lab sets on its own origin beside ports and files: the server-side factors,
/// each a field of the [`ServeConfig`](hxlab_contract::ServeConfig) it starts with. A
/// running origin keeps them, so a cell that asks for others gets a new one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OriginSettings {
    /// Congestion controller (`cc`; None: the system's default).
    pub cc: Option<CongestionControl>,
    /// How responses share an HTTP/2 or HTTP/3 connection (`scheduler`).
    pub scheduler: Scheduler,
    /// TCP send low-water mark of every TCP socket (`notsent_lowat`).
    pub notsent_lowat: Lowat,
    /// The header table advertised and used for responses (`header_table`; None: the
    /// server's default, 4096).
    pub header_table: Option<u64>,
}

/// How to start an origin.
#[derive(Clone, Debug)]
pub struct OriginOptions {
    /// The `hxlab` binary.
    pub hxlab_bin: PathBuf,
    /// Address to listen on (`127.0.0.1`, `0.0.0.0`, a link's host address).
    pub bind: String,
    /// Directory for the ready file and the certificate (created if missing).
    pub dir: PathBuf,
    /// A directory served under `/static/` (`hxlab serve --dir`).
    pub www: Option<PathBuf>,
    /// Its congestion controller, scheduler and low-water mark.
    pub settings: OriginSettings,
    /// Keep the server's stderr (its last lines explain a failed start) instead of passing
    /// it through.
    pub capture_stderr: bool,
    /// A HAR archive to answer every request from (`hxlab serve --replay`).
    pub replay: Option<PathBuf>,
    /// More names its self-signed certificate carries (`ServeConfig::cert_names`).
    pub cert_names: Vec<String>,
    /// The TLS (and QUIC) port and the plain port to listen on; None: free ones. Firefox
    /// replays need the recorded ports (it cannot map ports as Chromium does).
    pub ports: Option<(u16, u16)>,
}

/// A running `hxlab serve`, killed when dropped.
pub struct Origin {
    child: Child,
    /// What the server announced when it was ready.
    pub ready: ReadyFile,
    /// The certificate it wrote (`--cert-out`).
    pub cert: PathBuf,
    /// The controller, scheduler and mark it was started with.
    pub settings: OriginSettings,
}

/// How long a server may take to write its ready file.
const READY_WITHIN: Duration = Duration::from_secs(20);

impl Origin {
    /// Starts `hxlab serve` with free TLS, plain and QUIC ports and waits for its ready file.
    /// The error is one line for the user.
    pub fn start(opts: &OriginOptions) -> Result<Origin, String> {
        std::fs::create_dir_all(&opts.dir)
            .map_err(|e| format!("creating {}: {e}", opts.dir.display()))?;
        let ready_path = opts.dir.join("ready.json");
        let cert = opts.dir.join("cert.pem");
        let _ = std::fs::remove_file(&ready_path);
        let bind = opts
            .bind
            .parse()
            .map_err(|_| format!("{:?} is not an IP address to serve on", opts.bind))?;
        // The server's whole configuration, typed: `hxlab serve --config`.
        let config = hxlab_contract::ServeConfig {
            bind,
            tls_port: opts.ports.map_or(0, |p| p.0),
            plain_port: opts.ports.map_or(0, |p| p.1),
            ready_file: Some(ready_path.clone()),
            cert_out: Some(cert.clone()),
            dir: opts.www.clone(),
            replay: opts.replay.clone(),
            cert_names: opts.cert_names.clone(),
            cc: opts.settings.cc,
            scheduler: opts.settings.scheduler,
            notsent_lowat: opts.settings.notsent_lowat,
            header_table: opts
                .settings
                .header_table
                .unwrap_or(hxlab_contract::ServeConfig::default().header_table),
            // The lab's own load generator is this origin's only client, from one address,
            // and may open as many connections as the table holds.
            quic_max_per_address: hxlab_contract::ServeConfig::default().quic_max_connections,
            ..hxlab_contract::ServeConfig::default()
        };
        config.validate().map_err(|e| e.to_string())?;
        let config_path = opts.dir.join("serve.json");
        std::fs::write(&config_path, config.to_json())
            .map_err(|e| format!("{}: {e}", config_path.display()))?;
        let mut cmd = Command::new(&opts.hxlab_bin);
        cmd.arg("serve").arg("--config").arg(&config_path);
        cmd.die_with_parent()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(if opts.capture_stderr {
                Stdio::piped()
            } else {
                Stdio::inherit()
            });
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", opts.hxlab_bin.display()))?;
        let stderr: Option<JoinHandle<String>> = child
            .stderr
            .take()
            .map(|s| std::thread::spawn(move || tail(s)));
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            // The server writes the file atomically: once it parses, it is complete.
            if let Ok(ready) = ReadyFile::read(&ready_path) {
                return Ok(Origin {
                    child,
                    ready,
                    cert,
                    settings: opts.settings,
                });
            }
            if let Ok(Some(status)) = child.try_wait() {
                let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
                let line = crate::child::last_line(&err);
                return Err(format!("`hxlab serve` exited ({status}): {line}"));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("`hxlab serve` wrote no ready file within 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// True while the server process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Where to read `/stats` from this machine (the plain port on loopback).
    pub fn stats_addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.ready.plain.port()))
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A URL for 127.0.0.1/localhost rewritten to `host`: inside a link's namespace, loopback is
/// the namespace's own, and this side is reached at the link's host address.
pub fn loopback_to(url: &str, host: &str) -> String {
    let host = match host.parse::<std::net::Ipv6Addr>() {
        Ok(_) => format!("[{host}]"),
        Err(_) => host.to_string(),
    };
    for lo in ["127.0.0.1", "localhost", "[::1]"] {
        for scheme in ["https://", "http://"] {
            let from = format!("{scheme}{lo}");
            if let Some(rest) = url.strip_prefix(&from) {
                if rest.is_empty() || rest.starts_with([':', '/', '?', '#']) {
                    return format!("{scheme}{host}{rest}");
                }
            }
        }
    }
    url.to_string()
}

/// Scheme, host (brackets kept for IPv6) and port (the scheme's default when none is given)
/// of an http(s) URL; None for anything else.
pub fn host_port(url: &str) -> Option<(&str, &str, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme.to_ascii_lowercase().as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (inner, after) = v6.split_once(']')?;
        let port = after.strip_prefix(':');
        (&authority[..inner.len() + 2], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) if !p.is_empty() => p.parse().ok()?,
        _ => default,
    };
    (!host.is_empty()).then_some((scheme, host, port))
}

/// True for a URL on 127.0.0.1, localhost or `[::1]` (one [`loopback_to`] would move).
pub fn is_loopback_url(url: &str) -> bool {
    loopback_to(url, "0.0.0.0") != url
}

/// A fresh private directory under the system's temporary directory.
pub fn temp_dir(prefix: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_with_defaults_and_ipv6() {
        assert_eq!(
            host_port("https://a.example/x"),
            Some(("https", "a.example", 443))
        );
        assert_eq!(
            host_port("http://a.example:8080?q"),
            Some(("http", "a.example", 8080))
        );
        assert_eq!(
            host_port("https://[::1]:8443/"),
            Some(("https", "[::1]", 8443))
        );
        assert_eq!(
            host_port("https://u:p@h.example:9/"),
            Some(("https", "h.example", 9))
        );
        assert_eq!(host_port("ftp://h/"), None);
        assert_eq!(host_port("https://h:nope/"), None);
    }

    #[test]
    fn loopback_urls_move_to_the_link_host() {
        assert_eq!(
            loopback_to("https://127.0.0.1:8443/x", "10.0.0.1"),
            "https://10.0.0.1:8443/x"
        );
        assert_eq!(
            loopback_to("http://localhost/", "10.0.0.1"),
            "http://10.0.0.1/"
        );
        assert_eq!(
            loopback_to("http://127.0.0.1:1/", "fd00::1"),
            "http://[fd00::1]:1/"
        );
        assert_eq!(
            loopback_to("https://127.0.0.10/", "10.0.0.1"),
            "https://127.0.0.10/"
        );
        assert_eq!(
            loopback_to("https://example.test/", "10.0.0.1"),
            "https://example.test/"
        );
    }
}
