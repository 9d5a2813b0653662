//! `skills-bins`: answers paired node hosts' `GET /skills/bins` with the binaries every
//! agent's skills declare; a request without a valid node token gets 401. Wiring only; runs
//! once per cold start.

use clawless_runtime::aws_app::AwsApp;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), lambda_http::Error> {
    lambda_http::tracing::init_default_subscriber();
    // Bad configuration fails the cold start, not a request.
    let app = AwsApp::from_env().await?;
    lambda_http::run(app.skills_bins_router()?).await
}
