//! The origin's one HTTP/1.1 request framer (`hxlab_wire::h1_request`): a connection's bytes
//! as a series of request heads and bodies, or the refusal that closes it. Input: a split
//! byte, then the bytes. Whatever the bytes, nothing panics, and the series read from the
//! whole input equals the series read from it in pieces of that many bytes (0 counts as 1):
//! where a request ends never depends on how the bytes arrived.
#![no_main]
use hxlab_wire::h1_request::{BodyReader, HeadReader};
use libfuzzer_sys::fuzz_target;

/// The largest head accepted (the origin's --max-header-size is 64 KiB by default).
const MAX_HEAD: usize = 4096;

/// What the framer makes of a connection's bytes arriving in `pieces`.
fn frame<'a>(pieces: impl IntoIterator<Item = &'a [u8]>) -> Vec<String> {
    let mut buf: Vec<u8> = Vec::new();
    let mut heads = HeadReader::default();
    let mut body: Option<BodyReader> = None;
    let mut seen = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            if let Some(b) = &mut body {
                match b.feed(&buf) {
                    Ok(n) => {
                        buf.drain(..n);
                        if !b.done() {
                            break;
                        }
                        body = None;
                        seen.push("body end".to_string());
                    }
                    Err(r) => {
                        seen.push(format!("refused in a body: {r:?}"));
                        return seen;
                    }
                }
            }
            match heads.read(&buf, MAX_HEAD) {
                Ok(Some((used, head))) => {
                    let fields = head.fields().count();
                    seen.push(format!(
                        "{} {} {:?} host={:?} {:?} keep-alive={} continue={} fields={fields}",
                        head.method,
                        head.target,
                        head.version,
                        head.host,
                        head.body,
                        head.keep_alive,
                        head.expect_continue
                    ));
                    let length = head.body;
                    buf.drain(..used);
                    body = Some(BodyReader::new(length));
                }
                Ok(None) => break,
                Err(r) => {
                    seen.push(format!("refused: {r:?} ({} {})", r.status(), r.reason()));
                    return seen;
                }
            }
        }
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else {
        return;
    };
    let whole = frame([bytes]);
    let size = usize::from(sel).max(1);
    let pieces = frame(bytes.chunks(size));
    assert_eq!(whole, pieces, "pieces of {size} read the connection differently");
});
