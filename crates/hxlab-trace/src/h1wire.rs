//! A passive HTTP/1.1 parser (sans-IO): request heads in the client→server direction, response
//! heads in the other. Bodies are not parsed here: the client counts them as it reads them.

use crate::event::Event;
use serde_json::{json, Value};

/// Largest head accepted before the parser gives up (a hostile peer cannot grow it further).
const MAX_HEAD: usize = 64 * 1024;

/// Both directions of one HTTP/1.1 connection.
pub struct H1Wire {
    send_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    /// True while response body bytes flow (ignored until the next request is sent).
    recv_in_body: bool,
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
            recv_in_body: false,
            broken: false,
        }
    }

    /// Bytes the client wrote. Requests carry no body (trace sends GET), so every byte
    /// belongs to a request head.
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
            // The response to this request starts fresh.
            self.recv_in_body = false;
            self.recv_buf.clear();
        }
        if self.send_buf.len() > MAX_HEAD {
            self.send_buf.clear();
        }
        out
    }

    /// Bytes the client read.
    pub fn feed_recv(&mut self, bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        if self.recv_in_body || self.broken {
            return out;
        }
        self.recv_buf.extend_from_slice(bytes);
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
            return out;
        }
        while let Some(end) = head_end(&self.recv_buf) {
            let head: Vec<u8> = self.recv_buf.drain(..end).collect();
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp.parse(&head) {
                Ok(httparse::Status::Complete(_)) => {
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
                        self.recv_in_body = true;
                        self.recv_buf.clear();
                        return out;
                    }
                }
                _ => {
                    self.broken = true;
                    out.push(Event::new(
                        "error",
                        "recv bytes that are not an HTTP/1.1 response head",
                    ));
                    return out;
                }
            }
        }
        if self.recv_buf.len() > MAX_HEAD {
            self.broken = true;
            out.push(Event::new(
                "error",
                "recv a response head larger than 64 KiB; not parsed",
            ));
        }
        out
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
        assert!(w.feed_recv(b"HTTP/1.1 500 X\r\n\r\n").is_empty());
        w.feed_send(b"GET /b HTTP/1.1\r\n\r\n");
        let ev = w.feed_recv(b"HTTP/1.1 404 Not Found\r\n\r\n");
        assert_eq!(ev[0].fields["status"], 404);
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
