//! What an HTTP/2 server connection holds: [`Conn`] with its streams ([`Stream`], in their
//! [`Phase`]), the header block being assembled, the replies not started yet ([`Pending`]),
//! and the limits they are kept under. Below the code that acts on it (`conn.rs`: frames
//! and connection-level control, `stream.rs`: streams, `send.rs`: responses), which each add
//! their `impl Conn` and share only these types.

use super::head::{Head, ResponseHpack};
use crate::body::Source;
use crate::reply::{Opening, Reply};
use crate::routes::Ctx;
use crate::schedule::{Queue, Signals};
use crate::stats::Protocol;
use hxlab_wire::h2::control::FrameError;
use hxlab_wire::hpack::Decoder;
use hxlab_wire::priority::{Priority, Signal};
use std::sync::Arc;
use tokio::time::Instant;

/// Our stream receive window (SETTINGS_INITIAL_WINDOW_SIZE), and the connection's.
pub(super) const STREAM_WINDOW: i64 = 1 << 20;
pub(super) const CONN_WINDOW: i64 = 4 << 20;
/// The frame size we accept (we never raise SETTINGS_MAX_FRAME_SIZE).
pub(super) const MAX_FRAME: usize = 16_384;
/// Largest flow-control window (RFC 9113 §6.9.1).
pub(super) const MAX_WINDOW: i64 = (1 << 31) - 1;
/// Streams a connection may reset before their response was complete, beyond those it let
/// finish, on top of --max-streams: past it the connection gets GOAWAY ENHANCE_YOUR_CALM
/// (rapid reset, CVE-2023-44487, and resetting streams that wait for window).
pub(super) const CANCEL_BUDGET: u32 = 1000;

/// A connection error: GOAWAY with this code, then the connection closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ConnError(pub u32, pub &'static str);

impl From<FrameError> for ConnError {
    fn from(e: FrameError) -> ConnError {
        ConnError(e.code(), e.reason())
    }
}

/// The peer's SETTINGS as far as we use them.
pub(super) struct Peer {
    pub max_frame: usize,
    pub initial_window: i64,
    pub push: bool,
    pub max_streams: u32,
}

/// One HTTP/2 server connection, without I/O.
pub(crate) struct Conn {
    pub(super) ctx: Arc<Ctx>,
    pub(super) proto: Protocol,
    /// Bytes to write, in order.
    pub(crate) out: Vec<u8>,
    /// Preface bytes still expected; then whether the first SETTINGS came.
    pub(super) preface_left: usize,
    pub(super) got_settings: bool,
    pub(super) decoder: Option<Box<Decoder>>,
    /// Our HPACK encoder and the last response head it encoded.
    pub(super) hpack: ResponseHpack,
    /// Pseudo-header values of the request head being decoded.
    pub(super) scratch: Vec<u8>,
    pub(super) peer: Peer,
    /// Our send window on the connection, and what we may still receive on it.
    pub(super) send_window: i64,
    pub(super) recv_window: i64,
    pub(super) recv_unacked: i64,
    /// Open streams (client streams not yet done both ways, pushed streams being sent).
    pub(super) streams: Vec<Stream>,
    /// Streams with response data waiting to go out, and whose turn it is (the scheduler).
    pub(super) queue: Queue,
    /// Priority frames counted against their budget, and PRIORITY_UPDATEs for streams the
    /// client has not opened yet.
    pub(super) signals: Signals,
    /// The highest client stream opened, and the next stream id for a push.
    pub(super) last_client_id: u32,
    pub(super) next_push_id: u32,
    /// A header block waiting for its CONTINUATION frames.
    pub(super) block: Option<Block>,
    /// Streams we reset lately: frames the client sent before it saw the reset are ignored.
    pub(super) recent_resets: [u32; 16],
    pub(super) recent_at: usize,
    /// Streams the client reset before their response was complete, less those it let
    /// finish.
    pub(super) cancels: u32,
    /// GOAWAY sent: the last stream we take.
    pub(super) goaway: Option<u32>,
    /// A connection error was sent: nothing more is read or answered.
    pub(crate) failed: bool,
    pub(super) peer_goaway: bool,
    /// Requests opened so far (the idle check reads it).
    pub(crate) requests: u64,
    /// A clock reading taken during the current batch, if one was needed.
    pub(super) now: Option<Instant>,
    /// Some stream may be waiting for its `/static/` file lookup (set when one starts,
    /// cleared by the scan that finds none), so connections without one never scan.
    pub(super) opening: bool,
}

