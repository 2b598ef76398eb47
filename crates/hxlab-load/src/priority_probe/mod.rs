//! `hxlab probe --priorities`: how a server orders responses that share one connection, read
//! from what arrives on the wire. A small client of its own per protocol ([`h2`]: frames and
//! HPACK from hxlab-wire over this crate's TCP/TLS connect; [`h3`]: quinn, QPACK and the
//! response parser of this crate's HTTP/3 client) runs the same four tests through one
//! interface ([`ProbeConn`]), each on a fresh connection, and logs every response body byte
//! as it arrives; [`judge`] turns the logs into figures and classes without I/O.
//!
//! The tests (docs/priorities-probe.md):
//! - urgency: a bulk response with `priority: u=5`; once [`ProbePlan::trigger_bytes`] of it
//!   arrived, a small one with `u=0`; how long the small waits and what arrives meanwhile;
//! - incremental: two bulks at `u=3` (sequential under RFC 9218), two at `u=3, i`
//!   (interleaved);
//! - PRIORITY_UPDATE: two bulks at `u=3`, then the second raised to `u=0`;
//! - RFC 7540 (HTTP/2 only): the urgency test with no `priority` header, the small's HEADERS
//!   depending exclusively on stream 0 with weight 256, the bulk's with weight 1.
//!
//! What it is not: a link. The scheduling shows only where the path is the bottleneck, so the
//! caller runs [`run`] behind an emulated link (`hxlab probe` does, in a network namespace).

pub mod judge;

mod h2;
mod h3;

use hxlab_contract::{PriorityScorecard, ProbeLink, UpdateFigures, UrgentFigures};
use judge::ArrivalLog;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// What the probe talks to.
#[derive(Clone, Debug)]
pub struct ProbeTarget {
    /// Where the connections go (TCP; HTTP/3 goes to the same address, on the port the
    /// server's Alt-Svc names if it names one).
    pub addr: SocketAddr,
    /// `https` (h2 by ALPN, then h3) or `http` (h2c with prior knowledge).
    pub https: bool,
    /// `host:port` for `:authority`, as the URL has it.
    pub authority: String,
    /// The TLS server name (SNI), the URL's host.
    pub server_name: String,
    /// Path and query of the large resource.
    pub bulk_path: String,
    /// Path and query of the small resource.
    pub small_path: String,
    /// Accept any certificate.
    pub insecure: bool,
    /// Trust this CA certificate.
    pub cacert: Option<PathBuf>,
    /// Connect and handshake limit.
    pub connect_timeout: Duration,
}

/// How much each test reads, and how long it may take.
#[derive(Clone, Debug)]
pub struct ProbePlan {
    /// Bytes of the bulk (of the pair, in the PRIORITY_UPDATE test) that arrive before the
    /// urgent request (or the update) is sent.
    pub trigger_bytes: u64,
    /// Bytes of a pair read to judge whether it interleaves.
    pub pair_window: u64,
    /// The least bytes read after a PRIORITY_UPDATE (at least three times what the urgency
    /// test found committed, so the committed bytes stay in the first half).
    pub update_window: u64,
    /// The longest one test may take.
    pub test_limit: Duration,
    /// Which tests run besides the urgency test (whose class is the verdict).
    pub tests: Tests,
}

/// The tests besides the urgency test, each on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tests {
    /// Two pairs of equal-urgency bulks, without and with `i`.
    pub incremental: bool,
    /// Two bulks at `u=3`, then a PRIORITY_UPDATE raising the second.
    pub priority_update: bool,
    /// HTTP/2 only: the urgency test with RFC 7540 signals.
    pub rfc7540: bool,
}

impl Tests {
    /// Every test.
    pub const ALL: Tests = Tests {
        incremental: true,
        priority_update: true,
        rfc7540: true,
    };
}

impl Default for ProbePlan {
    fn default() -> ProbePlan {
        ProbePlan {
            trigger_bytes: 300_000,
            pair_window: 400_000,
            update_window: 400_000,
            test_limit: Duration::from_secs(20),
            tests: Tests::ALL,
        }
    }
}

/// Why a test could not run; one line.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeError {
    /// No connection (refused, TLS, handshake).
    #[error("{0}")]
    Connect(String),
    /// The server broke the protocol, reset a stream or went away.
    #[error("{0}")]
    Protocol(String),
    /// A response was not a success.
    #[error("{path} answered {status}; --bulk and --small must name resources that exist")]
    Status {
        /// The path asked for.
        path: String,
        /// Its status.
        status: u16,
    },
    /// The bulk ended before the test could send its next request.
    #[error("the bulk response ended after {bytes} bytes, before the test's next request; give a larger --bulk (a few MB)")]
    BulkTooSmall {
        /// Its bytes.
        bytes: u64,
    },
    /// Nothing useful arrived in time.
    #[error("{0}")]
    Timeout(String),
}

/// Which of the target's two resources a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Resource {
    /// `--bulk`.
    Bulk,
    /// `--small`.
    Small,
}

impl ProbeTarget {
    /// The path and query of `r`.
    pub(crate) fn path(&self, r: Resource) -> &str {
        match r {
            Resource::Bulk => &self.bulk_path,
            Resource::Small => &self.small_path,
        }
    }
}

