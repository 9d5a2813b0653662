//! The `cron` tool's contract with the model: its description and summary, its argument
//! schema, turning a call's arguments into a [`CronAction`] (with the flat-parameter
//! recovery weaker models need and OpenClaw's exact errors), the tool-side preparation of
//! `add` and `update` (the caller's agent and session, delivery inferred from the chat the
//! job was created in), and the `contextMessages` rendering.
//!
//! What an action does (store, timers, wake) is the runtime's; it also fetches the recent
//! messages `contextMessages` asks for and hands them to [`reminder_context_lines`].

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::CronInputError;
use super::normalize::{normalize_create, normalize_patch};
use super::types::{CronDelivery, CronPayload, DeliveryMode, WakeMode};
use super::validate::{CronJobCreate, ValidationContext, is_http_url, validate_create};
use clawless_base::model::ToolSpec;

/// The tool's name.
pub const CRON_TOOL_NAME: &str = "cron";

/// The tool's display label.
pub const CRON_TOOL_LABEL: &str = "Cron";

/// The one-line summary of the tool in the system prompt's tool list.
pub const CRON_TOOL_SUMMARY: &str = "Manage cron jobs and wake events (use for reminders; when scheduling a reminder, write the systemEvent text as something that will read like a reminder when it fires, and mention that it is a reminder depending on the time gap between setting and firing; include recent context in reminder text if appropriate)";

/// The tool's description, as the model sees it.
pub const CRON_TOOL_DESCRIPTION: &str = r#"Schedule jobs and reminders, inspect and change them, and send wake events. Use it for reminders and for "check back later" follow-ups. Do not emulate scheduling with exec sleep or process polling.

Actions:
- status: whether the scheduler runs, how many jobs, when it next wakes
- list: the jobs (includeDisabled: true shows disabled ones too)
- add: create a job from `job` (below)
- update: change job `jobId` with `patch` (same fields as a job; only what changes)
- remove: delete job `jobId`
- run: run job `jobId` now (runMode "force", the default, or "due" to run it only when it is due)
- runs: recent runs of job `jobId`
- wake: send `text` as a wake event (mode "next-heartbeat", the default, or "now")

Job fields:
- name: short label (taken from the text when left out)
- schedule: {"kind":"at","at":"<ISO-8601>"} runs once; {"kind":"every","everyMs":<ms>,"anchorMs":<epoch ms>} repeats; {"kind":"cron","expr":"<5 or 6 fields>","tz":"<IANA zone>","staggerMs":<ms>} follows a cron expression
- payload: {"kind":"systemEvent","text":"..."} puts text into a session; {"kind":"agentTurn","message":"...","model":"...","thinking":"...","timeoutSeconds":<n>,"lightContext":<bool>,"toolsAllow":["..."]} runs a turn with that message
- sessionTarget: "main" | "isolated" | "current" | "session:<key>"
- wakeMode: "now" (default) or "next-heartbeat"
- delivery: {"mode":"announce"|"webhook"|"none","channel":"...","to":"...","bestEffort":<bool>}
- deleteAfterRun (one-shots default to true), enabled, description, failureAlert ({"after":<n>} or false)

Session targets:
- main: the text arrives in your main conversation as a system event and you are woken to act on it (wakeMode). Requires a systemEvent payload.
- isolated: each run is a fresh session that gets the message as its own turn. Requires an agentTurn payload.
- current: like isolated, but runs inside the conversation that created the job.
- session:<key>: like isolated, in a named session kept between runs.
Defaults: systemEvent jobs target main, agentTurn jobs target isolated.

Delivery (isolated, current and session jobs):
- announce (the default): the run's final text is sent to a chat; without channel/to it goes to the chat the job was created from, else to the last chat.
- webhook: the finished run is POSTed as JSON to delivery.to, an http(s) URL.
- none: nothing is sent. A run that replies NO_REPLY sends nothing either.

Constraints:
- main jobs need a systemEvent payload; isolated, current and session jobs need an agentTurn payload.
- main jobs cannot announce to a channel; only webhook delivery is allowed for them.
- "at" may be at most a minute in the past and at most 10 years ahead.
- cron expressions: minute hour day-of-month month day-of-week, optionally preceded by seconds; when both day fields are set, either one matching fires; jobs at the top of every hour are spread over up to 5 minutes unless staggerMs is 0.
- Write reminder text so it makes sense when it fires.
- ISO timestamps without an explicit timezone are treated as UTC.

