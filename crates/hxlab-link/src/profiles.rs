//! Published network profiles: Chrome DevTools' legacy and current presets, WebPageTest's
//! connectivity profiles and the lossy mobile profile of Facebook's Augmented Traffic Control,
//! with the sources' own numbers and units (converted in code; docs/profiles.md has the tables).
//!
//! Names: `family:name`, where family is `chrome-legacy`, `chrome` (current presets), `wpt`
//! (WebPageTest) or `atc` (Augmented Traffic Control), matched case-insensitively with spaces, `-` and `_` ignored in the name:
//! "Regular 2G", "regular-2g", "chrome-legacy:regular2g" are one profile. A bare name is fine
//! when only one family has it; "3G" (chrome and wpt) and "DSL" (chrome-legacy and wpt) need
//! the family, and a bare ambiguous name is an error listing the choices.

use crate::LinkError;
use std::time::Duration;

/// Where a profile comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Chrome DevTools legacy presets (kbit = 1024 bit; latency per request, used as RTT).
    ChromeLegacy,
    /// Chrome DevTools current presets (kbit = 1000 bit; target RTT).
    Chrome,
    /// WebPageTest connectivity profiles (kbit = 1000 bit; RTT).
    WebPageTest,
    /// Facebook's Augmented Traffic Control profiles (kbit = 1000 bit; one-way delays, loss).
    Atc,
}

impl Family {
    /// The prefix used in qualified names.
    pub fn prefix(self) -> &'static str {
        match self {
            Family::ChromeLegacy => "chrome-legacy",
            Family::Chrome => "chrome",
            Family::WebPageTest => "wpt",
            Family::Atc => "atc",
        }
    }

    /// The source file the numbers come from.
    pub fn source(self) -> &'static str {
        match self {
            Family::ChromeLegacy => {
                "Chrome DevTools legacy presets, ChromeDevTools/devtools-frontend front_end/components/NetworkConditionsSelector.js (latency ms per request, used here as RTT; kbit/s with 1 kbit = 1024 bit)"
            }
            Family::Chrome => {
                "Chrome DevTools current presets, devtools-frontend front_end/core/sdk/NetworkManager.ts (target RTT ms; DevTools' own request latency in brackets; kbit/s with 1 kbit = 1000 bit)"
            }
            Family::WebPageTest => {
                "WebPageTest connectivity profiles, catchpoint/WebPageTest www/settings/connectivity.ini.sample (RTT ms split half each way; kbit = 1000 bit)"
            }
            Family::Atc => {
                "Facebook Augmented Traffic Control, facebookarchive/augmented-traffic-control utils/profiles/*.json (one-way delays summed to the RTT, split half each way; random loss each way; kbit = 1000 bit)"
            }
        }
    }

    fn all() -> [Family; 4] {
        [
            Family::ChromeLegacy,
            Family::Chrome,
            Family::WebPageTest,
            Family::Atc,
        ]
    }
}

/// One published profile, numbers as the source gives them.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    /// Source family.
    pub family: Family,
    /// The name as the source writes it.
    pub name: &'static str,
    /// Round-trip time in ms (legacy Chrome: its per-request latency; current Chrome: the
    /// target RTT).
    pub rtt_ms: f64,
    /// DevTools' own request latency in ms for current Chrome presets (reference only).
    pub devtools_latency_ms: Option<f64>,
    /// Downlink in the source's kbit/s.
    pub down_kbit: f64,
    /// Uplink in the source's kbit/s.
    pub up_kbit: f64,
    /// Random loss probability (0..=1).
    pub loss: f64,
}

impl Profile {
    /// `family:name`, e.g. `wpt:3G`.
    pub fn qualified_name(&self) -> String {
        format!("{}:{}", self.family.prefix(), self.name)
    }

    /// Round-trip time.
    pub fn rtt(&self) -> Duration {
        Duration::from_secs_f64(self.rtt_ms / 1000.0)
    }

    fn bits_per_kbit(&self) -> f64 {
        match self.family {
            Family::ChromeLegacy => 1024.0,
            Family::Chrome | Family::WebPageTest | Family::Atc => 1000.0,
        }
    }

