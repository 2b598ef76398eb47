//! HTTP/1.1 (cleartext and TLS) through hyper. hyper has no API for 1xx responses, so
//! `early_hints=1` sends no 103 on HTTP/1.1 (Chromium ignores 103 on HTTP/1.1 anyway).

use crate::body::{Source, CHUNK};
use crate::routes::{route, Ctx, Reply};
use crate::stats::Proto;
use bytes::Bytes;
use http::{Method, Request, Response};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// A response body that counts what it sends, and counts the request once it is complete.
pub(crate) struct OutBody {
    source: Source,
    ctx: Arc<Ctx>,
    proto: Proto,
    counted: bool,
    done: bool,
}

impl OutBody {
    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            if self.counted {
                self.ctx.stats.request_done(self.proto);
            }
        }
    }
}

impl Body for OutBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match this.source.poll_chunk(cx, CHUNK) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Ready(Ok(None)) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Ready(Ok(Some(chunk))) => {
                if this.counted {
                    this.ctx.stats.body_bytes(this.proto, chunk.len() as u64);
                }
                if this.source.remaining() == 0 {
                    this.finish();
                }
                Poll::Ready(Some(Ok(Frame::data(chunk))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.source.remaining() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.source.remaining())
    }
}

impl Drop for OutBody {
    fn drop(&mut self) {
        // Empty bodies (and HEAD responses) are never polled; they are complete when dropped.
        if self.source.remaining() == 0 {
            self.finish();
        }
    }
}

async fn respond(
    ctx: Arc<Ctx>,
    proto: Proto,
    req: Request<Incoming>,
) -> Result<Response<OutBody>, Infallible> {
    let (parts, mut body) = req.into_parts();
    // Read the request body to its end (discarding it) so every protocol sees the same thing.
    if !body.is_end_stream() {
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                break;
            }
        }
    }
    let reply: Reply = route(&ctx, &parts.method, &parts.uri, &parts.headers, proto);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let head = reply.head(&ctx, true);
    let body = if parts.method == Method::HEAD {
        crate::body::BodySpec::Empty
    } else {
        reply.body
    };
    let out = OutBody {
        source: body.into_source(),
        ctx: ctx.clone(),
        proto,
        counted: reply.counted,
        done: false,
    };
    Ok(head.map(|()| out))
}

/// Serves one HTTP/1.1 connection until it closes or the server shuts down (then it finishes
/// the request in flight and closes).
pub(crate) async fn serve<IO>(io: IO, ctx: Arc<Ctx>, proto: Proto)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let _guard = ctx.stats.connection(proto);
    let mut shutdown = ctx.shutdown.clone();
    let svc_ctx = ctx.clone();
    let svc = hyper::service::service_fn(move |req| respond(svc_ctx.clone(), proto, req));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_secs(30))
        .max_buf_size((ctx.limits.max_header_size as usize).max(8192))
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), svc);
    tokio::pin!(conn);
    let mut stopping = *shutdown.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            _ = conn.as_mut() => break,
            changed = shutdown.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}
