//! `hxlab man`: the manual pages (roff, clap_mangen), built from the same clap definitions as
//! the parser: hxlab.1 on stdout, or with `--out DIR` hxlab.1 and one page per subcommand
//! (hxlab-load.1, hxlab-k8s-render.1, ...), named as `man` looks them up.

use anyhow::Context;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Options of `hxlab man`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Write hxlab.1 and one page per subcommand (hxlab-load.1, ...) into DIR, made if missing,
    /// instead of hxlab.1 to stdout.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// One manual page: its file name (`hxlab-load.1`) and its roff.
struct ManPage {
    file_name: String,
    roff: Vec<u8>,
}

/// Prints hxlab.1 for `command` (hxlab's whole command line), or writes every page to --out.
pub fn run(args: Args, command: clap::Command) -> anyhow::Result<ExitCode> {
    let pages = pages(command).context("render the manual pages")?;
    match args.out {
        None => {
            let top = &pages[0];
            std::io::stdout()
                .lock()
                .write_all(&top.roff)
                .context("write the manual page to stdout")?;
        }
        Some(dir) => {
            write_pages(&dir, &pages)?;
            eprintln!("man: wrote {} pages to {}", pages.len(), dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// hxlab.1 first, then a page per subcommand, depth first. clap's `help` subcommand has
/// none: `--help` is on every page instead.
fn pages(command: clap::Command) -> std::io::Result<Vec<ManPage>> {
    let mut command = command.disable_help_subcommand(true);
    // Building names each subcommand for its page (`hxlab-load`), as `hxlab.1` refers to it.
    command.build();
    let mut pages = Vec::new();
    add_pages(&command, &mut pages)?;
    Ok(pages)
}

fn add_pages(command: &clap::Command, pages: &mut Vec<ManPage>) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(command.clone())
        .source(format!("hxlab {}", env!("CARGO_PKG_VERSION")))
        .manual("hxlab");
    let mut roff = Vec::new();
    man.render(&mut roff)?;
    pages.push(ManPage {
        file_name: man.get_filename(),
        roff,
    });
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        add_pages(sub, pages)?;
    }
    Ok(())
}

fn write_pages(dir: &Path, pages: &[ManPage]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("--out {}", dir.display()))?;
    for page in pages {
        let path = dir.join(&page.file_name);
        hxlab_core::atomic_file::write_atomically(&path, &page.roff)
            .with_context(|| format!("write {}", path.display()))?;
    }
    Ok(())
}
