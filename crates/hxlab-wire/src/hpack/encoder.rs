//! The sending side of HPACK: one connection's dynamic table, mirrored from what was sent.
//!
//! The table is bounded by the smaller of two sizes: the most our side lets its encoder use
//! (`own`, the `--header-table` factor) and what the peer's decoder allows
//! (SETTINGS_HEADER_TABLE_SIZE, 4096 until its SETTINGS say otherwise, RFC 7541 §4.2). Any
//! change of that bound is announced by a Dynamic Table Size Update at the start of the next
//! header block (§6.3); when the bound dropped and rose again between two blocks, the
//! smallest value goes first, then the final one.

use super::{huffman_code, STATIC_TABLE};
use crate::prefix::write as write_int;
use std::collections::VecDeque;

/// The table size HPACK starts with (RFC 7541's initial SETTINGS_HEADER_TABLE_SIZE) and our
/// default on both ends: what nginx, h2o and nghttp2 use.
pub const DEFAULT_TABLE: u64 = 4096;

/// Per-entry overhead counted in table sizes (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// A (name, value) pair the encoder has in its table.
type TableField = (Box<[u8]>, Box<[u8]>);

/// Whether a server indexes a response field named `name`. Fields whose values differ from
/// one response to the next (content-length, etag, last-modified, content-range, age,
/// location, set-cookie) go as literals without indexing: inserting them would only evict
/// the fields that do repeat. `date` is indexed, as nginx and h2o do: it changes at most once
/// a second, so under load one insertion serves every response of that second.
pub fn response_field_indexed(name: &[u8]) -> bool {
    !matches!(
        name,
        b"content-length"
            | b"etag"
            | b"last-modified"
            | b"content-range"
            | b"age"
            | b"location"
            | b"set-cookie"
    )
}

/// One connection's HPACK encoder: a repeated field is sent as a one-byte index.
#[derive(Debug)]
pub struct Encoder {
    /// (name, value) with the newest at the back.
    table: VecDeque<TableField>,
    size: usize,
    /// The bound in force: min(own, peer).
    max: usize,
    /// The most our side lets this encoder use.
    own: usize,
    /// The peer decoder's SETTINGS_HEADER_TABLE_SIZE.
    peer: usize,
    /// The smallest bound since the last block, if the bound changed: it goes first in the
    /// next block's size updates, `max` after it when larger.
    pending_min: Option<usize>,
    /// Huffman-code a string literal when that is shorter.
    huffman: bool,
    /// Bumped by every insertion, eviction or bound change: cached blocks are valid only
    /// within one.
    generation: u64,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder::new()
    }
}

impl Encoder {
    /// An encoder that may use the default table size (4096) and sends plain string
    /// literals (the load client's).
    pub fn new() -> Encoder {
        Encoder::with_limit(DEFAULT_TABLE as usize)
    }

    /// An encoder that never uses more than `own` bytes of table, whatever the peer allows.
    /// Below 4096 (the peer's initial size) the first block announces the smaller size, so
    /// `0` is static-only from the first block on, before any SETTINGS arrive.
    pub fn with_limit(own: usize) -> Encoder {
        let peer = DEFAULT_TABLE as usize;
        let max = own.min(peer);
        Encoder {
            table: VecDeque::new(),
            size: 0,
            max,
            own,
            peer,
            pending_min: (max != peer).then_some(max),
            huffman: false,
            generation: 0,
        }
    }

    /// The same encoder Huffman-coding every string literal that gets shorter by it (what
    /// servers send).
    pub fn huffman(mut self) -> Encoder {
        self.huffman = true;
        self
    }

    /// Changes of this value invalidate blocks encoded earlier.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The table size this encoder uses now: min(our own limit, the peer's).
    pub fn table_limit(&self) -> usize {
        self.max
    }

    /// Bytes in the table now (entries plus 32 each).
    pub fn table_size(&self) -> usize {
        self.size
    }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the bound becomes min(own, `limit`), and the
    /// next block announces it when it changed.
    pub fn set_peer_limit(&mut self, limit: u32) {
        self.peer = limit as usize;
        let m = self.own.min(self.peer);
        if m != self.max {
            self.pending_min = Some(self.pending_min.map_or(m, |p| p.min(m)));
            self.max = m;
            self.evict_to(m);
            self.generation += 1;
        }
    }

