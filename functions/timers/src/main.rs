//! `timers`: the timer queue's consumer. Job deadlines and approval timeouts wait on an SQS
//! standard queue as delayed messages (at most 15 minutes each, chained), so no function runs
//! while they wait; each delivery either resumes its turn or waits again. Wiring only; runs
//! once per cold start.

mod handler;

use std::sync::Arc;

use clawless_runtime::aws_app::AwsApp;
use lambda_runtime::{LambdaEvent, service_fn};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_runtime::Error> {
    lambda_runtime::tracing::init_default_subscriber();
    let app = AwsApp::from_env().await?;
    let nodes = Arc::new(app.nodes_service()?);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        let nodes = Arc::clone(&nodes);
        async move { Ok::<_, lambda_runtime::Error>(handler::handle(&nodes, event.payload).await) }
    }))
    .await
}
