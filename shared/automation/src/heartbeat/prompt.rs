//! The texts of a heartbeat: the user message of each kind of heartbeat (due tasks, a
//! finished background command, a cron reminder, the plain poll) with its `HEARTBEAT.md` path
//! and `Current time:` lines, and the `## Heartbeats` section of the system prompt.

use clawless_base::reply_tokens::HEARTBEAT_OK_TOKEN;
use clawless_base::time::{TimeZone, current_time_line};

use super::config::HeartbeatConfig;
use super::file::HeartbeatTask;

/// The first line of a task prompt (also how later turns recognise one).
pub const TASK_PROMPT_LEAD: &str =
    "Run the following periodic tasks (only those due based on their intervals):";

/// The line after a task prompt's task list.
pub const TASK_PROMPT_CLOSE: &str = "After completing all due tasks, reply HEARTBEAT_OK.";

/// The heading of the non-task part of `HEARTBEAT.md` in a task prompt.
pub const TASK_PROMPT_CONTEXT_HEADING: &str = "Additional context from HEARTBEAT.md:";

/// The first line of a cron reminder prompt; the reminder text follows after a blank line.
pub const CRON_REMINDER_LEAD: &str =
    "A scheduled reminder has been triggered. The reminder content is:";

/// The last line of a cron reminder prompt when the reply can reach the user.
pub const CRON_REMINDER_RELAY: &str =
    "Please relay this reminder to the user in a helpful and friendly way.";

/// The last line of a cron reminder prompt when the reply cannot reach the user.
pub const CRON_REMINDER_INTERNAL: &str =
    "Handle this reminder internally. Do not relay it to the user unless explicitly requested.";

/// The whole cron reminder prompt when the job's events carried no text.
pub const CRON_REMINDER_EMPTY: &str =
    "A scheduled cron event was triggered, but no event content was found. Reply HEARTBEAT_OK.";

/// [`CRON_REMINDER_EMPTY`] when the reply cannot reach the user (clawless wording).
pub const CRON_REMINDER_EMPTY_INTERNAL: &str = "A scheduled cron event was triggered, but no event content was found. Nothing needs to reach the user; reply HEARTBEAT_OK.";

/// The first sentence of the prompt after a background command finished.
pub const EXEC_COMPLETION_LEAD: &str = "An async command you ran earlier has completed. The result is shown in the system messages above.";

/// The second sentence of that prompt when the reply can reach the user (clawless wording).
pub const EXEC_COMPLETION_RELAY: &str = "Tell the user what came of it: the relevant output if it succeeded, what went wrong if it failed.";

/// The second sentence of that prompt when the reply cannot reach the user (clawless wording).
pub const EXEC_COMPLETION_INTERNAL: &str =
    "Handle the result internally. Do not relay it to the user unless explicitly requested.";

/// The marker [`with_current_time`] looks for before adding a time line.
pub const CURRENT_TIME_MARKER: &str = "Current time:";

/// What a heartbeat prompt is about, in order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeartbeatPromptKind {
    /// Due tasks of `HEARTBEAT.md`.
    Tasks,
    /// A background command finished.
    ExecCompletion,
    /// A cron job's reminder.
    CronReminder,
    /// The configured (or default) heartbeat prompt.
    Poll,
}

impl HeartbeatPromptKind {
    /// The provider label of the run: `exec-event`, `cron-event` or `heartbeat`.
    pub fn provider_label(&self) -> &'static str {
        match self {
            Self::ExecCompletion => "exec-event",
            Self::CronReminder => "cron-event",
            Self::Tasks | Self::Poll => "heartbeat",
        }
    }
}

/// A pending system event of the heartbeat's session, as far as prompts care. Kept in the
/// session's meta until a turn takes it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingSystemEvent {
    /// The event's text.
    pub text: String,
    /// Its context key, such as `cron:<jobId>` for a cron job's reminder.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_key: Option<String>,
    /// True when it reports a finished background command.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exec_completion: bool,
    /// When it was queued (epoch ms).
    #[serde(default)]
    pub at_ms: u64,
}

