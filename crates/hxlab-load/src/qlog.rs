//! `--qlog DIR` / `--qlog-file-base BASE`: one qlog file (JSON-SEQ, qlog 0.3) per QUIC
//! connection, `BASE.W.C.sqlog` (worker, client). quinn-proto writes the transport events
//! (packets sent, received and lost, recovery metrics) into it, and the session's tap
//! ([`H3Events`], shared with the origin's `serve --qlog`) adds the HTTP/3 frame and QPACK
//! instruction events of every stream into the same trace. Both write through one handle,
//! from the connection's one thread, so records never interleave.

pub use hxlab_quic::qlog::QlogFiles;
pub use hxlab_quic::qlog_h3::H3Events;
