//! Validation of a normalised job or patch, with OpenClaw's exact messages, and the pure
//! parts of `add` and `update`: building the stored job, applying a patch.
//!
//! Two layers, as upstream: shape checks (types, required fields, no unknown keys) fail as
//! `invalid cron.add params: <detail>` (or `cron.update`); rule checks (session target vs
//! payload kind, delivery targets, the `at` window, …) fail with their own fixed sentences.

use serde::Deserialize;
use serde_json::{Map, Value};

use super::CronInputError;
use super::schedule::{ScheduleError, at_ms, iso_millis, next_cron_ms, refresh_next_run};
use super::types::{
    CronDelivery, CronJob, CronJobState, CronPayload, CronSchedule, DeliveryMode,
    FailureAlertSetting, SessionTarget, WakeMode,
};
use clawless_base::session_key::normalize_agent_id;
use clawless_base::time::TimeZone;

/// `main` jobs carry a system event.
pub const MAIN_REQUIRES_SYSTEM_EVENT: &str = r#"main cron jobs require payload.kind="systemEvent""#;

/// Isolated-like jobs carry an agent turn.
pub const ISOLATED_REQUIRES_AGENT_TURN: &str =
    r#"isolated/current/session cron jobs require payload.kind="agentTurn""#;

/// A webhook delivery needs an http(s) URL.
pub const WEBHOOK_REQUIRES_URL: &str =
    "cron webhook delivery requires delivery.to to be a valid http(s) URL";

/// Announcing to a channel is for isolated-like jobs.
pub const CHANNEL_DELIVERY_ISOLATED_ONLY: &str =
    r#"cron channel delivery config is only supported for sessionTarget="isolated""#;

/// A failure destination is for isolated-like jobs, or webhook deliveries.
pub const FAILURE_DESTINATION_ISOLATED_ONLY: &str = r#"cron delivery.failureDestination is only supported for sessionTarget="isolated" unless delivery.mode="webhook""#;

/// A webhook failure destination needs an http(s) URL.
pub const FAILURE_DESTINATION_WEBHOOK_URL: &str = "cron failure destination webhook requires delivery.failureDestination.to to be a valid http(s) URL";

/// A job needs a name.
pub const NAME_REQUIRED: &str = "cron job name is required";

/// `at` may be this far in the past (clock skew, slow typing).
pub const AT_PAST_GRACE_MS: u64 = 60_000;

/// A Julian year, as `at`'s upper bound counts them.
const YEAR_MS: u64 = 31_557_600_000;

/// `at` may be at most this many years ahead.
pub const AT_MAX_YEARS_AHEAD: u64 = 10;

/// What validation needs to know besides the job.
#[derive(Debug, Clone, Copy)]
pub struct ValidationContext<'a> {
    /// The clock.
    pub now_ms: u64,
    /// The default agent: only its jobs may target `main`.
    pub default_agent_id: &'a str,
    /// The zone of cron schedules without `tz`.
    pub default_tz: &'a TimeZone,
}

/// A validated new job: everything but the id, timestamps and state.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobCreate {
    /// Owning agent.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Creating session.
    #[serde(default)]
    pub session_key: Option<String>,
    /// Display name.
    pub name: String,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it fires.
    pub enabled: bool,
    /// Remove a one-shot after it succeeds.
    #[serde(default)]
    pub delete_after_run: Option<bool>,
    /// When it fires.
    pub schedule: CronSchedule,
    /// Which session runs it.
    pub session_target: SessionTarget,
    /// How a main-session job wakes the agent.
    pub wake_mode: WakeMode,
    /// What it does.
    pub payload: CronPayload,
    /// Where results go.
    #[serde(default)]
    pub delivery: Option<CronDelivery>,
    /// Failure alerts.
    #[serde(default)]
    pub failure_alert: Option<FailureAlertSetting>,
}

impl CronJobCreate {
    /// The stored job: `createdAtMs = updatedAtMs = now`, an `every` series anchored at now
    /// when it has no anchor, and `nextRunAtMs` computed.
    pub fn into_job(self, id: String, ctx: &ValidationContext<'_>) -> CronJob {
        let now = ctx.now_ms;
        let schedule = match self.schedule {
            CronSchedule::Every {
                every_ms,
                anchor_ms: None,
            } => CronSchedule::Every {
                every_ms,
                anchor_ms: Some(now),
            },
            other => other,
        };
        let mut job = CronJob {
            id,
            agent_id: self.agent_id,
            session_key: self.session_key,
            name: self.name,
            description: self.description,
            enabled: self.enabled,
            delete_after_run: self.delete_after_run,
            created_at_ms: now,
            updated_at_ms: now,
            schedule,
            session_target: self.session_target,
            wake_mode: self.wake_mode,
            payload: self.payload,
            delivery: self.delivery,
            failure_alert: self.failure_alert,
            state: CronJobState::default(),
        };
        // Validation parsed the schedule, so this cannot fail short of a bug; if it does, the
        // job records a schedule error rather than vanishing.
        if let Some(disabled) = refresh_next_run(&mut job, now, ctx.default_tz) {
            tracing::warn!(job_id = %disabled.job_id, "new cron job disabled by its schedule");
        }
        job
    }
}

