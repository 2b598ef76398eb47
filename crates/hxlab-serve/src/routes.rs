//! What to answer, independent of the protocol: the router turns (method, URI, headers) into a
//! [`Reply`] that the h1, h2 and h3 front ends carry. Bad parameters become a 400 with a
//! one-line reason here, so every protocol refuses them the same way.

use crate::body::BodySpec;
use crate::reply::Reply;
use crate::stats::{Protocol, Stats};
use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Method, StatusCode, Uri};
use percent_encoding::percent_decode_str;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::TaskTracker;

/// Limits a request cannot exceed.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub max_delay: Duration,
    pub max_size: u64,
    pub max_header_size: u32,
    pub max_page_resources: u32,
    pub max_streams: u32,
    pub drain_timeout: Duration,
    /// QUIC connections open or in handshake at once.
    pub quic_max_connections: u32,
    /// Half-open QUIC connections above which a new client must answer a Retry first.
    pub quic_retry_threshold: u32,
    /// QUIC connections (open or in handshake) from one client address.
    pub quic_max_per_address: u32,
    /// A response stream that gets no flow-control credit for this long is reset.
    pub send_timeout: Duration,
    /// A request body that stops coming for this long: 408 (h1) or a reset stream.
    pub body_timeout: Duration,
    /// An HTTP/3 request head that is not complete this long after its stream opened is
    /// reset.
    pub head_timeout: Duration,
    /// A connection with no request in flight is closed after one to two of these periods.
    pub idle_timeout: Duration,
    /// How responses share an HTTP/2 or HTTP/3 connection.
    pub scheduler: hxlab_core::sched::Scheduler,
    /// TCP_NOTSENT_LOWAT of the TCP sockets: with a mark, HTTP/2 builds frames only as the
    /// socket takes them.
    pub lowat: hxlab_core::sched::Lowat,
    /// The header table we advertise and the most our encoders use (`--header-table`): the
    /// HPACK table on HTTP/2, the QPACK capacity on HTTP/3.
    pub header_table: u64,
}

impl Limits {
    /// The limits of a server started with `cfg`.
    pub fn of(cfg: &hxlab_contract::ServeConfig) -> Limits {
        Limits {
            max_delay: cfg.max_delay,
            max_size: cfg.max_size,
            max_header_size: cfg.max_header_size,
            max_page_resources: cfg.max_page_resources,
            max_streams: cfg.max_streams,
            drain_timeout: cfg.drain_timeout,
            quic_max_connections: cfg.quic_max_connections,
            quic_retry_threshold: cfg.quic_retry_threshold,
            quic_max_per_address: cfg.quic_max_per_address,
            send_timeout: cfg.send_timeout,
            body_timeout: cfg.body_timeout,
            head_timeout: cfg.head_timeout,
            idle_timeout: cfg.idle_timeout,
            scheduler: cfg.scheduler,
            lowat: cfg.notsent_lowat,
            header_table: cfg.header_table,
        }
    }
}

/// State shared by every connection of one server.
pub(crate) struct Ctx {
    pub limits: Limits,
    pub dir: Option<PathBuf>,
    /// `h3=":PORT"` for TCP responses when HTTP/3 is on.
    pub alt_svc: Option<HeaderValue>,
    pub stats: Arc<Stats>,
    /// Every connection and stream task, so shutdown can wait for them.
    pub tracker: TaskTracker,
    /// Flips to true when the server shuts down.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The archive every request is answered from (`--replay`).
    pub replay: Option<crate::replay::Replay>,
    demo: Bytes,
}

