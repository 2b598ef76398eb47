//! Runs one traced connection: connect, handshake, send the requests (all at once on h2/h3),
//! read every response, close, and report what happened through a [`Tracer`].

use crate::event::{Event, Tracer};
use crate::h3tap::TapConnection;
use crate::tap::{H1Observer, H2Observer, Tap};
use crate::tls::{client_config, Trust};
use crate::TraceError;
use bytes::{Buf, Bytes};
use http::header::{HeaderName, HeaderValue};
use http::{Request, Uri};
use serde_json::Value;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Which protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// https: offer h2 and http/1.1 by ALPN; http: HTTP/1.1.
    Auto,
    /// HTTP/1.1 (over TLS for https).
    H1,
    /// HTTP/2 over TLS (ALPN h2, falling back to HTTP/1.1 if the server does not select it);
    /// for an http:// URL, h2c with prior knowledge.
    H2,
    /// HTTP/2 over cleartext TCP with prior knowledge.
    H2c,
    /// HTTP/3 over QUIC.
    H3,
}

/// What to trace.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// URLs, all on one origin (one connection is traced).
    pub urls: Vec<Uri>,
    /// Protocol choice.
    pub proto: Proto,
    /// Each URL is requested this many times, all at once on h2/h3 (like `nghttp -m`).
    pub multiply: usize,
    /// Extra request headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Accept server push (h2: SETTINGS_ENABLE_PUSH=1).
    pub push: bool,
    /// Certificates to trust.
    pub trust: Trust,
    /// Limit for one traced connection; every wait is bounded by it.
    pub timeout: Duration,
    /// After the traced connection, open a second one with the same TLS session cache and
    /// trace it too, to show whether the server resumes the session (TLS over TCP only).
    pub resume: bool,
}

/// One response as the client saw it.
#[derive(Debug, Clone)]
pub struct ResponseSummary {
    /// Request path.
    pub path: String,
    /// Stream id (h2/h3), None on h1.
    pub stream_id: Option<u64>,
    /// Status code.
    pub status: u16,
    /// Body bytes received.
    pub body_bytes: u64,
    /// True for a pushed response.
    pub pushed: bool,
    /// The response's Alt-Svc header, if any (how a server advertises HTTP/3).
    pub alt_svc: Option<String>,
}

/// What the trace established.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// "h1", "h2", "h2c" or "h3": the protocol actually spoken.
    pub protocol: String,
    /// ALPN result, if TLS/QUIC was used.
    pub alpn: Option<String>,
    /// True when h2 was asked for and HTTP/1.1 was used.
    pub fell_back: bool,
    /// Every response, including pushed ones.
    pub responses: Vec<ResponseSummary>,
    /// Whether the (last) TLS handshake resumed a session; None without TLS over TCP.
    pub resumed: Option<bool>,
}

struct Origin {
    https: bool,
    host: String,
    port: u16,
}

fn origin_of(urls: &[Uri]) -> Result<Origin, TraceError> {
    let first = urls
        .first()
        .ok_or_else(|| TraceError::BadUrl("no URL given".into()))?;
    let mut origin: Option<(String, String, u16)> = None;
    for u in urls {
        let scheme = u.scheme_str().unwrap_or("").to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(TraceError::BadUrl(format!(
                "{u}: the URL must start with http:// or https://"
            )));
        }
        let host = u
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| TraceError::BadUrl(format!("{u}: the URL has no host")))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        // http::Uri accepts any digits as a port but returns None for one past 65535.
        if port_out_of_range(u) {
            return Err(TraceError::BadUrl(format!(
                "{u}: the port must be from 1 to 65535"
            )));
        }
        let port = u
            .port_u16()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let this = (scheme, host, port);
        match &origin {
            None => origin = Some(this),
            Some(o) if *o != this => {
                return Err(TraceError::BadUrl(format!(
                    "{u}: all URLs must share scheme, host and port with {first} (one connection is traced)"
                )))
            }
            _ => {}
        }
    }
    let (scheme, host, port) = origin.ok_or_else(|| TraceError::BadUrl("no URL given".into()))?;
    Ok(Origin {
        https: scheme == "https",
        host,
        port,
    })
}

