//! The backend's side of node hosts: pairing, node authentication, heartbeats, sending exec
//! jobs (with grants) to a node's queue, taking a node's reports, and the durable timers that
//! turn silence into results. Shared by the `nodes` routes (Lambda and local mode) and the
//! turn service.
//!
//! Before a first attempt is sent, the backend pre-checks it against the node's reported exec
//! policy ([`precheck`]): a command that policy would make a person approve is held and the
//! chat is asked at once, exactly as for a node's "approval required" report. Everything else
//! goes to the node, which decides.
//!
//! Every result goes through [`ExecJobs::resolve`] before anything reaches the turn queue, so
//! of a node's report and a deadline timer exactly one wins, and a repeated report changes
//! nothing. Files a node uploads with a report (a command's `MEDIA:` lines) go to the blob
//! store given by [`NodesService::with_media_store`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clawless_base::transcript::ToolCall;
use clawless_core::nodes::notices::{
    ApprovalPrompt, approval_request_text, exec_denied_text, exec_finished_text, node_offline_text,
    tool_result_text,
};
use clawless_core::nodes::process_tool::{ended_status, node_offline_for_process};
use clawless_core::nodes::{BackgroundProcess, BackgroundProcesses, ProcessStatus};
use clawless_core::nodes::{CredentialError, QueueCredentialVendor, QueueCredentials};
use clawless_core::nodes::{
    ExecDelivery, ExecJobRecord, ExecJobs, ExecQueue, GrantedEntry, NodeFacts, NodeRecord,
    NodeRegistry, NodeStoreError, Precheck, ResolveOutcome, is_valid_node_id, precheck,
};
use clawless_core::session::{QueueError, TurnQueue};
use clawless_core::timers::timer_redelivery;
use clawless_core::timers::{Timer, Timers};
use clawless_core::tools::ToolOutput;
use clawless_core::turn::events::{ApprovalDecision, SessionEvent, TurnEvent};
use clawless_exec::node::credentials::MAX_CREDENTIAL_LIFETIME;
use clawless_exec::node::wire::{
    Envelope, ExecJob, ExecReport, Grant, GrantDecision, JobSandbox, NodeMessage, NodeResult,
    PolicyUpdate, ProcessExit, ProcessJob, ProcessReport, SignedGrant, WireError, clamp_yield_ms,
    exit_event_text, is_secret_env_name, running_text, secret_hash, signing_key,
    verify_node_secret,
};
use clawless_exec::{AllowlistEntry, Security};
use serde::{Deserialize, Serialize};

use crate::exec_media::{rewrite_media_lines, store_report_media};
use crate::ingress::enqueue;
use clawless_base::clock::Clock;
use clawless_base::media_lines::mentions_media;
use clawless_base::object_store::ObjectStore;

/// The result of a sandboxed session's `exec` when no paired node host advertises a jail
/// (OpenClaw's text for a missing sandbox runtime, then what to do about it).
pub const NO_JAIL_TEXT: &str = "exec host=sandbox requires a sandbox runtime for this session.\n\
     No paired node host runs a jail: install bubblewrap on a node host and restart `clawless node run`.";

/// Where an `exec` job runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobPlacement {
    /// On a node host, as the node's user (the owner's own sessions).
    Host,
    /// In a node host's jail (a sandboxed session's).
    Jail(JobSandbox),
    /// On a node host's bare host though the session is sandboxed (elevated), after an owner
    /// approves it.
    ElevatedHost,
}

/// What `exec` with `background: true` answers when its command would need a person's
/// approval (spec §4.6): background mode needs a command the policy allows without asking.
pub const BACKGROUND_NEEDS_PREAPPROVAL: &str =
    "Background mode requires pre-approved policy (allow-always or ask=off).";

/// The prefix of an `exec` result whose `background`/`yieldMs` could not be honoured because
/// the `process` tool is not offered (spec §4.1).
pub const BACKGROUND_DISABLED_WARNING: &str =
    "Warning: background execution is disabled; running synchronously.";

/// The prefix of the system event id of a background command's end (`exec-exit:<node
/// id>:<session id>`): the session takes it as an exec completion (wake reason `exec-event`).
pub const EXEC_EXIT_EVENT_PREFIX: &str = "exec-exit:";

/// The end of an exec job's nonce when the model asked to background but `process` is not
/// offered: its result starts with [`BACKGROUND_DISABLED_WARNING`].
const SYNC_WARNING_NONCE_SUFFIX: &str = "-sync";

/// Default `tools.exec.backgroundMs`: how long an `exec` waits before it backgrounds.
pub const DEFAULT_BACKGROUND_MS: u64 = 10_000;

/// The background-exec settings of `tools.exec` (spec §4.6): `backgroundMs` (10,000),
/// `notifyOnExit` (true), `notifyOnExitEmptySuccess` (false). Other keys of `tools.exec` are
/// left to the tool policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackgroundSettings {
    /// How long an `exec` waits before it backgrounds (clamped 10…120,000 ms).
    pub background_ms: u64,
    /// Whether a backgrounded command's end wakes the session with a system event.
    pub notify_on_exit: bool,
    /// Whether a success without output wakes it too.
    pub notify_on_exit_empty_success: bool,
}

impl Default for BackgroundSettings {
    fn default() -> Self {
        Self {
            background_ms: DEFAULT_BACKGROUND_MS,
            notify_on_exit: true,
            notify_on_exit_empty_success: false,
        }
    }
}

impl BackgroundSettings {
    /// The settings in a `tools.exec` block; an absent block or key keeps its default, a key
    /// of the wrong type is an error naming it.
    pub fn from_tools_exec(block: Option<&serde_json::Value>) -> Result<Self, String> {
        let mut settings = Self::default();
        let Some(block) = block else {
            return Ok(settings);
        };
        if let Some(value) = block.get("backgroundMs") {
            let ms = value.as_u64().ok_or_else(|| {
                format!("tools.exec.backgroundMs must be a whole number of ms, not {value}")
            })?;
            settings.background_ms = clamp_yield_ms(ms.max(1));
        }
        for (key, slot) in [
            ("notifyOnExit", &mut settings.notify_on_exit),
            (
                "notifyOnExitEmptySuccess",
                &mut settings.notify_on_exit_empty_success,
            ),
        ] {
            if let Some(value) = block.get(key) {
                *slot = value.as_bool().ok_or_else(|| {
                    format!("tools.exec.{key} must be true or false, not {value}")
                })?;
            }
        }
        Ok(settings)
    }
}

/// How an `exec` call may background, as the turn decides it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExecOptions {
    /// The `process` tool is offered this turn: without it nothing backgrounds (spec §4.1).
    pub background_allowed: bool,
}

/// What an owner is told when asked to approve an elevated command.
const ELEVATED_WARNING: &str =
    "Elevated: a sandboxed session asks to run this on the node host itself, outside its jail.";

/// Why a sandboxed session's command goes nowhere but a jail.
const JAIL_ONLY: &str = "A sandboxed session's commands run only in a node host's jail.";

/// The refusal of an `exec` call's `host` (OpenClaw's argument), if any: a sandboxed call
/// may not ask for a bare host (`gateway`, `node`; OpenClaw's TV-15, without its config
/// override), and an unsandboxed one has no sandbox to ask for (TV-16).
fn host_refusal(host: Option<&str>, sandboxed: bool) -> Option<String> {
    let host = host.map(str::trim).filter(|host| !host.is_empty())?;
    match (host.to_ascii_lowercase().as_str(), sandboxed) {
        ("auto", _) | ("sandbox", true) => None,
        ("sandbox", false) => Some(
            "exec host=sandbox requires a sandbox runtime for this session.\n\
             Enable sandbox mode (`agents.defaults.sandbox.mode=\"non-main\"` or `\"all\"`) \
             or use host=auto/gateway/node."
                .to_owned(),
        ),
        (_, true) => Some(format!(
            "exec host not allowed (requested {host}; configured host is auto).\n{JAIL_ONLY}"
        )),
        ("gateway" | "node", false) => None,
        (other, false) => Some(format!(
            "exec: unknown host {other:?} (use auto, sandbox, gateway or node)"
        )),
    }
}

