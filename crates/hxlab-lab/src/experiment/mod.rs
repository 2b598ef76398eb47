//! Experiment files: parsing, validation and matrix expansion.
//!
//! A file sets experiment-wide settings (`name`, `workload`, `repetitions`, `warm_up`, ...)
//! and factors. A factor given one value is part of the base configuration; given an array
//! it is swept. `[[matrix]]` blocks add further sub-matrices that inherit the top level and
//! override some factors; the cells are the union of every block's product. Everything is
//! checked before anything runs; errors name file:line:column and what was expected.

pub mod describe;
mod expand;
pub mod origins;
mod read;

pub use describe::{Description, FactorValue, PageInput, UrlOriginInput};
use expand::{expand, has_factor};
use hxlab_core::cc::CongestionControl;
use hxlab_core::sched::{Lowat, Scheduler};
use hxlab_report::{ExperimentMeta, FactorLevels, PublishedRow, PublishedTable, Workload};
pub use origins::{OriginDef, OriginKind};
use read::{
    check_duplicates, duration_setting, line_col, read_factor, read_level, str_setting, unknown_key,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;
use toml::Spanned;

/// A refused experiment, with where and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SpecError {
    /// A problem at a place in the file.
    #[error("{file}:{line}:{column}: {message}")]
    At {
        /// File name as given.
        file: String,
        /// 1-based line.
        line: usize,
        /// 1-based column (characters).
        column: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A problem with a command-line override.
    #[error("{option}: {message}")]
    Override {
        /// The option as written, e.g. `--set resources=x`.
        option: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// A problem with the experiment as a whole.
    #[error("{file}: {message}")]
    Whole {
        /// File name as given.
        file: String,
        /// What is wrong.
        message: String,
    },
}

/// The protocols a cell can use (hxlab-core's one protocol type).
pub use hxlab_core::Protocol;

/// Factor names in display order, with what each expects.
pub const FACTORS: [(&str, &str); 29] = [
    (
        "origin",
        "an origin: \"hxlab\" (the built-in server) or the NAME of an [origins.NAME] table",
    ),
    ("protocol", "one of h1, h1-tls, h2, h2c, h3"),
    (
        "profile",
        "a network profile name (see docs/profiles.md or `hxlab link --list-profiles`) or \"none\"",
    ),
    (
        "loss",
        "a loss rate like \"1%\" or a Gilbert-Elliott model \"ge:P,R,H,K\"",
    ),
    (
        "rtt",
        "a round-trip time like \"100ms\" (added by the link, half each way)",
    ),
    ("down", "a downlink rate like \"10Mbit\" (server → client)"),
    ("up", "an uplink rate like \"2Mbit\" (client → server)"),
    (
        "jitter",
        "a jitter like \"5ms\" (each packet's delay varies within ±this)",
    ),
    (
        "queue",
        "a bottleneck queue like \"100p\" (packets) or \"64KiB\" (bytes)",
    ),
    (
        "cc",
        "a congestion control for both ends: reno, cubic, bbr or default",
    ),
    (
        "cc_server",
        "the server's congestion control: reno, cubic, bbr or default",
    ),
    (
        "cc_client",
        "the client's congestion control: reno, cubic, bbr or default",
    ),
    (
        "scheduler",
        "how hxlab's origin shares an HTTP/2 or HTTP/3 connection between responses: rfc9218, round-robin or fifo",
    ),
    (
        "notsent_lowat",
        "hxlab's origin's TCP send low-water mark (TCP_NOTSENT_LOWAT): a size like \"16KiB\" or \"off\"",
    ),
    (
        "header_table",
        "header compression on both ends (HPACK/QPACK dynamic table, advertised and used): a size like \"4KiB\", 4096 or 0 (static table only), at most 64KiB",
    ),
    ("delay", "a server delay like \"10ms\""),
    ("resources", "a positive number of resources"),
    (
        "size",
        "a size like \"100KiB\", \"0.1MiB\" or a number of bytes",
    ),
    ("push", "true or false (HTTP/2 server push)"),
    ("keepalive", "true or false"),
    ("tls_resume", "true or false (TLS session resumption)"),
    ("zero_rtt", "true or false (0-RTT early data)"),
    (
        "repeat_view",
        "true or false (browser workload: the returning visitor's view, same browser with its cache and connections)",
    ),
    (
        "browser",
        "chromium or firefox (browser workload: the engine that loads the page; engines are never pooled, every cell is one)",
    ),
    (
        "discovery",
        "forced, alt-svc or udp-blocked (browser workload: how the browser reaches h3; an h3 cell forces nothing unless forced)",
    ),
    ("clients", "a positive number of connections"),
    (
        "streams",
        "a positive number of concurrent streams per connection",
    ),
    ("requests", "a positive number of requests"),
    (
        "duration",
        "a duration like \"10s\" (instead of a request count)",
    ),
];

/// Experiment-wide settings.
const SETTINGS: [&str; 17] = [
    "name",
    "har",
    "url",
    "metric",
    "title",
    "description",
    "workload",
    "repetitions",
    "warm_up",
    "timeout",
    "columns",
    "baseline",
    "seed",
    "strict",
    "matrix",
    "published",
    "origins",
];

/// Most runs one experiment may ask for; a typo in a sweep should not mean a week of runs.
pub const MAX_RUNS: usize = 100_000;

/// One value of a factor, typed.
#[derive(Clone, Debug, PartialEq)]
enum Level {
    Text(String),
    Count(u64),
    Bytes(u64),
    Time(Duration),
    Flag(bool),
}

/// A factor's levels as written, with where they were written.
#[derive(Clone, Debug)]
struct FactorSpec {
    levels: Vec<(String, Level)>,
    span: Place,
}

/// Where something was written: a span in the file, or a command-line option.
#[derive(Clone, Debug)]
enum Place {
    File(std::ops::Range<usize>),
    Option(String),
}

impl Place {
    fn is_option(&self) -> bool {
        matches!(self, Place::Option(_))
    }
}

/// Everything a cell needs to run, read from its factor values.
#[derive(Clone, Debug, PartialEq)]
pub struct CellConfig {
    /// The origin measured: `hxlab` or the name of an `[origins.NAME]` table.
    pub origin: String,
    /// Protocol.
    pub protocol: Protocol,
    /// Network profile for `hxlab link --profile` (None: loopback without emulation).
    pub profile: Option<String>,
    /// Loss for `hxlab link --loss` (None: no extra loss).
    pub loss: Option<String>,
    /// Round-trip time the link adds, half each way (None: no added delay).
    pub rtt: Option<Duration>,
    /// Downlink rate for `hxlab link --down` (None: unlimited or the profile's).
    pub down: Option<String>,
    /// Uplink rate for `hxlab link --up`.
    pub up: Option<String>,
    /// Jitter for `hxlab link --jitter`.
    pub jitter: Option<Duration>,
    /// Bottleneck queue for `hxlab link --queue`.
    pub queue: Option<String>,
    /// The server's congestion control (`hxlab serve --cc`; None: the system's default).
    pub cc_server: Option<CongestionControl>,
    /// The client's congestion control (`hxlab load --cc`; None: the system's default).
    pub cc_client: Option<CongestionControl>,
    /// How hxlab's origin shares an HTTP/2 or HTTP/3 connection (`hxlab serve --scheduler`;
    /// None: its default).
    pub scheduler: Option<Scheduler>,
    /// hxlab's origin's TCP send low-water mark (`hxlab serve --notsent-lowat`; None: its
    /// default).
    pub notsent_lowat: Option<Lowat>,
    /// The header table both ends advertise and encode with (`hxlab serve --header-table`,
    /// `hxlab load --header-table`; None: their default, 4096).
    pub header_table: Option<u64>,
    /// Server delay per response.
    pub delay: Duration,
    /// Resources to fetch (resources workload).
    pub resources: u64,
    /// Body size per response, bytes.
    pub size: u64,
    /// Server push of the resources (seed-003-push).
    pub push: bool,
    /// Keep connections alive.
    pub keepalive: bool,
    /// Resume TLS sessions.
    pub tls_resume: bool,
    /// Use 0-RTT early data.
    pub zero_rtt: bool,
    /// Browser workload: measure the repeat view (`hxlab page --repeat-view`: the same
    /// browser loads the page again, its cache and connections kept) instead of the first;
    /// with `discovery` other than forced, the returning visitor (a new browser on the
    /// profile the first visit left).
    pub repeat_view: bool,
    /// Browser workload: how the browser reaches HTTP/3 (`hxlab page --discovery`). Other
    /// than forced, an h3 cell forces nothing (HTTP/3 only where Alt-Svc offers it) and an
    /// h1-tls or h2 cell is a site that offers only that protocol; `udp-blocked` puts the
    /// browser behind a link that drops UDP.
    pub discovery: hxlab_contract::Discovery,
    /// Browser workload: the engine that loads the page (`hxlab page --browser`); Chromium
    /// unless the cell says otherwise.
    pub browser: hxlab_core::page::Engine,
    /// Connections (throughput workload).
    pub clients: u64,
    /// Streams per connection (throughput workload).
    pub streams: u64,
    /// Requests (throughput workload; 0 when `duration` is set).
    pub requests: u64,
    /// Duration-bound run (throughput workload).
    pub duration: Option<Duration>,
}

impl CellConfig {
    /// The cell's link factors as the link's settings: its RTT is a round trip, half each
    /// way, as a profile's is.
    fn link_settings(&self) -> hxlab_link::LinkSettings {
        use hxlab_link::{Bottleneck, Delay, LinkSettings};
        LinkSettings {
            profile: self.profile.clone(),
            delay: self.rtt.map(Delay::RoundTrip),
            jitter: self.jitter,
            loss: self.loss.clone(),
            down: self.down.clone().map(Bottleneck::Rate),
            up: self.up.clone().map(Bottleneck::Rate),
            queue: self.queue.clone(),
            aqm: None,
        }
    }

    /// What hxlab's origin runs for the cell: its controller, scheduler and mark (the
    /// origin's defaults where the cell sets none).
    pub fn origin_settings(&self) -> hxlab_child::origin::OriginSettings {
        hxlab_child::origin::OriginSettings {
            cc: self.cc_server,
            scheduler: self.scheduler.unwrap_or_default(),
            notsent_lowat: self.notsent_lowat.unwrap_or_default(),
            header_table: self.header_table,
        }
    }

    /// True when the cell needs `hxlab link` (a profile, loss, RTT, rate, jitter or queue).
    pub fn needs_link(&self) -> bool {
        !self.link_settings().is_empty() || self.discovery == hxlab_contract::Discovery::UdpBlocked
    }

    /// The cell's network as a typed link configuration (None for loopback), built by
    /// [`hxlab_link::LinkSettings::build`] as `hxlab link` builds its flags'. The seed is
    /// left at 0: the runner draws it per group.
    pub fn link_config(&self) -> Result<Option<hxlab_link::LinkConfig>, String> {
        let settings = self.link_settings();
        if settings.is_empty() {
            return Ok(None);
        }
        settings.build().map(Some).map_err(|e| e.to_string())
    }
}

/// One cell of the matrix: a combination of factor values.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Key: `name=value` pairs in factor order, space separated.
    pub key: String,
    /// Factor values as written.
    pub factors: BTreeMap<String, String>,
    /// The typed configuration.
    pub config: CellConfig,
}

/// A checked experiment: settings, factors and the expanded cells.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// Short name.
    pub name: String,
    /// Title for reports.
    pub title: String,
    /// Description for reports.
    pub description: String,
    /// Workload of every cell.
    pub workload: Workload,
    /// Repetitions per cell.
    pub repetitions: u32,
    /// Warm-up before measuring (throughput workload).
    pub warm_up: Option<Duration>,
    /// Longest one repetition may take before it is stopped and recorded as failed.
    pub timeout: Duration,
    /// The factor to lay out as table columns.
    pub columns: Option<String>,
    /// The protocol to compare others with.
    pub baseline: Option<String>,
    /// Seed for the link's random loss.
    pub seed: Option<u64>,
    /// Factors and their levels in display order.
    pub factors: Vec<FactorLevels>,
    /// Cells in run order.
    pub cells: Vec<Cell>,
    /// Published figures to show beside ours.
    pub published: Vec<PublishedTable>,
    /// The origins the `[origins.NAME]` tables define (`hxlab` is built in).
    pub origins: BTreeMap<String, OriginDef>,
    /// The browser workload's page when it is not the lab's synthetic page: a recorded
    /// site replayed (`har = "site.har"`) or a URL (`url = "https://..."`).
    pub page: Option<PageSource>,
    /// The primary figure when not the workload's (browser workload: `metric = "lcp"`,
    /// `"fcp"`, `"speed_index"` or `"load"`).
    pub metric: Option<hxlab_report::Metric>,
    /// How the browser trusts a `url` page's certificate (`hxlab compare --page URL --live
    /// -k --spki ...`).
    pub page_trust: PageTrust,
    /// Browser workload: a page load counts only when every resource loaded and answered
    /// below 400 (`hxlab page --strict`); by default a load with failed resources counts,
    /// its failures recorded beside it.
    pub strict: bool,
}

