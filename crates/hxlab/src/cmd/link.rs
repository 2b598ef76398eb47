//! `hxlab link`: runs COMMAND in a new network namespace behind an emulated link (a thin
//! wrapper over `hxlab_link::Link`).

use super::usage;
use anyhow::Context;
use hxlab_link::{config, Bottleneck, Delay, Link, LinkConfig, LinkSettings, Loss, Server};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `hxlab link` (boxed, so the CLI's subcommand enum stays small).
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    opts: Box<LinkArgs>,
}

/// The flags of `hxlab link`.
#[derive(clap::Args, Debug, Default)]
#[command(
    after_help = "\"down\" is outside → inside (server → client), \"up\" inside → outside. COMMAND gets HXLAB_LINK_HOST (the outside address; a server bound there or on 0.0.0.0 is reachable, one bound to 127.0.0.1 with --expose) and HXLAB_LINK_CLIENT. Every other address this machine reaches is reached through the link, translated. See docs/link.md."
)]
pub struct LinkArgs {
    /// A published profile (see --list-profiles): RTT split half each way, down/up rates.
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// One-way delay added in each direction, e.g. 20ms.
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub delay: Option<String>,
    /// Jitter: each packet's delay varies uniformly within ±this (no reordering).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub jitter: Option<String>,
    /// Loss per direction: `1%` random, or `ge:P,R,1-H,1-K` Gilbert-Elliott (netem's gemodel).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub loss: Option<String>,
    /// Downlink rate (outside → inside), e.g. 10mbit.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub down: Option<String>,
    /// Uplink rate (inside → outside), e.g. 2mbit.
    #[arg(long, value_name = "RATE", allow_hyphen_values = true)]
    pub up: Option<String>,
    /// mahimahi-format downlink trace (one ms timestamp per line = one 1500-byte opportunity).
    #[arg(long, value_name = "FILE")]
    pub down_trace: Option<PathBuf>,
    /// mahimahi-format uplink trace.
    #[arg(long, value_name = "FILE")]
    pub up_trace: Option<PathBuf>,
    /// Queue in front of each bottleneck: packets (`100p`) or bytes (`64KiB`); default 1000p.
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true)]
    pub queue: Option<String>,
    /// Queue management: droptail (default) or codel.
    #[arg(long, value_name = "AQM")]
    pub aqm: Option<String>,
    /// Drop every UDP packet in both directions (QUIC cannot pass; TCP can), counted as
    /// `dropped_udp` in --stats.
    #[arg(long)]
    pub block_udp: bool,
    /// Take the whole link from FILE, a LinkConfig in JSON (see docs/link.md), instead of the
    /// flags that describe it; --seed may still replace its seed.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = [
            "profile", "delay", "jitter", "loss", "down", "up", "down_trace", "up_trace",
            "queue", "aqm",
        ]
    )]
    pub config: Option<PathBuf>,
    /// Seed for loss and jitter draws (default: random, written to --stats).
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub seed: Option<String>,
    /// Write per-direction packet, byte, drop and queue-delay counters (JSON) at the end.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Make servers on this side bound to 127.0.0.1 reachable from inside at
    /// $HXLAB_LINK_HOST on these ports (TCP and UDP), e.g. `--expose 8443,8080`.
    #[arg(long, value_name = "PORT[,PORT]", value_delimiter = ',')]
    pub expose: Vec<u16>,
    /// Resolvers the command uses (its /etc/resolv.conf), e.g. `--dns 10.250.0.2`; default:
    /// this side's, a loopback resolver reached through $HXLAB_LINK_HOST.
    #[arg(long, value_name = "ADDR[,ADDR]", value_delimiter = ',')]
    pub dns: Vec<std::net::Ipv4Addr>,
    /// Write every packet that crosses the link (as it leaves it) and every packet it drops
    /// to FILE as pcapng, for Wireshark; with SSLKEYLOGFILE set its secrets go in too.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// List the profiles with their sources and exit.
    #[arg(long)]
    pub list_profiles: bool,
    /// The command to run inside, after `--`.
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

fn duration(flag: &str, v: &str) -> anyhow::Result<Duration> {
    config::parse_delay(&format!("--{flag}"), v).map_err(|e| usage(e.to_string()))
}

/// The flags that describe a link (a profile, then overrides), as the link's one builder
/// takes them.
fn settings(a: &LinkArgs) -> anyhow::Result<LinkSettings> {
    let delay = a
        .delay
        .as_deref()
        .map(|v| duration("delay", v))
        .transpose()?;
    let jitter = a
        .jitter
        .as_deref()
        .map(|v| duration("jitter", v))
        .transpose()?;
    if a.down.is_some() && a.down_trace.is_some() {
        return Err(usage(
            "--down and --down-trace both set the downlink; give one",
        ));
    }
    if a.up.is_some() && a.up_trace.is_some() {
        return Err(usage("--up and --up-trace both set the uplink; give one"));
    }
    let bottleneck = |rate: &Option<String>, trace: &Option<PathBuf>| {
        let trace = trace.clone().map(Bottleneck::Trace);
        rate.clone().map(Bottleneck::Rate).or(trace)
    };
    Ok(LinkSettings {
        profile: a.profile.clone(),
        delay: delay.map(Delay::OneWay),
        jitter,
        loss: a.loss.clone(),
        down: bottleneck(&a.down, &a.down_trace),
        up: bottleneck(&a.up, &a.up_trace),
        queue: a.queue.clone(),
        aqm: a.aqm.clone(),
    })
}

