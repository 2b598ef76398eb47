//! The client's unidirectional streams (RFC 9114 §6.2): its control stream (exactly one;
//! SETTINGS first and once; no DATA, HEADERS or PUSH_PROMISE; HTTP/2's frame types are
//! errors; closing it is H3_CLOSED_CRITICAL_STREAM), its QPACK encoder and decoder streams
//! (at most one each, read and discarded: we advertise a dynamic table capacity of 0, so
//! there is nothing for them to say; closing one is also a critical-stream error), push
//! streams (a client may not open them: H3_STREAM_CREATION_ERROR) and reserved or unknown
//! types, which are stopped and ignored.

use super::driver::{Conn, ReadError, RecvStream};
use hxlab_wire::h3::{code, frame, parse_frame_head, stream as stream_type};
use hxlab_wire::varint;
use quinn_proto::VarInt;
use std::cell::Cell;
use std::rc::Rc;

/// Largest control frame we buffer (SETTINGS, GOAWAY, ... are a few bytes; unknown frames
/// are skipped, not buffered).
const MAX_CONTROL_FRAME: u64 = 16 << 10;

/// Closes the connection with an HTTP/3 error code.
pub(super) fn close(conn: &Conn, err: u64, why: &'static str) {
    conn.close(VarInt::from_u64(err).unwrap_or(VarInt::MAX), why.as_bytes());
}

/// Accepts the client's unidirectional streams until the connection ends; each critical
/// stream is read by a task of its own.
pub(super) async fn read_uni_streams(conn: Conn) {
    // Bits: which critical stream types (control, encoder, decoder) were opened already.
    let seen = Rc::new(Cell::new(0u8));
    while let Ok(recv) = conn.accept_uni().await {
        tokio::task::spawn_local(uni_stream(conn.clone(), recv, seen.clone()));
    }
}

async fn uni_stream(conn: Conn, mut recv: RecvStream, seen: Rc<Cell<u8>>) {
    let mut buf: Vec<u8> = Vec::new();
    let kind = loop {
        if let Some((t, used)) = varint::read(&buf) {
            buf.drain(..used);
            break t;
        }
        match recv.read_chunk(8).await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            // Ended or reset before its type: nothing to act on.
            _ => return,
        }
    };
    let bit = match kind {
        stream_type::CONTROL => 1,
        stream_type::QPACK_ENCODER => 2,
        stream_type::QPACK_DECODER => 4,
        stream_type::PUSH => {
            return close(
                &conn,
                code::H3_STREAM_CREATION_ERROR,
                "push stream from a client",
            );
        }
        _ => {
            recv.stop(VarInt::from_u32(code::H3_STREAM_CREATION_ERROR as u32));
            return;
        }
    };
    if seen.replace(seen.get() | bit) & bit != 0 {
        return close(
            &conn,
            code::H3_STREAM_CREATION_ERROR,
            "second critical stream",
        );
    }
    let r = if kind == stream_type::CONTROL {
        control_stream(&mut recv, buf).await
    } else {
        // QPACK streams: read and discard until the connection ends.
        loop {
            match recv.read_chunk(usize::MAX).await {
                Ok(Some(_)) => continue,
                Ok(None) => break Err((code::H3_CLOSED_CRITICAL_STREAM, "QPACK stream closed")),
                Err(_) => break Ok(()),
            }
        }
    };
    if let Err((c, why)) = r {
        close(&conn, c, why);
    }
}

/// Frames of the client's control stream, after its type; `Ok` when the connection went
/// away under it, `Err` with the connection error to close with.
async fn control_stream(
    recv: &mut RecvStream,
    mut buf: Vec<u8>,
) -> Result<(), (u64, &'static str)> {
    let mut frames = ControlFrames::default();
    loop {
        frames.take(&mut buf)?;
        match recv.read_chunk(usize::MAX).await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            Ok(None) => return Err((code::H3_CLOSED_CRITICAL_STREAM, "control stream closed")),
            Err(ReadError::Reset) => {
                return Err((code::H3_CLOSED_CRITICAL_STREAM, "control stream reset"))
            }
            Err(_) => return Ok(()),
        }
    }
}

/// The client's control stream without IO: what is checked of each frame as its bytes
/// arrive, in any split (the fuzz target feeds it through [`super::peer`]).
#[derive(Debug, Default)]
pub(super) struct ControlFrames {
    /// SETTINGS was the first frame.
    pub(super) settings_seen: bool,
    /// Bytes of an unknown or reserved frame still to skip.
    skip: u64,
}

