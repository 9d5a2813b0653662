//! The config's `tools:` section: the tool policy ([`ToolsConfig`], core's) and, beside it
//! under the same key as in OpenClaw's files, the session tools' own settings (`sessions`,
//! `agentToAgent`), which are not policy and live with the sub-agents, and the web tools'
//! settings (`web`, see [`web`]).
//!
//! One YAML map feeds several types, so deserialisation is written by hand: `sessions`,
//! `agentToAgent` and `web` are taken out as the map is read, and every other key is handed to
//! [`ToolsConfig`]'s own (derived) deserializer through the same map. Nothing is buffered, so
//! a typo keeps its full path (`tools.byProvider.openai.denny`, `tools.alow`) and an unknown
//! key is still an error.

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor};

use clawless_core::subagents::config::{
    AgentToAgentConfig, DEFAULT_SESSION_VISIBILITY, SessionToolsConfig, SessionVisibility,
};
use clawless_core::tool_policy::ToolsConfig;

pub mod media;
pub mod message;
pub mod web;

/// The key of the session tools' visibility settings.
const SESSIONS_KEY: &str = "sessions";
/// The key of the cross-agent session access settings.
const AGENT_TO_AGENT_KEY: &str = "agentToAgent";
/// The key of the web tools' settings.
const WEB_KEY: &str = "web";
/// The key of the `message` tool's settings.
const MESSAGE_KEY: &str = "message";
/// The key of media understanding's settings.
const MEDIA_KEY: &str = "media";

/// `tools:`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolsSection {
    /// Which tools the model is offered: profiles, allow and deny lists, per provider, for
    /// sub-agents and sandboxes, and elevated exec.
    pub policy: ToolsConfig,
    /// `tools.sessions`: which sessions `sessions_list` and `sessions_history` see
    /// (`visibility`: `self`, `tree`, `agent` or `all`). Unset: `tree`.
    pub sessions: Option<SessionToolsConfig>,
    /// `tools.agentToAgent`: whether the session tools may reach other agents' sessions.
    /// Unset: off.
    pub agent_to_agent: Option<AgentToAgentConfig>,
    /// `tools.web`: the web tools' settings (`search`: the `web_search` tool's providers,
    /// limits and cache).
    pub web: web::WebToolsConfig,
    /// `tools.message`: the `message` tool's cross-context policy.
    pub message: message::MessageToolConfig,
    /// `tools.media`: media understanding's settings (`audio`: voice-note transcription).
    pub media: media::MediaToolsConfig,
}

impl ToolsSection {
    /// `sessions.visibility`, `tree` when unset.
    pub fn session_visibility(&self) -> SessionVisibility {
        self.sessions
            .as_ref()
            .map_or(DEFAULT_SESSION_VISIBILITY, SessionToolsConfig::visibility)
    }

