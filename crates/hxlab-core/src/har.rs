//! HAR 1.2 archives for replay: reading one (hxlab's own `hxlab page --record` and Chrome
//! DevTools' "Save all as HAR with content") into recorded responses, and matching a request
//! against them, and where a recording's replay starts ([`RecordedStart`], checked by the
//! lab and by `hxlab page` alike). Pure logic: `hxlab serve --replay` does the serving,
//! `hxlab page --replay` the mapping of hostnames.
//!
//! Matching, in order (docs/page.md, "Record and replay"):
//! 1. exact: method, scheme, host (no port, lower case), path and query string as sent;
//! 2. near miss, query: same method, scheme, host and path; the recorded query sharing the most
//!    `key=value` pairs, then the most keys, then the first recorded;
//! 3. near miss, host: same method and path on any other recorded host (or scheme), chosen
//!    the same way (a host the recording never saw is outside it, never a near miss);
//! 4. otherwise a miss.
//!
//! A URL recorded more than once is answered in recorded order, then the last one repeats.

use base64::Engine;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Largest HAR file read (bodies are base64 inside it, so a page of ~380 MiB of bodies).
pub const MAX_HAR_BYTES: u64 = 512 * 1024 * 1024;

/// Response headers never replayed: hop-by-hop and connection-specific ones (forbidden on
/// h2/h3), the ones the server computes itself (`content-length`, `date`, `alt-svc`), the
/// coding of a body that is stored decoded (`content-encoding`), and `strict-transport-
/// security`, which would pin the recorded hosts in the browser.
pub const DROPPED_HEADERS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "content-length",
    "content-encoding",
    "date",
    "alt-svc",
    "strict-transport-security",
];

/// Why a HAR file cannot be replayed; the text is one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HarError(pub String);

/// One recorded response.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request method, upper case.
    pub method: String,
    /// The full URL recorded.
    pub url: String,
    /// HTTP status.
    pub status: u16,
    /// Response headers to replay (names lower case, [`DROPPED_HEADERS`] removed), in order.
    pub headers: Vec<(String, String)>,
    /// The body, decoded (base64 undone; content coding was never applied).
    pub body: Vec<u8>,
    /// The HAR had no body for a response that had one.
    pub body_missing: bool,
}

/// How a recorded request failed, as far as replay can reproduce it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FailureKind {
    /// The name did not resolve (`net::ERR_NAME_NOT_RESOLVED`): replay makes it not
    /// resolve (`--host-resolver-rules`' `~NOTFOUND`).
    NameNotResolved,
    /// No connection (refused, reset, timed out, unreachable, closed): replay sends the
    /// host to a port that refuses.
    Unreachable,
    /// Anything else (aborted by the page, blocked, not said).
    Other,
}

impl FailureKind {
    /// The kind of a browser's error text (`net::ERR_…`; empty: not said).
    pub fn of(error: &str) -> FailureKind {
        let e = error.to_ascii_uppercase();
        if e.contains("NAME_NOT_RESOLVED") || e.contains("NAME_RESOLUTION_FAILED") {
            FailureKind::NameNotResolved
        } else if [
            "CONNECTION_REFUSED",
            "CONNECTION_RESET",
            "CONNECTION_CLOSED",
            "CONNECTION_FAILED",
            "CONNECTION_TIMED_OUT",
            "TIMED_OUT",
            "ADDRESS_UNREACHABLE",
            "EMPTY_RESPONSE",
            "QUIC_PROTOCOL_ERROR",
        ]
        .iter()
        .any(|k| e.contains(k))
        {
            FailureKind::Unreachable
        } else {
            FailureKind::Other
        }
    }
}

/// A request the recording holds as failed: status 0, with the browser's error in
/// `_error` (on the response, as Chrome DevTools writes it, or on the entry).
#[derive(Debug, Clone)]
pub struct RecordedFailure {
    /// Request method, upper case.
    pub method: String,
    /// The full URL recorded.
    pub url: String,
    /// Where it went.
    pub parts: UrlParts,
    /// The browser's error (empty: the HAR does not say).
    pub error: String,
    /// What replay makes of it.
    pub kind: FailureKind,
}

/// One origin of the archive: `https://a.test:8443` is ("https", "a.test", 8443).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HarOrigin {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name (lower case; an IPv6 address without brackets).
    pub host: String,
    /// Port, explicit or the scheme's default.
    pub port: u16,
}

/// The parts of a URL matching looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlParts {
    /// The origin.
    pub origin: HarOrigin,
    /// Path, starting with `/`.
    pub path: String,
    /// Query string without `?` (empty: none).
    pub query: String,
}

/// Splits an http(s) URL (fragment dropped); `None` for anything else.
///
/// Lenient on purpose, and so not `http::Uri` (which the load client and `compare --url` use
/// for what a person types): a recording holds URLs as the recorder wrote them, and
/// `http::Uri` refuses some that real pages request (a raw `"` or `{` in a query, a space),
/// so replay would lose those entries; here only the scheme, authority and port must make
/// sense, and the path and query are kept byte for byte to match the browser's requests.
pub fn split_url(url: &str) -> Option<UrlParts> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let rest = rest.split('#').next().unwrap_or("");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = authority.rsplit('@').next().unwrap_or("");
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, after) = v6.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => p.parse().ok()?,
            None => default_port,
        };
        (h.to_string(), port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p.parse().ok()?),
            None => (authority.to_string(), default_port),
        }
    };
    if host.is_empty() {
        return None;
    }
    let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
    let path = if path.is_empty() { "/" } else { path };
    Some(UrlParts {
        origin: HarOrigin {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
        },
        path: path.to_string(),
        query: query.to_string(),
    })
}

