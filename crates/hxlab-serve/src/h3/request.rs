//! One request stream: read the request (HEADERS, then DATA frames read to the stream's end
//! and discarded, optional trailers), route it, answer it (an optional 103, the response
//! HEADERS, DATA, FIN), counting as every other protocol does.
//!
//! Frames are parsed in place from the chunks quinn-proto hands over; only a HEADERS frame split
//! across chunks is gathered into a buffer. A small in-memory body leaves with its HEADERS
//! frame in one write, followed by the FIN.

use super::control::close;
use super::driver::{Conn, RecvStream, SendStream};
use super::head::{
    data_head, decode_request, put_static_response_head, FieldSink, Head, HeadError,
};
use super::priority;
use super::qpack::{ConnQpack, BLOCKED_DEADLINE};
use crate::body::{BodySpec, CHUNK};
use crate::routes::{route, Ctx};
use crate::stats::Protocol;
use bytes::Bytes;
use http::Method;
use hxlab_wire::h3::{code, frame, parse_frame_head, write_frame_head};
use hxlab_wire::qpack::{Decoded, QpackError};
use quinn_proto::VarInt;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;

/// Bytes of incomplete request heads one connection holds across its streams. Past the
/// budget the connection is closed: without it a client could hold --max-streams partial
/// heads of --max-header-size each on every connection (100 × 64 KiB).
#[derive(Default)]
pub(super) struct HeadBytes(AtomicU64);

/// Budget of [`HeadBytes`] for a head limit of `max_header_size`: four whole heads, so
/// ordinary requests (a few KiB, arriving in a packet or two) never meet it.
pub(super) fn head_budget(max_header_size: u32) -> u64 {
    4 * u64::from(max_header_size).max(16 << 10)
}

/// What one stream has charged to its connection's [`HeadBytes`]; refunded when dropped.
struct Charge<'a> {
    heads: &'a HeadBytes,
    bytes: u64,
}

impl Charge<'_> {
    /// Charges the stream's buffered head bytes as they are now; false when the connection
    /// is over `budget`.
    fn set(&mut self, bytes: u64, budget: u64) -> bool {
        if bytes >= self.bytes {
            let more = bytes - self.bytes;
            self.bytes = bytes;
            self.heads.0.fetch_add(more, Ordering::Relaxed) + more <= budget
        } else {
            self.heads
                .0
                .fetch_sub(self.bytes - bytes, Ordering::Relaxed);
            self.bytes = bytes;
            true
        }
    }
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.heads.0.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// How a request stream fails.
enum Fail {
    /// A connection error (RFC 9114 §8): the whole connection closes with this code.
    Conn(u64, &'static str),
    /// A stream error: the stream is reset (and stopped) with this code.
    Stream(u64),
    /// The request head is larger than we accept: answered with 431.
    TooLarge,
    /// The client went away, or the body stalled past --body-timeout (stream stopped).
    Gone,
    /// The head waited for QPACK inserts past [`BLOCKED_DEADLINE`] (stream reset with
    /// H3_REQUEST_CANCELLED).
    Blocked,
}

/// What decodes a request stream's field sections: the connection's QPACK decoder.
pub(super) trait Sections {
    /// Decodes `block` of stream `stream_id` (see [`ConnQpack::decode`]).
    fn decode(
        &self,
        stream_id: u64,
        block: &[u8],
        max: u64,
        field: FieldSink<'_>,
    ) -> Result<Decoded, QpackError>;
}

impl Sections for ConnQpack {
    fn decode(
        &self,
        stream_id: u64,
        block: &[u8],
        max: u64,
        field: FieldSink<'_>,
    ) -> Result<Decoded, QpackError> {
        ConnQpack::decode(self, stream_id, block, max, field)
    }
}

fn vi(c: u64) -> VarInt {
    VarInt::from_u64(c).unwrap_or(VarInt::MAX)
}

/// Serves one request stream to its end.
pub(super) async fn serve(
    ctx: Arc<Ctx>,
    conn: Conn,
    mut send: SendStream,
    mut recv: RecvStream,
    heads: Arc<HeadBytes>,
    priorities: priority::Shared,
    qpack: Rc<ConnQpack>,
) {
    let (head, since) = match read_request(&ctx, &mut recv, &heads, &qpack).await {
        Ok(h) => h,
        Err(Fail::Conn(c, why)) => return close(&conn, c, why),
        Err(Fail::Stream(c)) => {
            recv.stop(vi(c));
            send.reset(vi(c));
            return;
        }
        Err(Fail::TooLarge) => {
            recv.stop(vi(code::H3_REQUEST_REJECTED));
            let mut out = Vec::new();
            put_static_response_head(
                http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                |f| f(b"content-length", b"0"),
                &mut out,
            );
            if send.write_all_chunks(&mut [Bytes::from(out)]).await.is_ok() {
                let _ = send.finish();
            }
            return;
        }
        Err(Fail::Gone | Fail::Blocked) => {
            recv.stop(vi(code::H3_REQUEST_CANCELLED));
            send.reset(vi(code::H3_REQUEST_CANCELLED));
            return;
        }
    };
    if qpack.overloaded() {
        return close(&conn, code::H3_EXCESSIVE_LOAD, "QPACK streams not read");
    }
    let id = recv.id().index() * 4;
    let (p, signal, rank) = priorities.borrow_mut().start(id, head.priority);
    ctx.stats.priority(Protocol::H3, p, signal);
    send.set_priority(rank);
    let _live = Live(priorities, id);
    respond(&ctx, (head, since), send, id, &qpack).await;
}

/// A request being answered: its stream leaves the connection's priorities when dropped.
struct Live(priority::Shared, u64);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.borrow_mut().end(self.1);
    }
}

