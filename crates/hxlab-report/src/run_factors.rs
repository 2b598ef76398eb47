//! The factors a [`RunResult`] or a lab [`Record`] carries, as `hxlab diff` names them: what
//! the run was asked (every field of its `config`, `extra` options one by one; a record's
//! cell levels too), what its connections ran, read back (protocol, TLS version, the
//! client's congestion controller, resumption, 0-RTT, TCP Fast Open, header tables; from a
//! record also the server's controller, scheduler, send low-water marks and the priorities
//! it understood), and where it ran (its `environment`). A factor's value is text for
//! people: names, not connection counts, so two runs of one setup read the same.
//!
//! A load run's RunResult cannot know the server's side: the server's controller and
//! scheduler are named only from lab records.

use crate::model::Record;
use hxlab_core::header_table::HeaderTableSeen;
use hxlab_core::RunResult;
use std::collections::BTreeMap;

/// One factor of one run: its name and its value as text.
pub type Factor = (String, String);

/// Every factor of `r`, in a fixed order: asked, then read back, then the environment.
pub fn factors(r: &RunResult) -> Vec<Factor> {
    let mut out = asked(r);
    out.extend(read_back(r));
    out.extend(environment(r.environment.as_ref()));
    out
}

/// Every factor of a lab record: its cell's levels (`cell: cc`), its RunResult's asked and
/// read-back factors, what the server read back (its congestion controller; for hxlab's
/// origin its scheduler, `TCP_NOTSENT_LOWAT` marks and the priorities it understood), and
/// the environment.
pub fn record_factors(rec: &Record) -> Vec<Factor> {
    let mut out: Vec<Factor> = rec
        .factors
        .iter()
        .map(|(k, v)| (format!("cell: {k}"), v.clone()))
        .collect();
    if let Some(r) = &rec.result {
        out.extend(asked(r));
        out.extend(read_back(r));
    }
    let f = |name: &str, v: String| (format!("{name} (read back)"), v);
    out.push(f("congestion control, server", names(&rec.server_cc)));
    if !rec.server_encoder_tables.is_empty() {
        out.push(f(
            "header table, server encoder",
            names(&rec.server_encoder_tables),
        ));
    }
    if let Some(s) = &rec.scheduling {
        let scheduler = s
            .scheduler
            .map_or("none".to_string(), |s| s.name().to_string());
        out.push(f(
            "scheduler",
            if s.scheduler_applies {
                scheduler
            } else {
                format!("{scheduler} (one response at a time: does not apply)")
            },
        ));
        out.push(f("TCP_NOTSENT_LOWAT", names(&s.notsent_lowat)));
        out.push(f("priorities understood", names(&s.priorities)));
    }
    let env = rec
        .environment
        .as_ref()
        .or(rec.result.as_ref().and_then(|r| r.environment.as_ref()));
    out.extend(environment(env));
    out
}

/// A JSON value as people read it: strings bare, null as `none`.
fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "none".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// What was asked: every field of `config` by its JSON name (so a field added to the
/// configuration is a factor without being listed here), `extra`'s options each on their
/// own.
fn asked(r: &RunResult) -> Vec<Factor> {
    let Ok(serde_json::Value::Object(config)) = serde_json::to_value(&r.config) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, value) in &config {
        match value {
            serde_json::Value::Object(extra) if key == "extra" => {
                out.extend(extra.iter().map(|(k, v)| (k.clone(), text(v))));
            }
            serde_json::Value::Array(list) => {
                let items: Vec<String> = list.iter().map(text).collect();
                out.push((key.clone(), items.join(", ")));
            }
            serde_json::Value::Null if key == "cc" => out.push((key.clone(), "system".into())),
            v => out.push((key.clone(), text(v))),
        }
    }
    out
}

/// The names a map counts connections by (`h2, http/1.1`), `none` when empty.
fn names(m: &BTreeMap<String, u64>) -> String {
    let seen: Vec<&str> = m
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(k, _)| k.as_str())
        .collect();
    if seen.is_empty() {
        "none".into()
    } else {
        seen.join(", ")
    }
}

/// `none`, `some` or `all` of `total`.
fn share(part: u64, total: u64) -> String {
    match part {
        0 => "none".into(),
        p if p >= total => "all".into(),
        _ => "some".into(),
    }
}

/// Whether something a server may accept was accepted, rejected, both or neither.
fn outcome(accepted: &BTreeMap<String, u64>, rejected: &BTreeMap<String, u64>) -> String {
    let (a, r) = (
        accepted.values().sum::<u64>() > 0,
        rejected.values().sum::<u64>() > 0,
    );
    match (a, r) {
        (false, false) => "none".into(),
        (true, false) => "accepted".into(),
        (false, true) => "rejected".into(),
        (true, true) => "accepted and rejected".into(),
    }
}

/// A header-table entry's sizes (its connection count left out).
fn table(t: &HeaderTableSeen) -> String {
    let mut s = format!(
        "{}: ours {}, server's {}, encoder {}",
        t.protocol,
        t.client_advertised,
        t.server_advertised
            .map_or_else(|| "none".to_string(), |n| n.to_string()),
        t.encoder_table
    );
    if let (Some(c), Some(sv)) = (t.client_blocked_streams, t.server_blocked_streams) {
        s.push_str(&format!(", blocked streams {c}/{sv}"));
    }
    s
}