/// How long a pairing code stays valid.
pub const PAIRING_CODE_TTL: Duration = Duration::from_secs(10 * 60);
/// How often a node checks in (heartbeat, `skills.bins`, credentials).
pub const NODE_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);
/// A node not seen for two heartbeat intervals is offline.
pub const NODE_OFFLINE_AFTER: Duration = Duration::from_secs(2 * 60);
/// Default command timeout when the model gives none.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest command timeout a model may ask for.
pub const MAX_EXEC_TIMEOUT: Duration = Duration::from_secs(3_600);
/// Default time a job may wait in the queue and report back on top of its command timeout.
pub const JOB_DEADLINE_GRACE: Duration = Duration::from_secs(120);
/// How long a received job stays invisible: longer than any job may run, so a running job is
/// never handed out twice. A node that dies mid-job reports it as interrupted when it
/// restarts; a node that never comes back is answered by the job's deadline timer.
pub const JOB_VISIBILITY: Duration = Duration::from_secs(3_600 + 300);
/// How long an approval request waits for an answer (spec §7.2).
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Exec settings of a deployment (`exec:` in `clawless.yaml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ExecSettings {
    /// The node host that runs a command when the model names none. Unset: the only active
    /// node, if there is exactly one.
    pub node: Option<String>,
    /// Command timeout in seconds when the model gives none (a model may ask for at most an
    /// hour).
    pub timeout_sec: u64,
    /// How long an approval request waits for an owner's `/approve`, in seconds.
    pub approval_timeout_sec: u64,
    /// What happens when nobody answers an approval request in time: `deny` (the command
    /// does not run), `allowlist` (treated as an allowlist miss: the node already said its
    /// allowlist does not cover the command, so it does not run either) or `full` (it runs).
    pub ask_fallback: Security,
    /// Seconds after which a node not heard from is offline (two heartbeat intervals).
    pub node_offline_after_sec: u64,
    /// Seconds a job may wait in the queue and take to report back on top of its command
    /// timeout; its deadline fires after both.
    pub deadline_grace_sec: u64,
}

impl Default for ExecSettings {
    fn default() -> Self {
        Self {
            node: None,
            timeout_sec: DEFAULT_EXEC_TIMEOUT.as_secs(),
            approval_timeout_sec: DEFAULT_APPROVAL_TIMEOUT.as_secs(),
            ask_fallback: Security::Deny,
            node_offline_after_sec: NODE_OFFLINE_AFTER.as_secs(),
            deadline_grace_sec: JOB_DEADLINE_GRACE.as_secs(),
        }
    }
}

/// Why a nodes operation failed.
#[derive(Debug, thiserror::Error)]
pub enum NodesError {
    /// Unknown node, wrong secret, revoked node, or a bad signature: 401.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// A malformed request: 400 with the reason.
    #[error("{0}")]
    BadRequest(String),
    /// Storage failed; retrying may help.
    #[error(transparent)]
    Store(#[from] NodeStoreError),
    /// A queue failed; retrying may help.
    #[error(transparent)]
    Queue(#[from] QueueError),
    /// Queue credentials could not be vended.
    #[error(transparent)]
    Credentials(#[from] CredentialError),
    /// Something the service relies on failed (randomness, a stored document).
    #[error("internal error: {0}")]
    Internal(String),
}

/// A node's answer to pairing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Paired {
    /// The node's id.
    pub node_id: String,
    /// Its secret: shown once, stored only as a hash.
    pub secret: String,
    /// Its queue (URL on AWS, name locally).
    pub queue: String,
}

/// A node's pairing request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PairRequest {
    /// The one-time code the operator was shown.
    pub code: String,
    /// What the node reports about itself.
    pub facts: NodeFacts,
}

/// What the backend tells a node at each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatReply {
    /// The registry's policy version for the node.
    pub policy_version: u64,
    /// Entries granted from the chat, as signed policy updates.
    pub granted: Vec<Envelope>,
}

/// What became of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOutcome {
    /// Recorded, and the turn resumes.
    Recorded,
    /// The node asks for a person's approval; the chat is asked.
    ApprovalRequested,
    /// An unknown job, or one already resolved: nothing changed.
    Ignored,
}

/// What became of a timer the timer queue delivered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerFired {
    /// Due: its event is on the turn queue.
    Forwarded,
    /// Early: sent to the timer queue again for the rest of its wait.
    Rescheduled,
}

/// What the turn learns from [`NodesService::dispatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// The job is on the node's queue; its result comes back as an event.
    Sent,
    /// The call ends now with this result (no node, node offline, bad arguments).
    Resolved(ToolOutput),
}

/// The `exec` tool's arguments, as the model gives them.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecArgs {
    command: String,
    #[serde(default)]
    node: Option<String>,
    #[serde(default, alias = "cwd")]
    workdir: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    timeout: Option<f64>,
    /// OpenClaw's `host` (`auto`, `sandbox`, `gateway`, `node`): not offered in the schema,
    /// but a model used to OpenClaw may send it, and it never leads out of a sandbox.
    #[serde(default)]
    host: Option<String>,
    /// Wait this long (ms), then background (spec §4.1).
    #[serde(default)]
    yield_ms: Option<f64>,
    /// Background at once.
    #[serde(default)]
    background: Option<bool>,
    /// Run in a pseudo-terminal.
    #[serde(default)]
    pty: Option<bool>,
}

impl ExecArgs {
    /// True when the model asked for background mode itself (`background: true` or a
    /// `yieldMs`).
    fn asks_background(&self) -> bool {
        self.background == Some(true) || self.yield_ms.is_some()
    }

    /// The job's `yield_ms`: `None` (run to the end) when backgrounding is not allowed, `0`
    /// for `background: true`, the clamped `yieldMs`, else the configured default.
    fn job_yield_ms(&self, allowed: bool, default_ms: u64) -> Option<u64> {
        if !allowed {
            return None;
        }
        if self.background == Some(true) {
            return Some(0);
        }
        let requested = self
            .yield_ms
            .filter(|ms| ms.is_finite())
            .map_or(default_ms, |ms| {
                // `yieldMs` is clamped to 10 ms at least (vector 14); only `background`
                // yields at once.
                if ms <= 1.0 {
                    1
                } else if ms >= YIELD_CAP_F64 {
                    u64::MAX
                } else {
                    // Positive and below the cap: the cast cannot overflow.
                    ms.ceil() as u64
                }
            });
        Some(clamp_yield_ms(requested))
    }

    /// The arguments of an `exec` call, or why it cannot be sent: unreadable, an empty
    /// command, or a `host` it may not have ([`host_refusal`]).
    fn of_call(call: &ToolCall, sandboxed: bool) -> Result<Self, String> {
        let args: Self = serde_json::from_value(call.input.clone())
            .map_err(|err| format!("exec: invalid arguments: {err}"))?;
        if args.command.trim().is_empty() {
            return Err("exec: `command` must not be empty".to_owned());
        }
        match host_refusal(args.host.as_deref(), sandboxed) {
            Some(refused) => Err(refused),
            None => Ok(args),
        }
    }
}

/// Any `yieldMs` at or over this is clamped to the maximum anyway.
const YIELD_CAP_F64: f64 = 1e12;

/// The ports and settings the nodes service runs on.
#[derive(Clone)]
pub struct NodesDeps {
    /// Paired nodes.
    pub registry: Arc<dyn NodeRegistry>,
    /// Exec jobs.
    pub jobs: Arc<dyn ExecJobs>,
    /// Per-node exec queues.
    pub queues: Arc<dyn ExecQueue>,
    /// Durable timers.
    pub timers: Arc<dyn Timers>,
    /// The turn queue, where results and timeouts resume turns.
    pub turns: Arc<dyn TurnQueue>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// Exec settings.
    pub settings: ExecSettings,
}