    /// Downlink in bits per second.
    pub fn down_bits_per_sec(&self) -> u64 {
        (self.down_kbit * self.bits_per_kbit()).round() as u64
    }

    /// Uplink in bits per second.
    pub fn up_bits_per_sec(&self) -> u64 {
        (self.up_kbit * self.bits_per_kbit()).round() as u64
    }
}

const fn p(
    family: Family,
    name: &'static str,
    rtt_ms: f64,
    down_kbit: f64,
    up_kbit: f64,
) -> Profile {
    Profile {
        family,
        name,
        rtt_ms,
        devtools_latency_ms: None,
        down_kbit,
        up_kbit,
        loss: 0.0,
    }
}

/// Every shipped profile, in the order of docs/profiles.md.
pub fn all() -> Vec<Profile> {
    use Family::*;
    let mut v = vec![
        p(ChromeLegacy, "GPRS", 500.0, 50.0, 20.0),
        p(ChromeLegacy, "Regular 2G", 300.0, 250.0, 50.0),
        p(ChromeLegacy, "Good 2G", 150.0, 450.0, 150.0),
        p(ChromeLegacy, "Regular 3G", 100.0, 750.0, 250.0),
        p(ChromeLegacy, "Good 3G", 40.0, 1536.0, 750.0),
        p(ChromeLegacy, "Regular 4G", 20.0, 4096.0, 3072.0),
        p(ChromeLegacy, "DSL", 5.0, 2048.0, 1024.0),
        p(ChromeLegacy, "WiFi", 2.0, 30720.0, 15360.0),
    ];
    for (name, rtt, devtools, down, up) in [
        ("3G", 400.0, 2000.0, 400.0, 400.0),
        ("Slow 4G", 150.0, 562.5, 1440.0, 675.0),
        ("Fast 4G", 60.0, 165.0, 8100.0, 1350.0),
    ] {
        let mut x = p(Chrome, name, rtt, down, up);
        x.devtools_latency_ms = Some(devtools);
        v.push(x);
    }
    v.extend([
        p(WebPageTest, "Dial", 120.0, 49.0, 30.0),
        p(WebPageTest, "2G", 800.0, 280.0, 256.0),
        p(WebPageTest, "Edge", 840.0, 240.0, 200.0),
        p(WebPageTest, "3GSlow", 400.0, 400.0, 400.0),
        p(WebPageTest, "3G", 300.0, 1600.0, 768.0),
        p(WebPageTest, "3GFast", 150.0, 1600.0, 768.0),
        p(WebPageTest, "4G", 170.0, 9000.0, 9000.0),
        p(WebPageTest, "4GFast", 40.0, 10240.0, 10240.0),
        p(WebPageTest, "LTE", 70.0, 12000.0, 12000.0),
        p(WebPageTest, "DSL", 50.0, 1500.0, 384.0),
        p(WebPageTest, "Cable", 28.0, 5000.0, 1000.0),
        p(WebPageTest, "FIOS", 4.0, 20000.0, 5000.0),
    ]);
    // "Edge - Lossy": 400 ms down and 440 ms up (an 840 ms round trip, modelled here as
    // 420 ms each way), 240/200 kbit/s, 1 % random loss each way: a lossy mobile link.
    let mut edge_lossy = p(Atc, "Edge Lossy", 840.0, 240.0, 200.0);
    edge_lossy.loss = 0.01;
    v.push(edge_lossy);
    v
}

fn normalise(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, ' ' | '-' | '_'))
        .flat_map(|c| c.to_lowercase())
        .collect()
}

