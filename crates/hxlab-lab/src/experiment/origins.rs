//! Origins: the servers an experiment measures. `hxlab` (the built-in `hxlab serve`) is
//! the default; an `[origins.NAME]` table defines another, of one of two kinds:
//!
//! - **command**: the lab starts it and stops it — a command line and config file templates
//!   rendered into the origin's own directory, with `{{placeholders}}` for the ports it must
//!   listen on, the certificate and key the lab made and the document root the lab fills.
//! - **url**: an origin the lab does not run (a staging host, a CDN edge) — base URLs per
//!   protocol and a path template per workload.
//!
//! Everything here is checked before anything runs, with file:line:column.

use super::{Ctx, Place, Protocol, SpecError};
use hxlab_report::Workload;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use toml::Spanned;

/// The built-in origin's name.
pub const BUILTIN: &str = "hxlab";

/// Placeholders a command origin's command line and files may use.
pub const COMMAND_PLACEHOLDERS: [(&str, &str); 9] = [
    (
        "dir",
        "the origin's own directory (config files are written there)",
    ),
    ("www", "the document root the lab fills"),
    ("cert", "the certificate (PEM) the lab made"),
    ("key", "its private key (PKCS#8 PEM)"),
    (
        "bind",
        "the address to listen on (127.0.0.1, or 0.0.0.0 when a link reaches it)",
    ),
    (
        "tls_port",
        "TCP port for TLS (h1-tls, h2 by ALPN); the same UDP port for h3",
    ),
    (
        "h3_port",
        "the UDP port for h3 (the same number as tls_port)",
    ),
    (
        "plain_port",
        "TCP port for cleartext HTTP/1.1 (and h2c if h2c_port is not used)",
    ),
    (
        "h2c_port",
        "TCP port for cleartext HTTP/2 with prior knowledge",
    ),
];

/// Placeholders a url origin's path templates may use.
pub const PATH_PLACEHOLDERS: [&str; 2] = ["size", "resources"];

/// How long a command origin may take to listen on every port, unless its table says.
pub const READY_WITHIN: Duration = Duration::from_secs(20);

/// One origin an experiment names.
#[derive(Clone, Debug, PartialEq)]
pub struct OriginDef {
    /// Its name (`hxlab`, or the NAME of `[origins.NAME]`).
    pub name: String,
    /// The protocols it speaks; cells of others are skipped with the reason.
    pub protocols: Vec<Protocol>,
    /// What it is.
    pub kind: OriginKind,
}

/// The kinds of origin.
#[derive(Clone, Debug, PartialEq)]
pub enum OriginKind {
    /// `hxlab serve`, started by the lab.
    Builtin,
    /// A server the lab starts from a command line and config templates.
    Command(CommandOrigin),
    /// A server the lab does not run, reached by URL.
    Url(UrlOrigin),
}

/// A server the lab starts and stops.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandOrigin {
    /// Program and arguments, with `{{placeholders}}`.
    pub command: Vec<String>,
    /// Config files to write into the origin's directory: relative name → template.
    pub files: BTreeMap<String, String>,
    /// Extra environment for the server, with `{{placeholders}}` in the values.
    pub env: BTreeMap<String, String>,
    /// Longest wait for every port to accept.
    pub ready_within: Duration,
}

impl CommandOrigin {
    /// True when the command line, a file or an environment value uses `{{name}}`.
    pub fn uses(&self, name: &str) -> bool {
        let p = format!("{{{{{name}}}}}");
        self.command.iter().any(|a| a.contains(&p))
            || self.files.values().any(|t| t.contains(&p))
            || self.env.values().any(|t| t.contains(&p))
    }
}

/// A server reached by URL.
#[derive(Clone, Debug, PartialEq)]
pub struct UrlOrigin {
    /// Base URL (scheme, host, port, optional path prefix) per protocol.
    pub urls: BTreeMap<Protocol, String>,
    /// Path template per workload, with `{{size}}` and `{{resources}}`.
    pub paths: BTreeMap<Workload, String>,
    /// Accept any certificate (`hxlab load -k`).
    pub insecure: bool,
    /// Trust this CA certificate (`hxlab load --cacert`).
    pub cacert: Option<PathBuf>,
}

