//! The report commands a user runs after measuring: `hxlab diff` of two sets of real
//! `hxlab load` runs (what changed, B/A per figure, significance only with repetitions), and
//! `hxlab report DIR --baseline OTHER` (before/after per cell). Bad input gets one line and a
//! non-zero exit.

mod common;

use common::{hxlab, run_with_timeout, tempfile_dir::TempDir, Server};
use hxlab_core::RunResult;
use hxlab_report::rundiff::RunDiff;
use hxlab_report::{ExperimentMeta, FactorLevels, Record, Workload};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Appends one `hxlab load --json -` document to `file`.
fn load_into(file: &Path, proto: &str, url: &str) {
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).args([
            "load",
            "-q",
            "--no-progress",
            "-n",
            "300",
            "-c",
            "4",
            "--proto",
            proto,
            url,
            "--json",
            "-",
        ]),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{err}");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .expect("open");
    f.write_all(out.as_bytes()).expect("append");
}

#[test]
fn diff_of_real_runs_names_the_change_and_tests_repetitions() {
    let server = Server::start(&[]);
    let plain = server.ready.plain.to_string();
    let url = format!("http://{plain}/bytes/100");
    let dir = TempDir::new("hxlab-diff");
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    for _ in 0..2 {
        load_into(&a, "h1", &url);
        load_into(&b, "h2c", &url);
    }
    let out_json = dir.path().join("diff.json");
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("diff")
            .arg(&a)
            .arg(&b)
            .arg("--json")
            .arg(&out_json),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("(2 run(s))"), "{out}");
    assert!(
        out.contains("factor(s) differ (A → B):\n  protocol: h1 → h2c\n"),
        "{out}"
    );
    assert!(
        out.contains("  protocol (read back): http/1.1 → h2c\n"),
        "{out}"
    );
    let rps = out
        .lines()
        .find(|l| l.trim_start().starts_with("requests/s"))
        .expect("requests/s row");
    assert!(rps.contains("95 % CI") || rps.contains("~ "), "{rps}");
    assert!(!out.contains("one run on a side"), "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).expect("diff.json"))
            .expect("JSON");
    assert_eq!(v["runs"], serde_json::json!([2, 2]));
    let f = &v["figures"][0];
    assert_eq!(f["name"], "requests/s");
    assert_eq!(f["a"].as_array().map(Vec::len), Some(2));
    // B/A is the ratio of the medians of the runs' own figures.
    let a_runs: Vec<f64> = f["a"]
        .as_array()
        .expect("a")
        .iter()
        .filter_map(|x| x.as_f64())
        .collect();
    let am = (a_runs[0] + a_runs[1]) / 2.0;
    assert!((f["a_median"].as_f64().expect("a_median") - am).abs() < 1e-6 * am.max(1.0));

    // One run a side: said, and no significance claimed.
    let one = dir.path().join("one.json");
    load_into(&one, "h1", &url);
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab()).arg("diff").arg(&one).arg(&b),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("one run on a side, so no interval or significance"),
        "{out}"
    );
    assert!(!out.contains("95 % CI"), "{out}");
}

/// `hxlab diff A B --json -` of one real run a side, as its typed JSON.
fn diff_of(a_args: &[&str], b_args: &[&str], url: &str) -> RunDiff {
    let dir = TempDir::new("hxlab-diff-factors");
    let mut files = Vec::new();
    for (name, extra) in [("a.json", a_args), ("b.json", b_args)] {
        let file = dir.path().join(name);
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab())
                .args(["load", "-q", "--no-progress", "-n", "20", "-c", "2", "-k"])
                .args(extra)
                .arg(url)
                .arg("--json")
                .arg(&file),
            Duration::from_secs(60),
        );
        assert_eq!(code, Some(0), "{extra:?}: {err}");
        files.push(file);
    }
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("diff")
            .args(&files)
            .args(["--json", "-"]),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let d: RunDiff = serde_json::from_str(&out).expect("a RunDiff");
    for c in &d.changes {
        assert!(
            err.contains(&format!("  {c}\n")),
            "the table names {c}: {err}"
        );
    }
    d
}

/// The changes' factors and values, for comparing.
fn named(d: &RunDiff) -> Vec<(String, String, String)> {
    d.changes
        .iter()
        .map(|c| (c.factor.clone(), c.a.clone(), c.b.clone()))
        .collect()
}

