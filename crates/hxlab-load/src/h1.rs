//! HTTP/1.1 driver: a lean request writer and incremental response parser on a raw TCP or
//! TLS stream, with keep-alive, `--no-keepalive` and pipelining (`-m` requests in flight).
//!
//! Requests are prebuilt bytes (see [`crate::target::Target`]); the read and write buffers
//! live as long as the client, so the hot path allocates nothing per request.

use crate::net::{io_phrase, Stream};
use crate::plan::Next;
use crate::recorder::ErrorKind;
use crate::worker::{ClientCtx, SessionEnd};
use std::collections::VecDeque;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Largest response head accepted (status line + headers).
const MAX_HEAD: usize = 64 * 1024;
/// Read buffer size.
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
    scheduled: std::time::Instant,
    sent: std::time::Instant,
    ticket: u64,
    first_byte: Option<std::time::Instant>,
}

/// Buffers kept by a client across its connections.
pub struct H1Buffers {
    write: Vec<u8>,
    read: Vec<u8>,
    inflight: VecDeque<InFlight>,
}

impl H1Buffers {
    /// Buffers for `depth` pipelined requests.
    pub fn new(depth: usize) -> H1Buffers {
        H1Buffers {
            write: Vec::with_capacity(4096),
            read: vec![0; READ_BUF],
            inflight: VecDeque::with_capacity(depth),
        }
    }
}

enum Wake {
    Read(std::io::Result<usize>),
    Due,
    Timeout,
}

