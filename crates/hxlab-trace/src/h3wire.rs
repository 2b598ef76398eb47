//! A passive HTTP/3 stream parser (sans-IO): fed the bytes of one direction of one QUIC stream,
//! in order, it reports the unidirectional stream type, HTTP/3 frames (DATA, HEADERS with the
//! QPACK-decoded field section, SETTINGS, GOAWAY, ...) and QPACK encoder/decoder instructions.

use crate::event::{Dir, Event};
use hxlab_wire::qpack::display as qpack;
use serde_json::{json, Value};

/// HEADERS/SETTINGS payloads above this are reported but not buffered (a hostile peer cannot
/// make the tracer grow without bound).
const MAX_BUFFERED_FRAME: u64 = 1 << 20;

pub use hxlab_wire::h3::{frame_type_name, is_grease, setting_name};
use hxlab_wire::varint::read as varint;

/// What a stream carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamKind {
    /// A bidirectional request stream: HTTP/3 frames.
    Request,
    /// Unidirectional, type not read yet.
    UniUntyped,
    /// Control stream (0x00): frames.
    Control,
    /// Push stream (0x01): push id, then frames.
    Push { id_read: bool },
    /// QPACK encoder stream (0x02).
    QpackEncoder,
    /// QPACK decoder stream (0x03).
    QpackDecoder,
    /// Reserved or unknown type: contents ignored.
    Other(u64),
}

fn uni_type_name(t: u64) -> String {
    match t {
        0x00 => "control stream (0x00)".into(),
        0x01 => "push stream (0x01)".into(),
        0x02 => "QPACK encoder stream (0x02)".into(),
        0x03 => "QPACK decoder stream (0x03)".into(),
        t if is_grease(t) => format!("reserved stream type 0x{t:x} (grease)"),
        t => format!("unknown stream type 0x{t:x}"),
    }
}

use hxlab_wire::qpack::mirror::Mirrored;
/// The QPACK tables of the connection as the trace rebuilds them (shared with the qlog's
/// HTTP/3 events): a field section is shown resolved when the inserts it references were
/// seen before it; else its references are shown as such.
pub use hxlab_wire::qpack::mirror::QpackMirror;

fn tap_dir(d: Dir) -> hxlab_wire::tap::Dir {
    match d {
        Dir::Send => hxlab_wire::tap::Dir::Send,
        Dir::Recv => hxlab_wire::tap::Dir::Recv,
    }
}

/// The fields of a section sent in `dir` on `stream`, when its references resolve now (a
/// blocked one is not waited for: the trace shows it as it came).
fn resolve(
    mirror: &mut QpackMirror,
    dir: Dir,
    stream: u64,
    block: &[u8],
) -> Option<Vec<(String, String)>> {
    match mirror.resolve(tap_dir(dir), stream, block) {
        Mirrored::Fields(f) => Some(f),
        Mirrored::Blocked => {
            mirror.cancel(tap_dir(dir), stream);
            None
        }
        Mirrored::Unavailable => None,
    }
}

/// One direction of one QUIC stream.
pub struct H3StreamWire {
    dir: Dir,
    stream_id: u64,
    kind: StreamKind,
    buf: Vec<u8>,
    /// Payload bytes of the current DATA (or oversize/ignored) frame still to pass over.
    skip: u64,
    broken: bool,
}

impl H3StreamWire {
    /// A parser for `stream_id` in direction `dir`; `bidi` for request streams.
    pub fn new(dir: Dir, stream_id: u64, bidi: bool) -> H3StreamWire {
        H3StreamWire {
            dir,
            stream_id,
            kind: if bidi {
                StreamKind::Request
            } else {
                StreamKind::UniUntyped
            },
            buf: Vec::new(),
            skip: 0,
            broken: false,
        }
    }

    /// What this stream turned out to be.
    pub fn kind(&self) -> StreamKind {
        self.kind
    }

    fn base(&self, kind: &'static str, line: String) -> Event {
        Event::new(kind, format!("{} {line}", self.dir.as_str()))
            .field("proto", "h3")
            .field("dir", self.dir.as_str())
            .field("stream_id", self.stream_id)
    }

