//! Context pruning (spec §4, mode `cache-ttl`): shrinking old tool results in the messages of
//! one model request, never in the stored transcript.
//!
//! Pruning only pays off once the provider's prompt cache has expired (otherwise it would throw
//! away a warm cache), so it is gated on the time since the last model call ([`pruning_due`]).
//! When it runs ([`prune_messages`]) it estimates the request's size in characters (about four
//! per token) against the model's window and, past a first ratio, soft-trims long tool results
//! to their head and tail; past a second ratio it replaces whole tool results, oldest first,
//! with a placeholder. The latest assistant turns and everything before the first user message
//! (bootstrap reads) are never touched, and the configured tool globs decide which tools'
//! results may be pruned.
//!
//! Lengths are counted in Unicode scalar values (`char`s), like the rest of clawless, where
//! OpenClaw counts UTF-16 code units; they differ only for characters outside the Basic
//! Multilingual Plane.

use clawless_base::wildcard::wildcard_matches;
use std::borrow::Cow;

use serde::Deserialize;

use clawless_base::transcript::{AssistantBlock, Message};

/// The only `mode` that turns pruning on; any other value (or none) leaves it off.
pub const CACHE_TTL_MODE: &str = "cache-ttl";

/// Default time after the last model call before pruning may run: 5 minutes.
pub const DEFAULT_TTL_MS: u64 = 5 * 60 * 1_000;

/// The `ttl` applied by [`PruningSettings::with_anthropic_defaults`] when none is configured.
pub const ANTHROPIC_DEFAULT_TTL: &str = "1h";

/// Default number of latest assistant messages whose turns are protected.
pub const DEFAULT_KEEP_LAST_ASSISTANTS: usize = 3;

/// Default context share (estimated characters / window characters) at which soft trim starts.
pub const DEFAULT_SOFT_TRIM_RATIO: f64 = 0.3;

/// Default context share at which hard clear starts, and below which it stops.
pub const DEFAULT_HARD_CLEAR_RATIO: f64 = 0.5;

/// Default minimum of characters the prunable tool results must hold before any is cleared.
pub const DEFAULT_MIN_PRUNABLE_TOOL_CHARS: usize = 50_000;

/// Default length above which a tool result is soft-trimmed.
pub const DEFAULT_SOFT_TRIM_MAX_CHARS: usize = 4_000;

/// Default number of leading characters a soft-trimmed result keeps.
pub const DEFAULT_SOFT_TRIM_HEAD_CHARS: usize = 1_500;

/// Default number of trailing characters a soft-trimmed result keeps.
pub const DEFAULT_SOFT_TRIM_TAIL_CHARS: usize = 1_500;

/// Whether hard clear may replace whole tool results when `hardClear.enabled` is unset.
pub const DEFAULT_HARD_CLEAR_ENABLED: bool = true;

/// Default text that replaces a hard-cleared tool result.
pub const DEFAULT_HARD_CLEAR_PLACEHOLDER: &str = "[Old tool result content cleared]";

/// Characters assumed per token when comparing the request with the window.
const CHARS_PER_TOKEN: usize = 4;

/// Weight of one CJK character in the estimate: such text costs about a token per character.
const CJK_CHAR_WEIGHT: usize = 4;

/// The `contextPruning` configuration as written (camelCase keys, every field optional).
///
/// Numbers are read as JSON numbers of any kind and made sane by [`PruningSettings::resolve`]:
/// ratios are clamped to `0..=1`, counts are floored and never negative.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct PruningSettings {
    /// `cache-ttl` turns pruning on; `off` or anything else leaves it off. Unset: `cache-ttl`
    /// for Anthropic models, off for every other provider.
    pub mode: Option<String>,
    /// Time since the last model call before pruning may run (the provider's prompt cache has
    /// gone cold by then), as a duration such as `5m`, `1h`, `30s`, `500ms`, `1d` or a bare
    /// number of minutes. Unset (or not a duration): `1h` for Anthropic models, else `5m`.
    pub ttl: Option<String>,
    /// How many of the latest assistant messages (and what follows them) are never pruned.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_KEEP_LAST_ASSISTANTS, "minimum" = 0)))]
    pub keep_last_assistants: Option<f64>,
    /// Share of the context window (estimated characters over window characters, 0 to 1) from
    /// which long tool results are soft-trimmed to their head and tail.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_SOFT_TRIM_RATIO)))]
    pub soft_trim_ratio: Option<f64>,
    /// Share of the context window (0 to 1) from which whole tool results are replaced by the
    /// placeholder, oldest first, until the share is below it again.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HARD_CLEAR_RATIO)))]
    pub hard_clear_ratio: Option<f64>,
    /// Characters the prunable tool results must hold together before any is cleared.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MIN_PRUNABLE_TOOL_CHARS, "minimum" = 0)))]
    pub min_prunable_tool_chars: Option<f64>,
    /// How long tool results are soft-trimmed.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub soft_trim: Option<SoftTrimSettings>,
    /// Whether and how whole tool results are replaced.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub hard_clear: Option<HardClearSettings>,
    /// Which tools' results may be pruned (default: every tool's).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub tools: Option<ToolMatchSettings>,
}

