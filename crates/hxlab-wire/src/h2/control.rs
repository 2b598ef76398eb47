//! The payloads of HTTP/2's control frames (SETTINGS, PING, GOAWAY, RST_STREAM, PRIORITY,
//! WINDOW_UPDATE), typed, with the rules RFC 9113 §6 sets on each frame by its head and
//! payload alone: which stream it may be on, its length, the range of its values. The load
//! client and the origin check them through here, so both ends refuse the same frames with
//! the same error code and reason; the frame view reads the same fields without judging.
//!
//! Rules that need connection state (idle or closed streams, window totals) stay with the
//! state machines. Writers for the same frames are here too.

use super::{be32, code, flag, frame, setting, write_head, FrameHead, MAX_STREAM_ID};

/// A rule of RFC 9113 §6 that a control frame broke, by its head and payload alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// SETTINGS on a stream other than 0.
    SettingsOnStream,
    /// A SETTINGS acknowledgement that carries settings.
    SettingsAckWithPayload,
    /// A SETTINGS payload that is not whole 6-byte settings.
    SettingsLength,
    /// SETTINGS_ENABLE_PUSH other than 0 or 1.
    EnablePush,
    /// SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1.
    InitialWindowSize,
    /// SETTINGS_MAX_FRAME_SIZE outside 2^14..2^24-1.
    MaxFrameSize,
    /// PING on a stream other than 0.
    PingOnStream,
    /// PING whose payload is not 8 bytes.
    PingLength,
    /// GOAWAY on a stream other than 0.
    GoawayOnStream,
    /// GOAWAY shorter than its last stream id and error code.
    GoawayLength,
    /// RST_STREAM on stream 0.
    RstStreamOnStreamZero,
    /// RST_STREAM whose payload is not 4 bytes.
    RstStreamLength,
    /// PRIORITY on stream 0.
    PriorityOnStreamZero,
    /// PRIORITY whose payload is not 5 bytes (a stream error, RFC 9113 §6.3).
    PriorityLength,
    /// WINDOW_UPDATE whose payload is not 4 bytes.
    WindowUpdateLength,
    /// A connection WINDOW_UPDATE of 0 (on a stream that is the stream's error, not this).
    WindowUpdateZero,
}

impl FrameError {
    /// The error code (RFC 9113 §7) the frame is refused with.
    pub fn code(self) -> u32 {
        use FrameError::*;
        match self {
            SettingsAckWithPayload
            | SettingsLength
            | PingLength
            | GoawayLength
            | RstStreamLength
            | PriorityLength
            | WindowUpdateLength => code::FRAME_SIZE_ERROR,
            InitialWindowSize => code::FLOW_CONTROL_ERROR,
            SettingsOnStream
            | EnablePush
            | MaxFrameSize
            | PingOnStream
            | GoawayOnStream
            | RstStreamOnStreamZero
            | PriorityOnStreamZero
            | WindowUpdateZero => code::PROTOCOL_ERROR,
        }
    }

    /// The reason in one line, as the origin sends it in its GOAWAY.
    pub fn reason(self) -> &'static str {
        use FrameError::*;
        match self {
            SettingsOnStream => "SETTINGS on a stream",
            SettingsAckWithPayload => "SETTINGS ACK with a payload",
            SettingsLength => "SETTINGS length not a multiple of 6",
            EnablePush => "ENABLE_PUSH not 0 or 1",
            InitialWindowSize => "INITIAL_WINDOW_SIZE over 2^31-1",
            MaxFrameSize => "MAX_FRAME_SIZE out of range",
            PingOnStream => "PING on a stream",
            PingLength => "PING length not 8",
            GoawayOnStream => "GOAWAY on a stream",
            GoawayLength => "GOAWAY shorter than 8 bytes",
            RstStreamOnStreamZero => "RST_STREAM on stream 0",
            RstStreamLength => "RST_STREAM length not 4",
            PriorityOnStreamZero => "PRIORITY on stream 0",
            PriorityLength => "PRIORITY length not 5",
            WindowUpdateLength => "WINDOW_UPDATE length not 4",
            WindowUpdateZero => "WINDOW_UPDATE of 0",
        }
    }
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for FrameError {}

