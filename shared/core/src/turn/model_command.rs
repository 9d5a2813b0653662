//! `/model`, `/models` and the alias commands (`/opus`, …): parsing the command, resolving
//! what a person (or `session_status`'s `model`) names to one allowed `provider/model`
//! (aliases, exact refs, then a fuzzy match), and the texts the chat and the model read.
//!
//! Pure: the caller supplies the [`ModelChoices`] (built from `agents.defaults.models`,
//! `models.*` and the deployment's default model) and records the choice in the session.

/// Aliases OpenClaw gives a model listed in `agents.defaults.models` without an alias of its
/// own (spec §8.2): a listed entry gets its default alias, an unlisted model gets none.
pub const BUILTIN_ALIASES: [(&str, &str); 8] = [
    ("opus", "anthropic/claude-opus-4-6"),
    ("sonnet", "anthropic/claude-sonnet-4-6"),
    ("gpt", "openai/gpt-5.4"),
    ("gpt-mini", "openai/gpt-5.4-mini"),
    ("gpt-nano", "openai/gpt-5.4-nano"),
    ("gemini", "google/gemini-3.1-pro-preview"),
    ("gemini-flash", "google/gemini-3-flash-preview"),
    ("gemini-flash-lite", "google/gemini-3.1-flash-lite-preview"),
];

/// Slash commands an alias may not shadow: the session's own commands win.
const RESERVED_COMMANDS: [&str; 22] = [
    "new",
    "reset",
    "compact",
    "status",
    "context",
    "elevated",
    "elev",
    "subagents",
    "kill",
    "steer",
    "stop",
    "approve",
    "model",
    "models",
    "think",
    "thinking",
    "t",
    "reasoning",
    "reason",
    "help",
    "commands",
    "whoami",
];

/// Minimum fuzzy score of a match within the named provider (`/model anthropic/opus`).
const PROVIDER_FUZZY_MIN: u32 = 90;
/// Minimum fuzzy score of a match across every allowed model and alias (`/model opus4`).
const GLOBAL_FUZZY_MIN: u32 = 120;

/// Longest argument `/model` reads; anything longer is not a model name.
const MAX_ARGUMENT_CHARS: usize = 200;

/// One alias: `alias` (as configured; matched case-insensitively) names `model`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAlias {
    /// The alias, e.g. `opus`.
    pub alias: String,
    /// The `provider/model` it names.
    pub model: String,
}

/// What a session may choose from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelChoices {
    /// The configured model (`models.primary`, or the deployment's default): always allowed.
    pub default_model: String,
    /// Every `provider/model` a session may choose, the default among them, once each.
    pub allowed: Vec<String>,
    /// The aliases, in configuration order.
    pub aliases: Vec<ModelAlias>,
}

impl ModelChoices {
    /// `choices` with the default first among the allowed models and duplicates (compared
    /// case-insensitively) and blanks dropped; aliases naming a model not allowed are dropped.
    pub fn new(default_model: &str, allowed: &[String], aliases: Vec<ModelAlias>) -> Self {
        let mut models: Vec<String> = Vec::new();
        for model in std::iter::once(default_model)
            .chain(allowed.iter().map(String::as_str))
            .map(str::trim)
            .filter(|model| !model.is_empty())
        {
            if !models.iter().any(|known| known.eq_ignore_ascii_case(model)) {
                models.push(model.to_owned());
            }
        }
        let mut kept: Vec<ModelAlias> = Vec::new();
        for alias in aliases {
            let name = alias.alias.trim();
            let Some(model) = models
                .iter()
                .find(|known| known.eq_ignore_ascii_case(alias.model.trim()))
            else {
                continue;
            };
            if name.is_empty() || kept.iter().any(|k| k.alias.eq_ignore_ascii_case(name)) {
                continue;
            }
            kept.push(ModelAlias {
                alias: name.to_owned(),
                model: model.clone(),
            });
        }
        Self {
            default_model: default_model.trim().to_owned(),
            allowed: models,
            aliases: kept,
        }
    }

