//! Voice notes and audio files turned into text (spec `openclaw-tools.md` §3.5): an
//! OpenAI-compatible `POST <baseUrl>/audio/transcriptions` client that tries the configured
//! models in order until one answers.
//!
//! The models come from `tools.media.audio.models`, each naming an entry of
//! `models.providers` for its base URL and key (resolved as the model clients resolve them).
//! With none configured, the `openai` provider's `gpt-4o-mini-transcribe` is used when that
//! provider has a key. A failure is a value: a turn goes on without a transcript, the body
//! keeps its `<media:audio>` placeholder and the note still names the file.

use std::time::Duration;

use clawless_llm::openai::DEFAULT_OPENAI_BASE_URL;
use clawless_llm::{ModelsConfig, ProviderApi};
use serde::Deserialize;

use crate::tools_section::media::AudioConfig;

/// The model used when `tools.media.audio.models` is empty and `openai` has a key.
pub const DEFAULT_TRANSCRIPTION_MODEL: &str = "gpt-4o-mini-transcribe";
/// Audio smaller than this (in bytes) is not sent: it is too short to hold words.
pub const MIN_AUDIO_BYTES: usize = 1024;
/// The most of an error answer's body kept in the error, in characters.
const MAX_ERROR_CHARS: usize = 300;

/// One model to try.
#[derive(Clone, PartialEq, Eq)]
pub struct TranscriptionModel {
    /// The provider's name (`openai`, `groq`).
    pub provider: String,
    /// The model id.
    pub model: String,
    /// The API's base URL, with its version segment (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The key sent as `Authorization: Bearer`; none for a local server.
    api_key: Option<String>,
}

impl std::fmt::Debug for TranscriptionModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptionModel")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .finish()
    }
}

impl TranscriptionModel {
    /// A model at `base_url`, with `api_key` when the server wants one.
    pub fn new(
        provider: impl Into<String>, model: impl Into<String>, base_url: impl Into<String>,
        api_key: Option<String>,
    ) -> Self {
        Self {
            provider: provider.into(),
            model: model.into(),
            base_url: base_url.into(),
            api_key,
        }
    }
}

/// `tools.media.audio` could not be turned into models.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TranscriptionConfigError {
    /// An entry names a provider with no base URL to send to.
    #[error(
        "tools.media.audio.models[{index}]: provider {provider:?} has no baseUrl; add models.providers.{provider}.baseUrl"
    )]
    NoBaseUrl {
        /// The entry's position.
        index: usize,
        /// The provider it names.
        provider: String,
    },
    /// An entry names a provider that speaks another API than OpenAI's.
    #[error(
        "tools.media.audio.models[{index}]: provider {provider:?} is not OpenAI-compatible and cannot transcribe"
    )]
    NotOpenAiCompatible {
        /// The entry's position.
        index: usize,
        /// The provider it names.
        provider: String,
    },
}

/// Why one model gave no transcript.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum AttemptError {
    /// The key was refused (401 or 403).
    #[error("{provider}/{model}: the API key was refused ({status})")]
    Auth {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The status.
        status: u16,
    },
    /// Any other error status.
    #[error("{provider}/{model}: HTTP {status}: {message}")]
    Status {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The status.
        status: u16,
        /// The start of the answer's body.
        message: String,
    },
    /// No answer within the timeout.
    #[error("{provider}/{model}: no answer within {seconds} s")]
    Timeout {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// The timeout.
        seconds: u64,
    },
    /// The request could not be sent or the answer not read.
    #[error("{provider}/{model}: {message}")]
    Transport {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// What failed.
        message: String,
    },
    /// The answer was not `{"text": …}`.
    #[error("{provider}/{model}: the answer is not a transcription: {message}")]
    Invalid {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
        /// What was wrong.
        message: String,
    },
}

