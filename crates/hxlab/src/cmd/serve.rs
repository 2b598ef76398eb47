//! `hxlab serve`: a thin wrapper over `hxlab_serve::start` that prints the listeners, writes
//! the ready file and shuts down gracefully on SIGINT/SIGTERM.

use anyhow::Context;
use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `hxlab serve` (boxed so the subcommand enum in main stays small).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub options: Box<Options>,
}

/// The flags of `hxlab serve`.
#[derive(clap::Args, Debug)]
pub struct Options {
    /// Read the whole configuration from this JSON file (`-`: standard input), the typed
    /// contract the lab hands its servers (docs/serve.md); no other flag may be given.
    #[arg(long, value_name = "FILE|-", conflicts_with_all = [
        "bind", "tls_port", "plain_port", "no_h3", "cert", "key", "cert_out", "ready_file",
        "dir", "max_streams", "quic_window", "quic_max_connections", "quic_retry_threshold",
        "quic_max_per_address", "tcp_max_connections", "tcp_max_per_address", "send_timeout",
        "body_timeout", "head_timeout", "idle_timeout", "threads", "max_delay", "max_size",
        "max_header_size", "header_table",
        "max_page_resources", "drain_timeout", "cc", "no_early_data", "replay", "scheduler",
        "notsent_lowat", "qlog", "header_table",
    ])]
    pub config: Option<String>,
    /// Address to listen on (an IP address, e.g. 127.0.0.1, ::1 or 0.0.0.0).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: String,
    /// TCP port for TLS (HTTP/1.1 and HTTP/2 by ALPN); HTTP/3 uses the same UDP port. 0 = free.
    #[arg(long, default_value_t = 8443)]
    pub tls_port: u16,
    /// TCP port for cleartext HTTP/1.1 and h2c (prior knowledge). 0 = free.
    #[arg(long, default_value_t = 8080)]
    pub plain_port: u16,
    /// Do not serve HTTP/3 (and do not advertise it with Alt-Svc).
    #[arg(long)]
    pub no_h3: bool,
    /// PEM certificate chain (with --key); default: a fresh self-signed certificate.
    #[arg(long, value_name = "PEM")]
    pub cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, value_name = "PEM")]
    pub key: Option<PathBuf>,
    /// Write the served certificate here (PEM) so clients can trust it.
    #[arg(long, value_name = "PEM")]
    pub cert_out: Option<PathBuf>,
    /// Once every listener accepts, write {"pid","tls","plain","h3","cert","spki_sha256"} here
    /// as JSON (atomically).
    #[arg(long, value_name = "FILE")]
    pub ready_file: Option<PathBuf>,
    /// Write a qlog (JSON-SEQ: quinn's transport events, our HTTP/3 frame and QPACK
    /// events) of every QUIC connection into DIR, as serve.N.sqlog.
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,
    /// Directory served under /static/ (nothing outside it is ever served).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Concurrent streams per HTTP/2 or HTTP/3 connection.
    #[arg(long, default_value_t = 100)]
    pub max_streams: u32,
    /// Bytes one HTTP/3 (QUIC) connection may buffer each way: send window, receive window
    /// and each stream's (default: Linux's default TCP send buffer limit, as h2 gets over TCP).
    #[arg(long, default_value = "4MiB", value_name = "SIZE")]
    pub quic_window: String,
    /// Most HTTP/3 connections open at once; more are refused. HTTP/3 memory is bounded by
    /// this × --quic-window per direction.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub quic_max_connections: u32,
    /// Above this many HTTP/3 handshakes in progress, a new client must first prove its
    /// address with a QUIC Retry (one extra round trip); 0 = always.
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub quic_retry_threshold: u32,
    /// Most HTTP/3 connections (open or in handshake) from one client address (IPv4
    /// address, IPv6 /64); more are refused. Raise it for a load generator on one host with
    /// more connections than this.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub quic_max_per_address: u32,
    /// Most TCP connections (h1, h1+TLS, h2, h2c) open at once; more are closed at accept
    /// (logged). 0 = below the file limit, which the server raises to its hard limit.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub tcp_max_connections: u32,
    /// Most TCP connections from one client address (IPv4 address, IPv6 /64); more are
    /// closed at accept (logged), so one host cannot take every slot.
    #[arg(long, default_value_t = 16_384, value_name = "N")]
    pub tcp_max_per_address: u32,
    /// Reset an HTTP/2 or HTTP/3 response stream that gets no flow-control window for this
    /// long (nginx's send_timeout).
    #[arg(long, default_value = "60s", value_name = "DUR")]
    pub send_timeout: String,
    /// A request body that stops coming for this long: 408 on HTTP/1.1, the stream reset on
    /// h2 and h3 (nginx's client_body_timeout).
    #[arg(long, default_value = "60s", value_name = "DUR")]
    pub body_timeout: String,
    /// An HTTP/3 request head not complete this long after its stream opened: the stream is
    /// reset; an HTTP/2 header block not ended this long after its HEADERS: the connection
    /// is closed (GOAWAY ENHANCE_YOUR_CALM).
    #[arg(long, default_value = "30s", value_name = "DUR")]
    pub head_timeout: String,
    /// Close a connection (h1, h2, h3) with no request in flight after one to two of these
    /// periods, whatever keeps it alive below HTTP (QUIC PINGs).
    #[arg(long, default_value = "15s", value_name = "DUR")]
    pub idle_timeout: String,
    /// Worker threads of the TCP listeners (1 = single-threaded runtime); default: the number
    /// of cores. HTTP/3 runs on one QUIC thread of its own.
    #[arg(long)]
    pub threads: Option<usize>,
    /// Longest delay a request may ask for (e.g. 60s, 500ms).
    #[arg(long, default_value = "60s")]
    pub max_delay: String,
    /// Largest response body a request may ask for (e.g. 1TiB, 100G).
    #[arg(long, default_value = "1TiB")]
    pub max_size: String,
    /// Largest request header block accepted (e.g. 64KiB).
    #[arg(long, default_value = "64KiB")]
    pub max_header_size: String,
    /// Most sub-resources a /page may reference.
    #[arg(long, default_value_t = 1000)]
    pub max_page_resources: u32,
    /// How long shutdown waits for requests in flight.
    #[arg(long, default_value = "10s")]
    pub drain_timeout: String,
    /// Congestion controller of every connection: reno, cubic or bbr (TCP_CONGESTION on every
    /// accepted socket; quinn's NewReno, Cubic or BBR on QUIC). Default: the kernel's default
    /// on TCP, Cubic on QUIC. /stats shows what each connection ran, read back.
    #[arg(long, value_name = "CC")]
    pub cc: Option<hxlab_serve::CongestionControl>,
    /// Refuse TLS 1.3 early data (0-RTT) on TCP. It is accepted by default, as QUIC 0-RTT is;
    /// early data can be replayed by an attacker, so a real origin accepts it only for
    /// idempotent requests (see docs/serve.md).
    #[arg(long)]
    pub no_early_data: bool,
    /// How responses share an HTTP/2 or HTTP/3 connection: rfc9218 (urgency from the
    /// priority header, PRIORITY_UPDATE and HTTP/2 weights; docs/priorities.md),
    /// round-robin (every response in turn) or fifo (one at a time, in request order).
    /// HTTP/1.1 answers one request at a time per connection, so it has nothing to schedule.
    #[arg(long, value_name = "NAME", default_value = "rfc9218")]
    pub scheduler: hxlab_core::sched::Scheduler,
    /// TCP_NOTSENT_LOWAT on every TCP socket (h1, h1+TLS, h2, h2c): at most about this many
    /// unsent bytes in the kernel, and HTTP/2 frames built only as the socket takes them, so
    /// an urgent response does not wait behind committed bulk. off: the kernel's buffer.
    #[arg(long, value_name = "SIZE|off", default_value = "16KiB")]
    pub notsent_lowat: hxlab_core::sched::Lowat,
    /// Answer every request from this HAR 1.2 archive (hxlab page --record, or DevTools'
    /// "Save all as HAR with content"), for every recorded host; /replay-stats counts hits,
    /// near misses and misses (see docs/serve.md).
    #[arg(long, value_name = "HAR")]
    pub replay: Option<PathBuf>,
    /// Header compression: the dynamic table advertised to clients (h2:
    /// SETTINGS_HEADER_TABLE_SIZE, h3: QPACK_MAX_TABLE_CAPACITY) and the most the response
    /// encoder uses (never above what the client allows). 0 = static table only. Default
    /// 4096 (RFC 7541's initial size; nginx, h2o, nghttp2); at most 64KiB.
    #[arg(long, value_name = "SIZE", default_value = "4096")]
    pub header_table: String,
}

