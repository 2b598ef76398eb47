//! Child processes of the lab: started in their own process group, tied to the parent's
//! life, bounded in time, with the end of their stderr kept.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Children that must not outlive the runner (a killed `hxlab run` must not leave a server
/// or a load behind).
pub trait DieWithParent {
    /// Asks the kernel to kill the child (SIGKILL) when this process dies.
    fn die_with_parent(&mut self) -> &mut Self;
}

impl DieWithParent for Command {
    fn die_with_parent(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the child between fork and exec and only calls prctl,
        // which is async-signal-safe.
        unsafe {
            self.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            })
        }
    }
}

/// Starts a command in its own process group with stderr collected by a thread (stdin and
/// stdout as the caller set them; null when not set).
pub fn spawn_group(
    mut cmd: Command,
    piped_io: bool,
) -> Result<(Child, std::thread::JoinHandle<String>), String> {
    use std::os::unix::process::CommandExt;
    if piped_io {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    } else {
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
    }
    cmd.stderr(Stdio::piped())
        .process_group(0)
        .die_with_parent();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || stderr.map(tail).unwrap_or_default());
    Ok((child, reader))
}

/// Sends `signal` to the process group `pid` leads.
pub fn signal_group(pid: u32, signal: libc::c_int) {
    // SAFETY: kill has no memory-safety preconditions; -pid names the child's own group.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

/// Runs a command in its own process group with a time limit; returns (exit code, the end
/// of its stderr). On timeout the whole group is killed.
pub fn run_bounded(cmd: Command, limit: Duration) -> Result<(Option<i32>, String), String> {
    let (mut child, reader) = spawn_group(cmd, false)?;
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(limit) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("waiting for the child: {e}")),
        Err(_) => {
            signal_group(pid, libc::SIGKILL);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            return Err(format!("did not finish within {:?} and was stopped", limit));
        }
    };
    // Children left in the group (e.g. under `hxlab link`) must not outlive the repetition.
    signal_group(pid, libc::SIGKILL);
    let err = reader.join().unwrap_or_default();
    Ok((status.code(), err))
}

/// The last 8 KiB of a stream, read to its end.
pub fn tail(mut r: impl Read) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match r.read(&mut chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > 16384 {
                    buf.drain(..buf.len() - 8192);
                }
            }
        }
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// The last non-empty line of a text (a child's stderr), trimmed.
pub fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn run_bounded_stops_a_hung_child() {
        let t = Instant::now();
        let mut c = Command::new("sh");
        c.args(["-c", "sleep 30"]);
        let r = run_bounded(c, Duration::from_millis(300));
        assert!(r.is_err());
        assert!(t.elapsed() < Duration::from_secs(10));
        let mut c = Command::new("sh");
        c.args(["-c", "echo oops >&2; exit 3"]);
        assert_eq!(
            run_bounded(c, Duration::from_secs(10)).expect("ran"),
            (Some(3), "oops\n".to_string())
        );
        assert_eq!(last_line("a\nb \n\n"), "b");
    }
}
