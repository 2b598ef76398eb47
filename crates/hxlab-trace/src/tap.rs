//! The trace's observer: an [`hxlab_wire::Tap`] installed on `hxlab load`'s own client
//! sessions. Every byte those sessions send and receive goes through the passive parsers
//! ([`H1Wire`], [`H2Wire`], [`H3StreamWire`]) and comes out as events; the responses they
//! show are collected into a [`Summary`].
//!
//! Which parser a connection's bytes go to follows what the connection turned out to be:
//! ALPN `h2` (or h2c with prior knowledge) is HTTP/2, anything else over TCP is HTTP/1.1,
//! QUIC is HTTP/3 with one parser per stream and direction.

use crate::event::{Dir, Event, Tracer};
use crate::h1wire::H1Wire;
use crate::h2wire::H2Wire;
use crate::h3wire::{H3StreamWire, QpackMirror};
use hxlab_wire::tap::{Channel, QuicStats, TransportFacts};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The protocol the user asked for (hxlab-core's request form of the protocol type).
pub use hxlab_core::Proto;

/// One response as the wire showed it.
#[derive(Debug, Clone, Default)]
pub struct ResponseSummary {
    /// Request path.
    pub path: String,
    /// Stream id (h2/h3), None on h1.
    pub stream_id: Option<u64>,
    /// Final status code (0 if none arrived).
    pub status: u16,
    /// Body bytes (DATA payload on h2/h3, the framed body on h1).
    pub body_bytes: u64,
    /// A pushed response.
    pub pushed: bool,
    /// The response's Alt-Svc header, if any (how a server advertises HTTP/3).
    pub alt_svc: Option<String>,
}

/// What the trace established.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// "h1", "h2", "h2c" or "h3": the protocol actually spoken (on the last connection).
    pub protocol: String,
    /// ALPN result, if TLS or QUIC was used.
    pub alpn: Option<String>,
    /// True when h2 was asked for and HTTP/1.1 was used.
    pub fell_back: bool,
    /// Every complete response, pushed ones included, in the order they completed.
    pub responses: Vec<ResponseSummary>,
    /// Whether the (last) TLS handshake resumed a session; None without TLS over TCP.
    pub resumed: Option<bool>,
    /// Connections seen.
    pub connections: u32,
    /// The server answered an HTTP/2 preface in HTTP/1.1.
    pub answered_http1: bool,
    /// The server answered HTTP/1.1 with HTTP/2 frames (it speaks h2c).
    pub answered_h2: bool,
}

#[derive(Default)]
struct Pending {
    path: String,
    status: u16,
    body: u64,
    pushed: bool,
    alt_svc: Option<String>,
}

enum Conn {
    None,
    H1 {
        wire: H1Wire,
        paths: VecDeque<String>,
        current: Option<Pending>,
    },
    // Boxed: two HPACK decoders (tables, memos) would make every other variant as large.
    H2 {
        send: Box<H2Wire>,
        recv: Box<H2Wire>,
        streams: BTreeMap<u64, Pending>,
    },
    H3 {
        wires: HashMap<(u64, bool), H3StreamWire>,
        streams: BTreeMap<u64, Pending>,
        /// The connection's QPACK tables, rebuilt from its encoder streams.
        qpack: Box<QpackMirror>,
    },
}

/// The observer `hxlab trace` installs on load's client.
pub struct TraceTap {
    tracer: Tracer,
    asked: Proto,
    /// Requests the traced connection carries (for the HTTP/1.1 note).
    requests: u64,
    conn: Conn,
    summary: Arc<Mutex<Summary>>,
}

fn info(line: impl Into<String>) -> Event {
    let line = line.into();
    Event::new("info", line.clone()).field("message", line)
}

fn opt(v: Option<String>) -> Value {
    v.map(Value::from).unwrap_or(Value::Null)
}

