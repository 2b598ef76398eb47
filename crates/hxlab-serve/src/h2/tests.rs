//! The connection fed bytes directly, no socket: frame parsing, stream states and flow
//! control edge cases.

use super::state::{Conn, CANCEL_BUDGET};
use crate::routes::{Ctx, Limits};
use crate::stats::Protocol;
use hxlab_wire::h2::{code, flag, frame, write_head, FrameHead, PREFACE};
use hxlab_wire::hpack::Encoder;
use std::sync::Arc;
use std::task::Context;

fn ctx() -> Arc<Ctx> {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let limits = Limits::of(&hxlab_contract::ServeConfig::default());
    let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    Arc::new(Ctx::new(limits, None, a, a, None, rx))
}

fn raw(kind: u8, flags: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    write_head(&mut v, payload.len(), kind, flags, id);
    v.extend_from_slice(payload);
    v
}

fn get(enc: &mut Encoder, path: &str) -> Vec<u8> {
    let mut b = Vec::new();
    enc.encode(
        [
            (&b":method"[..], &b"GET"[..]),
            (b":scheme", b"http"),
            (b":authority", b"x"),
            (b":path", path.as_bytes()),
        ],
        &mut b,
    );
    b
}

/// Frames in `out`: (type, flags, stream, payload).
fn frames(out: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut v = Vec::new();
    let mut at = 0;
    while let Some(h) = FrameHead::parse(&out[at..]) {
        v.push((
            h.kind,
            h.flags,
            h.stream_id,
            out[at + 9..at + 9 + h.len].to_vec(),
        ));
        at += 9 + h.len;
    }
    assert_eq!(at, out.len(), "output ends on a frame boundary");
    v
}

/// A connection past its preface and SETTINGS (our own SETTINGS, WINDOW_UPDATE and the ACK
/// already taken out of `out`).
fn open(settings: &[u8]) -> Conn {
    let mut c = Conn::new(ctx(), Protocol::H2c);
    let mut wire = PREFACE.to_vec();
    wire.extend(raw(frame::SETTINGS, 0, 0, settings));
    assert_eq!(c.receive(&wire), wire.len());
    assert!(!c.failed);
    c.out.clear();
    c
}

fn fill(c: &mut Conn) {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let until = c.out.len() + super::send::HIGH_WATER;
    c.fill(&mut cx, until);
}

/// One frame's worth of output at a time, as the socket would take it.
fn fill_one(c: &mut Conn) {
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    let until = c.out.len() + 1;
    c.fill(&mut cx, until);
}

fn get_with(enc: &mut Encoder, path: &str, priority: Option<&str>) -> Vec<u8> {
    let mut b = Vec::new();
    let mut fields: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"GET"),
        (b":scheme", b"http"),
        (b":authority", b"x"),
        (b":path", path.as_bytes()),
    ];
    if let Some(p) = priority {
        fields.push((b"priority", p.as_bytes()));
    }
    enc.encode(fields, &mut b);
    b
}

fn ctx_with(scheduler: hxlab_core::sched::Scheduler) -> Arc<Ctx> {
    let (_tx, rx) = tokio::sync::watch::channel(false);
    let cfg = hxlab_contract::ServeConfig {
        scheduler,
        ..Default::default()
    };
    let a: std::net::SocketAddr = "127.0.0.1:1".parse().unwrap();
    Arc::new(Ctx::new(Limits::of(&cfg), None, a, a, None, rx))
}

/// A connection under `scheduler` with large windows; `requests` are sent in one batch
/// (path, priority header); then frames are built one at a time, `events` fed after the
/// given number of DATA frames. Returns the stream of each DATA frame, in order.
fn data_order(
    scheduler: hxlab_core::sched::Scheduler,
    requests: &[(u32, &str, Option<&str>)],
    events: &[(usize, Vec<u8>)],
) -> Vec<u32> {
    let mut c = Conn::new(ctx_with(scheduler), Protocol::H2c);
    let mut wire = PREFACE.to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE 8 MiB; the connection window raised too.
    wire.extend(raw(frame::SETTINGS, 0, 0, &[0, 4, 0, 0x80, 0, 0]));
    wire.extend(raw(
        frame::WINDOW_UPDATE,
        0,
        0,
        &(64u32 << 20).to_be_bytes(),
    ));
    let mut enc = Encoder::new();
    for (id, path, prio) in requests {
        let block = get_with(&mut enc, path, *prio);
        wire.extend(raw(
            frame::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            *id,
            &block,
        ));
    }
    assert_eq!(c.receive(&wire), wire.len());
    c.out.clear();
    let mut order = Vec::new();
    for _ in 0..10_000 {
        for (at, bytes) in events {
            if *at == order.len() {
                assert_eq!(c.receive(bytes), bytes.len());
            }
        }
        let before = c.out.len();
        fill_one(&mut c);
        let new = frames(&c.out[before..]);
        if new.is_empty() {
            break;
        }
        order.extend(new.iter().filter(|f| f.0 == frame::DATA).map(|f| f.2));
    }
    assert!(!c.failed);
    order
}

