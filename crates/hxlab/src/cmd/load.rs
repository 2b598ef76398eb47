//! `hxlab load`: the command line of the load generator (hxlab-load does the work; the
//! human summary is hxlab-report's `run_summary`) and `--json`.

use anyhow::Context;
use hxlab_contract::{JobDone, LoadJob};
use hxlab_core::units::{parse_duration, parse_size};
use hxlab_core::RunResult;
use hxlab_load::{CongestionControl, LoadConfig, LoadError, Proto};
use hxlab_report::run_summary::{intervals_table, summary};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// Options of `hxlab load` (h2load-compatible where h2load has the flag).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Target URLs (same scheme, host and port; after the first, a bare path such as /b is
    /// on the first one's origin, as in h2load), requested round-robin.
    #[arg(
        required_unless_present_any = ["config", "jobs", "input_file"],
        value_name = "URL"
    )]
    pub urls: Vec<String>,
    /// h2load's -i: read the URLs from FILE, one per line ("-": standard input), instead of
    /// the command line; blank lines are skipped.
    #[arg(
        short = 'i',
        long = "input-file",
        value_name = "FILE",
        conflicts_with = "urls"
    )]
    pub input_file: Option<String>,
    /// Internal, for `hxlab run` inside `hxlab link`: run the lab's jobs read from standard
    /// input (one JSON `LoadJob` per line: a LoadConfig, where to write its RunResult, a time
    /// limit), loopback URLs sent to `$HXLAB_LINK_HOST`, answering each with one JSON
    /// `JobDone` line on standard output.
    #[arg(
        long,
        hide = true,
        conflicts_with_all = [
            "config", "urls", "json", "shard", "shards", "run_id", "start_at", "interval",
            "print_intervals", "metrics_listen",
        ]
    )]
    pub jobs: bool,
    /// Take the whole run from FILE, a LoadConfig in JSON (see docs/load.md) instead of the
    /// flags that describe a run; only --json, --no-progress, -q, -v, --log-file, --interval
    /// and --print-intervals (and the flags of a part: --shard, --run-id, --start-at) may go
    /// with it.
    #[arg(
        long = "config",
        value_name = "FILE",
        conflicts_with_all = [
            "urls", "input_file", "requests", "clients", "max_concurrent_streams", "threads",
            "duration", "warm_up", "headers", "data", "data_string", "method", "timeout",
            "connect_timeout", "insecure", "cacert", "no_keepalive", "rate", "rps", "proto",
            "h1", "h3", "no_tls_proto", "alpn_list", "push", "tls_resume", "zero_rtt", "prime", "tfo",
            "cc", "header_table", "header_table_size", "encoder_header_table_size",
            "connect_to", "sni", "connection_active_timeout", "connection_inactivity_timeout",
        ]
    )]
    pub config: Option<PathBuf>,
    /// Total requests (ignored with -D).
    #[arg(
        short = 'n',
        long = "requests",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub requests: u64,
    /// Connections (clients).
    #[arg(
        short = 'c',
        long = "clients",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub clients: u64,
    /// Concurrent streams per connection; on HTTP/1.1 the pipelining depth.
    #[arg(
        short = 'm',
        long = "max-concurrent-streams",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub max_concurrent_streams: u64,
    /// Worker threads (each with its own connections).
    #[arg(
        short = 't',
        long = "threads",
        default_value_t = 1,
        allow_negative_numbers = true
    )]
    pub threads: u64,
    /// Run for this long instead of -n requests (e.g. 10s, 500ms; a bare number is seconds).
    #[arg(
        short = 'D',
        long = "duration",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    pub duration: Option<String>,
    /// Warm-up before the measured duration (needs -D); h2load's --warm-up-time.
    #[arg(
        long = "warm-up",
        visible_alias = "warm-up-time",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    pub warm_up: Option<String>,
    /// Extra request header, "Name: value" (repeatable).
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// h2load's -d: send FILE's contents as the request body (the default method becomes
    /// POST, and HTTP/1.1 sends one request at a time). Literal data: --data-string.
    #[arg(
        short = 'd',
        long = "data",
        visible_alias = "data-file",
        value_name = "FILE",
        conflicts_with = "data_string"
    )]
    pub data: Option<PathBuf>,
    /// The request body given literally (what -d took before it took h2load's meaning).
    #[arg(long = "data-string", value_name = "TEXT")]
    pub data_string: Option<String>,
    /// Request method (default GET, or POST with a body).
    #[arg(long = "method")]
    pub method: Option<String>,
    /// Longest wait for a response, from send to last byte.
    #[arg(
        long = "timeout",
        default_value = "30s",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    pub timeout: String,
    /// Longest wait for connect and TLS/QUIC handshake.
    #[arg(
        long = "connect-timeout",
        default_value = "10s",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    pub connect_timeout: String,
    /// Accept any server certificate.
    #[arg(short = 'k', long = "insecure")]
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file.
    #[arg(long = "cacert", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// A new connection for every request.
    #[arg(long = "no-keepalive")]
    pub no_keepalive: bool,
    /// Open model: requests per second over all connections (latency corrected for
    /// coordinated omission). Not h2load's -r (a connection rate).
    #[arg(long = "rate", value_name = "R", allow_hyphen_values = true)]
    pub rate: Option<String>,
    /// h2load's --rps: each client sends at most N requests per second (closed model,
    /// latency from the send).
    #[arg(long = "rps", value_name = "N", allow_hyphen_values = true)]
    pub rps: Option<String>,
    /// Protocol: h1, h2, h2c, h3 or auto (https: ALPN h2,http/1.1; http: HTTP/1.1).
    #[arg(long = "proto", value_enum, ignore_case = true, default_value = "auto")]
    pub proto: Proto,
    /// Same as --proto h1.
    #[arg(long = "h1", conflicts_with = "proto")]
    pub h1: bool,
    /// Same as --proto h3 (h2load's --h3).
    #[arg(long = "h3", conflicts_with_all = ["proto", "h1"])]
    pub h3: bool,
    /// h2load's -p: what --proto auto speaks on an http:// URL, h2c or http/1.1 (default
    /// http/1.1; h2load's is h2c).
    #[arg(short = 'p', long = "no-tls-proto", value_name = "PROTO", value_parser = no_tls_proto)]
    pub no_tls_proto: Option<Proto>,
    /// h2load's --connect-to: connect to HOST[:PORT] instead of the URL's host and port
    /// (Host, :authority and TLS SNI stay the URL's).
    #[arg(long = "connect-to", value_name = "HOST[:PORT]")]
    pub connect_to: Option<String>,
    /// h2load's --sni: the TLS server name to send (and to check the certificate against)
    /// instead of the URL's host.
    #[arg(long = "sni", value_name = "NAME")]
    pub sni: Option<String>,
    /// h2load's -T: once a client has sent its last request, the longest its connection
    /// stays open for the answers (then they fail as timeout and the client is done).
    #[arg(
        short = 'T',
        long = "connection-active-timeout",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    pub connection_active_timeout: Option<String>,
    /// h2load's -N: the longest a connection may go without sending or receiving (then its
    /// requests in flight fail as timeout and the client is done).
    #[arg(
        short = 'N',
        long = "connection-inactivity-timeout",
        value_name = "DUR",
        allow_hyphen_values = true
    )]
    pub connection_inactivity_timeout: Option<String>,
    /// ALPN protocol ids to offer, comma-separated (TLS over TCP), e.g. h2,http/1.1.
    #[arg(long = "alpn-list", visible_alias = "npn-list", value_name = "LIST")]
    pub alpn_list: Option<String>,
    /// HTTP/2 (h2/h2c): accept server push (SETTINGS_ENABLE_PUSH=1); a request completes
    /// when its response and every stream it promised have ended, pushed bytes counted.
    #[arg(long = "push")]
    pub push: bool,
    /// Resume TLS sessions on new connections.
    #[arg(long = "tls-resume")]
    pub tls_resume: bool,
    /// Send the first request of a resumed connection as early data (0-RTT): QUIC 0-RTT on
    /// h3, TLS 1.3 early data on h1 over TLS and h2. Implies --tls-resume.
    #[arg(long = "0rtt")]
    pub zero_rtt: bool,
    /// Before the run, one request on one connection, not measured, so the measured
    /// connections can resume (and, with --0rtt, send early data) as a returning visitor.
    #[arg(long = "prime")]
    pub prime: bool,
    /// TCP Fast Open on TCP connections (TCP_FASTOPEN_CONNECT): once a cookie is cached, the
    /// first bytes (the request, or the TLS ClientHello) go out in the SYN. Needs
    /// net.ipv4.tcp_fastopen bit 1 here and bit 2 on the server.
    #[arg(long = "tfo")]
    pub tfo: bool,
    /// Congestion controller on every protocol: reno, cubic (the default) or bbr
    /// (TCP_CONGESTION on TCP, quinn's on QUIC); system: each stack's own default.
    #[arg(long = "cc", value_name = "CC", value_parser = cc_choice)]
    pub cc: Option<CcChoice>,
    /// Header compression, both ways: sets --header-table-size and
    /// --encoder-header-table-size (either, given too, overrides it). 0 = static table only
    /// from the first request. Default 4096; at most 64KiB.
    #[arg(long = "header-table", value_name = "SIZE")]
    pub header_table: Option<String>,
    /// The decoder header table size we advertise (h2: SETTINGS_HEADER_TABLE_SIZE; h3:
    /// QPACK_MAX_TABLE_CAPACITY), as h2load's option. Default: 4K.
    #[arg(long = "header-table-size", value_name = "SIZE")]
    pub header_table_size: Option<String>,
    /// The encoder header table size: the server's decoder says the most it accepts, and
    /// the negotiated size is the minimum of this and the server's, as h2load's option.
    /// Default: 4K.
    #[arg(long = "encoder-header-table-size", value_name = "SIZE")]
    pub encoder_header_table_size: Option<String>,
    /// Run part INDEX/COUNT of a run spread over COUNT processes or machines (e.g. 0/4): this
    /// part opens its share of -c and sends its share of -n; with --rate it sends the
    /// timetable's requests j with j mod COUNT = INDEX. `hxlab merge` adds the parts back.
    #[arg(long = "shard", value_name = "I/N", conflicts_with = "shards")]
    pub shard: Option<String>,
    /// Like --shard, with the index from the JOB_COMPLETION_INDEX variable (a Kubernetes
    /// Indexed Job sets it in each pod).
    #[arg(long = "shards", value_name = "N")]
    pub shards: Option<u64>,
    /// The run id recorded in the result; shards of one run must share it (default: a
    /// digest of the command line and --start-at for shards, random otherwise).
    #[arg(long = "run-id", value_name = "ID")]
    pub run_id: Option<String>,
    /// Wait until TIME (RFC 3339, e.g. 2026-11-23T20:30:00Z, or Unix seconds) before
    /// starting, so parts on several machines start together; the result records how late
    /// this one started.
    #[arg(long = "start-at", value_name = "TIME")]
    pub start_at: Option<String>,
    /// A start later than --start-at by more than this is flagged late.
    #[arg(
        long = "start-tolerance",
        value_name = "DUR",
        default_value = "1s",
        allow_hyphen_values = true
    )]
    pub start_tolerance: String,
    /// Width of the time series the result records (requests, bytes, errors and latency per
    /// interval of the measured run, by completion time); 0 for none. A run that would need
    /// more than 10000 intervals gets a wider one (doubled until it fits). Default 1s.
    #[arg(long = "interval", value_name = "DUR", allow_hyphen_values = true)]
    pub interval: Option<String>,
    /// After the run, print the time series as a table (where the summary goes; even with
    /// -q).
    #[arg(long = "print-intervals")]
    pub print_intervals: bool,
    /// Write a qlog (JSON-SEQ: quinn's transport events and HTTP/3 frame events) of every
    /// QUIC connection into DIR, as load.WORKER.CLIENT.sqlog (a client's later connections
    /// load.WORKER.CLIENT.K.sqlog).
    #[arg(long = "qlog", value_name = "DIR", conflicts_with = "qlog_file_base")]
    pub qlog: Option<std::path::PathBuf>,
    /// h2load's spelling: a qlog of every QUIC connection as BASE.WORKER.CLIENT.sqlog, as
    /// h2load names them (a client's later connections BASE.WORKER.CLIENT.K.sqlog).
    #[arg(long = "qlog-file-base", value_name = "BASE")]
    pub qlog_file_base: Option<std::path::PathBuf>,
    /// h2load's --log-file: append a line per measured request to FILE: its start in µs
    /// since the epoch, the status (-1: failed) and µs to the end of the response,
    /// tab-separated.
    #[arg(long = "log-file", value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// h2load's -v: a line per connection and per request on stderr.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,
    /// Serve the run's figures as they go at http://ADDR/metrics, in the OpenMetrics text
    /// format Prometheus scrapes (requests, statuses, errors, bytes, connections, latency
    /// histogram), e.g. 127.0.0.1:9464.
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// How long /metrics keeps serving the run's totals after it ends, so the last scrape
    /// sees them.
    #[arg(
        long = "metrics-linger",
        value_name = "DUR",
        default_value = "15s",
        requires = "metrics_listen",
        allow_hyphen_values = true
    )]
    pub metrics_linger: String,
    /// Write the RunResult as JSON to FILE, or to stdout with "-".
    #[arg(long = "json", value_name = "FILE")]
    pub json: Option<String>,
    /// No progress bar.
    #[arg(long = "no-progress")]
    pub no_progress: bool,
    /// No human summary.
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
}

