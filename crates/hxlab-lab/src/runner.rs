//! The runner: every repetition of every cell, driving `hxlab serve`, `hxlab load` and
//! `hxlab link` as child processes of the same binary through their command-line contracts.
//!
//! One server serves the whole experiment (delay and size are URL parameters, so no factor
//! needs a restart); it is restarted only if it dies. Each repetition's record is appended
//! to `results.jsonl` (and flushed) as soon as it exists, so an interruption loses at most
//! the repetition in flight and `--resume` continues from there.

use crate::spec::{Cell, CellConfig, Experiment, Protocol};
use hxlab_core::RunResult;
use hxlab_report::{ExperimentMeta, Record, ServerCost, Workload, META_FILE, RESULTS_FILE};
use std::collections::BTreeMap;
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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

/// The server's ready-file.
#[derive(Clone, Debug, serde::Deserialize)]
struct Ready {
    #[serde(default)]
    spki_sha256: Option<String>,
    tls: Option<String>,
    plain: Option<String>,
    h3: Option<String>,
}

struct Server {
    child: Child,
    /// The congestion controller it was started with (`hxlab serve --cc`; None: default).
    cc: Option<String>,
    ready: Ready,
    cert: PathBuf,
    tls_port: Option<u16>,
    plain_port: Option<u16>,
    h3_port: Option<u16>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn port_of(addr: &Option<String>) -> Option<u16> {
    addr.as_deref()
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
}

/// Runs experiments.
pub struct Runner {
    opts: RunOptions,
    server: Option<Server>,
    bind: &'static str,
    link: Option<Result<(), String>>,
    /// Time spent in `hxlab link` runs outside the cells' own wall times (setup, teardown).
    link_extra_s: f64,
}

/// Children that must not outlive the runner (a killed `hxlab run` must not leave a server
/// or a load behind).
trait DieWithParent {
    fn die_with_parent(&mut self) -> &mut Self;
}

impl DieWithParent for Command {
    fn die_with_parent(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the child between fork and exec and only calls prctl,
        // which is async-signal-safe.
        unsafe {
            self.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            })
        }
    }
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

/// Placeholder for the link's host address inside URLs; replaced by the shell in the link.
const HOST: &str = "\u{1}HOST\u{1}";

