//! `hxlab merge`: adds RunResults from several runs or parts of one run (threads, processes,
//! machines, the pods of a Kubernetes Job) into one, exactly: counts add up and histograms
//! merge sample for sample. Before adding, it checks that the inputs make one whole: the
//! same configuration, no part twice, every shard of a sharded run present
//! ([`hxlab_core::shard::check_parts`]).

use anyhow::Context;
use hxlab_core::shard::{check_parts, list, Part};
use hxlab_core::RunResult;
use std::io::{Read, Write};
use std::path::Path;
use std::process::ExitCode;

/// Largest input read (a RunResult is tens of KiB; a thousand shards fit).
const MAX_INPUT: u64 = hxlab_core::files::cap::DOCUMENTS;

/// Options of `hxlab merge`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// RunResult JSON files, or "-" for stdin. Each may hold several JSON documents one
    /// after another (JSON lines, or what `kubectl logs -l job-name=NAME` prints: lines that
    /// are not JSON are shown on stderr and skipped).
    #[arg(required = true, value_name = "FILE")]
    pub inputs: Vec<String>,
    /// Write the merged result here instead of stdout.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<String>,
    /// Merge even when shards of a run are missing (they are listed on stderr, and the
    /// merged result's `shards` shows which are present).
    #[arg(long = "allow-partial")]
    pub allow_partial: bool,
    /// Add results of different configurations (protocols, URLs, rates) anyway; the merged
    /// `config` is the first one's.
    #[arg(long = "mixed")]
    pub mixed: bool,
    /// No summary (on stderr, or on stdout with -o).
    #[arg(short = 'q', long = "quiet")]
    pub quiet: bool,
    /// Print the merged time series as a table where the summary goes (even with -q).
    #[arg(long = "print-intervals")]
    pub print_intervals: bool,
}

/// One input's documents, with what was skipped.
#[derive(Debug)]
pub struct Documents {
    /// The RunResults, with their labels ("a.json", "stdin document 2").
    pub results: Vec<(String, RunResult)>,
    /// Lines that were not JSON (log lines of a pod), with their labels.
    pub skipped: Vec<String>,
}

/// Reads every RunResult in `text`: JSON documents one after another, separated by
/// whitespace or by lines that are not JSON (skipped). A document that is JSON but not a
/// RunResult, or is cut short, is an error.
pub fn parse_documents(label: &str, text: &str) -> anyhow::Result<Documents> {
    let mut out = Documents {
        results: Vec::new(),
        skipped: Vec::new(),
    };
    let bytes = text.as_bytes();
    let mut pos = 0;
    let mut line = 1;
    while pos < bytes.len() {
        let b = bytes[pos];
        if b.is_ascii_whitespace() {
            line += usize::from(b == b'\n');
            pos += 1;
            continue;
        }
        if b == b'{' {
            let mut stream =
                serde_json::Deserializer::from_str(&text[pos..]).into_iter::<RunResult>();
            let k = out.results.len() + 1;
            match stream.next() {
                Some(Ok(r)) => {
                    let end = pos + stream.byte_offset();
                    let name = if out.results.is_empty() && !label.starts_with("stdin") {
                        label.to_string()
                    } else {
                        format!("{label} document {k}")
                    };
                    out.results.push((name, r));
                    line += text[pos..end].matches('\n').count();
                    pos = end;
                    continue;
                }
                Some(Err(e)) => {
                    return Err(super::usage(format!(
                        "{label} line {line}: document {k} is not a RunResult: {e}"
                    )))
                }
                None => break,
            }
        }
        let end = text[pos..].find('\n').map_or(bytes.len(), |i| pos + i);
        let mut shown: String = text[pos..end].chars().take(200).collect();
        if shown.len() < end - pos {
            shown.push('…');
        }
        out.skipped.push(format!("{label} line {line}: {shown}"));
        pos = end;
    }
    if out.results.is_empty() {
        return Err(super::usage(format!("{label}: no RunResult in it")));
    }
    Ok(out)
}

/// Reads one input ("-": stdin), at most [`MAX_INPUT`] bytes. Every failure is bad input
/// (exit 2).
pub fn read_input(name: &str) -> anyhow::Result<(String, String)> {
    let (label, reader): (String, Box<dyn Read>) = if name == "-" {
        ("stdin".into(), Box::new(std::io::stdin().lock()))
    } else {
        let f = std::fs::File::open(Path::new(name))
            .map_err(|e| super::usage(format!("cannot read {name}: {e}")))?;
        (name.to_string(), Box::new(f))
    };
    let mut buf = Vec::new();
    reader
        .take(MAX_INPUT + 1)
        .read_to_end(&mut buf)
        .map_err(|e| super::usage(format!("cannot read {label}: {e}")))?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(super::usage(format!(
            "{label}: larger than {} MiB; not a RunResult file",
            MAX_INPUT >> 20
        )));
    }
    let text =
        String::from_utf8(buf).map_err(|_| super::usage(format!("{label}: not UTF-8 text")))?;
    Ok((label, text))
}

