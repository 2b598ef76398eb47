//! A passive HTTP/1.1 parser (sans-IO): request heads in the client→server direction, response
//! heads and body framing (Content-Length, chunked, or until the connection closes) in the
//! other, so it can say where each response ends and how many body bytes it carried.

use crate::event::Event;
use serde_json::{json, Value};

/// Largest head accepted before the parser gives up (a hostile peer cannot grow it further).
const MAX_HEAD: usize = 64 * 1024;

/// How the body of the response being read is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// Reading a response head.
    Head,
    /// `n` more body bytes (Content-Length).
    Length(u64),
    /// Chunked: reading a chunk-size line.
    ChunkSize,
    /// Chunked: `n` more bytes of chunk data.
    ChunkData(u64),
    /// Chunked: the CRLF after chunk data.
    ChunkEnd,
    /// Chunked: trailer lines up to an empty line.
    Trailers,
    /// Until the connection closes.
    UntilClose,
}

/// Both directions of one HTTP/1.1 connection.
pub struct H1Wire {
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    /// Methods of the requests sent and not yet answered (a HEAD response has no body).
    methods: std::collections::VecDeque<String>,
    body: Body,
    /// Body bytes of the response being read.
    body_bytes: u64,
    /// Set when the response bytes stopped looking like HTTP/1.1; nothing more is parsed.
    broken: bool,
}

impl Default for H1Wire {
    fn default() -> Self {
        Self::new()
    }
}

impl H1Wire {
    /// A fresh parser.
    pub fn new() -> H1Wire {
        H1Wire {
            send_buf: Vec::new(),
            recv_buf: Vec::new(),
            methods: std::collections::VecDeque::new(),
            body: Body::Head,
            body_bytes: 0,
            broken: false,
        }
    }

    /// Bytes the client wrote. Requests carry no body (trace sends GET), so every byte
    /// belongs to a request head.
    ///
    /// Every response a body ends emits an `h1_body` event with `body_bytes`; one read until
    /// the connection closes ends in [`H1Wire::closed`].
    pub fn feed_send(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        self.send_buf.extend_from_slice(bytes);
        while let Some(end) = head_end(&self.send_buf) {
            let head: Vec<u8> = self.send_buf.drain(..end).collect();
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut req = httparse::Request::new(&mut headers);
            match req.parse(&head) {
                Ok(httparse::Status::Complete(_)) => {
                    let line = format!(
                        "{} {} HTTP/1.{}",
                        req.method.unwrap_or("?"),
                        req.path.unwrap_or("?"),
                        req.version.unwrap_or(1)
                    );
                    self.methods
                        .push_back(req.method.unwrap_or("GET").to_string());
                    out.push(head_event(
                        "h1_request",
                        "send",
                        &line,
                        head.len(),
                        req.headers,
                    ));
                }
                _ => out.push(Event::new(
                    "error",
                    "send bytes that are not an HTTP/1.1 request head",
                )),
            }
        }
        if self.send_buf.len() > MAX_HEAD {
            self.send_buf.clear();
        }
        out
    }

    /// Bytes the client read.
    pub fn feed_recv(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        let mut rest = bytes.to_vec();
        while !self.broken && !rest.is_empty() {
            if self.body == Body::Head {
                self.recv_buf.extend_from_slice(&rest);
                if !self.heads(&mut out) || self.broken {
                    break;
                }
                // What followed the final head belongs to the body.
                rest = std::mem::take(&mut self.recv_buf);
            } else {
                let left = self.body_bytes_in(&rest, &mut out).len();
                rest.drain(..rest.len() - left);
            }
        }
        out
    }

    /// The connection closed: a body read until the close ends here.
    pub fn closed(&mut self) -> Vec<Event> {
        if self.body == Body::UntilClose {
            return vec![self.end_body()];
        }
        Vec::new()
    }

    fn end_body(&mut self) -> Event {
        let n = std::mem::take(&mut self.body_bytes);
        self.body = Body::Head;
        Event::new("h1_body", format!("recv body: {n} bytes (end of response)"))
            .field("proto", "h1")
            .field("body_bytes", n)
    }

