//! Sockets and accept loops: the TCP TLS port (ALPN picks h2 or HTTP/1.1), the cleartext
//! port (the HTTP/2 connection preface picks h2c, anything else is HTTP/1.1) and the UDP
//! socket for QUIC on the same port number as TLS.

use crate::routes::Ctx;
use crate::stats::{cc_slot, Protocol};
use crate::tcp_admit::{TcpAdmission, Ticket};
use crate::{ServeConfig, ServeError};
use hxlab_core::cc::CongestionControl;
use hxlab_core::sched::Lowat;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::task::JoinHandle;

/// The bound, not yet served, sockets.
pub(crate) struct Sockets {
    pub tls: TcpListener,
    pub plain: TcpListener,
    pub udp: Option<std::net::UdpSocket>,
}

fn tcp_listener(
    addr: SocketAddr,
    cc: Option<CongestionControl>,
    lowat: Lowat,
) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    // Restarting right after a run must not fail on connections in TIME_WAIT.
    socket.set_reuseaddr(true)?;
    // Accepted sockets inherit the listener's controller; `accept_loop` reads it back on
    // each one and sets it again where a route or the kernel chose otherwise.
    if let Some(cc) = cc {
        hxlab_core::cc::set_tcp(socket.as_raw_fd(), cc)?;
    }
    // So is the send low-water mark (read back the same way).
    hxlab_core::sched::set_lowat(socket.as_raw_fd(), lowat)?;
    // TCP Fast Open: accept data in the SYN from clients holding a cookie (the kernel takes
    // it only when net.ipv4.tcp_fastopen has bit 2; `start` says so when it does not).
    let _ = hxlab_core::cc::set_tcp_int(socket.as_raw_fd(), libc::TCP_FASTOPEN, 1024);
    socket.bind(addr)?;
    socket.listen(1024)
}

/// Binds TLS, plain and (unless off) UDP. With `--tls-port 0` the TCP port is picked first and
/// UDP bound on the same number, retrying with a new TCP port if that UDP port is taken.
pub(crate) fn bind_all(cfg: &ServeConfig) -> Result<Sockets, ServeError> {
    let tls_addr = SocketAddr::new(cfg.bind, cfg.tls_port);
    let attempts = if cfg.tls_port == 0 { 20 } else { 1 };
    let mut last_err = None;
    let mut pair = None;
    for _ in 0..attempts {
        let tls = tcp_listener(tls_addr, cfg.cc, cfg.notsent_lowat).map_err(|source| {
            ServeError::Bind {
                what: "tls",
                addr: tls_addr,
                source,
            }
        })?;
        if !cfg.h3 {
            pair = Some((tls, None));
            break;
        }
        let port = tls.local_addr().map(|a| a.port()).unwrap_or(cfg.tls_port);
        let udp_addr = SocketAddr::new(cfg.bind, port);
        match std::net::UdpSocket::bind(udp_addr) {
            Ok(udp) => {
                hxlab_quic::set_quic_recv_buffer(std::os::fd::AsFd::as_fd(&udp));
                pair = Some((tls, Some(udp)));
                break;
            }
            Err(source) => {
                last_err = Some(ServeError::Bind {
                    what: "h3 (udp)",
                    addr: udp_addr,
                    source,
                })
            }
        }
    }
    let (tls, udp) = match pair {
        Some(p) => p,
        None => {
            return Err(last_err.unwrap_or_else(|| {
                ServeError::Config("could not bind the TLS and UDP ports".into())
            }))
        }
    };
    let plain_addr = SocketAddr::new(cfg.bind, cfg.plain_port);
    let plain =
        tcp_listener(plain_addr, cfg.cc, cfg.notsent_lowat).map_err(|source| ServeError::Bind {
            what: "plain",
            addr: plain_addr,
            source,
        })?;
    Ok(Sockets { tls, plain, udp })
}

/// What an accepted socket runs, read back: its congestion controller (a [`cc_slot`], after
/// setting `want` on it if it runs something else) and whether its SYN carried data (TCP
/// Fast Open).
#[derive(Clone, Copy)]
pub(crate) struct Accepted {
    cc: usize,
    syn_data: bool,
    lowat: Lowat,
}

impl Accepted {
    /// Counts this connection of `proto` in the server's stats.
    fn count(self, ctx: &Ctx, proto: Protocol) {
        ctx.stats.cc(proto, self.cc);
        ctx.stats.lowat(proto, self.lowat);
        if self.syn_data {
            ctx.stats.tfo_accepted(proto);
        }
    }
}

