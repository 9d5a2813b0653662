//! `turn`: the SQS FIFO consumer. Each record is one event of one session; the turn service
//! advances the session as far as it can and returns. Wiring only; runs once per cold start.

mod handler;

use std::sync::Arc;

use clawless_runtime::aws_app::AwsApp;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let app = AwsApp::from_env().await?;
    let turns = Arc::new(app.turn_service().await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        let turns = Arc::clone(&turns);
        async move { Ok::<_, lambda_runtime::Error>(handler::handle(&turns, event.payload).await) }
    }))
    .await
}
