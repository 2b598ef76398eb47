//! The lab's agent inside a link: the runner starts `hxlab link … -- hxlab lab-agent` once
//! per group of network cells and hands it one [`LoadJob`] per repetition as a JSON line on
//! its stdin; the agent runs `hxlab load --config` for it (a child process, as on loopback)
//! and answers with one [`JobDone`] line on its stdout. Between two jobs the runner reads the
//! server's counters, so the link stays up while each cell is still measured on its own.

use hxlab_contract::LoadConfig;
use hxlab_page::child::run_bounded;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The sub-command of `hxlab` that runs [`serve_jobs`] (hidden from `--help`).
pub const AGENT_COMMAND: &str = "lab-agent";

/// One repetition to run inside the link.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadJob {
    /// The run; URLs naming loopback are sent to the link's host address.
    pub config: LoadConfig,
    /// Where `hxlab load --json` writes the RunResult.
    pub result: PathBuf,
    /// Longest the run may take before it is stopped, milliseconds.
    pub limit_ms: u64,
}

/// What became of one [`LoadJob`].
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobDone {
    /// `hxlab load`'s exit code; None when it was stopped or could not start.
    pub exit: Option<i32>,
    /// Why it did not run to an exit code, if so.
    pub error: Option<String>,
}

/// Runs every job read from `input` (one JSON [`LoadJob`] per line) until it ends, answering
/// each with one JSON [`JobDone`] line on `output`. `link_host` is the address loopback URLs
/// are rewritten to; `hxlab_bin` the binary to run `load` from. A line that is not a job is
/// an error (the runner and the agent are the same binary, so it means a bug).
pub fn serve_jobs(
    input: impl BufRead,
    mut output: impl Write,
    link_host: &str,
    hxlab_bin: &Path,
) -> Result<(), String> {
    for line in input.lines() {
        let line = line.map_err(|e| format!("reading jobs: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let job: LoadJob =
            serde_json::from_str(&line).map_err(|e| format!("not a load job: {e}"))?;
        let done = run_job(job, link_host, hxlab_bin);
        let reply = serde_json::to_string(&done).map_err(|e| e.to_string())?;
        writeln!(output, "{reply}")
            .and_then(|_| output.flush())
            .map_err(|e| format!("answering the runner: {e}"))?;
    }
    Ok(())
}

/// One job: the configuration, its URLs moved to the link's host, written next to the result
/// and run by `hxlab load --config`; its stderr passed on to ours (the runner keeps its end).
fn run_job(job: LoadJob, link_host: &str, hxlab_bin: &Path) -> JobDone {
    let mut config = job.config;
    config.urls = config
        .urls
        .iter()
        .map(|u| hxlab_page::origin::loopback_to(u, link_host))
        .collect();
    let config_path = job.result.with_extension("config.json");
    if let Err(e) = std::fs::write(&config_path, config.to_json()) {
        return JobDone {
            exit: None,
            error: Some(format!("{}: {e}", config_path.display())),
        };
    }
    let mut cmd = Command::new(hxlab_bin);
    cmd.arg("load")
        .arg("--config")
        .arg(&config_path)
        .arg("--no-progress")
        .arg("--json")
        .arg(&job.result);
    let outcome = run_bounded(cmd, Duration::from_millis(job.limit_ms));
    let _ = std::fs::remove_file(&config_path);
    match outcome {
        Ok((exit, stderr)) => {
            eprint!("{stderr}");
            JobDone { exit, error: None }
        }
        Err(e) => JobDone {
            exit: None,
            error: Some(e),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(dir: &Path, n: u32) -> LoadJob {
        LoadJob {
            config: LoadConfig {
                urls: vec!["http://127.0.0.1:8080/bytes/1".into()],
                ..Default::default()
            },
            result: dir.join(format!("r{n}.json")),
            limit_ms: 10_000,
        }
    }

    /// Each job line gets one answer line with the child's exit status, in order; the
    /// configuration file it ran from is gone afterwards; a line that is not a job ends the
    /// agent with an error.
    #[test]
    fn answers_every_job_with_its_exit_status() {
        let dir = std::env::temp_dir().join(format!("hxlab-agent-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut input = String::new();
        for n in 0..3 {
            input.push_str(&serde_json::to_string(&job(&dir, n)).unwrap());
            input.push('\n');
        }
        let mut out = Vec::new();
        // `false` stands in for the binary: a real process whose exit status is known.
        serve_jobs(input.as_bytes(), &mut out, "10.0.0.1", Path::new("false")).unwrap();
        let replies: Vec<JobDone> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(replies.len(), 3);
        assert!(replies
            .iter()
            .all(|r| r.exit == Some(1) && r.error.is_none()));
        assert!(!dir.join("r0.config.json").exists());
        let e = serve_jobs(
            "{\"nope\":1}\n".as_bytes(),
            Vec::new(),
            "h",
            Path::new("false"),
        );
        assert!(e.unwrap_err().contains("not a load job"));
        let missing = run_job(job(&dir, 9), "10.0.0.1", Path::new("/nonexistent/hxlab"));
        assert_eq!(missing.exit, None);
        assert!(missing.error.is_some());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
