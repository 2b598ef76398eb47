//! A passive HTTP/2 wire parser (sans-IO): fed the bytes one side wrote, in order, it reports
//! the connection preface and every frame with its decoded fields, and decodes header blocks
//! with its own HPACK decoder, whose dynamic table follows the sender's deterministically.

use crate::event::{Dir, Event};
use serde_json::{json, Value};

use hxlab_wire::h2::control::{self, GoAway, Priority, RstStream, WindowUpdate};
use hxlab_wire::h2::flag::{
    ACK as FLAG_ACK, END_HEADERS as FLAG_END_HEADERS, END_STREAM as FLAG_END_STREAM,
    PADDED as FLAG_PADDED, PRIORITY as FLAG_PRIORITY,
};
use hxlab_wire::h2::FrameHead;
pub use hxlab_wire::h2::{code_name as error_code_name, frame_type_name, setting_name, PREFACE};
use hxlab_wire::hpack::Decoder;

/// The largest HPACK table size either side's decoder follows (a sender announcing more is a
/// decoding error, shown as such).
const MAX_TABLE: usize = 1 << 20;

/// A header block being collected across HEADERS/PUSH_PROMISE + CONTINUATION frames.
struct PendingBlock {
    stream_id: u32,
    promised: Option<u32>,
    fragment: Vec<u8>,
}

/// What one direction of an HTTP/2 connection carried; feed it bytes with [`H2Wire::feed`].
pub struct H2Wire {
    dir: Dir,
    /// Bytes of the preface still expected (client→server direction only).
    preface_left: usize,
    buf: Vec<u8>,
    /// DATA payload bytes still to pass over without buffering them.
    skip: usize,
    hpack: Decoder,
    pending: Option<PendingBlock>,
    /// Set when the bytes stopped looking like HTTP/2; nothing more is parsed.
    broken: bool,
    /// Frames seen (for summaries and tests).
    pub frames: u64,
    /// The peer answered with an HTTP/1.x status line instead of frames.
    pub answered_http1: bool,
}

impl H2Wire {
    /// A parser for one direction. The client→server direction starts with the preface.
    pub fn new(dir: Dir) -> H2Wire {
        H2Wire {
            dir,
            preface_left: if dir == Dir::Send { PREFACE.len() } else { 0 },
            buf: Vec::new(),
            skip: 0,
            hpack: Decoder::new(MAX_TABLE),
            pending: None,
            broken: false,
            frames: 0,
            answered_http1: false,
        }
    }

