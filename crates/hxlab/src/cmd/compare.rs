//! `hxlab compare`: the one-command default. No file and no setup: the built-in `compare`
//! matrix (h1, h1+TLS, h2, h3 × server delay × number of resources on loopback, plus one
//! emulated network when `hxlab link` works here), a table on the terminal, the report in a
//! directory it names, and the runner's overhead over the cells' own measured time.
//!
//! `hxlab compare --page URL` and `--har FILE` ask what the protocols buy a real page
//! (`compare_page`).
//!
//! `hxlab compare --url URL` asks the same of the user's own site: it probes which
//! protocols the URL's host offers, then runs a small `resources` and `throughput` matrix
//! against that URL (a url origin; the path is the user's resource) into two reports.

use super::run::emit;
use super::run::{execute, finish, CommonArgs};
use hxlab_core::Protocol;
use hxlab_lab::experiment::{Description, FactorValue, UrlOriginInput};
use hxlab_lab::scenarios;
use hxlab_load::probe::{probe, Found, Trust};
use hxlab_report::Workload;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `hxlab compare`.
#[derive(clap::Args, Debug)]
#[command(
    after_help = "Examples:\n  hxlab compare\n  hxlab compare --page https://www.example.com/ -k\n  hxlab compare --page https://www.example.com/ --live --set profile=none,\"Regular 4G\" -r 3\n  hxlab compare --har site.har --set profile=none,\"Regular 4G\" -r 3\n  hxlab compare --url https://staging.example.com/app.js -r 3\n  hxlab compare --url https://127.0.0.1:8443/ --cacert ca.pem\n  hxlab compare --url https://127.0.0.1:8443/bytes/3MB -k --priorities --small https://127.0.0.1:8443/bytes/20KB"
)]
pub struct Args {
    /// Measure this URL's host instead of hxlab's own origin: the protocols it offers, a
    /// small resources and throughput matrix (requests go to this URL).
    #[arg(long, value_name = "URL", conflicts_with_all = ["page", "har"])]
    pub url: Option<String>,
    /// Your page over h1, h2 and h3: record it once in Chromium, then replay it from hxlab's
    /// own server over each protocol behind a set of published networks (LCP and load time).
    #[arg(long, value_name = "URL", conflicts_with = "har")]
    pub page: Option<String>,
    /// With --page: measure the site itself (its own servers, caches and CDN), not a
    /// recording: probe what it offers, load it over each of h1, h2 and h3 it offers behind
    /// the default networks, and measure first-time and returning visitors beside that.
    #[arg(long, requires = "page")]
    pub live: bool,
    /// With --page --live: trust a server key by the base64 SHA-256 of its
    /// SubjectPublicKeyInfo (repeatable). Chromium's QUIC ignores -k, so a self-signed site
    /// needs this for h3.
    #[arg(long, value_name = "BASE64", requires = "live")]
    pub spki: Vec<String>,
    /// As --page, from a recording: a HAR exported from Chrome DevTools ("Save all as HAR
    /// with content") or written by `hxlab page --record`.
    #[arg(long, value_name = "FILE")]
    pub har: Option<PathBuf>,
    /// With --url or --page: accept any certificate.
    #[arg(long, short = 'k')]
    pub insecure: bool,
    /// With --url: trust this CA certificate (PEM).
    #[arg(
        long,
        value_name = "FILE",
        requires = "url",
        conflicts_with = "insecure"
    )]
    pub cacert: Option<PathBuf>,
    /// With --url: the server's scheduling scorecard first (`hxlab probe --priorities`, the
    /// same flags; docs/priorities-probe.md), in the report's notes.
    #[command(flatten)]
    pub priorities: super::probe_priorities::PriorityArgs,
    #[command(flatten)]
    pub common: CommonArgs,
}

/// Runs `hxlab compare`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
    if args.priorities.priorities && args.url.is_none() {
        return Err(super::usage(
            "--priorities goes with --url (the scorecard is of your server)",
        ));
    }
    if args.insecure && args.url.is_none() && args.page.is_none() {
        return Err(super::usage("-k/--insecure is for --url and --page"));
    }
    if let Some(url) = args.url.clone() {
        return run_url(&url, args);
    }
    if let (Some(page), true) = (&args.page, args.live) {
        let trust = hxlab_lab::experiment::PageTrust {
            insecure: args.insecure,
            spki: args.spki.clone(),
        };
        return super::compare_live::run(page, trust, args.common);
    }
    if args.page.is_some() || args.har.is_some() {
        return super::compare_page::run(
            args.page.as_deref(),
            args.har.as_deref(),
            args.insecure,
            args.common,
        );
    }
    let scenario = scenarios::find("compare")
        .ok_or_else(|| anyhow::anyhow!("the compare scenario is missing from this build"))?;
    let exp = scenarios::load(scenario, &args.common.overrides()?)
        .map_err(|e| super::usage(e.to_string()))?;
    if args.common.out.is_none() {
        args.common.out = Some(format!("hxlab-compare-{}", super::run::timestamp()).into());
    }
    let (summary, report, dir) = execute(&exp, &args.common, &[])?;
    let code = finish(&summary, &report, &dir)?;
    if summary.measured_s > 0.0 {
        emit!(
            "runner overhead: {:.1} % over the cells' own measured time ({:.2} s wall for {:.2} s measured){}; {:.2} s before the first cell (server start{})",
            summary.overhead() * 100.0,
            summary.wall_s,
            summary.measured_s,
            if summary.link_s > 0.0 {
                format!(
                    "; {:.1} % without the {:.2} s hxlab link spent tearing its links down",
                    summary.overhead_without_link() * 100.0,
                    summary.link_s
                )
            } else {
                String::new()
            },
            summary.setup_s,
            if summary.link_unavailable.is_some() { "" } else { ", link probe" }
        );
    }
    Ok(code)
}

