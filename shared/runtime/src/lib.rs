//! Wiring shared by the Lambda functions and the CLI: `clawless.yaml` loading, turning
//! source URIs into object stores, the eligibility context of this machine, the skills
//! service, HTTP routes and their error mapping, and tracing.
//!
//! Business rules live in `clawless-core`; this crate only assembles adapters around them.
//!
//! Features keep each binary lean: `local` (SQLite, `clawless local`) is for the CLI only,
//! so no Lambda function links SQLite; `bedrock` adds the Bedrock model client; `schema`
//! (the JSON Schema of `clawless.yaml`) is for the CLI only too.

pub mod aws_app;
pub mod aws_env;
pub mod channels;
pub mod config;
#[cfg(feature = "schema")]
pub mod config_schema;
pub mod cron_routes;
pub mod cron_service;
pub mod exec_media;
pub mod ingress;
pub mod listed_store;
#[cfg(feature = "local")]
pub mod local_machine;
#[cfg(feature = "local")]
pub mod local_media;
#[cfg(feature = "local")]
pub mod local_mode;
#[cfg(feature = "local")]
pub mod local_replies;
pub mod media;
mod media_input;
pub mod node_routes;
pub mod nodes_service;
pub mod routes;
pub mod secrets;
pub mod skills_service;
pub mod sources;
pub mod telemetry;
pub mod tools_section;
pub mod turn_service;
pub mod turn_worker;
pub mod web_fetcher;

pub use config::{ClawlessConfig, ConfigError};
pub use skills_service::SkillsService;
pub use sources::{SourceUri, StoreFactory};
