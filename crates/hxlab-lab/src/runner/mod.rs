//! The runner: every repetition of every cell, driving `hxlab serve`, `hxlab load` and
//! `hxlab link` as child processes of the same binary through typed contracts: the server's
//! [`ReadyFile`](hxlab_contract::ReadyFile), a [`LoadConfig`](hxlab_contract::LoadConfig) per
//! repetition (`hxlab load --config`), and inside a link `hxlab load --jobs`, which
//! takes them one by one as [`LoadJob`](hxlab_contract::LoadJob)s.
//!
//! One server serves the whole experiment (delay and size are URL parameters, so no factor
//! needs a restart); it is restarted only if it dies. Each repetition's record is appended
//! to `results.jsonl` (and flushed) as soon as it exists, so an interruption loses at most
//! the repetition in flight and `--resume` continues from there.

mod browser;
mod link_group;
mod plan;
mod record;
pub(crate) mod stats;
mod target;

use crate::experiment::{Cell, Experiment, Protocol};
use hxlab_child::child::run_bounded;
use hxlab_child::origin::{Origin, OriginOptions, OriginSettings};
use hxlab_report::{ExperimentMeta, Record, Workload, META_FILE, RESULTS_FILE};
use record::{count_cells, fallback, fill_record, new_records, run_child};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use target::{client_requests, NoTarget};

pub use browser::{page_visits, record_page};

/// Why an experiment could not run (a single repetition's failure is recorded, not raised).
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A file in the results directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The results directory holds another experiment or results without `--resume`.
    #[error("{0}")]
    Directory(String),
    /// `hxlab serve` did not start.
    #[error("the server did not start: {0}")]
    Server(String),
    /// Reading earlier results failed.
    #[error(transparent)]
    Report(#[from] hxlab_report::ReportError),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> RunnerError + '_ {
    move |source| RunnerError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Results directory (created if missing).
    pub out_dir: PathBuf,
    /// Continue an interrupted run in `out_dir`, skipping finished repetitions.
    pub resume: bool,
    /// The `hxlab` binary to start serve/load/link from.
    pub hxlab_bin: PathBuf,
    /// Show a progress bar with ETA (only makes sense on a terminal).
    pub progress: bool,
    /// Print one line per finished cell on stderr (when there is no progress bar).
    pub log_cells: bool,
    /// Notes for the report from whoever built the experiment (e.g. what a probe found).
    pub notes: Vec<String>,
    /// Keep a pcapng of every network cell (`evidence/CELL.pcapng`): each cell then gets a
    /// link of its own.
    pub pcap: bool,
    /// Keep the qlog of every QUIC connection (`evidence/CELL/load.M.N.sqlog`).
    pub qlog: bool,
}

/// A cell's key as a file name: letters, digits, `=`, `.`, `-` kept, the rest `_`.
pub(crate) fn cell_file_name(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '=' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Where a cell's evidence goes: `DIR/evidence/CELL` + `suffix` (the folder made).
pub(crate) fn evidence_path(dir: &Path, cell: &Cell, suffix: &str) -> PathBuf {
    let folder = dir.join("evidence");
    let _ = std::fs::create_dir_all(&folder);
    folder.join(format!("{}{suffix}", cell_file_name(&cell.key)))
}

/// What a run did, for the closing lines and the overhead figure.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// Repetitions run now.
    pub runs: usize,
    /// Repetitions found finished in the directory (`--resume`).
    pub resumed: usize,
    /// Repetitions that failed (recorded with an error).
    pub failed: usize,
    /// Repetitions skipped (e.g. no link emulation here).
    pub skipped: usize,
    /// Wall time of the whole run, from the first repetition to the last (server start and
    /// link probe excluded), seconds.
    pub wall_s: f64,
    /// Time spent before the first repetition (server start, link probe), seconds.
    pub setup_s: f64,
    /// Sum of the repetitions' own measured times (`RunResult.duration_s`), seconds.
    pub measured_s: f64,
    /// Part of `wall_s` spent in `hxlab link` outside the repetitions (tearing links down),
    /// seconds.
    pub link_s: f64,
    /// Notes for the report (skipped networks and why).
    pub notes: Vec<String>,
    /// Why this machine could not emulate a link, when a cell needed one and the probe failed
    /// (None: no cell needed one, or it worked).
    pub link_unavailable: Option<String>,
}