impl PendingSystemEvent {
    /// True when the event came from a cron job (its context key starts with `cron:`).
    pub fn is_cron_tagged(&self) -> bool {
        self.context_key
            .as_deref()
            .is_some_and(|key| key.starts_with("cron:"))
    }
}

/// Pending system events as the turn that takes them shows them to the model, one event per
/// line: `System: [<UTC time>] <text>`, each continuation line of a text prefixed the same
/// way (spec §1.5). Heartbeat noise is left out. Empty when nothing is left.
pub fn system_event_lines(events: &[PendingSystemEvent]) -> String {
    let mut lines = Vec::new();
    for event in events {
        let text = event.text.trim();
        if text.is_empty() || is_heartbeat_noise(text) {
            continue;
        }
        let stamp = clawless_base::time::rfc3339_utc(event.at_ms);
        for line in text.lines() {
            lines.push(format!("System: [{stamp}] {line}"));
        }
    }
    lines.join("\n")
}

/// True for event texts that are about heartbeats themselves rather than news: an
/// acknowledgement (`HEARTBEAT_OK` at the start, not followed by a letter, digit or `_`, any
/// case) or a mention of a "heartbeat poll" or "heartbeat wake".
pub fn is_heartbeat_noise(text: &str) -> bool {
    let lower = text.trim().to_lowercase();
    let token = HEARTBEAT_OK_TOKEN.to_lowercase();
    let is_ack = lower.strip_prefix(&token).is_some_and(|rest| {
        !rest
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
    });
    is_ack || lower.contains("heartbeat poll") || lower.contains("heartbeat wake")
}

/// The texts of the events that make up a cron reminder: the `cron:`-tagged ones (any
/// pending event when the heartbeat is itself a cron wake), leaving out blank texts, heartbeat
/// noise and finished commands.
pub fn cron_reminder_texts(events: &[PendingSystemEvent], cron_wake: bool) -> Vec<&str> {
    events
        .iter()
        .filter(|event| cron_wake || event.is_cron_tagged())
        .filter(|event| {
            !event.exec_completion
                && !event.text.trim().is_empty()
                && !is_heartbeat_noise(&event.text)
        })
        .map(|event| event.text.as_str())
        .collect()
}

/// The task prompt: [`TASK_PROMPT_LEAD`], a blank line, `- <name>: <prompt>` per due task, a
/// blank line and [`TASK_PROMPT_CLOSE`]; then, when `HEARTBEAT.md` has text outside its
/// `tasks:` block, a blank line, [`TASK_PROMPT_CONTEXT_HEADING`] and that text.
pub fn task_prompt(due: &[&HeartbeatTask], context_outside_tasks: &str) -> String {
    let list: Vec<String> = due
        .iter()
        .map(|task| format!("- {}: {}", task.name, task.prompt))
        .collect();
    let mut prompt = format!(
        "{TASK_PROMPT_LEAD}\n\n{}\n\n{TASK_PROMPT_CLOSE}",
        list.join("\n")
    );
    let context = context_outside_tasks.trim();
    if !context.is_empty() {
        prompt.push_str(&format!("\n\n{TASK_PROMPT_CONTEXT_HEADING}\n{context}"));
    }
    prompt
}

/// The cron reminder prompt for these event texts (joined with newlines). `deliverable`: the
/// reply can reach the user (a target channel and recipient resolved, and alerts shown).
pub fn cron_reminder_prompt(texts: &[&str], deliverable: bool) -> String {
    let content = texts.join("\n");
    let content = content.trim();
    match (content.is_empty(), deliverable) {
        (true, true) => CRON_REMINDER_EMPTY.to_owned(),
        (true, false) => CRON_REMINDER_EMPTY_INTERNAL.to_owned(),
        (false, true) => format!("{CRON_REMINDER_LEAD}\n\n{content}\n\n{CRON_REMINDER_RELAY}"),
        (false, false) => format!("{CRON_REMINDER_LEAD}\n\n{content}\n\n{CRON_REMINDER_INTERNAL}"),
    }
}

