//! What a client sends next and when: a closed-model budget shared by the clients of one
//! worker (a plain `Rc<Cell>`, never across threads), the same budget at a per-client pace
//! (h2load's `--rps`, [`Pace`]), or the client's open-model [`Schedule`], kept in the
//! worker's [`OpenLedger`] so that what was never sent or never answered can still be
//! counted when the run is cut at its deadline. A request taken from a plan and sent is a
//! [`Req`].

use crate::scheduler::Schedule;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A request in flight, as a session keeps it and the recorder counts it.
#[derive(Clone, Copy, Debug)]
pub struct Req {
    /// When the request was due.
    pub scheduled: Instant,
    /// When it was sent (the loop turn that submitted it).
    pub sent: Instant,
    /// Plan ticket (given back when the request may be sent again).
    pub ticket: u64,
    /// The client (connection slot) that sent it, numbered within its worker.
    pub client: u32,
}

/// h2load's `--rps`: a client sends its *i*-th request no earlier than *i / rps* after its
/// first. A request that could not go when due (every stream busy) goes as soon as one
/// frees, and the ones after it keep their times, so the client catches up as h2load's
/// does. Latency counts from the actual send: this is a closed-model limit, not the open
/// model's timetable.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// 1 / rps.
    every: Duration,
    /// When the next request may go (None: at once, the client's first).
    next: Option<Instant>,
}

impl Pace {
    /// At most `rps` requests per second (a positive, finite rate).
    pub fn new(rps: f64) -> Pace {
        Pace {
            every: Duration::from_secs_f64(1.0 / rps),
            next: None,
        }
    }

    /// When the next request may go, if that is later than `now`.
    fn wait(&self, now: Instant) -> Option<Instant> {
        self.next.filter(|t| *t > now)
    }

    /// A request went at `now`: the one after it is due one period after this one's slot.
    fn took(&mut self, now: Instant) {
        self.next = Some(self.next.unwrap_or(now) + self.every);
    }
}

/// The decision for the next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Send now; latency counts from `scheduled` (now, in the closed model).
    Go {
        /// When the request was due.
        scheduled: Instant,
        /// Ticket to hand back with [`Plan::give_back`] if the request is not answered.
        ticket: u64,
    },
    /// Nothing is due before this instant.
    Wait(Instant),
    /// This client has nothing more to send.
    Done,
}

/// The open-model books of one worker: every client's timetable, and the due times of the
/// requests taken from them that are not settled yet (not answered, failed or given back).
///
/// It lives outside the clients' tasks because a `-D` run ends by dropping those tasks at
/// the deadline; the worker then reads here which requests were never sent or never
/// answered. One per worker thread, shared through `Rc`.
#[derive(Debug, Default)]
pub struct OpenLedger {
    /// Client `k`'s timetable.
    pub schedules: Vec<Schedule>,
    /// Due time → number of requests taken and not settled with that due time.
    outstanding: BTreeMap<Instant, u32>,
}

/// A worker's ledger, shared by its clients' plans and its recorder.
pub type SharedLedger = Rc<RefCell<OpenLedger>>;

impl OpenLedger {
    /// Books with these client timetables.
    pub fn new(schedules: Vec<Schedule>) -> OpenLedger {
        OpenLedger {
            schedules,
            outstanding: BTreeMap::new(),
        }
    }

    fn taken(&mut self, due: Instant) {
        *self.outstanding.entry(due).or_default() += 1;
    }

    /// Client `client`'s request `ticket` (its timetable counted from `start`) was not
    /// answered: it goes back on the timetable to be sent again, and is settled.
    fn give_back(&mut self, client: usize, start: Instant, ticket: u64) {
        let Some(schedule) = self.schedules.get_mut(client) else {
            return;
        };
        let due = start + schedule.due_at(ticket);
        schedule.give_back(ticket);
        self.settled(due);
    }

    /// A request due at `due` is settled: answered, failed, or given back.
    pub fn settled(&mut self, due: Instant) {
        if let Some(n) = self.outstanding.get_mut(&due) {
            *n -= 1;
            if *n == 0 {
                self.outstanding.remove(&due);
            }
        }
    }

    /// Due times of requests taken and not settled, from `from` (inclusive) to `to`
    /// (exclusive), with their counts.
    pub fn outstanding(
        &self,
        from: Instant,
        to: Instant,
    ) -> impl Iterator<Item = (Instant, u32)> + '_ {
        let range = if from < to { from..to } else { from..from };
        self.outstanding.range(range).map(|(t, n)| (*t, *n))
    }
}

/// A client's source of requests.
#[derive(Debug)]
pub enum Plan {
    /// Closed model: take from the worker's remaining count (u64::MAX when time-bound).
    Closed(Rc<Cell<u64>>),
    /// Closed model at a pace (`--rps`): the worker's count, at most one request per
    /// [`Pace`] period for this client.
    Paced(Rc<Cell<u64>>, Pace),
    /// Open model: client `client`'s timetable in the worker's ledger, relative to `start`.
    Open {
        /// The worker's books (timetables and outstanding requests).
        ledger: SharedLedger,
        /// This client's index in `ledger.schedules`.
        client: usize,
        /// Instant of offset zero.
        start: Instant,
    },
}

