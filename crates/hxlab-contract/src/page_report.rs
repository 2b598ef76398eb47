//! [`PageReport`]: what `hxlab page --json` writes (every run, the summary and what was
//! asked), and what the lab and the tests read it back into.
//!
//! The document's keys are sorted at every level (as serde_json's `Value` writes them):
//! that is how the command has always written it, so [`PageReport::to_json`] goes through
//! a `Value` to keep the bytes.

use crate::ReplayCounts;
use hxlab_core::page::{Outcome, PageSummary};
use hxlab_core::Proto;
use hxlab_link::LinkConfig;
use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The `hxlab page --json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PageReport {
    /// Always [`PageReport::TOOL`].
    pub tool: String,
    /// The hxlab version that wrote it.
    pub version: String,
    /// The URL loaded (on the link's host address when behind a link).
    pub url: String,
    /// The protocol asked for.
    pub protocol: Proto,
    /// How the browser reached HTTP/3 (`forced`: `protocol` was forced; otherwise each
    /// run's `repeat_view` is the returning visitor, unless `repeat_view` was asked for).
    #[serde(default)]
    pub discovery: crate::Discovery,
    /// The link's counters over the whole job (every run), read when the link stopped:
    /// with `--discovery udp-blocked`, `dropped_udp` says QUIC was tried and dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_stats: Option<hxlab_link::LinkStats>,
    /// The engine that loaded the page (reports without the field are Chromium's). Every
    /// figure of a report is this one engine's: engines are never pooled.
    #[serde(default)]
    pub engine: hxlab_core::page::Engine,
    /// The browser's name and version ("the browser (no run finished)" without a run).
    pub browser: String,
    /// Its major version (0 when no run finished).
    pub browser_major: u32,
    /// The emulated link the browser ran behind, if any.
    pub link: Option<PageLink>,
    /// The synthetic page, when one was served.
    pub synthetic: Option<SyntheticPage>,
    /// CPU slowdown factor (1: none).
    pub cpu_slowdown: f64,
    /// Whether each run loaded the page a second time in the same browser.
    pub repeat_view: bool,
    /// Connections of the origin started here per congestion controller, read back from
    /// its `/stats`; None without such an origin or when it could not be read.
    pub server_cc: Option<BTreeMap<String, u64>>,
    /// The browser's TCP congestion controller: the default of the network namespace it
    /// ran in, read back there after the runs (neither engine sets its own). hxlab cannot
    /// set it to the origin's: a namespace other than the first may only default to a
    /// controller in `net.ipv4.tcp_allowed_congestion_control` (EPERM otherwise). None when
    /// it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_tcp_cc: Option<String>,
    /// What the origin started here ran, read back from its `/stats` after the runs: its
    /// scheduler, its connections' marks and the priorities it understood, over every
    /// protocol; None without such an origin or when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<hxlab_core::sched::Scheduling>,
    /// Server push: asked for, and what became of it.
    pub push: PushReport,
    /// 103 Early Hints: asked for, and what the browser did with them.
    pub early_hints: EarlyHintsReport,
    /// Every run, in order.
    pub runs: Vec<PageRunEntry>,
    /// Medians and intervals over the counted runs (their first views).
    pub summary: PageSummary,
    /// The same over the repeat views, when they were asked for.
    pub repeat_view_summary: Option<PageSummary>,
    /// With `--replay`: the recording replayed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<ReplaySource>,
    /// With `--record`: where the first loaded run was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Recording>,
}

impl PageReport {
    /// The `tool` of every report.
    pub const TOOL: &'static str = "hxlab page";

    /// Parses a `hxlab page --json` document.
    pub fn from_json(text: &str) -> Result<PageReport, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The document as `hxlab page --json` writes it: pretty-printed, keys sorted, ending in
    /// a newline. Fails only on a path that is not UTF-8.
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        let mut text = serde_json::to_string_pretty(&serde_json::to_value(self)?)?;
        text.push('\n');
        Ok(text)
    }
}

/// The emulated link of a page load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PageLink {
    /// The link as configured.
    pub link: Option<LinkConfig>,
    /// The link's address on this side (where the origin listens).
    pub host: String,
    /// The browser's address behind the link.
    pub client: String,
}

/// The synthetic page as the report states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SyntheticPage {
    /// Sub-resources.
    pub n: u32,
    /// Bytes each.
    pub size: u64,
    /// The origin's delay before each, ms.
    pub delay_ms: f64,
    /// How long each may be cached, seconds; None: not cacheable.
    pub cache_s: Option<u64>,
}

/// What became of a server push request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PushReport {
    /// `--push` was given.
    pub requested: bool,
    /// It was, and the browser ignores HTTP/2 server push.
    pub ignored_by_browser: bool,
    /// One sentence on it, when push was requested.
    pub note: Option<String>,
}

/// What the browser did with 103 Early Hints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct EarlyHintsReport {
    /// `--early-hints` was given.
    pub requested: bool,
    /// Runs in which the browser received a 103.
    pub runs_with_103: usize,
    /// Resources served from the preloads the hints started.
    pub resources_from_preloads: u32,
}

/// The recording a `--replay` report replayed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReplaySource {
    /// The HAR file.
    pub har: PathBuf,
}

/// Where `--record` wrote the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Recording {
    /// The HAR file.
    pub har: PathBuf,
    /// Whether a run loaded the page, so the file was written.
    pub written: bool,
}

/// One run of the report. In JSON: the run's [`PageRun`](hxlab_core::page::PageRun) with
/// `run` and `counted` added (and `counted` in its repeat view), or
/// `{run, counted: false, error}` for a failed run; with `--replay`, `replay` too (null when
/// the run failed).
#[derive(Debug, Clone, PartialEq)]
pub struct PageRunEntry {
    /// The run's number, from 1.
    pub run: usize,
    /// Its figures, or why there are none.
    pub outcome: Outcome,
    /// None: no replay. With `--replay`, Some: the replay server's counts for this run, or
    /// None when the run failed before they were read.
    pub replay: Option<Option<ReplayCounts>>,
}

impl PageRunEntry {
    /// Whether the run counts in the summary: it measured, and nothing flagged it.
    pub fn counted(&self) -> bool {
        matches!(&self.outcome, Outcome::Measured(r) if r.is_valid())
    }
}

impl Serialize for PageRunEntry {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut doc = match &self.outcome {
            Outcome::Measured(r) => {
                let mut doc = as_object(serde_json::to_value(r).map_err(S::Error::custom)?);
                if let (Some(rv), Some(Value::Object(view))) =
                    (&r.repeat_view, doc.get_mut("repeat_view"))
                {
                    view.insert("counted".into(), rv.is_valid().into());
                }
                doc
            }
            Outcome::Failed(e) => Map::from_iter([("error".to_string(), e.as_str().into())]),
        };
        doc.insert("run".into(), self.run.into());
        doc.insert("counted".into(), self.counted().into());
        if let Some(counts) = &self.replay {
            doc.insert(
                "replay".into(),
                serde_json::to_value(counts).map_err(S::Error::custom)?,
            );
        }
        doc.serialize(s)
    }
}

impl<'de> Deserialize<'de> for PageRunEntry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<PageRunEntry, D::Error> {
        let mut doc = as_object(Value::deserialize(d)?);
        let run = doc
            .get("run")
            .and_then(Value::as_u64)
            .ok_or_else(|| D::Error::missing_field("run"))?;
        let replay = doc
            .remove("replay")
            .map(serde_json::from_value)
            .transpose()
            .map_err(D::Error::custom)?;
        // `counted` follows from the run's flag, so it is not kept.
        let outcome = match doc.remove("error") {
            Some(Value::String(e)) => Outcome::Failed(e),
            Some(other) => return Err(D::Error::custom(format!("error: not a string: {other}"))),
            None => Outcome::Measured(Box::new(
                serde_json::from_value(Value::Object(doc)).map_err(D::Error::custom)?,
            )),
        };
        Ok(PageRunEntry {
            run: usize::try_from(run).map_err(D::Error::custom)?,
            outcome,
            replay,
        })
    }
}

/// A JSON object's map (empty for anything else: a run is always an object).
fn as_object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_core::page::PageRun;

    fn run(flag: Option<&str>) -> PageRun {
        PageRun {
            url: "https://127.0.0.1:8443/".into(),
            requested_protocol: Proto::H2,
            browser: "Chromium 130.0.1".into(),
            browser_major: 130,
            started_unix_s: 1.5,
            protocols: BTreeMap::from([("h2".to_string(), 3)]),
            flag: flag.map(str::to_string),
            ttfb_ms: 1.0,
            dom_content_loaded_ms: 2.0,
            load_ms: 3.0,
            fcp_ms: Some(2.5),
            connections: 1,
            bytes: 1000,
            resources_loaded: 3,
            ..PageRun::default()
        }
    }

    #[test]
    fn a_run_keeps_its_number_count_and_replay() {
        let mut first = run(None);
        first.repeat_view = Some(Box::new(run(Some("asked for h2"))));
        let entries = [
            PageRunEntry {
                run: 1,
                outcome: Outcome::Measured(Box::new(first)),
                replay: Some(Some(ReplayCounts::default())),
            },
            PageRunEntry {
                run: 2,
                outcome: Outcome::Failed("page load timed out after 1s".into()),
                replay: Some(None),
            },
            PageRunEntry {
                run: 3,
                outcome: Outcome::Measured(Box::new(run(None))),
                replay: None,
            },
        ];
        let v = serde_json::to_value(&entries).expect("serialises");
        assert_eq!(v[0]["counted"], true);
        assert_eq!(v[0]["repeat_view"]["counted"], false);
        assert_eq!(v[0]["replay"]["hits"], 0);
        assert_eq!(
            v[1],
            serde_json::json!({ "run": 2, "counted": false, "replay": null,
                "error": "page load timed out after 1s" })
        );
        assert!(v[2].get("replay").is_none());
        let back: Vec<PageRunEntry> = serde_json::from_value(v).expect("parses");
        assert_eq!(back, entries);
    }
}
