//! What a client sends next and when: a closed-model budget shared by the clients of one
//! worker (a plain `Rc<Cell>`, never across threads) or the client's open-model
//! [`Schedule`].

use crate::scheduler::Schedule;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

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

/// A client's source of requests.
#[derive(Debug)]
pub enum Plan {
    /// Closed model: take from the worker's remaining count (u64::MAX when time-bound).
    Closed(Rc<Cell<u64>>),
    /// Open model: this client's timetable, relative to `start`.
    Open {
        /// Timetable.
        schedule: Schedule,
        /// Instant of offset zero.
        start: Instant,
    },
}

impl Plan {
    /// The next request to send, given the current time.
    #[inline]
    pub fn next(&mut self, now: Instant) -> Next {
        match self {
            Plan::Closed(budget) => {
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
            Plan::Open { schedule, start } => match schedule.peek() {
                None => Next::Done,
                Some((_, offset)) => {
                    let due = *start + offset;
                    if due > now {
                        return Next::Wait(due);
                    }
                    let (index, _) = schedule.take().unwrap_or((0, offset));
                    Next::Go {
                        scheduled: due,
                        ticket: index,
                    }
                }
            },
        }
    }

    /// Returns an unanswered request so it is sent again.
    pub fn give_back(&mut self, ticket: u64) {
        match self {
            Plan::Closed(budget) => {
                let left = budget.get();
                if left != u64::MAX {
                    budget.set(left + 1);
                }
            }
            Plan::Open { schedule, .. } => schedule.give_back(ticket),
        }
    }

    /// True when nothing is left to send.
    pub fn is_done(&self) -> bool {
        match self {
            Plan::Closed(b) => b.get() == 0,
            Plan::Open { schedule, .. } => schedule.peek().is_none(),
        }
    }
}
