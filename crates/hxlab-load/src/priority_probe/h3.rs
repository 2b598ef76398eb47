//! The HTTP/3 probe client on quinn: our control stream (this crate's SETTINGS), one task per
//! request stream that reads the response unordered (as its packets arrive: an ordered read
//! would hold a stream's bytes behind one lost packet and hand them over all at once, so a
//! log of ordered reads shows a loss as a burst of that stream) and reports each read's body
//! bytes with the time it was read, in the order the reads happened ([`UnorderedBody`]).
//! PRIORITY_UPDATE goes on our control stream.

use super::judge::{Arrival, ArrivalLog};
use super::{Dialer, ProbeConn, ProbeError, ProbeTarget, Resource, Signals};
use crate::qpack;
use quinn::VarInt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Most bytes taken from a stream per read.
const CHUNK: usize = 64 * 1024;

/// What a request stream's task reports.
#[derive(Debug)]
enum Event {
    /// Body bytes read at `at` (since the connection opened), or the stream's end.
    Data(Arrival),
    /// The response failed (status, reset, protocol).
    Failed(ProbeError),
}

fn protocol(what: impl std::fmt::Display) -> ProbeError {
    ProbeError::Protocol(format!("h3: {what}"))
}

/// Most bytes held while a response head is incomplete, and most separate ranges tracked.
const MAX_EARLY: usize = 256 * 1024;
const MAX_RANGES: usize = 4096;

/// One response stream read unordered: which of each read's bytes are new body bytes (past
/// the response's HEADERS frame; DATA frame heads are counted as body, a few bytes per frame),
/// and the status once the head is whole. Sans-IO, fed `(offset, bytes)` in any order and
/// with repeats.
#[derive(Debug, Default)]
pub(crate) struct UnorderedBody {
    /// Offset ranges received, sorted and merged.
    covered: Vec<(u64, u64)>,
    /// The stream's first bytes, contiguous from 0, until the head is whole.
    prefix: Vec<u8>,
    /// Reads past the prefix that came before the head was whole.
    early: Vec<(u64, Vec<u8>)>,
    early_bytes: usize,
    /// New ranges that came before the head's end was known.
    unplaced: Vec<(u64, u64)>,
    /// Where the head (the first frame, HEADERS) ends.
    head_end: Option<u64>,
    /// The response's status.
    pub(crate) status: Option<u16>,
}

impl UnorderedBody {
    /// The furthest body offset received (gaps before it may still be open).
    pub(crate) fn reach(&self) -> u64 {
        let end = self.covered.last().map_or(0, |r| r.1);
        self.head_end.map_or(0, |h| end.saturating_sub(h))
    }

    /// Takes one read; the body bytes it brought that were not counted before.
    pub(crate) fn take(&mut self, offset: u64, bytes: &[u8]) -> Result<u64, ProbeError> {
        let fresh = self.cover(offset, offset + bytes.len() as u64)?;
        if self.head_end.is_none() {
            self.unplaced.extend(fresh);
            self.grow_prefix(offset, bytes)?;
            let Some(end) = self.head_end else {
                return Ok(0);
            };
            let unplaced = std::mem::take(&mut self.unplaced);
            return Ok(unplaced.iter().map(|&(s, e)| e - s.max(end).min(e)).sum());
        }
        let end = self.head_end.unwrap_or(0);
        Ok(fresh.iter().map(|&(s, e)| e - s.max(end).min(e)).sum())
    }

