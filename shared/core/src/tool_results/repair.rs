//! Transcript repair before every model call (spec §9.3): every tool call is answered by
//! exactly one result, placed right after the assistant message that made the call.
//!
//! Providers reject a conversation in which a tool call has no result, a result has no call,
//! or something else sits between them. Sessions break that rule after crashes, aborts, user
//! messages typed while a tool ran, or retries that wrote a result twice; repair restores it
//! without touching the persisted history.

use std::collections::HashSet;

use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};

/// Text of the error result synthesised for a tool call whose result is missing.
pub const SYNTHETIC_TOOL_RESULT_TEXT: &str = "[clawless] missing tool result in session history; inserted synthetic error result for transcript repair.";

/// Tool name given to a synthetic result when the call has no name.
pub const UNKNOWN_TOOL_NAME: &str = "unknown";

/// What happens to real results of an assistant turn that ended in an error or was aborted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErroredTurnResults {
    /// Keep its matching results (in call order); missing ones are not synthesised.
    #[default]
    Keep,
    /// Drop its results too, leaving its calls unanswered.
    Drop,
}

/// Repairs tool call/result pairing, keeping the real results of errored turns.
///
/// Same as [`repair_transcript_with`] with [`ErroredTurnResults::Keep`].
pub fn repair_transcript(messages: &[Message]) -> Vec<Message> {
    repair_transcript_with(messages, ErroredTurnResults::Keep)
}

/// Repairs tool call/result pairing (spec §9.3).
///
/// - For each assistant message with tool calls, the messages up to the next assistant message
///   are its span. Results in the span that answer one of its calls are collected; the first
///   result for a call id wins and any later result with an id already answered, anywhere in
///   the transcript, is dropped. Other messages of the span are the remainder.
/// - Output: the assistant message, then one result per call in call order, then the
///   remainder, so results move ahead of user messages typed in between.
/// - A call without a result gets [`synthetic_tool_result`], unless the assistant stopped with
///   [`StopReason::Error`] or [`StopReason::Aborted`]: such a turn never gets synthetic results,
///   and its real results are kept or dropped as `errored` says.
/// - A result with a blank tool name takes the name of its call.
/// - Any other result is an orphan and is dropped.
///
/// A call id repeated within one assistant message keeps only its first call, since one result
/// can answer only one call. The repair is idempotent.
pub fn repair_transcript_with(messages: &[Message], errored: ErroredTurnResults) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut answered: HashSet<String> = HashSet::new();
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        index += 1;
        let (calls, stop_reason) = match message {
            Message::Assistant {
                content,
                stop_reason,
            } => (first_calls(content), *stop_reason),
            Message::ToolResult { tool_call_id, .. } => {
                tracing::debug!(
                    tool_call_id,
                    "transcript repair dropped an orphan tool result"
                );
                continue;
            }
            Message::User { .. } => {
                out.push(message.clone());
                continue;
            }
        };
        if calls.is_empty() {
            out.push(message.clone());
            continue;
        }

        let span_end = messages[index..]
            .iter()
            .position(|m| matches!(m, Message::Assistant { .. }))
            .map_or(messages.len(), |offset| index + offset);
        let mut found: Vec<Option<Message>> = vec![None; calls.len()];
        let mut remainder = Vec::new();
        for later in &messages[index..span_end] {
            let Message::ToolResult { tool_call_id, .. } = later else {
                remainder.push(later.clone());
                continue;
            };
            let slot = calls.iter().position(|call| &call.id == tool_call_id);
            match slot {
                Some(slot) if found[slot].is_none() && !answered.contains(tool_call_id) => {
                    found[slot] = Some(with_call_name(later, calls[slot]));
                }
                _ => tracing::debug!(
                    tool_call_id,
                    "transcript repair dropped a duplicate or orphan tool result"
                ),
            }
        }
        index = span_end;

        out.push(without_repeated_call_ids(message, &calls));
        let turn_failed = matches!(stop_reason, StopReason::Error | StopReason::Aborted);
        for (call, result) in calls.iter().zip(found) {
            let result = match (result, turn_failed) {
                (Some(_), true) if errored == ErroredTurnResults::Drop => continue,
                (Some(result), _) => result,
                (None, true) => continue,
                (None, false) => {
                    tracing::debug!(
                        tool_call_id = call.id,
                        "transcript repair synthesised a missing tool result"
                    );
                    synthetic_tool_result(call)
                }
            };
            answered.insert(call.id.clone());
            out.push(result);
        }
        out.extend(remainder);
    }
    out
}

