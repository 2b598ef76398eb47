//! hxlab-browser: page loads in a real headless browser: Chromium over the DevTools
//! protocol, or Firefox over WebDriver BiDi ([`Engine`], chosen in [`PageConfig::engine`]).
//!
//! What it is for: start Debian's `chromium` or `firefox-esr` with a fresh profile, force
//! HTTP/1.1, HTTP/2 or HTTP/3, trust a test server's certificate (Chromium: by its SPKI hash;
//! Firefox: imported into the profile's NSS store), load one page, and return the
//! browser's own records: the protocol every resource used, navigation and paint timings
//! (TTFB, DOMContentLoaded, load, first contentful paint), connections, bytes, per-resource
//! timings and, on request, a HAR 1.2 log. [`load_page`] is one run, returned as the
//! result model of `hxlab_core::page` (`PageRun`; medians, waterfalls and the `RunResult`
//! every part of hxlab reads are made from it there). The lab's `workload = "browser"` calls
//! [`load_page`] once per repetition.
//!
//! What it is not: no server, no network emulation (a [`Launcher`] lets the caller start the
//! browser inside `hxlab link`'s namespace), no CLI. It speaks CDP itself over
//! `--remote-debugging-pipe` (a dozen methods and events) instead of pulling in a generated
//! binding of the whole protocol: fewer dependencies and compile time, and full control over
//! how the browser process tree is started and killed. Firefox is driven the same way over a
//! WebSocket client of our own (ws.rs, bidi.rs); what it cannot measure (CLS, the visual
//! metrics) is left `None`, and [`Engine::lacks`] names it.

mod bidi;
mod cdp;
mod collected;
mod firefox;
mod har;
mod load;
mod page_load;
mod process;
mod view;
mod visual;
mod vitals;
mod waterfall;
mod ws;

pub use firefox::find_firefox;
pub use hxlab_core::page::Engine;
pub use load::find_chromium;
pub use page_load::{load_page, load_page_async};
pub use process::Launcher;
pub use visual::{speed_index, visual_progress, Histogram};

// The result model a page load fills (hxlab-core's `page`), named here for the crate's own
// modules.
use hxlab_core::page::{is_plain_http, PageRun, ResourceTiming, View};

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Opens a TCP connection to the browser's WebDriver BiDi port, e.g. from a thread inside
/// the link's namespace, where the browser listens on that namespace's loopback.
pub type Connector = Arc<dyn Fn(SocketAddr) -> std::io::Result<std::net::TcpStream> + Send + Sync>;

/// HTTP version a page load is forced to use, or `Auto`: none forced — the one "what to ask"
/// vocabulary of hxlab ([`hxlab_core::Proto`]). A browser speaks HTTP/2 over TLS only, so
/// `h2c` is refused ([`PageConfig::validate`]).
pub use hxlab_core::Proto;

/// Maps Chromium's `response.protocol` ("http/1.1", "h2", "h3", "h3-29", "quic/…") to the
/// protocol a page load asks for; `None` for anything else (e.g. "data", "blob", empty).
pub fn asked_of_reported(reported: &str) -> Option<Proto> {
    Proto::of_reported(reported)
}

/// What one page load should do.
#[derive(Clone)]
pub struct PageConfig {
    /// The page to load (http:// or https://; h3 needs https).
    pub url: String,
    /// The protocol to force.
    pub protocol: Proto,
    /// The browser engine that loads the page.
    pub engine: Engine,
    /// Chromium binary: a path, or a name looked up on PATH (default `chromium`).
    pub chromium: PathBuf,
    /// Firefox binary: a path, or a name looked up on PATH (default `firefox-esr`).
    pub firefox: PathBuf,
    /// Firefox: PEM certificates imported into the profile's NSS store as trusted
    /// (`certutil -A -t "C,,"`), the real way to trust a test origin; Chromium trusts
    /// [`PageConfig::spki_sha256`] instead.
    pub trust_certs: Vec<PathBuf>,
    /// Firefox: every host name resolves to this address (`network.dns.forceResolve`);
    /// Chromium's counterpart is [`PageConfig::host_resolver_rules`].
    pub resolve_all_to: Option<IpAddr>,
    /// Firefox with h3: the origins (host, port) QUIC is forced on
    /// (`network.http.http3.alt-svc-mapping-for-testing`); the page's own origin is added.
    pub quic_origins: Vec<(String, u16)>,
    /// Firefox: QUIC's congestion controller (`network.http.http3.cc_algorithm`; neqo has
    /// reno and cubic); None: neqo's default. TCP follows the namespace's default.
    pub quic_cc: Option<hxlab_core::cc::CongestionControl>,
    /// Firefox: how to reach its BiDi port when it runs inside a namespace; None: connect
    /// from here.
    pub connector: Option<Connector>,
    /// Base64 SHA-256 hashes of SubjectPublicKeyInfos to trust (`--ignore-certificate-errors-spki-list`).
    pub spki_sha256: Vec<String>,
    /// Accept any certificate (`--ignore-certificate-errors`; `hxlab page -k`).
    pub insecure: bool,
    /// Limit for the whole run: start, load, measure, shut down.
    pub timeout: Duration,
    /// Chromium `--host-resolver-rules`, e.g. `MAP origin.test 10.0.0.1`.
    pub host_resolver_rules: Option<String>,
    /// More Chromium flags, appended last.
    pub extra_args: Vec<String>,
    /// Build a HAR 1.2 log into [`PageRun::har`].
    pub collect_har: bool,
    /// Put every response body into the HAR (`content.text`, base64 when binary), read with
    /// `Network.getResponseBody` as each response finishes; up to 512 MiB in all.
    pub collect_bodies: bool,
    /// How to start the browser (e.g. inside a network namespace); `None`: a plain child.
    pub launcher: Option<Launcher>,
    /// CPU slowdown factor (`Emulation.setCPUThrottlingRate`); 1: none.
    pub cpu_slowdown: f64,
    /// After the first view, load the page again in the same browser (cache and connections
    /// kept) into [`PageRun::repeat_view`].
    pub repeat_view: bool,
    /// Leave a run out when any resource failed, answered 4xx/5xx or did not finish
    /// (`hxlab page --strict`); otherwise a run counts when the page loaded, and those
    /// resources are counted in [`PageRun::problems`].
    pub strict: bool,
    /// The hosts under test (lower case): the protocol check counts only their responses
    /// and names the others in [`PageRun::outside_protocol_check`]. Empty: every host.
    pub hosts_under_test: Vec<String>,
    /// After the first view, close the browser and start a new one on the profile it left
    /// (HTTP cache and Alt-Svc records kept, connections closed) and load the page again as
    /// a returning visitor, into [`PageRun::repeat_view`] (`View::Returning`). Not with
    /// `repeat_view`, which takes that place.
    pub returning_visit: bool,
    /// Write Chromium's NetLog of the run to this file (`--log-net-log`); a returning
    /// visitor's goes beside it, `.returning` before the extension.
    pub netlog: Option<PathBuf>,
}