impl Ctx {
    pub fn new(
        limits: Limits,
        dir: Option<PathBuf>,
        tls: SocketAddr,
        plain: SocketAddr,
        h3: Option<SocketAddr>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Ctx {
        let alt_svc =
            h3.and_then(|a| HeaderValue::from_str(&format!("h3=\":{}\"; ma=86400", a.port())).ok());
        let stats = Arc::new(Stats::new(limits.scheduler, limits.lowat));
        Ctx {
            limits,
            dir,
            alt_svc,
            stats,
            tracker: TaskTracker::new(),
            shutdown,
            replay: None,
            demo: Bytes::from(demo_page(tls.port(), plain.port(), h3.is_some())),
        }
    }
}

/// Routes one request.
pub(crate) fn route(
    ctx: &Ctx,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    proto: Protocol,
) -> Reply {
    let target = Target {
        method,
        path: uri.path(),
        query: uri.query(),
        host: uri
            .host()
            .or_else(|| headers.get(http::header::HOST)?.to_str().ok()),
    };
    route_target(ctx, &target, proto, || {
        headers_endpoint(method, uri, headers, proto)
    })
}

/// What the router reads of a request, borrowed from whichever protocol carried it, so a
/// protocol that does not hold `http` types (HTTP/1.1) routes without building them.
pub(crate) struct Target<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
    /// The target's authority, else the Host field (the replay matches on it).
    pub host: Option<&'a str>,
}

/// Routes one request; `echo` answers `/headers` (the only route that reads every field).
pub(crate) fn route_target(
    ctx: &Ctx,
    target: &Target<'_>,
    proto: Protocol,
    echo: impl FnOnce() -> Reply,
) -> Reply {
    let (method, path, query) = (target.method, target.path, target.query);
    if path == "/replay-stats" {
        return replay_stats(ctx, query);
    }
    if let (Some(replay), false) = (&ctx.replay, path == "/stats" || path == "/metrics") {
        let host = target.host.unwrap_or("");
        // `Host: a.test:8443` and `[::1]:8443` name the host without the port.
        let host = match host.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or(""),
            None => host.split(':').next().unwrap_or(""),
        };
        let scheme = match proto {
            Protocol::H1 | Protocol::H2c => "http",
            _ => "https",
        };
        return replay.answer(method.as_str(), scheme, host, path, query.unwrap_or(""));
    }
    let reply = if let Some(n) = path.strip_prefix("/bytes/") {
        bytes_endpoint(ctx, n, query)
    } else if path == "/option" {
        option_endpoint(ctx, query)
    } else if let Some(ms) = path.strip_prefix("/delay/") {
        delay_endpoint(ctx, ms)
    } else if let Some(code) = path.strip_prefix("/status/") {
        status_endpoint(code)
    } else if path == "/headers" {
        echo()
    } else if let Some(rest) = path.strip_prefix("/static/") {
        crate::static_file::route(ctx.dir.as_deref(), rest)
    } else if path == "/page" {
        page_endpoint(ctx, query)
    } else if path == "/stats" {
        counters(serde_json::to_vec(&ctx.stats.snapshot()))
    } else if path == "/metrics" {
        let text = hxlab_contract::metrics::serve_metrics(&ctx.stats.snapshot());
        let mut r = Reply::new(
            StatusCode::OK,
            hxlab_contract::metrics::CONTENT_TYPE,
            BodySpec::Bytes(Bytes::from(text)),
        );
        r.counted = false;
        r
    } else if path == "/" || path == "/index.html" {
        Reply::new(
            StatusCode::OK,
            "text/html; charset=utf-8",
            BodySpec::Bytes(ctx.demo.clone()),
        )
    } else {
        Reply::text(
            StatusCode::NOT_FOUND,
            format!(
                "not found: {path}; endpoints: /bytes/N /option /delay/MS /status/CODE /headers /static/PATH /page /stats /metrics /\n"
            ),
        )
    };
    reply
}

/// `/replay-stats`: the replay's counters as JSON (`?reset=1`: then zeroed, sequences
/// rewound); 404 when the server replays nothing.
fn replay_stats(ctx: &Ctx, query: Option<&str>) -> Reply {
    let Some(replay) = &ctx.replay else {
        return Reply::text(
            StatusCode::NOT_FOUND,
            "not found: /replay-stats needs hxlab serve --replay FILE\n".into(),
        );
    };
    let reset = query.unwrap_or("").split('&').any(|p| p == "reset=1");
    counters(serde_json::to_vec(&replay.counts(reset)))
}