/// Finds a profile by name (see the module docs for the scheme).
pub fn find(name: &str) -> Result<Profile, LinkError> {
    let profiles = all();
    let (family, bare) = match name.split_once(':') {
        Some((fam, rest)) => {
            let f = normalise(fam);
            let family = Family::all().into_iter().find(|x| normalise(x.prefix()) == f).ok_or_else(|| {
                LinkError::Config(format!(
                    "unknown profile family {fam:?} in {name:?}; families: chrome-legacy, chrome, wpt, atc"
                ))
            })?;
            (Some(family), rest)
        }
        None => (None, name),
    };
    let key = normalise(bare);
    let matches: Vec<&Profile> = profiles
        .iter()
        .filter(|p| family.is_none_or(|f| p.family == f) && normalise(p.name) == key)
        .collect();
    match matches.as_slice() {
        [one] => Ok((*one).clone()),
        [] => Err(LinkError::Config(format!(
            "unknown profile {name:?}; known: {}",
            profiles
                .iter()
                .map(|p| p.qualified_name())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        many => Err(LinkError::Config(format!(
            "profile {name:?} is ambiguous; say which: {}",
            many.iter()
                .map(|p| p.qualified_name())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The `--list-profiles` text: one line per profile, grouped by source, source cited.
pub fn listing() -> String {
    let mut out = String::new();
    out.push_str("Profiles (name matching: case-insensitive, spaces/-/_ ignored; prefix chrome-legacy:, chrome:, wpt: or atc: when a name is in two families).\nRTT is split half each way; rates are per direction.\n");
    let profiles = all();
    for fam in Family::all() {
        out.push_str(&format!("\n# {}\n", fam.source()));
        for p in profiles.iter().filter(|p| p.family == fam) {
            let devtools = p
                .devtools_latency_ms
                .map(|d| format!(" [DevTools latency {d} ms]"))
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<26} rtt {:>5} ms{}  down {:>6} kbit/s  up {:>6} kbit/s  loss {}%\n",
                p.qualified_name(),
                p.rtt_ms,
                devtools,
                p.down_kbit,
                p.up_kbit,
                p.loss * 100.0
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_loosely() {
        assert_eq!(find("Regular 2G").unwrap().name, "Regular 2G");
        assert_eq!(find("regular-2g").unwrap().name, "Regular 2G");
        assert_eq!(find("wpt:3G").unwrap().rtt_ms, 300.0);
        assert_eq!(find("chrome:3g").unwrap().rtt_ms, 400.0);
        assert_eq!(find("WPT:3gfast").unwrap().name, "3GFast");
        assert_eq!(find("Chrome-Legacy:dsl").unwrap().rtt_ms, 5.0);
        let e = find("3G").unwrap_err().to_string();
        assert!(
            e.contains("ambiguous") && e.contains("chrome:3G") && e.contains("wpt:3G"),
            "{e}"
        );
        let e = find("DSL").unwrap_err().to_string();
        assert!(
            e.contains("chrome-legacy:DSL") && e.contains("wpt:DSL"),
            "{e}"
        );
        let e = find("5G").unwrap_err().to_string();
        assert!(
            e.contains("unknown profile") && e.contains("wpt:LTE"),
            "{e}"
        );
        assert!(find("foo:3G").is_err());
    }

    #[test]
    fn every_profile_from_the_table_with_units_converted() {
        assert_eq!(all().len(), 8 + 3 + 12 + 1);
        let lossy = crate::LinkConfig::from_profile("atc:edge-lossy").unwrap();
        assert_eq!(lossy.down.delay, Duration::from_millis(420));
        assert_eq!(lossy.down.server, crate::config::Server::Rate(240_000));
        assert_eq!(lossy.up.server, crate::config::Server::Rate(200_000));
        assert_eq!(lossy.up.loss, crate::config::Loss::Random(0.01));
        assert_eq!(find("Edge Lossy").unwrap().family, Family::Atc);
        let good3g = find("Good 3G").unwrap();
        assert_eq!(good3g.down_bits_per_sec(), 1536 * 1024);
        let fast4g = find("Fast 4G").unwrap();
        assert_eq!(fast4g.down_bits_per_sec(), 8_100_000);
        assert_eq!(fast4g.devtools_latency_ms, Some(165.0));
        let cfg = crate::LinkConfig::from_profile("wpt:Cable").unwrap();
        assert_eq!(cfg.down.delay, Duration::from_millis(14));
        assert_eq!(cfg.up.delay, Duration::from_millis(14));
        assert_eq!(cfg.down.server, crate::config::Server::Rate(5_000_000));
        assert_eq!(cfg.up.server, crate::config::Server::Rate(1_000_000));
        let listing = listing();
        for p in all() {
            assert!(listing.contains(&p.qualified_name()));
        }
        assert!(
            listing.contains("NetworkConditionsSelector.js")
                && listing.contains("connectivity.ini.sample")
                && listing.contains("augmented-traffic-control")
        );
    }
}
