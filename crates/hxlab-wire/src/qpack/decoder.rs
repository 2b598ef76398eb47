//! The QPACK decoder with a dynamic table (RFC 9204 §2.2, §4.3, §4.5): it applies the
//! peer's encoder stream, decodes field sections that reference the table (Required Insert
//! Count and Base), tells the caller when a section must wait for inserts that have not
//! arrived (a blocked stream, never more of them than we advertised), and writes the
//! decoder-stream instructions the peer's encoder needs: Section Acknowledgment, Stream
//! Cancellation and Insert Count Increment.
//!
//! Bounds against a hostile encoder: a capacity above what we advertised, an insert larger
//! than the capacity, a reference to an entry evicted or not yet inserted, and an encoder
//! instruction whose strings could not fit the table are connection errors (the caller closes
//! with QPACK_ENCODER_STREAM_ERROR or QPACK_DECOMPRESSION_FAILED, as the method says). The
//! bytes it keeps are the table (at most the advertised capacity, entry overhead included)
//! and less than one instruction of the encoder stream.

use super::fields::{read_line, Line};
use super::instruction::{
    pending_string_len, read_encoder_instruction, write_decoder_instruction, DecoderInstruction,
    EncoderInstruction, Partial,
};
use super::table::DynamicTable;
use super::{read_int, static_entry, DynamicRef, FieldDecoder, QpackError};
use crate::hpack::HuffMemo;

/// The most a decoder accepts as its advertised table capacity, and so the most memory its
/// table holds: 64 KiB.
pub const MAX_TABLE_CAPACITY: u64 = 64 * 1024;
/// The most blocked streams a decoder accepts to advertise.
pub const MAX_BLOCKED_STREAMS: u64 = 100;

/// What a decoder has done so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DecoderStats {
    /// Entries inserted by the peer's encoder stream (duplicates included).
    pub inserts: u64,
    /// Field lines that referenced the dynamic table (name or whole field).
    pub dynamic_refs: u64,
    /// Field sections with a Required Insert Count above 0 (each acknowledged).
    pub sections_with_refs: u64,
    /// Times a field section had to wait for inserts (a stream blocked).
    pub blocked: u64,
    /// Encoder-stream bytes received.
    pub encoder_stream_bytes: u64,
    /// Decoder-stream bytes written.
    pub decoder_stream_bytes: u64,
}

/// What decoding a field section came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// Every field line was handed over.
    Done,
    /// The section needs inserts that have not arrived: try again when
    /// [`QpackDecoder::insert_count`] has grown (nothing was handed over).
    Blocked,
}

/// A QPACK decoder for one connection.
#[derive(Debug)]
pub struct QpackDecoder {
    table: DynamicTable,
    max_capacity: u64,
    max_blocked: u64,
    /// Streams whose field section waits for inserts.
    blocked: Vec<u64>,
    /// The insert count the peer's encoder knows we have (acknowledged so far).
    acked: u64,
    /// Encoder-stream bytes not yet a whole instruction.
    pending: Partial,
    /// Decoder-stream bytes to send.
    out: Vec<u8>,
    fields: FieldDecoder,
    ins_scratch: Vec<u8>,
    ins_memo: HuffMemo,
    /// A copy of a referenced name (an insert may evict the entry it names).
    name_copy: Vec<u8>,
    stats: DecoderStats,
}

impl QpackDecoder {
    /// A decoder that advertised `max_capacity` (SETTINGS_QPACK_MAX_TABLE_CAPACITY) and
    /// `max_blocked` (SETTINGS_QPACK_BLOCKED_STREAMS); both are capped at
    /// [`MAX_TABLE_CAPACITY`] and [`MAX_BLOCKED_STREAMS`].
    pub fn new(max_capacity: u64, max_blocked: u64) -> QpackDecoder {
        QpackDecoder {
            table: DynamicTable::new(),
            max_capacity: max_capacity.min(MAX_TABLE_CAPACITY),
            max_blocked: max_blocked.min(MAX_BLOCKED_STREAMS),
            blocked: Vec::new(),
            acked: 0,
            pending: Partial::default(),
            out: Vec::new(),
            fields: FieldDecoder::new(),
            ins_scratch: Vec::new(),
            ins_memo: HuffMemo::default(),
            name_copy: Vec::new(),
            stats: DecoderStats::default(),
        }
    }

    /// The capacity we advertised.
    pub fn max_capacity(&self) -> u64 {
        self.max_capacity
    }

    /// The blocked streams we advertised.
    pub fn max_blocked(&self) -> u64 {
        self.max_blocked
    }

    /// Entries received so far.
    pub fn insert_count(&self) -> u64 {
        self.table.insert_count()
    }

    /// The table as the peer's encoder has set it up.
    pub fn table(&self) -> &DynamicTable {
        &self.table
    }

