//! The `subagents` tool (spec §3.6) and `agents_list` (§3.7): their contracts with the model,
//! a caller's runs split into active and recent with the list text, target resolution with
//! OpenClaw's exact errors and order, the steer checks (length, rate limit) and the kill and
//! steer texts; and the agents a caller may spawn as.
//!
//! The runtime reads the caller's runs from its registry into [`RunView`]s, aborts and
//! restarts runs, and keeps the time of each caller's last steer per child.

use serde_json::{Map, Value, json};

use super::announce::{format_duration_short, format_token_count};
use super::config::SubagentsConfig;
use clawless_base::model::ToolSpec;
use clawless_base::session_key::normalize_agent_id;

/// The tool's name.
pub const SUBAGENTS_TOOL_NAME: &str = "subagents";

/// The tool's display label.
pub const SUBAGENTS_TOOL_LABEL: &str = "Subagents";

/// The tool's description, as the model sees it.
pub const SUBAGENTS_TOOL_DESCRIPTION: &str = "List, kill, or steer spawned sub-agents for this requester session. Use this for sub-agent orchestration.";

/// `recentMinutes` when unset.
pub const DEFAULT_RECENT_MINUTES: u32 = 30;

/// The largest `recentMinutes` (a day).
pub const MAX_RECENT_MINUTES: u32 = 1_440;

/// A leaf sub-agent's answer to any `subagents` action.
pub const LEAF_CANNOT_CONTROL: &str = "Leaf subagents cannot control other sessions.";

/// The longest steer message, in characters.
pub const MAX_STEER_CHARS: usize = 4_000;

/// One steer per caller and child per this many milliseconds.
pub const STEER_RATE_LIMIT_MS: u64 = 2_000;

/// A steer within [`STEER_RATE_LIMIT_MS`] of the previous one to the same child.
pub const STEER_RATE_LIMITED: &str =
    "Steer rate limit exceeded. Wait a moment before sending another steer.";

/// A sub-agent steering its own session.
pub const CANNOT_STEER_SELF: &str = "Subagents cannot steer themselves.";

/// `kill` with nothing running.
pub const NO_RUNNING_TO_KILL: &str = "no running subagents to kill.";

/// Longest label in a list line, in characters.
pub const LIST_LABEL_MAX_CHARS: usize = 48;

/// Longest task in a list line, in characters.
pub const LIST_TASK_MAX_CHARS: usize = 72;

/// `agents_list`'s name.
pub const AGENTS_LIST_TOOL_NAME: &str = "agents_list";

/// `agents_list`'s display label.
pub const AGENTS_LIST_TOOL_LABEL: &str = "Agents";

/// `agents_list`'s description, as the model sees it.
pub const AGENTS_LIST_DESCRIPTION: &str = r#"List clawless agent ids you can target with `sessions_spawn` when `runtime="subagent"` (based on subagent allowlists)."#;

/// The `subagents` tool as offered to the model.
pub fn subagents_tool_spec() -> ToolSpec {
    ToolSpec {
        name: SUBAGENTS_TOOL_NAME.to_owned(),
        description: SUBAGENTS_TOOL_DESCRIPTION.to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["list", "kill", "steer"],
                    "default": "list",
                    "description": "list (default), kill, or steer."
                },
                "target": {
                    "type": "string",
                    "description": "kill, steer: `last`, a list index, a session key, a label (or its unique prefix), or a run id prefix; kill also takes `all`."
                },
                "message": {"type": "string", "description": "steer: the new instruction (at most 4000 characters)."},
                "recentMinutes": {
                    "type": "number",
                    "minimum": 1,
                    "maximum": MAX_RECENT_MINUTES,
                    "default": DEFAULT_RECENT_MINUTES,
                    "description": "list: include runs that ended this many minutes ago or less."
                }
            }
        }),
    }
}

/// What a `subagents` call asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubagentsAction {
    /// List active runs and those that ended in the last `recent_minutes` (1–1440).
    List {
        /// The recent window in minutes.
        recent_minutes: u32,
    },
    /// Stop a run (and its descendants), or every running one for `all` / `*`.
    Kill {
        /// The target as given.
        target: String,
    },
    /// Restart a run with a new message.
    Steer {
        /// The target as given.
        target: String,
        /// The message.
        message: String,
    },
    /// One run's details (`/subagents info`).
    Info {
        /// The target as given.
        target: String,
    },
    /// One run's latest messages (`/subagents log`).
    Log {
        /// The target as given.
        target: String,
        /// How many messages (1–50, default 10).
        limit: usize,
    },
    /// The chat commands' usage (`/subagents` with something it does not know).
    Help,
}

