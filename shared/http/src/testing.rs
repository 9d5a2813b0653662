//! Test support (feature `test-support`): an HTTPS server on 127.0.0.1 whose certificate a
//! test root vouches for, so tests can check which roots a client trusts.
//!
//! Fixtures (`tests/fixtures/`): `test-root.pem`, a root whose key was thrown away after it
//! signed `localhost-cert.pem`, the server's certificate for 127.0.0.1 (key
//! `localhost-key.pem`).

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The server's certificate (for 127.0.0.1).
pub const CERT_PEM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/localhost-cert.pem"
);
/// The server's private key.
pub const KEY_PEM: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/localhost-key.pem"
);
/// The root that signed [`CERT_PEM`]; make it a process's only system root with
/// `SSL_CERT_FILE` (and an empty `SSL_CERT_DIR`).
pub const ROOT_PEM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/test-root.pem");

/// Starts an HTTPS server on 127.0.0.1 presenting [`CERT_PEM`] and answering every request
/// with `200 hello`. Returns its address and a count of the TLS handshakes that succeeded.
///
/// # Panics
/// When the fixtures cannot be read or the port cannot be bound (a test setup failure).
pub async fn https_server() -> (SocketAddr, Arc<AtomicUsize>) {
    let certs = CertificateDer::pem_file_iter(CERT_PEM)
        .expect("fixture certificate")
        .collect::<Result<Vec<_>, _>>()
        .expect("fixture certificate parses");
    let key = PrivateKeyDer::from_pem_file(KEY_PEM).expect("fixture key");
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let handshakes = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&handshakes);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let counted = Arc::clone(&counted);
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut request = [0_u8; 4096];
                let _ = tls.read(&mut request).await;
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (addr, handshakes)
}

/// Runs the test `name` of the running test binary again, in a child process whose only
/// system root is [`ROOT_PEM`] (root stores are read from the environment once per process,
/// so the child gets it from the start) and where the variable `marker` is set, so the test
/// can tell it is the child. The test itself should return early in the parent after this,
/// and other tests of the binary should return early in the child.
///
/// # Panics
/// When the child cannot be started, or its run of the test failed or did not happen.
pub fn rerun_trusting_test_root(name: &str, marker: &str) {
    let child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", name, "--nocapture"])
        .env(marker, "1")
        .env("SSL_CERT_FILE", ROOT_PEM)
        .env("SSL_CERT_DIR", "")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("1 passed"),
        "the child's check failed or did not run: {}\n{stdout}\n{}",
        child.status,
        String::from_utf8_lossy(&child.stderr)
    );
}
