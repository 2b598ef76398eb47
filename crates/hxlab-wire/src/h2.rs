//! HTTP/2 (RFC 9113) wire vocabulary: the connection preface, frame types, flags, error codes,
//! SETTINGS identifiers, their names, the 9-byte frame head, and ([`control`]) the typed
//! payloads of the control frames with the rules each frame must keep.

pub mod control;

/// The client connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Length of a frame head.
pub const FRAME_HEAD: usize = 9;
/// The frame size every endpoint accepts until told otherwise (SETTINGS_MAX_FRAME_SIZE default).
pub const DEFAULT_MAX_FRAME: usize = 16_384;
/// Largest stream identifier.
pub const MAX_STREAM_ID: u32 = (1 << 31) - 1;

/// Frame types (RFC 9113 §6).
pub mod frame {
    pub const DATA: u8 = 0x0;
    pub const HEADERS: u8 = 0x1;
    pub const PRIORITY: u8 = 0x2;
    pub const RST_STREAM: u8 = 0x3;
    pub const SETTINGS: u8 = 0x4;
    pub const PUSH_PROMISE: u8 = 0x5;
    pub const PING: u8 = 0x6;
    pub const GOAWAY: u8 = 0x7;
    pub const WINDOW_UPDATE: u8 = 0x8;
    pub const CONTINUATION: u8 = 0x9;
    /// RFC 9218 §7.1.
    pub const PRIORITY_UPDATE: u8 = 0x10;
}

/// Frame flags (RFC 9113 §6); ACK shares END_STREAM's bit on SETTINGS and PING.
pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// Error codes (RFC 9113 §7).
pub mod code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const SETTINGS_TIMEOUT: u32 = 0x4;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const CONNECT_ERROR: u32 = 0xa;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
    pub const INADEQUATE_SECURITY: u32 = 0xc;
    pub const HTTP_1_1_REQUIRED: u32 = 0xd;
}

/// SETTINGS identifiers (RFC 9113 §6.5.2, RFC 8441, RFC 9218).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
    pub const NO_RFC7540_PRIORITIES: u16 = 0x9;
}

/// Name of a frame type.
pub fn frame_type_name(t: u8) -> &'static str {
    match t {
        0x0 => "DATA",
        0x1 => "HEADERS",
        0x2 => "PRIORITY",
        0x3 => "RST_STREAM",
        0x4 => "SETTINGS",
        0x5 => "PUSH_PROMISE",
        0x6 => "PING",
        0x7 => "GOAWAY",
        0x8 => "WINDOW_UPDATE",
        0x9 => "CONTINUATION",
        0xa => "ALTSVC",
        0xc => "ORIGIN",
        0x10 => "PRIORITY_UPDATE",
        _ => "UNKNOWN",
    }
}

/// Name of an error code (RST_STREAM, GOAWAY).
pub fn code_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x4 => "SETTINGS_TIMEOUT",
        0x5 => "STREAM_CLOSED",
        0x6 => "FRAME_SIZE_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0x9 => "COMPRESSION_ERROR",
        0xa => "CONNECT_ERROR",
        0xb => "ENHANCE_YOUR_CALM",
        0xc => "INADEQUATE_SECURITY",
        0xd => "HTTP_1_1_REQUIRED",
        _ => "unknown error code",
    }
}

/// Name of a SETTINGS parameter.
pub fn setting_name(id: u16) -> &'static str {
    match id {
        0x1 => "SETTINGS_HEADER_TABLE_SIZE",
        0x2 => "SETTINGS_ENABLE_PUSH",
        0x3 => "SETTINGS_MAX_CONCURRENT_STREAMS",
        0x4 => "SETTINGS_INITIAL_WINDOW_SIZE",
        0x5 => "SETTINGS_MAX_FRAME_SIZE",
        0x6 => "SETTINGS_MAX_HEADER_LIST_SIZE",
        0x8 => "SETTINGS_ENABLE_CONNECT_PROTOCOL",
        0x9 => "SETTINGS_NO_RFC7540_PRIORITIES",
        _ => "UNKNOWN",
    }
}

/// A frame head: payload length (24 bits), type, flags, stream identifier (31 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    /// Payload length.
    pub len: usize,
    /// Frame type.
    pub kind: u8,
    /// Flags.
    pub flags: u8,
    /// Stream identifier (the reserved bit cleared).
    pub stream_id: u32,
}

impl FrameHead {
    /// Parses the head at the start of `buf`, or `None` when fewer than 9 bytes are there.
    #[inline]
    pub fn parse(buf: &[u8]) -> Option<FrameHead> {
        let h = buf.get(..FRAME_HEAD)?;
        Some(FrameHead {
            len: (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]),
            kind: h[3],
            flags: h[4],
            stream_id: be32(&h[5..9]) & MAX_STREAM_ID,
        })
    }

    /// Appends the head's 9 bytes (`len` must fit in 24 bits).
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>) {
        write_head(out, self.len, self.kind, self.flags, self.stream_id);
    }
}

/// Appends a frame head (`len` must fit in 24 bits).
#[inline]
pub fn write_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream_id: u32) {
    debug_assert!(len < 1 << 24);
    out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
    out.extend_from_slice(&(stream_id & MAX_STREAM_ID).to_be_bytes());
}

/// A big-endian u32 from the first four bytes of `b`.
#[inline]
pub fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

/// Why a PADDED frame's padding cannot be removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaddingError {
    /// No pad length byte (a FRAME_SIZE_ERROR).
    NoPadLength,
    /// More padding than payload (a PROTOCOL_ERROR).
    TooLong,
}

/// The payload of a frame without its pad length byte and padding (unchanged unless PADDED).
#[inline]
pub fn strip_padding(flags: u8, payload: &[u8]) -> Result<&[u8], PaddingError> {
    if flags & flag::PADDED == 0 {
        return Ok(payload);
    }
    let Some((&pad, rest)) = payload.split_first() else {
        return Err(PaddingError::NoPadLength);
    };
    if usize::from(pad) > rest.len() {
        return Err(PaddingError::TooLong);
    }
    Ok(&rest[..rest.len() - usize::from(pad)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_head_round_trip_clears_the_reserved_bit() {
        let mut out = Vec::new();
        write_head(&mut out, 0x01_02_03, frame::HEADERS, flag::END_HEADERS, 5);
        assert_eq!(out, [1, 2, 3, 1, 4, 0, 0, 0, 5]);
        let h = FrameHead::parse(&out).unwrap();
        assert_eq!((h.len, h.kind, h.flags, h.stream_id), (0x010203, 1, 4, 5));
        out[5] |= 0x80;
        assert_eq!(FrameHead::parse(&out).unwrap().stream_id, 5);
        assert_eq!(FrameHead::parse(&out[..8]), None);
    }

    #[test]
    fn padding() {
        assert_eq!(strip_padding(0, b"abc"), Ok(&b"abc"[..]));
        assert_eq!(strip_padding(flag::PADDED, b"\x02abcXY"), Ok(&b"abc"[..]));
        assert_eq!(
            strip_padding(flag::PADDED, b"\x05ab"),
            Err(PaddingError::TooLong)
        );
        assert_eq!(
            strip_padding(flag::PADDED, b""),
            Err(PaddingError::NoPadLength)
        );
    }
}