/// Builds the link configuration from the flags (profile first, then explicit overrides,
/// by [`LinkSettings::build`]), or reads it from `--config`, checked by
/// [`LinkConfig::validate`] as every entry point checks it.
pub fn link_config(a: &LinkArgs) -> anyhow::Result<LinkConfig> {
    if let Some(path) = &a.config {
        let text = hxlab_core::read_capped_string(path, hxlab_core::files::cap::SMALL)
            .map_err(|e| usage(format!("--config {}: {e}", path.display())))?;
        let mut cfg = LinkConfig::from_json(&text)
            .map_err(|e| usage(format!("--config {}: {e}", path.display())))?;
        if let Some(v) = &a.seed {
            cfg.seed = seed(v)?;
        }
        if a.block_udp {
            cfg.block_udp();
        }
        return Ok(cfg);
    }
    let mut cfg = settings(a)?.build().map_err(|e| usage(e.flag_message()))?;
    if a.block_udp {
        cfg.block_udp();
    }
    cfg.seed = match &a.seed {
        Some(v) => seed(v)?,
        None => hxlab_link::config::random_seed(),
    };
    Ok(cfg)
}

fn seed(v: &str) -> anyhow::Result<u64> {
    v.trim().parse::<u64>().map_err(|_| {
        usage(format!(
            "--seed {v:?}: expected a whole number from 0 to 2^64-1"
        ))
    })
}

fn describe(cfg: &LinkConfig) -> String {
    let dir = |d: &hxlab_link::DirectionConfig| {
        let server = match &d.server {
            Server::Unlimited => "unlimited".to_string(),
            Server::Rate(r) => format!("{:.3} Mbit/s", *r as f64 / 1e6),
            Server::Trace(t) => format!(
                "trace ({:.3} Mbit/s average)",
                t.average_bits_per_sec() / 1e6
            ),
        };
        let loss = match d.loss {
            Loss::None => "no loss".to_string(),
            Loss::Random(p) => format!("{}% loss", p * 100.0),
            Loss::GilbertElliott { .. } => "Gilbert-Elliott loss".to_string(),
        };
        format!("{server}, delay {:?} ±{:?}, {loss}", d.delay, d.jitter)
    };
    let udp = if cfg.blocks_udp() {
        "; UDP blocked"
    } else {
        ""
    };
    format!("down: {}; up: {}{udp}", dir(&cfg.down), dir(&cfg.up))
}

/// Runs `hxlab link`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let args = *args.opts;
    if args.list_profiles {
        print!("{}", hxlab_link::profiles::listing());
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = link_config(&args)?;
    let Some((program, rest)) = args.command.split_first() else {
        return Err(usage(
            "missing COMMAND: hxlab link [OPTIONS] -- COMMAND [ARGS...]",
        ));
    };
    // Without root, both ends go into namespaces of our own (see docs/link.md, "Rootless").
    let rootless =
        !hxlab_link::shell::is_root() || std::env::var_os("HXLAB_LINK_ROOTLESS").is_some();
    if rootless {
        hxlab_link::shell::enter_user_namespace().context("rootless mode")?;
    }
    let seed = cfg.seed;
    let profile = cfg.profile.clone();
    let summary = describe(&cfg);
    let mut link = Link::start_capturing(cfg, args.pcap.as_deref()).context("starting the link")?;
    for &port in &args.expose {
        if port == 0 {
            return Err(usage("--expose: port 0 is not a port"));
        }
        link.expose(port, std::net::Ipv4Addr::LOCALHOST)
            .context("--expose")?;
    }
    if !args.dns.is_empty() {
        link.use_dns(&args.dns).context("--dns")?;
    }
    if let Some(e) = link.reach_error() {
        eprintln!("hxlab link: the command reaches only this machine, not hosts beyond it: {e}");
    }
    if std::env::var_os("HXLAB_LINK_QUIET").is_none() {
        eprintln!(
            "hxlab link: HOST {} ⇄ CLIENT {} ({summary}; seed {seed}){}",
            link.host_addr(),
            link.client_addr(),
            if rootless {
                "; rootless: HOST is in hxlab's own network namespace, not the one it started in"
            } else {
                ""
            }
        );
    }
    let mut cmd = link.command(program);
    cmd.args(rest);
    let status = link.run(&mut cmd);
    let (host, client) = (link.host_addr(), link.client_addr());
    let stats = link.stop();
    let status = status.with_context(|| format!("running {}", program.to_string_lossy()))?;
    if let Some(path) = &args.stats {
        let doc = hxlab_contract::LinkStatsFile {
            profile,
            seed,
            host: host.to_string(),
            client: client.to_string(),
            down: stats.down,
            up: stats.up,
        };
        let text = doc.to_json().context("encoding stats")?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    use std::os::unix::process::ExitStatusExt;
    let code = match (status.code(), status.signal()) {
        (Some(c), _) => c,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    };
    Ok(ExitCode::from(code.clamp(0, 255) as u8))
}
