//! `clawless.yaml`: the deployment's configuration, as far as it is built. The whole document
//! is also kept as JSON so skills can gate on any dotted path (`requires.config`).

use std::path::{Path, PathBuf};

use clawless_core::object_store::StoreError;
use clawless_core::skills::SkillsConfig;
use serde::Deserialize;
use serde_json::Value;

use crate::aws_env::non_blank_env;
use crate::sources::{InvalidSourceUri, SourceUri, StoreFactory};

/// The agent id used when the config lists none.
pub const DEFAULT_AGENT_ID: &str = "main";

/// Largest config document read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The config object could not be fetched.
    #[error("cannot read config {path}: {source}")]
    Fetch {
        /// The URI.
        path: String,
        /// The store error.
        #[source]
        source: StoreError,
    },
    /// The document is not valid YAML or does not have the expected shape.
    #[error("invalid config {path}: {reason}")]
    Invalid {
        /// The file or URI.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// A location in the config is not a directory or an `s3://` URI.
    #[error(transparent)]
    Location(#[from] InvalidSourceUri),
    /// A required environment variable is missing.
    #[error("environment variable {0} is not set")]
    MissingEnv(&'static str),
}

/// The parts of `clawless.yaml` the system reads so far.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClawlessConfig {
    /// `skills:`.
    pub skills: SkillsSection,
    /// `agents:`.
    pub agents: AgentsSection,
    /// `models:`: primary model, fallbacks, providers.
    pub models: clawless_llm::ModelsConfig,
    /// `tools:`: the global tool policy (spec §11).
    pub tools: clawless_core::tool_policy::ToolsConfig,
    /// `channels:`: chat channels and where their replies go.
    pub channels: ChannelsSection,
    /// `session:`: how messages map to sessions.
    pub session: SessionSection,
    /// `exec:`: the default node, timeouts and what happens when nobody answers an approval.
    pub exec: crate::nodes_service::ExecSettings,
    /// `secrets:`: names that `…Env` keys may use, fetched from SSM Parameter Store or
    /// Secrets Manager at start-up instead of read from the environment.
    pub secrets: std::collections::BTreeMap<String, crate::secrets::SecretSource>,
    /// The whole document, for `requires.config` paths.
    #[serde(skip)]
    pub document: Value,
}

/// Secrets stay out of logs: the raw document is left out, and every section that can hold a
/// secret redacts it in its own `Debug`.
impl std::fmt::Debug for ClawlessConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClawlessConfig")
            .field("skills", &self.skills)
            .field("agents", &self.agents)
            .field("models", &self.models)
            .field("tools", &self.tools)
            .field("channels", &self.channels)
            .field("session", &self.session)
            .field("exec", &self.exec)
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

/// `skills:`: where skills come from, plus the engine's settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SkillsSection {
    /// Bundled skills: a directory or `s3://` URI.
    pub bundled: Option<String>,
    /// Managed skills: a directory or `s3://` URI.
    pub managed: Option<String>,
    /// Extra sources, lowest precedence.
    pub extra: Vec<String>,
    /// `allowBundled`, `entries`, `limits`.
    #[serde(flatten)]
    pub engine: SkillsConfig,
}

/// `agents:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentsSection {
    /// Settings every agent inherits.
    pub defaults: AgentDefaults,
    /// The agents.
    pub list: Vec<AgentConfig>,
}

/// `agents.defaults`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentDefaults {
    /// Workspace root (holds `skills/` and `.agents/skills/`).
    pub workspace: Option<String>,
    /// Default skill filter.
    pub skills: Option<Vec<String>>,
    /// Model calls allowed in one turn.
    pub max_model_calls: Option<u32>,
    /// Per-file cap of injected bootstrap files (default 20,000 chars).
    pub bootstrap_max_chars: Option<usize>,
    /// Total cap of injected bootstrap files (default 150,000 chars).
    pub bootstrap_total_max_chars: Option<usize>,
    /// The user's time zone, named in the system prompt (never the time itself).
    pub user_timezone: Option<String>,
    /// The model's context window in tokens (default 200,000). Windows of 8k and up work:
    /// the reserve, the kept tail and the memory-flush threshold scale with it.
    pub context_tokens: Option<usize>,
    /// Compaction and the pre-compaction memory flush (`compaction:`).
    pub compaction: clawless_core::compaction::plan::CompactionConfig,
    /// Pruning of old tool results in requests (`contextPruning:`; off by default, `cache-ttl`
    /// with a 1-hour TTL by default for Anthropic models).
    pub context_pruning: Option<clawless_core::compaction::pruning::PruningSettings>,
}