impl Plan {
    /// The next request to send, given the current time.
    #[inline]
    pub fn next(&mut self, now: Instant) -> Next {
        match self {
            Plan::Closed(budget) => take(budget, now),
            Plan::Paced(budget, pace) => {
                if budget.get() == 0 {
                    return Next::Done;
                }
                if let Some(t) = pace.wait(now) {
                    return Next::Wait(t);
                }
                pace.took(now);
                take(budget, now)
            }
            Plan::Open {
                ledger,
                client,
                start,
            } => {
                let mut books = ledger.borrow_mut();
                let Some(schedule) = books.schedules.get_mut(*client) else {
                    return Next::Done;
                };
                match schedule.peek() {
                    None => Next::Done,
                    Some((_, offset)) => {
                        let due = *start + offset;
                        if due > now {
                            return Next::Wait(due);
                        }
                        let (index, _) = schedule.take().unwrap_or((0, offset));
                        books.taken(due);
                        Next::Go {
                            scheduled: due,
                            ticket: index,
                        }
                    }
                }
            }
        }
    }

    /// Whether latency counts from when a request was due rather than from its send (the
    /// open model's correction for coordinated omission).
    pub fn is_open(&self) -> bool {
        matches!(self, Plan::Open { .. })
    }

    /// Returns an unanswered request so it is sent again.
    pub fn give_back(&mut self, ticket: u64) {
        match self {
            Plan::Closed(budget) | Plan::Paced(budget, _) => {
                let left = budget.get();
                if left != u64::MAX {
                    budget.set(left + 1);
                }
            }
            Plan::Open {
                ledger,
                client,
                start,
            } => ledger.borrow_mut().give_back(*client, *start, ticket),
        }
    }

    /// True when nothing is left to send.
    pub fn is_done(&self) -> bool {
        match self {
            Plan::Closed(b) | Plan::Paced(b, _) => b.get() == 0,
            Plan::Open { ledger, client, .. } => ledger
                .borrow()
                .schedules
                .get(*client)
                .is_none_or(|s| s.peek().is_none()),
        }
    }
}

/// Takes one request from a closed-model budget (u64::MAX: endless), due now.
fn take(budget: &Cell<u64>, now: Instant) -> Next {
    let left = budget.get();
    if left == 0 {
        return Next::Done;
    }
    if left != u64::MAX {
        budget.set(left - 1);
    }
    Next::Go {
        scheduled: now,
        ticket: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Taking, giving back and settling keep the outstanding books exact.
    #[test]
    fn ledger_tracks_taken_and_unsettled_requests() {
        let start = Instant::now();
        let ledger: SharedLedger = Rc::new(RefCell::new(OpenLedger::new(vec![
            Schedule::new(1000.0, 0, 2, 100),
            Schedule::new(1000.0, 1, 2, 100),
        ])));
        let mut a = Plan::Open {
            ledger: ledger.clone(),
            client: 0,
            start,
        };
        let mut b = Plan::Open {
            ledger: ledger.clone(),
            client: 1,
            start,
        };
        let now = start + Duration::from_millis(5);
        let mut taken = Vec::new();
        while let Next::Go { scheduled, ticket } = a.next(now) {
            taken.push((scheduled, ticket));
        }
        assert_eq!(taken.len(), 3); // indices 0, 2, 4
        assert!(matches!(b.next(start), Next::Wait(_)));
        let Next::Go { scheduled: b0, .. } = b.next(now) else {
            panic!("index 1 is due")
        };
        let count = |l: &SharedLedger| -> u32 {
            l.borrow()
                .outstanding(start, start + Duration::from_secs(1))
                .map(|(_, n)| n)
                .sum()
        };
        assert_eq!(count(&ledger), 4);
        a.give_back(taken[2].1);
        ledger.borrow_mut().settled(taken[0].0);
        ledger.borrow_mut().settled(b0);
        assert_eq!(count(&ledger), 1);
        assert_eq!(ledger.borrow().schedules[0].next_index(), 4);
        // Settling twice or something never taken changes nothing.
        ledger.borrow_mut().settled(b0);
        assert_eq!(count(&ledger), 1);
        assert!(!a.is_done());
    }

    /// `--rps 4`: one request every 250 ms from the first; one that goes late does not move
    /// the ones after it (the client catches up), and the budget still ends the plan.
    #[test]
    fn a_paced_plan_spaces_requests_and_catches_up() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let budget = Rc::new(Cell::new(4));
        let mut p = Plan::Paced(budget.clone(), Pace::new(4.0));
        assert!(matches!(p.next(t0), Next::Go { scheduled, .. } if scheduled == t0));
        assert_eq!(p.next(ms(10)), Next::Wait(ms(250)));
        // Sent late at 600 ms: the third is still due at 500 ms, so it goes at once too.
        assert!(matches!(p.next(ms(600)), Next::Go { .. }));
        assert!(matches!(p.next(ms(600)), Next::Go { .. }));
        assert_eq!(p.next(ms(600)), Next::Wait(ms(750)));
        assert!(matches!(p.next(ms(750)), Next::Go { .. }));
        assert_eq!((p.next(ms(2000)), budget.get()), (Next::Done, 0));
        assert!(!p.is_open() && p.is_done());
    }
}
