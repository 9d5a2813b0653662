//! Shortening tool-result text: the persisted-transcript cap (spec §9.1 item 2), the per-run
//! oversize recovery (item 3) and the event/UI stream sanitiser (item 1).
//!
//! Every length here is a count of Unicode scalar values (`char`s), and every cut lands on a
//! `char` boundary. OpenClaw counts UTF-16 code units; the two agree for text in the Basic
//! Multilingual Plane and differ only for astral characters such as emoji, where clawless keeps
//! slightly more text than OpenClaw would.

use serde_json::{Map, Value};

/// Maximum characters of one tool result's text in the persisted transcript, suffix included.
pub const MAX_TRANSCRIPT_TOOL_RESULT_CHARS: usize = 40_000;

/// However small a cap is asked for, truncation keeps at least this many characters of content.
pub const MIN_KEEP_CHARS: usize = 2_000;

/// Event/UI stream text blocks longer than this many characters are shortened.
pub const MAX_EVENT_TEXT_CHARS: usize = 8_000;

/// Appended to event/UI text that was shortened to [`MAX_EVENT_TEXT_CHARS`].
pub const EVENT_TRUNCATION_MARKER: &str = "\n…(truncated)…";

/// Maximum characters of a tool error summary before [`ERROR_SUMMARY_ELLIPSIS`] is added.
pub const MAX_ERROR_SUMMARY_CHARS: usize = 400;

/// Appended to a tool error summary that was cut at [`MAX_ERROR_SUMMARY_CHARS`].
pub const ERROR_SUMMARY_ELLIPSIS: &str = "…";

/// Placed between the head and the tail when truncation keeps both ends of a result.
pub const HEAD_TAIL_JOINER: &str =
    "\n\n⚠️ [... middle content omitted — showing head and tail ...]\n\n";

/// Per-run oversize recovery never allows more than this many characters per tool result.
pub const MAX_RECOVERY_TOOL_RESULT_CHARS: usize = 40_000;

/// How many trailing characters are inspected to decide whether the tail is worth keeping.
const TAIL_SCAN_CHARS: usize = 2_000;

/// Head-and-tail truncation only applies when the budget is strictly larger than this.
const HEAD_TAIL_MIN_BUDGET: usize = 4_000;

/// The kept tail never exceeds this many characters (and never 30% of the budget).
const MAX_TAIL_CHARS: usize = 4_000;

/// Words whose presence near the end means the end carries the outcome (errors, totals).
const IMPORTANT_TAIL_WORDS: [&str; 15] = [
    "error",
    "exception",
    "failed",
    "fatal",
    "traceback",
    "panic",
    "stack trace",
    "errno",
    "exit code",
    "total",
    "summary",
    "result",
    "complete",
    "finished",
    "done",
];

/// The notice that replaces dropped text: `[... n more characters truncated]`.
pub fn format_context_limit_truncation_notice(n: usize) -> String {
    format!("[... {n} more characters truncated]")
}

/// Caps a tool result's text for the persisted transcript (spec §9.1 item 2).
///
/// Equivalent to [`cap_tool_result_text`] with [`MAX_TRANSCRIPT_TOOL_RESULT_CHARS`]: the result
/// is at most 40,000 characters, *including* the `\n[... N more characters truncated]` line.
pub fn cap_for_transcript(text: &str) -> String {
    cap_tool_result_text(text, MAX_TRANSCRIPT_TOOL_RESULT_CHARS)
}

/// Caps `text` at `max_chars` characters, the truncation notice counted within the cap.
///
/// Text of at most `max_chars` characters is returned unchanged. Longer text is shortened with
/// the same head/tail rule as [`truncate_tool_result_text`], to a content budget of
/// `max_chars` minus room for `"\n"` plus the notice, but never below [`MIN_KEEP_CHARS`];
/// `N` in the notice is the number of characters dropped. The output therefore has at most
/// `max(max_chars, MIN_KEEP_CHARS + 1 + notice length)` characters, and text no longer than
/// [`MIN_KEEP_CHARS`] is never touched.
pub fn cap_tool_result_text(text: &str, max_chars: usize) -> String {
    let total = char_count(text);
    if total <= max_chars {
        return text.to_owned();
    }
    // `N` never exceeds `total`, so a notice for `total` is the longest one this call can need.
    let reserve = 1 + char_count(&format_context_limit_truncation_notice(total));
    let budget = max_chars.saturating_sub(reserve).max(MIN_KEEP_CHARS);
    if total <= budget {
        return text.to_owned();
    }
    let (kept, dropped) = shrink_to_budget(text, total, budget);
    with_notice(kept, dropped)
}

