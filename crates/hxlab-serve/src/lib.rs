//! hxlab-serve: the origin server behind `hxlab serve`.
//!
//! What it is for: one process that serves the same endpoints (`/bytes/N`, `/option`, `/page`
//! with push and early hints, `/delay`, `/status`, `/headers`, `/static`, `/stats`, `/`) over
//! HTTP/1.1, HTTP/1.1+TLS, HTTP/2 (ALPN), h2c (prior knowledge) and HTTP/3 (QUIC on the TLS
//! port), with streamed bodies, limits, per-protocol counters and a graceful shutdown.
//! Layout: `routes` decides what to answer (protocol-free) as a `reply::Reply`, which
//! `replay` and `static_file` build too; `h1` (our own HTTP/1.1 on hxlab-wire's request
//! framer), `h2` (our own HTTP/2 connection, one task per connection, the same on TLS and
//! h2c) and `h3` (our own HTTP/3 on our own QUIC driver, on a thread of its own) only carry
//! the answer; `listen` owns sockets and accept loops, `tcp_admit` and `h3::admit` who gets a
//! connection; `tls` owns certificates, `tls_early_data` TLS over TCP with 0-RTT.
//! The wire rules it shares with the load client (frames, HPACK, QPACK, HTTP/2 control
//! frames, the HTTP/3 control stream) are hxlab-wire's; QUIC's socket and transmit pass are
//! hxlab-quic's. `h2_fuzz_entry` and `h3_fuzz_entry` are public only for the fuzz targets.
//! What it is not: no load generation, no link emulation, no reverse proxying, no caching.

mod body;
mod h1;
mod h2;
mod h3;
mod last_head;
mod listen;
mod per_address;
mod replay;
mod reply;
mod routes;
mod schedule;
mod static_file;
mod stats;
mod tcp_admit;
mod tls;
mod tls_early_data;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The origin's HTTP/2 connection over an in-memory pipe, for fuzzing.
pub use h2::fuzz_entry as h2_fuzz_entry;
/// The origin's HTTP/3 request-head and control-stream parsing without QUIC, for fuzzing.
pub use h3::fuzz_entry as h3_fuzz_entry;
pub use hxlab_core::cc::CongestionControl;

