//! HTTP/3 driver on quinn + h3 + h3-quinn, up to `-m` streams in flight per connection.
//!
//! Header bytes: h3 does not say how large a QPACK-encoded HEADERS frame was, so request
//! streams are wrapped ([`TapConnection`]) to read HTTP/3 frame headers (varint type and
//! length) as the response bytes pass, counting HEADERS payload (the QPACK wire size) and
//! frame overhead; outgoing HEADERS frames are measured the same way as h3 hands them to the
//! stream. Control and QPACK encoder/decoder streams are not counted (h3 0.0.8 uses no
//! dynamic table, so they carry only SETTINGS). The uncompressed size is h2load's: name +
//! value of every decoded field, `:status` included.

use crate::net::ConnectError;
use crate::plan::Next;
use crate::recorder::{ErrorKind, SharedRecorder};
use crate::worker::{ClientCtx, SessionEnd};
use bytes::{Buf, Bytes};
use futures::stream::{FuturesUnordered, StreamExt};
use h3::quic::{self, StreamErrorIncoming, StreamId, WriteBuf};
use std::net::SocketAddr;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Reads HTTP/3 frame headers on one stream and counts HEADERS payload bytes.
#[derive(Debug, Default, Clone)]
pub struct H3FrameScanner {
    head: [u8; 16],
    head_have: usize,
    payload_left: u64,
    kind: u64,
}

fn varint(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    if buf.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for b in &buf[1..len] {
        v = v << 8 | u64::from(*b);
    }
    Some((v, len))
}

impl H3FrameScanner {
    /// Scans the next bytes; returns (HEADERS payload bytes, DATA payload bytes).
    pub fn scan(&mut self, mut buf: &[u8]) -> (u64, u64) {
        let (mut header, mut data) = (0u64, 0u64);
        while !buf.is_empty() {
            if self.payload_left > 0 {
                let n = (buf.len() as u64).min(self.payload_left) as usize;
                self.payload_left -= n as u64;
                match self.kind {
                    0x01 => header += n as u64,
                    0x00 => data += n as u64,
                    _ => {}
                }
                buf = &buf[n..];
                continue;
            }
            // Accumulate until type and length varints are complete (at most 16 bytes).
            let n = (16 - self.head_have).min(buf.len());
            self.head[self.head_have..self.head_have + n].copy_from_slice(&buf[..n]);
            let have = self.head_have + n;
            let parsed = varint(&self.head[..have])
                .and_then(|(t, a)| varint(&self.head[a..have]).map(|(l, b)| (t, l, a + b)));
            match parsed {
                None => {
                    self.head_have = have;
                    buf = &buf[n..];
                }
                Some((kind, len, used)) => {
                    // Bytes of this chunk that belonged to the frame head.
                    let from_buf = used - self.head_have;
                    self.head_have = 0;
                    self.kind = kind;
                    self.payload_left = len;
                    buf = &buf[from_buf..];
                }
            }
        }
        (header, data)
    }
}

/// h3-quinn's connection with request streams that count frame bytes.
pub struct TapConnection {
    inner: h3_quinn::Connection,
    rec: SharedRecorder,
}

/// Opens tapped streams.
pub struct TapOpener {
    inner: h3_quinn::OpenStreams,
    rec: SharedRecorder,
}

/// A request stream whose received bytes are scanned.
pub struct TapBidi {
    inner: h3_quinn::BidiStream<Bytes>,
    rec: SharedRecorder,
    scan: H3FrameScanner,
}

/// The receiving half of a split [`TapBidi`].
pub struct TapRecv {
    inner: h3_quinn::RecvStream,
    rec: SharedRecorder,
    scan: H3FrameScanner,
}

