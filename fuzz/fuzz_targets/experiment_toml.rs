//! Experiment files (`hxlab lab run FILE.toml`): `hxlab_lab::spec::parse` — TOML, settings,
//! factors, `[[matrix]]` blocks, `[origins.NAME]`, `[[published]]` tables, matrix expansion
//! and the checks on the expanded cells — with no command-line overrides.
//!
//! Input: any bytes, read as UTF-8 (lossily). Checks: no panic; an accepted experiment is
//! within the documented bounds (at least one cell, at most `MAX_RUNS` runs) and everything
//! the runner asks of it next works: `meta`, each cell's `link_config` and `link_args`.
#![no_main]
use hxlab_lab::spec::{parse, Overrides, MAX_RUNS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let src = String::from_utf8_lossy(data);
    let Ok(exp) = parse("fuzz.toml", &src, &Overrides::default()) else {
        return;
    };
    assert!(exp.total_runs() <= MAX_RUNS);
    let meta = exp.meta();
    assert_eq!(meta.cells.len(), exp.cells.len());
    for cell in &exp.cells {
        let _ = cell.config.link_config();
        let _ = cell.config.link_args();
        let _ = cell.config.needs_link();
    }
});
