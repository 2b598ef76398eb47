//! `hxlab probe URL`: which protocols a host offers — HTTP/1.1 and HTTP/2 by ALPN, HTTP/3 by
//! Alt-Svc and a QUIC handshake (h2c by prior knowledge for http://) — one request each, the
//! same probe `compare --url` runs first; `--json` writes the typed `ProbeReport`.

use hxlab_load::probe::{probe, split_url, Trust};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `hxlab probe`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  hxlab probe https://127.0.0.1:8443/ -k\n  hxlab probe https://staging.example.com/app.js --json probe.json\n  hxlab probe http://127.0.0.1:8080/ --json -"
)]
pub struct Args {
    /// The URL to probe (http:// or https://).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Accept any certificate.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// Trust this CA certificate (PEM).
    #[arg(long, value_name = "PEM", conflicts_with = "insecure")]
    pub cacert: Option<PathBuf>,
    /// How long each protocol's request may take (e.g. 5s).
    #[arg(long, default_value = "5s", value_name = "DUR")]
    pub timeout: String,
    /// Write the findings as JSON to FILE ("-": standard output, instead of the lines).
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
}

/// Runs `hxlab probe`: exit 0 when some protocol is offered, 1 when none is.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let timeout = hxlab_core::parse_duration(&args.timeout)
        .map_err(|e| super::usage(format!("--timeout: {e}")))?;
    if let Some(c) = &args.cacert {
        std::fs::metadata(c).map_err(|e| super::usage(format!("--cacert {}: {e}", c.display())))?;
    }
    split_url(&args.url).map_err(|e| super::usage(format!("URL {e}")))?;
    let trust = Trust {
        insecure: args.insecure,
        cacert: args.cacert.clone(),
    };
    let found = probe(&args.url, &trust, timeout).map_err(|e| super::usage(format!("URL {e}")))?;
    let report = found.report(&args.url);
    match args.json.as_deref() {
        Some("-") => print!("{}", report.to_json()),
        other => {
            for line in found.notes() {
                println!("{line}");
            }
            if let Some(path) = other {
                hxlab_core::write_atomically(
                    std::path::Path::new(path),
                    report.to_json().as_bytes(),
                )
                .map_err(|e| anyhow::anyhow!("cannot write --json {path}: {e}"))?;
            }
        }
    }
    Ok(if report.any_offered() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