/// Pairing, authentication, jobs, reports and timers for node hosts.
pub struct NodesService {
    deps: NodesDeps,
    /// Where files uploaded with reports go (`media/outbound/…`); without it they are refused.
    media: Option<Arc<dyn ObjectStore>>,
    /// The index of backgrounded commands; without it nothing backgrounds and `process` is
    /// not offered.
    processes: Option<Arc<dyn BackgroundProcesses>>,
    /// `tools.exec`'s background settings.
    background: BackgroundSettings,
}

impl std::fmt::Debug for NodesService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodesService")
            .field("settings", &self.deps.settings)
            .finish_non_exhaustive()
    }
}

impl NodesService {
    /// A service over these ports.
    pub fn new(deps: NodesDeps) -> Self {
        Self {
            deps,
            media: None,
            processes: None,
            background: BackgroundSettings::default(),
        }
    }

    /// Stores the files node hosts upload with their reports (a command's `MEDIA:` lines) in
    /// `blobs`, under `media/outbound/<sha256>.<ext>` ([`crate::exec_media`]). Without a store
    /// such files are refused and the result says so.
    pub fn with_media_store(mut self, blobs: Arc<dyn ObjectStore>) -> Self {
        self.media = Some(blobs);
        self
    }

    /// Keeps the index of backgrounded commands in `index` (spec §4.3): with it, `exec`
    /// backgrounds and the `process` tool is offered.
    pub fn with_process_index(mut self, index: Arc<dyn BackgroundProcesses>) -> Self {
        self.processes = Some(index);
        self
    }

    /// Uses `settings` (`tools.exec`'s `backgroundMs`, `notifyOnExit`, …).
    pub fn with_background_settings(mut self, settings: BackgroundSettings) -> Self {
        self.background = settings;
        self
    }

    /// True when commands can background (an index is kept): the `process` tool exists.
    pub fn backgrounds(&self) -> bool {
        self.processes.is_some()
    }

    /// Now, by the service's clock.
    pub fn now_ms(&self) -> u64 {
        self.deps.clock.now_ms()
    }

    /// The background settings.
    pub fn background_settings(&self) -> BackgroundSettings {
        self.background
    }

    /// The exec settings.
    pub fn settings(&self) -> &ExecSettings {
        &self.deps.settings
    }

    /// Makes a one-time pairing code (shown to the operator; stored only as a hash).
    pub async fn create_pairing_code(&self) -> Result<(String, u64), NodesError> {
        let code = random_code()?;
        let expires_at_ms = self.deps.clock.now_ms() + millis(PAIRING_CODE_TTL);
        self.deps
            .registry
            .create_pairing(&secret_hash(&normalize_code(&code)), expires_at_ms)
            .await?;
        Ok((code, expires_at_ms))
    }

    /// Exchanges a pairing code for a node id, secret and queue.
    pub async fn pair(&self, request: &PairRequest) -> Result<Paired, NodesError> {
        let now = self.deps.clock.now_ms();
        let code_hash = secret_hash(&normalize_code(&request.code));
        if !self.deps.registry.redeem_pairing(&code_hash, now).await? {
            return Err(NodesError::Unauthorized(
                "unknown, used or expired pairing code".to_owned(),
            ));
        }
        let node_id = format!("node-{}", &random_hex(6)?);
        let secret = random_hex(32)?;
        let queue = self.deps.queues.create_node_queue(&node_id).await?;
        let record = NodeRecord {
            node_id: node_id.clone(),
            display_name: request.facts.display_name.clone(),
            secret_hash: secret_hash(&secret),
            platform: request.facts.platform.clone(),
            path: request.facts.path.clone(),
            skill_bins: request.facts.skill_bins.clone(),
            queue: queue.clone(),
            paired_at_ms: now,
            last_seen_ms: now,
            revoked: false,
            revoked_at_ms: None,
            granted: Vec::new(),
            policy_version: 0,
            exec: request.facts.exec.clone(),
        };
        self.deps.registry.register(&record).await?;
        tracing::info!(node = %node_id, "node paired");
        Ok(Paired {
            node_id,
            secret,
            queue,
        })
    }

    /// The node these credentials belong to; refuses unknown and revoked nodes.
    pub async fn authenticate(
        &self, node_id: &str, secret: &str,
    ) -> Result<NodeRecord, NodesError> {
        if !is_valid_node_id(node_id) {
            return Err(NodesError::Unauthorized("unknown node".to_owned()));
        }
        let Some(record) = self.deps.registry.get(node_id).await? else {
            return Err(NodesError::Unauthorized("unknown node".to_owned()));
        };
        if !verify_node_secret(secret, &record.secret_hash) {
            return Err(NodesError::Unauthorized("bad node credentials".to_owned()));
        }
        if record.revoked {
            return Err(NodesError::Unauthorized(format!(
                "node {node_id} is revoked"
            )));
        }
        Ok(record)
    }

    /// Records a heartbeat and answers with the node's granted entries.
    pub async fn heartbeat(
        &self, node: &NodeRecord, facts: &NodeFacts,
    ) -> Result<HeartbeatReply, NodesError> {
        let now = self.deps.clock.now_ms();
        if !self
            .deps
            .registry
            .heartbeat(&node.node_id, facts, now)
            .await?
        {
            return Err(NodesError::Unauthorized(format!(
                "node {} is revoked",
                node.node_id
            )));
        }
        let key = signing_key(&node.secret_hash);
        let granted = node
            .granted
            .iter()
            .map(|granted| {
                Envelope::seal(
                    &NodeMessage::PolicyUpdate(PolicyUpdate {
                        node_id: node.node_id.clone(),
                        agent_id: granted.agent_id.clone(),
                        entry: granted.entry.clone(),
                        policy_version: node.policy_version,
                        nonce: format!("heartbeat-{now}-{}", granted.granted_at_ms),
                        expires_at_ms: now + millis(NODE_HEARTBEAT_INTERVAL) * 2,
                    }),
                    &key,
                )
            })
            .collect::<Result<Vec<_>, WireError>>()
            .map_err(|err| NodesError::BadRequest(err.to_string()))?;
        Ok(HeartbeatReply {
            policy_version: node.policy_version,
            granted,
        })
    }

    /// Receives jobs for a node (local mode, where nodes poll over HTTP).
    pub async fn receive_jobs(
        &self, node: &NodeRecord, wait: Duration,
    ) -> Result<Vec<ExecDelivery>, NodesError> {
        Ok(self
            .deps
            .queues
            .receive(&node.queue, 10, wait, JOB_VISIBILITY)
            .await?)
    }

    /// Acknowledges a job delivery (local mode).
    pub async fn ack_job(&self, node: &NodeRecord, receipt: &str) -> Result<(), NodesError> {
        Ok(self.deps.queues.delete(&node.queue, receipt).await?)
    }

    /// Sends the job for an `exec` call, or resolves the call at once when it cannot be sent.
    /// A jailed job (the session is sandboxed) goes only to a node that advertises a jail,
    /// with no credential-looking environment variables; an elevated one runs on a node's
    /// bare host only once an owner approved it.
    pub async fn dispatch(
        &self, session_key: &str, agent_id: &str, job_id: &str, call: &ToolCall,
        approved: Option<(ApprovalDecision, String)>, placement: JobPlacement,
    ) -> Result<Dispatch, NodesError> {
        self.dispatch_exec(
            session_key,
            agent_id,
            job_id,
            call,
            approved,
            placement,
            ExecOptions::default(),
        )
        .await
    }

