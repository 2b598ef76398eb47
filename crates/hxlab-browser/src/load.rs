//! One page load in Chromium: launch, navigate, collect the Network/Page events, read
//! navigation and paint timing from the page, close; and what the Firefox driver shares with
//! it (finding a program, the page's origin, a view's run from its records).

use crate::cdp::Cdp;
use crate::collected::{num, str_of, Collected, RequestRecord};
use crate::process::{BrowserDir, BrowserProcess};
use crate::view::{self, Tab};
use crate::{vitals, BrowserError, PageConfig, PageRun, Proto, ResourceTiming, View};
use hxlab_core::page::{party_of, url_host, ProblemKind, ProblemResource, ResourceProblems};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the browser gets to exit after `Browser.close` before its group is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(2);

/// Loads one page in Chromium within `cfg.timeout`. Dropping the future kills the browser too.
pub(crate) async fn load_chromium(cfg: &PageConfig) -> Result<PageRun, BrowserError> {
    let program = resolve_chromium(&cfg.chromium)?;
    let args = browser_args(cfg)?;
    match tokio::time::timeout(cfg.timeout, run(cfg, &program, &args)).await {
        Ok(r) => r,
        Err(_) => Err(BrowserError::Timeout(cfg.timeout)),
    }
}

/// Finds the Chromium binary: an explicit path must exist; a bare name is looked up on PATH.
pub fn find_chromium(chromium: &Path) -> Result<PathBuf, BrowserError> {
    resolve_chromium(chromium)
}

fn resolve_chromium(chromium: &Path) -> Result<PathBuf, BrowserError> {
    resolve_program(chromium).map_err(BrowserError::NotFound)
}

/// An explicit path that exists and is executable, or a bare name found on PATH; the error
/// says which was not found.
pub(crate) fn resolve_program(chromium: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if chromium.components().count() > 1 || chromium.is_absolute() {
        return if executable(chromium) {
            Ok(chromium.to_path_buf())
        } else {
            Err(chromium.display().to_string())
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(chromium))
        .find(|p| executable(p))
        .ok_or_else(|| format!("`{}` is not on PATH", chromium.display()))
}

/// Scheme, host and port of an http(s) URL (parsed with `http::Uri`), for
/// `--origin-to-force-quic-on`; an IPv6 host keeps its brackets.
pub(crate) fn origin_host_port(url: &str) -> Result<(String, String, u16), BrowserError> {
    let bad = || BrowserError::Config(format!("not an http(s) URL: `{url}`"));
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    let (scheme, default_port) = match uri.scheme_str().map(str::to_ascii_lowercase).as_deref() {
        Some("https") => ("https".to_string(), 443),
        Some("http") => ("http".to_string(), 80),
        _ => return Err(bad()),
    };
    let authority = uri.authority().ok_or_else(bad)?;
    let host = authority.host();
    if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == ',') {
        return Err(bad());
    }
    // The port as written after the host (`Authority::port_u16` is None for a bad one too).
    let port = match authority
        .as_str()
        .rsplit_once(host)
        .map_or("", |(_, rest)| rest)
    {
        "" => default_port,
        rest => rest
            .strip_prefix(':')
            .and_then(|p| p.parse().ok())
            .ok_or_else(bad)?,
    };
    Ok((scheme, host.to_string(), port))
}

