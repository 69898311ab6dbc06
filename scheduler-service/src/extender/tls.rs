//! An extender's HTTPS client configuration from its `tlsConfig`, as kube-scheduler's
//! `makeTransport` (`pkg/scheduler/extender.go`) builds it: the CA, the client certificate and
//! key (inline data or files), `insecure` and `serverName`.

use std::sync::Arc;

use super::ExtenderSetupError;
use crate::engine::extender::ExtenderConfig;

/// Verifies nothing: `tlsConfig.insecure`, or HTTPS without a CA (as kube-scheduler's
/// `makeTransport` sets `Insecure` then).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls_pki_types::CertificateDer<'_>,
        _intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Verifies the server's certificate for `tlsConfig.serverName` instead of the URL's host.
#[derive(Debug)]
struct NamedVerification {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    name: rustls_pki_types::ServerName<'static>,
}

impl rustls::client::danger::ServerCertVerifier for NamedVerification {
    fn verify_server_cert(
        &self,
        end_entity: &rustls_pki_types::CertificateDer<'_>,
        intermediates: &[rustls_pki_types::CertificateDer<'_>],
        _server_name: &rustls_pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls_pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls_pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// The bytes of a `tlsConfig` PEM: its `…Data` when set, else its `…File`'s content.
fn material(
    config: &ExtenderConfig,
    data: &[u8],
    file: &str,
    field: &'static str,
) -> Result<Option<Vec<u8>>, ExtenderSetupError> {
    if !data.is_empty() {
        return Ok(Some(data.to_vec()));
    }
    if file.is_empty() {
        return Ok(None);
    }
    std::fs::read(file)
        .map(Some)
        .map_err(|source| ExtenderSetupError::Read {
            extender: config.url_prefix.clone(),
            field,
            path: file.to_string(),
            source,
        })
}

/// The rustls configuration of kube-scheduler's `makeTransport`: the CA of `tlsConfig` when
/// given, else the system's roots; no verification when `insecure`, or for `enableHTTPS`
/// without a CA; the certificate checked for `serverName` when given; a client certificate
/// when given.
pub(super) fn tls_config(config: &ExtenderConfig) -> Result<rustls::ClientConfig, ExtenderSetupError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let tls = config.tls.clone().unwrap_or_default();
    let bad = |message: String| ExtenderSetupError::Tls {
        extender: config.url_prefix.clone(),
        message,
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?;
    let ca = material(config, &tls.ca_data, &tls.ca_file, "caFile")?;
    let insecure = tls.insecure || (config.enable_https && ca.is_none());
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = rustls::RootCertStore::empty();
        match &ca {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert = cert.map_err(|e| bad(format!("caData: {e}")))?;
                    roots.add(cert).map_err(|e| bad(format!("caData: {e}")))?;
                }
                if roots.is_empty() {
                    return Err(bad("caData: no certificate".into()));
                }
            }
            // No CA: the system's roots, as Go's default transport uses them.
            None => {
                roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            }
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| bad(e.to_string()))?;
        let verifier: Arc<dyn rustls::client::danger::ServerCertVerifier> = if tls.server_name.is_empty() {
            verifier
        } else {
            let name = rustls_pki_types::ServerName::try_from(tls.server_name.clone())
                .map_err(|e| bad(format!("serverName {:?}: {e}", tls.server_name)))?;
            Arc::new(NamedVerification { inner: verifier, name })
        };
        builder.dangerous().with_custom_certificate_verifier(verifier)
    };
    let cert = material(config, &tls.cert_data, &tls.cert_file, "certFile")?;
    let key = material(config, &tls.key_data, &tls.key_file, "keyFile")?;
    match (cert, key) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| bad(format!("certData: {e}")))?;
            let key = PrivateKeyDer::from_pem_slice(&key).map_err(|e| bad(format!("keyData: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| bad(format!("client certificate: {e}")))
        }
        (None, None) => Ok(builder.with_no_client_auth()),
        _ => Err(bad("certData/certFile and keyData/keyFile go together".into())),
    }
}