/// Reads the request stream to its end: the head, then DATA (discarded, checked against
/// `content-length`), then optional trailers. The head must be complete within
/// --head-timeout of the stream's opening, and while it is not, the bytes buffered for it
/// count against the connection's [`HeadBytes`]. A head that references QPACK inserts not
/// yet received waits for them (reading nothing more meanwhile) at most
/// [`BLOCKED_DEADLINE`]. A stream given up before its head was decoded is cancelled in the
/// connection's decoder.
async fn read_request(
    ctx: &Ctx,
    recv: &mut RecvStream,
    heads: &HeadBytes,
    qpack: &ConnQpack,
) -> Result<(Head, std::time::Instant), Fail> {
    let mut r = Reader {
        id: recv.id().index() * 4,
        ..Reader::default()
    };
    let got = read_frames(ctx, recv, heads, qpack, &mut r).await;
    match got {
        Err(Fail::Conn(..)) => {}
        Err(ref e) if r.head.is_none() && r.started => {
            qpack.cancel(r.id, matches!(e, Fail::Blocked));
        }
        _ => {}
    }
    got?;
    let since = r.head_at.unwrap_or_else(std::time::Instant::now);
    Ok((r.finish()?, since))
}

/// The reading loop of [`read_request`].
async fn read_frames(
    ctx: &Ctx,
    recv: &mut RecvStream,
    heads: &HeadBytes,
    qpack: &ConnQpack,
    r: &mut Reader,
) -> Result<(), Fail> {
    let max = u64::from(ctx.limits.max_header_size);
    let budget = head_budget(ctx.limits.max_header_size);
    // The clock is read only when a read has to wait, and once.
    let mut head_deadline = None;
    let mut charge = Charge { heads, bytes: 0 };
    loop {
        if r.blocked.is_some() {
            Box::pin(unblock(qpack, recv, r, max)).await?;
        }
        // Most reads are ready at once; only one that waits gets a timer.
        let mut read = pin!(recv.read_chunk(usize::MAX));
        let got = match futures::poll!(read.as_mut()) {
            Poll::Ready(r) => r,
            Poll::Pending => {
                let now = tokio::time::Instant::now();
                let mut until = now + ctx.limits.body_timeout;
                if r.head.is_none() {
                    until = until.min(*head_deadline.get_or_insert(now + ctx.limits.head_timeout));
                }
                match Box::pin(tokio::time::timeout_at(until, read)).await {
                    Ok(r) => r,
                    Err(_) => return Err(Fail::Gone),
                }
            }
        };
        let chunk = match got {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(_) => return Err(Fail::Gone),
        };
        r.feed(&chunk, max, qpack)?;
        let buffered = if r.head.is_none() {
            (r.pending.len() + r.blocked.as_ref().map_or(0, |b| b.block.len())) as u64
        } else {
            0
        };
        if !charge.set(buffered, budget) {
            return Err(Fail::Conn(
                code::H3_EXCESSIVE_LOAD,
                "incomplete request heads over budget",
            ));
        }
    }
    Ok(())
}

