//! The server's own counters (`GET /stats` on its plain port), read before and after each
//! cell so its CPU time and connections are attributed per cell.

use crate::spec::Protocol;
use hxlab_report::ServerCost;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// The server's cost between two `/stats` readings, shared by `n` repetitions.
pub(crate) fn server_cost(
    before: &Option<ServerStats>,
    after: &Option<ServerStats>,
    proto: Protocol,
    n: usize,
) -> Option<ServerCost> {
    let (b, a) = (before.as_ref()?, after.as_ref()?);
    let key = proto.stats_key();
    let requests = a.requests.get(key)?.saturating_sub(*b.requests.get(key)?);
    let n = n.max(1);
    Some(ServerCost {
        cpu_s: (a.cpu_s - b.cpu_s).max(0.0) / n as f64,
        requests: requests / n as u64,
    })
}

/// The server's counters: CPU seconds (user + system), requests per protocol, connections
/// per protocol and congestion controller.
#[derive(Clone, Debug, Default)]
pub(crate) struct ServerStats {
    cpu_s: f64,
    requests: BTreeMap<String, u64>,
    cc: BTreeMap<String, BTreeMap<String, u64>>,
}

/// The server's connections of `proto` per congestion controller between two readings.
pub(crate) fn server_cc(
    before: &Option<ServerStats>,
    after: &Option<ServerStats>,
    proto: Protocol,
) -> BTreeMap<String, u64> {
    let (Some(b), Some(a)) = (before, after) else {
        return BTreeMap::new();
    };
    let key = proto.stats_key();
    let empty = BTreeMap::new();
    let was = b.cc.get(key).unwrap_or(&empty);
    a.cc.get(key)
        .unwrap_or(&empty)
        .iter()
        .map(|(k, n)| (k.clone(), n.saturating_sub(*was.get(k).unwrap_or(&0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `GET path` on a server's plain port, its body as JSON (1 MiB at most, 2 s per step).
pub(crate) fn get_json(addr: SocketAddr, path: &str) -> Option<serde_json::Value> {
    let addr = addr.to_socket_addrs().ok()?.next()?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).ok()?;
    let mut buf = Vec::new();
    s.take(1 << 20).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let (_, body) = text.split_once("\r\n\r\n")?;
    let body = if text[..text.find("\r\n\r\n")?]
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)?
    } else {
        body.to_string()
    };
    serde_json::from_str(body.trim()).ok()
}

/// `GET /stats` on the plain port.
pub(crate) fn server_stats(addr: SocketAddr) -> Option<ServerStats> {
    let v = get_json(addr, "/stats")?;
    let cpu_s = v.get("cpu_user_s")?.as_f64()? + v.get("cpu_sys_s")?.as_f64()?;
    let by = v.get("by_protocol")?.as_object()?;
    let requests = by
        .iter()
        .filter_map(|(k, p)| Some((k.clone(), p.get("requests")?.as_u64()?)))
        .collect();
    let cc = by
        .iter()
        .filter_map(|(k, p)| {
            let m = p.get("cc")?.as_object()?;
            Some((
                k.clone(),
                m.iter()
                    .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                    .collect(),
            ))
        })
        .collect();
    Some(ServerStats {
        cpu_s,
        requests,
        cc,
    })
}

fn dechunk(body: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size_line, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size_line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dechunks_stats() {
        assert_eq!(
            dechunk("5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n").as_deref(),
            Some("hello!")
        );
    }
}