/// What the connections ran, read back from them.
fn read_back(r: &RunResult) -> Vec<Factor> {
    let mut tables: Vec<String> = r.header_tables.iter().map(table).collect();
    tables.sort();
    tables.dedup();
    let f = |name: &str, v: String| (format!("{name} (read back)"), v);
    vec![
        f("protocol", names(&r.negotiated)),
        f("TLS version", names(&r.tls_versions)),
        f("congestion control, client", names(&r.congestion_control)),
        f("resumed connections", share(r.resumed, r.connections)),
        f(
            "0-RTT",
            outcome(&r.early_data_accepted, &r.early_data_rejected),
        ),
        f(
            "TCP Fast Open",
            outcome(&r.tfo_syn_data_acked, &r.tfo_syn_data_not_acked),
        ),
        f(
            "header tables",
            if tables.is_empty() {
                "none".into()
            } else {
                tables.join("; ")
            },
        ),
    ]
}

/// Where the run was made: hxlab, the machine and its default controller, the peers.
fn environment(e: Option<&hxlab_core::env::Environment>) -> Vec<Factor> {
    let Some(e) = e else {
        return Vec::new();
    };
    let peers: Vec<String> = e.peers.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let f = |name: &str, v: String| (format!("environment: {name}"), v);
    vec![
        f(
            "hxlab",
            format!("{} (commit {})", e.hxlab.version, e.hxlab.commit),
        ),
        f("kernel", e.kernel.clone()),
        f("CPU", format!("{} × {}", e.cpus, e.cpu_model)),
        f("system default congestion control", e.default_cc.clone()),
        f(
            "peers",
            if peers.is_empty() {
                "none".into()
            } else {
                peers.join(", ")
            },
        ),
    ]
}

/// The factors of a side of several runs (each run's [`factors`] or [`record_factors`]):
/// each factor's value, or `mixed: a | b` when the runs disagree (in the order of the first
/// run's factors, then any only later runs have).
pub fn side_factors(runs: &[Vec<Factor>]) -> Vec<Factor> {
    let mut order: Vec<String> = Vec::new();
    let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for run in runs {
        for (name, value) in run.iter().cloned() {
            let seen = values.entry(name.clone()).or_insert_with(|| {
                order.push(name);
                Vec::new()
            });
            if !seen.contains(&value) {
                seen.push(value);
            }
        }
    }
    order
        .into_iter()
        .map(|name| {
            let v = &values[&name];
            let value = if v.len() == 1 {
                v[0].clone()
            } else {
                format!("mixed: {}", v.join(" | "))
            };
            (name, value)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asked fields by name (extra options on their own), read-back factors by names, not
    /// counts: two runs of one setup that opened different numbers of connections agree.
    #[test]
    fn factors_name_what_was_asked_and_what_ran() {
        let mut r = RunResult::default();
        r.config.protocol = "h2".into();
        r.config.extra.insert("tls_resume".into(), "true".into());
        r.connections = 4;
        r.resumed = 4;
        r.negotiated.insert("h2".into(), 4);
        r.congestion_control.insert("cubic".into(), 4);
        let f = factors(&r);
        let get = |n: &str| f.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("protocol"), Some("h2"));
        assert_eq!(get("tls_resume"), Some("true"));
        assert_eq!(get("cc"), Some("system"));
        assert_eq!(get("resumed connections (read back)"), Some("all"));
        assert_eq!(get("congestion control, client (read back)"), Some("cubic"));
        let mut more = r.clone();
        more.connections = 9;
        more.resumed = 9;
        more.negotiated.insert("h2".into(), 9);
        assert_eq!(side_factors(&[factors(&r), factors(&more)]), factors(&r));
        let mut other = r.clone();
        other.congestion_control = BTreeMap::from([("reno".to_string(), 1)]);
        let side = side_factors(&[factors(&r), factors(&other)]);
        assert!(side.contains(&(
            "congestion control, client (read back)".to_string(),
            "mixed: cubic | reno".to_string()
        )));
    }

    /// A lab record adds its cell's levels and the server's side, read back.
    #[test]
    fn record_factors_add_the_cell_and_the_servers_side() {
        let rec: Record = serde_json::from_value(serde_json::json!({
            "experiment": "e", "cell": "protocol=h2 scheduler=fifo",
            "factors": {"protocol": "h2", "scheduler": "fifo"},
            "repetition": 0, "started_unix_s": 0.0, "wall_s": 1.0,
            "result": null, "server": null,
            "server_cc": {"reno": 3},
            "scheduling": {"scheduler": "fifo", "scheduler_applies": true,
                           "notsent_lowat": {"16384": 3}, "priorities": {"u=3": 9}},
        }))
        .expect("a record");
        let f = record_factors(&rec);
        let get = |n: &str| f.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("cell: scheduler"), Some("fifo"));
        assert_eq!(get("congestion control, server (read back)"), Some("reno"));
        assert_eq!(get("scheduler (read back)"), Some("fifo"));
        assert_eq!(get("TCP_NOTSENT_LOWAT (read back)"), Some("16384"));
        assert_eq!(get("priorities understood (read back)"), Some("u=3"));
    }
}
