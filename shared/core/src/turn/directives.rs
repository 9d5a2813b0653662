//! Inline session directives in a chat message: `/think` (`/t`, `/thinking`) and
//! `/reasoning` (`/reason`). Finding them anywhere in the text (at its start or after
//! whitespace), taking them out of what the model sees, and deciding what they do: the
//! levels they set, the acknowledgement or error the sender is answered with, and whether
//! the rest of the message still runs a turn. Other directives (`/model`) can sit beside
//! these; the runtime applies the [`DirectivePlan`] (see `turn_service::thinking`).

use clawless_base::thinking::{ReasoningLevel, ThinkingLevel, offered_levels, supports_xhigh};
use serde::{Deserialize, Serialize};

/// Name of the command a directive-only message dispatches: its reply is the
/// acknowledgement, and no model is called.
pub const DIRECTIVES_COMMAND: &str = "session_directives";

/// The reasoning levels, as offered in replies.
const REASONING_OPTIONS: &str = "on, off, stream";

/// One directive found in a message: `None` when given without a level.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FoundDirectives {
    /// `/think …`: the raw level typed, if any.
    pub thinking: Option<Option<String>>,
    /// `/reasoning …`: the raw level typed, if any.
    pub reasoning: Option<Option<String>>,
    /// The text with the directives taken out (whitespace around them collapsed).
    pub rest: String,
}

impl FoundDirectives {
    /// True when the message held at least one directive.
    pub fn any(&self) -> bool {
        self.thinking.is_some() || self.reasoning.is_some()
    }
}

/// Which directive a `/word` names.
#[derive(Clone, Copy)]
enum Kind {
    Thinking,
    Reasoning,
}

fn kind_of(word: &str) -> Option<Kind> {
    match word.to_ascii_lowercase().as_str() {
        "think" | "t" | "thinking" => Some(Kind::Thinking),
        "reasoning" | "reason" => Some(Kind::Reasoning),
        _ => None,
    }
}

/// Finds `/think`, `/t`, `/thinking`, `/reasoning` and `/reason` at the start of `text` or
/// after whitespace, each optionally followed by spaces, a `:` and a level made of letters,
/// digits and `-` (the last of each kind wins). A `/word` that is not one of them (a path,
/// `/tmp`) stays text.
pub fn find_directives(text: &str) -> FoundDirectives {
    let mut found = FoundDirectives::default();
    let mut rest = String::with_capacity(text.len());
    let mut index = 0;
    let bytes = text.as_bytes();
    while index < text.len() {
        let at_boundary = index == 0 || bytes[index - 1].is_ascii_whitespace();
        if at_boundary && bytes[index] == b'/' {
            let word_end = text[index + 1..]
                .find(|c: char| !c.is_ascii_alphabetic())
                .map_or(text.len(), |offset| index + 1 + offset);
            let next = text[word_end..].chars().next();
            let ends_cleanly = next.is_none_or(|c| c.is_whitespace() || c == ':');
            if let Some(kind) = kind_of(&text[index + 1..word_end]).filter(|_| ends_cleanly) {
                let (level, end) = level_after(text, word_end);
                match kind {
                    Kind::Thinking => found.thinking = Some(level),
                    Kind::Reasoning => found.reasoning = Some(level),
                }
                index = end;
                continue;
            }
        }
        let c = text[index..].chars().next().unwrap_or(' ');
        rest.push(c);
        index += c.len_utf8();
    }
    found.rest = rest.split_whitespace().collect::<Vec<_>>().join(" ");
    found
}

/// The level after a directive word ending at `from` (spaces, an optional `:`, spaces, then
/// letters, digits and `-`), and where the directive ends. Without a level, the directive
/// ends at the word (the spaces stay text).
fn level_after(text: &str, from: usize) -> (Option<String>, usize) {
    let tail = &text[from..];
    let after_spaces = tail.trim_start_matches([' ', '\t']);
    let after_colon = after_spaces
        .strip_prefix(':')
        .map_or(after_spaces, |rest| rest.trim_start_matches([' ', '\t']));
    let level_len = after_colon
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .unwrap_or(after_colon.len());
    if level_len == 0 {
        let colon = tail.len() - after_colon.len();
        // A bare `:` belongs to the directive.
        return (
            None,
            from + if after_spaces.starts_with(':') {
                colon
            } else {
                0
            },
        );
    }
    let start = from + (tail.len() - after_colon.len());
    (Some(after_colon[..level_len].to_owned()), start + level_len)
}

