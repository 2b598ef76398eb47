//! `hxlab page`: page loads in headless Chromium over a forced protocol, repeated, with the
//! browser's own timings, a median and 95 % CI per metric, and optional HAR/JSON/HTML output
//! (the HTML with one waterfall per run).
//! The origin, the link and the sums are `hxlab_page::page`'s; this maps flags and prints.

use anyhow::{bail, Context};
use hxlab_browser::{BrowserError, PageConfig, Proto};
use hxlab_contract::{PageJob, PageReport, Recording, ReplayCounts, ReplaySource, Synthetic};
use hxlab_core::cc::CongestionControl;
use hxlab_core::page::PageRun;
use hxlab_core::page::{Outcome, PageTotals};
use hxlab_core::parse_duration;
use hxlab_page::page::{PageOptions, PageSession};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `hxlab page`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  hxlab page --synthetic n=30,size=100KiB,delay=10ms --proto h3 --runs 10\n  hxlab page https://127.0.0.1:8443/ --proto h2 --spki <base64> --json -\n  hxlab page -k https://staging.localhost:8443/ --proto h3 --record site.har --runs 1"
)]
pub struct Args {
    /// Read the whole job from this JSON file (`-`: standard input): the typed contract the
    /// lab hands `hxlab page` (hxlab_contract::PageJob); no other flag may be given.
    #[arg(long, value_name = "FILE|-", conflicts_with_all = [
        "url", "synthetic", "record", "replay", "proto", "profile", "delay", "down", "up",
        "loss", "jitter", "queue", "runs", "push", "early_hints", "har", "json", "html",
        "timeout", "spki", "insecure", "cpu_slowdown", "repeat_view", "server_cc",
    ])]
    pub config: Option<String>,
    /// Page to load (http:// or https://). Or use --synthetic.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// Synthetic page served by a local `hxlab serve`:
    /// n=RESOURCES,size=SIZE,delay=DURATION,origins=1|2 (2: two hostnames, a.hxlab.test and
    /// b.hxlab.test, mapped to it).
    #[arg(long, value_name = "SPEC", conflicts_with = "url")]
    pub synthetic: Option<String>,
    /// Write the first run's page load as HAR 1.2 with every response body (base64 when
    /// binary) to FILE, for --replay.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Load a recorded page: serve every response from this HAR (hxlab serve --replay), map
    /// every recorded host to that server, and count the requests the archive lacks.
    #[arg(long, value_name = "HAR", conflicts_with_all = ["url", "synthetic"])]
    pub replay: Option<PathBuf>,
    /// Protocol to force: h1, h2 or h3; or auto (none forced: HTTP/3 where Alt-Svc offers it).
    #[arg(long, value_parser = browser_proto(), ignore_case = true, required_unless_present = "config")]
    pub proto: Option<Proto>,
    /// Network profile to run the browser behind (see `hxlab link --list-profiles`).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// One-way delay of the emulated link (e.g. 20ms).
    #[arg(long, value_name = "DURATION")]
    pub delay: Option<String>,
    /// Downlink rate of the emulated link (e.g. 10mbit).
    #[arg(long, value_name = "RATE")]
    pub down: Option<String>,
    /// Uplink rate of the emulated link (e.g. 2mbit).
    #[arg(long, value_name = "RATE")]
    pub up: Option<String>,
    /// Packet loss of the emulated link (e.g. 1%).
    #[arg(long, value_name = "P")]
    pub loss: Option<String>,
    /// Jitter of the emulated link: each packet's delay varies within ±this (e.g. 5ms).
    #[arg(long, value_name = "DURATION")]
    pub jitter: Option<String>,
    /// Queue in front of each bottleneck of the emulated link: packets (100p) or bytes (64KiB).
    #[arg(long, value_name = "SIZE")]
    pub queue: Option<String>,
    /// Page loads, each in a fresh browser with a fresh profile.
    #[arg(long, default_value_t = 10)]
    pub runs: u32,
    /// Ask the synthetic origin to push the sub-resources (HTTP/2).
    #[arg(long)]
    pub push: bool,
    /// Ask the synthetic origin to send 103 Early Hints for the sub-resources.
    #[arg(long)]
    pub early_hints: bool,
    /// Write one HAR 1.2 file per run into this directory.
    #[arg(long, value_name = "DIR")]
    pub har: Option<PathBuf>,
    /// Write per-run metrics and the summary as JSON to FILE, or to stdout with `-`.
    #[arg(long, value_name = "FILE|-")]
    pub json: Option<String>,
    /// Write a self-contained HTML page to FILE: the figures, and one waterfall per run.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Chromium binary (Debian package `chromium`).
    #[arg(
        long,
        value_name = "PATH",
        env = "HXLAB_CHROMIUM",
        default_value = "chromium"
    )]
    pub chromium: PathBuf,
    /// Limit per run (browser start, load, shutdown).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub timeout: String,
    /// Trust a server certificate by the base64 SHA-256 of its SubjectPublicKeyInfo (URL mode).
    #[arg(long, value_name = "BASE64")]
    pub spki: Vec<String>,
    /// Accept any certificate (URL mode), as `hxlab load -k` and `curl -k` do.
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// Slow the page's CPU down N times (Chromium's CPU throttling), N from 1 to 100.
    #[arg(
        long,
        value_name = "N",
        default_value = "1",
        allow_hyphen_values = true
    )]
    pub cpu_slowdown: String,
    /// After each first view, load the page again in the same browser (cache and
    /// connections kept), as a returning visitor.
    #[arg(long)]
    pub repeat_view: bool,
    /// Congestion controller of the origin hxlab starts (--synthetic, --replay): reno, cubic
    /// or bbr, set on its TCP and QUIC connections alike and read back from /stats; "default"
    /// leaves each stack's own (the kernel's on TCP, Cubic on QUIC: not like for like).
    #[arg(long, value_name = "CC", default_value = "cubic")]
    pub server_cc: String,
}