/// The request head both clients send: a GET of `path` with the RFC 9218 header if any.
pub(crate) fn request_fields<'a>(
    target: &'a ProbeTarget,
    path: &'a str,
    signals: &Signals,
) -> Vec<(&'a [u8], &'a [u8])> {
    let scheme: &[u8] = if target.https { b"https" } else { b"http" };
    let mut fields: Vec<(&[u8], &[u8])> = vec![
        (b":method", b"GET"),
        (b":scheme", scheme),
        (b":authority", target.authority.as_bytes()),
        (b":path", path.as_bytes()),
        (b"user-agent", b"hxlab-probe"),
    ];
    if let Some(v) = signals.priority {
        fields.push((b"priority", v.as_bytes()));
    }
    fields
}

/// A request's priority signals.
#[derive(Clone, Debug, Default)]
pub(crate) struct Signals {
    /// The RFC 9218 `priority` header's value.
    pub priority: Option<&'static str>,
    /// HTTP/2 HEADERS priority (RFC 7540 §6.2): exclusive, stream depended on, weight 1–256.
    pub rfc7540: Option<(bool, u32, u16)>,
}

impl Signals {
    fn header(value: &'static str) -> Signals {
        Signals {
            priority: Some(value),
            rfc7540: None,
        }
    }
}

/// One probe connection, whatever the protocol: requests go out, every response body byte is
/// logged as it arrives.
pub(crate) trait ProbeConn {
    /// Queues a GET for `resource` with `signals` (sent at the latest by the next
    /// [`ProbeConn::read_until`]); the stream id.
    async fn request(&mut self, resource: Resource, signals: &Signals) -> Result<u64, ProbeError>;
    /// Sends a PRIORITY_UPDATE for `stream` with the field value `value`.
    async fn priority_update(&mut self, stream: u64, value: &str) -> Result<(), ProbeError>;
    /// Sends what is queued, then reads until `done` says so (true) or `limit` passes
    /// (false).
    async fn read_until(
        &mut self,
        limit: Instant,
        done: impl Fn(&ArrivalLog) -> bool,
    ) -> Result<bool, ProbeError>;
    /// What arrived so far.
    fn log(&self) -> &ArrivalLog;
    /// Time since the connection opened (the log's clock).
    fn elapsed(&self) -> Duration;
}

/// Opens fresh probe connections of one protocol.
pub(crate) trait Dialer {
    /// The connection type.
    type Conn: ProbeConn;
    /// A new connection; `rfc9218` says the client uses only RFC 9218 signals on it (HTTP/2
    /// then sends SETTINGS_NO_RFC7540_PRIORITIES = 1).
    async fn open(&self, rfc9218: bool) -> Result<Self::Conn, ProbeError>;
    /// `h2`, `h2c` or `h3`.
    fn protocol(&self) -> &'static str;
    /// Where its connections go.
    fn addr(&self) -> SocketAddr;
}

/// Runs every test for every protocol the target offers (h2 or h2c, then h3 over https) on
/// a thread of its own runtime; one scorecard each, in that order.
pub fn run(target: &ProbeTarget, plan: &ProbePlan, link: &ProbeLink) -> Vec<PriorityScorecard> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return vec![failed(
                if target.https { "h2" } else { "h2c" },
                target.addr,
                format!("cannot start a runtime: {e}"),
            )]
        }
    };
    rt.block_on(async {
        let (h2_card, alt_svc) = match h2::H2Dialer::new(target) {
            Ok(d) => {
                let card = scorecard(&d, plan, link, true).await;
                (card, d.alt_svc())
            }
            Err(e) => (failed(h2::name(target), target.addr, e.to_string()), None),
        };
        let mut cards = vec![h2_card];
        if target.https {
            let port = alt_svc
                .as_deref()
                .and_then(crate::probe::alt_svc_h3_port)
                .unwrap_or(target.addr.port());
            let addr = SocketAddr::new(target.addr.ip(), port);
            cards.push(match h3::H3Dialer::new(target, addr) {
                Ok(d) => {
                    let card = scorecard(&d, plan, link, false).await;
                    d.close().await;
                    card
                }
                Err(e) => failed("h3", addr, e.to_string()),
            });
        }
        cards
    })
}

fn failed(protocol: &str, addr: SocketAddr, error: String) -> PriorityScorecard {
    PriorityScorecard {
        protocol: protocol.to_string(),
        address: addr.to_string(),
        verdict: None,
        error: Some(error),
        urgency: None,
        incremental: None,
        priority_update: None,
        rfc7540: None,
    }
}

