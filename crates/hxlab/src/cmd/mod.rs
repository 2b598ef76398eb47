//! One module per subcommand: each defines its clap `Args` and a `run` that returns the exit
//! code. Errors become one line on stderr in `main`.

pub mod compare;
mod compare_live;
mod compare_page;
pub mod completions;
pub mod diff;
pub mod k8s;
pub mod link;
pub mod load;
pub mod man;
pub mod merge;
mod metrics;
pub mod page;
pub mod probe;
mod probe_priorities;
pub mod report;
pub mod run;
pub mod schema;
pub mod serve;
pub mod trace;

use std::process::ExitCode;

/// A usage error (bad value in an otherwise well-formed command line): exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Builds a usage error (exit 2) with one line of text.
pub fn usage(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(UsageError(msg.into()))
}

/// The error chain on one line: "context: cause: root cause".
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string().replace('\n', " ");
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ")
}

/// Whether a usage error is anywhere in the chain.
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<UsageError>())
}

/// 2 for usage errors anywhere in the chain, 1 otherwise.
pub fn exit_code_of(e: &anyhow::Error) -> ExitCode {
    if is_usage(e) {
        ExitCode::from(2)
    } else {
        ExitCode::from(1)
    }
}
