//! Matrix expansion: the union of every block's factor product, each combination read into
//! a typed [`CellConfig`] and refused when it cannot run.

use super::origins::BUILTIN;
use super::read::read_level;
use super::{
    Cell, CellConfig, Ctx, Experiment, FactorSpec, Level, Place, Protocol, SpecError, FACTORS,
    MAX_RUNS,
};
use hxlab_core::cc::CongestionControl;
use hxlab_core::sched::{Lowat, Scheduler};
use hxlab_report::{FactorLevels, Workload};
use std::collections::BTreeMap;

pub(super) fn has_factor(
    base: &BTreeMap<String, FactorSpec>,
    blocks: &[BTreeMap<String, FactorSpec>],
    f: &str,
) -> bool {
    base.contains_key(f) || blocks.iter().any(|b| b.contains_key(f))
}

/// Defaults for factors a file does not mention, by workload.
pub(super) fn defaults(workload: Workload) -> Vec<(&'static str, toml::Value)> {
    match workload {
        Workload::Resources | Workload::Browser => vec![
            ("delay", toml::Value::String("0ms".into())),
            ("resources", toml::Value::Integer(30)),
            ("size", toml::Value::String("100KiB".into())),
        ],
        Workload::Throughput => vec![
            ("delay", toml::Value::String("0ms".into())),
            ("size", toml::Value::String("100".into())),
            ("clients", toml::Value::Integer(1)),
            ("streams", toml::Value::Integer(1)),
        ],
    }
}

/// True when every origin the matrix names is a url origin whose paths do not use
/// `{{size}}`: the resource is the user's, so neither `delay` nor `size` means anything.
fn fixed_resources(
    ctx: &Ctx,
    base: &BTreeMap<String, FactorSpec>,
    blocks: &[BTreeMap<String, FactorSpec>],
) -> bool {
    let mut names = Vec::new();
    let mut everywhere = base.contains_key("origin");
    for spec in std::iter::once(base).chain(blocks.iter()) {
        if let Some(f) = spec.get("origin") {
            names.extend(f.levels.iter().map(|(n, _)| n.clone()));
        }
    }
    if !blocks.is_empty() {
        everywhere |= blocks.iter().all(|b| b.contains_key("origin"));
    }
    everywhere
        && names
            .iter()
            .all(|n| match ctx.origins.get(n).map(|d| &d.kind) {
                Some(super::OriginKind::Url(u)) => {
                    u.paths.values().all(|p| !p.contains("{{size}}"))
                }
                _ => false,
            })
}