    /// [`NodesService::dispatch`] with the turn's background options: when `process` is
    /// offered (and an index is kept), the job yields after `yieldMs` (default
    /// `tools.exec.backgroundMs`; `background: true`: at once) and the node answers `running`.
    /// A command that needs approval is approved first and then runs to its end; with
    /// `background: true` it is refused ([`BACKGROUND_NEEDS_PREAPPROVAL`]).
    #[allow(
        clippy::too_many_arguments,
        reason = "dispatch's arguments plus the turn's options"
    )]
    pub async fn dispatch_exec(
        &self, session_key: &str, agent_id: &str, job_id: &str, call: &ToolCall,
        approved: Option<(ApprovalDecision, String)>, placement: JobPlacement,
        options: ExecOptions,
    ) -> Result<Dispatch, NodesError> {
        let (sandbox, elevated) = match placement {
            JobPlacement::Host => (None, false),
            JobPlacement::Jail(sandbox) => (Some(sandbox), false),
            JobPlacement::ElevatedHost => (None, true),
        };
        let now = self.deps.clock.now_ms();
        let mut args = match ExecArgs::of_call(call, sandbox.is_some()) {
            Ok(args) => args,
            Err(refused) => return Ok(Dispatch::Resolved(ToolOutput::error(refused))),
        };
        let node = match self
            .pick_node(args.node.as_deref(), sandbox.is_some())
            .await?
        {
            Ok(node) => node,
            Err(output) => return Ok(Dispatch::Resolved(output)),
        };
        if sandbox.is_some() {
            args.env.retain(|name, _| !is_secret_env_name(name));
        }
        let background_allowed = options.background_allowed && self.backgrounds();
        // An approved attempt runs to its end: background mode needs a pre-approved command.
        let yield_ms = match approved {
            Some(_) => None,
            None => args.job_yield_ms(background_allowed, self.background.background_ms),
        };
        // Spec §4.1: asked to background without a timeout, a command has none (here: the
        // longest a model may ask for).
        let timeout = match (args.timeout, args.asks_background() && yield_ms.is_some()) {
            (None, true) => MAX_EXEC_TIMEOUT,
            (requested, _) => exec_timeout(requested, self.deps.settings.timeout_sec),
        };
        let attempt = u32::from(approved.is_some());
        let answer_within = yield_ms.map_or(millis(timeout), |ms| ms.min(millis(timeout)));
        let deadline_ms = now
            + answer_within
            + millis(Duration::from_secs(self.deps.settings.deadline_grace_sec));
        let mut job = ExecJob {
            job_id: job_id.to_owned(),
            attempt,
            node_id: node.node_id.clone(),
            agent_id: agent_id.to_owned(),
            session_key: session_key.to_owned(),
            call_id: call.id.clone(),
            argv: vec!["/bin/sh".to_owned(), "-lc".to_owned(), args.command.clone()],
            raw_command: args.command.clone(),
            cwd: args.workdir.clone(),
            env: args.env.clone(),
            timeout_ms: millis(timeout),
            deadline_ms,
            issued_at_ms: now,
            // The nonce also carries, signed with the job, that its result gets the
            // background-disabled warning (the model asked to background without `process`).
            nonce: if args.asks_background() && !background_allowed {
                format!("{job_id}-{attempt}{SYNC_WARNING_NONCE_SUFFIX}")
            } else {
                format!("{job_id}-{attempt}")
            },
            grant: None,
            // A jail has no terminal to give (spec §4.1: `pty` is ignored in a sandbox).
            pty: args.pty == Some(true) && sandbox.is_none(),
            sandbox,
            yield_ms,
        };
        // The backend's pre-check (first attempt only): when the node's reported policy needs a
        // person's approval and the report covers every executable the command names, ask
        // now; the node would only refuse. The node stays authoritative either way.
        let held = match &approved {
            // A sandboxed session's command outside its jail: an owner approves each one.
            None if elevated => Some((false, vec![ELEVATED_WARNING.to_owned()])),
            None => match precheck(&node, &job) {
                Precheck::NeedsApproval {
                    allow_always,
                    warnings,
                } => Some((allow_always, warnings)),
                Precheck::Send => None,
            },
            Some(_) => None,
        };
        if held.is_some() && yield_ms == Some(0) {
            return Ok(Dispatch::Resolved(ToolOutput::error(
                BACKGROUND_NEEDS_PREAPPROVAL,
            )));
        }
        let key = signing_key(&node.secret_hash);
        if let Some((decision, approved_by)) = &approved {
            job.grant = Some(seal_grant(&job, *decision, approved_by, &key)?);
        }
        let envelope = Envelope::seal(&NodeMessage::Job(job.clone()), &key)
            .map_err(|err| NodesError::BadRequest(err.to_string()))?
            .to_json();
        let record = ExecJobRecord {
            job_id: job_id.to_owned(),
            node_id: node.node_id.clone(),
            session_key: session_key.to_owned(),
            agent_id: agent_id.to_owned(),
            call_id: call.id.clone(),
            attempt,
            envelope: envelope.clone(),
            created_at_ms: now,
            deadline_ms,
            result: None,
            resolved_at_ms: None,
        };
        // A redelivered turn event re-sends the stored envelope: the node's journal makes a
        // second delivery harmless, and a lost first send is repaired.
        let Some(envelope) = self.store_job(&record).await? else {
            return Ok(Dispatch::Sent);
        };
        if let Some((allow_always, warnings)) = held {
            // Recorded but not sent: the approval's answer sends attempt 1 with a grant, and
            // its timeout (not a job deadline) ends the wait. A redelivered turn event asks
            // again; the turn takes one request per call.
            self.request_approval(&job, &node.node_id, allow_always, &warnings)
                .await?;
            tracing::info!(node = %node.node_id, job = %job_id, "exec job held: the node's policy needs approval");
            return Ok(Dispatch::Sent);
        }
        self.schedule_deadline(
            session_key,
            agent_id,
            &call.id,
            job_id,
            attempt,
            deadline_ms,
        )
        .await?;
        self.deps.queues.send(&node.queue, &envelope).await?;
        tracing::info!(node = %node.node_id, job = %job_id, attempt, "exec job sent");
        Ok(Dispatch::Sent)
    }

    /// Arms the timer that answers call `call_id` with a timeout if attempt `attempt` of job
    /// `job_id` has no result by `deadline_ms`.
    async fn schedule_deadline(
        &self, session_key: &str, agent_id: &str, call_id: &str, job_id: &str, attempt: u32,
        deadline_ms: u64,
    ) -> Result<(), NodesError> {
        self.deps
            .timers
            .schedule(&Timer {
                timer_id: format!("deadline:{job_id}:{attempt}"),
                due_at_ms: deadline_ms,
                event: SessionEvent {
                    session_key: session_key.to_owned(),
                    agent_id: agent_id.to_owned(),
                    event: TurnEvent::ToolTimeout {
                        call_id: call_id.to_owned(),
                        attempt,
                    },
                },
            })
            .await?;
        Ok(())
    }

    /// Stores a job's record and returns the envelope to send: the stored one when a
    /// redelivered event finds the job already there, `None` when it needs no sending (it
    /// has its result, or a later attempt replaced it).
    async fn store_job(&self, record: &ExecJobRecord) -> Result<Option<String>, NodesError> {
        let (job_id, attempt) = (record.job_id.as_str(), record.attempt);
        Ok(Some(if attempt == 0 {
            if self.deps.jobs.create(record).await? {
                record.envelope.clone()
            } else {
                match self.deps.jobs.get(job_id).await? {
                    Some(existing) if existing.result.is_none() => existing.envelope,
                    _ => return Ok(None),
                }
            }
        } else {
            self.deps.jobs.create(record).await?;
            self.deps
                .jobs
                .next_attempt(job_id, attempt, &record.envelope, record.deadline_ms)
                .await?;
            match self.deps.jobs.get(job_id).await? {
                Some(existing) if existing.result.is_none() && existing.attempt == attempt => {
                    existing.envelope
                }
                _ => return Ok(None),
            }
        }))
    }

    /// The node for a call: the one named, else the configured default, else the only
    /// active node; for a sandboxed call, only among nodes that advertise a jail.
    /// `Err(output)` when none can take the job.
    async fn pick_node(
        &self, requested: Option<&str>, jailed: bool,
    ) -> Result<Result<NodeRecord, ToolOutput>, NodesError> {
        let now = self.deps.clock.now_ms();
        let wanted = requested
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .or_else(|| self.deps.settings.node.clone());
        let mut nodes = self.deps.registry.list().await?;
        if jailed {
            // A sandboxed command never reaches a node that would have to run it bare (a
            // named one included: no `node` argument leads out of the sandbox).
            if let Some(name) = &wanted
                && nodes.iter().any(|node| {
                    !node.can_jail()
                        && (node.node_id == *name || node.display_name.as_deref() == Some(name))
                })
            {
                return Ok(Err(ToolOutput::error(format!(
                    "exec host not allowed (requested node {name}, which runs no jail).\n{JAIL_ONLY}"
                ))));
            }
            nodes.retain(NodeRecord::can_jail);
            if nodes.is_empty() {
                return Ok(Err(ToolOutput::error(NO_JAIL_TEXT)));
            }
        }
        let chosen = match wanted {
            Some(name) => nodes.into_iter().find(|node| {
                node.node_id == name || node.display_name.as_deref() == Some(name.as_str())
            }),
            None => {
                let (mut active, revoked): (Vec<NodeRecord>, Vec<NodeRecord>) =
                    nodes.into_iter().partition(|node| !node.revoked);
                if active.len() > 1 {
                    let names: Vec<String> =
                        active.iter().map(|node| node.node_id.clone()).collect();
                    return Ok(Err(ToolOutput::error(format!(
                        "Several node hosts are paired ({}); name one with the `node` argument.",
                        names.join(", ")
                    ))));
                }
                // With no active node, the last one seen answers (as revoked, so offline).
                active
                    .pop()
                    .or_else(|| revoked.into_iter().max_by_key(|node| node.last_seen_ms))
            }
        };
        let Some(node) = chosen else {
            return Ok(Err(ToolOutput::error(match requested {
                Some(name) => format!("No node host named {name} is paired with clawless."),
                None => {
                    "No node host is paired with clawless; run `clawless nodes pair`.".to_owned()
                }
            })));
        };
        if node.revoked {
            return Ok(Err(ToolOutput::error(node_offline_text(
                &node.node_id,
                "revoked",
            ))));
        }
        let silent_for = now.saturating_sub(node.last_seen_ms);
        if silent_for
            > self
                .deps
                .settings
                .node_offline_after_sec
                .saturating_mul(1000)
        {
            return Ok(Err(ToolOutput::error(node_offline_text(
                &node.node_id,
                &format!("not seen for {} s", silent_for / 1000),
            ))));
        }
        Ok(Ok(node))
    }

    /// Takes a node's signed report: records the first result of the current attempt and
    /// resumes the turn, or turns an "approval required" refusal into a chat request. Files
    /// the node uploaded for the command's `MEDIA:` lines are stored first, and the result the
    /// model sees names their blob keys ([`crate::exec_media`]).
    ///
    /// The body is a [`NodeResult`]: an exec report (also untagged, from older nodes), the
    /// answer to a `process` job, or a backgrounded command's exit.
    pub async fn submit_report(
        &self, node: &NodeRecord, body: &str,
    ) -> Result<ReportOutcome, NodesError> {
        let envelope =
            Envelope::parse(body).map_err(|err| NodesError::BadRequest(err.to_string()))?;
        let result: NodeResult = envelope
            .open(&signing_key(&node.secret_hash))
            .map_err(|err| match err {
                WireError::Malformed(reason) => NodesError::BadRequest(reason),
                other => NodesError::Unauthorized(other.to_string()),
            })?;
        let signed_for = match &result {
            NodeResult::Exec(report) => &report.node_id,
            NodeResult::Process(report) => &report.node_id,
            NodeResult::Exit(exit) => &exit.node_id,
        };
        if *signed_for != node.node_id {
            return Err(NodesError::Unauthorized(
                "report signed for another node".to_owned(),
            ));
        }
        match result {
            NodeResult::Exec(report) => self.submit_exec_report(node, report).await,
            NodeResult::Process(report) => self.submit_process_report(node, report).await,
            NodeResult::Exit(exit) => self.submit_exit(node, &exit).await,
        }
    }

    /// An exec job's report: the first result of the current attempt resumes the turn (a
    /// `running` one, after the index has the process); an "approval required" refusal
    /// asks the chat.
    async fn submit_exec_report(
        &self, node: &NodeRecord, report: ExecReport,
    ) -> Result<ReportOutcome, NodesError> {
        let Some(job_record) = self.deps.jobs.get(&report.job_id).await? else {
            return Ok(ReportOutcome::Ignored);
        };
        if job_record.node_id != node.node_id
            || job_record.result.is_some()
            || job_record.attempt != report.attempt
        {
            return Ok(ReportOutcome::Ignored);
        }
        let Ok(job) = stored_job(&job_record) else {
            // A `process` job's id in an exec report: not this job's answer.
            return Ok(ReportOutcome::Ignored);
        };
        let event_for = |event: TurnEvent| SessionEvent {
            session_key: job_record.session_key.clone(),
            agent_id: job_record.agent_id.clone(),
            event,
        };
        if let Some(denial) = &report.denial
            && denial.approval_required
            && job.grant.is_none()
        {
            let allow_always = denial
                .allowed_decisions
                .iter()
                .any(|decision| decision == "allow-always");
            self.request_approval(&job, &node.node_id, allow_always, &[])
                .await?;
            return Ok(ReportOutcome::ApprovalRequested);
        }
        // Indexed before the result is recorded (a write that changes nothing when repeated),
        // so a report retried after a failure here still indexes the process.
        if let Some(running) = &report.running {
            self.index_running(&job, running).await?;
        }
        let now = self.deps.clock.now_ms();
        let report = self.with_report_media(report).await;
        let result_json = serde_json::to_string(&report)
            .map_err(|err| NodesError::BadRequest(err.to_string()))?;
        match self
            .deps
            .jobs
            .resolve(&report.job_id, report.attempt, &result_json, now)
            .await?
        {
            ResolveOutcome::Recorded => {}
            _ => return Ok(ReportOutcome::Ignored),
        }
        let (text, is_error) = if let Some(running) = &report.running {
            (running_text(running), false)
        } else if report.interrupted {
            (
                format!(
                    "The node host {} stopped while the command was running; it was not run again. {}",
                    node.node_id,
                    report.outcome.error.clone().unwrap_or_default()
                )
                .trim_end()
                .to_owned(),
                true,
            )
        } else if job.nonce.ends_with(SYNC_WARNING_NONCE_SUFFIX) {
            let (text, is_error) = tool_result_text(&report.outcome);
            (format!("{BACKGROUND_DISABLED_WARNING}\n\n{text}"), is_error)
        } else {
            tool_result_text(&report.outcome)
        };
        // After a person approved, the chat hears how the command ended (spec §7.8).
        let notice = job.grant.as_ref().map(|_| match &report.denial {
            Some(denial) => {
                exec_denied_text(&node.node_id, &job.job_id, &denial.reason, &job.raw_command)
            }
            None => exec_finished_text(&node.node_id, &job.job_id, &report.outcome),
        });
        for entry in report_grants(&report, &job) {
            let granted = GrantedEntry {
                agent_id: job.agent_id.clone(),
                entry,
                granted_at_ms: now,
            };
            let version = self.deps.registry.grant(&node.node_id, &granted).await?;
            self.send_policy_update(node, &granted, version).await?;
        }
        enqueue(
            self.deps.turns.as_ref(),
            &event_for(TurnEvent::ToolResult {
                call_id: job.call_id.clone(),
                text,
                is_error,
                notice,
            }),
        )
        .await?;
        Ok(ReportOutcome::Recorded)
    }

    /// Records a backgrounded command in the index (a repeat changes nothing).
    async fn index_running(
        &self, job: &ExecJob, running: &clawless_exec::node::wire::RunningProcess,
    ) -> Result<(), NodesError> {
        let Some(index) = &self.processes else {
            return Ok(());
        };
        index
            .record_running(&BackgroundProcess {
                session_key: job.session_key.clone(),
                session_id: running.session_id.clone(),
                node_id: job.node_id.clone(),
                exec_job_id: job.job_id.clone(),
                command: job.raw_command.clone(),
                status: ProcessStatus::Running,
                started_at_ms: running.started_at_ms,
                ended_at_ms: None,
                exit_code: None,
            })
            .await?;
        Ok(())
    }

    /// A node's answer to a `process` job: the first one resumes the turn with exactly the
    /// node's text. A `clear` or `remove` that succeeded drops the index entry too.
    async fn submit_process_report(
        &self, node: &NodeRecord, report: ProcessReport,
    ) -> Result<ReportOutcome, NodesError> {
        let Some(record) = self.deps.jobs.get(&report.job_id).await? else {
            return Ok(ReportOutcome::Ignored);
        };
        if record.node_id != node.node_id || record.result.is_some() {
            return Ok(ReportOutcome::Ignored);
        }
        let Ok(job) = stored_process_job(&record) else {
            return Ok(ReportOutcome::Ignored);
        };
        if report.ok
            && matches!(job.action.as_str(), "clear" | "remove")
            && let (Some(index), Some(session_id)) = (&self.processes, &job.session_id)
        {
            index.remove(&job.session_key, session_id).await?;
        }
        let now = self.deps.clock.now_ms();
        let result_json = serde_json::to_string(&report)
            .map_err(|err| NodesError::BadRequest(err.to_string()))?;
        if self
            .deps
            .jobs
            .resolve(&report.job_id, record.attempt, &result_json, now)
            .await?
            != ResolveOutcome::Recorded
        {
            return Ok(ReportOutcome::Ignored);
        }
        enqueue(
            self.deps.turns.as_ref(),
            &SessionEvent {
                session_key: record.session_key.clone(),
                agent_id: record.agent_id.clone(),
                event: TurnEvent::ToolResult {
                    call_id: record.call_id.clone(),
                    text: report.text,
                    is_error: !report.ok,
                    notice: None,
                },
            },
        )
        .await?;
        Ok(ReportOutcome::Recorded)
    }

    /// A backgrounded command ended (spec §4.5): the session gets the exit's system event
    /// and a turn, once per process. The event goes on the turn queue under an id derived
    /// from the exit's `event_id` (the session takes one event per id), and only then does
    /// the conditional write move the index entry to its end; an exit whose entry has ended
    /// already changes nothing. So a node posting twice, concurrently or after a backend
    /// restart, wakes the agent once, and a crash between the two steps loses nothing.
    async fn submit_exit(
        &self, node: &NodeRecord, exit: &ProcessExit,
    ) -> Result<ReportOutcome, NodesError> {
        let Some(index) = &self.processes else {
            return Ok(ReportOutcome::Ignored);
        };
        if exit.session_id.trim().is_empty() || exit.session_key.trim().is_empty() {
            return Err(NodesError::BadRequest(
                "an exit needs a session key and a session id".to_owned(),
            ));
        }
        let known = index.get(&exit.session_key, &exit.session_id).await?;
        match &known {
            Some(entry) if entry.status.is_ended() => return Ok(ReportOutcome::Ignored),
            // Another node's process of the same id: not this node's to end.
            Some(entry) if entry.node_id != node.node_id => return Ok(ReportOutcome::Ignored),
            _ => {}
        }
        // A node may wake only a session it ran a command for: the exec job that started the
        // process must be this node's and this session's. The agent is the job's, never the
        // node's word.
        let job_id = known.as_ref().map_or(exit.exec_job_id.as_str(), |entry| {
            entry.exec_job_id.as_str()
        });
        let Some(job) = self.deps.jobs.get(job_id).await? else {
            return Ok(ReportOutcome::Ignored);
        };
        if job.node_id != node.node_id || job.session_key != exit.session_key {
            return Ok(ReportOutcome::Ignored);
        }
        let ended = BackgroundProcess {
            session_key: exit.session_key.clone(),
            session_id: exit.session_id.clone(),
            node_id: node.node_id.clone(),
            exec_job_id: job.job_id.clone(),
            command: known
                .as_ref()
                .map_or_else(|| exit.command.clone(), |entry| entry.command.clone()),
            status: ended_status(exit.success, exit.signal.as_deref()),
            started_at_ms: known
                .as_ref()
                .map_or(exit.started_at_ms, |entry| entry.started_at_ms),
            ended_at_ms: Some(exit.ended_at_ms),
            exit_code: exit.exit_code,
        };
        let settings = self.background;
        if settings.notify_on_exit
            && let Some(text) = exit_event_text(exit, settings.notify_on_exit_empty_success)
        {
            enqueue(
                self.deps.turns.as_ref(),
                &SessionEvent {
                    session_key: job.session_key.clone(),
                    agent_id: job.agent_id.clone(),
                    event: TurnEvent::SystemEvent {
                        event_id: format!("{EXEC_EXIT_EVENT_PREFIX}{}", exit.event_id),
                        text,
                        wake: true,
                    },
                },
            )
            .await?;
        }
        Ok(if index.finish(&ended).await? {
            tracing::info!(node = %node.node_id, session_id = %exit.session_id, "background command ended");
            ReportOutcome::Recorded
        } else {
            ReportOutcome::Ignored
        })
    }

    /// `process list` from the index: the session's own processes, newest first (works with
    /// the node offline). `None` when no index is kept.
    pub async fn process_list(
        &self, session_key: &str,
    ) -> Result<Option<Vec<BackgroundProcess>>, NodesError> {
        let Some(index) = &self.processes else {
            return Ok(None);
        };
        Ok(Some(index.list(session_key).await?))
    }

    /// Sends a `process` action (anything but `list`) to the node running `session_id`, as a
    /// signed job with a deadline; or answers at once: `No session found for <id>` when the
    /// session started no such process, a clear error when its node is offline or gone.
    #[allow(
        clippy::too_many_arguments,
        reason = "the call's identity plus the checked action"
    )]
    pub async fn dispatch_process(
        &self, session_key: &str, agent_id: &str, job_id: &str, call: &ToolCall, action: &str,
        session_id: &str, wait_ms: u64,
    ) -> Result<Dispatch, NodesError> {
        let Some(index) = &self.processes else {
            return Ok(Dispatch::Resolved(ToolOutput::error(
                "Background processes are not available in this deployment.",
            )));
        };
        let Some(entry) = index.get(session_key, session_id).await? else {
            return Ok(Dispatch::Resolved(ToolOutput::error(format!(
                "No session found for {session_id}"
            ))));
        };
        let now = self.deps.clock.now_ms();
        let node = match self.deps.registry.get(&entry.node_id).await? {
            Some(node) if node.revoked => {
                return Ok(Dispatch::Resolved(ToolOutput::error(
                    node_offline_for_process(session_id, &entry.node_id, "revoked"),
                )));
            }
            Some(node) => node,
            None => {
                return Ok(Dispatch::Resolved(ToolOutput::error(
                    node_offline_for_process(session_id, &entry.node_id, "no longer paired"),
                )));
            }
        };
        let silent_for = now.saturating_sub(node.last_seen_ms);
        if silent_for
            > self
                .deps
                .settings
                .node_offline_after_sec
                .saturating_mul(1000)
        {
            return Ok(Dispatch::Resolved(ToolOutput::error(
                node_offline_for_process(
                    session_id,
                    &node.node_id,
                    &format!("not seen for {} s", silent_for / 1000),
                ),
            )));
        }
        let deadline_ms =
            now + wait_ms + millis(Duration::from_secs(self.deps.settings.deadline_grace_sec));
        let job = ProcessJob {
            job_id: job_id.to_owned(),
            node_id: node.node_id.clone(),
            agent_id: agent_id.to_owned(),
            session_key: session_key.to_owned(),
            call_id: call.id.clone(),
            session_id: Some(session_id.to_owned()),
            action: action.to_owned(),
            args: call.input.clone(),
            wait_ms,
            deadline_ms,
            issued_at_ms: now,
            nonce: format!("{job_id}-process"),
        };
        let envelope = Envelope::seal(&NodeMessage::Process(job), &signing_key(&node.secret_hash))
            .map_err(|err| NodesError::BadRequest(err.to_string()))?
            .to_json();
        let record = ExecJobRecord {
            job_id: job_id.to_owned(),
            node_id: node.node_id.clone(),
            session_key: session_key.to_owned(),
            agent_id: agent_id.to_owned(),
            call_id: call.id.clone(),
            attempt: 0,
            envelope,
            created_at_ms: now,
            deadline_ms,
            result: None,
            resolved_at_ms: None,
        };
        let Some(envelope) = self.store_job(&record).await? else {
            return Ok(Dispatch::Sent);
        };
        self.schedule_deadline(session_key, agent_id, &call.id, job_id, 0, deadline_ms)
            .await?;
        self.deps.queues.send(&node.queue, &envelope).await?;
        tracing::info!(node = %node.node_id, job = %job_id, action, "process job sent");
        Ok(Dispatch::Sent)
    }

    /// `report` with its uploaded files stored and its output's `MEDIA:` lines naming them
    /// (or saying why a file is not sent), and without the files' bytes (the job record keeps
    /// the result, and a store of records has no room for files).
    async fn with_report_media(&self, mut report: ExecReport) -> ExecReport {
        let outcome = &report.outcome;
        if report.files.is_empty()
            && report.refused_files.is_empty()
            && !mentions_media(&outcome.stdout)
            && !mentions_media(&outcome.stderr)
        {
            return report;
        }
        let media =
            store_report_media(self.media.as_deref(), &report.files, &report.refused_files).await;
        report.outcome.stdout = rewrite_media_lines(&report.outcome.stdout, &media);
        report.outcome.stderr = rewrite_media_lines(&report.outcome.stderr, &media);
        for file in &mut report.files {
            file.data_base64.clear();
        }
        report
    }

    /// Asks the chat to approve `job` on `node_id` (spec §7.8): schedules the approval
    /// timeout, then puts the request on the turn queue. Used for a node's "approval required"
    /// report and for the backend's pre-check.
    async fn request_approval(
        &self, job: &ExecJob, node_id: &str, allow_always: bool, warnings: &[String],
    ) -> Result<(), NodesError> {
        let event_for = |event: TurnEvent| SessionEvent {
            session_key: job.session_key.clone(),
            agent_id: job.agent_id.clone(),
            event,
        };
        let text = approval_request_text(&ApprovalPrompt {
            job_id: &job.job_id,
            node_id,
            cwd: job.cwd.as_deref(),
            command: &job.raw_command,
            allow_always,
            warnings,
        });
        let approval_timeout = Duration::from_secs(self.deps.settings.approval_timeout_sec);
        self.deps
            .timers
            .schedule(&Timer {
                timer_id: format!("approval:{}", job.job_id),
                due_at_ms: self.deps.clock.now_ms() + millis(approval_timeout),
                event: event_for(TurnEvent::ApprovalTimeout {
                    call_id: job.call_id.clone(),
                }),
            })
            .await?;
        enqueue(
            self.deps.turns.as_ref(),
            &event_for(TurnEvent::ApprovalNeeded {
                call_id: job.call_id.clone(),
                text,
            }),
        )
        .await?;
        Ok(())
    }

    async fn send_policy_update(
        &self, node: &NodeRecord, granted: &GrantedEntry, version: u64,
    ) -> Result<(), NodesError> {
        let now = self.deps.clock.now_ms();
        let update = NodeMessage::PolicyUpdate(PolicyUpdate {
            node_id: node.node_id.clone(),
            agent_id: granted.agent_id.clone(),
            entry: granted.entry.clone(),
            policy_version: version,
            nonce: format!("policy-{}-{version}", node.node_id),
            expires_at_ms: now + millis(Duration::from_secs(24 * 3_600)),
        });
        let envelope = Envelope::seal(&update, &signing_key(&node.secret_hash))
            .map_err(|err| NodesError::BadRequest(err.to_string()))?;
        self.deps
            .queues
            .send(&node.queue, &envelope.to_json())
            .await?;
        Ok(())
    }

    /// A job deadline fired: the call resolves as timed out unless a result came first.
    /// `true` when the timeout won and the turn should take it.
    pub async fn claim_timeout(&self, job_id: &str, attempt: u32) -> Result<bool, NodesError> {
        let now = self.deps.clock.now_ms();
        let timeout = serde_json::json!({"timedOutAtMs": now}).to_string();
        Ok(matches!(
            self.deps
                .jobs
                .resolve(job_id, attempt, &timeout, now)
                .await?,
            ResolveOutcome::Recorded
        ))
    }

    /// The job record of a call, for notices.
    pub async fn job(&self, job_id: &str) -> Result<Option<(ExecJobRecord, ExecJob)>, NodesError> {
        let Some(record) = self.deps.jobs.get(job_id).await? else {
            return Ok(None);
        };
        let job = stored_job(&record)?;
        Ok(Some((record, job)))
    }

    /// Moves due timers onto the turn queue (local mode; on AWS the timer queue's consumer
    /// does the same). Returns how many fired.
    pub async fn fire_due_timers(&self, wait: Duration) -> Result<usize, NodesError> {
        let due = self
            .deps
            .timers
            .take_due(self.deps.clock.now_ms(), 10, wait)
            .await?;
        let fired = due.len();
        for timer in due {
            enqueue(self.deps.turns.as_ref(), &timer.timer.event).await?;
            self.deps.timers.ack(&timer.receipt).await?;
        }
        Ok(fired)
    }

    /// One timer delivered by the timer queue's consumer (AWS): a due timer goes onto the turn
    /// queue; an early one (SQS delays stop at 15 minutes) is scheduled again for the rest of
    /// its wait. `Err` leaves the message for redelivery.
    pub async fn fire_timer(&self, timer: &Timer) -> Result<TimerFired, NodesError> {
        let now = self.deps.clock.now_ms();
        if timer_redelivery(timer.due_at_ms, now).is_some() {
            self.deps.timers.schedule(timer).await?;
            return Ok(TimerFired::Rescheduled);
        }
        enqueue(self.deps.turns.as_ref(), &timer.event).await?;
        Ok(TimerFired::Forwarded)
    }

    /// Short-lived credentials that let `node` read its own queue, and nothing else.
    pub async fn queue_credentials(
        &self, node: &NodeRecord, vendor: &dyn QueueCredentialVendor,
    ) -> Result<QueueCredentials, NodesError> {
        if node.revoked {
            return Err(NodesError::Unauthorized(format!(
                "node {} is revoked",
                node.node_id
            )));
        }
        vendor
            .vend(&node.node_id, &node.queue, MAX_CREDENTIAL_LIFETIME)
            .await
            .map_err(NodesError::from)
    }

    /// The paired nodes that are not revoked. `exec` is offered when there is one (whether it
    /// is online is checked per call, so an offline node gives the model a clear result), and
    /// their platforms and skill bins count for skill eligibility.
    pub async fn active_nodes(&self) -> Result<Vec<NodeRecord>, NodesError> {
        let mut nodes = self.deps.registry.list().await?;
        nodes.retain(|node| !node.revoked);
        Ok(nodes)
    }

    /// Every node (for `clawless nodes list|show`).
    pub async fn list(&self) -> Result<Vec<NodeRecord>, NodesError> {
        Ok(self.deps.registry.list().await?)
    }

    /// Revokes a node: it gets 401 from now on and no jobs.
    pub async fn revoke(&self, node_id: &str) -> Result<bool, NodesError> {
        Ok(self
            .deps
            .registry
            .revoke(node_id, self.deps.clock.now_ms())
            .await?)
    }
}

