//! The `process` tool as the model sees it (spec §4.4): its spec, the arguments it takes,
//! and the texts the backend itself answers with. `list` is answered from the backend's
//! [`BackgroundProcesses`](super::BackgroundProcesses) index (so it works while the node is
//! offline); every other action is carried to the node that owns the process, which
//! answers with the spec's texts.

use serde_json::{Value, json};

use clawless_base::model::ToolSpec;
use clawless_exec::node::wire::POLL_WAIT_MAX_MS;

use super::{BackgroundProcess, ProcessStatus};

/// The tool's name.
pub const PROCESS_TOOL: &str = "process";

/// The tool's description (spec §4.4), with the cron sentence when `cron` is offered.
pub fn process_description(with_cron: bool) -> String {
    let mut text = "Manage running exec sessions for commands already started: list, poll, \
        log, write, send-keys, submit, paste, kill. Use poll/log when you need status, logs, \
        quiet-success confirmation, or completion confirmation when automatic completion wake \
        is unavailable. Use write/send-keys/submit/paste/kill for input or intervention."
        .to_owned();
    if with_cron {
        text.push_str(
            " Do not use process polling to emulate timers or reminders; use cron for \
             scheduled follow-ups.",
        );
    }
    text
}

/// The `process` tool's spec: `action` (a string, not an enum), `sessionId` and the
/// per-action arguments.
pub fn process_tool_spec() -> ToolSpec {
    ToolSpec {
        name: PROCESS_TOOL.to_owned(),
        description: process_description(false),
        input_schema: json!({
            "type": "object",
            "properties": {
                "action": {"type": "string", "description": "list, poll, log, write, send-keys, submit, paste, kill, clear, remove"},
                "sessionId": {"type": "string"},
                "data": {"type": "string"},
                "keys": {"type": "array", "items": {"type": "string"}},
                "hex": {"type": "array", "items": {"type": "string"}},
                "literal": {"type": "string"},
                "text": {"type": "string"},
                "bracketed": {"type": "boolean"},
                "eof": {"type": "boolean"},
                "offset": {"type": "number"},
                "limit": {"type": "number"},
                "timeout": {"type": "number", "minimum": 0, "description": "poll: ms to wait for exit"}
            },
            "required": ["action"]
        }),
    }
}

/// A `process` call, checked.
#[derive(Debug, Clone, PartialEq)]
pub enum ProcessCall {
    /// `list`: answered from the index.
    List,
    /// Any other known action, for the node: the action, the process, and how long a `poll`
    /// may wait (ms, already capped at [`POLL_WAIT_MAX_MS`]; 0 for the other actions).
    OnNode {
        /// The action (`poll`, `kill`, …).
        action: String,
        /// The process session id.
        session_id: String,
        /// The wait of a `poll`.
        wait_ms: u64,
    },
}

/// Reads a `process` call's arguments, or the exact text the model gets back: `Unknown
/// action <x>`, `sessionId is required for this action.`.
pub fn parse_process_call(input: &Value) -> Result<ProcessCall, String> {
    let action = input
        .get("action")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default();
    if action == "list" {
        return Ok(ProcessCall::List);
    }
    let session_id = input
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|id| !id.is_empty());
    let Some(session_id) = session_id else {
        return Err("sessionId is required for this action.".to_owned());
    };
    if !clawless_exec::node::wire::NODE_PROCESS_ACTIONS.contains(&action) {
        return Err(format!("Unknown action {action}"));
    }
    let wait_ms = if action == "poll" {
        poll_wait_ms(input.get("timeout"))
    } else {
        0
    };
    Ok(ProcessCall::OnNode {
        action: action.to_owned(),
        session_id: session_id.to_owned(),
        wait_ms,
    })
}

/// A `poll`'s wait: its `timeout` (ms; negative, absent or not a number: none), capped at
/// [`POLL_WAIT_MAX_MS`] (vector 15).
pub fn poll_wait_ms(timeout: Option<&Value>) -> u64 {
    let Some(requested) = timeout.and_then(Value::as_f64) else {
        return 0;
    };
    if !requested.is_finite() || requested <= 0.0 {
        return 0;
    }
    if requested >= POLL_WAIT_MAX_MS as f64 {
        POLL_WAIT_MAX_MS
    } else {
        // In range and positive: the cast cannot overflow.
        requested as u64
    }
}

