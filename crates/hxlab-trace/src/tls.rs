//! Client TLS configuration (rustls, ring provider): which server certificates to trust.

use crate::TraceError;
use hxlab_load::tls::AcceptAnyCert;
use rustls::crypto::CryptoProvider;
use std::path::PathBuf;
use std::sync::Arc;

/// Which server certificates the trace accepts.
#[derive(Debug, Clone)]
pub enum Trust {
    /// The system's root certificates.
    System,
    /// Roots from a PEM file (e.g. the certificate `hxlab serve --cert-out` wrote).
    CaFile(PathBuf),
    /// Any certificate (`-k`): the handshake signature is still checked, the chain is not.
    Insecure,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A client config offering `alpn`; `tls13_only` for QUIC.
pub fn client_config(
    trust: &Trust,
    alpn: &[&[u8]],
    tls13_only: bool,
) -> Result<rustls::ClientConfig, TraceError> {
    let provider = provider();
    let versions: &[&rustls::SupportedProtocolVersion] = if tls13_only {
        &[&rustls::version::TLS13]
    } else {
        rustls::DEFAULT_VERSIONS
    };
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(versions)
        .map_err(|e| TraceError::Tls(e.to_string()))?;
    let mut config = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCert(provider)))
            .with_no_client_auth(),
        Trust::CaFile(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                TraceError::Usage(format!("cannot read --cacert {}: {e}", path.display()))
            })?;
            let mut roots = rustls::RootCertStore::empty();
            let mut n = 0;
            for cert in rustls_pemfile::certs(&mut pem.as_slice()) {
                let cert = cert
                    .map_err(|e| TraceError::Usage(format!("--cacert {}: {e}", path.display())))?;
                roots
                    .add(cert)
                    .map_err(|e| TraceError::Usage(format!("--cacert {}: {e}", path.display())))?;
                n += 1;
            }
            if n == 0 {
                return Err(TraceError::Usage(format!(
                    "--cacert {}: no PEM certificate in the file",
                    path.display()
                )));
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        Trust::System => {
            let mut roots = rustls::RootCertStore::empty();
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}
