//! Request heads in, response heads out: HPACK ([`hxlab_wire::hpack`]) to what the router
//! takes, with RFC 9113 §8.2–8.3's rules for a well-formed request, and response heads
//! encoded with the connection's dynamic table ([`ResponseHpack`]), the last one remembered
//! per connection ([`crate::last_head`]) so a repeated head is a compare and a copy. With no
//! table (`--header-table 0`), heads are static-only and remembered per thread instead.

use crate::last_head::LastHead;
use crate::reply::Reply;
use crate::routes::Ctx;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use hxlab_wire::hpack::{
    huffman_encode, response_field_indexed, Decoder, Encoder, HpackError, STATIC_TABLE,
};
use hxlab_wire::prefix::write as write_int;
use hxlab_wire::priority::{self, Priority};

/// A request head as the router wants it, and what the stream needs of it later.
pub(super) struct Head {
    pub method: Method,
    pub uri: Uri,
    /// Regular header fields: kept only for routes that read them (`/headers`, a replay).
    pub headers: HeaderMap,
    pub content_length: Option<u64>,
    /// Where `:scheme` and `:authority` are in the decoding scratch buffer (empty when
    /// absent), for the pushes of this request.
    pub scheme: std::ops::Range<usize>,
    pub authority: std::ops::Range<usize>,
    /// The `priority` field (RFC 9218), if the request sent a valid one.
    pub priority: Option<Priority>,
}

/// Why a header block is not a request we answer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum HeadError {
    /// Undecodable HPACK: a connection error (COMPRESSION_ERROR).
    Hpack(HpackError),
    /// A malformed request (RFC 9113 §8.1.1): a stream error (PROTOCOL_ERROR).
    Malformed(&'static str),
    /// The decoded header list is over SETTINGS_MAX_HEADER_LIST_SIZE: answered with 431.
    TooLarge,
}

/// Headers HTTP/2 forbids in a message (RFC 9113 §8.2.2).
fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

/// A field name as RFC 9113 §8.2.1 allows it: a token in lower case.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty()
        && name.iter().all(|&b| {
            matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'!' | b'#' | b'$' | b'%' | b'&' | b'\''
                | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~')
        })
}

/// A field value as RFC 9113 §8.2.1 allows it: no NUL, CR or LF, no whitespace at either end.
fn valid_value(v: &[u8]) -> bool {
    !v.iter().any(|&b| b == 0 || b == b'\r' || b == b'\n')
        && !matches!(v.first(), Some(b' ' | b'\t'))
        && !matches!(v.last(), Some(b' ' | b'\t'))
}

/// Whether a route reads request header fields (everything else gets an empty map, so the
/// common request builds none).
fn wants_headers(ctx: &Ctx, path: &[u8]) -> bool {
    ctx.replay.is_some() || path == b"/headers" || path.starts_with(b"/headers?")
}

/// Pseudo-header fields of a request (ranges of `buf`, method, scheme, authority, path) and
/// the decoding state, filled by the field callback.
struct Fields<'a> {
    buf: &'a mut Vec<u8>,
    pseudo: [Option<std::ops::Range<usize>>; 4],
    regular_seen: bool,
    keep: bool,
    headers: HeaderMap,
    content_length: Option<u64>,
    priority: priority::Field,
    size: u64,
    error: Option<HeadError>,
}

const METHOD: usize = 0;
const SCHEME: usize = 1;
const AUTHORITY: usize = 2;
const PATH: usize = 3;

