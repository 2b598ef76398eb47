//! `--qlog DIR` / `--qlog-file-base BASE`: one qlog file (JSON-SEQ, qlog 0.3) per QUIC
//! connection, `BASE.N.sqlog`. quinn-proto writes the transport events (packets sent,
//! received and lost, recovery metrics) into it; this module adds HTTP/3 frame events of
//! the request streams (`http3:frame_created` for what the client sends, `http3:frame_parsed`
//! for what it reads) into the same trace, read from the bytes the session hands its tap.
//! Both write through one handle, from the connection's one thread, so records never
//! interleave.

pub use hxlab_quic::qlog::{QlogFiles, SharedFile};
use hxlab_wire::tap::{Channel, Dir, Tap, TransportFacts};
use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

/// HTTP/3 frame names as qlog's HTTP/3 event schema spells them.
fn frame_name(kind: u64) -> &'static str {
    match kind {
        0x0 => "data",
        0x1 => "headers",
        0x3 => "cancel_push",
        0x4 => "settings",
        0x5 => "push_promise",
        0x7 => "goaway",
        0xd => "max_push_id",
        0xf0700 => "priority_update",
        _ => "unknown",
    }
}

/// Where a stream's frame reader is: reading a frame's type and length, or skipping its
/// payload.
#[derive(Default)]
struct Reader {
    head: Vec<u8>,
    skip: u64,
}

/// The HTTP/3 events of one connection, written into its qlog.
pub struct H3Events {
    file: SharedFile,
    start: Instant,
    readers: HashMap<(bool, u64), Reader>,
}

impl H3Events {
    pub fn new(file: SharedFile, start: Instant) -> H3Events {
        H3Events {
            file,
            start,
            readers: HashMap::new(),
        }
    }

    fn event(&mut self, name: &str, data: serde_json::Value) {
        let time = self.start.elapsed().as_secs_f64() * 1000.0;
        let record = serde_json::json!({"time": time, "name": name, "data": data});
        let mut line = vec![0x1e];
        line.extend_from_slice(record.to_string().as_bytes());
        line.push(b'\n');
        // A qlog that cannot be written loses events, never the run.
        let _ = self.file.write_all(&line);
    }
}

impl Tap for H3Events {
    fn connected(&mut self, _facts: &TransportFacts) {}

    fn bytes(&mut self, dir: Dir, channel: Channel, mut data: &[u8]) {
        let Channel::Quic(id) = channel else {
            return;
        };
        // Request streams only (client-initiated, bidirectional).
        if id & 3 != 0 {
            return;
        }
        let sending = dir == Dir::Send;
        let mut found = Vec::new();
        {
            let r = self.readers.entry((sending, id)).or_default();
            while !data.is_empty() {
                if r.skip > 0 {
                    let n = (r.skip as usize).min(data.len());
                    r.skip -= n as u64;
                    data = &data[n..];
                    continue;
                }
                r.head.push(data[0]);
                data = &data[1..];
                let Some((kind, a)) = hxlab_wire::varint::read(&r.head) else {
                    continue;
                };
                let Some((len, b)) = hxlab_wire::varint::read(&r.head[a..]) else {
                    continue;
                };
                debug_assert_eq!(a + b, r.head.len());
                r.head.clear();
                r.skip = len;
                found.push((kind, len));
            }
        }
        let name = if sending {
            "http3:frame_created"
        } else {
            "http3:frame_parsed"
        };
        for (kind, len) in found {
            self.event(
                name,
                serde_json::json!({
                    "stream_id": id,
                    "length": len,
                    "frame": {"frame_type": frame_name(kind)},
                }),
            );
        }
    }

    fn stream_end(&mut self, dir: Dir, channel: Channel) {
        if let Channel::Quic(id) = channel {
            self.readers.remove(&(dir == Dir::Send, id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_found_at_every_split() {
        // HEADERS of 3 bytes, DATA of 70 bytes (a two-byte length), HEADERS of 0.
        let mut wire = vec![0x01, 0x03, 1, 2, 3, 0x00, 0x40, 70];
        wire.extend(std::iter::repeat_n(9u8, 70));
        wire.extend([0x01, 0x00]);
        for cut in 0..=wire.len() {
            let dir = std::env::temp_dir().join(format!("hxlab-qlog-{}-{cut}", std::process::id()));
            let (file, path, start) = QlogFiles::new(&dir).open().unwrap();
            let mut ev = H3Events::new(file, start);
            ev.bytes(Dir::Recv, Channel::Quic(4), &wire[..cut]);
            ev.bytes(Dir::Recv, Channel::Quic(4), &wire[cut..]);
            let text = std::fs::read_to_string(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            let kinds: Vec<String> = text
                .split('\u{1e}')
                .filter(|r| !r.trim().is_empty())
                .map(|r| {
                    let v: serde_json::Value = serde_json::from_str(r.trim()).unwrap();
                    format!(
                        "{}:{}",
                        v["data"]["frame"]["frame_type"], v["data"]["length"]
                    )
                })
                .collect();
            assert_eq!(
                kinds,
                ["\"headers\":3", "\"data\":70", "\"headers\":0"],
                "cut at {cut}"
            );
        }
    }
}