impl ControlFrames {
    /// Checks and removes the complete frames at the front of `buf` (an unknown frame's
    /// payload is skipped as it arrives, never buffered); what is left is an incomplete frame.
    pub(super) fn take(&mut self, buf: &mut Vec<u8>) -> Result<(), (u64, &'static str)> {
        loop {
            if self.skip > 0 {
                let n = self.skip.min(buf.len() as u64) as usize;
                buf.drain(..n);
                self.skip -= n as u64;
                if self.skip > 0 {
                    return Ok(());
                }
            }
            let Some((kind, len, used)) = parse_frame_head(buf) else {
                return Ok(());
            };
            check_control_frame(kind, self.settings_seen)?;
            if kind == frame::SETTINGS
                || kind == frame::GOAWAY
                || kind == frame::MAX_PUSH_ID
                || kind == frame::CANCEL_PUSH
            {
                if len > MAX_CONTROL_FRAME {
                    return Err((code::H3_EXCESSIVE_LOAD, "control frame too large"));
                }
                if (buf.len() - used) < len as usize {
                    return Ok(());
                }
                let payload = &buf[used..used + len as usize];
                if kind == frame::SETTINGS {
                    check_settings(payload)?;
                    self.settings_seen = true;
                } else if varint::read(payload).map(|(_, n)| n) != Some(payload.len()) {
                    return Err((code::H3_FRAME_ERROR, "malformed control frame"));
                }
                buf.drain(..used + len as usize);
            } else {
                // Unknown and reserved frames: skipped without buffering.
                buf.drain(..used);
                self.skip = len;
            }
        }
    }
}

/// The control stream's frame rules (RFC 9114 §6.2.1, §7.2).
fn check_control_frame(kind: u64, settings_seen: bool) -> Result<(), (u64, &'static str)> {
    if !settings_seen && kind != frame::SETTINGS {
        return Err((
            code::H3_MISSING_SETTINGS,
            "control stream without SETTINGS first",
        ));
    }
    match kind {
        frame::SETTINGS if settings_seen => Err((code::H3_FRAME_UNEXPECTED, "second SETTINGS")),
        frame::DATA | frame::HEADERS | frame::PUSH_PROMISE => Err((
            code::H3_FRAME_UNEXPECTED,
            "request frame on the control stream",
        )),
        0x02 | 0x06 | 0x08 | 0x09 => Err((code::H3_FRAME_UNEXPECTED, "HTTP/2 frame type")),
        _ => Ok(()),
    }
}

/// A SETTINGS payload: identifier/value pairs, each identifier at most once, none of
/// HTTP/2's (RFC 9114 §7.2.4.1).
fn check_settings(mut payload: &[u8]) -> Result<(), (u64, &'static str)> {
    let mut ids: Vec<u64> = Vec::new();
    while !payload.is_empty() {
        let bad = (code::H3_FRAME_ERROR, "malformed SETTINGS");
        let (id, a) = varint::read(payload).ok_or(bad)?;
        let (_, b) = varint::read(&payload[a..]).ok_or(bad)?;
        payload = &payload[a + b..];
        if matches!(id, 0x02..=0x05) {
            return Err((code::H3_SETTINGS_ERROR, "HTTP/2 setting in SETTINGS"));
        }
        if ids.contains(&id) || ids.len() > 256 {
            return Err((code::H3_SETTINGS_ERROR, "repeated setting"));
        }
        ids.push(id);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_frames_follow_the_rules() {
        assert!(check_control_frame(frame::SETTINGS, false).is_ok());
        assert_eq!(
            check_control_frame(frame::GOAWAY, false).unwrap_err().0,
            code::H3_MISSING_SETTINGS
        );
        for k in [frame::SETTINGS, frame::DATA, frame::HEADERS, 0x06] {
            assert_eq!(
                check_control_frame(k, true).unwrap_err().0,
                code::H3_FRAME_UNEXPECTED,
                "{k:#x}"
            );
        }
        assert!(
            check_control_frame(0x21, true).is_ok(),
            "reserved types are ignored"
        );
        assert!(check_settings(&[0x06, 0x44, 0x00, 0x01, 0x00]).is_ok());
        assert_eq!(
            check_settings(&[0x01, 0x00, 0x01, 0x00]).unwrap_err().0,
            code::H3_SETTINGS_ERROR
        );
        assert_eq!(
            check_settings(&[0x03, 0x00]).unwrap_err().0,
            code::H3_SETTINGS_ERROR
        );
        assert_eq!(check_settings(&[0x06]).unwrap_err().0, code::H3_FRAME_ERROR);
    }
}
