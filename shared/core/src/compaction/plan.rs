//! The numbers and decisions of compaction: the budget a context window allows (reserve,
//! kept tail, memory-flush threshold, summary size, all scaled with the window), token
//! estimates, whether a request must be compacted first, where the cut goes, and the
//! trimming fallback used for one call when no summary can be had.
//!
//! Cuts are made only at the start of a turn (the inbound message that opened it), so a tool
//! call is never separated from its result, and the turn in progress is always kept whole:
//! the turn engine derives its next step from that turn's steps.

use serde::Deserialize;

use crate::tool_results::{CHARS_PER_TOKEN, estimate_message_chars};
use crate::turn::state::{SessionState, StepBody};
use clawless_base::transcript::Message;

/// The context window assumed when neither the model entry nor the agent names one.
pub const DEFAULT_CONTEXT_WINDOW: u64 = 200_000;

/// The reserve OpenClaw keeps at least (`reserveTokensFloor`), for windows large enough.
pub const DEFAULT_RESERVE_FLOOR: u64 = 20_000;

/// The kept-tail size OpenClaw uses (`keepRecentTokens`), for windows large enough.
pub const DEFAULT_KEEP_RECENT: u64 = 20_000;

/// The memory flush's distance below the compaction threshold (`softThresholdTokens`).
pub const DEFAULT_FLUSH_SOFT_THRESHOLD: u64 = 4_000;

/// Whether compaction runs on its own when `enabled` is unset.
pub const DEFAULT_AUTO_COMPACTION: bool = true;

/// Whether the memory flush runs when `memoryFlush.enabled` is unset.
pub const DEFAULT_MEMORY_FLUSH: bool = true;

/// The reserve asked for when `reserveTokens` is unset (then raised to the floor).
pub const DEFAULT_RESERVE_TOKENS: u64 = 16_384;

/// The shortest length target a summary is given, in tokens (see [`ContextBudget::settling`]).
pub const MIN_SUMMARY_TOKENS: u64 = 256;

/// Better summaries the quality check may ask for when `qualityGuardRetries` is unset.
pub const DEFAULT_QUALITY_GUARD_RETRIES: u32 = 1;

/// The most better summaries the quality check may ask for, whatever is configured.
pub const MAX_QUALITY_GUARD_RETRIES: u32 = 3;

/// `agents.defaults.compaction` in `clawless.yaml`. Every field is optional; see
/// [`ContextBudget::new`] for how the defaults scale with the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionConfig {
    /// Whether the conversation is summarised automatically when a request would cross the
    /// window minus the reserve. `false` leaves only overflow recovery and `/compact`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_AUTO_COMPACTION)))]
    pub enabled: Option<bool>,
    /// Tokens kept free for the answer (and estimation error): at least
    /// `reserveTokensFloor`, at most a quarter of the window.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RESERVE_TOKENS)))]
    pub reserve_tokens: Option<u64>,
    /// The smallest reserve, for windows large enough to afford it (the reserve is still at
    /// most a quarter of the window).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_RESERVE_FLOOR)))]
    pub reserve_tokens_floor: Option<u64>,
    /// Recent tokens kept verbatim after a compaction, at most an eighth of the window; 0
    /// means the default.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_KEEP_RECENT)))]
    pub keep_recent_tokens: Option<u64>,
    /// Instructions added to every summary request (`/compact <text>` replaces them for
    /// that one compaction); unset, none.
    #[serde(default)]
    pub custom_instructions: Option<String>,
    /// The silent pre-compaction turn in which the model may save durable notes to
    /// `memory/YYYY-MM-DD.md`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub memory_flush: MemoryFlushConfig,
    /// How many better summaries the quality check may ask for when a summary misses its
    /// sections (at most 3).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_QUALITY_GUARD_RETRIES)))]
    pub quality_guard_retries: Option<u32>,
}

/// `agents.defaults.compaction.memoryFlush`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemoryFlushConfig {
    /// Whether the memory flush runs before an automatic compaction (once per compaction
    /// cycle; skipped where the tool policy denies `write`).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_MEMORY_FLUSH)))]
    pub enabled: Option<bool>,
    /// How far below the compaction threshold the flush runs, in tokens (at most a
    /// twentieth of the window).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_FLUSH_SOFT_THRESHOLD)))]
    pub soft_threshold_tokens: Option<u64>,
}

