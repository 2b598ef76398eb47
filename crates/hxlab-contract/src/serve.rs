//! [`ServeConfig`]: everything `hxlab serve` can be told, its JSON form (`hxlab serve
//! --config FILE|-`) and its one validator, shared by the flags, files and the lab.

use crate::duration_text;
use crate::ConfigError;
use hxlab_core::cc::CongestionControl;
use hxlab_core::header_table::{check_header_table, DEFAULT_HEADER_TABLE};
use hxlab_core::sched::{Lowat, Scheduler};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

/// Everything `hxlab serve` can be told; `Default` gives the CLI's defaults.
///
/// In JSON (`hxlab serve --config FILE|-`), durations are strings with a unit (`"60s"`),
/// `cc` a controller's name, `bind` an address; missing keys take the flags' defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    /// Address every listener binds to.
    pub bind: IpAddr,
    /// TCP port for TLS (h1 + h2 by ALPN); the UDP HTTP/3 port is the same number. 0 = free.
    pub tls_port: u16,
    /// TCP port for cleartext h1 and h2c (prior knowledge). 0 = free.
    pub plain_port: u16,
    /// Serve HTTP/3 on UDP `tls_port` (and advertise it with Alt-Svc on TCP).
    pub h3: bool,
    /// PEM certificate chain; without it a self-signed one is made for localhost/127.0.0.1/::1.
    pub cert: Option<PathBuf>,
    /// PEM private key belonging to `cert`.
    pub key: Option<PathBuf>,
    /// Where to write the served certificate (PEM) so clients can trust it.
    pub cert_out: Option<PathBuf>,
    /// Directory served under `/static/`; nothing outside it is ever served.
    pub dir: Option<PathBuf>,
    /// Concurrent streams per HTTP/2 or HTTP/3 connection.
    pub max_streams: u32,
    /// Worker threads for the runtime the CLI builds (1 = single-threaded runtime), which
    /// serves TCP (h1, h2, h2c); `start` runs on the caller's runtime and ignores it. HTTP/3
    /// always runs on one QUIC thread of its own.
    #[cfg_attr(
        feature = "schema",
        schemars(transform = default_is_the_cpu_count)
    )]
    pub threads: usize,
    /// Longest server think time a request may ask for (`delay=`).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub max_delay: Duration,
    /// Largest response body a request may ask for (`/bytes/N`, `size=`).
    pub max_size: u64,
    /// Largest request header block accepted, in bytes.
    pub max_header_size: u32,
    /// Most sub-resources a `/page` may reference.
    pub max_page_resources: u32,
    /// How long a shutdown waits for in-flight requests before giving up on them.
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub drain_timeout: Duration,
    /// Congestion controller of every connection served: TCP_CONGESTION on every accepted
    /// socket, the same controller for every QUIC connection. None: the kernel's default on
    /// TCP (bbr on some machines, cubic on most) and quinn's (Cubic) on QUIC.
    pub cc: Option<CongestionControl>,
    /// Accept TLS 1.3 early data (0-RTT) on TCP, as QUIC 0-RTT is accepted on HTTP/3. Early
    /// data can be replayed; see `tls_early_data.rs` and docs/serve.md.
    pub early_data: bool,
    /// How responses share an HTTP/2 or HTTP/3 connection (docs/priorities.md): `rfc9218`
    /// (urgency first, from the `priority` header, PRIORITY_UPDATE and, on HTTP/2 without
    /// either, RFC 7540 weights), `round-robin` or `fifo`. HTTP/1.1 sends one response at a
    /// time on a connection, so it has nothing to schedule.
    pub scheduler: Scheduler,
    /// TCP_NOTSENT_LOWAT on every TCP socket (h1, h1+TLS, h2, h2c): the kernel holds at most
    /// about this many bytes not yet sent, and HTTP/2 builds its next frames only as the
    /// socket takes them, so an urgent response does not queue behind committed bulk.
    /// `off`: the kernel's autotuned buffer (hundreds of KB).
    pub notsent_lowat: Lowat,
    /// Bytes one QUIC connection may buffer in each direction: its send window (response
    /// data written and not yet acknowledged), its receive window and each stream's. A
    /// client that stops reading or acknowledging pins at most this much; the default,
    /// 4 MiB, is Linux's default TCP send buffer limit (net.ipv4.tcp_wmem), so HTTP/3 gets
    /// the buffering HTTP/2 gets over TCP.
    pub quic_window: u64,
    /// Most QUIC connections open at once; more are refused (the client sees
    /// CONNECTION_REFUSED). With `quic_window`, it bounds HTTP/3 buffering at
    /// `quic_max_connections × quic_window` per direction. Connections still in their
    /// handshake count too, so abandoned handshakes cannot hold more than this either.
    pub quic_max_connections: u32,
    /// Half-open QUIC connections (handshake begun, not complete) above which a new client
    /// must first prove its address with a Retry (one extra round trip) before the server
    /// keeps any state for it; 0 = always. A flood of spoofed or abandoned Initials then
    /// costs the server a stateless Retry each instead of a handshake and a table slot.
    pub quic_retry_threshold: u32,
    /// Most QUIC connections (open or in handshake) from one client address (an IPv4
    /// address, an IPv6 /64); more are refused with CONNECTION_REFUSED, so one host cannot
    /// take the whole `quic_max_connections` table.
    pub quic_max_per_address: u32,
    /// Most TCP connections (h1, h1+TLS, h2, h2c) open at once; 0 = from the file limit
    /// (the server raises its soft limit to the hard one at start and keeps an eighth, at
    /// least 64, for listeners, files and QUIC). More are closed at accept, with one log line
    /// a second while it lasts, so the server never runs out of descriptors.
    pub tcp_max_connections: u32,
    /// Most TCP connections open from one client address (an IPv4 address, an IPv6 /64);
    /// more are closed at accept, so one host cannot take every slot. The default is above
    /// what the lab's own loads open from 127.0.0.1 (bench/scale.sh: 10,000).
    pub tcp_max_per_address: u32,
    /// A response that gets no flow-control window (h2, h3) for this long has its stream
    /// reset, freeing what it holds (nginx: send_timeout, 60 s).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub send_timeout: Duration,
    /// A request body that stops coming for this long: 408 on HTTP/1.1 (then close), the
    /// stream reset on h2/h3 (nginx: client_body_timeout, 60 s).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub body_timeout: Duration,
    /// An HTTP/3 request head must be complete this long after its stream opened, else the
    /// stream is reset; an HTTP/2 header block this long after its HEADERS, else the
    /// connection is closed (HTTP/1.1 closes a connection whose head has not come after
    /// 15–30 s of silence).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub head_timeout: Duration,
    /// A connection with no request in flight (h1, h2, h3) is closed after one to two of
    /// these periods (h2 and h3: GOAWAY first), whatever keeps it alive below HTTP (QUIC
    /// PINGs, TCP keep-alives).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub idle_timeout: Duration,
    /// Answer every request from this HAR archive instead of the endpoints (`/stats` and
    /// `/replay-stats` stay); the self-signed certificate then also names every recorded
    /// host.
    pub replay: Option<PathBuf>,
    /// Where the `hxlab serve` command writes its [`ReadyFile`](crate::ReadyFile) once every
    /// listener accepts (the library's `start` does not write it).
    pub ready_file: Option<PathBuf>,
    /// Header compression (`--header-table`): the dynamic table we advertise to clients
    /// (h2: SETTINGS_HEADER_TABLE_SIZE; h3: QPACK_MAX_TABLE_CAPACITY) and the most our
    /// encoder uses for responses (it uses min(this, what the client advertised)). 0: static
    /// table only from the first response. Default 4096, RFC 7541's initial size and what
    /// nginx, h2o and nghttp2 use; at most 65536.
    pub header_table: u64,
    /// More host names the self-signed certificate carries (beside localhost, 127.0.0.1,
    /// ::1, the bound address and a replay's recorded hosts), so a browser that checks names
    /// (Firefox, trusting the certificate through its NSS store) accepts the origin under
    /// them. Ignored with `cert`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cert_names: Vec<String>,
    /// Write a qlog (JSON-SEQ: quinn's transport events, our HTTP/3 frame and QPACK
    /// events) of every QUIC connection into this directory, as `serve.N.sqlog`
    /// (`--qlog DIR`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qlog_dir: Option<PathBuf>,
}

