use super::*;
use crate::hpack::{Decoder, Encoder};
use crate::LoadConfig;
use hxlab_wire::h2::flag::PADDED;
use std::time::Duration;

fn target(body: Option<usize>) -> Target {
    let cfg = LoadConfig {
        urls: vec!["http://127.0.0.1:8080/bytes/100".into()],
        body: body.map(|n| vec![b'x'; n]),
        ..Default::default()
    };
    Target::from_config(&cfg).unwrap()
}

fn req() -> Req {
    let now = Instant::now();
    Req {
        scheduled: now,
        sent: now,
        ticket: 0,
        client: 0,
    }
}

fn fr(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    frame_head(&mut v, payload.len(), kind, flags, id);
    v.extend_from_slice(payload);
    v
}

fn settings(pairs: &[(u16, u32)]) -> Vec<u8> {
    let mut p = Vec::new();
    for (k, v) in pairs {
        p.extend_from_slice(&k.to_be_bytes());
        p.extend_from_slice(&v.to_be_bytes());
    }
    fr(SETTINGS, 0, 0, &p)
}

/// Frames in `out` after the preface: (kind, flags, stream, payload).
fn frames(mut out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    if out.starts_with(PREFACE) {
        out = &out[PREFACE.len()..];
    }
    let mut v = Vec::new();
    while out.len() >= 9 {
        let len = (out[0] as usize) << 16 | (out[1] as usize) << 8 | out[2] as usize;
        let id = be32(&out[5..9]);
        v.push((out[3], out[4], id, out[9..9 + len].to_vec()));
        out = &out[9 + len..];
    }
    assert!(out.is_empty());
    v
}

fn block(enc: &mut Encoder, fields: &[(&str, &str)]) -> Vec<u8> {
    let mut b = Vec::new();
    enc.encode(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut b,
    );
    b
}

fn done(ev: &Event) -> (u16, u64, u64) {
    match &ev.outcome {
        StreamEnd::Done {
            status,
            body,
            uncompressed,
            ..
        } => (*status, *body, *uncompressed),
        o => panic!("not done: {o:?}"),
    }
}

/// Push off by default: SETTINGS_ENABLE_PUSH=0, and a PUSH_PROMISE is a connection
/// error of type PROTOCOL_ERROR (RFC 9113 §8.4).
#[test]
fn push_promise_with_push_disabled_is_protocol_error() {
    let t = target(None);
    let mut c = Conn::new(&t, 10);
    let f = frames(&c.out);
    assert_eq!(f[0].0, SETTINGS);
    assert_eq!(&f[0].3[..6], &[0, 2, 0, 0, 0, 0]);
    c.receive(&settings(&[]), Instant::now()).unwrap();
    c.open(0, req());
    let mut enc = Encoder::new();
    let mut p = 2u32.to_be_bytes().to_vec();
    p.extend(block(&mut enc, &[(":method", "GET"), (":path", "/a")]));
    let e = c
        .receive(&fr(PUSH_PROMISE, END_HEADERS, 1, &p), Instant::now())
        .unwrap_err();
    assert_eq!(e.code, PROTOCOL_ERROR);
    assert!(e.message.contains("push disabled"), "{}", e.message);
}

