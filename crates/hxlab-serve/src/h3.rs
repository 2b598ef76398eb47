//! HTTP/3 over QUIC v1 (quinn + h3 + h3-quinn) on the UDP twin of the TLS port. Every request
//! stream is read to its end before it is answered and dropped: dropping a stream with unread
//! data makes quinn send STOP_SENDING, and some clients then fail the request.

use crate::body::{BodySpec, CHUNK};
use crate::routes::{early_hints_head, route, Ctx};
use crate::stats::Proto;
use bytes::Bytes;
use http::Method;
use std::sync::Arc;
use std::time::Duration;

type H3Conn = h3::server::Connection<h3_quinn::Connection, Bytes>;
type H3Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Accepts QUIC connections until shutdown.
pub(crate) fn spawn_accept(
    endpoint: quinn::Endpoint,
    ctx: Arc<Ctx>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut shutdown = ctx.shutdown.clone();
        loop {
            tokio::select! {
                incoming = endpoint.accept() => match incoming {
                    Some(incoming) => {
                        if ctx.stats.open(Proto::H3) >= u64::from(ctx.limits.quic_max_connections) {
                            // Over the limit: CONNECTION_REFUSED, nothing kept.
                            incoming.refuse();
                            continue;
                        }
                        let ctx2 = ctx.clone();
                        ctx.tracker.spawn(serve_connection(incoming, ctx2));
                    }
                    None => break,
                },
                _ = shutdown.changed() => break,
            }
        }
    })
}

async fn serve_connection(incoming: quinn::Incoming, ctx: Arc<Ctx>) {
    let Ok(connecting) = incoming.accept() else {
        return;
    };
    // A client that sent 0-RTT requests is served at once (its answers leave as 0.5-RTT
    // data), as TCP's early data is; every other connection is served once the handshake is
    // complete. Serving every connection at once (quinn's server-side into_0rtt) stalled
    // Chromium's HTTP/3 page loads behind a delayed, rate-limited link (tests/page.rs), so
    // the 0.5-RTT path is taken only when the connection has already received STREAM frames,
    // which before the handshake completes can only be 0-RTT data.
    let conn = match connecting.into_0rtt() {
        Ok((conn, accepted)) => {
            if !sent_0rtt_streams(&conn).await {
                // Resolves when the handshake completes (its value only means something
                // on a client); the connection is then served as without into_0rtt.
                match tokio::time::timeout(Duration::from_secs(10), accepted).await {
                    Ok(_) if conn.close_reason().is_none() => {}
                    _ => return,
                }
            }
            conn
        }
        Err(connecting) => match tokio::time::timeout(Duration::from_secs(10), connecting).await {
            Ok(Ok(c)) => c,
            _ => return,
        },
    };
    let _guard = ctx.stats.connection(Proto::H3);
    ctx.stats.cc(
        Proto::H3,
        crate::stats::cc_slot(hxlab_core::cc::quic::of(&conn)),
    );
    let mut builder = h3::server::builder();
    builder.max_field_section_size(ctx.limits.max_header_size as u64);
    let mut h3c: H3Conn = match builder.build(h3_quinn::Connection::new(conn)).await {
        Ok(c) => c,
        Err(_) => return,
    };
    let mut shutdown = ctx.shutdown.clone();
    let mut stopping = *shutdown.borrow();
    if stopping {
        let _ = h3c.shutdown(0).await;
    }
    loop {
        tokio::select! {
            next = h3c.accept() => match next {
                Ok(Some(resolver)) => {
                    let ctx2 = ctx.clone();
                    ctx.tracker.spawn(async move {
                        if let Ok((req, stream)) = resolver.resolve_request().await {
                            serve_request(ctx2, req, stream).await;
                        }
                    });
                }
                Ok(None) | Err(_) => break,
            },
            changed = shutdown.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    // GOAWAY: no new requests; those in flight finish.
                    let _ = h3c.shutdown(0).await;
                }
            }
        }
    }
}

/// Whether the client's first flight carried 0-RTT STREAM frames. They come in the datagrams
/// right behind the Initial; the endpoint may still be processing those, so look again after
/// one short timer tick.
async fn sent_0rtt_streams(conn: &quinn::Connection) -> bool {
    for _ in 0..2 {
        if conn.stats().frame_rx.stream > 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    conn.stats().frame_rx.stream > 0
}

async fn serve_request(ctx: Arc<Ctx>, req: http::Request<()>, mut stream: H3Stream) {
    // Read the request to its end first (see the module comment); a body that stops
    // coming for --body-timeout gives the stream up.
    loop {
        match tokio::time::timeout(ctx.limits.body_timeout, stream.recv_data()).await {
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None)) => break,
            Ok(Err(_)) => return,
            Err(_) => {
                stream.stop_sending(h3::error::Code::H3_REQUEST_CANCELLED);
                stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
                return;
            }
        }
    }
    let (parts, ()) = req.into_parts();
    let reply = route(&ctx, &parts.method, &parts.uri, &parts.headers, Proto::H3);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    if let Some(link) = &reply.early_hints {
        if stream.send_response(early_hints_head(link)).await.is_err() {
            return;
        }
    }
    let head = reply.head(&ctx, false);
    if stream.send_response(head).await.is_err() {
        return;
    }
    let body = if parts.method == Method::HEAD {
        BodySpec::Empty
    } else {
        reply.body
    };
    let mut source = body.into_source();
    loop {
        match source.chunk(CHUNK).await {
            Ok(Some(chunk)) => {
                let n = chunk.len() as u64;
                let send = stream.send_data(chunk);
                match tokio::time::timeout(ctx.limits.send_timeout, send).await {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => return,
                    Err(_) => {
                        // No flow-control credit for --send-timeout: give the stream up.
                        stream.stop_stream(h3::error::Code::H3_REQUEST_CANCELLED);
                        return;
                    }
                }
                if reply.counted {
                    ctx.stats.body_bytes(Proto::H3, n);
                }
            }
            Ok(None) => break,
            Err(_) => {
                stream.stop_stream(h3::error::Code::H3_INTERNAL_ERROR);
                return;
            }
        }
    }
    if stream.finish().await.is_ok() && reply.counted {
        ctx.stats.request_done(Proto::H3);
    }
}
