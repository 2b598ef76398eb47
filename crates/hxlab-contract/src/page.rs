//! [`PageJob`]: everything `hxlab page` can be asked — the page (a URL, a synthetic page, or
//! a recording to replay), the protocol, the link the browser sits behind, the runs and the
//! outputs — its JSON form (`hxlab page --config FILE|-`, as the lab hands it) and its one
//! validator, shared by the flags, files and the lab.

use crate::duration_text;
use crate::ConfigError;
use hxlab_core::cc::CongestionControl;
use hxlab_core::page::Engine;
use hxlab_core::sched::{Lowat, Scheduler};
use hxlab_core::Proto;
use hxlab_link::LinkConfig;
use std::path::PathBuf;
use std::time::Duration;

/// The synthetic page: `n` sub-resources of `size` bytes, each delayed by `delay` at the
/// origin, cacheable for `cache` when set.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Synthetic {
    /// Sub-resources.
    pub n: u32,
    /// Bytes each.
    pub size: u64,
    /// The origin's delay before each.
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub delay: Duration,
    /// Hostnames the page uses: 1 (the origin's address) or 2 (`a.hxlab.test` serves the
    /// page and the even resources, `b.hxlab.test` the odd ones; both mapped to the origin).
    pub origins: u8,
    /// How long the browser may cache each sub-resource (`Cache-Control: max-age`); `None`:
    /// not cacheable.
    #[serde(with = "duration_text::optional")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "duration_text::NullableDurationText")
    )]
    pub cache: Option<Duration>,
}

impl Default for Synthetic {
    fn default() -> Self {
        Synthetic {
            n: 30,
            size: 100 * 1024,
            delay: Duration::from_millis(10),
            origins: 1,
            cache: None,
        }
    }
}

impl Synthetic {
    /// Parses `n=RESOURCES,size=SIZE,delay=DURATION,origins=1|2,cache=DURATION` (any
    /// subset; defaults n=30, size=100KiB, delay=10ms, origins=1, no cache) and checks it.
    /// The error is one line, without the flag's name.
    pub fn parse(spec: &str) -> Result<Synthetic, String> {
        let mut s = Synthetic::default();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| {
                format!("`{part}` is not key=value (n=30,size=100KiB,delay=10ms)")
            })?;
            let v = v.trim();
            match k.trim() {
                "n" => {
                    s.n = v
                        .parse()
                        .map_err(|_| format!("n=`{v}` must be a count from 0 to 1000"))?
                }
                "size" => s.size = hxlab_core::parse_size(v).map_err(|e| e.to_string())?,
                "delay" => s.delay = hxlab_core::parse_duration(v).map_err(|e| e.to_string())?,
                "origins" => {
                    s.origins = v
                        .parse()
                        .map_err(|_| format!("origins=`{v}` must be 1 or 2"))?
                }
                "cache" => {
                    s.cache = Some(hxlab_core::parse_duration(v).map_err(|e| e.to_string())?)
                }
                other => {
                    return Err(format!(
                        "unknown key `{other}` (use n, size, delay, origins, cache)"
                    ))
                }
            }
        }
        s.check()?;
        Ok(s)
    }

    /// The bounds every synthetic page keeps, however it was written.
    pub fn check(&self) -> Result<(), String> {
        if self.n > 1000 {
            return Err(format!("n=`{}` must be a count from 0 to 1000", self.n));
        }
        if self.size > 64 * 1024 * 1024 {
            return Err("size must be at most 64MiB".into());
        }
        if self.delay > Duration::from_secs(60) {
            return Err("delay must be at most 60s".into());
        }
        if !matches!(self.origins, 1 | 2) {
            return Err(format!("origins=`{}` must be 1 or 2", self.origins));
        }
        if let Some(d) = self.cache {
            if d < Duration::from_secs(1) || d > Duration::from_secs(365 * 24 * 3600) {
                return Err("cache must be from 1s to 365 days".into());
            }
        }
        Ok(())
    }
}

/// How the browser comes to use HTTP/3 (`hxlab page --discovery`, the lab's `discovery`
/// factor).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum Discovery {
    /// The protocol is forced on the page's origins (`--proto h1|h2|h3`): every visitor
    /// already uses it.
    #[default]
    Forced,
    /// Nothing is forced: a first visit from a fresh profile, then a returning visitor (a
    /// new browser on the profile the first left: Alt-Svc and HTTP caches kept, connections
    /// closed). HTTP/3 is used where an Alt-Svc header offered it.
    AltSvc,
    /// As `alt-svc`, behind a link that drops every UDP packet: the browser tries QUIC
    /// where Alt-Svc offered it and falls back to TCP.
    UdpBlocked,
}