Use jobId as the canonical identifier; id is accepted for compatibility. Use contextMessages (0-10) to add previous messages as context to the job text."#;

/// `job required`
pub const JOB_REQUIRED: &str = "job required";
/// `patch required`
pub const PATCH_REQUIRED: &str = "patch required";
/// `jobId required (id accepted for backward compatibility)`
pub const JOB_ID_REQUIRED: &str = "jobId required (id accepted for backward compatibility)";
/// `delivery.mode="webhook" requires delivery.to to be a valid http(s) URL`
pub const TOOL_WEBHOOK_REQUIRES_URL: &str =
    r#"delivery.mode="webhook" requires delivery.to to be a valid http(s) URL"#;

/// The most messages `contextMessages` may add.
pub const MAX_CONTEXT_MESSAGES: u8 = 10;
/// Characters of one context message (longer ones are cut with `...`).
pub const CONTEXT_MESSAGE_MAX_CHARS: usize = 220;
/// Characters of all context lines together.
pub const CONTEXT_TOTAL_MAX_CHARS: usize = 700;
/// What separates a reminder's text from its recent context.
pub const REMINDER_CONTEXT_MARKER: &str = "\n\nRecent context:\n";

/// Top-level keys gathered into a job (or patch) when a model sends them flat.
const FLAT_JOB_KEYS: [&str; 21] = [
    "name",
    "schedule",
    "sessionTarget",
    "wakeMode",
    "payload",
    "delivery",
    "enabled",
    "description",
    "deleteAfterRun",
    "agentId",
    "sessionKey",
    "failureAlert",
    "message",
    "text",
    "model",
    "fallbacks",
    "toolsAllow",
    "thinking",
    "timeoutSeconds",
    "lightContext",
    "allowUnsafeExternalContent",
];

/// The tool as offered to the model.
pub fn cron_tool_spec() -> ToolSpec {
    ToolSpec {
        name: CRON_TOOL_NAME.to_owned(),
        description: CRON_TOOL_DESCRIPTION.to_owned(),
        input_schema: cron_tool_schema(),
    }
}

/// The argument schema: one flat object (per-action requirements are checked at run time)
/// that accepts extra keys, so flat job fields reach [`parse_cron_call`]. Unions are avoided
/// (`failureAlert` may also be `false`, `agentId`/`sessionKey`/`toolsAllow` may be `null`)
/// because some providers reject them.
pub fn cron_tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {
                "type": "string",
                "enum": ["status", "list", "add", "update", "remove", "run", "runs", "wake"],
                "description": "What to do."
            },
            "includeDisabled": {"type": "boolean", "description": "list: include disabled jobs."},
            "job": job_schema(),
            "jobId": {"type": "string", "description": "update, remove, run, runs: the job's id."},
            "id": {"type": "string", "description": "Old name of jobId."},
            "patch": {
                "type": "object",
                "description": "update: the fields to change, as in job (only what changes; null clears agentId, sessionKey and payload.toolsAllow).",
                "additionalProperties": true
            },
            "text": {"type": "string", "description": "wake: the event text."},
            "mode": {
                "type": "string",
                "enum": ["now", "next-heartbeat"],
                "description": "wake: wake now, or leave it for the next heartbeat (default)."
            },
            "runMode": {
                "type": "string",
                "enum": ["due", "force"],
                "description": "run: force (default) runs now; due runs only if the job is due."
            },
            "contextMessages": {
                "type": "number",
                "minimum": 0,
                "maximum": 10,
                "description": "add (systemEvent jobs): append this many recent messages of the conversation to the text."
            }
        },
        "required": ["action"],
        "additionalProperties": true
    })
}