    /// The end of this direction of the stream (FIN).
    pub fn finish(&self) -> Event {
        self.base("stream_fin", format!("FIN on stream {}", self.stream_id))
    }

    /// Feeds the next bytes; returns the events they completed (dynamic-table references
    /// shown unresolved: see [`H3StreamWire::feed_with`]).
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Event> {
        self.feed_with(bytes, &mut QpackMirror::default())
    }

    /// Feeds the next bytes with the connection's [`QpackMirror`]; returns the events they
    /// completed.
    pub fn feed_with(&mut self, mut bytes: &[u8], mirror: &mut QpackMirror) -> Vec<Event> {
        let mut out = Vec::new();
        if self.broken {
            return out;
        }
        if self.skip > 0 {
            let n = (self.skip.min(bytes.len() as u64)) as usize;
            self.skip -= n as u64;
            bytes = &bytes[n..];
        }
        if let StreamKind::Other(_) = self.kind {
            return out;
        }
        self.buf.extend_from_slice(bytes);
        // Each step takes one complete item off the buffer; false when it needs more bytes.
        while match self.kind {
            StreamKind::UniUntyped => self.stream_type(&mut out),
            StreamKind::Push { id_read: false } => self.push_id(&mut out),
            StreamKind::QpackEncoder | StreamKind::QpackDecoder => {
                self.instruction(&mut out, mirror)
            }
            StreamKind::Other(_) => false,
            StreamKind::Request | StreamKind::Control | StreamKind::Push { id_read: true } => {
                self.frame(&mut out, mirror)
            }
        } {}
        out
    }

    /// A unidirectional stream's type.
    fn stream_type(&mut self, out: &mut Vec<Event>) -> bool {
        let Some((t, n)) = varint(&self.buf) else {
            return false;
        };
        self.buf.drain(..n);
        self.kind = match t {
            0x00 => StreamKind::Control,
            0x01 => StreamKind::Push { id_read: false },
            0x02 => StreamKind::QpackEncoder,
            0x03 => StreamKind::QpackDecoder,
            t => StreamKind::Other(t),
        };
        out.push(
            self.base(
                "h3_stream",
                format!(
                    "unidirectional stream {}: {}",
                    self.stream_id,
                    uni_type_name(t)
                ),
            )
            .field("stream_type", t),
        );
        if let StreamKind::Other(_) = self.kind {
            self.buf.clear();
            return false;
        }
        true
    }

    /// A push stream's push id.
    fn push_id(&mut self, out: &mut Vec<Event>) -> bool {
        let Some((id, n)) = varint(&self.buf) else {
            return false;
        };
        self.buf.drain(..n);
        self.kind = StreamKind::Push { id_read: true };
        out.push(
            self.base("h3_push_stream", format!("push stream for push id {id}"))
                .field("push_id", id),
        );
        true
    }

    /// One QPACK encoder or decoder stream instruction.
    fn instruction(&mut self, out: &mut Vec<Event>, mirror: &mut QpackMirror) -> bool {
        let encoder = self.kind == StreamKind::QpackEncoder;
        let r = if encoder {
            qpack::encoder_instruction(&self.buf)
        } else {
            qpack::decoder_instruction(&self.buf)
        };
        match r {
            Ok(Some((n, text))) => {
                if encoder {
                    mirror.instruction(tap_dir(self.dir), &self.buf[..n]);
                }
                self.buf.drain(..n);
                let which = if encoder { "encoder" } else { "decoder" };
                out.push(
                    self.base(
                        "qpack_instruction",
                        format!("QPACK {which} instruction: {text}"),
                    )
                    .field("instruction", text)
                    .field("length", n),
                );
                true
            }
            Ok(None) => {
                if self.buf.len() as u64 > MAX_BUFFERED_FRAME {
                    self.broken = true;
                }
                false
            }
            Err(e) => {
                self.broken = true;
                out.push(self.base("error", format!("QPACK instruction not decodable: {e}")));
                false
            }
        }
    }