/// Everything `hxlab serve` can be told: the typed contract `hxlab serve --config` takes,
/// with its one validator (hxlab-contract).
pub use hxlab_contract::ServeConfig;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A socket could not be bound.
    #[error("cannot listen on {what} {addr}: {source}")]
    Bind {
        /// Which listener ("tls", "plain", "h3").
        what: &'static str,
        /// The address tried.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
    /// The certificate or key could not be read, made or used.
    #[error("certificate: {0}")]
    Cert(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A setting is out of range or inconsistent.
    #[error("{0}")]
    Config(String),
}

/// A server that is accepting on every listener. Dropped without `shutdown`, its TCP
/// listeners keep running until the runtime stops; its QUIC thread closes its connections and
/// ends.
pub struct RunningServer {
    tls_addr: SocketAddr,
    plain_addr: SocketAddr,
    h3_addr: Option<SocketAddr>,
    identity: tls::Identity,
    ctx: Arc<routes::Ctx>,
    shutdown_tx: tokio::sync::watch::Sender<bool>,
    accept_loops: Vec<tokio::task::JoinHandle<()>>,
    quic: Option<h3::QuicThread>,
}

impl RunningServer {
    /// The TCP TLS listener (h1 and h2 by ALPN).
    pub fn tls_addr(&self) -> SocketAddr {
        self.tls_addr
    }

    /// The cleartext TCP listener (h1 and h2c).
    pub fn plain_addr(&self) -> SocketAddr {
        self.plain_addr
    }

    /// The UDP HTTP/3 listener (same port as `tls_addr`), unless HTTP/3 is off.
    pub fn h3_addr(&self) -> Option<SocketAddr> {
        self.h3_addr
    }

    /// SHA-256 of the certificate's SubjectPublicKeyInfo, base64 (Chromium's
    /// `--ignore-certificate-errors-spki-list`).
    pub fn spki_sha256(&self) -> &str {
        &self.identity.spki_sha256
    }

    /// The served certificate chain as PEM.
    pub fn cert_pem(&self) -> &str {
        &self.identity.cert_pem
    }

    /// The replay's counters so far (`/replay-stats`), when replaying.
    pub fn replay_counts(&self) -> Option<hxlab_contract::ReplayCounts> {
        self.ctx.replay.as_ref().map(|r| r.counts(false))
    }

    /// Counters so far, the same numbers `/stats` serves.
    pub fn stats(&self) -> hxlab_contract::StatsSnapshot {
        self.ctx.stats.snapshot()
    }

    /// Stops accepting, sends GOAWAY on h2/h3, lets in-flight requests finish (up to the
    /// drain timeout), closes the QUIC endpoint and ends its thread.
    pub async fn shutdown(self) {
        let _ = self.shutdown_tx.send(true);
        for h in self.accept_loops {
            let _ = h.await;
        }
        self.ctx.tracker.close();
        let drained =
            tokio::time::timeout(self.ctx.limits.drain_timeout, self.ctx.tracker.wait()).await;
        if drained.is_err() {
            eprintln!(
                "hxlab serve: {} connection(s) still busy after the drain timeout; closing them",
                self.ctx.tracker.len()
            );
        }
        if let Some(quic) = self.quic {
            quic.close().await;
        }
    }
}

/// For a process that installs no tracing subscriber of its own (the `hxlab serve` CLI):
/// installs one that records nothing. Without any subscriber, `tracing`'s `log` fallback
/// (switched on by quinn's `log` feature) formats span activity on every HTTP/2 frame, which
/// costs a few percent of the server's CPU. Does nothing if a subscriber is already set.
pub fn install_null_tracing() {
    let _ = tracing::dispatcher::set_global_default(tracing::Dispatch::new(
        tracing::subscriber::NoSubscriber::default(),
    ));
}

/// Refuses a configuration no server can run with ([`ServeConfig::validate`], what the
/// flags and `--config` refuse, for library callers too).
fn check(cfg: &ServeConfig) -> Result<(), ServeError> {
    cfg.validate().map_err(|e| ServeError::Config(e.0))
}

/// The QUIC server configuration for `cfg`: TLS with `identity`, its stream limit, windows
/// and congestion controller.
fn quic_server_config(
    identity: &tls::Identity,
    cfg: &ServeConfig,
) -> Result<quinn::ServerConfig, ServeError> {
    identity.quic_server_config(
        tls::QuicLimits {
            max_streams: cfg.max_streams,
            window: cfg.quic_window,
        },
        cfg.cc,
    )
}

/// For experiments that drive quinn-proto themselves (`examples/proto_h3_server.rs`, the
/// HTTP/3 server floor of bench/server-h3-floor.sh), so that they run what `hxlab serve`
/// runs rather than a copy of it. Not a stable interface.
#[doc(hidden)]
pub mod experiment {
    use super::*;

    /// The QUIC server configuration `hxlab serve` builds for `cfg` (the certificate loaded,
    /// or made for localhost, TLS, stream limit, windows, controller).
    pub fn quic_server_config(cfg: &ServeConfig) -> Result<quinn::ServerConfig, ServeError> {
        let identity =
            tls::Identity::load_or_generate(cfg.cert.as_deref(), cfg.key.as_deref(), &[])?;
        super::quic_server_config(&identity, cfg)
    }

    /// The first bytes of the HTTP/3 control stream `hxlab serve` opens for `cfg`: its type
    /// and SETTINGS.
    pub fn h3_control_preamble(cfg: &ServeConfig) -> Vec<u8> {
        h3::control_preamble(
            u64::from(cfg.max_header_size),
            h3::advertised_qpack(cfg.header_table),
        )
    }
}

/// Binds every listener, makes or loads the certificate and starts serving on the current
/// tokio runtime. Returns once all listeners accept.
pub async fn start(cfg: ServeConfig) -> Result<RunningServer, ServeError> {
    check(&cfg)?;
    // Files are read and written (and a certificate made) on the blocking pool, never on a
    // runtime thread: a slow file system must not stall the caller's other tasks.
    let (cfg, files) = tokio::task::spawn_blocking(move || {
        let files = read_files(&cfg);
        (cfg, files)
    })
    .await
    .map_err(|e| ServeError::Config(format!("reading the server's files failed: {e}")))?;
    let Files {
        replay,
        identity,
        dir,
    } = files?;
    let sockets = listen::bind_all(&cfg)?;
    let tls_addr = sockets
        .tls
        .local_addr()
        .map_err(|source| ServeError::Bind {
            what: "tls",
            addr: SocketAddr::new(cfg.bind, cfg.tls_port),
            source,
        })?;
    let plain_addr = sockets
        .plain
        .local_addr()
        .map_err(|source| ServeError::Bind {
            what: "plain",
            addr: SocketAddr::new(cfg.bind, cfg.plain_port),
            source,
        })?;
    let h3_addr = if sockets.udp.is_some() {
        Some(tls_addr)
    } else {
        None
    };

    let (shutdown_tx, shutdown_rx) = tokio::sync::watch::channel(false);
    let limits = routes::Limits::of(&cfg);
    let mut ctx = routes::Ctx::new(limits, dir, tls_addr, plain_addr, h3_addr, shutdown_rx);
    ctx.replay = replay;
    let ctx = Arc::new(ctx);

    let tls_config = Arc::new(identity.tcp_server_config(cfg.early_data)?);
    let file_limit = tcp_admit::raise_file_limit();
    let tcp_ports = listen::TcpPorts {
        cc: cfg.cc,
        admission: tcp_admit::TcpAdmission::new(
            tcp_admit::connection_cap(cfg.tcp_max_connections, file_limit),
            cfg.tcp_max_per_address,
        ),
    };
    let mut accept_loops = Vec::new();
    accept_loops.push(listen::spawn_tls(
        sockets.tls,
        tls_config,
        ctx.clone(),
        tcp_ports.clone(),
    ));
    accept_loops.push(listen::spawn_plain(sockets.plain, ctx.clone(), tcp_ports));
    let mut quic = None;
    if let Some(udp) = sockets.udp {
        let quic_config = quic_server_config(&identity, &cfg)?;
        let qlog = match &cfg.qlog_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| ServeError::Config(format!("--qlog {}: {e}", dir.display())))?;
                Some(h3::QlogServer {
                    files: hxlab_quic::qlog::QlogFiles::new(&dir.join("serve")),
                    limits: tls::QuicLimits {
                        max_streams: cfg.max_streams,
                        window: cfg.quic_window,
                    },
                    cc: cfg.cc,
                })
            }
            None => None,
        };
        quic = Some(
            h3::QuicThread::spawn(udp, quic_config, qlog, ctx.clone()).map_err(|source| {
                ServeError::Bind {
                    what: "h3",
                    addr: tls_addr,
                    source,
                }
            })?,
        );
    }
    accept_loops.push(tokio::spawn(give_back_memory(ctx.clone())));
    Ok(RunningServer {
        tls_addr,
        plain_addr,
        h3_addr,
        identity,
        ctx,
        shutdown_tx,
        accept_loops,
        quic,
    })
}

