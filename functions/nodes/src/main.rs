//! `nodes`: the HTTP API of node hosts (`POST /nodes/pair`, `/nodes/heartbeat`,
//! `/nodes/results`, `/nodes/credentials`) and of their operator (`/nodes/admin/*` and
//! `POST /cron/admin/call`, behind `CLAWLESS_ADMIN_TOKEN`). A result is recorded with a conditional write (the first wins)
//! and resumes its turn through the turn queue. Wiring only; runs once per cold start.

use std::sync::Arc;

use clawless_runtime::aws_app::{AwsApp, ClientsUsed};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    lambda_http::tracing::init_default_subscriber();
    // Bad configuration fails the cold start, not a request.
    let app = AwsApp::from_env_using(ClientsUsed {
        sts: true,
        ..ClientsUsed::default()
    })
    .await?;
    let nodes = Arc::new(app.nodes_service()?);
    lambda_http::run(app.nodes_router(nodes)?).await
}
