//! The one way hxlab replaces a file that another process may read at any moment (a ready
//! file, a certificate, experiment.json, a report): readers see the old file or the new one,
//! never half of one, and after a crash the new one is either wholly there or not at all.

use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `data` to `path` atomically: into a temporary file in the same directory (same
/// filesystem, so the rename is atomic), fsynced, renamed over `path`, then the directory
/// fsynced so the rename itself survives a crash. The temporary file is removed on failure.
pub fn write_atomically(path: &Path, data: &[u8]) -> std::io::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("`{}` names no file", path.display()),
        )
    })?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // Unique among this process's threads and, by the pid, among processes.
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{}.tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = File::create(&tmp)?;
        file.write_all(data)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scratch_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("hxlab-core-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn writes_and_replaces_leaving_no_temporary_file() {
        let dir = scratch_dir("atomic-replace");
        let path = dir.join("ready.json");
        write_atomically(&path, b"first").expect("write");
        assert_eq!(std::fs::read(&path).expect("read"), b"first");
        write_atomically(&path, b"second, longer").expect("replace");
        assert_eq!(std::fs::read(&path).expect("read"), b"second, longer");
        assert_eq!(entries(&dir), ["ready.json"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_failed_write_says_so_and_leaves_nothing_behind() {
        let dir = scratch_dir("atomic-fail");
        // The target is a non-empty directory: the rename fails after the data was written.
        let path = dir.join("taken");
        std::fs::create_dir_all(path.join("inside")).expect("dir");
        assert!(write_atomically(&path, b"data").is_err());
        assert_eq!(entries(&dir), ["taken"]);
        assert!(write_atomically(&dir.join("missing/x"), b"data").is_err());
        assert!(write_atomically(Path::new("/"), b"data").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_reader_sees_the_old_file_or_the_new_one_never_a_part() {
        let dir = scratch_dir("atomic-reader");
        let path = dir.join("report.md");
        let (a, b) = (vec![b'a'; 256 * 1024], vec![b'b'; 512 * 1024]);
        write_atomically(&path, &a).expect("write");
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                let mut reads = 0u32;
                while !done.load(Ordering::Relaxed) || reads == 0 {
                    let seen = std::fs::read(&path).expect("read");
                    assert!(
                        seen == a || seen == b,
                        "a torn read of {} bytes",
                        seen.len()
                    );
                    reads += 1;
                }
            });
            for i in 0..60 {
                write_atomically(&path, if i % 2 == 0 { &b } else { &a }).expect("write");
            }
            done.store(true, Ordering::Relaxed);
            reader.join().expect("reader");
        });
        assert_eq!(entries(&dir), ["report.md"]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
