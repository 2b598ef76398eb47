//! Certificates and TLS configurations: a given PEM pair or a fresh self-signed certificate,
//! its SPKI hash, and the rustls configs for TCP (h2 + http/1.1) and QUIC (h3). Always the
//! ring provider, chosen explicitly.

use crate::ServeError;
use base64::Engine;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use sha2::Digest;
use std::path::Path;
use std::sync::Arc;

/// The certificate chain and key the server presents.
pub(crate) struct Identity {
    pub cert_pem: String,
    pub spki_sha256: String,
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

fn cert_err(what: impl std::fmt::Display) -> ServeError {
    ServeError::Cert(what.to_string())
}

impl Identity {
    /// Loads `cert`+`key` (both or neither), or makes a self-signed certificate for
    /// localhost, 127.0.0.1, ::1 and `names` (the hosts of a replayed archive).
    pub fn load_or_generate(
        cert: Option<&Path>,
        key: Option<&Path>,
        names: &[String],
    ) -> Result<Identity, ServeError> {
        match (cert, key) {
            (Some(c), Some(k)) => Self::load(c, k),
            (None, None) => Self::generate(names),
            _ => Err(ServeError::Config(
                "--cert and --key go together: give both or neither".into(),
            )),
        }
    }

    fn generate(extra: &[String]) -> Result<Identity, ServeError> {
        let mut names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        // Only names a certificate can carry; the browser trusts the key by its SPKI hash
        // anyway, so a name left out costs nothing but the name check.
        for n in extra {
            let ok = !n.is_empty()
                && n.len() <= 253
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
            if ok && !names.contains(n) && names.len() < 1000 {
                names.push(n.clone());
            }
        }
        let made = rcgen::generate_simple_self_signed(names).map_err(cert_err)?;
        let cert_der = made.cert.der().clone();
        let key = PrivateKeyDer::try_from(made.signing_key.serialize_der()).map_err(cert_err)?;
        let spki_sha256 = spki_hash(&cert_der)?;
        Ok(Identity {
            cert_pem: made.cert.pem(),
            spki_sha256,
            certs: vec![cert_der],
            key,
        })
    }

    fn load(cert: &Path, key: &Path) -> Result<Identity, ServeError> {
        let read = |p: &Path| {
            hxlab_core::read_capped(p, hxlab_core::files::cap::SMALL).map_err(|source| {
                ServeError::File {
                    path: p.to_path_buf(),
                    source,
                }
            })
        };
        let cert_pem_bytes = read(cert)?;
        let key_pem = read(key)?;
        let certs: Vec<CertificateDer<'static>> =
            rustls_pemfile::certs(&mut cert_pem_bytes.as_slice())
                .collect::<Result<_, _>>()
                .map_err(|e| cert_err(format!("{}: {e}", cert.display())))?;
        let first = certs.first().ok_or_else(|| {
            cert_err(format!(
                "{}: no CERTIFICATE block in the PEM file",
                cert.display()
            ))
        })?;
        let key = rustls_pemfile::private_key(&mut key_pem.as_slice())
            .map_err(|e| cert_err(format!("{}: {e}", key.display())))?
            .ok_or_else(|| {
                cert_err(format!("{}: no private key in the PEM file", key.display()))
            })?;
        let spki_sha256 = spki_hash(first)?;
        let cert_pem = String::from_utf8_lossy(&cert_pem_bytes).into_owned();
        Ok(Identity {
            cert_pem,
            spki_sha256,
            certs,
            key,
        })
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// TLS 1.3 and 1.2, ALPN h2 then http/1.1 (no ALPN also means HTTP/1.1).
    /// TLS 1.3 and 1.2 over TCP, ALPN h2 and http/1.1; with `early_data`, TLS 1.3 0-RTT is
    /// accepted (up to 16 KiB) and answered as half-RTT data.
    pub fn tcp_server_config(&self, early_data: bool) -> Result<rustls::ServerConfig, ServeError> {
        let mut config = rustls::ServerConfig::builder_with_provider(Self::provider())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(cert_err)?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(cert_err)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // SSLKEYLOGFILE: the session secrets in NSS key log format (see docs/serve.md).
        config.key_log = Arc::new(rustls::KeyLogFile::new());
        if early_data {
            config.max_early_data_size = 16 * 1024;
            config.send_half_rtt_data = true;
        }
        Ok(config)
    }

    /// QUIC v1 (TLS 1.3 only), ALPN h3.
    pub fn quic_server_config(
        &self,
        limits: QuicLimits,
        cc: Option<hxlab_core::cc::CongestionControl>,
    ) -> Result<quinn::ServerConfig, ServeError> {
        let mut tls = rustls::ServerConfig::builder_with_provider(Self::provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(cert_err)?
            .with_no_client_auth()
            .with_single_cert(self.certs.clone(), self.key.clone_key())
            .map_err(cert_err)?;
        tls.alpn_protocols = vec![b"h3".to_vec()];
        tls.key_log = Arc::new(rustls::KeyLogFile::new());
        // Accept QUIC 0-RTT from resuming clients (quinn wants exactly u32::MAX or 0 here).
        tls.max_early_data_size = u32::MAX;
        let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).map_err(cert_err)?;
        let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
        let mut transport = quinn::TransportConfig::default();
        transport.max_concurrent_bidi_streams(limits.max_streams.into());
        // What one connection may hold in memory, each way (quinn's defaults let a client
        // that stops acknowledging pin ~10 MB of send buffer per connection).
        let window = quinn::VarInt::from_u64(limits.window).unwrap_or(quinn::VarInt::MAX);
        transport.send_window(limits.window);
        transport.receive_window(window);
        transport.stream_receive_window(window);
        transport.max_idle_timeout(Some(quinn::IdleTimeout::from(quinn::VarInt::from_u32(
            30_000,
        ))));
        if let Some(cc) = cc {
            hxlab_quic::cc::apply(&mut transport, cc);
        }
        config.transport_config(Arc::new(transport));
        Ok(config)
    }
}

/// What one QUIC connection may have: streams at once, and bytes buffered each way.
#[derive(Clone, Copy, Debug)]
pub struct QuicLimits {
    /// Concurrent bidirectional streams.
    pub max_streams: u32,
    /// Send window, receive window and each stream's receive window, in bytes.
    pub window: u64,
}

/// base64(SHA-256(SubjectPublicKeyInfo DER)) of a certificate.
fn spki_hash(cert: &CertificateDer<'_>) -> Result<String, ServeError> {
    let parsed = webpki::EndEntityCert::try_from(cert)
        .map_err(|e| cert_err(format!("cannot parse certificate: {e:?}")))?;
    let spki = parsed.subject_public_key_info();
    let digest = sha2::Sha256::digest(spki.as_ref());
    Ok(base64::engine::general_purpose::STANDARD.encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_identity_has_spki_and_pem() {
        let id = Identity::generate(&["a.hxlab.test".into()]).expect("generate");
        assert!(id.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        let raw = base64::engine::general_purpose::STANDARD
            .decode(&id.spki_sha256)
            .expect("base64");
        assert_eq!(raw.len(), 32);
        id.tcp_server_config(true).expect("tcp config");
        id.quic_server_config(
            QuicLimits {
                max_streams: 100,
                window: 4 << 20,
            },
            None,
        )
        .expect("quic config");
    }

    #[test]
    fn cert_without_key_is_refused() {
        let r = Identity::load_or_generate(Some(Path::new("/nonexistent.pem")), None, &[]);
        assert!(matches!(r, Err(ServeError::Config(_))));
    }
}
