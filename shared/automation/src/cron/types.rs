//! The persisted shapes of cron: a job with its schedule, payload, delivery and runtime
//! state, one line of a job's run log, and the pages `list` and `runs` return.
//!
//! They serialise as OpenClaw's JSON (camelCase keys, `kind`-tagged schedules and payloads),
//! so a job store, a run log or a tool result reads the same in both. Reading is tolerant of
//! keys this version does not know (a store written by a later version still loads); the
//! strict checks of a new job live in `validate`. Times are milliseconds since the Unix
//! epoch, as everywhere in clawless.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One scheduled job, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJob {
    /// Unique id (a UUID v4 for jobs created by clawless).
    pub id: String,
    /// The agent the job belongs to; unset, the default agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The session that created the job: where a main-session reminder lands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// Display name.
    pub name: String,
    /// Free text for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Disabled jobs never fire on their own (a forced manual run still runs them).
    pub enabled: bool,
    /// For one-shots: remove the job after its first successful run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_after_run: Option<bool>,
    /// When the job was created.
    pub created_at_ms: u64,
    /// When the job last changed (definition or state).
    pub updated_at_ms: u64,
    /// When it fires.
    pub schedule: CronSchedule,
    /// Which session runs it.
    pub session_target: SessionTarget,
    /// For main-session jobs: wake the agent now or wait for its next heartbeat.
    pub wake_mode: WakeMode,
    /// What it does when it fires.
    pub payload: CronPayload,
    /// Where an isolated run's result goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<CronDelivery>,
    /// Alerts after repeated failures: an object, or `false` to turn the global alert off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_alert: Option<FailureAlertSetting>,
    /// Runtime state: next and last run, errors, delivery.
    #[serde(default)]
    pub state: CronJobState,
}

impl CronJob {
    /// True for one-shot (`at`) jobs.
    pub fn is_one_shot(&self) -> bool {
        matches!(self.schedule, CronSchedule::At { .. })
    }

    /// True when `delivery.bestEffort` is set: delivery failures and failure notices are
    /// then left out.
    pub fn is_best_effort(&self) -> bool {
        self.delivery
            .as_ref()
            .and_then(|delivery| delivery.best_effort)
            .unwrap_or(false)
    }
}

/// When a job fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum CronSchedule {
    /// Once, at an instant: an ISO-8601 UTC timestamp with milliseconds
    /// (`2026-02-01T16:00:00.000Z`).
    At {
        /// The instant.
        at: String,
    },
    /// Every `everyMs` milliseconds, counted from `anchorMs`.
    Every {
        /// The period, at least 1.
        every_ms: u64,
        /// The start of the series; unset, the job's creation time.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_ms: Option<u64>,
    },
    /// A cron expression (5 fields, or 6 with leading seconds) in a time zone.
    Cron {
        /// The expression, e.g. `0 9 * * 1-5`.
        expr: String,
        /// IANA zone the expression is read in; unset, the caller's default zone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tz: Option<String>,
        /// Spread fires over this window after each slot (a per-job offset); 0 = exact.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stagger_ms: Option<u64>,
    },
}

/// Which session runs a job: `main`, `isolated`, `current` or `session:<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SessionTarget {
    /// The agent's main session (or the creating session): the payload is a system event.
    Main,
    /// A fresh session for every run: the payload is an agent turn.
    Isolated,
    /// The creating session; stored as [`SessionTarget::Session`] once the creator is known.
    Current,
    /// A named session that persists across runs.
    Session(String),
}

impl SessionTarget {
    /// Parses `main`, `isolated`, `current` (any case) or `session:<id>`. The id must be
    /// non-empty and free of `/`, `\` and NUL; `None` for anything else.
    pub fn parse(raw: &str) -> Option<Self> {
        let trimmed = raw.trim();
        match trimmed.to_ascii_lowercase().as_str() {
            "main" => return Some(Self::Main),
            "isolated" => return Some(Self::Isolated),
            "current" => return Some(Self::Current),
            _ => {}
        }
        let prefix = trimmed.get(..8)?;
        if !prefix.eq_ignore_ascii_case("session:") {
            return None;
        }
        let id = trimmed[8..].trim();
        is_valid_session_target_id(id).then(|| Self::Session(id.to_owned()))
    }

