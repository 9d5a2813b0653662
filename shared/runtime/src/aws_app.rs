//! The system assembled on AWS, once per Lambda cold start: DynamoDB sessions, inbox, node
//! registry and exec jobs; the SQS FIFO turn queue, the timer queue and one exec queue per
//! node; EventBridge Scheduler for timers further away than a queue message can wait; STS
//! for node-queue credentials; S3 for skills, workspaces and transcript blobs.
//!
//! Names come from the environment the template sets (`CLAWLESS_TABLE`,
//! `CLAWLESS_TURN_QUEUE_URL` and `CLAWLESS_SUBAGENT_TURN_QUEUE_URL`, `CLAWLESS_BLOB_BUCKET`,
//! `CLAWLESS_TIMER_QUEUE_URL`, `CLAWLESS_NODE_QUEUE_PREFIX`, `CLAWLESS_NODE_QUEUE_ROLE_ARN`,
//! the Scheduler trio `CLAWLESS_SCHEDULE_GROUP`, `CLAWLESS_SCHEDULER_ROLE_ARN`,
//! `CLAWLESS_TIMER_QUEUE_ARN` (plus the optional `CLAWLESS_TIMER_DLQ_ARN`), and
//! `CLAWLESS_BUCKET` or `CLAWLESS_CONFIG` for the configuration); endpoints and credentials
//! follow the standard AWS environment (`AWS_ENDPOINT_URL`, …), so the same binary runs against
//! an emulator.
//!
//! Secrets (channel secrets, model keys, the admin token) are looked up by name: first among
//! the values fetched from SSM or Secrets Manager (`secrets:` in the config and
//! `CLAWLESS_SECRETS`, see [`crate::secrets`]), then in the environment, which is how local
//! runs and tests pass them. They are fetched at cold start, except the admin token, which
//! only the operator routes use: it is read at the first operator request.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use axum::Router;
use clawless_aws::{
    DynamoBackgroundProcesses, DynamoCronStore, DynamoExecJobs, DynamoInbox, DynamoNodeRegistry,
    DynamoSessionStore, S3MediaLinks, S3ObjectStore, ScheduleTarget, ScheduledTimers, SqsExecQueue,
    SqsTimers, SqsTurnQueue, StsQueueCredentials, SubagentRoutedTurnQueue,
};
use clawless_base::object_store::ObjectStore;
use clawless_channels::media_links::MediaPublisher;
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{SessionStore, TurnQueue};
use clawless_core::timers::Timers;

use crate::aws_env::non_blank_env as env;
use crate::channels::{ChannelSet, ChannelSetup};
use crate::config::{ClawlessConfig, ConfigError, DEFAULT_AGENT_ID, deployment_config};
use crate::cron_routes::cron_admin_router;
use crate::cron_service::{CronDeps, CronService};
use crate::ingress::{Ingress, webhook_router};
use crate::node_routes::{
    AdminToken, QueueAccess, RegistryNodeAuth, admin_router, nodes_router, queue_credentials_router,
};
use crate::nodes_service::{BackgroundSettings, NodesDeps, NodesService};
use crate::secrets::{
    SECRETS_ENV, SecretClients, SecretOnDemand, SecretSource, SecretValues, fetch_secrets,
    merge_sources, parse_env_sources, take_entries,
};
use crate::skills_service::SkillsService;
use crate::sources::StoreFactory;
use crate::turn_service::{
    HeartbeatTimers, HostFacts, TurnDeps, TurnService, YIELD_MARGIN, YieldPolicy,
};
use clawless_base::clock::{Clock, SystemClock};

