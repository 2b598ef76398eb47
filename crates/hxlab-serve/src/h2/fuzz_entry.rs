//! The origin's HTTP/2 server fed a client's bytes through an in-memory pipe instead of a
//! socket: the same connection loop (`serve`) and the same `Conn`, with limits small enough
//! that any input ends quickly. Public only so the fuzz target (`fuzz/fuzz_targets/serve_h2.rs`)
//! reaches it.

use crate::routes::{Ctx, Limits};
use crate::stats::Protocol;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long one input may keep the server busy before that counts as a hang.
pub const HANG: Duration = Duration::from_secs(5);

/// Serves one h2c connection whose client sends `pieces` in turn (each in its own write,
/// the server's answers read all along) and then closes its side. Returns every byte the
/// server wrote, or `Err` if the server had not finished `HANG` after the input ended.
/// Responses are capped at 64 KiB, delays at 5 ms and the idle, body and send timeouts at
/// 20 ms, so any input ends quickly.
pub fn serve_bytes<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<u8>, String> {
    let pieces: Vec<Vec<u8>> = pieces.into_iter().map(<[u8]>::to_vec).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let cfg = hxlab_contract::ServeConfig {
            max_size: 64 << 10,
            max_delay: Duration::from_millis(5),
            idle_timeout: Duration::from_millis(20),
            body_timeout: Duration::from_millis(20),
            send_timeout: Duration::from_millis(20),
            ..Default::default()
        };
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let a: std::net::SocketAddr = ([127, 0, 0, 1], 1).into();
        let ctx = Arc::new(Ctx::new(Limits::of(&cfg), None, a, a, None, shutdown));
        let (client, server) = tokio::io::duplex(64 << 10);
        let served = tokio::spawn(super::serve(server, ctx, Protocol::H2c));
        let (mut from_server, mut to_server) = tokio::io::split(client);
        let reader = tokio::spawn(async move {
            let mut out = Vec::new();
            let _ = from_server.read_to_end(&mut out).await;
            out
        });
        for p in &pieces {
            if to_server.write_all(p).await.is_err() {
                break;
            }
        }
        let _ = to_server.shutdown().await;
        match tokio::time::timeout(HANG, served).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(format!("the connection task failed: {e}")),
            Err(_) => {
                return Err(format!(
                    "the server was still busy {HANG:?} after the input ended"
                ))
            }
        }
        drop(to_server);
        tokio::time::timeout(HANG, reader)
            .await
            .map_err(|_| "the server's output did not end".to_string())?
            .map_err(|e| e.to_string())
    })
}
