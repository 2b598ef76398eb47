//! `hxlab schema`: the strict JSON Schemas of hxlab's documents (`RunResult`, every
//! `--config`, what the children say back), generated from their types
//! ([`hxlab_contract::schema`]). They are kept in docs/schema/; `--check` says whether a
//! directory holds exactly what this binary generates, so they cannot drift from the code.

use anyhow::Context;
use hxlab_contract::schema::{strict_schema_for, Contract, CONTRACTS};
use std::path::Path;
use std::process::ExitCode;

/// The lab's own documents, typed in hxlab-report (which hxlab-contract does not depend on).
const LAB_CONTRACTS: &[Contract] = &[Contract {
    name: "record",
    what: "a line of the lab's results.jsonl (one repetition of a cell)",
    schema: strict_schema_for::<hxlab_report::Record>,
}];

/// Every schema `hxlab schema` knows, in the order it lists them.
fn catalog() -> impl Iterator<Item = &'static Contract> {
    CONTRACTS.iter().chain(LAB_CONTRACTS)
}

/// Options of `hxlab schema`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The schema to print or write (`run-result`, `load-config`, ...; `--list` names them
    /// all). Without it: every schema (needs `--out` or `--check`), or the list.
    #[arg(value_name = "NAME")]
    pub name: Option<String>,
    /// Write `NAME.schema.json` for the schema (or for every one) into this directory.
    #[arg(long, value_name = "DIR", conflicts_with = "check")]
    pub out: Option<String>,
    /// Exit 1, naming each file, when this directory does not hold exactly the files
    /// `--out` would write (missing, different or extra `*.schema.json`).
    #[arg(long, value_name = "DIR")]
    pub check: Option<String>,
    /// List the schemas: name, and the document each describes.
    #[arg(long, conflicts_with_all = ["out", "check"])]
    pub list: bool,
}

/// Runs `hxlab schema`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let chosen: Vec<&Contract> = match &args.name {
        Some(name) => vec![find(name)?],
        None => catalog().collect(),
    };
    if let Some(dir) = &args.check {
        return check(Path::new(dir), &chosen, args.name.is_none());
    }
    if let Some(dir) = &args.out {
        return write(Path::new(dir), &chosen);
    }
    match (&args.name, args.list) {
        (Some(_), false) => print!("{}", chosen[0].text()),
        _ => {
            for c in catalog() {
                println!("{:<14} {}", c.name, c.what);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The contract called `name`; a usage error naming the others when there is none.
fn find(name: &str) -> anyhow::Result<&'static Contract> {
    let name = name.strip_suffix(".schema.json").unwrap_or(name);
    catalog().find(|c| c.name == name).ok_or_else(|| {
        let names: Vec<&str> = catalog().map(|c| c.name).collect();
        super::usage(format!(
            "schema: no schema {name:?}; use one of {}",
            names.join(", ")
        ))
    })
}

/// Writes each schema into `dir` (made if missing).
fn write(dir: &Path, chosen: &[&Contract]) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(dir).with_context(|| format!("schema: create {}", dir.display()))?;
    for c in chosen {
        let path = dir.join(c.file_name());
        hxlab_core::write_atomically(&path, c.text().as_bytes())
            .with_context(|| format!("schema: write {}", path.display()))?;
        eprintln!("schema: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Compares `dir` with what would be written: every chosen file present and equal, and
/// (when `whole`, every schema chosen) no other `*.schema.json` beside them.
fn check(dir: &Path, chosen: &[&Contract], whole: bool) -> anyhow::Result<ExitCode> {
    let mut stale = Vec::new();
    for c in chosen {
        let path = dir.join(c.file_name());
        match std::fs::read_to_string(&path) {
            Ok(text) if text == c.text() => {}
            Ok(_) => stale.push(format!("{} differs", path.display())),
            Err(e) => stale.push(format!("{}: {e}", path.display())),
        }
    }
    if whole {
        let entries =
            std::fs::read_dir(dir).with_context(|| format!("schema: read {}", dir.display()))?;
        for entry in entries.flatten() {
            let file = entry.file_name().to_string_lossy().into_owned();
            let known = chosen.iter().any(|c| c.file_name() == file);
            if file.ends_with(".schema.json") && !known {
                stale.push(format!(
                    "{} is no schema hxlab generates",
                    dir.join(&file).display()
                ));
            }
        }
    }
    if stale.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    for s in &stale {
        eprintln!("schema: {s}");
    }
    eprintln!(
        "schema: {} out of date; regenerate with `hxlab schema --out {}`",
        dir.display(),
        dir.display()
    );
    Ok(ExitCode::from(1))
}
