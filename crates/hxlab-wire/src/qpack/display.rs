//! QPACK (RFC 9204) decoding for display: whole field sections as text (through the one
//! field-section decoder, [`super::FieldDecoder::decode_lines`]) and encoder/decoder stream
//! instructions. A section read alone cannot resolve dynamic-table references (the table lives
//! in the connection's decoder); the field then says which entry it named instead of guessing.

use super::instruction::{
    read_decoder_instruction, read_encoder_instruction, DecoderInstruction, EncoderInstruction,
};
use super::{DynamicRef, FieldDecoder, FieldLine, QpackError};
use crate::hpack::HuffMemo;

/// Why a field section or instruction could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DisplayError {
    /// The bytes ended in the middle of a representation.
    #[error("truncated field section")]
    Truncated,
    /// An integer did not fit in 64 bits.
    #[error("integer overflow")]
    Overflow,
    /// A Huffman string that does not decode.
    #[error("invalid Huffman string")]
    Huffman,
}

/// A field section decoded for showing (the load client's [`super::FieldSection`] keeps only
/// lengths and `:status`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldList {
    /// Required Insert Count (0 when only the static table is used).
    pub required_insert_count: u64,
    /// Decoded fields, in order. Dynamic references appear as `<dynamic #i>`.
    pub fields: Vec<(String, String)>,
    /// How many field lines referenced the dynamic table.
    pub dynamic_refs: usize,
}

/// Decodes one field section (the payload of an HTTP/3 HEADERS or PUSH_PROMISE frame).
pub fn decode_field_section(buf: &[u8]) -> Result<FieldList, QpackError> {
    let mut out = FieldList::default();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    out.required_insert_count = FieldDecoder::new().decode_lines(buf, u64::MAX, |line| {
        let (name, value) = match line {
            FieldLine::Field { name, value } => (text(name), text(value)),
            FieldLine::Dynamic { kind, index, value } => {
                out.dynamic_refs += 1;
                let what = match kind {
                    DynamicRef::Indexed => "dynamic",
                    DynamicRef::Name => "dynamic name",
                    DynamicRef::PostBase => "dynamic post-base",
                    DynamicRef::PostBaseName => "dynamic post-base name",
                };
                (
                    format!("<{what} #{index}>"),
                    value.map(text).unwrap_or_default(),
                )
            }
        };
        out.fields.push((name, value));
        Ok(())
    })?;
    Ok(out)
}

/// Decodes one encoder-stream instruction (through the one reader,
/// [`super::instruction`]); `Ok(None)` when more bytes are needed.
pub fn encoder_instruction(buf: &[u8]) -> Result<Option<(usize, String)>, DisplayError> {
    let mut scratch = Vec::new();
    let read = read_encoder_instruction(buf, &mut scratch, &mut HuffMemo::default())
        .map_err(display_error)?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(read.map(|(n, ins)| {
        let s = match ins {
            EncoderInstruction::InsertNameRef {
                is_static,
                index,
                value,
            } => format!(
                "Insert With Name Reference ({} #{index}) value={:?}",
                if is_static { "static" } else { "dynamic" },
                text(value)
            ),
            EncoderInstruction::InsertLiteral { name, value } => {
                format!("Insert With Literal Name {}: {}", text(name), text(value))
            }
            EncoderInstruction::SetCapacity(c) => format!("Set Dynamic Table Capacity {c}"),
            EncoderInstruction::Duplicate(i) => format!("Duplicate #{i}"),
        };
        (n, s)
    }))
}

/// Decodes one decoder-stream instruction (through [`super::instruction`]); `Ok(None)`
/// when more bytes are needed.
pub fn decoder_instruction(buf: &[u8]) -> Result<Option<(usize, String)>, DisplayError> {
    let read = read_decoder_instruction(buf).map_err(display_error)?;
    Ok(read.map(|(n, ins)| {
        let s = match ins {
            DecoderInstruction::SectionAck(s) => format!("Section Acknowledgment (stream {s})"),
            DecoderInstruction::StreamCancel(s) => format!("Stream Cancellation (stream {s})"),
            DecoderInstruction::InsertCountIncrement(n) => format!("Insert Count Increment {n}"),
        };
        (n, s)
    }))
}