/// The chat commands' usage.
pub const SUBAGENTS_COMMAND_USAGE: &str = "Usage: /subagents list | kill <id|#|all> | steer <id|#> <message> | info <id|#> | log <id|#> [limit]. Also /kill <id|#|all> and /steer <id|#> <message>.";

/// Messages `/subagents log` shows when no limit is given.
pub const DEFAULT_LOG_LIMIT: usize = 10;

/// The most messages `/subagents log` shows.
pub const MAX_LOG_LIMIT: usize = 50;

/// `/subagents …`, `/kill …` and `/steer …` (spec §3.11) as the `subagents` call they stand
/// for; `None` when `body` (a command, mentions already stripped) is none of them. A
/// sub-command it does not know, or one missing its target or message, asks for the usage.
pub fn parse_subagents_command(body: &str) -> Option<Value> {
    let body = body.trim();
    let (command, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    // `/subagents@SomeBot` in Telegram groups.
    let command = command
        .split('@')
        .next()
        .unwrap_or(command)
        .to_ascii_lowercase();
    let rest = rest.trim();
    let (action, rest) = match command.as_str() {
        "/subagents" => {
            let (action, rest) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            (action.to_ascii_lowercase(), rest.trim())
        }
        "/kill" => ("kill".to_owned(), rest),
        "/steer" => ("steer".to_owned(), rest),
        _ => return None,
    };
    let (target, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    let tail = tail.trim();
    let help = json!({"action": "help"});
    Some(match action.as_str() {
        "" | "list" => json!({"action": "list"}),
        "kill" | "info" if !target.is_empty() => json!({"action": action, "target": target}),
        "steer" if !target.is_empty() && !tail.is_empty() => {
            json!({"action": "steer", "target": target, "message": tail})
        }
        "log" if !target.is_empty() => match tail {
            "" => json!({"action": "log", "target": target}),
            limit => match limit.parse::<u64>() {
                Ok(limit) => json!({"action": "log", "target": target, "limit": limit}),
                Err(_) => help,
            },
        },
        _ => help,
    })
}

/// Reads a `subagents` call. `kill` and `steer` need a `target` (`target required`), `steer`
/// a `message` (`message required`).
pub fn parse_subagents_call(args: &Value) -> Result<SubagentsAction, String> {
    let empty = Map::new();
    let args = args.as_object().unwrap_or(&empty);
    let text = |key: &str| super::spawn::string_arg(args, key);
    let action = text("action").map_or_else(|| "list".to_owned(), |a| a.to_ascii_lowercase());
    match action.as_str() {
        "list" => Ok(SubagentsAction::List {
            recent_minutes: recent_minutes(args.get("recentMinutes")),
        }),
        "kill" => Ok(SubagentsAction::Kill {
            target: text("target").ok_or("target required")?,
        }),
        "steer" => Ok(SubagentsAction::Steer {
            target: text("target").ok_or("target required")?,
            message: args
                .get("message")
                .and_then(Value::as_str)
                .filter(|message| !message.trim().is_empty())
                .map(str::to_owned)
                .ok_or("message required")?,
        }),
        "info" => Ok(SubagentsAction::Info {
            target: text("target").ok_or("target required")?,
        }),
        "log" => Ok(SubagentsAction::Log {
            target: text("target").ok_or("target required")?,
            limit: args
                .get("limit")
                .and_then(Value::as_u64)
                .and_then(|limit| usize::try_from(limit).ok())
                .map_or(DEFAULT_LOG_LIMIT, |limit| limit.clamp(1, MAX_LOG_LIMIT)),
        }),
        "help" => Ok(SubagentsAction::Help),
        other => Err(format!("Unknown action: {other}")),
    }
}

/// `recentMinutes` floored and clamped to 1–1440, 30 when missing or unreadable.
fn recent_minutes(value: Option<&Value>) -> u32 {
    let Some(minutes) = value.and_then(Value::as_f64).filter(|m| m.is_finite()) else {
        return DEFAULT_RECENT_MINUTES;
    };
    // In range by the clamp, so the cast is exact.
    minutes.floor().clamp(1.0, f64::from(MAX_RECENT_MINUTES)) as u32
}

/// Where a run stands, as the list shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Still running.
    Running,
    /// Finished.
    Done,
    /// Failed.
    Error,
    /// Hit its time limit.
    Timeout,
    /// Killed.
    Killed,
}

impl RunStatus {
    /// The status word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Done => "done",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::Killed => "killed",
        }
    }
}