/// The session's settings as a directive sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CurrentSettings<'a> {
    /// The thinking level the session's turns run at now (resolved).
    pub thinking: ThinkingLevel,
    /// The reasoning visibility now (resolved).
    pub reasoning: ReasoningLevel,
    /// The session's model, `provider/model`.
    pub model_ref: &'a str,
}

/// What a message's directives do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DirectivePlan {
    /// The thinking level to store in the session (and run this turn at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<ThinkingLevel>,
    /// The reasoning visibility to store in the session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningLevel>,
    /// The answer to the sender: acknowledgements joined by a space, `OK.` when there is
    /// nothing to say, or the error that stopped everything.
    pub reply: String,
    /// The text the model is to answer, when the message held more than directives (and
    /// none was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

/// Decides what `found` does for a session with `current` settings. An unrecognized level
/// (or `xhigh` on a model without it) changes nothing and answers with the error instead of
/// running a turn. `None` when the message held no directive.
pub fn plan_directives(
    found: &FoundDirectives, current: CurrentSettings<'_>,
) -> Option<DirectivePlan> {
    if !found.any() {
        return None;
    }
    let mut acks: Vec<String> = Vec::new();
    let mut thinking = None;
    let mut reasoning = None;
    let refuse = |reply: String| DirectivePlan {
        thinking: None,
        reasoning: None,
        reply,
        text: None,
    };
    match &found.thinking {
        Some(Some(raw)) => match ThinkingLevel::parse(raw) {
            None => {
                return Some(refuse(format!(
                    "Unrecognized thinking level \"{raw}\". Valid levels: {}.",
                    offered_levels(current.model_ref)
                )));
            }
            Some(ThinkingLevel::Xhigh) if !supports_xhigh(current.model_ref) => {
                return Some(refuse(
                    "Thinking level \"xhigh\" is only supported for provider models that advertise xhigh reasoning."
                        .to_owned(),
                ));
            }
            Some(level) => {
                thinking = Some(level);
                acks.push(thinking_ack(level));
            }
        },
        Some(None) => acks.push(format!(
            "Current thinking level: {}.\nOptions: {}.",
            current.thinking,
            offered_levels(current.model_ref)
        )),
        None => {}
    }
    match &found.reasoning {
        Some(Some(raw)) => match ReasoningLevel::parse(raw) {
            None => {
                return Some(refuse(format!(
                    "Unrecognized reasoning level \"{raw}\". Valid levels: {REASONING_OPTIONS}."
                )));
            }
            Some(level) => {
                reasoning = Some(level);
                acks.push(reasoning_ack(level).to_owned());
            }
        },
        Some(None) => acks.push(format!(
            "Current reasoning level: {}.\nOptions: {REASONING_OPTIONS}.",
            current.reasoning
        )),
        None => {}
    }
    let reply = if acks.is_empty() {
        "OK.".to_owned()
    } else {
        acks.join(" ")
    };
    Some(DirectivePlan {
        thinking,
        reasoning,
        reply,
        text: (!found.rest.trim().is_empty()).then(|| found.rest.clone()),
    })
}

/// `Thinking level set to <level>.`, or `Thinking disabled.` for `off`.
pub fn thinking_ack(level: ThinkingLevel) -> String {
    if level == ThinkingLevel::Off {
        "Thinking disabled.".to_owned()
    } else {
        format!("Thinking level set to {level}.")
    }
}

/// The acknowledgement of a reasoning change. No clawless channel edits a live draft, so
/// `stream` shows the reasoning as `on` does, and its acknowledgement says so.
pub fn reasoning_ack(level: ReasoningLevel) -> &'static str {
    match level {
        ReasoningLevel::On => "⚙️ Reasoning visibility enabled.",
        ReasoningLevel::Off => "⚙️ Reasoning visibility disabled.",
        ReasoningLevel::Stream => {
            "⚙️ Reasoning stream enabled (sent as its own message before the answer: no live drafts here)."
        }
    }
}

/// The system event a reasoning change leaves for the model's next turn.
pub fn reasoning_event(level: ReasoningLevel) -> &'static str {
    match level {
        ReasoningLevel::On => "Reasoning ON - include <think>.",
        ReasoningLevel::Off => "Reasoning OFF - hide <think>.",
        ReasoningLevel::Stream => "Reasoning STREAM - emit live <think>.",
    }
}