    /// One HTTP/3 frame (DATA, reserved and oversized frames from their head alone).
    fn frame(&mut self, out: &mut Vec<Event>, mirror: &mut QpackMirror) -> bool {
        let Some((ftype, len, hdr)) = hxlab_wire::h3::parse_frame_head(&self.buf) else {
            return false;
        };
        if ftype == 0x0 || len > MAX_BUFFERED_FRAME || is_grease(ftype) {
            // Reported from the header alone; the payload passes unbuffered.
            let have = ((self.buf.len() - hdr) as u64).min(len);
            self.buf.drain(..hdr + have as usize);
            self.skip = len - have;
            let mut e = self.frame_head(ftype, len);
            if ftype != 0x0 && !is_grease(ftype) {
                e = e.detail("; payload too large to decode");
            }
            out.push(e);
            return self.skip == 0;
        }
        if ((self.buf.len() - hdr) as u64) < len {
            return false;
        }
        let payload: Vec<u8> = self.buf[hdr..hdr + len as usize].to_vec();
        self.buf.drain(..hdr + len as usize);
        out.push(self.frame_event(ftype, &payload, mirror));
        true
    }

    fn frame_head(&self, ftype: u64, len: u64) -> Event {
        let name = frame_type_name(ftype);
        let label = if name == "UNKNOWN" || is_grease(ftype) {
            format!("{name}(0x{ftype:x})")
        } else {
            name.to_string()
        };
        self.base(
            "frame",
            format!("{label} frame <length={len}, stream_id={}>", self.stream_id),
        )
        .field("type", name)
        .field("type_code", ftype)
        .field("length", len)
    }

    fn frame_event(&self, ftype: u64, p: &[u8], mirror: &mut QpackMirror) -> Event {
        let mut e = self.frame_head(ftype, p.len() as u64);
        match ftype {
            0x1 => {
                let resolved = resolve(mirror, self.dir, self.stream_id, p);
                e = field_section(e, p, resolved);
            }
            0x5 => {
                if let Some((id, n)) = varint(p) {
                    e = e.detail(format!("(push_id={id})")).field("push_id", id);
                    e = field_section(e, &p[n..], None);
                }
            }
            0x4 => {
                let mut rest = p;
                let mut list = Vec::new();
                while let Some((id, n1)) = varint(rest) {
                    let Some((value, n2)) = varint(&rest[n1..]) else {
                        break;
                    };
                    rest = &rest[n1 + n2..];
                    if id == hxlab_wire::h3::setting::QPACK_MAX_TABLE_CAPACITY {
                        mirror.settings(tap_dir(self.dir), value);
                    }
                    e = e.detail(format!("[{}(0x{id:x}): {value}]", setting_name(id)));
                    list.push(json!({"id": id, "name": setting_name(id), "value": value}));
                }
                e = e.field("settings", Value::Array(list));
            }
            0x3 | 0x7 | 0xd => {
                if let Some((v, _)) = varint(p) {
                    let key = match ftype {
                        0x7 => "id",
                        0xd => "max_push_id",
                        _ => "push_id",
                    };
                    e = e.detail(format!("({key}={v})")).field(key, v);
                }
            }
            _ => {}
        }
        e
    }
}

