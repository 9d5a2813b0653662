//! `clawless.yaml`: the deployment's configuration, as far as it is built. Every section it
//! reads denies unknown keys, so a typo is an error naming its line, column and key path; the
//! top level stays open, and the whole document is also kept as JSON, so skills can gate on
//! any dotted path (`requires.config`). With the `schema` feature the types also describe
//! themselves as a JSON Schema (see `config_schema`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clawless_automation::heartbeat::{
    HeartbeatAgent, HeartbeatConfig, HeartbeatVisibility, HeartbeatVisibilityConfig,
    heartbeat_agents,
};
use clawless_base::object_store::StoreError;
use clawless_base::session_key::DmScope;
use clawless_core::session::reset::{
    ResetByType, ResetPolicy, SessionResetConfig, lenient_minutes,
};
use clawless_skills::{SkillEntryConfig, SkillLimits, SkillsConfig};
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

/// `clawless.yaml`: the configuration of one clawless deployment (the Lambda functions or
/// `clawless local`). Every section is optional. Unknown keys inside the sections below are
/// errors; other top-level keys are kept, so that a skill's `requires.config` can gate on
/// any dotted path (e.g. `browser.enabled`).
#[derive(Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default)]
pub struct ClawlessConfig {
    /// Where skills come from (bundled, managed, extra sources) and the skills engine's
    /// settings: the bundled allowlist, per-skill entries and limits.
    #[cfg_attr(feature = "schema", schemars(with = "SkillsYaml", extend("default" = {})))]
    pub skills: SkillsSection,
    /// The agents: settings every agent inherits (`defaults`) and the agents themselves
    /// (`list`).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub agents: AgentsSection,
    /// The model: primary, fallbacks, limits and per-provider settings.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub models: clawless_llm::ModelsConfig,
    /// The global tool policy (which tools the model is offered: profiles, allow and deny
    /// lists, per provider, for sub-agents and sandboxes) and the session tools' settings.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub tools: crate::tools_section::ToolsSection,
    /// Chat channels (generic JSON webhook, Telegram, Slack, Discord): their secrets, who may
    /// talk to the agent and where replies go.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub channels: ChannelsSection,
    /// How messages map to sessions, and when a session starts over (automatic resets and
    /// reset commands).
    #[cfg_attr(
        feature = "schema",
        schemars(with = "SessionYaml", extend("default" = {}))
    )]
    pub session: SessionSection,
    /// Commands on node hosts: the default node, timeouts and what happens when nobody
    /// answers an approval request.
    pub exec: crate::nodes_service::ExecSettings,
    /// Scheduled jobs and reminders (the `cron` tool and `clawless cron`): whether they fire,
    /// retries, run-log limits, webhook token, failure alerts.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub cron: clawless_automation::cron::CronConfig,
    /// Who may see the agent's memory: `groups: allow` lets group and channel sessions have
    /// `MEMORY.md` and the memory tools (never a sandboxed session).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub memory: clawless_core::sandbox::MemoryConfig,
    /// Secrets kept in AWS, by the name `…Env` keys use (e.g. `botTokenEnv:
    /// TELEGRAM_BOT_TOKEN`): each is fetched once at start-up from SSM Parameter Store or
    /// Secrets Manager and looked up before the process environment.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub secrets: BTreeMap<String, crate::secrets::SecretSource>,
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
            .field("cron", &self.cron)
            .field("memory", &self.memory)
            .field("secrets", &self.secrets)
            .finish_non_exhaustive()
    }
}

/// `skills:`: where skills come from, plus the engine's settings.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "SkillsYaml")]
pub struct SkillsSection {
    /// Bundled skills: a directory or `s3://` URI.
    pub bundled: Option<String>,
    /// Managed skills: a directory or `s3://` URI.
    pub managed: Option<String>,
    /// Extra sources, lowest precedence.
    pub extra: Vec<String>,
    /// `allowBundled`, `entries`, `limits`.
    pub engine: SkillsConfig,
    /// `refreshSeconds`: how often a warm process checks its skill sources (and the
    /// workspace listing read with them) for changes; unset, [`DEFAULT_SKILLS_REFRESH_SECONDS`].
    pub refresh_seconds: Option<u64>,
}

/// How often a warm process lists its skill sources when `skills.refreshSeconds` is unset.
pub const DEFAULT_SKILLS_REFRESH_SECONDS: u64 = 30;