/// Validates a normalised new job (`normalize::normalize_create`).
pub fn validate_create(
    job: &Map<String, Value>, ctx: &ValidationContext<'_>,
) -> Result<CronJobCreate, CronInputError> {
    check(job, "cron.add", ctx, true)
}

fn check(
    job: &Map<String, Value>, method: &str, ctx: &ValidationContext<'_>, check_at_window: bool,
) -> Result<CronJobCreate, CronInputError> {
    let invalid =
        |detail: String| CronInputError::new(format!("invalid {method} params: {detail}"));
    if matches!(job.get("name"), Some(Value::String(name)) if name.trim().is_empty()) {
        return Err(CronInputError::new(NAME_REQUIRED));
    }
    check_shape(job).map_err(invalid)?;
    let create: CronJobCreate = serde_json::from_value(Value::Object(job.clone()))
        .map_err(|error| invalid(error.to_string()))?;
    check_rules(&create, ctx, check_at_window)?;
    Ok(create)
}

/// The rule checks, in OpenClaw's order.
fn check_rules(
    job: &CronJobCreate, ctx: &ValidationContext<'_>, check_at_window: bool,
) -> Result<(), CronInputError> {
    if job.name.trim().is_empty() {
        return Err(CronInputError::new(NAME_REQUIRED));
    }
    match &job.schedule {
        CronSchedule::At { .. } if check_at_window => {
            validate_at_window(&job.schedule, ctx.now_ms)?;
        }
        CronSchedule::At { at } => {
            at_ms(at).map_err(|error| CronInputError::new(error.0))?;
        }
        CronSchedule::Every { .. } => {}
        CronSchedule::Cron { expr, tz, .. } => {
            next_cron_ms(expr, tz.as_deref(), ctx.default_tz, ctx.now_ms).map_err(
                |ScheduleError(error)| {
                    CronInputError::new(format!("Invalid cron schedule: {error}"))
                },
            )?;
        }
    }
    let isolated_like = job.session_target.is_isolated_like();
    match (&job.payload, isolated_like) {
        (CronPayload::AgentTurn(_), false) => {
            return Err(CronInputError::new(MAIN_REQUIRES_SYSTEM_EVENT));
        }
        (CronPayload::SystemEvent { .. }, true) => {
            return Err(CronInputError::new(ISOLATED_REQUIRES_AGENT_TURN));
        }
        _ => {}
    }
    if !isolated_like
        && let Some(agent) = job.agent_id.as_deref()
        && normalize_agent_id(agent) != normalize_agent_id(ctx.default_agent_id)
    {
        return Err(CronInputError::new(format!(
            r#"cron: sessionTarget "main" is only valid for the default agent. Use sessionTarget "isolated" with payload.kind "agentTurn" for non-default agents (agentId: {agent})"#
        )));
    }
    if let Some(delivery) = &job.delivery {
        if delivery.mode == DeliveryMode::Webhook
            && !delivery.to.as_deref().is_some_and(is_http_url)
        {
            return Err(CronInputError::new(WEBHOOK_REQUIRES_URL));
        }
        if !isolated_like && delivery.mode == DeliveryMode::Announce {
            return Err(CronInputError::new(CHANNEL_DELIVERY_ISOLATED_ONLY));
        }
        if let Some(destination) = &delivery.failure_destination {
            if !isolated_like && delivery.mode != DeliveryMode::Webhook {
                return Err(CronInputError::new(FAILURE_DESTINATION_ISOLATED_ONLY));
            }
            if destination.mode == Some(super::types::AlertMode::Webhook)
                && !destination.to.as_deref().is_some_and(is_http_url)
            {
                return Err(CronInputError::new(FAILURE_DESTINATION_WEBHOOK_URL));
            }
        }
    }
    Ok(())
}

/// Why a stored job cannot run as it is (a store edited by hand, or written by an older
/// version): the rule checks of `add`, without the `at` window. `None` when it is fine.
pub fn job_spec_error(job: &CronJob, ctx: &ValidationContext<'_>) -> Option<CronInputError> {
    let create = CronJobCreate {
        agent_id: job.agent_id.clone(),
        session_key: job.session_key.clone(),
        name: job.name.clone(),
        description: job.description.clone(),
        enabled: job.enabled,
        delete_after_run: job.delete_after_run,
        schedule: job.schedule.clone(),
        session_target: job.session_target.clone(),
        wake_mode: job.wake_mode,
        payload: job.payload.clone(),
        delivery: job.delivery.clone(),
        failure_alert: job.failure_alert.clone(),
    };
    check_rules(&create, ctx, false).err()
}

