//! The client's unidirectional streams (RFC 9114 §6.2): its control stream (exactly one,
//! read by hxlab-wire's [`ControlReader`], the load client's reader too: SETTINGS first and
//! once, no DATA, HEADERS or PUSH_PROMISE, HTTP/2's frame types are errors; closing it is
//! H3_CLOSED_CRITICAL_STREAM; its SETTINGS hand the client's QPACK limits to our encoder),
//! its QPACK encoder and decoder streams (at most one each, fed to the connection's QPACK:
//! errors close with QPACK_ENCODER_STREAM_ERROR or QPACK_DECODER_STREAM_ERROR; closing one
//! is also a critical-stream error), push
//! streams (a client may not open them: H3_STREAM_CREATION_ERROR) and reserved or unknown
//! types, which are stopped and ignored.

use super::driver::{Conn, ReadError, RecvStream};
use super::priority::Shared;
use super::qpack::ConnQpack;
use crate::schedule::Calm;
use hxlab_wire::h3::control::{ControlError, ControlReader, Sender};
use hxlab_wire::h3::{code, stream as stream_type};
use hxlab_wire::varint;
use quinn_proto::VarInt;
use std::cell::Cell;
use std::rc::Rc;

/// Closes the connection with an HTTP/3 error code.
pub(super) fn close(conn: &Conn, err: u64, why: &'static str) {
    conn.close(VarInt::from_u64(err).unwrap_or(VarInt::MAX), why.as_bytes());
}

/// Accepts the client's unidirectional streams until the connection ends; each critical
/// stream is read by a task of its own.
pub(super) async fn read_uni_streams(conn: Conn, priorities: Shared, qpack: Rc<ConnQpack>) {
    // Bits: which critical stream types (control, encoder, decoder) were opened already.
    let seen = Rc::new(Cell::new(0u8));
    while let Ok(recv) = conn.accept_uni().await {
        tokio::task::spawn_local(uni_stream(
            conn.clone(),
            recv,
            seen.clone(),
            priorities.clone(),
            qpack.clone(),
        ));
    }
}

async fn uni_stream(
    conn: Conn,
    mut recv: RecvStream,
    seen: Rc<Cell<u8>>,
    priorities: Shared,
    qpack: Rc<ConnQpack>,
) {
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
        control_stream(&conn, &mut recv, buf, &priorities, &qpack).await
    } else {
        qpack_stream(&mut recv, buf, kind == stream_type::QPACK_ENCODER, &qpack).await
    };
    if let Err((c, why)) = r {
        close(&conn, c, why);
    }
}

/// The client's QPACK encoder stream (`encoder`) or decoder stream, after its type (`buf`:
/// what came with the type), fed to the connection's QPACK until the connection ends.
async fn qpack_stream(
    recv: &mut RecvStream,
    buf: Vec<u8>,
    encoder: bool,
    qpack: &ConnQpack,
) -> Result<(), (u64, &'static str)> {
    let feed = |bytes: &[u8]| {
        if encoder {
            qpack
                .feed_encoder(bytes)
                .map_err(|e| (code::QPACK_ENCODER_STREAM_ERROR, e.0))
        } else {
            qpack
                .feed_decoder(bytes)
                .map_err(|e| (code::QPACK_DECODER_STREAM_ERROR, e.0))
        }
    };
    if !buf.is_empty() {
        feed(&buf)?;
    }
    loop {
        match recv.read_chunk(usize::MAX).await {
            Ok(Some(c)) => feed(&c)?,
            Ok(None) | Err(ReadError::Reset) => {
                return Err((code::H3_CLOSED_CRITICAL_STREAM, "QPACK stream closed"))
            }
            Err(_) => return Ok(()),
        }
        if qpack.overloaded() {
            return Err((code::H3_EXCESSIVE_LOAD, "QPACK streams not read"));
        }
    }
}

/// Frames of the client's control stream, after its type (`buf`: what came with the type);
/// `Ok` when the connection went away under it, `Err` with the connection error to close
/// with.
async fn control_stream(
    conn: &Conn,
    recv: &mut RecvStream,
    buf: Vec<u8>,
    priorities: &Shared,
    qpack: &ConnQpack,
) -> Result<(), (u64, &'static str)> {
    let mut reader = ControlReader::new(Sender::Client);
    reader.feed(&buf).map_err(reason)?;
    apply_updates(conn, &mut reader, priorities)?;
    let mut settings_given = false;
    loop {
        if !settings_given {
            if let Some(s) = reader.settings() {
                qpack.peer_settings(s.qpack_max_table_capacity, s.qpack_blocked_streams);
                settings_given = true;
            }
        }
        match recv.read_chunk(usize::MAX).await {
            Ok(Some(c)) => {
                reader.feed(&c).map_err(reason)?;
                apply_updates(conn, &mut reader, priorities)?;
            }
            Ok(None) => return Err((code::H3_CLOSED_CRITICAL_STREAM, "control stream closed")),
            Err(ReadError::Reset) => {
                return Err((code::H3_CLOSED_CRITICAL_STREAM, "control stream reset"))
            }
            Err(_) => return Ok(()),
        }
    }
}

/// Acts on the PRIORITY_UPDATEs just read: a request in flight is re-ranked in quinn.
fn apply_updates(
    conn: &Conn,
    reader: &mut ControlReader,
    priorities: &Shared,
) -> Result<(), (u64, &'static str)> {
    let mut p = priorities.borrow_mut();
    for u in reader.take_updates() {
        match p.update(u.stream, u.priority) {
            Ok(Some(rank)) => conn.set_priority(u.stream, rank),
            Ok(None) => {}
            Err(Calm) => return Err((code::H3_EXCESSIVE_LOAD, "too many PRIORITY_UPDATE frames")),
        }
    }
    Ok(())
}

/// What the connection closes with for a control stream's broken rule.
pub(super) fn reason(e: ControlError) -> (u64, &'static str) {
    (e.code, e.reason)
}
