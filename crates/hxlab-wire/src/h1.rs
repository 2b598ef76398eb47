//! HTTP/1.1 response framing (RFC 9112), sans-IO: where each response's head ends, its
//! status, how its body is framed (Content-Length, chunked, until the connection closes, none
//! for HEAD, 204 and 304) and where it ends, fed any split of the bytes. The one framer of
//! hxlab: the load client counts responses with it on its hot path (no allocation, lines found
//! with memchr), and the frame view (`hxlab trace`) shows what it framed, reading the header
//! fields of each head with [`head_fields`].
//!
//! What it is not: a request parser, or a full HTTP/1.1 message model (header values are
//! bytes; only the fields that frame a message are interpreted).

/// Largest response head accepted (status line + headers).
pub const MAX_HEAD: usize = 64 * 1024;

/// A response head or body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub &'static str);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed HTTP/1.1 response: {}", self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Body(u64),
    ChunkSize,
    ChunkData(u64),
    ChunkDataEnd,
    Trailers,
    UntilClose,
    Done,
}

/// What one parser step produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// More bytes are needed.
    NeedMore,
    /// A final response head of `len` bytes with this status.
    Head {
        /// Status code.
        status: u16,
        /// Bytes of the head (status line, headers, blank line).
        len: usize,
    },
    /// An interim (1xx) head of `len` bytes, skipped.
    Interim {
        /// Bytes of the head.
        len: usize,
    },
    /// `n` body bytes (decoded: chunk framing excluded).
    Body(usize),
    /// The response is complete; `close`: the server will close the connection.
    Done {
        /// Status code.
        status: u16,
        /// The connection ends after this response.
        close: bool,
    },
}

/// Incremental HTTP/1.1 response parser (one response at a time, in order).
#[derive(Debug)]
pub struct ResponseParser {
    state: State,
    status: u16,
    close: bool,
    scanned: usize,
    /// The request was HEAD: no body whatever the headers say.
    pub head_request: bool,
}

impl Default for ResponseParser {
    fn default() -> Self {
        Self::new()
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

fn parse_u64(s: &[u8], radix: u32) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = (c as char).to_digit(radix)? as u64;
        v = v.checked_mul(radix as u64)?.checked_add(d)?;
    }
    Some(v)
}

/// Searchers built once: `memmem::find` builds one per call, which showed in profiles.
static CRLF: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n"));
static CRLFCRLF: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n\r\n"));

fn find_crlf(buf: &[u8]) -> Option<usize> {
    CRLF.find(buf)
}

impl ResponseParser {
    /// A parser waiting for a response head.
    pub fn new() -> ResponseParser {
        ResponseParser {
            state: State::Head,
            status: 0,
            close: false,
            scanned: 0,
            head_request: false,
        }
    }

    /// True between responses (no byte of the next response consumed yet).
    pub fn idle(&self) -> bool {
        self.state == State::Head && self.scanned == 0
    }

    /// The body runs until the connection closes.
    pub fn until_close(&self) -> bool {
        self.state == State::UntilClose
    }

    /// Completes an until-close body when the peer closes the connection.
    pub fn finish_at_eof(&mut self) -> Option<Step> {
        if self.state == State::UntilClose {
            self.state = State::Head;
            return Some(Step::Done {
                status: self.status,
                close: true,
            });
        }
        None
    }