impl RunSummary {
    /// The runner's overhead over the cells' own measured times: (wall − measured) / measured.
    pub fn overhead(&self) -> f64 {
        if self.measured_s > 0.0 {
            (self.wall_s - self.measured_s) / self.measured_s
        } else {
            f64::NAN
        }
    }
    /// The same without the time `hxlab link` takes to tear its links down.
    pub fn overhead_without_link(&self) -> f64 {
        if self.measured_s > 0.0 {
            (self.wall_s - self.link_s - self.measured_s) / self.measured_s
        } else {
            f64::NAN
        }
    }
}

/// Runs experiments.
pub struct Runner {
    opts: RunOptions,
    server: Option<Origin>,
    /// Command origins by name, started on first use (or why they did not start).
    commands: std::collections::BTreeMap<String, Result<crate::command::CommandServer, NoTarget>>,
    /// The certificate and key the lab made for its command origins.
    cert: Option<crate::command::LabCert>,
    bind: &'static str,
    link: Option<Result<(), String>>,
    /// Time spent in `hxlab link` runs outside the cells' own wall times (setup, teardown).
    link_extra_s: f64,
}

/// How long a link may take to tear down after its last repetition before it is asked to
/// stop (and, as long again later, killed).
const LINK_GRACE: Duration = Duration::from_millis(300);

/// Connections per origin a browser opens for HTTP/1.1.
pub const BROWSER_CONNECTIONS: u64 = 6;
/// Streams in flight on one HTTP/2 or HTTP/3 connection in the resources workload: browsers
/// keep to the server's MAX_CONCURRENT_STREAMS, which is 100 on `hxlab serve` (as on most
/// servers and quinn's default).
pub const MAX_STREAMS: u64 = 100;

/// Where the records go while a run is under way.
struct Output<'a> {
    file: std::fs::File,
    path: &'a Path,
    bar: Option<indicatif::ProgressBar>,
}

impl Output<'_> {
    fn say(&self, text: &str) {
        match &self.bar {
            Some(pb) => pb.println(text),
            None => eprintln!("{text}"),
        }
    }
}

/// Adds a note to the experiment's notes once.
fn note(meta: &mut ExperimentMeta, text: String) {
    if !meta.notes.contains(&text) {
        meta.notes.push(text);
    }
}

impl Runner {
    /// With `qlog`: where an HTTP/3 cell's load generator writes its connections' qlogs.
    pub(crate) fn qlog_base(&self, dir: &Path, cell: &Cell) -> Option<PathBuf> {
        let h3 = cell.config.protocol == hxlab_core::Protocol::H3;
        (self.opts.qlog && h3).then(|| {
            let folder = evidence_path(dir, cell, "");
            let _ = std::fs::create_dir_all(&folder);
            folder.join("load")
        })
    }

    /// A runner with these options.
    pub fn new(opts: RunOptions) -> Runner {
        Runner {
            opts,
            server: None,
            commands: Default::default(),
            cert: None,
            bind: "127.0.0.1",
            link: None,
            link_extra_s: 0.0,
        }
    }

