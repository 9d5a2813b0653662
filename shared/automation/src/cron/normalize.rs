//! Normalisation of a job (or patch) as models, the CLI and hooks send it: the loose JSON is
//! tidied into OpenClaw's canonical shape before validation.
//!
//! Wrappers (`{job: …}`, `{data: …}`) are unwrapped, case and spacing fixed, missing kinds
//! inferred (`at` → one-shot, `everyMs` → interval, `expr` → cron; `message` → agent turn,
//! `text` → system event), top-level `message`/`text`/`model`/… moved into the payload,
//! `at` rewritten as ISO-8601 UTC, fields irrelevant to a kind dropped. A new job also gets
//! its defaults: name, session target, wake mode, `deleteAfterRun` for one-shots, the
//! top-of-hour stagger, and announce delivery for isolated agent turns.
//!
//! Unreadable optional values are dropped, as upstream does (an unknown session target, a
//! non-boolean `enabled`, a non-list `toolsAllow`); anything else odd is left in place for
//! `validate` to report.

use serde_json::{Map, Value};

use super::CronInputError;
use super::expr::is_recurring_top_of_hour;
use super::schedule::{DEFAULT_TOP_OF_HOUR_STAGGER_MS, iso_millis, parse_absolute_time_ms};
use super::types::{SessionTarget, WakeMode, is_valid_session_target_id};
use clawless_base::session_key::normalize_agent_id;

/// The error for a `session:<id>` target whose id is empty or holds `/`, `\` or NUL.
pub const INVALID_SESSION_TARGET_ID: &str = "invalid cron sessionTarget session id";

/// Longest inferred name, in characters (the ellipsis included).
const MAX_INFERRED_NAME_CHARS: usize = 60;

/// Longest expression quoted in an inferred `Cron: <expr>` name.
const MAX_INFERRED_EXPR_CHARS: usize = 52;

/// Payload fields only an agent turn has.
const AGENT_TURN_FIELDS: [&str; 7] = [
    "model",
    "thinking",
    "timeoutSeconds",
    "fallbacks",
    "toolsAllow",
    "lightContext",
    "allowUnsafeExternalContent",
];

/// Delivery keys older OpenClaw versions put on the payload; dropped.
const LEGACY_PAYLOAD_DELIVERY_FIELDS: [&str; 5] =
    ["deliver", "channel", "to", "bestEffortDeliver", "provider"];

/// Normalises a new job and fills in its defaults. `caller_session_key` is the session the
/// job is created from: `sessionTarget: "current"` becomes `session:<that key>` (or
/// `isolated` without one).
pub fn normalize_create(
    raw: &Map<String, Value>, caller_session_key: Option<&str>,
) -> Result<Map<String, Value>, CronInputError> {
    let mut job = normalize_fields(unwrap(raw), caller_session_key)?;
    apply_create_defaults(&mut job);
    Ok(job)
}

/// Normalises a patch (same tidying as [`normalize_create`], no defaults). `agentId`,
/// `sessionKey` and `payload.toolsAllow` may be `null` to clear them.
pub fn normalize_patch(
    raw: &Map<String, Value>, caller_session_key: Option<&str>,
) -> Result<Map<String, Value>, CronInputError> {
    normalize_fields(unwrap(raw), caller_session_key)
}

/// `{data: {…}}` and `{job: {…}}` wrap the job itself.
fn unwrap(raw: &Map<String, Value>) -> &Map<String, Value> {
    for key in ["data", "job"] {
        if let Some(Value::Object(inner)) = raw.get(key) {
            return inner;
        }
    }
    raw
}

