//! `/model`, `/models` and `/<alias>` (a command-only tool, `model`), and `session_status`
//! with its `model` argument: showing the session's model and the ones it may switch to, and
//! switching it for the turns that follow without resetting the conversation.
//!
//! What a name resolves to is `clawless_core::turn::model_command`'s; recording the choice is
//! `model_switch`'s.

use std::sync::Arc;

use async_trait::async_trait;
use clawless_base::clock::Clock;
use clawless_base::model::ToolSpec;
use clawless_core::tools::session_status::render_status;
use clawless_core::tools::{Tool, ToolOutput};
use clawless_core::turn::model_command::{
    ModelChoices, ModelCommand, Selection, provider_models_text, providers_text, resolve_model,
    selection_reply, summary_text, switched_event,
};
use clawless_core::turn::state::SessionState;

use super::{RuntimeTool, ToolCallContext, ToolOutcome};
use crate::skills_service::SkillsService;
use crate::turn_service::TurnError;
use crate::turn_service::model_switch::{apply_selection, context_window_of, model_choices};

/// The command tool's name (`/model`, `/models` and the alias commands dispatch to it).
pub(crate) const MODEL_COMMAND: &str = "model";

/// What both tools need to switch a session's model.
#[derive(Clone)]
pub(super) struct ModelSwitcher {
    skills: Arc<SkillsService>,
    /// The deployment's configured model, `provider/model`.
    default_model: String,
    /// Builds a chosen model; without it no model can be chosen here.
    factory: Option<clawless_llm::ModelFactory>,
    clock: Arc<dyn Clock>,
}

impl ModelSwitcher {
    pub(super) fn new(
        skills: Arc<SkillsService>, default_model: String,
        factory: Option<clawless_llm::ModelFactory>, clock: Arc<dyn Clock>,
    ) -> Self {
        Self {
            skills,
            default_model,
            factory,
            clock,
        }
    }

    fn choices(&self) -> ModelChoices {
        model_choices(self.skills.config(), &self.default_model)
    }

    /// The session's current model.
    fn current(&self, state: &SessionState) -> String {
        state
            .meta
            .model_override
            .clone()
            .unwrap_or_else(|| self.default_model.clone())
    }

    /// Resolves `argument` (`"default"` names the default model) and checks the model can be
    /// built here. `Err` is the text to answer.
    fn select(&self, argument: &str, choices: &ModelChoices) -> Result<Selection, String> {
        let selection = if argument.trim().eq_ignore_ascii_case("default") {
            Selection {
                model: choices.default_model.clone(),
                is_default: true,
            }
        } else {
            resolve_model(argument, choices)?
        };
        if !selection.is_default {
            let Some(factory) = &self.factory else {
                return Err("Switching models is not available in this deployment.".to_owned());
            };
            if let Err(err) = factory(&selection.model) {
                tracing::warn!(model = %selection.model, error = %err, "chosen model cannot be built");
                return Err(format!(
                    "Model {} cannot be used here: {err}",
                    selection.model
                ));
            }
        }
        Ok(selection)
    }

    /// `/model status`: the current, default and per-provider detail.
    fn status_text(&self, agent_id: &str, state: &SessionState, choices: &ModelChoices) -> String {
        let config = self.skills.config();
        let current = self.current(state);
        let mut lines = vec![
            format!("Current: {}", choices.label(&current)),
            format!("Default: {}", choices.default_model),
            format!("Agent: {agent_id}"),
            format!(
                "Context window: {} tokens",
                context_window_of(config, &current)
            ),
        ];
        for provider in choices.providers() {
            let settings = config.models.providers.get(provider);
            let endpoint = settings
                .and_then(|settings| settings.base_url.as_deref())
                .unwrap_or("default");
            let api = settings.and_then(|settings| settings.api).map_or_else(
                || provider.to_owned(),
                |api| format!("{api:?}").to_lowercase(),
            );
            lines.push(format!("[{provider}] endpoint: {endpoint} api: {api}"));
            for model in choices
                .allowed
                .iter()
                .filter(|model| clawless_core::turn::model_command::provider_of(model) == provider)
            {
                let aliases = choices.aliases_of(model);
                match aliases.is_empty() {
                    true => lines.push(format!("  • {model}")),
                    false => lines.push(format!("  • {model} ({})", aliases.join(", "))),
                }
            }
        }
        lines.join("\n")
    }
}

