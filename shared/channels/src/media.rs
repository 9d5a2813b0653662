//! Inbound media: what a webhook says a message carries ([`PendingMedia`]), how each platform
//! fetches it ([`MediaDownloader`]), and the one step ingress runs after the claim and before
//! the enqueue ([`MediaIngest::store_all`]): every attachment is stored once in the blob store
//! under a key derived from the channel, the platform's event id and its index, so a retried
//! webhook finds its objects already there and downloads nothing twice.
//!
//! Webhook handlers stay synchronous and network-free: they only describe the media. A file
//! over the channel's limit, or one the platform refuses for good, is not stored; its
//! [`Attachment::skipped`] says why, so the model can be told. A transient failure (the
//! platform or the store unreachable) is a [`MediaError`]: ingress answers 503 and the
//! platform retries.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use clawless_base::media::{Attachment, MediaKind};
use clawless_base::object_store::{ObjectStore, PutCondition, StoreError};
use sha2::{Digest, Sha256};

use crate::webhook::{PlatformChannel, WebhookError, WebhookOutcome, WebhookRequest};

/// One mebibyte, the unit of every `mediaMaxMb`.
pub const MB: u64 = 1024 * 1024;

/// Largest `mediaMaxMb` a channel accepts.
pub const MAX_MEDIA_MAX_MB: u64 = 2048;

/// `mediaMaxMb` (else `default_mb`) in bytes; `Err` with the reason when out of range.
pub fn media_max_bytes(configured: Option<u64>, default_mb: u64) -> Result<u64, String> {
    match configured.unwrap_or(default_mb) {
        mb @ 1..=MAX_MEDIA_MAX_MB => Ok(mb * MB),
        mb => Err(format!(
            "mediaMaxMb {mb} is out of range (1 to {MAX_MEDIA_MAX_MB})"
        )),
    }
}

/// How long one download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// Where the platform keeps an attachment's bytes.
#[derive(Clone, PartialEq, Eq)]
pub enum MediaSource {
    /// A Telegram `file_id` (resolved with `getFile`).
    TelegramFile(String),
    /// A URL on the platform (Slack `url_private_download`, a Discord CDN URL).
    Url(String),
    /// A Slack file id whose event carried no download URL (resolved with `files.info`).
    SlackFile(String),
    /// The bytes themselves, sent in the webhook body (the generic channel).
    Inline(Vec<u8>),
}

impl std::fmt::Debug for MediaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TelegramFile(id) => f.debug_tuple("TelegramFile").field(id).finish(),
            Self::Url(url) => f.debug_tuple("Url").field(url).finish(),
            Self::SlackFile(id) => f.debug_tuple("SlackFile").field(id).finish(),
            Self::Inline(bytes) => write!(f, "Inline({} bytes)", bytes.len()),
        }
    }
}

/// An attachment a webhook announced, not yet downloaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMedia {
    /// What it is.
    pub kind: MediaKind,
    /// Its MIME type, when the platform says.
    pub mime: Option<String>,
    /// Its file name, when the platform gives one.
    pub name: Option<String>,
    /// Its size in bytes, as announced (`None` when not announced).
    pub size: Option<u64>,
    /// Where its bytes are.
    pub source: MediaSource,
}

impl PendingMedia {
    /// The attachment as it is recorded when it is not stored, with the reason.
    pub fn skipped(&self, reason: impl Into<String>) -> Attachment {
        Attachment {
            kind: self.kind,
            mime: self.mime_or_default(),
            name: self.name.clone(),
            size: self.size.unwrap_or(0),
            blob_key: None,
            skipped: Some(reason.into()),
        }
    }

    fn mime_or_default(&self) -> String {
        self.mime
            .clone()
            .filter(|mime| !mime.trim().is_empty())
            .unwrap_or_else(|| default_mime(self.kind).to_owned())
    }
}

