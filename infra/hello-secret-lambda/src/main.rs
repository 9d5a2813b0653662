//! `hello-secret-lambda`: `infra/hello-lambda` plus one thing, the secrets read at cold start.
//! Before its first `invocation/next` it reads the secrets `CLAWLESS_SECRETS` names exactly as
//! the functions read theirs: the same SDK configuration
//! ([`clawless_runtime::aws_env::function_sdk_loader`]) and the same request
//! ([`clawless_runtime::secrets::fetch_secrets`]). Then it echoes its events.
//!
//! The cold-start bench (`infra/bench cold_start`) measures it as a second baseline, for
//! information only: issue 9's target divides by the bare hello-world's init, and this one
//! shows what reading a secret at cold start costs by itself, so a function's init can be
//! judged against a hello-world that does the same read.

use clawless_runtime::aws_env::function_sdk_loader;
use clawless_runtime::secrets::{SECRETS_ENV, SecretClients, fetch_secrets, parse_env_sources};
use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let sdk = function_sdk_loader().load().await;
    let sources = parse_env_sources(
        &std::env::var(SECRETS_ENV).map_err(|_| format!("{SECRETS_ENV} is not set"))?,
    )?;
    // Fails unless every named secret was read.
    fetch_secrets(&sources, &SecretClients::new(&sdk)).await?;
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<_, lambda_runtime::Error>(event.payload)
    }))
    .await
}