/// The fields of a job, spelled out once: `patch` takes the same ones.
fn job_schema() -> Value {
    json!({
        "type": "object",
        "description": "add: the job to create.",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "schedule": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["at", "every", "cron"]},
                    "at": {"type": "string", "description": "ISO-8601 timestamp (UTC unless it has an offset)."},
                    "everyMs": {"type": "number"},
                    "anchorMs": {"type": "number"},
                    "expr": {"type": "string"},
                    "tz": {"type": "string", "description": "IANA time zone of expr."},
                    "staggerMs": {"type": "number"}
                },
                "additionalProperties": true
            },
            "sessionTarget": {"type": "string", "description": "main, isolated, current or session:<key>."},
            "wakeMode": {"type": "string", "enum": ["now", "next-heartbeat"]},
            "payload": {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": ["systemEvent", "agentTurn"]},
                    "text": {"type": "string"},
                    "message": {"type": "string"},
                    "model": {"type": "string"},
                    "thinking": {"type": "string"},
                    "timeoutSeconds": {"type": "number"},
                    "lightContext": {"type": "boolean"},
                    "allowUnsafeExternalContent": {"type": "boolean"},
                    "fallbacks": {"type": "array", "items": {"type": "string"}},
                    "toolsAllow": {"type": "array", "items": {"type": "string"}, "description": "Tools the run may use."}
                },
                "additionalProperties": true
            },
            "delivery": {
                "type": "object",
                "properties": {
                    "mode": {"type": "string", "enum": ["none", "announce", "webhook"]},
                    "channel": {"type": "string"},
                    "to": {"type": "string"},
                    "bestEffort": {"type": "boolean"},
                    "accountId": {"type": "string"},
                    "failureDestination": {
                        "type": "object",
                        "properties": {
                            "channel": {"type": "string"},
                            "to": {"type": "string"},
                            "accountId": {"type": "string"},
                            "mode": {"type": "string", "enum": ["announce", "webhook"]}
                        },
                        "additionalProperties": true
                    }
                },
                "additionalProperties": true
            },
            "agentId": {"type": "string", "description": "Owning agent (null clears)."},
            "enabled": {"type": "boolean"},
            "deleteAfterRun": {"type": "boolean"},
            "sessionKey": {"type": "string", "description": "Session a main job's event goes to (null clears)."},
            "failureAlert": {
                "type": "object",
                "description": "Alert after repeated failures, or false for none.",
                "properties": {
                    "after": {"type": "number"},
                    "channel": {"type": "string"},
                    "to": {"type": "string"},
                    "cooldownMs": {"type": "number"},
                    "mode": {"type": "string", "enum": ["announce", "webhook"]},
                    "accountId": {"type": "string"}
                },
                "additionalProperties": true
            }
        },
        "additionalProperties": true
    })
}

/// `run`'s mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunMode {
    /// Run only if the job is due.
    Due,
    /// Run now, due or not.
    #[default]
    Force,
}

/// What a `cron` call asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum CronAction {
    /// Scheduler status.
    Status,
    /// List jobs.
    List {
        /// Include disabled jobs.
        include_disabled: bool,
    },
    /// Create a job from this raw job object (see [`prepare_add`]).
    Add {
        /// The job as sent (flat keys already gathered).
        job: Map<String, Value>,
        /// Recent messages to append to a system event's text (0–10).
        context_messages: u8,
    },
    /// Change a job.
    Update {
        /// The job.
        job_id: String,
        /// The changes as sent (see [`prepare_patch`]).
        patch: Map<String, Value>,
    },
    /// Delete a job.
    Remove {
        /// The job.
        job_id: String,
    },
    /// Run a job now.
    Run {
        /// The job.
        job_id: String,
        /// Force, or only when due.
        mode: RunMode,
    },
    /// A job's recent runs.
    Runs {
        /// The job.
        job_id: String,
    },
    /// Enqueue a system event in the default agent's main session.
    Wake {
        /// The event text.
        text: String,
        /// Wake now or at the next heartbeat.
        mode: WakeMode,
    },
}

/// Reads a `cron` call's arguments. Errors are OpenClaw's: `action required`,
/// `Unknown action: <a>`, `job required`, `patch required`, `jobId required (id accepted for
/// backward compatibility)`, `text required`.
pub fn parse_cron_call(args: &Value) -> Result<CronAction, CronInputError> {
    let empty = Map::new();
    let args = args.as_object().unwrap_or(&empty);
    let action =
        string_arg(args, "action").ok_or_else(|| CronInputError::new("action required"))?;
    match action.to_ascii_lowercase().as_str() {
        "status" => Ok(CronAction::Status),
        "list" => Ok(CronAction::List {
            include_disabled: args
                .get("includeDisabled")
                .is_some_and(|flag| flag.as_bool() == Some(true) || flag.as_str() == Some("true")),
        }),
        "add" => {
            let job = object_arg(args, "job")
                .or_else(|| flat_job(args, true))
                .ok_or_else(|| CronInputError::new(JOB_REQUIRED))?;
            Ok(CronAction::Add {
                job,
                context_messages: context_messages(args.get("contextMessages")),
            })
        }
        "update" => {
            let job_id = job_id(args)?;
            let patch = object_arg(args, "patch")
                .or_else(|| flat_job(args, false))
                .ok_or_else(|| CronInputError::new(PATCH_REQUIRED))?;
            Ok(CronAction::Update { job_id, patch })
        }
        "remove" => Ok(CronAction::Remove {
            job_id: job_id(args)?,
        }),
        "run" => Ok(CronAction::Run {
            job_id: job_id(args)?,
            mode: match args.get("runMode").and_then(Value::as_str) {
                Some("due") => RunMode::Due,
                _ => RunMode::Force,
            },
        }),
        "runs" => Ok(CronAction::Runs {
            job_id: job_id(args)?,
        }),
        "wake" => Ok(CronAction::Wake {
            text: string_arg(args, "text").ok_or_else(|| CronInputError::new("text required"))?,
            mode: match args.get("mode").and_then(Value::as_str) {
                Some("now") => WakeMode::Now,
                _ => WakeMode::NextHeartbeat,
            },
        }),
        _ => Err(CronInputError::new(format!("Unknown action: {action}"))),
    }
}

