//! The page-load result model: what one browser page load measured ([`PageRun`], its
//! resources and filmstrip), what a series of loads adds up to ([`PageSummary`],
//! [`PageTotals`]), and the two views every other part reads a run through: a
//! [`Waterfall`] to draw and a [`RunResult`](crate::RunResult) to store
//! (`record.rs`). hxlab-browser fills it from a real Chromium; hxlab-page runs the series;
//! hxlab-report draws it. Plain data and pure functions: no browser, no I/O.

mod engine;
mod problems;
mod record;
mod summary;

pub use engine::Engine;
pub use problems::{
    party_of, same_site, site_of, url_host, Party, ProblemKind, ProblemResource, ProblemsAcross,
    ResourceProblems, MAX_NAMED,
};
pub use summary::{summarize, MetricSummary, PageSummary};

use crate::waterfall::{short_label, Mark, Phases, Waterfall, WaterfallRow};
use crate::Proto;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Whether a resource's URL is plain `http://` (any case): HTTP/1.1 whatever a page load asks
/// for, since browsers speak HTTP/2 and HTTP/3 over TLS only.
pub fn is_plain_http(url: &str) -> bool {
    url.get(..7)
        .is_some_and(|p| p.eq_ignore_ascii_case("http://"))
}

/// The first Chromium major version that ignores HTTP/2 server push (push was removed in 106).
pub const PUSH_REMOVED_IN: u32 = 106;

/// The most frames a filmstrip keeps (each is a small JPEG, a few KiB in base64).
pub const MAX_FILMSTRIP_FRAMES: usize = 40;

/// One picture of the filmstrip: what the page showed at `time_ms`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FilmstripFrame {
    /// The tick: ms after the navigation started (a multiple of the strip's interval).
    pub time_ms: f64,
    /// When the frame shown at this tick was painted, ms after the navigation started.
    pub painted_ms: f64,
    /// Its visual progress, 0 to 100 %.
    pub progress_pct: f64,
    /// The frame as a base64 JPEG (`data:image/jpeg;base64,` + this shows it).
    pub jpeg_base64: String,
}

/// One resource as the browser loaded it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
    /// The browser's priority for it (Chromium: VeryHigh, High, Medium, Low, VeryLow), the
    /// last it set; empty when the browser did not say.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority: String,
    /// The `priority` request header (RFC 9218) it sent, as the browser reports the headers
    /// it put on the wire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_header: Option<String>,
}

/// Which load of the page a [`PageRun`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum View {
    /// A fresh browser, empty cache, no connections.
    #[default]
    First,
    /// The same page again in the same browser: its cache and open connections kept.
    Repeat,
    /// A returning visitor: a new browser process on the profile the first view left, so its
    /// HTTP cache and Alt-Svc records are kept and its connections are not.
    Returning,
}

/// The requests of one view per HTTP version, as the browser itself reported them
/// (`response.protocol` of the document and of every resource).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProtocolShares {
    /// The version the page's document came over (after any redirect); None when the browser
    /// named none.
    pub document: Option<Proto>,
    /// The browser's cache answered the document (`document` is then the version the cached
    /// response first came over).
    #[serde(default)]
    pub document_from_cache: bool,
    /// Responses that came over the network with a version the browser named: what the
    /// shares below are shares of.
    pub requests: u32,
    /// Share of those over HTTP/1.x, 0 to 1.
    pub h1: f64,
    /// Share over HTTP/2.
    pub h2: f64,
    /// Share over HTTP/3.
    pub h3: f64,
    /// Responses the browser's cache answered (not in the shares: no protocol was used).
    pub from_cache: u32,
}

impl ProtocolShares {
    /// The shares of a view's resources, in request order (the document is the first
    /// `Document` resource that answered 2xx, so an http → https redirect is skipped).
    pub fn of(resources: &[ResourceTiming]) -> ProtocolShares {
        let mut counts = [0u32; 3];
        let mut from_cache = 0;
        for r in resources {
            if r.from_cache {
                from_cache += 1;
                continue;
            }
            match Proto::of_reported(&r.protocol) {
                Some(Proto::H1) => counts[0] += 1,
                Some(Proto::H2) => counts[1] += 1,
                Some(Proto::H3) => counts[2] += 1,
                _ => {}
            }
        }
        let doc = resources
            .iter()
            .find(|r| r.resource_type == "Document" && (200..300).contains(&r.status));
        let document = doc.and_then(|r| Proto::of_reported(&r.protocol));
        let requests: u32 = counts.iter().sum();
        let share = |n: u32| {
            if requests == 0 {
                0.0
            } else {
                f64::from(n) / f64::from(requests)
            }
        };
        ProtocolShares {
            document,
            document_from_cache: doc.is_some_and(|r| r.from_cache),
            requests,
            h1: share(counts[0]),
            h2: share(counts[1]),
            h3: share(counts[2]),
            from_cache,
        }
    }

