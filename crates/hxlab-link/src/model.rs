//! The emulation model, sans-IO: a pure function of (time, direction, packet) → deliveries.
//!
//! Nothing here reads a clock or touches a file descriptor. The driver (see `shell`) feeds
//! packets with [`Model::on_packet`], collects the ones whose time has come with
//! [`Model::poll_deliver`] and sleeps until [`Model::next_wakeup`]. Time is a [`Duration`] since
//! the link started, so tests drive virtual time deterministically under a seed.
//!
//! Each direction is a [`Pipe`], a chain of small stages in the order a packet meets them:
//! 1. loss at ingress (random or Gilbert-Elliott), like netem's `loss`;
//! 2. a finite queue in packets or bytes, drop-tail at enqueue or CoDel at dequeue;
//! 3. the bottleneck server: unlimited, a bit rate with serialisation delay, or a
//!    mahimahi-format delivery trace (1500-byte opportunities);
//! 4. propagation delay plus jitter, without reordering unless asked.
//!
//! Events are processed at the virtual times they happen, not at the time the driver happens
//! to call: a late wakeup does not change when a packet left the queue or arrives.

use crate::config::{Aqm, DirectionConfig, Loss, QueueLimit, Server};
use crate::trace::{Trace, TRACE_OPPORTUNITY_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::time::Duration;

/// Which way a packet travels: `Down` is outside → inside (server → client), `Up` the reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Outside (HOST, the server side) to inside (CLIENT).
    Down,
    /// Inside (CLIENT) to outside (HOST).
    Up,
}

/// Anything the model can carry: it only needs the packet's size on the wire.
///
/// A unit may stand for several wire packets: a GSO super-packet on a pure-delay link (see
/// `shell` and [`DirectionConfig::is_pure_delay`]) travels whole. Then [`Packet::segments`]
/// says how many wire packets it is and [`Packet::wire_len`] is the sum of their sizes
/// (each with its own headers), and every counter counts those, never the unit as one.
pub trait Packet {
    /// Size in bytes as counted by rate limits, traces and byte queues (the IP packet; for a
    /// super-packet, the sum of its segments' IP packets).
    fn wire_len(&self) -> usize;

    /// How many wire packets this unit stands for: 1 for an ordinary packet.
    fn segments(&self) -> u32 {
        1
    }
}

impl Packet for Vec<u8> {
    fn wire_len(&self) -> usize {
        self.len()
    }
}

/// A deterministic pseudo-random generator (xoshiro256**, seeded by splitmix64): stable across
/// crate versions, so a `--seed` reproduces the same drops and jitter forever.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    /// A generator whose whole sequence is fixed by `seed`.
    pub fn new(seed: u64) -> Rng {
        let mut g = hxlab_core::SplitMix64::new(seed);
        Rng {
            s: [g.next_u64(), g.next_u64(), g.next_u64(), g.next_u64()],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }
}

/// Per-direction counters, as written by `--stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct DirectionStats {
    /// Packets that entered the link.
    pub packets_in: u64,
    /// Bytes that entered the link.
    pub bytes_in: u64,
    /// Packets delivered at the far end.
    pub packets_out: u64,
    /// Bytes delivered at the far end.
    pub bytes_out: u64,
    /// Packets dropped by the loss model.
    pub dropped_loss: u64,
    /// Packets dropped because the queue was full (drop-tail).
    pub dropped_queue: u64,
    /// Packets dropped by CoDel at dequeue.
    pub dropped_aqm: u64,
    /// Packets dropped because the driver's in-flight safety cap was hit.
    pub dropped_overflow: u64,
    /// UDP packets dropped because the direction blocks UDP ([`DirectionConfig::block_udp`]).
    #[serde(default)]
    pub dropped_udp: u64,
    /// Sum of queueing delays (arrival to start of transmission) in nanoseconds.
    pub queue_delay_sum_ns: u128,
    /// Largest queueing delay seen, in nanoseconds.
    pub queue_delay_max_ns: u64,
    /// Packets whose queueing delay was counted.
    pub queue_delay_count: u64,
}

impl DirectionStats {
    /// Mean queueing delay, or zero when nothing was queued.
    pub fn queue_delay_mean(&self) -> Duration {
        if self.queue_delay_count == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.queue_delay_sum_ns / self.queue_delay_count as u128) as u64)
    }

    /// All drops together.
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_queue
            + self.dropped_aqm
            + self.dropped_overflow
            + self.dropped_udp
    }

    fn record_queue_delay(&mut self, d: Duration, segments: u32) {
        let ns = d.as_nanos();
        self.queue_delay_sum_ns += ns * segments as u128;
        self.queue_delay_max_ns = self.queue_delay_max_ns.max(ns as u64);
        self.queue_delay_count += segments as u64;
    }
}

/// Gilbert-Elliott state: are we in the bad (bursty loss) state.
#[derive(Debug, Clone)]
struct LossStage {
    loss: Loss,
    bad: bool,
}

impl LossStage {
    /// Decides whether the next packet is lost; GE transitions first, then draws in the
    /// new state, in the order netem's `loss_gilb_ell` does.
    fn lose(&mut self, rng: &mut Rng) -> bool {
        match self.loss {
            Loss::None => false,
            Loss::Random(p) => rng.chance(p),
            Loss::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                if self.bad {
                    if rng.chance(r) {
                        self.bad = false;
                    }
                } else if rng.chance(p) {
                    self.bad = true;
                }
                rng.chance(if self.bad { loss_bad } else { loss_good })
            }
        }
    }
}