/// A non-blank string argument, trimmed.
fn string_arg(args: &Map<String, Value>, key: &str) -> Option<String> {
    args.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|text| !text.is_empty())
        .map(str::to_owned)
}

/// A non-empty object argument.
fn object_arg(args: &Map<String, Value>, key: &str) -> Option<Map<String, Value>> {
    args.get(key)
        .and_then(Value::as_object)
        .filter(|object| !object.is_empty())
        .cloned()
}

fn job_id(args: &Map<String, Value>) -> Result<String, CronInputError> {
    string_arg(args, "jobId")
        .or_else(|| string_arg(args, "id"))
        .ok_or_else(|| CronInputError::new(JOB_ID_REQUIRED))
}

/// Job fields sent at the top level instead of inside `job`/`patch`. A job needs at least a
/// schedule, payload, message or text among them to count.
fn flat_job(args: &Map<String, Value>, for_add: bool) -> Option<Map<String, Value>> {
    let gathered: Map<String, Value> = FLAT_JOB_KEYS
        .iter()
        .filter_map(|key| {
            args.get(*key)
                .map(|value| ((*key).to_owned(), value.clone()))
        })
        .collect();
    let enough = !for_add
        || ["schedule", "payload", "message", "text"]
            .iter()
            .any(|key| gathered.contains_key(*key));
    (!gathered.is_empty() && enough).then_some(gathered)
}

fn context_messages(value: Option<&Value>) -> u8 {
    let count = match value {
        Some(Value::Number(number)) => number.as_f64(),
        Some(Value::String(text)) => text.trim().parse::<f64>().ok(),
        _ => None,
    };
    count
        .filter(|count| count.is_finite())
        .map(|count| count.floor().clamp(0.0, f64::from(MAX_CONTEXT_MESSAGES)) as u8)
        .unwrap_or(0)
}

/// Who is calling the tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct CronCaller<'a> {
    /// The caller's resolved session key (`agent:main:telegram:direct:42`), if any.
    pub session_key: Option<&'a str>,
    /// The caller's agent; unset, the agent named in `session_key`.
    pub agent_id: Option<&'a str>,
}

impl CronCaller<'_> {
    fn agent(&self) -> Option<String> {
        self.agent_id.map(str::to_owned).or_else(|| {
            self.session_key
                .and_then(clawless_base::session_key::SessionKey::parse)
                .map(|key| key.agent_id().to_owned())
        })
    }
}

/// The tool side of `add`: normalises the job (resolving `current` to the caller's session),
/// refuses a webhook without an http(s) URL, fills `agentId` and `sessionKey` from the
/// caller when absent, infers announce delivery from the caller's chat for agent turns
/// (see [`infer_delivery_from_session_key`]), then validates.
pub fn prepare_add(
    job: &Map<String, Value>, caller: &CronCaller<'_>, ctx: &ValidationContext<'_>,
) -> Result<CronJobCreate, CronInputError> {
    let mut job = normalize_create(job, caller.session_key)?;
    check_tool_webhook(&job)?;
    if !job.contains_key("agentId")
        && let Some(agent) = caller.agent()
    {
        job.insert("agentId".into(), agent.into());
    }
    if !job.contains_key("sessionKey")
        && let Some(key) = caller.session_key.map(str::trim).filter(|k| !k.is_empty())
    {
        job.insert("sessionKey".into(), key.into());
    }
    let agent_turn = job
        .get("payload")
        .and_then(|payload| payload.get("kind"))
        .and_then(Value::as_str)
        == Some("agentTurn");
    if agent_turn
        && let Some(key) = caller.session_key
        && delivery_open_to_inference(job.get("delivery"))
        && let Some(inferred) = infer_delivery_from_session_key(key)
    {
        let mut delivery = job
            .get("delivery")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        delivery.insert("mode".into(), "announce".into());
        if let Some(channel) = inferred.channel {
            delivery.insert("channel".into(), channel.into());
        }
        if let Some(to) = inferred.to {
            delivery.insert("to".into(), to.into());
        }
        job.insert("delivery".into(), Value::Object(delivery));
    }
    validate_create(&job, ctx)
}

