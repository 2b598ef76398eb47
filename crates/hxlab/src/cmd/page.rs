//! `hxlab page`: page loads in headless Chromium over a forced protocol, repeated, with the
//! browser's own timings, a median and 95 % CI per metric, and optional HAR/JSON output.

use anyhow::{bail, Context};
use hxlab_browser::{BrowserError, Launcher, PageConfig, PageRun, Protocol};
use hxlab_core::{parse_duration, parse_size};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `hxlab page`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  hxlab page --synthetic n=30,size=100KiB,delay=10ms --proto h3 --runs 10\n  hxlab page https://127.0.0.1:8443/ --proto h2 --spki <base64> --json -"
)]
pub struct Args {
    /// Page to load (http:// or https://). Or use --synthetic.
    #[arg(value_name = "URL")]
    pub url: Option<String>,
    /// Synthetic page served by a local `hxlab serve`: n=RESOURCES,size=SIZE,delay=DURATION.
    #[arg(long, value_name = "SPEC", conflicts_with = "url")]
    pub synthetic: Option<String>,
    /// Protocol to force: h1, h2 or h3.
    #[arg(long, value_name = "h1|h2|h3")]
    pub proto: String,
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
}

/// The synthetic page: N sub-resources of SIZE bytes, each delayed by DELAY at the origin.
#[derive(Debug, Clone, PartialEq)]
struct Synthetic {
    n: u32,
    size: u64,
    delay: Duration,
}

fn parse_synthetic(spec: &str) -> anyhow::Result<Synthetic> {
    let mut s = Synthetic {
        n: 30,
        size: 100 * 1024,
        delay: Duration::from_millis(10),
    };
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part.split_once('=').ok_or_else(|| {
            super::usage(format!(
                "--synthetic: `{part}` is not key=value (n=30,size=100KiB,delay=10ms)"
            ))
        })?;
        match k.trim() {
            "n" => {
                s.n = v
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (0..=1000).contains(n))
                    .ok_or_else(|| {
                        super::usage(format!(
                            "--synthetic: n=`{v}` must be a count from 0 to 1000"
                        ))
                    })?
            }
            "size" => {
                s.size =
                    parse_size(v.trim()).map_err(|e| super::usage(format!("--synthetic: {e}")))?;
                if s.size > 64 * 1024 * 1024 {
                    return Err(super::usage("--synthetic: size must be at most 64MiB"));
                }
            }
            "delay" => {
                s.delay = parse_duration(v.trim())
                    .map_err(|e| super::usage(format!("--synthetic: {e}")))?;
                if s.delay > Duration::from_secs(60) {
                    return Err(super::usage("--synthetic: delay must be at most 60s"));
                }
            }
            other => {
                return Err(super::usage(format!(
                    "--synthetic: unknown key `{other}` (use n, size, delay)"
                )))
            }
        }
    }
    Ok(s)
}

/// A child `hxlab serve`, killed when dropped.
struct Origin {
    child: Child,
    dir: PathBuf,
    ready: Value,
}

