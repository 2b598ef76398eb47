//! The files a results directory holds: one [`Record`] per line of `results.jsonl` and the
//! [`ExperimentMeta`] in `experiment.json` that says which factors were swept and which
//! published figures to show beside ours.

use hxlab_core::RunResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What one repetition of a cell does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// Fetch N resources as a browser would; the metric is the time to the last byte.
    Resources,
    /// h2load-style -n/-c/-m load; the metric is requests per second.
    Throughput,
    /// Page loads in a real browser (reserved until `hxlab page` exists).
    Browser,
}

impl Workload {
    /// The figure the report's tables show for this workload.
    pub fn metric(self) -> Metric {
        match self {
            Workload::Resources | Workload::Browser => Metric::TimeS,
            Workload::Throughput => Metric::RequestsPerSec,
        }
    }
}

/// The primary figure of a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    /// Wall time of the run including connection setup, seconds (lower is better); for the
    /// browser workload, the load event.
    TimeS,
    /// Completed requests per second (higher is better).
    RequestsPerSec,
    /// Browser workload: first contentful paint, seconds.
    FcpS,
    /// Browser workload: largest contentful paint, seconds.
    LcpS,
    /// Browser workload: Speed Index, seconds.
    SpeedIndexS,
}

impl Metric {
    /// Short name with unit, for table headers.
    pub fn label(self) -> &'static str {
        match self {
            Metric::TimeS => "time to last byte (s)",
            Metric::RequestsPerSec => "requests/s",
            Metric::FcpS => "first contentful paint (s)",
            Metric::LcpS => "largest contentful paint (s)",
            Metric::SpeedIndexS => "Speed Index (s)",
        }
    }
    /// Whether a smaller value is the better one.
    pub fn lower_is_better(self) -> bool {
        !matches!(self, Metric::RequestsPerSec)
    }
    /// The key of the metric in tables and summary.json.
    pub fn key(self) -> &'static str {
        match self {
            Metric::TimeS => "time_s",
            Metric::RequestsPerSec => "req_s",
            Metric::FcpS => "fcp_s",
            Metric::LcpS => "lcp_s",
            Metric::SpeedIndexS => "speed_index_s",
        }
    }
    /// The metric an experiment file names in `metric = "..."`: `load`, `fcp`, `lcp` or
    /// `speed_index` (the browser workload's figures).
    pub fn parse_page(name: &str) -> Option<Metric> {
        match name {
            "load" => Some(Metric::TimeS),
            "fcp" => Some(Metric::FcpS),
            "lcp" => Some(Metric::LcpS),
            "speed_index" => Some(Metric::SpeedIndexS),
            _ => None,
        }
    }
    /// The metric's value for one successful run (NaN when the run did not record it, as a
    /// page that painted nothing has no FCP).
    pub fn of(self, r: &RunResult) -> f64 {
        let page_s = |k: &str| {
            r.config
                .extra
                .get(k)
                .and_then(|v| v.parse::<f64>().ok())
                .map_or(f64::NAN, |ms| ms / 1000.0)
        };
        match self {
            Metric::TimeS => r.duration_s,
            Metric::RequestsPerSec => r.requests_per_sec(),
            Metric::FcpS => page_s("fcp_ms"),
            Metric::LcpS => page_s("lcp_ms"),
            Metric::SpeedIndexS => page_s("speed_index_ms"),
        }
    }
}

/// The server's CPU time spent on one cell, from `GET /stats` before and after it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServerCost {
    /// User + system CPU seconds the server used during the cell.
    pub cpu_s: f64,
    /// Requests the server counted for the cell's protocol during the cell.
    pub requests: u64,
}

impl ServerCost {
    /// CPU microseconds per request; None when no request was counted.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.cpu_s * 1e6 / self.requests as f64)
    }
}

