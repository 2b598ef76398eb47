//! Opening a QUIC connection: handshake limit, 0-RTT, resumption detection.

use super::*;

/// The worker's QUIC driver ([`Driver`]) on a new UDP socket: a socket2 UDP socket as
/// quinn's `Endpoint::client` makes it (dual-stack on IPv6), with the origin's larger receive
/// buffer ([`hxlab_quic::set_quic_recv_buffer`]), driven through quinn-udp (GSO, GRO).
/// Nothing of it is seen on the wire. Must be called on the worker's `LocalSet` (the driver
/// task starts there).
pub fn client_endpoint(bind: SocketAddr) -> std::io::Result<Driver> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(bind), Type::DGRAM, Some(Protocol::UDP))?;
    if bind.is_ipv6() {
        let _ = socket.set_only_v6(false);
    }
    // Best effort: a smaller buffer only means more drops under load.
    hxlab_quic::set_quic_recv_buffer(std::os::fd::AsFd::as_fd(&socket));
    socket.bind(&bind.into())?;
    socket.set_nonblocking(true)?;
    Driver::new(socket.into())
}

/// What opening a QUIC connection needs.
#[derive(Clone)]
pub struct QuicDialer {
    /// The worker's QUIC driver (one UDP socket per worker).
    pub driver: Driver,
    /// Client configs (TLS 1.3, ALPN h3, congestion controller; one per connection when
    /// resumption is on, to tell resumed handshakes).
    pub configs: crate::tls::QuicConfigs,
    /// Server address.
    pub addr: SocketAddr,
    /// TLS server name.
    pub server_name: String,
    /// Handshake limit.
    pub limit: Duration,
    /// Try 0-RTT when a ticket is available.
    pub zero_rtt: bool,
    /// The worker's number (qlog files are named by worker and client, as h2load's).
    pub worker: usize,
}

/// An established QUIC connection and what its setup measured.
pub struct QuicConnection {
    /// The connection.
    pub conn: QuicConn,
    /// Handshake time (to 1-RTT keys, or until 0-RTT could start).
    pub handshake: Duration,
    /// 0-RTT was used (acceptance is only known later: [`QuicConn::zero_rtt_accepted`]).
    pub zero_rtt: bool,
    /// With resumption on: whether the handshake verified a certificate.
    pub cert_check: Option<crate::tls::CertCheck>,
    /// With `--qlog`: where the session's HTTP/3 events go (quinn writes the transport's).
    pub qlog: Option<crate::tls::QlogEvents>,
}

impl QuicConnection {
    /// The completed handshake resumed a TLS session: it verified no certificate (a full
    /// TLS 1.3 handshake always does). False when resumption is off.
    pub fn resumed(&self) -> bool {
        self.cert_check.as_ref().is_some_and(|c| !c.verified())
    }
}

fn quic_error(addr: SocketAddr, e: &quinn::ConnectionError, limit: Duration) -> ConnectError {
    let (kind, why) = match e {
        quinn::ConnectionError::TimedOut => (
            ErrorKind::Timeout,
            format!("no QUIC handshake within {limit:?} (nothing listening on UDP?)"),
        ),
        quinn::ConnectionError::TransportError(t) => (ErrorKind::Tls, t.to_string()),
        quinn::ConnectionError::ConnectionClosed(c) => (ErrorKind::Tls, c.to_string()),
        quinn::ConnectionError::VersionMismatch => (ErrorKind::Protocol, e.to_string()),
        other => (ErrorKind::Connect, other.to_string()),
    };
    ConnectError {
        kind,
        message: format!("QUIC handshake with {addr}: {why}"),
    }
}

impl QuicDialer {
    /// Opens one connection (0-RTT when asked and possible), the `connection`-th (from 0)
    /// of the worker's client `client`. Its qlog, with `--qlog`, is h2load's
    /// `BASE.WORKER.CLIENT.sqlog`, and `BASE.WORKER.CLIENT.K.sqlog` for the client's K-th
    /// later connection (where h2load would overwrite the first).
    pub async fn dial(&self, client: u32, connection: u32) -> Result<QuicConnection, ConnectError> {
        let t0 = Instant::now();
        let name = match connection {
            0 => format!("{}.{client}", self.worker),
            k => format!("{}.{client}.{k}", self.worker),
        };
        let (config, cert_check, mut qlog) = self.configs.for_connection_logged(&name);
        let conn = self
            .driver
            .connect(config, self.addr, &self.server_name)
            .map_err(|e| ConnectError {
                kind: ErrorKind::Connect,
                message: format!("QUIC connect to {}: {e}", self.addr),
            })?;
        // 0-RTT keys exist from the start when the ticket allows early data (quinn's
        // `into_0rtt` asks the same).
        if self.zero_rtt && conn.state().quic.q.has_0rtt() {
            return Ok(QuicConnection {
                conn,
                handshake: t0.elapsed(),
                zero_rtt: true,
                cert_check,
                qlog: qlog.take(),
            });
        }
        match tokio::time::timeout(self.limit, conn.established()).await {
            // Dropping `conn` closes the connection.
            Err(_) => Err(ConnectError {
                kind: ErrorKind::Timeout,
                message: format!(
                    "QUIC handshake with {}: timed out after {:?}",
                    self.addr, self.limit
                ),
            }),
            Ok(Err(e)) => Err(quic_error(self.addr, &e, self.limit)),
            Ok(Ok(())) => Ok(QuicConnection {
                conn,
                handshake: t0.elapsed(),
                zero_rtt: false,
                cert_check,
                qlog: qlog.take(),
            }),
        }
    }
}