impl Origin {
    /// Starts `hxlab serve` on `bind`; with `page`, also writes that HTML as
    /// `/static/page.html` of a directory the server serves.
    fn start(bind: &str, page: Option<&str>) -> anyhow::Result<Origin> {
        let exe = match std::env::var_os("HXLAB_BIN") {
            Some(p) => PathBuf::from(p),
            None => std::env::current_exe().context("locating the hxlab binary")?,
        };
        let dir = std::env::temp_dir().join(format!(
            "hxlab-page-origin-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let ready_file = dir.join("ready.json");
        let cert = dir.join("cert.pem");
        let mut cmd = Command::new(&exe);
        cmd.arg("serve");
        if let Some(html) = page {
            let www = dir.join("www");
            std::fs::create_dir_all(&www).with_context(|| format!("creating {}", www.display()))?;
            std::fs::write(www.join("page.html"), html).context("writing the synthetic page")?;
            cmd.arg("--dir").arg(&www);
        }
        let child = cmd
            .args(["--bind", bind, "--tls-port", "0", "--plain-port", "0"])
            .arg("--ready-file")
            .arg(&ready_file)
            .arg("--cert-out")
            .arg(&cert)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting `{} serve`", exe.display()))?;
        let mut origin = Origin {
            child,
            dir,
            ready: Value::Null,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready_file) {
                if let Ok(v) = serde_json::from_str::<Value>(&text) {
                    origin.ready = v;
                    return Ok(origin);
                }
            }
            if let Ok(Some(status)) = origin.child.try_wait() {
                bail!("the synthetic origin (`hxlab serve`) exited before it was ready: {status}");
            }
            if Instant::now() > deadline {
                bail!("the synthetic origin (`hxlab serve`) was not ready within 20 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn field(&self, key: &str) -> Option<&str> {
        self.ready.get(key).and_then(Value::as_str)
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where one run's page lives and how to trust it.
struct Target {
    url: String,
    spki: Vec<String>,
    _origin: Option<Origin>,
}

/// The synthetic page: N async scripts of `size` bytes from `/bytes/SIZE?delay=MS`, so each
/// sub-resource waits `delay` at the origin (as in seed-003's `/option` endpoint) and the
/// browser reads every body to the end (it abandons `<img>` bodies that do not decode).
fn synthetic_html(s: &Synthetic) -> String {
    let ms = s.delay.as_secs_f64() * 1000.0;
    let mut html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hxlab synthetic page</title></head><body>\n\
         <h1>hxlab synthetic page</h1>\n<p>{} resources of {} bytes, each delayed {ms} ms at the origin</p>\n",
        s.n, s.size
    );
    for i in 0..s.n {
        html.push_str(&format!(
            "<script async src=\"/bytes/{}?delay={ms}&amp;r={i}\"></script>\n",
            s.size
        ));
    }
    html.push_str("</body></html>\n");
    html
}

fn synthetic_target(
    s: &Synthetic,
    proto: Protocol,
    push: bool,
    early_hints: bool,
    bind: &str,
) -> anyhow::Result<Target> {
    // Push and 103 Early Hints are features of the origin's own /page endpoint; otherwise the
    // page is generated here (see `synthetic_html`).
    let use_origin_page = push || early_hints;
    let html = (!use_origin_page).then(|| synthetic_html(s));
    let origin = Origin::start(bind, html.as_deref())?;
    let tls = origin
        .field("tls")
        .context("the origin's ready file has no \"tls\" address")?
        .to_string();
    if proto == Protocol::H3 && origin.ready.get("h3").is_none_or(Value::is_null) {
        bail!("the synthetic origin has no HTTP/3 listener (\"h3\" is null in its ready file)");
    }
    let spki = origin
        .field("spki_sha256")
        .context("the origin's ready file has no \"spki_sha256\"")?
        .to_string();
    let url = if use_origin_page {
        format!(
            "https://{tls}/page?n={}&size={}&delay={}&push={}&early_hints={}",
            s.n,
            s.size,
            s.delay.as_secs_f64() * 1000.0,
            u8::from(push),
            u8::from(early_hints)
        )
    } else {
        format!("https://{tls}/static/page.html")
    };
    Ok(Target {
        url,
        spki: vec![spki],
        _origin: Some(origin),
    })
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

/// A URL for 127.0.0.1/localhost rewritten to `host`: inside the link's namespace, loopback is
/// the namespace's own, and this side is reached at the link's host address.
fn loopback_to(url: &str, host: &str) -> String {
    for lo in ["127.0.0.1", "localhost", "[::1]"] {
        for scheme in ["https://", "http://"] {
            let from = format!("{scheme}{lo}");
            if let Some(rest) = url.strip_prefix(&from) {
                if rest.is_empty() || rest.starts_with([':', '/', '?', '#']) {
                    return format!("{scheme}{host}{rest}");
                }
            }
        }
    }
    url.to_string()
}

/// One row of the output: a run that produced figures, or one that failed.
enum Outcome {
    Measured(Box<PageRun>),
    Failed(String),
}

/// Runs `hxlab page`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let proto: Protocol = args
        .proto
        .parse()
        .map_err(|e: String| super::usage(format!("--proto: {e}")))?;
    if args.runs == 0 || args.runs > 1000 {
        return Err(super::usage("--runs must be from 1 to 1000"));
    }
    let timeout =
        parse_duration(&args.timeout).map_err(|e| super::usage(format!("--timeout: {e}")))?;
    if timeout < Duration::from_secs(1) {
        return Err(super::usage("--timeout must be at least 1s"));
    }
    let synthetic = args.synthetic.as_deref().map(parse_synthetic).transpose()?;
    if synthetic.is_none() && args.url.is_none() {
        return Err(super::usage(
            "give a URL or --synthetic n=30,size=100KiB,delay=10ms",
        ));
    }
    if synthetic.is_none() && (args.push || args.early_hints) {
        return Err(super::usage(
            "--push and --early-hints need --synthetic (they ask hxlab serve for them)",
        ));
    }
    if synthetic.is_some() && !args.spki.is_empty() {
        return Err(super::usage(
            "--spki is for URL mode; the synthetic origin's key is trusted already",
        ));
    }
    if let Some(url) = &args.url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(super::usage(format!(
                "`{url}` is not an http:// or https:// URL"
            )));
        }
    }
    let link_cfg = link_config(&args)?;
    let json_out = args.json.clone();
    let har_dir = args.har.clone();
    if let Some(dir) = &har_dir {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating HAR directory {}", dir.display()))?;
    }

    if let Some(url) = &args.url {
        let mut check = PageConfig::new(url.clone(), proto);
        check.spki_sha256 = args.spki.clone();
        check.validate().map_err(|e| super::usage(e.to_string()))?;
    }
    // A missing browser is reported before anything is started.
    hxlab_browser::find_chromium(&args.chromium).map_err(anyhow::Error::new)?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    // With a link, the browser runs in the link's namespace and reaches this side at the
    // link's host address; the synthetic origin listens there.
    let link = match link_cfg {
        Some(cfg) => Some(Arc::new(
            hxlab_link::Link::start(cfg).context("starting the emulated link")?,
        )),
        None => None,
    };
    let host = link
        .as_ref()
        .map(|l| l.host_addr().to_string())
        .unwrap_or_else(|| "127.0.0.1".to_string());
    let target = match &synthetic {
        Some(s) => synthetic_target(s, proto, args.push, args.early_hints, &host)?,
        None => Target {
            url: match &link {
                Some(_) => loopback_to(&args.url.clone().unwrap_or_default(), &host),
                None => args.url.clone().unwrap_or_default(),
            },
            spki: args.spki.clone(),
            _origin: None,
        },
    };
    let launcher: Option<Launcher> = link.as_ref().map(|l| {
        let l = l.clone();
        Arc::new(move |program: &Path| l.command(program)) as Launcher
    });

    // With `--json -` the JSON owns stdout and the human-readable text goes to stderr.
    let json_to_stdout = json_out.as_deref() == Some("-");
    let mut text: Box<dyn Write> = if json_to_stdout {
        Box::new(std::io::stderr())
    } else {
        Box::new(std::io::stdout())
    };

    let mut outcomes: Vec<Outcome> = Vec::new();
    writeln!(
        text,
        "hxlab page: {} over {proto}, {} run(s)",
        target.url, args.runs
    )?;
    if let Some(l) = &link {
        let what = match &args.profile {
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
    writeln!(
        text,
        "{:>3}  {:<16} {:>9} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8}",
        "run", "protocols", "loaded", "conns", "bytes", "TTFB", "DCL", "load", "FCP"
    )?;
    for i in 1..=args.runs {
        let mut cfg = PageConfig::new(target.url.clone(), proto);
        cfg.chromium = args.chromium.clone();
        cfg.spki_sha256 = target.spki.clone();
        cfg.timeout = timeout;
        cfg.collect_har = har_dir.is_some();
        cfg.launcher = launcher.clone();
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
                if let (Some(dir), Some(har)) = (&har_dir, run.har.take()) {
                    let path = dir.join(format!("run-{i}.har"));
                    let body = serde_json::to_vec_pretty(&har)?;
                    std::fs::write(&path, body)
                        .with_context(|| format!("writing {}", path.display()))?;
                }
                writeln!(text, "{}", run_row(i, &run))?;
                if let Some(flag) = &run.flag {
                    writeln!(text, "     ^ left out: {flag}")?;
                }
                outcomes.push(Outcome::Measured(Box::new(run)));
            }
            Err(e @ BrowserError::NotFound(_)) => return Err(anyhow::Error::new(e)),
            Err(e) => {
                let mut msg = e.to_string();
                if msg.contains("ERR_CERT") && target.spki.is_empty() {
                    msg.push_str(" (trust the server's key with --spki BASE64)");
                }
                writeln!(text, "{i:>3}  FAILED: {msg}")?;
                outcomes.push(Outcome::Failed(msg));
            }
        }
    }

    let measured: Vec<PageRun> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Measured(r) => Some((**r).clone()),
            Outcome::Failed(_) => None,
        })
        .collect();
    let mut summary = hxlab_browser::summarize(&measured);
    // Number left-out runs by their position among all runs, failed ones included.
    summary.left_out = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match o {
            Outcome::Measured(r) => r.flag.as_ref().map(|f| format!("run {}: {f}", i + 1)),
            Outcome::Failed(e) => Some(format!("run {}: failed: {e}", i + 1)),
        })
        .collect();
    summary.runs = outcomes.len();
    let browser = measured
        .first()
        .map(|r| r.browser.clone())
        .unwrap_or_else(|| "Chromium (no run finished)".to_string());
    let browser_major = measured.first().map(|r| r.browser_major).unwrap_or(0);
    let push_ignored = browser_major >= hxlab_browser::PUSH_REMOVED_IN;
    let push_note = if !args.push {
        None
    } else if measured.is_empty() {
        Some(
            "push was requested; no run finished, so whether the browser honours it is unknown"
                .to_string(),
        )
    } else if push_ignored {
        Some(format!(
            "push was requested, but {browser} ignores HTTP/2 server push (removed in Chromium {}); these figures show no push effect",
            hxlab_browser::PUSH_REMOVED_IN
        ))
    } else {
        Some(format!("push was requested and {browser} supports it"))
    };
    let early_hints_runs = measured.iter().filter(|r| r.early_hints > 0).count();