/// One setting of a SETTINGS frame, its value checked (RFC 9113 §6.5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// SETTINGS_HEADER_TABLE_SIZE.
    HeaderTableSize(u32),
    /// SETTINGS_ENABLE_PUSH.
    EnablePush(bool),
    /// SETTINGS_MAX_CONCURRENT_STREAMS.
    MaxConcurrentStreams(u32),
    /// SETTINGS_INITIAL_WINDOW_SIZE (at most 2^31-1).
    InitialWindowSize(u32),
    /// SETTINGS_MAX_FRAME_SIZE (2^14..2^24-1).
    MaxFrameSize(u32),
    /// SETTINGS_MAX_HEADER_LIST_SIZE.
    MaxHeaderListSize(u32),
    /// Any other identifier, which an endpoint ignores unless it knows it.
    Other(u16, u32),
}

impl Setting {
    /// The setting `id` with value `v`, or the rule the value breaks.
    pub fn new(id: u16, v: u32) -> Result<Setting, FrameError> {
        Ok(match id {
            setting::HEADER_TABLE_SIZE => Setting::HeaderTableSize(v),
            setting::ENABLE_PUSH if v > 1 => return Err(FrameError::EnablePush),
            setting::ENABLE_PUSH => Setting::EnablePush(v == 1),
            setting::MAX_CONCURRENT_STREAMS => Setting::MaxConcurrentStreams(v),
            setting::INITIAL_WINDOW_SIZE if v > MAX_STREAM_ID => {
                return Err(FrameError::InitialWindowSize)
            }
            setting::INITIAL_WINDOW_SIZE => Setting::InitialWindowSize(v),
            setting::MAX_FRAME_SIZE if !(16_384..=16_777_215).contains(&v) => {
                return Err(FrameError::MaxFrameSize)
            }
            setting::MAX_FRAME_SIZE => Setting::MaxFrameSize(v),
            setting::MAX_HEADER_LIST_SIZE => Setting::MaxHeaderListSize(v),
            _ => Setting::Other(id, v),
        })
    }
}

/// A SETTINGS frame: an acknowledgement, or settings to apply in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings<'a> {
    /// The ACK flag: it acknowledges ours and carries nothing.
    pub ack: bool,
    payload: &'a [u8],
}

impl<'a> Settings<'a> {
    /// Checks a SETTINGS frame's stream, flag and length.
    pub fn parse(h: &FrameHead, payload: &'a [u8]) -> Result<Settings<'a>, FrameError> {
        if h.stream_id != 0 {
            return Err(FrameError::SettingsOnStream);
        }
        let ack = h.flags & flag::ACK != 0;
        if ack && !payload.is_empty() {
            return Err(FrameError::SettingsAckWithPayload);
        }
        if !payload.len().is_multiple_of(6) {
            return Err(FrameError::SettingsLength);
        }
        Ok(Settings { ack, payload })
    }

    /// The settings in order, each value checked: an endpoint applies them one by one and
    /// stops at the first error (a connection error).
    pub fn iter(&self) -> impl Iterator<Item = Result<Setting, FrameError>> + 'a {
        entries(self.payload).map(|(id, v)| Setting::new(id, v))
    }
}

/// The (identifier, value) pairs of a SETTINGS payload as sent, unchecked (a trailing
/// partial setting is left out).
pub fn entries(payload: &[u8]) -> impl Iterator<Item = (u16, u32)> + '_ {
    payload
        .chunks_exact(6)
        .map(|s| (u16::from_be_bytes([s[0], s[1]]), be32(&s[2..])))
}

/// A PING frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ping {
    /// The ACK flag: the answer to ours.
    pub ack: bool,
    /// Its 8 bytes, which the answer echoes.
    pub data: [u8; 8],
}

impl Ping {
    /// Checks a PING frame's stream and length.
    pub fn parse(h: &FrameHead, payload: &[u8]) -> Result<Ping, FrameError> {
        if h.stream_id != 0 {
            return Err(FrameError::PingOnStream);
        }
        let data = payload.try_into().map_err(|_| FrameError::PingLength)?;
        Ok(Ping {
            ack: h.flags & flag::ACK != 0,
            data,
        })
    }
}

/// A GOAWAY frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GoAway<'a> {
    /// The last stream the sender processed or may process (reserved bit cleared).
    pub last_stream_id: u32,
    /// Why it goes away (RFC 9113 §7).
    pub code: u32,
    /// Its additional debug data.
    pub debug: &'a [u8],
}

