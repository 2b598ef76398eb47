//! `hxlab trace`: a frame-level view of one connection (h1, h2, h2c, h3), like `nghttp -v`.

use anyhow::Context;
use hxlab_trace::{Proto, TraceError, TraceOptions, Tracer, Trust};
use std::process::ExitCode;

/// Protocol choice on the command line.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ProtoArg {
    /// https: ALPN h2 or http/1.1; http: HTTP/1.1.
    Auto,
    /// HTTP/1.1.
    H1,
    /// HTTP/2 over TLS (ALPN; shows the fallback if the server only speaks HTTP/1.1).
    H2,
    /// HTTP/2 over cleartext TCP, prior knowledge.
    H2c,
    /// HTTP/3 over QUIC.
    H3,
}

/// Options of `hxlab trace`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// URLs to request, all on one origin (one connection is traced).
    #[arg(required = true, num_args = 1..)]
    pub urls: Vec<String>,
    /// Protocol to speak.
    #[arg(long, value_enum, default_value = "auto")]
    pub proto: ProtoArg,
    /// Request each URL N times, all at once on h2/h3 (like `nghttp -m`).
    #[arg(short = 'm', long = "multiply", default_value_t = 1, value_name = "N")]
    pub multiply: usize,
    /// Extra request header "Name: value" (repeatable).
    #[arg(short = 'H', long = "header")]
    pub headers: Vec<String>,
    /// Accept server push (HTTP/2 SETTINGS_ENABLE_PUSH=1) and show PUSH_PROMISE.
    #[arg(long)]
    pub push: bool,
    /// One JSON object per event per line.
    #[arg(long)]
    pub json: bool,
    /// Accept any server certificate.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Trust the certificates in this PEM file (e.g. from `hxlab serve --cert-out`).
    #[arg(long, value_name = "PEM")]
    pub cacert: Option<std::path::PathBuf>,
    /// Then open a second connection with the same TLS session cache and trace it too, to show
    /// whether the server resumes the session (TLS over TCP).
    #[arg(long)]
    pub resume: bool,
    /// Limit for the traced connection (each one with --resume): connect, handshake, responses.
    #[arg(long, default_value = "10s", value_name = "DUR")]
    pub timeout: String,
}

/// The most requests one trace sends (-m times URLs): a trace is for reading, not for load.
const MAX_REQUESTS: usize = 1000;

fn options(args: &Args) -> anyhow::Result<TraceOptions> {
    let timeout = hxlab_core::parse_duration(&args.timeout)
        .map_err(|e| super::usage(format!("--timeout {}: {e}", args.timeout)))?;
    if timeout.is_zero() {
        return Err(super::usage("--timeout must be greater than 0"));
    }
    if args.multiply == 0 || args.multiply.saturating_mul(args.urls.len()) > MAX_REQUESTS {
        return Err(super::usage(format!(
            "-m {}: must be at least 1 and at most {MAX_REQUESTS} requests in all",
            args.multiply
        )));
    }
    let mut headers = Vec::new();
    for h in &args.headers {
        let (name, value) = h
            .split_once(':')
            .ok_or_else(|| super::usage(format!("-H {h:?}: expected \"Name: value\"")))?;
        let name = hxlab_trace::http::header::HeaderName::from_bytes(
            name.trim().to_ascii_lowercase().as_bytes(),
        )
        .map_err(|_| super::usage(format!("-H {h:?}: invalid header name")))?;
        let value = hxlab_trace::http::header::HeaderValue::from_str(value.trim())
            .map_err(|_| super::usage(format!("-H {h:?}: invalid header value")))?;
        headers.push((name, value));
    }
    let mut urls = Vec::new();
    for u in &args.urls {
        let uri: hxlab_trace::http::Uri = u
            .parse()
            .map_err(|e| super::usage(format!("bad URL {u:?}: {e}")))?;
        urls.push(uri);
    }
    let trust = match (&args.cacert, args.insecure) {
        (Some(_), true) => return Err(super::usage("use either -k or --cacert, not both")),
        (Some(p), false) => Trust::CaFile(p.clone()),
        (None, true) => Trust::Insecure,
        (None, false) => Trust::System,
    };
    let proto = match args.proto {
        ProtoArg::Auto => Proto::Auto,
        ProtoArg::H1 => Proto::H1,
        ProtoArg::H2 => Proto::H2,
        ProtoArg::H2c => Proto::H2c,
        ProtoArg::H3 => Proto::H3,
    };
    Ok(TraceOptions {
        urls,
        proto,
        multiply: args.multiply,
        headers,
        push: args.push,
        trust,
        timeout,
        resume: args.resume,
    })
}

/// Runs `hxlab trace`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let opts = options(&args)?;
    // One thread: the requests of `-m` are all queued before the connection task runs, so the
    // interleaving on the wire is the protocol's, not a scheduling accident.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let tracer = Tracer::new(args.json, Box::new(std::io::stdout()));
    let result = rt.block_on(hxlab_trace::trace(&opts, &tracer));
    let summary = match result {
        Ok(s) => s,
        Err(TraceError::Usage(m)) => return Err(super::usage(m)),
        Err(e @ TraceError::BadUrl(_)) => return Err(super::usage(e.to_string())),
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    let pushed = summary.responses.iter().filter(|r| r.pushed).count();
    let line = format!(
        "done: {} over {}{}{}, {} response(s) ({} pushed), {} body bytes",
        if summary.fell_back {
            "fell back to HTTP/1.1"
        } else {
            "spoke"
        },
        summary.protocol,
        summary
            .alpn
            .as_ref()
            .map(|a| format!(" (ALPN {a})"))
            .unwrap_or_default(),
        match summary.resumed {
            Some(true) => ", TLS session resumed",
            _ => "",
        },
        summary.responses.len(),
        pushed,
        summary.responses.iter().map(|r| r.body_bytes).sum::<u64>()
    );
    tracer.emit(
        hxlab_trace::Event::new("summary", line)
            .field("protocol", summary.protocol.clone())
            .field("alpn", summary.alpn.clone())
            .field("fell_back", summary.fell_back)
            .field("resumed", summary.resumed)
            .field("responses", summary.responses.len())
            .field("pushed", pushed),
    );
    Ok(ExitCode::SUCCESS)
}
