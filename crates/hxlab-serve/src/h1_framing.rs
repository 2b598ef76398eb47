//! Strict HTTP/1.1 request framing (RFC 9112), sans-IO: a byte-at-a-time check of every
//! request head on a connection, and just enough body framing (Content-Length, chunked) to
//! know where the next head starts.
//!
//! Why it exists: hyper (httparse) accepts a bare LF as a line ending, a request without Host
//! or with two, and Content-Length next to Transfer-Encoding (it lets chunked win). A proxy in
//! front of the origin may read such a request differently, so a measurement origin refuses
//! them. hyper already refuses obs-fold, whitespace before the colon, differing
//! Content-Lengths and malformed chunked bodies; this check refuses them too, so the rule
//! does not depend on hyper's version. It never buffers: the state is a few dozen bytes.

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A line ended in LF without CR (RFC 9112 §2.2).
    BareLf,
    /// A CR not followed by LF (RFC 9112 §2.2).
    BareCr,
    /// A field line starting with whitespace: obs-fold, or whitespace before the first field
    /// (RFC 9112 §5.2, §2.2).
    ObsFold,
    /// A field line without a colon, or whitespace between name and colon (RFC 9112 §5.1).
    BadFieldLine,
    /// An HTTP/1.1 request without Host (RFC 9112 §3.2).
    NoHost,
    /// More than one Host field line (RFC 9112 §3.2).
    TwoHosts,
    /// Content-Length together with Transfer-Encoding (RFC 9112 §6.1, §6.3).
    LengthAndEncoding,
    /// A Content-Length that is not one decimal number, or two that differ (RFC 9112 §6.3).
    BadLength,
    /// A Transfer-Encoding other than exactly `chunked`, repeated, or on HTTP/1.0.
    BadEncoding,
    /// A chunk-size line that is not hex digits with an optional extension.
    BadChunk,
}

/// A refused request: the offset of the byte (in the slice given to [`Framing::feed`]) at
/// which it became invalid, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused {
    /// Offset of the offending byte in the slice fed.
    pub at: usize,
    /// What was wrong.
    pub why: Refusal,
}

/// Where in a request the next byte belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a request line; empty lines before it are allowed (§2.2).
    RequestStart,
    RequestLine,
    /// At the start of a field line, or the empty line ending the head.
    FieldStart,
    FieldName,
    FieldValue,
    /// A CR was seen; an LF must follow, then `then`.
    Cr(AfterCr),
    /// `n` more bytes of a Content-Length body.
    Body(u64),
    ChunkSize,
    /// Whitespace after the chunk size (hyper allows it before `;` or CRLF).
    ChunkSpace,
    ChunkExtension,
    /// `n` more bytes of chunk data.
    ChunkData(u64),
    /// The CR after chunk data.
    ChunkDataEnd,
    TrailerStart,
    TrailerLine,
    /// A request was refused; nothing more is read.
    Refused(Refusal),
}

/// What follows the LF of a CRLF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterCr {
    RequestStart,
    FieldStart,
    HeadEnd,
    ChunkSizeEnd,
    ChunkDataEnd,
    TrailerStart,
}

/// Which field's value is being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Other,
    Host,
    ContentLength,
    TransferEncoding,
}

/// Longest value kept for Content-Length (20 digits and whitespace) or Transfer-Encoding
/// (`chunked` and whitespace); a longer one is refused.
const VALUE_CAP: usize = 24;

/// What the head says so far.
#[derive(Debug, Clone, Copy, Default)]
struct Head {
    /// The last eight bytes of the request line: its version.
    version: [u8; 8],
    hosts: u8,
    length: Option<u64>,
    encodings: u8,
    refusal: Option<Refusal>,
}

/// The framing check of one connection; feed it every byte the client sends, in order.
#[derive(Debug, Clone)]
pub(crate) struct Framing {
    state: State,
    head: Head,
    field: Field,
    /// Lower-cased start of the field name (names longer than the buffer are none we need).
    name: [u8; 17],
    name_len: usize,
    value: [u8; VALUE_CAP],
    value_len: usize,
    chunk: u64,
    chunk_digits: bool,
}