/// The `softTrim` block of [`PruningSettings`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct SoftTrimSettings {
    /// Tool results longer than this many characters are soft-trimmed.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_SOFT_TRIM_MAX_CHARS, "minimum" = 0)))]
    pub max_chars: Option<f64>,
    /// Leading characters a soft-trimmed result keeps.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_SOFT_TRIM_HEAD_CHARS, "minimum" = 0)))]
    pub head_chars: Option<f64>,
    /// Trailing characters a soft-trimmed result keeps.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_SOFT_TRIM_TAIL_CHARS, "minimum" = 0)))]
    pub tail_chars: Option<f64>,
}

/// The `hardClear` block of [`PruningSettings`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct HardClearSettings {
    /// Whether whole tool results may be replaced by the placeholder.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HARD_CLEAR_ENABLED)))]
    pub enabled: Option<bool>,
    /// The text a cleared tool result is replaced with; blank means the default.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_HARD_CLEAR_PLACEHOLDER)))]
    pub placeholder: Option<String>,
}

/// The `tools` block of [`PruningSettings`]: glob lists over tool names (`*` matches any run of
/// characters, comparison ignores case).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolMatchSettings {
    /// When not empty, only the results of tools matching one of these globs are pruned.
    pub allow: Vec<String>,
    /// The results of tools matching one of these globs are never pruned, even when allowed.
    pub deny: Vec<String>,
}

impl PruningSettings {
    /// Fills the fields OpenClaw defaults for Anthropic authentication, when they are unset:
    /// `mode` becomes [`CACHE_TTL_MODE`] and `ttl` [`ANTHROPIC_DEFAULT_TTL`].
    #[must_use]
    pub fn with_anthropic_defaults(mut self) -> Self {
        self.mode.get_or_insert_with(|| CACHE_TTL_MODE.to_owned());
        self.ttl
            .get_or_insert_with(|| ANTHROPIC_DEFAULT_TTL.to_owned());
        self
    }

    /// The settings pruning runs with, or `None` when it is off (mode unset, `off` or unknown).
    ///
    /// Unset fields take the defaults of [`EffectivePruning::default`]; so does a `ttl` that
    /// does not parse and a blank placeholder.
    pub fn resolve(&self) -> Option<EffectivePruning> {
        if self.mode.as_deref() != Some(CACHE_TTL_MODE) {
            return None;
        }
        let mut effective = EffectivePruning::default();
        if let Some(ttl_ms) = self.ttl.as_deref().and_then(parse_ttl_ms) {
            effective.ttl_ms = ttl_ms;
        }
        set_count(
            &mut effective.keep_last_assistants,
            self.keep_last_assistants,
        );
        set_ratio(&mut effective.soft_trim_ratio, self.soft_trim_ratio);
        set_ratio(&mut effective.hard_clear_ratio, self.hard_clear_ratio);
        set_count(
            &mut effective.min_prunable_tool_chars,
            self.min_prunable_tool_chars,
        );
        if let Some(soft_trim) = &self.soft_trim {
            set_count(&mut effective.soft_trim.max_chars, soft_trim.max_chars);
            set_count(&mut effective.soft_trim.head_chars, soft_trim.head_chars);
            set_count(&mut effective.soft_trim.tail_chars, soft_trim.tail_chars);
        }
        if let Some(hard_clear) = &self.hard_clear {
            if let Some(enabled) = hard_clear.enabled {
                effective.hard_clear.enabled = enabled;
            }
            if let Some(placeholder) = hard_clear.placeholder.as_deref().map(str::trim)
                && !placeholder.is_empty()
            {
                effective.hard_clear.placeholder = placeholder.to_owned();
            }
        }
        if let Some(tools) = &self.tools {
            effective.tools = ToolFilter::new(&tools.allow, &tools.deny);
        }
        Some(effective)
    }
}

/// Replaces `target` with `value` floored at zero, when `value` is a finite number.
fn set_count(target: &mut usize, value: Option<f64>) {
    if let Some(value) = value.filter(|value| value.is_finite()) {
        // Float-to-int `as` saturates, so a huge count becomes usize::MAX.
        *target = value.max(0.0).floor() as usize;
    }
}

/// Replaces `target` with `value` clamped to `0..=1`, when `value` is a finite number.
fn set_ratio(target: &mut f64, value: Option<f64>) {
    if let Some(value) = value.filter(|value| value.is_finite()) {
        *target = value.clamp(0.0, 1.0);
    }
}

