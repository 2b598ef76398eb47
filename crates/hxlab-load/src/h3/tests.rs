use super::parse::parse_head;
use super::*;

pub(super) fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, kind);
    put_varint(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

/// A QPACK field section (static table and literals) of `fields`.
pub(super) fn section(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    qpack::encode_field_section(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut out,
    );
    out
}

/// Feeds `chunks` to a fresh parser and finishes it.
fn run(chunks: &[&[u8]]) -> Result<ResponseParser, H3Error> {
    let mut p = ResponseParser::default();
    let mut dec = ResponseDecoder::Static(qpack::Decoder::new());
    let now = Instant::now();
    let mut header_bytes = 0;
    for c in chunks {
        p.feed(&mut dec, 0, c, now)?;
        header_bytes += std::mem::take(&mut p.header_bytes);
    }
    p.finish()?;
    p.header_bytes = header_bytes;
    Ok(p)
}

#[test]
fn varints_round_trip() {
    for v in [
        0,
        63,
        64,
        16_383,
        16_384,
        (1 << 30) - 1,
        1 << 30,
        (1 << 62) - 1,
    ] {
        let mut out = Vec::new();
        put_varint(&mut out, v);
        assert_eq!(varint(&out), Some((v, out.len())), "{v}");
        assert_eq!(varint(&out[..out.len() - 1]), None);
    }
}

#[test]
fn response_parses_the_same_for_every_split() {
    // A reserved (grease) frame, a 103, the final head (a Huffman literal among them),
    // DATA with a two-byte length, an unknown frame, DATA, trailers.
    let interim = section(&[(":status", "103"), ("link", "</a.js>; rel=preload")]);
    let head = section(&[
        (":status", "200"),
        ("content-type", "application/octet-stream"),
        ("server", "hxlab-serve"),
    ]);
    let trailers = section(&[("x-checksum", "abc")]);
    let mut bytes = frame(0x21 + 0x1f * 3, b"grease");
    bytes.extend(frame(HEADERS, &interim));
    bytes.extend(frame(HEADERS, &head));
    bytes.extend(frame(DATA, &[7u8; 70]));
    bytes.extend(frame(0x2f, &[1, 2, 3]));
    bytes.extend(frame(DATA, &[8u8; 5]));
    bytes.extend(frame(HEADERS, &trailers));
    let headers_total = (interim.len() + head.len() + trailers.len()) as u64;
    let uncompressed = (":status".len()
        + 3
        + "content-type".len()
        + "application/octet-stream".len()
        + "server".len()
        + "hxlab-serve".len()) as u64;
    let check = |p: ResponseParser, how: &str| {
        assert_eq!(p.status, 200, "{how}");
        assert_eq!(p.body, 75, "{how}");
        assert_eq!(p.uncompressed, uncompressed, "{how}");
        assert_eq!(p.header_bytes, headers_total, "{how}");
        assert!(p.first_byte.is_some());
    };
    check(run(&[&bytes]).unwrap(), "whole");
    for at in 0..=bytes.len() {
        let (a, b) = bytes.split_at(at);
        check(run(&[a, b]).unwrap(), &format!("split at {at}"));
    }
    let ones: Vec<&[u8]> = bytes.chunks(1).collect();
    check(run(&ones).unwrap(), "bytewise");
    // A parser reused after reset gives the same again.
    let mut p = ResponseParser::default();
    let mut dec = ResponseDecoder::Static(qpack::Decoder::new());
    p.feed(&mut dec, 0, &bytes[..10], Instant::now()).unwrap();
    p.reset();
    p.feed(&mut dec, 0, &bytes, Instant::now()).unwrap();
    p.finish().unwrap();
    assert_eq!((p.status, p.body), (200, 75));
}

fn code(e: &H3Error) -> (bool, u64) {
    match e {
        H3Error::Connection { code, .. } => (true, *code),
        H3Error::Stream { code, .. } => (false, *code),
    }
}

#[test]
fn malformed_responses_are_errors_not_panics() {
    let ok = frame(HEADERS, &section(&[(":status", "200")]));
    let data = frame(DATA, b"xy");
    let cases: Vec<(Vec<u8>, (bool, u64))> = vec![
        // DATA before HEADERS.
        (data.clone(), (true, H3_FRAME_UNEXPECTED)),
        // A head without :status, with a non-numeric one.
        (
            frame(HEADERS, &section(&[("server", "x")])),
            (false, H3_MESSAGE_ERROR),
        ),
        (
            frame(HEADERS, &section(&[(":status", "2x0")])),
            (false, H3_MESSAGE_ERROR),
        ),
        // Required Insert Count 1, an empty field section, a truncated one.
        (
            frame(HEADERS, &[0x02, 0x00, 0x80]),
            (true, QPACK_DECOMPRESSION_FAILED),
        ),
        (frame(HEADERS, &[]), (true, QPACK_DECOMPRESSION_FAILED)),
        (
            frame(HEADERS, &[0x00, 0x00, 0x51, 0x09, b'/']),
            (true, QPACK_DECOMPRESSION_FAILED),
        ),
        // Control frames, push and HTTP/2 types on a request stream.
        (
            [ok.clone(), frame(SETTINGS, &[])].concat(),
            (true, H3_FRAME_UNEXPECTED),
        ),
        (
            [ok.clone(), frame(GOAWAY, &[0])].concat(),
            (true, H3_FRAME_UNEXPECTED),
        ),
        (frame(PUSH_PROMISE, &[0, 0, 0]), (true, H3_ID_ERROR)),
        (frame(0x08, &[0, 0, 0, 1]), (true, H3_FRAME_UNEXPECTED)),
        // Anything after trailers.
        (
            [ok.clone(), ok.clone(), data.clone()].concat(),
            (true, H3_FRAME_UNEXPECTED),
        ),
        (
            [ok.clone(), ok.clone(), ok.clone()].concat(),
            (true, H3_FRAME_UNEXPECTED),
        ),
        // The stream ends inside a frame head, inside a payload, or with no response.
        ([ok.clone(), vec![0x00]].concat(), (true, H3_FRAME_ERROR)),
        (ok[..ok.len() - 1].to_vec(), (true, H3_FRAME_ERROR)),
        (
            frame(HEADERS, &section(&[(":status", "100")])),
            (false, H3_MESSAGE_ERROR),
        ),
        (Vec::new(), (false, H3_MESSAGE_ERROR)),
    ];
    for (bytes, want) in cases {
        let got = run(&[&bytes])
            .err()
            .unwrap_or_else(|| panic!("{bytes:02x?} passed"));
        assert_eq!(code(&got), want, "{bytes:02x?}: {got:?}");
    }
    // A HEADERS frame larger than we buffer is refused from its head alone; a huge
    // DATA frame is counted as it streams, never buffered.
    let mut huge = Vec::new();
    put_varint(&mut huge, HEADERS);
    put_varint(&mut huge, MAX_FIELD_SECTION + 1);
    let got = run(&[&huge]).unwrap_err();
    assert_eq!(code(&got), (false, H3_EXCESSIVE_LOAD));
    let mut p = ResponseParser::default();
    let mut dec = ResponseDecoder::Static(qpack::Decoder::new());
    let mut big = ok.clone();
    put_varint(&mut big, DATA);
    put_varint(&mut big, 1 << 40);
    p.feed(&mut dec, 0, &big, Instant::now()).unwrap();
    p.feed(&mut dec, 0, &[0u8; 4096], Instant::now()).unwrap();
    assert_eq!(p.body, 4096);
    assert!(p.block.capacity() < 4096);
}

/// The server's control stream goes through hxlab-wire's reader (tested there at every
/// split); what it refuses becomes a connection error with the code named.
#[test]
fn control_stream_errors_are_connection_errors() {
    use hxlab_wire::h3::control::{ControlReader, Sender};
    let mut c = ControlReader::new(Sender::Server);
    let e: H3Error = c.feed(&frame(GOAWAY, &[0])).unwrap_err().into();
    assert_eq!(
        e,
        H3Error::Connection {
            code: hxlab_wire::h3::code::H3_MISSING_SETTINGS,
            message: "h3: control stream without SETTINGS first (H3_MISSING_SETTINGS)".into()
        }
    );
}

#[test]
fn request_bytes_are_a_headers_frame_and_a_data_frame() {
    let cfg = crate::LoadConfig {
        urls: vec!["https://127.0.0.1:4433/bytes/100".into()],
        body: Some(vec![b'x'; 300]),
        ..Default::default()
    };
    let t = crate::target::Target::from_config(&cfg).unwrap();
    let r = &t.requests[0];
    let b = &r.h3_request[..];
    let (kind, len, used) = parse_head(b).unwrap();
    assert_eq!((kind, len), (HEADERS, r.h3_header_payload));
    let block = &b[used..used + len as usize];
    let f = qpack::Decoder::new()
        .decode(block, MAX_FIELD_SECTION)
        .unwrap();
    assert_eq!(f.uncompressed, r.h2_header_size);
    let rest = &b[used + len as usize..];
    let (kind, len, used) = parse_head(rest).unwrap();
    assert_eq!((kind, len, rest.len() - used), (DATA, 300, 300));
}

#[test]
fn a_head_waiting_for_inserts_blocks_the_stream_then_resumes() {
    use hxlab_wire::qpack::QpackEncoder;
    // The server's encoder, told our SETTINGS, inserts and references in one go.
    let cfg = QpackConfig::new(4096, 4096);
    let mut enc = QpackEncoder::new(4096);
    enc.peer_settings(cfg.decoder_capacity, cfg.blocked_streams);
    let mut block = Vec::new();
    let fields: [(&[u8], &[u8]); 2] = [(b":status", b"200"), (b"x-served-by", b"origin-1")];
    enc.encode(0, &fields, &mut block);
    assert_ne!(block[0], 0, "references the table");
    let mut stream = frame(HEADERS, &block);
    stream.extend(frame(DATA, b"hello"));
    let mut dec = ResponseDecoder::new(cfg);
    let mut p = ResponseParser::default();
    let now = Instant::now();
    // Every split: the head blocks, what follows is kept aside, nothing is counted yet.
    for at in 1..stream.len() {
        p.reset();
        let mut dec = ResponseDecoder::new(cfg);
        p.feed(&mut dec, 0, &stream[..at], now).unwrap();
        p.feed(&mut dec, 0, &stream[at..], now).unwrap();
        assert!(p.is_blocked(), "split at {at}");
        assert_eq!((p.status, p.body), (0, 0));
        if let ResponseDecoder::Dynamic(d) = &mut dec {
            d.cancel_stream(0);
        }
    }
    p.reset();
    p.feed(&mut dec, 0, &stream, now).unwrap();
    assert!(p.is_blocked());
    let mut ins = Vec::new();
    enc.drain_output(&mut ins);
    let ResponseDecoder::Dynamic(d) = &mut dec else {
        panic!("dynamic decoder")
    };
    d.feed_encoder(&ins).unwrap();
    p.resume(&mut dec, 0, now).unwrap();
    assert!(!p.is_blocked());
    assert_eq!((p.status, p.body), (200, 5));
    p.finish().unwrap();
}
