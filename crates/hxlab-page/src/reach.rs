//! How a browser behind the emulated link reaches a URL given on the command line.
//!
//! Inside the link's namespace, loopback is the namespace's own, so a name or address that
//! means "this machine" here must be moved to the link's host address: an address in the
//! URL (127.0.0.0/8, `[::1]`) and `localhost` by rewriting the URL, any other name that
//! resolves to loopback here (`*.localhost`, a name in /etc/hosts) by a host-resolver rule,
//! so the URL — its Host, SNI and certificate name — stays as given. The URL's port is then
//! exposed at the host address, so a server bound to 127.0.0.1 only is reached too. Every
//! other host (this machine's own non-loopback addresses, remote hosts) is reached through
//! the link's translation as it is. Firefox, which checks certificate names, loads a
//! loopback address or `localhost` under [`LOCAL_ORIGIN_NAME`] instead of the link's
//! address.

use hxlab_browser::Engine;
use hxlab_child::origin::host_port;
use hxlab_contract::LOCAL_ORIGIN_NAME;
use hxlab_link::Link;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

/// The URL to load and the host-resolver rule that goes with it (if any).
#[derive(Debug, PartialEq)]
pub(crate) struct Reached {
    pub url: String,
    pub rules: Option<String>,
}

/// Where `host` (a name or an address in a URL) leads on this machine: the loopback address
/// a server of this machine is reached at, or None when it is not this machine's loopback.
fn loopback_of(host: &str, port: u16) -> Option<Ipv4Addr> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return match ip {
            IpAddr::V4(v4) if v4.is_loopback() => Some(v4),
            IpAddr::V6(v6) if v6.is_loopback() => Some(Ipv4Addr::LOCALHOST),
            _ => None,
        };
    }
    // Browsers answer `localhost` and `*.localhost` with loopback themselves (RFC 6761),
    // whatever the system's resolver says.
    let name = bare.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return Some(Ipv4Addr::LOCALHOST);
    }
    let addrs: Vec<IpAddr> = (bare, port)
        .to_socket_addrs()
        .ok()?
        .map(|a| a.ip())
        .collect();
    // A name that leads anywhere else too is left to the resolver inside.
    if addrs.is_empty() || !addrs.iter().all(|a| a.is_loopback()) {
        return None;
    }
    addrs
        .iter()
        .find_map(|a| match a {
            IpAddr::V4(v4) => Some(*v4),
            IpAddr::V6(_) => None,
        })
        .or(Some(Ipv4Addr::LOCALHOST))
}

/// The URL as the browser behind `link` loads it (see the module's text), with the URL's
/// port exposed when it leads to this machine's loopback.
pub(crate) fn reach(url: &str, link: &Link, engine: Engine) -> Result<Reached, String> {
    let host = link.host_addr();
    let unchanged = Reached {
        url: url.to_string(),
        rules: None,
    };
    let Some((_, name, port)) = host_port(url) else {
        return Ok(unchanged);
    };
    let Some(to) = loopback_of(name, port) else {
        return Ok(unchanged);
    };
    link.expose(port, to)
        .map_err(|e| format!("{url} is on this machine's loopback: {e}"))?;
    let literal = name.starts_with('[') || name.parse::<Ipv4Addr>().is_ok();
    if engine == Engine::Firefox && (literal || name.eq_ignore_ascii_case("localhost")) {
        // Firefox checks the certificate's names, and a loopback origin's certificate does
        // not name the link's address: it is loaded under the name the lab's origins carry,
        // mapped to that address.
        return Ok(Reached {
            url: rewrite_host(url, name, LOCAL_ORIGIN_NAME).unwrap_or(unchanged.url),
            rules: Some(format!("MAP {LOCAL_ORIGIN_NAME} {host}")),
        });
    }
    if literal || name.eq_ignore_ascii_case("localhost") {
        // The host is in the URL (host_port found it there), so the rewrite always applies.
        return Ok(Reached {
            url: rewrite_host(url, name, &host.to_string()).unwrap_or(unchanged.url),
            rules: None,
        });
    }
    Ok(Reached {
        url: url.to_string(),
        rules: Some(format!("MAP {name} {host}")),
    })
}

/// `url` with its host `name` replaced by `host` (the first occurrence after the scheme).
fn rewrite_host(url: &str, name: &str, host: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let at = rest.find(name)?;
    Some(format!(
        "{scheme}://{}{host}{}",
        &rest[..at],
        &rest[at + name.len()..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_are_this_machine() {
        assert_eq!(
            loopback_of("127.0.0.2", 1),
            Some(Ipv4Addr::new(127, 0, 0, 2))
        );
        assert_eq!(loopback_of("[::1]", 1), Some(Ipv4Addr::LOCALHOST));
        assert!(loopback_of("localhost", 443).is_some());
        assert_eq!(loopback_of("book.localhost", 1), Some(Ipv4Addr::LOCALHOST));
        assert_eq!(loopback_of("192.0.2.7", 1), None);
        assert_eq!(loopback_of("name.invalid", 1), None);
    }

    #[test]
    fn only_the_host_is_rewritten() {
        assert_eq!(
            rewrite_host("https://127.0.0.1:9/127.0.0.1", "127.0.0.1", "100.64.0.1"),
            Some("https://100.64.0.1:9/127.0.0.1".to_string())
        );
    }
}