fn alt_svc_of(headers: &http::HeaderMap) -> Option<String> {
    headers
        .get(http::header::ALT_SVC)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// Tells the user when an h1/h2 server advertises HTTP/3, since `auto` does not follow Alt-Svc.
fn alt_svc_hint(tracer: &Tracer, summary: &Summary) {
    let advert = summary
        .responses
        .iter()
        .filter_map(|r| r.alt_svc.as_deref())
        .find(|a| a.contains("h3="));
    if let Some(a) = advert {
        tracer.emit(
            Event::new(
                "info",
                format!("the server advertises HTTP/3 (Alt-Svc: {a}); trace it with --proto h3"),
            )
            .field("alt_svc", a),
        );
    }
}

/// Awaits `fut` unless the deadline passes first.
async fn step<T>(
    deadline: Instant,
    limit: Duration,
    phase: &'static str,
    fut: impl Future<Output = T>,
) -> Result<T, TraceError> {
    tokio::time::timeout_at(deadline.into(), fut)
        .await
        .map_err(|_| TraceError::Timeout {
            phase,
            after: limit,
        })
}

fn info(line: impl Into<String>) -> Event {
    let line = line.into();
    Event::new("info", line.clone()).field("message", line)
}

/// Traces one connection. Events are emitted through `tracer` as they happen.
/// With `resume`, a second connection follows, sharing the first one's TLS session cache.
pub async fn trace(opts: &TraceOptions, tracer: &Tracer) -> Result<Summary, TraceError> {
    let origin = origin_of(&opts.urls)?;
    if opts.resume && (opts.proto == Proto::H3 || !origin.https) {
        return Err(TraceError::Usage(
            "--resume needs TLS over TCP: an https:// URL and not --proto h3".into(),
        ));
    }
    // Built once, so a second connection finds the first one's session tickets in its cache.
    // Certificate files are read before connecting, so a bad --cacert is reported as such.
    let alpn_offer: Vec<&[u8]> = if opts.proto == Proto::H1 {
        vec![b"http/1.1"]
    } else {
        vec![b"h2", b"http/1.1"]
    };
    let config = if origin.https && opts.proto != Proto::H3 {
        Some(Arc::new(client_config(&opts.trust, &alpn_offer, false)?))
    } else {
        None
    };
    let mut summary = trace_connection(opts, tracer, config.clone(), &alpn_offer).await?;
    if opts.resume {
        tracer.emit(info(
            "second connection, with the first one's TLS session cache (--resume)",
        ));
        let second = trace_connection(opts, tracer, config, &alpn_offer).await?;
        summary.responses.extend(second.responses);
        summary.resumed = second.resumed;
    }
    if summary.protocol != "h3" {
        alt_svc_hint(tracer, &summary);
    }
    Ok(summary)
}

async fn trace_connection(
    opts: &TraceOptions,
    tracer: &Tracer,
    config: Option<Arc<rustls::ClientConfig>>,
    alpn_offer: &[&[u8]],
) -> Result<Summary, TraceError> {
    let origin = origin_of(&opts.urls)?;
    if opts.multiply == 0 {
        return Err(TraceError::Usage("-m must be at least 1".into()));
    }
    match (opts.proto, origin.https) {
        (Proto::H2c, true) => {
            return Err(TraceError::Usage("--proto h2c needs an http:// URL".into()))
        }
        (Proto::H3, false) => {
            return Err(TraceError::Usage("--proto h3 needs an https:// URL".into()))
        }
        _ => {}
    }
    let deadline = Instant::now() + opts.timeout;
    let addr = resolve(&origin, deadline, opts.timeout).await?;
    if opts.proto == Proto::H3 {
        return trace_h3(opts, tracer, &origin, addr, deadline).await;
    }
    let t0 = Instant::now();
    let tcp = step(
        deadline,
        opts.timeout,
        "TCP connect",
        TcpStream::connect(addr),
    )
    .await?
    .map_err(|source| TraceError::Connect {
        addr: addr.to_string(),
        source,
    })?;
    let _ = tcp.set_nodelay(true);
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    tracer.emit(
        Event::new(
            "connect",
            format!("connected to {addr} over TCP in {ms:.3} ms"),
        )
        .field("transport", "tcp")
        .field("addr", addr.to_string())
        .field("connect_ms", ms),
    );
    let Some(config) = config else {
        let h2 = matches!(opts.proto, Proto::H2 | Proto::H2c);
        if h2 {
            tracer.emit(info("HTTP/2 over cleartext TCP with prior knowledge (h2c)"));
            let mut s = run_h2(opts, tracer, tcp, "http", &origin, deadline).await?;
            s.protocol = "h2c".into();
            return Ok(s);
        }
        let mut s = run_h1(opts, tracer, tcp, &origin, deadline).await?;
        s.protocol = "h1".into();
        return Ok(s);
    };
    let connector = tokio_rustls::TlsConnector::from(config);
    let name = rustls::pki_types::ServerName::try_from(origin.host.clone()).map_err(|e| {
        TraceError::Usage(format!("{}: not a valid TLS server name: {e}", origin.host))
    })?;
    let t1 = Instant::now();
    let tls = step(
        deadline,
        opts.timeout,
        "TLS handshake",
        connector.connect(name, tcp),
    )
    .await?
    .map_err(|e| TraceError::Tls(tls_error_text(&e, &opts.trust)))?;
    let ms = t1.elapsed().as_secs_f64() * 1e3;
    let (_, conn) = tls.get_ref();
    let version = conn
        .protocol_version()
        .map(|v| format!("{v:?}"))
        .unwrap_or_else(|| "?".into());
    let cipher = conn
        .negotiated_cipher_suite()
        .map(|c| format!("{:?}", c.suite()))
        .unwrap_or_else(|| "?".into());
    let alpn = conn
        .alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let resumed = matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    let offered: Vec<String> = alpn_offer
        .iter()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    tracer.emit(
        Event::new(
            "tls",
            format!(
                "TLS handshake done in {ms:.3} ms: {version}, {cipher}, ALPN {} (offered {}), {}",
                alpn.as_deref().unwrap_or("none"),
                offered.join(","),
                if resumed {
                    "resumed session"
                } else {
                    "full handshake (no resumption)"
                }
            ),
        )
        .field("version", version)
        .field("cipher", cipher)
        .field("alpn", alpn.clone().map(Value::from).unwrap_or(Value::Null))
        .field("alpn_offered", offered)
        .field("resumed", resumed)
        .field("handshake_ms", ms),
    );
    if alpn.as_deref() == Some("h2") {
        let mut s = run_h2(opts, tracer, tls, "https", &origin, deadline).await?;
        s.protocol = "h2".into();
        s.alpn = alpn;
        s.resumed = Some(resumed);
        return Ok(s);
    }
    let fell_back = matches!(opts.proto, Proto::H2 | Proto::Auto);
    if fell_back {
        let what = match &alpn {
            Some(p) => format!("the server selected {p:?} by ALPN"),
            None => "the server selected no ALPN protocol".into(),
        };
        tracer.emit(
            Event::new(
                "fallback",
                format!("FALLBACK: h2 was offered but {what}; continuing over HTTP/1.1"),
            )
            .field("asked", "h2")
            .field("alpn", alpn.clone().map(Value::from).unwrap_or(Value::Null))
            .field("using", "http/1.1"),
        );
    }
    let mut s = run_h1(opts, tracer, tls, &origin, deadline).await?;
    s.protocol = "h1".into();
    s.alpn = alpn;
    s.resumed = Some(resumed);
    s.fell_back = fell_back && opts.proto == Proto::H2;
    Ok(s)
}

/// The rustls error, plus what to do when the certificate is the problem.
fn tls_error_text(e: &std::io::Error, trust: &Trust) -> String {
    let cert_problem = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
    if cert_problem && matches!(trust, Trust::System) {
        format!("{e} (the certificate is not trusted by the system roots; pass --cacert PEM or -k)")
    } else {
        e.to_string()
    }
}

async fn resolve(
    origin: &Origin,
    deadline: Instant,
    limit: Duration,
) -> Result<SocketAddr, TraceError> {
    let target = (origin.host.as_str(), origin.port);
    let mut addrs = step(
        deadline,
        limit,
        "DNS resolution",
        tokio::net::lookup_host(target),
    )
    .await?
    .map_err(|e| TraceError::Resolve {
        host: origin.host.clone(),
        reason: e.to_string(),
    })?;
    addrs.next().ok_or_else(|| TraceError::Resolve {
        host: origin.host.clone(),
        reason: "no addresses".into(),
    })
}

fn authority(origin: &Origin) -> String {
    let host = if origin.host.contains(':') {
        format!("[{}]", origin.host)
    } else {
        origin.host.clone()
    };
    let default = if origin.https { 443 } else { 80 };
    if origin.port == default {
        host
    } else {
        format!("{host}:{}", origin.port)
    }
}

/// The list of (path, absolute URI) to request, each URL `multiply` times.
fn plan(
    opts: &TraceOptions,
    scheme: &str,
    origin: &Origin,
) -> Result<Vec<(String, Uri)>, TraceError> {
    let mut out = Vec::new();
    for u in &opts.urls {
        let path = u
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| "/".into());
        let path = if path.is_empty() {
            "/".to_string()
        } else {
            path
        };
        let abs: Uri = format!("{scheme}://{}{path}", authority(origin))
            .parse()
            .map_err(|e| TraceError::Usage(format!("{u}: {e}")))?;
        for _ in 0..opts.multiply {
            out.push((path.clone(), abs.clone()));
        }
    }
    Ok(out)
}