/// Checks that an `at` schedule parses and lies between a minute ago and ten years ahead:
/// `schedule.at is in the past: <iso> (<n> minutes ago). Current time: <iso>` /
/// `schedule.at is too far in the future: <iso> (<n> years ahead). Maximum allowed: 10 years`.
/// Other kinds pass.
pub fn validate_at_window(schedule: &CronSchedule, now_ms: u64) -> Result<(), CronInputError> {
    let CronSchedule::At { at } = schedule else {
        return Ok(());
    };
    let at = at_ms(at).map_err(|error| CronInputError::new(error.0))?;
    if at.saturating_add(AT_PAST_GRACE_MS) < now_ms {
        let minutes = (now_ms - at) / 60_000;
        return Err(CronInputError::new(format!(
            "schedule.at is in the past: {} ({minutes} minutes ago). Current time: {}",
            iso_millis(at),
            iso_millis(now_ms)
        )));
    }
    if at > now_ms.saturating_add(AT_MAX_YEARS_AHEAD * YEAR_MS) {
        let years = (at - now_ms) / YEAR_MS;
        return Err(CronInputError::new(format!(
            "schedule.at is too far in the future: {} ({years} years ahead). Maximum allowed: {AT_MAX_YEARS_AHEAD} years",
            iso_millis(at)
        )));
    }
    Ok(())
}

/// `unknown cron job id: <id>`, for the store's lookup.
pub fn unknown_job_error(id: &str) -> CronInputError {
    CronInputError::new(format!("unknown cron job id: {id}"))
}

/// An absolute `http:` or `https:` URL.
pub fn is_http_url(raw: &str) -> bool {
    url::Url::parse(raw.trim())
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
}

/// Applies a normalised patch (`normalize::normalize_patch`) to `job`, validating the
/// result as `cron.update` does. On error the job is left unchanged.
///
/// Fields are replaced, except: `payload` merges into the current one unless it switches
/// kind (then it must carry its text or message), `delivery` merges key by key (`null`
/// removes a key), `failureAlert` objects merge over the current alert, and `null`
/// `agentId`/`sessionKey` clear them. A `main` job silently loses a non-webhook delivery.
/// `nextRunAtMs` is recomputed only when the schedule or `enabled` changed, so a past-due
/// run is never skipped by an unrelated edit.
pub fn apply_patch(
    job: &mut CronJob, patch: &Map<String, Value>, ctx: &ValidationContext<'_>,
) -> Result<(), CronInputError> {
    let invalid =
        |detail: String| CronInputError::new(format!("invalid cron.update params: {detail}"));
    let Ok(Value::Object(mut merged)) = serde_json::to_value(&*job) else {
        return Err(invalid("job does not serialise".to_owned()));
    };
    for key in ["id", "createdAtMs", "updatedAtMs", "state"] {
        merged.remove(key);
    }
    for (key, value) in patch {
        match key.as_str() {
            "payload" => {
                let payload = merge_payload(merged.get("payload"), value)?;
                merged.insert(key.clone(), payload);
            }
            "delivery" | "failureAlert" => {
                let current = merged.get(key).and_then(Value::as_object);
                match (current, value) {
                    (Some(current), Value::Object(changes)) => {
                        let mut next = current.clone();
                        merge_keys(&mut next, changes);
                        merged.insert(key.clone(), Value::Object(next));
                    }
                    (_, Value::Null) => {
                        merged.remove(key);
                    }
                    _ => {
                        merged.insert(key.clone(), value.clone());
                    }
                }
            }
            "agentId" | "sessionKey" if value.is_null() => {
                merged.remove(key);
            }
            _ => {
                merged.insert(key.clone(), value.clone());
            }
        }
    }
    let schedule_changed = patch.contains_key("schedule");
    if schedule_changed
        && let Some(Value::Object(schedule)) = merged.get_mut("schedule")
        && schedule.get("kind").and_then(Value::as_str) == Some("every")
    {
        schedule
            .entry("anchorMs")
            .or_insert_with(|| ctx.now_ms.into());
    }
    if merged.get("sessionTarget").and_then(Value::as_str) == Some("main")
        && merged
            .get("delivery")
            .and_then(|delivery| delivery.get("mode"))
            .and_then(Value::as_str)
            != Some("webhook")
    {
        merged.remove("delivery");
    }
    let updated = check(&merged, "cron.update", ctx, schedule_changed)?;
    let enabled_changed = updated.enabled != job.enabled;
    job.agent_id = updated.agent_id;
    job.session_key = updated.session_key;
    job.name = updated.name;
    job.description = updated.description;
    job.enabled = updated.enabled;
    job.delete_after_run = updated.delete_after_run;
    job.schedule = updated.schedule;
    job.session_target = updated.session_target;
    job.wake_mode = updated.wake_mode;
    job.payload = updated.payload;
    job.delivery = updated.delivery;
    job.failure_alert = updated.failure_alert;
    job.updated_at_ms = ctx.now_ms;
    if (schedule_changed || enabled_changed)
        && let Some(disabled) = refresh_next_run(job, ctx.now_ms, ctx.default_tz)
    {
        tracing::warn!(job_id = %disabled.job_id, "patched cron job disabled by its schedule");
    }
    Ok(())
}