/// With push on, promised streams are tracked (their header blocks decoded, CONTINUATION
/// included, so the HPACK table stays in sync) and the request completes only when its
/// response and every stream it promised have ended; pushed bytes are counted in it.
#[test]
fn push_promise_tracked_and_request_waits_for_pushed_streams() {
    let t = target(None);
    let mut c = Conn::with_push(&t, 10, true);
    let f = frames(&c.out);
    assert_eq!(&f[0].3[..6], &[0, 2, 0, 0, 0, 1]);
    c.receive(&settings(&[]), Instant::now()).unwrap();
    let id = c.open(0, req());
    assert_eq!(id, 1);
    c.out.clear();
    let mut enc = Encoder::new();
    let now = Instant::now();
    // Promise 2, its block split over PUSH_PROMISE + CONTINUATION; the new literal
    // "x-res: a" enters the dynamic table.
    let b = block(
        &mut enc,
        &[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/a"),
            ("x-res", "a"),
        ],
    );
    let mut p = 2u32.to_be_bytes().to_vec();
    p.extend_from_slice(&b[..3]);
    let mut wire = fr(PUSH_PROMISE, 0, 1, &p);
    wire.extend(fr(CONTINUATION, END_HEADERS, 1, &b[3..]));
    // Promise 4 (the server resets it later).
    let mut p = 4u32.to_be_bytes().to_vec();
    p.extend(block(&mut enc, &[(":method", "GET"), (":path", "/b")]));
    wire.extend(fr(PUSH_PROMISE, END_HEADERS, 1, &p));
    // The page: headers and 10 body bytes, ended.
    wire.extend(fr(
        HEADERS,
        END_HEADERS,
        1,
        &block(&mut enc, &[(":status", "200")]),
    ));
    wire.extend(fr(DATA, END_STREAM, 1, &[b'p'; 10]));
    assert_eq!(c.receive(&wire, now).unwrap(), wire.len());
    assert!(c.events.is_empty(), "completed before its pushed streams");
    assert_eq!(c.inflight(), 1);
    // Pushed response on 2: its head refers to the entry the promise added (index 62):
    // decoding fails if the PUSH_PROMISE block was not decoded.
    let head = block(&mut enc, &[(":status", "200"), ("x-res", "a")]);
    assert!(
        head.iter().any(|&x| x >= 0xbe),
        "expected a dynamic-table reference"
    );
    let mut wire = fr(HEADERS, END_HEADERS, 2, &head);
    wire.extend(fr(DATA, 0, 2, &[b'a'; 15]));
    c.receive(&wire, now).unwrap();
    assert!(c.events.is_empty());
    // Pushed stream 4 reset; stream 2 still open.
    c.receive(&fr(RST_STREAM, 0, 4, &CANCEL.to_be_bytes()), now)
        .unwrap();
    assert!(c.events.is_empty());
    let later = now + Duration::from_millis(5);
    c.receive(&fr(DATA, END_STREAM, 2, &[b'a'; 5]), later)
        .unwrap();
    assert_eq!(c.events.len(), 1);
    assert_eq!(c.inflight(), 0);
    match &c.events[0].outcome {
        StreamEnd::Done {
            status,
            body,
            pushed,
            first_byte,
            done,
            ..
        } => {
            assert_eq!((*status, *body, *pushed), (200, 30, 1));
            assert_eq!(*done, later);
            assert_eq!(*first_byte, now);
        }
        o => panic!("not done: {o:?}"),
    }
    // Frames on the finished pushed streams are ignored; ones nobody promised are not.
    c.receive(&fr(DATA, END_STREAM, 2, b"x"), later).unwrap();
    let e = c.receive(&fr(DATA, 0, 6, b"x"), later).unwrap_err();
    assert_eq!(e.code, PROTOCOL_ERROR);
}

/// Bad promises: on an idle (unopened) stream, or promising an odd stream id.
#[test]
fn bad_push_promises_are_protocol_errors() {
    let t = target(None);
    for (assoc, promised) in [(3u32, 2u32), (1, 3)] {
        let mut c = Conn::with_push(&t, 10, true);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.open(0, req());
        let mut enc = Encoder::new();
        let mut p = promised.to_be_bytes().to_vec();
        p.extend(block(&mut enc, &[(":method", "GET"), (":path", "/a")]));
        let e = c
            .receive(&fr(PUSH_PROMISE, END_HEADERS, assoc, &p), Instant::now())
            .unwrap_err();
        assert_eq!(e.code, PROTOCOL_ERROR, "{assoc} {promised}");
    }
}

#[test]
fn preface_settings_and_indexed_requests() {
    let t = target(None);
    let mut c = Conn::new(&t, 10);
    assert!(c.out.starts_with(PREFACE));
    let f = frames(&c.out);
    assert_eq!(f[0].0, SETTINGS);
    assert!(
        f[0].3.chunks(6).any(|s| s == [0, 2, 0, 0, 0, 0]),
        "ENABLE_PUSH=0"
    );
    assert_eq!((f[1].0, be32(&f[1].3)), (WINDOW_UPDATE, WINDOW - 65_535));
    c.out.clear();
    for _ in 0..3 {
        c.open(0, req());
    }
    let f = frames(&c.out);
    assert_eq!(f.len(), 3);
    let mut d = Decoder::new(4096);
    for (k, (kind, flags, id, p)) in f.iter().enumerate() {
        assert_eq!(
            (*kind, *flags, *id),
            (HEADERS, END_STREAM | END_HEADERS, 1 + 2 * k as u32)
        );
        let info = d.decode(p).unwrap();
        assert_eq!(info.uncompressed, t.requests[0].h2_header_size);
        if k > 0 {
            assert!(
                p.len() <= 6,
                "later requests are indexed: {} bytes",
                p.len()
            );
        }
    }
    assert_eq!(
        c.out_header,
        f.iter().map(|x| x.3.len() as u64).sum::<u64>()
    );
}

