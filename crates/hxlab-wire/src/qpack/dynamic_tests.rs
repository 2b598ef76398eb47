//! The dynamic-table encoder and decoder together: RFC 9204 Appendix B, round trips over
//! several streams with acknowledgements in any order, and what a hostile peer gets.

use super::decoder::required_insert_count;
use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fields_of(d: &mut QpackDecoder, stream: u64, block: &[u8]) -> Option<Vec<(String, String)>> {
    let mut got = Vec::new();
    let r = d
        .decode(stream, block, 1 << 20, |n, v| {
            got.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
            Ok(())
        })
        .unwrap();
    (r == Decoded::Done).then_some(got)
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn rfc9204_appendix_b_through_the_decoder() {
    let mut d = QpackDecoder::new(220, 10);
    let mut out = Vec::new();
    // B.1: static only.
    let f = fields_of(&mut d, 0, &hex("0000 510b 2f69 6e64 6578 2e68 746d 6c")).unwrap();
    assert_eq!(f, pairs(&[(":path", "/index.html")]));
    d.drain_output(&mut out);
    assert!(
        out.is_empty(),
        "no acknowledgement for a static-only section"
    );
    // B.2: the section arrives before the inserts it needs: blocked, then decoded after the
    // encoder stream, acknowledged by one Section Acknowledgment (no increment needed).
    let b2 = hex("0381 10 11");
    assert_eq!(fields_of(&mut d, 0, &b2), None);
    assert_eq!(d.blocked_streams(), 1);
    d.feed_encoder(&hex(
        "3fbd01 c00f7777772e6578616d706c652e636f6d c10c2f73616d706c652f70617468",
    ))
    .unwrap();
    let f = fields_of(&mut d, 0, &b2).unwrap();
    assert_eq!(
        f,
        pairs(&[(":authority", "www.example.com"), (":path", "/sample/path")])
    );
    d.drain_output(&mut out);
    assert_eq!(out, hex("80"));
    assert_eq!(d.table().size(), 106);
    // B.3: a speculative insert, acknowledged by an Insert Count Increment of 1.
    out.clear();
    d.feed_encoder(&hex("4a637573746f6d2d6b65790c637573746f6d2d76616c7565"))
        .unwrap();
    d.drain_output(&mut out);
    assert_eq!(out, hex("01"));
    assert_eq!(d.table().size(), 160);
    // B.4: Duplicate, then stream 4 references the duplicate, a static and custom-key.
    out.clear();
    d.feed_encoder(&hex("02")).unwrap();
    let f = fields_of(&mut d, 4, &hex("0500 80 c1 81")).unwrap();
    assert_eq!(
        f,
        pairs(&[
            (":authority", "www.example.com"),
            (":path", "/"),
            ("custom-key", "custom-value")
        ])
    );
    d.drain_output(&mut out);
    assert_eq!(out, hex("84"));
    assert_eq!(d.table().size(), 217);
    // B.5: Insert With Name Reference (dynamic, relative 1: custom-key) evicts entry 0; a
    // stream cancelled before its section is decoded.
    out.clear();
    d.feed_encoder(&hex("810d637573746f6d2d76616c756532"))
        .unwrap();
    assert_eq!(d.table().first(), 1);
    assert_eq!(d.table().size(), 215);
    d.cancel_stream(8);
    d.drain_output(&mut out);
    assert_eq!(out, hex("48 01"));
    assert_eq!(d.stats().inserts, 5);
}

#[test]
fn required_insert_count_wraps_as_the_rfc_says() {
    // MaxEntries 6 (capacity 220): FullRange 12.
    for ric in 1..40u64 {
        let enc = decoder::encode_required_insert_count(ric, 220);
        for total in ric.saturating_sub(6)..=ric + 5 {
            if total + 6 >= ric {
                assert_eq!(
                    required_insert_count(enc, 220, total),
                    Ok(ric),
                    "{ric} {total}"
                );
            }
        }
    }
    assert!(required_insert_count(13, 220, 0).is_err());
    assert!(required_insert_count(1, 0, 0).is_err());
}

/// An encoder and a decoder joined by their streams; acknowledgements are held back until
/// `ack` is called, so references to unacknowledged entries really block.
struct Pair {
    enc: QpackEncoder,
    dec: QpackDecoder,
}

impl Pair {
    fn new(enc_max: u64, dec_max: u64, blocked: u64) -> Pair {
        let mut enc = QpackEncoder::new(enc_max);
        let dec = QpackDecoder::new(dec_max, blocked);
        enc.peer_settings(dec.max_capacity(), dec.max_blocked());
        Pair { enc, dec }
    }
    fn encode(&mut self, stream: u64, fields: &[(&str, &str)]) -> Vec<u8> {
        let f: Vec<(&[u8], &[u8])> = fields
            .iter()
            .map(|(n, v)| (n.as_bytes(), v.as_bytes()))
            .collect();
        let mut block = Vec::new();
        self.enc.encode(stream, &f, &mut block);
        block
    }
    fn deliver_encoder_stream(&mut self) {
        let mut e = Vec::new();
        self.enc.drain_output(&mut e);
        // Delivered a byte at a time: every split of every instruction.
        for b in e {
            self.dec.feed_encoder(&[b]).unwrap();
        }
    }
    fn ack(&mut self) {
        let mut d = Vec::new();
        self.dec.drain_output(&mut d);
        for b in d {
            self.enc.feed_decoder(&[b]).unwrap();
        }
    }
}

#[test]
fn three_identical_requests_shrink_to_a_few_bytes() {
    let req = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "127.0.0.1:8443"),
        (":path", "/bytes/100"),
        ("user-agent", "hxlab/0.1.0"),
    ];
    let mut p = Pair::new(4096, 4096, 100);
    let mut sizes = Vec::new();
    for i in 0..3 {
        let block = p.encode(4 * i, &req);
        p.deliver_encoder_stream();
        assert_eq!(fields_of(&mut p.dec, 4 * i, &block), Some(pairs(&req)));
        p.ack();
        sizes.push(block.len());
    }
    // Prefix (2) + 5 one-byte references.
    assert_eq!(sizes[2], 7, "{sizes:?}");
    assert!(sizes[1] <= 10, "{sizes:?}");
    // Static only: every request the same size as the first static-only encoding.
    let mut s = Pair::new(0, 4096, 100);
    let a = s.encode(0, &req);
    let b = s.encode(4, &req);
    assert_eq!(a, b);
    assert!(a.len() > 20);
    let mut plain = Vec::new();
    encode_field_section(
        req.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut plain,
    );
    assert_eq!(a, plain, "capacity 0 encodes as the static-only encoder");
}