/// Parses a TTL duration into milliseconds: a non-negative number (decimals allowed), optionally
/// followed by a unit `ms`, `s`, `m`, `h` or `d`; without a unit the number is minutes. Case
/// and surrounding or separating spaces do not matter. `None` when the text is not such a
/// duration.
pub fn parse_ttl_ms(text: &str) -> Option<u64> {
    let text = text.trim().to_ascii_lowercase();
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(number_end);
    if !number.starts_with(|c: char| c.is_ascii_digit()) || number.ends_with('.') {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let unit_ms = match unit.trim_start() {
        "ms" => 1.0,
        "s" => 1_000.0,
        "" | "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    let millis = (value * unit_ms).round();
    // Float-to-int `as` saturates, so an absurdly long TTL becomes u64::MAX.
    millis.is_finite().then_some(millis as u64)
}

/// The settings [`prune_messages`] runs with: pruning is on, every value resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct EffectivePruning {
    /// Time after the last model call before pruning may run, in milliseconds.
    pub ttl_ms: u64,
    /// Messages from the `keep_last_assistants`-th last assistant message onward are protected;
    /// `0` protects nothing.
    pub keep_last_assistants: usize,
    /// Context share (`0..=1`) at which soft trim starts.
    pub soft_trim_ratio: f64,
    /// Context share (`0..=1`) at which hard clear starts, and below which it stops.
    pub hard_clear_ratio: f64,
    /// Minimum estimated characters the prunable tool results must hold before any is cleared.
    pub min_prunable_tool_chars: usize,
    /// Soft-trim limits.
    pub soft_trim: SoftTrim,
    /// Hard-clear switch and placeholder.
    pub hard_clear: HardClear,
    /// Which tools' results may be pruned.
    pub tools: ToolFilter,
}

impl Default for EffectivePruning {
    /// OpenClaw's defaults for `cache-ttl` mode.
    fn default() -> Self {
        Self {
            ttl_ms: DEFAULT_TTL_MS,
            keep_last_assistants: DEFAULT_KEEP_LAST_ASSISTANTS,
            soft_trim_ratio: DEFAULT_SOFT_TRIM_RATIO,
            hard_clear_ratio: DEFAULT_HARD_CLEAR_RATIO,
            min_prunable_tool_chars: DEFAULT_MIN_PRUNABLE_TOOL_CHARS,
            soft_trim: SoftTrim::default(),
            hard_clear: HardClear::default(),
            tools: ToolFilter::default(),
        }
    }
}

/// How a long tool result is soft-trimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SoftTrim {
    /// Results longer than this many characters are trimmed.
    pub max_chars: usize,
    /// Leading characters kept.
    pub head_chars: usize,
    /// Trailing characters kept.
    pub tail_chars: usize,
}

impl Default for SoftTrim {
    fn default() -> Self {
        Self {
            max_chars: DEFAULT_SOFT_TRIM_MAX_CHARS,
            head_chars: DEFAULT_SOFT_TRIM_HEAD_CHARS,
            tail_chars: DEFAULT_SOFT_TRIM_TAIL_CHARS,
        }
    }
}

/// Whether and how whole tool results are replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HardClear {
    /// Whether whole tool results may be replaced.
    pub enabled: bool,
    /// The text a cleared result is replaced with.
    pub placeholder: String,
}

impl Default for HardClear {
    fn default() -> Self {
        Self {
            enabled: DEFAULT_HARD_CLEAR_ENABLED,
            placeholder: DEFAULT_HARD_CLEAR_PLACEHOLDER.to_owned(),
        }
    }
}

/// Which tools' results may be pruned: allow and deny globs over tool names, compared without
/// regard to case and surrounding spaces; `*` matches any run of characters. The default
/// filter allows every tool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolFilter {
    allow: Vec<String>,
    deny: Vec<String>,
}

impl ToolFilter {
    /// A filter from glob lists; blank patterns are ignored.
    pub fn new<S: AsRef<str>>(allow: &[S], deny: &[S]) -> Self {
        Self {
            allow: normalize_patterns(allow),
            deny: normalize_patterns(deny),
        }
    }

    /// Whether results of `tool_name` may be pruned: never when a deny glob matches; otherwise
    /// always when the allow list is empty, else only when an allow glob matches.
    pub fn is_prunable(&self, tool_name: &str) -> bool {
        let name = tool_name.trim().to_lowercase();
        let matches_any = |patterns: &[String]| {
            patterns
                .iter()
                .any(|pattern| wildcard_matches(pattern, &name))
        };
        if matches_any(&self.deny) {
            return false;
        }
        self.allow.is_empty() || matches_any(&self.allow)
    }
}

/// Trimmed, lower-cased, non-blank patterns.
fn normalize_patterns<S: AsRef<str>>(patterns: &[S]) -> Vec<String> {
    patterns
        .iter()
        .map(|pattern| pattern.as_ref().trim().to_lowercase())
        .filter(|pattern| !pattern.is_empty())
        .collect()
}

/// Whether pruning should run before a model call at `now_ms`.
///
/// Only when a previous model call is known (`last_model_call_ms`) and at least `ttl_ms` have
/// passed since, so a prompt cache that may still be warm is never invalidated. A zero TTL never
/// prunes; a clock that went backwards counts as no time passed. After a call that pruning
/// changed, the caller records that call's time as the new `last_model_call_ms`, so an
/// immediate next call does not prune again.
pub fn pruning_due(now_ms: u64, last_model_call_ms: Option<u64>, ttl_ms: u64) -> bool {
    match last_model_call_ms {
        Some(last) if ttl_ms > 0 => now_ms.saturating_sub(last) >= ttl_ms,
        _ => false,
    }
}