    /// Up to `left` body bytes from `buf` (a Content-Length body or one chunk's data); the
    /// state after is `more` with what is left, or `done` once nothing is.
    #[inline]
    fn body_bytes(
        &mut self,
        buf: &[u8],
        left: u64,
        more: fn(u64) -> State,
        done: State,
    ) -> (usize, Step) {
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return (0, Step::NeedMore);
        }
        let left = left - n as u64;
        self.state = if left == 0 { done } else { more(left) };
        (n, Step::Body(n))
    }

    /// Consumes a prefix of `buf`; returns the bytes used and what they were.
    pub fn step(&mut self, buf: &[u8]) -> Result<(usize, Step), ParseError> {
        match self.state {
            State::Head => self.head(buf),
            State::Body(left) => Ok(self.body_bytes(buf, left, State::Body, State::Done)),
            State::Done => {
                self.state = State::Head;
                Ok((
                    0,
                    Step::Done {
                        status: self.status,
                        close: self.close,
                    },
                ))
            }
            State::UntilClose => Ok((
                buf.len(),
                if buf.is_empty() {
                    Step::NeedMore
                } else {
                    Step::Body(buf.len())
                },
            )),
            State::ChunkSize => {
                let Some(i) = find_crlf(buf) else {
                    return if buf.len() > 1024 {
                        Err(ParseError("chunk size line too long"))
                    } else {
                        Ok((0, Step::NeedMore))
                    };
                };
                let line = &buf[..i];
                let size = match line.iter().position(|&c| c == b';') {
                    Some(j) => &line[..j],
                    None => line,
                };
                let size = parse_u64(trim(size), 16).ok_or(ParseError("bad chunk size"))?;
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData(size)
                };
                Ok((i + 2, Step::Body(0)))
            }
            State::ChunkData(left) => {
                Ok(self.body_bytes(buf, left, State::ChunkData, State::ChunkDataEnd))
            }
            State::ChunkDataEnd => {
                if buf.len() < 2 {
                    return Ok((0, Step::NeedMore));
                }
                if &buf[..2] != b"\r\n" {
                    return Err(ParseError("chunk not followed by CRLF"));
                }
                self.state = State::ChunkSize;
                Ok((2, Step::Body(0)))
            }
            State::Trailers => {
                let Some(i) = find_crlf(buf) else {
                    return if buf.len() > MAX_HEAD {
                        Err(ParseError("trailers too long"))
                    } else {
                        Ok((0, Step::NeedMore))
                    };
                };
                if i == 0 {
                    self.state = State::Done;
                }
                Ok((i + 2, Step::Body(0)))
            }
        }
    }

    fn head(&mut self, buf: &[u8]) -> Result<(usize, Step), ParseError> {
        let from = self.scanned.saturating_sub(3);
        let end = match CRLFCRLF.find(&buf[from..]) {
            Some(i) => from + i + 4,
            None => {
                if buf.len() > MAX_HEAD {
                    return Err(ParseError("response head larger than 64 KiB"));
                }
                // Say at once when what came cannot begin a response (typically a body longer
                // than its Content-Length), instead of waiting for a head until the timeout.
                let seen = &buf[..buf.len().min(7)];
                if !b"HTTP/1.".starts_with(seen) {
                    return Err(ParseError(
                        "bytes that cannot begin a response (a body longer than its Content-Length?)",
                    ));
                }
                self.scanned = buf.len();
                return Ok((0, Step::NeedMore));
            }
        };
        self.scanned = 0;
        let (status_line, fields) = head_fields(&buf[..end]);
        if status_line.len() < 12 || !status_line.starts_with(b"HTTP/1.") || status_line[8] != b' '
        {
            return Err(ParseError("bad status line"));
        }
        let http10 = status_line[7] == b'0';
        let status =
            parse_u64(&status_line[9..12], 10).ok_or(ParseError("bad status code"))? as u16;
        if !(100..=999).contains(&status) {
            return Err(ParseError("bad status code"));
        }
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut close = http10;
        for field in fields {
            let (name, value) = field?;
            match name.len() {
                14 if name.eq_ignore_ascii_case(b"content-length") => {
                    length = Some(parse_u64(value, 10).ok_or(ParseError("bad content-length"))?);
                }
                17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                    chunked = value.len() >= 7
                        && value[value.len() - 7..].eq_ignore_ascii_case(b"chunked");
                }
                10 if name.eq_ignore_ascii_case(b"connection") => {
                    if value.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if value.eq_ignore_ascii_case(b"keep-alive") {
                        close = false;
                    }
                }
                _ => {}
            }
        }
        if (100..200).contains(&status) && status != 101 {
            return Ok((end, Step::Interim { len: end }));
        }
        self.status = status;
        self.close = close;
        self.state = if self.head_request || status == 204 || status == 304 {
            State::Done
        } else if chunked {
            State::ChunkSize
        } else if let Some(n) = length {
            if n == 0 {
                State::Done
            } else {
                State::Body(n)
            }
        } else {
            self.close = true;
            State::UntilClose
        };
        Ok((end, Step::Head { status, len: end }))
    }
}

/// A header field of a head, as (name, value), or the line that is not one.
pub type HeaderField<'a> = Result<(&'a [u8], &'a [u8]), ParseError>;