impl Discovery {
    /// Parses `forced`, `alt-svc`, `udp-blocked`.
    pub fn parse(s: &str) -> Option<Discovery> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "forced" => Discovery::Forced,
            "alt-svc" | "altsvc" => Discovery::AltSvc,
            "udp-blocked" => Discovery::UdpBlocked,
            _ => return None,
        })
    }

    /// The name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Discovery::Forced => "forced",
            Discovery::AltSvc => "alt-svc",
            Discovery::UdpBlocked => "udp-blocked",
        }
    }

    /// True when the browser discovers the protocol (a first visit and a returning one).
    pub fn discovers(self) -> bool {
        self != Discovery::Forced
    }
}

/// The name Firefox loads an origin on this machine's loopback under when it runs behind a
/// link (`https://127.0.0.1:PORT/` becomes `https://origin.hxlab.test:PORT/`, the name
/// resolved to the link's host address with `network.dns.forceResolve`): Firefox checks
/// the certificate's names, and a loopback origin's certificate cannot name a link's
/// address it does not know yet, so the lab's origins carry this name instead.
pub const LOCAL_ORIGIN_NAME: &str = "origin.hxlab.test";

/// One `hxlab page` invocation, as asked. `Default` is the flags' defaults (10 runs, 60 s per
/// run, the origin on cubic); exactly one of `url`, `synthetic` and `replay` names the page.
///
/// In JSON, durations are strings with a unit, `proto` and `server_cc` their names, `link` a
/// `hxlab link` configuration; missing keys take the defaults.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, deny_unknown_fields)]
pub struct PageJob {
    /// The page's URL (http:// or https://).
    pub url: Option<String>,
    /// A synthetic page served by an `hxlab serve` started for it.
    pub synthetic: Option<Synthetic>,
    /// A recording (HAR) served by an `hxlab serve --replay` started for it, every recorded
    /// host mapped to it.
    pub replay: Option<PathBuf>,
    /// The protocol to force; a browser speaks HTTP/2 over TLS only, so not `h2c`.
    pub proto: Proto,
    /// How the browser reaches HTTP/3: forced (`proto`), or discovered through Alt-Svc
    /// (`proto` must then be `auto`), with UDP blocked or not.
    pub discovery: Discovery,
    /// The link the browser sits behind (None: loopback, no emulation).
    pub link: Option<LinkConfig>,
    /// Page loads, each in a fresh browser with a fresh profile.
    pub runs: u32,
    /// Ask the synthetic origin to push the sub-resources (HTTP/2).
    pub push: bool,
    /// Ask the synthetic origin for 103 Early Hints.
    pub early_hints: bool,
    /// Server keys to trust by their SPKI hash (URL mode).
    pub spki: Vec<String>,
    /// Accept any certificate (URL mode).
    pub insecure: bool,
    /// The browser engine that loads the page (`--browser`; default Chromium).
    pub browser: Engine,
    /// The Chromium binary.
    pub chromium: PathBuf,
    /// The Firefox binary (`--browser firefox`).
    pub firefox: PathBuf,
    /// PEM certificates Firefox trusts as roots in its profile's NSS store (URL mode; the
    /// origin hxlab starts for --synthetic or --replay is trusted so already). Chromium
    /// trusts `spki` instead.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub trust_certs: Vec<PathBuf>,
    /// Limit per run (browser start, load, shutdown).
    #[serde(with = "duration_text")]
    #[cfg_attr(feature = "schema", schemars(with = "duration_text::DurationText"))]
    pub timeout: Duration,
    /// CPU slowdown of the page, 1 to 100 (1: none).
    pub cpu_slowdown: f64,
    /// After each first view, load the page again in the same browser.
    pub repeat_view: bool,
    /// Leave out every run in which a resource failed, answered 4xx/5xx or did not finish
    /// (`--strict`); otherwise a run counts when the page loaded and such resources are
    /// counted beside its figures.
    pub strict: bool,
    /// Congestion controller of the origin hxlab starts (synthetic or replay), on TCP and
    /// QUIC alike; None: each stack's own default (not like for like).
    pub server_cc: Option<CongestionControl>,
    /// How that origin shares an HTTP/2 or HTTP/3 connection between responses (hxlab serve's
    /// `scheduler`); None: its default, rfc9218.
    pub scheduler: Option<Scheduler>,
    /// That origin's TCP send low-water mark (hxlab serve's `notsent_lowat`); None: its
    /// default, 16KiB.
    pub notsent_lowat: Option<Lowat>,
    /// Write the first run's load as HAR 1.2 with every body here (for a later replay).
    pub record: Option<PathBuf>,
    /// Write one HAR per run into this directory.
    pub har_dir: Option<PathBuf>,
    /// Write the runs and the summary as JSON here (`-`: standard output).
    pub json: Option<String>,
    /// Write a self-contained HTML page here.
    pub html: Option<PathBuf>,
    /// Keep Chromium's NetLog of every run in this directory (`hxlab page --qlog DIR`):
    /// `netlog.run-N.json`, and `netlog.run-N.returning.json` for a returning visitor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qlog_dir: Option<PathBuf>,
}