/// Counters serialised as JSON (`/stats`, `/replay-stats`); such a request does not count
/// itself.
fn counters(json: serde_json::Result<Vec<u8>>) -> Reply {
    let mut r = match json {
        Ok(json) => Reply::new(
            StatusCode::OK,
            "application/json",
            BodySpec::Bytes(Bytes::from(json)),
        ),
        Err(e) => Reply::text(StatusCode::INTERNAL_SERVER_ERROR, format!("stats: {e}\n")),
    };
    r.counted = false;
    r
}

/// Query parameters, percent-decoded; a parameter that is not UTF-8 is an error.
/// One decoded `key=value` query parameter.
type Param<'a> = (Cow<'a, str>, Cow<'a, str>);

fn params(query: Option<&str>) -> Result<Vec<Param<'_>>, String> {
    let mut out = Vec::new();
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Ok(out);
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = percent_decode_str(k)
            .decode_utf8()
            .map_err(|_| format!("parameter {k:?} is not UTF-8"))?;
        let v = percent_decode_str(v)
            .decode_utf8()
            .map_err(|_| format!("value of {k} is not UTF-8"))?;
        out.push((k, v));
    }
    Ok(out)
}

/// A delay in milliseconds (`250`, `2.5`) or with a unit (`1s`), within the limit.
fn parse_delay(ctx: &Ctx, v: &str) -> Result<Duration, String> {
    let d = match v.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Duration::from_secs_f64(ms / 1000.0),
        Ok(_) => {
            return Err(format!(
                "delay {v:?} must be a non-negative number of milliseconds"
            ))
        }
        Err(_) => hxlab_core::parse_duration(v).map_err(|e| e.to_string())?,
    };
    if d > ctx.limits.max_delay {
        return Err(format!(
            "delay {} ms is over the limit of {} ms (--max-delay)",
            d.as_millis(),
            ctx.limits.max_delay.as_millis()
        ));
    }
    Ok(d)
}

fn check_size(ctx: &Ctx, n: u64) -> Result<u64, String> {
    if n > ctx.limits.max_size {
        return Err(format!(
            "size {n} bytes is over the limit of {} bytes (--max-size)",
            ctx.limits.max_size
        ));
    }
    Ok(n)
}

fn parse_size_param(ctx: &Ctx, v: &str) -> Result<u64, String> {
    let n = hxlab_core::parse_size(v).map_err(|e| e.to_string())?;
    check_size(ctx, n)
}

/// The longest `max_age` `/bytes/N` accepts: one year, in seconds.
const MAX_AGE_LIMIT: u64 = 365 * 24 * 3600;

/// The parameters `/bytes/N` takes: `delay`, and `max_age` (seconds the browser may cache the
/// response; a page's repeat view then loads it from its cache).
fn bytes_params(ctx: &Ctx, query: Option<&str>) -> Result<(Duration, Option<u64>), String> {
    let mut delay = Duration::ZERO;
    let mut max_age = None;
    for (k, v) in params(query)? {
        if k == "delay" {
            delay = parse_delay(ctx, &v)?;
        } else if k == "max_age" {
            let s = v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|s| *s <= MAX_AGE_LIMIT)
                .ok_or_else(|| {
                    format!("max_age {v:?} must be whole seconds from 0 to {MAX_AGE_LIMIT}")
                })?;
            max_age = Some(s);
        }
    }
    Ok((delay, max_age))
}

fn filler(n: u64, delay: Duration) -> Reply {
    let mut r = Reply::new(
        StatusCode::OK,
        "application/octet-stream",
        BodySpec::Filler(n),
    );
    r.delay = delay;
    r
}

