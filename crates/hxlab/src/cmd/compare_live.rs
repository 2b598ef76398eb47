//! `hxlab compare --page URL --live`: the site itself, not a recording. The site is probed
//! first (what it offers: HTTP/1.1 and HTTP/2 by ALPN, HTTP/3 by Alt-Svc and a QUIC
//! handshake), then the lab's `compare-page-live` experiment
//! ([`hxlab_lab::scenarios::live_page_experiment`]) loads it over each protocol it offers,
//! forced, behind the default networks. Beside that forced answer, when the site offers
//! HTTP/3 through Alt-Svc, each network gets `hxlab page --discovery alt-svc` (a first-time
//! and a returning visitor, nothing forced) and `--discovery udp-blocked` (the same behind a
//! link that drops UDP), whose figures are set against the forced cells of that network.

use super::run::{emit, execute, finish, render, CommonArgs};
use hxlab_contract::{Discovery, PageJob, PageReport};
use hxlab_core::page::{Outcome, PageRun, PageSummary};
use hxlab_core::Protocol;
use hxlab_lab::experiment::PageTrust;
use hxlab_load::probe::{probe, Found, Trust};
use hxlab_report::Report;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// How long each protocol's probe request may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `hxlab compare --page URL --live`.
pub fn run(url: &str, trust: PageTrust, mut common: CommonArgs) -> anyhow::Result<ExitCode> {
    if !url.starts_with("https://") {
        return Err(super::usage(format!(
            "--page {url} --live: give an https:// URL (a browser speaks HTTP/2 and HTTP/3 over TLS only)"
        )));
    }
    let overrides = common.overrides()?;
    let probe_trust = Trust {
        insecure: trust.insecure,
        cacert: None,
    };
    // Bad input is one line on stderr: the probe's progress is only shown to a person.
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("hxlab: probing {url} for h1, h2 and h3 ...");
    }
    let found =
        probe(url, &probe_trust, PROBE_TIMEOUT).map_err(|e| super::usage(format!("--page {e}")))?;
    let protocols = forced_protocols(&found);
    if protocols.is_empty() {
        // Nothing is created or recorded: one line says why (DNS, refused, TLS, timeout).
        anyhow::bail!(
            "{url} cannot be measured: {}; nothing recorded",
            why_unreachable(&found)
        );
    }
    let mut notes = found.notes();
    for n in &notes {
        emit!("{n}");
    }
    let h3_discoverable = found
        .offers
        .iter()
        .any(|o| o.proto == Protocol::H3 && o.base.is_ok())
        && found
            .alt_svc
            .as_deref()
            .and_then(hxlab_load::probe::alt_svc_h3_port)
            .is_some();
    if !protocols.contains(&Protocol::H3) && h3_discoverable {
        notes.push("h3 is offered on another port than the page's (Alt-Svc): forcing QUIC on the page's origin cannot reach it, so h3 is measured only as visitors discover it".into());
    }
    if protocols.contains(&Protocol::H3) && trust.insecure && trust.spki.is_empty() {
        notes.push("-k without --spki: Chromium's QUIC does not honour -k (--ignore-certificate-errors), so h3 loads of a site whose certificate it does not trust fail; name the key with --spki".into());
    }
    let mut exp = hxlab_lab::scenarios::live_page_experiment(url, &protocols)
        .build(&overrides)
        .map_err(|e| super::usage(e.to_string()))?;
    exp.page_trust = trust.clone();
    let root = common
        .out
        .clone()
        .unwrap_or_else(|| format!("hxlab-compare-page-live-{}", super::run::timestamp()).into());
    common.out = Some(root);
    let (summary, report, dir) = execute(&exp, &common, &notes)?;
    let lines = if h3_discoverable {
        visitors(url, &trust, &exp, &report, &dir)?
    } else {
        vec![format!(
            "first-time and returning visitors: {} advertises no HTTP/3 (no Alt-Svc h3), so a browser that forces nothing stays on {}: the forced figures are what every visitor gets",
            found.authority,
            protocols.last().map_or("h1", |p| p.name())
        )]
    };
    add_notes(&dir, &lines)?;
    let report = render(&dir)?;
    let code = finish(&summary, &report, &dir)?;
    emit!("beside the forced answer, the visitors (nothing forced: hxlab page --discovery; median LCP against the forced cells of the same network):");
    for l in &lines {
        emit!("  {l}");
    }
    Ok(code)
}