/// Prunes old tool results in the messages of one request for a model whose window holds
/// `context_window_tokens` tokens. Returns the pruned copy, or `None` when nothing changed.
///
/// 1. The window is `context_window_tokens × 4` characters. Protected: every message from the
///    `keep_last_assistants`-th last assistant message onward (with fewer assistant messages
///    than that, nothing is pruned) and every message before the first user message (with no
///    user message, nothing is pruned).
/// 2. The request's estimated size (text of every message, a tool call's JSON arguments, CJK
///    characters counting four) divided by the window is the ratio; below
///    `soft_trim_ratio` nothing happens.
/// 3. Each prunable tool result (unprotected, its tool passing [`ToolFilter::is_prunable`])
///    longer than `soft_trim.max_chars` whose head and tail together are shorter than it keeps
///    its first `head_chars` and last `tail_chars` characters, joined by `\n...\n`, followed by
///    `\n\n[Tool result trimmed: kept first H chars and last T chars of N chars.]`.
/// 4. If the ratio is still at least `hard_clear_ratio`, hard clear is enabled and the prunable
///    results hold at least `min_prunable_tool_chars` estimated characters, prunable results
///    are replaced by the placeholder, oldest first, until the ratio drops below
///    `hard_clear_ratio`.
///
/// Only tool-result text changes; call ids, tool names, error flags and every other message are
/// kept as they are.
pub fn prune_messages(
    messages: &[Message], context_window_tokens: usize, settings: &EffectivePruning,
) -> Option<Vec<Message>> {
    let window_chars = context_window_tokens.saturating_mul(CHARS_PER_TOKEN);
    if window_chars == 0 {
        return None;
    }
    let protected_from = protected_tail_start(messages, settings.keep_last_assistants)?;
    let prunable_from = messages
        .iter()
        .position(|message| matches!(message, Message::User { .. }))?;
    let ratio = |total_chars: usize| total_chars as f64 / window_chars as f64;

    let mut total_chars = messages
        .iter()
        .map(estimated_message_chars)
        .fold(0, usize::saturating_add);
    if ratio(total_chars) < settings.soft_trim_ratio {
        return None;
    }

    let mut pruned = Cow::Borrowed(messages);
    let mut prunable = Vec::new();
    for (index, message) in messages
        .iter()
        .enumerate()
        .take(protected_from)
        .skip(prunable_from)
    {
        let Message::ToolResult {
            tool_name, text, ..
        } = message
        else {
            continue;
        };
        if !settings.tools.is_prunable(tool_name) {
            continue;
        }
        prunable.push(index);
        if let Some(trimmed) = soft_trim_text(text, &settings.soft_trim) {
            total_chars = total_chars - estimated_text_chars(text) + estimated_text_chars(&trimmed);
            replace_tool_result_text(&mut pruned, index, trimmed);
        }
    }

    if ratio(total_chars) >= settings.hard_clear_ratio && settings.hard_clear.enabled {
        let prunable_chars = prunable
            .iter()
            .map(|&index| estimated_message_chars(&pruned[index]))
            .fold(0, usize::saturating_add);
        if prunable_chars >= settings.min_prunable_tool_chars {
            let placeholder = &settings.hard_clear.placeholder;
            for &index in &prunable {
                if ratio(total_chars) < settings.hard_clear_ratio {
                    break;
                }
                let Message::ToolResult { text, .. } = &pruned[index] else {
                    continue;
                };
                if text == placeholder {
                    continue;
                }
                total_chars =
                    total_chars - estimated_text_chars(text) + estimated_text_chars(placeholder);
                replace_tool_result_text(&mut pruned, index, placeholder.clone());
            }
        }
    }

    match pruned {
        Cow::Owned(pruned) => Some(pruned),
        Cow::Borrowed(_) => None,
    }
}

/// Index of the first protected message: the `keep_last_assistants`-th assistant message from
/// the end, `messages.len()` when `keep_last_assistants` is 0, `None` when there are fewer
/// assistant messages.
fn protected_tail_start(messages: &[Message], keep_last_assistants: usize) -> Option<usize> {
    if keep_last_assistants == 0 {
        return Some(messages.len());
    }
    messages
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, message)| matches!(message, Message::Assistant { .. }))
        .nth(keep_last_assistants - 1)
        .map(|(index, _)| index)
}

/// Sets the text of the tool result at `index`, copying the messages on the first change.
fn replace_tool_result_text(messages: &mut Cow<'_, [Message]>, index: usize, new_text: String) {
    if let Message::ToolResult { text, .. } = &mut messages.to_mut()[index] {
        *text = new_text;
    }
}

/// The soft-trimmed form of a tool result's text, or `None` when it is short enough or the head
/// and tail together would keep all of it.
fn soft_trim_text(text: &str, limits: &SoftTrim) -> Option<String> {
    let length = text.chars().count();
    if length <= limits.max_chars || limits.head_chars.saturating_add(limits.tail_chars) >= length {
        return None;
    }
    let head: String = text.chars().take(limits.head_chars).collect();
    let tail: String = text.chars().skip(length - limits.tail_chars).collect();
    Some(format!(
        "{head}\n...\n{tail}\n\n[Tool result trimmed: kept first {} chars and last {} chars of {length} chars.]",
        limits.head_chars, limits.tail_chars
    ))
}

/// Estimated size of one message in characters: its text, or for a tool call its JSON
/// arguments.
fn estimated_message_chars(message: &Message) -> usize {
    match message {
        Message::User { text } | Message::ToolResult { text, .. } => estimated_text_chars(text),
        Message::Assistant { content, .. } => content
            .iter()
            .map(|block| match block {
                AssistantBlock::Text { text } => estimated_text_chars(text),
                AssistantBlock::ToolCall(call) => estimated_text_chars(&call.input.to_string()),
                // Reasoning is resent only within its own tool-use turn, never pruned.
                AssistantBlock::Thinking { .. } => 0,
            })
            .fold(0, usize::saturating_add),
    }
}