/// The tool side of `update`: normalises the patch and refuses a webhook without an
/// http(s) URL. Apply it with `validate::apply_patch`.
pub fn prepare_patch(
    patch: &Map<String, Value>, caller: &CronCaller<'_>,
) -> Result<Map<String, Value>, CronInputError> {
    let patch = normalize_patch(patch, caller.session_key)?;
    check_tool_webhook(&patch)?;
    Ok(patch)
}

fn check_tool_webhook(job: &Map<String, Value>) -> Result<(), CronInputError> {
    let Some(delivery) = job.get("delivery") else {
        return Ok(());
    };
    let webhook = delivery.get("mode").and_then(Value::as_str) == Some("webhook");
    let valid = delivery
        .get("to")
        .and_then(Value::as_str)
        .is_some_and(is_http_url);
    if webhook && !valid {
        return Err(CronInputError::new(TOOL_WEBHOOK_REQUIRES_URL));
    }
    Ok(())
}

/// Delivery is inferred only when none is given, or an announce without channel and `to`.
fn delivery_open_to_inference(delivery: Option<&Value>) -> bool {
    match delivery {
        None | Some(Value::Null) => true,
        Some(Value::Object(delivery)) => {
            let mode = delivery.get("mode").and_then(Value::as_str).unwrap_or("");
            let has_target = ["channel", "to"].iter().any(|key| {
                delivery
                    .get(*key)
                    .and_then(Value::as_str)
                    .is_some_and(|text| !text.trim().is_empty())
            });
            (mode.is_empty() || mode == "announce") && !has_target
        }
        Some(_) => false,
    }
}

/// The chat a session key belongs to, as an announce delivery: for
/// `agent:<id>:<channel>:<direct|dm|group|channel>:<peer>` (a trailing `:thread:<id>` is
/// ignored) the channel and the peer (everything after the marker, so a Telegram
/// `:topic:<n>` stays). Main, sub-agent and ACP keys, and keys without a marker, give `None`.
pub fn infer_delivery_from_session_key(session_key: &str) -> Option<CronDelivery> {
    let key = session_key.trim();
    let key = match key.to_ascii_lowercase().rfind(":thread:") {
        Some(index) => &key[..index],
        None => key,
    };
    let mut parts = key.split(':').filter(|part| !part.is_empty());
    if !parts.next()?.eq_ignore_ascii_case("agent") {
        return None;
    }
    parts.next()?;
    let rest: Vec<&str> = parts.collect();
    let head = rest.first()?.to_ascii_lowercase();
    if matches!(head.as_str(), "main" | "subagent" | "acp") {
        return None;
    }
    let marker = rest.iter().position(|part| {
        matches!(
            part.to_ascii_lowercase().as_str(),
            "direct" | "dm" | "group" | "channel"
        )
    })?;
    let peer = rest[marker + 1..].join(":");
    if peer.trim().is_empty() {
        return None;
    }
    Some(CronDelivery {
        mode: DeliveryMode::Announce,
        channel: (marker >= 1).then(|| rest[0].to_ascii_lowercase()),
        to: Some(peer),
        ..CronDelivery::default()
    })
}

/// Who said a context message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextRole {
    /// The user.
    User,
    /// The assistant.
    Assistant,
}

/// One recent message of the conversation, for `contextMessages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextMessage<'a> {
    /// Who said it.
    pub role: ContextRole,
    /// Its text.
    pub text: &'a str,
}

