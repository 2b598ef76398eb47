//! An HTTP/3 control stream read after its stream type (RFC 9114 §6.2.1, §7.2), with the
//! rules for what may come on it: SETTINGS first and once, no request frames, no HTTP/2
//! frame types, no reserved HTTP/2 settings, no setting twice, GOAWAY ids that never go up.
//! The load client reads the server's control stream and the origin reads the client's
//! through the same [`ControlReader`], so both close the connection for the same frames with
//! the same code and reason. Fed any split of the bytes; unknown and reserved frames are
//! skipped as they arrive, never buffered.

use super::{code, frame, setting, FrameHeadReader};
use crate::varint;

/// Largest control frame buffered (SETTINGS, GOAWAY, CANCEL_PUSH, MAX_PUSH_ID are a few
/// bytes); a larger one is refused from its head.
pub const MAX_CONTROL_FRAME: u64 = 16 << 10;

/// Settings one SETTINGS frame may carry: past this it counts as repeating one, so a
/// hostile frame cannot make the duplicate check quadratic.
const MAX_SETTINGS: usize = 256;

/// Which end sent the control stream: what it may say differs (RFC 9114 §7.2.6, §7.2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// A client: it may send MAX_PUSH_ID, and its GOAWAY names a push id.
    Client,
    /// A server: its GOAWAY names a client-initiated bidirectional (request) stream.
    Server,
}

/// A rule the control stream broke: the connection closes with `code`, and `reason` says
/// which (the origin sends it as the close reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlError {
    /// The HTTP/3 error code (RFC 9114 §8.1).
    pub code: u64,
    /// One line.
    pub reason: &'static str,
}

const fn err(code: u64, reason: &'static str) -> ControlError {
    ControlError { code, reason }
}

impl std::fmt::Display for ControlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason)
    }
}

impl std::error::Error for ControlError {}

const MALFORMED_SETTINGS: ControlError = err(code::H3_FRAME_ERROR, "malformed SETTINGS");

/// The (identifier, value) pairs of a SETTINGS payload in order; a pair cut short ends it
/// with an error.
pub fn settings(mut payload: &[u8]) -> impl Iterator<Item = Result<(u64, u64), ControlError>> + '_ {
    std::iter::from_fn(move || {
        if payload.is_empty() {
            return None;
        }
        let pair = varint::read(payload).and_then(|(id, a)| {
            let (v, b) = varint::read(&payload[a..])?;
            Some((id, v, a + b))
        });
        Some(match pair {
            Some((id, v, n)) => {
                payload = &payload[n..];
                Ok((id, v))
            }
            None => {
                payload = &[];
                Err(MALFORMED_SETTINGS)
            }
        })
    })
}

/// Checks a SETTINGS payload: whole pairs, none of HTTP/2's reserved identifiers
/// (RFC 9114 §7.2.4.1, §11.2.2), no identifier twice.
fn check_settings(payload: &[u8]) -> Result<(), ControlError> {
    let mut ids: Vec<u64> = Vec::new();
    for pair in settings(payload) {
        let (id, _) = pair?;
        if matches!(id, 0x00 | 0x02..=0x05) {
            return Err(err(code::H3_SETTINGS_ERROR, "HTTP/2 setting in SETTINGS"));
        }
        if ids.contains(&id) || ids.len() >= MAX_SETTINGS {
            return Err(err(code::H3_SETTINGS_ERROR, "repeated setting"));
        }
        ids.push(id);
    }
    Ok(())
}

/// One control stream after its type byte, without I/O: feed it the stream's bytes as they
/// come ([`ControlReader::feed`]).
#[derive(Debug)]
pub struct ControlReader {
    sender: Sender,
    head: FrameHeadReader,
    /// The frame being read; `None` for one that is skipped, not buffered.
    kind: Option<u64>,
    left: u64,
    in_frame: bool,
    buf: Vec<u8>,
    settings: Option<PeerSettings>,
    goaway: Option<u64>,
    /// PRIORITY_UPDATE frames for request streams read and not taken yet.
    updates: Vec<PriorityUpdate>,
}

