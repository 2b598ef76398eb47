//! A page load as a waterfall: one row per resource in request order, each with the phases
//! the browser went through (queued, DNS, connect, TLS, request, waiting for the first byte,
//! download) in ms since the navigation started, and the page's milestones (TTFB, first
//! contentful paint, DOMContentLoaded, load) as marks. The browser crate fills it, the report
//! crate draws it; neither needs the other.

use serde::{Deserialize, Serialize};

/// A stretch of time, ms since the navigation started.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Span {
    /// Where it begins, ms.
    pub start_ms: f64,
    /// Where it ends, ms (not before `start_ms`).
    pub end_ms: f64,
}

impl Span {
    /// A span from `start_ms` to `end_ms`; `None` unless both are finite and
    /// `0 <= start_ms <= end_ms` (anything else is a measurement the browser did not make).
    pub fn new(start_ms: f64, end_ms: f64) -> Option<Span> {
        (start_ms.is_finite() && end_ms.is_finite() && start_ms >= 0.0 && start_ms <= end_ms)
            .then_some(Span { start_ms, end_ms })
    }

    /// Its length, ms.
    pub fn len_ms(&self) -> f64 {
        self.end_ms - self.start_ms
    }
}

/// One phase of loading a resource, in the order they happen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// From the request being issued until the browser starts on it (DNS, connecting or
    /// sending): waiting for a connection or a slot, Chromium's "queueing" and "stalled".
    Queued,
    /// Resolving the host name.
    Dns,
    /// Setting up the transport (TCP handshake, or QUIC's before its TLS part), TLS excluded.
    Connect,
    /// The TLS handshake.
    Tls,
    /// Sending the request.
    Request,
    /// Request sent until the response headers arrived (time to first byte).
    Wait,
    /// Response headers until the last byte of the body.
    Download,
}

impl Phase {
    /// Every phase, in the order they happen.
    pub const ALL: [Phase; 7] = [
        Phase::Queued,
        Phase::Dns,
        Phase::Connect,
        Phase::Tls,
        Phase::Request,
        Phase::Wait,
        Phase::Download,
    ];

    /// The name a legend shows.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Queued => "queued",
            Phase::Dns => "DNS",
            Phase::Connect => "connect",
            Phase::Tls => "TLS",
            Phase::Request => "request",
            Phase::Wait => "TTFB (wait)",
            Phase::Download => "download",
        }
    }
}

/// The phases of one resource; a phase that did not happen (a reused connection has no
/// connect) is `None`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Phases {
    /// See [`Phase::Queued`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued: Option<Span>,
    /// See [`Phase::Dns`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<Span>,
    /// See [`Phase::Connect`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect: Option<Span>,
    /// See [`Phase::Tls`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Span>,
    /// See [`Phase::Request`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Span>,
    /// See [`Phase::Wait`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<Span>,
    /// See [`Phase::Download`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download: Option<Span>,
}

impl Phases {
    /// The span of one phase.
    pub fn get(&self, phase: Phase) -> Option<Span> {
        match phase {
            Phase::Queued => self.queued,
            Phase::Dns => self.dns,
            Phase::Connect => self.connect,
            Phase::Tls => self.tls,
            Phase::Request => self.request,
            Phase::Wait => self.wait,
            Phase::Download => self.download,
        }
    }

    /// The phases that happened, in order.
    pub fn present(&self) -> impl Iterator<Item = (Phase, Span)> + '_ {
        Phase::ALL
            .into_iter()
            .filter_map(|p| self.get(p).map(|s| (p, s)))
    }

    /// True when no phase is known (e.g. a request that failed before any response).
    pub fn is_empty(&self) -> bool {
        self.present().next().is_none()
    }
}

