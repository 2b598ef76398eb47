//! hxlab-browser: page loads in a real headless Chromium over the DevTools protocol.
//!
//! What it is for: start Debian's `chromium` with a fresh profile, force HTTP/1.1, HTTP/2 or
//! HTTP/3, trust a test server's certificate by its SPKI hash, load one page, and return the
//! browser's own records: the protocol every resource used, navigation and paint timings
//! (TTFB, DOMContentLoaded, load, first contentful paint), connections, bytes, per-resource
//! timings and, on request, a HAR 1.2 log. [`load_page`] is one run; [`summarize`] turns runs
//! into medians with 95 % confidence intervals; [`PageRun::to_run_result`] stores a run as the
//! `RunResult` every part of hxlab reads. The lab's `workload = "browser"` calls
//! [`load_page`] once per repetition.
//!
//! What it is not: no server, no network emulation (a [`Launcher`] lets the caller start the
//! browser inside `hxlab link`'s namespace), no CLI. It speaks CDP itself over
//! `--remote-debugging-pipe` (a dozen methods and events) instead of pulling in a generated
//! binding of the whole protocol: fewer dependencies and compile time, and full control over
//! how the browser process tree is started and killed.

mod cdp;
mod har;
mod load;
mod process;
mod result;
mod summary;
mod view;
mod visual;
mod vitals;
mod waterfall;

pub use load::{find_chromium, load_page, load_page_async};
pub use process::Launcher;
pub use summary::{summarize, MetricSummary, PageSummary};
pub use visual::{speed_index, visual_progress, FilmstripFrame, Histogram, MAX_FILMSTRIP_FRAMES};

use hxlab_core::waterfall::Phases;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The first Chromium major version that ignores HTTP/2 server push (push was removed in 106).
pub const PUSH_REMOVED_IN: u32 = 106;

/// HTTP version a page load is forced to use, or `Auto`: none forced — the one "what to ask"
/// vocabulary of hxlab ([`hxlab_core::Proto`]). A browser speaks HTTP/2 over TLS only, so
/// `h2c` is refused ([`PageConfig::validate`]).
pub use hxlab_core::Proto;

/// Whether a resource's URL is plain `http://` (any case): HTTP/1.1 whatever a page load asks
/// for, since browsers speak HTTP/2 and HTTP/3 over TLS only.
pub fn is_plain_http(url: &str) -> bool {
    url.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
}

/// Maps Chromium's `response.protocol` ("http/1.1", "h2", "h3", "h3-29", "quic/…") to the
/// protocol a page load asks for; `None` for anything else (e.g. "data", "blob", empty).
pub fn asked_of_reported(reported: &str) -> Option<Proto> {
    let p = reported.to_ascii_lowercase();
    if p == "http/1.1" || p == "http/1.0" {
        Some(Proto::H1)
    } else if p == "h2" {
        Some(Proto::H2)
    } else if p.starts_with("h3") || p.starts_with("quic") || p.contains("+quic") {
        Some(Proto::H3)
    } else {
        None
    }
}

/// What one page load should do.
#[derive(Clone)]
pub struct PageConfig {
    /// The page to load (http:// or https://; h3 needs https).
    pub url: String,
    /// The protocol to force.
    pub protocol: Proto,
    /// Chromium binary: a path, or a name looked up on PATH (default `chromium`).
    pub chromium: PathBuf,
    /// Base64 SHA-256 hashes of SubjectPublicKeyInfos to trust (`--ignore-certificate-errors-spki-list`).
    pub spki_sha256: Vec<String>,
    /// Accept any certificate (`--ignore-certificate-errors`; `hxlab page -k`).
    pub insecure: bool,
    /// Limit for the whole run: start, load, measure, shut down.
    pub timeout: Duration,
    /// Chromium `--host-resolver-rules`, e.g. `MAP origin.test 10.0.0.1`.
    pub host_resolver_rules: Option<String>,
    /// More Chromium flags, appended last.
    pub extra_args: Vec<String>,
    /// Build a HAR 1.2 log into [`PageRun::har`].
    pub collect_har: bool,
    /// Put every response body into the HAR (`content.text`, base64 when binary), read with
    /// `Network.getResponseBody` as each response finishes; up to 512 MiB in all.
    pub collect_bodies: bool,
    /// How to start the browser (e.g. inside a network namespace); `None`: a plain child.
    pub launcher: Option<Launcher>,
    /// CPU slowdown factor (`Emulation.setCPUThrottlingRate`); 1: none.
    pub cpu_slowdown: f64,
    /// After the first view, load the page again in the same browser (cache and connections
    /// kept) into [`PageRun::repeat_view`].
    pub repeat_view: bool,
}