fn runs(order: &[u32]) -> Vec<(u32, usize)> {
    let mut r: Vec<(u32, usize)> = Vec::new();
    for &id in order {
        match r.last_mut() {
            Some((last, n)) if *last == id => *n += 1,
            _ => r.push((id, 1)),
        }
    }
    r
}

fn goaway_code(out: &[u8]) -> Option<u32> {
    frames(out)
        .into_iter()
        .find(|f| f.0 == frame::GOAWAY)
        .map(|f| u32::from_be_bytes([f.3[4], f.3[5], f.3[6], f.3[7]]))
}

/// A HEADERS without END_HEADERS whose CONTINUATION never comes holds the whole connection:
/// it is closed (GOAWAY ENHANCE_YOUR_CALM) at --head-timeout, which the connection's timer is
/// due by; and when the client's input ends mid-block, the block no longer keeps it busy
/// (the fuzz target found a connection that stayed open after its client closed).
#[test]
fn an_unfinished_header_block_ends_at_the_head_timeout() {
    let mut enc = Encoder::new();
    let mut c = open(&[]);
    let block = get(&mut enc, "/bytes/100");
    c.receive(&raw(frame::HEADERS, flag::END_STREAM, 1, &block[..2]));
    assert!(c.busy() && c.out.is_empty(), "waiting for CONTINUATION");
    let due = c.next_deadline().expect("a head deadline");
    let head_timeout = c.ctx.limits.head_timeout;
    c.on_timer(due - std::time::Duration::from_millis(1));
    assert!(!c.failed, "not before --head-timeout");
    c.on_timer(due);
    assert!(c.failed);
    assert_eq!(goaway_code(&c.out), Some(code::ENHANCE_YOUR_CALM));
    assert!(due >= tokio::time::Instant::now() + head_timeout - std::time::Duration::from_secs(1));

    let mut c = open(&[]);
    c.receive(&raw(frame::HEADERS, flag::END_STREAM, 1, &block[..2]));
    c.input_ended();
    assert!(!c.busy(), "a block that can never end keeps nothing busy");
}

#[test]
fn a_get_is_answered_in_the_same_batch_and_leaves_no_stream() {
    let mut enc = Encoder::new();
    let mut c = open(&[]);
    let wire = raw(
        frame::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &get(&mut enc, "/bytes/100"),
    );
    c.receive(&wire);
    let f = frames(&c.out);
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!((f[0].0, f[0].2), (frame::HEADERS, 1));
    assert_eq!(f[0].3[0], 0x88, ":status 200 indexed");
    assert_eq!(
        (f[1].0, f[1].1, f[1].3.len()),
        (frame::DATA, flag::END_STREAM, 100)
    );
    assert!(c.streams.is_empty());
}

#[test]
fn input_split_at_every_byte_gives_the_same_answer() {
    let mut enc = Encoder::new();
    let mut wire = PREFACE.to_vec();
    wire.extend(raw(frame::SETTINGS, 0, 0, &[]));
    wire.extend(raw(
        frame::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &get(&mut enc, "/bytes/10"),
    ));
    wire.extend(raw(frame::PING, 0, 0, &[7; 8]));
    let whole = {
        let mut c = Conn::new(ctx(), Protocol::H2c);
        c.receive(&wire);
        frames(&c.out).len()
    };
    for split in 1..wire.len() {
        let mut c = Conn::new(ctx(), Protocol::H2c);
        let used = c.receive(&wire[..split]);
        let mut rest = wire[used..split].to_vec();
        rest.extend_from_slice(&wire[split..]);
        assert_eq!(c.receive(&rest), rest.len(), "split at {split}");
        assert!(!c.failed, "split at {split}");
        assert_eq!(frames(&c.out).len(), whole, "split at {split}");
    }
}

