use super::*;

/// Frames a connection's bytes as the origin does, fed in the pieces given: each head is read
/// from a buffer that grows until it is complete, then its body is stepped over. Returns
/// "METHOD target" of every request, or the refusal.
fn frame_pieces(pieces: &[&[u8]]) -> Result<Vec<String>, Refusal> {
    let mut seen = Vec::new();
    let mut held: Vec<u8> = Vec::new();
    let mut reader = HeadReader::default();
    let mut body: Option<BodyReader> = None;
    for piece in pieces {
        held.extend_from_slice(piece);
        loop {
            if let Some(b) = &mut body {
                let used = b.feed(&held)?;
                held.drain(..used);
                if !b.done() {
                    break;
                }
                body = None;
            }
            match reader.read(&held, 64 * 1024)? {
                None => break,
                Some((used, head)) => {
                    seen.push(format!("{} {}", head.method, head.target));
                    let b = BodyReader::new(head.body);
                    held.drain(..used);
                    if !b.done() {
                        body = Some(b);
                    }
                }
            }
        }
    }
    Ok(seen)
}

/// Frames `input` whole, split at every position, and byte by byte; all must agree.
fn check(input: &[u8]) -> Result<Vec<String>, Refusal> {
    let whole = frame_pieces(&[input]);
    for cut in 0..=input.len() {
        let got = frame_pieces(&[&input[..cut], &input[cut..]]);
        assert_eq!(got, whole, "split at {cut}");
    }
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(frame_pieces(&bytes), whole, "byte by byte");
    whole
}

#[test]
fn pipelined_requests_with_bodies_are_framed_at_every_split() {
    let input = b"\r\nGET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n\
        POST /a HTTP/1.1\r\nhost: x\r\nContent-Length: 5\r\n\r\nab\r\nc\
        POST /b HTTP/1.1\r\nHOST: x\r\nTransfer-Encoding:  Chunked \r\n\r\n\
        3;ext=\"q\"\r\nab\n\r\nA ; n = v\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n\
        GET /old HTTP/1.0\r\n\r\n\
        POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\ncontent-length: 0\r\n\r\n\
        GET /d?q=1 HTTP/1.1\r\nHost:\r\nX-Long-Header-Name-Here: 1\r\n\r\n";
    assert_eq!(
        check(input),
        Ok(vec![
            "GET /".to_string(),
            "POST /a".into(),
            "POST /b".into(),
            "GET /old".into(),
            "POST /c".into(),
            "GET /d?q=1".into(),
        ])
    );
}