impl<'a> GoAway<'a> {
    /// Checks a GOAWAY frame's stream and length.
    pub fn parse(h: &FrameHead, payload: &'a [u8]) -> Result<GoAway<'a>, FrameError> {
        if h.stream_id != 0 {
            return Err(FrameError::GoawayOnStream);
        }
        GoAway::read(payload).ok_or(FrameError::GoawayLength)
    }

    /// The fields of a payload of at least 8 bytes, whatever the frame's head.
    pub fn read(payload: &'a [u8]) -> Option<GoAway<'a>> {
        (payload.len() >= 8).then(|| GoAway {
            last_stream_id: be32(payload) & MAX_STREAM_ID,
            code: be32(&payload[4..]),
            debug: &payload[8..],
        })
    }
}

/// An RST_STREAM frame: the stream's error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RstStream {
    /// Why the stream ends (RFC 9113 §7).
    pub code: u32,
}

impl RstStream {
    /// Checks an RST_STREAM frame's stream and length.
    pub fn parse(h: &FrameHead, payload: &[u8]) -> Result<RstStream, FrameError> {
        if h.stream_id == 0 {
            return Err(FrameError::RstStreamOnStreamZero);
        }
        if payload.len() != 4 {
            return Err(FrameError::RstStreamLength);
        }
        Ok(RstStream {
            code: be32(payload),
        })
    }

    /// The code of a payload of at least 4 bytes, whatever the frame's head.
    pub fn read(payload: &[u8]) -> Option<RstStream> {
        (payload.len() >= 4).then(|| RstStream {
            code: be32(payload),
        })
    }
}

/// A priority (RFC 9113 §5.3.2, deprecated but still sent): a PRIORITY frame's payload, or
/// the 5 bytes a HEADERS frame with the PRIORITY flag starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Priority {
    /// The stream it depends on.
    pub dependency: u32,
    /// Whether the dependency is exclusive.
    pub exclusive: bool,
    /// Its weight, 1 to 256.
    pub weight: u16,
}

impl Priority {
    /// Checks a PRIORITY frame's stream and length ([`FrameError::PriorityLength`] is a
    /// stream error). A stream that depends on itself is the caller's to refuse.
    pub fn parse(h: &FrameHead, payload: &[u8]) -> Result<Priority, FrameError> {
        if h.stream_id == 0 {
            return Err(FrameError::PriorityOnStreamZero);
        }
        if payload.len() != 5 {
            return Err(FrameError::PriorityLength);
        }
        Ok(Priority::read(payload).expect("5 bytes"))
    }

    /// The priority in the first 5 bytes of `b`, if there are 5.
    #[inline]
    pub fn read(b: &[u8]) -> Option<Priority> {
        let b = b.get(..5)?;
        let dep = be32(b);
        Some(Priority {
            dependency: dep & MAX_STREAM_ID,
            exclusive: dep >> 31 == 1,
            weight: u16::from(b[4]) + 1,
        })
    }

    /// Appends the 5 bytes [`Priority::read`] reads (the weight clamped to 1–256).
    pub fn write(&self, out: &mut Vec<u8>) {
        let e = if self.exclusive { 1u32 << 31 } else { 0 };
        out.extend_from_slice(&(e | (self.dependency & MAX_STREAM_ID)).to_be_bytes());
        out.push((self.weight.clamp(1, 256) - 1) as u8);
    }
}

/// A WINDOW_UPDATE frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowUpdate {
    /// The window increment (reserved bit cleared); 0 only on a stream, where it is that
    /// stream's error (RFC 9113 §6.9).
    pub increment: u32,
}

impl WindowUpdate {
    /// Checks a WINDOW_UPDATE frame's length, and that a connection's increment is not 0.
    #[inline]
    pub fn parse(h: &FrameHead, payload: &[u8]) -> Result<WindowUpdate, FrameError> {
        let w = WindowUpdate::read(payload)
            .filter(|_| payload.len() == 4)
            .ok_or(FrameError::WindowUpdateLength)?;
        if h.stream_id == 0 && w.increment == 0 {
            return Err(FrameError::WindowUpdateZero);
        }
        Ok(w)
    }

    /// The increment of a payload of at least 4 bytes, whatever the frame's head.
    #[inline]
    pub fn read(payload: &[u8]) -> Option<WindowUpdate> {
        (payload.len() >= 4).then(|| WindowUpdate {
            increment: be32(payload) & MAX_STREAM_ID,
        })
    }
}

