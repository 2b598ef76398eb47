//! The client's QPACK state for one connection: the encoder of its request heads, the
//! decoder of the server's response heads, and our two QPACK unidirectional streams.
//!
//! With a table of 0 on both sides nothing changes from the static-only client: requests go
//! out as their precomputed buffers, responses are decoded by the static decoder with its
//! memo, and no QPACK stream is opened. Otherwise:
//! - we advertise [`QpackConfig::decoder_capacity`] and [`QpackConfig::blocked_streams`];
//! - once the server's SETTINGS arrive, the encoder sets its table to the smaller of
//!   [`QpackConfig::encoder_capacity`] and the server's capacity, and each request head is
//!   encoded for its stream (the bytes of a URL's last request are reused when the encoding
//!   came out the same, the usual case once its fields are in the table and acknowledged);
//! - encoder-stream bytes are written before the request that references them, decoder-stream
//!   bytes (acknowledgements) after each wake-up's reading.
//!
//! QPACK stream bytes, both ways, count as header bytes (and as bytes at the HTTP layer).

use super::*;
use crate::net::with_tap;
use hxlab_wire::qpack::{QpackDecoder, QpackEncoder, QpackError};
use hxlab_wire::tap::Channel;
use hxlab_wire::Dir;
use quinn_proto::StreamId;

/// The blocked streams the client allows the server when it allows a dynamic table: 100, as
/// nghttp3's and ngtcp2's example clients do. The server may then reference entries we have
/// not received on up to this many response streams at once.
pub const BLOCKED_STREAMS: u64 = 100;

/// What the client does with QPACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpackConfig {
    /// The table capacity we advertise (SETTINGS_QPACK_MAX_TABLE_CAPACITY): the most the
    /// server's encoder may use for response heads.
    pub decoder_capacity: u64,
    /// The most our encoder uses for request heads (never above the server's capacity).
    pub encoder_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS we advertise.
    pub blocked_streams: u64,
}

impl QpackConfig {
    /// The static table only, both ways.
    pub const STATIC: QpackConfig = QpackConfig {
        decoder_capacity: 0,
        encoder_capacity: 0,
        blocked_streams: 0,
    };

    /// What `ctx`'s header tables say (`--header-table` and h2load's two flags).
    pub fn of(ctx: &crate::client::ClientCtx) -> QpackConfig {
        QpackConfig::new(ctx.header_tables.decoder, ctx.header_tables.encoder)
    }

    /// A table of `decoder` bytes for responses and at most `encoder` bytes for requests,
    /// with [`BLOCKED_STREAMS`] when `decoder` is above 0.
    pub fn new(decoder: u64, encoder: u64) -> QpackConfig {
        QpackConfig {
            decoder_capacity: decoder,
            encoder_capacity: encoder,
            blocked_streams: if decoder > 0 { BLOCKED_STREAMS } else { 0 },
        }
    }
}

/// The response-head decoder: static-only with its memo, or with the dynamic table.
#[derive(Debug)]
pub enum ResponseDecoder {
    /// We advertised capacity 0.
    Static(qpack::Decoder),
    /// We advertised a table (boxed: the table's state is much larger).
    Dynamic(Box<QpackDecoder>),
}

impl ResponseDecoder {
    /// A decoder for what `config` advertises.
    pub fn new(config: QpackConfig) -> ResponseDecoder {
        if config.decoder_capacity == 0 {
            ResponseDecoder::Static(qpack::Decoder::new())
        } else {
            ResponseDecoder::Dynamic(Box::new(QpackDecoder::new(
                config.decoder_capacity,
                config.blocked_streams,
            )))
        }
    }

    /// Decodes stream `stream`'s field section; `None` when it waits for inserts.
    pub fn decode(
        &mut self,
        stream: u64,
        block: &[u8],
        max_size: u64,
    ) -> Result<Option<qpack::FieldSection>, QpackError> {
        match self {
            ResponseDecoder::Static(d) => d.decode_memo(block, max_size).map(Some),
            ResponseDecoder::Dynamic(d) => {
                let mut f = qpack::FieldSection::default();
                let r = d.decode(stream, block, max_size, |n, v| {
                    f.add(n, v);
                    Ok(())
                })?;
                Ok((r == hxlab_wire::qpack::Decoded::Done).then_some(f))
            }
        }
    }

