//! The instructions of the QPACK encoder and decoder streams (RFC 9204 §4.3, §4.4): typed,
//! read one at a time from whatever bytes of the stream have arrived (`Ok(None)`: the
//! instruction is not complete yet, wait for more), and written. The decoder, the encoder
//! and the frame view all read them here.

use super::{read_int, write_str, QpackError};
use crate::hpack::{read_string, HuffMemo};
use crate::prefix::write as write_int;

/// An encoder-stream instruction (RFC 9204 §4.3); strings are decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncoderInstruction<'a> {
    /// Set Dynamic Table Capacity.
    SetCapacity(u64),
    /// Insert with Name Reference: the name of static entry `index`, or of the dynamic
    /// entry at relative index `index` (relative to the insert count when it arrives).
    InsertNameRef {
        /// Static table (else dynamic, relative index).
        is_static: bool,
        /// The index as sent.
        index: u64,
        /// The value.
        value: &'a [u8],
    },
    /// Insert with Literal Name.
    InsertLiteral {
        /// The name.
        name: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Duplicate the entry at this relative index.
    Duplicate(u64),
}

/// A decoder-stream instruction (RFC 9204 §4.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecoderInstruction {
    /// Section Acknowledgment for this stream.
    SectionAck(u64),
    /// Stream Cancellation for this stream.
    StreamCancel(u64),
    /// Insert Count Increment.
    InsertCountIncrement(u64),
}

/// What has arrived of an instruction stream and is not a whole instruction yet. Whole
/// instructions are read where the bytes are; only the incomplete tail is kept.
#[derive(Debug, Default)]
pub(crate) struct Partial(Vec<u8>);

impl Partial {
    /// Hands `parse` the bytes to read (`data`, after what was kept), which returns how many
    /// it consumed (whole instructions); the rest is kept for the next call.
    pub(crate) fn feed(
        &mut self,
        data: &[u8],
        parse: impl FnOnce(&[u8]) -> Result<usize, QpackError>,
    ) -> Result<(), QpackError> {
        let joined;
        let buf: &[u8] = if self.0.is_empty() {
            data
        } else {
            self.0.extend_from_slice(data);
            joined = std::mem::take(&mut self.0);
            &joined
        };
        let used = parse(buf)?;
        self.0.clear();
        self.0.extend_from_slice(&buf[used..]);
        if self.0.is_empty() && self.0.capacity() > 256 {
            self.0 = Vec::new();
        }
        Ok(())
    }

    /// The bytes kept (less than one instruction).
    pub(crate) fn kept(&self) -> &[u8] {
        &self.0
    }

    /// Bytes of memory held.
    pub(crate) fn capacity(&self) -> usize {
        self.0.capacity()
    }
}

/// Skips a prefix integer; `Ok(false)` when the bytes end inside it.
fn skip_int(buf: &[u8], pos: &mut usize, n: u32) -> Result<bool, QpackError> {
    match crate::prefix::read(buf, pos, n) {
        Ok(_) => Ok(true),
        Err(crate::prefix::PrefixError::Truncated) => Ok(false),
        Err(crate::prefix::PrefixError::Overflow) => Err(QpackError("integer too large")),
    }
}

/// Skips a string literal with an `n`-bit length prefix; `Ok(false)` when incomplete.
fn skip_str(buf: &[u8], pos: &mut usize, n: u32) -> Result<bool, QpackError> {
    let at = *pos;
    match crate::prefix::read(buf, pos, n) {
        Ok(len) => {
            let end = (*pos as u64).saturating_add(len);
            *pos = usize::try_from(end).unwrap_or(usize::MAX);
            Ok(end <= buf.len() as u64)
        }
        Err(crate::prefix::PrefixError::Truncated) => {
            *pos = at;
            Ok(false)
        }
        Err(crate::prefix::PrefixError::Overflow) => Err(QpackError("integer too large")),
    }
}

