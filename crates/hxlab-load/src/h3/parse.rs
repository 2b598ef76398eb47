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
    /// A field section waiting for QPACK inserts (its stream is blocked), and the stream
    /// bytes that came after it (at most what one read handed over: the session stops
    /// reading a blocked stream).
    blocked: Option<Vec<u8>>,
    stash: Vec<u8>,
    /// The stream ended while its head was blocked.
    pub ended: bool,
}

impl ResponseParser {
    /// Ready for the next request (keeps the buffer).
    pub fn reset(&mut self) {
        let block = std::mem::take(&mut self.block);
        let stash = std::mem::take(&mut self.stash);
        *self = ResponseParser {
            block,
            stash,
            ..Default::default()
        };
        self.block.clear();
        self.stash.clear();
    }

    /// True while the response head waits for QPACK inserts.
    pub fn is_blocked(&self) -> bool {
        self.blocked.is_some()
    }

    /// Decodes a blocked head again (inserts arrived), then what came after it.
    pub fn resume(
        &mut self,
        dec: &mut ResponseDecoder,
        stream: u64,
        now: Instant,
    ) -> Result<(), H3Error> {
        let Some(block) = self.blocked.take() else {
            return Ok(());
        };
        if !self.headers_done(dec, stream, &block, now)? {
            self.blocked = Some(block);
            return Ok(());
        }
        let stash = std::mem::take(&mut self.stash);
        let r = self.feed(dec, stream, &stash, now);
        if self.stash.is_empty() {
            self.stash = stash;
            self.stash.clear();
        }
        r
    }

    /// True once the final (non-1xx) response head arrived.
    pub fn has_response(&self) -> bool {
        self.final_seen
    }

    /// Parses the next bytes of stream `stream` (kept aside while its head is blocked).
    pub fn feed(
        &mut self,
        dec: &mut ResponseDecoder,
        stream: u64,
        mut buf: &[u8],
        now: Instant,
    ) -> Result<(), H3Error> {
        while !buf.is_empty() {
            if self.blocked.is_some() {
                self.stash.extend_from_slice(buf);
                return Ok(());
            }
            if !self.in_frame {
                let (head, used) = self.head.feed(buf);
                buf = &buf[used..];
                let Some((kind, len)) = head else { continue };
                self.start_frame(kind, len)?;
                if len == 0 {
                    self.in_frame = false;
                    if kind == HEADERS {
                        self.headers_done(dec, stream, &[], now)?;
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
                        if !self.headers_done(dec, stream, part, now)? {
                            self.blocked = Some(part.to_vec());
                        }
                    } else {
                        self.block.extend_from_slice(part);
                        if self.left == 0 {
                            let block = std::mem::take(&mut self.block);
                            let r = self.headers_done(dec, stream, &block, now);
                            if matches!(r, Ok(false)) {
                                self.blocked = Some(block.clone());
                            }
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

    /// A whole HEADERS payload: `Ok(false)` when it waits for QPACK inserts.
    fn headers_done(
        &mut self,
        dec: &mut ResponseDecoder,
        stream: u64,
        block: &[u8],
        now: Instant,
    ) -> Result<bool, H3Error> {
        let Some(f) = dec
            .decode(stream, block, MAX_FIELD_SECTION)
            .map_err(|e| conn_error(QPACK_DECOMPRESSION_FAILED, &e.to_string()))?
        else {
            return Ok(false);
        };
        if self.final_seen {
            self.trailers_seen = true;
            return Ok(true);
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
            return Ok(true);
        }
        self.final_seen = true;
        self.status = status;
        self.uncompressed = f.uncompressed;
        self.first_byte = Some(now);
        Ok(true)
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
