//! [`ConnectTo`]: h2load's `--connect-to HOST[:PORT]`, where a load run's connections go
//! instead of the URL's host and port. In JSON it is the text the flag takes.

/// A host (name or address) and, if given, a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectTo {
    /// Host name or address, without brackets.
    pub host: String,
    /// Port; None: the URL's.
    pub port: Option<u16>,
}

impl ConnectTo {
    /// Reads `host`, `host:port`, `[v6]` or `[v6]:port` (a bare IPv6 address is a host too).
    /// The error is one line for the user.
    pub fn parse(s: &str) -> Result<ConnectTo, String> {
        let bad = |why: &str| format!("--connect-to {s:?}: {why}; expected HOST[:PORT]");
        let t = s.trim();
        let (host, port) = if let Some(rest) = t.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| bad("no closing ]"))?;
            match after {
                "" => (host, None),
                p => (
                    host,
                    Some(p.strip_prefix(':').ok_or_else(|| bad("text after ]"))?),
                ),
            }
        } else if t.matches(':').count() > 1 {
            (t, None)
        } else {
            match t.split_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (t, None),
            }
        };
        if host.is_empty() || host.chars().any(|c| c.is_whitespace() || c == '/') {
            return Err(bad("no host"));
        }
        let port = match port {
            None => None,
            Some(p) => match p.parse::<u16>() {
                Ok(n) if n > 0 => Some(n),
                _ => return Err(bad("the port must be from 1 to 65535")),
            },
        };
        Ok(ConnectTo {
            host: host.to_string(),
            port,
        })
    }
}

impl std::fmt::Display for ConnectTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(p) => write!(f, "{host}:{p}"),
            None => f.write_str(&host),
        }
    }
}

impl serde::Serialize for ConnectTo {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for ConnectTo {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ConnectTo::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, as [`ConnectTo::parse`] reads it.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for ConnectTo {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ConnectTo".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Where to connect instead of the URL's host and port: HOST, HOST:PORT, [IPv6] or [IPv6]:PORT (h2load's --connect-to).",
            "type": "string",
            "pattern": r"^(\[[0-9A-Fa-f:.]+\]|[^\s/:\[\]]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)(:[0-9]{1,5})?$",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_ports_and_ipv6_read_and_print_back() {
        for (text, host, port) in [
            ("127.0.0.1:8443", "127.0.0.1", Some(8443)),
            ("localhost", "localhost", None),
            ("[::1]:443", "::1", Some(443)),
            ("[::1]", "::1", None),
            ("::1", "::1", None),
        ] {
            let c = ConnectTo::parse(text).unwrap();
            assert_eq!((c.host.as_str(), c.port), (host, port), "{text}");
            assert_eq!(ConnectTo::parse(&c.to_string()).unwrap(), c);
        }
        for bad in ["", ":80", "a:0", "a:99999", "a:x", "[::1", "[::1]x", "a b"] {
            assert!(ConnectTo::parse(bad).is_err(), "{bad}");
        }
    }
}
