//! The backend's own cost of a simple turn: one inbound message → one model call answering
//! text (no tools) → one reply. Prints the time per turn with the embedded adapters (SQLite
//! sessions, directory trees for skills, workspace and blobs) and, against moto, the DynamoDB,
//! S3 and SQS requests each turn makes, by operation.
//!
//! Model time is excluded by design: the model is an in-process [`ModelProvider`] that answers
//! at once, and replies go to an in-process [`Outbox`] that only counts them, so the figures
//! are what the backend itself spends (load, skills snapshot, bootstrap files, system prompt,
//! commits). On moto the wall time includes moto's own (Python) processing and is shown only
//! to compare runs; the request counts are the figures that carry over to AWS. (moto copies
//! the whole table for every item of a `TransactWriteItems`, so its turns slow down as the
//! bench fills the table; DynamoDB does not.)
//!
//! Targets (the issue's): under 5 ms per warm simple turn with the embedded adapters; at most
//! 4 AWS requests per warm simple turn.
//!
//! `cargo bench -p clawless --bench turn` runs the embedded cases; the moto cases run when
//! `CLAWLESS_TEST_AWS_ENDPOINT` points at moto (`infra/bench` starts one). `--quick` takes
//! fewer samples.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use aws_sdk_s3::config::interceptors::BeforeTransmitInterceptorContextRef;
use aws_sdk_s3::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_s3::error::BoxError;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use clawless_aws::{DynamoInbox, DynamoSessionStore, S3ObjectStore, SqsTurnQueue};
use clawless_core::model::{ModelError, ModelProvider, ModelRequest, ModelResponse, Usage};
use clawless_core::object_store::{ObjectStore, PutCondition};
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::key::{ChatType, DmScope};
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::skills::eligibility::EligibilityContext;
use clawless_core::transcript::{AssistantBlock, StopReason};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_local::DirObjectStore;
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::clock::SystemClock;
use clawless_runtime::config::bucket_layout_config;
use clawless_runtime::ingress::{ChannelAccess, ChatChannel, GroupPolicy, Ingress, IngressOutcome};
use clawless_runtime::turn_service::{HostFacts, TurnDeps, TurnReport, TurnService};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};

/// The agent every turn goes to.
const AGENT: &str = "main";
/// Generated skills added to the repository's bundled ones (as managed skills).
const GENERATED_SKILLS: usize = 50;
/// Turns a session has behind it in the "accumulated session" case.
const PRIOR_TURNS: usize = 10;
/// Turns run before measuring, so caches, connections and SQLite pages are warm.
const WARM_UPS: usize = 5;
/// The targets.
const EMBEDDED_TARGET: Duration = Duration::from_millis(5);
const AWS_REQUEST_TARGET: usize = 4;
/// The generic channel secret of the ingress case.
const SECRET: &[u8] = b"bench-secret";

/// Answers every request at once with a short text: the turn's model time is zero.
#[derive(Debug)]
struct InstantModel;

#[async_trait]
impl ModelProvider for InstantModel {
    async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        std::hint::black_box(request);
        Ok(ModelResponse {
            content: vec![AssistantBlock::Text {
                text: "Done: nothing is scheduled for today.".to_owned(),
            }],
            stop_reason: StopReason::EndTurn,
            usage: Usage {
                input_tokens: 4_000,
                output_tokens: 12,
                ..Usage::default()
            },
            model: self.model_ref(),
        })
    }

    fn model_ref(&self) -> String {
        "bench/instant".to_owned()
    }
}

