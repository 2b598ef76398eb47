//! What a URL's host offers, found the way a client finds it: one request per protocol with
//! `hxlab load`'s own client and `hxlab trace`'s tap on its connection (so the ALPN result
//! and the Alt-Svc header are read off the wire). Over https: HTTP/1.1 (ALPN http/1.1),
//! HTTP/2 (ALPN h2 offered beside http/1.1, as a browser does), HTTP/3 on the port Alt-Svc
//! names or else the URL's own. Over http: HTTP/1.1 and h2c with prior knowledge.

use crate::{LoadConfig, Proto};
use hxlab_core::Protocol;
use hxlab_trace::{Summary, TraceTap, Tracer};
use std::path::PathBuf;
use std::time::Duration;

/// One protocol's finding: the base URL that serves it, or why it is not offered.
#[derive(Clone, Debug)]
pub struct Offer {
    /// The protocol.
    pub proto: Protocol,
    /// `scheme://host:port` when the host serves it; otherwise why not.
    pub base: Result<String, String>,
}

/// Everything the probe found.
#[derive(Clone, Debug)]
pub struct Found {
    /// `host:port` as written in the URL.
    pub authority: String,
    /// The path and query of the URL (`/` when empty).
    pub path: String,
    /// Per protocol, in the order h1, h1-tls, h2, h2c, h3 (only those the scheme allows).
    pub offers: Vec<Offer>,
    /// The Alt-Svc header the host sent, if any.
    pub alt_svc: Option<String>,
}

impl Found {
    /// What was found, one line each: every protocol offered (with its base) or not (and
    /// why), then the Alt-Svc header (for the reports' notes and the terminal).
    pub fn notes(&self) -> Vec<String> {
        let mut notes: Vec<String> = self
            .offers
            .iter()
            .map(|o| match &o.base {
                Ok(base) => format!("{} offered by {} ({base})", o.proto.name(), self.authority),
                Err(why) => format!(
                    "{} not offered by {}: {why}",
                    o.proto.name(),
                    self.authority
                ),
            })
            .collect();
        if let Some(a) = &self.alt_svc {
            notes.push(format!("Alt-Svc from {}: {a}", self.authority));
        }
        notes
    }

    /// The typed report of `hxlab probe --json` for the probe of `url`.
    pub fn report(&self, url: &str) -> hxlab_contract::ProbeReport {
        hxlab_contract::ProbeReport {
            url: url.to_string(),
            authority: self.authority.clone(),
            path: self.path.clone(),
            alt_svc: self.alt_svc.clone(),
            protocols: self
                .offers
                .iter()
                .map(|o| hxlab_contract::ProbeOffer {
                    protocol: o.proto.name().to_string(),
                    offered: o.base.is_ok(),
                    base: o.base.as_ref().ok().cloned(),
                    why_not: o.base.as_ref().err().cloned(),
                })
                .collect(),
            priorities: None,
        }
    }
}

/// Trust for the probe and the runs after it.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// Accept any certificate.
    pub insecure: bool,
    /// Trust this CA certificate.
    pub cacert: Option<PathBuf>,
}

/// Splits `scheme://authority/path?query` into (https, authority, path-and-query), with
/// `http::Uri` (the parser the load client uses); the fragment is dropped.
pub fn split_url(url: &str) -> Result<(bool, String, String), String> {
    let not_http = || format!("{url:?}: expected an http:// or https:// URL");
    let uri: http::Uri = url.parse().map_err(|_| not_http())?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err(not_http()),
    };
    let authority = uri
        .authority()
        .filter(|a| !a.host().is_empty() && !a.as_str().contains('@'))
        .ok_or_else(|| format!("{url:?}: no host"))?;
    let path = match uri.query() {
        Some(q) => format!("{}?{q}", uri.path()),
        None => uri.path().to_string(),
    };
    if path.contains("{{") {
        return Err(format!("{url:?}: the path has a space or `{{{{`"));
    }
    Ok((https, authority.as_str().to_string(), path))
}

/// One request over `proto` with the trace's tap: the summary, or why it failed.
fn one_request(
    url: &str,
    proto: Proto,
    alpn: Option<Vec<String>>,
    asked: Proto,
    trust: &Trust,
    timeout: Duration,
) -> Result<Summary, String> {
    let cfg = LoadConfig {
        urls: vec![url.to_string()],
        requests: 1,
        proto,
        alpn_list: alpn,
        timeout,
        connect_timeout: timeout,
        insecure: trust.insecure,
        cacert: trust.cacert.clone(),
        // One request to see what is offered: the controller does not matter, and an
        // unprivileged process may set only some.
        cc: None,
        ..Default::default()
    };
    let tracer = Tracer::new(false, Box::new(std::io::sink()));
    let (tap, summary) = TraceTap::new(tracer, asked, 1);
    let result = crate::run_tapped(cfg, Box::new(tap)).map_err(|e| e.to_string())?;
    let summary = summary.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if result.requests_done < 1 || summary.responses.is_empty() {
        return Err(result
            .error_samples
            .first()
            .cloned()
            .unwrap_or_else(|| "no response".into()));
    }
    Ok(summary)
}

