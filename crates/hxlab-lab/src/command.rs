//! Command origins at run time: a real server (nginx, h2o, Caddy, ...) started from its
//! `[origins.NAME]` table. The lab picks free ports, makes a certificate and key, fills the
//! document root with what the workloads request, renders the config templates into the
//! origin's directory, starts the command in its own process group and waits until every
//! port it declared accepts. Its CPU is read from /proc for the whole process tree (an
//! nginx master and its workers).

use crate::experiment::origins::{render, CommandOrigin};
use crate::experiment::{OriginDef, Protocol};
use hxlab_child::child::spawn_group;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The ports a command origin listens on (0: not used by its templates).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ports {
    /// TCP (TLS) and, for h3, the same number on UDP.
    pub tls: u16,
    /// TCP, cleartext HTTP/1.1 (and h2c without an h2c port).
    pub plain: u16,
    /// TCP, cleartext HTTP/2 with prior knowledge.
    pub h2c: u16,
}

/// The certificate and key the lab made for its origins.
#[derive(Clone, Debug)]
pub struct LabCert {
    /// PEM certificate (localhost, 127.0.0.1, ::1).
    pub cert: PathBuf,
    /// PKCS#8 PEM key.
    pub key: PathBuf,
    /// Base64 SHA-256 of the certificate's public key (Chromium's --ignore-certificate-errors-spki-list).
    pub spki_sha256: String,
}

impl LabCert {
    /// Makes a self-signed certificate and key in `dir` (reused if both are there).
    pub fn make(dir: &Path) -> Result<LabCert, String> {
        use base64::Engine as _;
        use rcgen::PublicKeyData as _;
        use sha2::Digest as _;
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // Firefox behind a link loads a loopback origin under LOCAL_ORIGIN_NAME.
        let names = vec![
            "localhost".into(),
            "127.0.0.1".into(),
            "::1".into(),
            hxlab_contract::LOCAL_ORIGIN_NAME.into(),
        ];
        let made = rcgen::generate_simple_self_signed(names)
            .map_err(|e| format!("making a certificate: {e}"))?;
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, made.cert.pem()).map_err(|e| format!("{}: {e}", cert.display()))?;
        std::fs::write(&key, made.signing_key.serialize_pem())
            .map_err(|e| format!("{}: {e}", key.display()))?;
        let spki = made.signing_key.subject_public_key_info();
        let spki_sha256 =
            base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(&spki));
        Ok(LabCert {
            cert,
            key,
            spki_sha256,
        })
    }
}

/// A running command origin; its process group is stopped when dropped.
pub struct CommandServer {
    child: Child,
    stderr: Option<JoinHandle<String>>,
    /// The origin's name.
    pub name: String,
    /// Where it listens.
    pub ports: Ports,
    /// The certificate it serves.
    pub cert: LabCert,
}

/// What a command origin needs from the lab to start.
pub struct StartArgs<'a> {
    /// Its directory (config files, logs).
    pub dir: &'a Path,
    /// The document root, already filled.
    pub www: &'a Path,
    /// The address to listen on.
    pub bind: &'a str,
    /// The lab's certificate and key.
    pub cert: &'a LabCert,
}

impl CommandServer {
    /// Renders the templates, starts the command and waits until every declared port
    /// accepts. The error is one line plus the server's last stderr lines.
    pub fn start(
        def: &OriginDef,
        c: &CommandOrigin,
        a: &StartArgs,
    ) -> Result<CommandServer, String> {
        let name = &def.name;
        std::fs::create_dir_all(a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
        let h3 = def.protocols.contains(&Protocol::H3);
        let ports = Ports {
            tls: if c.uses("tls_port") || c.uses("h3_port") {
                free_port(h3)?
            } else {
                0
            },
            plain: if c.uses("plain_port") {
                free_port(false)?
            } else {
                0
            },
            h2c: if c.uses("h2c_port") {
                free_port(false)?
            } else {
                0
            },
        };
        let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
        let mut values: BTreeMap<&str, String> = BTreeMap::new();
        values.insert("dir", abs(a.dir).display().to_string());
        values.insert("www", abs(a.www).display().to_string());
        values.insert("cert", abs(&a.cert.cert).display().to_string());
        values.insert("key", abs(&a.cert.key).display().to_string());
        values.insert("bind", a.bind.to_string());
        values.insert("tls_port", ports.tls.to_string());
        values.insert("h3_port", ports.tls.to_string());
        values.insert("plain_port", ports.plain.to_string());
        values.insert("h2c_port", ports.h2c.to_string());
        for (file, text) in &c.files {
            let path = a.dir.join(file);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("{}: {e}", parent.display()))?;
            }
            std::fs::write(&path, render(text, &values))
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        let argv: Vec<String> = c.command.iter().map(|s| render(s, &values)).collect();
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(a.dir);
        for (k, v) in &c.env {
            cmd.env(k, render(v, &values));
        }
        let (child, stderr) = spawn_group(cmd, false).map_err(|e| format!("origin {name}: {e}"))?;
        let mut server = CommandServer {
            child,
            stderr: Some(stderr),
            name: name.clone(),
            ports,
            cert: a.cert.clone(),
        };
        server.wait_ready(h3, c.ready_within)?;
        Ok(server)
    }

