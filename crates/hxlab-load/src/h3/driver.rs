//! The worker's QUIC driver: one UDP socket (quinn-udp, so GSO and GRO), one
//! [`quinn_proto::Endpoint`], the worker's connections, one timer, all on the worker's
//! thread (`Rc`/`RefCell`; no locks, no channels). It replaces quinn's async layer (its
//! endpoint driver, one connection driver task per connection, their channels and locks).
//!
//! One turn of the driver task:
//! 1. receive: every datagram the socket has (GRO batches, bounded), each handed to the
//!    endpoint and its connection;
//! 2. the connections that got input are polled for their events (stream readable, writable,
//!    opened, connected, lost), which are queued for their session and wake it;
//! 3. the driver yields once, so the sessions it woke run in the same tick of the worker's
//!    `LocalSet` (they were queued before it): they read the responses and write the next
//!    requests;
//! 4. only then every connection touched since the last transmit is asked for its packets
//!    ([`quinn_proto::Connection::poll_transmit`], GSO batches of up to 10 datagrams, as
//!    quinn sends them);
//! 5. timers that are due are handled (and their packets sent).
//!
//! Why this order: quinn's connection driver handles incoming datagrams and transmits in the
//! same poll, before the application ran, so a client that answers responses with new
//! requests sends an ACK-only datagram first and the requests in another. Transmitting after
//! the application ran lets the ACK ride in the packet that carries the next requests, as a
//! TCP client's ACK rides with its next request (and as event-loop QUIC clients on ngtcp2 or
//! quiche do: read, let the application react, write). This is like for like with h2: what
//! is acknowledged and when is still decided by quinn-proto with the same
//! [`quinn_proto::TransportConfig`] (ACK thresholds, delays, MTU, windows and congestion
//! controller untouched); only the order of work within one event-loop turn changes.

use super::*;
use hxlab_quic::{Datagrams, Driven, DriverConn, DriverCore, QuicSocket};
use quinn::udp::{Transmit, UdpSocketState};
use quinn_proto::{ConnectionError, DatagramEvent, Event, StreamEvent};
use std::cell::Cell;

/// Most datagrams per GSO send (quinn's `MAX_TRANSMIT_SEGMENTS`).
const MAX_SEGMENTS: usize = 10;
/// Most datagrams one connection sends before the others get their turn (quinn's
/// `MAX_TRANSMIT_DATAGRAMS`); it goes on in the next pass of the same turn.
const MAX_DATAGRAMS_PER_PASS: usize = 20;
/// Most receive calls per turn (quinn's `IO_LOOP_BOUND`); the rest waits for the next turn.
const RECV_CALLS: usize = 160;

/// One connection as the driver and its session share it.
pub struct ConnState {
    /// The quinn-proto connection, and what the transmit pass keeps of it.
    pub quic: Driven,
    /// Stream events for the session, in order.
    pub(super) events: Vec<StreamEvent>,
    /// Something happened since the session last looked (events, connected, lost).
    pub(super) changed: bool,
    /// The handshake completed.
    pub(super) connected: bool,
    /// Why the connection ended, once it did.
    pub(super) lost: Option<ConnectionError>,
    /// The session's task.
    session: Option<Waker>,
    /// Others waiting for a change (the dialer, the 0-RTT verdict, the control stream).
    watchers: Vec<Waker>,
}

impl ConnState {
    fn wake(&mut self) {
        self.changed = true;
        if let Some(w) = &self.session {
            w.wake_by_ref();
        }
        for w in self.watchers.drain(..) {
            w.wake();
        }
    }
}

impl DriverConn for ConnState {
    fn driven(&mut self) -> &mut Driven {
        &mut self.quic
    }
    fn deliver_events(&mut self) {
        let mut woke = false;
        while let Some(ev) = self.quic.q.poll() {
            match ev {
                Event::Connected => self.connected = true,
                Event::ConnectionLost { reason } => {
                    self.lost.get_or_insert(reason);
                }
                Event::Stream(e) => self.events.push(e),
                Event::HandshakeDataReady | Event::DatagramReceived | Event::DatagramsUnblocked => {
                    continue
                }
            }
            woke = true;
        }
        if woke {
            self.wake();
        }
    }
}

type Shared = Rc<RefCell<ConnState>>;

struct Inner {
    /// The socket (GSO sends of up to [`MAX_SEGMENTS`] datagrams), the endpoint, the
    /// connections, and the task's kick.
    core: DriverCore<ConnState>,
    /// [`Driver::close`] was called: the task ends.
    closing: Cell<bool>,
}