/// The body of a message that has media and no text: the first attachment's placeholder
/// (`<media:audio>`), so it still starts a turn.
pub fn placeholder_body(media: &[PendingMedia]) -> Option<String> {
    media
        .first()
        .map(|first| first.kind.placeholder().to_owned())
}

/// The bytes of one attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downloaded {
    /// The file.
    pub bytes: Vec<u8>,
    /// The MIME type the server named (`Content-Type`), if any.
    pub mime: Option<String>,
}

/// Why an attachment could not be downloaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownloadError {
    /// Bigger than the channel takes (`size` is as far as it is known).
    #[error("too large: {} over the {} limit", describe_size(*size), describe_size(*limit))]
    TooLarge {
        /// The file's size in bytes (announced, or read so far).
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// Refused for good (gone, forbidden, not on an allowed host): skipped with this reason.
    #[error("{0}")]
    Refused(String),
    /// Worth retrying (the platform unreachable, HTTP 5xx or 429).
    #[error("{0}")]
    Transient(String),
}

/// `31 MB` (whole MB, rounded up, so a file just over a limit never reads as equal to it),
/// or bytes below one MB.
fn describe_size(bytes: u64) -> String {
    if bytes >= MB {
        format!("{} MB", bytes.div_ceil(MB))
    } else {
        format!("{bytes} bytes")
    }
}

/// A transient failure: nothing was lost, the platform should retry the webhook (503).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("inbound media could not be stored: {0}")]
pub struct MediaError(pub String);

/// How one platform fetches the files its messages carry.
#[async_trait]
pub trait MediaDownloader: Send + Sync + std::fmt::Debug {
    /// The largest file this channel stores, in bytes (`mediaMaxMb`).
    fn max_bytes(&self) -> u64;

    /// Fetches `media`, reading at most [`MediaDownloader::max_bytes`].
    async fn download(&self, media: &PendingMedia) -> Result<Downloaded, DownloadError>;
}

/// The downloader of a channel whose attachments come inline (the generic webhook): no
/// network at all.
#[derive(Debug, Clone, Copy)]
pub struct InlineOnly {
    /// The cap on one decoded attachment, in bytes.
    pub max_bytes: u64,
}

#[async_trait]
impl MediaDownloader for InlineOnly {
    fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    async fn download(&self, media: &PendingMedia) -> Result<Downloaded, DownloadError> {
        match &media.source {
            MediaSource::Inline(bytes) => Ok(Downloaded {
                bytes: bytes.clone(),
                mime: None,
            }),
            _ => Err(DownloadError::Refused(
                "this channel takes inline attachments only".to_owned(),
            )),
        }
    }
}

/// The blob store and a channel's downloader: what ingress needs to store attachments.
#[derive(Clone)]
pub struct MediaIngest {
    channel: &'static str,
    store: Arc<dyn ObjectStore>,
    downloader: Arc<dyn MediaDownloader>,
}

impl std::fmt::Debug for MediaIngest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaIngest")
            .field("channel", &self.channel)
            .field("downloader", &self.downloader)
            .finish_non_exhaustive()
    }
}

impl MediaIngest {
    /// Stores `channel`'s attachments in `store`, fetched by `downloader`.
    pub fn new(
        channel: &'static str, store: Arc<dyn ObjectStore>, downloader: Arc<dyn MediaDownloader>,
    ) -> Self {
        Self {
            channel,
            store,
            downloader,
        }
    }

    /// Downloads and stores each of `media` (of the platform event `event_id`) once. A file
    /// already stored by an earlier delivery of the same event is reused without a
    /// download. Too large or refused files come back skipped; a transient failure of the
    /// platform or of the store is an error (nothing half-kept matters: keys are stable).
    pub async fn store_all(
        &self, event_id: &str, media: &[PendingMedia],
    ) -> Result<Vec<Attachment>, MediaError> {
        let mut attachments = Vec::with_capacity(media.len());
        for (index, item) in media.iter().enumerate() {
            attachments.push(self.store_one(event_id, index, item).await?);
        }
        Ok(attachments)
    }

