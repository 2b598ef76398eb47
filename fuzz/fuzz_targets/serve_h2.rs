//! The origin's own HTTP/2 server (`hxlab_serve::h2_fuzz_entry`): the real connection loop fed a
//! client's bytes through an in-memory pipe. Input: a split byte, then what the client sends
//! after the connection preface, written in pieces of that many bytes (0 counts as 1). The
//! server must not panic or hang, and must write whole frames only: its output is a sequence
//! of frames, the first its SETTINGS (whatever the client sent, and in whatever pieces).
#![no_main]
use hxlab_serve::h2_fuzz_entry::serve_bytes;
use hxlab_wire::h2::{frame, FrameHead, FRAME_HEAD, PREFACE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let mut wire = PREFACE.to_vec();
    wire.extend_from_slice(bytes);
    let size = usize::from(sel).max(1);
    let out = serve_bytes(wire.chunks(size)).unwrap_or_else(|e| panic!("{e}"));
    let mut at = 0;
    while at < out.len() {
        let head = FrameHead::parse(&out[at..]).expect("a whole frame head");
        if at == 0 {
            assert_eq!(head.kind, frame::SETTINGS, "the server's first frame");
        }
        at += FRAME_HEAD + head.len;
    }
    assert_eq!(at, out.len(), "the output ends on a frame boundary");
});