/// Why there is no transcript.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum TranscriptionError {
    /// Under [`MIN_AUDIO_BYTES`]: not sent.
    #[error("audio too small to transcribe ({0} bytes)")]
    TooSmall(usize),
    /// Over `maxBytes`: not sent.
    #[error("audio too large to transcribe ({size} bytes, limit {limit})")]
    TooLarge {
        /// The audio's size.
        size: usize,
        /// `maxBytes`.
        limit: u64,
    },
    /// Every model failed, each for the reason listed (in order).
    #[error("no transcription model succeeded: {}", join(.0))]
    Failed(Vec<AttemptError>),
}

fn join(attempts: &[AttemptError]) -> String {
    attempts
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A transcript and the model that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transcript {
    /// The text, trimmed.
    pub text: String,
    /// The provider that answered.
    pub provider: String,
    /// The model that answered.
    pub model: String,
}

/// Transcribes audio with the first model that succeeds.
#[derive(Debug, Clone)]
pub struct Transcriber {
    http: reqwest::Client,
    models: Vec<TranscriptionModel>,
    max_bytes: u64,
    language: Option<String>,
    timeout: Duration,
}

impl Transcriber {
    /// A transcriber over `models`, tried in order, with `audio`'s limits and language.
    pub fn new(
        http: reqwest::Client, models: Vec<TranscriptionModel>, audio: &AudioConfig,
    ) -> Self {
        Self {
            http,
            models,
            max_bytes: audio.max_bytes(),
            language: audio.language().map(str::to_owned),
            timeout: audio.timeout(),
        }
    }

    /// The transcriber `tools.media.audio` describes, `None` when transcription is off or no
    /// model is configured or available. `env` reads an `…Env` variable (the fetched
    /// secrets, then the process environment; see `SecretValues::lookup`).
    pub fn from_config(
        http: reqwest::Client, audio: &AudioConfig, models: &ModelsConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Option<Self>, TranscriptionConfigError> {
        if !audio.enabled() {
            return Ok(None);
        }
        let resolved = resolve_models(audio, models, env)?;
        Ok((!resolved.is_empty()).then(|| Self::new(http, resolved, audio)))
    }

    /// The models tried, in order.
    pub fn models(&self) -> &[TranscriptionModel] {
        &self.models
    }

    /// The transcript of `audio` (of type `mime`, sent as `file_name`): the first model that
    /// answers wins; a failing or slow one falls through to the next.
    pub async fn transcribe(
        &self, audio: &[u8], mime: &str, file_name: &str,
    ) -> Result<Transcript, TranscriptionError> {
        if audio.len() < MIN_AUDIO_BYTES {
            return Err(TranscriptionError::TooSmall(audio.len()));
        }
        if u64::try_from(audio.len()).unwrap_or(u64::MAX) > self.max_bytes {
            return Err(TranscriptionError::TooLarge {
                size: audio.len(),
                limit: self.max_bytes,
            });
        }
        let mut failures = Vec::new();
        for model in &self.models {
            match self.attempt(model, audio, mime, file_name).await {
                Ok(text) => {
                    return Ok(Transcript {
                        text,
                        provider: model.provider.clone(),
                        model: model.model.clone(),
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "transcription failed; trying the next model");
                    failures.push(error);
                }
            }
        }
        Err(TranscriptionError::Failed(failures))
    }

    async fn attempt(
        &self, model: &TranscriptionModel, audio: &[u8], mime: &str, file_name: &str,
    ) -> Result<String, AttemptError> {
        let transport = |error: reqwest::Error| {
            if error.is_timeout() {
                AttemptError::Timeout {
                    provider: model.provider.clone(),
                    model: model.model.clone(),
                    seconds: self.timeout.as_secs(),
                }
            } else {
                AttemptError::Transport {
                    provider: model.provider.clone(),
                    model: model.model.clone(),
                    message: error.without_url().to_string(),
                }
            }
        };
        let boundary = format!(
            "clawless-{}",
            clawless_core::tools::web_fetch::fence::fence_id()
        );
        let body = multipart_body(
            &boundary,
            &model.model,
            self.language.as_deref(),
            audio,
            mime,
            file_name,
        );
        let url = format!(
            "{}/audio/transcriptions",
            model.base_url.trim_end_matches('/')
        );
        let mut request = self
            .http
            .post(url)
            .timeout(self.timeout)
            .header(
                reqwest::header::CONTENT_TYPE,
                format!("multipart/form-data; boundary={boundary}"),
            )
            .body(body);
        if let Some(key) = &model.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(transport)?;
        if status == 401 || status == 403 {
            return Err(AttemptError::Auth {
                provider: model.provider.clone(),
                model: model.model.clone(),
                status,
            });
        }
        if !(200..300).contains(&status) {
            return Err(AttemptError::Status {
                provider: model.provider.clone(),
                model: model.model.clone(),
                status,
                message: text.chars().take(MAX_ERROR_CHARS).collect(),
            });
        }
        #[derive(Deserialize)]
        struct Answer {
            text: String,
        }
        let answer: Answer =
            serde_json::from_str(&text).map_err(|error| AttemptError::Invalid {
                provider: model.provider.clone(),
                model: model.model.clone(),
                message: error.to_string(),
            })?;
        Ok(answer.text.trim().to_owned())
    }
}

/// The `multipart/form-data` body: `file`, `model` and, when set, `language`.
fn multipart_body(
    boundary: &str, model: &str, language: Option<&str>, audio: &[u8], mime: &str, file_name: &str,
) -> Vec<u8> {
    // Header values must not break out of their line or their quotes.
    let safe = |value: &str| -> String {
        value
            .chars()
            .map(|ch| {
                if ch.is_control() || ch == '"' {
                    '_'
                } else {
                    ch
                }
            })
            .collect()
    };
    let file_name = match safe(file_name).trim() {
        "" => "audio".to_owned(),
        name => name.to_owned(),
    };
    let mime = match safe(mime).trim() {
        "" => "application/octet-stream".to_owned(),
        mime => mime.to_owned(),
    };
    let mut body = Vec::with_capacity(audio.len() + 512);
    let mut field = |name: &str, value: &str| {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{}\r\n",
                safe(value)
            )
            .as_bytes(),
        );
    };
    field("model", model);
    if let Some(language) = language {
        field("language", language);
    }
    body.extend_from_slice(
        format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n\
             Content-Type: {mime}\r\n\r\n"
        )
        .as_bytes(),
    );
    body.extend_from_slice(audio);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    body
}

