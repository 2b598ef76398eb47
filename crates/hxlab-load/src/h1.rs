//! HTTP/1.1: a lean request writer and incremental response parser on a raw TCP or
//! TLS stream, with keep-alive, `--no-keepalive` and pipelining (`-m` requests in flight).
//!
//! [`H1Session`] is the sans-IO [`Session`] (requests appended to one write buffer,
//! responses parsed in order by [`ResponseParser`]); the client loop
//! ([`crate::session::drive`] over [`crate::session::Tcp`]) moves its bytes. Requests are
//! prebuilt bytes (see [`crate::target::Target`]); the write buffer (empty until the first
//! request) and the read buffer for bytes left over between reads live as long as the client,
//! so the hot path allocates nothing per request (reads go to the worker's shared buffer: see
//! [`crate::session`]).

use crate::client::{ClientCtx, SessionEnd};
use crate::net::io_phrase;
use crate::recorder::ErrorKind;
use crate::session::{ByteSession, Fail, Outcome, Req, Session};
use std::collections::VecDeque;
use std::time::Instant;

/// Largest response head accepted (status line + headers).
const MAX_HEAD: usize = 64 * 1024;
/// Read size (of the worker's shared read buffer; the most a connection keeps of a split
/// head).
const READ_BUF: usize = 64 * 1024;

/// A response head or body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub &'static str);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed HTTP/1.1 response: {}", self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Done,
}

/// What one parser step produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// More bytes are needed.
    NeedMore,
    /// A final response head of `len` bytes with this status.
    Head {
        /// Status code.
        status: u16,
        /// Bytes of the head (status line, headers, blank line).
        len: usize,
    },
    /// An interim (1xx) head of `len` bytes, skipped.
    Interim {
        /// Bytes of the head.
        len: usize,
    },
    /// `n` body bytes (decoded: chunk framing excluded).
    Body(usize),
    /// The response is complete; `close`: the server will close the connection.
    Done {
        /// Status code.
        status: u16,
        /// The connection ends after this response.
        close: bool,
    },
}

/// Incremental HTTP/1.1 response parser (one response at a time, in order).
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    status: u16,
    close: bool,
    scanned: usize,
    /// The request was HEAD: no body whatever the headers say.
    pub head_request: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn parse_u64(s: &[u8], radix: u32) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = (c as char).to_digit(radix)? as u64;
        v = v.checked_mul(radix as u64)?.checked_add(d)?;
    }
    Some(v)
}

/// Searchers built once: `memmem::find` builds one per call, which showed in profiles.
static CRLF: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n"));
static CRLFCRLF: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n\r\n"));

fn find_crlf(buf: &[u8]) -> Option<usize> {
    CRLF.find(buf)
}

impl ResponseParser {
    /// A parser waiting for a response head.
    pub fn new() -> ResponseParser {
        ResponseParser {
            state: State::Head,
            status: 0,
            close: false,
            scanned: 0,
            head_request: false,
        }
    }

    /// True between responses (no byte of the next response consumed yet).
    pub fn idle(&self) -> bool {
        self.state == State::Head && self.scanned == 0
    }

    /// The body runs until the connection closes.
    pub fn until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// Completes an until-close body when the peer closes the connection.
    pub fn finish_at_eof(&mut self) -> Option<Step> {
        if self.state == State::UntilClose {
            self.state = State::Head;
            return Some(Step::Done {
                status: self.status,
                close: true,
            });
        }
        None
    }