impl Default for PageJob {
    fn default() -> Self {
        PageJob {
            url: None,
            synthetic: None,
            replay: None,
            proto: Proto::Auto,
            discovery: Discovery::Forced,
            link: None,
            runs: 10,
            push: false,
            early_hints: false,
            spki: Vec::new(),
            insecure: false,
            browser: Engine::Chromium,
            chromium: PathBuf::from("chromium"),
            firefox: PathBuf::from("firefox-esr"),
            trust_certs: Vec::new(),
            timeout: Duration::from_secs(60),
            cpu_slowdown: 1.0,
            repeat_view: false,
            strict: false,
            server_cc: Some(CongestionControl::Cubic),
            scheduler: None,
            notsent_lowat: None,
            record: None,
            har_dir: None,
            json: None,
            html: None,
            qlog_dir: None,
        }
    }
}

impl PageJob {
    /// Checks what `hxlab page`'s flags check before a run, so a job from a file (or built
    /// by the lab) is refused the same way. The message is one line for the user.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError(m.to_string()));
        let pages = [
            self.url.is_some(),
            self.synthetic.is_some(),
            self.replay.is_some(),
        ];
        match pages.iter().filter(|p| **p).count() {
            0 => {
                return bad(
                    "give a URL, --synthetic n=30,size=100KiB,delay=10ms or --replay site.har",
                )
            }
            1 => {}
            _ => return bad("give one page: a URL, --synthetic or --replay"),
        }
        if self.proto == Proto::H2c {
            return bad("--proto h2c: a browser speaks HTTP/2 over TLS only; use h2");
        }
        if self.runs == 0 || self.runs > 1000 {
            return bad("--runs must be from 1 to 1000");
        }
        if self.timeout < Duration::from_secs(1) || self.timeout > Duration::from_secs(86_400) {
            return bad("--timeout must be from 1s to 24h");
        }
        if !(self.cpu_slowdown.is_finite() && (1.0..=100.0).contains(&self.cpu_slowdown)) {
            return bad(&format!(
                "--cpu-slowdown `{}` must be a number from 1 to 100 (1: no slowdown)",
                self.cpu_slowdown
            ));
        }
        if let Some(s) = &self.synthetic {
            s.check()
                .map_err(|e| ConfigError(format!("--synthetic: {e}")))?;
            if s.origins > 1 && (self.push || self.early_hints) {
                return bad(
                    "--synthetic origins=2 cannot be combined with --push or --early-hints",
                );
            }
        } else if self.push || self.early_hints {
            return bad(
                "--push and --early-hints need --synthetic (they ask hxlab serve for them)",
            );
        }
        if self.url.is_some() && (self.scheduler.is_some() || self.notsent_lowat.is_some()) {
            return bad("--scheduler and --notsent-lowat set the origin hxlab starts (--synthetic, --replay); a URL's server is not ours to set");
        }
        if self.browser == Engine::Firefox && !self.spki.is_empty() {
            return bad("--spki trusts a key in Chromium only; Firefox trusts a certificate in its profile's NSS store (hxlab does that for --synthetic and --replay), so with --browser firefox use -k for a URL");
        }
        if self.browser == Engine::Firefox && self.cpu_slowdown > 1.0 {
            return bad("--cpu-slowdown is Chromium's CPU throttling; Firefox has none");
        }
        if self.browser == Engine::Firefox && self.qlog_dir.is_some() {
            return bad("--qlog keeps Chromium's NetLog; with --browser firefox it is not available (set SSLKEYLOGFILE and capture with `hxlab link --pcap` instead)");
        }
        if self.url.is_none() && (self.insecure || !self.spki.is_empty()) {
            return bad("-k/--insecure and --spki are for URL mode; the synthetic or replay origin's key is trusted already");
        }
        if let Some(url) = &self.url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return bad(&format!("`{url}` is not an http:// or https:// URL"));
            }
        }
        if let Some(link) = &self.link {
            link.validate().map_err(|e| ConfigError(e.to_string()))?;
        }
        if self.discovery.discovers() {
            let d = self.discovery.name();
            // h1 and h2 stay allowed: a site that offers only that protocol, visited twice
            // (the lab's h1-tls and h2 cells beside a discovering h3 cell).
            if self.proto == Proto::H3 {
                return bad(&format!(
                    "--discovery {d} forces no protocol: leave out --proto (or give --proto auto); --proto h3 is --discovery forced"
                ));
            }
            if self.replay.is_some() {
                return bad(&format!(
                    "--discovery {d} needs a page whose servers send their own Alt-Svc (a URL or --synthetic), not --replay"
                ));
            }
        }
        Ok(())
    }
}

