//! Runs turns: loads a session, feeds the event to the core's [`TurnEngine`], performs the
//! effects it asks for (persist, call the model, run a tool, reply), and stops when the turn
//! waits or is done. Shared by the `turn` Lambda function and local mode.
//!
//! The engine decides *what* happens; this module only performs it through ports. Any error
//! leaves storage consistent (every effect is preceded by the commit it depends on), so the
//! caller may simply redeliver the event.
//!
//! A Lambda invocation has a deadline, and a model call may take minutes (the worst case,
//! retries included, is [`clawless_llm::ModelsConfig::worst_case_call`]). With a
//! [`YieldPolicy`] and a [`Deadline`], the service does not start a model call it might not
//! finish: it persists, puts a [`TurnEvent::Continue`] for the session on the turn queue and
//! returns, and the continuation picks the turn up in a fresh invocation. The first model call
//! of an invocation is always made, so every invocation advances some turn.
//!
//! A heartbeat firing goes through its gates first (`heartbeat`): it becomes a poll turn or a
//! skip recorded in the session's meta, and the next firing is armed once that is committed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use clawless_base::model::{ModelError, ModelProvider, ToolSpec};
use clawless_base::object_store::ObjectStore;
use clawless_core::nodes::remote_skills;
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{QueueError, SessionKey, SessionStore, SessionStoreError, TurnQueue};
use clawless_core::system_prompt::bootstrap::{
    BootstrapFile, BootstrapKind, DEFAULT_BOOTSTRAP_MAX_CHARS, DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
    build_bootstrap_context_files, load_bootstrap_files,
};
use clawless_core::system_prompt::{
    PromptMode, RuntimeLine, SystemPromptParams, build_system_prompt,
};
use clawless_core::tool_policy::{PolicyContext, group_tool_policy, resolve_allowed_tools};
use clawless_core::tools::{SessionFacts, ToolContext, WebFetcher, Workspace};
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use clawless_core::turn::prepare::tool_routing;
use clawless_core::turn::state::{SessionState, StateError};
use clawless_core::turn::{OutboundReply, ToolRouting};
use clawless_exec::node::record::NodeRecord;
use clawless_skills::eligibility::EligibilityContext;
use clawless_skills::snapshot::SkillSnapshot;

use crate::config::ClawlessConfig;
use crate::listed_store::{ListedStore, ObjectCache};
use crate::nodes_service::{NodesError, NodesService};
use crate::skills_service::{SkillsError, SkillsService};
use crate::sources::{SourceUri, StoreFactory};
use clawless_base::clock::Clock;
use prompt_fit::FitStep;

mod agent_to_agent;
mod context_keeper;
mod cron;
mod effects;
mod handlers;
mod heartbeat;
mod media;
mod model_switch;
mod prepare;
mod prompt_fit;
mod reply_media;
mod sandbox;
mod stop;
mod subagents;
mod thinking;
mod tool_media;
mod tools;

pub use heartbeat::{HeartbeatTimers, heartbeat_timer};

