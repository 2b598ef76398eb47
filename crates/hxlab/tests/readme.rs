//! The README's commands, run as a reader runs them.
//!
//! - The first-steps block: every line not marked `# needs the Internet`, in order and
//!   verbatim (`sh -c LINE`), in a temporary directory (the files they write land there),
//!   with the freshly built debug `hxlab` first on PATH. Each must exit 0 within
//!   [`STEP_LIMIT`]. `cargo install --path crates/hxlab` is not run (a release build takes
//!   about 10 minutes): it is checked to come before the first bare `hxlab`. `hxlab serve`
//!   runs in the background for the lines after it and is stopped by its process group at the
//!   end; it must still be running then. `hxlab link` needs root, `hxlab page` and
//!   `compare --har` Chromium (the one skip rule: a failure under CI).
//! - The top block: `cargo run --release -p hxlab -- compare` is run as `hxlab compare` (the
//!   same arguments, the debug build); `cargo test --workspace` is not run (this test is part
//!   of it).
//! - Everything else the README names: every `hxlab ...` in backquotes is a subcommand that
//!   exists, every `--flag` in backquotes is a flag of the command it goes with (of some
//!   subcommand when its line names none), and every `--scenario NAME` loads. The lines that
//!   need the Internet are held to the same.

mod common;

