//! HTTP/2 over TLS and h2c through the raw `h2` crate, so both get server push
//! (`PUSH_PROMISE`), 103 Early Hints and the same GOAWAY on shutdown. Small immediate answers
//! are written inline from the connection loop; anything that waits (delay, large bodies,
//! request bodies, push) gets its own task.

use crate::body::{BodySpec, Source, CHUNK};
use crate::routes::{early_hints_head, route, Ctx, Reply};
use crate::stats::Protocol;
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{Method, Request, Uri};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

/// Streams a connection may make the `h2` crate keep beyond --max-streams open ones. h2
/// frees a finished stream only once its queued response has left, and a stream reset while
/// it waits for connection-level window stays queued until the window opens (h2 cannot take
/// it out of that queue): ~325 bytes each, so a client that resets streams and never sends a
/// connection WINDOW_UPDATE grew the server by 49 MB in 8 s. Past this many the connection
/// gets GOAWAY ENHANCE_YOUR_CALM, which bounds that state at about 0.4 MB per connection.
const HELD_STREAMS: usize = 1000;

/// Serves one HTTP/2 connection (TLS or h2c) until the peer closes it or, after shutdown,
/// until its streams are done.
pub(crate) async fn serve<IO>(io: IO, ctx: Arc<Ctx>, proto: Protocol)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _guard = ctx.stats.connection(proto);
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(ctx.limits.max_streams)
        .max_header_list_size(ctx.limits.max_header_size)
        .initial_window_size(1 << 20)
        .initial_connection_window_size(4 << 20)
        .max_send_buffer_size(1 << 20);
    let handshake = builder.handshake::<_, Bytes>(io);
    let mut conn = match tokio::time::timeout(Duration::from_secs(10), handshake).await {
        Ok(Ok(c)) => c,
        _ => return,
    };
    let mut shutdown = ctx.shutdown.clone();
    let mut stopping = *shutdown.borrow();
    if stopping {
        conn.graceful_shutdown();
    }
    let idle = Arc::new(Idle {
        requests: AtomicU64::new(0),
        wake: Notify::new(),
    });
    tokio::spawn(idle_watch(Arc::downgrade(&idle), ctx.limits.idle_timeout));
    let mut batch = Vec::new();
    let mut idle_goaway_sent = false;
    let max_held = ctx.limits.max_streams as usize + HELD_STREAMS;
    let mut calmed = false;
    loop {
        tokio::select! {
            next = conn.accept() => match next {
                Some(Ok(first)) => {
                    idle.requests.fetch_add(1, Ordering::Relaxed);
                    // Take every request that has already arrived before answering any: each
                    // accept() flushes what was answered so far, so answering in between
                    // would cost one write per response instead of one per batch.
                    batch.push(first);
                    let mut closed = false;
                    while batch.len() < 256 {
                        match futures::FutureExt::now_or_never(conn.accept()) {
                            Some(Some(Ok(more))) => batch.push(more),
                            Some(Some(Err(_))) | Some(None) => {
                                closed = true;
                                break;
                            }
                            None => break,
                        }
                    }
                    for (req, respond) in batch.drain(..) {
                        on_request(&ctx, proto, req, respond, &idle);
                    }
                    if closed {
                        break;
                    }
                    // Checked per batch of new requests: held streams only grow as new ones
                    // are opened, and the check takes h2's lock once.
                    if !calmed && conn.num_wired_streams() > max_held {
                        calmed = true;
                        conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    }
                }
                Some(Err(_)) | None => break,
            },
            changed = shutdown.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.graceful_shutdown();
                }
            }
            _ = idle.wake.notified() => {
                if idle_goaway_sent {
                    // Still held open a period after GOAWAY with nothing running (e.g. a
                    // frame whose payload never came): drop it.
                    break;
                }
                // GOAWAY; streams still running finish, then the connection closes.
                idle_goaway_sent = true;
                stopping = true;
                conn.graceful_shutdown();
            }
        }
    }
}

/// Requests seen on one connection, for the idle watchdog.
struct Idle {
    requests: AtomicU64,
    wake: Notify,
}

/// A connection with no new request and no stream running for one to two `period`s
/// (--idle-timeout, 15 s) gets a GOAWAY (as nginx closes idle HTTP/2 connections), and is
/// dropped one period later if the peer still holds it open. Checked by a separate task so
/// the request path arms no timer; every stream task holds a clone of the `Idle`, so its
/// strong count says whether one is running.
async fn idle_watch(idle: Weak<Idle>, period: Duration) {
    // Zero: a connection that never sends a request is idle from its start.
    let mut last = 0;
    loop {
        tokio::time::sleep(period).await;
        let Some(i) = idle.upgrade() else { return };
        let now = i.requests.load(Ordering::Relaxed);
        // The connection's own reference plus this upgrade: more means streams are running.
        let streams_running = Arc::strong_count(&i) > 2;
        if now != last || streams_running {
            last = now;
            continue;
        }
        i.wake.notify_one();
    }
}

fn on_request(
    ctx: &Arc<Ctx>,
    proto: Protocol,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    busy: &Arc<Idle>,
) {
    let (parts, body) = req.into_parts();
    let reply = route(ctx, &parts.method, &parts.uri, &parts.headers, proto);
    let head_only = parts.method == Method::HEAD;
    if body.is_end_stream() && reply.is_immediate() {
        send_immediate(ctx, proto, &mut respond, reply, head_only);
        return;
    }
    let ctx2 = ctx.clone();
    let uri = parts.uri;
    let busy = busy.clone();
    ctx.tracker.spawn(async move {
        let _busy = busy;
        if !drain(body, ctx2.limits.body_timeout).await {
            // The announced body stopped coming: give the stream up, as nginx does after
            // client_body_timeout.
            respond.send_reset(h2::Reason::CANCEL);
            return;
        }
        serve_stream(ctx2, proto, respond, reply, head_only, uri).await;
    });
}