fn with_headers(mut b: http::request::Builder, opts: &TraceOptions) -> http::request::Builder {
    for (n, v) in &opts.headers {
        b = b.header(n, v);
    }
    b
}

fn response_event(r: &ResponseSummary, proto: &str) -> Event {
    let sid = r
        .stream_id
        .map(|s| format!(" on stream {s}"))
        .unwrap_or_default();
    let what = if r.pushed {
        "pushed response"
    } else {
        "response"
    };
    Event::new(
        "response",
        format!(
            "{what}{sid}: {} {} — status {}, {} body bytes",
            proto, r.path, r.status, r.body_bytes
        ),
    )
    .field("proto", proto)
    .field("path", r.path.clone())
    .field(
        "stream_id",
        r.stream_id.map(Value::from).unwrap_or(Value::Null),
    )
    .field("status", r.status)
    .field("body_bytes", r.body_bytes)
    .field("pushed", r.pushed)
}

async fn run_h1<S>(
    opts: &TraceOptions,
    tracer: &Tracer,
    io: S,
    origin: &Origin,
    deadline: Instant,
) -> Result<Summary, TraceError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use http_body_util::BodyExt;
    let observer = H1Observer::new();
    let answered_h2 = observer.answered_h2();
    let err = move |reason: String| {
        let reason = if answered_h2.load(std::sync::atomic::Ordering::Relaxed) {
            format!("{reason} (the server answered with HTTP/2 frames: it speaks h2c here; try --proto h2c)")
        } else {
            reason
        };
        TraceError::Http {
            proto: "HTTP/1.1",
            reason,
        }
    };
    let tap = Tap::new(io, observer, tracer.clone());
    let (mut sender, conn) = step(
        deadline,
        opts.timeout,
        "HTTP/1.1 handshake",
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tap)),
    )
    .await?
    .map_err(|e| err(e.to_string()))?;
    let conn_task = tokio::spawn(conn);
    let requests = plan(opts, if origin.https { "https" } else { "http" }, origin)?;
    if requests.len() > 1 {
        tracer.emit(info(format!(
            "HTTP/1.1 has no multiplexing: the {} requests go one after another on this connection",
            requests.len()
        )));
    }
    let mut summary = Summary::default();
    for (path, _) in requests {
        step(
            deadline,
            opts.timeout,
            "HTTP/1.1 connection ready",
            sender.ready(),
        )
        .await?
        .map_err(|e| err(e.to_string()))?;
        let req = with_headers(
            Request::get(path.as_str()).header(http::header::HOST, authority(origin)),
            opts,
        )
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| TraceError::Usage(format!("bad request header: {e}")))?;
        let resp = step(
            deadline,
            opts.timeout,
            "HTTP/1.1 response",
            sender.send_request(req),
        )
        .await?
        .map_err(|e| err(e.to_string()))?;
        let status = resp.status().as_u16();
        let alt_svc = alt_svc_of(resp.headers());
        let mut body = resp.into_body();
        let mut n = 0u64;
        while let Some(frame) = step(
            deadline,
            opts.timeout,
            "HTTP/1.1 response body",
            body.frame(),
        )
        .await?
        {
            let frame = frame.map_err(|e| err(e.to_string()))?;
            if let Some(d) = frame.data_ref() {
                n += d.len() as u64;
            }
        }
        tracer.emit(
            Event::new("h1_body", format!("recv body: {n} bytes (end of response)"))
                .field("proto", "h1")
                .field("body_bytes", n),
        );
        let r = ResponseSummary {
            path,
            stream_id: None,
            status,
            body_bytes: n,
            pushed: false,
            alt_svc,
        };
        tracer.emit(response_event(&r, "h1"));
        summary.responses.push(r);
    }
    drop(sender);
    // hyper closes the connection once the sender is gone; bounded wait for it.
    let _ = tokio::time::timeout(Duration::from_secs(2), conn_task).await;
    tracer.emit(info("connection closed"));
    Ok(summary)
}

