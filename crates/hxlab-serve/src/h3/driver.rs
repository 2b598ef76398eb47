//! The HTTP/3 server's QUIC driver: one UDP socket (quinn-udp, so GSO and GRO), one
//! [`quinn_proto::Endpoint`], every connection, one timer, all on the server's QUIC thread
//! (`Rc`/`RefCell`; no locks, no channels per packet). It replaces quinn's async layer (its
//! endpoint driver task, one connection driver task per connection, their mutexes and
//! channels), as the load client's driver (crates/hxlab-load/src/h3/driver.rs) does on its
//! side; this one adds what a server needs: new connections through admission control
//! (accept, Retry, refuse), and streams as small futures ([`RecvStream`], [`SendStream`]) so
//! that a request stays one small task (`request.rs`).
//!
//! One turn of the driver task:
//! 1. receive: what the socket has (GRO batches, at most [`RECV_CALLS`] receive calls), each
//!    datagram handed to the endpoint and its connection; new connection attempts go through
//!    admission (`admit.rs`), and an accepted one gets its connection task;
//! 2. the connections that got input are polled for their events, which wake the tasks
//!    waiting on them (a stream readable or writable, a stream opened, the handshake done,
//!    the connection lost);
//! 3. the driver yields twice, so the tasks it woke run in the same turn (connection tasks
//!    accept new streams and spawn their request tasks, which read the requests and write the
//!    answers);
//! 4. only then every connection touched since the last transmit is asked for its packets,
//!    in GSO sends of as many datagrams as fit in one 64 KiB UDP send at the connection's
//!    current MTU (at most 45), so the ACKs ride with the answers;
//! 5. timers that are due are handled (and their packets sent).