impl SkillsSection {
    /// `refreshSeconds` in milliseconds.
    pub fn refresh_ms(&self) -> u64 {
        self.refresh_seconds
            .unwrap_or(DEFAULT_SKILLS_REFRESH_SECONDS)
            .saturating_mul(1_000)
    }
}

/// `skills:` as written. Its keys are spelled out rather than flattened from [`SkillsConfig`],
/// so an unknown key is an error with its line and column (serde cannot deny unknown fields
/// through `#[serde(flatten)]`).
#[derive(Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "SkillsSection"))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct SkillsYaml {
    /// Skills shipped with clawless: a directory (relative to this file) or an `s3://` URI.
    /// Unset: the CLI takes `$CLAWLESS_BUNDLED_SKILLS_DIR`, else a `skills/` folder nearby.
    bundled: Option<String>,
    /// Skills installed for every agent of the deployment: a directory (relative to this
    /// file) or an `s3://` URI. They win over bundled skills of the same name.
    managed: Option<String>,
    /// More skill sources (directories or `s3://` URIs), with the lowest precedence.
    extra: Vec<String>,
    /// When not empty, the only bundled skills allowed, by skill key or name. Managed,
    /// workspace and extra skills are not affected.
    allow_bundled: Vec<String>,
    /// Per-skill settings, keyed by skill key (the skill's `metadata.skillKey`, else its
    /// name).
    entries: BTreeMap<String, SkillEntryConfig>,
    /// Bounds on skill discovery and on the prompt's skills block.
    limits: SkillLimits,
    /// How often, in seconds, a warm process lists its skill sources again to see changes
    /// made elsewhere (a write through the agent's own tools is seen at once). 0 lists on
    /// every turn.
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_SKILLS_REFRESH_SECONDS)))]
    refresh_seconds: Option<u64>,
}

impl From<SkillsYaml> for SkillsSection {
    fn from(yaml: SkillsYaml) -> Self {
        Self {
            bundled: yaml.bundled,
            managed: yaml.managed,
            extra: yaml.extra,
            engine: SkillsConfig {
                allow_bundled: yaml.allow_bundled,
                entries: yaml.entries,
                limits: yaml.limits,
            },
            refresh_seconds: yaml.refresh_seconds,
        }
    }
}

/// `agents:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AgentsSection {
    /// Settings every agent inherits.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub defaults: AgentDefaults,
    /// The agents, each with its own id. Unset or empty: one agent, `main`, with the
    /// defaults.
    #[cfg_attr(feature = "schema", schemars(extend("default" = [])))]
    pub list: Vec<AgentConfig>,
}