/// Runs `hxlab merge`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.inputs.iter().filter(|i| *i == "-").count() > 1 {
        return Err(super::usage("merge: stdin (\"-\") may be named once"));
    }
    let mut docs = Vec::new();
    for name in &args.inputs {
        let (label, text) = read_input(name)?;
        let d = parse_documents(&label, &text)?;
        for s in &d.skipped {
            eprintln!("merge: not JSON, skipped: {s}");
        }
        docs.extend(d.results);
    }
    for (label, r) in &docs {
        // Counts from another schema may mean something else: refuse rather than mix.
        if r.schema != hxlab_core::result::SCHEMA_VERSION {
            return Err(super::usage(format!(
                "{label}: RunResult schema {} (this hxlab reads schema {})",
                r.schema,
                hxlab_core::result::SCHEMA_VERSION
            )));
        }
    }
    let parts: Vec<Part<'_>> = docs
        .iter()
        .map(|(label, result)| Part {
            label: label.clone(),
            result,
        })
        .collect();
    let runs = check_parts(&parts, args.mixed, args.allow_partial).map_err(anyhow::Error::msg)?;
    let mut merged = RunResult::default();
    for (_, r) in &docs {
        merged.merge(r);
    }
    let mut notes = String::new();
    for run in &runs {
        if !run.missing.is_empty() {
            notes.push_str(&format!(
                "warning: run {}: shard {} of {} absent (--allow-partial); the counts are those of {} shards\n",
                run.run_id,
                list(&run.missing),
                run.count,
                run.present.len()
            ));
        }
    }
    let text = serde_json::to_string(&merged).context("serialise the merged result")?;
    match &args.output {
        Some(p) if p != "-" => {
            hxlab_core::files::write_output(Path::new(p), format!("{text}\n").as_bytes())
                .with_context(|| format!("write {p}"))?
        }
        _ => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}").context("write to stdout")?;
        }
    }
    // Missing shards are said even with -q: the result is not the whole run.
    eprint!("{notes}");
    let mut summary = String::new();
    if !args.quiet {
        summary = format!(
            "merged {} results\n{}",
            docs.len(),
            hxlab_report::run_summary::summary(&merged)
        );
    }
    if args.print_intervals {
        summary.push_str(&hxlab_report::run_summary::intervals_table(&merged));
    }
    if !summary.is_empty() {
        match &args.output {
            Some(p) if p != "-" => print!("{summary}"),
            _ => eprint!("{summary}"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(n: u64) -> String {
        let r = RunResult {
            schema: 1,
            requests_done: n,
            ..Default::default()
        };
        serde_json::to_string(&r).unwrap()
    }

    #[test]
    fn documents_one_after_another_with_log_lines_between() {
        let text = format!(
            "{}\nwarning: shard 1/2 started 3.000 s after --start-at\n{}{}\n\n  {}",
            doc(1),
            doc(2),
            doc(3),
            serde_json::to_string_pretty(
                &serde_json::from_str::<serde_json::Value>(&doc(4)).unwrap()
            )
            .unwrap()
        );
        let d = parse_documents("stdin", &text).unwrap();
        let done: Vec<u64> = d.results.iter().map(|(_, r)| r.requests_done).collect();
        assert_eq!(done, [1, 2, 3, 4]);
        assert_eq!(d.skipped.len(), 1);
        assert!(
            d.skipped[0].starts_with("stdin line 2: warning"),
            "{:?}",
            d.skipped
        );
        assert_eq!(d.results[3].0, "stdin document 4");
    }

    #[test]
    fn a_cut_or_foreign_document_is_an_error_and_nothing_is_none() {
        let cut = &doc(1)[..40];
        let e = parse_documents("a.json", &format!("{}\n{cut}", doc(2))).unwrap_err();
        assert!(e.to_string().contains("a.json line 2: document 2"), "{e}");
        let e = parse_documents("b.json", "{\"hello\": 1}").unwrap_err();
        assert!(e.to_string().contains("not a RunResult"), "{e}");
        let e = parse_documents("c.json", "just logs\n").unwrap_err();
        assert!(e.to_string().contains("no RunResult"), "{e}");
    }
}