pub(super) fn expand(
    ctx: &Ctx,
    exp: &mut Experiment,
    base: &BTreeMap<String, FactorSpec>,
    blocks: &[BTreeMap<String, FactorSpec>],
) -> Result<(), SpecError> {
    let mut base = base.clone();
    let fixed = fixed_resources(ctx, &base, blocks);
    for (name, v) in defaults(exp.workload) {
        // A server delay exists only on hxlab's origin, and a size only where the lab
        // chooses the resource: no default for an experiment that has neither.
        if fixed && (name == "delay" || name == "size") {
            continue;
        }
        // A recorded site or a URL is its own content: no synthetic page to size.
        if exp.page.is_some() && matches!(name, "delay" | "size" | "resources") {
            continue;
        }
        if !base.contains_key(name) {
            let level = read_level(name, &v).map_err(|m| ctx.whole(m))?;
            base.insert(
                name.to_string(),
                FactorSpec {
                    levels: vec![level],
                    span: Place::Option(format!("default {name}")),
                },
            );
        }
    }
    let merged: Vec<BTreeMap<String, FactorSpec>> = if blocks.is_empty() {
        vec![base.clone()]
    } else {
        blocks
            .iter()
            .map(|b| {
                let mut m = base.clone();
                for (k, v) in b {
                    m.insert(k.clone(), v.clone());
                }
                m
            })
            .collect()
    };
    // Levels per factor in order of first appearance across blocks.
    let mut factor_levels: Vec<FactorLevels> = Vec::new();
    for (name, _) in FACTORS {
        let mut levels: Vec<String> = Vec::new();
        for m in &merged {
            if let Some(spec) = m.get(name) {
                for (d, _) in &spec.levels {
                    if !levels.contains(d) {
                        levels.push(d.clone());
                    }
                }
            }
        }
        if !levels.is_empty() {
            factor_levels.push(FactorLevels {
                name: name.to_string(),
                levels,
            });
        }
    }
    let mut seen = std::collections::HashSet::new();
    for m in &merged {
        let names: Vec<&str> = FACTORS
            .iter()
            .map(|(n, _)| *n)
            .filter(|n| m.contains_key(*n))
            .collect();
        let mut combos: Vec<Vec<(&str, &(String, Level))>> = vec![Vec::new()];
        for n in &names {
            let spec = &m[*n];
            let mut next = Vec::with_capacity(combos.len() * spec.levels.len());
            for c in &combos {
                for l in &spec.levels {
                    let mut c2 = c.clone();
                    c2.push((n, l));
                    next.push(c2);
                }
            }
            combos = next;
            if combos.len() > MAX_RUNS {
                return Err(ctx.whole(format!(
                    "the matrix has more than {MAX_RUNS} cells; sweep fewer values"
                )));
            }
        }
        for combo in combos {
            let key = combo
                .iter()
                .map(|(n, (d, _))| format!("{n}={d}"))
                .collect::<Vec<_>>()
                .join(" ");
            if !seen.insert(key.clone()) {
                continue;
            }
            let config = cell_config(exp.workload, ctx, m, &combo)?;
            let factors = combo
                .iter()
                .map(|(n, (d, _))| (n.to_string(), d.clone()))
                .collect();
            exp.cells.push(Cell {
                key,
                factors,
                config,
            });
        }
    }
    // Factors that are absent from some blocks still need a level in every cell for the
    // report's tables: they are listed as they are, and cells simply lack them.
    exp.factors = factor_levels;
    Ok(())
}

pub(super) fn cell_config(
    workload: Workload,
    ctx: &Ctx,
    m: &BTreeMap<String, FactorSpec>,
    combo: &[(&str, &(String, Level))],
) -> Result<CellConfig, SpecError> {
    let key = combo
        .iter()
        .map(|(n, (d, _))| format!("{n}={d}"))
        .collect::<Vec<_>>()
        .join(" ");
    let cfg = read_cell(ctx, combo)?;
    check_cell(workload, ctx, m, combo, &key, &cfg)?;
    Ok(cfg)
}

/// The factor values of one combination, typed.
fn level_of(combo: &[(&str, &(String, Level))], n: &str) -> Option<Level> {
    combo
        .iter()
        .find(|(k, _)| *k == n)
        .map(|(_, (_, l))| l.clone())
}

