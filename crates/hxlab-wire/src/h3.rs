//! HTTP/3 (RFC 9114) wire vocabulary: frame types, unidirectional stream types, SETTINGS
//! identifiers, error codes (with QPACK's, RFC 9204 §6), their names, the frame head (two
//! varints: type, length) whole or across chunks ([`FrameHeadReader`]), and ([`control`])
//! the control stream's reader.

use crate::varint;

pub mod control;

/// Frame types (RFC 9114 §7.2, RFC 9218).
pub mod frame {
    pub const DATA: u64 = 0x00;
    pub const HEADERS: u64 = 0x01;
    pub const CANCEL_PUSH: u64 = 0x03;
    pub const SETTINGS: u64 = 0x04;
    pub const PUSH_PROMISE: u64 = 0x05;
    pub const GOAWAY: u64 = 0x07;
    pub const MAX_PUSH_ID: u64 = 0x0d;
    pub const PRIORITY_UPDATE_REQUEST: u64 = 0xf0700;
    pub const PRIORITY_UPDATE_PUSH: u64 = 0xf0701;
}

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub mod stream {
    pub const CONTROL: u64 = 0x00;
    pub const PUSH: u64 = 0x01;
    pub const QPACK_ENCODER: u64 = 0x02;
    pub const QPACK_DECODER: u64 = 0x03;
}

/// SETTINGS identifiers (RFC 9114 §7.2.4.1, RFC 9204 §5, RFC 9220, RFC 9297).
pub mod setting {
    pub const QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
    pub const MAX_FIELD_SECTION_SIZE: u64 = 0x06;
    pub const QPACK_BLOCKED_STREAMS: u64 = 0x07;
    pub const ENABLE_CONNECT_PROTOCOL: u64 = 0x08;
    pub const H3_DATAGRAM: u64 = 0x33;
}

/// Error codes (RFC 9114 §8.1, RFC 9204 §6).
pub mod code {
    pub const H3_NO_ERROR: u64 = 0x100;
    pub const H3_GENERAL_PROTOCOL_ERROR: u64 = 0x101;
    pub const H3_INTERNAL_ERROR: u64 = 0x102;
    pub const H3_STREAM_CREATION_ERROR: u64 = 0x103;
    pub const H3_CLOSED_CRITICAL_STREAM: u64 = 0x104;
    pub const H3_FRAME_UNEXPECTED: u64 = 0x105;
    pub const H3_FRAME_ERROR: u64 = 0x106;
    pub const H3_EXCESSIVE_LOAD: u64 = 0x107;
    pub const H3_ID_ERROR: u64 = 0x108;
    pub const H3_SETTINGS_ERROR: u64 = 0x109;
    pub const H3_MISSING_SETTINGS: u64 = 0x10a;
    pub const H3_REQUEST_REJECTED: u64 = 0x10b;
    pub const H3_REQUEST_CANCELLED: u64 = 0x10c;
    pub const H3_REQUEST_INCOMPLETE: u64 = 0x10d;
    pub const H3_MESSAGE_ERROR: u64 = 0x10e;
    pub const H3_CONNECT_ERROR: u64 = 0x10f;
    pub const H3_VERSION_FALLBACK: u64 = 0x110;
    pub const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;
    pub const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;
    pub const QPACK_DECODER_STREAM_ERROR: u64 = 0x202;
}

/// Whether `v` is a reserved ("grease") frame type, stream type or setting: 0x1f·N + 0x21.
pub fn is_grease(v: u64) -> bool {
    v >= 0x21 && (v - 0x21).is_multiple_of(0x1f)
}

/// Name of a frame type.
pub fn frame_type_name(t: u64) -> &'static str {
    match t {
        0x0 => "DATA",
        0x1 => "HEADERS",
        0x3 => "CANCEL_PUSH",
        0x4 => "SETTINGS",
        0x5 => "PUSH_PROMISE",
        0x7 => "GOAWAY",
        0xd => "MAX_PUSH_ID",
        0xf0700 => "PRIORITY_UPDATE(request)",
        0xf0701 => "PRIORITY_UPDATE(push)",
        t if is_grease(t) => "reserved(grease)",
        _ => "UNKNOWN",
    }
}

/// Name of a SETTINGS identifier.
pub fn setting_name(id: u64) -> &'static str {
    match id {
        0x01 => "SETTINGS_QPACK_MAX_TABLE_CAPACITY",
        0x06 => "SETTINGS_MAX_FIELD_SECTION_SIZE",
        0x07 => "SETTINGS_QPACK_BLOCKED_STREAMS",
        0x08 => "SETTINGS_ENABLE_CONNECT_PROTOCOL",
        0x33 => "SETTINGS_H3_DATAGRAM",
        0x2b603742 => "SETTINGS_ENABLE_WEBTRANSPORT",
        0x2b603743 => "SETTINGS_WEBTRANSPORT_MAX_SESSIONS(draft)",
        0xc671706a => "SETTINGS_WEBTRANSPORT_MAX_SESSIONS",
        id if is_grease(id) => "reserved(grease)",
        _ => "UNKNOWN",
    }
}