/// quinn-proto's `t` as quinn-udp sends it, `buf` holding its bytes (what the driver sends;
/// public for the `proto_h3` experiment).
pub fn udp_transmit<'a>(t: &quinn_proto::Transmit, buf: &'a [u8]) -> Transmit<'a> {
    Datagrams::of(t).udp(buf)
}

/// The worker's QUIC driver (cheap to clone; the driver task holds one too).
#[derive(Clone)]
pub struct Driver {
    inner: Rc<Inner>,
}

/// A connection of the driver, as a session holds it; dropping the last one closes the
/// connection (error code 0) unless it is closed already, as quinn does.
#[derive(Clone)]
pub struct QuicConn {
    driver: Driver,
    state: Shared,
}

impl Drop for QuicConn {
    fn drop(&mut self) {
        self.driver.inner.core.handle_dropped(&self.state);
    }
}

impl QuicConn {
    /// Runs `f` on the connection and has the driver transmit what it queued.
    #[inline]
    pub fn with<R>(&self, f: impl FnOnce(&mut quinn_proto::Connection) -> R) -> R {
        let mut s = self.state.borrow_mut();
        let r = f(&mut s.quic.q);
        s.quic.dirty = true;
        drop(s);
        self.driver.kick();
        r
    }

    /// Reads the shared state (no transmit).
    #[inline]
    pub fn state(&self) -> std::cell::RefMut<'_, ConnState> {
        self.state.borrow_mut()
    }

    /// Ready when the driver queued something for the session since it last looked (it
    /// then clears the flag); `cx`'s waker is woken at the next change.
    pub(super) fn poll_changed(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut s = self.state.borrow_mut();
        if s.changed {
            s.changed = false;
            return Poll::Ready(());
        }
        if !s.session.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            s.session = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Waits until `f` says something (checked at once and after every change).
    pub async fn until<R>(&self, mut f: impl FnMut(&mut ConnState) -> Option<R>) -> R {
        std::future::poll_fn(|cx| {
            let mut s = self.state.borrow_mut();
            let r = f(&mut s);
            // `f` may have written (the control stream): the driver sends it.
            s.quic.dirty = true;
            if r.is_none() && !s.watchers.iter().any(|w| w.will_wake(cx.waker())) {
                s.watchers.push(cx.waker().clone());
            }
            drop(s);
            self.driver.kick();
            r.map_or(Poll::Pending, Poll::Ready)
        })
        .await
    }

    /// Ready when the handshake completed (`Ok`) or the connection ended first.
    pub async fn established(&self) -> Result<(), ConnectionError> {
        self.until(|s| match (&s.lost, s.connected) {
            (_, true) => Some(Ok(())),
            (Some(e), false) => Some(Err(e.clone())),
            (None, false) => None,
        })
        .await
    }

    /// The 0-RTT verdict: true when the handshake completed and the server took the early
    /// data, false when it refused it or the connection ended first.
    pub async fn zero_rtt_accepted(&self) -> bool {
        self.until(|s| {
            if s.connected {
                Some(s.quic.q.accepted_0rtt())
            } else {
                s.lost.as_ref().map(|_| false)
            }
        })
        .await
    }

    /// Closes the connection with `code` (sent by the driver).
    pub fn close(&self, code: quinn_proto::VarInt) {
        self.with(|q| q.close(Instant::now(), code, Bytes::new()));
    }

    /// Why the connection ended, if it did (as quinn's `close_reason`).
    pub fn close_reason(&self) -> Option<ConnectionError> {
        let s = self.state.borrow();
        match &s.lost {
            Some(e) => Some(e.clone()),
            None if s.quic.q.is_closed() => Some(ConnectionError::LocallyClosed),
            None => None,
        }
    }

    /// The connection's counters.
    pub fn stats(&self) -> quinn_proto::ConnectionStats {
        self.state.borrow().quic.q.stats()
    }

    /// The congestion controller's name (`"reno"`, `"cubic"`, `"bbr"`).
    pub fn congestion_controller(&self) -> &'static str {
        hxlab_quic::cc::of_controller(self.state.borrow().quic.q.congestion_state())
    }

    /// Smoothed RTT.
    pub fn rtt(&self) -> Duration {
        self.state.borrow().quic.q.rtt()
    }

    /// The TLS handshake's data (ALPN, server name), once there.
    pub fn handshake_data(&self) -> Option<Box<dyn std::any::Any>> {
        self.state.borrow().quic.q.crypto_session().handshake_data()
    }
}