    /// Body bytes from the start of `bytes`; returns what follows the body.
    fn body_bytes_in<'a>(&mut self, bytes: &'a [u8], out: &mut Vec<Event>) -> &'a [u8] {
        match self.body {
            Body::Length(left) | Body::ChunkData(left) => {
                let n = (bytes.len() as u64).min(left);
                self.body_bytes += n;
                let left = left - n;
                match (self.body, left) {
                    (Body::Length(_), 0) => out.push(self.end_body()),
                    (Body::Length(_), l) => self.body = Body::Length(l),
                    (_, 0) => self.body = Body::ChunkEnd,
                    (_, l) => self.body = Body::ChunkData(l),
                }
                &bytes[n as usize..]
            }
            Body::UntilClose => {
                self.body_bytes += bytes.len() as u64;
                &[]
            }
            Body::ChunkSize | Body::ChunkEnd | Body::Trailers => {
                // Line-based: collect up to a line end.
                let Some(nl) = bytes.iter().position(|b| *b == b'\n') else {
                    self.recv_buf.extend_from_slice(bytes);
                    if self.recv_buf.len() > MAX_HEAD {
                        self.broken = true;
                        out.push(Event::new("error", "recv a chunk line longer than 64 KiB"));
                    }
                    return &[];
                };
                self.recv_buf.extend_from_slice(&bytes[..nl]);
                let line = std::mem::take(&mut self.recv_buf);
                let line = line.strip_suffix(b"\r").unwrap_or(&line);
                match self.body {
                    Body::ChunkEnd => self.body = Body::ChunkSize,
                    Body::Trailers if line.is_empty() => out.push(self.end_body()),
                    Body::Trailers => {}
                    _ => {
                        let hex = line.split(|b| *b == b';').next().unwrap_or_default();
                        let size = std::str::from_utf8(hex)
                            .ok()
                            .and_then(|h| u64::from_str_radix(h.trim(), 16).ok());
                        match size {
                            Some(0) => self.body = Body::Trailers,
                            Some(n) => self.body = Body::ChunkData(n),
                            None => {
                                self.broken = true;
                                out.push(Event::new("error", "recv a malformed chunk size line"));
                            }
                        }
                    }
                }
                &bytes[nl + 1..]
            }
            Body::Head => bytes,
        }
    }

    /// Parses the response heads in `recv_buf`; true when a final response's head was
    /// parsed (what follows it in `recv_buf` is its body).
    fn heads(&mut self, out: &mut Vec<Event>) -> bool {
        let n = self.recv_buf.len().min(5);
        if !b"HTTP/".starts_with(&self.recv_buf[..n]) {
            self.broken = true;
            let b = &self.recv_buf;
            // A 9-byte HTTP/2 frame header of type SETTINGS on stream 0: an h2c-only server.
            let h2 = b.len() >= 9 && b[3] == 0x4 && b[5..9] == [0, 0, 0, 0];
            let hint = if h2 {
                " (an HTTP/2 SETTINGS frame: the server speaks h2c; try --proto h2c)"
            } else {
                ""
            };
            let first: String = b.iter().take(16).map(|x| format!("{x:02x}")).collect();
            out.push(
                Event::new(
                    "error",
                    format!("recv bytes that are not an HTTP/1.1 response: {first}{hint}"),
                )
                .field("dir", "recv")
                .field("first_bytes", first)
                .field("looks_like_h2", h2),
            );
            return false;
        }
        while let Some(end) = head_end(&self.recv_buf) {
            let head: Vec<u8> = self.recv_buf.drain(..end).collect();
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            if !matches!(resp.parse(&head), Ok(httparse::Status::Complete(_))) {
                self.broken = true;
                out.push(Event::new(
                    "error",
                    "recv bytes that are not an HTTP/1.1 response head",
                ));
                return false;
            }
            let code = resp.code.unwrap_or(0);
            let line = format!(
                "HTTP/1.{} {} {}",
                resp.version.unwrap_or(1),
                code,
                resp.reason.unwrap_or("")
            );
            out.push(
                head_event(
                    "h1_response",
                    "recv",
                    line.trim_end(),
                    head.len(),
                    resp.headers,
                )
                .field("status", code),
            );
            if code >= 200 {
                let head_request = self.methods.pop_front().as_deref() == Some("HEAD");
                self.body = framing(code, head_request, resp.headers);
                if self.body == Body::Length(0) {
                    out.push(self.end_body());
                }
                return true;
            }
        }
        if self.recv_buf.len() > MAX_HEAD {
            self.broken = true;
            out.push(Event::new(
                "error",
                "recv a response head larger than 64 KiB; not parsed",
            ));
        }
        false
    }
}

