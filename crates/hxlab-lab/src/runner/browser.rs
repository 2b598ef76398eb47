//! The browser workload: one page load in a fresh headless browser (the cell's engine, Chromium
//! unless `browser = "firefox"`) per repetition
//! (`hxlab page --runs 1`), its `PageRun` stored as the record's RunResult and its resources
//! as the record's waterfall.

use super::record::{new_records, run_child};
use super::target::client_requests;
use super::Runner;
use crate::experiment::{Cell, CellConfig, Experiment, PageSource, Protocol};
use hxlab_child::child::last_line;
use hxlab_contract::{PageJob, PageReport};
use hxlab_core::cc::CongestionControl;
use hxlab_core::page::Outcome;
use hxlab_core::Proto;
use hxlab_report::{Record, Workload};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

impl Runner {
    /// One page load in a fresh headless browser (`hxlab page --runs 1`) of the server's
    /// synthetic page with the cell's resources; its `PageRun` becomes the record's RunResult
    /// (`duration_s` = the load event).
    pub(super) fn run_browser(
        &mut self,
        exp: &Experiment,
        cell: &Cell,
        rep: u32,
        dir: &Path,
    ) -> Record {
        let mut record = new_records(exp, cell, &[rep]).remove(0);
        if cell.config.needs_link() {
            if let Some(Err(why)) = &self.link {
                record.skipped = Some(format!("link emulation is not available here ({why})"));
                return record;
            }
        }
        if let Some(page) = &exp.page {
            return self.run_page_source(exp, cell, record, rep, dir, page);
        }
        let target = match self.target(exp, cell) {
            Ok(t) => t,
            Err(no) => {
                no.mark(&mut record);
                return record;
            }
        };
        let cfg = &cell.config;
        let url = match target.templated(Workload::Browser, cfg.size, cfg.resources) {
            Some(url) => url,
            None => match self.hxlab_page(cfg) {
                Ok(name) => format!("{}/static/{name}", target.base),
                Err(e) => {
                    record.error = Some(e);
                    return record;
                }
            },
        };
        let json = dir.join(format!(".page-{rep}.json"));
        let _ = std::fs::remove_file(&json);
        let job = trusting(
            PageJob {
                url: Some(url),
                qlog_dir: self.netlog_dir(cfg, dir, cell),
                ..page_job(exp, cfg, &json)
            },
            &target,
        );
        let cmd = match page_command(&self.opts.hxlab_bin, &job, &json) {
            Ok(c) => c,
            Err(e) => {
                record.error = Some(e);
                return record;
            }
        };
        let limit = exp.timeout + Duration::from_secs(30);
        let stderr = run_child(&mut record, cmd, limit, Some((&target.meter, cfg.protocol)));
        let code = record.exit_code;
        let page = read_page_report(&json);
        read_page_run(&mut record, page.as_ref(), code, &stderr, cfg.repeat_view);
        client_requests(&target.meter, &mut record);
        let _ = std::fs::remove_file(&json);
        let _ = std::fs::remove_file(json.with_extension("config.json"));
        record
    }
}

impl Runner {
    /// Where the cell's NetLog goes with `--qlog`: Chromium's only (Firefox writes none).
    fn netlog_dir(&self, cfg: &CellConfig, dir: &Path, cell: &Cell) -> Option<std::path::PathBuf> {
        let chromium = cfg.browser == hxlab_core::page::Engine::Chromium;
        (self.opts.qlog && chromium).then(|| super::evidence_path(dir, cell, ""))
    }

    /// One page load of a page the experiment names (`har` replayed by `hxlab page --replay`
    /// from its own replay server, or `url` as it is). No server of the lab's serves it, so
    /// the record has no server cost.
    fn run_page_source(
        &mut self,
        exp: &Experiment,
        cell: &Cell,
        mut record: Record,
        rep: u32,
        dir: &Path,
        page: &PageSource,
    ) -> Record {
        let cfg = &cell.config;
        let json = dir.join(format!(".page-{rep}.json"));
        let _ = std::fs::remove_file(&json);
        let base = PageJob {
            qlog_dir: self.netlog_dir(cfg, dir, cell),
            ..page_job(exp, cfg, &json)
        };
        let job = match page {
            // The replay server sends the page: the same controller on TCP and QUIC (the
            // cell's cc_server, else cubic), read back into the record.
            PageSource::Har(path, _) => PageJob {
                replay: Some(path.clone()),
                server_cc: Some(cfg.cc_server.unwrap_or(CongestionControl::Cubic)),
                scheduler: cfg.scheduler,
                notsent_lowat: cfg.notsent_lowat,
                ..base
            },
            PageSource::Url(url) => PageJob {
                url: Some(url.clone()),
                insecure: exp.page_trust.insecure,
                spki: exp.page_trust.spki.clone(),
                ..base
            },
        };
        let cmd = match page_command(&self.opts.hxlab_bin, &job, &json) {
            Ok(c) => c,
            Err(e) => {
                record.error = Some(e);
                return record;
            }
        };
        let stderr = run_child(
            &mut record,
            cmd,
            exp.timeout + Duration::from_secs(60),
            None,
        );
        let code = record.exit_code;
        let page = read_page_report(&json);
        read_page_run(&mut record, page.as_ref(), code, &stderr, cfg.repeat_view);
        // The replay server's connections per congestion controller and its send path, as
        // `hxlab page` read them back from its `/stats` (empty when unknown).
        if let Some(Ok(p)) = page {
            record.server_cc = p.server_cc.unwrap_or_default();
            record.scheduling = p.scheduling;
        }
        let _ = std::fs::remove_file(&json);
        let _ = std::fs::remove_file(json.with_extension("config.json"));
        record
    }

