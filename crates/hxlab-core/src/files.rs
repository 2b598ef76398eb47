//! Reading a file a user named, with a size cap: `/dev/zero`, a FIFO that never ends or a
//! multi-gigabyte file given by mistake is refused with one line instead of being read until
//! memory runs out.

use std::io::Read;
use std::path::Path;

/// Reads at most `max` bytes of `path`; a file longer than that is an `InvalidData` error
/// saying so ("larger than 1 MiB").
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    if buf.len() as u64 > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {}", crate::units::format_bytes(max)),
        ));
    }
    Ok(buf)
}

/// [`read_capped`] as UTF-8 text.
pub fn read_capped_string(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read_capped(path, max)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// One line of a file read by [`read_lines_capped`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line without its newline.
    pub text: String,
    /// False for a last line the file ends without a newline (e.g. cut by an interruption).
    pub ended: bool,
}

/// Reads `path` line by line, holding one line at a time: each line at most `line_max`
/// bytes and the whole file at most `total_max`, so `/dev/zero` (one endless line) is refused
/// after `line_max` bytes whatever `total_max` is. The error says which limit was passed.
pub fn read_lines_capped(
    path: &Path,
    line_max: u64,
    total_max: u64,
) -> std::io::Result<impl Iterator<Item = std::io::Result<Line>>> {
    let mut reader = std::io::BufReader::new(std::fs::File::open(path)?);
    let mut total = 0u64;
    let mut failed = false;
    Ok(std::iter::from_fn(move || {
        use std::io::BufRead;
        if failed {
            return None;
        }
        let mut buf = Vec::new();
        let r = (&mut reader)
            .take(line_max.saturating_add(2))
            .read_until(b'\n', &mut buf);
        let invalid = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidData, msg);
        let line = match r {
            Ok(0) => return None,
            Err(e) => Err(e),
            Ok(n) => {
                total += n as u64;
                let ended = buf.last() == Some(&b'\n');
                if ended {
                    buf.pop();
                }
                if buf.len() as u64 > line_max {
                    Err(invalid(format!(
                        "a line longer than {}",
                        crate::units::format_bytes(line_max)
                    )))
                } else if total > total_max {
                    Err(invalid(format!(
                        "larger than {}",
                        crate::units::format_bytes(total_max)
                    )))
                } else {
                    String::from_utf8(buf)
                        .map(|text| Line { text, ended })
                        .map_err(|_| invalid("not UTF-8 text".into()))
                }
            }
        };
        failed = line.is_err();
        Some(line)
    }))
}

/// Writes an output file the user named: a regular file (or a new one) is replaced whole
/// ([`crate::write_atomically`]: a kill mid-write leaves the old file or none, never half);
/// anything else (`/dev/stdout`, a FIFO, `/dev/fd/3`) is written in place, since replacing it
/// would replace the device node, not write to it.
pub fn write_output(path: &Path, data: &[u8]) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => std::fs::write(path, data),
        _ => crate::write_atomically(path, data),
    }
}

/// Caps for the kinds of file hxlab reads.
pub mod cap {
    /// Certificates, keys, CA bundles, ready files, load configurations.
    pub const SMALL: u64 = 16 << 20;
    /// Experiment files, link traces, experiment.json.
    pub const TEXT: u64 = 64 << 20;
    /// A request body (`--data-file`): it is held in memory once and sent many times.
    pub const BODY: u64 = 64 << 20;
    /// A results.jsonl, read a line at a time (the records are kept, the text is not).
    pub const RESULTS: u64 = 1 << 30;
    /// One line of a results.jsonl: one record (tens of KiB with its histograms).
    pub const RESULTS_LINE: u64 = 16 << 20;
    /// A RunResult file given to merge or diff, and a HAR archive (`--replay`).
    pub const DOCUMENTS: u64 = 64 << 20;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_cap() {
        let e = read_capped(Path::new("/dev/zero"), 1 << 20).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("larger than 1"), "{e}");
        let ok = read_capped(Path::new("/proc/self/comm"), 1 << 20).unwrap();
        assert!(!ok.is_empty());
        assert!(read_capped_string(Path::new("/dev/zero"), 10).is_err());
    }

    #[test]
    fn outputs_replace_files_whole_and_write_devices_in_place() {
        let dir = std::env::temp_dir().join(format!("hxlab-out-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.json");
        write_output(&f, b"one").unwrap();
        write_output(&f, b"two").unwrap();
        assert_eq!(std::fs::read(&f).unwrap(), b"two");
        write_output(Path::new("/dev/null"), b"x").unwrap();
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lines_are_capped_one_at_a_time() {
        let mut lines = read_lines_capped(Path::new("/dev/zero"), 1 << 20, 1 << 40).unwrap();
        let e = lines.next().unwrap().unwrap_err();
        assert!(e.to_string().contains("a line longer than"), "{e}");
        assert!(lines.next().is_none());
        let dir = std::env::temp_dir().join(format!("hxlab-lines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("l.jsonl");
        std::fs::write(&f, "a\n\nbc").unwrap();
        let got: Vec<Line> = read_lines_capped(&f, 10, 100)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let line = |t: &str, ended| Line {
            text: t.into(),
            ended,
        };
        assert_eq!(got, [line("a", true), line("", true), line("bc", false)]);
        let e = read_lines_capped(&f, 10, 3).unwrap().last().unwrap();
        assert!(e.unwrap_err().to_string().contains("larger than"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