/// Whether a request is one the browser makes on its own, never seen by a recording of the
/// page's network traffic: `GET /favicon.ico` without a query.
pub fn is_browser_own(method: &str, path: &str, query: &str) -> bool {
    method.eq_ignore_ascii_case("GET") && path == "/favicon.ico" && query.is_empty()
}

/// Most recorded redirects followed from the page URL (Chromium's own limit is 20).
pub const MAX_REDIRECTS: usize = 20;

/// A `location` resolved against the URL that answered with it: absolute http(s) URLs as
/// they are, `//host/path`, `/path` and relative paths against `base`.
pub fn resolve(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    if split_url(location).is_some() {
        return Some(location.to_string());
    }
    let b = split_url(base)?;
    let default_port = if b.origin.scheme == "https" { 443 } else { 80 };
    let host = if b.origin.host.contains(':') {
        format!("[{}]", b.origin.host)
    } else {
        b.origin.host.clone()
    };
    let authority = if b.origin.port == default_port {
        host
    } else {
        format!("{host}:{}", b.origin.port)
    };
    if let Some(rest) = location.strip_prefix("//") {
        return Some(format!("{}://{rest}", b.origin.scheme));
    }
    if location.starts_with('/') {
        return Some(format!("{}://{authority}{location}", b.origin.scheme));
    }
    if location.is_empty() || location.contains("://") {
        return None;
    }
    let dir = match b.path.rfind('/') {
        Some(i) => &b.path[..=i],
        None => "/",
    };
    Some(format!("{}://{authority}{dir}{location}", b.origin.scheme))
}

/// What a replay answered, counted: the counters `/replay-stats` serves (inside
/// `hxlab_contract::ReplayCounts`) and the lab keeps per record (inside [`ReplayOutcome`]),
/// defined once here because both the contract and the report (which does not depend on
/// the contract) carry them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplayTally {
    /// Requests answered by an exact match.
    pub hits: u64,
    /// Requests answered by a fallback rule (another query, or the path on another host).
    pub near_misses: u64,
    /// Requests with nothing in the archive (answered 404).
    pub misses: u64,
    /// Requests the browser makes on its own (`/favicon.ico`) that the recording did not
    /// hold: answered 404 and counted here, not as misses.
    #[serde(default)]
    pub browser_own: u64,
    /// Answers whose recorded body the HAR lacks (served with an empty body).
    #[serde(default)]
    pub served_without_body: u64,
    /// Requests of the page to hosts the recording never saw (a third party it reached this
    /// time only): the browser is told their names do not resolve, so they fail at once (one
    /// that reaches the replay server anyway is answered 404); counted here, not as misses
    /// of the archive.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub outside: u64,
    /// Requests the recording holds as failed (`_error`) on a host that otherwise answered:
    /// answered with an error status ([`RECORDED_FAILURE_STATUS`]), not as misses.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recorded_failures: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The status a replay answers a recorded failure with when the failure cannot be
/// reproduced on the way to the replay server (an aborted or reset request on a host that
/// answered other requests): 502, an error the browser reports at once.
pub const RECORDED_FAILURE_STATUS: u16 = 502;

impl ReplayTally {
    /// Adds another tally's counts to this one.
    pub fn add(&mut self, other: &ReplayTally) {
        self.hits += other.hits;
        self.near_misses += other.near_misses;
        self.misses += other.misses;
        self.browser_own += other.browser_own;
        self.served_without_body += other.served_without_body;
        self.outside += other.outside;
        self.recorded_failures += other.recorded_failures;
    }
}

/// What one page load's replay answered, as the lab stores it per record: the counts and
/// the first miss (built from the replay server's counts by
/// `hxlab_contract::ReplayCounts::outcome`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplayOutcome {
    /// The counts (flattened: the record's JSON keeps them at this level).
    #[serde(flatten)]
    pub tally: ReplayTally,
    /// The first missed request, `METHOD URL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_miss: Option<String>,
}

/// How a request found its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// Same method, host, path and query.
    Exact,
    /// Same method, host and path; another query.
    NearQuery,
    /// Same method and path on another host.
    NearHost,
}

/// What a group is keyed by: method (upper case), origin (see `origin_key`), path and query.
type GroupKey = (String, String, String, String);

/// Responses recorded under one (method, host, path, query).
#[derive(Debug)]
struct Group {
    method: String,
    host: String,
    path: String,
    query: String,
    /// Indices into `entries`, in recorded order.
    entries: Vec<usize>,
    /// Requests answered from this group so far.
    served: AtomicUsize,
}

/// A HAR archive ready to answer requests.
#[derive(Debug)]
pub struct Archive {
    /// Every recorded response, in recorded order.
    pub entries: Vec<Recorded>,
    /// The page to load: `log.pages[0].title` when it is a URL, else the first entry's URL.
    pub page_url: String,
    /// Every origin requests went to, in first-seen order.
    pub origins: Vec<HarOrigin>,
    /// Entries that got no response in the recording (status 0): as many as `failures`.
    pub unanswered: usize,
    /// The requests the recording holds as failed, in recorded order.
    pub failures: Vec<RecordedFailure>,
    /// The icons the recorded pages declare (`<link rel="icon" href>` and its kin, resolved
    /// against the page): the browser fetches them on its own, so a recording of the page's
    /// traffic may lack them. Host, path and query.
    pub icons: Vec<(String, String, String)>,
    /// Entries skipped because no server answers their scheme (`data:`, `ws:`, `blob:`, …):
    /// count per scheme, e.g. `"data:" → 2`.
    pub unreplayable: BTreeMap<String, usize>,
    groups: Vec<Group>,
    exact: HashMap<GroupKey, usize>,
}