/// Header `name` of an event's decoded header list.
fn header(e: &Event, name: &str) -> Option<String> {
    e.fields.get("headers")?.as_array()?.iter().find_map(|h| {
        let pair = h.as_array()?;
        (pair.first()?.as_str()? == name).then(|| pair.get(1)?.as_str().map(str::to_string))?
    })
}

impl TraceTap {
    /// A tap that prints through `tracer` for a connection carrying `requests` requests; the
    /// summary fills in as responses complete.
    pub fn new(tracer: Tracer, asked: Proto, requests: u64) -> (TraceTap, Arc<Mutex<Summary>>) {
        let summary = Arc::new(Mutex::new(Summary::default()));
        (
            TraceTap {
                tracer,
                asked,
                requests,
                conn: Conn::None,
                summary: summary.clone(),
            },
            summary,
        )
    }

    fn summary(&self) -> std::sync::MutexGuard<'_, Summary> {
        self.summary.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tcp_connected(&mut self, f: &TransportFacts) {
        let ms = f.connect_us.unwrap_or(0) as f64 / 1e3;
        self.tracer.emit(
            Event::new(
                "connect",
                format!("connected to {} over TCP in {ms:.3} ms", f.peer),
            )
            .field("transport", "tcp")
            .field("addr", f.peer.clone())
            .field("connect_ms", ms),
        );
        let Some(version) = &f.tls_version else {
            let h2 = matches!(self.asked, Proto::H2 | Proto::H2c);
            if h2 {
                self.tracer
                    .emit(info("HTTP/2 over cleartext TCP with prior knowledge (h2c)"));
            }
            self.start_tcp(h2, if h2 { "h2c" } else { "h1" }, None, None, false);
            return;
        };
        let version = version.replace('.', "_");
        let ms = f.handshake_us.unwrap_or(0) as f64 / 1e3;
        let cipher = f.cipher.clone().unwrap_or_else(|| "?".into());
        self.tracer.emit(
            Event::new(
                "tls",
                format!(
                    "TLS handshake done in {ms:.3} ms: {version}, {cipher}, ALPN {} (offered {}), {}",
                    f.alpn.as_deref().unwrap_or("none"),
                    f.alpn_offered.join(","),
                    if f.resumed {
                        "resumed session"
                    } else {
                        "full handshake (no resumption)"
                    }
                ),
            )
            .field("version", version)
            .field("cipher", cipher)
            .field("alpn", opt(f.alpn.clone()))
            .field("alpn_offered", f.alpn_offered.clone())
            .field("resumed", f.resumed)
            .field("handshake_ms", ms),
        );
        let h2 = f.alpn.as_deref() == Some("h2");
        let fell_back = !h2 && matches!(self.asked, Proto::H2 | Proto::Auto);
        if fell_back {
            let what = match &f.alpn {
                Some(p) => format!("the server selected {p:?} by ALPN"),
                None => "the server selected no ALPN protocol".into(),
            };
            self.tracer.emit(
                Event::new(
                    "fallback",
                    format!("FALLBACK: h2 was offered but {what}; continuing over HTTP/1.1"),
                )
                .field("asked", "h2")
                .field("alpn", opt(f.alpn.clone()))
                .field("using", "http/1.1"),
            );
        }
        let fell_back = fell_back && self.asked == Proto::H2;
        let proto = if h2 { "h2" } else { "h1" };
        self.start_tcp(h2, proto, f.alpn.clone(), Some(f.resumed), fell_back);
    }

    fn start_tcp(
        &mut self,
        h2: bool,
        proto: &str,
        alpn: Option<String>,
        resumed: Option<bool>,
        fell_back: bool,
    ) {
        self.conn = if h2 {
            Conn::H2 {
                send: Box::new(H2Wire::new(Dir::Send)),
                recv: Box::new(H2Wire::new(Dir::Recv)),
                streams: BTreeMap::new(),
            }
        } else {
            if self.requests > 1 {
                self.tracer.emit(info(format!(
                    "HTTP/1.1 has no multiplexing: the {} requests go one after another on this connection",
                    self.requests
                )));
            }
            Conn::H1 {
                wire: H1Wire::new(),
                paths: VecDeque::new(),
                current: None,
            }
        };
        let mut s = self.summary();
        s.protocol = proto.to_string();
        s.alpn = alpn;
        s.resumed = resumed;
        s.fell_back |= fell_back;
    }