/// Estimated size of a text in characters, a CJK character counting [`CJK_CHAR_WEIGHT`].
fn estimated_text_chars(text: &str) -> usize {
    text.chars()
        .map(|c| if is_cjk(c) { CJK_CHAR_WEIGHT } else { 1 })
        .fold(0, usize::saturating_add)
}

/// Whether `c` is a Chinese, Japanese or Korean character (ideographs, kana, hangul, their
/// punctuation and full-width forms), which tokenizers spend about a token each on.
fn is_cjk(c: char) -> bool {
    matches!(
        u32::from(c),
        0x1100..=0x11FF // Hangul Jamo
            | 0x2E80..=0x2FDF // CJK and Kangxi radicals
            | 0x3000..=0x303F // CJK symbols and punctuation
            | 0x3040..=0x30FF // Hiragana, Katakana
            | 0x3100..=0x31FF // Bopomofo, Hangul compatibility Jamo, Katakana extensions
            | 0x3400..=0x4DBF // CJK Extension A
            | 0x4E00..=0x9FFF // CJK Unified Ideographs
            | 0xAC00..=0xD7AF // Hangul syllables
            | 0xF900..=0xFAFF // CJK compatibility ideographs
            | 0xFF00..=0xFFEF // Half-width and full-width forms
            | 0x2_0000..=0x2_FA1F // CJK Extensions B-F, compatibility supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_base::transcript::StopReason;

    fn user(text: &str) -> Message {
        Message::User {
            text: text.to_owned(),
        }
    }

    fn assistant(text: &str) -> Message {
        Message::Assistant {
            content: vec![AssistantBlock::Text {
                text: text.to_owned(),
            }],
            stop_reason: StopReason::ToolUse,
        }
    }

    fn tool(name: &str, text: String) -> Message {
        Message::ToolResult {
            tool_call_id: format!("call-{name}-{}", text.len()),
            tool_name: name.to_owned(),
            text,
            is_error: false,
        }
    }

    fn text_of(message: &Message) -> &str {
        match message {
            Message::User { text } | Message::ToolResult { text, .. } => text,
            Message::Assistant { .. } => panic!("not a text message: {message:?}"),
        }
    }

    fn big(c: char, chars: usize) -> String {
        std::iter::repeat_n(c, chars).collect()
    }

    /// Every threshold at zero: whatever is prunable gets cleared.
    fn aggressive() -> EffectivePruning {
        EffectivePruning {
            soft_trim_ratio: 0.0,
            hard_clear_ratio: 0.0,
            min_prunable_tool_chars: 0,
            ..EffectivePruning::default()
        }
    }

    fn settings_from(json: &str) -> PruningSettings {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn spec_vector_41_mode_off_or_unset_is_disabled_and_ttl_parses() {
        assert_eq!(settings_from(r#"{"mode":"off"}"#).resolve(), None);
        assert_eq!(settings_from("{}").resolve(), None);
        assert_eq!(settings_from(r#"{"mode":"bogus"}"#).resolve(), None);
        let effective = settings_from(r#"{"mode":"cache-ttl","ttl":"1h"}"#)
            .resolve()
            .unwrap();
        assert_eq!(effective.ttl_ms, 3_600_000);
    }

    #[test]
    fn cache_ttl_mode_alone_gets_openclaw_defaults() {
        let effective = settings_from(r#"{"mode":"cache-ttl"}"#).resolve().unwrap();
        assert_eq!(effective, EffectivePruning::default());
        assert_eq!(effective.ttl_ms, 300_000);
        assert_eq!(effective.keep_last_assistants, 3);
        assert_eq!(effective.soft_trim_ratio, 0.3);
        assert_eq!(effective.hard_clear_ratio, 0.5);
        assert_eq!(effective.min_prunable_tool_chars, 50_000);
        assert_eq!(
            effective.soft_trim,
            SoftTrim {
                max_chars: 4_000,
                head_chars: 1_500,
                tail_chars: 1_500
            }
        );
        assert!(effective.hard_clear.enabled);
        assert_eq!(
            effective.hard_clear.placeholder,
            "[Old tool result content cleared]"
        );
        assert!(effective.tools.is_prunable("anything"));
    }

    #[test]
    fn an_unknown_key_is_an_error_not_a_silent_default() {
        let typo = serde_json::from_str::<PruningSettings>(r#"{"mode":"cache-ttl","tll":"1h"}"#)
            .expect_err("a typo must not leave the TTL at its default unnoticed");
        assert!(typo.to_string().contains("unknown field `tll`"), "{typo}");
    }

    #[test]
    fn configured_values_are_clamped_floored_and_trimmed() {
        let effective = settings_from(
            r#"{
                "mode": "cache-ttl",
                "ttl": "not a duration",
                "keepLastAssistants": -2,
                "softTrimRatio": 1.5,
                "hardClearRatio": -0.25,
                "minPrunableToolChars": 12.9,
                "softTrim": {"maxChars": 10.7, "headChars": 2, "tailChars": 3},
                "hardClear": {"enabled": false, "placeholder": "   "},
                "tools": {"deny": ["Exec"]}
            }"#,
        )
        .resolve()
        .unwrap();
        assert_eq!(effective.ttl_ms, DEFAULT_TTL_MS);
        assert_eq!(effective.keep_last_assistants, 0);
        assert_eq!(effective.soft_trim_ratio, 1.0);
        assert_eq!(effective.hard_clear_ratio, 0.0);
        assert_eq!(effective.min_prunable_tool_chars, 12);
        assert_eq!(
            effective.soft_trim,
            SoftTrim {
                max_chars: 10,
                head_chars: 2,
                tail_chars: 3
            }
        );
        assert!(!effective.hard_clear.enabled);
        assert_eq!(
            effective.hard_clear.placeholder,
            DEFAULT_HARD_CLEAR_PLACEHOLDER
        );
        assert!(!effective.tools.is_prunable("exec"));

        let custom =
            settings_from(r#"{"mode":"cache-ttl","hardClear":{"placeholder":"  [gone]  "}}"#)
                .resolve()
                .unwrap();
        assert_eq!(custom.hard_clear.placeholder, "[gone]");
        assert!(custom.hard_clear.enabled);
    }

    #[test]
    fn anthropic_defaults_fill_only_unset_fields() {
        let filled = PruningSettings::default().with_anthropic_defaults();
        assert_eq!(filled.mode.as_deref(), Some("cache-ttl"));
        assert_eq!(filled.resolve().unwrap().ttl_ms, 3_600_000);

        let kept = settings_from(r#"{"mode":"off","ttl":"10m"}"#).with_anthropic_defaults();
        assert_eq!(kept.mode.as_deref(), Some("off"));
        assert_eq!(kept.ttl.as_deref(), Some("10m"));
        assert_eq!(kept.resolve(), None);
    }

    #[test]
    fn ttl_durations_default_to_minutes() {
        let cases = [
            ("5m", Some(300_000)),
            ("1h", Some(3_600_000)),
            ("30s", Some(30_000)),
            ("500ms", Some(500)),
            ("2d", Some(172_800_000)),
            ("10", Some(600_000)),
            ("1.5h", Some(5_400_000)),
            (" 2 H ", Some(7_200_000)),
            ("0", Some(0)),
            ("", None),
            ("soon", None),
            ("-5m", None),
            ("5x", None),
            ("5m30s", None),
            ("1.", None),
            (".5m", None),
            ("1.2.3m", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_ttl_ms(text), expected, "ttl {text:?}");
        }
    }

    #[test]
    fn spec_vector_42_the_last_three_assistant_turns_are_protected() {
        let messages = vec![
            user("u1"),
            assistant("a1"),
            tool("exec", big('x', 20_000)),
            user("u2"),
            assistant("a2"),
            tool("exec", big('y', 20_000)),
            user("u3"),
            assistant("a3"),
            tool("exec", big('z', 20_000)),
            user("u4"),
            assistant("a4"),
            tool("exec", big('w', 20_000)),
        ];
        let settings = EffectivePruning {
            keep_last_assistants: 3,
            ..aggressive()
        };
        let pruned = prune_messages(&messages, 1_000, &settings).unwrap();
        assert_eq!(text_of(&pruned[2]), DEFAULT_HARD_CLEAR_PLACEHOLDER);
        for (index, (before, after)) in messages.iter().zip(&pruned).enumerate() {
            if index != 2 {
                assert_eq!(before, after, "message {index} should be intact");
            }
        }
    }

    #[test]
    fn spec_vector_43_bootstrap_reads_before_the_first_user_message_are_protected() {
        let messages = vec![
            assistant("bootstrap"),
            tool("read", big('s', 20_000)),
            assistant("ready"),
            user("u1"),
            tool("exec", big('x', 20_000)),
        ];
        // The vector protects no assistant turn and lets hard clear start at once; with the
        // default keepLastAssistants (3) these two assistants would block all pruning.
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            min_prunable_tool_chars: 0,
            ..EffectivePruning::default()
        };
        let pruned = prune_messages(&messages, 1_000, &settings).unwrap();
        assert_eq!(pruned[1], messages[1]);
        assert_eq!(text_of(&pruned[4]), DEFAULT_HARD_CLEAR_PLACEHOLDER);
        assert_eq!(pruned[..4], messages[..4]);
    }

    #[test]
    fn hard_clear_waits_for_enough_prunable_chars() {
        let messages = vec![
            assistant("bootstrap"),
            tool("read", big('s', 20_000)),
            user("u1"),
            tool("exec", big('x', 20_000)),
        ];
        // Defaults, but nothing protected: the 20k result is soft-trimmed to about 3k, which
        // is below minPrunableToolChars (50k), so it is not cleared.
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            ..EffectivePruning::default()
        };
        let pruned = prune_messages(&messages, 1_000, &settings).unwrap();
        let expected_tail = format!(
            "{}\n...\n{}\n\n[Tool result trimmed: kept first 1500 chars and last 1500 chars of 20000 chars.]",
            big('x', 1_500),
            big('x', 1_500)
        );
        assert_eq!(text_of(&pruned[3]), expected_tail);
        assert_eq!(pruned[1], messages[1]);
    }

    #[test]
    fn spec_vector_44_deny_wins_over_allow_and_allow_limits() {
        let filter = ToolFilter::new(&["ex*"], &["exec"]);
        assert!(!filter.is_prunable("Exec"), "deny wins, ignoring case");
        assert!(!filter.is_prunable("Browser"), "not allowed");
        assert!(filter.is_prunable("exa_search"));
        assert!(filter.is_prunable(" EXPORT "));

        let messages = vec![
            user("u1"),
            assistant("a1"),
            tool("Exec", big('e', 10_000)),
            tool("Browser", big('b', 10_000)),
            tool("exa_search", big('s', 10_000)),
        ];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            tools: filter,
            ..aggressive()
        };
        let pruned = prune_messages(&messages, 1_000, &settings).unwrap();
        assert_eq!(pruned[2], messages[2]);
        assert_eq!(pruned[3], messages[3]);
        assert_eq!(text_of(&pruned[4]), DEFAULT_HARD_CLEAR_PLACEHOLDER);
    }

    #[test]
    fn tool_globs_match_whole_names() {
        let cases = [
            ("*", "anything", true),
            ("exec", "exec", true),
            ("exec", "exec2", false),
            ("ex*", "ex", true),
            ("*search", "web_search", true),
            ("*search", "search_web", false),
            ("web_*_v2", "web_fetch_v2", true),
            ("web_*_v2", "web_fetch_v3", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "acb", false),
            ("a*a", "a", false),
            ("mcp.*", "mcp.fs", true),
            ("mcp.*", "mcpxfs", false),
        ];
        for (pattern, name, expected) in cases {
            assert_eq!(
                wildcard_matches(pattern, name),
                expected,
                "{pattern} vs {name}"
            );
        }
        let filter = ToolFilter::new(&["  ", "Web_*"], &[]);
        assert!(filter.is_prunable("web_fetch"));
        assert!(!filter.is_prunable("exec"));
    }

    #[test]
    fn spec_vector_45_soft_trim_keeps_head_and_tail_with_the_note() {
        let limits = SoftTrim {
            max_chars: 10,
            head_chars: 6,
            tail_chars: 6,
        };
        let text = "abcdefghij".repeat(1_000);
        let trimmed = soft_trim_text(&text, &limits).unwrap();
        assert!(trimmed.contains("abcdef"));
        assert!(trimmed.contains("efghij"));
        assert!(trimmed.contains(
            "[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
        ));
        assert_eq!(
            trimmed,
            "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
        );
    }

    #[test]
    fn spec_vector_46_adapted_head_and_tail_cross_a_line_break() {
        // OpenClaw's vector has two text blocks joined by "\n"; a clawless tool result is one
        // text, so the blocks are one text with the newline between them.
        let limits = SoftTrim {
            max_chars: 5,
            head_chars: 7,
            tail_chars: 3,
        };
        let trimmed = soft_trim_text("AAAAA\nBBBBB", &limits).unwrap();
        assert!(trimmed.contains("AAAAA\nB"));
        assert!(trimmed.contains("BBB"));
        assert_eq!(
            trimmed,
            "AAAAA\nB\n...\nBBB\n\n[Tool result trimmed: kept first 7 chars and last 3 chars of 11 chars.]"
        );
    }

    #[test]
    fn soft_trim_leaves_short_results_and_counts_characters() {
        let limits = SoftTrim {
            max_chars: 10,
            head_chars: 6,
            tail_chars: 6,
        };
        assert_eq!(soft_trim_text("0123456789", &limits), None, "not over max");
        assert_eq!(
            soft_trim_text("0123456789ab", &limits),
            None,
            "head+tail keep all"
        );
        let trimmed = soft_trim_text(&"é".repeat(13), &limits).unwrap();
        assert!(trimmed.starts_with("éééééé\n...\néééééé\n\n"));
        assert!(trimmed.ends_with("of 13 chars.]"));
    }

    #[test]
    fn soft_trim_through_prune_keeps_the_tool_result_identity() {
        let messages = vec![
            user("u1"),
            assistant("a1"),
            Message::ToolResult {
                tool_call_id: "call-7".to_owned(),
                tool_name: "exec".to_owned(),
                text: "abcdefghij".repeat(1_000),
                is_error: true,
            },
        ];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            soft_trim: SoftTrim {
                max_chars: 10,
                head_chars: 6,
                tail_chars: 6,
            },
            hard_clear: HardClear {
                enabled: false,
                ..HardClear::default()
            },
            ..aggressive()
        };
        let pruned = prune_messages(&messages, 1_000, &settings).unwrap();
        assert_eq!(
            pruned[2],
            Message::ToolResult {
                tool_call_id: "call-7".to_owned(),
                tool_name: "exec".to_owned(),
                text: "abcdef\n...\nefghij\n\n[Tool result trimmed: kept first 6 chars and last 6 chars of 10000 chars.]"
                    .to_owned(),
                is_error: true,
            }
        );
        assert_eq!(pruned[..2], messages[..2]);
    }

    #[test]
    fn spec_vector_47_adapted_the_gate_opens_after_the_ttl_and_closes_after_pruning() {
        let ttl_ms = 300_000;
        let now_ms = 1_700_000_000_000;
        let last_call_ms = now_ms - ttl_ms - 1_000;
        assert!(pruning_due(now_ms, Some(last_call_ms), ttl_ms));

        let messages = vec![user("u1"), assistant("a1"), tool("exec", big('x', 20_000))];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            ..aggressive()
        };
        let pruned = prune_messages(&messages, 1_000, &settings);
        assert!(pruned.is_some(), "the due call prunes");
        // The pruned call becomes the last model call: an immediate next call is not due.
        let last_call_ms = now_ms;
        assert!(!pruning_due(now_ms, Some(last_call_ms), ttl_ms));
        assert!(!pruning_due(now_ms + 1_000, Some(last_call_ms), ttl_ms));
    }

    #[test]
    fn the_gate_needs_a_previous_call_a_positive_ttl_and_the_full_ttl() {
        let now_ms = 1_000_000;
        assert!(!pruning_due(now_ms, None, 300_000));
        assert!(pruning_due(now_ms, Some(now_ms - 300_000), 300_000));
        assert!(!pruning_due(now_ms, Some(now_ms - 299_999), 300_000));
        assert!(!pruning_due(now_ms, Some(0), 0));
        assert!(!pruning_due(now_ms, Some(now_ms + 5_000), 300_000));
    }

    #[test]
    fn spec_vector_48_a_small_share_of_the_window_is_left_alone() {
        let messages = vec![user("u1"), assistant("a1"), tool("exec", big('x', 50_000))];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            ..EffectivePruning::default()
        };
        // About 50k characters in an 800k-character window: ratio 0.0625 < 0.3.
        assert_eq!(prune_messages(&messages, 200_000, &settings), None);
        // The same messages in a 20k-token window (ratio 0.625) are pruned.
        assert!(prune_messages(&messages, 20_000, &settings).is_some());
    }

    #[test]
    fn too_few_assistants_no_user_or_no_window_prunes_nothing() {
        let settings = aggressive();
        let two_assistants = vec![
            user("u1"),
            assistant("a1"),
            tool("exec", big('x', 20_000)),
            assistant("a2"),
        ];
        assert_eq!(prune_messages(&two_assistants, 1_000, &settings), None);

        let no_user = vec![
            assistant("a1"),
            tool("exec", big('x', 20_000)),
            assistant("a2"),
            assistant("a3"),
            assistant("a4"),
        ];
        assert_eq!(prune_messages(&no_user, 1_000, &settings), None);

        let nothing_protected = EffectivePruning {
            keep_last_assistants: 0,
            ..aggressive()
        };
        assert_eq!(prune_messages(&two_assistants, 0, &nothing_protected), None);
        assert!(prune_messages(&two_assistants, 1_000, &nothing_protected).is_some());
    }

    #[test]
    fn hard_clear_goes_oldest_first_and_stops_below_the_ratio() {
        let messages = vec![
            user("go"),
            tool("exec", big('1', 20_000)),
            tool("exec", big('2', 20_000)),
            tool("exec", big('3', 20_000)),
            assistant("done"),
        ];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            min_prunable_tool_chars: 0,
            soft_trim: SoftTrim {
                max_chars: usize::MAX,
                ..SoftTrim::default()
            },
            ..EffectivePruning::default()
        };
        // 60,006 chars in an 80,000-char window (0.75): clearing the first result leaves 0.5005,
        // still at least 0.5, so the second goes too (0.25) and the third stays.
        let pruned = prune_messages(&messages, 20_000, &settings).unwrap();
        assert_eq!(text_of(&pruned[1]), DEFAULT_HARD_CLEAR_PLACEHOLDER);
        assert_eq!(text_of(&pruned[2]), DEFAULT_HARD_CLEAR_PLACEHOLDER);
        assert_eq!(pruned[3], messages[3]);
    }

    #[test]
    fn already_cleared_results_do_not_count_as_a_change() {
        let messages = vec![
            user("u1"),
            assistant("a1"),
            tool("exec", DEFAULT_HARD_CLEAR_PLACEHOLDER.to_owned()),
        ];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            ..aggressive()
        };
        assert_eq!(prune_messages(&messages, 1, &settings), None);
    }

    #[test]
    fn cjk_text_weighs_four_characters_each() {
        assert_eq!(estimated_text_chars("abc"), 3);
        assert_eq!(estimated_text_chars("上下文"), 12);
        assert_eq!(estimated_text_chars("かなカナ한글"), 24);
        assert_eq!(estimated_text_chars("ab上"), 6);

        let messages = vec![user("u"), assistant("a"), tool("exec", big('上', 1_000))];
        let settings = EffectivePruning {
            keep_last_assistants: 0,
            soft_trim_ratio: 0.3,
            hard_clear_ratio: 0.3,
            min_prunable_tool_chars: 0,
            ..EffectivePruning::default()
        };
        // Weighted, 4,002 chars of a 12,000-char window (0.33); unweighted it would be 0.08.
        let pruned = prune_messages(&messages, 3_000, &settings).unwrap();
        assert_eq!(text_of(&pruned[2]), DEFAULT_HARD_CLEAR_PLACEHOLDER);
    }

    #[test]
    fn tool_call_arguments_count_toward_the_estimate() {
        let call = Message::Assistant {
            content: vec![AssistantBlock::ToolCall(
                clawless_base::transcript::ToolCall {
                    id: "call-1".to_owned(),
                    name: "exec".to_owned(),
                    input: serde_json::json!({"command": "ls"}),
                },
            )],
            stop_reason: StopReason::ToolUse,
        };
        assert_eq!(estimated_message_chars(&call), r#"{"command":"ls"}"#.len());
    }
}