#[test]
fn a_zero_window_holds_data_until_window_update_and_settings() {
    let mut enc = Encoder::new();
    // SETTINGS_INITIAL_WINDOW_SIZE 0.
    let mut c = open(&[0, 4, 0, 0, 0, 0]);
    c.receive(&raw(
        frame::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &get(&mut enc, "/bytes/100"),
    ));
    fill(&mut c);
    let f = frames(&c.out);
    assert_eq!(
        f.iter().filter(|f| f.0 == frame::DATA).count(),
        0,
        "no DATA without window"
    );
    assert_eq!(c.streams.len(), 1);
    c.out.clear();
    c.receive(&raw(frame::WINDOW_UPDATE, 0, 1, &10u32.to_be_bytes()));
    fill(&mut c);
    let f = frames(&c.out);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].0, f[0].1, f[0].3.len()), (frame::DATA, 0, 10));
    c.out.clear();
    // A larger initial window opens the rest (RFC 9113 §6.9.2).
    c.receive(&raw(frame::SETTINGS, 0, 0, &[0, 4, 0, 0, 1, 0]));
    fill(&mut c);
    let f = frames(&c.out);
    let data: Vec<_> = f.iter().filter(|f| f.0 == frame::DATA).collect();
    assert_eq!(data.len(), 1);
    assert_eq!((data[0].1, data[0].3.len()), (flag::END_STREAM, 90));
    assert!(c.streams.is_empty());
}

#[test]
fn a_reset_stream_is_freed_at_once_whatever_the_window() {
    let mut enc = Encoder::new();
    let mut c = open(&[0, 4, 0, 0, 0, 0]);
    for id in [1, 3, 5] {
        c.receive(&raw(
            frame::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            id,
            &get(&mut enc, "/bytes/100000"),
        ));
    }
    fill(&mut c);
    assert_eq!(c.streams.len(), 3);
    c.receive(&raw(frame::RST_STREAM, 0, 3, &code::CANCEL.to_be_bytes()));
    assert_eq!(c.streams.len(), 2);
    assert!(c.streams.iter().all(|s| s.id != 3));
    // Frames for it that were on their way are not errors.
    c.receive(&raw(frame::WINDOW_UPDATE, 0, 3, &5u32.to_be_bytes()));
    assert!(!c.failed);
}

#[test]
fn rapid_reset_gets_enhance_your_calm() {
    let mut enc = Encoder::new();
    let mut c = open(&[]);
    let budget = c.ctx.limits.max_streams + CANCEL_BUDGET;
    let mut id = 1;
    for _ in 0..=budget {
        let mut wire = raw(
            frame::HEADERS,
            flag::END_HEADERS | flag::END_STREAM,
            id,
            &get(&mut enc, "/delay/1000"),
        );
        wire.extend(raw(frame::RST_STREAM, 0, id, &code::CANCEL.to_be_bytes()));
        c.receive(&wire);
        assert!(c.streams.len() <= 1);
        id += 2;
    }
    assert!(c.failed);
    assert_eq!(goaway_code(&c.out), Some(code::ENHANCE_YOUR_CALM));
}