/// The payload after a patch: merged, or replaced when the kind switches.
fn merge_payload(current: Option<&Value>, patch: &Value) -> Result<Value, CronInputError> {
    let Value::Object(changes) = patch else {
        return Ok(patch.clone());
    };
    let current_kind = current
        .and_then(|payload| payload.get("kind"))
        .and_then(Value::as_str);
    let patch_kind = changes.get("kind").and_then(Value::as_str);
    match (current, patch_kind) {
        (Some(Value::Object(current)), kind) if kind.is_none() || kind == current_kind => {
            let mut next = current.clone();
            merge_keys(&mut next, changes);
            Ok(Value::Object(next))
        }
        (_, Some(kind)) => {
            let (field, message) = match kind {
                "systemEvent" => (
                    "text",
                    r#"cron.update payload.kind="systemEvent" requires text"#,
                ),
                "agentTurn" => (
                    "message",
                    r#"cron.update payload.kind="agentTurn" requires message"#,
                ),
                _ => return Ok(patch.clone()),
            };
            let has_body = changes
                .get(field)
                .and_then(Value::as_str)
                .is_some_and(|text| !text.trim().is_empty());
            if has_body {
                Ok(patch.clone())
            } else {
                Err(CronInputError::new(message))
            }
        }
        _ => Ok(patch.clone()),
    }
}

/// `changes` over `target`; `null` removes a key.
fn merge_keys(target: &mut Map<String, Value>, changes: &Map<String, Value>) {
    for (key, value) in changes {
        if value.is_null() {
            target.remove(key);
        } else {
            target.insert(key.clone(), value.clone());
        }
    }
}

// Shape checks: the gateway's JSON schema, as plain code. Each returns a detail such as
// `schedule.everyMs must be an integer >= 1`.

const JOB_KEYS: [&str; 12] = [
    "name",
    "description",
    "enabled",
    "deleteAfterRun",
    "agentId",
    "sessionKey",
    "schedule",
    "sessionTarget",
    "wakeMode",
    "payload",
    "delivery",
    "failureAlert",
];
const AGENT_TURN_KEYS: [&str; 9] = [
    "kind",
    "message",
    "model",
    "thinking",
    "timeoutSeconds",
    "lightContext",
    "toolsAllow",
    "fallbacks",
    "allowUnsafeExternalContent",
];
const DELIVERY_KEYS: [&str; 6] = [
    "mode",
    "channel",
    "to",
    "accountId",
    "bestEffort",
    "failureDestination",
];
const DESTINATION_KEYS: [&str; 4] = ["channel", "to", "accountId", "mode"];
const ALERT_KEYS: [&str; 6] = ["after", "channel", "to", "cooldownMs", "mode", "accountId"];

