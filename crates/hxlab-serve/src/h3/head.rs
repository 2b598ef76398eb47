//! Request heads in, response heads out: QPACK field sections ([`hxlab_wire::qpack`]; the
//! connection's dynamic table lives in `qpack.rs`) to and from `http` types, with RFC 9114
//! §4.3's rules for a well-formed request, and the static-only response head cached per
//! thread (what a connection sends until, or unless, the client allows a dynamic table).

use crate::last_head::LastHead;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use hxlab_wire::h3::frame::{DATA, HEADERS};
use hxlab_wire::h3::write_frame_head;
use hxlab_wire::qpack::{encode_field_section, Decoded, QpackError};

/// A request head as the router wants it.
pub(super) struct Head {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    /// `content-length`, if the request had one.
    pub content_length: Option<u64>,
    /// The `priority` field (RFC 9218), if the request sent a valid one.
    pub priority: Option<hxlab_wire::priority::Priority>,
}

/// Why a field section is not a request we answer.
#[derive(Debug)]
pub(super) enum HeadError {
    /// Undecodable QPACK: a connection error (QPACK_DECOMPRESSION_FAILED).
    Qpack(QpackError),
    /// A malformed request (RFC 9114 §4.1.2): a stream error (H3_MESSAGE_ERROR).
    Malformed,
    /// Larger than the advertised SETTINGS_MAX_FIELD_SECTION_SIZE.
    TooLarge,
}

/// Pseudo-header fields of a request, as they arrive.
#[derive(Default)]
struct Pseudo<'a> {
    method: Option<&'a [u8]>,
    scheme: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
    path: Option<&'a [u8]>,
}

/// Marker errors raised inside the decode callback that are really message errors.
const MALFORMED: &str = "malformed:";

fn malformed(what: &'static str) -> QpackError {
    QpackError(what)
}

/// Headers that HTTP/3 forbids in a message (RFC 9114 §4.2): connection-specific fields.
fn connection_specific(name: &[u8]) -> bool {
    matches!(
        name,
        b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding" | b"upgrade"
    )
}

/// One field line handed over by a decoder.
pub(super) type FieldSink<'a> = &'a mut dyn FnMut(&[u8], &[u8]) -> Result<(), QpackError>;

