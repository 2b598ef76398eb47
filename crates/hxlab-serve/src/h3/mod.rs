//! HTTP/3 over QUIC v1 on the UDP twin of the TLS port: our own HTTP/3 (RFC 9114) on our
//! own QUIC driver over quinn-proto, with QPACK (RFC 9204) from [`hxlab_wire::qpack`] (the
//! dynamic table both ways, one encoder and one decoder per connection: `qpack.rs`), the
//! same core the load generator's client and the frame view use.
//!
//! Why not the `h3` crate: per request it spawned a large future, Huffman-coded every
//! response field, decoded request heads bit by bit and allocated its frames; it made our h3
//! origin cost 2.5× our h2 in CPU per request. Here a request is one small task that reads
//! its stream in place (`request.rs`), decodes the head with one reused scratch buffer
//! (`head.rs`) and writes HEADERS, DATA and FIN in one go when the body is in memory.
//!
//! Why not quinn's async layer: with its endpoint driver task, a connection driver task per
//! connection, and the mutexes and channels between them and the streams, the server cost
//! 1.3–1.6× a bare quinn-proto server at 100 KiB, and it sends at most 10 datagrams per GSO
//! send (docs/serve.md, "Performance"). `driver.rs`
//! drives quinn-proto itself on one thread of its own (the QUIC thread: a current-thread
//! tokio runtime and a `LocalSet`; `--threads` sizes the TCP runtime only): one socket with
//! GSO and GRO, connections in `Rc`/`RefCell`, packets sent after the tasks the input woke
//! have run, in GSO sends of up to 45 datagrams.
//!
//! Pieces: `admit.rs` decides who gets a handshake (Retry under a handshake flood, a cap per
//! address and on the table); this module starts the QUIC thread ([`QuicThread`]), serves
//! each accepted connection (0-RTT, the congestion controller read back) and runs HTTP/3 on
//! it ([`serve_h3`]: control stream with SETTINGS, GOAWAY on shutdown); `control.rs` reads
//! the client's unidirectional streams (its control stream: SETTINGS first, at most one;
//! QPACK encoder and decoder streams fed to the connection's QPACK; push streams refused;
//! unknown types stopped). Every
//! request stream is read to its end before it is answered (a stream dropped with unread
//! data is stopped, and some clients then fail the request). Errors follow RFC 9114 §8:
//! frame-level violations close the connection with their code, malformed requests reset
//! the stream with H3_MESSAGE_ERROR.

mod admit;
mod control;
mod driver;
pub mod fuzz_entry;
mod head;
mod priority;
mod qpack;
mod request;

use crate::routes::Ctx;
use crate::stats::Protocol;
pub(crate) use driver::QlogServer;
use driver::{Conn, SendStream};
use hxlab_wire::h3::{code, frame, setting, stream as stream_type, write_frame_head};
use hxlab_wire::varint;
pub(crate) use qpack::advertised as advertised_qpack;
use quinn_proto::VarInt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// quinn's send priority of our control and QPACK streams: above every response's rank, so
/// an insert a response head references never waits behind another response's data.
const CRITICAL: i32 = i32::MAX;