/// Reads a combination's factor values into a cell configuration.
fn read_cell(ctx: &Ctx, combo: &[(&str, &(String, Level))]) -> Result<CellConfig, SpecError> {
    let get = |n: &str| level_of(combo, n);
    let text = |n: &str| match get(n) {
        Some(Level::Text(s)) => Some(s),
        _ => None,
    };
    let count = |n: &str| match get(n) {
        Some(Level::Count(c)) => Some(c),
        _ => None,
    };
    let flag = |n: &str, default: bool| match get(n) {
        Some(Level::Flag(b)) => b,
        _ => default,
    };
    let time = |n: &str| match get(n) {
        Some(Level::Time(d)) => Some(d),
        _ => None,
    };
    let protocol = text("protocol")
        .and_then(|s| Protocol::parse(&s))
        .ok_or_else(|| ctx.whole("a cell has no protocol"))?;
    let cfg = CellConfig {
        origin: text("origin").unwrap_or_else(|| super::origins::BUILTIN.to_string()),
        protocol,
        profile: text("profile").filter(|p| p != "none"),
        loss: text("loss").filter(|l| {
            let t = l.trim().trim_end_matches('%');
            t.parse::<f64>().map(|x| x > 0.0).unwrap_or(true)
        }),
        rtt: time("rtt"),
        down: text("down"),
        up: text("up"),
        jitter: time("jitter").filter(|j| !j.is_zero()),
        queue: text("queue"),
        cc_server: text("cc_server")
            .or_else(|| text("cc"))
            .and_then(|c| CongestionControl::parse(&c)),
        cc_client: text("cc_client")
            .or_else(|| text("cc"))
            .and_then(|c| CongestionControl::parse(&c)),
        scheduler: text("scheduler").and_then(|s| Scheduler::parse(&s).ok()),
        notsent_lowat: match get("notsent_lowat") {
            Some(Level::Bytes(n)) => u32::try_from(n).ok().map(Lowat::Bytes),
            Some(_) => Some(Lowat::Off),
            None => None,
        },
        header_table: match get("header_table") {
            Some(Level::Bytes(n)) => Some(n),
            _ => None,
        },
        delay: time("delay").unwrap_or_default(),
        resources: count("resources").unwrap_or(1),
        size: match get("size") {
            Some(Level::Bytes(b)) => b,
            _ => 0,
        },
        push: flag("push", false),
        keepalive: flag("keepalive", true),
        tls_resume: flag("tls_resume", false),
        zero_rtt: flag("zero_rtt", false),
        repeat_view: flag("repeat_view", false),
        discovery: text("discovery")
            .and_then(|d| hxlab_contract::Discovery::parse(&d))
            .unwrap_or_default(),
        browser: text("browser")
            .and_then(|b| b.parse().ok())
            .unwrap_or_default(),
        clients: count("clients").unwrap_or(1),
        streams: count("streams").unwrap_or(1),
        requests: count("requests").unwrap_or(0),
        duration: time("duration"),
    };
    Ok(cfg)
}

/// Refuses a cell that cannot run, naming where its factor was written.
fn check_cell(
    workload: Workload,
    ctx: &Ctx,
    m: &BTreeMap<String, FactorSpec>,
    combo: &[(&str, &(String, Level))],
    key: &str,
    cfg: &CellConfig,
) -> Result<(), SpecError> {
    let get = |n: &str| level_of(combo, n);
    let place = |n: &str| {
        m.get(n)
            .map(|s| s.span.clone())
            .unwrap_or(Place::Option(n.to_string()))
    };
    check_origin(ctx, &place, key, cfg)?;
    for end in ["cc_server", "cc_client"] {
        if get("cc").is_some() && get(end).is_some() {
            return Err(ctx.at(
                &place(end),
                format!("cell `{key}`: `cc` sets both ends; give `cc`, or `cc_server` and `cc_client`, not both"),
            ));
        }
    }
    if cfg.push && !matches!(cfg.protocol, Protocol::H2 | Protocol::H2c) {
        return Err(ctx.at(
            &place("push"),
            format!(
                "impossible cell `{key}`: server push exists only in HTTP/2 ({} has none); limit push to h2/h2c with a [[matrix]] block",
                cfg.protocol.name()
            ),
        ));
    }
    if (cfg.tls_resume || cfg.zero_rtt) && !cfg.protocol.tls() {
        let f = if cfg.zero_rtt {
            "zero_rtt"
        } else {
            "tls_resume"
        };
        return Err(ctx.at(
            &place(f),
            format!("impossible cell `{key}`: {f} needs TLS, and {} is plain text; use it with h1-tls, h2 or h3", cfg.protocol.name()),
        ));
    }
    if !cfg.keepalive && cfg.protocol.multiplexed() {
        return Err(ctx.at(
            &place("keepalive"),
            format!("impossible cell `{key}`: keepalive = false means one request per connection, which only HTTP/1.1 does; limit it to h1/h1-tls"),
        ));
    }
    if cfg.push && cfg.resources < 1 {
        return Err(ctx.at(
            &place("push"),
            format!("impossible cell `{key}`: push needs at least one resource"),
        ));
    }
    if cfg.discovery.discovers() && workload != Workload::Browser {
        return Err(ctx.at(
            &place("discovery"),
            format!("cell `{key}`: discovery is how a browser reaches h3; it needs workload = \"browser\""),
        ));
    }
    if get("browser").is_some() && workload != Workload::Browser {
        return Err(ctx.at(
            &place("browser"),
            format!("cell `{key}`: browser is the engine that loads a page; it needs workload = \"browser\""),
        ));
    }
    if cfg.repeat_view && workload != Workload::Browser {
        return Err(ctx.at(
            &place("repeat_view"),
            format!("cell `{key}`: repeat_view is a page load's second view; it needs workload = \"browser\""),
        ));
    }
    if workload == Workload::Browser {
        if !matches!(cfg.protocol, Protocol::H1Tls | Protocol::H2 | Protocol::H3) {
            return Err(ctx.at(
                &place("protocol"),
                format!("impossible cell `{key}`: browsers speak HTTP/2 only over TLS and the browser workload loads https:// pages; use h1-tls, h2 or h3"),
            ));
        }
        for (f, set) in [
            (
                "cc",
                get("cc").is_some_and(|l| l != Level::Text("default".into())),
            ),
            ("cc_client", cfg.cc_client.is_some()),
            ("keepalive", !cfg.keepalive),
            ("tls_resume", cfg.tls_resume),
            ("zero_rtt", cfg.zero_rtt),
        ] {
            if set {
                return Err(ctx.at(&place(f), format!("cell `{key}`: `{f}` cannot be set for a real browser (workload = \"browser\"); use the resources workload")));
            }
        }
    }
    // The same bounds `hxlab link` and `hxlab page` hold a link to.
    if let Err(e) = cfg.link_config() {
        return Err(ctx.whole(format!("cell `{key}`: {e}")));
    }
    if cfg.duration.is_some() && cfg.requests > 0 {
        return Err(ctx.at(
            &place("duration"),
            format!("cell `{key}`: give `requests` or `duration`, not both"),
        ));
    }
    Ok(())
}

