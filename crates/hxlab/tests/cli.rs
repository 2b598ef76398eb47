//! The command line itself: what `hxlab` says when clap refuses a command line (the whole
//! message in a few lines, exit 2).

mod common;

use common::{hxlab, run_with_timeout, usage_error_of, UsageError};
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
