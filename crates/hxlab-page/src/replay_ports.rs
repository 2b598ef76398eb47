//! Where a replay server listens for Firefox: on the recorded ports.
//!
//! Chromium is told `MAP host:port → server:its-port`; Firefox can map a name to an address
//! (`network.dns.forceResolve`) but never a port, so the replay server must answer on the
//! ports the recording used (443 and 80 for a real site) as the browser sees them. On
//! loopback it takes a private address of its own (127.77.x.y, all of 127/8 being local on
//! Linux), so the recorded ports are free there even when the recorded server, or another
//! replay, still holds them on 127.0.0.1; behind a link it takes the link's host address,
//! which is the link's alone.

use hxlab_core::har::HarOrigin;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};

/// The recorded ports: the one https port (TLS, and h3 on the same UDP port) and the one
/// http port (0: none recorded). The error is one line: a recording whose origins use more
/// than one port per scheme cannot be replayed in Firefox.
pub(crate) fn recorded_ports(origins: &[HarOrigin]) -> Result<(u16, u16), String> {
    let one = |scheme: &str| -> Result<u16, String> {
        let mut ports: Vec<u16> = origins
            .iter()
            .filter(|o| o.scheme == scheme)
            .map(|o| o.port)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        match ports.as_slice() {
            [] => Ok(0),
            [p] => Ok(*p),
            many => Err(format!(
                "Firefox cannot map ports, so a replay answers on the recorded ones, and this recording's {scheme} origins use {} ports ({}); replay it with --browser chromium",
                many.len(),
                many.iter().map(u16::to_string).collect::<Vec<_>>().join(", ")
            )),
        }
    };
    let (tls, plain) = (one("https")?, one("http")?);
    if tls != 0 && tls == plain {
        return Err(format!(
            "the recording uses port {tls} for both http and https; Firefox cannot map ports, so replay it with --browser chromium"
        ));
    }
    Ok((tls, plain))
}

/// The addresses to try for `bind`: a link's host address as it is; loopback replaced by
/// private 127.77.x.y addresses, the first derived from this process's id.
fn candidates(bind: IpAddr) -> Vec<IpAddr> {
    if !bind.is_loopback() {
        return vec![bind];
    }
    let pid = std::process::id();
    (0..16u32)
        .map(|i| {
            let n = pid.wrapping_add(i.wrapping_mul(7919));
            IpAddr::V4(Ipv4Addr::new(127, 77, (n >> 8) as u8, (n as u8).max(1)))
        })
        .collect()
}

/// True when `tls` (TCP and UDP) and `plain` (TCP) are free at `addr` (0: any port is).
fn free(addr: IpAddr, tls: u16, plain: u16) -> bool {
    let tcp = |p: u16| p == 0 || TcpListener::bind(SocketAddr::new(addr, p)).is_ok();
    let udp = tls == 0 || UdpSocket::bind(SocketAddr::new(addr, tls)).is_ok();
    tcp(tls) && udp && tcp(plain)
}

/// The address a recording's origins name literally (`https://127.0.0.1:8443/`), if any:
/// no name to resolve, so Firefox goes to that address itself. The error is one line: the
/// origins name more than one, or a link's namespace cannot reach it.
fn literal_address(origins: &[HarOrigin], bind: IpAddr) -> Result<Option<IpAddr>, String> {
    let mut literal: Vec<IpAddr> = origins.iter().filter_map(|o| o.host.parse().ok()).collect();
    literal.sort_unstable();
    literal.dedup();
    match literal.as_slice() {
        [] => Ok(None),
        [ip] if ip.is_loopback() && bind.is_loopback() => Ok(Some(*ip)),
        _ => Err(format!(
            "the recording's origins name addresses ({}), which Firefox cannot be pointed elsewhere for (it maps names only); replay it with --browser chromium",
            literal.iter().map(IpAddr::to_string).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The address the replay server binds to so it can take the recorded ports, checked free
/// (another process may still take them before the server does; its start then fails).
pub(crate) fn listen_address(
    origins: &[HarOrigin],
    bind: &str,
    tls: u16,
    plain: u16,
) -> Result<IpAddr, String> {
    let bind: IpAddr = bind
        .parse()
        .map_err(|_| format!("{bind:?} is not an address to replay on"))?;
    let tried = match literal_address(origins, bind)? {
        Some(ip) => vec![ip],
        None => candidates(bind),
    };
    tried
        .into_iter()
        .find(|a| free(*a, tls, plain))
        .ok_or_else(|| {
            format!("the recorded ports {tls} and {plain} are taken at {bind} (Firefox's replay must answer on them)")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(scheme: &str, host: &str, port: u16) -> HarOrigin {
        HarOrigin {
            scheme: scheme.into(),
            host: host.into(),
            port,
        }
    }

    #[test]
    fn one_port_per_scheme_or_a_reason() {
        let site = [
            origin("http", "a.test", 80),
            origin("https", "a.test", 443),
            origin("https", "cdn.test", 443),
        ];
        assert_eq!(recorded_ports(&site), Ok((443, 80)));
        assert_eq!(recorded_ports(&site[1..]), Ok((443, 0)));
        let two = [
            origin("https", "a.test", 443),
            origin("https", "b.test", 8443),
        ];
        let err = recorded_ports(&two).unwrap_err();
        assert!(err.contains("2 ports (443, 8443)"), "{err}");
        let same = [
            origin("https", "a.test", 8000),
            origin("http", "b.test", 8000),
        ];
        assert!(recorded_ports(&same).is_err());
    }

    #[test]
    fn loopback_moves_to_a_private_address_with_the_ports_free() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        // The port is taken on 127.0.0.1, not on the private address chosen instead.
        let named = [origin("https", "a.test", port)];
        let addr = listen_address(&named, "127.0.0.1", port, 0).unwrap();
        assert!(
            matches!(addr, IpAddr::V4(v4) if v4.octets()[..2] == [127, 77]),
            "{addr}"
        );
        let held = TcpListener::bind(SocketAddr::new(addr, port)).unwrap();
        // Every candidate but the held one is still free: another is chosen.
        let next = listen_address(&named, "127.0.0.1", port, 0).unwrap();
        assert_ne!(next, addr);
        drop(held);
        assert!(listen_address(&named, "not an address", 1, 0).is_err());
        // An origin named by its address is answered there, or not at all behind a link.
        let literal = [origin("https", "127.0.0.1", 9)];
        let at = listen_address(&literal, "127.0.0.1", 9, 0).unwrap();
        assert_eq!(at, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(listen_address(&literal, "100.64.0.1", 9, 0).is_err());
    }
}