    /// `document h2; 40% h2, 60% h3 of 10 requests` (the versions with a share only).
    pub fn describe(&self) -> String {
        let doc = format!(
            "{}{}",
            self.document.map_or("?", Proto::name),
            if self.document_from_cache {
                " (from cache)"
            } else {
                ""
            }
        );
        let shares: Vec<String> = [("h1", self.h1), ("h2", self.h2), ("h3", self.h3)]
            .into_iter()
            .filter(|(_, s)| *s > 0.0)
            .map(|(p, s)| format!("{:.0}% {p}", s * 100.0))
            .collect();
        let cache = if self.from_cache > 0 {
            format!(", {} from cache", self.from_cache)
        } else {
            String::new()
        };
        format!(
            "document {doc}; {} of {} requests{cache}",
            if shares.is_empty() {
                "none".to_string()
            } else {
                shares.join(", ")
            },
            self.requests
        )
    }
}

fn no_slowdown() -> f64 {
    1.0
}

/// One page load's measurements.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PageRun {
    /// First or repeat view.
    #[serde(default)]
    pub view: View,
    /// The page loaded.
    pub url: String,
    /// The protocol asked for.
    pub requested_protocol: Proto,
    /// The engine that loaded the page (records without the field are Chromium's).
    #[serde(default)]
    pub engine: Engine,
    /// The browser and its version as the browser itself reported them: "Chromium
    /// 156.0.8078.79", "Firefox 153.8.0esr".
    pub browser: String,
    /// The browser's major version.
    pub browser_major: u32,
    /// When the navigation started, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Responses per protocol as the browser reported them ("h2": 31).
    pub protocols: BTreeMap<String, u32>,
    /// The document's version and the share of requests per version the browser used.
    #[serde(default)]
    pub shares: ProtocolShares,
    /// Every response used the protocol asked for (over TLS: when HTTP/2 or HTTP/3 is asked
    /// for, plain http:// responses, such as a recorded http → https redirect, are left out
    /// of the check and counted in [`PageRun::plain_http_responses`]).
    pub protocol_ok: bool,
    /// Plain http:// responses the protocol check left out (HTTP/2 or HTTP/3 asked for:
    /// browsers speak those over TLS only).
    #[serde(default)]
    pub plain_http_responses: u32,
    /// Hosts outside the origins under test whose responses used another protocol than
    /// asked, with what they used (`cdn.example: 2×h2`): named, not held against the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_protocol_check: Vec<String>,
    /// Resources that failed, answered 4xx/5xx or did not finish: counted and the first
    /// named. They leave the run out only under `--strict`.
    #[serde(default, skip_serializing_if = "ResourceProblems::is_empty")]
    pub problems: ResourceProblems,
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
    /// HAR 1.2 log of this run, when the page load was asked to collect one.
    #[serde(skip)]
    pub har: Option<serde_json::Value>,
    /// The repeat view of this page load, when one was asked for (this run
    /// is then the first view).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_view: Option<Box<PageRun>>,
}

/// A first view that measured nothing yet: no URL, every figure zero or absent, no CPU
/// slowdown (1, as a record without the field reads). A loader starts from it and fills in
/// what it measured; the visual metrics and the repeat view come later, when there are any.
impl Default for PageRun {
    fn default() -> PageRun {
        PageRun {
            view: View::First,
            url: String::new(),
            requested_protocol: Proto::default(),
            engine: Engine::default(),
            browser: String::new(),
            browser_major: 0,
            started_unix_s: 0.0,
            protocols: BTreeMap::new(),
            shares: ProtocolShares::default(),
            protocol_ok: true,
            plain_http_responses: 0,
            outside_protocol_check: Vec::new(),
            problems: ResourceProblems::default(),
            flag: None,
            ttfb_ms: 0.0,
            dom_content_loaded_ms: 0.0,
            load_ms: 0.0,
            fcp_ms: None,
            lcp_ms: None,
            cls: None,
            speed_index_ms: None,
            first_visual_change_ms: None,
            visually_complete_ms: None,
            filmstrip: Vec::new(),
            cpu_slowdown: no_slowdown(),
            connections: 0,
            bytes: 0,
            resources_loaded: 0,
            resources_failed: 0,
            resources_incomplete: 0,
            early_hints: 0,
            early_hint_preloads_used: 0,
            resources: Vec::new(),
            har: None,
            repeat_view: None,
        }
    }
}

impl PageRun {
    /// True when the run counts in the figures (no flag).
    pub fn is_valid(&self) -> bool {
        self.flag.is_none()
    }