/// Why an event could not be processed. Everything but [`TurnError::BadEvent`] is worth a
/// redelivery: storage was left consistent.
#[derive(Debug, thiserror::Error)]
pub enum TurnError {
    /// The event can never be processed (unknown agent, malformed key); drop it.
    #[error("unprocessable event: {0}")]
    BadEvent(String),
    /// Another invocation changed the session first.
    #[error(transparent)]
    Store(#[from] SessionStoreError),
    /// A stored document is unreadable.
    #[error(transparent)]
    State(#[from] StateError),
    /// The model failed in a way worth retrying.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A reply could not be delivered.
    #[error(transparent)]
    Outbox(#[from] OutboxError),
    /// Skills or workspace could not be read.
    #[error(transparent)]
    Skills(#[from] SkillsError),
    /// The workspace could not be read.
    #[error("workspace unavailable: {0}")]
    Workspace(#[from] clawless_base::object_store::StoreError),
    /// A node job could not be stored or sent.
    #[error(transparent)]
    Nodes(#[from] NodesError),
    /// The continuation of a yielding turn could not be queued.
    #[error("turn continuation not queued: {0}")]
    Continue(#[from] QueueError),
    /// A heartbeat's or cron job's next firing could not be scheduled.
    #[error("timer not scheduled: {0}")]
    Timer(#[source] QueueError),
    /// The cron store could not be read or written.
    #[error(transparent)]
    Cron(clawless_automation::cron::CronStoreError),
}

impl TurnError {
    /// True when redelivering cannot help.
    pub fn is_permanent(&self) -> bool {
        matches!(self, Self::BadEvent(_))
    }
}

/// What one [`TurnService::handle`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnReport {
    /// How the event was taken.
    pub acceptance: Option<String>,
    /// Model calls made.
    pub model_calls: u32,
    /// Tools run in-process.
    pub tools_run: u32,
    /// Replies delivered.
    pub replies_sent: u32,
    /// Commits made.
    pub commits: u32,
    /// True when the turn now waits for a node result or an approval.
    pub waiting: bool,
    /// True when the turn stopped before its deadline and queued its continuation.
    pub yielded: bool,
}

/// When a turn stops early to stay inside its invocation's deadline.
#[derive(Clone)]
pub struct YieldPolicy {
    /// No model call is started with less than this left before the deadline: the worst
    /// model call plus a margin for what follows it (a tool run, the reply).
    pub threshold: Duration,
    /// Where the continuation goes: the turn queue.
    pub queue: Arc<dyn TurnQueue>,
}

impl std::fmt::Debug for YieldPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("YieldPolicy")
            .field("threshold", &self.threshold)
            .finish_non_exhaustive()
    }
}

/// Margin added to the worst model call for the yield threshold (see `template.yaml`).
pub const YIELD_MARGIN: Duration = Duration::from_secs(60);

/// One invocation's deadline, shared by the records of its batch: the time by which the
/// invocation must have returned, and how many model calls it has made (the first one is
/// always made, so a turn always advances).
#[derive(Debug)]
pub struct Deadline {
    at_ms: u64,
    model_calls: AtomicU32,
}

impl Deadline {
    /// A deadline at `at_ms` (Unix milliseconds, as the Lambda context gives it).
    pub fn at_ms(at_ms: u64) -> Self {
        Self {
            at_ms,
            model_calls: AtomicU32::new(0),
        }
    }

    /// Model calls made under this deadline so far.
    pub fn model_calls(&self) -> u32 {
        self.model_calls.load(Ordering::Relaxed)
    }

    fn must_yield(&self, now_ms: u64, threshold: Duration) -> bool {
        let left = Duration::from_millis(self.at_ms.saturating_sub(now_ms));
        self.model_calls() > 0 && left < threshold
    }
}

/// Waits between attempts at a reply whose delivery failed in a way worth retrying.
const REPLY_RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(500), Duration::from_secs(2)];

/// The ports a turn needs.
#[derive(Clone)]
pub struct TurnDeps {
    /// Skills of every agent.
    pub skills: Arc<SkillsService>,
    /// Opens workspace stores.
    pub stores: Arc<StoreFactory>,
    /// Sessions (already offloading large documents).
    pub sessions: Arc<dyn SessionStore>,
    /// The model (or fallback chain).
    pub model: Arc<dyn ModelProvider>,
    /// Reply delivery.
    pub outbox: Arc<dyn Outbox>,
    /// Web access for `web_fetch`, if enabled.
    pub web: Option<Arc<dyn WebFetcher>>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The machine skills are checked against (bins, platform, env).
    pub eligibility: EligibilityContext,
    /// Home directories for `~` in skill locations.
    pub home_dirs: Vec<String>,
    /// Host facts for the runtime line (`host`, `os`, `arch`).
    pub host: HostFacts,
    /// Node hosts: `exec` is offered only when a node is paired and active.
    pub nodes: Option<Arc<NodesService>>,
}

/// Facts about where the turn runs, for the system prompt's runtime line.
#[derive(Debug, Clone, Default)]
pub struct HostFacts {
    /// Host name or deployment name.
    pub host: Option<String>,
    /// Operating system.
    pub os: Option<String>,
    /// CPU architecture.
    pub arch: Option<String>,
}

/// Runs turns. One per warm process; share it.
pub struct TurnService {
    deps: TurnDeps,
    /// Builds the model a session chose with `/new <model>`.
    model_factory: Option<clawless_llm::ModelFactory>,
    /// Models sessions chose, built once each.
    chosen_models: std::sync::Mutex<BTreeMap<String, Arc<dyn ModelProvider>>>,
    /// Every tool the model can call here, built on first use from the ports set by then
    /// (the `with_…` builders come first): once per service.
    registry: std::sync::OnceLock<tools::ToolRegistry>,
    objects: Arc<ObjectCache>,
    tools_run: AtomicU64,
    yield_policy: Option<YieldPolicy>,
    heartbeats: Option<HeartbeatTimers>,
    cron: Option<Arc<crate::cron_service::CronService>>,
    /// Where sub-agents' starts and announces go (the turn queue); without it there is no
    /// `sessions_spawn`.
    subagent_queue: Option<Arc<dyn TurnQueue>>,
    /// Where sub-agents' time limits wait.
    subagent_timers: Option<Arc<dyn clawless_core::timers::Timers>>,
    /// Posts webhook deliveries of cron jobs, under the `web_fetch` address policy: built at
    /// the first delivery, not at cold start (`None` inside when it cannot be built).
    webhooks: std::sync::OnceLock<Option<Arc<crate::web_fetcher::HttpWebFetcher>>>,
    /// Lists every session, for `sessions_list` under `tools.sessions.visibility` `agent`
    /// or `all` (without it those see the spawned tree only).
    session_lister: Option<Arc<dyn clawless_core::session::SessionLister>>,
    /// The state store's blobs (S3 bucket, `.clawless/blobs`): the attachments ingress stored
    /// (images shown to the model), and tools' caches that outlive an invocation
    /// (`web_search`'s results). `None`: neither.
    pub(crate) blobs: Option<Arc<dyn ObjectStore>>,
    /// Voice-note transcription as `tools.media.audio` says, built on first use.
    transcriber: std::sync::OnceLock<Option<crate::media::transcribe::Transcriber>>,
    /// `agents.defaults.imageModel`'s models, built on first use, describing photos for a
    /// chat model without vision.
    image_describers: std::sync::OnceLock<crate::media::describe::VisionModels>,
    /// The values fetched for `secrets:`, looked up (before the environment) for the `…Env`
    /// keys the turn service reads itself (`cron.webhookTokenEnv`).
    secrets: crate::secrets::SecretValues,
}

impl std::fmt::Debug for TurnService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TurnService")
            .field("tools", &self.registry.get())
            .finish_non_exhaustive()
    }
}

/// What the paired node hosts add to an event's handling, read once per event: whether `exec`
/// is offered, the machines skills are checked against (the backend's own plus every active
/// node's platform and skill bins, spec §3.3), and the note naming macOS nodes.
struct NodeScope {
    exec: ExecReach,
    eligibility: EligibilityContext,
    note: Option<String>,
}

/// Which node hosts can take an `exec` job this event: any active one (the owner's own
/// sessions), and one that runs a jail (a sandboxed session's).
#[derive(Debug, Clone, Copy, Default)]
struct ExecReach {
    any_node: bool,
    jailed_node: bool,
}

impl ExecReach {
    /// Whether `exec` can be offered to a session, given whether it is sandboxed.
    fn offered(self, sandboxed: bool) -> bool {
        match sandboxed {
            true => self.jailed_node,
            false => self.any_node,
        }
    }
}

/// What belongs to the turn being run: its tool routing, and (from its first model call or
/// tool run on) its prompt context.
struct PerTurn {
    turn: u64,
    routing: ToolRouting,
    context: Option<TurnContext>,
}

/// What a turn's prompt is built from, before it is fitted to the window.
struct PromptInputs<'a> {
    /// Every part of the system prompt but the skills and the Project Context files.
    params: SystemPromptParams<'a>,
    skills: &'a SkillSnapshot,
    bootstrap: &'a [BootstrapFile],
    /// The specs offered, as the session sees them (deferred ones in short form).
    tools: Vec<ToolSpec>,
}

/// A system prompt and tool specs fitted to the window.
struct FittedPrompt {
    system: String,
    tools: Vec<ToolSpec>,
    fixed_tokens: u64,
    /// The steps applied to fit it (none when the window is large enough).
    steps: Vec<FitStep>,
}

/// What a turn's model calls are built from; assembled once, on the first model call.
pub(crate) struct TurnContext {
    system: String,
    tools: Vec<ToolSpec>,
    /// The steps applied to fit the fixed part to a small window.
    shortened: Vec<FitStep>,
    /// The context window it was fitted to, in tokens.
    window: u64,
    tool_context: ToolContext,
    /// Estimated tokens of the system prompt and the tool schemas, which every request of
    /// the turn carries.
    fixed_tokens: u64,
}

impl TurnService {
    /// A service over `deps` with the built-in tools.
    pub fn new(deps: TurnDeps) -> Self {
        Self {
            deps,
            registry: std::sync::OnceLock::new(),
            objects: Arc::new(ObjectCache::default()),
            tools_run: AtomicU64::new(0),
            yield_policy: None,
            heartbeats: None,
            cron: None,
            webhooks: std::sync::OnceLock::new(),
            subagent_queue: None,
            subagent_timers: None,
            session_lister: None,
            blobs: None,
            transcriber: std::sync::OnceLock::new(),
            image_describers: std::sync::OnceLock::new(),
            secrets: crate::secrets::SecretValues::default(),
            model_factory: None,
            chosen_models: std::sync::Mutex::default(),
        }
    }