    /// Feeds the next bytes of this direction; returns the events they completed.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Vec<Event> {
        let mut out = Vec::new();
        if self.broken {
            return out;
        }
        if self.skip > 0 {
            let n = self.skip.min(bytes.len());
            self.skip -= n;
            bytes = &bytes[n..];
        }
        self.buf.extend_from_slice(bytes);
        loop {
            if self.preface_left > 0 {
                let have = self.buf.len().min(self.preface_left);
                if have == 0 {
                    return out;
                }
                let off = PREFACE.len() - self.preface_left;
                if self.buf[..have] != PREFACE[off..off + have] {
                    self.broken = true;
                    out.push(
                        Event::new(
                            "error",
                            format!(
                                "{} bytes are not the HTTP/2 connection preface",
                                self.dir.as_str()
                            ),
                        )
                        .field("dir", self.dir.as_str()),
                    );
                    return out;
                }
                self.buf.drain(..have);
                self.preface_left -= have;
                if self.preface_left == 0 {
                    out.push(
                        Event::new(
                            "preface",
                            format!(
                                "{} client connection preface (PRI * HTTP/2.0)",
                                self.dir.as_str()
                            ),
                        )
                        .field("dir", self.dir.as_str()),
                    );
                }
                continue;
            }
            if self.frames == 0 && self.dir == Dir::Recv && self.buf.starts_with(b"HTTP/1.") {
                // An h1-only server answering an h2c prior-knowledge preface.
                self.broken = true;
                self.answered_http1 = true;
                let first = String::from_utf8_lossy(
                    self.buf.split(|b| *b == b'\n').next().unwrap_or_default(),
                )
                .trim()
                .to_string();
                out.push(
                    Event::new(
                        "error",
                        format!("recv an HTTP/1.1 response instead of HTTP/2 frames: {first}"),
                    )
                    .field("dir", "recv")
                    .field("status_line", first),
                );
                return out;
            }
            let Some(FrameHead {
                len,
                kind: ftype,
                flags,
                stream_id,
            }) = FrameHead::parse(&self.buf)
            else {
                return out;
            };
            if ftype == 0x0 {
                // DATA: report from the header alone and pass over the payload unbuffered.
                self.frames += 1;
                let have = (self.buf.len() - 9).min(len);
                self.buf.drain(..9 + have);
                self.skip = len - have;
                out.push(self.data_event(len, flags, stream_id));
                continue;
            }
            if self.buf.len() < 9 + len {
                return out;
            }
            let payload: Vec<u8> = self.buf[9..9 + len].to_vec();
            self.buf.drain(..9 + len);
            self.frames += 1;
            out.push(self.frame_event(ftype, flags, stream_id, &payload));
        }
    }

    fn head(&self, ftype: u8, len: usize, flags: u8, stream_id: u32) -> Event {
        let name = frame_type_name(ftype);
        let label = if name == "UNKNOWN" {
            format!("UNKNOWN(0x{ftype:02x})")
        } else {
            name.to_string()
        };
        Event::new(
            "frame",
            format!(
                "{} {label} frame <length={len}, flags=0x{flags:02x}, stream_id={stream_id}>",
                self.dir.as_str()
            ),
        )
        .field("proto", "h2")
        .field("dir", self.dir.as_str())
        .field("type", name)
        .field("type_code", ftype)
        .field("length", len)
        .field("flags", flags)
        .field("stream_id", stream_id)
    }

    fn data_event(&self, len: usize, flags: u8, stream_id: u32) -> Event {
        let mut e = self
            .head(0, len, flags, stream_id)
            .field("end_stream", flags & FLAG_END_STREAM != 0);
        if flags & FLAG_END_STREAM != 0 {
            e = e.detail("; END_STREAM");
        }
        e
    }

    fn frame_event(&mut self, ftype: u8, flags: u8, stream_id: u32, p: &[u8]) -> Event {
        let e = self.head(ftype, p.len(), flags, stream_id);
        match ftype {
            0x1 => self.headers_event(e, flags, stream_id, p),
            0x5 => self.push_promise_event(e, flags, stream_id, p),
            0x9 => {
                let end = flags & FLAG_END_HEADERS != 0;
                match self.pending.as_mut() {
                    Some(b) if b.stream_id == stream_id => {
                        b.fragment.extend_from_slice(p);
                        if end {
                            return self.finish_block(e);
                        }
                        e
                    }
                    _ => e.detail("(CONTINUATION without a header block in progress)"),
                }
            }
            _ => control_fields(e, ftype, flags, p),
        }
    }

    /// HEADERS: priority, END_STREAM, and the header block (decoded once complete).
    fn headers_event(&mut self, mut e: Event, flags: u8, stream_id: u32, p: &[u8]) -> Event {
        let mut body = p;
        let mut pad = 0usize;
        if flags & FLAG_PADDED != 0 {
            pad = body.first().copied().unwrap_or(0) as usize;
            body = body.get(1..).unwrap_or_default();
        }
        if let Some(p) = Priority::read(body).filter(|_| flags & FLAG_PRIORITY != 0) {
            e = e.detail(priority_text(&p)).field(
                "priority",
                json!({"dep_stream_id": p.dependency, "weight": p.weight, "exclusive": p.exclusive}),
            );
            body = &body[5..];
        }
        let body = &body[..body.len().saturating_sub(pad)];
        e = e.field("end_stream", flags & FLAG_END_STREAM != 0);
        if flags & FLAG_END_STREAM != 0 {
            e = e.detail("; END_STREAM");
        }
        self.start_block(e, stream_id, None, body, flags & FLAG_END_HEADERS != 0)
    }

    /// PUSH_PROMISE: the promised stream and its header block.
    fn push_promise_event(&mut self, mut e: Event, flags: u8, stream_id: u32, p: &[u8]) -> Event {
        let mut body = p;
        let mut pad = 0usize;
        if flags & FLAG_PADDED != 0 {
            pad = body.first().copied().unwrap_or(0) as usize;
            body = body.get(1..).unwrap_or_default();
        }
        if body.len() < 4 {
            return e;
        }
        let promised = u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
        let block = &body[4..body.len().saturating_sub(pad).max(4)];
        e = e
            .detail(format!("(promised_stream_id={promised})"))
            .field("promised_stream_id", promised);
        self.start_block(
            e,
            stream_id,
            Some(promised),
            block,
            flags & FLAG_END_HEADERS != 0,
        )
    }

    fn start_block(
        &mut self,
        e: Event,
        stream_id: u32,
        promised: Option<u32>,
        fragment: &[u8],
        end: bool,
    ) -> Event {
        self.pending = Some(PendingBlock {
            stream_id,
            promised,
            fragment: fragment.to_vec(),
        });
        if end {
            self.finish_block(e)
        } else {
            e.detail("; header block continues in CONTINUATION")
        }
    }

    /// Decodes a complete header block; the field list goes on the frame that ended it.
    fn finish_block(&mut self, mut e: Event) -> Event {
        let Some(block) = self.pending.take() else {
            return e;
        };
        let mut headers = Vec::new();
        let result = self.hpack.decode_fields(&block.fragment, |f| {
            headers.push((
                String::from_utf8_lossy(f.name).into_owned(),
                String::from_utf8_lossy(f.value).into_owned(),
            ))
        });
        e = e.field("header_block_size", block.fragment.len());
        if let Some(p) = block.promised {
            e = e.field("promised_stream_id", p);
        }
        match result {
            Ok(()) => {
                e = e.detail(format!(
                    "; header block {} bytes (HPACK), {} fields",
                    block.fragment.len(),
                    headers.len()
                ));
                for (n, v) in &headers {
                    e = e.detail(format!("{n}: {v}"));
                }
                let list: Vec<Value> = headers.iter().map(|(n, v)| json!([n, v])).collect();
                e = e.field("headers", Value::Array(list));
            }
            Err(err) => {
                // After a decoding error the table no longer follows the sender's.
                self.broken = true;
                e = e
                    .detail(format!(
                        "; HPACK decoding failed: {err}; no further frames are decoded"
                    ))
                    .field("hpack_error", err.to_string());
            }
        }
        e
    }
}