fn normalize_fields(
    raw: &Map<String, Value>, caller_session_key: Option<&str>,
) -> Result<Map<String, Value>, CronInputError> {
    let mut job = raw.clone();
    job.remove("isolation");

    if let Some(value) = job.remove("agentId") {
        match value {
            Value::Null => {
                job.insert("agentId".into(), Value::Null);
            }
            Value::String(id) if !id.trim().is_empty() => {
                job.insert("agentId".into(), normalize_agent_id(&id).into());
            }
            _ => {}
        }
    }
    if let Some(value) = job.remove("sessionKey") {
        match value {
            Value::Null => {
                job.insert("sessionKey".into(), Value::Null);
            }
            Value::String(key) if !key.trim().is_empty() => {
                job.insert("sessionKey".into(), key.trim().into());
            }
            _ => {}
        }
    }
    for key in ["enabled", "deleteAfterRun"] {
        if let Some(value) = job.remove(key)
            && let Some(flag) = loose_bool(&value)
        {
            job.insert(key.into(), flag.into());
        }
    }
    // A blank name stays blank: a new job then gets an inferred one, a patch is refused.
    if let Some(Value::String(name)) = job.get("name") {
        let trimmed = name.trim().to_owned();
        job.insert("name".into(), trimmed.into());
    }
    if let Some(Value::String(description)) = job.get("description") {
        let trimmed = description.trim().to_owned();
        if trimmed.is_empty() {
            job.remove("description");
        } else {
            job.insert("description".into(), trimmed.into());
        }
    }
    if let Some(value) = job.remove("sessionTarget")
        && let Some(target) = normalize_session_target(&value, caller_session_key)?
    {
        job.insert("sessionTarget".into(), target.to_string().into());
    }
    if let Some(value) = job.remove("wakeMode")
        && let Some(mode) = value.as_str().and_then(WakeMode::parse)
    {
        job.insert("wakeMode".into(), wake_mode_str(mode).into());
    }
    if let Some(Value::Object(schedule)) = job.get("schedule") {
        let schedule = coerce_schedule(schedule);
        job.insert("schedule".into(), Value::Object(schedule));
    }

    // Top-level turn fields (models often send them flat) move into the payload.
    let mut moved = Map::new();
    for key in ["message", "text"].into_iter().chain(AGENT_TURN_FIELDS) {
        if let Some(value) = job.remove(key) {
            moved.insert(key.into(), value);
        }
    }
    match job.remove("payload") {
        Some(Value::Object(mut payload)) => {
            for (key, value) in moved {
                payload.entry(key).or_insert(value);
            }
            job.insert("payload".into(), Value::Object(coerce_payload(&payload)));
        }
        Some(other) => {
            job.insert("payload".into(), other);
        }
        None if !moved.is_empty() => {
            job.insert("payload".into(), Value::Object(coerce_payload(&moved)));
        }
        None => {}
    }

    match job.get("delivery") {
        Some(Value::Object(delivery)) => {
            let delivery = coerce_delivery(delivery);
            job.insert("delivery".into(), Value::Object(delivery));
        }
        Some(Value::Null) => {
            job.remove("delivery");
        }
        _ => {}
    }
    if let Some(Value::Object(alert)) = job.get("failureAlert") {
        let alert = coerce_failure_alert(alert);
        job.insert("failureAlert".into(), Value::Object(alert));
    }
    Ok(job)
}

