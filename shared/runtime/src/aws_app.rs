//! The system assembled on AWS, once per Lambda cold start: DynamoDB sessions and inbox,
//! the SQS FIFO turn queue, S3 for skills, workspaces and transcript blobs.
//!
//! Names come from the environment the template sets (`CLAWLESS_TABLE`,
//! `CLAWLESS_TURN_QUEUE_URL`, `CLAWLESS_BLOB_BUCKET`, plus `CLAWLESS_BUCKET` or
//! `CLAWLESS_CONFIG` for the configuration); endpoints and credentials follow the standard
//! AWS environment (`AWS_ENDPOINT_URL`, …), so the same binary runs against an emulator.

use std::sync::Arc;

use axum::Router;
use clawless_aws::{DynamoInbox, DynamoSessionStore, S3ObjectStore, SqsTurnQueue};
use clawless_channels::{ChannelOutbox, HttpReplySender};
use clawless_core::object_store::ObjectStore;
use clawless_core::session::SessionStore;
use clawless_core::session::offload::OffloadingSessionStore;

use crate::clock::{Clock, SystemClock};
use crate::config::{
    ClawlessConfig, ConfigError, DEFAULT_AGENT_ID, GENERIC_SECRET_ENV, deployment_config,
};
use crate::ingress::{GenericChannel, Ingress, webhook_router};
use crate::skills_service::SkillsService;
use crate::sources::StoreFactory;
use crate::turn_service::{HostFacts, TurnDeps, TurnService};

/// Table of sessions and inbox claims.
pub const TABLE_ENV: &str = "CLAWLESS_TABLE";
/// URL of the FIFO turn queue.
pub const TURN_QUEUE_ENV: &str = "CLAWLESS_TURN_QUEUE_URL";
/// Bucket of offloaded transcript content.
pub const BLOB_BUCKET_ENV: &str = "CLAWLESS_BLOB_BUCKET";
/// Where generic-channel replies go when the config does not say.
pub const GENERIC_REPLY_URL_ENV: &str = "CLAWLESS_GENERIC_REPLY_URL";

/// Why the app could not be assembled (fails the cold start).
#[derive(Debug, thiserror::Error)]
pub enum AwsAppError {
    /// Configuration is missing or invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A required environment variable is missing.
    #[error("environment variable {0} is not set")]
    MissingEnv(&'static str),
    /// Something else is wrong.
    #[error("{0}")]
    Setup(String),
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .filter(|value| !value.trim().is_empty())
}

fn required(name: &'static str) -> Result<String, AwsAppError> {
    env(name).ok_or(AwsAppError::MissingEnv(name))
}

/// The AWS clients and configuration of one function instance.
pub struct AwsApp {
    config: ClawlessConfig,
    stores: Arc<StoreFactory>,
    s3: aws_sdk_s3::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
}

impl std::fmt::Debug for AwsApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsApp").finish_non_exhaustive()
    }
}

impl AwsApp {
    /// Loads AWS configuration and `clawless.yaml` from the environment.
    pub async fn from_env() -> Result<Self, AwsAppError> {
        let shared = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        let s3 = crate::aws_env::s3_client_from_env().await;
        Self::with_clients(
            s3,
            aws_sdk_dynamodb::Client::new(&shared),
            aws_sdk_sqs::Client::new(&shared),
        )
        .await
    }

    /// Builds the app over given clients (tests count their requests).
    pub async fn with_clients(
        s3: aws_sdk_s3::Client,
        dynamodb: aws_sdk_dynamodb::Client,
        sqs: aws_sdk_sqs::Client,
    ) -> Result<Self, AwsAppError> {
        let stores = Arc::new(StoreFactory::with_s3_client(s3.clone()));
        let config = deployment_config(&stores).await?;
        Ok(Self {
            config,
            stores,
            s3,
            dynamodb,
            sqs,
        })
    }

    fn generic_secret(&self) -> Option<String> {
        match &self.config.channels.generic {
            Some(generic) => generic.resolve_secret(&env),
            None => env(GENERIC_SECRET_ENV),
        }
    }