fn bytes_endpoint(ctx: &Ctx, n: &str, query: Option<&str>) -> Reply {
    // Plain digits (every size a load generator asks for) need no decoding.
    let decoded = if n.bytes().any(|b| b == b'%') {
        percent_decode_str(n).decode_utf8_lossy()
    } else {
        Cow::Borrowed(n)
    };
    let n = match parse_size_param(ctx, &decoded) {
        Ok(n) => n,
        Err(e) => return Reply::bad(e),
    };
    match bytes_params(ctx, query) {
        Ok((d, max_age)) => {
            let mut r = filler(n, d);
            r.max_age = max_age;
            r
        }
        Err(e) => Reply::bad(e),
    }
}

/// The seed study's endpoint: `size` in MiB (fractions allowed), `delay` in ms.
fn option_endpoint(ctx: &Ctx, query: Option<&str>) -> Reply {
    let run = || -> Result<Reply, String> {
        let mut size = 0u64;
        let mut delay = Duration::ZERO;
        for (k, v) in params(query)? {
            match &*k {
                "size" => {
                    let mb: f64 = v
                        .trim()
                        .parse()
                        .map_err(|_| format!("size {v:?} is not a number of MB"))?;
                    if !mb.is_finite() || mb < 0.0 {
                        return Err(format!("size {v:?} must be a non-negative number of MB"));
                    }
                    let bytes = (mb * 1_048_576.0).floor();
                    if bytes > ctx.limits.max_size as f64 {
                        return Err(format!(
                            "size {v} MB is over the limit of {} bytes (--max-size)",
                            ctx.limits.max_size
                        ));
                    }
                    size = bytes as u64;
                }
                "delay" => delay = parse_delay(ctx, &v)?,
                _ => {}
            }
        }
        Ok(filler(size, delay))
    };
    run().unwrap_or_else(Reply::bad)
}

fn delay_endpoint(ctx: &Ctx, ms: &str) -> Reply {
    match parse_delay(ctx, ms) {
        Ok(d) => {
            let mut r = Reply::new(
                StatusCode::OK,
                "application/json",
                BodySpec::Bytes(Bytes::from(format!(
                    "{{\"delay_ms\":{}}}\n",
                    d.as_secs_f64() * 1000.0
                ))),
            );
            r.delay = d;
            r
        }
        Err(e) => Reply::bad(e),
    }
}

fn status_endpoint(code: &str) -> Reply {
    let status = match code
        .parse::<u16>()
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
    {
        Some(s) if s.as_u16() >= 200 && s.as_u16() <= 599 => s,
        _ => return Reply::bad(format!("status {code:?} must be a number from 200 to 599")),
    };
    if status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED {
        return Reply::new(status, "text/plain; charset=utf-8", BodySpec::Empty);
    }
    Reply::text(
        status,
        format!(
            "{} {}\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        ),
    )
}

pub(crate) fn headers_endpoint(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    proto: Protocol,
) -> Reply {
    let mut map: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let v = String::from_utf8_lossy(value.as_bytes());
        map.entry(name.as_str().to_string())
            .and_modify(|e| {
                e.push_str(", ");
                e.push_str(&v);
            })
            .or_insert_with(|| v.into_owned());
    }
    let doc = serde_json::json!({
        "method": method.as_str(),
        "path": uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"),
        "authority": uri.authority().map(|a| a.as_str()),
        "protocol": proto.name(),
        "headers": map,
    });
    let mut body = serde_json::to_vec_pretty(&doc).unwrap_or_default();
    body.push(b'\n');
    Reply::new(
        StatusCode::OK,
        "application/json",
        BodySpec::Bytes(Bytes::from(body)),
    )
}

/// Most `Link` entries a 103 carries; a page of 1000 resources would otherwise make a header
/// block larger than clients accept.
const MAX_HINT_LINKS: u32 = 64;