    /// The allowed spelling of `model`, when allowed (compared case-insensitively).
    pub fn allowed_ref(&self, model: &str) -> Option<&str> {
        let model = model.trim();
        self.allowed
            .iter()
            .find(|known| known.eq_ignore_ascii_case(model))
            .map(String::as_str)
    }

    /// The model `alias` names (case-insensitive).
    pub fn model_of_alias(&self, alias: &str) -> Option<&str> {
        self.aliases
            .iter()
            .find(|known| known.alias.eq_ignore_ascii_case(alias.trim()))
            .map(|known| known.model.as_str())
    }

    /// The aliases of `model`, in configuration order.
    pub fn aliases_of(&self, model: &str) -> Vec<&str> {
        self.aliases
            .iter()
            .filter(|known| known.model.eq_ignore_ascii_case(model))
            .map(|known| known.alias.as_str())
            .collect()
    }

    /// `<alias> (<provider/model>)`, or the bare ref for a model without an alias.
    pub fn label(&self, model: &str) -> String {
        match self.aliases_of(model).first() {
            Some(alias) => format!("{alias} ({model})"),
            None => model.to_owned(),
        }
    }

    /// The providers of the allowed models, in order, once each.
    pub fn providers(&self) -> Vec<&str> {
        let mut providers: Vec<&str> = Vec::new();
        for model in &self.allowed {
            let provider = provider_of(model);
            if !providers.contains(&provider) {
                providers.push(provider);
            }
        }
        providers
    }

    /// The alias a chat command `/<name>` would be, when `name` is an alias no built-in
    /// command has.
    pub fn alias_command(&self, name: &str) -> Option<&ModelAlias> {
        let name = name.trim();
        if RESERVED_COMMANDS
            .iter()
            .any(|reserved| reserved.eq_ignore_ascii_case(name))
        {
            return None;
        }
        self.aliases
            .iter()
            .find(|known| known.alias.eq_ignore_ascii_case(name))
    }
}

/// The aliases of `agents.defaults.models`' entries (`(model, own alias)` in configuration
/// order): an entry's own alias, else the built-in one of its model (spec §8.2).
pub fn alias_index<'a>(
    entries: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) -> Vec<ModelAlias> {
    entries
        .into_iter()
        .filter_map(|(model, alias)| {
            let model = model.trim();
            let alias = match alias.map(str::trim).filter(|alias| !alias.is_empty()) {
                Some(alias) => alias,
                None => {
                    BUILTIN_ALIASES
                        .iter()
                        .find(|(_, known)| known.eq_ignore_ascii_case(model))?
                        .0
                }
            };
            Some(ModelAlias {
                alias: alias.to_owned(),
                model: model.to_owned(),
            })
        })
        .collect()
}

/// What a `/model` (or `/models`, or alias) command asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelCommand {
    /// `/model`: the current model, the aliases and how to switch.
    Summary,
    /// `/model status`: the detail, per provider.
    Status,
    /// `/model list`, `/models [provider]`: the providers, or one provider's models.
    List {
        /// The provider asked for, if any.
        provider: Option<String>,
    },
    /// `/model <x>` or `/<alias>`: switch to what `x` names.
    Select(String),
}

impl ModelCommand {
    /// The `model` command tool's arguments for this command.
    pub fn to_params(&self) -> serde_json::Value {
        match self {
            Self::Summary => serde_json::json!({"action": "summary"}),
            Self::Status => serde_json::json!({"action": "status"}),
            Self::List { provider } => serde_json::json!({"action": "list", "provider": provider}),
            Self::Select(model) => serde_json::json!({"action": "set", "model": model}),
        }
    }

