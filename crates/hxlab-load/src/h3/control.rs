//! The control streams: ours (SETTINGS), and the server's unidirectional streams, read by
//! the session as they become readable ([`UniReader`]): SETTINGS errors and GOAWAY reach the
//! session through [`ControlState`], the server's SETTINGS and QPACK streams go to the
//! connection's [`Qpack`].

use super::qpack_state::{Qpack, QpackConfig, UniWriter};
use super::*;
use crate::net::with_tap;
use hxlab_wire::h3::control::{ControlReader, Sender};
use hxlab_wire::tap::Channel;
use hxlab_wire::Dir;
use quinn_proto::{ReadError, StreamId};

/// Most bytes taken from a server unidirectional stream per read.
const UNI_CHUNK: usize = 64 * 1024;

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

impl ControlState {
    /// A connection error found on the server's streams (the first one is kept).
    pub(super) fn fail(&mut self, code: u64, message: &str) {
        if self.error.is_none() {
            self.error = Some((code, message.to_string()));
        }
    }
}

/// One server unidirectional stream: its type, then the control stream's frames, or QPACK
/// instructions (to the connection's [`Qpack`]).
pub(super) struct UniReader {
    pub(super) id: StreamId,
    head: [u8; 8],
    have: usize,
    kind: Option<u64>,
    control: ControlReader,
    /// Finished with (ended, failed or stopped).
    pub(super) done: bool,
}

impl UniReader {
    pub(super) fn new(id: StreamId) -> UniReader {
        UniReader {
            id,
            head: [0; 8],
            have: 0,
            kind: None,
            control: ControlReader::new(Sender::Server),
            done: false,
        }
    }

    /// Reads what the stream has; what it says goes into `st` (errors: the first one kept).
    pub(super) fn read(
        &mut self,
        q: &mut quinn_proto::Connection,
        st: &mut ControlState,
        qpack: &mut Qpack,
        tap: Option<&crate::net::SharedTap>,
    ) {
        if self.done {
            return;
        }
        let mut rs = q.recv_stream(self.id);
        let Ok(mut chunks) = rs.read(true) else {
            self.done = true;
            return;
        };
        // Bounded: every chunk consumes stream data, and the stream's window is finite.
        loop {
            let chunk = match chunks.next(UNI_CHUNK) {
                Ok(Some(c)) => c.bytes,
                Ok(None) => {
                    if let Some(tap) = tap {
                        let id = Channel::Quic(u64::from(self.id));
                        with_tap(tap, |t| t.stream_end(Dir::Recv, id));
                    }
                    if self.kind == Some(0x00) {
                        st.fail(
                            H3_CLOSED_CRITICAL_STREAM,
                            "h3: the server closed its control stream (H3_CLOSED_CRITICAL_STREAM)",
                        );
                    }
                    self.done = true;
                    break;
                }
                Err(ReadError::Reset(_)) => {
                    if self.kind == Some(0x00) {
                        st.fail(
                            H3_CLOSED_CRITICAL_STREAM,
                            "h3: the server reset its control stream (H3_CLOSED_CRITICAL_STREAM)",
                        );
                    }
                    self.done = true;
                    break;
                }
                Err(ReadError::Blocked) => break,
            };
            if let Some(tap) = tap {
                let id = Channel::Quic(u64::from(self.id));
                with_tap(tap, |t| t.bytes(Dir::Recv, id, &chunk));
            }
            if !self.take(&chunk, st, qpack) {
                self.done = true;
                break;
            }
        }
        let _ = chunks.finalize();
        if self.done && self.kind.is_some_and(|k| !matches!(k, 0x00 | 0x02 | 0x03)) {
            // Unknown or reserved stream type: not read (RFC 9114 §6.2).
            let _ = q
                .recv_stream(self.id)
                .stop(quinn::VarInt::from_u32(H3_STREAM_CREATION_ERROR as u32));
        }
    }

    /// Takes one chunk; false when the stream is not read further.
    fn take(&mut self, chunk: &[u8], st: &mut ControlState, qpack: &mut Qpack) -> bool {
        let mut data = chunk;
        if self.kind.is_none() {
            let have = self.have;
            let n = (8 - have).min(data.len());
            self.head[have..have + n].copy_from_slice(&data[..n]);
            let Some((t, used)) = varint(&self.head[..have + n]) else {
                self.have += n;
                return true;
            };
            data = &data[used - have..];
            self.kind = Some(t);
            let seen = match t {
                0x00 => &mut st.control_seen,
                0x02 => &mut st.encoder_seen,
                0x03 => &mut st.decoder_seen,
                0x01 => {
                    st.fail(
                        H3_ID_ERROR,
                        "h3: the server opened a push stream, but we allowed no push (H3_ID_ERROR)",
                    );
                    return false;
                }
                _ => return false,
            };
            if *seen {
                st.fail(
                    H3_STREAM_CREATION_ERROR,
                    &format!(
                        "h3: a second server stream of type {t:#x} (H3_STREAM_CREATION_ERROR)"
                    ),
                );
                return false;
            }
            *seen = true;
        }
        let r = match self.kind {
            Some(0x00) => self.control.feed(data).map_err(H3Error::from).map(|()| {
                if let Some(id) = self.control.goaway() {
                    st.goaway = Some(id);
                }
                if let Some(s) = self.control.settings() {
                    qpack.peer_settings(s);
                }
            }),
            Some(0x02) => qpack.encoder_stream(data),
            Some(0x03) => qpack.decoder_stream(data),
            _ => Ok(()),
        };
        if let Err(H3Error::Connection { code, message } | H3Error::Stream { code, message }) = r {
            st.fail(code, &message);
            return false;
        }
        true
    }
}

/// Our control stream's bytes: the stream type (control), then one SETTINGS frame with what
/// `qpack` advertises.
pub(crate) fn control_stream_bytes(qpack: QpackConfig) -> Vec<u8> {
    let mut payload = Vec::with_capacity(16);
    use hxlab_wire::h3::setting::{
        MAX_FIELD_SECTION_SIZE, QPACK_BLOCKED_STREAMS, QPACK_MAX_TABLE_CAPACITY,
    };
    for (id, v) in [
        (QPACK_MAX_TABLE_CAPACITY, qpack.decoder_capacity),
        (QPACK_BLOCKED_STREAMS, qpack.blocked_streams),
        (MAX_FIELD_SECTION_SIZE, MAX_FIELD_SECTION),
    ] {
        put_varint(&mut payload, id);
        put_varint(&mut payload, v);
    }
    let mut out = vec![hxlab_wire::h3::stream::CONTROL as u8];
    hxlab_wire::h3::write_frame_head(&mut out, SETTINGS, payload.len() as u64);
    out.extend_from_slice(&payload);
    out
}

/// Our control stream: SETTINGS, written as stream credit and flow control allow.
pub(super) fn control_opener(qpack: QpackConfig) -> UniWriter {
    UniWriter::new(control_stream_bytes(qpack))
}

/// Opens our control stream and sends SETTINGS (shown to `tap`).
pub(super) async fn open_control(
    conn: &QuicConn,
    qpack: QpackConfig,
    tap: Option<&crate::net::SharedTap>,
) -> Result<StreamId, String> {
    let mut opener = control_opener(qpack);
    conn.until(|s| {
        if let Some(e) = &s.lost {
            return Some(Err(e.to_string()));
        }
        opener.poll(&mut s.quic.q, tap).transpose()
    })
    .await
}
