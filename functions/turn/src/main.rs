//! `turn`: the SQS FIFO consumer. Each record is one event of one session; the turn service
//! advances the session as far as it can and returns. Wiring only; runs once per cold start.

mod handler;

use std::sync::Arc;

use clawless_runtime::aws_app::{AwsApp, ClientsUsed};
use clawless_runtime::turn_service::Deadline;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let app = AwsApp::from_env_using(ClientsUsed {
        s3: true,
        https: true,
        ..ClientsUsed::default()
    })
    .await?;
    let turns = Arc::new(app.turn_service().await?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        let turns = Arc::clone(&turns);
        // The function's timeout, as the time by which this invocation must have returned.
        // A deadline already past is an emulator's placeholder (`cargo lambda watch` sends
        // one), never a real invocation's: then the turn runs without one.
        let deadline = Some(event.context.deadline)
            .filter(|at_ms| *at_ms > clawless_base::clock::system_now_ms())
            .map(Deadline::at_ms);
        async move {
            Ok::<_, lambda_runtime::Error>(
                handler::handle(&turns, event.payload, deadline.as_ref()).await,
            )
        }
    }))
    .await
}