/// What one context window allows, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// The model's context window.
    pub window: u64,
    /// Kept free for the answer: a request never goes past `window - reserve`.
    pub reserve: u64,
    /// At least this much of the recent conversation is kept verbatim by a compaction.
    pub keep_recent: u64,
    /// From this estimate on, the memory flush runs (once per compaction cycle).
    pub flush_threshold: u64,
    /// Output limit of a summary call.
    pub summary_max_tokens: u64,
    /// Compaction when the threshold is crossed (overflow recovery is always on).
    pub auto_compaction: bool,
    /// The memory flush before an automatic compaction.
    pub memory_flush: bool,
    /// Better summaries the quality check may ask for.
    pub quality_retries: u32,
}

impl ContextBudget {
    /// The budget of a `window`-token model under `config`.
    ///
    /// OpenClaw's numbers hold for large windows (200k: reserve 20 000, kept tail 20 000,
    /// flush at 176 000, summaries up to 16 000 tokens). They scale down with the window so
    /// that small local models work too: the reserve is at most a quarter of the window, the
    /// kept tail at most an eighth, the flush distance at most a twentieth, and a summary at
    /// most a tenth. Windows of 8k tokens and less are accepted.
    pub fn new(window: u64, config: &CompactionConfig) -> Self {
        let window = window.max(1);
        let floor = config.reserve_tokens_floor.unwrap_or(DEFAULT_RESERVE_FLOOR);
        let reserve = config
            .reserve_tokens
            .unwrap_or(DEFAULT_RESERVE_TOKENS)
            .max(floor)
            .min(window / 4)
            .max(1);
        let keep_recent = config
            .keep_recent_tokens
            .filter(|tokens| *tokens > 0)
            .unwrap_or(DEFAULT_KEEP_RECENT)
            .min(window / 8);
        let soft = config
            .memory_flush
            .soft_threshold_tokens
            .unwrap_or(DEFAULT_FLUSH_SOFT_THRESHOLD)
            .min(window / 20);
        Self {
            window,
            reserve,
            keep_recent,
            flush_threshold: window.saturating_sub(reserve).saturating_sub(soft),
            summary_max_tokens: (reserve * 4 / 5).min(window / 10).max(256),
            auto_compaction: config.enabled.unwrap_or(DEFAULT_AUTO_COMPACTION),
            memory_flush: config.memory_flush.enabled.unwrap_or(DEFAULT_MEMORY_FLUSH),
            quality_retries: config
                .quality_guard_retries
                .unwrap_or(DEFAULT_QUALITY_GUARD_RETRIES)
                .min(MAX_QUALITY_GUARD_RETRIES),
        }
    }

    /// The most tokens a request may hold: `window - reserve`.
    pub fn prompt_limit(&self) -> u64 {
        self.window.saturating_sub(self.reserve)
    }

    /// The budget an automatic compaction plans with when every request carries `fixed`
    /// tokens: its kept tail and then its summary's length target shrink until the request
    /// after it leaves at least a quarter of the window free below the compaction threshold
    /// (so the next turns do not compact again at once). The summary keeps at least
    /// [`MIN_SUMMARY_TOKENS`]; with the fixed part at most 40% of the window, that always fits.
    pub fn settling(&self, fixed: u64) -> Self {
        let room = self
            .prompt_limit()
            .saturating_sub(self.window / 4)
            .saturating_sub(fixed);
        let mut settled = *self;
        if settled.keep_recent + settled.summary_max_tokens > room {
            settled.keep_recent = room.saturating_sub(settled.summary_max_tokens);
        }
        if settled.keep_recent + settled.summary_max_tokens > room {
            settled.summary_max_tokens = room.max(MIN_SUMMARY_TOKENS).min(self.summary_max_tokens);
        }
        settled
    }

    /// The same budget for a smaller window, keeping the configured switches.
    pub fn shrunk_to(&self, window: u64, config: &CompactionConfig) -> Self {
        let mut budget = Self::new(window.min(self.window), config);
        budget.auto_compaction = self.auto_compaction;
        budget
    }
}

/// Estimated tokens of a text: 4 characters a token, rounded up.
pub fn text_tokens(text: &str) -> u64 {
    chars_to_tokens(text.chars().count())
}

fn chars_to_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(CHARS_PER_TOKEN as u64)
}

