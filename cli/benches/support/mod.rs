//! What the turn benchmarks (`turn`, `long_session`) share: the turn service assembled over
//! the embedded adapters (SQLite sessions offloading to a blob directory, skills and workspace
//! in directories) or over moto (DynamoDB, S3 and SQS through the real AWS SDK, every request
//! recorded by an interceptor), an outbox that only counts replies, and inbound messages.
//!
//! The model is the caller's: each bench brings its own in-process [`ModelProvider`].

#![allow(dead_code, reason = "each bench uses its own part of this module")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use clawless_aws::{DynamoSessionStore, S3ObjectStore};
use clawless_base::clock::SystemClock;
use clawless_base::model::ModelProvider;
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_base::session_key::{ChatType, DmScope};
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_local::DirObjectStore;
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::turn_service::{HostFacts, TurnDeps};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use clawless_skills::eligibility::EligibilityContext;

/// The agent every turn goes to.
pub(crate) const AGENT: &str = "main";

const AGENTS_MD: &str = "# AGENTS.md\n\nYou are a helpful assistant. Keep answers short. \
    Read MEMORY.md before answering questions about the past.\n";
const SOUL_MD: &str = "# SOUL.md\n\nCalm, precise, a little dry.\n";

/// Takes replies without a network hop; only counts them.
#[derive(Debug, Default)]
pub(crate) struct CountingOutbox {
    sent: AtomicUsize,
}

impl CountingOutbox {
    /// Replies taken so far.
    pub(crate) fn sent(&self) -> usize {
        self.sent.load(Ordering::Relaxed)
    }
}

#[async_trait]
impl Outbox for CountingOutbox {
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        std::hint::black_box(reply);
        self.sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Records the operation of every HTTP request sent by the SDK clients it is attached to
/// (each attempt, so retries show up too).
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestLog {
    sent: Arc<Mutex<Vec<(String, String)>>>,
}

impl RequestLog {
    /// The requests recorded since the last call, as `(service, operation)`.
    pub(crate) fn take(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.sent.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Intercept for RequestLog {
    fn name(&self) -> &'static str {
        "clawless-bench::RequestLog"
    }

    fn read_before_transmit(
        &self, _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents, cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let (service, operation) = cfg.load::<Metadata>().map_or_else(
            || ("?".to_owned(), "?".to_owned()),
            |meta| (meta.service().to_owned(), meta.name().to_owned()),
        );
        self.sent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((service, operation));
        Ok(())
    }
}

/// Requests of one turn (or one ingress call, or several turns together), by service and
/// operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Requests(BTreeMap<(String, String), usize>);

impl Requests {
    pub(crate) fn from_log(log: &[(String, String)]) -> Self {
        let mut counts = Self::default();
        for (service, operation) in log {
            *counts
                .0
                .entry((service_label(service).to_owned(), operation.clone()))
                .or_insert(0) += 1;
        }
        counts
    }

    /// Adds `other`'s counts to these.
    pub(crate) fn add(&mut self, other: &Self) {
        for (operation, count) in &other.0 {
            *self.0.entry(operation.clone()).or_insert(0) += count;
        }
    }

    pub(crate) fn total(&self) -> usize {
        self.0.values().sum()
    }

    fn of(&self, service: &str) -> usize {
        self.0
            .iter()
            .filter(|((s, _), _)| s == service)
            .map(|(_, n)| n)
            .sum()
    }