fn change(f: &str, a: &str, b: &str) -> (String, String, String) {
    (f.into(), a.into(), b.into())
}

/// `hxlab diff` names every factor two real runs differ in — and only those: the controller
/// asked and the one read back from the connections, the protocol asked and negotiated
/// with the header tables it brings, resumption asked and read back.
#[test]
fn diff_names_every_changed_factor() {
    let server = Server::start(&[]);
    let url = format!("https://{}/bytes/100", server.ready.tls);
    let d = diff_of(
        &["--proto", "h2", "--cc", "cubic"],
        &["--proto", "h2", "--cc", "reno"],
        &url,
    );
    assert_eq!(
        named(&d),
        [
            change("cc", "cubic", "reno"),
            change("congestion control, client (read back)", "cubic", "reno"),
        ]
    );
    let d = diff_of(&["--proto", "h2"], &["--proto", "h3"], &url);
    assert_eq!(
        named(&d),
        [
            change("protocol", "h2", "h3"),
            change("protocol (read back)", "h2", "h3"),
            change(
                "header tables (read back)",
                "h2: ours 4096, server's 4096, encoder 4096",
                "h3: ours 4096, server's 4096, encoder 4096, blocked streams 100/100"
            ),
        ]
    );
    let d = diff_of(
        &["--proto", "h2"],
        &["--proto", "h2", "--tls-resume", "--prime"],
        &url,
    );
    assert_eq!(
        named(&d),
        [
            change("prime", "—", "true"),
            change("tls_resume", "—", "true"),
            change("resumed connections (read back)", "none", "all"),
        ]
    );
    // The same setup twice: nothing differs, though the runs' figures do.
    let d = diff_of(&["--proto", "h2"], &["--proto", "h2"], &url);
    assert_eq!(named(&d), []);
}

/// From a lab's results directory, `hxlab diff` also names the server's side the records
/// carry: two cells of one real run (cc and scheduler swept on both ends) differ in the
/// cell's levels, the controller asked and read back at both ends, and the scheduler hxlab's
/// origin read back; a selector that picks no single cell is one line and exit 2.
#[test]
fn diff_of_lab_cells_names_the_servers_controller_and_scheduler() {
    let dir = TempDir::new("hxlab-diff-lab");
    let spec = dir.path().join("e.toml");
    std::fs::write(
        &spec,
        "protocol = \"h2\"\nresources = 12\nsize = \"4KiB\"\nrepetitions = 1\n\
         cc = [\"cubic\", \"reno\"]\nscheduler = [\"rfc9218\", \"fifo\"]\n",
    )
    .expect("spec");
    let out = dir.path().join("out");
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .env("HXLAB_BIN", hxlab())
            .arg("run")
            .arg(&spec)
            .args(["--no-progress", "--out"])
            .arg(&out),
        Duration::from_secs(120),
    );
    assert_eq!(code, Some(0), "{err}");
    let (code, json, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("diff")
            .arg(&out)
            .arg(&out)
            .args(["--a-cell", "cc=cubic scheduler=rfc9218"])
            .args(["--b-cell", "cc=reno scheduler=fifo", "--json", "-"]),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    let d: RunDiff = serde_json::from_str(&json).expect("a RunDiff");
    let mut got = named(&d);
    // Each cell had a server of its own, on its own port.
    got.retain(|(f, _, _)| f != "urls");
    assert_eq!(
        got,
        [
            change("cell: cc", "cubic", "reno"),
            change("cell: scheduler", "rfc9218", "fifo"),
            change("cc", "cubic", "reno"),
            change("congestion control, client (read back)", "cubic", "reno"),
            change("congestion control, server (read back)", "cubic", "reno"),
            change("scheduler (read back)", "rfc9218", "fifo"),
        ]
    );
    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("diff")
            .arg(&out)
            .arg(&out)
            .args(["--a-cell", "cc=cubic"]),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("2 cells match"), "{err}");
}