    async fn store_one(
        &self, event_id: &str, index: usize, item: &PendingMedia,
    ) -> Result<Attachment, MediaError> {
        let key = blob_key(self.channel, event_id, index, item);
        let store_failed = |err: StoreError| MediaError(format!("blob store: {err}"));
        if let Some(meta) = self.store.head(&key).await.map_err(store_failed)? {
            return Ok(stored(item, item.mime_or_default(), key, meta.size));
        }
        let limit = self.downloader.max_bytes();
        if let Some(size) = item.size.filter(|size| *size > limit) {
            return Ok(item.skipped(DownloadError::TooLarge { size, limit }.to_string()));
        }
        let downloaded = match self.downloader.download(item).await {
            Ok(downloaded) => downloaded,
            Err(DownloadError::Transient(reason)) => {
                return Err(MediaError(format!("download failed: {reason}")));
            }
            Err(err) => {
                tracing::warn!(channel = self.channel, reason = %err, "attachment skipped");
                return Ok(item.skipped(err.to_string()));
            }
        };
        if downloaded.bytes.len() as u64 > limit {
            let size = downloaded.bytes.len() as u64;
            return Ok(item.skipped(DownloadError::TooLarge { size, limit }.to_string()));
        }
        let mime = item
            .mime
            .clone()
            .filter(|mime| !mime.trim().is_empty())
            .or(downloaded.mime.filter(|mime| !mime.trim().is_empty()))
            .unwrap_or_else(|| default_mime(item.kind).to_owned());
        let size = downloaded.bytes.len() as u64;
        match self
            .store
            .put(&key, downloaded.bytes, PutCondition::IfAbsent)
            .await
        {
            // Another delivery of the same event stored it first: the same bytes, reuse it.
            Ok(_) | Err(StoreError::Conflict(_)) => Ok(stored(item, mime, key, size)),
            Err(err) => Err(store_failed(err)),
        }
    }
}

fn stored(item: &PendingMedia, mime: String, key: String, size: u64) -> Attachment {
    Attachment {
        kind: item.kind,
        mime,
        name: item.name.clone(),
        size,
        blob_key: Some(key),
        skipped: None,
    }
}

/// `media/inbound/<channel>/<hash of the event id>/<index>.<ext>`: the same for every delivery
/// of one platform event.
pub fn blob_key(channel: &str, event_id: &str, index: usize, item: &PendingMedia) -> String {
    let digest = Sha256::digest(event_id.as_bytes());
    let hash = hex::encode(&digest[..16]);
    format!("media/inbound/{channel}/{hash}/{index}.{}", extension(item))
}

/// The file extension: the name's (when short and plain), else the MIME type's, else the
/// kind's.
fn extension(item: &PendingMedia) -> String {
    extension_of(item.name.as_deref(), item.mime.as_deref(), item.kind)
}

/// The extension a file named `name`, of type `mime` and kind `kind`, is stored under.
pub(crate) fn extension_of(name: Option<&str>, mime: Option<&str>, kind: MediaKind) -> String {
    let from_name = name
        .and_then(|name| name.rsplit_once('.'))
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .filter(|ext| {
            !ext.is_empty() && ext.len() <= 8 && ext.bytes().all(|b| b.is_ascii_alphanumeric())
        });
    if let Some(ext) = from_name {
        return ext;
    }
    let mime = mime.unwrap_or("").to_ascii_lowercase();
    let by_mime = match mime.split(';').next().unwrap_or("").trim() {
        "image/jpeg" => "jpg",
        "image/png" => "png",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "audio/ogg" => "ogg",
        "audio/mpeg" => "mp3",
        "audio/mp4" | "audio/m4a" | "audio/x-m4a" => "m4a",
        "video/mp4" => "mp4",
        "video/webm" => "webm",
        "application/pdf" => "pdf",
        "text/plain" => "txt",
        "application/x-tgsticker" => "tgs",
        _ => "",
    };
    if !by_mime.is_empty() {
        return by_mime.to_owned();
    }
    match kind {
        MediaKind::Image => "jpg",
        MediaKind::Audio => "ogg",
        MediaKind::Video => "mp4",
        MediaKind::Sticker => "webp",
        MediaKind::Document => "bin",
    }
    .to_owned()
}