    /// Writes the synthetic page of `cfg` into hxlab serve's `/static/` directory (once);
    /// returns its file name.
    fn hxlab_page(&self, cfg: &crate::experiment::CellConfig) -> Result<String, String> {
        let ms = cfg.delay.as_millis();
        let name = format!("page-{}-{}-{ms}.html", cfg.resources, cfg.size);
        let page_path = self.opts.out_dir.join(".server").join("www").join(&name);
        if !page_path.exists() {
            let delay = Duration::from_millis(ms as u64);
            let html =
                hxlab_contract::SyntheticHtml::each_delayed(cfg.resources, cfg.size, delay).html();
            std::fs::write(&page_path, html)
                .map_err(|e| format!("{}: {e}", page_path.display()))?;
        }
        Ok(name)
    }
}

/// Longest the one recording page load of `hxlab compare --page` may take.
const RECORD_TIMEOUT: Duration = Duration::from_secs(120);

/// Records `url` once into `har` for `hxlab compare --page`: one `hxlab page` run with the
/// protocol left to the browser (as in the wild) and every body kept, through `run_child`
/// like every repetition's child (its own process group, bounded, its tree killed at the
/// end). `chromium` is the browser binary. The error is one line.
pub fn record_page(
    hxlab_bin: &Path,
    url: &str,
    har: &Path,
    insecure: bool,
    chromium: &Path,
) -> Result<(), String> {
    let job = PageJob {
        url: Some(url.to_string()),
        proto: Proto::Auto,
        runs: 1,
        timeout: RECORD_TIMEOUT,
        insecure,
        chromium: chromium.to_path_buf(),
        record: Some(har.to_path_buf()),
        ..PageJob::default()
    };
    let cmd = page_command(hxlab_bin, &job, har)?;
    let mut record = Record::default();
    let stderr = run_child(
        &mut record,
        cmd,
        RECORD_TIMEOUT + Duration::from_secs(60),
        None,
    );
    let _ = std::fs::remove_file(har.with_extension("config.json"));
    if har.exists() {
        return Ok(());
    }
    let exit = match record.exit_code {
        Some(c) => format!("exit status: {c}"),
        None => "no exit status: stopped by a signal or the time limit".to_string(),
    };
    Err(format!(
        "recording {url} failed (hxlab page exited with {exit}: {}); nothing to replay",
        last_line(&stderr)
    ))
}

/// Runs one page job as its own child (`hxlab page --config`, bounded by the job's runs
/// times its timeout plus a minute, its process tree killed at the end) and reads back the
/// report it wrote to `json`: how `hxlab compare --page --live` measures first-time and
/// returning visitors beside its forced cells. The error is one line.
pub fn page_visits(hxlab_bin: &Path, job: &PageJob, json: &Path) -> Result<PageReport, String> {
    let job = PageJob {
        json: Some(json.display().to_string()),
        ..job.clone()
    };
    let _ = std::fs::remove_file(json);
    let cmd = page_command(hxlab_bin, &job, json)?;
    let mut record = Record::default();
    let limit = job.timeout * job.runs * 2 + Duration::from_secs(60);
    let stderr = run_child(&mut record, cmd, limit, None);
    let _ = std::fs::remove_file(json.with_extension("config.json"));
    match read_page_report(json) {
        Some(report) => report,
        None => Err(format!(
            "hxlab page gave no report (exit {:?}): {}",
            record.exit_code,
            last_line(&stderr)
        )),
    }
}

/// `hxlab page --json`'s document as the child wrote it; None when it wrote none.
fn read_page_report(json: &Path) -> Option<Result<PageReport, String>> {
    let text = std::fs::read_to_string(json).ok()?;
    Some(
        PageReport::from_json(&text)
            .map_err(|e| format!("hxlab page wrote an unreadable report: {e}")),
    )
}

