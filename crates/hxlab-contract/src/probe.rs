//! [`ProbeReport`]: what `hxlab probe URL --json` writes — which protocols a host offers
//! (ALPN for HTTP/1.1 and HTTP/2, Alt-Svc and a QUIC handshake for HTTP/3, prior knowledge for
//! h2c), each with its base URL or why it is not offered.

use serde::{Deserialize, Serialize};

/// What the probe of one URL found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// One protocol's finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        };
        let back = ProbeReport::from_json(&r.to_json()).expect("round trip");
        assert_eq!(back, r);
        assert!(back.any_offered());
        assert!(ProbeReport::from_json(r#"{"url": 1}"#).is_err());
    }
}