fn page_endpoint(ctx: &Ctx, query: Option<&str>) -> Reply {
    let run = || -> Result<Reply, String> {
        let mut n: u32 = 10;
        let mut size: u64 = 1000;
        let mut delay = Duration::ZERO;
        let mut push = false;
        let mut hints = false;
        let flag = |k: &str, v: &str| match v {
            "0" | "false" => Ok(false),
            "1" | "true" | "" => Ok(true),
            _ => Err(format!("{k} must be 0 or 1, not {v:?}")),
        };
        for (k, v) in params(query)? {
            match &*k {
                "n" => {
                    n = v
                        .trim()
                        .parse()
                        .map_err(|_| format!("n {v:?} is not a whole number"))?;
                    if n > ctx.limits.max_page_resources {
                        return Err(format!(
                            "n {n} is over the limit of {} resources (--max-page-resources)",
                            ctx.limits.max_page_resources
                        ));
                    }
                }
                "size" => size = parse_size_param(ctx, &v)?,
                "delay" => delay = parse_delay(ctx, &v)?,
                "push" => push = flag("push", &v)?,
                "early_hints" => hints = flag("early_hints", &v)?,
                _ => {}
            }
        }
        // The one synthetic page, its delay spent on the document (`r.delay` below).
        let page = hxlab_contract::SyntheticHtml::document_delayed(u64::from(n), size);
        let paths = page.resources();
        let mut r = Reply::new(
            StatusCode::OK,
            "text/html; charset=utf-8",
            BodySpec::Bytes(Bytes::from(page.html())),
        );
        r.delay = delay;
        if hints && n > 0 {
            let link = paths
                .iter()
                .take(MAX_HINT_LINKS as usize)
                .map(|p| format!("<{p}>; rel=preload; as=script"))
                .collect::<Vec<_>>()
                .join(", ");
            r.early_hints = HeaderValue::from_str(&link).ok();
        }
        if push {
            r.push = paths;
        }
        Ok(r)
    };
    run().unwrap_or_else(Reply::bad)
}

