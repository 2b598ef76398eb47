//! TCP and TLS connection setup, timed, with the congestion controller applied, and one
//! stream type (plain or TLS) so the drivers need no dynamic dispatch. A [`Dialer`] with a
//! tap (`hxlab trace`) wraps each stream so the tap sees every byte the session wrote and read
//! (after TLS), and tells it the connection's transport facts.

use crate::recorder::ErrorKind;
use crate::CongestionControl;
use rustls::pki_types::ServerName;
use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
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
    /// The negotiated cipher suite, e.g. "TLS13_AES_256_GCM_SHA384".
    pub cipher: Option<&'static str>,
    /// The congestion controller the socket runs, read back with getsockopt after connect.
    pub cc: Option<hxlab_core::cc::Running>,
    /// The TLS handshake is still going on: the ClientHello offered a resumed session with
    /// early data, and the first request will go out as TLS 1.3 early data. `handshake`,
    /// `resumed`, `alpn` and `tls_version` are then only known once it completes, and are
    /// reported through [`Stream::on_handshake`].
    pub early: bool,
    /// With `--tfo`: set at the connection's first read to whether the server acknowledged
    /// the data sent in the SYN (TCP Fast Open), read back from TCP_INFO.
    pub syn_data: Option<Rc<Cell<Option<bool>>>>,
}

/// How a handshake that carried early data ended.
#[derive(Clone, Debug)]
pub struct EarlyOutcome {
    /// ClientHello to handshake done.
    pub handshake: Duration,
    /// The server accepted the early data (it said so in EncryptedExtensions); rejected early
    /// data is sent again after the handshake.
    pub accepted: bool,
    /// The session was resumed.
    pub resumed: bool,
    /// ALPN protocol the server chose.
    pub alpn: Option<Vec<u8>>,
    /// "TLSv1.3" (early data exists only there).
    pub tls_version: Option<&'static str>,
}

/// Watches a TLS stream whose handshake completes after early data was written.
pub struct EarlyWatch {
    started: Instant,
    done: Option<Box<dyn FnOnce(EarlyOutcome)>>,
}

/// A TLS stream, with the watch of its early-data handshake while that is going on.
pub struct TlsConn {
    tls: TlsStream<RawTcp>,
    early: Option<EarlyWatch>,
}

impl TlsConn {
    /// While the handshake that carried early data is incomplete: completes it (tokio-rustls
    /// finishes an early-data handshake only when flushed, so a reader must drive it), then
    /// reports how it ended. Ready at once when there is nothing to watch.
    fn poll_early(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(w) = &mut self.early else {
            return Poll::Ready(Ok(()));
        };
        if self.tls.get_ref().1.is_handshaking() {
            std::task::ready!(Pin::new(&mut self.tls).poll_flush(cx))?;
        }
        let conn = self.tls.get_ref().1;
        let outcome = EarlyOutcome {
            handshake: w.started.elapsed(),
            accepted: conn.is_early_data_accepted(),
            resumed: matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
            alpn: conn.alpn_protocol().map(|p| p.to_vec()),
            tls_version: tls_version_name(conn),
        };
        if let Some(done) = w.done.take() {
            done(outcome);
        }
        self.early = None;
        Poll::Ready(Ok(()))
    }
}

fn tls_version_name(conn: &rustls::ClientConnection) -> Option<&'static str> {
    conn.protocol_version().map(|v| match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
        _ => "other",
    })
}

/// A plain or TLS TCP stream.
pub enum Stream {
    /// Cleartext.
    Plain(RawTcp),
    /// TLS (boxed: the rustls state is large and moved rarely).
    Tls(Box<TlsConn>),
    /// Either of the above with a tap that sees every byte written and read (and, when the
    /// stream is dropped, that the connection closed).
    Tapped(Box<Stream>, TapGuard),
}

/// A connection's hold on its tap: tells it the connection closed when dropped.
pub struct TapGuard(SharedTap);

impl std::ops::Deref for TapGuard {
    type Target = SharedTap;
    fn deref(&self) -> &SharedTap {
        &self.0
    }
}

impl Drop for TapGuard {
    fn drop(&mut self) {
        with_tap(&self.0, |t| t.closed());
    }
}

/// An observer shared by the connections of a run (`hxlab trace`: one client, one thread).
pub type SharedTap = Arc<Mutex<Box<dyn hxlab_wire::Tap>>>;

/// Runs `f` on the tap (a poisoned lock still holds a usable observer).
pub fn with_tap(tap: &SharedTap, f: impl FnOnce(&mut dyn hxlab_wire::Tap)) {
    let mut g = tap.lock().unwrap_or_else(|e| e.into_inner());
    f(g.as_mut());
}