/// One resource of a waterfall.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WaterfallRow {
    /// What the row is called: the URL's path and query, shortened (see [`short_label`]).
    pub label: String,
    /// The full request URL.
    pub url: String,
    /// The browser's resource type ("Document", "Script", "Image", …).
    pub resource_type: String,
    /// The protocol the browser reports ("http/1.1", "h2", "h3"); empty when there was no
    /// response.
    pub protocol: String,
    /// The browser's connection id (0: none).
    pub connection_id: u64,
    /// The response came over a connection used before.
    pub connection_reused: bool,
    /// HTTP status (0: no response).
    pub status: u16,
    /// When the request was issued, ms since the navigation started.
    pub start_ms: f64,
    /// When it finished or failed, ms since the navigation started (`None`: never).
    pub end_ms: Option<f64>,
    /// Its phases.
    pub phases: Phases,
    /// Bytes received for it on the wire.
    pub bytes: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The browser's priority for it (Chromium: VeryHigh … VeryLow); empty if unknown.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub priority: String,
    /// The `priority` request header (RFC 9218) it sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_header: Option<String>,
    /// How long it waited for its first byte while other responses on its connection were
    /// arriving, ms ([`with_starvation`]): the time the server spent on others first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub starved_ms: Option<f64>,
}

/// `rows` with each one's [`WaterfallRow::starved_ms`]: the part of its wait for the first
/// byte (request sent → response headers) during which another response on the same
/// connection was downloading. On HTTP/1.1 a connection carries one response at a time, so
/// that is 0 there; on HTTP/2 and HTTP/3 it is what the server's scheduling made it wait.
pub fn with_starvation(mut rows: Vec<WaterfallRow>) -> Vec<WaterfallRow> {
    let downloads: Vec<(usize, u64, Span)> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r.connection_id != 0)
        .filter_map(|(i, r)| r.phases.download.map(|d| (i, r.connection_id, d)))
        .collect();
    for (i, r) in rows.iter_mut().enumerate() {
        let (Some(wait), true) = (r.phases.wait, r.connection_id != 0) else {
            continue;
        };
        // Others' downloads on this connection, clipped to the wait, merged.
        let mut parts: Vec<(f64, f64)> = downloads
            .iter()
            .filter(|(j, c, _)| *j != i && *c == r.connection_id)
            .map(|(_, _, d)| (d.start_ms.max(wait.start_ms), d.end_ms.min(wait.end_ms)))
            .filter(|(a, b)| b > a)
            .collect();
        parts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut total = 0.0;
        let mut cur: Option<(f64, f64)> = None;
        for (a, b) in parts {
            cur = match cur {
                Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
                Some((ca, cb)) => {
                    total += cb - ca;
                    Some((a, b))
                }
                None => Some((a, b)),
            };
        }
        if let Some((a, b)) = cur {
            total += b - a;
        }
        r.starved_ms = Some((total * 1000.0).round() / 1000.0);
    }
    rows
}

impl WaterfallRow {
    /// True when the resource failed (a network error or a 4xx/5xx status).
    pub fn failed(&self) -> bool {
        self.error.is_some() || self.status >= 400
    }

    /// The latest time the row reaches, ms.
    pub fn last_ms(&self) -> f64 {
        let phases = self.phases.present().map(|(_, s)| s.end_ms);
        phases
            .chain(self.end_ms)
            .fold(self.start_ms.max(0.0), f64::max)
    }
}

/// A page milestone drawn across the rows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Mark {
    /// Short name: "TTFB", "FCP", "LCP", "DCL", "load".
    pub name: String,
    /// When it happened, ms since the navigation started.
    pub at_ms: f64,
}

/// One page load as a waterfall.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Waterfall {
    /// The page.
    pub url: String,
    /// One row per resource, in request order.
    pub rows: Vec<WaterfallRow>,
    /// The page's milestones, in the order TTFB, FCP, LCP, DCL, load (those that are known).
    pub marks: Vec<Mark>,
}

