//! One connection's QPACK (RFC 9204) with the dynamic table, both directions: a
//! [`QpackDecoder`] for request heads, fed by the client's encoder stream, and a
//! [`QpackEncoder`] for response heads, fed by the client's decoder stream, shared by the
//! connection's tasks (the QUIC thread is single-threaded: `Rc`, `RefCell`, never borrowed
//! across an await).
//!
//! What we advertise: SETTINGS_QPACK_MAX_TABLE_CAPACITY = `--header-table` (capped at
//! 64 KiB) and SETTINGS_QPACK_BLOCKED_STREAMS = [`BLOCKED_STREAMS`] (both 0 when the table is
//! 0). Our encoder uses at most `--header-table` of the client's table, and the static table
//! only until the client's SETTINGS arrive or when either side says 0; then response heads
//! are not cached per thread (`head.rs`) but encoded per connection.
//!
//! Our encoder- and decoder-stream bytes are written at once when flow control takes them
//! (so the inserts a HEADERS frame references are written before it), else by one writer
//! task per connection, in order. What waits to be written is bounded ([`MAX_PENDING`]).

use super::driver::SendStream;
use super::head::put_static_response_head;
use crate::stats::{QpackDelta, Stats};
use bytes::Bytes;
use http::StatusCode;
use hxlab_wire::h3::{frame::HEADERS, write_frame_head};
use hxlab_wire::qpack::decoder::MAX_TABLE_CAPACITY;
use hxlab_wire::qpack::{Decoded, QpackDecoder, QpackEncoder, QpackError};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// SETTINGS_QPACK_BLOCKED_STREAMS we advertise when the table is on: 100, what nghttp3's and
/// ngtcp2's example servers and Chromium advertise (and the most hxlab-wire's decoder takes).
pub(super) const BLOCKED_STREAMS: u64 = 100;

/// How long a request head may wait for the inserts it references (a blocked stream). Past
/// it the stream is reset with H3_REQUEST_CANCELLED (the request was not processed) and the
/// decoder forgets it (Stream Cancellation). Inserts normally arrive within a round trip; 5 s
/// is far beyond any link the lab emulates, and short enough that a stream blocked forever
/// gives its blocked-stream slot back soon.
pub(super) const BLOCKED_DEADLINE: Duration = Duration::from_secs(5);

/// The most bytes of our encoder or decoder stream that may wait for flow-control credit;
/// past it the client is not reading them and the connection is closed (H3_EXCESSIVE_LOAD).
const MAX_PENDING: usize = 64 << 10;

/// The QPACK table capacity and blocked streams we advertise for `--header-table`
/// `header_table`.
pub(crate) fn advertised(header_table: u64) -> (u64, u64) {
    let capacity = header_table.min(MAX_TABLE_CAPACITY);
    (capacity, if capacity > 0 { BLOCKED_STREAMS } else { 0 })
}

/// Response fields encoded from a list on the stack; a head with more uses one on the heap.
const STACK_FIELDS: usize = 16;

/// Our encoder stream ([`ENCODER`]) or decoder stream ([`DECODER`]).
const ENCODER: usize = 0;
const DECODER: usize = 1;

/// One of our QPACK streams and the bytes waiting for it.
#[derive(Default)]
struct Outgoing {
    /// None before it is open and while the writer task writes on it.
    stream: Option<SendStream>,
    pending: Vec<u8>,
}

impl Outgoing {
    /// Writes what flow control takes of `pending` now; true when some is left for the
    /// writer task.
    fn write_now(&mut self) -> bool {
        if let Some(s) = &mut self.stream {
            if !self.pending.is_empty() {
                if let Ok(n) = s.write_now(&self.pending) {
                    self.pending.drain(..n);
                }
            }
        }
        !self.pending.is_empty()
    }
}

struct State {
    decoder: QpackDecoder,
    encoder: QpackEncoder,
    ours: [Outgoing; 2],
    /// Response fields as `name 0 value 0 …` (no name or value holds a NUL).
    fields: Vec<u8>,
    /// A response's field section, kept between responses (no allocation per response).
    section: Vec<u8>,
    /// Request HEADERS payload bytes, response HEADERS payload bytes, blocked streams reset.
    request_heads: u64,
    response_heads: u64,
    blocked_resets: u64,
    /// What was added to the server's counters so far.
    reported: QpackDelta,
}