/// For a field whose default is this machine's CPU count (`ServeConfig::threads`): the
/// schema says so instead of carrying the number of the machine that generated it, so the
/// committed files are the same wherever they are generated.
#[cfg(feature = "schema")]
fn default_is_the_cpu_count(schema: &mut schemars::Schema) {
    if let Some(object) = schema.as_object_mut() {
        object.remove("default");
        let said = object
            .get("description")
            .and_then(|d| d.as_str())
            .unwrap_or_default()
            .to_string();
        let with_default = format!("{said} Default: the CPUs this process may use.");
        object.insert("description".into(), with_default.trim_start().into());
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            tls_port: 8443,
            plain_port: 8080,
            h3: true,
            cert: None,
            key: None,
            cert_out: None,
            dir: None,
            max_streams: 100,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            max_delay: Duration::from_secs(60),
            max_size: 1 << 40,
            max_header_size: 64 * 1024,
            max_page_resources: 1000,
            drain_timeout: Duration::from_secs(10),
            cc: None,
            early_data: true,
            scheduler: Scheduler::default(),
            notsent_lowat: Lowat::default(),
            quic_window: 4 << 20,
            quic_max_connections: 1024,
            quic_retry_threshold: 64,
            quic_max_per_address: 256,
            tcp_max_connections: 0,
            tcp_max_per_address: 16_384,
            send_timeout: Duration::from_secs(60),
            body_timeout: Duration::from_secs(60),
            head_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(15),
            replay: None,
            ready_file: None,
            header_table: DEFAULT_HEADER_TABLE,
            cert_names: Vec::new(),
            qlog_dir: None,
        }
    }
}

