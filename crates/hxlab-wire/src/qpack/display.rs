//! QPACK (RFC 9204) decoding for display: whole field sections (names and values, static
//! table, literals, Huffman strings) and encoder/decoder stream instructions as text. The
//! clients advertise a zero-capacity dynamic table, so a compliant peer never references the
//! dynamic table; if one does anyway, the field says so instead of guessing.

use super::STATIC_TABLE;
use crate::hpack::huffman_decode;

/// Why a field section or instruction could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DisplayError {
    /// The bytes ended in the middle of a representation.
    #[error("truncated field section")]
    Truncated,
    /// An integer did not fit in 64 bits.
    #[error("integer overflow")]
    Overflow,
    /// A static index beyond the table.
    #[error("static table index {0} out of range")]
    BadStaticIndex(u64),
    /// A Huffman string that does not decode.
    #[error("invalid Huffman string")]
    Huffman,
}

/// A decoded field section.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSection {
    /// Required Insert Count (0 when only the static table is used).
    pub required_insert_count: u64,
    /// Decoded fields, in order. Dynamic references appear as `<dynamic #i>`.
    pub fields: Vec<(String, String)>,
    /// How many field lines referenced the dynamic table.
    pub dynamic_refs: usize,
}

/// Decodes a prefixed integer (see [`crate::prefix`]) with an `n`-bit prefix from
/// `buf[*pos..]`.
pub fn prefix_int(buf: &[u8], pos: &mut usize, n: u8) -> Result<u64, DisplayError> {
    crate::prefix::read(buf, pos, u32::from(n)).map_err(|e| match e {
        crate::prefix::PrefixError::Truncated => DisplayError::Truncated,
        crate::prefix::PrefixError::Overflow => DisplayError::Overflow,
    })
}

/// Decodes a string literal whose Huffman flag is bit `n` of the first byte and whose length
/// uses the `n`-bit prefix below it.
pub fn string(buf: &[u8], pos: &mut usize, n: u8) -> Result<String, DisplayError> {
    let first = *buf.get(*pos).ok_or(DisplayError::Truncated)?;
    let huffman = first & (1 << n) != 0;
    let len = prefix_int(buf, pos, n)? as usize;
    let end = pos.checked_add(len).ok_or(DisplayError::Truncated)?;
    let raw = buf.get(*pos..end).ok_or(DisplayError::Truncated)?;
    *pos = end;
    let bytes = if huffman {
        let mut out = Vec::with_capacity(raw.len() * 8 / 5);
        huffman_decode(raw, |b| out.push(b)).map_err(|_| DisplayError::Huffman)?;
        out
    } else {
        raw.to_vec()
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn static_entry(i: u64) -> Result<(&'static str, &'static str), DisplayError> {
    STATIC_TABLE
        .get(i as usize)
        .copied()
        .ok_or(DisplayError::BadStaticIndex(i))
}

/// Decodes one field section (the payload of an HTTP/3 HEADERS or PUSH_PROMISE frame).
pub fn decode_field_section(buf: &[u8]) -> Result<FieldSection, DisplayError> {
    let mut pos = 0;
    let mut out = FieldSection {
        required_insert_count: prefix_int(buf, &mut pos, 8)?,
        ..Default::default()
    };
    // Sign bit + Delta Base: only meaningful with the dynamic table.
    prefix_int(buf, &mut pos, 7)?;
    while pos < buf.len() {
        let b = buf[pos];
        if b & 0x80 != 0 {
            // Indexed field line.
            let is_static = b & 0x40 != 0;
            let i = prefix_int(buf, &mut pos, 6)?;
            if is_static {
                let (n, v) = static_entry(i)?;
                out.fields.push((n.into(), v.into()));
            } else {
                out.dynamic_refs += 1;
                out.fields.push((format!("<dynamic #{i}>"), String::new()));
            }
        } else if b & 0x40 != 0 {
            // Literal with name reference.
            let is_static = b & 0x10 != 0;
            let i = prefix_int(buf, &mut pos, 4)?;
            let value = string(buf, &mut pos, 7)?;
            if is_static {
                out.fields.push((static_entry(i)?.0.into(), value));
            } else {
                out.dynamic_refs += 1;
                out.fields.push((format!("<dynamic name #{i}>"), value));
            }
        } else if b & 0x20 != 0 {
            // Literal with literal name.
            let name = string(buf, &mut pos, 3)?;
            let value = string(buf, &mut pos, 7)?;
            out.fields.push((name, value));
        } else if b & 0x10 != 0 {
            // Indexed field line with post-base index.
            let i = prefix_int(buf, &mut pos, 4)?;
            out.dynamic_refs += 1;
            out.fields
                .push((format!("<dynamic post-base #{i}>"), String::new()));
        } else {
            // Literal with post-base name reference.
            let i = prefix_int(buf, &mut pos, 3)?;
            let value = string(buf, &mut pos, 7)?;
            out.dynamic_refs += 1;
            out.fields
                .push((format!("<dynamic post-base name #{i}>"), value));
        }
    }
    Ok(out)
}

/// Decodes one encoder-stream instruction; `Ok(None)` when more bytes are needed.
pub fn encoder_instruction(buf: &[u8]) -> Result<Option<(usize, String)>, DisplayError> {
    let Some(&b) = buf.first() else {
        return Ok(None);
    };
    let mut pos = 0;
    let r = (|| {
        if b & 0x80 != 0 {
            let is_static = b & 0x40 != 0;
            let i = prefix_int(buf, &mut pos, 6)?;
            let v = string(buf, &mut pos, 7)?;
            Ok(format!(
                "Insert With Name Reference ({} #{i}) value={v:?}",
                if is_static { "static" } else { "dynamic" }
            ))
        } else if b & 0x40 != 0 {
            let n = string(buf, &mut pos, 5)?;
            let v = string(buf, &mut pos, 7)?;
            Ok(format!("Insert With Literal Name {n}: {v}"))
        } else if b & 0x20 != 0 {
            Ok(format!(
                "Set Dynamic Table Capacity {}",
                prefix_int(buf, &mut pos, 5)?
            ))
        } else {
            Ok(format!("Duplicate #{}", prefix_int(buf, &mut pos, 5)?))
        }
    })();
    match r {
        Ok(s) => Ok(Some((pos, s))),
        Err(DisplayError::Truncated) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Decodes one decoder-stream instruction; `Ok(None)` when more bytes are needed.
pub fn decoder_instruction(buf: &[u8]) -> Result<Option<(usize, String)>, DisplayError> {
    let Some(&b) = buf.first() else {
        return Ok(None);
    };
    let mut pos = 0;
    let r = if b & 0x80 != 0 {
        prefix_int(buf, &mut pos, 7).map(|s| format!("Section Acknowledgment (stream {s})"))
    } else if b & 0x40 != 0 {
        prefix_int(buf, &mut pos, 6).map(|s| format!("Stream Cancellation (stream {s})"))
    } else {
        prefix_int(buf, &mut pos, 6).map(|n| format!("Insert Count Increment {n}"))
    };
    match r {
        Ok(s) => Ok(Some((pos, s))),
        Err(DisplayError::Truncated) => Ok(None),
        Err(e) => Err(e),
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
            Err(DisplayError::Truncated)
        );
        assert_eq!(
            decode_field_section(&[0, 0, 0xff, 0x7f]),
            Err(DisplayError::BadStaticIndex(63 + 127))
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