    /// Waits until every port accepts (TCP) or is bound (UDP for h3).
    fn wait_ready(&mut self, h3: bool, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        let mut tcp: Vec<(&str, u16)> = Vec::new();
        for (what, p) in [
            ("tls_port", self.ports.tls),
            ("plain_port", self.ports.plain),
            ("h2c_port", self.ports.h2c),
        ] {
            if p != 0 {
                tcp.push((what, p));
            }
        }
        loop {
            let waiting_tcp = tcp.iter().find(|(_, p)| !accepts(*p));
            let waiting_udp = (h3 && !udp_bound(self.ports.tls)).then_some(self.ports.tls);
            let waiting = match (waiting_tcp, waiting_udp) {
                (Some((what, p)), _) => format!("TCP port {p} ({{{{{what}}}}})"),
                (None, Some(p)) => format!("UDP port {p} ({{{{h3_port}}}}, for h3)"),
                (None, None) => return Ok(()),
            };
            if let Ok(Some(status)) = self.child.try_wait() {
                let err = self.stderr_text();
                return Err(format!(
                    "origin {} exited ({status}) before listening on {waiting}{}",
                    self.name,
                    stderr_lines(&err)
                ));
            }
            if Instant::now() > deadline {
                self.stop();
                let err = self.stderr_text();
                return Err(format!(
                    "origin {} did not listen on {waiting} within {:?}{}",
                    self.name,
                    within,
                    stderr_lines(&err)
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stderr_text(&mut self) -> String {
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
    }

    /// True while the server's first process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The server's process ID (the command the lab started).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The base URL (`scheme://127.0.0.1:port`) of `proto` on this server.
    pub fn base_url(&self, proto: Protocol) -> Option<String> {
        let (scheme, port) = match proto {
            Protocol::H1 => ("http", self.ports.plain),
            Protocol::H2c if self.ports.h2c != 0 => ("http", self.ports.h2c),
            Protocol::H2c => ("http", self.ports.plain),
            Protocol::H1Tls | Protocol::H2 | Protocol::H3 => ("https", self.ports.tls),
        };
        (port != 0).then(|| format!("{scheme}://127.0.0.1:{port}"))
    }

    /// CPU seconds of the whole process tree so far.
    pub fn cpu_s(&self) -> Option<f64> {
        tree_cpu_s(self.child.id())
    }

    /// Stops the process group: SIGTERM, then SIGKILL after a grace period.
    fn stop(&mut self) {
        let pid = self.child.id();
        hxlab_child::child::signal_group(pid, libc::SIGTERM);
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        hxlab_child::child::signal_group(pid, libc::SIGKILL);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for CommandServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The last lines of a server's stderr, as a suffix for an error line.
fn stderr_lines(err: &str) -> String {
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return "; it wrote nothing on stderr".into();
    }
    let last = &lines[lines.len().saturating_sub(3)..];
    format!("; its stderr ends: {}", last.join(" | "))
}

/// A TCP port free on 127.0.0.1 and 0.0.0.0 (and, with `udp`, the same number free on UDP).
fn free_port(udp: bool) -> Result<u16, String> {
    for _ in 0..50 {
        let l = TcpListener::bind("0.0.0.0:0").map_err(|e| format!("finding a free port: {e}"))?;
        let port = l.local_addr().map_err(|e| e.to_string())?.port();
        if !udp || UdpSocket::bind(("0.0.0.0", port)).is_ok() {
            return Ok(port);
        }
    }
    Err("no port free on both TCP and UDP after 50 tries".into())
}

/// True when 127.0.0.1:`port` accepts a TCP connection.
fn accepts(port: u16) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
}

/// True when some UDP socket is bound to `port` (IPv4 or IPv6), from /proc/net/udp{,6}.
fn udp_bound(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines()
                .skip(1)
                .filter_map(|l| l.split_whitespace().nth(1))
                .any(|local| local.ends_with(&want))
        })
    })
}

/// One process's parent and CPU seconds (own threads, and children it has reaped).
fn proc_cpu(pid: u32, tick: f64) -> Option<(u32, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last `)`.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<u64>().ok());
    // Fields 4 (ppid), 14-17 (utime, stime, cutime, cstime) counted from 1: here from 3.
    let ppid = num(1)? as u32;
    let ticks = num(11)? + num(12)? + num(13)? + num(14)?;
    // The threads' run time in nanoseconds is finer than clock ticks where the kernel has it.
    let run_ns: Option<u64> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
                .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .sum()
        })
        .filter(|ns| *ns > 0);
    let reaped = (num(13)? + num(14)?) as f64 * tick;
    let cpu = match run_ns {
        Some(ns) => ns as f64 / 1e9 + reaped,
        None => ticks as f64 * tick,
    };
    Some((ppid, cpu))
}