    /// Lets sessions choose another allowed model (`/new <model>`), built by `factory`.
    pub fn with_model_factory(mut self, factory: clawless_llm::ModelFactory) -> Self {
        self.model_factory = Some(factory);
        self
    }

    /// The model this session's turns use: its choice (`/new <model>`) when one is made and
    /// can be built, else the configured one.
    fn model(&self, state: &SessionState) -> Arc<dyn ModelProvider> {
        // A heartbeat turn may have a model of its own (`heartbeat.model`).
        let heartbeat_model = self
            .heartbeat_turn_config(state)
            .and_then(|config| config.model)
            .filter(|model| !model.trim().is_empty());
        let chosen = heartbeat_model
            .as_ref()
            .or(state.meta.model_override.as_ref());
        let (Some(chosen), Some(factory)) = (chosen, &self.model_factory) else {
            return Arc::clone(&self.deps.model);
        };
        let mut built = self
            .chosen_models
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(model) = built.get(chosen) {
            return Arc::clone(model);
        }
        match factory(chosen) {
            Ok(model) => {
                built.insert(chosen.clone(), Arc::clone(&model));
                model
            }
            Err(err) => {
                tracing::warn!(model = %chosen, error = %err, "the session's model cannot be built; using the configured one");
                Arc::clone(&self.deps.model)
            }
        }
    }

    /// Lets turns handled with a [`Deadline`] stop early under `policy`.
    pub fn with_yield(mut self, policy: YieldPolicy) -> Self {
        self.yield_policy = Some(policy);
        self
    }

    /// Schedules heartbeats on `timers` (see the `heartbeat` module): each firing is handled,
    /// and the next one armed, by this service. Without it no heartbeat is ever scheduled.
    pub fn with_heartbeats(mut self, timers: HeartbeatTimers) -> Self {
        self.heartbeats = Some(timers);
        self
    }

    /// Offers the `cron` tool (to owners) and runs the jobs of `cron` (see the `cron`
    /// module). Without it there is no `cron` tool and cron firings are dropped.
    pub fn with_cron(mut self, cron: Arc<crate::cron_service::CronService>) -> Self {
        self.cron = Some(cron);
        self
    }

    /// Posts cron webhook deliveries with `poster` (tests allow a loopback receiver with it).
    pub fn with_cron_webhooks(self, poster: crate::web_fetcher::HttpWebFetcher) -> Self {
        // A fresh service: the cell is empty, so this cannot fail.
        let _set = self.webhooks.set(Some(Arc::new(poster)));
        self
    }

    /// Looks up the `…Env` keys this service reads itself in `secrets` first (the values
    /// fetched for `secrets:`), then in the environment.
    pub fn with_secrets(mut self, secrets: crate::secrets::SecretValues) -> Self {
        self.secrets = secrets;
        self
    }

