//! What `hxlab load` runs for one cell: a typed [`LoadConfig`] (the one `hxlab load` parses
//! its own flags into), handed to the child as `--config`.

use super::target::{Meter, Target};
use super::{BROWSER_CONNECTIONS, MAX_STREAMS};
use crate::experiment::{CellConfig, Experiment, Protocol};
use hxlab_contract::LoadConfig;
use hxlab_core::Proto;
use hxlab_report::Workload;
use std::time::Duration;

/// The load generator's run for one cell and what it should receive.
#[derive(Clone, Debug)]
pub(crate) struct LoadPlan {
    /// The run, with URLs on 127.0.0.1 (`hxlab load --jobs` inside a link moves them to its host).
    pub config: LoadConfig,
    /// Body bytes a complete repetition receives (resources workload).
    pub expected_body_bytes: Option<u64>,
}

/// The load protocol of a cell's protocol.
fn load_proto(p: Protocol) -> Proto {
    match p {
        Protocol::H1 | Protocol::H1Tls => Proto::H1,
        Protocol::H2 => Proto::H2,
        Protocol::H2c => Proto::H2c,
        Protocol::H3 => Proto::H3,
    }
}

/// Whole milliseconds, as the runner has always handed durations to `hxlab load`.
fn whole_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

/// The run of one cell against `target`.
pub(crate) fn plan(
    exp: &Experiment,
    cfg: &CellConfig,
    target: &Target,
) -> Result<LoadPlan, String> {
    let origin = target.base.trim_end_matches('/').to_string();
    let mut load = LoadConfig {
        proto: load_proto(cfg.protocol),
        ..LoadConfig::default()
    };
    let expected = match exp.workload {
        Workload::Resources | Workload::Browser => resources(exp, cfg, &origin, &mut load),
        Workload::Throughput => {
            throughput(exp, cfg, &origin, &mut load);
            None
        }
    };
    if let Some(url) = target.templated(exp.workload, cfg.size, cfg.resources) {
        // A server that serves files: the same resource of the cell's size, no delay, no push
        // (the spec refuses both for such origins). Its length is the file's, known only for
        // the document root the lab filled.
        load.urls = vec![url];
        if exp.workload != Workload::Throughput {
            load.requests = cfg.resources;
            load.push = false;
            (load.clients, load.max_concurrent_streams) = browser_like(cfg);
        }
    }
    // The cell's `cc`/`cc_client`, or none: the system's default, as the lab's factor
    // means (not `hxlab load`'s own default, cubic).
    load.cc = cfg.cc_client;
    if let Some(t) = cfg.header_table {
        // Both of the client's tables, as the origin's one (`hxlab load --header-table`).
        load.header_table_size = t;
        load.encoder_header_table_size = t;
    }
    load.no_keepalive = !cfg.keepalive;
    if cfg.tls_resume || cfg.zero_rtt {
        // A returning visitor: one unmeasured request first, so the measured connections
        // resume its session (and send early data) on every protocol alike.
        load.tls_resume = true;
        load.prime = true;
    }
    // TCP's own 0-RTT: the ClientHello and its early data ride on the SYN.
    load.tfo = cfg.zero_rtt && cfg.protocol != Protocol::H3;
    load.zero_rtt = cfg.zero_rtt;
    if cfg.protocol.tls() {
        if target.insecure || (cfg.needs_link() && target.local) {
            // Through the link a local server is reached by an address its certificate
            // does not name.
            load.insecure = true;
        } else {
            load.cacert = target.cacert.clone();
        }
    }
    Ok(LoadPlan {
        config: load,
        // A url origin's bodies are whatever it serves.
        expected_body_bytes: expected.filter(|_| !matches!(target.meter, Meter::Unavailable)),
    })
}

/// Connections and streams per connection as a browser opens them: 6 on HTTP/1.1, one
/// multiplexed connection otherwise.
fn browser_like(cfg: &CellConfig) -> (u64, u64) {
    let n = cfg.resources;
    if cfg.protocol.multiplexed() {
        (1, n.min(MAX_STREAMS))
    } else {
        (n.min(BROWSER_CONNECTIONS), 1)
    }
}

/// The resources workload: a page's `n` resources fetched as a browser would (6 connections
/// on HTTP/1.1, one multiplexed connection otherwise), or pushed with the page.
fn resources(
    exp: &Experiment,
    cfg: &CellConfig,
    origin: &str,
    load: &mut LoadConfig,
) -> Option<u64> {
    let n = cfg.resources;
    let delay_ms = cfg.delay.as_millis();
    let delay_q = if delay_ms > 0 {
        format!("?delay={delay_ms}")
    } else {
        String::new()
    };
    let (clients, streams) = browser_like(cfg);
    let page = |push: u8| {
        format!(
            "{origin}/page?n={n}&size={}&delay={delay_ms}&push={push}",
            cfg.size
        )
    };
    if cfg.push {
        // The page with its resources pushed: one request, the rest arrives by push. The
        // request completes when the page and every pushed resource have arrived, their
        // bytes counted (spec: push needs h2/h2c).
        load.urls = vec![page(1)];
        load.requests = 1;
        load.push = true;
    } else if exp.factors.iter().any(|f| f.name == "push") {
        // The same page, resources requested by the client after the page arrived.
        load.urls = vec![page(0)];
        load.urls
            .extend((0..n).map(|_| format!("{origin}/bytes/{}{delay_q}", cfg.size)));
        load.requests = n + 1;
    } else {
        load.urls = vec![format!("{origin}/bytes/{}{delay_q}", cfg.size)];
        load.requests = n;
    }
    (load.clients, load.max_concurrent_streams) = if load.urls.len() > 1 {
        (1, 1)
    } else {
        (clients, streams)
    };
    Some(n * cfg.size)
}