/// Estimated tokens of messages (tool output counts double: it is dense).
pub fn messages_tokens(messages: &[Message]) -> u64 {
    messages
        .iter()
        .map(|message| chars_to_tokens(estimate_message_chars(message)))
        .sum()
}

/// How a request measures up against its budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextCheck {
    /// It fits, under the memory-flush threshold.
    Fits,
    /// It fits, but the memory flush is due.
    FlushDue,
    /// It crosses the compaction threshold: compact first.
    CompactFirst,
}

/// Where a request of `estimate` tokens (system prompt, tools and messages) stands.
pub fn check_request(estimate: u64, budget: &ContextBudget) -> ContextCheck {
    if estimate > budget.prompt_limit() {
        ContextCheck::CompactFirst
    } else if estimate >= budget.flush_threshold {
        ContextCheck::FlushDue
    } else {
        ContextCheck::Fits
    }
}

/// What a compaction summarises and keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPlan {
    /// Steps from this `seq` on stay verbatim; everything before it in the live view is
    /// summarised.
    pub first_kept_seq: u64,
    /// The conversation to summarise (from the live view's start to the cut).
    pub to_summarize: Vec<Message>,
    /// The summary in force, merged into the new one.
    pub previous_summary: Option<String>,
    /// Estimated tokens of the live view before the compaction.
    pub tokens_before: u64,
    /// Estimated tokens of the kept tail.
    pub tokens_kept: u64,
}

/// Plans a compaction of the live view: the cut is the latest turn start that keeps at least
/// `budget.keep_recent` tokens (or the current turn's start, whatever its size), and
/// everything between the view's start and the cut is summarised. `None` when nothing is
/// left to summarise (the view is a single turn, or the latest step is already a compaction).
pub fn plan_compaction(state: &SessionState, budget: &ContextBudget) -> Option<CompactionPlan> {
    if matches!(
        state.steps.last().map(|step| &step.body),
        Some(StepBody::Compaction { .. })
    ) {
        return None;
    }
    let view = state.view();
    let steps = view.steps;
    let turn_starts: Vec<usize> = steps
        .iter()
        .enumerate()
        .filter(|(_, step)| matches!(step.body, StepBody::Inbound { .. }))
        .map(|(index, _)| index)
        .collect();
    let current_start = *turn_starts.last()?;
    let step_tokens: Vec<u64> = steps
        .iter()
        .map(|step| messages_tokens(&state.step_message(step).into_iter().collect::<Vec<_>>()))
        .collect();
    // Walk back from the newest step until the kept tail reaches its size, then cut at the
    // first turn start at or after that point (never after the current turn's start).
    let mut suffix = 0;
    let mut crossing = 0;
    for (index, tokens) in step_tokens.iter().enumerate().rev() {
        suffix += tokens;
        if suffix >= budget.keep_recent {
            crossing = index;
            break;
        }
    }
    let cut = turn_starts
        .iter()
        .copied()
        .find(|start| *start >= crossing)
        .unwrap_or(current_start)
        .min(current_start);
    let kept: u64 = step_tokens[cut..].iter().sum();
    let summarized = &steps[..cut];
    let to_summarize: Vec<Message> = summarized
        .iter()
        .filter_map(|step| state.step_message(step))
        .collect();
    if to_summarize.is_empty() {
        return None;
    }
    let summary_tokens = view.summary.map_or(0, text_tokens);
    Some(CompactionPlan {
        first_kept_seq: steps[cut].seq,
        to_summarize,
        previous_summary: view.summary.map(str::to_owned),
        tokens_before: summary_tokens + step_tokens.iter().sum::<u64>(),
        tokens_kept: kept,
    })
}