async fn run_h2<S>(
    opts: &TraceOptions,
    tracer: &Tracer,
    io: S,
    scheme: &str,
    origin: &Origin,
    deadline: Instant,
) -> Result<Summary, TraceError>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let observer = H2Observer::new();
    let answered_http1 = observer.answered_http1();
    let err = move |reason: String| {
        let reason = if answered_http1.load(std::sync::atomic::Ordering::Relaxed) {
            format!("{reason} (the server answered in HTTP/1.1: it does not speak HTTP/2 here; try --proto h1)")
        } else {
            reason
        };
        TraceError::Http {
            proto: "HTTP/2",
            reason,
        }
    };
    let tap = Tap::new(io, observer, tracer.clone());
    let mut builder = h2::client::Builder::new();
    builder.enable_push(opts.push);
    let (mut client, conn) = step(
        deadline,
        opts.timeout,
        "HTTP/2 handshake",
        builder.handshake::<_, Bytes>(tap),
    )
    .await?
    .map_err(|e| err(e.to_string()))?;
    let conn_task = tokio::spawn(conn);
    let requests = plan(opts, scheme, origin)?;
    // Queue every request before yielding, so on a single-threaded runtime all HEADERS leave
    // before any response can be read: the multiplexing is visible.
    let mut in_flight = Vec::new();
    for (path, uri) in requests {
        step(
            deadline,
            opts.timeout,
            "HTTP/2 stream capacity",
            futures::future::poll_fn(|cx| client.poll_ready(cx)),
        )
        .await?
        .map_err(|e| err(e.to_string()))?;
        let req = with_headers(Request::get(uri), opts)
            .body(())
            .map_err(|e| TraceError::Usage(format!("bad request header: {e}")))?;
        let (resp, _) = client
            .send_request(req, true)
            .map_err(|e| err(e.to_string()))?;
        in_flight.push((path, resp));
    }
    let exchanges = in_flight.into_iter().map(|(path, mut resp)| {
        let pushes = resp.push_promises();
        let tracer = tracer.clone();
        let err = err.clone();
        async move {
            let sid = u32::from(resp.stream_id()) as u64;
            let main = async {
                let resp = resp.await.map_err(|e| err(e.to_string()))?;
                let status = resp.status().as_u16();
                let alt_svc = alt_svc_of(resp.headers());
                let n = read_h2_body(resp.into_body())
                    .await
                    .map_err(|e| err(e.to_string()))?;
                let r = ResponseSummary {
                    path,
                    stream_id: Some(sid),
                    status,
                    body_bytes: n,
                    pushed: false,
                    alt_svc,
                };
                tracer.emit(response_event(&r, "h2"));
                Ok::<_, TraceError>(r)
            };
            let pushed = read_pushes(pushes, tracer.clone());
            let (main, pushed) = futures::join!(main, pushed);
            let mut all = vec![main?];
            all.extend(pushed.map_err(|e| err(e.to_string()))?);
            Ok::<_, TraceError>(all)
        }
    });
    let results = step(
        deadline,
        opts.timeout,
        "HTTP/2 responses",
        futures::future::join_all(exchanges),
    )
    .await?;
    let mut summary = Summary::default();
    for r in results {
        summary.responses.extend(r?);
    }
    drop(client);
    // The h2 client sends GOAWAY and closes once no handle or stream is left; bounded wait.
    match tokio::time::timeout(Duration::from_secs(2), conn_task).await {
        Ok(Ok(Err(e))) => tracer.emit(info(format!("connection ended with an error: {e}"))),
        Ok(_) => tracer.emit(info("connection closed")),
        Err(_) => tracer.emit(info("connection still open after 2 s; closing it")),
    }
    Ok(summary)
}

