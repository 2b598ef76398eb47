//! One client (a connection slot) as its sessions see it: what it sends ([`ClientCtx`]: the
//! target, the plan, the limits), where it counts (the worker's recorder), and how a session
//! ends ([`SessionEnd`]).
//!
//! Below the sessions ([`crate::session`], [`crate::h1`], [`crate::h2`], [`crate::h3`]) and
//! the worker that builds one per client: it imports neither, so the driver and the
//! protocols it drives form no cycle.

use crate::net::SharedTap;
use crate::plan::{Next, Plan};
use crate::recorder::{ErrorKind, SharedRecorder};
use crate::target::Target;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How a session ended.
#[derive(Debug)]
pub enum SessionEnd {
    /// The client has nothing more to send.
    PlanDone,
    /// The connection was closed in an orderly way (server `Connection: close`, GOAWAY,
    /// `--no-keepalive`); the client may open another.
    Closed {
        /// Responses received on the connection.
        answered: u64,
    },
    /// The connection failed; failed requests were already counted.
    Failed {
        /// Responses received before the failure.
        answered: u64,
        /// What went wrong.
        kind: ErrorKind,
        /// One line for the user.
        message: String,
    },
}

/// The header-compression factor as one client uses it (`--header-table-size`,
/// `--encoder-header-table-size`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderTables {
    /// The table our decoder keeps, advertised to the server (h2:
    /// SETTINGS_HEADER_TABLE_SIZE; h3: QPACK_MAX_TABLE_CAPACITY).
    pub decoder: u64,
    /// The most our encoder uses: it uses min(this, what the server advertised).
    pub encoder: u64,
}

impl Default for HeaderTables {
    fn default() -> Self {
        HeaderTables {
            decoder: hxlab_core::header_table::DEFAULT_HEADER_TABLE,
            encoder: hxlab_core::header_table::DEFAULT_HEADER_TABLE,
        }
    }
}

/// h2load's connection timeouts (`-T`, `-N`): when one expires, the requests in flight on
/// the connection fail as `timeout` and the client opens no other connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnectionTimeouts {
    /// `-T`: once the client has sent its last request, the longest its connection stays
    /// open for the answers.
    pub active: Option<Duration>,
    /// `-N`: the longest a connection may go without sending or receiving anything.
    pub inactivity: Option<Duration>,
}

/// One client (connection slot): what it sends, where it counts.
pub struct ClientCtx {
    /// The client's number within its worker (requests carry it, so the recorder can count
    /// per client).
    pub index: u32,
    /// The target.
    pub target: Rc<Target>,
    /// The worker's recorder.
    pub rec: SharedRecorder,
    /// What to send next and when.
    pub plan: Plan,
    /// Streams (h2/h3) or pipelined requests (h1) in flight per connection.
    pub depth: usize,
    /// Per-request timeout.
    pub timeout: Duration,
    /// Connect/handshake timeout.
    pub connect_timeout: Duration,
    /// One request per connection.
    pub no_keepalive: bool,
    /// HTTP/2: accept server push (SETTINGS_ENABLE_PUSH=1).
    pub push: bool,
    /// HTTP/1.1 requests in flight per connection (`depth`, or 1 without pipelining).
    pub h1_depth: usize,
    /// An observer of the client's QUIC connections (`hxlab trace`; TCP streams carry theirs).
    pub tap: Option<SharedTap>,
    /// The header tables to advertise and to encode with (h2: HPACK; h3: used by the QPACK
    /// wiring).
    pub header_tables: HeaderTables,
    /// `-T` and `-N`.
    pub connection_timeouts: ConnectionTimeouts,
    /// Set when a connection timeout (`-T`, `-N`) ended a connection: the client is done.
    pub(crate) retired: bool,
    /// QUIC connections this client has dialled (names its qlog files).
    pub(crate) quic_dials: u32,
    /// The index of the next URL (round-robin); set by the worker to spread its clients'
    /// first requests over the URLs.
    pub(crate) url: usize,
    /// A request taken before connecting (so no connection is opened for nothing).
    pub(crate) reserved: Option<(Instant, u64)>,
}

impl ClientCtx {
    /// The next request to send (the reserved one first), given the current time.
    #[inline]
    pub fn next(&mut self, now: Instant) -> Next {
        if let Some((scheduled, ticket)) = self.reserved.take() {
            // Closed model: latency counts from the actual send, not from the reservation.
            let scheduled = if self.plan.is_open() { scheduled } else { now };
            return Next::Go { scheduled, ticket };
        }
        self.plan.next(now)
    }

    /// A client for unit tests: `depth` in flight, 1 s timeouts, keep-alive, no push.
    #[cfg(test)]
    pub(crate) fn for_test(
        target: Rc<Target>,
        rec: SharedRecorder,
        plan: Plan,
        depth: usize,
    ) -> ClientCtx {
        ClientCtx {
            index: 0,
            target,
            rec,
            plan,
            depth,
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            no_keepalive: false,
            push: false,
            h1_depth: depth,
            tap: None,
            header_tables: HeaderTables::default(),
            connection_timeouts: ConnectionTimeouts::default(),
            retired: false,
            quic_dials: 0,
            url: 0,
            reserved: None,
        }
    }

    /// Whether a request is reserved for the next connection.
    pub(crate) fn has_reservation(&self) -> bool {
        self.reserved.is_some()
    }

    /// Takes the request due at `scheduled` (plan ticket `ticket`) before connecting.
    pub(crate) fn reserve(&mut self, scheduled: Instant, ticket: u64) {
        self.reserved = Some((scheduled, ticket));
    }

    /// Gives back a reservation that was not used.
    pub(crate) fn unreserve(&mut self) {
        if let Some((_, ticket)) = self.reserved.take() {
            self.plan.give_back(ticket);
        }
    }

    /// Index of the next URL (round-robin).
    #[inline]
    pub fn next_url(&mut self) -> usize {
        let i = self.url;
        self.url += 1;
        if self.url == self.target.requests.len() {
            self.url = 0;
        }
        i
    }

    /// Open-model requests this client will never send (0 in the closed model, whose budget
    /// is counted by the worker).
    pub(crate) fn unsent(&self) -> u64 {
        match &self.plan {
            Plan::Open { ledger, client, .. } => match ledger.borrow().schedules.get(*client) {
                Some(schedule) => match schedule.peek() {
                    None => 0,
                    Some((next, _)) => schedule.total() - schedule.taken_before(next),
                },
                None => 0,
            },
            Plan::Closed(_) | Plan::Paced(..) => 0,
        }
    }
}
