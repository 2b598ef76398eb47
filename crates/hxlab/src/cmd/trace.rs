//! `hxlab trace`: a frame-level view of one connection (h1, h2, h2c, h3), like `nghttp -v`.

use hxlab_load::{LoadConfig, LoadError, Proto};
use hxlab_trace::{Event, Summary, TraceTap, Tracer};
use std::process::ExitCode;

/// Options of `hxlab trace`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// URLs to request, all on one origin (one connection is traced).
    #[arg(required = true, num_args = 1..)]
    pub urls: Vec<String>,
    /// Protocol to speak: auto (https: ALPN h2 or http/1.1; http: HTTP/1.1), h1, h2 (TLS;
    /// shows the fallback if the server only speaks HTTP/1.1; h2c on http://), h2c, h3.
    #[arg(long, value_enum, ignore_case = true, default_value = "auto")]
    pub proto: Proto,
    /// Request each URL N times, all at once on h2/h3 (like `nghttp -m`).
    #[arg(short = 'm', long = "multiply", default_value_t = 1, value_name = "N")]
    pub multiply: usize,
    /// Send the requests one after another on the connection, each once the previous
    /// response has ended (as `h2load -m 1`), instead of all at once: what a dynamic header
    /// table does for repeated requests is then visible request by request.
    #[arg(long)]
    pub serial: bool,
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
    /// Header compression, both ways, as `hxlab load --header-table`: the table advertised
    /// and the most the request encoder uses. 0 = static table only. Default 4096.
    #[arg(long, value_name = "SIZE", default_value = "4096")]
    pub header_table: String,
}

/// The most requests one trace sends (-m times URLs): a trace is for reading, not for load.
const MAX_REQUESTS: usize = 1000;

/// The load run a trace is: one client, one connection, every request at once on h2/h3.
fn config(args: &Args) -> anyhow::Result<(LoadConfig, Proto)> {
    let timeout = hxlab_core::parse_duration(&args.timeout)
        .map_err(|e| super::usage(format!("--timeout {}: {e}", args.timeout)))?;
    if timeout.is_zero() {
        return Err(super::usage("--timeout must be greater than 0"));
    }
    let total = args.multiply.saturating_mul(args.urls.len());
    if args.multiply == 0 || total > MAX_REQUESTS {
        return Err(super::usage(format!(
            "-m {}: must be at least 1 and at most {MAX_REQUESTS} requests in all",
            args.multiply
        )));
    }
    let https = args.urls[0].to_ascii_lowercase().starts_with("https://");
    let asked = args.proto;
    let proto = match (asked, https) {
        (Proto::Auto, _) => Proto::Auto,
        (Proto::H1, _) => Proto::H1,
        // Offer http/1.1 too, so a server without HTTP/2 shows the fallback.
        (Proto::H2, true) => Proto::Auto,
        (Proto::H2 | Proto::H2c, false) => Proto::H2c,
        (Proto::H2c, true) => return Err(super::usage("--proto h2c needs an http:// URL")),
        (Proto::H3, true) => Proto::H3,
        (Proto::H3, false) => return Err(super::usage("--proto h3 needs an https:// URL")),
    };
    if args.resume && (asked == Proto::H3 || !https) {
        return Err(super::usage(
            "--resume needs TLS over TCP: an https:// URL and not --proto h3",
        ));
    }
    if args.cacert.is_some() && args.insecure {
        return Err(super::usage("use either -k or --cacert, not both"));
    }
    if let Some(p) = &args.cacert {
        std::fs::metadata(p).map_err(|e| super::usage(format!("--cacert {}: {e}", p.display())))?;
    }
    let table = hxlab_core::parse_size(&args.header_table)
        .map_err(|e| super::usage(format!("--header-table: {e}")))?;
    hxlab_core::header_table::check_header_table("--header-table", table).map_err(super::usage)?;
    let mut urls = Vec::with_capacity(total);
    for u in &args.urls {
        urls.extend(std::iter::repeat_n(u.clone(), args.multiply));
    }
    let cfg = LoadConfig {
        urls,
        requests: total as u64,
        // h2/h3 send every request at once (unless --serial); HTTP/1.1 one after another
        // (no pipelining).
        max_concurrent_streams: if args.serial { 1 } else { total as u64 },
        headers: args
            .headers
            .iter()
            .map(|h| hxlab_load::parse_header_arg(h).map_err(super::usage))
            .collect::<anyhow::Result<_>>()?,
        timeout,
        connect_timeout: timeout,
        insecure: args.insecure,
        cacert: args.cacert.clone(),
        push: args.push,
        h1_pipeline: false,
        proto,
        alpn_list: (asked == Proto::H2 && https).then(|| vec!["h2".into(), "http/1.1".into()]),
        tls_resume: args.resume,
        prime: args.resume,
        header_table_size: table,
        encoder_header_table_size: table,
        // `hxlab load`'s controller when none is asked (cubic, or the system's where this
        // process may not set cubic).
        cc: hxlab_core::cc::load_default().0,
        ..Default::default()
    };
    Ok((cfg, asked))
}

/// What to add to a failure when the wire showed the server speaks another protocol.
fn hint(summary: &Summary) -> &'static str {
    if summary.answered_http1 {
        " (the server answered in HTTP/1.1: it does not speak HTTP/2 here; try --proto h1)"
    } else if summary.answered_h2 {
        " (the server answered with HTTP/2 frames: it speaks h2c here; try --proto h2c)"
    } else {
        ""
    }
}

/// Runs `hxlab trace`: `hxlab load`'s own client with the trace's tap on its connection.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (cfg, asked) = config(&args)?;
    let expected = cfg.requests;
    let tracer = Tracer::new(args.json, Box::new(std::io::stdout()));
    let (tap, summary) = TraceTap::new(tracer.clone(), asked, expected);
    let result = match hxlab_load::run_tapped(cfg, Box::new(tap)) {
        Ok(r) => r,
        Err(e @ (LoadError::Config(_) | LoadError::Url { .. } | LoadError::Tls(_))) => {
            return Err(super::usage(e.to_string()))
        }
        Err(e) => return Err(anyhow::Error::new(e)),
    };
    let summary = summary.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let answered = summary.responses.iter().filter(|r| !r.pushed).count() as u64;
    if result.requests_done < expected || answered < expected.min(result.requests_done) {
        let why = match result.error_samples.first() {
            Some(e) => e.clone(),
            None => format!(
                "{} of {expected} responses arrived before the connection ended",
                result.requests_done
            ),
        };
        anyhow::bail!("{why}{}", hint(&summary));
    }
    if summary.protocol != "h3" {
        alt_svc_hint(&tracer, &summary);
    }
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
        Event::new("summary", line)
            .field("protocol", summary.protocol.clone())
            .field("alpn", summary.alpn.clone())
            .field("fell_back", summary.fell_back)
            .field("resumed", summary.resumed)
            .field("responses", summary.responses.len())
            .field("pushed", pushed),
    );
    Ok(ExitCode::SUCCESS)
}

/// Tells the user when an h1/h2 server advertises HTTP/3, since `auto` does not follow Alt-Svc.
fn alt_svc_hint(tracer: &Tracer, summary: &Summary) {
    let advert = summary
        .responses
        .iter()
        .filter_map(|r| r.alt_svc.as_deref())
        .find(|a| a.contains("h3="));
    if let Some(a) = advert {
        let line = format!("the server advertises HTTP/3 (Alt-Svc: {a}); trace it with --proto h3");
        tracer.emit(
            Event::new("info", line.clone())
                .field("message", line)
                .field("alt_svc", a),
        );
    }
}