fn apply_create_defaults(job: &mut Map<String, Value>) {
    job.entry("wakeMode").or_insert_with(|| "now".into());
    job.entry("enabled").or_insert(Value::Bool(true));
    let unnamed = job
        .get("name")
        .is_none_or(|name| name.as_str().is_some_and(str::is_empty));
    if unnamed
        && let (Some(Value::Object(schedule)), Some(Value::Object(payload))) =
            (job.get("schedule"), job.get("payload"))
    {
        let name = infer_job_name(schedule, payload);
        job.insert("name".into(), name.into());
    }
    let payload_kind = job
        .get("payload")
        .and_then(|payload| payload.get("kind"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if !job.contains_key("sessionTarget") {
        match payload_kind.as_deref() {
            Some("systemEvent") => {
                job.insert("sessionTarget".into(), "main".into());
            }
            Some("agentTurn") => {
                job.insert("sessionTarget".into(), "isolated".into());
            }
            _ => {}
        }
    }
    let schedule_kind = job
        .get("schedule")
        .and_then(|schedule| schedule.get("kind"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    if schedule_kind.as_deref() == Some("at") {
        job.entry("deleteAfterRun").or_insert(Value::Bool(true));
    }
    if schedule_kind.as_deref() == Some("cron")
        && let Some(Value::Object(schedule)) = job.get_mut("schedule")
        && !schedule.contains_key("staggerMs")
        && schedule
            .get("expr")
            .and_then(Value::as_str)
            .is_some_and(is_recurring_top_of_hour)
    {
        schedule.insert("staggerMs".into(), DEFAULT_TOP_OF_HOUR_STAGGER_MS.into());
    }
    let isolated_like = job
        .get("sessionTarget")
        .and_then(Value::as_str)
        .and_then(SessionTarget::parse)
        .is_some_and(|target| target.is_isolated_like());
    if isolated_like
        && payload_kind.as_deref() == Some("agentTurn")
        && !job.contains_key("delivery")
    {
        let mut delivery = Map::new();
        delivery.insert("mode".into(), "announce".into());
        job.insert("delivery".into(), Value::Object(delivery));
    }
}

/// A job name from its text: the first non-empty line of the event text or message, at most
/// 60 characters (cut with `…`); else `Cron: <expr>`, `Every: <ms>ms`, `One-shot` or
/// `Cron job` from the schedule.
pub fn infer_job_name(schedule: &Map<String, Value>, payload: &Map<String, Value>) -> String {
    let text = match payload.get("kind").and_then(Value::as_str) {
        Some("systemEvent") => payload.get("text"),
        Some("agentTurn") => payload.get("message"),
        _ => None,
    }
    .and_then(Value::as_str)
    .unwrap_or_default();
    if let Some(line) = text.lines().map(str::trim).find(|line| !line.is_empty()) {
        return truncate_with_ellipsis(line, MAX_INFERRED_NAME_CHARS);
    }
    match schedule.get("kind").and_then(Value::as_str) {
        Some("cron") => match schedule.get("expr").and_then(Value::as_str) {
            Some(expr) => format!(
                "Cron: {}",
                expr.chars()
                    .take(MAX_INFERRED_EXPR_CHARS)
                    .collect::<String>()
            ),
            None => "Cron job".to_owned(),
        },
        Some("every") => match schedule.get("everyMs").and_then(Value::as_u64) {
            Some(every) => format!("Every: {every}ms"),
            None => "Cron job".to_owned(),
        },
        Some("at") => "One-shot".to_owned(),
        _ => "Cron job".to_owned(),
    }
}

fn truncate_with_ellipsis(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let kept: String = text.chars().take(max_chars - 1).collect();
    format!("{}…", kept.trim_end())
}

/// `main`, `isolated`, `current`, `session:<id>`; `current` resolved against the caller.
/// Unknown values are dropped (`Ok(None)`); a `session:` target with a bad id is an error.
fn normalize_session_target(
    value: &Value, caller_session_key: Option<&str>,
) -> Result<Option<SessionTarget>, CronInputError> {
    let Some(raw) = value.as_str() else {
        return Ok(None);
    };
    let trimmed = raw.trim();
    let is_session = trimmed
        .get(..8)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("session:"));
    if is_session && !is_valid_session_target_id(trimmed[8..].trim()) {
        return Err(CronInputError::new(INVALID_SESSION_TARGET_ID));
    }
    Ok(SessionTarget::parse(trimmed).map(|target| match target {
        SessionTarget::Current => match caller_session_key.map(str::trim) {
            Some(key) if is_valid_session_target_id(key) => SessionTarget::Session(key.to_owned()),
            _ => SessionTarget::Isolated,
        },
        other => other,
    }))
}

fn wake_mode_str(mode: WakeMode) -> &'static str {
    match mode {
        WakeMode::Now => "now",
        WakeMode::NextHeartbeat => "next-heartbeat",
    }
}

fn coerce_schedule(raw: &Map<String, Value>) -> Map<String, Value> {
    let mut schedule = raw.clone();
    let expr = ["expr", "cron"]
        .iter()
        .filter_map(|key| raw.get(*key).and_then(Value::as_str))
        .map(str::trim)
        .find(|expr| !expr.is_empty())
        .map(str::to_owned);
    let kind = match raw.get("kind").and_then(Value::as_str).map(str::trim) {
        Some(kind) if ["at", "every", "cron"].contains(&kind.to_ascii_lowercase().as_str()) => {
            Some(kind.to_ascii_lowercase())
        }
        Some(other) if !other.is_empty() => Some(other.to_owned()),
        _ => {
            if raw.get("at").is_some_and(Value::is_string)
                || raw
                    .get("atMs")
                    .is_some_and(|at| at.is_number() || at.is_string())
            {
                Some("at".to_owned())
            } else if raw.get("everyMs").and_then(loose_number).is_some() {
                Some("every".to_owned())
            } else if expr.is_some() {
                Some("cron".to_owned())
            } else {
                None
            }
        }
    };
    if let Some(kind) = &kind {
        schedule.insert("kind".into(), kind.clone().into());
    }

    let at_text = raw
        .get("at")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|at| !at.is_empty());
    let at_ms = match raw.get("atMs") {
        Some(Value::Number(number)) => number.as_f64().filter(|ms| *ms >= 0.0).map(|ms| ms as u64),
        Some(Value::String(text)) => parse_absolute_time_ms(text),
        _ => at_text.and_then(parse_absolute_time_ms),
    };
    match (at_ms, at_text) {
        (Some(ms), _) => {
            schedule.insert("at".into(), iso_millis(ms).into());
        }
        (None, Some(text)) => {
            schedule.insert("at".into(), text.into());
        }
        (None, None) => {}
    }
    schedule.remove("atMs");
    schedule.remove("cron");
    match expr {
        Some(expr) => {
            schedule.insert("expr".into(), expr.into());
        }
        None => {
            schedule.remove("expr");
        }
    }
    for key in ["everyMs", "anchorMs", "staggerMs"] {
        if let Some(value) = schedule.remove(key) {
            let value = match loose_number(&value) {
                Some(ms) if key == "staggerMs" => Value::from(ms.max(0.0).floor() as u64),
                Some(ms) if ms >= 0.0 => Value::from(ms.floor() as u64),
                _ => value,
            };
            schedule.insert(key.into(), value);
        }
    }
    if let Some(Value::String(tz)) = schedule.get("tz") {
        let tz = tz.trim().to_owned();
        if tz.is_empty() {
            schedule.remove("tz");
        } else {
            schedule.insert("tz".into(), tz.into());
        }
    }
    let irrelevant: &[&str] = match kind.as_deref() {
        Some("at") => &["everyMs", "anchorMs", "expr", "tz", "staggerMs"],
        Some("every") => &["at", "expr", "tz", "staggerMs"],
        Some("cron") => &["at", "everyMs", "anchorMs"],
        _ => &[],
    };
    for key in irrelevant {
        schedule.remove(*key);
    }
    schedule
}

fn coerce_payload(raw: &Map<String, Value>) -> Map<String, Value> {
    let mut payload = raw.clone();
    for key in LEGACY_PAYLOAD_DELIVERY_FIELDS {
        payload.remove(key);
    }
    let kind = match raw.get("kind").and_then(Value::as_str).map(str::trim) {
        Some(kind) if kind.eq_ignore_ascii_case("agentturn") => Some("agentTurn".to_owned()),
        Some(kind) if kind.eq_ignore_ascii_case("systemevent") => Some("systemEvent".to_owned()),
        Some(kind) if !kind.is_empty() => Some(kind.to_ascii_lowercase()),
        _ => {
            let non_empty = |key: &str| {
                raw.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|text| !text.trim().is_empty())
            };
            let agent_hint = raw.get("model").is_some_and(Value::is_string)
                || raw.get("fallbacks").is_some_and(Value::is_array)
                || raw.get("thinking").is_some_and(Value::is_string)
                || raw.get("timeoutSeconds").is_some_and(Value::is_number)
                || raw.get("lightContext").is_some_and(Value::is_boolean)
                || raw.get("toolsAllow").is_some_and(Value::is_array)
                || raw
                    .get("allowUnsafeExternalContent")
                    .is_some_and(Value::is_boolean);
            if non_empty("message") {
                Some("agentTurn".to_owned())
            } else if non_empty("text") {
                Some("systemEvent".to_owned())
            } else if agent_hint {
                Some("agentTurn".to_owned())
            } else {
                None
            }
        }
    };
    if let Some(kind) = &kind {
        payload.insert("kind".into(), kind.clone().into());
    }
    for key in ["message", "text"] {
        if let Some(Value::String(text)) = payload.get(key) {
            let trimmed = text.trim().to_owned();
            payload.insert(key.into(), trimmed.into());
        }
    }
    for key in ["model", "thinking"] {
        if let Some(value) = payload.remove(key)
            && let Some(text) = value.as_str().map(str::trim).filter(|t| !t.is_empty())
        {
            payload.insert(key.into(), text.into());
        }
    }
    if let Some(value) = payload.remove("timeoutSeconds")
        && let Some(seconds) = loose_number(&value)
    {
        payload.insert(
            "timeoutSeconds".into(),
            Value::from(seconds.max(0.0).floor() as u64),
        );
    }
    for key in ["fallbacks", "toolsAllow"] {
        if let Some(value) = payload.remove(key) {
            match value {
                Value::Array(items) => {
                    let items: Vec<Value> = items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::trim)
                        .filter(|item| !item.is_empty())
                        .map(Value::from)
                        .collect();
                    payload.insert(key.into(), Value::Array(items));
                }
                Value::Null if key == "toolsAllow" => {
                    payload.insert(key.into(), Value::Null);
                }
                _ => {}
            }
        }
    }
    for key in ["lightContext", "allowUnsafeExternalContent"] {
        if let Some(value) = payload.remove(key)
            && let Some(flag) = loose_bool(&value)
        {
            payload.insert(key.into(), flag.into());
        }
    }
    match kind.as_deref() {
        Some("systemEvent") => {
            payload.remove("message");
            for key in AGENT_TURN_FIELDS {
                payload.remove(key);
            }
        }
        Some("agentTurn") => {
            payload.remove("text");
        }
        _ => {}
    }
    payload
}

