//! The origin's own HTTP/3 (crates/hxlab-serve/src/h3) against a raw quinn client that
//! writes HTTP/3 by hand: RFC 9114's error handling (malformed requests reset the stream,
//! frame violations close the connection with their code) and graceful shutdown (GOAWAY
//! naming the first stream not taken, requests in flight finish, later streams refused,
//! the connection closed with H3_NO_ERROR).

mod common;

use common::{h3_connect, Server};
use hxlab_wire::h3::{parse_frame_head, write_frame_head};
use hxlab_wire::qpack::{decode_fields, encode_field_section};
use std::net::SocketAddr;
use std::time::Duration;

const H3_NO_ERROR: u64 = 0x100;
const H3_STREAM_CREATION_ERROR: u64 = 0x103;
const H3_FRAME_UNEXPECTED: u64 = 0x105;
const H3_REQUEST_REJECTED: u64 = 0x10b;
const H3_MESSAGE_ERROR: u64 = 0x10e;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A HEADERS frame with these fields.
fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut section = Vec::new();
    encode_field_section(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut section,
    );
    let mut out = Vec::new();
    write_frame_head(&mut out, 0x01, section.len() as u64);
    out.extend_from_slice(&section);
    out
}

fn get(path: &str) -> Vec<u8> {
    headers(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", path),
    ])
}

/// Sends `request` on a new stream and reads the answer: `Ok((status, body length))`, or
/// `Err(code)` when the server reset the stream.
async fn exchange(conn: &quinn::Connection, request: &[u8]) -> Result<(u16, usize), u64> {
    let (mut send, mut recv) = conn.open_bi().await.expect("open_bi");
    send.write_all(request).await.expect("write");
    send.finish().expect("finish");
    let bytes = match recv.read_to_end(1 << 20).await {
        Ok(b) => b,
        Err(quinn::ReadToEndError::Read(quinn::ReadError::Reset(c))) => return Err(c.into_inner()),
        Err(e) => panic!("reading the response: {e}"),
    };
    let (mut status, mut body, mut pos) = (0u16, 0usize, 0usize);
    while let Some((kind, len, hl)) = parse_frame_head(&bytes[pos..]) {
        let payload = &bytes[pos + hl..pos + hl + len as usize];
        match kind {
            0x01 => decode_fields(payload, 1 << 20, |n, v| {
                if n == b":status" && status < 200 {
                    status = std::str::from_utf8(v).unwrap().parse().unwrap();
                }
                Ok(())
            })
            .expect("QPACK"),
            0x00 => body += payload.len(),
            _ => {}
        }
        pos += hl + len as usize;
    }
    Ok((status, body))
}

/// The application error code the connection was closed with.
async fn closed_with(conn: &quinn::Connection) -> u64 {
    let err = tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("the server closes the connection");
    match err {
        quinn::ConnectionError::ApplicationClosed(c) => c.error_code.into_inner(),
        other => panic!("closed otherwise: {other}"),
    }
}

fn h3_addr(server: &Server) -> SocketAddr {
    server.ready.h3.expect("h3")
}

#[test]
fn malformed_requests_reset_their_stream_and_the_connection_lives_on() {
    let server = Server::start(&[]);
    let addr = h3_addr(&server);
    runtime().block_on(async {
        let (_ep, conn, _control) = h3_connect(addr).await;
        assert_eq!(exchange(&conn, &get("/bytes/10")).await, Ok((200, 10)));
        let base = [(":method", "GET"), (":scheme", "https"), (":path", "/")];
        for (what, extra) in [
            ("uppercase field name", vec![("Accept", "*/*")]),
            ("connection-specific field", vec![("connection", "close")]),
            ("unknown pseudo-header", vec![(":protocol", "x")]),
        ] {
            let mut f = base.to_vec();
            f.extend(extra);
            assert_eq!(
                exchange(&conn, &headers(&f)).await,
                Err(H3_MESSAGE_ERROR),
                "{what}"
            );
        }
        let no_path = headers(&[(":method", "GET"), (":scheme", "https")]);
        assert_eq!(
            exchange(&conn, &no_path).await,
            Err(H3_MESSAGE_ERROR),
            "no :path"
        );
        // A body shorter than its content-length.
        let mut short = headers(&[
            (":method", "POST"),
            (":scheme", "https"),
            (":path", "/bytes/1"),
            ("content-length", "5"),
        ]);
        short.extend_from_slice(&[0x00, 0x02, b'h', b'i']);
        assert_eq!(
            exchange(&conn, &short).await,
            Err(H3_MESSAGE_ERROR),
            "short body"
        );
        // Reserved frame types are skipped; the connection still serves.
        let mut greased = vec![0x21, 0x01, 0xff];
        greased.extend(get("/bytes/3"));
        assert_eq!(exchange(&conn, &greased).await, Ok((200, 3)));
    });
}