impl Default for Framing {
    fn default() -> Framing {
        Framing {
            state: State::RequestStart,
            head: Head::default(),
            field: Field::Other,
            name: [0; 17],
            name_len: 0,
            value: [0; VALUE_CAP],
            value_len: 0,
            chunk: 0,
            chunk_digits: false,
        }
    }
}

impl Framing {
    /// Checks the next bytes of the connection. Once it returns `Err`, the request is refused
    /// and every later call returns `Err` at offset 0.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<(), Refused> {
        let mut i = 0;
        while i < bytes.len() {
            match self.state {
                State::Body(n) => {
                    let take = n.min((bytes.len() - i) as u64);
                    i += take as usize;
                    self.state = if take == n {
                        State::RequestStart
                    } else {
                        State::Body(n - take)
                    };
                }
                State::ChunkData(n) => {
                    let take = n.min((bytes.len() - i) as u64);
                    i += take as usize;
                    self.state = if take == n {
                        State::ChunkDataEnd
                    } else {
                        State::ChunkData(n - take)
                    };
                }
                State::Refused(why) => return Err(Refused { at: i, why }),
                _ => {
                    if let Err(why) = self.step(bytes[i]) {
                        self.state = State::Refused(why);
                        return Err(Refused { at: i, why });
                    }
                    i += 1;
                }
            }
        }
        Ok(())
    }

    /// One byte of a head, a chunk-size line or a trailer.
    fn step(&mut self, b: u8) -> Result<(), Refusal> {
        self.state = match (self.state, b) {
            (State::Cr(then), b'\n') => self.after_crlf(then)?,
            (State::Cr(_), _) => return Err(Refusal::BareCr),
            (_, b'\n') => return Err(Refusal::BareLf),
            (State::RequestStart, b'\r') => State::Cr(AfterCr::RequestStart),
            (State::RequestLine, b'\r') => State::Cr(AfterCr::FieldStart),
            (State::RequestStart | State::RequestLine, _) => {
                if self.state == State::RequestStart {
                    self.head = Head::default();
                }
                self.head.version.copy_within(1.., 0);
                self.head.version[7] = b;
                State::RequestLine
            }
            (State::FieldStart, b'\r') => State::Cr(AfterCr::HeadEnd),
            (State::FieldStart, b' ' | b'\t') => return Err(Refusal::ObsFold),
            (State::FieldStart, b':') => return Err(Refusal::BadFieldLine),
            (State::FieldName, b':') => {
                self.start_value();
                State::FieldValue
            }
            (State::FieldName, b' ' | b'\t' | b'\r') => return Err(Refusal::BadFieldLine),
            (State::FieldStart | State::FieldName, _) => {
                if self.state == State::FieldStart {
                    self.name_len = 0;
                }
                if let Some(slot) = self.name.get_mut(self.name_len) {
                    *slot = b.to_ascii_lowercase();
                }
                self.name_len += 1;
                State::FieldName
            }
            (State::FieldValue, b'\r') => {
                self.end_value();
                State::Cr(AfterCr::FieldStart)
            }
            (State::FieldValue, _) => {
                if let Some(slot) = self.value.get_mut(self.value_len) {
                    *slot = b;
                }
                self.value_len += 1;
                State::FieldValue
            }
            (State::ChunkSize, _) => self.chunk_size_byte(b)?,
            (State::ChunkSpace, b' ' | b'\t') => State::ChunkSpace,
            (State::ChunkSpace, b';') => State::ChunkExtension,
            (State::ChunkSpace | State::ChunkExtension, b'\r') => State::Cr(AfterCr::ChunkSizeEnd),
            (State::ChunkSpace, _) => return Err(Refusal::BadChunk),
            (State::ChunkExtension, _) => State::ChunkExtension,
            (State::ChunkDataEnd, b'\r') => State::Cr(AfterCr::ChunkDataEnd),
            (State::ChunkDataEnd, _) => return Err(Refusal::BadChunk),
            (State::TrailerStart, b'\r') => State::Cr(AfterCr::RequestStart),
            (State::TrailerLine, b'\r') => State::Cr(AfterCr::TrailerStart),
            (State::TrailerStart | State::TrailerLine, _) => State::TrailerLine,
            // Bodies are skipped in `feed`, a refusal ends it.
            (s @ (State::Body(_) | State::ChunkData(_) | State::Refused(_)), _) => s,
        };
        Ok(())
    }

    /// A byte of a chunk-size line before any whitespace or extension.
    fn chunk_size_byte(&mut self, b: u8) -> Result<State, Refusal> {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            b'\r' | b' ' | b'\t' | b';' if self.chunk_digits => {
                return Ok(match b {
                    b'\r' => State::Cr(AfterCr::ChunkSizeEnd),
                    b';' => State::ChunkExtension,
                    _ => State::ChunkSpace,
                })
            }
            _ => return Err(Refusal::BadChunk),
        };
        self.chunk = self
            .chunk
            .checked_mul(16)
            .and_then(|c| c.checked_add(u64::from(digit)))
            .ok_or(Refusal::BadChunk)?;
        self.chunk_digits = true;
        Ok(State::ChunkSize)
    }

    /// The state after the LF of a CRLF.
    fn after_crlf(&mut self, then: AfterCr) -> Result<State, Refusal> {
        Ok(match then {
            AfterCr::RequestStart => State::RequestStart,
            AfterCr::FieldStart => State::FieldStart,
            AfterCr::TrailerStart => State::TrailerStart,
            AfterCr::HeadEnd => self.end_head()?,
            AfterCr::ChunkSizeEnd if self.chunk == 0 => State::TrailerStart,
            AfterCr::ChunkSizeEnd => State::ChunkData(self.chunk),
            AfterCr::ChunkDataEnd => self.start_chunk(),
        })
    }

    fn start_chunk(&mut self) -> State {
        self.chunk = 0;
        self.chunk_digits = false;
        State::ChunkSize
    }

    fn start_value(&mut self) {
        let name = &self.name[..self.name_len.min(self.name.len())];
        self.field = match (self.name_len, name) {
            (4, b"host") => Field::Host,
            (14, b"content-length") => Field::ContentLength,
            (17, b"transfer-encoding") => Field::TransferEncoding,
            _ => Field::Other,
        };
        self.value_len = 0;
    }

    /// Records a Host, Content-Length or Transfer-Encoding field; a refusal waits for the
    /// end of the head (the first one found is the one reported).
    fn end_value(&mut self) {
        let value =
            (self.value_len <= VALUE_CAP).then(|| self.value[..self.value_len].trim_ascii());
        let head = &mut self.head;
        let refuse = |head: &mut Head, why| {
            head.refusal.get_or_insert(why);
        };
        match self.field {
            Field::Other => {}
            Field::Host => head.hosts = head.hosts.saturating_add(1),
            Field::ContentLength => {
                let parsed = value
                    .filter(|v| !v.is_empty() && v.iter().all(u8::is_ascii_digit))
                    .and_then(|v| std::str::from_utf8(v).ok()?.parse::<u64>().ok());
                match (parsed, head.length) {
                    (None, _) => refuse(head, Refusal::BadLength),
                    (Some(n), Some(m)) if n != m => refuse(head, Refusal::BadLength),
                    (Some(n), _) => head.length = Some(n),
                }
            }
            Field::TransferEncoding => {
                head.encodings = head.encodings.saturating_add(1);
                if !value.is_some_and(|v| v.eq_ignore_ascii_case(b"chunked")) {
                    refuse(head, Refusal::BadEncoding);
                }
            }
        }
    }

    /// The empty line after the fields: judge the head and find its body.
    fn end_head(&mut self) -> Result<State, Refusal> {
        let head = self.head;
        let http10 = &head.version == b"HTTP/1.0";
        if head.hosts > 1 {
            return Err(Refusal::TwoHosts);
        }
        if head.hosts == 0 && !http10 {
            return Err(Refusal::NoHost);
        }
        if head.encodings > 0 && head.length.is_some() {
            return Err(Refusal::LengthAndEncoding);
        }
        if let Some(why) = head.refusal {
            return Err(why);
        }
        if head.encodings > 1 || (head.encodings == 1 && http10) {
            return Err(Refusal::BadEncoding);
        }
        Ok(match head.length {
            _ if head.encodings == 1 => self.start_chunk(),
            Some(n) if n > 0 => State::Body(n),
            _ => State::RequestStart,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` split at every position (and byte by byte); all must agree.
    fn check(input: &[u8]) -> Result<(), Refusal> {
        let whole = Framing::default().feed(input).map_err(|r| r.why);
        for cut in 0..=input.len() {
            let mut f = Framing::default();
            let got = f
                .feed(&input[..cut])
                .and_then(|()| f.feed(&input[cut..]))
                .map_err(|r| r.why);
            assert_eq!(got, whole, "split at {cut}");
        }
        let mut f = Framing::default();
        let bytewise = input
            .iter()
            .try_for_each(|b| f.feed(std::slice::from_ref(b)));
        assert_eq!(bytewise.map_err(|r| r.why), whole, "byte by byte");
        whole
    }

    #[test]
    fn pipelined_requests_with_bodies_pass() {
        let input = b"\r\nGET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n\
            POST /a HTTP/1.1\r\nhost: x\r\nContent-Length: 5\r\n\r\nab\r\nc\
            POST /b HTTP/1.1\r\nHOST: x\r\nTransfer-Encoding:  Chunked \r\n\r\n\
            3;ext=\"q\"\r\nab\n\r\nA \r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n\
            GET /old HTTP/1.0\r\n\r\n\
            POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\ncontent-length: 0\r\n\r\n\
            GET / HTTP/1.1\r\nHost:\r\nX-Long-Header-Name-Here: 1\r\n\r\n";
        assert_eq!(check(input), Ok(()));
    }

    #[test]
    fn ambiguous_heads_are_refused() {
        let cases: &[(&[u8], Refusal)] = &[
            (b"GET / HTTP/1.1\nHost: x\n\n", Refusal::BareLf),
            (b"GET / HTTP/1.1\r\nHost: x\n\r\n", Refusal::BareLf),
            (b"GET / HTTP/1.1\r\nHost: x\r\r\n\r\n", Refusal::BareCr),
            (b"GET / HTTP/1.1\r\n\r\n", Refusal::NoHost),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Refusal::TwoHosts),
            (b"GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", Refusal::TwoHosts),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
                Refusal::LengthAndEncoding,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                Refusal::BadLength,
            ),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", Refusal::BadLength),
            (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", Refusal::BadLength),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 123456789012345678901234567\r\n\r\n",
                Refusal::BadLength,
            ),
            (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", Refusal::BadEncoding),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                Refusal::BadEncoding,
            ),
            (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Refusal::BadEncoding),
            (b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", Refusal::ObsFold),
            (b"GET / HTTP/1.1\r\n Host: x\r\n\r\n", Refusal::ObsFold),
            (b"GET / HTTP/1.1\r\nHost : x\r\n\r\n", Refusal::BadFieldLine),
            (b"GET / HTTP/1.1\r\nHost\r\n\r\n", Refusal::BadFieldLine),
            (b"GET / HTTP/1.1\r\n: x\r\n\r\n", Refusal::BadFieldLine),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
                Refusal::BadChunk,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc",
                Refusal::BareLf,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\naX\r\n",
                Refusal::BadChunk,
            ),
            (
                b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nT: 1\n\r\n",
                Refusal::BareLf,
            ),
        ];
        for (input, why) in cases {
            assert_eq!(
                check(input),
                Err(*why),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn the_refusal_points_at_the_offending_byte() {
        let input = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\nHost: x\r\n\r\n";
        let at = input.iter().rposition(|&b| b == b'1').unwrap_or(0) + 1;
        let got = Framing::default().feed(input);
        assert_eq!(
            got,
            Err(Refused {
                at,
                why: Refusal::BareLf
            })
        );
        // The refusal of a head comes on the last LF of its empty line, before hyper could
        // see the whole head.
        let input = b"GET / HTTP/1.1\r\n\r\n";
        let got = Framing::default().feed(input);
        assert_eq!(
            got,
            Err(Refused {
                at: input.len() - 1,
                why: Refusal::NoHost
            })
        );
    }

    #[test]
    fn bodies_are_skipped_whatever_they_hold() {
        let mut input =
            b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\n\n\n\r\r: ".to_vec();
        input.extend_from_slice(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(check(&input), Ok(()));
    }
}