    fn quic_connected(&mut self, f: &TransportFacts) {
        self.tracer.emit(
            Event::new(
                "connect",
                format!("QUIC connecting to {} over UDP (offering ALPN h3)", f.peer),
            )
            .field("transport", "quic")
            .field("addr", f.peer.clone()),
        );
        let ms = f.handshake_us.unwrap_or(0) as f64 / 1e3;
        let rtt_ms = f.rtt_us.unwrap_or(0) as f64 / 1e3;
        let early = if f.resumed {
            "resumed session"
        } else {
            "full handshake (no 0-RTT)"
        };
        self.tracer.emit(
            Event::new(
                "quic_handshake",
                format!(
                    "QUIC handshake done in {ms:.3} ms: TLSv1_3, ALPN {}, RTT estimate {rtt_ms:.3} ms, {early}",
                    f.alpn.as_deref().unwrap_or("none")
                ),
            )
            .field("handshake_ms", ms)
            .field("version", "TLSv1_3")
            .field("alpn", opt(f.alpn.clone()))
            .field("rtt_ms", rtt_ms)
            .field("resumed", f.resumed),
        );
        self.conn = Conn::H3 {
            wires: HashMap::new(),
            streams: BTreeMap::new(),
            qpack: Box::default(),
        };
        let mut s = self.summary();
        s.protocol = "h3".into();
        s.alpn = f.alpn.clone();
    }

    fn respond(&self, proto: &str, stream_id: Option<u64>, p: Pending) {
        let r = ResponseSummary {
            path: p.path,
            stream_id,
            status: p.status,
            body_bytes: p.body,
            pushed: p.pushed,
            alt_svc: p.alt_svc,
        };
        self.tracer.emit(response_event(&r, proto));
        self.summary().responses.push(r);
    }

    fn emit_all(&self, events: Vec<Event>) {
        for e in events {
            self.tracer.emit(e);
        }
    }

    fn h1_bytes(&mut self, dir: hxlab_wire::Dir, data: &[u8]) {
        let Conn::H1 {
            wire,
            paths,
            current,
        } = &mut self.conn
        else {
            return;
        };
        let events = match dir {
            hxlab_wire::Dir::Send => wire.feed_send(data),
            hxlab_wire::Dir::Recv => wire.feed_recv(data),
        };
        let mut done = Vec::new();
        for e in &events {
            match e.kind {
                "h1_request" => {
                    let line = e.fields["line"].as_str().unwrap_or_default();
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    paths.push_back(path);
                }
                "h1_response" => {
                    let status = e.fields["status"].as_u64().unwrap_or(0) as u16;
                    if status >= 200 {
                        *current = Some(Pending {
                            path: paths.pop_front().unwrap_or_default(),
                            status,
                            alt_svc: header(e, "alt-svc").or_else(|| header(e, "Alt-Svc")),
                            ..Default::default()
                        });
                    }
                }
                "h1_body" => {
                    if let Some(mut p) = current.take() {
                        p.body = e.fields["body_bytes"].as_u64().unwrap_or(0);
                        done.push(p);
                    }
                }
                "error" if e.fields.get("looks_like_h2") == Some(&Value::Bool(true)) => {
                    self.summary
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .answered_h2 = true;
                }
                _ => {}
            }
        }
        for e in events {
            let end = e.kind == "h1_body";
            self.tracer.emit(e);
            if end && !done.is_empty() {
                let p = done.remove(0);
                self.respond("h1", None, p);
            }
        }
    }