#[derive(Deserialize)]
struct HarFile {
    log: HarLog,
}

#[derive(Deserialize)]
struct HarLog {
    version: String,
    #[serde(default)]
    pages: Vec<HarPage>,
    entries: Vec<HarEntry>,
}

#[derive(Deserialize)]
struct HarPage {
    #[serde(default)]
    title: String,
}

#[derive(Deserialize)]
struct HarEntry {
    request: HarRequest,
    response: HarResponse,
    #[serde(default, rename = "_error")]
    error: Option<String>,
}

#[derive(Deserialize)]
struct HarRequest {
    method: String,
    url: String,
}

#[derive(Deserialize)]
struct HarResponse {
    status: i64,
    #[serde(default)]
    headers: Vec<HarHeader>,
    #[serde(default)]
    content: HarContent,
    #[serde(default, rename = "_error")]
    error: Option<String>,
}

#[derive(Deserialize)]
struct HarHeader {
    name: String,
    value: String,
}

#[derive(Deserialize, Default)]
struct HarContent {
    #[serde(default)]
    size: i64,
    #[serde(default, rename = "mimeType")]
    mime_type: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    encoding: Option<String>,
}

impl Archive {
    /// Reads a HAR file of at most [`MAX_HAR_BYTES`].
    pub fn read(path: &Path) -> Result<Archive, HarError> {
        let what = path.display();
        let meta = std::fs::metadata(path).map_err(|e| HarError(format!("{what}: {e}")))?;
        // A regular file's size is known before reading a byte of it.
        if meta.is_file() && meta.len() > MAX_HAR_BYTES {
            return Err(HarError(format!(
                "{what}: {} is over the HAR size limit of 512 MiB",
                crate::units::format_bytes(meta.len())
            )));
        }
        // Parsed as it is read, so what is not JSON (`/dev/zero`) is refused at its first byte
        // instead of after 512 MiB read into memory; a device or pipe is cut at the limit.
        let file = std::fs::File::open(path).map_err(|e| HarError(format!("{what}: {e}")))?;
        let reader = std::io::BufReader::new(std::io::Read::take(file, MAX_HAR_BYTES));
        let har = serde_json::from_reader(reader).map_err(|e| {
            HarError(format!(
                "{what}: not a HAR file of at most 512 MiB (HAR is JSON with log.entries): {e}"
            ))
        })?;
        Archive::from_har(har).map_err(|e| HarError(format!("{what}: {e}")))
    }

    /// Parses HAR 1.1/1.2 JSON.
    pub fn parse(bytes: &[u8]) -> Result<Archive, HarError> {
        let har: HarFile = serde_json::from_slice(bytes).map_err(|e| {
            HarError(format!(
                "not a HAR file (HAR is JSON with log.entries): {e}"
            ))
        })?;
        Archive::from_har(har)
    }

    fn from_har(har: HarFile) -> Result<Archive, HarError> {
        let log = har.log;
        if log.version != "1.2" && log.version != "1.1" {
            return Err(HarError(format!(
                "HAR version {:?} is not supported (use HAR 1.2)",
                log.version
            )));
        }
        let mut archive = Archive {
            entries: Vec::new(),
            page_url: String::new(),
            origins: Vec::new(),
            unanswered: 0,
            failures: Vec::new(),
            icons: Vec::new(),
            unreplayable: BTreeMap::new(),
            groups: Vec::new(),
            exact: HashMap::new(),
        };
        for (i, e) in log.entries.into_iter().enumerate() {
            archive.add(i, e)?;
        }
        if archive.entries.is_empty() {
            return Err(HarError(
                "the HAR has no entry with a response to replay".into(),
            ));
        }
        archive.page_url = log
            .pages
            .first()
            .map(|p| p.title.clone())
            .filter(|t| split_url(t).is_some())
            .unwrap_or_else(|| archive.entries[0].url.clone());
        Ok(archive)
    }