/// `process list`'s text (spec §4.4): one line per entry, newest first, `<id> <status padded
/// to 9> <duration> :: <name>`, or `No running or recent sessions.`.
pub fn list_text(entries: &[BackgroundProcess], now_ms: u64) -> String {
    if entries.is_empty() {
        return "No running or recent sessions.".to_owned();
    }
    entries
        .iter()
        .map(|entry| {
            let end = entry.ended_at_ms.unwrap_or(now_ms);
            format!(
                "{} {:<9} {} :: {}",
                entry.session_id,
                entry.status.as_str(),
                duration_text(end.saturating_sub(entry.started_at_ms)),
                command_name(&entry.command)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `process list`'s details: the entries as objects.
pub fn list_details(entries: &[BackgroundProcess]) -> Value {
    json!({
        "status": "completed",
        "sessions": entries.iter().map(|entry| json!({
            "sessionId": entry.session_id,
            "status": entry.status.as_str(),
            "node": entry.node_id,
            "command": entry.command,
            "startedAt": entry.started_at_ms,
            "endedAt": entry.ended_at_ms,
            "exitCode": entry.exit_code,
        })).collect::<Vec<_>>(),
    })
}

/// A duration as `45s`, `3m12s` or `2h05m`.
pub fn duration_text(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3_600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3_600, (secs % 3_600) / 60),
    }
}

/// A command's short name: its verb and first argument that is not a flag, at most 80 chars.
pub fn command_name(command: &str) -> String {
    let mut words = command.split_whitespace();
    let verb = words.next().unwrap_or_default();
    let name = match words.find(|word| !word.starts_with('-')) {
        Some(argument) => format!("{verb} {argument}"),
        None => verb.to_owned(),
    };
    if name.chars().count() > 80 {
        let mut cut: String = name.chars().take(79).collect();
        cut.push('…');
        cut
    } else {
        name
    }
}

/// The status an exit gives an index entry: `killed` for a kill signal the backend asked
/// for is the node's to say; here a code 0 is `completed`, a lost process `lost`, anything
/// else `failed`.
pub fn ended_status(success: bool, signal: Option<&str>) -> ProcessStatus {
    match signal {
        Some("lost") => ProcessStatus::Lost,
        Some("SIGKILL" | "SIGTERM") if !success => ProcessStatus::Killed,
        _ if success => ProcessStatus::Completed,
        _ => ProcessStatus::Failed,
    }
}

/// What `process` answers when the node owning the process is offline.
pub fn node_offline_for_process(session_id: &str, node_id: &str, why: &str) -> String {
    format!(
        "Session {session_id} runs on node host {node_id}, which is offline ({why}); its \
         output and input are on that node. `process list` still shows what the backend knows."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_other_than_list_need_a_session_id_and_unknown_ones_are_named() {
        assert_eq!(
            parse_process_call(&json!({"action": "list"})),
            Ok(ProcessCall::List)
        );
        assert_eq!(
            parse_process_call(&json!({"action": "poll"})),
            Err("sessionId is required for this action.".to_owned())
        );
        assert_eq!(
            parse_process_call(&json!({"action": "poll", "sessionId": "  "})),
            Err("sessionId is required for this action.".to_owned())
        );
        assert_eq!(
            parse_process_call(&json!({"action": "x", "sessionId": "a"})),
            Err("Unknown action x".to_owned())
        );
        // No action at all, or not a string: like OpenClaw, the id check comes first.
        assert_eq!(
            parse_process_call(&json!({"action": 3, "sessionId": "a"})),
            Err("Unknown action ".to_owned())
        );
        assert_eq!(
            parse_process_call(&json!({})),
            Err("sessionId is required for this action.".to_owned())
        );
    }

    #[test]
    fn a_poll_wait_is_capped_at_120_seconds_vector_15() {
        assert_eq!(
            parse_process_call(&json!({"action": "poll", "sessionId": "x", "timeout": 999_999})),
            Ok(ProcessCall::OnNode {
                action: "poll".into(),
                session_id: "x".into(),
                wait_ms: 120_000
            })
        );
        assert_eq!(poll_wait_ms(Some(&json!(1500.7))), 1500);
        for none in [json!(-5), json!("10"), json!(null), json!(0)] {
            assert_eq!(poll_wait_ms(Some(&none)), 0, "{none}");
        }
        assert_eq!(poll_wait_ms(Some(&json!(1e300))), 120_000);
        // Other actions never wait, whatever their timeout.
        assert_eq!(
            parse_process_call(&json!({"action": "kill", "sessionId": "x", "timeout": 5000})),
            Ok(ProcessCall::OnNode {
                action: "kill".into(),
                session_id: "x".into(),
                wait_ms: 0
            })
        );
    }

    fn entry(id: &str, status: ProcessStatus, start: u64, end: Option<u64>) -> BackgroundProcess {
        BackgroundProcess {
            session_key: "agent:main:main".into(),
            session_id: id.into(),
            node_id: "node-1".into(),
            exec_job_id: "j".into(),
            command: "python3 -u server.py --port 8000".into(),
            status,
            started_at_ms: start,
            ended_at_ms: end,
            exit_code: None,
        }
    }

    #[test]
    fn list_lines_pad_the_status_and_name_the_command() {
        let entries = [
            entry("swift-otter", ProcessStatus::Running, 1_000, None),
            entry("calm-river", ProcessStatus::Completed, 0, Some(125_000)),
        ];
        assert_eq!(
            list_text(&entries, 46_000),
            "swift-otter running   45s :: python3 server.py\n\
             calm-river completed 2m05s :: python3 server.py"
        );
        assert_eq!(list_text(&[], 0), "No running or recent sessions.");
        assert_eq!(command_name("sleep 2; echo hi"), "sleep 2;");
        assert_eq!(command_name("ls -la /tmp"), "ls /tmp");
        assert_eq!(duration_text(7_500_000), "2h05m");
        assert_eq!(command_name(&"x".repeat(200)).chars().count(), 80);
    }

    #[test]
    fn the_schema_takes_the_spec_arguments_and_the_cron_sentence_is_optional() {
        let spec = process_tool_spec();
        let properties = spec.input_schema["properties"].as_object().unwrap();
        for name in [
            "action",
            "sessionId",
            "data",
            "keys",
            "hex",
            "literal",
            "text",
            "bracketed",
            "eof",
            "offset",
            "limit",
            "timeout",
        ] {
            assert!(properties.contains_key(name), "{name}");
        }
        assert!(
            spec.input_schema["properties"]["action"]
                .get("enum")
                .is_none()
        );
        assert!(process_description(true).ends_with("use cron for scheduled follow-ups."));
        assert!(!spec.description.contains("cron"));
    }

    #[test]
    fn exits_map_to_index_statuses() {
        assert_eq!(ended_status(true, None), ProcessStatus::Completed);
        assert_eq!(ended_status(false, None), ProcessStatus::Failed);
        assert_eq!(ended_status(false, Some("SIGKILL")), ProcessStatus::Killed);
        assert_eq!(ended_status(false, Some("lost")), ProcessStatus::Lost);
    }
}