/// Takes replies without a network hop; only counts them.
#[derive(Debug, Default)]
struct CountingOutbox {
    sent: AtomicUsize,
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
struct RequestLog {
    sent: Arc<Mutex<Vec<(String, String)>>>,
}

impl RequestLog {
    /// The requests recorded since the last call, as `(service, operation)`.
    fn take(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.sent.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Intercept for RequestLog {
    fn name(&self) -> &'static str {
        "clawless-bench::RequestLog"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
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

/// Requests of one turn (or one ingress call), by service and operation.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Requests(BTreeMap<(String, String), usize>);

impl Requests {
    fn from_log(log: &[(String, String)]) -> Self {
        let mut counts = BTreeMap::new();
        for (service, operation) in log {
            *counts
                .entry((service_label(service).to_owned(), operation.clone()))
                .or_insert(0) += 1;
        }
        Self(counts)
    }

    fn total(&self) -> usize {
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
    fn describe(&self) -> String {
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

/// Median and 90th percentile of `samples`.
fn percentiles(samples: &mut [Duration]) -> (Duration, Duration) {
    samples.sort();
    let p90 = (samples.len() * 9).div_ceil(10).saturating_sub(1);
    (samples[samples.len() / 2], samples[p90])
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// One message from `chat`, unique by `n`, in that chat's own session.
fn inbound(chat: &str, n: usize) -> SessionEvent {
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
            text: "What is on my calendar today?".to_owned(),
            sender_is_owner: true,
        }),
    }
}

/// Runs one turn, checks it was simple, and returns how long it took.
async fn timed_turn(turns: &TurnService, event: &SessionEvent) -> Duration {
    let started = Instant::now();
    let report = turns.handle(event).await.expect("turn");
    let elapsed = started.elapsed();
    check_simple(&report);
    elapsed
}

fn check_simple(report: &TurnReport) {
    assert!(
        report.model_calls == 1
            && report.replies_sent == 1
            && report.tools_run == 0
            && !report.waiting,
        "not a simple turn: {report:?}"
    );
}

fn generated_skill(index: usize) -> String {
    format!(
        "---\nname: generated-{index:02}\ndescription: Generated skill number {index}; it does one small task and says when to use it.\n---\n\n\
         # Generated skill {index}\n\n{}\n",
        "Step by step instructions. ".repeat(40)
    )
}

const AGENTS_MD: &str = "# AGENTS.md\n\nYou are a helpful assistant. Keep answers short. \
    Read MEMORY.md before answering questions about the past.\n";
const SOUL_MD: &str = "# SOUL.md\n\nCalm, precise, a little dry.\n";

/// The repository's bundled skills (`skills/` next to this crate).
fn bundled_skills_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the cli crate sits in the workspace")
        .join("skills")
}

/// Every file below `root`, as `(relative path with '/', bytes)`.
fn files_below(root: &Path) -> Vec<(String, Vec<u8>)> {
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

fn turn_deps(
    config: ClawlessConfig,
    stores: Arc<StoreFactory>,
    sessions: Arc<dyn SessionStore>,
    outbox: Arc<CountingOutbox>,
    host: &str,
) -> TurnDeps {
    let skills = Arc::new(SkillsService::new(config, &stores).expect("skills service"));
    TurnDeps {
        skills,
        stores,
        sessions,
        model: Arc::new(InstantModel),
        outbox,
        // As deployed: `web_fetch` is offered (it is never called in a simple turn).
        web: clawless_runtime::web_fetcher::HttpWebFetcher::new()
            .ok()
            .map(|fetcher| Arc::new(fetcher) as Arc<dyn clawless_core::tools::WebFetcher>),
        clock: Arc::new(SystemClock),
        eligibility: eligibility(),
        home_dirs: Vec::new(),
        host: HostFacts {
            host: Some(host.to_owned()),
            os: Some("linux".to_owned()),
            arch: Some(std::env::consts::ARCH.to_owned()),
        },
        nodes: None,
    }
}

struct Samples {
    fresh: usize,
    accumulated: usize,
}

// ---------------------------------------------------------------------------------------------
// Embedded adapters

/// The system `clawless local` assembles: SQLite sessions offloading large documents to a
/// blob directory, skills and workspace in directories.
fn embedded_service(dir: &Path) -> (TurnService, Arc<CountingOutbox>) {
    let managed = dir.join("managed");
    for index in 0..GENERATED_SKILLS {
        let skill = managed.join(format!("generated-{index:02}"));
        std::fs::create_dir_all(&skill).expect("mkdir");
        std::fs::write(skill.join("SKILL.md"), generated_skill(index)).expect("write skill");
    }
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).expect("mkdir workspace");
    std::fs::write(workspace.join("AGENTS.md"), AGENTS_MD).expect("write AGENTS.md");
    std::fs::write(workspace.join("SOUL.md"), SOUL_MD).expect("write SOUL.md");
    let yaml = format!(
        "skills:\n  bundled: {}\n  managed: {}\nagents:\n  defaults:\n    workspace: {}\n",
        bundled_skills_dir().display(),
        managed.display(),
        workspace.display()
    );
    let config = ClawlessConfig::from_yaml(&yaml, "bench").expect("config");
    let db = SqliteDb::open(dir.join("clawless.db")).expect("sqlite");
    let blobs: Arc<dyn ObjectStore> =
        Arc::new(DirObjectStore::open(dir.join("blobs")).expect("blob dir"));
    let inner: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
    let sessions: Arc<dyn SessionStore> =
        Arc::new(OffloadingSessionStore::new(inner, blobs, "sessions/"));
    let stores = Arc::new(StoreFactory::new(|| {
        panic!("the embedded bench configures no s3:// location")
    }));
    let outbox = Arc::new(CountingOutbox::default());
    let deps = turn_deps(config, stores, sessions, Arc::clone(&outbox), "local");
    (TurnService::new(deps), outbox)
}

async fn bench_embedded(samples: &Samples) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (turns, outbox) = embedded_service(dir.path());
    let skills = files_below(&bundled_skills_dir())
        .iter()
        .filter(|(key, _)| key.ends_with("SKILL.md"))
        .count();
    println!(
        "embedded adapters: SQLite file + blob dir + skill/workspace dirs in {} ({skills} bundled + {GENERATED_SKILLS} generated skills)",
        dir.path().display()
    );

    let cold = timed_turn(&turns, &inbound("cold", 0)).await;
    println!(
        "  cold first turn (new process: skills parsed)   {:>8.3} ms",
        ms(cold)
    );

    for warm_up in 0..WARM_UPS {
        timed_turn(&turns, &inbound(&format!("warm-up-{warm_up}"), 0)).await;
    }
    let mut fresh: Vec<Duration> = Vec::with_capacity(samples.fresh);
    for index in 0..samples.fresh {
        fresh.push(timed_turn(&turns, &inbound(&format!("fresh-{index}"), 0)).await);
    }
    report_embedded("warm turn, new session", &mut fresh);

    let mut accumulated = Vec::with_capacity(samples.accumulated);
    for index in 0..samples.accumulated {
        let chat = format!("long-{index}");
        for turn in 0..PRIOR_TURNS {
            timed_turn(&turns, &inbound(&chat, turn)).await;
        }
        accumulated.push(timed_turn(&turns, &inbound(&chat, PRIOR_TURNS)).await);
    }
    report_embedded(
        &format!("warm turn, {PRIOR_TURNS} prior turns"),
        &mut accumulated,
    );
    let expected = 1 + WARM_UPS + samples.fresh + samples.accumulated * (PRIOR_TURNS + 1);
    assert_eq!(
        outbox.sent.load(Ordering::Relaxed),
        expected,
        "one reply per turn"
    );
}

fn report_embedded(label: &str, samples: &mut [Duration]) {
    let count = samples.len();
    let (median, p90) = percentiles(samples);
    let verdict = if p90 < EMBEDDED_TARGET {
        "ok"
    } else {
        "MISSED"
    };
    println!(
        "  {label:<46} median {:>7.3} ms   p90 {:>7.3} ms   [{count} turns]   target < {} ms (p90): {verdict}",
        ms(median),
        ms(p90),
        EMBEDDED_TARGET.as_millis()
    );
}

// ---------------------------------------------------------------------------------------------
// moto

/// SDK clients on moto that record their requests into one log.
struct MotoClients {
    s3: aws_sdk_s3::Client,
    dynamodb: aws_sdk_dynamodb::Client,
    sqs: aws_sdk_sqs::Client,
    log: RequestLog,
}

async fn moto_clients() -> MotoClients {
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
struct MotoDeployment {
    bucket: String,
    blob_bucket: String,
    table: String,
    queue_url: String,
}

async fn moto_deployment(clients: &MotoClients) -> MotoDeployment {
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
    objects.extend((0..GENERATED_SKILLS).map(|index| {
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

/// The turn service as `AwsApp::turn_service` wires it (same adapters, the config
/// `CLAWLESS_BUCKET` yields), with the instant model and the counting outbox.
fn moto_service(clients: &MotoClients, deployment: &MotoDeployment) -> TurnService {
    let config = bucket_layout_config(&deployment.bucket);
    let stores = Arc::new(StoreFactory::with_s3_client(clients.s3.clone()));
    let blobs: Arc<dyn ObjectStore> = Arc::new(S3ObjectStore::new(
        clients.s3.clone(),
        deployment.blob_bucket.clone(),
    ));
    let inner: Arc<dyn SessionStore> = Arc::new(DynamoSessionStore::new(
        clients.dynamodb.clone(),
        deployment.table.clone(),
    ));
    let sessions: Arc<dyn SessionStore> =
        Arc::new(OffloadingSessionStore::new(inner, blobs, "sessions/"));
    let deps = turn_deps(
        config,
        stores,
        sessions,
        Arc::new(CountingOutbox::default()),
        "aws-lambda",
    );
    TurnService::new(deps)
}

/// Runs one turn and returns its wall time and requests.
async fn counted_turn(
    turns: &TurnService,
    log: &RequestLog,
    event: &SessionEvent,
) -> (Duration, Requests) {
    log.take();
    let elapsed = timed_turn(turns, event).await;
    (elapsed, Requests::from_log(&log.take()))
}

/// What a series of calls cost: wall time and each request mix with how many calls had it.
/// `target` marks the warm turns the request target applies to.
fn report_moto(
    label: &str,
    unit: &str,
    times: &mut [Duration],
    requests: &[Requests],
    target: bool,
) {
    let count = times.len();
    let (median, p90) = percentiles(times);
    println!(
        "  {label:<46} median {:>7.3} ms   p90 {:>7.3} ms   [{count} {unit}, moto time included]",
        ms(median),
        ms(p90),
    );
    let mut mixes: BTreeMap<&Requests, usize> = BTreeMap::new();
    for mix in requests {
        *mixes.entry(mix).or_insert(0) += 1;
    }
    for (mix, calls) in mixes {
        let verdict = match (target, mix.total() <= AWS_REQUEST_TARGET) {
            (false, _) => String::new(),
            (true, true) => format!("   target ≤ {AWS_REQUEST_TARGET}: ok"),
            (true, false) => format!("   target ≤ {AWS_REQUEST_TARGET}: MISSED"),
        };
        println!("      {calls:>3}×  {}{verdict}", mix.describe());
    }
}

async fn bench_moto(samples: &Samples) {
    let clients = moto_clients().await;
    let deployment = moto_deployment(&clients).await;
    println!(
        "moto: deployment bucket (bundled + {GENERATED_SKILLS} managed skills, agents/{AGENT}/workspace/{{AGENTS.md,SOUL.md}}), blob bucket, table, FIFO queue"
    );
    let log = &clients.log;

    let ingress = Ingress {
        inbox: Arc::new(DynamoInbox::new(
            clients.dynamodb.clone(),
            deployment.table.clone(),
        )),
        queue: Arc::new(SqsTurnQueue::new(
            clients.sqs.clone(),
            deployment.queue_url.clone(),
        )),
        channels: std::collections::BTreeMap::from([(
            "generic".to_owned(),
            ChatChannel {
                platform: Arc::new(clawless_channels::GenericWebhook::new(SECRET)),
                access: ChannelAccess {
                    owners: vec!["u-bench".to_owned()],
                    allow_from: vec!["*".to_owned()],
                    group_policy: GroupPolicy::Open,
                    require_mention: false,
                    unauthorized_reply: None,
                },
                outbox: None,
            },
        )]),
        agent_id: AGENT.to_owned(),
        dm_scope: DmScope::PerPeer,
        clock: Arc::new(SystemClock),
    };
    let mut ingress_times = Vec::new();
    let mut ingress_requests = Vec::new();
    let mut last_body = Vec::new();
    for index in 0..WARM_UPS + samples.fresh {
        let body = serde_json::json!({
            "message_id": format!("ingress-{index}"),
            "chat_id": format!("ingress-chat-{index}"),
            "sender_id": "u-bench",
            "text": "What is on my calendar today?",
            "chat_type": "direct",
        })
        .to_string()
        .into_bytes();
        let (elapsed, requests, outcome) = accept(&ingress, log, &body).await;
        assert!(
            matches!(outcome, IngressOutcome::Accepted { .. }),
            "{outcome:?}"
        );
        if index >= WARM_UPS {
            ingress_times.push(elapsed);
            ingress_requests.push(requests);
        }
        last_body = body;
    }
    report_moto(
        "ingress: claim + enqueue (webhook function)",
        "calls",
        &mut ingress_times,
        &ingress_requests,
        false,
    );
    let (_, duplicate, outcome) = accept(&ingress, log, &last_body).await;
    assert!(matches!(outcome, IngressOutcome::Duplicate), "{outcome:?}");
    println!(
        "  ingress: the same message again (duplicate)    {}",
        duplicate.describe()
    );

    let turns = moto_service(&clients, &deployment);
    let (cold, cold_requests) = counted_turn(&turns, log, &inbound("cold", 0)).await;
    report_moto(
        "cold first turn (new process, new session)",
        "turn",
        &mut [cold],
        &[cold_requests],
        false,
    );
    for warm_up in 0..WARM_UPS {
        counted_turn(&turns, log, &inbound(&format!("warm-up-{warm_up}"), 0)).await;
    }
    let mut times = Vec::new();
    let mut requests = Vec::new();
    for index in 0..samples.fresh {
        let (elapsed, mix) =
            counted_turn(&turns, log, &inbound(&format!("fresh-{index}"), 0)).await;
        times.push(elapsed);
        requests.push(mix);
    }
    report_moto(
        "warm turn, new session",
        "turns",
        &mut times,
        &requests,
        true,
    );

    let mut times = Vec::new();
    let mut requests = Vec::new();
    for index in 0..samples.accumulated {
        let chat = format!("long-{index}");
        for turn in 0..PRIOR_TURNS {
            counted_turn(&turns, log, &inbound(&chat, turn)).await;
        }
        let (elapsed, mix) = counted_turn(&turns, log, &inbound(&chat, PRIOR_TURNS)).await;
        times.push(elapsed);
        requests.push(mix);
    }
    report_moto(
        &format!("warm turn, {PRIOR_TURNS} prior turns"),
        "turns",
        &mut times,
        &requests,
        true,
    );
}

async fn accept(
    ingress: &Ingress,
    log: &RequestLog,
    body: &[u8],
) -> (Duration, Requests, IngressOutcome) {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        clawless_channels::SIGNATURE_HEADER,
        clawless_channels::sign(SECRET, body)
            .parse()
            .expect("signature is a header value"),
    );
    log.take();
    let started = Instant::now();
    let outcome = ingress.accept("generic", "", &headers, body).await;
    let elapsed = started.elapsed();
    (elapsed, Requests::from_log(&log.take()), outcome)
}

#[tokio::main]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let embedded = if quick {
        Samples {
            fresh: 50,
            accumulated: 20,
        }
    } else {
        Samples {
            fresh: 200,
            accumulated: 200,
        }
    };
    let moto = if quick {
        Samples {
            fresh: 10,
            accumulated: 5,
        }
    } else {
        Samples {
            fresh: 40,
            accumulated: 15,
        }
    };
    println!(
        "simple turn: one inbound message → one model call answering text (no tools) → one reply"
    );
    println!(
        "model time excluded: an in-process model answers instantly; replies go to an in-process outbox"
    );
    bench_embedded(&embedded).await;
    if std::env::var_os(clawless_aws::testing::ENDPOINT_ENV).is_some() {
        bench_moto(&moto).await;
    } else {
        println!(
            "moto: not run; set {} (infra/bench starts moto)",
            clawless_aws::testing::ENDPOINT_ENV
        );
    }
}