impl quic::Connection<Bytes> for TapConnection {
    type RecvStream = h3_quinn::RecvStream;
    type OpenStreams = TapOpener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::RecvStream, quic::ConnectionErrorIncoming>> {
        quic::Connection::<Bytes>::poll_accept_recv(&mut self.inner, cx)
    }
    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::BidiStream, quic::ConnectionErrorIncoming>> {
        quic::Connection::<Bytes>::poll_accept_bidi(&mut self.inner, cx).map_ok(|inner| TapBidi {
            inner,
            rec: self.rec.clone(),
            scan: H3FrameScanner::default(),
        })
    }
    fn opener(&self) -> TapOpener {
        TapOpener {
            inner: quic::Connection::<Bytes>::opener(&self.inner),
            rec: self.rec.clone(),
        }
    }
}

impl quic::OpenStreams<Bytes> for TapConnection {
    type BidiStream = TapBidi;
    type SendStream = h3_quinn::SendStream<Bytes>;
    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapBidi, StreamErrorIncoming>> {
        quic::OpenStreams::<Bytes>::poll_open_bidi(&mut self.inner, cx).map_ok(|inner| TapBidi {
            inner,
            rec: self.rec.clone(),
            scan: H3FrameScanner::default(),
        })
    }
    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        quic::OpenStreams::<Bytes>::poll_open_send(&mut self.inner, cx)
    }
    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.inner, code, reason)
    }
}

impl quic::OpenStreams<Bytes> for TapOpener {
    type BidiStream = TapBidi;
    type SendStream = h3_quinn::SendStream<Bytes>;
    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapBidi, StreamErrorIncoming>> {
        self.inner.poll_open_bidi(cx).map_ok(|inner| TapBidi {
            inner,
            rec: self.rec.clone(),
            scan: H3FrameScanner::default(),
        })
    }
    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        self.inner.poll_open_send(cx)
    }
    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        quic::OpenStreams::<Bytes>::close(&mut self.inner, code, reason)
    }
}

fn count_recv(
    rec: &SharedRecorder,
    scan: &mut H3FrameScanner,
    r: &Poll<Result<Option<Bytes>, StreamErrorIncoming>>,
) {
    if let Poll::Ready(Ok(Some(b))) = r {
        let (header, _) = scan.scan(b);
        // Body bytes are counted from decoded DATA by the exchange.
        rec.borrow_mut().received(b.len() as u64, header, 0);
    }
}

impl quic::RecvStream for TapBidi {
    type Buf = Bytes;
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let r = self.inner.poll_data(cx);
        count_recv(&self.rec, &mut self.scan, &r);
        r
    }
    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }
    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl quic::RecvStream for TapRecv {
    type Buf = Bytes;
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let r = self.inner.poll_data(cx);
        count_recv(&self.rec, &mut self.scan, &r);
        r
    }
    fn stop_sending(&mut self, error_code: u64) {
        self.inner.stop_sending(error_code)
    }
    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl quic::SendStream<Bytes> for TapBidi {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_ready(cx)
    }
    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        let buf: WriteBuf<Bytes> = data.into();
        let total = buf.remaining() as u64;
        // The frame head (type, length) is at the front of the first chunk.
        let header = match varint(buf.chunk())
            .and_then(|(t, a)| varint(&buf.chunk()[a..]).map(|(l, _)| (t, l)))
        {
            Some((0x01, len)) => len,
            _ => 0,
        };
        self.rec.borrow_mut().sent(total, header, 0);
        self.inner.send_data(buf)
    }
    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.inner.poll_finish(cx)
    }
    fn reset(&mut self, reset_code: u64) {
        self.inner.reset(reset_code)
    }
    fn send_id(&self) -> StreamId {
        self.inner.send_id()
    }
}

impl quic::BidiStream<Bytes> for TapBidi {
    type SendStream = h3_quinn::SendStream<Bytes>;
    type RecvStream = TapRecv;
    fn split(self) -> (Self::SendStream, TapRecv) {
        let (send, recv) = self.inner.split();
        (
            send,
            TapRecv {
                inner: recv,
                rec: self.rec,
                scan: self.scan,
            },
        )
    }
}

