//! What went wrong with a page's resources in one load, kept beside the figures instead of
//! voiding the run: failed requests, 4xx/5xx answers and transfers still open when the page
//! had loaded, counted and the first ones named with their party (the page's own site or
//! another).

use serde::{Deserialize, Serialize};

/// Resources named per run (the counts go on past it).
pub const MAX_NAMED: usize = 5;

/// Whose a resource is, seen from the page: its own site or another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Party {
    /// The page's own site ([`same_site`]).
    First,
    /// Any other site.
    Third,
}

impl Party {
    /// How it is written beside a resource: `first party`, `third party`.
    pub fn label(self) -> &'static str {
        match self {
            Party::First => "first party",
            Party::Third => "third party",
        }
    }
}

/// What became of a resource that did not load cleanly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The request failed without an answer (`net::ERR_…`).
    Failed,
    /// The server answered with a status of 400 or more.
    HttpError,
    /// The transfer was still open when the page was measured (5 s after the load event, or
    /// when a load event that never came stopped being waited for).
    Unfinished,
}

impl ProblemKind {
    /// The verb a sentence uses: `failed`, `answered 4xx/5xx`, `did not finish`.
    pub fn verb(self) -> &'static str {
        match self {
            ProblemKind::Failed => "failed",
            ProblemKind::HttpError => "answered 4xx/5xx",
            ProblemKind::Unfinished => "did not finish",
        }
    }
}

/// One resource that did not load cleanly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProblemResource {
    /// Request method.
    pub method: String,
    /// Request URL.
    pub url: String,
    /// What became of it.
    pub kind: ProblemKind,
    /// The browser's error (`net::ERR_NAME_NOT_RESOLVED`) or the status (`404`).
    pub detail: String,
    /// Whose it is.
    pub party: Party,
}

impl ProblemResource {
    /// `GET https://api.example/x (net::ERR_NAME_NOT_RESOLVED, third party)`.
    pub fn text(&self) -> String {
        format!(
            "{} {} ({}, {})",
            self.method,
            self.url,
            self.detail,
            self.party.label()
        )
    }
}

/// The resources of one page load that failed, answered 4xx/5xx or never finished.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ResourceProblems {
    /// Requests that failed without an answer.
    pub failed: u32,
    /// Answers with a status of 400 or more.
    pub http_errors: u32,
    /// Transfers still open when the page had loaded.
    pub unfinished: u32,
    /// Of all of them, those of the page's own site.
    pub first_party: u32,
    /// Of all of them, those of other sites.
    pub third_party: u32,
    /// The first [`MAX_NAMED`] of them, in request order.
    pub first: Vec<ProblemResource>,
}

impl ResourceProblems {
    /// Counts one resource that did not load cleanly.
    pub fn add(&mut self, resource: ProblemResource) {
        match resource.kind {
            ProblemKind::Failed => self.failed += 1,
            ProblemKind::HttpError => self.http_errors += 1,
            ProblemKind::Unfinished => self.unfinished += 1,
        }
        match resource.party {
            Party::First => self.first_party += 1,
            Party::Third => self.third_party += 1,
        }
        if self.first.len() < MAX_NAMED {
            self.first.push(resource);
        }
    }

    /// Resources counted.
    pub fn total(&self) -> u32 {
        self.failed + self.http_errors + self.unfinished
    }

    /// Nothing went wrong.
    pub fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// One line: `1 failed, 2 answered 4xx/5xx (1 first party, 2 third party); first: GET
    /// https://api.example/x (net::ERR_NAME_NOT_RESOLVED, third party)`; None when empty.
    pub fn text(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let counts: Vec<String> = [
            (self.failed, ProblemKind::Failed),
            (self.http_errors, ProblemKind::HttpError),
            (self.unfinished, ProblemKind::Unfinished),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, k)| format!("{n} {}", k.verb()))
        .collect();
        let mut line = format!(
            "{} ({} first party, {} third party)",
            counts.join(", "),
            self.first_party,
            self.third_party
        );
        if let Some(first) = self.first.first() {
            line.push_str(&format!("; first: {}", first.text()));
        }
        Some(line)
    }

    /// The requests named, `METHOD URL`, in order: what two loads' problems are compared by.
    pub fn named(&self) -> Vec<String> {
        self.first
            .iter()
            .map(|p| format!("{} {}", p.method, p.url))
            .collect()
    }
}