impl Waterfall {
    /// The latest time any row or mark reaches, ms (0 for an empty waterfall).
    pub fn end_ms(&self) -> f64 {
        let rows = self.rows.iter().map(WaterfallRow::last_ms);
        let marks = self.marks.iter().map(|m| m.at_ms);
        rows.chain(marks)
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max)
    }

    /// The time of the mark called `name`, if there is one.
    pub fn mark(&self, name: &str) -> Option<f64> {
        self.marks.iter().find(|m| m.name == name).map(|m| m.at_ms)
    }
}

/// A URL shortened for a row label: its path and query (the origin is the page's), cut to
/// at most `max` characters with an ellipsis in the middle.
pub fn short_label(url: &str, max: usize) -> String {
    let after_scheme = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    let path = match after_scheme.find('/') {
        Some(i) => &after_scheme[i..],
        None => "/",
    };
    let chars: Vec<char> = path.chars().collect();
    if chars.len() <= max || max < 5 {
        return path.to_string();
    }
    let head = (max - 1) / 2;
    let tail = max - 1 - head;
    let mut s: String = chars[..head].iter().collect();
    s.push('…');
    s.extend(&chars[chars.len() - tail..]);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starvation_is_the_wait_overlapped_by_others_downloads_on_the_connection() {
        let row = |conn: u64, wait: (f64, f64), download: (f64, f64)| WaterfallRow {
            connection_id: conn,
            phases: Phases {
                wait: Span::new(wait.0, wait.1),
                download: Span::new(download.0, download.1),
                ..Default::default()
            },
            ..Default::default()
        };
        let rows = with_starvation(vec![
            // The bulk: downloads from 10 to 100.
            row(1, (0.0, 10.0), (10.0, 100.0)),
            // Waits 20..60 while the bulk downloads: 40 ms starved.
            row(1, (20.0, 60.0), (60.0, 70.0)),
            // Another connection: nothing of the bulk counts.
            row(2, (20.0, 60.0), (60.0, 61.0)),
            // Overlapping others merge: 50..80 overlaps the bulk and row 1's 60..70.
            row(1, (50.0, 80.0), (80.0, 90.0)),
        ]);
        let got: Vec<Option<f64>> = rows.iter().map(|r| r.starved_ms).collect();
        assert_eq!(got, vec![Some(0.0), Some(40.0), Some(0.0), Some(30.0)]);
    }

    #[test]
    fn spans_refuse_what_the_browser_did_not_measure() {
        assert!(Span::new(1.0, 2.0).is_some());
        assert!(Span::new(2.0, 2.0).is_some());
        assert!(Span::new(2.0, 1.0).is_none());
        assert!(Span::new(-1.0, 2.0).is_none());
        assert!(Span::new(f64::NAN, 2.0).is_none());
    }

    #[test]
    fn labels_keep_the_path_and_cut_the_middle() {
        assert_eq!(short_label("https://h:8443/a/b.js?x=1", 40), "/a/b.js?x=1");
        assert_eq!(short_label("https://h", 40), "/");
        let long = format!("https://h/{}", "x".repeat(100));
        let l = short_label(&long, 21);
        assert_eq!(l.chars().count(), 21);
        assert!(l.starts_with("/xxxx") && l.contains('…'));
    }

    #[test]
    fn end_covers_rows_and_marks_and_old_json_reads() {
        let mut w = Waterfall::default();
        assert_eq!(w.end_ms(), 0.0);
        w.rows.push(WaterfallRow {
            start_ms: 3.0,
            phases: Phases {
                download: Span::new(5.0, 40.0),
                ..Phases::default()
            },
            ..WaterfallRow::default()
        });
        w.marks.push(Mark {
            name: "load".into(),
            at_ms: 55.0,
        });
        assert_eq!(w.end_ms(), 55.0);
        assert_eq!(w.rows[0].last_ms(), 40.0);
        let p: Phases = serde_json::from_str("{}").unwrap();
        assert!(p.is_empty());
        let json = serde_json::to_string(&w).unwrap();
        assert_eq!(serde_json::from_str::<Waterfall>(&json).unwrap(), w);
    }
}