    /// Lets turns spawn sub-agents (`sessions_spawn`), each its own session on `queue`, and
    /// announces their results back through it.
    pub fn with_subagents(mut self, queue: Arc<dyn TurnQueue>) -> Self {
        self.subagent_queue = Some(queue);
        self
    }

    /// Lets `sessions_list` and `sessions_history` reach every session through `lister`
    /// (under `tools.sessions.visibility` `agent` or `all`), and offers them even without
    /// sub-agents.
    pub fn with_session_lister(
        mut self, lister: Arc<dyn clawless_core::session::SessionLister>,
    ) -> Self {
        self.session_lister = Some(lister);
        self
    }

    /// Reads stored attachments from, and lets tools cache what outlives an invocation
    /// (`web_search`'s results) in, `blobs`: the state store's blob store.
    pub fn with_blobs(mut self, blobs: Arc<dyn ObjectStore>) -> Self {
        self.blobs = Some(blobs);
        self
    }

    /// Enforces sub-agents' `runTimeoutSeconds` with durable timers on `timers`.
    pub fn with_subagent_timers(mut self, timers: Arc<dyn clawless_core::timers::Timers>) -> Self {
        self.subagent_timers = Some(timers);
        self
    }

    /// The cron jobs, when this service runs them.
    pub fn cron(&self) -> Option<&Arc<crate::cron_service::CronService>> {
        self.cron.as_ref()
    }

    /// Tools run in-process since start (an operational counter).
    pub fn tools_run(&self) -> u64 {
        self.tools_run.load(Ordering::Relaxed)
    }

    fn config(&self) -> &ClawlessConfig {
        self.deps.skills.config()
    }

    /// The tools of this service, registered on first use.
    fn registry(&self) -> &tools::ToolRegistry {
        self.registry.get_or_init(|| tools::registry(self))
    }

    /// What the next request of session `session_key` would carry, as `/context` lists it
    /// (`detail`: every tool); `None` when there is no such session. Nothing is stored.
    pub async fn context_report(
        &self, session_key: &str, detail: bool,
    ) -> Result<Option<String>, TurnError> {
        let key = SessionKey::parse(session_key)
            .ok_or_else(|| TurnError::BadEvent(format!("bad session key {session_key:?}")))?;
        let Some(stored) = self.deps.sessions.load_live(&key).await? else {
            return Ok(None);
        };
        let mut state = SessionState::from_stored(key.clone(), &stored)?;
        let agent_id = self
            .config()
            .agent(key.agent_id())
            .map_or_else(|| key.agent_id().to_owned(), |agent| agent.id);
        let scope = self.node_scope().await?;
        let routing = self.routing(&agent_id, &state, scope.exec);
        let context = self
            .turn_context(&agent_id, &mut state, &routing, &scope)
            .await?;
        Ok(Some(tools::context::render_context(
            &context, &state, detail,
        )))
    }

    /// Processes one event for its session until the turn waits or is done.
    pub async fn handle(&self, event: &SessionEvent) -> Result<TurnReport, TurnError> {
        self.handle_until(event, None).await
    }

    /// [`TurnService::handle`] within `deadline`: with a [`YieldPolicy`], the turn stops
    /// before a model call that might not finish in time and queues its continuation.
    pub async fn handle_until(
        &self, event: &SessionEvent, deadline: Option<&Deadline>,
    ) -> Result<TurnReport, TurnError> {
        let mut arm = None;
        let report = self.handle_inner(event, deadline, &mut arm).await?;
        // Armed only once the session recording why is committed.
        if let Some(timer) = arm {
            match self.schedule_timer(&timer).await {
                Ok(()) => {}
                // A heartbeat's redelivery re-arms its next firing.
                Err(err) if matches!(event.event, TurnEvent::Heartbeat { .. }) => return Err(err),
                Err(err) => {
                    tracing::warn!(error = %err, timer = %timer.timer_id, "heartbeat not armed; the next event of the session tries again");
                }
            }
        }
        Ok(report)
    }

    /// Stops the turn before a model call: persists what is not yet (the message that started
    /// it may be uncommitted, and its queue message is about to be acknowledged), then queues
    /// the continuation, deduplicated by the session version it stopped at.
    async fn yield_turn(
        &self, key: &SessionKey, agent_id: &str, state: &mut SessionState, policy: &YieldPolicy,
        report: &mut TurnReport,
    ) -> Result<(), TurnError> {
        if state.has_uncommitted() {
            let commit = state.pending_commit()?;
            let version = self.deps.sessions.commit(key, &commit).await?;
            state.mark_committed(version);
            report.commits += 1;
        }
        let continuation = SessionEvent {
            session_key: key.to_string(),
            agent_id: agent_id.to_owned(),
            event: TurnEvent::Continue {
                continuation_id: format!("v{}", state.version),
            },
        };
        crate::ingress::enqueue(policy.queue.as_ref(), &continuation).await?;
        tracing::info!(session = %key, version = state.version, threshold = ?policy.threshold, "turn yielded before its deadline; continuation queued");
        report.yielded = true;
        Ok(())
    }

    /// Delivers one reply. A failure worth retrying (429, 5xx, a timeout) is tried again after
    /// [`REPLY_RETRY_DELAYS`], then fails the event, so the queue redelivers it; a permanent
    /// refusal (the bot was blocked, the chat is gone) comes back as `Some(reason)`, to be
    /// recorded so the session's later messages are not held back behind it.
    async fn deliver(&self, reply: &OutboundReply) -> Result<Option<String>, TurnError> {
        let mut delays = REPLY_RETRY_DELAYS.iter();
        loop {
            match self.deps.outbox.send(reply).await {
                Ok(()) => return Ok(None),
                Err(OutboxError::Rejected { message }) => {
                    tracing::error!(reply_id = %reply.reply_id, chat = %reply.chat.chat_id, reason = %message, "reply refused for good; recorded and skipped");
                    return Ok(Some(message));
                }
                Err(err) => match delays.next() {
                    Some(delay) => {
                        tracing::warn!(reply_id = %reply.reply_id, error = %err, ?delay, "reply delivery failed; retrying");
                        tokio::time::sleep(*delay).await;
                    }
                    None => return Err(err.into()),
                },
            }
        }
    }