/// A HEADERS (or PUSH_PROMISE) field section: its lines, with dynamic-table references
/// replaced by `resolved` fields when the trace's mirror of the table could resolve them.
fn field_section(mut e: Event, block: &[u8], resolved: Option<Vec<(String, String)>>) -> Event {
    e = e.field("header_block_size", block.len());
    match qpack::decode_field_section(block) {
        Ok(mut fs) => {
            let resolved = resolved.filter(|r| fs.dynamic_refs > 0 && r.len() == fs.fields.len());
            let shown_resolved = resolved.is_some();
            if let Some(r) = resolved {
                fs.fields = r;
            }
            e = e.detail(format!(
                "; field section {} bytes (QPACK, required insert count {}), {} fields",
                block.len(),
                fs.required_insert_count,
                fs.fields.len()
            ));
            if fs.dynamic_refs > 0 {
                e = e.detail(format!(
                    "; {} field lines use the QPACK dynamic table{}",
                    fs.dynamic_refs,
                    if shown_resolved {
                        " (resolved from the inserts seen)"
                    } else {
                        " (shown as references, not resolved)"
                    }
                ));
            }
            for (n, v) in &fs.fields {
                e = e.detail(format!("{n}: {v}"));
            }
            let list: Vec<Value> = fs.fields.iter().map(|(n, v)| json!([n, v])).collect();
            e.field("headers", Value::Array(list))
                .field("required_insert_count", fs.required_insert_count)
                .field("dynamic_refs", fs.dynamic_refs)
                .field("dynamic_resolved", shown_resolved)
        }
        Err(err) => e
            .detail(format!("; QPACK decoding failed: {err}"))
            .field("qpack_error", err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_stream_settings_then_goaway() {
        let mut p = H3StreamWire::new(Dir::Recv, 3, false);
        // type 0x00, SETTINGS(len 4): QPACK_MAX_TABLE_CAPACITY=0, MAX_FIELD_SECTION_SIZE=16383 (2-byte varint)
        let wire = [
            0x00, 0x04, 0x05, 0x01, 0x00, 0x06, 0x7f, 0xff, 0x07, 0x01, 0x00,
        ];
        let mut ev = Vec::new();
        for b in wire {
            ev.extend(p.feed(&[b]));
        }
        assert_eq!(ev[0].fields["stream_type"], 0);
        assert_eq!(ev[1].fields["type"], "SETTINGS");
        assert_eq!(ev[1].fields["settings"][1]["value"], 16383);
        assert_eq!(ev[2].fields["type"], "GOAWAY");
        assert_eq!(ev[2].fields["id"], 0);
    }

    #[test]
    fn request_stream_headers_and_data() {
        let mut p = H3StreamWire::new(Dir::Recv, 0, true);
        // HEADERS: RIC 0, base 0, :status 200 (static 25).
        let mut wire = vec![0x01, 0x03, 0x00, 0x00, 0xd9];
        wire.extend([0x00, 0x40, 0x64]);
        wire.extend([9u8; 100]);
        wire.extend([0x00, 0x02, 1, 2]);
        let ev = p.feed(&wire);
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0].fields["headers"][0], json!([":status", "200"]));
        assert_eq!(ev[1].fields["length"], 100);
        assert_eq!(ev[2].fields["length"], 2);
    }

    #[test]
    fn dynamic_references_resolve_from_the_inserts_seen() {
        use hxlab_wire::qpack::QpackEncoder;
        let mut mirror = QpackMirror::default();
        // The server's SETTINGS (received): capacity 4096 for what we send.
        let mut control = H3StreamWire::new(Dir::Recv, 3, false);
        let settings = [0x00, 0x04, 0x03, 0x01, 0x50, 0x00];
        control.feed_with(&settings, &mut mirror);
        let mut enc = QpackEncoder::new(4096);
        enc.peer_settings(4096, 16);
        let mut block = Vec::new();
        enc.encode(
            0,
            &[(&b":path"[..], &b"/x"[..]), (&b"x-a"[..], &b"b"[..])],
            &mut block,
        );
        let mut ins = vec![0x02];
        enc.drain_output(&mut ins);
        let mut encoder = H3StreamWire::new(Dir::Send, 2, false);
        let ev = encoder.feed_with(&ins, &mut mirror);
        assert!(ev.iter().any(|e| e.kind == "qpack_instruction"));
        let mut frame = vec![0x01, block.len() as u8];
        frame.extend_from_slice(&block);
        let mut req = H3StreamWire::new(Dir::Send, 0, true);
        let ev = req.feed_with(&frame, &mut mirror);
        assert_eq!(ev[0].fields["dynamic_refs"], 2);
        assert_eq!(ev[0].fields["dynamic_resolved"], true);
        assert_eq!(ev[0].fields["headers"][1][1], "b");
        // Without the mirror the references are shown as such.
        let ev = H3StreamWire::new(Dir::Send, 0, true).feed(&frame);
        assert_eq!(ev[0].fields["dynamic_resolved"], false);
    }
}
