//! The lab's jobs for a load generator inside a link: `hxlab run` starts
//! `hxlab link --config LINK -- hxlab load --jobs` once per group of network cells and hands
//! it one [`LoadJob`] per repetition as a JSON line on its standard input; `hxlab load --jobs`
//! runs them one after the other in its one process, inside the link's namespace, and
//! answers each with one
//! [`JobDone`] line on its standard output. Two process hops from the runner to a run (the
//! link holds the namespace and relays its packets; the load generator must be inside it),
//! and the link stays up while each cell is still measured on its own.

use crate::LoadConfig;
use std::path::PathBuf;

/// One repetition to run inside the link.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LoadJob {
    /// The run; URLs naming loopback are sent to the link's host address
    /// (`$HXLAB_LINK_HOST`).
    pub config: LoadConfig,
    /// Where the RunResult (JSON) is written.
    pub result: PathBuf,
    /// Longest the run may take, milliseconds. A run still going then cannot be reclaimed in
    /// the process: the job is answered as stopped and the process exits, so the runner
    /// records the rest of its group as failed rather than waiting.
    pub limit_ms: u64,
}

/// What became of one [`LoadJob`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct JobDone {
    /// The exit status `hxlab load` would have had for this run alone (0 done, 1 failed,
    /// 2 refused configuration); None when it was stopped at its limit.
    pub exit: Option<i32>,
    /// Why it did not run to an exit status, if so.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both lines round-trip, and a key neither side knows is refused (the runner and the
    /// load generator are the same binary, so one means a bug).
    #[test]
    fn jobs_and_answers_round_trip_and_refuse_unknown_keys() {
        let job = LoadJob {
            config: LoadConfig {
                urls: vec!["http://127.0.0.1:8080/bytes/1".into()],
                ..Default::default()
            },
            result: PathBuf::from("/tmp/r.json"),
            limit_ms: 10_000,
        };
        let line = serde_json::to_string(&job).unwrap();
        assert!(!line.contains('\n'));
        assert_eq!(serde_json::from_str::<LoadJob>(&line).unwrap(), job);
        let done = JobDone {
            exit: None,
            error: Some("stopped".into()),
        };
        let line = serde_json::to_string(&done).unwrap();
        assert_eq!(serde_json::from_str::<JobDone>(&line).unwrap(), done);
        assert!(serde_json::from_str::<JobDone>(r#"{"exit":0,"error":null,"x":1}"#).is_err());
    }
}
