//! `hxlab compare --page URL` and `hxlab compare --har FILE`: what HTTP/2 and HTTP/3 buy a
//! real page on real networks, in one command. The page is recorded once in Chromium
//! (`hxlab page --record`, every body kept), or read from a HAR the user exported; then the
//! lab's `compare-page` experiment ([`hxlab_lab::scenarios::page_experiment`]) replays it
//! over HTTP/1.1, HTTP/2 and HTTP/3 behind the published networks of
//! [`hxlab_lab::scenarios::PAGE_NETWORKS`], each repetition in a fresh browser, into one
//! report judged on largest contentful paint and the load event.

use super::run::{emit, execute, finish, hxlab_bin, CommonArgs};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Runs `hxlab compare --page URL` (record, then replay) or `--har FILE` (replay).
pub fn run(
    page: Option<&str>,
    har: Option<&Path>,
    insecure: bool,
    mut common: CommonArgs,
) -> anyhow::Result<ExitCode> {
    let overrides = common.overrides()?;
    let root = common
        .out
        .clone()
        .unwrap_or_else(|| format!("hxlab-compare-page-{}", super::run::timestamp()).into());
    let (har, label) = match (page, har) {
        (Some(url), _) => {
            check_page_url(url)?;
            let har = recording_path(&root);
            if !(common.resume && har.exists()) {
                record(url, &har, insecure)?;
            }
            (har, url.to_string())
        }
        (None, Some(file)) => {
            let meta = std::fs::metadata(file)
                .map_err(|e| super::usage(format!("--har {}: {e}", file.display())))?;
            if !meta.is_file() {
                return Err(super::usage(format!(
                    "--har {}: not a regular file",
                    file.display()
                )));
            }
            (file.to_path_buf(), file.display().to_string())
        }
        (None, None) => return Err(super::usage("give --page URL or --har FILE")),
    };
    let har = std::path::absolute(&har).with_context(|| format!("resolving {}", har.display()))?;
    // The recording is read (once) and checked for every protocol by the experiment's parser;
    // the report's notes say what it holds and what it left out.
    let exp = hxlab_lab::scenarios::page_experiment(&har, &label)
        .build(&overrides)
        .map_err(|e| super::usage(e.to_string()))?;
    if let Some(hxlab_lab::experiment::PageSource::Har(_, start)) = &exp.page {
        if let Some(skipped) = &start.skipped {
            emit!("{}: {skipped} (nothing can replay them)", har.display());
        }
    }
    common.out = Some(root);
    let (summary, report, dir) = execute(&exp, &common, &[])?;
    finish(&summary, &report, &dir)
}

/// The page must be an http(s) URL with a host.
fn check_page_url(url: &str) -> anyhow::Result<()> {
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && hxlab_core::har::split_url(url).is_some();
    if ok {
        Ok(())
    } else {
        Err(super::usage(format!(
            "--page `{url}` is not an http:// or https:// URL"
        )))
    }
}

/// Records the page once through the lab's child runner ([`hxlab_lab::runner::record_page`]:
/// `hxlab page --runs 1 --record`, the protocol left to the browser, every body kept for the
/// replay), with the browser `hxlab page` would use (`HXLAB_CHROMIUM`, else `chromium`).
fn record(url: &str, har: &Path, insecure: bool) -> anyhow::Result<()> {
    if let Some(dir) = har.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    eprintln!(
        "hxlab: recording {url} once in Chromium → {}",
        har.display()
    );
    let chromium =
        std::env::var_os("HXLAB_CHROMIUM").map_or_else(|| "chromium".into(), PathBuf::from);
    hxlab_lab::runner::record_page(&hxlab_bin()?, url, har, insecure, &chromium)
        .map_err(anyhow::Error::msg)
}

/// Where `--page` keeps its recording inside the results directory.
pub fn recording_path(out: &Path) -> PathBuf {
    out.join("recording.har")
}
