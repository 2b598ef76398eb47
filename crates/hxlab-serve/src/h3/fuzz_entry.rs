//! Fuzz entry points: the origin's own parsing of what an HTTP/3 client sends, without QUIC:
//! a request stream's field section and the client's control stream. Public only so the fuzz targets
//! (`fuzz/fuzz_targets/serve_h3.rs`) reach it; the server itself calls the same code through
//! its streams.

use super::control::reason;
use super::head::{decode_request, HeadError};
use hxlab_wire::h3::control::{ControlReader, Sender};
use hxlab_wire::qpack::FieldDecoder;

/// Why a request head was refused, as the server acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadRefusal {
    /// Undecodable QPACK: the connection is closed (QPACK_DECOMPRESSION_FAILED).
    Qpack(String),
    /// A malformed request: the stream is reset (H3_MESSAGE_ERROR).
    Malformed,
    /// Larger than the advertised SETTINGS_MAX_FIELD_SECTION_SIZE.
    TooLarge,
}

/// Decodes and checks one request field section (a HEADERS frame's payload) as the server
/// does, with `max_size` as its SETTINGS_MAX_FIELD_SECTION_SIZE; returns the request's method
/// and target (`GET /x`) when it would be answered.
pub fn request_head(block: &[u8], max_size: u64) -> Result<String, HeadRefusal> {
    match decode_request(block, max_size, &mut FieldDecoder::new()) {
        Ok(head) => Ok(format!("{} {}", head.method, head.uri)),
        Err(HeadError::Qpack(e)) => Err(HeadRefusal::Qpack(e.to_string())),
        Err(HeadError::Malformed) => Err(HeadRefusal::Malformed),
        Err(HeadError::TooLarge) => Err(HeadRefusal::TooLarge),
    }
}

/// Reads the client's control stream (after its stream type) as the server does, its bytes
/// arriving in the given pieces: `Ok(settings_seen)` while it is acceptable so far, or the
/// HTTP/3 error code and reason the server closes the connection with.
pub fn control_stream<'a>(
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Result<bool, (u64, &'static str)> {
    let mut reader = ControlReader::new(Sender::Client);
    for piece in pieces {
        reader.feed(piece).map_err(reason)?;
    }
    Ok(reader.settings_seen())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_wire::h3::code;

    #[test]
    fn control_stream_in_any_split_and_request_heads() {
        // SETTINGS (one setting), an unknown frame type 0x21 with 3 bytes, GOAWAY 0.
        let wire = [
            0x04, 0x02, 0x06, 0x10, 0x21, 0x03, 1, 2, 3, 0x07, 0x01, 0x00,
        ];
        for split in 0..=wire.len() {
            let (a, b) = wire.split_at(split);
            assert_eq!(control_stream([a, b]), Ok(true), "split {split}");
        }
        assert_eq!(
            control_stream([&[0x07u8, 0x01, 0x00][..]]).map_err(|e| e.0),
            Err(code::H3_MISSING_SETTINGS)
        );
        let mut block = Vec::new();
        hxlab_wire::qpack::encode_field_section(
            [
                (&b":method"[..], &b"GET"[..]),
                (b":scheme", b"https"),
                (b":authority", b"h"),
                (b":path", b"/x"),
            ],
            &mut block,
        );
        assert_eq!(request_head(&block, 1 << 16), Ok("GET https://h/x".into()));
        assert_eq!(request_head(&block, 10), Err(HeadRefusal::TooLarge));
        assert_eq!(
            request_head(&block[..3], 1 << 16),
            Err(HeadRefusal::Malformed)
        );
    }
}