/// The entries an `allow-always` grant added, as the node derived them. Only for a job the
/// backend itself granted `allow-always`, and only entries bound to their arguments: a bare
/// path entry would approve every future use of that binary.
fn report_grants(report: &ExecReport, job: &ExecJob) -> Vec<AllowlistEntry> {
    let allow_always = job
        .grant
        .as_ref()
        .and_then(|grant| serde_json::from_str::<Grant>(&grant.0.payload).ok())
        .is_some_and(|grant| grant.decision == GrantDecision::AllowAlways);
    if !allow_always || !report.outcome.success {
        return Vec::new();
    }
    report
        .allow_always_entries
        .iter()
        .filter(|entry| {
            entry.arg_pattern.is_some() && entry.pattern.starts_with('/') && entry.pattern != "*"
        })
        .map(|entry| AllowlistEntry {
            source: Some("allow-always".to_owned()),
            ..entry.clone()
        })
        .collect()
}

fn stored_job(record: &ExecJobRecord) -> Result<ExecJob, NodesError> {
    let envelope = Envelope::parse(&record.envelope)
        .map_err(|err| NodesError::Internal(format!("stored job: {err}")))?;
    match serde_json::from_str::<NodeMessage>(&envelope.payload) {
        Ok(NodeMessage::Job(job)) => Ok(job),
        Ok(_) => Err(NodesError::Internal("stored job is not a job".to_owned())),
        Err(err) => Err(NodesError::Internal(format!("stored job: {err}"))),
    }
}

