//! The header-compression factor (`--header-table`): its default and bound, and
//! [`HeaderTableSeen`], what a load run read back about the tables each connection used.

use serde::{Deserialize, Serialize};

/// The default header table size on both ends and both protocols: RFC 7541's initial
/// SETTINGS_HEADER_TABLE_SIZE, what nginx, h2o and nghttp2 use for HPACK, and the QPACK
/// capacity ngtcp2/nghttp3's examples advertise.
pub const DEFAULT_HEADER_TABLE: u64 = 4096;

/// The largest header table the factor accepts (64 KiB): past it a table only costs memory
/// per connection, since response heads repeat long before it fills.
pub const MAX_HEADER_TABLE: u64 = 65536;

/// Refuses a table size over [`MAX_HEADER_TABLE`], naming `flag` and the limit in one line.
pub fn check_header_table(flag: &str, size: u64) -> Result<(), String> {
    if size > MAX_HEADER_TABLE {
        return Err(format!(
            "{flag} {size}: at most {MAX_HEADER_TABLE} (64KiB); 0 = static table only"
        ));
    }
    Ok(())
}

/// The header tables of a run's connections that agreed on the same sizes: read from the
/// SETTINGS actually exchanged (HTTP/2) or the QPACK settings (HTTP/3), never echoed from a
/// flag.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HeaderTableSeen {
    /// "h2" or "h3".
    pub protocol: String,
    /// What our client advertised: SETTINGS_HEADER_TABLE_SIZE (h2) or
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY (h3).
    pub client_advertised: u64,
    /// What the server's SETTINGS said (h2: 4096 when it did not say); None when no
    /// SETTINGS came.
    pub server_advertised: Option<u64>,
    /// h3 only: the SETTINGS_QPACK_BLOCKED_STREAMS our client advertised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_blocked_streams: Option<u64>,
    /// h3 only: the SETTINGS_QPACK_BLOCKED_STREAMS the server advertised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_blocked_streams: Option<u64>,
    /// The table size our encoder used: min(our own limit, the server's).
    pub encoder_table: u64,
    /// Connections that saw exactly these values.
    pub connections: u64,
}

impl HeaderTableSeen {
    /// Whether `self` and `o` differ in nothing but their connection counts.
    fn same_sizes(&self, o: &HeaderTableSeen) -> bool {
        HeaderTableSeen {
            connections: 0,
            ..self.clone()
        } == HeaderTableSeen {
            connections: 0,
            ..o.clone()
        }
    }
}

/// Adds `seen` to `all`: its connections go to the entry with the same sizes, or it becomes
/// a new one. The h2 client adds one per connection; the h3 client calls the same.
pub fn add_header_table(all: &mut Vec<HeaderTableSeen>, seen: &HeaderTableSeen) {
    match all.iter_mut().find(|e| e.same_sizes(seen)) {
        Some(e) => e.connections = e.connections.saturating_add(seen.connections),
        None => {
            all.push(seen.clone());
            all.sort_by(|a, b| {
                (
                    &a.protocol,
                    a.client_advertised,
                    a.server_advertised,
                    a.encoder_table,
                )
                    .cmp(&(
                        &b.protocol,
                        b.client_advertised,
                        b.server_advertised,
                        b.encoder_table,
                    ))
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_merge_by_every_size_and_bounds_are_checked() {
        let h2 = |server, conns| HeaderTableSeen {
            protocol: "h2".into(),
            client_advertised: 4096,
            server_advertised: server,
            encoder_table: 4096,
            connections: conns,
            ..HeaderTableSeen::default()
        };
        let mut all = Vec::new();
        add_header_table(&mut all, &h2(Some(4096), 1));
        add_header_table(&mut all, &h2(None, 1));
        add_header_table(&mut all, &h2(Some(4096), 2));
        assert_eq!(all, vec![h2(None, 1), h2(Some(4096), 3)]);
        assert!(check_header_table("--header-table", 65536).is_ok());
        let e = check_header_table("--header-table", 70000).unwrap_err();
        assert!(e.contains("65536") && !e.contains('\n'), "{e}");
    }
}