    /// The `webhook` function's routes.
    pub fn webhook_router(&self) -> Result<Router, AwsAppError> {
        let table = required(TABLE_ENV)?;
        let queue_url = required(TURN_QUEUE_ENV)?;
        let generic = self.generic_secret().map(|secret| GenericChannel {
            secret: Arc::from(secret.as_bytes()),
            owners: self
                .config
                .channels
                .generic
                .as_ref()
                .map(|generic| generic.owners.clone())
                .unwrap_or_default(),
        });
        if generic.is_none() {
            tracing::warn!("no generic channel secret configured: /webhook/generic answers 404");
        }
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ingress = Ingress {
            inbox: Arc::new(DynamoInbox::new(self.dynamodb.clone(), table)),
            queue: Arc::new(SqsTurnQueue::new(self.sqs.clone(), queue_url)),
            generic,
            agent_id: DEFAULT_AGENT_ID.to_owned(),
            dm_scope: self.config.session.dm_scope,
            clock,
        };
        Ok(webhook_router(Arc::new(ingress)))
    }

    /// The `turn` function's service.
    pub async fn turn_service(&self) -> Result<TurnService, AwsAppError> {
        let table = required(TABLE_ENV)?;
        let blob_bucket = required(BLOB_BUCKET_ENV)?;
        let blobs: Arc<dyn ObjectStore> =
            Arc::new(S3ObjectStore::new(self.s3.clone(), blob_bucket));
        let inner: Arc<dyn SessionStore> =
            Arc::new(DynamoSessionStore::new(self.dynamodb.clone(), table));
        let sessions: Arc<dyn SessionStore> =
            Arc::new(OffloadingSessionStore::new(inner, blobs, "sessions/"));
        let skills = Arc::new(
            SkillsService::new(self.config.clone(), &self.stores)
                .map_err(|err| AwsAppError::Setup(err.to_string()))?,
        );
        let model = clawless_llm::build_model(&self.config.models, &env)
            .map_err(|err| AwsAppError::Setup(format!("models: {err}")))?;
        let mut outbox = ChannelOutbox::new();
        let reply_url = self
            .config
            .channels
            .generic
            .as_ref()
            .and_then(|generic| generic.reply_url.clone())
            .or_else(|| env(GENERIC_REPLY_URL_ENV));
        if let (Some(secret), Some(reply_url)) = (self.generic_secret(), reply_url) {
            let client = reqwest::Client::builder()
                .build()
                .map_err(|err| AwsAppError::Setup(err.to_string()))?;
            outbox = outbox.with_channel(
                clawless_channels::generic::CHANNEL_ID,
                Arc::new(HttpReplySender::new(client, reply_url, secret.as_bytes())),
            );
        }
        Ok(TurnService::new(TurnDeps {
            skills,
            stores: Arc::clone(&self.stores),
            sessions,
            model,
            outbox: Arc::new(outbox),
            web: web_fetcher(),
            clock: Arc::new(SystemClock),
            eligibility: clawless_core::skills::eligibility::EligibilityContext {
                platforms: ["linux".to_owned()].into_iter().collect(),
                ..clawless_core::skills::eligibility::EligibilityContext::empty()
            },
            home_dirs: Vec::new(),
            host: HostFacts {
                host: Some("aws-lambda".to_owned()),
                os: Some("linux".to_owned()),
                arch: Some(std::env::consts::ARCH.to_owned()),
            },
            nodes: None,
        }))
    }
}

/// The `web_fetch` backend, or none (the tool is then not offered) if it cannot be built.
fn web_fetcher() -> Option<Arc<dyn clawless_core::tools::WebFetcher>> {
    match crate::web_fetcher::HttpWebFetcher::new() {
        Ok(fetcher) => Some(Arc::new(fetcher)),
        Err(err) => {
            tracing::warn!(error = %err, "web_fetch disabled");
            None
        }
    }
}