/// The two experiments of `compare --url`: (name, description).
pub fn url_experiments(found: &Found, trust: &Trust) -> Vec<(&'static str, Description)> {
    let protocols: Vec<FactorValue> = found
        .offers
        .iter()
        .map(|o| FactorValue::Text(o.proto.name().into()))
        .collect();
    let urls: BTreeMap<Protocol, String> = found
        .offers
        .iter()
        .filter_map(|o| Some((o.proto, o.base.as_ref().ok()?.clone())))
        .collect();
    let baseline = [
        Protocol::H1Tls,
        Protocol::H1,
        Protocol::H2,
        Protocol::H2c,
        Protocol::H3,
    ]
    .into_iter()
    .find(|p| urls.contains_key(p))
    .unwrap_or(Protocol::H1Tls);
    let origin = UrlOriginInput {
        name: "site".into(),
        urls,
        path: found.path.clone(),
        insecure: trust.insecure,
        cacert: trust.cacert.clone(),
    };
    let host = &found.authority;
    let int = FactorValue::Int;
    let experiment = |name: &str, title: String, description: String, workload, extra| {
        let mut factors = vec![
            ("origin", vec![FactorValue::Text("site".into())]),
            ("protocol", protocols.clone()),
        ];
        factors.extend(extra);
        Description {
            name: name.into(),
            title,
            description,
            workload,
            repetitions: 5,
            timeout: Duration::from_secs(60),
            columns: (workload == Workload::Resources).then_some("resources"),
            baseline: Some(baseline),
            seed: None,
            page: None,
            metric: None,
            origins: vec![origin.clone()],
            factors,
        }
    };
    let resources = experiment(
        "compare-url-resources",
        format!("hxlab compare --url: {host}{} — N requests as a browser makes them", found.path),
        format!("The URL fetched N times as a browser would (HTTP/1.1 on at most 6 connections, HTTP/2 and HTTP/3 multiplexed on one), over the real network path to {host} (no emulation). The body is whatever the URL returns."),
        Workload::Resources,
        vec![("resources", vec![int(6), int(30)])],
    );
    let throughput = experiment(
        "compare-url-throughput",
        format!("hxlab compare --url: {host}{} — requests per second", found.path),
        format!("300 requests for the URL over 2 connections (10 streams each on HTTP/2 and HTTP/3), over the real network path to {host}."),
        Workload::Throughput,
        vec![
            ("requests", vec![int(300)]),
            ("clients", vec![int(2)]),
            ("streams", vec![int(10)]),
        ],
    );
    vec![("resources", resources), ("throughput", throughput)]
}

/// `hxlab compare --url URL`.
fn run_url(url: &str, args: Args) -> anyhow::Result<ExitCode> {
    let trust = Trust {
        insecure: args.insecure,
        cacert: args.cacert.clone(),
    };
    if let Some(c) = &trust.cacert {
        std::fs::metadata(c).map_err(|e| super::usage(format!("--cacert {}: {e}", c.display())))?;
    }
    hxlab_load::probe::split_url(url).map_err(|e| super::usage(format!("--url {e}")))?;
    let scorecard = if args.priorities.priorities {
        Some(super::probe_priorities::prepare(
            url,
            &args.priorities,
            trust.insecure,
            trust.cacert.clone(),
            Duration::from_secs(5),
        )?)
    } else {
        None
    };
    eprintln!("hxlab: probing {url} for h1, h2 and h3 ...");
    let found = probe(url, &trust, Duration::from_secs(5))
        .map_err(|e| super::usage(format!("--url {e}")))?;
    let mut notes = found.notes();
    if let Some(p) = scorecard {
        eprintln!(
            "hxlab: scoring how {url}'s server orders responses (behind an emulated link) ..."
        );
        notes.extend(super::probe_priorities::lines(
            &super::probe_priorities::run(p)?,
        ));
    }
    for n in &notes {
        emit!("{n}");
    }
    if found.offers.iter().all(|o| o.base.is_err()) {
        anyhow::bail!(
            "{} answered no protocol; nothing to compare",
            found.authority
        );
    }
    let overrides = args.common.overrides()?;
    let root = args
        .common
        .out
        .clone()
        .unwrap_or_else(|| format!("hxlab-compare-url-{}", super::run::timestamp()).into());
    let mut code = ExitCode::SUCCESS;
    for (name, description) in url_experiments(&found, &trust) {
        let exp = description
            .build(&overrides)
            .map_err(|e| super::usage(e.to_string()))?;
        let mut common = CommonArgs {
            out: Some(root.join(name)),
            resume: args.common.resume,
            repetitions: args.common.repetitions,
            set: args.common.set.clone(),
            warm_up: args.common.warm_up.clone(),
            timeout: args.common.timeout.clone(),
            strict: args.common.strict,
            no_progress: args.common.no_progress,
            pcap: args.common.pcap,
            qlog: args.common.qlog,
        };
        if common.resume && !root.join(name).join(hxlab_report::RESULTS_FILE).exists() {
            common.resume = false;
        }
        let (summary, report, dir) = execute(&exp, &common, &notes)?;
        if finish(&summary, &report, &dir)? != ExitCode::SUCCESS {
            code = ExitCode::from(1);
        }
    }
    Ok(code)
}