/// `--cc`: a controller, or `system` for each stack's own default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CcChoice {
    /// This controller on every connection.
    Set(CongestionControl),
    /// The kernel's default on TCP, quinn's on QUIC.
    System,
}

impl CcChoice {
    /// As `LoadConfig::cc` holds it.
    pub fn config(self) -> Option<CongestionControl> {
        match self {
            CcChoice::Set(cc) => Some(cc),
            CcChoice::System => None,
        }
    }
}

/// Reads `--cc`: a controller this kernel offers, or `system`.
fn cc_choice(s: &str) -> Result<CcChoice, String> {
    if s.eq_ignore_ascii_case("system") {
        return Ok(CcChoice::System);
    }
    CongestionControl::parse_available(s)
        .map(CcChoice::Set)
        .map_err(|e| format!("{e}, or system"))
}

/// Reads `-p/--no-tls-proto`: h2c or http/1.1, as h2load takes them.
fn no_tls_proto(s: &str) -> Result<Proto, String> {
    match s.to_ascii_lowercase().as_str() {
        "h2c" => Ok(Proto::H2c),
        "http/1.1" | "h1" => Ok(Proto::H1),
        _ => Err(format!("{s:?}: use h2c or http/1.1")),
    }
}

/// A duration with a unit, or a bare number of seconds (as h2load's -D).
fn duration_arg(flag: &str, s: &str) -> anyhow::Result<Duration> {
    if let Ok(secs) = s.trim().parse::<f64>() {
        if secs.is_finite() && (0.0..366.0 * 86400.0).contains(&secs) {
            return Ok(Duration::from_secs_f64(secs));
        }
        return Err(super::usage(format!(
            "{flag} {s:?}: not a valid number of seconds"
        )));
    }
    parse_duration(s).map_err(|e| super::usage(format!("{flag}: {e}")))
}

