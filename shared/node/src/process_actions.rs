//! The `process` tool's actions, carried out on the node (spec §4.4): `list`, `poll`, `log`,
//! `write`, `send-keys`, `submit`, `paste`, `kill`, `clear`, `remove`, with the spec's exact
//! texts and failures. A [`ProcessJob`] answers as a [`ProcessReport`]; every failure is an
//! answer with `ok: false` and `details.status: "failed"`, never an error.
//!
//! Scope: a job sees only the sessions its own `session_key` started; any other id is
//! `No session found for <id>`, exactly like an id that never existed.

use std::time::Duration;

use clawless_base::clock::Clock;
use clawless_exec::node::wire::{POLL_WAIT_MAX_MS, ProcessJob, ProcessReport};
use serde_json::{Value, json};

use crate::process_table::{ProcessMeta, ProcessTable};

/// How often a waiting `poll` looks for the exit.
const POLL_CHECK: Duration = Duration::from_millis(250);
/// Lines `log` shows when neither `offset` nor `limit` is given.
const DEFAULT_LOG_LINES: usize = 200;
/// The longest name `list` shows.
const LIST_NAME_MAX_CHARS: usize = 120;

/// Carries out one `process` job.
pub async fn run_process_job(
    table: &ProcessTable, job: &ProcessJob, node_id: &str, clock: &dyn Clock,
) -> ProcessReport {
    let (ok, text, details) = act(table, job, clock).await;
    let details = if ok {
        details
    } else {
        let mut details = details;
        if let Value::Object(map) = &mut details {
            map.insert("status".to_owned(), json!("failed"));
        } else {
            details = json!({"status": "failed"});
        }
        details
    };
    ProcessReport {
        job_id: job.job_id.clone(),
        node_id: node_id.to_owned(),
        ok,
        text,
        details,
    }
}

type Answer = (bool, String, Value);

fn failed(text: String) -> Answer {
    (false, text, json!({"status": "failed"}))
}

async fn act(table: &ProcessTable, job: &ProcessJob, clock: &dyn Clock) -> Answer {
    table.refresh(clock.now_ms());
    let action = job.action.trim();
    if action == "list" {
        return list(table, job, clock.now_ms());
    }
    if !clawless_exec::node::wire::NODE_PROCESS_ACTIONS.contains(&action) {
        return failed(format!("Unknown action {action}"));
    }
    let Some(session_id) = job
        .session_id
        .as_deref()
        .map(str::trim)
        .filter(|id| !id.is_empty())
    else {
        return failed("sessionId is required for this action.".to_owned());
    };
    let Some(meta) = table.get(&job.session_key, session_id) else {
        return failed(format!("No session found for {session_id}"));
    };
    match action {
        "poll" => poll(table, job, meta, clock).await,
        "log" => log(table, job, &meta),
        "write" => {
            let data = arg_str(&job.args, "data", "data").unwrap_or_default();
            let eof = arg_bool(&job.args, "eof", "eof").unwrap_or(false);
            write_input(table, &meta, data.as_bytes(), eof, |written| {
                let closed = if eof { " (stdin closed)" } else { "" };
                format!("Wrote {written} bytes to session {session_id}{closed}.")
            })
        }
        "send-keys" => {
            let (bytes, warnings) = encode_keys(&job.args);
            if bytes.is_empty() {
                let mut text = "No key data provided.".to_owned();
                for warning in &warnings {
                    text.push_str(&format!("\n{warning}"));
                }
                return failed(text);
            }
            write_input(table, &meta, &bytes, false, |written| {
                let mut text = format!("Sent {written} bytes to session {session_id}.");
                for warning in &warnings {
                    text.push_str(&format!("\n{warning}"));
                }
                text
            })
        }
        "submit" => write_input(table, &meta, b"\r", false, |_| {
            format!("Submitted session {session_id} (sent CR).")
        }),
        "paste" => {
            let text = arg_str(&job.args, "text", "text").unwrap_or_default();
            if text.is_empty() {
                return failed("No paste text provided.".to_owned());
            }
            let bracketed = arg_bool(&job.args, "bracketed", "bracketed").unwrap_or(true);
            let payload = if bracketed {
                format!("\u{1b}[200~{text}\u{1b}[201~")
            } else {
                text.clone()
            };
            let chars = text.chars().count();
            write_input(table, &meta, payload.as_bytes(), false, |_| {
                format!("Pasted {chars} chars to session {session_id}.")
            })
        }
        "kill" => {
            if meta.ended.is_some() || !table.kill(session_id) {
                return failed(format!("No active session found for {session_id}"));
            }
            (
                true,
                format!("Killed session {session_id}."),
                json!({"status": "killed", "sessionId": session_id}),
            )
        }
        "clear" => {
            if meta.ended.is_none() {
                return failed(format!("No finished session found for {session_id}"));
            }
            table.remove(session_id);
            (
                true,
                format!("Cleared session {session_id}."),
                json!({"status": "cleared", "sessionId": session_id}),
            )
        }
        "remove" => {
            let running = meta.ended.is_none();
            if running {
                table.kill(session_id);
            }
            table.remove(session_id);
            let note = if running {
                " (termination requested)"
            } else {
                ""
            };
            (
                true,
                format!("Removed session {session_id}{note}."),
                json!({"status": "removed", "sessionId": session_id}),
            )
        }
        _ => failed(format!("Unknown action {action}")),
    }
}