/// One connection's QPACK state, shared by its tasks.
pub(super) struct ConnQpack {
    state: RefCell<State>,
    /// Woken when the client's encoder stream inserted entries (blocked heads retry).
    inserted: Notify,
    /// Woken when bytes wait for the writer task.
    flush: Notify,
    /// The connection is over: the writer task ends.
    done: Cell<bool>,
    /// Too many bytes wait for one of our streams.
    overloaded: Cell<bool>,
    stats: Arc<Stats>,
}

impl ConnQpack {
    /// The QPACK state of a connection whose table limit is `header_table` bytes (0: static
    /// table only).
    pub fn new(header_table: u64, stats: Arc<Stats>) -> Rc<ConnQpack> {
        let (capacity, blocked) = advertised(header_table);
        stats.h3_qpack.advertised(capacity, blocked);
        Rc::new(ConnQpack {
            state: RefCell::new(State {
                decoder: QpackDecoder::new(capacity, blocked),
                encoder: QpackEncoder::new(capacity),
                ours: Default::default(),
                fields: Vec::new(),
                section: Vec::new(),
                request_heads: 0,
                response_heads: 0,
                blocked_resets: 0,
                reported: QpackDelta::default(),
            }),
            inserted: Notify::new(),
            flush: Notify::new(),
            done: Cell::new(false),
            overloaded: Cell::new(false),
            stats,
        })
    }

    /// What we advertise: SETTINGS_QPACK_MAX_TABLE_CAPACITY and SETTINGS_QPACK_BLOCKED_STREAMS.
    pub fn advertised(&self) -> (u64, u64) {
        let s = self.state.borrow();
        (s.decoder.max_capacity(), s.decoder.max_blocked())
    }

    /// Our encoder and decoder streams, open (their type written): what waits is written.
    pub fn attach(&self, encoder: SendStream, decoder: SendStream) {
        let mut s = self.state.borrow_mut();
        s.ours[ENCODER].stream = Some(encoder);
        s.ours[DECODER].stream = Some(decoder);
        self.write(&mut s);
    }

    /// Ends the writer task and lets our streams go.
    pub fn close(&self) {
        self.done.set(true);
        let mut s = self.state.borrow_mut();
        for o in &mut s.ours {
            o.stream = None;
        }
        self.flush.notify_one();
    }

    /// Whether the connection must close because the client does not read our QPACK streams.
    pub fn overloaded(&self) -> bool {
        self.overloaded.get()
    }

    /// Writes what waits on both streams, handing what flow control refuses to the writer
    /// task, and reports to the server's counters.
    fn write(&self, s: &mut State) {
        let mut left = false;
        for o in &mut s.ours {
            left |= o.write_now();
            if o.pending.len() > MAX_PENDING {
                self.overloaded.set(true);
            }
        }
        if left {
            self.flush.notify_one();
        }
        self.report(s);
    }

    /// Adds to the server's counters what happened since the last report.
    fn report(&self, s: &mut State) {
        let d = s.decoder.stats();
        let e = s.encoder.stats();
        let now = QpackDelta {
            request_header_bytes: s.request_heads + d.encoder_stream_bytes,
            response_header_bytes: s.response_heads + e.encoder_stream_bytes,
            dynamic_refs_decoded: d.dynamic_refs,
            dynamic_refs_encoded: e.dynamic_refs,
            inserts_received: d.inserts,
            inserts_made: e.inserts,
            blocked_streams: d.blocked,
            blocked_resets: s.blocked_resets,
        };
        let was = std::mem::replace(&mut s.reported, now);
        // The per-protocol head bytes (as h1 and h2 count theirs) include the QPACK streams.
        let p = crate::stats::Protocol::H3;
        self.stats
            .request_head_bytes(p, now.request_header_bytes - was.request_header_bytes);
        self.stats
            .response_head_bytes(p, now.response_header_bytes - was.response_header_bytes);
        self.stats.h3_qpack.add(&QpackDelta {
            request_header_bytes: now.request_header_bytes - was.request_header_bytes,
            response_header_bytes: now.response_header_bytes - was.response_header_bytes,
            dynamic_refs_decoded: now.dynamic_refs_decoded - was.dynamic_refs_decoded,
            dynamic_refs_encoded: now.dynamic_refs_encoded - was.dynamic_refs_encoded,
            inserts_received: now.inserts_received - was.inserts_received,
            inserts_made: now.inserts_made - was.inserts_made,
            blocked_streams: now.blocked_streams - was.blocked_streams,
            blocked_resets: now.blocked_resets - was.blocked_resets,
        });
    }