fn stored_process_job(record: &ExecJobRecord) -> Result<ProcessJob, NodesError> {
    let envelope = Envelope::parse(&record.envelope)
        .map_err(|err| NodesError::Internal(format!("stored job: {err}")))?;
    match serde_json::from_str::<NodeMessage>(&envelope.payload) {
        Ok(NodeMessage::Process(job)) => Ok(job),
        Ok(_) => Err(NodesError::Internal(
            "stored job is not a process job".to_owned(),
        )),
        Err(err) => Err(NodesError::Internal(format!("stored job: {err}"))),
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Pairing codes are shown as `XXXX-XXXX`; case and dashes don't matter when typed back.
fn normalize_code(code: &str) -> String {
    code.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|ch| ch.to_ascii_uppercase())
        .collect()
}

/// Eight characters from an alphabet without look-alikes, shown as `XXXX-XXXX`.
fn random_code() -> Result<String, NodesError> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let bytes = random_bytes(8)?;
    let chars: String = bytes
        .iter()
        .map(|byte| char::from(ALPHABET[usize::from(*byte) % ALPHABET.len()]))
        .collect();
    Ok(format!("{}-{}", &chars[..4], &chars[4..]))
}

fn random_hex(bytes: usize) -> Result<String, NodesError> {
    clawless_base::ids::random_hex(bytes)
        .map_err(|err| NodesError::Internal(format!("no randomness: {err}")))
}

