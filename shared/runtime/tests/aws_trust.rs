//! The Lambda functions' AWS clients trust Amazon Trust Services' roots only
//! (`AwsTrust::AmazonRoots`), unless `CLAWLESS_AWS_TRUST=system` says the system's roots.
//!
//! Against a real TLS server on loopback whose certificate a test root vouches for, in a
//! child process where that test root is the system's only root (`SSL_CERT_FILE`): a client
//! trusting Amazon's roots refuses the server (no handshake completes), one trusting the
//! system's roots reaches it.

use std::sync::atomic::Ordering;

use aws_sdk_sqs::config::{Credentials, Region};
use aws_sdk_sqs::error::SdkError;
use clawless_http::testing::{https_server, rerun_trusting_test_root};
use clawless_runtime::aws_env::{AMAZON_ROOTS_PEM, AwsTrust};

/// Set in the child process that runs with the test root as its only system root.
const CHILD_ENV: &str = "CLAWLESS_RUNTIME_TEST_TRUSTS_FIXTURE";

/// An SQS client trusting `trust`'s roots, pointed at `https://{addr}`.
async fn sqs_client(trust: AwsTrust, addr: std::net::SocketAddr) -> aws_sdk_sqs::Client {
    let sdk = trust
        .sdk_loader()
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(format!("https://{addr}"))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&sdk)
}

#[test]
fn the_setting_system_alone_selects_the_systems_roots() {
    assert_eq!(AwsTrust::from_setting(None), AwsTrust::AmazonRoots);
    assert_eq!(AwsTrust::from_setting(Some("")), AwsTrust::AmazonRoots);
    assert_eq!(
        AwsTrust::from_setting(Some("amazon")),
        AwsTrust::AmazonRoots
    );
    assert_eq!(
        AwsTrust::from_setting(Some("systemd")),
        AwsTrust::AmazonRoots
    );
    assert_eq!(AwsTrust::from_setting(Some(" System ")), AwsTrust::System);
    assert!(AwsTrust::System.http_client().is_none());
}

#[tokio::test]
async fn amazons_five_roots_load_into_an_sdk_client() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // the child runs only the test below
    }
    assert_eq!(
        AMAZON_ROOTS_PEM
            .matches("-----BEGIN CERTIFICATE-----")
            .count(),
        5
    );
    assert!(AwsTrust::AmazonRoots.http_client().is_some());
    // Building a client builds its TLS configuration, which parses every root (and panics
    // on one it cannot use).
    let (addr, _) = https_server().await;
    let _client = sqs_client(AwsTrust::AmazonRoots, addr).await;
}

#[tokio::test]
async fn amazon_roots_refuse_a_server_only_a_system_root_vouches_for() {
    if std::env::var_os(CHILD_ENV).is_none() {
        rerun_trusting_test_root(
            "amazon_roots_refuse_a_server_only_a_system_root_vouches_for",
            CHILD_ENV,
        );
        return;
    }
    let (addr, handshakes) = https_server().await;

    let pinned = sqs_client(AwsTrust::AmazonRoots, addr).await;
    let err = pinned
        .list_queues()
        .send()
        .await
        .expect_err("a server Amazon's roots do not vouch for");
    assert!(
        matches!(err, SdkError::DispatchFailure(_)),
        "refused before any request was sent: {err:?}"
    );
    assert_eq!(
        handshakes.load(Ordering::SeqCst),
        0,
        "no handshake completed"
    );

    let system = sqs_client(AwsTrust::System, addr).await;
    // The server is no SQS, so the call fails, but only after the handshake.
    let _ = system.list_queues().send().await;
    assert!(
        handshakes.load(Ordering::SeqCst) >= 1,
        "the system's roots (the test root here) let the handshake through"
    );
}
