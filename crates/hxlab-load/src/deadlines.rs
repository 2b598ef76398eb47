//! The deadlines of one connection, as pure logic on the instants it is given: the request
//! timeout (`--timeout`: the oldest request in flight must be answered in time), and
//! h2load's two connection timeouts, `-T` (once the client has sent its last request, the
//! longest the connection stays open for the answers) and `-N` (the longest it may go
//! without sending or receiving). The client loop ([`crate::session::drive`]) keeps one
//! timer at the earliest of them and asks, when it fires or input comes, which one passed.
//!
//! h2load's help describes `-T` as the longest a connection is kept open "regardless of the
//! activity"; its code (1.52 and later) starts that timer only when the client submits its
//! last request, so it never applies to a `-D` run. This follows the code: it is what
//! h2load does.

use crate::client::ConnectionTimeouts;
use std::time::{Duration, Instant};

/// Which deadline passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expired {
    /// The oldest request in flight was not answered within `--timeout`: the connection
    /// is replaced.
    Request,
    /// `-T`: the answers did not come within it of the client's last request.
    Active,
    /// `-N`: nothing was sent or received for that long.
    Inactive,
}

impl Expired {
    /// Whether the client opens no other connection after it (h2load: a client whose
    /// connection timed out is done).
    pub(crate) fn retires_client(self) -> bool {
        self != Expired::Request
    }
}

/// The deadlines of one connection.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadlines {
    timeout: Duration,
    limits: ConnectionTimeouts,
    last_activity: Instant,
    active_until: Option<Instant>,
}

impl Deadlines {
    /// A connection that starts at `now`.
    pub(crate) fn new(timeout: Duration, limits: ConnectionTimeouts, now: Instant) -> Deadlines {
        Deadlines {
            timeout,
            limits,
            last_activity: now,
            active_until: None,
        }
    }

    /// Something was sent or received at `now`.
    #[inline]
    pub(crate) fn activity(&mut self, now: Instant) {
        self.last_activity = now;
    }

    /// The client has nothing more to send (its plan is done) at `now`: `-T` starts, once.
    /// Returns the new deadline when it started.
    pub(crate) fn last_request_sent(&mut self, now: Instant) -> Option<Instant> {
        if self.active_until.is_some() {
            return None;
        }
        self.active_until = self.limits.active.map(|t| now + t);
        self.active_until
    }

    /// When `-N` ends the connection if nothing happens before.
    pub(crate) fn inactive_at(&self) -> Option<Instant> {
        self.limits.inactivity.map(|n| self.last_activity + n)
    }

    /// The earliest deadline, with `oldest` the send time of the oldest request in flight
    /// (none in flight: the request timeout counts from `now`, only to re-arm the timer).
    pub(crate) fn next(&self, oldest: Option<Instant>, now: Instant) -> Instant {
        let request = oldest.unwrap_or(now) + self.timeout;
        [self.active_until, self.inactive_at()]
            .into_iter()
            .flatten()
            .fold(request, Instant::min)
    }

    /// The deadline that has passed at `now`, if any (the request timeout first, as it
    /// replaces the connection rather than ending the client).
    pub(crate) fn expired(&self, oldest: Option<Instant>, now: Instant) -> Option<Expired> {
        if oldest.is_some_and(|t| t + self.timeout <= now) {
            return Some(Expired::Request);
        }
        if self.active_until.is_some_and(|t| t <= now) {
            return Some(Expired::Active);
        }
        if self.inactive_at().is_some_and(|t| t <= now) {
            return Some(Expired::Inactive);
        }
        None
    }

    /// Why the requests in flight fail (as `timeout`) when `which` passed: one line.
    pub(crate) fn message(&self, which: Expired) -> String {
        match which {
            Expired::Request => format!("no response within {:?}", self.timeout),
            Expired::Active => format!(
                "no answer within {:?} of the client's last request (-T/--connection-active-timeout)",
                self.limits.active.unwrap_or_default()
            ),
            Expired::Inactive => format!(
                "connection inactive for {:?} (-N/--connection-inactivity-timeout)",
                self.limits.inactivity.unwrap_or_default()
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On virtual time: each deadline passes exactly when it should, the earliest arms the
    /// timer, activity pushes `-N` back, and `-T` starts only with the last request.
    #[test]
    fn each_deadline_passes_at_its_time_and_the_timer_takes_the_earliest() {
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        let limits = ConnectionTimeouts {
            active: Some(Duration::from_millis(300)),
            inactivity: Some(Duration::from_millis(100)),
        };
        let mut d = Deadlines::new(Duration::from_secs(1), limits, t0);
        // A request sent at 0: -N (100 ms) comes first.
        assert_eq!(d.next(Some(t0), t0), ms(100));
        assert_eq!(d.expired(Some(t0), ms(99)), None);
        assert_eq!(d.expired(Some(t0), ms(100)), Some(Expired::Inactive));
        // Input at 90 ms moves it to 190 ms.
        d.activity(ms(90));
        assert_eq!(d.expired(Some(t0), ms(150)), None);
        assert_eq!(d.next(Some(t0), ms(150)), ms(190));
        // The last request at 150 ms: -T ends the connection at 450 ms at the latest.
        assert_eq!(d.last_request_sent(ms(150)), Some(ms(450)));
        assert_eq!(d.last_request_sent(ms(160)), None, "started once");
        d.activity(ms(440));
        assert_eq!(d.next(Some(t0), ms(440)), ms(450));
        assert_eq!(d.expired(Some(t0), ms(450)), Some(Expired::Active));
        // The request timeout wins when it passes too, and only it keeps the client.
        assert_eq!(d.expired(Some(t0), ms(1000)), Some(Expired::Request));
        assert!(!Expired::Request.retires_client());
        assert!(Expired::Active.retires_client() && Expired::Inactive.retires_client());
        assert!(d.message(Expired::Inactive).contains("-N"));
    }

    /// Without `-T` and `-N` only the request timeout counts, from the oldest request.
    #[test]
    fn without_connection_timeouts_only_the_request_timeout_counts() {
        let t0 = Instant::now();
        let mut d = Deadlines::new(Duration::from_secs(2), ConnectionTimeouts::default(), t0);
        assert_eq!(d.last_request_sent(t0), None);
        let later = t0 + Duration::from_secs(10);
        assert_eq!(d.expired(None, later), None);
        assert_eq!(d.next(None, later), later + Duration::from_secs(2));
        assert_eq!(
            d.expired(Some(later), later + Duration::from_secs(2)),
            Some(Expired::Request)
        );
    }
}