/// Builds the library configuration from the command line (usage errors exit 2).
pub fn config_from_args(a: &Args) -> anyhow::Result<LoadConfig> {
    let mut cfg = LoadConfig {
        urls: match &a.input_file {
            Some(file) => urls_from_file(file)?,
            None => a.urls.clone(),
        },
        ..Default::default()
    };
    cfg.requests = a.requests;
    cfg.clients = a.clients;
    cfg.max_concurrent_streams = a.max_concurrent_streams;
    cfg.threads = a.threads;
    cfg.duration = a
        .duration
        .as_deref()
        .map(|s| duration_arg("-D/--duration", s))
        .transpose()?;
    if let Some(w) = &a.warm_up {
        cfg.warm_up = duration_arg("--warm-up", w)?;
    }
    for h in &a.headers {
        cfg.headers
            .push(hxlab_load::parse_header_arg(h).map_err(super::usage)?);
    }
    if let Some(p) = &a.data {
        cfg.body = Some(body_file(p)?);
    }
    if let Some(d) = &a.data_string {
        cfg.body = Some(d.as_bytes().to_vec());
    }
    cfg.method = a.method.clone();
    cfg.timeout = duration_arg("--timeout", &a.timeout)?;
    cfg.connect_timeout = duration_arg("--connect-timeout", &a.connect_timeout)?;
    cfg.insecure = a.insecure;
    cfg.cacert = a.cacert.clone();
    cfg.no_keepalive = a.no_keepalive;
    if let Some(r) = &a.rate {
        let t = r.trim().trim_end_matches("/s");
        let rate: f64 = t.parse().map_err(|_| {
            super::usage(format!(
                "--rate {r:?}: expected requests per second, e.g. 1000"
            ))
        })?;
        if !(rate.is_finite() && rate > 0.0) {
            return Err(super::usage(format!(
                "--rate {r:?}: must be a positive number"
            )));
        }
        cfg.rate = Some(rate);
    }
    if let Some(r) = &a.rps {
        let rps: f64 = r.trim().parse().map_err(|_| {
            super::usage(format!(
                "--rps {r:?}: expected requests per second per client, e.g. 100"
            ))
        })?;
        cfg.rps = Some(rps);
    }
    cfg.proto = match (a.h1, a.h3) {
        (true, _) => Proto::H1,
        (_, true) => Proto::H3,
        _ => a.proto,
    };
    cfg.no_tls_proto = a.no_tls_proto;
    h2load_connection(a, &mut cfg)?;
    if let Some(list) = &a.alpn_list {
        let ids: Vec<String> = list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        if ids.is_empty() {
            return Err(super::usage(
                "--alpn-list: give at least one protocol id, e.g. h2,http/1.1",
            ));
        }
        cfg.alpn_list = Some(ids);
    }
    cfg.push = a.push;
    cfg.tls_resume = a.tls_resume;
    cfg.zero_rtt = a.zero_rtt;
    cfg.prime = a.prime;
    cfg.tfo = a.tfo;
    if let Some(cc) = a.cc {
        cfg.cc = cc.config();
    }
    header_tables(a, &mut cfg)?;
    apply_parts(a, &mut cfg)?;
    cfg.progress = progress(a);
    Ok(cfg)
}