/// Chromium's command line for one run (profile and pipe flags are added at spawn).
pub(crate) fn browser_args(cfg: &PageConfig) -> Result<Vec<String>, BrowserError> {
    let (scheme, host, port) = origin_host_port(&cfg.url)?;
    let mut args: Vec<String> = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        // Without these Chromium phones home, and this machine refuses those connections.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-breakpad",
        "--mute-audio",
        "--hide-scrollbars",
        "--window-size=1280,800",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    match cfg.protocol {
        Proto::H2c => {
            return Err(BrowserError::Config(
                "a browser speaks HTTP/2 over TLS only: use h2 (an https:// page), not h2c"
                    .to_string(),
            ))
        }
        Proto::H1 => {
            args.push("--disable-http2".into());
            args.push("--disable-quic".into());
        }
        Proto::H2 => args.push("--disable-quic".into()),
        Proto::H3 => {
            // An http:// page can still be loaded over HTTP/3 when the caller names the https
            // origins to force QUIC on (a recorded http → https redirect: the redirect comes
            // over plain HTTP/1.1 as for every protocol, the page over QUIC).
            let named = cfg
                .extra_args
                .iter()
                .any(|a| a.starts_with("--origin-to-force-quic-on="));
            if scheme != "https" && !named {
                return Err(BrowserError::Config(
                    "HTTP/3 needs an https:// URL".to_string(),
                ));
            }
            args.push("--enable-quic".into());
            if scheme == "https" {
                args.push(format!("--origin-to-force-quic-on={host}:{port}"));
            }
        }
        // QUIC allowed, never forced: HTTP/3 only where an Alt-Svc header offers it.
        Proto::Auto => {
            args.push("--enable-quic".into());
            if scheme == "https" && (!cfg.spki_sha256.is_empty() || cfg.insecure) {
                // Chromium's QUIC refuses a certificate from a root it does not know unless
                // the host is named in --origin-to-force-quic-on (the SPKI list alone is not
                // enough there, unlike over TCP). Naming the host with another port lets
                // QUIC trust the key the SPKI list names without forcing QUIC on the page's
                // origin: HTTP/3 still has to be discovered through Alt-Svc.
                let other = if port == 1 { 2 } else { 1 };
                args.push(format!("--origin-to-force-quic-on={host}:{other}"));
            }
        }
    }
    if !(cfg.cpu_slowdown.is_finite() && (1.0..=100.0).contains(&cfg.cpu_slowdown)) {
        return Err(BrowserError::Config(format!(
            "CPU slowdown {} must be a number from 1 to 100",
            cfg.cpu_slowdown
        )));
    }
    let spki: Vec<&str> = cfg
        .spki_sha256
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    for s in &spki {
        let ok = s.len() == 44
            && s.ends_with('=')
            && s[..43]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '/');
        if !ok {
            return Err(BrowserError::Config(format!(
                "SPKI hash `{s}` is not base64 of a SHA-256 digest"
            )));
        }
    }
    if !spki.is_empty() {
        args.push(format!(
            "--ignore-certificate-errors-spki-list={}",
            spki.join(",")
        ));
    }
    if cfg.insecure {
        args.push("--ignore-certificate-errors".into());
    }
    if let Some(rules) = &cfg.host_resolver_rules {
        args.push(format!("--host-resolver-rules={rules}"));
    }
    // SSLKEYLOGFILE, as every other hxlab part honours it: Chromium's own switch, so the
    // browser's TLS and QUIC secrets go there too.
    if let Some(keys) = std::env::var_os("SSLKEYLOGFILE").filter(|k| !k.is_empty()) {
        args.push(format!("--ssl-key-log-file={}", Path::new(&keys).display()));
    }
    args.extend(cfg.extra_args.iter().cloned());
    Ok(args)
}

/// `args` with the NetLog switches of `view` when the config asks for a NetLog.
fn with_netlog(cfg: &PageConfig, args: &[String], view: View) -> Vec<String> {
    let mut args = args.to_vec();
    if let Some(path) = &cfg.netlog {
        let path = match view {
            View::Returning => path.with_extension("returning.json"),
            _ => path.clone(),
        };
        args.push(format!("--log-net-log={}", path.display()));
        args.push("--net-log-capture-mode=Default".into());
    }
    args
}

async fn run(cfg: &PageConfig, program: &Path, args: &[String]) -> Result<PageRun, BrowserError> {
    let dir = BrowserDir::fresh()?;
    let first_args = with_netlog(cfg, args, View::First);
    let mut first = one_browser(cfg, program, &first_args, &dir, View::First).await?;
    if cfg.returning_visit {
        let again = with_netlog(cfg, args, View::Returning);
        match one_browser(cfg, program, &again, &dir, View::Returning).await {
            Ok(back) => first.repeat_view = Some(Box::new(back)),
            // The first visit stands on its own, but a job that asked for both views does
            // not count one without the other.
            Err(e) => {
                let why = format!("the returning visit failed: {e}");
                first.flag = Some(match first.flag.take() {
                    Some(f) => format!("{f}; {why}"),
                    None => why,
                });
            }
        }
    }
    Ok(first)
}

