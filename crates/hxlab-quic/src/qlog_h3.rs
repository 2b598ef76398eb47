//! The HTTP/3 and QPACK events of one connection's qlog, for either side: the HTTP/3 frames
//! of the request and control streams (`http3:frame_created` for what this side sends,
//! `http3:frame_parsed` for what it reads) and the QPACK encoder- and decoder-stream
//! instructions (`qpack:instruction_created` / `qpack:instruction_parsed`), read from the
//! stream bytes the HTTP/3 layer hands it ([`Tap`]), written into the same trace as
//! quinn-proto's transport events ([`SharedFile`]). The load client's session and the
//! origin's QUIC driver both feed one; each connection's is fed from the thread that drives
//! it, so records never interleave.

use crate::qlog::SharedFile;
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

/// Where a stream's reader is: for frames, reading a frame's type and length or skipping its
/// payload; for a unidirectional stream, its type first; for QPACK streams, the bytes of an
/// instruction not complete yet.
#[derive(Default)]
struct Reader {
    head: Vec<u8>,
    skip: u64,
    /// Unidirectional streams: the type, once read.
    uni_type: Option<u64>,
    /// A QPACK stream that could not be read (or an instruction too large): not followed.
    broken: bool,
}

/// The most bytes of one QPACK instruction kept while waiting for the rest (a larger one is
/// not followed further: the qlog loses that stream's later instructions, never the run).
const MAX_INSTRUCTION: usize = 64 * 1024 + 64;