/// `agents.defaults`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct AgentDefaults {
    /// The agent workspace (bootstrap files such as `AGENTS.md`, `memory/`, `skills/` and
    /// `.agents/skills/`): a directory (relative to this file) or an `s3://` URI. Unset:
    /// `clawless local` uses `<state dir>/workspace`; the functions use the bucket layout.
    pub workspace: Option<String>,
    /// The skills an agent may use, by name. Unset: every skill; `[]`: none.
    pub skills: Option<Vec<String>>,
    /// The most model calls one turn may make before it stops with a message.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = clawless_core::turn::DEFAULT_MAX_MODEL_CALLS))
    )]
    pub max_model_calls: Option<u32>,
    /// The most characters of one bootstrap file (`AGENTS.md`, `SOUL.md`, …) put in the
    /// system prompt; a longer file is cut.
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "default" = clawless_core::system_prompt::bootstrap::DEFAULT_BOOTSTRAP_MAX_CHARS
        ))
    )]
    pub bootstrap_max_chars: Option<usize>,
    /// The most characters of all bootstrap files together in the system prompt.
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "default" = clawless_core::system_prompt::bootstrap::DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS
        ))
    )]
    pub bootstrap_total_max_chars: Option<usize>,
    /// The user's IANA time zone (e.g. `Europe/Paris`): named in the system prompt (never
    /// the time itself), and the zone of daily resets and of memory notes' dates. Unset:
    /// UTC, and the prompt names no zone.
    pub user_timezone: Option<String>,
    /// The model's context window in tokens. Windows of 8k and up work: the reserve, the kept
    /// tail and the memory-flush threshold scale with it. A provider's overflow error lowers
    /// it for the session.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = clawless_core::compaction::plan::DEFAULT_CONTEXT_WINDOW))
    )]
    pub context_tokens: Option<usize>,
    /// Compaction (summarising older conversation when the context fills up) and the
    /// memory flush before it.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub compaction: clawless_core::compaction::plan::CompactionConfig,
    /// Pruning of old tool results in requests once the provider's prompt cache has gone
    /// cold (the stored transcript keeps everything).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub context_pruning: Option<clawless_core::compaction::pruning::PruningSettings>,
    /// Heartbeats: a periodic turn in which the agent reads `HEARTBEAT.md` and either answers
    /// `HEARTBEAT_OK` (never sent to a chat) or sends an alert. Unset: the default agent gets
    /// one every 30 minutes, which costs nothing while `HEARTBEAT.md` has only headings.
    /// When any agent in `list` has its own `heartbeat`, only those agents run heartbeats.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub heartbeat: Option<HeartbeatConfig>,
    /// Sub-agents (`sessions_spawn`): how deep they may nest, how many run per session, their
    /// model and time limit, which agents they may run as, when finished ones are archived.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub subagents: Option<clawless_core::subagents::config::SubagentsConfig>,
    /// Which sessions run sandboxed (`mode`: `untrusted` by default, i.e. once anyone but an
    /// owner has written in them), which share a sandbox workspace (`scope`) and what they
    /// may do with the agent's workspace (`workspaceAccess`).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub sandbox: Option<clawless_core::sandbox::SandboxConfig>,
    /// The longest side, in pixels, of an image shown to a model: a larger image is scaled
    /// down keeping its aspect ratio and re-encoded (PNG stays PNG, others become JPEG).
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = crate::media::resize::DEFAULT_IMAGE_MAX_DIMENSION_PX))
    )]
    pub image_max_dimension_px: Option<u32>,
    /// The vision model the `image` tool describes images with, and that describes a photo
    /// sent to a chat model without vision: `{primary, fallbacks}` or one `provider/model`.
    /// Unset: the session's own model, when it sees images (a photo is then only named to
    /// a model without vision).
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub image_model: Option<ImageModelConfig>,
    /// How hard models think before answering, in sessions that did not choose with
    /// `/think`: `off`, `minimal`, `low`, `medium`, `high`, `xhigh` (models that take it;
    /// `high` elsewhere) or `adaptive`. Unset: `off`.
    #[cfg_attr(feature = "schema", schemars(extend("default" = "off")))]
    pub thinking_default: Option<clawless_base::thinking::ThinkingLevel>,
    /// The models a session may switch to with `/model` (or `/<alias>`), keyed
    /// `provider/model`, each with an optional `alias` and its own `contextTokens`. A model
    /// listed here is allowed besides `models.primary`, `models.fallbacks` and
    /// `models.allowed`. Listed without an alias, a well-known model gets OpenClaw's (`opus`
    /// for `anthropic/claude-opus-4-6`, `sonnet`, `gpt`, `gpt-mini`, `gemini`, …).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub models: BTreeMap<String, ModelEntry>,
}

/// One entry of `agents.defaults.models`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ModelEntry {
    /// A short name for the model: `/model <alias>` and `/<alias>` switch to it, and the
    /// system prompt lists it. Matched in any case.
    pub alias: Option<String>,
    /// This model's context window in tokens, used instead of `agents.defaults.contextTokens`
    /// while a session runs on it.
    pub context_tokens: Option<usize>,
    /// Request parameters as OpenClaw configs carry them. `thinking` (a level) is this
    /// model's default thinking level; the others are accepted so such a config loads, and
    /// not sent to the provider.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub params: BTreeMap<String, serde_json::Value>,
}

/// `agents.defaults.imageModel`: one `provider/model`, or a primary with fallbacks.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(untagged)]
pub enum ImageModelConfig {
    /// One `provider/model`.
    One(String),
    /// A primary and the models tried after it, in order.
    Chain {
        /// `provider/model` tried first.
        #[serde(default)]
        primary: Option<String>,
        /// `provider/model`s tried after the primary fails.
        #[serde(default)]
        fallbacks: Vec<String>,
    },
}

impl ImageModelConfig {
    /// The models to try, in order, blanks left out.
    pub fn models(&self) -> Vec<String> {
        let all: Vec<&String> = match self {
            Self::One(model) => vec![model],
            Self::Chain { primary, fallbacks } => primary.iter().chain(fallbacks).collect(),
        };
        all.into_iter()
            .map(|model| model.trim().to_owned())
            .filter(|model| !model.is_empty())
            .collect()
    }
}