/// The per-result budget used when a run is retried after a context overflow (spec §9.1 item 3):
/// `min(floor(ctx_tokens * 0.3) * 4, 40000)` characters.
pub fn max_tool_result_chars(context_window_tokens: usize) -> usize {
    // Integer arithmetic: `ctx * 3 / 10` is exactly `floor(ctx * 0.3)`.
    let share = context_window_tokens.saturating_mul(3) / 10;
    share.saturating_mul(4).min(MAX_RECOVERY_TOOL_RESULT_CHARS)
}

/// Shortens `text` to `budget` characters of content plus a truncation notice (spec §9.1 item 3).
///
/// Text of at most `budget` characters is returned unchanged. Otherwise:
/// - when `budget > 4000` and the last 2000 characters contain (case-insensitively) `error`,
///   `exception`, `failed`, `fatal`, `traceback`, `panic`, `stack trace`, `errno`, `exit code`,
///   `total`, `summary`, `result`, `complete`, `finished` or `done`, or the text ends in `}`
///   (trailing whitespace ignored), the head and the tail are kept: the tail is
///   `min(floor(30% of budget), 4000)` characters and the head fills the rest of the budget
///   after [`HEAD_TAIL_JOINER`], which joins them;
/// - otherwise the first `budget` characters are kept, cut back to the last newline among them
///   when that newline sits at or beyond 80% of the budget (the newline itself is dropped).
///
/// Then `"\n"` and `[... N more characters truncated]` are appended, `N` being the number of
/// original characters not kept. The words are matched as plain substrings, as the spec words
/// them. The output never exceeds `budget + 1 + notice length` characters.
pub fn truncate_tool_result_text(text: &str, budget: usize) -> String {
    let total = char_count(text);
    if total <= budget {
        return text.to_owned();
    }
    let (kept, dropped) = shrink_to_budget(text, total, budget);
    with_notice(kept, dropped)
}

/// Shortens text for `tool` agent events (spec §9.1 item 1): more than 8000 characters become
/// the first 8000 followed by [`EVENT_TRUNCATION_MARKER`]. The model never sees this version.
pub fn sanitize_for_event(text: &str) -> String {
    if char_count(text) <= MAX_EVENT_TEXT_CHARS {
        return text.to_owned();
    }
    format!(
        "{}{EVENT_TRUNCATION_MARKER}",
        head(text, MAX_EVENT_TEXT_CHARS)
    )
}

/// A one-line summary of a failed tool's output for events and logs (spec §9.1 item 1).
///
/// When the text is a JSON object, the first non-blank string among its `error`, `message` and
/// `reason` fields is used (an `error` object contributes its own `message`), else its `status`
/// when that matches `error|fail|timeout|timed[_ -]out|denied|cancel|invalid|forbidden` and is
/// not `ok`, `success`, `completed`, `running` or `0`. Otherwise (and for JSON without such
/// fields) the first non-blank line of the text is used, trimmed. The summary is capped at 400
/// characters plus `…`. Tool outputs in clawless carry no separate `details` object, so the
/// JSON is looked for in the text itself.
pub fn summarize_tool_error(text: &str) -> String {
    let trimmed = text.trim();
    let from_json = match serde_json::from_str::<Value>(trimmed) {
        Ok(Value::Object(map)) => error_from_json(&map),
        _ => None,
    };
    let summary = from_json.unwrap_or_else(|| first_line(trimmed).to_owned());
    if char_count(&summary) <= MAX_ERROR_SUMMARY_CHARS {
        return summary;
    }
    format!(
        "{}{ERROR_SUMMARY_ELLIPSIS}",
        head(&summary, MAX_ERROR_SUMMARY_CHARS)
    )
}