impl ServeConfig {
    /// Refuses a configuration no server can run with, with the flag's name in one line.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.to_string()));
        if self.cert.is_some() != self.key.is_some() {
            return bad("--cert and --key go together: give both or neither");
        }
        if !(1024..=16 * 1024 * 1024).contains(&self.max_header_size) {
            return bad("--max-header-size must be between 1KiB and 16MiB");
        }
        if self.threads == 0 || self.threads > 1024 {
            return bad("--threads must be between 1 and 1024");
        }
        if self.max_streams == 0 {
            return bad("--max-streams must be at least 1");
        }
        if !(16 << 10..=1 << 30).contains(&self.quic_window) {
            return bad("--quic-window must be between 16KiB and 1GiB");
        }
        if self.quic_max_connections == 0 {
            return bad("--quic-max-connections must be at least 1");
        }
        if self.quic_max_per_address == 0 {
            return bad("--quic-max-per-address must be at least 1");
        }
        if self.tcp_max_per_address == 0 {
            return bad("--tcp-max-per-address must be at least 1");
        }
        if [
            self.send_timeout,
            self.body_timeout,
            self.head_timeout,
            self.idle_timeout,
        ]
        .iter()
        .any(Duration::is_zero)
        {
            return bad("--send-timeout, --body-timeout, --head-timeout and --idle-timeout must be longer than 0");
        }
        if let Some(cc) = self.cc {
            CongestionControl::parse_available(cc.name())
                .map_err(|e| ConfigError(format!("--cc: {e}")))?;
        }
        check_header_table("--header-table", self.header_table).map_err(ConfigError)?;
        Ok(())
    }
}

crate::json_form!(ServeConfig, "serve config");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_and_one_validator() {
        let cfg = ServeConfig {
            bind: "::1".parse().expect("addr"),
            tls_port: 0,
            cc: Some(CongestionControl::Reno),
            send_timeout: Duration::from_millis(250),
            replay: Some("site.har".into()),
            ready_file: Some("/tmp/ready.json".into()),
            ..ServeConfig::default()
        };
        let back = ServeConfig::from_json(&cfg.to_json()).expect("round trip");
        assert_eq!(back, cfg);
        let partial = ServeConfig::from_json(r#"{"tls_port": 0, "cc": "cubic"}"#).expect("partial");
        assert_eq!(partial.plain_port, 8080);
        assert_eq!(partial.cc, Some(CongestionControl::Cubic));
        for (json, want) in [
            (r#"{"max_streams": 0}"#, "--max-streams"),
            (r#"{"quic_window": 1}"#, "--quic-window"),
            (r#"{"quic_max_per_address": 0}"#, "--quic-max-per-address"),
            (r#"{"tcp_max_per_address": 0}"#, "--tcp-max-per-address"),
            (r#"{"cert": "c.pem"}"#, "--cert and --key"),
            (r#"{"threads": 0}"#, "--threads"),
            (r#"{"send_timeout": "0s"}"#, "--send-timeout"),
            (r#"{"cc": "vegas"}"#, "vegas"),
            (
                r#"{"header_table": 70000}"#,
                "--header-table 70000: at most 65536",
            ),
            (r#"{"bogus": 1}"#, "unknown field"),
        ] {
            let e = ServeConfig::from_json(json).expect_err(json).to_string();
            assert!(e.contains(want), "{json}: {e}");
        }
    }
}