fn default_mime(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "image/jpeg",
        MediaKind::Sticker => "image/webp",
        MediaKind::Audio | MediaKind::Video | MediaKind::Document => "application/octet-stream",
    }
}

/// A platform channel with its media step: verification and classification are the inner
/// channel's; [`PlatformChannel::media`] hands ingress the [`MediaIngest`].
#[derive(Debug, Clone)]
pub struct WithMedia {
    inner: Arc<dyn PlatformChannel>,
    ingest: MediaIngest,
}

impl WithMedia {
    /// `inner`, storing its attachments through `ingest`.
    pub fn new(inner: Arc<dyn PlatformChannel>, ingest: MediaIngest) -> Self {
        Self { inner, ingest }
    }
}

impl PlatformChannel for WithMedia {
    fn id(&self) -> &'static str {
        self.inner.id()
    }

    fn handle(&self, request: &WebhookRequest<'_>) -> Result<WebhookOutcome, WebhookError> {
        self.inner.handle(request)
    }

    fn media(&self) -> Option<&MediaIngest> {
        Some(&self.ingest)
    }
}

/// GETs `request` and reads at most `max_bytes` of its body: a 2xx is the file, 408, 429 and
/// 5xx (and an unreachable server) are transient, any other status is a refusal.
pub async fn fetch_limited(
    request: reqwest::RequestBuilder, max_bytes: u64,
) -> Result<Downloaded, DownloadError> {
    fetch_limited_within(request, max_bytes, DOWNLOAD_TIMEOUT).await
}

/// [`fetch_limited`] with the whole download bounded by `timeout`.
pub async fn fetch_limited_within(
    request: reqwest::RequestBuilder, max_bytes: u64, timeout: Duration,
) -> Result<Downloaded, DownloadError> {
    let mut response = request
        .timeout(timeout)
        .send()
        .await
        .map_err(|err| DownloadError::Transient(err.without_url().to_string()))?;
    let status = response.status().as_u16();
    match status {
        200..=299 => {}
        408 | 429 | 500..=599 => {
            return Err(DownloadError::Transient(format!("HTTP {status}")));
        }
        _ => {
            return Err(DownloadError::Refused(format!(
                "download refused (HTTP {status})"
            )));
        }
    }
    if let Some(length) = response.content_length().filter(|len| *len > max_bytes) {
        return Err(DownloadError::TooLarge {
            size: length,
            limit: max_bytes,
        });
    }
    let mime = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(';').next().unwrap_or("").trim().to_owned())
        .filter(|value| !value.is_empty());
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| DownloadError::Transient(err.without_url().to_string()))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() as u64 > max_bytes {
            return Err(DownloadError::TooLarge {
                size: bytes.len() as u64,
                limit: max_bytes,
            });
        }
    }
    Ok(Downloaded { bytes, mime })
}

/// Whether `url` is https (or, for tests and proxies, the same origin as `trusted_base`) on
/// one of `hosts`: a bot token or a download goes nowhere else.
pub fn url_is_allowed(url: &str, hosts: &[&str], trusted_base: Option<&str>) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    if let Some(base) = trusted_base.and_then(|base| url::Url::parse(base).ok())
        && parsed.scheme() == base.scheme()
        && parsed.host_str() == base.host_str()
        && parsed.port_or_known_default() == base.port_or_known_default()
    {
        return true;
    }
    parsed.scheme() == "https"
        && parsed.host_str().is_some_and(|host| {
            hosts
                .iter()
                .any(|allowed| host.eq_ignore_ascii_case(allowed))
        })
}

