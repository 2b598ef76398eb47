//! `hxlab probe URL`: which protocols a host offers — HTTP/1.1 and HTTP/2 by ALPN, HTTP/3 by
//! Alt-Svc and a QUIC handshake (h2c by prior knowledge for http://) — one request each, the
//! same probe `compare --url` runs first; `--json` writes the typed `ProbeReport`. With
//! `--priorities` it adds the scheduling scorecards (`probe_priorities.rs`).

use super::probe_priorities;
use hxlab_contract::ProbeReport;
use hxlab_load::probe::{probe, split_url, Trust};
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `hxlab probe`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  hxlab probe https://127.0.0.1:8443/ -k\n  hxlab probe https://staging.example.com/app.js --json probe.json\n  hxlab probe http://127.0.0.1:8080/ --json -\n  hxlab probe -k https://127.0.0.1:8443/bytes/3MB --small https://127.0.0.1:8443/bytes/20KB --priorities\n\n--priorities runs behind an emulated link (default 10 Mbit/s each way, 50 ms RTT, queue = BDP) for servers on this machine bound to 0.0.0.0; see docs/priorities-probe.md."
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
    /// The scheduling scorecard (`--priorities` and its flags).
    #[command(flatten)]
    pub priorities: super::probe_priorities::PriorityArgs,
}

/// Runs `hxlab probe`: exit 0 when some protocol is offered (or, with `--priorities`, some
/// scorecard has a verdict), 1 when none is.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let timeout = hxlab_core::parse_duration(&args.timeout)
        .map_err(|e| super::usage(format!("--timeout: {e}")))?;
    if let Some(c) = &args.cacert {
        std::fs::metadata(c).map_err(|e| super::usage(format!("--cacert {}: {e}", c.display())))?;
    }
    let (_, authority, path) =
        split_url(&args.url).map_err(|e| super::usage(format!("URL {e}")))?;
    let prepared = if args.priorities.priorities {
        Some(probe_priorities::prepare(
            &args.url,
            &args.priorities,
            args.insecure,
            args.cacert.clone(),
            timeout,
        )?)
    } else {
        None
    };
    let trust = Trust {
        insecure: args.insecure,
        cacert: args.cacert.clone(),
    };
    let found = if prepared.as_ref().is_none_or(|p| p.probes_url_host()) {
        Some(probe(&args.url, &trust, timeout).map_err(|e| super::usage(format!("URL {e}")))?)
    } else {
        None
    };
    let mut report = match &found {
        Some(f) => f.report(&args.url),
        None => ProbeReport {
            url: args.url.clone(),
            authority,
            path,
            alt_svc: None,
            protocols: Vec::new(),
            priorities: None,
        },
    };
    let mut notes = found.as_ref().map(|f| f.notes()).unwrap_or_default();
    if let Some(p) = prepared {
        let priorities = probe_priorities::run(p)?;
        notes.extend(probe_priorities::lines(&priorities));
        report.priorities = Some(priorities);
    }
    let scored = report
        .priorities
        .as_ref()
        .is_some_and(|p| p.scorecards.iter().any(|c| c.verdict.is_some()));
    match args.json.as_deref() {
        Some("-") => print!("{}", report.to_json()),
        other => {
            for line in notes {
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
    Ok(if report.any_offered() || scored {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
