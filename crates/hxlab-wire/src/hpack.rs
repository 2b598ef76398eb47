//! A small HPACK (RFC 7541) codec: the load generator's HTTP/2 client encodes requests and
//! decodes responses with it, and the frame view decodes what that client sent and received.
//!
//! There is one decoder, [`Decoder`]: one representation parser and one dynamic table, with
//! [`Decoder::decode_fields`] handing every field to a callback (the frame view's header
//! lists) and [`Decoder::decode`] keeping only the `:status` code and the decoded size of the
//! header list (the recorder's, on the load client's hot path). Neither allocates once warm.
//!
//! The encoder, [`Encoder`], keeps the dynamic table of one connection's sending side: the
//! first occurrence of a field is sent as a literal with incremental indexing, later ones as
//! one-byte indexed fields, so a repeated head costs a few bytes on the wire (what nghttp2,
//! nginx and h2o send). The load client indexes every request field; the server indexes the
//! response fields [`response_field_indexed`] names.

use thiserror::Error;

mod decoder;
mod encoder;
pub use decoder::{BlockInfo, Decoder, Field};
pub use encoder::{response_field_indexed, Encoder, DEFAULT_TABLE};

/// A malformed header block (a connection error of type COMPRESSION_ERROR).
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("HPACK: {0}")]
pub struct HpackError(pub &'static str);

/// Huffman code lengths of symbols 0..=256 (256 is EOS), RFC 7541 Appendix B. The code is
/// canonical, so the codes themselves follow from the lengths (see [`huffman_code`]).
const HUFFMAN_LEN: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// Bits looked up at once; codes up to this long decode with one table access.
const FAST_BITS: u32 = 10;

/// Decoding tables, built at compile time from [`HUFFMAN_LEN`].
struct Huffman {
    /// Indexed by the next FAST_BITS bits: symbol in the low 9 bits, code length above
    /// (length 0: the code is longer than FAST_BITS).
    fast: [u16; 1 << FAST_BITS],
    /// Per length: first canonical code of that length, number of codes, index of the
    /// first such symbol in `sorted`.
    first: [u32; 31],
    count: [u32; 31],
    offset: [u32; 31],
    /// Symbols ordered by (length, symbol), i.e. by code.
    sorted: [u16; 257],
    /// Canonical code of every symbol.
    code: [u32; 257],
}

const fn build_huffman() -> Huffman {
    let mut h = Huffman {
        fast: [0; 1 << FAST_BITS],
        first: [0; 31],
        count: [0; 31],
        offset: [0; 31],
        sorted: [0; 257],
        code: [0; 257],
    };
    let mut next_code: u32 = 0;
    let mut n = 0usize;
    let mut len = 1usize;
    while len <= 30 {
        h.first[len] = next_code;
        h.offset[len] = n as u32;
        let mut s = 0usize;
        while s < 257 {
            if HUFFMAN_LEN[s] as usize == len {
                h.sorted[n] = s as u16;
                h.code[s] = next_code;
                n += 1;
                next_code += 1;
                h.count[len] += 1;
            }
            s += 1;
        }
        next_code <<= 1;
        len += 1;
    }
    let mut s = 0usize;
    while s < 257 {
        let l = HUFFMAN_LEN[s] as u32;
        if l <= FAST_BITS {
            let base = (h.code[s] << (FAST_BITS - l)) as usize;
            let mut k = 0usize;
            while k < (1usize << (FAST_BITS - l)) {
                h.fast[base + k] = (s as u16) | ((l as u16) << 9);
                k += 1;
            }
        }
        s += 1;
    }
    h
}

static HUFFMAN: Huffman = build_huffman();

/// The canonical Huffman code of `sym` (0..=256) and its length in bits.
pub fn huffman_code(sym: usize) -> (u32, u8) {
    (HUFFMAN.code[sym], HUFFMAN_LEN[sym])
}

/// Decodes a Huffman-coded string, calling `out` with every byte; returns the decoded length.
/// Rejects EOS inside the string and padding that is longer than 7 bits or not all ones.
#[inline]
pub fn huffman_decode(src: &[u8], mut out: impl FnMut(u8)) -> Result<usize, HpackError> {
    let h = &HUFFMAN;
    let mut acc: u64 = 0;
    let mut nbits: u32 = 0;
    let mut i = 0usize;
    let mut produced = 0usize;
    loop {
        while nbits <= 56 && i < src.len() {
            acc = (acc << 8) | u64::from(src[i]);
            nbits += 8;
            i += 1;
        }
        if nbits == 0 {
            return Ok(produced);
        }
        // The next FAST_BITS bits, padded with ones past the end (the padding pattern).
        let peek = |k: u32| -> u32 {
            if nbits >= k {
                ((acc >> (nbits - k)) & ((1u64 << k) - 1)) as u32
            } else {
                let pad = k - nbits;
                ((((acc & ((1u64 << nbits) - 1)) << pad) | ((1u64 << pad) - 1)) & ((1u64 << k) - 1))
                    as u32
            }
        };
        let e = h.fast[peek(FAST_BITS) as usize];
        let (sym, len) = if e != 0 {
            ((e & 0x1ff) as usize, u32::from(e >> 9))
        } else {
            let mut found = None;
            let mut l = FAST_BITS + 1;
            while l <= 30 {
                let c = peek(l);
                let d = c.wrapping_sub(h.first[l as usize]);
                if d < h.count[l as usize] {
                    found = Some((h.sorted[(h.offset[l as usize] + d) as usize] as usize, l));
                    break;
                }
                l += 1;
            }
            match found {
                Some(x) => x,
                None => return Err(HpackError("bad Huffman code")),
            }
        };
        if len > nbits {
            // Only padding is left: at most 7 bits, all ones.
            if nbits < 8 && (acc & ((1u64 << nbits) - 1)) == (1u64 << nbits) - 1 {
                return Ok(produced);
            }
            return Err(HpackError("bad Huffman padding"));
        }
        if sym == 256 {
            return Err(HpackError("EOS in a Huffman string"));
        }
        out(sym as u8);
        produced += 1;
        nbits -= len;
    }
}

/// Huffman-encodes `src` onto `dst` (used by tests and available to encoders).
pub fn huffman_encode(src: &[u8], dst: &mut Vec<u8>) {
    let mut acc: u64 = 0;
    let mut nbits = 0u32;
    for &b in src {
        let (code, len) = huffman_code(b as usize);
        acc = (acc << len) | u64::from(code);
        nbits += u32::from(len);
        while nbits >= 8 {
            dst.push((acc >> (nbits - 8)) as u8);
            nbits -= 8;
        }
    }
    if nbits > 0 {
        let pad = 8 - nbits;
        dst.push(((acc << pad) as u8) | ((1u16 << pad) - 1) as u8);
    }
}

/// The static table (RFC 7541 Appendix A), 1-based.
pub const STATIC_TABLE: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// Per-entry overhead counted in table sizes (RFC 7541 §4.1).
const ENTRY_OVERHEAD: usize = 32;

/// Reads an HPACK integer with an `n`-bit prefix at `buf[*pos]` (see [`crate::prefix`]), as
/// a length or an index.
#[inline]
pub(crate) fn read_int(buf: &[u8], pos: &mut usize, n: u32) -> Result<usize, HpackError> {
    match crate::prefix::read(buf, pos, n) {
        Ok(v) => usize::try_from(v).map_err(|_| HpackError("integer too large")),
        Err(crate::prefix::PrefixError::Truncated) => Err(HpackError("truncated integer")),
        Err(crate::prefix::PrefixError::Overflow) => Err(HpackError("integer too large")),
    }
}

/// Where a decoded string lives while its field line is handed over: static, a slice of the
/// header block (a plain literal), or a range of the decoder's scratch buffer (a Huffman
/// literal, or a name copied out of a dynamic table).
#[derive(Clone, Copy)]
pub(crate) enum Loc {
    Static(&'static str),
    Block(usize, usize),
    Scratch(usize, usize),
}

impl Loc {
    /// The bytes, given the block and the scratch buffer the location refers to.
    pub(crate) fn get<'a>(self, block: &'a [u8], scratch: &'a [u8]) -> &'a [u8] {
        match self {
            Loc::Static(s) => s.as_bytes(),
            Loc::Block(a, b) => &block[a..b],
            Loc::Scratch(a, b) => &scratch[a..b],
        }
    }
}

/// Reads a string literal at `block[*pos]` whose Huffman flag is `hbit` and whose length has
/// an `n`-bit prefix (HPACK: 0x80 and 7; QPACK also uses others). A plain literal stays in
/// the block; a Huffman one is decoded (through `memo`) onto the end of `scratch`.
pub(crate) fn read_string(
    block: &[u8],
    pos: &mut usize,
    (hbit, n): (u8, u32),
    scratch: &mut Vec<u8>,
    memo: &mut HuffMemo,
) -> Result<Loc, HpackError> {
    let huff = block.get(*pos).ok_or(HpackError("truncated string"))? & hbit != 0;
    let len = read_int(block, pos, n)?;
    let end = pos
        .checked_add(len)
        .filter(|e| *e <= block.len())
        .ok_or(HpackError("truncated string"))?;
    let start = std::mem::replace(pos, end);
    if !huff {
        return Ok(Loc::Block(start, end));
    }
    let at = scratch.len();
    memo.decode(&block[start..end], scratch)?;
    Ok(Loc::Scratch(at, scratch.len()))
}

/// A `:status` value when it is three digits.
pub fn status_of(value: &[u8]) -> Option<u16> {
    match value {
        [a, b, c] if a.is_ascii_digit() && b.is_ascii_digit() && c.is_ascii_digit() => {
            Some(u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0'))
        }
        _ => None,
    }
}

/// Decoded Huffman strings memoised by their exact encoded bytes, shared by the HPACK and
/// QPACK decoders. Servers send the same Huffman literals (server, date, type, etag, ...) in
/// every response; a hit costs a length check, a short compare and a copy instead of a
/// bit-by-bit decode. Fully associative (a direct-mapped memo let two of nginx's seven
/// strings evict each other on every response), replaced round-robin, so a set of up to
/// MEMO_SLOTS strings that repeats stays memoised whatever their bytes. Slots keep their
/// buffers, so a warm memo allocates nothing.
#[derive(Debug)]
pub(crate) struct HuffMemo {
    /// Encoded lengths of the slots (0: empty), scanned first.
    lens: [u16; MEMO_SLOTS],
    keys: Vec<Vec<u8>>,
    vals: Vec<Vec<u8>>,
    next: usize,
}

/// Memo slots and the encoded length range memoised (shorter strings decode faster than a
/// lookup; longer ones rarely repeat).
const MEMO_SLOTS: usize = 16;
const MEMO_MIN: usize = 4;
const MEMO_MAX: usize = 128;

impl Default for HuffMemo {
    fn default() -> Self {
        HuffMemo {
            lens: [0; MEMO_SLOTS],
            keys: vec![Vec::new(); MEMO_SLOTS],
            vals: vec![Vec::new(); MEMO_SLOTS],
            next: 0,
        }
    }
}

impl HuffMemo {
    /// Appends the decoding of the Huffman string `raw` to `out`, from the memo when it is
    /// there.
    #[inline]
    pub(crate) fn decode(&mut self, raw: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
        let cacheable = (MEMO_MIN..=MEMO_MAX).contains(&raw.len());
        if cacheable {
            let l = raw.len() as u16;
            for k in 0..MEMO_SLOTS {
                if self.lens[k] == l && self.keys[k] == raw {
                    out.extend_from_slice(&self.vals[k]);
                    return Ok(());
                }
            }
        }
        let start = out.len();
        huffman_decode(raw, |b| out.push(b))?;
        if cacheable {
            let k = self.next;
            self.next = (k + 1) % MEMO_SLOTS;
            self.lens[k] = raw.len() as u16;
            self.keys[k].clear();
            self.keys[k].extend_from_slice(raw);
            self.vals[k].clear();
            self.vals[k].extend_from_slice(&out[start..]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    fn huff(s: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        huffman_decode(s, |b| v.push(b)).unwrap();
        v
    }

    #[test]
    fn canonical_codes_match_rfc_samples() {
        // A few codes from RFC 7541 Appendix B.
        assert_eq!(huffman_code(b'0' as usize), (0x0, 5));
        assert_eq!(huffman_code(b'a' as usize), (0x3, 5));
        assert_eq!(huffman_code(b' ' as usize), (0x14, 6));
        assert_eq!(huffman_code(b'z' as usize), (0x7b, 7));
        assert_eq!(huffman_code(0), (0x1ff8, 13));
        assert_eq!(huffman_code(255), (0x3ffffee, 26));
        assert_eq!(huffman_code(256), (0x3fffffff, 30));
    }

    #[test]
    fn huffman_rfc_strings_and_round_trip() {
        // RFC 7541 C.4 / C.6 strings.
        for (h, s) in [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
            (
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
                "Mon, 21 Oct 2013 20:13:21 GMT",
            ),
            (
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
                "https://www.example.com",
            ),
            (
                "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
                "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
            ),
        ] {
            assert_eq!(huff(&hex(h)), s.as_bytes(), "{s}");
            let mut enc = Vec::new();
            huffman_encode(s.as_bytes(), &mut enc);
            assert_eq!(enc, hex(h), "{s}");
        }
        let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
        let mut enc = Vec::new();
        huffman_encode(&all, &mut enc);
        assert_eq!(huff(&enc), all);
    }

    #[test]
    fn huffman_rejects_bad_padding_and_eos() {
        // 8 bits of padding (a whole 0xff byte after a complete symbol).
        // '0' is 00000, then 111 pads: valid alone; 8 more ones make the padding too long.
        assert!(huffman_decode(&[0x07, 0xff], |_| {}).is_err());
        assert!(huffman_decode(&[0x07], |_| {}).is_ok());
        // Padding of zeros.
        assert!(huffman_decode(&[0x00], |_| {}).is_err());
        // EOS spelled out (30 ones) then padding.
        assert!(huffman_decode(&[0xff, 0xff, 0xff, 0xff], |_| {}).is_err());
    }

    /// (name length, value length) of the newest-first dynamic entries.
    fn lens(d: &Decoder) -> Vec<(u32, u32)> {
        (0..d.len())
            .map(|i| {
                let (n, v) = d.entry(i).unwrap();
                (n.len() as u32, v.len() as u32)
            })
            .collect()
    }

    fn sum(fields: &[(&str, &str)]) -> u64 {
        fields.iter().map(|(n, v)| (n.len() + v.len()) as u64).sum()
    }

    #[test]
    fn rfc_c3_and_c4_requests() {
        let c3 = [
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ];
        let c4 = [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ];
        let lists: [&[(&str, &str)]; 3] = [
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
            ],
            &[
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":authority", "www.example.com"),
                ("cache-control", "no-cache"),
            ],
            &[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ],
        ];
        let tables: [(usize, Vec<(u32, u32)>); 3] = [
            (57, vec![(10, 15)]),
            (110, vec![(13, 8), (10, 15)]),
            (164, vec![(10, 12), (13, 8), (10, 15)]),
        ];
        for blocks in [c3, c4] {
            let mut d = Decoder::new(4096);
            for (k, b) in blocks.iter().enumerate() {
                let info = d.decode(&hex(b)).unwrap();
                assert_eq!(info.uncompressed, sum(lists[k]), "block {k}");
                assert_eq!(info.fields as usize, lists[k].len());
                assert_eq!(info.status, None);
                assert_eq!(d.table_size(), tables[k].0, "block {k}");
                assert_eq!(lens(&d), tables[k].1, "block {k}");
            }
        }
    }

    #[test]
    fn rfc_c5_and_c6_responses_with_eviction() {
        let c5 = [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d 54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e 3d31",
        ];
        let c6 = [
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab 77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ];
        let date1 = "Mon, 21 Oct 2013 20:13:21 GMT";
        let date2 = "Mon, 21 Oct 2013 20:13:22 GMT";
        let loc = "https://www.example.com";
        let cookie = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
        let lists: [Vec<(&str, &str)>; 3] = [
            vec![
                (":status", "302"),
                ("cache-control", "private"),
                ("date", date1),
                ("location", loc),
            ],
            vec![
                (":status", "307"),
                ("cache-control", "private"),
                ("date", date1),
                ("location", loc),
            ],
            vec![
                (":status", "200"),
                ("cache-control", "private"),
                ("date", date2),
                ("location", loc),
                ("content-encoding", "gzip"),
                ("set-cookie", cookie),
            ],
        ];
        let statuses = [302, 307, 200];
        let tables: [(usize, Vec<(u32, u32)>); 3] = [
            (222, vec![(8, 23), (4, 29), (13, 7), (7, 3)]),
            (222, vec![(7, 3), (8, 23), (4, 29), (13, 7)]),
            (215, vec![(10, 56), (16, 4), (4, 29)]),
        ];
        for blocks in [c5, c6] {
            // The RFC examples use a 256-byte table.
            let mut d = Decoder::new(256);
            for (k, b) in blocks.iter().enumerate() {
                let info = d.decode(&hex(b)).unwrap();
                assert_eq!(info.uncompressed, sum(&lists[k]), "block {k}");
                assert_eq!(info.status, Some(statuses[k]), "block {k}");
                assert_eq!(d.table_size(), tables[k].0, "block {k}");
                assert_eq!(lens(&d), tables[k].1, "block {k}");
            }
            // The :status entry of block 2 is recognised through the dynamic table too.
            assert!(d.entry(0).is_some());
        }
    }

    #[test]
    fn size_updates_and_malformed_blocks() {
        let mut d = Decoder::new(4096);
        // Insert, then shrink to 0 (evicts), then grow back to 100.
        d.decode(&hex("4803 3330 32")).unwrap();
        assert_eq!(d.len(), 1);
        let info = d.decode(&hex("20 3f45 88")).unwrap();
        assert_eq!(d.len(), 0);
        assert_eq!(info.status, Some(200));
        // Above the advertised limit.
        assert!(d.decode(&hex("3fe2 1f")).is_err());
        // Update after a field.
        assert!(d.decode(&hex("88 20")).is_err());
        // Index 0, index past the table, truncated strings and integers.
        for bad in [
            "80",
            "c0",
            "be",
            "40 05 61",
            "48 85 ff",
            "ff",
            "ff ff ff ff ff ff 7f",
        ] {
            assert!(d.decode(&hex(bad)).is_err(), "{bad}");
        }
        // A literal :status with a literal (Huffman) name.
        let mut name = Vec::new();
        huffman_encode(b":status", &mut name);
        let mut block = vec![0x00];
        block.push(0x80 | name.len() as u8);
        block.extend_from_slice(&name);
        block.extend_from_slice(&hex("03 343034"));
        assert_eq!(d.decode(&block).unwrap().status, Some(404));
    }

    #[test]
    fn memoised_huffman_strings_decode_as_fresh_ones() {
        let mut d = Decoder::new(4096);
        let words = [
            "www.example.com",
            "no-cache",
            "Mon, 21 Oct 2013 20:13:21 GMT",
            "Mon, 21 Oct 2013 20:13:22 GMT",
            "www.example.com",
            "abc",
            "no-cache",
        ];
        for _ in 0..3 {
            for w in words {
                // Literal without indexing, name :authority (static 1), Huffman value.
                let mut v = Vec::new();
                huffman_encode(w.as_bytes(), &mut v);
                let mut block = vec![0x01, 0x80 | v.len() as u8];
                block.extend_from_slice(&v);
                let info = d.decode(&block).unwrap();
                assert_eq!(info.uncompressed, (10 + w.len()) as u64, "{w}");
            }
        }
        // A cached string followed by a bad one of the same shape is still rejected.
        assert!(d.decode(&hex("01 84 0000 0000")).is_err());
    }

    #[test]
    fn repeated_static_blocks_are_memoised_and_table_blocks_are_not() {
        let mut d = Decoder::new(4096);
        // :status 200 (static 8), then a literal without indexing (content-length, static 28).
        let pure = hex("88 0f 0d 03 313030");
        let a = d.decode(&pure).unwrap();
        assert_eq!(a.status, Some(200));
        assert_eq!(d.decode(&pure).unwrap(), a);
        // A block that inserts and then refers to its own insertion (as nginx does): a
        // repeat is memoised and still inserts, so the table is what a full decode leaves.
        let own = hex("40 0a 637573746f6d2d6b6579 0d 637573746f6d2d686561646572 be");
        let first = d.decode(&own).unwrap();
        assert_eq!(first.fields, 2);
        assert_eq!(d.len(), 1);
        let second = d.decode(&own).unwrap();
        assert_eq!(first, second);
        assert_eq!(d.len(), 2, "the memoised decode inserted again");
        assert_eq!(d.table_size(), 2 * (10 + 13 + 32));
        // A block that reads an entry from before it follows the table, not the memo.
        let dynamic = hex("88 be");
        let before = d.decode(&dynamic).unwrap();
        assert_eq!(d.decode(&dynamic).unwrap(), before);
        d.decode(&hex("3f 01")).unwrap(); // size update to 32: the table empties
        assert!(d.decode(&dynamic).is_err(), "index 62 is gone: {before:?}");
        // The memoised pure block still decodes the same after the table changed.
        assert_eq!(d.decode(&pure).unwrap(), a);
        // A self-contained block memoised under a small table replays its evictions too.
        let mut small = Decoder::new(60);
        small.decode(&own).unwrap();
        small.decode(&own).unwrap();
        assert_eq!(
            small.len(),
            1,
            "each insertion of 55 bytes evicts the previous one"
        );
    }
}
