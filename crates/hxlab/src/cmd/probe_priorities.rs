//! `hxlab probe URL --priorities`: the flags turned into a probe target, a plan and a link;
//! the link started; hxlab-load's priority probe run on a thread inside its namespace; the
//! scorecards as lines. A server on this machine's loopback is reached at the link's outside
//! address (its port exposed there), any other through the link as it is; the URL's name is
//! kept for SNI and `:authority`.

use super::usage;
use anyhow::Context;
use hxlab_contract::{PrioritiesReport, PriorityScorecard, ProbeLink, UrgentFigures};
use hxlab_link::{Link, LinkConfig, QueueLimit, Server};
use hxlab_load::priority_probe::{self, ProbePlan, ProbeTarget, Tests};
use hxlab_load::probe::split_url;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// The flags of `hxlab probe` that belong to `--priorities`.
#[derive(clap::Args, Debug, Default)]
pub struct PriorityArgs {
    /// Add a scorecard per protocol (h2, h3) of how the server orders responses on one
    /// connection: urgency, incremental, PRIORITY_UPDATE and (h2) RFC 7540 signals, judged
    /// from the wire behind an emulated link. Needs --small; needs root (the link).
    #[arg(long)]
    pub priorities: bool,
    /// The large resource (a few MB; default: the URL probed).
    #[arg(long, value_name = "URL", requires = "priorities")]
    pub bulk: Option<String>,
    /// The small resource (about 20 KB).
    #[arg(long, value_name = "URL", requires = "priorities")]
    pub small: Option<String>,
    /// Bottleneck rate of the emulated link, each way.
    #[arg(long, value_name = "RATE", requires = "priorities")]
    pub rate: Option<String>,
    /// Round-trip time of the emulated link (half each way).
    #[arg(long, value_name = "DUR", requires = "priorities")]
    pub rtt: Option<String>,
    /// The queue in front of each bottleneck (`64KiB`, `40p`; default: the bandwidth-delay
    /// product).
    #[arg(long, value_name = "SIZE", requires = "priorities")]
    pub queue: Option<String>,
    /// Connect to HOST:PORT instead of the URL's host and port, keeping the URL's name for
    /// SNI and :authority (as curl's --connect-to).
    #[arg(long, value_name = "HOST:PORT", requires = "priorities")]
    pub connect_to: Option<String>,
    /// Which tests run besides the urgency test (which always runs: its class is the
    /// verdict): any of incremental, priority-update, rfc7540, or none (default: all).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        requires = "priorities"
    )]
    pub tests: Option<Vec<TestName>>,
}

/// A test of `--tests`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestName {
    /// Two pairs of equal-urgency bulks, without and with `i`.
    Incremental,
    /// Two bulks at u=3, then a PRIORITY_UPDATE raising the second.
    PriorityUpdate,
    /// HTTP/2: the urgency test with RFC 7540 signals.
    Rfc7540,
    /// Only the urgency test.
    None,
}

/// Everything `--priorities` needs, checked.
pub struct Prepared {
    target: ProbeTarget,
    plan: ProbePlan,
    link: ProbeLink,
    link_config: LinkConfig,
    bulk_url: String,
    small_url: String,
    connect_to: Option<String>,
}

impl Prepared {
    /// Whether the URL's own host is probed for protocols too (not with --connect-to: the
    /// name may not resolve here).
    pub fn probes_url_host(&self) -> bool {
        self.connect_to.is_none()
    }
}

/// The defaults: 10 Mbit/s each way, 50 ms RTT.
const RATE: &str = "10mbit";
const RTT: &str = "50ms";
/// The wire size of a full packet, for queues given in packets.
const PACKET: u64 = 1500;

