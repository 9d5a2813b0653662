//! Elevated exec (spec `openclaw-sandbox.md` §2.4, §5.1 item 5): a sandboxed session's command
//! run outside the jail, on a node host's bare host, under the node's own approvals.
//!
//! This module owns `tools.elevated` / `agents.list[].tools.elevated` ([`ElevatedConfig`]),
//! OpenClaw's gates ([`elevated_gates`]: enabled, then the sender in `allowFrom.<channel>`,
//! then the agent's own `allowFrom`), the session's level ([`ElevatedLevel`]) and the texts.
//!
//! clawless departs from OpenClaw where OpenClaw silently unsandboxes:
//! - the level starts **`off`** (OpenClaw: `on` for every allowed sender, so every command
//!   of theirs left the sandbox); only an owner changes it, with `/elevated on|ask|off`;
//! - `off` is honoured against the model: a call's `elevated: true` does not leave the jail;
//! - there is no `full` (OpenClaw's approval bypass): every elevated command waits for an
//!   owner's `/approve`.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// `tools.elevated` and `agents.list[].tools.elevated`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ElevatedConfig {
    /// Whether elevated exec exists at all (default `true`; an agent's `false` turns it off
    /// for that agent). Nobody has it until `allowFrom` names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub enabled: Option<bool>,
    /// Per channel (`telegram`, `slack`, `discord`, `generic`): the sender ids who may have
    /// their sandboxed commands run outside the jail (`"*"`: anyone in that channel). An
    /// agent's list narrows the global one.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub allow_from: IndexMap<String, Vec<String>>,
}

/// A session's elevated level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElevatedLevel {
    /// Commands stay in the jail (the default).
    #[default]
    Off,
    /// Commands of an allowed sender run on the node host, each after an owner approves it
    /// (`/elevated on` is the same).
    Ask,
}

impl ElevatedLevel {
    /// `/elevated <level>`: `on` and `ask` are [`ElevatedLevel::Ask`], `off` is off; anything
    /// else (OpenClaw's `full` included) is `None`.
    pub fn parse(level: &str) -> Option<Self> {
        match level.trim().to_ascii_lowercase().as_str() {
            "on" | "ask" => Some(Self::Ask),
            "off" => Some(Self::Off),
            _ => None,
        }
    }

    /// True for [`ElevatedLevel::Off`].
    pub fn is_off(&self) -> bool {
        *self == Self::Off
    }

    /// The spelling shown to people.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Ask => "ask",
        }
    }
}

/// A gate that keeps a sender from elevated exec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElevatedGate {
    /// `tools.elevated.enabled` or the agent's is `false`.
    Enabled,
    /// The sender is not in `allowFrom.<channel>` (or the agent's list).
    AllowFrom,
}

/// Which gates keep `sender_id` on `channel` from elevated exec: none when they may use it.
pub fn elevated_gates(
    global: Option<&ElevatedConfig>, agent: Option<&ElevatedConfig>, channel: Option<&str>,
    sender_id: Option<&str>,
) -> Vec<ElevatedGate> {
    let enabled =
        |config: Option<&ElevatedConfig>| config.and_then(|config| config.enabled).unwrap_or(true);
    if !enabled(global) || !enabled(agent) {
        return vec![ElevatedGate::Enabled];
    }
    let listed = |config: &ElevatedConfig| {
        let (Some(channel), Some(sender)) = (channel, sender_id) else {
            return false;
        };
        config
            .allow_from
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(channel))
            .is_some_and(|(_, senders)| {
                senders.iter().any(|allowed| {
                    let allowed = allowed.trim();
                    allowed == "*" || allowed == sender.trim()
                })
            })
    };
    let global_allows = global.is_some_and(listed);
    let agent_allows = agent.is_none_or(|agent| agent.allow_from.is_empty() || listed(agent));
    if global_allows && agent_allows {
        Vec::new()
    } else {
        vec![ElevatedGate::AllowFrom]
    }
}

/// OpenClaw's refusal of elevated exec: the runtime, the failing gates, the context and the
/// keys that would change it.
pub fn elevated_unavailable_text(
    sandboxed: bool, gates: &[ElevatedGate], channel: &str, session_key: &str,
) -> String {
    let runtime = if sandboxed { "sandboxed" } else { "direct" };
    let failing: Vec<&str> = gates
        .iter()
        .map(|gate| match gate {
            ElevatedGate::Enabled => {
                "enabled (tools.elevated.enabled / agents.list[].tools.elevated.enabled)"
            }
            ElevatedGate::AllowFrom => {
                "allowFrom (tools.elevated.allowFrom.<provider> / agents.list[].tools.elevated.allowFrom.<provider>)"
            }
        })
        .collect();
    format!(
        "elevated is not available right now (runtime={runtime}).\n\
         Failing gates: {}\n\
         Context: provider={channel} session={session_key}\n\
         Fix-it keys:\n\
         - tools.elevated.enabled\n\
         - tools.elevated.allowFrom.<provider>\n\
         - agents.list[].tools.elevated.enabled\n\
         - agents.list[].tools.elevated.allowFrom.<provider>",
        failing.join(", ")
    )
}