/// Table of sessions and inbox claims.
pub const TABLE_ENV: &str = "CLAWLESS_TABLE";
/// URL of the FIFO turn queue.
pub const TURN_QUEUE_ENV: &str = "CLAWLESS_TURN_QUEUE_URL";
/// URL of the FIFO turn queue of sub-agent sessions, which the turn function consumes with a
/// capped concurrency (the template's `SubagentMaxConcurrent`). Unset (older deployments):
/// sub-agent sessions share the turn queue, uncapped.
pub const SUBAGENT_TURN_QUEUE_ENV: &str = "CLAWLESS_SUBAGENT_TURN_QUEUE_URL";
/// Bucket of offloaded transcript content.
pub const BLOB_BUCKET_ENV: &str = "CLAWLESS_BLOB_BUCKET";
/// URL of the standard timer queue (job deadlines, approval timeouts).
pub const TIMER_QUEUE_ENV: &str = "CLAWLESS_TIMER_QUEUE_URL";
/// The EventBridge Scheduler group timers due beyond the SQS delay limit are scheduled in.
/// With [`SCHEDULER_ROLE_ENV`] and [`TIMER_QUEUE_ARN_ENV`] it turns Scheduler on; without
/// all three, every timer chains on the timer queue (older deployments).
pub const SCHEDULE_GROUP_ENV: &str = "CLAWLESS_SCHEDULE_GROUP";
/// The role Scheduler assumes to send a fired timer to the timer queue.
pub const SCHEDULER_ROLE_ENV: &str = "CLAWLESS_SCHEDULER_ROLE_ARN";
/// ARN of the timer queue (the schedules' target).
pub const TIMER_QUEUE_ARN_ENV: &str = "CLAWLESS_TIMER_QUEUE_ARN";
/// ARN of the timer queue's dead-letter queue, where Scheduler puts a firing it could not
/// deliver for 24 hours (optional).
pub const TIMER_DLQ_ARN_ENV: &str = "CLAWLESS_TIMER_DLQ_ARN";
/// Prefix of the per-node exec queues' names (`<prefix>node-<node id>`).
pub const NODE_QUEUE_PREFIX_ENV: &str = "CLAWLESS_NODE_QUEUE_PREFIX";
/// The role the `nodes` function assumes to vend node-queue credentials.
pub const NODE_QUEUE_ROLE_ENV: &str = "CLAWLESS_NODE_QUEUE_ROLE_ARN";
/// Name of the bearer token of the operator routes (`/nodes/admin/*`, `/cron/admin/call`): a
/// secret (read at the first operator request), else the environment; unset disables the
/// routes.
pub const ADMIN_TOKEN_ENV: &str = "CLAWLESS_ADMIN_TOKEN";
/// Secrets read when first needed, not at cold start: the admin token, which only the
/// operator routes use (see [`AdminToken::on_demand`]).
const READ_ON_DEMAND: [&str; 1] = [ADMIN_TOKEN_ENV];
/// Where generic-channel replies go when the config does not say.
pub const GENERIC_REPLY_URL_ENV: &str = "CLAWLESS_GENERIC_REPLY_URL";

/// Discord's `mediaMaxMb` on AWS when the config names none (100 elsewhere). The webhook
/// function holds a file whole in its 256 MB of memory and must answer Discord within 3
/// seconds, so a 100 MB upload could end the function rather than be skipped with a note;
/// 25 MB covers every upload of a Discord account without Nitro (10 MB).
pub const DEPLOYED_DISCORD_MEDIA_MAX_MB: u64 = 25;

/// `config` with the media limits that fit the webhook function: Discord's
/// [`DEPLOYED_DISCORD_MEDIA_MAX_MB`] unless `mediaMaxMb` is set.
fn with_deployed_media_defaults(config: &ClawlessConfig) -> std::borrow::Cow<'_, ClawlessConfig> {
    match &config.channels.discord {
        Some(discord) if discord.media_max_mb.is_none() => {
            let mut deployed = config.clone();
            if let Some(discord) = &mut deployed.channels.discord {
                discord.media_max_mb = Some(DEPLOYED_DISCORD_MEDIA_MAX_MB);
            }
            std::borrow::Cow::Owned(deployed)
        }
        _ => std::borrow::Cow::Borrowed(config),
    }
}