fn error_from_json(map: &Map<String, Value>) -> Option<String> {
    for key in ["error", "message", "reason"] {
        match map.get(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => return Some(s.trim().to_owned()),
            Some(Value::Object(inner)) => {
                if let Some(Value::String(s)) = inner.get("message")
                    && !s.trim().is_empty()
                {
                    return Some(s.trim().to_owned());
                }
            }
            _ => {}
        }
    }
    let status = match map.get("status")? {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    status_looks_failed(&status).then_some(status)
}

fn status_looks_failed(status: &str) -> bool {
    let lower = status.to_lowercase();
    if ["ok", "success", "completed", "running", "0"].contains(&lower.as_str()) {
        return false;
    }
    let plain = [
        "error",
        "fail",
        "timeout",
        "denied",
        "cancel",
        "invalid",
        "forbidden",
    ];
    plain.iter().any(|word| lower.contains(word)) || contains_timed_out(&lower)
}

/// Matches `timed[_\s-]?out`.
fn contains_timed_out(lower: &str) -> bool {
    lower.match_indices("timed").any(|(at, word)| {
        let rest = &lower[at + word.len()..];
        let mut chars = rest.chars();
        match chars.next() {
            Some(c) if c == '_' || c == '-' || c.is_whitespace() => {
                chars.as_str().starts_with("out")
            }
            _ => rest.starts_with("out"),
        }
    })
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or("")
}

/// Keeps at most `budget` characters of `text` (`total` characters long, more than `budget`);
/// returns the kept content and how many original characters it leaves out.
fn shrink_to_budget(text: &str, total: usize, budget: usize) -> (String, usize) {
    if budget > HEAD_TAIL_MIN_BUDGET && tail_is_important(text, total) {
        let tail_len = (budget * 3 / 10).min(MAX_TAIL_CHARS);
        let head_len = budget
            .saturating_sub(tail_len)
            .saturating_sub(char_count(HEAD_TAIL_JOINER));
        let kept = format!(
            "{}{HEAD_TAIL_JOINER}{}",
            head(text, head_len),
            tail(text, total, tail_len)
        );
        return (kept, total - head_len - tail_len);
    }
    let kept = head(text, budget);
    if let Some(newline) = kept.rfind('\n') {
        let newline_at = char_count(&kept[..newline]);
        // Cut at a line end only when that loses at most 20% of the budget.
        if newline_at * 10 >= budget * 8 {
            return (kept[..newline].to_owned(), total - newline_at);
        }
    }
    (kept.to_owned(), total - budget)
}

fn tail_is_important(text: &str, total: usize) -> bool {
    let scanned = tail(text, total, TAIL_SCAN_CHARS);
    if scanned.trim_end().ends_with('}') {
        return true;
    }
    let lower = scanned.to_lowercase();
    IMPORTANT_TAIL_WORDS.iter().any(|word| lower.contains(word))
}

fn with_notice(kept: String, dropped: usize) -> String {
    let mut out = kept;
    out.push('\n');
    out.push_str(&format_context_limit_truncation_notice(dropped));
    out
}

/// Number of Unicode scalar values in `text`.
pub(crate) fn char_count(text: &str) -> usize {
    text.chars().count()
}

/// The first `n` characters of `text` (all of it when shorter).
pub(crate) fn head(text: &str, n: usize) -> &str {
    &text[..byte_offset(text, n)]
}

/// The last `n` characters of `text`, which is `total` characters long.
fn tail(text: &str, total: usize, n: usize) -> &str {
    &text[byte_offset(text, total.saturating_sub(n))..]
}

/// Byte offset just after the first `n` characters of `text`, clamped to its length.
fn byte_offset(text: &str, n: usize) -> usize {
    text.char_indices()
        .nth(n)
        .map_or(text.len(), |(offset, _)| offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice_count(text: &str) -> usize {
        // "[... N more characters truncated]" at the very end.
        let start = text.rfind("[... ").expect("notice present") + 5;
        let end = text
            .rfind(" more characters truncated]")
            .expect("notice present");
        text[start..end].parse().expect("a number")
    }

    #[test]
    fn context_limit_notice_matches_the_spec_vector() {
        assert_eq!(
            format_context_limit_truncation_notice(123),
            "[... 123 more characters truncated]"
        );
    }

    #[test]
    fn transcript_cap_leaves_text_at_the_cap_unchanged() {
        let text = "a".repeat(MAX_TRANSCRIPT_TOOL_RESULT_CHARS);
        assert_eq!(cap_for_transcript(&text), text);
    }

    #[test]
    fn transcript_cap_keeps_output_within_forty_thousand_chars_including_the_notice() {
        // Arrange: plain text with no outcome words, one over the cap by a lot.
        let text = "x".repeat(100_000);

        // Act
        let capped = cap_for_transcript(&text);

        // Assert
        // The notice is sized for the worst case, so the total may fall a digit or two short.
        let len = char_count(&capped);
        assert!(
            (MAX_TRANSCRIPT_TOOL_RESULT_CHARS - 2..=MAX_TRANSCRIPT_TOOL_RESULT_CHARS)
                .contains(&len)
        );
        assert!(capped.ends_with(" more characters truncated]"));
        let kept = capped.find('\n').expect("separator");
        assert_eq!(notice_count(&capped), 100_000 - kept);
    }

    #[test]
    fn transcript_cap_counts_characters_not_bytes() {
        let text = "é".repeat(MAX_TRANSCRIPT_TOOL_RESULT_CHARS);
        assert_eq!(cap_for_transcript(&text), text);

        let longer = "é".repeat(MAX_TRANSCRIPT_TOOL_RESULT_CHARS + 10);
        let capped = cap_for_transcript(&longer);
        assert!(char_count(&capped) <= MAX_TRANSCRIPT_TOOL_RESULT_CHARS);
        assert!(capped.starts_with("ééé"));
    }

    #[test]
    fn small_caps_still_keep_the_minimum_of_two_thousand_chars() {
        let text = "y".repeat(5_000);
        let capped = cap_tool_result_text(&text, 100);
        assert!(capped.starts_with(&"y".repeat(MIN_KEEP_CHARS)));
        assert_eq!(notice_count(&capped), 3_000);

        let short = "z".repeat(1_500);
        assert_eq!(cap_tool_result_text(&short, 100), short);
    }

    #[test]
    fn transcript_cap_keeps_the_tail_of_an_error_output() {
        let text = format!("{}\nTraceback: boom at the end", "line\n".repeat(20_000));
        let capped = cap_for_transcript(&text);
        assert!(capped.contains(HEAD_TAIL_JOINER));
        assert!(capped.contains("Traceback: boom at the end\n[... "));
        assert!(char_count(&capped) <= MAX_TRANSCRIPT_TOOL_RESULT_CHARS);
    }

    #[test]
    fn recovery_budget_is_thirty_percent_of_the_window_at_four_chars_per_token() {
        assert_eq!(max_tool_result_chars(10_000), 12_000);
        assert_eq!(max_tool_result_chars(0), 0);
        // floor(33 * 0.3) = 9 tokens, at 4 chars each.
        assert_eq!(max_tool_result_chars(33), 36);
    }

    #[test]
    fn recovery_budget_never_exceeds_forty_thousand_chars() {
        assert_eq!(max_tool_result_chars(200_000), 40_000);
        assert_eq!(max_tool_result_chars(usize::MAX), 40_000);
    }

    #[test]
    fn truncation_leaves_text_within_budget_unchanged() {
        assert_eq!(truncate_tool_result_text("short", 5), "short");
    }

    #[test]
    fn truncation_keeps_head_and_tail_when_the_tail_mentions_an_error() {
        // Arrange
        let text = format!("{}FATAL: disk full", "a".repeat(20_000));

        // Act
        let out = truncate_tool_result_text(&text, 10_000);

        // Assert: tail = min(30% of 10000, 4000) = 3000 chars, head fills the rest of the budget.
        let joiner = char_count(HEAD_TAIL_JOINER);
        let head_len = 10_000 - 3_000 - joiner;
        assert!(out.starts_with(&format!("{}{HEAD_TAIL_JOINER}", "a".repeat(head_len))));
        assert!(out.contains("FATAL: disk full\n[... "));
        assert_eq!(notice_count(&out), char_count(&text) - head_len - 3_000);
    }

    #[test]
    fn truncation_caps_the_tail_at_four_thousand_chars() {
        let text = format!("{}done", "b".repeat(100_000));
        let out = truncate_tool_result_text(&text, 40_000);
        let after_joiner = out.split(HEAD_TAIL_JOINER).nth(1).expect("joined");
        let tail_part = after_joiner.split("\n[... ").next().expect("tail");
        assert_eq!(char_count(tail_part), 4_000);
    }

    #[test]
    fn truncation_keeps_the_tail_when_the_text_ends_in_a_closing_brace() {
        let text = format!("{{\"items\": \"{}\"}}\n  ", "c".repeat(10_000));
        let out = truncate_tool_result_text(&text, 5_000);
        assert!(out.contains(HEAD_TAIL_JOINER));
    }

    #[test]
    fn truncation_keeps_only_the_head_when_the_budget_is_four_thousand_or_less() {
        let text = format!("{}error", "d".repeat(10_000));
        let out = truncate_tool_result_text(&text, 4_000);
        assert!(!out.contains(HEAD_TAIL_JOINER));
        assert_eq!(
            out,
            format!(
                "{}\n[... 6005 more characters truncated]",
                "d".repeat(4_000)
            )
        );
    }

    #[test]
    fn truncation_keeps_only_the_head_when_the_tail_is_unremarkable() {
        let text = "e".repeat(10_000);
        let out = truncate_tool_result_text(&text, 5_000);
        assert_eq!(
            out,
            format!(
                "{}\n[... 5000 more characters truncated]",
                "e".repeat(5_000)
            )
        );
    }

    #[test]
    fn truncation_cuts_at_the_last_newline_when_it_is_within_eighty_percent_of_the_budget() {
        // Newline at char 900 of a 1000 budget: 90% >= 80%, so cut there.
        let text = format!("{}\n{}", "f".repeat(900), "g".repeat(5_000));
        let out = truncate_tool_result_text(&text, 1_000);
        assert_eq!(
            out,
            format!("{}\n[... 5001 more characters truncated]", "f".repeat(900))
        );
    }

    #[test]
    fn truncation_ignores_a_newline_that_would_lose_more_than_twenty_percent() {
        let text = format!("{}\n{}", "h".repeat(700), "i".repeat(5_000));
        let out = truncate_tool_result_text(&text, 1_000);
        assert!(out.starts_with(&format!("{}\n{}", "h".repeat(700), "i".repeat(299))));
        assert_eq!(notice_count(&out), char_count(&text) - 1_000);
    }

    #[test]
    fn truncation_never_splits_a_multibyte_character() {
        let text = "🦀".repeat(3_000);
        let out = truncate_tool_result_text(&text, 1_001);
        assert!(out.starts_with(&"🦀".repeat(1_001)));
        assert_eq!(notice_count(&out), 1_999);
    }

    #[test]
    fn event_text_up_to_eight_thousand_chars_is_unchanged() {
        let text = "j".repeat(MAX_EVENT_TEXT_CHARS);
        assert_eq!(sanitize_for_event(&text), text);
    }

    #[test]
    fn event_text_over_eight_thousand_chars_gets_the_truncated_marker() {
        let text = "ü".repeat(MAX_EVENT_TEXT_CHARS + 1);
        let out = sanitize_for_event(&text);
        assert_eq!(
            out,
            format!("{}\n…(truncated)…", "ü".repeat(MAX_EVENT_TEXT_CHARS))
        );
    }

    #[test]
    fn error_summary_is_the_first_non_blank_line() {
        assert_eq!(
            summarize_tool_error("\n  command failed: exit 2  \nstack line"),
            "command failed: exit 2"
        );
        assert_eq!(summarize_tool_error(""), "");
    }

    #[test]
    fn error_summary_prefers_the_json_error_message_and_reason_fields() {
        assert_eq!(
            summarize_tool_error(r#"{"error":"no such file"}"#),
            "no such file"
        );
        assert_eq!(
            summarize_tool_error(r#"{"error":{"message":"denied by policy"}}"#),
            "denied by policy"
        );
        assert_eq!(summarize_tool_error(r#"{"status":"x","message":"m"}"#), "m");
        assert_eq!(summarize_tool_error(r#"{"reason":"quota"}"#), "quota");
    }

    #[test]
    fn error_summary_uses_a_failing_status() {
        assert_eq!(
            summarize_tool_error(r#"{"status":"timed_out"}"#),
            "timed_out"
        );
        assert_eq!(
            summarize_tool_error(r#"{"status":"Timed Out"}"#),
            "Timed Out"
        );
        assert_eq!(
            summarize_tool_error(r#"{"status":"permission_denied"}"#),
            "permission_denied"
        );
    }

    #[test]
    fn error_summary_ignores_a_successful_status() {
        let text = r#"{"status":"completed","exitCode":0}"#;
        assert_eq!(summarize_tool_error(text), text);
        assert!(!status_looks_failed("ok"));
        assert!(!status_looks_failed("0"));
        assert!(!status_looks_failed("running"));
    }

    #[test]
    fn error_summary_is_capped_at_four_hundred_chars_plus_an_ellipsis() {
        let out = summarize_tool_error(&"k".repeat(1_000));
        assert_eq!(out, format!("{}…", "k".repeat(400)));
        assert_eq!(summarize_tool_error(&"k".repeat(400)), "k".repeat(400));
    }
}
