//! [`ProbeReport`]: what `hxlab probe URL --json` writes — which protocols a host offers
//! (ALPN for HTTP/1.1 and HTTP/2, Alt-Svc and a QUIC handshake for HTTP/3, prior knowledge for
//! h2c), each with its base URL or why it is not offered; with `--priorities`, the
//! scheduling scorecards ([`PrioritiesReport`]).

use crate::PrioritiesReport;
use serde::{Deserialize, Serialize};

/// What the probe of one URL found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProbeReport {
    /// The URL probed, as given.
    pub url: String,
    /// `host:port` as written in the URL.
    pub authority: String,
    /// The path and query requested (`/` when empty).
    pub path: String,
    /// The Alt-Svc header the host sent over TCP, if any.
    pub alt_svc: Option<String>,
    /// One entry per protocol the URL's scheme allows, in the order h1, h1-tls, h2, h2c, h3.
    pub protocols: Vec<ProbeOffer>,
    /// With `--priorities`: how the server schedules responses on one connection (absent
    /// otherwise, and in reports written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priorities: Option<PrioritiesReport>,
}

/// One protocol's finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ProbeOffer {
    /// `h1`, `h1-tls`, `h2`, `h2c` or `h3`.
    pub protocol: String,
    /// The host answered a request over it.
    pub offered: bool,
    /// `scheme://host:port` that serves it (h3 may be on another port, from Alt-Svc).
    pub base: Option<String>,
    /// Why it is not offered (the error, or what the server chose instead).
    pub why_not: Option<String>,
}

impl ProbeReport {
    /// The JSON form (pretty, with a trailing newline).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Reads the JSON form.
    pub fn from_json(text: &str) -> Result<ProbeReport, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Whether any protocol was offered.
    pub fn any_offered(&self) -> bool {
        self.protocols.iter().any(|p| p.offered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Honoured, IncrementalFigures, PriorityScorecard, ProbeLink, SchedulingClass, UpdateFigures,
        UrgentFigures,
    };

    #[test]
    fn json_round_trip() {
        let r = ProbeReport {
            url: "https://a.test/".into(),
            authority: "a.test".into(),
            path: "/".into(),
            alt_svc: Some("h3=\":443\"".into()),
            protocols: vec![
                ProbeOffer {
                    protocol: "h2".into(),
                    offered: true,
                    base: Some("https://a.test".into()),
                    why_not: None,
                },
                ProbeOffer {
                    protocol: "h3".into(),
                    offered: false,
                    base: None,
                    why_not: Some("no answer".into()),
                },
            ],
            priorities: None,
        };
        let back = ProbeReport::from_json(&r.to_json()).expect("round trip");
        assert_eq!(back, r);
        assert!(back.any_offered());
        assert!(!r.to_json().contains("priorities"), "absent when not asked");
        assert!(ProbeReport::from_json(r#"{"url": 1}"#).is_err());
    }

    /// A report written before `--priorities` existed still reads; one with scorecards
    /// comes back as written.
    #[test]
    fn old_reports_read_and_scorecards_round_trip() {
        let old = r#"{"url":"https://a.test/","authority":"a.test","path":"/","alt_svc":null,
            "protocols":[{"protocol":"h2","offered":true,"base":"https://a.test","why_not":null}]}"#;
        let r = ProbeReport::from_json(old).expect("an old report");
        assert_eq!(r.priorities, None);
        let figures = UrgentFigures {
            class: SchedulingClass::UrgencyFirst,
            bulk_bytes_before: 300_000,
            small_bytes: 20_000,
            small_first_byte_ms: Some(180.5),
            wait_ms: Some(200.0),
            committed_bytes: 150_000,
            committed_ms: 120.0,
            bulk_bytes_during_small: 0,
            small_after_bulk: false,
            floor_ms: 116.0,
        };
        let with = ProbeReport {
            priorities: Some(PrioritiesReport {
                link: ProbeLink {
                    rate_bits_per_sec: 10_000_000,
                    rtt_ms: 50.0,
                    queue_bytes: 62_500,
                },
                bulk_url: "https://a.test/big".into(),
                small_url: "https://a.test/small".into(),
                connect_to: Some("127.0.0.1:8443".into()),
                scorecards: vec![PriorityScorecard {
                    protocol: "h2".into(),
                    address: "100.64.0.1:8443".into(),
                    verdict: Some(SchedulingClass::UrgencyFirst),
                    error: None,
                    urgency: Some(figures.clone()),
                    incremental: Some(IncrementalFigures {
                        honoured: Honoured::Yes,
                        non_incremental_share: 0.01,
                        incremental_share: 0.49,
                    }),
                    priority_update: Some(UpdateFigures {
                        honoured: Honoured::No,
                        share_before: 0.0,
                        share_after: 0.0,
                        bytes_after: 1_000_000,
                    }),
                    rfc7540: Some(figures),
                }],
            }),
            ..r
        };
        let text = with.to_json();
        assert!(text.contains("\"urgency-first\""), "{text}");
        assert_eq!(ProbeReport::from_json(&text).expect("round trip"), with);
    }
}
