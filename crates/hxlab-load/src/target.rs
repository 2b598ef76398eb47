//! The target: URLs parsed once into what every driver needs (address, authority, paths,
//! prebuilt HTTP/1.1 request bytes and HTTP/2-3 request parts).

use crate::{LoadConfig, LoadError};
use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Method, Uri};
use std::net::{SocketAddr, ToSocketAddrs};

/// One origin (scheme, host, port) and the paths requested round-robin.
#[derive(Clone, Debug)]
pub struct Target {
    /// https:// (TLS or QUIC) rather than http://.
    pub https: bool,
    /// Host as written in the URL (no brackets for IPv6).
    pub host: String,
    /// Port (default 80/443).
    pub port: u16,
    /// Resolved address (the first one the resolver returned).
    pub addr: SocketAddr,
    /// `host[:port]` for Host / :authority (or the user's Host header).
    pub authority: String,
    /// One entry per URL, in order.
    pub requests: Vec<RequestTemplate>,
    /// Request method.
    pub method: Method,
    /// Request body, if any.
    pub body: Option<bytes::Bytes>,
}

/// What is sent for one URL.
#[derive(Clone, Debug)]
pub struct RequestTemplate {
    /// Full URI (for h2/h3 pseudo-headers).
    pub uri: Uri,
    /// Extra headers for h2/h3 (user headers, user-agent, content-length).
    pub headers: HeaderMap,
    /// The whole HTTP/1.1 request head, keep-alive form.
    pub h1_head: Vec<u8>,
    /// The HTTP/1.1 request head with `Connection: close` (for --no-keepalive).
    pub h1_head_close: Vec<u8>,
    /// Uncompressed size of the h2/h3 request header list (name + value of every field,
    /// pseudo-headers included, as h2load counts).
    pub h2_header_size: u64,
    /// The whole HTTP/3 request stream: one HEADERS frame (QPACK, static table and
    /// literals) and a DATA frame with the body, if any.
    pub h3_request: bytes::Bytes,
    /// Payload size of that HEADERS frame (the QPACK wire size).
    pub h3_header_payload: u64,
    /// The HTTP/3 request head's fields, in order (pseudo-headers first), for encoders with
    /// a dynamic table.
    pub h3_fields: Vec<(Vec<u8>, Vec<u8>)>,
}

fn url_err(url: &str, reason: impl Into<String>) -> LoadError {
    LoadError::Url {
        url: url.to_string(),
        reason: reason.into(),
    }
}

/// The one origin of all `urls` (scheme, host, port) and the parsed URLs. A URL after the
/// first may be a bare path (`/b`), as in h2load, and is on the first one's origin.
fn origin(urls: &[String]) -> Result<(bool, String, u16, Vec<Uri>), LoadError> {
    let first = urls
        .first()
        .ok_or_else(|| LoadError::Config("no URL given".into()))?;
    let mut origin: Option<(bool, String, u16)> = None;
    let mut uris = Vec::new();
    for url in urls {
        if url.starts_with('/') && origin.is_some() {
            let path: http::uri::PathAndQuery =
                url.parse().map_err(|e| url_err(url, format!("{e}")))?;
            uris.push(Uri::from(path));
            continue;
        }
        let uri: Uri = url.parse().map_err(|e| url_err(url, format!("{e}")))?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(s) => return Err(url_err(url, format!("scheme {s:?} is not http or https"))),
            None => return Err(url_err(url, "needs a scheme: http:// or https://")),
        };
        let host = uri.host().ok_or_else(|| url_err(url, "no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        if host.is_empty() {
            return Err(url_err(url, "no host"));
        }
        // http::Uri accepts any digits as a port but returns None for one past 65535.
        if port_out_of_range(&uri) {
            return Err(url_err(url, "port must be from 1 to 65535"));
        }
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        match &origin {
            None => origin = Some((https, host, port)),
            Some(o) if *o != (https, host.clone(), port) => {
                return Err(url_err(url, "all URLs must share scheme, host and port"))
            }
            Some(_) => {}
        }
        uris.push(uri);
    }
    let (https, host, port) = origin.ok_or_else(|| url_err(first, "no host"))?;
    Ok((https, host, port, uris))
}