/// The trimming fallback: drops whole turns from the front of `messages` (a turn starts at a
/// user message) until `fixed + messages` fits `limit`, for one call only; the stored history
/// is untouched. The last turn is never dropped. `None` when even the last turn alone does not
/// fit: the message itself is too large for the window.
pub fn trim_oldest_turns(messages: &[Message], fixed: u64, limit: u64) -> Option<Vec<Message>> {
    let tokens: Vec<u64> = messages
        .iter()
        .map(|message| messages_tokens(std::slice::from_ref(message)))
        .collect();
    let mut total: u64 = fixed + tokens.iter().sum::<u64>();
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, message)| matches!(message, Message::User { .. }))
        .map(|(index, _)| index)
        .collect();
    let mut from = 0;
    for &start in &starts {
        if total <= limit {
            break;
        }
        total -= tokens[from..start].iter().sum::<u64>();
        from = start;
    }
    (total <= limit).then(|| messages[from..].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settling_budget_leaves_a_quarter_of_the_window_free_after_a_compaction() {
        let config = CompactionConfig::default();
        for (window, fixed) in [
            (8_000, 3_200),
            (12_000, 3_700),
            (16_000, 6_000),
            (32_000, 4_000),
        ] {
            let budget = ContextBudget::new(window, &config);
            let settled = budget.settling(fixed);
            let after = fixed + settled.keep_recent + settled.summary_max_tokens;
            assert!(
                after + window / 4 <= budget.prompt_limit(),
                "{window}: {after} after, limit {}",
                budget.prompt_limit()
            );
            assert!(settled.keep_recent <= budget.keep_recent);
            assert!(settled.summary_max_tokens >= MIN_SUMMARY_TOKENS);
        }
        // The kept tail shrinks first: at 8k with 3,200 fixed, 800 tokens are left for the
        // summary (800) and the tail (none).
        let settled = ContextBudget::new(8_000, &config).settling(3_200);
        assert_eq!((settled.keep_recent, settled.summary_max_tokens), (0, 800));
        // A large window with a small prompt is left as it is.
        let large = ContextBudget::new(200_000, &config);
        assert_eq!(large.settling(4_000), large);
    }

    #[test]
    fn large_windows_get_openclaws_numbers() {
        let budget = ContextBudget::new(200_000, &CompactionConfig::default());
        assert_eq!(budget.reserve, 20_000);
        assert_eq!(budget.keep_recent, 20_000);
        assert_eq!(budget.flush_threshold, 176_000);
        assert_eq!(budget.summary_max_tokens, 16_000);
        assert_eq!(budget.prompt_limit(), 180_000);
        assert_eq!(check_request(180_000, &budget), ContextCheck::FlushDue);
        assert_eq!(check_request(180_001, &budget), ContextCheck::CompactFirst);
        assert_eq!(check_request(175_999, &budget), ContextCheck::Fits);
    }

    #[test]
    fn a_configured_reserve_below_the_floor_takes_the_floor() {
        let config = CompactionConfig {
            reserve_tokens: Some(10_000),
            ..CompactionConfig::default()
        };
        assert_eq!(ContextBudget::new(200_000, &config).reserve, 20_000);
        let config = CompactionConfig {
            reserve_tokens_floor: Some(0),
            ..CompactionConfig::default()
        };
        assert_eq!(ContextBudget::new(200_000, &config).reserve, 16_384);
    }

    #[test]
    fn small_windows_scale_down_and_still_leave_room() {
        for window in [8_000, 12_000, 16_000] {
            let budget = ContextBudget::new(window, &CompactionConfig::default());
            assert_eq!(budget.reserve, window / 4, "reserve of {window}");
            assert_eq!(budget.keep_recent, window / 8, "kept tail of {window}");
            assert!(budget.flush_threshold < budget.prompt_limit());
            assert!(budget.summary_max_tokens + budget.keep_recent < budget.prompt_limit());
        }
    }

    fn user(text: &str) -> Message {
        Message::User { text: text.into() }
    }

    fn assistant(text: &str) -> Message {
        Message::Assistant {
            content: vec![clawless_base::transcript::AssistantBlock::Text { text: text.into() }],
            stop_reason: Default::default(),
        }
    }

    #[test]
    fn trimming_drops_whole_old_turns_and_never_the_last() {
        let messages = vec![
            user(&"a".repeat(400)),
            assistant(&"b".repeat(400)),
            user(&"c".repeat(400)),
            assistant(&"d".repeat(400)),
            user(&"e".repeat(400)),
        ];
        let trimmed = trim_oldest_turns(&messages, 100, 100 + 300).expect("fits");
        assert_eq!(trimmed, messages[2..].to_vec());
        let trimmed = trim_oldest_turns(&messages, 0, 10_000).expect("fits");
        assert_eq!(trimmed.len(), 5, "nothing dropped when it fits");
        assert_eq!(
            trim_oldest_turns(&messages, 0, 99),
            None,
            "last turn too large"
        );
    }
}
