//! RFC 9218 on HTTP/3: what one connection knows of its requests' priorities. A request
//! task takes its priority when its head has been read ([`Priorities::start`]: a
//! PRIORITY_UPDATE that came first, else its `priority` header, else the defaults) and hands
//! the rank ([`crate::schedule::rank`]) to quinn-proto, whose packet builder sends the
//! highest rank first and equal ranks in turn; the control stream's PRIORITY_UPDATEs
//! ([`Priorities::update`]) re-rank a request in flight or wait (at most
//! [`crate::schedule::EARLY_UPDATES`]) for one not started yet. Too many priority frames close the
//! connection (H3_EXCESSIVE_LOAD), as HTTP/2 sends GOAWAY ENHANCE_YOUR_CALM.

use crate::schedule::{rank, Calm, Scheduler, Signals};
use hxlab_wire::priority::{Priority, Signal};
use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;

/// One connection's priority state, shared by its request tasks and its control stream.
pub(super) struct Priorities {
    scheduler: Scheduler,
    /// Request streams being answered (their ranks are quinn's to change).
    live: HashSet<u64>,
    /// The frame budget and updates for requests not started yet, as HTTP/2 keeps them.
    signals: Signals,
    requests: u64,
    /// The highest request stream started so far.
    highest: Option<u64>,
}

pub(super) type Shared = Rc<RefCell<Priorities>>;

impl Priorities {
    pub(super) fn new(scheduler: Scheduler) -> Shared {
        Rc::new(RefCell::new(Priorities {
            scheduler,
            live: HashSet::new(),
            signals: Signals::default(),
            requests: 0,
            highest: None,
        }))
    }

    /// Request stream `id`'s head was read with `header` (its `priority` field, if valid):
    /// its priority, where that came from, and its rank.
    pub(super) fn start(&mut self, id: u64, header: Option<Priority>) -> (Priority, Signal, i32) {
        self.requests += 1;
        self.live.insert(id);
        self.highest = self.highest.max(Some(id));
        let (p, signal) = match self.signals.take_early(id) {
            Some(p) => (p, Signal::Update),
            None => match header {
                Some(p) => (p, Signal::Header),
                None => (Priority::default(), Signal::Default),
            },
        };
        (p, signal, rank(self.scheduler, p, id >> 2))
    }

    /// Request stream `id` is answered (or given up).
    pub(super) fn end(&mut self, id: u64) {
        self.live.remove(&id);
    }

    /// A PRIORITY_UPDATE for request stream `id` (`None`: its value was not a valid
    /// dictionary, ignored): the new rank if the request is being answered; else it is
    /// kept for when it starts (unless the stream is older than every request started, so
    /// closed, or [`crate::schedule::EARLY_UPDATES`] are kept already). Err past the frame budget.
    pub(super) fn update(&mut self, id: u64, p: Option<Priority>) -> Result<Option<i32>, Calm> {
        self.signals.count_frame(self.requests)?;
        let Some(p) = p else {
            return Ok(None);
        };
        if self.live.contains(&id) {
            return Ok(Some(rank(self.scheduler, p, id >> 2)));
        }
        if self.highest.is_some_and(|h| id <= h) {
            // Answered already (or, rarely, a head still coming while a later one came).
            return Ok(None);
        }
        self.signals.keep_early(id, p);
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(u: u8, i: bool) -> Priority {
        Priority {
            urgency: u,
            incremental: i,
        }
    }

    #[test]
    fn an_update_before_the_head_wins_over_the_header() {
        let s = Priorities::new(Scheduler::Rfc9218);
        let mut s = s.borrow_mut();
        assert_eq!(s.update(8, Some(p(0, true))), Ok(None));
        let (got, signal, r) = s.start(8, Some(p(5, false)));
        assert_eq!((got, signal), (p(0, true), Signal::Update));
        assert_eq!(r, rank(Scheduler::Rfc9218, p(0, true), 2));
        let (got, signal, _) = s.start(12, Some(p(5, false)));
        assert_eq!((got, signal), (p(5, false), Signal::Header));
        let (got, signal, _) = s.start(16, None);
        assert_eq!((got, signal), (Priority::default(), Signal::Default));
        // In flight: the new rank, for quinn.
        assert_eq!(
            s.update(12, Some(p(1, false))),
            Ok(Some(rank(Scheduler::Rfc9218, p(1, false), 3)))
        );
        s.end(12);
        assert_eq!(s.update(12, Some(p(1, false))), Ok(None));
        assert_eq!(s.signals.early_len(), 0);
    }

    #[test]
    fn updates_for_streams_never_answered_are_capped_and_floods_are_refused() {
        let s = Priorities::new(Scheduler::Rfc9218);
        let mut s = s.borrow_mut();
        for i in 0..crate::schedule::PRIORITY_FRAME_BUDGET {
            assert_eq!(s.update(1_000_000 + i * 4, Some(p(1, false))), Ok(None));
        }
        assert_eq!(s.signals.early_len(), crate::schedule::EARLY_UPDATES);
        assert_eq!(s.update(4, None), Err(Calm));
    }
}
