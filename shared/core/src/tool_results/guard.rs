//! The context guard run before every model call (spec §9.1 item 4): shortens tool results
//! that would take more than half the context window and refuses a context that is still too big.
//!
//! Sizes are estimates in characters. Ordinary text is assumed to cost 4 characters per token,
//! tool output (dense code, JSON, logs) 2 characters per token. Interpretation of the spec's
//! two limits, which are written in those two units:
//! - the per-result limit `max(1024, floor(ctx * 2 * 0.5))` is compared with the raw character
//!   count of one tool result's text: at 2 characters per token it is half the window;
//! - the whole-context limit `max(1024, floor(ctx * 4 * 0.9))` is in 4-chars-per-token units,
//!   so every message is converted to them: user and assistant text count at their length,
//!   a tool call at its name plus its JSON arguments, and tool-result text counts double
//!   (`chars * 4 / 2`), because each of its characters is worth twice as much of the window.
//!
//! The transcript types carry no images or `details`, so the spec's image estimate (8000
//! characters) and the dropping of `details` have nothing to apply to here.

use clawless_base::transcript::{AssistantBlock, Message};

use super::truncate::{char_count, format_context_limit_truncation_notice, head};

/// Characters per token assumed for ordinary text.
pub const CHARS_PER_TOKEN: usize = 4;

/// Characters per token assumed for tool-result text.
pub const TOOL_RESULT_CHARS_PER_TOKEN: usize = 2;

/// Neither guard limit is ever below this many characters, however small the window.
pub const MIN_CONTEXT_GUARD_CHARS: usize = 1_024;

/// Share of the window one tool result may take, in tenths (0.5).
const SINGLE_TOOL_RESULT_SHARE_TENTHS: usize = 5;

/// Share of the window the whole context may take, in tenths (0.9), leaving room for the answer.
const CONTEXT_SHARE_TENTHS: usize = 9;

/// The context guard refused the conversation: even with oversized tool results shortened,
/// the estimated size is over the whole-context limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Context overflow: estimated context size exceeds safe threshold during tool loop.")]
pub struct ContextOverflow {
    /// Estimated size of the guarded context, in 4-chars-per-token characters.
    pub estimated_chars: usize,
    /// The whole-context limit it exceeded ([`ContextGuardLimits::context_chars`]).
    pub limit_chars: usize,
}

/// The two limits the guard applies for one context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextGuardLimits {
    /// Most characters of text one tool result may keep: `max(1024, floor(ctx * 2 * 0.5))`.
    pub tool_result_chars: usize,
    /// Most estimated characters the whole context may take: `max(1024, floor(ctx * 4 * 0.9))`.
    pub context_chars: usize,
}

impl ContextGuardLimits {
    /// Limits for a model whose context window is `context_window_tokens` tokens. Integer
    /// arithmetic (multiply, then divide by ten) gives exactly the spec's floored products.
    pub fn for_window(context_window_tokens: usize) -> Self {
        let share = |chars_per_token: usize, tenths: usize| {
            context_window_tokens
                .saturating_mul(chars_per_token)
                .saturating_mul(tenths)
                / 10
        };
        Self {
            tool_result_chars: share(TOOL_RESULT_CHARS_PER_TOKEN, SINGLE_TOOL_RESULT_SHARE_TENTHS)
                .max(MIN_CONTEXT_GUARD_CHARS),
            context_chars: share(CHARS_PER_TOKEN, CONTEXT_SHARE_TENTHS)
                .max(MIN_CONTEXT_GUARD_CHARS),
        }
    }
}

