//! Thinking levels (how hard a model reasons before answering) and reasoning visibility
//! (whether that reasoning is shown in the chat): the levels, the spellings people type for
//! them, and which models take `xhigh`. Providers map a [`ThinkingLevel`] to their own wire
//! fields (`clawless-llm`); the directives that set them live in `clawless-core`.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How much a model thinks before answering.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    /// No thinking.
    #[default]
    Off,
    /// The smallest budget.
    Minimal,
    /// A small budget.
    Low,
    /// A medium budget.
    Medium,
    /// A large budget.
    High,
    /// The largest effort, for models that advertise it (else treated as `high`).
    Xhigh,
    /// The model decides (Claude 4.6 adaptive thinking; `medium` elsewhere).
    Adaptive,
}

impl ThinkingLevel {
    /// Every level, in the order they are offered.
    pub const ALL: [Self; 7] = [
        Self::Off,
        Self::Minimal,
        Self::Low,
        Self::Medium,
        Self::High,
        Self::Xhigh,
        Self::Adaptive,
    ];

    /// The canonical name: `off`, `minimal`, `low`, `medium`, `high`, `xhigh`, `adaptive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Minimal => "minimal",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Xhigh => "xhigh",
            Self::Adaptive => "adaptive",
        }
    }

    /// The level a typed spelling stands for (case-insensitive): the canonical names plus
    /// `on`/`enable(d)` (low), `min`/`think` (minimal), `thinkhard` (low), `mid`/`med`/
    /// `thinkharder`/`harder` (medium), `ultra`/`ultrathink`/`thinkhardest`/`highest`/`max`
    /// (high), `extrahigh` (xhigh) and `auto` (adaptive); spaces, `_` and `-` are ignored.
    /// `None` for anything else.
    pub fn parse(raw: &str) -> Option<Self> {
        let lowered = raw.trim().to_lowercase();
        let level = match lowered.as_str() {
            "off" => Self::Off,
            "on" | "enable" | "enabled" => Self::Low,
            "min" | "minimal" | "think" => Self::Minimal,
            "low" | "thinkhard" | "think-hard" | "think_hard" => Self::Low,
            "mid" | "med" | "medium" | "thinkharder" | "think-harder" | "harder" => Self::Medium,
            "high" | "ultra" | "ultrathink" | "thinkhardest" | "highest" | "max" => Self::High,
            _ => {
                let squashed: String = lowered
                    .chars()
                    .filter(|c| !matches!(c, ' ' | '_' | '-'))
                    .collect();
                match squashed.as_str() {
                    "xhigh" | "extrahigh" => Self::Xhigh,
                    "adaptive" | "auto" => Self::Adaptive,
                    _ => return None,
                }
            }
        };
        Some(level)
    }

    /// True for `off` (for serde's `skip_serializing_if`).
    pub fn is_off(&self) -> bool {
        *self == Self::Off
    }

    /// True for every level but `off`.
    pub fn is_on(self) -> bool {
        self != Self::Off
    }

    /// The level a model can take: `xhigh` becomes `high` on a model that does not
    /// advertise it (see [`supports_xhigh`]).
    pub fn for_model(self, model_ref: &str) -> Self {
        if self == Self::Xhigh && !supports_xhigh(model_ref) {
            Self::High
        } else {
            self
        }
    }
}

impl fmt::Display for ThinkingLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a model (`provider/model`) advertises `xhigh` reasoning: OpenAI's `gpt-5.2`,
/// `gpt-5.3` and `gpt-5.4` families (wherever they are served from).
pub fn supports_xhigh(model_ref: &str) -> bool {
    let model = model_ref
        .rsplit_once('/')
        .map_or(model_ref, |(_, model)| model)
        .to_ascii_lowercase();
    ["gpt-5.2", "gpt-5.3", "gpt-5.4"]
        .iter()
        .any(|family| model.starts_with(family))
}