impl Target {
    /// Parses and resolves the URLs of `cfg`; all must share scheme, host and port (or be
    /// bare paths after the first). The address is `connect_to`'s when given.
    pub fn from_config(cfg: &LoadConfig) -> Result<Target, LoadError> {
        let (https, host, port, uris) = origin(&cfg.urls)?;
        let addr = resolve(cfg, &host, port)?;
        let method = match (&cfg.method, &cfg.body) {
            (Some(m), _) => Method::from_bytes(m.as_bytes())
                .map_err(|_| LoadError::Config(format!("bad method {m:?}")))?,
            (None, Some(_)) => Method::POST,
            (None, None) => Method::GET,
        };
        let body = cfg.body.clone().map(bytes::Bytes::from);
        let default_port = if https { 443 } else { 80 };
        let url_authority = if port == default_port {
            bracket(&host)
        } else {
            format!("{}:{port}", bracket(&host))
        };
        let (authority, user_headers) = request_headers(cfg, url_authority, body.as_ref())?;
        let mut target = Target {
            https,
            host,
            port,
            addr,
            authority,
            requests: Vec::with_capacity(uris.len()),
            method,
            body,
        };
        for uri in uris {
            let template = target.template(&uri, &user_headers)?;
            target.requests.push(template);
        }
        Ok(target)
    }

    /// What is sent for `uri`: the HTTP/1.1 head (both forms), the h2/h3 URI and headers,
    /// the HTTP/3 request stream.
    fn template(
        &self,
        uri: &Uri,
        user_headers: &[(HeaderName, HeaderValue)],
    ) -> Result<RequestTemplate, LoadError> {
        let (method, https, authority) = (&self.method, self.https, &self.authority);
        let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
        let path = if path.is_empty() { "/" } else { path };
        let mut headers = HeaderMap::new();
        let mut h1 = format!(
            "{} {path} HTTP/1.1\r\nHost: {authority}\r\n",
            method.as_str()
        )
        .into_bytes();
        let mut h2_size = (":method".len()
            + method.as_str().len()
            + ":scheme".len()
            + if https { 5 } else { 4 }
            + ":authority".len()
            + authority.len()
            + ":path".len()
            + path.len()) as u64;
        for (n, v) in user_headers {
            headers.append(n.clone(), v.clone());
            h1.extend_from_slice(n.as_str().as_bytes());
            h1.extend_from_slice(b": ");
            h1.extend_from_slice(v.as_bytes());
            h1.extend_from_slice(b"\r\n");
            h2_size += (n.as_str().len() + v.len()) as u64;
        }
        let mut h1_close = h1.clone();
        h1_close.extend_from_slice(b"Connection: close\r\n\r\n");
        h1.extend_from_slice(b"\r\n");
        // h2/h3 carry the authority as :authority; rebuild the URI so it matches.
        let full: Uri = Uri::builder()
            .scheme(if https { "https" } else { "http" })
            .authority(authority.as_str())
            .path_and_query(path)
            .build()
            .map_err(|e| url_err(&uri.to_string(), format!("{e}")))?;
        let h3_fields = h3_fields(method, https, authority, path, &headers);
        let (h3_request, h3_header_payload) = h3_static_request(&h3_fields, self.body.as_deref());
        Ok(RequestTemplate {
            uri: full,
            headers,
            h1_head: h1,
            h1_head_close: h1_close,
            h2_header_size: h2_size,
            h3_request,
            h3_header_payload,
            h3_fields,
        })
    }

    /// An `http::Request` for URL `i` (h2/h3).
    pub fn http_request(&self, i: usize) -> http::Request<()> {
        let t = &self.requests[i];
        let mut req = http::Request::new(());
        *req.method_mut() = self.method.clone();
        *req.uri_mut() = t.uri.clone();
        *req.headers_mut() = t.headers.clone();
        req
    }

    /// True when the request method never gets a response body (HEAD).
    pub fn is_head(&self) -> bool {
        self.method == Method::HEAD
    }
}