/// The `/` page: loads N resources over the HTTP/1.1 origin and over the HTTP/2 (and, when
/// the browser takes the Alt-Svc hint, HTTP/3) origin and shows both times side by side.
fn demo_page(tls_port: u16, plain_port: u16, h3: bool) -> String {
    let h3_note = if h3 {
        "The HTTPS origin also advertises HTTP/3 (Alt-Svc); a browser may switch to it after the first load."
    } else {
        "HTTP/3 is off on this server."
    };
    format!(
        r##"<!doctype html>
<html><head><meta charset="utf-8"><title>hxlab serve</title>
<style>body{{font-family:sans-serif;max-width:50em;margin:2em auto}}td,th{{padding:.3em 1em;text-align:right}}</style>
</head><body>
<h1>hxlab serve</h1>
<p>Loads <i>N</i> resources of <i>size</i> bytes from the HTTP/1.1 origin (port {plain_port}) and from the
HTTP/2 origin (TLS, port {tls_port}) and shows the time each took. {h3_note}
With a self-signed certificate, open <a id="tlslink" href="#">the HTTPS origin</a> once and accept it.</p>
<p>N <input id="n" value="100" size="5"> size <input id="size" value="1k" size="6">
delay ms <input id="delay" value="0" size="5"> <button id="go">Run</button></p>
<table><thead><tr><th>origin</th><th>N</th><th>time (ms)</th></tr></thead><tbody id="out"></tbody></table>
<script>
const host = location.hostname.includes(':') ? '[' + location.hostname + ']' : location.hostname;
const origins = [['HTTP/1.1', 'http://' + host + ':{plain_port}'], ['HTTP/2 (or 3)', 'https://' + host + ':{tls_port}']];
document.getElementById('tlslink').href = origins[1][1] + '/';
function load(origin, n, size, delay) {{
  return new Promise(resolve => {{
    const t0 = performance.now(); let left = n; const tag = Date.now() + '-' + Math.random();
    if (n === 0) return resolve(0);
    for (let i = 0; i < n; i++) {{
      // A script is read to its end (an undecodable image is abandoned after a few KiB).
      const el = document.createElement('script'); el.async = true;
      el.onload = el.onerror = () => {{ el.remove(); if (--left === 0) resolve(performance.now() - t0); }};
      el.src = origin + '/bytes/' + encodeURIComponent(size) + '?delay=' + delay + '&r=' + i + '-' + tag;
      document.head.appendChild(el);
    }}
  }});
}}
document.getElementById('go').onclick = async () => {{
  const n = parseInt(document.getElementById('n').value, 10) || 0;
  const size = document.getElementById('size').value, delay = document.getElementById('delay').value;
  for (const [name, origin] of origins) {{
    const ms = await load(origin, n, size, delay);
    const row = document.createElement('tr');
    row.innerHTML = '<td>' + name + '</td><td>' + n + '</td><td>' + ms.toFixed(1) + '</td>';
    document.getElementById('out').appendChild(row);
  }}
}};
</script>
</body></html>
"##
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(dir: Option<PathBuf>) -> Ctx {
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let limits = Limits {
            drain_timeout: Duration::from_secs(1),
            ..Limits::of(&hxlab_contract::ServeConfig::default())
        };
        let a: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        Ctx::new(limits, dir, a, a, Some(a), rx)
    }

    fn get(c: &Ctx, uri: &str) -> Reply {
        let uri: Uri = uri.parse().expect("uri");
        route(c, &Method::GET, &uri, &HeaderMap::new(), Protocol::H1)
    }

    #[test]
    fn bytes_sizes_with_units() {
        let c = ctx(None);
        for (u, n) in [
            ("/bytes/100", 100),
            ("/bytes/5k", 5000),
            ("/bytes/10KiB", 10240),
            ("/bytes/1MiB", 1048576),
        ] {
            let r = get(&c, u);
            assert_eq!(r.status, StatusCode::OK, "{u}");
            assert_eq!(r.body.len(), n, "{u}");
        }
        assert_eq!(get(&c, "/bytes/100G").body.len(), 100_000_000_000);
    }

    #[test]
    fn bad_parameters_get_400_with_one_line() {
        let c = ctx(None);
        for u in [
            "/bytes/abc",
            "/bytes/10?delay=-1",
            "/bytes/10?delay=999999999",
            "/option?size=x",
            "/option?size=-1",
            "/delay/zz",
            "/status/99",
            "/status/abc",
            "/page?n=100000",
            "/page?push=2",
            "/bytes/2T",
            "/bytes/10?max_age=-1",
            "/bytes/10?max_age=1h",
            "/bytes/10?max_age=99999999999",
        ] {
            let r = get(&c, u);
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{u}");
            let text = r.body.in_memory().expect("in memory");
            assert_eq!(
                text.iter().filter(|b| **b == b'\n').count(),
                1,
                "{u}: one line"
            );
        }
    }

    #[test]
    fn bytes_may_be_made_cacheable() {
        let c = ctx(None);
        let r = get(&c, "/bytes/10?delay=5&max_age=3600");
        assert_eq!((r.max_age, r.delay), (Some(3600), Duration::from_millis(5)));
        let cache_control = |r: &Reply| {
            let mut found = Vec::new();
            r.each_field(c.alt_svc.as_ref(), |n, v| {
                if n == b"cache-control" {
                    found.push(v.to_vec());
                }
            });
            found
        };
        assert_eq!(cache_control(&r), [b"max-age=3600".to_vec()]);
        assert!(cache_control(&get(&c, "/bytes/10")).is_empty());
    }

    #[test]
    fn option_is_floor_of_mebibytes() {
        let c = ctx(None);
        let r = get(&c, "/option?size=0.5&delay=20");
        assert_eq!(r.body.len(), 524288);
        assert_eq!(r.delay, Duration::from_millis(20));
    }

    #[test]
    fn page_lists_resources_and_push() {
        let c = ctx(None);
        let r = get(&c, "/page?n=3&size=2k&push=1&early_hints=1");
        assert_eq!(
            r.push,
            vec!["/bytes/2000?r=0", "/bytes/2000?r=1", "/bytes/2000?r=2"]
        );
        assert!(r.early_hints.is_some());
        let html = r.body.in_memory().expect("html");
        assert!(String::from_utf8_lossy(&html).contains("/bytes/2000?r=2"));
    }
}
