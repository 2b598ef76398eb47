//! What a QUIC driver's task shares with its connection handles, the same in both drivers
//! (the load client's and the origin's): the socket, the endpoint, the connections by their
//! quinn-proto handle, and the kick a handle gives the task when it touched a connection.

use crate::socket::{DriverConn, QuicSocket};
use bytes::Bytes;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Context, Waker};
use std::time::Instant;

/// A driver's shared state, on the driver's thread (`Rc`, no locks).
pub struct DriverCore<C> {
    /// The socket.
    pub sock: QuicSocket,
    /// The quinn-proto endpoint.
    pub endpoint: RefCell<quinn_proto::Endpoint>,
    /// Live connections, by their quinn-proto handle.
    pub conns: RefCell<Vec<Option<Rc<RefCell<C>>>>>,
    /// The driver task, and whether something woke it since its last turn.
    waker: RefCell<Option<Waker>>,
    kicked: Cell<bool>,
}

impl<C: DriverConn> DriverCore<C> {
    /// A driver on `sock` and `endpoint`, with no connection yet.
    pub fn new(sock: QuicSocket, endpoint: quinn_proto::Endpoint) -> DriverCore<C> {
        DriverCore {
            sock,
            endpoint: RefCell::new(endpoint),
            conns: RefCell::new(Vec::new()),
            waker: RefCell::new(None),
            kicked: Cell::new(false),
        }
    }

    /// Wakes the driver task: a connection was touched and may have something to send. Many
    /// kicks before the task runs wake it once.
    #[inline]
    pub fn kick(&self) {
        if !self.kicked.replace(true) {
            if let Some(w) = &*self.waker.borrow() {
                w.wake_by_ref();
            }
        }
    }

    /// For the task's wait: whether it was kicked since it last asked (the flag is cleared).
    #[inline]
    pub fn take_kick(&self) -> bool {
        self.kicked.replace(false)
    }

    /// The task waits: `cx`'s waker is the one [`DriverCore::kick`] wakes.
    #[inline]
    pub fn register(&self, cx: &Context<'_>) {
        let mut w = self.waker.borrow_mut();
        if !w.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *w = Some(cx.waker().clone());
        }
    }

    /// The transmit pass over every connection ([`QuicSocket::transmit`], `per_pass`
    /// datagrams per connection per pass). Returns the next timeout.
    #[inline]
    pub fn transmit(&self, now: Instant, per_pass: usize) -> Option<Instant> {
        let mut endpoint = self.endpoint.borrow_mut();
        let mut conns = self.conns.borrow_mut();
        self.sock.transmit(now, &mut endpoint, &mut conns, per_pass)
    }

    /// The end of the driver task's turn: once the socket takes sends again (if one was held
    /// back), the transmit pass, which answers every kick so far. Returns when it ran and
    /// the next timeout.
    pub async fn end_turn(&self, per_pass: usize) -> (Instant, Option<Instant>) {
        if self.sock.is_blocked() {
            self.sock.writable().await;
        }
        let now = Instant::now();
        self.kicked.set(false);
        (now, self.transmit(now, per_pass))
    }

    /// A handle of `state` is being dropped: when only this handle and the driver's slot (or
    /// this handle alone, once the driver forgot it) hold the connection, it is closed (code
    /// 0) unless it is closed already, as quinn does.
    pub fn handle_dropped(&self, state: &Rc<RefCell<C>>) {
        if Rc::strong_count(state) <= 2 {
            let mut s = state.borrow_mut();
            let d = s.driven();
            if !d.q.is_closed() {
                d.q.close(
                    Instant::now(),
                    quinn_proto::VarInt::from_u32(0),
                    Bytes::new(),
                );
                d.dirty = true;
                drop(s);
                self.kick();
            }
        }
    }
}
