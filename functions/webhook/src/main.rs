//! `webhook`: `POST /webhook/{channel}`. Verifies the platform signature, claims the message
//! id once, enqueues a turn event and answers 202 well inside the platform's deadline.
//! Wiring only; runs once per cold start.

use clawless_runtime::aws_app::{AwsApp, ClientsUsed};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    lambda_http::tracing::init_default_subscriber();
    // Bad configuration fails the cold start, not a request.
    let app = AwsApp::from_env_using(ClientsUsed {
        https: true,
        ..ClientsUsed::default()
    })
    .await?;
    lambda_http::run(app.webhook_router()?).await
}
