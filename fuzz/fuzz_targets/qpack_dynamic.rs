//! Field sections that reference the QPACK dynamic table, as `QpackDecoder::decode` reads
//! them after a peer's encoder stream, and our encoder against our decoder.
//!
//! Input: records (2-byte length, bytes): the first is the peer's encoder stream (fed in the
//! pieces `common::pieces` cuts from the first input byte), each following one a field
//! section, decoded on stream 4·i.
//! Checks:
//! - no panic; a section that decodes once decodes the same again (decoding is a pure
//!   function of the table; its acknowledgement changes nothing in the table);
//! - the encoder stream gives the same table whatever its pieces;
//! - blocked streams never exceed what we advertised;
//! - our encoder, given the fields any section decoded to, writes a section and an encoder
//!   stream that a fresh pair decodes back to the same fields, with the table in use.
#![no_main]
use hxlab_wire::qpack::{Decoded, QpackDecoder, QpackEncoder};
use libfuzzer_sys::fuzz_target;

#[path = "../common.rs"]
mod common;

type Fields = Vec<(Vec<u8>, Vec<u8>)>;

fn decode(d: &mut QpackDecoder, stream: u64, block: &[u8]) -> Result<Option<Fields>, ()> {
    let mut got = Vec::new();
    match d.decode(stream, block, 1 << 16, |n, v| {
        got.push((n.to_vec(), v.to_vec()));
        Ok(())
    }) {
        Ok(Decoded::Done) => Ok(Some(got)),
        Ok(Decoded::Blocked) => Ok(None),
        Err(_) => Err(()),
    }
}

fn round_trip(fields: &Fields) {
    let mut enc = QpackEncoder::new(4096);
    let mut dec = QpackDecoder::new(4096, 4);
    enc.peer_settings(4096, 4);
    let refs: Vec<(&[u8], &[u8])> = fields.iter().map(|(n, v)| (&n[..], &v[..])).collect();
    for stream in [0u64, 4] {
        let mut block = Vec::new();
        enc.encode(stream, &refs, &mut block);
        let mut ins = Vec::new();
        enc.drain_output(&mut ins);
        dec.feed_encoder(&ins).expect("our own encoder stream");
        assert_eq!(decode(&mut dec, stream, &block), Ok(Some(fields.clone())));
        let mut acks = Vec::new();
        dec.drain_output(&mut acks);
        enc.feed_decoder(&acks).expect("our own decoder stream");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&seed, rest)) = data.split_first() else {
        return;
    };
    let recs = common::records(rest);
    let Some((stream, sections)) = recs.split_first() else {
        return;
    };
    let mut d = QpackDecoder::new(4096, 4);
    let mut whole = QpackDecoder::new(4096, 4);
    let ok = whole.feed_encoder(stream).is_ok();
    let mut pieces_ok = true;
    for p in common::pieces(seed, stream) {
        if d.feed_encoder(p).is_err() {
            pieces_ok = false;
            break;
        }
    }
    assert_eq!(pieces_ok, ok, "pieces changed the encoder stream's verdict");
    if !ok {
        return;
    }
    assert_eq!(d.insert_count(), whole.insert_count());
    assert_eq!(d.table().size(), whole.table().size());
    for (i, block) in sections.iter().enumerate() {
        let stream = 4 * i as u64;
        let first = decode(&mut d, stream, block);
        assert!(d.blocked_streams() <= 4);
        if let Ok(Some(fields)) = first {
            assert_eq!(decode(&mut d, stream, block), Ok(Some(fields.clone())));
            round_trip(&fields);
        }
    }
});