/// Where long timers' schedules go, from the variables `lookup` reads: `None` without any of
/// [`SCHEDULE_GROUP_ENV`], [`SCHEDULER_ROLE_ENV`] and [`TIMER_QUEUE_ARN_ENV`] (timers chain
/// on the queue alone), an error naming the missing ones with only some of them.
fn schedule_target(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<ScheduleTarget>, AwsAppError> {
    let names = [SCHEDULE_GROUP_ENV, SCHEDULER_ROLE_ENV, TIMER_QUEUE_ARN_ENV];
    match names.map(&lookup) {
        [Some(group_name), Some(role_arn), Some(queue_arn)] => Ok(Some(ScheduleTarget {
            group_name,
            queue_arn,
            role_arn,
            dead_letter_arn: lookup(TIMER_DLQ_ARN_ENV),
        })),
        [None, None, None] => Ok(None),
        partial => {
            let missing: Vec<&str> = names
                .iter()
                .zip(&partial)
                .filter(|(_, value)| value.is_none())
                .map(|(name, _)| *name)
                .collect();
            Err(AwsAppError::Setup(format!(
                "EventBridge Scheduler for timers needs {}; {} not set",
                names.join(", "),
                missing.join(", ")
            )))
        }
    }
}

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

fn required(name: &'static str) -> Result<String, AwsAppError> {
    env(name).ok_or(AwsAppError::MissingEnv(name))
}

/// The clients a function calls besides DynamoDB and SQS (which every function calls). When
/// the cold start reads secrets, it builds these while it waits for the answer, instead of
/// after; without secrets to read, they are built when first used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientsUsed {
    /// S3 (skills, transcript blobs).
    pub s3: bool,
    /// STS (node-queue credentials).
    pub sts: bool,
    /// HTTPS to chat platforms or model APIs (the shared TLS configuration of
    /// `clawless-http` is built in the wait).
    pub https: bool,
}

/// A few turns of the runtime's scheduler, so a read in flight moves along before the next
/// client build holds the thread for a few tenths of a millisecond. On a plain connection a
/// request needs three to be written (connect, handshake with the connection's task, write);
/// on TLS the handshake's round trips leave room for the builds in any case.
async fn let_reads_progress() {
    for _ in 0..4 {
        tokio::task::yield_now().await;
    }
}

/// The AWS configuration and clients of one function instance. DynamoDB and SQS, which every
/// function uses, are built once per cold start; the clients only some functions use (S3,
/// STS, the secret stores) are built when first needed, or while the cold start waits on its
/// secrets for those [`ClientsUsed`] names, so a cold start builds no client its function
/// never calls.
pub struct AwsApp {
    config: ClawlessConfig,
    sdk: aws_config::SdkConfig,
    /// S3 stores, over one S3 client built when first needed.
    stores: Arc<StoreFactory>,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    sts: OnceLock<aws_sdk_sts::Client>,
    /// EventBridge Scheduler, built at the first timer that needs it (a long one, or a
    /// cancel), never at cold start: most invocations set no such timer.
    scheduler: Arc<OnceLock<aws_sdk_scheduler::Client>>,
    secrets: SecretValues,
    /// The clients `on_demand` is read with.
    secret_clients: SecretClients,
    /// Where the [`READ_ON_DEMAND`] secrets are, when they are in a store.
    on_demand: BTreeMap<String, SecretSource>,
}

impl std::fmt::Debug for AwsApp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsApp").finish_non_exhaustive()
    }
}

impl AwsApp {
    /// Loads AWS configuration ([`crate::aws_env::function_sdk_loader`]) and
    /// `clawless.yaml` from the environment, and fetches the secrets both name. The ones
    /// [`SECRETS_ENV`] names (all of them in the template, but the admin token, which is read
    /// on demand) are read while the config is, so a cold start waits for the slower of the
    /// two reads, not for both in turn.
    pub async fn from_env() -> Result<Self, AwsAppError> {
        Self::from_env_using(ClientsUsed::default()).await
    }

