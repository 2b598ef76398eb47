//! Fuzz entry points: the origin's own parsing of what an HTTP/3 client sends, without QUIC:
//! a request stream's field section (after the client's QPACK encoder-stream bytes, when
//! given) and the client's control stream. Public only so the fuzz targets
//! (`fuzz/fuzz_targets/serve_h3.rs`) reach it; the server itself calls the same code through
//! its streams.

use super::control::reason;
use super::head::{decode_request, HeadError};
use hxlab_wire::h3::control::{ControlReader, Sender};
use hxlab_wire::qpack::decoder::{MAX_BLOCKED_STREAMS, MAX_TABLE_CAPACITY};
use hxlab_wire::qpack::QpackDecoder;

/// Why a request head was refused, as the server acts on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeadRefusal {
    /// Undecodable QPACK: the connection is closed (QPACK_DECOMPRESSION_FAILED).
    Qpack(String),
    /// A malformed request: the stream is reset (H3_MESSAGE_ERROR).
    Malformed,
    /// Larger than the advertised SETTINGS_MAX_FIELD_SECTION_SIZE.
    TooLarge,
    /// Undecodable encoder-stream bytes: the connection is closed
    /// (QPACK_ENCODER_STREAM_ERROR).
    EncoderStream(String),
    /// The head references inserts that have not arrived: the stream waits (blocked).
    Blocked,
}

/// Decodes and checks one request field section (a HEADERS frame's payload) as the server
/// does, with `max_size` as its SETTINGS_MAX_FIELD_SECTION_SIZE; returns the request's method
/// and target (`GET /x`) when it would be answered.
pub fn request_head(block: &[u8], max_size: u64) -> Result<String, HeadRefusal> {
    head_with(&mut QpackDecoder::new(0, 0), block, max_size)
}

/// [`request_head`] on a connection with the largest dynamic table we allow, after the
/// client's encoder stream sent `encoder_stream` (any bytes).
pub fn request_head_after(
    encoder_stream: &[u8],
    block: &[u8],
    max_size: u64,
) -> Result<String, HeadRefusal> {
    let mut d = QpackDecoder::new(MAX_TABLE_CAPACITY, MAX_BLOCKED_STREAMS);
    d.feed_encoder(encoder_stream)
        .map_err(|e| HeadRefusal::EncoderStream(e.to_string()))?;
    head_with(&mut d, block, max_size)
}

fn head_with(d: &mut QpackDecoder, block: &[u8], max_size: u64) -> Result<String, HeadRefusal> {
    match decode_request(|f| d.decode(0, block, max_size, f)) {
        Ok(Some(head)) => Ok(format!("{} {}", head.method, head.uri)),
        Ok(None) => Err(HeadRefusal::Blocked),
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
        // With a table: ":authority h" inserted by static name reference (0), then a head
        // whose :authority is dynamic entry 0 (Required Insert Count 1, Base 1).
        let enc = [0x3f, 0xe1, 0x1f, 0xc0, 0x01, b'h'];
        let mut dynamic = vec![0x02, 0x00];
        dynamic.extend_from_slice(&block[2..]);
        let at = dynamic
            .iter()
            .position(|b| *b == 0x50)
            .expect(":authority literal");
        dynamic.splice(at..at + 3, [0x80]);
        assert_eq!(
            request_head_after(&enc, &dynamic, 1 << 16),
            Ok("GET https://h/x".into())
        );
        assert_eq!(
            request_head_after(&enc[..3], &dynamic, 1 << 16),
            Err(HeadRefusal::Blocked)
        );
        assert!(matches!(
            request_head_after(&[0x3f, 0xff, 0xff, 0x7f], &dynamic, 1 << 16),
            Err(HeadRefusal::EncoderStream(_))
        ));
        assert!(matches!(
            request_head(&dynamic, 1 << 16),
            Err(HeadRefusal::Qpack(_))
        ));
    }
}
