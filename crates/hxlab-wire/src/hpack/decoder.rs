//! The one HPACK decoder: one representation parser and one dynamic table that follows the
//! encoder's, serving both the load client and the frame view.
//!
//! [`Decoder::decode_fields`] hands every field of a header block to a callback as name and
//! value bytes (the frame view shows them); [`Decoder::decode`] keeps only what the recorder
//! needs, `:status` and the decoded size of the header list (name + value length of every
//! field, as h2load counts it), and answers a repeated self-contained block from memory.
//!
//! Decoding allocates nothing once the decoder is warm: Huffman strings are decoded into one
//! scratch buffer through a memo of recently seen encoded strings, and a dynamic table entry
//! is one byte buffer (name then value) that goes back to a spare list when it is evicted and
//! is reused by the next insertion.

use super::{read_int, read_string, status_of, HpackError, HuffMemo, Loc};
use super::{ENTRY_OVERHEAD, STATIC_TABLE};
use std::collections::VecDeque;

/// One decoded field, as [`Decoder::decode_fields`] hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// Name bytes (lower case on the wire in HTTP/2, not checked here).
    pub name: &'a [u8],
    /// Value bytes.
    pub value: &'a [u8],
    /// Sent as a literal "never indexed" (RFC 7541 §6.2.3): a sensitive field.
    pub never_indexed: bool,
}

/// What a decoded header block says, as far as the recorder cares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BlockInfo {
    /// The first valid `:status` value (three digits, not `000`), if the block had one.
    pub status: Option<u16>,
    /// Sum of name and value lengths of every field (h2load's uncompressed size).
    pub uncompressed: u64,
    /// Number of fields.
    pub fields: u32,
}

/// A dynamic table entry: name and value in one buffer.
#[derive(Debug)]
struct Entry {
    bytes: Vec<u8>,
    name_len: usize,
}

impl Entry {
    fn name(&self) -> &[u8] {
        &self.bytes[..self.name_len]
    }

    fn value(&self) -> &[u8] {
        &self.bytes[self.name_len..]
    }

    fn size(&self) -> usize {
        self.bytes.len() + ENTRY_OVERHEAD
    }
}

/// The dynamic table (RFC 7541 §2.3.2), newest entry at the front.
#[derive(Debug)]
struct Table {
    entries: VecDeque<Entry>,
    /// Buffers of evicted entries, reused by insertions.
    spare: Vec<Vec<u8>>,
    size: usize,
    max: usize,
}

impl Table {
    /// An entry for `name` and `value`, in a spare buffer when there is one.
    fn entry(&mut self, name: &[u8], value: &[u8]) -> Entry {
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(name);
        bytes.extend_from_slice(value);
        Entry {
            bytes,
            name_len: name.len(),
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.entries.pop_back() {
                Some(e) => {
                    self.size -= e.size();
                    self.spare.push(e.bytes);
                }
                None => break,
            }
        }
    }

    fn insert(&mut self, e: Entry) {
        let sz = e.size();
        if sz > self.max {
            // Larger than the table: it empties the table (§4.4).
            self.evict_to(0);
            self.spare.push(e.bytes);
            return;
        }
        self.evict_to(self.max - sz);
        self.entries.push_front(e);
        self.size += sz;
    }

    /// Name and value at HPACK index `index` (1-based, static table first).
    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError("index 0")),
            1..=61 => {
                let (n, v) = STATIC_TABLE[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .entries
                .get(index - 62)
                .map(|e| (e.name(), e.value()))
                .ok_or(HpackError("index beyond the dynamic table")),
        }
    }
}

/// The last self-contained block — no size update, and every dynamic-table reference names an
/// entry inserted earlier in the same block — with what it said and the entries it inserted.
/// Such a block means the same whatever the table held before, and its effect on the table is
/// replaying its insertions. nginx sends exactly such a block for every response of a
/// resource (it inserts each field again and refers only to what it just inserted), so a
/// repeat costs a compare and a few insertions, not a decode.
#[derive(Debug, Default)]
struct BlockMemo {
    block: Vec<u8>,
    info: Option<BlockInfo>,
    /// (name length, entry length) of each insertion, their bytes one after another.
    inserts: Vec<(usize, usize)>,
    bytes: Vec<u8>,
}

/// The longest header block remembered whole, and the most insertions it may make.
const MEMO_BLOCK_MAX: usize = 1024;
const MEMO_INSERTS_MAX: usize = 64;

impl BlockMemo {
    /// Whether HPACK index `i` stays inside the block being recorded (static, or an entry
    /// that block inserted).
    fn covers(&self, i: usize) -> bool {
        i <= STATIC_TABLE.len() || i - STATIC_TABLE.len() <= self.inserts.len()
    }

    /// Records an insertion; false when there are too many to replay.
    fn record(&mut self, e: &Entry) -> bool {
        if self.inserts.len() >= MEMO_INSERTS_MAX {
            return false;
        }
        self.inserts.push((e.name_len, e.bytes.len()));
        self.bytes.extend_from_slice(&e.bytes);
        true
    }

    fn forget(&mut self) {
        self.info = None;
        self.inserts.clear();
        self.bytes.clear();
    }
}