/// Checks the flags (usage errors, exit 2) and resolves where the probe connects.
pub fn prepare(
    url: &str,
    a: &PriorityArgs,
    insecure: bool,
    cacert: Option<PathBuf>,
    timeout: Duration,
) -> anyhow::Result<Prepared> {
    let (https, authority, _) = split_url(url).map_err(|e| usage(format!("URL {e}")))?;
    let Some(small_url) = a.small.clone() else {
        return Err(usage(
            "--priorities needs --small URL: a small resource (about 20 KB) on the same host",
        ));
    };
    let bulk_url = a.bulk.clone().unwrap_or_else(|| url.to_string());
    let mut paths = Vec::new();
    for (flag, u) in [("--bulk", &bulk_url), ("--small", &small_url)] {
        let (s, auth, path) = split_url(u).map_err(|e| usage(format!("{flag} {e}")))?;
        if s != https || auth != authority {
            return Err(usage(format!(
                "{flag} {u}: must be on the URL's scheme and host ({authority}): the tests share one connection"
            )));
        }
        paths.push(path);
    }
    let link = probe_link(a)?;
    let addr = connect_addr(&authority, https, a.connect_to.as_deref())?;
    let host = authority
        .rsplit_once(':')
        .filter(|(_, p)| p.parse::<u16>().is_ok())
        .map_or(authority.as_str(), |(h, _)| h);
    let tests = a.tests.as_deref().unwrap_or(&[
        TestName::Incremental,
        TestName::PriorityUpdate,
        TestName::Rfc7540,
    ]);
    let plan = ProbePlan {
        tests: Tests {
            incremental: tests.contains(&TestName::Incremental),
            priority_update: tests.contains(&TestName::PriorityUpdate),
            rfc7540: tests.contains(&TestName::Rfc7540),
        },
        ..ProbePlan::default()
    };
    let mut link_config =
        LinkConfig::default().with_delay(Duration::from_secs_f64(link.rtt_ms / 2000.0));
    for d in [&mut link_config.down, &mut link_config.up] {
        d.server = Server::Rate(link.rate_bits_per_sec);
        d.queue = QueueLimit::Bytes(link.queue_bytes as usize);
    }
    link_config
        .validate()
        .map_err(|e| usage(format!("the link: {e}")))?;
    Ok(Prepared {
        target: ProbeTarget {
            addr,
            https,
            authority: authority.clone(),
            server_name: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            bulk_path: paths[0].clone(),
            small_path: paths[1].clone(),
            insecure,
            cacert,
            connect_timeout: timeout,
        },
        plan,
        link,
        link_config,
        bulk_url,
        small_url,
        connect_to: a.connect_to.clone(),
    })
}

/// `--rate`, `--rtt` and `--queue` as the link they describe.
fn probe_link(a: &PriorityArgs) -> anyhow::Result<ProbeLink> {
    let rate = hxlab_link::config::parse_link_rate("--rate", a.rate.as_deref().unwrap_or(RATE))
        .map_err(|e| usage(e.to_string()))?;
    let rtt = hxlab_core::parse_duration(a.rtt.as_deref().unwrap_or(RTT))
        .map_err(|e| usage(format!("--rtt: {e}")))?;
    let mut link = ProbeLink {
        rate_bits_per_sec: rate,
        rtt_ms: rtt.as_secs_f64() * 1000.0,
        queue_bytes: 0,
    };
    link.queue_bytes = match a.queue.as_deref() {
        None => link.bdp_bytes().max(PACKET),
        Some(q) => match hxlab_link::config::parse_queue(q).map_err(|e| usage(e.to_string()))? {
            QueueLimit::Bytes(b) => b as u64,
            QueueLimit::Packets(n) => n as u64 * PACKET,
            QueueLimit::Unlimited => {
                return Err(usage(
                    "--queue: give a size (the wait's floor counts a full queue)",
                ))
            }
        },
    };
    Ok(link)
}

/// Where the probe connects: `--connect-to` or the URL's host (an IPv4 address: the link
/// carries IPv4). A loopback address is replaced by the link's outside address when the
/// link starts.
fn connect_addr(
    authority: &str,
    https: bool,
    connect_to: Option<&str>,
) -> anyhow::Result<SocketAddr> {
    let (flag, hostport) = match connect_to {
        Some(c) => ("--connect-to", c.to_string()),
        None if authority.rsplit_once(':').is_some_and(|(h, p)| {
            p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']'))
        }) =>
        {
            ("URL", authority.to_string())
        }
        None => (
            "URL",
            format!("{authority}:{}", if https { 443 } else { 80 }),
        ),
    };
    let addrs: Vec<SocketAddr> = hostport
        .to_socket_addrs()
        .map_err(|e| usage(format!("{flag} {hostport}: {e}")))?
        .collect();
    // The link carries IPv4 only (docs/link.md).
    let Some(addr) = addrs.iter().find(|a| a.is_ipv4() || a.ip().is_loopback()) else {
        return Err(usage(format!(
            "{flag} {hostport}: resolves to no IPv4 address ({}), and the emulated link carries IPv4 only",
            addrs.first().map_or("nothing".into(), |a| a.ip().to_string())
        )));
    };
    Ok(*addr)
}

