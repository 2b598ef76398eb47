//! Records: one per repetition, filled from the child's RunResult and exit, and the
//! warnings a record raises.

use crate::experiment::{Cell, CellConfig, Experiment, Protocol};
use hxlab_core::RunResult;
use hxlab_report::Record;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// Empty records for repetitions `reps` of `cell`, stamped with the time they start.
pub(crate) fn new_records(exp: &Experiment, cell: &Cell, reps: &[u32]) -> Vec<Record> {
    let started_unix_s = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    reps.iter()
        .map(|&rep| Record {
            experiment: exp.name.clone(),
            cell: cell.key.clone(),
            factors: cell.factors.clone(),
            repetition: rep,
            started_unix_s,
            environment: Some(exp.environment()),
            ..Default::default()
        })
        .collect()
}

/// Reads a repetition's RunResult and decides whether it failed. `link_exit` is the link's
/// exit status for repetitions run inside one (None for a direct `hxlab load`).
pub(crate) fn fill_record(
    record: &mut Record,
    json: &Path,
    stderr: &str,
    link_exit: Option<Option<i32>>,
) {
    let last_line = hxlab_child::child::last_line(stderr);
    match std::fs::read_to_string(json) {
        Ok(text) => match serde_json::from_str::<RunResult>(&text) {
            Ok(r) => {
                record.client_cc = r.congestion_control.clone();
                record.result = Some(r);
            }
            Err(e) => record.error = Some(format!("hxlab load wrote an unreadable result: {e}")),
        },
        Err(_) => {
            let status = match (link_exit, record.exit_code) {
                (_, Some(c)) => format!("hxlab load exit {c}"),
                (Some(Some(c)), None) => format!("hxlab link exit {c} before this repetition ran"),
                (Some(None), None) => "hxlab link stopped by a signal or the timeout".into(),
                (None, None) => "stopped by a signal or the timeout".into(),
            };
            record.error = Some(format!("no result ({status}): {last_line}"));
        }
    }
    if record.error.is_none() && record.exit_code != Some(0) {
        if let Some(r) = &record.result {
            if r.requests_failed == 0 && r.errors.total() == 0 {
                record.error = Some(format!(
                    "hxlab load exited with {:?}: {last_line}",
                    record.exit_code
                ));
            }
        }
    }
}

/// How many distinct cells the pending repetitions hold.
pub(crate) fn count_cells(pending: &[(&Cell, u32)]) -> usize {
    let mut n = 0;
    let mut last = "";
    for (c, _) in pending {
        if c.key != last {
            n += 1;
            last = &c.key;
        }
    }
    n
}

/// A warning when the connections did not speak the protocol asked for.
pub(crate) fn fallback(cfg: &CellConfig, r: Option<&RunResult>) -> Option<String> {
    let r = r?;
    let want = match cfg.protocol {
        Protocol::H1 | Protocol::H1Tls => ["http/1.1", "h1", "http/1.0"].as_slice(),
        Protocol::H2 | Protocol::H2c => ["h2", "h2c"].as_slice(),
        Protocol::H3 => ["h3"].as_slice(),
    };
    let other: Vec<String> = r
        .negotiated
        .iter()
        .filter(|(k, n)| **n > 0 && !want.contains(&k.to_ascii_lowercase().as_str()))
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect();
    (!other.is_empty()).then(|| {
        format!(
            "asked for {} but connections negotiated {}",
            cfg.protocol.name(),
            other.join(", ")
        )
    })
}

/// Runs one child of a repetition (`hxlab load --config`, `hxlab page --config`) in its own
/// process group, bounded by `limit`, with the server's meter read just before and just
/// after it when the cell has one (`meter`, with the protocol its cost is counted under).
/// Fills the record's wall time, exit code and server cost; returns the end of the child's
/// stderr for the reader of its output. The one place a repetition's child is spawned,
/// metered, bounded and recorded.
pub(crate) fn run_child(
    record: &mut Record,
    cmd: std::process::Command,
    limit: std::time::Duration,
    meter: Option<(&super::target::Meter, crate::experiment::Protocol)>,
) -> String {
    let before = meter.map(|(m, _)| m.read());
    let t = std::time::Instant::now();
    let outcome = hxlab_child::child::run_bounded(cmd, limit);
    record.wall_s = t.elapsed().as_secs_f64();
    let after = meter.map(|(m, _)| m.read());
    let (code, stderr) = outcome.unwrap_or_else(|e| (None, e));
    record.exit_code = code;
    if let (Some((_, proto)), Some(b), Some(a)) = (meter, before, after) {
        super::target::read_back(&b, &a, proto, 1).fill(record);
    }
    stderr
}
