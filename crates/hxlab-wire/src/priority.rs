//! Extensible priorities (RFC 9218): the `priority` request header's value and the
//! PRIORITY_UPDATE frames that change it later (HTTP/2 frame 0x10, HTTP/3 frames 0xF0700 and
//! 0xF0701), decoded once for the origin's HTTP/2 and HTTP/3 servers, the priority probe and
//! the frame view; and the documented mapping of a deprecated RFC 7540 weight to an urgency
//! for HTTP/2 clients that send nothing else.
//!
//! The field is a Structured Field dictionary (RFC 8941 §3.2). Only two members mean
//! anything: `u` (an integer 0–7, the urgency, 0 most urgent) and `i` (a boolean, the
//! response is useful in pieces). RFC 9218 §4 says what to do with everything else: members
//! of another name or of the wrong type are ignored, an out-of-range urgency is ignored, and
//! a value that is not a valid dictionary is ignored whole. This parser accepts the
//! dictionary grammar (keys, bare items — integers, decimals, strings, tokens, byte
//! sequences, booleans — inner lists and parameters) so a valid value with members we do not
//! know is never mistaken for an invalid one.

/// A response's priority as RFC 9218 defines it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Priority {
    /// 0 (most urgent) to 7.
    pub urgency: u8,
    /// Whether the response can be used as it arrives (and so may share the link).
    pub incremental: bool,
}

impl Default for Priority {
    /// RFC 9218's defaults: `u=3`, not incremental.
    fn default() -> Priority {
        Priority {
            urgency: 3,
            incremental: false,
        }
    }
}

impl std::fmt::Display for Priority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "u={}", self.urgency)?;
        if self.incremental {
            f.write_str(", i")?;
        }
        Ok(())
    }
}

/// Where a stream's priority came from: what the server understood, kept for read-back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Nothing was sent: RFC 9218's defaults.
    Default,
    /// The `priority` request header.
    Header,
    /// A PRIORITY_UPDATE frame (it overrides the header).
    Update,
    /// Only RFC 7540 fields were sent (HTTP/2): mapped by [`from_rfc7540_weight`].
    Rfc7540,
}

impl Priority {
    /// `value` applied on top of `self`: the members `u` and `i` it carries valid, the rest
    /// of `self` kept; `None` when `value` is not a valid dictionary (ignored whole).
    pub fn with_field(self, value: &[u8]) -> Option<Priority> {
        let mut p = self;
        parse_dictionary(value, |key, item| match (key, item) {
            (b"u", Item::Integer(u)) if (0..=7).contains(&u) => p.urgency = u as u8,
            (b"i", Item::Boolean(b)) => p.incremental = b,
            _ => {}
        })?;
        Some(p)
    }

    /// The priority the `priority` field values of one request give (several lines are one
    /// comma-joined value, RFC 9110 §5.3), from the defaults.
    pub fn from_field(value: &[u8]) -> Option<Priority> {
        Priority::default().with_field(value)
    }
}

/// The `priority` field lines of one request, folded as a decoder hands them over (several
/// lines are one comma-joined value, RFC 9110 §5.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Field {
    /// No `priority` line (yet).
    #[default]
    Absent,
    /// The lines so far give this priority.
    Valid(Priority),
    /// Some line is not a valid dictionary: the field is ignored whole.
    Invalid,
}

impl Field {
    /// Takes one more `priority` line.
    pub fn add_line(&mut self, value: &[u8]) {
        *self = match *self {
            Field::Absent => Priority::from_field(value).map_or(Field::Invalid, Field::Valid),
            Field::Valid(p) => p.with_field(value).map_or(Field::Invalid, Field::Valid),
            Field::Invalid => Field::Invalid,
        };
    }

    /// The priority the request asked for, if it sent a valid field.
    pub fn priority(self) -> Option<Priority> {
        match self {
            Field::Valid(p) => Some(p),
            _ => None,
        }
    }
}

