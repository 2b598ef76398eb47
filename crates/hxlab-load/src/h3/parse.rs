//! The sans-IO HTTP/3 parsers: frame heads across chunks, a request stream's response
//! ([`ResponseParser`]) and the server's control stream ([`ControlParser`]).

use super::*;
pub(super) use hxlab_wire::h3::parse_frame_head as parse_head;

/// Collects a frame head (type and length varints, at most 16 bytes) across chunks.
#[derive(Debug, Default, Clone)]
struct HeadReader {
    buf: [u8; 16],
    have: usize,
}

impl HeadReader {
    /// Takes bytes from `input` towards a frame head: the head once complete (type,
    /// length), and how many bytes of `input` were used.
    #[inline]
    fn feed(&mut self, input: &[u8]) -> (Option<(u64, u64)>, usize) {
        if self.have == 0 {
            if let Some((t, l, used)) = parse_head(input) {
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
        match parse_head(&self.buf[..all]) {
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
}

/// Frame types of HTTP/2 that HTTP/3 reserves (RFC 9114 §7.2.8), and HTTP/3 control frames:
/// both are unexpected on a request stream.
fn unexpected_on_request(kind: u64) -> Option<&'static str> {
    match kind {
        CANCEL_PUSH => Some("CANCEL_PUSH"),
        SETTINGS => Some("SETTINGS"),
        GOAWAY => Some("GOAWAY"),
        MAX_PUSH_ID => Some("MAX_PUSH_ID"),
        0x02 | 0x06 | 0x08 | 0x09 => Some("an HTTP/2 frame type"),
        _ => None,
    }
}

/// The response side of one request stream, without IO: feed it the stream's bytes as they
/// come, then [`ResponseParser::finish`] at the end of the stream.
#[derive(Debug, Default)]
pub struct ResponseParser {
    head: HeadReader,
    kind: u64,
    left: u64,
    in_frame: bool,
    /// A HEADERS payload split across chunks.
    pub(super) block: Vec<u8>,
    final_seen: bool,
    trailers_seen: bool,
    /// Final `:status`.
    pub status: u16,
    /// Decoded size of the final response head.
    pub uncompressed: u64,
    /// DATA payload bytes.
    pub body: u64,
    /// HEADERS payload bytes seen since the driver last took them.
    pub header_bytes: u64,
    /// When the final HEADERS was decoded.
    pub first_byte: Option<Instant>,
}

impl ResponseParser {
    /// Ready for the next request (keeps the buffer).
    pub fn reset(&mut self) {
        let block = std::mem::take(&mut self.block);
        *self = ResponseParser {
            block,
            ..Default::default()
        };
        self.block.clear();
    }

    /// True once the final (non-1xx) response head arrived.
    pub fn has_response(&self) -> bool {
        self.final_seen
    }

    /// Parses the next bytes of the stream.
    pub fn feed(
        &mut self,
        dec: &mut qpack::Decoder,
        mut buf: &[u8],
        now: Instant,
    ) -> Result<(), H3Error> {
        while !buf.is_empty() {
            if !self.in_frame {
                let (head, used) = self.head.feed(buf);
                buf = &buf[used..];
                let Some((kind, len)) = head else { continue };
                self.start_frame(kind, len)?;
                if len == 0 {
                    self.in_frame = false;
                    if kind == HEADERS {
                        self.headers_done(dec, &[], now)?;
                    }
                }
                continue;
            }
            let n = (buf.len() as u64).min(self.left) as usize;
            let (part, rest) = buf.split_at(n);
            buf = rest;
            self.left -= n as u64;
            match self.kind {
                DATA => self.body += n as u64,
                HEADERS => {
                    self.header_bytes += n as u64;
                    if self.left == 0 && self.block.is_empty() {
                        // The whole payload is in this chunk: decode in place.
                        self.headers_done(dec, part, now)?;
                    } else {
                        self.block.extend_from_slice(part);
                        if self.left == 0 {
                            let block = std::mem::take(&mut self.block);
                            let r = self.headers_done(dec, &block, now);
                            self.block = block;
                            self.block.clear();
                            r?;
                        }
                    }
                }
                _ => {}
            }
            if self.left == 0 {
                self.in_frame = false;
            }
        }
        Ok(())
    }

    fn start_frame(&mut self, kind: u64, len: u64) -> Result<(), H3Error> {
        match kind {
            DATA => {
                if !self.final_seen {
                    return Err(conn_error(
                        H3_FRAME_UNEXPECTED,
                        "DATA before the response HEADERS",
                    ));
                }
                if self.trailers_seen {
                    return Err(conn_error(H3_FRAME_UNEXPECTED, "DATA after trailers"));
                }
            }
            HEADERS => {
                if self.trailers_seen {
                    return Err(conn_error(H3_FRAME_UNEXPECTED, "HEADERS after trailers"));
                }
                if len > MAX_FIELD_SECTION {
                    return Err(stream_error(
                        H3_EXCESSIVE_LOAD,
                        "response HEADERS frame larger than we accept",
                    ));
                }
            }
            PUSH_PROMISE => {
                return Err(conn_error(
                    H3_ID_ERROR,
                    "PUSH_PROMISE, but we allowed no push",
                ))
            }
            k => {
                if let Some(name) = unexpected_on_request(k) {
                    return Err(conn_error(
                        H3_FRAME_UNEXPECTED,
                        &format!("{name} on a request stream"),
                    ));
                }
                // Unknown and reserved types are skipped (RFC 9114 §9).
            }
        }
        self.kind = kind;
        self.left = len;
        self.in_frame = true;
        Ok(())
    }

    fn headers_done(
        &mut self,
        dec: &mut qpack::Decoder,
        block: &[u8],
        now: Instant,
    ) -> Result<(), H3Error> {
        let f = dec
            .decode_memo(block, MAX_FIELD_SECTION)
            .map_err(|e| conn_error(QPACK_DECOMPRESSION_FAILED, &e.to_string()))?;
        if self.final_seen {
            self.trailers_seen = true;
            return Ok(());
        }
        let status = match f.status {
            Some(s) if (100..1000).contains(&s) => s,
            _ => {
                return Err(stream_error(
                    H3_MESSAGE_ERROR,
                    "response without a valid :status",
                ))
            }
        };
        if status < 200 {
            // Informational: the final response follows.
            return Ok(());
        }
        self.final_seen = true;
        self.status = status;
        self.uncompressed = f.uncompressed;
        self.first_byte = Some(now);
        Ok(())
    }

    /// The stream ended: the response must be complete.
    pub fn finish(&self) -> Result<(), H3Error> {
        if self.in_frame || self.head.have > 0 {
            return Err(conn_error(
                H3_FRAME_ERROR,
                "request stream ended inside a frame",
            ));
        }
        if !self.final_seen {
            return Err(stream_error(
                H3_MESSAGE_ERROR,
                "request stream ended without a response",
            ));
        }
        Ok(())
    }
}

/// The server's control stream after its type byte, without IO.
#[derive(Debug, Default)]
pub struct ControlParser {
    head: HeadReader,
    kind: u64,
    left: u64,
    in_frame: bool,
    pub(super) buf: Vec<u8>,
    /// The server's SETTINGS arrived.
    pub settings: bool,
    /// The lowest GOAWAY stream id received.
    pub goaway: Option<u64>,
}

impl ControlParser {
    /// Parses the next bytes of the control stream.
    pub fn feed(&mut self, mut input: &[u8]) -> Result<(), H3Error> {
        while !input.is_empty() {
            if !self.in_frame {
                let (head, used) = self.head.feed(input);
                input = &input[used..];
                let Some((kind, len)) = head else { continue };
                self.start(kind, len)?;
                if len == 0 {
                    self.frame_done()?;
                }
                continue;
            }
            let n = (input.len() as u64).min(self.left) as usize;
            if self.kind != u64::MAX {
                self.buf.extend_from_slice(&input[..n]);
            }
            input = &input[n..];
            self.left -= n as u64;
            if self.left == 0 {
                self.frame_done()?;
            }
        }
        Ok(())
    }

    fn start(&mut self, kind: u64, len: u64) -> Result<(), H3Error> {
        if !self.settings && kind != SETTINGS {
            return Err(conn_error(
                H3_MISSING_SETTINGS,
                "the control stream does not start with SETTINGS",
            ));
        }
        let keep = match kind {
            SETTINGS if self.settings => {
                return Err(conn_error(H3_FRAME_UNEXPECTED, "a second SETTINGS frame"))
            }
            SETTINGS | GOAWAY | CANCEL_PUSH => true,
            DATA | HEADERS | PUSH_PROMISE | MAX_PUSH_ID => {
                return Err(conn_error(
                    H3_FRAME_UNEXPECTED,
                    "a request or client-only frame on the control stream",
                ))
            }
            0x02 | 0x06 | 0x08 | 0x09 => {
                return Err(conn_error(
                    H3_FRAME_UNEXPECTED,
                    "an HTTP/2 frame type on the control stream",
                ))
            }
            _ => false,
        };
        if keep && len > MAX_CONTROL_FRAME {
            return Err(conn_error(H3_EXCESSIVE_LOAD, "control frame too large"));
        }
        // u64::MAX marks a frame that is skipped, not buffered.
        self.kind = if keep { kind } else { u64::MAX };
        self.left = len;
        self.in_frame = true;
        self.buf.clear();
        Ok(())
    }

    fn frame_done(&mut self) -> Result<(), H3Error> {
        self.in_frame = false;
        match self.kind {
            SETTINGS => {
                self.settings = true;
                let mut p = &self.buf[..];
                let mut seen: [bool; 8] = [false; 8];
                while !p.is_empty() {
                    let (id, a) = varint(p)
                        .ok_or_else(|| conn_error(H3_FRAME_ERROR, "truncated SETTINGS"))?;
                    let (_, b) = varint(&p[a..])
                        .ok_or_else(|| conn_error(H3_FRAME_ERROR, "truncated SETTINGS"))?;
                    p = &p[a + b..];
                    match id {
                        0x00 | 0x02..=0x05 => {
                            return Err(conn_error(
                                H3_SETTINGS_ERROR,
                                "an HTTP/2 setting in SETTINGS",
                            ))
                        }
                        0x01 | 0x06 | 0x07 => {
                            if seen[id as usize] {
                                return Err(conn_error(H3_SETTINGS_ERROR, "a repeated setting"));
                            }
                            seen[id as usize] = true;
                        }
                        _ => {}
                    }
                }
            }
            GOAWAY => {
                let (id, n) = varint(&self.buf)
                    .filter(|(_, n)| *n == self.buf.len())
                    .ok_or_else(|| conn_error(H3_FRAME_ERROR, "malformed GOAWAY"))?;
                if id % 4 != 0 {
                    return Err(conn_error(
                        H3_ID_ERROR,
                        "GOAWAY names a stream that is not a request stream",
                    ));
                }
                let _ = n;
                if self.goaway.is_some_and(|g| id > g) {
                    return Err(conn_error(H3_ID_ERROR, "GOAWAY id went up"));
                }
                self.goaway = Some(id);
            }
            CANCEL_PUSH if varint(&self.buf).is_none_or(|(_, n)| n != self.buf.len()) => {
                return Err(conn_error(H3_FRAME_ERROR, "malformed CANCEL_PUSH"));
            }
            _ => {}
        }
        Ok(())
    }
}
