//! Connections counted per client address: the bound the QUIC admission
//! (`--quic-max-per-address`, `h3::admit`) and the TCP one (`--tcp-max-per-address`,
//! `tcp_admit`) both keep, with the same key and the same counting.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;

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

/// Connections held per address key.
#[derive(Default)]
pub(crate) struct PerAddress(Mutex<HashMap<IpAddr, u32>>);

impl PerAddress {
    /// Shows `decide` how many connections `key` holds and counts one more when it says
    /// yes, under one lock, so two attempts from one address cannot both take its last slot.
    pub(crate) fn take_if<T, E>(
        &self,
        key: IpAddr,
        decide: impl FnOnce(u32) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut by_address = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let held = by_address.get(&key).copied().unwrap_or(0);
        let taken = decide(held)?;
        *by_address.entry(key).or_insert(0) += 1;
        Ok(taken)
    }

    /// Gives back one of `key`'s connections; a key that holds none is forgotten.
    pub(crate) fn give_back(&self, key: IpAddr) {
        let mut by_address = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = by_address.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                by_address.remove(&key);
            }
        }
    }

    /// Whether no address holds a connection.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.0.lock().map(|m| m.is_empty()).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_slot_is_taken_only_when_decided_and_given_back() {
        let p = PerAddress::default();
        let one: IpAddr = "127.0.0.1".parse().expect("ip");
        assert_eq!(p.take_if(one, Ok::<u32, ()>), Ok(0));
        assert_eq!(p.take_if(one, Ok::<u32, ()>), Ok(1));
        assert_eq!(p.take_if(one, |_| Err::<(), _>("full")), Err("full"));
        p.give_back(one);
        assert_eq!(p.take_if(one, Ok::<u32, ()>), Ok(1));
        p.give_back(one);
        p.give_back(one);
        assert!(p.is_empty());
    }
}