    /// Marks `[s, e)` received; the parts that were not.
    fn cover(&mut self, s: u64, e: u64) -> Result<Vec<(u64, u64)>, ProbeError> {
        let mut fresh = Vec::new();
        let mut at = s;
        for &(cs, ce) in &self.covered {
            if ce <= at || cs >= e {
                continue;
            }
            if cs > at {
                fresh.push((at, cs));
            }
            at = at.max(ce);
        }
        if at < e {
            fresh.push((at, e));
        }
        self.covered.push((s, e));
        self.covered.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.covered.len());
        for &(cs, ce) in &self.covered {
            match merged.last_mut() {
                Some(last) if cs <= last.1 => last.1 = last.1.max(ce),
                _ => merged.push((cs, ce)),
            }
        }
        self.covered = merged;
        if self.covered.len() > MAX_RANGES {
            return Err(protocol("a response stream with too many gaps"));
        }
        Ok(fresh)
    }

    /// Adds what `offset..` brings to the prefix (and any early read that now joins it), and
    /// decodes the head once it is whole.
    fn grow_prefix(&mut self, offset: u64, bytes: &[u8]) -> Result<(), ProbeError> {
        self.early_bytes += bytes.len();
        if self.early_bytes > MAX_EARLY {
            return Err(protocol("no whole response head in the first 256 KiB"));
        }
        self.early.push((offset, bytes.to_vec()));
        loop {
            let have = self.prefix.len() as u64;
            let Some(i) = self
                .early
                .iter()
                .position(|(o, b)| *o <= have && o + b.len() as u64 > have)
            else {
                break;
            };
            let (o, b) = self.early.swap_remove(i);
            self.prefix.extend_from_slice(&b[(have - o) as usize..]);
        }
        let Some((kind, len, head)) = hxlab_wire::h3::parse_frame_head(&self.prefix) else {
            return Ok(());
        };
        if kind != hxlab_wire::h3::frame::HEADERS {
            return Err(protocol("a response that does not start with HEADERS"));
        }
        let end = head as u64 + len;
        if (self.prefix.len() as u64) < end {
            return Ok(());
        }
        let max = crate::h2::MAX_HEADER_LIST.into();
        let section = qpack::Decoder::new()
            .decode(&self.prefix[head..end as usize], max)
            .map_err(protocol)?;
        match section.status {
            Some(s) if s >= 200 => self.status = Some(s),
            Some(s) => return Err(protocol(format!("an interim response ({s}); not probed"))),
            None => return Err(protocol("a response head without :status")),
        }
        self.head_end = Some(end);
        self.prefix = Vec::new();
        self.early = Vec::new();
        Ok(())
    }
}

/// Opens probe connections over HTTP/3 from one client endpoint.
pub(crate) struct H3Dialer {
    target: ProbeTarget,
    addr: SocketAddr,
    endpoint: quinn::Endpoint,
    config: quinn::ClientConfig,
}

impl H3Dialer {
    /// A dialer for `addr` (the target's host, on the port Alt-Svc named).
    pub(crate) fn new(target: &ProbeTarget, addr: SocketAddr) -> Result<H3Dialer, ProbeError> {
        let cfg = crate::LoadConfig {
            insecure: target.insecure,
            cacert: target.cacert.clone(),
            connect_timeout: target.connect_timeout,
            ..Default::default()
        };
        let config = crate::tls::quic_config(&cfg)
            .map_err(|e| ProbeError::Connect(e.to_string()))?
            .for_connection()
            .0;
        let bind: SocketAddr = if addr.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let endpoint = quinn::Endpoint::client(bind)
            .map_err(|e| ProbeError::Connect(format!("UDP socket: {e}")))?;
        Ok(H3Dialer {
            target: target.clone(),
            addr,
            endpoint,
            config,
        })
    }

    /// Closes the endpoint, waiting briefly for the last close frames to go out.
    pub(crate) async fn close(&self) {
        self.endpoint.close(VarInt::from_u32(0), b"");
        let _ = tokio::time::timeout(Duration::from_secs(1), self.endpoint.wait_idle()).await;
    }
}

impl Dialer for H3Dialer {
    type Conn = H3Conn;