    /// Consumes a prefix of `buf`; returns the bytes used and what they were.
    pub fn step(&mut self, buf: &[u8]) -> Result<(usize, Step), ParseError> {
        match self.state {
            State::Head => self.head(buf),
            State::Body(left) => {
                let n = (buf.len() as u64).min(left) as usize;
                if n == 0 {
                    return Ok((0, Step::NeedMore));
                }
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::Done
                } else {
                    State::Body(left)
                };
                Ok((n, Step::Body(n)))
            }
            State::Done => {
                self.state = State::Head;
                Ok((
                    0,
                    Step::Done {
                        status: self.status,
                        close: self.close,
                    },
                ))
            }
            State::UntilClose => Ok((
                buf.len(),
                if buf.is_empty() {
                    Step::NeedMore
                } else {
                    Step::Body(buf.len())
                },
            )),
            State::ChunkSize => {
                let Some(i) = find_crlf(buf) else {
                    return if buf.len() > 1024 {
                        Err(ParseError("chunk size line too long"))
                    } else {
                        Ok((0, Step::NeedMore))
                    };
                };
                let line = &buf[..i];
                let size = match line.iter().position(|&c| c == b';') {
                    Some(j) => &line[..j],
                    None => line,
                };
                let size = parse_u64(trim(size), 16).ok_or(ParseError("bad chunk size"))?;
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData(size)
                };
                Ok((i + 2, Step::Body(0)))
            }
            State::ChunkData(left) => {
                let n = (buf.len() as u64).min(left) as usize;
                if n == 0 {
                    return Ok((0, Step::NeedMore));
                }
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::ChunkDataEnd
                } else {
                    State::ChunkData(left)
                };
                Ok((n, Step::Body(n)))
            }
            State::ChunkDataEnd => {
                if buf.len() < 2 {
                    return Ok((0, Step::NeedMore));
                }
                if &buf[..2] != b"\r\n" {
                    return Err(ParseError("chunk not followed by CRLF"));
                }
                self.state = State::ChunkSize;
                Ok((2, Step::Body(0)))
            }
            State::Trailers => {
                let Some(i) = find_crlf(buf) else {
                    return if buf.len() > MAX_HEAD {
                        Err(ParseError("trailers too long"))
                    } else {
                        Ok((0, Step::NeedMore))
                    };
                };
                if i == 0 {
                    self.state = State::Done;
                }
                Ok((i + 2, Step::Body(0)))
            }
        }
    }

    fn head(&mut self, buf: &[u8]) -> Result<(usize, Step), ParseError> {
        let from = self.scanned.saturating_sub(3);
        let end = match CRLFCRLF.find(&buf[from..]) {
            Some(i) => from + i + 4,
            None => {
                if buf.len() > MAX_HEAD {
                    return Err(ParseError("response head larger than 64 KiB"));
                }
                // Say at once when what came cannot begin a response (typically a body longer
                // than its Content-Length), instead of waiting for a head until the timeout.
                let seen = &buf[..buf.len().min(7)];
                if !b"HTTP/1.".starts_with(seen) {
                    return Err(ParseError(
                        "bytes that cannot begin a response (a body longer than its Content-Length?)",
                    ));
                }
                self.scanned = buf.len();
                return Ok((0, Step::NeedMore));
            }
        };
        self.scanned = 0;
        let head = &buf[..end - 4];
        // Lines found with memchr (SIMD) rather than a byte-by-byte split.
        let mut line_start = 0usize;
        let mut lines = memchr::memchr_iter(b'\n', head)
            .chain(std::iter::once(head.len()))
            .map(move |i| {
                let line = &head[line_start..i];
                line_start = i + 1;
                line
            });
        let status_line = lines.next().unwrap_or_default();
        if status_line.len() < 12 || !status_line.starts_with(b"HTTP/1.") || status_line[8] != b' '
        {
            return Err(ParseError("bad status line"));
        }
        let http10 = status_line[7] == b'0';
        let status =
            parse_u64(&status_line[9..12], 10).ok_or(ParseError("bad status code"))? as u16;
        if !(100..=999).contains(&status) {
            return Err(ParseError("bad status code"));
        }
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut close = http10;
        for line in lines {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let Some(colon) = memchr::memchr(b':', line) else {
                return Err(ParseError("header line without colon"));
            };
            let name = &line[..colon];
            let value = trim(&line[colon + 1..]);
            match name.len() {
                14 if name.eq_ignore_ascii_case(b"content-length") => {
                    length = Some(parse_u64(value, 10).ok_or(ParseError("bad content-length"))?);
                }
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                    chunked = value.len() >= 7
                        && value[value.len() - 7..].eq_ignore_ascii_case(b"chunked");
                }
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    if value.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if value.eq_ignore_ascii_case(b"keep-alive") {
                        close = false;
                    }
                }
                _ => {}
            }
        }
        if (100..200).contains(&status) && status != 101 {
            return Ok((end, Step::Interim { len: end }));
        }
        self.status = status;
        self.close = close;
        self.state = if self.head_request || status == 204 || status == 304 {
            State::Done
        } else if chunked {
            State::ChunkSize
        } else if let Some(n) = length {
            if n == 0 {
                State::Done
            } else {
                State::Body(n)
            }
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok((end, Step::Head { status, len: end }))
    }
}

