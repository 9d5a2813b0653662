//! Files a turn's tools asked to send (spec `openclaw-tools.md` §3.7): a `MEDIA:` line in a
//! trusted tool's successful result is attached to the reply that follows it, once.
//!
//! clawless is stricter than OpenClaw here. OpenClaw honours local paths from some thirty
//! core tools, among them `web_fetch`, `read` and `sessions_history`, whose results carry
//! text written by strangers; a fetched page could then make the agent's files leave. Here
//! only the tool whose output is what the agent itself ran counts ([`MEDIA_TOOLS`]), and only for
//! files already in the blob store (`media/outbound/…`: a node host uploaded them with the
//! command's result), never a path on the node's disk or a URL.
//!
//! A reply may also name a blob-store file itself (`MEDIA:media/inbound/…` to send back a
//! photo); it may name only one its own session has seen (the key appears in the session's
//! loaded steps), so no session reaches another's files by guessing a key.

use clawless_channels::media_lines::{MediaRef, extract_media_lines};
use clawless_core::turn::state::{Step, StepBody};

/// The tools whose results may ask for files to be sent. Only `exec`'s results have their
/// `MEDIA:` lines rewritten to the keys the node host uploaded (`exec_media.rs`), so no other
/// tool's output can name a stored file a command merely printed; `process`, when it comes,
/// must rewrite its output the same way before it joins this list.
pub(super) const MEDIA_TOOLS: [&str; 1] = ["exec"];
/// Blob-store keys a reply may send.
const BLOB_PREFIXES: [&str; 2] = ["media/inbound/", "media/outbound/"];
/// Where node hosts' uploads are stored.
const TOOL_MEDIA_PREFIX: &str = "media/outbound/";

/// True when `path` names a file in the blob store rather than the workspace.
pub(super) fn is_blob_key(path: &str) -> bool {
    BLOB_PREFIXES.iter().any(|prefix| path.starts_with(prefix))
        && !path.split('/').any(|segment| segment == "..")
}

/// The blob keys the trusted tool results of this turn asked to send with the reply
/// `reply_id`: those recorded after the turn's previous reply and before this one (a reply
/// not yet recorded takes all since the previous one), in order, each once.
pub(super) fn tool_result_media(turn_steps: &[Step], reply_id: &str) -> Vec<String> {
    let end = turn_steps
        .iter()
        .position(
            |step| matches!(&step.body, StepBody::Reply { reply_id: id, .. } if id == reply_id),
        )
        .unwrap_or(turn_steps.len());
    let start = turn_steps[..end]
        .iter()
        .rposition(|step| matches!(step.body, StepBody::Reply { .. }))
        .map_or(0, |index| index + 1);
    let mut keys: Vec<String> = Vec::new();
    for step in &turn_steps[start..end] {
        let StepBody::ToolResult {
            tool_name,
            text,
            is_error: false,
            ..
        } = &step.body
        else {
            continue;
        };
        if !MEDIA_TOOLS.contains(&tool_name.as_str()) || !has_media_token(text) {
            continue;
        }
        for reference in extract_media_lines(text).media {
            if let MediaRef::Workspace(path) = reference
                && path.starts_with(TOOL_MEDIA_PREFIX)
                && !keys.contains(&path)
            {
                keys.push(path);
            }
        }
    }
    keys
}

/// True when `key` appears in the text of one of `steps` (a message the session received,
/// a tool result it saw): the session has seen that stored file.
pub(super) fn session_has_seen(steps: &[Step], key: &str) -> bool {
    steps.iter().any(|step| match &step.body {
        StepBody::Inbound { text, images, .. } => {
            text.contains(key) || images.iter().any(|image| image == key)
        }
        StepBody::ToolResult { text, .. } => text.contains(key),
        _ => false,
    })
}

/// Cheap first check before parsing.
fn has_media_token(text: &str) -> bool {
    text.to_ascii_uppercase().contains("MEDIA:")
}

#[cfg(test)]
mod tests {
    use clawless_core::turn::state::StepBody;

    use super::*;

    fn step(seq: u64, body: StepBody) -> Step {
        Step {
            seq,
            turn: 1,
            at_ms: 0,
            body,
        }
    }

    fn result(seq: u64, tool: &str, text: &str, is_error: bool) -> Step {
        step(
            seq,
            StepBody::ToolResult {
                call_id: format!("call-{seq}"),
                tool_name: tool.to_owned(),
                text: text.to_owned(),
                is_error,
            },
        )
    }

    fn reply(seq: u64, id: &str) -> Step {
        let json = serde_json::json!({"type": "reply", "replyId": id, "text": "done"});
        step(seq, serde_json::from_value(json).expect("reply step"))
    }

    #[test]
    fn only_trusted_successful_results_before_the_reply_count() {
        let steps = vec![
            result(1, "exec", "drawn\nMEDIA:media/outbound/aa.png\n", false),
            result(2, "web_fetch", "MEDIA:media/outbound/bb.png", false),
            result(2, "process", "MEDIA:media/outbound/bb.png", false),
            result(3, "exec", "MEDIA:media/outbound/cc.png", true),
            result(4, "exec", "MEDIA:/tmp/chart.png\nMEDIA:notes.md", false),
            result(5, "exec", "again\nMEDIA:media/outbound/aa.png", false),
            reply(6, "r1"),
            result(7, "exec", "MEDIA:media/outbound/dd.png", false),
            reply(8, "r2"),
        ];
        assert_eq!(tool_result_media(&steps, "r1"), ["media/outbound/aa.png"]);
        assert_eq!(tool_result_media(&steps, "r2"), ["media/outbound/dd.png"]);
        // A reply not yet recorded takes what followed the last one.
        assert_eq!(
            tool_result_media(&steps[..8], "r9"),
            ["media/outbound/dd.png"]
        );
    }

    #[test]
    fn a_session_sends_only_stored_files_it_has_seen() {
        let steps = vec![result(1, "exec", "MEDIA:media/outbound/aa.png", false)];
        assert!(session_has_seen(&steps, "media/outbound/aa.png"));
        assert!(!session_has_seen(&steps, "media/outbound/bb.png"));
        assert!(is_blob_key("media/inbound/telegram/x/0.jpg"));
        assert!(!is_blob_key("media/outbound/../../SOUL.md"));
        assert!(!is_blob_key("chart.png"));
    }
}