/// One repetition of one cell: a line of `results.jsonl`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Record {
    /// Name of the experiment.
    pub experiment: String,
    /// The cell's key: its factor values in the experiment's factor order, e.g.
    /// `protocol=h2 delay=10ms resources=100`.
    pub cell: String,
    /// The cell's factor values by factor name.
    pub factors: BTreeMap<String, String>,
    /// Repetition index, from 0.
    pub repetition: u32,
    /// Start of the repetition, seconds since the Unix epoch.
    pub started_unix_s: f64,
    /// Wall time the runner spent on the repetition (child start to exit), seconds.
    pub wall_s: f64,
    /// The load generator's result (absent when it produced none).
    pub result: Option<RunResult>,
    /// The server's CPU cost during the repetition.
    pub server: Option<ServerCost>,
    /// Body bytes the workload should have received, to notice short or missing bodies.
    #[serde(default)]
    pub expected_body_bytes: Option<u64>,
    /// Exit status of the load generator.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Why the repetition failed, if it did.
    #[serde(default)]
    pub error: Option<String>,
    /// Why the repetition was not run (e.g. no link emulation here), if it was not.
    #[serde(default)]
    pub skipped: Option<String>,
    /// Congestion controllers of the server's connections of the cell's protocol ("reno": n),
    /// read back by the server from each socket or QUIC connection (its `/stats`). Repetitions
    /// that share one link run carry their cell's total. Empty when not known.
    #[serde(default)]
    pub server_cc: BTreeMap<String, u64>,
    /// hxlab's origin: its connections of the cell's protocol by the header table size its
    /// response encoder used ("4096": n; HPACK on h2, QPACK on h3), read back from its
    /// `/stats`. Empty for HTTP/1.1, other origins, browser workloads and older records.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_encoder_tables: BTreeMap<String, u64>,
    /// Congestion controllers of the client's connections, read back by `hxlab load`
    /// (its RunResult's `congestion_control`). Empty when not known (a real browser).
    #[serde(default)]
    pub client_cc: BTreeMap<String, u64>,
    /// What hxlab's origin sent with in the repetition, as it read it back (its `/stats`,
    /// for the cell's protocol): its scheduler (with whether the protocol has responses to
    /// schedule: not HTTP/1.1), its connections' TCP send low-water marks and the priorities
    /// it understood. Repetitions that share one link run carry their cell's total. None for
    /// other origins and in records written before it was read back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduling: Option<hxlab_core::sched::Scheduling>,
    /// The page load resource by resource (browser workload only), for the report's
    /// waterfalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waterfall: Option<hxlab_core::waterfall::Waterfall>,
    /// A recorded page's replay (browser workload with `har`): what the replay server
    /// answered from the recording in this repetition (hits, near misses, misses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<hxlab_core::har::ReplayOutcome>,
    /// Where and with what the repetition ran: hxlab's version and commit, kernel, CPU,
    /// default congestion controller and the peers' versions. None in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<hxlab_core::env::Environment>,
    /// A page load's resources that failed, answered 4xx/5xx or did not finish (browser
    /// workload): counted beside the figures instead of making the repetition unclean.
    /// None for other workloads and for records written before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_problems: Option<hxlab_core::page::ResourceProblems>,
}

impl Record {
    /// One line saying why a repetition is not clean (see [`Record::is_clean`]).
    pub fn failure_text(&self) -> String {
        if let Some(e) = &self.error {
            return e.clone();
        }
        let Some(res) = &self.result else {
            return "no result".into();
        };
        let mut text = format!(
            "{} of {} requests failed",
            res.requests_failed, res.requests_started
        );
        if res.requests_not_sent + res.requests_in_flight_at_end > 0 {
            text.push_str(&format!(
                ", {} scheduled but not sent, {} unanswered at the end",
                res.requests_not_sent, res.requests_in_flight_at_end
            ));
        }
        if let Some(sample) = res.error_samples.first() {
            text.push_str(&format!(" ({sample})"));
        }
        text
    }

    /// True when the run produced a result with no failed request and no error. (Open-model
    /// runs, which the lab does not make, may also end with requests unanswered at the
    /// deadline; that is not a failure, and [`Record::failure_text`] names them.)
    ///
    /// A page load's failed or unfinished resources ([`Record::page_problems`]) are counted
    /// there, not held against the repetition: the page loaded (else `hxlab page` left the
    /// run out, and `error` says why).
    pub fn is_clean(&self) -> bool {
        let page_failures = self
            .page_problems
            .as_ref()
            .map_or(0, |p| u64::from(p.failed + p.unfinished));
        self.error.is_none()
            && self.skipped.is_none()
            && self.result.as_ref().is_some_and(|r| {
                r.requests_done > 0
                    && r.requests_failed <= page_failures
                    && r.errors.total() <= page_failures
            })
    }
}

/// One factor and its levels in the order the experiment lists them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactorLevels {
    /// Factor name: protocol, delay, resources, size, profile, loss, cc, ...
    pub name: String,
    /// Its values as written in the experiment (one value: not swept).
    pub levels: Vec<String>,
}