    fn h2_bytes(&mut self, dir: hxlab_wire::Dir, data: &[u8]) {
        let Conn::H2 {
            send,
            recv,
            streams,
        } = &mut self.conn
        else {
            return;
        };
        let events = match dir {
            hxlab_wire::Dir::Send => send.feed(data),
            hxlab_wire::Dir::Recv => recv.feed(data),
        };
        let answered_http1 = recv.answered_http1;
        let finished: Vec<Option<(u64, Pending)>> =
            events.iter().map(|e| track_h2(e, dir, streams)).collect();
        let proto = {
            let mut s = self.summary();
            s.answered_http1 |= answered_http1;
            if s.protocol == "h2c" {
                "h2c"
            } else {
                "h2"
            }
        };
        for (e, finished) in events.into_iter().zip(finished) {
            self.tracer.emit(e);
            if let Some((id, p)) = finished {
                self.respond(proto, Some(id), p);
            }
        }
    }

    fn h3_bytes(&mut self, dir: hxlab_wire::Dir, id: u64, data: &[u8], fin: bool) {
        let Conn::H3 {
            wires,
            streams,
            qpack,
        } = &mut self.conn
        else {
            return;
        };
        let send = dir == hxlab_wire::Dir::Send;
        let wire = wires.entry((id, send)).or_insert_with(|| {
            let d = if send { Dir::Send } else { Dir::Recv };
            H3StreamWire::new(d, id, id.is_multiple_of(4))
        });
        let mut events = wire.feed_with(data, qpack);
        if fin {
            events.push(wire.finish());
        }
        let mut finished = None;
        for e in &events {
            track_h3(e, send, id, streams);
        }
        if fin && !send && id.is_multiple_of(4) {
            finished = streams.remove(&id);
        }
        self.emit_all(events);
        if let Some(p) = finished {
            self.respond("h3", Some(id), p);
        }
    }
}

/// Follows one HTTP/2 frame event; returns a response it completed.
fn track_h2(
    e: &Event,
    dir: hxlab_wire::Dir,
    streams: &mut BTreeMap<u64, Pending>,
) -> Option<(u64, Pending)> {
    if e.kind != "frame" {
        return None;
    }
    let id = e.fields.get("stream_id")?.as_u64()?;
    let ty = e.fields.get("type")?.as_str()?;
    let flags = e.fields.get("flags").and_then(Value::as_u64).unwrap_or(0);
    let end = flags & 1 != 0 && matches!(ty, "HEADERS" | "DATA");
    match (dir, ty) {
        (hxlab_wire::Dir::Send, "HEADERS") => {
            streams.entry(id).or_default().path = header(e, ":path").unwrap_or_default();
            return None;
        }
        (hxlab_wire::Dir::Recv, "PUSH_PROMISE") => {
            let promised = e.fields.get("promised_stream_id")?.as_u64()?;
            let p = streams.entry(promised).or_default();
            p.pushed = true;
            p.path = header(e, ":path").unwrap_or_default();
            return None;
        }
        (hxlab_wire::Dir::Recv, "HEADERS") => {
            let p = streams.entry(id).or_default();
            if let Some(s) = header(e, ":status").and_then(|s| s.parse::<u16>().ok()) {
                if s >= 200 || p.status == 0 {
                    p.status = s;
                }
            }
            if p.alt_svc.is_none() {
                p.alt_svc = header(e, "alt-svc");
            }
        }
        (hxlab_wire::Dir::Recv, "DATA") => {
            let len = e.fields.get("length").and_then(Value::as_u64).unwrap_or(0);
            streams.entry(id).or_default().body += len;
        }
        (hxlab_wire::Dir::Recv, "RST_STREAM") => {
            streams.remove(&id);
            return None;
        }
        _ => return None,
    }
    if end && dir == hxlab_wire::Dir::Recv {
        return streams.remove(&id).map(|p| (id, p));
    }
    None
}