#[test]
fn diff_refuses_bad_input_with_one_line() {
    let dir = TempDir::new("hxlab-diff-bad");
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a run result\"}\n").expect("write");
    for args in [
        vec![
            "diff",
            junk.to_str().expect("utf-8"),
            junk.to_str().expect("utf-8"),
        ],
        vec!["diff", "/nonexistent/a.json", "/nonexistent/b.json"],
        vec!["diff", "-", "-"],
    ] {
        let (code, _, err) =
            run_with_timeout(Command::new(hxlab()).args(&args), Duration::from_secs(20));
        assert!(matches!(code, Some(c) if c != 0), "{args:?}: {code:?}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
    }
    let (code, _, _) = run_with_timeout(
        Command::new(hxlab()).args(["diff", "-", "-"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "stdin twice is a usage error");
    let (code, _, _) = run_with_timeout(
        Command::new(hxlab()).args(["diff", "only-one.json"]),
        Duration::from_secs(20),
    );
    assert_eq!(code, Some(2), "B missing is a usage error");
}

/// A results directory with protocol h1 and h2 at one delay, five repetitions each; h2's
/// time is `h2_secs`.
fn results_dir(dir: &Path, h2_secs: f64) {
    std::fs::create_dir_all(dir).expect("dir");
    let meta = ExperimentMeta {
        name: "t".into(),
        title: "t".into(),
        workload: Some(Workload::Resources),
        repetitions: 5,
        factors: vec![
            FactorLevels {
                name: "protocol".into(),
                levels: vec!["h1".into(), "h2".into()],
            },
            FactorLevels {
                name: "delay".into(),
                levels: vec!["20ms".into()],
            },
        ],
        ..Default::default()
    };
    std::fs::write(
        dir.join("experiment.json"),
        serde_json::to_string(&meta).expect("meta"),
    )
    .expect("write meta");
    let mut lines = String::new();
    for (p, secs) in [("h1", 0.2), ("h2", h2_secs)] {
        for rep in 0..5u32 {
            let res = RunResult {
                schema: hxlab_core::result::SCHEMA_VERSION,
                duration_s: secs * (1.0 + f64::from(rep) * 0.01),
                requests_started: 10,
                requests_done: 10,
                requests_succeeded: 10,
                negotiated: [(if p == "h1" { "http/1.1" } else { "h2" }.to_string(), 1)]
                    .into_iter()
                    .collect(),
                ..Default::default()
            };
            let factors: BTreeMap<String, String> = [
                ("protocol".to_string(), p.to_string()),
                ("delay".to_string(), "20ms".to_string()),
            ]
            .into_iter()
            .collect();
            let rec = Record {
                experiment: "t".into(),
                cell: format!("protocol={p} delay=20ms"),
                factors,
                repetition: rep,
                result: Some(res),
                ..Default::default()
            };
            lines.push_str(&serde_json::to_string(&rec).expect("record"));
            lines.push('\n');
        }
    }
    std::fs::write(dir.join("results.jsonl"), lines).expect("write results");
}

#[test]
fn report_against_a_baseline_says_what_got_faster() {
    let dir = TempDir::new("hxlab-baseline");
    let (old, new) = (dir.path().join("old"), dir.path().join("new"));
    results_dir(&old, 0.1);
    results_dir(&new, 0.05);
    let (code, out, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("report")
            .arg(&new)
            .arg("--baseline")
            .arg(&old),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("1 cell(s) faster, 0 slower, 1 without a significant change"),
        "{out}"
    );
    assert!(
        out.contains("protocol=h2 delay=20ms: 102.0 → 51.00 ms: 2.00× faster (95 % CI"),
        "{out}"
    );
    let md = std::fs::read_to_string(new.join("report.md")).expect("report.md");
    assert!(md.contains("## Before/after"), "{md}");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(new.join("summary.json")).expect("summary.json"),
    )
    .expect("JSON");
    let rows = summary["before_after"]["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().any(|r| r["cell"] == "protocol=h2 delay=20ms"
        && r["improved"] == true
        && r["significant"] == true));
    let html = std::fs::read_to_string(new.join("report.html")).expect("report.html");
    assert!(html.contains("id=\"before-after\""));

    let (code, _, err) = run_with_timeout(
        Command::new(hxlab())
            .arg("report")
            .arg(&new)
            .arg("--baseline")
            .arg("/nonexistent/dir"),
        Duration::from_secs(30),
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--baseline /nonexistent/dir: not a results directory"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
