//! The HTTP/2 probe client: TLS with ALPN h2 (or h2c with prior knowledge) through this
//! crate's connect, frames and HPACK from hxlab-wire. [`H2Reader`] is the sans-IO part: it
//! takes the bytes as they come and logs each DATA frame's payload as one arrival;
//! [`H2Conn`] writes requests and PRIORITY_UPDATEs and reads into it.

use super::judge::{Arrival, ArrivalLog};
use super::{Dialer, ProbeConn, ProbeError, ProbeTarget, Resource, Signals};
use crate::hpack::{Decoder, Encoder};
use crate::net::Stream;
use hxlab_wire::h2::control::{self, GoAway, Ping, Priority, RstStream, Setting, Settings};
use hxlab_wire::h2::flag::{END_HEADERS, END_STREAM, PRIORITY as PRIORITY_FLAG};
use hxlab_wire::h2::frame::{
    CONTINUATION, DATA, GOAWAY, HEADERS, PING, PUSH_PROMISE, RST_STREAM, SETTINGS,
};
use hxlab_wire::h2::{code_name, setting, FrameHead, DEFAULT_MAX_FRAME, FRAME_HEAD, PREFACE};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Our receive windows: flow control never paces the probe (as `hxlab load`'s).
const WINDOW: u32 = (1 << 30) - 1;
/// Largest header block buffered across CONTINUATION frames.
const MAX_BLOCK: usize = crate::h2::MAX_HEADER_LIST as usize;

/// `h2` over TLS, `h2c` in the clear.
pub(super) fn name(target: &ProbeTarget) -> &'static str {
    if target.https {
        "h2"
    } else {
        "h2c"
    }
}

/// The sans-IO reading side of one connection.
#[derive(Debug)]
pub(crate) struct H2Reader {
    buf: Vec<u8>,
    dec: Decoder,
    /// A header block being assembled: stream, END_STREAM of its HEADERS, bytes.
    block: Option<(u32, bool, Vec<u8>)>,
    /// Frames to send back (SETTINGS and PING acknowledgements).
    pub(crate) out: Vec<u8>,
    /// The peer's SETTINGS_HEADER_TABLE_SIZE, once it said one.
    pub(crate) peer_table: Option<u32>,
    /// `(stream, status)` of every response head so far.
    pub(crate) statuses: Vec<(u32, u16)>,
    /// The first Alt-Svc header seen.
    pub(crate) alt_svc: Option<String>,
}

fn protocol(what: impl std::fmt::Display) -> ProbeError {
    ProbeError::Protocol(format!("h2: {what}"))
}

impl H2Reader {
    pub(crate) fn new() -> H2Reader {
        H2Reader {
            buf: Vec::with_capacity(2 * (DEFAULT_MAX_FRAME + FRAME_HEAD)),
            dec: Decoder::new(4096),
            block: None,
            out: Vec::new(),
            peer_table: None,
            statuses: Vec::new(),
            alt_svc: None,
        }
    }

    /// Takes `input` (any split of the stream), logging whole DATA frames at `at`.
    pub(crate) fn feed(
        &mut self,
        input: &[u8],
        at: Duration,
        log: &mut ArrivalLog,
    ) -> Result<(), ProbeError> {
        self.buf.extend_from_slice(input);
        let mut used = 0;
        while let Some(h) = FrameHead::parse(&self.buf[used..]) {
            if h.len > DEFAULT_MAX_FRAME {
                return Err(protocol(format!(
                    "a frame of {} bytes, above the 16384 we accept",
                    h.len
                )));
            }
            let end = used + FRAME_HEAD + h.len;
            if self.buf.len() < end {
                break;
            }
            let payload = self.buf[used + FRAME_HEAD..end].to_vec();
            used = end;
            self.frame(&h, &payload, at, log)?;
        }
        self.buf.drain(..used);
        Ok(())
    }