/// A QPACK instruction as qlog's `QPACKInstruction`.
fn instruction_json(i: &hxlab_wire::qpack::instruction::InstructionSummary) -> serde_json::Value {
    let mut v = serde_json::json!({"instruction_type": i.instruction_type});
    let key = match i.instruction_type {
        "set_dynamic_table_capacity" => "capacity",
        "insert_with_name_reference" => "name_index",
        "duplicate" => "index",
        "insert_count_increment" => "increment",
        "insert_without_name_reference" => "",
        _ => "stream_id",
    };
    if !key.is_empty() {
        v[key] = i.value.into();
    }
    if let Some(s) = i.is_static {
        v["table_type"] = if s { "static" } else { "dynamic" }.into();
    }
    if let Some(n) = i.name_length {
        v["name_length"] = n.into();
    }
    if let Some(n) = i.value_length {
        v["value_length"] = n.into();
    }
    v
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
        let sending = dir == Dir::Send;
        let mut frames = Vec::new();
        let mut instructions = Vec::new();
        {
            let r = self.readers.entry((sending, id)).or_default();
            // Unidirectional streams (id bit 1): the stream type first.
            if id & 2 != 0 && r.uni_type.is_none() {
                while r.uni_type.is_none() && !data.is_empty() {
                    r.head.push(data[0]);
                    data = &data[1..];
                    if let Some((t, _)) = hxlab_wire::varint::read(&r.head) {
                        r.uni_type = Some(t);
                        r.head.clear();
                    }
                }
            }
            match r.uni_type {
                None | Some(0x00) => read_frames(r, data, &mut frames),
                Some(t @ (0x02 | 0x03)) => read_instructions(r, t == 0x02, data, &mut instructions),
                Some(_) => {}
            }
        }
        let name = if sending {
            "http3:frame_created"
        } else {
            "http3:frame_parsed"
        };
        for (kind, len) in frames {
            self.event(
                name,
                serde_json::json!({
                    "stream_id": id,
                    "length": len,
                    "frame": {"frame_type": frame_name(kind)},
                }),
            );
        }
        let name = if sending {
            "qpack:instruction_created"
        } else {
            "qpack:instruction_parsed"
        };
        for (len, ins) in instructions {
            self.event(
                name,
                serde_json::json!({
                    "stream_id": id,
                    "length": len,
                    "instruction": instruction_json(&ins),
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

/// Frame heads of a request or control stream: (type, length) of each frame begun.
fn read_frames(r: &mut Reader, mut data: &[u8], found: &mut Vec<(u64, u64)>) {
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

/// Whole QPACK instructions of an encoder (`encoder`) or decoder stream: (length, summary).
fn read_instructions(
    r: &mut Reader,
    encoder: bool,
    data: &[u8],
    found: &mut Vec<(usize, hxlab_wire::qpack::instruction::InstructionSummary)>,
) {
    use hxlab_wire::qpack::instruction::{
        summarize_decoder_instruction, summarize_encoder_instruction,
    };
    if r.broken {
        return;
    }
    r.head.extend_from_slice(data);
    let mut at = 0;
    loop {
        let next = if encoder {
            summarize_encoder_instruction(&r.head[at..])
        } else {
            summarize_decoder_instruction(&r.head[at..])
        };
        match next {
            Ok(Some((n, ins))) => {
                found.push((n, ins));
                at += n;
            }
            Ok(None) => break,
            Err(_) => {
                // Not readable: the stream is not followed further.
                r.broken = true;
                r.head = Vec::new();
                return;
            }
        }
    }
    r.head.drain(..at);
    if r.head.len() > MAX_INSTRUCTION {
        r.broken = true;
        r.head = Vec::new();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qlog::QlogFiles;

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

    #[test]
    fn qpack_instructions_and_control_frames_are_found_at_every_split() {
        // Our encoder stream (client uni stream 2): type 0x02, Set Dynamic Table Capacity
        // 4096, Insert With Name Reference static 1 ":path" "/x"; the server's decoder
        // stream (3): type 0x03, Section Acknowledgment 0; the server's control stream (7):
        // type 0x00, SETTINGS of 2 bytes.
        let enc = [0x02, 0x3f, 0xe1, 0x1f, 0xc1, 0x02, b'/', b'x'];
        let dec = [0x03, 0x80];
        let control = [0x00, 0x04, 0x02, 0x01, 0x00];
        for cut in 0..=enc.len() {
            let dir =
                std::env::temp_dir().join(format!("hxlab-qlog-q-{}-{cut}", std::process::id()));
            let (file, path, start) = QlogFiles::new(&dir).open().unwrap();
            let mut ev = H3Events::new(file, start);
            ev.bytes(Dir::Send, Channel::Quic(2), &enc[..cut]);
            ev.bytes(Dir::Send, Channel::Quic(2), &enc[cut..]);
            ev.bytes(Dir::Recv, Channel::Quic(3), &dec);
            ev.bytes(Dir::Recv, Channel::Quic(7), &control);
            let text = std::fs::read_to_string(&path).unwrap();
            let _ = std::fs::remove_file(&path);
            let got: Vec<(String, serde_json::Value)> = text
                .split('\u{1e}')
                .filter(|r| !r.trim().is_empty())
                .map(|r| {
                    let v: serde_json::Value = serde_json::from_str(r.trim()).unwrap();
                    let d = &v["data"];
                    match v["name"].as_str().unwrap() {
                        "http3:frame_parsed" => ("frame".into(), d["frame"]["frame_type"].clone()),
                        n => (n.to_string(), d["instruction"].clone()),
                    }
                })
                .collect();
            let want = vec![
                (
                    "qpack:instruction_created".to_string(),
                    serde_json::json!({"instruction_type": "set_dynamic_table_capacity", "capacity": 4096}),
                ),
                (
                    "qpack:instruction_created".to_string(),
                    serde_json::json!({"instruction_type": "insert_with_name_reference", "name_index": 1, "table_type": "static", "value_length": 2}),
                ),
                (
                    "qpack:instruction_parsed".to_string(),
                    serde_json::json!({"instruction_type": "section_acknowledgement", "stream_id": 0}),
                ),
                ("frame".to_string(), serde_json::json!("settings")),
            ];
            assert_eq!(got, want, "cut at {cut}");
        }
    }
}