/// The protocols a browser can be made to use on the page's own origin, as offered: h1-tls
/// and h2 by ALPN, h3 when QUIC answers on the page's own port (forcing QUIC names the
/// page's host and port).
fn forced_protocols(found: &Found) -> Vec<Protocol> {
    let page_port = port_of(&format!("https://{}", found.authority));
    found
        .offers
        .iter()
        .filter(|o| matches!(o.proto, Protocol::H1Tls | Protocol::H2 | Protocol::H3))
        .filter(|o| match &o.base {
            Ok(base) => o.proto != Protocol::H3 || port_of(base) == page_port,
            Err(_) => false,
        })
        .map(|o| o.proto)
        .collect()
}

/// The port of `https://host[:port]` (443 when none is written).
fn port_of(base: &str) -> Option<u16> {
    let authority = base.strip_prefix("https://")?.split('/').next()?;
    let port = authority
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok());
    Some(port.unwrap_or(443))
}

/// Why no protocol answered, in one line: the first protocol's reason (the TCP and TLS
/// ones say what a browser would meet first).
fn why_unreachable(found: &Found) -> String {
    found
        .offers
        .iter()
        .find_map(|o| o.base.as_ref().err())
        .map(|e| e.replace('\n', " "))
        .unwrap_or_else(|| "no protocol answered".into())
}

/// The networks of the experiment's cells, in run order: (label, link).
fn networks(
    exp: &hxlab_lab::experiment::Experiment,
) -> Vec<(String, Option<hxlab_link::LinkConfig>)> {
    let mut out: Vec<(String, Option<hxlab_link::LinkConfig>)> = Vec::new();
    for cell in &exp.cells {
        let label = cell
            .factors
            .get("profile")
            .cloned()
            .unwrap_or_else(|| "none".into());
        if out.iter().any(|(l, _)| *l == label) {
            continue;
        }
        // Checked when the experiment was read.
        let link = cell.config.link_config().ok().flatten();
        out.push((label, link));
    }
    out
}

/// Per network: a first-time and a returning visitor with nothing forced, and the same
/// with UDP blocked, each `hxlab page --discovery` with the experiment's repetitions; their
/// reports are kept in `dir` (`visitors-N-alt-svc.json`, `visitors-N-udp-blocked.json`).
/// Returns the lines that set them beside the forced cells.
fn visitors(
    url: &str,
    trust: &PageTrust,
    exp: &hxlab_lab::experiment::Experiment,
    report: &Report,
    dir: &Path,
) -> anyhow::Result<Vec<String>> {
    let hxlab = super::run::hxlab_bin()?;
    let chromium =
        std::env::var_os("HXLAB_CHROMIUM").map_or_else(|| "chromium".into(), PathBuf::from);
    let mut lines = Vec::new();
    for (i, (label, link)) in networks(exp).into_iter().enumerate() {
        let forced = ForcedMedians::of(report, &label);
        let mut open_returning = None;
        for discovery in [Discovery::AltSvc, Discovery::UdpBlocked] {
            eprintln!(
                "hxlab: {label}: visitors with --discovery {} ({} run(s)) ...",
                discovery.name(),
                exp.repetitions
            );
            let job = PageJob {
                url: Some(url.to_string()),
                discovery,
                link: link.clone(),
                runs: exp.repetitions,
                insecure: trust.insecure,
                spki: trust.spki.clone(),
                chromium: chromium.clone(),
                timeout: exp.timeout,
                ..PageJob::default()
            };
            let json = dir.join(format!("visitors-{}-{}.json", i + 1, discovery.name()));
            let page = match hxlab_lab::runner::page_visits(&hxlab, &job, &json) {
                Ok(page) => page,
                Err(e) => {
                    lines.push(format!(
                        "{label}, --discovery {}: not measured ({e})",
                        discovery.name()
                    ));
                    continue;
                }
            };
            let first = Visits::first(&page);
            let back = Visits::returning(&page);
            match discovery {
                Discovery::UdpBlocked => lines.push(blocked_line(
                    &label,
                    &page,
                    &back,
                    open_returning.as_ref(),
                    &forced,
                )),
                _ => {
                    lines.push(first.line(&label, "first-time visitor", &forced));
                    lines.push(back.line(&label, "returning visitor", &forced));
                    open_returning = Some(back);
                }
            }
        }
    }
    Ok(lines)
}