/// The urgency an RFC 7540 weight (1–256) maps to, for an HTTP/2 request that carries RFC
/// 7540 priority fields and no RFC 9218 signal. Weights are spread evenly over the eight
/// urgencies, heaviest first (256 → 0, 220 → 1, 183 → 2, 147 → 3, 110 → 4, 74 → 5, 37 → 6,
/// 1 → 7), which is also where Chromium's own weights for its five request priorities (256,
/// 220, 183, 147, 110) land, in its order. Dependencies are not kept: RFC 9113 deprecated the
/// tree, and a weight is the only part of it that says how urgent a request is on its own.
/// Never incremental (RFC 7540 has no such notion).
pub fn from_rfc7540_weight(weight: u16) -> Priority {
    let w = u32::from(weight.clamp(1, 256));
    // (256 - w) * 7 / 255, rounded to nearest.
    let u = ((256 - w) * 7 * 2 + 255) / (255 * 2);
    Priority {
        urgency: u.min(7) as u8,
        incremental: false,
    }
}

/// An HTTP/2 PRIORITY_UPDATE frame's payload (RFC 9218 §7.1): the prioritized stream id and
/// the field value; `None` when it is shorter than the 4-byte id (a FRAME_SIZE_ERROR).
pub fn h2_update(payload: &[u8]) -> Option<(u32, &[u8])> {
    let id = payload.get(..4)?;
    let id = u32::from_be_bytes([id[0], id[1], id[2], id[3]]) & crate::h2::MAX_STREAM_ID;
    Some((id, &payload[4..]))
}

/// An HTTP/3 PRIORITY_UPDATE frame's payload (RFC 9218 §7.2): the prioritized element id (a
/// request stream id for 0xF0700, a push id for 0xF0701) and the field value.
pub fn h3_update(payload: &[u8]) -> Option<(u64, &[u8])> {
    let (id, used) = crate::varint::read(payload)?;
    Some((id, &payload[used..]))
}

/// Writes an HTTP/2 PRIORITY_UPDATE frame (type 0x10, on stream 0) for `stream`.
pub fn write_h2_update(out: &mut Vec<u8>, stream: u32, value: &[u8]) {
    crate::h2::write_head(
        out,
        4 + value.len(),
        crate::h2::frame::PRIORITY_UPDATE,
        0,
        0,
    );
    out.extend_from_slice(&(stream & crate::h2::MAX_STREAM_ID).to_be_bytes());
    out.extend_from_slice(value);
}

/// Writes an HTTP/3 PRIORITY_UPDATE frame (0xF0700) for request stream `stream`.
pub fn write_h3_update(out: &mut Vec<u8>, stream: u64, value: &[u8]) {
    let mut id = Vec::with_capacity(8);
    crate::varint::put(&mut id, stream);
    crate::h3::write_frame_head(
        out,
        crate::h3::frame::PRIORITY_UPDATE_REQUEST,
        (id.len() + value.len()) as u64,
    );
    out.extend_from_slice(&id);
    out.extend_from_slice(value);
}

/// A bare item's value, as far as the priority members need it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Item {
    Integer(i64),
    Boolean(bool),
    /// Any other bare item (decimal, string, token, byte sequence) or an inner list.
    Other,
}