/// Runs requests on one HTTP/1.1 connection until the plan is done, the connection ends, or
/// (with --no-keepalive) one response is complete.
pub async fn session(ctx: &mut ClientCtx, stream: &mut Stream, bufs: &mut H1Buffers) -> SessionEnd {
    let depth = if ctx.no_keepalive { 1 } else { ctx.depth };
    let mut parser = ResponseParser::new();
    parser.head_request = ctx.target.is_head();
    let (mut start, mut end) = (0usize, 0usize);
    let mut answered = 0u64;
    let mut closing = false;
    let body = ctx.target.body.clone();
    let timeout = ctx.timeout;
    let mut timer = std::pin::pin!(tokio::time::sleep_until((Instant::now() + timeout).into()));
    let mut due_timer = crate::precise::Sleep::until(Instant::now());
    bufs.inflight.clear();

    // One clock reading per loop turn, taken when the wake-up is handled (as h2load's libev
    // loop time); the request a response frees is sent microseconds later in the same turn.
    let mut now = Instant::now();
    let end_reason = 'conn: loop {
        // Fill the pipeline.
        let mut wait_until = None;
        let mut header_bytes = 0u64;
        while bufs.inflight.len() < depth && !closing {
            match ctx.next(now) {
                Next::Go { scheduled, ticket } => {
                    let i = ctx.next_url();
                    let t = &ctx.target.requests[i];
                    let head = if ctx.no_keepalive {
                        &t.h1_head_close
                    } else {
                        &t.h1_head
                    };
                    bufs.write.extend_from_slice(head);
                    header_bytes += head.len() as u64;
                    if let Some(b) = &body {
                        bufs.write.extend_from_slice(b);
                    }
                    bufs.inflight.push_back(InFlight {
                        scheduled,
                        sent: now,
                        ticket,
                        first_byte: None,
                    });
                    ctx.rec.borrow_mut().request_started(scheduled, now);
                    if ctx.no_keepalive {
                        closing = true;
                    }
                }
                Next::Wait(t) => {
                    wait_until = Some(t);
                    break;
                }
                Next::Done => break,
            }
        }
        if !bufs.write.is_empty() {
            let n = bufs.write.len() as u64;
            let write =
                tokio::time::timeout_at((now + timeout).into(), stream.write_all(&bufs.write))
                    .await;
            bufs.write.clear();
            match write {
                Ok(Ok(())) => ctx.rec.borrow_mut().sent(n, header_bytes, header_bytes),
                Ok(Err(e)) => {
                    break 'conn Err((ErrorKind::of_io(&e), format!("write: {}", io_phrase(&e))))
                }
                Err(_) => break 'conn Err((ErrorKind::Timeout, "write timed out".to_string())),
            }
        }
        if bufs.inflight.is_empty() {
            if let Some(t) = wait_until {
                due_timer.reset(t);
                (&mut due_timer).await;
                now = Instant::now();
                continue;
            }
            break 'conn Ok(if closing {
                SessionEnd::Closed { answered }
            } else {
                SessionEnd::PlanDone
            });
        }
        if let Some(t) = wait_until {
            due_timer.reset(t);
        }

        // Read until something completes, a request becomes due, or the oldest times out.
        if end == bufs.read.len() {
            if start > 0 {
                bufs.read.copy_within(start..end, 0);
                end -= start;
                start = 0;
            } else {
                break 'conn Err((
                    ErrorKind::Protocol,
                    ParseError("response head larger than 64 KiB").to_string(),
                ));
            }
        }
        let wake = tokio::select! {
            biased;
            r = stream.read(&mut bufs.read[end..]) => Wake::Read(r),
            _ = &mut due_timer, if wait_until.is_some() => Wake::Due,
            _ = &mut timer => Wake::Timeout,
        };
        now = Instant::now();
        let n = match wake {
            Wake::Due => continue,
            Wake::Timeout => {
                let oldest = bufs.inflight.front().map(|f| f.sent + timeout);
                match oldest {
                    Some(deadline) if deadline <= now => {
                        break 'conn Err((
                            ErrorKind::Timeout,
                            format!("no response within {timeout:?}"),
                        ))
                    }
                    // Deadlines only move forward, so the timer is re-armed only when it fires.
                    Some(deadline) => timer.as_mut().reset(deadline.into()),
                    None => timer.as_mut().reset((now + timeout).into()),
                }
                continue;
            }
            Wake::Read(Ok(0)) => {
                if let Some(Step::Done { status, .. }) = parser.finish_at_eof() {
                    if let Some(f) = bufs.inflight.pop_front() {
                        ctx.rec.borrow_mut().response(
                            f.scheduled,
                            f.sent,
                            f.first_byte.unwrap_or(now),
                            now,
                            status,
                        );
                        answered += 1;
                    }
                    break 'conn Ok(SessionEnd::Closed { answered });
                }
                if (closing && parser.idle() && bufs.inflight.is_empty())
                    || stale(answered, &parser)
                {
                    break 'conn Ok(SessionEnd::Closed { answered });
                }
                break 'conn Err((ErrorKind::Reset, "connection closed by peer".to_string()));
            }
            Wake::Read(Err(e))
                if ErrorKind::of_io(&e) == ErrorKind::Reset && stale(answered, &parser) =>
            {
                break 'conn Ok(SessionEnd::Closed { answered })
            }
            Wake::Read(Err(e)) => break 'conn Err((ErrorKind::of_io(&e), io_phrase(&e))),
            Wake::Read(Ok(n)) => n,
        };
        end += n;
        let mut header = 0u64;
        let mut body_bytes = 0u64;
        loop {
            let step = match parser.step(&bufs.read[start..end]) {
                Ok(s) => s,
                Err(e) => {
                    ctx.rec.borrow_mut().received(n as u64, header, body_bytes);
                    break 'conn Err((ErrorKind::Protocol, e.to_string()));
                }
            };
            start += step.0;
            match step.1 {
                Step::NeedMore => break,
                Step::Head { len, .. } => {
                    header += len as u64;
                    if let Some(f) = bufs.inflight.front_mut() {
                        f.first_byte = Some(now);
                    }
                }
                Step::Interim { len } => header += len as u64,
                Step::Body(k) => body_bytes += k as u64,
                Step::Done { status, close } => {
                    let Some(f) = bufs.inflight.pop_front() else {
                        ctx.rec.borrow_mut().received(n as u64, header, body_bytes);
                        break 'conn Err((
                            ErrorKind::Protocol,
                            "response without a request".to_string(),
                        ));
                    };
                    let mut rec = ctx.rec.borrow_mut();
                    rec.response(
                        f.scheduled,
                        f.sent,
                        f.first_byte.unwrap_or(now),
                        now,
                        status,
                    );
                    answered += 1;
                    if close {
                        rec.received(n as u64, header, body_bytes);
                        rec.received_header_uncompressed(header);
                        drop(rec);
                        break 'conn Ok(SessionEnd::Closed { answered });
                    }
                }
            }
        }
        if start == end {
            start = 0;
            end = 0;
        }
        let mut rec = ctx.rec.borrow_mut();
        rec.received(n as u64, header, body_bytes);
        rec.received_header_uncompressed(header);
        drop(rec);
        if closing && bufs.inflight.is_empty() {
            break 'conn Ok(SessionEnd::Closed { answered });
        }
    };

    match end_reason {
        Ok(SessionEnd::Closed { answered }) => {
            // Pipelined requests the server will not answer (it said close): send again.
            let mut rec = ctx.rec.borrow_mut();
            while let Some(f) = bufs.inflight.pop_back() {
                rec.request_unsent(f.scheduled);
                ctx.plan.give_back(f.ticket);
            }
            SessionEnd::Closed { answered }
        }
        Ok(other) => other,
        Err((kind, message)) => {
            let mut rec = ctx.rec.borrow_mut();
            for f in bufs.inflight.drain(..) {
                rec.request_failed(f.scheduled, kind, &message);
            }
            SessionEnd::Failed {
                answered,
                kind,
                message,
            }
        }
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