    /// What the decoder has done.
    pub fn stats(&self) -> DecoderStats {
        self.stats
    }

    /// Streams currently blocked.
    pub fn blocked_streams(&self) -> usize {
        self.blocked.len()
    }

    /// Bytes this decoder holds beyond its fixed size: table content and buffers.
    pub fn memory(&self) -> usize {
        self.table.content_bytes()
            + self.table.len() * std::mem::size_of::<(Box<[u8]>, usize)>()
            + self.pending.capacity()
            + self.out.capacity()
            + self.ins_scratch.capacity()
            + self.name_copy.capacity()
    }

    /// Appends the decoder-stream bytes to send onto `out`: the acknowledgements and
    /// cancellations written so far, then an Insert Count Increment for inserts no Section
    /// Acknowledgment has covered. Call it after handling what arrived (encoder-stream bytes,
    /// then the sections they unblocked), so one acknowledgement does for both.
    pub fn drain_output(&mut self, out: &mut Vec<u8>) {
        let new = self.table.insert_count() - self.acked;
        if new > 0 {
            self.write(DecoderInstruction::InsertCountIncrement(new));
            self.acked = self.table.insert_count();
        }
        out.append(&mut self.out);
    }

    /// Applies bytes of the peer's encoder stream (any split). An error is a connection
    /// error of type QPACK_ENCODER_STREAM_ERROR. New inserts are acknowledged by
    /// [`QpackDecoder::drain_output`].
    pub fn feed_encoder(&mut self, data: &[u8]) -> Result<(), QpackError> {
        self.stats.encoder_stream_bytes += data.len() as u64;
        let (table, max_capacity) = (&mut self.table, self.max_capacity);
        let (scratch, memo) = (&mut self.ins_scratch, &mut self.ins_memo);
        let (name_copy, stats) = (&mut self.name_copy, &mut self.stats);
        self.pending.feed(data, |buf| {
            let mut at = 0;
            while let Some((n, ins)) = read_encoder_instruction(&buf[at..], scratch, memo)? {
                apply(table, max_capacity, ins, name_copy, stats)?;
                at += n;
            }
            Ok(at)
        })?;
        // What is left is less than one instruction; one whose strings could not fit in
        // the largest table we allow is refused now rather than buffered.
        let kept = self.pending.kept();
        if pending_string_len(kept) > self.max_capacity
            || kept.len() as u64 > self.max_capacity + 32
        {
            return Err(QpackError("encoder instruction larger than the table"));
        }
        Ok(())
    }

    fn write(&mut self, ins: DecoderInstruction) {
        let before = self.out.len();
        write_decoder_instruction(&mut self.out, ins);
        self.stats.decoder_stream_bytes += (self.out.len() - before) as u64;
    }

    /// The stream was reset or its field section abandoned before it was decoded: it is no
    /// longer blocked, and the peer's encoder is told (Stream Cancellation) when we allow a
    /// dynamic table at all.
    pub fn cancel_stream(&mut self, stream_id: u64) {
        self.blocked.retain(|s| *s != stream_id);
        if self.max_capacity > 0 {
            self.write(DecoderInstruction::StreamCancel(stream_id));
        }
    }

    /// Decodes the field section `block` of stream `stream_id`, calling `field(name, value)`
    /// for every line in order, or says it is [`Decoded::Blocked`]. `max_size` bounds the
    /// section's size as RFC 9114 §4.2.2 counts it. An error is a connection error of type
    /// QPACK_DECOMPRESSION_FAILED (a callback error is returned as is).
    pub fn decode(
        &mut self,
        stream_id: u64,
        block: &[u8],
        max_size: u64,
        mut field: impl FnMut(&[u8], &[u8]) -> Result<(), QpackError>,
    ) -> Result<Decoded, QpackError> {
        let mut pos = 0;
        let encoded = read_int(block, &mut pos, 8)?;
        let ric = required_insert_count(encoded, self.max_capacity, self.table.insert_count())?;
        let sign = *block
            .get(pos)
            .ok_or(QpackError("truncated field section"))?
            & 0x80;
        let delta = read_int(block, &mut pos, 7)?;
        let base = if sign == 0 {
            ric.checked_add(delta)
        } else {
            ric.checked_sub(delta).and_then(|b| b.checked_sub(1))
        }
        .ok_or(QpackError("Base out of range"))?;
        if ric > self.table.insert_count() {
            if !self.blocked.contains(&stream_id) {
                if self.blocked.len() as u64 >= self.max_blocked {
                    return Err(QpackError("more blocked streams than we allowed"));
                }
                self.blocked.push(stream_id);
                self.stats.blocked += 1;
            }
            return Ok(Decoded::Blocked);
        }
        self.blocked.retain(|s| *s != stream_id);
        let (table, fields) = (&self.table, &mut self.fields);
        let (scratch, memo) = (&mut fields.scratch, &mut fields.memo);
        scratch.clear();
        let mut size = 0u64;
        let mut refs = 0u64;
        while pos < block.len() {
            let mark = scratch.len();
            let line = read_line(block, &mut pos, scratch, memo)?;
            let (name, value): (&[u8], &[u8]) = match line {
                Line::Known(n, v) => (n.get(block, scratch), v.get(block, scratch)),
                Line::Dynamic(kind, index, literal) => {
                    refs += 1;
                    let abs = match kind {
                        DynamicRef::Indexed | DynamicRef::Name => {
                            base.checked_sub(index).and_then(|a| a.checked_sub(1))
                        }
                        DynamicRef::PostBase | DynamicRef::PostBaseName => base.checked_add(index),
                    }
                    .filter(|a| *a < ric)
                    .ok_or(QpackError(
                        "dynamic reference outside the Required Insert Count",
                    ))?;
                    let (n, v) = table
                        .get(abs)
                        .ok_or(QpackError("reference to an evicted entry"))?;
                    (n, literal.map_or(v, |l| l.get(block, scratch)))
                }
            };
            size += (name.len() + value.len()) as u64 + 32;
            if size > max_size {
                return Err(QpackError("field section larger than we accept"));
            }
            field(name, value)?;
            scratch.truncate(mark);
        }
        self.stats.dynamic_refs += refs;
        if ric > 0 {
            self.stats.sections_with_refs += 1;
            self.write(DecoderInstruction::SectionAck(stream_id));
            self.acked = self.acked.max(ric);
        }
        Ok(Decoded::Done)
    }
}

