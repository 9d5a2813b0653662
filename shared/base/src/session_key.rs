//! Session keys and agent ids (spec §12): how a conversation maps to one session.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The agent id every deployment has.
pub const DEFAULT_AGENT_ID: &str = "main";

/// Normalises an agent id: valid ids are lowercased; others are slugged; empty gives `main`.
pub fn normalize_agent_id(raw: &str) -> String {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return DEFAULT_AGENT_ID.to_owned();
    }
    if is_valid_agent_id(trimmed) {
        return trimmed.to_ascii_lowercase();
    }
    let lowered = trimmed.to_lowercase();
    let mut slug = String::with_capacity(lowered.len());
    let mut in_run = false;
    for ch in lowered.chars() {
        if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
            slug.push(ch);
            in_run = false;
        } else if !in_run {
            slug.push('-');
            in_run = true;
        }
    }
    let slug: String = slug.trim_matches('-').chars().take(64).collect();
    if slug.is_empty() {
        DEFAULT_AGENT_ID.to_owned()
    } else {
        slug
    }
}

/// `^[a-z0-9][a-z0-9_-]{0,63}$`, case-insensitively.
pub fn is_valid_agent_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
}

/// How direct messages map to sessions (`session.dmScope`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum DmScope {
    /// Every direct message shares the agent's main session.
    #[default]
    Main,
    /// One session per peer.
    PerPeer,
    /// One session per channel and peer.
    PerChannelPeer,
}

/// Whether a chat is one-to-one or shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatType {
    /// A direct (one-to-one) conversation.
    Direct,
    /// A group chat or channel.
    Group,
}

/// A lowercased session key such as `agent:main:main` or `agent:main:generic:group:42`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SessionKey(String);

impl SessionKey {
    /// The agent's main session: `agent:<id>:main`.
    pub fn main(agent_id: &str) -> Self {
        Self(format!("agent:{}:main", normalize_agent_id(agent_id)))
    }

    /// The session a chat message belongs to.
    pub fn for_chat(
        agent_id: &str, channel: &str, chat_type: ChatType, chat_id: &str, dm_scope: DmScope,
    ) -> Self {
        let agent = normalize_agent_id(agent_id);
        let key = match (chat_type, dm_scope) {
            (ChatType::Direct, DmScope::Main) => format!("agent:{agent}:main"),
            (ChatType::Direct, DmScope::PerPeer) => format!("agent:{agent}:direct:{chat_id}"),
            (ChatType::Direct, DmScope::PerChannelPeer) => {
                format!("agent:{agent}:{channel}:direct:{chat_id}")
            }
            (ChatType::Group, _) => format!("agent:{agent}:{channel}:group:{chat_id}"),
        };
        Self(key.to_lowercase())
    }

    /// Parses an existing key: lowercased, at least three non-empty `:` parts, starting `agent`.
    pub fn parse(raw: &str) -> Option<Self> {
        let lowered = raw.trim().to_lowercase();
        let parts: Vec<&str> = lowered.split(':').filter(|p| !p.is_empty()).collect();
        (parts.len() >= 3 && parts[0] == "agent").then(|| Self(parts.join(":")))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The agent id (second part).
    pub fn agent_id(&self) -> &str {
        self.0.split(':').nth(1).unwrap_or(DEFAULT_AGENT_ID)
    }

    /// How many `:subagent:` hops the key has.
    pub fn subagent_depth(&self) -> u32 {
        let count = self.0.matches(":subagent:").count();
        u32::try_from(count).unwrap_or(u32::MAX)
    }

    /// True for `agent:<id>:cron:…` keys.
    pub fn is_cron(&self) -> bool {
        self.0.split(':').nth(2) == Some("cron")
    }
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Where a conversation lives on a channel: enough to send a reply back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatRef {
    /// Channel id, e.g. `generic`, `telegram`.
    pub channel: String,
    /// The channel's conversation id.
    pub chat_id: String,
    /// Direct or group.
    pub chat_type: ChatType,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_ids_follow_the_spec_vectors() {
        assert_eq!(normalize_agent_id("main"), "main");
        assert_eq!(
            normalize_agent_id("my-research_agent01"),
            "my-research_agent01"
        );
        assert_eq!(normalize_agent_id(""), "main");
        assert_eq!(
            normalize_agent_id("Agent not found: xyz"),
            "agent-not-found-xyz"
        );
        assert_eq!(normalize_agent_id("../../../etc/passwd"), "etc-passwd");
        assert!(!is_valid_agent_id(&"a".repeat(65)));
        assert_eq!(normalize_agent_id(&"a".repeat(65)).len(), 64);
    }

    #[test]
    fn direct_message_keys_follow_the_dm_scope() {
        let peer = "+15551234567";
        assert_eq!(
            SessionKey::for_chat("main", "whatsapp", ChatType::Direct, peer, DmScope::PerPeer)
                .as_str(),
            "agent:main:direct:+15551234567"
        );
        assert_eq!(
            SessionKey::for_chat(
                "main",
                "whatsapp",
                ChatType::Direct,
                peer,
                DmScope::PerChannelPeer
            )
            .as_str(),
            "agent:main:whatsapp:direct:+15551234567"
        );
        assert_eq!(
            SessionKey::for_chat("Main", "generic", ChatType::Direct, peer, DmScope::Main).as_str(),
            "agent:main:main"
        );
        assert_eq!(
            SessionKey::for_chat(
                "main",
                "Discord",
                ChatType::Group,
                "1468834856187203680",
                DmScope::Main
            )
            .as_str(),
            "agent:main:discord:group:1468834856187203680"
        );
    }

    #[test]
    fn parsing_rejects_malformed_keys_and_counts_subagent_depth() {
        assert!(SessionKey::parse("agent:main:main").is_some());
        assert!(SessionKey::parse("agent::broken").is_none());
        assert!(SessionKey::parse("agent:main").is_none());
        assert!(SessionKey::parse("main").is_none());
        let nested = SessionKey::parse("agent:main:subagent:parent:subagent:child").unwrap();
        assert_eq!(nested.subagent_depth(), 2);
        assert!(
            SessionKey::parse("agent:main:cron:job-1")
                .unwrap()
                .is_cron()
        );
        assert!(SessionKey::parse("cron:job-1").is_none());
    }
}