/// One sub-agent run as the `subagents` tool sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunView {
    /// 1-based position over active-then-recent (set by [`split_runs`]).
    pub index: usize,
    /// The run.
    pub run_id: String,
    /// The child session.
    pub session_key: String,
    /// The spawn's label, if any.
    pub label: Option<String>,
    /// The task.
    pub task: String,
    /// Where it stands.
    pub status: RunStatus,
    /// Its model, when known.
    pub model: Option<String>,
    /// How long it ran (so far).
    pub runtime_ms: Option<u64>,
    /// Its total tokens, when known.
    pub total_tokens: Option<u64>,
    /// When it started.
    pub started_at_ms: u64,
    /// When it ended.
    pub ended_at_ms: Option<u64>,
    /// Its own children still running.
    pub pending_descendants: u32,
    /// Its children's session keys, if it has any.
    pub child_sessions: Vec<String>,
}

impl RunView {
    /// `/subagents info`: the run's details, one per line.
    pub fn info_text(&self) -> String {
        let mut lines = vec![
            format!("{} ({})", self.display_name(), self.status.as_str()),
            format!("session: {}", self.session_key),
            format!("run: {}", self.run_id),
            format!("task: {}", self.task.trim()),
            format!(
                "runtime: {}",
                super::announce::format_duration_short(self.runtime_ms)
            ),
        ];
        if let Some(model) = &self.model {
            lines.push(format!("model: {model}"));
        }
        lines.join("\n")
    }

    /// The label, else the task.
    pub fn display_name(&self) -> &str {
        self.label
            .as_deref()
            .map(str::trim)
            .filter(|label| !label.is_empty())
            .unwrap_or(self.task.trim())
    }

    /// Whether it is running or waiting on descendants.
    pub fn is_active(&self) -> bool {
        self.status == RunStatus::Running || self.pending_descendants > 0
    }

    /// The list item: `{index, runId, sessionKey, label, task, status, pendingDescendants,
    /// runtime, runtimeMs, childSessions?, model, totalTokens, startedAt, endedAt?}`.
    pub fn to_json(&self) -> Value {
        let mut item = json!({
            "index": self.index,
            "runId": self.run_id,
            "sessionKey": self.session_key,
            "label": self.display_name(),
            "task": self.task,
            "status": self.status.as_str(),
            "pendingDescendants": self.pending_descendants,
            "runtime": format_duration_short(self.runtime_ms),
            "runtimeMs": self.runtime_ms.unwrap_or(0),
            "model": self.model,
            "totalTokens": self.total_tokens,
            "startedAt": self.started_at_ms,
        });
        if !self.child_sessions.is_empty() {
            item["childSessions"] = json!(self.child_sessions);
        }
        if let Some(ended) = self.ended_at_ms {
            item["endedAt"] = json!(ended);
        }
        item
    }

    /// The list line: `<i>. <label≤48> (<model>, <runtime>[, <tokens>]) <status>[ - <task≤72>]`.
    pub fn list_line(&self) -> String {
        let mut details = vec![
            self.model.clone().unwrap_or_else(|| "model n/a".to_owned()),
            format_duration_short(self.runtime_ms),
        ];
        if let Some(tokens) = self.total_tokens.filter(|&tokens| tokens > 0) {
            details.push(format!("{} tokens", format_token_count(tokens)));
        }
        let name = self.display_name();
        let mut line = format!(
            "{}. {} ({}) {}",
            self.index,
            shorten(name, LIST_LABEL_MAX_CHARS),
            details.join(", "),
            self.status.as_str()
        );
        let task = self.task.trim();
        if !task.is_empty() && task != name {
            line.push_str(" - ");
            line.push_str(&shorten(
                &super::prompt::collapse_whitespace(task),
                LIST_TASK_MAX_CHARS,
            ));
        }
        line
    }
}

/// A caller's runs for the `subagents` tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunLists {
    /// Running (or waiting on descendants), newest first.
    pub active: Vec<RunView>,
    /// Ended within the window, most recently ended first.
    pub recent: Vec<RunView>,
    /// The window in minutes.
    pub recent_minutes: u32,
}

