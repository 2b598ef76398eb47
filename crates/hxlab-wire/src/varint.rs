//! QUIC variable-length integers (RFC 9000 §16): a 2-bit length prefix, then 6, 14, 30 or 62
//! bits of value in network order.

/// Largest value a varint can hold (2⁶² − 1).
pub const MAX: u64 = (1 << 62) - 1;

/// Reads a varint from the start of `buf`: the value and its encoded length, or `None` when
/// `buf` ends first.
#[inline]
pub fn read(buf: &[u8]) -> Option<(u64, usize)> {
    let first = *buf.first()?;
    let len = 1usize << (first >> 6);
    if buf.len() < len {
        return None;
    }
    let mut v = u64::from(first & 0x3f);
    for b in &buf[1..len] {
        v = v << 8 | u64::from(*b);
    }
    Some((v, len))
}

/// Appends `v` (at most [`MAX`]; larger values are clamped to it) in its shortest encoding.
pub fn put(out: &mut Vec<u8>, v: u64) {
    let v = v.min(MAX);
    if v < 1 << 6 {
        out.push(v as u8);
    } else if v < 1 << 14 {
        out.extend_from_slice(&(v as u16 | 0x4000).to_be_bytes());
    } else if v < 1 << 30 {
        out.extend_from_slice(&(v as u32 | 0x8000_0000).to_be_bytes());
    } else {
        out.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc9000_examples_round_trip() {
        // RFC 9000 §A.1.
        let cases: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (wire, v) in cases {
            assert_eq!(read(wire), Some((v, wire.len())));
            let mut out = Vec::new();
            put(&mut out, v);
            assert_eq!(out, wire);
            assert_eq!(read(&wire[..wire.len() - 1]), None);
        }
        assert_eq!(read(&[]), None);
        let mut out = Vec::new();
        put(&mut out, u64::MAX);
        assert_eq!(read(&out), Some((MAX, 8)));
    }
}