/// The server's configuration: from `--config`, or the flags mapped onto it; either way
/// checked by the one validator, [`hxlab_serve::ServeConfig::validate`] (exit 2).
fn config_from(args: &Options) -> anyhow::Result<hxlab_serve::ServeConfig> {
    let cfg = match &args.config {
        Some(path) => hxlab_contract::read_config(path).map_err(|e| super::usage(e.0))?,
        None => flags_config(args)?,
    };
    cfg.validate().map_err(|e| super::usage(e.0))?;
    Ok(cfg)
}

/// The flags as a [`hxlab_serve::ServeConfig`] (values parsed here, ranges checked by its
/// validator).
fn flags_config(args: &Options) -> anyhow::Result<hxlab_serve::ServeConfig> {
    let bind: IpAddr = args.bind.parse().map_err(|_| {
        super::usage(format!(
            "--bind {:?}: not an IP address (e.g. 127.0.0.1, ::1, 0.0.0.0)",
            args.bind
        ))
    })?;
    let size = |flag: &str, v: &str| {
        hxlab_core::parse_size(v).map_err(|e| super::usage(format!("{flag}: {e}")))
    };
    let duration = |flag: &str, v: &str| {
        hxlab_core::parse_duration(v).map_err(|e| super::usage(format!("{flag}: {e}")))
    };
    let max_header_size = u32::try_from(size("--max-header-size", &args.max_header_size)?)
        .map_err(|_| super::usage("--max-header-size must be between 1KiB and 16MiB"))?;
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    Ok(hxlab_serve::ServeConfig {
        cc: args.cc,
        early_data: !args.no_early_data,
        scheduler: args.scheduler,
        notsent_lowat: args.notsent_lowat,
        bind,
        tls_port: args.tls_port,
        plain_port: args.plain_port,
        h3: !args.no_h3,
        cert: args.cert.clone(),
        key: args.key.clone(),
        cert_out: args.cert_out.clone(),
        dir: args.dir.clone(),
        replay: args.replay.clone(),
        max_streams: args.max_streams,
        threads,
        max_delay: duration("--max-delay", &args.max_delay)?,
        max_size: size("--max-size", &args.max_size)?,
        max_header_size,
        max_page_resources: args.max_page_resources,
        drain_timeout: duration("--drain-timeout", &args.drain_timeout)?,
        quic_window: size("--quic-window", &args.quic_window)?,
        send_timeout: duration("--send-timeout", &args.send_timeout)?,
        body_timeout: duration("--body-timeout", &args.body_timeout)?,
        quic_max_connections: args.quic_max_connections,
        quic_retry_threshold: args.quic_retry_threshold,
        quic_max_per_address: args.quic_max_per_address,
        tcp_max_connections: args.tcp_max_connections,
        tcp_max_per_address: args.tcp_max_per_address,
        ready_file: args.ready_file.clone(),
        header_table: size("--header-table", &args.header_table)?,
        cert_names: Vec::new(),
        qlog_dir: args.qlog.clone(),
        head_timeout: duration("--head-timeout", &args.head_timeout)?,
        idle_timeout: duration("--idle-timeout", &args.idle_timeout)?,
    })
}