/// Estimated size of one message in 4-chars-per-token characters (see the module docs).
pub fn estimate_message_chars(message: &Message) -> usize {
    match message {
        Message::User { text } => char_count(text),
        Message::Assistant { content, .. } => content
            .iter()
            .map(|block| match block {
                AssistantBlock::Text { text } => char_count(text),
                AssistantBlock::ToolCall(call) => {
                    char_count(&call.name) + char_count(&call.input.to_string())
                }
                // Providers are sent reasoning only within its own tool-use turn (and its size
                // is bounded by the thinking budget, which the output reserve covers), so a
                // long session's past reasoning does not count against the window.
                AssistantBlock::Thinking { .. } => 0,
            })
            .sum(),
        Message::ToolResult { text, .. } => {
            char_count(text).saturating_mul(CHARS_PER_TOKEN) / TOOL_RESULT_CHARS_PER_TOKEN
        }
    }
}

/// Estimated size of a whole conversation, the sum of [`estimate_message_chars`].
pub fn estimate_context_chars(messages: &[Message]) -> usize {
    messages
        .iter()
        .map(estimate_message_chars)
        .fold(0, usize::saturating_add)
}

/// Guards the context sent to a model with a `context_window_tokens`-token window.
///
/// Returns a copy of `messages` in which every tool result longer than
/// [`ContextGuardLimits::tool_result_chars`] keeps its first characters followed by `"\n"` and
/// `[... N more characters truncated]`, the whole staying within that limit (`N` counts the
/// characters dropped). The input, i.e. the persisted transcript, is left as it was.
///
/// # Errors
///
/// [`ContextOverflow`] when the estimated size of the guarded copy is still over
/// [`ContextGuardLimits::context_chars`].
pub fn apply_context_guard(
    messages: &[Message], context_window_tokens: usize,
) -> Result<Vec<Message>, ContextOverflow> {
    let limits = ContextGuardLimits::for_window(context_window_tokens);
    let guarded: Vec<Message> = messages
        .iter()
        .map(|message| shorten_oversized_result(message, limits.tool_result_chars))
        .collect();
    let estimated_chars = estimate_context_chars(&guarded);
    if estimated_chars > limits.context_chars {
        tracing::warn!(
            estimated_chars,
            limit_chars = limits.context_chars,
            "context guard refused an oversized context"
        );
        return Err(ContextOverflow {
            estimated_chars,
            limit_chars: limits.context_chars,
        });
    }
    Ok(guarded)
}

/// The shortening half of [`apply_context_guard`] alone: every tool result longer than half
/// the window is cut the same way, and nothing is refused (the caller sizes the request).
pub fn shorten_oversized_results(
    messages: &[Message], context_window_tokens: usize,
) -> Vec<Message> {
    let limit = ContextGuardLimits::for_window(context_window_tokens).tool_result_chars;
    messages
        .iter()
        .map(|message| shorten_oversized_result(message, limit))
        .collect()
}

