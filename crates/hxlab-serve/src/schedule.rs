//! Which response's bytes go out next, decided as late as possible and the same way on
//! HTTP/2 and HTTP/3: one rank per response ([`rank`]), highest first, ties taken in turn.
//! Sans-IO: [`Queue`] is what HTTP/2's connection asks for its next DATA frame, and on
//! HTTP/3 the same rank is quinn-proto's stream priority, whose packet builder does exactly
//! "highest first, ties in turn" (with `send_fairness` on) when it fills a packet — so both
//! protocols put the order the unit tests below check on the wire.
//!
//! The schedulers (`hxlab serve --scheduler`, docs/priorities.md):
//! - `rfc9218` (the default): urgency 0–7 in strict order. Within one urgency, responses
//!   that are not incremental go first, one at a time, in request order; then the
//!   incremental ones share the link in turn. RFC 9218 §10 leaves how the two kinds share an
//!   urgency open. We finish a non-incremental response first because it is useless until
//!   its last byte (a stylesheet, a script), while an incremental one (an image, a video)
//!   has already given something; it is also what quiche (Cloudflare) does. h2o instead
//!   interleaves the incremental ones with the first non-incremental one; that delays the
//!   non-incremental response by the incremental ones' share.
//! - `round-robin`: every response in turn, one DATA frame (HTTP/2) or packet's worth
//!   (HTTP/3) each, whatever its priority: what the origin did before priorities.
//! - `fifo`: one response at a time, in request order, whatever its priority.
//!
//! Request order is the stream id's order; it is kept in the rank's low 23 bits, so past
//! 8,388,607 requests on one connection the later ones tie (and share in turn).

pub use hxlab_core::sched::Scheduler;
use hxlab_wire::priority::Priority;

/// Request order kept in a rank (23 bits); later requests saturate and tie.
const ORDER_MAX: u64 = (1 << 23) - 1;

/// A response's rank under `scheduler`: higher goes first, equal ranks take turns. `order`
/// is its request's place on the connection (the stream id's order).
pub fn rank(scheduler: Scheduler, priority: Priority, order: u64) -> i32 {
    let order = order.min(ORDER_MAX) as i32;
    match scheduler {
        Scheduler::RoundRobin => 0,
        Scheduler::Fifo => -order,
        Scheduler::Rfc9218 => {
            let urgency = i32::from(7 - priority.urgency.min(7)) << 24;
            if priority.incremental {
                urgency
            } else {
                urgency | 1 << 23 | (ORDER_MAX as i32 - order)
            }
        }
    }
}

/// Priority frames (PRIORITY, PRIORITY_UPDATE) a connection may send beyond
/// [`PRIORITY_FRAMES_PER_REQUEST`] per request it opened; a browser sends a few per request
/// it reprioritizes, an attack millions.
pub(crate) const PRIORITY_FRAME_BUDGET: u64 = 1000;
pub(crate) const PRIORITY_FRAMES_PER_REQUEST: u64 = 16;
/// PRIORITY_UPDATEs kept for requests not started yet (RFC 9218 §7 lets a server bound
/// them).
pub(crate) const EARLY_UPDATES: usize = 16;

/// Past the priority frame budget: the connection closes (HTTP/2 GOAWAY
/// ENHANCE_YOUR_CALM, HTTP/3 H3_EXCESSIVE_LOAD).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Calm;

/// What one connection keeps of priority signals beside its streams, the same on HTTP/2 and
/// HTTP/3: the count of priority frames against their budget, and the PRIORITY_UPDATEs for
/// requests not started yet (at most [`EARLY_UPDATES`]; an update wins over the request's
/// own header when it starts).
#[derive(Debug, Default)]
pub(crate) struct Signals {
    frames: u64,
    early: Vec<(u64, Priority)>,
}

impl Signals {
    /// Counts one priority frame of a connection that opened `requests` requests.
    pub(crate) fn count_frame(&mut self, requests: u64) -> Result<(), Calm> {
        self.frames += 1;
        if self.frames > PRIORITY_FRAME_BUDGET + PRIORITY_FRAMES_PER_REQUEST * requests {
            return Err(Calm);
        }
        Ok(())
    }

    /// Keeps an update for request `id`, not started yet (the latest one per request).
    pub(crate) fn keep_early(&mut self, id: u64, p: Priority) {
        if let Some(e) = self.early.iter_mut().find(|(s, _)| *s == id) {
            e.1 = p;
        } else if self.early.len() < EARLY_UPDATES {
            self.early.push((id, p));
        }
    }

    /// The update kept for request `id`, which starts now.
    pub(crate) fn take_early(&mut self, id: u64) -> Option<Priority> {
        let i = self.early.iter().position(|(s, _)| *s == id)?;
        Some(self.early.swap_remove(i).1)
    }

    /// Updates kept for requests not started yet.
    #[cfg(test)]
    pub(crate) fn early_len(&self) -> usize {
        self.early.len()
    }
}

