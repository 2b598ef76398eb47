//! One Chromium process tree with a fresh profile, spoken to over `--remote-debugging-pipe`.
//!
//! Why a pipe rather than the DevTools websocket: no port to discover or race for, nothing to
//! listen on, and the two file descriptors cross into a network namespace unchanged, so the
//! same code drives a browser inside `hxlab link`.
//!
//! Chromium starts in its own process group; dropping [`BrowserProcess`] kills the whole group
//! (browser, zygote, renderers, utilities), waits for it and removes the profile directory,
//! whatever state the run ended in (finished, timed out, crashed, cancelled).

use crate::BrowserError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

/// Builds the `Command` that runs a program, e.g. inside a network namespace.
pub type Launcher = Arc<dyn Fn(&Path) -> std::process::Command + Send + Sync>;

/// How much of Chromium's stderr is kept for error messages.
const STDERR_TAIL: usize = 8 * 1024;

/// A running Chromium; killed (whole process group) and its profile removed on drop.
pub(crate) struct BrowserProcess {
    child: tokio::process::Child,
    pgid: i32,
    /// Holds the profile (`p`) and Chromium's TMPDIR (`t`); removed at clean-up.
    dir: PathBuf,
    stderr_tail: Arc<Mutex<String>>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    cleaned: bool,
    /// The directory belongs to a [`BrowserDir`] that outlives this process (a returning
    /// visitor starts on the profile it leaves): clean-up leaves it in place.
    keep_dir: bool,
}

/// A browser directory (profile and TMPDIR) shared by browser processes started one after
/// another; removed when dropped.
pub(crate) struct BrowserDir(PathBuf);

impl BrowserDir {
    /// The profile directory inside it.
    pub(crate) fn profile(&self) -> PathBuf {
        self.0.join("p")
    }

    /// A fresh, empty directory.
    pub(crate) fn fresh() -> Result<BrowserDir, BrowserError> {
        fresh_browser_dir().map(BrowserDir)
    }
}

impl Drop for BrowserDir {
    fn drop(&mut self) {
        for _ in 0..20 {
            match std::fs::remove_dir_all(&self.0) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(_) => std::thread::sleep(Duration::from_millis(25)),
            }
        }
    }
}

/// Both ends of the DevTools pipe, seen from our side.
pub(crate) struct DevtoolsPipe {
    /// We write commands here; Chromium reads them on its fd 3.
    pub to_browser: pipe::Sender,
    /// Chromium writes replies and events on its fd 4; we read them here.
    pub from_browser: pipe::Receiver,
}

