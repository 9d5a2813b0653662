//! A session's model choice over the config: which models it may switch to and their aliases
//! (`agents.defaults.models` with `models.primary`, `models.fallbacks` and `models.allowed`),
//! recording a switch (`/model`, `/<alias>`, `session_status`'s `model`) in the session
//! without resetting it, the context window of the session's current model, and reverting a
//! stored choice the config no longer allows.
//!
//! Resolving what a person named is `clawless_core::turn::model_command`'s.

use clawless_automation::heartbeat::PendingSystemEvent;
use clawless_core::turn::model_command::{ModelChoices, Selection, alias_index, reverted_event};
use clawless_core::turn::state::SessionState;

use super::TurnService;
use crate::config::ClawlessConfig;

/// The models a session may choose under `config`, `default_model` (the deployment's
/// configured model) first, with the aliases of `agents.defaults.models`.
pub(crate) fn model_choices(config: &ClawlessConfig, default_model: &str) -> ModelChoices {
    let listed = &config.agents.defaults.models;
    let mut allowed = config.models.choosable();
    allowed.extend(listed.keys().cloned());
    let aliases = alias_index(
        listed
            .iter()
            .map(|(model, entry)| (model.as_str(), entry.alias.as_deref())),
    );
    ModelChoices::new(default_model, &allowed, aliases)
}

/// The context window of `model_ref`: its `agents.defaults.models` entry's `contextTokens`,
/// else `agents.defaults.contextTokens`, else the default window.
pub(crate) fn context_window_of(config: &ClawlessConfig, model_ref: &str) -> u64 {
    let defaults = &config.agents.defaults;
    let own = defaults
        .models
        .iter()
        .find(|(model, _)| model.trim().eq_ignore_ascii_case(model_ref))
        .and_then(|(_, entry)| entry.context_tokens);
    own.or(defaults.context_tokens).map_or(
        clawless_core::compaction::plan::DEFAULT_CONTEXT_WINDOW,
        |tokens| tokens as u64,
    )
}

/// Records `selection` as the session's model: the default clears the choice. The conversation
/// stays; the window learned from the previous model's overflow errors is forgotten. With
/// `event`, the model reads it on its next turn. False when the session already ran on it.
pub(crate) fn apply_selection(
    state: &mut SessionState, selection: &Selection, event: Option<String>, now_ms: u64,
) -> bool {
    let chosen = (!selection.is_default).then(|| selection.model.clone());
    if state.meta.model_override == chosen {
        return false;
    }
    state.meta.model_override = chosen;
    state.meta.observed_window = None;
    if let Some(text) = event {
        state.meta.pending_events.push(PendingSystemEvent {
            text,
            context_key: None,
            exec_completion: false,
            at_ms: now_ms,
        });
    }
    state.touch_meta();
    true
}

impl TurnService {
    /// The models this session may choose, with their aliases.
    pub(crate) fn model_choices(&self) -> ModelChoices {
        model_choices(self.config(), &self.deps.model.model_ref())
    }

    /// A chat session whose stored model choice the config no longer allows goes back to the
    /// default model, and the model is told so on this turn.
    pub(super) fn revert_disallowed_model(&self, state: &mut SessionState) {
        let Some(chosen) = state.meta.model_override.clone() else {
            return;
        };
        let choices = self.model_choices();
        if choices.allowed_ref(&chosen).is_some() {
            return;
        }
        tracing::info!(session = %state.key, model = %chosen, "model choice no longer allowed; reverted");
        state.meta.model_override = None;
        state.meta.observed_window = None;
        state.meta.pending_events.push(PendingSystemEvent {
            text: reverted_event(&choices.default_model),
            context_key: None,
            exec_completion: false,
            at_ms: self.deps.clock.now_ms(),
        });
        state.touch_meta();
    }
}