/// The length of the encoder instruction at the start of `buf`, `None` when incomplete.
/// The string lengths it reads are what [`pending_string_len`] bounds.
fn encoder_len(buf: &[u8]) -> Result<Option<usize>, QpackError> {
    let Some(&b) = buf.first() else {
        return Ok(None);
    };
    let mut pos = 0;
    let done = if b & 0x80 != 0 {
        skip_int(buf, &mut pos, 6)? && skip_str(buf, &mut pos, 7)?
    } else if b & 0x40 != 0 {
        skip_str(buf, &mut pos, 5)? && skip_str(buf, &mut pos, 7)?
    } else {
        skip_int(buf, &mut pos, 5)?
    };
    Ok(done.then_some(pos))
}

/// How many string bytes the incomplete encoder instruction at the start of `buf` declares
/// so far (the lengths read, whatever has arrived of the strings): a decoder refuses an
/// instruction whose strings cannot fit its table before buffering them.
pub fn pending_string_len(buf: &[u8]) -> u64 {
    let Some(&b) = buf.first() else {
        return 0;
    };
    let mut pos = 0;
    let mut total = 0u64;
    let mut string = |pos: &mut usize, n: u32| -> bool {
        match crate::prefix::read(buf, pos, n) {
            Ok(len) => {
                total = total.saturating_add(len);
                *pos = pos.saturating_add(usize::try_from(len).unwrap_or(usize::MAX));
                *pos <= buf.len()
            }
            Err(_) => false,
        }
    };
    if b & 0x80 != 0 {
        if crate::prefix::read(buf, &mut pos, 6).is_ok() {
            string(&mut pos, 7);
        }
    } else if b & 0x40 != 0 && string(&mut pos, 5) {
        string(&mut pos, 7);
    }
    total
}

/// Reads the encoder instruction at the start of `buf`: its length and the instruction
/// (Huffman strings decoded onto `scratch`, which it clears first), or `None` when more
/// bytes are needed.
pub(crate) fn read_encoder_instruction<'a>(
    buf: &'a [u8],
    scratch: &'a mut Vec<u8>,
    memo: &mut HuffMemo,
) -> Result<Option<(usize, EncoderInstruction<'a>)>, QpackError> {
    let Some(len) = encoder_len(buf)? else {
        return Ok(None);
    };
    scratch.clear();
    let b = buf[0];
    let mut pos = 0;
    let mut str_at = |pos: &mut usize, hbit: u8, n: u32, scratch: &mut Vec<u8>| {
        read_string(buf, pos, (hbit, n), scratch, memo).map_err(|e| QpackError(e.0))
    };
    let ins = if b & 0x80 != 0 {
        let index = read_int(buf, &mut pos, 6)?;
        let v = str_at(&mut pos, 0x80, 7, scratch)?;
        let scratch: &'a Vec<u8> = scratch;
        EncoderInstruction::InsertNameRef {
            is_static: b & 0x40 != 0,
            index,
            value: v.get(buf, scratch),
        }
    } else if b & 0x40 != 0 {
        let n = str_at(&mut pos, 0x20, 5, scratch)?;
        let v = str_at(&mut pos, 0x80, 7, scratch)?;
        let scratch: &'a Vec<u8> = scratch;
        EncoderInstruction::InsertLiteral {
            name: n.get(buf, scratch),
            value: v.get(buf, scratch),
        }
    } else if b & 0x20 != 0 {
        EncoderInstruction::SetCapacity(read_int(buf, &mut pos, 5)?)
    } else {
        EncoderInstruction::Duplicate(read_int(buf, &mut pos, 5)?)
    };
    debug_assert_eq!(pos, len);
    Ok(Some((len, ins)))
}

/// Reads the decoder instruction at the start of `buf`: its length and the instruction, or
/// `None` when more bytes are needed.
pub fn read_decoder_instruction(
    buf: &[u8],
) -> Result<Option<(usize, DecoderInstruction)>, QpackError> {
    let Some(&b) = buf.first() else {
        return Ok(None);
    };
    let mut pos = 0;
    let (n, make): (u32, fn(u64) -> DecoderInstruction) = if b & 0x80 != 0 {
        (7, DecoderInstruction::SectionAck)
    } else if b & 0x40 != 0 {
        (6, DecoderInstruction::StreamCancel)
    } else {
        (6, DecoderInstruction::InsertCountIncrement)
    };
    match crate::prefix::read(buf, &mut pos, n) {
        Ok(v) => Ok(Some((pos, make(v)))),
        Err(crate::prefix::PrefixError::Truncated) => Ok(None),
        Err(crate::prefix::PrefixError::Overflow) => Err(QpackError("integer too large")),
    }
}

