//! Tracing set-up for command-line processes (Lambda functions use the runtime's own).

use tracing_subscriber::EnvFilter;

/// Logs to stderr, `warn` and above unless `RUST_LOG` says otherwise.
pub fn init_cli_tracing() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    // A second initialisation (tests) keeps the first subscriber, which is what we want.
    if tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init()
        .is_err()
    {
        tracing::debug!("tracing was already initialised");
    }
}