impl PageConfig {
    /// A config with defaults: `chromium` from PATH, 60 s timeout, no HAR.
    pub fn new(url: impl Into<String>, protocol: Proto) -> PageConfig {
        PageConfig {
            url: url.into(),
            protocol,
            chromium: PathBuf::from("chromium"),
            spki_sha256: Vec::new(),
            insecure: false,
            timeout: Duration::from_secs(60),
            host_resolver_rules: None,
            extra_args: Vec::new(),
            collect_har: false,
            collect_bodies: false,
            launcher: None,
            cpu_slowdown: 1.0,
            repeat_view: false,
        }
    }
}

impl PageConfig {
    /// Checks the URL, the protocol/scheme combination and the SPKI hashes without starting
    /// anything ([`BrowserError::Config`] says what is wrong).
    pub fn validate(&self) -> Result<(), BrowserError> {
        load::browser_args(self).map(|_| ())
    }
}

impl std::fmt::Debug for PageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageConfig")
            .field("url", &self.url)
            .field("protocol", &self.protocol)
            .field("chromium", &self.chromium)
            .field("timeout", &self.timeout)
            .field("cpu_slowdown", &self.cpu_slowdown)
            .field("repeat_view", &self.repeat_view)
            .field("launcher", &self.launcher.is_some())
            .finish_non_exhaustive()
    }
}

/// One resource as the browser loaded it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResourceTiming {
    /// Request URL.
    pub url: String,
    /// Chromium's resource type ("Document", "Image", "Script", …).
    pub resource_type: String,
    /// Protocol the browser reports for the response ("http/1.1", "h2", "h3"); empty if none.
    pub protocol: String,
    /// HTTP status (0 when the request failed before a response).
    pub status: u16,
    /// The browser's connection id (0: none).
    pub connection_id: u64,
    /// The response came over a connection used before.
    pub connection_reused: bool,
    /// Request start, ms after the navigation started.
    pub start_ms: f64,
    /// Request start to response headers, ms.
    pub response_ms: Option<f64>,
    /// Request start to last byte, ms.
    pub duration_ms: Option<f64>,
    /// Bytes received for it on the wire (headers + body, as the browser counts them).
    pub encoded_bytes: u64,
    /// Body bytes the browser read (after content decoding).
    pub body_bytes: u64,
    /// Served from a preload the browser started on a 103 Early Hints response.
    #[serde(default)]
    pub from_early_hints: bool,
    /// Served from the browser's memory or disk cache (a repeat view's cached resources);
    /// `protocol` is then the one the cached response originally came over.
    #[serde(default)]
    pub from_cache: bool,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// Its phases (queued, DNS, connect, TLS, request, wait, download) in ms after the
    /// navigation started; empty for runs recorded before phases were, and for requests
    /// without a response timing.
    #[serde(default, skip_serializing_if = "Phases::is_empty")]
    pub phases: Phases,
}

/// Which load of the page in one browser a [`PageRun`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// A fresh browser, empty cache, no connections.
    #[default]
    First,
    /// The same page again in the same browser: its cache and open connections kept.
    Repeat,
}

fn no_slowdown() -> f64 {
    1.0
}