/// A table of figures published by a study, for the report to show beside ours.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublishedTable {
    /// What the table shows.
    pub title: String,
    /// Where the figures come from.
    pub source: String,
    /// The factor the columns are levels of (None: the columns are metrics).
    pub column_factor: Option<String>,
    /// Column headers: levels of `column_factor`, or metric names (see [`figures::METRICS`](crate::figures::METRICS)).
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<PublishedRow>,
}

/// One published row: which of our rows it belongs beside, and its values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PublishedRow {
    /// Label as the study wrote it.
    pub label: String,
    /// Factor values of our row it is compared with (empty: shown on its own).
    pub factors: BTreeMap<String, String>,
    /// One value per column (None: not published).
    pub values: Vec<Option<f64>>,
}

/// The experiment as run: written to `experiment.json` so a report can be re-rendered.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ExperimentMeta {
    /// Short name (a scenario name or the file's stem).
    pub name: String,
    /// One-line title.
    pub title: String,
    /// What it measures and how, for the report's first paragraph.
    #[serde(default)]
    pub description: String,
    /// The workload of every cell.
    pub workload: Option<Workload>,
    /// Repetitions per cell.
    pub repetitions: u32,
    /// Every factor with its levels, in display order.
    pub factors: Vec<FactorLevels>,
    /// The factor whose levels are the tables' columns (default: the first swept one that is
    /// not the protocol).
    #[serde(default)]
    pub columns: Option<String>,
    /// The protocol the others are compared with (default: the first listed).
    #[serde(default)]
    pub baseline: Option<String>,
    /// Published figures to show beside ours.
    #[serde(default)]
    pub published: Vec<PublishedTable>,
    /// Notes the runner made (skipped networks, caveats), shown in the report.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Cell keys in run order.
    #[serde(default)]
    pub cells: Vec<String>,
    /// The primary figure when it is not the workload's own (browser workload: `fcp`, `lcp`
    /// or `speed_index` instead of the load event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<Metric>,
    /// Where and with what the experiment ran (as its records say); None in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<hxlab_core::env::Environment>,
}

impl ExperimentMeta {
    /// The workload, defaulting to `resources` for files that do not say.
    pub fn workload(&self) -> Workload {
        self.workload.unwrap_or(Workload::Resources)
    }
    /// The primary metric: the experiment's `metric`, or the workload's.
    pub fn metric(&self) -> Metric {
        self.metric.unwrap_or(self.workload().metric())
    }
    /// Levels of a factor, if the experiment has it.
    pub fn levels(&self, name: &str) -> Option<&[String]> {
        self.factors
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.levels.as_slice())
    }
    /// Factors with more than one level, in display order.
    pub fn swept(&self) -> Vec<&FactorLevels> {
        self.factors.iter().filter(|f| f.levels.len() > 1).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hxlab_core::sched::{Scheduler, Scheduling};

    /// A record keeps what the origin read back through results.jsonl, and a line written
    /// before the read-back existed still reads (without it).
    #[test]
    fn a_record_round_trips_and_old_lines_still_read() {
        let rec = Record {
            experiment: "e".into(),
            cell: "protocol=h2 scheduler=fifo".into(),
            scheduling: Some(Scheduling {
                scheduler: Some(Scheduler::Fifo),
                scheduler_applies: true,
                notsent_lowat: BTreeMap::from([("16384".to_string(), 1)]),
                priorities: BTreeMap::from([("u=3".to_string(), 30)]),
            }),
            ..Default::default()
        };
        let line = serde_json::to_string(&rec).expect("serialises");
        assert!(
            line.contains(r#""scheduling":{"scheduler":"fifo","scheduler_applies":true,"notsent_lowat":{"16384":1},"priorities":{"u=3":30}}"#),
            "{line}"
        );
        let back: Record = serde_json::from_str(&line).expect("reads back");
        assert_eq!(back.scheduling, rec.scheduling);
        let old = r#"{"experiment":"e","cell":"protocol=h1","factors":{"protocol":"h1"},"repetition":0,"started_unix_s":0.0,"wall_s":0.1,"result":null,"server":null}"#;
        let old: Record = serde_json::from_str(old).expect("an old line");
        assert_eq!(old.scheduling, None);
        assert!(!serde_json::to_string(&old)
            .expect("serialises")
            .contains("scheduling"));
    }
}