/// An instruction reader's error as the display names it.
fn display_error(e: QpackError) -> DisplayError {
    match e.0 {
        "integer too large" => DisplayError::Overflow,
        "truncated string" | "truncated integer" => DisplayError::Truncated,
        _ => DisplayError::Huffman,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_and_literal_fields() {
        // RIC=0, base=0; indexed static 17 (:method GET), 23 (:scheme https),
        // literal with static name ref 1 (:path) value "/x", literal name "x-a" value "b".
        let buf = [
            0x00, 0x00, 0xd1, 0xd7, 0x51, 0x02, b'/', b'x', 0x23, b'x', b'-', b'a', 0x01, b'b',
        ];
        let fs = decode_field_section(&buf).expect("decode");
        assert_eq!(
            fs.fields,
            vec![
                (":method".into(), "GET".into()),
                (":scheme".into(), "https".into()),
                (":path".into(), "/x".into()),
                ("x-a".into(), "b".into())
            ]
        );
        assert_eq!(fs.dynamic_refs, 0);
    }

    #[test]
    fn dynamic_references_are_shown_not_refused() {
        // RIC 3; dynamic indexed #1, post-base indexed #0, dynamic name #1 with value "v",
        // post-base name #2 with value "w", then a static field.
        let buf = [
            0x03, 0x00, 0x81, 0x10, 0x41, 0x01, b'v', 0x02, 0x01, b'w', 0xd1,
        ];
        let fs = decode_field_section(&buf).expect("decode");
        assert_eq!(fs.required_insert_count, 3);
        assert_eq!(fs.dynamic_refs, 4);
        let names: Vec<&str> = fs.fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "<dynamic #1>",
                "<dynamic post-base #0>",
                "<dynamic name #1>",
                "<dynamic post-base name #2>",
                ":method"
            ]
        );
        assert_eq!(
            (fs.fields[2].1.as_str(), fs.fields[3].1.as_str()),
            ("v", "w")
        );
    }

    #[test]
    fn huffman_value_and_truncation() {
        // "www.example.com" Huffman-coded (RFC 7541 C.4.1) as the :authority value.
        let mut buf = vec![0x00, 0x00, 0x50, 0x8c];
        buf.extend([
            0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab, 0x90, 0xf4, 0xff,
        ]);
        let fs = decode_field_section(&buf).expect("decode");
        assert_eq!(
            fs.fields[0],
            (":authority".into(), "www.example.com".into())
        );
        assert_eq!(
            decode_field_section(&buf[..8]),
            Err(QpackError("truncated string"))
        );
        assert_eq!(
            decode_field_section(&[0, 0, 0xff, 0x7f]),
            Err(QpackError("static table index out of range"))
        );
    }

    #[test]
    fn instruction_strings_go_through_the_one_reader() {
        // Insert With Literal Name, Huffman name "custom-key" (RFC 7541 C.4.3), plain value "v".
        let mut buf = vec![0x40 | 0x20 | 0x08];
        buf.extend([0x25, 0xa8, 0x49, 0xe9, 0x5b, 0xa9, 0x7d, 0x7f]);
        buf.extend([0x01, b'v']);
        assert_eq!(
            encoder_instruction(&buf).expect("ok"),
            Some((buf.len(), "Insert With Literal Name custom-key: v".into()))
        );
        // Cut anywhere: more bytes needed, not an error.
        for cut in 1..buf.len() {
            assert_eq!(
                encoder_instruction(&buf[..cut]).expect("ok"),
                None,
                "cut {cut}"
            );
        }
        // A Huffman string padded with a zero bit does not decode.
        assert_eq!(
            encoder_instruction(&[0x60 | 0x01, 0x00, 0x01, b'v']),
            Err(DisplayError::Huffman)
        );
    }

    #[test]
    fn instructions() {
        assert_eq!(
            encoder_instruction(&[0x3f, 0xe1, 0x1f]).expect("ok"),
            Some((3, "Set Dynamic Table Capacity 4096".into()))
        );
        assert_eq!(encoder_instruction(&[0x3f]).expect("ok"), None);
        assert_eq!(
            decoder_instruction(&[0x84]).expect("ok"),
            Some((1, "Section Acknowledgment (stream 4)".into()))
        );
    }
}
