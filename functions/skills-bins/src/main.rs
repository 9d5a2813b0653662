//! `skills-bins`: answers node hosts' `GET /skills/bins` with the binaries every agent's
//! skills declare. Wiring only; runs once per cold start.

mod handler;

use std::sync::Arc;

use clawless_runtime::config::deployment_config;
use clawless_runtime::{SkillsService, StoreFactory};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    lambda_http::tracing::init_default_subscriber();
    let stores =
        StoreFactory::with_s3_client(clawless_runtime::aws_env::s3_client_from_env().await);
    // Bad configuration fails the cold start, not a request.
    let config = deployment_config(&stores).await?;
    let skills = Arc::new(SkillsService::new(config, &stores)?);
    lambda_http::run(handler::router(skills)).await
}