/// The prompt after a background command finished; the output itself reaches the model as
/// system event lines of the same turn.
pub fn exec_completion_prompt(deliverable: bool) -> String {
    let follow_up = if deliverable {
        EXEC_COMPLETION_RELAY
    } else {
        EXEC_COMPLETION_INTERNAL
    };
    format!("{EXEC_COMPLETION_LEAD} {follow_up}")
}

/// `body` plus, when it mentions `heartbeat.md` in any case, the line
/// `When reading HEARTBEAT.md, use workspace file <workspace>/HEARTBEAT.md (exact case). Do not read docs/heartbeat.md.`
/// (not added twice). Backslashes in the workspace path become `/`.
pub fn with_heartbeat_file_path(body: &str, workspace_dir: &str) -> String {
    if !body.to_lowercase().contains("heartbeat.md") {
        return body.to_owned();
    }
    let workspace = workspace_dir.trim().replace('\\', "/");
    let workspace = workspace.trim_end_matches('/');
    let path = if workspace.is_empty() {
        "HEARTBEAT.md".to_owned()
    } else {
        format!("{workspace}/HEARTBEAT.md")
    };
    let hint = format!(
        "When reading HEARTBEAT.md, use workspace file {path} (exact case). Do not read docs/heartbeat.md."
    );
    if body.contains(&hint) {
        body.to_owned()
    } else {
        format!("{body}\n{hint}")
    }
}

/// `text` (trailing whitespace removed) plus a line with the current time, unless it already
/// has a `Current time:` line or is blank:
///
/// `Current time: Thursday, November 26th, 2026 — 14:05 (Europe/Berlin) / 2026-11-26 13:05 UTC`
///
/// The local part is in the user's zone (English weekday, month, ordinal day, year and 24-hour
/// `HH:MM`), then the zone's name, then the same instant in UTC as `YYYY-MM-DD HH:MM`; see
/// [`clawless_base::time::current_time_line`].
pub fn with_current_time(text: &str, now_ms: u64, user_tz: &TimeZone) -> String {
    let base = text.trim_end();
    if base.is_empty() || base.contains(CURRENT_TIME_MARKER) {
        return base.to_owned();
    }
    format!("{base}\n{}", current_time_line(now_ms, user_tz))
}

/// Whether the agent is told about heartbeats in its system prompt and gets `HEARTBEAT.md` in
/// ordinary turns: only the default agent, only with a heartbeat interval, and only unless
/// `includeSystemPromptSection: false`.
pub fn heartbeat_guidance_enabled(config: &HeartbeatConfig, is_default_agent: bool) -> bool {
    is_default_agent && config.interval_ms().is_some() && config.include_system_prompt_section()
}

/// The `## Heartbeats` section of the system prompt, for the full prompt mode when
/// [`heartbeat_guidance_enabled`]; `None` otherwise. See [`heartbeats_section`].
pub fn heartbeats_system_prompt_section(
    config: &HeartbeatConfig, is_default_agent: bool, full_prompt_mode: bool,
) -> Option<String> {
    (full_prompt_mode && heartbeat_guidance_enabled(config, is_default_agent))
        .then(heartbeats_section)
}