    /// Runs every repetition not yet finished; returns the summary. The records are in
    /// `out_dir/results.jsonl`, the experiment in `out_dir/experiment.json`.
    pub fn run(&mut self, exp: &Experiment) -> Result<RunSummary, RunnerError> {
        let t0 = Instant::now();
        let dir = self.opts.out_dir.clone();
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let results = dir.join(RESULTS_FILE);
        let meta_path = dir.join(META_FILE);
        let (mut meta, done) = self.earlier_results(exp, &dir, &results)?;
        write_atomic(
            &meta_path,
            &serde_json::to_string_pretty(&meta).unwrap_or_default(),
        )?;
        let pending: Vec<(&Cell, u32)> = exp
            .cells
            .iter()
            .flat_map(|c| (0..exp.repetitions).map(move |r| (c, r)))
            .filter(|(c, r)| !done.contains(&(c.key.clone(), *r)))
            .collect();
        let mut summary = RunSummary {
            resumed: exp.total_runs() - pending.len(),
            ..RunSummary::default()
        };
        self.prepare(exp, &pending, &mut meta)?;
        write_atomic(
            &meta_path,
            &serde_json::to_string_pretty(&meta).unwrap_or_default(),
        )?;
        summary.setup_s = t0.elapsed().as_secs_f64();

        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&results)
            .map_err(io_err(&results))?;
        let bar = self.opts.progress.then(|| {
            let pb = indicatif::ProgressBar::new(exp.total_runs() as u64);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} runs, ETA {eta} {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            pb.set_position(summary.resumed as u64);
            pb
        });
        let mut out = Output {
            file,
            path: &results,
            bar,
        };
        let t_runs = Instant::now();
        self.run_pending(exp, &pending, &dir, &mut out, &mut summary)?;
        summary.wall_s = t_runs.elapsed().as_secs_f64();
        summary.link_s = self.link_extra_s;
        if let Some(pb) = out.bar {
            pb.finish_and_clear();
        }
        self.server = None;
        self.commands.clear();
        summary.notes = meta.notes.clone();
        summary.link_unavailable = self.link.as_ref().and_then(|l| l.as_ref().err().cloned());
        Ok(summary)
    }

    /// The experiment's metadata and the repetitions already finished in `dir` (`--resume`),
    /// refusing a directory that holds other results.
    fn earlier_results(
        &self,
        exp: &Experiment,
        dir: &Path,
        results: &Path,
    ) -> Result<(ExperimentMeta, HashSet<(String, u32)>), RunnerError> {
        let mut meta = exp.meta();
        let mut done = HashSet::new();
        if results.exists() && !self.opts.resume {
            return Err(RunnerError::Directory(format!(
                "{} already holds results; pass --resume to continue that run, or choose another --out",
                dir.display()
            )));
        }
        if self.opts.resume && results.exists() {
            let old: ExperimentMeta = hxlab_report::load_dir(dir)?.0;
            if old.cells != meta.cells {
                return Err(RunnerError::Directory(format!(
                    "{} holds a different experiment ({} cells, {}); --resume needs the same file and overrides",
                    dir.display(),
                    old.cells.len(),
                    old.name
                )));
            }
            meta.notes = old.notes;
            drop_partial_line(results)?;
            for r in hxlab_report::read_records(results)? {
                if r.result.is_some() && r.error.is_none() && r.skipped.is_none() {
                    done.insert((r.cell, r.repetition));
                }
            }
        }
        Ok((meta, done))
    }

    /// Before the first repetition: probe the link if a cell needs one, note what the
    /// machine cannot do as asked, and start the server.
    fn prepare(
        &mut self,
        exp: &Experiment,
        pending: &[(&Cell, u32)],
        meta: &mut ExperimentMeta,
    ) -> Result<(), RunnerError> {
        if pending.iter().any(|(c, _)| c.config.needs_link()) {
            let probe = self.probe_link();
            if let Err(why) = &probe {
                let n = exp.cells.iter().filter(|c| c.config.needs_link()).count();
                note(meta, format!("link emulation is not available here ({why}); the {n} cell(s) with a network profile or loss were skipped"));
            } else {
                // The server must be reachable from the link's outside end.
                self.bind = "0.0.0.0";
            }
            self.link = Some(probe);
        }
        if exp.workload == Workload::Browser
            && exp.cells.iter().any(|c| c.config.cc_server.is_some())
        {
            note(meta, "cc_server sets the server's congestion control; Chromium's own TCP and QUIC run their defaults (the client's controllers are not read back)".to_string());
        }
        if exp
            .cells
            .iter()
            .any(|c| c.config.zero_rtt && c.config.protocol != Protocol::H3)
        {
            if let Some(v) = hxlab_core::cc::tcp_fastopen_sysctl().filter(|v| v & 2 == 0) {
                note(meta, format!("net.ipv4.tcp_fastopen = {v} here: the server takes no TCP Fast Open data, so 0-RTT over TCP (TLS early data) still waits for TCP's handshake; sysctl -w net.ipv4.tcp_fastopen=3 lets it ride on the SYN"));
            }
        }
        if exp.workload == Workload::Browser {
            note(meta, engine_note(exp));
        }
        origin_notes(exp, meta);
        for n in &self.opts.notes {
            note(meta, n.clone());
        }
        if let Some((first, _)) = pending
            .first()
            .filter(|(c, _)| c.config.origin == crate::experiment::origins::BUILTIN)
        {
            self.ensure_server(first.config.origin_settings())?;
        }
        Ok(())
    }

    /// Runs the pending repetitions in order, appending each record as it comes.
    fn run_pending(
        &mut self,
        exp: &Experiment,
        pending: &[(&Cell, u32)],
        dir: &Path,
        out: &mut Output,
        summary: &mut RunSummary,
    ) -> Result<(), RunnerError> {
        let mut cell_no = 0;
        let total_cells = count_cells(pending);
        let mut i = 0;
        while i < pending.len() {
            let cell = pending[i].0;
            // Consecutive network cells with the same link (the typed configuration, compared
            // as a value) and server share one `hxlab link`.
            let link_key = |c: &Cell| {
                (
                    c.config.link_config().ok().flatten(),
                    c.config.origin_settings(),
                    c.config.origin.clone(),
                )
            };
            let mut j = i + 1;
            if cell.config.needs_link() && exp.workload != Workload::Browser {
                // With --pcap each cell has a link (and a capture) of its own.
                while j < pending.len()
                    && pending[j].0.config.needs_link()
                    && link_key(pending[j].0) == link_key(cell)
                    && (!self.opts.pcap || pending[j].0.key == cell.key)
                {
                    j += 1;
                }
            }
            if i == 0 || pending[i - 1].0.key != cell.key {
                cell_no += 1;
                if let Some(pb) = &out.bar {
                    pb.set_message(cell.key.clone());
                }
            }
            let records = if exp.workload == Workload::Browser {
                // `hxlab page` runs its own link around the browser when a network is set.
                vec![self.run_browser(exp, cell, pending[i].1, dir)]
            } else if cell.config.needs_link() {
                let mut group: Vec<(&Cell, Vec<u32>)> = Vec::new();
                for (c, rep) in &pending[i..j] {
                    match group.last_mut() {
                        Some((last, reps)) if last.key == c.key => reps.push(*rep),
                        _ => group.push((c, vec![*rep])),
                    }
                }
                cell_no += group.len() - 1;
                self.run_link_group(exp, &group, dir)
            } else {
                vec![self.run_loopback(exp, cell, pending[i].1, dir)]
            };
            for record in records {
                // A link group holds several cells: warn with the record's own cell.
                let cell = pending[i..j]
                    .iter()
                    .map(|(c, _)| *c)
                    .find(|c| c.key == record.cell)
                    .unwrap_or(cell);
                write_record(cell, &record, out, summary)?;
            }
            let last = pending[j - 1].0;
            let last_of_cell = pending.get(j).is_none_or(|(next, _)| next.key != last.key);
            if self.opts.log_cells && last_of_cell && out.bar.is_none() {
                eprintln!("[{cell_no}/{total_cells}] {} done", last.key);
            }
            i = j;
        }
        Ok(())
    }

    fn probe_link(&self) -> Result<(), String> {
        let mut cmd = Command::new(&self.opts.hxlab_bin);
        cmd.args(["link", "--delay", "1ms", "--", "true"]);
        match run_bounded(cmd, Duration::from_secs(30)) {
            Ok((Some(0), _)) => Ok(()),
            Ok((code, stderr)) => {
                let line = hxlab_child::child::last_line(&stderr);
                let why = if line.is_empty() {
                    format!("`hxlab link` exited with {code:?}")
                } else {
                    line
                };
                // SAFETY: geteuid has no preconditions.
                let root = unsafe { libc::geteuid() } == 0;
                Err(if root {
                    why
                } else {
                    format!("{why}; link emulation needs root here")
                })
            }
            Err(e) => Err(format!("`hxlab link` could not run: {e}")),
        }
    }

    /// Makes sure a server runs with `settings` (congestion controller, scheduler, mark): one
    /// server at a time, restarted when a cell asks for other settings.
    fn ensure_server(&mut self, settings: OriginSettings) -> Result<(), RunnerError> {
        if let Some(s) = &mut self.server {
            if s.is_running() && s.settings == settings {
                return Ok(());
            }
            self.server = None;
        }
        let dir = self.opts.out_dir.join(".server");
        // Pages for the browser workload are written here and served under /static/.
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(io_err(&www))?;
        let origin = Origin::start(&OriginOptions {
            hxlab_bin: self.opts.hxlab_bin.clone(),
            bind: self.bind.to_string(),
            dir,
            www: Some(www),
            settings,
            capture_stderr: true,
            replay: None,
            // Firefox behind a link loads this loopback origin under that name.
            cert_names: vec![hxlab_contract::LOCAL_ORIGIN_NAME.to_string()],
            ports: None,
        })
        .map_err(RunnerError::Server)?;
        self.server = Some(origin);
        Ok(())
    }

    /// One repetition of a loopback cell: a reading of the server's cost, `hxlab load
    /// --config`, another reading.
    fn run_loopback(&mut self, exp: &Experiment, cell: &Cell, rep: u32, dir: &Path) -> Record {
        let mut record = new_records(exp, cell, &[rep]).remove(0);
        let target = match self.target(exp, cell) {
            Ok(t) => t,
            Err(no) => {
                no.mark(&mut record);
                return record;
            }
        };
        let plan = match plan::plan(exp, &cell.config, &target) {
            Ok(mut p) => {
                p.config.qlog_base = self.qlog_base(dir, cell);
                p
            }
            Err(e) => {
                record.error = Some(e);
                return record;
            }
        };
        let json = dir.join(format!(".load-{rep}.json"));
        let config = dir.join(format!(".load-{rep}.config.json"));
        let _ = std::fs::remove_file(&json);
        if let Err(e) = std::fs::write(&config, plan.config.to_json()) {
            record.error = Some(format!("{}: {e}", config.display()));
            return record;
        }
        let mut cmd = Command::new(&self.opts.hxlab_bin);
        cmd.arg("load")
            .arg("--config")
            .arg(&config)
            .arg("--no-progress")
            .arg("--json")
            .arg(&json);
        let meter = Some((&target.meter, cell.config.protocol));
        let stderr = run_child(&mut record, cmd, exp.timeout, meter);
        record.expected_body_bytes = plan.expected_body_bytes;
        fill_record(&mut record, &json, &stderr, None);
        client_requests(&target.meter, &mut record);
        let _ = std::fs::remove_file(&json);
        let _ = std::fs::remove_file(&config);
        record
    }
}