impl UrlOrigin {
    /// The URL of `workload`'s resource for a cell of `size` bytes and `resources`
    /// resources, over `proto`.
    pub fn url(
        &self,
        proto: Protocol,
        workload: Workload,
        size: u64,
        resources: u64,
    ) -> Option<String> {
        let base = self.urls.get(&proto)?;
        let path = self.paths.get(&workload).map(String::as_str).unwrap_or("/");
        Some(resource_url(base, path, size, resources))
    }
}

/// `base` (scheme, host, port, optional prefix) joined with a path template filled for a
/// cell of `size` bytes and `resources` resources.
pub fn resource_url(base: &str, path: &str, size: u64, resources: u64) -> String {
    let path = path
        .replace("{{size}}", &size.to_string())
        .replace("{{resources}}", &resources.to_string());
    format!("{}{path}", base.trim_end_matches('/'))
}

/// The default path of each workload: the layout the lab writes into a command origin's
/// document root (and `hxlab serve` answers too).
pub fn default_path(workload: Workload) -> &'static str {
    match workload {
        Workload::Resources | Workload::Throughput => "/bytes/{{size}}",
        Workload::Browser => "/page-{{resources}}-{{size}}.html",
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOrigin {
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    files: BTreeMap<String, String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    ready_timeout: Option<Spanned<String>>,
    protocols: Option<Spanned<Vec<String>>>,
    url: Option<Spanned<String>>,
    #[serde(default)]
    urls: BTreeMap<String, Spanned<String>>,
    path: Option<Spanned<String>>,
    #[serde(default)]
    paths: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    insecure: bool,
    cacert: Option<String>,
}

/// Reads the `[origins.NAME]` tables.
pub(super) fn read_origins(
    ctx: &Ctx,
    raw: &BTreeMap<String, RawOrigin>,
    span: Option<std::ops::Range<usize>>,
) -> Result<BTreeMap<String, OriginDef>, SpecError> {
    let mut out = BTreeMap::new();
    for (n, table) in raw {
        let place = span
            .clone()
            .map(Place::File)
            .unwrap_or_else(|| Place::Option(format!("[origins.{n}]")));
        check_name(n).map_err(|m| ctx.at(&place, m))?;
        if n == BUILTIN {
            return Err(ctx.at(&place, "[origins.hxlab]: `hxlab` is the built-in origin (hxlab serve) and cannot be redefined; choose another name"));
        }
        let def = read_origin(ctx, n, &place, table)?;
        out.insert(n.clone(), def);
    }
    Ok(out)
}

/// An origin name: letters, digits, `-`, `_` and `.`.
pub(super) fn check_name(n: &str) -> Result<(), String> {
    if n.is_empty()
        || n.len() > 64
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "origin name {n:?}: use 1 to 64 letters, digits, `-`, `_` or `.`"
        ));
    }
    Ok(())
}

