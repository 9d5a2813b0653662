//! Thinking level and reasoning visibility per session: resolving them from the session, the
//! agent and the config for each request (spec `openclaw-tools.md` §7.3), and turning a chat
//! message's `/think` and `/reasoning` directives into the engine's input (what they mean is
//! `clawless_core::turn::directives`).

use clawless_base::thinking::{ReasoningLevel, ThinkingLevel};
use clawless_core::session::reset::strip_leading_mentions;
use clawless_core::turn::directives::{
    CurrentSettings, DIRECTIVES_COMMAND, find_directives, plan_directives,
};
use clawless_core::turn::state::{CommandDispatch, PreparedMessage, SessionState};

use super::TurnService;
use crate::config::ClawlessConfig;

/// The thinking level configured for `agent_id` running `model_ref`, ahead of nothing a
/// session chose: the agent's `thinkingDefault`, then `agents.defaults.models["<model>"]
/// .params.thinking`, then `agents.defaults.thinkingDefault`, then `off`.
pub(crate) fn configured_thinking(
    config: &ClawlessConfig, agent_id: &str, model_ref: &str,
) -> ThinkingLevel {
    let agent = config
        .agents
        .list
        .iter()
        .find(|agent| agent.id.trim().eq_ignore_ascii_case(agent_id.trim()))
        .and_then(|agent| agent.thinking_default);
    let per_model = config
        .agents
        .defaults
        .models
        .iter()
        .find(|(name, _)| name.trim().eq_ignore_ascii_case(model_ref))
        .and_then(|(_, entry)| entry.params.get("thinking"))
        .and_then(serde_json::Value::as_str)
        .and_then(ThinkingLevel::parse);
    agent
        .or(per_model)
        .or(config.agents.defaults.thinking_default)
        .unwrap_or_default()
}

/// The reasoning visibility of `agent_id`'s sessions that did not choose: its
/// `reasoningDefault`, else `off`.
pub(crate) fn configured_reasoning(config: &ClawlessConfig, agent_id: &str) -> ReasoningLevel {
    config
        .agents
        .list
        .iter()
        .find(|agent| agent.id.trim().eq_ignore_ascii_case(agent_id.trim()))
        .and_then(|agent| agent.reasoning_default)
        .unwrap_or_default()
}

impl TurnService {
    /// The thinking level of this session's next request: the turn's own (a cron job's),
    /// the session's `/think`, then the configured defaults; `xhigh` becomes `high` on a
    /// model that does not take it.
    pub(super) fn thinking_level(&self, state: &SessionState) -> ThinkingLevel {
        let model_ref = self.model(state).model_ref();
        state
            .meta
            .turn_thinking
            .or(state.meta.thinking_level)
            .unwrap_or_else(|| configured_thinking(self.config(), &state.meta.agent_id, &model_ref))
            .for_model(&model_ref)
    }

    /// Whether this session shows reasoning: its `/reasoning`, else the agent's default.
    pub(super) fn reasoning_level(&self, state: &SessionState) -> ReasoningLevel {
        state
            .meta
            .reasoning_level
            .unwrap_or_else(|| configured_reasoning(self.config(), &state.meta.agent_id))
    }

    /// Applies `/think` and `/reasoning` directives of an authorised sender's message: the
    /// directives leave the text; a message of nothing else (or with a level refused) is
    /// answered by the engine with their acknowledgement and runs no model; a message with
    /// more runs at the new level, acknowledged first. The levels are stored when the turn
    /// starts (see `clawless_core::turn`).
    pub(super) fn apply_directives(
        &self, state: &SessionState, prepared: &mut PreparedMessage, authorised: bool,
    ) {
        if !authorised {
            return;
        }
        let found = find_directives(&prepared.text);
        let model_ref = self.model(state).model_ref();
        let current = CurrentSettings {
            thinking: self.thinking_level(state),
            reasoning: self.reasoning_level(state),
            model_ref: &model_ref,
        };
        let Some(mut plan) = plan_directives(&found, current) else {
            return;
        };
        // `@bot /think high` in a group is a directive-only message.
        if plan
            .text
            .as_deref()
            .is_some_and(|text| strip_leading_mentions(text).trim().is_empty())
        {
            plan.text = None;
        }
        match &plan.text {
            Some(text) => prepared.text.clone_from(text),
            None => {
                prepared.dispatch = Some(CommandDispatch {
                    tool_name: DIRECTIVES_COMMAND.to_owned(),
                    params: serde_json::json!({"reply": plan.reply}),
                });
            }
        }
        prepared.directives = Some(plan);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> ClawlessConfig {
        serde_yaml::from_str(yaml).expect("config")
    }

    #[test]
    fn the_agent_then_the_model_then_the_defaults_decide() {
        let config = config(
            "agents:\n  defaults:\n    thinkingDefault: low\n    models:\n      openai/gpt-5.4:\n        params: {thinking: high}\n  list:\n    - id: main\n    - id: deep\n      thinkingDefault: medium\n      reasoningDefault: on\n",
        );
        assert_eq!(
            configured_thinking(&config, "deep", "openai/gpt-5.4"),
            ThinkingLevel::Medium
        );
        assert_eq!(
            configured_thinking(&config, "main", "openai/gpt-5.4"),
            ThinkingLevel::High
        );
        assert_eq!(
            configured_thinking(&config, "main", "anthropic/claude-sonnet-4-5"),
            ThinkingLevel::Low
        );
        assert_eq!(configured_reasoning(&config, "deep"), ReasoningLevel::On);
        assert_eq!(configured_reasoning(&config, "main"), ReasoningLevel::Off);
        assert_eq!(
            configured_thinking(&ClawlessConfig::default(), "main", "x/y"),
            ThinkingLevel::Off
        );
    }
}
