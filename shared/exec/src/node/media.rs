//! Files a node command names on `MEDIA:` lines, as they travel with its report (spec
//! `openclaw-tools.md` §3.7, §3.10): the path is on the node's disk, so the node uploads the
//! file inside the signed [`ExecReport`](super::wire::ExecReport) ([`NodeFile`]), or says why
//! it did not ([`RefusedFile`]). The caps here keep a signed report, base64 and all, well
//! under the 6 MB a Lambda request may carry; the backend applies them again and never trusts
//! the node's word for sizes.
//!
//! The backend stores an uploaded file under a content-addressed key ([`outbound_media_key`]),
//! so a report delivered twice stores one object.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Largest file one `MEDIA:` line may upload (2 MiB).
pub const MAX_MEDIA_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// Most bytes of files one report may carry (3 MiB): 4 MiB in base64, which leaves room in a
/// 6 MB Lambda request for the output (200 kB, escaped twice over in the worst case).
pub const MAX_MEDIA_REPORT_BYTES: u64 = 3 * 1024 * 1024;

/// Most files one report may carry.
pub const MAX_MEDIA_FILES: usize = 16;

/// Largest `POST /nodes/results` body a server should take: the files' base64, the output,
/// the JSON around them and the envelope's escaping.
pub const MAX_REPORT_BODY_BYTES: usize = 8 * 1024 * 1024;

/// Where the backend keeps files uploaded with a node's report.
pub const OUTBOUND_MEDIA_PREFIX: &str = "media/outbound/";

/// A file a command named on a `MEDIA:` line, uploaded with its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeFile {
    /// The path exactly as the `MEDIA:` line named it (what the backend rewrites).
    pub path: String,
    /// The file's own name (its last path segment).
    pub name: String,
    /// Its MIME type as the node guessed it from the name.
    pub mime: String,
    /// The bytes, base64 (standard alphabet, padded).
    pub data_base64: String,
}

impl NodeFile {
    /// A file named `path` on its `MEDIA:` line, with `bytes`.
    pub fn new(path: &str, name: &str, bytes: &[u8]) -> Self {
        Self {
            path: path.to_owned(),
            name: name.to_owned(),
            mime: mime_of_name(name).to_owned(),
            data_base64: STANDARD.encode(bytes),
        }
    }

    /// The bytes, or `None` when `data_base64` is not base64 or decodes to more than `limit`
    /// bytes (checked on the encoded length first, so a huge upload is never decoded).
    pub fn bytes(&self, limit: u64) -> Option<Vec<u8>> {
        let encoded = self.data_base64.trim();
        let most_decoded = (encoded.len() as u64).div_ceil(4) * 3;
        if most_decoded > limit.saturating_add(3) {
            return None;
        }
        let bytes = STANDARD.decode(encoded).ok()?;
        (bytes.len() as u64 <= limit).then_some(bytes)
    }
}

/// A `MEDIA:` line whose file the node did not upload, and why (`outside the command's
/// directory`, `not a file`, `larger than 2 MB`, `unreadable`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedFile {
    /// The path exactly as the `MEDIA:` line named it.
    pub path: String,
    /// Why it was not sent.
    pub reason: String,
}

/// The blob key of an uploaded file: `media/outbound/<sha256 hex of the bytes>.<ext>`, the
/// extension from `name` (short and plain), else from `mime`, else `bin`.
pub fn outbound_media_key(bytes: &[u8], name: &str, mime: &str) -> String {
    let digest = hex::encode(Sha256::digest(bytes));
    format!(
        "{OUTBOUND_MEDIA_PREFIX}{digest}.{}",
        media_extension(name, mime)
    )
}

/// True for a key [`outbound_media_key`] makes: the prefix, 64 lowercase hex digits, a dot and
/// a plain extension of at most 8 characters.
pub fn is_outbound_media_key(key: &str) -> bool {
    let Some(rest) = key.strip_prefix(OUTBOUND_MEDIA_PREFIX) else {
        return false;
    };
    let Some((digest, ext)) = rest.split_once('.') else {
        return false;
    };
    digest.len() == 64
        && digest
            .bytes()
            .all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f'))
        && plain_extension(ext)
}

