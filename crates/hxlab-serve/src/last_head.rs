//! The last response head a thread encoded, remembered so that a repeated head is a compare
//! and a copy instead of a table search and Huffman coding: responses to the same URL differ
//! at most in `date`, once a second. HTTP/2 (HPACK blocks) and HTTP/3 (HEADERS frames) each
//! keep one per thread through [`LastHead`].

use http::StatusCode;

/// One protocol's last encoded head: its key (the status, then every field as 0, name, 0,
/// value; no name or value holds a NUL, so the key splits back into them) and its encoding.
pub(crate) struct LastHead {
    key: Vec<u8>,
    encoded: Vec<u8>,
    scratch: Vec<u8>,
    /// The encoder state the encoding is valid in (HPACK: its table's generation).
    stamp: u64,
}

impl LastHead {
    /// Nothing remembered yet.
    pub(crate) const fn new() -> LastHead {
        LastHead {
            key: Vec::new(),
            encoded: Vec::new(),
            scratch: Vec::new(),
            stamp: 0,
        }
    }

    /// Appends to `out` the encoding of the head `status` with the fields `fields` hands to
    /// its visitor (for a routed answer, [`crate::reply::Reply::each_field`]). `encode`
    /// turns the fields, `:status` first, into the encoding, and runs only when the head
    /// differs from the last one.
    pub(crate) fn put(
        &mut self,
        status: StatusCode,
        fields: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])),
        encode: impl for<'a> FnOnce(&mut dyn Iterator<Item = (&'a [u8], &'a [u8])>, &mut Vec<u8>),
        out: &mut Vec<u8>,
    ) {
        self.put_stamped(
            status,
            fields,
            0,
            |f, block| {
                encode(f, block);
                0
            },
            out,
        )
    }

    /// Like [`LastHead::put`] for an encoder with state (a dynamic table): the remembered
    /// encoding is reused only when the encoder is at `stamp`, the stamp `encode` returned
    /// for it (an encoding that changed the state returns one that never matches).
    pub(crate) fn put_stamped(
        &mut self,
        status: StatusCode,
        fields: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])),
        stamp: u64,
        encode: impl for<'a> FnOnce(&mut dyn Iterator<Item = (&'a [u8], &'a [u8])>, &mut Vec<u8>) -> u64,
        out: &mut Vec<u8>,
    ) {
        let scratch = &mut self.scratch;
        scratch.clear();
        scratch.extend_from_slice(status.as_str().as_bytes());
        fields(&mut |n, v| {
            scratch.push(0);
            scratch.extend_from_slice(n);
            scratch.push(0);
            scratch.extend_from_slice(v);
        });
        if self.scratch != self.key || self.stamp != stamp {
            std::mem::swap(&mut self.scratch, &mut self.key);
            let mut parts = self.key.split(|&b| b == 0);
            let code = parts.next().unwrap_or_default();
            let pairs = std::iter::from_fn(|| Some((parts.next()?, parts.next()?)));
            let mut all = std::iter::once((&b":status"[..], code)).chain(pairs);
            self.encoded.clear();
            self.stamp = encode(&mut all, &mut self.encoded);
        }
        out.extend_from_slice(&self.encoded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_head_is_encoded_once() {
        let mut cache = LastHead::new();
        let mut encoded = 0;
        let mut put = |status, value: &'static [u8], out: &mut Vec<u8>| {
            cache.put(
                status,
                |f| {
                    f(b"x-a", value);
                    f(b"x-empty", b"");
                },
                |fields, out| {
                    encoded += 1;
                    for (n, v) in fields {
                        out.extend_from_slice(n);
                        out.push(b'=');
                        out.extend_from_slice(v);
                        out.push(b';');
                    }
                },
                out,
            )
        };
        let (mut a, mut b, mut c, mut d) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        put(StatusCode::OK, b"1", &mut a);
        put(StatusCode::OK, b"1", &mut b);
        put(StatusCode::OK, b"2", &mut c);
        put(StatusCode::NOT_FOUND, b"2", &mut d);
        assert_eq!(a, b":status=200;x-a=1;x-empty=;");
        assert_eq!(a, b);
        assert_eq!(c, b":status=200;x-a=2;x-empty=;");
        assert_eq!(d, b":status=404;x-a=2;x-empty=;");
        assert_eq!(encoded, 3, "the repeat came from the cache");
    }
}