    /// The command the `model` command tool's arguments describe (`None` for arguments no
    /// command makes).
    pub fn from_params(params: &serde_json::Value) -> Option<Self> {
        let text = |key: &str| {
            params[key]
                .as_str()
                .map(str::trim)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
        };
        Some(match params["action"].as_str()? {
            "summary" => Self::Summary,
            "status" => Self::Status,
            "list" => Self::List {
                provider: text("provider"),
            },
            "set" => Self::Select(text("model")?),
            _ => return None,
        })
    }
}

/// Parses `/model …` and `/models …` (the command word in any case; `/model:x` like
/// `/model x`), and `/<alias>` for an alias of `choices`. `None` for anything else.
pub fn parse_model_command(body: &str, choices: &ModelChoices) -> Option<ModelCommand> {
    let body = body.trim();
    let rest = body.strip_prefix('/')?;
    let word_end = rest
        .find(|c: char| c.is_whitespace() || c == ':')
        .unwrap_or(rest.len());
    let (word, tail) = rest.split_at(word_end);
    let argument = tail.trim_start_matches(':').trim();
    match word.to_ascii_lowercase().as_str() {
        "model" => Some(match argument.to_ascii_lowercase().as_str() {
            "" => ModelCommand::Summary,
            "status" => ModelCommand::Status,
            "list" => ModelCommand::List { provider: None },
            _ => ModelCommand::Select(argument.to_owned()),
        }),
        "models" => Some(ModelCommand::List {
            provider: argument
                .split_whitespace()
                .next()
                .map(str::to_ascii_lowercase),
        }),
        _ if argument.is_empty() && !tail.starts_with(':') => {
            let alias = choices.alias_command(word)?;
            Some(ModelCommand::Select(alias.alias.clone()))
        }
        _ => None,
    }
}

/// A successful resolution: the allowed model chosen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// The `provider/model`, spelled as allowed.
    pub model: String,
    /// True when it is the default model (the session's choice is then cleared).
    pub is_default: bool,
}

/// Resolves what `/model <x>` names (spec §8.3): digits are refused, then an alias or exact
/// allowed ref (a bare model name under the default model's provider), then a fuzzy match
/// (within the named provider, else across allowed models and aliases). `Err` is the text to
/// reply.
pub fn resolve_model(argument: &str, choices: &ModelChoices) -> Result<Selection, String> {
    let argument = argument.trim();
    if !argument.is_empty() && argument.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "Numeric model selection is not supported in chat.\n\nBrowse: /models or /models <provider>\n{SWITCH_HINT}"
        ));
    }
    if argument.is_empty()
        || argument.chars().count() > MAX_ARGUMENT_CHARS
        || !argument.chars().all(is_ref_char)
    {
        return Err(unrecognized(argument));
    }
    if argument.contains('@') {
        return Err(
            "Auth profiles are not supported here: use /model <provider/model> or an alias."
                .to_owned(),
        );
    }
    let selected = |model: &str| Selection {
        model: model.to_owned(),
        is_default: model.eq_ignore_ascii_case(&choices.default_model),
    };
    if let Some(model) = choices.model_of_alias(argument) {
        return Ok(selected(model));
    }
    let (provider, fragment) = match argument.split_once('/') {
        Some((provider, model)) => (provider.to_owned(), model.to_owned()),
        None => (
            provider_of(&choices.default_model).to_owned(),
            argument.to_owned(),
        ),
    };
    if let Some(model) = choices.allowed_ref(&format!("{provider}/{fragment}")) {
        return Ok(selected(model));
    }
    let best = if argument.contains('/') {
        best_match(choices, &fragment, Some(&provider), PROVIDER_FUZZY_MIN)
    } else {
        best_match(choices, argument, None, GLOBAL_FUZZY_MIN)
    };
    match best {
        Some(model) => Ok(selected(&model)),
        None if argument.contains('/') && !fragment.is_empty() && !provider.is_empty() => Err(
            format!("Model \"{provider}/{fragment}\" is not allowed. {BROWSE_HINT}"),
        ),
        None => Err(unrecognized(argument)),
    }
}