    fn frame(
        &mut self,
        h: &FrameHead,
        payload: &[u8],
        at: Duration,
        log: &mut ArrivalLog,
    ) -> Result<(), ProbeError> {
        if self.block.is_some() && h.kind != CONTINUATION {
            return Err(protocol("a frame inside a header block"));
        }
        match h.kind {
            DATA => {
                let body = hxlab_wire::h2::strip_padding(h.flags, payload)
                    .map_err(|e| protocol(format!("{e:?}")))?;
                let stream = u64::from(h.stream_id);
                let kept = log.push(Arrival {
                    at,
                    stream,
                    bytes: body.len() as u64,
                    fin: h.flags & END_STREAM != 0,
                    reach: log.bytes(stream) + body.len() as u64,
                });
                if !kept {
                    return Err(protocol("too many frames for one test"));
                }
            }
            HEADERS => {
                let mut p = hxlab_wire::h2::strip_padding(h.flags, payload)
                    .map_err(|e| protocol(format!("{e:?}")))?;
                if h.flags & PRIORITY_FLAG != 0 {
                    p = p.get(5..).ok_or_else(|| protocol("HEADERS too short"))?;
                }
                self.block = Some((h.stream_id, h.flags & END_STREAM != 0, p.to_vec()));
                if h.flags & END_HEADERS != 0 {
                    self.end_block(at, log)?;
                }
            }
            CONTINUATION => {
                let Some((stream, _, block)) = &mut self.block else {
                    return Err(protocol("CONTINUATION without HEADERS"));
                };
                if *stream != h.stream_id || block.len() + payload.len() > MAX_BLOCK {
                    return Err(protocol("a CONTINUATION that does not fit"));
                }
                block.extend_from_slice(payload);
                if h.flags & END_HEADERS != 0 {
                    self.end_block(at, log)?;
                }
            }
            SETTINGS => self.settings(h, payload)?,
            PING => {
                let ping = Ping::parse(h, payload).map_err(|e| protocol(e.reason()))?;
                if !ping.ack {
                    control::write_ping_ack(&mut self.out, &ping.data);
                }
            }
            RST_STREAM => {
                let rst = RstStream::parse(h, payload).map_err(|e| protocol(e.reason()))?;
                return Err(protocol(format!(
                    "the server reset stream {} ({})",
                    h.stream_id,
                    code_name(rst.code)
                )));
            }
            GOAWAY => {
                let g = GoAway::parse(h, payload).map_err(|e| protocol(e.reason()))?;
                return Err(protocol(format!(
                    "the server sent GOAWAY ({}: {})",
                    code_name(g.code),
                    String::from_utf8_lossy(g.debug)
                )));
            }
            PUSH_PROMISE => return Err(protocol("PUSH_PROMISE with push disabled")),
            // WINDOW_UPDATE (we send no bodies), PRIORITY, extensions: nothing to do.
            _ => {}
        }
        Ok(())
    }

    fn settings(&mut self, h: &FrameHead, payload: &[u8]) -> Result<(), ProbeError> {
        let s = Settings::parse(h, payload).map_err(|e| protocol(e.reason()))?;
        if s.ack {
            return Ok(());
        }
        for setting in s.iter() {
            if let Setting::HeaderTableSize(v) = setting.map_err(|e| protocol(e.reason()))? {
                self.peer_table = Some(v);
            }
        }
        control::write_settings_ack(&mut self.out);
        Ok(())
    }

    fn end_block(&mut self, at: Duration, log: &mut ArrivalLog) -> Result<(), ProbeError> {
        let Some((stream, end_stream, block)) = self.block.take() else {
            return Ok(());
        };
        let mut status = None;
        let mut alt_svc = None;
        self.dec
            .decode_fields(&block, |f| match f.name {
                b":status" => status = crate::hpack::status_of(f.value),
                b"alt-svc" => alt_svc = Some(String::from_utf8_lossy(f.value).into_owned()),
                _ => {}
            })
            .map_err(|e| protocol(format!("HPACK: {}", e.0)))?;
        if self.alt_svc.is_none() {
            self.alt_svc = alt_svc;
        }
        // Interim (1xx) heads and trailers have no place in the log; a final head does.
        if let Some(s) = status.filter(|s| *s >= 200) {
            self.statuses.push((stream, s));
        }
        if end_stream {
            let stream = u64::from(stream);
            log.push(Arrival {
                at,
                stream,
                bytes: 0,
                fin: true,
                reach: log.bytes(stream),
            });
        }
        Ok(())
    }
}

/// Opens probe connections over HTTP/2.
pub(crate) struct H2Dialer {
    target: ProbeTarget,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls::pki_types::ServerName<'static>,
    )>,
    /// The first Alt-Svc header any of its connections saw.
    alt_svc: Rc<RefCell<Option<String>>>,
}

impl H2Dialer {
    pub(crate) fn new(target: &ProbeTarget) -> Result<H2Dialer, ProbeError> {
        let tls = if target.https {
            let cfg = crate::LoadConfig {
                insecure: target.insecure,
                cacert: target.cacert.clone(),
                ..Default::default()
            };
            let config = crate::tls::tcp_config(&cfg, &[b"h2"])
                .map_err(|e| ProbeError::Connect(e.to_string()))?;
            let name = crate::tls::server_name(&target.server_name)
                .map_err(|e| ProbeError::Connect(e.to_string()))?;
            Some((tokio_rustls::TlsConnector::from(config), name))
        } else {
            None
        };
        Ok(H2Dialer {
            target: target.clone(),
            tls,
            alt_svc: Rc::default(),
        })
    }

