//! HTTP/1.1 request framing (RFC 9112), sans-IO: the origin's one request framer. It finds
//! where a request head ends, reads it in place (method, target, version, Host, how the body
//! is framed, keep-alive) and then steps over the body (Content-Length or chunked), fed any
//! split of the bytes.
//!
//! Strict on purpose: a measurement origin must not read a request differently from a proxy
//! in front of it, so every ambiguous framing is refused (RFC 9112 §2.2, §2.3, §3, §3.2, §5,
//! §6.1, §6.3, §7.1): a bare LF or bare CR, obs-fold (in the head or the trailers), whitespace
//! before a colon or before the first field, a field name that is not a token, a control
//! character in a value, a request line that is not `method SP target SP HTTP/x.y`, a
//! malformed version, no Host on HTTP/1.1 or more than one, a Host that is not
//! `host[:port]`, Content-Length next to Transfer-Encoding, a Content-Length that is not one
//! decimal number (or two that differ), a Transfer-Encoding other than exactly one `chunked`
//! (none on HTTP/1.0), a chunk-size line that is not `1*HEXDIG [chunk-ext]`, a malformed chunk.
//! One empty line before a request line is skipped (§2.2; more are too, up to the head's
//! limit). HTTP/1.x above 1.1 is read as HTTP/1.1 (RFC 9110 §2.5). The caller answers
//! [`Refusal::status`] (400; 431 for a head over its limit, 505 for another major version)
//! and closes.
//!
//! Costs: no allocation; a head that arrives in pieces is scanned once (the search resumes
//! where it stopped), then read in one pass when its empty line is there.
//!
//! What it is not: a request model. Field values are bytes; only the fields that frame a
//! request or its connection are interpreted, the rest are handed out by [`RequestHead::fields`].

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A line ended in LF without CR (RFC 9112 §2.2).
    BareLf,
    /// A CR not followed by LF (RFC 9112 §2.2).
    BareCr,
    /// A field line of the head or the trailers starting with whitespace: obs-fold, or
    /// whitespace before the first field (RFC 9112 §5.2, §2.2, §7.1.2).
    ObsFold,
    /// A field line without a colon, with whitespace before it, or a name that is not a token
    /// (RFC 9112 §5.1).
    BadFieldLine,
    /// A control character in a field value (RFC 9110 §5.5).
    BadFieldValue,
    /// A request line that is not `method SP request-target SP HTTP-version` (RFC 9112 §3).
    BadRequestLine,
    /// A version that starts `HTTP/` in any case but is not `HTTP/` DIGIT `.` DIGIT (RFC 9112
    /// §2.3), such as `http/1.1`, `HTTP/1` or `HTTP/1.10`.
    BadVersion,
    /// A well-formed version whose major number is not 1, such as `HTTP/2.0` (RFC 9110
    /// §15.6.6: 505).
    VersionNotSupported,
    /// An HTTP/1.1 request without Host (RFC 9112 §3.2).
    NoHost,
    /// More than one Host field line (RFC 9112 §3.2).
    TwoHosts,
    /// A Host value that is neither empty nor `uri-host [":" port]` (RFC 9112 §3.2, RFC 9110
    /// §7.2, RFC 3986 §3.2.2): whitespace, userinfo, a character outside a reg-name, a bad
    /// IP-literal or a port that is not digits.
    BadHost,
    /// Content-Length together with Transfer-Encoding (RFC 9112 §6.1, §6.3).
    LengthAndEncoding,
    /// A Content-Length that is not one decimal number, or two that differ (RFC 9112 §6.3).
    BadLength,
    /// A Transfer-Encoding other than exactly `chunked`, repeated, or on HTTP/1.0.
    BadEncoding,
    /// A chunk-size line that is not `1*HEXDIG [chunk-ext]` then CRLF (RFC 9112 §7.1,
    /// §7.1.1), chunk data not followed by CRLF, or a chunk line or trailer section over its
    /// bound.
    BadChunk,
    /// The head is larger than the limit given to [`HeadReader::read`].
    TooLarge,
}

