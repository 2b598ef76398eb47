//! A whole `hxlab page` job: checked ([`check`]), run ([`run`]: one fresh browser per run,
//! the replay's counts per run, the recording, the per-run HARs, the text, the `--json`
//! document and the `--html` page) and judged ([`failure`]). The command line maps its flags
//! onto a [`PageJob`] and chooses where the text goes.

use crate::options::PageOptions;
use crate::page::PageSession;
use hxlab_browser::{BrowserError, PageConfig};
use hxlab_contract::{PageJob, PageReport, Recording, ReplayCounts, ReplaySource};
use hxlab_core::page::{Outcome, PageRun};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Why a page job did not run or did not count.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// The job cannot run as given (a usage error on the command line): a recording that
    /// cannot be replayed over the protocol, a URL the browser cannot be pointed at.
    #[error("{0}")]
    Usage(String),
    /// The browser could not be started or found.
    #[error(transparent)]
    Browser(#[from] BrowserError),
    /// The page's origin, link or replay failed, the run was interrupted, or no run counted.
    #[error("{0}")]
    Failed(String),
    /// A file or directory could not be written, or the runtime not started.
    #[error("{what}")]
    Io {
        /// What was being done (`writing FILE`).
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A HAR or the report could not be serialised.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The text could not be written.
    #[error(transparent)]
    Text(#[from] std::io::Error),
}

/// An I/O error with what was being done.
fn io(what: String) -> impl FnOnce(std::io::Error) -> PageError {
    move |source| PageError::Io { what, source }
}

/// Checks a validated job before anything starts: the recording (when replaying) can be
/// replayed over the protocol and the URL (in URL mode) can be loaded. Returns the notes to
/// show about the recording (where its load starts, what it left out).
pub fn check(job: &PageJob) -> Result<Vec<String>, PageError> {
    let mut notes = Vec::new();
    if let Some(har) = &job.replay {
        notes = crate::replay::replay_notes(har, job.proto).map_err(PageError::Usage)?;
    }
    if let Some(url) = &job.url {
        let mut check = PageConfig::new(url.clone(), job.proto);
        check.engine = job.browser;
        check.spki_sha256 = job.spki.clone();
        check.insecure = job.insecure;
        check
            .validate()
            .map_err(|e| PageError::Usage(e.to_string()))?;
    }
    Ok(notes)
}

/// Runs a checked job: its page loads, each in a fresh browser, with the page served by
/// `hxlab_bin`'s `serve` when it is synthetic or replayed. Writes the text to `text` and
/// every output the job names (recording, HARs, `--json`, `--html`); returns the report
/// (what `--json` writes) even when no run counted ([`failure`] says so).
pub fn run(
    job: &PageJob,
    hxlab_bin: PathBuf,
    text: &mut dyn Write,
) -> Result<PageReport, PageError> {
    let opts = PageOptions::from_job(job, hxlab_bin);
    if let Some(dir) = &job.har_dir {
        std::fs::create_dir_all(dir)
            .map_err(io(format!("creating HAR directory {}", dir.display())))?;
    }
    if let Some(path) = &job.html {
        check_html_path(path)?;
    }
    // A missing browser is reported before anything is started.
    match job.browser {
        hxlab_browser::Engine::Chromium => hxlab_browser::find_chromium(&job.chromium)?,
        hxlab_browser::Engine::Firefox => hxlab_browser::find_firefox(&job.firefox)?,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io("starting the tokio runtime".into()))?;
    let mut session = PageSession::start(&opts).map_err(PageError::Failed)?;
    crate::text::header(text, job, &session)?;
    if let Some(d) = &job.qlog_dir {
        std::fs::create_dir_all(d)
            .map_err(|e| PageError::Failed(format!("--qlog {}: {e}", d.display())))?;
    }
    let mut runs = Runs::default();
    for i in 1..=job.runs {
        runs.one(&rt, job, &session, i, text)?;
    }
    let rep = crate::totals::report(&runs.outcomes, job.push);
    let mut doc = crate::totals::report_json(&session, &opts, &runs.outcomes, &rep);
    doc.link_stats = session.stop_link();
    crate::text::footer(text, job, &rep, &doc)?;
    runs.add_replay(&mut doc, job);
    if let Some(dest) = &job.json {
        write_json(dest, &doc)?;
    }
    if let Some(path) = &job.html {
        let html =
            hxlab_report::page_html::render(&session.url, opts.proto.name(), &runs.outcomes, &rep);
        hxlab_core::write_atomically(path, html.as_bytes())
            .map_err(io(format!("writing {}", path.display())))?;
        writeln!(
            text,
            "  HTML with one waterfall per run: {}",
            path.display()
        )?;
    }
    text.flush()?;
    Ok(doc)
}

/// Why a finished job does not count: the recording it asked for was not made, or no run
/// counted. None when it does.
pub fn failure(job: &PageJob, report: &PageReport) -> Option<PageError> {
    if let (Some(path), false) = (
        &job.record,
        report.recorded.as_ref().is_some_and(|r| r.written),
    ) {
        return Some(PageError::Failed(format!(
            "no run loaded the page, so nothing was recorded into {}",
            path.display()
        )));
    }
    let summary = &report.summary;
    (summary.valid_runs == 0).then(|| {
        PageError::Failed(format!(
            "no run counted ({})",
            summary
                .left_out
                .first()
                .cloned()
                .unwrap_or_else(|| "no run finished".into())
        ))
    })
}

/// The runs so far: their outcomes, the replay's counts of each, and whether the recording
/// was written.
#[derive(Default)]
struct Runs {
    outcomes: Vec<Outcome>,
    replays: Vec<Option<ReplayCounts>>,
    recorded: bool,
}

impl Runs {
    /// Run `i`: the replay's counts reset, the page loaded in a fresh browser (Ctrl-C stops
    /// the job), the recording and the run's HAR written, its rows written to `text`.
    fn one(
        &mut self,
        rt: &tokio::runtime::Runtime,
        job: &PageJob,
        session: &PageSession,
        i: u32,
        text: &mut dyn Write,
    ) -> Result<(), PageError> {
        if let Some(plain) = session.replay_stats {
            hxlab_child::get_replay_counts(plain, true).map_err(PageError::Failed)?;
        }
        let mut cfg = session.run_config();
        cfg.netlog = job
            .qlog_dir
            .as_ref()
            .map(|d| d.join(format!("netlog.run-{i}.json")));
        let result = rt.block_on(async {
            tokio::select! {
                r = hxlab_browser::load_page_async(&cfg) => Some(r),
                _ = tokio::signal::ctrl_c() => None,
            }
        });
        let Some(result) = result else {
            return Err(PageError::Failed("interrupted".into()));
        };
        match result {
            Ok(mut run) => {
                if let (Some(path), false) = (&job.record, self.recorded) {
                    self.recorded = record_run(path, &run, text)?;
                }
                let replay = replay_counts(session, &mut run)?;
                if let (Some(dir), Some(har)) = (&job.har_dir, run.har.take()) {
                    let path = dir.join(format!("run-{i}.har"));
                    let body = serde_json::to_vec_pretty(&har)?;
                    std::fs::write(&path, body)
                        .map_err(io(format!("writing {}", path.display())))?;
                }
                crate::text::run_rows(text, i, &run, replay.as_ref())?;
                self.replays.push(replay);
                self.outcomes.push(Outcome::Measured(Box::new(run)));
            }
            Err(e @ (BrowserError::NotFound(_) | BrowserError::FirefoxNotFound(_))) => {
                return Err(e.into())
            }
            Err(e) => {
                let mut msg = e.to_string();
                let chromium = job.browser == hxlab_browser::Engine::Chromium;
                if matches!(e, BrowserError::Certificate(_)) && session.spki.is_empty() && chromium
                {
                    msg.push_str(" (trust the server's key with --spki BASE64)");
                }
                if matches!(e, BrowserError::Certificate(_)) && !chromium {
                    msg.push_str(" (Firefox trusts the certificates in its profile; for a URL, pass -k to accept this server's)");
                }
                writeln!(text, "{i:>4}  FAILED: {msg}")?;
                self.replays.push(None);
                self.outcomes.push(Outcome::Failed(msg));
            }
        }
        Ok(())
    }

    /// The replay's counts per run and the recording in the JSON document.
    fn add_replay(&mut self, doc: &mut PageReport, job: &PageJob) {
        if let Some(har) = &job.replay {
            doc.replay = Some(ReplaySource { har: har.clone() });
            for (run, counts) in doc.runs.iter_mut().zip(std::mem::take(&mut self.replays)) {
                run.replay = Some(counts);
            }
        }
        if let Some(path) = &job.record {
            doc.recorded = Some(Recording {
                har: path.clone(),
                written: self.recorded,
            });
        }
    }
}

/// Writes the run's HAR to `path` (a regular file is replaced whole); false when the run
/// has none.
fn record_run(path: &Path, run: &PageRun, text: &mut dyn Write) -> Result<bool, PageError> {
    let Some(har) = &run.har else {
        return Ok(false);
    };
    let body = serde_json::to_vec(har)?;
    hxlab_core::files::write_output(path, &body)
        .map_err(io(format!("writing {}", path.display())))?;
    writeln!(text, "     recorded into {}", path.display())?;
    let p = &run.problems;
    if p.failed + p.unfinished > 0 {
        writeln!(
            text,
            "     note: the recording keeps {} request(s) that got no answer as failed entries (with `_error`); replay makes them fail the same way",
            p.failed + p.unfinished
        )?;
    }
    if p.http_errors > 0 {
        writeln!(
            text,
            "     note: {} 4xx/5xx answer(s) recorded as they came; replay answers them the same",
            p.http_errors
        )?;
    }
    Ok(true)
}

/// With `--replay`: the run's replay counts, and the run flagged when page resources missed
/// the archive.
fn replay_counts(
    session: &PageSession,
    run: &mut PageRun,
) -> Result<Option<ReplayCounts>, PageError> {
    let Some(plain) = session.replay_stats else {
        return Ok(None);
    };
    let mut counts = hxlab_child::get_replay_counts(plain, false).map_err(PageError::Failed)?;
    crate::replay::add_outside(&mut counts, &run.resources, &session.recorded_hosts);
    if let Some(why) = crate::replay::replay_flag(&counts, &run.resources) {
        run.flag = Some(match run.flag.take() {
            Some(f) => format!("{f}; {why}"),
            None => why,
        });
    }
    Ok(Some(counts))
}

/// Writes the `--json` document to `dest` (`-`: standard output).
fn write_json(dest: &str, doc: &PageReport) -> Result<(), PageError> {
    let body = doc.to_json()?;
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(body.as_bytes())?;
        out.flush()?;
    } else {
        std::fs::write(Path::new(dest), body).map_err(io(format!("writing {dest}")))?;
    }
    Ok(())
}

/// Refuses, before any run, a `--html` path that cannot be written: a directory, or a file
/// in a directory that does not exist.
fn check_html_path(path: &Path) -> Result<(), PageError> {
    if path.is_dir() {
        return Err(PageError::Failed(format!(
            "--html {}: is a directory; give a file name",
            path.display()
        )));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(PageError::Failed(format!(
            "--html {}: directory {} does not exist",
            path.display(),
            dir.display()
        )));
    }
    Ok(())
}
