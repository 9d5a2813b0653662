//! The media links port: a URL through which a chat's receiver fetches one file of the blob
//! store, for a limited time and without credentials of its own. On AWS it is a presigned S3
//! GET URL (`clawless_aws::S3MediaLinks`); in `clawless local` a signed route on the local
//! server (`clawless_channels::media_links::SignedMediaLinks`).
//!
//! Only keys under [`MEDIA_PREFIX`] are ever linked: a link never opens a session document or
//! a tool's cache kept in the same store.

use std::time::Duration;

use async_trait::async_trait;

/// The part of the blob store links may point into.
pub const MEDIA_PREFIX: &str = "media/";

/// How long a link stays valid unless its maker is bound to less: a day.
pub const MEDIA_LINK_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Why no link could be made for a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no link for {key}: {reason}")]
pub struct LinkError {
    /// The blob-store key.
    pub key: String,
    /// What went wrong.
    pub reason: String,
}

/// Makes time-limited URLs for files of the blob store.
#[async_trait]
pub trait MediaLinks: Send + Sync + std::fmt::Debug {
    /// A URL that serves the object `key` (under [`MEDIA_PREFIX`]) with `Content-Type: mime`
    /// to anyone holding it, until it expires.
    async fn link(&self, key: &str, mime: &str) -> Result<String, LinkError>;
}

/// Whether `key` may be linked: under [`MEDIA_PREFIX`] and a valid object key.
pub fn is_linkable(key: &str) -> bool {
    key.strip_prefix(MEDIA_PREFIX)
        .is_some_and(|rest| !rest.is_empty())
        && crate::object_store::validate_key(key).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_valid_keys_under_media_are_linkable() {
        assert!(is_linkable("media/outbound/ab12.png"));
        assert!(is_linkable("media/inbound/generic/ff/0.txt"));
        for key in [
            "media/",
            "sessions/s1.json",
            "media/../sessions/s1.json",
            "/media/a.png",
            "mediax/a.png",
            "media//a.png",
        ] {
            assert!(!is_linkable(key), "{key}");
        }
    }
}
