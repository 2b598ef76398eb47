//! The page's session: the page (a URL, or an origin of our own serving a synthetic page
//! or a recording), the emulated link the browser sits behind, and the browser
//! configuration every run starts from.

use crate::options::PageOptions;
use crate::started::Mapping;
use hxlab_browser::{Connector, Engine, Launcher, PageConfig, Proto};
use hxlab_child::origin::{temp_dir, Origin};
use hxlab_link::Link;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The page, its origin (when started here) and the link, for as many runs as asked.
pub struct PageSession {
    /// The URL loaded (on the link's host address when behind a link).
    pub url: String,
    /// Server keys the browser trusts.
    pub spki: Vec<String>,
    /// The link the browser runs behind.
    pub link: Option<Arc<Link>>,
    /// With `--replay`: the replaying server's plain address, for `/replay-stats`.
    pub replay_stats: Option<std::net::SocketAddr>,
    /// The plain address of the origin started here (its `/stats`), if one was.
    pub origin_stats: Option<std::net::SocketAddr>,
    /// With `--replay`: every host the recording has a request to (the others are outside
    /// it).
    pub recorded_hosts: Vec<String>,
    template: PageConfig,
    _origin: Option<Origin>,
    origin_dir: Option<PathBuf>,
}

/// What Firefox takes from the [`Mapping`](crate::started::Mapping) Chromium's switches are
/// made of.
struct FirefoxMapping {
    /// Names are mapped to our side (Chromium: host-resolver rules).
    maps_names: bool,
    /// `host:port` origins QUIC is forced on.
    force_quic: Vec<String>,
}

/// The Firefox side of a run's configuration: the engine and binary, the origin's
/// certificate for the profile's NSS store, names resolved to `resolve_to` where Chromium maps
/// them (Firefox cannot map ports, so a name maps to an address only; the port is the
/// URL's), QUIC forced on the same origins, and the BiDi socket opened inside the link.
fn firefox_template(
    template: &mut PageConfig,
    opts: &PageOptions,
    mapping: &FirefoxMapping,
    cert: Option<PathBuf>,
    resolve_to: Option<std::net::IpAddr>,
    link: Option<&Arc<Link>>,
) {
    template.engine = Engine::Firefox;
    template.firefox = opts.firefox.clone();
    template.trust_certs = cert
        .into_iter()
        .chain(opts.trust_certs.iter().cloned())
        .collect();
    template.resolve_all_to = mapping.maps_names.then_some(resolve_to).flatten();
    template.quic_origins = mapping
        .force_quic
        .iter()
        .filter_map(|o| {
            let (h, p) = o.rsplit_once(':')?;
            Some((h.to_string(), p.parse().ok()?))
        })
        .collect();
    template.quic_cc = opts
        .server_cc
        .filter(|cc| *cc != hxlab_core::cc::CongestionControl::Bbr);
    template.extra_args.clear();
    template.host_resolver_rules = None;
    template.connector = link.map(|l| {
        let l = l.clone();
        Arc::new(move |addr: std::net::SocketAddr| {
            // The browser listens on the namespace's loopback: connect from a thread inside.
            let joined = l.spawn_inside(move || std::net::TcpStream::connect(addr))?;
            joined
                .join()
                .map_err(|_| std::io::Error::other("the connecting thread panicked"))??
        }) as Connector
    });
}