    /// The per-turn state for the session's current turn, replacing a stale one.
    fn per_turn<'a>(
        &self, agent_id: &str, state: &SessionState, current: &'a mut Option<PerTurn>,
        exec: ExecReach,
    ) -> &'a mut PerTurn {
        if current
            .as_ref()
            .is_some_and(|per_turn| per_turn.turn != state.meta.turn)
        {
            *current = None;
        }
        current.get_or_insert_with(|| PerTurn {
            turn: state.meta.turn,
            routing: self.routing(agent_id, state, exec),
            context: None,
        })
    }

    /// The prompt context of the current turn, built on first use.
    async fn context<'a>(
        &self, agent_id: &str, state: &mut SessionState, current: &'a mut Option<PerTurn>,
        scope: &NodeScope,
    ) -> Result<&'a TurnContext, TurnError> {
        let per_turn = self.per_turn(agent_id, state, current, scope.exec);
        let context = match per_turn.context.take() {
            Some(context) => context,
            None => {
                self.turn_context(agent_id, state, &per_turn.routing, scope)
                    .await?
            }
        };
        Ok(per_turn.context.insert(context))
    }

    /// The node hosts' part of this event's handling (one registry read).
    async fn node_scope(&self) -> Result<NodeScope, TurnError> {
        let nodes = match &self.deps.nodes {
            Some(nodes) => nodes.active_nodes().await?,
            None => Vec::new(),
        };
        Ok(NodeScope {
            exec: ExecReach {
                any_node: !nodes.is_empty(),
                jailed_node: nodes.iter().any(NodeRecord::can_jail),
            },
            eligibility: remote_skills::with_nodes(&self.deps.eligibility, &nodes),
            note: remote_skills::remote_node_note(&nodes),
        })
    }

    /// The tools offered this turn: built-ins that pass every policy layer.
    fn routing(&self, agent_id: &str, state: &SessionState, exec: ExecReach) -> ToolRouting {
        let sender_is_owner = state.meta.sender_is_owner;
        let model_ref = self.model(state).model_ref();
        let (provider, model_id) = model_ref
            .split_once('/')
            .unwrap_or((model_ref.as_str(), ""));
        let registry = self.registry();
        let sandboxed = self.sandbox_of(agent_id, state);
        // A sandboxed command runs only in a node's jail, never on a bare host.
        let candidates = registry.candidates(tools::ToolScope {
            // Under `/elevated on`, an allowed sender's command may run on a bare node.
            exec_ready: exec.offered(sandboxed.is_some() && state.meta.elevated.is_off()),
        });
        let agent_tools = self
            .config()
            .agents
            .list
            .iter()
            .find(|agent| agent.id.eq_ignore_ascii_case(agent_id))
            .and_then(|agent| agent.tools.as_ref());
        let mut context = PolicyContext::new(provider, model_id);
        context.sender_is_owner = sender_is_owner;
        context.sandboxed = sandboxed.is_some();
        context.group_policy = state.meta.group_scope.as_ref().and_then(|group| {
            let groups = self.config().channel_groups(&group.channel)?;
            group_tool_policy(groups, &group.group_id, group.sender_id.as_deref())
        });
        context.channel_ids = &sandbox::CHANNEL_TOOL_IDS;
        if let Some(run) = &state.meta.subagent {
            context.subagent_depth = run.start.depth;
            context.max_spawn_depth = run.start.max_depth;
        }
        let allowed = resolve_allowed_tools(
            &candidates,
            &self.config().tools.policy,
            agent_tools,
            &context,
        );
        for warning in allowed.warnings() {
            tracing::warn!(%warning, "tool policy");
        }
        // A cron job's `toolsAllow` narrows its runs further.
        let tools_allow = cron::current_cron_run(state).and_then(|run| run.tools_allow.as_ref());
        let mut withheld = sandbox::withheld_tools(
            sandboxed.as_ref(),
            self.memory_reaches(state, sandboxed.is_some()),
        );
        // A cron run that delivers its own answer to a chat does not also get `message`
        // (OpenClaw's `disableMessageTool`): the run's answer is its one message.
        let cron_delivers = cron::current_cron_run(state).is_some()
            && state
                .heartbeat_delivery()
                .is_some_and(|delivery| delivery.target.chat().is_some());
        if cron_delivers {
            withheld.push("message");
        }
        let names = allowed
            .names()
            .iter()
            .filter(|name| !withheld.contains(&name.as_str()))
            .filter(|name| {
                tools_allow.is_none_or(|allow| {
                    allow
                        .iter()
                        .any(|allowed| allowed.eq_ignore_ascii_case(name))
                })
            });
        let mut routing = tool_routing(names.cloned(), &registry.remote_names());
        routing.commands = registry.command_names().collect();
        routing
    }

    /// Builds the system prompt, tool specs and tool context for this turn.
    async fn turn_context(
        &self, agent_id: &str, state: &mut SessionState, routing: &ToolRouting, scope: &NodeScope,
    ) -> Result<TurnContext, TurnError> {
        let snapshot = self
            .deps
            .skills
            .snapshot(
                agent_id,
                &scope.eligibility,
                &self.deps.home_dirs,
                scope.note.as_deref(),
            )
            .await?;
        let snapshot = self.keep_or_replace_snapshot(state, snapshot);
        let sandboxed = self.sandbox_of(agent_id, state);
        let (workspace, sandbox_view) = self
            .session_workspace(agent_id, state, sandboxed.as_ref())
            .await?;
        let memory_reaches = self.memory_reaches(state, sandboxed.is_some());
        let defaults = &self.config().agents.defaults;
        let heartbeat_config = self
            .config()
            .heartbeat_agent(agent_id)
            .map(|agent| agent.config);
        let cron_run = cron::current_cron_run(state).cloned();
        let heartbeat_guidance = heartbeat_config.as_ref().is_some_and(|config| {
            clawless_automation::heartbeat::prompt::heartbeat_guidance_enabled(
                config,
                agent_id.eq_ignore_ascii_case(crate::config::DEFAULT_AGENT_ID),
            )
        });
        let bootstrap = self
            .loaded_bootstrap_files(
                agent_id,
                state,
                &workspace,
                heartbeat_config.as_ref(),
                heartbeat_guidance,
                memory_reaches,
            )
            .await?;
        let tool_names: Vec<String> = routing.offered.iter().cloned().collect();
        let model_ref = self.model(state).model_ref();
        let default_model = self.deps.model.model_ref();
        let workspace_dir = workspace.display_root();
        let channel = state.meta.chat.as_ref().map(|chat| chat.channel.clone());
        let runtime = RuntimeLine {
            agent_id: Some(agent_id),
            host: self.deps.host.host.as_deref(),
            os: self.deps.host.os.as_deref(),
            arch: self.deps.host.arch.as_deref(),
            model: Some(&model_ref),
            default_model: Some(&default_model),
            channel: channel.as_deref(),
            thinking: Some(self.thinking_level(state).as_str()),
            reasoning: Some(self.reasoning_level(state).as_str()),
            ..RuntimeLine::default()
        };
        let extra_system_prompt = self.extra_system_prompt(state);
        let authorized_senders = state
            .meta
            .chat
            .as_ref()
            .map(|chat| self.config().authorized_senders(&chat.channel))
            .unwrap_or_default();
        let sandbox_prompt = sandboxed.as_ref().map(|sandboxed| {
            let exec = routing.offered.contains("exec");
            self.sandbox_prompt(agent_id, state, sandboxed, &workspace_dir, exec)
        });
        let model_aliases =
            clawless_core::turn::model_command::prompt_alias_lines(&self.model_choices());
        let params = SystemPromptParams {
            mode: PromptMode::for_session_key(
                state.key.as_str(),
                cron_run
                    .as_ref()
                    .is_some_and(|run| run.tools_allow.is_some()),
            ),
            tool_names: &tool_names,
            include_memory_section: memory_reaches,
            workspace_dir: &workspace_dir,
            user_timezone: defaults.user_timezone.as_deref(),
            heartbeat_guidance,
            runtime,
            extra_system_prompt: extra_system_prompt.as_deref(),
            sandbox: sandbox_prompt,
            authorized_senders: &authorized_senders,
            reply_tags: channel
                .as_deref()
                .is_some_and(clawless_channels::directives::honours_reply_tags),
            model_aliases: &model_aliases,
            ..SystemPromptParams::default()
        };
        let inputs = PromptInputs {
            params,
            skills: &snapshot,
            bootstrap: &bootstrap,
            tools: self.offered_specs(routing, state),
        };
        let window = self.budget(state).window;
        let fitted = self.fit_prompt(inputs, window);
        let sources = self.deps.skills.sources(agent_id)?.to_vec();
        Ok(TurnContext {
            fixed_tokens: fitted.fixed_tokens,
            system: fitted.system,
            tools: fitted.tools,
            shortened: fitted.steps,
            window,
            tool_context: ToolContext {
                workspace: self.watched_workspace(agent_id, workspace),
                skill_sources: sources,
                home_dirs: self.deps.home_dirs.clone(),
                web: self.deps.web.clone(),
                session: self.session_facts(state),
                sandbox: sandbox_view,
            },
        })
    }

    /// `workspace` as the turn's tools write it: a write marks the agent's skills listing
    /// stale, so the next turn sees the file (a skill, a bootstrap file) whatever
    /// `skills.refreshSeconds` says.
    fn watched_workspace(&self, agent_id: &str, workspace: Workspace) -> Workspace {
        let skills = Arc::clone(&self.deps.skills);
        let agent_id = agent_id.to_owned();
        Workspace {
            store: Arc::new(crate::listed_store::WriteWatchedStore::new(
                workspace.store,
                move || skills.mark_stale(&agent_id),
            )),
            prefix: workspace.prefix,
        }
    }

    /// Rebuilds `context`'s tool specs after the session loaded a deferred tool, shortened as
    /// the window made them.
    fn reoffer_tools(
        &self, context: &mut TurnContext, routing: &ToolRouting, state: &SessionState,
    ) {
        let offered = self.offered_specs(routing, state);
        context.tools = match context.shortened.contains(&FitStep::TerseSchemas) {
            true => offered.iter().map(prompt_fit::terse_spec).collect(),
            false => offered,
        };
        context.fixed_tokens = prompt_fit::fixed_tokens(&context.system, &context.tools);
    }

    /// The specs of the tools `routing` offers, deferred ones the session has not loaded in
    /// short form.
    fn offered_specs(&self, routing: &ToolRouting, state: &SessionState) -> Vec<ToolSpec> {
        routing
            .offered
            .iter()
            .filter_map(|name| self.registry().offered_spec(name, &state.meta.loaded_tools))
            .collect()
    }

    /// The bootstrap files the prompt's Project Context is built from; the memory file only
    /// where memory reaches.
    async fn loaded_bootstrap_files(
        &self, agent_id: &str, state: &SessionState, workspace: &Workspace,
        heartbeat: Option<&clawless_automation::heartbeat::HeartbeatConfig>,
        heartbeat_guidance: bool, memory_reaches: bool,
    ) -> Result<Vec<BootstrapFile>, TurnError> {
        Ok(self
            .bootstrap_files(agent_id, state, workspace, heartbeat, heartbeat_guidance)
            .await?
            .into_iter()
            .filter(|file| memory_reaches || !is_memory_file(&file.name))
            .collect())
    }

    /// The Project Context files within the configured limits, or within `caps` (per file,
    /// total) when smaller.
    fn context_files(
        &self, files: &[BootstrapFile], caps: Option<(usize, usize)>,
    ) -> Vec<clawless_core::system_prompt::ContextFile> {
        let defaults = &self.config().agents.defaults;
        let mut per_file = defaults
            .bootstrap_max_chars
            .unwrap_or(DEFAULT_BOOTSTRAP_MAX_CHARS);
        let mut total = defaults
            .bootstrap_total_max_chars
            .unwrap_or(DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS);
        if let Some((file_cap, total_cap)) = caps {
            per_file = per_file.min(file_cap);
            total = total.min(total_cap);
        }
        let (context_files, warnings) = build_bootstrap_context_files(files, per_file, total);
        if caps.is_none() {
            for warning in warnings {
                tracing::warn!(%warning, "bootstrap files");
            }
        }
        context_files
    }

    /// Builds the system prompt and tool specs from `inputs`, applying the steps of
    /// [`prompt_fit::FitStep`] in order while the fixed part takes more than its share of a
    /// `window`-token window.
    fn fit_prompt(&self, inputs: PromptInputs<'_>, window: u64) -> FittedPrompt {
        let PromptInputs {
            params,
            skills,
            bootstrap,
            tools,
        } = inputs;
        let full_files = self.context_files(bootstrap, None);
        let mut terse_tools: Option<Vec<ToolSpec>> = None;
        let (mut system, mut fixed_tokens) = (String::new(), 0);
        let mut applied: Vec<FitStep> = Vec::new();
        for step in std::iter::once(None).chain(FitStep::ALL.map(Some)) {
            applied.extend(step);
            let has = |step: FitStep| applied.contains(&step);
            let files: std::borrow::Cow<'_, [_]> = match has(FitStep::ShortContextFiles) {
                true => self
                    .context_files(bootstrap, Some(prompt_fit::short_context_caps(window)))
                    .into(),
                false => full_files.as_slice().into(),
            };
            let skills_prompt: std::borrow::Cow<'_, str> = if has(FitStep::NoSkills) {
                "".into()
            } else if has(FitStep::CompactSkills) {
                let listed: Vec<(&str, &str)> = skills
                    .resolved_skills
                    .iter()
                    .map(|skill| (skill.name.as_str(), skill.location.as_str()))
                    .collect();
                prompt_fit::compact_skills(&listed).into()
            } else {
                skills.prompt.as_str().into()
            };
            let left_out: Vec<String> = applied
                .iter()
                .map(|step| step.describe().to_owned())
                .collect();
            let params = SystemPromptParams {
                skills_prompt: &skills_prompt,
                context_files: &files,
                lean: has(FitStep::LeanSections),
                left_out: &left_out,
                ..params
            };
            system = build_system_prompt(&params);
            let offered: &[ToolSpec] = match has(FitStep::TerseSchemas) {
                true => terse_tools
                    .get_or_insert_with(|| tools.iter().map(prompt_fit::terse_spec).collect()),
                false => &tools,
            };
            fixed_tokens = prompt_fit::fixed_tokens(&system, offered);
            if prompt_fit::fits(fixed_tokens, window) {
                break;
            }
        }
        if !prompt_fit::fits(fixed_tokens, window) {
            tracing::warn!(
                fixed = fixed_tokens,
                window,
                "the fixed prompt takes more than its share of the window even shortened"
            );
        }
        FittedPrompt {
            tools: terse_tools.unwrap_or(tools),
            system,
            fixed_tokens,
            steps: applied,
        }
    }

    /// A sub-agent's context, and the step of an agent-to-agent exchange this turn takes.
    fn extra_system_prompt(&self, state: &SessionState) -> Option<String> {
        [
            state
                .meta
                .subagent
                .as_ref()
                .map(|run| run.start.extra_system_prompt.clone()),
            self.a2a_step_prompt(state),
        ]
        .into_iter()
        .flatten()
        .filter(|part| !part.trim().is_empty())
        .reduce(|first, second| format!("{first}\n\n{second}"))
    }

    /// The workspace's bootstrap files this turn loads: light for a light heartbeat, cron
    /// run or sub-agent; `HEARTBEAT.md` only for heartbeats and agents told about them; a
    /// sub-agent's own set.
    async fn bootstrap_files(
        &self, agent_id: &str, state: &SessionState, workspace: &Workspace,
        heartbeat_config: Option<&clawless_automation::heartbeat::HeartbeatConfig>,
        heartbeat_guidance: bool,
    ) -> Result<Vec<clawless_core::system_prompt::bootstrap::BootstrapFile>, TurnError> {
        let heartbeat = state.is_heartbeat_turn();
        let cron_run = cron::current_cron_run(state);
        let kind = match heartbeat_config {
            Some(config) if heartbeat && config.light_context() => {
                BootstrapKind::Lightweight { heartbeat: true }
            }
            _ if cron_run.is_some_and(|run| run.light_context)
                || state
                    .meta
                    .subagent
                    .as_ref()
                    .is_some_and(|run| run.start.light_context) =>
            {
                BootstrapKind::Lightweight { heartbeat: false }
            }
            _ => BootstrapKind::for_session_key(state.key.as_str()),
        };
        let listing = self.deps.skills.recent_listing(
            agent_id,
            &workspace.store.identity(),
            &workspace.prefix,
        );
        let files = match listing {
            Some(listing) => {
                let listed = ListedStore::new(
                    Arc::clone(&workspace.store),
                    &workspace.prefix,
                    listing,
                    Arc::clone(&self.objects),
                );
                load_bootstrap_files(&listed, &workspace.prefix, kind).await?
            }
            None => load_bootstrap_files(workspace.store.as_ref(), &workspace.prefix, kind).await?,
        };
        // `HEARTBEAT.md` is for heartbeats, and for ordinary turns of an agent told about them.
        let mut files = files;
        if !heartbeat && !heartbeat_guidance {
            files.retain(|file| {
                file.name != clawless_core::system_prompt::bootstrap::HEARTBEAT_FILE_NAME
            });
        }
        if state.meta.subagent.is_some() {
            files.retain(|file| {
                clawless_core::subagents::SUBAGENT_BOOTSTRAP_FILES.contains(&file.name.as_str())
            });
        }
        Ok(files)
    }

    /// Keeps the session's snapshot while it is current, so the prompt stays byte-identical.
    fn keep_or_replace_snapshot(
        &self, state: &mut SessionState, fresh: SkillSnapshot,
    ) -> SkillSnapshot {
        match &state.meta.skills_snapshot {
            Some(kept)
                if kept.fingerprint == fresh.fingerprint
                    && kept.skill_filter == fresh.skill_filter =>
            {
                kept.clone()
            }
            _ => {
                state.meta.skills_snapshot = Some(fresh.clone());
                fresh
            }
        }
    }

    fn workspace(&self, agent_id: &str) -> Result<Workspace, TurnError> {
        open_workspace(&self.deps.skills, &self.deps.stores, agent_id)
    }

    fn session_facts(&self, state: &SessionState) -> SessionFacts {
        let now = self.deps.clock.now_ms();
        SessionFacts {
            session_key: state.key.to_string(),
            session_id: state.meta.session_id.clone(),
            agent_id: state.meta.agent_id.clone(),
            model: self.model(state).model_ref(),
            channel: state
                .meta
                .chat
                .as_ref()
                .map(|c| c.channel.clone())
                .unwrap_or_default(),
            transcript_steps: state.steps.len() as u64,
            model_calls_this_turn: state.model_calls_this_turn(),
            tokens_in: state.meta.tokens_in,
            tokens_out: state.meta.tokens_out,
            sandbox: match self.sandbox_of(&state.meta.agent_id, state) {
                Some(sandboxed) => format!(
                    "on (mode {}, workspace access {})",
                    sandboxed.settings.mode.as_str(),
                    sandboxed.settings.workspace_access.as_str()
                ),
                None => "off".to_owned(),
            },
            timezone: self.config().agents.defaults.user_timezone.clone(),
            now_rfc3339: rfc3339(now),
            context_tokens: state.meta.last_prompt_tokens,
            context_window: Some(self.budget(state).window),
            compactions: state.meta.compaction_count,
            session_age: format_age(now.saturating_sub(state.meta.generation_started())),
            last_reset: state
                .meta
                .last_reset
                .as_ref()
                .map(|reset| format!("{} at {}", reset.reason.as_str(), rfc3339(reset.at_ms))),
            media: state.meta.last_media.clone(),
        }
    }
}

