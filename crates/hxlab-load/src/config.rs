//! [`LoadConfig`]: everything `hxlab load` can be asked, as a plain struct the lab can fill.

use std::path::PathBuf;
use std::time::Duration;

/// Which HTTP version to speak.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Proto {
    /// HTTP/1.1 (plain for http://, TLS for https://).
    H1,
    /// HTTP/2 over TLS (ALPN h2); an http:// URL means h2c.
    H2,
    /// HTTP/2 over cleartext TCP with prior knowledge.
    H2c,
    /// HTTP/3 over QUIC (https:// URLs only).
    H3,
    /// https://: offer ALPN `h2,http/1.1` (or `--alpn-list`) and use what the server picks;
    /// http://: HTTP/1.1.
    #[default]
    Auto,
}

impl Proto {
    /// Parses `h1`, `http/1.1`, `h2`, `h2c`, `h3`, `auto`.
    pub fn parse(s: &str) -> Option<Proto> {
        Some(match s.to_ascii_lowercase().as_str() {
            "h1" | "http/1.1" | "http1.1" | "http1" => Proto::H1,
            "h2" => Proto::H2,
            "h2c" => Proto::H2c,
            "h3" => Proto::H3,
            "auto" => Proto::Auto,
            _ => return None,
        })
    }

    /// The name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Proto::H1 => "h1",
            Proto::H2 => "h2",
            Proto::H2c => "h2c",
            Proto::H3 => "h3",
            Proto::Auto => "auto",
        }
    }
}

/// TCP/QUIC congestion controller (shared with `hxlab serve`).
pub use hxlab_core::cc::CongestionControl;

/// One load run, as asked. `Default` is `-n 1 -c 1 -m 1 -t 1`, GET, auto protocol.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Target URLs (same scheme, host and port), requested round-robin.
    pub urls: Vec<String>,
    /// Total requests of the measured phase; 0 when `duration` bounds the run.
    pub requests: u64,
    /// Connections (clients).
    pub clients: u64,
    /// Concurrent streams per connection; on HTTP/1.1 the pipelining depth.
    pub max_concurrent_streams: u64,
    /// Worker OS threads (each its own runtime); clamped to `clients`.
    pub threads: u64,
    /// Measured duration; when set, `requests` is ignored (as h2load's -D).
    pub duration: Option<Duration>,
    /// Warm-up before the measured duration (requests sent, nothing recorded); needs `duration`.
    pub warm_up: Duration,
    /// Extra request headers (name, value); a `host` header replaces the URL authority.
    pub headers: Vec<(String, String)>,
    /// Request body (from -d or --data-file); its presence makes the default method POST.
    pub body: Option<Vec<u8>>,
    /// Request method; None: GET, or POST with a body.
    pub method: Option<String>,
    /// Longest wait for a response (from send to last byte).
    pub timeout: Duration,
    /// Longest wait for TCP connect + TLS handshake (or the QUIC handshake).
    pub connect_timeout: Duration,
    /// Accept any server certificate.
    pub insecure: bool,
    /// PEM file of CA certificates to trust (instead of the system store).
    pub cacert: Option<PathBuf>,
    /// A new connection for every request.
    pub no_keepalive: bool,
    /// HTTP/2: accept server push (advertise SETTINGS_ENABLE_PUSH=1); a request completes
    /// when its response and every stream it promised have ended.
    pub push: bool,
    /// Open model: requests per second over all connections.
    pub rate: Option<f64>,
    /// Protocol to speak.
    pub proto: Proto,
    /// ALPN ids to offer (TLS over TCP); None: derived from `proto`.
    pub alpn_list: Option<Vec<String>>,
    /// Resume TLS sessions on new connections (and report resumed handshakes apart).
    pub tls_resume: bool,
    /// Send the first request of a resumed connection as early data: QUIC 0-RTT on h3, TLS 1.3
    /// early data on h1-tls and h2 (implies resume).
    pub zero_rtt: bool,
    /// Before the run, make one request on one connection (not measured, not counted) so the
    /// run's connections can resume its TLS session and send 0-RTT, as a returning visitor.
    pub prime: bool,
    /// TCP Fast Open on TCP connections (TCP_FASTOPEN_CONNECT).
    pub tfo: bool,
    /// Congestion controller (TCP_CONGESTION on TCP, quinn's controllers on QUIC).
    pub cc: Option<CongestionControl>,
    /// Draw a progress bar on stderr (the caller checks it is a terminal).
    pub progress: bool,
}

impl Default for LoadConfig {
    fn default() -> Self {
        LoadConfig {
            urls: Vec::new(),
            requests: 1,
            clients: 1,
            max_concurrent_streams: 1,
            threads: 1,
            duration: None,
            warm_up: Duration::ZERO,
            headers: Vec::new(),
            body: None,
            method: None,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            insecure: false,
            cacert: None,
            no_keepalive: false,
            push: false,
            rate: None,
            proto: Proto::Auto,
            alpn_list: None,
            tls_resume: false,
            zero_rtt: false,
            prime: false,
            tfo: false,
            cc: None,
            progress: false,
        }
    }
}