/// The forced cells' median LCP of one network, ms, per protocol.
struct ForcedMedians(Vec<(Protocol, f64)>);

impl ForcedMedians {
    fn of(report: &Report, network: &str) -> ForcedMedians {
        let medians = report
            .cells
            .iter()
            .filter(|c| c.factors.get("profile").map(String::as_str) == Some(network))
            // With `--set discovery=...`, only the forced cells are the forced answer.
            .filter(|c| c.factors.get("discovery").is_none_or(|d| d == "forced"))
            .filter(|c| c.median.is_finite())
            .filter_map(|c| {
                let proto = Protocol::parse(c.factors.get("protocol")?)?;
                Some((proto, c.median * 1000.0))
            })
            .collect();
        ForcedMedians(medians)
    }

    /// `forced h2 800 ms: +12 ms, +1.5 %; forced h3 …` for a median `ms`.
    fn beside(&self, ms: f64) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .filter(|(p, _)| matches!(p, Protocol::H2 | Protocol::H3))
            .map(|(p, forced)| {
                format!(
                    "forced {} {forced:.0} ms: {}",
                    p.name(),
                    change(ms, *forced)
                )
            })
            .collect();
        parts.join("; ")
    }
}

/// `+12 ms, +1.5 %`: `ms` against `base`.
fn change(ms: f64, base: f64) -> String {
    format!("{:+.0} ms, {:+.1} %", ms - base, (ms / base - 1.0) * 100.0)
}

/// One kind of visit over a job's runs: its medians and what the browser used.
struct Visits {
    /// Median LCP and load event of the counted visits, ms.
    lcp_ms: Option<f64>,
    load_ms: Option<f64>,
    counted: usize,
    measured: usize,
    /// Visits whose document came over each version (h1, h2, h3), over the network.
    documents: [usize; 3],
    /// Visits whose document the cache answered.
    documents_cached: usize,
    /// Mean share of requests over each version.
    shares: [f64; 3],
}

impl Visits {
    fn first(page: &PageReport) -> Visits {
        let runs: Vec<&PageRun> = page
            .runs
            .iter()
            .filter_map(|r| match &r.outcome {
                Outcome::Measured(run) => Some(run.as_ref()),
                Outcome::Failed(_) => None,
            })
            .collect();
        Visits::of(Some(&page.summary), &runs)
    }

    fn returning(page: &PageReport) -> Visits {
        let runs: Vec<&PageRun> = page
            .runs
            .iter()
            .filter_map(|r| match &r.outcome {
                Outcome::Measured(run) => run.repeat_view.as_deref(),
                Outcome::Failed(_) => None,
            })
            .collect();
        Visits::of(page.repeat_view_summary.as_ref(), &runs)
    }

    fn of(summary: Option<&PageSummary>, runs: &[&PageRun]) -> Visits {
        let median = |key: &str| summary.and_then(|s| s.metrics.get(key)).map(|m| m.median);
        let mut documents = [0; 3];
        let mut documents_cached = 0;
        let mut shares = [0.0; 3];
        for r in runs {
            let s = &r.shares;
            if s.document_from_cache {
                documents_cached += 1;
            } else if let Some(i) = s.document.and_then(version_index) {
                documents[i] += 1;
            }
            for (sum, share) in shares.iter_mut().zip([s.h1, s.h2, s.h3]) {
                *sum += share / runs.len() as f64;
            }
        }
        Visits {
            lcp_ms: median("lcp_ms"),
            load_ms: median("load_ms"),
            counted: summary.map_or(0, |s| s.valid_runs),
            measured: runs.len(),
            documents,
            documents_cached,
            shares,
        }
    }

