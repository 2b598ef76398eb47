//! An HPACK decoder that keeps whole fields: names and values of every field of a header
//! block, with a dynamic table of strings that follows the encoder's. For showing header
//! lists (the frame view); the load generator's hot path uses the length-only
//! [`super::Decoder`].

use super::{huffman_decode, read_int, read_size_update, HpackError, ENTRY_OVERHEAD, STATIC_TABLE};
use std::collections::VecDeque;

/// One decoded field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Name bytes (lower case on the wire in HTTP/2, not checked here).
    pub name: Vec<u8>,
    /// Value bytes.
    pub value: Vec<u8>,
    /// Sent as a literal "never indexed" (RFC 7541 §6.2.3): a sensitive field.
    pub never_indexed: bool,
}

/// Decodes complete header blocks of one direction of a connection, in order.
#[derive(Debug)]
pub struct ListDecoder {
    /// Newest entry at the front.
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    limit: usize,
}

impl ListDecoder {
    /// A decoder whose encoder may set its table size up to `limit` bytes (the
    /// SETTINGS_HEADER_TABLE_SIZE the decoding side advertised). The table starts at 4096.
    pub fn new(limit: usize) -> ListDecoder {
        ListDecoder {
            table: VecDeque::new(),
            size: 0,
            max: 4096.min(limit),
            limit,
        }
    }

    /// Current dynamic table size in bytes (RFC 7541 §4.1).
    pub fn table_size(&self) -> usize {
        self.size
    }

    fn evict_to(&mut self, max: usize) {
        while self.size > max {
            match self.table.pop_back() {
                Some((n, v)) => self.size -= n.len() + v.len() + ENTRY_OVERHEAD,
                None => break,
            }
        }
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let sz = name.len() + value.len() + ENTRY_OVERHEAD;
        if sz > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict_to(self.max - sz);
        self.table.push_front((name, value));
        self.size += sz;
    }

    fn lookup(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError("index 0")),
            1..=61 => {
                let (n, v) = STATIC_TABLE[index - 1];
                Ok((n.as_bytes(), v.as_bytes()))
            }
            _ => self
                .table
                .get(index - 62)
                .map(|(n, v)| (n.as_slice(), v.as_slice()))
                .ok_or(HpackError("index beyond the dynamic table")),
        }
    }

    /// Decodes one complete header block into its fields.
    pub fn decode(&mut self, block: &[u8]) -> Result<Vec<Field>, HpackError> {
        let mut out = Vec::new();
        let mut pos = 0usize;
        while pos < block.len() {
            let b = block[pos];
            if b & 0x80 != 0 {
                let i = read_int(block, &mut pos, 7)?;
                let (n, v) = self.lookup(i)?;
                out.push(Field {
                    name: n.to_vec(),
                    value: v.to_vec(),
                    never_indexed: false,
                });
            } else if b & 0xe0 == 0x20 {
                if !out.is_empty() {
                    return Err(HpackError("table size update after a field"));
                }
                let m = read_size_update(block, &mut pos, self.limit)?;
                self.max = m;
                self.evict_to(m);
            } else {
                let (prefix, index) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                let never_indexed = !index && b & 0x10 != 0;
                let ni = read_int(block, &mut pos, prefix)?;
                let name = if ni == 0 {
                    read_string(block, &mut pos)?
                } else {
                    self.lookup(ni)?.0.to_vec()
                };
                let value = read_string(block, &mut pos)?;
                if index {
                    self.insert(name.clone(), value.clone());
                }
                out.push(Field {
                    name,
                    value,
                    never_indexed,
                });
            }
        }
        Ok(out)
    }
}

/// Reads a string literal (Huffman-coded or not) at `buf[*pos]`.
fn read_string(buf: &[u8], pos: &mut usize) -> Result<Vec<u8>, HpackError> {
    let huffman = *buf.get(*pos).ok_or(HpackError("truncated string"))? & 0x80 != 0;
    let len = read_int(buf, pos, 7)?;
    let end = pos
        .checked_add(len)
        .filter(|&e| e <= buf.len())
        .ok_or(HpackError("truncated string"))?;
    let raw = &buf[*pos..end];
    *pos = end;
    if !huffman {
        return Ok(raw.to_vec());
    }
    let mut out = Vec::with_capacity(raw.len() * 8 / 5 + 1);
    huffman_decode(raw, |b| out.push(b))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(d: &mut ListDecoder, block: &[u8]) -> Vec<(String, String)> {
        d.decode(block)
            .unwrap()
            .into_iter()
            .map(|f| {
                (
                    String::from_utf8(f.name).unwrap(),
                    String::from_utf8(f.value).unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn rfc7541_c4_requests_with_huffman_and_the_dynamic_table() {
        let mut d = ListDecoder::new(4096);
        // C.4.1
        let b1 = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        assert_eq!(
            fields(&mut d, &b1),
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
        let f = fields(&mut d, &b2);
        assert_eq!(f[3], (":authority".into(), "www.example.com".into()));
        assert_eq!(f[4], ("cache-control".into(), "no-cache".into()));
        assert_eq!(d.table_size(), 110);
    }

    #[test]
    fn hostile_blocks_are_errors_not_panics() {
        let mut d = ListDecoder::new(4096);
        assert!(d.decode(&[0x80]).is_err()); // index 0
        assert!(d.decode(&[0xbe]).is_err()); // empty dynamic table
        assert!(d.decode(&[0x3f, 0xff, 0xff, 0xff, 0x7f]).is_err()); // size update above limit
        assert!(d
            .decode(&[0x40, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x0f])
            .is_err()); // huge string
        assert!(d.decode(&[0x82, 0x20]).is_err()); // size update after a field
        assert!(d.decode(&[0x10, 0x81, 0xff]).is_err()); // bad Huffman
        let never = d.decode(&[0x10, 0x01, b'a', 0x01, b'b']).unwrap();
        assert!(never[0].never_indexed);
    }
}