    /// The Alt-Svc header the server sent, if any.
    pub(crate) fn alt_svc(&self) -> Option<String> {
        self.alt_svc.borrow().clone()
    }
}

impl Dialer for H2Dialer {
    type Conn = H2Conn;

    async fn open(&self, rfc9218: bool) -> Result<H2Conn, ProbeError> {
        let t = &self.target;
        let (stream, info) = crate::net::connect(
            t.addr,
            self.tls.as_ref().map(|(c, n)| (c, n)),
            None,
            false,
            t.connect_timeout,
        )
        .await
        .map_err(|e| ProbeError::Connect(e.message))?;
        if self.tls.is_some() && info.alpn.as_deref() != Some(b"h2") {
            return Err(ProbeError::Connect(format!(
                "{} did not choose h2 when offered it (ALPN {})",
                t.addr,
                info.alpn
                    .as_deref()
                    .map_or("none".into(), String::from_utf8_lossy)
            )));
        }
        let mut out = PREFACE.to_vec();
        let mut settings = vec![
            (setting::ENABLE_PUSH, 0),
            (setting::INITIAL_WINDOW_SIZE, WINDOW),
        ];
        if rfc9218 {
            settings.push((setting::NO_RFC7540_PRIORITIES, 1));
        }
        control::write_settings(&mut out, &settings);
        control::write_window_update(&mut out, 0, WINDOW - 65_535);
        Ok(H2Conn {
            stream,
            started: Instant::now(),
            out,
            reader: H2Reader::new(),
            enc: Encoder::new(),
            next_id: 1,
            paths: Vec::new(),
            log: ArrivalLog::default(),
            target: t.clone(),
            alt_svc: self.alt_svc.clone(),
        })
    }

    fn protocol(&self) -> &'static str {
        name(&self.target)
    }

    fn addr(&self) -> SocketAddr {
        self.target.addr
    }
}

/// One HTTP/2 probe connection.
pub(crate) struct H2Conn {
    stream: Stream,
    started: Instant,
    out: Vec<u8>,
    reader: H2Reader,
    enc: Encoder,
    next_id: u32,
    /// (stream, path) of every request.
    paths: Vec<(u32, String)>,
    log: ArrivalLog,
    target: ProbeTarget,
    alt_svc: Rc<RefCell<Option<String>>>,
}

impl H2Conn {
    async fn flush(&mut self, limit: Instant) -> Result<(), ProbeError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let write = self.stream.write_all(&self.out);
        match tokio::time::timeout_at(limit.into(), write).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(protocol(crate::net::io_phrase(&e))),
            Err(_) => return Err(ProbeError::Timeout("h2: a write did not go out".into())),
        }
        self.out.clear();
        Ok(())
    }

    /// The first response head that is not a success, as an error.
    fn check_statuses(&self) -> Result<(), ProbeError> {
        for &(stream, status) in &self.reader.statuses {
            if !(200..300).contains(&status) {
                let path = self
                    .paths
                    .iter()
                    .find(|(s, _)| *s == stream)
                    .map_or(String::new(), |(_, p)| p.clone());
                return Err(ProbeError::Status { path, status });
            }
        }
        Ok(())
    }
}

impl ProbeConn for H2Conn {
    async fn request(&mut self, resource: Resource, signals: &Signals) -> Result<u64, ProbeError> {
        if let Some(limit) = self.reader.peer_table.take() {
            self.enc.set_peer_limit(limit);
        }
        let id = self.next_id;
        self.next_id += 2;
        let path = self.target.path(resource).to_string();
        let fields = super::request_fields(&self.target, &path, signals);
        let mut payload = Vec::new();
        let mut flags = END_STREAM | END_HEADERS;
        if let Some((exclusive, dependency, weight)) = signals.rfc7540 {
            flags |= PRIORITY_FLAG;
            Priority {
                dependency,
                exclusive,
                weight,
            }
            .write(&mut payload);
        }
        self.enc.encode(fields, &mut payload);
        if payload.len() > DEFAULT_MAX_FRAME {
            return Err(protocol("a request head larger than one frame"));
        }
        hxlab_wire::h2::write_head(&mut self.out, payload.len(), HEADERS, flags, id);
        self.out.extend_from_slice(&payload);
        self.paths.push((id, path));
        Ok(u64::from(id))
    }

    async fn priority_update(&mut self, stream: u64, value: &str) -> Result<(), ProbeError> {
        let id = u32::try_from(stream).map_err(|_| protocol("stream id"))?;
        hxlab_wire::priority::write_h2_update(&mut self.out, id, value.as_bytes());
        self.flush(Instant::now() + self.target.connect_timeout)
            .await
    }