/// Reads a request body to its end, returning flow-control credit as it goes. False when
/// no byte of it came for `stall` (the caller resets the stream); an error ends it as done.
async fn drain(mut body: RecvStream, stall: Duration) -> bool {
    loop {
        match tokio::time::timeout(stall, body.data()).await {
            Err(_) => return false,
            Ok(Some(Ok(data))) => {
                let _ = body.flow_control().release_capacity(data.len());
            }
            Ok(Some(Err(_)) | None) => return true,
        }
    }
}

fn send_immediate(
    ctx: &Ctx,
    proto: Protocol,
    respond: &mut SendResponse<Bytes>,
    reply: Reply,
    head_only: bool,
) {
    let data = if head_only {
        Bytes::new()
    } else {
        reply.body.in_memory().unwrap_or_default()
    };
    let head = reply.head(ctx, true);
    let end = data.is_empty();
    let Ok(mut stream) = respond.send_response(head, end) else {
        return;
    };
    let n = data.len() as u64;
    if !end && stream.send_data(data, true).is_err() {
        return;
    }
    if reply.counted {
        ctx.stats.body_bytes(proto, n);
        ctx.stats.request_done(proto);
    }
}

/// Waits for the client to reset the stream (used to cut a delay short).
async fn reset_by_peer(respond: &mut SendResponse<Bytes>) {
    let _ = std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
}

async fn serve_stream(
    ctx: Arc<Ctx>,
    proto: Protocol,
    mut respond: SendResponse<Bytes>,
    reply: Reply,
    head_only: bool,
    uri: Uri,
) {
    if !reply.delay.is_zero() {
        tokio::select! {
            _ = tokio::time::sleep(reply.delay) => {}
            _ = reset_by_peer(&mut respond) => return,
        }
    }
    if let Some(link) = &reply.early_hints {
        let _ = respond.send_informational(early_hints_head(link));
    }
    // PUSH_PROMISEs go out before the page's body so the client never requests them itself.
    let mut pushed = Vec::new();
    for path in &reply.push {
        let Some(req) = push_request(&uri, path) else {
            continue;
        };
        match respond.push_request(req) {
            Ok(p) => pushed.push((p, path.clone())),
            // The client disabled push or has no room for more pushed streams.
            Err(_) => break,
        }
    }
    let head = reply.head(&ctx, true);
    let body = if head_only {
        BodySpec::Empty
    } else {
        reply.body
    };
    let end = body.len() == 0;
    if let Ok(stream) = respond.send_response(head, end) {
        for (mut p, path) in pushed {
            let ctx = ctx.clone();
            ctx.clone().tracker.spawn(async move {
                let Ok(uri) = path.parse::<Uri>() else { return };
                let r = route(&ctx, &Method::GET, &uri, &http::HeaderMap::new(), proto);
                let head = r.head(&ctx, true);
                let end = r.body.len() == 0;
                if let Ok(s) = p.send_response(head, end) {
                    send_body(&ctx, proto, s, r.body.into_source(), r.counted, end).await;
                }
            });
        }
        send_body(&ctx, proto, stream, body.into_source(), reply.counted, end).await;
    }
}

/// The request a PUSH_PROMISE announces: GET of `path` on the page's own origin.
fn push_request(page: &Uri, path: &str) -> Option<Request<()>> {
    let mut uri = Uri::builder().path_and_query(path);
    if let Some(s) = page.scheme() {
        uri = uri.scheme(s.clone());
    }
    if let Some(a) = page.authority() {
        uri = uri.authority(a.clone());
    }
    Request::builder()
        .method(Method::GET)
        .uri(uri.build().ok()?)
        .body(())
        .ok()
}

/// Sends a body within HTTP/2 flow control: asks for window, sends what was granted.
async fn send_body(
    ctx: &Ctx,
    proto: Protocol,
    mut stream: SendStream<Bytes>,
    mut source: Source,
    counted: bool,
    already_ended: bool,
) {
    if !already_ended {
        loop {
            let left = source.remaining();
            if left == 0 {
                break;
            }
            stream.reserve_capacity(left.min(CHUNK as u64) as usize);
            let capacity = std::future::poll_fn(|cx| stream.poll_capacity(cx));
            let granted = match tokio::time::timeout(ctx.limits.send_timeout, capacity).await {
                Ok(Some(Ok(n))) => n,
                Ok(_) => return,
                Err(_) => {
                    // The client gave no window for --send-timeout: the stream is given up
                    // (its buffers freed), as nginx does after send_timeout.
                    stream.send_reset(h2::Reason::CANCEL);
                    return;
                }
            };
            if granted == 0 {
                continue;
            }
            let chunk = match source.chunk(granted).await {
                Ok(Some(c)) => c,
                _ => {
                    stream.send_reset(h2::Reason::INTERNAL_ERROR);
                    return;
                }
            };
            let n = chunk.len() as u64;
            let end = source.remaining() == 0;
            if stream.send_data(chunk, end).is_err() {
                return;
            }
            if counted {
                ctx.stats.body_bytes(proto, n);
            }
        }
    }
    if counted {
        ctx.stats.request_done(proto);
    }
}