/// Splits a caller's runs into active and recent (ended at most `recent_minutes` before
/// `now_ms`; older ones are left out) and numbers them 1… over active-then-recent.
pub fn split_runs(runs: Vec<RunView>, now_ms: u64, recent_minutes: u32) -> RunLists {
    let cutoff = now_ms.saturating_sub(u64::from(recent_minutes).saturating_mul(60_000));
    let (mut active, ended): (Vec<RunView>, Vec<RunView>) =
        runs.into_iter().partition(RunView::is_active);
    let mut recent: Vec<RunView> = ended
        .into_iter()
        .filter(|run| run.ended_at_ms.unwrap_or(run.started_at_ms) >= cutoff)
        .collect();
    active.sort_by_key(|run| std::cmp::Reverse(run.started_at_ms));
    recent.sort_by_key(|run| std::cmp::Reverse(run.ended_at_ms.unwrap_or(run.started_at_ms)));
    for (index, run) in active.iter_mut().chain(recent.iter_mut()).enumerate() {
        run.index = index + 1;
    }
    RunLists {
        active,
        recent,
        recent_minutes,
    }
}

impl RunLists {
    /// `active subagents:` and its lines (or `(none)`), a blank line, `recent (last <N>m):`
    /// and its lines (or `(none)`).
    pub fn text(&self) -> String {
        let lines = |runs: &[RunView]| {
            if runs.is_empty() {
                "(none)".to_owned()
            } else {
                runs.iter()
                    .map(RunView::list_line)
                    .collect::<Vec<_>>()
                    .join("\n")
            }
        };
        format!(
            "active subagents:\n{}\n\nrecent (last {}m):\n{}",
            lines(&self.active),
            self.recent_minutes,
            lines(&self.recent)
        )
    }

    /// The `list` result.
    pub fn to_json(&self, requester_session_key: &str, caller_session_key: &str) -> Value {
        json!({
            "status": "ok",
            "action": "list",
            "requesterSessionKey": requester_session_key,
            "callerSessionKey": caller_session_key,
            "callerIsSubagent": super::caller_depth(caller_session_key) > 0,
            "total": self.active.len() + self.recent.len(),
            "active": self.active.iter().map(RunView::to_json).collect::<Vec<_>>(),
            "recent": self.recent.iter().map(RunView::to_json).collect::<Vec<_>>(),
            "text": self.text(),
        })
    }
}

/// Finds the run `target` names, trying in order: `last` (the most recently started), a
/// 1-based index over active-then-recent, an exact session key (anything with `:`), an
/// exact label (any case), a unique label prefix, a unique run id prefix. The errors are
/// OpenClaw's: `Invalid subagent index: <v>`, `Unknown subagent session: <v>`,
/// `Ambiguous subagent label: <v>`, `Ambiguous subagent label prefix: <v>`,
/// `Ambiguous subagent run id prefix: <v>`, `Unknown subagent target: <v>`.
pub fn resolve_target<'a>(
    target: &str, active: &'a [RunView], recent: &'a [RunView],
) -> Result<&'a RunView, String> {
    let target = target.trim();
    let runs: Vec<&RunView> = active.iter().chain(recent).collect();
    let unknown = || format!("Unknown subagent target: {target}");
    if target.eq_ignore_ascii_case("last") {
        return runs
            .iter()
            .copied()
            .reduce(|newest, run| {
                if run.started_at_ms > newest.started_at_ms {
                    run
                } else {
                    newest
                }
            })
            .ok_or_else(unknown);
    }
    if !target.is_empty() && target.bytes().all(|b| b.is_ascii_digit()) {
        return target
            .parse::<usize>()
            .ok()
            .and_then(|index| index.checked_sub(1))
            .and_then(|index| runs.get(index).copied())
            .ok_or_else(|| format!("Invalid subagent index: {target}"));
    }
    if target.contains(':') {
        return runs
            .iter()
            .copied()
            .find(|run| run.session_key == target)
            .ok_or_else(|| format!("Unknown subagent session: {target}"));
    }
    let lowered = target.to_lowercase();
    let label = |run: &RunView| {
        run.label
            .as_deref()
            .map(|label| label.trim().to_lowercase())
            .unwrap_or_default()
    };
    let unique = |matches: Vec<&'a RunView>, ambiguous: &str| match matches.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        _ => Err(format!("{ambiguous}: {target}")),
    };
    let exact: Vec<&RunView> = runs
        .iter()
        .copied()
        .filter(|run| !label(run).is_empty() && label(run) == lowered)
        .collect();
    if let Some(run) = unique(exact, "Ambiguous subagent label")? {
        return Ok(run);
    }
    let prefixed: Vec<&RunView> = runs
        .iter()
        .copied()
        .filter(|run| !target.is_empty() && label(run).starts_with(&lowered))
        .collect();
    if let Some(run) = unique(prefixed, "Ambiguous subagent label prefix")? {
        return Ok(run);
    }
    let by_run_id: Vec<&RunView> = runs
        .iter()
        .copied()
        .filter(|run| !target.is_empty() && run.run_id.to_lowercase().starts_with(&lowered))
        .collect();
    unique(by_run_id, "Ambiguous subagent run id prefix")?.ok_or_else(unknown)
}