#[test]
fn parser_gives_the_same_result_for_every_split() {
    let t = target(None);
    let mut enc = Encoder::new();
    let mut stream = settings(&[(3, 100), (5, 20_000)]);
    stream.extend(fr(PING, 0, 0, b"12345678"));
    // Stream 1: PADDED|PRIORITY HEADERS split over a CONTINUATION, padded DATA, empty END_STREAM DATA.
    let b1 = block(
        &mut enc,
        &[
            (":status", "200"),
            ("content-length", "10"),
            ("server", "x"),
        ],
    );
    let mut h = vec![3u8, 0, 0, 0, 0, 16];
    h.extend_from_slice(&b1[..4]);
    h.extend_from_slice(&[0, 0, 0]);
    stream.extend(fr(HEADERS, PADDED | PRIORITY_FLAG, 1, &h));
    stream.extend(fr(CONTINUATION, END_HEADERS, 1, &b1[4..]));
    let mut d = vec![5u8];
    d.extend_from_slice(b"0123456789");
    d.extend_from_slice(&[0; 5]);
    stream.extend(fr(DATA, PADDED, 1, &d));
    stream.extend(fr(0xfa, 0, 0, b"unknown"));
    stream.extend(fr(DATA, END_STREAM, 1, b""));
    // Stream 3: 204 in one HEADERS with END_STREAM, partly indexed now.
    let b3 = block(&mut enc, &[(":status", "204"), ("server", "x")]);
    stream.extend(fr(HEADERS, END_STREAM | END_HEADERS, 3, &b3));
    stream.extend(fr(WINDOW_UPDATE, 0, 0, &[0, 0, 1, 0]));
    let header_payload = (h.len() + b1.len() - 4 + b3.len()) as u64;
    for chunk in 1..=stream.len() {
        let mut c = Conn::new(&t, 10);
        c.open(0, req());
        c.open(0, req());
        c.out.clear();
        let mut buf = Vec::new();
        let mut rx_header = 0;
        for part in stream.chunks(chunk) {
            buf.extend_from_slice(part);
            let used = c.receive(&buf, Instant::now()).unwrap();
            buf.drain(..used);
            rx_header += std::mem::take(&mut c.rx_header);
        }
        assert!(buf.is_empty(), "chunk {chunk}");
        assert_eq!(rx_header, header_payload, "chunk {chunk}");
        assert_eq!(c.events.len(), 2, "chunk {chunk}");
        assert_eq!(done(&c.events[0]), (200, 10, 7 + 3 + 14 + 2 + 6 + 1));
        assert_eq!(done(&c.events[1]), (204, 0, 7 + 3 + 6 + 1));
        assert_eq!(c.inflight(), 0);
        let f = frames(&c.out);
        assert!(f.contains(&(SETTINGS, ACK, 0, vec![])), "chunk {chunk}");
        assert!(
            f.contains(&(PING, ACK, 0, b"12345678".to_vec())),
            "chunk {chunk}"
        );
        assert_eq!(c.peer_max_frame, 20_000);
    }
}

fn data_bytes(out: &[u8]) -> (usize, bool, usize) {
    let f = frames(out);
    let mut total = 0;
    let mut end = false;
    let mut biggest = 0;
    for (kind, flags, _, p) in f {
        if kind == DATA {
            total += p.len();
            biggest = biggest.max(p.len());
            end |= flags & END_STREAM != 0;
        }
    }
    (total, end, biggest)
}