struct Queued<P> {
    pkt: P,
    len: usize,
    segs: u32,
    arrival: Duration,
}

/// CoDel state (RFC 8289), applied when a packet is taken from the queue.
#[derive(Debug, Clone, Default)]
struct Codel {
    first_above_time: Option<Duration>,
    drop_next: Duration,
    count: u32,
    last_count: u32,
    dropping: bool,
}

/// CoDel's defaults from RFC 8289: 5 ms target, 100 ms interval.
const CODEL_TARGET: Duration = Duration::from_millis(5);
const CODEL_INTERVAL: Duration = Duration::from_millis(100);
/// Safety cap on packets held in the delay line, so a huge delay at an unlimited rate cannot
/// take unbounded memory; beyond it packets count as `dropped_overflow`. Counted in wire
/// packets ([`Packet::segments`]), so a delay line of super-packets holds as many bytes as
/// one of ordinary packets would.
pub const MAX_IN_FLIGHT: usize = 65_536;

fn control_law(t: Duration, count: u32) -> Duration {
    t + CODEL_INTERVAL.div_f64((count.max(1) as f64).sqrt())
}

/// The bottleneck's state.
enum ServerState {
    Unlimited,
    Rate {
        bits_per_sec: u64,
        free_at: Duration,
    },
    Trace {
        trace: std::sync::Arc<Trace>,
        next_opp: u64,
        head_left: Option<usize>,
    },
}

/// One direction of the link: loss → queue → server → delay line.
pub struct Pipe<P> {
    delay: Duration,
    jitter: Duration,
    reorder: bool,
    loss: LossStage,
    limit: QueueLimit,
    aqm: Aqm,
    codel: Codel,
    queue: VecDeque<Queued<P>>,
    queue_bytes: usize,
    server: ServerState,
    /// Packets on the wire, ordered by delivery time.
    in_flight: VecDeque<(Duration, P)>,
    /// Wire packets ([`Packet::segments`]) in `in_flight`.
    in_flight_segs: usize,
    last_delivery: Duration,
    rng: Rng,
    block_udp: bool,
    stats: DirectionStats,
    /// Dropped packets, kept for a capture ([`Pipe::keep_dropped`]); None: let go at once.
    dropped: Option<Vec<(P, Dropped)>>,
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// The loss stage (random or Gilbert-Elliott).
    Loss,
    /// The queue was full.
    Queue,
    /// CoDel dropped it.
    Aqm,
    /// The driver's in-flight cap was hit.
    Overflow,
}

impl Dropped {
    /// The reason in a word, as captures and counters name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Dropped::Loss => "loss",
            Dropped::Queue => "queue",
            Dropped::Aqm => "aqm",
            Dropped::Overflow => "overflow",
        }
    }
}

impl<P: Packet> Pipe<P> {
    /// From now on dropped packets are kept until [`Pipe::take_dropped`] (for a capture of
    /// what the link dropped); by default they are let go at once.
    pub fn keep_dropped(&mut self) {
        self.dropped.get_or_insert_with(Vec::new);
    }

