//! The server's own counters (`GET /stats` on its plain port, read as hxlab-contract's
//! [`StatsSnapshot`]), read before and after each cell so its CPU time, connections and
//! send path are attributed per cell.

use crate::experiment::Protocol;
use hxlab_contract::{ProtoStats, StatsSnapshot};
use hxlab_core::cc::counts_since;
use hxlab_core::sched::Scheduling;
use hxlab_report::ServerCost;
use std::collections::BTreeMap;
use std::net::SocketAddr;

/// The server's cost between two `/stats` readings, shared by `n` repetitions.
pub(crate) fn server_cost(
    before: Option<&StatsSnapshot>,
    after: Option<&StatsSnapshot>,
    proto: Protocol,
    n: usize,
) -> Option<ServerCost> {
    let (b, a) = (before?, after?);
    let requests = a
        .protocol(proto)?
        .requests
        .saturating_sub(b.protocol(proto)?.requests);
    let n = n.max(1);
    Some(ServerCost {
        cpu_s: (a.cpu_s() - b.cpu_s()).max(0.0) / n as f64,
        requests: requests / n as u64,
    })
}

/// What one of `proto`'s count maps (`of`: its connections per congestion controller, per
/// encoder header table size, ...) gained between two readings.
pub(crate) fn counts_between(
    before: Option<&StatsSnapshot>,
    after: Option<&StatsSnapshot>,
    proto: Protocol,
    of: fn(&ProtoStats) -> &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    let (Some(b), Some(a)) = (before, after) else {
        return BTreeMap::new();
    };
    let empty = BTreeMap::new();
    let was = b.protocol(proto).map_or(&empty, of);
    counts_since(a.protocol(proto).map_or(&empty, of), was)
}

/// What the server's send path ran for `proto`'s connections between two readings: its
/// scheduler, the marks of the connections it accepted, the priorities it understood.
pub(crate) fn server_scheduling(
    before: Option<&StatsSnapshot>,
    after: Option<&StatsSnapshot>,
    proto: Protocol,
) -> Option<Scheduling> {
    Some(after?.scheduling(Some(before?), Some(proto)))
}

/// `GET /stats` on the plain port; None when it cannot be read.
pub(crate) fn server_stats(addr: SocketAddr) -> Option<StatsSnapshot> {
    hxlab_child::get_stats(addr)
}