/// `agents.list[]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentConfig {
    /// Agent id.
    pub id: String,
    /// Workspace root; defaults to `agents.defaults.workspace`.
    pub workspace: Option<String>,
    /// Skill filter; when present (even empty) it replaces the default entirely.
    pub skills: Option<Vec<String>>,
    /// Agent-level tool policy (`agents.list[].tools`).
    pub tools: Option<clawless_core::tool_policy::AgentToolsConfig>,
}

/// One agent with its inherited settings resolved.
/// `channels:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ChannelsSection {
    /// The generic JSON webhook channel.
    pub generic: Option<GenericChannelConfig>,
    /// A Telegram bot (`POST /webhook/telegram`).
    pub telegram: Option<clawless_channels::TelegramConfig>,
    /// A Slack app (`POST /webhook/slack`, `POST /webhook/slack/interactive`).
    pub slack: Option<clawless_channels::SlackConfig>,
    /// A Discord application (`POST /webhook/discord`).
    pub discord: Option<clawless_channels::DiscordConfig>,
}

/// `channels.generic`.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GenericChannelConfig {
    /// HMAC secret, inline (prefer `secretEnv`).
    pub secret: Option<String>,
    /// Environment variable holding the HMAC secret (default `CLAWLESS_GENERIC_SECRET`).
    pub secret_env: Option<String>,
    /// Where replies are POSTed.
    pub reply_url: Option<String>,
    /// Sender ids treated as the owner.
    pub owners: Vec<String>,
    /// Other sender ids allowed to talk to the agent (`*`: anyone, the generic channel's
    /// default, its callers holding the secret already).
    pub allow_from: Option<Vec<String>>,
    /// Who may talk in group chats (default `open` on this channel).
    pub group_policy: Option<crate::ingress::GroupPolicy>,
    /// Sent to a sender not allowed (nothing when unset).
    pub unauthorized_reply: Option<String>,
}

impl std::fmt::Debug for GenericChannelConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GenericChannelConfig")
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("secret_env", &self.secret_env)
            .field("reply_url", &self.reply_url)
            .field("owners", &self.owners)
            .field("allow_from", &self.allow_from)
            .field("group_policy", &self.group_policy)
            .field("unauthorized_reply", &self.unauthorized_reply)
            .finish()
    }
}

/// Default environment variable of the generic channel's secret.
pub const GENERIC_SECRET_ENV: &str = "CLAWLESS_GENERIC_SECRET";

impl GenericChannelConfig {
    /// The secret: inline, else from `secretEnv` (or its default) via `env`.
    pub fn resolve_secret(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        self.secret
            .clone()
            .or_else(|| env(self.secret_env.as_deref().unwrap_or(GENERIC_SECRET_ENV)))
            .filter(|secret| !secret.is_empty())
    }
}

/// `session:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SessionSection {
    /// `main` (default), `per-peer` or `per-channel-peer`.
    pub dm_scope: clawless_core::session::key::DmScope,
    /// `reset`, `resetByType`, `resetByChannel`, `idleMinutes` and `resetTriggers`: when a
    /// session starts a new generation on its own (never, by default) and which commands
    /// start one (`/new` and `/reset`).
    #[serde(flatten)]
    pub resets: clawless_core::session::reset::SessionResetConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAgent {
    /// Agent id.
    pub id: String,
    /// Workspace root, if any.
    pub workspace: Option<String>,
    /// Effective skill filter.
    pub skill_filter: Option<Vec<String>>,
}

/// `origin:line:column: key.path: problem`, with what of it is known.
fn yaml_error(origin: &str, key_path: Option<&str>, err: &serde_yaml::Error) -> String {
    let at = match err.location() {
        Some(location) => format!("{origin}:{}:{}", location.line(), location.column()),
        None => origin.to_owned(),
    };
    // serde_yaml appends " at line L column C" itself; the position is already in front.
    let message = err.to_string();
    let message = message
        .split_once(" at line ")
        .map_or(message.as_str(), |(head, _)| head);
    match key_path.filter(|path| !path.is_empty() && *path != ".") {
        Some(path) => format!("{at}: {path}: {message}"),
        None => format!("{at}: {message}"),
    }
}