fn read_back(tcp: &TcpStream, want: Option<CongestionControl>, lowat: Lowat) -> Accepted {
    Accepted {
        cc: accepted_cc(tcp, want),
        syn_data: hxlab_core::cc::tcp_syn_data_acked(tcp.as_raw_fd()).unwrap_or(false),
        lowat: accepted_lowat(tcp, lowat),
    }
}

/// The send low-water mark an accepted socket runs (inherited from its listener), set
/// again if it runs another.
fn accepted_lowat(tcp: &TcpStream, want: Lowat) -> Lowat {
    let fd = tcp.as_raw_fd();
    let now = hxlab_core::sched::lowat_of(fd).unwrap_or(Lowat::Off);
    if now != want && want != Lowat::Off && hxlab_core::sched::set_lowat(fd, want).is_ok() {
        return hxlab_core::sched::lowat_of(fd).unwrap_or(Lowat::Off);
    }
    now
}

fn accepted_cc(tcp: &TcpStream, want: Option<CongestionControl>) -> usize {
    let fd = tcp.as_raw_fd();
    let mut now = hxlab_core::cc::tcp_of(fd).unwrap_or_default();
    if let Some(want) = want {
        if now != want.name() && hxlab_core::cc::set_tcp(fd, want).is_ok() {
            now = hxlab_core::cc::tcp_of(fd).unwrap_or_default();
        }
    }
    cc_slot(&now)
}

/// The TCP ports' shared state: the congestion controller to set, and the connection caps.
#[derive(Clone)]
pub(crate) struct TcpPorts {
    pub cc: Option<CongestionControl>,
    pub admission: Arc<TcpAdmission>,
}

/// Accepts until shutdown; `serve` runs each accepted connection as a tracked task, told
/// which congestion controller (a [`cc_slot`]) the socket runs and holding its admission
/// [`Ticket`]. A connection over a cap is closed at once (counted as refused under `port`,
/// the port's HTTP/1.1: what it would have spoken is not known yet).
fn accept_loop<F, Fut>(
    listener: TcpListener,
    ctx: Arc<Ctx>,
    tcp_ports: TcpPorts,
    port: Protocol,
    serve: F,
) -> JoinHandle<()>
where
    F: Fn(TcpStream, Arc<Ctx>, Accepted, Ticket) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    tokio::spawn(async move {
        let mut shutdown = ctx.shutdown.clone();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((tcp, peer)) => {
                        let Ok(ticket) = tcp_ports.admission.admit(peer.ip()) else {
                            ctx.stats.refused(port);
                            continue;
                        };
                        // Small responses must not wait for Nagle.
                        let _ = tcp.set_nodelay(true);
                        let seen = read_back(&tcp, tcp_ports.cc, ctx.limits.lowat);
                        ctx.tracker.spawn(serve(tcp, ctx.clone(), seen, ticket));
                    }
                    // Out of descriptors and similar: back off a little instead of spinning.
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                },
                _ = shutdown.changed() => break,
            }
        }
    })
}

/// The TLS port: handshake (10 s limit), then h2 if ALPN chose it, HTTP/1.1 otherwise.
pub(crate) fn spawn_tls(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    ctx: Arc<Ctx>,
    tcp_ports: TcpPorts,
) -> JoinHandle<()> {
    accept_loop(
        listener,
        ctx,
        tcp_ports,
        Protocol::H1Tls,
        move |tcp, ctx, seen, ticket| {
            let config = config.clone();
            async move {
                let _ticket = ticket;
                let accept = crate::tls_early_data::accept(tcp, config);
                let mut tls = match tokio::time::timeout(Duration::from_secs(10), accept).await {
                    Ok(Ok(t)) => t,
                    _ => return,
                };
                let proto = if tls.rustls().alpn_protocol() == Some(b"h2") {
                    Protocol::H2
                } else {
                    Protocol::H1Tls
                };
                if tls.early_data_accepted() {
                    ctx.stats.early_data_accepted(proto);
                }
                seen.count(&ctx, proto);
                if ctx.limits.lowat != Lowat::Off {
                    tls.limit_send_buffer(crate::h2::LATE_BATCH);
                }
                if proto == Protocol::H2 {
                    // Boxed: inline, the HTTP/2 connection's future would size every
                    // connection's task, HTTP/1.1 ones included.
                    Box::pin(crate::h2::serve(tls, ctx, Protocol::H2)).await;
                } else {
                    crate::h1::serve(tls, ctx, Protocol::H1Tls).await;
                }
            }
        },
    )
}

const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What a cleartext connection turned out to speak.
#[derive(Debug, PartialEq, Eq)]
enum Cleartext {
    H2c,
    H1,
    /// Neither an HTTP/2 preface nor an HTTP/1.x request line (e.g. an invalid preface):
    /// the connection is closed without an answer, as RFC 9113 section 3.4 asks.
    Garbage,
}

