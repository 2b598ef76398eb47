//! Built-in scenarios: the published studies of docs/scenarios.md as experiment files
//! (under `crates/hxlab-lab/scenarios/`), each with its published table, and the matrix of
//! `hxlab compare`. They are ordinary experiment files, so `--set` and `--repetitions` work
//! on them as on any file.

use crate::experiment::{
    parse, Description, Experiment, FactorValue, Overrides, PageInput, Protocol, SpecError,
};
use hxlab_report::Workload;

/// A built-in scenario.
#[derive(Clone, Copy, Debug)]
pub struct Scenario {
    /// Name for `--scenario`.
    pub name: &'static str,
    /// One line for `--list-scenarios`.
    pub summary: &'static str,
    /// The experiment file.
    pub source: &'static str,
    /// The study published its findings in words and plots, not figures: they stand in the
    /// experiment's description, and it has no published table.
    pub qualitative: bool,
}

/// A scenario read from `scenarios/NAME.toml`, followed by the `[origins.*]` tables of the
/// servers it measures beside hxlab's (`with "nginx"`: `origins/nginx.toml`). `published`
/// scenarios have a published table; `qualitative` ones published words and plots.
macro_rules! scenario {
    ($kind:ident $name:literal $(with $origin:literal)*: $summary:literal) => {
        Scenario {
            name: $name,
            summary: $summary,
            qualitative: scenario!(@qualitative $kind),
            source: concat!(
                include_str!(concat!("../scenarios/", $name, ".toml"))
                $(, "\n", include_str!(concat!("../origins/", $origin, ".toml")))*
            ),
        }
    };
    (@qualitative published) => {
        false
    };
    (@qualitative qualitative) => {
        true
    };
}

/// Every built-in scenario, in the order `--list-scenarios` prints them.
#[rustfmt::skip]
pub const SCENARIOS: [Scenario; 13] = [
    scenario!(published "seed-003-delay":
        "100 × 0.1 MB, server delay 0–40 ms: h1 (6 connections) vs h2 vs h3"),
    scenario!(published "seed-003-requests":
        "6–3750 resources of 0.1 MB at 10 and 30 ms delay"),
    scenario!(published "seed-003-size":
        "30 resources of 0.2–2.0 MB at 10 ms delay"),
    scenario!(published "seed-003-network":
        "30 × 0.1 MB over the Chrome presets, packet-level (needs hxlab link)"),
    scenario!(published "seed-003-push":
        "290 KB script pushed vs requested, per profile (h2)"),
    scenario!(published "seed-004-tls" with "nginx":
        "50,000 × 100 B over h2, h1+TLS, h1: req/s, latency, header savings, server CPU"),
    scenario!(published "seed-002-multiplex":
        "100 requests: 10 h1 connections vs one h2/h3 connection, loopback and WAN RTT"),
    scenario!(published "seed-000-https-cpu" with "nginx":
        "100 clients, 5/10 KB objects: server CPU per request, h1 keep-alive on/off vs h2"),
    scenario!(published "seed-001-h3":
        "15 KB and 1 MB, h2 vs h3, RTT 50/100 ms at 10 Mbit/s, same cc on both ends, loss, 0-RTT"),
    scenario!(qualitative "quic-dissected":
        "after Yu & Benson (WWW '21): 100 KB–5 MB, 10 Mbit/s, RTT +50/100 ms, loss 0–1 %, same cc"),
    scenario!(qualitative "hol-blocking":
        "30 × 100 KiB at RTT 50 ms, loss 0/1/2 %, h2 vs h3, same cc on both ends"),
    scenario!(qualitative "servers" with "nginx" with "h2o" with "caddy":
        "hxlab serve vs nginx vs h2o vs Caddy, every protocol each speaks: req/s, latency, server CPU/request"),
    scenario!(published "compare":
        "the matrix of `hxlab compare` (h1, h1-tls, h2, h3 × delay × resources, one network)"),
];

/// The networks `hxlab compare --page` and `--har` replay a page behind by default: none,
/// then cable, 4G, 3G and a lossy mobile link, each a published profile (docs/profiles.md).
pub const PAGE_NETWORKS: [&str; 5] = ["none", "wpt:Cable", "wpt:4G", "wpt:3G", "atc:Edge Lossy"];