impl AgentDefaults {
    /// `imageMaxDimensionPx`, 1200 when unset.
    pub fn image_max_dimension_px(&self) -> u32 {
        self.image_max_dimension_px
            .unwrap_or(crate::media::resize::DEFAULT_IMAGE_MAX_DIMENSION_PX)
    }
}

/// `agents.list[]`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentConfig {
    /// The agent's id: letters, digits, `_` and `-` (compared case-insensitively). Required.
    pub id: String,
    /// This agent's workspace: a directory (relative to this file) or an `s3://` URI.
    /// Unset: `agents.defaults.workspace`.
    #[serde(default)]
    pub workspace: Option<String>,
    /// This agent's skills, by name. When present (even `[]`) it replaces
    /// `agents.defaults.skills` entirely; unset, the default applies.
    #[serde(default)]
    pub skills: Option<Vec<String>>,
    /// This agent's tool policy, applied after the global `tools:`. Unset: the global
    /// policy alone.
    #[serde(default)]
    pub tools: Option<clawless_core::tool_policy::AgentToolsConfig>,
    /// This agent's heartbeat settings, each unset key taken from
    /// `agents.defaults.heartbeat`. Once any agent has this block, only such agents run
    /// heartbeats.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub heartbeat: Option<HeartbeatConfig>,
    /// This agent's sub-agent settings (`model`, `thinking`, `allowAgents`,
    /// `requireAgentId`) over `agents.defaults.subagents`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub subagents: Option<clawless_core::subagents::config::AgentSubagentsConfig>,
    /// This agent's sandbox settings, each unset key taken from `agents.defaults.sandbox`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub sandbox: Option<clawless_core::sandbox::SandboxConfig>,
    /// This agent's thinking level in sessions that did not choose with `/think`. Unset:
    /// `agents.defaults.thinkingDefault`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub thinking_default: Option<clawless_base::thinking::ThinkingLevel>,
    /// Whether this agent's sessions show the model's reasoning (`on`, `off`, `stream`)
    /// unless they chose with `/reasoning`. Unset: `off`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub reasoning_default: Option<clawless_base::thinking::ReasoningLevel>,
}

/// A channel's per-group tool policies, by chat id (`"*"` for every other group).
pub type ChannelGroups = indexmap::IndexMap<String, clawless_core::tool_policy::GroupToolsConfig>;

/// `channels:`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ChannelsSection {
    /// The generic JSON webhook channel (`POST /webhook/generic`, HMAC-signed). Unset:
    /// `clawless local` still runs it with its own secret and reply URL; the functions
    /// answer it only with a secret in `CLAWLESS_GENERIC_SECRET`.
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub generic: Option<GenericChannelConfig>,
    /// A Telegram bot (`POST /webhook/telegram`). Unset: no Telegram channel.
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub telegram: Option<clawless_channels::TelegramConfig>,
    /// A Slack app (`POST /webhook/slack`, `POST /webhook/slack/interactive`). Unset: no
    /// Slack channel.
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub slack: Option<clawless_channels::SlackConfig>,
    /// A Discord application (`POST /webhook/discord`). Unset: no Discord channel.
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub discord: Option<clawless_channels::DiscordConfig>,
    /// Settings for every channel.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub defaults: ChannelDefaults,
}

/// `channels.defaults`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct ChannelDefaults {
    /// What heartbeats may show in a chat: `showOk` (send `HEARTBEAT_OK` when nothing needs
    /// attention; default false) and `showAlerts` (send alerts; default true).
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub heartbeat: Option<HeartbeatVisibilityConfig>,
}

/// Who may talk on the generic channel when `allowFrom` is unset: anyone, since its callers
/// hold the secret already.
pub const GENERIC_DEFAULT_ALLOW_FROM: &str = "*";

/// The generic channel's group policy when `groupPolicy` is unset.
pub const GENERIC_DEFAULT_GROUP_POLICY: crate::ingress::GroupPolicy =
    crate::ingress::GroupPolicy::Open;