    /// Bytes of the client's encoder stream (any split); an error closes the connection
    /// with QPACK_ENCODER_STREAM_ERROR. Inserts are acknowledged on our decoder stream and
    /// wake the blocked request heads.
    pub fn feed_encoder(&self, bytes: &[u8]) -> Result<(), QpackError> {
        let mut s = self.state.borrow_mut();
        let before = s.decoder.insert_count();
        let r = s.decoder.feed_encoder(bytes);
        let grew = s.decoder.insert_count() > before;
        let State { decoder, ours, .. } = &mut *s;
        decoder.drain_output(&mut ours[DECODER].pending);
        self.write(&mut s);
        if grew {
            self.inserted.notify_waiters();
        }
        r
    }

    /// Bytes of the client's decoder stream (any split); an error closes the connection
    /// with QPACK_DECODER_STREAM_ERROR.
    pub fn feed_decoder(&self, bytes: &[u8]) -> Result<(), QpackError> {
        let mut s = self.state.borrow_mut();
        let r = s.encoder.feed_decoder(bytes);
        self.report(&mut s);
        r
    }

    /// The client's QPACK SETTINGS: our encoder may use its table from now on.
    pub fn peer_settings(&self, capacity: u64, blocked: u64) {
        let mut s = self.state.borrow_mut();
        if s.encoder.peer().is_some() {
            return;
        }
        self.stats.h3_qpack.client_settings(capacity, blocked);
        let State { encoder, ours, .. } = &mut *s;
        encoder.peer_settings(capacity, blocked);
        self.stats
            .encoder_table(crate::stats::Protocol::H3, encoder.capacity());
        encoder.drain_output(&mut ours[ENCODER].pending);
        self.write(&mut s);
    }

    /// Decodes the request field section `block` of stream `stream_id` (see
    /// [`QpackDecoder::decode`]); a decoded section is acknowledged on our decoder stream.
    pub fn decode(
        &self,
        stream_id: u64,
        block: &[u8],
        max_size: u64,
        field: impl FnMut(&[u8], &[u8]) -> Result<(), QpackError>,
    ) -> Result<Decoded, QpackError> {
        let mut s = self.state.borrow_mut();
        let r = s.decoder.decode(stream_id, block, max_size, field);
        if let Ok(Decoded::Done) = r {
            s.request_heads += block.len() as u64;
            let State { decoder, ours, .. } = &mut *s;
            decoder.drain_output(&mut ours[DECODER].pending);
            // The acknowledgement goes out with the writer task, after the tasks this turn
            // runs: the heads of one flight are acknowledged in one write, not one each.
            if !ours[DECODER].pending.is_empty() {
                self.flush.notify_one();
            }
            self.report(&mut s);
        } else {
            self.report(&mut s);
        }
        r
    }

    /// Stream `stream_id` was reset or abandoned before its head was decoded; `expired`
    /// when it was blocked past [`BLOCKED_DEADLINE`].
    pub fn cancel(&self, stream_id: u64, expired: bool) {
        let mut s = self.state.borrow_mut();
        s.blocked_resets += u64::from(expired);
        let State { decoder, ours, .. } = &mut *s;
        decoder.cancel_stream(stream_id);
        decoder.drain_output(&mut ours[DECODER].pending);
        self.write(&mut s);
    }