/// A steer that may not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SteerRefusal {
    /// The message is unusable: `{status:"error", error}`.
    #[error("{0}")]
    Invalid(String),
    /// Too soon after the previous steer: `{status:"rate_limited", error}`.
    #[error("{STEER_RATE_LIMITED}")]
    RateLimited,
}

impl SteerRefusal {
    /// The tool result.
    pub fn to_json(&self) -> Value {
        let status = match self {
            Self::Invalid(_) => "error",
            Self::RateLimited => "rate_limited",
        };
        json!({"status": status, "action": "steer", "error": self.to_string()})
    }
}

/// Checks a steer: at most 4000 characters (`Message too long (<n> chars, max 4000).`), and
/// no sooner than 2 s after this caller's last steer to the same child.
pub fn check_steer(
    message: &str, last_steer_at_ms: Option<u64>, now_ms: u64,
) -> Result<(), SteerRefusal> {
    let chars = message.chars().count();
    if chars > MAX_STEER_CHARS {
        return Err(SteerRefusal::Invalid(format!(
            "Message too long ({chars} chars, max {MAX_STEER_CHARS})."
        )));
    }
    if last_steer_at_ms.is_some_and(|last| now_ms.saturating_sub(last) < STEER_RATE_LIMIT_MS) {
        return Err(SteerRefusal::RateLimited);
    }
    Ok(())
}

/// The result of an accepted steer: `{status:"accepted", action:"steer", mode:"restart",
/// runId, sessionKey, text:"steered <label>."}`.
pub fn steer_accepted_json(run: &RunView, new_run_id: &str) -> Value {
    json!({
        "status": "accepted",
        "action": "steer",
        "mode": "restart",
        "runId": new_run_id,
        "sessionKey": run.session_key,
        "text": format!("steered {}.", run.display_name()),
    })
}

/// The text of a kill of one run: `killed <label>.`, or `killed <label> (+ <n>
/// descendants).` when its descendants were stopped too.
pub fn kill_text(run: &RunView, descendants: u32) -> String {
    if descendants == 0 {
        format!("killed {}.", run.display_name())
    } else {
        format!(
            "killed {} (+ {descendants} descendants).",
            run.display_name()
        )
    }
}

/// The text of `kill` on a run that has already ended: `<label> is already finished.`.
pub fn already_finished_text(run: &RunView) -> String {
    format!("{} is already finished.", run.display_name())
}

/// The text of `kill all`: `killed <n> subagents.`, or [`NO_RUNNING_TO_KILL`].
pub fn kill_all_text(killed: usize) -> String {
    if killed == 0 {
        NO_RUNNING_TO_KILL.to_owned()
    } else {
        format!("killed {killed} subagents.")
    }
}

/// Whether a `kill` target means every running child.
pub fn is_kill_all(target: &str) -> bool {
    matches!(target.trim(), "all" | "*")
}

/// The result of a `kill`: `{status:"ok", action:"kill", text}`.
pub fn kill_json(text: &str) -> Value {
    json!({"status": "ok", "action": "kill", "text": text})
}

/// An error result of the `subagents` tool: `{status:"error", error}`.
pub fn subagents_error_json(message: &str) -> Value {
    json!({"status": "error", "error": message})
}

/// `agents_list` as offered to the model (no parameters).
pub fn agents_list_tool_spec() -> ToolSpec {
    ToolSpec {
        name: AGENTS_LIST_TOOL_NAME.to_owned(),
        description: AGENTS_LIST_DESCRIPTION.to_owned(),
        input_schema: json!({"type": "object", "properties": {}}),
    }
}

/// An agent of `agents.list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredAgent {
    /// Its id.
    pub id: String,
    /// Its display name, if it has one.
    pub name: Option<String>,
}