/// The text of the `## Heartbeats` section (spec §1.10), lines joined with `\n`:
///
/// ```text
/// ## Heartbeats
/// If the current user message is a heartbeat poll and nothing needs attention, reply exactly:
/// HEARTBEAT_OK
/// If something needs attention, do NOT include "HEARTBEAT_OK"; reply with the alert text instead.
/// ```
pub fn heartbeats_section() -> String {
    [
        "## Heartbeats".to_owned(),
        "If the current user message is a heartbeat poll and nothing needs attention, reply exactly:"
            .to_owned(),
        HEARTBEAT_OK_TOKEN.to_owned(),
        format!(
            "If something needs attention, do NOT include \"{HEARTBEAT_OK_TOKEN}\"; reply with the alert text instead."
        ),
    ]
    .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heartbeat::config::DEFAULT_HEARTBEAT_PROMPT;
    use clawless_base::time::parse_time_zone;

    fn at(instant: &str) -> u64 {
        let ts: jiff::Timestamp = instant.parse().expect("valid instant");
        u64::try_from(ts.as_millisecond()).expect("after the epoch")
    }

    fn task(name: &str, prompt: &str) -> HeartbeatTask {
        HeartbeatTask {
            name: name.into(),
            interval: "30m".into(),
            prompt: prompt.into(),
        }
    }

    #[test]
    fn system_events_become_prefixed_lines_without_heartbeat_noise() {
        let mut first = event("Build finished.\nAll green.", None, false);
        first.at_ms = 1_768_705_200_000;
        let noise = event("HEARTBEAT_OK", None, false);
        assert_eq!(
            system_event_lines(&[first, noise]),
            "System: [2026-01-18T03:00:00Z] Build finished.\nSystem: [2026-01-18T03:00:00Z] All green."
        );
        assert_eq!(system_event_lines(&[]), "");
    }

    fn event(text: &str, context_key: Option<&str>, exec_completion: bool) -> PendingSystemEvent {
        PendingSystemEvent {
            text: text.into(),
            context_key: context_key.map(str::to_owned),
            exec_completion,
            at_ms: 0,
        }
    }

    #[test]
    fn the_default_prompt_is_openclaws_exact_sentence() {
        assert_eq!(
            DEFAULT_HEARTBEAT_PROMPT,
            "Read HEARTBEAT.md if it exists (workspace context). Follow it strictly. Do not infer or repeat old tasks from prior chats. If nothing needs attention, reply HEARTBEAT_OK."
        );
    }

    #[test]
    fn a_prompt_naming_heartbeat_md_gets_the_workspace_path_once() {
        let body = with_heartbeat_file_path(DEFAULT_HEARTBEAT_PROMPT, "/srv/ws/");
        assert_eq!(
            body,
            format!(
                "{DEFAULT_HEARTBEAT_PROMPT}\nWhen reading HEARTBEAT.md, use workspace file /srv/ws/HEARTBEAT.md (exact case). Do not read docs/heartbeat.md."
            )
        );
        assert_eq!(with_heartbeat_file_path(&body, "/srv/ws"), body);
        assert_eq!(
            with_heartbeat_file_path("check heartbeat.MD", "C:\\ws")
                .lines()
                .nth(1),
            Some(
                "When reading HEARTBEAT.md, use workspace file C:/ws/HEARTBEAT.md (exact case). Do not read docs/heartbeat.md."
            )
        );
        assert_eq!(
            with_heartbeat_file_path("Anything new?", "/ws"),
            "Anything new?"
        );
    }

    #[test]
    fn the_time_line_is_added_once_in_the_users_zone_and_utc() {
        let now = at("2026-11-26T13:05:42Z");
        let berlin = parse_time_zone("Europe/Berlin").unwrap();
        assert_eq!(
            with_current_time("Poll.\n\n", now, &berlin),
            "Poll.\nCurrent time: Thursday, November 26th, 2026 — 14:05 (Europe/Berlin) / 2026-11-26 13:05 UTC"
        );
        assert_eq!(
            with_current_time("Poll.\nCurrent time: earlier", now, &berlin),
            "Poll.\nCurrent time: earlier"
        );
        assert_eq!(with_current_time("  ", now, &berlin), "");
    }

    #[test]
    fn the_task_prompt_lists_due_tasks_then_the_rest_of_the_file() {
        let inbox = task("inbox", "Check mail");
        let news = task("news", "Skim headlines");
        assert_eq!(
            task_prompt(&[&inbox], ""),
            "Run the following periodic tasks (only those due based on their intervals):\n\n- inbox: Check mail\n\nAfter completing all due tasks, reply HEARTBEAT_OK."
        );
        assert_eq!(
            task_prompt(&[&inbox, &news], "\nBe brief.\n"),
            "Run the following periodic tasks (only those due based on their intervals):\n\n- inbox: Check mail\n- news: Skim headlines\n\nAfter completing all due tasks, reply HEARTBEAT_OK.\n\nAdditional context from HEARTBEAT.md:\nBe brief."
        );
    }

    #[test]
    fn cron_reminders_relay_or_stay_internal_and_say_so_when_empty() {
        assert_eq!(
            cron_reminder_prompt(&["Call mom", "Buy milk"], true),
            "A scheduled reminder has been triggered. The reminder content is:\n\nCall mom\nBuy milk\n\nPlease relay this reminder to the user in a helpful and friendly way."
        );
        assert_eq!(
            cron_reminder_prompt(&["Rotate logs"], false),
            "A scheduled reminder has been triggered. The reminder content is:\n\nRotate logs\n\nHandle this reminder internally. Do not relay it to the user unless explicitly requested."
        );
        assert_eq!(
            cron_reminder_prompt(&[], true),
            "A scheduled cron event was triggered, but no event content was found. Reply HEARTBEAT_OK."
        );
        assert_eq!(
            cron_reminder_prompt(&["  "], false),
            CRON_REMINDER_EMPTY_INTERNAL
        );
    }

    #[test]
    fn cron_reminder_texts_skip_noise_untagged_and_exec_events() {
        let events = [
            event("Call mom", Some("cron:job-1"), false),
            event("HEARTBEAT_OK", Some("cron:job-1"), false),
            event("Exec finished (pid 4)", Some("cron:job-1"), true),
            event("Unrelated note", None, false),
            event("   ", Some("cron:job-2"), false),
        ];
        assert_eq!(cron_reminder_texts(&events, false), ["Call mom"]);
        // A cron wake takes every pending event that is real news.
        assert_eq!(
            cron_reminder_texts(&events, true),
            ["Call mom", "Unrelated note"]
        );
    }

    #[test]
    fn heartbeat_noise_is_acks_and_heartbeat_mentions() {
        for noise in [
            "HEARTBEAT_OK",
            "heartbeat_ok.",
            "  HEARTBEAT_OK all good",
            "the heartbeat poll ran",
            "Heartbeat wake queued",
        ] {
            assert!(is_heartbeat_noise(noise), "{noise:?}");
        }
        for news in ["HEARTBEAT_OKAY", "Call mom", "heartbeat"] {
            assert!(!is_heartbeat_noise(news), "{news:?}");
        }
    }

    #[test]
    fn the_exec_prompt_starts_with_the_spec_sentence() {
        assert_eq!(
            exec_completion_prompt(true),
            format!("{EXEC_COMPLETION_LEAD} {EXEC_COMPLETION_RELAY}")
        );
        assert!(exec_completion_prompt(false).starts_with(
            "An async command you ran earlier has completed. The result is shown in the system messages above. Handle"
        ));
        assert_eq!(
            HeartbeatPromptKind::ExecCompletion.provider_label(),
            "exec-event"
        );
        assert_eq!(
            HeartbeatPromptKind::CronReminder.provider_label(),
            "cron-event"
        );
        assert_eq!(HeartbeatPromptKind::Tasks.provider_label(), "heartbeat");
    }

    #[test]
    fn the_system_prompt_section_is_for_the_default_agent_with_heartbeats_on() {
        let on = HeartbeatConfig::default();
        assert_eq!(
            heartbeats_system_prompt_section(&on, true, true).as_deref(),
            Some(
                "## Heartbeats\nIf the current user message is a heartbeat poll and nothing needs attention, reply exactly:\nHEARTBEAT_OK\nIf something needs attention, do NOT include \"HEARTBEAT_OK\"; reply with the alert text instead."
            )
        );
        assert!(heartbeats_system_prompt_section(&on, false, true).is_none());
        assert!(heartbeats_system_prompt_section(&on, true, false).is_none());
        let off = HeartbeatConfig {
            every: Some("0m".into()),
            ..HeartbeatConfig::default()
        };
        assert!(!heartbeat_guidance_enabled(&off, true));
        let opted_out = HeartbeatConfig {
            include_system_prompt_section: Some(false),
            ..HeartbeatConfig::default()
        };
        assert!(heartbeats_system_prompt_section(&opted_out, true, true).is_none());
    }
}
