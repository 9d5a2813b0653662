//! What the model reads of a message's attachments (spec `openclaw-tools.md` §3.1–3.4):
//! voice notes and audio transcribed into its text (a spoken `/command` works), text files
//! and PDFs read into it, fenced as untrusted content, and the media note naming what was
//! stored or skipped; images go to a model that sees them as images (their blob keys ride on
//! the inbound step, `context_keeper.rs` loads them); for one that does not, the first image
//! is described by `agents.defaults.imageModel` (the description joins the text as an
//! `[Image]` section) and the rest are only named. Nothing here blocks a reply: an attachment that cannot be read or transcribed is
//! named in the note and the turn goes on.

use clawless_base::media::{Attachment, MediaKind};
use clawless_core::turn::events::InboundMessage;
use clawless_core::turn::state::SessionState;

use std::time::Duration;

use clawless_base::media::ImageInput;

use super::TurnService;
use crate::media::describe::{Description, VisionModels, describe_images, trimmed_to};
use crate::media::files::{MAX_FILE_BYTES, file_block};
use crate::media::note::{Capability, Understanding, media_note, understanding_body};
use crate::media::transcribe::Transcriber;

/// A message as the model reads it, and the images it is shown.
pub(super) struct UnderstoodMessage {
    /// The message, its text rewritten (transcripts, files, the media note).
    pub message: InboundMessage,
    /// What a command is read from: the caption, else a voice note's transcript.
    pub command_text: String,
    /// Blob keys of the images shown to a model that sees images.
    pub images: Vec<String>,
    /// What was done with each attachment, for `/status` (`None` without attachments).
    pub summary: Option<String>,
}

impl TurnService {
    /// `message` with its attachments understood.
    pub(super) async fn understand_media(
        &self, message: &InboundMessage, state: &SessionState,
    ) -> UnderstoodMessage {
        let mut understood = UnderstoodMessage {
            message: message.clone(),
            command_text: message.text.clone(),
            images: Vec::new(),
            summary: None,
        };
        if message.attachments.is_empty() {
            return understood;
        }
        let sees_images = self.model(state).sees_images();
        let mut transcribed = Vec::new();
        let mut outputs = Vec::new();
        let mut files = Vec::new();
        let mut done = Vec::new();
        // Like OpenClaw's default attachment policy: the first image is described.
        let mut described = false;
        for (index, attachment) in message.attachments.iter().enumerate() {
            let kind = kind_word(attachment.kind);
            let Some(key) = &attachment.blob_key else {
                let reason = attachment.skipped.as_deref().unwrap_or("not stored");
                done.push(format!("{kind} skipped ({reason})"));
                continue;
            };
            match attachment.kind {
                MediaKind::Image | MediaKind::Sticker if sees_images => {
                    understood.images.push(key.clone());
                    done.push(format!("{kind} shown"));
                }
                MediaKind::Image | MediaKind::Sticker if described => {
                    done.push(format!("{kind} named only (one image is described)"));
                }
                MediaKind::Image | MediaKind::Sticker => {
                    described = true;
                    match self.describe_image(key).await {
                        Ok(description) => {
                            outputs.push(Understanding {
                                capability: Capability::Image,
                                text: description.text,
                            });
                            done.push(format!("{kind} ok ({})", description.model));
                        }
                        Err(reason) => done.push(format!("{kind} not described ({reason})")),
                    }
                }
                MediaKind::Audio => match self.transcribe(attachment, key).await {
                    Ok((transcript, model)) => {
                        transcribed.push(index);
                        outputs.push(Understanding {
                            capability: Capability::Audio,
                            text: transcript,
                        });
                        done.push(format!("audio ok ({model})"));
                    }
                    Err(reason) => done.push(format!("audio not transcribed ({reason})")),
                },
                MediaKind::Document => match self.read_file(attachment, key).await {
                    Some(block) => {
                        files.push(block);
                        done.push("file read".to_owned());
                    }
                    None => done.push("file named only (not text)".to_owned()),
                },
                MediaKind::Video => done.push("video named only".to_owned()),
            }
        }
        understood.summary = Some(done.join(" · "));
        let caption = without_placeholders(&message.text);
        if caption.is_empty()
            && let [only] = outputs.as_slice()
            && only.capability == Capability::Audio
        {
            understood.command_text = only.text.trim().to_owned();
        }
        let mut text =
            understanding_body(&message.text, &outputs).unwrap_or_else(|| message.text.clone());
        if let Some(note) = media_note(&message.attachments, &transcribed) {
            text = join_blocks(&text, &note);
        }
        for file in files {
            text = join_blocks(&text, &file);
        }
        understood.message.text = text;
        understood
    }

