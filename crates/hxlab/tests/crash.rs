//! Results survive a crash: `hxlab run` killed with SIGKILL at moments spread over its run,
//! again and again, then resumed, ends with every repetition recorded exactly once, and
//! every line of results.jsonl a whole record.

mod common;

use common::{hxlab, run_with_timeout, tempfile_dir::TempDir};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_run_killed_again_and_again_resumes_to_every_repetition_once() {
    let dir = TempDir::new("hxlab-crash");
    let spec = dir.path().join("c.toml");
    std::fs::write(
        &spec,
        "protocol = [\"h1\", \"h2\"]\nresources = 4\nsize = \"1KiB\"\nrepetitions = 10\n",
    )
    .expect("spec");
    let out = dir.path().join("out");
    let run = || {
        let mut c = Command::new(hxlab());
        c.arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(&out)
            .args(["--no-progress", "--resume"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    // Kill moments spread from the start-up to the middle of a repetition (fixed, so a
    // failure reproduces).
    let kills_ms = [40, 150, 300, 75, 500, 220, 900, 120, 650, 350];
    let mut killed = 0;
    for ms in kills_ms {
        let mut child = run().spawn().expect("start hxlab run");
        let t0 = Instant::now();
        let at = Duration::from_millis(ms);
        while t0.elapsed() < at {
            if child.try_wait().expect("wait").is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().expect("wait").is_none() {
            child.kill().expect("SIGKILL");
            killed += 1;
        }
        let _ = child.wait();
    }
    assert!(
        killed >= 5,
        "only {killed} runs were cut; the test did not test"
    );
    let (code, so, se) = run_with_timeout(&mut run(), Duration::from_secs(120));
    assert_eq!(code, Some(0), "{so}\n{se}");
    let text = std::fs::read_to_string(out.join("results.jsonl")).expect("results");
    assert!(text.ends_with('\n'), "the last record is whole");
    let mut seen = BTreeSet::new();
    for (i, line) in text.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("line {}: not a record ({e}): {line}", i + 1));
        let key = (
            v["cell"].to_string(),
            v["repetition"].as_u64().expect("repetition"),
        );
        assert!(seen.insert(key.clone()), "{key:?} recorded twice");
    }
    assert_eq!(seen.len(), 20, "2 cells × 10 repetitions, each once");
    // The report reads it all.
    let (code, _, se) = run_with_timeout(
        Command::new(hxlab()).args(["report", "-q"]).arg(&out),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{se}");
    assert!(!se.contains("cut short"), "{se}");
}

/// Unmounts when dropped.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A full disk: `hxlab run` stops with one clear line naming the file, and what was written
/// before stays readable (whole records, at most one cut line the report leaves out).
#[test]
fn a_full_disk_is_one_clear_line_and_keeps_what_was_written() {
    if !common::require_root("mounting a small tmpfs") {
        return;
    }
    let dir = TempDir::new("hxlab-full");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir_all(&mnt).expect("mkdir");
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=512k", "tmpfs"])
        .arg(&mnt)
        .status()
        .expect("mount");
    assert!(ok.success(), "mount tmpfs");
    let _mount = Mount(mnt.clone());
    let spec = dir.path().join("f.toml");
    std::fs::write(
        &spec,
        "protocol = [\"h1\"]\nresources = 2\nsize = \"1KiB\"\nrepetitions = 400\n",
    )
    .expect("spec");
    let out = mnt.join("out");
    let (code, so, se) = run_with_timeout(
        Command::new(hxlab())
            .arg("run")
            .arg(&spec)
            .arg("--out")
            .arg(&out)
            .arg("--no-progress"),
        Duration::from_secs(300),
    );
    assert_eq!(code, Some(1), "the disk filled up: {so}\n{se}");
    let errors: Vec<&str> = se
        .lines()
        .filter(|l| l.starts_with("hxlab: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{se}");
    assert!(errors[0].contains("No space left on device"), "{se}");
    let text = std::fs::read_to_string(out.join("results.jsonl")).expect("results kept");
    let whole = text
        .lines()
        .filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
        .count();
    assert!(whole > 0, "records written before the disk filled are kept");
    assert!(text.lines().count() <= whole + 1, "at most one cut line");
}
