//! [`LinkStatsFile`]: what `hxlab link --stats FILE` writes, and what everyone who reads such
//! a file parses it into.

/// The counters of one `hxlab link` run, with what the link was.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LinkStatsFile {
    /// The profile the link was built from, if any.
    pub profile: Option<String>,
    /// The seed of its loss and jitter draws.
    pub seed: u64,
    /// The outside end's address.
    pub host: String,
    /// The inside end's address.
    pub client: String,
    /// Outside → inside.
    pub down: hxlab_link::DirectionStats,
    /// Inside → outside.
    pub up: hxlab_link::DirectionStats,
}

impl LinkStatsFile {
    /// The file's text.
    pub fn from_json(text: &str) -> Result<LinkStatsFile, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The file's text (pretty, with a final newline).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string_pretty(self).map(|t| t + "\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_back_what_it_read() {
        let f = LinkStatsFile {
            profile: Some("wpt:Cable".into()),
            seed: 7,
            host: "100.64.0.1".into(),
            client: "100.64.0.2".into(),
            down: hxlab_link::DirectionStats {
                dropped_loss: 3,
                ..Default::default()
            },
            up: Default::default(),
        };
        let back = LinkStatsFile::from_json(&f.to_json().unwrap()).unwrap();
        assert_eq!(back, f);
    }
}