    /// `agentToAgent`, every key unset when the block is.
    pub fn agent_to_agent(&self) -> AgentToAgentConfig {
        self.agent_to_agent.clone().unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for ToolsSection {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(SectionVisitor)
    }
}

/// Reads the map once: the two session keys into their slots, the rest into the policy.
struct SectionVisitor;

impl<'de> Visitor<'de> for SectionVisitor {
    type Value = ToolsSection;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("the tools section, a map")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<ToolsSection, A::Error> {
        let mut sessions = SessionKeys::default();
        let policy = ToolsConfig::deserialize(PolicyKeys {
            map,
            sessions: &mut sessions,
        })?;
        Ok(ToolsSection {
            policy,
            sessions: sessions.sessions,
            agent_to_agent: sessions.agent_to_agent,
            web: sessions.web.unwrap_or_default(),
            message: sessions.message.unwrap_or_default(),
            media: sessions.media.unwrap_or_default(),
        })
    }
}

/// What was taken out of the map for the session tools.
#[derive(Default)]
struct SessionKeys {
    sessions: Option<SessionToolsConfig>,
    agent_to_agent: Option<AgentToAgentConfig>,
    web: Option<web::WebToolsConfig>,
    message: Option<message::MessageToolConfig>,
    media: Option<media::MediaToolsConfig>,
}

/// The section's map without the session keys, as the policy's deserializer sees it.
struct PolicyKeys<'s, A> {
    map: A,
    sessions: &'s mut SessionKeys,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for PolicyKeys<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum
        identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for PolicyKeys<'_, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self, seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        let mut seed = Some(seed);
        loop {
            // The key is read through the original map, so its path is recorded before the
            // policy's field visitor can refuse it.
            match self.map.next_key_seed(KeyOrSession(&mut seed))? {
                None => return Ok(None),
                Some(Key::Policy(field)) => return Ok(Some(field)),
                Some(Key::Sessions) => self.sessions.sessions = Some(self.map.next_value()?),
                Some(Key::AgentToAgent) => {
                    self.sessions.agent_to_agent = Some(self.map.next_value()?);
                }
                Some(Key::Web) => self.sessions.web = Some(self.map.next_value()?),
                Some(Key::Message) => self.sessions.message = Some(self.map.next_value()?),
                Some(Key::Media) => self.sessions.media = Some(self.map.next_value()?),
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// A key of the section: one of the session keys, or the policy's field.
enum Key<F> {
    Sessions,
    AgentToAgent,
    Web,
    Message,
    Media,
    Policy(F),
}

/// Reads a key, handing it to the policy's field seed unless it is a session key (the seed
/// is used at most once, on the key that is the policy's).
struct KeyOrSession<'s, K>(&'s mut Option<K>);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for KeyOrSession<'_, K> {
    type Value = Key<K::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        let key = String::deserialize(deserializer)?;
        match key.as_str() {
            SESSIONS_KEY => Ok(Key::Sessions),
            AGENT_TO_AGENT_KEY => Ok(Key::AgentToAgent),
            WEB_KEY => Ok(Key::Web),
            MESSAGE_KEY => Ok(Key::Message),
            MEDIA_KEY => Ok(Key::Media),
            _ => {
                let Some(seed) = self.0.take() else {
                    return Err(serde::de::Error::custom("a key was read twice"));
                };
                seed.deserialize(key.into_deserializer()).map(Key::Policy)
            }
        }
    }
}