/// An instruction as qlog's QPACK events describe it (draft-ietf-quic-qlog-h3-events,
/// `QPACKInstruction`): its type and its numbers, strings by length only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstructionSummary {
    /// `set_dynamic_table_capacity`, `insert_with_name_reference`,
    /// `insert_without_name_reference`, `duplicate`, `section_acknowledgement`,
    /// `stream_cancellation` or `insert_count_increment`.
    pub instruction_type: &'static str,
    /// The capacity, index, stream id or increment the instruction carries.
    pub value: u64,
    /// Insert with name reference: whether the name is the static table's.
    pub is_static: Option<bool>,
    /// Inserts: the name's length (literal names) and the value's length, decoded.
    pub name_length: Option<u64>,
    /// Inserts: the value's length, decoded.
    pub value_length: Option<u64>,
    /// Insert with literal name: whether the name was sent Huffman-coded.
    pub huffman_name: Option<bool>,
    /// Inserts: whether the value was sent Huffman-coded.
    pub huffman_value: Option<bool>,
}

/// The Huffman bits of an encoder instruction's strings (name, value), read from its first
/// bytes (whole instructions only: `summarize_encoder_instruction` read it first).
fn huffman_bits(buf: &[u8]) -> (Option<bool>, Option<bool>) {
    let Some(&b) = buf.first() else {
        return (None, None);
    };
    let mut pos = 0;
    let value_bit = |pos: usize| buf.get(pos).map(|v| v & 0x80 != 0);
    if b & 0x80 != 0 {
        // Insert with name reference: the index (6-bit prefix), then the value.
        match read_int(buf, &mut pos, 6) {
            Ok(_) => (None, value_bit(pos)),
            Err(_) => (None, None),
        }
    } else if b & 0x40 != 0 {
        // Insert with literal name: H and the name's length (5-bit prefix), the name, then
        // the value.
        match read_int(buf, &mut pos, 5) {
            Ok(len) => {
                let at = usize::try_from(len).ok().and_then(|l| pos.checked_add(l));
                (Some(b & 0x20 != 0), at.and_then(value_bit))
            }
            Err(_) => (Some(b & 0x20 != 0), None),
        }
    } else {
        (None, None)
    }
}

/// The encoder instruction at the start of `buf` summarized for qlog (see
/// [`InstructionSummary`]), with its length; `None` when more bytes are needed.
pub fn summarize_encoder_instruction(
    buf: &[u8],
) -> Result<Option<(usize, InstructionSummary)>, QpackError> {
    let mut scratch = Vec::new();
    let read = read_encoder_instruction(buf, &mut scratch, &mut HuffMemo::default())?;
    Ok(read.map(|(n, ins)| {
        let (instruction_type, value, is_static, name, val) = match ins {
            EncoderInstruction::SetCapacity(c) => {
                ("set_dynamic_table_capacity", c, None, None, None)
            }
            EncoderInstruction::InsertNameRef {
                is_static,
                index,
                value,
            } => (
                "insert_with_name_reference",
                index,
                Some(is_static),
                None,
                Some(value.len() as u64),
            ),
            EncoderInstruction::InsertLiteral { name, value } => (
                "insert_without_name_reference",
                0,
                None,
                Some(name.len() as u64),
                Some(value.len() as u64),
            ),
            EncoderInstruction::Duplicate(i) => ("duplicate", i, None, None, None),
        };
        let (huffman_name, huffman_value) = huffman_bits(&buf[..n]);
        let summary = InstructionSummary {
            instruction_type,
            value,
            is_static,
            name_length: name,
            value_length: val,
            huffman_name,
            huffman_value,
        };
        (n, summary)
    }))
}

