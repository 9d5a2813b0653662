//! One TLS configuration for every HTTP client a clawless process builds: model APIs, chat
//! platforms, the web fetcher, the node host's and the CLI's clients.
//!
//! reqwest, left to itself, reads and parses the system's root certificates each time a client
//! is built (several milliseconds each, on a Lambda cold start as anywhere). Clients built from
//! [`client_builder`] share one rustls configuration whose certificate verifier is the platform
//! verifier reqwest would have used, created on the first HTTPS handshake of the process: a
//! process that builds clients but never opens a TLS connection never reads the roots, and one
//! that does reads them once.
//!
//! Certificates are verified exactly as before: the platform verifier over the system's roots
//! (honouring `SSL_CERT_FILE` and `SSL_CERT_DIR`). If the roots cannot be loaded, every
//! handshake fails with that reason; nothing is ever accepted unverified.

#[cfg(feature = "test-support")]
pub mod testing;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// How many times this process has loaded the system's root certificates for these clients.
static ROOT_LOADS: AtomicUsize = AtomicUsize::new(0);

/// A reqwest client builder using the process's shared TLS configuration. Everything else
/// (timeouts, redirects, resolvers, user agent) is the caller's to set.
pub fn client_builder() -> reqwest::ClientBuilder {
    let builder = reqwest::Client::builder();
    match shared_tls_config() {
        Some(config) => builder.tls_backend_preconfigured(config.clone()),
        // Only if the crypto provider offers no safe protocol version, which the built-in one
        // always does: reqwest's own TLS set-up still verifies certificates, per client.
        None => builder,
    }
}

/// Builds the shared TLS configuration now rather than with the first client, for a process
/// that has a moment to spare earlier (a Lambda cold start waiting on its secrets). The
/// system's roots are still loaded at the first HTTPS handshake.
pub fn prepare_tls() {
    shared_tls_config();
}

/// A client with the shared TLS configuration and reqwest's defaults otherwise.
pub fn client() -> Result<reqwest::Client, reqwest::Error> {
    client_builder().build()
}

/// How many times the system's root certificates were loaded for clients from
/// [`client_builder`]: 0 until the first HTTPS handshake, then 1 for the life of the process.
pub fn system_root_loads() -> usize {
    ROOT_LOADS.load(Ordering::Relaxed)
}

fn shared_tls_config() -> Option<&'static rustls::ClientConfig> {
    static CONFIG: OnceLock<Option<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
            let verifier = Arc::new(LazyPlatformVerifier::new(Arc::clone(&provider)));
            match rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
            {
                Ok(builder) => Some(
                    builder
                        .dangerous()
                        .with_custom_certificate_verifier(verifier)
                        .with_no_client_auth(),
                ),
                Err(err) => {
                    tracing::warn!(error = %err, "shared TLS configuration unavailable");
                    None
                }
            }
        })
        .as_ref()
}

/// The platform verifier over the system's roots, created at its first use.
#[derive(Debug)]
struct LazyPlatformVerifier {
    provider: Arc<CryptoProvider>,
    verifier: OnceLock<Result<Arc<rustls_platform_verifier::Verifier>, rustls::Error>>,
}

impl LazyPlatformVerifier {
    fn new(provider: Arc<CryptoProvider>) -> Self {
        Self {
            provider,
            verifier: OnceLock::new(),
        }
    }

    fn verifier(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.verifier
            .get_or_init(|| {
                ROOT_LOADS.fetch_add(1, Ordering::Relaxed);
                rustls_platform_verifier::Verifier::new(Arc::clone(&self.provider))
                    .map(Arc::new)
                    .inspect_err(|err| {
                        tracing::error!(error = %err, "cannot load the system's root certificates");
                    })
            })
            .as_deref()
            .map_err(Clone::clone)
    }
}

impl ServerCertVerifier for LazyPlatformVerifier {
    fn verify_server_cert(
        &self, end_entity: &CertificateDer<'_>, intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>, ocsp_response: &[u8], now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.verifier()?.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.verifier()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        // Asked when the ClientHello is written, before any certificate arrives: the
        // provider's algorithms, which are the platform verifier's too.
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