impl ClawlessConfig {
    /// Parses a YAML document (with `serde_yaml`, behind this one function); `origin` names
    /// it in errors, which also give the line, column and full key path of the problem, e.g.
    /// `clawless.yaml:7:17: channels.telegram.requireMention: invalid type: …`.
    pub fn from_yaml(text: &str, origin: &str) -> Result<Self, ConfigError> {
        let invalid = |reason: String| ConfigError::Invalid {
            path: origin.to_owned(),
            reason,
        };
        if text.trim().is_empty() {
            return Ok(Self {
                document: Value::Object(Default::default()),
                ..Self::default()
            });
        }
        let document: Value =
            serde_yaml::from_str(text).map_err(|err| invalid(yaml_error(origin, None, &err)))?;
        if !document.is_object() {
            return Err(invalid("the top level must be a mapping".to_owned()));
        }
        let deserializer = serde_yaml::Deserializer::from_str(text);
        let mut config: Self = serde_path_to_error::deserialize(deserializer).map_err(|err| {
            let path = err.path().to_string();
            invalid(yaml_error(origin, Some(&path), err.inner()))
        })?;
        config.document = document;
        Ok(config)
    }

    /// Reads a config file; relative directories in it are taken from the file's folder.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let mut config = Self::from_yaml(&text, &path.display().to_string())?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        config.rebase_dirs(&base);
        Ok(config)
    }

    /// Reads a config from a file path or an `s3://` URI.
    pub async fn load(location: &str, stores: &StoreFactory) -> Result<Self, ConfigError> {
        match SourceUri::parse(location)? {
            SourceUri::Dir(path) => Self::from_file(&path),
            SourceUri::S3 { bucket, prefix } => {
                let key = prefix.trim_end_matches('/').to_owned();
                let uri = SourceUri::S3 {
                    bucket,
                    prefix: String::new(),
                };
                let fetch_error = |source| ConfigError::Fetch {
                    path: location.to_owned(),
                    source,
                };
                let (store, _) = stores.open(&uri).map_err(fetch_error)?;
                let object = store
                    .get(&key, MAX_CONFIG_BYTES)
                    .await
                    .map_err(fetch_error)?
                    .ok_or_else(|| ConfigError::Invalid {
                        path: location.to_owned(),
                        reason: "no such object".to_owned(),
                    })?;
                let text = String::from_utf8(object.bytes).map_err(|_| ConfigError::Invalid {
                    path: location.to_owned(),
                    reason: "not UTF-8 text".to_owned(),
                })?;
                Self::from_yaml(&text, location)
            }
        }
    }

    /// Every agent, with defaults applied; one `main` agent when none is listed.
    pub fn agents(&self) -> Vec<ResolvedAgent> {
        let defaults = &self.agents.defaults;
        if self.agents.list.is_empty() {
            return vec![ResolvedAgent {
                id: DEFAULT_AGENT_ID.to_owned(),
                workspace: defaults.workspace.clone(),
                skill_filter: defaults.skills.clone(),
            }];
        }
        self.agents
            .list
            .iter()
            .map(|agent| ResolvedAgent {
                id: agent.id.trim().to_owned(),
                workspace: agent
                    .workspace
                    .clone()
                    .or_else(|| defaults.workspace.clone()),
                skill_filter: agent.skills.clone().or_else(|| defaults.skills.clone()),
            })
            .collect()
    }

    /// The agent with this id (ids compare trimmed and case-insensitively).
    pub fn agent(&self, id: &str) -> Option<ResolvedAgent> {
        self.agents()
            .into_iter()
            .find(|agent| agent.id.eq_ignore_ascii_case(id.trim()))
    }

    /// Makes relative directory locations relative to `base`.
    fn rebase_dirs(&mut self, base: &Path) {
        let rebase = |location: &mut String| {
            if let Ok(SourceUri::Dir(path)) = SourceUri::parse(location)
                && path.is_relative()
            {
                *location = base.join(path).display().to_string();
            }
        };
        self.skills.bundled.iter_mut().for_each(rebase);
        self.skills.managed.iter_mut().for_each(rebase);
        self.skills.extra.iter_mut().for_each(rebase);
        self.agents.defaults.workspace.iter_mut().for_each(rebase);
        for agent in &mut self.agents.list {
            agent.workspace.iter_mut().for_each(rebase);
        }
    }
}