    writeln!(text)?;
    writeln!(
        text,
        "{browser}, {proto}: {} of {} run(s) counted; median [95% CI]",
        summary.valid_runs, summary.runs
    )?;
    for (key, label, unit) in [
        ("ttfb_ms", "TTFB", "ms"),
        ("dom_content_loaded_ms", "DOMContentLoaded", "ms"),
        ("load_ms", "load", "ms"),
        ("fcp_ms", "first contentful paint", "ms"),
        ("connections", "connections", ""),
        ("bytes", "bytes", "B"),
        ("resources_loaded", "resources loaded", ""),
    ] {
        if let Some(m) = summary.metrics.get(key) {
            writeln!(
                text,
                "  {label:<24} {:>10.1} {unit:<2} [{:.1}, {:.1}]",
                m.median, m.ci95_low, m.ci95_high
            )?;
        }
    }
    if let Some(note) = &push_note {
        writeln!(text, "  push: {note}")?;
    }
    if args.early_hints {
        let used: u32 = measured.iter().map(|r| r.early_hint_preloads_used).sum();
        writeln!(
            text,
            "  early hints: the browser received 103 in {early_hints_runs} of {} run(s); {used} resource(s) were served from the preloads it started on them",
            measured.len()
        )?;
    }
    for l in &summary.left_out {
        writeln!(text, "  left out: {l}")?;
    }

