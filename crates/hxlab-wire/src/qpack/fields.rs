//! The one QPACK field-section decoder (static table only): every field line handed to a
//! callback as name and value bytes. The origin's HTTP/3 server uses it for request heads,
//! the load client (through [`super::Decoder`], which keeps lengths and `:status`) for
//! response heads, and the frame view (through [`super::display`]) with
//! [`FieldDecoder::decode_lines`], which also hands over the lines that reference the dynamic
//! table instead of refusing them. Peers are told a dynamic table capacity of 0 and no
//! blocked streams, so a compliant one references only the static table.
//!
//! Huffman-coded strings are decoded into one scratch buffer a [`FieldDecoder`] keeps across
//! field sections, through a memo of recently seen encoded strings (a peer sends the same
//! authority, user-agent, server and content-type values in every head: a hit is a compare
//! and a copy instead of a bit-by-bit decode), so decoding a head allocates nothing once the
//! scratch has grown.

use super::{read_int, static_entry, QpackError};
use crate::hpack::{read_string, HuffMemo, Loc};

/// Reads a string literal (Huffman flag `hbit`, `n`-bit length prefix) at `pos`: see
/// [`read_string`], the one string reader of HPACK and QPACK.
fn read_str(
    block: &[u8],
    pos: &mut usize,
    hbit: u8,
    n: u32,
    scratch: &mut Vec<u8>,
    memo: &mut HuffMemo,
) -> Result<Loc, QpackError> {
    read_string(block, pos, (hbit, n), scratch, memo).map_err(|e| QpackError(e.0))
}

/// Decodes field sections (static table only), keeping its scratch buffer and Huffman memo
/// from one section to the next.
#[derive(Debug, Default)]
pub struct FieldDecoder {
    pub(super) scratch: Vec<u8>,
    pub(super) memo: HuffMemo,
}

/// Which dynamic-table reference a field line made (RFC 9204 §4.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicRef {
    /// Indexed field line, dynamic table, relative index.
    Indexed,
    /// Literal with a dynamic name reference, relative index.
    Name,
    /// Indexed field line with a post-base index.
    PostBase,
    /// Literal with a post-base name reference.
    PostBaseName,
}

/// One field line of a section, as [`FieldDecoder::decode_lines`] hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldLine<'a> {
    /// A field whose name and value are known (static table or literals).
    Field {
        /// Name bytes.
        name: &'a [u8],
        /// Value bytes.
        value: &'a [u8],
    },
    /// A line that references the dynamic table (which this decoder does not keep): what it
    /// referenced, the index, and the literal value when the line carried one.
    Dynamic {
        /// The kind of reference.
        kind: DynamicRef,
        /// The index as sent (relative or post-base).
        index: u64,
        /// The literal value (name references only).
        value: Option<&'a [u8]>,
    },
}

impl FieldDecoder {
    /// A decoder with an empty memo.
    pub fn new() -> FieldDecoder {
        FieldDecoder::default()
    }