/// h2load's connection flags onto `cfg`: --connect-to, --sni, -T and -N.
fn h2load_connection(a: &Args, cfg: &mut LoadConfig) -> anyhow::Result<()> {
    if let Some(c) = &a.connect_to {
        cfg.connect_to = Some(hxlab_contract::ConnectTo::parse(c).map_err(super::usage)?);
    }
    cfg.sni = a.sni.clone();
    let dur =
        |flag: &str, v: &Option<String>| v.as_deref().map(|s| duration_arg(flag, s)).transpose();
    cfg.connection_active_timeout = dur(
        "-T/--connection-active-timeout",
        &a.connection_active_timeout,
    )?;
    cfg.connection_inactivity_timeout = dur(
        "-N/--connection-inactivity-timeout",
        &a.connection_inactivity_timeout,
    )?;
    Ok(())
}

/// `-d FILE`: the file's contents (at most the body cap). A value that names no file is
/// most likely literal data given as before -d took h2load's meaning: the error says so.
fn body_file(p: &Path) -> anyhow::Result<Vec<u8>> {
    if !p.exists() {
        return Err(super::usage(format!(
            "-d/--data {}: no such file; -d takes a file whose contents are the body, as in h2load (give literal data with --data-string)",
            p.display()
        )));
    }
    hxlab_core::read_capped(p, hxlab_core::files::cap::BODY)
        .map_err(|e| super::usage(format!("-d/--data {}: {e}", p.display())))
}

