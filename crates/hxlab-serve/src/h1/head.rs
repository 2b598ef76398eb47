//! What an HTTP/1.1 request means to the router, and the response head written straight into
//! the connection's output: the same fields [`Reply::head`] gives h2 and h3 (Date, type,
//! length, Cache-Control, Alt-Svc, a replay's own), without building a header map.

use crate::reply::Reply;
use crate::routes::{headers_endpoint, route_target, Ctx, Target};
use crate::stats::Protocol;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use hxlab_wire::h1_request::{RequestHead, Version};

/// Routes a request read by the framer. Origin-form targets (`/path?query`, nearly all) are
/// split in place; other forms go through `Uri`.
pub(super) fn route(ctx: &Ctx, head: &RequestHead<'_>, method: &Method, proto: Protocol) -> Reply {
    // Only a replay looks at the host.
    let host = match ctx.replay {
        Some(_) => head.host.and_then(|h| std::str::from_utf8(h).ok()),
        None => None,
    };
    let echo = || headers_endpoint(method, &uri_of(head), &header_map(head), proto);
    if head.target.starts_with('/') {
        // '?' is ASCII, so the split falls between characters.
        let (path, query) = match head.target.bytes().position(|b| b == b'?') {
            Some(q) => (&head.target[..q], Some(&head.target[q + 1..])),
            None => (head.target, None),
        };
        let target = Target {
            method,
            path,
            query,
            host,
        };
        return route_target(ctx, &target, proto, echo);
    }
    let Ok(uri) = head.target.parse::<Uri>() else {
        let msg = format!(
            "bad request: request target {:?} is not a URI\n",
            head.target
        );
        return Reply::text(StatusCode::BAD_REQUEST, msg);
    };
    let target = Target {
        method,
        path: uri.path(),
        query: uri.query(),
        host: uri.host().or(host),
    };
    route_target(ctx, &target, proto, echo)
}

fn uri_of(head: &RequestHead<'_>) -> Uri {
    head.target
        .parse()
        .unwrap_or_else(|_| Uri::from_static("/"))
}

/// Every field of the request, for `/headers`.
fn header_map(head: &RequestHead<'_>) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in head.fields() {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) {
            map.append(n, v);
        }
    }
    map
}

/// How the connection goes on after a response.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum After {
    /// HTTP/1.1 keep-alive: nothing to say.
    KeepAlive,
    /// An HTTP/1.0 client that asked for keep-alive: `Connection: keep-alive`.
    KeepAlive10,
    /// `Connection: close`, then the connection closes.
    Close,
}

impl After {
    /// What a request's head asks of the connection after its answer.
    pub(super) fn of(head: &RequestHead<'_>) -> After {
        match (head.keep_alive, head.version) {
            (false, _) => After::Close,
            (true, Version::Http10) => After::KeepAlive10,
            (true, Version::Http11) => After::KeepAlive,
        }
    }
}

/// The request's method (GET and HEAD, nearly every request, without a lookup).
pub(super) fn method(head: &RequestHead<'_>) -> Method {
    match head.method {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        m => Method::from_bytes(m.as_bytes()).unwrap_or(Method::GET),
    }
}

/// Appends the head of `reply` to `out`: its status line and the fields every protocol
/// sends ([`Reply::each_field`]), then what `after` says of the connection. Returns the
/// head's length (for `/stats`).
pub(super) fn write(out: &mut Vec<u8>, ctx: &Ctx, reply: &Reply, after: After) -> u64 {
    let start = out.len();
    status_line(out, reply.status);
    reply.each_field(ctx.alt_svc.as_ref(), |name, value| {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    });
    out.extend_from_slice(match after {
        After::KeepAlive => b"\r\n".as_slice(),
        After::KeepAlive10 => b"connection: keep-alive\r\n\r\n",
        After::Close => b"connection: close\r\n\r\n",
    });
    (out.len() - start) as u64
}

/// The interim answer to `Expect: 100-continue`.
pub(super) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    let line: &[u8] = match status.as_u16() {
        200 => b"HTTP/1.1 200 OK\r\n",
        404 => b"HTTP/1.1 404 Not Found\r\n",
        400 => b"HTTP/1.1 400 Bad Request\r\n",
        _ => {
            out.extend_from_slice(b"HTTP/1.1 ");
            out.extend_from_slice(status.as_str().as_bytes());
            out.push(b' ');
            out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
            out.extend_from_slice(b"\r\n");
            return;
        }
    };
    out.extend_from_slice(line);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::decimal;

    #[test]
    fn decimals_and_status_lines_are_written_as_http_says() {
        let mut out = Vec::new();
        for n in [0u64, 7, 10, 102_400, u64::MAX] {
            assert_eq!(decimal(n, &mut [0; 20]), n.to_string().as_bytes());
        }
        status_line(&mut out, StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
        assert_eq!(out, b"HTTP/1.1 431 Request Header Fields Too Large\r\n");
    }
}
