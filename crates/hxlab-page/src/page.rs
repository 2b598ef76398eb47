//! Page loads as `hxlab page` runs them: the page (a URL, or a synthetic page served by an
//! [`Origin`] of our own), the emulated link the browser sits behind, and what a series of
//! runs adds up to. The command line only maps its flags onto [`PageOptions`] and prints.

use crate::origin::{loopback_to, synthetic_page_html_with, temp_dir, Origin, OriginOptions};
use hxlab_browser::{Launcher, PageConfig, Proto};
use hxlab_contract::{
    EarlyHintsReport, PageLink, PageReport, PageRunEntry, PushReport, SyntheticPage,
};
use hxlab_core::page::{Outcome, PageRun, PageSummary, PageTotals, PUSH_REMOVED_IN};
use hxlab_link::{Link, LinkConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The synthetic page (the contract type `hxlab page --config` carries).
pub use hxlab_contract::Synthetic;

/// The hostnames of a two-origin synthetic page.
pub const SYNTHETIC_HOSTS: [&str; 2] = ["a.hxlab.test", "b.hxlab.test"];

/// What to load and how.
#[derive(Clone, Debug)]
pub struct PageOptions {
    /// The page's URL (None with `synthetic`).
    pub url: Option<String>,
    /// A synthetic page served by an origin started here.
    pub synthetic: Option<Synthetic>,
    /// The protocol to force.
    pub proto: Proto,
    /// The link to run the browser behind (checked with [`LinkConfig::validate`]).
    pub link: Option<LinkConfig>,
    /// Ask the synthetic origin to push the sub-resources.
    pub push: bool,
    /// Ask the synthetic origin for 103 Early Hints.
    pub early_hints: bool,
    /// Server keys to trust (URL mode).
    pub spki: Vec<String>,
    /// Accept any certificate (URL mode, `-k`).
    pub insecure: bool,
    /// Chromium binary.
    pub chromium: PathBuf,
    /// Limit per run.
    pub timeout: Duration,
    /// Keep each run's HAR.
    pub collect_har: bool,
    /// Put the response bodies into the HAR (`--record`).
    pub collect_bodies: bool,
    /// Serve the page from this HAR archive (`--replay`), every recorded host mapped to it.
    pub replay: Option<PathBuf>,
    /// The `hxlab` binary that serves the synthetic page.
    pub hxlab_bin: PathBuf,
    /// CPU slowdown factor for the page (1: none).
    pub cpu_slowdown: f64,
    /// Load the page a second time in the same browser after each first view.
    pub repeat_view: bool,
    /// Congestion controller of the origin hxlab starts (synthetic page or replay), on TCP
    /// and QUIC alike (`hxlab serve --cc`); None: each stack's own default (the kernel's on
    /// TCP, Cubic on QUIC), which compares different controllers across protocols.
    pub server_cc: Option<hxlab_core::cc::CongestionControl>,
}

impl PageOptions {
    /// The options of one checked [`hxlab_contract::PageJob`], the page served by
    /// `hxlab_bin`'s `serve` when it is synthetic or replayed.
    pub fn from_job(job: &hxlab_contract::PageJob, hxlab_bin: PathBuf) -> PageOptions {
        PageOptions {
            url: job.url.clone(),
            synthetic: job.synthetic.clone(),
            proto: job.proto,
            link: job.link.clone(),
            push: job.push,
            early_hints: job.early_hints,
            spki: job.spki.clone(),
            insecure: job.insecure,
            chromium: job.chromium.clone(),
            timeout: job.timeout,
            collect_har: job.har_dir.is_some(),
            collect_bodies: job.record.is_some(),
            replay: job.replay.clone(),
            hxlab_bin,
            cpu_slowdown: job.cpu_slowdown,
            repeat_view: job.repeat_view,
            server_cc: job.server_cc,
        }
    }
}

/// The page, its origin (when started here) and the link, for as many runs as asked.
pub struct PageSession {
    /// The URL loaded (on the link's host address when behind a link).
    pub url: String,
    /// Server keys the browser trusts.
    pub spki: Vec<String>,
    /// The link the browser runs behind.
    pub link: Option<Arc<Link>>,
    /// With `--replay`: the replaying server's plain address, for `/replay-stats`.
    pub replay_stats: Option<std::net::SocketAddr>,
    /// The plain address of the origin started here (its `/stats`), if one was.
    pub origin_stats: Option<std::net::SocketAddr>,
    template: PageConfig,
    _origin: Option<Origin>,
    origin_dir: Option<PathBuf>,
}

impl PageSession {
    /// Starts the link (if any) and the synthetic origin (if any). The error is one line.
    pub fn start(opts: &PageOptions) -> Result<PageSession, String> {
        // With a link, the browser runs in the link's namespace and reaches this side at the
        // link's host address; the synthetic origin listens there.
        let link = match &opts.link {
            Some(cfg) => {
                cfg.validate().map_err(|e| e.to_string())?;
                let l = Link::start(cfg.clone())
                    .map_err(|e| format!("starting the emulated link: {e}"))?;
                Some(Arc::new(l))
            }
            None => None,
        };
        let host = link
            .as_ref()
            .map(|l| l.host_addr().to_string())
            .unwrap_or_else(|| "127.0.0.1".to_string());
        let started = if opts.synthetic.is_some() || opts.replay.is_some() {
            let dir = temp_dir("hxlab-page-origin");
            let started = match (&opts.synthetic, &opts.replay) {
                (Some(s), _) => synthetic_origin(s, opts, &host, &dir),
                (None, Some(har)) => crate::replay::replay_origin(har, opts, &host, &dir),
                (None, None) => unreachable!("checked above"),
            };
            Some((
                started.inspect_err(|_| {
                    let _ = std::fs::remove_dir_all(&dir);
                })?,
                dir,
            ))
        } else {
            None
        };
        let (url, spki, origin, origin_dir, mapping) = match started {
            Some((s, dir)) => (s.url, vec![s.spki], Some(s.origin), Some(dir), s.mapping),
            None => {
                let url = opts.url.clone().unwrap_or_default();
                let url = match &link {
                    Some(_) => loopback_to(&url, &host),
                    None => url,
                };
                (url, opts.spki.clone(), None, None, Mapping::default())
            }
        };
        let origin_stats = origin.as_ref().map(|o| o.ready.plain);
        let replay_stats = match (&opts.replay, &origin) {
            (Some(_), Some(o)) => Some(o.ready.plain),
            _ => None,
        };
        let mut template = PageConfig::new(url.clone(), opts.proto);
        template.chromium = opts.chromium.clone();
        template.spki_sha256 = spki.clone();
        template.insecure = opts.insecure;
        template.timeout = opts.timeout;
        template.collect_har = opts.collect_har || opts.collect_bodies;
        template.collect_bodies = opts.collect_bodies;
        template.cpu_slowdown = opts.cpu_slowdown;
        template.repeat_view = opts.repeat_view;
        template.host_resolver_rules = mapping.rules;
        if opts.proto == Proto::H3 && !mapping.force_quic.is_empty() {
            // The last --origin-to-force-quic-on wins: this one names every origin.
            template.extra_args.push(format!(
                "--origin-to-force-quic-on={}",
                mapping.force_quic.join(",")
            ));
        }
        template.launcher = link.as_ref().map(|l| {
            let l = l.clone();
            Arc::new(move |program: &Path| l.command(program)) as Launcher
        });
        Ok(PageSession {
            url,
            spki,
            link,
            replay_stats,
            origin_stats,
            template,
            _origin: origin,
            origin_dir,
        })
    }

    /// The origin's connections per congestion controller so far, over every protocol, as
    /// the server read them back from each socket or QUIC connection (its `/stats`); None
    /// without an origin of ours or when `/stats` cannot be read.
    pub fn server_cc(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        let stats = crate::get_stats(self.origin_stats?)?;
        let mut out = std::collections::BTreeMap::new();
        for proto in stats.by_protocol.values() {
            hxlab_core::cc::add_counts(&mut out, &proto.cc);
        }
        Some(out)
    }

    /// The configuration of one run (each run gets a fresh browser and profile).
    pub fn run_config(&self) -> PageConfig {
        self.template.clone()
    }
}

impl Drop for PageSession {
    fn drop(&mut self) {
        self._origin = None;
        if let Some(dir) = &self.origin_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// How the browser reaches hostnames that are not addresses: `--host-resolver-rules` and,
/// for h3, the origins to force QUIC on.
#[derive(Default)]
pub(crate) struct Mapping {
    pub rules: Option<String>,
    pub force_quic: Vec<String>,
}

/// An origin started for the page: the URL to load, the key to trust, the server, and how
/// the browser reaches it.
pub(crate) struct Started {
    pub url: String,
    pub spki: String,
    pub origin: Origin,
    pub mapping: Mapping,
}

/// Starts the synthetic origin on `bind`. Push and 103 Early Hints are features of the
/// origin's own `/page` endpoint; otherwise the page is [`synthetic_page_html_with`],
/// served under `/static/`, from one origin or (origins=2) from two hostnames mapped to it,
/// its resources cacheable when `cache` is set.
fn synthetic_origin(
    s: &Synthetic,
    opts: &PageOptions,
    bind: &str,
    dir: &Path,
) -> Result<Started, String> {
    let use_origin_page = opts.push || opts.early_hints;
    if use_origin_page && s.origins > 1 {
        return Err("origins=2 cannot be combined with --push or --early-hints".into());
    }
    let www = dir.join("www");
    if !use_origin_page {
        std::fs::create_dir_all(&www).map_err(|e| format!("creating {}: {e}", www.display()))?;
    }
    let origin = Origin::start(&OriginOptions {
        hxlab_bin: opts.hxlab_bin.clone(),
        bind: bind.to_string(),
        dir: dir.to_path_buf(),
        www: (!use_origin_page).then_some(www.clone()),
        cc: opts.server_cc,
        capture_stderr: false,
        replay: None,
    })
    .map_err(|e| format!("the synthetic origin: {e}"))?;
    if matches!(opts.proto, Proto::H3 | Proto::Auto) && origin.ready.h3.is_none() {
        return Err(
            "the synthetic origin has no HTTP/3 listener (\"h3\" is null in its ready file)".into(),
        );
    }
    let tls = origin.ready.tls;
    let port = tls.port();
    let mut mapping = Mapping::default();
    let (page_base, second) = if s.origins > 1 {
        let [a, b] = SYNTHETIC_HOSTS;
        let bind_host = match bind.parse::<std::net::Ipv6Addr>() {
            Ok(_) => format!("[{bind}]"),
            Err(_) => bind.to_string(),
        };
        mapping.rules = Some(format!("MAP {a} {bind_host}, MAP {b} {bind_host}"));
        mapping.force_quic = vec![format!("{a}:{port}"), format!("{b}:{port}")];
        (
            format!("https://{a}:{port}"),
            Some(format!("https://{b}:{port}")),
        )
    } else {
        (format!("https://{tls}"), None)
    };
    if !use_origin_page {
        // The directory is served from the start; the page names the port, known only now.
        let max_age = s.cache.map(|d| d.as_secs());
        let html =
            synthetic_page_html_with(u64::from(s.n), s.size, s.delay, second.as_deref(), max_age);
        std::fs::write(www.join("page.html"), html)
            .map_err(|e| format!("writing the synthetic page: {e}"))?;
    }
    let url = if use_origin_page {
        format!(
            "https://{tls}/page?n={}&size={}&delay={}&push={}&early_hints={}",
            s.n,
            s.size,
            s.delay.as_secs_f64() * 1000.0,
            u8::from(opts.push),
            u8::from(opts.early_hints)
        )
    } else {
        format!("{page_base}/static/page.html")
    };
    let spki = origin.ready.spki_sha256.clone();
    Ok(Started {
        url,
        spki,
        origin,
        mapping,
    })
}

/// Sums up the runs; left-out runs are numbered by their position among all runs.
pub fn report(outcomes: &[Outcome], push: bool) -> PageTotals {
    let repeat_summary = repeat_summary(outcomes);
    let measured: Vec<PageRun> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Measured(r) => Some((**r).clone()),
            Outcome::Failed(_) => None,
        })
        .collect();
    let mut summary = hxlab_core::page::summarize(&measured);
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
    let push_ignored = browser_major >= PUSH_REMOVED_IN;
    let push_note = if !push {
        None
    } else if measured.is_empty() {
        Some(
            "push was requested; no run finished, so whether the browser honours it is unknown"
                .to_string(),
        )
    } else if push_ignored {
        Some(format!(
            "push was requested, but {browser} ignores HTTP/2 server push (removed in Chromium {}); these figures show no push effect",
            PUSH_REMOVED_IN
        ))
    } else {
        Some(format!("push was requested and {browser} supports it"))
    };
    PageTotals {
        summary,
        repeat_summary,
        browser,
        browser_major,
        push_ignored,
        push_note,
        finished_runs: measured.len(),
        early_hints_runs: measured.iter().filter(|r| r.early_hints > 0).count(),
        preloads_used: measured.iter().map(|r| r.early_hint_preloads_used).sum(),
    }
}

/// The summary of the repeat views (`None` when no run has one). A run whose repeat view is
/// missing (the run failed) or flagged is listed in `left_out` by its number.
fn repeat_summary(outcomes: &[Outcome]) -> Option<PageSummary> {
    let any = outcomes
        .iter()
        .any(|o| matches!(o, Outcome::Measured(r) if r.repeat_view.is_some()));
    if !any {
        return None;
    }
    let repeats: Vec<PageRun> = outcomes
        .iter()
        .filter_map(|o| match o {
            Outcome::Measured(r) => r.repeat_view.as_deref().cloned(),
            Outcome::Failed(_) => None,
        })
        .collect();
    let mut summary = hxlab_core::page::summarize(&repeats);
    summary.left_out = outcomes
        .iter()
        .enumerate()
        .filter_map(|(i, o)| match o {
            Outcome::Measured(r) => match &r.repeat_view {
                Some(rv) => rv.flag.as_ref().map(|f| format!("run {}: {f}", i + 1)),
                None => Some(format!("run {}: no repeat view", i + 1)),
            },
            Outcome::Failed(e) => Some(format!("run {}: failed: {e}", i + 1)),
        })
        .collect();
    summary.runs = outcomes.len();
    Some(summary)
}

/// The document of `hxlab page --json`: every run, the summary and what was asked (the
/// caller adds the replay's counts and the recording).
pub fn report_json(
    session: &PageSession,
    opts: &PageOptions,
    outcomes: &[Outcome],
    rep: &PageTotals,
) -> PageReport {
    let runs = outcomes
        .iter()
        .enumerate()
        .map(|(i, o)| PageRunEntry {
            run: i + 1,
            outcome: o.clone(),
            replay: None,
        })
        .collect();
    let link = session.link.as_ref().map(|l| PageLink {
        link: opts.link.clone(),
        host: l.host_addr().to_string(),
        client: l.client_addr().to_string(),
    });
    PageReport {
        tool: PageReport::TOOL.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        url: session.url.clone(),
        protocol: opts.proto,
        browser: rep.browser.clone(),
        browser_major: rep.browser_major,
        link,
        synthetic: opts.synthetic.as_ref().map(|s| SyntheticPage {
            n: s.n,
            size: s.size,
            delay_ms: s.delay.as_secs_f64() * 1000.0,
            cache_s: s.cache.map(|d| d.as_secs()),
        }),
        cpu_slowdown: opts.cpu_slowdown,
        repeat_view: opts.repeat_view,
        server_cc: session.server_cc(),
        push: PushReport {
            requested: opts.push,
            ignored_by_browser: opts.push && rep.push_ignored,
            note: rep.push_note.clone(),
        },
        early_hints: EarlyHintsReport {
            requested: opts.early_hints,
            runs_with_103: rep.early_hints_runs,
            resources_from_preloads: rep.preloads_used,
        },
        runs,
        summary: rep.summary.clone(),
        repeat_view_summary: rep.repeat_summary.clone(),
        replay: None,
        recorded: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_synthetic_specs() {
        let s = Synthetic::parse("n=3,size=10KiB,delay=5ms").unwrap();
        assert_eq!(
            s,
            Synthetic {
                n: 3,
                size: 10240,
                delay: Duration::from_millis(5),
                origins: 1,
                cache: None,
            }
        );
        assert_eq!(Synthetic::parse("").unwrap().n, 30);
        assert_eq!(Synthetic::parse("origins=2").unwrap().origins, 2);
        assert_eq!(
            Synthetic::parse("cache=1h").unwrap().cache,
            Some(Duration::from_secs(3600))
        );
        for bad in [
            "origins=3",
            "n=x",
            "n=5000",
            "size=1Q",
            "color=red",
            "n",
            "delay=2min",
            "cache=0s",
            "cache=x",
        ] {
            assert!(Synthetic::parse(bad).is_err(), "{bad}");
        }
    }
}