#[test]
fn frame_violations_close_the_connection_with_their_code() {
    let server = Server::start(&[]);
    let addr = h3_addr(&server);
    runtime().block_on(async {
        // DATA before HEADERS on a request stream.
        let (_ep, conn, _control) = h3_connect(addr).await;
        let (mut send, _recv) = conn.open_bi().await.expect("open_bi");
        send.write_all(&[0x00, 0x01, b'x']).await.expect("write");
        assert_eq!(closed_with(&conn).await, H3_FRAME_UNEXPECTED);

        // SETTINGS on a request stream.
        let (_ep, conn, _control) = h3_connect(addr).await;
        let (mut send, _recv) = conn.open_bi().await.expect("open_bi");
        send.write_all(&[0x04, 0x00]).await.expect("write");
        assert_eq!(closed_with(&conn).await, H3_FRAME_UNEXPECTED);

        // A second control stream.
        let (_ep, conn, _control) = h3_connect(addr).await;
        let mut second = conn.open_uni().await.expect("uni");
        second.write_all(&[0x00, 0x04, 0x00]).await.expect("write");
        assert_eq!(closed_with(&conn).await, H3_STREAM_CREATION_ERROR);
    });
}

/// The server's control stream: (GOAWAY id, if one came).
async fn read_goaway(conn: &quinn::Connection) -> Option<u64> {
    // Server unidirectional streams: control (type 0), QPACK encoder, QPACK decoder.
    for _ in 0..3 {
        let mut recv = conn.accept_uni().await.ok()?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 256];
        while let Ok(Some(n)) = recv.read(&mut chunk).await {
            buf.extend_from_slice(&chunk[..n]);
            if buf.first() != Some(&0x00) {
                break;
            }
            let mut pos = 1;
            while let Some((kind, len, hl)) = parse_frame_head(&buf[pos..]) {
                if buf.len() < pos + hl + len as usize {
                    break;
                }
                if kind == 0x07 {
                    let payload = &buf[pos + hl..pos + hl + len as usize];
                    return hxlab_wire::varint::read(payload).map(|(v, _)| v);
                }
                pos += hl + len as usize;
            }
        }
    }
    None
}

#[test]
fn shutdown_sends_goaway_finishes_requests_in_flight_and_closes_cleanly() {
    let server = Server::start(&[]);
    let addr = h3_addr(&server);
    let pid = server.child.id() as i32;
    runtime().block_on(async {
        let (_ep, conn, _control) = h3_connect(addr).await;
        // Stream 0: in flight across the shutdown.
        let conn2 = conn.clone();
        let slow = tokio::spawn(async move { exchange(&conn2, &get("/delay/1500")).await });
        tokio::time::sleep(Duration::from_millis(300)).await;
        // SAFETY: signals the server child this test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let goaway = tokio::time::timeout(Duration::from_secs(5), read_goaway(&conn))
            .await
            .expect("GOAWAY in time");
        assert_eq!(goaway, Some(4), "GOAWAY names the first stream not taken");
        // A stream opened after GOAWAY is refused.
        assert_eq!(
            exchange(&conn, &get("/bytes/1")).await,
            Err(H3_REQUEST_REJECTED)
        );
        let slow = slow.await.expect("task");
        assert!(
            matches!(slow, Ok((200, n)) if n > 0),
            "the request in flight finishes: {slow:?}"
        );
        assert_eq!(closed_with(&conn).await, H3_NO_ERROR);
    });
}