/// Fills the record from `hxlab page --json`'s first run (or says why there is none): its
/// RunResult and its waterfall, of the first view, or with `repeat` of the repeat view (the
/// first view is then only the visit that warmed the browser, and the replay's counts, of
/// both views, are not the repeat view's own, so they are not kept).
fn read_page_run(
    record: &mut Record,
    page: Option<&Result<PageReport, String>>,
    code: Option<i32>,
    stderr: &str,
    repeat: bool,
) {
    let first = match page {
        Some(Ok(p)) => p.runs.first(),
        Some(Err(e)) => {
            record.error = Some(e.clone());
            return;
        }
        None => None,
    };
    let Some(first) = first else {
        record.error = Some(format!(
            "hxlab page gave no result (exit {code:?}): {}",
            last_line(stderr)
        ));
        return;
    };
    let run = match &first.outcome {
        Outcome::Failed(e) => {
            record.error = Some(format!("page load failed: {e}"));
            return;
        }
        Outcome::Measured(run) if !repeat => {
            record.replay = first
                .replay
                .as_ref()
                .and_then(Option::as_ref)
                .map(hxlab_contract::ReplayCounts::outcome);
            run.as_ref()
        }
        Outcome::Measured(run) => match &run.repeat_view {
            Some(rv) => rv.as_ref(),
            None => {
                record.error = Some("hxlab page gave no repeat view".into());
                return;
            }
        },
    };
    if let Some(flag) = &run.flag {
        record.error = Some(format!("page load left out by hxlab page: {flag}"));
    } else if run.load_ms < 0.0 {
        // The page painted but its load event never came: it has no load time to compare.
        record.error = Some("the page's load event did not fire (it counted by its largest contentful paint in hxlab page)".into());
    }
    record.page_problems = Some(run.problems.clone());
    record.result = Some(run.to_run_result());
    record.waterfall = Some(run.waterfall());
}

/// `job` trusting the lab's origin as its engine can: Chromium by the key's SPKI hash,
/// Firefox by the certificate imported into its profile's NSS store.
fn trusting(job: PageJob, target: &super::target::Target) -> PageJob {
    match job.browser {
        hxlab_core::page::Engine::Chromium => PageJob {
            spki: target.spki.iter().cloned().collect(),
            ..job
        },
        hxlab_core::page::Engine::Firefox => PageJob {
            trust_certs: target.cacert.iter().cloned().collect(),
            insecure: target.insecure,
            ..job
        },
    }
}

/// What a browser is asked for a cell's protocol (it speaks h2 and h1 over TLS only).
fn page_proto(p: Protocol) -> Proto {
    match p {
        Protocol::H3 => Proto::H3,
        Protocol::H2 | Protocol::H2c => Proto::H2,
        Protocol::H1 | Protocol::H1Tls => Proto::H1,
    }
}

/// One page load of a cell as a [`PageJob`] (the page itself is set by the caller): one run,
/// the cell's protocol and link, the experiment's timeout, its JSON written to `json`. With a
/// discovery other than forced, an h3 cell forces nothing (the browser finds h3 through
/// Alt-Svc, or not), each run is a first and a returning visit, and `repeat_view` chooses
/// the returning one (read back by [`read_page_run`]).
fn page_job(exp: &Experiment, cfg: &CellConfig, json: &Path) -> PageJob {
    let discovers = cfg.discovery.discovers();
    PageJob {
        proto: match cfg.protocol {
            Protocol::H3 if discovers => Proto::Auto,
            p => page_proto(p),
        },
        discovery: cfg.discovery,
        // Checked when the experiment was read (`CellConfig::link_config`).
        link: cfg.link_config().ok().flatten(),
        runs: 1,
        timeout: exp.timeout,
        repeat_view: cfg.repeat_view && !discovers,
        browser: cfg.browser,
        strict: exp.strict,
        json: Some(json.display().to_string()),
        ..PageJob::default()
    }
}

/// `hxlab page --config FILE` for `job`, the job written beside `json` (the output it
/// names: the JSON document or the recording).
fn page_command(bin: &Path, job: &PageJob, json: &Path) -> Result<Command, String> {
    job.validate().map_err(|e| e.to_string())?;
    let config = json.with_extension("config.json");
    std::fs::write(&config, job.to_json()).map_err(|e| format!("{}: {e}", config.display()))?;
    let mut cmd = Command::new(bin);
    cmd.arg("page").arg("--config").arg(config);
    Ok(cmd)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The experiment's `strict` reaches every page load's job (and is off by default).
    #[test]
    fn the_page_job_carries_strict() {
        let file = "workload = \"browser\"\nprotocol = \"h2\"\n";
        let json = Path::new("/nonexistent/page.json");
        for (text, want) in [
            (format!("strict = true\n{file}"), true),
            (file.to_string(), false),
        ] {
            let exp =
                crate::experiment::parse("t.toml", &text, &Default::default()).expect("parse");
            assert_eq!(
                page_job(&exp, &exp.cells[0].config, json).strict,
                want,
                "{text}"
            );
        }
    }
}
