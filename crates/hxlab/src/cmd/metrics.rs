//! `hxlab load --metrics-listen ADDR`: a small HTTP/1.1 endpoint, on a thread of its own, that
//! answers `GET /metrics` with the run's figures so far (OpenMetrics text), and its totals
//! for `--metrics-linger` after it ends. Bounded: one request per connection, heads over
//! 8 KiB or slower than 2 s are dropped, at most 64 scrapes in progress.

use anyhow::Context;
use hxlab_load::Live;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAX_HEAD: usize = 8 * 1024;
const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
const MAX_SCRAPES: usize = 64;

/// Runs `run` with live figures served at `addr`, keeps serving its totals for `linger`
/// after it returns, then stops the endpoint.
pub fn with_live_metrics<T>(
    addr: SocketAddr,
    linger: Duration,
    run: impl FnOnce(Arc<Live>) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let listener = TcpListener::bind(addr)
        .with_context(|| format!("--metrics-listen {addr}: cannot listen there"))?;
    listener
        .set_nonblocking(true)
        .context("--metrics-listen: non-blocking listener")?;
    let live = Live::new();
    let stop = Arc::new(AtomicBool::new(false));
    let server = {
        let (live, stop) = (live.clone(), stop.clone());
        std::thread::Builder::new()
            .name("hxlab-metrics".into())
            .spawn(move || serve(listener, live, stop))
            .context("--metrics-listen: starting the endpoint")?
    };
    let out = run(live);
    if out.is_ok() {
        std::thread::sleep(linger);
    }
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    out
}

fn serve(listener: TcpListener, live: Arc<Live>, stop: Arc<AtomicBool>) {
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                if busy.load(Ordering::Relaxed) >= MAX_SCRAPES {
                    continue;
                }
                busy.fetch_add(1, Ordering::Relaxed);
                let (live, busy) = (live.clone(), busy.clone());
                let _ = std::thread::Builder::new()
                    .name("hxlab-metrics-conn".into())
                    .spawn(move || {
                        answer(conn, &live);
                        busy.fetch_sub(1, Ordering::Relaxed);
                    });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads one request head and answers it: `GET /metrics` with the figures, anything else
/// 404 (405 for another method on /metrics).
fn answer(mut conn: TcpStream, live: &Live) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_read_timeout(Some(HEAD_TIMEOUT));
    let _ = conn.set_write_timeout(Some(HEAD_TIMEOUT));
    let until = Instant::now() + HEAD_TIMEOUT;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_HEAD || Instant::now() > until {
            return;
        }
        match conn.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let (method, target) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    let (status, ctype, body) = match (method, path) {
        (b"GET", b"/metrics") => (
            "200 OK",
            hxlab_contract::metrics::CONTENT_TYPE,
            hxlab_contract::metrics::load_metrics(&live.snapshot()),
        ),
        (_, b"/metrics") => ("405 Method Not Allowed", "text/plain", "GET only\n".into()),
        _ => (
            "404 Not Found",
            "text/plain",
            "not found: /metrics only\n".into(),
        ),
    };
    let _ = write!(
        conn,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}