/// One browser process on the profile in `dir`: `view` is the first view (and its repeat
/// view when asked for) or a returning visitor's view.
async fn one_browser(
    cfg: &PageConfig,
    program: &Path,
    args: &[String],
    dir: &BrowserDir,
    view: View,
) -> Result<PageRun, BrowserError> {
    let (mut browser, pipe) = BrowserProcess::spawn_on(program, args, cfg.launcher.as_ref(), dir)?;
    let mut cdp = Cdp::new(pipe);
    let outcome = drive(cfg, &mut cdp, view).await;
    let outcome = browser.explain_crash(outcome, "the browser").await;
    if outcome.is_ok() {
        let _ = tokio::time::timeout(
            Duration::from_millis(500),
            cdp.call("Browser.close", json!({}), None),
        )
        .await;
    }
    browser.shutdown(CLOSE_GRACE).await;
    outcome
}

/// Whether the protocol check counts `host`'s responses: every host when none is named.
fn under_test(cfg: &PageConfig, host: &str) -> bool {
    cfg.hosts_under_test.is_empty()
        || cfg
            .hosts_under_test
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
}

/// A response header by case-insensitive name (CDP keeps the server's spelling).
fn header<'a>(response: &'a Value, name: &str) -> Option<&'a str> {
    response
        .get("headers")?
        .as_object()?
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .and_then(|(_, v)| v.as_str())
}

async fn drive(cfg: &PageConfig, cdp: &mut Cdp, which: View) -> Result<PageRun, BrowserError> {
    let version = cdp.call("Browser.getVersion", json!({}), None).await?;
    let product = str_of(&version, "product");
    let version_number = product.split('/').nth(1).unwrap_or("").to_string();
    let browser_major: u32 = version_number
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    let browser = format!("Chromium {version_number}");

    let target = cdp
        .call("Target.createTarget", json!({ "url": "about:blank" }), None)
        .await?;
    let target_id = str_of(&target, "targetId");
    let attached = cdp
        .call(
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
            None,
        )
        .await?;
    let session = str_of(&attached, "sessionId");
    let s = Some(session.as_str());
    cdp.call("Network.enable", json!({}), s).await?;
    cdp.call("Page.enable", json!({}), s).await?;
    cdp.call(
        "Page.addScriptToEvaluateOnNewDocument",
        json!({ "source": vitals::OBSERVER_SCRIPT }),
        s,
    )
    .await?;
    if cfg.cpu_slowdown > 1.0 {
        cdp.call(
            "Emulation.setCPUThrottlingRate",
            json!({ "rate": cfg.cpu_slowdown }),
            s,
        )
        .await?;
    }
    let tab = Tab {
        session: &session,
        target_id: &target_id,
    };
    let first = Box::pin(view::load_view(cfg, cdp, &tab)).await?;
    // The repeat view follows the first at once, as a returning visitor's would: the first
    // view's analysis (its frames decoded in seconds, more under load) waits until both are
    // loaded, so the server's idle timeout never closes the connection the repeat view reuses.
    let repeat = if cfg.repeat_view && which == View::First {
        view::blank(cdp, &tab).await?;
        Some(Box::pin(view::load_view(cfg, cdp, &tab)).await?)
    } else {
        None
    };
    let mut run = build_view(cfg, &browser, browser_major, &first, which);
    if let Some(repeat) = repeat {
        let repeat = build_view(cfg, &browser, browser_major, &repeat, View::Repeat);
        run.repeat_view = Some(Box::new(repeat));
    }
    Ok(run)
}

