//! What both QUIC drivers on quinn-proto (the load client's,
//! crates/hxlab-load/src/h3/driver.rs, and the origin's, crates/hxlab-serve/src/h3/driver.rs)
//! share: the UDP socket with quinn-udp's state, the transmit pass over a driver's
//! connections ([`QuicSocket::transmit`], [`Driven`]) and the hand-off of endpoint events.

use bytes::BytesMut;
use quinn::udp::{EcnCodepoint, RecvMeta, Transmit, UdpSocketState, BATCH_SIZE};
use std::cell::{Cell, RefCell};
use std::io::{ErrorKind, IoSliceMut};
use std::net::{IpAddr, SocketAddr};
use std::task::{Context, Poll};
use tokio::io::Interest;

/// Largest (GRO) datagram one receive buffer takes.
const RECV_BUF: usize = 64 * 1024;

/// The UDP socket of a QUIC driver on one thread: quinn-udp's state (GSO, GRO, ECN), the
/// receive buffers, the send buffer and a send the socket would not take yet. Both
/// drivers (the load client's and the origin's) receive and send through it; what they
/// do with the datagrams is theirs.
pub struct QuicSocket {
    socket: tokio::net::UdpSocket,
    udp: UdpSocketState,
    recv_buf: RefCell<Box<[u8]>>,
    /// Where a connection's packets are built (`Connection::poll_transmit`) and sent from.
    pub send_buf: RefCell<Vec<u8>>,
    /// A send the socket would not take; its bytes are still in `send_buf`.
    blocked: Cell<Option<Datagrams>>,
    /// Datagrams of one GSO send at most, as the socket and the driver's cap allow.
    segments: usize,
}

impl QuicSocket {
    /// A bound socket registered with the thread's runtime, its quinn-udp state, and the
    /// driver's cap on datagrams per GSO send.
    pub fn new(socket: tokio::net::UdpSocket, udp: UdpSocketState, cap: usize) -> QuicSocket {
        let segments = udp.max_gso_segments().clamp(1, cap.max(1));
        QuicSocket {
            socket,
            recv_buf: RefCell::new(vec![0u8; RECV_BUF * BATCH_SIZE].into_boxed_slice()),
            send_buf: RefCell::new(Vec::with_capacity(segments * 1500)),
            blocked: Cell::new(None),
            segments,
            udp,
        }
    }

    /// Datagrams of one GSO send at most (the socket's and the driver's cap).
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// Whether datagrams may be fragmented (then no MTU discovery).
    pub fn may_fragment(&self) -> bool {
        self.udp.may_fragment()
    }

    /// Ready when the socket has datagrams (registers the task otherwise).
    pub fn poll_recv_ready(&self, cx: &mut Context<'_>) -> bool {
        matches!(self.socket.poll_recv_ready(cx), Poll::Ready(_))
    }

    /// Whether a send waits for the socket ([`QuicSocket::writable`]).
    pub fn is_blocked(&self) -> bool {
        self.blocked.get().is_some()
    }

    /// Waits until the socket takes sends again.
    pub async fn writable(&self) {
        let _ = self.socket.writable().await;
    }

    /// Receives what the socket has, at most `calls` receive calls (each a batch of GRO
    /// datagrams), and hands every datagram to `each` (its source, the address it came
    /// to, its ECN mark, its bytes: one copy per GRO batch, split per datagram).
    pub fn receive(
        &self,
        calls: usize,
        mut each: impl FnMut(SocketAddr, Option<IpAddr>, Option<quinn_proto::EcnCodepoint>, BytesMut),
    ) {
        let mut buf = self.recv_buf.borrow_mut();
        let mut metas = [RecvMeta::default(); BATCH_SIZE];
        for _ in 0..calls {
            let mut chunks = buf.chunks_mut(RECV_BUF).map(IoSliceMut::new);
            let mut iovs: [IoSliceMut; BATCH_SIZE] =
                std::array::from_fn(|_| chunks.next().expect("BATCH_SIZE chunks"));
            let n = match self.socket.try_io(Interest::READABLE, || {
                self.udp.recv((&self.socket).into(), &mut iovs, &mut metas)
            }) {
                Ok(n) => n,
                // WouldBlock: drained; other errors (ICMP unreachable) are per datagram.
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(_) => continue,
            };
            for (meta, iov) in metas.iter().zip(iovs.iter()).take(n) {
                let mut data: BytesMut = iov[..meta.len].into();
                let ecn = meta
                    .ecn
                    .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                while !data.is_empty() {
                    let d = data.split_to(meta.stride.min(data.len()));
                    each(meta.addr, meta.dst_ip, ecn, d);
                }
            }
        }
    }