    fn add(&mut self, i: usize, e: HarEntry) -> Result<(), HarError> {
        let url = e.request.url;
        let Some(parts) = split_url(&url) else {
            // data:, blob:, ws:, chrome-extension: … never reach a server over HTTP.
            let scheme = match url.split_once(':') {
                Some((s, _)) if !s.is_empty() && s.len() <= 32 => {
                    format!("{}:", s.to_ascii_lowercase())
                }
                _ => "(no scheme)".to_string(),
            };
            *self.unreplayable.entry(scheme).or_default() += 1;
            return Ok(());
        };
        if e.response.status <= 0 {
            self.unanswered += 1;
            let error = e.response.error.or(e.error).unwrap_or_default();
            self.failures.push(RecordedFailure {
                method: e.request.method.to_ascii_uppercase(),
                url,
                kind: FailureKind::of(&error),
                error,
                parts,
            });
            return Ok(());
        }
        let status = u16::try_from(e.response.status)
            .ok()
            .filter(|s| (100..=999).contains(s))
            .ok_or_else(|| {
                HarError(format!(
                    "entry {i}: status {} is not an HTTP status",
                    e.response.status
                ))
            })?;
        let c = e.response.content;
        let (body, body_missing) = match (&c.text, c.encoding.as_deref()) {
            (Some(t), Some(enc)) if enc.eq_ignore_ascii_case("base64") => {
                let b = base64::engine::general_purpose::STANDARD
                    .decode(t.trim())
                    .map_err(|err| {
                        HarError(format!("entry {i} ({url}): bad base64 body: {err}"))
                    })?;
                (b, false)
            }
            (Some(t), _) => (t.as_bytes().to_vec(), false),
            (None, _) => {
                let has_body = !matches!(status, 100..=199 | 204 | 300..=399);
                (Vec::new(), has_body && c.size > 0)
            }
        };
        let mut headers: Vec<(String, String)> = e
            .response
            .headers
            .into_iter()
            .map(|h| (h.name.to_ascii_lowercase(), h.value))
            .filter(|(n, _)| !n.starts_with(':') && !DROPPED_HEADERS.contains(&n.as_str()))
            .collect();
        if !headers.iter().any(|(n, _)| n == "content-type") {
            if let Some(m) = c.mime_type.filter(|m| !m.is_empty() && m != "x-unknown") {
                headers.push(("content-type".into(), m));
            }
        }
        if !self.origins.contains(&parts.origin) {
            self.origins.push(parts.origin.clone());
        }
        let method = e.request.method.to_ascii_uppercase();
        let origin = origin_key(&parts.origin.scheme, &parts.origin.host);
        let key = (
            method.clone(),
            origin.clone(),
            parts.path.clone(),
            parts.query.clone(),
        );
        if is_html(&headers) {
            for href in icon_hrefs(&String::from_utf8_lossy(&body)) {
                if let Some(u) = resolve(&url, &href).as_deref().and_then(split_url) {
                    self.icons.push((u.origin.host, u.path, u.query));
                }
            }
        }
        let index = self.entries.len();
        self.entries.push(Recorded {
            method: method.clone(),
            url,
            status,
            headers,
            body,
            body_missing,
        });
        let group = *self.exact.entry(key).or_insert_with(|| {
            self.groups.push(Group {
                method,
                host: origin,
                path: parts.path,
                query: parts.query,
                entries: Vec::new(),
                served: AtomicUsize::new(0),
            });
            self.groups.len() - 1
        });
        self.groups[group].entries.push(index);
        Ok(())
    }

