//! Media that travels with messages: the attachments a chat message brings (stored once in the
//! blob store, named by [`Attachment::blob_key`]), the images a model is shown with a user
//! message ([`ImageInput`]), and the files a reply sends back ([`OutboundMedia`]).
//!
//! Only references travel through queues and transcripts; bytes are read from the blob store
//! (or the workspace) where they are needed, so no event or session document grows with a
//! photo.

use serde::{Deserialize, Serialize};

/// What an attachment is, as the platforms tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MediaKind {
    /// A photo or picture.
    Image,
    /// A voice note or an audio file.
    Audio,
    /// A video (also a Telegram video note).
    Video,
    /// Any other file (PDF, CSV, …).
    Document,
    /// A sticker.
    Sticker,
}

impl MediaKind {
    /// The body a message with only this attachment gets (spec `openclaw-tools.md` §3.1).
    pub fn placeholder(self) -> &'static str {
        match self {
            Self::Image => "<media:image>",
            Self::Audio => "<media:audio>",
            Self::Video => "<media:video>",
            Self::Document => "<media:document>",
            Self::Sticker => "<media:sticker>",
        }
    }

    /// The kind a MIME type names (`image/png` → image, `audio/ogg` → audio, …); documents
    /// otherwise.
    pub fn of_mime(mime: &str) -> Self {
        let top = mime.split('/').next().unwrap_or_default().trim();
        match top.to_ascii_lowercase().as_str() {
            "image" => Self::Image,
            "audio" => Self::Audio,
            "video" => Self::Video,
            _ => Self::Document,
        }
    }
}

/// One attachment of an inbound message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attachment {
    /// What it is.
    pub kind: MediaKind,
    /// Its MIME type (`image/jpeg`; `application/octet-stream` when unknown).
    pub mime: String,
    /// Its file name, when the platform gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Its size in bytes (as stored, or as announced when it was skipped).
    #[serde(default)]
    pub size: u64,
    /// Where it is stored in the blob store; `None` when it was not stored (see `skipped`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob_key: Option<String>,
    /// Why it was not stored (too large, the platform refused the download…), for the note
    /// the model reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// An image shown to a model with a user message: its bytes, already within the size the
/// model takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageInput {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The encoded image.
    #[serde(with = "base64_bytes")]
    pub data: Vec<u8>,
}

/// A file a reply sends to the chat (a `MEDIA:` line, the `message` tool's `media`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundMedia {
    /// What it is: an image goes as a photo, audio as a voice note when `as_voice`.
    pub kind: MediaKind,
    /// The file name the chat shows.
    pub name: String,
    /// Its MIME type.
    pub mime: String,
    /// The file.
    pub bytes: Vec<u8>,
    /// Send audio as a voice note (`[[audio_as_voice]]`).
    pub as_voice: bool,
}

/// Bytes as base64 in JSON.
mod base64_bytes {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD
            .decode(text.as_bytes())
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_follow_the_mime_type_and_have_the_spec_placeholders() {
        assert_eq!(MediaKind::of_mime("image/jpeg"), MediaKind::Image);
        assert_eq!(MediaKind::of_mime("Audio/OGG"), MediaKind::Audio);
        assert_eq!(MediaKind::of_mime("video/mp4"), MediaKind::Video);
        assert_eq!(MediaKind::of_mime("application/pdf"), MediaKind::Document);
        assert_eq!(MediaKind::of_mime(""), MediaKind::Document);
        assert_eq!(MediaKind::Audio.placeholder(), "<media:audio>");
        assert_eq!(MediaKind::Sticker.placeholder(), "<media:sticker>");
    }

    #[test]
    fn an_image_input_round_trips_as_base64() {
        let image = ImageInput {
            media_type: "image/png".to_owned(),
            data: vec![0x89, b'P', b'N', b'G'],
        };
        let json = serde_json::to_value(&image).expect("encodes");
        assert_eq!(json["data"], "iVBORw==");
        let back: ImageInput = serde_json::from_value(json).expect("decodes");
        assert_eq!(back, image);
    }
}