fn read_origin(
    ctx: &Ctx,
    name: &str,
    place: &Place,
    t: &RawOrigin,
) -> Result<OriginDef, SpecError> {
    let at = |p: Option<std::ops::Range<usize>>, m: String| {
        ctx.at(&p.map(Place::File).unwrap_or_else(|| place.clone()), m)
    };
    let protocols = match &t.protocols {
        Some(ps) => {
            let mut v = Vec::new();
            for s in ps.get_ref() {
                let p = Protocol::parse(s).ok_or_else(|| {
                    at(Some(ps.span()), format!("[origins.{name}] protocols: unknown protocol {s:?}; expected h1, h1-tls, h2, h2c or h3"))
                })?;
                if !v.contains(&p) {
                    v.push(p);
                }
            }
            if v.is_empty() {
                return Err(at(
                    Some(ps.span()),
                    format!("[origins.{name}] protocols: give at least one"),
                ));
            }
            Some(v)
        }
        None => None,
    };
    let is_url = t.url.is_some() || !t.urls.is_empty();
    match (&t.command, is_url) {
        (Some(_), true) => Err(at(None, format!("[origins.{name}]: give `command` (a server the lab starts) or `url`/`urls` (one it does not), not both"))),
        (None, false) => Err(at(None, format!("[origins.{name}]: give `command` (a server the lab starts, with `files`) or `url` (one it does not)"))),
        (Some(cmd), false) => {
            let protocols = protocols.ok_or_else(|| at(None, format!("[origins.{name}]: a command origin declares the `protocols` it speaks, e.g. protocols = [\"h1\", \"h1-tls\", \"h2\"]")))?;
            let c = read_command(name, cmd, t).map_err(|(span, m)| at(span, m))?;
            check_ports(name, &c, &protocols).map_err(|m| at(Some(cmd.span()), m))?;
            Ok(OriginDef {
                name: name.to_string(),
                protocols,
                kind: OriginKind::Command(c),
            })
        }
        (None, true) => {
            let (u, derived) = read_url(name, t).map_err(|(span, m)| at(span, m))?;
            let protocols = protocols.unwrap_or(derived);
            for p in &protocols {
                if !u.urls.contains_key(p) {
                    return Err(at(t.protocols.as_ref().map(Spanned::span), format!("[origins.{name}]: {} is listed in `protocols` but no URL serves it ({})", p.name(), url_rule())));
                }
            }
            Ok(OriginDef {
                name: name.to_string(),
                protocols,
                kind: OriginKind::Url(u),
            })
        }
    }
}

type Refusal = (Option<std::ops::Range<usize>>, String);

fn read_command(
    name: &str,
    cmd: &Spanned<Vec<String>>,
    t: &RawOrigin,
) -> Result<CommandOrigin, Refusal> {
    let span = Some(cmd.span());
    if cmd.get_ref().first().is_none_or(|p| p.trim().is_empty()) {
        return Err((span, format!("[origins.{name}] command: give the program and its arguments, e.g. [\"nginx\", \"-c\", \"{{{{dir}}}}/nginx.conf\"]")));
    }
    if t.path.is_some() || !t.paths.is_empty() || t.insecure || t.cacert.is_some() {
        return Err((span, format!("[origins.{name}]: `path`, `paths`, `insecure` and `cacert` belong to url origins; a command origin is reached with the lab's own certificate and document root")));
    }
    let known: Vec<&str> = COMMAND_PLACEHOLDERS.iter().map(|p| p.0).collect();
    for a in cmd.get_ref() {
        check_placeholders(a, &known)
            .map_err(|m| (span.clone(), format!("[origins.{name}] command: {m}")))?;
    }
    for (file, text) in &t.files {
        check_file_name(file)
            .map_err(|m| (span.clone(), format!("[origins.{name}] files: {m}")))?;
        check_placeholders(text, &known)
            .map_err(|m| (span.clone(), format!("[origins.{name}] file {file:?}: {m}")))?;
    }
    for (k, v) in &t.env {
        if k.is_empty() || k.contains(['=', '\0']) {
            return Err((
                span,
                format!("[origins.{name}] env: {k:?} is not a variable name"),
            ));
        }
        check_placeholders(v, &known)
            .map_err(|m| (span.clone(), format!("[origins.{name}] env {k}: {m}")))?;
    }
    let ready_within = match &t.ready_timeout {
        Some(s) => {
            let d = hxlab_core::parse_duration(s.get_ref()).map_err(|e| {
                (
                    Some(s.span()),
                    format!("[origins.{name}] ready_timeout: {e}"),
                )
            })?;
            if d.is_zero() || d > Duration::from_secs(600) {
                return Err((
                    Some(s.span()),
                    format!("[origins.{name}] ready_timeout: between 1ms and 10 minutes"),
                ));
            }
            d
        }
        None => READY_WITHIN,
    };
    Ok(CommandOrigin {
        command: cmd.get_ref().clone(),
        files: t.files.clone(),
        env: t.env.clone(),
        ready_within,
    })
}

