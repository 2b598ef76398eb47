//! A passive HTTP/1.1 parser (sans-IO): request heads in the client→server direction, response
//! heads and body framing (Content-Length, chunked, or until the connection closes) in the
//! other, so it can say where each response ends and how many body bytes it carried. Responses
//! are framed by hxlab-wire's [`ResponseParser`], the framer the load client counts with, so
//! the view and the load run agree on where every response ends.

use crate::event::Event;
use hxlab_wire::h1::{head_fields, ResponseParser, Step, MAX_HEAD};
use serde_json::{json, Value};

/// Both directions of one HTTP/1.1 connection.
pub struct H1Wire {
    send_buf: Vec<u8>,
    /// Received bytes the framer has not consumed yet (a split head or chunk line).
    recv_buf: Vec<u8>,
    /// Methods of the requests sent and not yet answered (a HEAD response has no body).
    methods: std::collections::VecDeque<String>,
    framer: ResponseParser,
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
            framer: ResponseParser::new(),
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
                    let fields: Vec<(&[u8], &[u8])> = req
                        .headers
                        .iter()
                        .map(|h| (h.name.as_bytes(), h.value))
                        .collect();
                    out.push(head_event("h1_request", "send", &line, head.len(), &fields));
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
        if self.broken {
            return out;
        }
        self.recv_buf.extend_from_slice(bytes);
        let buf = std::mem::take(&mut self.recv_buf);
        let mut used = 0;
        while !self.broken {
            if self.framer.idle() {
                // The next response answers the oldest request not yet answered.
                self.framer.head_request = self.methods.front().map(String::as_str) == Some("HEAD");
            }
            match self.framer.step(&buf[used..]) {
                Ok((_, Step::NeedMore)) => break,
                Ok((n, step)) => {
                    self.framed(&buf[used..used + n], step, &mut out);
                    used += n;
                }
                Err(e) => self.refuse(&buf[used..], &e, &mut out),
            }
        }
        if !self.broken {
            self.recv_buf = buf[used..].to_vec();
        }
        out
    }

    /// The connection closed: a body read until the close ends here.
    pub fn closed(&mut self) -> Vec<Event> {
        match self.framer.finish_at_eof() {
            Some(_) => vec![self.end_body()],
            None => Vec::new(),
        }
    }

    fn end_body(&mut self) -> Event {
        let n = std::mem::take(&mut self.body_bytes);
        Event::new("h1_body", format!("recv body: {n} bytes (end of response)"))
            .field("proto", "h1")
            .field("body_bytes", n)
    }

    /// What the framer said of the bytes `used` (a head, body bytes, the end of a response).
    fn framed(&mut self, used: &[u8], step: Step, out: &mut Vec<Event>) {
        match step {
            Step::Head { .. } | Step::Interim { .. } => {
                if matches!(step, Step::Head { .. }) {
                    self.methods.pop_front();
                }
                let (line, fields) = head_fields(used);
                let line = String::from_utf8_lossy(line).into_owned();
                let fields: Vec<_> = fields.filter_map(Result::ok).collect();
                // The framer checked the status line: three digits at 9..12.
                let code: u16 = line.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
                out.push(
                    head_event("h1_response", "recv", line.trim_end(), used.len(), &fields)
                        .field("status", code),
                );
            }
            Step::Body(n) => self.body_bytes += n as u64,
            Step::Done { .. } => out.push(self.end_body()),
            Step::NeedMore => {}
        }
    }

    /// Bytes the framer refused: say why once, and parse nothing more.
    fn refuse(&mut self, rest: &[u8], e: &hxlab_wire::h1::ParseError, out: &mut Vec<Event>) {
        self.broken = true;
        let n = rest.len().min(5);
        if self.framer.idle() && !b"HTTP/".starts_with(&rest[..n]) {
            let b = rest;
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
            return;
        }
        out.push(Event::new("error", format!("recv {e}")));
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
    headers: &[(&[u8], &[u8])],
) -> Event {
    let mut e = Event::new(kind, format!("{dir} {line}  ({size} bytes head)"))
        .field("proto", "h1")
        .field("dir", dir)
        .field("line", line)
        .field("head_size", size);
    let mut list = Vec::new();
    for (name, value) in headers {
        let (n, v) = (
            String::from_utf8_lossy(name),
            String::from_utf8_lossy(value),
        );
        e = e.detail(format!("{n}: {v}"));
        list.push(json!([n, v]));
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
