//! QPACK (RFC 9204), one implementation for the origin's HTTP/3 server, the load client and
//! the frame view:
//! - [`table`]: the dynamic table;
//! - [`instruction`]: the encoder- and decoder-stream instructions, read at any split;
//! - [`QpackEncoder`] and [`QpackDecoder`]: one per connection and direction, with the
//!   dynamic table, acknowledgements and the blocked-streams budget;
//! - [`FieldDecoder`]: the static-only field-section walk both build on (also the frame
//!   view's, through [`display`]), and [`encode_field_section`], the static-only encoder
//!   (what a capacity of 0 encodes).
//!
//! [`Decoder`] keeps what the load client's recorder needs from a static-only section:
//! `:status` and the decoded size (name + value length of every field, as h2load counts it).

use crate::hpack::{huffman_encode, status_of};
use crate::prefix::write as write_int;
pub use crate::qpack_table::STATIC_TABLE;
use thiserror::Error;

pub mod decoder;
pub mod display;
#[cfg(test)]
mod dynamic_tests;
pub mod encoder;
mod fields;
pub mod instruction;
pub mod mirror;
pub mod table;
pub use decoder::{Decoded, DecoderStats, QpackDecoder};
pub use encoder::{EncoderStats, QpackEncoder};
pub use fields::{decode_fields, DynamicRef, FieldDecoder, FieldLine};

/// A field section that cannot be decoded (a connection error of type
/// QPACK_DECOMPRESSION_FAILED).
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("QPACK: {0}")]
pub struct QpackError(pub &'static str);

/// What a decoded field section told us.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FieldSection {
    /// The first valid `:status` (three digits), if any.
    pub status: Option<u16>,
    /// Sum of name + value lengths of every field.
    pub uncompressed: u64,
    /// Number of field lines.
    pub fields: u32,
}

impl FieldSection {
    /// Counts one field line.
    #[inline]
    pub fn add(&mut self, name: &[u8], value: &[u8]) {
        self.fields += 1;
        self.uncompressed += (name.len() + value.len()) as u64;
        if self.status.is_none() && name == b":status" {
            self.status = status_of(value);
        }
    }
}

/// Reads a prefixed integer (see [`crate::prefix`]) with an `n`-bit prefix.
#[inline]
fn read_int(buf: &[u8], pos: &mut usize, n: u32) -> Result<u64, QpackError> {
    crate::prefix::read(buf, pos, n).map_err(|e| match e {
        crate::prefix::PrefixError::Truncated => QpackError("truncated integer"),
        crate::prefix::PrefixError::Overflow => QpackError("integer too large"),
    })
}