/// One page load's measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PageRun {
    /// First or repeat view.
    #[serde(default)]
    pub view: View,
    /// The page loaded.
    pub url: String,
    /// The protocol asked for.
    pub requested_protocol: Proto,
    /// "Chromium 156.0.8078.79".
    pub browser: String,
    /// Chromium major version.
    pub browser_major: u32,
    /// When the navigation started, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Responses per protocol as the browser reported them ("h2": 31).
    pub protocols: BTreeMap<String, u32>,
    /// Every response used the protocol asked for (over TLS: when HTTP/2 or HTTP/3 is asked
    /// for, plain http:// responses, such as a recorded http → https redirect, are left out
    /// of the check and counted in [`PageRun::plain_http_responses`]).
    pub protocol_ok: bool,
    /// Plain http:// responses the protocol check left out (HTTP/2 or HTTP/3 asked for:
    /// browsers speak those over TLS only).
    #[serde(default)]
    pub plain_http_responses: u32,
    /// Why this run must not count (protocol fallback, failed resources); `None`: it counts.
    pub flag: Option<String>,
    /// Navigation start to first byte of the document (navigation timing `responseStart`), ms.
    pub ttfb_ms: f64,
    /// Navigation start to DOMContentLoaded (`domContentLoadedEventStart`), ms.
    pub dom_content_loaded_ms: f64,
    /// Navigation start to the load event (`loadEventStart`), ms.
    pub load_ms: f64,
    /// First contentful paint, ms; `None` if the browser painted nothing measurable.
    pub fcp_ms: Option<f64>,
    /// Largest contentful paint (the last `largest-contentful-paint` entry), ms.
    #[serde(default)]
    pub lcp_ms: Option<f64>,
    /// Cumulative layout shift (largest session window, shifts after input left out).
    #[serde(default)]
    pub cls: Option<f64>,
    /// Speed Index from the painted frames, ms (see `visual_progress`).
    #[serde(default)]
    pub speed_index_ms: Option<f64>,
    /// The first painted frame that differs from the blank start, ms.
    #[serde(default)]
    pub first_visual_change_ms: Option<f64>,
    /// The frame from which on the page looked as it ended up, ms.
    #[serde(default)]
    pub visually_complete_ms: Option<f64>,
    /// What the page showed over time: one frame per change at fixed ticks (at most
    /// [`MAX_FILMSTRIP_FRAMES`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filmstrip: Vec<FilmstripFrame>,
    /// CPU slowdown the page ran under (1: none).
    #[serde(default = "no_slowdown")]
    pub cpu_slowdown: f64,
    /// Distinct connections the responses came over.
    pub connections: u32,
    /// Bytes received on the wire for all resources.
    pub bytes: u64,
    /// Requests that finished loading (document included).
    pub resources_loaded: u32,
    /// Requests that failed.
    pub resources_failed: u32,
    /// Responses the browser stopped reading before the end of their Content-Length.
    pub resources_incomplete: u32,
    /// 103 Early Hints responses the browser received.
    pub early_hints: u32,
    /// Resources served from preloads the browser started on a 103.
    #[serde(default)]
    pub early_hint_preloads_used: u32,
    /// Per-resource timings, in request order.
    pub resources: Vec<ResourceTiming>,
    /// HAR 1.2 log of this run, when [`PageConfig::collect_har`] was set.
    #[serde(skip)]
    pub har: Option<serde_json::Value>,
    /// The repeat view of this page load, when [`PageConfig::repeat_view`] was set (this run
    /// is then the first view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_view: Option<Box<PageRun>>,
}

impl PageRun {
    /// True when the run counts in the figures (no flag).
    pub fn is_valid(&self) -> bool {
        self.flag.is_none()
    }

    /// True when this browser ignores HTTP/2 server push.
    pub fn push_ignored(&self) -> bool {
        self.browser_major >= PUSH_REMOVED_IN
    }
}

/// Why a page load failed.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// The Chromium binary is not there.
    #[error("Chromium not found ({0}): install the Debian package `chromium` (apt-get install chromium) or pass --chromium PATH")]
    NotFound(String),
    /// Bad configuration (URL, protocol combination).
    #[error("{0}")]
    Config(String),
    /// The browser could not be started.
    #[error("could not start Chromium: {0}")]
    Launch(String),
    /// The browser or its page crashed or exited.
    #[error("Chromium crashed: {0}")]
    Crashed(String),
    /// The run took longer than the timeout.
    #[error("page load timed out after {0:?}")]
    Timeout(Duration),
    /// The browser reported a navigation error (e.g. net::ERR_CONNECTION_REFUSED).
    #[error("navigation failed: {0}")]
    Navigation(String),
    /// The DevTools conversation went wrong.
    #[error("DevTools protocol: {0}")]
    Protocol(String),
}