    /// The packets dropped since the last call, with why (empty unless
    /// [`Pipe::keep_dropped`] was called).
    pub fn take_dropped(&mut self) -> std::vec::Drain<'_, (P, Dropped)> {
        self.dropped.get_or_insert_with(Vec::new).drain(..)
    }

    fn drop_packet(&mut self, pkt: P, why: Dropped) {
        if let Some(kept) = &mut self.dropped {
            kept.push((pkt, why));
        }
    }

    /// A pipe with the given parameters; `seed` fixes its loss and jitter draws.
    pub fn new(cfg: &DirectionConfig, seed: u64) -> Pipe<P> {
        let server = match &cfg.server {
            Server::Unlimited => ServerState::Unlimited,
            Server::Rate(bps) => ServerState::Rate {
                bits_per_sec: *bps,
                free_at: Duration::ZERO,
            },
            Server::Trace(t) => ServerState::Trace {
                trace: t.clone(),
                next_opp: 0,
                head_left: None,
            },
        };
        Pipe {
            delay: cfg.delay,
            jitter: cfg.jitter,
            reorder: cfg.reorder,
            loss: LossStage {
                loss: cfg.loss,
                bad: false,
            },
            limit: cfg.queue,
            aqm: cfg.aqm,
            codel: Codel::default(),
            queue: VecDeque::new(),
            queue_bytes: 0,
            server,
            in_flight: VecDeque::new(),
            in_flight_segs: 0,
            last_delivery: Duration::ZERO,
            rng: Rng::new(seed),
            block_udp: cfg.block_udp,
            stats: DirectionStats::default(),
            dropped: None,
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &DirectionStats {
        &self.stats
    }

    /// True when this direction drops UDP ([`DirectionConfig::block_udp`]); the driver, which
    /// knows what a packet carries, asks before it hands one over.
    pub fn blocks_udp(&self) -> bool {
        self.block_udp
    }

    /// `segments` UDP packets of `len` wire bytes in all arrive at `now` on a direction that
    /// blocks UDP: counted in, and dropped (`dropped_udp`).
    pub fn drop_udp(&mut self, now: Duration, segments: u32, len: usize) {
        self.advance(now);
        self.stats.packets_in += segments as u64;
        self.stats.bytes_in += len as u64;
        self.stats.dropped_udp += segments as u64;
    }

    /// Packets waiting in the queue (not yet on the wire).
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// A packet arrives at `now`. Dropped packets are simply dropped (and counted).
    ///
    /// A unit of several segments ([`Packet::segments`]) meets the loss stage once, as a
    /// whole; a driver that wants each segment to meet it on its own (a super-packet kept
    /// whole where it can be) uses [`Pipe::ingress`] per segment and then
    /// [`Pipe::on_survivor`] for what is left.
    pub fn on_packet(&mut self, now: Duration, pkt: P) {
        self.advance(now);
        let len = pkt.wire_len();
        let segs = pkt.segments();
        self.stats.packets_in += segs as u64;
        self.stats.bytes_in += len as u64;
        if self.loss.lose(&mut self.rng) {
            self.stats.dropped_loss += segs as u64;
            self.drop_packet(pkt, Dropped::Loss);
            return;
        }
        self.enqueue(now, pkt, len, segs);
    }

    /// One wire packet of `len` bytes arrives at `now` and meets the loss stage: counted in,
    /// and true when it is lost (counted as a loss). Exactly what [`Pipe::on_packet`] does
    /// before the queue, so a driver can draw the loss of each segment of a super-packet in
    /// order (the same draws as for the segments one by one), then hand the segments that
    /// survived to [`Pipe::on_survivor`] in as few units as it likes.
    pub fn ingress(&mut self, now: Duration, len: usize) -> bool {
        self.advance(now);
        self.stats.packets_in += 1;
        self.stats.bytes_in += len as u64;
        let lost = self.loss.lose(&mut self.rng);
        if lost {
            self.stats.dropped_loss += 1;
        }
        lost
    }

    /// A unit whose segments all passed [`Pipe::ingress`] at `now` (and were counted there)
    /// enters the queue: the rest of [`Pipe::on_packet`].
    pub fn on_survivor(&mut self, now: Duration, pkt: P) {
        self.advance(now);
        let len = pkt.wire_len();
        let segs = pkt.segments();
        self.enqueue(now, pkt, len, segs);
    }

    fn enqueue(&mut self, now: Duration, pkt: P, len: usize, segs: u32) {
        let full = match self.limit {
            QueueLimit::Unlimited => false,
            QueueLimit::Packets(n) => self.queue.len() >= n,
            QueueLimit::Bytes(n) => self.queue_bytes + len > n,
        };
        if full {
            self.stats.dropped_queue += segs as u64;
            self.drop_packet(pkt, Dropped::Queue);
            return;
        }
        if self.queue.is_empty() {
            if let ServerState::Trace {
                trace,
                next_opp,
                head_left,
            } = &mut self.server
            {
                // Opportunities that passed while the queue was empty are wasted.
                if head_left.is_none() {
                    *next_opp = (*next_opp).max(trace.first_opportunity_at_or_after(now));
                }
            }
        }
        self.queue.push_back(Queued {
            pkt,
            len,
            segs,
            arrival: now,
        });
        self.queue_bytes += len;
        self.advance(now);
    }

    /// The next packet whose delivery time is at or before `now`, in delivery order.
    pub fn poll_deliver(&mut self, now: Duration) -> Option<P> {
        self.advance(now);
        match self.in_flight.front() {
            Some((at, _)) if *at <= now => {}
            _ => return None,
        }
        let (_, pkt) = self.in_flight.pop_front()?;
        self.in_flight_segs -= pkt.segments() as usize;
        self.stats.packets_out += pkt.segments() as u64;
        self.stats.bytes_out += pkt.wire_len() as u64;
        Some(pkt)
    }

    /// When something next happens (a delivery or a departure from the queue), if anything is
    /// pending at all.
    pub fn next_wakeup(&self) -> Option<Duration> {
        let delivery = self.in_flight.front().map(|(t, _)| *t);
        let service = self.next_service_time();
        match (delivery, service) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn next_service_time(&self) -> Option<Duration> {
        let head = self.queue.front()?;
        Some(match &self.server {
            ServerState::Unlimited => head.arrival,
            ServerState::Rate { free_at, .. } => (*free_at).max(head.arrival),
            ServerState::Trace {
                trace, next_opp, ..
            } => trace.opportunity_time(*next_opp),
        })
    }

    /// Runs every queue departure due at or before `now`, at its own virtual time.
    fn advance(&mut self, now: Duration) {
        while let Some(t) = self.next_service_time() {
            if t > now {
                break;
            }
            match &mut self.server {
                ServerState::Unlimited => {
                    if let Some(q) = self.dequeue(t) {
                        self.send(t, q.pkt);
                    }
                }
                ServerState::Rate { bits_per_sec, .. } => {
                    let bps = *bits_per_sec;
                    if let Some(q) = self.dequeue(t) {
                        let ser = serialisation(q.len, bps);
                        if let ServerState::Rate { free_at, .. } = &mut self.server {
                            *free_at = t + ser;
                        }
                        self.send(t + ser, q.pkt);
                    }
                }
                ServerState::Trace { .. } => self.trace_opportunity(t),
            }
        }
    }

    /// One 1500-byte delivery opportunity at time `t`: whole packets go while budget lasts; a
    /// packet larger than what is left carries its remainder to the next opportunity.
    fn trace_opportunity(&mut self, t: Duration) {
        let mut budget = TRACE_OPPORTUNITY_BYTES;
        while budget > 0 {
            let left = match &self.server {
                ServerState::Trace {
                    head_left: Some(l), ..
                } => *l,
                _ => {
                    // Starting a new head packet: this is where it leaves the queue proper.
                    match self.peek_dequeue(t) {
                        Some(len) => len,
                        None => break,
                    }
                }
            };
            if left <= budget {
                budget -= left;
                if let ServerState::Trace { head_left, .. } = &mut self.server {
                    *head_left = None;
                }
                if let Some(q) = self.queue.pop_front() {
                    self.queue_bytes -= q.len;
                    self.send(t, q.pkt);
                }
            } else {
                if let ServerState::Trace { head_left, .. } = &mut self.server {
                    *head_left = Some(left - budget);
                }
                budget = 0;
            }
        }
        if let ServerState::Trace { next_opp, .. } = &mut self.server {
            *next_opp += 1;
        }
    }

    /// For traces: applies the AQM to the head and returns its length, leaving it queued
    /// (it may take several opportunities to go).
    fn peek_dequeue(&mut self, t: Duration) -> Option<usize> {
        let q = self.dequeue(t)?;
        let len = q.len;
        self.queue_bytes += q.len;
        self.queue.push_front(q);
        Some(len)
    }

    /// Takes the head of the queue at time `t`, applying CoDel when configured.
    fn dequeue(&mut self, t: Duration) -> Option<Queued<P>> {
        match self.aqm {
            Aqm::DropTail => {
                let q = self.pop(t)?;
                Some(q)
            }
            Aqm::Codel => self.codel_dequeue(t),
        }
    }

    fn pop(&mut self, t: Duration) -> Option<Queued<P>> {
        let q = self.queue.pop_front()?;
        self.queue_bytes -= q.len;
        self.stats
            .record_queue_delay(t.saturating_sub(q.arrival), q.segs);
        Some(q)
    }

    /// RFC 8289's dequeue: returns the packet and whether its sojourn makes dropping allowed.
    fn codel_pop(&mut self, t: Duration) -> Option<(Queued<P>, bool)> {
        let q = self.pop(t)?;
        let sojourn = t.saturating_sub(q.arrival);
        let mut ok_to_drop = false;
        if sojourn < CODEL_TARGET || self.queue_bytes <= TRACE_OPPORTUNITY_BYTES {
            self.codel.first_above_time = None;
        } else {
            match self.codel.first_above_time {
                None => self.codel.first_above_time = Some(t + CODEL_INTERVAL),
                Some(f) if t >= f => ok_to_drop = true,
                Some(_) => {}
            }
        }
        Some((q, ok_to_drop))
    }

    fn codel_dequeue(&mut self, t: Duration) -> Option<Queued<P>> {
        let Some((mut q, mut ok)) = self.codel_pop(t) else {
            self.codel.dropping = false;
            return None;
        };
        if self.codel.dropping {
            if !ok {
                self.codel.dropping = false;
            }
            while self.codel.dropping && t >= self.codel.drop_next {
                self.stats.dropped_aqm += q.segs as u64;
                self.drop_packet(q.pkt, Dropped::Aqm);
                self.codel.count += 1;
                match self.codel_pop(t) {
                    None => {
                        self.codel.dropping = false;
                        return None;
                    }
                    Some((next, next_ok)) => {
                        q = next;
                        ok = next_ok;
                    }
                }
                if !ok {
                    self.codel.dropping = false;
                } else {
                    self.codel.drop_next = control_law(self.codel.drop_next, self.codel.count);
                }
            }
        } else if ok {
            self.stats.dropped_aqm += q.segs as u64;
            self.drop_packet(q.pkt, Dropped::Aqm);
            let next = self.codel_pop(t);
            self.codel.dropping = true;
            let delta = self.codel.count.saturating_sub(self.codel.last_count);
            self.codel.count =
                if delta > 1 && t.saturating_sub(self.codel.drop_next) < 16 * CODEL_INTERVAL {
                    delta
                } else {
                    1
                };
            self.codel.drop_next = control_law(t, self.codel.count);
            self.codel.last_count = self.codel.count;
            match next {
                None => return None,
                Some((n, _)) => q = n,
            }
        }
        Some(q)
    }

    /// A packet leaves the bottleneck at `t`: propagation delay and jitter decide its arrival.
    fn send(&mut self, t: Duration, pkt: P) {
        let segs = pkt.segments() as usize;
        if self.in_flight_segs + segs > MAX_IN_FLIGHT {
            self.stats.dropped_overflow += segs as u64;
            self.drop_packet(pkt, Dropped::Overflow);
            return;
        }
        self.in_flight_segs += segs;
        let mut at = t + self.delay;
        if !self.jitter.is_zero() {
            // Uniform in [-jitter, +jitter], never before the packet left.
            let offset = (self.rng.unit() * 2.0 - 1.0) * self.jitter.as_secs_f64();
            at = if offset >= 0.0 {
                at + Duration::from_secs_f64(offset)
            } else {
                at.saturating_sub(Duration::from_secs_f64(-offset)).max(t)
            };
        }
        if self.reorder {
            let idx = self.in_flight.partition_point(|(x, _)| *x <= at);
            self.in_flight.insert(idx, (at, pkt));
        } else {
            // FIFO like a real wire: a packet never overtakes the one before it.
            at = at.max(self.last_delivery);
            self.last_delivery = at;
            self.in_flight.push_back((at, pkt));
        }
    }
}

/// Time to put `len` bytes on a wire of `bits_per_sec`, rounded to the nearest nanosecond.
pub fn serialisation(len: usize, bits_per_sec: u64) -> Duration {
    let bits = len as u128 * 8 * 1_000_000_000;
    let bps = bits_per_sec.max(1) as u128;
    Duration::from_nanos(((bits + bps / 2) / bps) as u64)
}

/// Both directions of a link: the sans-IO core that `shell` drives.
pub struct Model<P> {
    down: Pipe<P>,
    up: Pipe<P>,
}

impl<P: Packet> Model<P> {
    /// A model for `cfg`; each direction gets its own generator derived from `cfg.seed`.
    pub fn new(cfg: &crate::LinkConfig) -> Model<P> {
        Model {
            down: Pipe::new(&cfg.down, direction_seed(cfg.seed, Direction::Down)),
            up: Pipe::new(&cfg.up, direction_seed(cfg.seed, Direction::Up)),
        }
    }

    /// The pipe for one direction.
    pub fn pipe(&mut self, dir: Direction) -> &mut Pipe<P> {
        match dir {
            Direction::Down => &mut self.down,
            Direction::Up => &mut self.up,
        }
    }

    /// A packet enters the link at `now` travelling `dir`.
    pub fn on_packet(&mut self, now: Duration, dir: Direction, pkt: P) {
        self.pipe(dir).on_packet(now, pkt);
    }

    /// The next due delivery in either direction (the earlier one first).
    pub fn poll_deliver(&mut self, now: Duration) -> Option<(Direction, P)> {
        self.down.advance(now);
        self.up.advance(now);
        let d = self
            .down
            .in_flight
            .front()
            .map(|(t, _)| *t)
            .filter(|t| *t <= now);
        let u = self
            .up
            .in_flight
            .front()
            .map(|(t, _)| *t)
            .filter(|t| *t <= now);
        match (d, u) {
            (Some(a), Some(b)) if b < a => self.up.poll_deliver(now).map(|p| (Direction::Up, p)),
            (Some(_), _) => self.down.poll_deliver(now).map(|p| (Direction::Down, p)),
            (None, Some(_)) => self.up.poll_deliver(now).map(|p| (Direction::Up, p)),
            (None, None) => None,
        }
    }

    /// When the driver must call again, if anything is pending.
    pub fn next_wakeup(&self) -> Option<Duration> {
        match (self.down.next_wakeup(), self.up.next_wakeup()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Counters of both directions.
    pub fn stats(&self) -> crate::LinkStats {
        crate::LinkStats {
            down: self.down.stats.clone(),
            up: self.up.stats.clone(),
        }
    }
}

/// The seed of one direction's generator, so the two directions draw independently.
pub fn direction_seed(seed: u64, dir: Direction) -> u64 {
    match dir {
        Direction::Down => seed ^ 0x646f_776e,
        Direction::Up => seed ^ 0x7570_0000_7570,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Aqm, DirectionConfig, Loss, QueueLimit, Server};
    use crate::trace::Trace;
    use std::sync::Arc;

    #[derive(Debug, Clone, PartialEq)]
    struct P {
        id: u32,
        len: usize,
    }

    impl Packet for P {
        fn wire_len(&self) -> usize {
            self.len
        }
    }

    fn ms(x: u64) -> Duration {
        Duration::from_millis(x)
    }

    /// Runs the pipe to completion on virtual time, returning (id, delivery time).
    fn drain(pipe: &mut Pipe<P>) -> Vec<(u32, Duration)> {
        let mut out = Vec::new();
        let mut guard = 0;
        while let Some(t) = pipe.next_wakeup() {
            while let Some(p) = pipe.poll_deliver(t) {
                out.push((p.id, t));
            }
            guard += 1;
            assert!(guard < 10_000_000, "model did not settle");
        }
        out
    }

    fn cfg() -> DirectionConfig {
        DirectionConfig {
            queue: QueueLimit::Unlimited,
            ..DirectionConfig::default()
        }
    }

    #[test]
    fn a_direction_that_blocks_udp_counts_what_it_drops() {
        let mut pipe: Pipe<P> = Pipe::new(
            &DirectionConfig {
                block_udp: true,
                ..cfg()
            },
            1,
        );
        assert!(pipe.blocks_udp());
        pipe.drop_udp(ms(1), 3, 3 * 1200);
        let s = pipe.stats();
        assert_eq!((s.packets_in, s.bytes_in, s.dropped_udp), (3, 3600, 3));
        assert_eq!(s.dropped(), 3);
        assert_eq!(pipe.poll_deliver(ms(1000)), None);
        assert!(!Pipe::<P>::new(&cfg(), 1).blocks_udp());
    }

    #[test]
    fn delay_is_exact() {
        let mut pipe = Pipe::new(
            &DirectionConfig {
                delay: ms(20),
                ..cfg()
            },
            1,
        );
        pipe.on_packet(ms(5), P { id: 1, len: 100 });
        assert_eq!(pipe.next_wakeup(), Some(ms(25)));
        assert_eq!(pipe.poll_deliver(ms(25) - Duration::from_nanos(1)), None);
        assert_eq!(pipe.poll_deliver(ms(25)), Some(P { id: 1, len: 100 }));
        assert_eq!(pipe.next_wakeup(), None);
        assert_eq!(pipe.stats().packets_out, 1);
    }

    #[test]
    fn rate_serialises_exactly_even_when_polled_late() {
        // 1500 bytes at 1 Mbit/s take exactly 12 ms.
        let c = DirectionConfig {
            delay: ms(10),
            server: Server::Rate(1_000_000),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..3 {
            pipe.on_packet(Duration::ZERO, P { id, len: 1500 });
        }
        assert_eq!(
            drain(&mut pipe),
            vec![(0, ms(22)), (1, ms(34)), (2, ms(46))]
        );
        // Polling only once, long after: the same times are honoured, in order.
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..3 {
            pipe.on_packet(Duration::ZERO, P { id, len: 1500 });
        }
        let got: Vec<u32> = std::iter::from_fn(|| pipe.poll_deliver(ms(1000)))
            .map(|p| p.id)
            .collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(serialisation(1500, 10_000_000), Duration::from_micros(1200));
        // A packet arriving after the link went idle is not charged for the idle time.
        let mut pipe = Pipe::new(&c, 1);
        pipe.on_packet(Duration::ZERO, P { id: 0, len: 1500 });
        pipe.on_packet(ms(100), P { id: 1, len: 1500 });
        assert_eq!(drain(&mut pipe), vec![(0, ms(22)), (1, ms(122))]);
    }

    #[test]
    fn rate_goodput_matches_rate() {
        let c = DirectionConfig {
            server: Server::Rate(10_000_000),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..1000 {
            pipe.on_packet(Duration::from_micros(id as u64 * 100), P { id, len: 1250 });
        }
        let out = drain(&mut pipe);
        // 1000 × 1250 B × 8 / 10 Mbit/s = 1 s exactly.
        assert_eq!(out.last().map(|x| x.1), Some(ms(1000)));
    }

    #[test]
    fn queue_overflow_drops_tail() {
        let c = DirectionConfig {
            server: Server::Rate(1_000_000),
            queue: QueueLimit::Packets(5),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..20 {
            pipe.on_packet(Duration::ZERO, P { id, len: 1500 });
        }
        // One on the wire, five queued, the rest dropped at the tail.
        assert_eq!(pipe.stats().dropped_queue, 14);
        let ids: Vec<u32> = drain(&mut pipe).into_iter().map(|x| x.0).collect();
        assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);
        let c = DirectionConfig {
            server: Server::Rate(1_000_000),
            queue: QueueLimit::Bytes(4500),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..10 {
            pipe.on_packet(Duration::ZERO, P { id, len: 1500 });
        }
        assert_eq!(pipe.stats().dropped_queue, 6);
        assert_eq!(pipe.stats().queue_delay_max_ns, 0);
        drain(&mut pipe);
        assert_eq!(pipe.stats().queue_delay_max_ns, ms(36).as_nanos() as u64);
    }

    #[test]
    fn trace_capacity_is_honoured() {
        // 10 opportunities per 10 ms = 1500 B/ms = 12 Mbit/s.
        let trace = Arc::new(Trace::parse("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "t").unwrap());
        let c = DirectionConfig {
            server: Server::Trace(trace.clone()),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..1000 {
            pipe.on_packet(Duration::ZERO, P { id, len: 1500 });
        }
        let out = drain(&mut pipe);
        assert_eq!(out.len(), 1000);
        assert_eq!(out[0].1, ms(1));
        assert_eq!(out[999].1, ms(1000));
        // Small packets share an opportunity; big ones carry over.
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..4 {
            pipe.on_packet(Duration::ZERO, P { id, len: 750 });
        }
        assert_eq!(
            drain(&mut pipe),
            vec![(0, ms(1)), (1, ms(1)), (2, ms(2)), (3, ms(2))]
        );
        let mut pipe = Pipe::new(&c, 1);
        for id in 0..3 {
            pipe.on_packet(Duration::ZERO, P { id, len: 1000 });
        }
        assert_eq!(drain(&mut pipe), vec![(0, ms(1)), (1, ms(2)), (2, ms(2))]);
        // Opportunities while the queue was empty are wasted, not banked.
        let mut pipe = Pipe::new(&c, 1);
        pipe.on_packet(Duration::from_micros(4500), P { id: 9, len: 1500 });
        assert_eq!(drain(&mut pipe), vec![(9, ms(5))]);
        assert_eq!(trace.average_bits_per_sec(), 12_000_000.0);
    }

    #[test]
    fn random_loss_within_binomial_bounds() {
        let n = 100_000u32;
        let c = DirectionConfig {
            loss: Loss::Random(0.01),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 42);
        let mut delivered = 0u64;
        for id in 0..n {
            pipe.on_packet(Duration::ZERO, P { id, len: 100 });
            delivered += std::iter::from_fn(|| pipe.poll_deliver(Duration::ZERO)).count() as u64;
        }
        // Mean 1000, sd ≈ 31.5: ±4 sd is far beyond 99.99 %.
        let lost = pipe.stats().dropped_loss;
        assert!((874..=1126).contains(&lost), "lost {lost}");
        assert_eq!(delivered, n as u64 - lost);
    }

    /// A unit of several wire packets.
    #[derive(Debug)]
    struct Run {
        ids: Vec<u32>,
    }

    impl Packet for Run {
        fn wire_len(&self) -> usize {
            self.ids.len() * 1500
        }
        fn segments(&self) -> u32 {
            self.ids.len() as u32
        }
    }

    /// Loss drawn per segment through `ingress` with the survivors passed on in runs makes
    /// exactly the decisions, counts and deliveries of the same segments passed one by one
    /// (random and Gilbert-Elliott loss, 10 ms delay).
    #[test]
    fn ingress_per_segment_then_runs_equals_one_by_one() {
        for loss in [
            Loss::Random(0.05),
            Loss::GilbertElliott {
                p: 0.02,
                r: 0.2,
                loss_bad: 0.7,
                loss_good: 0.001,
            },
        ] {
            let c = DirectionConfig {
                loss,
                delay: ms(10),
                ..cfg()
            };
            let mut single: Pipe<P> = Pipe::new(&c, 9);
            let mut runs: Pipe<Run> = Pipe::new(&c, 9);
            let (mut got_single, mut got_runs) = (Vec::new(), Vec::new());
            for burst in 0..2000u32 {
                let now = Duration::from_micros(burst as u64 * 50);
                let ids: Vec<u32> = (burst * 45..burst * 45 + 45).collect();
                for &id in &ids {
                    single.on_packet(now, P { id, len: 1500 });
                }
                let mut run = Vec::new();
                for &id in &ids {
                    if runs.ingress(now, 1500) {
                        if !run.is_empty() {
                            runs.on_survivor(
                                now,
                                Run {
                                    ids: std::mem::take(&mut run),
                                },
                            );
                        }
                    } else {
                        run.push(id);
                    }
                }
                if !run.is_empty() {
                    runs.on_survivor(now, Run { ids: run });
                }
                while let Some(p) = single.poll_deliver(now) {
                    got_single.push((p.id, now));
                }
                while let Some(r) = runs.poll_deliver(now) {
                    got_runs.extend(r.ids.iter().map(|id| (*id, now)));
                }
            }
            got_single.extend(drain(&mut single));
            while let Some(t) = runs.next_wakeup() {
                while let Some(r) = runs.poll_deliver(t) {
                    got_runs.extend(r.ids.iter().map(|id| (*id, t)));
                }
            }
            assert_eq!(got_runs, got_single, "{loss:?}");
            assert_eq!(runs.stats(), single.stats(), "{loss:?}");
            assert!(single.stats().dropped_loss > 1000, "{:?}", single.stats());
        }
    }

    #[test]
    fn gilbert_elliott_is_bursty() {
        let n = 200_000u32;
        let c = DirectionConfig {
            loss: Loss::GilbertElliott {
                p: 0.01,
                r: 0.1,
                loss_bad: 1.0,
                loss_good: 0.0,
            },
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 7);
        let mut delivered = std::collections::HashSet::new();
        for id in 0..n {
            pipe.on_packet(Duration::ZERO, P { id, len: 100 });
            delivered
                .extend(std::iter::from_fn(|| pipe.poll_deliver(Duration::ZERO)).map(|p| p.id));
        }
        let mut bursts = 0u32;
        let mut lost = 0u32;
        let mut in_burst = false;
        for id in 0..n {
            let l = !delivered.contains(&id);
            if l {
                lost += 1;
                if !in_burst {
                    bursts += 1;
                }
            }
            in_burst = l;
        }
        // Stationary loss p/(p+r) ≈ 9.1 %; mean burst 1/r = 10 packets (random loss: ~1.1).
        let rate = lost as f64 / n as f64;
        assert!((0.07..0.115).contains(&rate), "loss rate {rate}");
        let mean_burst = lost as f64 / bursts as f64;
        assert!((7.0..13.0).contains(&mean_burst), "mean burst {mean_burst}");
    }

    fn jittery(seed: u64, reorder: bool) -> Vec<(u32, Duration)> {
        let c = DirectionConfig {
            delay: ms(20),
            jitter: ms(5),
            reorder,
            loss: Loss::Random(0.05),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, seed);
        for id in 0..2000 {
            pipe.on_packet(Duration::from_micros(id as u64 * 500), P { id, len: 1200 });
        }
        drain(&mut pipe)
    }

    #[test]
    fn deterministic_under_seed() {
        assert_eq!(jittery(3, false), jittery(3, false));
        assert_ne!(jittery(3, false), jittery(4, false));
    }

    #[test]
    fn jitter_keeps_order_unless_asked() {
        let inorder = jittery(9, false);
        assert!(inorder.windows(2).all(|w| w[0].0 < w[1].0));
        for (id, t) in &inorder {
            let sent = Duration::from_micros(*id as u64 * 500);
            assert!(*t >= sent + ms(15), "packet {id} too early");
        }
        let reordered = jittery(9, true);
        assert!(
            reordered.windows(2).any(|w| w[0].0 > w[1].0),
            "reorder allowed but none happened"
        );
        for (id, t) in &reordered {
            let d = *t - Duration::from_micros(*id as u64 * 500);
            assert!(d >= ms(15) && d <= ms(25), "packet {id} delay {d:?}");
        }
    }

    fn standing_queue(aqm: Aqm) -> (DirectionStats, Duration) {
        // 10.5 Mbit/s offered into 10 Mbit/s for 8 s: a standing queue builds; CoDel (whose
        // drop rate ramps up slowly against a flow that does not back off) must contain it.
        let c = DirectionConfig {
            server: Server::Rate(10_000_000),
            queue: QueueLimit::Packets(10_000),
            aqm,
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        let mut sent_at = std::collections::HashMap::new();
        let mut last_sojourn = Duration::ZERO;
        let mut t = Duration::ZERO;
        let mut id = 0;
        while t < ms(8000) {
            pipe.on_packet(t, P { id, len: 1500 });
            sent_at.insert(id, t);
            id += 1;
            t += Duration::from_micros(1143);
            while let Some(p) = pipe.poll_deliver(t) {
                last_sojourn = t - sent_at[&p.id];
            }
        }
        (pipe.stats().clone(), last_sojourn)
    }

    #[test]
    fn codel_drops_under_standing_queue() {
        let (tail, tail_delay) = standing_queue(Aqm::DropTail);
        let (codel, codel_delay) = standing_queue(Aqm::Codel);
        assert_eq!(tail.dropped_aqm, 0);
        assert!(tail_delay > ms(300), "drop-tail queue delay {tail_delay:?}");
        assert!(
            codel.dropped_aqm > 20,
            "codel dropped {}",
            codel.dropped_aqm
        );
        assert!(codel_delay < ms(100), "codel queue delay {codel_delay:?}");
        eprintln!(
            "drop-tail {tail_delay:?}, codel {codel_delay:?} with {} drops",
            codel.dropped_aqm
        );
    }

    /// A GSO super-packet standing for `segs` wire packets of `wire` bytes in all.
    struct Super {
        segs: u32,
        wire: usize,
    }

    impl Packet for Super {
        fn wire_len(&self) -> usize {
            self.wire
        }
        fn segments(&self) -> u32 {
            self.segs
        }
    }

    #[test]
    fn a_super_packet_is_delayed_whole_and_counted_as_its_segments() {
        let c = DirectionConfig {
            delay: ms(20),
            ..DirectionConfig::default()
        };
        assert!(c.is_pure_delay());
        let mut pipe = Pipe::new(&c, 1);
        pipe.on_packet(
            ms(1),
            Super {
                segs: 44,
                wire: 64_000,
            },
        );
        pipe.on_packet(ms(1), Super { segs: 1, wire: 52 });
        assert_eq!(pipe.next_wakeup(), Some(ms(21)));
        assert!(pipe
            .poll_deliver(ms(21) - Duration::from_nanos(1))
            .is_none());
        let got: Vec<u32> = std::iter::from_fn(|| pipe.poll_deliver(ms(21)))
            .map(|p| p.segs)
            .collect();
        assert_eq!(got, vec![44, 1], "both at arrival + delay, in order");
        let s = pipe.stats();
        assert_eq!((s.packets_in, s.bytes_in), (45, 64_052));
        assert_eq!((s.packets_out, s.bytes_out), (45, 64_052));
    }

    #[test]
    fn drops_of_a_multi_segment_unit_count_every_segment() {
        let c = DirectionConfig {
            loss: Loss::Random(1.0),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        pipe.on_packet(
            ms(0),
            Super {
                segs: 10,
                wire: 15_000,
            },
        );
        assert_eq!(pipe.stats().dropped_loss, 10);
        assert_eq!(pipe.stats().packets_in, 10);
        let c = DirectionConfig {
            server: Server::Rate(1_000_000),
            queue: QueueLimit::Packets(1),
            ..cfg()
        };
        let mut pipe = Pipe::new(&c, 1);
        for _ in 0..3 {
            pipe.on_packet(
                ms(0),
                Super {
                    segs: 3,
                    wire: 4500,
                },
            );
        }
        assert_eq!(pipe.stats().dropped_queue, 3, "the third unit, 3 packets");
    }

    #[test]
    fn a_segmented_super_packet_counts_one_packet_per_segment() {
        use crate::gso::{Csum, Gso, VnetHdr, GSO_TCPV4, VNET_HDR_LEN};
        // A TSO v4 super-packet: 20 + 20 header bytes, 10 000 payload bytes, MSS 1460.
        let mut p = vec![0u8; 40 + 10_000];
        p[0] = 0x45;
        p[9] = 6;
        p[32] = 5 << 4;
        let vh = VnetHdr {
            gso_type: GSO_TCPV4,
            gso_size: 1460,
            ..VnetHdr::default()
        };
        let g = Gso::parse(&vh, &p).unwrap();
        let mut pipe: Pipe<Vec<u8>> = Pipe::new(&cfg(), 1);
        for i in 0..g.segments() {
            let mut out = vec![0u8; 2048];
            let n = g.write_segment(i, &mut out, Csum::Full);
            pipe.on_packet(ms(0), out[VNET_HDR_LEN..n].to_vec());
        }
        let s = pipe.stats();
        assert_eq!(s.packets_in, 7, "ceil(10000 / 1460)");
        assert_eq!(s.bytes_in, 10_000 + 7 * 40);
        assert_eq!(s.bytes_in, g.wire_len() as u64);
    }

    #[test]
    fn model_serves_both_directions_in_time_order() {
        let mut lc = crate::LinkConfig::default();
        lc.down.delay = ms(10);
        lc.up.delay = ms(5);
        let mut m: Model<P> = Model::new(&lc);
        m.on_packet(Duration::ZERO, Direction::Down, P { id: 1, len: 10 });
        m.on_packet(Duration::ZERO, Direction::Up, P { id: 2, len: 10 });
        assert_eq!(m.next_wakeup(), Some(ms(5)));
        let got: Vec<_> = std::iter::from_fn(|| m.poll_deliver(ms(10)))
            .map(|(d, p)| (d, p.id))
            .collect();
        assert_eq!(got, vec![(Direction::Up, 2), (Direction::Down, 1)]);
        assert_eq!(m.stats().down.packets_out, 1);
        assert_eq!(m.stats().up.packets_out, 1);
    }
}
