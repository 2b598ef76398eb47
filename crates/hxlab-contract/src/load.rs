//! [`LoadConfig`]: everything `hxlab load` can be asked, as a plain struct the lab can fill,
//! and the JSON form of it that `hxlab load --config FILE` reads (serde, unknown keys
//! refused, missing keys take the flags' defaults). One validator, [`LoadConfig::validate`],
//! for the flags, the file and the lab alike.

use crate::duration_text;
use crate::{ConfigError, ConnectTo};
use hxlab_core::cc::CongestionControl;
use hxlab_core::header_table::{check_header_table, DEFAULT_HEADER_TABLE};
use hxlab_core::Proto;
use std::path::PathBuf;
use std::time::Duration;

/// One load run, as asked. `Default` is `-n 1 -c 1 -m 1 -t 1`, GET, auto protocol, cubic.
///
/// In JSON, durations are strings with a unit (`"30s"`, `"250ms"`), `proto`,
/// `no_tls_proto` and `cc` their command-line names (`cc` null: the system's default),
/// `connect_to` the flag's `HOST[:PORT]`, and `headers` a list of `[name, value]` pairs.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
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
    #[serde(with = "duration_text::optional")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "duration_text::NullableDurationText")
    )]
    pub duration: Option<Duration>,
    /// Warm-up before the measured duration (requests sent, nothing recorded); needs `duration`.
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub warm_up: Duration,
    /// Extra request headers (name, value); a `host` header replaces the URL authority.
    pub headers: Vec<(String, String)>,
    /// Request body (the contents of h2load's `-d FILE`, or `--data-string`); its presence
    /// makes the default method POST and HTTP/1.1 send one request at a time (as h2load).
    pub body: Option<Vec<u8>>,
    /// Request method; None: GET, or POST with a body.
    pub method: Option<String>,
    /// Longest wait for a response (from send to last byte).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub timeout: Duration,
    /// Longest wait for TCP connect + TLS handshake (or the QUIC handshake).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
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
    /// HTTP/1.1: keep up to `-m` requests in flight on a connection (pipelining, as h2load
    /// does with `-m`). False: one request at a time (`hxlab trace`, whose HTTP/1.1 requests
    /// go one after another).
    pub h1_pipeline: bool,
    /// Open model: requests per second over all connections.
    pub rate: Option<f64>,
    /// h2load's `--rps`: each client sends at most this many requests per second (a closed
    /// model at a pace; latency counts from the send).
    pub rps: Option<f64>,
    /// Protocol to speak.
    pub proto: Proto,
    /// h2load's `-p/--no-tls-proto`: what `proto: auto` speaks on an http:// URL, `h1` or
    /// `h2c`. None: HTTP/1.1 (h2load's default is h2c).
    pub no_tls_proto: Option<Proto>,
    /// h2load's `--connect-to`: connect here instead of the URL's host and port; the URL's
    /// authority stays in Host/:authority and, unless `sni` says otherwise, in TLS SNI.
    pub connect_to: Option<ConnectTo>,
    /// h2load's `--sni`: the TLS server name sent (and verified) instead of the URL's host.
    pub sni: Option<String>,
    /// h2load's `-T/--connection-active-timeout`: once a client has sent its last request,
    /// the longest its connection stays open for the answers; then the requests still in
    /// flight fail as `timeout` and the client is done.
    #[serde(with = "duration_text::optional")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "duration_text::NullableDurationText")
    )]
    pub connection_active_timeout: Option<Duration>,
    /// h2load's `-N/--connection-inactivity-timeout`: the longest a connection may go
    /// without sending or receiving; then its requests in flight fail as `timeout` and the
    /// client is done.
    #[serde(with = "duration_text::optional")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "duration_text::NullableDurationText")
    )]
    pub connection_inactivity_timeout: Option<Duration>,
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
    /// Congestion controller, the same on every protocol: TCP_CONGESTION on TCP, quinn's
    /// controller on QUIC. Cubic unless told otherwise; None: whatever each stack runs by
    /// default (the kernel's `net.ipv4.tcp_congestion_control`, quinn's Cubic).
    pub cc: Option<CongestionControl>,
    /// The header table our decoder keeps, advertised to the server: HPACK's
    /// SETTINGS_HEADER_TABLE_SIZE (h2), QPACK_MAX_TABLE_CAPACITY (h3). h2load's
    /// `--header-table-size`; `--header-table` sets it and `encoder_header_table_size`.
    pub header_table_size: u64,
    /// The most our encoder uses; it uses min(this, what the server advertised). h2load's
    /// `--encoder-header-table-size`. 0: static table only from the first request.
    pub encoder_header_table_size: u64,
    /// This process runs one part of a run spread over several (`--shard I/N`): its share of
    /// the connections and of `-n`, and in the open model the timetable's requests `j` with
    /// `j mod N = I`. None: the whole run.
    pub shard: Option<Shard>,
    /// The run id recorded in the result (`--run-id`); None: derived from the configuration
    /// and `start_at` for a shard (so every shard of one command line agrees), random
    /// otherwise.
    pub run_id: Option<String>,
    /// Wait until this wall-clock instant (Unix seconds) before starting (`--start-at`),
    /// so parts on several machines start together.
    pub start_at: Option<f64>,
    /// How late after `start_at` a start still counts as on time (`--start-tolerance`).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub start_tolerance: Duration,
    /// Width of the result's time series (`RunResult::intervals`, `--interval`); zero: no
    /// series. Widened (doubled) when a `-D` run would need more than
    /// `hxlab_core::interval::MAX_INTERVALS` intervals.
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub interval: Duration,
    /// Draw a progress bar on stderr (the caller checks it is a terminal); not part of the
    /// JSON form, where the reader decides.
    #[serde(skip)]
    pub progress: bool,
    /// Write a qlog (JSON-SEQ) of every QUIC connection to `BASE.W.C.sqlog` (worker W,
    /// client C; a client's later connections `BASE.W.C.K.sqlog`), from `--qlog DIR` or
    /// h2load's `--qlog-file-base BASE`; none when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qlog_base: Option<std::path::PathBuf>,
    /// h2load's `--log-file`: append one line per measured request to this file (start in
    /// µs since the epoch, status or -1, µs to the end of the response; tab-separated).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_file: Option<PathBuf>,
    /// h2load's `-v`: a line per connection and per request on stderr.
    pub verbose: bool,
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
            h1_pipeline: true,
            rate: None,
            rps: None,
            proto: Proto::Auto,
            no_tls_proto: None,
            connect_to: None,
            sni: None,
            connection_active_timeout: None,
            connection_inactivity_timeout: None,
            alpn_list: None,
            tls_resume: false,
            zero_rtt: false,
            prime: false,
            tfo: false,
            cc: Some(CongestionControl::Cubic),
            header_table_size: DEFAULT_HEADER_TABLE,
            encoder_header_table_size: DEFAULT_HEADER_TABLE,
            shard: None,
            run_id: None,
            start_at: None,
            start_tolerance: Duration::from_secs(1),
            interval: Duration::from_secs(1),
            progress: false,
            qlog_base: None,
            log_file: None,
            verbose: false,
        }
    }
}