fn coerce_delivery(raw: &Map<String, Value>) -> Map<String, Value> {
    let mut delivery = raw.clone();
    match raw.get("mode").and_then(Value::as_str).map(str::trim) {
        Some(mode) => {
            let mode = mode.to_ascii_lowercase();
            let mode = if mode == "deliver" {
                "announce".to_owned()
            } else {
                mode
            };
            if ["announce", "none", "webhook"].contains(&mode.as_str()) {
                delivery.insert("mode".into(), mode.into());
            } else {
                delivery.remove("mode");
            }
        }
        None => {
            delivery.remove("mode");
        }
    }
    // A delivery without a mode announces (OpenClaw's delivery plan reads it that way).
    delivery.entry("mode").or_insert_with(|| "announce".into());
    trim_strings(&mut delivery, &["channel"], true);
    trim_strings(&mut delivery, &["to", "accountId"], false);
    if let Some(value) = delivery.remove("bestEffort")
        && let Some(flag) = loose_bool(&value)
    {
        delivery.insert("bestEffort".into(), flag.into());
    }
    match delivery.get("failureDestination") {
        Some(Value::Object(destination)) => {
            let mut destination = destination.clone();
            trim_strings(&mut destination, &["channel"], true);
            trim_strings(&mut destination, &["to", "accountId"], false);
            if let Some(Value::String(mode)) = destination.get("mode") {
                let mode = mode.trim().to_ascii_lowercase();
                if mode == "announce" || mode == "webhook" {
                    destination.insert("mode".into(), mode.into());
                } else {
                    destination.remove("mode");
                }
            }
            delivery.insert("failureDestination".into(), Value::Object(destination));
        }
        Some(Value::Null) => {
            delivery.remove("failureDestination");
        }
        _ => {}
    }
    delivery
}

