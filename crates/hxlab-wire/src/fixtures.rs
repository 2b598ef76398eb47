//! Test data more than one codec's tests share.

/// A request's header fields as the load client sends them (pseudo-headers first, then a
/// user agent and a custom field): the HPACK and QPACK encoders' round-trip tests take the
/// same request.
pub(crate) const REQUEST: [(&[u8], &[u8]); 6] = [
    (b":method", b"GET"),
    (b":scheme", b"https"),
    (b":authority", b"127.0.0.1:4433"),
    (b":path", b"/bytes/100"),
    (b"user-agent", b"hxlab/0.1.0"),
    (b"x-custom-header", b"some value"),
];
