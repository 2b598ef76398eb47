//! results.csv: one row per repetition with its factors and figures, for spreadsheets.

use super::Exporter;
use crate::summary::Report;
use crate::ReportError;

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

impl Exporter for CsvExporter {
    fn file_name(&self) -> Option<&'static str> {
        Some("results.csv")
    }

    fn render(&self, r: &Report) -> Result<String, ReportError> {
        let mut factor_names: Vec<String> = r.meta.factors.iter().map(|f| f.name.clone()).collect();
        for rec in &r.records {
            for k in rec.factors.keys() {
                if !factor_names.contains(k) {
                    factor_names.push(k.clone());
                }
            }
        }
        let mut header: Vec<String> = vec!["experiment".into(), "cell".into()];
        header.extend(factor_names.iter().cloned());
        header.extend(
            [
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
                "body_bytes",
                "header_savings_pct",
                "server_cpu_us_per_req",
                "client_cpu_us_per_req",
                "wall_s",
                "note",
            ]
            .map(String::from),
        );
        let mut out = header.join(",");
        out.push('\n');
        for rec in &r.records {
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
                &res.map(|r| {
                    r.negotiated
                        .iter()
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default(),
            ));
            for m in [&rec.server_cc, &rec.client_cc] {
                row.push(quote(
                    &m.iter()
                        .map(|(k, v)| format!("{k}:{v}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                ));
            }
            row.push(
                res.map(|r| r.bytes.body_received.to_string())
                    .unwrap_or_default(),
            );
            row.push(num(res
                .filter(|r| r.bytes.header_uncompressed > 0)
                .map(|r| r.bytes.header_savings() * 100.0)));
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
            out.push_str(&row.join(","));
            out.push('\n');
        }
        Ok(out)
    }
}
