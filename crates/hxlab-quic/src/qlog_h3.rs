//! The HTTP/3 and QPACK events of one connection's qlog, for either side, in the event
//! definitions that go with the qlog 0.3 files quinn-proto writes (draft-ietf-quic-qlog-h3-
//! events-01 to -04: categories `http` and `qpack`, the names qvis and the `qlog` crate read):
//! - `http:stream_type_set` when a unidirectional stream's type is read or written (owner
//!   `local` for ours, `remote` for the peer's);
//! - `http:frame_created` for each frame this side writes, `http:frame_parsed` for each one
//!   it reads, on request and control streams, with the frame's fields: HEADERS and
//!   PUSH_PROMISE with their fields decoded (the QPACK tables are rebuilt from both encoder
//!   streams, [`QpackMirror`]; a section that references inserts not seen yet waits for them,
//!   as at the real decoder), SETTINGS with each setting, GOAWAY, CANCEL_PUSH, MAX_PUSH_ID,
//!   PRIORITY_UPDATE as qlog's extension spells it, reserved (grease) and unknown types;
//! - `qpack:instruction_created` / `qpack:instruction_parsed` for every encoder- and
//!   decoder-stream instruction, its length as `raw.length`.
//!
//! It reads the stream bytes the HTTP/3 layer hands it ([`Tap`]) and writes into the same
//! trace as quinn-proto's transport events ([`SharedFile`]). The load client's session and
//! the origin's QUIC driver both feed one; each connection's is fed from the thread that
//! drives it, so records never interleave.

use crate::qlog::SharedFile;
use hxlab_wire::qpack::instruction::{
    summarize_decoder_instruction, summarize_encoder_instruction, InstructionSummary,
};
use hxlab_wire::qpack::mirror::{Mirrored, QpackMirror};
use hxlab_wire::tap::{Channel, Dir, Tap, TransportFacts};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::time::Instant;

/// The most bytes of one QPACK instruction kept while waiting for the rest (a larger one is
/// not followed further: the qlog loses that stream's later instructions, never the run).
const MAX_INSTRUCTION: usize = 64 * 1024 + 64;
/// The largest frame payload read for its fields (HEADERS, SETTINGS, ...); a larger one is
/// logged with its type and length only.
const MAX_FRAME_PAYLOAD: u64 = 1 << 20;
/// Field sections waiting for inserts, per connection; past this, the oldest is logged with
/// its dynamic references unresolved.
const MAX_PENDING: usize = 64;

/// Frame types whose payload is read for the event's fields.
fn wants_payload(kind: u64) -> bool {
    matches!(kind, 0x1 | 0x3 | 0x4 | 0x5 | 0x7 | 0xd | 0xf0700 | 0xf0701)
}

/// Where a stream's reader is: reading a frame's type and length, collecting a payload, or
/// skipping one; for a unidirectional stream, its type first; for QPACK streams, the bytes
/// of an instruction not complete yet.
#[derive(Default)]
struct Reader {
    head: Vec<u8>,
    skip: u64,
    /// A frame whose payload is being collected into `payload`: (type, length).
    collect: Option<(u64, u64)>,
    payload: Vec<u8>,
    /// Unidirectional streams: the type, once read.
    uni_type: Option<u64>,
    /// A QPACK stream that could not be read (or an instruction too large): not followed.
    broken: bool,
}

/// A frame read whole (payload `None`: not kept, DATA or too large).
struct Frame {
    kind: u64,
    len: u64,
    payload: Option<Vec<u8>>,
}

/// A HEADERS or PUSH_PROMISE frame whose section waits for inserts.
struct Pending {
    name: &'static str,
    dir: Dir,
    stream: u64,
    len: u64,
    push_id: Option<u64>,
    block: Vec<u8>,
}

/// The HTTP/3 events of one connection, written into its qlog.
pub struct H3Events {
    file: SharedFile,
    start: Instant,
    readers: HashMap<(bool, u64), Reader>,
    mirror: QpackMirror,
    pending: Vec<Pending>,
}

impl H3Events {
    pub fn new(file: SharedFile, start: Instant) -> H3Events {
        H3Events {
            file,
            start,
            readers: HashMap::new(),
            mirror: QpackMirror::default(),
            pending: Vec::new(),
        }
    }

    fn event(&mut self, name: &str, data: Value) {
        let time = self.start.elapsed().as_secs_f64() * 1000.0;
        let record = json!({"time": time, "name": name, "data": data});
        let mut line = vec![0x1e];
        line.extend_from_slice(record.to_string().as_bytes());
        line.push(b'\n');
        // A qlog that cannot be written loses events, never the run.
        let _ = self.file.write_all(&line);
    }