/// What one kind of problem adds up to over a series of loads.
#[derive(Clone, Debug, Default, PartialEq)]
struct KindAcross {
    /// Loads with at least one.
    runs_with: usize,
    /// The fewest and the most in one of those loads.
    least: u32,
    most: u32,
    /// The first one named.
    example: Option<ProblemResource>,
}

/// What a series of loads (a page's runs, a cell's repetitions) had go wrong, kind by kind:
/// in how many loads, how many resources each, and the first one named. Its sentences are
/// the ones `hxlab page` and the verdict print: `1 resource failed in 5 of 5 runs: GET
/// https://api.example/x (net::ERR_NAME_NOT_RESOLVED, third party)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProblemsAcross {
    /// Loads added.
    pub runs: usize,
    kinds: std::collections::BTreeMap<ProblemKind, KindAcross>,
    /// Every request named, `METHOD URL`, with what became of it.
    named: std::collections::BTreeSet<(String, ProblemKind)>,
}

impl ProblemsAcross {
    /// Adds one load's problems.
    pub fn add(&mut self, p: &ResourceProblems) {
        self.runs += 1;
        for (kind, n) in [
            (ProblemKind::Failed, p.failed),
            (ProblemKind::HttpError, p.http_errors),
            (ProblemKind::Unfinished, p.unfinished),
        ] {
            if n == 0 {
                continue;
            }
            let k = self.kinds.entry(kind).or_default();
            k.least = if k.runs_with == 0 { n } else { k.least.min(n) };
            k.most = k.most.max(n);
            k.runs_with += 1;
            if k.example.is_none() {
                k.example = p.first.iter().find(|r| r.kind == kind).cloned();
            }
        }
        for r in &p.first {
            self.named
                .insert((format!("{} {}", r.method, r.url), r.kind));
        }
    }

    /// Nothing went wrong in any load.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// One sentence per kind, `what` naming the loads (`runs`, `repetitions`).
    pub fn lines(&self, what: &str) -> Vec<String> {
        self.kinds
            .iter()
            .map(|(kind, k)| {
                let count = if k.least == k.most {
                    k.most.to_string()
                } else {
                    format!("{}–{}", k.least, k.most)
                };
                let noun = if k.most == 1 { "resource" } else { "resources" };
                let example = k
                    .example
                    .as_ref()
                    .map(|e| format!(": {}", e.text()))
                    .unwrap_or_default();
                format!(
                    "{count} {noun} {} in {} of {} {what}{example}",
                    kind.verb(),
                    k.runs_with,
                    self.runs
                )
            })
            .collect()
    }

    /// Whether two series had different requests go wrong (or the same ones go wrong in a
    /// different way).
    pub fn differs_from(&self, other: &ProblemsAcross) -> bool {
        self.named != other.named
    }