/// How the browser trusts the certificate of a page the lab does not serve.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PageTrust {
    /// Accept any certificate (Chromium's `--ignore-certificate-errors`; TCP only: Chromium's
    /// QUIC does not honour it).
    pub insecure: bool,
    /// Server keys to trust by the base64 SHA-256 of their SubjectPublicKeyInfo (TCP and
    /// QUIC alike).
    pub spki: Vec<String>,
}

/// A page the browser workload loads instead of the synthetic one.
#[derive(Clone, Debug, PartialEq)]
pub enum PageSource {
    /// A HAR archive, replayed by `hxlab page --replay` (its own `hxlab serve --replay`),
    /// with where its replay starts, read with it once.
    Har(std::path::PathBuf, hxlab_core::har::RecordedStart),
    /// A URL, loaded as it is.
    Url(String),
}

impl Experiment {
    /// The origin `name` (the built-in `hxlab`, or one the file defines).
    pub fn origin(&self, name: &str) -> Option<OriginDef> {
        if name == origins::BUILTIN {
            return Some(OriginDef {
                name: name.to_string(),
                protocols: vec![
                    Protocol::H1,
                    Protocol::H1Tls,
                    Protocol::H2,
                    Protocol::H2c,
                    Protocol::H3,
                ],
                kind: OriginKind::Builtin,
            });
        }
        self.origins.get(name).cloned()
    }
    /// Total repetitions to run.
    pub fn total_runs(&self) -> usize {
        self.cells.len() * self.repetitions as usize
    }
    /// The environment of the experiment's records: this machine now, with the versions of
    /// the peers its cells use (each command origin's program; Chromium for browser cells).
    pub fn environment(&self) -> hxlab_core::env::Environment {
        let mut env = hxlab_core::env::Environment::here();
        for def in self.origins.values() {
            if let OriginKind::Command(c) = &def.kind {
                if let Some(program) = c.command.first() {
                    env = env.with_peer(program);
                }
            }
        }
        if self.workload == Workload::Browser {
            let chromium = std::env::var("HXLAB_CHROMIUM").unwrap_or_else(|_| "chromium".into());
            env = env.with_peer(&chromium);
        }
        env
    }