    fn frame_event(&mut self, name: &str, stream: u64, len: u64, frame: Value) {
        self.event(
            name,
            json!({"stream_id": stream, "length": len, "frame": frame}),
        );
    }

    /// One whole frame sent or read in `dir`: its event now, or later for a section that
    /// waits for inserts.
    fn frame(&mut self, dir: Dir, stream: u64, f: Frame) {
        let name = if dir == Dir::Send {
            "http:frame_created"
        } else {
            "http:frame_parsed"
        };
        let p = f.payload.as_deref();
        let varint = |p: Option<&[u8]>| p.and_then(hxlab_wire::varint::read);
        let frame = match f.kind {
            0x0 => json!({"frame_type": "data"}),
            0x1 | 0x5 => {
                let (push_id, block) = match (f.kind, p) {
                    (0x5, Some(p)) => match hxlab_wire::varint::read(p) {
                        Some((id, n)) => (Some(id), Some(&p[n..])),
                        None => (None, None),
                    },
                    (_, p) => (None, p),
                };
                let Some(block) = block else {
                    // Too large to read, or not readable: the fields are not logged.
                    return self.frame_event(name, stream, f.len, headers_frame(push_id, &[]));
                };
                match self.mirror.resolve(dir, stream, block) {
                    Mirrored::Fields(fields) => headers_frame(push_id, &fields),
                    Mirrored::Unavailable => headers_frame(push_id, &shown_fields(block)),
                    Mirrored::Blocked => {
                        let block = block.to_vec();
                        return self.wait(Pending {
                            name,
                            dir,
                            stream,
                            len: f.len,
                            push_id,
                            block,
                        });
                    }
                }
            }
            0x4 => {
                let settings = p.map(settings).unwrap_or_default();
                // Absent, QPACK_MAX_TABLE_CAPACITY is 0 (RFC 9204 §5).
                let capacity = settings
                    .iter()
                    .find(|(id, _)| *id == 0x01)
                    .map_or(0, |(_, v)| *v);
                self.mirror.settings(dir, capacity);
                let list: Vec<Value> = settings
                    .iter()
                    .map(|(id, v)| json!({"name": setting_name(*id), "value": v}))
                    .collect();
                json!({"frame_type": "settings", "settings": list})
            }
            0x3 | 0xd => {
                let kind = if f.kind == 0x3 {
                    "cancel_push"
                } else {
                    "max_push_id"
                };
                let id = varint(p).map_or(0, |(v, _)| v);
                json!({"frame_type": kind, "push_id": id})
            }
            0x7 => json!({"frame_type": "goaway", "id": varint(p).map_or(0, |(v, _)| v)}),
            0xf0700 | 0xf0701 => {
                let (id, n) = varint(p).unwrap_or((0, 0));
                let value = p.map_or(String::new(), |p| {
                    String::from_utf8_lossy(p.get(n..).unwrap_or_default()).into_owned()
                });
                json!({
                    "frame_type": "priority_update",
                    "target_stream_type": if f.kind == 0xf0700 { "request" } else { "push" },
                    "prioritized_element_id": id,
                    "priority_field_value": value,
                })
            }
            k if hxlab_wire::h3::is_grease(k) => {
                json!({"frame_type": "reserved", "length": f.len})
            }
            k => json!({"frame_type": "unknown", "frame_type_value": k}),
        };
        self.frame_event(name, stream, f.len, frame);
    }

    /// A section that waits for inserts; when too many wait, the oldest is logged as it is.
    fn wait(&mut self, p: Pending) {
        if self.pending.len() >= MAX_PENDING {
            let old = self.pending.remove(0);
            self.mirror.cancel(old.dir, old.stream);
            self.unresolved(old);
        }
        self.pending.push(p);
    }

    /// A waiting section logged with its dynamic references shown, not resolved.
    fn unresolved(&mut self, p: Pending) {
        let frame = headers_frame(p.push_id, &shown_fields(&p.block));
        self.frame_event(p.name, p.stream, p.len, frame);
    }