/// A cell's origin must be defined, and only the built-in origin can delay its answers,
/// push, or have its congestion control set by the lab.
fn check_origin(
    ctx: &Ctx,
    place: &dyn Fn(&str) -> Place,
    key: &str,
    cfg: &CellConfig,
) -> Result<(), SpecError> {
    if cfg.origin == BUILTIN {
        return Ok(());
    }
    let Some(def) = ctx.origins.get(&cfg.origin) else {
        let known: Vec<String> = std::iter::once(BUILTIN.to_string())
            .chain(ctx.origins.keys().cloned())
            .collect();
        return Err(ctx.at(
            &place("origin"),
            format!(
                "origin {:?} is not defined; add an [origins.{}] table (known: {})",
                cfg.origin,
                cfg.origin,
                known.join(", ")
            ),
        ));
    };
    let name = &def.name;
    if !cfg.delay.is_zero() {
        return Err(ctx.at(
            &place("delay"),
            format!("cell `{key}`: a server delay needs an origin that can delay its answers (hxlab); {name} serves files as they are, so give it delay = \"0ms\" (e.g. a [[matrix]] block for origin = \"hxlab\")"),
        ));
    }
    if cfg.push {
        return Err(ctx.at(
            &place("push"),
            format!("cell `{key}`: server push of the page's resources is hxlab's own origin's; {name} is not configured for it"),
        ));
    }
    if cfg.cc_server.is_some() {
        let f = if place("cc_server").is_option() {
            "cc"
        } else {
            "cc_server"
        };
        return Err(ctx.at(
            &place(f),
            format!("cell `{key}`: the lab cannot set {name}'s congestion control (it runs the system's default, which the report states); leave `cc`/`cc_server` to the hxlab origin and set `cc_client` alone if you must"),
        ));
    }
    for (f, set) in [
        ("scheduler", cfg.scheduler.is_some()),
        ("notsent_lowat", cfg.notsent_lowat.is_some()),
        ("header_table", cfg.header_table.is_some()),
    ] {
        if set {
            return Err(ctx.at(
                &place(f),
                format!("cell `{key}`: `{f}` sets how hxlab's own origin sends, which only that origin lets the lab set; {name} keeps its own, so its cells would not be like for like with the ones they are compared with; give `{f}` to the cells of origin = \"hxlab\" alone (a [[matrix]] block)"),
            ));
        }
    }
    Ok(())
}