    /// A short account for a comparison: `none`, or `1 failed in 2 of 2 (GET https://…)`.
    pub fn brief(&self) -> String {
        if self.is_empty() {
            return "none".into();
        }
        self.kinds
            .iter()
            .map(|(kind, k)| {
                let url = k
                    .example
                    .as_ref()
                    .map(|e| format!(" ({} {})", e.method, e.url))
                    .unwrap_or_default();
                format!(
                    "{} {} in {} of {}{url}",
                    k.most,
                    kind.verb(),
                    k.runs_with,
                    self.runs
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The host of an http(s) URL, lower case, without port or brackets; None for anything else.
pub fn url_host(url: &str) -> Option<String> {
    crate::har::split_url(url).map(|u| u.origin.host)
}

/// A host's site, as browsers draw the line between first and third party: an address as
/// it is, else its registrable domain by the Public Suffix List (the `psl` crate's copy,
/// private suffixes included, so `a.github.io` and `b.github.io` are two sites while
/// `a.example.co.uk` and `b.example.co.uk` are one). A name under an unlisted suffix keeps
/// its last two labels (`localhost` too: `a.localhost` and `b.localhost` are two sites); a
/// name that is a public suffix itself is its own site.
pub fn site_of(host: &str) -> String {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    if host.parse::<std::net::IpAddr>().is_ok() {
        return host;
    }
    match psl::domain_str(&host) {
        Some(d) => d.to_string(),
        None => host,
    }
}

/// Whether two hosts are of one site ([`site_of`]).
pub fn same_site(a: &str, b: &str) -> bool {
    site_of(a) == site_of(b)
}

/// The party of `url` seen from a page at `page_url`.
pub fn party_of(url: &str, page_url: &str) -> Party {
    match (url_host(url), url_host(page_url)) {
        (Some(a), Some(b)) if same_site(&a, &b) => Party::First,
        _ => Party::Third,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sites_and_parties() {
        assert_eq!(site_of("www.example.com"), "example.com");
        assert_eq!(site_of("a.b.example.co.uk"), "example.co.uk");
        assert_eq!(site_of("127.0.0.1"), "127.0.0.1");
        assert_eq!(site_of("static.localhost"), "static.localhost");
        // The list, not a guess from label lengths: a three-letter second level that is no
        // suffix, private suffixes, and a suffix on its own.
        assert_eq!(site_of("www.abc.xyz.de"), "xyz.de");
        assert_eq!(site_of("a.foo.blogspot.com"), "foo.blogspot.com");
        assert_eq!(site_of("cdn.example.com.au"), "example.com.au");
        assert_eq!(site_of("x.user.github.io"), "user.github.io");
        assert!(!same_site("a.github.io", "b.github.io"));
        assert!(same_site("a.example.co.uk", "b.example.co.uk"));
        assert_eq!(site_of("co.uk"), "co.uk");
        assert_eq!(site_of("WWW.Example.COM."), "example.com");
        assert_eq!(
            party_of("https://cdn.example.com/x", "https://www.example.com/"),
            Party::First
        );
        assert_eq!(
            party_of("https://api.hxlab.invalid/x", "http://pages.localhost:80/"),
            Party::Third
        );
    }

    fn failed(url: &str) -> ResourceProblems {
        let mut p = ResourceProblems::default();
        p.add(ProblemResource {
            method: "GET".into(),
            url: url.into(),
            kind: ProblemKind::Failed,
            detail: "net::ERR_NAME_NOT_RESOLVED".into(),
            party: Party::Third,
        });
        p
    }

    #[test]
    fn problems_add_up_across_runs() {
        let mut all = ProblemsAcross::default();
        let mut none = ProblemsAcross::default();
        for _ in 0..5 {
            all.add(&failed("https://api.example/x"));
            none.add(&ResourceProblems::default());
        }
        assert_eq!(
            all.lines("runs"),
            vec!["1 resource failed in 5 of 5 runs: GET https://api.example/x (net::ERR_NAME_NOT_RESOLVED, third party)"]
        );
        assert!(none.is_empty() && none.lines("runs").is_empty());
        assert!(all.differs_from(&none));
        let mut same = ProblemsAcross::default();
        same.add(&failed("https://api.example/x"));
        assert!(!all.differs_from(&same));
        assert_eq!(
            same.brief(),
            "1 failed in 1 of 1 (GET https://api.example/x)"
        );
    }

    #[test]
    fn counts_every_resource_and_names_the_first() {
        let mut p = ResourceProblems::default();
        assert_eq!(p.text(), None);
        for i in 0..7 {
            p.add(ProblemResource {
                method: "GET".into(),
                url: format!("https://api.example/{i}"),
                kind: if i == 0 {
                    ProblemKind::Failed
                } else {
                    ProblemKind::HttpError
                },
                detail: if i == 0 {
                    "net::ERR_NAME_NOT_RESOLVED".into()
                } else {
                    "404".into()
                },
                party: Party::Third,
            });
        }
        assert_eq!((p.failed, p.http_errors, p.total()), (1, 6, 7));
        assert_eq!(p.first.len(), MAX_NAMED);
        assert_eq!(
            p.text().unwrap_or_default(),
            "1 failed, 6 answered 4xx/5xx (0 first party, 7 third party); first: GET https://api.example/0 (net::ERR_NAME_NOT_RESOLVED, third party)"
        );
    }
}