#[test]
fn protocol_errors_get_goaway_with_their_code() {
    let mut enc = Encoder::new();
    let block = get(&mut enc, "/");
    let cases: Vec<(&str, Vec<u8>, u32)> = vec![
        (
            "DATA on an idle stream",
            raw(frame::DATA, 0, 1, b"x"),
            code::PROTOCOL_ERROR,
        ),
        (
            "even stream",
            raw(frame::HEADERS, 5, 2, &block),
            code::PROTOCOL_ERROR,
        ),
        (
            "PING of 7 bytes",
            raw(frame::PING, 0, 0, &[0; 7]),
            code::FRAME_SIZE_ERROR,
        ),
        (
            "SETTINGS on a stream",
            raw(frame::SETTINGS, 0, 1, &[]),
            code::PROTOCOL_ERROR,
        ),
        (
            "window of 2^31",
            [raw(
                frame::WINDOW_UPDATE,
                0,
                0,
                &0x7fff_ffffu32.to_be_bytes(),
            )]
            .concat(),
            code::FLOW_CONTROL_ERROR,
        ),
        (
            "CONTINUATION alone",
            raw(frame::CONTINUATION, 4, 1, &block),
            code::PROTOCOL_ERROR,
        ),
        (
            "interrupted block",
            [
                raw(frame::HEADERS, 1, 1, &block),
                raw(frame::PING, 0, 0, &[0; 8]),
            ]
            .concat(),
            code::PROTOCOL_ERROR,
        ),
        (
            "bad HPACK",
            raw(frame::HEADERS, 5, 1, &[0xff; 8]),
            code::COMPRESSION_ERROR,
        ),
        (
            "frame too large",
            raw(frame::DATA, 0, 1, &vec![0; 16_385]),
            code::FRAME_SIZE_ERROR,
        ),
        (
            "PUSH_PROMISE",
            raw(frame::PUSH_PROMISE, 4, 1, &[0, 0, 0, 2]),
            code::PROTOCOL_ERROR,
        ),
    ];
    for (what, wire, want) in cases {
        let mut c = open(&[]);
        c.receive(&wire);
        assert!(c.failed, "{what}");
        assert_eq!(goaway_code(&c.out), Some(want), "{what}");
    }
    let mut c = Conn::new(ctx(), Protocol::H2c);
    c.receive(b"GET / HTTP/1.1\r\n\r\n");
    assert!(c.failed, "a bad preface");
}

#[test]
fn request_bodies_are_checked_and_credited() {
    let mut enc = Encoder::new();
    let mut c = open(&[]);
    let mut block = get(&mut enc, "/bytes/5");
    enc.encode([(&b"content-length"[..], &b"4"[..])], &mut block);
    c.receive(&raw(frame::HEADERS, flag::END_HEADERS, 1, &block));
    assert_eq!(c.streams.len(), 1);
    // Five bytes where four were announced: a stream error, not a connection error.
    c.receive(&raw(frame::DATA, flag::END_STREAM, 1, b"12345"));
    assert!(!c.failed);
    let f = frames(&c.out);
    assert!(f.iter().any(|f| f.0 == frame::RST_STREAM
        && f.2 == 1
        && f.3 == code::PROTOCOL_ERROR.to_be_bytes()));
    assert!(c.streams.is_empty());
    // A large body gives its window back as it comes.
    c.out.clear();
    c.receive(&raw(
        frame::HEADERS,
        flag::END_HEADERS,
        3,
        &get(&mut enc, "/bytes/1"),
    ));
    let chunk = vec![0u8; 16_384];
    for _ in 0..20 {
        c.receive(&raw(frame::DATA, 0, 3, &chunk));
    }
    assert!(!c.failed);
    let updates: Vec<_> = frames(&c.out)
        .into_iter()
        .filter(|f| f.0 == frame::WINDOW_UPDATE)
        .collect();
    assert!(updates.iter().any(|f| f.2 == 3), "stream credit returned");
    c.out.clear();
    c.receive(&raw(frame::DATA, flag::END_STREAM, 3, b""));
    let f = frames(&c.out);
    assert_eq!(
        f.last().map(|f| (f.0, f.1)),
        Some((frame::DATA, flag::END_STREAM))
    );
}

#[test]
fn streams_over_the_limit_are_refused() {
    let mut enc = Encoder::new();
    let mut c = open(&[]);
    let max = c.ctx.limits.max_streams;
    for i in 0..=max {
        c.receive(&raw(
            frame::HEADERS,
            flag::END_HEADERS,
            1 + 2 * i,
            &get(&mut enc, "/"),
        ));
    }
    assert_eq!(c.streams.len(), max as usize);
    let f = frames(&c.out);
    assert!(f.iter().any(|f| f.0 == frame::RST_STREAM
        && f.2 == 1 + 2 * max
        && f.3 == code::REFUSED_STREAM.to_be_bytes()));
}

