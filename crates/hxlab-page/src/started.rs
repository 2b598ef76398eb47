//! An origin started for the page (synthetic or replaying) and how the browser reaches it:
//! what the synthetic and the replay origins hand the page's session.

use hxlab_child::origin::Origin;

/// How the browser reaches hostnames that are not addresses: `--host-resolver-rules` and,
/// for h3, the origins to force QUIC on.
#[derive(Default)]
pub(crate) struct Mapping {
    pub rules: Option<String>,
    pub force_quic: Vec<String>,
    /// The hosts under test (those mapped to our origin); empty: every host.
    pub hosts: Vec<String>,
    /// With a replay: every host the recording has a request to, answered or failed.
    pub recorded_hosts: Vec<String>,
}

/// An origin started for the page: the URL to load, the key to trust, the server, and how
/// the browser reaches it.
pub(crate) struct Started {
    pub url: String,
    pub spki: String,
    pub origin: Origin,
    pub mapping: Mapping,
}