    /// After inserts in `dir`: the sections sent that way that resolve now are logged.
    fn retry(&mut self, dir: Dir) {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &self.pending[i];
            if p.dir != dir {
                i += 1;
                continue;
            }
            match self.mirror.resolve(dir, p.stream, &p.block) {
                Mirrored::Blocked => i += 1,
                Mirrored::Fields(fields) => {
                    let p = self.pending.remove(i);
                    let frame = headers_frame(p.push_id, &fields);
                    self.frame_event(p.name, p.stream, p.len, frame);
                }
                Mirrored::Unavailable => {
                    let p = self.pending.remove(i);
                    self.unresolved(p);
                }
            }
        }
    }

    fn instruction(&mut self, dir: Dir, encoder: bool, bytes: &[u8], ins: &InstructionSummary) {
        let name = if dir == Dir::Send {
            "qpack:instruction_created"
        } else {
            "qpack:instruction_parsed"
        };
        self.event(
            name,
            json!({"instruction": instruction_json(ins), "raw": {"length": bytes.len()}}),
        );
        if encoder {
            self.mirror.instruction(dir, bytes);
            self.retry(dir);
        }
    }
}

impl Drop for H3Events {
    /// Sections still waiting when the connection ends are logged unresolved.
    fn drop(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            self.unresolved(p);
        }
    }
}

/// A HEADERS (or, with `push_id`, PUSH_PROMISE) frame with its fields.
fn headers_frame(push_id: Option<u64>, fields: &[(String, String)]) -> Value {
    let headers: Vec<Value> = fields
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    match push_id {
        Some(id) => json!({"frame_type": "push_promise", "push_id": id, "headers": headers}),
        None => json!({"frame_type": "headers", "headers": headers}),
    }
}

/// A section's fields read without the tables: exact when it uses only the static table;
/// dynamic references are shown as `<dynamic #i>`; none when it cannot be read.
fn shown_fields(block: &[u8]) -> Vec<(String, String)> {
    hxlab_wire::qpack::display::decode_field_section(block)
        .map(|fs| fs.fields)
        .unwrap_or_default()
}

/// A SETTINGS payload's (identifier, value) pairs, as far as they read.
fn settings(mut p: &[u8]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    while let Some((id, a)) = hxlab_wire::varint::read(p) {
        let Some((v, b)) = hxlab_wire::varint::read(&p[a..]) else {
            break;
        };
        out.push((id, v));
        p = &p[a + b..];
    }
    out
}

/// A setting's name as RFC 9114 and RFC 9204 spell it, or its identifier in hex.
fn setting_name(id: u64) -> String {
    match hxlab_wire::h3::setting_name(id) {
        "UNKNOWN" | "reserved(grease)" => format!("0x{id:x}"),
        n => n.to_string(),
    }
}

/// A unidirectional stream type as qlog's `HTTPStreamType`.
fn stream_type(t: u64) -> &'static str {
    match t {
        0x00 => "control",
        0x01 => "push",
        0x02 => "qpack_encode",
        0x03 => "qpack_decode",
        t if hxlab_wire::h3::is_grease(t) => "reserved",
        _ => "unknown",
    }
}

/// A QPACK instruction as qlog's `QPACKInstruction`.
fn instruction_json(i: &InstructionSummary) -> Value {
    let mut v = json!({"instruction_type": i.instruction_type});
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
    if let Some(h) = i.huffman_name {
        v["huffman_encoded_name"] = h.into();
    }
    if let Some(n) = i.name_length {
        v["name_length"] = n.into();
    }
    if let Some(h) = i.huffman_value {
        v["huffman_encoded_value"] = h.into();
    }
    if let Some(n) = i.value_length {
        v["value_length"] = n.into();
    }
    v
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
        let mut typed = None;
        let encoder;
        {
            let r = self.readers.entry((sending, id)).or_default();
            // Unidirectional streams (id bit 1): the stream type first.
            if id & 2 != 0 && r.uni_type.is_none() {
                while r.uni_type.is_none() && !data.is_empty() {
                    r.head.push(data[0]);
                    data = &data[1..];
                    if let Some((t, _)) = hxlab_wire::varint::read(&r.head) {
                        r.uni_type = Some(t);
                        typed = Some(t);
                        r.head.clear();
                    }
                }
            }
            encoder = r.uni_type == Some(0x02);
            match r.uni_type {
                None | Some(0x00) => read_frames(r, data, &mut frames),
                Some(t @ (0x02 | 0x03)) => read_instructions(r, t == 0x02, data, &mut instructions),
                Some(_) => {}
            }
        }
        if let Some(t) = typed {
            let mut data = json!({
                "owner": if sending { "local" } else { "remote" },
                "stream_id": id,
                "stream_type": stream_type(t),
            });
            if matches!(stream_type(t), "unknown" | "reserved") {
                data["stream_type_value"] = t.into();
            }
            self.event("http:stream_type_set", data);
        }
        for f in frames {
            self.frame(dir, id, f);
        }
        for (bytes, ins) in instructions {
            self.instruction(dir, encoder, &bytes, &ins);
        }
    }

    fn stream_end(&mut self, dir: Dir, channel: Channel) {
        if let Channel::Quic(id) = channel {
            self.readers.remove(&(dir == Dir::Send, id));
        }
    }
}