/// `agents_list`'s answer for an agent whose merged sub-agent settings are `config`:
/// `{requester, allowAny, agents:[{id, name?, configured}]}`, the requester first, then the
/// other allowed agents sorted (`*` stands for every configured agent).
pub fn agents_list_json(
    requester_agent_id: &str, config: &SubagentsConfig, configured: &[ConfiguredAgent],
) -> Value {
    let requester = normalize_agent_id(requester_agent_id);
    let allow_any = config.allows_any_agent();
    let mut others = config.allowed_agent_ids();
    if allow_any {
        others.extend(configured.iter().map(|agent| normalize_agent_id(&agent.id)));
    }
    others.retain(|id| *id != requester);
    others.sort();
    others.dedup();
    let entry = |id: &str| {
        let known = configured
            .iter()
            .find(|agent| normalize_agent_id(&agent.id) == id);
        let mut item = json!({"id": id, "configured": known.is_some()});
        if let Some(name) = known.and_then(|agent| agent.name.as_deref()) {
            item["name"] = json!(name);
        }
        item
    };
    let agents: Vec<Value> = std::iter::once(requester.as_str())
        .chain(others.iter().map(String::as_str))
        .map(entry)
        .collect();
    json!({"requester": requester, "allowAny": allow_any, "agents": agents})
}