fn random_bytes(count: usize) -> Result<Vec<u8>, NodesError> {
    clawless_base::ids::random_bytes(count)
        .map_err(|err| NodesError::Internal(format!("no randomness: {err}")))
}

/// A call's time limit: out-of-range values (negative, NaN, huge) fall back to the default
/// or the cap.
fn exec_timeout(requested: Option<f64>, default_sec: u64) -> Duration {
    requested
        .filter(|secs| secs.is_finite() && *secs > 0.0)
        .map_or(Duration::from_secs(default_sec), |secs| {
            Duration::try_from_secs_f64(secs).unwrap_or(MAX_EXEC_TIMEOUT)
        })
        .min(MAX_EXEC_TIMEOUT)
}

/// The signed grant for `job`, approved in the chat by `approved_by`.
fn seal_grant(
    job: &ExecJob, decision: ApprovalDecision, approved_by: &str, key: &[u8],
) -> Result<SignedGrant, NodesError> {
    let decision = match decision {
        ApprovalDecision::AllowAlways => GrantDecision::AllowAlways,
        _ => GrantDecision::AllowOnce,
    };
    let grant = Grant {
        job_id: job.job_id.clone(),
        binding: job.binding(),
        decision,
        approved_by: approved_by.to_owned(),
        expires_at_ms: job.deadline_ms,
    };
    SignedGrant::seal(&grant, key).map_err(|err| NodesError::BadRequest(err.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(input: serde_json::Value) -> ExecArgs {
        let call = ToolCall {
            id: "c".to_owned(),
            name: "exec".to_owned(),
            input,
        };
        ExecArgs::of_call(&call, false).unwrap()
    }

    #[test]
    fn a_yield_is_clamped_to_10_ms_and_background_yields_at_once_vector_14() {
        let tiny = args(serde_json::json!({"command": "sleep 30", "yieldMs": 5}));
        assert!(tiny.asks_background());
        assert_eq!(tiny.job_yield_ms(true, DEFAULT_BACKGROUND_MS), Some(10));
        let huge = args(serde_json::json!({"command": "x", "yieldMs": 1e300}));
        assert_eq!(
            huge.job_yield_ms(true, DEFAULT_BACKGROUND_MS),
            Some(120_000)
        );
        let now = args(serde_json::json!({"command": "x", "background": true, "yieldMs": 900}));
        assert_eq!(now.job_yield_ms(true, DEFAULT_BACKGROUND_MS), Some(0));
        let plain = args(serde_json::json!({"command": "x"}));
        assert!(!plain.asks_background());
        assert_eq!(plain.job_yield_ms(true, 10_000), Some(10_000));
        // `background: false` is not "force sync" (spec §4.1): the default yield applies.
        let not = args(serde_json::json!({"command": "x", "background": false}));
        assert_eq!(not.job_yield_ms(true, 10_000), Some(10_000));
        // Without `process` nothing backgrounds.
        assert_eq!(now.job_yield_ms(false, 10_000), None);
        assert_eq!(plain.job_yield_ms(false, 10_000), None);
        for low in [-3, 0] {
            let low = args(serde_json::json!({"command": "x", "yieldMs": low}));
            assert_eq!(low.job_yield_ms(true, 10_000), Some(10));
        }
    }

    #[test]
    fn bad_yield_arguments_are_errors_not_panics() {
        let call = ToolCall {
            id: "c".to_owned(),
            name: "exec".to_owned(),
            input: serde_json::json!({"command": "x", "yieldMs": "soon"}),
        };
        let refused = ExecArgs::of_call(&call, false).unwrap_err();
        assert!(refused.starts_with("exec: invalid arguments"), "{refused}");
    }

    #[test]
    fn background_settings_come_from_tools_exec_with_defaults() {
        assert_eq!(
            BackgroundSettings::from_tools_exec(None),
            Ok(BackgroundSettings::default())
        );
        let set = BackgroundSettings::from_tools_exec(Some(&serde_json::json!({
            "backgroundMs": 500_000, "notifyOnExit": false,
            "notifyOnExitEmptySuccess": true, "security": "full"
        })))
        .unwrap();
        assert_eq!(
            set,
            BackgroundSettings {
                background_ms: 120_000,
                notify_on_exit: false,
                notify_on_exit_empty_success: true,
            }
        );
        assert_eq!(
            BackgroundSettings::from_tools_exec(Some(&serde_json::json!({"backgroundMs": 0})))
                .unwrap()
                .background_ms,
            10,
            "a zero default still yields (clamped), never backgrounds every command at once"
        );
        assert!(
            BackgroundSettings::from_tools_exec(Some(&serde_json::json!({"notifyOnExit": "yes"})))
                .unwrap_err()
                .contains("tools.exec.notifyOnExit")
        );
        assert!(
            BackgroundSettings::from_tools_exec(Some(&serde_json::json!({"backgroundMs": -1})))
                .unwrap_err()
                .contains("tools.exec.backgroundMs")
        );
    }
}
