//! The protocol vocabulary every part of hxlab shares.
//!
//! [`Protocol`] is what a connection spoke: HTTP/1.1 over TCP or TLS, HTTP/2 over TLS or
//! cleartext (h2c), HTTP/3. Experiment cells, the server's `/stats` keys and reports name
//! protocols with it. [`Proto`] is what a client is asked to speak: the same versions, with
//! the transport following the URL's scheme (`h1` on an https:// URL is HTTP/1.1 over TLS,
//! `h2` on an http:// URL is h2c) and `auto` (ALPN decides); `hxlab load` and `hxlab trace`
//! take it. [`Proto::resolve`] turns a request and a scheme into the protocol it asks for.

/// What a connection spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// HTTP/1.1 over plain TCP.
    H1,
    /// HTTP/1.1 over TLS.
    H1Tls,
    /// HTTP/2 over TLS (ALPN h2).
    H2,
    /// HTTP/2 over plain TCP with prior knowledge.
    H2c,
    /// HTTP/3 over QUIC.
    H3,
}

impl Protocol {
    /// Every protocol, in the order reports list them.
    pub const ALL: [Protocol; 5] = [
        Protocol::H1,
        Protocol::H1Tls,
        Protocol::H2,
        Protocol::H2c,
        Protocol::H3,
    ];

    /// The name in experiment files, reports and `/stats`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H1 => "h1",
            Protocol::H1Tls => "h1-tls",
            Protocol::H2 => "h2",
            Protocol::H2c => "h2c",
            Protocol::H3 => "h3",
        }
    }

    /// Reads a protocol name.
    pub fn parse(s: &str) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.name() == s)
    }

    /// Whether the protocol runs over TLS (or QUIC's TLS 1.3).
    pub fn tls(self) -> bool {
        matches!(self, Protocol::H1Tls | Protocol::H2 | Protocol::H3)
    }

    /// Whether it multiplexes requests on one connection.
    pub fn multiplexed(self) -> bool {
        matches!(self, Protocol::H2 | Protocol::H2c | Protocol::H3)
    }

    /// The key of the server's `/stats` `by_protocol` object for this protocol.
    pub fn stats_key(self) -> &'static str {
        self.name()
    }

    /// Position in [`Protocol::ALL`] (for per-protocol counter arrays).
    pub fn index(self) -> usize {
        self as usize
    }

    /// What a client asks for to speak this protocol (with the matching URL scheme).
    pub fn ask(self) -> Proto {
        match self {
            Protocol::H1 | Protocol::H1Tls => Proto::H1,
            Protocol::H2 => Proto::H2,
            Protocol::H2c => Proto::H2c,
            Protocol::H3 => Proto::H3,
        }
    }
}

impl std::fmt::Display for Protocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a client is asked to speak (`--proto`); the transport follows the URL's scheme.
/// With the `clap` feature it is every command's `--proto` value (names and aliases as
/// [`Proto::parse`] reads them, listed in `--help`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// HTTP/1.1 (plain for http://, TLS for https://).
    #[cfg_attr(
        feature = "clap",
        value(alias = "http/1.1", alias = "http1.1", alias = "http1")
    )]
    H1,
    /// HTTP/2 over TLS (ALPN h2); an http:// URL means h2c.
    H2,
    /// HTTP/2 over cleartext TCP with prior knowledge.
    H2c,
    /// HTTP/3 over QUIC (https:// URLs only).
    H3,
    /// https://: offer ALPN `h2,http/1.1` (or `--alpn-list`) and use what the server picks;
    /// http://: HTTP/1.1.
    #[default]
    Auto,
}

impl Proto {
    /// Parses `h1`, `http/1.1`, `h2`, `h2c`, `h3`, `auto`.
    pub fn parse(s: &str) -> Option<Proto> {
        Some(match s.to_ascii_lowercase().as_str() {
            "h1" | "http/1.1" | "http1.1" | "http1" => Proto::H1,
            "h2" => Proto::H2,
            "h2c" => Proto::H2c,
            "h3" => Proto::H3,
            "auto" => Proto::Auto,
            _ => return None,
        })
    }

    /// The HTTP version a browser reports for a response (Chromium's `response.protocol`:
    /// "http/1.1", "h2", "h3", "h3-29", "quic/…"); `None` for anything else ("data", "blob",
    /// empty).
    pub fn of_reported(reported: &str) -> Option<Proto> {
        let p = reported.to_ascii_lowercase();
        if p == "http/1.1" || p == "http/1.0" {
            Some(Proto::H1)
        } else if p == "h2" {
            Some(Proto::H2)
        } else if p.starts_with("h3") || p.starts_with("quic") || p.contains("+quic") {
            Some(Proto::H3)
        } else {
            None
        }
    }

    /// The name as written on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Proto::H1 => "h1",
            Proto::H2 => "h2",
            Proto::H2c => "h2c",
            Proto::H3 => "h3",
            Proto::Auto => "auto",
        }
    }

    /// The protocol this asks for on a URL of the given scheme; `None` for `auto` on https
    /// (ALPN decides) and for combinations that cannot be (h2c on https, h3 on http).
    pub fn resolve(self, https: bool) -> Option<Protocol> {
        match (self, https) {
            (Proto::H1, false) | (Proto::Auto, false) => Some(Protocol::H1),
            (Proto::H1, true) => Some(Protocol::H1Tls),
            (Proto::H2, true) => Some(Protocol::H2),
            (Proto::H2 | Proto::H2c, false) => Some(Protocol::H2c),
            (Proto::H3, true) => Some(Protocol::H3),
            (Proto::Auto, true) | (Proto::H2c, true) | (Proto::H3, false) => None,
        }
    }
}

impl std::fmt::Display for Proto {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Proto {
    type Err = String;

    /// [`Proto::parse`], with the one-line error every command prints.
    fn from_str(s: &str) -> Result<Self, String> {
        Proto::parse(s)
            .ok_or_else(|| format!("unknown protocol `{s}`: use h1, h2, h2c, h3 or auto"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_requests_resolve() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::parse(p.name()), Some(p));
            assert_eq!(Protocol::ALL[p.index()], p);
            assert_eq!(p.ask().resolve(p.tls()), Some(p), "{p}");
        }
        for a in [Proto::H1, Proto::H2, Proto::H2c, Proto::H3, Proto::Auto] {
            assert_eq!(Proto::parse(a.name()), Some(a));
        }
        assert_eq!(Proto::parse("HTTP/1.1"), Some(Proto::H1));
        assert_eq!(Proto::Auto.resolve(true), None);
        assert_eq!(Proto::H2c.resolve(true), None);
        assert_eq!(Proto::H3.resolve(false), None);
        assert_eq!(Protocol::parse("h4"), None);
    }
}