fn coerce_failure_alert(raw: &Map<String, Value>) -> Map<String, Value> {
    let mut alert = raw.clone();
    trim_strings(&mut alert, &["channel"], true);
    trim_strings(&mut alert, &["to", "accountId"], false);
    for key in ["after", "cooldownMs"] {
        if let Some(value) = alert.remove(key) {
            let value = match loose_number(&value) {
                Some(number) if number >= 0.0 => Value::from(number.floor() as u64),
                _ => value,
            };
            alert.insert(key.into(), value);
        }
    }
    if let Some(Value::String(mode)) = alert.get("mode") {
        let mode = mode.trim().to_ascii_lowercase();
        alert.insert("mode".into(), mode.into());
    }
    alert
}

/// Trims string fields (lower-casing them when asked); blank ones are removed.
fn trim_strings(map: &mut Map<String, Value>, keys: &[&str], lowercase: bool) {
    for key in keys {
        if let Some(Value::String(text)) = map.get(*key) {
            let trimmed = text.trim();
            if trimmed.is_empty() {
                map.remove(*key);
            } else {
                let text = if lowercase {
                    trimmed.to_lowercase()
                } else {
                    trimmed.to_owned()
                };
                map.insert((*key).into(), text.into());
            }
        }
    }
}

/// A boolean, or the strings `"true"`/`"false"`.
fn loose_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(flag) => Some(*flag),
        Value::String(text) => match text.trim().to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A finite number, or a string holding one.