/// Part `index` of `count` of a run (see [`LoadConfig::shard`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Shard {
    /// 0..count.
    pub index: u64,
    /// Parts of the run, at least 1.
    pub count: u64,
}

impl Shard {
    /// Reads `I/N` (`--shard 2/8`).
    pub fn parse(s: &str) -> Result<Shard, String> {
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| format!("--shard {s:?}: expected INDEX/COUNT, e.g. 0/4"))?;
        let num = |t: &str| {
            t.trim()
                .parse::<u64>()
                .map_err(|_| format!("--shard {s:?}: expected INDEX/COUNT, e.g. 0/4"))
        };
        let shard = Shard {
            index: num(i)?,
            count: num(n)?,
        };
        shard.check()?;
        Ok(shard)
    }

    /// The index is below the count, and the count is sane.
    pub fn check(&self) -> Result<(), String> {
        if self.count == 0 || self.count > MAX_SHARDS {
            return Err(format!(
                "--shards {}: must be between 1 and {MAX_SHARDS}",
                self.count
            ));
        }
        if self.index >= self.count {
            return Err(format!(
                "shard index {} is out of range for {} shards (0..{})",
                self.index,
                self.count,
                self.count - 1
            ));
        }
        Ok(())
    }

    /// This part's range `[lo, hi)` of `total` things split as evenly as possible (the
    /// connections), numbered as in the whole run.
    pub fn range(&self, total: u64) -> (u64, u64) {
        let t = u128::from(total);
        let (i, n) = (u128::from(self.index), u128::from(self.count));
        ((t * i / n) as u64, (t * (i + 1) / n) as u64)
    }
}