    /// An endpoint's stateless answer (`buf` holding its bytes): sent if the socket takes
    /// it now, else dropped (the peer tries again).
    pub fn send_now(&self, t: &quinn_proto::Transmit, buf: &[u8]) {
        let tr = Datagrams::of(t).udp(buf);
        let _ = self.socket.try_io(Interest::WRITABLE, || {
            self.udp.send((&self.socket).into(), &tr)
        });
    }

    /// Sends `b` (its bytes in `buf`, the send buffer); false when the socket would
    /// block: it is kept, and [`QuicSocket::send_blocked`] sends it when the socket is
    /// writable again. Other errors lose the datagrams; quinn-proto's recovery sends them
    /// again.
    fn send(&self, b: Datagrams, buf: &[u8]) -> bool {
        let tr = b.udp(buf);
        match self.socket.try_io(Interest::WRITABLE, || {
            self.udp.send((&self.socket).into(), &tr)
        }) {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                self.blocked.set(Some(b));
                false
            }
            _ => true,
        }
    }

    /// Sends the send that was kept (`buf`: the send buffer, untouched since); false when
    /// the socket still would not take it.
    fn send_blocked(&self, buf: &[u8]) -> bool {
        match self.blocked.take() {
            Some(b) => self.send(b, buf),
            None => true,
        }
    }

    /// Timers, events and packets of every touched connection of `conns` (a driver's
    /// table, by quinn-proto handle); drained connections are forgotten. A connection
    /// sends at most `per_pass` datagrams before the others get their turn, then goes on
    /// in the next pass (bounded). Returns the next timeout; when the socket would not
    /// take a send, a time 1 ms away (the driver waits for [`QuicSocket::writable`]).
    pub fn transmit<C: DriverConn>(
        &self,
        now: std::time::Instant,
        endpoint: &mut quinn_proto::Endpoint,
        conns: &mut [Option<std::rc::Rc<RefCell<C>>>],
        per_pass: usize,
    ) -> Option<std::time::Instant> {
        let blocked = Some(now + std::time::Duration::from_millis(1));
        let mut buf = self.send_buf.borrow_mut();
        if !self.send_blocked(&buf) {
            return blocked;
        }
        let mut next = None;
        let mut more = true;
        for _ in 0..1000 {
            if !more {
                break;
            }
            more = false;
            next = None;
            for slot in conns.iter_mut() {
                let Some(c) = slot else { continue };
                let mut c = c.borrow_mut();
                let d = c.driven();
                if d.timeout.is_some_and(|t| t <= now) {
                    d.q.handle_timeout(now);
                    d.dirty = true;
                }
                if std::mem::take(&mut d.dirty) {
                    let drained = c.poll_events(endpoint);
                    let d = c.driven();
                    let mut sent = 0;
                    while sent < per_pass {
                        buf.clear();
                        let segments = gso_segments(d.q.current_mtu(), self.segments);
                        let Some(t) = d.q.poll_transmit(now, segments, &mut buf) else {
                            break;
                        };
                        sent += t.segment_size.map_or(1, |s| t.size.div_ceil(s));
                        if !self.send(Datagrams::of(&t), &buf) {
                            d.dirty = true;
                            return blocked;
                        }
                    }
                    if sent >= per_pass {
                        d.dirty = true;
                        more = true;
                    }
                    // Sending may have armed timers (loss detection, idle, draining).
                    d.timeout = d.q.poll_timeout();
                    if drained {
                        drop(c);
                        *slot = None;
                        continue;
                    }
                }
                if let Some(t) = c.driven().timeout {
                    next = Some(next.map_or(t, |n: std::time::Instant| n.min(t)));
                }
            }
        }
        next
    }
}

/// What [`QuicSocket::transmit`] keeps of every connection, the same in each driver: the
/// quinn-proto connection, its handle, whether it was touched, and its next timeout.
pub struct Driven {
    /// The quinn-proto connection.
    pub q: quinn_proto::Connection,
    /// The connection's handle at the endpoint.
    pub ch: quinn_proto::ConnectionHandle,
    /// Something touched it since its packets were last asked for (it may have something
    /// to send, or a timer fired).
    pub dirty: bool,
    /// quinn-proto's next timeout, as last read.
    pub timeout: Option<std::time::Instant>,
}