/// Decodes and validates one request field section: `decode` runs the connection's decoder
/// over it, handing each field line to its sink. `Ok(None)`: the section is blocked (it
/// references inserts that have not arrived; nothing was handed over).
pub(super) fn decode_request(
    decode: impl FnOnce(FieldSink<'_>) -> Result<Decoded, QpackError>,
) -> Result<Option<Head>, HeadError> {
    let mut method: Option<Vec<u8>> = None;
    let mut scheme: Option<Vec<u8>> = None;
    let mut authority: Option<Vec<u8>> = None;
    let mut path: Option<Vec<u8>> = None;
    let mut headers = HeaderMap::new();
    let mut regular_seen = false;
    let mut content_length: Option<u64> = None;
    let mut priority = hxlab_wire::priority::Field::Absent;
    let r = decode(&mut |name, value| {
        if let Some(pseudo) = name.strip_prefix(b":") {
            if regular_seen {
                return Err(malformed("malformed: pseudo-header after a regular field"));
            }
            let slot = match pseudo {
                b"method" => &mut method,
                b"scheme" => &mut scheme,
                b"authority" => &mut authority,
                b"path" => &mut path,
                _ => return Err(malformed("malformed: unknown pseudo-header")),
            };
            if slot.is_some() {
                return Err(malformed("malformed: duplicate pseudo-header"));
            }
            *slot = Some(value.to_vec());
            return Ok(());
        }
        regular_seen = true;
        if name.iter().any(|b| b.is_ascii_uppercase()) {
            return Err(malformed("malformed: uppercase field name"));
        }
        if connection_specific(name) || (name == b"te" && value != b"trailers") {
            return Err(malformed("malformed: connection-specific field"));
        }
        let n = HeaderName::from_bytes(name).map_err(|_| malformed("malformed: field name"))?;
        let v = HeaderValue::from_bytes(value).map_err(|_| malformed("malformed: field value"))?;
        if n == http::header::CONTENT_LENGTH {
            let len = std::str::from_utf8(value)
                .ok()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .ok_or(malformed("malformed: content-length"))?;
            if content_length.is_some_and(|c| c != len) {
                return Err(malformed("malformed: conflicting content-length"));
            }
            content_length = Some(len);
        }
        if name == b"priority" {
            priority.add_line(value);
        }
        headers.append(n, v);
        Ok(())
    });
    match r {
        Ok(Decoded::Done) => {}
        Ok(Decoded::Blocked) => return Ok(None),
        Err(e) => {
            return Err(if e.0.starts_with(MALFORMED) {
                HeadError::Malformed
            } else if e.0 == "field section larger than we accept" {
                HeadError::TooLarge
            } else {
                HeadError::Qpack(e)
            })
        }
    }
    let p = Pseudo {
        method: method.as_deref(),
        scheme: scheme.as_deref(),
        authority: authority.as_deref(),
        path: path.as_deref(),
    };
    let (method, uri) = request_target(&p)?;
    Ok(Some(Head {
        method,
        uri,
        headers,
        content_length,
        priority: priority.priority(),
    }))
}

/// The method and URI from the pseudo-headers (§4.3.1): `:method`, `:scheme` and a non-empty
/// `:path` are required, except for CONNECT, which has only `:authority`.
fn request_target(p: &Pseudo) -> Result<(Method, Uri), HeadError> {
    let m = p.method.ok_or(HeadError::Malformed)?;
    let method = Method::from_bytes(m).map_err(|_| HeadError::Malformed)?;
    let mut b = Uri::builder();
    if method == Method::CONNECT {
        if p.scheme.is_some() || p.path.is_some() {
            return Err(HeadError::Malformed);
        }
        let a = p.authority.ok_or(HeadError::Malformed)?;
        b = b.authority(a);
    } else {
        let scheme = p.scheme.ok_or(HeadError::Malformed)?;
        let path = p
            .path
            .filter(|v| !v.is_empty())
            .ok_or(HeadError::Malformed)?;
        b = b.scheme(scheme).path_and_query(path);
        if let Some(a) = p.authority {
            b = b.authority(a);
        }
    }
    let uri = b.build().map_err(|_| HeadError::Malformed)?;
    Ok((method, uri))
}

thread_local! {
    /// The last response head this thread encoded, and its HEADERS frame.
    static LAST_HEAD: std::cell::RefCell<LastHead> = const { std::cell::RefCell::new(LastHead::new()) };
}

/// Appends a HEADERS frame carrying `status` and the fields `fields` hands to its visitor
/// (for a routed answer, [`crate::reply::Reply::each_field`]: the field list every protocol
/// sends), static table only: the same frame for every connection, so the last one is
/// cached per thread.
pub(super) fn put_static_response_head(
    status: StatusCode,
    fields: impl FnOnce(&mut dyn FnMut(&[u8], &[u8])),
    out: &mut Vec<u8>,
) {
    LAST_HEAD.with_borrow_mut(|last| {
        last.put(
            status,
            fields,
            |fields, frame| {
                let mut section = Vec::new();
                encode_field_section(fields, &mut section);
                write_frame_head(frame, HEADERS, section.len() as u64);
                frame.extend_from_slice(&section);
            },
            out,
        )
    });
}

/// A DATA frame head for `len` payload bytes, as its own buffer.
pub(super) fn data_head(len: u64) -> Bytes {
    let mut b = Vec::with_capacity(16);
    write_frame_head(&mut b, DATA, len);
    Bytes::from(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_field_section(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut out,
        );
        out
    }

    /// Decodes `block` as a connection without a dynamic table does.
    fn decode_block(block: &[u8], max: u64) -> Result<Head, HeadError> {
        let mut d = hxlab_wire::qpack::QpackDecoder::new(0, 0);
        decode_request(|f| d.decode(0, block, max, f)).map(|h| h.expect("not blocked"))
    }

    fn decode(fields: &[(&str, &str)]) -> Result<Head, HeadError> {
        decode_block(&block(fields), 64 << 10)
    }

    #[test]
    fn a_plain_get_decodes_to_method_uri_and_headers() {
        let h = decode(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "localhost:8443"),
            (":path", "/bytes/100?x=1"),
            ("user-agent", "hxlab"),
            ("content-length", "0"),
        ])
        .unwrap();
        assert_eq!(h.method, Method::GET);
        assert_eq!(h.uri.path(), "/bytes/100");
        assert_eq!(h.uri.query(), Some("x=1"));
        assert_eq!(h.uri.authority().unwrap().as_str(), "localhost:8443");
        assert_eq!(h.headers["user-agent"], "hxlab");
        assert_eq!(h.content_length, Some(0));
    }

    #[test]
    fn malformed_requests_are_message_errors() {
        let base = [(":method", "GET"), (":scheme", "https"), (":path", "/")];
        for (what, extra) in [
            (
                "pseudo after regular",
                vec![("accept", "*/*"), (":authority", "x")],
            ),
            ("unknown pseudo", vec![(":protocol", "x")]),
            ("duplicate pseudo", vec![(":path", "/again")]),
            ("uppercase name", vec![("Accept", "*/*")]),
            ("connection header", vec![("connection", "close")]),
            ("te not trailers", vec![("te", "gzip")]),
            ("bad content-length", vec![("content-length", "x")]),
        ] {
            let mut f: Vec<(&str, &str)> = base.to_vec();
            f.extend(extra);
            assert!(
                matches!(decode(&f), Err(HeadError::Malformed)),
                "{what} must be malformed"
            );
        }
        for missing in [":method", ":scheme", ":path"] {
            let f: Vec<(&str, &str)> = base
                .iter()
                .copied()
                .filter(|(n, _)| *n != missing)
                .collect();
            assert!(
                matches!(decode(&f), Err(HeadError::Malformed)),
                "without {missing}"
            );
        }
        assert!(matches!(
            decode_block(&[0x01, 0x00], 1 << 10),
            Err(HeadError::Qpack(_))
        ));
        assert!(matches!(
            decode_block(&block(&base), 20),
            Err(HeadError::TooLarge)
        ));
    }

    #[test]
    fn a_response_head_round_trips_through_the_decoder() {
        let fields = |f: &mut dyn FnMut(&[u8], &[u8])| {
            f(b"content-length", b"9");
            f(b"x-a", b"b");
            f(b"x-empty", b"");
        };
        let mut out = Vec::new();
        put_static_response_head(StatusCode::NOT_FOUND, fields, &mut out);
        // Twice: the second comes from the cache and must be the same frame.
        let mut again = Vec::new();
        put_static_response_head(StatusCode::NOT_FOUND, fields, &mut again);
        assert_eq!(out, again);
        let (kind, len, used) = hxlab_wire::h3::parse_frame_head(&out).unwrap();
        assert_eq!((kind, len as usize), (HEADERS, out.len() - used));
        let mut got = Vec::new();
        hxlab_wire::qpack::decode_fields(&out[used..], 1 << 20, |n, v| {
            got.push((n.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = [
            (":status", "404"),
            ("content-length", "9"),
            ("x-a", "b"),
            ("x-empty", ""),
        ]
        .iter()
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
        assert_eq!(got, want);
        // Another status with the same fields is another frame, not the cached one.
        let mut other = Vec::new();
        put_static_response_head(StatusCode::OK, fields, &mut other);
        assert_ne!(other, out);
    }
}