    /// What was left out of the archive, as one line: `skipped 5 entries: 2 data:, 2 ws:,
    /// 1 blob:` (None when nothing was). Failed requests are not left out: replay answers
    /// them as they failed ([`Archive::failures_text`]).
    pub fn skipped_text(&self) -> Option<String> {
        let mut kinds: Vec<(usize, String)> = self
            .unreplayable
            .iter()
            .map(|(k, n)| (*n, k.clone()))
            .collect();
        // Most first; among equals the scheme's name.
        kinds.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let total: usize = kinds.iter().map(|k| k.0).sum();
        (total > 0).then(|| {
            format!(
                "skipped {total} entr{}: {}",
                if total == 1 { "y" } else { "ies" },
                kinds
                    .iter()
                    .map(|(n, k)| format!("{n} {k}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }

    /// The recorded failures as one line: `2 recorded failures, replayed as they failed: GET
    /// https://api.example/x (net::ERR_NAME_NOT_RESOLVED), …` (None without any).
    pub fn failures_text(&self) -> Option<String> {
        let first = self.failures.first()?;
        let n = self.failures.len();
        let error = if first.error.is_empty() {
            "no error recorded"
        } else {
            &first.error
        };
        Some(format!(
            "{n} recorded failure{}, replayed as {} failed (first: {} {} {error})",
            if n == 1 { "" } else { "s" },
            if n == 1 { "it" } else { "they" },
            first.method,
            first.url
        ))
    }

    /// Origins with no recorded answer whose requests failed to connect, with how:
    /// replay makes them fail the same way (the names that did not resolve do not resolve,
    /// the rest are refused). In first-failed order, each once.
    pub fn failed_origins(&self) -> Vec<(HarOrigin, FailureKind)> {
        let mut out: Vec<(HarOrigin, FailureKind)> = Vec::new();
        for f in &self.failures {
            if f.kind == FailureKind::Other
                || self.origins.contains(&f.parts.origin)
                || out.iter().any(|(o, _)| *o == f.parts.origin)
            {
                continue;
            }
            out.push((f.parts.origin.clone(), f.kind));
        }
        out
    }

    /// The recorded failure of a request no answer matched, if the recording holds one
    /// (method, scheme, host, path and query as sent).
    pub fn failure_of(
        &self,
        method: &str,
        scheme: &str,
        host: &str,
        path: &str,
        query: &str,
    ) -> Option<&RecordedFailure> {
        self.failures.iter().find(|f| {
            f.method.eq_ignore_ascii_case(method)
                && f.parts.origin.scheme.eq_ignore_ascii_case(scheme)
                && f.parts.origin.host.eq_ignore_ascii_case(host)
                && f.parts.path == path
                && f.parts.query == query
        })
    }

    /// Whether a GET is for an icon a recorded page declares.
    pub fn is_declared_icon(&self, method: &str, host: &str, path: &str, query: &str) -> bool {
        method.eq_ignore_ascii_case("GET")
            && self
                .icons
                .iter()
                .any(|(h, p, q)| h.eq_ignore_ascii_case(host) && p == path && q == query)
    }

    /// Whether the recording holds any request to `host`, answered or failed.
    pub fn knows_host(&self, host: &str) -> bool {
        self.origins
            .iter()
            .map(|o| &o.host)
            .chain(self.failures.iter().map(|f| &f.parts.origin.host))
            .any(|h| h.eq_ignore_ascii_case(host))
    }

    /// The page URL and every URL the recording redirected it to, in order: a recorded
    /// 3xx answer to a GET of the last URL, with a `location`, adds its target (resolved
    /// against that URL). At most [`MAX_REDIRECTS`] hops; a loop ends the chain.
    pub fn redirect_chain(&self) -> Vec<String> {
        let mut chain = vec![self.page_url.clone()];
        for _ in 0..MAX_REDIRECTS {
            let Some(last) = chain.last() else { break };
            let Some(parts) = split_url(last) else { break };
            let found = self.exact.get(&(
                "GET".to_string(),
                origin_key(&parts.origin.scheme, &parts.origin.host),
                parts.path.clone(),
                parts.query.clone(),
            ));
            let Some(rec) = found.and_then(|&g| self.groups[g].entries.first()) else {
                break;
            };
            let rec = &self.entries[*rec];
            if !(300..=399).contains(&rec.status) {
                break;
            }
            let Some((_, location)) = rec.headers.iter().find(|(n, _)| n == "location") else {
                break;
            };
            let Some(next) = resolve(last, location) else {
                break;
            };
            if chain.contains(&next) {
                break;
            }
            chain.push(next);
        }
        chain
    }

    /// Where the page's recorded redirects end (the page URL when it was not redirected).
    pub fn final_url(&self) -> String {
        self.redirect_chain()
            .pop()
            .unwrap_or_else(|| self.page_url.clone())
    }

    /// URLs of the responses whose bodies the HAR lacks.
    pub fn bodies_missing(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| e.body_missing)
            .map(|e| e.url.as_str())
            .collect()
    }

    /// The recorded hosts, each once, in first-seen order.
    pub fn hosts(&self) -> Vec<&str> {
        let mut hosts: Vec<&str> = Vec::new();
        for o in &self.origins {
            if !hosts.contains(&o.host.as_str()) {
                hosts.push(&o.host);
            }
        }
        hosts
    }

    /// The response to a request and how it matched (see the module's matching rules);
    /// `None` is a miss. Each call advances the matched URL's position in its recorded
    /// sequence.
    pub fn answer(
        &self,
        method: &str,
        scheme: &str,
        host: &str,
        path: &str,
        query: &str,
    ) -> Option<(&Recorded, MatchKind)> {
        let key = (
            method.to_ascii_uppercase(),
            origin_key(scheme, host),
            path.to_string(),
            query.to_string(),
        );
        let (g, kind) = match self.exact.get(&key) {
            Some(&g) => (g, MatchKind::Exact),
            // A host the recording never saw is outside it: no other host's answer stands in.
            None if !self.knows_host(host) => return None,
            None => self.nearest(&key)?,
        };
        let group = &self.groups[g];
        let nth = group.served.fetch_add(1, Ordering::Relaxed);
        let entry = group.entries[nth.min(group.entries.len() - 1)];
        Some((&self.entries[entry], kind))
    }

    /// The group nearest a request no group matches exactly: same method and path, the
    /// closest query on the same host, else on another host.
    fn nearest(&self, (method, host, path, query): &GroupKey) -> Option<(usize, MatchKind)> {
        let wanted = query_pairs(query);
        let best = |same_host: bool| {
            self.groups
                .iter()
                .enumerate()
                .filter(|(_, g)| g.method == *method && g.path == *path)
                .filter(|(_, g)| (g.host == *host) == same_host)
                .map(|(i, g)| (query_score(&wanted, &query_pairs(&g.query)), i))
                // Highest score; among equals the first recorded (smallest index).
                .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
                .map(|(_, i)| i)
        };
        if let Some(g) = best(true) {
            return Some((g, MatchKind::NearQuery));
        }
        best(false).map(|g| (g, MatchKind::NearHost))
    }

    /// Starts every recorded sequence over (a new page load).
    pub fn rewind(&self) {
        for g in &self.groups {
            g.served.store(0, Ordering::Relaxed);
        }
    }
}

/// Whether recorded headers say HTML.
fn is_html(headers: &[(String, String)]) -> bool {
    headers
        .iter()
        .any(|(n, v)| n == "content-type" && v.to_ascii_lowercase().contains("text/html"))
}

/// The `href`s of a page's `<link>` elements whose `rel` names an icon (`icon`, `shortcut
/// icon`, `apple-touch-icon`, `mask-icon`), as written. A small scanner, not an HTML
/// parser: attributes quoted with `"` or `'` or not at all.
pub fn icon_hrefs(html: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = lower[at..].find("<link") {
        let start = at + i + 5;
        let end = lower[start..].find('>').map_or(lower.len(), |e| start + e);
        let tag = &html[start..end];
        let rel = attribute(tag, "rel")
            .unwrap_or_default()
            .to_ascii_lowercase();
        if rel.split_ascii_whitespace().any(|t| t.ends_with("icon")) {
            if let Some(href) = attribute(tag, "href").filter(|h| !h.is_empty()) {
                out.push(href.replace("&amp;", "&"));
            }
        }
        at = end;
    }
    out
}

/// One attribute's value in the inside of a tag (names compared without case).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name) {
        let at = from + i;
        from = at + name.len();
        let before_ok = at == 0 || lower.as_bytes()[at - 1].is_ascii_whitespace();
        let rest = lower[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let value_at = tag.len() - rest.len() + 1;
        let value = tag[value_at..].trim_start();
        return Some(match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or("").to_string(),
            _ => value
                .split(|c: char| c.is_ascii_whitespace())
                .next()
                .unwrap_or("")
                .to_string(),
        });
    }
    None
}

/// `scheme://host`, lower case: what a recorded response is kept under besides method,
/// path and query (an http:// redirect and the https:// page share host and path).
fn origin_key(scheme: &str, host: &str) -> String {
    format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase()
    )
}

fn query_pairs(query: &str) -> Vec<(&str, &str)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect()
}

/// (pairs in common, keys in common) of two queries.
fn query_score(a: &[(&str, &str)], b: &[(&str, &str)]) -> (usize, usize) {
    let pairs = a.iter().filter(|p| b.contains(p)).count();
    let keys = a
        .iter()
        .filter(|(k, _)| b.iter().any(|(bk, _)| bk == k))
        .count();
    (pairs, keys)
}

/// What a recording says about where its replay starts, kept once the archive is read (so
/// an experiment checks every protocol and writes its notes without reading the HAR again).
#[derive(Clone, Debug, PartialEq)]
pub struct RecordedStart {
    /// The page URL the recording starts at.
    pub page_url: String,
    /// Where the recorded redirects from it end (the page URL when it was not redirected).
    pub chain_end: String,
    /// Recorded responses and the origins they came from.
    pub entries: usize,
    /// Origins requests went to.
    pub origins: usize,
    /// What was left out of the archive ([`Archive::skipped_text`]).
    pub skipped: Option<String>,
}

impl RecordedStart {
    /// The start of `archive`.
    pub fn of(archive: &Archive) -> RecordedStart {
        RecordedStart {
            page_url: archive.page_url.clone(),
            chain_end: archive.final_url(),
            entries: archive.entries.len(),
            origins: archive.origins.len(),
            skipped: archive.skipped_text(),
        }
    }