/// Walks a Structured Field dictionary, calling `member` with each key and its value (a
/// member without `=` is the boolean true); `None` when `s` is not a valid dictionary.
fn parse_dictionary(s: &[u8], mut member: impl FnMut(&[u8], Item)) -> Option<()> {
    let mut p = Parser { s, at: 0 };
    p.skip(b" \t");
    if p.done() {
        return Some(());
    }
    loop {
        let key = p.key()?;
        let item = if p.eat(b'=') {
            if p.peek() == Some(b'(') {
                p.inner_list()?;
                Item::Other
            } else {
                p.bare_item()?
            }
        } else {
            Item::Boolean(true)
        };
        p.parameters()?;
        member(key, item);
        p.skip(b" \t");
        if p.done() {
            return Some(());
        }
        if !p.eat(b',') {
            return None;
        }
        p.skip(b" \t");
        if p.done() {
            // A trailing comma is invalid.
            return None;
        }
    }
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Parser<'a> {
    fn done(&self) -> bool {
        self.at >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.at += 1;
            return true;
        }
        false
    }

    fn skip(&mut self, set: &[u8]) {
        while self.peek().is_some_and(|b| set.contains(&b)) {
            self.at += 1;
        }
    }

    /// key = ( lcalpha / "*" ) *( lcalpha / DIGIT / "_" / "-" / "." / "*" )
    fn key(&mut self) -> Option<&'a [u8]> {
        let start = self.at;
        match self.peek()? {
            b'a'..=b'z' | b'*' => self.at += 1,
            _ => return None,
        }
        while self
            .peek()
            .is_some_and(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'.' | b'*'))
        {
            self.at += 1;
        }
        Some(&self.s[start..self.at])
    }

    fn parameters(&mut self) -> Option<()> {
        while self.eat(b';') {
            self.skip(b" ");
            self.key()?;
            if self.eat(b'=') {
                self.bare_item()?;
            }
        }
        Some(())
    }

    fn inner_list(&mut self) -> Option<()> {
        if !self.eat(b'(') {
            return None;
        }
        loop {
            self.skip(b" ");
            if self.eat(b')') {
                return self.parameters();
            }
            self.bare_item()?;
            self.parameters()?;
            match self.peek()? {
                b' ' | b')' => {}
                _ => return None,
            }
        }
    }

    fn bare_item(&mut self) -> Option<Item> {
        match self.peek()? {
            b'-' | b'0'..=b'9' => self.number(),
            b'"' => self.string(),
            b'?' => {
                self.at += 1;
                let b = match self.peek()? {
                    b'0' => false,
                    b'1' => true,
                    _ => return None,
                };
                self.at += 1;
                Some(Item::Boolean(b))
            }
            b':' => {
                self.at += 1;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
                {
                    self.at += 1;
                }
                self.eat(b':').then_some(Item::Other)
            }
            b'A'..=b'Z' | b'a'..=b'z' | b'*' => {
                self.at += 1;
                while self
                    .peek()
                    .is_some_and(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b))
                {
                    self.at += 1;
                }
                Some(Item::Other)
            }
            _ => None,
        }
    }

    fn number(&mut self) -> Option<Item> {
        let negative = self.eat(b'-');
        let start = self.at;
        let mut int_digits = 0;
        let mut value: i64 = 0;
        while let Some(d) = self.peek().filter(u8::is_ascii_digit) {
            self.at += 1;
            int_digits += 1;
            if int_digits > 15 {
                return None;
            }
            value = value * 10 + i64::from(d - b'0');
        }
        if int_digits == 0 {
            return None;
        }
        if self.eat(b'.') {
            if int_digits > 12 {
                return None;
            }
            let frac_start = self.at;
            while self.peek().is_some_and(|b| b.is_ascii_digit()) {
                self.at += 1;
            }
            let frac = self.at - frac_start;
            if frac == 0 || frac > 3 {
                return None;
            }
            return Some(Item::Other);
        }
        debug_assert!(self.at > start);
        Some(Item::Integer(if negative { -value } else { value }))
    }

    fn string(&mut self) -> Option<Item> {
        self.at += 1;
        loop {
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(Item::Other);
                }
                b'\\' => {
                    self.at += 1;
                    match self.peek()? {
                        b'"' | b'\\' => self.at += 1,
                        _ => return None,
                    }
                }
                0x20..=0x7e => self.at += 1,
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(u: u8, i: bool) -> Priority {
        Priority {
            urgency: u,
            incremental: i,
        }
    }

    #[test]
    fn the_members_rfc_9218_defines_are_read() {
        assert_eq!(Priority::from_field(b""), Some(p(3, false)));
        assert_eq!(Priority::from_field(b"u=0"), Some(p(0, false)));
        assert_eq!(Priority::from_field(b"u=5, i"), Some(p(5, true)));
        assert_eq!(Priority::from_field(b"i"), Some(p(3, true)));
        assert_eq!(Priority::from_field(b"i=?0, u=7"), Some(p(7, false)));
        assert_eq!(Priority::from_field(b"i=?1"), Some(p(3, true)));
        // The last of a repeated member wins (RFC 8941 §3.2).
        assert_eq!(Priority::from_field(b"u=1, u=6"), Some(p(6, false)));
        assert_eq!(Priority::from_field(b"  u=2  ,i  "), Some(p(2, true)));
    }

    #[test]
    fn members_of_another_name_type_or_range_are_ignored() {
        assert_eq!(Priority::from_field(b"u=8"), Some(p(3, false)));
        assert_eq!(Priority::from_field(b"u=-1"), Some(p(3, false)));
        assert_eq!(Priority::from_field(b"u=1.5"), Some(p(3, false)));
        assert_eq!(Priority::from_field(b"u=\"1\""), Some(p(3, false)));
        assert_eq!(Priority::from_field(b"i=1"), Some(p(3, false)));
        assert_eq!(
            Priority::from_field(b"u=1;x=2, foo=(a b \"c\"), i"),
            Some(p(1, true))
        );
        assert_eq!(
            Priority::from_field(b"x=:aGk=:, u=4, y=tok/en"),
            Some(p(4, false))
        );
    }

    #[test]
    fn an_invalid_dictionary_is_ignored_whole() {
        for bad in [
            &b"u=1,"[..],
            b"U=1",
            b"u=1 i",
            b"u=",
            b"u=1, ,i",
            b"u=1234567890123456",
            b"u=?2",
            b"u=\"open",
            b"=1",
            b"u=1\x00",
        ] {
            assert_eq!(
                Priority::from_field(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        // An update applies on top of what was there; an invalid one changes nothing.
        assert_eq!(p(1, true).with_field(b"u=5"), Some(p(5, true)));
        assert_eq!(p(1, true).with_field(b"u=5,"), None);
    }

    #[test]
    fn several_lines_fold_into_one_value() {
        let mut f = Field::default();
        assert_eq!(f.priority(), None);
        f.add_line(b"u=1");
        f.add_line(b"i");
        assert_eq!(f.priority(), Some(p(1, true)));
        f.add_line(b"u=9,");
        assert_eq!((f, f.priority()), (Field::Invalid, None));
        f.add_line(b"u=2");
        assert_eq!(f, Field::Invalid);
    }

    #[test]
    fn rfc7540_weights_spread_over_the_urgencies_heaviest_first() {
        let u = |w| from_rfc7540_weight(w).urgency;
        assert_eq!(
            [256, 220, 183, 147, 110, 74, 37, 1].map(u),
            [0, 1, 2, 3, 4, 5, 6, 7]
        );
        assert_eq!(u(16), 7);
        assert_eq!(u(0), 7);
        let mut last = 0;
        for w in (1..=256).rev() {
            assert!(u(w) >= last, "weight {w}");
            last = u(w);
        }
    }

    #[test]
    fn update_frames_round_trip() {
        let mut out = Vec::new();
        write_h2_update(&mut out, 5, b"u=0");
        let h = crate::h2::FrameHead::parse(&out).unwrap();
        assert_eq!(
            (h.kind, h.stream_id, h.len),
            (crate::h2::frame::PRIORITY_UPDATE, 0, 7)
        );
        assert_eq!(h2_update(&out[9..]), Some((5, &b"u=0"[..])));
        assert_eq!(h2_update(&[0, 0, 1]), None);
        let mut out = Vec::new();
        write_h3_update(&mut out, 400, b"u=2, i");
        let (kind, used) = crate::varint::read(&out).unwrap();
        assert_eq!(kind, crate::h3::frame::PRIORITY_UPDATE_REQUEST);
        let (len, used2) = crate::varint::read(&out[used..]).unwrap();
        let payload = &out[used + used2..];
        assert_eq!(len as usize, payload.len());
        assert_eq!(h3_update(payload), Some((400, &b"u=2, i"[..])));
    }
}