use crate::routes::Ctx;
use bytes::Bytes;
use hxlab_quic::qlog_h3::H3Events;
use hxlab_quic::{Driven, DriverConn, DriverCore, QuicSocket};
use hxlab_wire::tap::{Channel, Dir as TapDir, Tap};
use quinn::udp::UdpSocketState;
use quinn_proto::{ConnectionError, DatagramEvent, Dir, Event, StreamEvent, StreamId, VarInt};
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Most datagrams of one GSO send: 45 × 1,452 bytes (quinn-proto's largest datagram) fit
/// in one UDP send ([`gso_segments`] caps a send at what fits at the current MTU).
const MAX_SEGMENTS: usize = 45;
/// Most datagrams one connection sends before the others get their turn; it goes on in the
/// next pass of the same turn.
const MAX_DATAGRAMS_PER_PASS: usize = 2 * MAX_SEGMENTS;
/// Most receive calls per turn, so answers and ACKs go out under any load.
const RECV_CALLS: usize = 16;

/// One connection as the driver and the connection's tasks share it.
pub(super) struct ConnState {
    /// The quinn-proto connection, and what the transmit pass keeps of it.
    quic: Driven,
    /// The handshake completed.
    connected: bool,
    /// Why the connection ended, once it did.
    lost: Option<ConnectionError>,
    /// Tasks waiting for a stream to become readable, or writable (or stopped, finished).
    readers: HashMap<StreamId, Waker>,
    writers: HashMap<StreamId, Waker>,
    /// The tasks accepting bidirectional and unidirectional streams.
    accept_bi: Option<Waker>,
    accept_uni: Option<Waker>,
    /// Others waiting for any change (the handshake, a stream credit, the end).
    watchers: Vec<Waker>,
    /// `--qlog DIR`: the HTTP/3 frame and QPACK instruction events of this connection, fed
    /// with every stream byte read and written (beside quinn's transport events, same file).
    events: Option<H3Events>,
}

fn wake(w: Option<Waker>) {
    if let Some(w) = w {
        w.wake();
    }
}

impl ConnState {
    /// `--qlog`: stream bytes read (`Recv`) or written (`Send`) go to the connection's
    /// HTTP/3 events.
    fn tap(&mut self, dir: TapDir, id: StreamId, bytes: &[u8]) {
        if let Some(ev) = self.events.as_mut() {
            ev.bytes(dir, Channel::Quic(id.into()), bytes);
        }
    }

    /// `--qlog`: the stream's end in that direction (its reader is let go).
    fn tap_end(&mut self, dir: TapDir, id: StreamId) {
        if let Some(ev) = self.events.as_mut() {
            ev.stream_end(dir, Channel::Quic(id.into()));
        }
    }

    fn wake_watchers(&mut self) {
        for w in self.watchers.drain(..) {
            w.wake();
        }
    }

    fn wake_all(&mut self) {
        self.wake_watchers();
        for (_, w) in self.readers.drain().chain(self.writers.drain()) {
            w.wake();
        }
        wake(self.accept_bi.take());
        wake(self.accept_uni.take());
    }
}

impl DriverConn for ConnState {
    fn driven(&mut self) -> &mut Driven {
        &mut self.quic
    }
    fn deliver_events(&mut self) {
        while let Some(ev) = self.quic.q.poll() {
            match ev {
                Event::Connected => {
                    self.connected = true;
                    self.wake_watchers();
                }
                Event::ConnectionLost { reason } => {
                    self.lost.get_or_insert(reason);
                    self.wake_all();
                }
                Event::Stream(StreamEvent::Readable { id }) => wake(self.readers.remove(&id)),
                Event::Stream(
                    StreamEvent::Writable { id }
                    | StreamEvent::Finished { id }
                    | StreamEvent::Stopped { id, .. },
                ) => wake(self.writers.remove(&id)),
                Event::Stream(StreamEvent::Opened { dir }) => {
                    match dir {
                        Dir::Bi => wake(self.accept_bi.take()),
                        Dir::Uni => wake(self.accept_uni.take()),
                    }
                    // Stream data before the handshake completed is 0-RTT (mod.rs).
                    if !self.connected {
                        self.wake_watchers();
                    }
                }
                Event::Stream(StreamEvent::Available { .. }) => self.wake_watchers(),
                Event::HandshakeDataReady | Event::DatagramReceived | Event::DatagramsUnblocked => {
                }
            }
        }
    }
}

type Shared = Rc<RefCell<ConnState>>;

/// The driver's state, shared by its task and every connection handle: the socket (GSO
/// sends of up to [`MAX_SEGMENTS`] datagrams), the endpoint, the connections, the task's kick.
struct Inner {
    core: DriverCore<ConnState>,
    /// `--qlog DIR`: the files, and the config each connection's is made from.
    qlog: Option<(QlogServer, quinn_proto::ServerConfig)>,
}

/// `hxlab serve --qlog DIR`: a qlog file per QUIC connection (quinn's transport events, and
/// our HTTP/3 and QPACK events in the same trace), and what its transport settings are made
/// of (each connection gets its own, with its stream).
pub(crate) struct QlogServer {
    pub files: hxlab_quic::qlog::QlogFiles,
    pub limits: crate::tls::QuicLimits,
    pub cc: Option<hxlab_core::cc::CongestionControl>,
}

impl QlogServer {
    /// `base` with transport settings of its own writing a new qlog file, and the HTTP/3
    /// events writing into the same file; None when the file cannot be made (the connection
    /// is served without one).
    fn config(
        &self,
        base: &quinn_proto::ServerConfig,
    ) -> Option<(Arc<quinn_proto::ServerConfig>, H3Events)> {
        let (file, path, start) = self.files.open().ok()?;
        let mut transport = crate::tls::server_transport(self.limits, self.cc);
        transport.qlog_stream(hxlab_quic::qlog::stream(
            file.clone(),
            start,
            &path,
            "server",
        ));
        let mut config = base.clone();
        config.transport_config(Arc::new(transport));
        Some((Arc::new(config), H3Events::new(file, start)))
    }
}

impl Inner {
    fn kick(&self) {
        self.core.kick();
    }
}

/// A connection, as its tasks hold it (cheap to clone). When the last handle goes, the
/// connection is closed (code 0) unless it is closed already, as quinn does.
#[derive(Clone)]
pub(super) struct Conn {
    driver: Rc<Inner>,
    state: Shared,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.core.handle_dropped(&self.state);
    }
}

/// Why a stream could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The peer reset the stream.
    Reset,
    /// The connection is gone (or the stream is).
    Gone,
}

/// The connection ended or the stream was stopped or reset: nothing more can be written.
#[derive(Debug)]
pub(super) struct WriteError;

