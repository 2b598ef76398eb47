//! [`ReplayCounts`]: what `hxlab serve --replay` answers on `GET /replay-stats` (its plain
//! port), and what everyone who reads a replay's counts (`hxlab page`, the lab through
//! `hxlab page --json`, tests) parses it into.

use hxlab_core::har::{ReplayOutcome, ReplayTally};

/// Which fallback rule answered a near miss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum NearMissRule {
    /// Same host and path, another query.
    Query,
    /// Same path on another host.
    Host,
}

/// A near miss: what was asked for and what answered it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NearMiss {
    /// The URL asked for.
    pub url: String,
    /// The recorded URL that answered.
    pub served: String,
    /// The rule that chose it.
    pub rule: NearMissRule,
}

/// What the replay answered so far: the `/replay-stats` document.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplayCounts {
    /// Recorded responses in the archive.
    pub entries: usize,
    /// Hits, near misses, misses, the browser's own requests and bodiless answers
    /// (flattened: the document keeps them at this level, after `entries`).
    #[serde(flatten)]
    pub tally: ReplayTally,
    /// The first near misses.
    pub near_miss_urls: Vec<NearMiss>,
    /// The first missed requests, `METHOD URL`.
    pub miss_urls: Vec<String>,
    /// The first requests to hosts outside the recording, `METHOD URL`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside_urls: Vec<String>,
    /// Recorded responses whose body the HAR lacks (the whole archive, not just served ones).
    pub bodies_missing: Vec<String>,
    /// Entries of the HAR left out because nothing can replay them, named by kind
    /// (`skipped 5 entries: 2 data:, 2 ws:, 1 blob:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl ReplayCounts {
    /// Parses a `/replay-stats` body.
    pub fn from_json(text: &str) -> Result<ReplayCounts, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The `/replay-stats` body (one line of JSON).
    pub fn to_json(&self) -> String {
        // Strings, numbers and lists of them always serialise.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// What the lab keeps of one page load's counts in its record: the tally and the first
    /// miss.
    pub fn outcome(&self) -> ReplayOutcome {
        ReplayOutcome {
            tally: self.tally,
            first_miss: self.miss_urls.first().cloned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `/replay-stats` body as `hxlab serve --replay` wrote it before the type moved here.
    const SERVED: &str = r#"{"entries":4,"hits":2,"near_misses":1,"misses":1,"browser_own":1,"served_without_body":0,"near_miss_urls":[{"url":"https://a.test/x?v=2","served":"https://a.test/x?v=1","rule":"query"}],"miss_urls":["GET https://a.test/gone"],"bodies_missing":[],"skipped":"skipped 1 entries: 1 data:"}"#;

    #[test]
    fn round_trips_the_served_body_byte_for_byte() {
        let c = ReplayCounts::from_json(SERVED).expect("parses");
        assert_eq!(c.tally.hits, 2);
        assert_eq!(c.near_miss_urls[0].rule, NearMissRule::Query);
        assert_eq!(c.to_json(), SERVED);
        let without_skipped = ReplayCounts {
            skipped: None,
            ..c.clone()
        };
        assert!(!without_skipped.to_json().contains("skipped"));
        assert_eq!(
            c.outcome(),
            ReplayOutcome {
                tally: c.tally,
                first_miss: Some("GET https://a.test/gone".into()),
            }
        );
    }
}