    if let Some(dest) = &json_out {
        let runs: Vec<Value> = outcomes
            .iter()
            .enumerate()
            .map(|(i, o)| match o {
                Outcome::Measured(r) => {
                    let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
                    v["run"] = json!(i + 1);
                    v["counted"] = json!(r.is_valid());
                    v
                }
                Outcome::Failed(e) => json!({ "run": i + 1, "counted": false, "error": e }),
            })
            .collect();
        let doc = json!({
            "tool": "hxlab page",
            "version": env!("CARGO_PKG_VERSION"),
            "url": target.url,
            "protocol": proto,
            "browser": browser,
            "browser_major": browser_major,
            "link": link.as_ref().map(|l| json!({
                "profile": args.profile, "delay": args.delay, "down": args.down, "up": args.up,
                "loss": args.loss, "host": l.host_addr().to_string(), "client": l.client_addr().to_string() })),
            "synthetic": synthetic.as_ref().map(|s| json!({
                "n": s.n, "size": s.size, "delay_ms": s.delay.as_secs_f64() * 1000.0 })),
            "push": { "requested": args.push, "ignored_by_browser": args.push && push_ignored, "note": push_note },
            "early_hints": { "requested": args.early_hints, "runs_with_103": early_hints_runs,
                "resources_from_preloads": measured.iter().map(|r| r.early_hint_preloads_used).sum::<u32>() },
            "runs": runs,
            "summary": summary,
        });
        write_json(dest, &doc)?;
    }
    text.flush()?;
    if summary.valid_runs == 0 {
        bail!(
            "no run counted ({})",
            summary
                .left_out
                .first()
                .cloned()
                .unwrap_or_else(|| "no run finished".into())
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn write_json(dest: &str, doc: &Value) -> anyhow::Result<()> {
    let mut body = serde_json::to_vec_pretty(doc)?;
    body.push(b'\n');
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(&body)?;
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

fn run_row(i: u32, r: &PageRun) -> String {
    let protocols: Vec<String> = r
        .protocols
        .iter()
        .map(|(p, n)| format!("{n}×{}", if p.is_empty() { "?" } else { p }))
        .collect();
    format!(
        "{i:>3}  {:<16} {:>9} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8}",
        protocols.join(","),
        format!("{}/{}", r.resources_loaded, r.resources.len()),
        r.connections,
        hxlab_core::units::format_bytes(r.bytes),
        ms(r.ttfb_ms),
        ms(r.dom_content_loaded_ms),
        ms(r.load_ms),
        r.fcp_ms.map(ms).unwrap_or_else(|| "-".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_move_to_the_link_host() {
        assert_eq!(
            loopback_to("https://127.0.0.1:8443/x", "10.0.0.1"),
            "https://10.0.0.1:8443/x"
        );
        assert_eq!(
            loopback_to("http://localhost/", "10.0.0.1"),
            "http://10.0.0.1/"
        );
        assert_eq!(
            loopback_to("https://127.0.0.10/", "10.0.0.1"),
            "https://127.0.0.10/"
        );
        assert_eq!(
            loopback_to("https://example.test/", "10.0.0.1"),
            "https://example.test/"
        );
    }

    #[test]
    fn parses_synthetic_specs() {
        let s = parse_synthetic("n=3,size=10KiB,delay=5ms").unwrap();
        assert_eq!(
            s,
            Synthetic {
                n: 3,
                size: 10240,
                delay: Duration::from_millis(5)
            }
        );
        assert_eq!(parse_synthetic("").unwrap().n, 30);
        assert!(parse_synthetic("n=x").is_err());
        assert!(parse_synthetic("n=5000").is_err());
        assert!(parse_synthetic("size=1Q").is_err());
        assert!(parse_synthetic("color=red").is_err());
        assert!(parse_synthetic("n").is_err());
    }
}