fn cloexec_pipe() -> Result<(OwnedFd, OwnedFd), BrowserError> {
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc != 0 {
        return Err(BrowserError::Launch(format!(
            "pipe2: {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A fresh, empty directory for one browser: `p` (the profile) and `t` (its TMPDIR) inside.
/// The name is short on purpose: Chromium puts Unix sockets under TMPDIR, and socket paths are
/// limited to 108 bytes.
fn fresh_browser_dir() -> Result<PathBuf, BrowserError> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let base = std::env::temp_dir();
    let mut last_err = None;
    for _ in 0..1000 {
        let dir = base.join(format!(
            "hxc-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        match std::fs::create_dir(&dir) {
            Ok(()) => {
                for sub in ["p", "t"] {
                    std::fs::create_dir(dir.join(sub)).map_err(|e| {
                        let _ = std::fs::remove_dir_all(&dir);
                        BrowserError::Launch(format!("create {}: {e}", dir.join(sub).display()))
                    })?;
                }
                return Ok(dir);
            }
            // A leftover of an earlier process with the same id: take the next name.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last_err = Some(e),
            Err(e) => {
                return Err(BrowserError::Launch(format!(
                    "create browser dir {}: {e}",
                    dir.display()
                )))
            }
        }
    }
    Err(BrowserError::Launch(format!(
        "create browser dir under {}: {}",
        base.display(),
        last_err.map(|e| e.to_string()).unwrap_or_default()
    )))
}

impl BrowserProcess {
    /// Starts `program` on the profile in `dir`, which it leaves in place when it ends (the
    /// [`BrowserDir`] removes it).
    pub(crate) fn spawn_on(
        program: &Path,
        args: &[String],
        launcher: Option<&Launcher>,
        dir: &BrowserDir,
    ) -> Result<(BrowserProcess, DevtoolsPipe), BrowserError> {
        let (mut process, pipe) = Self::spawn_in(program, args, launcher, &dir.0)?;
        process.keep_dir = true;
        Ok((process, pipe))
    }

    fn spawn_in(
        program: &Path,
        args: &[String],
        launcher: Option<&Launcher>,
        dir: &Path,
    ) -> Result<(BrowserProcess, DevtoolsPipe), BrowserError> {
        // Chromium reads commands on fd 3 and writes on fd 4.
        let (browser_in_r, browser_in_w) = cloexec_pipe()?;
        let (browser_out_r, browser_out_w) = cloexec_pipe()?;
        let mut cmd = match launcher {
            Some(l) => l(program),
            None => std::process::Command::new(program),
        };
        // Chromium's own temporary files (shared memory when /dev/shm is small) go inside the
        // browser's directory, so removing it removes them even after a SIGKILL.
        let tmp = dir.join("t");
        let profile = dir.join("p");
        cmd.env("TMPDIR", &tmp)
            .args(args)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--remote-debugging-pipe")
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        let child_in = browser_in_r.as_raw_fd();
        let child_out = browser_out_w.as_raw_fd();
        // SAFETY: only async-signal-safe calls (fcntl, dup2, prctl) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Move both ends above 4 first so dup2 onto 3/4 cannot clobber one of them.
                let a = libc::fcntl(child_in, libc::F_DUPFD_CLOEXEC, 10);
                let b = libc::fcntl(child_out, libc::F_DUPFD_CLOEXEC, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // If hxlab dies without cleaning up, the browser goes with it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let process = Self::start(cmd, program, dir)?;
        drop(browser_in_r);
        drop(browser_out_w);
        let to_browser = pipe::Sender::from_owned_fd(browser_in_w)
            .map_err(|e| BrowserError::Launch(format!("devtools pipe: {e}")))?;
        let from_browser = pipe::Receiver::from_owned_fd(browser_out_r)
            .map_err(|e| BrowserError::Launch(format!("devtools pipe: {e}")))?;
        Ok((
            process,
            DevtoolsPipe {
                to_browser,
                from_browser,
            },
        ))
    }

    /// Starts a browser that is spoken to over a socket it listens on (Firefox's WebDriver
    /// BiDi): no descriptors to pass, the same process group, profile directory and clean-up
    /// as Chromium's. `args` name the profile themselves.
    pub(crate) fn spawn_listening(
        program: &Path,
        args: &[String],
        launcher: Option<&Launcher>,
        dir: &BrowserDir,
    ) -> Result<BrowserProcess, BrowserError> {
        let mut cmd = match launcher {
            Some(l) => l(program),
            None => std::process::Command::new(program),
        };
        cmd.env("TMPDIR", dir.0.join("t"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
        // SAFETY: only prctl, async-signal-safe, between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                // If hxlab dies without cleaning up, the browser goes with it.
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut process = Self::start(cmd, program, &dir.0)?;
        process.keep_dir = true;
        Ok(process)
    }

    /// Spawns `cmd` (already in its own process group) and keeps the tail of its stderr.
    fn start(
        cmd: std::process::Command,
        program: &Path,
        dir: &Path,
    ) -> Result<BrowserProcess, BrowserError> {
        let mut cmd = tokio::process::Command::from(cmd);
        cmd.kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => BrowserError::NotFound(program.display().to_string()),
            _ => BrowserError::Launch(format!("start {}: {e}", program.display())),
        })?;
        let pgid = child.id().map(|p| p as i32).unwrap_or(0);
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let mut stderr_task = None;
        if let Some(mut err) = child.stderr.take() {
            let tail = stderr_tail.clone();
            stderr_task = Some(tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = err.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.push_str(&String::from_utf8_lossy(&buf[..n]));
                        if t.len() > STDERR_TAIL {
                            let mut cut = t.len() - STDERR_TAIL;
                            while !t.is_char_boundary(cut) {
                                cut += 1;
                            }
                            t.drain(..cut);
                        }
                    }
                }
            }));
        }
        Ok(BrowserProcess {
            child,
            pgid,
            dir: dir.to_path_buf(),
            stderr_tail,
            stderr_task,
            cleaned: false,
            keep_dir: false,
        })
    }

    /// The last meaningful line Chromium wrote on stderr, for error messages.
    pub(crate) fn last_stderr_line(&self) -> Option<String> {
        // Firefox's headless banner is not news.
        let tail = self.stderr_tail.lock().ok()?;
        tail.lines()
            .rev()
            .map(str::trim)
            // Skip the launcher script's and D-Bus's noise (no session bus in a container).
            .find(|l| {
                !l.is_empty()
                    && !l.contains("unexpected operator")
                    && !l.to_ascii_lowercase().contains("dbus")
                    && !l.starts_with("org.chromium.")
                    && !l.starts_with("*** You are running in headless mode")
            })
            .map(|l| l.chars().take(300).collect())
    }

    /// Whether the browser's main process has exited.
    pub(crate) fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// `outcome` with a crash told whole: how the browser (`who`) exited, if it did, and the
    /// last line it wrote on stderr. Any other outcome is returned as it is.
    pub(crate) async fn explain_crash<T>(
        &mut self,
        outcome: Result<T, BrowserError>,
        who: &str,
    ) -> Result<T, BrowserError> {
        let Err(BrowserError::Crashed(msg)) = outcome else {
            return outcome;
        };
        let mut detail = match self.settle_after_crash().await {
            Some(status) => format!("{who} exited ({status})"),
            None => msg,
        };
        if let Some(line) = self.last_stderr_line() {
            detail.push_str(&format!("; last browser message: {line}"));
        }
        Err(BrowserError::Crashed(detail))
    }

    /// After the pipe broke: waits briefly for the browser to exit and its stderr to drain,
    /// and returns how it exited ("exit status: 3"), if it did.
    pub(crate) async fn settle_after_crash(&mut self) -> Option<String> {
        let status = tokio::time::timeout(Duration::from_secs(1), self.child.wait())
            .await
            .ok()
            .and_then(Result::ok);
        if let Some(task) = self.stderr_task.as_mut() {
            let _ = tokio::time::timeout(Duration::from_millis(500), task).await;
        }
        status.map(|s| s.to_string())
    }

    /// Waits up to `grace` for the browser to exit on its own (after `Browser.close`), then
    /// kills whatever is left of its process group and removes the profile.
    pub(crate) async fn shutdown(mut self, grace: Duration) {
        let _ = tokio::time::timeout(grace, self.child.wait()).await;
        self.cleanup();
    }

    /// Kills the process group, reaps the main process, waits (bounded) until no process of
    /// the group is left, and removes the profile directory. Idempotent.
    fn cleanup(&mut self) {
        if self.cleaned {
            return;
        }
        self.cleaned = true;
        if self.pgid > 0 {
            // SAFETY: signalling a process group we created; no memory is touched.
            unsafe {
                libc::killpg(self.pgid, libc::SIGKILL);
            }
        }
        let _ = self.child.start_kill();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let main_gone = matches!(self.child.try_wait(), Ok(Some(_)));
            // SAFETY: signal 0 only checks whether any process of the group still exists.
            let group_gone = self.pgid <= 0 || unsafe { libc::killpg(self.pgid, 0) } != 0;
            if main_gone && group_gone {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.keep_dir {
            return;
        }
        // Chromium may still be flushing the profile for a moment; retry briefly.
        for _ in 0..20 {
            match std::fs::remove_dir_all(&self.dir) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(_) => std::thread::sleep(Duration::from_millis(25)),
            }
        }
    }
}

impl Drop for BrowserProcess {
    fn drop(&mut self) {
        self.cleanup();
    }
}
