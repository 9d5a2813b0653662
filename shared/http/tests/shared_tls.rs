//! The shared TLS configuration against a real TLS server on loopback: building clients reads
//! no certificates, the first handshake reads the system's roots once for every client, a
//! server no system root vouches for is refused, and one that a root does vouch for (the test
//! root, made the system's only root through `SSL_CERT_FILE` in a child process) is accepted.
//!
//! The server and its test root are [`clawless_http::testing`]'s.

use clawless_http::testing::{https_server, rerun_trusting_test_root};

/// Set in the child process that runs with the test certificate as its only system root.
const CHILD_ENV: &str = "CLAWLESS_HTTP_TEST_TRUSTS_FIXTURE";

#[tokio::test]
async fn clients_read_the_roots_once_at_the_first_handshake_and_refuse_an_unknown_issuer() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // the child runs only the test below
    }
    let clients: Vec<reqwest::Client> = (0..3)
        .map(|_| clawless_http::client().expect("client"))
        .collect();
    assert_eq!(
        clawless_http::system_root_loads(),
        0,
        "building clients must not read the system's roots"
    );

    let (addr, _) = https_server().await;
    for client in &clients {
        let err = client
            .get(format!("https://{addr}/"))
            .send()
            .await
            .expect_err("a certificate no system root vouches for is refused");
        let chain = format!("{err:?}");
        assert!(
            chain.contains("UnknownIssuer"),
            "refused for its issuer, not something else: {chain}"
        );
    }
    assert_eq!(
        clawless_http::system_root_loads(),
        1,
        "three clients' handshakes read the roots once"
    );
}

#[tokio::test]
async fn a_server_a_system_root_vouches_for_is_accepted() {
    if std::env::var_os(CHILD_ENV).is_none() {
        rerun_trusting_test_root("a_server_a_system_root_vouches_for_is_accepted", CHILD_ENV);
        return;
    }
    let (addr, _) = https_server().await;
    let body = clawless_http::client()
        .expect("client")
        .get(format!("https://{addr}/"))
        .send()
        .await
        .expect("the test root is the system's root in this process")
        .text()
        .await
        .expect("body");
    assert_eq!(body, "hello");
    assert_eq!(clawless_http::system_root_loads(), 1);
}
