//! qlog files of QUIC connections, one per connection (`BASE.N.sqlog`, or a name the caller
//! gives, `BASE.NAME.sqlog`; JSON-SEQ), for both
//! drivers: quinn-proto writes the transport's events through a [`SharedFile`], which the
//! driver also writes its HTTP/3 and QPACK events to ([`crate::qlog_h3::H3Events`]). All
//! writes for a connection come from the thread that drives it, so records never
//! interleave.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The file of one connection, shared by quinn's streamer and the HTTP/3 events.
#[derive(Clone)]
pub struct SharedFile(Arc<Mutex<std::fs::File>>);

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

/// Where a run's qlog files go and how many there are so far.
pub struct QlogFiles {
    base: PathBuf,
    next: AtomicU64,
}

impl QlogFiles {
    pub fn new(base: &Path) -> QlogFiles {
        QlogFiles {
            base: base.to_path_buf(),
            next: AtomicU64::new(0),
        }
    }

    /// The next connection's file, `BASE.N.sqlog`, created, with the moment its times count
    /// from.
    pub fn open(&self) -> std::io::Result<(SharedFile, PathBuf, Instant)> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.open_named(&n.to_string())
    }

    /// A connection's file named by the caller, `BASE.NAME.sqlog` (h2load's
    /// `BASE.WORKER.CLIENT.sqlog`), created (replacing one of that name), with the moment its
    /// times count from.
    pub fn open_named(&self, name: &str) -> std::io::Result<(SharedFile, PathBuf, Instant)> {
        let mut path = self.base.as_os_str().to_owned();
        path.push(format!(".{name}.sqlog"));
        let path = PathBuf::from(path);
        let file = std::fs::File::create(&path)?;
        Ok((SharedFile(Arc::new(Mutex::new(file))), path, Instant::now()))
    }
}

/// A qlog stream for quinn-proto writing to `file` (times from `start`), titled with the
/// file's path and described as `side` ("client" or "server").
pub fn stream(
    file: SharedFile,
    start: Instant,
    path: &Path,
    side: &str,
) -> Option<quinn_proto::QlogStream> {
    let mut c = quinn_proto::QlogConfig::default();
    c.writer(Box::new(file))
        .title(Some(format!("hxlab {}", path.display())))
        .description(Some(side.to_string()))
        .start_time(start);
    c.into_stream()
}
