//! The `hxlab` binary: clap definitions and one thin module per subcommand. All the work is
//! in the `hxlab-*` library crates; this only wires them to the command line.

mod cmd;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// Should we turn on HTTP/2 or HTTP/3, and what does it buy us here?
#[derive(Parser, Debug)]
#[command(name = "hxlab", version = VERSION, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Origin server for HTTP/1.1, HTTP/1.1+TLS, HTTP/2 (ALPN), h2c and HTTP/3.
    Serve(cmd::serve::Args),
    /// Load generator for every protocol, h2load-compatible flags, one way of counting.
    Load(Box<cmd::load::Args>),
    /// Packet-level network emulation around a command (delay, loss, rate, queues, traces).
    Link(cmd::link::Args),
    /// Run an experiment file or a built-in scenario; write results and reports.
    Run(cmd::run::Args),
    /// Quick built-in comparison of h1, h1+TLS, h2 and h3 on loopback: table and report.
    Compare(cmd::compare::Args),
    /// Re-render the report of a results directory.
    Report(cmd::report::Args),
    /// Merge RunResults (parts of one run: shards, pods, machines) into one, exactly,
    /// checking that every part is there once.
    Merge(cmd::merge::Args),
    /// Two sets of `hxlab load` results side by side: what changed, every figure with B/A,
    /// intervals and significance when both sides have repetitions.
    Diff(cmd::diff::Args),
    /// Kubernetes: render an Indexed Job that runs `hxlab load` as N shards started together.
    K8s(cmd::k8s::Args),
    /// Page loads in headless Chromium over a chosen protocol.
    Page(cmd::page::Args),
    /// Frame-level view of one connection (h1, h2, h3).
    Trace(cmd::trace::Args),
    /// Which protocols a host offers: ALPN (h1, h2), Alt-Svc and QUIC (h3), h2c.
    Probe(cmd::probe::Args),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell) to stdout.
    Completions(cmd::completions::Args),
    /// Print the manual page (roff) to stdout, or write one page per subcommand with --out DIR.
    Man(cmd::man::Args),
    /// The strict JSON Schemas of RunResult, every --config and what children report
    /// (docs/schema/): print, write or check them.
    Schema(cmd::schema::Args),
}

/// `hxlab --version`: the version, the commit it was built from, and its optional features.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HXLAB_COMMIT"),
    "; optional features: none)"
);

fn main() -> ExitCode {
    hxlab_core::env::set_build(hxlab_core::env::Build {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: env!("HXLAB_COMMIT").to_string(),
        features: Vec::new(),
    });
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    let outcome = match cli.command {
        Command::Serve(a) => cmd::serve::run(a),
        Command::Load(a) => cmd::load::run(*a),
        Command::Link(a) => cmd::link::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Merge(a) => cmd::merge::run(a),
        Command::Diff(a) => cmd::diff::run(a),
        Command::K8s(a) => cmd::k8s::run(a),
        Command::Page(a) => cmd::page::run(a),
        Command::Probe(a) => cmd::probe::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Completions(a) => cmd::completions::run(a, Cli::command()),
        Command::Man(a) => cmd::man::run(a, Cli::command()),
        Command::Schema(a) => cmd::schema::run(a),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("hxlab: error: {}", cmd::one_line(&e));
            cmd::exit_code_of(&e)
        }
    }
}

/// A command line clap refuses: exit 2 with clap's whole message (what is wrong, the missing
/// arguments, its "a similar argument exists" tip, the usage line) in a few lines; `--help` and
/// `--version` print as clap prints them.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return if e.use_stderr() {
            ExitCode::from(2)
        } else {
            ExitCode::SUCCESS
        };
    }
    eprint!("{}", usage_message(&e.render().to_string()));
    ExitCode::from(2)
}

/// clap's rendered error in hxlab's voice: the first line starts `hxlab: error:` as every
/// other error does; blank lines and the closing "For more information, try '--help'" go, so
/// the message is a few lines that each say something (what is wrong, the missing arguments
/// or possible values, clap's tip, the usage line).
fn usage_message(clap_text: &str) -> String {
    let mut lines = clap_text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"));
    let first = lines.next().unwrap_or("invalid command line");
    let mut text = format!("hxlab: error: {}\n", first.trim_start_matches("error: "));
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}