/// Whether a bootstrap file is the agent's long-term memory (`MEMORY.md` or `memory.md`).
fn is_memory_file(name: &str) -> bool {
    name == clawless_core::system_prompt::bootstrap::MEMORY_FILE_NAME
        || name == clawless_core::system_prompt::bootstrap::MEMORY_FILE_NAME_ALT
}

/// The workspace of `agent_id`, opened through `stores`.
fn open_workspace(
    skills: &SkillsService, stores: &StoreFactory, agent_id: &str,
) -> Result<Workspace, TurnError> {
    let agent = skills.agent(agent_id)?;
    let location = agent.workspace.ok_or_else(|| {
        TurnError::BadEvent(format!("agent {agent_id} has no workspace configured"))
    })?;
    let uri = SourceUri::parse(&location).map_err(|err| TurnError::BadEvent(err.to_string()))?;
    let (store, prefix): (Arc<dyn ObjectStore>, String) = stores.open(&uri)?;
    Ok(Workspace { store, prefix })
}

/// `45s`, `12m`, `3h 5m`, `2d 4h`.
fn format_age(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m", secs / 60),
        3_600..86_400 => format!("{}h {}m", secs / 3_600, secs % 3_600 / 60),
        _ => format!("{}d {}h", secs / 86_400, secs % 86_400 / 3_600),
    }
}

/// Formats milliseconds since the epoch as an RFC 3339 UTC timestamp (`…T…Z`, whole seconds);
/// see [`clawless_base::time::rfc3339_utc`].
pub fn rfc3339(ms: u64) -> String {
    clawless_base::time::rfc3339_utc(ms)
}