/// Most parts a run may have (a Job of ten thousand pods is already far out).
pub const MAX_SHARDS: u64 = 100_000;

/// Latest `--start-at` accepted, from now (later is a typo, and the pods would idle).
const MAX_START_WAIT_S: f64 = 86_400.0;

/// Reads one `-H "Name: value"` argument (both trimmed), for `hxlab load` and `hxlab trace`;
/// the name and value themselves are checked when the run starts (`bad header name`).
pub fn parse_header_arg(h: &str) -> Result<(String, String), String> {
    let Some((name, value)) = h.split_once(':') else {
        return Err(format!("-H {h:?}: expected \"Name: value\""));
    };
    if name.trim().is_empty() {
        return Err(format!("-H {h:?}: empty header name"));
    }
    Ok((name.trim().to_string(), value.trim().to_string()))
}

/// Longest duration the command line takes (a year); more is a typo.
const MAX_DURATION: Duration = Duration::from_secs(366 * 86400);

impl LoadConfig {
    /// Checks what `hxlab load`'s flags check before a run, so a configuration from a file
    /// (or built by the lab) is refused the same way. The message is one line for the user.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError(m));
        if self.urls.is_empty() {
            return bad("give at least one URL".into());
        }
        self.validate_counts()?;
        for (flag, d) in [
            ("-D/--duration", self.duration.unwrap_or_default()),
            ("--warm-up", self.warm_up),
            ("--timeout", self.timeout),
            ("--connect-timeout", self.connect_timeout),
            ("--interval", self.interval),
            (
                "-T/--connection-active-timeout",
                self.connection_active_timeout.unwrap_or_default(),
            ),
            (
                "-N/--connection-inactivity-timeout",
                self.connection_inactivity_timeout.unwrap_or_default(),
            ),
        ] {
            if d > MAX_DURATION {
                return bad(format!("{flag}: longer than a year"));
            }
        }
        if let Some((name, _)) = self.headers.iter().find(|(n, _)| n.trim().is_empty()) {
            return bad(format!("-H {name:?}: empty header name"));
        }
        if let Some(rate) = self.rate {
            if !(rate.is_finite() && rate > 0.0) {
                return bad(format!("--rate {rate}: must be a positive number"));
            }
        }
        if let Some(ids) = &self.alpn_list {
            if ids.is_empty() || ids.iter().any(|s| s.trim().is_empty()) {
                return bad("--alpn-list: give at least one protocol id, e.g. h2,http/1.1".into());
            }
        }
        if self.push && matches!(self.proto, Proto::H1 | Proto::H3) {
            return bad(
                "--push: server push is HTTP/2 only; use it with --proto h2, h2c or auto".into(),
            );
        }
        if let Some(cc) = self.cc {
            CongestionControl::parse_available(cc.name())
                .map_err(|e| ConfigError(format!("--cc: {e}")))?;
        }
        self.validate_h2load()?;
        check_header_table("--header-table-size", self.header_table_size).map_err(ConfigError)?;
        check_header_table(
            "--encoder-header-table-size",
            self.encoder_header_table_size,
        )
        .map_err(ConfigError)?;
        self.validate_parts()
    }

    /// Connections, streams, threads, requests, duration, rate and timeouts (what a run can
    /// be asked at all).
    fn validate_counts(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.to_string()));
        if self.clients == 0 {
            return bad("-c/--clients must be at least 1");
        }
        // Each client costs a few KiB up front (1M took 7.8 GB), and one source address has
        // no more than 64Ki ports towards one server port anyway.
        if self.clients > 65_536 {
            return bad("-c/--clients must be at most 65536");
        }
        if self.max_concurrent_streams == 0 {
            return bad("-m/--max-concurrent-streams must be at least 1");
        }
        if self.max_concurrent_streams > 1 << 20 {
            return bad("-m/--max-concurrent-streams is too large");
        }
        if self.threads == 0 {
            return bad("-t/--threads must be at least 1");
        }
        if self.threads > 1024 {
            return bad("-t/--threads must be at most 1024");
        }
        match self.duration {
            Some(d) if d.is_zero() => return bad("-D/--duration must be longer than 0"),
            None if self.requests == 0 => {
                return bad("-n/--requests must be at least 1 (or give -D)")
            }
            _ => {}
        }
        if !self.warm_up.is_zero() && self.duration.is_none() {
            return bad("--warm-up needs -D/--duration (as in h2load)");
        }
        // Far beyond what one client machine sends; keeps timetable arithmetic exact.
        if self.rate.is_some_and(|r| r > 1e9) {
            return bad("--rate must be at most 1e9 requests per second");
        }
        if self.timeout.is_zero() || self.connect_timeout.is_zero() {
            return bad("timeouts must be longer than 0");
        }
        Ok(())
    }

    /// The options that take h2load's meanings: `--rps`, `-p`, `--sni`, `-T`, `-N`.
    fn validate_h2load(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError(m));
        if let Some(rps) = self.rps {
            if !(rps.is_finite() && rps > 0.0 && rps <= 1e9) {
                return bad(format!(
                    "--rps {rps}: must be a positive number of requests per second (at most 1e9)"
                ));
            }
            if self.rate.is_some() {
                return bad("--rps (each client's pace) and --rate (the open model's timetable) do not go together: give one".into());
            }
        }
        if let Some(p) = self.no_tls_proto {
            if !matches!(p, Proto::H1 | Proto::H2c) {
                return bad(format!(
                    "-p/--no-tls-proto {}: use h2c or http/1.1",
                    p.name()
                ));
            }
            let agrees = match self.proto {
                Proto::Auto => true,
                Proto::H1 => p == Proto::H1,
                Proto::H2 | Proto::H2c => p == Proto::H2c,
                Proto::H3 => false,
            };
            if !agrees {
                return bad(format!(
                    "-p/--no-tls-proto {} contradicts --proto {}: give one of them",
                    p.name(),
                    self.proto.name()
                ));
            }
        }
        if let Some(sni) = &self.sni {
            if sni.is_empty() || sni.len() > 253 || sni.chars().any(|c| c.is_whitespace()) {
                return bad(format!("--sni {sni:?}: not a host name"));
            }
        }
        for (flag, t) in [
            (
                "-T/--connection-active-timeout",
                self.connection_active_timeout,
            ),
            (
                "-N/--connection-inactivity-timeout",
                self.connection_inactivity_timeout,
            ),
        ] {
            if t.is_some_and(|t| t.is_zero()) {
                return bad(format!("{flag} must be longer than 0"));
            }
        }
        Ok(())
    }

    /// Shard, run id and start time: a part must get at least one connection and, with
    /// `-n`, at least one request.
    fn validate_parts(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError(m));
        if let Some(id) = &self.run_id {
            if id.is_empty()
                || id.len() > 128
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
            {
                return bad(format!(
                    "--run-id {id:?}: use 1 to 128 letters, digits, '-', '_', '.' or ':'"
                ));
            }
        }
        if let Some(at) = self.start_at {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            if !at.is_finite() || at - now > MAX_START_WAIT_S {
                return bad("--start-at: more than a day from now".into());
            }
        }
        if self.start_tolerance > MAX_DURATION {
            return bad("--start-tolerance: longer than a year".into());
        }
        let Some(shard) = self.shard else {
            return Ok(());
        };
        shard.check().map_err(ConfigError)?;
        let (c0, c1) = shard.range(self.clients);
        if c1 == c0 {
            return bad(format!(
                "-c {} over {} shards leaves shard {} without a connection; use at least as many connections as shards",
                self.clients, shard.count, shard.index
            ));
        }
        if self.duration.is_none() && self.shard_requests() == Some(0) {
            return bad(format!(
                "-n {} over {} shards leaves shard {} without a request",
                self.requests, shard.count, shard.index
            ));
        }
        Ok(())
    }

    /// With `-n`, the requests this part sends: in the closed model its connections' share
    /// (the whole run's split, [`Shard::range`] of the connections, so the shares add up to
    /// `-n`); in the open model the timetable's requests `j < n` with `j mod N = I`. None when
    /// `-D` bounds the run.
    pub fn shard_requests(&self) -> Option<u64> {
        if self.duration.is_some() {
            return None;
        }
        let Some(shard) = self.shard else {
            return Some(self.requests);
        };
        if self.rate.is_some() {
            let n = self.requests;
            return Some(if n > shard.index {
                (n - shard.index).div_ceil(shard.count)
            } else {
                0
            });
        }
        let (c0, c1) = shard.range(self.clients);
        Some(split(self.requests, self.clients, c0, c1))
    }
}