    async fn open(&self, _rfc9218: bool) -> Result<H3Conn, ProbeError> {
        let fail = |why: String| ProbeError::Connect(format!("QUIC to {}: {why}", self.addr));
        let connecting = self
            .endpoint
            .connect_with(self.config.clone(), self.addr, &self.target.server_name)
            .map_err(|e| fail(e.to_string()))?;
        let conn = match tokio::time::timeout(self.target.connect_timeout, connecting).await {
            Err(_) => return Err(fail("no handshake (nothing listening on UDP?)".into())),
            Ok(Err(e)) => return Err(fail(e.to_string())),
            Ok(Ok(c)) => c,
        };
        let mut control = conn.open_uni().await.map_err(|e| fail(e.to_string()))?;
        control
            .write_all(&crate::h3::control_stream_bytes(
                crate::h3::QpackConfig::STATIC,
            ))
            .await
            .map_err(|e| fail(e.to_string()))?;
        tokio::spawn(drain_server_streams(conn.clone()));
        let (tx, rx) = mpsc::unbounded_channel();
        Ok(H3Conn {
            conn,
            control,
            started: Instant::now(),
            tx,
            rx,
            log: ArrivalLog::default(),
            target: self.target.clone(),
        })
    }

    fn protocol(&self) -> &'static str {
        "h3"
    }

    fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// Reads the server's unidirectional streams (control, QPACK) and drops what they say: the
/// probe needs none of it, but unread streams would hold flow-control credit. Ends with the
/// connection.
async fn drain_server_streams(conn: quinn::Connection) {
    while let Ok(mut s) = conn.accept_uni().await {
        tokio::spawn(async move { while let Ok(Some(_)) = s.read_chunk(CHUNK, true).await {} });
    }
}

/// Reads one response, reporting each read's body bytes.
async fn read_response(
    mut recv: quinn::RecvStream,
    path: String,
    started: Instant,
    tx: mpsc::UnboundedSender<Event>,
) {
    let stream = VarInt::from(recv.id()).into_inner();
    let mut body = UnorderedBody::default();
    let mut checked = false;
    loop {
        let chunk = recv.read_chunk(CHUNK, false).await;
        let at = started.elapsed();
        let event = match chunk {
            Ok(Some(c)) => {
                let bytes = match body.take(c.offset, &c.bytes) {
                    Ok(n) => n,
                    Err(e) => {
                        let _ = tx.send(Event::Failed(e));
                        return;
                    }
                };
                if let (Some(status), false) = (body.status, checked) {
                    checked = true;
                    if !(200..300).contains(&status) {
                        let _ = tx.send(Event::Failed(ProbeError::Status { path, status }));
                        return;
                    }
                }
                if bytes == 0 {
                    continue;
                }
                Arrival {
                    at,
                    stream,
                    bytes,
                    fin: false,
                    reach: body.reach(),
                }
            }
            Ok(None) => {
                if body.status.is_none() {
                    let _ = tx.send(Event::Failed(protocol(format!(
                        "stream {stream} ended without a response head"
                    ))));
                    return;
                }
                let _ = tx.send(Event::Data(Arrival {
                    at,
                    stream,
                    bytes: 0,
                    fin: true,
                    reach: body.reach(),
                }));
                return;
            }
            Err(e) => {
                let _ = tx.send(Event::Failed(protocol(format!("stream {stream}: {e}"))));
                return;
            }
        };
        if tx.send(Event::Data(event)).is_err() {
            return;
        }
    }
}

/// One HTTP/3 probe connection.
pub(crate) struct H3Conn {
    conn: quinn::Connection,
    /// Our control stream: kept open for the connection's life (closing it is an error).
    control: quinn::SendStream,
    started: Instant,
    tx: mpsc::UnboundedSender<Event>,
    rx: mpsc::UnboundedReceiver<Event>,
    log: ArrivalLog,
    target: ProbeTarget,
}

impl Drop for H3Conn {
    fn drop(&mut self) {
        // The stream tasks hold no connection, the uni-stream drain does: close explicitly.
        self.conn.close(VarInt::from_u32(0), b"done");
    }
}

impl ProbeConn for H3Conn {
    async fn request(&mut self, resource: Resource, signals: &Signals) -> Result<u64, ProbeError> {
        let path = self.target.path(resource).to_string();
        let fields = super::request_fields(&self.target, &path, signals);
        let mut block = Vec::new();
        qpack::encode_field_section(fields, &mut block);
        let mut out = Vec::with_capacity(block.len() + 8);
        hxlab_wire::h3::write_frame_head(
            &mut out,
            hxlab_wire::h3::frame::HEADERS,
            block.len() as u64,
        );
        out.extend_from_slice(&block);
        let (mut send, recv) = self.conn.open_bi().await.map_err(protocol)?;
        send.write_all(&out).await.map_err(protocol)?;
        send.finish().map_err(protocol)?;
        let stream = VarInt::from(send.id()).into_inner();
        tokio::spawn(read_response(recv, path, self.started, self.tx.clone()));
        Ok(stream)
    }