#[test]
fn without_a_blocked_stream_budget_unacknowledged_entries_are_not_referenced() {
    let req = [(":path", "/a"), ("x-id", "7")];
    let mut p = Pair::new(4096, 4096, 0);
    let first = p.encode(0, &req);
    // Inserted, but the section uses literals: the decoder never blocks.
    assert_eq!(p.enc.stats().inserts, 2);
    assert_eq!(p.enc.stats().dynamic_refs, 0);
    assert_eq!(fields_of(&mut p.dec, 0, &first), Some(pairs(&req)));
    p.deliver_encoder_stream();
    p.ack();
    let second = p.encode(4, &req);
    assert_eq!(
        second.len(),
        4,
        "two acknowledged references: {second:02x?}"
    );
    assert_eq!(fields_of(&mut p.dec, 4, &second), Some(pairs(&req)));
}

#[test]
fn the_blocked_stream_budget_is_never_exceeded() {
    let mut p = Pair::new(4096, 4096, 2);
    // Ten streams, each with a new field, nothing acknowledged in between: at most two may
    // reference unacknowledged entries.
    let mut blocks = Vec::new();
    for i in 0..10u64 {
        let v = format!("value-{i}");
        blocks.push(p.encode(4 * i, &[("x-n", v.as_str())]));
    }
    let blocking = blocks.iter().filter(|b| b[0] != 0).count();
    assert_eq!(blocking, 2);
    assert_eq!(p.enc.stats().blocking_sections, 2);
    // Sections decoded before the inserts arrive: the two block, the rest decode.
    for (i, b) in blocks.iter().enumerate() {
        let f = fields_of(&mut p.dec, 4 * i as u64, b);
        assert_eq!(f.is_none(), b[0] != 0);
    }
    assert_eq!(p.dec.blocked_streams(), 2);
    p.deliver_encoder_stream();
    for (i, b) in blocks.iter().enumerate().filter(|(_, b)| b[0] != 0) {
        let v = format!("value-{i}");
        assert_eq!(
            fields_of(&mut p.dec, 4 * i as u64, b),
            Some(pairs(&[("x-n", v.as_str())]))
        );
    }
    p.ack();
    assert_eq!(p.enc.known_received(), 10);
}