fn plain_extension(ext: &str) -> bool {
    !ext.is_empty()
        && ext.len() <= 8
        && ext
            .bytes()
            .all(|byte| byte.is_ascii_lowercase() || byte.is_ascii_digit())
}

/// The extension a stored file gets.
fn media_extension(name: &str, mime: &str) -> String {
    let from_name = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .filter(|ext| plain_extension(ext));
    if let Some(ext) = from_name {
        return ext;
    }
    let mime = mime.split(';').next().unwrap_or("").trim();
    MIME_EXTENSIONS
        .iter()
        .find(|(_, known)| known.eq_ignore_ascii_case(mime))
        .map_or("bin", |(ext, _)| ext)
        .to_owned()
}

/// Extensions and the MIME types they stand for (the first extension of a type is the one a
/// stored file gets).
const MIME_EXTENSIONS: &[(&str, &str)] = &[
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("svg", "image/svg+xml"),
    ("pdf", "application/pdf"),
    ("txt", "text/plain"),
    ("md", "text/markdown"),
    ("log", "text/plain"),
    ("csv", "text/csv"),
    ("json", "application/json"),
    ("html", "text/html"),
    ("ogg", "audio/ogg"),
    ("oga", "audio/ogg"),
    ("opus", "audio/ogg"),
    ("mp3", "audio/mpeg"),
    ("m4a", "audio/mp4"),
    ("wav", "audio/wav"),
    ("mp4", "video/mp4"),
    ("mov", "video/quicktime"),
    ("webm", "video/webm"),
    ("zip", "application/zip"),
];

/// The MIME type a file name's extension suggests; `application/octet-stream` otherwise.
pub fn mime_of_name(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, ext)| ext.to_ascii_lowercase())
        .unwrap_or_default();
    MIME_EXTENSIONS
        .iter()
        .find(|(known, _)| *known == ext)
        .map_or("application/octet-stream", |(_, mime)| mime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_content_addressed_with_a_plain_extension() {
        let key = outbound_media_key(b"png bytes", "chart.PNG", "image/png");
        assert!(
            key.starts_with(OUTBOUND_MEDIA_PREFIX) && key.ends_with(".png"),
            "{key}"
        );
        assert!(is_outbound_media_key(&key), "{key}");
        assert_eq!(key, outbound_media_key(b"png bytes", "other.png", ""));
        assert_ne!(key, outbound_media_key(b"other bytes", "chart.png", ""));
        assert!(outbound_media_key(b"x", "noext", "image/jpeg").ends_with(".jpg"));
        assert!(outbound_media_key(b"x", "a.ph/p", "").ends_with(".bin"));
        assert!(outbound_media_key(b"x", "a.verylongext", "").ends_with(".bin"));
        for bad in [
            "media/outbound/../x.png",
            "media/outbound/abc.png",
            "media/inbound/0000000000000000000000000000000000000000000000000000000000000000.png",
            &format!("{OUTBOUND_MEDIA_PREFIX}{}.PNG", "a".repeat(64)),
            &format!("{OUTBOUND_MEDIA_PREFIX}{}.", "a".repeat(64)),
        ] {
            assert!(!is_outbound_media_key(bad), "{bad}");
        }
    }

    #[test]
    fn uploads_decode_only_within_their_limit() {
        let file = NodeFile::new("./a.png", "a.png", &[7_u8; 100]);
        assert_eq!(file.mime, "image/png");
        assert_eq!(file.bytes(100), Some(vec![7_u8; 100]));
        assert_eq!(file.bytes(99), None);
        let garbage = NodeFile {
            data_base64: "not base64!".to_owned(),
            ..file
        };
        assert_eq!(garbage.bytes(1_000), None);
    }
}