    /// [`AwsApp::from_env`] for a function that also calls the services `used` names.
    pub async fn from_env_using(used: ClientsUsed) -> Result<Self, AwsAppError> {
        let sdk = crate::aws_env::function_sdk_loader().load().await;
        let mut from_env = match env(SECRETS_ENV) {
            Some(json) => {
                parse_env_sources(&json).map_err(|err| AwsAppError::Setup(err.to_string()))?
            }
            None => Default::default(),
        };
        let stores = {
            let sdk = sdk.clone();
            Arc::new(StoreFactory::new(move || {
                crate::aws_env::s3_client_from(&sdk)
            }))
        };
        let env_on_demand = take_entries(&mut from_env, &READ_ON_DEMAND);
        let env_clients = (!from_env.is_empty()).then(|| SecretClients::new(&sdk));
        let sts = OnceLock::new();
        // Biased: the reads are sent first, and the clients are built while they are
        // answered. Each build (a few tenths of a millisecond) lets the runtime move the
        // reads along first, so they are sent before it and answered between builds.
        let (config, env_values, (dynamodb, sqs)) = tokio::join!(
            biased;
            deployment_config(&stores),
            async {
                match &env_clients {
                    Some(clients) => fetch_secrets(&from_env, clients).await,
                    None => Ok(SecretValues::default()),
                }
            },
            async {
                let_reads_progress().await;
                let dynamodb = aws_sdk_dynamodb::Client::new(&sdk);
                let_reads_progress().await;
                let sqs = aws_sdk_sqs::Client::new(&sdk);
                if env_clients.is_some() {
                    if used.s3 {
                        let_reads_progress().await;
                        stores.s3_client();
                    }
                    if used.sts {
                        let_reads_progress().await;
                        sts.get_or_init(|| aws_sdk_sts::Client::new(&sdk));
                    }
                    if used.https {
                        let_reads_progress().await;
                        clawless_http::prepare_tls();
                    }
                }
                (dynamodb, sqs)
            }
        );
        let config = config?;
        let secret_clients = env_clients.unwrap_or_else(|| SecretClients::new(&sdk));
        let mut file = config.secrets.clone();
        let on_demand = merge_sources(&take_entries(&mut file, &READ_ON_DEMAND), env_on_demand);
        let secrets = if file.is_empty() {
            env_values
        } else if file.keys().any(|name| from_env.contains_key(name)) {
            // The file points a name elsewhere: its entry wins, so fetch the merged entries.
            fetch_secrets(&merge_sources(&file, from_env), &secret_clients).await
        } else {
            match env_values {
                Ok(values) => fetch_secrets(&file, &secret_clients)
                    .await
                    .map(|from_file| values.with(from_file)),
                Err(err) => Err(err),
            }
        }
        .map_err(|err| AwsAppError::Setup(err.to_string()))?;
        if !secrets.is_empty() {
            tracing::info!(?secrets, "secrets fetched");
        }
        Ok(Self {
            config,
            dynamodb,
            sqs,
            sdk,
            stores,
            sts,
            scheduler: Arc::default(),
            secrets,
            secret_clients,
            on_demand,
        })
    }

    /// The STS client, built at its first use unless [`ClientsUsed::sts`] had it built at
    /// cold start.
    fn sts(&self) -> aws_sdk_sts::Client {
        self.sts
            .get_or_init(|| aws_sdk_sts::Client::new(&self.sdk))
            .clone()
    }

    /// The durable timers: on the timer queue alone, or, when the Scheduler variables are
    /// set ([`SCHEDULE_GROUP_ENV`]), with Scheduler for the ones due beyond the queue's
    /// 15-minute delay. Some of those variables without the others is a setup error.
    fn timers(&self) -> Result<Arc<dyn Timers>, AwsAppError> {
        let short = SqsTimers::new(self.sqs.clone(), required(TIMER_QUEUE_ENV)?);
        let Some(target) = schedule_target(env)? else {
            return Ok(Arc::new(short));
        };
        let (sdk, built) = (self.sdk.clone(), Arc::clone(&self.scheduler));
        let scheduler = move || {
            built
                .get_or_init(|| aws_sdk_scheduler::Client::new(&sdk))
                .clone()
        };
        Ok(Arc::new(ScheduledTimers::new(short, scheduler, target)))
    }

