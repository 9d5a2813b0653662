//! `secrets:` fetched from SSM Parameter Store and Secrets Manager on moto, through the real
//! AWS SDK: a SecureString parameter, a whole secret and one key of a JSON secret; a missing
//! one fails naming it; an entry with no or two sources is refused; values never show in
//! `Debug`; a secret two names use is read once, and several from one store in one request.

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
    SecretClients::new(&sdk)
        .with_ssm(aws_sdk_ssm::Client::from_conf(
            aws_sdk_ssm::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build(),
        ))
        .with_secrets_manager(aws_sdk_secretsmanager::Client::from_conf(
            aws_sdk_secretsmanager::config::Builder::from(&sdk)
                .interceptor(counter.clone())
                .build(),
        ))
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
        .ssm()
        .put_parameter()
        .name(&parameter)
        .value("123:telegram-secret")
        .r#type(ParameterType::SecureString)
        .send()
        .await
        .expect("put parameter");
    let whole = unique("clawless/generic");
    clients
        .secrets_manager()
        .create_secret()
        .name(&whole)
        .secret_string("generic-secret-value")
        .send()
        .await
        .expect("create secret");
    let json = unique("clawless/slack");
    clients
        .secrets_manager()
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
        2,
        "one request per store: GetParameter, and one BatchGetSecretValue for both secrets \
         (the two Slack names share one)"
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
        .secrets_manager()
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

#[tokio::test]
async fn several_from_one_store_are_read_in_one_request_and_a_missing_one_is_named() {
    // GIVEN three parameters and three secrets, one of them named by its full ARN
    let counter = RequestCounter::default();
    let clients = counted_clients(&counter).await;
    let mut sources = BTreeMap::new();
    for index in 0..3 {
        let parameter = format!("/clawless/{}", unique(&format!("batched-{index}")));
        clients
            .ssm()
            .put_parameter()
            .name(&parameter)
            .value(format!("parameter-value-{index}"))
            .r#type(ParameterType::SecureString)
            .send()
            .await
            .expect("put parameter");
        sources.insert(
            format!("PARAMETER_{index}"),
            source(Some(&parameter), None, None),
        );
        let created = clients
            .secrets_manager()
            .create_secret()
            .name(unique(&format!("clawless/batched-{index}")))
            .secret_string(format!("secret-value-{index}"))
            .send()
            .await
            .expect("create secret");
        let id = if index == 0 {
            created.arn().expect("an ARN").to_owned()
        } else {
            created.name().expect("a name").to_owned()
        };
        sources.insert(format!("SECRET_{index}"), source(None, Some(&id), None));
    }

    // WHEN they are fetched
    counter.reset();
    let values = fetch_secrets(&sources, &clients).await.expect("fetched");

    // THEN each has its value, read in one request per store
    for index in 0..3 {
        assert_eq!(
            values.get(&format!("PARAMETER_{index}")),
            Some(format!("parameter-value-{index}").as_str())
        );
        assert_eq!(
            values.get(&format!("SECRET_{index}")),
            Some(format!("secret-value-{index}").as_str())
        );
    }
    assert_eq!(
        counter.count(),
        2,
        "one GetParameters, one BatchGetSecretValue"
    );

    // AND a missing secret among them fails naming its entry, with the store's own error
    let absent = unique("clawless/absent");
    sources.insert("ABSENT".to_owned(), source(None, Some(&absent), None));
    let err = fetch_secrets(&sources, &clients).await.unwrap_err();
    assert!(
        matches!(&err, SecretsError::Fetch { name, message } if name == "ABSENT" && message.contains(&absent)),
        "{err}"
    );
}