/// Writes a string literal whose Huffman flag is `hbit` and whose length has an `n`-bit
/// prefix, Huffman-coded when that is shorter.
pub(crate) fn write_str(out: &mut Vec<u8>, first: u8, hbit: u8, n: u32, s: &[u8]) {
    let mut huff = Vec::with_capacity(s.len());
    huffman_encode(s, &mut huff);
    if huff.len() < s.len() {
        write_int(out, first | hbit, n, huff.len() as u64);
        out.extend_from_slice(&huff);
    } else {
        write_int(out, first, n, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// Encodes a request field section (prefix: Required Insert Count 0, Base 0) onto `out`.
/// Names must be lowercase (as `http::HeaderName`s are).
pub fn encode_field_section<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut Vec<u8>,
) {
    out.extend_from_slice(&[0, 0]);
    for (name, value) in fields {
        let exact = STATIC_TABLE
            .iter()
            .position(|(n, v)| n.as_bytes() == name && v.as_bytes() == value);
        if let Some(i) = exact {
            // Indexed field line, static: 11xxxxxx.
            write_int(out, 0xc0, 6, i as u64);
            continue;
        }
        match STATIC_TABLE.iter().position(|(n, _)| n.as_bytes() == name) {
            Some(i) => {
                // Literal with static name reference, not "never indexed": 0101xxxx.
                write_int(out, 0x50, 4, i as u64);
            }
            None => {
                // Literal with literal name: 0010Hxxx.
                write_str(out, 0x20, 0x08, 3, name);
            }
        }
        write_str(out, 0x00, 0x80, 7, value);
    }
}

/// The response side: what field sections say about a response, through one
/// [`FieldDecoder`] (and so its memo of Huffman strings: a server sends the same
/// content-type, server and date literals in every response). [`Decoder::decode_memo`] also
/// remembers the last whole field section.
#[derive(Debug)]
pub struct Decoder {
    fields: FieldDecoder,
    /// The last field section [`Decoder::decode_memo`] decoded, and what it told.
    last_block: Vec<u8>,
    last: Option<(u64, FieldSection)>,
}

/// Largest field section [`Decoder::decode_memo`] remembers.
const BLOCK_MEMO_MAX: usize = 512;

impl Default for Decoder {
    fn default() -> Self {
        Decoder::new()
    }
}

fn static_entry(i: u64) -> Result<(&'static str, &'static str), QpackError> {
    STATIC_TABLE
        .get(i as usize)
        .copied()
        .ok_or(QpackError("static table index out of range"))
}

impl Decoder {
    /// A decoder with an empty memo.
    pub fn new() -> Decoder {
        Decoder {
            fields: FieldDecoder::new(),
            last_block: Vec::new(),
            last: None,
        }
    }

    /// [`Decoder::decode`], answered from memory when `block` is the field section decoded
    /// last (with the same `max_size`): with the static table only, decoding depends on
    /// nothing else, and a server answering the same URL sends the same head every time.
    pub fn decode_memo(&mut self, block: &[u8], max_size: u64) -> Result<FieldSection, QpackError> {
        if let Some((max, f)) = self.last {
            if max == max_size && block == self.last_block.as_slice() {
                return Ok(f);
            }
        }
        let f = self.decode(block, max_size)?;
        if block.len() <= BLOCK_MEMO_MAX {
            self.last_block.clear();
            self.last_block.extend_from_slice(block);
            self.last = Some((max_size, f));
        }
        Ok(f)
    }

    /// Decodes one field section (a HEADERS frame's payload). `max_size` bounds the field
    /// section size as RFC 9114 §4.2.2 counts it (name + value + 32 per field).
    pub fn decode(&mut self, block: &[u8], max_size: u64) -> Result<FieldSection, QpackError> {
        let mut info = FieldSection::default();
        self.fields.decode(block, max_size, |name, value| {
            info.add(name, value);
            Ok(())
        })?;
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn rfc9204_b1_literal_with_static_name_reference() {
        // Appendix B.1: ":path: /index.html" as a literal with static name reference 1.
        let block = hex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
        let mut d = Decoder::new();
        let f = d.decode(&block, 1 << 20).unwrap();
        assert_eq!(f.fields, 1);
        assert_eq!(f.uncompressed, (":path".len() + "/index.html".len()) as u64);
        assert_eq!(f.status, None);
    }

    #[test]
    fn static_indexed_status_and_literal_fields() {
        // :status 200 (index 25), content-type text/plain (53), a literal-name field.
        let mut block = vec![0x00, 0x00, 0xc0 | 25, 0xc0 | 53];
        block.extend_from_slice(&[0x20 | 3, b'f', b'o', b'o', 3, b'b', b'a', b'r']);
        let f = Decoder::new().decode(&block, 1 << 20).unwrap();
        assert_eq!(f.status, Some(200));
        assert_eq!(f.fields, 3);
        assert_eq!(f.uncompressed, (7 + 3 + 12 + 10 + 6) as u64);
    }

    #[test]
    fn decode_memo_answers_a_repeated_block_as_decode() {
        let mut a = vec![0x00, 0x00, 0xc0 | 25, 0xc0 | 53];
        a.extend_from_slice(&[0x20 | 3, b'f', b'o', b'o', 3, b'b', b'a', b'r']);
        let b = vec![0x00, 0x00, 0xc0 | 27];
        let mut d = Decoder::new();
        for block in [&a, &a, &b, &a, &a] {
            let want = Decoder::new().decode(block, 1 << 20).unwrap();
            assert_eq!(d.decode_memo(block, 1 << 20).unwrap(), want);
        }
        // The size limit is part of the memo: a smaller one is checked again.
        assert!(d.decode_memo(&a, 8).is_err());
        assert!(d.decode_memo(&[0x00, 0x00, 0x80], 1 << 20).is_err());
        assert_eq!(d.decode_memo(&a, 1 << 20).unwrap().status, Some(200));
    }

    #[test]
    fn huffman_literals_and_status_by_name_reference() {
        // :status by static name reference (index 24, value 103) with a Huffman value "418";
        // then a Huffman name and value.
        let mut block = vec![0x00, 0x00];
        let mut v = Vec::new();
        huffman_encode(b"418", &mut v);
        block.push(0x50 | 0x0f);
        block.push(24 - 15);
        block.push(0x80 | v.len() as u8);
        block.extend_from_slice(&v);
        let (mut n, mut val) = (Vec::new(), Vec::new());
        huffman_encode(b"x-served-by", &mut n);
        huffman_encode(b"hxlab-serve-1234", &mut val);
        block.push(0x28 | 0x07);
        block.push(n.len() as u8 - 7);
        block.extend_from_slice(&n);
        block.push(0x80 | val.len() as u8);
        block.extend_from_slice(&val);
        let mut d = Decoder::new();
        for _ in 0..3 {
            // The second and third decode hit the memo and must agree.
            let f = d.decode(&block, 1 << 20).unwrap();
            assert_eq!(f.status, Some(418));
            assert_eq!(f.uncompressed, (7 + 3 + 11 + 16) as u64);
        }
    }

    #[test]
    fn encoder_round_trips_through_the_decoder() {
        let fields = crate::fixtures::REQUEST;
        let mut out = Vec::new();
        encode_field_section(fields, &mut out);
        // :method GET and :scheme https are one byte each.
        assert_eq!(&out[..4], &[0, 0, 0xc0 | 17, 0xc0 | 23]);
        let f = Decoder::new().decode(&out, 1 << 20).unwrap();
        let total: usize = fields.iter().map(|(n, v)| n.len() + v.len()).sum();
        assert_eq!(f.uncompressed, total as u64);
        assert_eq!(f.fields, 6);
        // A long value needs a multi-byte length.
        let long = vec![b'~'; 300];
        let mut out = Vec::new();
        encode_field_section([(&b"x-long"[..], &long[..])], &mut out);
        let f = Decoder::new().decode(&out, 1 << 20).unwrap();
        assert_eq!(f.uncompressed, 306);
    }

    #[test]
    fn malformed_sections_are_errors_not_panics() {
        let mut d = Decoder::new();
        let bad: &[&[u8]] = &[
            &[],
            &[0x00],
            // Required Insert Count 1.
            &[0x02, 0x00, 0x80],
            // Dynamic indexed, post-base indexed, dynamic name reference, post-base name.
            &[0x00, 0x00, 0x80],
            &[0x00, 0x00, 0x10],
            &[0x00, 0x00, 0x40, 0x00],
            &[0x00, 0x00, 0x00, 0x00],
            // Static index 99 is past the table.
            &[0x00, 0x00, 0xff, 0x24],
            // Truncated string, overlong integer.
            &[0x00, 0x00, 0x51, 0x05, b'a'],
            &[
                0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ],
            // Bad Huffman: EOS-length ones.
            &[0x00, 0x00, 0x51, 0x84, 0xff, 0xff, 0xff, 0xff],
        ];
        for b in bad {
            assert!(d.decode(b, 1 << 20).is_err(), "{b:02x?}");
        }
        // Size limit: 100 fields of ":path /" (6 + 32 each) against 1000.
        let mut block = vec![0, 0];
        block.extend(std::iter::repeat_n(0xc1u8, 100));
        assert!(d.decode(&block, 1000).is_err());
        assert!(d.decode(&block, 100 * 38).is_ok());
    }
}