fn list(table: &ProcessTable, job: &ProcessJob, now_ms: u64) -> Answer {
    let sessions = table.list(&job.session_key);
    if sessions.is_empty() {
        return (
            true,
            "No running or recent sessions.".to_owned(),
            json!({"status": "completed", "sessions": []}),
        );
    }
    let mut lines = Vec::new();
    let mut listed = Vec::new();
    for meta in &sessions {
        let end = meta
            .ended
            .as_ref()
            .map_or(now_ms, |ended| ended.ended_at_ms);
        let runtime_ms = end.saturating_sub(meta.started_at_ms);
        let name = display_name(&meta.command);
        lines.push(format!(
            "{} {:<9} {} :: {name}",
            meta.session_id,
            meta.status(),
            compact_duration(runtime_ms)
        ));
        listed.push(json!({
            "sessionId": meta.session_id,
            "status": meta.status(),
            "pid": meta.pid,
            "startedAt": meta.started_at_ms,
            "endedAt": meta.ended.as_ref().map(|ended| ended.ended_at_ms),
            "runtimeMs": runtime_ms,
            "cwd": meta.cwd,
            "command": meta.command,
            "name": name,
            "exitCode": meta.ended.as_ref().and_then(|ended| ended.exit_code),
            "exitSignal": meta.ended.as_ref().and_then(|ended| ended.signal.clone()),
        }));
    }
    (
        true,
        lines.join("\n"),
        json!({"status": "completed", "sessions": listed}),
    )
}

async fn poll(
    table: &ProcessTable, job: &ProcessJob, meta: ProcessMeta, clock: &dyn Clock,
) -> Answer {
    let session_id = meta.session_id.clone();
    let finished_before = meta.ended.is_some();
    let mut meta = meta;
    if !finished_before {
        let deadline_left = job.deadline_ms.saturating_sub(clock.now_ms());
        let wait_ms = job.wait_ms.min(POLL_WAIT_MAX_MS).min(deadline_left);
        let until = clock.now_ms().saturating_add(wait_ms);
        while meta.ended.is_none() && clock.now_ms() < until {
            let left = until.saturating_sub(clock.now_ms());
            tokio::time::sleep(POLL_CHECK.min(Duration::from_millis(left))).await;
            table.refresh(clock.now_ms());
            match table.get(&job.session_key, &session_id) {
                Some(current) => meta = current,
                // Removed meanwhile by another call.
                None => return failed(format!("No session found for {session_id}")),
            }
        }
    }
    let drained = table.drain_pending(&session_id);
    let output = drained.text.trim_end().to_owned();
    let body = if !output.is_empty() {
        output.clone()
    } else if finished_before {
        let tail = table.tail(&session_id);
        let tail = tail.trim_end();
        if tail.is_empty() {
            "(no output recorded)".to_owned()
        } else {
            tail.to_owned()
        }
    } else {
        "(no new output)".to_owned()
    };
    let (aggregated, truncated) = table.aggregated(&session_id);
    let status_line = match &meta.ended {
        None => "Process still running.".to_owned(),
        Some(ended) => match (&ended.signal, ended.exit_code) {
            (Some(signal), _) => format!("Process exited with signal {signal}."),
            (None, Some(code)) => format!("Process exited with code {code}."),
            (None, None) => "Process exited.".to_owned(),
        },
    };
    let mut details = json!({
        "status": meta.status(),
        "sessionId": session_id,
        "exitCode": meta.ended.as_ref().and_then(|ended| ended.exit_code),
        "exitSignal": meta.ended.as_ref().and_then(|ended| ended.signal.clone()),
        "aggregated": aggregated,
        "truncated": truncated || drained.truncated,
    });
    if meta.ended.is_none() {
        let retry_in_ms = if output.is_empty() {
            match table.empty_polls(&session_id) {
                0 | 1 => 5_000,
                2 => 10_000,
                3 => 30_000,
                _ => 60_000,
            }
        } else {
            5_000
        };
        details["retryInMs"] = json!(retry_in_ms);
    }
    (true, format!("{body}\n\n{status_line}"), details)
}