/// CPU seconds of `root` and every process descending from it.
pub fn tree_cpu_s(root: u32) -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let tick = 1.0 / if hz > 0 { hz as f64 } else { 100.0 };
    let mut procs: Vec<(u32, u32, f64)> = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some((ppid, cpu)) = proc_cpu(pid, tick) {
            procs.push((pid, ppid, cpu));
        }
    }
    let mut tree = vec![root];
    let mut total = 0.0;
    let mut seen_root = false;
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        for (pid, ppid, cpu) in &procs {
            if *pid == p {
                total += cpu;
                seen_root |= p == root;
            }
            if *ppid == p && !tree.contains(pid) {
                tree.push(*pid);
            }
        }
        i += 1;
    }
    seen_root.then_some(total)
}

/// Fills a document root with what the workloads request: `bytes/SIZE` for every size,
/// and the synthetic page `page-N-SIZE.html` for every (resources, size) of the browser
/// workload. Files already there with the right length are kept.
pub fn fill_www(www: &Path, sizes: &[u64], pages: &[(u64, u64)]) -> Result<(), String> {
    let bytes = www.join("bytes");
    std::fs::create_dir_all(&bytes).map_err(|e| format!("{}: {e}", bytes.display()))?;
    for &size in sizes {
        let path = bytes.join(size.to_string());
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
            continue;
        }
        write_body(&path, size).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    for &(n, size) in pages {
        let path = www.join(format!("page-{n}-{size}.html"));
        let html = hxlab_contract::SyntheticHtml::each_delayed(n, size, Duration::ZERO).html();
        std::fs::write(&path, html).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// `size` bytes that do not compress (a server that compresses on the fly would otherwise
/// send less than the cell asks for).
fn write_body(path: &Path, size: u64) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut rng = hxlab_core::SplitMix64::new(0x9E37_79B9_7F4A_7C15);
    let mut left = size;
    let mut block = [0u8; 8192];
    while left > 0 {
        for chunk in block.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes()[..chunk.len()]);
        }
        let n = left.min(block.len() as u64) as usize;
        f.write_all(&block[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// The program of a command origin, if it can be found (a path, or a name on $PATH).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    if program.contains('/') {
        return p.is_file().then(|| p.to_path_buf());
    }
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join(program))
            .find(|c| c.is_file())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_of_a_shell_and_its_child_burns_cpu() {
        let mut c = Command::new("sh");
        c.args([
            "-c",
            "sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'; sleep 5",
        ]);
        let mut child = c.spawn().expect("sh");
        let start = tree_cpu_s(child.id()).expect("running");
        std::thread::sleep(Duration::from_millis(1500));
        let later = tree_cpu_s(child.id()).expect("running");
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            later - start > 0.05,
            "the child's busy loop counts: {start} → {later}"
        );
        assert_eq!(tree_cpu_s(u32::MAX - 1), None);
    }

    #[test]
    fn bodies_have_the_exact_size_and_do_not_repeat() {
        let dir = std::env::temp_dir().join(format!("hxlab-www-{}", std::process::id()));
        fill_www(&dir, &[0, 10, 100_000], &[(3, 10)]).expect("fill");
        for s in [0u64, 10, 100_000] {
            assert_eq!(
                std::fs::metadata(dir.join(format!("bytes/{s}")))
                    .unwrap()
                    .len(),
                s
            );
        }
        let b = std::fs::read(dir.join("bytes/100000")).unwrap();
        assert_ne!(b[..8192], b[8192..16384], "no repeated blocks to compress");
        let page = std::fs::read_to_string(dir.join("page-3-10.html")).unwrap();
        assert_eq!(page.matches("src=\"/bytes/10?").count(), 3);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
