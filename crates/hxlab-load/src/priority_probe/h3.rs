//! The HTTP/3 probe client on quinn: our control stream (this crate's SETTINGS), one task per
//! request stream that parses the response with this crate's [`ResponseParser`] and reports
//! each read's DATA payload bytes with the time it was read, in the order the reads happened.
//! PRIORITY_UPDATE goes on our control stream.

use super::judge::{Arrival, ArrivalLog};
use super::{Dialer, ProbeConn, ProbeError, ProbeTarget, Resource, Signals};
use crate::h3::{H3Error, ResponseParser};
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

fn h3_error(e: H3Error) -> ProbeError {
    match e {
        H3Error::Connection { message, .. } | H3Error::Stream { message, .. } => {
            ProbeError::Protocol(message)
        }
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
            .write_all(&crate::h3::control_stream_bytes())
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
    let mut parser = ResponseParser::default();
    let mut dec = qpack::Decoder::new();
    let mut checked = false;
    loop {
        let chunk = recv.read_chunk(CHUNK, true).await;
        let at = started.elapsed();
        let event = match chunk {
            Ok(Some(c)) => {
                let before = parser.body;
                if let Err(e) = parser.feed(&mut dec, &c.bytes, Instant::now()) {
                    let _ = tx.send(Event::Failed(h3_error(e)));
                    return;
                }
                if parser.has_response() && !checked {
                    checked = true;
                    if !(200..300).contains(&parser.status) {
                        let status = parser.status;
                        let _ = tx.send(Event::Failed(ProbeError::Status { path, status }));
                        return;
                    }
                }
                if parser.body == before {
                    continue;
                }
                Arrival {
                    at,
                    stream,
                    bytes: parser.body - before,
                    fin: false,
                }
            }
            Ok(None) => {
                if let Err(e) = parser.finish() {
                    let _ = tx.send(Event::Failed(h3_error(e)));
                    return;
                }
                let _ = tx.send(Event::Data(Arrival {
                    at,
                    stream,
                    bytes: 0,
                    fin: true,
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
        let mut fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", self.target.authority.as_bytes()),
            (b":path", path.as_bytes()),
            (b"user-agent", b"hxlab-probe"),
        ];
        if let Some(v) = signals.priority {
            fields.push((b"priority", v.as_bytes()));
        }
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
        hxlab_wire::h3::write_priority_update(&mut out, stream, value.as_bytes());
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