impl Stream {
    /// For a connection dialled with early data ([`ConnectInfo::early`]): `done` is called
    /// once, when the handshake completes (driven by the first read).
    pub fn on_handshake(&mut self, done: impl FnOnce(EarlyOutcome) + 'static) {
        match self {
            Stream::Tls(t) => {
                if let Some(w) = &mut t.early {
                    w.done = Some(Box::new(done));
                }
            }
            Stream::Tapped(inner, _) => inner.on_handshake(done),
            Stream::Plain(_) => {}
        }
    }
}

/// A tokio TCP stream whose reads and writes are direct `recvfrom`/`sendto` system calls.
/// glibc's `recv`/`send` are thread-cancellation points and wrap every call in
/// enable/disable-cancellation bookkeeping, which showed as ~1.5 % of the client's CPU per
/// request in profiles; a load generator makes millions of these calls. Readiness is still
/// tokio's: a call that would block clears it and waits, exactly as `TcpStream` does.
pub struct RawTcp(TcpStream, Option<Box<Tfo>>);

/// A TCP Fast Open connection's first flight. Everything written before the first read is
/// held and sent in one call when the connection first reads, so the SYN carries all of it
/// — the request on plain TCP, the ClientHello *and* its early data on TLS (tokio-rustls
/// writes them separately, and with TCP_FASTOPEN_CONNECT only the first send rides on the
/// SYN). At that first read `watch` learns, from TCP_INFO, whether the server acknowledged
/// the SYN's data.
struct Tfo {
    held: Vec<u8>,
    watch: Box<dyn FnOnce(bool)>,
}

/// The most a first flight holds back; beyond it the data is sent at once.
const TFO_HOLD_MAX: usize = 64 * 1024;

impl RawTcp {
    /// Sends what the first flight held (all of it, or Pending until the socket takes it).
    fn poll_release(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(t) = &mut self.1 {
            while !t.held.is_empty() {
                let n = std::task::ready!(poll_raw(
                    &self.0,
                    cx,
                    tokio::io::Interest::WRITABLE,
                    |fd| raw_send(fd, &t.held)
                ))?;
                t.held.drain(..n);
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Holds `bufs` while this is a first flight under TCP Fast Open; None otherwise.
    fn hold(&mut self, bufs: &[io::IoSlice<'_>]) -> Option<usize> {
        let t = self.1.as_mut()?;
        let n: usize = bufs.iter().map(|b| b.len()).sum();
        if t.held.len() + n > TFO_HOLD_MAX {
            return None;
        }
        for b in bufs {
            t.held.extend_from_slice(b);
        }
        Some(n)
    }
}

impl RawTcp {
    /// The wrapped stream.
    pub fn get_ref(&self) -> &TcpStream {
        &self.0
    }
}

fn raw_result(rc: libc::c_long) -> io::Result<usize> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc as usize)
    }
}

fn raw_recv(fd: std::os::fd::RawFd, buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
    // SAFETY: the kernel writes at most buf.len() bytes into memory we own; it never reads it.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            0,
            std::ptr::null_mut::<libc::sockaddr>(),
            std::ptr::null_mut::<libc::socklen_t>(),
        )
    };
    raw_result(rc)
}

fn raw_send(fd: std::os::fd::RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the kernel reads at most buf.len() bytes from a slice we borrow.
    // MSG_NOSIGNAL: a peer that closed gives EPIPE, not SIGPIPE.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
            std::ptr::null::<libc::sockaddr>(),
            0 as libc::socklen_t,
        )
    };
    raw_result(rc)
}