#[cfg(feature = "schema")]
impl schemars::JsonSchema for ToolsSection {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ToolsSection".into()
    }

    /// The policy's object schema, with the two session keys added to its properties.
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = ToolsConfig::json_schema(generator);
        let mut sessions = generator.subschema_for::<Option<SessionToolsConfig>>();
        sessions.insert(
            "description".to_owned(),
            "Which sessions `sessions_list` and `sessions_history` see (`visibility`: `self`, \
             `tree`, `agent` or `all`). Unset: `tree`, the calling session and the sub-agents \
             it spawned."
                .into(),
        );
        sessions.insert("default".to_owned(), serde_json::json!({}));
        let mut agent_to_agent = generator.subschema_for::<Option<AgentToAgentConfig>>();
        agent_to_agent.insert(
            "description".to_owned(),
            "Whether the session tools may reach other agents' sessions (with \
             `sessions.visibility: all`): `enabled`, and the agent ids allowed on both sides. \
             Unset: off."
                .into(),
        );
        agent_to_agent.insert("default".to_owned(), serde_json::json!({}));
        let mut web = generator.subschema_for::<web::WebToolsConfig>();
        web.insert(
            "description".to_owned(),
            "The web tools' settings: `search`, the `web_search` tool's provider (brave, \
             gemini, perplexity, tavily, searxng; unset: the first with a key), keys, base \
             URLs, result count, timeout and cache."
                .into(),
        );
        web.insert("default".to_owned(), serde_json::json!({}));
        let mut message = generator.subschema_for::<message::MessageToolConfig>();
        message.insert(
            "description".to_owned(),
            "The `message` tool's cross-context policy: `crossContext.allowWithinProvider` \
             (other chats of the session's own channel, default true) and \
             `crossContext.allowAcrossProviders` (other channels, default false)."
                .into(),
        );
        message.insert("default".to_owned(), serde_json::json!({}));
        let mut media = generator.subschema_for::<media::MediaToolsConfig>();
        media.insert(
            "description".to_owned(),
            "Media understanding: `audio`, voice-note transcription (`enabled`, `models` as \
             `{provider, model}` entries naming `models.providers`, `maxBytes`, `language`, \
             `timeoutSeconds`)."
                .into(),
        );
        media.insert("default".to_owned(), serde_json::json!({}));
        if let Some(properties) = schema
            .get_mut("properties")
            .and_then(serde_json::Value::as_object_mut)
        {
            properties.insert(SESSIONS_KEY.to_owned(), sessions.to_value());
            properties.insert(AGENT_TO_AGENT_KEY.to_owned(), agent_to_agent.to_value());
            properties.insert(WEB_KEY.to_owned(), web.to_value());
            properties.insert(MESSAGE_KEY.to_owned(), message.to_value());
            properties.insert(MEDIA_KEY.to_owned(), media.to_value());
        }
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<ToolsSection, String> {
        let deserializer = serde_yaml::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize(deserializer)
            .map_err(|err| format!("{}: {}", err.path(), err.inner()))
    }

    #[test]
    fn session_keys_and_policy_keys_land_in_their_own_types() {
        let section = parse(
            "profile: coding\ndeny: [exec]\nsessions: { visibility: all }\n\
             agentToAgent: { enabled: true, allow: [main, ops] }\n",
        )
        .expect("parses");
        assert_eq!(section.policy.profile.as_deref(), Some("coding"));
        assert_eq!(section.policy.deny, Some(vec!["exec".to_owned()]));
        assert_eq!(section.session_visibility(), SessionVisibility::All);
        assert!(section.agent_to_agent().enabled());
        assert!(section.agent_to_agent().allows("main", "ops"));
        let empty = parse("{}").expect("parses");
        assert_eq!(empty.session_visibility(), DEFAULT_SESSION_VISIBILITY);
        assert!(!empty.agent_to_agent().enabled());
    }

    #[test]
    fn a_typo_anywhere_keeps_its_path() {
        for (yaml, path) in [
            ("alow: [read]\n", "alow:"),
            (
                "byProvider: { openai: { denny: [exec] } }\n",
                "byProvider.openai.denny:",
            ),
            ("sessions: { visiblity: all }\n", "sessions.visiblity:"),
            ("agentToAgent: { enabeld: true }\n", "agentToAgent.enabeld:"),
            ("web: { serch: {} }\n", "web.serch:"),
            (
                "message: { crossContext: { allowAcross: true } }\n",
                "message.crossContext.allowAcross:",
            ),
            (
                "web: { search: { brave: { apiKye: x } } }\n",
                "web.search.brave.apiKye:",
            ),
            ("media: { audio: { maxByte: 1 } }\n", "media.audio.maxByte:"),
        ] {
            let err = parse(yaml).expect_err(yaml);
            assert!(err.starts_with(path), "{yaml} → {err}");
            assert!(err.contains("unknown field"), "{yaml} → {err}");
        }
    }
}

#[cfg(test)]
mod web_search_config_tests {
    use super::*;
    use web::SearchProviderId;

    #[test]
    fn web_search_keys_land_beside_the_policy() {
        let deserializer = serde_yaml::Deserializer::from_str(
            "deny: [exec]\nweb:\n  search:\n    provider: searxng\n    maxResults: 3\n    \
             timeoutSeconds: 5\n    cacheTtlMinutes: 0\n    searxng: { baseUrl: 'http://127.0.0.1:8888' }\n    \
             brave: { apiKey: k }\n",
        );
        let section: ToolsSection = serde_path_to_error::deserialize(deserializer).expect("parses");
        let search = &section.web.search;
        assert_eq!(section.policy.deny, Some(vec!["exec".to_owned()]));
        assert_eq!(search.provider, Some(SearchProviderId::Searxng));
        assert_eq!(search.max_results(), 3);
        assert_eq!(search.timeout(), std::time::Duration::from_secs(5));
        assert_eq!(search.cache_ttl_ms(), 0);
        assert_eq!(
            search.searxng.base_url.as_deref(),
            Some("http://127.0.0.1:8888")
        );
        assert_eq!(search.brave.api_key.as_deref(), Some("k"));
        let unknown = serde_yaml::from_str::<ToolsSection>("web: { search: { provider: bing } }\n")
            .expect_err("an unknown provider is an error");
        assert!(unknown.to_string().contains("unknown variant"), "{unknown}");
    }
}