    /// `document over h2 in 2 of 2 visits; requests 100% h2`.
    fn used(&self) -> String {
        let mut docs: Vec<String> = ["h1", "h2", "h3"]
            .iter()
            .zip(self.documents)
            .filter(|(_, n)| *n > 0)
            .map(|(p, n)| format!("over {p} in {n}"))
            .collect();
        if self.documents_cached > 0 {
            docs.push(format!("from the cache in {}", self.documents_cached));
        }
        let shares: Vec<String> = ["h1", "h2", "h3"]
            .iter()
            .zip(self.shares)
            .filter(|(_, s)| *s > 0.0)
            .map(|(p, s)| format!("{:.0}% {p}", s * 100.0))
            .collect();
        format!(
            "document {} of {} visit(s); requests {}",
            if docs.is_empty() {
                "unknown".to_string()
            } else {
                docs.join(", ")
            },
            self.measured,
            if shares.is_empty() {
                "none over the network".to_string()
            } else {
                shares.join(", ")
            }
        )
    }

    /// One visitor's line: median LCP set against the forced cells, load, and what the
    /// browser used.
    fn line(&self, network: &str, who: &str, forced: &ForcedMedians) -> String {
        let figures = match (self.lcp_ms, self.load_ms) {
            (Some(lcp), load) => format!(
                "LCP {lcp:.0} ms ({}){}",
                forced.beside(lcp),
                load.map(|l| format!(", load {l:.0} ms"))
                    .unwrap_or_default()
            ),
            (None, Some(load)) => format!("no LCP, load {load:.0} ms"),
            (None, None) => "no visit counted".to_string(),
        };
        format!(
            "{network}, {who}: {figures}; {} of {} counted; {}",
            self.counted,
            self.measured,
            self.used()
        )
    }
}

/// The index of an HTTP version in [`Visits`]' arrays.
fn version_index(p: hxlab_core::Proto) -> Option<usize> {
    match p {
        hxlab_core::Proto::H1 => Some(0),
        hxlab_core::Proto::H2 => Some(1),
        hxlab_core::Proto::H3 => Some(2),
        _ => None,
    }
}

/// The line of `--discovery udp-blocked`: what the link dropped, and the returning
/// visitor's LCP against the same visitor with UDP open (the fallback's cost) and against
/// the forced cells.
fn blocked_line(
    network: &str,
    page: &PageReport,
    back: &Visits,
    open: Option<&Visits>,
    forced: &ForcedMedians,
) -> String {
    let dropped = page
        .link_stats
        .as_ref()
        .map_or(0, |s| s.down.dropped_udp + s.up.dropped_udp);
    let cost = match (back.lcp_ms, open.and_then(|o| o.lcp_ms)) {
        (Some(b), Some(o)) => format!(
            "returning visitor LCP {b:.0} ms, {} against {o:.0} ms with UDP open (the fallback's cost); {}",
            change(b, o),
            forced.beside(b)
        ),
        (Some(b), None) => format!("returning visitor LCP {b:.0} ms ({})", forced.beside(b)),
        _ => "no returning visit counted".to_string(),
    };
    format!(
        "{network}, UDP blocked: the link dropped {dropped} UDP packet(s); {cost}; {} of {} counted; {}",
        back.counted,
        back.measured,
        back.used()
    )
}

/// Appends `lines` to the results' notes (experiment.json), so the report carries them.
fn add_notes(dir: &Path, lines: &[String]) -> anyhow::Result<()> {
    use anyhow::Context;
    let path = dir.join(hxlab_report::META_FILE);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let mut meta: hxlab_report::ExperimentMeta =
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    meta.notes.extend(lines.iter().cloned());
    let body = serde_json::to_string_pretty(&meta).context("encoding the experiment's notes")?;
    hxlab_core::write_atomically(&path, body.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::port_of;

    #[test]
    fn reads_the_port_of_a_base() {
        assert_eq!(port_of("https://a.example"), Some(443));
        assert_eq!(port_of("https://a.example:8443"), Some(8443));
        assert_eq!(port_of("https://127.0.0.1:443"), Some(443));
        assert_eq!(port_of("http://a"), None);
    }
}