    /// A value an `…Env` key names: a fetched secret (`secrets:`), else the environment.
    fn lookup(&self, name: &str) -> Option<String> {
        self.secrets.lookup(name)
    }

    /// Where turn events are sent: sub-agent sessions' to the [`SUBAGENT_TURN_QUEUE_ENV`]
    /// queue and the others' to the [`TURN_QUEUE_ENV`] queue, or all to the latter when the
    /// former is unset.
    fn turn_queue(&self) -> Result<Arc<dyn TurnQueue>, AwsAppError> {
        let sessions = SqsTurnQueue::new(self.sqs.clone(), required(TURN_QUEUE_ENV)?);
        Ok(match env(SUBAGENT_TURN_QUEUE_ENV) {
            Some(url) => Arc::new(SubagentRoutedTurnQueue::new(
                Arc::new(sessions),
                Arc::new(SqsTurnQueue::new(self.sqs.clone(), url)),
            )),
            None => Arc::new(sessions),
        })
    }

    /// The node registry, exec jobs, per-node exec queues and timers; files node hosts upload
    /// with their results go to the blob bucket (`media/outbound/…`) when the function has one.
    pub fn nodes_service(&self) -> Result<NodesService, AwsAppError> {
        let table = required(TABLE_ENV)?;
        let service = NodesService::new(NodesDeps {
            registry: Arc::new(DynamoNodeRegistry::new(self.dynamodb.clone(), &table)),
            jobs: Arc::new(DynamoExecJobs::new(self.dynamodb.clone(), &table)),
            queues: Arc::new(SqsExecQueue::new(
                self.sqs.clone(),
                required(NODE_QUEUE_PREFIX_ENV)?,
            )),
            timers: self.timers()?,
            turns: self.turn_queue()?,
            clock: Arc::new(SystemClock),
            settings: self.config.exec.clone(),
        })
        .with_process_index(Arc::new(DynamoBackgroundProcesses::new(
            self.dynamodb.clone(),
            &table,
        )))
        .with_background_settings(
            BackgroundSettings::from_tools_exec(self.config.tools.policy.exec.as_ref())
                .map_err(AwsAppError::Setup)?,
        );
        Ok(match env(BLOB_BUCKET_ENV) {
            Some(bucket) => service.with_media_store(Arc::new(S3ObjectStore::new(
                self.stores.s3_client(),
                bucket,
            ))),
            None => service,
        })
    }

    /// The `nodes` function's routes: node pairing, heartbeats, results and queue credentials,
    /// plus the operator routes when the [`ADMIN_TOKEN_ENV`] secret is set (`/nodes/admin/*`,
    /// and `/cron/admin/call` when the timer queue is configured).
    pub fn nodes_router(&self, nodes: Arc<NodesService>) -> Result<Router, AwsAppError> {
        let region = self
            .sqs
            .config()
            .region()
            .map(ToString::to_string)
            .ok_or(AwsAppError::MissingEnv("AWS_REGION"))?;
        let access = QueueAccess {
            vendor: Arc::new(StsQueueCredentials::new(
                self.sts(),
                required(NODE_QUEUE_ROLE_ENV)?,
            )),
            region,
            endpoint_url: env("AWS_ENDPOINT_URL_SQS").or_else(|| env("AWS_ENDPOINT_URL")),
        };
        let mut router = nodes_router(Arc::clone(&nodes), false)
            .merge(queue_credentials_router(Arc::clone(&nodes), access));
        let token = match self.on_demand.get(ADMIN_TOKEN_ENV) {
            Some(source) => Some(AdminToken::on_demand(
                SecretOnDemand::new(ADMIN_TOKEN_ENV, source.clone(), self.secret_clients.clone())
                    .map_err(|err| AwsAppError::Setup(err.to_string()))?,
            )),
            None => env(ADMIN_TOKEN_ENV)
                .map(|token| AdminToken::known(ADMIN_TOKEN_ENV, &token))
                .transpose()
                .map_err(|err| AwsAppError::Setup(err.to_string()))?,
        };
        match token {
            Some(token) => {
                router = router.merge(admin_router(nodes, token.clone()));
                // `clawless cron --url`: the jobs' timers need the timer queue.
                if env(TIMER_QUEUE_ENV).is_some() {
                    let cron = Arc::new(self.cron_service()?);
                    router = router.merge(cron_admin_router(cron, token));
                }
            }
            None => tracing::warn!(
                "{ADMIN_TOKEN_ENV} is not set: the operator routes /nodes/admin/* and /cron/admin/call answer 404"
            ),
        }
        Ok(router)
    }

