//! [`H2Session`]: the [`Session`] of one HTTP/2 connection, sans-IO around [`Conn`].

use super::*;

/// The HTTP/2 side of one connection for the client loop: a [`Conn`] whose finished
/// streams go to the recorder as they end.
pub struct H2Session {
    conn: Conn,
    h2c: bool,
    answered: u64,
    /// No response yet: a protocol error then suggests the server does not speak HTTP/2.
    first: bool,
    used: bool,
    /// Whether this connection's header tables went to the recorder.
    tables_recorded: bool,
}

impl H2Session {
    /// A session for `ctx`'s client on a new connection (`h2c`: cleartext, prior knowledge);
    /// the preface and SETTINGS are queued.
    pub fn new(ctx: &ClientCtx, h2c: bool) -> H2Session {
        let depth = if ctx.no_keepalive { 1 } else { ctx.depth };
        H2Session {
            conn: Conn::with_options(&ctx.target, depth, ctx.push, ctx.header_tables),
            h2c,
            answered: 0,
            first: true,
            used: false,
            tables_recorded: false,
        }
    }

    /// Records the connection's header tables once: when the server's SETTINGS came, or at
    /// its end without them.
    fn record_tables(&mut self, ctx: &ClientCtx, ending: bool) {
        if !self.tables_recorded && (ending || self.conn.got_settings) {
            self.tables_recorded = true;
            ctx.rec
                .borrow_mut()
                .header_table(&self.conn.header_table_seen());
        }
    }

    /// Records finished streams.
    fn settle(&mut self, ctx: &mut ClientCtx) {
        for ev in self.conn.events.drain(..) {
            match ev.outcome {
                StreamEnd::Done {
                    status,
                    body,
                    uncompressed,
                    first_byte,
                    done,
                    pushed,
                } => {
                    let mut r = ctx.rec.borrow_mut();
                    r.received(done, 0, 0, body);
                    r.pushed_responses(ev.req.scheduled, pushed);
                    r.received_header_uncompressed(uncompressed);
                    r.response(&ev.req, first_byte, done, status);
                    self.answered += 1;
                    self.first = false;
                }
                StreamEnd::Refused => {
                    ctx.rec.borrow_mut().request_unsent(ev.req.scheduled);
                    ctx.plan.give_back(ev.req.ticket);
                }
                StreamEnd::Failed(kind, message) => {
                    // A protocol error before the server's SETTINGS usually means it does
                    // not speak HTTP/2 at all: say so (not when it plainly spoke HTTP/2).
                    let message =
                        if self.first && kind == ErrorKind::Protocol && !self.conn.got_settings {
                            format!("{message}: {}", hint(self.h2c))
                        } else {
                            message
                        };
                    ctx.rec.borrow_mut().request_failed(&ev.req, kind, &message);
                }
            }
        }
    }
}

impl From<ConnError> for Fail {
    fn from(e: ConnError) -> Fail {
        Fail {
            kind: e.kind,
            message: e.message,
            code: u64::from(e.code),
        }
    }
}

impl Session for H2Session {
    #[inline]
    fn can_submit(&self) -> bool {
        self.conn.can_open()
    }

    fn submit(&mut self, ctx: &mut ClientCtx, url: usize, req: Req) {
        self.conn.open(url, req);
        let mut rec = ctx.rec.borrow_mut();
        rec.request_started(req.scheduled, req.sent);
        rec.sent(0, 0, ctx.target.requests[url].h2_header_size);
        self.used = true;
    }

    fn inflight(&self) -> usize {
        self.conn.inflight()
    }

    fn oldest_sent(&self) -> Option<Instant> {
        self.conn.oldest_sent()
    }

    fn answered(&self) -> u64 {
        self.answered
    }

    fn used(&self) -> bool {
        self.used
    }

    fn idle_end(&mut self) -> Option<Outcome> {
        if let Some((_, code)) = self.conn.goaway {
            if code != NO_ERROR {
                let message = format!("h2: the server sent GOAWAY ({})", code_name(code));
                return Some(Err(Fail::new(ErrorKind::Reset, message)));
            }
            return Some(Ok(SessionEnd::Closed {
                answered: self.answered,
            }));
        }
        if self.conn.exhausted() {
            return Some(Ok(SessionEnd::Closed {
                answered: self.answered,
            }));
        }
        None
    }

    fn finish(&mut self, ctx: &mut ClientCtx, result: Outcome) -> SessionEnd {
        // Account what finished before the end, then fail what is left.
        self.settle(ctx);
        self.record_tables(ctx, true);
        let e = match result {
            Ok(end) => return end,
            Err(e) => e,
        };
        let message = if self.first && e.kind == ErrorKind::Protocol && !self.conn.got_settings {
            format!("{}: {}", e.message, hint(self.h2c))
        } else {
            e.message.clone()
        };
        let had_streams = self.conn.inflight() > 0;
        self.conn.fail_all(e.kind, &e.message);
        self.settle(ctx);
        if !had_streams && e.kind == ErrorKind::Reset && self.answered > 0 {
            // The server closed an idle kept-alive connection: open another.
            return SessionEnd::Closed {
                answered: self.answered,
            };
        }
        SessionEnd::Failed {
            answered: self.answered,
            kind: e.kind,
            message,
        }
    }
}

impl ByteSession for H2Session {
    const READ_BUF: usize = READ_BUF;
    const LABEL: &'static str = "h2: ";

    fn output(&mut self) -> &mut Vec<u8> {
        &mut self.conn.out
    }

    fn written(&mut self, ctx: &ClientCtx) {
        let n = self.conn.out.len() as u64;
        let header = std::mem::take(&mut self.conn.out_header);
        ctx.rec.borrow_mut().sent(n, header, 0);
        self.conn.out.clear();
    }

    fn on_read(&mut self, ctx: &mut ClientCtx, input: &[u8], new: usize, now: Instant) -> Consumed {
        let r = self.conn.receive(input, now);
        let header = std::mem::take(&mut self.conn.rx_header);
        ctx.rec.borrow_mut().received(now, new as u64, header, 0);
        self.record_tables(ctx, false);
        let used = r?;
        self.settle(ctx);
        Ok((used, None))
    }

    fn on_eof(&mut self, _ctx: &mut ClientCtx, _now: Instant) -> Outcome {
        Err(if self.conn.got_settings {
            Fail::new(ErrorKind::Reset, "h2: connection closed by the server")
        } else {
            let message = "h2: connection closed before the server's SETTINGS";
            Fail::new(ErrorKind::Protocol, message)
        })
    }

    fn on_read_error(&mut self, e: std::io::Error) -> Outcome {
        let message = format!("h2: read: {}", io_phrase(&e));
        Err(Fail::new(ErrorKind::of_io(&e), message))
    }

    fn input_too_large(&self) -> Fail {
        // receive() leaves at most one partial frame, which fits: not reached.
        Fail::new(ErrorKind::Protocol, "h2: frame larger than the read buffer")
    }

    fn goodbye(&mut self, result: &Outcome) {
        match result {
            // Tell the server we are done.
            Ok(_) => self.conn.goaway_frame(NO_ERROR),
            Err(e) if e.code != u64::from(NO_ERROR) || e.kind == ErrorKind::Protocol => {
                self.conn.goaway_frame(e.code as u32)
            }
            Err(_) => {}
        }
    }
}

fn hint(h2c: bool) -> String {
    format!(
        "does the server speak {}? try --proto h1 or auto",
        if h2c {
            "h2c (HTTP/2 over cleartext, prior knowledge)"
        } else {
            "HTTP/2"
        }
    )
}