/// One view's run: the resources and timings, then the page metrics.
pub(crate) fn build_view(
    cfg: &PageConfig,
    browser: &str,
    browser_major: u32,
    data: &view::ViewData,
    which: View,
) -> PageRun {
    let mut run = build_run(
        cfg,
        browser.to_string(),
        browser_major,
        &data.seen,
        &data.perf,
    );
    run.view = which;
    view::add_page_metrics(&mut run, &data.perf, &data.frames);
    // A run counts when the page loaded: its load event, or at least its largest paint.
    if run.load_ms < 0.0 && run.lcp_ms.is_none() {
        let why = "the page did not load (no load event, no largest contentful paint)";
        run.flag = Some(match run.flag.take() {
            Some(f) => format!("{f}; {why}"),
            None => why.to_string(),
        });
    }
    run
}

pub(crate) fn build_run(
    cfg: &PageConfig,
    browser: String,
    browser_major: u32,
    seen: &Collected,
    perf: &Value,
) -> PageRun {
    let nav = perf.get("nav").cloned().unwrap_or(Value::Null);
    let fcp_ms = perf
        .get("paint")
        .and_then(Value::as_array)
        .and_then(|ps| {
            ps.iter()
                .find(|p| p.get("name").and_then(Value::as_str) == Some("first-contentful-paint"))
        })
        .and_then(|p| p.get("startTime"))
        .and_then(Value::as_f64);
    let nav_start = seen.records.first().map(|r| r.started).unwrap_or(0.0);

    let mut t = Tally {
        protocol_ok: true,
        ..Tally::default()
    };
    let resources: Vec<ResourceTiming> = seen
        .records
        .iter()
        .map(|r| t.add(cfg, r, nav_start))
        .collect();
    let reasons = t.reasons(cfg, &nav);
    let outside_protocol_check = t.outside_text();
    let har = cfg
        .collect_har
        .then(|| crate::har::build(&browser, &cfg.url, &seen.records, &nav, fcp_ms));

    PageRun {
        view: View::First,
        url: cfg.url.clone(),
        requested_protocol: cfg.protocol,
        engine: cfg.engine,
        browser,
        browser_major,
        started_unix_s: seen.records.first().map(|r| r.wall_time).unwrap_or(0.0),
        protocols: t.protocols,
        shares: hxlab_core::page::ProtocolShares::of(&resources),
        protocol_ok: t.protocol_ok,
        flag: (!reasons.is_empty()).then(|| reasons.join("; ")),
        ttfb_ms: num(&nav, "responseStart"),
        dom_content_loaded_ms: num(&nav, "domContentLoadedEventStart"),
        // 0 until the load event fires: a load that never came is not a time.
        load_ms: match num(&nav, "loadEventStart") {
            t if t > 0.0 => t,
            _ => -1.0,
        },
        fcp_ms,
        cpu_slowdown: cfg.cpu_slowdown,
        connections: t.connections.len() as u32,
        bytes: t.bytes,
        resources_loaded: t.loaded,
        resources_failed: t.failed,
        resources_incomplete: t.incomplete,
        early_hints: seen.early_hints,
        early_hint_preloads_used: t.early_hint_preloads_used,
        plain_http_responses: t.plain_http,
        outside_protocol_check,
        problems: t.problems,
        resources,
        har,
        // The visual metrics (view.rs) and the repeat view (`drive`) are added later.
        ..PageRun::default()
    }
}

/// What a page load's resources add up to, resource by resource.
#[derive(Default)]
struct Tally {
    protocols: BTreeMap<String, u32>,
    connections: BTreeSet<u64>,
    /// Every response came over the protocol asked for (true until one did not).
    protocol_ok: bool,
    bytes: u64,
    loaded: u32,
    failed: u32,
    http_errors: u32,
    incomplete: u32,
    early_hint_preloads_used: u32,
    /// Plain http:// responses left out of the protocol check.
    plain_http: u32,
    /// Responses of hosts not under test that used another protocol: host → protocol →
    /// responses.
    outside: BTreeMap<String, BTreeMap<String, u32>>,
    /// Resources that failed, answered 4xx/5xx or did not finish.
    problems: ResourceProblems,
}