/// Every protocol a command origin declares needs a port placeholder it listens on.
fn check_ports(name: &str, c: &CommandOrigin, protocols: &[Protocol]) -> Result<(), String> {
    for p in protocols {
        let ok = match p {
            Protocol::H1 => c.uses("plain_port"),
            Protocol::H2c => c.uses("plain_port") || c.uses("h2c_port"),
            Protocol::H1Tls | Protocol::H2 => c.uses("tls_port"),
            Protocol::H3 => c.uses("tls_port") || c.uses("h3_port"),
        };
        if !ok {
            let want = match p {
                Protocol::H1 => "{{plain_port}}",
                Protocol::H2c => "{{h2c_port}} or {{plain_port}}",
                Protocol::H1Tls | Protocol::H2 => "{{tls_port}}",
                Protocol::H3 => "{{h3_port}} or {{tls_port}}",
            };
            return Err(format!(
                "[origins.{name}] declares {} but neither its command nor its files listen on {want}",
                p.name()
            ));
        }
    }
    Ok(())
}

fn url_rule() -> &'static str {
    "`url` serves h1-tls, h2 and h3 when it is https:// and h1 and h2c when it is http://; `urls.PROTOCOL` sets one protocol's base"
}

fn read_url(name: &str, t: &RawOrigin) -> Result<(UrlOrigin, Vec<Protocol>), Refusal> {
    if !t.files.is_empty() || !t.env.is_empty() || t.ready_timeout.is_some() {
        return Err((None, format!("[origins.{name}]: `files`, `env` and `ready_timeout` belong to command origins; a url origin is not started by the lab")));
    }
    let mut urls = BTreeMap::new();
    let mut derived = Vec::new();
    if let Some(u) = &t.url {
        let https = check_base(u.get_ref())
            .map_err(|m| (Some(u.span()), format!("[origins.{name}] url: {m}")))?;
        let ps: &[Protocol] = if https {
            &[Protocol::H1Tls, Protocol::H2, Protocol::H3]
        } else {
            &[Protocol::H1, Protocol::H2c]
        };
        for p in ps {
            urls.insert(*p, u.get_ref().clone());
            derived.push(*p);
        }
    }
    for (k, u) in &t.urls {
        let p = Protocol::parse(k).ok_or_else(|| (Some(u.span()), format!("[origins.{name}] urls: unknown protocol {k:?}; expected h1, h1-tls, h2, h2c or h3")))?;
        let https = check_base(u.get_ref())
            .map_err(|m| (Some(u.span()), format!("[origins.{name}] urls.{k}: {m}")))?;
        if https != p.tls() {
            return Err((
                Some(u.span()),
                format!(
                    "[origins.{name}] urls.{k}: {} runs {} TLS, so its URL starts with {}",
                    p.name(),
                    if p.tls() { "over" } else { "without" },
                    if p.tls() { "https://" } else { "http://" }
                ),
            ));
        }
        urls.insert(p, u.get_ref().clone());
        if !derived.contains(&p) {
            derived.push(p);
        }
    }
    let mut paths = BTreeMap::new();
    for w in [Workload::Resources, Workload::Throughput, Workload::Browser] {
        paths.insert(w, default_path(w).to_string());
    }
    if let Some(p) = &t.path {
        check_path(p.get_ref())
            .map_err(|m| (Some(p.span()), format!("[origins.{name}] path: {m}")))?;
        for v in paths.values_mut() {
            *v = p.get_ref().clone();
        }
    }
    for (k, p) in &t.paths {
        let w = match k.as_str() {
            "resources" => Workload::Resources,
            "throughput" => Workload::Throughput,
            "browser" => Workload::Browser,
            _ => return Err((Some(p.span()), format!("[origins.{name}] paths: unknown workload {k:?}; expected resources, throughput or browser"))),
        };
        check_path(p.get_ref())
            .map_err(|m| (Some(p.span()), format!("[origins.{name}] paths.{k}: {m}")))?;
        paths.insert(w, p.get_ref().clone());
    }
    derived.sort();
    Ok((
        UrlOrigin {
            urls,
            paths,
            insecure: t.insecure,
            cacert: t.cacert.as_ref().map(PathBuf::from),
        },
        derived,
    ))
}