    /// `DynamoDB 2 (Query, TransactWriteItems) · S3 1 (ListObjectsV2) · SQS 0 · total 3`.
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        for service in ["DynamoDB", "S3", "SQS"] {
            let operations: Vec<String> = self
                .0
                .iter()
                .filter(|((s, _), _)| s == service)
                .map(|((_, op), n)| {
                    if *n == 1 {
                        op.clone()
                    } else {
                        format!("{op} ×{n}")
                    }
                })
                .collect();
            if operations.is_empty() {
                parts.push(format!("{service} 0"));
            } else {
                parts.push(format!(
                    "{service} {} ({})",
                    self.of(service),
                    operations.join(", ")
                ));
            }
        }
        let others = self.total()
            - ["DynamoDB", "S3", "SQS"]
                .map(|s| self.of(s))
                .iter()
                .sum::<usize>();
        if others > 0 {
            parts.push(format!("other {others}"));
        }
        format!("{} · total {}", parts.join(" · "), self.total())
    }
}

fn service_label(service: &str) -> &str {
    match service.to_ascii_lowercase().as_str() {
        "dynamodb" => "DynamoDB",
        "s3" => "S3",
        "sqs" => "SQS",
        _ => service,
    }
}

pub(crate) fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// One direct message from `chat` with `text`; `n` makes its message id unique in the chat.
/// Each chat has its own session.
pub(crate) fn inbound(chat: &str, n: usize, text: &str) -> SessionEvent {
    let key = SessionKey::for_chat(AGENT, "generic", ChatType::Direct, chat, DmScope::PerPeer);
    SessionEvent {
        session_key: key.to_string(),
        agent_id: AGENT.to_owned(),
        event: TurnEvent::Inbound(InboundMessage {
            message_id: format!("{chat}-m{n}"),
            chat: ChatRef {
                channel: "generic".to_owned(),
                chat_id: chat.to_owned(),
                chat_type: ChatType::Direct,
            },
            sender_id: "u-bench".to_owned(),
            text: text.to_owned(),
            sender_is_owner: true,
            attachments: Vec::new(),
        }),
    }
}

fn generated_skill(index: usize) -> String {
    format!(
        "---\nname: generated-{index:02}\ndescription: Generated skill number {index}; it does one small task and says when to use it.\n---\n\n\
         # Generated skill {index}\n\n{}\n",
        "Step by step instructions. ".repeat(40)
    )
}

/// The repository's bundled skills (`skills/` next to this crate).
pub(crate) fn bundled_skills_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the cli crate sits in the workspace")
        .join("skills")
}

/// Every file below `root`, as `(relative path with '/', bytes)`.
pub(crate) fn files_below(root: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("read skills dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(root).expect("below root");
                let key = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                files.push((key, std::fs::read(&path).expect("read skill file")));
            }
        }
    }
    files.sort();
    files
}

fn eligibility() -> EligibilityContext {
    EligibilityContext {
        platforms: ["linux".to_owned()].into_iter().collect(),
        ..EligibilityContext::empty()
    }
}

/// What a turn service is assembled from, besides its model and outbox.
pub(crate) struct Stack {
    pub(crate) config: ClawlessConfig,
    pub(crate) stores: Arc<StoreFactory>,
    /// Sessions, already offloading large documents to the blob store.
    pub(crate) sessions: Arc<dyn SessionStore>,
    /// The host name on the system prompt's runtime line.
    pub(crate) host: &'static str,
}

/// The ports of a turn service over `stack`, answering with `model` into `outbox`.
pub(crate) fn turn_deps(
    stack: Stack, model: Arc<dyn ModelProvider>, outbox: Arc<dyn Outbox>,
) -> TurnDeps {
    let skills = Arc::new(SkillsService::new(stack.config, &stack.stores).expect("skills service"));
    TurnDeps {
        skills,
        stores: stack.stores,
        sessions: stack.sessions,
        model,
        outbox,
        // As deployed: `web_fetch` is offered (the benches' models never call it).
        web: clawless_runtime::web_fetcher::HttpWebFetcher::new()
            .ok()
            .map(|fetcher| Arc::new(fetcher) as Arc<dyn clawless_core::tools::WebFetcher>),
        clock: Arc::new(SystemClock),
        eligibility: eligibility(),
        home_dirs: Vec::new(),
        host: HostFacts {
            host: Some(stack.host.to_owned()),
            os: Some("linux".to_owned()),
            arch: Some(std::env::consts::ARCH.to_owned()),
        },
        nodes: None,
    }
}

// ---------------------------------------------------------------------------------------------
// Embedded adapters

/// The system `clawless local` assembles, in `dir`: SQLite sessions offloading large
/// documents to a blob directory, the repository's bundled skills, `generated` managed skills
/// and the agent's workspace (AGENTS.md, SOUL.md) in directories. `defaults_yaml` is added
/// under `agents.defaults` (lines indented by four spaces).
pub(crate) fn embedded_stack(dir: &Path, generated: usize, defaults_yaml: &str) -> Stack {
    let managed = dir.join("managed");
    std::fs::create_dir_all(&managed).expect("mkdir managed");
    for index in 0..generated {
        let skill = managed.join(format!("generated-{index:02}"));
        std::fs::create_dir_all(&skill).expect("mkdir");
        std::fs::write(skill.join("SKILL.md"), generated_skill(index)).expect("write skill");
    }
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).expect("mkdir workspace");
    std::fs::write(workspace.join("AGENTS.md"), AGENTS_MD).expect("write AGENTS.md");
    std::fs::write(workspace.join("SOUL.md"), SOUL_MD).expect("write SOUL.md");
    let yaml = format!(
        "skills:\n  bundled: {}\n  managed: {}\nagents:\n  defaults:\n    workspace: {}\n{defaults_yaml}",
        bundled_skills_dir().display(),
        managed.display(),
        workspace.display()
    );
    let config = ClawlessConfig::from_yaml(&yaml, "bench").expect("config");
    let db = SqliteDb::open(dir.join("clawless.db")).expect("sqlite");
    let blobs: Arc<dyn ObjectStore> =
        Arc::new(DirObjectStore::open(dir.join("blobs")).expect("blob dir"));
    let inner: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
    Stack {
        config,
        stores: Arc::new(StoreFactory::new(|| {
            panic!("the embedded benches configure no s3:// location")
        })),
        sessions: Arc::new(OffloadingSessionStore::new(inner, blobs, "sessions/")),
        host: "local",
    }
}