const BROWSE_HINT: &str = "Use /models to list providers, or /models <provider> to list models.";
const SWITCH_HINT: &str = "Switch: /model <provider/model>";

fn unrecognized(argument: &str) -> String {
    let shown: String = argument.chars().take(80).collect();
    format!("Unrecognized model \"{shown}\". {BROWSE_HINT}")
}

/// The characters of a model reference: `[A-Za-z0-9_.:@-]` and `/`.
fn is_ref_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '@' | '-' | '/')
}

/// The provider part of `provider/model` (all of it without a `/`).
pub fn provider_of(model: &str) -> &str {
    model
        .split_once('/')
        .map_or(model, |(provider, _)| provider)
}

/// The model part of `provider/model`.
fn model_id_of(model: &str) -> &str {
    model.split_once('/').map_or(model, |(_, id)| id)
}

/// How well `fragment` (lowercase) names `text` (lowercase): 0 when it does not.
fn score_text(fragment: &str, text: &str) -> u32 {
    if text == fragment {
        200
    } else if text.starts_with(fragment) {
        150
    } else if text.contains(fragment) {
        120
    } else {
        let words: Vec<&str> = fragment
            .split(['-', '_', '.', ' '])
            .filter(|word| !word.is_empty())
            .collect();
        if words.len() > 1 && words.iter().all(|word| text.contains(word)) {
            100
        } else {
            0
        }
    }
}

/// The allowed model `fragment` names best, at least `min`: within `provider` when given
/// (model ids only), else across model ids and aliases. Ties go to the default model, then
/// the shorter id, then the first in order.
fn best_match(
    choices: &ModelChoices, fragment: &str, provider: Option<&str>, min: u32,
) -> Option<String> {
    let fragment = fragment.to_ascii_lowercase();
    if fragment.is_empty() {
        return None;
    }
    let mut best: Option<(u32, bool, usize, &str)> = None;
    for model in &choices.allowed {
        if provider.is_some_and(|provider| !provider_of(model).eq_ignore_ascii_case(provider)) {
            continue;
        }
        let id = model_id_of(model).to_ascii_lowercase();
        let mut score = score_text(&fragment, &id);
        if provider.is_none() {
            for alias in choices.aliases_of(model) {
                // An alias only counts when the fragment is part of it.
                let alias = alias.to_ascii_lowercase();
                if alias.contains(&fragment) {
                    score = score.max(score_text(&fragment, &alias));
                }
            }
        }
        if score < min {
            continue;
        }
        let is_default = model.eq_ignore_ascii_case(&choices.default_model);
        let better = match best {
            None => true,
            Some((best_score, best_default, best_len, _)) => {
                (score, is_default, std::cmp::Reverse(id.len()))
                    > (best_score, best_default, std::cmp::Reverse(best_len))
            }
        };
        if better {
            best = Some((score, is_default, id.len(), model));
        }
    }
    best.map(|(_, _, _, model)| model.to_owned())
}

/// The reply to a switch: `Model set to <alias> (<ref>).`, `Model set to <ref>.`, or
/// `Model reset to default (<label>).`
pub fn selection_reply(selection: &Selection, choices: &ModelChoices) -> String {
    let label = choices.label(&selection.model);
    if selection.is_default {
        format!("Model reset to default ({label}).")
    } else {
        format!("Model set to {label}.")
    }
}

/// The system event the model reads on its next turn: `Model switched to <label>.`
pub fn switched_event(model: &str, choices: &ModelChoices) -> String {
    format!("Model switched to {}.", choices.label(model))
}

/// The event a session reads when its stored choice is no longer allowed.
pub fn reverted_event(default_model: &str) -> String {
    format!("Model override not allowed for this agent; reverted to {default_model}.")
}