/// `-i FILE` (or `-` for standard input): one URL per line, blank lines skipped.
fn urls_from_file(file: &str) -> anyhow::Result<Vec<String>> {
    let text = if file == "-" {
        use std::io::Read;
        let mut text = String::new();
        std::io::stdin()
            .lock()
            .take(hxlab_core::files::cap::SMALL)
            .read_to_string(&mut text)
            .map_err(|e| super::usage(format!("-i/--input-file -: {e}")))?;
        text
    } else {
        hxlab_core::read_capped_string(Path::new(file), hxlab_core::files::cap::SMALL)
            .map_err(|e| super::usage(format!("-i/--input-file {file}: {e}")))?
    };
    let urls: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    if urls.is_empty() {
        return Err(super::usage(format!(
            "-i/--input-file {file}: no URL in it (one per line)"
        )));
    }
    Ok(urls)
}

/// --header-table (both tables), then --header-table-size and --encoder-header-table-size
/// (h2load's), onto `cfg`; sizes take a unit (4KiB) and are bounded by the validator.
fn header_tables(a: &Args, cfg: &mut LoadConfig) -> anyhow::Result<()> {
    let size = |flag: &str, v: &Option<String>| {
        v.as_deref()
            .map(|s| parse_size(s).map_err(|e| super::usage(format!("{flag}: {e}"))))
            .transpose()
    };
    if let Some(both) = size("--header-table", &a.header_table)? {
        hxlab_core::header_table::check_header_table("--header-table", both)
            .map_err(super::usage)?;
        cfg.header_table_size = both;
        cfg.encoder_header_table_size = both;
    }
    if let Some(n) = size("--header-table-size", &a.header_table_size)? {
        cfg.header_table_size = n;
    }
    if let Some(n) = size("--encoder-header-table-size", &a.encoder_header_table_size)? {
        cfg.encoder_header_table_size = n;
    }
    Ok(())
}