// ---------------------------------------------------------------------------------------------
// moto

/// SDK clients on moto that record their requests into one log.
pub(crate) struct MotoClients {
    pub(crate) s3: aws_sdk_s3::Client,
    pub(crate) dynamodb: aws_sdk_dynamodb::Client,
    pub(crate) sqs: aws_sdk_sqs::Client,
    pub(crate) log: RequestLog,
}

pub(crate) async fn moto_clients() -> MotoClients {
    let config = clawless_aws::testing::moto_sdk_config().await;
    let log = RequestLog::default();
    let s3 = aws_sdk_s3::Client::from_conf(
        aws_sdk_s3::config::Builder::from(&config)
            .force_path_style(true)
            .interceptor(log.clone())
            .build(),
    );
    let dynamodb = aws_sdk_dynamodb::Client::from_conf(
        aws_sdk_dynamodb::config::Builder::from(&config)
            .interceptor(log.clone())
            .build(),
    );
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(&config)
            .interceptor(log.clone())
            .build(),
    );
    MotoClients {
        s3,
        dynamodb,
        sqs,
        log,
    }
}

/// The deployment: a bucket in the conventional layout (bundled skills, generated managed
/// skills, the agent's workspace), a separate blob bucket, the table and the FIFO queue.
pub(crate) struct MotoDeployment {
    pub(crate) bucket: String,
    pub(crate) blob_bucket: String,
    pub(crate) table: String,
    pub(crate) queue_url: String,
}

/// Creates the deployment on moto with the bundled skills and `generated` managed skills.
/// The uploads are taken off the request log.
pub(crate) async fn moto_deployment(clients: &MotoClients, generated: usize) -> MotoDeployment {
    use clawless_aws::testing::{fresh_bucket, fresh_fifo_queue, fresh_table};
    let bucket = fresh_bucket(&clients.s3, "bench-deploy").await;
    let blob_bucket = fresh_bucket(&clients.s3, "bench-blobs").await;
    let table = fresh_table(&clients.dynamodb).await;
    let queue_url = fresh_fifo_queue(&clients.sqs).await;
    let deploy = S3ObjectStore::new(clients.s3.clone(), bucket.clone());
    let mut objects: Vec<(String, Vec<u8>)> = files_below(&bundled_skills_dir())
        .into_iter()
        .map(|(key, bytes)| (format!("skills/bundled/{key}"), bytes))
        .collect();
    objects.extend((0..generated).map(|index| {
        (
            format!("skills/managed/generated-{index:02}/SKILL.md"),
            generated_skill(index).into_bytes(),
        )
    }));
    objects.push((
        format!("agents/{AGENT}/workspace/AGENTS.md"),
        AGENTS_MD.as_bytes().to_vec(),
    ));
    objects.push((
        format!("agents/{AGENT}/workspace/SOUL.md"),
        SOUL_MD.as_bytes().to_vec(),
    ));
    for (key, bytes) in objects {
        deploy
            .put(&key, bytes, PutCondition::Always)
            .await
            .expect("upload");
    }
    clients.log.take();
    MotoDeployment {
        bucket,
        blob_bucket,
        table,
        queue_url,
    }
}

/// The adapters `AwsApp::turn_service` wires (DynamoDB sessions offloading to the blob
/// bucket, skills and workspace read from the deployment bucket), under `config`.
pub(crate) fn moto_stack(
    clients: &MotoClients, deployment: &MotoDeployment, config: ClawlessConfig,
) -> Stack {
    let blobs: Arc<dyn ObjectStore> = Arc::new(S3ObjectStore::new(
        clients.s3.clone(),
        deployment.blob_bucket.clone(),
    ));
    let inner: Arc<dyn SessionStore> = Arc::new(DynamoSessionStore::new(
        clients.dynamodb.clone(),
        deployment.table.clone(),
    ));
    Stack {
        config,
        stores: Arc::new(StoreFactory::with_s3_client(clients.s3.clone())),
        sessions: Arc::new(OffloadingSessionStore::new(inner, blobs, "sessions/")),
        host: "aws-lambda",
    }
}