    /// The description the report reads (`experiment.json`).
    pub fn meta(&self) -> ExperimentMeta {
        ExperimentMeta {
            name: self.name.clone(),
            title: self.title.clone(),
            description: self.description.clone(),
            workload: Some(self.workload),
            repetitions: self.repetitions,
            factors: self.factors.clone(),
            columns: self.columns.clone(),
            baseline: self.baseline.clone(),
            published: self.published.clone(),
            notes: Vec::new(),
            cells: self.cells.iter().map(|c| c.key.clone()).collect(),
            metric: self.metric,
            environment: Some(self.environment()),
        }
    }
}

/// Changes from the command line, applied before validation.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// `--repetitions N`.
    pub repetitions: Option<u32>,
    /// `--set factor=v1,v2`: replaces a factor's levels everywhere (top level and blocks).
    pub set: Vec<String>,
    /// `--warm-up DUR`.
    pub warm_up: Option<Duration>,
    /// `--timeout DUR`.
    pub timeout: Option<Duration>,
    /// `--strict`.
    pub strict: bool,
}

#[derive(Deserialize, Default)]
struct RawBlocks {
    #[serde(default)]
    matrix: Vec<BTreeMap<Spanned<String>, Spanned<toml::Value>>>,
    #[serde(default)]
    published: Vec<RawPublished>,
    #[serde(default)]
    origins: BTreeMap<String, origins::RawOrigin>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPublished {
    title: String,
    #[serde(default)]
    source: String,
    #[serde(default)]
    column_factor: Option<String>,
    columns: Vec<String>,
    rows: Vec<RawPublishedRow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPublishedRow {
    label: String,
    #[serde(default)]
    factors: BTreeMap<String, String>,
    /// `nan` in TOML marks a value the study did not publish.
    values: Vec<f64>,
}

struct Ctx<'a> {
    file: &'a str,
    src: &'a str,
    /// The origins defined in the file (`hxlab` is built in).
    origins: BTreeMap<String, OriginDef>,
}

impl Ctx<'_> {
    fn at(&self, place: &Place, message: impl Into<String>) -> SpecError {
        match place {
            Place::File(span) => {
                let (line, column) = line_col(self.src, span.start);
                SpecError::At {
                    file: self.file.to_string(),
                    line,
                    column,
                    message: message.into(),
                }
            }
            Place::Option(o) => SpecError::Override {
                option: o.clone(),
                message: message.into(),
            },
        }
    }
    fn whole(&self, message: impl Into<String>) -> SpecError {
        SpecError::Whole {
            file: self.file.to_string(),
            message: message.into(),
        }
    }
}

/// Parses and checks an experiment file. `file` names it in error messages.
pub fn parse(file: &str, src: &str, overrides: &Overrides) -> Result<Experiment, SpecError> {
    let mut ctx = Ctx {
        file,
        src,
        origins: BTreeMap::new(),
    };
    let top: BTreeMap<Spanned<String>, Spanned<toml::Value>> =
        toml::from_str(src).map_err(|e| toml_error(&ctx, &e))?;
    let blocks: RawBlocks = toml::from_str(src).map_err(|e| toml_error(&ctx, &e))?;
    let origins_span = top
        .iter()
        .find(|(k, _)| k.get_ref() == "origins")
        .map(|(k, _)| k.span());
    ctx.origins = origins::read_origins(&ctx, &blocks.origins, origins_span)?;

    let stem = std::path::Path::new(file)
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("experiment")
        .to_string();
    let mut exp = Experiment {
        name: stem,
        title: String::new(),
        description: String::new(),
        workload: Workload::Resources,
        repetitions: 10,
        warm_up: None,
        timeout: Duration::from_secs(120),
        columns: None,
        baseline: None,
        seed: None,
        factors: Vec::new(),
        cells: Vec::new(),
        published: Vec::new(),
        origins: ctx.origins.clone(),
        page: None,
        metric: None,
        page_trust: PageTrust::default(),
        strict: false,
    };
    let mut base = read_top(&ctx, &top, &mut exp)?;
    let mut block_specs = read_blocks(&ctx, &blocks.matrix)?;
    exp.published = published_tables(blocks.published);
    apply_overrides(overrides, &mut exp, &mut base, &mut block_specs)?;
    check_workload_factors(&ctx, &exp, &base, &block_specs)?;
    expand(&ctx, &mut exp, &base, &block_specs)?;
    check_expanded(&ctx, &exp)?;
    Ok(exp)
}

/// The top level: settings into `exp`, factors into the base configuration.
fn read_top(
    ctx: &Ctx,
    top: &BTreeMap<Spanned<String>, Spanned<toml::Value>>,
    exp: &mut Experiment,
) -> Result<BTreeMap<String, FactorSpec>, SpecError> {
    let mut base: BTreeMap<String, FactorSpec> = BTreeMap::new();
    for (k, v) in top {
        let key = k.get_ref().as_str();
        let place = Place::File(v.span());
        match key {
            "name" => {
                exp.name = str_setting(ctx, key, v)?;
                // The name becomes part of the default results directory: keep it one plain
                // path component.
                if exp.name.is_empty()
                    || exp.name.starts_with('.')
                    || exp.name.contains(['/', '\\', '\0'])
                {
                    return Err(ctx.at(&place, format!("name {:?}: must be one path component (not empty, no leading `.`, no `/`)", exp.name)));
                }
            }
            "title" => exp.title = str_setting(ctx, key, v)?,
            "description" => exp.description = str_setting(ctx, key, v)?,
            "workload" => {
                exp.workload = match str_setting(ctx, key, v)?.as_str() {
                    "resources" => Workload::Resources,
                    "throughput" => Workload::Throughput,
                    "browser" => Workload::Browser,
                    other => {
                        return Err(ctx.at(&place, format!("unknown workload {other:?}; expected \"resources\", \"throughput\" or \"browser\"")))
                    }
                }
            }
            "repetitions" => {
                let n = v.get_ref().as_integer().ok_or_else(|| ctx.at(&place, "repetitions: expected a whole number"))?;
                if !(1..=1000).contains(&n) {
                    return Err(ctx.at(&place, format!("repetitions: expected 1 to 1000, found {n}")));
                }
                exp.repetitions = n as u32;
            }
            "warm_up" => exp.warm_up = Some(duration_setting(ctx, key, v)?),
            "timeout" => {
                let t = duration_setting(ctx, key, v)?;
                if t.is_zero() {
                    return Err(ctx.at(&place, "timeout: must be more than zero"));
                }
                exp.timeout = t;
            }
            "columns" => {
                let c = str_setting(ctx, key, v)?;
                if !FACTORS.iter().any(|(n, _)| *n == c) {
                    return Err(ctx.at(&place, format!("columns: {c:?} is not a factor")));
                }
                exp.columns = Some(c);
            }
            "baseline" => {
                let b = str_setting(ctx, key, v)?;
                if Protocol::parse(&b).is_none() {
                    return Err(ctx.at(&place, format!("baseline: unknown protocol {b:?}; expected one of h1, h1-tls, h2, h2c, h3")));
                }
                exp.baseline = Some(b);
            }
            "strict" => {
                exp.strict = v
                    .get_ref()
                    .as_bool()
                    .ok_or_else(|| ctx.at(&place, "strict: expected true or false"))?;
            }
            "seed" => {
                let n = v.get_ref().as_integer().filter(|n| *n >= 0).ok_or_else(|| ctx.at(&place, "seed: expected a non-negative integer"))?;
                exp.seed = Some(n as u64);
            }
            "har" | "url" => {
                if exp.page.is_some() {
                    return Err(ctx.at(&place, "har and url: give one page, not both"));
                }
                exp.page = Some(read::page_source(ctx, key, &str_setting(ctx, key, v)?, &place)?);
            }
            "metric" => {
                let m = str_setting(ctx, key, v)?;
                exp.metric = Some(hxlab_report::Metric::parse_page(&m).ok_or_else(|| {
                    ctx.at(&place, format!("metric {m:?}: expected \"load\", \"fcp\", \"lcp\" or \"speed_index\" (the browser workload's figures)"))
                })?);
            }
            "matrix" | "published" | "origins" => {}
            _ if FACTORS.iter().any(|(n, _)| *n == key) => {
                base.insert(key.to_string(), read_factor(ctx, key, v)?);
            }
            _ => return Err(ctx.at(&Place::File(k.span()), unknown_key(key))),
        }
    }
    Ok(base)
}