/// The emulated link the flags ask for: a profile, possibly adjusted by the explicit options,
/// built and bounded exactly as `hxlab link` builds it.
fn link_config(args: &Args) -> anyhow::Result<Option<hxlab_link::LinkConfig>> {
    let link = super::link::LinkArgs {
        profile: args.profile.clone(),
        delay: args.delay.clone(),
        jitter: args.jitter.clone(),
        loss: args.loss.clone(),
        down: args.down.clone(),
        up: args.up.clone(),
        queue: args.queue.clone(),
        ..Default::default()
    };
    if link.profile.is_none()
        && link.delay.is_none()
        && link.jitter.is_none()
        && link.down.is_none()
        && link.up.is_none()
        && link.loss.is_none()
        && link.queue.is_none()
    {
        return Ok(None);
    }
    super::link::link_config(&link).map(Some)
}

/// `--proto` of a page load: the protocols a browser can be made to speak (h2c is not one:
/// browsers speak HTTP/2 over TLS only), listed in `--help`.
fn browser_proto() -> impl clap::builder::TypedValueParser<Value = Proto> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["h1", "h2", "h3", "auto"]).map(|s: String| {
        match s.to_ascii_lowercase().as_str() {
            "h1" => Proto::H1,
            "h2" => Proto::H2,
            "h3" => Proto::H3,
            _ => Proto::Auto,
        }
    })
}

/// `--replay HAR`: the archive is readable and loadable over `proto`; says where the load
/// starts when the recording redirects, and what it left out.
fn check_replay(har: &Path, proto: Proto) -> anyhow::Result<()> {
    let (archive, start) = hxlab_page::replay::check_archive(har, proto).map_err(super::usage)?;
    let chain = archive.redirect_chain();
    if chain.len() > 1 {
        eprintln!(
            "hxlab page: the recording redirects {} to {}; {} loads start at {start}{}",
            archive.page_url,
            chain.last().map(String::as_str).unwrap_or(""),
            proto.name(),
            if start == archive.page_url && proto != Proto::H1 {
                " (redirects answered as recorded; the protocol check counts only https responses)"
            } else {
                ""
            }
        );
    }
    if let Some(skipped) = archive.skipped_text() {
        eprintln!(
            "hxlab page: {}: {skipped} (nothing can replay them)",
            har.display()
        );
    }
    Ok(())
}