/// A kept-alive connection the server closed between two responses (it may close idle
/// persistent connections at any time, RFC 9112 §9.3.1): the requests on it were not
/// answered at all and are sent again on a new connection. A connection that never answered
/// anything is a failure instead, so a server that only drops connections ends the run.
fn stale(answered: u64, parser: &ResponseParser) -> bool {
    answered > 0 && parser.idle()
}

/// A request on the wire, waiting for its response.
#[derive(Clone, Copy, Debug)]
struct InFlight {
    req: Req,
    first_byte: Option<Instant>,
}

/// The HTTP/1.1 side of one connection, without IO: requests are appended to one write
/// buffer, responses parsed in order from what the client loop read. Made once per client
/// and [`H1Session::start`]ed on each of its connections, so the hot path allocates nothing.
pub struct H1Session {
    write: Vec<u8>,
    /// Head bytes queued in `write`.
    write_header: u64,
    inflight: VecDeque<InFlight>,
    parser: ResponseParser,
    depth: usize,
    no_keepalive: bool,
    answered: u64,
    used: bool,
}

impl H1Session {
    /// A session for `depth` pipelined requests.
    pub fn new(depth: usize) -> H1Session {
        H1Session {
            write: Vec::new(),
            write_header: 0,
            inflight: VecDeque::with_capacity(depth),
            parser: ResponseParser::new(),
            depth,
            no_keepalive: false,
            answered: 0,
            used: false,
        }
    }

    /// Starts on a new connection of `ctx`'s client.
    pub fn start(&mut self, ctx: &ClientCtx) {
        self.no_keepalive = ctx.no_keepalive;
        self.depth = if ctx.no_keepalive { 1 } else { ctx.h1_depth };
        self.parser = ResponseParser::new();
        self.parser.head_request = ctx.target.is_head();
        self.write.clear();
        self.write_header = 0;
        self.inflight.clear();
        self.answered = 0;
        self.used = false;
    }

    /// The response of the oldest request is complete.
    fn answer(&mut self, ctx: &ClientCtx, status: u16, now: Instant) -> bool {
        let Some(f) = self.inflight.pop_front() else {
            return false;
        };
        let first_byte = f.first_byte.unwrap_or(now);
        ctx.rec
            .borrow_mut()
            .response(f.req.scheduled, f.req.sent, first_byte, now, status);
        self.answered += 1;
        true
    }
}

impl Session for H1Session {
    #[inline]
    fn can_submit(&self) -> bool {
        self.inflight.len() < self.depth && !(self.no_keepalive && self.used)
    }

    fn submit(&mut self, ctx: &mut ClientCtx, url: usize, req: Req) {
        let t = &ctx.target.requests[url];
        let head = if self.no_keepalive {
            &t.h1_head_close
        } else {
            &t.h1_head
        };
        self.write.extend_from_slice(head);
        self.write_header += head.len() as u64;
        if let Some(b) = &ctx.target.body {
            self.write.extend_from_slice(b);
        }
        self.inflight.push_back(InFlight {
            req,
            first_byte: None,
        });
        ctx.rec
            .borrow_mut()
            .request_started(req.scheduled, req.sent);
        self.used = true;
    }

    fn inflight(&self) -> usize {
        self.inflight.len()
    }