crate::json_form!(PageJob, "page job");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_round_trips_and_is_checked_once() {
        let job = PageJob {
            replay: Some("site.har".into()),
            proto: Proto::H3,
            link: Some(LinkConfig::from_profile("Regular 4G").expect("profile")),
            runs: 1,
            json: Some("/tmp/p.json".into()),
            scheduler: Some(Scheduler::Fifo),
            notsent_lowat: Some(Lowat::Off),
            ..PageJob::default()
        };
        assert_eq!(PageJob::from_json(&job.to_json()).expect("round trip"), job);
        let s = Synthetic::parse("n=6,size=3KiB,delay=1ms,origins=2").expect("spec");
        assert_eq!((s.n, s.size, s.origins), (6, 3072, 2));
        for (bad, want) in [
            (PageJob::default(), "give a URL"),
            (
                PageJob {
                    url: Some("ftp://x/".into()),
                    ..PageJob::default()
                },
                "not an http",
            ),
            (
                PageJob {
                    replay: Some("a.har".into()),
                    insecure: true,
                    ..PageJob::default()
                },
                "URL mode",
            ),
            (
                PageJob {
                    url: Some("https://a/".into()),
                    proto: Proto::H2c,
                    ..PageJob::default()
                },
                "h2c",
            ),
            (
                PageJob {
                    url: Some("https://a/".into()),
                    push: true,
                    ..PageJob::default()
                },
                "--push",
            ),
            (
                PageJob {
                    url: Some("https://a/".into()),
                    scheduler: Some(Scheduler::Fifo),
                    ..PageJob::default()
                },
                "a URL's server is not ours to set",
            ),
        ] {
            let e = bad.validate().expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        }
        for (job, want) in [
            (
                PageJob {
                    url: Some("https://a/".into()),
                    proto: Proto::H3,
                    discovery: Discovery::AltSvc,
                    ..PageJob::default()
                },
                "forces no protocol",
            ),
            (
                PageJob {
                    replay: Some("a.har".into()),
                    discovery: Discovery::UdpBlocked,
                    ..PageJob::default()
                },
                "not --replay",
            ),
        ] {
            let e = job.validate().expect_err(want).to_string();
            assert!(e.contains(want), "{e}");
        }
        let discovering = PageJob {
            url: Some("https://a/".into()),
            discovery: Discovery::UdpBlocked,
            ..PageJob::default()
        };
        discovering.validate().expect("auto with discovery");
        assert_eq!(
            PageJob::from_json(&discovering.to_json()).expect("round trip"),
            discovering
        );
        assert!(discovering.to_json().contains("\"udp-blocked\""));
        for d in [Discovery::Forced, Discovery::AltSvc, Discovery::UdpBlocked] {
            assert_eq!(Discovery::parse(d.name()), Some(d));
        }
        assert_eq!(Discovery::parse("https-rr"), None);
        assert!(Synthetic::parse("n=5000").is_err());
        assert!(Synthetic::parse("origins=3").is_err());
        assert!(PageJob::from_json(r#"{"url": "https://a/", "bogus": 1}"#).is_err());
    }
}