impl Driver {
    /// A driver on a bound, non-blocking UDP socket; starts its task on the current
    /// `LocalSet`.
    pub fn new(socket: std::net::UdpSocket) -> std::io::Result<Driver> {
        let udp = UdpSocketState::new((&socket).into())?;
        let socket = tokio::net::UdpSocket::from_std(socket)?;
        let sock = QuicSocket::new(socket, udp, MAX_SEGMENTS);
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(quinn_proto::EndpointConfig::default()),
            None,
            !sock.may_fragment(),
            None,
        );
        let inner = Rc::new(Inner {
            core: DriverCore::new(sock, endpoint),
            closing: Cell::new(false),
        });
        tokio::task::spawn_local(run(inner.clone()));
        Ok(Driver { inner })
    }

    fn kick(&self) {
        self.inner.core.kick();
    }

    /// Starts a connection (its first flight goes out in the driver's next turn).
    pub fn connect(
        &self,
        config: quinn_proto::ClientConfig,
        addr: SocketAddr,
        server_name: &str,
    ) -> Result<QuicConn, quinn_proto::ConnectError> {
        let (ch, q) = self.inner.core.endpoint.borrow_mut().connect(
            Instant::now(),
            config,
            addr,
            server_name,
        )?;
        let state = Rc::new(RefCell::new(ConnState {
            quic: Driven::new(ch, q),
            events: Vec::new(),
            changed: false,
            connected: false,
            lost: None,
            session: None,
            watchers: Vec::new(),
        }));
        {
            let mut conns = self.inner.core.conns.borrow_mut();
            if conns.len() <= ch.0 {
                conns.resize_with(ch.0 + 1, || None);
            }
            conns[ch.0] = Some(state.clone());
        }
        self.kick();
        Ok(QuicConn {
            driver: self.clone(),
            state,
        })
    }

    /// Closes every connection (code 0), sends what that queued, and stops the driver task.
    pub fn close(&self) {
        let now = Instant::now();
        for c in self.inner.core.conns.borrow().iter().flatten() {
            let mut s = c.borrow_mut();
            s.quic
                .q
                .close(now, quinn_proto::VarInt::from_u32(0), Bytes::new());
            s.quic.dirty = true;
        }
        self.inner.core.transmit(now, MAX_DATAGRAMS_PER_PASS);
        self.inner.closing.set(true);
        self.kick();
    }
}

/// The driver task (see the module docs for the turn order).
async fn run(inner: Rc<Inner>) {
    let mut timer = pin!(tokio::time::sleep(Duration::from_secs(3600)));
    let mut armed: Option<Instant> = None;
    while !inner.closing.get() {
        let readable = std::future::poll_fn(|cx| {
            let kicked = inner.core.take_kick();
            let readable = inner.core.sock.poll_recv_ready(cx);
            let fired = armed.is_some() && timer.as_mut().poll(cx).is_ready();
            if fired {
                armed = None;
            }
            if kicked || readable || fired {
                return Poll::Ready(readable);
            }
            inner.core.register(cx);
            Poll::Pending
        })
        .await;
        if readable && inner.receive(Instant::now()) {
            // The woken sessions run now (they were queued before this task), and write.
            tokio::task::yield_now().await;
        }
        let (_, next) = inner.core.end_turn(MAX_DATAGRAMS_PER_PASS).await;
        if let Some(t) = next {
            if armed != Some(t) {
                timer.as_mut().reset(t.into());
                armed = Some(t);
            }
        }
    }
}

impl Inner {
    /// Receives what the socket has (bounded) and hands it to the connections; true when a
    /// session was woken.
    fn receive(&self, now: Instant) -> bool {
        let mut response = Vec::new();
        let mut touched = false;
        let core = &self.core;
        let mut endpoint = core.endpoint.borrow_mut();
        let conns = core.conns.borrow();
        core.sock.receive(RECV_CALLS, |from, to, ecn, d| {
            match endpoint.handle(now, from, to, ecn, d, &mut response) {
                Some(DatagramEvent::ConnectionEvent(ch, ev)) => {
                    if let Some(Some(c)) = conns.get(ch.0) {
                        c.borrow_mut().quic.handle_event(ev);
                        touched = true;
                    }
                }
                Some(DatagramEvent::Response(t)) => {
                    core.sock.send_now(&t, &response);
                    response.clear();
                }
                Some(DatagramEvent::NewConnection(incoming)) => endpoint.ignore(incoming),
                None => {}
            }
        });
        drop(conns);
        if !touched {
            return false;
        }
        // Hand the input's events to the sessions (they run before anything is sent).
        let mut woke = false;
        for c in core.conns.borrow().iter().flatten() {
            let mut c = c.borrow_mut();
            if c.quic.dirty {
                c.poll_events(&mut endpoint);
                woke |= c.changed;
            }
        }
        woke
    }
}