impl Refusal {
    /// The status to answer with: 431 for a head over the limit, 505 for a major version
    /// other than 1, 400 otherwise.
    pub fn status(self) -> u16 {
        match self {
            Refusal::TooLarge => 431,
            Refusal::VersionNotSupported => 505,
            _ => 400,
        }
    }

    /// One line saying what was wrong.
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::BareLf => "a line ends in LF without CR",
            Refusal::BareCr => "a CR is not followed by LF",
            Refusal::ObsFold => "a field line starts with whitespace (obs-fold)",
            Refusal::BadFieldLine => "a field line is not `name: value`",
            Refusal::BadFieldValue => "a field value holds a control character",
            Refusal::BadRequestLine => "the request line is not `METHOD TARGET HTTP/1.1`",
            Refusal::BadVersion => "the HTTP version is not `HTTP/` digit `.` digit",
            Refusal::VersionNotSupported => "an HTTP major version other than 1",
            Refusal::NoHost => "no Host field (required since HTTP/1.1)",
            Refusal::TwoHosts => "more than one Host",
            Refusal::BadHost => "the Host value is not `host[:port]`",
            Refusal::LengthAndEncoding => "Content-Length together with Transfer-Encoding",
            Refusal::BadLength => "Content-Length is not one decimal number",
            Refusal::BadEncoding => "Transfer-Encoding is not exactly one `chunked`",
            Refusal::BadChunk => "malformed chunked body",
            Refusal::TooLarge => "request head over --max-header-size",
        }
    }
}

/// The HTTP version of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0.
    Http10,
    /// HTTP/1.1, or HTTP/1.x with a higher minor version, which is answered as the highest
    /// minor version we speak (RFC 9110 §2.5).
    Http11,
}

/// How a request's body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyLength {
    /// No body.
    None,
    /// Exactly this many bytes (never 0: that is `None`).
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
}

/// A complete request head, borrowed from the bytes it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHead<'a> {
    /// The method token.
    pub method: &'a str,
    /// The request target as sent (origin-form `/p?q`, absolute-form, authority-form or `*`).
    pub target: &'a str,
    /// HTTP/1.1 (or a higher HTTP/1 minor version) or HTTP/1.0.
    pub version: Version,
    /// The Host field's value, trimmed: empty, or a valid `uri-host [":" port]`.
    pub host: Option<&'a [u8]>,
    /// How the body is framed.
    pub body: BodyLength,
    /// The connection may carry another request after this one (HTTP/1.1 without
    /// `Connection: close`, HTTP/1.0 with `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
    /// The field lines, each ending in CRLF.
    fields: &'a [u8],
}

impl<'a> RequestHead<'a> {
    /// Every field line as (name, value), in order; values trimmed of whitespace.
    pub fn fields(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        self.fields.split(|&b| b == b'\n').filter_map(|line| {
            let line = line.strip_suffix(b"\r")?;
            let colon = line.iter().position(|&b| b == b':')?;
            Some((&line[..colon], trim(&line[colon + 1..])))
        })
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

/// The token characters that are not letters or digits (RFC 9110 §5.6.2).
const TCHAR_PUNCTUATION: &[u8] = b"!#$%&'*+-.^_`|~";

/// The characters of a reg-name besides letters, digits and pct-encoded triplets: the rest of
/// unreserved and the sub-delims (RFC 3986 §2.2, §2.3, §3.2.2).
const REG_NAME_PUNCTUATION: &[u8] = b"-._~!$&'()*+,;=";

/// Byte classes, one table lookup per byte of a head (every byte of a request line and of a
/// field line is classified once).
const TCHAR: u8 = 1;
const VALUE: u8 = 2;
const REG_NAME: u8 = 4;
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        if c.is_ascii_alphanumeric() {
            t[b] |= TCHAR | REG_NAME;
        }
        // A byte allowed in a field value: HTAB, SP, VCHAR and obs-text (RFC 9110 §5.5).
        if c == b'\t' || (c >= b' ' && c <= b'~') || c >= 0x80 {
            t[b] |= VALUE;
        }
        b += 1;
    }
    let mut i = 0;
    while i < TCHAR_PUNCTUATION.len() {
        t[TCHAR_PUNCTUATION[i] as usize] |= TCHAR;
        i += 1;
    }
    let mut i = 0;
    while i < REG_NAME_PUNCTUATION.len() {
        t[REG_NAME_PUNCTUATION[i] as usize] |= REG_NAME;
        i += 1;
    }
    t
};