impl Fields<'_> {
    fn get(&self, k: usize) -> Option<&[u8]> {
        self.pseudo[k].clone().map(|r| &self.buf[r])
    }

    fn field(&mut self, ctx: &Ctx, name: &[u8], value: &[u8], max: u64) {
        if self.error.is_some() {
            return;
        }
        self.size += (name.len() + value.len() + 32) as u64;
        if self.size > max {
            self.error = Some(HeadError::TooLarge);
            return;
        }
        if let Err(e) = self.take(ctx, name, value) {
            self.error = Some(HeadError::Malformed(e));
        }
    }

    fn take(&mut self, ctx: &Ctx, name: &[u8], value: &[u8]) -> Result<(), &'static str> {
        if let Some(pseudo) = name.strip_prefix(b":") {
            if self.regular_seen {
                return Err("pseudo-header after a regular field");
            }
            let k = match pseudo {
                b"method" => METHOD,
                b"scheme" => SCHEME,
                b"authority" => AUTHORITY,
                b"path" => PATH,
                _ => return Err("unknown pseudo-header"),
            };
            if self.pseudo[k].is_some() {
                return Err("duplicate pseudo-header");
            }
            if !valid_value(value) {
                return Err("pseudo-header value");
            }
            let at = self.buf.len();
            self.buf.extend_from_slice(value);
            self.pseudo[k] = Some(at..self.buf.len());
            return Ok(());
        }
        if !self.regular_seen {
            self.regular_seen = true;
            self.keep = wants_headers(ctx, self.get(PATH).unwrap_or(b""));
        }
        if !valid_name(name) {
            return Err("field name");
        }
        if !valid_value(value) {
            return Err("field value");
        }
        if connection_specific(name) || (name == b"te" && value != b"trailers") {
            return Err("connection-specific field");
        }
        if name == b"content-length" {
            let len = std::str::from_utf8(value)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or("content-length")?;
            if self.content_length.is_some_and(|c| c != len) {
                return Err("conflicting content-length");
            }
            self.content_length = Some(len);
        }
        if name == b"priority" {
            self.priority.add_line(value);
        }
        if self.keep {
            let n = HeaderName::from_bytes(name).map_err(|_| "field name")?;
            let v = HeaderValue::from_bytes(value).map_err(|_| "field value")?;
            self.headers.append(n, v);
        }
        Ok(())
    }
}

/// Decodes and validates one complete request header block; the pseudo-header values go to
/// `scratch` (cleared first), which [`Head`] points into.
pub(super) fn decode_request(
    ctx: &Ctx,
    block: &[u8],
    decoder: &mut Decoder,
    scratch: &mut Vec<u8>,
) -> Result<Head, HeadError> {
    let max = u64::from(ctx.limits.max_header_size);
    scratch.clear();
    let mut f = Fields {
        buf: scratch,
        pseudo: Default::default(),
        regular_seen: false,
        keep: false,
        headers: HeaderMap::new(),
        content_length: None,
        priority: priority::Field::Absent,
        size: 0,
        error: None,
    };
    decoder
        .decode_fields(block, |field| f.field(ctx, field.name, field.value, max))
        .map_err(HeadError::Hpack)?;
    if let Some(e) = f.error.take() {
        return Err(e);
    }
    let (method, uri) = request_target(&f)?;
    Ok(Head {
        method,
        uri,
        headers: f.headers,
        content_length: f.content_length,
        scheme: f.pseudo[SCHEME].clone().unwrap_or_default(),
        authority: f.pseudo[AUTHORITY].clone().unwrap_or_default(),
        priority: f.priority.priority(),
    })
}

/// Decodes a trailer block: fields only, no pseudo-headers (RFC 9113 §8.1).
pub(super) fn decode_trailers(
    ctx: &Ctx,
    block: &[u8],
    decoder: &mut Decoder,
) -> Result<(), HeadError> {
    let max = u64::from(ctx.limits.max_header_size);
    let mut error = None;
    let mut size = 0u64;
    decoder
        .decode_fields(block, |field| {
            size += (field.name.len() + field.value.len() + 32) as u64;
            if error.is_none() {
                if field.name.starts_with(b":") {
                    error = Some(HeadError::Malformed("pseudo-header in trailers"));
                } else if !valid_name(field.name) || !valid_value(field.value) {
                    error = Some(HeadError::Malformed("trailer field"));
                } else if size > max {
                    error = Some(HeadError::TooLarge);
                }
            }
        })
        .map_err(HeadError::Hpack)?;
    error.map_or(Ok(()), Err)
}