/// The `[[matrix]]` blocks: factors only.
fn read_blocks(
    ctx: &Ctx,
    matrix: &[BTreeMap<Spanned<String>, Spanned<toml::Value>>],
) -> Result<Vec<BTreeMap<String, FactorSpec>>, SpecError> {
    let mut block_specs: Vec<BTreeMap<String, FactorSpec>> = Vec::new();
    for block in matrix {
        let mut b = BTreeMap::new();
        for (k, v) in block {
            let key = k.get_ref().as_str();
            if !FACTORS.iter().any(|(n, _)| *n == key) {
                return Err(ctx.at(
                    &Place::File(k.span()),
                    format!(
                        "unknown factor `{key}` in [[matrix]]; a block may set only factors ({})",
                        FACTORS.map(|f| f.0).join(", ")
                    ),
                ));
            }
            b.insert(key.to_string(), read_factor(ctx, key, v)?);
        }
        block_specs.push(b);
    }
    Ok(block_specs)
}

/// The published tables, gaps (non-finite values) as None.
fn published_tables(raw: Vec<RawPublished>) -> Vec<PublishedTable> {
    let mut tables = Vec::new();
    for p in raw {
        tables.push(PublishedTable {
            title: p.title,
            source: p.source,
            column_factor: p.column_factor,
            columns: p.columns,
            rows: p
                .rows
                .into_iter()
                .map(|r| PublishedRow {
                    label: r.label,
                    factors: r.factors,
                    values: r
                        .values
                        .into_iter()
                        .map(|v| v.is_finite().then_some(v))
                        .collect(),
                })
                .collect(),
        });
    }

    tables
}

/// Command-line overrides: they replace a factor everywhere, blocks included, except a factor
/// that only some blocks set, which is replaced in those blocks.
fn apply_overrides(
    overrides: &Overrides,
    exp: &mut Experiment,
    base: &mut BTreeMap<String, FactorSpec>,
    block_specs: &mut [BTreeMap<String, FactorSpec>],
) -> Result<(), SpecError> {
    if let Some(r) = overrides.repetitions {
        if !(1..=1000).contains(&r) {
            return Err(SpecError::Override {
                option: format!("--repetitions {r}"),
                message: "expected 1 to 1000".into(),
            });
        }
        exp.repetitions = r;
    }
    if let Some(w) = overrides.warm_up {
        exp.warm_up = Some(w);
    }
    if let Some(t) = overrides.timeout {
        exp.timeout = t;
    }
    exp.strict |= overrides.strict;
    for set in &overrides.set {
        let option = format!("--set {set}");
        let Some((name, values)) = set.split_once('=') else {
            return Err(SpecError::Override {
                option,
                message: "expected FACTOR=VALUE[,VALUE...]".into(),
            });
        };
        let name = name.trim();
        if !FACTORS.iter().any(|(n, _)| *n == name) {
            return Err(SpecError::Override {
                option,
                message: format!(
                    "unknown factor {name:?}; expected one of {}",
                    FACTORS.map(|f| f.0).join(", ")
                ),
            });
        }
        let mut levels = Vec::new();
        for raw in values.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let v = if let Ok(n) = raw.parse::<i64>() {
                toml::Value::Integer(n)
            } else if raw == "true" || raw == "false" {
                toml::Value::Boolean(raw == "true")
            } else {
                toml::Value::String(raw.to_string())
            };
            levels.push(read_level(name, &v).map_err(|m| SpecError::Override {
                option: option.clone(),
                message: m,
            })?);
        }
        if levels.is_empty() {
            return Err(SpecError::Override {
                option,
                message: "no value given".into(),
            });
        }
        check_duplicates(name, &levels).map_err(|m| SpecError::Override {
            option: option.clone(),
            message: m,
        })?;
        if name == "protocol" {
            keep_baseline_among(&mut exp.baseline, &levels);
        }
        let spec = FactorSpec {
            levels,
            span: Place::Option(option),
        };
        // A factor that only some [[matrix]] blocks set (hxlab's cells' `cc`, which another
        // server's cells cannot take) is replaced in those blocks alone.
        let in_blocks = block_specs.iter().filter(|b| b.contains_key(name)).count();
        if !base.contains_key(name) && in_blocks > 0 && in_blocks < block_specs.len() {
            for b in block_specs.iter_mut().filter(|b| b.contains_key(name)) {
                b.insert(name.to_string(), spec.clone());
            }
            continue;
        }
        for b in block_specs.iter_mut() {
            b.remove(name);
        }
        base.insert(name.to_string(), spec);
    }

    Ok(())
}

/// `--set protocol=...` chooses the protocols on the command line, where no baseline can be
/// given: a baseline the experiment named (the built-in compare's h1-tls) that is not among
/// them becomes the first protocol given, the rule for an experiment that names none. A
/// baseline still among them stays.
fn keep_baseline_among(baseline: &mut Option<String>, protocols: &[(String, Level)]) {
    if baseline
        .as_ref()
        .is_some_and(|b| !protocols.iter().any(|(name, _)| name == b))
    {
        *baseline = protocols.first().map(|(name, _)| name.clone());
    }
}

/// Where factor `f` is given: the top level, else the first [[matrix]] block that sets it.
fn factor_spec<'a>(
    base: &'a BTreeMap<String, FactorSpec>,
    block_specs: &'a [BTreeMap<String, FactorSpec>],
    f: &str,
) -> Option<&'a FactorSpec> {
    base.get(f)
        .or_else(|| block_specs.iter().find_map(|b| b.get(f)))
}