/// `text` cut to `max` characters, the last one `…`, when longer.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod command_tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn chat_commands_stand_for_subagents_calls() {
        let parse = |body: &str| parse_subagents_command(body);
        assert_eq!(parse("/subagents"), Some(json!({"action": "list"})));
        assert_eq!(parse("/subagents list"), Some(json!({"action": "list"})));
        assert_eq!(
            parse("/subagents kill 2"),
            Some(json!({"action": "kill", "target": "2"}))
        );
        assert_eq!(
            parse("/kill all"),
            Some(json!({"action": "kill", "target": "all"}))
        );
        assert_eq!(
            parse("/steer helper  look in /tmp too "),
            Some(json!({"action": "steer", "target": "helper", "message": "look in /tmp too"}))
        );
        assert_eq!(
            parse("/subagents@ClawBot info last"),
            Some(json!({"action": "info", "target": "last"}))
        );
        assert_eq!(
            parse("/subagents log 1 5"),
            Some(json!({"action": "log", "target": "1", "limit": 5}))
        );
        for usage in [
            "/subagents kill",
            "/steer helper",
            "/subagents log 1 many",
            "/subagents spawn x",
        ] {
            assert_eq!(parse(usage), Some(json!({"action": "help"})), "{usage}");
        }
        assert_eq!(parse("/status"), None);
        assert_eq!(parse("/killjoy"), None);
    }

    #[test]
    fn info_and_log_calls_read_their_target_and_limit() {
        assert_eq!(
            parse_subagents_call(&json!({"action": "log", "target": "1", "limit": 500})),
            Ok(SubagentsAction::Log {
                target: "1".to_owned(),
                limit: MAX_LOG_LIMIT
            })
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "log", "target": "x"})),
            Ok(SubagentsAction::Log {
                target: "x".to_owned(),
                limit: DEFAULT_LOG_LIMIT
            })
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "info"})),
            Err("target required".to_owned())
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "help"})),
            Ok(SubagentsAction::Help)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(run_id: &str, label: Option<&str>, status: RunStatus, started: u64) -> RunView {
        RunView {
            index: 0,
            run_id: run_id.to_owned(),
            session_key: format!("agent:main:subagent:{run_id}"),
            label: label.map(str::to_owned),
            task: format!("task of {run_id}"),
            status,
            model: Some("anthropic/claude-haiku".to_owned()),
            runtime_ms: Some(65_000),
            total_tokens: Some(1_500),
            started_at_ms: started,
            ended_at_ms: (status != RunStatus::Running).then_some(started + 65_000),
            pending_descendants: 0,
            child_sessions: Vec::new(),
        }
    }

    const NOW: u64 = 10_000_000;

    /// Spec §6 vector 45.
    #[test]
    fn vector_45_targets_resolve_by_last_index_and_label_prefix() {
        let lists = split_runs(
            vec![
                run("r-old", Some("research-a"), RunStatus::Done, NOW - 200_000),
                run(
                    "r-new",
                    Some("research-b"),
                    RunStatus::Running,
                    NOW - 100_000,
                ),
            ],
            NOW,
            30,
        );
        let (active, recent) = (&lists.active, &lists.recent);
        assert_eq!(
            resolve_target("last", active, recent).map(|r| r.run_id.as_str()),
            Ok("r-new")
        );
        assert_eq!(
            resolve_target("2", active, recent).map(|r| r.run_id.as_str()),
            Ok("r-old")
        );
        assert_eq!(
            resolve_target("3", active, recent),
            Err("Invalid subagent index: 3".to_owned())
        );
        assert_eq!(
            resolve_target("res", active, recent),
            Err("Ambiguous subagent label prefix: res".to_owned())
        );
    }

    #[test]
    fn targets_resolve_by_key_exact_label_and_run_id_prefix() {
        let lists = split_runs(
            vec![
                run("abc-1", Some("Build"), RunStatus::Running, NOW - 3),
                run("abd-2", Some("build-docs"), RunStatus::Running, NOW - 2),
                run("xyz-3", Some("build"), RunStatus::Done, NOW - 1),
            ],
            NOW,
            30,
        );
        let resolve = |target: &str| {
            resolve_target(target, &lists.active, &lists.recent).map(|run| run.run_id.clone())
        };
        assert_eq!(resolve("agent:main:subagent:xyz-3"), Ok("xyz-3".to_owned()));
        assert_eq!(
            resolve("agent:main:subagent:nope"),
            Err("Unknown subagent session: agent:main:subagent:nope".to_owned())
        );
        assert_eq!(
            resolve("BUILD"),
            Err("Ambiguous subagent label: BUILD".to_owned())
        );
        assert_eq!(resolve("build-d"), Ok("abd-2".to_owned()));
        assert_eq!(resolve("xy"), Ok("xyz-3".to_owned()));
        assert_eq!(
            resolve("ab"),
            Err("Ambiguous subagent run id prefix: ab".to_owned())
        );
        assert_eq!(
            resolve("zzz"),
            Err("Unknown subagent target: zzz".to_owned())
        );
        assert_eq!(resolve("0"), Err("Invalid subagent index: 0".to_owned()));
        assert_eq!(
            resolve_target("last", &[], &[]),
            Err("Unknown subagent target: last".to_owned())
        );
    }

    /// Spec §6 vector 46.
    #[test]
    fn vector_46_steer_messages_are_capped_and_rate_limited() {
        let refused = check_steer(&"x".repeat(4_001), None, NOW).expect_err("too long");
        assert_eq!(
            refused.to_string(),
            "Message too long (4001 chars, max 4000)."
        );
        assert_eq!(refused.to_json()["status"], "error");
        assert_eq!(check_steer(&"é".repeat(4_000), None, NOW), Ok(()));
        let limited = check_steer("go on", Some(NOW - 1_999), NOW).expect_err("rate limited");
        assert_eq!(
            limited.to_json(),
            json!({"status": "rate_limited", "action": "steer", "error": STEER_RATE_LIMITED})
        );
        assert_eq!(check_steer("go on", Some(NOW - 2_000), NOW), Ok(()));
    }

    #[test]
    fn the_list_numbers_active_then_recent_and_drops_old_runs() {
        let mut waiting = run("w", None, RunStatus::Done, NOW - 5_000_000);
        waiting.pending_descendants = 2;
        let lists = split_runs(
            vec![
                run("gone", Some("old"), RunStatus::Done, NOW - 3_000_000),
                run("e", Some("fails"), RunStatus::Error, NOW - 500_000),
                waiting,
                run("a", Some("alpha"), RunStatus::Running, NOW - 1_000),
            ],
            NOW,
            30,
        );
        let ids: Vec<(&str, usize)> = lists
            .active
            .iter()
            .chain(&lists.recent)
            .map(|run| (run.run_id.as_str(), run.index))
            .collect();
        assert_eq!(ids, [("a", 1), ("w", 2), ("e", 3)]);
        assert_eq!(
            lists.text(),
            "active subagents:\n\
             1. alpha (anthropic/claude-haiku, 1m5s, 1.5k tokens) running - task of a\n\
             2. task of w (anthropic/claude-haiku, 1m5s, 1.5k tokens) done\n\n\
             recent (last 30m):\n\
             3. fails (anthropic/claude-haiku, 1m5s, 1.5k tokens) error - task of e"
        );
        let json = lists.to_json("agent:main:main", "agent:main:main");
        assert_eq!(json["total"], 3);
        assert_eq!(json["callerIsSubagent"], false);
        assert_eq!(json["active"][1]["pendingDescendants"], 2);
        assert_eq!(json["recent"][0]["endedAt"], NOW - 500_000 + 65_000);
        assert_eq!(json["active"][0].get("endedAt"), None);
        let empty = split_runs(Vec::new(), NOW, 5).text();
        assert_eq!(
            empty,
            "active subagents:\n(none)\n\nrecent (last 5m):\n(none)"
        );
    }

    #[test]
    fn long_labels_and_tasks_are_shortened_in_lines() {
        let mut long = run("l", Some(&"L".repeat(60)), RunStatus::Running, NOW);
        long.task = "word ".repeat(30);
        long.model = None;
        long.total_tokens = None;
        long.index = 1;
        let line = long.list_line();
        assert!(line.starts_with(&format!(
            "1. {}… (model n/a, 1m5s) running - ",
            "L".repeat(47)
        )));
        assert!(line.ends_with('…'));
        assert_eq!(
            line.split(" - ").nth(1).map(|task| task.chars().count()),
            Some(72)
        );
    }

    #[test]
    fn calls_parse_with_defaults_and_clamps() {
        assert_eq!(
            parse_subagents_call(&json!({})),
            Ok(SubagentsAction::List { recent_minutes: 30 })
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "list", "recentMinutes": 99_999})),
            Ok(SubagentsAction::List {
                recent_minutes: 1_440
            })
        );
        assert_eq!(
            parse_subagents_call(&json!({"recentMinutes": 0.5})),
            Ok(SubagentsAction::List { recent_minutes: 1 })
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "kill"})),
            Err("target required".to_owned())
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "steer", "target": "1"})),
            Err("message required".to_owned())
        );
        assert_eq!(
            parse_subagents_call(&json!({"action": "pause"})),
            Err("Unknown action: pause".to_owned())
        );
        let spec = subagents_tool_spec();
        assert_eq!(spec.description, SUBAGENTS_TOOL_DESCRIPTION);
        assert_eq!(spec.input_schema["properties"]["action"]["default"], "list");
    }

    #[test]
    fn kill_and_steer_texts() {
        let target = run("r", Some("research"), RunStatus::Running, NOW);
        assert_eq!(kill_text(&target, 0), "killed research.");
        assert_eq!(kill_text(&target, 2), "killed research (+ 2 descendants).");
        assert_eq!(
            already_finished_text(&target),
            "research is already finished."
        );
        assert_eq!(kill_all_text(0), "no running subagents to kill.");
        assert_eq!(kill_all_text(3), "killed 3 subagents.");
        assert!(is_kill_all(" all ") && is_kill_all("*") && !is_kill_all("1"));
        assert_eq!(
            steer_accepted_json(&target, "r2")["text"],
            "steered research."
        );
        assert_eq!(steer_accepted_json(&target, "r2")["mode"], "restart");
    }

    #[test]
    fn agents_list_puts_the_requester_first_then_allowed_ids_sorted() {
        let configured = [
            ConfiguredAgent {
                id: "main".to_owned(),
                name: Some("Main".to_owned()),
            },
            ConfiguredAgent {
                id: "ops".to_owned(),
                name: None,
            },
            ConfiguredAgent {
                id: "Research".to_owned(),
                name: None,
            },
        ];
        let none = agents_list_json("main", &SubagentsConfig::default(), &configured);
        assert_eq!(
            none,
            json!({"requester": "main", "allowAny": false, "agents": [{"id": "main", "name": "Main", "configured": true}]})
        );
        let named: SubagentsConfig =
            serde_json::from_value(json!({"allowAgents": ["qa", "ops"]})).expect("valid");
        assert_eq!(
            agents_list_json("main", &named, &configured)["agents"],
            json!([
                {"id": "main", "name": "Main", "configured": true},
                {"id": "ops", "configured": true},
                {"id": "qa", "configured": false}
            ])
        );
        let any: SubagentsConfig =
            serde_json::from_value(json!({"allowAgents": ["*"]})).expect("valid");
        let all = agents_list_json("ops", &any, &configured);
        assert_eq!(all["allowAny"], true);
        let ids: Vec<&str> = all["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .filter_map(|agent| agent["id"].as_str())
            .collect();
        assert_eq!(ids, ["ops", "main", "research"]);
        assert_eq!(agents_list_tool_spec().description, AGENTS_LIST_DESCRIPTION);
    }
}
