//! TLS client configuration (rustls with the ring provider): trust roots or `-k`, ALPN,
//! session resumption, and the QUIC variant for HTTP/3.

use crate::{CongestionControl, LoadConfig, LoadError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::sync::Arc;

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Accepts any certificate chain (`-k`) but still verifies the handshake signatures, as
/// OpenSSL does for h2load with verification off: a handshake costs what a real one costs.
#[derive(Debug)]
struct AcceptAnyCert(Arc<rustls::crypto::CryptoProvider>);

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
    let data = std::fs::read(&path).map_err(|source| LoadError::File {
        path: path.display().to_string(),
        source,
    })?;
    let mut n = 0;
    for cert in rustls_pemfile::certs(&mut data.as_slice()) {
        let cert = cert.map_err(|e| LoadError::Tls(format!("{}: {e}", path.display())))?;
        if roots.add(cert).is_ok() {
            n += 1;
        }
    }
    if n == 0 && cfg.cacert.is_some() {
        return Err(LoadError::Tls(format!(
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
}

/// A quinn client config (TLS 1.3, ALPN h3, the chosen congestion controller).
pub fn quic_config(cfg: &LoadConfig) -> Result<quinn::ClientConfig, LoadError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
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
    config.alpn_protocols = vec![b"h3".to_vec()];
    finish(cfg, &mut config);
    let quic = quinn::crypto::rustls::QuicClientConfig::try_from(config)
        .map_err(|e| LoadError::Tls(format!("QUIC: {e}")))?;
    let mut client = quinn::ClientConfig::new(Arc::new(quic));
    let mut transport = quinn::TransportConfig::default();
    let idle = cfg
        .timeout
        .max(cfg.connect_timeout)
        .min(std::time::Duration::from_secs(600));
    if let Ok(idle) = quinn::IdleTimeout::try_from(idle) {
        transport.max_idle_timeout(Some(idle));
    }
    // Large windows, as h2load's defaults, so flow control never limits a load test.
    transport.stream_receive_window(quinn::VarInt::from_u32(1 << 24));
    transport.receive_window(quinn::VarInt::from_u32(1 << 30));
    match cfg.cc {
        Some(CongestionControl::Reno) => {
            transport.congestion_controller_factory(Arc::new(
                quinn::congestion::NewRenoConfig::default(),
            ));
        }
        Some(CongestionControl::Cubic) => {
            transport
                .congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
        }
        Some(CongestionControl::Bbr) => {
            transport
                .congestion_controller_factory(Arc::new(quinn::congestion::BbrConfig::default()));
        }
        None => {}
    }
    client.transport_config(Arc::new(transport));
    Ok(client)
}

/// A TLS server name for `host` (an IP address or a DNS name).
pub fn server_name(host: &str) -> Result<ServerName<'static>, LoadError> {
    ServerName::try_from(host.to_string())
        .map_err(|e| LoadError::Tls(format!("server name {host:?}: {e}")))
}
