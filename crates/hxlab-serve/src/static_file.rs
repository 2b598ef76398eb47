//! `/static/PATH` under `--dir`: the path is checked where the request is routed (pure, on
//! any thread), the file is looked up and opened off the runtime. Resolving symlinks, opening
//! and reading metadata can block for as long as the file system likes (a slow network file
//! system), and opening a FIFO blocks until a writer comes (issue 38: one `curl
//! /static/fifo` stalled every TCP listener), so no connection's thread ever does it: the
//! router hands back a [`StaticFile`]'s lookup in `Reply::lookup`, and each protocol runs it
//! on the blocking pool ([`crate::reply::Lookup::start`]) and answers when it is done. Only regular files are
//! served; anything else (a FIFO, a socket, a device, a directory) gets 403 without being
//! opened for reading.

use crate::body::BodySpec;
use crate::reply::{Lookup, Reply};
use http::StatusCode;
use percent_encoding::percent_decode_str;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// A `/static/` file to look up: the joined path, checked to stay under the root by name.
struct StaticFile {
    root: PathBuf,
    candidate: PathBuf,
    /// The path as the client asked for it, decoded (for error texts).
    shown: String,
}

/// The reply to `/static/{rest}`: a placeholder holding the file to look up, or, when no
/// lookup is needed (no `--dir`, a path that is not UTF-8 or leaves the directory by name),
/// the answer.
pub(crate) fn route(dir: Option<&Path>, rest: &str) -> Reply {
    match checked(dir, rest) {
        Ok(file) => Reply {
            lookup: Some(Lookup::new(move || file.open())),
            ..Reply::new(StatusCode::OK, "", BodySpec::Empty)
        },
        Err(reply) => *reply,
    }
}

fn checked(dir: Option<&Path>, rest: &str) -> Result<StaticFile, Box<Reply>> {
    let Some(root) = dir else {
        return Err(Box::new(Reply::text(
            StatusCode::NOT_FOUND,
            "not found: no --dir given, /static/ is empty\n".into(),
        )));
    };
    let decoded = match percent_decode_str(rest).decode_utf8() {
        Ok(d) => d,
        Err(_) => return Err(Box::new(Reply::bad("static path is not UTF-8"))),
    };
    if decoded.contains('\0') || decoded.contains('\\') {
        return Err(Box::new(Reply::bad(
            "static path contains a forbidden character",
        )));
    }
    let rel = Path::new(&*decoded);
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(Box::new(forbidden("static path leaves --dir")));
    }
    Ok(StaticFile {
        root: root.to_path_buf(),
        candidate: root.join(rel),
        shown: decoded.into_owned(),
    })
}

fn forbidden(why: &str) -> Reply {
    Reply::text(StatusCode::FORBIDDEN, format!("forbidden: {why}\n"))
}

impl StaticFile {
    /// Looks the file up and opens it (blocking): symlinks resolved and still under the
    /// root, a regular file (checked before opening, so a FIFO is never opened, and again on
    /// the open descriptor, in case the name was swapped in between).
    fn open(self) -> Reply {
        let not_found = || {
            Reply::text(
                StatusCode::NOT_FOUND,
                format!("not found: /static/{}\n", self.shown),
            )
        };
        let Ok(real) = std::fs::canonicalize(&self.candidate) else {
            return not_found();
        };
        if !real.starts_with(&self.root) {
            return forbidden("static path leaves --dir");
        }
        match std::fs::metadata(&real) {
            Ok(m) if m.is_file() => {}
            Ok(_) => return forbidden(&format!("/static/{} is not a regular file", self.shown)),
            Err(_) => return not_found(),
        }
        // O_NONBLOCK: should the name have become a FIFO since, the open returns at once
        // (reads of a regular file ignore the flag).
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(&real)
        {
            Ok(f) => f,
            Err(_) => return not_found(),
        };
        match file.metadata() {
            Ok(m) if m.is_file() => Reply::new(
                StatusCode::OK,
                content_type_of(&real),
                BodySpec::File(file, m.len()),
            ),
            _ => forbidden(&format!("/static/{} is not a regular file", self.shown)),
        }
    }
}

fn content_type_of(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "txt" | "md" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "wasm" => "application/wasm",
        "woff2" => "font/woff2",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(root: &Path, rest: &str) -> Reply {
        let mut reply = route(Some(root), rest);
        match reply.lookup.take() {
            Some(file) => file.run(),
            None => reply,
        }
    }

    #[test]
    fn serves_regular_files_only_and_never_leaves_the_root() {
        let dir = std::env::temp_dir().join(format!("hxlab-static-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
        std::fs::write(dir.join("a.txt"), b"hello").expect("write");
        let root = std::fs::canonicalize(&dir).expect("canon");
        let fifo =
            std::ffi::CString::new(root.join("fifo").to_string_lossy().as_bytes()).expect("path");
        // SAFETY: a NUL-terminated path we own.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0, "mkfifo");
        std::os::unix::fs::symlink(root.join("fifo"), root.join("to-fifo")).expect("symlink");
        let ok = lookup(&root, "a.txt");
        assert_eq!((ok.status, ok.body.len()), (StatusCode::OK, 5));
        for rest in ["fifo", "to-fifo", "sub"] {
            assert_eq!(lookup(&root, rest).status, StatusCode::FORBIDDEN, "{rest}");
        }
        assert_eq!(lookup(&root, "nope").status, StatusCode::NOT_FOUND);
        for rest in [
            "../etc/passwd",
            "%2e%2e/etc/passwd",
            "%2Fetc%2Fpasswd",
            "x/../../a",
        ] {
            assert_ne!(lookup(&root, rest).status, StatusCode::OK, "{rest}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
