//! HPACK (RFC 7541) header blocks from a peer, through the one `hpack::Decoder` both ways it
//! is used: `decode` (the load generator's h2 client: lengths and `:status`, with its block
//! memo) and `decode_fields` (the frame view: whole fields).
//!
//! Input: one byte choosing the table limit we advertised, then header blocks of one
//! connection, each a 2-byte big-endian length and its bytes (common::records).
//! Checks, block by block until the first error (after which a connection is dead):
//! - neither use panics;
//! - two decoders fed the same blocks, one through each use, agree: both fail or both
//!   succeed with the same field count, uncompressed size (name + value lengths), `:status`
//!   and dynamic table size — so the block memo of `decode` means exactly what a full walk
//!   means;
//! - the request encoder (`hpack::Encoder`) re-encodes every decoded field list so that a
//!   fresh decoder following it reads back the same fields.
#![no_main]
#[path = "../common.rs"]
mod common;

use hxlab_wire::hpack::{Decoder, Encoder};
use libfuzzer_sys::fuzz_target;

/// A field list, owned.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// The first `:status` field whose value is three digits (not `000`), as `Decoder::decode`
/// reports.
fn status(fields: &Fields) -> Option<u16> {
    fields.iter().find_map(|(n, v)| match (n.as_slice(), v.as_slice()) {
        (b":status", [a, b, c]) if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
            let s = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
            (s != 0).then_some(s)
        }
        _ => None,
    })
}

/// Every field of `block` through `decode_fields`.
fn fields(d: &mut Decoder, block: &[u8]) -> Result<Fields, hxlab_wire::hpack::HpackError> {
    let mut out = Vec::new();
    d.decode_fields(block, |f| out.push((f.name.to_vec(), f.value.to_vec())))?;
    Ok(out)
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
    let mut fast = Decoder::new(limit);
    let mut full = Decoder::new(limit);
    let mut enc = Encoder::new();
    let mut mirror = Decoder::new(4096);
    for block in common::records(rest) {
        let a = fast.decode(block);
        let b = fields(&mut full, block);
        match (&a, &b) {
            (Ok(info), Ok(fields_got)) => {
                assert_eq!(info.fields as usize, fields_got.len(), "field count");
                let sum: u64 = fields_got.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum();
                assert_eq!(info.uncompressed, sum, "uncompressed size");
                assert_eq!(info.status, status(fields_got), ":status");
                assert_eq!(fast.table_size(), full.table_size(), "table size");
                // Our encoder, read back by a decoder that follows it.
                let mut out = Vec::new();
                enc.encode(
                    fields_got.iter().map(|(n, v)| (n.as_slice(), v.as_slice())),
                    &mut out,
                );
                let back = fields(&mut mirror, &out).expect("our own encoding must decode");
                assert_eq!(&back, fields_got, "encoder round trip");
            }
            (Err(_), Err(_)) => break,
            _ => panic!("decode and decode_fields disagree: {a:?}, {b:?}"),
        }
    }
});
