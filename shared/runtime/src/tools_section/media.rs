//! `tools.media`: media understanding's settings (spec `openclaw-tools.md` §3.5, §3.8). Only
//! audio transcription is configurable so far; an unknown key is an error.

use std::time::Duration;

use serde::Deserialize;

/// The largest audio file transcribed when `maxBytes` is unset (20 MB).
pub const DEFAULT_AUDIO_MAX_BYTES: u64 = 20 * 1024 * 1024;
/// How long one transcription may take when `timeoutSeconds` is unset.
pub const DEFAULT_AUDIO_TIMEOUT_SECONDS: u64 = 60;

/// `tools.media`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MediaToolsConfig {
    /// Voice notes and audio files transcribed into the message's text.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    pub audio: AudioConfig,
}

/// `tools.media.audio`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AudioConfig {
    /// Whether audio attachments are transcribed. Default `true`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub enabled: Option<bool>,
    /// The transcription models, tried in order until one succeeds. Unset or `[]`: the
    /// `openai` provider's `gpt-4o-mini-transcribe` when that provider has a key, else none.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("default" = [])))]
    pub models: Vec<AudioModelConfig>,
    /// The largest audio file transcribed, in bytes. Default 20 MB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_AUDIO_MAX_BYTES)))]
    pub max_bytes: Option<u64>,
    /// The spoken language as an ISO-639-1 code (`en`, `de`), a hint for the model. Unset:
    /// detected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub language: Option<String>,
    /// How long one transcription request may take, in seconds. Default 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = DEFAULT_AUDIO_TIMEOUT_SECONDS)))]
    pub timeout_seconds: Option<u64>,
}

impl AudioConfig {
    /// `enabled`, `true` when unset.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// `maxBytes`, 20 MB when unset.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes.unwrap_or(DEFAULT_AUDIO_MAX_BYTES)
    }

    /// `timeoutSeconds`, 60 s when unset (at least one second).
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(
            self.timeout_seconds
                .unwrap_or(DEFAULT_AUDIO_TIMEOUT_SECONDS)
                .max(1),
        )
    }

    /// `language`, when set and not blank.
    pub fn language(&self) -> Option<&str> {
        self.language
            .as_deref()
            .map(str::trim)
            .filter(|language| !language.is_empty())
    }
}

/// `tools.media.audio.models[]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AudioModelConfig {
    /// An entry of `models.providers` (its `baseUrl` and API key are used), or `openai`.
    pub provider: String,
    /// The transcription model's id at that provider (`gpt-4o-mini-transcribe`,
    /// `whisper-large-v3-turbo`).
    pub model: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<MediaToolsConfig, String> {
        let deserializer = serde_yaml::Deserializer::from_str(yaml);
        serde_path_to_error::deserialize(deserializer)
            .map_err(|err| format!("{}: {}", err.path(), err.inner()))
    }

    #[test]
    fn unset_keys_take_their_defaults() {
        let audio = parse("{}").expect("parses").audio;
        assert!(audio.enabled());
        assert!(audio.models.is_empty());
        assert_eq!(audio.max_bytes(), 20 * 1024 * 1024);
        assert_eq!(audio.timeout(), Duration::from_secs(60));
        assert_eq!(audio.language(), None);
    }

    #[test]
    fn every_audio_key_is_read() {
        let audio = parse(
            "audio:\n  enabled: false\n  maxBytes: 1000\n  language: de\n  timeoutSeconds: 5\n  \
             models:\n    - { provider: groq, model: whisper-large-v3-turbo }\n    \
             - { provider: openai, model: gpt-4o-mini-transcribe }\n",
        )
        .expect("parses")
        .audio;
        assert!(!audio.enabled());
        assert_eq!(audio.max_bytes(), 1000);
        assert_eq!(audio.language(), Some("de"));
        assert_eq!(audio.timeout(), Duration::from_secs(5));
        assert_eq!(audio.models.len(), 2);
        assert_eq!(audio.models[0].provider, "groq");
        assert_eq!(audio.models[1].model, "gpt-4o-mini-transcribe");
    }

    #[test]
    fn an_unknown_key_is_an_error_with_its_path() {
        for (yaml, path) in [
            ("image: {}\n", "image:"),
            ("audio: { enable: true }\n", "audio.enable:"),
            (
                "audio: { models: [{ provider: openai, model: m, baseUrl: x }] }\n",
                "audio.models[0].baseUrl:",
            ),
        ] {
            let err = parse(yaml).expect_err(yaml);
            assert!(err.starts_with(path), "{yaml} → {err}");
        }
    }
}