/// `channels.generic`.
#[derive(Clone, Default, PartialEq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct GenericChannelConfig {
    /// The HMAC-SHA256 secret that signs webhook bodies and replies, inline. Prefer
    /// `secretEnv`.
    pub secret: Option<String>,
    /// The name of the environment variable (or `secrets:` entry) holding the HMAC secret.
    #[cfg_attr(feature = "schema", schemars(extend("default" = GENERIC_SECRET_ENV)))]
    pub secret_env: Option<String>,
    /// Where replies are POSTed, signed like the webhooks. Unset: `clawless local` uses its
    /// own `/local/replies` (what `clawless chat` reads).
    pub reply_url: Option<String>,
    /// Sender ids of the agent's owners: always allowed, and the only ones who may use
    /// owner-only tools and `/approve`. Unset: `clawless local` makes `clawless chat`'s
    /// sender the owner.
    pub owners: Vec<String>,
    /// Sender ids of other people allowed to talk to the agent; `*` allows anyone (the
    /// default here: callers hold the secret already).
    #[cfg_attr(feature = "schema", schemars(extend("default" = [GENERIC_DEFAULT_ALLOW_FROM])))]
    pub allow_from: Option<Vec<String>>,
    /// Who may talk in group chats: `open` (anyone), `allowlist` (owners and `allowFrom`) or
    /// `disabled` (group messages start no turn).
    #[cfg_attr(feature = "schema", schemars(extend("default" = GENERIC_DEFAULT_GROUP_POLICY)))]
    pub group_policy: Option<crate::ingress::GroupPolicy>,
    /// Sent to a sender who may not talk to the agent; unset, such a message gets no answer.
    pub unauthorized_reply: Option<String>,
    /// Per group (by chat id; `"*"` for every other group): the tools the agent may use
    /// there, for everyone (`tools`) or for single senders (`toolsBySender`, keyed
    /// `id:<senderId>`); the first match applies.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub groups: ChannelGroups,
    /// Largest file a message may bring (inline, or fetched from its `url`) that is stored,
    /// in MB (1 to 2048); bigger ones reach the agent as a note.
    #[cfg_attr(feature = "schema", schemars(extend("default" = clawless_channels::generic::DEFAULT_MEDIA_MAX_MB)))]
    pub media_max_mb: Option<u64>,
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
            .field("groups", &self.groups)
            .field("media_max_mb", &self.media_max_mb)
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
#[serde(from = "SessionYaml")]
pub struct SessionSection {
    /// `main` (default), `per-peer` or `per-channel-peer`.
    pub dm_scope: DmScope,
    /// `reset`, `resetByType`, `resetByChannel`, `idleMinutes` and `resetTriggers`: when a
    /// session starts a new generation on its own (never, by default) and which commands
    /// start one (`/new` and `/reset`).
    pub resets: SessionResetConfig,
    /// `agentToAgent.maxPingPongTurns`: the follow-up turns after a `sessions_send`.
    pub agent_to_agent: clawless_core::subagents::SessionAgentToAgentConfig,
}

/// `session:` as written: [`SessionResetConfig`]'s keys spelled out next to `dmScope`, so an
/// unknown key is an error with its line and column.
#[derive(Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "SessionSection"))]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
struct SessionYaml {
    /// How direct messages map to sessions: `main` (every direct message shares the agent's
    /// main session), `per-peer` (one session per sender) or `per-channel-peer` (one per
    /// channel and sender).
    dm_scope: DmScope,
    /// The base reset policy: when a session starts a new generation on its own. Unset: no
    /// automatic reset (only `/new`, `/reset` and the other `resetTriggers`).
    reset: Option<ResetPolicy>,
    /// Reset policies per kind of conversation (`direct`, `group`, `thread`), over `reset`
    /// field by field.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    reset_by_type: ResetByType,
    /// A reset policy per channel (`telegram`, `slack`, `discord`, `generic`) that replaces
    /// every other reset setting for that channel's sessions.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    reset_by_channel: BTreeMap<String, ResetPolicy>,
    /// Legacy: idle mode with this many minutes when neither `reset` nor `resetByType` is
    /// set, and the idle timeout of last resort otherwise. Prefer `reset: {mode: idle,
    /// idleMinutes: …}`.
    #[serde(deserialize_with = "lenient_minutes")]
    #[cfg_attr(feature = "schema", schemars(with = "Option<u64>"))]
    idle_minutes: Option<u64>,
    /// Messages that start a new session (a bare trigger, or a trigger followed by the first
    /// message of the new one). Unset or empty: `/new` and `/reset`.
    #[cfg_attr(
        feature = "schema",
        schemars(extend("default" = clawless_core::session::reset::DEFAULT_RESET_TRIGGERS))
    )]
    reset_triggers: Vec<String>,
    /// What follows a `sessions_send` between two sessions: `maxPingPongTurns` (0–5,
    /// default 5) alternating reply turns before the target's announce step.
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    agent_to_agent: clawless_core::subagents::SessionAgentToAgentConfig,
}