/// The settings a peer's SETTINGS frame gave that this crate acts on; what it left out has
/// its RFC default (QPACK: 0, no dynamic table; field section size: unlimited).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PeerSettings {
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY.
    pub qpack_max_table_capacity: u64,
    /// SETTINGS_QPACK_BLOCKED_STREAMS.
    pub qpack_blocked_streams: u64,
    /// SETTINGS_MAX_FIELD_SECTION_SIZE, when given.
    pub max_field_section_size: Option<u64>,
}

/// A client's PRIORITY_UPDATE for a request stream (RFC 9218 §7.2), as read off its control
/// stream: the stream and the priority its field value gives (from the defaults: an update
/// replaces the stream's priority), or `None` for a value that is not a valid dictionary
/// (RFC 9218 §4: ignored).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorityUpdate {
    pub stream: u64,
    pub priority: Option<crate::priority::Priority>,
}

impl ControlReader {
    /// A reader of `sender`'s control stream, at its first frame.
    pub fn new(sender: Sender) -> ControlReader {
        ControlReader {
            sender,
            head: FrameHeadReader::default(),
            kind: None,
            left: 0,
            in_frame: false,
            buf: Vec::new(),
            settings: None,
            goaway: None,
            updates: Vec::new(),
        }
    }

    /// The PRIORITY_UPDATE frames read since the last call, in order (the caller takes them
    /// after each [`ControlReader::feed`], so at most one feed's worth is ever held).
    pub fn take_updates(&mut self) -> std::vec::Drain<'_, PriorityUpdate> {
        self.updates.drain(..)
    }

    /// Whether the SETTINGS frame has arrived whole.
    pub fn settings_seen(&self) -> bool {
        self.settings.is_some()
    }

    /// What the peer's SETTINGS said (RFC 9114 §7.2.4.1 defaults for what it left out), once
    /// the frame has arrived whole.
    pub fn settings(&self) -> Option<PeerSettings> {
        self.settings
    }

    /// The lowest id of the GOAWAY frames so far (a stream id from a server, a push id
    /// from a client).
    pub fn goaway(&self) -> Option<u64> {
        self.goaway
    }

    /// Bytes held for the frame being read (at most [`MAX_CONTROL_FRAME`]).
    pub fn buffered(&self) -> usize {
        self.buf.capacity()
    }

    /// Reads the next bytes of the stream; the first rule broken is the error, after which
    /// the reader is not fed again (the connection closes).
    pub fn feed(&mut self, mut input: &[u8]) -> Result<(), ControlError> {
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
            if self.kind.is_some() {
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

    fn start(&mut self, kind: u64, len: u64) -> Result<(), ControlError> {
        if self.settings.is_none() && kind != frame::SETTINGS {
            return Err(err(
                code::H3_MISSING_SETTINGS,
                "control stream without SETTINGS first",
            ));
        }
        let keep = match kind {
            frame::SETTINGS if self.settings.is_some() => {
                return Err(err(code::H3_FRAME_UNEXPECTED, "second SETTINGS"))
            }
            frame::DATA | frame::HEADERS | frame::PUSH_PROMISE => {
                return Err(err(
                    code::H3_FRAME_UNEXPECTED,
                    "request frame on the control stream",
                ))
            }
            frame::MAX_PUSH_ID if self.sender == Sender::Server => {
                return Err(err(
                    code::H3_FRAME_UNEXPECTED,
                    "client-only frame on the control stream",
                ))
            }
            0x02 | 0x06 | 0x08 | 0x09 => {
                return Err(err(code::H3_FRAME_UNEXPECTED, "HTTP/2 frame type"))
            }
            frame::PRIORITY_UPDATE_REQUEST | frame::PRIORITY_UPDATE_PUSH
                if self.sender == Sender::Server =>
            {
                return Err(err(
                    code::H3_FRAME_UNEXPECTED,
                    "PRIORITY_UPDATE from a server",
                ))
            }
            frame::SETTINGS
            | frame::GOAWAY
            | frame::CANCEL_PUSH
            | frame::MAX_PUSH_ID
            | frame::PRIORITY_UPDATE_REQUEST => true,
            _ => false,
        };
        if keep && len > MAX_CONTROL_FRAME {
            return Err(err(code::H3_EXCESSIVE_LOAD, "control frame too large"));
        }
        self.kind = keep.then_some(kind);
        self.left = len;
        self.in_frame = true;
        self.buf.clear();
        Ok(())
    }

    fn frame_done(&mut self) -> Result<(), ControlError> {
        self.in_frame = false;
        let Some(kind) = self.kind else {
            return Ok(());
        };
        if kind == frame::SETTINGS {
            check_settings(&self.buf)?;
            let mut seen = PeerSettings::default();
            for (id, value) in settings(&self.buf).flatten() {
                match id {
                    setting::QPACK_MAX_TABLE_CAPACITY => seen.qpack_max_table_capacity = value,
                    setting::QPACK_BLOCKED_STREAMS => seen.qpack_blocked_streams = value,
                    setting::MAX_FIELD_SECTION_SIZE => seen.max_field_section_size = Some(value),
                    _ => {}
                }
            }
            self.settings = Some(seen);
            return Ok(());
        }
        if kind == frame::PRIORITY_UPDATE_REQUEST {
            let (stream, value) = crate::priority::h3_update(&self.buf)
                .ok_or(err(code::H3_FRAME_ERROR, "malformed PRIORITY_UPDATE"))?;
            if stream % 4 != 0 {
                return Err(err(
                    code::H3_ID_ERROR,
                    "PRIORITY_UPDATE names a stream that is not a request stream",
                ));
            }
            let priority = crate::priority::Priority::from_field(value);
            self.updates.push(PriorityUpdate { stream, priority });
            return Ok(());
        }
        // GOAWAY, CANCEL_PUSH and MAX_PUSH_ID carry exactly one varint.
        let id = varint::read(&self.buf)
            .filter(|(_, n)| *n == self.buf.len())
            .map(|(id, _)| id)
            .ok_or(err(code::H3_FRAME_ERROR, "malformed control frame"))?;
        if kind == frame::GOAWAY {
            if self.sender == Sender::Server && id % 4 != 0 {
                return Err(err(
                    code::H3_ID_ERROR,
                    "GOAWAY names a stream that is not a request stream",
                ));
            }
            if self.goaway.is_some_and(|g| id > g) {
                return Err(err(code::H3_ID_ERROR, "GOAWAY id went up"));
            }
            self.goaway = Some(id);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::write_frame_head;

    fn frame(kind: u64, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        write_frame_head(&mut v, kind, payload.len() as u64);
        v.extend_from_slice(payload);
        v
    }

    fn settings_frame(pairs: &[(u64, u64)]) -> Vec<u8> {
        let mut p = Vec::new();
        for (id, v) in pairs {
            varint::put(&mut p, *id);
            varint::put(&mut p, *v);
        }
        frame(frame::SETTINGS, &p)
    }

    /// Whole, or in two pieces split anywhere, or a byte at a time: the same answer.
    fn read(sender: Sender, bytes: &[u8]) -> Result<(bool, Option<u64>), ControlError> {
        let whole = {
            let mut r = ControlReader::new(sender);
            r.feed(bytes).map(|()| (r.settings_seen(), r.goaway()))
        };
        for at in 0..=bytes.len() {
            let mut r = ControlReader::new(sender);
            let got = r
                .feed(&bytes[..at])
                .and_then(|()| r.feed(&bytes[at..]))
                .map(|()| (r.settings_seen(), r.goaway()));
            assert_eq!(got, whole, "split at {at}");
        }
        let mut r = ControlReader::new(sender);
        let bytewise = bytes
            .iter()
            .try_for_each(|b| r.feed(std::slice::from_ref(b)))
            .map(|()| (r.settings_seen(), r.goaway()));
        assert_eq!(bytewise, whole, "a byte at a time");
        whole
    }

    #[test]
    fn settings_unknown_frames_and_goaway_in_every_split() {
        let mut bytes = settings_frame(&[(0x01, 0), (0x06, 1 << 20), (0x1f * 7 + 0x21, 9)]);
        bytes.extend(frame(0x21, b"reserved frame"));
        bytes.extend(frame(frame::GOAWAY, &[0x40, 100]));
        bytes.extend(frame(frame::GOAWAY, &[8]));
        assert_eq!(read(Sender::Server, &bytes), Ok((true, Some(8))));
        let mut client = settings_frame(&[(0x06, 100)]);
        client.extend(frame(frame::MAX_PUSH_ID, &[3]));
        client.extend(frame(frame::CANCEL_PUSH, &[1]));
        client.extend(frame(frame::GOAWAY, &[1]));
        assert_eq!(read(Sender::Client, &client), Ok((true, Some(1))));
    }

    #[test]
    fn priority_updates_are_kept_for_the_caller_in_every_split() {
        use crate::priority::{write_h3_update, Priority};
        let mut bytes = settings_frame(&[(0x06, 100)]);
        write_h3_update(&mut bytes, 8, b"u=0, i");
        write_h3_update(&mut bytes, 0, b"u=9");
        write_h3_update(&mut bytes, 4, b"u=1,");
        let want = vec![
            PriorityUpdate {
                stream: 8,
                priority: Some(Priority {
                    urgency: 0,
                    incremental: true,
                }),
            },
            PriorityUpdate {
                stream: 0,
                priority: Some(Priority::default()),
            },
            PriorityUpdate {
                stream: 4,
                priority: None,
            },
        ];
        for at in 0..=bytes.len() {
            let mut r = ControlReader::new(Sender::Client);
            let mut got = Vec::new();
            r.feed(&bytes[..at]).unwrap();
            got.extend(r.take_updates());
            r.feed(&bytes[at..]).unwrap();
            got.extend(r.take_updates());
            assert_eq!(got, want, "split at {at}");
        }
        let mut odd = settings_frame(&[]);
        write_h3_update(&mut odd, 2, b"u=1");
        assert_eq!(
            ControlReader::new(Sender::Client)
                .feed(&odd)
                .map_err(|e| e.code),
            Err(code::H3_ID_ERROR)
        );
        let mut from_server = settings_frame(&[]);
        write_h3_update(&mut from_server, 0, b"u=1");
        assert_eq!(
            ControlReader::new(Sender::Server)
                .feed(&from_server)
                .map_err(|e| e.code),
            Err(code::H3_FRAME_UNEXPECTED)
        );
    }

    #[test]
    fn violations_close_with_their_code_in_every_split() {
        let s = settings_frame(&[(0x01, 0)]);
        let cases: Vec<(Sender, Vec<u8>, u64)> = vec![
            (
                Sender::Server,
                frame(frame::GOAWAY, &[0]),
                code::H3_MISSING_SETTINGS,
            ),
            (
                Sender::Client,
                [s.clone(), s.clone()].concat(),
                code::H3_FRAME_UNEXPECTED,
            ),
            (
                Sender::Server,
                settings_frame(&[(0x02, 1)]),
                code::H3_SETTINGS_ERROR,
            ),
            (
                Sender::Client,
                settings_frame(&[(0x00, 1)]),
                code::H3_SETTINGS_ERROR,
            ),
            (
                Sender::Server,
                settings_frame(&[(0x21, 1), (0x21, 2)]),
                code::H3_SETTINGS_ERROR,
            ),
            (
                Sender::Client,
                frame(frame::SETTINGS, &[0x06]),
                code::H3_FRAME_ERROR,
            ),
            (
                Sender::Client,
                [s.clone(), frame(frame::HEADERS, &[0, 0])].concat(),
                code::H3_FRAME_UNEXPECTED,
            ),
            (
                Sender::Server,
                [s.clone(), frame(frame::DATA, &[])].concat(),
                code::H3_FRAME_UNEXPECTED,
            ),
            (
                Sender::Server,
                [s.clone(), frame(frame::MAX_PUSH_ID, &[0])].concat(),
                code::H3_FRAME_UNEXPECTED,
            ),
            (
                Sender::Client,
                [s.clone(), frame(0x06, &[0; 8])].concat(),
                code::H3_FRAME_UNEXPECTED,
            ),
            (
                Sender::Server,
                [s.clone(), frame(frame::GOAWAY, &[1])].concat(),
                code::H3_ID_ERROR,
            ),
            (
                Sender::Client,
                [
                    s.clone(),
                    frame(frame::GOAWAY, &[4]),
                    frame(frame::GOAWAY, &[8]),
                ]
                .concat(),
                code::H3_ID_ERROR,
            ),
            (
                Sender::Client,
                [s.clone(), frame(frame::GOAWAY, &[4, 4])].concat(),
                code::H3_FRAME_ERROR,
            ),
            (
                Sender::Server,
                [s.clone(), frame(frame::CANCEL_PUSH, &[])].concat(),
                code::H3_FRAME_ERROR,
            ),
        ];
        for (sender, bytes, want) in cases {
            let got = read(sender, &bytes).map_err(|e| e.code);
            assert_eq!(got, Err(want), "{sender:?} {bytes:02x?}");
        }
        let many: Vec<(u64, u64)> = (0..=MAX_SETTINGS as u64).map(|i| (0x100 + i, 0)).collect();
        assert_eq!(
            read(Sender::Client, &settings_frame(&many)).map_err(|e| e.reason),
            Err("repeated setting")
        );
    }

    #[test]
    fn large_frames_are_refused_or_skipped_from_their_head() {
        let s = settings_frame(&[]);
        let mut big = s.clone();
        write_frame_head(&mut big, frame::GOAWAY, MAX_CONTROL_FRAME + 1);
        assert_eq!(
            read(Sender::Server, &big).map_err(|e| e.code),
            Err(code::H3_EXCESSIVE_LOAD)
        );
        let mut skip = s;
        write_frame_head(&mut skip, 0x21, 1 << 30);
        let mut r = ControlReader::new(Sender::Client);
        r.feed(&skip).unwrap();
        r.feed(&[0u8; 8192]).unwrap();
        assert!(r.buffered() < 8192, "unknown frames are not buffered");
        assert_eq!(
            settings(&[0x06, 0x44]).collect::<Vec<_>>(),
            [Err(MALFORMED_SETTINGS)]
        );
    }

    #[test]
    fn settings_values_are_read_back_with_defaults() {
        let mut r = ControlReader::new(Sender::Server);
        assert_eq!(r.settings(), None);
        r.feed(&settings_frame(&[
            (setting::QPACK_MAX_TABLE_CAPACITY, 4096),
            (setting::QPACK_BLOCKED_STREAMS, 100),
        ]))
        .unwrap();
        let s = r.settings().unwrap();
        assert_eq!(
            (
                s.qpack_max_table_capacity,
                s.qpack_blocked_streams,
                s.max_field_section_size
            ),
            (4096, 100, None)
        );
        let mut r = ControlReader::new(Sender::Client);
        r.feed(&settings_frame(&[(setting::MAX_FIELD_SECTION_SIZE, 9)]))
            .unwrap();
        assert_eq!(r.settings().unwrap().qpack_max_table_capacity, 0);
    }
}