/// What a server reads from files before it starts: the archive it replays, its identity
/// (and the certificate written out), the directory it serves, resolved.
struct Files {
    replay: Option<replay::Replay>,
    identity: tls::Identity,
    dir: Option<std::path::PathBuf>,
}

/// Reads [`Files`] (blocking).
fn read_files(cfg: &ServeConfig) -> Result<Files, ServeError> {
    let replay = load_replay(cfg)?;
    let mut names = replay
        .as_ref()
        .map(replay::Replay::hosts)
        .unwrap_or_default();
    // The address it serves on (a link's host address) and the names asked for: a client
    // that checks names trusts the certificate there too.
    if !cfg.bind.is_unspecified() {
        names.push(cfg.bind.to_string());
    }
    names.extend(cfg.cert_names.iter().cloned());
    let identity =
        tls::Identity::load_or_generate(cfg.cert.as_deref(), cfg.key.as_deref(), &names)?;
    if let Some(out) = &cfg.cert_out {
        hxlab_core::write_atomically(out, identity.cert_pem.as_bytes()).map_err(|source| {
            ServeError::File {
                path: out.clone(),
                source,
            }
        })?;
    }
    let dir = match &cfg.dir {
        Some(d) => {
            let canon = std::fs::canonicalize(d).map_err(|source| ServeError::File {
                path: d.clone(),
                source,
            })?;
            if !canon.is_dir() {
                return Err(ServeError::Config(format!(
                    "--dir {}: not a directory",
                    d.display()
                )));
            }
            Some(canon)
        }
        None => None,
    };
    Ok(Files {
        replay,
        identity,
        dir,
    })
}