/// --shard/--shards, --run-id, --start-at and --start-tolerance onto a configuration (from
/// the flags or from --config), then the whole is validated.
fn apply_parts(a: &Args, cfg: &mut LoadConfig) -> anyhow::Result<()> {
    if let Some(s) = &a.shard {
        cfg.shard = Some(hxlab_load::Shard::parse(s).map_err(super::usage)?);
    }
    if let Some(count) = a.shards {
        let var = std::env::var("JOB_COMPLETION_INDEX").map_err(|_| {
            super::usage(format!(
                "--shards {count}: JOB_COMPLETION_INDEX is not set (a Kubernetes Indexed Job sets it); give --shard INDEX/{count} instead"
            ))
        })?;
        let index = var.trim().parse::<u64>().map_err(|_| {
            super::usage(format!("JOB_COMPLETION_INDEX {var:?}: not a shard index"))
        })?;
        let shard = hxlab_load::Shard { index, count };
        shard.check().map_err(super::usage)?;
        cfg.shard = Some(shard);
    }
    if let Some(id) = &a.run_id {
        cfg.run_id = Some(id.clone());
    }
    if let Some(t) = &a.start_at {
        cfg.start_at = Some(
            hxlab_core::shard::parse_instant(t)
                .map_err(|e| super::usage(format!("--start-at {e}")))?,
        );
    }
    cfg.start_tolerance = duration_arg("--start-tolerance", &a.start_tolerance)?;
    // With --config too: it changes how the run is told, not what is measured.
    if let Some(i) = &a.interval {
        cfg.interval = duration_arg("--interval", i)?;
    }
    if let Some(base) = qlog_base(a)? {
        cfg.qlog_base = Some(base);
    }
    if let Some(f) = &a.log_file {
        // Opened as the run will open it (created, appended to), so a bad path is a usage
        // error before anything is sent.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(f)
            .map_err(|e| super::usage(format!("--log-file {}: {e}", f.display())))?;
        cfg.log_file = Some(f.clone());
    }
    cfg.verbose |= a.verbose;
    cfg.validate().map_err(|e| super::usage(e.to_string()))?;
    Ok(())
}

/// A progress bar only on a terminal, and only when not asked away.
fn progress(a: &Args) -> bool {
    !a.no_progress && !a.quiet && std::io::stderr().is_terminal()
}