/// Waits until the blocked field section of `r` decodes (then parses what followed it), at
/// most [`BLOCKED_DEADLINE`], and no longer than the stream or the connection lives.
async fn unblock(
    qpack: &ConnQpack,
    recv: &mut RecvStream,
    r: &mut Reader,
    max: u64,
) -> Result<(), Fail> {
    let deadline = tokio::time::Instant::now() + BLOCKED_DEADLINE;
    loop {
        let inserted = qpack.inserted();
        if !r.retry(max, qpack)? {
            return r.feed(&[], max, qpack);
        }
        tokio::select! {
            _ = inserted => {}
            _ = tokio::time::sleep_until(deadline) => return Err(Fail::Blocked),
            _ = recv.reset_or_gone() => return Err(Fail::Gone),
        }
    }
}

/// A field section that waits for QPACK inserts.
struct BlockedSection {
    block: Vec<u8>,
    trailers: bool,
}

/// The sans-IO side of reading a request stream.
#[derive(Default)]
struct Reader {
    /// The stream's id.
    id: u64,
    /// A HEADERS frame has begun.
    started: bool,
    /// The field section waiting for inserts; nothing after it is parsed meanwhile.
    blocked: Option<BlockedSection>,
    /// Bytes of an incomplete frame head or HEADERS frame, carried to the next chunk.
    pending: Vec<u8>,
    /// DATA or unknown-frame payload bytes still to skip.
    skip: u64,
    /// Whether what is being skipped is DATA (counted as body).
    skipping_data: bool,
    head: Option<Head>,
    /// When the head was decoded (the response's latency counts from it).
    head_at: Option<std::time::Instant>,
    trailers: bool,
    body: u64,
}

impl Reader {
    fn feed(&mut self, chunk: &[u8], max: u64, q: &dyn Sections) -> Result<(), Fail> {
        let mut input = chunk;
        if !self.pending.is_empty() {
            self.pending.extend_from_slice(input);
            let pending = std::mem::take(&mut self.pending);
            let used = self.parse(&pending, max, q)?;
            self.pending = pending;
            self.pending.drain(..used);
            return Ok(());
        }
        let used = self.parse(input, max, q)?;
        input = &input[used..];
        self.pending.extend_from_slice(input);
        Ok(())
    }

    /// Parses whole frames from `buf`; returns how many bytes were used (the rest waits for
    /// more input).
    fn parse(&mut self, buf: &[u8], max: u64, q: &dyn Sections) -> Result<usize, Fail> {
        let mut pos = 0;
        loop {
            if self.blocked.is_some() {
                return Ok(pos);
            }
            if self.skip > 0 {
                let n = self.skip.min((buf.len() - pos) as u64);
                if self.skipping_data {
                    self.body += n;
                }
                self.skip -= n;
                pos += n as usize;
                if self.skip > 0 {
                    return Ok(pos);
                }
            }
            let Some((kind, len, hl)) = parse_frame_head(&buf[pos..]) else {
                return Ok(pos);
            };
            match kind {
                frame::HEADERS => {
                    if self.trailers {
                        return Err(Fail::Conn(
                            code::H3_FRAME_UNEXPECTED,
                            "HEADERS after trailers",
                        ));
                    }
                    self.started = true;
                    if len > max {
                        return Err(Fail::TooLarge);
                    }
                    let end = pos + hl + len as usize;
                    if end > buf.len() {
                        return Ok(pos);
                    }
                    let trailers = self.head.is_some();
                    let block = &buf[pos + hl..end];
                    pos = end;
                    if !self.section(block, trailers, max, q)? {
                        self.blocked = Some(BlockedSection {
                            block: block.to_vec(),
                            trailers,
                        });
                        return Ok(pos);
                    }
                }
                frame::DATA => {
                    if self.head.is_none() || self.trailers {
                        return Err(Fail::Conn(code::H3_FRAME_UNEXPECTED, "DATA out of place"));
                    }
                    pos += hl;
                    self.skip = len;
                    self.skipping_data = true;
                }
                frame::SETTINGS
                | frame::GOAWAY
                | frame::MAX_PUSH_ID
                | frame::CANCEL_PUSH
                | frame::PUSH_PROMISE
                | 0x02
                | 0x06
                | 0x08
                | 0x09 => {
                    return Err(Fail::Conn(
                        code::H3_FRAME_UNEXPECTED,
                        "frame not allowed on a request stream",
                    ));
                }
                _ => {
                    // Reserved and unknown frame types are skipped (§9).
                    pos += hl;
                    self.skip = len;
                    self.skipping_data = false;
                }
            }
        }
    }