impl PageSession {
    /// Starts the link (if any) and the synthetic origin (if any). The error is one line.
    pub fn start(opts: &PageOptions) -> Result<PageSession, String> {
        // With a link, the browser runs in the link's namespace and reaches this side at the
        // link's host address; the synthetic origin listens there.
        let link = match &opts.link {
            Some(cfg) => {
                cfg.validate().map_err(|e| e.to_string())?;
                let l = Link::start(cfg.clone())
                    .map_err(|e| format!("starting the emulated link: {e}"))?;
                Some(Arc::new(l))
            }
            None => None,
        };
        let host = link
            .as_ref()
            .map(|l| l.host_addr().to_string())
            .unwrap_or_else(|| "127.0.0.1".to_string());
        let started = if opts.synthetic.is_some() || opts.replay.is_some() {
            let dir = temp_dir("hxlab-page-origin");
            let started = match (&opts.synthetic, &opts.replay) {
                (Some(s), _) => crate::synthetic::synthetic_origin(s, opts, &host, &dir),
                (None, Some(har)) => crate::replay::replay_origin(har, opts, &host, &dir),
                (None, None) => unreachable!("checked above"),
            };
            Some((
                started.inspect_err(|_| {
                    let _ = std::fs::remove_dir_all(&dir);
                })?,
                dir,
            ))
        } else {
            None
        };
        let cert = started.as_ref().map(|(s, _)| s.origin.cert.clone());
        // Where Firefox's names resolve: the origin started here (a Firefox replay server
        // has an address of its own), else the side the browser reaches.
        let resolve_to = started
            .as_ref()
            .map(|(s, _)| s.origin.ready.tls.ip())
            .or_else(|| host.parse().ok());
        let (url, spki, origin, origin_dir, mapping) = match started {
            Some((s, dir)) => (s.url, vec![s.spki], Some(s.origin), Some(dir), s.mapping),
            None => {
                let url = opts.url.clone().unwrap_or_default();
                let (url, rules) = match &link {
                    Some(l) => {
                        let r = crate::reach::reach(&url, l, opts.engine)?;
                        (r.url, r.rules)
                    }
                    None => (url, None),
                };
                let mapping = Mapping {
                    rules,
                    ..Mapping::default()
                };
                (url, opts.spki.clone(), None, None, mapping)
            }
        };
        let origin_stats = origin.as_ref().map(|o| o.ready.plain);
        let replay_stats = match (&opts.replay, &origin) {
            (Some(_), Some(o)) => Some(o.ready.plain),
            _ => None,
        };
        let mut template = PageConfig::new(url.clone(), opts.proto);
        template.chromium = opts.chromium.clone();
        template.spki_sha256 = spki.clone();
        template.insecure = opts.insecure;
        template.timeout = opts.timeout;
        template.collect_har = opts.collect_har || opts.collect_bodies;
        template.collect_bodies = opts.collect_bodies;
        template.cpu_slowdown = opts.cpu_slowdown;
        template.repeat_view = opts.repeat_view;
        template.returning_visit = opts.returning_visit();
        template.strict = opts.strict;
        template.hosts_under_test = mapping.hosts;
        let recorded_hosts = mapping.recorded_hosts;
        let mapping_firefox = FirefoxMapping {
            maps_names: mapping.rules.is_some(),
            force_quic: mapping.force_quic.clone(),
        };
        template.host_resolver_rules = mapping.rules;
        if opts.proto == Proto::H3 && !mapping.force_quic.is_empty() {
            // The last --origin-to-force-quic-on wins: this one names every origin.
            template.extra_args.push(format!(
                "--origin-to-force-quic-on={}",
                mapping.force_quic.join(",")
            ));
        }
        template.launcher = link.as_ref().map(|l| {
            let l = l.clone();
            Arc::new(move |program: &Path| l.command(program)) as Launcher
        });
        if opts.engine == Engine::Firefox {
            firefox_template(
                &mut template,
                opts,
                &mapping_firefox,
                cert,
                resolve_to,
                link.as_ref(),
            );
        }
        Ok(PageSession {
            url,
            spki,
            link,
            replay_stats,
            origin_stats,
            recorded_hosts,
            template,
            _origin: origin,
            origin_dir,
        })
    }

    /// The browser's TCP controller: the default of the namespace it runs in (the link's,
    /// or this one's), read back there.
    pub fn client_tcp_cc(&self) -> Option<String> {
        let read = || {
            std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control")
                .map(|s| s.trim().to_string())
        };
        match &self.link {
            // A thread inside the namespace opens its sysctl, which is the namespace's own.
            Some(l) => l.spawn_inside(read).ok()?.join().ok()?.ok()?.ok(),
            None => read().ok(),
        }
    }

    /// The origin's connections per congestion controller so far, over every protocol, as
    /// the server read them back from each socket or QUIC connection (its `/stats`); None
    /// without an origin of ours or when `/stats` cannot be read.
    pub fn server_cc(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        let stats = hxlab_child::get_stats(self.origin_stats?)?;
        let mut out = std::collections::BTreeMap::new();
        for proto in stats.by_protocol.values() {
            hxlab_core::cc::add_counts(&mut out, &proto.cc);
        }
        Some(out)
    }

    /// What the origin started here ran so far, over every protocol, as it read it back (its
    /// `/stats`); `applies` says whether the page's protocol has responses to schedule. None
    /// without an origin of ours or when `/stats` cannot be read.
    pub fn scheduling(&self, applies: bool) -> Option<hxlab_core::sched::Scheduling> {
        let stats = hxlab_child::get_stats(self.origin_stats?)?;
        Some(hxlab_core::sched::Scheduling {
            scheduler_applies: applies,
            ..stats.scheduling(None, None)
        })
    }

    /// The configuration of one run (each run gets a fresh browser and profile).
    pub fn run_config(&self) -> PageConfig {
        self.template.clone()
    }

    /// Stops the link after the runs and returns its counters (None without a link). The
    /// session cannot start another browser behind it afterwards.
    pub fn stop_link(&mut self) -> Option<hxlab_link::LinkStats> {
        // The launcher holds the other reference to the link.
        self.template.launcher = None;
        let link = self.link.take()?;
        Arc::try_unwrap(link).ok().map(Link::stop)
    }
}

impl Drop for PageSession {
    fn drop(&mut self) {
        self._origin = None;
        if let Some(dir) = &self.origin_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}