fn check_shape(job: &Map<String, Value>) -> Result<(), String> {
    only_keys(job, &JOB_KEYS, "")?;
    require(job, "name", "")?;
    string(job, "name", "")?;
    string(job, "description", "")?;
    boolean(job, "enabled", "")?;
    require(job, "enabled", "")?;
    boolean(job, "deleteAfterRun", "")?;
    for key in ["agentId", "sessionKey"] {
        if !matches!(job.get(key), None | Some(Value::Null | Value::String(_))) {
            return Err(format!("{key} must be a string or null"));
        }
    }
    let schedule = object(job, "schedule", "")?.ok_or("schedule is required")?;
    check_schedule(schedule)?;
    let payload = object(job, "payload", "")?.ok_or("payload is required")?;
    check_payload(payload)?;
    require(job, "sessionTarget", "")?;
    string(job, "sessionTarget", "")?;
    require(job, "wakeMode", "")?;
    if !matches!(
        job.get("wakeMode").and_then(Value::as_str),
        Some("now" | "next-heartbeat")
    ) {
        return Err(r#"wakeMode must be "now" or "next-heartbeat""#.to_owned());
    }
    if let Some(delivery) = object(job, "delivery", "")? {
        only_keys(delivery, &DELIVERY_KEYS, "delivery.")?;
        for key in ["channel", "to", "accountId"] {
            string(delivery, key, "delivery.")?;
        }
        boolean(delivery, "bestEffort", "delivery.")?;
        if !matches!(
            delivery.get("mode").and_then(Value::as_str),
            Some("none" | "announce" | "webhook")
        ) {
            return Err(r#"delivery.mode must be "none", "announce" or "webhook""#.to_owned());
        }
        if let Some(destination) = object(delivery, "failureDestination", "delivery.")? {
            check_destination(destination, "delivery.failureDestination.")?;
        }
    }
    match job.get("failureAlert") {
        None | Some(Value::Bool(false)) => {}
        Some(Value::Object(alert)) => {
            only_keys(alert, &ALERT_KEYS, "failureAlert.")?;
            for key in ["channel", "to", "accountId"] {
                string(alert, key, "failureAlert.")?;
            }
            integer(alert, "after", 1, "failureAlert.")?;
            integer(alert, "cooldownMs", 0, "failureAlert.")?;
            alert_mode(alert, "failureAlert.")?;
        }
        Some(_) => return Err("failureAlert must be false or an object".to_owned()),
    }
    Ok(())
}

fn check_schedule(schedule: &Map<String, Value>) -> Result<(), String> {
    let path = "schedule.";
    match schedule.get("kind").and_then(Value::as_str) {
        Some("at") => {
            only_keys(schedule, &["kind", "at"], path)?;
            require(schedule, "at", path)?;
            string(schedule, "at", path)
        }
        Some("every") => {
            only_keys(schedule, &["kind", "everyMs", "anchorMs"], path)?;
            require(schedule, "everyMs", path)?;
            integer(schedule, "everyMs", 1, path)?;
            integer(schedule, "anchorMs", 0, path)
        }
        Some("cron") => {
            only_keys(schedule, &["kind", "expr", "tz", "staggerMs"], path)?;
            require(schedule, "expr", path)?;
            string(schedule, "expr", path)?;
            string(schedule, "tz", path)?;
            integer(schedule, "staggerMs", 0, path)
        }
        _ => Err(r#"schedule.kind must be "at", "every" or "cron""#.to_owned()),
    }
}

fn check_payload(payload: &Map<String, Value>) -> Result<(), String> {
    let path = "payload.";
    let non_empty = |key: &str| {
        payload
            .get(key)
            .and_then(Value::as_str)
            .is_some_and(|text| !text.trim().is_empty())
    };
    match payload.get("kind").and_then(Value::as_str) {
        Some("systemEvent") => {
            only_keys(payload, &["kind", "text"], path)?;
            if non_empty("text") {
                Ok(())
            } else {
                Err("payload.text must be a non-empty string".to_owned())
            }
        }
        Some("agentTurn") => {
            only_keys(payload, &AGENT_TURN_KEYS, path)?;
            if !non_empty("message") {
                return Err("payload.message must be a non-empty string".to_owned());
            }
            string(payload, "model", path)?;
            string(payload, "thinking", path)?;
            integer(payload, "timeoutSeconds", 0, path)?;
            boolean(payload, "lightContext", path)?;
            boolean(payload, "allowUnsafeExternalContent", path)?;
            for key in ["toolsAllow", "fallbacks"] {
                match payload.get(key) {
                    None => {}
                    Some(Value::Array(items)) if items.iter().all(Value::is_string) => {}
                    Some(_) => return Err(format!("{path}{key} must be an array of strings")),
                }
            }
            Ok(())
        }
        _ => Err(r#"payload.kind must be "systemEvent" or "agentTurn""#.to_owned()),
    }
}

fn check_destination(destination: &Map<String, Value>, path: &str) -> Result<(), String> {
    only_keys(destination, &DESTINATION_KEYS, path)?;
    for key in ["channel", "to", "accountId"] {
        string(destination, key, path)?;
    }
    alert_mode(destination, path)
}

fn alert_mode(map: &Map<String, Value>, path: &str) -> Result<(), String> {
    match map.get("mode") {
        None => Ok(()),
        Some(Value::String(mode)) if mode == "announce" || mode == "webhook" => Ok(()),
        Some(_) => Err(format!(r#"{path}mode must be "announce" or "webhook""#)),
    }
}

fn only_keys(map: &Map<String, Value>, allowed: &[&str], path: &str) -> Result<(), String> {
    match map.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(format!("unexpected property {path}{key}")),
        None => Ok(()),
    }
}

fn require(map: &Map<String, Value>, key: &str, path: &str) -> Result<(), String> {
    if map.get(key).is_some_and(|value| !value.is_null()) {
        Ok(())
    } else {
        Err(format!("{path}{key} is required"))
    }
}

fn string(map: &Map<String, Value>, key: &str, path: &str) -> Result<(), String> {
    match map.get(key) {
        None | Some(Value::String(_)) => Ok(()),
        Some(_) => Err(format!("{path}{key} must be a string")),
    }
}

fn boolean(map: &Map<String, Value>, key: &str, path: &str) -> Result<(), String> {
    match map.get(key) {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(_) => Err(format!("{path}{key} must be a boolean")),
    }
}

fn integer(map: &Map<String, Value>, key: &str, min: u64, path: &str) -> Result<(), String> {
    match map.get(key) {
        None => Ok(()),
        Some(Value::Number(number)) if number.as_u64().is_some_and(|n| n >= min) => Ok(()),
        Some(_) => Err(format!("{path}{key} must be an integer >= {min}")),
    }
}

fn object<'a>(
    map: &'a Map<String, Value>, key: &str, path: &str,
) -> Result<Option<&'a Map<String, Value>>, String> {
    match map.get(key) {
        None => Ok(None),
        Some(Value::Object(inner)) => Ok(Some(inner)),
        Some(_) => Err(format!("{path}{key} must be an object")),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cron::normalize::{normalize_create, normalize_patch};
    use crate::cron::schedule::tests::at;
    use crate::cron::types::RunStatus;
    use serde_json::json;

    const NOW: &str = "2026-01-31T12:00:00Z";
    static UTC: TimeZone = TimeZone::UTC;

    /// A validation context at `now_ms` for agent `main` in UTC.
    pub(crate) fn ctx(now_ms: u64) -> ValidationContext<'static> {
        ValidationContext {
            now_ms,
            default_agent_id: "main",
            default_tz: &UTC,
        }
    }

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("object expected, got {other}"),
        }
    }

    fn add(value: Value) -> Result<CronJobCreate, String> {
        add_at(value, at(NOW))
    }

    fn add_at(value: Value, now_ms: u64) -> Result<CronJobCreate, String> {
        let job = normalize_create(&object(value), None).map_err(|e| e.to_string())?;
        validate_create(&job, &ctx(now_ms)).map_err(|e| e.to_string())
    }

    #[test]
    fn a_one_shot_reminder_is_created_with_its_defaults() {
        // Vector 18.
        let created = add(json!({
            "schedule": {"kind": "at", "at": "2026-02-01T16:00:00"},
            "payload": {"kind": "systemEvent", "text": "Reminder: stretch"}
        }))
        .expect("valid");
        assert_eq!(
            created.schedule,
            CronSchedule::At {
                at: "2026-02-01T16:00:00.000Z".into()
            }
        );
        assert_eq!(created.session_target, SessionTarget::Main);
        assert_eq!(created.wake_mode, WakeMode::Now);
        assert!(created.enabled);
        assert_eq!(created.delete_after_run, Some(true));
        assert_eq!(created.name, "Reminder: stretch");
        assert_eq!(created.delivery, None);
        let job = created.into_job("j1".into(), &ctx(at(NOW)));
        assert_eq!(job.state.next_run_at_ms, Some(at("2026-02-01T16:00:00Z")));
        assert_eq!((job.created_at_ms, job.updated_at_ms), (at(NOW), at(NOW)));
    }

    #[test]
    fn every_jobs_are_anchored_at_creation() {
        let job = add(json!({"schedule": {"everyMs": 60000}, "message": "m"}))
            .expect("valid")
            .into_job("e".into(), &ctx(at(NOW)));
        assert_eq!(
            job.schedule,
            CronSchedule::Every {
                every_ms: 60_000,
                anchor_ms: Some(at(NOW))
            }
        );
        assert_eq!(job.state.next_run_at_ms, Some(at(NOW) + 60_000));
    }

    #[test]
    fn session_target_and_payload_kind_must_agree() {
        // Vector 21.
        assert_eq!(
            add(
                json!({"sessionTarget": "main", "schedule": {"everyMs": 5}, "payload": {"kind": "agentTurn", "message": "m"}})
            ),
            Err(MAIN_REQUIRES_SYSTEM_EVENT.to_owned())
        );
        assert_eq!(
            add(
                json!({"sessionTarget": "isolated", "schedule": {"everyMs": 5}, "payload": {"kind": "systemEvent", "text": "t"}})
            ),
            Err(ISOLATED_REQUIRES_AGENT_TURN.to_owned())
        );
        assert_eq!(
            add(
                json!({"sessionTarget": "session:a/b", "schedule": {"everyMs": 5}, "message": "m"})
            ),
            Err("invalid cron sessionTarget session id".to_owned())
        );
    }

    #[test]
    fn delivery_targets_are_checked() {
        // Vector 21.
        assert_eq!(
            add(
                json!({"sessionTarget": "main", "schedule": {"everyMs": 5}, "text": "t", "delivery": {"mode": "announce"}})
            ),
            Err(CHANNEL_DELIVERY_ISOLATED_ONLY.to_owned())
        );
        assert_eq!(
            add(
                json!({"schedule": {"everyMs": 5}, "message": "m", "delivery": {"mode": "webhook", "to": "ftp://x"}})
            ),
            Err(WEBHOOK_REQUIRES_URL.to_owned())
        );
        assert!(add(json!({"schedule": {"everyMs": 5}, "text": "t", "delivery": {"mode": "webhook", "to": "https://hooks.example/x"}})).is_ok());
        assert_eq!(
            add(
                json!({"schedule": {"everyMs": 5}, "text": "t", "delivery": {"mode": "none", "failureDestination": {"to": "1"}}})
            ),
            Err(FAILURE_DESTINATION_ISOLATED_ONLY.to_owned())
        );
        assert_eq!(
            add(
                json!({"schedule": {"everyMs": 5}, "message": "m", "delivery": {"failureDestination": {"mode": "webhook", "to": "nope"}}})
            ),
            Err(FAILURE_DESTINATION_WEBHOOK_URL.to_owned())
        );
    }

    #[test]
    fn main_jobs_belong_to_the_default_agent() {
        assert_eq!(
            add(json!({"agentId": "ops", "schedule": {"everyMs": 5}, "text": "t"})),
            Err(r#"cron: sessionTarget "main" is only valid for the default agent. Use sessionTarget "isolated" with payload.kind "agentTurn" for non-default agents (agentId: ops)"#.to_owned())
        );
        assert!(add(json!({"agentId": "MAIN", "schedule": {"everyMs": 5}, "text": "t"})).is_ok());
        assert!(add(json!({"agentId": "ops", "schedule": {"everyMs": 5}, "message": "m"})).is_ok());
    }

    #[test]
    fn one_shots_must_be_between_a_minute_ago_and_ten_years_ahead() {
        // Vector 22.
        let now = at(NOW);
        let one_shot = |at_ms: u64| json!({"schedule": {"at": iso_millis(at_ms)}, "text": "t"});
        assert_eq!(
            add_at(one_shot(now - 300_000), now),
            Err("schedule.at is in the past: 2026-01-31T11:55:00.000Z (5 minutes ago). Current time: 2026-01-31T12:00:00.000Z".to_owned())
        );
        assert!(add_at(one_shot(now - 30_000), now).is_ok());
        let eleven_years = now + 11 * YEAR_MS;
        assert_eq!(
            add_at(one_shot(eleven_years), now),
            Err(format!(
                "schedule.at is too far in the future: {} (11 years ahead). Maximum allowed: 10 years",
                iso_millis(eleven_years)
            ))
        );
        assert_eq!(
            add_at(
                json!({"schedule": {"kind": "at", "at": "next tuesday"}, "text": "t"}),
                now
            ),
            Err("Invalid schedule.at: expected ISO-8601 timestamp (got next tuesday)".to_owned())
        );
    }

    #[test]
    fn shape_errors_name_the_method_and_the_field() {
        let cases = [
            (
                json!({"schedule": {"everyMs": 0}, "text": "t"}),
                "invalid cron.add params: schedule.everyMs must be an integer >= 1",
            ),
            (
                json!({"schedule": {"everyMs": 5}, "text": "t", "extra": 1}),
                "invalid cron.add params: unexpected property extra",
            ),
            (
                json!({"schedule": {"kind": "weekly"}, "text": "t"}),
                "invalid cron.add params: schedule.kind must be \"at\", \"every\" or \"cron\"",
            ),
            (
                json!({"name": "x", "schedule": {"everyMs": 5}}),
                "invalid cron.add params: payload is required",
            ),
            (
                json!({"schedule": {"everyMs": 5}, "text": "t", "failureAlert": {"after": 0}}),
                "invalid cron.add params: failureAlert.after must be an integer >= 1",
            ),
            (
                json!({"schedule": {"everyMs": 5}, "text": "t", "failureAlert": true}),
                "invalid cron.add params: failureAlert must be false or an object",
            ),
            (
                json!({"schedule": {"everyMs": 5}, "message": "m", "delivery": "telegram"}),
                "invalid cron.add params: delivery must be an object",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(add(input.clone()), Err(expected.to_owned()), "{input}");
        }
        assert!(
            add(json!({"schedule": {"expr": "0 61 * * *"}, "message": "m"}))
                .is_err_and(|e| e.starts_with("Invalid cron schedule: "))
        );
        assert!(
            add(json!({"schedule": {"expr": "0 9 * * *", "tz": "Mars/Olympus"}, "message": "m"}))
                .is_err_and(|e| e.contains("Mars/Olympus"))
        );
    }

    fn stored(value: Value) -> CronJob {
        add(value)
            .expect("valid")
            .into_job("j".into(), &ctx(at(NOW)))
    }

    fn patch(job: &mut CronJob, value: Value, now_ms: u64) -> Result<(), String> {
        let patch = normalize_patch(&object(value), None).map_err(|e| e.to_string())?;
        apply_patch(job, &patch, &ctx(now_ms)).map_err(|e| e.to_string())
    }

    #[test]
    fn patches_merge_payloads_and_demand_a_body_when_the_kind_switches() {
        let mut job = stored(
            json!({"schedule": {"everyMs": 5}, "payload": {"kind": "agentTurn", "message": "m", "toolsAllow": ["read"]}}),
        );
        patch(
            &mut job,
            json!({"payload": {"model": "a/b", "toolsAllow": null}}),
            at(NOW),
        )
        .expect("merged");
        let CronPayload::AgentTurn(turn) = &job.payload else {
            panic!("agent turn")
        };
        assert_eq!(
            (
                turn.message.as_str(),
                turn.model.as_deref(),
                turn.tools_allow.clone()
            ),
            ("m", Some("a/b"), None)
        );
        let before = job.clone();
        assert_eq!(
            patch(
                &mut job,
                json!({"payload": {"kind": "systemEvent"}, "sessionTarget": "main"}),
                at(NOW)
            ),
            Err(r#"cron.update payload.kind="systemEvent" requires text"#.to_owned())
        );
        assert_eq!(
            patch(&mut job, json!({"payload": {"message": " "}}), at(NOW)),
            Err(
                "invalid cron.update params: payload.message must be a non-empty string".to_owned()
            )
        );
        assert_eq!(job, before, "a refused patch changes nothing");
        patch(
            &mut job,
            json!({"payload": {"kind": "systemEvent", "text": "t"}, "sessionTarget": "main"}),
            at(NOW),
        )
        .expect("switched with a body");
        assert_eq!(job.payload, CronPayload::SystemEvent { text: "t".into() });
        assert_eq!(job.delivery, None, "a main job keeps no announce delivery");
    }

    #[test]
    fn patching_a_main_job_drops_channel_delivery_and_keeps_webhooks() {
        let mut job = stored(json!({"schedule": {"everyMs": 5}, "text": "t"}));
        patch(
            &mut job,
            json!({"delivery": {"mode": "announce", "channel": "telegram"}}),
            at(NOW),
        )
        .expect("dropped");
        assert_eq!(job.delivery, None);
        patch(
            &mut job,
            json!({"delivery": {"mode": "webhook", "to": "https://x.example"}}),
            at(NOW),
        )
        .expect("kept");
        assert_eq!(job.delivery.map(|d| d.mode), Some(DeliveryMode::Webhook));
    }

    #[test]
    fn unrelated_edits_never_move_a_past_due_run() {
        let mut job = stored(json!({"schedule": {"expr": "0 9 * * *"}, "message": "m"}));
        job.state.next_run_at_ms = Some(at(NOW) - 1_000);
        patch(&mut job, json!({"name": "Renamed"}), at(NOW)).expect("renamed");
        assert_eq!(job.name, "Renamed");
        assert_eq!(job.state.next_run_at_ms, Some(at(NOW) - 1_000));
        patch(
            &mut job,
            json!({"schedule": {"expr": "0 10 * * *"}}),
            at(NOW),
        )
        .expect("rescheduled");
        assert_eq!(job.state.next_run_at_ms, Some(at("2026-02-01T10:00:00Z")));
        patch(&mut job, json!({"enabled": false}), at(NOW)).expect("disabled");
        assert_eq!(job.state.next_run_at_ms, None);
    }

    #[test]
    fn a_rescheduled_one_shot_must_be_in_the_window_but_old_ones_may_be_renamed() {
        let mut job = stored(json!({"schedule": {"at": "2026-02-01T00:00:00Z"}, "text": "t"}));
        job.state.last_status = Some(RunStatus::Ok);
        let later = at("2026-03-01T00:00:00Z");
        patch(&mut job, json!({"name": "old"}), later).expect("renaming an old one-shot is fine");
        assert!(
            patch(
                &mut job,
                json!({"schedule": {"at": "2026-02-15T00:00:00Z"}}),
                later
            )
            .is_err_and(|e| e.starts_with("schedule.at is in the past: "))
        );
        assert_eq!(
            patch(&mut job, json!({"name": " "}), later),
            Err(NAME_REQUIRED.to_owned())
        );
    }

    #[test]
    fn stored_jobs_that_break_the_rules_are_reported() {
        let mut job = stored(json!({"schedule": {"everyMs": 5}, "text": "t"}));
        assert_eq!(job_spec_error(&job, &ctx(at(NOW))), None);
        job.session_target = SessionTarget::Isolated;
        assert_eq!(
            job_spec_error(&job, &ctx(at(NOW))).map(|e| e.to_string()),
            Some(ISOLATED_REQUIRES_AGENT_TURN.to_owned())
        );
    }

    #[test]
    fn http_urls_only() {
        assert!(is_http_url("https://example.com/hook"));
        assert!(is_http_url("http://10.0.0.1:8080"));
        for bad in ["ftp://x", "example.com", "", "mailto:a@b", "https://"] {
            assert!(!is_http_url(bad), "{bad}");
        }
        assert_eq!(unknown_job_error("x").to_string(), "unknown cron job id: x");
    }
}