/// Runs `hxlab serve`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let args = args.options;
    let cfg = config_from(&args)?;
    hxlab_serve::install_null_tracing();
    let runtime = if cfg.threads == 1 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads)
            .enable_all()
            .build()
    }
    .context("cannot start the async runtime")?;
    let ready_file = cfg.ready_file.clone();
    let code = runtime.block_on(serve(cfg, ready_file))?;
    // Tasks still running after the drain timeout are dropped with the runtime.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(code)
}

async fn serve(
    cfg: hxlab_serve::ServeConfig,
    ready_file: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    // Install the handlers before anything is announced, so a quick SIGTERM is never fatal.
    let mut sigterm =
        signal(SignalKind::terminate()).context("cannot install the SIGTERM handler")?;
    let mut sigint =
        signal(SignalKind::interrupt()).context("cannot install the SIGINT handler")?;
    let cert_out = cfg.cert_out.clone();
    let server = match hxlab_serve::start(cfg).await {
        Ok(s) => s,
        Err(e @ hxlab_serve::ServeError::Config(_)) => return Err(super::usage(e.to_string())),
        Err(e) => return Err(anyhow::Error::new(e).context("hxlab serve could not start")),
    };
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listen proto=h1,h2 tls=1 addr={}", server.tls_addr())?;
        writeln!(
            out,
            "listen proto=h1,h2c tls=0 addr={}",
            server.plain_addr()
        )?;
        if let Some(a) = server.h3_addr() {
            writeln!(out, "listen proto=h3 tls=1 addr={a} (udp)")?;
        }
        writeln!(out, "spki_sha256={}", server.spki_sha256())?;
        out.flush()?;
    }
    if let Some(c) = server.replay_counts() {
        eprintln!(
            "hxlab serve: replaying {} recorded response(s); misses are answered 404 with x-hxlab-replay: miss and counted at /replay-stats",
            c.entries
        );
        if let Some(skipped) = &c.skipped {
            eprintln!("hxlab serve: {skipped} (nothing can replay them)");
        }
        if !c.bodies_missing.is_empty() {
            eprintln!(
                "hxlab serve: {} recorded response(s) have no body in the HAR (served empty), e.g. {}",
                c.bodies_missing.len(),
                c.bodies_missing[0]
            );
        }
    }
    if let Some(v) = hxlab_core::cc::tcp_fastopen_sysctl().filter(|v| v & 2 == 0) {
        eprintln!(
            "hxlab serve: note: net.ipv4.tcp_fastopen = {v}: this kernel takes no TCP Fast Open data on the listeners (needs bit 2, e.g. sysctl -w net.ipv4.tcp_fastopen=3); /stats counts tfo_accepted"
        );
    }
    if let Some(path) = &ready_file {
        let ready = hxlab_contract::ReadyFile {
            pid: std::process::id(),
            tls: server.tls_addr(),
            plain: server.plain_addr(),
            h3: server.h3_addr(),
            cert: cert_out.clone(),
            spki_sha256: server.spki_sha256().to_string(),
        };
        // Off the runtime that serves: a slow file system must not stall a worker.
        let (to, json) = (path.clone(), ready.to_json());
        tokio::task::spawn_blocking(move || hxlab_core::write_atomically(&to, json.as_bytes()))
            .await
            .context("the --ready-file writer failed")?
            .with_context(|| format!("cannot write --ready-file {}", path.display()))?;
    }
    tokio::select! {
        _ = sigterm.recv() => {}
        _ = sigint.recv() => {}
    }
    eprintln!("hxlab serve: shutting down (finishing requests in flight)");
    tokio::select! {
        _ = server.shutdown() => {}
        // A second signal means "now".
        _ = sigterm.recv() => {}
        _ = sigint.recv() => {}
    }
    Ok(ExitCode::SUCCESS)
}