    /// The `skills-bins` function's routes, for paired nodes only.
    pub fn skills_bins_router(&self) -> Result<Router, AwsAppError> {
        let skills = Arc::new(
            SkillsService::new(self.config.clone(), &self.stores)
                .map_err(|err| AwsAppError::Setup(err.to_string()))?,
        );
        let nodes = Arc::new(self.nodes_service()?);
        Ok(crate::routes::skills_bins_router(
            skills,
            Arc::new(RegistryNodeAuth::new(nodes)),
        ))
    }

    /// The deployment's chat channels (inbound and outbound sides).
    pub fn channels(&self) -> Result<ChannelSet, AwsAppError> {
        let http = clawless_http::client_builder()
            .build()
            .map_err(|err| AwsAppError::Setup(err.to_string()))?;
        let lookup = |name: &str| self.lookup(name);
        let config = with_deployed_media_defaults(&self.config);
        Ok(ChannelSet::build(&ChannelSetup {
            config: &config,
            env: &lookup,
            http,
            generic_secret: None,
            generic_reply_url: env(GENERIC_REPLY_URL_ENV),
            generic_owners: Vec::new(),
            sent_chunks: Arc::new(DynamoInbox::new(
                self.dynamodb.clone(),
                required(TABLE_ENV)?,
            )),
        }))
    }

    /// The inbound sides of the channels, storing the files people send in the blob bucket
    /// when the function has one (`media/inbound/…`); without it attachments are skipped.
    fn inbound_channels(
        &self,
    ) -> Result<BTreeMap<String, crate::ingress::ChatChannel>, AwsAppError> {
        let channels = self.channels()?;
        let channels = match env(BLOB_BUCKET_ENV) {
            Some(bucket) => channels.with_blob_store(Arc::new(S3ObjectStore::new(
                self.stores.s3_client(),
                bucket,
            ))),
            None => {
                tracing::warn!("{BLOB_BUCKET_ENV} is not set: inbound attachments are not stored");
                channels
            }
        };
        Ok(channels.inbound)
    }

    /// The `webhook` function's routes.
    pub fn webhook_router(&self) -> Result<Router, AwsAppError> {
        let table = required(TABLE_ENV)?;
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let ingress = Ingress {
            inbox: Arc::new(DynamoInbox::new(self.dynamodb.clone(), table)),
            queue: self.turn_queue()?,
            channels: self.inbound_channels()?,
            agent_id: DEFAULT_AGENT_ID.to_owned(),
            dm_scope: self.config.session.dm_scope,
            clock,
        };
        Ok(webhook_router(Arc::new(ingress)))
    }