    /// True for the targets that run an isolated agent turn (`isolated`, `current`,
    /// `session:<id>`).
    pub fn is_isolated_like(&self) -> bool {
        !matches!(self, Self::Main)
    }
}

/// A `session:<id>` id: non-empty, no `/`, `\` or NUL.
pub(crate) fn is_valid_session_target_id(id: &str) -> bool {
    !id.is_empty() && !id.contains(['/', '\\', '\0'])
}

impl fmt::Display for SessionTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Main => f.write_str("main"),
            Self::Isolated => f.write_str("isolated"),
            Self::Current => f.write_str("current"),
            Self::Session(id) => write!(f, "session:{id}"),
        }
    }
}

impl Serialize for SessionTarget {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SessionTarget {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(deserializer)?;
        Self::parse(&raw).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "invalid sessionTarget `{raw}`: expected main, isolated, current or session:<id>"
            ))
        })
    }
}

/// How a main-session job reaches the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WakeMode {
    /// Run a heartbeat right away.
    #[default]
    Now,
    /// Leave the event for the agent's next heartbeat.
    NextHeartbeat,
}

impl WakeMode {
    /// Parses `now` / `next-heartbeat` (any case, surrounding spaces ignored).
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "now" => Some(Self::Now),
            "next-heartbeat" => Some(Self::NextHeartbeat),
            _ => None,
        }
    }
}

/// What a job does when it fires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum CronPayload {
    /// Put a line of text into the session as a system event (main-session jobs).
    SystemEvent {
        /// The event text, e.g. the reminder.
        text: String,
    },
    /// Run an agent turn with this message (isolated-like jobs).
    AgentTurn(AgentTurn),
}

impl CronPayload {
    /// The text the job carries: the event text or the turn's message.
    pub fn text(&self) -> &str {
        match self {
            Self::SystemEvent { text } => text,
            Self::AgentTurn(turn) => &turn.message,
        }
    }
}

/// The agent turn of an isolated-like job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentTurn {
    /// The user message of the turn.
    pub message: String,
    /// `provider/model` for this job's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Thinking level for this job's runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Run timeout in seconds; 0 means none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    /// No bootstrap files in the run's context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub light_context: Option<bool>,
    /// Only these tools may be used in the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_allow: Option<Vec<String>>,
    /// Models to fall back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallbacks: Option<Vec<String>>,
    /// Do not wrap external (hook) content in safety boundaries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_unsafe_external_content: Option<bool>,
}

/// Where an isolated run's result goes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronDelivery {
    /// `announce` (send to a chat), `webhook` (POST the finished event) or `none`.
    pub mode: DeliveryMode,
    /// Channel id (`telegram`, `slack`, …) or `last` (the session's last chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Recipient: chat id, `<chatId>:topic:<threadId>`, or the webhook URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Account of a multi-account channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
    /// Delivery failures do not fail the run; failure notices and alerts are not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_effort: Option<bool>,
    /// Where failure notices go instead of the primary target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_destination: Option<FailureDestination>,
}

/// `delivery.mode`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    /// Internal only.
    None,
    /// Send the result to a chat.
    #[default]
    Announce,
    /// POST the finished event to a URL.
    Webhook,
}

/// How a failure notice or alert is sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum AlertMode {
    /// As a chat message.
    #[default]
    Announce,
    /// As a JSON POST.
    Webhook,
}

/// Where failure notices go (`delivery.failureDestination`, `cron.failureDestination`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FailureDestination {
    /// Channel id (`telegram`, `slack`, …) or `last`, for `announce`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "last")))]
    pub channel: Option<String>,
    /// Recipient (chat id), or the URL for `webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub to: Option<String>,
    /// Account of a multi-account channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub account_id: Option<String>,
    /// `announce` (a chat message) or `webhook` (a JSON POST to `to`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "announce")))]
    pub mode: Option<AlertMode>,
}