impl Tally {
    /// Counts one resource and returns its timing.
    fn add(&mut self, cfg: &PageConfig, r: &RequestRecord, nav_start: f64) -> ResourceTiming {
        let resp = r.response.as_ref();
        let protocol = resp.map(|v| str_of(v, "protocol")).unwrap_or_default();
        let connection_id = resp
            .and_then(|v| v.get("connectionId"))
            .and_then(Value::as_f64)
            .unwrap_or(0.0) as u64;
        if resp.is_some() {
            *self.protocols.entry(protocol.clone()).or_default() += 1;
            // Browsers speak HTTP/2 and HTTP/3 over TLS only: a plain http:// response (the
            // recorded http → https redirect of a site) is HTTP/1.1 whatever is asked for.
            let plain = crate::is_plain_http(&r.url);
            if plain && matches!(cfg.protocol, Proto::H2 | Proto::H3) {
                self.plain_http += 1;
            } else if cfg.protocol != Proto::Auto
                && crate::asked_of_reported(&protocol) != Some(cfg.protocol)
            {
                match url_host(&r.url).filter(|h| !under_test(cfg, h)) {
                    Some(host) => {
                        let label = if protocol.is_empty() { "?" } else { &protocol };
                        *self
                            .outside
                            .entry(host)
                            .or_default()
                            .entry(label.to_string())
                            .or_default() += 1;
                    }
                    None => self.protocol_ok = false,
                }
            }
            if connection_id != 0 {
                self.connections.insert(connection_id);
            }
        }
        if r.error.is_some() {
            self.failed += 1;
        } else if r.finished.is_some() {
            self.loaded += 1;
        }
        self.bytes += r.encoded_bytes;
        let response_ms = resp.and_then(|v| v.get("timing")).and_then(|t| {
            let request_time = t.get("requestTime")?.as_f64()?;
            let headers_end = t.get("receiveHeadersEnd")?.as_f64()?;
            Some((request_time - r.started) * 1000.0 + headers_end)
        });
        let status = resp.map(|v| num(v, "status").max(0.0) as u16).unwrap_or(0);
        if status >= 400 {
            self.http_errors += 1;
        }
        self.add_problem(cfg, r, status);
        // The browser may stop reading a body it has no use for (an <img> whose bytes do not
        // decode): the load then ends before the transfer would have, and must not count.
        let content_length = resp
            .and_then(|v| header(v, "content-length"))
            .and_then(|v| v.trim().parse::<u64>().ok());
        if status == 200 && r.error.is_none() && r.data_decoded > 0 {
            if let Some(cl) = content_length {
                if r.data_decoded < cl {
                    self.incomplete += 1;
                }
            }
        }
        let from_early_hints = resp
            .and_then(|v| v.get("fromEarlyHints"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.early_hint_preloads_used += u32::from(from_early_hints);
        ResourceTiming {
            url: r.url.clone(),
            resource_type: r.resource_type.clone(),
            protocol,
            status,
            connection_id,
            connection_reused: resp
                .and_then(|v| v.get("connectionReused"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            start_ms: (r.started - nav_start) * 1000.0,
            response_ms,
            duration_ms: r.finished.map(|f| (f - r.started) * 1000.0),
            encoded_bytes: r.encoded_bytes,
            body_bytes: r.data_decoded,
            from_early_hints,
            from_cache: r.served_from_cache
                || resp
                    .and_then(|v| v.get("fromDiskCache"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            error: r.error.clone(),
            priority: r.priority.clone(),
            priority_header: r.priority_header.clone(),
            phases: crate::waterfall::phases(r, nav_start),
        }
    }

    /// Counts `r` among the problems when it failed, answered 4xx/5xx or did not finish.
    fn add_problem(&mut self, cfg: &PageConfig, r: &RequestRecord, status: u16) {
        let (kind, detail) = match (&r.error, status) {
            (Some(_), _) if r.unfinished => (
                ProblemKind::Unfinished,
                "still open when the page was measured".to_string(),
            ),
            (Some(e), _) => (ProblemKind::Failed, e.clone()),
            (None, s) if s >= 400 => (ProblemKind::HttpError, s.to_string()),
            (None, _) => return,
        };
        self.problems.add(ProblemResource {
            method: if r.method.is_empty() {
                "GET".into()
            } else {
                r.method.clone()
            },
            url: r.url.clone(),
            kind,
            detail,
            party: party_of(&r.url, &cfg.url),
        });
    }

    /// Hosts outside the origins under test that used another protocol, as the run names
    /// them: `cdn.example: 2×h2`.
    fn outside_text(&self) -> Vec<String> {
        self.outside
            .iter()
            .map(|(host, protocols)| {
                let used: Vec<String> = protocols.iter().map(|(p, n)| format!("{n}×{p}")).collect();
                format!("{host}: {}", used.join(", "))
            })
            .collect()
    }

    /// Why the run is left out, if it is (empty: it counts). Failed, 4xx/5xx and unfinished
    /// resources leave it out only when `cfg.strict`; otherwise they are counted beside the
    /// figures.
    fn reasons(&self, cfg: &PageConfig, nav: &Value) -> Vec<String> {
        let mut reasons = Vec::new();
        if !self.protocol_ok {
            let got: Vec<String> = self
                .protocols
                .iter()
                .map(|(p, n)| format!("{n}×{}", if p.is_empty() { "?" } else { p }))
                .collect();
            let plain = if self.plain_http > 0 {
                format!(
                    " (the check counts only https responses; {} plain http:// left out)",
                    self.plain_http
                )
            } else {
                String::new()
            };
            reasons.push(format!(
                "asked for {} but the browser used {}{plain}",
                cfg.protocol,
                got.join(", ")
            ));
        }
        if self.failed > 0 && cfg.strict {
            reasons.push(format!("{} resource(s) failed", self.failed));
        }
        if self.incomplete > 0 {
            reasons.push(format!(
                "{} resource(s) not read to the end by the browser (it stops reading e.g. an image it cannot decode), so the load time leaves out part of the transfer",
                self.incomplete
            ));
        }
        if self.http_errors > 0 && cfg.strict {
            reasons.push(format!(
                "{} response(s) with status 4xx/5xx",
                self.http_errors
            ));
        }
        if nav.is_null() {
            reasons.push("no navigation timing".to_string());
        }
        reasons
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_origins() {
        let (s, h, p) = origin_host_port("https://127.0.0.1:8443/page?n=3").unwrap();
        assert_eq!((s.as_str(), h.as_str(), p), ("https", "127.0.0.1", 8443));
        let (_, h, p) = origin_host_port("https://example.test/x").unwrap();
        assert_eq!((h.as_str(), p), ("example.test", 443));
        let (_, h, p) = origin_host_port("http://[::1]:81").unwrap();
        assert_eq!((h.as_str(), p), ("[::1]", 81));
        assert!(origin_host_port("ftp://x/").is_err());
        assert!(origin_host_port("https://:99/").is_err());
        assert!(origin_host_port("https://h:notaport/").is_err());
        assert!(origin_host_port("no url").is_err());
        let (_, h, p) = origin_host_port("HTTPS://user@h.test:8443#f").unwrap();
        assert_eq!((h.as_str(), p), ("h.test", 8443));
    }

    #[test]
    fn forces_the_protocol_on_the_command_line() {
        let mut cfg = PageConfig::new("https://127.0.0.1:9/", Proto::H3);
        cfg.spki_sha256 = vec!["47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=".into()];
        let a = browser_args(&cfg).unwrap();
        assert!(a.contains(&"--origin-to-force-quic-on=127.0.0.1:9".to_string()));
        assert!(a
            .iter()
            .any(|x| x.starts_with("--ignore-certificate-errors-spki-list=47DEQ")));
        cfg.protocol = Proto::H1;
        let a = browser_args(&cfg).unwrap();
        assert!(
            a.contains(&"--disable-http2".to_string()) && a.contains(&"--disable-quic".to_string())
        );
        cfg.spki_sha256 = vec!["not base64".into()];
        assert!(matches!(browser_args(&cfg), Err(BrowserError::Config(_))));
        let cfg = PageConfig::new("http://127.0.0.1:9/", Proto::H3);
        assert!(matches!(browser_args(&cfg), Err(BrowserError::Config(_))));
    }

    #[test]
    fn auto_forces_nothing_on_the_page_origin() {
        let mut cfg = PageConfig::new("https://127.0.0.1:9/", Proto::Auto);
        cfg.spki_sha256 = vec!["47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=".into()];
        let a = browser_args(&cfg).unwrap();
        assert!(a.contains(&"--enable-quic".to_string()));
        assert!(!a
            .iter()
            .any(|x| x == "--disable-http2" || x == "--disable-quic"));
        // QUIC may trust the key for this host, but only another port is named.
        let forced: Vec<&String> = a
            .iter()
            .filter(|x| x.starts_with("--origin-to-force-quic-on="))
            .collect();
        assert_eq!(forced, vec!["--origin-to-force-quic-on=127.0.0.1:1"]);
        cfg.url = "https://127.0.0.1:1/".into();
        let a = browser_args(&cfg).unwrap();
        assert!(a.contains(&"--origin-to-force-quic-on=127.0.0.1:2".to_string()));
        // Without a key to trust there is nothing to name.
        cfg.spki_sha256.clear();
        let a = browser_args(&cfg).unwrap();
        assert!(!a.iter().any(|x| x.starts_with("--origin-to-force-quic-on")));
        for bad in [0.5, f64::NAN, f64::INFINITY, 101.0] {
            cfg.cpu_slowdown = bad;
            assert!(matches!(browser_args(&cfg), Err(BrowserError::Config(_))));
        }
        // Any protocol counts with auto.
        let perf = json!({ "nav": { "responseStart": 5.0, "domContentLoadedEventStart": 8.0,
            "loadEventStart": 9.0 }, "paint": [] });
        let cfg = PageConfig::new("https://h/", Proto::Auto);
        let mixed = collected(vec![
            record("https://h/", "h2", 200, 7, 10.0),
            record("https://h/a", "h3", 200, 8, 10.1),
        ]);
        let run = build_run(&cfg, "Chromium 156.0".into(), 156, &mixed, &perf);
        assert!(run.is_valid() && run.protocol_ok, "{:?}", run.flag);
    }

    #[test]
    fn maps_browser_protocol_names() {
        assert_eq!(crate::asked_of_reported("http/1.1"), Some(Proto::H1));
        assert_eq!(crate::asked_of_reported("h2"), Some(Proto::H2));
        assert_eq!(crate::asked_of_reported("h3"), Some(Proto::H3));
        assert_eq!(crate::asked_of_reported("h3-29"), Some(Proto::H3));
        assert_eq!(crate::asked_of_reported("quic/1+spdy/3"), Some(Proto::H3));
        assert_eq!(crate::asked_of_reported("data"), None);
    }

    fn record(url: &str, protocol: &str, status: u16, conn: u64, start: f64) -> RequestRecord {
        RequestRecord {
            url: url.into(),
            method: "GET".into(),
            resource_type: "Image".into(),
            started: start,
            wall_time: 1.0e9,
            response: Some(
                json!({ "protocol": protocol, "status": status, "connectionId": conn,
                "timing": { "requestTime": start, "receiveHeadersEnd": 5.0 } }),
            ),
            finished: Some(start + 0.010),
            encoded_bytes: 100,
            ..Default::default()
        }
    }

    fn collected(records: Vec<RequestRecord>) -> Collected {
        let mut c = Collected::default();
        c.records = records;
        (c.load_fired, c.dcl_fired) = (true, true);
        c
    }

    #[test]
    fn a_protocol_fallback_or_error_flags_the_run() {
        let perf = json!({ "nav": { "responseStart": 5.0, "domContentLoadedEventStart": 8.0,
            "loadEventStart": 9.0 }, "paint": [{ "name": "first-contentful-paint", "startTime": 7.0 }] });
        let cfg = PageConfig::new("https://h/", Proto::H2);
        let ok = collected(vec![
            record("https://h/", "h2", 200, 7, 10.0),
            record("https://h/a", "h2", 200, 7, 10.1),
        ]);
        let run = build_run(&cfg, "Chromium 156.0".into(), 156, &ok, &perf);
        assert!(run.is_valid(), "{:?}", run.flag);
        assert_eq!(
            (run.connections, run.resources_loaded, run.bytes),
            (1, 2, 200)
        );
        assert_eq!(
            (run.ttfb_ms, run.load_ms, run.fcp_ms),
            (5.0, 9.0, Some(7.0))
        );
        assert!((run.resources[1].start_ms - 100.0).abs() < 1e-6);
        assert!(run.push_ignored());

        let fallback = collected(vec![
            record("https://h/", "h2", 200, 7, 10.0),
            record("https://h/a", "http/1.1", 200, 8, 10.1),
        ]);
        let run = build_run(&cfg, "Chromium 156.0".into(), 156, &fallback, &perf);
        assert!(!run.protocol_ok);
        assert!(
            run.flag.as_deref().unwrap_or("").contains("asked for h2"),
            "{:?}",
            run.flag
        );
        assert_eq!(run.connections, 2);

        let mut missing = collected(vec![
            record("https://h/", "h2", 200, 7, 10.0),
            record("https://h/a", "h2", 404, 7, 10.1),
        ]);
        missing.records.push(RequestRecord {
            url: "https://h/b".into(),
            started: 10.2,
            ..Default::default()
        });
        missing.mark_unfinished();
        // By default the run counts, and the two resources are counted beside it.
        let run = build_run(&cfg, "Chromium 156.0".into(), 156, &missing, &perf);
        assert_eq!(run.resources_failed, 1);
        assert!(run.is_valid(), "{:?}", run.flag);
        let p = &run.problems;
        assert_eq!((p.http_errors, p.unfinished, p.failed), (1, 1, 0));
        assert_eq!(p.named(), vec!["GET https://h/a", "GET https://h/b"]);
        assert_eq!(p.first[0].detail, "404");
        assert_eq!(p.first[0].party, hxlab_core::page::Party::First);
        // --strict keeps the old rule: any of them leaves the run out.
        let strict = PageConfig {
            strict: true,
            ..cfg.clone()
        };
        let run = build_run(&strict, "Chromium 156.0".into(), 156, &missing, &perf);
        let flag = run.flag.unwrap_or_default();
        assert!(
            flag.contains("1 resource(s) failed") && flag.contains("4xx/5xx"),
            "{flag}"
        );

        // A host outside the origins under test that used another protocol is named, not
        // held against the run; one under test still is.
        let tested = PageConfig {
            hosts_under_test: vec!["h".into()],
            ..cfg.clone()
        };
        let third = collected(vec![
            record("https://h/", "h2", 200, 7, 10.0),
            record("https://api.other/x", "http/1.1", 200, 8, 10.1),
        ]);
        let run = build_run(&tested, "Chromium 156.0".into(), 156, &third, &perf);
        assert!(run.is_valid() && run.protocol_ok, "{:?}", run.flag);
        assert_eq!(run.outside_protocol_check, vec!["api.other: 1×http/1.1"]);
        let run = build_run(&tested, "Chromium 156.0".into(), 156, &fallback, &perf);
        assert!(!run.protocol_ok);

        // A body the browser stopped reading before its Content-Length.
        let mut short = record("https://h/a", "h2", 200, 7, 10.1);
        if let Some(r) = short.response.as_mut() {
            r["headers"] = json!({ "Content-Length": "1000" });
        }
        short.data_decoded = 400;
        let mut whole = record("https://h/b", "h2", 200, 7, 10.1);
        if let Some(r) = whole.response.as_mut() {
            r["headers"] = json!({ "content-length": "1000" });
        }
        whole.data_decoded = 1000;
        let partial = collected(vec![record("https://h/", "h2", 200, 7, 10.0), short, whole]);
        let run = build_run(&cfg, "Chromium 156.0".into(), 156, &partial, &perf);
        assert_eq!(run.resources_incomplete, 1);
        assert!(run.flag.unwrap_or_default().contains("not read to the end"));
    }

    #[test]
    fn missing_browser_is_not_found() {
        assert!(matches!(
            resolve_chromium(Path::new("/nonexistent/chromium")),
            Err(BrowserError::NotFound(_))
        ));
        assert!(matches!(
            resolve_chromium(Path::new("no-such-browser-hxlab")),
            Err(BrowserError::NotFound(_))
        ));
    }
}