    /// A stored image described by `agents.defaults.imageModel` (primary, then fallbacks),
    /// for a chat model that does not see images; `Err` says why there is none (logged; the
    /// note names the file).
    async fn describe_image(&self, key: &str) -> Result<Description, String> {
        let models = self
            .config()
            .agents
            .defaults
            .image_model
            .as_ref()
            .map(crate::config::ImageModelConfig::models)
            .unwrap_or_default();
        if models.is_empty() {
            return Err("the model does not see images and no imageModel is set".to_owned());
        }
        let describers = self
            .image_describers
            .get_or_init(|| VisionModels::new(self.model_factory.clone()));
        let bytes = self
            .stored(key, IMAGE_UNDERSTANDING_MAX_BYTES + 1)
            .await
            .ok_or("the stored file is unreadable")?;
        if bytes.len() as u64 > IMAGE_UNDERSTANDING_MAX_BYTES {
            return Err("maxBytes".to_owned());
        }
        let media_type = crate::media_input::image_type(&bytes).ok_or("not an image")?;
        let image = crate::media::resize::fit_image(
            ImageInput {
                media_type: media_type.to_owned(),
                data: bytes,
            },
            self.config().agents.defaults.image_max_dimension_px(),
        )
        .map_err(|error| format!("unreadable image: {error}"))?;
        match describe_images(
            describers.attempts(&models),
            DESCRIBE_PROMPT,
            vec![image],
            DESCRIBE_MAX_TOKENS,
            DESCRIBE_TIMEOUT,
        )
        .await
        {
            Ok(description) => {
                tracing::info!(model = %description.model, "image described");
                Ok(Description {
                    text: trimmed_to(&description.text, DESCRIPTION_MAX_CHARS),
                    ..description
                })
            }
            Err(failures) => {
                tracing::warn!(?failures, %key, "image not described");
                Err(failures.join("; "))
            }
        }
    }

    /// The transcript of an audio attachment and the `provider/model` that made it; `Err`
    /// says why there is none (logged; the note names the file).
    async fn transcribe(
        &self, attachment: &Attachment, key: &str,
    ) -> Result<(String, String), String> {
        let transcriber = self
            .transcriber()
            .ok_or("no transcription model is configured")?;
        let bytes = self
            .stored(key, transcriber_limit())
            .await
            .ok_or("the stored file is unreadable")?;
        let name = attachment.name.as_deref().unwrap_or("voice.ogg");
        match transcriber.transcribe(&bytes, &attachment.mime, name).await {
            Ok(transcript) => {
                let model = format!("{}/{}", transcript.provider, transcript.model);
                tracing::info!(%model, "audio transcribed");
                Ok((transcript.text, model))
            }
            Err(error) => {
                tracing::warn!(%error, %key, "audio not transcribed");
                Err(error.to_string())
            }
        }
    }

    /// A stored file's text as the model reads it, `None` when it is not text.
    async fn read_file(&self, attachment: &Attachment, key: &str) -> Option<String> {
        let bytes = self.stored(key, MAX_FILE_BYTES as u64 + 1).await?;
        let name = attachment.name.as_deref().unwrap_or("file");
        file_block(name, &attachment.mime, &bytes)
    }

    /// An attachment's bytes from the blob store, `None` (logged) when unreadable.
    async fn stored(&self, key: &str, max_bytes: u64) -> Option<Vec<u8>> {
        let blobs = self.blobs.as_ref()?;
        match blobs.get(key, max_bytes).await {
            Ok(Some(object)) => Some(object.bytes),
            Ok(None) => {
                tracing::warn!(%key, "stored attachment is gone");
                None
            }
            Err(error) => {
                tracing::warn!(%key, %error, "stored attachment unreadable");
                None
            }
        }
    }

    /// The transcriber `tools.media.audio` describes, built once; `None` when transcription
    /// is off or no model is available.
    fn transcriber(&self) -> Option<&Transcriber> {
        self.transcriber
            .get_or_init(|| {
                let http = clawless_http::client_builder().build().ok()?;
                let secrets = self.secrets.clone();
                let lookup = move |name: &str| secrets.lookup(name);
                Transcriber::from_config(
                    http,
                    &self.config().tools.media.audio,
                    &self.config().models,
                    &lookup,
                )
                .inspect_err(|error| tracing::warn!(%error, "no audio transcription"))
                .ok()
                .flatten()
            })
            .as_ref()
    }
}

/// What the image model is asked about a photo sent to a chat model without vision.
const DESCRIBE_PROMPT: &str = "Describe the image.";
/// A photo's description is cut to this many characters.
const DESCRIPTION_MAX_CHARS: usize = 500;
/// Output tokens of a photo's description.
const DESCRIBE_MAX_TOKENS: u32 = 1024;
/// How long describing a photo may take, per model.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest photo described (spec: understanding's image cap, 10 MB).
const IMAGE_UNDERSTANDING_MAX_BYTES: u64 = 10 * 1024 * 1024;

/// How `/status` names an attachment's kind.
fn kind_word(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "image",
        MediaKind::Audio => "audio",
        MediaKind::Video => "video",
        MediaKind::Document => "file",
        MediaKind::Sticker => "sticker",
    }
}

/// Audio read for a transcription: past the transcriber's own limit it refuses the file.
fn transcriber_limit() -> u64 {
    100 * 1024 * 1024
}

/// `text` without media placeholders (`<media:audio>`), trimmed: what the user wrote.
fn without_placeholders(text: &str) -> String {
    let mut rest = text.to_owned();
    for kind in [
        MediaKind::Image,
        MediaKind::Audio,
        MediaKind::Video,
        MediaKind::Document,
        MediaKind::Sticker,
    ] {
        rest = rest.replace(kind.placeholder(), "");
    }
    rest.trim().to_owned()
}

/// `first` and `second` as two paragraphs (just `second` when `first` is blank).
fn join_blocks(first: &str, second: &str) -> String {
    if first.trim().is_empty() {
        second.to_owned()
    } else {
        format!("{first}\n\n{second}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_not_what_the_user_wrote() {
        assert_eq!(without_placeholders("<media:audio>"), "");
        assert_eq!(
            without_placeholders(" <media:image> look at this "),
            "look at this"
        );
        assert_eq!(
            join_blocks("", "[media attached: x]"),
            "[media attached: x]"
        );
        assert_eq!(join_blocks("hi", "note"), "hi\n\nnote");
    }
}