impl From<SessionYaml> for SessionSection {
    fn from(yaml: SessionYaml) -> Self {
        Self {
            dm_scope: yaml.dm_scope,
            resets: SessionResetConfig {
                reset: yaml.reset,
                reset_by_type: yaml.reset_by_type,
                reset_by_channel: yaml.reset_by_channel,
                idle_minutes: yaml.idle_minutes,
                reset_triggers: yaml.reset_triggers,
            },
            agent_to_agent: yaml.agent_to_agent,
        }
    }
}

/// One agent with its inherited settings resolved.
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
        // serde_yaml names the path (or its parent) itself when it knows it; it is said once.
        Some(path) => {
            let message = match message.split_once(": ") {
                Some((head, rest)) if is_path_prefix(head, path) => rest,
                _ => message,
            };
            format!("{at}: {path}: {message}")
        }
        None => format!("{at}: {message}"),
    }
}

/// Whether `prefix` is `path` or one of its ancestors (`a.b` of `a.b.c` and `a.b[0]`).
fn is_path_prefix(prefix: &str, path: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(['.', '[']))
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

    /// The agents that run heartbeats, each with its settings merged over
    /// `agents.defaults.heartbeat` (spec §1.2): those with a `heartbeat` block when any has
    /// one, else the default agent.
    pub fn heartbeat_agents(&self) -> Vec<HeartbeatAgent> {
        let defaults = self.agents.defaults.heartbeat.clone().unwrap_or_default();
        let listed: Vec<(String, Option<HeartbeatConfig>)> = self
            .agents
            .list
            .iter()
            .map(|agent| (agent.id.trim().to_owned(), agent.heartbeat.clone()))
            .collect();
        heartbeat_agents(&defaults, &listed, DEFAULT_AGENT_ID)
            .into_iter()
            .filter(|agent| self.agent(&agent.agent_id).is_some())
            .collect()
    }

    /// Which gates keep `sender_id` on `channel` from elevated exec with agent `agent_id`
    /// (`tools.elevated`, narrowed by the agent's own): none when they may use it.
    pub fn elevated_gates(
        &self, agent_id: &str, channel: Option<&str>, sender_id: Option<&str>,
    ) -> Vec<clawless_core::elevated::ElevatedGate> {
        let agent = self
            .agents
            .list
            .iter()
            .find(|agent| agent.id.eq_ignore_ascii_case(agent_id))
            .and_then(|agent| agent.tools.as_ref())
            .and_then(|tools| tools.elevated.as_ref());
        clawless_core::elevated::elevated_gates(
            self.tools.policy.elevated.as_ref(),
            agent,
            channel,
            sender_id,
        )
    }

    /// The configured owners of `channel` (`channels.<channel>.owners`), which the prompt's
    /// `## Authorized Senders` lists; `*` and blanks left out.
    pub fn authorized_senders(&self, channel: &str) -> Vec<String> {
        let channels = &self.channels;
        let owners = match channel {
            "generic" => channels.generic.as_ref().map(|config| &config.owners),
            "telegram" => channels.telegram.as_ref().map(|config| &config.owners),
            "slack" => channels.slack.as_ref().map(|config| &config.owners),
            "discord" => channels.discord.as_ref().map(|config| &config.owners),
            _ => None,
        };
        owners
            .into_iter()
            .flatten()
            .map(|owner| owner.trim())
            .filter(|owner| !owner.is_empty() && *owner != "*")
            .map(str::to_owned)
            .collect()
    }

    /// `channels.<channel>.groups`: the per-group tool policies of a channel (`None` for a
    /// channel that is not configured).
    pub fn channel_groups(&self, channel: &str) -> Option<&ChannelGroups> {
        self.channel_turn_settings(channel)
            .map(|(_, groups)| groups)
    }

    /// What a turn reads of `channel`'s settings: its `allowFrom` and its `groups`.
    fn channel_turn_settings(&self, channel: &str) -> Option<(&[String], &ChannelGroups)> {
        let channels = &self.channels;
        match channel {
            "generic" => channels.generic.as_ref().map(|config| {
                (
                    config.allow_from.as_deref().unwrap_or_default(),
                    &config.groups,
                )
            }),
            "telegram" => channels
                .telegram
                .as_ref()
                .map(|config| (config.allow_from.as_slice(), &config.groups)),
            "slack" => channels
                .slack
                .as_ref()
                .map(|config| (config.allow_from.as_slice(), &config.groups)),
            "discord" => channels
                .discord
                .as_ref()
                .map(|config| (config.allow_from.as_slice(), &config.groups)),
            _ => None,
        }
    }

    /// The sandbox settings of `agent_id`: its own `sandbox` keys over
    /// `agents.defaults.sandbox`.
    pub fn sandbox_settings(&self, agent_id: &str) -> clawless_core::sandbox::SandboxSettings {
        let agent = self
            .agents
            .list
            .iter()
            .find(|agent| agent.id.eq_ignore_ascii_case(agent_id))
            .and_then(|agent| agent.sandbox.as_ref());
        clawless_core::sandbox::SandboxSettings::resolve(
            self.agents.defaults.sandbox.as_ref(),
            agent,
        )
    }

    /// The heartbeat settings of this agent, when it runs heartbeats.
    pub fn heartbeat_agent(&self, agent_id: &str) -> Option<HeartbeatAgent> {
        self.heartbeat_agents()
            .into_iter()
            .find(|agent| agent.agent_id.eq_ignore_ascii_case(agent_id.trim()))
    }

    /// What heartbeats may show in a chat (`channels.defaults.heartbeat` over the built-in
    /// defaults).
    pub fn heartbeat_visibility(&self) -> HeartbeatVisibility {
        HeartbeatVisibility::resolve(&[self.channels.defaults.heartbeat.as_ref()])
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
            reason.starts_with(
                "clawless.yaml:6:21: channels.telegram.requireMention: invalid type: "
            ),
            "the key path is said once: {reason}"
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
                "clawless.yaml:3:24: skills.limits.maxSkillsInPrompt: invalid type: string \"lots\", expected usize",
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

    /// `(document, error at)`: a typo in every section clawless reads is an error naming its
    /// line, column and key path, including the sections whose keys come from several types.
    const TYPOS: &[(&str, &str)] = &[
        (
            "agents:\n  defaults:\n    contxtTokens: 1000\n",
            "t.yaml:3:5: agents.defaults.contxtTokens: unknown field `contxtTokens`, expected one of",
        ),
        (
            "skills:\n  bundled: ./skills\n  allowBundle: [weather]\n",
            "t.yaml:3:3: skills.allowBundle: unknown field `allowBundle`, expected one of",
        ),
        (
            "skills:\n  entries:\n    weather: { enabeld: false }\n",
            "t.yaml:3:16: skills.entries.weather.enabeld: unknown field `enabeld`",
        ),
        (
            "session:\n  dmScope: per-peer\n  resetTrigger: [/new]\n",
            "t.yaml:3:3: session.resetTrigger: unknown field `resetTrigger`, expected one of",
        ),
        (
            "session:\n  reset: { mode: daily, atHours: 4 }\n",
            "t.yaml:2:25: session.reset.atHours: unknown field `atHours`",
        ),
        (
            "session:\n  idleMinutes: 30\n  reset: { mode: weekly }\n",
            "t.yaml:3:18: session.reset.mode: unknown variant `weekly`",
        ),
        (
            "channels:\n  whatsapp: {}\n",
            "t.yaml:2:3: channels.whatsapp: unknown field `whatsapp`",
        ),
        // TV-22's analog: no setting binds a host path into the jail or gives it the host's
        // network namespace by another name.
        (
            "agents:\n  defaults:\n    sandbox: { docker: { binds: [\"/opt/data:/data:ro\"] } }\n",
            "agents.defaults.sandbox.docker: unknown field `docker`",
        ),
        (
            "agents:\n  defaults:\n    sandbox: { network: host }\n",
            "agents.defaults.sandbox.network: unknown variant `host`",
        ),
        (
            "channels:\n  generic: { replyURL: http://x }\n",
            "t.yaml:2:14: channels.generic.replyURL: unknown field `replyURL`",
        ),
        (
            "agents:\n  list:\n    - id: main\n      skils: []\n",
            "t.yaml:4:7: agents.list[0].skils: unknown field `skils`",
        ),
        (
            "agents:\n  list:\n    - workspace: ./ws\n",
            "t.yaml:3:7: agents.list[0]: missing field `id`",
        ),
        (
            "agents:\n  defaults:\n    compaction: { memoryFlush: { softThreshold: 1 } }\n",
            "agents.defaults.compaction.memoryFlush.softThreshold: unknown field",
        ),
        (
            "agents:\n  defaults:\n    contextPruning: { softTrim: { max: 1 } }\n",
            "agents.defaults.contextPruning.softTrim.max: unknown field",
        ),
        (
            "tools:\n  byProvider: { openai: { denny: [exec] } }\n",
            "tools.byProvider.openai.denny: unknown field",
        ),
        (
            "agents:\n  defaults:\n    heartbeat: { evry: 5m }\n",
            "agents.defaults.heartbeat.evry: unknown field",
        ),
        (
            "agents:\n  list:\n    - id: main\n      heartbeat: { activeHours: { from: \"08:00\" } }\n",
            "agents.list[0].heartbeat.activeHours.from: unknown field",
        ),
        (
            "channels:\n  defaults:\n    heartbeat: { showOK: true }\n",
            "channels.defaults.heartbeat.showOK: unknown field",
        ),
    ];

    #[test]
    fn an_unknown_key_inside_a_section_is_an_error_at_its_line() {
        for (text, expected) in TYPOS {
            let err = ClawlessConfig::from_yaml(text, "t.yaml").unwrap_err();
            let ConfigError::Invalid { reason, .. } = err else {
                panic!("{err:?}")
            };
            assert!(reason.contains(expected), "{text:?}\n  → {reason}");
        }
    }

    #[test]
    fn heartbeats_run_for_the_default_agent_unless_agents_have_their_own() {
        let config = ClawlessConfig::from_yaml("", "t").unwrap();
        let agents = config.heartbeat_agents();
        assert_eq!(agents.len(), 1);
        assert_eq!(agents[0].agent_id, "main");
        assert_eq!(agents[0].config.interval_ms(), Some(30 * 60_000));
        assert!(config.heartbeat_visibility().show_alerts);
        assert!(!config.heartbeat_visibility().show_ok);

        let text = "agents:\n  defaults:\n    heartbeat: { every: 1h, target: last }\n  list:\n    - id: main\n    - id: Ops\n      heartbeat: { every: 15m }\nchannels:\n  defaults:\n    heartbeat: { showOk: true }\n";
        let config = ClawlessConfig::from_yaml(text, "t").unwrap();
        let agents = config.heartbeat_agents();
        let ids: Vec<&str> = agents.iter().map(|agent| agent.agent_id.as_str()).collect();
        assert_eq!(ids, ["ops"], "only agents with a block, once any has one");
        assert_eq!(agents[0].config.interval_ms(), Some(15 * 60_000));
        assert_eq!(agents[0].config.target.as_deref(), Some("last"));
        assert!(config.heartbeat_agent("OPS").is_some());
        assert!(config.heartbeat_agent("main").is_none());
        assert!(config.heartbeat_visibility().show_ok);
    }

    #[test]
    fn unknown_top_level_keys_are_kept_for_skills_requires_config() {
        let text = "browser:\n  enabled: false\nagents: {}\n";
        let config = ClawlessConfig::from_yaml(text, "t").unwrap();
        assert_eq!(config.document["browser"]["enabled"], false);
    }

    #[test]
    fn the_session_and_skills_sections_build_the_core_settings() {
        let text = "session:\n  dmScope: per-channel-peer\n  reset: { mode: idle, idleMinutes: 90 }\n  resetByType: { dm: { mode: daily } }\n  resetByChannel: { slack: { mode: none } }\n  idleMinutes: \"45\"\n  resetTriggers: [/fresh]\nskills:\n  allowBundled: [weather]\n  entries: { weather: { config: { units: metric } } }\n";
        let config = ClawlessConfig::from_yaml(text, "t").unwrap();
        assert_eq!(config.session.dm_scope, DmScope::PerChannelPeer);
        let resets = &config.session.resets;
        assert_eq!(resets.reset.as_ref().unwrap().idle_minutes, Some(90));
        assert!(resets.reset_by_type.direct.is_some(), "`dm` is `direct`");
        assert!(resets.reset_by_channel.contains_key("slack"));
        assert_eq!(resets.idle_minutes, Some(45), "lenient as before");
        assert_eq!(resets.triggers(), ["/fresh"]);
        assert_eq!(config.skills.engine.allow_bundled, ["weather"]);
        assert_eq!(
            config.skills.engine.entries["weather"].config["units"],
            "metric"
        );
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