/// Runs the raw call `io` on the socket's file descriptor once tokio says the socket is
/// ready for `interest`; a call that would block clears the readiness and waits again.
fn poll_raw<T>(
    s: &TcpStream,
    cx: &mut Context<'_>,
    interest: tokio::io::Interest,
    mut io: impl FnMut(std::os::fd::RawFd) -> io::Result<T>,
) -> Poll<io::Result<T>> {
    use std::os::fd::AsRawFd;
    let fd = s.as_raw_fd();
    loop {
        if interest.is_readable() {
            std::task::ready!(s.poll_read_ready(cx))?;
        } else {
            std::task::ready!(s.poll_write_ready(cx))?;
        }
        match s.try_io(interest, || io(fd)) {
            Ok(v) => return Poll::Ready(Ok(v)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

impl AsyncRead for RawTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.1.is_some() {
            std::task::ready!(this.poll_release(cx))?;
        }
        let s = &this.0;
        // SAFETY: raw_recv only writes initialised bytes into the unfilled part, and we
        // advance the buffer by exactly what it reports.
        let n = std::task::ready!(poll_raw(s, cx, tokio::io::Interest::READABLE, |fd| {
            raw_recv(fd, unsafe { buf.unfilled_mut() })
        }))?;
        if let Some(t) = this.1.take() {
            use std::os::fd::AsRawFd;
            (t.watch)(hxlab_core::cc::tcp_syn_data_acked(this.0.as_raw_fd()).unwrap_or(false));
        }
        // SAFETY: the kernel initialised n bytes of the unfilled part.
        unsafe { buf.assume_init(n) };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for RawTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.1.is_some() {
            if let Some(n) = this.hold(&[io::IoSlice::new(buf)]) {
                return Poll::Ready(Ok(n));
            }
            std::task::ready!(this.poll_release(cx))?;
        }
        poll_raw(&this.0, cx, tokio::io::Interest::WRITABLE, |fd| {
            raw_send(fd, buf)
        })
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_release(cx))?;
        Pin::new(&mut this.0).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.1.is_some() {
            if let Some(n) = this.hold(bufs) {
                return Poll::Ready(Ok(n));
            }
            std::task::ready!(this.poll_release(cx))?;
        }
        // IoSlice is ABI-compatible with iovec; the kernel takes at most IOV_MAX of them.
        // sendmsg rather than writev, for MSG_NOSIGNAL (EPIPE, not SIGPIPE).
        let n = bufs.len().min(1024);
        poll_raw(&this.0, cx, tokio::io::Interest::WRITABLE, |fd| {
            // SAFETY: zeroed msghdr is valid (no name, no control data).
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
            msg.msg_iovlen = n as _;
            // SAFETY: the kernel reads n iovecs (and the bytes they point to) we borrow.
            raw_result(unsafe {
                libc::syscall(
                    libc::SYS_sendmsg,
                    fd,
                    &msg as *const libc::msghdr,
                    libc::MSG_NOSIGNAL,
                )
            })
        })
    }
    fn is_write_vectored(&self) -> bool {
        true
    }
}

/// Opens a TCP connection with TCP_NODELAY and the congestion controller (and with `tfo`,
/// TCP_FASTOPEN_CONNECT: the first write goes out in the SYN when a cookie is cached),
/// within `limit`.
pub async fn connect_tcp(
    addr: SocketAddr,
    cc: Option<CongestionControl>,
    tfo: bool,
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
    if tfo {
        use std::os::fd::AsRawFd;
        hxlab_core::cc::set_tcp_int(socket.as_raw_fd(), libc::TCP_FASTOPEN_CONNECT, 1).map_err(
            |e| {
                fail(
                    ErrorKind::Connect,
                    format!("TCP_FASTOPEN_CONNECT: {}", io_phrase(&e)),
                )
            },
        )?;
    }
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
    hxlab_core::cc::set_tcp(socket.as_raw_fd(), cc)
}

/// Connects (and, with `tls`, handshakes), all within `limit`.
pub async fn connect(
    addr: SocketAddr,
    tls: Option<(&TlsConnector, &ServerName<'static>)>,
    cc: Option<CongestionControl>,
    tfo: bool,
    limit: Duration,
) -> Result<(Stream, ConnectInfo), ConnectError> {
    let t0 = Instant::now();
    let mut tcp = RawTcp(connect_tcp(addr, cc, tfo, limit).await?, None);
    let syn_data = tfo.then(|| {
        let seen = Rc::new(Cell::new(None));
        let s = seen.clone();
        tcp.1 = Some(Box::new(Tfo {
            held: Vec::new(),
            watch: Box::new(move |acked| s.set(Some(acked))),
        }));
        seen
    });
    let t1 = Instant::now();
    let mut info = ConnectInfo {
        connect: t1 - t0,
        syn_data,
        cc: {
            use std::os::fd::AsRawFd;
            hxlab_core::cc::tcp_of(tcp.0.as_raw_fd()).ok()
        },
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
    let early_started = Instant::now();
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
    let (_, conn) = tls.get_ref();
    if conn.is_handshaking() {
        // Returned after the ClientHello: the session writes its first request as early data.
        info.early = true;
        let early = Some(EarlyWatch {
            started: early_started,
            done: None,
        });
        return Ok((Stream::Tls(Box::new(TlsConn { tls, early })), info));
    }
    info.handshake = Some(t1.elapsed());
    info.alpn = conn.alpn_protocol().map(|p| p.to_vec());
    info.resumed = matches!(conn.handshake_kind(), Some(rustls::HandshakeKind::Resumed));
    info.tls_version = tls_version_name(conn);
    info.cipher = conn
        .negotiated_cipher_suite()
        .and_then(|c| c.suite().as_str());
    Ok((Stream::Tls(Box::new(TlsConn { tls, early: None })), info))
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
            Stream::Tls(s) => {
                if s.early.is_some() {
                    std::task::ready!(s.poll_early(cx))?;
                }
                Pin::new(&mut s.tls).poll_read(cx, buf)
            }
            Stream::Tapped(inner, tap) => {
                let before = buf.filled().len();
                let r = Pin::new(inner.as_mut()).poll_read(cx, buf);
                if buf.filled().len() > before {
                    let got = &buf.filled()[before..];
                    with_tap(tap, |t| {
                        t.bytes(hxlab_wire::Dir::Recv, hxlab_wire::tap::Channel::Conn, got)
                    });
                }
                r
            }
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
            Stream::Tls(s) => Pin::new(&mut s.tls).poll_write(cx, buf),
            Stream::Tapped(inner, tap) => {
                let r = Pin::new(inner.as_mut()).poll_write(cx, buf);
                if let Poll::Ready(Ok(n)) = r {
                    sent(tap, &[io::IoSlice::new(buf)], n);
                }
                r
            }
        }
    }
    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(&mut s.tls).poll_flush(cx),
            Stream::Tapped(inner, _) => Pin::new(inner.as_mut()).poll_flush(cx),
        }
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(&mut s.tls).poll_shutdown(cx),
            Stream::Tapped(inner, _) => Pin::new(inner.as_mut()).poll_shutdown(cx),
        }
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(&mut s.tls).poll_write_vectored(cx, bufs),
            Stream::Tapped(inner, tap) => {
                let r = Pin::new(inner.as_mut()).poll_write_vectored(cx, bufs);
                if let Poll::Ready(Ok(n)) = r {
                    sent(tap, bufs, n);
                }
                r
            }
        }
    }
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.tls.is_write_vectored(),
            Stream::Tapped(inner, _) => inner.is_write_vectored(),
        }
    }
}