/// The error result inserted for a call whose result is missing from the session history.
pub fn synthetic_tool_result(call: &ToolCall) -> Message {
    let tool_name = if call.name.trim().is_empty() {
        UNKNOWN_TOOL_NAME.to_owned()
    } else {
        call.name.clone()
    };
    Message::ToolResult {
        tool_call_id: call.id.clone(),
        tool_name,
        text: SYNTHETIC_TOOL_RESULT_TEXT.to_owned(),
        is_error: true,
    }
}

/// The calls of an assistant message, keeping only the first call for each id.
fn first_calls(content: &[AssistantBlock]) -> Vec<&ToolCall> {
    let mut seen = HashSet::new();
    content
        .iter()
        .filter_map(|block| match block {
            AssistantBlock::ToolCall(call) if seen.insert(call.id.as_str()) => Some(call),
            _ => None,
        })
        .collect()
}

fn without_repeated_call_ids(message: &Message, calls: &[&ToolCall]) -> Message {
    let Message::Assistant {
        content,
        stop_reason,
    } = message
    else {
        return message.clone();
    };
    let call_blocks = content
        .iter()
        .filter(|block| matches!(block, AssistantBlock::ToolCall(_)))
        .count();
    if call_blocks == calls.len() {
        return message.clone();
    }
    let mut seen = HashSet::new();
    let content = content
        .iter()
        .filter(|block| match block {
            AssistantBlock::ToolCall(call) => seen.insert(call.id.as_str()),
            AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => true,
        })
        .cloned()
        .collect();
    Message::Assistant {
        content,
        stop_reason: *stop_reason,
    }
}