/// A token character (RFC 9110 §5.6.2).
fn is_tchar(b: u8) -> bool {
    CLASS[usize::from(b)] & TCHAR != 0
}

/// A byte allowed in a field value: HTAB, SP, VCHAR and obs-text (RFC 9110 §5.5).
fn is_value_byte(b: u8) -> bool {
    CLASS[usize::from(b)] & VALUE != 0
}

/// A reg-name character other than `%` (RFC 3986 §3.2.2: unreserved / sub-delims).
fn is_reg_name_byte(b: u8) -> bool {
    CLASS[usize::from(b)] & REG_NAME != 0
}

/// Whether a Host value is acceptable (RFC 9112 §3.2, RFC 9110 §7.2): empty (what a client
/// sends when the target has no authority; we keep taking it whatever the target's form), or
/// `uri-host [":" port]`. The host is an IP-literal in brackets or a non-empty reg-name (which
/// takes in every IPv4address; RFC 9110 §4.2.1 forbids an empty host in an http URI); the
/// port is `*DIGIT` as RFC 3986 §3.2.3 has it, so `a.test:` passes like `a.test`.
fn valid_host(value: &[u8]) -> bool {
    if value.is_empty() {
        return true;
    }
    let port = if let Some(literal) = value.strip_prefix(b"[") {
        let Some(close) = memchr::memchr(b']', literal) else {
            return false;
        };
        if !ip_literal(&literal[..close]) {
            return false;
        }
        &literal[close + 1..]
    } else {
        let end = memchr::memchr(b':', value).unwrap_or(value.len());
        if end == 0 || !reg_name(&value[..end]) {
            return false;
        }
        &value[end..]
    };
    match port {
        [] => true,
        [b':', digits @ ..] => digits.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// `*( unreserved / pct-encoded / sub-delims )` (RFC 3986 §3.2.2).
fn reg_name(name: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = name.get(i) {
        if b == b'%' {
            // pct-encoded: exactly two hex digits follow.
            let hex = |at: usize| name.get(at).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else if is_reg_name_byte(b) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// What is between an IP-literal's brackets: IPv6address or IPvFuture (RFC 3986 §3.2.2).
fn ip_literal(inner: &[u8]) -> bool {
    match inner {
        // IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ).
        [b'v' | b'V', rest @ ..] => {
            let digits = rest.iter().take_while(|b| b.is_ascii_hexdigit()).count();
            match rest[digits..].split_first() {
                Some((b'.', tail)) if digits > 0 && !tail.is_empty() => tail
                    .iter()
                    .all(|&b| b == b':' || (b != b'%' && is_reg_name_byte(b))),
                _ => false,
            }
        }
        // std's parser takes exactly the textual IPv6 forms (no zone, no brackets).
        _ => {
            std::str::from_utf8(inner).is_ok_and(|text| text.parse::<std::net::Ipv6Addr>().is_ok())
        }
    }
}

/// Whether every byte of `value` is a field-value byte ([`is_value_byte`]). Eight bytes at a
/// time: a word with no control byte (below 0x20) and no DEL (0x7F) is all value bytes
/// (0x20–0x7E and obs-text); a word with either, or the tail, is judged byte by byte (HTAB is
/// a control byte that is allowed).
fn all_value_bytes(value: &[u8]) -> bool {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let mut words = value.chunks_exact(8);
    for word in &mut words {
        let w = u64::from_ne_bytes(word.try_into().unwrap_or([0; 8]));
        // A byte below 0x20 (a byte under 0x80 whose subtraction borrows) or equal to 0x7F
        // (a zero byte of w ^ 0x7F..) sets its high bit here; false alarms only cost the
        // byte-by-byte look.
        let below_space = w.wrapping_sub(ONES * 0x20) & !w & HIGH;
        let d = w ^ (ONES * 0x7f);
        let del = d.wrapping_sub(ONES) & !d & HIGH;
        if below_space | del != 0 && !word.iter().all(|&b| is_value_byte(b)) {
            return false;
        }
    }
    words.remainder().iter().all(|&b| is_value_byte(b))
}

/// Finds request heads in a connection's bytes. The scan for a head's end resumes where the
/// last call stopped, so a head that trickles in is scanned once; call [`HeadReader::read`]
/// with the same buffer grown (the bytes already given unchanged at its start), and after a
/// head is returned, with the bytes that follow it (its body first, if any).
#[derive(Debug, Clone, Default)]
pub struct HeadReader {
    /// Bytes already scanned (every CR in them followed by LF, no bare LF).
    scanned: usize,
    /// Where the current line starts.
    line_start: usize,
    /// Where the request line starts (after the empty lines allowed before it, §2.2).
    start: Option<usize>,
}

impl HeadReader {
    /// The request head at the start of `buf`: `Ok(Some((consumed, head)))` once it is
    /// complete (`consumed` includes empty lines before it), `Ok(None)` while more bytes are
    /// needed, `Err` when the request is refused (then the connection must close). `max`
    /// bounds the head (empty lines before it included).
    pub fn read<'a>(
        &mut self,
        buf: &'a [u8],
        max: usize,
    ) -> Result<Option<(usize, RequestHead<'a>)>, Refusal> {
        // Only the first `max` bytes can hold the head: what lies past them is never judged,
        // so a head over the limit is refused as too large however its bytes arrive (a bare
        // LF at byte 5,000 of a 4 KiB-limited head must not be a different refusal when the
        // bytes come at once than when they trickle in).
        let limited = &buf[..buf.len().min(max)];
        if self.scanned == 0 {
            if let Some(found) = whole_head(limited) {
                return Ok(Some(found));
            }
        }
        let Some(end) = self.find_end(limited)? else {
            if buf.len() > max {
                return Err(Refusal::TooLarge);
            }
            return Ok(None);
        };
        let start = self.start.unwrap_or(0);
        *self = HeadReader::default();
        Ok(Some((end, parse_head(&buf[start..end])?)))
    }

    /// The offset just past the empty line that ends the head, once it is in `buf`.
    fn find_end(&mut self, buf: &[u8]) -> Result<Option<usize>, Refusal> {
        let mut i = self.scanned;
        while let Some(k) = memchr::memchr2(b'\r', b'\n', &buf[i.min(buf.len())..]) {
            let p = i + k;
            // Every CR seen so far was followed by LF and both were stepped over.
            if buf[p] == b'\n' {
                return Err(Refusal::BareLf);
            }
            match buf.get(p + 1) {
                None => {
                    self.scanned = p;
                    return Ok(None);
                }
                Some(b'\n') => {}
                Some(_) => return Err(Refusal::BareCr),
            }
            let line = self.line_start;
            i = p + 2;
            self.line_start = i;
            if p == line {
                // An empty line: the end of the head, or one allowed before the request line.
                if self.start.is_some() {
                    return Ok(Some(i));
                }
            } else if self.start.is_none() {
                self.start = Some(line);
            }
        }
        self.scanned = buf.len();
        Ok(None)
    }
}

/// The common case in one pass: a head that starts with its request line and is all in
/// `buf`, every line CRLF-terminated with no other CR or LF in it (each line's bytes are
/// judged by [`request_line`] and [`Seen::field`], which take neither). Returns the bytes
/// used and the head; `None` for anything else (unfinished, empty lines before it, any
/// refusal), which [`HeadReader::read`] then frames the incremental way. So this path only
/// ever accepts what that way accepts, with the same result, and every refusal is reported
/// by that way alone (which one, when a head has several faults, stays the same).
fn whole_head(buf: &[u8]) -> Option<(usize, RequestHead<'_>)> {
    let mut lines = memchr::memchr_iter(b'\n', buf);
    let first = lines.next()?;
    let (method, target, version) = request_line(buf[..first].strip_suffix(b"\r")?).ok()?;
    let fields_start = first + 1;
    let mut seen = Seen::default();
    let mut at = fields_start;
    for lf in lines {
        let line = buf[at..lf].strip_suffix(b"\r")?;
        if line.is_empty() {
            let head = seen.head((method, target, version), &buf[fields_start..at]);
            return Some((lf + 1, head.ok()?));
        }
        seen.field(line).ok()?;
        at = lf + 1;
    }
    None
}

/// Reads a complete head (request line, field lines, empty line; all CRLF-terminated).
fn parse_head(head: &[u8]) -> Result<RequestHead<'_>, Refusal> {
    let line_end = memchr::memchr(b'\r', head).unwrap_or(head.len());
    let (method, target, version) = request_line(&head[..line_end])?;
    // Field lines: after the request line's CRLF, before the final empty line's CRLF.
    let fields = &head[(line_end + 2).min(head.len())..head.len().saturating_sub(2)];
    let mut seen = Seen::default();
    // Every line ends in CRLF (the scan for the head's end refused bare CRs and LFs).
    let mut at = 0;
    for lf in memchr::memchr_iter(b'\n', fields) {
        seen.field(&fields[at..lf.saturating_sub(1).max(at)])?;
        at = lf + 1;
    }
    seen.head((method, target, version), fields)
}

fn request_line(line: &[u8]) -> Result<(&str, &str, Version), Refusal> {
    // The method: one or more token characters, then SP; the target: one or more visible
    // characters, then SP; the rest is the version (one pass over each).
    let m = line
        .iter()
        .position(|&b| !is_tchar(b))
        .unwrap_or(line.len());
    if m == 0 || line.get(m) != Some(&b' ') {
        return Err(Refusal::BadRequestLine);
    }
    let (method, rest) = (&line[..m], &line[m + 1..]);
    let t = rest
        .iter()
        .position(|b| !(b'!'..=b'~').contains(b))
        .unwrap_or(rest.len());
    if t == 0 || rest.get(t) != Some(&b' ') {
        return Err(Refusal::BadRequestLine);
    }
    let (target, version) = (&rest[..t], &rest[t + 1..]);
    let version = match *version {
        // HTTP-version = "HTTP" "/" DIGIT "." DIGIT, case-sensitive (RFC 9112 §2.3).
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            match (major, minor) {
                (b'1', b'0') => Version::Http10,
                // 1.1 and any later 1.x: answered as 1.1, the highest we speak (RFC 9110 §2.5).
                (b'1', _) => Version::Http11,
                _ => return Err(Refusal::VersionNotSupported),
            }
        }
        // Meant as a version (one word, `HTTP/` in any case) but not one: 400, not 505.
        ref v if v.len() >= 5 && v[..5].eq_ignore_ascii_case(b"HTTP/") && !v.contains(&b' ') => {
            return Err(Refusal::BadVersion)
        }
        _ => return Err(Refusal::BadRequestLine),
    };
    // SAFETY: both are ASCII, checked byte by byte above (token characters; '!'..='~'), and
    // ASCII is UTF-8.
    let (method, target) = unsafe {
        (
            std::str::from_utf8_unchecked(method),
            std::str::from_utf8_unchecked(target),
        )
    };
    Ok((method, target, version))
}

/// What the field lines said so far.
#[derive(Default)]
struct Seen<'a> {
    host: Option<&'a [u8]>,
    hosts: u32,
    length: Option<u64>,
    encodings: u32,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
    /// The first refusal found in a value; reported after the Host and framing checks.
    refusal: Option<Refusal>,
}

impl<'a> Seen<'a> {
    fn field(&mut self, line: &'a [u8]) -> Result<(), Refusal> {
        match line.first() {
            Some(b' ' | b'\t') => return Err(Refusal::ObsFold),
            None => return Err(Refusal::BadFieldLine),
            _ => {}
        }
        let colon = line
            .iter()
            .position(|&b| !is_tchar(b))
            .ok_or(Refusal::BadFieldLine)?;
        if colon == 0 || line[colon] != b':' {
            return Err(Refusal::BadFieldLine);
        }
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if !all_value_bytes(value) {
            return Err(Refusal::BadFieldValue);
        }
        match name.len() {
            4 if name.eq_ignore_ascii_case(b"host") => {
                self.hosts += 1;
                self.host = Some(value);
            }
            6 if name.eq_ignore_ascii_case(b"expect") => {
                self.expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
            }
            10 if name.eq_ignore_ascii_case(b"connection") => {
                for token in value.split(|&b| b == b',').map(trim) {
                    self.close |= token.eq_ignore_ascii_case(b"close");
                    self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            14 if name.eq_ignore_ascii_case(b"content-length") => self.length_field(value),
            17 if name.eq_ignore_ascii_case(b"transfer-encoding") => {
                self.encodings += 1;
                if !value.eq_ignore_ascii_case(b"chunked") {
                    self.refusal.get_or_insert(Refusal::BadEncoding);
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn length_field(&mut self, value: &[u8]) {
        let parsed =
            (!value.is_empty() && value.len() <= 19 && value.iter().all(u8::is_ascii_digit))
                .then(|| value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
        match (parsed, self.length) {
            (Some(n), Some(m)) if n != m => {
                self.refusal.get_or_insert(Refusal::BadLength);
            }
            (Some(n), _) => self.length = Some(n),
            (None, _) => {
                self.refusal.get_or_insert(Refusal::BadLength);
            }
        }
    }

    /// The head these field lines complete (`line`: the request line's method, target and
    /// version; `fields`: the field lines), or why it is refused.
    fn head(
        &self,
        line: (&'a str, &'a str, Version),
        fields: &'a [u8],
    ) -> Result<RequestHead<'a>, Refusal> {
        let (method, target, version) = line;
        let (body, keep_alive) = self.finish(version)?;
        Ok(RequestHead {
            method,
            target,
            version,
            host: self.host,
            body,
            keep_alive,
            expect_continue: self.expect_continue,
            fields,
        })
    }

    /// The body framing and keep-alive, or why the head is refused.
    fn finish(&self, version: Version) -> Result<(BodyLength, bool), Refusal> {
        let http10 = version == Version::Http10;
        if self.hosts > 1 {
            return Err(Refusal::TwoHosts);
        }
        if self.hosts == 0 && !http10 {
            return Err(Refusal::NoHost);
        }
        // A Host with an invalid value gets 400 on any version (RFC 9112 §3.2).
        if self.host.is_some_and(|host| !valid_host(host)) {
            return Err(Refusal::BadHost);
        }
        if self.encodings > 0 && self.length.is_some() {
            return Err(Refusal::LengthAndEncoding);
        }
        if let Some(why) = self.refusal {
            return Err(why);
        }
        if self.encodings > 1 || (self.encodings == 1 && http10) {
            return Err(Refusal::BadEncoding);
        }
        let body = match self.length {
            _ if self.encodings == 1 => BodyLength::Chunked,
            Some(n) if n > 0 => BodyLength::Length(n),
            _ => BodyLength::None,
        };
        let keep_alive = !self.close && (!http10 || self.keep_alive);
        Ok((body, keep_alive))
    }
}

/// Longest chunk-size line (size and extensions) taken: it bounds what a chunk extension
/// can cost, as extensions are checked byte by byte but never kept.
pub const MAX_CHUNK_LINE: u32 = 4096;
/// Largest trailer section taken.
pub const MAX_TRAILERS: u32 = 64 * 1024;

/// Where in a body the next byte belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    /// `n` more bytes of a Content-Length body.
    Length(u64),
    /// The digits of a chunk size.
    ChunkSize,
    /// A chunk extension, at the place given.
    ChunkExt(Ext),
    /// `n` more bytes of chunk data.
    ChunkData(u64),
    /// The CR after chunk data.
    ChunkDataEnd,
    /// At the start of a trailer line, or of the empty line ending the body.
    TrailerStart,
    TrailerLine,
    /// A CR was seen; LF must follow, then `then`.
    Cr(AfterCr),
    Done,
}

/// Where in `chunk-ext = *( BWS ";" BWS chunk-ext-name [ BWS "=" BWS chunk-ext-val ] )`
/// (RFC 9112 §7.1.1) the next byte falls. Names are tokens, values tokens or quoted strings.
/// BWS is the grammar's, so it is taken before `;` and around `=` (`3 ;a = 1`), but never
/// before CRLF: `3 \r\n` and `3;a \r\n` are refused, as no chunk-ext ends in whitespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ext {
    /// Whitespace after the size or a value: more of it or `;` must follow.
    SpaceBeforeSemicolon,
    /// After `;`: whitespace, then a name.
    NameStart,
    Name,
    /// Whitespace after a name: more of it, `=` or `;` must follow.
    SpaceAfterName,
    /// After `=`: whitespace, then a token or a quoted string.
    ValueStart,
    Token,
    Quoted,
    /// After a backslash in a quoted string.
    QuotedPair,
    /// After a quoted string's closing quote.
    QuotedEnd,
}

/// What follows the LF of a CRLF in a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterCr {
    /// A chunk-size line: chunk data (or the trailers after the last chunk) follow.
    SizeLine,
    /// Chunk data: the next chunk-size line follows.
    Data,
    /// A trailer line: another one, or the empty line.
    TrailerLine,
    /// The empty line ending the body.
    LastLine,
}

/// Steps over one request body; the bytes themselves are not kept.
#[derive(Debug, Clone)]
pub struct BodyReader {
    state: Body,
    chunk: u64,
    /// Bytes of the current chunk line, or of the trailers, against their bounds.
    line: u32,
}

impl BodyReader {
    /// A reader for a body framed as `length` (done at once for [`BodyLength::None`]).
    pub fn new(length: BodyLength) -> BodyReader {
        let state = match length {
            BodyLength::None => Body::Done,
            BodyLength::Length(n) => Body::Length(n),
            BodyLength::Chunked => Body::ChunkSize,
        };
        BodyReader {
            state,
            chunk: 0,
            line: 0,
        }
    }

    /// True once the whole body was read.
    pub fn done(&self) -> bool {
        self.state == Body::Done
    }

    /// Steps over body bytes at the start of `buf`; returns how many belonged to the body
    /// (the rest is the next request). Once it refuses, the connection must close.
    pub fn feed(&mut self, buf: &[u8]) -> Result<usize, Refusal> {
        let mut i = 0;
        while i < buf.len() {
            match self.state {
                Body::Done => break,
                Body::Length(n) | Body::ChunkData(n) => {
                    let take = n.min((buf.len() - i) as u64);
                    i += take as usize;
                    let left = n - take;
                    self.state = match (self.state, left) {
                        (Body::Length(_), 0) => Body::Done,
                        (Body::Length(_), _) => Body::Length(left),
                        (_, 0) => Body::ChunkDataEnd,
                        _ => Body::ChunkData(left),
                    };
                }
                _ => {
                    self.step(buf[i])?;
                    i += 1;
                }
            }
        }
        Ok(i)
    }

    /// One byte of a chunk-size line, the CRLF after chunk data, or the trailers.
    fn step(&mut self, b: u8) -> Result<(), Refusal> {
        self.line += 1;
        let bound = match self.state {
            Body::TrailerStart | Body::TrailerLine | Body::Cr(AfterCr::TrailerLine) => MAX_TRAILERS,
            _ => MAX_CHUNK_LINE,
        };
        if self.line > bound {
            return Err(Refusal::BadChunk);
        }
        self.state = match (self.state, b) {
            (Body::Cr(then), b'\n') => self.after_crlf(then),
            (Body::Cr(_), _) => return Err(Refusal::BareCr),
            (_, b'\n') => return Err(Refusal::BareLf),
            (Body::ChunkSize, _) => self.chunk_size_byte(b)?,
            (Body::ChunkExt(at), _) => chunk_ext_byte(at, b)?,
            (Body::ChunkDataEnd, b'\r') => Body::Cr(AfterCr::Data),
            (Body::ChunkDataEnd, _) => return Err(Refusal::BadChunk),
            (Body::TrailerStart, b'\r') => Body::Cr(AfterCr::LastLine),
            // A trailer line is a field line: no obs-fold, as in the head (RFC 9112 §7.1.2).
            (Body::TrailerStart, b' ' | b'\t') => return Err(Refusal::ObsFold),
            (Body::TrailerLine, b'\r') => Body::Cr(AfterCr::TrailerLine),
            (Body::TrailerStart | Body::TrailerLine, _) => Body::TrailerLine,
            // Data and the end are handled in `feed`.
            (s @ (Body::Length(_) | Body::ChunkData(_) | Body::Done), _) => s,
        };
        Ok(())
    }

    /// A byte of a chunk-size line before any extension.
    fn chunk_size_byte(&mut self, b: u8) -> Result<Body, Refusal> {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            // After at least one digit: the line's end, or an extension (whitespace can only
            // be BWS before its `;`).
            b'\r' | b' ' | b'\t' | b';' if self.line > 1 => {
                return Ok(match b {
                    b'\r' => Body::Cr(AfterCr::SizeLine),
                    b';' => Body::ChunkExt(Ext::NameStart),
                    _ => Body::ChunkExt(Ext::SpaceBeforeSemicolon),
                })
            }
            _ => return Err(Refusal::BadChunk),
        };
        self.chunk = self
            .chunk
            .checked_mul(16)
            .and_then(|c| c.checked_add(u64::from(digit)))
            .ok_or(Refusal::BadChunk)?;
        Ok(Body::ChunkSize)
    }

    /// The state after the LF of a CRLF.
    fn after_crlf(&mut self, then: AfterCr) -> Body {
        match then {
            AfterCr::SizeLine => {
                let size = std::mem::take(&mut self.chunk);
                self.line = 0;
                if size == 0 {
                    Body::TrailerStart
                } else {
                    Body::ChunkData(size)
                }
            }
            AfterCr::Data => {
                self.line = 0;
                Body::ChunkSize
            }
            AfterCr::TrailerLine => Body::TrailerStart,
            AfterCr::LastLine => Body::Done,
        }
    }
}

/// The state after one byte (not LF, which the caller refused) of a chunk extension.
fn chunk_ext_byte(at: Ext, b: u8) -> Result<Body, Refusal> {
    let next = match (at, b) {
        (Ext::Name | Ext::Token | Ext::QuotedEnd, b'\r') => return Ok(Body::Cr(AfterCr::SizeLine)),
        (
            Ext::SpaceBeforeSemicolon
            | Ext::SpaceAfterName
            | Ext::Name
            | Ext::Token
            | Ext::QuotedEnd,
            b';',
        ) => Ext::NameStart,
        (Ext::Name | Ext::SpaceAfterName, b'=') => Ext::ValueStart,
        (
            Ext::SpaceBeforeSemicolon | Ext::NameStart | Ext::SpaceAfterName | Ext::ValueStart,
            b' ' | b'\t',
        ) => at,
        (Ext::Name, b' ' | b'\t') => Ext::SpaceAfterName,
        (Ext::Token | Ext::QuotedEnd, b' ' | b'\t') => Ext::SpaceBeforeSemicolon,
        (Ext::NameStart | Ext::Name, _) if is_tchar(b) => Ext::Name,
        (Ext::ValueStart | Ext::Token, _) if is_tchar(b) => Ext::Token,
        (Ext::ValueStart, b'"') => Ext::Quoted,
        (Ext::Quoted, b'"') => Ext::QuotedEnd,
        (Ext::Quoted, b'\\') => Ext::QuotedPair,
        // qdtext and the escaped byte of a quoted-pair: HTAB, SP, VCHAR, obs-text (RFC 9110
        // §5.6.4), the field-value bytes; so a CR inside quotes is refused, never an end.
        (Ext::Quoted | Ext::QuotedPair, _) if is_value_byte(b) => Ext::Quoted,
        _ => return Err(Refusal::BadChunk),
    };
    Ok(Body::ChunkExt(next))
}

#[cfg(test)]
mod tests;