/// A priority as its text line.
fn priority_text(p: &Priority) -> String {
    format!(
        "(dep_stream_id={}, weight={}, exclusive={})",
        p.dependency,
        p.weight,
        u8::from(p.exclusive)
    )
}

/// The fields of frames without a header block: PRIORITY, RST_STREAM, SETTINGS, PING,
/// GOAWAY, WINDOW_UPDATE (others: the head only).
fn control_fields(mut e: Event, ftype: u8, flags: u8, p: &[u8]) -> Event {
    match ftype {
        0x2 => {
            if let Some(pr) = Priority::read(p) {
                e = e
                    .detail(priority_text(&pr))
                    .field("dep_stream_id", pr.dependency)
                    .field("weight", pr.weight)
                    .field("exclusive", pr.exclusive);
            }
        }
        0x3 => {
            let Some(RstStream { code }) = RstStream::read(p) else {
                return e;
            };
            e = e
                .detail(format!(
                    "(error_code={}(0x{code:02x}))",
                    error_code_name(code)
                ))
                .field("error_code", code)
                .field("error", error_code_name(code));
        }
        0x4 => {
            let ack = flags & FLAG_ACK != 0;
            e = e.field("ack", ack);
            if ack {
                e = e.detail("; ACK");
            } else {
                e = e.detail(format!("(niv={})", p.len() / 6));
            }
            let mut list = Vec::new();
            for (id, value) in control::entries(p) {
                e = e.detail(format!("[{}(0x{id:02x}): {value}]", setting_name(id)));
                list.push(json!({"id": id, "name": setting_name(id), "value": value}));
            }
            e = e.field("settings", Value::Array(list));
        }
        0x6 if p.len() >= 8 => {
            let mut data = [0u8; 8];
            data.copy_from_slice(&p[..8]);
            let ack = flags & FLAG_ACK != 0;
            e = e
                .detail(format!(
                    "(opaque_data={}){}",
                    hex(&data),
                    if ack { "; ACK" } else { "" }
                ))
                .field("opaque_data", hex(&data))
                .field("ack", ack);
        }
        0x7 => {
            let Some(g) = GoAway::read(p) else {
                return e;
            };
            let (last, code) = (g.last_stream_id, g.code);
            let debug = String::from_utf8_lossy(g.debug).to_string();
            e = e
                .detail(format!(
                    "(last_stream_id={last}, error_code={}(0x{code:02x}), opaque_data({})=[{debug}])",
                    error_code_name(code),
                    p.len() - 8
                ))
                .field("last_stream_id", last)
                .field("error_code", code)
                .field("error", error_code_name(code))
                .field("debug_data", debug);
        }
        0x8 => {
            let Some(WindowUpdate { increment: inc }) = WindowUpdate::read(p) else {
                return e;
            };
            e = e
                .detail(format!("(window_size_increment={inc})"))
                .field("window_size_increment", inc);
        }
        _ => {}
    }
    e
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(t: u8, flags: u8, sid: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![
            (payload.len() >> 16) as u8,
            (payload.len() >> 8) as u8,
            payload.len() as u8,
            t,
            flags,
        ];
        v.extend_from_slice(&sid.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn preface_settings_headers_split_anywhere() {
        let mut wire = PREFACE.to_vec();
        wire.extend(frame(4, 0, 0, &[0, 3, 0, 0, 0, 100, 0, 2, 0, 0, 0, 0]));
        // RFC 7541 C.4.1: :method GET, :scheme http, :path /, :authority www.example.com (Huffman).
        let block = [
            0x82, 0x86, 0x84, 0x41, 0x8c, 0xf1, 0xe3, 0xc2, 0xe5, 0xf2, 0x3a, 0x6b, 0xa0, 0xab,
            0x90, 0xf4, 0xff,
        ];
        wire.extend(frame(1, 0x5, 1, &block));
        wire.extend(frame(0, 0x1, 1, &[7u8; 300]));
        wire.extend(frame(8, 0, 0, &65535u32.to_be_bytes()));
        // Feed one byte at a time: the parser must not care how reads were split.
        let mut p = H2Wire::new(Dir::Send);
        let mut events = Vec::new();
        for b in &wire {
            events.extend(p.feed(std::slice::from_ref(b)));
        }
        let kinds: Vec<String> = events
            .iter()
            .map(|e| {
                e.fields
                    .get("type")
                    .and_then(|v| v.as_str())
                    .unwrap_or(e.kind)
                    .to_string()
            })
            .collect();
        assert_eq!(
            kinds,
            ["preface", "SETTINGS", "HEADERS", "DATA", "WINDOW_UPDATE"]
        );
        let h = &events[2];
        assert_eq!(h.fields["header_block_size"], 17);
        assert_eq!(
            h.fields["headers"][3],
            json!([":authority", "www.example.com"])
        );
        assert_eq!(events[3].fields["length"], 300);
        assert_eq!(events[4].fields["window_size_increment"], 65535);
        assert_eq!(
            events[1].fields["settings"][0]["name"],
            "SETTINGS_MAX_CONCURRENT_STREAMS"
        );
    }

    #[test]
    fn h1_answer_to_h2c_is_reported() {
        let mut p = H2Wire::new(Dir::Recv);
        let ev = p.feed(b"HTTP/1.1 400 Bad Request\r\n\r\n");
        assert_eq!(ev.len(), 1);
        assert!(ev[0].line.contains("HTTP/1.1 400"));
    }

    #[test]
    fn goaway_and_rst() {
        let mut p = H2Wire::new(Dir::Recv);
        let mut g = 3u32.to_be_bytes().to_vec();
        g.extend(0u32.to_be_bytes());
        let mut wire = frame(7, 0, 0, &g);
        wire.extend(frame(3, 0, 5, &8u32.to_be_bytes()));
        let ev = p.feed(&wire);
        assert_eq!(ev[0].fields["last_stream_id"], 3);
        assert_eq!(ev[1].fields["error"], "CANCEL");
    }
}
