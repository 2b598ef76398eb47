//! Experiment files (`hxlab lab run FILE.toml`): `hxlab_lab::experiment::parse` — TOML, settings,
//! factors, `[[matrix]]` blocks, `[origins.NAME]`, `[[published]]` tables, matrix expansion
//! and the checks on the expanded cells — with no command-line overrides.
//!
//! Input: any bytes, read as UTF-8 (lossily). Checks: no panic; an accepted experiment is
//! within the documented bounds (at least one cell, at most `MAX_RUNS` runs) and everything
//! the runner asks of it next works: `meta`, and each cell's typed `link_config`, which a
//! cell that needs a link always has (the spec checked it).
#![no_main]
use hxlab_lab::experiment::{parse, Overrides, MAX_RUNS};
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
        let link = cell.config.link_config();
        assert!(link.is_ok(), "a checked cell's link builds: {link:?}");
        assert_eq!(
            link.ok().flatten().is_some(),
            cell.config.needs_link(),
            "a cell has a link exactly when it needs one"
        );
    }
});
