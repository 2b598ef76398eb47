//! Responses: the head (an optional 103, PUSH_PROMISEs, HEADERS), then the body as DATA
//! frames within the client's windows. A small in-memory body that fits the windows goes out
//! with its head at once and leaves no stream behind; anything else (a delay, a large or
//! file body, no window) stays as a stream the connection drives: [`Conn::fill`] sends what
//! the windows allow, [`Conn::on_timer`] ends delays and gives up stalled streams.

use super::head::{early_hints_block, push_request_block, put_response_block};
use super::state::{Conn, ConnError, Pending, Phase, Sending, Stream, MAX_FRAME};
use crate::body::BodySpec;
use crate::reply::Reply;
use crate::routes::route;
use hxlab_wire::h2::{code, flag, frame, write_head};
use hxlab_wire::priority::{Priority, Signal};
use std::task::{Context, Poll};
use tokio::time::Instant;

/// Output buffered beyond this waits for the socket before more is produced or read.
pub(crate) const HIGH_WATER: usize = 256 << 10;
/// With a send low-water mark: frames are built only when everything built before was
/// taken by the socket, at most the mark's size at a time (and at most one full DATA frame),
/// so the scheduler's choice is made when the kernel wants more, not hundreds of KB earlier.
/// rustls holds at most as much in records (listen.rs).
pub(crate) fn late_batch(lowat: hxlab_core::sched::Lowat) -> usize {
    lowat
        .bytes()
        .map_or(HIGH_WATER, |b| (b as usize).clamp(1 << 10, MAX_FRAME))
}

/// A client stream's request order on the connection (its id's), for the scheduler.
pub(super) fn order(id: u32) -> u64 {
    u64::from(id >> 1)
}

impl Conn {
    /// Answers stream `id`, whose request is complete: at once, or after its delay.
    /// `window`: the stream's send window if it was open already.
    pub(super) fn respond(&mut self, id: u32, mut p: Pending, window: Option<i64>) {
        let window = window.unwrap_or(self.peer.initial_window);
        let priority = p.priority;
        if let Some(file) = p.reply.lookup.take() {
            let phase = Phase::Opening(Box::new((p, file.start())));
            // A lookup that does not end (a hung file system) is given up like a stall.
            let until = self.now() + self.ctx.limits.send_timeout;
            self.streams
                .push(Stream::answering(id, phase, window, Some(until), priority));
            self.opening = true;
            return;
        }
        if !p.reply.delay.is_zero() {
            let until = self.now() + p.reply.delay;
            self.streams.push(Stream::answering(
                id,
                Phase::Delayed(Box::new(p)),
                window,
                Some(until),
                priority,
            ));
            return;
        }
        self.start(id, p, window);
    }

    /// Sends the response head (and what of the body fits) for stream `id`.
    fn start(&mut self, id: u32, p: Pending, window: i64) {
        let Pending {
            mut reply,
            head_only,
            scheme,
            authority,
            priority,
            since,
        } = p;
        self.ctx.stats.priority(self.proto, priority.0, priority.1);
        if let Some(link) = &reply.early_hints {
            let mut block = Vec::with_capacity(64);
            early_hints_block(link, &mut self.hpack, &mut block);
            self.write_headers(id, 0, &block);
        }
        let promised = self.promise(id, &reply.push, &scheme, &authority);
        let mut block = Vec::new();
        let ctx = self.ctx.clone();
        put_response_block(&ctx, &reply, &mut self.hpack, &mut block);
        if let Some(table) = self.hpack.first_table_limit() {
            ctx.stats.encoder_table(self.proto, table);
        }
        ctx.stats
            .response_head_bytes(self.proto, block.len() as u64);
        let body = std::mem::replace(&mut reply.body, BodySpec::Empty);
        let body = if head_only { BodySpec::Empty } else { body };
        let len = body.len();
        let counted = reply.counted;
        if len == 0 {
            self.write_headers(id, flag::END_STREAM, &block);
            self.completed(counted, since);
        } else {
            self.write_headers(id, 0, &block);
            // The fast path: a small body in memory that the windows and one frame take,
            // when no other response waits for its turn (else the scheduler decides).
            let fits = len as i64 <= window.min(self.send_window)
                && len as usize <= self.peer.max_frame
                && self.queue.len() == 0;
            match body.in_memory() {
                Some(bytes) if fits && self.out.len() < HIGH_WATER => {
                    write_head(
                        &mut self.out,
                        bytes.len(),
                        frame::DATA,
                        flag::END_STREAM,
                        id,
                    );
                    self.out.extend_from_slice(&bytes);
                    self.send_window -= len as i64;
                    if counted {
                        self.ctx.stats.body_bytes(self.proto, len);
                    }
                    self.completed(counted, since);
                }
                _ => self.queue_body(id, body, (counted, since), window, priority),
            }
        }
        for (pid, r) in promised {
            let window = self.peer.initial_window;
            match r.lookup {
                Some(_) => self.respond(pid, Pending::bare(r), Some(window)),
                None => self.start(pid, Pending::bare(r), window),
            }
        }
    }