/// The QUIC thread: the HTTP/3 server's driver and every HTTP/3 connection and request task.
/// It ends when [`QuicThread::close`] is called or the handle is dropped.
pub(crate) struct QuicThread {
    stop: Option<oneshot::Sender<()>>,
    done: oneshot::Receiver<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl QuicThread {
    /// Serves HTTP/3 on `socket` (bound) with `config` on a new thread, until shutdown.
    pub(crate) fn spawn(
        socket: std::net::UdpSocket,
        config: quinn_proto::ServerConfig,
        qlog: Option<driver::QlogServer>,
        ctx: Arc<Ctx>,
    ) -> std::io::Result<QuicThread> {
        socket.set_nonblocking(true)?;
        let udp = quinn::udp::UdpSocketState::new((&socket).into())?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let socket = {
            let _in_rt = rt.enter();
            tokio::net::UdpSocket::from_std(socket)?
        };
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (done_tx, done_rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("hxlab-h3".into())
            .spawn(move || {
                let local = tokio::task::LocalSet::new();
                local.block_on(&rt, async move {
                    let driver = driver::Driver::new(socket, udp, config, qlog);
                    let ctx2 = ctx.clone();
                    let acceptor = driver::Acceptor {
                        ctx,
                        serve: Box::new(move |conn, admitted| {
                            let ctx = ctx2.clone();
                            ctx2.tracker
                                .spawn_local(serve_connection(conn, admitted, ctx));
                        }),
                    };
                    // Closed with 0x100 (H3_NO_ERROR) once shutdown has drained the
                    // connections (or given up on them), or when the server is dropped.
                    let stop = async {
                        let _ = stop_rx.await;
                    };
                    let code = VarInt::from_u32(code::H3_NO_ERROR as u32);
                    driver
                        .run(acceptor, stop, code, b"shutdown", Duration::from_secs(2))
                        .await;
                });
                // The tasks still there (connections the drain gave up on) go with it.
                drop(local);
                drop(rt);
                let _ = done_tx.send(());
            })?;
        Ok(QuicThread {
            stop: Some(stop_tx),
            done: done_rx,
            thread: Some(thread),
        })
    }

    /// Closes every connection, waits until they are gone (at most about 2 s) and ends the
    /// thread.
    pub(crate) async fn close(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let done = std::mem::replace(&mut self.done, oneshot::channel().1);
        if tokio::time::timeout(Duration::from_secs(5), done)
            .await
            .is_ok()
        {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

/// Serves one accepted connection: once it may be served, HTTP/3 ([`serve_h3`]).
async fn serve_connection(conn: Conn, mut admitted: admit::Admitted, ctx: Arc<Ctx>) {
    // A client that sent 0-RTT requests is served at once (its answers leave as 0.5-RTT
    // data), as TCP's early data is; every other connection is served once the handshake is
    // complete. Serving every connection at once stalled Chromium's HTTP/3 page loads behind
    // a delayed, rate-limited link (tests/page.rs), so the 0.5-RTT path is taken only when
    // the connection has received STREAM frames before the handshake completed, which can
    // only be 0-RTT data.
    match tokio::time::timeout(Duration::from_secs(10), conn.serveable()).await {
        Ok(true) => {}
        _ => {
            conn.close(VarInt::from_u32(0), b"");
            return;
        }
    }
    // Counted open before it stops counting as half-open, so the table is never undercounted.
    let _guard = ctx.stats.connection(Protocol::H3);
    admitted.handshake_done();
    ctx.stats.cc(
        Protocol::H3,
        crate::stats::cc_slot(conn.congestion_controller()),
    );
    serve_h3(conn, ctx).await;
}

/// Requests of one connection in flight, so a draining connection knows when it is done.
#[derive(Default)]
struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

/// Held by a request task; the last one to go wakes a draining connection.
struct InFlightGuard(Arc<InFlight>);

impl InFlight {
    fn enter(self: &Arc<Self>) -> InFlightGuard {
        self.count.fetch_add(1, Ordering::Relaxed);
        InFlightGuard(self.clone())
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// Our control stream's first bytes: its type and SETTINGS: the QPACK table capacity and
/// blocked streams we allow (`qpack.rs`) and MAX_FIELD_SECTION_SIZE, our limit.
pub(crate) fn control_preamble(max_field_section: u64, qpack: (u64, u64)) -> Vec<u8> {
    let mut payload = Vec::new();
    varint::put(&mut payload, setting::QPACK_MAX_TABLE_CAPACITY);
    varint::put(&mut payload, qpack.0);
    varint::put(&mut payload, setting::QPACK_BLOCKED_STREAMS);
    varint::put(&mut payload, qpack.1);
    varint::put(&mut payload, setting::MAX_FIELD_SECTION_SIZE);
    varint::put(&mut payload, max_field_section);
    let mut out = Vec::new();
    varint::put(&mut out, stream_type::CONTROL);
    write_frame_head(&mut out, frame::SETTINGS, payload.len() as u64);
    out.extend_from_slice(&payload);
    out
}

/// Runs HTTP/3 on an established connection ([`serve_requests`]), with the connection's
/// QPACK state, whose writer task ends with it.
///
/// Our control and QPACK streams are sent at [`CRITICAL`], above every request stream's
/// rank.
async fn serve_h3(conn: Conn, ctx: Arc<Ctx>) {
    let qpack = qpack::ConnQpack::new(ctx.limits.header_table, ctx.stats.clone());
    serve_requests(conn, ctx, qpack.clone()).await;
    qpack.close();
}

/// Our control stream, our QPACK streams, the client's unidirectional streams
/// (`control.rs`) and one task per request stream (`request.rs`). Shutdown sends GOAWAY
/// naming the first request stream not accepted, refuses later streams with
/// H3_REQUEST_REJECTED, lets those in flight finish and closes with H3_NO_ERROR.
async fn serve_requests(conn: Conn, ctx: Arc<Ctx>, qpack: std::rc::Rc<qpack::ConnQpack>) {
    let Ok(mut control) = conn.open_uni().await else {
        return;
    };
    // Our critical streams go before any response: a response head may reference an insert
    // on the encoder stream, and waiting behind bulk data for it is head-of-line blocking.
    control.set_priority(CRITICAL);
    let max_field = u64::from(ctx.limits.max_header_size);
    if control
        .write_all(&control_preamble(max_field, qpack.advertised()))
        .await
        .is_err()
    {
        return;
    }
    // The client's streams are read from now on: its encoder stream may come before ours.
    let priorities = priority::Priorities::new(ctx.limits.scheduler);
    tokio::task::spawn_local(control::read_uni_streams(
        conn.clone(),
        priorities.clone(),
        qpack.clone(),
    ));
    // QPACK encoder and decoder streams, held open for the connection's life: closing one
    // is a connection error (H3_CLOSED_CRITICAL_STREAM).
    let mut qpack_streams = Vec::with_capacity(2);
    for kind in [stream_type::QPACK_ENCODER, stream_type::QPACK_DECODER] {
        let Ok(mut s) = conn.open_uni().await else {
            return;
        };
        s.set_priority(CRITICAL);
        if s.write_all(&[kind as u8]).await.is_err() {
            return;
        }
        qpack_streams.push(s);
    }
    let (Some(decoder), Some(encoder)) = (qpack_streams.pop(), qpack_streams.pop()) else {
        return;
    };
    qpack.attach(encoder, decoder);
    tokio::task::spawn_local(qpack.clone().run_writer());
    let inflight = Arc::new(InFlight::default());
    let heads = Arc::new(request::HeadBytes::default());
    // Idle: no request accepted during a whole period and none in flight at its end.
    let period = ctx.limits.idle_timeout;
    let mut idle_check = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    let mut accepted_at_last_check = 0u64;
    let mut shutdown = ctx.shutdown.clone();
    let mut goaway: Option<u64> = None;
    let mut next_id = 0u64;
    if *shutdown.borrow() {
        goaway = send_goaway(&mut control, next_id).await;
    }
    loop {
        // Registered before the count is read, so a last request ending in between still
        // wakes this loop.
        let idle = inflight.idle.notified();
        tokio::pin!(idle);
        idle.as_mut().enable();
        if goaway.is_some() && inflight.count.load(Ordering::Acquire) == 0 {
            // Draining and nothing left: give the client a moment to close first (its last
            // ACKs), then close.
            let _ = tokio::time::timeout(Duration::from_millis(200), conn.closed()).await;
            conn.close(VarInt::from_u32(code::H3_NO_ERROR as u32), b"");
            return;
        }
        tokio::select! {
            bi = conn.accept_bi() => match bi {
                Ok((mut send, mut recv)) => {
                    let id = recv.id().index() * 4;
                    if goaway.is_some_and(|g| id >= g) {
                        let c = VarInt::from_u32(code::H3_REQUEST_REJECTED as u32);
                        send.reset(c);
                        recv.stop(c);
                        continue;
                    }
                    next_id = id + 4;
                    let guard = inflight.enter();
                    let (ctx2, conn2, heads2) = (ctx.clone(), conn.clone(), heads.clone());
                    let (prio2, qpack2) = (priorities.clone(), qpack.clone());
                    ctx.tracker.spawn_local(async move {
                        request::serve(ctx2, conn2, send, recv, heads2, prio2, qpack2).await;
                        drop(guard);
                    });
                }
                Err(_) => return,
            },
            changed = shutdown.changed(), if goaway.is_none() => {
                if changed.is_ok() {
                    goaway = send_goaway(&mut control, next_id).await;
                }
                if goaway.is_none() {
                    goaway = Some(next_id);
                }
            }
            _ = &mut idle, if goaway.is_some() => {}
            _ = idle_check.tick(), if goaway.is_none() => {
                // Stream ids count requests: an unchanged next id means none came.
                let quiet = next_id == accepted_at_last_check;
                accepted_at_last_check = next_id;
                if quiet && inflight.count.load(Ordering::Acquire) == 0 {
                    // As h2: GOAWAY, then the drain above closes the connection.
                    goaway = send_goaway(&mut control, next_id).await.or(Some(next_id));
                }
            }
        }
    }
}

/// Writes GOAWAY(`id`) on our control stream; `Some(id)` once written.
async fn send_goaway(control: &mut SendStream, id: u64) -> Option<u64> {
    let mut payload = Vec::new();
    varint::put(&mut payload, id);
    let mut out = Vec::new();
    write_frame_head(&mut out, frame::GOAWAY, payload.len() as u64);
    out.extend_from_slice(&payload);
    control.write_all(&out).await.ok().map(|_| id)
}