/// Reads `--config FILE` (a LoadConfig in JSON), checked as the flags are (usage errors
/// exit 2).
fn config_from_file(a: &Args, path: &std::path::Path) -> anyhow::Result<LoadConfig> {
    let text = hxlab_core::read_capped_string(path, hxlab_core::files::cap::SMALL)
        .map_err(|e| super::usage(format!("--config {}: {e}", path.display())))?;
    let mut cfg = LoadConfig::from_json(&text)
        .map_err(|e| super::usage(format!("--config {}: {e}", path.display())))?;
    apply_parts(a, &mut cfg)?;
    cfg.progress = progress(a);
    Ok(cfg)
}

/// Where `--qlog DIR` (files `DIR/load.W.C.sqlog`, the directory made if missing) or h2load's
/// `--qlog-file-base BASE` (files `BASE.W.C.sqlog`: worker, client) puts the qlog files.
fn qlog_base(a: &Args) -> anyhow::Result<Option<std::path::PathBuf>> {
    if let Some(dir) = &a.qlog {
        std::fs::create_dir_all(dir)
            .map_err(|e| super::usage(format!("--qlog {}: {e}", dir.display())))?;
        return Ok(Some(dir.join("load")));
    }
    if let Some(base) = &a.qlog_file_base {
        let parent = base.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !p.is_dir()) || base.as_os_str().is_empty() {
            return Err(super::usage(format!(
                "--qlog-file-base {}: no such directory",
                base.display()
            )));
        }
        return Ok(Some(base.clone()));
    }
    Ok(None)
}

/// Without `--cc`: cubic on every protocol, or where this process may not set cubic on TCP
/// sockets, the system's default on every protocol (said on stderr). Resolved here, where
/// the run happens, not when the arguments are checked (`k8s render` checks them for pods
/// that resolve their own).
fn with_default_cc(a: &Args, mut cfg: LoadConfig) -> LoadConfig {
    if a.cc.is_none() {
        let (cc, note) = hxlab_core::cc::load_default();
        cfg.cc = cc;
        if let Some(n) = note {
            eprintln!("note: {n}");
        }
    }
    cfg
}

/// Runs one configuration; a configuration the engine refuses is a usage error.
fn execute(cfg: LoadConfig) -> anyhow::Result<RunResult> {
    hxlab_load::run(cfg).map_err(load_error)
}

/// A run that could not start: a usage error for bad configuration or URLs.
fn load_error(e: LoadError) -> anyhow::Error {
    match e {
        LoadError::Config(_) | LoadError::Url { .. } => super::usage(e.to_string()),
        e => anyhow::Error::new(e),
    }
}

/// Writes the RunResult to a file, whole or not at all (a kill mid-write leaves the old
/// file, or none, never half of one).
fn write_result(dest: &Path, result: &RunResult) -> anyhow::Result<()> {
    let text = serde_json::to_string(result).context("serialise the result")?;
    hxlab_core::files::write_output(dest, format!("{text}\n").as_bytes())
        .with_context(|| format!("write {}", dest.display()))
}

/// A run in which no request completed failed, and says why.
fn check_done(result: &RunResult) -> anyhow::Result<()> {
    if result.requests_done > 0 {
        return Ok(());
    }
    let why = match result.error_samples.first() {
        Some(e) => e.clone(),
        None if result.requests_in_flight_at_end + result.requests_not_sent > 0 => format!(
            "no response before the run ended ({} requests in flight, {} never sent)",
            result.requests_in_flight_at_end, result.requests_not_sent
        ),
        None => "no request completed".to_string(),
    };
    anyhow::bail!("{why}")
}