async fn read_h2_body(mut body: h2::RecvStream) -> Result<u64, h2::Error> {
    let mut n = 0u64;
    while let Some(chunk) = body.data().await {
        let chunk = chunk?;
        n += chunk.len() as u64;
        // Returning capacity is what makes the client send WINDOW_UPDATE frames.
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    Ok(n)
}

async fn read_pushes(
    mut pushes: h2::client::PushPromises,
    tracer: Tracer,
) -> Result<Vec<ResponseSummary>, h2::Error> {
    let mut handles = Vec::new();
    while let Some(pp) = pushes.push_promise().await {
        let (req, fut) = pp?.into_parts();
        let path = req
            .uri()
            .path_and_query()
            .map(|p| p.to_string())
            .unwrap_or_else(|| req.uri().to_string());
        tracer.emit(
            Event::new(
                "push",
                format!("accepted push promise: {} {}", req.method(), req.uri()),
            )
            .field("proto", "h2")
            .field("method", req.method().as_str())
            .field("uri", req.uri().to_string()),
        );
        let tracer = tracer.clone();
        handles.push(async move {
            let resp = fut.await?;
            let sid = u32::from(resp.body().stream_id()) as u64;
            let status = resp.status().as_u16();
            let n = read_h2_body(resp.into_body()).await?;
            let r = ResponseSummary {
                path,
                stream_id: Some(sid),
                status,
                body_bytes: n,
                pushed: true,
                alt_svc: None,
            };
            tracer.emit(response_event(&r, "h2"));
            Ok::<_, h2::Error>(r)
        });
    }
    futures::future::join_all(handles)
        .await
        .into_iter()
        .collect()
}

async fn trace_h3(
    opts: &TraceOptions,
    tracer: &Tracer,
    origin: &Origin,
    addr: SocketAddr,
    deadline: Instant,
) -> Result<Summary, TraceError> {
    let err = |reason: String| TraceError::Http {
        proto: "HTTP/3",
        reason,
    };
    let limit = opts.timeout;
    let tls = client_config(&opts.trust, &[b"h3"], true)?;
    let quic_tls = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| TraceError::Quic(e.to_string()))?;
    let mut config = quinn::ClientConfig::new(Arc::new(quic_tls));
    let mut transport = quinn::TransportConfig::default();
    let idle = quinn::IdleTimeout::try_from(limit.min(Duration::from_secs(60)))
        .map_err(|e| TraceError::Quic(e.to_string()))?;
    transport.max_idle_timeout(Some(idle));
    config.transport_config(Arc::new(transport));
    let bind: SocketAddr = if addr.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    }
    .parse()
    .map_err(|e| TraceError::Quic(format!("{e}")))?;
    let endpoint = quinn::Endpoint::client(bind)
        .map_err(|e| TraceError::Quic(format!("cannot open a UDP socket: {e}")))?;
    tracer.emit(
        Event::new(
            "connect",
            format!("QUIC connecting to {addr} over UDP (offering ALPN h3)"),
        )
        .field("transport", "quic")
        .field("addr", addr.to_string()),
    );
    let t0 = Instant::now();
    let connecting = endpoint
        .connect_with(config, addr, &origin.host)
        .map_err(|e| TraceError::Quic(e.to_string()))?;
    let conn = step(deadline, limit, "QUIC handshake", connecting)
        .await?
        .map_err(|e| {
            let hint =
                if matches!(opts.trust, Trust::System) && e.to_string().contains("certificate") {
                    " (pass --cacert PEM or -k)"
                } else {
                    ""
                };
            TraceError::Quic(format!("handshake with {addr} failed: {e}{hint}"))
        })?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let alpn = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol.map(|p| String::from_utf8_lossy(&p).into_owned()));
    let rtt_ms = conn.rtt().as_secs_f64() * 1e3;
    tracer.emit(
        Event::new(
            "quic_handshake",
            format!(
                "QUIC handshake done in {ms:.3} ms: TLSv1_3, ALPN {}, RTT estimate {rtt_ms:.3} ms, full handshake (no 0-RTT)",
                alpn.as_deref().unwrap_or("none")
            ),
        )
        .field("handshake_ms", ms)
        .field("version", "TLSv1_3")
        .field("alpn", alpn.clone().map(Value::from).unwrap_or(Value::Null))
        .field("rtt_ms", rtt_ms)
        .field("resumed", false),
    );
    let tap = TapConnection::new(h3_quinn::Connection::new(conn.clone()), tracer.clone());
    let (mut driver, mut send_request) =
        step(deadline, limit, "HTTP/3 setup", h3::client::new(tap))
            .await?
            .map_err(|e| err(e.to_string()))?;
    let drive =
        tokio::spawn(async move { futures::future::poll_fn(|cx| driver.poll_close(cx)).await });
    let requests = plan(opts, "https", origin)?;
    let mut in_flight = Vec::new();
    for (path, uri) in requests {
        let req = with_headers(Request::get(uri), opts)
            .body(())
            .map_err(|e| TraceError::Usage(format!("bad request header: {e}")))?;
        let mut stream = step(
            deadline,
            limit,
            "HTTP/3 request",
            send_request.send_request(req),
        )
        .await?
        .map_err(|e| err(e.to_string()))?;
        step(deadline, limit, "HTTP/3 request end", stream.finish())
            .await?
            .map_err(|e| err(e.to_string()))?;
        in_flight.push((path, stream));
    }
    let exchanges = in_flight.into_iter().map(|(path, mut stream)| {
        let tracer = tracer.clone();
        async move {
            let sid = stream.id().into_inner();
            let resp = stream
                .recv_response()
                .await
                .map_err(|e| err(e.to_string()))?;
            let mut n = 0u64;
            while let Some(chunk) = stream.recv_data().await.map_err(|e| err(e.to_string()))? {
                n += chunk.remaining() as u64;
            }
            let r = ResponseSummary {
                path,
                stream_id: Some(sid),
                status: resp.status().as_u16(),
                body_bytes: n,
                pushed: false,
                alt_svc: alt_svc_of(resp.headers()),
            };
            tracer.emit(response_event(&r, "h3"));
            Ok::<_, TraceError>(r)
        }
    });
    let results = step(
        deadline,
        limit,
        "HTTP/3 responses",
        futures::future::join_all(exchanges),
    )
    .await?;
    let mut summary = Summary {
        protocol: "h3".into(),
        alpn,
        ..Default::default()
    };
    for r in results {
        summary.responses.push(r?);
    }
    drop(send_request);
    // h3 closes the connection (H3_NO_ERROR) once every request sender is gone; bounded wait.
    match tokio::time::timeout(Duration::from_secs(2), drive).await {
        Ok(Ok(e)) if e.is_h3_no_error() => {
            tracer.emit(info("HTTP/3 connection closed (H3_NO_ERROR)"))
        }
        Ok(Ok(e)) => tracer.emit(info(format!("HTTP/3 connection ended: {e}"))),
        _ => {
            conn.close(quinn::VarInt::from_u32(0x100), b"");
            tracer.emit(info("closing the QUIC connection (H3_NO_ERROR)"));
        }
    }
    let stats = conn.stats();
    tracer.emit(
        Event::new(
            "quic_stats",
            format!(
                "QUIC: {} datagrams sent, {} received, {} packets lost, RTT {:.3} ms, cwnd {} bytes",
                stats.udp_tx.datagrams,
                stats.udp_rx.datagrams,
                stats.path.lost_packets,
                stats.path.rtt.as_secs_f64() * 1e3,
                stats.path.cwnd
            ),
        )
        .field("datagrams_sent", stats.udp_tx.datagrams)
        .field("datagrams_received", stats.udp_rx.datagrams)
        .field("packets_lost", stats.path.lost_packets)
        .field("rtt_ms", stats.path.rtt.as_secs_f64() * 1e3),
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), endpoint.wait_idle()).await;
    Ok(summary)
}

/// True when the URL names a port that does not fit in 16 bits (http::Uri then reports none,
/// and the default port would be used silently).
fn port_out_of_range(uri: &http::Uri) -> bool {
    let Some(authority) = uri.authority() else {
        return false;
    };
    let host_port = authority.as_str().rsplit('@').next().unwrap_or("");
    let after_host = host_port
        .rfind(']')
        .map_or(host_port, |i| &host_port[i + 1..]);
    match after_host.rsplit_once(':') {
        Some((_, digits)) => !digits.is_empty() && uri.port_u16().is_none(),
        None => false,
    }
}