/// The frames of a request or control stream that complete in `data`.
fn read_frames(r: &mut Reader, mut data: &[u8], found: &mut Vec<Frame>) {
    while !data.is_empty() {
        if let Some((kind, len)) = r.collect {
            let want = (len as usize).saturating_sub(r.payload.len());
            let n = want.min(data.len());
            r.payload.extend_from_slice(&data[..n]);
            data = &data[n..];
            if r.payload.len() as u64 >= len {
                r.collect = None;
                let payload = Some(std::mem::take(&mut r.payload));
                found.push(Frame { kind, len, payload });
            }
            continue;
        }
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
        if wants_payload(kind) && len <= MAX_FRAME_PAYLOAD {
            if len == 0 {
                found.push(Frame {
                    kind,
                    len,
                    payload: Some(Vec::new()),
                });
            } else {
                r.collect = Some((kind, len));
            }
        } else {
            r.skip = len;
            found.push(Frame {
                kind,
                len,
                payload: None,
            });
        }
    }
}

/// Whole QPACK instructions of an encoder (`encoder`) or decoder stream: (bytes, summary).
fn read_instructions(
    r: &mut Reader,
    encoder: bool,
    data: &[u8],
    found: &mut Vec<(Vec<u8>, InstructionSummary)>,
) {
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
                found.push((r.head[at..at + n].to_vec(), ins));
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

    /// Feeds `steps` (direction, stream, bytes) to a new connection's events, and returns
    /// the records written (after the events are dropped, as at the connection's end).
    fn run(tag: &str, steps: &[(Dir, u64, &[u8])]) -> Vec<Value> {
        let dir = std::env::temp_dir().join(format!("hxlab-qlog-{tag}-{}", std::process::id()));
        let (file, path, start) = QlogFiles::new(&dir).open().unwrap();
        let mut ev = H3Events::new(file, start);
        for (d, id, bytes) in steps {
            ev.bytes(*d, Channel::Quic(*id), bytes);
        }
        drop(ev);
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        text.split('\u{1e}')
            .filter(|r| !r.trim().is_empty())
            .map(|r| serde_json::from_str(r.trim()).unwrap())
            .collect()
    }

    /// (name, data without time) of every record.
    fn named(records: &[Value]) -> Vec<(String, Value)> {
        records
            .iter()
            .map(|r| (r["name"].as_str().unwrap().to_string(), r["data"].clone()))
            .collect()
    }

    #[test]
    fn frames_are_found_at_every_split() {
        // HEADERS of 3 bytes (a static-only section: `:method: GET`), DATA of 70 bytes (a
        // two-byte length), HEADERS of 0.
        let mut wire = vec![0x01, 0x03, 0x00, 0x00, 0xd1, 0x00, 0x40, 70];
        wire.extend(std::iter::repeat_n(9u8, 70));
        wire.extend([0x01, 0x00]);
        for cut in 0..=wire.len() {
            let got = named(&run(
                &format!("f{cut}"),
                &[(Dir::Recv, 4, &wire[..cut]), (Dir::Recv, 4, &wire[cut..])],
            ));
            let want = vec![
                (
                    "http:frame_parsed".to_string(),
                    json!({"stream_id": 4, "length": 3, "frame": {"frame_type": "headers",
                        "headers": [{"name": ":method", "value": "GET"}]}}),
                ),
                (
                    "http:frame_parsed".to_string(),
                    json!({"stream_id": 4, "length": 70, "frame": {"frame_type": "data"}}),
                ),
                (
                    "http:frame_parsed".to_string(),
                    json!({"stream_id": 4, "length": 0, "frame": {"frame_type": "headers",
                        "headers": []}}),
                ),
            ];
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn stream_types_qpack_instructions_and_settings_are_found_at_every_split() {
        // Our encoder stream (client uni stream 2): type 0x02, Set Dynamic Table Capacity
        // 4096, Insert With Name Reference static 1 ":path" "/x"; the server's decoder
        // stream (3): type 0x03, Section Acknowledgment 0; the server's control stream (7):
        // type 0x00, SETTINGS of 2 bytes (QPACK_MAX_TABLE_CAPACITY 0).
        let enc = [0x02, 0x3f, 0xe1, 0x1f, 0xc1, 0x02, b'/', b'x'];
        let dec = [0x03, 0x80];
        let control = [0x00, 0x04, 0x02, 0x01, 0x00];
        for cut in 0..=enc.len() {
            let got = named(&run(
                &format!("q{cut}"),
                &[
                    (Dir::Send, 2, &enc[..cut]),
                    (Dir::Send, 2, &enc[cut..]),
                    (Dir::Recv, 3, &dec),
                    (Dir::Recv, 7, &control),
                ],
            ));
            let want = vec![
                (
                    "http:stream_type_set".to_string(),
                    json!({"owner": "local", "stream_id": 2, "stream_type": "qpack_encode"}),
                ),
                (
                    "qpack:instruction_created".to_string(),
                    json!({"instruction": {"instruction_type": "set_dynamic_table_capacity",
                        "capacity": 4096}, "raw": {"length": 3}}),
                ),
                (
                    "qpack:instruction_created".to_string(),
                    json!({"instruction": {"instruction_type": "insert_with_name_reference",
                        "name_index": 1, "table_type": "static", "huffman_encoded_value": false,
                        "value_length": 2}, "raw": {"length": 4}}),
                ),
                (
                    "http:stream_type_set".to_string(),
                    json!({"owner": "remote", "stream_id": 3, "stream_type": "qpack_decode"}),
                ),
                (
                    "qpack:instruction_parsed".to_string(),
                    json!({"instruction": {"instruction_type": "section_acknowledgement",
                        "stream_id": 0}, "raw": {"length": 1}}),
                ),
                (
                    "http:stream_type_set".to_string(),
                    json!({"owner": "remote", "stream_id": 7, "stream_type": "control"}),
                ),
                (
                    "http:frame_parsed".to_string(),
                    json!({"stream_id": 7, "length": 2, "frame": {"frame_type": "settings",
                        "settings": [{"name": "SETTINGS_QPACK_MAX_TABLE_CAPACITY", "value": 0}]}}),
                ),
            ];
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    /// A section sent before the insert it references waits for it (its event follows the
    /// insert's), resolved from the rebuilt table; one whose insert never comes is logged
    /// with the reference shown when the connection ends.
    #[test]
    fn a_blocked_section_is_logged_resolved_once_its_insert_is_seen() {
        // The peer's SETTINGS: QPACK_MAX_TABLE_CAPACITY 4096 (sizes the table of what we send).
        let control = [0x00, 0x04, 0x03, 0x01, 0x50, 0x00];
        // HEADERS on stream 0: Required Insert Count 1 (encoded 2 with 128 entries), Base 1,
        // indexed dynamic relative 0.
        let headers = [0x01, 0x03, 0x02, 0x00, 0x80];
        // Our encoder stream: capacity 4096, insert literal name "x-a" value "b".
        let enc = [0x02, 0x3f, 0xe1, 0x1f, 0x43, b'x', b'-', b'a', 0x01, b'b'];
        let got = named(&run(
            "blocked",
            &[
                (Dir::Recv, 3, &control),
                (Dir::Send, 0, &headers),
                (Dir::Send, 2, &enc),
                (Dir::Send, 4, &headers),
            ],
        ));
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "http:stream_type_set",
                "http:frame_parsed",
                "http:stream_type_set",
                "qpack:instruction_created",
                "qpack:instruction_created",
                "http:frame_created",
                "http:frame_created",
            ]
        );
        let resolved = json!({"frame_type": "headers", "headers": [{"name": "x-a", "value": "b"}]});
        assert_eq!(got[4].1["instruction"]["huffman_encoded_name"], false);
        assert_eq!(got[5].1["stream_id"], 0);
        assert_eq!(got[5].1["frame"], resolved);
        // Stream 4's section resolves at once: the insert was seen before it.
        assert_eq!(got[6].1["stream_id"], 4);
        assert_eq!(got[6].1["frame"], resolved);

        // Without the insert: logged at the end, the reference shown.
        let got = named(&run(
            "never",
            &[(Dir::Recv, 3, &control), (Dir::Send, 0, &headers)],
        ));
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[2].0, "http:frame_created");
        let field = &got[2].1["frame"]["headers"][0];
        assert!(
            field.to_string().contains("dynamic"),
            "an unresolved reference is shown as one: {field}"
        );
    }
}
