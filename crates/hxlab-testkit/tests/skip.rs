//! The skip rule as a test sees it: this test binary runs its own ignored test, which needs a
//! peer that does not exist, once under CI and once not, and reads what cargo would show.

use std::process::{Command, Output};

const MISSING: &str = "hxlab-testkit-no-such-peer";

/// Run only by `skip_fails_under_ci_and_is_loud_elsewhere`, in a child process.
#[test]
#[ignore = "run by skip_fails_under_ci_and_is_loud_elsewhere"]
fn needs_a_missing_peer() {
    let Some(_) = hxlab_testkit::require_peer(MISSING) else {
        return;
    };
    panic!("`{MISSING}` was found");
}

fn run_needs_a_missing_peer(ci: Option<&str>) -> Output {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    // Output capture stays on, as under a plain `cargo test`.
    cmd.args([
        "--ignored",
        "--exact",
        "needs_a_missing_peer",
        "--test-threads",
        "1",
    ]);
    cmd.env_remove("CI");
    if let Some(v) = ci {
        cmd.env("CI", v);
    }
    cmd.output().expect("run the test binary")
}

#[test]
fn skip_fails_under_ci_and_is_loud_elsewhere() {
    let out = run_needs_a_missing_peer(None);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "SKIPPED: needs_a_missing_peer: peer `{MISSING}` is not installed"
        )),
        "the SKIPPED line passes libtest's capture:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    // Any value of CI counts, not only "true".
    for ci in ["true", "1", ""] {
        let out = run_needs_a_missing_peer(Some(ci));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "CI={ci:?}: {text}");
        assert!(
            text.contains(&format!("needs_a_missing_peer: peer `{MISSING}` is not installed; install it with `apt-get install {MISSING}`")),
            "CI={ci:?}: the failure names the peer and how to get it: {text}"
        );
    }
}