#[test]
fn a_small_table_turns_over_without_evicting_what_is_referenced() {
    // 200 bytes: a few entries; many distinct values force eviction and duplicates.
    let mut p = Pair::new(200, 200, 100);
    for round in 0..50u64 {
        let v = format!("v{}", round % 7);
        let req = [
            (":path", "/same"),
            ("x-rotating", v.as_str()),
            ("x-k", "const"),
        ];
        let block = p.encode(4 * round, &req);
        p.deliver_encoder_stream();
        assert_eq!(fields_of(&mut p.dec, 4 * round, &block), Some(pairs(&req)));
        if round % 3 == 0 {
            p.ack();
        }
    }
    assert!(p.enc.table().size() <= 200);
    assert!(p.enc.stats().dynamic_refs > 50, "{:?}", p.enc.stats());
    assert_eq!(p.dec.stats().inserts, p.enc.stats().inserts);
    assert_eq!(p.dec.stats().dynamic_refs, p.enc.stats().dynamic_refs);
}

#[test]
fn a_hostile_encoder_gets_errors_not_memory() {
    // A capacity above what we advertised.
    let mut d = QpackDecoder::new(4096, 10);
    let mut b = Vec::new();
    crate::prefix::write(&mut b, 0x20, 5, 1 << 40);
    assert!(d.feed_encoder(&b).is_err());
    // An insert larger than the capacity set.
    let mut d = QpackDecoder::new(4096, 10);
    d.feed_encoder(&[0x3f, 0x21]).unwrap(); // capacity 64
    let mut ins = vec![0x40 | 5];
    ins.extend_from_slice(b"aaaaa");
    ins.push(30);
    ins.extend_from_slice(&[b'b'; 30]);
    assert!(d.feed_encoder(&ins).is_err(), "5 + 30 + 32 > 64");
    // A string longer than any table we allow is refused from its length, unbuffered.
    let mut d = QpackDecoder::new(4096, 10);
    let mut big = vec![0x40 | 1, b'a'];
    crate::prefix::write(&mut big, 0, 7, 1 << 30);
    assert!(d.feed_encoder(&big).is_err());
    assert!(d.memory() < 64 * 1024);
    // References to evicted entries, in the encoder stream and in a section.
    let mut d = QpackDecoder::new(100, 10);
    d.feed_encoder(&[0x3f, 0x45]).unwrap(); // capacity 100
    d.feed_encoder(&hex("43616161 03626262")).unwrap(); // aaa: bbb (38)
    d.feed_encoder(&hex("43636363 03646464")).unwrap(); // ccc: ddd (76)
    d.feed_encoder(&hex("43656565 03666666")).unwrap(); // eee: fff, evicts 0
    assert!(
        d.feed_encoder(&[0x02]).is_err(),
        "duplicate of evicted entry 0"
    );
    let mut d2 = QpackDecoder::new(100, 10);
    d2.feed_encoder(&[0x3f, 0x45]).unwrap();
    d2.feed_encoder(&hex(
        "43616161 03626262 43636363 03646464 43656565 03666666",
    ))
    .unwrap();
    // RIC 3 (encoded 3 % 6 + 1 = 4), Base 3, relative 2 = entry 0, evicted.
    assert!(d2
        .decode(0, &[0x04, 0x00, 0x82], 1 << 20, |_, _| Ok(()))
        .is_err());
    // A reference at or past the Required Insert Count.
    assert!(d2
        .decode(0, &[0x02, 0x00, 0x10], 1 << 20, |_, _| Ok(()))
        .is_err());
    // More blocked streams than advertised.
    let mut d = QpackDecoder::new(4096, 2);
    d.feed_encoder(&[0x3f, 0xe1, 0x1f]).unwrap();
    assert_eq!(
        d.decode(0, &[0x02, 0x00, 0x80], 1 << 20, |_, _| Ok(())),
        Ok(Decoded::Blocked)
    );
    assert_eq!(
        d.decode(4, &[0x02, 0x00, 0x80], 1 << 20, |_, _| Ok(())),
        Ok(Decoded::Blocked)
    );
    // The same stream again is still one blocked stream.
    assert_eq!(
        d.decode(4, &[0x02, 0x00, 0x80], 1 << 20, |_, _| Ok(())),
        Ok(Decoded::Blocked)
    );
    assert!(d
        .decode(8, &[0x02, 0x00, 0x80], 1 << 20, |_, _| Ok(()))
        .is_err());
    d.cancel_stream(0);
    assert_eq!(
        d.decode(8, &[0x02, 0x00, 0x80], 1 << 20, |_, _| Ok(())),
        Ok(Decoded::Blocked)
    );
}