    fn oldest_sent(&self) -> Option<Instant> {
        self.inflight.front().map(|f| f.req.sent)
    }

    fn answered(&self) -> u64 {
        self.answered
    }

    fn used(&self) -> bool {
        self.used
    }

    fn idle_end(&mut self) -> Option<Outcome> {
        None
    }

    fn finish(&mut self, ctx: &mut ClientCtx, result: Outcome) -> SessionEnd {
        let answered = self.answered;
        match result {
            Ok(SessionEnd::Closed { .. }) => {
                // Pipelined requests the server will not answer (it said close): send again.
                let mut rec = ctx.rec.borrow_mut();
                while let Some(f) = self.inflight.pop_back() {
                    rec.request_unsent(f.req.scheduled);
                    ctx.plan.give_back(f.req.ticket);
                }
                SessionEnd::Closed { answered }
            }
            Ok(other) => other,
            Err(Fail { kind, message, .. }) => {
                let mut rec = ctx.rec.borrow_mut();
                for f in self.inflight.drain(..) {
                    rec.request_failed(f.req.scheduled, kind, &message);
                }
                SessionEnd::Failed {
                    answered,
                    kind,
                    message,
                }
            }
        }
    }
}

impl ByteSession for H1Session {
    const READ_BUF: usize = READ_BUF;
    const LABEL: &'static str = "";

    fn output(&mut self) -> &mut Vec<u8> {
        &mut self.write
    }

    fn written(&mut self, ctx: &ClientCtx) {
        let n = self.write.len() as u64;
        let header = std::mem::take(&mut self.write_header);
        ctx.rec.borrow_mut().sent(n, header, header);
        self.write.clear();
    }

    fn on_read(
        &mut self,
        ctx: &mut ClientCtx,
        input: &[u8],
        new: usize,
        now: Instant,
    ) -> Result<(usize, Option<SessionEnd>), Fail> {
        let (mut used, mut header, mut body) = (0usize, 0u64, 0u64);
        let mut end = None;
        let result = loop {
            let (n, step) = match self.parser.step(&input[used..]) {
                Ok(s) => s,
                Err(e) => break Err(Fail::new(ErrorKind::Protocol, e.to_string())),
            };
            used += n;
            match step {
                Step::NeedMore => break Ok(()),
                Step::Head { len, .. } => {
                    header += len as u64;
                    if let Some(f) = self.inflight.front_mut() {
                        f.first_byte = Some(now);
                    }
                }
                Step::Interim { len } => header += len as u64,
                Step::Body(k) => body += k as u64,
                Step::Done { status, close } => {
                    if !self.answer(ctx, status, now) {
                        let message = "response without a request";
                        break Err(Fail::new(ErrorKind::Protocol, message));
                    }
                    if close {
                        end = Some(SessionEnd::Closed {
                            answered: self.answered,
                        });
                        break Ok(());
                    }
                }
            }
        };
        let mut rec = ctx.rec.borrow_mut();
        rec.received(now, new as u64, header, body);
        if result.is_ok() {
            rec.received_header_uncompressed(header);
        }
        result.map(|()| (used, end))
    }

    fn on_eof(&mut self, ctx: &mut ClientCtx, now: Instant) -> Outcome {
        if let Some(Step::Done { status, .. }) = self.parser.finish_at_eof() {
            self.answer(ctx, status, now);
            return Ok(SessionEnd::Closed {
                answered: self.answered,
            });
        }
        if (self.no_keepalive && self.parser.idle() && self.inflight.is_empty())
            || stale(self.answered, &self.parser)
        {
            return Ok(SessionEnd::Closed {
                answered: self.answered,
            });
        }
        Err(Fail::new(ErrorKind::Reset, "connection closed by peer"))
    }

    fn on_read_error(&mut self, e: std::io::Error) -> Outcome {
        let kind = ErrorKind::of_io(&e);
        if kind == ErrorKind::Reset && stale(self.answered, &self.parser) {
            return Ok(SessionEnd::Closed {
                answered: self.answered,
            });
        }
        Err(Fail::new(kind, io_phrase(&e)))
    }