/// The experiment of `hxlab compare --page` / `--har`: the recorded page `har` (an absolute
/// path) replayed over HTTP/1.1, HTTP/2 and HTTP/3 behind [`PAGE_NETWORKS`], 5 repetitions
/// each in a fresh browser, judged on largest contentful paint (the load event beside it).
/// The replay server runs one congestion controller, cubic, on TCP and QUIC alike; `--set`
/// and `-r` apply as to any experiment.
pub fn page_experiment(har: &std::path::Path, label: &str) -> Description {
    let text = |s: &str| FactorValue::Text(s.to_string());
    Description {
        name: "compare-page".into(),
        title: format!("hxlab compare --page: {label} over HTTP/1.1, HTTP/2 and HTTP/3"),
        description: format!(
            "The page {label}, recorded once in Chromium, replayed from hxlab's own server over HTTP/1.1 (TLS), \
             HTTP/2 and HTTP/3 behind packet-level emulations of published networks (none, WebPageTest Cable, 4G \
             and 3G, Augmented Traffic Control's lossy Edge link). Each repetition is a fresh headless browser: Chromium, \
             or with --set browser=chromium,firefox each engine in cells of its own (see the notes). \
             The server runs cubic on TCP and QUIC alike, RFC 9218 priorities and a 16 KiB TCP_NOTSENT_LOWAT \
             (each read back per record); the browser's own controller is its default."
        ),
        workload: Workload::Browser,
        repetitions: 5,
        timeout: std::time::Duration::from_secs(180),
        columns: Some("profile"),
        baseline: Some(Protocol::H1Tls),
        seed: Some(1),
        page: Some(PageInput::Har(har.to_path_buf())),
        metric: Some(hxlab_report::Metric::LcpS),
        origins: Vec::new(),
        factors: vec![
            ("protocol", ["h1-tls", "h2", "h3"].map(text).to_vec()),
            ("profile", PAGE_NETWORKS.iter().map(|n| text(n)).collect()),
            ("cc_server", vec![text("cubic")]),
        ],
    }
}

/// The experiment of `hxlab compare --page URL --live`: the site itself (its own servers,
/// caches and CDN), not a recording, loaded over each of `protocols` it offers (as probed
/// first: h1-tls, h2, h3) behind [`PAGE_NETWORKS`], 5 repetitions each in a fresh browser,
/// judged on largest contentful paint (the load event beside it). The first protocol
/// offered is the baseline.
pub fn live_page_experiment(url: &str, protocols: &[Protocol]) -> Description {
    let text = |s: &str| FactorValue::Text(s.to_string());
    let names: Vec<&str> = protocols.iter().map(|p| p.name()).collect();
    Description {
        name: "compare-page-live".into(),
        title: format!("hxlab compare --page --live: {url} (live) over {}", names.join(", ")),
        description: format!(
            "The page {url}, live: loaded from the site itself (its own servers, caches and CDN, not a recording) \
             over each protocol it offers ({}), behind packet-level emulations of published networks. Each \
             repetition is a fresh headless Chromium with the protocol forced. The site's servers, their congestion \
             control and scheduling are its own and are not read back.",
            names.join(", ")
        ),
        workload: Workload::Browser,
        repetitions: 5,
        timeout: std::time::Duration::from_secs(180),
        columns: Some("profile"),
        baseline: protocols.first().copied(),
        seed: Some(1),
        page: Some(PageInput::Url(url.to_string())),
        metric: Some(hxlab_report::Metric::LcpS),
        origins: Vec::new(),
        factors: vec![
            ("protocol", names.iter().map(|n| text(n)).collect()),
            ("profile", PAGE_NETWORKS.iter().map(|n| text(n)).collect()),
        ],
    }
}