/// Tells the tap about the first `n` bytes of `bufs`, which the socket (or TLS) took.
fn sent(tap: &SharedTap, bufs: &[io::IoSlice<'_>], mut n: usize) {
    with_tap(tap, |t| {
        for b in bufs {
            if n == 0 {
                break;
            }
            let k = n.min(b.len());
            t.bytes(
                hxlab_wire::Dir::Send,
                hxlab_wire::tap::Channel::Conn,
                &b[..k],
            );
            n -= k;
        }
    });
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
    /// TCP Fast Open (`--tfo`).
    pub tfo: bool,
    /// Connect + handshake limit.
    pub limit: Duration,
    /// An observer of every connection (`hxlab trace`).
    pub tap: Option<SharedTap>,
}

impl Dialer {
    /// Opens one connection (tapped when the dialer has a tap, which then learns its facts).
    pub async fn dial(&self) -> Result<(Stream, ConnectInfo), ConnectError> {
        let (stream, info) = connect(
            self.addr,
            self.tls.as_ref().map(|(c, n)| (c, n)),
            self.cc,
            self.tfo,
            self.limit,
        )
        .await?;
        let Some(tap) = &self.tap else {
            return Ok((stream, info));
        };
        let offered = match &self.tls {
            Some((c, _)) => c
                .config()
                .alpn_protocols
                .iter()
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect(),
            None => Vec::new(),
        };
        let facts = hxlab_wire::tap::TransportFacts {
            transport: "TCP",
            peer: self.addr.to_string(),
            connect_us: Some(info.connect.as_micros() as u64),
            handshake_us: info.handshake.map(|d| d.as_micros() as u64),
            tls_version: info.tls_version.map(str::to_string),
            cipher: info.cipher.map(str::to_string),
            alpn: info
                .alpn
                .as_ref()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            alpn_offered: offered,
            resumed: info.resumed,
            rtt_us: None,
        };
        with_tap(tap, |t| t.connected(&facts));
        Ok((
            Stream::Tapped(Box::new(stream), TapGuard(tap.clone())),
            info,
        ))
    }

    /// A dialer for TLS with `config`.
    pub fn with_tls(
        mut self,
        config: Arc<rustls::ClientConfig>,
        name: ServerName<'static>,
    ) -> Dialer {
        let early = config.enable_early_data;
        self.tls = Some((TlsConnector::from(config).early_data(early), name));
        self
    }
}
