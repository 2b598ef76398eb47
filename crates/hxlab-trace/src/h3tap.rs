//! Taps on h3-quinn's implementations of h3's `quic` traits: every byte h3 hands to a QUIC
//! stream, and every byte it reads from one, also goes through an [`H3StreamWire`] parser. The
//! real h3 client runs unchanged on top; only the byte flow is observed.
//!
//! Sent bytes are reported when h3 hands them to the stream (just before QUIC takes them), and
//! received bytes when h3 reads them; QUIC packets themselves are not shown.

use crate::event::{Dir, Event, Tracer};
use crate::h3wire::H3StreamWire;
use bytes::{Buf, Bytes};
use h3::error::Code;
use h3::quic::{
    self, ConnectionErrorIncoming, SendStreamUnframed, StreamErrorIncoming, StreamId, WriteBuf,
};
use std::task::{ready, Context, Poll};

fn emit_all(tracer: &Tracer, events: Vec<Event>) {
    for e in events {
        tracer.emit(e);
    }
}

/// An h3-quinn connection whose streams are tapped.
pub struct TapConnection {
    inner: h3_quinn::Connection,
    tracer: Tracer,
}

impl TapConnection {
    /// Wraps an h3-quinn connection.
    pub fn new(inner: h3_quinn::Connection, tracer: Tracer) -> TapConnection {
        TapConnection { inner, tracer }
    }
}

/// Opens tapped streams (the `opener()` half of [`TapConnection`]).
pub struct TapOpener {
    inner: h3_quinn::OpenStreams,
    tracer: Tracer,
}

/// The send half of a tapped stream.
pub struct TapSend<B: Buf> {
    inner: h3_quinn::SendStream<B>,
    /// Bytes taken from h3 and not yet accepted by QUIC.
    pending: Bytes,
    wire: H3StreamWire,
    tracer: Tracer,
    fin_reported: bool,
}

/// The receive half of a tapped stream.
pub struct TapRecv {
    inner: h3_quinn::RecvStream,
    wire: H3StreamWire,
    tracer: Tracer,
    fin_reported: bool,
}

/// A tapped bidirectional (request) stream.
pub struct TapBidi<B: Buf> {
    send: TapSend<B>,
    recv: TapRecv,
}

impl<B: Buf> TapSend<B> {
    fn new(inner: h3_quinn::SendStream<B>, bidi: bool, tracer: Tracer) -> TapSend<B> {
        let id = quic::SendStream::<B>::send_id(&inner).into_inner();
        TapSend {
            inner,
            pending: Bytes::new(),
            wire: H3StreamWire::new(Dir::Send, id, bidi),
            tracer,
            fin_reported: false,
        }
    }
}

impl TapRecv {
    fn new(inner: h3_quinn::RecvStream, bidi: bool, tracer: Tracer) -> TapRecv {
        let id = quic::RecvStream::recv_id(&inner).into_inner();
        TapRecv {
            inner,
            wire: H3StreamWire::new(Dir::Recv, id, bidi),
            tracer,
            fin_reported: false,
        }
    }
}

fn bidi<B: Buf>(s: h3_quinn::BidiStream<B>, tracer: &Tracer) -> TapBidi<B> {
    let (send, recv) = quic::BidiStream::<B>::split(s);
    TapBidi {
        send: TapSend::new(send, true, tracer.clone()),
        recv: TapRecv::new(recv, true, tracer.clone()),
    }
}