/// Finds a scenario by name.
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// Parses a built-in scenario with command-line overrides.
pub fn load(s: &Scenario, overrides: &Overrides) -> Result<Experiment, SpecError> {
    parse(&format!("scenario {}", s.name), s.source, overrides)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_parses_and_has_published_figures() {
        for s in SCENARIOS {
            let e = load(&s, &Overrides::default()).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(e.name, s.name);
            assert!(!e.cells.is_empty());
            if s.name != "compare" && s.name != "servers" {
                assert!(
                    !e.published.is_empty() || s.qualitative,
                    "{} has no published table",
                    s.name
                );
                assert_eq!(e.repetitions, 10, "{}: the seed repeated 10 times", s.name);
            }
            for t in &e.published {
                for r in &t.rows {
                    assert_eq!(r.values.len(), t.columns.len(), "{}: {}", s.name, r.label);
                }
                if let Some(f) = &t.column_factor {
                    let levels = &e
                        .factors
                        .iter()
                        .find(|x| &x.name == f)
                        .expect("column factor")
                        .levels;
                    for c in &t.columns {
                        assert!(
                            levels.contains(c),
                            "{}: published column {c} is not a level of {f}",
                            s.name
                        );
                    }
                }
            }
        }
    }

    /// The examples carry the same origin tables the scenarios use, word for word.
    #[test]
    fn example_origin_tables_are_the_scenarios_own() {
        for (example, table) in [
            (
                include_str!("../../../examples/origins-nginx.toml"),
                include_str!("../origins/nginx.toml"),
            ),
            (
                include_str!("../../../examples/origins-h2o.toml"),
                include_str!("../origins/h2o.toml"),
            ),
            (
                include_str!("../../../examples/origins-caddy.toml"),
                include_str!("../origins/caddy.toml"),
            ),
        ] {
            assert!(
                example.ends_with(table),
                "an example's origin table differs from crates/hxlab-lab/origins/"
            );
        }
        let e = load(find("servers").expect("servers"), &Overrides::default()).expect("parse");
        assert_eq!(e.cells.len(), 4 * 5);
        assert_eq!(e.origins.len(), 3);
        let e = load(find("seed-004-tls").expect("seed"), &Overrides::default()).expect("parse");
        assert_eq!(e.cells.len(), 2 * 3);
    }

    #[test]
    fn seed_scenarios_use_the_published_parameters() {
        let e = load(
            find("seed-003-requests").expect("scenario"),
            &Overrides::default(),
        )
        .expect("parse");
        assert_eq!(e.cells.len(), 3 * 2 * 5);
        assert!(e
            .cells
            .iter()
            .all(|c| c.config.size == 104857 && c.config.resources >= 6));
        let e = load(
            find("seed-002-multiplex").expect("scenario"),
            &Overrides::default(),
        )
        .expect("parse");
        let h1 = e
            .cells
            .iter()
            .find(|c| c.factors["protocol"] == "h1-tls")
            .expect("h1 cell");
        assert_eq!(
            (h1.config.clients, h1.config.streams, h1.config.requests),
            (10, 1, 100)
        );
        let h2 = e
            .cells
            .iter()
            .find(|c| c.factors["protocol"] == "h2")
            .expect("h2 cell");
        assert_eq!((h2.config.clients, h2.config.streams), (1, 100));
        let e = load(find("compare").expect("compare"), &Overrides::default()).expect("parse");
        assert_eq!(e.cells.iter().filter(|c| c.config.needs_link()).count(), 4);
        assert_eq!(e.cells.len(), 4 * 2 * 2 + 4);
    }

    #[test]
    fn the_page_experiment_replays_over_three_protocols_and_five_networks() {
        let dir = std::env::temp_dir().join(format!("hxlab-page-exp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let har = dir.join("site.har");
        std::fs::write(
            &har,
            r#"{"log":{"version":"1.2","pages":[{"title":"http://a.test/"}],"entries":[
            {"request":{"method":"GET","url":"http://a.test/"},"response":{"status":301,"headers":[{"name":"Location","value":"https://a.test/"}],"content":{"size":0}}},
            {"request":{"method":"GET","url":"https://a.test/"},"response":{"status":200,"headers":[],"content":{"size":2,"text":"hi"}}}]}}"#,
        )
        .expect("har");
        let described = page_experiment(&har, "https://a.test/");
        let e = described
            .clone()
            .build(&Overrides::default())
            .expect("build");
        assert_eq!(e.cells.len(), 3 * PAGE_NETWORKS.len());
        assert_eq!(e.repetitions, 5);
        assert!(e
            .cells
            .iter()
            .all(|c| c.config.cc_server == Some(hxlab_core::cc::CongestionControl::Cubic)));
        let set = Overrides {
            set: vec!["profile=none,Regular 4G".into()],
            repetitions: Some(2),
            ..Overrides::default()
        };
        let e = described.clone().build(&set).expect("build");
        assert_eq!((e.cells.len(), e.repetitions), (6, 2));
        // An http:// recording whose redirects do not reach https cannot be HTTP/2 or 3:
        // refused before anything runs.
        std::fs::write(
            &har,
            r#"{"log":{"version":"1.2","entries":[{"request":{"method":"GET","url":"http://a.test/"},"response":{"status":200,"headers":[],"content":{"size":2,"text":"hi"}}}]}}"#,
        )
        .expect("har");
        let err = described
            .build(&Overrides::default())
            .expect_err("no https page")
            .to_string();
        assert!(err.contains("needs an https:// page"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Like for like by default: every built-in scenario that compares protocols on hxlab's
    /// origin either sweeps `cc` or runs one controller on both ends of every such cell, and
    /// `--set cc=...` changes it there without touching the cells of servers the lab cannot
    /// set.
    #[test]
    fn protocol_comparisons_run_one_controller_on_both_ends() {
        for s in SCENARIOS {
            let e = load(&s, &Overrides::default()).expect("parse");
            let protocols = e
                .cells
                .iter()
                .map(|c| c.factors["protocol"].clone())
                .collect::<std::collections::BTreeSet<_>>();
            if protocols.len() < 2 {
                continue;
            }
            for c in e.cells.iter().filter(|c| c.config.origin == "hxlab") {
                let (srv, cli) = (&c.config.cc_server, &c.config.cc_client);
                assert!(
                    srv.is_some() && srv == cli,
                    "{}: cell {} runs {srv:?} on the server and {cli:?} on the client",
                    s.name,
                    c.key
                );
            }
            for c in e.cells.iter().filter(|c| c.config.origin != "hxlab") {
                assert_eq!(c.config.cc_server, None, "{}: {}", s.name, c.key);
            }
        }
        let set = Overrides {
            set: vec!["cc=bbr".into()],
            ..Overrides::default()
        };
        for name in ["seed-004-tls", "servers", "seed-000-https-cpu", "compare"] {
            let e = load(find(name).expect("scenario"), &set).expect("--set cc=bbr");
            for c in &e.cells {
                let want =
                    (c.config.origin == "hxlab").then_some(hxlab_core::cc::CongestionControl::Bbr);
                assert_eq!(c.config.cc_server, want, "{name}: {}", c.key);
                assert_eq!(c.config.cc_client, want, "{name}: {}", c.key);
            }
        }
    }
}
