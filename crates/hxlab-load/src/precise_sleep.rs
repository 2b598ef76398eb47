//! A sleep that wakes within microseconds of its deadline, for open-model sends.
//!
//! tokio's timer wheel has a 1 ms granularity: a request due at t leaves between t and
//! t + ~1.5 ms, and in the open model that lag is charged to the server as corrected latency.
//! [`Sleep`] arms a `timerfd` (an hrtimer, which timer slack does not widen) and waits for it
//! through tokio's reactor, so the wake-up comes from epoll as soon as the kernel's timer
//! fires. An idle core still takes 30–300 µs to wake (measured here: p50 150 µs at 100
//! requests/s, 30 µs at 1,000/s), so the timer is armed a little early — by the worker's
//! recent wake-up lateness, [`LEAD_MIN`]..[`LEAD_MAX`] — and the last stretch is a
//! cooperative spin (yield, let the reactor and other tasks run, check the clock again). The
//! spin costs at most the lead per due time (≤ 4 % of a core at 100/s). `HXLAB_PACING=timer` turns the spin
//! off (bench/pacing.sh measures both).
//!
//! The timerfd is made lazily on the first deadline in the future, so closed-model sessions,
//! whose deadlines are always "now", never create one.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::unix::AsyncFd;

/// Shortest and longest lead: how early the timer is armed before a deadline.
pub const LEAD_MIN: Duration = Duration::from_micros(20);
/// See [`LEAD_MIN`].
pub const LEAD_MAX: Duration = Duration::from_micros(400);

thread_local! {
    /// This thread's recent timer wake-up lateness, nanoseconds: jumps up to a late wake-up,
    /// decays by 1/256 of the difference per on-time one, so the lead covers nearly all wake-ups (p99), not the typical one.
    static LEAD_NS: std::cell::Cell<u64> = const { std::cell::Cell::new(100_000) };
    static SPIN: bool = std::env::var("HXLAB_PACING").map(|v| v != "timer").unwrap_or(true);
}

fn lead() -> Duration {
    if SPIN.with(|s| *s) {
        Duration::from_nanos(LEAD_NS.with(|l| l.get()))
    } else {
        Duration::ZERO
    }
}

/// Learns from a wake-up `late` after the armed time.
fn observe_wakeup(late: Duration) {
    LEAD_NS.with(|l| {
        let cur = l.get();
        let seen = (late.as_nanos() as u64).saturating_add(late.as_nanos() as u64 / 4);
        let next = if seen > cur {
            seen
        } else {
            cur - (cur - seen) / 256
        };
        l.set(next.clamp(LEAD_MIN.as_nanos() as u64, LEAD_MAX.as_nanos() as u64));
    });
}

/// A resettable sleep until an `Instant`, with microsecond precision (see the module docs).
pub struct Sleep {
    deadline: Instant,
    fd: Option<AsyncFd<OwnedFd>>,
    /// The deadline the timerfd is armed for, if armed, and the instant it will fire.
    armed: Option<Instant>,
    fires_at: Instant,
    /// The timerfd could not be made: fall back to tokio's timer.
    fallback: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Sleep {
    /// A sleep until `deadline`.
    pub fn until(deadline: Instant) -> Sleep {
        Sleep {
            deadline,
            fd: None,
            armed: None,
            fires_at: deadline,
            fallback: None,
        }
    }

    /// Moves the deadline (as `tokio::time::Sleep::reset`).
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = deadline;
        if let Some(f) = &mut self.fallback {
            f.as_mut().reset(deadline.into());
        }
    }