fn log(table: &ProcessTable, job: &ProcessJob, meta: &ProcessMeta) -> Answer {
    let (aggregated, truncated) = table.aggregated(&meta.session_id);
    let offset = arg_u64(&job.args, "offset", "offset").map(to_usize);
    let limit = arg_u64(&job.args, "limit", "limit").map(to_usize);
    let normalized = aggregated.replace("\r\n", "\n");
    let mut lines: Vec<&str> = normalized.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    let total = lines.len();
    let base = json!({
        "status": meta.status(),
        "sessionId": meta.session_id,
        "totalLines": total,
        "truncated": truncated,
    });
    if total == 0 {
        let empty = if meta.ended.is_some() {
            "(no output recorded)"
        } else {
            "(no output yet)"
        };
        return (true, empty.to_owned(), base);
    }
    let defaulted = offset.is_none() && limit.is_none();
    let start = match (offset, limit) {
        (Some(offset), _) => offset.min(total),
        (None, Some(limit)) => total.saturating_sub(limit),
        (None, None) => total.saturating_sub(DEFAULT_LOG_LINES),
    };
    let end = match limit {
        Some(limit) if offset.is_some() => start.saturating_add(limit).min(total),
        _ => total,
    };
    let mut text = lines[start..end].join("\n");
    if text.is_empty() {
        text = "(no output in this range)".to_owned();
    }
    if defaulted && total > DEFAULT_LOG_LINES {
        text.push_str(&format!(
            "\n\n[showing last {DEFAULT_LOG_LINES} of {total} lines; pass offset/limit to page]"
        ));
    }
    let mut details = base;
    details["offset"] = json!(start);
    details["limit"] = json!(end - start);
    (true, text, details)
}

/// Writes to a running, backgrounded session's stdin; `text` builds the answer from the
/// bytes written.
fn write_input(
    table: &ProcessTable, meta: &ProcessMeta, bytes: &[u8], eof: bool,
    text: impl FnOnce(usize) -> String,
) -> Answer {
    let session_id = &meta.session_id;
    if meta.ended.is_some() {
        return failed(format!("No active session found for {session_id}"));
    }
    if !meta.backgrounded {
        return failed(format!("Session {session_id} is not backgrounded."));
    }
    match table.write_stdin(session_id, bytes, eof) {
        Some(written) => (
            true,
            text(written),
            json!({"status": "running", "sessionId": session_id, "bytes": written}),
        ),
        None => failed(format!("Session {session_id} stdin is not writable.")),
    }
}

/// The bytes for `send-keys`: `literal` text, then `keys` tokens, then `hex` bytes; an
/// unknown key token is sent as its own text, with a warning.
pub fn encode_keys(args: &Value) -> (Vec<u8>, Vec<String>) {
    let mut bytes = Vec::new();
    let mut warnings = Vec::new();
    if let Some(literal) = arg_str(args, "literal", "literal") {
        bytes.extend_from_slice(literal.as_bytes());
    }
    for key in arg_strings(args, "keys") {
        match key_bytes(&key) {
            Some(encoded) => bytes.extend(encoded),
            None => {
                warnings.push(format!("Unknown key \"{key}\" sent as literal text."));
                bytes.extend_from_slice(key.as_bytes());
            }
        }
    }
    for hex_byte in arg_strings(args, "hex") {
        let cleaned = hex_byte.trim().trim_start_matches("0x");
        match u8::from_str_radix(cleaned, 16) {
            Ok(byte) => bytes.push(byte),
            Err(_) => warnings.push(format!("Invalid hex byte \"{hex_byte}\" skipped.")),
        }
    }
    (bytes, warnings)
}

