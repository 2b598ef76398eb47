//! The server's own counters (`GET /stats` on its plain port), read before and after each
//! cell so its CPU time and connections are attributed per cell.

use crate::spec::Protocol;
use hxlab_page::get_json;
use hxlab_report::ServerCost;
use std::collections::BTreeMap;
use std::net::SocketAddr;

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