/// The archive of `--replay`; a HAR that cannot be replayed is a bad argument, in one line.
fn load_replay(cfg: &ServeConfig) -> Result<Option<replay::Replay>, ServeError> {
    let Some(path) = &cfg.replay else {
        return Ok(None);
    };
    let archive =
        hxlab_core::har::Archive::read(path).map_err(|e| ServeError::Config(e.to_string()))?;
    Ok(Some(replay::Replay::new(archive)))
}

/// Every few seconds, if connections closed meanwhile, asks the allocator to hand freed memory
/// back to the system (glibc's `malloc_trim`): without it, the buffers of thousands of
/// abandoned connections stay in the process's RSS after the connections are gone (200
/// stalled HTTP/3 connections: 13 MB before, 216 MB after all had timed out).
/// Ends when the server shuts down.
async fn give_back_memory(ctx: Arc<routes::Ctx>) {
    let mut seen = 0;
    let mut shutdown = ctx.shutdown.clone();
    loop {
        if *shutdown.borrow() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = shutdown.changed() => return,
        }
        let closed = ctx.stats.closed_total();
        if closed != seen {
            seen = closed;
            #[cfg(target_env = "gnu")]
            // SAFETY: malloc_trim has no preconditions; it only walks the allocator's arenas.
            let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn library_api_serves_and_shuts_down() {
        let cfg = ServeConfig {
            tls_port: 0,
            plain_port: 0,
            ..ServeConfig::default()
        };
        let server = start(cfg).await.expect("start");
        assert_eq!(
            server.h3_addr(),
            Some(server.tls_addr()),
            "h3 shares the TLS port number"
        );
        assert!(server.cert_pem().contains("BEGIN CERTIFICATE"));
        assert_eq!(server.spki_sha256().len(), 44);
        let mut tcp = tokio::net::TcpStream::connect(server.plain_addr())
            .await
            .expect("connect");
        tcp.write_all(b"GET /bytes/10 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .expect("write");
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), tcp.read_to_end(&mut answer))
            .await
            .expect("in time")
            .expect("read");
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.ends_with("\r\n\r\nxxxxxxxxxx"), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("alt-svc: h3=\""),
            "{text}"
        );
        let stats = server.stats();
        assert_eq!(stats.by_protocol["h1"].requests, 1);
        assert_eq!(stats.by_protocol["h1"].body_bytes, 10);
        // A new thread names itself once it first runs, which a busy machine may delay.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while quic_threads() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(quic_threads(), 1, "one QUIC thread per server");
        let plain = server.plain_addr();
        tokio::time::timeout(Duration::from_secs(15), server.shutdown())
            .await
            .expect("shutdown in time");
        assert!(
            tokio::net::TcpStream::connect(plain).await.is_err(),
            "listener closed"
        );
        assert_eq!(quic_threads(), 0, "shutdown ends the QUIC thread");
        // A server dropped without shutdown ends its QUIC thread too.
        let cfg = ServeConfig {
            tls_port: 0,
            plain_port: 0,
            ..ServeConfig::default()
        };
        drop(start(cfg).await.expect("start"));
        for _ in 0..100 {
            if quic_threads() == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the QUIC thread of a dropped server is still there");
    }

    /// Threads of this process named as the QUIC thread (this is the only test here that
    /// starts a server).
    fn quic_threads() -> usize {
        std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "hxlab-h3")
            .count()
    }
}
