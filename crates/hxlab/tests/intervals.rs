//! `hxlab load`'s time series (`--interval`, `--print-intervals`) against `hxlab serve` on
//! loopback: the intervals' counts add up to the run's exactly, every interval sits where
//! the rule puts it, and the open model keeps its rate interval by interval.

mod common;

use common::{hxlab, run_with_timeout};
use hxlab_core::RunResult;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// Runs `hxlab load ARGS --no-progress`; returns (exit code, stdout, stderr).
fn load(args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(hxlab());
    cmd.arg("load").args(args).arg("--no-progress");
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    (code.unwrap_or(-1), out, err)
}

/// The RunResult printed by `--json -`.
fn result_of(out: &str) -> RunResult {
    let line = out
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in {out}"));
    serde_json::from_str(line).expect("a RunResult")
}

/// What every series must satisfy: `ceil(duration / width)` intervals starting at `i·width`,
/// their counts summing exactly to the run's.
fn assert_series_adds_up(r: &RunResult, width: f64) {
    assert_eq!(r.interval_s, width);
    let expected = ((r.duration_s / width) - 1e-9).ceil().max(1.0) as usize;
    assert_eq!(r.intervals.len(), expected, "duration {}", r.duration_s);
    for (i, iv) in r.intervals.iter().enumerate() {
        assert_eq!(iv.start_s, i as f64 * width, "interval {i}");
    }
    let sum = |f: fn(&hxlab_core::result::Interval) -> u64| r.intervals.iter().map(f).sum::<u64>();
    assert_eq!(sum(|i| i.requests_done), r.requests_done);
    assert_eq!(sum(|i| i.requests_succeeded), r.requests_succeeded);
    assert_eq!(sum(|i| i.requests_failed), r.requests_failed);
    assert_eq!(sum(|i| i.errors), r.errors.total());
    assert_eq!(sum(|i| i.bytes_received), r.bytes.total_received);
    assert_eq!(sum(|i| i.latency.len()), r.histograms.latency.len());
    assert!(r.requests_done > 0);
}

