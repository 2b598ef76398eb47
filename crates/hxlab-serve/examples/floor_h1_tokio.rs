//! EXPERIMENT, not part of hxlab serve (issue 29, goal 1): bench/floor-h1.c on tokio. The same
//! contract as the C floor (a keep-alive HTTP/1.1 origin that parses nothing but the blank
//! line ending each head, and answers every head with one fixed response: Date, Content-Type,
//! Content-Length and SIZE body bytes), but served the way `hxlab serve` serves HTTP/1.1: a
//! current-thread tokio runtime, a task per connection, tokio's `TcpStream` (its readiness
//! tracking, its waker per task). Per read: one `recv`, then one `send` of as many responses
//! as the read held whole heads (a head split across reads counts once, in the read that ends
//! it).
//!
//! Beside the C floor, in the same rotation (bench/origins.py, the h1 row), it shows what
//! tokio's task-per-connection model costs per request over a bare epoll loop; beside
//! `hxlab serve`, what our request path costs over tokio. It is not a server to use: no
//! timeouts, no limits, no routes, one response.
//!
//! usage: floor_h1_tokio PORT SIZE   (listens on 127.0.0.1:PORT; SIZE ≤ 65536)

use std::process::ExitCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Most responses one send carries (pipelined heads in one read), as in the C floor.
const MAX_BATCH: usize = 64;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [port, size] => port
            .parse::<u16>()
            .ok()
            .zip(size.parse::<usize>().ok().filter(|&s| s <= 65536)),
        _ => None,
    };
    let Some((port, size)) = parsed else {
        eprintln!("usage: floor_h1_tokio PORT SIZE   (SIZE ≤ 65536)");
        return ExitCode::from(2);
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("floor_h1_tokio: no runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(serve(port, size)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("floor_h1_tokio: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(port: u16, size: usize) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let mut response = format!(
        "HTTP/1.1 200 OK\r\nDate: {}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {size}\r\n\r\n",
        httpdate::fmt_http_date(std::time::SystemTime::now())
    )
    .into_bytes();
    response.resize(response.len() + size, b'x');
    // MAX_BATCH copies back to back, built once: a send of k responses is a slice of them.
    let batch: &'static [u8] = Box::leak(response.repeat(MAX_BATCH).into_boxed_slice());
    println!("floor_h1_tokio listening on 127.0.0.1:{port}, {size} body bytes");
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        tokio::spawn(connection(tcp, batch, response.len()));
    }
}

async fn connection(mut tcp: tokio::net::TcpStream, batch: &'static [u8], one: usize) {
    let mut buf = vec![0u8; 64 * 1024];
    // Bytes of "\r\n\r\n" matched at the end of the last read: a head split anywhere.
    let mut matched = 0;
    loop {
        let n = match tcp.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let mut heads = 0;
        for &b in &buf[..n] {
            matched = match (matched, b) {
                (0 | 2, b'\r') => matched + 1,
                (1 | 3, b'\n') => matched + 1,
                (_, b'\r') => 1,
                _ => 0,
            };
            if matched == 4 {
                heads += 1;
                matched = 0;
            }
        }
        let out = &batch[..heads.min(MAX_BATCH) * one];
        if !out.is_empty() && tcp.write_all(out).await.is_err() {
            return;
        }
    }
}