    /// Decodes the field section `block`, calling `field(name, value)` for every field line
    /// in order. `max_size` bounds the section's size as RFC 9114 §4.2.2 counts it (name +
    /// value + 32 per field); past it decoding stops with an error. A reference to the
    /// dynamic table is an error (QPACK_DECOMPRESSION_FAILED). A callback error stops
    /// decoding and is returned as is.
    pub fn decode(
        &mut self,
        block: &[u8],
        max_size: u64,
        mut field: impl FnMut(&[u8], &[u8]) -> Result<(), QpackError>,
    ) -> Result<(), QpackError> {
        let line = |l: FieldLine<'_>| match l {
            FieldLine::Field { name, value } => field(name, value),
            FieldLine::Dynamic { .. } => Err(QpackError("dynamic table reference")),
        };
        self.walk(block, max_size, true, line).map(|_| ())
    }

    /// Decodes the field section `block` for showing it: every line in order, dynamic-table
    /// references included (as [`FieldLine::Dynamic`], not resolved). Returns the section's
    /// Required Insert Count. `max_size` as in [`FieldDecoder::decode`] (a dynamic line counts
    /// its literal value only).
    pub fn decode_lines(
        &mut self,
        block: &[u8],
        max_size: u64,
        line: impl FnMut(FieldLine<'_>) -> Result<(), QpackError>,
    ) -> Result<u64, QpackError> {
        self.walk(block, max_size, false, line)
    }

    /// The walk over a section's lines; `static_only`: a Required Insert Count other than 0
    /// is refused before any line is read.
    fn walk(
        &mut self,
        block: &[u8],
        max_size: u64,
        static_only: bool,
        mut line: impl FnMut(FieldLine<'_>) -> Result<(), QpackError>,
    ) -> Result<u64, QpackError> {
        let (scratch, memo) = (&mut self.scratch, &mut self.memo);
        scratch.clear();
        let mut pos = 0usize;
        let ric = read_int(block, &mut pos, 8)?;
        if static_only && ric != 0 {
            return Err(QpackError(
                "dynamic table reference (Required Insert Count is not 0)",
            ));
        }
        // Sign bit and Delta Base: meaningless without dynamic references.
        read_int(block, &mut pos, 7)?;
        let mut size = 0u64;
        while pos < block.len() {
            let mark = scratch.len();
            let (name, value) = match read_line(block, &mut pos, scratch, memo)? {
                Line::Known(name, value) => (name, value),
                Line::Dynamic(kind, index, value) => {
                    let value = value.map(|v| v.get(block, scratch));
                    size += value.map_or(0, |v| v.len() as u64) + 32;
                    if size > max_size {
                        return Err(QpackError("field section larger than we accept"));
                    }
                    line(FieldLine::Dynamic { kind, index, value })?;
                    scratch.truncate(mark);
                    continue;
                }
            };
            let (name, value) = (name.get(block, scratch), value.get(block, scratch));
            size += (name.len() + value.len()) as u64 + 32;
            if size > max_size {
                return Err(QpackError("field section larger than we accept"));
            }
            line(FieldLine::Field { name, value })?;
            // Strings of this line are no longer needed: keep the scratch small.
            scratch.truncate(mark);
        }
        Ok(ric)
    }
}

/// One field line read: a known name and value, or a dynamic reference.
pub(super) enum Line {
    Known(Loc, Loc),
    Dynamic(DynamicRef, u64, Option<Loc>),
}

/// Reads the field line at `block[*pos]` (RFC 9204 §4.5), decoding its strings into
/// `scratch`.
#[inline]
pub(super) fn read_line(
    block: &[u8],
    pos: &mut usize,
    scratch: &mut Vec<u8>,
    memo: &mut HuffMemo,
) -> Result<Line, QpackError> {
    let b = block[*pos];
    Ok(if b & 0x80 != 0 {
        // Indexed field line: 1Txxxxxx, T = static.
        let i = read_int(block, pos, 6)?;
        if b & 0x40 == 0 {
            return Ok(Line::Dynamic(DynamicRef::Indexed, i, None));
        }
        let (n, v) = static_entry(i)?;
        Line::Known(Loc::Static(n), Loc::Static(v))
    } else if b & 0x40 != 0 {
        // Literal with name reference: 01NTxxxx.
        let i = read_int(block, pos, 4)?;
        let value = read_str(block, pos, 0x80, 7, scratch, memo)?;
        if b & 0x10 == 0 {
            return Ok(Line::Dynamic(DynamicRef::Name, i, Some(value)));
        }
        Line::Known(Loc::Static(static_entry(i)?.0), value)
    } else if b & 0x20 != 0 {
        // Literal with literal name: 001NHxxx.
        let n = read_str(block, pos, 0x08, 3, scratch, memo)?;
        Line::Known(n, read_str(block, pos, 0x80, 7, scratch, memo)?)
    } else if b & 0x10 != 0 {
        // Indexed field line with post-base index: 0001xxxx.
        Line::Dynamic(DynamicRef::PostBase, read_int(block, pos, 4)?, None)
    } else {
        // Literal with post-base name reference: 0000Nxxx.
        let i = read_int(block, pos, 3)?;
        let value = read_str(block, pos, 0x80, 7, scratch, memo)?;
        Line::Dynamic(DynamicRef::PostBaseName, i, Some(value))
    })
}

/// Decodes without a kept decoder (a fresh scratch and memo): see [`FieldDecoder::decode`].
pub fn decode_fields(
    block: &[u8],
    max_size: u64,
    field: impl FnMut(&[u8], &[u8]) -> Result<(), QpackError>,
) -> Result<(), QpackError> {
    FieldDecoder::new().decode(block, max_size, field)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qpack::encode_field_section;

    fn collect(block: &[u8], max: u64) -> Result<Vec<(String, String)>, QpackError> {
        let mut out = Vec::new();
        let mut d = FieldDecoder::new();
        // Twice through one decoder: the second pass decodes from the memo.
        d.decode(block, max, |_, _| Ok(()))?;
        d.decode(block, max, |n, v| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ));
            Ok(())
        })?;
        Ok(out)
    }

    #[test]
    fn round_trips_what_the_encoder_writes() {
        let mut fields = crate::fixtures::REQUEST.to_vec();
        fields.push((b"accept", b"*/*"));
        let mut block = Vec::new();
        encode_field_section(fields.iter().copied(), &mut block);
        let got = collect(&block, 1 << 20).unwrap();
        let want: Vec<(String, String)> = fields
            .iter()
            .map(|(n, v)| {
                (
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn rfc9204_b1_and_plain_literals() {
        // Appendix B.1: ":path: /index.html", literal with static name reference 1.
        let block = [
            0x00, 0x00, 0x51, 0x0b, b'/', b'i', b'n', b'd', b'e', b'x', b'.', b'h', b't', b'm',
            b'l',
        ];
        assert_eq!(
            collect(&block, 1 << 20).unwrap(),
            vec![(":path".to_string(), "/index.html".to_string())]
        );
    }

    #[test]
    fn refuses_dynamic_references_oversize_and_truncation() {
        assert!(collect(&[0x01, 0x00], 1 << 20).is_err(), "RIC != 0");
        assert!(
            collect(&[0x00, 0x00, 0x80 | 1], 1 << 20).is_err(),
            "dynamic index"
        );
        assert!(collect(&[0x00, 0x00, 0x10], 1 << 20).is_err(), "post-base");
        assert!(
            collect(&[0x00, 0x00, 0x51, 0x05, b'/'], 1 << 20).is_err(),
            "truncated"
        );
        // ":method GET" (static 17) is 7 + 3 + 32 = 42 bytes of field section.
        assert!(collect(&[0x00, 0x00, 0xc0 | 17], 42).is_ok());
        assert!(
            collect(&[0x00, 0x00, 0xc0 | 17], 41).is_err(),
            "over the limit"
        );
        assert!(
            collect(&[0x00, 0x00, 0xff, 40], 1 << 20).is_err(),
            "index 103 out of range"
        );
    }
}