/// One protocol's scorecard: the urgency test decides the verdict (without it there is
/// none); the others add what they find, and their errors are noted beside it.
async fn scorecard<D: Dialer>(
    d: &D,
    plan: &ProbePlan,
    link: &ProbeLink,
    rfc7540: bool,
) -> PriorityScorecard {
    let mut card = failed(d.protocol(), d.addr(), String::new());
    card.error = None;
    let urgency = urgent(
        d,
        plan,
        link,
        Signals::header("u=5"),
        Signals::header("u=0"),
    )
    .await;
    let urgency = match urgency {
        Ok(f) => f,
        Err(e) => {
            card.error = Some(format!("urgency: {e}"));
            return card;
        }
    };
    card.verdict = Some(urgency.class);
    let committed = urgency.committed_bytes;
    card.urgency = Some(urgency);
    let mut errors = Vec::new();
    if plan.tests.incremental {
        match incremental(d, plan).await {
            Ok(f) => card.incremental = Some(f),
            Err(e) => errors.push(format!("incremental: {e}")),
        }
    }
    if plan.tests.priority_update {
        match update(d, plan, committed).await {
            Ok(f) => card.priority_update = Some(f),
            Err(e) => errors.push(format!("PRIORITY_UPDATE: {e}")),
        }
    }
    if rfc7540 && plan.tests.rfc7540 {
        let weight = |exclusive, w| Signals {
            priority: None,
            rfc7540: Some((exclusive, 0, w)),
        };
        match urgent(d, plan, link, weight(false, 1), weight(true, 256)).await {
            Ok(f) => card.rfc7540 = Some(f),
            Err(e) => errors.push(format!("RFC 7540: {e}")),
        }
    }
    if !errors.is_empty() {
        card.error = Some(errors.join("; "));
    }
    card
}

/// The urgency test (and, with RFC 7540 signals, the RFC 7540 test).
async fn urgent<D: Dialer>(
    d: &D,
    plan: &ProbePlan,
    link: &ProbeLink,
    bulk_signals: Signals,
    small_signals: Signals,
) -> Result<UrgentFigures, ProbeError> {
    let mut c = d.open(bulk_signals.rfc7540.is_none()).await?;
    let limit = Instant::now() + plan.test_limit;
    let bulk = c.request(Resource::Bulk, &bulk_signals).await?;
    let trigger = plan.trigger_bytes;
    let reached = c
        .read_until(limit, |l| l.bytes(bulk) >= trigger || l.ended(bulk))
        .await?;
    check_bulk(&c, &[bulk], reached, plan)?;
    let sent = c.elapsed();
    let small = c.request(Resource::Small, &small_signals).await?;
    c.read_until(limit, |l| l.ended(small)).await?;
    Ok(judge::judge_urgent(c.log(), bulk, small, sent, link))
}

/// The bulks reached the trigger without ending, or the test cannot go on.
fn check_bulk<C: ProbeConn>(
    c: &C,
    bulks: &[u64],
    reached: bool,
    plan: &ProbePlan,
) -> Result<(), ProbeError> {
    let log = c.log();
    if let Some(&b) = bulks.iter().find(|&&b| log.ended(b)) {
        return Err(ProbeError::BulkTooSmall {
            bytes: log.bytes(b),
        });
    }
    if !reached {
        return Err(ProbeError::Timeout(format!(
            "{} bytes of the bulk arrived in {:?}; the test needs {}",
            log.total(),
            plan.test_limit,
            plan.trigger_bytes
        )));
    }
    Ok(())
}

/// The lesser share of two bulks asked for together with `priority: value`.
async fn pair_share<D: Dialer>(
    d: &D,
    plan: &ProbePlan,
    value: &'static str,
) -> Result<f64, ProbeError> {
    let mut c = d.open(true).await?;
    let limit = Instant::now() + plan.test_limit;
    let a = c.request(Resource::Bulk, &Signals::header(value)).await?;
    let b = c.request(Resource::Bulk, &Signals::header(value)).await?;
    let window = plan.pair_window;
    c.read_until(limit, |l| l.total() >= window || l.ended(a) || l.ended(b))
        .await?;
    Ok(judge::lesser_share(c.log(), a, b))
}

async fn incremental<D: Dialer>(
    d: &D,
    plan: &ProbePlan,
) -> Result<hxlab_contract::IncrementalFigures, ProbeError> {
    let non_incremental = pair_share(d, plan, "u=3").await?;
    let incremental = pair_share(d, plan, "u=3, i").await?;
    Ok(judge::judge_incremental(non_incremental, incremental))
}

async fn update<D: Dialer>(
    d: &D,
    plan: &ProbePlan,
    committed: u64,
) -> Result<UpdateFigures, ProbeError> {
    let mut c = d.open(true).await?;
    let limit = Instant::now() + plan.test_limit;
    let first = c.request(Resource::Bulk, &Signals::header("u=3")).await?;
    let raised = c.request(Resource::Bulk, &Signals::header("u=3")).await?;
    let trigger = plan.trigger_bytes;
    let reached = c
        .read_until(limit, |l| {
            l.total() >= trigger || l.ended(first) || l.ended(raised)
        })
        .await?;
    check_bulk(&c, &[first, raised], reached, plan)?;
    let at = c.elapsed();
    c.priority_update(raised, "u=0").await?;
    let window = plan.update_window.max(committed.saturating_mul(3));
    c.read_until(limit, |l| {
        l.ended(first) || l.ended(raised) || l.total_after(at) >= window
    })
    .await?;
    Ok(judge::judge_update(c.log(), first, raised, at))
}
