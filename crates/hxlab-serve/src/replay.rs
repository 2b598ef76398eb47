//! `hxlab serve --replay site.har`: every request is answered from a HAR archive (matching in
//! `hxlab_core::har`), and every answer is counted: hits, near misses (with the URL asked
//! for and the one served) and misses (answered 404 with `x-hxlab-replay: miss`); the
//! browser's own `/favicon.ico`, which no recording holds, is answered 404 and counted apart
//! (`browser_own`, `x-hxlab-replay: browser-own`). The
//! counters are served at `/replay-stats`; `?reset=1` also zeroes them and starts every
//! recorded sequence over, as `hxlab page --replay` does before each page load.

use crate::body::BodySpec;
use crate::routes::Reply;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::StatusCode;
use hxlab_core::har::{Archive, MatchKind};
use serde::Serialize;
use std::sync::Mutex;

/// URLs kept per list in the counters; the counts go on past it.
const MAX_LISTED: usize = 1000;

/// A near miss: what was asked for and what answered it.
#[derive(Debug, Clone, Serialize)]
pub struct NearMiss {
    /// The URL asked for.
    pub url: String,
    /// The recorded URL that answered.
    pub served: String,
    /// `query` (same host and path) or `host` (same path on another host).
    pub rule: &'static str,
}

/// What the replay answered so far (the JSON of `/replay-stats`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplayCounts {
    /// Recorded responses in the archive.
    pub entries: usize,
    /// Requests answered by an exact match.
    pub hits: u64,
    /// Requests answered by a fallback rule.
    pub near_misses: u64,
    /// Requests with nothing in the archive (answered 404).
    pub misses: u64,
    /// Requests the browser makes on its own (`GET /favicon.ico`) that the archive does not
    /// hold: answered 404 like a miss, counted here instead (a recording never sees them).
    pub browser_own: u64,
    /// Answers whose recorded body the HAR lacks (served with an empty body).
    pub served_without_body: u64,
    /// The first near misses.
    pub near_miss_urls: Vec<NearMiss>,
    /// The first missed URLs.
    pub miss_urls: Vec<String>,
    /// Recorded responses whose body the HAR lacks (the whole archive, not just served ones).
    pub bodies_missing: Vec<String>,
    /// Entries of the HAR left out because nothing can replay them, named by kind
    /// (`skipped 5 entries: 2 data:, 2 ws:, 1 blob:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// The archive and its counters.
pub(crate) struct Replay {
    archive: Archive,
    counts: Mutex<ReplayCounts>,
}

impl Replay {
    pub fn new(archive: Archive) -> Replay {
        let counts = ReplayCounts {
            entries: archive.entries.len(),
            bodies_missing: archive
                .bodies_missing()
                .into_iter()
                .take(MAX_LISTED)
                .map(str::to_string)
                .collect(),
            skipped: archive.skipped_text(),
            ..ReplayCounts::default()
        };
        Replay {
            archive,
            counts: Mutex::new(counts),
        }
    }

    /// The counters; with `reset`, zeroed afterwards and every sequence rewound.
    pub fn counts(&self, reset: bool) -> ReplayCounts {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let now = c.clone();
        if reset {
            *c = ReplayCounts {
                entries: now.entries,
                bodies_missing: now.bodies_missing.clone(),
                skipped: now.skipped.clone(),
                ..ReplayCounts::default()
            };
            self.archive.rewind();
        }
        now
    }

    /// Answers one request from the archive.
    pub fn answer(&self, method: &str, scheme: &str, host: &str, path: &str, query: &str) -> Reply {
        let asked = || {
            let q = if query.is_empty() { "" } else { "?" };
            format!("{scheme}://{host}{path}{q}{query}")
        };
        let found = self.archive.answer(method, scheme, host, path, query);
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let Some((rec, kind)) = found else {
            if hxlab_core::har::is_browser_own(method, path, query) {
                c.browser_own += 1;
                drop(c);
                let mut r = Reply::text(
                    StatusCode::NOT_FOUND,
                    format!(
                        "the browser's own request, not in the replayed archive: {method} {}\n",
                        asked()
                    ),
                );
                r.headers
                    .push((REPLAY_HEADER, HeaderValue::from_static("browser-own")));
                return r;
            }
            c.misses += 1;
            if c.miss_urls.len() < MAX_LISTED {
                c.miss_urls.push(format!("{method} {}", asked()));
            }
            drop(c);
            let mut r = Reply::text(
                StatusCode::NOT_FOUND,
                format!("not in the replayed archive: {method} {}\n", asked()),
            );
            r.headers
                .push((REPLAY_HEADER, HeaderValue::from_static("miss")));
            return r;
        };
        let tag = match kind {
            MatchKind::Exact => {
                c.hits += 1;
                "hit"
            }
            MatchKind::NearQuery | MatchKind::NearHost => {
                c.near_misses += 1;
                if c.near_miss_urls.len() < MAX_LISTED {
                    c.near_miss_urls.push(NearMiss {
                        url: asked(),
                        served: rec.url.clone(),
                        rule: if kind == MatchKind::NearQuery {
                            "query"
                        } else {
                            "host"
                        },
                    });
                }
                "near-miss"
            }
        };
        if rec.body_missing {
            c.served_without_body += 1;
        }
        drop(c);
        let status = StatusCode::from_u16(rec.status).unwrap_or(StatusCode::OK);
        let mut r = Reply::recorded(status, BodySpec::Bytes(Bytes::from(rec.body.clone())));
        for (name, value) in &rec.headers {
            // A header that is not valid HTTP (a HAR edited by hand) is left out.
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                r.headers.push((n, v));
            }
        }
        r.headers
            .push((REPLAY_HEADER, HeaderValue::from_static(tag)));
        r
    }

    /// Every recorded host, for the certificate.
    pub fn hosts(&self) -> Vec<String> {
        self.archive
            .hosts()
            .into_iter()
            .map(str::to_string)
            .collect()
    }
}

/// `x-hxlab-replay: hit | near-miss | miss` on every replayed answer.
pub(crate) const REPLAY_HEADER: HeaderName = HeaderName::from_static("x-hxlab-replay");
