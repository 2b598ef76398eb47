//! HPACK (RFC 7541) header blocks from a peer, as the load generator's h2 client
//! (`hpack::Decoder`, lengths only, with its block memo) and the frame view
//! (`hpack::ListDecoder`, whole fields) decode them.
//!
//! Input: one byte choosing the table limit we advertised, then header blocks of one
//! connection, each a 2-byte big-endian length and its bytes (common::records).
//! Checks, block by block until the first error (after which a connection is dead):
//! - neither decoder panics;
//! - when both start from the same table size (limit <= 4096), they agree: both fail or both
//!   succeed with the same field count, uncompressed size (name + value lengths), `:status`
//!   and dynamic table size — so the length-only decoder and its memo of repeated blocks
//!   mean exactly what a full decode means;
//! - the request encoder (`hpack::Encoder`) re-encodes every decoded field list so that a
//!   fresh ListDecoder following it reads back the same fields.
#![no_main]
#[path = "../common.rs"]
mod common;

use hxlab_wire::hpack::{Decoder, Encoder, Field, ListDecoder};
use libfuzzer_sys::fuzz_target;

/// The first `:status` field whose value is three digits (not `000`), as `Decoder` reports.
fn status(fields: &[Field]) -> Option<u16> {
    fields.iter().find_map(|f| match (f.name.as_slice(), f.value.as_slice()) {
        (b":status", [a, b, c]) if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
            let s = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            (s != 0).then_some(s)
        }
        _ => None,
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let limit = match sel & 3 {
        0 => 4096,
        1 => 256,
        2 => 0,
        _ => 65_536,
    };
    let compare = limit <= 4096;
    let mut fast = Decoder::new(limit);
    let mut full = ListDecoder::new(limit);
    let mut enc = Encoder::new();
    let mut mirror = ListDecoder::new(4096);
    for block in common::records(rest) {
        let a = fast.decode(block);
        let b = full.decode(block);
        match (&a, &b) {
            (Ok(info), Ok(fields)) => {
                if compare {
                    assert_eq!(info.fields as usize, fields.len(), "field count");
                    let sum: u64 = fields
                        .iter()
                        .map(|f| (f.name.len() + f.value.len()) as u64)
                        .sum();
                    assert_eq!(info.uncompressed, sum, "uncompressed size");
                    assert_eq!(info.status, status(fields), ":status");
                    assert_eq!(fast.table_size(), full.table_size(), "table size");
                }
                // Our encoder, read back by a decoder that follows it.
                let mut out = Vec::new();
                enc.encode(
                    fields.iter().map(|f| (f.name.as_slice(), f.value.as_slice())),
                    &mut out,
                );
                let back = mirror.decode(&out).expect("our own encoding must decode");
                assert_eq!(back.len(), fields.len());
                for (x, y) in back.iter().zip(fields) {
                    assert_eq!((&x.name, &x.value), (&y.name, &y.value), "encoder round trip");
                }
            }
            (Err(_), Err(_)) => break,
            _ if !compare => break,
            _ => panic!("decoders disagree: length-only {a:?}, full {b:?}"),
        }
    }
});