/// Starts the link, runs the probe inside it and stops the link.
pub fn run(p: Prepared) -> anyhow::Result<PrioritiesReport> {
    if !hxlab_link::shell::is_root() {
        anyhow::bail!("--priorities runs behind an emulated link, which needs root (network namespaces and TUN devices): run it as root");
    }
    let link = Link::start(p.link_config.clone()).context("starting the link for --priorities")?;
    let mut target = p.target.clone();
    // Inside, loopback is the namespace's own: a server on this machine's loopback is
    // reached at the link's host address, its port exposed there; any other address (this
    // machine's own, or a host beyond it) through the link as it is.
    if target.addr.ip().is_loopback() || target.addr.ip().is_unspecified() {
        let to = match target.addr.ip() {
            IpAddr::V4(v4) if v4.is_loopback() => v4,
            _ => std::net::Ipv4Addr::LOCALHOST,
        };
        link.expose(target.addr.port(), to)
            .context("exposing the server's port to the link")?;
        target.addr = SocketAddr::new(IpAddr::V4(link.host_addr()), target.addr.port());
    }
    let (plan, probe_link) = (p.plan.clone(), p.link.clone());
    let inside = link
        .spawn_inside(move || priority_probe::run(&target, &plan, &probe_link))
        .context("starting the probe inside the link")?;
    let scorecards = inside
        .join()
        .map_err(|_| anyhow::anyhow!("the probe thread panicked"))?
        .context("entering the link's namespace")?;
    link.stop();
    Ok(PrioritiesReport {
        link: p.link,
        bulk_url: p.bulk_url,
        small_url: p.small_url,
        connect_to: p.connect_to,
        scorecards,
    })
}

fn mbit(link: &ProbeLink) -> String {
    format!("{} Mbit/s", link.rate_bits_per_sec as f64 / 1e6)
}

fn opt_ms(v: Option<f64>) -> String {
    v.map_or("never".into(), |v| format!("{v:.0} ms"))
}

fn urgent_line(what: &str, f: &UrgentFigures, link: &ProbeLink) -> String {
    format!(
        "{what}: {} — the small ({} B) took {} (first byte {}, floor {:.0} ms); {} B of bulk committed ahead of it ({:.0} ms at {}); {} B of bulk arrived during it{}",
        f.class.name(),
        f.small_bytes,
        opt_ms(f.wait_ms),
        opt_ms(f.small_first_byte_ms),
        f.floor_ms,
        f.committed_bytes,
        f.committed_ms,
        mbit(link),
        f.bulk_bytes_during_small,
        if f.small_after_bulk { "; it came after the bulk" } else { "" }
    )
}

fn card_lines(c: &PriorityScorecard, link: &ProbeLink) -> Vec<String> {
    let mut lines = vec![format!(
        "{} ({}): {}",
        c.protocol,
        c.address,
        c.verdict.map_or("no verdict", |v| v.name())
    )];
    if let Some(f) = &c.urgency {
        lines.push(format!(
            "  {}",
            urgent_line("urgency (u=5 bulk, then u=0 small)", f, link)
        ));
    }
    if let Some(f) = &c.incremental {
        lines.push(format!(
            "  incremental honoured: {} (lesser share of a pair: {:.2} at u=3, {:.2} at u=3, i)",
            f.honoured.name(),
            f.non_incremental_share,
            f.incremental_share
        ));
    }
    if let Some(f) = &c.priority_update {
        lines.push(format!(
            "  PRIORITY_UPDATE honoured: {} (raised response's share {:.2} before, {:.2} after, over {} B)",
            f.honoured.name(),
            f.share_before,
            f.share_after,
            f.bytes_after
        ));
    }
    if let Some(f) = &c.rfc7540 {
        lines.push(format!(
            "  {}",
            urgent_line(
                "RFC 7540 (weight 1 bulk, exclusive weight 256 small)",
                f,
                link
            )
        ));
    }
    if let Some(e) = &c.error {
        lines.push(format!("  error: {e}"));
    }
    lines
}

/// The report as lines: the link first (the figures hold only behind it), then each
/// protocol's verdict and figures.
pub fn lines(r: &PrioritiesReport) -> Vec<String> {
    let l = &r.link;
    let mut lines = vec![format!(
        "priorities: measured behind an emulated link of {} each way, {:.0} ms RTT, a {} B queue (BDP {} B); bulk {}, small {}",
        mbit(l),
        l.rtt_ms,
        l.queue_bytes,
        l.bdp_bytes(),
        r.bulk_url,
        r.small_url
    )];
    for c in &r.scorecards {
        lines.extend(card_lines(c, l));
    }
    lines
}