    /// Ready once the client's encoder stream inserts something after this call.
    pub fn inserted(&self) -> tokio::sync::futures::Notified<'_> {
        self.inserted.notified()
    }

    /// Appends the HEADERS frame of a response on stream `stream_id`: encoded with the
    /// connection's encoder once the client allows a dynamic table (the inserts it needs
    /// written to our encoder stream first), else the static-only frame cached per thread.
    pub fn put_response_head(
        &self,
        stream_id: u64,
        status: StatusCode,
        fields: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])),
        out: &mut Vec<u8>,
    ) {
        let mut s = self.state.borrow_mut();
        let before = out.len();
        if s.encoder.capacity() == 0 {
            put_static_response_head(status, fields, out);
            // The frame head is at most 1 + 8 bytes; what follows it is the section.
            s.response_heads += frame_payload_len(&out[before..]);
            return;
        }
        let State {
            encoder,
            ours,
            fields: buf,
            section,
            ..
        } = &mut *s;
        buf.clear();
        fields(&mut |n, v| {
            buf.extend_from_slice(n);
            buf.push(0);
            buf.extend_from_slice(v);
            buf.push(0);
        });
        let mut parts = buf.split(|&b| b == 0);
        let pairs = std::iter::from_fn(|| Some((parts.next()?, parts.next()?)));
        let all = std::iter::once((&b":status"[..], status.as_str().as_bytes())).chain(pairs);
        // The field list on the stack when it fits (ours have a handful of fields; a
        // replayed response may have many: then a list on the heap).
        let mut list: [(&[u8], &[u8]); STACK_FIELDS] = [(&[], &[]); STACK_FIELDS];
        let mut n = 0;
        let mut more: Vec<(&[u8], &[u8])> = Vec::new();
        for pair in all {
            if n < STACK_FIELDS {
                list[n] = pair;
                n += 1;
            } else {
                if more.is_empty() {
                    more.extend_from_slice(&list);
                }
                more.push(pair);
            }
        }
        section.clear();
        if more.is_empty() {
            encoder.encode(stream_id, &list[..n], section);
        } else {
            encoder.encode(stream_id, &more, section);
        }
        encoder.drain_output(&mut ours[ENCODER].pending);
        write_frame_head(out, HEADERS, section.len() as u64);
        out.extend_from_slice(section);
        s.response_heads += section.len() as u64;
        // The inserts this head references go out now, before it; acknowledgements of
        // request heads wait for the writer task, so one flight's go in one write.
        let State { ours, .. } = &mut *s;
        if !ours[ENCODER].pending.is_empty() && ours[ENCODER].write_now() {
            self.flush.notify_one();
        }
        if ours[ENCODER].pending.len() > MAX_PENDING {
            self.overloaded.set(true);
        }
        self.report(&mut s);
    }

    /// Writes what flow control refused at once, in order, until the connection is over.
    pub async fn run_writer(self: Rc<Self>) {
        loop {
            let mut idle = true;
            for which in [ENCODER, DECODER] {
                let taken = {
                    let mut s = self.state.borrow_mut();
                    let o = &mut s.ours[which];
                    match o.stream.take() {
                        Some(stream) if !o.pending.is_empty() => {
                            Some((stream, std::mem::take(&mut o.pending)))
                        }
                        other => {
                            o.stream = other;
                            None
                        }
                    }
                };
                if let Some((mut stream, bytes)) = taken {
                    idle = false;
                    if stream
                        .write_all_chunks(&mut [Bytes::from(bytes)])
                        .await
                        .is_err()
                    {
                        return;
                    }
                    if self.done.get() {
                        return;
                    }
                    self.state.borrow_mut().ours[which].stream = Some(stream);
                }
            }
            if self.done.get() {
                return;
            }
            if idle {
                self.flush.notified().await;
            }
        }
    }
}

/// The payload length of the one HTTP/3 frame in `frame`.
fn frame_payload_len(frame: &[u8]) -> u64 {
    hxlab_wire::h3::parse_frame_head(frame).map_or(0, |(_, len, _)| len)
}