/// What opening a QUIC connection needs.
#[derive(Clone)]
pub struct QuicDialer {
    /// The worker's endpoint (one UDP socket per worker).
    pub endpoint: quinn::Endpoint,
    /// Client configs (TLS 1.3, ALPN h3, congestion controller; one per connection when
    /// resumption is on, to tell resumed handshakes).
    pub configs: crate::tls::QuicConfigs,
    /// Server address.
    pub addr: SocketAddr,
    /// TLS server name.
    pub server_name: String,
    /// Handshake limit.
    pub limit: Duration,
    /// Try 0-RTT when a ticket is available.
    pub zero_rtt: bool,
}

/// An established QUIC connection and what its setup measured.
pub struct QuicConnection {
    /// The connection.
    pub conn: quinn::Connection,
    /// Handshake time (to 1-RTT keys, or until 0-RTT could start).
    pub handshake: Duration,
    /// 0-RTT was used (acceptance is only known later).
    pub zero_rtt: Option<quinn::ZeroRttAccepted>,
    /// With resumption on: whether the handshake verified a certificate.
    pub cert_check: Option<crate::tls::CertCheck>,
}

impl QuicConnection {
    /// The completed handshake resumed a TLS session: it verified no certificate (a full
    /// TLS 1.3 handshake always does). False when resumption is off.
    pub fn resumed(&self) -> bool {
        self.cert_check.as_ref().is_some_and(|c| !c.verified())
    }
}

fn quic_error(addr: SocketAddr, e: &quinn::ConnectionError, limit: Duration) -> ConnectError {
    let (kind, why) = match e {
        quinn::ConnectionError::TimedOut => (
            ErrorKind::Timeout,
            format!("no QUIC handshake within {limit:?} (nothing listening on UDP?)"),
        ),
        quinn::ConnectionError::TransportError(t) => (ErrorKind::Tls, t.to_string()),
        quinn::ConnectionError::ConnectionClosed(c) => (ErrorKind::Tls, c.to_string()),
        quinn::ConnectionError::VersionMismatch => (ErrorKind::Protocol, e.to_string()),
        other => (ErrorKind::Connect, other.to_string()),
    };
    ConnectError {
        kind,
        message: format!("QUIC handshake with {addr}: {why}"),
    }
}

impl QuicDialer {
    /// Opens one connection (0-RTT when asked and possible).
    pub async fn dial(&self) -> Result<QuicConnection, ConnectError> {
        let t0 = Instant::now();
        let (config, cert_check) = self.configs.for_connection();
        let connecting = self
            .endpoint
            .connect_with(config, self.addr, &self.server_name)
            .map_err(|e| ConnectError {
                kind: ErrorKind::Connect,
                message: format!("QUIC connect to {}: {e}", self.addr),
            })?;
        let connecting = if self.zero_rtt {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => {
                    return Ok(QuicConnection {
                        conn,
                        handshake: t0.elapsed(),
                        zero_rtt: Some(accepted),
                        cert_check,
                    })
                }
                Err(c) => c,
            }
        } else {
            connecting
        };
        match tokio::time::timeout(self.limit, connecting).await {
            Err(_) => Err(ConnectError {
                kind: ErrorKind::Timeout,
                message: format!(
                    "QUIC handshake with {}: timed out after {:?}",
                    self.addr, self.limit
                ),
            }),
            Ok(Err(e)) => Err(quic_error(self.addr, &e, self.limit)),
            Ok(Ok(conn)) => Ok(QuicConnection {
                conn,
                handshake: t0.elapsed(),
                zero_rtt: None,
                cert_check,
            }),
        }
    }
}

fn classify_stream(e: &h3::error::StreamError) -> (ErrorKind, String) {
    let text = e.to_string();
    let lower = text.to_ascii_lowercase();
    let kind = if lower.contains("timeout") || lower.contains("timed out") {
        ErrorKind::Timeout
    } else if lower.contains("reset") || lower.contains("closed") || lower.contains("terminated") {
        ErrorKind::Reset
    } else {
        ErrorKind::Protocol
    };
    (kind, format!("h3: {text}"))
}