/// What the report says about the browser engines: one engine (and how to add the second),
/// or both, never pooled, with what each cannot measure or set.
fn engine_note(exp: &Experiment) -> String {
    use hxlab_core::page::Engine;
    let engines: std::collections::BTreeSet<Engine> =
        exp.cells.iter().map(|c| c.config.browser).collect();
    let tcp = hxlab_core::cc::system_default_name();
    match engines.len() {
        0 | 1 => {
            let e = engines.into_iter().next().unwrap_or_default();
            format!(
                "one engine: every page figure is {}'s, so a verdict may be that browser's network stack's rather than the protocol's; add the second with --set browser=chromium,firefox (or browser = [\"chromium\", \"firefox\"] in the experiment) to see whether it holds in both",
                e.label()
            )
        }
        _ => format!(
            "two engines, never pooled: every cell is Chromium's (its network stack, QUIC by quiche) or Firefox's (Necko, QUIC by neqo), and each pair's verdict says whether it holds in both; Firefox has no {} (not available, never a number); both browsers' TCP runs this namespace's default controller ({tcp}); Firefox's QUIC runs the cell's cc_server where neqo has it (reno, cubic; network.http.http3.cc_algorithm), Chromium's QUIC its own default (not settable, not read back)",
            and_words(Engine::Firefox.lacks())
        ),
    }
}