/// Classifies a cleartext connection by its first bytes. Peeks, so nothing is consumed.
/// While only part of the preface is there it sleeps in the kernel until the rest (or EOF)
/// arrives, never polls: a peer that sends 16 of the 24 bytes and stops costs no CPU (the
/// caller's timeout ends it).
async fn classify(tcp: &TcpStream) -> std::io::Result<Cleartext> {
    let mut buf = [0u8; 512];
    // Each pass sees more bytes than the one before (or ends), so PREFACE.len() passes bound it.
    for _ in 0..=PREFACE.len() {
        let n = tcp.peek(&mut buf).await?;
        if n == 0 {
            return Ok(Cleartext::H1);
        }
        let seen = &buf[..n];
        if seen.len() >= PREFACE.len() && seen.starts_with(PREFACE) {
            return Ok(Cleartext::H2c);
        }
        if seen.len() < PREFACE.len() && PREFACE.starts_with(seen) {
            wait_for_more(tcp, n).await?;
            continue;
        }
        return Ok(classify_h1(seen));
    }
    Ok(Cleartext::Garbage)
}

/// Waits until more than `have` bytes are readable on `tcp` (or EOF, or an error), without
/// waking for less: SO_RCVLOWAT makes the kernel report the socket readable only once
/// `have + 1` bytes are queued. The mark is put back to 1 before returning, since HTTP then
/// reads the connection as usual.
async fn wait_for_more(tcp: &TcpStream, have: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = tcp.as_raw_fd();
    let set_lowat = |n: usize| -> std::io::Result<()> {
        let v = libc::c_int::try_from(n).unwrap_or(libc::c_int::MAX);
        // SAFETY: a valid socket descriptor we own, an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVLOWAT,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    set_lowat(have + 1)?;
    // Forget the readiness the last peek left behind, then look once more: bytes that came
    // in between are seen here, and anything later wakes `readable` below.
    let _ = tcp.try_io(tokio::io::Interest::READABLE, || {
        Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
    });
    let mut probe = [0u8; 32];
    // SAFETY: recv into our own buffer, non-blocking peek.
    let n = unsafe {
        libc::recv(
            fd,
            probe.as_mut_ptr().cast(),
            probe.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    let waited = if n > 0 && (n as usize) <= have {
        tcp.readable().await.map(|_| ())
    } else {
        Ok(())
    };
    let reset = set_lowat(1);
    waited.and(reset)
}

/// An HTTP/1 request line ends in its version; when the first line is complete and its last
/// word does not start with `HTTP/` (in any case), the peer speaks something else. One empty
/// line before it is skipped (RFC 9112 §2.2). A line that does end in something like a version
/// goes to the HTTP/1.1 server even when the version is malformed or not 1.x, so the framer
/// answers it (400, or 505 for another major version) instead of a silent close; an
/// incomplete line goes there too.
fn classify_h1(seen: &[u8]) -> Cleartext {
    let seen = seen.strip_prefix(b"\r\n").unwrap_or(seen);
    let Some(end) = seen.windows(2).position(|w| w == b"\r\n") else {
        return Cleartext::H1;
    };
    let line = &seen[..end];
    // The preface's own first line with the rest wrong is a bad HTTP/2 preface, closed
    // without an answer (RFC 9113 §3.4), not an HTTP/1 request for HTTP/2.0.
    if line == b"PRI * HTTP/2.0" {
        return Cleartext::Garbage;
    }
    // Trailing spaces do not hide the version: the framer refuses such a line with 400.
    let last = line
        .split(|&b| b == b' ')
        .rfind(|word| !word.is_empty())
        .unwrap_or_default();
    match last.get(..5) {
        Some(name) if name.eq_ignore_ascii_case(b"HTTP/") => Cleartext::H1,
        _ => Cleartext::Garbage,
    }
}

/// Closes with a FIN, not a RST: unread input at close() makes the kernel send RST, so read
/// what has arrived (briefly, bounded) first.
async fn close_quietly(mut tcp: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // On the heap: a buffer here would be part of every cleartext connection's task (4 KiB
    // of each idle HTTP/1.1 connection's 5 KiB in bench/scale.sh).
    let mut sink = vec![0u8; 4096];
    let _ = tcp.shutdown().await;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    for _ in 0..64 {
        match tokio::time::timeout_at(deadline, tcp.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => break,
        }
    }
}

/// The cleartext port: h2c by prior knowledge, HTTP/1.1 otherwise.
pub(crate) fn spawn_plain(
    listener: TcpListener,
    ctx: Arc<Ctx>,
    tcp_ports: TcpPorts,
) -> JoinHandle<()> {
    // HTTP/1.1 between requests lives in epoll sets, one per worker thread (h1::Sets); a
    // replaying origin, whose answers are counted, keeps a task per connection.
    let workers = tokio::runtime::Handle::current().metrics().num_workers();
    let sets = match ctx.replay {
        None => crate::h1::Sets::start(&ctx, workers).ok().map(Arc::new),
        Some(_) => None,
    };
    accept_loop(
        listener,
        ctx,
        tcp_ports,
        Protocol::H1,
        move |tcp, ctx, seen, ticket| {
            let sets = sets.clone();
            async move { serve_cleartext(tcp, ctx, seen, sets, ticket).await }
        },
    )
}

/// One cleartext connection: told h2c from HTTP/1.1 (30 s limit), then served.
async fn serve_cleartext(
    tcp: TcpStream,
    ctx: Arc<Ctx>,
    seen: Accepted,
    sets: Option<Arc<crate::h1::Sets>>,
    ticket: Ticket,
) {
    // An HTTP/1.1 connection handed to a set carries its ticket there; any other holds it
    // here, for as long as this future runs it.
    let mut ticket = Some(ticket);
    match tokio::time::timeout(Duration::from_secs(30), classify(&tcp)).await {
        Ok(Ok(Cleartext::H2c)) => {
            seen.count(&ctx, Protocol::H2c);
            // Boxed, as on the TLS port: an idle HTTP/1.1 connection's task stays small.
            Box::pin(crate::h2::serve(tcp, ctx, Protocol::H2c)).await
        }
        Ok(Ok(Cleartext::H1)) => {
            seen.count(&ctx, Protocol::H1);
            match sets {
                Some(sets) => {
                    let guard = ctx.stats.connection(Protocol::H1).holding(ticket.take());
                    sets.adopt(tcp, guard)
                }
                None => crate::h1::serve(tcp, ctx, Protocol::H1).await,
            }
        }
        Ok(Ok(Cleartext::Garbage)) => close_quietly(tcp).await,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines_are_told_from_garbage() {
        assert_eq!(
            classify_h1(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
            Cleartext::H1
        );
        assert_eq!(classify_h1(b"GET /very-long-and-incomplete"), Cleartext::H1);
        assert_eq!(
            classify_h1(b"INVALID CONNECTION PREFACE\r\n\r\n"),
            Cleartext::Garbage
        );
    }

    /// Lines ending in an HTTP version go to the HTTP/1.1 server, whose framer answers them
    /// (400 or 505): none may be closed silently. Anything else is garbage.
    #[test]
    fn only_lines_ending_in_an_http_version_go_to_the_http1_server() {
        let cases: &[(&[u8], Cleartext)] = &[
            (b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n", Cleartext::H1),
            (b"GET / HTTP/1.2\r\nHost: x\r\n\r\n", Cleartext::H1),
            (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", Cleartext::H1),
            (b"GET / HTTP/3.0\r\n", Cleartext::H1),
            (b"GET / HTTP/9.9\r\n", Cleartext::H1),
            (b"GET / http/1.1\r\n", Cleartext::H1),
            (b"GET / Http/1.1\r\n", Cleartext::H1),
            (b"GET / HTTP/1\r\n", Cleartext::H1),
            (b"GET / HTTP/1.10\r\n", Cleartext::H1),
            (b"GET / HTTP/x.y\r\n", Cleartext::H1),
            (b"GET / HTTP/1.1 \r\n", Cleartext::H1),
            (b"GET  /  HTTP/1.1\r\n", Cleartext::H1),
            (b"HTTP/1.1\r\n", Cleartext::H1),
            (b"\r\nGET / HTTP/1.1", Cleartext::H1),
            (b"\r\n", Cleartext::H1),
            (b"", Cleartext::H1),
            (b"INVALID CONNECTION PREFACE\r\n\r\n", Cleartext::Garbage),
            (b"\r\nINVALID CONNECTION PREFACE\r\n", Cleartext::Garbage),
            (b"GET\r\n\r\n", Cleartext::Garbage),
            (b"GET / HTTP\r\n", Cleartext::Garbage),
            (b"GET / HTTPS/1.1\r\n", Cleartext::Garbage),
            (b"GET / XHTTP/1.1\r\n", Cleartext::Garbage),
            // Only one empty line is skipped before the request line.
            (b"\r\n\r\nGET / HTTP/1.1\r\n", Cleartext::Garbage),
            (b"\x00\x01\x02\x03\r\n\r\n", Cleartext::Garbage),
            // The h2 preface's first line, then something else: a bad preface.
            (b"PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n", Cleartext::Garbage),
        ];
        for (line, want) in cases {
            let got = classify_h1(line);
            assert_eq!(got, *want, "{}", String::from_utf8_lossy(line));
        }
    }
}