/// The models `audio` names, with their providers' base URLs and keys.
fn resolve_models(
    audio: &AudioConfig, models: &ModelsConfig, env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<TranscriptionModel>, TranscriptionConfigError> {
    if audio.models.is_empty() {
        // The default needs a key: without one the request could only fail.
        let Some(key) = provider_key(models, "openai", env) else {
            return Ok(Vec::new());
        };
        let base_url = provider_base_url(models, "openai", env)
            .unwrap_or_else(|| DEFAULT_OPENAI_BASE_URL.to_owned());
        return Ok(vec![TranscriptionModel::new(
            "openai",
            DEFAULT_TRANSCRIPTION_MODEL,
            base_url,
            Some(key),
        )]);
    }
    let mut resolved = Vec::with_capacity(audio.models.len());
    for (index, entry) in audio.models.iter().enumerate() {
        let provider = entry.provider.trim();
        let api = models.providers.get(provider).and_then(|p| p.api);
        if matches!(api, Some(ProviderApi::Anthropic | ProviderApi::Bedrock))
            || (api.is_none() && matches!(provider, "anthropic" | "bedrock"))
        {
            return Err(TranscriptionConfigError::NotOpenAiCompatible {
                index,
                provider: provider.to_owned(),
            });
        }
        let base_url = provider_base_url(models, provider, env)
            .or_else(|| (provider == "openai").then(|| DEFAULT_OPENAI_BASE_URL.to_owned()))
            .ok_or_else(|| TranscriptionConfigError::NoBaseUrl {
                index,
                provider: provider.to_owned(),
            })?;
        resolved.push(TranscriptionModel::new(
            provider,
            entry.model.trim(),
            base_url,
            provider_key(models, provider, env),
        ));
    }
    Ok(resolved)
}

/// A provider's key as the model clients find it: `apiKey`, else the variable `apiKeyEnv`
/// names, else (for `openai` only) `OPENAI_API_KEY`.
fn provider_key(
    models: &ModelsConfig, provider: &str, env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    let settings = models.providers.get(provider);
    let not_blank = |value: String| (!value.trim().is_empty()).then(|| value.trim().to_owned());
    settings
        .and_then(|p| p.api_key.clone())
        .and_then(not_blank)
        .or_else(|| {
            settings
                .and_then(|p| p.api_key_env.as_deref())
                .and_then(env)
                .and_then(not_blank)
        })
        .or_else(|| {
            (provider == "openai")
                .then(|| env("OPENAI_API_KEY"))
                .flatten()
                .and_then(not_blank)
        })
}

/// A provider's base URL: `baseUrl`, else (for `openai` only) `OPENAI_BASE_URL`.
fn provider_base_url(
    models: &ModelsConfig, provider: &str, env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    models
        .providers
        .get(provider)
        .and_then(|p| p.base_url.as_deref())
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            (provider == "openai")
                .then(|| env("OPENAI_BASE_URL"))
                .flatten()
                .filter(|url| !url.trim().is_empty())
        })
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::Router;
    use axum::body::Bytes;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use clawless_llm::ProviderConfig;

    use super::*;

    /// What the fake server saw: the path, the headers and the body of each request.
    type Seen = Arc<Mutex<Vec<(String, HeaderMap, Vec<u8>)>>>;

    /// A fake transcription server on loopback answering every request with `status` and
    /// `body` (after `delay`); its base URL and what it saw.
    async fn fake_server(status: u16, body: &'static str, delay: Duration) -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app = Router::new()
            .route(
                "/v1/audio/transcriptions",
                post(
                    move |State(seen): State<Seen>, headers: HeaderMap, bytes: Bytes| async move {
                        seen.lock().expect("lock").push((
                            "/v1/audio/transcriptions".to_owned(),
                            headers,
                            bytes.to_vec(),
                        ));
                        tokio::time::sleep(delay).await;
                        (StatusCode::from_u16(status).expect("status"), body)
                    },
                ),
            )
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{address}/v1"), seen)
    }

    fn audio_config(yaml: &str) -> AudioConfig {
        serde_yaml::from_str(yaml).expect("audio config")
    }

    fn voice() -> Vec<u8> {
        (0..4096u32).map(|i| (i % 251) as u8).collect()
    }

    fn http() -> reqwest::Client {
        reqwest::Client::builder().build().expect("client")
    }

    #[tokio::test]
    async fn the_request_is_an_openai_multipart_upload_with_the_key() {
        let (base_url, seen) =
            fake_server(200, r#"{"text":" hello there "}"#, Duration::ZERO).await;
        let transcriber = Transcriber::new(
            http(),
            vec![TranscriptionModel::new(
                "groq",
                "whisper-1",
                &base_url,
                Some("sk-test".into()),
            )],
            &audio_config("language: de\n"),
        );
        let transcript = transcriber
            .transcribe(&voice(), "audio/ogg", "voice.ogg")
            .await
            .expect("transcribed");
        assert_eq!(
            transcript,
            Transcript {
                text: "hello there".to_owned(),
                provider: "groq".to_owned(),
                model: "whisper-1".to_owned(),
            }
        );
        let seen = seen.lock().expect("lock");
        let (_, headers, body) = &seen[0];
        assert_eq!(headers["authorization"], "Bearer sk-test");
        let content_type = headers["content-type"].to_str().expect("ascii");
        let boundary = content_type
            .strip_prefix("multipart/form-data; boundary=")
            .expect("multipart");
        let text = String::from_utf8_lossy(body);
        assert!(text.contains(&format!(
            "--{boundary}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n"
        )));
        assert!(text.contains("name=\"language\"\r\n\r\nde\r\n"));
        assert!(text.contains(
            "Content-Disposition: form-data; name=\"file\"; filename=\"voice.ogg\"\r\nContent-Type: audio/ogg\r\n\r\n"
        ));
        assert!(text.ends_with(&format!("\r\n--{boundary}--\r\n")));
        // The audio is carried byte for byte.
        let audio = voice();
        assert!(
            body.windows(audio.len())
                .any(|window| window == audio.as_slice())
        );
    }

    #[tokio::test]
    async fn errors_are_values_and_the_next_model_is_tried() {
        let (refusing, _) = fake_server(401, r#"{"error":"bad key"}"#, Duration::ZERO).await;
        let (broken, _) = fake_server(500, "boom", Duration::ZERO).await;
        let (slow, _) = fake_server(200, r#"{"text":"late"}"#, Duration::from_secs(5)).await;
        let (good, seen) = fake_server(200, r#"{"text":"finally"}"#, Duration::ZERO).await;
        let transcriber = Transcriber::new(
            http(),
            vec![
                TranscriptionModel::new("a", "m1", &refusing, Some("k".into())),
                TranscriptionModel::new("b", "m2", &broken, None),
                TranscriptionModel::new("c", "m3", &slow, None),
                TranscriptionModel::new("d", "m4", &good, None),
            ],
            &audio_config("timeoutSeconds: 1\n"),
        );
        let transcript = transcriber
            .transcribe(&voice(), "audio/ogg", "v.ogg")
            .await
            .expect("the last model answers");
        assert_eq!(transcript.text, "finally");
        assert_eq!(transcript.model, "m4");
        // Without a key, no Authorization header.
        assert!(
            !seen.lock().expect("lock")[0]
                .1
                .contains_key("authorization")
        );

        let failing = Transcriber::new(
            http(),
            vec![
                TranscriptionModel::new("a", "m1", &refusing, Some("k".into())),
                TranscriptionModel::new("b", "m2", &broken, None),
                TranscriptionModel::new("c", "m3", &slow, None),
            ],
            &audio_config("timeoutSeconds: 1\n"),
        );
        let Err(TranscriptionError::Failed(attempts)) =
            failing.transcribe(&voice(), "audio/ogg", "v.ogg").await
        else {
            panic!("every model fails");
        };
        assert!(
            matches!(&attempts[0], AttemptError::Auth { status: 401, .. }),
            "{attempts:?}"
        );
        assert!(
            matches!(&attempts[1], AttemptError::Status { status: 500, message, .. } if message == "boom"),
            "{attempts:?}"
        );
        assert!(
            matches!(&attempts[2], AttemptError::Timeout { .. }),
            "{attempts:?}"
        );
    }

    #[tokio::test]
    async fn a_non_json_answer_or_a_dead_server_is_an_error_value() {
        let (odd, _) = fake_server(200, "<html>", Duration::ZERO).await;
        let transcriber = Transcriber::new(
            http(),
            vec![
                TranscriptionModel::new("a", "m", &odd, None),
                // Nothing listens on port 9 of loopback.
                TranscriptionModel::new("b", "m", "http://127.0.0.1:9/v1", None),
            ],
            &AudioConfig::default(),
        );
        let Err(TranscriptionError::Failed(attempts)) =
            transcriber.transcribe(&voice(), "audio/ogg", "v.ogg").await
        else {
            panic!("both fail");
        };
        assert!(
            matches!(attempts[0], AttemptError::Invalid { .. }),
            "{attempts:?}"
        );
        assert!(
            matches!(attempts[1], AttemptError::Transport { .. }),
            "{attempts:?}"
        );
    }

    #[tokio::test]
    async fn too_small_or_too_large_audio_is_not_sent() {
        let (base_url, seen) = fake_server(200, r#"{"text":"x"}"#, Duration::ZERO).await;
        let transcriber = Transcriber::new(
            http(),
            vec![TranscriptionModel::new("a", "m", &base_url, None)],
            &audio_config("maxBytes: 2048\n"),
        );
        assert_eq!(
            transcriber
                .transcribe(&[0; 1023], "audio/ogg", "v.ogg")
                .await,
            Err(TranscriptionError::TooSmall(1023))
        );
        assert_eq!(
            transcriber
                .transcribe(&[0; 4096], "audio/ogg", "v.ogg")
                .await,
            Err(TranscriptionError::TooLarge {
                size: 4096,
                limit: 2048
            })
        );
        assert!(seen.lock().expect("lock").is_empty());
    }

    fn models_config(providers: &[(&str, ProviderConfig)]) -> ModelsConfig {
        let mut config = ModelsConfig::default();
        for (name, settings) in providers {
            config
                .providers
                .insert((*name).to_owned(), settings.clone());
        }
        config
    }

    #[test]
    fn the_default_model_needs_an_openai_key() {
        let none = |_: &str| None;
        let audio = AudioConfig::default();
        assert!(
            Transcriber::from_config(http(), &audio, &ModelsConfig::default(), &none)
                .expect("valid")
                .is_none()
        );
        let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-env".to_owned());
        let transcriber = Transcriber::from_config(http(), &audio, &ModelsConfig::default(), &env)
            .expect("valid")
            .expect("a transcriber");
        assert_eq!(
            transcriber.models(),
            &[TranscriptionModel::new(
                "openai",
                DEFAULT_TRANSCRIPTION_MODEL,
                DEFAULT_OPENAI_BASE_URL,
                Some("sk-env".into())
            )]
        );
        let off = audio_config("enabled: false\n");
        assert!(
            Transcriber::from_config(http(), &off, &ModelsConfig::default(), &env)
                .expect("valid")
                .is_none()
        );
    }

    #[test]
    fn configured_models_take_their_providers_url_and_key() {
        let groq = ProviderConfig {
            api: Some(ProviderApi::Openai),
            api_key_env: Some("GROQ_API_KEY".to_owned()),
            base_url: Some("https://api.groq.com/openai/v1".to_owned()),
            ..ProviderConfig::default()
        };
        let models = models_config(&[("groq", groq)]);
        let env = |name: &str| match name {
            "GROQ_API_KEY" => Some("gsk".to_owned()),
            "OPENAI_API_KEY" => Some("sk".to_owned()),
            _ => None,
        };
        let audio = audio_config(
            "models:\n  - { provider: groq, model: whisper-large-v3-turbo }\n  \
             - { provider: openai, model: gpt-4o-transcribe }\n",
        );
        let transcriber = Transcriber::from_config(http(), &audio, &models, &env)
            .expect("valid")
            .expect("a transcriber");
        assert_eq!(
            transcriber.models(),
            &[
                TranscriptionModel::new(
                    "groq",
                    "whisper-large-v3-turbo",
                    "https://api.groq.com/openai/v1",
                    Some("gsk".into())
                ),
                TranscriptionModel::new(
                    "openai",
                    "gpt-4o-transcribe",
                    DEFAULT_OPENAI_BASE_URL,
                    Some("sk".into())
                ),
            ]
        );
        // The OpenAI key never goes to another provider.
        let local = models_config(&[(
            "local",
            ProviderConfig {
                base_url: Some("http://127.0.0.1:8000/v1".to_owned()),
                ..ProviderConfig::default()
            },
        )]);
        let audio = audio_config("models: [{ provider: local, model: whisper }]\n");
        let transcriber = Transcriber::from_config(http(), &audio, &local, &env)
            .expect("valid")
            .expect("a transcriber");
        assert_eq!(transcriber.models()[0].api_key, None);
        assert!(!format!("{transcriber:?}").contains("gsk"));
    }

    #[test]
    fn unusable_providers_are_config_errors() {
        let none = |_: &str| None;
        let audio = audio_config("models: [{ provider: groq, model: w }]\n");
        assert_eq!(
            Transcriber::from_config(http(), &audio, &ModelsConfig::default(), &none).err(),
            Some(TranscriptionConfigError::NoBaseUrl {
                index: 0,
                provider: "groq".to_owned()
            })
        );
        let audio = audio_config("models: [{ provider: anthropic, model: w }]\n");
        assert_eq!(
            Transcriber::from_config(http(), &audio, &ModelsConfig::default(), &none).err(),
            Some(TranscriptionConfigError::NotOpenAiCompatible {
                index: 0,
                provider: "anthropic".to_owned()
            })
        );
    }
}