    async fn read_until(
        &mut self,
        limit: Instant,
        done: impl Fn(&ArrivalLog) -> bool,
    ) -> Result<bool, ProbeError> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            self.out.append(&mut self.reader.out);
            self.flush(limit).await?;
            self.check_statuses()?;
            if done(&self.log) {
                return Ok(true);
            }
            let read = self.stream.read(&mut buf);
            let n = match tokio::time::timeout_at(limit.into(), read).await {
                Err(_) => return Ok(false),
                Ok(Err(e)) => return Err(protocol(crate::net::io_phrase(&e))),
                Ok(Ok(0)) => return Err(protocol("the server closed the connection")),
                Ok(Ok(n)) => n,
            };
            let at = self.started.elapsed();
            self.reader.feed(&buf[..n], at, &mut self.log)?;
            if let Some(a) = self.reader.alt_svc.take() {
                self.alt_svc.borrow_mut().get_or_insert(a);
            }
        }
    }

    fn log(&self) -> &ArrivalLog {
        &self.log
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_wire::h2::flag::PADDED;
    use hxlab_wire::h2::write_head;

    fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        write_head(out, payload.len(), kind, flags, stream);
        out.extend_from_slice(payload);
    }

    /// A server's bytes: SETTINGS, a PING, a head for stream 1 (with Alt-Svc), padded DATA,
    /// a head for stream 3 split over CONTINUATION, its DATA ending the stream.
    fn server_bytes() -> Vec<u8> {
        let mut out = Vec::new();
        control::write_settings(&mut out, &[(setting::HEADER_TABLE_SIZE, 0)]);
        frame(&mut out, PING, 0, 0, &[7; 8]);
        let mut enc = Encoder::new();
        let mut head = Vec::new();
        enc.encode(
            [
                (&b":status"[..], &b"200"[..]),
                (b"alt-svc", b"h3=\":8443\""),
            ],
            &mut head,
        );
        frame(&mut out, HEADERS, END_HEADERS, 1, &head);
        frame(&mut out, DATA, PADDED, 1, b"\x02abcdeXY");
        let mut head = Vec::new();
        enc.encode([(&b":status"[..], &b"200"[..])], &mut head);
        let (a, b) = head.split_at(1);
        frame(&mut out, HEADERS, 0, 3, a);
        frame(&mut out, CONTINUATION, END_HEADERS, 3, b);
        frame(&mut out, DATA, END_STREAM, 3, &[0; 100]);
        out
    }

    #[test]
    fn frames_are_logged_in_any_split() {
        let bytes = server_bytes();
        let mut whole = None;
        for at in 0..=bytes.len() {
            let mut r = H2Reader::new();
            let mut log = ArrivalLog::default();
            r.feed(&bytes[..at], Duration::from_millis(1), &mut log)
                .unwrap();
            r.feed(&bytes[at..], Duration::from_millis(2), &mut log)
                .unwrap();
            let got: Vec<_> = log
                .arrivals
                .iter()
                .map(|a| (a.stream, a.bytes, a.fin))
                .collect();
            assert_eq!(got, vec![(1, 5, false), (3, 100, true)], "split at {at}");
            assert_eq!(r.statuses, vec![(1, 200), (3, 200)]);
            assert_eq!(r.alt_svc.as_deref(), Some("h3=\":8443\""));
            assert_eq!(r.peer_table, Some(0));
            // A SETTINGS ACK and the PING's answer.
            let mut acks = Vec::new();
            control::write_settings_ack(&mut acks);
            control::write_ping_ack(&mut acks, &[7; 8]);
            assert_eq!(r.out, acks);
            whole.get_or_insert(log.total());
        }
        assert_eq!(whole, Some(105));
    }

    #[test]
    fn resets_goaway_push_and_oversized_frames_end_the_test() {
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                {
                    let mut o = Vec::new();
                    frame(&mut o, RST_STREAM, 0, 1, &8u32.to_be_bytes());
                    o
                },
                "reset stream 1 (CANCEL)",
            ),
            (
                {
                    let mut o = Vec::new();
                    control::write_goaway(&mut o, 0, 0xb, b"calm");
                    o
                },
                "GOAWAY (ENHANCE_YOUR_CALM: calm)",
            ),
            (
                {
                    let mut o = Vec::new();
                    frame(&mut o, PUSH_PROMISE, END_HEADERS, 1, &[0, 0, 0, 2]);
                    o
                },
                "PUSH_PROMISE",
            ),
            (
                {
                    let mut o = Vec::new();
                    write_head(&mut o, 1 << 20, DATA, 0, 1);
                    o
                },
                "above the 16384",
            ),
        ];
        for (bytes, want) in cases {
            let mut r = H2Reader::new();
            let err = r
                .feed(&bytes, Duration::ZERO, &mut ArrivalLog::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
    }
}