#[test]
fn a_page_pushes_its_resources_and_sends_early_hints_first() {
    let mut enc = Encoder::new();
    let mut c = open(&[]);
    c.receive(&raw(
        frame::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &get(&mut enc, "/page?n=2&size=10&push=1&early_hints=1"),
    ));
    fill(&mut c);
    let f = frames(&c.out);
    let kinds: Vec<(u8, u32)> = f.iter().map(|f| (f.0, f.2)).collect();
    assert_eq!(
        kinds,
        [
            (frame::HEADERS, 1),
            (frame::PUSH_PROMISE, 1),
            (frame::PUSH_PROMISE, 1),
            (frame::HEADERS, 1),
            (frame::DATA, 1),
            (frame::HEADERS, 2),
            (frame::DATA, 2),
            (frame::HEADERS, 4),
            (frame::DATA, 4),
        ]
    );
    assert_eq!(&f[1].3[..4], &2u32.to_be_bytes(), "promised stream 2");
    assert!(c.streams.is_empty());
    // A client that disabled push gets the page alone.
    let mut c = open(&[0, 2, 0, 0, 0, 0]);
    c.receive(&raw(
        frame::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &get(&mut enc, "/page?n=2&size=10&push=1"),
    ));
    assert!(frames(&c.out).iter().all(|f| f.0 != frame::PUSH_PROMISE));
}

#[test]
fn a_window_made_negative_by_settings_waits_for_its_update() {
    let mut enc = Encoder::new();
    // Initial window 3: three bytes go, then the window drops to -1 (RFC 9113 §6.9.2).
    let mut c = open(&[0, 4, 0, 0, 0, 3]);
    c.receive(&raw(
        frame::HEADERS,
        flag::END_HEADERS | flag::END_STREAM,
        1,
        &get(&mut enc, "/bytes/10"),
    ));
    fill(&mut c);
    assert_eq!(
        frames(&c.out)
            .iter()
            .filter(|f| f.0 == frame::DATA)
            .map(|f| f.3.len())
            .sum::<usize>(),
        3
    );
    c.out.clear();
    c.receive(&raw(frame::SETTINGS, 0, 0, &[0, 4, 0, 0, 0, 2]));
    c.receive(&raw(frame::WINDOW_UPDATE, 0, 1, &1u32.to_be_bytes()));
    fill(&mut c);
    assert!(
        frames(&c.out).iter().all(|f| f.0 != frame::DATA),
        "window 0: nothing"
    );
    c.receive(&raw(frame::WINDOW_UPDATE, 0, 1, &2u32.to_be_bytes()));
    fill(&mut c);
    let data: Vec<usize> = frames(&c.out)
        .iter()
        .filter(|f| f.0 == frame::DATA)
        .map(|f| f.3.len())
        .collect();
    assert_eq!(data, [2]);
}

#[test]
fn rfc9218_sends_the_urgent_response_before_bulk_requested_earlier() {
    use hxlab_core::sched::Scheduler;
    // 3 frames of bulk at u=5, then 2 frames at u=0 requested after it (same batch): the
    // urgent one goes first; round-robin alternates; fifo keeps request order.
    let reqs = [
        (1, "/bytes/49152", Some("u=5")),
        (3, "/bytes/32768", Some("u=0")),
    ];
    assert_eq!(
        runs(&data_order(Scheduler::Rfc9218, &reqs, &[])),
        vec![(3, 2), (1, 3)]
    );
    assert_eq!(
        data_order(Scheduler::RoundRobin, &reqs, &[]),
        vec![1, 3, 1, 3, 1]
    );
    assert_eq!(
        runs(&data_order(Scheduler::Fifo, &reqs, &[])),
        vec![(1, 3), (3, 2)]
    );
}