/// Factors every cell needs, and factors the workload does not take.
fn check_workload_factors(
    ctx: &Ctx,
    exp: &Experiment,
    base: &BTreeMap<String, FactorSpec>,
    block_specs: &[BTreeMap<String, FactorSpec>],
) -> Result<(), SpecError> {
    if !base.contains_key("protocol")
        && (block_specs.is_empty() || block_specs.iter().any(|b| !b.contains_key("protocol")))
    {
        return Err(ctx.whole("no `protocol` given; e.g. protocol = [\"h1-tls\", \"h2\", \"h3\"]"));
    }
    if exp.page.is_some() && exp.workload != Workload::Browser {
        return Err(ctx.whole(
            "har and url set the page of the browser workload; add workload = \"browser\"",
        ));
    }
    if exp.metric.is_some() && exp.workload != Workload::Browser {
        return Err(ctx
            .whole("metric chooses among a page load's figures; it needs workload = \"browser\""));
    }
    if let (Some(PageSource::Har(..)), Some(spec)) =
        (&exp.page, factor_spec(base, block_specs, "discovery"))
    {
        return Err(ctx.at(
            &spec.span,
            "`discovery` needs servers that send their own Alt-Svc (the synthetic page or a url page); a replayed recording maps its origins by port, which Alt-Svc does not follow".to_string(),
        ));
    }
    if let Some(PageSource::Url(url)) = &exp.page {
        for f in ["scheduler", "notsent_lowat"] {
            if let Some(spec) = factor_spec(base, block_specs, f) {
                return Err(ctx.at(
                    &spec.span,
                    format!("`{f}` is set on hxlab's own origin; the page {url} comes from a server the lab does not run, so it keeps its own (use har = \"...\" to replay the page from hxlab's origin)"),
                ));
            }
        }
    }
    if exp.workload == Workload::Browser {
        if let Some(spec) = factor_spec(base, block_specs, "header_table") {
            return Err(ctx.at(
                &spec.span,
                "`header_table` is set on both ends; Chromium's HPACK and QPACK tables are its own and cannot be set, so a browser cell would change only the server's side".to_string(),
            ));
        }
    }
    if exp.page.is_some() {
        for f in ["delay", "resources", "size", "push"] {
            if let Some(spec) = factor_spec(base, block_specs, f) {
                return Err(ctx.at(
                    &spec.span,
                    format!("`{f}` shapes the lab's synthetic page; with har or url the page is the recorded site's or the URL's own"),
                ));
            }
        }
    }
    if exp.workload == Workload::Throughput
        && !has_factor(base, block_specs, "requests")
        && !has_factor(base, block_specs, "duration")
    {
        return Err(ctx.whole("the throughput workload needs `requests` (a count) or `duration`"));
    }
    if exp.workload != Workload::Throughput {
        for f in ["clients", "streams", "requests", "duration"] {
            if let Some(spec) = factor_spec(base, block_specs, f) {
                return Err(ctx.at(
                    &spec.span,
                    format!("`{f}` belongs to the throughput workload; the resources and browser workloads open connections as a browser does (set workload = \"throughput\" for h2load-style -n/-c/-m)"),
                ));
            }
        }
    }

    Ok(())
}

/// What can only be checked on the expanded matrix: columns, baseline, size.
fn check_expanded(ctx: &Ctx, exp: &Experiment) -> Result<(), SpecError> {
    if exp.strict && exp.workload != Workload::Browser {
        return Err(ctx.whole(
            "strict applies to the browser workload's page loads (whether a load with failed resources counts); the other workloads count every request",
        ));
    }
    if let Some(c) = &exp.columns {
        if !exp.factors.iter().any(|f| &f.name == c) {
            return Err(ctx.whole(format!(
                "columns = {c:?}, but the experiment has no factor {c:?}"
            )));
        }
    }
    if let Some(b) = &exp.baseline {
        if !exp.levels("protocol").contains(b) {
            return Err(ctx.whole(format!(
                "baseline = {b:?}, but {b} is not among the protocols"
            )));
        }
    }
    if exp.warm_up.is_some_and(|w| !w.is_zero())
        && exp.workload == Workload::Throughput
        && exp.cells.iter().any(|c| c.config.duration.is_none())
    {
        return Err(ctx.whole(
            "warm_up needs `duration`: a warm-up runs before a timed measurement (as in h2load); a run of `requests` has none",
        ));
    }
    // A recorded page must be loadable over every protocol a cell asks for (an http://
    // recording whose redirects do not end at https cannot be HTTP/2 or HTTP/3): found now,
    // not in every repetition.
    if let Some(PageSource::Har(path, start)) = &exp.page {
        for p in exp.levels("protocol") {
            let proto = match p.as_str() {
                "h3" => hxlab_core::Proto::H3,
                "h2" | "h2c" => hxlab_core::Proto::H2,
                _ => hxlab_core::Proto::H1,
            };
            start
                .url_for(proto)
                .map_err(|e| ctx.whole(format!("har {}: {e}", path.display())))?;
        }
    }
    if exp.total_runs() > MAX_RUNS {
        return Err(ctx.whole(format!(
            "{} cells × {} repetitions = {} runs is more than {MAX_RUNS}; sweep fewer values",
            exp.cells.len(),
            exp.repetitions,
            exp.total_runs()
        )));
    }
    Ok(())
}

impl Experiment {
    fn levels(&self, name: &str) -> Vec<String> {
        self.factors
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.levels.clone())
            .unwrap_or_default()
    }
}