type RequestStream = h3::client::RequestStream<TapBidi, Bytes>;

struct Outcome {
    scheduled: Instant,
    result: Result<(), (ErrorKind, String)>,
}

async fn exchange(
    mut stream: RequestStream,
    body: Option<Bytes>,
    rec: SharedRecorder,
    scheduled: Instant,
    sent: Instant,
    limit: Duration,
) -> Outcome {
    let work = async {
        if let Some(b) = body {
            stream.send_data(b).await.map_err(|e| classify_stream(&e))?;
        }
        stream.finish().await.map_err(|e| classify_stream(&e))?;
        let resp = stream
            .recv_response()
            .await
            .map_err(|e| classify_stream(&e))?;
        let first_byte = Instant::now();
        let status = resp.status().as_u16();
        rec.borrow_mut()
            .received_header_uncompressed(crate::h2::header_list_size(resp.headers()));
        let mut n = 0u64;
        // Read to the end of the stream: dropping it early makes quinn send STOP_SENDING.
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| classify_stream(&e))? {
            let k = chunk.remaining();
            n += k as u64;
            chunk.advance(k);
        }
        let _ = stream.recv_trailers().await;
        let done = Instant::now();
        let mut r = rec.borrow_mut();
        r.received(0, 0, n);
        r.response(scheduled, sent, first_byte, done, status);
        Ok(())
    };
    let result = match tokio::time::timeout(limit, work).await {
        Ok(r) => r,
        Err(_) => Err((ErrorKind::Timeout, format!("no response within {limit:?}"))),
    };
    Outcome { scheduled, result }
}