/// Runs `hxlab load`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.jobs {
        return run_jobs();
    }
    let cfg = match &args.config {
        Some(path) => config_from_file(&args, path)?,
        None => with_default_cc(&args, config_from_args(&args)?),
    };
    let asked_interval = (!cfg.interval.is_zero()).then_some(cfg.interval.as_secs_f64());
    let result = match args.metrics_listen {
        Some(addr) => {
            let linger = duration_arg("--metrics-linger", &args.metrics_linger)?;
            super::metrics::with_live_metrics(addr, linger, |live| {
                hxlab_load::run_live(cfg, live).map_err(load_error)
            })?
        }
        None => execute(cfg)?,
    };
    if let Some(p) = result.shards.iter().find(|p| p.late) {
        // On stderr even with -q: a part that started late is a different run.
        eprintln!(
            "warning: shard {}/{} started {:.3} s after --start-at (tolerance {})",
            p.index,
            p.count,
            p.start_skew_s.unwrap_or(0.0),
            args.start_tolerance
        );
    }
    let json_to_stdout = args.json.as_deref() == Some("-");
    if result.interval_s > 0.0 && Some(result.interval_s) != asked_interval {
        eprintln!(
            "note: intervals of {} s instead of --interval {}: a series holds at most {} intervals",
            result.interval_s,
            args.interval.as_deref().unwrap_or("1s"),
            hxlab_core::interval::MAX_INTERVALS
        );
    }
    let mut text = String::new();
    if !args.quiet {
        text.push_str(&summary(&result));
    }
    if args.print_intervals {
        text.push_str(&intervals_table(&result));
    }
    // Written, not print!ed: a reader that stops early (`| head`) is no reason to panic.
    let _ = if json_to_stdout {
        std::io::stderr().write_all(text.as_bytes())
    } else {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes()).and_then(|()| out.flush())
    };
    match args.json.as_deref() {
        Some("-") => {
            let text = serde_json::to_string(&result).context("serialise the result")?;
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}").context("write the result to stdout")?;
        }
        Some(dest) => write_result(Path::new(dest), &result)?,
        None => {}
    }
    check_done(&result)?;
    Ok(ExitCode::SUCCESS)
}

/// `--jobs`: every job read from standard input, in turn, each answered on standard output.
/// A line that is not a job ends the command with a usage error (the runner and this
/// command are the same binary, so it means a bug). A run still going at its job's limit
/// cannot be reclaimed in this process: the job is answered as stopped and the command
/// exits 1.
fn run_jobs() -> anyhow::Result<ExitCode> {
    use std::io::{BufRead, Read};
    let host = std::env::var("HXLAB_LINK_HOST").ok();
    let mut input = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let cap = hxlab_contract::MAX_CONFIG_BYTES;
    loop {
        let mut line = String::new();
        let n = (&mut input)
            .take(cap + 1)
            .read_line(&mut line)
            .context("reading jobs")?;
        if n == 0 {
            return Ok(ExitCode::SUCCESS);
        }
        if n as u64 > cap {
            return Err(super::usage(format!("--jobs: a job line over {cap} bytes")));
        }
        if line.trim().is_empty() {
            continue;
        }
        let job: LoadJob = serde_json::from_str(&line)
            .map_err(|e| super::usage(format!("--jobs: not a load job: {e}")))?;
        let limit = Duration::from_millis(job.limit_ms);
        let mut cfg = job.config;
        if let Some(h) = &host {
            cfg.urls = cfg
                .urls
                .iter()
                .map(|u| hxlab_child::origin::loopback_to(u, h))
                .collect();
        }
        cfg.progress = false;
        let (tx, rx) = std::sync::mpsc::channel();
        let dest = job.result;
        std::thread::spawn(move || {
            let outcome = execute(cfg).and_then(|r| {
                write_result(&dest, &r)?;
                check_done(&r)
            });
            let exit = match &outcome {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("hxlab: error: {}", super::one_line(e));
                    if super::is_usage(e) {
                        2
                    } else {
                        1
                    }
                }
            };
            let _ = tx.send(exit);
        });
        let (done, stopped) = match rx.recv_timeout(limit) {
            Ok(exit) => (
                JobDone {
                    exit: Some(exit),
                    error: None,
                },
                false,
            ),
            Err(_) => (
                JobDone {
                    exit: None,
                    error: Some(format!("did not finish within {limit:?} and was stopped")),
                },
                true,
            ),
        };
        let reply = serde_json::to_string(&done).context("encoding the answer")?;
        writeln!(out, "{reply}")
            .and_then(|()| out.flush())
            .context("answering the runner")?;
        if stopped {
            return Ok(ExitCode::from(1));
        }
    }
}