#[test]
fn a_hostile_decoder_gets_errors_and_floods_cost_nothing() {
    let mut p = Pair::new(4096, 4096, 100);
    let _ = p.encode(0, &[("x-a", "1")]);
    // Acknowledging a section that does not exist, an increment past the inserts, a zero
    // increment.
    assert!(p.enc.feed_decoder(&[0x84]).is_err());
    let mut p = Pair::new(4096, 4096, 100);
    let _ = p.encode(0, &[("x-a", "1")]);
    assert!(p.enc.feed_decoder(&[0x02]).is_err());
    let mut p = Pair::new(4096, 4096, 100);
    assert!(p.enc.feed_decoder(&[0x00]).is_err());
    // A million cancellations of streams we never used: accepted, nothing kept.
    let mut p = Pair::new(4096, 4096, 100);
    let flood: Vec<u8> = std::iter::repeat_n(0x48u8, 1_000_000).collect();
    p.enc.feed_decoder(&flood).unwrap();
    assert!(p.enc.memory() < 1024, "{}", p.enc.memory());
    // An overlong integer.
    assert!(p
        .enc
        .feed_decoder(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])
        .is_err());
}

#[test]
fn a_peer_that_never_acknowledges_gets_static_and_literals_in_bounded_memory() {
    let mut p = Pair::new(4096, 4096, 100);
    for i in 0..(encoder::MAX_OUTSTANDING as u64 + 50) {
        let _ = p.encode(4 * i, &[("x-a", "1"), (":path", "/")]);
        let mut sink = Vec::new();
        p.enc.drain_output(&mut sink);
    }
    let last = p.encode(1 << 20, &[("x-a", "1")]);
    assert_eq!(
        last[0], 0,
        "no dynamic reference once too many sections wait"
    );
    assert!(p.enc.memory() < 4096 + 64 * 1024, "{}", p.enc.memory());
}

#[test]
fn decoder_memory_stays_within_its_capacity_and_a_stated_overhead() {
    let mut d = QpackDecoder::new(64 * 1024, 100);
    let mut b = Vec::new();
    crate::prefix::write(&mut b, 0x20, 5, 64 * 1024);
    d.feed_encoder(&b).unwrap();
    // Fill the table many times over with smallest entries (32 + 2 bytes each).
    for i in 0..20_000u32 {
        let ins = [0x41, b'n', 0x01, b'0' + (i % 10) as u8];
        d.feed_encoder(&ins).unwrap();
    }
    assert!(d.table().size() <= 64 * 1024);
    // Content plus per-entry bookkeeping: within 2× the capacity.
    assert!(d.memory() <= 2 * 64 * 1024, "{}", d.memory());
}
