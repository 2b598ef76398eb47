//! The sans-IO parser of a request stream's response ([`ResponseParser`]); frame heads come
//! across chunks through hxlab-wire's [`FrameHeadReader`], as the server's control stream
//! does through its [`hxlab_wire::h3::control::ControlReader`].

use super::*;
#[cfg(test)]
pub(super) use hxlab_wire::h3::parse_frame_head as parse_head;
use hxlab_wire::h3::FrameHeadReader;

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
    head: FrameHeadReader,
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
        if self.in_frame || self.head.is_partial() {
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
