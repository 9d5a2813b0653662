//! `secrets:` fetched from SSM Parameter Store and Secrets Manager on moto, through the real
//! AWS SDK: a SecureString parameter, a whole secret and one key of a JSON secret; a missing
//! one fails naming it; an entry with no or two sources is refused; values never show in
//! `Debug`; a secret two names use is read once.

use std::collections::BTreeMap;

use aws_sdk_ssm::types::ParameterType;
use clawless_aws::testing::{RequestCounter, moto_sdk_config};
use clawless_runtime::secrets::{SecretClients, SecretSource, SecretsError, fetch_secrets};

fn unique(name: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("{name}-{nanos}")
}

async fn clients() -> SecretClients {
    counted_clients(&RequestCounter::default()).await
}

/// Clients whose requests (to either store) add to `counter`.
async fn counted_clients(counter: &RequestCounter) -> SecretClients {
    let sdk = moto_sdk_config().await;
    SecretClients {
        ssm: aws_sdk_ssm::Client::from_conf(
            aws_sdk_ssm::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build(),
        ),
        secrets_manager: aws_sdk_secretsmanager::Client::from_conf(
            aws_sdk_secretsmanager::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build(),
        ),
    }
}

fn source(ssm: Option<&str>, secrets_manager: Option<&str>, key: Option<&str>) -> SecretSource {
    SecretSource {
        ssm: ssm.map(str::to_owned),
        secrets_manager: secrets_manager.map(str::to_owned),
        key: key.map(str::to_owned),
    }
}

#[tokio::test]
async fn parameters_and_secrets_are_fetched_by_name() {
    let counter = RequestCounter::default();
    let clients = counted_clients(&counter).await;
    let parameter = format!("/clawless/{}", unique("telegram-token"));
    clients
        .ssm
        .put_parameter()
        .name(&parameter)
        .value("123:telegram-secret")
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .expect("put parameter");
    let whole = unique("clawless/generic");
    clients
        .secrets_manager
        .create_secret()
        .name(&whole)
        .secret_string("generic-secret-value")
        .send()
        .await
        .expect("create secret");
    let json = unique("clawless/slack");
    clients
        .secrets_manager
        .create_secret()
        .name(&json)
        .secret_string(r#"{"signingSecret": "slack-signing", "botToken": "xoxb-1"}"#)
        .send()
        .await
        .expect("create secret");
    let sources = BTreeMap::from([
        (
            "TELEGRAM_BOT_TOKEN".to_owned(),
            source(Some(&parameter), None, None),
        ),
        (
            "GENERIC_SECRET".to_owned(),
            source(None, Some(&whole), None),
        ),
        (
            "SLACK_SIGNING_SECRET".to_owned(),
            source(None, Some(&json), Some("signingSecret")),
        ),
        (
            "SLACK_BOT_TOKEN".to_owned(),
            source(None, Some(&json), Some("botToken")),
        ),
    ]);

    counter.reset();
    let values = fetch_secrets(&sources, &clients).await.expect("fetched");

    assert_eq!(
        values.get("TELEGRAM_BOT_TOKEN"),
        Some("123:telegram-secret")
    );
    assert_eq!(values.get("GENERIC_SECRET"), Some("generic-secret-value"));
    assert_eq!(values.get("SLACK_SIGNING_SECRET"), Some("slack-signing"));
    assert_eq!(values.get("SLACK_BOT_TOKEN"), Some("xoxb-1"));
    assert_eq!(
        counter.count(),
        3,
        "one read per parameter or secret: the two Slack names share one"
    );
    let shown = format!("{values:?}");
    assert!(shown.contains("SLACK_SIGNING_SECRET"), "{shown}");
    for secret in ["telegram-secret", "generic-secret-value", "slack-signing"] {
        assert!(!shown.contains(secret), "{shown}");
    }
}

#[tokio::test]
async fn missing_or_ill_formed_secrets_fail_naming_the_entry() {
    let clients = clients().await;
    let missing = BTreeMap::from([(
        "NOPE".to_owned(),
        source(Some(&format!("/clawless/{}", unique("absent"))), None, None),
    )]);
    let err = fetch_secrets(&missing, &clients).await.unwrap_err();
    assert!(
        matches!(&err, SecretsError::Fetch { name, .. } if name == "NOPE"),
        "{err}"
    );

    let json = unique("clawless/json");
    clients
        .secrets_manager
        .create_secret()
        .name(&json)
        .secret_string(r#"{"other": "x"}"#)
        .send()
        .await
        .expect("create secret");
    let wrong_key = BTreeMap::from([(
        "KEYED".to_owned(),
        source(None, Some(&json), Some("signingSecret")),
    )]);
    let err = fetch_secrets(&wrong_key, &clients).await.unwrap_err();
    assert!(err.to_string().contains("signingSecret"), "{err}");

    for (ssm, manager) in [(None, None), (Some("/a"), Some("b"))] {
        let invalid = BTreeMap::from([("BAD".to_owned(), source(ssm, manager, None))]);
        let err = fetch_secrets(&invalid, &clients).await.unwrap_err();
        assert!(matches!(err, SecretsError::Invalid { .. }), "{err}");
    }
}
