//! TCP and TLS connection setup, timed, with the congestion controller applied, and one
//! stream type (plain or TLS) so the drivers need no dynamic dispatch.

use crate::recorder::ErrorKind;
use crate::CongestionControl;
use rustls::pki_types::ServerName;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A failure to set up a connection: its kind and one line for the user.
#[derive(Clone, Debug)]
pub struct ConnectError {
    /// Connect, Tls, Timeout or Protocol.
    pub kind: ErrorKind,
    /// E.g. "connect to 127.0.0.1:1: connection refused".
    pub message: String,
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// An I/O error as a short lower-case phrase ("connection refused"), without "(os error N)".
pub fn io_phrase(e: &io::Error) -> String {
    use io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused".into(),
        K::ConnectionReset => "connection reset by peer".into(),
        K::TimedOut => "timed out".into(),
        K::UnexpectedEof => "connection closed by peer".into(),
        K::BrokenPipe => "broken pipe".into(),
        _ => {
            let s = e.to_string();
            match s.find(" (os error") {
                Some(i) => s[..i].to_lowercase(),
                None => s,
            }
        }
    }
}

/// What connection setup measured.
#[derive(Clone, Debug, Default)]
pub struct ConnectInfo {
    /// TCP connect time.
    pub connect: Duration,
    /// TLS handshake time (None on plain TCP).
    pub handshake: Option<Duration>,
    /// The TLS session was resumed.
    pub resumed: bool,
    /// ALPN protocol the server chose.
    pub alpn: Option<Vec<u8>>,
    /// "TLSv1.3" / "TLSv1.2".
    pub tls_version: Option<&'static str>,
}

/// A plain or TLS TCP stream.
pub enum Stream {
    /// Cleartext.
    Plain(TcpStream),
    /// TLS (boxed: the rustls state is large and moved rarely).
    Tls(Box<TlsStream<TcpStream>>),
}

/// Opens a TCP connection with TCP_NODELAY and the congestion controller, within `limit`.
pub async fn connect_tcp(
    addr: SocketAddr,
    cc: Option<CongestionControl>,
    limit: Duration,
) -> Result<TcpStream, ConnectError> {
    let fail = |kind, why: String| ConnectError {
        kind,
        message: format!("connect to {addr}: {why}"),
    };
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|e| fail(ErrorKind::Connect, io_phrase(&e)))?;
    if let Some(cc) = cc {
        set_congestion(&socket, cc).map_err(|e| {
            fail(
                ErrorKind::Connect,
                format!("TCP_CONGESTION {}: {}", cc.name(), io_phrase(&e)),
            )
        })?;
    }
    let _ = socket.set_nodelay(true);
    match tokio::time::timeout(limit, socket.connect(addr)).await {
        Err(_) => Err(fail(
            ErrorKind::Timeout,
            format!("timed out after {limit:?}"),
        )),
        Ok(Err(e)) => Err(fail(ErrorKind::Connect, io_phrase(&e))),
        Ok(Ok(s)) => Ok(s),
    }
}

fn set_congestion(socket: &TcpSocket, cc: CongestionControl) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let name = cc.name().as_bytes();
    // SAFETY: fd is a valid socket owned by `socket`; the option value is a byte string of
    // the given length, as TCP_CONGESTION expects.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Connects (and, with `tls`, handshakes), all within `limit`.
pub async fn connect(
    addr: SocketAddr,
    tls: Option<(&TlsConnector, &ServerName<'static>)>,
    cc: Option<CongestionControl>,
    limit: Duration,
) -> Result<(Stream, ConnectInfo), ConnectError> {
    let t0 = Instant::now();
    let tcp = connect_tcp(addr, cc, limit).await?;
    let t1 = Instant::now();
    let mut info = ConnectInfo {
        connect: t1 - t0,
        ..Default::default()
    };
    let Some((connector, name)) = tls else {
        return Ok((Stream::Plain(tcp), info));
    };
    let left = limit.saturating_sub(t1 - t0);
    let fail = |kind, why: String| ConnectError {
        kind,
        message: format!("TLS handshake with {addr}: {why}"),
    };
    let tls = match tokio::time::timeout(left, connector.connect(name.clone(), tcp)).await {
        Err(_) => {
            return Err(fail(
                ErrorKind::Timeout,
                format!("timed out after {limit:?}"),
            ))
        }
        Ok(Err(e)) => {
            let why = match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(rustls::Error::AlertReceived(
                    rustls::AlertDescription::NoApplicationProtocol,
                )) => {
                    let offered: Vec<String> = connector
                        .config()
                        .alpn_protocols
                        .iter()
                        .map(|p| String::from_utf8_lossy(p).into_owned())
                        .collect();
                    format!(
                        "the server speaks none of the offered ALPN protocols ({}); try --proto h1 or auto",
                        offered.join(",")
                    )
                }
                Some(r) => r.to_string(),
                None => io_phrase(&e),
            };
            return Err(fail(ErrorKind::Tls, why));
        }
        Ok(Ok(s)) => s,
    };
    info.handshake = Some(t1.elapsed());
    let (_, conn) = tls.get_ref();
    info.alpn = conn.alpn_protocol().map(|p| p.to_vec());
    info.resumed = matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    info.tls_version = conn.protocol_version().map(|v| match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "other",
    });
    Ok((Stream::Tls(Box::new(tls)), info))
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }
    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

/// Shared pieces a client needs to open connections.
#[derive(Clone)]
pub struct Dialer {
    /// Server address.
    pub addr: SocketAddr,
    /// TLS connector and server name (https:// over TCP).
    pub tls: Option<(TlsConnector, ServerName<'static>)>,
    /// Congestion controller.
    pub cc: Option<CongestionControl>,
    /// Connect + handshake limit.
    pub limit: Duration,
}

impl Dialer {
    /// Opens one connection.
    pub async fn dial(&self) -> Result<(Stream, ConnectInfo), ConnectError> {
        connect(
            self.addr,
            self.tls.as_ref().map(|(c, n)| (c, n)),
            self.cc,
            self.limit,
        )
        .await
    }

    /// A dialer for TLS with `config`.
    pub fn with_tls(
        mut self,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> Dialer {
        self.tls = Some((TlsConnector::from(config), name));
        self
    }
}