impl Runner {
    /// A runner with these options.
    pub fn new(opts: RunOptions) -> Runner {
        Runner {
            opts,
            server: None,
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
        let mut meta = exp.meta();
        let mut done: HashSet<(String, u32)> = HashSet::new();
        let mut summary = RunSummary::default();
        if results.exists() && !self.opts.resume {
            return Err(RunnerError::Directory(format!(
                "{} already holds results; pass --resume to continue that run, or choose another --out",
                dir.display()
            )));
        }
        if self.opts.resume && results.exists() {
            let old: ExperimentMeta = hxlab_report::load_dir(&dir)?.0;
            if old.cells != meta.cells {
                return Err(RunnerError::Directory(format!(
                    "{} holds a different experiment ({} cells, {}); --resume needs the same file and overrides",
                    dir.display(),
                    old.cells.len(),
                    old.name
                )));
            }
            meta.notes = old.notes;
            drop_partial_line(&results)?;
            for r in hxlab_report::read_records(&results)? {
                if r.result.is_some() && r.error.is_none() && r.skipped.is_none() {
                    done.insert((r.cell, r.repetition));
                }
            }
        }
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
        summary.resumed = exp.total_runs() - pending.len();
        let needs_link = pending.iter().any(|(c, _)| c.config.needs_link());
        if needs_link {
            let probe = self.probe_link();
            if let Err(why) = &probe {
                let n = exp.cells.iter().filter(|c| c.config.needs_link()).count();
                let note = format!("link emulation is not available here ({why}); the {n} cell(s) with a network profile or loss were skipped");
                if !meta.notes.contains(&note) {
                    meta.notes.push(note);
                }
            } else {
                // The server must be reachable from the link's outside end.
                self.bind = "0.0.0.0";
            }
            self.link = Some(probe);
        }
        if exp.workload == Workload::Browser
            && exp.cells.iter().any(|c| c.config.cc_server.is_some())
        {
            let note = "cc_server sets the server's congestion control; Chromium's own TCP and QUIC run their defaults (the client's controllers are not read back)".to_string();
            if !meta.notes.contains(&note) {
                meta.notes.push(note);
            }
        }
        if exp
            .cells
            .iter()
            .any(|c| c.config.zero_rtt && c.config.protocol != Protocol::H3)
        {
            if let Some(v) = hxlab_core::cc::tcp_fastopen_sysctl().filter(|v| v & 2 == 0) {
                let note = format!("net.ipv4.tcp_fastopen = {v} here: the server takes no TCP Fast Open data, so 0-RTT over TCP (TLS early data) still waits for TCP's handshake; sysctl -w net.ipv4.tcp_fastopen=3 lets it ride on the SYN");
                if !meta.notes.contains(&note) {
                    meta.notes.push(note);
                }
            }
        }
        if let Some((first, _)) = pending.first() {
            self.ensure_server(first.config.cc_server.as_deref())?;
        }
        write_atomic(
            &meta_path,
            &serde_json::to_string_pretty(&meta).unwrap_or_default(),
        )?;
        summary.setup_s = t0.elapsed().as_secs_f64();

        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&results)
            .map_err(io_err(&results))?;
        let bar = if self.opts.progress {
            let pb = indicatif::ProgressBar::new(exp.total_runs() as u64);
            pb.set_style(
                indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} runs, ETA {eta} {wide_msg}",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            pb.set_position(summary.resumed as u64);
            Some(pb)
        } else {
            None
        };
        let say = |text: &str| match &bar {
            Some(pb) => pb.println(text),
            None => eprintln!("{text}"),
        };
        let t_runs = Instant::now();
        let mut cell_no = 0;
        let total_cells = count_cells(&pending);
        let mut i = 0;
        while i < pending.len() {
            let cell = pending[i].0;
            // Consecutive network cells with the same link settings (and server) share one
            // `hxlab link`.
            let link_key = |c: &Cell| (c.config.link_args(), c.config.cc_server.clone());
            let mut j = i + 1;
            if cell.config.needs_link() && exp.workload != Workload::Browser {
                while j < pending.len()
                    && pending[j].0.config.needs_link()
                    && link_key(pending[j].0) == link_key(cell)
                {
                    j += 1;
                }
            }
            if i == 0 || pending[i - 1].0.key != cell.key {
                cell_no += 1;
                if let Some(pb) = &bar {
                    pb.set_message(cell.key.clone());
                }
            }
            let records = if exp.workload == Workload::Browser {
                // `hxlab page` runs its own link around the browser when a network is set.
                vec![self.run_browser(exp, cell, pending[i].1, &dir)]
            } else if cell.config.needs_link() {
                let mut group: Vec<(&Cell, Vec<u32>)> = Vec::new();
                for (c, rep) in &pending[i..j] {
                    match group.last_mut() {
                        Some((last, reps)) if last.key == c.key => reps.push(*rep),
                        _ => group.push((c, vec![*rep])),
                    }
                }
                cell_no += group.len() - 1;
                self.run_link_group(exp, &group, &dir)
            } else {
                vec![self.run_loopback(exp, cell, pending[i].1, &dir)]
            };
            for record in records {
                // A link group holds several cells: warn with the record's own cell.
                let cell = pending[i..j]
                    .iter()
                    .map(|(c, _)| *c)
                    .find(|c| c.key == record.cell)
                    .unwrap_or(cell);
                if let Some(r) = &record.result {
                    summary.measured_s += r.duration_s;
                }
                if record.skipped.is_some() {
                    summary.skipped += 1;
                } else {
                    summary.runs += 1;
                    if !record.is_clean() {
                        summary.failed += 1;
                        say(&format!(
                            "warning: {} (repetition {}): {}",
                            cell.key,
                            record.repetition,
                            record.failure_text()
                        ));
                    } else if let Some(w) = fallback(&cell.config, record.result.as_ref()) {
                        say(&format!(
                            "warning: {} (repetition {}): {w}",
                            cell.key, record.repetition
                        ));
                    }
                }
                let mut line = serde_json::to_string(&record).unwrap_or_default();
                line.push('\n');
                file.write_all(line.as_bytes())
                    .and_then(|_| file.flush())
                    .map_err(io_err(&results))?;
                if let Some(pb) = &bar {
                    pb.inc(1);
                }
            }
            let last = pending[j - 1].0;
            let last_of_cell = pending.get(j).is_none_or(|(next, _)| next.key != last.key);
            if self.opts.log_cells && last_of_cell && bar.is_none() {
                eprintln!("[{cell_no}/{total_cells}] {} done", last.key);
            }
            i = j;
        }
        summary.wall_s = t_runs.elapsed().as_secs_f64();
        summary.link_s = self.link_extra_s;
        if let Some(pb) = bar {
            pb.finish_and_clear();
        }
        self.server = None;
        summary.notes = meta.notes.clone();
        Ok(summary)
    }