/// Applies one encoder instruction to the table.
fn apply(
    table: &mut DynamicTable,
    max_capacity: u64,
    ins: EncoderInstruction<'_>,
    name_copy: &mut Vec<u8>,
    stats: &mut DecoderStats,
) -> Result<(), QpackError> {
    let full = QpackError("insert larger than the table capacity");
    match ins {
        EncoderInstruction::SetCapacity(c) => {
            if c > max_capacity {
                return Err(QpackError("table capacity above what we advertised"));
            }
            table.set_capacity(c);
            return Ok(());
        }
        EncoderInstruction::InsertNameRef {
            is_static: true,
            index,
            value,
        } => {
            let name = static_entry(index)?.0.as_bytes();
            table.insert(name, value).ok_or(full)?;
        }
        EncoderInstruction::InsertNameRef {
            is_static: false,
            index,
            value,
        } => {
            name_copy.clear();
            name_copy.extend_from_slice(relative(table, index)?.0);
            table.insert(name_copy, value).ok_or(full)?;
        }
        EncoderInstruction::InsertLiteral { name, value } => {
            table.insert(name, value).ok_or(full)?;
        }
        EncoderInstruction::Duplicate(index) => {
            let (n, v) = relative(table, index)?;
            name_copy.clear();
            name_copy.extend_from_slice(n);
            name_copy.extend_from_slice(v);
            let (n, v) = name_copy.split_at(n.len());
            table.insert(n, v).ok_or(full)?;
        }
    }
    stats.inserts += 1;
    Ok(())
}

/// The entry at relative index `i` of the encoder stream (RFC 9204 §3.2.5).
fn relative(table: &DynamicTable, i: u64) -> Result<(&[u8], &[u8]), QpackError> {
    table
        .insert_count()
        .checked_sub(i)
        .and_then(|a| a.checked_sub(1))
        .and_then(|a| table.get(a))
        .ok_or(QpackError("encoder stream references an evicted entry"))
}

/// Decodes the Required Insert Count (RFC 9204 §4.5.1.1) given the decoder's advertised
/// capacity and its insert count.
pub fn required_insert_count(
    encoded: u64,
    max_capacity: u64,
    total_inserts: u64,
) -> Result<u64, QpackError> {
    if encoded == 0 {
        return Ok(0);
    }
    let bad = QpackError("invalid Required Insert Count");
    let max_entries = max_capacity / 32;
    let full_range = 2 * max_entries;
    if encoded > full_range {
        return Err(bad);
    }
    let max_value = total_inserts + max_entries;
    let max_wrapped = (max_value / full_range) * full_range;
    let mut ric = max_wrapped + encoded - 1;
    if ric > max_value {
        if ric <= full_range {
            return Err(bad);
        }
        ric -= full_range;
    }
    if ric == 0 {
        return Err(bad);
    }
    Ok(ric)
}

/// Encodes a Required Insert Count for a decoder that advertised `max_capacity`.
pub fn encode_required_insert_count(ric: u64, max_capacity: u64) -> u64 {
    if ric == 0 {
        0
    } else {
        // A table too small for any entry is never referenced; the guard only avoids a
        // division by zero.
        ric % (2 * (max_capacity / 32)).max(2) + 1
    }
}