/// The method and URI from the pseudo-headers (§8.3.1): `:method`, `:scheme` and a non-empty
/// `:path` are required, except for CONNECT, which has only `:authority`. The URI carries
/// scheme and authority only when a route reads them; otherwise it is the path alone.
fn request_target(f: &Fields) -> Result<(Method, Uri), HeadError> {
    let bad = HeadError::Malformed;
    let m = f.get(METHOD).ok_or(bad("no :method"))?;
    let method = Method::from_bytes(m).map_err(|_| bad(":method"))?;
    if method == Method::CONNECT {
        if f.get(SCHEME).is_some() || f.get(PATH).is_some() {
            return Err(bad("CONNECT with :scheme or :path"));
        }
        let a = f.get(AUTHORITY).ok_or(bad("CONNECT without :authority"))?;
        let uri = Uri::builder()
            .authority(a)
            .build()
            .map_err(|_| bad(":authority"))?;
        return Ok((method, uri));
    }
    let scheme = f.get(SCHEME).ok_or(bad("no :scheme"))?;
    let path = f
        .get(PATH)
        .filter(|p| !p.is_empty())
        .ok_or(bad("no :path"))?;
    let uri = if f.keep || path.first() != Some(&b'/') {
        let mut b = Uri::builder().scheme(scheme).path_and_query(path);
        if let Some(a) = f.get(AUTHORITY) {
            b = b.authority(a);
        }
        b.build().map_err(|_| bad(":path"))?
    } else {
        Uri::try_from(path).map_err(|_| bad(":path"))?
    };
    Ok((method, uri))
}

/// Appends one field as HPACK against the static table only: fully indexed when the static
/// table has the pair, else a literal without indexing (name indexed when the table has it),
/// the value Huffman-coded when that is shorter.
pub(super) fn put_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    let mut name_index = 0;
    for (i, (n, v)) in STATIC_TABLE.iter().enumerate() {
        if n.as_bytes() == name {
            if v.as_bytes() == value {
                write_int(out, 0x80, 7, i as u64 + 1);
                return;
            }
            if name_index == 0 {
                name_index = i + 1;
            }
        }
    }
    write_int(out, 0x00, 4, name_index as u64);
    if name_index == 0 {
        put_string(out, name);
    }
    put_string(out, value);
}

fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    let mut huff = Vec::with_capacity(s.len());
    huffman_encode(s, &mut huff);
    if huff.len() < s.len() {
        write_int(out, 0x80, 7, huff.len() as u64);
        out.extend_from_slice(&huff);
    } else {
        write_int(out, 0x00, 7, s.len() as u64);
        out.extend_from_slice(s);
    }
}

thread_local! {
    /// The last static-only response head this thread encoded, and its HPACK block: shared
    /// by the thread's connections whose encoder uses no dynamic table (nothing in the block
    /// depends on the connection).
    static LAST_HEAD: std::cell::RefCell<LastHead> = const { std::cell::RefCell::new(LastHead::new()) };
}

/// One connection's sending side of HPACK: its encoder (a dynamic table bounded by
/// min(`--header-table`, the client's SETTINGS_HEADER_TABLE_SIZE)) and its last response
/// head, whose block is reused while the table has not changed since it was encoded.
pub(super) struct ResponseHpack {
    encoder: Encoder,
    last: LastHead,
    /// Whether the table size in force was counted in `/stats` (at the first response).
    counted: bool,
}

impl ResponseHpack {
    /// The encoder of a connection whose server lets it use `own` bytes of table.
    pub(super) fn new(own: u64) -> ResponseHpack {
        ResponseHpack {
            encoder: Encoder::with_limit(own as usize).huffman(),
            last: LastHead::new(),
            counted: false,
        }
    }

