//! Who gets a TCP connection (h1, h1+TLS, h2, h2c): every accepted socket takes a slot of the
//! server's (`--tcp-max-connections`, by default below the file limit) and one of its client
//! address's (`--tcp-max-per-address`), or is closed at once. So the server never runs out of
//! descriptors (issue 38: 20,000 connections held open by one attacker left every TCP port
//! deaf), and one host cannot take every slot. The slots are given back when the connection
//! ends, wherever it lives then (a task, or an HTTP/1.1 epoll set).

use crate::per_address::{address_key, PerAddress};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Descriptors kept out of the TCP cap when it comes from the file limit: listeners, the QUIC
/// socket, files being served, the runtime's own.
fn reserve(limit: u64) -> u64 {
    (limit / 8).max(64)
}

/// Raises this process's soft file limit to its hard one and returns the soft limit in
/// force (unchanged where raising it fails).
pub(crate) fn raise_file_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we pass.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    if lim.rlim_cur < lim.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: lim.rlim_max,
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit reads the struct we pass; raising the soft limit up to the
        // hard one needs no privilege.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = lim.rlim_max;
        }
    }
    lim.rlim_cur
}

/// The TCP cap in force: `configured`, or (0) the file limit less its reserve.
pub(crate) fn connection_cap(configured: u32, file_limit: u64) -> usize {
    if configured > 0 {
        return configured as usize;
    }
    let cap = file_limit.saturating_sub(reserve(file_limit)).max(1);
    usize::try_from(cap).unwrap_or(usize::MAX)
}

/// Why a connection was closed at accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The server has `--tcp-max-connections` open.
    Full,
    /// The client's address has `--tcp-max-per-address` open.
    Address,
}

/// Open TCP connections, in all and per client address.
pub(crate) struct TcpAdmission {
    max: usize,
    per_address: u32,
    open: AtomicUsize,
    by_address: PerAddress,
    /// When a refusal was last logged (ms since `start`), so a flood logs once a second.
    logged_at: AtomicU64,
    refused_since_log: AtomicU64,
    start: Instant,
}

impl TcpAdmission {
    pub(crate) fn new(max: usize, per_address: u32) -> Arc<TcpAdmission> {
        Arc::new(TcpAdmission {
            max,
            per_address,
            open: AtomicUsize::new(0),
            by_address: PerAddress::default(),
            logged_at: AtomicU64::new(u64::MAX),
            refused_since_log: AtomicU64::new(0),
            start: Instant::now(),
        })
    }

    /// Takes a slot for a connection from `peer`, or says why there is none (and logs it,
    /// at most once a second).
    pub(crate) fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<Ticket, Refused> {
        let key = address_key(peer);
        let verdict = self.by_address.take_if(key, |from_address| {
            if self.open.load(Ordering::Acquire) >= self.max {
                Err(Refused::Full)
            } else if from_address >= self.per_address {
                Err(Refused::Address)
            } else {
                self.open.fetch_add(1, Ordering::AcqRel);
                Ok(())
            }
        });
        match verdict {
            Ok(()) => Ok(Ticket {
                admission: self.clone(),
                key,
            }),
            Err(why) => {
                self.log(why, key);
                Err(why)
            }
        }
    }

    fn log(&self, why: Refused, key: IpAddr) {
        let refused = self.refused_since_log.fetch_add(1, Ordering::Relaxed) + 1;
        let now = self.start.elapsed().as_millis() as u64;
        let last = self.logged_at.load(Ordering::Relaxed);
        if last != u64::MAX && now < last.saturating_add(1000) {
            return;
        }
        if self
            .logged_at
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        self.refused_since_log.fetch_sub(refused, Ordering::Relaxed);
        match why {
            Refused::Full => eprintln!(
                "hxlab serve: {} TCP connections open (--tcp-max-connections); new ones are closed at accept ({refused} since the last line)",
                self.max
            ),
            Refused::Address => eprintln!(
                "hxlab serve: {key} has {} TCP connections open (--tcp-max-per-address); its new ones are closed at accept ({refused} since the last line)",
                self.per_address
            ),
        }
    }
}

/// A connection's slots, given back when it is dropped (with the connection).
pub(crate) struct Ticket {
    admission: Arc<TcpAdmission>,
    key: IpAddr,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admission.by_address.give_back(self.key);
        self.admission.open.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_in_all_and_per_address_and_gives_slots_back() {
        let a = TcpAdmission::new(3, 2);
        let one: IpAddr = "127.0.0.1".parse().expect("ip");
        let two: IpAddr = "127.0.0.2".parse().expect("ip");
        let t1 = a.admit(one).expect("first");
        let t2 = a.admit(one).expect("second");
        assert_eq!(a.admit(one).err(), Some(Refused::Address));
        let t3 = a.admit(two).expect("another address");
        assert_eq!(a.admit(two).err(), Some(Refused::Full));
        drop(t1);
        let t4 = a.admit(one).expect("the slot was given back");
        drop((t2, t3, t4));
        assert_eq!(a.open.load(Ordering::Relaxed), 0);
        assert!(a.by_address.is_empty());
    }

    #[test]
    fn ipv6_counts_per_64() {
        let a = TcpAdmission::new(10, 1);
        let _t = a.admit("2001:db8::1".parse().expect("ip")).expect("first");
        assert_eq!(
            a.admit("2001:db8::2".parse().expect("ip")).err(),
            Some(Refused::Address)
        );
        assert!(a.admit("2001:db8:0:1::1".parse().expect("ip")).is_ok());
    }

    #[test]
    fn the_default_cap_keeps_a_reserve_below_the_file_limit() {
        assert_eq!(connection_cap(0, 20_000), 17_500);
        assert_eq!(connection_cap(0, 256), 192);
        assert_eq!(connection_cap(500, 20_000), 500);
    }
}
