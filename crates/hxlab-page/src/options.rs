//! [`PageOptions`]: what to load and how, as the page's session, its origin and its runs
//! read it (from a checked [`hxlab_contract::PageJob`]).

use hxlab_browser::Proto;
use hxlab_link::LinkConfig;
use std::path::PathBuf;
use std::time::Duration;

/// The synthetic page (the contract type `hxlab page --config` carries).
pub use hxlab_contract::Synthetic;

/// What to load and how.
#[derive(Clone, Debug)]
pub struct PageOptions {
    /// The page's URL (None with `synthetic`).
    pub url: Option<String>,
    /// A synthetic page served by an origin started here.
    pub synthetic: Option<Synthetic>,
    /// The protocol to force.
    pub proto: Proto,
    /// How the browser reaches HTTP/3 (forced, or discovered: a first and a returning visit).
    pub discovery: hxlab_contract::Discovery,
    /// The link to run the browser behind (checked with [`LinkConfig::validate`]).
    pub link: Option<LinkConfig>,
    /// Ask the synthetic origin to push the sub-resources.
    pub push: bool,
    /// Ask the synthetic origin for 103 Early Hints.
    pub early_hints: bool,
    /// Server keys to trust (URL mode).
    pub spki: Vec<String>,
    /// Accept any certificate (URL mode, `-k`).
    pub insecure: bool,
    /// The browser engine.
    pub engine: hxlab_browser::Engine,
    /// Chromium binary.
    pub chromium: PathBuf,
    /// Firefox binary.
    pub firefox: PathBuf,
    /// Certificates Firefox trusts (URL mode).
    pub trust_certs: Vec<PathBuf>,
    /// Limit per run.
    pub timeout: Duration,
    /// Keep each run's HAR.
    pub collect_har: bool,
    /// Put the response bodies into the HAR (`--record`).
    pub collect_bodies: bool,
    /// Serve the page from this HAR archive (`--replay`), every recorded host mapped to it.
    pub replay: Option<PathBuf>,
    /// The `hxlab` binary that serves the synthetic page.
    pub hxlab_bin: PathBuf,
    /// CPU slowdown factor for the page (1: none).
    pub cpu_slowdown: f64,
    /// Load the page a second time in the same browser after each first view.
    pub repeat_view: bool,
    /// Leave out every run in which a resource failed, answered 4xx/5xx or did not finish.
    pub strict: bool,
    /// Congestion controller of the origin hxlab starts (synthetic page or replay), on TCP
    /// and QUIC alike (`hxlab serve --cc`); None: each stack's own default (the kernel's on
    /// TCP, Cubic on QUIC), which compares different controllers across protocols.
    pub server_cc: Option<hxlab_core::cc::CongestionControl>,
    /// That origin's scheduler (`hxlab serve --scheduler`; None: its default).
    pub scheduler: Option<hxlab_core::sched::Scheduler>,
    /// That origin's TCP send low-water mark (`hxlab serve --notsent-lowat`; None: its
    /// default).
    pub notsent_lowat: Option<hxlab_core::sched::Lowat>,
}

impl PageOptions {
    /// The options of one checked [`hxlab_contract::PageJob`], the page served by
    /// `hxlab_bin`'s `serve` when it is synthetic or replayed.
    pub fn from_job(job: &hxlab_contract::PageJob, hxlab_bin: PathBuf) -> PageOptions {
        PageOptions {
            url: job.url.clone(),
            synthetic: job.synthetic.clone(),
            proto: job.proto,
            discovery: job.discovery,
            link: link_of(job),
            push: job.push,
            early_hints: job.early_hints,
            spki: job.spki.clone(),
            insecure: job.insecure,
            engine: job.browser,
            chromium: job.chromium.clone(),
            firefox: job.firefox.clone(),
            trust_certs: job.trust_certs.clone(),
            timeout: job.timeout,
            collect_har: job.har_dir.is_some(),
            collect_bodies: job.record.is_some(),
            replay: job.replay.clone(),
            hxlab_bin,
            cpu_slowdown: job.cpu_slowdown,
            repeat_view: job.repeat_view,
            strict: job.strict,
            server_cc: job.server_cc,
            scheduler: job.scheduler,
            notsent_lowat: job.notsent_lowat,
        }
    }

    /// True when each run is a first visit followed by a returning visitor's (a new browser
    /// on the profile the first left); with `repeat_view` the second view is the same
    /// browser's instead.
    pub fn returning_visit(&self) -> bool {
        self.discovery.discovers() && !self.repeat_view
    }

    /// What the origin started here (synthetic page or replay) is set to.
    pub fn origin_settings(&self) -> hxlab_child::origin::OriginSettings {
        hxlab_child::origin::OriginSettings {
            cc: self.server_cc,
            scheduler: self.scheduler.unwrap_or_default(),
            notsent_lowat: self.notsent_lowat.unwrap_or_default(),
            // A page load's client is Chromium, whose own tables cannot be set: the origin
            // keeps its default so both ends run the same.
            header_table: None,
        }
    }
}
/// The job's link; with `--discovery udp-blocked` the same link (or one that only blocks,
/// when none was asked for) dropping UDP both ways.
fn link_of(job: &hxlab_contract::PageJob) -> Option<LinkConfig> {
    if job.discovery != hxlab_contract::Discovery::UdpBlocked {
        return job.link.clone();
    }
    let mut link = job.link.clone().unwrap_or_default();
    link.block_udp();
    Some(link)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_synthetic_specs() {
        let s = Synthetic::parse("n=3,size=10KiB,delay=5ms").unwrap();
        assert_eq!(
            s,
            Synthetic {
                n: 3,
                size: 10240,
                delay: Duration::from_millis(5),
                origins: 1,
                cache: None,
            }
        );
        assert_eq!(Synthetic::parse("").unwrap().n, 30);
        assert_eq!(Synthetic::parse("origins=2").unwrap().origins, 2);
        assert_eq!(
            Synthetic::parse("cache=1h").unwrap().cache,
            Some(Duration::from_secs(3600))
        );
        for bad in [
            "origins=3",
            "n=x",
            "n=5000",
            "size=1Q",
            "color=red",
            "n",
            "delay=2min",
            "cache=0s",
            "cache=x",
        ] {
            assert!(Synthetic::parse(bad).is_err(), "{bad}");
        }
    }
}
