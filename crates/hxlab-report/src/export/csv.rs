//! results.csv: one row per repetition with its factors and figures, for spreadsheets.

use super::Exporter;
use crate::model::Record;
use crate::report::Report;
use crate::ReportError;
use std::fmt::Display;

/// CSV of every repetition (`results.csv`).
pub struct CsvExporter;

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => String::new(),
    }
}

/// Names of the figure columns after the factors, in order.
const FIGURE_COLUMNS: [&str; 24] = [
    "repetition",
    "status",
    "duration_s",
    "requests_done",
    "requests_failed",
    "requests_per_s",
    "ttfb_p50_ms",
    "latency_mean_us",
    "latency_p99_us",
    "connections",
    "negotiated",
    "server_cc",
    "client_cc",
    "scheduler",
    "notsent_lowat",
    "priorities",
    "body_bytes",
    "header_savings_pct",
    "header_sent_per_req",
    "header_received_per_req",
    "server_cpu_us_per_req",
    "client_cpu_us_per_req",
    "wall_s",
    "note",
];

impl Exporter for CsvExporter {
    fn file_name(&self) -> Option<&'static str> {
        Some("results.csv")
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let factor_names = factor_names(r);
        let mut header: Vec<String> = vec!["experiment".into(), "cell".into()];
        header.extend(factor_names.iter().cloned());
        header.extend(FIGURE_COLUMNS.map(String::from));
        let mut out = header.join(",");
        out.push('\n');
        for rec in &r.records {
            out.push_str(&record_row(rec, &factor_names).join(","));
            out.push('\n');
        }
        Ok(out)
    }
}

/// The experiment's factors in declared order, then any other factor a record names.
fn factor_names(r: &Report) -> Vec<String> {
    let mut names: Vec<String> = r.meta.factors.iter().map(|f| f.name.clone()).collect();
    for rec in &r.records {
        for k in rec.factors.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names
}

/// `k:v` pairs joined by spaces (negotiated protocols, congestion-control settings).
fn pairs<K: Display, V: Display>(m: impl IntoIterator<Item = (K, V)>) -> String {
    m.into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One record's fields, quoted, in the order of the header.
fn record_row(rec: &Record, factor_names: &[String]) -> Vec<String> {
    let mut row: Vec<String> = vec![quote(&rec.experiment), quote(&rec.cell)];
    row.extend(
        factor_names
            .iter()
            .map(|f| quote(rec.factors.get(f).map(String::as_str).unwrap_or(""))),
    );
    let status = if rec.skipped.is_some() {
        "skipped"
    } else if rec.is_clean() {
        "ok"
    } else {
        "error"
    };
    row.push(rec.repetition.to_string());
    row.push(status.into());
    let res = rec.result.as_ref();
    row.push(num(res.map(|r| r.duration_s)));
    row.push(res.map(|r| r.requests_done.to_string()).unwrap_or_default());
    row.push(
        res.map(|r| r.requests_failed.to_string())
            .unwrap_or_default(),
    );
    row.push(num(res.map(|r| r.requests_per_sec())));
    row.push(num(res
        .filter(|r| !r.histograms.ttfb.is_empty())
        .map(|r| r.histograms.ttfb.quantile(0.5) as f64 / 1000.0)));
    row.push(num(res
        .filter(|r| !r.histograms.latency.is_empty())
        .map(|r| r.histograms.latency.percentiles().mean)));
    row.push(num(res
        .filter(|r| !r.histograms.latency.is_empty())
        .map(|r| r.histograms.latency.quantile(0.99) as f64)));
    row.push(res.map(|r| r.connections.to_string()).unwrap_or_default());
    row.push(quote(
        &res.map(|r| pairs(&r.negotiated)).unwrap_or_default(),
    ));
    for m in [&rec.server_cc, &rec.client_cc] {
        row.push(quote(&pairs(m)));
    }
    // hxlab's origin's send path, read back; `n/a` where HTTP/1.1 has nothing to schedule.
    let sched = rec.scheduling.as_ref();
    row.push(match sched {
        Some(s) if !s.scheduler_applies => "n/a".into(),
        Some(s) => s
            .scheduler
            .map(|x| x.name().to_string())
            .unwrap_or_default(),
        None => String::new(),
    });
    for m in [
        sched.map(|s| &s.notsent_lowat),
        sched.map(|s| &s.priorities),
    ] {
        row.push(quote(&m.map(pairs).unwrap_or_default()));
    }
    row.push(
        res.map(|r| r.bytes.body_received.to_string())
            .unwrap_or_default(),
    );
    row.push(num(res
        .filter(|r| r.bytes.header_uncompressed > 0)
        .map(|r| r.bytes.header_savings() * 100.0)));
    let per_request = res.and_then(crate::cells::head_bytes_per_request);
    row.push(num(per_request.map(|p| p.0)));
    row.push(num(per_request.map(|p| p.1)));
    row.push(num(rec
        .server
        .as_ref()
        .and_then(|s| s.cpu_us_per_request())));
    row.push(num(res
        .filter(|r| r.requests_done > 0)
        .map(|r| r.cpu_us_per_request())));
    row.push(num(Some(rec.wall_s)));
    let note = rec
        .skipped
        .clone()
        .or_else(|| rec.error.clone())
        .unwrap_or_default();
    row.push(quote(&note));
    row
}