    /// The inserts received so far (0 for the static decoder).
    pub fn insert_count(&self) -> u64 {
        match self {
            ResponseDecoder::Static(_) => 0,
            ResponseDecoder::Dynamic(d) => d.insert_count(),
        }
    }
}

/// One of our unidirectional streams: opened when there is something to write, its type
/// first, then whatever is queued, written as stream credit and flow control allow.
pub(super) struct UniWriter {
    out: Bytes,
    queued: Vec<u8>,
    id: Option<StreamId>,
}

impl UniWriter {
    /// A stream whose first bytes are `first` (its type, and for the control stream its
    /// SETTINGS).
    pub(super) fn new(first: Vec<u8>) -> UniWriter {
        UniWriter {
            out: Bytes::new(),
            queued: first,
            id: None,
        }
    }

    /// Queues bytes.
    pub(super) fn push(&mut self, bytes: &mut Vec<u8>) {
        self.queued.append(bytes);
    }

    /// Whether everything queued was written.
    pub(super) fn idle(&self) -> bool {
        self.out.is_empty() && self.queued.is_empty()
    }

    /// Opens the stream if needed and writes what is queued: `Ok(Some(id))` once all of it
    /// is written, `Ok(None)` while waiting for credit. Writes are shown to `tap`.
    pub(super) fn poll(
        &mut self,
        q: &mut quinn_proto::Connection,
        tap: Option<&crate::net::SharedTap>,
    ) -> Result<Option<StreamId>, String> {
        if self.out.is_empty() && !self.queued.is_empty() {
            self.out = Bytes::from(std::mem::take(&mut self.queued));
        }
        let id = match self.id {
            Some(id) => id,
            None => match q.streams().open(quinn_proto::Dir::Uni) {
                Some(id) => {
                    // Control and QPACK streams go before request data: a request head may
                    // reference an insert on the encoder stream.
                    let _ = q.send_stream(id).set_priority(i32::MAX);
                    *self.id.insert(id)
                }
                None => return Ok(None),
            },
        };
        if self.out.is_empty() {
            return Ok(Some(id));
        }
        let before = self.out.clone();
        let mut bufs = [std::mem::take(&mut self.out)];
        let r = q.send_stream(id).write_chunks(&mut bufs);
        self.out = std::mem::take(&mut bufs[0]);
        match r {
            Ok(_) | Err(quinn_proto::WriteError::Blocked) => {}
            Err(e) => return Err(e.to_string()),
        }
        if let Some(tap) = tap {
            let sent = &before[..before.len() - self.out.len()];
            if !sent.is_empty() {
                with_tap(tap, |t| {
                    t.bytes(Dir::Send, Channel::Quic(u64::from(id)), sent)
                });
            }
        }
        Ok(self.idle().then_some(id))
    }
}

/// The QPACK state of one connection.
pub struct Qpack {
    config: QpackConfig,
    /// The request-head encoder.
    pub(super) enc: QpackEncoder,
    /// The response-head decoder.
    pub(super) dec: ResponseDecoder,
    /// With no table of ours: what reads the server's encoder stream (which may then only
    /// set a capacity of 0).
    zero: QpackDecoder,
    enc_stream: UniWriter,
    dec_stream: UniWriter,
    /// Per URL: the last field section encoded and the request bytes built from it.
    last: Vec<Option<(Vec<u8>, Bytes)>>,
    section: Vec<u8>,
    /// QPACK stream bytes written and received, not yet recorded.
    pub(super) bytes_out: u64,
    pub(super) bytes_in: u64,
    /// The tables this connection agreed on were recorded.
    recorded: bool,
}

impl Qpack {
    /// The state for `config` on a connection to a target of `urls` URLs.
    pub fn new(config: QpackConfig, urls: usize) -> Qpack {
        Qpack {
            config,
            enc: QpackEncoder::new(config.encoder_capacity),
            dec: ResponseDecoder::new(config),
            zero: QpackDecoder::new(0, 0),
            enc_stream: UniWriter::new(vec![hxlab_wire::h3::stream::QPACK_ENCODER as u8]),
            dec_stream: UniWriter::new(vec![hxlab_wire::h3::stream::QPACK_DECODER as u8]),
            last: vec![None; urls],
            section: Vec::new(),
            bytes_out: 0,
            bytes_in: 0,
            recorded: false,
        }
    }

    /// What we advertise.
    pub fn config(&self) -> QpackConfig {
        self.config
    }