#[test]
fn priority_update_reorders_mid_flight_and_rfc7540_weights_count_only_alone() {
    use hxlab_core::sched::Scheduler;
    use hxlab_wire::priority::write_h2_update;
    // Two bulks at the default urgency: request order. After 2 frames the second is made
    // urgent: its frames come next.
    let mut update = Vec::new();
    write_h2_update(&mut update, 3, b"u=1");
    let reqs = [(1, "/bytes/65536", None), (3, "/bytes/32768", None)];
    assert_eq!(
        runs(&data_order(
            Scheduler::Rfc9218,
            &reqs,
            &[(2, update.clone())]
        )),
        vec![(1, 2), (3, 2), (1, 2)]
    );
    // An update for a stream not opened yet is kept for it.
    let mut early = Vec::new();
    write_h2_update(&mut early, 5, b"u=0");
    let mut c = Conn::new(ctx_with(Scheduler::Rfc9218), Protocol::H2c);
    let mut wire = PREFACE.to_vec();
    wire.extend(raw(frame::SETTINGS, 0, 0, &[]));
    wire.extend(early);
    assert_eq!(c.receive(&wire), wire.len());
    assert_eq!(c.signals.early_len(), 1);
    // RFC 7540 weights: a PRIORITY frame raising stream 1 is ignored when the request
    // carried a priority header, used when it did not.
    let mut weight = Vec::new();
    weight.extend(raw(frame::PRIORITY, 0, 1, &[0, 0, 0, 0, 255]));
    let with_header = [
        (1, "/bytes/49152", Some("u=5")),
        (3, "/bytes/16384", Some("u=4")),
    ];
    assert_eq!(
        runs(&data_order(
            Scheduler::Rfc9218,
            &with_header,
            &[(0, weight.clone())]
        )),
        vec![(3, 1), (1, 3)]
    );
    let without = [(1, "/bytes/49152", None), (3, "/bytes/16384", Some("u=1"))];
    assert_eq!(
        runs(&data_order(Scheduler::Rfc9218, &without, &[(0, weight)])),
        vec![(1, 3), (3, 1)]
    );
}

#[test]
fn a_flood_of_priority_frames_gets_enhance_your_calm() {
    use hxlab_wire::priority::write_h2_update;
    let mut c = open(&[]);
    let mut flood = Vec::new();
    for i in 0..2_000u32 {
        write_h2_update(&mut flood, 1_001 + 2 * i, b"u=1");
    }
    c.receive(&flood);
    assert!(c.failed);
    assert_eq!(goaway_code(&c.out), Some(code::ENHANCE_YOUR_CALM));
    assert!(c.signals.early_len() <= crate::schedule::EARLY_UPDATES);
}

/// The response HEADERS payloads of three GETs of /bytes/10 on one new connection opened
/// with `settings`, each decoded by a decoder that follows the whole connection. A second
/// boundary between them changes `date`: then the three are asked again on a new connection.
fn three_response_heads(settings: &[u8]) -> Vec<Vec<u8>> {
    loop {
        let mut c = open(settings);
        let mut enc = Encoder::new();
        let mut dec = hxlab_wire::hpack::Decoder::new(4096);
        let (mut heads, mut dates) = (Vec::new(), Vec::new());
        for id in [1u32, 3, 5] {
            let block = get(&mut enc, "/bytes/10");
            let end = flag::END_HEADERS | flag::END_STREAM;
            c.receive(&raw(frame::HEADERS, end, id, &block));
            fill(&mut c);
            for (kind, _, stream, payload) in frames(&c.out) {
                if kind == frame::HEADERS && stream == id {
                    let mut status = None;
                    dec.decode_fields(&payload, |f| match f.name {
                        b":status" => status = Some(f.value.to_vec()),
                        b"date" => dates.push(f.value.to_vec()),
                        _ => {}
                    })
                    .expect("our decoder reads what the server's encoder wrote");
                    assert_eq!(status.as_deref(), Some(&b"200"[..]));
                    heads.push(payload);
                }
            }
            c.out.clear();
        }
        assert_eq!(heads.len(), 3);
        if dates.iter().all(|d| *d == dates[0]) {
            return heads;
        }
    }
}

#[test]
fn response_heads_are_indexed_per_connection() {
    let heads = three_response_heads(&[]);
    assert_ne!(heads[0][0] & 0xe0, 0x20, "no size update at the default");
    assert!(heads[2].len() * 10 <= heads[0].len() * 4, "{heads:02x?}");
    assert_eq!(heads[1], heads[2], "a repeat is all indexes");
    // A second connection starts from an empty table: its first head is the long one again.
    assert_eq!(three_response_heads(&[])[0].len(), heads[0].len());
}

#[test]
fn a_client_table_of_zero_gets_a_size_update_and_static_heads() {
    // SETTINGS_HEADER_TABLE_SIZE = 0.
    let heads = three_response_heads(&[0, 1, 0, 0, 0, 0]);
    assert_eq!(
        heads[0][0], 0x20,
        "the first block opens with a size update to 0"
    );
    assert_eq!(&heads[0][1..], &heads[1][..]);
    assert_eq!(heads[1], heads[2]);
    assert!(heads[2].len() > three_response_heads(&[])[2].len());
}