/// The conventional layout of a deployment bucket: bundled and managed skills under
/// `skills/`, each agent's workspace under `agents/<id>/workspace/`. Keep other data
/// (transcript blobs) in another bucket, so one listing of this one sees every skill.
pub fn bucket_layout_config(bucket: &str) -> ClawlessConfig {
    let mut config = ClawlessConfig::default();
    config.skills.bundled = Some(format!("s3://{bucket}/skills/bundled"));
    config.skills.managed = Some(format!("s3://{bucket}/skills/managed"));
    config.agents.defaults.workspace =
        Some(format!("s3://{bucket}/agents/{DEFAULT_AGENT_ID}/workspace"));
    config.document = Value::Object(Default::default());
    config
}

/// Environment variable naming the config file or `s3://` object of a deployment.
pub const CONFIG_ENV: &str = "CLAWLESS_CONFIG";
/// Environment variable naming the deployment bucket, used with [`bucket_layout_config`]
/// when [`CONFIG_ENV`] is not set.
pub const BUCKET_ENV: &str = "CLAWLESS_BUCKET";

/// The configuration of a deployed function: `$CLAWLESS_CONFIG` (a path or `s3://` URI),
/// else the conventional layout of `$CLAWLESS_BUCKET`.
pub async fn deployment_config(stores: &StoreFactory) -> Result<ClawlessConfig, ConfigError> {
    if let Some(location) = non_blank_env(CONFIG_ENV) {
        return ClawlessConfig::load(&location, stores).await;
    }
    let bucket = non_blank_env(BUCKET_ENV).ok_or(ConfigError::MissingEnv(BUCKET_ENV))?;
    Ok(bucket_layout_config(bucket.trim()))
}