/// The `Reasoning:` message sent before an answer when reasoning is shown: the heading, then
/// each non-empty line in italics (`_…_`). `None` when there is no reasoning text.
pub fn reasoning_message(thinking: &str) -> Option<String> {
    let lines: Vec<String> = thinking
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(|line| format!("_{line}_"))
        .collect();
    if lines.is_empty() {
        return None;
    }
    Some(format!("Reasoning:\n{}", lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SONNET: &str = "anthropic/claude-sonnet-4-5";

    fn current(model_ref: &str) -> CurrentSettings<'_> {
        CurrentSettings {
            thinking: ThinkingLevel::Off,
            reasoning: ReasoningLevel::Off,
            model_ref,
        }
    }

    fn plan(text: &str) -> Option<DirectivePlan> {
        plan_directives(&find_directives(text), current(SONNET))
    }

    #[test]
    fn directives_are_found_with_or_without_colon_and_stripped() {
        let found = find_directives("/think:high tell me a joke");
        assert_eq!(found.thinking, Some(Some("high".to_owned())));
        assert_eq!(found.rest, "tell me a joke");
        let found = find_directives("please /t   ultrathink now /reason on");
        assert_eq!(found.thinking, Some(Some("ultrathink".to_owned())));
        assert_eq!(found.reasoning, Some(Some("on".to_owned())));
        assert_eq!(found.rest, "please now");
        let found = find_directives("/thinking");
        assert_eq!(found.thinking, Some(None));
        assert_eq!(found.rest, "");
    }

    #[test]
    fn paths_and_other_commands_are_text() {
        for text in [
            "look in /tmp/x",
            "a/think high",
            "/thinker high",
            "/status",
            "see /t/x",
        ] {
            let found = find_directives(text);
            assert!(!found.any(), "{text}");
            assert_eq!(found.rest, text);
        }
    }

    #[test]
    fn vector_19_xhigh_on_a_model_without_it() {
        let plan = plan("/think:xhigh").expect("a directive");
        assert_eq!(
            plan.reply,
            "Thinking level \"xhigh\" is only supported for provider models that advertise xhigh reasoning."
        );
        assert_eq!(plan.thinking, None);
        assert_eq!(plan.text, None);
        // Where it is advertised, it is set.
        let plan = plan_directives(&find_directives("/think xhigh"), current("openai/gpt-5.4"))
            .expect("a directive");
        assert_eq!(plan.thinking, Some(ThinkingLevel::Xhigh));
    }

    #[test]
    fn vector_20_ultrathink_is_high() {
        let plan = plan("/t ultrathink").expect("a directive");
        assert_eq!(plan.reply, "Thinking level set to high.");
        assert_eq!(plan.thinking, Some(ThinkingLevel::High));
        assert_eq!(plan.text, None);
    }

    #[test]
    fn vector_21_mixed_message_runs_at_the_level_and_keeps_it() {
        let plan = plan("/think high tell me a joke").expect("a directive");
        assert_eq!(plan.thinking, Some(ThinkingLevel::High));
        assert_eq!(plan.text.as_deref(), Some("tell me a joke"));
        assert_eq!(plan.reply, "Thinking level set to high.");
    }

    #[test]
    fn acks_errors_and_queries_follow_the_spec() {
        assert_eq!(
            plan("/think off").expect("plan").reply,
            "Thinking disabled."
        );
        assert_eq!(
            plan("/think").expect("plan").reply,
            "Current thinking level: off.\nOptions: off, minimal, low, medium, high, adaptive."
        );
        assert_eq!(
            plan("/think hardest").expect("plan").reply,
            "Unrecognized thinking level \"hardest\". Valid levels: off, minimal, low, medium, high, adaptive."
        );
        assert_eq!(
            plan("/reasoning on").expect("plan").reply,
            "⚙️ Reasoning visibility enabled."
        );
        assert_eq!(
            plan("/reasoning maybe").expect("plan").reply,
            "Unrecognized reasoning level \"maybe\". Valid levels: on, off, stream."
        );
        assert_eq!(
            plan("/reason").expect("plan").reply,
            "Current reasoning level: off.\nOptions: on, off, stream."
        );
        let both = plan("/think low /reasoning off").expect("plan");
        assert_eq!(
            both.reply,
            "Thinking level set to low. ⚙️ Reasoning visibility disabled."
        );
        assert_eq!(
            (both.thinking, both.reasoning),
            (Some(ThinkingLevel::Low), Some(ReasoningLevel::Off))
        );
        assert_eq!(plan("no directives here"), None);
    }

    #[test]
    fn reasoning_message_italicises_each_line() {
        assert_eq!(
            reasoning_message("First step.\n\n  Then this. ").as_deref(),
            Some("Reasoning:\n_First step._\n_Then this._")
        );
        assert_eq!(reasoning_message(" \n"), None);
    }
}