/// A base URL: http(s)://host[:port][/prefix], nothing after the path. True for https.
pub(super) fn check_base(u: &str) -> Result<bool, String> {
    let (https, rest) = if let Some(r) = u.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = u.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(format!(
            "{u:?}: expected http://HOST[:PORT] or https://HOST[:PORT]"
        ));
    };
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() || host.contains('@') {
        return Err(format!("{u:?}: no host"));
    }
    if rest.contains(['?', '#', ' ']) {
        return Err(format!(
            "{u:?}: a base URL has no query, fragment or spaces; put the path in `path`"
        ));
    }
    Ok(https)
}

pub(super) fn check_path(p: &str) -> Result<(), String> {
    if !p.starts_with('/') || p.contains([' ', '#', '\n']) {
        return Err(format!(
            "{p:?}: a path starts with `/` and has no spaces or fragment"
        ));
    }
    check_placeholders(p, &PATH_PLACEHOLDERS)
}

/// A config file name: relative, inside the origin's directory.
fn check_file_name(f: &str) -> Result<(), String> {
    let p = std::path::Path::new(f);
    if f.is_empty()
        || p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, std::path::Component::Normal(_)))
    {
        return Err(format!(
            "{f:?}: a file name relative to the origin's directory, without `..`"
        ));
    }
    Ok(())
}

/// Every `{{name}}` in `text` must be one of `known`.
fn check_placeholders(text: &str, known: &[&str]) -> Result<(), String> {
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        let after = &rest[i + 2..];
        let Some(j) = after.find("}}") else {
            return Err(format!("`{{{{` without `}}}}` in {:?}", cut(text)));
        };
        let name = after[..j].trim();
        if !known.contains(&name) {
            return Err(format!(
                "unknown placeholder {{{{{name}}}}}; known: {}",
                known
                    .iter()
                    .map(|k| format!("{{{{{k}}}}}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        rest = &after[j + 2..];
    }
    Ok(())
}

fn cut(s: &str) -> String {
    s.chars().take(60).collect()
}

/// Fills `{{name}}` placeholders from `values` (already checked: every name is known).
pub fn render(text: &str, values: &BTreeMap<&str, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("}}") {
            Some(j) => {
                let name = after[..j].trim();
                match values.get(name) {
                    Some(v) => out.push_str(v),
                    None => out.push_str(&rest[i..i + 4 + j]),
                }
                rest = &after[j + 2..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_render_and_unknown_ones_are_named() {
        let mut v = BTreeMap::new();
        v.insert("tls_port", "4433".to_string());
        v.insert("www", "/w".to_string());
        assert_eq!(
            render("listen {{tls_port}} ssl; root {{ www }}; events {}", &v),
            "listen 4433 ssl; root /w; events {}"
        );
        let e = check_placeholders("x {{tls_prot}}", &["tls_port"]).unwrap_err();
        assert!(e.contains("unknown placeholder {{tls_prot}}"), "{e}");
        assert!(check_placeholders("http { }", &["x"]).is_ok());
    }

    #[test]
    fn url_origins_build_urls_from_base_and_path() {
        let mut urls = BTreeMap::new();
        urls.insert(Protocol::H2, "https://edge.test:8443/prefix/".to_string());
        let mut paths = BTreeMap::new();
        paths.insert(
            Workload::Resources,
            "/r/{{size}}.bin?n={{resources}}".to_string(),
        );
        let u = UrlOrigin {
            urls,
            paths,
            insecure: false,
            cacert: None,
        };
        assert_eq!(
            u.url(Protocol::H2, Workload::Resources, 100, 6).as_deref(),
            Some("https://edge.test:8443/prefix/r/100.bin?n=6")
        );
        assert_eq!(u.url(Protocol::H3, Workload::Resources, 100, 6), None);
        assert!(check_base("ftp://x").is_err());
        assert!(check_base("https://x:1/p").unwrap());
        assert!(check_file_name("../etc/passwd").is_err());
        assert!(check_file_name("conf/nginx.conf").is_ok());
    }
}
