//! `tools.message`: the `message` tool's cross-context policy (spec `openclaw-tools.md` §2.7,
//! §2.10). Only the policy is configurable; an unknown key is an error.

use serde::Deserialize;

/// `tools.message`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MessageToolConfig {
    /// Where a `message` call may send or act besides the conversation the session is in.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub cross_context: CrossContextConfig,
}

/// `tools.message.crossContext`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrossContextConfig {
    /// Whether a session may send to (or act in) another chat of its own conversation's
    /// channel. Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub allow_within_provider: Option<bool>,
    /// Whether a session may send to (or act in) a chat of another channel than its own
    /// conversation's. Default `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub allow_across_providers: Option<bool>,
}

impl CrossContextConfig {
    /// `allowWithinProvider`, `true` when unset.
    pub fn allows_within_provider(&self) -> bool {
        self.allow_within_provider.unwrap_or(true)
    }

    /// `allowAcrossProviders`, `false` when unset.
    pub fn allows_across_providers(&self) -> bool {
        self.allow_across_providers.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<MessageToolConfig, String> {
        let deserializer = serde_yaml::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize(deserializer)
            .map_err(|err| format!("{}: {}", err.path(), err.inner()))
    }

    #[test]
    fn unset_keys_take_the_safe_defaults() {
        let config = parse("{}").expect("parses");
        assert!(config.cross_context.allows_within_provider());
        assert!(!config.cross_context.allows_across_providers());
    }

    #[test]
    fn both_switches_are_read() {
        let config =
            parse("crossContext: { allowWithinProvider: false, allowAcrossProviders: true }\n")
                .expect("parses");
        assert!(!config.cross_context.allows_within_provider());
        assert!(config.cross_context.allows_across_providers());
    }

    #[test]
    fn an_unknown_or_unsupported_key_is_an_error_with_its_path() {
        for (yaml, path) in [
            ("crossContex: {}\n", "crossContex:"),
            (
                "crossContext: { allowAccrossProviders: true }\n",
                "crossContext.allowAccrossProviders:",
            ),
            // OpenClaw's deprecated switch is not taken: one policy, two keys.
            ("allowCrossContextSend: true\n", "allowCrossContextSend:"),
        ] {
            let err = parse(yaml).expect_err(yaml);
            assert!(err.starts_with(path), "{yaml} → {err}");
        }
    }
}