    /// The `turn` function's service. `exec` runs on node hosts when the timer queue and the
    /// node-queue prefix are configured; without them the tool is not offered.
    pub async fn turn_service(&self) -> Result<TurnService, AwsAppError> {
        let nodes = if env(TIMER_QUEUE_ENV).is_some() && env(NODE_QUEUE_PREFIX_ENV).is_some() {
            Some(Arc::new(self.nodes_service()?))
        } else {
            tracing::warn!(
                "{TIMER_QUEUE_ENV} or {NODE_QUEUE_PREFIX_ENV} is not set: exec on node hosts is off"
            );
            None
        };
        let table = required(TABLE_ENV)?;
        let blob_bucket = required(BLOB_BUCKET_ENV)?;
        let blobs: Arc<dyn ObjectStore> = Arc::new(S3ObjectStore::new(
            self.stores.s3_client(),
            blob_bucket.clone(),
        ));
        let dynamo = Arc::new(DynamoSessionStore::new(self.dynamodb.clone(), table));
        let inner: Arc<dyn SessionStore> = dynamo.clone();
        let sessions: Arc<dyn SessionStore> = Arc::new(OffloadingSessionStore::new(
            inner,
            Arc::clone(&blobs),
            "sessions/",
        ));
        let skills = Arc::new(
            SkillsService::new(self.config.clone(), &self.stores)
                .map_err(|err| AwsAppError::Setup(err.to_string()))?,
        );
        // A Bedrock model reuses the configuration loaded at cold start.
        let build = clawless_llm::ModelBuild::default();
        #[cfg(feature = "bedrock")]
        let build = build.with_aws_config(self.sdk.clone());
        let model =
            clawless_llm::build_model_from(&self.config.models, &|name| self.lookup(name), &build)
                .map_err(|err| AwsAppError::Setup(format!("models: {err}")))?;
        // A model a session chooses (`/new <model>`) is built at its first use, not here.
        let secrets = self.secrets.clone();
        let model_factory = clawless_llm::model_factory(
            self.config.models.clone(),
            move |name: &str| secrets.lookup(name),
            build,
        );
        // The generic channel's reply files go out as presigned links into the blob bucket.
        let outbox = self
            .channels()?
            .with_reply_links(MediaPublisher::new(
                Arc::clone(&blobs),
                Arc::new(S3MediaLinks::new(self.stores.s3_client(), blob_bucket)),
            ))
            .outbox;
        let turn_queue = self.turn_queue()?;
        // Stop before a model call that might outlast the invocation (see `template.yaml`).
        let yield_policy = YieldPolicy {
            threshold: self.config.models.worst_case_call() + YIELD_MARGIN,
            queue: Arc::clone(&turn_queue),
        };
        let turns = TurnService::new(TurnDeps {
            skills,
            stores: Arc::clone(&self.stores),
            sessions,
            model,
            outbox: Arc::new(outbox),
            web: crate::web_fetcher::default_web_fetcher(),
            clock: Arc::new(SystemClock),
            eligibility: clawless_skills::eligibility::EligibilityContext {
                platforms: ["linux".to_owned()].into_iter().collect(),
                ..clawless_skills::eligibility::EligibilityContext::empty()
            },
            home_dirs: Vec::new(),
            host: HostFacts {
                host: Some("aws-lambda".to_owned()),
                os: Some("linux".to_owned()),
                arch: Some(std::env::consts::ARCH.to_owned()),
            },
            nodes,
        })
        .with_subagents(turn_queue)
        // `sessions_list` under `tools.sessions.visibility: agent|all` scans the table.
        .with_session_lister(dynamo)
        .with_blobs(blobs)
        .with_yield(yield_policy)
        .with_model_factory(model_factory)
        .with_secrets(self.secrets.clone());
        // Heartbeats are armed by the events of each agent's main session (see
        // `turn_service::heartbeat`); without a timer queue there are none, nor cron jobs.
        let turns = match env(TIMER_QUEUE_ENV) {
            Some(_) => {
                let timers = self.timers()?;
                turns
                    .with_heartbeats(HeartbeatTimers {
                        timers: Arc::clone(&timers),
                        seed: required(TABLE_ENV)?,
                    })
                    .with_cron(Arc::new(self.cron_service_on(Arc::clone(&timers))?))
                    .with_subagent_timers(timers)
            }
            None => turns,
        };
        Ok(turns)
    }