/// The address to connect to: `--connect-to`'s host and port (its port defaulting to the
/// URL's), or the URL's; the first address the resolver returns.
fn resolve(cfg: &LoadConfig, host: &str, port: u16) -> Result<SocketAddr, LoadError> {
    let (host, port) = match &cfg.connect_to {
        Some(c) => (c.host.as_str(), c.port.unwrap_or(port)),
        None => (host, port),
    };
    let failed = |reason: String| LoadError::Resolve {
        host: host.to_string(),
        reason,
    };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| failed(e.to_string()))?
        .next()
        .ok_or_else(|| failed("no address".into()))
}

/// The request's authority (the user's `Host` header wins over the URL's, as with curl and
/// h2load) and its other headers: the user's, a user-agent unless given, content-length
/// with a body.
fn request_headers(
    cfg: &LoadConfig,
    url_authority: String,
    body: Option<&bytes::Bytes>,
) -> Result<(String, Vec<(HeaderName, HeaderValue)>), LoadError> {
    let mut authority = url_authority;
    let mut user_headers: Vec<(HeaderName, HeaderValue)> = Vec::new();
    let mut has_user_agent = false;
    for (name, value) in &cfg.headers {
        let n = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| LoadError::Config(format!("bad header name {name:?}")))?;
        let v = HeaderValue::from_str(value.trim())
            .map_err(|_| LoadError::Config(format!("bad value for header {name:?}")))?;
        if n == http::header::HOST {
            authority = value.trim().to_string();
            continue;
        }
        if n == http::header::USER_AGENT {
            has_user_agent = true;
        }
        user_headers.push((n, v));
    }
    if !has_user_agent {
        user_headers.push((
            http::header::USER_AGENT,
            HeaderValue::from_static(concat!("hxlab/", env!("CARGO_PKG_VERSION"))),
        ));
    }
    if let Some(b) = body {
        user_headers.push((http::header::CONTENT_LENGTH, HeaderValue::from(b.len())));
    }
    Ok((authority, user_headers))
}

/// An HTTP/3 frame head (type and length varints).
fn h3_frame_head(out: &mut Vec<u8>, kind: u8, len: usize) {
    out.push(kind);
    hxlab_wire::varint::put(out, len as u64);
}

/// The fields of an HTTP/3 request head: pseudo-headers, then `headers`.
fn h3_fields(
    method: &Method,
    https: bool,
    authority: &str,
    path: &str,
    headers: &HeaderMap,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let scheme: &[u8] = if https { b"https" } else { b"http" };
    let pseudo: [(&[u8], &[u8]); 4] = [
        (b":method", method.as_str().as_bytes()),
        (b":scheme", scheme),
        (b":authority", authority.as_bytes()),
        (b":path", path.as_bytes()),
    ];
    pseudo
        .into_iter()
        .chain(
            headers
                .iter()
                .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes())),
        )
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect()
}

/// The static-only HTTP/3 request stream of `fields` (what is sent while the encoder has no
/// table) and its HEADERS payload size.
fn h3_static_request(fields: &[(Vec<u8>, Vec<u8>)], body: Option<&[u8]>) -> (bytes::Bytes, u64) {
    let mut section = Vec::new();
    crate::qpack::encode_field_section(
        fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
        &mut section,
    );
    (h3_stream_bytes(&section, body), section.len() as u64)
}

/// The bytes of an HTTP/3 request stream: a HEADERS frame with field section `section`,
/// then a DATA frame with `body`, if any.
pub(crate) fn h3_stream_bytes(section: &[u8], body: Option<&[u8]>) -> bytes::Bytes {
    let mut out = Vec::with_capacity(section.len() + 16 + body.map_or(0, <[u8]>::len));
    h3_frame_head(&mut out, 0x01, section.len());
    out.extend_from_slice(section);
    if let Some(b) = body.filter(|b| !b.is_empty()) {
        h3_frame_head(&mut out, 0x00, b.len());
        out.extend_from_slice(b);
    }
    bytes::Bytes::from(out)
}

fn bracket(host: &str) -> String {
    if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_string()
    }
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