    /// Decodes a field section: the head, or (`trailers`) trailers, decoded for validity and
    /// not kept. False when it is blocked.
    fn section(
        &mut self,
        block: &[u8],
        trailers: bool,
        max: u64,
        q: &dyn Sections,
    ) -> Result<bool, Fail> {
        let id = self.id;
        if trailers {
            let r = q.decode(id, block, max, &mut |_, _| Ok(()));
            return match r {
                Ok(Decoded::Done) => {
                    self.trailers = true;
                    Ok(true)
                }
                Ok(Decoded::Blocked) => Ok(false),
                Err(e) => Err(Fail::Conn(code::QPACK_DECOMPRESSION_FAILED, e.0)),
            };
        }
        match decode_request(|f| q.decode(id, block, max, f)).map_err(head_fail)? {
            Some(h) => {
                self.head = Some(h);
                self.head_at = Some(std::time::Instant::now());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Decodes the blocked section again; true while it is still blocked.
    fn retry(&mut self, max: u64, q: &dyn Sections) -> Result<bool, Fail> {
        let Some(b) = self.blocked.take() else {
            return Ok(false);
        };
        if self.section(&b.block, b.trailers, max, q)? {
            return Ok(false);
        }
        self.blocked = Some(b);
        Ok(true)
    }

    fn finish(self) -> Result<Head, Fail> {
        if self.skip > 0 || !self.pending.is_empty() {
            // The stream ended inside a frame.
            return Err(Fail::Conn(
                code::H3_FRAME_ERROR,
                "stream ended inside a frame",
            ));
        }
        let head = self.head.ok_or(Fail::Stream(code::H3_REQUEST_INCOMPLETE))?;
        if head.content_length.is_some_and(|c| c != self.body) {
            return Err(Fail::Stream(code::H3_MESSAGE_ERROR));
        }
        Ok(head)
    }
}

fn head_fail(e: HeadError) -> Fail {
    match e {
        HeadError::Qpack(e) => Fail::Conn(code::QPACK_DECOMPRESSION_FAILED, e.0),
        HeadError::Malformed => Fail::Stream(code::H3_MESSAGE_ERROR),
        HeadError::TooLarge => Fail::TooLarge,
    }
}

/// Routes and answers a complete request on stream `id`.
async fn respond(
    ctx: &Ctx,
    (head, since): (Head, std::time::Instant),
    mut send: SendStream,
    id: u64,
    qpack: &ConnQpack,
) {
    let mut reply = route(ctx, &head.method, &head.uri, &head.headers, Protocol::H3);
    if reply.lookup.is_some() {
        // A `/static/` file, looked up off the runtime (boxed, as below).
        reply = Box::pin(reply.looked_up()).await;
    }
    if !reply.delay.is_zero() {
        // Boxed, as every path that waits is here: the common request's future stays small,
        // and a small future is cheap to spawn (it is copied into its task).
        Box::pin(tokio::time::sleep(reply.delay)).await;
    }
    let mut out = Vec::with_capacity(256);
    if let Some(link) = &reply.early_hints {
        qpack.put_response_head(
            id,
            http::StatusCode::EARLY_HINTS,
            |f| f(b"link", link.as_bytes()),
            &mut out,
        );
    }
    qpack.put_response_head(id, reply.status, |f| reply.each_field(None, f), &mut out);
    let body = if head.method == Method::HEAD {
        BodySpec::Empty
    } else {
        reply.body
    };
    let counted = reply.counted;
    if let Some(bytes) = body.in_memory() {
        // Head, DATA and FIN in one go.
        let n = bytes.len() as u64;
        if n > 0 {
            write_frame_head(&mut out, frame::DATA, n);
        }
        // A small body is copied behind its head (one buffer); a larger one goes as is.
        let sent = if n <= 1024 {
            out.extend_from_slice(&bytes);
            send_chunks(ctx, &mut send, &mut [Bytes::from(out)]).await
        } else {
            send_chunks(ctx, &mut send, &mut [Bytes::from(out), bytes]).await
        };
        if !sent {
            return;
        }
        if counted {
            ctx.stats.body_bytes(Protocol::H3, n);
        }
    } else if !Box::pin(send_streamed(
        ctx,
        &mut send,
        Bytes::from(out),
        body,
        counted,
    ))
    .await
    {
        return;
    }
    if send.finish().is_ok() && counted {
        ctx.stats.request_done(Protocol::H3, since);
    }
}

/// Sends the head, then a body that is not in memory chunk by chunk; false when the stream
/// was given up.
async fn send_streamed(
    ctx: &Ctx,
    send: &mut SendStream,
    head: Bytes,
    body: BodySpec,
    counted: bool,
) -> bool {
    if !send_chunks(ctx, send, &mut [head]).await {
        return false;
    }
    let mut source = body.into_source();
    loop {
        match source.chunk(CHUNK).await {
            Ok(Some(chunk)) => {
                let n = chunk.len() as u64;
                if !send_chunks(ctx, send, &mut [data_head(n), chunk]).await {
                    return false;
                }
                if counted {
                    ctx.stats.body_bytes(Protocol::H3, n);
                }
            }
            Ok(None) => return true,
            Err(_) => {
                send.reset(vi(code::H3_INTERNAL_ERROR));
                return false;
            }
        }
    }
}

/// Writes `chunks`; false when the stream is gone or got no flow-control credit for
/// --send-timeout (then it is reset, as nginx's send_timeout does).
async fn send_chunks(ctx: &Ctx, send: &mut SendStream, chunks: &mut [Bytes]) -> bool {
    let timeout = ctx.limits.send_timeout;
    let r = {
        let mut write = pin!(send.write_all_chunks(chunks));
        // Most writes fit the window at once; only one that waits gets a timer.
        match futures::poll!(write.as_mut()) {
            Poll::Ready(r) => Some(r),
            Poll::Pending => Box::pin(tokio::time::timeout(timeout, write)).await.ok(),
        }
    };
    match r {
        Some(Ok(())) => true,
        Some(Err(_)) => false,
        None => {
            send.reset(vi(code::H3_REQUEST_CANCELLED));
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_wire::qpack::{encode_field_section, QpackDecoder};
    use std::cell::RefCell;

    impl Sections for RefCell<QpackDecoder> {
        fn decode(
            &self,
            stream_id: u64,
            block: &[u8],
            max: u64,
            field: FieldSink<'_>,
        ) -> Result<Decoded, QpackError> {
            self.borrow_mut().decode(stream_id, block, max, field)
        }
    }

    /// A connection's decoder that advertised `capacity` (and 100 blocked streams).
    fn table(capacity: u64) -> RefCell<QpackDecoder> {
        RefCell::new(QpackDecoder::new(capacity, 100))
    }

    fn request(path: &str, body: &[u8], content_length: usize) -> Vec<u8> {
        let mut section = Vec::new();
        encode_field_section(
            [
                (&b":method"[..], &b"POST"[..]),
                (b":scheme", b"https"),
                (b":authority", b"x"),
                (b":path", path.as_bytes()),
                (b"content-length", content_length.to_string().as_bytes()),
            ]
            .iter()
            .map(|(n, v)| (*n, *v))
            .collect::<Vec<_>>(),
            &mut section,
        );
        let mut out = Vec::new();
        hxlab_wire::h3::write_frame_head(&mut out, frame::HEADERS, section.len() as u64);
        out.extend_from_slice(&section);
        // A reserved frame type between HEADERS and DATA is skipped.
        hxlab_wire::h3::write_frame_head(&mut out, 0x21, 2);
        out.extend_from_slice(b"zz");
        hxlab_wire::h3::write_frame_head(&mut out, frame::DATA, body.len() as u64);
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn a_request_split_at_every_byte_reads_the_same() {
        let wire = request("/echo?a=1", b"hello body", 10);
        for split in 1..wire.len() {
            let mut r = Reader::default();
            r.feed(&wire[..split], 1 << 16, &table(0)).ok().unwrap();
            r.feed(&wire[split..], 1 << 16, &table(0)).ok().unwrap();
            assert_eq!(r.body, 10, "split at {split}");
            let h = r.finish().ok().unwrap();
            assert_eq!(h.uri.path(), "/echo");
        }
    }

    #[test]
    fn protocol_violations_map_to_their_errors() {
        // DATA before HEADERS: connection error.
        let mut r = Reader::default();
        assert!(
            matches!(r.feed(&[0x00, 0x01, b'x'], 1 << 16, &table(0)), Err(Fail::Conn(c, _)) if c == code::H3_FRAME_UNEXPECTED)
        );
        // SETTINGS on a request stream: connection error.
        let mut r = Reader::default();
        assert!(
            matches!(r.feed(&[0x04, 0x00], 1 << 16, &table(0)), Err(Fail::Conn(c, _)) if c == code::H3_FRAME_UNEXPECTED)
        );
        // No HEADERS at all: H3_REQUEST_INCOMPLETE.
        assert!(
            matches!(Reader::default().finish(), Err(Fail::Stream(c)) if c == code::H3_REQUEST_INCOMPLETE)
        );
        // Body shorter than content-length: H3_MESSAGE_ERROR.
        let wire = request("/", b"abc", 4);
        let mut r = Reader::default();
        r.feed(&wire, 1 << 16, &table(0)).ok().unwrap();
        assert!(matches!(r.finish(), Err(Fail::Stream(c)) if c == code::H3_MESSAGE_ERROR));
        // Ends inside a frame: H3_FRAME_ERROR.
        let wire = request("/", b"abc", 3);
        let mut r = Reader::default();
        r.feed(&wire[..wire.len() - 1], 1 << 16, &table(0))
            .ok()
            .unwrap();
        assert!(matches!(r.finish(), Err(Fail::Conn(c, _)) if c == code::H3_FRAME_ERROR));
        // A HEADERS frame over the limit: 431.
        let mut r = Reader::default();
        assert!(matches!(
            r.feed(&[0x01, 0x44, 0x00], 100, &table(0)),
            Err(Fail::TooLarge)
        ));
    }

    #[test]
    fn a_blocked_head_waits_then_the_rest_of_the_stream_is_read() {
        // A head referencing entry 0 of the dynamic table (Required Insert Count 1, Base 1,
        // indexed relative 0), then DATA; the insert arrives afterwards.
        let q = table(4096);
        let mut section = vec![0x02, 0x00];
        encode_field_section(
            [
                (&b":method"[..], &b"POST"[..]),
                (b":scheme", b"https"),
                (b":authority", b"x"),
                (b":path", b"/"),
            ],
            &mut section,
        );
        section.drain(2..4);
        section.push(0x80);
        let mut wire = Vec::new();
        hxlab_wire::h3::write_frame_head(&mut wire, frame::HEADERS, section.len() as u64);
        wire.extend_from_slice(&section);
        hxlab_wire::h3::write_frame_head(&mut wire, frame::DATA, 3);
        wire.extend_from_slice(b"abc");
        let mut r = Reader::default();
        r.feed(&wire, 1 << 16, &q).ok().unwrap();
        assert!(r.blocked.is_some() && r.head.is_none() && r.body == 0);
        assert!(r.retry(1 << 16, &q).ok().unwrap(), "still blocked");
        // Set Dynamic Table Capacity 4096, then insert "x-a: b" with a literal name.
        let mut enc = vec![0x3f, 0xe1, 0x1f];
        enc.extend_from_slice(&[0x43, b'x', b'-', b'a', 0x01, b'b']);
        q.borrow_mut().feed_encoder(&enc).unwrap();
        assert!(
            !r.retry(1 << 16, &q).ok().unwrap(),
            "decoded after the insert"
        );
        r.feed(&[], 1 << 16, &q).ok().unwrap();
        assert_eq!(r.body, 3);
        let h = r.finish().ok().unwrap();
        assert_eq!(h.headers["x-a"], "b");
        assert_eq!(q.borrow().stats().dynamic_refs, 1);
    }
}