#[test]
fn ambiguous_requests_are_refused_at_every_split() {
    let cases: &[(&[u8], Refusal)] = &[
        (b"GET / HTTP/1.1\nHost: x\n\n", Refusal::BareLf),
        (b"GET / HTTP/1.1\r\nHost: x\n\r\n", Refusal::BareLf),
        (b"GET / HTTP/1.1\r\nHost: x\r\r\n\r\n", Refusal::BareCr),
        (b"\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::BareLf),
        (b"GET / HTTP/1.1\r\n\r\n", Refusal::NoHost),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Refusal::TwoHosts),
        (b"GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", Refusal::TwoHosts),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            Refusal::LengthAndEncoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            Refusal::LengthAndEncoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            Refusal::BadLength,
        ),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", Refusal::BadLength),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", Refusal::BadLength),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", Refusal::BadLength),
        (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n", Refusal::BadLength),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 123456789012345678901234567\r\n\r\n",
            Refusal::BadLength,
        ),
        (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", Refusal::BadEncoding),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            Refusal::BadEncoding,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
            Refusal::BadEncoding,
        ),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Refusal::BadEncoding),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", Refusal::ObsFold),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n\tfolded\r\n\r\n", Refusal::ObsFold),
        (b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", Refusal::ObsFold),
        (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", Refusal::BadFieldLine),
        (b"GET / HTTP/1.1\r\nHost\r\n\r\n", Refusal::BadFieldLine),
        (b"GET / HTTP/1.1\r\n: x\r\n\r\n", Refusal::BadFieldLine),
        (b"GET / HTTP/1.1\r\nBad Name: x\r\nHost: x\r\n\r\n", Refusal::BadFieldLine),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\x00\x01\x02\r\n\r\n", Refusal::BadFieldLine),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n", Refusal::BadFieldValue),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n", Refusal::BadFieldValue),
        (b"GET  / HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::BadRequestLine),
        (b"GET / HTTP/1.1 \r\nHost: x\r\n\r\n", Refusal::BadRequestLine),
        (b"GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::BadRequestLine),
        (b"GET\r\nHost: x\r\n\r\n", Refusal::BadRequestLine),
        (b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::BadRequestLine),
        (b"GET /\x80 HTTP/1.1\r\nHost: x\r\n\r\n", Refusal::BadRequestLine),
        (b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", Refusal::VersionNotSupported),
        (b"GET / http/1.1\r\nHost: x\r\n\r\n", Refusal::BadVersion),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
            Refusal::BadChunk,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n;x\r\n",
            Refusal::BadChunk,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc",
            Refusal::BareLf,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naX\r\n",
            Refusal::BadChunk,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1 x\r\na\r\n",
            Refusal::BadChunk,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\n\r\n",
            Refusal::BareLf,
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n11111111111111111\r\n",
            Refusal::BadChunk,
        ),
    ];
    for (input, why) in cases {
        assert_eq!(
            check(input),
            Err(*why),
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn requests_before_a_refused_one_are_framed_first() {
    // The server answers each head as it is read; the stream's refusal comes after both.
    let input = b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\nHost: x\r\n\r\n";
    let mut reader = HeadReader::default();
    let (used, head) = reader.read(input, 1024).expect("valid").expect("complete");
    assert_eq!(head.target, "/1");
    assert_eq!(reader.read(&input[used..], 1024), Err(Refusal::BareLf));
}

#[test]
fn head_fields_and_connection_flags_are_read() {
    let input = b"POST http://a.test/up?x=1 HTTP/1.1\r\nHost:  a.test:8080 \r\n\
        Connection: Upgrade, close\r\nExpect: 100-Continue\r\nContent-Length: 7\r\n\
        X-Empty:\r\n\r\nabcdefgGET";
    let (used, head) = HeadReader::default()
        .read(input, 1024)
        .expect("valid")
        .expect("complete");
    assert_eq!(&input[used..], b"abcdefgGET");
    assert_eq!(head.method, "POST");
    assert_eq!(head.target, "http://a.test/up?x=1");
    assert_eq!(head.version, Version::Http11);
    assert_eq!(head.host, Some(&b"a.test:8080"[..]));
    assert_eq!(head.body, BodyLength::Length(7));
    assert!(!head.keep_alive);
    assert!(head.expect_continue);
    let fields: Vec<(&[u8], &[u8])> = head.fields().collect();
    assert_eq!(fields.len(), 5);
    assert_eq!(fields[0], (&b"Host"[..], &b"a.test:8080"[..]));
    assert_eq!(fields[4], (&b"X-Empty"[..], &b""[..]));

    let keep = |input: &[u8]| {
        HeadReader::default()
            .read(input, 1024)
            .expect("valid")
            .expect("complete")
            .1
            .keep_alive
    };
    assert!(keep(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    assert!(!keep(b"GET / HTTP/1.0\r\n\r\n"));
    assert!(keep(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
    assert!(!keep(
        b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n"
    ));
}

#[test]
fn heads_over_the_limit_are_refused_complete_or_not() {
    let mut head = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    head.extend_from_slice(&[b'a'; 200]);
    assert_eq!(
        HeadReader::default().read(&head, 100),
        Err(Refusal::TooLarge),
        "incomplete"
    );
    let complete = b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 0123456789\r\n\r\n";
    assert_eq!(
        HeadReader::default().read(complete, 30),
        Err(Refusal::TooLarge)
    );
    assert!(HeadReader::default().read(complete, 64).is_ok());
    // Empty lines before the request line count too: they cannot go on forever.
    assert_eq!(
        HeadReader::default().read(&b"\r\n".repeat(100), 100),
        Err(Refusal::TooLarge)
    );
    // A fault past the limit is not judged: too large, whether the bytes come at once or one
    // by one (found by the fuzz target h1_request).
    let mut late_lf = b"GET / HTTP/1.1\r\nX: ".to_vec();
    late_lf.extend_from_slice(&[b'a'; 200]);
    late_lf.extend_from_slice(b"\n\r\n");
    assert_eq!(
        HeadReader::default().read(&late_lf, 100),
        Err(Refusal::TooLarge),
        "at once"
    );
    let mut r = HeadReader::default();
    let trickled = (1..=late_lf.len())
        .map(|n| r.read(&late_lf[..n], 100))
        .find(|x| *x != Ok(None));
    assert_eq!(trickled, Some(Err(Refusal::TooLarge)), "byte by byte");
}

#[test]
fn a_trickling_head_is_scanned_once() {
    // Grown a byte at a time, the reader resumes where it stopped: the bytes it looks at
    // across all calls stay linear in the head's size.
    let mut input = b"GET / HTTP/1.1\r\nHost: x\r\n".to_vec();
    for i in 0..500 {
        input.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
    }
    input.extend_from_slice(b"\r\n");
    let mut reader = HeadReader::default();
    for end in 1..input.len() {
        assert_eq!(reader.read(&input[..end], 64 * 1024), Ok(None), "at {end}");
        assert!(
            end - reader.scanned <= 1,
            "rescanning from {}",
            reader.scanned
        );
    }
    let (used, head) = reader
        .read(&input, 64 * 1024)
        .expect("valid")
        .expect("complete");
    assert_eq!(used, input.len());
    assert_eq!(head.fields().count(), 501);
}

#[test]
fn bodies_are_skipped_whatever_they_hold_and_bounded_where_unframed() {
    let mut input = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n\n\n\r\r: ".to_vec();
    input.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(check(&input), Ok(vec!["POST /".into(), "GET /".into()]));
    // An endless chunk extension or trailer section is refused at its bound.
    let mut ext = BodyReader::new(BodyLength::Chunked);
    let mut line = b"1;".to_vec();
    line.extend(std::iter::repeat_n(b'e', MAX_CHUNK_LINE as usize));
    assert_eq!(ext.feed(&line), Err(Refusal::BadChunk));
    let mut trailers = BodyReader::new(BodyLength::Chunked);
    let mut body = b"0\r\n".to_vec();
    for _ in 0..MAX_TRAILERS / 8 + 1 {
        body.extend_from_slice(b"T: 123\r\n");
    }
    assert_eq!(trailers.feed(&body), Err(Refusal::BadChunk));
    let mut fine = BodyReader::new(BodyLength::Chunked);
    assert_eq!(fine.feed(b"0\r\nT: 1\r\n\r\nNEXT"), Ok(11));
    assert!(fine.done());
}

#[test]
fn byte_classes_are_the_rfcs_for_every_byte() {
    for b in 0..=255u8 {
        let tchar = b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        let value = b == b'\t' || (b' '..=b'~').contains(&b) || b >= 0x80;
        // RFC 3986 §2.2, §2.3: unreserved and sub-delims.
        let reg_name = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=".contains(&b);
        assert_eq!(is_tchar(b), tchar, "tchar {b:#04x}");
        assert_eq!(is_reg_name_byte(b), reg_name, "reg-name {b:#04x}");
        assert_eq!(is_value_byte(b), value, "field-value byte {b:#04x}");
    }
}

#[test]
fn field_values_are_judged_word_at_a_time_as_byte_by_byte() {
    // Every byte value at every position of values 1 to 17 bytes long (two words and a
    // tail), among allowed bytes of both kinds (ASCII and obs-text).
    for len in 1..=17 {
        for at in 0..len {
            for b in 0..=255u8 {
                for fill in [b'a', 0xe9, b' '] {
                    let mut v = vec![fill; len];
                    v[at] = b;
                    assert_eq!(
                        all_value_bytes(&v),
                        v.iter().all(|&b| is_value_byte(b)),
                        "byte {b:#04x} at {at} of {len} among {fill:#04x}"
                    );
                }
            }
        }
    }
    // Two bad bytes in one word, and a bad byte right after a borrow-prone one.
    assert!(!all_value_bytes(b"ab\x00cd\x7fgh"));
    assert!(!all_value_bytes(b"\x20\x1fabcdef"));
    assert!(all_value_bytes(b"\t\x20\x7e\x80\xff\x21\x09\x7e"));
}

/// `input` framed at every split, then its first head read whole.
fn first_head(input: &[u8]) -> (Vec<String>, RequestHead<'_>) {
    let framed = check(input).expect("valid");
    let (_, head) = HeadReader::default()
        .read(input, 64 * 1024)
        .expect("valid")
        .expect("complete");
    (framed, head)
}

#[test]
fn valid_host_values_are_taken_at_every_split() {
    let hosts: &[&[u8]] = &[
        b"a.test",
        b"a.test:8080",
        b"A-b_c~1.test",
        b"127.0.0.1:80",
        b"999.1.1.1",
        b"%41b.test",
        b"sub!$&'()*+,;=delims",
        b"[::1]",
        b"[::1]:443",
        b"[2001:DB8::a:1]",
        b"[::ffff:192.0.2.1]:8443",
        b"[v1f.fe80:x~]",
        // port = *DIGIT (RFC 3986 §3.2.3): an empty port is the same as none.
        b"a.test:",
        // Kept as before: an empty Host (RFC 9112 §3.2, a target without authority).
        b"",
    ];
    for host in hosts {
        let mut input = b"GET / HTTP/1.1\r\nHost: ".to_vec();
        input.extend_from_slice(host);
        input.extend_from_slice(b"\r\n\r\n");
        let (framed, head) = first_head(&input);
        assert_eq!(framed, ["GET /"], "{}", String::from_utf8_lossy(host));
        assert_eq!(head.host, Some(*host));
    }
}

#[test]
fn invalid_host_values_get_400_at_every_split() {
    let hosts: &[&[u8]] = &[
        b"a b",
        b"a\tb",
        b"u@evil",
        b"u:p@evil:80",
        b"a.test:8o",
        b"a.test:80:80",
        b"a.test:-1",
        b":80",
        b"a/b",
        b"a?b",
        b"a#b",
        b"a\"b",
        b"a<b>",
        b"a\\b",
        b"%",
        b"%4",
        b"%zz.test",
        b"a.test\x80",
        b"[::1",
        b"[::1]x",
        b"[::1]:x",
        b"[]",
        b"[zz::1]",
        b"[::1%25eth0]",
        b"[1.2.3.4]",
        b"[v.x]",
        b"[v1.]",
        b"[v1x]",
        b"::1",
    ];
    for host in hosts {
        // Any version: RFC 9112 §3.2 asks 400 for an invalid Host on every request.
        for version in ["1.1", "1.0"] {
            let mut input = format!("GET / HTTP/{version}\r\nHost: ").into_bytes();
            input.extend_from_slice(host);
            input.extend_from_slice(b"\r\n\r\n");
            let what = String::from_utf8_lossy(&input).into_owned();
            assert_eq!(check(&input), Err(Refusal::BadHost), "{what}");
        }
    }
    assert_eq!(Refusal::BadHost.status(), 400);
}

/// A chunked POST whose one chunk ("abc") has the size line `line`, then a GET.
fn chunked_post(line: &[u8]) -> Vec<u8> {
    let mut input = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    input.extend_from_slice(line);
    input.extend_from_slice(b"\r\nabc\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    input
}

#[test]
fn chunk_size_lines_are_hex_digits_then_an_extension_at_every_split() {
    // chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] ) (RFC 9112 §7.1.1).
    let taken: &[&[u8]] = &[
        b"3",
        b"0003",
        b"3;ext=1",
        b"3;a",
        b"3;a;b=c",
        b"3 ;ext=1",
        b"3\t; a = 1 ;b",
        b"3;a=\"q \\\" ; \\\\\"",
        b"3;a=\"\"",
        b"3;a=\"\xe9\t\"",
        b"3;!#$%&'*+-.^_`|~=!#$%&'*+-.^_`|~",
    ];
    for line in taken {
        let what = String::from_utf8_lossy(line).into_owned();
        assert_eq!(
            check(&chunked_post(line)),
            Ok(vec!["POST /".to_string(), "GET /next".into()]),
            "{what}"
        );
    }
    let refused: &[&[u8]] = &[
        // Whitespace that no `;` follows is not BWS of a chunk-ext: refused, not trimmed.
        b"3 ",
        b"3\t",
        b"3;a ",
        b"3;a=1 ",
        b"3;a=\"v\" ",
        b" 3",
        b"",
        b"0x3",
        b"3x",
        b"3 3",
        b"3;",
        b"3; ",
        b"3;;a",
        b"3;=1",
        b"3;a=",
        b"3;a=;b",
        b"3;a b",
        b"3;a=1 2",
        b"3;a=b=c",
        b"3;a(=1",
        b"3;a=\"unterminated",
        b"3;a=\"v\"x",
        b"3;a=\"\x01\"",
        b"3;a=\"\x7f\"",
        b"3;a=\"\\\x00\"",
        b"3;a=\"\r\"",
    ];
    for line in refused {
        let what = String::from_utf8_lossy(line).into_owned();
        assert_eq!(check(&chunked_post(line)), Err(Refusal::BadChunk), "{what}");
    }
    assert_eq!(check(&chunked_post(b"3\r")), Err(Refusal::BareCr));
}

#[test]
fn a_chunk_extension_stays_bounded_in_every_state() {
    // An endless name, token, quoted string or run of BWS is refused at the line's bound.
    let max = MAX_CHUNK_LINE as usize;
    for (prefix, fill) in [
        (&b"1;"[..], b'e'),
        (b"1;a=", b'e'),
        (b"1;a=\"", b'q'),
        (b"1 ", b' '),
        (b"1;a ", b' '),
        (b"1;a= ", b'\t'),
    ] {
        let mut line = prefix.to_vec();
        line.resize(max + 1, fill);
        let what = String::from_utf8_lossy(prefix).into_owned();
        let mut reader = BodyReader::new(BodyLength::Chunked);
        assert_eq!(reader.feed(&line), Err(Refusal::BadChunk), "{what}");
        let mut reader = BodyReader::new(BodyLength::Chunked);
        assert_eq!(
            reader.feed(&line[..max]),
            Ok(max),
            "{what}: within the bound"
        );
    }
}

#[test]
fn obs_fold_in_trailers_gets_400_at_every_split() {
    let head = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n";
    for trailers in [
        &b"X-T: 1\r\n folded\r\n\r\n"[..],
        b"X-T: 1\r\n\tfolded\r\n\r\n",
        b" X-T: 1\r\n\r\n",
        b"\tX-T: 1\r\n\r\n",
    ] {
        let mut input = head.to_vec();
        input.extend_from_slice(trailers);
        let what = String::from_utf8_lossy(trailers).into_owned();
        assert_eq!(check(&input), Err(Refusal::ObsFold), "{what}");
    }
    // Whitespace inside a trailer line belongs to its value, as in the head.
    let mut input = head.to_vec();
    input.extend_from_slice(b"X-T: a b\t\r\nX-U:\t1\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(check(&input), Ok(vec!["POST /".into(), "GET /".into()]));
}

#[test]
fn one_leading_crlf_is_ignored_at_every_split() {
    // RFC 9112 §2.2: at the start of a connection, and after a body of each framing.
    assert_eq!(
        check(b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        Ok(vec!["GET /".into()])
    );
    assert_eq!(
        check(b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n"),
        Ok(vec!["GET /".into(), "GET /2".into()])
    );
    assert_eq!(
        check(
            b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab\r\n\
              POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n\r\n\
              GET /c HTTP/1.0\r\n\r\n"
        ),
        Ok(vec!["POST /a".into(), "POST /b".into(), "GET /c".into()])
    );
    // The empty line counts in the bytes consumed; a bare LF there is still refused.
    let (used, head) = HeadReader::default()
        .read(b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nNEXT", 1024)
        .expect("valid")
        .expect("complete");
    assert_eq!((used, head.target), (29, "/"));
    assert_eq!(
        check(b"\r\n\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        Err(Refusal::BareLf)
    );
}

#[test]
fn http_versions_are_read_as_1_1_refused_or_not_supported_at_every_split() {
    // A higher HTTP/1 minor version is answered as HTTP/1.1 (RFC 9110 §2.5), Host required.
    for version in ["HTTP/1.2", "HTTP/1.9"] {
        let input = format!("GET / {version}\r\nHost: x\r\n\r\nGET /2 HTTP/1.1\r\nHost: x\r\n\r\n");
        let (framed, head) = first_head(input.as_bytes());
        assert_eq!(framed, ["GET /", "GET /2"], "{version}");
        assert_eq!(head.version, Version::Http11, "{version}");
        assert!(head.keep_alive, "{version}");
        let no_host = format!("GET / {version}\r\n\r\n");
        assert_eq!(check(no_host.as_bytes()), Err(Refusal::NoHost), "{version}");
    }
    // Well formed, another major version: 505 (RFC 9110 §15.6.6).
    for version in ["HTTP/2.0", "HTTP/3.0", "HTTP/9.9", "HTTP/0.9", "HTTP/2.1"] {
        let input = format!("GET / {version}\r\nHost: x\r\n\r\n");
        assert_eq!(
            check(input.as_bytes()),
            Err(Refusal::VersionNotSupported),
            "{version}"
        );
    }
    // Malformed (RFC 9112 §2.3: "HTTP" "/" DIGIT "." DIGIT, case-sensitive): 400.
    for version in [
        "http/1.1",
        "Http/1.1",
        "HTTP/1",
        "HTTP/2",
        "HTTP/1.10",
        "HTTP/11.1",
        "HTTP/x.y",
        "HTTP/1.x",
        "HTTP/",
        "HTTP/1.1.1",
        "HTTP/1,1",
        "HTTP/\u{e9}.1",
    ] {
        let input = format!("GET / {version}\r\nHost: x\r\n\r\n");
        assert_eq!(
            check(input.as_bytes()),
            Err(Refusal::BadVersion),
            "{version}"
        );
    }
    // Not a version at all: the request line is malformed.
    for line in ["GET / HTP/1.1", "GET / 1.1", "GET / HTTP/1.1 x"] {
        let input = format!("{line}\r\nHost: x\r\n\r\n");
        assert_eq!(
            check(input.as_bytes()),
            Err(Refusal::BadRequestLine),
            "{line}"
        );
    }
    assert_eq!(Refusal::VersionNotSupported.status(), 505);
    assert_eq!(Refusal::BadVersion.status(), 400);
}
