//! `hxlab serve --replay site.har`: every request is answered from a HAR archive (matching in
//! `hxlab_core::har`), and every answer is counted: hits, near misses (with the URL asked
//! for and the one served) and misses (answered 404 with `x-hxlab-replay: miss`); the
//! browser's own `/favicon.ico` and the icons the recorded pages declare, which a recording
//! of the page's traffic lacks, are answered 404 and counted apart (`browser_own`,
//! `x-hxlab-replay: browser-own`); so are requests to hosts the recording never saw
//! (`outside`, `x-hxlab-replay: outside`) and requests it holds as failed on a host that
//! answered others (`recorded_failures`, 502, `x-hxlab-replay: recorded-failure`). The counters are served at
//! `/replay-stats` as hxlab-contract's `ReplayCounts`; `?reset=1` also zeroes them and
//! starts every recorded sequence over, as `hxlab page --replay` does before each page load.

use crate::body::BodySpec;
use crate::reply::Reply;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue};
use http::StatusCode;
use hxlab_contract::{NearMiss, NearMissRule, ReplayCounts};
use hxlab_core::har::{Archive, MatchKind, RECORDED_FAILURE_STATUS};
use std::sync::Mutex;

/// URLs kept per list in the counters; the counts go on past it.
const MAX_LISTED: usize = 1000;

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
            let unanswered = |status, text: String, tag| {
                let mut r = Reply::text(status, text);
                r.headers
                    .push((REPLAY_HEADER, HeaderValue::from_static(tag)));
                r
            };
            if let Some(f) = self.archive.failure_of(method, scheme, host, path, query) {
                c.tally.recorded_failures += 1;
                let status = StatusCode::from_u16(RECORDED_FAILURE_STATUS)
                    .unwrap_or(StatusCode::BAD_GATEWAY);
                let text = format!(
                    "failed in the recording ({}): {method} {}\n",
                    f.error,
                    asked()
                );
                return unanswered(status, text, "recorded-failure");
            }
            if hxlab_core::har::is_browser_own(method, path, query)
                || self.archive.is_declared_icon(method, host, path, query)
            {
                c.tally.browser_own += 1;
                let text = format!(
                    "the browser's own request, not in the replayed archive: {method} {}\n",
                    asked()
                );
                return unanswered(StatusCode::NOT_FOUND, text, "browser-own");
            }
            if !self.archive.knows_host(host) {
                c.tally.outside += 1;
                if c.outside_urls.len() < MAX_LISTED {
                    c.outside_urls.push(format!("{method} {}", asked()));
                }
                let text = format!(
                    "outside the recording (it holds no request to {host}): {method} {}\n",
                    asked()
                );
                return unanswered(StatusCode::NOT_FOUND, text, "outside");
            }
            c.tally.misses += 1;
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
                c.tally.hits += 1;
                "hit"
            }
            MatchKind::NearQuery | MatchKind::NearHost => {
                c.tally.near_misses += 1;
                if c.near_miss_urls.len() < MAX_LISTED {
                    c.near_miss_urls.push(NearMiss {
                        url: asked(),
                        served: rec.url.clone(),
                        rule: if kind == MatchKind::NearQuery {
                            NearMissRule::Query
                        } else {
                            NearMissRule::Host
                        },
                    });
                }
                "near-miss"
            }
        };
        if rec.body_missing {
            c.tally.served_without_body += 1;
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

/// `x-hxlab-replay: hit | near-miss | miss | browser-own | outside | recorded-failure` on
/// every replayed answer.
pub(crate) const REPLAY_HEADER: HeaderName = HeaderName::from_static("x-hxlab-replay");