    async fn priority_update(&mut self, stream: u64, value: &str) -> Result<(), ProbeError> {
        let mut out = Vec::new();
        hxlab_wire::priority::write_h3_update(&mut out, stream, value.as_bytes());
        self.control.write_all(&out).await.map_err(protocol)
    }

    async fn read_until(
        &mut self,
        limit: Instant,
        done: impl Fn(&ArrivalLog) -> bool,
    ) -> Result<bool, ProbeError> {
        loop {
            if done(&self.log) {
                return Ok(true);
            }
            let event = match tokio::time::timeout_at(limit.into(), self.rx.recv()).await {
                Err(_) => return Ok(false),
                // The sender in `self` keeps the channel open.
                Ok(None) => return Ok(false),
                Ok(Some(e)) => e,
            };
            match event {
                Event::Data(a) => {
                    if !self.log.push(a) {
                        return Err(protocol("too many reads for one test"));
                    }
                }
                Event::Failed(e) => return Err(e),
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

    /// A response: HEADERS (:status 200), then a DATA frame of `body` bytes.
    fn response(body: usize) -> (Vec<u8>, u64) {
        let mut block = Vec::new();
        qpack::encode_field_section([(&b":status"[..], &b"200"[..])], &mut block);
        let mut out = Vec::new();
        hxlab_wire::h3::write_frame_head(
            &mut out,
            hxlab_wire::h3::frame::HEADERS,
            block.len() as u64,
        );
        out.extend_from_slice(&block);
        let head = out.len() as u64;
        hxlab_wire::h3::write_frame_head(&mut out, hxlab_wire::h3::frame::DATA, body as u64);
        out.resize(out.len() + body, 7);
        (out, head)
    }

    #[test]
    fn body_bytes_are_counted_once_in_any_order() {
        let (bytes, head) = response(5000);
        let total = bytes.len() as u64 - head;
        let pieces: Vec<(u64, &[u8])> = bytes
            .chunks(1200)
            .enumerate()
            .map(|(i, c)| (i as u64 * 1200, c))
            .collect();
        let orders: [Vec<usize>; 3] = [
            vec![0, 1, 2, 3, 4],
            vec![2, 4, 0, 3, 1],
            vec![1, 0, 0, 2, 3, 3, 4],
        ];
        for order in orders {
            let mut b = UnorderedBody::default();
            let mut counted = 0;
            for &i in &order {
                let (o, c) = pieces[i];
                counted += b.take(o, c).unwrap();
            }
            assert_eq!(counted, total, "{order:?}");
            assert_eq!(b.reach(), total);
            assert_eq!(b.status, Some(200));
        }
        // A read overlapping what came before counts only its new part.
        let mut b = UnorderedBody::default();
        assert_eq!(b.take(0, &bytes[..1000]).unwrap(), 1000 - head);
        assert_eq!(b.take(500, &bytes[500..1500]).unwrap(), 500);
    }

    #[test]
    fn a_response_without_a_head_first_is_refused() {
        let mut data = Vec::new();
        hxlab_wire::h3::write_frame_head(&mut data, hxlab_wire::h3::frame::DATA, 3);
        data.extend_from_slice(b"abc");
        let err = UnorderedBody::default().take(0, &data).unwrap_err();
        assert!(err.to_string().contains("HEADERS"), "{err}");
        // A head that never completes is not buffered without end.
        let mut b = UnorderedBody::default();
        let far = vec![0u8; 100_000];
        let mut failed = false;
        for i in 0..4 {
            failed |= b.take(10 + i * 100_000, &far).is_err();
        }
        assert!(failed);
    }
}