#[test]
fn request_body_follows_the_servers_windows() {
    let t = target(Some(100_000));
    let mut c = Conn::new(&t, 10);
    c.receive(&settings(&[]), Instant::now()).unwrap();
    c.out.clear();
    c.open(0, req());
    let f = frames(&c.out);
    assert_eq!((f[0].0, f[0].1), (HEADERS, END_HEADERS), "body follows");
    assert_eq!(data_bytes(&c.out), (65_535, false, 16_384));
    c.out.clear();
    // Connection window opens, the stream's does not: nothing.
    c.receive(
        &fr(WINDOW_UPDATE, 0, 0, &50_000u32.to_be_bytes()),
        Instant::now(),
    )
    .unwrap();
    assert_eq!(data_bytes(&c.out).0, 0);
    // The stream's opens by 20000: that much.
    c.receive(
        &fr(WINDOW_UPDATE, 0, 1, &20_000u32.to_be_bytes()),
        Instant::now(),
    )
    .unwrap();
    assert_eq!(data_bytes(&c.out), (20_000, false, 16_384));
    c.out.clear();
    // A larger INITIAL_WINDOW_SIZE raises open streams' windows: the rest goes.
    c.receive(&settings(&[(4, 65_535 + 30_000)]), Instant::now())
        .unwrap();
    assert_eq!(data_bytes(&c.out), (100_000 - 85_535, true, 14_465));
    // Larger frames once the server allows them.
    let mut c = Conn::new(&t, 10);
    c.receive(&settings(&[(5, 40_000), (4, 1 << 20)]), Instant::now())
        .unwrap();
    c.receive(
        &fr(WINDOW_UPDATE, 0, 0, &(1u32 << 20).to_be_bytes()),
        Instant::now(),
    )
    .unwrap();
    c.out.clear();
    c.open(0, req());
    assert_eq!(data_bytes(&c.out), (100_000, true, 40_000));
    // Window overflow is a connection error.
    let e = c
        .receive(
            &fr(WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
            Instant::now(),
        )
        .unwrap_err();
    assert_eq!(e.code, FLOW_CONTROL_ERROR);
}

#[test]
fn received_data_is_acknowledged_in_batches() {
    let t = target(None);
    let mut c = Conn::new(&t, 10);
    let mut enc = Encoder::new();
    c.receive(&settings(&[]), Instant::now()).unwrap();
    c.open(0, req());
    let b = block(&mut enc, &[(":status", "200")]);
    c.receive(&fr(HEADERS, END_HEADERS, 1, &b), Instant::now())
        .unwrap();
    c.out.clear();
    let data = fr(DATA, 0, 1, &vec![0u8; 16_384]);
    let mut sent = 0u64;
    let mut updates = Vec::new();
    // Just past half the window.
    let n = (WINDOW as usize / 2) / 16_384 + 1;
    for k in 0..n {
        c.receive(&data, Instant::now()).unwrap();
        sent += 16_384;
        for (kind, _, id, p) in frames(&c.out) {
            if kind == WINDOW_UPDATE {
                updates.push((k, id, be32(&p)));
            }
        }
        c.out.clear();
    }
    // One update per direction, at the same frame, returning exactly what was consumed.
    assert_eq!(updates.len(), 2, "{updates:?}");
    let total: u64 = sent;
    for (k, _, inc) in &updates {
        assert_eq!(*k, n - 1);
        assert_eq!(u64::from(*inc), total);
    }
    let ids: Vec<u32> = updates.iter().map(|u| u.1).collect();
    assert!(ids.contains(&0) && ids.contains(&1));
    assert_eq!(c.inflight(), 1);
}

#[test]
fn rst_stream_and_goaway() {
    let t = target(None);
    let mut c = Conn::new(&t, 10);
    c.receive(&settings(&[]), Instant::now()).unwrap();
    for _ in 0..4 {
        c.open(0, req());
    }
    c.receive(&fr(RST_STREAM, 0, 1, &8u32.to_be_bytes()), Instant::now())
        .unwrap();
    c.receive(
        &fr(RST_STREAM, 0, 3, &REFUSED_STREAM.to_be_bytes()),
        Instant::now(),
    )
    .unwrap();
    assert!(
        matches!(&c.events[0].outcome, StreamEnd::Failed(ErrorKind::Reset, m) if m.contains("CANCEL"))
    );
    assert_eq!(c.events[1].outcome, StreamEnd::Refused);
    // A late RST for a finished stream is ignored; one for an idle stream is an error.
    c.receive(&fr(RST_STREAM, 0, 1, &8u32.to_be_bytes()), Instant::now())
        .unwrap();
    assert_eq!(c.events.len(), 2);
    assert!(c.can_open());
    // GOAWAY with last id 5: stream 7 is refused, 5 goes on, nothing new opens.
    let mut g = 5u32.to_be_bytes().to_vec();
    g.extend_from_slice(&NO_ERROR.to_be_bytes());
    c.receive(&fr(GOAWAY, 0, 0, &g), Instant::now()).unwrap();
    assert_eq!(c.events[2].outcome, StreamEnd::Refused);
    assert_eq!(c.inflight(), 1);
    assert!(!c.can_open() && c.exhausted());
    let b = block(&mut Encoder::new(), &[(":status", "404")]);
    c.receive(
        &fr(HEADERS, END_HEADERS | END_STREAM, 5, &b),
        Instant::now(),
    )
    .unwrap();
    assert_eq!(done(&c.events[3]).0, 404);
    assert_eq!(c.goaway, Some((5, NO_ERROR)));
    let e = c
        .receive(&fr(RST_STREAM, 0, 99, &8u32.to_be_bytes()), Instant::now())
        .unwrap_err();
    assert_eq!(e.code, PROTOCOL_ERROR);
}

#[test]
fn protocol_errors_are_connection_errors_not_panics() {
    let t = target(None);
    let cases: Vec<(Vec<u8>, u32)> = vec![
        (fr(PING, 0, 0, b"1234567"), FRAME_SIZE_ERROR),
        (fr(SETTINGS, 0, 0, b"12345"), FRAME_SIZE_ERROR),
        (fr(SETTINGS, ACK, 0, b"123456"), FRAME_SIZE_ERROR),
        (fr(WINDOW_UPDATE, 0, 0, b"123"), FRAME_SIZE_ERROR),
        (fr(RST_STREAM, 0, 1, b"123"), FRAME_SIZE_ERROR),
        (fr(PRIORITY, 0, 1, b"1234"), FRAME_SIZE_ERROR),
        (fr(GOAWAY, 0, 0, b"1234"), FRAME_SIZE_ERROR),
        (fr(DATA, 0, 0, b"x"), PROTOCOL_ERROR),
        (fr(DATA, 0, 9, b"x"), PROTOCOL_ERROR),
        (fr(DATA, PADDED, 1, &[9, 1, 2]), PROTOCOL_ERROR),
        (fr(DATA, PADDED, 1, &[]), FRAME_SIZE_ERROR),
        (fr(HEADERS, END_HEADERS, 2, &[0x88]), PROTOCOL_ERROR),
        (fr(HEADERS, END_HEADERS, 1, &[0x80]), COMPRESSION_ERROR),
        (fr(CONTINUATION, END_HEADERS, 1, &[0x88]), PROTOCOL_ERROR),
        (
            [fr(HEADERS, 0, 1, &[0x88]), fr(PING, 0, 0, b"12345678")].concat(),
            PROTOCOL_ERROR,
        ),
        (
            fr(PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2, 0x88]),
            PROTOCOL_ERROR,
        ),
        (fr(PING, 0, 1, b"12345678"), PROTOCOL_ERROR),
        (fr(SETTINGS, 0, 0, &[0, 5, 0, 0, 0, 1]), PROTOCOL_ERROR),
        (
            fr(SETTINGS, 0, 0, &[0, 4, 0x80, 0, 0, 0]),
            FLOW_CONTROL_ERROR,
        ),
        (fr(WINDOW_UPDATE, 0, 0, &[0, 0, 0, 0]), PROTOCOL_ERROR),
        (
            fr(DATA, 0, 1, &vec![0; OUR_MAX_FRAME + 1]),
            FRAME_SIZE_ERROR,
        ),
    ];
    for (k, (bytes, code)) in cases.iter().enumerate() {
        let mut c = Conn::new(&t, 10);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.open(0, req());
        let e = c.receive(bytes, Instant::now()).unwrap_err();
        assert_eq!(e.code, *code, "case {k}: {}", e.message);
        assert_eq!(e.kind, ErrorKind::Protocol);
    }
    // The server's preface must be SETTINGS (an HTTP/1.1 answer is not).
    let mut c = Conn::new(&t, 10);
    let e = c
        .receive(b"HTTP/1.1 400 Bad Request\r\n", Instant::now())
        .unwrap_err();
    assert!(e.message.contains("not SETTINGS"));
    // Stream errors end only their stream: DATA before HEADERS, no :status.
    let mut c = Conn::new(&t, 10);
    c.receive(&settings(&[]), Instant::now()).unwrap();
    c.open(0, req());
    c.open(0, req());
    c.receive(&fr(DATA, 0, 1, b"x"), Instant::now()).unwrap();
    let b = block(&mut Encoder::new(), &[("server", "x")]);
    c.receive(&fr(HEADERS, END_HEADERS, 3, &b), Instant::now())
        .unwrap();
    assert_eq!(c.events.len(), 2);
    assert!(c
        .events
        .iter()
        .all(|e| matches!(e.outcome, StreamEnd::Failed(ErrorKind::Protocol, _))));
    let rst = frames(&c.out)
        .into_iter()
        .filter(|f| f.0 == RST_STREAM)
        .count();
    assert_eq!(rst, 2);
    // Random bytes after the preface: errors or progress, never a panic.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..3000 {
        let mut c = Conn::new(&t, 10);
        c.receive(&settings(&[]), Instant::now()).unwrap();
        c.open(0, req());
        let mut junk = Vec::new();
        let n = (x % 64) as usize + 9;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            junk.push(x as u8);
        }
        // Keep lengths small and types in range so the frames get parsed.
        junk[0] = 0;
        junk[1] = 0;
        junk[2] = (n - 9) as u8;
        junk[3] %= 10;
        let _ = c.receive(&junk, Instant::now());
    }
}