    fn input_too_large(&self) -> Fail {
        let message = ParseError("response head larger than 64 KiB").to_string();
        Fail::new(ErrorKind::Protocol, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(p: &mut ResponseParser, data: &[u8], chunk: usize) -> Vec<Step> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut start = 0;
        for piece in data.chunks(chunk) {
            buf.extend_from_slice(piece);
            loop {
                let (used, step) = p.step(&buf[start..]).unwrap();
                start += used;
                if step == Step::NeedMore {
                    break;
                }
                if step != Step::Body(0) {
                    out.push(step);
                }
            }
        }
        out
    }

    fn summarize(steps: &[Step]) -> (Vec<u16>, usize) {
        let done = steps
            .iter()
            .filter_map(|s| {
                if let Step::Done { status, .. } = s {
                    Some(*status)
                } else {
                    None
                }
            })
            .collect();
        let body = steps
            .iter()
            .map(|s| if let Step::Body(n) = s { *n } else { 0 })
            .sum();
        (done, body)
    }

    #[test]
    fn pipelined_length_and_chunked_responses_in_any_split() {
        let data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
        for chunk in [1, 2, 3, 7, 64, data.len()] {
            let mut p = ResponseParser::new();
            let steps = parse_all(&mut p, data, chunk);
            assert_eq!(
                summarize(&steps),
                (vec![200, 404, 204], 10),
                "chunk {chunk}: {steps:?}"
            );
            assert!(matches!(steps.last(), Some(Step::Done { close: true, .. })));
        }
    }

    /// A body longer than its Content-Length: the extra bytes are refused as soon as they
    /// cannot begin a response, not waited on until the request timeout.
    #[test]
    fn bytes_after_a_body_that_cannot_begin_a_response_are_an_error_at_once() {
        let mut p = ResponseParser::new();
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello world";
        let mut used = 0;
        let mut done = 0;
        let err = loop {
            match p.step(&input[used..]) {
                Ok((_, Step::NeedMore)) => panic!("waited for more after {done} responses"),
                Ok((n, step)) => {
                    used += n;
                    done += usize::from(matches!(step, Step::Done { .. }));
                }
                Err(e) => break e,
            }
        };
        assert_eq!(done, 1);
        assert!(err.to_string().contains("Content-Length"), "{err}");
        // A pipelined response split anywhere still parses.
        let mut p = ResponseParser::new();
        assert_eq!(p.step(b"HTT").unwrap(), (0, Step::NeedMore));
    }

    #[test]
    fn until_close_body_and_bad_input() {
        let mut p = ResponseParser::new();
        let (used, step) = p.step(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert_eq!(
            step,
            Step::Head {
                status: 200,
                len: 19
            }
        );
        assert_eq!(
            p.step(&b"HTTP/1.0 200 OK\r\n\r\nabc"[used..]).unwrap(),
            (3, Step::Body(3))
        );
        assert_eq!(
            p.finish_at_eof(),
            Some(Step::Done {
                status: 200,
                close: true
            })
        );

        for bad in [
            &b"SMTP 220 hello\r\n\r\n"[..],
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
        ] {
            assert!(
                ResponseParser::new().step(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut p = ResponseParser::new();
        let (u, _) = p
            .step(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
        assert!(u > 0);
        assert!(p.step(b"zz\r\n").is_err());
        let huge = vec![b'a'; MAX_HEAD + 10];
        assert!(ResponseParser::new().step(&huge).is_err());
    }

    #[test]
    fn head_request_has_no_body() {
        let mut p = ResponseParser::new();
        p.head_request = true;
        let (u, s) = p
            .step(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            .unwrap();
        assert_eq!(
            s,
            Step::Head {
                status: 200,
                len: u
            }
        );
        assert_eq!(
            p.step(b"").unwrap().1,
            Step::Done {
                status: 200,
                close: false
            }
        );
    }
}