    /// The client's SETTINGS_HEADER_TABLE_SIZE.
    pub(super) fn set_peer_limit(&mut self, limit: u32) {
        self.encoder.set_peer_limit(limit);
    }

    /// The table size the encoder uses now, the first time it is asked (for `/stats`).
    pub(super) fn first_table_limit(&mut self) -> Option<u64> {
        (!std::mem::replace(&mut self.counted, true)).then_some(self.encoder.table_limit() as u64)
    }

    /// Opens a header block encoded against the static table only (a 103, a pushed
    /// request) with the size updates it owes.
    fn open_static_block(&mut self, out: &mut Vec<u8>) {
        self.encoder.write_size_update(out);
    }
}

/// Appends the HPACK block of `reply`'s response head to `out`: fields worth indexing go
/// into the connection's table ([`response_field_indexed`]); with no table, the block is
/// the thread's static-only one.
pub(super) fn put_response_block(
    ctx: &Ctx,
    reply: &Reply,
    hpack: &mut ResponseHpack,
    out: &mut Vec<u8>,
) {
    hpack.encoder.write_size_update(out);
    let fields = |f: &mut dyn FnMut(&[u8], &[u8])| reply.each_field(ctx.alt_svc.as_ref(), f);
    if hpack.encoder.table_limit() == 0 {
        LAST_HEAD.with_borrow_mut(|last| {
            last.put(
                reply.status,
                fields,
                |fields, block| fields.for_each(|(n, v)| put_field(block, n, v)),
                out,
            )
        });
        return;
    }
    let encoder = &mut hpack.encoder;
    let before = encoder.generation();
    hpack.last.put_stamped(
        reply.status,
        fields,
        before,
        |fields, block| {
            encoder.encode_indexing(fields, response_field_indexed, block);
            // Reusable only if encoding it inserted nothing: a repeat is all indexes.
            let after = encoder.generation();
            if after == before {
                before
            } else {
                u64::MAX
            }
        },
        out,
    );
}

/// The HPACK block of a 103 Early Hints response carrying `link`.
pub(super) fn early_hints_block(link: &HeaderValue, hpack: &mut ResponseHpack, out: &mut Vec<u8>) {
    hpack.open_static_block(out);
    put_field(out, b":status", b"103");
    put_field(out, b"link", link.as_bytes());
}

/// The HPACK block of a pushed request: GET `path` on `scheme://authority`.
pub(super) fn push_request_block(
    (scheme, authority, path): (&[u8], &[u8], &[u8]),
    hpack: &mut ResponseHpack,
    out: &mut Vec<u8>,
) {
    hpack.open_static_block(out);
    put_field(out, b":method", b"GET");
    put_field(out, b":scheme", scheme);
    put_field(out, b":authority", authority);
    put_field(out, b":path", path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_only_fields_round_trip_through_the_decoder() {
        let mut out = Vec::new();
        put_field(&mut out, b":status", b"200");
        put_field(&mut out, b":status", b"431");
        put_field(&mut out, b"content-type", b"application/octet-stream");
        put_field(&mut out, b"x-custom", b"some value");
        assert_eq!(out[0], 0x88, ":status 200 is static index 8");
        let mut d = Decoder::new(4096);
        let mut got = Vec::new();
        d.decode_fields(&out, |f| got.push((f.name.to_vec(), f.value.to_vec())))
            .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [
            (":status", "200"),
            (":status", "431"),
            ("content-type", "application/octet-stream"),
            ("x-custom", "some value"),
        ]
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
        assert_eq!(got, want);
        assert_eq!(d.table_size(), 0, "nothing was inserted");
    }

    #[test]
    fn names_and_values_are_checked() {
        assert!(valid_name(b"x-a_b.c"));
        assert!(!valid_name(b"X-Upper"));
        assert!(!valid_name(b"a b"));
        assert!(!valid_name(b""));
        assert!(valid_value(b"a b"));
        assert!(!valid_value(b" lead"));
        assert!(!valid_value(b"a\r\nb"));
    }
}