    /// The cron jobs (in the session table) and their timers: the timer queue, and
    /// EventBridge Scheduler for firings due beyond 15 minutes.
    pub fn cron_service(&self) -> Result<CronService, AwsAppError> {
        self.cron_service_on(self.timers()?)
    }

    /// [`AwsApp::cron_service`] over timers the caller already built.
    fn cron_service_on(&self, timers: Arc<dyn Timers>) -> Result<CronService, AwsAppError> {
        let table = required(TABLE_ENV)?;
        Ok(CronService::new(CronDeps {
            store: Arc::new(DynamoCronStore::new(self.dynamodb.clone(), &table)),
            timers,
            queue: self.turn_queue()?,
            clock: Arc::new(SystemClock),
            config: Arc::new(self.config.clone()),
            store_label: Some(format!("dynamodb:{table}")),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        }
    }

    #[test]
    fn discord_downloads_are_capped_to_what_the_webhook_function_holds_unless_configured() {
        let discord = |extra: &str| {
            let yaml = format!(
                "channels:\n  discord: {{applicationId: \"1234\", publicKey: \"{}\"{extra}}}\n",
                "ab".repeat(32)
            );
            ClawlessConfig::from_yaml(&yaml, "t.yaml").expect("config")
        };
        let unset = discord("");
        let deployed = with_deployed_media_defaults(&unset);
        let media_max_mb = |config: &ClawlessConfig| {
            config
                .channels
                .discord
                .as_ref()
                .and_then(|discord| discord.media_max_mb)
        };
        assert_eq!(media_max_mb(&deployed), Some(DEPLOYED_DISCORD_MEDIA_MAX_MB));
        let chosen = discord(", mediaMaxMb: 80");
        assert_eq!(
            media_max_mb(&with_deployed_media_defaults(&chosen)),
            Some(80)
        );
        let none = ClawlessConfig::from_yaml("channels: {}\n", "t.yaml").expect("config");
        assert!(matches!(
            with_deployed_media_defaults(&none),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn without_the_scheduler_variables_timers_stay_on_the_queue() {
        assert!(schedule_target(lookup(&[])).unwrap().is_none());
        assert!(
            schedule_target(lookup(&[(TIMER_DLQ_ARN_ENV, "arn:dlq")]))
                .unwrap()
                .is_none(),
            "the dead-letter queue alone turns nothing on"
        );
    }

    #[test]
    fn with_all_three_long_timers_go_to_scheduler() {
        let vars = [
            (SCHEDULE_GROUP_ENV, "stack-timers"),
            (
                SCHEDULER_ROLE_ENV,
                "arn:aws:iam::123456789012:role/scheduler",
            ),
            (
                TIMER_QUEUE_ARN_ENV,
                "arn:aws:sqs:us-east-1:123456789012:timers",
            ),
        ];
        let target = schedule_target(lookup(&vars)).unwrap().unwrap();
        assert_eq!(
            target,
            ScheduleTarget {
                group_name: "stack-timers".into(),
                queue_arn: "arn:aws:sqs:us-east-1:123456789012:timers".into(),
                role_arn: "arn:aws:iam::123456789012:role/scheduler".into(),
                dead_letter_arn: None,
            }
        );
        let with_dlq = [vars.as_slice(), &[(TIMER_DLQ_ARN_ENV, "arn:dlq")]].concat();
        let target = schedule_target(lookup(&with_dlq)).unwrap().unwrap();
        assert_eq!(target.dead_letter_arn.as_deref(), Some("arn:dlq"));
    }

    #[test]
    fn some_of_the_scheduler_variables_without_the_others_fail_the_cold_start() {
        let err = schedule_target(lookup(&[(SCHEDULE_GROUP_ENV, "stack-timers")])).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(SCHEDULER_ROLE_ENV) && message.contains(TIMER_QUEUE_ARN_ENV),
            "{message}"
        );
        assert!(
            message.ends_with(&format!(
                "{SCHEDULER_ROLE_ENV}, {TIMER_QUEUE_ARN_ENV} not set"
            )),
            "{message}"
        );
    }
}