    /// True when this browser ignores HTTP/2 server push.
    pub fn push_ignored(&self) -> bool {
        // Firefox dropped server push in 132.
        self.engine == Engine::Firefox || self.browser_major >= PUSH_REMOVED_IN
    }

    /// The protocols the resources came over with their counts, as the run tables show
    /// them: `3×h2` (`?` for resources whose protocol the browser did not name).
    pub fn protocol_counts(&self) -> Vec<String> {
        self.protocols
            .iter()
            .map(|(p, n)| format!("{n}×{}", if p.is_empty() { "?" } else { p }))
            .collect()
    }
}

/// Longest row label, in characters.
const LABEL_CHARS: usize = 48;

impl PageRun {
    /// This run as a [`Waterfall`]: one row per resource in request order, with the marks
    /// TTFB, FCP, LCP, DCL and load that the browser measured.
    pub fn waterfall(&self) -> Waterfall {
        let rows = self
            .resources
            .iter()
            .map(|r| WaterfallRow {
                label: short_label(&r.url, LABEL_CHARS),
                url: r.url.clone(),
                resource_type: r.resource_type.clone(),
                protocol: r.protocol.clone(),
                connection_id: r.connection_id,
                connection_reused: r.connection_reused,
                status: r.status,
                start_ms: r.start_ms,
                end_ms: r.duration_ms.map(|d| r.start_ms + d),
                phases: r.phases,
                bytes: r.encoded_bytes,
                error: r.error.clone(),
                priority: r.priority.clone(),
                priority_header: r.priority_header.clone(),
                starved_ms: None,
            })
            .collect();
        let rows = crate::waterfall::with_starvation(rows);
        let marks = [
            ("TTFB", Some(self.ttfb_ms)),
            ("FCP", self.fcp_ms),
            ("LCP", self.lcp_ms),
            ("DCL", Some(self.dom_content_loaded_ms)),
            ("load", Some(self.load_ms)),
        ]
        .into_iter()
        .filter_map(|(name, at)| {
            let at_ms = at.filter(|v| v.is_finite() && *v >= 0.0)?;
            Some(Mark {
                name: name.to_string(),
                at_ms,
            })
        })
        .collect();
        Waterfall {
            url: self.url.clone(),
            rows,
            marks,
        }
    }
}

/// One run: figures, or why there are none.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The page loaded (it may still be left out, see `PageRun::flag`).
    Measured(Box<PageRun>),
    /// The run failed.
    Failed(String),
}

/// What a series of runs adds up to.
pub struct PageTotals {
    /// Medians and intervals of the counted runs (their first views).
    pub summary: PageSummary,
    /// The same over the repeat views, when they were asked for.
    pub repeat_summary: Option<PageSummary>,
    /// The browser's name and version.
    pub browser: String,
    /// Its major version (0 when no run finished).
    pub browser_major: u32,
    /// Push was asked for but this browser ignores it.
    pub push_ignored: bool,
    /// What became of a push request, when there was one.
    pub push_note: Option<String>,
    /// Runs that finished with figures (counted or left out).
    pub finished_runs: usize,
    /// Runs in which the browser received 103 Early Hints.
    pub early_hints_runs: usize,
    /// Resources served from the preloads the early hints started.
    pub preloads_used: u32,
    /// What went wrong with resources over the finished runs' first views.
    pub problems: ProblemsAcross,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(kind: &str, protocol: &str, status: u16, from_cache: bool) -> ResourceTiming {
        serde_json::from_value(serde_json::json!({
            "url": "https://a.example/", "resource_type": kind, "protocol": protocol,
            "status": status, "connection_id": 1, "connection_reused": false, "start_ms": 0.0,
            "encoded_bytes": 0, "body_bytes": 0, "from_cache": from_cache,
        }))
        .expect("a resource")
    }

    #[test]
    fn shares_count_what_came_over_the_network_and_name_the_document_after_redirects() {
        let shares = ProtocolShares::of(&[
            resource("Document", "http/1.1", 301, false),
            resource("Document", "h2", 200, false),
            resource("Script", "h3", 200, false),
            resource("Image", "h3", 200, false),
            resource("Image", "h2", 200, true),
            resource("Other", "data", 200, false),
        ]);
        assert_eq!(shares.document, Some(Proto::H2));
        assert!(!shares.document_from_cache);
        assert_eq!((shares.requests, shares.from_cache), (4, 1));
        assert_eq!((shares.h1, shares.h2, shares.h3), (0.25, 0.25, 0.5));
        assert_eq!(
            shares.describe(),
            "document h2; 25% h1, 25% h2, 50% h3 of 4 requests, 1 from cache"
        );
        let cached = ProtocolShares::of(&[resource("Document", "h2", 200, true)]);
        assert!(cached.document_from_cache);
        assert_eq!(cached.requests, 0);
        assert_eq!(cached.h2, 0.0);
    }
}