/// Follows one HTTP/3 event on a request stream.
fn track_h3(e: &Event, send: bool, id: u64, streams: &mut BTreeMap<u64, Pending>) {
    if e.kind != "frame" || !id.is_multiple_of(4) {
        return;
    }
    let ty = e.fields.get("type").and_then(Value::as_str).unwrap_or("");
    let p = streams.entry(id).or_default();
    match (send, ty) {
        (true, "HEADERS") => p.path = header(e, ":path").unwrap_or_default(),
        (false, "HEADERS") => {
            if let Some(s) = header(e, ":status").and_then(|s| s.parse::<u16>().ok()) {
                if s >= 200 || p.status == 0 {
                    p.status = s;
                }
            }
            if p.alt_svc.is_none() {
                p.alt_svc = header(e, "alt-svc");
            }
        }
        (false, "DATA") => p.body += e.fields.get("length").and_then(Value::as_u64).unwrap_or(0),
        _ => {}
    }
}

/// The `response` event.
pub fn response_event(r: &ResponseSummary, proto: &str) -> Event {
    let sid = r
        .stream_id
        .map(|s| format!(" on stream {s}"))
        .unwrap_or_default();
    let what = if r.pushed {
        "pushed response"
    } else {
        "response"
    };
    Event::new(
        "response",
        format!(
            "{what}{sid}: {} {} — status {}, {} body bytes",
            proto, r.path, r.status, r.body_bytes
        ),
    )
    .field("proto", proto)
    .field("path", r.path.clone())
    .field(
        "stream_id",
        r.stream_id.map(Value::from).unwrap_or(Value::Null),
    )
    .field("status", r.status)
    .field("body_bytes", r.body_bytes)
    .field("pushed", r.pushed)
}

impl hxlab_wire::Tap for TraceTap {
    fn connected(&mut self, facts: &TransportFacts) {
        let n = {
            let mut s = self.summary();
            s.connections += 1;
            s.connections
        };
        if n == 2 {
            self.tracer.emit(info(
                "second connection, with the first one's TLS session cache (--resume)",
            ));
        }
        if facts.transport == "QUIC" {
            self.quic_connected(facts);
        } else {
            self.tcp_connected(facts);
        }
    }

    fn bytes(&mut self, dir: hxlab_wire::Dir, channel: Channel, data: &[u8]) {
        match (&self.conn, channel) {
            (Conn::H1 { .. }, Channel::Conn) => self.h1_bytes(dir, data),
            (Conn::H2 { .. }, Channel::Conn) => self.h2_bytes(dir, data),
            (Conn::H3 { .. }, Channel::Quic(id)) => self.h3_bytes(dir, id, data, false),
            _ => {}
        }
    }

    fn stream_end(&mut self, dir: hxlab_wire::Dir, channel: Channel) {
        if let Channel::Quic(id) = channel {
            self.h3_bytes(dir, id, &[], true);
        }
    }

    fn note(&mut self, text: &str) {
        self.tracer.emit(info(text));
    }

    fn quic_closed(&mut self, s: &QuicStats) {
        let rtt_ms = s.rtt_us as f64 / 1e3;
        self.tracer.emit(
            Event::new(
                "quic_stats",
                format!(
                    "QUIC: {} datagrams sent, {} received, {} packets lost, RTT {rtt_ms:.3} ms, cwnd {} bytes",
                    s.datagrams_sent, s.datagrams_received, s.packets_lost, s.cwnd
                ),
            )
            .field("datagrams_sent", s.datagrams_sent)
            .field("datagrams_received", s.datagrams_received)
            .field("packets_lost", s.packets_lost)
            .field("rtt_ms", rtt_ms),
        );
    }

    fn closed(&mut self) {
        if let Conn::H1 { wire, current, .. } = &mut self.conn {
            let events = wire.closed();
            let done = if events.is_empty() {
                None
            } else {
                current.take().map(|mut p| {
                    p.body = events[0].fields["body_bytes"].as_u64().unwrap_or(0);
                    p
                })
            };
            self.emit_all(events);
            if let Some(p) = done {
                self.respond("h1", None, p);
            }
        }
        if !matches!(self.conn, Conn::None) {
            self.tracer.emit(info("connection closed"));
        }
        self.conn = Conn::None;
    }
}