fn shorten_oversized_result(message: &Message, limit: usize) -> Message {
    let Message::ToolResult {
        tool_call_id,
        tool_name,
        text,
        is_error,
    } = message
    else {
        return message.clone();
    };
    let total = char_count(text);
    if total <= limit {
        return message.clone();
    }
    // Room for "\n" and the longest notice this text can need (N never exceeds `total`).
    let reserve = 1 + char_count(&format_context_limit_truncation_notice(total));
    let keep = limit.saturating_sub(reserve);
    let notice = format_context_limit_truncation_notice(total - keep);
    Message::ToolResult {
        tool_call_id: tool_call_id.clone(),
        tool_name: tool_name.clone(),
        text: format!("{}\n{notice}", head(text, keep)),
        is_error: *is_error,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use clawless_base::transcript::{StopReason, ToolCall};

    fn result(text: &str) -> Message {
        Message::ToolResult {
            tool_call_id: "call_1".into(),
            tool_name: "read".into(),
            text: text.into(),
            is_error: false,
        }
    }

    fn result_text(message: &Message) -> &str {
        match message {
            Message::ToolResult { text, .. } => text,
            other => panic!("expected a tool result, got {other:?}"),
        }
    }

    #[test]
    fn limits_follow_the_spec_formulas() {
        let limits = ContextGuardLimits::for_window(100_000);
        assert_eq!(limits.tool_result_chars, 100_000);
        assert_eq!(limits.context_chars, 360_000);
    }

    #[test]
    fn limits_never_fall_below_1024_chars() {
        assert_eq!(
            ContextGuardLimits::for_window(10),
            ContextGuardLimits {
                tool_result_chars: 1_024,
                context_chars: 1_024
            }
        );
    }

    #[test]
    fn tool_result_text_counts_double_in_the_context_estimate() {
        assert_eq!(estimate_message_chars(&result("abcd")), 8);
        assert_eq!(
            estimate_message_chars(&Message::User {
                text: "abcd".into()
            }),
            4
        );
    }

    #[test]
    fn assistant_estimate_counts_text_and_tool_call_name_and_arguments() {
        let message = Message::Assistant {
            content: vec![
                AssistantBlock::Text { text: "hi".into() },
                AssistantBlock::ToolCall(ToolCall {
                    id: "c".into(),
                    name: "read".into(),
                    input: json!({"p": 1}),
                }),
            ],
            stop_reason: StopReason::ToolUse,
        };
        // "hi" + "read" + `{"p":1}`
        assert_eq!(estimate_message_chars(&message), 2 + 4 + 7);
    }

    #[test]
    fn guard_leaves_a_context_within_limits_unchanged() {
        let messages = vec![
            Message::User {
                text: "hello".into(),
            },
            result("small"),
        ];
        assert_eq!(apply_context_guard(&messages, 10_000), Ok(messages));
    }

    #[test]
    fn guard_truncates_an_oversized_tool_result_with_the_notice() {
        // Arrange: a 2000-token window allows 2000 chars per tool result.
        let messages = vec![
            Message::User { text: "go".into() },
            result(&"z".repeat(3_000)),
        ];

        // Act
        let guarded = apply_context_guard(&messages, 2_000).expect("fits after truncation");

        // Assert
        let text = result_text(&guarded[1]);
        assert!(char_count(text) <= 2_000);
        let keep = text.find('\n').expect("notice line");
        assert_eq!(
            &text[keep..],
            format!("\n[... {} more characters truncated]", 3_000 - keep)
        );
        assert_eq!(guarded[0], messages[0]);
    }

    #[test]
    fn guard_keeps_the_tool_result_identity_when_truncating() {
        let messages = vec![Message::ToolResult {
            tool_call_id: "call_9".into(),
            tool_name: "exec".into(),
            text: "é".repeat(5_000),
            is_error: true,
        }];
        let guarded = apply_context_guard(&messages, 2_000).expect("fits");
        let Message::ToolResult {
            tool_call_id,
            tool_name,
            is_error,
            text,
        } = &guarded[0]
        else {
            panic!("not a result")
        };
        assert_eq!(
            (tool_call_id.as_str(), tool_name.as_str(), *is_error),
            ("call_9", "exec", true)
        );
        assert!(text.starts_with("éé"));
    }

    #[test]
    fn guard_reports_overflow_when_the_context_is_still_too_big() {
        let messages = vec![Message::User {
            text: "u".repeat(10_000),
        }];
        let err = apply_context_guard(&messages, 2_000).expect_err("too big");
        assert_eq!(
            err.to_string(),
            "Context overflow: estimated context size exceeds safe threshold during tool loop."
        );
        assert_eq!(
            err,
            ContextOverflow {
                estimated_chars: 10_000,
                limit_chars: 7_200
            }
        );
    }

    #[test]
    fn guard_overflow_counts_truncated_tool_results_at_two_chars_per_token() {
        // Four results of 2000 chars fit the per-result limit but weigh 16000 > 7200.
        let messages: Vec<Message> = (0..4).map(|_| result(&"r".repeat(2_000))).collect();
        assert!(apply_context_guard(&messages, 2_000).is_err());
    }
}
