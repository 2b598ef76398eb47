//! TLS client configuration (rustls with the ring provider): trust roots or `-k`, ALPN,
//! session resumption, and the QUIC variant for HTTP/3.
//!
//! Whether a QUIC handshake resumed a session: quinn does not say (rustls'
//! `handshake_kind` is not reachable through it), but a resumed TLS 1.3 handshake never
//! verifies a server certificate, so [`QuicConfigs`] watches verifications. The obvious way,
//! a verifier per connection, would stop resumption altogether: rustls resumes a ticket only
//! with the very verifier (`Arc::ptr_eq`) that verified the session it came from. So the
//! verifier is one shared [`Watched`] one, and each connection gets its own cheap
//! [`rustls::time::TimeProvider`] instead (not part of that check): rustls asks the
//! connection's clock for `now` right before it calls `verify_server_cert` (the `now`
//! argument), on the same thread, so the clock leaves its connection's flag in a
//! thread-local slot and the verifier marks that flag.

use crate::{LoadConfig, LoadError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any certificate chain (`-k`) but still verifies the handshake signatures, as
/// OpenSSL does for h2load with verification off: a handshake costs what a real one costs,
/// and the session is a real TLS session with whoever holds the presented key. Shared with
/// `hxlab trace -k`.
#[derive(Debug)]
pub struct AcceptAnyCert(pub Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

fn load_roots(cfg: &LoadConfig) -> Result<RootCertStore, LoadError> {
    let mut roots = RootCertStore::empty();
    let path = match &cfg.cacert {
        Some(p) => Some(p.clone()),
        None => SYSTEM_BUNDLES
            .iter()
            .map(std::path::PathBuf::from)
            .find(|p| p.is_file()),
    };
    let Some(path) = path else { return Ok(roots) };
    // A --cacert the user named that cannot be used is bad input (a usage error); a system
    // bundle that cannot be read is the machine's problem.
    let given = cfg.cacert.is_some();
    let bad = |why: String| {
        if given {
            LoadError::Config(format!("--cacert {why}"))
        } else {
            LoadError::Tls(why)
        }
    };
    let data = hxlab_core::read_capped(&path, hxlab_core::files::cap::SMALL)
        .map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let mut n = 0;
    for cert in rustls_pemfile::certs(&mut data.as_slice()) {
        let cert = cert.map_err(|e| bad(format!("{}: {e}", path.display())))?;
        if roots.add(cert).is_ok() {
            n += 1;
        }
    }
    if n == 0 && given {
        return Err(bad(format!(
            "{}: no PEM certificate in the file",
            path.display()
        )));
    }
    Ok(roots)
}

/// A rustls client config for TLS over TCP offering `alpn`.
pub fn tcp_config(cfg: &LoadConfig, alpn: &[&[u8]]) -> Result<Arc<ClientConfig>, LoadError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| LoadError::Tls(e.to_string()))?;
    let mut config = if cfg.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider())))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(load_roots(cfg)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    finish(cfg, &mut config);
    Ok(Arc::new(config))
}

fn finish(cfg: &LoadConfig, config: &mut ClientConfig) {
    if cfg.tls_resume || cfg.zero_rtt {
        config.resumption = rustls::client::Resumption::in_memory_sessions(1024);
    } else {
        // Every handshake is a full one unless resumption is asked for, so the handshake
        // histogram means the same thing run after run.
        config.resumption = rustls::client::Resumption::disabled();
    }
    config.enable_early_data = cfg.zero_rtt;
    // SSLKEYLOGFILE, as curl, nghttp and browsers honour it: the TLS and QUIC secrets in NSS
    // key log format, so Wireshark can decrypt a capture (nothing is written without it).
    config.key_log = Arc::new(rustls::KeyLogFile::new());
}

