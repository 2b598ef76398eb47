//! The control streams: ours (SETTINGS), and the server's unidirectional streams, read in a
//! helper task that reports SETTINGS errors and GOAWAY to the session.

use super::*;
use crate::net::with_tap;
use hxlab_wire::tap::Channel;
use hxlab_wire::Dir;

/// What the server's unidirectional streams told the session.
#[derive(Default)]
pub(super) struct ControlState {
    /// Lowest GOAWAY stream id.
    pub(super) goaway: Option<u64>,
    /// A connection error found on them.
    pub(super) error: Option<(u64, String)>,
    pub(super) control_seen: bool,
    pub(super) encoder_seen: bool,
    pub(super) decoder_seen: bool,
}

pub(super) struct Shared {
    pub(super) state: RefCell<ControlState>,
    /// An observer of the connection's streams (`hxlab trace`).
    pub(super) tap: Option<crate::net::SharedTap>,
    /// Wakes the session (the control index of the ready set).
    pub(super) wake: Waker,
}

impl Shared {
    pub(super) fn fail(&self, code: u64, message: String) {
        let mut s = self.state.borrow_mut();
        if s.error.is_none() {
            s.error = Some((code, message));
        }
        drop(s);
        self.wake.wake_by_ref();
    }
}

/// Accepts the server's unidirectional streams for the connection's lifetime (the task is
/// aborted when the session ends, which aborts the readers it started).
pub(super) async fn accept_uni(conn: quinn::Connection, shared: Rc<Shared>) {
    let mut readers = tokio::task::JoinSet::new();
    while let Ok(recv) = conn.accept_uni().await {
        readers.spawn_local(read_uni(recv, shared.clone()));
        // Reap finished readers so the set stays small.
        while readers.try_join_next().is_some() {}
    }
}

/// Reads one server unidirectional stream: its type, then the control stream's frames, or
/// QPACK instructions (discarded: with capacity 0 there is nothing to insert).
pub(super) async fn read_uni(mut recv: quinn::RecvStream, shared: Rc<Shared>) {
    let mut head = [0u8; 8];
    let mut have = 0usize;
    let mut kind: Option<u64> = None;
    let mut control = ControlParser::default();
    loop {
        let chunk = match recv.read_chunk(64 * 1024, true).await {
            Ok(Some(c)) => {
                if let Some(tap) = &shared.tap {
                    let id = Channel::Quic(u64::from(recv.id()));
                    with_tap(tap, |t| t.bytes(Dir::Recv, id, &c.bytes));
                }
                c.bytes
            }
            Ok(None) => {
                if let Some(tap) = &shared.tap {
                    let id = Channel::Quic(u64::from(recv.id()));
                    with_tap(tap, |t| t.stream_end(Dir::Recv, id));
                }
                if kind == Some(0x00) {
                    shared.fail(
                        H3_CLOSED_CRITICAL_STREAM,
                        "h3: the server closed its control stream (H3_CLOSED_CRITICAL_STREAM)"
                            .into(),
                    );
                }
                return;
            }
            Err(quinn::ReadError::Reset(_)) if kind == Some(0x00) => {
                shared.fail(
                    H3_CLOSED_CRITICAL_STREAM,
                    "h3: the server reset its control stream (H3_CLOSED_CRITICAL_STREAM)".into(),
                );
                return;
            }
            // The connection ended (the session sees that on its own streams).
            Err(_) => return,
        };
        let mut data: &[u8] = &chunk;
        if kind.is_none() {
            let n = (8 - have).min(data.len());
            head[have..have + n].copy_from_slice(&data[..n]);
            let Some((t, used)) = varint(&head[..have + n]) else {
                have += n;
                continue;
            };
            data = &data[used - have..];
            kind = Some(t);
            let mut st = shared.state.borrow_mut();
            let seen = match t {
                0x00 => Some(&mut st.control_seen),
                0x02 => Some(&mut st.encoder_seen),
                0x03 => Some(&mut st.decoder_seen),
                0x01 => {
                    drop(st);
                    shared.fail(
                        H3_ID_ERROR,
                        "h3: the server opened a push stream, but we allowed no push (H3_ID_ERROR)"
                            .into(),
                    );
                    return;
                }
                _ => None,
            };
            match seen {
                Some(flag) if *flag => {
                    drop(st);
                    shared.fail(
                        H3_STREAM_CREATION_ERROR,
                        format!(
                            "h3: a second server stream of type {t:#x} (H3_STREAM_CREATION_ERROR)"
                        ),
                    );
                    return;
                }
                Some(flag) => *flag = true,
                None => {
                    // Unknown or reserved stream type: not read (RFC 9114 §6.2).
                    drop(st);
                    let _ = recv.stop(quinn::VarInt::from_u32(H3_STREAM_CREATION_ERROR as u32));
                    return;
                }
            }
        }
        if kind == Some(0x00) {
            if let Err(e) = control.feed(data) {
                let (code, message) = match e {
                    H3Error::Connection { code, message } | H3Error::Stream { code, message } => {
                        (code, message)
                    }
                };
                shared.fail(code, message);
                return;
            }
            if let Some(id) = control.goaway {
                let mut st = shared.state.borrow_mut();
                if st.goaway != Some(id) {
                    st.goaway = Some(id);
                    drop(st);
                    shared.wake.wake_by_ref();
                }
            }
        }
    }
}

/// Opens our control stream and sends SETTINGS (shown to `tap`).
pub(super) async fn open_control(
    conn: &quinn::Connection,
    tap: Option<&crate::net::SharedTap>,
) -> Result<quinn::SendStream, String> {
    let mut stream = conn.open_uni().await.map_err(|e| e.to_string())?;
    let mut payload = Vec::with_capacity(16);
    use hxlab_wire::h3::setting::{
        MAX_FIELD_SECTION_SIZE, QPACK_BLOCKED_STREAMS, QPACK_MAX_TABLE_CAPACITY,
    };
    for (id, v) in [
        (QPACK_MAX_TABLE_CAPACITY, 0),
        (QPACK_BLOCKED_STREAMS, 0),
        (MAX_FIELD_SECTION_SIZE, MAX_FIELD_SECTION),
    ] {
        put_varint(&mut payload, id);
        put_varint(&mut payload, v);
    }
    // The stream type (control), then one SETTINGS frame.
    let mut out = vec![hxlab_wire::h3::stream::CONTROL as u8];
    hxlab_wire::h3::write_frame_head(&mut out, SETTINGS, payload.len() as u64);
    out.extend_from_slice(&payload);
    stream.write_all(&out).await.map_err(|e| e.to_string())?;
    if let Some(tap) = tap {
        let id = Channel::Quic(u64::from(stream.id()));
        with_tap(tap, |t| t.bytes(Dir::Send, id, &out));
    }
    Ok(stream)
}
