//! Records the git commit hxlab is built from (`HXLAB_COMMIT`) for `hxlab --version` and the
//! environment every record carries. Outside a git checkout (a source tarball) it says
//! "unknown". Only this crate (the binary) has a build script, so a commit rebuilds the
//! binary alone, not the library crates beneath it.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=HXLAB_COMMIT={commit}");
    // Built again when HEAD moves: a commit on the branch, or another checkout.
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(head) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch.push(head);
    }
    for f in watch {
        if let Some(path) = git(&["rev-parse", "--git-path", &f]) {
            let path = std::path::Path::new(&path);
            let path = if path.is_absolute() {
                path.to_path_buf()
            } else {
                std::env::current_dir().unwrap_or_default().join(path)
            };
            // A path that does not exist would make cargo run this script every build.
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