/// Appends a SETTINGS frame carrying `settings` (identifier, value) in order.
pub fn write_settings(out: &mut Vec<u8>, settings: &[(u16, u32)]) {
    write_head(out, settings.len() * 6, frame::SETTINGS, 0, 0);
    for (id, v) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

/// Appends a SETTINGS acknowledgement.
pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_head(out, 0, frame::SETTINGS, flag::ACK, 0);
}

/// Appends the answer to a PING that carried `data`.
pub fn write_ping_ack(out: &mut Vec<u8>, data: &[u8; 8]) {
    write_head(out, 8, frame::PING, flag::ACK, 0);
    out.extend_from_slice(data);
}

/// Appends a WINDOW_UPDATE of `increment` for `stream` (0: the connection).
#[inline]
pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_head(out, 4, frame::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&increment.to_be_bytes());
}

/// Appends an RST_STREAM ending `stream` with `code`.
#[inline]
pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_head(out, 4, frame::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Appends a GOAWAY: streams up to `last_stream_id` are (or may be) processed, `code` says
/// why, `debug` is its additional debug data.
pub fn write_goaway(out: &mut Vec<u8>, last_stream_id: u32, code: u32, debug: &[u8]) {
    write_head(out, 8 + debug.len(), frame::GOAWAY, 0, 0);
    out.extend_from_slice(&last_stream_id.to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
    out.extend_from_slice(debug);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priorities_are_written_as_they_are_read() {
        for p in [
            Priority {
                dependency: 0,
                exclusive: true,
                weight: 256,
            },
            Priority {
                dependency: 7,
                exclusive: false,
                weight: 1,
            },
        ] {
            let mut out = Vec::new();
            p.write(&mut out);
            assert_eq!(Priority::read(&out), Some(p));
        }
    }

    fn head(kind: u8, flags: u8, stream_id: u32, len: usize) -> FrameHead {
        FrameHead {
            len,
            kind,
            flags,
            stream_id,
        }
    }

    /// A control frame's payload arrives whole (the frame is cut out first), so "every
    /// split" here is every length short of and past the right one: each gives the length
    /// error, never a panic or a value.
    #[test]
    fn every_truncation_and_extension_is_a_length_error() {
        let bytes = [0x80, 0, 0, 3, 7, 0, 0, 0, 9, 1, 2, 3, 4];
        for n in 0..=bytes.len() {
            let p = &bytes[..n];
            let on = |kind| head(kind, 0, 1, n);
            let zero = |kind| head(kind, 0, 0, n);
            assert_eq!(
                Ping::parse(&zero(frame::PING), p).is_ok(),
                n == 8,
                "PING {n}"
            );
            assert_eq!(
                GoAway::parse(&zero(frame::GOAWAY), p).map(|g| g.debug.len()),
                if n >= 8 {
                    Ok(n - 8)
                } else {
                    Err(FrameError::GoawayLength)
                }
            );
            assert_eq!(
                RstStream::parse(&on(frame::RST_STREAM), p).is_ok(),
                n == 4,
                "RST_STREAM {n}"
            );
            assert_eq!(
                Priority::parse(&on(frame::PRIORITY), p).is_ok(),
                n == 5,
                "PRIORITY {n}"
            );
            assert_eq!(
                WindowUpdate::parse(&on(frame::WINDOW_UPDATE), p).is_ok(),
                n == 4,
                "WINDOW_UPDATE {n}"
            );
            assert_eq!(
                Settings::parse(&zero(frame::SETTINGS), p).is_ok(),
                n % 6 == 0,
                "SETTINGS {n}"
            );
        }
    }

    #[test]
    fn streams_flags_and_values_follow_the_rules() {
        let s = |id| head(frame::SETTINGS, 0, id, 0);
        assert_eq!(
            Settings::parse(&s(1), &[]),
            Err(FrameError::SettingsOnStream)
        );
        let ack = head(frame::SETTINGS, flag::ACK, 0, 6);
        assert_eq!(
            Settings::parse(&ack, &[0; 6]),
            Err(FrameError::SettingsAckWithPayload)
        );
        assert!(Settings::parse(&ack, &[]).unwrap().ack);
        let mut out = Vec::new();
        write_settings(
            &mut out,
            &[
                (setting::MAX_CONCURRENT_STREAMS, 100),
                (setting::ENABLE_PUSH, 0),
                (0x42, 7),
                (setting::ENABLE_PUSH, 2),
                (setting::MAX_FRAME_SIZE, 16_384),
            ],
        );
        let h = FrameHead::parse(&out).unwrap();
        let got: Vec<_> = Settings::parse(&h, &out[9..]).unwrap().iter().collect();
        assert_eq!(
            got,
            [
                Ok(Setting::MaxConcurrentStreams(100)),
                Ok(Setting::EnablePush(false)),
                Ok(Setting::Other(0x42, 7)),
                Err(FrameError::EnablePush),
                Ok(Setting::MaxFrameSize(16_384)),
            ]
        );
        assert_eq!(
            Setting::new(setting::INITIAL_WINDOW_SIZE, 1 << 31),
            Err(FrameError::InitialWindowSize)
        );
        assert_eq!(
            Setting::new(setting::MAX_FRAME_SIZE, 16_383),
            Err(FrameError::MaxFrameSize)
        );
        assert_eq!(
            Ping::parse(&head(frame::PING, 0, 3, 8), &[0; 8]),
            Err(FrameError::PingOnStream)
        );
        assert_eq!(
            GoAway::parse(&head(frame::GOAWAY, 0, 3, 8), &[0; 8]),
            Err(FrameError::GoawayOnStream)
        );
        assert_eq!(
            RstStream::parse(&head(frame::RST_STREAM, 0, 0, 4), &[0; 4]),
            Err(FrameError::RstStreamOnStreamZero)
        );
        assert_eq!(
            Priority::parse(&head(frame::PRIORITY, 0, 0, 5), &[0; 5]),
            Err(FrameError::PriorityOnStreamZero)
        );
        let wu = |id| head(frame::WINDOW_UPDATE, 0, id, 4);
        assert_eq!(
            WindowUpdate::parse(&wu(0), &[0x80, 0, 0, 0]),
            Err(FrameError::WindowUpdateZero),
            "the reserved bit is not part of the increment"
        );
        assert_eq!(
            WindowUpdate::parse(&wu(5), &[0, 0, 0, 0]),
            Ok(WindowUpdate { increment: 0 }),
            "on a stream, 0 is the stream's error"
        );
        assert_eq!(
            FrameError::InitialWindowSize.code(),
            code::FLOW_CONTROL_ERROR
        );
        assert_eq!(FrameError::PingLength.code(), code::FRAME_SIZE_ERROR);
        assert_eq!(FrameError::EnablePush.code(), code::PROTOCOL_ERROR);
    }

    #[test]
    fn written_frames_read_back() {
        let mut out = Vec::new();
        write_goaway(&mut out, 7, code::ENHANCE_YOUR_CALM, b"calm");
        write_rst_stream(&mut out, 3, code::CANCEL);
        write_window_update(&mut out, 0, 1000);
        write_ping_ack(&mut out, b"12345678");
        write_settings_ack(&mut out);
        let mut at = 0;
        let mut frames = Vec::new();
        while let Some(h) = FrameHead::parse(&out[at..]) {
            frames.push((h, &out[at + 9..at + 9 + h.len]));
            at += 9 + h.len;
        }
        assert_eq!(at, out.len());
        let [g, r, w, p, s] = frames[..] else {
            panic!("five frames")
        };
        let goaway = GoAway::parse(&g.0, g.1).unwrap();
        assert_eq!(
            (goaway.last_stream_id, goaway.code, goaway.debug),
            (7, code::ENHANCE_YOUR_CALM, &b"calm"[..])
        );
        assert_eq!(RstStream::parse(&r.0, r.1).unwrap().code, code::CANCEL);
        assert_eq!(WindowUpdate::parse(&w.0, w.1).unwrap().increment, 1000);
        assert_eq!(
            Ping::parse(&p.0, p.1),
            Ok(Ping {
                ack: true,
                data: *b"12345678"
            })
        );
        assert!(Settings::parse(&s.0, s.1).unwrap().ack);
        assert_eq!(
            Priority::read(&[0x80, 0, 0, 3, 15]),
            Some(Priority {
                dependency: 3,
                exclusive: true,
                weight: 16
            })
        );
    }
}