fn loose_number(value: &Value) -> Option<f64> {
    match value {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|number| number.is_finite())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn create(value: Value) -> Map<String, Value> {
        create_from(value, None).expect("normalises")
    }

    fn create_from(
        value: Value, caller: Option<&str>,
    ) -> Result<Map<String, Value>, CronInputError> {
        let Value::Object(map) = value else {
            panic!("object expected")
        };
        normalize_create(&map, caller)
    }

    #[test]
    fn a_one_shot_reminder_gets_main_session_defaults() {
        // Vector 18.
        let job = create(json!({
            "schedule": {"kind": "at", "at": "2026-02-01T16:00:00"},
            "payload": {"kind": "systemEvent", "text": "Reminder: stretch"}
        }));
        assert_eq!(
            Value::Object(job),
            json!({
                "schedule": {"kind": "at", "at": "2026-02-01T16:00:00.000Z"},
                "payload": {"kind": "systemEvent", "text": "Reminder: stretch"},
                "wakeMode": "now",
                "enabled": true,
                "name": "Reminder: stretch",
                "sessionTarget": "main",
                "deleteAfterRun": true
            })
        );
    }

    #[test]
    fn a_flat_agent_turn_gets_isolated_announce_and_top_of_hour_stagger() {
        // Vector 19 (after the tool gathered the flat keys into a job).
        let job = create(json!({"schedule": {"expr": "0 * * * *"}, "message": "Summarize inbox"}));
        assert_eq!(
            job["schedule"],
            json!({"kind": "cron", "expr": "0 * * * *", "staggerMs": 300_000})
        );
        assert_eq!(
            job["payload"],
            json!({"kind": "agentTurn", "message": "Summarize inbox"})
        );
        assert_eq!(job["sessionTarget"], "isolated");
        assert_eq!(job["delivery"], json!({"mode": "announce"}));
        assert!(!job.contains_key("message"));
    }

    #[test]
    fn stagger_defaults_only_for_recurring_top_of_hour_expressions() {
        // Vector 19.
        let stagger = |schedule: Value| {
            create(json!({"schedule": schedule, "message": "m"}))["schedule"]
                .get("staggerMs")
                .cloned()
        };
        assert_eq!(stagger(json!({"expr": "0 9 * * *"})), None);
        assert_eq!(
            stagger(json!({"expr": "0 0 * * * *"})),
            Some(json!(300_000))
        );
        assert_eq!(
            stagger(json!({"expr": "0 * * * *", "staggerMs": 0})),
            Some(json!(0))
        );
        assert_eq!(
            stagger(json!({"cron": "0 * * * *", "staggerMs": "-5"})),
            Some(json!(0))
        );
    }

    #[test]
    fn names_are_inferred_from_text_or_schedule() {
        // Vector 23.
        let name = |schedule: Value, payload: Value| {
            create(json!({"schedule": schedule, "payload": payload}))["name"].clone()
        };
        assert_eq!(
            name(
                json!({"everyMs": 60000}),
                json!({"kind": "systemEvent", "text": ""})
            ),
            "Every: 60000ms"
        );
        assert_eq!(
            name(
                json!({"expr": "0 9 * * 3"}),
                json!({"kind": "systemEvent", "text": " "})
            ),
            "Cron: 0 9 * * 3"
        );
        assert_eq!(
            name(
                json!({"at": "2026-02-01"}),
                json!({"kind": "systemEvent", "text": ""})
            ),
            "One-shot"
        );
        assert_eq!(
            name(
                json!({"at": "2026-02-01"}),
                json!({"text": "\n  first line \nsecond"})
            ),
            "first line"
        );
        let long = "x".repeat(80);
        let inferred = name(json!({"at": "2026-02-01"}), json!({"message": long}));
        assert_eq!(inferred.as_str().map(|n| n.chars().count()), Some(60));
        assert!(inferred.as_str().is_some_and(|n| n.ends_with('…')));
        // A given name is trimmed, not replaced.
        let job = create(json!({"name": " Daily ", "schedule": {"everyMs": 1}, "message": "m"}));
        assert_eq!(job["name"], "Daily");
    }

    #[test]
    fn session_targets_are_normalised_and_current_resolves_to_the_caller() {
        let target = |target: &str, caller: Option<&str>| {
            create_from(
                json!({"sessionTarget": target, "schedule": {"everyMs": 1}, "message": "m"}),
                caller,
            )
            .map(|job| job.get("sessionTarget").cloned())
        };
        assert_eq!(target(" MAIN ", None), Ok(Some(json!("main"))));
        assert_eq!(
            target("current", Some("agent:main:telegram:direct:1")),
            Ok(Some(json!("session:agent:main:telegram:direct:1")))
        );
        assert_eq!(target("current", None), Ok(Some(json!("isolated"))));
        // Unknown targets are dropped and the payload's default applies.
        assert_eq!(target("elsewhere", None), Ok(Some(json!("isolated"))));
        // Vector 21.
        for bad in ["session:a/b", "session:", "SESSION:a\\b"] {
            assert_eq!(
                target(bad, None).map_err(|e| e.to_string()),
                Err(INVALID_SESSION_TARGET_ID.to_owned()),
                "{bad}"
            );
        }
    }

    #[test]
    fn kinds_are_inferred_and_case_fixed() {
        let job = create(json!({
            "job": {
                "schedule": {"kind": "EVERY", "everyMs": "60000.7", "expr": "x", "at": "y"},
                "payload": {"kind": "AgentTurn", "message": " go ", "text": "drop", "deliver": true, "channel": "x", "timeoutSeconds": -4},
                "enabled": "false",
                "agentId": "Ops Team",
                "wakeMode": "Next-Heartbeat",
                "isolation": {"postToMainPrefix": "x"}
            }
        }));
        assert_eq!(job["schedule"], json!({"kind": "every", "everyMs": 60000}));
        assert_eq!(
            job["payload"],
            json!({"kind": "agentTurn", "message": "go", "timeoutSeconds": 0})
        );
        assert_eq!(job["enabled"], false);
        assert_eq!(job["agentId"], "ops-team");
        assert_eq!(job["wakeMode"], "next-heartbeat");
        assert!(!job.contains_key("isolation"));
        // An agent-only hint makes an agent turn.
        let hinted = create(json!({"schedule": {"everyMs": 5}, "payload": {"model": "x/y"}}));
        assert_eq!(hinted["payload"]["kind"], "agentTurn");
        let at_ms = create(json!({"schedule": {"atMs": 1_770_000_000_000u64}, "text": "t"}));
        assert_eq!(
            at_ms["schedule"],
            json!({"kind": "at", "at": "2026-02-02T02:40:00.000Z"})
        );
    }

    #[test]
    fn deliveries_are_tidied_and_default_to_announce() {
        let job = create(json!({
            "schedule": {"everyMs": 5},
            "message": "m",
            "delivery": {"mode": "Deliver", "channel": " Telegram ", "to": " 42 ", "bestEffort": "true",
                          "failureDestination": {"mode": "WEBHOOK", "to": " https://x "}}
        }));
        assert_eq!(
            job["delivery"],
            json!({"mode": "announce", "channel": "telegram", "to": "42", "bestEffort": true,
                   "failureDestination": {"mode": "webhook", "to": "https://x"}})
        );
        let no_mode =
            create(json!({"schedule": {"everyMs": 5}, "message": "m", "delivery": {"to": "1"}}));
        assert_eq!(no_mode["delivery"], json!({"mode": "announce", "to": "1"}));
    }

    #[test]
    fn patches_get_no_defaults_and_may_clear_fields() {
        let Value::Object(raw) =
            json!({"agentId": null, "payload": {"toolsAllow": null}, "name": "n"})
        else {
            unreachable!()
        };
        let patch = normalize_patch(&raw, None).expect("patch");
        assert_eq!(
            Value::Object(patch),
            json!({"agentId": null, "payload": {"toolsAllow": null}, "name": "n"})
        );
    }
}
