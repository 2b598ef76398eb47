//! `hxlab page`: page loads in headless Chromium over a forced protocol, repeated, with the
//! browser's own timings, a median and 95 % CI per metric, and optional HAR/JSON/HTML output
//! (the HTML with one waterfall per run).
//! The flags become a [`PageJob`]; `hxlab_page::runs` runs it and writes its outputs.

use anyhow::Context;
use hxlab_browser::Proto;
use hxlab_contract::{PageJob, Synthetic};
use hxlab_core::cc::CongestionControl;
use hxlab_core::parse_duration;
use hxlab_page::PageError;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `hxlab page`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  hxlab page --synthetic n=30,size=100KiB,delay=10ms --proto h3 --runs 10\n  hxlab page --browser firefox --synthetic n=30,size=100KiB --proto h3 --runs 5\n  hxlab page https://127.0.0.1:8443/ --proto h2 --spki <base64> --json -\n  hxlab page -k https://staging.localhost:8443/ --proto h3 --record site.har --runs 1"
)]
pub struct Args {
    /// Read the whole job from this JSON file (`-`: standard input): the typed contract the
    /// lab hands `hxlab page` (hxlab_contract::PageJob); no other flag may be given.
    #[arg(long, value_name = "FILE|-", conflicts_with_all = [
        "url", "synthetic", "record", "replay", "proto", "profile", "delay", "down", "up",
        "loss", "jitter", "queue", "runs", "push", "early_hints", "har", "json", "html",
        "timeout", "spki", "insecure", "cpu_slowdown", "repeat_view", "server_cc", "scheduler",
        "notsent_lowat", "strict", "discovery", "qlog", "browser",
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
    #[arg(long, value_parser = browser_proto(), ignore_case = true, required_unless_present_any = ["config", "discovery"])]
    pub proto: Option<Proto>,
    /// How the browser reaches HTTP/3: forced (--proto), alt-svc (nothing forced: a first
    /// visit from a fresh profile, then a returning visitor on the profile it left) or
    /// udp-blocked (as alt-svc, behind a link that drops every UDP packet).
    #[arg(long, value_name = "forced|alt-svc|udp-blocked", value_parser = discovery())]
    pub discovery: Option<hxlab_contract::Discovery>,
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
    /// Browser engine: chromium (the default; DevTools protocol) or firefox (Debian's
    /// firefox-esr over WebDriver BiDi: Necko and neqo instead of Chromium's stack and quiche).
    #[arg(long, value_name = "chromium|firefox")]
    pub browser: Option<String>,
    /// Firefox binary (Debian package `firefox-esr`), for --browser firefox.
    #[arg(
        long,
        value_name = "PATH",
        env = "HXLAB_FIREFOX",
        default_value = "firefox-esr"
    )]
    pub firefox: PathBuf,
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
    /// Leave out every run in which a resource failed, answered 4xx/5xx or did not finish
    /// (by default such a run counts when the page loaded, and those resources are listed
    /// beside its figures).
    #[arg(long)]
    pub strict: bool,
    /// Keep Chromium's NetLog of every run in DIR (netlog.run-N.json; qvis and Chrome's
    /// netlog viewer read it), the browser's counterpart of load's and serve's --qlog.
    #[arg(long, value_name = "DIR")]
    pub qlog: Option<PathBuf>,
    /// Congestion controller of the origin hxlab starts (--synthetic, --replay): reno, cubic
    /// or bbr, set on its TCP and QUIC connections alike and read back from /stats; "default"
    /// leaves each stack's own (the kernel's on TCP, Cubic on QUIC: not like for like).
    #[arg(long, value_name = "CC", default_value = "cubic")]
    pub server_cc: String,
    /// How that origin shares an HTTP/2 or HTTP/3 connection between responses: rfc9218 (its
    /// default), round-robin or fifo (hxlab serve --scheduler); read back from /stats.
    #[arg(long, value_name = "NAME")]
    pub scheduler: Option<hxlab_core::sched::Scheduler>,
    /// That origin's TCP_NOTSENT_LOWAT: a size (its default: 16KiB) or off (hxlab serve
    /// --notsent-lowat); read back from its sockets.
    #[arg(long, value_name = "SIZE|off")]
    pub notsent_lowat: Option<hxlab_core::sched::Lowat>,
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
    let given = [
        &link.profile,
        &link.delay,
        &link.jitter,
        &link.down,
        &link.up,
    ];
    if given.iter().all(|o| o.is_none()) && link.loss.is_none() && link.queue.is_none() {
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

/// `--discovery`: forced, alt-svc or udp-blocked, listed in `--help`.
fn discovery() -> impl clap::builder::TypedValueParser<Value = hxlab_contract::Discovery> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["forced", "alt-svc", "udp-blocked"])
        .map(|s: String| hxlab_contract::Discovery::parse(&s).unwrap_or_default())
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
    // Parsed here rather than by clap so a wrong name is one line, as every usage error.
    let browser = match &args.browser {
        Some(name) => name
            .parse::<hxlab_core::page::Engine>()
            .map_err(|e| super::usage(format!("--browser: {e}")))?,
        None => hxlab_core::page::Engine::Chromium,
    };
    if args.discovery == Some(hxlab_contract::Discovery::Forced) && args.proto.is_none() {
        return Err(super::usage(
            "--discovery forced needs the protocol to force: --proto h1, h2 or h3",
        ));
    }
    Ok(PageJob {
        url: args.url.clone(),
        synthetic,
        replay: args.replay.clone(),
        proto: args.proto.unwrap_or_default(),
        discovery: args.discovery.unwrap_or_default(),
        link: link_config(args)?,
        runs: args.runs,
        push: args.push,
        early_hints: args.early_hints,
        spki: args.spki.clone(),
        insecure: args.insecure,
        browser,
        chromium: args.chromium.clone(),
        firefox: args.firefox.clone(),
        trust_certs: Vec::new(),
        timeout,
        cpu_slowdown,
        repeat_view: args.repeat_view,
        strict: args.strict,
        qlog_dir: args.qlog.clone(),
        server_cc,
        scheduler: args.scheduler,
        notsent_lowat: args.notsent_lowat,
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

/// Runs `hxlab page`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let job = job(&args)?;
    for note in hxlab_page::runs::check(&job).map_err(page_error)? {
        eprintln!("hxlab page: {note}");
    }
    let hxlab_bin = match std::env::var_os("HXLAB_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().context("locating the hxlab binary")?,
    };
    // With `--json -` the JSON owns stdout and the human-readable text goes to stderr.
    let mut text: Box<dyn Write> = if job.json.as_deref() == Some("-") {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };
    let report = hxlab_page::runs::run(&job, hxlab_bin, &mut text).map_err(page_error)?;
    // Every output is written; a job that did not count still exits 1.
    hxlab_page::runs::failure(&job, &report).map_or(Ok(ExitCode::SUCCESS), |e| Err(page_error(e)))
}

/// A page job's error for `main`: a job that cannot run as given is a usage error (exit 2).
fn page_error(e: PageError) -> anyhow::Error {
    match e {
        PageError::Usage(m) => super::usage(m),
        // What to install is the whole answer: a usage error, one line, exit 2.
        PageError::Browser(e @ hxlab_browser::BrowserError::FirefoxNotFound(_)) => {
            super::usage(e.to_string())
        }
        e => anyhow::Error::new(e),
    }
}
