//! `hello-lambda`: the smallest function the Rust runtime allows, the baseline the
//! cold-start bench (`infra/bench cold_start`) divides our functions' init time by. It is
//! wired like our functions (single-threaded tokio, the runtime's default tracing
//! subscriber, the workspace's `lambda_runtime`), linked like them (position-dependent, by
//! their build script) and does no AWS or configuration work.

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    lambda_runtime::run(service_fn(|event: LambdaEvent<Value>| async move {
        Ok::<_, lambda_runtime::Error>(event.payload)
    }))
    .await
}
