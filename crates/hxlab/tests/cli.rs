//! The command line itself: what `hxlab` says when clap refuses a command line (the whole
//! message in a few lines, exit 2); the shell completion scripts, run by bash itself; the
//! manual pages, read by man-db's `man`.

mod common;

use common::{
    hxlab, require_peer, run_with_timeout, tempfile_dir::TempDir, usage_error_of, UsageError,
};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(20);

/// Runs `hxlab args`, which clap must refuse: exit 2, nothing on stdout, and stderr read as a
/// usage error.
fn refused(args: &[&str]) -> UsageError {
    let (code, out, err) = run_with_timeout(Command::new(hxlab()).args(args), LIMIT);
    let what = format!("hxlab {}", args.join(" "));
    assert_eq!(code, Some(2), "{what}: exit status\n{err}");
    assert!(out.is_empty(), "{what}: stdout: {out}");
    usage_error_of(&what, &err)
}

/// Every missing argument is named (clap lists them after its first line), and the usage
/// line shows where it goes.
#[test]
fn missing_arguments_are_named_with_the_usage_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["load", "-D", "2"], "<URL>..."),
        (&["trace", "-k"], "<URLS>..."),
        (&["report"], "<DIR>"),
        (&["diff", "a.json"], "<B>"),
        (&["k8s", "render"], "<load ARGS>..."),
        (&["page", "--replay", "F"], "--proto <PROTO>"),
    ];
    for (args, missing) in cases {
        let error = refused(args);
        assert!(
            error.what.contains("required arguments were not provided"),
            "{args:?}: {}",
            error.what
        );
        assert_eq!(error.details, [*missing], "{args:?}");
        let usage = error.usage.unwrap_or_default();
        assert!(
            usage.starts_with(&format!("Usage: hxlab {}", args[0])) && usage.contains(missing),
            "{args:?}: usage line {usage:?}"
        );
    }
}

/// A misspelt flag or subcommand gets clap's suggestion of the one that exists.
#[test]
fn a_misspelt_flag_gets_the_similar_one() {
    let error = refused(&["load", "--request", "5", "http://127.0.0.1:9/"]);
    assert!(error.what.contains("'--request'"), "{}", error.what);
    assert_eq!(
        error.details,
        ["tip: a similar argument exists: '--requests'"]
    );
    assert!(error
        .usage
        .is_some_and(|u| u.starts_with("Usage: hxlab load")));

    let error = refused(&["serv"]);
    assert_eq!(error.details, ["tip: a similar subcommand exists: 'serve'"]);
}

/// A value outside a fixed set lists the values that would do.
#[test]
fn an_unknown_value_lists_the_possible_ones() {
    let error = refused(&["load", "--proto", "h4", "http://127.0.0.1:9/"]);
    assert!(error.what.contains("'h4'"), "{}", error.what);
    assert_eq!(
        error.details,
        ["[possible values: h1, h2, h2c, h3, auto]"],
        "{}",
        error.what
    );
}

/// `hxlab args` must succeed: its stdout.
fn stdout_of(args: &[&str]) -> String {
    let (code, out, err) = run_with_timeout(Command::new(hxlab()).args(args), LIMIT);
    assert_eq!(code, Some(0), "hxlab {}: {err}", args.join(" "));
    out
}

/// What bash's own completion machinery offers for the words of `line` (the last one being
/// completed), with hxlab's script sourced: the script's function run as `complete -F` runs it.
fn bash_completes(bash: &Path, script: &Path, line: &[&str]) -> Vec<String> {
    let words: Vec<String> = line.iter().map(|w| format!("'{w}'")).collect();
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={}\n_hxlab hxlab '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words.join(" "),
        line.len() - 1,
        line[line.len() - 1],
        line[line.len() - 2],
    );
    let (code, out, err) =
        run_with_timeout(Command::new(bash).args(["--norc", "-c", &program]), LIMIT);
    assert_eq!(code, Some(0), "{line:?}: {err}");
    out.lines().map(str::to_string).collect()
}