#[test]
fn closed_and_open_model_series_add_up_to_the_run() {
    let server = common::Server::start(&[]);
    let plain = server.ready.plain.to_string();
    let url = format!("http://{plain}/bytes/1000");

    // Closed model, 3 s at 1 s: three whole intervals.
    let (code, out, err) = load(&[
        &url,
        "-D",
        "3s",
        "--interval",
        "1s",
        "-c",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = result_of(&out);
    assert_eq!(r.duration_s, 3.0);
    assert_series_adds_up(&r, 1.0);
    assert!(r.intervals.iter().all(|iv| iv.duration_s == 1.0));

    // Open model, 200/s for 3 s, at 500 ms and two threads (their series merged): each
    // whole interval holds at least half of its 100 requests, even on a loaded machine.
    let (code, out, err) = load(&[
        &url,
        "--rate",
        "200",
        "-D",
        "3s",
        "--interval",
        "500ms",
        "-c",
        "4",
        "-t",
        "2",
        "--json",
        "-",
    ]);
    assert_eq!(code, 0, "{err}");
    let r = result_of(&out);
    assert_series_adds_up(&r, 0.5);
    assert_eq!(r.intervals.len(), 6);
    // Each request's send lag is in the interval it was sent in: the counts add up to the
    // run's (sent by completion or not, every measured request that left was recorded).
    let lag: u64 = r.intervals.iter().map(|iv| iv.send_lag.len()).sum();
    assert_eq!(lag, r.histograms.send_lag.len());
    assert!(lag >= 500, "{lag}");
    for iv in r.intervals.iter().filter(|iv| iv.duration_s == 0.5) {
        assert!(
            iv.requests_done >= 50,
            "{} at {} s",
            iv.requests_done,
            iv.start_s
        );
    }

    // The table: a header and one line per interval, on stdout without --json -.
    let (code, out, err) = load(&[&url, "-D", "2s", "--print-intervals", "-q"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    for word in [
        "t (s)", "req/s", "Mbit/s", "failed", "errors", "p50 ms", "p99 ms",
    ] {
        assert!(lines[0].contains(word), "{out}");
    }
    assert!(lines[1].trim_start().starts_with("0.000"), "{out}");
    assert!(lines[2].trim_start().starts_with("1.000"), "{out}");
    assert!(
        !lines[0].contains("lag"),
        "closed model, no send lag: {out}"
    );
    // The open model adds the send lag p99 column.
    let (code, out, err) = load(&[&url, "--rate", "100", "-D", "1s", "--print-intervals", "-q"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].ends_with("lag p99 ms"), "{out}");
    assert_eq!(lines[1].split_whitespace().count(), 8, "{out}");
    // With --json - the table goes to stderr, stdout keeps the JSON alone; --interval 0
    // records no series.
    let (code, out, err) = load(&[
        &url,
        "-n",
        "20",
        "--interval",
        "0",
        "--print-intervals",
        "-q",
        "--json",
        "-",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    let r = result_of(&out);
    assert!(r.intervals.is_empty() && r.interval_s == 0.0);
    assert!(out.contains("\"requests_done\":20"), "{out}");
    assert!(!out.contains("interval"), "{out}");
    assert!(err.contains("none recorded"), "{err}");
}

#[test]
fn bad_intervals_are_one_line_and_exit_2() {
    for bad in ["-1s", "abc", "-1", "2years"] {
        let (code, out, err) = load(&["http://127.0.0.1:9/", "--interval", bad]);
        assert_eq!(code, 2, "--interval {bad}: {err}");
        assert!(out.is_empty(), "{out}");
        assert_eq!(err.trim().lines().count(), 1, "--interval {bad}: {err}");
        assert!(err.contains("--interval"), "{err}");
    }
}

/// Two shards started together merge their series index by index (`hxlab merge`, which
/// prints it with --print-intervals); a part of another width is refused in one line.
#[test]
fn shards_merge_their_series_index_by_index() {
    let server = common::Server::start(&[]);
    let plain = server.ready.plain.to_string();
    let url = format!("http://{plain}/bytes/100");
    let dir = common::tempfile_dir::TempDir::new("hxlab-intervals-merge");
    let start_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
        + 2.0;
    let start_at = format!("{start_at:.3}");
    let mut files = Vec::new();
    let mut runs = Vec::new();
    for shard in ["0/2", "1/2"] {
        let path = dir.path().join(format!("s{}.json", &shard[..1]));
        let mut cmd = Command::new(hxlab());
        cmd.args(["load", &url, "-D", "2s", "-c", "2", "--shard", shard, "-q"])
            .args(["--no-progress", "--start-at", &start_at, "--json"])
            .arg(&path);
        runs.push(cmd.spawn().expect("hxlab load"));
        files.push(path);
    }
    for mut r in runs {
        assert!(r.wait().unwrap().success());
    }
    let parts: Vec<RunResult> = files
        .iter()
        .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
        .collect();
    let mut cmd = Command::new(hxlab());
    cmd.args(["merge", "--print-intervals", "-q"]).args(&files);
    let (code, out, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(0), "{err}");
    let merged = result_of(&out);
    assert_series_adds_up(&merged, 1.0);
    assert_eq!(merged.intervals.len(), 2);
    for (i, iv) in merged.intervals.iter().enumerate() {
        let parts_done: u64 = parts.iter().map(|p| p.intervals[i].requests_done).sum();
        assert_eq!(iv.requests_done, parts_done, "interval {i}");
    }
    // The table on stderr (stdout holds the merged JSON): a header and two lines.
    let table: Vec<&str> = err.lines().skip_while(|l| !l.contains("req/s")).collect();
    assert_eq!(table.len(), 3, "{err}");

    // The same part at another width.
    let mut other = parts[1].clone();
    other.interval_s = 0.5;
    let other_path = dir.path().join("other.json");
    std::fs::write(&other_path, serde_json::to_string(&other).unwrap()).unwrap();
    let mut cmd = Command::new(hxlab());
    cmd.args(["merge", "--mixed"])
        .arg(&files[0])
        .arg(&other_path);
    let (code, _, err) = run_with_timeout(&mut cmd, LIMIT);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("different intervals (1 s vs 0.5 s)"), "{err}");
}