    fn queue_body(
        &mut self,
        id: u32,
        body: BodySpec,
        (counted, since): (bool, Instant),
        window: i64,
        priority: (Priority, Signal),
    ) {
        let phase = Phase::Sending(Box::new(Sending {
            source: body.into_source(),
            counted,
            since,
        }));
        self.streams
            .push(Stream::answering(id, phase, window, None, priority));
        self.queue.push(u64::from(id), priority.0, order(id));
    }

    /// A response went out whole (its request's head came at `since`).
    fn completed(&mut self, counted: bool, since: Instant) {
        self.cancels = self.cancels.saturating_sub(1);
        if counted {
            self.ctx.stats.request_done(self.proto, since);
        }
    }

    /// PUSH_PROMISEs for `paths` on stream `id`, as far as the client allows pushes; the
    /// pushed streams and their replies.
    fn promise(
        &mut self,
        id: u32,
        paths: &[String],
        scheme: &[u8],
        authority: &[u8],
    ) -> Vec<(u32, Reply)> {
        let mut promised = Vec::new();
        if paths.is_empty() || !self.peer.push || scheme.is_empty() {
            return promised;
        }
        let pushed_open = self.streams.iter().filter(|s| s.id % 2 == 0).count() as u32;
        for path in paths {
            if pushed_open + promised.len() as u32 >= self.peer.max_streams
                || self.next_push_id > hxlab_wire::h2::MAX_STREAM_ID - 1
            {
                break;
            }
            let Ok(uri) = path.parse::<http::Uri>() else {
                continue;
            };
            let pid = self.next_push_id;
            self.next_push_id += 2;
            let mut block = pid.to_be_bytes().to_vec();
            let request = (scheme, authority, path.as_bytes());
            push_request_block(request, &mut self.hpack, &mut block);
            self.write_frames(id, frame::PUSH_PROMISE, 0, &block);
            let r = route(
                &self.ctx,
                &http::Method::GET,
                &uri,
                &http::HeaderMap::new(),
                self.proto,
            );
            promised.push((pid, r));
        }
        promised
    }

    /// A HEADERS frame (and CONTINUATIONs when the block is over the peer's frame size).
    fn write_headers(&mut self, id: u32, flags: u8, block: &[u8]) {
        self.write_frames(id, frame::HEADERS, flags, block);
    }

    fn write_frames(&mut self, id: u32, kind: u8, flags: u8, block: &[u8]) {
        let max = self.peer.max_frame.min(MAX_FRAME);
        let mut chunks = block.chunks(max).peekable();
        let first = chunks.next().unwrap_or(&[]);
        let end = if chunks.peek().is_none() {
            flag::END_HEADERS
        } else {
            0
        };
        write_head(&mut self.out, first.len(), kind, flags | end, id);
        self.out.extend_from_slice(first);
        while let Some(c) = chunks.next() {
            let end = if chunks.peek().is_none() {
                flag::END_HEADERS
            } else {
                0
            };
            write_head(&mut self.out, c.len(), frame::CONTINUATION, end, id);
            self.out.extend_from_slice(c);
        }
    }

    /// Starts the replies whose `/static/` file lookup is done; true if any was. A lookup
    /// not done yet wakes `cx` when it is.
    pub(crate) fn poll_opening(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.opening {
            return false;
        }
        let mut done = Vec::new();
        let mut waiting = false;
        for s in &mut self.streams {
            if let Phase::Opening(o) = &mut s.phase {
                match o.1.poll(cx) {
                    Poll::Ready(reply) => done.push((s.id, reply)),
                    Poll::Pending => waiting = true,
                }
            }
        }
        self.opening = waiting;
        let any = !done.is_empty();
        for (id, reply) in done {
            let Some(i) = self.stream_index(id) else {
                continue;
            };
            let s = self.streams.swap_remove(i);
            if let Phase::Opening(o) = s.phase {
                let (mut p, _) = *o;
                p.reply = reply;
                p.priority = (s.priority, s.signal);
                self.start(id, p, s.window);
            }
        }
        any
    }

