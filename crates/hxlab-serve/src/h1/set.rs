//! Cleartext HTTP/1.1 connections between requests, served from one epoll set per worker
//! thread instead of a task each (issue 29, goal 1: the profile of `hxlab serve` on h1 at
//! 100 B put a third of our user-space time in the task-per-connection machinery: waking,
//! scheduling and polling the task, and the readiness and waker bookkeeping of each socket).
//!
//! A set is one task. It owns its connections' sockets in an epoll set of its own (level-
//! triggered), whose descriptor the runtime watches; when it is readable the task takes the
//! ready sockets (`epoll_wait`, no timeout) and serves each from one scratch buffer: one `recv`,
//! every complete request in it answered into one buffer, one `send`. What a connection keeps
//! here between requests is its socket, its counter guard and its place in the idle order.
//!
//! Only the plain case is served here: a complete head with no body, a keep-alive answer with
//! no delay whose body is small and in memory (the answers [`super`] gathers beside their head),
//! sent whole. Anything else (an unfinished head, a request body, a refusal, a delay, a large or
//! file body, `Connection: close`, a send the socket does not take whole) hands the connection
//! to the task-per-connection server ([`super::serve_from`]) with the bytes not yet handled and
//! the output not yet sent, in order; it stays there. Routing is pure (a replaying origin,
//! whose answers are counted, does not use sets), so a request routed here and again there is
//! answered once.
//!
//! Limits: a connection idle for `--idle-timeout` is closed (connections are kept in the order
//! of their last answer, one timer for the oldest); at shutdown every connection here is between
//! requests, and is closed, as the task server closes an idle one.

use super::{head, inline_body, serve_from, After, Taken, COPY_BODY, WRITE_BATCH};
use crate::routes::Ctx;
use crate::stats::{ConnectionGuard, Protocol};
use http::Method;
use hxlab_wire::h1_request::{BodyLength, HeadReader};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// Ready sockets taken from the epoll set at once.
const EVENTS: usize = 256;
/// Bytes read at once.
const READ: usize = 64 * 1024;
/// The token of the set's eventfd (new connections wait in the inbox).
const WAKE: u64 = u64::MAX;
/// No slot (the ends of the idle order).
const NIL: u32 = u32::MAX;
/// The output buffer's capacity kept between turns; one that grew past it (a head of many
/// response fields, a large error page) is given back.
const KEEP_OUT: usize = WRITE_BATCH + 2 * COPY_BODY;

/// The sets of a server's cleartext port, one per worker thread; new connections are dealt to
/// them in turn.
pub(crate) struct Sets {
    inboxes: Vec<Arc<Inbox>>,
    next: AtomicUsize,
}

/// Connections handed to a set and not yet taken in, and the eventfd that wakes it for them.
struct Inbox {
    new: Mutex<Vec<(std::net::TcpStream, ConnectionGuard)>>,
    wake: OwnedFd,
}

impl Sets {
    /// Starts `n` sets as tracked tasks of the current runtime (they end at shutdown).
    pub(crate) fn start(ctx: &Arc<Ctx>, n: usize) -> io::Result<Sets> {
        let mut inboxes = Vec::with_capacity(n);
        for _ in 0..n.max(1) {
            let (set, epoll, inbox) = Set::new(ctx.clone())?;
            ctx.tracker.spawn(set.run(epoll));
            inboxes.push(inbox);
        }
        Ok(Sets {
            inboxes,
            next: AtomicUsize::new(0),
        })
    }