/// The answer to `/elevated <level>` once the level is set.
pub fn elevated_ack(level: ElevatedLevel, sandboxed: bool) -> String {
    let set = match level {
        ElevatedLevel::Ask => {
            "⚙️ Elevated mode set to ask (every command runs on the node host after an owner approves it)."
        }
        ElevatedLevel::Off => "⚙️ Elevated mode disabled.",
    };
    if sandboxed {
        set.to_owned()
    } else {
        format!("{set}\n⚙️ Runtime is direct; sandboxing does not apply.")
    }
}

/// The answer to a bare `/elevated`.
pub fn elevated_current(level: ElevatedLevel) -> String {
    format!(
        "Current elevated level: {}.\nOptions: on, off, ask.",
        level.as_str()
    )
}

/// The answer to `/elevated <unknown>` (OpenClaw's `full` included: clawless has none).
pub fn elevated_unrecognized(level: &str) -> String {
    format!("Unrecognized elevated level \"{level}\". Valid levels: off, on, ask.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(json: serde_json::Value) -> ElevatedConfig {
        serde_json::from_value(json).expect("an elevated config")
    }

    #[test]
    fn nobody_is_allowed_until_allow_from_names_them() {
        assert_eq!(
            elevated_gates(None, None, Some("telegram"), Some("42")),
            [ElevatedGate::AllowFrom]
        );
        let global = config(serde_json::json!({"allowFrom": {"telegram": ["42"]}}));
        assert!(elevated_gates(Some(&global), None, Some("telegram"), Some("42")).is_empty());
        assert_eq!(
            elevated_gates(Some(&global), None, Some("telegram"), Some("7")),
            [ElevatedGate::AllowFrom]
        );
        assert_eq!(
            elevated_gates(Some(&global), None, Some("slack"), Some("42")),
            [ElevatedGate::AllowFrom]
        );
        assert_eq!(
            elevated_gates(Some(&global), None, None, Some("42")),
            [ElevatedGate::AllowFrom]
        );
    }

    #[test]
    fn an_agent_can_only_narrow() {
        let global = config(serde_json::json!({"allowFrom": {"telegram": ["*"]}}));
        let narrower = config(serde_json::json!({"allowFrom": {"telegram": ["42"]}}));
        let off = config(serde_json::json!({"enabled": false}));
        let allowed = |agent: Option<&ElevatedConfig>, sender: &str| {
            elevated_gates(Some(&global), agent, Some("telegram"), Some(sender)).is_empty()
        };
        assert!(allowed(None, "7"));
        assert!(allowed(Some(&narrower), "42"));
        assert!(!allowed(Some(&narrower), "7"));
        assert_eq!(
            elevated_gates(Some(&global), Some(&off), Some("telegram"), Some("42")),
            [ElevatedGate::Enabled]
        );
        // An agent's list never widens the global one.
        let wider = config(serde_json::json!({"allowFrom": {"slack": ["7"]}}));
        assert!(!elevated_gates(Some(&global), Some(&wider), Some("slack"), Some("7")).is_empty());
    }

    #[test]
    fn tv17_the_refusal_names_the_failing_gate_and_the_keys() {
        let text = elevated_unavailable_text(
            true,
            &[ElevatedGate::AllowFrom],
            "telegram",
            "agent:main:telegram:group:-100123",
        );
        assert_eq!(
            text,
            "elevated is not available right now (runtime=sandboxed).\n\
             Failing gates: allowFrom (tools.elevated.allowFrom.<provider> / agents.list[].tools.elevated.allowFrom.<provider>)\n\
             Context: provider=telegram session=agent:main:telegram:group:-100123\n\
             Fix-it keys:\n\
             - tools.elevated.enabled\n\
             - tools.elevated.allowFrom.<provider>\n\
             - agents.list[].tools.elevated.enabled\n\
             - agents.list[].tools.elevated.allowFrom.<provider>"
        );
    }

    #[test]
    fn levels_parse_without_full() {
        assert_eq!(ElevatedLevel::parse("on"), Some(ElevatedLevel::Ask));
        assert_eq!(ElevatedLevel::parse(" ASK "), Some(ElevatedLevel::Ask));
        assert_eq!(ElevatedLevel::parse("off"), Some(ElevatedLevel::Off));
        assert_eq!(ElevatedLevel::parse("full"), None);
        assert_eq!(ElevatedLevel::default(), ElevatedLevel::Off);
        assert_eq!(
            elevated_unrecognized("full"),
            "Unrecognized elevated level \"full\". Valid levels: off, on, ask."
        );
    }
}