impl Driven {
    /// A connection the endpoint just made (touched: its first packets are due).
    pub fn new(ch: quinn_proto::ConnectionHandle, q: quinn_proto::Connection) -> Driven {
        Driven {
            q,
            ch,
            dirty: true,
            timeout: None,
        }
    }

    /// Hands it an event the endpoint routed to it (a datagram of its own); it is touched.
    pub fn handle_event(&mut self, ev: quinn_proto::ConnectionEvent) {
        self.q.handle_event(ev);
        self.dirty = true;
    }
}

/// A connection as a QUIC driver holds it: what [`QuicSocket::transmit`] needs of it.
pub trait DriverConn {
    /// Its [`Driven`] part.
    fn driven(&mut self) -> &mut Driven;
    /// Hands the connection's own events (`Connection::poll`) to whoever waits on them.
    fn deliver_events(&mut self);

    /// Hands the connection's endpoint events to `ep` and its own events to whoever waits
    /// on them, then reads the next timeout; true when the connection is drained (the
    /// endpoint forgot it).
    fn poll_events(&mut self, ep: &mut quinn_proto::Endpoint) -> bool {
        let d = self.driven();
        let mut drained = false;
        while let Some(ev) = d.q.poll_endpoint_events() {
            drained |= ev.is_drained();
            if let Some(back) = ep.handle_event(d.ch, ev) {
                d.q.handle_event(back);
            }
        }
        self.deliver_events();
        let d = self.driven();
        d.timeout = d.q.poll_timeout();
        drained
    }
}

/// Largest UDP payload of one send (an IPv4 datagram's): a GSO send's datagrams together
/// must fit. quinn-proto does not know this limit, and quinn-udp takes the kernel's
/// EMSGSIZE for a lost MTU probe (silently Ok), so a larger batch is lost and sent again.
pub const MAX_GSO_BYTES: usize = 65_507;

/// Datagrams of one GSO send for a connection whose datagrams are `mtu` bytes (quinn-proto's
/// `Connection::current_mtu`): as many as fit in [`MAX_GSO_BYTES`], at least 1, at most
/// `cap`.
#[inline]
pub fn gso_segments(mtu: u16, cap: usize) -> usize {
    (MAX_GSO_BYTES / usize::from(mtu.max(1200))).clamp(1, cap)
}

/// A batch of datagrams to send: quinn-proto's transmit without its bytes (which stay in
/// the driver's send buffer), so a send the socket would not take can wait for the next
/// turn.
#[derive(Clone, Copy, Debug)]
pub struct Datagrams {
    destination: SocketAddr,
    ecn: Option<EcnCodepoint>,
    segment_size: Option<usize>,
    src_ip: Option<IpAddr>,
    size: usize,
}

impl Datagrams {
    /// What quinn-proto asked to send.
    #[inline]
    pub fn of(t: &quinn_proto::Transmit) -> Datagrams {
        Datagrams {
            destination: t.destination,
            ecn: t.ecn.and_then(|e| EcnCodepoint::from_bits(e as u8)),
            segment_size: t.segment_size,
            src_ip: t.src_ip,
            size: t.size,
        }
    }

    /// As quinn-udp sends it, `buf` holding its bytes.
    #[inline]
    pub fn udp<'a>(&self, buf: &'a [u8]) -> Transmit<'a> {
        Transmit {
            destination: self.destination,
            ecn: self.ecn,
            contents: &buf[..self.size],
            segment_size: self.segment_size,
            src_ip: self.src_ip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gso_send_fits_one_udp_datagram_at_any_mtu() {
        for mtu in [1200u16, 1280, 1350, 1452, 1500, 9000] {
            let n = gso_segments(mtu, 64);
            assert!(n * usize::from(mtu) <= MAX_GSO_BYTES, "mtu {mtu}: {n}");
            assert!(n >= 1);
        }
        assert_eq!(gso_segments(1452, 64), 45);
        assert_eq!(gso_segments(1200, 45), 45, "capped");
        assert_eq!(gso_segments(1452, 10), 10, "the caller's cap");
    }
}
