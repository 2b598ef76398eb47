//! [`ReadyFile`]: what `hxlab serve --ready-file` writes once every listener is bound, and
//! what everyone who starts a server (the lab, `hxlab page`, tests) reads back.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The ready file of `hxlab serve`: one JSON object, written atomically once the server
/// accepts connections.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ReadyFile {
    /// The server's process id.
    pub pid: u32,
    /// The TCP+TLS listener (HTTP/1.1 and HTTP/2 by ALPN).
    pub tls: SocketAddr,
    /// The plain TCP listener (HTTP/1.1 and h2c; `/stats` lives here too).
    pub plain: SocketAddr,
    /// The QUIC listener (HTTP/3), when there is one.
    pub h3: Option<SocketAddr>,
    /// Where the certificate was written (`--cert-out`), if asked.
    pub cert: Option<PathBuf>,
    /// Base64 SHA-256 of the certificate's SubjectPublicKeyInfo (Chromium's
    /// `--ignore-certificate-errors-spki-list`).
    pub spki_sha256: String,
}

/// Why a ready file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    /// The file is missing or unreadable (also: not written yet).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a ready file (also: half written by a writer that is not atomic).
    #[error("{path} is not a ready file of hxlab serve: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
}

impl ReadyFile {
    /// Reads and parses a ready file.
    pub fn read(path: &Path) -> Result<ReadyFile, ReadyError> {
        let text = hxlab_core::read_capped_string(path, hxlab_core::files::cap::SMALL).map_err(
            |source| ReadyError::Io {
                path: path.to_path_buf(),
                source,
            },
        )?;
        serde_json::from_str(&text).map_err(|source| ReadyError::Json {
            path: path.to_path_buf(),
            source,
        })
    }

    /// The file's text (one line of JSON).
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers and addresses always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_the_fields_serve_writes() {
        let r = ReadyFile {
            pid: 42,
            tls: "127.0.0.1:8443".parse().unwrap(),
            plain: "127.0.0.1:8080".parse().unwrap(),
            h3: Some("127.0.0.1:8443".parse().unwrap()),
            cert: Some(PathBuf::from("/tmp/cert.pem")),
            spki_sha256: "abc=".into(),
        };
        let text = r.to_json();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["tls"], "127.0.0.1:8443");
        assert_eq!(v["plain"], "127.0.0.1:8080");
        assert_eq!(v["spki_sha256"], "abc=");
        assert_eq!(serde_json::from_str::<ReadyFile>(&text).unwrap(), r);
        let no_h3 = r#"{"pid":1,"tls":"[::1]:1","plain":"0.0.0.0:2","h3":null,"cert":null,"spki_sha256":"x"}"#;
        let r2: ReadyFile = serde_json::from_str(no_h3).unwrap();
        assert_eq!(r2.h3, None);
        assert_eq!(r2.tls.port(), 1);
        assert!(serde_json::from_str::<ReadyFile>(r#"{"pid":1,"tls":"nope"}"#).is_err());
    }

    #[test]
    fn reading_names_the_file() {
        let dir = std::env::temp_dir().join(format!("hxlab-ready-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("ready.json");
        std::fs::write(&p, "{\"pid\":").unwrap();
        let e = ReadyFile::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("ready.json") && e.contains("not a ready file"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