/// How a final response's body is framed (RFC 9112 §6.3).
fn framing(code: u16, head_request: bool, headers: &[httparse::Header<'_>]) -> Body {
    if head_request || code == 204 || code == 304 {
        return Body::Length(0);
    }
    let chunked = headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value)
                .to_ascii_lowercase()
                .contains("chunked")
    });
    if chunked {
        return Body::ChunkSize;
    }
    let length = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("content-length"))
        .and_then(|h| {
            std::str::from_utf8(h.value)
                .ok()?
                .trim()
                .parse::<u64>()
                .ok()
        });
    match length {
        Some(n) => Body::Length(n),
        None => Body::UntilClose,
    }
}

fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4)
}

fn head_event(
    kind: &'static str,
    dir: &str,
    line: &str,
    size: usize,
    headers: &[httparse::Header<'_>],
) -> Event {
    let mut e = Event::new(kind, format!("{dir} {line}  ({size} bytes head)"))
        .field("proto", "h1")
        .field("dir", dir)
        .field("line", line)
        .field("head_size", size);
    let mut list = Vec::new();
    for h in headers {
        let v = String::from_utf8_lossy(h.value).into_owned();
        e = e.detail(format!("{}: {v}", h.name));
        list.push(json!([h.name, v]));
    }
    e.field("headers", Value::Array(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(ev: &[Event]) -> Vec<u64> {
        ev.iter()
            .filter(|e| e.kind == "h1_body")
            .map(|e| e.fields["body_bytes"].as_u64().unwrap())
            .collect()
    }

    #[test]
    fn request_then_response_then_next_request() {
        let mut w = H1Wire::new();
        let ev = w.feed_send(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n");
        assert_eq!(ev[0].fields["line"], "GET /a HTTP/1.1");
        let mut ev = w.feed_recv(b"HTTP/1.1 200 OK\r\ncontent-le");
        ev.extend(w.feed_recv(b"ngth: 5\r\n\r\nhel"));
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].fields["status"], 200);
        // Body bytes that look like a head are not parsed as one.
        let ev = w.feed_recv(b"lo");
        assert_eq!(bodies(&ev), [5]);
        w.feed_send(b"GET /b HTTP/1.1\r\n\r\n");
        let ev = w.feed_recv(b"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\n\r\nHTT");
        assert_eq!(ev[0].fields["status"], 404);
        assert_eq!(bodies(&ev), [3]);
    }

    #[test]
    fn chunked_interim_head_and_until_close_at_every_split() {
        let wire: &[u8] = b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nx-t: 1\r\n\r\nHTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n\r\nuntil close";
        for split in 0..wire.len() {
            let mut w = H1Wire::new();
            w.feed_send(b"GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n");
            let mut ev = w.feed_recv(&wire[..split]);
            ev.extend(w.feed_recv(&wire[split..]));
            ev.extend(w.closed());
            assert_eq!(bodies(&ev), [21, 0, 11], "split at {split}");
            let statuses: Vec<u64> = ev
                .iter()
                .filter(|e| e.kind == "h1_response")
                .map(|e| e.fields["status"].as_u64().unwrap())
                .collect();
            assert_eq!(statuses, [103, 200, 204, 200], "split at {split}");
        }
        let mut w = H1Wire::new();
        w.feed_send(b"HEAD / HTTP/1.1\r\n\r\n");
        let ev = w.feed_recv(b"HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n");
        assert_eq!(bodies(&ev), [0]);
        let mut w = H1Wire::new();
        w.feed_send(b"GET / HTTP/1.1\r\n\r\n");
        let ev = w.feed_recv(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n");
        assert!(ev.iter().any(|e| e.kind == "error"));
    }

    #[test]
    fn h2_settings_instead_of_h1_is_reported() {
        let mut w = H1Wire::new();
        w.feed_send(b"GET / HTTP/1.1\r\n\r\n");
        let ev = w.feed_recv(&[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100]);
        assert_eq!(ev.len(), 1);
        assert_eq!(ev[0].fields["looks_like_h2"], true);
    }
}
