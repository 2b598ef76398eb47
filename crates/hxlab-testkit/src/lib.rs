//! hxlab-testkit: the one rule for a test whose real peer is missing.
//!
//! What it is for: integration tests talk to real peers (curl, nghttp, h2load, nginx,
//! Chromium, h2spec, ...) and some need root (network namespaces, TUN devices). When one is
//! missing, [`skip`] decides what happens, the same way in every test file:
//! - under CI (`CI` set to any value) the test fails, naming what is missing and how to get
//!   it, since `.ci/run` installs every peer and runs as root;
//! - elsewhere it writes a loud `SKIPPED: <test>: <why>` line straight to the process's
//!   stderr (libtest captures only the `print!`/`eprint!` family, so the line is not hidden
//!   behind an "ok") and returns, so the test can return.
//!
//! What it is not: no test doubles; a dev-dependency only.

use std::io::Write;
use std::path::{Path, PathBuf};

/// True when the tests run under CI: the `CI` variable is set, whatever its value.
pub fn under_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// Skips the calling test because `why` (what is missing, and what to do about it). Under CI
/// this panics instead; otherwise it prints the SKIPPED line and returns.
pub fn skip(why: &str) {
    let test = test_name();
    if under_ci() {
        panic!("{test}: {why} (CI is set: .ci/run installs every peer and runs as root, so this fails instead of skipping)");
    }
    let line = format!("\n!!!!! SKIPPED: {test}: {why} !!!!!\n");
    // Straight to the stream, past libtest's capture; a failed write has nowhere to go.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Finds the peer program `name` on PATH (or in ~/go/bin, where `go install` puts h2spec).
/// When it is missing, [`skip`]s with how to install it and returns None.
pub fn require_peer(name: &str) -> Option<PathBuf> {
    if let Some(path) = find_program(name) {
        return Some(path);
    }
    skip(&format!(
        "peer `{name}` is not installed; {} (or run `bash .ci/run`)",
        install_hint(name)
    ));
    None
}

/// True when this process runs as root (network namespaces, TUN devices, sysctls). When it
/// does not, [`skip`]s saying that `what` needs root and returns false.
pub fn require_root(what: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(&format!("{what} needs root; run the tests as root"));
    false
}

/// True when the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The running test's name: libtest runs each test on a thread named after it.
fn test_name() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_string(),
        _ => "this test".to_string(),
    }
}

fn find_program(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join("go/bin"));
    }
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|path| is_executable(path))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How to get `name` on Debian/Ubuntu, the way `.ci/run` does.
fn install_hint(name: &str) -> String {
    let package = match name {
        "nghttp" | "h2load" => "nghttp2-client",
        "nghttpd" => "nghttp2-server",
        "gtlsclient" => "ngtcp2-client",
        "nginx" => "nginx-light",
        "ab" => "apache2-utils",
        "ip" => "iproute2",
        "nft" => "nftables",
        "dnsmasq" => "dnsmasq-base",
        "dumpcap" => "tshark",
        "certutil" => "libnss3-tools",
        "promtool" => "prometheus",
        "man" => "man-db",
        "podman" => "podman runc",
        "kubernetes-validate" => {
            return "install it with `pip install kubernetes-validate` (in a venv) and put it on PATH"
                .to_string()
        }
        "h2spec" => {
            return "install it with `go install github.com/summerwind/h2spec/cmd/h2spec@latest`"
                .to_string()
        }
        other => other,
    };
    format!("install it with `apt-get install {package}`")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_program_that_is_always_there_and_not_one_that_is_not() {
        assert!(find_program("sh").is_some_and(|p| p.is_absolute()));
        assert!(find_program("hxlab-no-such-peer-7f3a").is_none());
    }

    #[test]
    fn names_the_package_to_install() {
        assert_eq!(
            install_hint("h2load"),
            "install it with `apt-get install nghttp2-client`"
        );
        assert!(install_hint("h2spec").contains("go install"));
        assert_eq!(
            install_hint("curl"),
            "install it with `apt-get install curl`"
        );
    }

    #[test]
    fn knows_the_running_test_by_name() {
        assert!(test_name().ends_with("knows_the_running_test_by_name"));
    }
}