/// The levels offered for a model, comma-separated: `off, minimal, low, medium, high,
/// adaptive`, with `xhigh` before `adaptive` where the model takes it.
pub fn offered_levels(model_ref: &str) -> String {
    let xhigh = supports_xhigh(model_ref);
    let levels: Vec<&str> = ThinkingLevel::ALL
        .iter()
        .filter(|level| **level != ThinkingLevel::Xhigh || xhigh)
        .map(|level| level.as_str())
        .collect();
    levels.join(", ")
}

/// Whether the model's reasoning is shown in the chat.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum ReasoningLevel {
    /// Hidden.
    #[default]
    Off,
    /// Sent as a separate `Reasoning:` message before the answer.
    On,
    /// Shown live where a channel can edit a draft; where none can (every clawless channel
    /// today), it behaves as `on`.
    Stream,
}

impl ReasoningLevel {
    /// `off`, `on` or `stream`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::On => "on",
            Self::Stream => "stream",
        }
    }

    /// The level a typed spelling stands for (case-insensitive): `off` (`false`, `no`, `0`,
    /// `hide`, `hidden`, `disable(d)`), `on` (`true`, `yes`, `1`, `show`, `visible`,
    /// `enable(d)`), `stream` (`streaming`, `draft`, `live`). `None` for anything else.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_lowercase().as_str() {
            "off" | "false" | "no" | "0" | "hide" | "hidden" | "disable" | "disabled" => {
                Some(Self::Off)
            }
            "on" | "true" | "yes" | "1" | "show" | "visible" | "enable" | "enabled" => {
                Some(Self::On)
            }
            "stream" | "streaming" | "draft" | "live" => Some(Self::Stream),
            _ => None,
        }
    }

    /// True when reasoning is sent to the chat (`on` or `stream`).
    pub fn is_visible(self) -> bool {
        self != Self::Off
    }
}

impl fmt::Display for ReasoningLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_the_spec_maps_to_its_level() {
        let cases = [
            ("off", ThinkingLevel::Off),
            ("ON", ThinkingLevel::Low),
            ("enabled", ThinkingLevel::Low),
            ("min", ThinkingLevel::Minimal),
            ("think", ThinkingLevel::Minimal),
            ("think-hard", ThinkingLevel::Low),
            ("med", ThinkingLevel::Medium),
            ("harder", ThinkingLevel::Medium),
            ("ultrathink", ThinkingLevel::High),
            ("max", ThinkingLevel::High),
            ("x-high", ThinkingLevel::Xhigh),
            ("extra_high", ThinkingLevel::Xhigh),
            ("auto", ThinkingLevel::Adaptive),
        ];
        for (raw, level) in cases {
            assert_eq!(ThinkingLevel::parse(raw), Some(level), "{raw}");
        }
        assert_eq!(ThinkingLevel::parse("hardest"), None);
        assert_eq!(ThinkingLevel::parse(""), None);
    }

    #[test]
    fn xhigh_is_offered_only_where_advertised() {
        assert!(supports_xhigh("openai/gpt-5.4-mini"));
        assert!(!supports_xhigh("anthropic/claude-sonnet-4-5"));
        assert_eq!(
            offered_levels("anthropic/claude-sonnet-4-5"),
            "off, minimal, low, medium, high, adaptive"
        );
        assert_eq!(
            offered_levels("openai/gpt-5.2"),
            "off, minimal, low, medium, high, xhigh, adaptive"
        );
        assert_eq!(
            ThinkingLevel::Xhigh.for_model("openai/gpt-4o"),
            ThinkingLevel::High
        );
    }

    #[test]
    fn reasoning_spellings() {
        assert_eq!(ReasoningLevel::parse("Hidden"), Some(ReasoningLevel::Off));
        assert_eq!(ReasoningLevel::parse("1"), Some(ReasoningLevel::On));
        assert_eq!(ReasoningLevel::parse("live"), Some(ReasoningLevel::Stream));
        assert_eq!(ReasoningLevel::parse("maybe"), None);
    }
}