/// Runs requests on one HTTP/3 connection until the plan is done or the connection fails.
pub async fn session(ctx: &mut ClientCtx, conn: quinn::Connection) -> SessionEnd {
    let tap = TapConnection {
        inner: h3_quinn::Connection::new(conn.clone()),
        rec: ctx.rec.clone(),
    };
    let setup = tokio::time::timeout(
        ctx.connect_timeout,
        h3::client::builder()
            .max_field_section_size(u64::from(crate::h2::MAX_HEADER_LIST))
            .build::<_, _, Bytes>(tap),
    )
    .await;
    let (mut driver, mut sender) = match setup {
        Err(_) => {
            let message = "h3 setup timed out".to_string();
            ctx.rec
                .borrow_mut()
                .connect_failed(ErrorKind::Timeout, &message);
            return SessionEnd::Failed {
                answered: 0,
                kind: ErrorKind::Timeout,
                message,
            };
        }
        Ok(Err(e)) => {
            let message = format!("h3 setup: {e}");
            ctx.rec
                .borrow_mut()
                .connect_failed(ErrorKind::Protocol, &message);
            return SessionEnd::Failed {
                answered: 0,
                kind: ErrorKind::Protocol,
                message,
            };
        }
        Ok(Ok(pair)) => pair,
    };
    let drive = tokio::task::spawn_local(async move {
        let _ = futures::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    let depth = if ctx.no_keepalive { 1 } else { ctx.depth };
    let mut inflight = FuturesUnordered::new();
    let mut answered = 0u64;
    let mut sent_any = false;
    let mut due_timer = std::pin::pin!(tokio::time::sleep_until(Instant::now().into()));
    let end = 'conn: loop {
        let mut wait_until = None;
        let mut plan_done = false;
        let closing = ctx.no_keepalive && sent_any;
        while inflight.len() < depth && !closing {
            match ctx.next(Instant::now()) {
                Next::Go { scheduled, ticket } => {
                    let i = ctx.next_url();
                    let req = ctx.target.http_request(i);
                    let sent = Instant::now();
                    // Opening a stream waits for stream credit from the server, which comes
                    // only as streams in flight finish: keep driving them meanwhile.
                    let opened = {
                        let open = tokio::time::timeout(ctx.timeout, sender.send_request(req));
                        tokio::pin!(open);
                        loop {
                            tokio::select! {
                                biased;
                                r = &mut open => break r,
                                Some(o) = inflight.next(), if !inflight.is_empty() => {
                                    let o: Outcome = o;
                                    match o.result {
                                        Ok(()) => answered += 1,
                                        Err((kind, message)) => ctx
                                            .rec
                                            .borrow_mut()
                                            .request_failed(o.scheduled, kind, &message),
                                    }
                                }
                            }
                        }
                    };
                    match opened {
                        Ok(Ok(stream)) => {
                            {
                                let mut rec = ctx.rec.borrow_mut();
                                rec.request_started(scheduled);
                                rec.sent(0, 0, ctx.target.requests[i].h2_header_size);
                            }
                            sent_any = true;
                            let body = ctx.target.body.clone();
                            inflight.push(exchange(
                                stream,
                                body,
                                ctx.rec.clone(),
                                scheduled,
                                sent,
                                ctx.timeout,
                            ));
                        }
                        Ok(Err(e)) => {
                            ctx.plan.give_back(ticket);
                            let (kind, message) = classify_stream(&e);
                            break 'conn SessionEnd::Failed {
                                answered,
                                kind,
                                message,
                            };
                        }
                        Err(_) => {
                            ctx.plan.give_back(ticket);
                            let message = "h3: could not open a stream in time".to_string();
                            break 'conn SessionEnd::Failed {
                                answered,
                                kind: ErrorKind::Timeout,
                                message,
                            };
                        }
                    }
                    if ctx.no_keepalive {
                        break;
                    }
                }
                Next::Wait(t) => {
                    wait_until = Some(t);
                    break;
                }
                Next::Done => {
                    plan_done = true;
                    break;
                }
            }
        }
        if inflight.is_empty() {
            if let Some(t) = wait_until {
                tokio::time::sleep_until(t.into()).await;
                continue;
            }
            if plan_done {
                break SessionEnd::PlanDone;
            }
            break SessionEnd::Closed { answered };
        }
        if let Some(t) = wait_until {
            due_timer.as_mut().reset(t.into());
        }
        let outcome = tokio::select! {
            biased;
            o = inflight.next() => o,
            _ = &mut due_timer, if wait_until.is_some() => continue,
        };
        if let Some(o) = outcome {
            match o.result {
                Ok(()) => answered += 1,
                Err((kind, message)) => {
                    ctx.rec
                        .borrow_mut()
                        .request_failed(o.scheduled, kind, &message);
                    if conn.close_reason().is_some() {
                        break 'conn SessionEnd::Failed {
                            answered,
                            kind,
                            message,
                        };
                    }
                }
            }
        }
    };
    drop(sender);
    conn.close(quinn::VarInt::from_u32(0x100), b"");
    let drain = async {
        while let Some(o) = inflight.next().await {
            if let Err((kind, message)) = o.result {
                ctx.rec
                    .borrow_mut()
                    .request_failed(o.scheduled, kind, &message);
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), drain).await;
    drive.abort();
    end
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scanner_counts_headers_payload_across_splits() {
        // HEADERS (len 3), unknown type 0x21 with 2-byte varint type (len 2), DATA (len 70:
        // a 2-byte length varint), HEADERS (len 1: trailers).
        let mut bytes = vec![0x01, 0x03, 9, 9, 9, 0x40, 0x21, 0x02, 7, 7, 0x00, 0x40, 70];
        bytes.extend(std::iter::repeat_n(5, 70));
        bytes.extend_from_slice(&[0x01, 0x01, 1]);
        for chunk in [1, 2, 3, 5, bytes.len()] {
            let mut s = H3FrameScanner::default();
            let (mut h, mut d) = (0, 0);
            for c in bytes.chunks(chunk) {
                let (a, b) = s.scan(c);
                h += a;
                d += b;
            }
            assert_eq!((h, d), (4, 70), "chunk {chunk}");
        }
    }
}