/// The status line of a response head (`head`: up to and including its blank line, or
/// without it) and its header fields in order, as (name, value) with the value trimmed; a
/// line without a colon is an error. The parser reads heads with it, and the frame view shows
/// them with it.
pub fn head_fields(head: &[u8]) -> (&[u8], impl Iterator<Item = HeaderField<'_>> + '_) {
    let head = head.strip_suffix(b"\r\n\r\n").unwrap_or(head);
    // Lines found with memchr (SIMD) rather than a byte-by-byte split.
    let mut line_start = 0usize;
    let mut lines = memchr::memchr_iter(b'\n', head)
        .chain(std::iter::once(head.len()))
        .map(move |i| {
            let line = &head[line_start..i];
            line_start = i + 1;
            line.strip_suffix(b"\r").unwrap_or(line)
        });
    let status_line = lines.next().unwrap_or_default();
    let fields = lines.map(|line| {
        let colon = memchr::memchr(b':', line).ok_or(ParseError("header line without colon"))?;
        Ok((&line[..colon], trim(&line[colon + 1..])))
    });
    (status_line, fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps of the bytes fed in `pieces` (empty body steps left out), and how many
    /// bytes were consumed.
    fn parse_pieces<'a>(
        p: &mut ResponseParser,
        pieces: impl IntoIterator<Item = &'a [u8]>,
    ) -> (Vec<Step>, usize) {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        let mut start = 0;
        for piece in pieces {
            buf.extend_from_slice(piece);
            loop {
                let (used, step) = p.step(&buf[start..]).unwrap();
                start += used;
                if step == Step::NeedMore {
                    break;
                }
                if step != Step::Body(0) {
                    out.push(step);
                }
            }
        }
        (out, start)
    }

    fn parse_all(p: &mut ResponseParser, data: &[u8], chunk: usize) -> Vec<Step> {
        parse_pieces(p, data.chunks(chunk)).0
    }

    fn summarize(steps: &[Step]) -> (Vec<u16>, usize) {
        let done = steps
            .iter()
            .filter_map(|s| {
                if let Step::Done { status, .. } = s {
                    Some(*status)
                } else {
                    None
                }
            })
            .collect();
        let body = steps
            .iter()
            .map(|s| if let Step::Body(n) = s { *n } else { 0 })
            .sum();
        (done, body)
    }

    #[test]
    fn pipelined_length_and_chunked_responses_in_any_split() {
        let data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\nHTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
        for chunk in [1, 2, 3, 7, 64, data.len()] {
            let mut p = ResponseParser::new();
            let steps = parse_all(&mut p, data, chunk);
            assert_eq!(
                summarize(&steps),
                (vec![200, 404, 204], 10),
                "chunk {chunk}: {steps:?}"
            );
            assert!(matches!(steps.last(), Some(Step::Done { close: true, .. })));
        }
    }

    /// A body longer than its Content-Length: the extra bytes are refused as soon as they
    /// cannot begin a response, not waited on until the request timeout.
    #[test]
    fn bytes_after_a_body_that_cannot_begin_a_response_are_an_error_at_once() {
        let mut p = ResponseParser::new();
        let input = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello world";
        let mut used = 0;
        let mut done = 0;
        let err = loop {
            match p.step(&input[used..]) {
                Ok((_, Step::NeedMore)) => panic!("waited for more after {done} responses"),
                Ok((n, step)) => {
                    used += n;
                    done += usize::from(matches!(step, Step::Done { .. }));
                }
                Err(e) => break e,
            }
        };
        assert_eq!(done, 1);
        assert!(err.to_string().contains("Content-Length"), "{err}");
        // A pipelined response split anywhere still parses.
        let mut p = ResponseParser::new();
        assert_eq!(p.step(b"HTT").unwrap(), (0, Step::NeedMore));
    }

    #[test]
    fn until_close_body_and_bad_input() {
        let mut p = ResponseParser::new();
        let (used, step) = p.step(b"HTTP/1.0 200 OK\r\n\r\nabc").unwrap();
        assert_eq!(
            step,
            Step::Head {
                status: 200,
                len: 19
            }
        );
        assert_eq!(
            p.step(&b"HTTP/1.0 200 OK\r\n\r\nabc"[used..]).unwrap(),
            (3, Step::Body(3))
        );
        assert_eq!(
            p.finish_at_eof(),
            Some(Step::Done {
                status: 200,
                close: true
            })
        );

        for bad in [
            &b"SMTP 220 hello\r\n\r\n"[..],
            b"HTTP/1.1 2x0 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n",
        ] {
            assert!(
                ResponseParser::new().step(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let mut p = ResponseParser::new();
        let (u, _) = p
            .step(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
        assert!(u > 0);
        assert!(p.step(b"zz\r\n").is_err());
        let huge = vec![b'a'; MAX_HEAD + 10];
        assert!(ResponseParser::new().step(&huge).is_err());
    }

    /// The bytes in two pieces, split at every point (a head, a chunk-size line, the CRLF
    /// after chunk data, a trailer cut anywhere): the same responses, statuses and body bytes.
    #[test]
    fn every_split_point_frames_the_same_responses() {
        let data = b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n10\r\n0123456789abcdef\r\n0\r\nx-t: 1\r\n\r\nHTTP/1.1 304 Not Modified\r\ncontent-length: 9\r\n\r\n";
        for split in 0..=data.len() {
            let mut p = ResponseParser::new();
            let (steps, start) = parse_pieces(&mut p, [&data[..split], &data[split..]]);
            assert_eq!(
                summarize(&steps),
                (vec![200, 200, 304], 24),
                "split {split}"
            );
            assert_eq!(start, data.len(), "split {split}");
            assert!(p.idle());
        }
    }

    #[test]
    fn head_fields_lists_the_status_line_and_trimmed_fields() {
        let head = b"HTTP/1.1 200 OK\r\nServer:  nginx \r\nx-empty:\r\n\r\n";
        let (line, fields) = head_fields(head);
        assert_eq!(line, b"HTTP/1.1 200 OK");
        let fields: Vec<_> = fields.collect::<Result<_, _>>().unwrap();
        assert_eq!(fields, [(&b"Server"[..], &b"nginx"[..]), (b"x-empty", b"")]);
        let (_, mut bad) = head_fields(b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n");
        assert!(bad.next().unwrap().is_err());
    }

    #[test]
    fn head_request_has_no_body() {
        let mut p = ResponseParser::new();
        p.head_request = true;
        let (u, s) = p
            .step(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
            .unwrap();
        assert_eq!(
            s,
            Step::Head {
                status: 200,
                len: u
            }
        );
        assert_eq!(
            p.step(b"").unwrap().1,
            Step::Done {
                status: 200,
                close: false
            }
        );
    }
}
