//! A page load as a `RunResult`, so the lab stores browser runs next to load runs.

use super::PageRun;
use crate::result::{RunConfig, SCHEMA_VERSION};
use crate::Proto;
use crate::RunResult;
use std::collections::{BTreeMap, BTreeSet};

impl PageRun {
    /// This run as a [`RunResult`]: one "request" per resource, `duration_s` = the load event,
    /// latency/ttfb histograms from the per-resource timings, connections and negotiated
    /// protocols per browser connection. The page metrics go into `config.extra`
    /// (`workload=browser`, `ttfb_ms`, `dom_content_loaded_ms`, `load_ms`, `fcp_ms`, `lcp_ms`,
    /// `cls`, `speed_index_ms`, `cpu_slowdown` when above 1, `browser`, and `flag` when the
    /// run must not count). A repeat view is not part of it: it is a run of its own.
    pub fn to_run_result(&self) -> RunResult {
        let mut r = RunResult {
            schema: SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            started_unix_s: self.started_unix_s,
            duration_s: (self.load_ms / 1000.0).max(0.0),
            ..RunResult::default()
        };
        let mut extra = BTreeMap::new();
        extra.insert("workload".to_string(), "browser".to_string());
        extra.insert("browser".to_string(), self.browser.clone());
        for (k, v) in [
            ("ttfb_ms", Some(self.ttfb_ms)),
            ("dom_content_loaded_ms", Some(self.dom_content_loaded_ms)),
            // -1: the load event never fired.
            ("load_ms", Some(self.load_ms).filter(|v| *v >= 0.0)),
            ("fcp_ms", self.fcp_ms),
            ("lcp_ms", self.lcp_ms),
            ("speed_index_ms", self.speed_index_ms),
        ] {
            if let Some(v) = v {
                extra.insert(k.to_string(), format!("{v:.3}"));
            }
        }
        if let Some(cls) = self.cls {
            extra.insert("cls".to_string(), format!("{cls:.4}"));
        }
        if self.cpu_slowdown > 1.0 {
            extra.insert("cpu_slowdown".to_string(), self.cpu_slowdown.to_string());
        }
        if let Some(f) = &self.flag {
            extra.insert("flag".to_string(), f.clone());
        }
        if self.plain_http_responses > 0 {
            extra.insert(
                "plain_http_responses".to_string(),
                self.plain_http_responses.to_string(),
            );
        }
        r.config = RunConfig {
            urls: vec![self.url.clone()],
            protocol: self.requested_protocol.name().to_string(),
            clients: 1,
            threads: 1,
            requests: self.resources.len() as u64,
            extra,
            ..RunConfig::default()
        };
        let mut per_connection: BTreeMap<u64, String> = BTreeMap::new();
        let mut plain_connections: BTreeSet<u64> = BTreeSet::new();
        for res in &self.resources {
            r.requests_started += 1;
            if res.status > 0 {
                r.requests_done += 1;
                *r.status.entry(res.status.to_string()).or_default() += 1;
                if res.status < 400 && res.error.is_none() {
                    r.requests_succeeded += 1;
                }
            }
            if let Some(e) = &res.error {
                r.requests_failed += 1;
                r.errors.other += 1;
                if r.error_samples.len() < 5 && !r.error_samples.contains(e) {
                    r.error_samples.push(e.clone());
                }
            }
            // A plain http:// response (a recorded http → https redirect) is HTTP/1.1
            // whatever was asked: its connection counts, but not as the protocol negotiated.
            let plain = super::is_plain_http(&res.url);
            if res.connection_id != 0 {
                if plain && matches!(self.requested_protocol, Proto::H2 | Proto::H3) {
                    plain_connections.insert(res.connection_id);
                } else {
                    per_connection.insert(res.connection_id, res.protocol.clone());
                }
            }
            r.bytes.body_received += res.body_bytes;
            if let Some(d) = res.duration_ms.filter(|d| *d >= 0.0) {
                let us = (d * 1000.0).round() as u64;
                r.histograms.latency.record_micros(us);
                r.histograms.latency_uncorrected.record_micros(us);
            }
            if let Some(t) = res.response_ms.filter(|t| *t >= 0.0) {
                r.histograms.ttfb.record_micros((t * 1000.0).round() as u64);
            }
        }
        r.bytes.total_received = self.bytes;
        plain_connections.retain(|id| !per_connection.contains_key(id));
        r.connections = (per_connection.len() + plain_connections.len()) as u64;
        let protocols: BTreeSet<&String> = per_connection.values().collect();
        for p in protocols {
            let n = per_connection.values().filter(|v| *v == p).count() as u64;
            r.negotiated.insert(p.clone(), n);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use crate::page::{PageRun, ResourceTiming};
    use crate::Proto;

    fn resource(conn: u64, status: u16, error: Option<&str>) -> ResourceTiming {
        ResourceTiming {
            url: "https://h/x".into(),
            resource_type: "Script".into(),
            protocol: "h2".into(),
            status,
            connection_id: conn,
            connection_reused: false,
            start_ms: 0.0,
            response_ms: Some(2.0),
            duration_ms: Some(5.0),
            encoded_bytes: 120,
            body_bytes: 100,
            from_early_hints: false,
            from_cache: false,
            error: error.map(str::to_string),
            phases: Default::default(),
            priority: String::new(),
            priority_header: None,
        }
    }

    #[test]
    fn a_page_run_becomes_a_run_result() {
        let run = PageRun {
            url: "https://h/".into(),
            requested_protocol: Proto::H2,
            browser: "Chromium 156.0".into(),
            browser_major: 156,
            started_unix_s: 1.0e9,
            ttfb_ms: 3.0,
            dom_content_loaded_ms: 8.0,
            load_ms: 250.0,
            fcp_ms: Some(9.0),
            connections: 1,
            bytes: 360,
            resources_loaded: 2,
            resources_failed: 1,
            resources: vec![
                resource(7, 200, None),
                resource(7, 200, None),
                resource(0, 0, Some("net::ERR_ABORTED")),
            ],
            ..PageRun::default()
        };
        let r = run.to_run_result();
        assert_eq!(r.config.protocol, "h2");
        assert_eq!(r.config.extra["workload"], "browser");
        assert_eq!(r.config.extra["load_ms"], "250.000");
        assert!(!r.config.extra.contains_key("lcp_ms"));
        let mut with_vitals = run.clone();
        with_vitals.lcp_ms = Some(40.0);
        with_vitals.cls = Some(0.125);
        with_vitals.speed_index_ms = Some(35.5);
        let extra = with_vitals.to_run_result().config.extra;
        assert_eq!(
            (&extra["lcp_ms"], &extra["cls"], &extra["speed_index_ms"]),
            (
                &"40.000".to_string(),
                &"0.1250".to_string(),
                &"35.500".to_string()
            )
        );
        assert_eq!(
            (
                r.requests_started,
                r.requests_done,
                r.requests_succeeded,
                r.requests_failed
            ),
            (3, 2, 2, 1)
        );
        assert_eq!(r.connections, 1);
        assert_eq!(r.negotiated["h2"], 1);
        assert_eq!(r.bytes.body_received, 300);
        assert_eq!(r.histograms.latency.len(), 3);
        assert!((r.duration_s - 0.25).abs() < 1e-9);
        assert_eq!(r.error_samples, vec!["net::ERR_ABORTED".to_string()]);
        // A recorded http → https redirect over its own plain connection: counted as a
        // connection, never as the protocol negotiated for an h2 page.
        let mut redirected = run.clone();
        let mut hop = resource(3, 301, None);
        hop.url = "http://h/".into();
        hop.protocol = "http/1.1".into();
        redirected.resources.insert(0, hop);
        redirected.plain_http_responses = 1;
        let r = redirected.to_run_result();
        assert_eq!(r.connections, 2);
        assert_eq!(r.negotiated.keys().collect::<Vec<_>>(), vec!["h2"]);
        assert_eq!(r.config.extra["plain_http_responses"], "1");
    }
}