/// `/model`: the current model, the aliases, and how to switch and browse.
pub fn summary_text(current: &str, choices: &ModelChoices) -> String {
    let mut lines = vec![format!("Current: {}", choices.label(current))];
    if !choices.aliases.is_empty() {
        let aliases: Vec<String> = choices
            .aliases
            .iter()
            .map(|alias| format!("{} → {}", alias.alias, alias.model))
            .collect();
        lines.push(format!("Aliases: {}", aliases.join(", ")));
    }
    lines.extend([
        String::new(),
        format!("{SWITCH_HINT} (or /model <alias>)"),
        "Browse: /models (providers) or /models <provider> (models)".to_owned(),
        "More: /model status".to_owned(),
    ]);
    lines.join("\n")
}

/// `/models` (no provider): the providers with their model counts.
pub fn providers_text(choices: &ModelChoices) -> String {
    let mut lines = vec!["Providers:".to_owned()];
    for provider in choices.providers() {
        let count = choices
            .allowed
            .iter()
            .filter(|model| provider_of(model) == provider)
            .count();
        lines.push(format!("- {provider} ({count})"));
    }
    lines.extend([
        String::new(),
        "Use: /models <provider>".to_owned(),
        SWITCH_HINT.to_owned(),
    ]);
    lines.join("\n")
}

/// `/models <provider>`: the provider's allowed models with their aliases, or
/// `Unknown provider: <x>` with the providers there are.
pub fn provider_models_text(provider: &str, choices: &ModelChoices) -> String {
    let models: Vec<&String> = choices
        .allowed
        .iter()
        .filter(|model| provider_of(model).eq_ignore_ascii_case(provider))
        .collect();
    if models.is_empty() {
        let shown: String = provider.chars().take(40).collect();
        return format!(
            "Unknown provider: {shown}\n\nAvailable providers: {}",
            choices.providers().join(", ")
        );
    }
    let mut lines = vec![format!(
        "Models ({provider}) — showing 1-{count} of {count}",
        count = models.len()
    )];
    for model in models {
        let aliases = choices.aliases_of(model);
        if aliases.is_empty() {
            lines.push(format!("- {model}"));
        } else {
            lines.push(format!("- {model} ({})", aliases.join(", ")));
        }
    }
    lines.extend([String::new(), SWITCH_HINT.to_owned()]);
    lines.join("\n")
}