/// The UDP port an Alt-Svc value offers h3 on for the same host (`h3=":443"`).
pub fn alt_svc_h3_port(alt_svc: &str) -> Option<u16> {
    for entry in alt_svc.split(',') {
        let entry = entry.trim();
        let Some(v) = entry.strip_prefix("h3=") else {
            continue;
        };
        let v = v.split(';').next()?.trim().trim_matches('"');
        // Another host (`h3="alt.example:443"`) is a different origin: not followed.
        if let Some(port) = v.strip_prefix(':') {
            return port.parse().ok();
        }
    }
    None
}

/// Probes `url`'s host for every protocol its scheme allows.
pub fn probe(url: &str, trust: &Trust, timeout: Duration) -> Result<Found, String> {
    let (https, authority, path) = split_url(url)?;
    let scheme = if https { "https" } else { "http" };
    let base = format!("{scheme}://{authority}");
    let target = format!("{base}{path}");
    let mut offers = Vec::new();
    let mut alt_svc = None;
    if https {
        let h1 = one_request(&target, Proto::H1, None, Proto::H1, trust, timeout);
        let h2 = one_request(
            &target,
            Proto::Auto,
            Some(vec!["h2".into(), "http/1.1".into()]),
            Proto::H2,
            trust,
            timeout,
        );
        for s in [&h1, &h2].into_iter().flatten() {
            if let Some(a) = s.responses.iter().find_map(|r| r.alt_svc.clone()) {
                alt_svc = Some(a);
            }
        }
        offers.push(Offer {
            proto: Protocol::H1Tls,
            base: h1.as_ref().map(|_| base.clone()).map_err(Clone::clone),
        });
        offers.push(Offer {
            proto: Protocol::H2,
            base: match &h2 {
                Ok(s) if s.protocol == "h2" => Ok(base.clone()),
                Ok(s) => Err(format!(
                    "the server chose {} when offered h2 (ALPN {})",
                    if s.protocol == "h1" {
                        "HTTP/1.1"
                    } else {
                        s.protocol.as_str()
                    },
                    s.alpn.as_deref().unwrap_or("none")
                )),
                Err(e) => Err(e.clone()),
            },
        });
        let host = authority
            .rsplit_once(':')
            .map(|(h, _)| h)
            .unwrap_or(&authority);
        let port = alt_svc.as_deref().and_then(alt_svc_h3_port);
        let h3_base = match port {
            Some(p) => format!("https://{host}:{p}"),
            None => base.clone(),
        };
        let h3 = one_request(
            &format!("{h3_base}{path}"),
            Proto::H3,
            None,
            Proto::H3,
            trust,
            timeout,
        );
        offers.push(Offer {
            proto: Protocol::H3,
            base: match h3 {
                Ok(_) => Ok(h3_base),
                Err(e) => Err(match &alt_svc {
                    Some(a) if port.is_some() => format!("Alt-Svc ({a}) advertises it, but QUIC did not answer: {e}"),
                    _ => format!("no Alt-Svc h3 advertisement, and QUIC on the URL's port did not answer: {e}"),
                }),
            },
        });
    } else {
        let h1 = one_request(&target, Proto::H1, None, Proto::H1, trust, timeout);
        offers.push(Offer {
            proto: Protocol::H1,
            base: h1.map(|_| base.clone()),
        });
        let h2c = one_request(&target, Proto::H2c, None, Proto::H2c, trust, timeout);
        offers.push(Offer {
            proto: Protocol::H2c,
            base: match h2c {
                Ok(s) if s.protocol == "h2c" || s.protocol == "h2" => Ok(base.clone()),
                Ok(s) => Err(format!("the server answered in {}", s.protocol)),
                Err(e) => Err(e),
            },
        });
    }
    Ok(Found {
        authority,
        path,
        offers,
        alt_svc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_and_alt_svc_ports_are_read() {
        assert_eq!(
            split_url("https://example.test:8443/a/b?c=1#f").unwrap(),
            (true, "example.test:8443".into(), "/a/b?c=1".into())
        );
        assert_eq!(
            split_url("http://h").unwrap(),
            (false, "h".into(), "/".into())
        );
        assert_eq!(
            split_url("https://h?q=1").unwrap(),
            (true, "h".into(), "/?q=1".into())
        );
        assert!(split_url("ftp://h/").is_err());
        assert!(split_url("https:///x").is_err());
        assert!(split_url("https://u@h/").is_err());
        assert!(split_url("https://h/a b").is_err());
        assert!(split_url("https://h/{{x}}").is_err());
        assert_eq!(
            alt_svc_h3_port("h3=\":443\"; ma=86400, h3-29=\":443\""),
            Some(443)
        );
        assert_eq!(alt_svc_h3_port("h2=\":443\", h3=\":8443\""), Some(8443));
        assert_eq!(alt_svc_h3_port("h3=\"other.example:443\""), None);
        assert_eq!(alt_svc_h3_port("clear"), None);
    }
}
