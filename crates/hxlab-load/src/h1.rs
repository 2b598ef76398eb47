//! HTTP/1.1: a lean request writer and incremental response parser on a raw TCP or
//! TLS stream, with keep-alive, `--no-keepalive` and pipelining (`-m` requests in flight).
//!
//! [`H1Session`] is the sans-IO [`Session`] (requests appended to one write buffer,
//! responses framed in order by hxlab-wire's [`ResponseParser`], the one HTTP/1.1 response
//! framer, which the frame view uses too); the client loop
//! ([`crate::session::drive`] over [`crate::session::Tcp`]) moves its bytes. Requests are
//! prebuilt bytes (see [`crate::target::Target`]); the write buffer (empty until the first
//! request) and the read buffer for bytes left over between reads live as long as the client,
//! so the hot path allocates nothing per request (reads go to the worker's shared buffer: see
//! [`crate::session`]).

use crate::client::{ClientCtx, SessionEnd};
use crate::net::io_phrase;
use crate::recorder::ErrorKind;
use crate::session::{ByteSession, Consumed, Fail, Outcome, Req, Session};
pub use hxlab_wire::h1::{ParseError, ResponseParser, Step};
use std::collections::VecDeque;
use std::time::Instant;

/// Read size (of the worker's shared read buffer; the most a connection keeps of a split
/// head).
const READ_BUF: usize = 64 * 1024;

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
            .response(&f.req, first_byte, now, status);
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
                    rec.request_failed(&f.req, kind, &message);
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
    // An HTTP/1.1 server closes idle keep-alive connections at any time (RFC 9112 §9.3.1)
    // and says nothing first; any byte or end of stream on an idle connection ends it.
    const CHECK_IDLE_CLOSE: bool = true;

    fn output(&mut self) -> &mut Vec<u8> {
        &mut self.write
    }

    fn written(&mut self, ctx: &ClientCtx) {
        let n = self.write.len() as u64;
        let header = std::mem::take(&mut self.write_header);
        ctx.rec.borrow_mut().sent(n, header, header);
        self.write.clear();
    }

    fn on_read(&mut self, ctx: &mut ClientCtx, input: &[u8], new: usize, now: Instant) -> Consumed {
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

    /// The end of a connection with requests on it fails them, as h2 and h3 fail theirs:
    /// they were sent, and the client cannot know whether the server acted on them (RFC
    /// 9112 §9.3.1). A connection the server closed while it was idle is noticed before a
    /// request goes on it (`CHECK_IDLE_CLOSE`), so a keep-alive timeout fails nothing.
    fn on_eof(&mut self, ctx: &mut ClientCtx, now: Instant) -> Outcome {
        if let Some(Step::Done { status, .. }) = self.parser.finish_at_eof() {
            self.answer(ctx, status, now);
        }
        if self.parser.idle() && self.inflight.is_empty() {
            return Ok(SessionEnd::Closed {
                answered: self.answered,
            });
        }
        Err(Fail::new(ErrorKind::Reset, "connection closed by peer"))
    }

    fn on_read_error(&mut self, e: std::io::Error) -> Outcome {
        Err(Fail::new(ErrorKind::of_io(&e), io_phrase(&e)))
    }

    fn input_too_large(&self) -> Fail {
        let message = ParseError("response head larger than 64 KiB").to_string();
        Fail::new(ErrorKind::Protocol, message)
    }
}