    /// Gives a connection (counted by `guard`) to the next set; on failure it is closed.
    pub(crate) fn adopt(&self, tcp: tokio::net::TcpStream, guard: ConnectionGuard) {
        let Ok(tcp) = tcp.into_std() else {
            return;
        };
        let k = self.next.fetch_add(1, Ordering::Relaxed) % self.inboxes.len();
        let inbox = &self.inboxes[k];
        inbox
            .new
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((tcp, guard));
        let one: u64 = 1;
        // SAFETY: an 8-byte write from a live u64 to the eventfd this inbox owns. A full
        // counter (EAGAIN) means the set is woken already.
        let _ = unsafe { libc::write(inbox.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }
}

/// One connection of a set.
struct Slot {
    tcp: std::net::TcpStream,
    _guard: ConnectionGuard,
    /// Told apart from an earlier connection in the same slot (epoll events carry both).
    generation: u32,
    /// When its last answer went out (or it came in).
    last: Instant,
    /// Neighbours in the idle order (oldest first).
    older: u32,
    newer: u32,
}

struct Set {
    ctx: Arc<Ctx>,
    /// The epoll set's descriptor, owned by [`Set::run`]'s `AsyncFd`, which outlives the set.
    epoll: RawFd,
    inbox: Arc<Inbox>,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    generation: u32,
    oldest: u32,
    newest: u32,
    read: Box<[u8]>,
    out: Vec<u8>,
    events: Box<[libc::epoll_event]>,
    now: Instant,
}

/// A libc result: the value, or the OS error.
fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn epoll_ctl(epoll: RawFd, op: libc::c_int, fd: RawFd, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event {
        events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
        u64: token,
    };
    // SAFETY: both descriptors are open and ours; the event lives on this frame.
    check(unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) }).map(|_| ())
}