impl Conn {
    /// Runs `f` on the connection and has the driver transmit what it queued.
    #[inline]
    fn with<R>(&self, f: impl FnOnce(&mut ConnState) -> R) -> R {
        let mut s = self.state.borrow_mut();
        let r = f(&mut s);
        s.quic.dirty = true;
        drop(s);
        self.driver.kick();
        r
    }

    /// Waits until `f` says something (checked at once and after every change it watches).
    pub async fn until<R>(&self, mut f: impl FnMut(&mut ConnState) -> Option<R>) -> R {
        poll_fn(|cx| {
            let mut s = self.state.borrow_mut();
            match f(&mut s) {
                Some(r) => Poll::Ready(r),
                None => {
                    if !s.watchers.iter().any(|w| w.will_wake(cx.waker())) {
                        s.watchers.push(cx.waker().clone());
                    }
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Ready when the connection should be served: the handshake completed (`true`), or the
    /// client sent 0-RTT STREAM frames before it did (`true`, served at once with 0.5-RTT
    /// data); `false` when the connection ended first.
    pub async fn serveable(&self) -> bool {
        self.until(|s| {
            if s.lost.is_some() {
                Some(false)
            } else if s.connected || s.quic.q.stats().frame_rx.stream > 0 {
                Some(true)
            } else {
                None
            }
        })
        .await
    }

    /// Ready when the connection has ended.
    pub async fn closed(&self) {
        self.until(|s| s.lost.as_ref().map(|_| ())).await
    }

    /// Closes the connection with `code` and `reason` (sent by the driver); every task
    /// waiting on it is woken.
    pub fn close(&self, code: VarInt, reason: &[u8]) {
        self.with(|s| {
            if !s.quic.q.is_closed() {
                s.quic
                    .q
                    .close(Instant::now(), code, Bytes::copy_from_slice(reason));
            }
            s.lost.get_or_insert(ConnectionError::LocallyClosed);
            s.wake_all();
        });
    }

    /// Sets the rank of the client's request stream `id` (a PRIORITY_UPDATE's target).
    /// quinn-proto applies it when the stream next joins its send queue: at once for a
    /// stream with nothing buffered, after its next STREAM frame for one that has data
    /// waiting (docs/priorities.md).
    pub fn set_priority(&self, id: u64, rank: i32) {
        let id = StreamId::new(quinn_proto::Side::Client, Dir::Bi, id >> 2);
        self.with(|s| {
            let _ = s.quic.q.send_stream(id).set_priority(rank);
        });
    }

    /// The congestion controller running (`"reno"`, `"cubic"`, `"bbr"`).
    pub fn congestion_controller(&self) -> &'static str {
        hxlab_quic::cc::of_controller(self.state.borrow().quic.q.congestion_state())
    }

    fn send_stream(&self, id: StreamId) -> SendStream {
        SendStream {
            conn: self.clone(),
            id,
            done: false,
        }
    }

    fn recv_stream(&self, id: StreamId) -> RecvStream {
        RecvStream {
            conn: self.clone(),
            id,
            done: false,
        }
    }

    /// The next request stream the client opened.
    pub async fn accept_bi(&self) -> Result<(SendStream, RecvStream), WriteError> {
        let id = poll_fn(|cx| {
            let mut s = self.state.borrow_mut();
            if s.lost.is_some() {
                return Poll::Ready(Err(WriteError));
            }
            if let Some(id) = s.quic.q.streams().accept(Dir::Bi) {
                // Accepting may give the client more stream credit.
                s.quic.dirty = true;
                drop(s);
                self.driver.kick();
                return Poll::Ready(Ok(id));
            }
            s.accept_bi = Some(cx.waker().clone());
            Poll::Pending
        })
        .await?;
        Ok((self.send_stream(id), self.recv_stream(id)))
    }

    /// The next unidirectional stream the client opened.
    pub async fn accept_uni(&self) -> Result<RecvStream, WriteError> {
        let id = poll_fn(|cx| {
            let mut s = self.state.borrow_mut();
            if s.lost.is_some() {
                return Poll::Ready(Err(WriteError));
            }
            if let Some(id) = s.quic.q.streams().accept(Dir::Uni) {
                s.quic.dirty = true;
                drop(s);
                self.driver.kick();
                return Poll::Ready(Ok(id));
            }
            s.accept_uni = Some(cx.waker().clone());
            Poll::Pending
        })
        .await?;
        Ok(self.recv_stream(id))
    }

    /// Opens a unidirectional stream of ours (waits for the client's credit).
    pub async fn open_uni(&self) -> Result<SendStream, WriteError> {
        let id = self
            .until(|s| {
                if s.lost.is_some() {
                    Some(None)
                } else {
                    s.quic.q.streams().open(Dir::Uni).map(Some)
                }
            })
            .await
            .ok_or(WriteError)?;
        Ok(self.send_stream(id))
    }
}

/// The receiving half of a stream. Dropped before its end, it is stopped (code 0).
pub(super) struct RecvStream {
    conn: Conn,
    id: StreamId,
    /// Read to its end, stopped, reset or gone: nothing more to do on drop.
    done: bool,
}

impl RecvStream {
    /// The stream's id.
    pub fn id(&self) -> StreamId {
        self.id
    }

    /// The next chunk of at most `max` bytes, `None` at the stream's end.
    pub async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, ReadError> {
        poll_fn(|cx| self.poll_read(cx, max)).await
    }

    fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, ReadError>> {
        let conn = &self.conn;
        let mut s = conn.state.borrow_mut();
        if s.lost.is_some() {
            self.done = true;
            return Poll::Ready(Err(ReadError::Gone));
        }
        let mut stream = s.quic.q.recv_stream(self.id);
        let Ok(mut chunks) = stream.read(true) else {
            self.done = true;
            return Poll::Ready(Err(ReadError::Gone));
        };
        let r = chunks.next(max);
        let transmit = chunks.finalize().should_transmit();
        let out = match r {
            Ok(Some(c)) => {
                s.tap(TapDir::Recv, self.id, &c.bytes);
                Poll::Ready(Ok(Some(c.bytes)))
            }
            Ok(None) => {
                self.done = true;
                s.tap_end(TapDir::Recv, self.id);
                Poll::Ready(Ok(None))
            }
            Err(quinn_proto::ReadError::Blocked) => {
                s.readers.insert(self.id, cx.waker().clone());
                Poll::Pending
            }
            Err(quinn_proto::ReadError::Reset(_)) => {
                self.done = true;
                s.tap_end(TapDir::Recv, self.id);
                Poll::Ready(Err(ReadError::Reset))
            }
        };
        if transmit {
            s.quic.dirty = true;
            drop(s);
            conn.driver.kick();
        }
        out
    }

    /// Ready when the peer reset the stream or the connection is gone, without reading
    /// anything: what a request waiting for something else watches.
    pub async fn reset_or_gone(&mut self) {
        poll_fn(|cx| {
            let mut s = self.conn.state.borrow_mut();
            if s.lost.is_some() {
                self.done = true;
                return Poll::Ready(());
            }
            match s.quic.q.recv_stream(self.id).received_reset() {
                Ok(None) => {
                    s.readers.insert(self.id, cx.waker().clone());
                    Poll::Pending
                }
                Ok(Some(_)) | Err(_) => {
                    self.done = true;
                    Poll::Ready(())
                }
            }
        })
        .await
    }

    /// Asks the client to stop sending, with `code`.
    pub fn stop(&mut self, code: VarInt) {
        if !std::mem::replace(&mut self.done, true) {
            let id = self.id;
            self.conn.with(|s| {
                let _ = s.quic.q.recv_stream(id).stop(code);
            });
        }
    }
}

impl Drop for RecvStream {
    fn drop(&mut self) {
        let id = self.id;
        let done = self.done;
        self.conn.with(|s| {
            s.readers.remove(&id);
            s.tap_end(TapDir::Recv, id);
            if !done && s.lost.is_none() {
                let _ = s.quic.q.recv_stream(id).stop(VarInt::from_u32(0));
            }
        });
    }
}

/// The sending half of a stream. Dropped before it was finished or reset, it is finished.
pub(super) struct SendStream {
    conn: Conn,
    id: StreamId,
    /// Finished or reset.
    done: bool,
}

impl SendStream {
    /// Writes all of `chunks` (each emptied as it goes), waiting for flow-control credit.
    pub async fn write_all_chunks(&mut self, chunks: &mut [Bytes]) -> Result<(), WriteError> {
        let mut next = 0;
        poll_fn(|cx| {
            let mut s = self.conn.state.borrow_mut();
            if s.lost.is_some() {
                return Poll::Ready(Err(WriteError));
            }
            let mut wrote = false;
            let out = loop {
                while next < chunks.len() && chunks[next].is_empty() {
                    next += 1;
                }
                if next == chunks.len() {
                    break Poll::Ready(Ok(()));
                }
                // --qlog: what is about to go (cheap clones of the chunks), to tap what went.
                let before: Option<Vec<Bytes>> =
                    s.events.is_some().then(|| chunks[next..].to_vec());
                match s
                    .quic
                    .q
                    .send_stream(self.id)
                    .write_chunks(&mut chunks[next..])
                {
                    Ok(w) => {
                        wrote = true;
                        next += w.chunks;
                        let mut left = w.bytes;
                        for c in before.iter().flatten() {
                            let n = left.min(c.len());
                            if n == 0 {
                                break;
                            }
                            s.tap(TapDir::Send, self.id, &c[..n]);
                            left -= n;
                        }
                    }
                    Err(quinn_proto::WriteError::Blocked) => {
                        s.writers.insert(self.id, cx.waker().clone());
                        break Poll::Pending;
                    }
                    Err(_) => break Poll::Ready(Err(WriteError)),
                }
            };
            if wrote {
                s.quic.dirty = true;
                drop(s);
                self.conn.driver.kick();
            }
            out
        })
        .await
    }

    /// Sets the stream's rank for quinn-proto's packet builder (`crate::schedule::rank`):
    /// higher first, equal ones in turn.
    pub fn set_priority(&self, rank: i32) {
        let id = self.id;
        self.conn.with(|s| {
            let _ = s.quic.q.send_stream(id).set_priority(rank);
        });
    }

    /// Writes what flow control takes of `bytes` now, without waiting: how many bytes went.
    pub fn write_now(&mut self, bytes: &[u8]) -> Result<usize, WriteError> {
        let id = self.id;
        self.conn.with(|s| {
            if s.lost.is_some() {
                return Err(WriteError);
            }
            match s.quic.q.send_stream(id).write(bytes) {
                Ok(n) => {
                    s.tap(TapDir::Send, id, &bytes[..n]);
                    Ok(n)
                }
                Err(quinn_proto::WriteError::Blocked) => Ok(0),
                Err(_) => Err(WriteError),
            }
        })
    }

    /// Writes all of `bytes`.
    pub async fn write_all(&mut self, bytes: &[u8]) -> Result<(), WriteError> {
        self.write_all_chunks(&mut [Bytes::copy_from_slice(bytes)])
            .await
    }

    /// Ends the stream (FIN after what was written).
    pub fn finish(&mut self) -> Result<(), WriteError> {
        self.done = true;
        let id = self.id;
        self.conn.with(|s| {
            s.tap_end(TapDir::Send, id);
            s.quic.q.send_stream(id).finish().map_err(|_| WriteError)
        })
    }

    /// Abandons the stream with `code`.
    pub fn reset(&mut self, code: VarInt) {
        if !std::mem::replace(&mut self.done, true) {
            let id = self.id;
            self.conn.with(|s| {
                s.tap_end(TapDir::Send, id);
                let _ = s.quic.q.send_stream(id).reset(code);
            });
        }
    }
}

impl Drop for SendStream {
    fn drop(&mut self) {
        let id = self.id;
        let done = self.done;
        self.conn.with(|s| {
            s.writers.remove(&id);
            s.tap_end(TapDir::Send, id);
            if !done && s.lost.is_none() {
                let _ = s.quic.q.send_stream(id).finish();
            }
        });
    }
}

/// What the driver task is given to decide on new connections and start them.
pub(super) struct Acceptor {
    /// The server's settings and counters.
    pub ctx: Arc<Ctx>,
    /// Called with each accepted connection (on the driver's thread, in its `LocalSet`).
    pub serve: Box<dyn Fn(Conn, super::admit::Admitted)>,
}

/// The QUIC driver of the HTTP/3 server, started on the current `LocalSet` by [`Driver::run`].
pub(super) struct Driver {
    inner: Rc<Inner>,
}

impl Driver {
    /// A driver on a bound UDP socket (registered with the thread's runtime; its quinn-udp
    /// state made by the caller), serving with `config`.
    pub fn new(
        socket: tokio::net::UdpSocket,
        udp: UdpSocketState,
        config: quinn_proto::ServerConfig,
        qlog: Option<QlogServer>,
    ) -> Driver {
        let qlog = qlog.map(|q| (q, config.clone()));
        let sock = QuicSocket::new(socket, udp, MAX_SEGMENTS);
        // As quinn's endpoint: MTU discovery when the socket never fragments.
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(quinn_proto::EndpointConfig::default()),
            Some(Arc::new(config)),
            !sock.may_fragment(),
            None,
        );
        Driver {
            inner: Rc::new(Inner {
                core: DriverCore::new(sock, endpoint),
                qlog,
            }),
        }
    }

    /// Drives the endpoint until `stop` resolves; then closes every connection with
    /// `code` and `reason`, and goes on until they are all gone (at most `linger`).
    pub async fn run(
        self,
        acceptor: Acceptor,
        stop: impl Future<Output = ()>,
        code: VarInt,
        reason: &'static [u8],
        linger: Duration,
    ) {
        let inner = self.inner;
        let mut stop = pin!(stop);
        let mut timer = pin!(tokio::time::sleep(Duration::from_secs(3600)));
        let mut armed: Option<Instant> = None;
        let mut deadline: Option<Instant> = None;
        let admission = Arc::new(super::admit::Admission::default());
        let mut shutdown = acceptor.ctx.shutdown.clone();
        loop {
            let (readable, stopping) = poll_fn(|cx| {
                let stopping = deadline.is_none() && stop.as_mut().poll(cx).is_ready();
                let kicked = inner.core.take_kick();
                let readable = inner.core.sock.poll_recv_ready(cx);
                let fired = armed.is_some() && timer.as_mut().poll(cx).is_ready();
                if fired {
                    armed = None;
                }
                if kicked || readable || fired || stopping {
                    return Poll::Ready((readable, stopping));
                }
                inner.core.register(cx);
                Poll::Pending
            })
            .await;
            if stopping {
                let now = Instant::now();
                deadline = Some(now + linger);
                let conns: Vec<Shared> = inner
                    .core
                    .conns
                    .borrow()
                    .iter()
                    .flatten()
                    .cloned()
                    .collect();
                for c in conns {
                    let mut s = c.borrow_mut();
                    if !s.quic.q.is_closed() {
                        s.quic.q.close(now, code, Bytes::from_static(reason));
                    }
                    s.lost.get_or_insert(ConnectionError::LocallyClosed);
                    s.wake_all();
                    s.quic.dirty = true;
                }
            }
            if readable {
                // Refused once the server shuts down: it takes no new connections.
                let accepting = deadline.is_none() && !*shutdown.borrow_and_update();
                let admit = accepting.then_some((&acceptor, &admission));
                let (woke, new) = inner.receive(Instant::now(), admit);
                for (state, admitted) in new {
                    (acceptor.serve)(
                        Conn {
                            driver: inner.clone(),
                            state,
                        },
                        admitted,
                    );
                }
                if woke {
                    // The woken tasks run now (they were queued before this task): the
                    // connections' tasks first, then the request tasks they spawned.
                    tokio::task::yield_now().await;
                    tokio::task::yield_now().await;
                }
            }
            let (now, next) = inner.core.end_turn(MAX_DATAGRAMS_PER_PASS).await;
            if let Some(d) = deadline {
                if now >= d || inner.core.conns.borrow().iter().all(Option::is_none) {
                    return;
                }
            }
            let next = match (next, deadline) {
                (Some(t), Some(d)) => Some(t.min(d)),
                (t, d) => t.or(d),
            };
            if let Some(t) = next {
                if armed != Some(t) {
                    timer.as_mut().reset(t.into());
                    armed = Some(t);
                }
            }
        }
    }
}

/// A new connection the driver accepted: its shared state and its admission slots.
type Accepted = (Shared, super::admit::Admitted);

impl Inner {
    /// Receives what the socket has (bounded) and hands it to the connections; new
    /// connection attempts are decided by `admit` (refused without one). Returns whether a
    /// task was woken, and the connections accepted.
    fn receive(
        &self,
        now: Instant,
        admit: Option<(&Acceptor, &Arc<super::admit::Admission>)>,
    ) -> (bool, Vec<Accepted>) {
        let mut response = Vec::new();
        let mut touched = false;
        let mut accepted = Vec::new();
        let mut endpoint = self.core.endpoint.borrow_mut();
        let mut conns = self.core.conns.borrow_mut();
        self.core.sock.receive(RECV_CALLS, |from, to, ecn, d| {
            response.clear();
            match endpoint.handle(now, from, to, ecn, d, &mut response) {
                Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                    if let Some(Some(c)) = conns.get(ch.0) {
                        c.borrow_mut().quic.handle_event(ev);
                        touched = true;
                    }
                }
                Some(DatagramEvent::Response(t)) => self.core.sock.send_now(&t, &response),
                Some(DatagramEvent::NewConnection(incoming)) => {
                    let Some(new) = self.new_connection(&mut endpoint, incoming, now, admit) else {
                        return;
                    };
                    let ch = new.0.borrow().quic.ch;
                    if conns.len() <= ch.0 {
                        conns.resize_with(ch.0 + 1, || None);
                    }
                    conns[ch.0] = Some(new.0.clone());
                    touched = true;
                    accepted.push(new);
                }
                None => {}
            }
        });
        drop(conns);
        if !touched {
            return (false, accepted);
        }
        // Hand the input's events to the tasks (they run before anything is sent).
        for c in self.core.conns.borrow().iter().flatten() {
            let mut c = c.borrow_mut();
            if c.quic.dirty {
                c.poll_events(&mut endpoint);
            }
        }
        (true, accepted)
    }

    /// A new connection attempt: admitted (`admit`; refused without one) and accepted, or
    /// answered with a Retry or a refusal.
    fn new_connection(
        &self,
        endpoint: &mut quinn_proto::Endpoint,
        incoming: quinn_proto::Incoming,
        now: Instant,
        admit: Option<(&Acceptor, &Arc<super::admit::Admission>)>,
    ) -> Option<Accepted> {
        let mut response = Vec::new();
        let Some((acceptor, admission)) = admit else {
            let t = endpoint.refuse(incoming, &mut response);
            self.core.sock.send_now(&t, &response);
            return None;
        };
        let (incoming, admitted) = self.admit(endpoint, incoming, acceptor, admission)?;
        let (config, events) = match self.qlog.as_ref().and_then(|(q, base)| q.config(base)) {
            Some((config, events)) => (Some(config), Some(events)),
            None => (None, None),
        };
        match endpoint.accept(incoming, now, &mut response, config) {
            Ok((ch, q)) => {
                let state = Rc::new(RefCell::new(ConnState {
                    quic: Driven::new(ch, q),
                    connected: false,
                    lost: None,
                    readers: HashMap::new(),
                    writers: HashMap::new(),
                    accept_bi: None,
                    accept_uni: None,
                    watchers: Vec::new(),
                    events,
                }));
                Some((state, admitted))
            }
            Err(e) => {
                if let Some(t) = e.response {
                    self.core.sock.send_now(&t, &response);
                }
                None
            }
        }
    }

    /// Admission control for one connection attempt (`admit.rs`): a Retry or a refusal is
    /// sent here; an accepted attempt comes back with its slots held.
    fn admit(
        &self,
        endpoint: &mut quinn_proto::Endpoint,
        incoming: quinn_proto::Incoming,
        acceptor: &Acceptor,
        admission: &Arc<super::admit::Admission>,
    ) -> Option<(quinn_proto::Incoming, super::admit::Admitted)> {
        use super::admit::Verdict;
        let ctx = &acceptor.ctx;
        let open = ctx.stats.open(crate::stats::Protocol::H3);
        let mut buf = Vec::new();
        let verdict = admission.admit(
            incoming.remote_address(),
            incoming.remote_address_validated(),
            open,
            &ctx.limits,
            &ctx.stats,
        );
        match verdict {
            Ok(admitted) => Some((incoming, admitted)),
            Err(Verdict::Retry) => {
                // Only fails for an attempt that already carries a Retry token, which
                // admission never retries; refuse it then rather than keep it.
                let t = match endpoint.retry(incoming, &mut buf) {
                    Ok(t) => t,
                    Err(e) => {
                        buf.clear();
                        endpoint.refuse(e.into_incoming(), &mut buf)
                    }
                };
                self.core.sock.send_now(&t, &buf);
                None
            }
            Err(_) => {
                let t = endpoint.refuse(incoming, &mut buf);
                self.core.sock.send_now(&t, &buf);
                None
            }
        }
    }
}
