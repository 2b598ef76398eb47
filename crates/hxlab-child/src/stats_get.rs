//! `GET` a small JSON document from an `hxlab serve`'s plain port, read into its contract
//! type (`/stats` as [`StatsSnapshot`](hxlab_contract::StatsSnapshot), `/replay-stats` as
//! [`ReplayCounts`](hxlab_contract::ReplayCounts)): one blocking HTTP/1.1 request, bounded
//! in time and size.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// `GET /stats` on a server's plain port, parsed into the contract's type; None when the
/// server cannot be reached or the body is not a `/stats` document.
pub fn get_stats(addr: SocketAddr) -> Option<hxlab_contract::StatsSnapshot> {
    hxlab_contract::StatsSnapshot::from_json(&get_body(addr, "/stats")?).ok()
}

/// `GET /replay-stats` on a replaying server's plain port, parsed into the contract's type;
/// `reset` zeroes the counts and rewinds every recorded sequence after reading them. The
/// error is one line: the server could not be reached or its body is no `/replay-stats`.
pub fn get_replay_counts(
    addr: SocketAddr,
    reset: bool,
) -> Result<hxlab_contract::ReplayCounts, String> {
    let path = if reset {
        "/replay-stats?reset=1"
    } else {
        "/replay-stats"
    };
    get_body(addr, path)
        .and_then(|body| hxlab_contract::ReplayCounts::from_json(&body).ok())
        .ok_or_else(|| format!("could not read {path} from the replay server at {addr}"))
}

/// `GET path` on a server's plain port, its body (de-chunked, trimmed; 1 MiB at most, 2 s
/// per step).
fn get_body(addr: SocketAddr, path: &str) -> Option<String> {
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
    Some(body.trim().to_string())
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