/// What a stream is doing on our side.
pub(super) enum Phase {
    /// The request body is still coming; the reply waits for its end.
    Body(Box<Pending>),
    /// The reply waits for its delay (`Stream::deadline`).
    Delayed(Box<Pending>),
    /// The reply waits for its `/static/` file, looked up off the runtime.
    Opening(Box<(Pending, Opening)>),
    /// The response head went out; its body goes out under flow control.
    Sending(Box<Sending>),
}

/// A response body being sent.
pub(super) struct Sending {
    pub source: Source,
    pub counted: bool,
    /// When the request's head came (the response's latency counts from it).
    pub since: Instant,
}

/// One open stream.
pub(super) struct Stream {
    pub id: u32,
    /// The client may still send on it (no END_STREAM yet).
    pub recv_open: bool,
    pub content_length: Option<u64>,
    pub received: u64,
    /// What the client may still send on the stream, and what it sent that we have not
    /// given back yet.
    pub recv_window: i64,
    pub recv_unacked: i64,
    pub phase: Phase,
    /// Our send window on the stream.
    pub window: i64,
    /// Body phase: when the body counts as stalled; Delayed: when the delay ends.
    pub deadline: Option<Instant>,
    /// Since when the stream has response data and no window to send it.
    pub blocked_since: Option<Instant>,
    /// Its response's priority as understood so far, and where it came from.
    pub priority: Priority,
    pub signal: Signal,
}

impl Stream {
    /// A stream whose request is complete (nothing more may come on it) and whose answer is
    /// in `phase`, with our send window `window`.
    pub(super) fn answering(
        id: u32,
        phase: Phase,
        window: i64,
        deadline: Option<Instant>,
        (priority, signal): (Priority, Signal),
    ) -> Stream {
        Stream {
            priority,
            signal,
            id,
            recv_open: false,
            content_length: None,
            received: 0,
            recv_window: 0,
            recv_unacked: 0,
            phase,
            window,
            deadline,
            blocked_since: None,
        }
    }
}

/// A header block waiting for CONTINUATION frames.
pub(super) struct Block {
    pub stream: u32,
    pub end_stream: bool,
    pub bytes: Vec<u8>,
    /// When its HEADERS came: the block must end within --head-timeout.
    pub since: Instant,
    /// The RFC 7540 weight its HEADERS carried, if any.
    pub weight: Option<u16>,
}

/// A reply not started yet, with what its push promises need of the request.
pub(super) struct Pending {
    pub reply: Reply,
    pub head_only: bool,
    pub scheme: Vec<u8>,
    pub authority: Vec<u8>,
    /// The request's priority and where it came from.
    pub priority: (Priority, Signal),
    /// When the request's head came.
    pub since: Instant,
}

impl Pending {
    /// `scratch`: the buffer `head` was decoded into; `since`: when the head came.
    pub fn new(
        reply: Reply,
        head: &Head,
        scratch: &[u8],
        priority: (Priority, Signal),
        since: Instant,
    ) -> Pending {
        // Only a reply that pushes needs the request's origin.
        let pushes = !reply.push.is_empty();
        let part = |r: &std::ops::Range<usize>| match pushes {
            true => scratch.get(r.clone()).unwrap_or_default().to_vec(),
            false => Vec::new(),
        };
        Pending {
            head_only: head.method == http::Method::HEAD,
            scheme: part(&head.scheme),
            authority: part(&head.authority),
            reply,
            priority,
            since,
        }
    }

    /// A reply to a request we did not route (a push, a refusal), timed from now.
    pub fn bare(reply: Reply) -> Pending {
        Pending {
            reply,
            head_only: false,
            scheme: Vec::new(),
            authority: Vec::new(),
            priority: (Priority::default(), Signal::Default),
            since: Instant::now(),
        }
    }
}