/// Name of an error code, for messages.
pub fn code_name(c: u64) -> &'static str {
    match c {
        0x100 => "H3_NO_ERROR",
        0x101 => "H3_GENERAL_PROTOCOL_ERROR",
        0x102 => "H3_INTERNAL_ERROR",
        0x103 => "H3_STREAM_CREATION_ERROR",
        0x104 => "H3_CLOSED_CRITICAL_STREAM",
        0x105 => "H3_FRAME_UNEXPECTED",
        0x106 => "H3_FRAME_ERROR",
        0x107 => "H3_EXCESSIVE_LOAD",
        0x108 => "H3_ID_ERROR",
        0x109 => "H3_SETTINGS_ERROR",
        0x10a => "H3_MISSING_SETTINGS",
        0x10b => "H3_REQUEST_REJECTED",
        0x10c => "H3_REQUEST_CANCELLED",
        0x10d => "H3_REQUEST_INCOMPLETE",
        0x10e => "H3_MESSAGE_ERROR",
        0x10f => "H3_CONNECT_ERROR",
        0x110 => "H3_VERSION_FALLBACK",
        0x200 => "QPACK_DECOMPRESSION_FAILED",
        0x201 => "QPACK_ENCODER_STREAM_ERROR",
        0x202 => "QPACK_DECODER_STREAM_ERROR",
        _ => "unknown error code",
    }
}

/// A frame head at the start of `buf`: (type, payload length, head length), or `None` when
/// `buf` ends first.
#[inline]
pub fn parse_frame_head(buf: &[u8]) -> Option<(u64, u64, usize)> {
    let (t, a) = varint::read(buf)?;
    let (l, b) = varint::read(&buf[a..])?;
    Some((t, l, a + b))
}

/// Appends a frame head.
#[inline]
pub fn write_frame_head(out: &mut Vec<u8>, kind: u64, len: u64) {
    varint::put(out, kind);
    varint::put(out, len);
}

/// Collects a frame head (type and length varints, at most 16 bytes) across the chunks a
/// stream arrives in.
#[derive(Debug, Default, Clone)]
pub struct FrameHeadReader {
    buf: [u8; 16],
    have: usize,
}

impl FrameHeadReader {
    /// Takes bytes from `input` towards a frame head: the head once complete (type,
    /// length), and how many bytes of `input` were used.
    #[inline]
    pub fn feed(&mut self, input: &[u8]) -> (Option<(u64, u64)>, usize) {
        if self.have == 0 {
            if let Some((t, l, used)) = parse_frame_head(input) {
                return (Some((t, l)), used);
            }
            // Incomplete, so shorter than 16 bytes.
            self.buf[..input.len()].copy_from_slice(input);
            self.have = input.len();
            return (None, input.len());
        }
        let n = (16 - self.have).min(input.len());
        self.buf[self.have..self.have + n].copy_from_slice(&input[..n]);
        let all = self.have + n;
        match parse_frame_head(&self.buf[..all]) {
            Some((t, l, used)) => {
                let from_input = used - self.have;
                self.have = 0;
                (Some((t, l)), from_input)
            }
            None => {
                self.have = all;
                (None, n)
            }
        }
    }

    /// Whether part of a head is held (a stream that ends now ends inside a frame).
    #[inline]
    pub fn is_partial(&self) -> bool {
        self.have > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_and_names() {
        let mut out = Vec::new();
        write_frame_head(&mut out, frame::SETTINGS, 300);
        assert_eq!(parse_frame_head(&out), Some((4, 300, 3)));
        assert_eq!(parse_frame_head(&out[..2]), None);
        assert!(is_grease(0x21) && is_grease(0x21 + 0x1f * 7) && !is_grease(0x22));
        assert_eq!(frame_type_name(0x21 + 0x1f), "reserved(grease)");
        assert_eq!(code_name(code::H3_MESSAGE_ERROR), "H3_MESSAGE_ERROR");
        assert_eq!(
            setting_name(setting::QPACK_BLOCKED_STREAMS),
            "SETTINGS_QPACK_BLOCKED_STREAMS"
        );
    }

    #[test]
    fn a_head_is_read_in_any_split() {
        let mut out = Vec::new();
        write_frame_head(&mut out, frame::PRIORITY_UPDATE_REQUEST, 1 << 40);
        out.extend_from_slice(b"rest");
        let head_len = out.len() - 4;
        // Short of the whole head, the first piece is held; the second completes it.
        for at in 0..head_len {
            let mut r = FrameHeadReader::default();
            let (first, used) = r.feed(&out[..at]);
            assert_eq!((first, used, r.is_partial()), (None, at, at > 0), "{at}");
            let (head, used) = r.feed(&out[at..]);
            assert_eq!(
                head,
                Some((frame::PRIORITY_UPDATE_REQUEST, 1 << 40)),
                "{at}"
            );
            assert_eq!(at + used, head_len, "{at}");
            assert!(!r.is_partial());
        }
    }
}