/// Decodes complete header blocks of one direction of a connection, in order.
#[derive(Debug)]
pub struct Decoder {
    table: Table,
    /// The limit we advertised (SETTINGS_HEADER_TABLE_SIZE); size updates may not exceed it.
    limit: usize,
    memo: HuffMemo,
    /// Decoded strings of the field line being read.
    scratch: Vec<u8>,
    last: BlockMemo,
}

/// Reads a dynamic table size update (RFC 7541 §6.3) at `buf[*pos]`; an update above the
/// `limit` the decoder advertised is an error.
fn read_size_update(buf: &[u8], pos: &mut usize, limit: usize) -> Result<usize, HpackError> {
    let m = read_int(buf, pos, 5)?;
    if m > limit {
        return Err(HpackError("table size update above the advertised limit"));
    }
    Ok(m)
}

/// HPACK string literals: Huffman flag 0x80, 7-bit length prefix.
const STRING: (u8, u32) = (0x80, 7);

impl Decoder {
    /// A decoder whose encoder may set its table size up to `limit` bytes (the
    /// SETTINGS_HEADER_TABLE_SIZE the decoding side advertised). The table starts at 4096
    /// (the protocol's initial size) or at `limit` when that is smaller.
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            table: Table {
                // Grown as entries come: an HTTP/2 server keeps one decoder per connection, and
                // most connections insert a handful of fields.
                entries: VecDeque::with_capacity(8),
                spare: Vec::new(),
                size: 0,
                max: limit.min(4096),
            },
            limit,
            memo: HuffMemo::default(),
            scratch: Vec::new(),
            last: BlockMemo::default(),
        }
    }

    /// Current dynamic table size (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.table.size
    }

    /// Name and value of dynamic table entry `i` (0 = newest).
    pub fn entry(&self, i: usize) -> Option<(&[u8], &[u8])> {
        self.table.entries.get(i).map(|e| (e.name(), e.value()))
    }

    /// Number of dynamic entries.
    pub fn len(&self) -> usize {
        self.table.entries.len()
    }

    /// True when the dynamic table is empty.
    pub fn is_empty(&self) -> bool {
        self.table.entries.is_empty()
    }

    /// Decodes one complete header block for the recorder: `:status` and sizes. A block equal
    /// to the last self-contained one is answered from memory (its insertions replayed).
    pub fn decode(&mut self, block: &[u8]) -> Result<BlockInfo, HpackError> {
        if let Some(info) = self.last.info {
            if self.last.block == block {
                let mut at = 0;
                for &(name_len, len) in &self.last.inserts {
                    let bytes = &self.last.bytes[at..at + len];
                    at += len;
                    let e = self.table.entry(&bytes[..name_len], &bytes[name_len..]);
                    self.table.insert(e);
                }
                return Ok(info);
            }
        }
        let mut info = BlockInfo::default();
        let contained = self.walk(block, |f| {
            info.fields += 1;
            info.uncompressed += (f.name.len() + f.value.len()) as u64;
            if info.status.is_none() && f.name == b":status" {
                // `000` is not a status: the h2 client has always reported none for it.
                info.status = status_of(f.value).filter(|&s| s != 0);
            }
        })?;
        if contained && block.len() <= MEMO_BLOCK_MAX {
            self.last.block.clear();
            self.last.block.extend_from_slice(block);
            self.last.info = Some(info);
        }
        Ok(info)
    }

    /// Decodes one complete header block, calling `field` with every field in order (for
    /// showing header lists).
    pub fn decode_fields(
        &mut self,
        block: &[u8],
        field: impl FnMut(Field<'_>),
    ) -> Result<(), HpackError> {
        self.walk(block, field).map(|_| ())
    }

    /// The one walk over a block's representations (RFC 7541 §6), keeping the table in step;
    /// returns whether the block was self-contained (see [`BlockMemo`]), having recorded its
    /// insertions for a replay.
    fn walk(&mut self, block: &[u8], mut field: impl FnMut(Field<'_>)) -> Result<bool, HpackError> {
        let mut pos = 0usize;
        let mut fields_seen = false;
        let mut contained = true;
        self.last.forget();
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                let i = read_int(block, &mut pos, 7)?;
                contained &= self.last.covers(i);
                let (name, value) = self.table.lookup(i)?;
                field(Field {
                    name,
                    value,
                    never_indexed: false,
                });
            } else if b & 0xe0 == 0x20 {
                contained = false;
                if fields_seen {
                    return Err(HpackError("table size update after a field"));
                }
                let m = read_size_update(block, &mut pos, self.limit)?;
                self.table.max = m;
                self.table.evict_to(m);
                continue;
            } else {
                contained &= self.literal(block, &mut pos, contained, &mut field)?;
            }
            fields_seen = true;
        }
        Ok(contained)
    }

    /// Reads the literal field representation at `block[*pos]` (§6.2), hands it to `field`
    /// and inserts it when it is to be indexed. Returns whether the block is still
    /// self-contained after it (`contained`: whether it was before).
    fn literal(
        &mut self,
        block: &[u8],
        pos: &mut usize,
        contained: bool,
        field: &mut impl FnMut(Field<'_>),
    ) -> Result<bool, HpackError> {
        let b = block[*pos];
        let (prefix, index) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
        let never_indexed = !index && b & 0x10 != 0;
        let ni = read_int(block, pos, prefix)?;
        let mut contained = contained && self.last.covers(ni);
        let scratch = &mut self.scratch;
        scratch.clear();
        let name = match ni {
            0 => read_string(block, pos, STRING, scratch, &mut self.memo)?,
            1..=61 => Loc::Static(STATIC_TABLE[ni - 1].0),
            _ => {
                // Copied out: inserting this field may evict the entry it names (§4.4).
                scratch.extend_from_slice(self.table.lookup(ni)?.0);
                Loc::Scratch(0, scratch.len())
            }
        };
        let value = read_string(block, pos, STRING, scratch, &mut self.memo)?;
        let (name, value) = (name.get(block, scratch), value.get(block, scratch));
        if !index {
            field(Field {
                name,
                value,
                never_indexed,
            });
            return Ok(contained);
        }
        let e = self.table.entry(name, value);
        field(Field {
            name: e.name(),
            value: e.value(),
            never_indexed: false,
        });
        contained = contained && self.last.record(&e);
        self.table.insert(e);
        Ok(contained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
        let mut out = Vec::new();
        d.decode_fields(block, |f| {
            out.push((
                String::from_utf8(f.name.to_vec()).unwrap(),
                String::from_utf8(f.value.to_vec()).unwrap(),
            ))
        })?;
        Ok(out)
    }

    #[test]
    fn rfc7541_c4_requests_with_huffman_and_the_dynamic_table() {
        let mut d = Decoder::new(4096);
        // C.4.1
        let b1 = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        assert_eq!(
            fields(&mut d, &b1).unwrap(),
            [
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com")
            ]
            .map(|(a, b)| (a.to_string(), b.to_string()))
        );
        assert_eq!(d.table_size(), 57);
        // C.4.2: the authority now comes from the dynamic table.
        let b2 = [
            0x82, 0x86, 0x84, 0xbe, 0x58, 0x86, 0xa8, 0xeb, 0x10, 0x64, 0x9c, 0xbf,
        ];
        let f = fields(&mut d, &b2).unwrap();
        assert_eq!(f[3], (":authority".into(), "www.example.com".into()));
        assert_eq!(f[4], ("cache-control".into(), "no-cache".into()));
        assert_eq!(d.table_size(), 110);
    }

    #[test]
    fn hostile_blocks_are_errors_not_panics() {
        let mut d = Decoder::new(4096);
        let mut never = Vec::new();
        let mut decode = |b: &[u8]| d.decode_fields(b, |f| never.push(f.never_indexed));
        assert!(decode(&[0x80]).is_err()); // index 0
        assert!(decode(&[0xbe]).is_err()); // empty dynamic table
        assert!(decode(&[0x3f, 0xff, 0xff, 0xff, 0x7f]).is_err()); // size update above limit
        assert!(decode(&[0x40, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x0f]).is_err()); // huge string
        assert!(decode(&[0x82, 0x20]).is_err()); // size update after a field
        assert!(decode(&[0x10, 0x81, 0xff]).is_err()); // bad Huffman
        never.clear();
        d.decode_fields(&[0x10, 0x01, b'a', 0x01, b'b'], |f| {
            never.push(f.never_indexed)
        })
        .unwrap();
        assert_eq!(never, [true]);
    }

    #[test]
    fn an_insertion_that_evicts_the_entry_it_names_keeps_the_name() {
        // A 70-byte table holds one entry of "custom-key: a" (13 + 32 = 45 bytes); the next
        // field names it (index 62) with incremental indexing, which evicts it first.
        let mut d = Decoder::new(70);
        let mut block = vec![0x40, 10];
        block.extend_from_slice(b"custom-key");
        block.extend_from_slice(&[1, b'a', 0x40 | 62, 1, b'b']);
        let got = fields(&mut d, &block).unwrap();
        assert_eq!(got[1], ("custom-key".into(), "b".into()));
        assert_eq!(d.entry(0), Some((&b"custom-key"[..], &b"b"[..])));
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn lengths_and_fields_agree_through_one_table() {
        // The same blocks through decode (lengths, with the block memo) and decode_fields
        // leave the same table and count the same fields.
        let own = [&[0x40, 0x03][..], b"abc", &[0x03], b"def", &[0xbe, 0x88]].concat();
        let (mut a, mut b) = (Decoder::new(4096), Decoder::new(4096));
        for _ in 0..3 {
            let info = a.decode(&own).unwrap();
            let f = fields(&mut b, &own).unwrap();
            assert_eq!(info.fields as usize, f.len());
            assert_eq!(info.status, Some(200));
            let sum: usize = f.iter().map(|(n, v)| n.len() + v.len()).sum();
            assert_eq!(info.uncompressed, sum as u64);
            assert_eq!(a.table_size(), b.table_size());
            assert_eq!(a.entry(0), b.entry(0));
        }
        assert_eq!(a.len(), 3);
    }
}