/// One key token's bytes (`Enter`, `Tab`, `Escape`, arrows, `PageUp`, `C-c`, `M-x`, `F1`…).
fn key_bytes(token: &str) -> Option<Vec<u8>> {
    let named: &[u8] = match token.to_ascii_lowercase().as_str() {
        "enter" | "return" | "cr" => b"\r",
        "lf" | "newline" => b"\n",
        "tab" => b"\t",
        "escape" | "esc" => b"\x1b",
        "space" => b" ",
        "backspace" | "bspace" => b"\x7f",
        "up" => b"\x1b[A",
        "down" => b"\x1b[B",
        "right" => b"\x1b[C",
        "left" => b"\x1b[D",
        "home" => b"\x1b[H",
        "end" => b"\x1b[F",
        "pageup" | "ppage" => b"\x1b[5~",
        "pagedown" | "npage" => b"\x1b[6~",
        "insert" | "ic" => b"\x1b[2~",
        "delete" | "dc" => b"\x1b[3~",
        "f1" => b"\x1bOP",
        "f2" => b"\x1bOQ",
        "f3" => b"\x1bOR",
        "f4" => b"\x1bOS",
        _ => b"",
    };
    if !named.is_empty() {
        return Some(named.to_vec());
    }
    let lower = token.to_ascii_lowercase();
    if let Some(rest) = lower
        .strip_prefix("c-")
        .or_else(|| lower.strip_prefix("ctrl-"))
    {
        let mut chars = rest.chars();
        return match (chars.next(), chars.next()) {
            (Some(letter @ 'a'..='z'), None) => Some(vec![(letter as u8) & 0x1f]),
            (Some('@'), None) | (Some(' '), None) => Some(vec![0]),
            (Some('['), None) => Some(vec![0x1b]),
            (Some('\\'), None) => Some(vec![0x1c]),
            (Some(']'), None) => Some(vec![0x1d]),
            _ => None,
        };
    }
    if let Some(rest) = token
        .strip_prefix("M-")
        .or_else(|| token.strip_prefix("m-"))
    {
        let mut inner = key_bytes(rest)
            .or_else(|| (rest.chars().count() == 1).then(|| rest.as_bytes().to_vec()))?;
        inner.insert(0, 0x1b);
        return Some(inner);
    }
    None
}

/// `list`'s name for a command: its verb and first non-flag argument, or the command.
fn display_name(command: &str) -> String {
    let mut words = command.split_whitespace();
    let name = match words.next() {
        Some(verb) => {
            let verb = verb.rsplit('/').next().unwrap_or(verb);
            match words.find(|word| !word.starts_with('-')) {
                Some(argument) => format!("{verb} {argument}"),
                None => verb.to_owned(),
            }
        }
        None => command.to_owned(),
    };
    if name.chars().count() > LIST_NAME_MAX_CHARS {
        let mut cut: String = name.chars().take(LIST_NAME_MAX_CHARS - 1).collect();
        cut.push('…');
        cut
    } else {
        name
    }
}

/// `12s`, `3m4s`, `1h2m`.
fn compact_duration(ms: u64) -> String {
    let seconds = ms / 1_000;
    if seconds < 60 {
        format!("{seconds}s")
    } else if seconds < 3_600 {
        format!("{}m{}s", seconds / 60, seconds % 60)
    } else {
        format!("{}h{}m", seconds / 3_600, (seconds % 3_600) / 60)
    }
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

/// A string argument under its camelCase or snake_case key (spec §0.2).
fn arg_str(args: &Value, camel: &str, snake: &str) -> Option<String> {
    args.get(camel)
        .or_else(|| args.get(snake))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn arg_bool(args: &Value, camel: &str, snake: &str) -> Option<bool> {
    args.get(camel)
        .or_else(|| args.get(snake))
        .and_then(|value| {
            value
                .as_bool()
                .or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
        })
}

fn arg_u64(args: &Value, camel: &str, snake: &str) -> Option<u64> {
    args.get(camel)
        .or_else(|| args.get(snake))
        .and_then(|value| {
            value
                .as_u64()
                .or_else(|| value.as_f64().filter(|n| *n >= 0.0).map(|n| n as u64))
                .or_else(|| value.as_str().and_then(|text| text.trim().parse().ok()))
        })
}

fn arg_strings(args: &Value, key: &str) -> Vec<String> {
    match args.get(key) {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(single)) => vec![single.clone()],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_encode_like_a_terminal() {
        let (bytes, warnings) =
            encode_keys(&json!({"keys": ["C-c", "Enter", "Up", "M-x"], "hex": ["1b", "zz"]}));
        assert_eq!(bytes, b"\x03\r\x1b[A\x1bx\x1b");
        assert_eq!(
            warnings,
            vec!["Invalid hex byte \"zz\" skipped.".to_owned()]
        );
        let (bytes, warnings) = encode_keys(&json!({"literal": "ls", "keys": ["Bogus"]}));
        assert_eq!(bytes, b"lsBogus");
        assert_eq!(warnings.len(), 1);
        assert!(encode_keys(&json!({})).0.is_empty());
    }

    #[test]
    fn list_names_and_durations_are_compact() {
        assert_eq!(
            display_name("/usr/bin/python -u server.py --port 1"),
            "python server.py"
        );
        assert_eq!(display_name("sleep 2; echo hi"), "sleep 2;");
        assert_eq!(compact_duration(12_400), "12s");
        assert_eq!(compact_duration(184_000), "3m4s");
        assert_eq!(compact_duration(3_720_000), "1h2m");
    }
}
