//! Prefix integers (RFC 7541 §5.1): a value in the low `n` bits of a first byte, or, when it
//! does not fit, the all-ones prefix followed by 7-bit groups, least significant first. HPACK
//! and QPACK (RFC 9204 §4.1.1) both use them; this is the one reader and writer of them.

/// Why a prefix integer could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// The bytes ended before the integer did.
    #[error("truncated integer")]
    Truncated,
    /// The value does not fit in 64 bits (or has more continuation bytes than one could).
    #[error("integer too large")]
    Overflow,
}

/// Reads the integer with an `n`-bit prefix (1..=8) at `buf[*pos]`, advancing `pos` past it.
/// The bits of the first byte above the prefix are the caller's (flags) and are ignored.
#[inline]
pub fn read(buf: &[u8], pos: &mut usize, n: u32) -> Result<u64, PrefixError> {
    let mask = (1u64 << n) - 1;
    let first = u64::from(*buf.get(*pos).ok_or(PrefixError::Truncated)?) & mask;
    *pos += 1;
    if first < mask {
        return Ok(first);
    }
    let mut v = mask;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos).ok_or(PrefixError::Truncated)?;
        *pos += 1;
        if shift > 56 {
            return Err(PrefixError::Overflow);
        }
        v = v
            .checked_add(u64::from(b & 0x7f) << shift)
            .ok_or(PrefixError::Overflow)?;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
}

/// Appends `v` with an `n`-bit prefix; `first` carries the bits above the prefix (flags).
pub fn write(out: &mut Vec<u8>, first: u8, n: u32, v: u64) {
    let mask = (1u64 << n) - 1;
    if v < mask {
        out.push(first | v as u8);
        return;
    }
    out.push(first | mask as u8);
    let mut r = v - mask;
    while r >= 128 {
        out.push((r as u8 & 0x7f) | 0x80);
        r >>= 7;
    }
    out.push(r as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc7541_c1_examples_round_trip() {
        // C.1.1: 10 in a 5-bit prefix; C.1.2: 1337 in a 5-bit prefix; C.1.3: 42 at 8 bits.
        for (v, n, wire) in [
            (10u64, 5u32, &[0x0a][..]),
            (1337, 5, &[0x1f, 0x9a, 0x0a]),
            (42, 8, &[0x2a]),
        ] {
            let mut out = Vec::new();
            write(&mut out, 0, n, v);
            assert_eq!(out, wire);
            let mut pos = 0;
            assert_eq!(read(wire, &mut pos, n), Ok(v));
            assert_eq!(pos, wire.len());
        }
        // Flag bits above the prefix are not part of the value.
        let mut pos = 0;
        assert_eq!(read(&[0xea], &mut pos, 5), Ok(10));
    }

    #[test]
    fn every_split_of_a_long_integer_is_truncated_and_huge_ones_overflow() {
        let mut out = Vec::new();
        write(&mut out, 0x80, 7, 1 << 62);
        let mut pos = 0;
        assert_eq!(read(&out, &mut pos, 7), Ok(1 << 62));
        for cut in 0..out.len() {
            let mut pos = 0;
            assert_eq!(read(&out[..cut], &mut pos, 7), Err(PrefixError::Truncated));
        }
        let huge = [
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        assert_eq!(read(&huge, &mut 0, 7), Err(PrefixError::Overflow));
    }
}