    /// Writes the size updates owed since the last block (none, one or two), which must open
    /// the next header block, whatever encodes the rest of it.
    pub fn write_size_update(&mut self, out: &mut Vec<u8>) {
        if let Some(low) = self.pending_min.take() {
            write_int(out, 0x20, 5, low as u64);
            if low != self.max {
                write_int(out, 0x20, 5, self.max as u64);
            }
        }
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.table.pop_front() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    /// Appends the block for `fields` (lowercase names) to `out`, indexing every field that
    /// fits the table.
    pub fn encode<'a>(
        &mut self,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        out: &mut Vec<u8>,
    ) {
        self.encode_indexing(fields, |_| true, out);
    }

    /// Appends the block for `fields` to `out`, inserting into the table only the fields
    /// whose name `index` accepts (and that fit); the others are literals without indexing.
    pub fn encode_indexing<'a>(
        &mut self,
        fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
        index: impl Fn(&[u8]) -> bool,
        out: &mut Vec<u8>,
    ) {
        self.write_size_update(out);
        for (name, value) in fields {
            self.field(name, value, &index, out);
        }
    }

    fn field(
        &mut self,
        name: &[u8],
        value: &[u8],
        index: &impl Fn(&[u8]) -> bool,
        out: &mut Vec<u8>,
    ) {
        // Exact match: dynamic first (newest = 62), then static.
        if let Some(k) = self
            .table
            .iter()
            .rev()
            .position(|(tn, tv)| **tn == *name && **tv == *value)
        {
            write_int(out, 0x80, 7, 62 + k as u64);
            return;
        }
        let mut name_index = None;
        for (k, (sn, sv)) in STATIC_TABLE.iter().enumerate() {
            if sn.as_bytes() == name {
                if sv.as_bytes() == value {
                    write_int(out, 0x80, 7, k as u64 + 1);
                    return;
                }
                name_index.get_or_insert(k + 1);
            }
        }
        if name_index.is_none() {
            name_index = self
                .table
                .iter()
                .rev()
                .position(|(tn, _)| **tn == *name)
                .map(|k| 62 + k);
        }
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        let insert = size <= self.max && index(name);
        let (first, prefix) = if insert { (0x40, 6) } else { (0x00, 4) };
        match name_index {
            Some(k) => write_int(out, first, prefix, k as u64),
            None => {
                out.push(first);
                self.string(out, name);
            }
        }
        self.string(out, value);
        if insert {
            self.evict_to(self.max - size);
            self.table.push_back((name.into(), value.into()));
            self.size += size;
            self.generation += 1;
        }
    }

    fn string(&self, out: &mut Vec<u8>, s: &[u8]) {
        if self.huffman {
            let bits: usize = s
                .iter()
                .map(|&b| usize::from(huffman_code(b as usize).1))
                .sum();
            let len = bits.div_ceil(8);
            if len < s.len() {
                write_int(out, 0x80, 7, len as u64);
                super::huffman_encode(s, out);
                return;
            }
        }
        write_int(out, 0, 7, s.len() as u64);
        out.extend_from_slice(s);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hpack::Decoder;

    /// Decodes `block` and returns its fields as strings.
    fn fields(d: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut got = Vec::new();
        d.decode_fields(block, |f| {
            got.push((
                String::from_utf8_lossy(f.name).into_owned(),
                String::from_utf8_lossy(f.value).into_owned(),
            ))
        })
        .unwrap();
        got
    }

    const RESPONSE: [(&[u8], &[u8]); 5] = [
        (b":status", b"200"),
        (b"date", b"Sun, 29 Nov 2026 02:07:00 GMT"),
        (b"content-type", b"application/octet-stream"),
        (b"content-length", b"100"),
        (b"alt-svc", b"h3=\":8443\"; ma=86400"),
    ];

    #[test]
    fn encoder_indexes_repeated_requests() {
        let fields = crate::fixtures::REQUEST;
        let mut e = Encoder::new();
        let mut d = Decoder::new(4096);
        let mut first = Vec::new();
        e.encode(fields.iter().copied(), &mut first);
        let g = e.generation();
        let mut second = Vec::new();
        e.encode(fields.iter().copied(), &mut second);
        assert_eq!(e.generation(), g, "nothing new inserted");
        // Indexed: 2 static + 4 dynamic, one byte each.
        assert_eq!(second.len(), fields.len(), "{second:02x?}");
        let want: u64 = fields.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum();
        for b in [&first, &second] {
            let info = d.decode(b).unwrap();
            assert_eq!(info.uncompressed, want);
            assert_eq!(info.fields as usize, fields.len());
        }
        // A smaller peer table: announced, and entries that do not fit are literal.
        e.set_peer_limit(0);
        let mut third = Vec::new();
        e.encode(fields.iter().copied(), &mut third);
        assert_eq!(third[0], 0x20);
        let info = d.decode(&third).unwrap();
        assert_eq!(info.uncompressed, want);
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn responses_index_all_but_per_response_values() {
        let mut e = Encoder::new().huffman();
        let mut d = Decoder::new(4096);
        let mut blocks = Vec::new();
        for _ in 0..3 {
            let mut b = Vec::new();
            e.encode_indexing(RESPONSE.iter().copied(), response_field_indexed, &mut b);
            let want: Vec<(String, String)> = RESPONSE
                .iter()
                .map(|(n, v)| {
                    (
                        String::from_utf8_lossy(n).into(),
                        String::from_utf8_lossy(v).into(),
                    )
                })
                .collect();
            assert_eq!(fields(&mut d, &b), want);
            blocks.push(b);
        }
        // :status static, date, content-type and alt-svc indexed, content-length literal
        // with its static name (2 bytes: 28 is past a 4-bit prefix), then a length byte and
        // 2 Huffman bytes.
        assert_eq!(blocks[2].len(), 4 + 5, "{:02x?}", blocks[2]);
        assert_eq!(blocks[1], blocks[2]);
        assert!(
            blocks[2].len() * 5 <= blocks[0].len() * 2,
            "{} vs {}",
            blocks[2].len(),
            blocks[0].len()
        );
        assert_eq!(d.len(), 3, "content-length was not inserted");
        assert_eq!(e.table_size(), d.table_size());
    }

    #[test]
    fn a_zero_table_announces_itself_and_stays_static() {
        let mut e = Encoder::with_limit(0).huffman();
        let mut static_only = Encoder::with_limit(0).huffman();
        static_only.pending_min = None;
        let mut d = Decoder::new(4096);
        let (mut a, mut b, mut plain) = (Vec::new(), Vec::new(), Vec::new());
        e.encode_indexing(RESPONSE.iter().copied(), response_field_indexed, &mut a);
        e.encode_indexing(RESPONSE.iter().copied(), response_field_indexed, &mut b);
        static_only.encode_indexing(RESPONSE.iter().copied(), response_field_indexed, &mut plain);
        assert_eq!(a[0], 0x20, "size update to 0 opens the first block");
        assert_eq!(&a[1..], &plain[..]);
        assert_eq!(b, plain, "no update in later blocks, no insertion");
        fields(&mut d, &a);
        fields(&mut d, &b);
        assert_eq!(d.len(), 0);
        assert_eq!(e.generation(), 0);
    }

    #[test]
    fn size_updates_follow_the_peer_and_our_own_limit() {
        // Our own 1024 below the initial 4096: announced at once.
        let mut e = Encoder::with_limit(1024);
        let mut out = Vec::new();
        e.write_size_update(&mut out);
        assert_eq!(out, [0x3f, 0xe1, 0x07], "1024 as a 5-bit prefix integer");
        // The peer allows more: we stay at our own limit, nothing to announce.
        e.set_peer_limit(65536);
        out.clear();
        e.write_size_update(&mut out);
        assert!(out.is_empty());
        assert_eq!(e.table_limit(), 1024);
        // The peer drops to 0 then back to 512 between two blocks: 0 first, then 512.
        e.set_peer_limit(0);
        e.set_peer_limit(512);
        out.clear();
        e.write_size_update(&mut out);
        assert_eq!(out, [0x20, 0x3f, 0xe1, 0x03]);
        assert_eq!(e.table_limit(), 512);
        // A decoder that advertised 65536 follows both updates.
        let mut d = Decoder::new(65536);
        let mut block = out.clone();
        block.push(0x88);
        d.decode(&block).unwrap();
    }

    #[test]
    fn eviction_keeps_encoder_and_decoder_in_step() {
        // Room for two 32+40 byte entries, not three.
        let mut e = Encoder::with_limit(150).huffman();
        let mut d = Decoder::new(4096);
        let names: [&[u8]; 3] = [b"x-one", b"x-two", b"x-six"];
        let value = [b'v'; 35];
        for round in 0..3 {
            for n in names {
                let mut b = Vec::new();
                e.encode_indexing([(n, &value[..])], |_| true, &mut b);
                let got = fields(&mut d, &b);
                assert_eq!(got[0].0.as_bytes(), n, "round {round}");
                assert_eq!(e.table_size(), d.table_size());
                assert!(e.table_size() <= 150);
            }
        }
        assert_eq!(d.len(), 2);
        // The newest two are indexed (one byte each), the evicted one is a literal again.
        let mut b = Vec::new();
        e.encode_indexing(
            [(names[2], &value[..]), (names[1], &value[..])],
            |_| true,
            &mut b,
        );
        assert_eq!(b, [0xbe, 0xbf]);
    }
}