use common::{hxlab, require_peer, require_root, run_with_timeout, tempfile_dir::TempDir};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The longest one first-steps line may take (the slowest, `compare --har`, takes about a
/// minute here with other builds running).
const STEP_LIMIT: Duration = Duration::from_secs(240);

/// The mark of a line that reaches hosts elsewhere.
const NEEDS_INTERNET: &str = "# needs the Internet";

/// The ports the README's `hxlab serve` listens on (its comment says so), TCP; h3 on UDP 8443.
const SERVE_PORTS: [u16; 2] = [8443, 8080];

fn readme() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of the first ```sh block after the line starting with `after` ("" for the
/// file's first block).
fn sh_block(readme: &str, after: &str) -> Vec<String> {
    let mut lines = readme.lines().skip_while(|l| !l.starts_with(after));
    lines
        .find(|l| l.trim() == "```sh")
        .unwrap_or_else(|| panic!("no ```sh block after {after:?}"));
    lines
        .take_while(|l| l.trim() != "```")
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn first_steps() -> Vec<String> {
    sh_block(&readme(), "A few first steps")
}

/// A line's command without its trailing comment (`  # ...`); the README's commands have no
/// ` #` of their own.
fn command_of(line: &str) -> &str {
    line.split(" #").next().unwrap_or(line).trim()
}

/// What the test does with a first-steps line.
#[derive(Debug, PartialEq)]
enum Step {
    /// `cargo install`: checked for its place, not run.
    Install,
    /// Marked as needing the Internet: not run.
    Internet,
    /// A server that runs until stopped: started in the background.
    Background,
    /// Run to its end.
    Run,
}

fn step_of(line: &str) -> Step {
    let command = command_of(line);
    if command.starts_with("cargo install") {
        Step::Install
    } else if line.contains(NEEDS_INTERNET) {
        Step::Internet
    } else if command == "hxlab serve" {
        Step::Background
    } else {
        Step::Run
    }
}

/// PATH with the directory of the freshly built `hxlab` first.
fn path_with_hxlab() -> std::ffi::OsString {
    let dir = hxlab()
        .parent()
        .expect("the binary's directory")
        .to_path_buf();
    let rest = std::env::var_os("PATH").unwrap_or_default();
    std::env::join_paths(std::iter::once(dir).chain(std::env::split_paths(&rest))).expect("PATH")
}

/// A README line running under `sh -c` in a process group of its own, so that stopping it
/// stops what it started too; its output goes to a log file. Stopped when dropped.
struct ShellLine {
    child: Child,
    line: String,
    log: PathBuf,
}

impl ShellLine {
    fn spawn(line: &str, cwd: &Path, log: PathBuf) -> ShellLine {
        let out = File::create(&log).expect("log file");
        let child = Command::new("sh")
            .arg("-c")
            .arg(line)
            .current_dir(cwd)
            .env("PATH", path_with_hxlab())
            // The lab would otherwise start its children from another binary.
            .env_remove("HXLAB_BIN")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("sh -c {line}: {e}"));
        ShellLine {
            child,
            line: line.to_string(),
            log,
        }
    }

    /// Waits at most `limit` for the line to end: its status, or None after stopping it.
    fn wait(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
        None
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM to the line's process group, SIGKILL after 10 s.
    fn stop(&mut self) {
        let group = -(self.child.id() as i32);
        // SAFETY: kill has no memory preconditions; the group is the one this line leads.
        unsafe { libc::kill(group, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline && self.running() {
            std::thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: as above; whatever of the group is left.
        unsafe { libc::kill(group, libc::SIGKILL) };
        let _ = self.child.wait();
    }

    /// The last lines of its output, for a failure message.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for ShellLine {
    fn drop(&mut self) {
        if self.running() {
            self.stop();
        }
    }
}

/// Whether this machine has what `line` needs beyond hxlab; when not, the one skip rule
/// (a failure under CI) has said so.
fn has_what_it_needs(line: &str) -> bool {
    if (line.contains("hxlab link") || line.contains("Regular 4G"))
        && !require_root(&format!("`{}` (an emulated link)", command_of(line)))
    {
        return false;
    }
    if line.contains("curl ") && require_peer("curl").is_none() {
        return false;
    }
    let browser = line.contains("hxlab page") || line.contains("--har");
    !(browser && require_peer("chromium").is_none())
}

/// Starts the README's `hxlab serve` and waits until its ports accept.
fn start_serve(line: &str, cwd: &Path, logs: &Path) -> ShellLine {
    for port in SERVE_PORTS {
        assert!(
            std::net::TcpListener::bind(("127.0.0.1", port)).is_ok(),
            "port {port} is taken by another program; the README's `hxlab serve` needs it"
        );
    }
    let mut serve = ShellLine::spawn(line, cwd, logs.join("serve.log"));
    let deadline = Instant::now() + Duration::from_secs(20);
    for port in SERVE_PORTS {
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                serve.running() && Instant::now() < deadline,
                "`{line}` did not listen on {port}:\n{}",
                serve.tail()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    serve
}

/// The first-steps block, run in order as written (see the file's comment).
#[test]
fn first_steps_run_as_written() {
    let lines = first_steps();
    let install = lines.iter().position(|l| step_of(l) == Step::Install);
    let first_hxlab = lines.iter().position(|l| l.starts_with("hxlab "));
    assert!(
        matches!((install, first_hxlab), (Some(i), Some(h)) if i < h),
        "`cargo install --path crates/hxlab` must come before the first bare `hxlab`: {lines:#?}"
    );
    let work = TempDir::new("hxlab-readme");
    let logs = TempDir::new("hxlab-readme-logs");
    let mut background: Vec<ShellLine> = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        match step_of(line) {
            Step::Install | Step::Internet => {
                eprintln!("not run  {line}");
                continue;
            }
            Step::Background => background.push(start_serve(line, work.path(), logs.path())),
            Step::Run => {
                if !has_what_it_needs(line) {
                    continue;
                }
                let t0 = Instant::now();
                let mut run =
                    ShellLine::spawn(line, work.path(), logs.path().join(format!("{n}.log")));
                let status = run.wait(STEP_LIMIT);
                eprintln!("{:6.1} s  {line}", t0.elapsed().as_secs_f64());
                assert!(
                    status.is_some_and(|s| s.success()),
                    "README line {} {}:\n{line}\n{}",
                    n + 1,
                    status.map_or(format!("did not end within {STEP_LIMIT:?}"), |s| format!(
                        "failed: {s}"
                    )),
                    run.tail()
                );
            }
        }
    }
    for server in &mut background {
        assert!(
            server.running(),
            "`{}` ended early:\n{}",
            server.line,
            server.tail()
        );
    }
}

/// The top block: the main job and the test command, first and in that order.
#[test]
fn top_commands_run() {
    let block = sh_block(&readme(), "");
    let commands: Vec<&str> = block.iter().map(|l| command_of(l)).collect();
    assert_eq!(
        commands,
        [
            "cargo run --release -p hxlab -- compare",
            "cargo test --workspace"
        ],
        "the README opens with the main job and the tests"
    );
    // `cargo run --release -p hxlab -- ARGS` is `hxlab ARGS`, built in release; the debug
    // build runs it here (a release build takes about 10 minutes). `cargo test --workspace`
    // runs this test, so it is not run from it.
    let args = commands[0]
        .split(" -- ")
        .nth(1)
        .expect("arguments after --");
    let work = TempDir::new("hxlab-readme-top");
    let mut run = ShellLine::spawn(
        &format!("hxlab {args}"),
        work.path(),
        work.path().join("compare.log"),
    );
    let status = run.wait(STEP_LIMIT);
    assert!(
        status.is_some_and(|s| s.success()),
        "hxlab {args}: {status:?}\n{}",
        run.tail()
    );
}

/// `hxlab PATH --help`, each asked once.
struct Helps(BTreeMap<Vec<String>, String>);

impl Helps {
    fn of(&mut self, path: &[String]) -> &str {
        self.0.entry(path.to_vec()).or_insert_with(|| {
            let (code, out, err) = run_with_timeout(
                Command::new(hxlab()).args(path).arg("--help"),
                Duration::from_secs(20),
            );
            assert_eq!(code, Some(0), "hxlab {} --help: {err}", path.join(" "));
            out
        })
    }

    /// The subcommands a help lists (its `Commands:` section).
    fn subcommands(&mut self, path: &[String]) -> Vec<String> {
        self.of(path)
            .lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    }

    /// The subcommand a command names (`hxlab k8s render ...`: k8s render).
    fn path_of(&mut self, command: &str) -> Vec<String> {
        let mut path: Vec<String> = Vec::new();
        for word in command.split_whitespace().skip(1) {
            if !self.subcommands(&path).iter().any(|s| s == word) {
                break;
            }
            path.push(word.to_string());
        }
        path
    }

    /// Whether `flag` (`--json`, `-k`) is one of the flags in `path`'s help.
    fn has_flag(&mut self, path: &[String], flag: &str) -> bool {
        let help = self.of(path);
        help.match_indices(flag).any(|(at, _)| {
            let before = help[..at].chars().next_back();
            let after = help[at + flag.len()..].chars().next();
            matches!(before, Some(' ' | '\n' | '['))
                && matches!(after, None | Some(' ' | ',' | '=' | '\n' | '<' | ']'))
        })
    }
}

/// The flags of a piece of README text (`--json FILE\|-`: --json), up to a `--` that hands the
/// rest to another program.
fn flags_in(text: &str) -> Vec<String> {
    text.split_whitespace()
        .take_while(|w| *w != "--")
        .filter(|w| w.starts_with("--") && w.len() > 2 || (w.len() == 2 && w.starts_with('-')))
        .map(|w| w.split(['=', '\\']).next().unwrap_or(w).to_string())
        .collect()
}

/// The README's text outside fenced blocks in units that say one thing (a table row, a
/// paragraph), each with its backquoted spans.
fn backquoted_units(readme: &str) -> Vec<Vec<String>> {
    let mut fenced = false;
    let mut units: Vec<String> = Vec::new();
    let mut paragraph = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        }
        let table_row = line.starts_with('|');
        if fenced || table_row || line.trim().is_empty() || line.starts_with("```") {
            units.push(std::mem::take(&mut paragraph));
            if table_row {
                units.push(line.to_string());
            }
        } else {
            paragraph.push(' ');
            paragraph.push_str(line);
        }
    }
    units.push(paragraph);
    units
        .iter()
        .map(|u| {
            u.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect()
        })
        .collect()
}

/// Whether a backquoted span is hxlab's to check: a command of it, or flags alone.
fn is_hxlabs(span: &str) -> bool {
    span.starts_with("hxlab ") || span.starts_with('-')
}

/// Every `hxlab ...` the README names is a subcommand with the flags given beside it, and
/// every `--scenario NAME` loads (see the file's comment).
#[test]
fn every_named_command_and_flag_exists() {
    let readme = readme();
    let mut helps = Helps(BTreeMap::new());
    // The first steps, including those that need the Internet, each a line of its own.
    let mut lines: Vec<Vec<String>> = first_steps()
        .iter()
        .filter(|l| l.starts_with("hxlab "))
        .map(|l| vec![command_of(l).to_string()])
        .collect();
    lines.extend(backquoted_units(&readme));
    let mut scenarios = Vec::new();
    for spans in &lines {
        let commands: Vec<Vec<String>> = spans
            .iter()
            .filter(|s| s.starts_with("hxlab "))
            .map(|s| {
                let path = helps.path_of(s);
                assert!(!path.is_empty(), "README: `{s}` names no subcommand");
                path
            })
            .collect();
        for span in spans.iter().filter(|s| is_hxlabs(s)) {
            let words: Vec<&str> = span.split_whitespace().collect();
            if let Some(w) = words.windows(2).find(|w| w[0] == "--scenario") {
                scenarios.push(w[1].to_string());
            }
            for flag in flags_in(span) {
                let all: Vec<Vec<String>> = helps
                    .subcommands(&[])
                    .into_iter()
                    .map(|s| vec![s])
                    .collect();
                let candidates = if commands.is_empty() { &all } else { &commands };
                assert!(
                    candidates.iter().any(|p| helps.has_flag(p, &flag)),
                    "README: `{span}`: {flag} is not a flag of {:?}",
                    candidates
                );
            }
        }
    }
    assert!(scenarios.len() >= 2, "{scenarios:?}");
    for name in scenarios {
        let (code, _, err) = run_with_timeout(
            Command::new(hxlab()).args(["run", "--scenario", &name, "--dry-run"]),
            Duration::from_secs(20),
        );
        assert_eq!(code, Some(0), "README: --scenario {name}: {err}");
    }
}