/// The responses of one connection that have bytes to send, and whose turn it is.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    scheduler: Scheduler,
    entries: Vec<Entry>,
    /// Counts turns served, so equal ranks go least recently served first.
    turn: u64,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    rank: i32,
    last_turn: u64,
}

impl Queue {
    pub(crate) fn new(scheduler: Scheduler) -> Queue {
        Queue {
            scheduler,
            entries: Vec::new(),
            turn: 0,
        }
    }

    pub(crate) fn scheduler(&self) -> Scheduler {
        self.scheduler
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Stream `id` (request order `order`) has bytes to send. A stream that joins takes its
    /// turn after those that wait already.
    pub(crate) fn push(&mut self, id: u64, priority: Priority, order: u64) {
        let rank = rank(self.scheduler, priority, order);
        match self.entries.iter_mut().find(|e| e.id == id) {
            Some(e) => e.rank = rank,
            None => {
                self.turn += 1;
                self.entries.push(Entry {
                    id,
                    rank,
                    last_turn: self.turn,
                });
            }
        }
    }

    /// Stream `id`'s priority changed (PRIORITY_UPDATE); false if it is not queued.
    pub(crate) fn reprioritize(&mut self, id: u64, priority: Priority, order: u64) -> bool {
        let rank = rank(self.scheduler, priority, order);
        match self.entries.iter_mut().find(|e| e.id == id) {
            Some(e) => {
                e.rank = rank;
                true
            }
            None => false,
        }
    }

    /// Stream `id` has nothing more to send (done, reset).
    pub(crate) fn remove(&mut self, id: u64) {
        if let Some(i) = self.entries.iter().position(|e| e.id == id) {
            self.entries.swap_remove(i);
        }
    }

    /// The stream whose bytes go next among those `ready` accepts: the highest rank, the
    /// least recently served among equals. It counts as served now.
    pub(crate) fn next(&mut self, mut ready: impl FnMut(u64) -> bool) -> Option<u64> {
        let mut best: Option<usize> = None;
        for (i, e) in self.entries.iter().enumerate() {
            let better = match best {
                None => true,
                Some(b) => {
                    let b = &self.entries[b];
                    (e.rank, std::cmp::Reverse(e.last_turn))
                        > (b.rank, std::cmp::Reverse(b.last_turn))
                }
            };
            if better && ready(e.id) {
                best = Some(i);
            }
        }
        let i = best?;
        self.turn += 1;
        self.entries[i].last_turn = self.turn;
        Some(self.entries[i].id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(urgency: u8, incremental: bool) -> Priority {
        Priority {
            urgency,
            incremental,
        }
    }

    /// A sans-IO model of a connection on virtual time: streams with sizes (in frames) and
    /// priorities; each tick sends one frame of the stream the queue picks; `events` change
    /// priorities or add streams at given ticks. Returns the stream of every frame, in order.
    fn wire_order(
        scheduler: Scheduler,
        streams: &[(u64, Priority, u32)],
        events: &[(usize, Event)],
    ) -> Vec<u64> {
        let mut q = Queue::new(scheduler);
        let mut left: std::collections::HashMap<u64, u32> = Default::default();
        let mut prio: std::collections::HashMap<u64, Priority> = Default::default();
        for &(id, pr, frames) in streams {
            q.push(id, pr, id);
            left.insert(id, frames);
            prio.insert(id, pr);
        }
        let mut out = Vec::new();
        for tick in 0..10_000 {
            for (at, ev) in events {
                if *at == tick {
                    match *ev {
                        Event::Update(id, pr) => {
                            prio.insert(id, pr);
                            q.reprioritize(id, pr, id);
                        }
                        Event::Open(id, pr, frames) => {
                            q.push(id, pr, id);
                            left.insert(id, frames);
                            prio.insert(id, pr);
                        }
                    }
                }
            }
            let Some(id) = q.next(|_| true) else {
                if events.iter().all(|(at, _)| *at <= tick) {
                    break;
                }
                continue;
            };
            out.push(id);
            let l = left.get_mut(&id).unwrap();
            *l -= 1;
            if *l == 0 {
                q.remove(id);
            }
        }
        out
    }

    #[derive(Clone, Copy)]
    enum Event {
        Update(u64, Priority),
        Open(u64, Priority, u32),
    }

    fn runs(order: &[u64]) -> Vec<(u64, usize)> {
        let mut r: Vec<(u64, usize)> = Vec::new();
        for &id in order {
            match r.last_mut() {
                Some((last, n)) if *last == id => *n += 1,
                _ => r.push((id, 1)),
            }
        }
        r
    }

    #[test]
    fn rfc9218_serves_urgency_first_then_request_order() {
        // Requested in id order: a bulk at u=5, a stylesheet at u=0, a script at u=1, an
        // image at u=5 and another at u=3.
        let streams = [
            (1, p(5, false), 3),
            (3, p(0, false), 2),
            (5, p(1, false), 2),
            (7, p(5, false), 1),
            (9, p(3, false), 1),
        ];
        let got = wire_order(Scheduler::Rfc9218, &streams, &[]);
        assert_eq!(runs(&got), vec![(3, 2), (5, 2), (9, 1), (1, 3), (7, 1)]);
    }

    #[test]
    fn rfc9218_shares_an_urgency_among_incremental_responses_after_the_others() {
        let streams = [
            (1, p(3, true), 3),
            (3, p(3, false), 2),
            (5, p(3, true), 3),
            (7, p(3, false), 1),
            (9, p(2, true), 2),
        ];
        let got = wire_order(Scheduler::Rfc9218, &streams, &[]);
        // u=2 first (alone, so in a row), then u=3's non-incremental in request order, then
        // u=3's incremental ones alternating.
        assert_eq!(got, vec![9, 9, 3, 3, 7, 1, 5, 1, 5, 1, 5]);
    }

    #[test]
    fn rfc9218_follows_priority_updates_and_late_arrivals_mid_flight() {
        let streams = [(1, p(5, false), 6), (3, p(5, false), 4)];
        let events = [
            // After two frames of the bulk, an urgent request arrives...
            (2, Event::Open(5, p(0, false), 2)),
            // ...and later the second bulk is made more urgent than the first.
            (5, Event::Update(3, p(4, false))),
        ];
        let got = wire_order(Scheduler::Rfc9218, &streams, &events);
        assert_eq!(runs(&got), vec![(1, 2), (5, 2), (1, 1), (3, 4), (1, 3)]);
    }

    #[test]
    fn round_robin_ignores_priorities_and_takes_turns() {
        let streams = [(1, p(5, false), 3), (3, p(0, false), 2), (5, p(7, true), 1)];
        let got = wire_order(Scheduler::RoundRobin, &streams, &[]);
        assert_eq!(got, vec![1, 3, 5, 1, 3, 1]);
        // A late stream joins the back of the line, not the front.
        let got = wire_order(
            Scheduler::RoundRobin,
            &[(1, p(3, false), 3), (3, p(3, false), 3)],
            &[(1, Event::Open(5, p(0, false), 2))],
        );
        assert_eq!(got, vec![1, 3, 1, 5, 3, 1, 5, 3]);
    }

    #[test]
    fn fifo_sends_whole_responses_in_request_order() {
        let streams = [(1, p(5, false), 3), (3, p(0, false), 2), (5, p(1, true), 1)];
        let events = [
            (1, Event::Update(5, p(0, false))),
            (2, Event::Open(7, p(0, false), 1)),
        ];
        let got = wire_order(Scheduler::Fifo, &streams, &events);
        assert_eq!(got, vec![1, 1, 1, 3, 3, 5, 7]);
    }

    #[test]
    fn a_stream_that_cannot_send_yields_to_the_next_one() {
        let mut q = Queue::new(Scheduler::Rfc9218);
        q.push(1, p(0, false), 1);
        q.push(3, p(5, false), 3);
        // The urgent stream has no window: the bulk goes; once it has, it goes first.
        assert_eq!(q.next(|id| id != 1), Some(3));
        assert_eq!(q.next(|_| true), Some(1));
        assert_eq!(q.next(|_| false), None);
        q.remove(1);
        q.remove(3);
        assert_eq!(q.len(), 0);
        assert_eq!(q.next(|_| true), None);
    }

    #[test]
    fn ranks_order_as_the_scheduler_does_and_fit_quinn_priorities() {
        // The rank is what HTTP/3 hands to quinn-proto: its order must be the queue's.
        let mut ranked: Vec<(i32, u8, bool, u64)> = Vec::new();
        for u in 0..=7u8 {
            for inc in [false, true] {
                for order in [0, 1, 2, 1000, ORDER_MAX, u64::MAX] {
                    ranked.push((rank(Scheduler::Rfc9218, p(u, inc), order), u, inc, order));
                }
            }
        }
        for a in &ranked {
            for b in &ranked {
                let (ra, ua, ia, oa) = *a;
                let (rb, ub, ib, ob) = *b;
                if ua < ub {
                    assert!(ra > rb, "u={ua} before u={ub}");
                } else if ua == ub && !ia && ib {
                    assert!(ra > rb, "non-incremental before incremental at u={ua}");
                } else if ua == ub && !ia && !ib && oa.min(ORDER_MAX) < ob.min(ORDER_MAX) {
                    assert!(ra > rb, "request order at u={ua}");
                } else if ua == ub && ia && ib {
                    assert_eq!(ra, rb, "incremental responses tie at u={ua}");
                }
            }
        }
        assert!(rank(Scheduler::Fifo, p(7, false), 1) > rank(Scheduler::Fifo, p(0, false), 2));
        assert_eq!(
            rank(Scheduler::RoundRobin, p(0, false), 1),
            rank(Scheduler::RoundRobin, p(7, true), 9)
        );
    }
}