/// Resolves `location` against the current directory when it is a relative path.
pub fn absolute_dir(location: &str) -> String {
    match SourceUri::parse(location) {
        Ok(SourceUri::Dir(path)) if path.is_relative() => std::env::current_dir()
            .map(|cwd| cwd.join(&path))
            .unwrap_or_else(|_| PathBuf::from(&path))
            .display()
            .to_string(),
        _ => location.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
skills:
  bundled: ./skills
  managed: s3://bucket/skills/managed
  extra: [./extra-one]
  allowBundled: [weather]
  entries:
    weather: { enabled: false, apiKey: k, env: { A: b } }
  limits:
    maxSkillsInPrompt: 10
agents:
  defaults:
    workspace: ./ws
    skills: [weather]
  list:
    - id: main
    - id: restricted
      skills: []
    - id: elsewhere
      workspace: s3://bucket/agents/elsewhere/workspace
channels:
  telegram:
    botTokenEnv: TELEGRAM_TOKEN
    secretTokenEnv: TELEGRAM_SECRET
    owners: ["42"]
"#;

    #[test]
    fn a_full_config_parses_and_keeps_the_document_for_config_paths() {
        let config = ClawlessConfig::from_yaml(SAMPLE, "sample").unwrap();
        assert_eq!(
            config.skills.managed.as_deref(),
            Some("s3://bucket/skills/managed")
        );
        assert_eq!(config.skills.engine.allow_bundled, ["weather"]);
        assert_eq!(config.skills.engine.entries["weather"].enabled, Some(false));
        assert_eq!(config.skills.engine.entries["weather"].env["A"], "b");
        assert_eq!(config.skills.engine.limits.max_skills_in_prompt, 10);
        assert_eq!(
            config.skills.engine.limits.max_skills_loaded_per_source, 200,
            "unset limits keep defaults"
        );
        assert_eq!(
            config.document["channels"]["telegram"]["botTokenEnv"],
            "TELEGRAM_TOKEN"
        );
        assert_eq!(
            config.channels.telegram.as_ref().map(|t| t.owners.clone()),
            Some(vec!["42".to_owned()])
        );
    }

    #[test]
    fn the_secrets_section_names_one_source_per_name() {
        let text = "secrets:\n  TELEGRAM_BOT_TOKEN: {ssm: /clawless/telegram}\n  SLACK_SIGNING_SECRET: {secretsManager: clawless/slack, key: signingSecret}\n";
        let config = ClawlessConfig::from_yaml(text, "t").unwrap();
        assert_eq!(
            config.secrets["TELEGRAM_BOT_TOKEN"].ssm.as_deref(),
            Some("/clawless/telegram")
        );
        assert_eq!(
            config.secrets["SLACK_SIGNING_SECRET"].key.as_deref(),
            Some("signingSecret")
        );
        let typo = ClawlessConfig::from_yaml("secrets:\n  X: {sssm: /a}\n", "t").unwrap_err();
        assert!(typo.to_string().contains("secrets.X"), "{typo}");
    }

    #[test]
    fn secrets_stay_out_of_the_debug_output() {
        let text = "skills:\n  entries:\n    weather: { apiKey: skill-secret-1 }\nmodels:\n  providers:\n    anthropic: { apiKey: model-secret-2 }\nchannels:\n  generic: { secret: generic-secret-3 }\n  telegram: { botToken: \"1:telegram-secret-4\", secretToken: hook-secret-5 }\n  slack: { botToken: slack-secret-6, signingSecret: slack-secret-7 }\n";
        let config = ClawlessConfig::from_yaml(text, "t").unwrap();
        let shown = format!("{config:?}");
        for secret in [
            "skill-secret-1",
            "model-secret-2",
            "generic-secret-3",
            "telegram-secret-4",
            "hook-secret-5",
            "slack-secret-6",
            "slack-secret-7",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
    }

    #[test]
    fn a_config_error_names_the_file_line_column_and_key_path() {
        let text = "skills:\n  bundled: ./skills\nchannels:\n  telegram:\n    owners: [\"1\"]\n    requireMention: sometimes\n";
        let err = ClawlessConfig::from_yaml(text, "clawless.yaml").unwrap_err();
        let ConfigError::Invalid { reason, .. } = err else {
            panic!("{err:?}")
        };
        assert!(
            reason.starts_with("clawless.yaml:6:21: channels.telegram.requireMention: "),
            "{reason}"
        );
        let err = ClawlessConfig::from_yaml("skills: [\n", "broken.yaml").unwrap_err();
        assert!(err.to_string().contains("broken.yaml:"), "{err}");
        let err = ClawlessConfig::from_yaml("- a list\n", "list.yaml").unwrap_err();
        assert!(err.to_string().contains("mapping"), "{err}");
    }

    #[test]
    fn agents_inherit_defaults_and_an_own_skills_list_replaces_them() {
        let config = ClawlessConfig::from_yaml(SAMPLE, "sample").unwrap();
        let main = config.agent("MAIN").unwrap();
        assert_eq!(main.skill_filter, Some(vec!["weather".to_owned()]));
        assert_eq!(main.workspace.as_deref(), Some("./ws"));
        assert_eq!(
            config.agent("restricted").unwrap().skill_filter,
            Some(vec![])
        );
        assert_eq!(
            config.agent("elsewhere").unwrap().workspace.as_deref(),
            Some("s3://bucket/agents/elsewhere/workspace")
        );
        assert!(config.agent("nobody").is_none());
    }

    #[test]
    fn an_empty_config_has_one_main_agent() {
        let config = ClawlessConfig::from_yaml("", "empty").unwrap();
        let agents = config.agents();
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0].id, DEFAULT_AGENT_ID);
        assert_eq!(agents[0].skill_filter, None);
    }

    #[test]
    fn bad_documents_are_reported_with_their_origin() {
        for (text, needle) in [
            ("- a\n- b\n", "mapping"),
            ("skills: [1, 2]\n", "skills"),
            (
                "skills:\n  limits:\n    maxSkillsInPrompt: lots\n",
                "skills: invalid type: string \"lots\", expected usize",
            ),
            (
                "skills:\n  limits:\n    maxSkilsInPrompt: 3\n",
                "maxSkilsInPrompt",
            ),
            ("a: [unclosed\n", "clawless.yaml"),
        ] {
            let err = ClawlessConfig::from_yaml(text, "clawless.yaml")
                .unwrap_err()
                .to_string();
            assert!(err.contains("clawless.yaml"), "{err}");
            assert!(err.contains(needle), "{text:?} → {err}");
        }
    }

    #[test]
    fn relative_directories_in_a_file_are_taken_from_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("clawless.yaml");
        std::fs::write(&path, SAMPLE).unwrap();
        let config = ClawlessConfig::from_file(&path).unwrap();
        assert_eq!(
            config.skills.bundled.unwrap(),
            dir.path().join("./skills").display().to_string()
        );
        assert_eq!(config.skills.managed.unwrap(), "s3://bucket/skills/managed");
        assert_eq!(
            config.agents.defaults.workspace.unwrap(),
            dir.path().join("./ws").display().to_string()
        );
    }

    #[test]
    fn the_bucket_layout_puts_every_skill_source_in_one_bucket() {
        let config = bucket_layout_config("b");
        assert_eq!(
            config.skills.bundled.as_deref(),
            Some("s3://b/skills/bundled")
        );
        assert_eq!(
            config.agents()[0].workspace.as_deref(),
            Some("s3://b/agents/main/workspace")
        );
    }
}