impl<B: Buf> quic::Connection<B> for TapConnection {
    type RecvStream = TapRecv;
    type OpenStreams = TapOpener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapRecv, ConnectionErrorIncoming>> {
        let s = ready!(
            <h3_quinn::Connection as quic::Connection<B>>::poll_accept_recv(&mut self.inner, cx)
        )?;
        Poll::Ready(Ok(TapRecv::new(s, false, self.tracer.clone())))
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapBidi<B>, ConnectionErrorIncoming>> {
        let s = ready!(
            <h3_quinn::Connection as quic::Connection<B>>::poll_accept_bidi(&mut self.inner, cx)
        )?;
        Poll::Ready(Ok(bidi(s, &self.tracer)))
    }

    fn opener(&self) -> TapOpener {
        TapOpener {
            inner: <h3_quinn::Connection as quic::Connection<B>>::opener(&self.inner),
            tracer: self.tracer.clone(),
        }
    }
}

impl<B: Buf> quic::OpenStreams<B> for TapConnection {
    type BidiStream = TapBidi<B>;
    type SendStream = TapSend<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapBidi<B>, StreamErrorIncoming>> {
        let s = ready!(
            <h3_quinn::Connection as quic::OpenStreams<B>>::poll_open_bidi(&mut self.inner, cx)
        )?;
        Poll::Ready(Ok(bidi(s, &self.tracer)))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapSend<B>, StreamErrorIncoming>> {
        let s = ready!(
            <h3_quinn::Connection as quic::OpenStreams<B>>::poll_open_send(&mut self.inner, cx)
        )?;
        Poll::Ready(Ok(TapSend::new(s, false, self.tracer.clone())))
    }

    fn close(&mut self, code: Code, reason: &[u8]) {
        self.tracer.emit(close_event(code, reason));
        <h3_quinn::Connection as quic::OpenStreams<B>>::close(&mut self.inner, code, reason)
    }
}

impl<B: Buf> quic::OpenStreams<B> for TapOpener {
    type BidiStream = TapBidi<B>;
    type SendStream = TapSend<B>;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapBidi<B>, StreamErrorIncoming>> {
        let s = ready!(
            <h3_quinn::OpenStreams as quic::OpenStreams<B>>::poll_open_bidi(&mut self.inner, cx)
        )?;
        Poll::Ready(Ok(bidi(s, &self.tracer)))
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<TapSend<B>, StreamErrorIncoming>> {
        let s = ready!(
            <h3_quinn::OpenStreams as quic::OpenStreams<B>>::poll_open_send(&mut self.inner, cx)
        )?;
        Poll::Ready(Ok(TapSend::new(s, false, self.tracer.clone())))
    }

    fn close(&mut self, code: Code, reason: &[u8]) {
        self.tracer.emit(close_event(code, reason));
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::close(&mut self.inner, code, reason)
    }
}

fn close_event(code: Code, reason: &[u8]) -> Event {
    let reason = String::from_utf8_lossy(reason).into_owned();
    Event::new(
        "quic_close",
        format!("send CONNECTION_CLOSE <error_code={code}, reason={reason:?}>"),
    )
    .field("proto", "h3")
    .field("dir", "send")
    .field("error_code", code.value())
    .field("reason", reason)
}

impl<B: Buf> quic::SendStream<B> for TapSend<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        while self.pending.has_remaining() {
            ready!(self.inner.poll_send(cx, &mut self.pending))?;
        }
        quic::SendStream::<B>::poll_ready(&mut self.inner, cx)
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.pending.has_remaining() {
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError(
                    "send_data called before the previous data was written".into(),
                ),
            });
        }
        // Flatten h3's frame header + payload into the exact bytes the stream will carry.
        let mut wb: WriteBuf<B> = data.into();
        let bytes = wb.copy_to_bytes(wb.remaining());
        emit_all(&self.tracer, self.wire.feed(&bytes));
        self.pending = bytes;
        Ok(())
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        while self.pending.has_remaining() {
            ready!(self.inner.poll_send(cx, &mut self.pending))?;
        }
        let r = ready!(quic::SendStream::<B>::poll_finish(&mut self.inner, cx));
        if r.is_ok() && !self.fin_reported {
            self.fin_reported = true;
            self.tracer.emit(self.wire.finish());
        }
        Poll::Ready(r)
    }

    fn reset(&mut self, reset_code: u64) {
        self.tracer.emit(
            Event::new(
                "stream_reset",
                format!(
                    "send RESET_STREAM <stream_id={}, error_code=0x{reset_code:x}>",
                    self.send_id().into_inner()
                ),
            )
            .field("proto", "h3")
            .field("dir", "send")
            .field("error_code", reset_code),
        );
        quic::SendStream::<B>::reset(&mut self.inner, reset_code)
    }

    fn send_id(&self) -> StreamId {
        quic::SendStream::<B>::send_id(&self.inner)
    }
}

impl quic::RecvStream for TapRecv {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let r = ready!(self.inner.poll_data(cx));
        match &r {
            Ok(Some(b)) => emit_all(&self.tracer, self.wire.feed(b)),
            Ok(None) if !self.fin_reported => {
                self.fin_reported = true;
                self.tracer.emit(self.wire.finish());
            }
            _ => {}
        }
        Poll::Ready(r)
    }

    fn stop_sending(&mut self, error_code: u64) {
        self.tracer.emit(
            Event::new(
                "stop_sending",
                format!(
                    "send STOP_SENDING <stream_id={}, error_code=0x{error_code:x}>",
                    self.recv_id().into_inner()
                ),
            )
            .field("proto", "h3")
            .field("dir", "send")
            .field("error_code", error_code),
        );
        self.inner.stop_sending(error_code)
    }

    fn recv_id(&self) -> StreamId {
        self.inner.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for TapBidi<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }
    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }
    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }
    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }
    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::RecvStream for TapBidi<B> {
    type Buf = Bytes;
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }
    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }
    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::BidiStream<B> for TapBidi<B> {
    type SendStream = TapSend<B>;
    type RecvStream = TapRecv;
    fn split(self) -> (TapSend<B>, TapRecv) {
        (self.send, self.recv)
    }
}