/// A job's failure-alert settings: alert after `after` consecutive errors.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FailureAlert {
    /// Consecutive errors before an alert (at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u32>,
    /// Channel id or `last`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// Recipient.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Quiet time after an alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_ms: Option<u64>,
    /// `announce` or `webhook`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<AlertMode>,
    /// Account of a multi-account channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account_id: Option<String>,
}

/// A job's `failureAlert`: `false`, or the alert settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureAlertSetting {
    /// `false`: no alerts for this job, whatever `cron.failureAlert` says.
    Off,
    /// Alerts with these settings (over `cron.failureAlert`).
    On(FailureAlert),
}

impl Serialize for FailureAlertSetting {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Off => serializer.serialize_bool(false),
            Self::On(alert) => alert.serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for FailureAlertSetting {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(deserializer)? {
            serde_json::Value::Bool(false) => Ok(Self::Off),
            value @ serde_json::Value::Object(_) => serde_json::from_value(value)
                .map(Self::On)
                .map_err(serde::de::Error::custom),
            other => Err(serde::de::Error::custom(format!(
                "failureAlert must be false or an object, got {other}"
            ))),
        }
    }
}

/// The runtime part of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobState {
    /// When it fires next; unset, never (disabled, finished one-shot, schedule error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<u64>,
    /// Set while a run is in progress (persisted before it starts, so it starts once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running_at_ms: Option<u64>,
    /// When the last run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_at_ms: Option<u64>,
    /// Outcome of the last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run_status: Option<RunStatus>,
    /// Outcome of the last run (the older name, kept in step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<RunStatus>,
    /// Error of the last run, or a schedule error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Class of the last run's error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_reason: Option<ErrorReason>,
    /// How long the last run took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_duration_ms: Option<u64>,
    /// Errors in a row; reset by an `ok` or `skipped` run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consecutive_errors: Option<u32>,
    /// When the last failure alert was sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_failure_alert_at_ms: Option<u64>,
    /// Schedule computations that failed in a row.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_error_count: Option<u32>,
    /// Whether the last run's result was delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_status: Option<DeliveryStatus>,
    /// Why the last delivery failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivery_error: Option<String>,
    /// Whether the last run delivered anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_delivered: Option<bool>,
}

/// Outcome of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// It ran.
    Ok,
    /// It failed.
    Error,
    /// It did not run (heartbeats disabled, quiet hours, empty text, …).
    Skipped,
}

impl RunStatus {
    /// `ok`, `error` or `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Skipped => "skipped",
        }
    }
}

/// Class of a run's error (`lastErrorReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorReason {
    /// Credentials refused.
    Auth,
    /// The request or response was malformed.
    Format,
    /// Rate limited.
    RateLimit,
    /// Out of credit.
    Billing,
    /// Timed out.
    Timeout,
    /// The model does not exist.
    ModelNotFound,
    /// Anything else.
    Unknown,
}

/// Whether a run's result reached its delivery target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeliveryStatus {
    /// Sent.
    Delivered,
    /// Requested but not sent (failure, suppression).
    NotDelivered,
    /// Requested, outcome unknown.
    Unknown,
    /// No delivery was requested.
    NotRequested,
}

/// One line of a job's run log (JSONL, one file per job).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRunLogEntry {
    /// When the line was written (the run's end).
    pub ts: u64,
    /// The job.
    pub job_id: String,
    /// Always `finished`.
    #[serde(default = "finished")]
    pub action: String,
    /// Outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// Error text of an `error` (or reason of a `skipped`) run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Output text (what was or would have been delivered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// Whether anything was delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered: Option<bool>,
    /// Delivery outcome.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_status: Option<DeliveryStatus>,
    /// Why delivery failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_error: Option<String>,
    /// The run's session id (isolated runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The run's session key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// When the run started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_at_ms: Option<u64>,
    /// How long it took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// The job's next run after this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_run_at_ms: Option<u64>,
    /// Model used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Tokens used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// The job's name; only in pages across all jobs (`scope: "all"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_name: Option<String>,
}