#[cfg(test)]
mod tests {
    use clawless_core::testing::InMemoryObjectStore;

    use super::*;

    fn voice(bytes: &[u8]) -> PendingMedia {
        PendingMedia {
            kind: MediaKind::Audio,
            mime: Some("audio/ogg".to_owned()),
            name: None,
            size: Some(bytes.len() as u64),
            source: MediaSource::Inline(bytes.to_vec()),
        }
    }

    #[tokio::test]
    async fn an_attachment_is_stored_once_under_a_stable_key() {
        let store = Arc::new(InMemoryObjectStore::new());
        let ingest = MediaIngest::new(
            "generic",
            Arc::clone(&store) as Arc<dyn ObjectStore>,
            Arc::new(InlineOnly { max_bytes: MB }),
        );
        let media = [voice(b"OggS...")];
        let first = ingest.store_all("m1", &media).await.unwrap();
        let again = ingest.store_all("m1", &media).await.unwrap();
        assert_eq!(first, again);
        let key = first[0].blob_key.clone().unwrap();
        assert!(key.starts_with("media/inbound/generic/"), "{key}");
        assert!(key.ends_with("/0.ogg"), "{key}");
        assert_eq!(first[0].mime, "audio/ogg");
        assert_eq!(first[0].size, 7);
        let listing = store.list("media/inbound/", 10).await.unwrap();
        assert_eq!(listing.objects.len(), 1);
    }

    #[tokio::test]
    async fn an_oversized_attachment_is_skipped_with_a_reason() {
        let store = Arc::new(InMemoryObjectStore::new());
        let ingest = MediaIngest::new(
            "generic",
            Arc::clone(&store) as Arc<dyn ObjectStore>,
            Arc::new(InlineOnly { max_bytes: 4 }),
        );
        let mut big = voice(b"0123456789");
        big.size = Some(31 * MB);
        let attachments = ingest.store_all("m2", &[big]).await.unwrap();
        assert_eq!(attachments[0].blob_key, None);
        assert_eq!(
            attachments[0].skipped.as_deref(),
            Some("too large: 31 MB over the 4 bytes limit")
        );
        assert!(store.list("", 10).await.unwrap().objects.is_empty());
    }

    #[test]
    fn too_large_reads_in_whole_mb_rounded_up() {
        let err = DownloadError::TooLarge {
            size: 31 * MB,
            limit: 20 * MB,
        };
        assert_eq!(err.to_string(), "too large: 31 MB over the 20 MB limit");
        let just_over = DownloadError::TooLarge {
            size: 20 * MB + 1,
            limit: 20 * MB,
        };
        assert_eq!(
            just_over.to_string(),
            "too large: 21 MB over the 20 MB limit"
        );
        assert_eq!(media_max_bytes(None, 20), Ok(20 * MB));
        assert!(media_max_bytes(Some(0), 20).is_err());
        assert!(media_max_bytes(Some(MAX_MEDIA_MAX_MB + 1), 20).is_err());
    }

    #[test]
    fn only_listed_https_hosts_or_the_trusted_origin_are_allowed() {
        let hosts = ["cdn.discordapp.com"];
        assert!(url_is_allowed(
            "https://cdn.discordapp.com/a/b.png",
            &hosts,
            None
        ));
        assert!(!url_is_allowed(
            "http://cdn.discordapp.com/a/b.png",
            &hosts,
            None
        ));
        assert!(!url_is_allowed("https://evil.example/a.png", &hosts, None));
        assert!(!url_is_allowed(
            "https://cdn.discordapp.com.evil.example/",
            &hosts,
            None
        ));
        assert!(url_is_allowed(
            "http://127.0.0.1:9/f",
            &hosts,
            Some("http://127.0.0.1:9")
        ));
        assert!(!url_is_allowed(
            "http://127.0.0.1:10/f",
            &hosts,
            Some("http://127.0.0.1:9")
        ));
        assert!(!url_is_allowed("not a url", &hosts, None));
    }
}
