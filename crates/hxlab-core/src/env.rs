//! The environment a result was produced in: which hxlab (version, commit), on which kernel,
//! CPU and default congestion controller, with which peers. Every record carries it, so a
//! figure can be tied to what produced it and two runs' environments compared.
//!
//! The commit is the binary's: `hxlab` records it at build time and hands it over once at
//! start ([`set_build`]); libraries and tests that never call it say "unknown".

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// What the binary was built from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Build {
    /// hxlab's version (Cargo's).
    pub version: String,
    /// The git commit it was built from ("unknown" outside a checkout).
    pub commit: String,
    /// The optional features it was built with.
    pub features: Vec<String>,
}

/// Where and with what a result was produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Environment {
    /// The hxlab that produced it.
    pub hxlab: Build,
    /// `uname -r`.
    pub kernel: String,
    /// `uname -m`.
    pub machine: String,
    /// The CPU's model name (/proc/cpuinfo), "unknown" when not said.
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: u32,
    /// The system's default TCP congestion controller (what a socket gets when nothing sets
    /// one).
    pub default_cc: String,
    /// Versions of the peers the run used, by program ("nginx": "nginx/1.22.1"), as each
    /// printed it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peers: BTreeMap<String, String>,
}

static BUILD: OnceLock<Build> = OnceLock::new();

/// Sets what the binary was built from (once; later calls are ignored).
pub fn set_build(build: Build) {
    let _ = BUILD.set(build);
}

/// What the binary was built from, as [`set_build`] was told (the library's own version and
/// an unknown commit when it was not).
pub fn build() -> Build {
    BUILD.get().cloned().unwrap_or_else(|| Build {
        version: env!("CARGO_PKG_VERSION").to_string(),
        commit: "unknown".into(),
        features: Vec::new(),
    })
}

fn uname() -> (String, String) {
    // SAFETY: utsname is plain data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return ("unknown".into(), "unknown".into());
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    (field(&u.release), field(&u.machine))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

impl Environment {
    /// This machine, now, with no peers yet (see [`Environment::with_peer`]). The parts that
    /// cannot change while hxlab runs are read once.
    pub fn here() -> Environment {
        static FIXED: OnceLock<(String, String, String)> = OnceLock::new();
        let (kernel, machine, cpu) = FIXED
            .get_or_init(|| {
                let (k, m) = uname();
                (k, m, cpu_model())
            })
            .clone();
        Environment {
            hxlab: build(),
            kernel,
            machine,
            cpu_model: cpu,
            cpus: std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1),
            default_cc: crate::cc::system_default_name(),
            peers: BTreeMap::new(),
        }
    }

    /// Adds `program`'s version (see [`peer_version`]) when it can be had.
    pub fn with_peer(mut self, program: &str) -> Environment {
        if let Some(v) = peer_version(program) {
            let name = std::path::Path::new(program)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| program.to_string());
            self.peers.insert(name, v);
        }
        self
    }
}

impl std::fmt::Display for Environment {
    /// One line: "hxlab 0.1.0 (commit 1a2b3c4d5e6f) on Linux 6.1.0 x86_64, 2 × CPU NAME,
    /// default TCP congestion control cubic; peers: nginx version: nginx/1.22.1".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let commit: String = self.hxlab.commit.chars().take(12).collect();
        write!(
            f,
            "hxlab {} (commit {commit}) on Linux {} {}, {} × {}, default TCP congestion control {}",
            self.hxlab.version,
            self.kernel,
            self.machine,
            self.cpus,
            self.cpu_model,
            self.default_cc
        )?;
        if !self.peers.is_empty() {
            let peers: Vec<String> = self.peers.values().cloned().collect();
            write!(f, "; peers: {}", peers.join(", "))?;
        }
        Ok(())
    }
}

/// The version `program` prints (its first line, from stdout or stderr), asked the way that
/// program is asked: `nginx -v`, `caddy version`, `--version` for the rest. Cached per
/// program; None when it does not run or says nothing.
pub fn peer_version(program: &str) -> Option<String> {
    static CACHE: OnceLock<std::sync::Mutex<BTreeMap<String, Option<String>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().ok()?.get(program) {
        return v.clone();
    }
    let base = std::path::Path::new(program)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: &[&str] = match base.as_str() {
        "nginx" => &["-v"],
        "caddy" => &["version"],
        _ => &["--version"],
    };
    let v = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(|l| l.chars().take(200).collect::<String>())
        });
    if let Ok(mut c) = cache.lock() {
        c.insert(program.to_string(), v.clone());
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_machine_is_described() {
        let e = Environment::here();
        assert!(!e.kernel.is_empty() && e.kernel != "unknown");
        assert!(e.cpus >= 1);
        assert_eq!(e.hxlab.version, env!("CARGO_PKG_VERSION"));
        let back: Environment = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(back, e);
    }

    #[test]
    fn a_peer_that_is_not_there_has_no_version() {
        assert_eq!(peer_version("hxlab-no-such-program-3f1"), None);
        let e = Environment::here().with_peer("sh-no-such");
        assert!(e.peers.is_empty());
    }
}