/// The `## Model Aliases` lines of the system prompt (`- opus: anthropic/claude-opus-4-6`),
/// empty when there are no aliases.
pub fn prompt_alias_lines(choices: &ModelChoices) -> Vec<String> {
    choices
        .aliases
        .iter()
        .map(|alias| format!("- {}: {}", alias.alias, alias.model))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choices(default: &str, allowed: &[&str], aliases: &[(&str, Option<&str>)]) -> ModelChoices {
        let allowed: Vec<String> = allowed.iter().map(|m| (*m).to_owned()).collect();
        ModelChoices::new(default, &allowed, alias_index(aliases.iter().copied()))
    }

    fn opus_choices() -> ModelChoices {
        choices(
            "anthropic/claude-sonnet-4-5",
            &["anthropic/claude-opus-4-6", "openai/gpt-5.4"],
            &[
                ("anthropic/claude-opus-4-6", None),
                ("openai/gpt-5.4", Some("five")),
            ],
        )
    }

    #[test]
    fn vector_22_numeric_selection_is_refused_and_the_builtin_alias_selects() {
        let choices = opus_choices();
        assert_eq!(
            resolve_model("2", &choices),
            Err("Numeric model selection is not supported in chat.\n\nBrowse: /models or /models <provider>\nSwitch: /model <provider/model>".to_owned())
        );
        let selection = resolve_model("opus", &choices).expect("alias");
        assert_eq!(selection.model, "anthropic/claude-opus-4-6");
        assert!(!selection.is_default);
        assert_eq!(
            selection_reply(&selection, &choices),
            "Model set to opus (anthropic/claude-opus-4-6)."
        );
        assert_eq!(
            switched_event(&selection.model, &choices),
            "Model switched to opus (anthropic/claude-opus-4-6)."
        );
    }

    #[test]
    fn vector_23_a_model_outside_the_allowlist_is_not_allowed() {
        let choices = choices(
            "openai/gpt-5.4",
            &["openai/gpt-5.4"],
            &[("openai/gpt-5.4", None)],
        );
        assert_eq!(
            resolve_model("anthropic/claude-opus-4-6", &choices),
            Err("Model \"anthropic/claude-opus-4-6\" is not allowed. Use /models to list providers, or /models <provider> to list models.".to_owned())
        );
    }

    #[test]
    fn an_own_alias_replaces_the_builtin_one_and_unlisted_models_get_none() {
        let choices = choices(
            "anthropic/claude-sonnet-4-5",
            &["anthropic/claude-opus-4-6"],
            &[("anthropic/claude-opus-4-6", Some("big"))],
        );
        assert_eq!(
            choices.model_of_alias("BIG"),
            Some("anthropic/claude-opus-4-6")
        );
        assert_eq!(choices.model_of_alias("opus"), None);
        // No entry: `gpt` is not an alias although it is a built-in one.
        assert_eq!(choices.model_of_alias("gpt"), None);
    }

    #[test]
    fn exact_refs_bare_names_and_case_resolve_to_the_allowed_spelling() {
        let choices = opus_choices();
        assert_eq!(
            resolve_model("OpenAI/GPT-5.4", &choices).map(|s| s.model),
            Ok("openai/gpt-5.4".to_owned())
        );
        // A bare model is the default provider's.
        assert_eq!(
            resolve_model("claude-opus-4-6", &choices).map(|s| s.model),
            Ok("anthropic/claude-opus-4-6".to_owned())
        );
        let back = resolve_model("anthropic/claude-sonnet-4-5", &choices).expect("default");
        assert!(back.is_default);
        assert_eq!(
            selection_reply(&back, &choices),
            "Model reset to default (anthropic/claude-sonnet-4-5)."
        );
    }

    #[test]
    fn fuzzy_matches_within_a_provider_and_across_models() {
        let choices = opus_choices();
        assert_eq!(
            resolve_model("anthropic/opus", &choices).map(|s| s.model),
            Ok("anthropic/claude-opus-4-6".to_owned())
        );
        assert_eq!(
            resolve_model("gpt-5", &choices).map(|s| s.model),
            Ok("openai/gpt-5.4".to_owned())
        );
        // Ties go to the default model.
        assert_eq!(
            resolve_model("claude", &choices).map(|s| s.model),
            Ok("anthropic/claude-sonnet-4-5".to_owned())
        );
        // A fragment of another provider's model is not found under this one.
        assert!(resolve_model("openai/opus", &choices).is_err());
        assert_eq!(
            resolve_model("llama", &choices),
            Err("Unrecognized model \"llama\". Use /models to list providers, or /models <provider> to list models.".to_owned())
        );
    }

    #[test]
    fn odd_arguments_are_refused_with_a_clear_error() {
        let choices = opus_choices();
        for argument in [
            "../../etc/passwd x",
            "opus; rm",
            "a b",
            "",
            "ü",
            &"x".repeat(500),
        ] {
            let result = resolve_model(argument, &choices);
            assert!(result.is_err(), "{argument:?} → {result:?}");
        }
        assert!(
            resolve_model("opus@anthropic:default", &choices)
                .unwrap_err()
                .contains("Auth profiles are not supported")
        );
        // A path-like ref is not allowed, not resolved somewhere else.
        assert!(
            resolve_model("anthropic/../openai/gpt-5.4", &choices)
                .unwrap_err()
                .contains("is not allowed")
        );
    }

    #[test]
    fn commands_parse_with_their_forms_and_aliases() {
        let choices = opus_choices();
        assert_eq!(
            parse_model_command("/model", &choices),
            Some(ModelCommand::Summary)
        );
        assert_eq!(
            parse_model_command("/Model Status", &choices),
            Some(ModelCommand::Status)
        );
        assert_eq!(
            parse_model_command("/model list", &choices),
            Some(ModelCommand::List { provider: None })
        );
        assert_eq!(
            parse_model_command("/models OpenAI", &choices),
            Some(ModelCommand::List {
                provider: Some("openai".to_owned())
            })
        );
        assert_eq!(
            parse_model_command("/model:openai/gpt-5.4", &choices),
            Some(ModelCommand::Select("openai/gpt-5.4".to_owned()))
        );
        assert_eq!(
            parse_model_command("/opus", &choices),
            Some(ModelCommand::Select("opus".to_owned()))
        );
        assert_eq!(
            parse_model_command("/FIVE", &choices),
            Some(ModelCommand::Select("five".to_owned()))
        );
        assert_eq!(parse_model_command("/opus now please", &choices), None);
        assert_eq!(parse_model_command("/modelx", &choices), None);
        assert_eq!(parse_model_command("model opus", &choices), None);
    }

    #[test]
    fn an_alias_never_shadows_a_builtin_command() {
        let choices = choices(
            "anthropic/claude-sonnet-4-5",
            &["anthropic/claude-opus-4-6"],
            &[("anthropic/claude-opus-4-6", Some("status"))],
        );
        assert_eq!(parse_model_command("/status", &choices), None);
        // The alias itself still resolves (e.g. through `session_status`).
        assert_eq!(
            choices.model_of_alias("status"),
            Some("anthropic/claude-opus-4-6")
        );
    }

    #[test]
    fn params_round_trip() {
        for command in [
            ModelCommand::Summary,
            ModelCommand::Status,
            ModelCommand::List { provider: None },
            ModelCommand::List {
                provider: Some("openai".to_owned()),
            },
            ModelCommand::Select("opus".to_owned()),
        ] {
            assert_eq!(
                ModelCommand::from_params(&command.to_params()),
                Some(command)
            );
        }
        assert_eq!(
            ModelCommand::from_params(&serde_json::json!({"action": "set"})),
            None
        );
    }

    #[test]
    fn texts_list_aliases_providers_and_models() {
        let choices = opus_choices();
        let summary = summary_text("anthropic/claude-sonnet-4-5", &choices);
        assert!(summary.starts_with("Current: anthropic/claude-sonnet-4-5\nAliases: opus → anthropic/claude-opus-4-6, five → openai/gpt-5.4\n\nSwitch: /model <provider/model>"), "{summary}");
        assert_eq!(
            providers_text(&choices),
            "Providers:\n- anthropic (2)\n- openai (1)\n\nUse: /models <provider>\nSwitch: /model <provider/model>"
        );
        assert_eq!(
            provider_models_text("anthropic", &choices),
            "Models (anthropic) — showing 1-2 of 2\n- anthropic/claude-sonnet-4-5\n- anthropic/claude-opus-4-6 (opus)\n\nSwitch: /model <provider/model>"
        );
        assert!(provider_models_text("nope", &choices).starts_with("Unknown provider: nope"));
        assert_eq!(
            prompt_alias_lines(&choices),
            [
                "- opus: anthropic/claude-opus-4-6",
                "- five: openai/gpt-5.4"
            ]
        );
    }

    #[test]
    fn the_system_prompt_lists_aliases_only_when_there_are_some() {
        use crate::system_prompt::{SystemPromptParams, build_system_prompt};
        let lines = prompt_alias_lines(&opus_choices());
        let with = build_system_prompt(&SystemPromptParams {
            model_aliases: &lines,
            ..SystemPromptParams::default()
        });
        assert!(
            with.contains("## Model Aliases\nPrefer aliases when specifying model overrides; full provider/model is also accepted.\n- opus: anthropic/claude-opus-4-6\n- five: openai/gpt-5.4\n"),
            "{with}"
        );
        let without = build_system_prompt(&SystemPromptParams::default());
        assert!(!without.contains("Model Aliases"), "{without}");
    }
}
