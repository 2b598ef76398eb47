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

use crate::routes::Limits;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

/// The key an address is counted under: an IPv4 address, or an IPv6 /64 (one host is
/// usually given a whole /64, so counting single IPv6 addresses would bound nothing).
pub(crate) fn address_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

/// Handshakes in progress and connections per address, shared by the accept loop and the
/// connections it admitted.
#[derive(Default)]
pub(crate) struct Admission {
    half_open: AtomicU64,
    by_address: Mutex<HashMap<IpAddr, u32>>,
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
        // Held across the decision and the increment so two attempts from one address
        // cannot both take its last slot (the driver's thread and ending connections take
        // it, for a hash map lookup).
        let mut by_address = self.by_address.lock().unwrap_or_else(|e| e.into_inner());
        let from_address = by_address.get(&key).copied().unwrap_or(0);
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
                *by_address.entry(key).or_insert(0) += 1;
                self.half_open.fetch_add(1, Ordering::AcqRel);
                Ok(Admitted {
                    admission: self.clone(),
                    key,
                    handshaking: true,
                })
            }
        }
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
        let mut by_address = self
            .admission
            .by_address
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = by_address.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                by_address.remove(&self.key);
            }
        }
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

    #[test]
    fn an_ipv6_host_is_counted_by_its_64() {
        let a = address_key("2001:db8:1:2:aaaa::1".parse().expect("ip"));
        let b = address_key("2001:db8:1:2:bbbb::9".parse().expect("ip"));
        let c = address_key("2001:db8:1:3::1".parse().expect("ip"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mapped = address_key("::ffff:192.0.2.7".parse().expect("ip"));
        assert_eq!(mapped, "192.0.2.7".parse::<IpAddr>().expect("ip"));
    }
}