thread_local! {
    /// The flag of the QUIC connection whose clock rustls asked last on this thread.
    static LAST_CLOCK: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// A connection's clock: the wall time, and a note of who asked (see the module notes).
#[derive(Debug)]
struct ConnectionClock(Arc<AtomicBool>);

impl rustls::time_provider::TimeProvider for ConnectionClock {
    fn current_time(&self) -> Option<UnixTime> {
        LAST_CLOCK.with(|last| *last.borrow_mut() = Some(self.0.clone()));
        Some(UnixTime::now())
    }
}

/// Delegates to the real verifier (`-k`'s or webpki's) and marks the connection whose clock
/// was asked last as having verified a certificate: it made a full handshake.
#[derive(Debug)]
struct Watched(Arc<dyn ServerCertVerifier>);

impl ServerCertVerifier for Watched {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(flag) = LAST_CLOCK.with(|last| last.borrow_mut().take()) {
            flag.store(true, Ordering::Relaxed);
        }
        self.0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
    fn requires_raw_public_keys(&self) -> bool {
        self.0.requires_raw_public_keys()
    }
    fn root_hint_subjects(&self) -> Option<&[rustls::DistinguishedName]> {
        self.0.root_hint_subjects()
    }
}

/// Whether one QUIC connection's handshake verified a server certificate.
#[derive(Clone, Debug, Default)]
pub struct CertCheck(Arc<AtomicBool>);

impl CertCheck {
    /// True once the handshake verified a certificate (a full handshake). Read it when the
    /// handshake is complete: a completed TLS 1.3 handshake without a verified certificate
    /// resumed a session.
    pub fn verified(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The QUIC client configuration, and per-connection variants of it when resumption is on.
#[derive(Clone)]
pub struct QuicConfigs {
    /// The config every connection uses when resumption is off.
    shared: quinn::ClientConfig,
    /// With `--tls-resume`/`--0rtt`: the rustls config (one session store, one [`Watched`]
    /// verifier) and the transport settings each connection's config is made from.
    watched: Option<(Arc<ClientConfig>, Arc<quinn::TransportConfig>)>,
    /// With `--qlog`: the rustls config, the files, and the run's configuration (each
    /// connection gets transport settings of its own, with its qlog stream).
    qlog: Option<(
        Arc<ClientConfig>,
        Arc<crate::qlog::QlogFiles>,
        Arc<LoadConfig>,
    )>,
}

/// The QUIC transport settings of every client connection.
fn client_transport(cfg: &LoadConfig) -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    // A dead server sends no RST over UDP: it just goes silent. The client pings when
    // nothing else is in flight (every quarter of the connect timeout), so a live server,
    // even one taking long over a response, always has something to acknowledge; a server
    // silent for --connect-timeout is gone, and the connection ends with its requests
    // counted as failed instead of waiting for --timeout (or the end of -D) in silence.
    let idle = cfg.connect_timeout.clamp(
        std::time::Duration::from_millis(100),
        std::time::Duration::from_secs(600),
    );
    if let Ok(t) = quinn::IdleTimeout::try_from(idle) {
        transport.max_idle_timeout(Some(t));
        transport.keep_alive_interval(Some(idle / 4));
    }
    // Large windows, as h2load's defaults, so flow control never limits a load test.
    transport.stream_receive_window(quinn::VarInt::from_u32(1 << 24));
    transport.receive_window(quinn::VarInt::from_u32(1 << 30));
    if let Some(cc) = cfg.cc {
        hxlab_quic::cc::apply(&mut transport, cc);
    }
    transport
}

/// A connection's qlog: its file's HTTP/3 events (quinn writes the transport's).
pub type QlogEvents = crate::qlog::H3Events;

impl QuicConfigs {
    /// The config for a new connection, and with resumption on, how to tell afterwards
    /// whether its handshake was a full one.
    pub fn for_connection(&self) -> (quinn::ClientConfig, Option<CertCheck>) {
        let Some((tls, transport)) = &self.watched else {
            return (self.shared.clone(), None);
        };
        self.with_clock(tls, transport)
    }

    /// [`QuicConfigs::for_connection`] with a qlog file of its own, `BASE.NAME.sqlog`, when
    /// `--qlog` is on (None when off, or when the file cannot be made: the run goes on
    /// without it).
    pub fn for_connection_logged(
        &self,
        name: &str,
    ) -> (quinn::ClientConfig, Option<CertCheck>, Option<QlogEvents>) {
        let Some((tls, files, cfg)) = &self.qlog else {
            let (c, check) = self.for_connection();
            return (c, check, None);
        };
        let Ok((file, path, start)) = files.open_named(name) else {
            let (c, check) = self.for_connection();
            return (c, check, None);
        };
        let mut transport = client_transport(cfg);
        transport.qlog_stream(hxlab_quic::qlog::stream(
            file.clone(),
            start,
            &path,
            "client",
        ));
        let transport = Arc::new(transport);
        let events = Some(crate::qlog::H3Events::new(file, start));
        if self.watched.is_some() {
            let (config, check) = self.with_clock(tls, &transport);
            return (config, check, events);
        }
        // Without resumption no certificate check is watched (and none may be reported).
        match quinn::crypto::rustls::QuicClientConfig::try_from(tls.clone()) {
            Ok(quic) => {
                let mut config = quinn::ClientConfig::new(Arc::new(quic));
                config.transport_config(transport);
                (config, None, events)
            }
            Err(_) => (self.shared.clone(), None, None),
        }
    }

    /// A config of `tls` (with a clock of its own that notes certificate checks) and
    /// `transport`.
    fn with_clock(
        &self,
        tls: &Arc<ClientConfig>,
        transport: &Arc<quinn::TransportConfig>,
    ) -> (quinn::ClientConfig, Option<CertCheck>) {
        let check = CertCheck::default();
        let mut tls = ClientConfig::clone(tls);
        tls.time_provider = Arc::new(ConnectionClock(check.0.clone()));
        // The config was accepted for QUIC once; a clone with another clock is accepted too.
        match quinn::crypto::rustls::QuicClientConfig::try_from(tls) {
            Ok(quic) => {
                let mut config = quinn::ClientConfig::new(Arc::new(quic));
                config.transport_config(transport.clone());
                (config, Some(check))
            }
            Err(_) => (self.shared.clone(), None),
        }
    }
}

/// The QUIC client configs (TLS 1.3, ALPN h3, the chosen congestion controller).
pub fn quic_config(cfg: &LoadConfig) -> Result<QuicConfigs, LoadError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| LoadError::Tls(e.to_string()))?;
    let watch = cfg.tls_resume || cfg.zero_rtt;
    let mut config = if watch {
        let verifier: Arc<dyn ServerCertVerifier> = if cfg.insecure {
            Arc::new(AcceptAnyCert(provider()))
        } else {
            rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(load_roots(cfg)?),
                provider(),
            )
            .build()
            .map_err(|e| {
                LoadError::Tls(format!(
                    "certificate verifier: {e} (give --cacert FILE, or -k)"
                ))
            })?
        };
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Watched(verifier)))
            .with_no_client_auth()
    } else if cfg.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider())))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(load_roots(cfg)?)
            .with_no_client_auth()
    };
    config.alpn_protocols = vec![b"h3".to_vec()];
    finish(cfg, &mut config);
    let config = Arc::new(config);
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(config.clone())
        .map_err(|e| LoadError::Tls(format!("QUIC: {e}")))?;
    let mut client = quinn::ClientConfig::new(Arc::new(quic));
    let transport = client_transport(cfg);
    let transport = Arc::new(transport);
    client.transport_config(transport.clone());
    let qlog = cfg.qlog_base.as_ref().map(|base| {
        (
            config.clone(),
            Arc::new(crate::qlog::QlogFiles::new(base)),
            Arc::new(cfg.clone()),
        )
    });
    Ok(QuicConfigs {
        shared: client,
        watched: watch.then_some((config, transport)),
        qlog,
    })
}

/// A TLS server name for `host` (an IP address or a DNS name).
pub fn server_name(host: &str) -> Result<ServerName<'static>, LoadError> {
    ServerName::try_from(host.to_string())
        .map_err(|e| LoadError::Tls(format!("server name {host:?}: {e}")))
}