fn toml_error(ctx: &Ctx, e: &toml::de::Error) -> SpecError {
    let message = e.message().trim().replace('\n', " ");
    match e.span() {
        Some(span) => ctx.at(&Place::File(span), message),
        None => ctx.whole(message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(src: &str) -> Experiment {
        parse("t.toml", src, &Overrides::default()).unwrap_or_else(|e| panic!("{e}"))
    }
    fn err(src: &str) -> String {
        match parse("t.toml", src, &Overrides::default()) {
            Ok(_) => panic!("accepted:\n{src}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn base_and_sweep_expand_to_the_product_in_factor_order() {
        let e = ok("protocol = [\"h1-tls\", \"h2\"]\ndelay = [\"0ms\", \"10ms\", \"30ms\"]\nresources = 100\nsize = \"0.1MiB\"\nrepetitions = 3\n");
        assert_eq!(e.cells.len(), 6);
        assert_eq!(e.total_runs(), 18);
        assert_eq!(
            e.cells[0].key,
            "protocol=h1-tls delay=0ms resources=100 size=0.1MiB"
        );
        assert_eq!(
            e.cells[1].key,
            "protocol=h1-tls delay=10ms resources=100 size=0.1MiB"
        );
        assert_eq!(e.cells[5].config.protocol, Protocol::H2);
        assert_eq!(e.cells[5].config.delay, Duration::from_millis(30));
        assert_eq!(e.cells[5].config.size, 104857);
        let names: Vec<&str> = e.factors.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, vec!["protocol", "delay", "resources", "size"]);
    }

    #[test]
    fn defaults_and_repetitions() {
        let e = ok("protocol = \"h2\"\n");
        assert_eq!(e.repetitions, 10, "the seed repeated every cell 10 times");
        assert_eq!(e.cells.len(), 1);
        assert_eq!(e.cells[0].config.resources, 30);
        assert_eq!(e.cells[0].config.size, 102400);
    }

    #[test]
    fn matrix_blocks_union_and_dedupe() {
        let e = ok("protocol = [\"h1\", \"h2\"]\ndelay = \"10ms\"\nresources = [6, 30]\n[[matrix]]\n[[matrix]]\nprofile = \"Regular 4G\"\nresources = 6\n");
        // 2×2 loopback cells + 2 network cells.
        assert_eq!(e.cells.len(), 6);
        assert_eq!(e.cells.iter().filter(|c| c.config.needs_link()).count(), 2);
        let prof = e
            .factors
            .iter()
            .find(|f| f.name == "profile")
            .expect("profile factor");
        assert_eq!(prof.levels, vec!["Regular 4G"]);
    }

    #[test]
    fn impossible_combinations_are_refused_with_place() {
        let m = err("protocol = [\"h1\", \"h2\"]\npush = true\n");
        assert!(
            m.starts_with("t.toml:2:8: impossible cell `protocol=h1"),
            "{m}"
        );
        assert!(m.contains("server push exists only in HTTP/2"), "{m}");
        let m = err("protocol = \"h3c\"\n");
        assert!(
            m.contains("t.toml:1:12:") && m.contains("there is no h3 without TLS"),
            "{m}"
        );
        let m = err("protocol = \"h2\"\nprofile = [\"none\", \"Regular 5G\"]\n");
        assert!(
            m.starts_with(
                "t.toml:2:11: profile: unknown profile \"Regular 5G\"; known: chrome-legacy:GPRS"
            ),
            "{m}"
        );
        let m = err("protocol = \"h2\"\nprofile = \"3G\"\n");
        assert!(
            m.contains("is ambiguous; say which: chrome:3G, wpt:3G"),
            "{m}"
        );
        ok("protocol = \"h2\"\nprofile = [\"wpt:3G\", \"Regular 4G\"]\n");
        let m = err("protocol = [\"h1\"]\nzero_rtt = true\n");
        assert!(m.contains("zero_rtt needs TLS"), "{m}");
        let m = err("protocol = \"h2\"\nkeepalive = false\n");
        assert!(m.contains("only HTTP/1.1 does"), "{m}");
        let m = err("workload = \"browser\"\nprotocol = [\"h2\", \"h2c\"]\n");
        assert!(
            m.contains("t.toml:2:12:") && m.contains("browsers speak HTTP/2 only over TLS"),
            "{m}"
        );
        let m = err("workload = \"browser\"\nprotocol = \"h3\"\ncc = \"bbr\"\n");
        assert!(m.contains("`cc` cannot be set for a real browser"), "{m}");
    }

    #[test]
    fn discovery_is_a_browser_factor_that_udp_blocked_puts_behind_a_link() {
        use hxlab_contract::Discovery;
        let e = ok("workload = \"browser\"\nprotocol = [\"h2\", \"h3\"]\ndiscovery = [\"forced\", \"alt-svc\", \"udp-blocked\"]\n");
        assert_eq!(e.cells.len(), 6);
        let found: Vec<(Protocol, Discovery, bool)> = e
            .cells
            .iter()
            .map(|c| (c.config.protocol, c.config.discovery, c.config.needs_link()))
            .collect();
        assert!(found.contains(&(Protocol::H3, Discovery::AltSvc, false)));
        assert!(found.contains(&(Protocol::H3, Discovery::UdpBlocked, true)));
        assert!(found.contains(&(Protocol::H2, Discovery::Forced, false)));
        assert_eq!(
            ok("workload = \"browser\"\nprotocol = \"h3\"\n").cells[0]
                .config
                .discovery,
            Discovery::Forced
        );
        let m = err("protocol = \"h3\"\ndiscovery = \"alt-svc\"\n");
        assert!(m.contains("needs workload = \"browser\""), "{m}");
        let m = err("workload = \"browser\"\nprotocol = \"h3\"\ndiscovery = \"https-rr\"\n");
        assert!(m.contains("unknown discovery \"https-rr\""), "{m}");
    }

    /// `strict` (file or `--strict`) counts only whole page loads, and only the browser
    /// workload has page loads.
    #[test]
    fn strict_is_a_browser_setting_from_the_file_or_the_command_line() {
        let browser = "workload = \"browser\"\nprotocol = \"h2\"\n";
        assert!(!ok(browser).strict);
        assert!(ok(&format!("strict = true\n{browser}")).strict);
        let o = Overrides {
            strict: true,
            ..Default::default()
        };
        assert!(parse("t.toml", browser, &o).expect("parse").strict);
        let m = err("strict = \"yes\"\nworkload = \"browser\"\nprotocol = \"h2\"\n");
        assert!(m.contains("strict: expected true or false"), "{m}");
        let m = err("strict = true\nprotocol = \"h2\"\n");
        assert!(m.contains("strict applies to the browser workload"), "{m}");
        let m = parse("t.toml", "protocol = \"h2\"\n", &o)
            .expect_err("--strict on the resources workload")
            .to_string();
        assert!(m.contains("strict applies to the browser workload"), "{m}");
    }

    #[test]
    fn cc_sets_both_ends_and_each_end_alone() {
        let e = ok("protocol = \"h2\"\ncc = [\"reno\", \"default\"]\n");
        assert_eq!(e.cells[0].config.cc_server, Some(CongestionControl::Reno));
        assert_eq!(e.cells[0].config.cc_client, Some(CongestionControl::Reno));
        assert_eq!(e.cells[1].config.cc_server, None);
        assert_eq!(e.cells[1].config.cc_client, None);
        let e = ok("protocol = \"h3\"\ncc_server = \"bbr\"\ncc_client = \"cubic\"\n");
        assert_eq!(e.cells[0].config.cc_server, Some(CongestionControl::Bbr));
        assert_eq!(e.cells[0].config.cc_client, Some(CongestionControl::Cubic));
        let m = err("protocol = \"h2\"\ncc = \"reno\"\ncc_server = \"bbr\"\n");
        assert!(
            m.starts_with("t.toml:3:13:")
                && m.contains("give `cc`, or `cc_server` and `cc_client`"),
            "{m}"
        );
        let m = err("protocol = \"h2\"\ncc_client = \"vegas\"\n");
        assert!(m.contains("unknown congestion control \"vegas\""), "{m}");
        // A browser's own controllers cannot be set; the server's can.
        ok("workload = \"browser\"\nprotocol = \"h3\"\ncc_server = \"bbr\"\n");
        let m = err("workload = \"browser\"\nprotocol = \"h3\"\ncc_client = \"bbr\"\n");
        assert!(m.contains("`cc_client` cannot be set"), "{m}");
    }

    #[test]
    fn header_table_is_a_factor_of_both_ends() {
        let e = ok("protocol = \"h2\"\nheader_table = [0, \"4KiB\"]\n");
        assert_eq!(e.cells.len(), 2);
        assert!(
            e.cells[0].key.contains("header_table=0"),
            "{}",
            e.cells[0].key
        );
        let tables: Vec<Option<u64>> = e.cells.iter().map(|c| c.config.header_table).collect();
        assert_eq!(tables, [Some(0), Some(4096)]);
        assert_eq!(e.cells[1].config.origin_settings().header_table, Some(4096));
        assert_eq!(ok("protocol = \"h2\"\n").cells[0].config.header_table, None);
        let m = err("protocol = \"h2\"\nheader_table = 70000\n");
        assert!(m.contains("header_table 70000: at most 65536"), "{m}");
        let m = err("workload = \"browser\"\nprotocol = \"h2\"\nheader_table = 0\n");
        assert!(m.contains("Chromium's HPACK and QPACK tables"), "{m}");
    }

    #[test]
    fn scheduler_and_mark_are_factors_of_hxlabs_own_origin() {
        let e = ok("protocol = [\"h1-tls\", \"h2\"]\nscheduler = [\"rfc9218\", \"fifo\"]\nnotsent_lowat = [\"16KiB\", \"off\"]\n");
        assert_eq!(e.cells.len(), 8);
        assert_eq!(
            e.cells[1].key,
            "protocol=h1-tls scheduler=rfc9218 notsent_lowat=off delay=0ms resources=30 size=100KiB"
        );
        let c = &e.cells[2].config;
        assert_eq!(
            (c.scheduler, c.notsent_lowat),
            (Some(Scheduler::Fifo), Some(Lowat::Bytes(16384)))
        );
        let settings = c.origin_settings();
        assert_eq!(
            (settings.scheduler, settings.notsent_lowat),
            (Scheduler::Fifo, Lowat::Bytes(16384))
        );
        // Not set: the origin's defaults, rfc9218 and 16 KiB.
        let d = ok("protocol = \"h2\"\n").cells[0].config.origin_settings();
        assert_eq!(
            (d.scheduler, d.notsent_lowat),
            (Scheduler::Rfc9218, Lowat::Bytes(16384))
        );
        for (src, want) in [
            (
                "scheduler = \"lifo\"",
                "t.toml:2:13: unknown scheduler \"lifo\": use rfc9218, round-robin or fifo",
            ),
            (
                "scheduler = 3",
                "t.toml:2:13: scheduler: expected how hxlab's origin shares",
            ),
            (
                "notsent_lowat = \"lots\"",
                "t.toml:2:17: notsent_lowat \"lots\"",
            ),
            (
                "notsent_lowat = 0",
                "t.toml:2:17: notsent_lowat \"0\": use 1 byte to 2GiB, or off",
            ),
            (
                "notsent_lowat = [\"16KiB\", 16384]",
                "t.toml:2:17: notsent_lowat: \"16384\" is listed twice",
            ),
        ] {
            let m = err(&format!("protocol = \"h2\"\n{src}\n"));
            assert!(m.starts_with(want), "{src}: {m}");
        }
        // --set sweeps them like any factor.
        let o = Overrides {
            set: vec![
                "scheduler=rfc9218,round-robin,fifo".into(),
                "notsent_lowat=off".into(),
            ],
            ..Default::default()
        };
        let e = parse("t.toml", "protocol = \"h2\"\n", &o).expect("parse");
        assert_eq!(e.cells.len(), 3);
        assert_eq!(e.cells[2].config.scheduler, Some(Scheduler::Fifo));
        assert_eq!(e.cells[2].config.notsent_lowat, Some(Lowat::Off));
        // Only hxlab's origin lets the lab set them: another server's cells are refused.
        let nginx = "[origins.nginx]\ncommand = [\"nginx\", \"-c\", \"{{dir}}/n.conf\"]\nprotocols = [\"h2\"]\n[origins.nginx.files]\n\"n.conf\" = \"listen {{tls_port}} ssl; events {}\"\n";
        let m = err(&format!(
            "origin = [\"hxlab\", \"nginx\"]\nprotocol = \"h2\"\nscheduler = \"fifo\"\n{nginx}"
        ));
        assert!(
            m.starts_with("t.toml:3:13: cell `origin=nginx protocol=h2 scheduler=fifo")
                && m.contains("`scheduler` sets how hxlab's own origin sends")
                && m.contains("not be like for like"),
            "{m}"
        );
        let bad = Overrides {
            set: vec!["notsent_lowat=off".into()],
            ..Default::default()
        };
        let m = parse(
            "t.toml",
            &format!("origin = \"nginx\"\nprotocol = \"h2\"\n{nginx}"),
            &bad,
        )
        .expect_err("nginx")
        .to_string();
        assert!(
            m.starts_with("--set notsent_lowat=off: cell `origin=nginx"),
            "{m}"
        );
        // A [[matrix]] block gives them to hxlab's cells alone.
        ok(&format!("protocol = \"h2\"\n[[matrix]]\norigin = \"hxlab\"\nscheduler = [\"rfc9218\", \"fifo\"]\n[[matrix]]\norigin = \"nginx\"\n{nginx}"));
        let m = err("workload = \"browser\"\nurl = \"https://example.test/\"\nprotocol = \"h2\"\nscheduler = \"fifo\"\n");
        assert!(
            m.starts_with("t.toml:4:13: `scheduler` is set on hxlab's own origin"),
            "{m}"
        );
    }

    #[test]
    fn link_factors_become_one_typed_link_and_are_bounded() {
        let e = ok("protocol = \"h2\"\nrtt = [\"0ms\", \"100ms\"]\ndown = \"10Mbit\"\nup = \"2Mbit\"\njitter = \"2ms\"\nqueue = \"100p\"\n");
        assert_eq!(e.cells.len(), 2);
        assert!(e.cells.iter().all(|c| c.config.needs_link()));
        let link = e.cells[1]
            .config
            .link_config()
            .expect("link")
            .expect("a link");
        assert_eq!(link.down.delay, Duration::from_millis(50));
        assert_eq!(link.up.delay, Duration::from_millis(50));
        assert_eq!(link.down.server, hxlab_link::Server::Rate(10_000_000));
        assert_eq!(link.up.server, hxlab_link::Server::Rate(2_000_000));
        assert_eq!(link.down.jitter, Duration::from_millis(2));
        let zero = e.cells[0]
            .config
            .link_config()
            .expect("link")
            .expect("a link");
        assert_eq!(zero.down.delay, Duration::ZERO);
        for (src, want) in [
            ("rtt = \"2h\"", "more than 10 minutes"),
            ("down = \"1bit\"", "between 1kbit and 100gbit"),
            ("up = 5", "expected an uplink rate"),
            ("queue = \"0p\"", "at least one packet"),
            ("jitter = \"fast\"", "jitter"),
        ] {
            let m = err(&format!("protocol = \"h2\"\n{src}\n"));
            assert!(m.starts_with("t.toml:2:") && m.contains(want), "{src}: {m}");
        }
    }

    #[test]
    fn malformed_files_say_where_and_what_was_expected() {
        let m = err("protocol = [\"h1\",\n  \"h2\"\ndelay = 3\n");
        assert!(m.starts_with("t.toml:"), "{m}");
        let m = err("protocol = \"h2\"\ndelay = 30\n");
        assert_eq!(
            m,
            "t.toml:2:9: delay: a duration needs a unit, e.g. \"30ms\""
        );
        let m = err("protocol = \"h2\"\nresources = \"many\"\n");
        assert_eq!(
            m,
            "t.toml:2:13: resources: expected a positive number of resources, found a string"
        );
        let m = err("protocols = [\"h2\"]\n");
        assert!(
            m.starts_with("t.toml:1:1: unknown key `protocols` (did you mean `protocol`?)"),
            "{m}"
        );
        let m = err("protocol = \"h2\"\nsize = \"10 parsecs\"\n");
        assert!(
            m.starts_with("t.toml:2:8: size: size \"10 parsecs\": unknown unit"),
            "{m}"
        );
        let m = err("protocol = [\"h2\", \"h2\"]\n");
        assert!(m.contains("listed twice"), "{m}");
        let m = err("delay = \"1ms\"\n");
        assert!(m.contains("no `protocol` given"), "{m}");
        let m = err("protocol = \"h2\"\nresources = []\n");
        assert!(m.contains("an empty list sweeps nothing"), "{m}");
        let m = err("workload = \"throughput\"\nprotocol = \"h2\"\n");
        assert!(m.contains("needs `requests`"), "{m}");
        let m =
            err("workload = \"throughput\"\nprotocol = \"h2\"\nrequests = 10\nclients = 70000\n");
        assert!(m.contains("clients: 70000 is more than 65536"), "{m}");
        let m =
            err("workload = \"throughput\"\nwarm_up = \"1s\"\nprotocol = \"h2\"\nrequests = 10\n");
        assert!(m.contains("warm_up needs `duration`"), "{m}");
        let m = err("protocol = \"h2\"\nclients = 10\n");
        assert!(
            m.contains("`clients` belongs to the throughput workload"),
            "{m}"
        );
        let m = err("protocol = \"h2\"\n[[matrix]]\nfoo = 1\n");
        assert!(
            m.starts_with("t.toml:3:1: unknown factor `foo` in [[matrix]]"),
            "{m}"
        );
    }

    #[test]
    fn command_line_overrides_replace_factors_everywhere() {
        let o = Overrides {
            repetitions: Some(2),
            set: vec!["resources=6,12".into(), "protocol=h1,h2".into()],
            ..Default::default()
        };
        let e = parse("t.toml", "protocol = [\"h1\", \"h2\", \"h3\"]\nresources = [6, 30, 150]\n[[matrix]]\nresources = 750\n", &o).expect("parse");
        assert_eq!(e.repetitions, 2);
        assert_eq!(e.cells.len(), 4);
        // The file's baseline stays while --set keeps it, else the first protocol given.
        let file = "protocol = [\"h1\", \"h1-tls\", \"h2\"]\nbaseline = \"h1-tls\"\n";
        let with = |set: &str| Overrides {
            set: vec![set.into()],
            ..Default::default()
        };
        let e = parse("t.toml", file, &with("protocol=h2,h1-tls")).expect("parse");
        assert_eq!(e.baseline.as_deref(), Some("h1-tls"));
        let e = parse("t.toml", file, &with("protocol=h3,h2")).expect("parse");
        assert_eq!(e.baseline.as_deref(), Some("h3"));
        let bad = Overrides {
            set: vec!["resources=zero".into()],
            ..Default::default()
        };
        let m = parse("t.toml", "protocol = \"h2\"\n", &bad)
            .expect_err("bad override")
            .to_string();
        assert_eq!(m, "--set resources=zero: resources: expected a positive number of resources, found a string");
        let bad = Overrides {
            set: vec!["colour=red".into()],
            ..Default::default()
        };
        assert!(parse("t.toml", "protocol = \"h2\"\n", &bad).is_err());
    }

    #[test]
    fn published_tables_are_read_with_gaps() {
        let e = ok("protocol = \"h2\"\n[[published]]\ntitle = \"x\"\ncolumn_factor = \"delay\"\ncolumns = [\"0ms\", \"10ms\"]\nrows = [{ label = \"h2\", factors = { protocol = \"h2\" }, values = [0.48, nan] }]\n");
        assert_eq!(e.published[0].rows[0].values, vec![Some(0.48), None]);
    }

    #[test]
    fn origins_are_defined_checked_and_swept() {
        let nginx = "[origins.nginx]\ncommand = [\"nginx\", \"-c\", \"{{dir}}/n.conf\"]\nprotocols = [\"h1\", \"h2\"]\n[origins.nginx.files]\n\"n.conf\" = \"listen {{plain_port}}; listen {{tls_port}} ssl; events {}\"\n";
        let e = ok(&format!("workload = \"throughput\"\nrequests = 10\norigin = [\"hxlab\", \"nginx\"]\nprotocol = [\"h1\", \"h3\"]\n{nginx}"));
        assert_eq!(e.cells.len(), 4);
        assert_eq!(
            e.cells[0].key,
            "origin=hxlab protocol=h1 delay=0ms size=100 clients=1 streams=1 requests=10"
        );
        assert_eq!(e.cells[2].config.origin, "nginx");
        assert_eq!(
            e.origin("nginx").unwrap().protocols,
            [Protocol::H1, Protocol::H2]
        );
        assert_eq!(e.origin("hxlab").unwrap().protocols.len(), 5);
        // A delay needs hxlab's origin: refused where the delay is written.
        let m = err(&format!(
            "origin = [\"hxlab\", \"nginx\"]\nprotocol = \"h1\"\ndelay = \"10ms\"\n{nginx}"
        ));
        assert!(
            m.starts_with("t.toml:3:9: cell `origin=nginx")
                && m.contains("needs an origin that can delay"),
            "{m}"
        );
        let m = err(&format!(
            "origin = \"nginx\"\nprotocol = \"h1\"\ncc = \"reno\"\n{nginx}"
        ));
        assert!(
            m.starts_with("t.toml:3:6:") && m.contains("cannot set nginx's congestion control"),
            "{m}"
        );
        let m = err("origin = \"apache\"\nprotocol = \"h1\"\n");
        assert!(m.starts_with("t.toml:1:10: origin \"apache\" is not defined; add an [origins.apache] table (known: hxlab)"), "{m}");
        let m = err("protocol = \"h1\"\n[origins.x]\ncommand = [\"x\", \"{{tls_prot}}\"]\nprotocols = [\"h1\"]\n");
        assert!(
            m.starts_with("t.toml:3:11:") && m.contains("unknown placeholder {{tls_prot}}"),
            "{m}"
        );
        let m = err("protocol = \"h1\"\n[origins.x]\ncommand = [\"x\", \"{{tls_port}}\"]\nprotocols = [\"h1\"]\n");
        assert!(
            m.contains(
                "declares h1 but neither its command nor its files listen on {{plain_port}}"
            ),
            "{m}"
        );
        let m = err("protocol = \"h1\"\n[origins.x]\ncommand = [\"x\"]\nurl = \"https://a\"\n");
        assert!(m.contains("not both"), "{m}");
        let m = err("protocol = \"h1\"\n[origins.hxlab]\nurl = \"https://a\"\n");
        assert!(m.contains("cannot be redefined"), "{m}");
        let m = err("protocol = \"h1\"\n[origins.x]\nurl = \"https://a\"\nprotocols = [\"h1\"]\n");
        assert!(
            m.starts_with("t.toml:4:13:")
                && m.contains("h1 is listed in `protocols` but no URL serves it"),
            "{m}"
        );
        let m = err("protocol = \"h1\"\n[origins.x]\nurls = { h2 = \"http://a\" }\n");
        assert!(
            m.contains("urls.h2: h2 runs over TLS, so its URL starts with https://"),
            "{m}"
        );
        let m = err("protocol = \"h1\"\n[origins.x]\nurl = \"https://a\"\nwhat = 1\n");
        assert!(
            m.starts_with("t.toml:4:1:") && m.contains("unknown field `what`"),
            "{m}"
        );
        // A url origin with a fixed path has no size or delay to sweep.
        let e = ok("origin = \"edge\"\nprotocol = [\"h2\", \"h3\"]\n[origins.edge]\nurl = \"https://edge.test\"\npath = \"/app.js\"\n");
        assert_eq!(e.cells[0].key, "origin=edge protocol=h2 resources=30");
        assert_eq!(
            e.origin("edge").unwrap().protocols,
            [Protocol::H1Tls, Protocol::H2, Protocol::H3]
        );
    }

    #[test]
    fn line_col_counts_characters() {
        assert_eq!(line_col("ab\ncé\nx", 7), (3, 1));
        assert_eq!(line_col("ab\ncé\nx", 3), (2, 1));
    }
}