/// The `- User: …` / `- Assistant: …` lines for the last `count` (at most 10) of
/// `messages` (oldest first, user and assistant text only). Whitespace runs become one
/// space, each text is cut to 220 characters (ending `...`), and lines stop before their
/// total would pass 700 characters.
pub fn reminder_context_lines(messages: &[ContextMessage<'_>], count: u8) -> Vec<String> {
    let count = usize::from(count.min(MAX_CONTEXT_MESSAGES));
    let recent: Vec<(ContextRole, String)> = messages
        .iter()
        .map(|message| (message.role, collapse_whitespace(message.text)))
        .filter(|(_, text)| !text.is_empty())
        .collect();
    let start = recent.len().saturating_sub(count);
    let mut lines = Vec::new();
    let mut total = 0;
    for (role, text) in &recent[start..] {
        let label = match role {
            ContextRole::User => "User",
            ContextRole::Assistant => "Assistant",
        };
        let line = format!(
            "- {label}: {}",
            truncate_dots(text, CONTEXT_MESSAGE_MAX_CHARS)
        );
        total += line.chars().count();
        if total > CONTEXT_TOTAL_MAX_CHARS {
            break;
        }
        lines.push(line);
    }
    lines
}

/// `text` with `lines` appended after [`REMINDER_CONTEXT_MARKER`], replacing any context
/// appended before. No lines, no change.
pub fn with_reminder_context(text: &str, lines: &[String]) -> String {
    if lines.is_empty() {
        return text.to_owned();
    }
    let base = match text.find(REMINDER_CONTEXT_MARKER) {
        Some(index) => text[..index].trim(),
        None => text,
    };
    format!("{base}{REMINDER_CONTEXT_MARKER}{}", lines.join("\n"))
}

impl CronJobCreate {
    /// Appends recent-context lines to a system event's text (agent turns are left alone).
    pub fn add_reminder_context(&mut self, lines: &[String]) {
        if let CronPayload::SystemEvent { text } = &mut self.payload {
            *text = with_reminder_context(text, lines);
        }
    }

    /// Whether [`CronAction::Add`]'s `context_messages` applies (a system-event job).
    pub fn takes_reminder_context(&self) -> bool {
        matches!(self.payload, CronPayload::SystemEvent { .. })
    }
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn truncate_dots(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max_chars - 3).collect();
    format!("{}...", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::schedule::tests::at;
    use crate::cron::types::SessionTarget;
    use clawless_base::time::TimeZone;

    static UTC: TimeZone = TimeZone::UTC;

    fn ctx() -> ValidationContext<'static> {
        ValidationContext {
            now_ms: at("2026-01-31T12:00:00Z"),
            default_agent_id: "main",
            default_tz: &UTC,
        }
    }

    fn parse(args: Value) -> Result<CronAction, String> {
        parse_cron_call(&args).map_err(|e| e.to_string())
    }

    fn object(value: Value) -> Map<String, Value> {
        value.as_object().cloned().expect("object")
    }

    #[test]
    fn the_description_carries_the_sentences_models_rely_on() {
        for sentence in [
            "Do not emulate scheduling with exec sleep or process polling.",
            "ISO timestamps without an explicit timezone are treated as UTC.",
            "Use jobId as the canonical identifier; id is accepted for compatibility. Use contextMessages (0-10) to add previous messages as context to the job text.",
        ] {
            assert!(CRON_TOOL_DESCRIPTION.contains(sentence), "{sentence}");
        }
        for action in [
            "status", "list", "add", "update", "remove", "run", "runs", "wake",
        ] {
            assert!(
                CRON_TOOL_DESCRIPTION.contains(&format!("- {action}:")),
                "{action}"
            );
        }
        assert!(
            CRON_TOOL_SUMMARY.starts_with("Manage cron jobs and wake events (use for reminders;")
        );
        let spec = cron_tool_spec();
        assert_eq!(spec.name, "cron");
        assert_eq!(spec.input_schema["additionalProperties"], true);
        assert_eq!(spec.input_schema["required"], json!(["action"]));
        assert_eq!(
            spec.input_schema["properties"]["action"]["enum"],
            json!([
                "status", "list", "add", "update", "remove", "run", "runs", "wake"
            ])
        );
        assert_eq!(
            spec.input_schema["properties"]["contextMessages"]["maximum"],
            10
        );
        // `patch` names the job's fields instead of repeating their schema: every turn that
        // offers cron sends this.
        assert_eq!(
            spec.input_schema["properties"]["patch"]["additionalProperties"],
            true
        );
        let schema_bytes = spec.input_schema.to_string().len();
        assert!(schema_bytes < 3_600, "{schema_bytes} bytes");
    }

    #[test]
    fn calls_parse_into_actions_with_defaults() {
        assert_eq!(parse(json!({"action": "status"})), Ok(CronAction::Status));
        assert_eq!(
            parse(json!({"action": "list", "includeDisabled": true})),
            Ok(CronAction::List {
                include_disabled: true
            })
        );
        assert_eq!(
            parse(json!({"action": "run", "id": "j"})),
            Ok(CronAction::Run {
                job_id: "j".into(),
                mode: RunMode::Force
            })
        );
        assert_eq!(
            parse(json!({"action": "run", "jobId": "j", "id": "old", "runMode": "due"})),
            Ok(CronAction::Run {
                job_id: "j".into(),
                mode: RunMode::Due
            })
        );
        assert_eq!(
            parse(json!({"action": "wake", "text": " ping "})),
            Ok(CronAction::Wake {
                text: "ping".into(),
                mode: WakeMode::NextHeartbeat
            })
        );
        assert_eq!(
            parse(json!({"action": "add", "job": {"text": "t"}, "contextMessages": 25})),
            Ok(CronAction::Add {
                job: object(json!({"text": "t"})),
                context_messages: 10
            })
        );
    }

    #[test]
    fn missing_arguments_give_openclaws_errors() {
        let cases = [
            (json!({}), "action required"),
            (json!({"action": "explode"}), "Unknown action: explode"),
            (json!({"action": "add"}), JOB_REQUIRED),
            (
                json!({"action": "add", "job": {}, "name": "only a name"}),
                JOB_REQUIRED,
            ),
            (json!({"action": "update", "jobId": "j"}), PATCH_REQUIRED),
            (
                json!({"action": "update", "patch": {"name": "n"}}),
                JOB_ID_REQUIRED,
            ),
            (json!({"action": "remove", "jobId": " "}), JOB_ID_REQUIRED),
            (json!({"action": "runs"}), JOB_ID_REQUIRED),
            (json!({"action": "wake"}), "text required"),
        ];
        for (args, expected) in cases {
            assert_eq!(parse(args.clone()), Err(expected.to_owned()), "{args}");
        }
    }

    #[test]
    fn flat_job_fields_are_gathered_for_add_and_update() {
        // Vector 19: the flat call becomes a cron agent-turn job.
        let action = parse(json!({"action": "add", "schedule": {"expr": "0 * * * *"}, "message": "Summarize inbox", "runMode": "x"}))
            .expect("add");
        let CronAction::Add { job, .. } = action else {
            panic!("add")
        };
        assert_eq!(
            job,
            object(json!({"schedule": {"expr": "0 * * * *"}, "message": "Summarize inbox"}))
        );
        let created = prepare_add(&job, &CronCaller::default(), &ctx()).expect("valid");
        assert_eq!(created.session_target, SessionTarget::Isolated);
        assert_eq!(
            created.schedule,
            crate::cron::CronSchedule::Cron {
                expr: "0 * * * *".into(),
                tz: None,
                stagger_ms: Some(300_000)
            }
        );
        assert_eq!(
            created.delivery.map(|d| d.mode),
            Some(DeliveryMode::Announce)
        );
        assert_eq!(
            parse(json!({"action": "update", "jobId": "j", "enabled": false})),
            Ok(CronAction::Update {
                job_id: "j".into(),
                patch: object(json!({"enabled": false}))
            })
        );
    }

    #[test]
    fn delivery_is_inferred_from_the_callers_chat() {
        // Vector 20.
        let add_from = |key: &str| {
            prepare_add(
                &object(json!({"schedule": {"everyMs": 60000}, "message": "check"})),
                &CronCaller {
                    session_key: Some(key),
                    agent_id: None,
                },
                &ctx(),
            )
            .expect("valid")
        };
        let telegram = add_from("agent:main:telegram:direct:123");
        assert_eq!(
            telegram.delivery,
            Some(CronDelivery {
                mode: DeliveryMode::Announce,
                channel: Some("telegram".into()),
                to: Some("123".into()),
                ..CronDelivery::default()
            })
        );
        assert_eq!(telegram.agent_id.as_deref(), Some("main"));
        assert_eq!(
            telegram.session_key.as_deref(),
            Some("agent:main:telegram:direct:123")
        );
        let discord = add_from("agent:main:discord:channel:9:thread:77")
            .delivery
            .expect("delivery");
        assert_eq!(
            (discord.channel.as_deref(), discord.to.as_deref()),
            (Some("discord"), Some("9"))
        );
        let main = add_from("agent:main:main").delivery.expect("delivery");
        assert_eq!(
            (main.mode, main.channel, main.to),
            (DeliveryMode::Announce, None, None)
        );
    }

    #[test]
    fn delivery_inference_reads_session_keys() {
        let infer = |key: &str| infer_delivery_from_session_key(key).map(|d| (d.channel, d.to));
        assert_eq!(
            infer("agent:main:telegram:group:-100:topic:5"),
            Some((Some("telegram".into()), Some("-100:topic:5".into())))
        );
        assert_eq!(
            infer("agent:main:direct:42"),
            Some((None, Some("42".into())))
        );
        for none in [
            "agent:main:main",
            "agent:main:subagent:x",
            "agent:main:acp:x",
            "agent:main:cron:j",
            "telegram:direct:1",
            "agent:main:slack:channel:",
            "",
        ] {
            assert_eq!(infer(none), None, "{none}");
        }
        // An explicit target is never overridden.
        let explicit = prepare_add(
            &object(
                json!({"schedule": {"everyMs": 5}, "message": "m", "delivery": {"mode": "none"}}),
            ),
            &CronCaller {
                session_key: Some("agent:main:telegram:direct:1"),
                agent_id: None,
            },
            &ctx(),
        )
        .expect("valid");
        assert_eq!(
            explicit.delivery.map(|d| (d.mode, d.to)),
            Some((DeliveryMode::None, None))
        );
    }

    #[test]
    fn the_tool_refuses_webhooks_without_a_url() {
        let bad = object(
            json!({"schedule": {"everyMs": 5}, "message": "m", "delivery": {"mode": "webhook", "to": "ftp://x"}}),
        );
        assert_eq!(
            prepare_add(&bad, &CronCaller::default(), &ctx()).map_err(|e| e.to_string()),
            Err(TOOL_WEBHOOK_REQUIRES_URL.to_owned())
        );
        assert_eq!(
            prepare_patch(
                &object(json!({"delivery": {"mode": "webhook"}})),
                &CronCaller::default()
            )
            .map_err(|e| e.to_string()),
            Err(TOOL_WEBHOOK_REQUIRES_URL.to_owned())
        );
    }

    #[test]
    fn current_targets_the_callers_session() {
        let created = prepare_add(
            &object(
                json!({"sessionTarget": "current", "schedule": {"everyMs": 5}, "message": "m"}),
            ),
            &CronCaller {
                session_key: Some("agent:main:slack:channel:c1"),
                agent_id: Some("main"),
            },
            &ctx(),
        )
        .expect("valid");
        assert_eq!(
            created.session_target,
            SessionTarget::Session("agent:main:slack:channel:c1".into())
        );
    }

    #[test]
    fn recent_context_is_appended_to_reminders() {
        // Vector 36.
        let history = [
            ContextMessage {
                role: ContextRole::User,
                text: "book flights",
            },
            ContextMessage {
                role: ContextRole::Assistant,
                text: "done",
            },
        ];
        let lines = reminder_context_lines(&history, 2);
        assert_eq!(
            with_reminder_context("Reminder…", &lines),
            "Reminder…\n\nRecent context:\n- User: book flights\n- Assistant: done"
        );
        // A second application replaces the first context.
        let again = with_reminder_context("Reminder…\n\nRecent context:\n- User: old", &lines);
        assert_eq!(
            again,
            "Reminder…\n\nRecent context:\n- User: book flights\n- Assistant: done"
        );
        assert_eq!(with_reminder_context("Reminder", &[]), "Reminder");
        let mut created = prepare_add(
            &object(json!({"schedule": {"everyMs": 5}, "text": "Reminder…"})),
            &CronCaller::default(),
            &ctx(),
        )
        .expect("valid");
        assert!(created.takes_reminder_context());
        created.add_reminder_context(&lines);
        assert_eq!(
            created.payload.text(),
            "Reminder…\n\nRecent context:\n- User: book flights\n- Assistant: done"
        );
    }

    #[test]
    fn context_lines_are_cut_per_message_and_in_total() {
        let long = "word ".repeat(100);
        let history: Vec<ContextMessage<'_>> = (0..12)
            .map(|i| ContextMessage {
                role: if i % 2 == 0 {
                    ContextRole::User
                } else {
                    ContextRole::Assistant
                },
                text: &long,
            })
            .collect();
        let lines = reminder_context_lines(&history, 10);
        // Each line is "- User: " + 220 characters; three fit in 700.
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|line| line.ends_with("...")));
        assert_eq!(lines[0].chars().count(), "- User: ".len() + 220);
        assert!(reminder_context_lines(&history, 0).is_empty());
        let short = [ContextMessage {
            role: ContextRole::User,
            text: "a\n  b",
        }; 3];
        assert_eq!(
            reminder_context_lines(&short, 2),
            ["- User: a b", "- User: a b"]
        );
    }
}