impl Set {
    fn new(ctx: Arc<Ctx>) -> io::Result<(Set, AsyncFd<OwnedFd>, Arc<Inbox>)> {
        // SAFETY: plain descriptor-creating calls; each result is checked and owned at once.
        let epoll =
            unsafe { OwnedFd::from_raw_fd(check(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) };
        // SAFETY: as above.
        let wake = unsafe {
            OwnedFd::from_raw_fd(check(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            ))?)
        };
        epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            wake.as_raw_fd(),
            WAKE,
        )?;
        let inbox = Arc::new(Inbox {
            new: Mutex::new(Vec::new()),
            wake,
        });
        let set = Set {
            ctx,
            epoll: epoll.as_raw_fd(),
            inbox: inbox.clone(),
            slots: Vec::new(),
            free: Vec::new(),
            generation: 0,
            oldest: NIL,
            newest: NIL,
            read: vec![0; READ].into_boxed_slice(),
            out: Vec::new(),
            events: vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS].into_boxed_slice(),
            now: Instant::now(),
        };
        // SAFETY: an OwnedFd's descriptor is open and the same for as long as it is owned.
        let epoll =
            unsafe { AsyncFd::register_with_interest(epoll, tokio::io::Interest::READABLE) }?;
        Ok((set, epoll, inbox))
    }

    /// Serves until shutdown, then closes every connection still here.
    async fn run(mut self, epoll: AsyncFd<OwnedFd>) {
        let mut shutdown = self.ctx.shutdown.clone();
        let idle = self.ctx.limits.idle_timeout;
        let timer = tokio::time::sleep(idle);
        // One wait for shutdown for the whole run (a new one each turn would register and
        // unregister with the channel each time).
        let changed = shutdown.changed();
        tokio::pin!(timer, changed);
        loop {
            // Biased: a shutdown (or a dropped sender) ends the loop before any other turn.
            tokio::select! {
                biased;
                _ = &mut changed => break,
                ready = epoll.readable() => {
                    let Ok(mut guard) = ready else { break };
                    // Readiness is cleared only when the set had nothing ready: every
                    // later arrival wakes it again.
                    if !self.turn() {
                        guard.clear_ready();
                    }
                }
                () = &mut timer => {
                    self.now = Instant::now();
                    self.sweep();
                    let next = self.oldest_deadline().unwrap_or(self.now + idle);
                    timer.as_mut().reset(next);
                }
            }
        }
        // The connections close here (no epoll_ctl: the set's descriptor goes with them).
        drop(self);
        drop(epoll);
    }

    /// When the oldest connection's idle time runs out.
    fn oldest_deadline(&self) -> Option<Instant> {
        let slot = self.slots.get(self.oldest as usize)?.as_ref()?;
        Some(slot.last + self.ctx.limits.idle_timeout)
    }

    /// Closes the connections idle for `--idle-timeout`.
    fn sweep(&mut self) {
        while let Some(deadline) = self.oldest_deadline() {
            if deadline > self.now {
                return;
            }
            self.remove(self.oldest);
        }
    }

    /// Takes in new connections and serves the ready ones. Returns whether there may be more
    /// ready now (the set had some this turn).
    fn turn(&mut self) -> bool {
        let mut events = std::mem::take(&mut self.events);
        // SAFETY: our epoll descriptor and a buffer of `events.len()` events; no waiting.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll,
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                0,
            )
        };
        if n <= 0 {
            self.events = events;
            return n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted;
        }
        self.now = Instant::now();
        for ev in &events[..n as usize] {
            let token = ev.u64;
            if token == WAKE {
                self.take_in();
            } else {
                self.ready(token as u32, (token >> 32) as u32);
            }
        }
        self.events = events;
        true
    }

    /// Adds the connections waiting in the inbox.
    fn take_in(&mut self) {
        let mut count = 0u64;
        // SAFETY: an 8-byte read into a live u64 from our eventfd (resets its counter).
        let _ = unsafe {
            libc::read(
                self.inbox.wake.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                8,
            )
        };
        let new = std::mem::take(&mut *self.inbox.new.lock().unwrap_or_else(|e| e.into_inner()));
        for (tcp, guard) in new {
            self.insert(tcp, guard);
        }
    }

    fn insert(&mut self, tcp: std::net::TcpStream, guard: ConnectionGuard) {
        let index = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < NIL as usize => {
                self.slots.push(None);
                (self.slots.len() - 1) as u32
            }
            None => return,
        };
        self.generation = self.generation.wrapping_add(1);
        let token = u64::from(index) | (u64::from(self.generation) << 32);
        let epoll = self.epoll;
        if epoll_ctl(epoll, libc::EPOLL_CTL_ADD, tcp.as_raw_fd(), token).is_err() {
            self.free.push(index);
            return;
        }
        self.slots[index as usize] = Some(Slot {
            tcp,
            _guard: guard,
            generation: self.generation,
            last: self.now,
            older: NIL,
            newer: NIL,
        });
        self.link_newest(index);
    }

    /// Takes a slot out of the set and the idle order.
    fn take(&mut self, index: u32) -> Option<Slot> {
        let slot = self.slots.get_mut(index as usize)?.take()?;
        self.unlink(slot.older, slot.newer);
        self.free.push(index);
        let epoll = self.epoll;
        let _ = epoll_ctl(epoll, libc::EPOLL_CTL_DEL, slot.tcp.as_raw_fd(), 0);
        Some(slot)
    }

    /// Closes a connection.
    fn remove(&mut self, index: u32) {
        drop(self.take(index));
    }

    fn unlink(&mut self, older: u32, newer: u32) {
        // No neighbour on a side: the slot was that end of the order.
        match self.slot_mut(older) {
            Some(s) => s.newer = newer,
            None => self.oldest = newer,
        }
        match self.slot_mut(newer) {
            Some(s) => s.older = older,
            None => self.newest = older,
        }
    }

    fn link_newest(&mut self, index: u32) {
        let newest = self.newest;
        if let Some(s) = self.slot_mut(newest) {
            s.newer = index;
        }
        if let Some(s) = self.slot_mut(index) {
            s.older = newest;
            s.newer = NIL;
        }
        self.newest = index;
        if self.oldest == NIL {
            self.oldest = index;
        }
    }

    fn slot_mut(&mut self, index: u32) -> Option<&mut Slot> {
        self.slots.get_mut(index as usize)?.as_mut()
    }

    /// Serves what a ready connection sent.
    fn ready(&mut self, index: u32, generation: u32) {
        let Some(slot) = self.slots.get(index as usize).and_then(Option::as_ref) else {
            return;
        };
        if slot.generation != generation {
            return;
        }
        let fd = slot.tcp.as_raw_fd();
        // SAFETY: recv into our own buffer from a socket this set owns (non-blocking).
        let n = unsafe { libc::recv(fd, self.read.as_mut_ptr().cast(), self.read.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error().kind();
            if e != io::ErrorKind::WouldBlock && e != io::ErrorKind::Interrupted {
                self.remove(index);
            }
            return;
        }
        if n == 0 {
            // The client closed between requests.
            self.remove(index);
            return;
        }
        let n = n as usize;
        let mut out = std::mem::take(&mut self.out);
        let at = self.answer(n, &mut out);
        let sent = if out.is_empty() {
            Ok(0)
        } else {
            // SAFETY: send from our own buffer on a socket this set owns (non-blocking).
            let rc = unsafe { libc::send(fd, out.as_ptr().cast(), out.len(), libc::MSG_NOSIGNAL) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                    _ => Err(e),
                }
            } else {
                Ok(rc as usize)
            }
        };
        match sent {
            Err(_) => self.remove(index),
            Ok(sent) if sent < out.len() || at < n => {
                let taken = Taken {
                    held: self.read[at..n].to_vec(),
                    out: out[sent..].to_vec(),
                };
                self.hand_off(index, taken);
            }
            Ok(_) => {
                // Answered whole: the newest in the idle order.
                let now = self.now;
                let (older, newer) = match self.slot_mut(index) {
                    Some(s) => {
                        s.last = now;
                        (s.older, s.newer)
                    }
                    None => return,
                };
                if self.newest != index {
                    self.unlink(older, newer);
                    self.link_newest(index);
                }
            }
        }
        out.clear();
        if out.capacity() > KEEP_OUT {
            out = Vec::new();
        }
        self.out = out;
    }

    /// Answers the plain requests at the start of `read[..n]` into `out`, until `out` holds a
    /// write batch. Returns the bytes used: where the first request not answered starts (or
    /// `n`). The turn never answers more than one batch: a client that pipelines and does not
    /// read gets the rest answered by the task server, which answers only as its socket drains
    /// (issue 38: 64 KiB of pipelined `GET /bytes/16k` was 28 MB of output here).
    fn answer(&self, n: usize, out: &mut Vec<u8>) -> usize {
        let ctx = &*self.ctx;
        let max = ctx.limits.max_header_size as usize;
        let input = &self.read[..n];
        let mut at = 0;
        while at < n && out.len() < WRITE_BATCH {
            let Ok(Some((used, head))) = HeadReader::default().read(&input[at..], max) else {
                return at;
            };
            let after = After::of(&head);
            if head.body != BodyLength::None || after == After::Close {
                return at;
            }
            let method = head::method(&head);
            let reply = head::route(ctx, &head, &method, Protocol::H1);
            let body = if method == Method::HEAD {
                Some(&[][..])
            } else {
                inline_body(&reply.body)
            };
            // A delay, or a `/static/` file to look up off the runtime: the task server's.
            let Some(body) = body.filter(|_| reply.ready_now()) else {
                return at;
            };
            let head_len = head::write(out, ctx, &reply, after);
            ctx.stats.request_head_bytes(Protocol::H1, used as u64);
            ctx.stats.response_head_bytes(Protocol::H1, head_len);
            out.extend_from_slice(body);
            if reply.counted {
                ctx.stats.body_bytes(Protocol::H1, body.len() as u64);
                ctx.stats.request_done(Protocol::H1, self.now);
            }
            at += used;
        }
        at
    }

    /// Moves a connection to the task-per-connection server with what it brings.
    fn hand_off(&mut self, index: u32, taken: Taken) {
        let Some(slot) = self.take(index) else {
            return;
        };
        let Slot {
            tcp, _guard: guard, ..
        } = slot;
        if let Ok(tcp) = tokio::net::TcpStream::from_std(tcp) {
            let ctx = self.ctx.clone();
            self.ctx
                .tracker
                .spawn(serve_from(tcp, ctx, Protocol::H1, guard, taken));
        }
    }
}