/// The bash script is valid bash (`bash -n`), and sourced, it completes subcommands, flags
/// and fixed values.
#[test]
fn bash_completion_completes_subcommands_flags_and_values() {
    let Some(bash) = require_peer("bash") else {
        return;
    };
    let dir = TempDir::new("hxlab-completions");
    let script = dir.path().join("hxlab.bash");
    std::fs::write(&script, stdout_of(&["completions", "bash"])).expect("write the script");
    let (code, _, err) = run_with_timeout(Command::new(&bash).arg("-n").arg(&script), LIMIT);
    assert_eq!(code, Some(0), "bash -n: {err}");

    assert_eq!(bash_completes(&bash, &script, &["hxlab", "lo"]), ["load"]);
    let all = bash_completes(&bash, &script, &["hxlab", ""]);
    for sub in [
        "serve",
        "load",
        "link",
        "compare",
        "k8s",
        "completions",
        "man",
    ] {
        assert!(all.iter().any(|w| w == sub), "{sub} not offered: {all:?}");
    }
    assert_eq!(
        bash_completes(&bash, &script, &["hxlab", "load", "--req"]),
        ["--requests"]
    );
    assert_eq!(
        bash_completes(&bash, &script, &["hxlab", "load", "--proto", ""]),
        ["h1", "h2", "h2c", "h3", "auto"]
    );
}

/// zsh's and fish's scripts declare themselves for hxlab and list its subcommands (neither
/// shell is a peer of the tests; their scripts come from the same definitions as bash's).
#[test]
fn zsh_and_fish_scripts_offer_the_subcommands() {
    let zsh = stdout_of(&["completions", "zsh"]);
    assert!(
        zsh.starts_with("#compdef hxlab"),
        "{}",
        &zsh[..zsh.len().min(200)]
    );
    assert!(zsh.contains("'load:Load generator"), "zsh: no load");
    let fish = stdout_of(&["completions", "fish"]);
    assert!(
        fish.contains(r#"complete -c hxlab -n "__fish_hxlab_needs_command" -f -a "load""#),
        "fish: no load"
    );
    let error = refused(&["completions", "tcsh"]);
    assert!(error.details[0].contains("bash"), "{:?}", error.details);
}

/// `hxlab man --out DIR` writes hxlab.1 and a page for every subcommand hxlab.1 lists (and
/// theirs), each of which man-db's `man` renders without a warning; `hxlab man` alone prints
/// hxlab.1.
#[test]
fn man_pages_render_for_every_subcommand() {
    let Some(man) = require_peer("man") else {
        return;
    };
    let dir = TempDir::new("hxlab-man");
    let out = dir.path().join("man/man1");
    stdout_of(&["man", "--out", out.to_str().expect("utf-8")]);
    let top = std::fs::read_to_string(out.join("hxlab.1")).expect("hxlab.1");
    assert_eq!(stdout_of(&["man"]), top, "`hxlab man` prints hxlab.1");

    let mut pages: Vec<String> = std::fs::read_dir(&out)
        .expect("--out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for want in [
        "hxlab.1",
        "hxlab-load.1",
        "hxlab-k8s-render.1",
        "hxlab-man.1",
    ] {
        assert!(pages.iter().any(|p| p == want), "{want} missing: {pages:?}");
    }
    // hxlab.1 refers to each subcommand as `hxlab\-NAME(1)`; each has its page.
    let listed: Vec<&str> = top
        .lines()
        .filter_map(|l| l.strip_prefix("hxlab\\-")?.strip_suffix("(1)"))
        .collect();
    assert!(listed.len() >= 14, "subcommands in hxlab.1: {listed:?}");
    for sub in &listed {
        let page = format!("hxlab-{sub}.1");
        assert!(pages.contains(&page), "{page} missing: {pages:?}");
    }

    for page in &pages {
        let (code, text, warnings) = run_with_timeout(
            Command::new(&man)
                .args(["--warnings=w", "-l"])
                .arg(out.join(page))
                .env("MANWIDTH", "100"),
            LIMIT,
        );
        assert_eq!(code, Some(0), "man -l {page}: {warnings}");
        assert!(warnings.is_empty(), "man -l {page} warns:\n{warnings}");
        let name = page.trim_end_matches(".1");
        assert!(
            text.contains("NAME") && text.contains("SYNOPSIS") && text.contains(name),
            "man -l {page}:\n{text}"
        );
    }
    let load = std::fs::read_to_string(out.join("hxlab-load.1")).expect("hxlab-load.1");
    assert!(
        load.contains("\\-\\-requests"),
        "hxlab-load.1 has no --requests"
    );
}