/// The throughput workload: `-n` requests or `-D` seconds over `-c` connections × `-m`
/// streams, after an optional warm-up.
fn throughput(exp: &Experiment, cfg: &CellConfig, origin: &str, load: &mut LoadConfig) {
    let delay_ms = cfg.delay.as_millis();
    match cfg.duration {
        // `requests` keeps its default: a duration-bound run ignores it.
        Some(d) => load.duration = Some(whole_ms(d)),
        None => load.requests = cfg.requests,
    }
    load.clients = cfg.clients;
    load.max_concurrent_streams = cfg.streams;
    if let Some(w) = exp.warm_up.filter(|w| !w.is_zero()) {
        load.warm_up = whole_ms(w);
    }
    let delay_q = if delay_ms > 0 {
        format!("?delay={delay_ms}")
    } else {
        String::new()
    };
    load.urls = vec![format!("{origin}/bytes/{}{delay_q}", cfg.size)];
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{parse, Overrides};
    use hxlab_core::cc::CongestionControl;

    fn hxlab(p: Protocol) -> Target {
        let port = if p.tls() { 4433 } else { 8080 };
        let scheme = if p.tls() { "https" } else { "http" };
        Target {
            base: format!("{scheme}://127.0.0.1:{port}"),
            paths: None,
            cacert: Some("/tmp/c.pem".into()),
            insecure: false,
            local: true,
            meter: Meter::Stats("127.0.0.1:8080".parse().unwrap()),
            spki: None,
        }
    }

    fn plans(src: &str) -> Vec<LoadPlan> {
        let e = parse("t.toml", src, &Overrides::default()).expect("parse");
        e.cells
            .iter()
            .map(|c| plan(&e, &c.config, &hxlab(c.config.protocol)).expect("plan"))
            .collect()
    }

    #[test]
    fn resources_workload_fetches_as_a_browser_would() {
        let p = plans("protocol = [\"h1-tls\", \"h2\", \"h3\", \"h1\"]\ndelay = \"50ms\"\nresources = 12\nsize = \"10KiB\"\n");
        let c = &p[0].config;
        assert_eq!(c.proto, Proto::H1);
        assert_eq!(
            (c.requests, c.clients, c.max_concurrent_streams),
            (12, 6, 1)
        );
        assert_eq!(
            c.cacert.as_deref(),
            Some(std::path::Path::new("/tmp/c.pem"))
        );
        assert_eq!(c.urls, ["https://127.0.0.1:4433/bytes/10240?delay=50"]);
        let c = &p[1].config;
        assert_eq!(c.proto, Proto::H2);
        assert_eq!(
            (c.requests, c.clients, c.max_concurrent_streams),
            (12, 1, 12)
        );
        assert_eq!(p[1].expected_body_bytes, Some(12 * 10240));
        let c = &p[3].config;
        assert_eq!(c.urls, ["http://127.0.0.1:8080/bytes/10240?delay=50"]);
        assert_eq!(c.cacert, None);
        // What the child reads back is what the runner planned.
        for lp in &p {
            assert_eq!(
                LoadConfig::from_json(&lp.config.to_json()).unwrap(),
                lp.config
            );
        }
        let p = plans("protocol = \"h3\"\nresources = 3750\n");
        assert_eq!(
            (p[0].config.clients, p[0].config.max_concurrent_streams),
            (1, 100),
            "the server allows 100 streams"
        );
    }

    #[test]
    fn throughput_and_push_plans() {
        let p = plans("workload = \"throughput\"\nprotocol = \"h2\"\nrequests = 1000\nclients = 10\nstreams = 10\nsize = 100\nprofile = \"WiFi\"\n");
        let c = &p[0].config;
        assert_eq!(
            (c.requests, c.clients, c.max_concurrent_streams),
            (1000, 10, 10)
        );
        let w = plans(
            "workload = \"throughput\"\nwarm_up = \"1s\"\nprotocol = \"h2\"\nduration = \"2s\"\n",
        );
        assert_eq!(w[0].config.warm_up, Duration::from_secs(1));
        assert_eq!(w[0].config.duration, Some(Duration::from_secs(2)));
        assert!(
            c.insecure,
            "through the link the certificate does not name the address"
        );
        assert_eq!(c.urls, ["https://127.0.0.1:4433/bytes/100"]);
        let p = plans("protocol = \"h2\"\nresources = 1\nsize = \"290KB\"\npush = [false, true]\n");
        assert_eq!(p[0].config.urls.len(), 2, "page, then the script");
        assert!(!p[0].config.push);
        assert!(p[1].config.urls[0].ends_with("push=1"));
        // Only the pushed cell accepts pushes.
        assert!(p[1].config.push);
        let p = plans("protocol = \"h2\"\nzero_rtt = true\ncc = \"cubic\"\n");
        let c = &p[0].config;
        assert!(c.zero_rtt && c.tls_resume && c.prime && c.tfo);
        assert_eq!(c.cc, Some(CongestionControl::Cubic));
        // Without `cc` the client keeps the system's default, as the factor's levels say.
        let p = plans("protocol = \"h2\"\n");
        assert_eq!(p[0].config.cc, None);
    }
}