    fn probe_link(&self) -> Result<(), String> {
        let mut cmd = Command::new(&self.opts.hxlab_bin);
        cmd.args(["link", "--delay", "1ms", "--", "true"]);
        match run_bounded(cmd, Duration::from_secs(30)) {
            Ok((Some(0), _)) => Ok(()),
            Ok((code, stderr)) => {
                let line = stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string();
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

    /// Makes sure a server runs with congestion controller `cc` (None: the system's
    /// default): one server at a time, restarted when a cell asks for another controller.
    fn ensure_server(&mut self, cc: Option<&str>) -> Result<(), RunnerError> {
        if let Some(s) = &mut self.server {
            if matches!(s.child.try_wait(), Ok(None)) && s.cc.as_deref() == cc {
                return Ok(());
            }
            self.server = None;
        }
        let dir = self.opts.out_dir.join(".server");
        std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let ready_path = dir.join("ready.json");
        let cert = dir.join("cert.pem");
        let _ = std::fs::remove_file(&ready_path);
        // Pages for the browser workload are written here and served under /static/.
        let www = dir.join("www");
        std::fs::create_dir_all(&www).map_err(io_err(&www))?;
        let mut child = Command::new(&self.opts.hxlab_bin)
            .args([
                "serve",
                "--bind",
                self.bind,
                "--tls-port",
                "0",
                "--plain-port",
                "0",
                "--ready-file",
            ])
            .arg(&ready_path)
            .arg("--cert-out")
            .arg(&cert)
            .arg("--dir")
            .arg(&www)
            .args(cc.map(|c| ["--cc", c]).into_iter().flatten())
            .die_with_parent()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| {
                RunnerError::Server(format!(
                    "cannot start {}: {e}",
                    self.opts.hxlab_bin.display()
                ))
            })?;
        let stderr = child
            .stderr
            .take()
            .map(|s| std::thread::spawn(move || tail(s)));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(text) = std::fs::read_to_string(&ready_path) {
                if let Ok(ready) = serde_json::from_str::<Ready>(&text) {
                    let tls_port = port_of(&ready.tls);
                    let plain_port = port_of(&ready.plain);
                    let h3_port = port_of(&ready.h3);
                    self.server = Some(Server {
                        child,
                        cc: cc.map(str::to_string),
                        ready,
                        cert,
                        tls_port,
                        plain_port,
                        h3_port,
                    });
                    return Ok(());
                }
            }
            if let Ok(Some(status)) = child.try_wait() {
                let err = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
                let line = err
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("")
                    .trim()
                    .to_string();
                return Err(RunnerError::Server(format!(
                    "`hxlab serve` exited ({status}): {line}"
                )));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunnerError::Server(
                    "`hxlab serve` wrote no ready file within 20 s".into(),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn new_records(exp: &Experiment, cell: &Cell, reps: &[u32]) -> Vec<Record> {
        let started_unix_s = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        reps.iter()
            .map(|&rep| Record {
                experiment: exp.name.clone(),
                cell: cell.key.clone(),
                factors: cell.factors.clone(),
                repetition: rep,
                started_unix_s,
                ..Default::default()
            })
            .collect()
    }

    fn load_args(plan: &Plan, json: &Path) -> Vec<String> {
        let mut a: Vec<String> = vec![
            "load".into(),
            "--no-progress".into(),
            "--json".into(),
            json.display().to_string(),
        ];
        a.extend(plan.args.iter().cloned());
        a
    }

    /// One repetition of a loopback cell: `GET /stats`, `hxlab load`, `GET /stats`.
    fn run_loopback(&mut self, exp: &Experiment, cell: &Cell, rep: u32, dir: &Path) -> Record {
        let mut record = Self::new_records(exp, cell, &[rep]).remove(0);
        if let Err(e) = self.ensure_server(cell.config.cc_server.as_deref()) {
            record.error = Some(e.to_string());
            return record;
        }
        let Some(server) = &self.server else {
            record.error = Some("no server".into());
            return record;
        };
        let plan = match plan(exp, &cell.config, server) {
            Ok(p) => p,
            Err(e) => {
                record.error = Some(e);
                return record;
            }
        };
        let stats_addr = server
            .plain_port
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
        let json = dir.join(format!(".load-{rep}.json"));
        let _ = std::fs::remove_file(&json);
        let mut cmd = Command::new(&self.opts.hxlab_bin);
        cmd.args(
            Self::load_args(&plan, &json)
                .iter()
                .map(|a| a.replace(HOST, "127.0.0.1")),
        );
        let before = stats_addr.and_then(server_stats);
        let t = Instant::now();
        let outcome = run_bounded(cmd, exp.timeout);
        record.wall_s = t.elapsed().as_secs_f64();
        let after = stats_addr.and_then(server_stats);
        let (code, stderr) = match outcome {
            Ok(x) => x,
            Err(e) => (None, e),
        };
        record.exit_code = code;
        record.expected_body_bytes = plan.expected_body_bytes;
        fill_record(&mut record, &json, &stderr, None);
        record.server = server_cost(&before, &after, cell.config.protocol, 1);
        record.server_cc = server_cc(&before, &after, cell.config.protocol);
        let _ = std::fs::remove_file(&json);
        record
    }

    /// One page load in a fresh headless Chromium (`hxlab page --runs 1`) of the server's
    /// synthetic page with the cell's resources; its `PageRun` becomes the record's RunResult
    /// (`duration_s` = the load event).
    fn run_browser(&mut self, exp: &Experiment, cell: &Cell, rep: u32, dir: &Path) -> Record {
        let mut record = Self::new_records(exp, cell, &[rep]).remove(0);
        if cell.config.needs_link() {
            if let Some(Err(why)) = &self.link {
                record.skipped = Some(format!("link emulation is not available here ({why})"));
                return record;
            }
        }
        if let Err(e) = self.ensure_server(cell.config.cc_server.as_deref()) {
            record.error = Some(e.to_string());
            return record;
        }
        let Some(server) = &self.server else {
            record.error = Some("no server".into());
            return record;
        };
        let (Some(port), Some(spki)) = (server.tls_port, server.ready.spki_sha256.clone()) else {
            record.error = Some("the server's ready file has no TLS port or spki_sha256".into());
            return record;
        };
        let cfg = &cell.config;
        let ms = cfg.delay.as_millis();
        let name = format!("page-{}-{}-{ms}.html", cfg.resources, cfg.size);
        let page_path = self.opts.out_dir.join(".server").join("www").join(&name);
        if !page_path.exists() {
            if let Err(e) = std::fs::write(&page_path, page_html(cfg.resources, cfg.size, ms)) {
                record.error = Some(format!("{}: {e}", page_path.display()));
                return record;
            }
        }
        let url = format!("https://127.0.0.1:{port}/static/{name}");
        let json = dir.join(format!(".page-{rep}.json"));
        let _ = std::fs::remove_file(&json);
        let proto = match cfg.protocol {
            Protocol::H3 => "h3",
            Protocol::H2 | Protocol::H2c => "h2",
            Protocol::H1 | Protocol::H1Tls => "h1",
        };
        let mut cmd = Command::new(&self.opts.hxlab_bin);
        cmd.args([
            "page", &url, "--proto", proto, "--runs", "1", "--spki", &spki, "--json",
        ])
        .arg(&json)
        .args(["--timeout", &format!("{}ms", exp.timeout.as_millis())]);
        cmd.args(cfg.link_args());
        let stats_addr = server
            .plain_port
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
        let before = stats_addr.and_then(server_stats);
        let t = Instant::now();
        let outcome = run_bounded(cmd, exp.timeout + Duration::from_secs(30));
        record.wall_s = t.elapsed().as_secs_f64();
        let after = stats_addr.and_then(server_stats);
        let (code, stderr) = match outcome {
            Ok(x) => x,
            Err(e) => (None, e),
        };
        record.exit_code = code;
        record.server = server_cost(&before, &after, cfg.protocol, 1);
        record.server_cc = server_cc(&before, &after, cfg.protocol);
        let last_line = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim()
            .to_string();
        let page: Option<serde_json::Value> = std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let _ = std::fs::remove_file(&json);
        let run = page
            .as_ref()
            .and_then(|p| p.get("runs"))
            .and_then(|r| r.get(0))
            .cloned();
        match run {
            None => {
                record.error = Some(format!(
                    "hxlab page gave no result (exit {code:?}): {last_line}"
                ))
            }
            Some(run) => {
                if let Some(e) = run.get("error").and_then(|e| e.as_str()) {
                    record.error = Some(format!("page load failed: {e}"));
                } else {
                    match serde_json::from_value::<hxlab_browser::PageRun>(run) {
                        Ok(pr) => {
                            if let Some(flag) = &pr.flag {
                                record.error =
                                    Some(format!("page load left out by hxlab page: {flag}"));
                            }
                            record.result = Some(pr.to_run_result());
                        }
                        Err(e) => {
                            record.error = Some(format!("hxlab page wrote an unreadable run: {e}"))
                        }
                    }
                }
            }
        }
        record
    }

    /// Every repetition of consecutive network cells that share the same link settings, in
    /// one `hxlab link`: setting a link up and tearing it down costs far more than a
    /// repetition. Between cells the script waits for the runner to read the server's
    /// counters, so the server's CPU is still attributed per cell.
    fn run_link_group(
        &mut self,
        exp: &Experiment,
        group: &[(&Cell, Vec<u32>)],
        dir: &Path,
    ) -> Vec<Record> {
        let mut out: Vec<Vec<Record>> = group
            .iter()
            .map(|(c, reps)| Self::new_records(exp, c, reps))
            .collect();
        let fail = |out: &mut Vec<Vec<Record>>, skipped: bool, why: &str| {
            for r in out.iter_mut().flatten() {
                if r.result.is_none() && r.error.is_none() && r.skipped.is_none() {
                    if skipped {
                        r.skipped = Some(why.to_string());
                    } else {
                        r.error = Some(why.to_string());
                    }
                }
            }
        };
        if let Some(Err(why)) = &self.link {
            fail(
                &mut out,
                true,
                &format!("link emulation is not available here ({why})"),
            );
            return out.into_iter().flatten().collect();
        }
        // The runner groups only cells with the same server controller.
        if let Err(e) = self.ensure_server(group[0].0.config.cc_server.as_deref()) {
            fail(&mut out, false, &e.to_string());
            return out.into_iter().flatten().collect();
        }
        let Some(server) = &self.server else {
            fail(&mut out, false, "no server");
            return out.into_iter().flatten().collect();
        };
        let stats_addr = server
            .plain_port
            .map(|p| SocketAddr::from(([127, 0, 0, 1], p)));
        let plans: Vec<Result<Plan, String>> = group
            .iter()
            .map(|(c, _)| plan(exp, &c.config, server))
            .collect();
        let file = |ci: usize, what: &str| dir.join(format!(".link-{ci}.{what}"));
        let json = |ci: usize, rep: u32| dir.join(format!(".link-{ci}-{rep}.json"));
        let rc = |ci: usize, rep: u32| dir.join(format!(".link-{ci}-{rep}.rc"));
        let runnable: Vec<usize> = (0..group.len()).filter(|&ci| plans[ci].is_ok()).collect();
        for (ci, p) in plans.iter().enumerate() {
            if let Err(e) = p {
                for r in out[ci].iter_mut() {
                    r.error = Some(e.clone());
                }
            }
        }
        let cleanup = || {
            for (ci, (_, reps)) in group.iter().enumerate() {
                let _ = std::fs::remove_file(file(ci, "done"));
                let _ = std::fs::remove_file(file(ci, "go"));
                for &rep in reps {
                    let _ = std::fs::remove_file(json(ci, rep));
                    let _ = std::fs::remove_file(rc(ci, rep));
                }
            }
        };
        cleanup();
        if runnable.is_empty() {
            return out.into_iter().flatten().collect();
        }
        let first = group[runnable[0]].0;
        let mut cmd = Command::new(&self.opts.hxlab_bin);
        cmd.arg("link");
        cmd.args(first.config.link_args());
        if let Some(s) = exp.seed {
            cmd.args([
                "--seed",
                &(s + u64::from(group[runnable[0]].1[0])).to_string(),
            ]);
        }
        let bin = shell_quote(&self.opts.hxlab_bin.display().to_string());
        let q = |p: &Path| shell_quote(&p.display().to_string());
        let mut script = String::from("H=$HXLAB_LINK_HOST; case $H in *:*) H=\"[$H]\";; esac");
        for (k, &ci) in runnable.iter().enumerate() {
            let Ok(plan) = &plans[ci] else { continue };
            for &rep in &group[ci].1 {
                script.push_str("; ");
                script.push_str(&bin);
                for a in Self::load_args(plan, &json(ci, rep)) {
                    script.push(' ');
                    script.push_str(&shell_quote(&a));
                }
                script.push_str(&format!("; echo $? > {}", q(&rc(ci, rep))));
            }
            script.push_str(&format!("; : > {}", q(&file(ci, "done"))));
            if k + 1 < runnable.len() {
                // Wait (bounded by the runner's timeout, which kills the group) until the
                // runner has read the server's counters for this cell.
                script.push_str(&format!(
                    "; while [ ! -e {} ]; do sleep 0.002; done",
                    q(&file(ci, "go"))
                ));
            }
        }
        cmd.args(["--", "sh", "-c", &script]);
        let total_reps: usize = runnable.iter().map(|&ci| group[ci].1.len()).sum();
        let deadline = Instant::now() + exp.timeout * total_reps as u32 + Duration::from_secs(30);
        let mut before = stats_addr.and_then(server_stats);
        let (mut child, stderr) = match spawn_group(cmd) {
            Ok(x) => x,
            Err(e) => {
                fail(&mut out, false, &e);
                return out.into_iter().flatten().collect();
            }
        };
        let group_start = Instant::now();
        let mut walls = 0.0;
        let mut t = Instant::now();
        let mut exited: Option<Option<i32>> = None;
        let mut finished = vec![false; group.len()];
        for &ci in &runnable {
            // Wait for this cell's marker, the link's exit, or the deadline.
            loop {
                if file(ci, "done").exists() {
                    break;
                }
                if exited.is_none() {
                    if let Ok(Some(st)) = child.try_wait() {
                        exited = Some(st.code());
                    }
                }
                if exited.is_some() || Instant::now() > deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            let after = stats_addr.and_then(server_stats);
            let wall = t.elapsed().as_secs_f64();
            let n = group[ci].1.len();
            let cost = server_cost(&before, &after, group[ci].0.config.protocol, n);
            let cc = server_cc(&before, &after, group[ci].0.config.protocol);
            walls += wall;
            for r in out[ci].iter_mut() {
                r.wall_s = wall / n as f64;
                r.server = cost.clone();
                r.server_cc = cc.clone();
            }
            finished[ci] = file(ci, "done").exists();
            // The script waits for "go", so this reading is also the next cell's start.
            before = after;
            t = Instant::now();
            let _ = std::fs::write(file(ci, "go"), b"");
            if !finished[ci] {
                break;
            }
        }
        // Let the link tear down. Once every repetition is done nothing more is measured, so
        // a link that lingers (it drains packets still in flight, e.g. QUIC retransmissions
        // towards clients that have gone) is asked to stop after a grace period, then killed;
        // its TUN devices and namespace go with its file descriptors.
        let all_done = runnable.iter().all(|&ci| finished[ci]);
        let script_done = Instant::now();
        let mut termed = false;
        let code = loop {
            if let Some(c) = exited {
                break c;
            }
            if let Ok(Some(st)) = child.try_wait() {
                break st.code();
            }
            if all_done && !termed && script_done.elapsed() > LINK_GRACE {
                // SAFETY: kill has no memory-safety preconditions; the pid is our child.
                unsafe {
                    libc::kill(child.id() as i32, libc::SIGTERM);
                }
                termed = true;
            }
            let past_grace = all_done && script_done.elapsed() > 2 * LINK_GRACE;
            if Instant::now() > deadline || past_grace {
                // SAFETY: kill has no memory-safety preconditions; -pid names the child's group.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        // SAFETY: as above; nothing of the group may outlive it.
        unsafe {
            libc::kill(-(child.id() as i32), libc::SIGKILL);
        }
        let stderr = stderr.join().unwrap_or_default();
        for &ci in &runnable {
            let expected = plans[ci].as_ref().ok().and_then(|p| p.expected_body_bytes);
            for (r, &rep) in out[ci].iter_mut().zip(&group[ci].1) {
                r.expected_body_bytes = expected;
                r.exit_code = std::fs::read_to_string(rc(ci, rep))
                    .ok()
                    .and_then(|t| t.trim().parse().ok());
                fill_record(r, &json(ci, rep), &stderr, Some(code));
            }
        }
        cleanup();
        self.link_extra_s += (group_start.elapsed().as_secs_f64() - walls).max(0.0);
        out.into_iter().flatten().collect()
    }
}

/// A page of `n` async scripts of `size` bytes from `/bytes/SIZE?delay=MS`: each waits the
/// server's delay, and the browser reads every body to the end (it abandons image bodies
/// that do not decode, which would cut the transfer short).
fn page_html(n: u64, size: u64, ms: u128) -> String {
    let mut html = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hxlab lab page</title></head><body>\n<p>{n} resources of {size} bytes, {ms} ms server delay each</p>\n"
    );
    for i in 0..n {
        html.push_str(&format!(
            "<script async src=\"/bytes/{size}?delay={ms}&amp;r={i}\"></script>\n"
        ));
    }
    html.push_str("</body></html>\n");
    html
}

/// The server's cost between two `/stats` readings, shared by `n` repetitions.
fn server_cost(
    before: &Option<ServerStats>,
    after: &Option<ServerStats>,
    proto: Protocol,
    n: usize,
) -> Option<ServerCost> {
    let (b, a) = (before.as_ref()?, after.as_ref()?);
    let key = proto.stats_key();
    let requests = a.requests.get(key)?.saturating_sub(*b.requests.get(key)?);
    let n = n.max(1);
    Some(ServerCost {
        cpu_s: (a.cpu_s - b.cpu_s).max(0.0) / n as f64,
        requests: requests / n as u64,
    })
}

/// Reads a repetition's RunResult and decides whether it failed. `link_exit` is the link's
/// exit status for repetitions run inside one (None for a direct `hxlab load`).
fn fill_record(record: &mut Record, json: &Path, stderr: &str, link_exit: Option<Option<i32>>) {
    let last_line = stderr
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string();
    match std::fs::read_to_string(json) {
        Ok(text) => match serde_json::from_str::<RunResult>(&text) {
            Ok(r) => {
                record.client_cc = r.congestion_control.clone();
                record.result = Some(r);
            }
            Err(e) => record.error = Some(format!("hxlab load wrote an unreadable result: {e}")),
        },
        Err(_) => {
            let status = match (link_exit, record.exit_code) {
                (_, Some(c)) => format!("hxlab load exit {c}"),
                (Some(Some(c)), None) => format!("hxlab link exit {c} before this repetition ran"),
                (Some(None), None) => "hxlab link stopped by a signal or the timeout".into(),
                (None, None) => "stopped by a signal or the timeout".into(),
            };
            record.error = Some(format!("no result ({status}): {last_line}"));
        }
    }
    if record.error.is_none() && record.exit_code != Some(0) {
        if let Some(r) = &record.result {
            if r.requests_failed == 0 && r.errors.total() == 0 {
                record.error = Some(format!(
                    "hxlab load exited with {:?}: {last_line}",
                    record.exit_code
                ));
            }
        }
    }
}

/// Starts a command in its own process group with stderr collected by a thread.
fn spawn_group(mut cmd: Command) -> Result<(Child, std::thread::JoinHandle<String>), String> {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .die_with_parent();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || stderr.map(tail).unwrap_or_default());
    Ok((child, reader))
}

fn count_cells(pending: &[(&Cell, u32)]) -> usize {
    let mut n = 0;
    let mut last = "";
    for (c, _) in pending {
        if c.key != last {
            n += 1;
            last = &c.key;
        }
    }
    n
}

/// A warning when the connections did not speak the protocol asked for.
fn fallback(cfg: &CellConfig, r: Option<&RunResult>) -> Option<String> {
    let r = r?;
    let want = match cfg.protocol {
        Protocol::H1 | Protocol::H1Tls => ["http/1.1", "h1", "http/1.0"].as_slice(),
        Protocol::H2 | Protocol::H2c => ["h2", "h2c"].as_slice(),
        Protocol::H3 => ["h3"].as_slice(),
    };
    let other: Vec<String> = r
        .negotiated
        .iter()
        .filter(|(k, n)| **n > 0 && !want.contains(&k.to_ascii_lowercase().as_str()))
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect();
    (!other.is_empty()).then(|| {
        format!(
            "asked for {} but connections negotiated {}",
            cfg.protocol.name(),
            other.join(", ")
        )
    })
}

/// The load generator's arguments for one cell.
struct Plan {
    args: Vec<String>,
    expected_body_bytes: Option<u64>,
}

fn plan(exp: &Experiment, cfg: &CellConfig, server: &Server) -> Result<Plan, String> {
    let (scheme, port) = match cfg.protocol {
        Protocol::H1 | Protocol::H2c => ("http", server.plain_port),
        Protocol::H1Tls | Protocol::H2 => ("https", server.tls_port),
        Protocol::H3 => ("https", server.h3_port),
    };
    let Some(port) = port else {
        let what = match cfg.protocol {
            Protocol::H3 => format!(
                "an HTTP/3 listener (ready file: h3 = {:?})",
                server.ready.h3
            ),
            _ if scheme == "https" => {
                format!("a TLS port (ready file: tls = {:?})", server.ready.tls)
            }
            _ => format!(
                "a plain port (ready file: plain = {:?})",
                server.ready.plain
            ),
        };
        return Err(format!("the server has no {what}"));
    };
    let origin = format!("{scheme}://{HOST}:{port}");
    let delay_ms = cfg.delay.as_millis();
    let delay_q = if delay_ms > 0 {
        format!("?delay={delay_ms}")
    } else {
        String::new()
    };
    let mut args: Vec<String> = vec!["--proto".into(), cfg.protocol.load_proto().into()];
    let mut expected = None;
    match exp.workload {
        Workload::Resources | Workload::Browser => {
            let n = cfg.resources;
            let (clients, streams) = if cfg.protocol.multiplexed() {
                (1, n.min(MAX_STREAMS))
            } else {
                (n.min(BROWSER_CONNECTIONS), 1)
            };
            let mut urls = Vec::new();
            let requests;
            if cfg.push {
                // The page with its resources pushed: one request, the rest arrives by push.
                urls.push(format!(
                    "{origin}/page?n={n}&size={}&delay={delay_ms}&push=1",
                    cfg.size
                ));
                requests = 1;
                // Accept the pushes: the request completes when the page and every pushed
                // resource have arrived, their bytes counted (spec: push needs h2/h2c).
                args.push("--push".into());
            } else if exp.factors.iter().any(|f| f.name == "push") {
                // The same page, resources requested by the client after the page arrived.
                urls.push(format!(
                    "{origin}/page?n={n}&size={}&delay={delay_ms}&push=0",
                    cfg.size
                ));
                for _ in 0..n {
                    urls.push(format!("{origin}/bytes/{}{delay_q}", cfg.size));
                }
                requests = n + 1;
            } else {
                urls.push(format!("{origin}/bytes/{}{delay_q}", cfg.size));
                requests = n;
            }
            let (clients, streams) = if urls.len() > 1 {
                (1, 1)
            } else {
                (clients, streams)
            };
            expected = Some(n * cfg.size);
            args.extend([
                "-n".into(),
                requests.to_string(),
                "-c".into(),
                clients.to_string(),
                "-m".into(),
                streams.to_string(),
            ]);
            args.extend(urls);
        }
        Workload::Throughput => {
            if let Some(d) = cfg.duration {
                args.extend(["-D".into(), format!("{}ms", d.as_millis())]);
            } else {
                args.extend(["-n".into(), cfg.requests.to_string()]);
            }
            args.extend([
                "-c".into(),
                cfg.clients.to_string(),
                "-m".into(),
                cfg.streams.to_string(),
            ]);
            if let Some(w) = exp.warm_up.filter(|w| !w.is_zero()) {
                args.extend(["--warm-up".into(), format!("{}ms", w.as_millis())]);
            }
            args.push(format!("{origin}/bytes/{}{delay_q}", cfg.size));
        }
    }
    if let Some(cc) = &cfg.cc_client {
        args.extend(["--cc".into(), cc.clone()]);
    }
    if !cfg.keepalive {
        args.push("--no-keepalive".into());
    }
    if cfg.tls_resume || cfg.zero_rtt {
        // A returning visitor: one unmeasured request first, so the measured connections
        // resume its session (and send early data) on every protocol alike.
        args.push("--tls-resume".into());
        args.push("--prime".into());
    }
    if cfg.zero_rtt && cfg.protocol != Protocol::H3 {
        // TCP's own 0-RTT: the ClientHello and its early data ride on the SYN.
        args.push("--tfo".into());
    }
    if cfg.zero_rtt {
        args.push("--0rtt".into());
    }
    if cfg.protocol.tls() {
        if cfg.needs_link() {
            // Through the link the server is reached by an address its certificate does not name.
            args.push("-k".into());
        } else {
            args.extend(["--cacert".into(), server.cert.display().to_string()]);
        }
    }
    // URLs last, as the contract has them.
    let (urls, mut rest): (Vec<String>, Vec<String>) =
        args.into_iter().partition(|a| a.contains(HOST));
    rest.extend(urls);
    Ok(Plan {
        args: rest,
        expected_body_bytes: expected,
    })
}

/// Single-quotes an argument for sh, leaving the link-host placeholder to the shell.
fn shell_quote(a: &str) -> String {
    a.split(HOST)
        .map(|part| format!("'{}'", part.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join("\"$H\"")
}

/// Runs a command in its own process group with a time limit; returns (exit code, the end
/// of its stderr). On timeout the whole group is killed.
fn run_bounded(cmd: Command, limit: Duration) -> Result<(Option<i32>, String), String> {
    let (mut child, reader) = spawn_group(cmd)?;
    let pid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(limit) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("waiting for the child: {e}")),
        Err(_) => {
            // SAFETY: kill has no memory-safety preconditions; -pid names the child's group.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return Err(format!("did not finish within {:?} and was stopped", limit));
        }
    };
    // Children left in the group (e.g. under `hxlab link`) must not outlive the repetition.
    // SAFETY: as above.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
    let err = reader.join().unwrap_or_default();
    Ok((status.code(), err))
}

/// The last 8 KiB of a stream, read to its end.
fn tail(mut r: impl Read) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > 16384 {
                    buf.drain(..buf.len() - 8192);
                }
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The server's counters: CPU seconds (user + system), requests per protocol, connections
/// per protocol and congestion controller.
#[derive(Clone, Debug, Default)]
struct ServerStats {
    cpu_s: f64,
    requests: BTreeMap<String, u64>,
    cc: BTreeMap<String, BTreeMap<String, u64>>,
}

/// The server's connections of `proto` per congestion controller between two readings.
fn server_cc(
    before: &Option<ServerStats>,
    after: &Option<ServerStats>,
    proto: Protocol,
) -> BTreeMap<String, u64> {
    let (Some(b), Some(a)) = (before, after) else {
        return BTreeMap::new();
    };
    let key = proto.stats_key();
    let empty = BTreeMap::new();
    let was = b.cc.get(key).unwrap_or(&empty);
    a.cc.get(key)
        .unwrap_or(&empty)
        .iter()
        .map(|(k, n)| (k.clone(), n.saturating_sub(*was.get(k).unwrap_or(&0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `GET /stats` on the plain port.
fn server_stats(addr: SocketAddr) -> Option<ServerStats> {
    let addr = addr.to_socket_addrs().ok()?.next()?;
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut buf = Vec::new();
    s.take(1 << 20).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let (_, body) = text.split_once("\r\n\r\n")?;
    let body = if text[..text.find("\r\n\r\n")?]
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)?
    } else {
        body.to_string()
    };
    let v: serde_json::Value = serde_json::from_str(body.trim()).ok()?;
    let cpu_s = v.get("cpu_user_s")?.as_f64()? + v.get("cpu_sys_s")?.as_f64()?;
    let by = v.get("by_protocol")?.as_object()?;
    let requests = by
        .iter()
        .filter_map(|(k, p)| Some((k.clone(), p.get("requests")?.as_u64()?)))
        .collect();
    let cc = by
        .iter()
        .filter_map(|(k, p)| {
            let m = p.get("cc")?.as_object()?;
            Some((
                k.clone(),
                m.iter()
                    .filter_map(|(c, n)| Some((c.clone(), n.as_u64()?)))
                    .collect(),
            ))
        })
        .collect();
    Some(ServerStats {
        cpu_s,
        requests,
        cc,
    })
}

fn dechunk(body: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = body;
    loop {
        let (size_line, after) = rest.split_once("\r\n")?;
        let size = usize::from_str_radix(size_line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(after.get(..size)?);
        rest = after.get(size..)?.strip_prefix("\r\n")?;
    }
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
    use crate::spec::{parse, Overrides};

    fn fake_server() -> Server {
        Server {
            cc: None,
            child: Command::new("true").spawn().expect("spawn true"),
            ready: Ready {
                spki_sha256: None,
                tls: Some("127.0.0.1:4433".into()),
                plain: Some("127.0.0.1:8080".into()),
                h3: Some("127.0.0.1:4433".into()),
            },
            cert: PathBuf::from("/tmp/c.pem"),
            tls_port: Some(4433),
            plain_port: Some(8080),
            h3_port: Some(4433),
        }
    }

    #[test]
    fn resources_workload_fetches_as_a_browser_would() {
        let e = parse("t.toml", "protocol = [\"h1-tls\", \"h2\", \"h3\", \"h1\"]\ndelay = \"50ms\"\nresources = 12\nsize = \"10KiB\"\n", &Overrides::default()).expect("parse");
        let s = fake_server();
        let p = plan(&e, &e.cells[0].config, &s).expect("plan");
        let a = p.args.join(" ");
        assert_eq!(a, format!("--proto h1 -n 12 -c 6 -m 1 --cacert /tmp/c.pem https://{HOST}:4433/bytes/10240?delay=50"));
        let p = plan(&e, &e.cells[1].config, &s).expect("plan");
        assert!(
            p.args.join(" ").starts_with("--proto h2 -n 12 -c 1 -m 12 "),
            "{:?}",
            p.args
        );
        assert_eq!(p.expected_body_bytes, Some(12 * 10240));
        let p = plan(&e, &e.cells[3].config, &s).expect("plan");
        assert_eq!(
            p.args.last().map(String::as_str),
            Some(format!("http://{HOST}:8080/bytes/10240?delay=50").as_str())
        );
        assert!(!p.args.contains(&"--cacert".to_string()));
        let e = parse(
            "t.toml",
            "protocol = \"h3\"\nresources = 3750\n",
            &Overrides::default(),
        )
        .expect("parse");
        let p = plan(&e, &e.cells[0].config, &s).expect("plan");
        assert!(
            p.args
                .join(" ")
                .starts_with("--proto h3 -n 3750 -c 1 -m 100 "),
            "the server allows 100 streams: {:?}",
            p.args
        );
    }

    #[test]
    fn throughput_and_push_plans() {
        let e = parse(
            "t.toml",
            "workload = \"throughput\"\nwarm_up = \"1s\"\nprotocol = \"h2\"\nrequests = 1000\nclients = 10\nstreams = 10\nsize = 100\nprofile = \"WiFi\"\n",
            &Overrides::default(),
        )
        .expect("parse");
        let p = plan(&e, &e.cells[0].config, &fake_server()).expect("plan");
        assert_eq!(
            p.args.join(" "),
            format!(
                "--proto h2 -n 1000 -c 10 -m 10 --warm-up 1000ms -k https://{HOST}:4433/bytes/100"
            )
        );
        let e = parse(
            "t.toml",
            "protocol = \"h2\"\nresources = 1\nsize = \"290KB\"\npush = [false, true]\n",
            &Overrides::default(),
        )
        .expect("parse");
        let p = plan(&e, &e.cells[0].config, &fake_server()).expect("plan");
        assert_eq!(
            p.args.iter().filter(|a| a.contains(HOST)).count(),
            2,
            "page, then the script"
        );
        assert!(!p.args.iter().any(|a| a == "--push"), "{:?}", p.args);
        let p = plan(&e, &e.cells[1].config, &fake_server()).expect("plan");
        assert!(
            p.args.last().is_some_and(|u| u.ends_with("push=1")),
            "{:?}",
            p.args
        );
        // Only the pushed cell accepts pushes.
        assert!(p.args.iter().any(|a| a == "--push"), "{:?}", p.args);
    }

    #[test]
    fn shell_quoting_leaves_only_the_host_to_the_shell() {
        let q = shell_quote(&format!("https://{HOST}:1/x?a=1&b='2'"));
        assert_eq!(q, "'https://'\"$H\"':1/x?a=1&b='\\''2'\\'''");
        let out = Command::new("sh")
            .args(["-c", &format!("H=10.0.0.1; printf %s {q}")])
            .output()
            .expect("sh");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "https://10.0.0.1:1/x?a=1&b='2'"
        );
    }

    #[test]
    fn run_bounded_stops_a_hung_child() {
        let t = Instant::now();
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 30"]);
        let r = run_bounded(c, Duration::from_millis(300));
        assert!(r.is_err());
        assert!(t.elapsed() < Duration::from_secs(10));
        let mut c = Command::new("sh");
        c.args(["-c", "echo oops >&2; exit 3"]);
        assert_eq!(
            run_bounded(c, Duration::from_secs(10)).expect("ran"),
            (Some(3), "oops\n".to_string())
        );
    }

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

    #[test]
    fn dechunks_stats() {
        assert_eq!(
            dechunk("5\r\nhello\r\n1\r\n!\r\n0\r\n\r\n").as_deref(),
            Some("hello!")
        );
    }
}