/// The flags as a [`PageJob`] (values parsed here; the job's own validator checks the rest).
fn job_from(args: &Args) -> anyhow::Result<PageJob> {
    let cpu_slowdown = args.cpu_slowdown.trim().parse::<f64>().map_err(|_| {
        super::usage(format!(
            "--cpu-slowdown `{}` must be a number from 1 to 100 (1: no slowdown)",
            args.cpu_slowdown
        ))
    })?;
    let timeout =
        parse_duration(&args.timeout).map_err(|e| super::usage(format!("--timeout: {e}")))?;
    let synthetic = args
        .synthetic
        .as_deref()
        .map(Synthetic::parse)
        .transpose()
        .map_err(|e| super::usage(format!("--synthetic: {e}")))?;
    let server_cc = match args.server_cc.as_str() {
        "default" => None,
        other => Some(CongestionControl::parse(other).ok_or_else(|| {
            super::usage(format!(
                "--server-cc {other:?}: expected reno, cubic, bbr or default"
            ))
        })?),
    };
    Ok(PageJob {
        url: args.url.clone(),
        synthetic,
        replay: args.replay.clone(),
        proto: args.proto.unwrap_or_default(),
        link: link_config(args)?,
        runs: args.runs,
        push: args.push,
        early_hints: args.early_hints,
        spki: args.spki.clone(),
        insecure: args.insecure,
        chromium: args.chromium.clone(),
        timeout,
        cpu_slowdown,
        repeat_view: args.repeat_view,
        server_cc,
        record: args.record.clone(),
        har_dir: args.har.clone(),
        json: args.json.clone(),
        html: args.html.clone(),
    })
}

/// The job, from `--config` or the flags, checked by its one validator (usage errors exit 2).
fn job(args: &Args) -> anyhow::Result<PageJob> {
    let job = match &args.config {
        Some(path) => hxlab_contract::read_config(path).map_err(|e| super::usage(e.0))?,
        None => job_from(args)?,
    };
    job.validate().map_err(|e| super::usage(e.0))?;
    Ok(job)
}

/// A checked job as [`PageOptions`]: the recording (when replaying) and the URL (in URL
/// mode) are checked before any browser starts.
fn options(job: &PageJob) -> anyhow::Result<PageOptions> {
    if let Some(har) = &job.replay {
        check_replay(har, job.proto)?;
    }
    if let Some(url) = &job.url {
        let mut check = PageConfig::new(url.clone(), job.proto);
        check.spki_sha256 = job.spki.clone();
        check.insecure = job.insecure;
        check.validate().map_err(|e| super::usage(e.to_string()))?;
    }
    let hxlab_bin = match std::env::var_os("HXLAB_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().context("locating the hxlab binary")?,
    };
    Ok(PageOptions::from_job(job, hxlab_bin))
}