    /// What this connection's tables came to, once: when the server's SETTINGS have arrived,
    /// or (`at_end`) without them. Read from the SETTINGS exchanged, not from the flags.
    pub(super) fn seen(
        &mut self,
        at_end: bool,
    ) -> Option<hxlab_core::header_table::HeaderTableSeen> {
        let peer = self.enc.peer();
        if self.recorded || (peer.is_none() && !at_end) {
            return None;
        }
        self.recorded = true;
        Some(hxlab_core::header_table::HeaderTableSeen {
            protocol: "h3".into(),
            client_advertised: self.config.decoder_capacity,
            server_advertised: peer.map(|p| p.0),
            client_blocked_streams: Some(self.config.blocked_streams),
            server_blocked_streams: peer.map(|p| p.1),
            encoder_table: self.enc.capacity(),
            connections: 1,
        })
    }

    /// The server's SETTINGS arrived.
    pub(super) fn peer_settings(&mut self, s: hxlab_wire::h3::control::PeerSettings) {
        self.enc
            .peer_settings(s.qpack_max_table_capacity, s.qpack_blocked_streams);
    }

    /// The request stream bytes for URL `url` of `target` on stream `stream`, and its
    /// HEADERS payload size: the precomputed static-only ones while our encoder has no
    /// table, else encoded for this stream.
    pub(super) fn request(&mut self, target: &Target, url: usize, stream: u64) -> (Bytes, u64) {
        let t = &target.requests[url];
        if self.enc.capacity() == 0 {
            return (t.h3_request.clone(), t.h3_header_payload);
        }
        self.section.clear();
        self.enc.encode(stream, &t.h3_fields, &mut self.section);
        let len = self.section.len() as u64;
        if let Some((s, b)) = &self.last[url] {
            if *s == self.section {
                return (b.clone(), len);
            }
        }
        let bytes = crate::target::h3_stream_bytes(&self.section, target.body.as_deref());
        self.last[url] = Some((self.section.clone(), bytes.clone()));
        (bytes, len)
    }

    /// The encoder's new instructions are queued and written, before the request that
    /// references them.
    pub(super) fn flush_encoder(
        &mut self,
        q: &mut quinn_proto::Connection,
        tap: Option<&crate::net::SharedTap>,
    ) -> Result<(), String> {
        let mut out = Vec::new();
        self.enc.drain_output(&mut out);
        self.bytes_out += out.len() as u64;
        if !out.is_empty() {
            self.enc_stream.push(&mut out);
        }
        if !self.enc_stream.idle() {
            self.enc_stream.poll(q, tap)?;
        }
        Ok(())
    }

    /// The decoder's acknowledgements are queued and written.
    pub(super) fn flush_decoder(
        &mut self,
        q: &mut quinn_proto::Connection,
        tap: Option<&crate::net::SharedTap>,
    ) -> Result<(), String> {
        if let ResponseDecoder::Dynamic(d) = &mut self.dec {
            let mut out = Vec::new();
            d.drain_output(&mut out);
            self.bytes_out += out.len() as u64;
            if !out.is_empty() {
                self.dec_stream.push(&mut out);
            }
        }
        if !self.dec_stream.idle() {
            self.dec_stream.poll(q, tap)?;
        }
        Ok(())
    }

    /// A request stream was abandoned before its response head was decoded.
    pub(super) fn cancel(&mut self, stream: u64) {
        if let ResponseDecoder::Dynamic(d) = &mut self.dec {
            d.cancel_stream(stream);
        }
    }

    /// Bytes of the server's encoder stream (type 0x02).
    pub(super) fn encoder_stream(&mut self, data: &[u8]) -> Result<(), H3Error> {
        self.bytes_in += data.len() as u64;
        match &mut self.dec {
            ResponseDecoder::Dynamic(d) => d.feed_encoder(data),
            // We allowed no table: any instruction but a capacity of 0 is refused.
            ResponseDecoder::Static(_) => self.zero.feed_encoder(data),
        }
        .map_err(|e| conn_error(QPACK_ENCODER_STREAM_ERROR, &e.to_string()))
    }

    /// Bytes of the server's decoder stream (type 0x03).
    pub(super) fn decoder_stream(&mut self, data: &[u8]) -> Result<(), H3Error> {
        self.bytes_in += data.len() as u64;
        self.enc
            .feed_decoder(data)
            .map_err(|e| conn_error(QPACK_DECODER_STREAM_ERROR, &e.to_string()))
    }
}