/// The requests of clients `[c0, c1)` when `n` requests are split over `c` clients in
/// proportion (the same formula for shards and worker threads, so the parts add up to `n`).
pub fn split(n: u64, c: u64, c0: u64, c1: u64) -> u64 {
    let (n, c) = (u128::from(n), u128::from(c.max(1)));
    ((n * u128::from(c1) / c) - (n * u128::from(c0) / c)) as u64
}

crate::json_form!(LoadConfig, "load config");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trip_keeps_every_field() {
        let cfg = LoadConfig {
            urls: vec!["https://127.0.0.1:8443/bytes/100?delay=5".into()],
            requests: 0,
            clients: 6,
            max_concurrent_streams: 100,
            threads: 2,
            duration: Some(Duration::from_millis(1500)),
            warm_up: Duration::from_micros(250_001),
            headers: vec![("x-a".into(), "b".into())],
            body: Some(b"hello".to_vec()),
            method: Some("PUT".into()),
            timeout: Duration::from_nanos(7),
            connect_timeout: Duration::from_secs(3),
            insecure: true,
            cacert: Some("/tmp/cert.pem".into()),
            no_keepalive: true,
            push: true,
            h1_pipeline: false,
            rate: Some(123.5),
            rps: Some(7.5),
            proto: Proto::H2c,
            no_tls_proto: Some(Proto::H2c),
            connect_to: Some(ConnectTo::parse("[::1]:8443").unwrap()),
            sni: Some("example.test".into()),
            connection_active_timeout: Some(Duration::from_millis(700)),
            connection_inactivity_timeout: Some(Duration::from_secs(2)),
            alpn_list: Some(vec!["h2".into()]),
            tls_resume: true,
            zero_rtt: true,
            prime: true,
            tfo: true,
            cc: Some(CongestionControl::Cubic),
            header_table_size: 0,
            encoder_header_table_size: 1024,
            shard: Some(Shard { index: 2, count: 5 }),
            run_id: Some("job-7".into()),
            start_at: Some(1_795_000_000.5),
            start_tolerance: Duration::from_millis(250),
            interval: Duration::from_millis(100),
            progress: false,
            qlog_base: Some("qlogs/run".into()),
            log_file: Some("requests.log".into()),
            verbose: true,
        };
        let text = cfg.to_json();
        let back: LoadConfig = serde_json::from_str(&text).unwrap();
        assert_eq!(back, cfg);
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["duration"], "1500ms");
        assert_eq!(v["proto"], "h2c");
        assert_eq!(v["cc"], "cubic");
        assert_eq!(v["interval"], "100ms");
        assert_eq!(v["connect_to"], "[::1]:8443");
        assert_eq!(v["no_tls_proto"], "h2c");
        assert_eq!(v["connection_active_timeout"], "700ms");
    }

    #[test]
    fn missing_keys_take_defaults_and_unknown_keys_are_refused() {
        let cfg =
            LoadConfig::from_json(r#"{"urls":["http://127.0.0.1:1/"],"timeout":"1.5s"}"#).unwrap();
        assert_eq!(cfg.timeout, Duration::from_millis(1500));
        assert_eq!(cfg.requests, 1);
        assert_eq!(cfg.proto, Proto::Auto);
        assert_eq!(cfg.interval, Duration::from_secs(1));
        // One controller on every protocol unless told otherwise; null: each stack's own.
        assert_eq!(cfg.cc, Some(CongestionControl::Cubic));
        let system =
            LoadConfig::from_json(r#"{"urls":["http://127.0.0.1:1/"],"cc":null}"#).unwrap();
        assert_eq!(system.cc, None);
        assert_eq!(
            (cfg.header_table_size, cfg.encoder_header_table_size),
            (4096, 4096)
        );
        let mut big = cfg.clone();
        big.encoder_header_table_size = 70_000;
        let e = big.validate().unwrap_err().0;
        assert!(
            e.contains("--encoder-header-table-size 70000: at most 65536"),
            "{e}"
        );
        let e = LoadConfig::from_json(r#"{"urls":["http://x/"],"clinets":2}"#).unwrap_err();
        assert!(e.to_string().contains("clinets"), "{e}");
        let e = LoadConfig::from_json(r#"{"urls":["http://x/"],"proto":"h4"}"#).unwrap_err();
        assert!(e.to_string().contains("h4"), "{e}");
    }

    #[test]
    fn validation_refuses_what_the_flags_refuse() {
        let ok = LoadConfig {
            urls: vec!["http://127.0.0.1:1/".into()],
            ..Default::default()
        };
        assert!(ok.validate().is_ok());
        let refused = |c: LoadConfig| c.validate().unwrap_err().to_string();
        assert!(refused(LoadConfig::default()).contains("URL"));
        assert!(refused(LoadConfig {
            push: true,
            proto: Proto::H3,
            ..ok.clone()
        })
        .contains("--push"));
        assert!(refused(LoadConfig {
            rate: Some(-1.0),
            ..ok.clone()
        })
        .contains("--rate"));
        assert!(refused(LoadConfig {
            headers: vec![(" ".into(), "v".into())],
            ..ok.clone()
        })
        .contains("header"));
        assert!(refused(LoadConfig {
            alpn_list: Some(vec![]),
            ..ok.clone()
        })
        .contains("--alpn-list"));
        assert!(refused(LoadConfig {
            clients: 2,
            shard: Some(Shard { index: 0, count: 3 }),
            ..ok.clone()
        })
        .contains("without a connection"));
        assert!(refused(LoadConfig {
            requests: 3,
            clients: 4,
            rate: Some(10.0),
            shard: Some(Shard { index: 3, count: 4 }),
            ..ok.clone()
        })
        .contains("without a request"));
        assert!(refused(LoadConfig {
            rps: Some(10.0),
            rate: Some(10.0),
            ..ok.clone()
        })
        .contains("--rps"));
        assert!(refused(LoadConfig {
            rps: Some(0.0),
            ..ok.clone()
        })
        .contains("--rps"));
        assert!(refused(LoadConfig {
            no_tls_proto: Some(Proto::H3),
            ..ok.clone()
        })
        .contains("use h2c or http/1.1"));
        assert!(refused(LoadConfig {
            no_tls_proto: Some(Proto::H2c),
            proto: Proto::H1,
            ..ok.clone()
        })
        .contains("contradicts --proto h1"));
        assert!(LoadConfig {
            no_tls_proto: Some(Proto::H1),
            proto: Proto::H1,
            ..ok.clone()
        }
        .validate()
        .is_ok());
        assert!(refused(LoadConfig {
            connection_inactivity_timeout: Some(Duration::ZERO),
            ..ok.clone()
        })
        .contains("-N/"));
        assert!(refused(LoadConfig {
            sni: Some("a b".into()),
            ..ok.clone()
        })
        .contains("--sni"));
        assert!(refused(LoadConfig {
            run_id: Some("a b".into()),
            ..ok.clone()
        })
        .contains("--run-id"));
        assert!(refused(LoadConfig {
            start_at: Some(4e9),
            ..ok.clone()
        })
        .contains("--start-at"));
    }

    #[test]
    fn shards_split_connections_and_requests_into_exact_totals() {
        assert_eq!(Shard::parse("2/8").unwrap(), Shard { index: 2, count: 8 });
        for bad in ["8/8", "1", "a/2", "0/0", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        for (n, c, count, rate) in [
            (1000, 100, 3, None),
            (7, 7, 7, None),
            (1001, 5, 4, Some(50.0)),
        ] {
            let mut clients = 0;
            let mut requests = 0;
            for index in 0..count {
                let cfg = LoadConfig {
                    urls: vec!["http://127.0.0.1:1/".into()],
                    requests: n,
                    clients: c,
                    rate,
                    shard: Some(Shard { index, count }),
                    ..Default::default()
                };
                cfg.validate().unwrap();
                let (c0, c1) = cfg.shard.unwrap().range(c);
                clients += c1 - c0;
                requests += cfg.shard_requests().unwrap();
            }
            assert_eq!((clients, requests), (c, n), "n {n} c {c} over {count}");
        }
    }
}