/// Runs `hxlab page`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let job = job(&args)?;
    let opts = options(&job)?;
    if let Some(dir) = &job.har_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating HAR directory {}", dir.display()))?;
    }
    if let Some(path) = &job.html {
        check_html_path(path)?;
    }
    // A missing browser is reported before anything is started.
    hxlab_browser::find_chromium(&job.chromium).map_err(anyhow::Error::new)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let session = PageSession::start(&opts).map_err(anyhow::Error::msg)?;
    // With `--json -` the JSON owns stdout and the human-readable text goes to stderr.
    let json_to_stdout = job.json.as_deref() == Some("-");
    let mut text: Box<dyn Write> = if json_to_stdout {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    header(&mut text, &job, &opts, &session)?;
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut replays: Vec<Option<ReplayCounts>> = Vec::new();
    let mut recorded = false;
    for i in 1..=job.runs {
        if let Some(plain) = session.replay_stats {
            hxlab_page::replay::replay_counts(plain, true).map_err(anyhow::Error::msg)?;
        }
        let cfg = session.run_config();
        let result = rt.block_on(async {
            tokio::select! {
                r = hxlab_browser::load_page_async(&cfg) => Some(r),
                _ = tokio::signal::ctrl_c() => None,
            }
        });
        let Some(result) = result else {
            bail!("interrupted");
        };
        match result {
            Ok(mut run) => {
                if let (Some(path), false) = (&job.record, recorded) {
                    recorded = record_run(path, &run, &mut text)?;
                }
                let replay = replay_counts(&session, &mut run)?;
                if let (Some(dir), Some(har)) = (&job.har_dir, run.har.take()) {
                    let path = dir.join(format!("run-{i}.har"));
                    let body = serde_json::to_vec_pretty(&har)?;
                    std::fs::write(&path, body)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                writeln!(text, "{}", run_row(&i.to_string(), &run))?;
                if let Some(c) = &replay {
                    writeln!(text, "     replay: {}", replay_line(c))?;
                }
                if let Some(flag) = &run.flag {
                    writeln!(text, "     ^ left out: {flag}")?;
                }
                if let Some(rv) = &run.repeat_view {
                    writeln!(text, "{}", run_row(&format!("{i}r"), rv))?;
                    if let Some(flag) = &rv.flag {
                        writeln!(text, "     ^ repeat view left out: {flag}")?;
                    }
                }
                replays.push(replay);
                outcomes.push(Outcome::Measured(Box::new(run)));
            }
            Err(e @ BrowserError::NotFound(_)) => return Err(anyhow::Error::new(e)),
            Err(e) => {
                let mut msg = e.to_string();
                if matches!(e, BrowserError::Certificate(_)) && session.spki.is_empty() {
                    msg.push_str(" (trust the server's key with --spki BASE64)");
                }
                writeln!(text, "{i:>4}  FAILED: {msg}")?;
                replays.push(None);
                outcomes.push(Outcome::Failed(msg));
            }
        }
    }
    let rep = hxlab_page::page::report(&outcomes, job.push);
    footer(&mut text, &job, &opts, &rep)?;
    server_cc_line(&mut text, &session)?;
    if let Some(dest) = &job.json {
        let mut doc = hxlab_page::page::report_json(&session, &opts, &outcomes, &rep);
        add_replay(&mut doc, &job, replays, recorded);
        write_json(dest, &doc)?;
    }
    if let Some(path) = &job.html {
        let html =
            hxlab_report::page_html::render(&session.url, opts.proto.name(), &outcomes, &rep);
        write_html(path, &html)?;
        writeln!(
            text,
            "  HTML with one waterfall per run: {}",
            path.display()
        )?;
    }
    text.flush()?;
    if let (Some(path), false) = (&job.record, recorded) {
        bail!(
            "no run loaded the page, so nothing was recorded into {}",
            path.display()
        );
    }
    if rep.summary.valid_runs == 0 {
        bail!(
            "no run counted ({})",
            rep.summary
                .left_out
                .first()
                .cloned()
                .unwrap_or_else(|| "no run finished".into())
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines before the runs: what is loaded, behind what, and the table's head.
fn header(
    text: &mut dyn Write,
    job: &PageJob,
    opts: &PageOptions,
    session: &PageSession,
) -> std::io::Result<()> {
    writeln!(
        text,
        "hxlab page: {} over {}, {} run(s)",
        session.url, opts.proto, job.runs
    )?;
    if let Some(l) = &session.link {
        let what = match job.link.as_ref().and_then(|l| l.profile.as_deref()) {
            Some(p) => format!("profile {p}"),
            None => "the link options".to_string(),
        };
        writeln!(
            text,
            "the browser runs behind an emulated link ({what}) at {}, the origin at {}",
            l.client_addr(),
            l.host_addr()
        )?;
    }
    if job.repeat_view {
        writeln!(
            text,
            "run Nr is run N's repeat view: the same browser, its cache and connections kept"
        )?;
    }
    writeln!(
        text,
        "{:>4}  {:<16} {:>9} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "run", "protocols", "loaded", "conns", "bytes", "TTFB", "DCL", "load", "FCP", "LCP", "SI"
    )
}

/// The summary after the runs: medians with intervals, push and early hints, left-out runs.
fn footer(
    text: &mut dyn Write,
    job: &PageJob,
    opts: &PageOptions,
    rep: &PageTotals,
) -> std::io::Result<()> {
    let summary = &rep.summary;
    let views = [
        (
            if job.repeat_view { " (first view)" } else { "" },
            Some(summary),
        ),
        (" (repeat view)", rep.repeat_summary.as_ref()),
    ];
    for (view, s) in views {
        let Some(s) = s else { continue };
        writeln!(text)?;
        writeln!(
            text,
            "{}, {}{view}: {} of {} run(s) counted; median [95% CI]",
            rep.browser, opts.proto, s.valid_runs, s.runs
        )?;
        summary_lines(text, s)?;
    }
    if let Some(note) = &rep.push_note {
        writeln!(text, "  push: {note}")?;
    }
    if job.early_hints {
        writeln!(
            text,
            "  early hints: the browser received 103 in {} of {} run(s); {} resource(s) were served from the preloads it started on them",
            rep.early_hints_runs, rep.finished_runs, rep.preloads_used
        )?;
    }
    for l in &summary.left_out {
        writeln!(text, "  left out: {l}")?;
    }
    for l in rep.repeat_summary.iter().flat_map(|s| &s.left_out) {
        writeln!(text, "  repeat view left out: {l}")?;
    }
    Ok(())
}

/// One line per metric: median and interval.
fn summary_lines(text: &mut dyn Write, s: &hxlab_core::page::PageSummary) -> std::io::Result<()> {
    for (key, label, unit) in [
        ("ttfb_ms", "TTFB", "ms"),
        ("dom_content_loaded_ms", "DOMContentLoaded", "ms"),
        ("load_ms", "load", "ms"),
        ("fcp_ms", "first contentful paint", "ms"),
        ("lcp_ms", "largest contentful paint", "ms"),
        ("speed_index_ms", "Speed Index", "ms"),
        ("visually_complete_ms", "visually complete", "ms"),
        ("connections", "connections", ""),
        ("bytes", "bytes", "B"),
        ("resources_loaded", "resources loaded", ""),
    ] {
        if let Some(m) = s.metrics.get(key) {
            writeln!(
                text,
                "  {label:<24} {:>10.1} {unit:<2} [{:.1}, {:.1}]",
                m.median, m.ci95_low, m.ci95_high
            )?;
        }
    }
    if let Some(m) = s.metrics.get("cls") {
        writeln!(
            text,
            "  {:<24} {:>10.4}    [{:.4}, {:.4}]",
            "cumulative layout shift", m.median, m.ci95_low, m.ci95_high
        )?;
    }
    Ok(())
}

/// What the origin started here ran, read back from its `/stats` (nothing without one).
fn server_cc_line(text: &mut dyn Write, session: &PageSession) -> std::io::Result<()> {
    if let Some(cc) = session.server_cc() {
        let counts = hxlab_core::cc::counts_text(&cc);
        writeln!(
            text,
            "  origin's congestion control, read back from its connections: {counts}"
        )?;
    }
    Ok(())
}

/// The replay's counts per run and the recording in the JSON document.
fn add_replay(
    doc: &mut PageReport,
    job: &PageJob,
    replays: Vec<Option<ReplayCounts>>,
    recorded: bool,
) {
    if let Some(har) = &job.replay {
        doc.replay = Some(ReplaySource { har: har.clone() });
        for (run, counts) in doc.runs.iter_mut().zip(replays) {
            run.replay = Some(counts);
        }
    }
    if let Some(path) = &job.record {
        doc.recorded = Some(Recording {
            har: path.clone(),
            written: recorded,
        });
    }
}

/// Writes the run's HAR to `path`; false when the run has none.
fn record_run(path: &Path, run: &PageRun, text: &mut dyn Write) -> anyhow::Result<bool> {
    let Some(har) = &run.har else {
        return Ok(false);
    };
    write_har(path, har)?;
    writeln!(text, "     recorded into {}", path.display())?;
    Ok(true)
}

/// With --replay: the run's replay counts, and the run flagged when page resources missed
/// the archive.
fn replay_counts(session: &PageSession, run: &mut PageRun) -> anyhow::Result<Option<ReplayCounts>> {
    let Some(plain) = session.replay_stats else {
        return Ok(None);
    };
    let counts = hxlab_page::replay::replay_counts(plain, false).map_err(anyhow::Error::msg)?;
    if let Some(why) = hxlab_page::replay::replay_flag(&counts, &run.resources) {
        run.flag = Some(match run.flag.take() {
            Some(f) => format!("{f}; {why}"),
            None => why,
        });
    }
    Ok(Some(counts))
}

/// Writes a recorded HAR (a regular file is replaced whole).
fn write_har(path: &Path, har: &Value) -> anyhow::Result<()> {
    let body = serde_json::to_vec(har)?;
    hxlab_core::files::write_output(path, &body)
        .with_context(|| format!("writing {}", path.display()))
}

/// One run's replay counts in a line: hits, near misses, misses.
fn replay_line(c: &ReplayCounts) -> String {
    let t = &c.tally;
    let mut line = format!(
        "{} from the archive, {} near miss(es), {} miss(es)",
        t.hits, t.near_misses, t.misses
    );
    if t.browser_own > 0 {
        line.push_str(&format!(
            " ({} request(s) the browser made on its own, e.g. /favicon.ico, not in the recording: answered 404, not counted as misses)",
            t.browser_own
        ));
    }
    for u in c.miss_urls.iter().take(5) {
        line.push_str(&format!("\n       missed: {u}"));
    }
    line
}

/// Writes the `--json` document to `dest` (`-`: standard output).
fn write_json(dest: &str, doc: &PageReport) -> anyhow::Result<()> {
    let body = doc.to_json()?;
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(body.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(Path::new(dest), body).with_context(|| format!("writing {dest}"))?;
    }
    Ok(())
}

fn ms(v: f64) -> String {
    if v >= 0.0 {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

fn run_row(i: &str, r: &PageRun) -> String {
    let protocols: Vec<String> = r
        .protocols
        .iter()
        .map(|(p, n)| format!("{n}×{}", if p.is_empty() { "?" } else { p }))
        .collect();
    format!(
        "{i:>4}  {:<16} {:>9} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        protocols.join(","),
        format!("{}/{}", r.resources_loaded, r.resources.len()),
        r.connections,
        hxlab_core::units::format_bytes(r.bytes),
        ms(r.ttfb_ms),
        ms(r.dom_content_loaded_ms),
        ms(r.load_ms),
        r.fcp_ms.map(ms).unwrap_or_else(|| "-".into()),
        r.lcp_ms.map(ms).unwrap_or_else(|| "-".into()),
        r.speed_index_ms.map(ms).unwrap_or_else(|| "-".into()),
    )
}

/// Refuses, before any run, a `--html` path that cannot be written: a directory, or a file
/// in a directory that does not exist.
fn check_html_path(path: &Path) -> anyhow::Result<()> {
    if path.is_dir() {
        bail!(
            "--html {}: is a directory; give a file name",
            path.display()
        );
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        bail!(
            "--html {}: directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Writes the page atomically (readers see the old file or the whole new one).
fn write_html(path: &Path, html: &str) -> anyhow::Result<()> {
    hxlab_core::write_atomically(path, html.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
