//! Keeping heartbeat chatter out of the model's context: a heartbeat poll answered with an
//! acknowledgement is dropped from the messages of later requests (the stored transcript
//! keeps both), so idle heartbeats neither cost tokens nor distract the model.

use clawless_base::reply_tokens::SILENT_REPLIES;
use clawless_base::transcript::Message;

use super::prompt::TASK_PROMPT_LEAD;
use super::reply::{StripMode, strip_heartbeat_token};

/// True when a user message is a heartbeat poll: its text (trimmed) is the heartbeat prompt
/// body, or starts with it followed by a line break (the path and time lines), or starts with
/// the task prompt's first line.
pub fn is_heartbeat_poll(text: &str, prompt_body: &str) -> bool {
    let text = text.trim();
    let prompt = prompt_body.trim();
    let is_prompt = !prompt.is_empty()
        && text
            .strip_prefix(prompt)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['\n', '\r']));
    is_prompt || text.starts_with(TASK_PROMPT_LEAD)
}

/// True when an assistant message is a bare acknowledgement: no tool calls, and its text
/// strips to nothing worth sending ([`strip_heartbeat_token`] in heartbeat mode with
/// `ack_max_chars`) or is a silent reply (`NO_REPLY`).
pub fn is_heartbeat_ack(message: &Message, ack_max_chars: usize) -> bool {
    if message.tool_calls().next().is_some() {
        return false;
    }
    let Some(text) = message.assistant_text() else {
        return false;
    };
    SILENT_REPLIES.contains(&text.trim())
        || strip_heartbeat_token(Some(&text), StripMode::Heartbeat, ack_max_chars).should_skip
}

/// `messages` without each heartbeat poll ([`is_heartbeat_poll`]) that is directly followed
/// by its acknowledgement ([`is_heartbeat_ack`]); both messages of such a pair go. A poll
/// answered with an alert, with tool calls, or not answered stays.
///
/// `prompt_body` is the agent's heartbeat prompt body ([`super::config::HeartbeatConfig::prompt_body`]).
pub fn drop_heartbeat_acks(
    messages: &[Message], prompt_body: &str, ack_max_chars: usize,
) -> Vec<Message> {
    let mut kept = Vec::with_capacity(messages.len());
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        let is_ack_pair = matches!(message, Message::User { text } if is_heartbeat_poll(text, prompt_body))
            && messages
                .get(index + 1)
                .is_some_and(|reply| is_heartbeat_ack(reply, ack_max_chars));
        if is_ack_pair {
            index += 2;
        } else {
            kept.push(message.clone());
            index += 1;
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::heartbeat::config::DEFAULT_HEARTBEAT_PROMPT;
    use clawless_base::transcript::{AssistantBlock, StopReason, ToolCall};

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn assistant(text: &str) -> Message {
        Message::Assistant {
            content: vec![AssistantBlock::Text { text: text.into() }],
            stop_reason: StopReason::EndTurn,
        }
    }

    fn poll() -> Message {
        user(&format!(
            "{DEFAULT_HEARTBEAT_PROMPT}\nWhen reading HEARTBEAT.md, use workspace file /ws/HEARTBEAT.md (exact case). Do not read docs/heartbeat.md.\nCurrent time: Thursday, November 26th, 2026 — 13:05 (UTC) / 2026-11-26 13:05 UTC"
        ))
    }

    fn drop(messages: &[Message]) -> Vec<Message> {
        drop_heartbeat_acks(messages, DEFAULT_HEARTBEAT_PROMPT, 300)
    }

    #[test]
    fn acknowledged_polls_leave_the_context_and_alerts_stay() {
        let messages = vec![
            user("hi"),
            assistant("hello"),
            poll(),
            assistant("HEARTBEAT_OK"),
            poll(),
            assistant(&format!("Disk almost full: {}", "x".repeat(300))),
            user("thanks"),
        ];
        let kept = drop(&messages);
        assert_eq!(
            kept,
            [
                messages[0].clone(),
                messages[1].clone(),
                messages[4].clone(),
                messages[5].clone(),
                messages[6].clone()
            ]
        );
    }

    #[test]
    fn task_polls_and_silent_replies_count_too() {
        let task_poll = user(
            "Run the following periodic tasks (only those due based on their intervals):\n\n- inbox: Check mail\n\nAfter completing all due tasks, reply HEARTBEAT_OK.",
        );
        let messages = vec![
            task_poll.clone(),
            assistant("**HEARTBEAT_OK**"),
            poll(),
            assistant("NO_REPLY"),
        ];
        assert!(drop(&messages).is_empty());
        // A custom prompt is matched as configured; the default one is then ordinary text.
        let custom = vec![
            user("Anything new?"),
            assistant("HEARTBEAT_OK"),
            poll(),
            assistant("HEARTBEAT_OK"),
        ];
        assert_eq!(
            drop_heartbeat_acks(&custom, "Anything new?", 300),
            [poll(), assistant("HEARTBEAT_OK")]
        );
    }

    #[test]
    fn a_poll_that_used_tools_or_got_no_answer_stays() {
        let with_tool = Message::Assistant {
            content: vec![
                AssistantBlock::Text {
                    text: "HEARTBEAT_OK".into(),
                },
                AssistantBlock::ToolCall(ToolCall {
                    id: "c1".into(),
                    name: "read".into(),
                    input: json!({"path": "HEARTBEAT.md"}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
        };
        let messages = vec![poll(), with_tool, poll()];
        assert_eq!(drop(&messages), messages);
    }

    #[test]
    fn only_the_prompt_itself_or_the_prompt_then_a_new_line_is_a_poll() {
        assert!(is_heartbeat_poll(
            DEFAULT_HEARTBEAT_PROMPT,
            DEFAULT_HEARTBEAT_PROMPT
        ));
        assert!(is_heartbeat_poll(
            &format!("  {DEFAULT_HEARTBEAT_PROMPT}\nCurrent time: x"),
            DEFAULT_HEARTBEAT_PROMPT
        ));
        assert!(!is_heartbeat_poll(
            &format!("{DEFAULT_HEARTBEAT_PROMPT} Also, what's 2+2?"),
            DEFAULT_HEARTBEAT_PROMPT
        ));
        assert!(!is_heartbeat_poll(
            "What is HEARTBEAT.md?",
            DEFAULT_HEARTBEAT_PROMPT
        ));
        assert!(!is_heartbeat_poll("anything", "  "));
        assert!(!is_heartbeat_ack(&user("HEARTBEAT_OK"), 300));
    }
}