/// `a, b and c`.
fn and_words(words: &[&str]) -> String {
    match words {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// What the report says about the experiment's origins: whose server cost is unavailable,
/// and whose congestion control the lab neither sets nor reads back.
fn origin_notes(exp: &Experiment, meta: &mut ExperimentMeta) {
    match &exp.page {
        Some(crate::experiment::PageSource::Har(p, start)) => {
            note(meta, format!("page: {} replayed by hxlab page --replay (its own hxlab serve --replay, every recorded host mapped to it; hits, near misses and misses are recorded per run, and a miss flags the run); server CPU not measured; the replay server runs the cell's cc_server (else cubic) on TCP and QUIC alike, and the cell's scheduler and notsent_lowat (else rfc9218 and 16KiB), each read back per record; Chromium's own controller is not settable and not read back", p.display()));
            note(
                meta,
                format!(
                    "page: {} ({} recorded response(s) from {} origin(s))",
                    start.page_url, start.entries, start.origins
                ),
            );
            if start.redirected() {
                note(meta, format!("the recording starts at {} and redirects to {}: every protocol's load starts there, the redirects answered as recorded over plain HTTP/1.1 (the protocol check counts only https responses), so each pays the same redirect", start.page_url, start.chain_end));
            }
            if let Some(skipped) = &start.skipped {
                note(
                    meta,
                    format!("the recording: {skipped} (nothing can replay them)"),
                );
            }
            return;
        }
        Some(crate::experiment::PageSource::Url(u)) => {
            note(meta, format!("page: {u}, live: loaded from the site itself as it is (servers the lab does not run, not a recording): server CPU and congestion control unknown"));
            return;
        }
        None => {}
    }
    let used: std::collections::BTreeSet<&str> =
        exp.cells.iter().map(|c| c.config.origin.as_str()).collect();
    for name in used {
        let Some(def) = exp.origin(name) else {
            continue;
        };
        match def.kind {
            crate::experiment::OriginKind::Builtin => {}
            crate::experiment::OriginKind::Command(c) => {
                if crate::command::find_program(&c.command[0]).is_none() {
                    note(meta, format!("origin {name} is not installed here (its program {:?} was not found): its cells were skipped", c.command[0]));
                    continue;
                }
                let sys = hxlab_core::cc::system_default_name();
                note(meta, format!("origin {name}: server CPU is its whole process tree's, from /proc, per request the client completed; its TCP congestion control is not set by the lab and is not read back per socket: new sockets here get the system default ({sys})"));
            }
            crate::experiment::OriginKind::Url(_) => {
                note(meta, format!("origin {name}: server CPU unavailable (a url origin the lab does not run), shown as —, not zero; its congestion control is unknown"));
            }
        }
    }
}

/// Counts a finished record, warns about it when it failed or fell back, and appends it to
/// `results.jsonl` (written and synced, so an interruption keeps it).
fn write_record(
    cell: &Cell,
    record: &Record,
    out: &mut Output,
    summary: &mut RunSummary,
) -> Result<(), RunnerError> {
    if let Some(r) = &record.result {
        summary.measured_s += r.duration_s;
    }
    if record.skipped.is_some() {
        summary.skipped += 1;
    } else {
        summary.runs += 1;
        if !record.is_clean() {
            summary.failed += 1;
            out.say(&format!(
                "warning: {} (repetition {}): {}",
                cell.key,
                record.repetition,
                record.failure_text()
            ));
        } else if let Some(w) = fallback(&cell.config, record.result.as_ref()) {
            out.say(&format!(
                "warning: {} (repetition {}): {w}",
                cell.key, record.repetition
            ));
        }
    }
    let mut line = serde_json::to_string(record).unwrap_or_default();
    line.push('\n');
    // One write of the whole line (O_APPEND), then to disk: a kill or power cut leaves whole
    // records plus at most one cut line, which --resume and `hxlab report` handle.
    out.file
        .write_all(line.as_bytes())
        .and_then(|_| out.file.flush())
        .and_then(|_| out.file.sync_data())
        .map_err(io_err(out.path))?;
    if let Some(pb) = &out.bar {
        pb.inc(1);
    }
    Ok(())
}

/// Cuts a half-written last line (an interrupted append) so new records start on a line
/// of their own.
fn drop_partial_line(path: &Path) -> Result<(), RunnerError> {
    let bytes = std::fs::read(path).map_err(io_err(path))?;
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return Ok(());
    }
    let keep = bytes
        .iter()
        .rposition(|&b| b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(0);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_err(path))?;
    f.set_len(keep as u64).map_err(io_err(path))
}

fn write_atomic(path: &Path, text: &str) -> Result<(), RunnerError> {
    hxlab_core::write_atomically(path, text.as_bytes()).map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_half_written_last_line_is_cut_before_resuming() {
        let dir = std::env::temp_dir().join(format!("hxlab-partial-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let p = dir.join("results.jsonl");
        std::fs::write(&p, "{\"a\":1}\n{\"b\":").expect("write");
        drop_partial_line(&p).expect("cut");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "{\"a\":1}\n");
        drop_partial_line(&p).expect("idempotent");
        assert_eq!(std::fs::read_to_string(&p).expect("read"), "{\"a\":1}\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