/// The decoder instruction at the start of `buf` summarized for qlog, with its length;
/// `None` when more bytes are needed.
pub fn summarize_decoder_instruction(
    buf: &[u8],
) -> Result<Option<(usize, InstructionSummary)>, QpackError> {
    Ok(read_decoder_instruction(buf)?.map(|(n, ins)| {
        let (instruction_type, value) = match ins {
            DecoderInstruction::SectionAck(s) => ("section_acknowledgement", s),
            DecoderInstruction::StreamCancel(s) => ("stream_cancellation", s),
            DecoderInstruction::InsertCountIncrement(i) => ("insert_count_increment", i),
        };
        let summary = InstructionSummary {
            instruction_type,
            value,
            is_static: None,
            name_length: None,
            value_length: None,
            huffman_name: None,
            huffman_value: None,
        };
        (n, summary)
    }))
}

/// Appends an encoder instruction.
pub fn write_encoder_instruction(out: &mut Vec<u8>, ins: &EncoderInstruction<'_>) {
    match *ins {
        EncoderInstruction::SetCapacity(c) => write_int(out, 0x20, 5, c),
        EncoderInstruction::InsertNameRef {
            is_static,
            index,
            value,
        } => {
            write_int(out, if is_static { 0xc0 } else { 0x80 }, 6, index);
            write_str(out, 0x00, 0x80, 7, value);
        }
        EncoderInstruction::InsertLiteral { name, value } => {
            write_str(out, 0x40, 0x20, 5, name);
            write_str(out, 0x00, 0x80, 7, value);
        }
        EncoderInstruction::Duplicate(i) => write_int(out, 0x00, 5, i),
    }
}