/// `result` with a blank tool name replaced by the call's name.
fn with_call_name(result: &Message, call: &ToolCall) -> Message {
    match result {
        Message::ToolResult {
            tool_call_id,
            tool_name,
            text,
            is_error,
        } if tool_name.trim().is_empty() => Message::ToolResult {
            tool_call_id: tool_call_id.clone(),
            tool_name: call.name.clone(),
            text: text.clone(),
            is_error: *is_error,
        },
        _ => result.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str, name: &str) -> AssistantBlock {
        AssistantBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            input: json!({}),
        })
    }

    fn assistant(content: Vec<AssistantBlock>) -> Message {
        Message::Assistant {
            content,
            stop_reason: StopReason::ToolUse,
        }
    }

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn result(id: &str, name: &str, text: &str) -> Message {
        Message::ToolResult {
            tool_call_id: id.into(),
            tool_name: name.into(),
            text: text.into(),
            is_error: false,
        }
    }

    fn synthetic(id: &str, name: &str) -> Message {
        Message::ToolResult {
            tool_call_id: id.into(),
            tool_name: name.into(),
            text: SYNTHETIC_TOOL_RESULT_TEXT.into(),
            is_error: true,
        }
    }

    #[test]
    fn missing_result_is_synthesised_and_results_move_ahead_of_user_messages() {
        // Arrange: the spec vector [assistant(call_1 read, call_2 exec), user, toolResult(call_2)].
        let messages = vec![
            assistant(vec![call("call_1", "read"), call("call_2", "exec")]),
            user("meanwhile"),
            result("call_2", "exec", "ok"),
        ];

        // Act
        let repaired = repair_transcript(&messages);

        // Assert
        assert_eq!(
            repaired,
            vec![
                messages[0].clone(),
                synthetic("call_1", "read"),
                result("call_2", "exec", "ok"),
                user("meanwhile"),
            ]
        );
    }

    #[test]
    fn orphan_result_is_dropped() {
        let messages = vec![
            user("hi"),
            result("call_orphan", "read", "x"),
            Message::Assistant {
                content: vec![AssistantBlock::Text {
                    text: "hello".into(),
                }],
                stop_reason: StopReason::EndTurn,
            },
        ];
        assert_eq!(
            repair_transcript(&messages),
            vec![messages[0].clone(), messages[2].clone()]
        );
    }

    #[test]
    fn duplicate_results_for_one_call_collapse_to_the_first() {
        let messages = vec![
            assistant(vec![call("call_1", "read")]),
            result("call_1", "read", "first"),
            result("call_1", "read", "second"),
        ];
        assert_eq!(
            repair_transcript(&messages),
            vec![messages[0].clone(), result("call_1", "read", "first")]
        );
    }

    #[test]
    fn duplicate_result_after_a_later_assistant_is_dropped() {
        let messages = vec![
            assistant(vec![call("call_1", "read")]),
            result("call_1", "read", "first"),
            Message::Assistant {
                content: vec![AssistantBlock::Text {
                    text: "done".into(),
                }],
                stop_reason: StopReason::EndTurn,
            },
            result("call_1", "read", "late"),
        ];
        assert_eq!(repair_transcript(&messages), messages[..3].to_vec());
    }

    #[test]
    fn results_are_put_in_call_order() {
        let messages = vec![
            assistant(vec![call("a", "read"), call("b", "exec")]),
            result("b", "exec", "B"),
            result("a", "read", "A"),
        ];
        assert_eq!(
            repair_transcript(&messages),
            vec![
                messages[0].clone(),
                result("a", "read", "A"),
                result("b", "exec", "B")
            ]
        );
    }

    #[test]
    fn result_in_the_span_of_another_assistant_is_an_orphan() {
        let messages = vec![
            assistant(vec![call("a", "read")]),
            assistant(vec![call("b", "read")]),
            result("a", "read", "late for a"),
            result("b", "read", "B"),
        ];
        assert_eq!(
            repair_transcript(&messages),
            vec![
                messages[0].clone(),
                synthetic("a", "read"),
                messages[1].clone(),
                result("b", "read", "B"),
            ]
        );
    }

    #[test]
    fn errored_or_aborted_assistant_never_gets_synthetic_results() {
        for stop_reason in [StopReason::Error, StopReason::Aborted] {
            let messages = vec![
                Message::Assistant {
                    content: vec![call("a", "read"), call("b", "exec")],
                    stop_reason,
                },
                user("retry"),
                result("b", "exec", "B"),
            ];
            assert_eq!(
                repair_transcript(&messages),
                vec![messages[0].clone(), result("b", "exec", "B"), user("retry")],
                "{stop_reason:?}"
            );
        }
    }

    #[test]
    fn errored_assistant_results_are_dropped_under_the_drop_policy() {
        let messages = vec![
            Message::Assistant {
                content: vec![call("a", "read")],
                stop_reason: StopReason::Aborted,
            },
            result("a", "read", "A"),
            user("next"),
        ];
        assert_eq!(
            repair_transcript_with(&messages, ErroredTurnResults::Drop),
            vec![messages[0].clone(), user("next")]
        );
    }

    #[test]
    fn blank_result_tool_name_is_repaired_from_the_call() {
        let messages = vec![assistant(vec![call("a", "read")]), result("a", "  ", "A")];
        assert_eq!(repair_transcript(&messages)[1], result("a", "read", "A"));
    }

    #[test]
    fn synthetic_result_for_a_nameless_call_is_named_unknown() {
        let messages = vec![assistant(vec![call("a", "")])];
        assert_eq!(repair_transcript(&messages)[1], synthetic("a", "unknown"));
    }

    #[test]
    fn repeated_call_ids_in_one_assistant_keep_the_first_call() {
        let messages = vec![
            assistant(vec![
                call("a", "read"),
                AssistantBlock::Text { text: "t".into() },
                call("a", "exec"),
            ]),
            result("a", "read", "A"),
        ];
        assert_eq!(
            repair_transcript(&messages),
            vec![
                assistant(vec![
                    call("a", "read"),
                    AssistantBlock::Text { text: "t".into() }
                ]),
                result("a", "read", "A"),
            ]
        );
    }

    #[test]
    fn well_formed_transcript_is_unchanged() {
        let messages = vec![
            user("go"),
            assistant(vec![call("a", "read")]),
            result("a", "read", "A"),
            Message::Assistant {
                content: vec![AssistantBlock::Text {
                    text: "done".into(),
                }],
                stop_reason: StopReason::EndTurn,
            },
        ];
        assert_eq!(repair_transcript(&messages), messages);
    }
}
