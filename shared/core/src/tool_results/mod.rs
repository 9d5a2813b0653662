//! Tool results (spec §9): how big they may get, how calls and results are recognised in any
//! provider's format, and how a transcript is repaired so every call has exactly one result.
//!
//! Four separate limits apply to tool output, and they must not be conflated:
//! 1. the event/UI stream ([`sanitize_for_event`], [`summarize_tool_error`]), which the model
//!    never sees;
//! 2. the persisted transcript ([`cap_for_transcript`], 40,000 characters), applied to every
//!    result before it is stored;
//! 3. per-run oversize recovery ([`max_tool_result_chars`], [`truncate_tool_result_text`]),
//!    applied when a run is retried after a context overflow;
//! 4. the context guard ([`apply_context_guard`]), applied to a copy of the conversation
//!    before every model call.
//!
//! The turn engine calls, in order: [`cap_for_transcript`] on each result before persisting
//! it, then [`repair_transcript`] and [`apply_context_guard`] before each model call;
//! [`messages_from_raw`] imports transcripts written in other formats.
//!
//! Everything here is pure text and JSON work over [`clawless_base::transcript`] types: no storage,
//! no provider wire types, no clock.

mod guard;
mod identify;
mod repair;
mod truncate;

pub use guard::{
    CHARS_PER_TOKEN, ContextGuardLimits, ContextOverflow, MIN_CONTEXT_GUARD_CHARS,
    TOOL_RESULT_CHARS_PER_TOKEN, apply_context_guard, estimate_context_chars,
    estimate_message_chars, shorten_oversized_results,
};
pub use identify::{
    DEFAULT_TOOL_CALL_ID, MAX_TOOL_NAME_CHARS, SANITIZED_TOOL_CALL_ID, STRICT9_ID_LEN,
    ToolCallIdMode, is_tool_call_block, is_tool_result_message, is_valid_tool_name,
    messages_from_raw, messages_from_raw_with_allowed_tools, sanitize_tool_call_id,
    sanitize_tool_call_id_value, sanitize_tool_calls_for_replay, tool_call_block_id,
    tool_result_id,
};
pub use repair::{
    ErroredTurnResults, SYNTHETIC_TOOL_RESULT_TEXT, UNKNOWN_TOOL_NAME, repair_transcript,
    repair_transcript_with, synthetic_tool_result,
};
pub use truncate::{
    ERROR_SUMMARY_ELLIPSIS, EVENT_TRUNCATION_MARKER, HEAD_TAIL_JOINER, MAX_ERROR_SUMMARY_CHARS,
    MAX_EVENT_TEXT_CHARS, MAX_RECOVERY_TOOL_RESULT_CHARS, MAX_TRANSCRIPT_TOOL_RESULT_CHARS,
    MIN_KEEP_CHARS, cap_for_transcript, cap_tool_result_text,
    format_context_limit_truncation_notice, max_tool_result_chars, sanitize_for_event,
    summarize_tool_error, truncate_tool_result_text,
};

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};

    fn chars(text: &str) -> usize {
        text.chars().count()
    }

    fn notice_chars(total: usize) -> usize {
        chars(&format_context_limit_truncation_notice(total))
    }

    /// Text built from runs of pieces that exercise multi-byte characters, newlines and the
    /// words that switch truncation to head-and-tail mode. Runs (rather than single pieces)
    /// reach tens of thousands of characters while keeping generation cheap.
    fn text_strategy(max_runs: usize) -> impl Strategy<Value = String> {
        const PIECES: [&str; 9] = ["abc", "\n", "é", "🦀", "日本", "error", "}", " ", "done"];
        proptest::collection::vec((0..PIECES.len(), 1_usize..40), 0..max_runs).prop_map(|runs| {
            runs.into_iter()
                .map(|(piece, times)| PIECES[piece].repeat(times))
                .collect()
        })
    }

    /// The kept content of a truncated text must come from the original: a prefix, or a prefix
    /// and a suffix around the head/tail joiner.
    fn assert_kept_content_comes_from(original: &str, out: &str) {
        let kept = out
            .rfind("\n[... ")
            .map_or(out, |notice_at| &out[..notice_at]);
        match kept.split_once(HEAD_TAIL_JOINER) {
            Some((head, tail)) => {
                assert!(original.starts_with(head));
                assert!(original.ends_with(tail));
            }
            None => assert!(original.starts_with(kept)),
        }
    }

    fn message_strategy() -> impl Strategy<Value = Message> {
        let id = (0..6_u8).prop_map(|n| format!("call_{n}"));
        let name = prop_oneof![Just(""), Just("read"), Just("exec")].prop_map(str::to_owned);
        let stop = prop_oneof![
            Just(StopReason::EndTurn),
            Just(StopReason::ToolUse),
            Just(StopReason::MaxTokens),
            Just(StopReason::Error),
            Just(StopReason::Aborted),
        ];
        let block = prop_oneof![
            "[a-z]{0,3}".prop_map(|text| AssistantBlock::Text { text }),
            (id.clone(), name.clone()).prop_map(|(id, name)| AssistantBlock::ToolCall(ToolCall {
                id,
                name,
                input: json!({}),
            })),
        ];
        prop_oneof![
            "[a-z]{0,3}".prop_map(|text| Message::User { text }),
            (proptest::collection::vec(block, 0..4), stop).prop_map(|(content, stop_reason)| {
                Message::Assistant {
                    content,
                    stop_reason,
                }
            }),
            (id, name, any::<bool>()).prop_map(|(tool_call_id, tool_name, is_error)| {
                Message::ToolResult {
                    tool_call_id,
                    tool_name,
                    text: "r".into(),
                    is_error,
                }
            }),
        ]
    }

    fn call_ids(message: &Message) -> Vec<&str> {
        message.tool_calls().map(|call| call.id.as_str()).collect()
    }

    fn result_id(message: &Message) -> Option<&str> {
        match message {
            Message::ToolResult { tool_call_id, .. } => Some(tool_call_id),
            _ => None,
        }
    }

    /// Checks the pairing invariant of a repaired transcript.
    fn assert_paired(out: &[Message]) {
        for (index, message) in out.iter().enumerate() {
            if let Message::ToolResult { .. } = message {
                // Every result sits in a run of results right after an assistant with its call.
                let owner = out[..index]
                    .iter()
                    .rev()
                    .find(|m| !matches!(m, Message::ToolResult { .. }));
                let id = result_id(message).unwrap_or_default();
                assert!(
                    owner.is_some_and(|m| call_ids(m).contains(&id)),
                    "orphan result {id} at {index}"
                );
                continue;
            }
            let Message::Assistant { stop_reason, .. } = message else {
                continue;
            };
            let ids = call_ids(message);
            let unique: HashSet<&str> = ids.iter().copied().collect();
            assert_eq!(unique.len(), ids.len(), "repeated call ids survive");
            let results: Vec<&str> = out[index + 1..].iter().map_while(result_id).collect();
            if matches!(stop_reason, StopReason::Error | StopReason::Aborted) {
                // A subsequence of the calls, in call order.
                let mut remaining = ids.iter();
                for id in &results {
                    assert!(
                        remaining.any(|call| call == id),
                        "results out of call order"
                    );
                }
            } else {
                assert_eq!(results, ids, "each call followed by exactly its one result");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn repair_always_answers_every_call_with_exactly_one_result_in_order(
            messages in proptest::collection::vec(message_strategy(), 0..16),
        ) {
            let repaired = repair_transcript(&messages);
            assert_paired(&repaired);
            prop_assert_eq!(repair_transcript(&repaired), repaired.clone());

            let dropped = repair_transcript_with(&messages, ErroredTurnResults::Drop);
            assert_paired(&dropped);
        }
    }

    #[test]
    fn context_guard_never_leaves_a_tool_result_over_its_limit() {
        // Cases that shortened a result: the property is about those, so too few fail the test.
        let shortened = std::cell::Cell::new(0_usize);
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
        let inputs = (
            proptest::collection::vec(text_strategy(60), 0..4),
            0_usize..3_000,
        );
        let outcome = runner.run(&inputs, |(texts, window)| {
            let messages: Vec<Message> = texts
                .into_iter()
                .map(|text| Message::ToolResult {
                    tool_call_id: "c".into(),
                    tool_name: "read".into(),
                    text,
                    is_error: false,
                })
                .collect();
            let limit = ContextGuardLimits::for_window(window).tool_result_chars;
            let Ok(guarded) = apply_context_guard(&messages, window) else {
                return Err(TestCaseError::reject(
                    "a refused context has no results to check",
                ));
            };
            if guarded != messages {
                shortened.set(shortened.get() + 1);
            }
            for (before, after) in messages.iter().zip(&guarded) {
                let (Message::ToolResult { text: original, .. }, Message::ToolResult { text, .. }) =
                    (before, after)
                else {
                    panic!("roles changed");
                };
                prop_assert!(chars(text) <= limit);
                assert_kept_content_comes_from(original, text);
            }
            Ok(())
        });
        outcome.unwrap();
        // About 40 of the 256 accepted cases shorten a result.
        assert!(
            shortened.get() >= 10,
            "only {} cases shortened a tool result",
            shortened.get()
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn recovery_truncation_stays_within_budget_plus_notice_and_keeps_whole_chars(
            text in text_strategy(300),
            budget in 0_usize..12_000,
        ) {
            let out = truncate_tool_result_text(&text, budget);
            let total = chars(&text);
            if total <= budget {
                prop_assert_eq!(&out, &text);
            } else {
                prop_assert!(chars(&out) <= budget + 1 + notice_chars(total));
                assert_kept_content_comes_from(&text, &out);
            }
        }

        #[test]
        fn transcript_cap_stays_within_its_bound_and_keeps_whole_chars(
            text in text_strategy(300),
            max_chars in 0_usize..12_000,
        ) {
            let out = cap_tool_result_text(&text, max_chars);
            let total = chars(&text);
            let bound = max_chars.max(MIN_KEEP_CHARS + 1 + notice_chars(total));
            prop_assert!(chars(&out) <= bound);
            if total <= max_chars {
                prop_assert_eq!(&out, &text);
            }
            assert_kept_content_comes_from(&text, &out);
        }

        #[test]
        fn event_and_error_summaries_stay_within_their_caps(text in text_strategy(300)) {
            let event = sanitize_for_event(&text);
            prop_assert!(chars(&event) <= MAX_EVENT_TEXT_CHARS + chars(EVENT_TRUNCATION_MARKER));
            prop_assert!(text.starts_with(event.trim_end_matches(EVENT_TRUNCATION_MARKER)));

            let summary = summarize_tool_error(&text);
            prop_assert!(chars(&summary) <= MAX_ERROR_SUMMARY_CHARS + chars(ERROR_SUMMARY_ELLIPSIS));
        }
    }

    #[test]
    fn full_size_transcript_cap_never_exceeds_forty_thousand_chars() {
        for text in [
            "🦀".repeat(50_000),
            format!("{}\n}}", "line of output\n".repeat(5_000)),
            "x\n".repeat(30_000),
        ] {
            let out = cap_for_transcript(&text);
            assert!(chars(&out) <= MAX_TRANSCRIPT_TOOL_RESULT_CHARS);
            assert_kept_content_comes_from(&text, &out);
        }
    }

    #[test]
    fn imported_foreign_transcript_repairs_into_valid_pairs() {
        // An Anthropic transcript whose second call lost its result and whose user typed
        // in between: import, then repair.
        let raw = vec![
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "t1", "name": "read", "input": {}},
                {"type": "tool_use", "id": "t2", "name": "exec", "input": {}}
            ]}),
            json!({"role": "user", "content": "hurry"}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": "A"}
            ]}),
        ];
        let repaired = repair_transcript(&messages_from_raw(&raw));
        assert_paired(&repaired);
        assert_eq!(
            repaired[1..],
            [
                Message::ToolResult {
                    tool_call_id: "t1".into(),
                    tool_name: "read".into(),
                    text: "A".into(),
                    is_error: false,
                },
                synthetic_tool_result(&ToolCall {
                    id: "t2".into(),
                    name: "exec".into(),
                    input: json!({}),
                }),
                Message::User {
                    text: "hurry".into()
                },
            ]
        );
    }
}