    /// The deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    fn arm(&mut self, left: Duration) -> io::Result<()> {
        if self.fd.is_none() {
            // SAFETY: timerfd_create has no memory-safety preconditions.
            let raw = unsafe {
                libc::timerfd_create(
                    libc::CLOCK_MONOTONIC,
                    libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
                )
            };
            if raw < 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `raw` is a new descriptor that nothing else owns.
            let owned = unsafe { OwnedFd::from_raw_fd(raw) };
            // SAFETY: the AsyncFd owns `owned`, so the descriptor stays open and the same for
            // the AsyncFd's whole life.
            let fd =
                unsafe { AsyncFd::register_with_interest(owned, tokio::io::Interest::READABLE) }
                    .map_err(io::Error::from)?;
            self.fd = Some(fd);
        }
        let fd = self
            .fd
            .as_ref()
            .map(|f| f.get_ref().as_raw_fd())
            .unwrap_or(-1);
        // A zero it_value disarms; the shortest real wait is 1 ns.
        let left = left.max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: left.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: `fd` is our timerfd; `spec` is a valid itimerspec; old value not wanted.
        let rc = unsafe { libc::timerfd_settime(fd, 0, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(self.deadline);
        self.fires_at = Instant::now() + left;
        Ok(())
    }

    /// Polls for the deadline; `Ready` once `Instant::now() >= deadline`.
    pub fn poll_elapsed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            let now = Instant::now();
            if now >= self.deadline {
                return Poll::Ready(());
            }
            if let Some(f) = &mut self.fallback {
                return f.as_mut().poll(cx);
            }
            if self.armed != Some(self.deadline) {
                let left = self.deadline - now;
                let lead = lead();
                if left <= lead {
                    return spin(cx);
                }
                if self.arm(left - lead).is_err() {
                    self.fallback = Some(Box::pin(tokio::time::sleep_until(self.deadline.into())));
                    continue;
                }
            }
            let Some(fd) = &self.fd else { continue };
            let mut guard = ready!(fd.poll_read_ready(cx)).ok();
            let mut expirations = [0u8; 8];
            // SAFETY: reads at most 8 bytes into the buffer; a non-blocking timerfd read
            // either succeeds or fails with EAGAIN.
            let n = unsafe {
                libc::read(
                    fd.get_ref().as_raw_fd(),
                    expirations.as_mut_ptr() as *mut libc::c_void,
                    8,
                )
            };
            if n < 0 {
                if let Some(g) = guard.as_mut() {
                    g.clear_ready();
                }
            } else {
                // Fired: it is disarmed now (one-shot). Spin the lead's last stretch.
                self.armed = None;
                let woke = Instant::now();
                observe_wakeup(woke.saturating_duration_since(self.fires_at));
                if woke < self.deadline && self.deadline - woke <= LEAD_MAX {
                    return spin(cx);
                }
            }
        }
    }
}

/// One turn of the last stretch's spin: yields to the scheduler, which polls the reactor
/// (without blocking) and runs every other ready task before polling this one again. So a
/// spinning session never holds up another's reads: at high rates, where due times are a
/// few microseconds apart, a blocking spin would delay every response behind it.
fn spin(cx: &mut Context<'_>) -> Poll<()> {
    let mut turn = std::pin::pin!(tokio::task::yield_now());
    let _ = turn.as_mut().poll(cx);
    Poll::Pending
}

impl Future for Sleep {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.get_mut().poll_elapsed(cx)
    }
}

/// Sleeps until `deadline` with microsecond precision.
pub async fn sleep_until(deadline: Instant) {
    Sleep::until(deadline).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn wakes_after_the_deadline_and_can_be_reset() {
        let t0 = Instant::now();
        let mut s = Sleep::until(t0 + Duration::from_millis(50));
        s.reset(t0 + Duration::from_millis(5));
        (&mut s).await;
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(5), "{waited:?}");
        assert!(
            waited < Duration::from_millis(45),
            "reset was ignored: {waited:?}"
        );
        // Reusable: a second deadline on the same timerfd.
        let t1 = Instant::now();
        s.reset(t1 + Duration::from_millis(3));
        (&mut s).await;
        assert!(t1.elapsed() >= Duration::from_millis(3));
        // A deadline in the past is ready at once, without arming anything.
        let mut past = Sleep::until(Instant::now() - Duration::from_millis(1));
        (&mut past).await;
        assert!(past.fd.is_none());
    }
}