impl PageConfig {
    /// A config with defaults: `chromium` from PATH, 60 s timeout, no HAR.
    pub fn new(url: impl Into<String>, protocol: Proto) -> PageConfig {
        PageConfig {
            url: url.into(),
            protocol,
            engine: Engine::Chromium,
            chromium: PathBuf::from("chromium"),
            firefox: PathBuf::from("firefox-esr"),
            trust_certs: Vec::new(),
            resolve_all_to: None,
            quic_origins: Vec::new(),
            quic_cc: None,
            connector: None,
            spki_sha256: Vec::new(),
            insecure: false,
            timeout: Duration::from_secs(60),
            host_resolver_rules: None,
            extra_args: Vec::new(),
            collect_har: false,
            collect_bodies: false,
            launcher: None,
            cpu_slowdown: 1.0,
            repeat_view: false,
            strict: false,
            hosts_under_test: Vec::new(),
            returning_visit: false,
            netlog: None,
        }
    }
}

impl PageConfig {
    /// Checks the URL, the protocol/scheme combination and the SPKI hashes without starting
    /// anything ([`BrowserError::Config`] says what is wrong).
    pub fn validate(&self) -> Result<(), BrowserError> {
        match self.engine {
            Engine::Chromium => load::browser_args(self).map(|_| ()),
            Engine::Firefox => firefox::check(self),
        }
    }
}

impl std::fmt::Debug for PageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageConfig")
            .field("url", &self.url)
            .field("protocol", &self.protocol)
            .field("engine", &self.engine)
            .field("chromium", &self.chromium)
            .field("firefox", &self.firefox)
            .field("timeout", &self.timeout)
            .field("cpu_slowdown", &self.cpu_slowdown)
            .field("repeat_view", &self.repeat_view)
            .field("strict", &self.strict)
            .field("returning_visit", &self.returning_visit)
            .field("launcher", &self.launcher.is_some())
            .finish_non_exhaustive()
    }
}

/// Why a page load failed.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    /// The Chromium binary is not there.
    #[error("Chromium not found ({0}): install the Debian package `chromium` (apt-get install chromium) or pass --chromium PATH")]
    NotFound(String),
    /// The Firefox binary is not there.
    #[error("Firefox not found ({0}): install the Debian package `firefox-esr` (apt-get install firefox-esr) or pass --firefox PATH")]
    FirefoxNotFound(String),
    /// Bad configuration (URL, protocol combination).
    #[error("{0}")]
    Config(String),
    /// The browser could not be started.
    #[error("could not start the browser: {0}")]
    Launch(String),
    /// The browser or its page crashed or exited.
    #[error("the browser crashed: {0}")]
    Crashed(String),
    /// The run took longer than the timeout.
    #[error("page load timed out after {0:?}")]
    Timeout(Duration),
    /// The browser reported a navigation error (e.g. net::ERR_CONNECTION_REFUSED).
    #[error("navigation failed: {0}")]
    Navigation(String),
    /// The browser refused the server's certificate (a `net::ERR_CERT*` navigation error):
    /// the caller can say how to trust the server's key.
    #[error("navigation failed: {0}")]
    Certificate(String),
    /// The DevTools or WebDriver BiDi conversation went wrong.
    #[error("browser protocol: {0}")]
    Protocol(String),
}