fn finished() -> String {
    RUN_LOG_ACTION_FINISHED.to_owned()
}

/// The `action` of every run-log line.
pub const RUN_LOG_ACTION_FINISHED: &str = "finished";

/// Token usage of a run (snake_case keys, as OpenClaw writes them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Input tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input plus output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    /// Tokens read from the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_tokens: Option<u64>,
    /// Tokens written to the prompt cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

/// A page of run-log entries (`runs`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunsPage {
    /// The entries of this page.
    pub entries: Vec<CronRunLogEntry>,
    /// Entries matching the filters, over all pages.
    pub total: usize,
    /// Index of the first entry of this page.
    pub offset: usize,
    /// Page size asked for (after clamping).
    pub limit: usize,
    /// Whether more entries follow.
    pub has_more: bool,
    /// The offset of the next page; `null` on the last one.
    pub next_offset: Option<usize>,
}

/// A page of jobs (`list`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobsPage {
    /// The jobs of this page.
    pub jobs: Vec<CronJob>,
    /// Jobs matching, over all pages.
    pub total: usize,
    /// Index of the first job of this page.
    pub offset: usize,
    /// Page size (after clamping).
    pub limit: usize,
    /// Whether more jobs follow.
    pub has_more: bool,
    /// The offset of the next page; `null` on the last one.
    pub next_offset: Option<usize>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_job_round_trips_through_openclaw_json() {
        let value = json!({
            "id": "j1",
            "agentId": "main",
            "name": "Daily",
            "enabled": true,
            "createdAtMs": 1,
            "updatedAtMs": 2,
            "schedule": {"kind": "cron", "expr": "0 9 * * *", "tz": "Europe/Berlin"},
            "sessionTarget": "session:agent:main:telegram:direct:1",
            "wakeMode": "next-heartbeat",
            "payload": {"kind": "agentTurn", "message": "hi", "toolsAllow": ["read"], "timeoutSeconds": 30},
            "delivery": {"mode": "announce", "channel": "telegram", "to": "1", "failureDestination": {"mode": "webhook", "to": "https://x"}},
            "failureAlert": false,
            "state": {"nextRunAtMs": 5, "lastStatus": "ok", "lastRunStatus": "ok", "lastDeliveryStatus": "not-requested", "lastErrorReason": "rate_limit"}
        });
        let job: CronJob = serde_json::from_value(value.clone()).expect("job");
        assert_eq!(
            job.session_target,
            SessionTarget::Session("agent:main:telegram:direct:1".into())
        );
        assert_eq!(job.failure_alert, Some(FailureAlertSetting::Off));
        assert_eq!(job.wake_mode, WakeMode::NextHeartbeat);
        assert_eq!(serde_json::to_value(&job).expect("json"), value);
    }

    #[test]
    fn session_targets_parse_case_insensitively_and_reject_bad_ids() {
        assert_eq!(SessionTarget::parse(" MAIN "), Some(SessionTarget::Main));
        assert_eq!(
            SessionTarget::parse("Session:abc"),
            Some(SessionTarget::Session("abc".into()))
        );
        for bad in [
            "session:",
            "session:a/b",
            "session:a\\b",
            "session:a\0",
            "other",
            "",
        ] {
            assert_eq!(SessionTarget::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn run_log_lines_default_their_action_and_keep_snake_case_usage() {
        let line = r#"{"ts":3,"jobId":"j","status":"error","usage":{"input_tokens":5}}"#;
        let entry: CronRunLogEntry = serde_json::from_str(line).expect("entry");
        assert_eq!(entry.action, "finished");
        assert_eq!(entry.usage.as_ref().and_then(|u| u.input_tokens), Some(5));
        let back = serde_json::to_value(&entry).expect("json");
        assert_eq!(back["action"], "finished");
        assert_eq!(back["usage"], json!({"input_tokens": 5}));
    }
}