    /// Whether the recording redirects its page URL elsewhere.
    pub fn redirected(&self) -> bool {
        self.chain_end != self.page_url
    }

    /// The URL a replayed page load over `proto` starts from: the recording's own start, for
    /// every protocol alike. A recording that starts at an http:// URL redirected to https
    /// (the usual 301) is loaded from that URL: the redirect is answered as recorded over
    /// plain HTTP/1.1, and the browser follows it to the https page, which loads over the
    /// protocol asked for (HTTP/3 included: QUIC is forced on every recorded https origin).
    /// So every protocol pays the same redirect, as a first visit does. HTTP/2 and HTTP/3
    /// need the chain to end at an https:// page.
    pub fn url_for(&self, proto: crate::Proto) -> Result<String, String> {
        let last = &self.chain_end;
        let secure = last
            .get(..8)
            .is_some_and(|p| p.eq_ignore_ascii_case("https://"));
        if matches!(proto, crate::Proto::H2 | crate::Proto::H3) && !secure {
            let via = if self.redirected() {
                format!(", and its recorded redirects end at {last}")
            } else {
                String::new()
            };
            return Err(format!(
                "{} needs an https:// page (browsers speak it over TLS only); the recording starts at {}{via}",
                proto.name(),
                self.page_url
            ));
        }
        Ok(self.page_url.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn har(entries: &str) -> Vec<u8> {
        format!(
            r#"{{"log":{{"version":"1.2","creator":{{"name":"t","version":"1"}},
            "pages":[{{"id":"p","title":"https://a.test/"}}],"entries":[{entries}]}}}}"#
        )
        .into_bytes()
    }

    fn entry(url: &str, status: u16, text: &str) -> String {
        format!(
            r#"{{"request":{{"method":"GET","url":"{url}"}},"response":{{"status":{status},
            "headers":[{{"name":"Content-Type","value":"text/plain"}},
            {{"name":"Content-Encoding","value":"gzip"}},{{"name":":status","value":"200"}}],
            "content":{{"size":{},"text":"{text}"}}}}}}"#,
            text.len()
        )
    }

    fn redirect(url: &str, status: u16, location: &str) -> String {
        format!(
            r#"{{"request":{{"method":"GET","url":"{url}"}},"response":{{"status":{status},
            "headers":[{{"name":"Location","value":"{location}"}}],"content":{{"size":0}}}}}}"#
        )
    }

    #[test]
    fn follows_recorded_redirects_and_names_what_it_skipped() {
        let bytes = format!(
            r#"{{"log":{{"version":"1.2","pages":[{{"title":"http://a.test/"}}],"entries":[{}]}}}}"#,
            [
                redirect("http://a.test/", 301, "https://a.test/"),
                redirect("https://a.test/", 302, "/docs/"),
                redirect("https://a.test/docs/", 302, "index.html"),
                entry("https://a.test/docs/index.html", 200, "page"),
                entry("data:image/png;base64,AAAA", 200, ""),
                entry("data:text/plain,x", 200, ""),
                entry("wss://a.test/live", 101, ""),
                entry("blob:https://a.test/1234", 200, ""),
                entry("https://a.test/gone", 0, ""),
            ]
            .join(",")
        );
        let a = Archive::parse(bytes.as_bytes()).unwrap();
        assert_eq!(
            a.redirect_chain(),
            vec![
                "http://a.test/",
                "https://a.test/",
                "https://a.test/docs/",
                "https://a.test/docs/index.html"
            ]
        );
        assert_eq!(a.final_url(), "https://a.test/docs/index.html");
        assert_eq!(
            a.skipped_text().as_deref(),
            Some("skipped 4 entries: 2 data:, 1 blob:, 1 wss:")
        );
        assert_eq!(
            a.failures_text().as_deref(),
            Some("1 recorded failure, replayed as it failed (first: GET https://a.test/gone no error recorded)")
        );
        // A loop ends the chain instead of going round.
        let bytes = format!(
            r#"{{"log":{{"version":"1.2","entries":[{}]}}}}"#,
            [
                redirect("http://b.test/", 301, "https://b.test/"),
                redirect("https://b.test/", 301, "http://b.test/"),
            ]
            .join(",")
        );
        let b = Archive::parse(bytes.as_bytes()).unwrap();
        assert_eq!(b.redirect_chain().len(), 2);
        assert_eq!(b.skipped_text(), None);
    }

    #[test]
    fn resolves_locations() {
        let base = "https://a.test:8443/x/y.html?q";
        assert_eq!(
            resolve(base, "/z").as_deref(),
            Some("https://a.test:8443/z")
        );
        assert_eq!(
            resolve(base, "z.html").as_deref(),
            Some("https://a.test:8443/x/z.html")
        );
        assert_eq!(
            resolve(base, "//b.test/").as_deref(),
            Some("https://b.test/")
        );
        assert_eq!(
            resolve("http://a.test/", "https://a.test/").as_deref(),
            Some("https://a.test/")
        );
        assert_eq!(
            resolve("https://[::1]/a", "/b").as_deref(),
            Some("https://[::1]/b")
        );
        assert_eq!(resolve(base, ""), None);
        assert_eq!(resolve(base, "ftp://x/"), None);
    }

    #[test]
    fn splits_urls() {
        let u = split_url("https://A.test:8443/x/y?q=1&r=2#frag").unwrap();
        assert_eq!(u.origin.host, "a.test");
        assert_eq!(u.origin.port, 8443);
        assert_eq!((u.path.as_str(), u.query.as_str()), ("/x/y", "q=1&r=2"));
        let u = split_url("http://[::1]?z").unwrap();
        assert_eq!((u.origin.host.as_str(), u.origin.port), ("::1", 80));
        assert_eq!((u.path.as_str(), u.query.as_str()), ("/", "z"));
        assert!(split_url("data:text/plain,hi").is_none());
        // What http::Uri refuses but recordings hold: kept byte for byte.
        let u = split_url("https://e.test/x?q={\"a\":1}&s=a b").unwrap();
        assert_eq!(u.query, "q={\"a\":1}&s=a b");
        assert!(split_url("https://:1/").is_none());
    }

    #[test]
    fn matches_exact_then_query_then_host_and_misses() {
        let a = Archive::parse(&har(&[
            entry("https://a.test/", 200, "page"),
            entry("https://a.test/s.js?v=1&lang=en", 200, "v1"),
            entry("https://a.test/s.js?v=2&lang=de", 200, "v2"),
            entry("https://b.test/img.png", 200, "img"),
        ]
        .join(",")))
        .unwrap();
        assert_eq!(a.page_url, "https://a.test/");
        assert_eq!(a.hosts(), vec!["a.test", "b.test"]);
        let (r, k) = a
            .answer("GET", "https", "a.test", "/s.js", "v=2&lang=de")
            .unwrap();
        assert_eq!((r.body.as_slice(), k), (&b"v2"[..], MatchKind::Exact));
        let (r, k) = a
            .answer("GET", "https", "a.test", "/s.js", "v=9&lang=de")
            .unwrap();
        assert_eq!((r.body.as_slice(), k), (&b"v2"[..], MatchKind::NearQuery));
        let (r, k) = a.answer("GET", "https", "a.test", "/s.js", "").unwrap();
        assert_eq!((r.body.as_slice(), k), (&b"v1"[..], MatchKind::NearQuery));
        let (r, k) = a.answer("GET", "https", "a.test", "/img.png", "").unwrap();
        assert_eq!((r.body.as_slice(), k), (&b"img"[..], MatchKind::NearHost));
        // A host the recording never saw is outside it, not a near miss.
        assert!(a.answer("GET", "https", "c.test", "/img.png", "").is_none());
        assert!(a.answer("GET", "https", "a.test", "/nothing", "").is_none());
        assert!(a.answer("POST", "https", "a.test", "/", "").is_none());
        // Dropped headers are gone, the rest kept with lower-case names.
        assert_eq!(
            r.headers,
            vec![("content-type".to_string(), "text/plain".to_string())]
        );
    }

    #[test]
    fn repeated_urls_play_in_order_then_the_last_repeats() {
        let a = Archive::parse(&har(&[
            entry("https://a.test/n", 200, "one"),
            entry("https://a.test/n", 200, "two"),
        ]
        .join(",")))
        .unwrap();
        let bodies: Vec<Vec<u8>> = (0..3)
            .map(|_| {
                a.answer("GET", "https", "a.test", "/n", "")
                    .unwrap()
                    .0
                    .body
                    .clone()
            })
            .collect();
        assert_eq!(
            bodies,
            vec![b"one".to_vec(), b"two".to_vec(), b"two".to_vec()]
        );
        a.rewind();
        assert_eq!(
            a.answer("GET", "https", "a.test", "/n", "").unwrap().0.body,
            b"one"
        );
    }

    #[test]
    fn devtools_bodies_base64_plain_and_missing() {
        let a = Archive::parse(&har(&[
            r#"{"request":{"method":"GET","url":"https://a.test/"},"response":{"status":200,
              "headers":[],"content":{"size":2,"mimeType":"text/html","text":"hi"}}}"#,
            r#"{"request":{"method":"GET","url":"https://a.test/b"},"response":{"status":200,
              "headers":[],"content":{"size":3,"text":"AAEC","encoding":"base64"}}}"#,
            r#"{"request":{"method":"GET","url":"https://a.test/gone"},"response":{"status":200,
              "headers":[],"content":{"size":10}}}"#,
            r#"{"request":{"method":"GET","url":"https://a.test/r"},"response":{"status":302,
              "headers":[{"name":"Location","value":"/"}],"content":{"size":0}}}"#,
            r#"{"request":{"method":"GET","url":"https://a.test/failed"},"response":{"status":0,
              "headers":[],"content":{"size":0}}}"#,
        ]
        .join(",")))
        .unwrap();
        assert_eq!(a.entries.len(), 4);
        assert_eq!(a.unanswered, 1);
        assert_eq!(a.entries[0].body, b"hi");
        assert_eq!(
            a.entries[0].headers,
            vec![("content-type".to_string(), "text/html".to_string())]
        );
        assert_eq!(a.entries[1].body, vec![0u8, 1, 2]);
        assert_eq!(a.bodies_missing(), vec!["https://a.test/gone"]);
        assert_eq!(a.entries[3].status, 302);
    }

    #[test]
    fn keeps_failures_and_declared_icons() {
        let a = Archive::parse(&har(&[
            r#"{"request":{"method":"GET","url":"https://a.test/"},"response":{"status":200,
              "headers":[{"name":"Content-Type","value":"text/html; charset=utf-8"}],
              "content":{"size":1,"text":"<head><LINK href='https://cdn.test/i.png?v=1' REL=\"shortcut icon\"><link rel=preload href=/x.js><link rel=icon href=/fav.svg></head>"}}}"#,
            r#"{"request":{"method":"GET","url":"https://api.test.invalid/b"},"response":{"status":0,
              "headers":[],"content":{"size":0},"_error":"net::ERR_NAME_NOT_RESOLVED"}}"#,
            r#"{"request":{"method":"POST","url":"https://down.test:8443/c"},"response":{"status":0,
              "headers":[],"content":{"size":0}},"_error":"net::ERR_CONNECTION_REFUSED"}"#,
            r#"{"request":{"method":"GET","url":"https://a.test/aborted"},"response":{"status":0,
              "headers":[],"content":{"size":0},"_error":"net::ERR_ABORTED"}}"#,
        ]
        .join(",")))
        .unwrap();
        assert_eq!(a.failures.len(), 3);
        assert_eq!(a.skipped_text(), None);
        let failed: Vec<(String, FailureKind)> = a
            .failed_origins()
            .into_iter()
            .map(|(o, k)| (format!("{}:{}", o.host, o.port), k))
            .collect();
        assert_eq!(
            failed,
            vec![
                (
                    "api.test.invalid:443".to_string(),
                    FailureKind::NameNotResolved
                ),
                ("down.test:8443".to_string(), FailureKind::Unreachable),
            ]
        );
        // A failure on a host that answered is found by its URL, not replaced by a miss.
        let f = a
            .failure_of("GET", "https", "a.test", "/aborted", "")
            .unwrap();
        assert_eq!(
            (f.kind, f.error.as_str()),
            (FailureKind::Other, "net::ERR_ABORTED")
        );
        assert!(a.answer("GET", "https", "a.test", "/aborted", "").is_none());
        // Declared icons, on the page's host and another.
        assert!(a.is_declared_icon("GET", "cdn.test", "/i.png", "v=1"));
        assert!(a.is_declared_icon("GET", "a.test", "/fav.svg", ""));
        assert!(!a.is_declared_icon("GET", "a.test", "/x.js", ""));
        // Hosts the recording never saw are outside it: no near miss from another host.
        assert!(a.knows_host("down.test") && !a.knows_host("elsewhere.test"));
        assert!(a
            .answer("GET", "https", "elsewhere.test", "/", "")
            .is_none());
    }

    #[test]
    fn refuses_what_is_not_a_har() {
        for (bad, says) in [
            (&b"<html>"[..], "not a HAR file"),
            (br#"{"log":{"version":"0.9","entries":[]}}"#, "version"),
            (br#"{"log":{"version":"1.2","entries":[]}}"#, "no entry"),
            (br#"{"log":{"version":"1.2"}}"#, "not a HAR file"),
        ] {
            let e = Archive::parse(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let bad64 = har(r#"{"request":{"method":"GET","url":"https://a.test/"},
            "response":{"status":200,"content":{"text":"!!","encoding":"base64"}}}"#);
        assert!(Archive::parse(&bad64)
            .unwrap_err()
            .to_string()
            .contains("base64"));
    }
}