/// `/model`, `/models`, `/<alias>`.
pub(super) struct ModelCommandTool {
    switcher: ModelSwitcher,
}

impl ModelCommandTool {
    pub(super) fn new(switcher: ModelSwitcher) -> Self {
        Self { switcher }
    }
}

#[async_trait]
impl RuntimeTool for ModelCommandTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: MODEL_COMMAND.to_owned(),
            description: "Show or switch the session's model (/model, /models, /<alias>)."
                .to_owned(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["summary", "status", "list", "set"]},
                    "provider": {"type": "string"},
                    "model": {"type": "string"},
                },
            }),
        }
    }

    fn command_only(&self) -> bool {
        true
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let switcher = &self.switcher;
        let choices = switcher.choices();
        let Some(command) = ModelCommand::from_params(&context.call.input) else {
            return Ok(ToolOutcome::Done(ToolOutput::error(
                "Usage: /model [status|list|<alias>|<provider/model>]",
            )));
        };
        let state = context.state;
        let text = match command {
            ModelCommand::Summary => summary_text(&switcher.current(state), &choices),
            ModelCommand::Status => switcher.status_text(context.agent_id, state, &choices),
            ModelCommand::List { provider: None } => providers_text(&choices),
            ModelCommand::List {
                provider: Some(provider),
            } => provider_models_text(&provider, &choices),
            ModelCommand::Select(argument) => match switcher.select(&argument, &choices) {
                Ok(selection) => {
                    let event = switched_event(&selection.model, &choices);
                    apply_selection(state, &selection, Some(event), switcher.clock.now_ms());
                    selection_reply(&selection, &choices)
                }
                Err(text) => return Ok(ToolOutcome::Done(ToolOutput::error(text))),
            },
        };
        Ok(ToolOutcome::Done(ToolOutput::ok(text)))
    }
}

/// `session_status`, with `model` (an alias, `provider/model` or `default`) switching the
/// session's model first when there is more than one to choose from.
pub(super) struct SessionStatusTool {
    switcher: ModelSwitcher,
    /// Whether `model` is offered: only with a model to switch to, so a deployment with one
    /// model sends the plain schema.
    switchable: bool,
}

impl SessionStatusTool {
    pub(super) fn new(switcher: ModelSwitcher) -> Self {
        let switchable = switcher.factory.is_some() && switcher.choices().allowed.len() > 1;
        Self {
            switcher,
            switchable,
        }
    }
}

#[async_trait]
impl RuntimeTool for SessionStatusTool {
    fn spec(&self) -> ToolSpec {
        let mut spec = clawless_core::tools::session_status::SessionStatusTool.spec();
        if self.switchable {
            // Kept short: every request of a deployment with several models carries it.
            spec.description = "This session's model, usage and current time; `model` switches it (\"default\" resets).".to_owned();
            spec.input_schema = serde_json::json!({
                "type": "object",
                "properties": {"model": {"type": "string"}},
            });
        }
        spec
    }

    async fn call(&self, context: ToolCallContext<'_>) -> Result<ToolOutcome, TurnError> {
        let Some(tool_context) = context.tool_context else {
            return Ok(ToolOutcome::Done(ToolOutput::error(
                clawless_core::turn::tool_not_available(&context.call.name),
            )));
        };
        let mut facts = tool_context.session.clone();
        let asked = context.call.input["model"]
            .as_str()
            .map(str::trim)
            .filter(|model| !model.is_empty());
        if let Some(argument) = asked {
            if !self.switchable {
                return Ok(ToolOutcome::Done(ToolOutput::error(
                    "This session has no other model to switch to.",
                )));
            }
            let switcher = &self.switcher;
            let choices = switcher.choices();
            match switcher.select(argument, &choices) {
                Ok(selection) => {
                    apply_selection(context.state, &selection, None, switcher.clock.now_ms());
                    facts.model.clone_from(&selection.model);
                    facts.context_window = Some(context_window_of(
                        switcher.skills.config(),
                        &selection.model,
                    ));
                }
                Err(text) => return Ok(ToolOutcome::Done(ToolOutput::error(text))),
            }
        }
        Ok(ToolOutcome::Done(ToolOutput::ok(render_status(&facts))))
    }
}