/// Appends a decoder instruction.
pub fn write_decoder_instruction(out: &mut Vec<u8>, ins: DecoderInstruction) {
    match ins {
        DecoderInstruction::SectionAck(s) => write_int(out, 0x80, 7, s),
        DecoderInstruction::StreamCancel(s) => write_int(out, 0x40, 6, s),
        DecoderInstruction::InsertCountIncrement(n) => write_int(out, 0x00, 6, n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(ins: EncoderInstruction<'_>) {
        let mut out = Vec::new();
        write_encoder_instruction(&mut out, &ins);
        let mut scratch = Vec::new();
        let mut memo = HuffMemo::default();
        // Every proper prefix is "more bytes needed", never an error.
        for cut in 0..out.len() {
            assert_eq!(
                read_encoder_instruction(&out[..cut], &mut scratch, &mut memo),
                Ok(None),
                "{ins:?} cut at {cut}"
            );
        }
        out.push(0xff);
        let got = read_encoder_instruction(&out, &mut scratch, &mut memo).unwrap();
        assert_eq!(got, Some((out.len() - 1, ins)));
    }

    #[test]
    fn encoder_instructions_round_trip_at_every_split() {
        round_trip(EncoderInstruction::SetCapacity(220));
        round_trip(EncoderInstruction::SetCapacity(4096));
        round_trip(EncoderInstruction::InsertNameRef {
            is_static: true,
            index: 0,
            value: b"www.example.com",
        });
        round_trip(EncoderInstruction::InsertNameRef {
            is_static: false,
            index: 70,
            value: &[b'~'; 200],
        });
        round_trip(EncoderInstruction::InsertLiteral {
            name: b"custom-key",
            value: b"custom-value",
        });
        round_trip(EncoderInstruction::InsertLiteral {
            name: &[b'{'; 40],
            value: b"",
        });
        round_trip(EncoderInstruction::Duplicate(0));
        round_trip(EncoderInstruction::Duplicate(1000));
    }

    #[test]
    fn decoder_instructions_round_trip_at_every_split() {
        for ins in [
            DecoderInstruction::SectionAck(4),
            DecoderInstruction::SectionAck(1 << 40),
            DecoderInstruction::StreamCancel(8),
            DecoderInstruction::InsertCountIncrement(2),
            DecoderInstruction::InsertCountIncrement(300),
        ] {
            let mut out = Vec::new();
            write_decoder_instruction(&mut out, ins);
            for cut in 0..out.len() {
                assert_eq!(read_decoder_instruction(&out[..cut]), Ok(None));
            }
            assert_eq!(read_decoder_instruction(&out), Ok(Some((out.len(), ins))));
        }
    }

    #[test]
    fn rfc9204_appendix_b_encoder_stream_bytes() {
        // B.2: Set Dynamic Table Capacity 220, Insert With Name Reference static 0
        // ":authority" "www.example.com", static 1 ":path" "/sample/path".
        let bytes = [
            0x3f, 0xbd, 0x01, 0xc0, 0x0f, b'w', b'w', b'w', b'.', b'e', b'x', b'a', b'm', b'p',
            b'l', b'e', b'.', b'c', b'o', b'm', 0xc1, 0x0c, b'/', b's', b'a', b'm', b'p', b'l',
            b'e', b'/', b'p', b'a', b't', b'h',
        ];
        let (mut scratch, mut memo) = (Vec::new(), HuffMemo::default());
        let (n, i) = read_encoder_instruction(&bytes, &mut scratch, &mut memo)
            .unwrap()
            .unwrap();
        assert_eq!((n, i), (3, EncoderInstruction::SetCapacity(220)));
        let (m, i) = read_encoder_instruction(&bytes[n..], &mut scratch, &mut memo)
            .unwrap()
            .unwrap();
        assert_eq!(
            i,
            EncoderInstruction::InsertNameRef {
                is_static: true,
                index: 0,
                value: b"www.example.com"
            }
        );
        let (_, i) = read_encoder_instruction(&bytes[n + m..], &mut scratch, &mut memo)
            .unwrap()
            .unwrap();
        assert_eq!(
            i,
            EncoderInstruction::InsertNameRef {
                is_static: true,
                index: 1,
                value: b"/sample/path"
            }
        );
        // B.3: "4a 63 75 73 74 6f 6d 2d 6b 65 79 0c 63 75 73 74 6f 6d 2d 76 61 6c 75 65".
        let mut b3 = vec![0x4a];
        b3.extend_from_slice(b"custom-key");
        b3.push(0x0c);
        b3.extend_from_slice(b"custom-value");
        let (_, i) = read_encoder_instruction(&b3, &mut scratch, &mut memo)
            .unwrap()
            .unwrap();
        assert_eq!(
            i,
            EncoderInstruction::InsertLiteral {
                name: b"custom-key",
                value: b"custom-value"
            }
        );
        // B.4: Duplicate relative index 2 is 0x02; B.5: Insert Count Increment 1 is 0x01,
        // Section Acknowledgment stream 4 is 0x84, Stream Cancellation stream 8 is 0x48.
        assert_eq!(
            read_encoder_instruction(&[0x02], &mut scratch, &mut memo).unwrap(),
            Some((1, EncoderInstruction::Duplicate(2)))
        );
        assert_eq!(
            read_decoder_instruction(&[0x01]).unwrap(),
            Some((1, DecoderInstruction::InsertCountIncrement(1)))
        );
        assert_eq!(
            read_decoder_instruction(&[0x84]).unwrap(),
            Some((1, DecoderInstruction::SectionAck(4)))
        );
        assert_eq!(
            read_decoder_instruction(&[0x48]).unwrap(),
            Some((1, DecoderInstruction::StreamCancel(8)))
        );
    }

    #[test]
    fn pending_lengths_are_seen_before_the_strings_arrive() {
        // Insert With Literal Name, name length 3, value length 10000 (two bytes).
        let mut b = vec![0x43, b'a', b'b', b'c'];
        crate::prefix::write(&mut b, 0, 7, 10_000);
        assert_eq!(pending_string_len(&b), 3 + 10_000);
        assert_eq!(pending_string_len(&[0x80 | 0x3f]), 0);
        assert!(read_encoder_instruction(
            &[0x3f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
            &mut Vec::new(),
            &mut HuffMemo::default()
        )
        .is_err());
    }
}
