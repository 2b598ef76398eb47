//! Who gets a QUIC handshake. Every new connection attempt (a [`quinn_proto::Incoming`], as
//! the driver, `driver.rs`, receives it) is either accepted, asked to prove its address with
//! a Retry, or refused, before the server keeps any state for it:
//! - past `--quic-retry-threshold` handshakes in progress, a client that has not proved its
//!   address gets a Retry (stateless: quinn encodes everything in the token), so a flood of
//!   spoofed or abandoned Initials costs one small packet each instead of a handshake and a
//!   table slot held until the handshake timeout;
//! - a client whose address already has `--quic-max-per-address` connections (open or in
//!   handshake), or any client when open and half-open connections fill
//!   `--quic-max-connections`, is refused (CONNECTION_REFUSED).
//!
//! The Retry comes first: while the server is under pressure, an address is not trusted
//! (nor counted) until it has answered one.

use crate::per_address::{address_key, PerAddress};
use crate::routes::Limits;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What to do with one connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Accept,
    Retry,
    Refuse,
}

/// The decision, free of I/O: `validated` is whether the attempt proved its address (a
/// Retry token or a NEW_TOKEN from an earlier connection), `from_address` the connections
/// its address already has.
pub(crate) fn decide(
    validated: bool,
    half_open: u64,
    open: u64,
    from_address: u32,
    limits: &Limits,
) -> Verdict {
    if !validated && half_open >= u64::from(limits.quic_retry_threshold) {
        return Verdict::Retry;
    }
    if open + half_open >= u64::from(limits.quic_max_connections)
        || from_address >= limits.quic_max_per_address
    {
        return Verdict::Refuse;
    }
    Verdict::Accept
}

/// Handshakes in progress and connections per address, shared by the accept loop and the
/// connections it admitted.
#[derive(Default)]
pub(crate) struct Admission {
    half_open: AtomicU64,
    by_address: PerAddress,
}

impl Admission {
    /// Decides on an attempt from `remote` (`validated`: it proved its address) while
    /// `open` connections are open; Retry and refusal are counted in `/stats` here (the
    /// driver sends them), an accepted attempt comes back with its slots held.
    pub fn admit(
        self: &Arc<Self>,
        remote: SocketAddr,
        validated: bool,
        open: u64,
        limits: &Limits,
        stats: &crate::stats::Stats,
    ) -> Result<Admitted, Verdict> {
        let key = address_key(remote.ip());
        // The driver's thread and ending connections share the count (a hash map lookup).
        self.by_address.take_if(key, |from_address| {
            let verdict = decide(
                validated,
                self.half_open.load(Ordering::Acquire),
                open,
                from_address,
                limits,
            );
            match verdict {
                Verdict::Retry => {
                    stats.retried(crate::stats::Protocol::H3);
                    Err(verdict)
                }
                Verdict::Refuse => {
                    stats.refused(crate::stats::Protocol::H3);
                    Err(verdict)
                }
                Verdict::Accept => {
                    self.half_open.fetch_add(1, Ordering::AcqRel);
                    Ok(Admitted {
                        admission: self.clone(),
                        key,
                        handshaking: true,
                    })
                }
            }
        })
    }
}

/// An accepted connection's slots: its half-open one until the handshake ends, its
/// address's for as long as it lives. Given back when dropped.
pub(crate) struct Admitted {
    admission: Arc<Admission>,
    key: IpAddr,
    handshaking: bool,
}

impl Admitted {
    /// The handshake is complete: the connection no longer counts as half-open.
    pub fn handshake_done(&mut self) {
        if std::mem::take(&mut self.handshaking) {
            self.admission.half_open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.handshake_done();
        self.admission.by_address.give_back(self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(retry: u32, max: u32, per_address: u32) -> Limits {
        Limits {
            quic_retry_threshold: retry,
            quic_max_connections: max,
            quic_max_per_address: per_address,
            ..Limits::of(&hxlab_contract::ServeConfig::default())
        }
    }

    #[test]
    fn retry_under_pressure_then_the_table_and_the_address_cap() {
        let l = limits(4, 10, 3);
        assert_eq!(decide(false, 3, 0, 0, &l), Verdict::Accept);
        assert_eq!(decide(false, 4, 0, 0, &l), Verdict::Retry);
        // A validated address is not asked again, but still meets both caps.
        assert_eq!(decide(true, 4, 0, 0, &l), Verdict::Accept);
        assert_eq!(decide(true, 4, 6, 0, &l), Verdict::Refuse);
        assert_eq!(decide(true, 0, 0, 3, &l), Verdict::Refuse);
        assert_eq!(decide(false, 0, 0, 2, &l), Verdict::Accept);
        // Under pressure an unproved address is retried before it is counted.
        assert_eq!(decide(false, 9, 1, 3, &l), Verdict::Retry);
        // 0: every unproved address gets a Retry.
        assert_eq!(decide(false, 0, 0, 0, &limits(0, 10, 3)), Verdict::Retry);
    }
}