    /// Builds DATA frames until `out` holds `until` bytes, each for the stream the scheduler
    /// picks at that moment among those with window ([`crate::schedule`]). A file body
    /// that is not read yet wakes `cx` and yields its turn.
    pub(crate) fn fill(&mut self, cx: &mut Context<'_>, until: usize) {
        // Streams whose body is not read yet, skipped for the rest of this pass.
        let mut not_ready: Vec<u64> = Vec::new();
        let mut blocked: Vec<u64> = Vec::new();
        while self.out.len() < until {
            let streams = &self.streams;
            let conn_open = self.send_window > 0;
            let Some(id) = self.queue.next(|id| {
                if not_ready.contains(&id) {
                    return false;
                }
                let open = conn_open
                    && streams
                        .iter()
                        .find(|s| u64::from(s.id) == id)
                        .is_none_or(|s| s.window > 0);
                if !open {
                    blocked.push(id);
                }
                open
            }) else {
                break;
            };
            let Some(i) = self.stream_index(id as u32) else {
                self.queue.remove(id);
                continue;
            };
            match self.send_some(i, cx) {
                Some(true) => {}
                Some(false) => self.queue.remove(id),
                None => not_ready.push(id),
            }
        }
        if !blocked.is_empty() {
            // Woken again by WINDOW_UPDATE or SETTINGS; --send-timeout counts from now.
            let now = self.now();
            for s in &mut self.streams {
                if blocked.contains(&u64::from(s.id)) && (s.window <= 0 || self.send_window <= 0) {
                    s.blocked_since.get_or_insert(now);
                }
            }
        }
    }

    /// One DATA frame for `streams[i]`: Some(more to send), or None when its body is not
    /// ready yet.
    fn send_some(&mut self, i: usize, cx: &mut Context<'_>) -> Option<bool> {
        let max = (self.send_window.min(self.streams[i].window) as usize).min(self.peer.max_frame);
        let s = &mut self.streams[i];
        let id = s.id;
        let Phase::Sending(body) = &mut s.phase else {
            return Some(false);
        };
        let chunk = match body.source.poll_chunk(cx, max) {
            Poll::Pending => return None,
            Poll::Ready(Ok(Some(c))) => c,
            Poll::Ready(Ok(None) | Err(_)) => {
                self.reset(id, code::INTERNAL_ERROR);
                return Some(false);
            }
        };
        let n = chunk.len();
        let end = body.source.remaining() == 0;
        let (counted, since) = (body.counted, body.since);
        s.window -= n as i64;
        s.blocked_since = None;
        self.send_window -= n as i64;
        if self.out.capacity() - self.out.len() < n + 9 {
            // Straight to the batch's full size: doubling up to it would copy it over and over.
            let want = HIGH_WATER + MAX_FRAME + 64;
            self.out.reserve(want.saturating_sub(self.out.len()));
        }
        write_head(
            &mut self.out,
            n,
            frame::DATA,
            if end { flag::END_STREAM } else { 0 },
            id,
        );
        self.out.extend_from_slice(&chunk);
        if counted {
            self.ctx.stats.body_bytes(self.proto, n as u64);
        }
        if end {
            self.streams.swap_remove(i);
            self.completed(counted, since);
        }
        Some(!end)
    }

    /// The earliest time a stream waits for: a delay's end, a stalled body's or window's
    /// limit.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let send_timeout = self.ctx.limits.send_timeout;
        let head = self
            .block
            .as_ref()
            .map(|b| b.since + self.ctx.limits.head_timeout);
        self.streams
            .iter()
            .filter_map(|s| match s.blocked_since {
                Some(b) => Some(b + send_timeout),
                None => s.deadline,
            })
            .chain(head)
            .min()
    }

    /// Acts on every stream whose time came: delays end, stalled request bodies and
    /// responses without window for --send-timeout are reset (CANCEL) and freed; a header
    /// block not ended within --head-timeout closes the connection (GOAWAY
    /// ENHANCE_YOUR_CALM).
    pub(crate) fn on_timer(&mut self, now: Instant) {
        self.now = Some(now);
        if self
            .block
            .as_ref()
            .is_some_and(|b| now >= b.since + self.ctx.limits.head_timeout)
        {
            // A client in the middle of a header block holds the whole connection (nothing
            // but its CONTINUATION may come next), so the connection goes, as an HTTP/3
            // stream whose head does not come is reset.
            self.fail(ConnError(
                code::ENHANCE_YOUR_CALM,
                "request head not complete within --head-timeout",
            ));
            return;
        }
        let send_timeout = self.ctx.limits.send_timeout;
        let mut i = 0;
        while i < self.streams.len() {
            let s = &self.streams[i];
            let id = s.id;
            if s.blocked_since.is_some_and(|b| now >= b + send_timeout) {
                self.reset(id, code::CANCEL);
                continue;
            }
            if s.deadline.is_some_and(|d| now >= d) {
                match &s.phase {
                    Phase::Body(_) | Phase::Opening(_) => {
                        self.reset(id, code::CANCEL);
                        continue;
                    }
                    Phase::Delayed(_) => {
                        let s = self.streams.swap_remove(i);
                        if let Phase::Delayed(mut p) = s.phase {
                            p.priority = (s.priority, s.signal);
                            self.start(id, *p, s.window);
                        }
                        continue;
                    }
                    Phase::Sending(_) => {}
                }
            }
            i += 1;
        }
    }
}
