//! The files a node host uploaded with an exec report (spec `openclaw-tools.md` §3.7, §3.10):
//! stored in the blob store under content-addressed keys
//! (`media/outbound/<sha256 hex>.<ext>`, [`outbound_media_key`]), and the `MEDIA:` lines of the
//! command's output rewritten so the model and reply delivery see blob keys, never a path on
//! the node's disk:
//! - an uploaded file's line becomes `MEDIA:media/outbound/<sha256>.<ext>`;
//! - a refused one becomes `(MEDIA:<path> not sent: <reason>)`;
//! - any other media line (a node that predates uploads, a line on stderr) becomes
//!   `(MEDIA:<path> not sent: not uploaded by the node host)`.
//!
//! The backend checks the node's uploads again (base64, sizes, count) rather than trusting
//! them. A report delivered twice stores each file once: the key is the content's hash and
//! an existing object is left alone.

use std::collections::BTreeMap;

use clawless_base::media_lines::{ScannedLine, mentions_media, scan_media_lines};
use clawless_base::object_store::{ObjectStore, PutCondition, StoreError};
use clawless_exec::node::media::{
    MAX_MEDIA_FILE_BYTES, MAX_MEDIA_FILES, MAX_MEDIA_REPORT_BYTES, NodeFile, RefusedFile,
    outbound_media_key,
};

pub use clawless_exec::node::media::{OUTBOUND_MEDIA_PREFIX, is_outbound_media_key};

/// Why a media line the node did not account for is not sent.
pub const NOT_UPLOADED: &str = "not uploaded by the node host";

/// What became of a report's `MEDIA:` lines: the stored files and the refusals, by the path
/// the line named.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportMedia {
    /// Path on the node → blob key of the stored file.
    pub stored: BTreeMap<String, String>,
    /// Path on the node → why it is not sent.
    pub refused: BTreeMap<String, String>,
}

impl ReportMedia {
    fn refuse(&mut self, path: &str, reason: impl Into<String>) {
        if !self.stored.contains_key(path) {
            self.refused
                .entry(path.to_owned())
                .or_insert_with(|| reason.into());
        }
    }
}

/// Stores `files` in `store` (none: this deployment keeps no files, and they are refused) and
/// takes over the node's `refused` lines. Each file is checked again: valid base64, at most
/// [`MAX_MEDIA_FILE_BYTES`], [`MAX_MEDIA_REPORT_BYTES`] and [`MAX_MEDIA_FILES`] in all. A file
/// that cannot be stored is refused with a reason rather than holding up the result.
pub async fn store_report_media(
    store: Option<&dyn ObjectStore>, files: &[NodeFile], refused: &[RefusedFile],
) -> ReportMedia {
    let mut media = ReportMedia::default();
    let mut total: u64 = 0;
    for file in files {
        if media.stored.contains_key(&file.path) || media.refused.contains_key(&file.path) {
            continue;
        }
        if media.stored.len() >= MAX_MEDIA_FILES {
            media.refuse(
                &file.path,
                format!("more than {MAX_MEDIA_FILES} files in one result"),
            );
            continue;
        }
        let Some(bytes) = file.bytes(MAX_MEDIA_FILE_BYTES) else {
            let reason = match file.bytes(u64::MAX) {
                Some(_) => format!("larger than {} MB", MAX_MEDIA_FILE_BYTES / (1024 * 1024)),
                None => "the upload was not valid base64".to_owned(),
            };
            media.refuse(&file.path, reason);
            continue;
        };
        if total + bytes.len() as u64 > MAX_MEDIA_REPORT_BYTES {
            media.refuse(
                &file.path,
                format!(
                    "over the {} MB limit for one command's files",
                    MAX_MEDIA_REPORT_BYTES / (1024 * 1024)
                ),
            );
            continue;
        }
        total += bytes.len() as u64;
        let Some(store) = store else {
            media.refuse(&file.path, "this deployment keeps no files");
            continue;
        };
        let key = outbound_media_key(&bytes, &file.name, &file.mime);
        match store_once(store, &key, bytes).await {
            Ok(()) => {
                media.refused.remove(&file.path);
                media.stored.insert(file.path.clone(), key);
            }
            Err(err) => {
                tracing::warn!(%key, error = %err, "could not store a file a node uploaded");
                media.refuse(&file.path, "the file could not be stored");
            }
        }
    }
    for line in refused {
        media.refuse(&line.path, line.reason.clone());
    }
    media
}

/// Writes `bytes` at `key` unless an object is there already (the key is the content's hash,
/// so it holds the same bytes).
async fn store_once(store: &dyn ObjectStore, key: &str, bytes: Vec<u8>) -> Result<(), StoreError> {
    if store.head(key).await?.is_some() {
        return Ok(());
    }
    match store.put(key, bytes, PutCondition::IfAbsent).await {
        Ok(_) | Err(StoreError::Conflict(_)) => Ok(()),
        Err(err) => Err(err),
    }
}

/// `text` (a command's output) with each `MEDIA:` line outside code fences rewritten as the
/// module documentation says; other lines unchanged, line ends kept.
pub fn rewrite_media_lines(text: &str, media: &ReportMedia) -> String {
    if !mentions_media(text) {
        return text.to_owned();
    }
    let mut rewritten = String::with_capacity(text.len());
    for scanned in scan_media_lines(text) {
        let (line, candidate) = match scanned {
            ScannedLine::Text(line) => {
                rewritten.push_str(line);
                continue;
            }
            ScannedLine::Media { line, candidate } => (line, candidate),
        };
        let ending = &line[line.trim_end_matches(['\n', '\r']).len()..];
        match media.stored.get(candidate) {
            Some(key) => rewritten.push_str(&format!("MEDIA:{key}")),
            None => {
                let reason = media
                    .refused
                    .get(candidate)
                    .map_or(NOT_UPLOADED, String::as_str);
                // A candidate that is itself a line break cannot occur: lines end there.
                rewritten.push_str(&format!("(MEDIA:{candidate} not sent: {reason})"));
            }
        }
        rewritten.push_str(ending);
    }
    rewritten
}

#[cfg(test)]
mod tests {
    use clawless_core::testing::InMemoryObjectStore;

    use super::*;

    fn refused(path: &str, reason: &str) -> RefusedFile {
        RefusedFile {
            path: path.to_owned(),
            reason: reason.to_owned(),
        }
    }

    #[tokio::test]
    async fn uploads_are_stored_by_content_and_lines_rewritten() {
        let store = InMemoryObjectStore::default();
        let files = [
            NodeFile::new("./chart.png", "chart.png", b"PNG-BYTES"),
            NodeFile::new("/tmp/copy.png", "copy.png", b"PNG-BYTES"),
        ];
        let media = store_report_media(
            Some(&store),
            &files,
            &[refused("/etc/passwd", "outside the command's directory")],
        )
        .await;
        let key = &media.stored["./chart.png"];
        assert!(is_outbound_media_key(key), "{key}");
        assert_eq!(&media.stored["/tmp/copy.png"], key);
        let listing = store.list(OUTBOUND_MEDIA_PREFIX, 10).await.unwrap();
        assert_eq!(listing.objects.len(), 1, "one object for the same bytes");
        let object = store.get(key, 100).await.unwrap().unwrap();
        assert_eq!(object.bytes, b"PNG-BYTES");

        let text = "done\r\nMEDIA: `./chart.png`\r\nMEDIA:/etc/passwd\nMEDIA:/home/x.png\n\
                    ```\nMEDIA:./chart.png\n```\nend";
        assert_eq!(
            rewrite_media_lines(text, &media),
            format!(
                "done\r\nMEDIA:{key}\r\n(MEDIA:/etc/passwd not sent: outside the command's \
                 directory)\n(MEDIA:/home/x.png not sent: {NOT_UPLOADED})\n```\nMEDIA:./chart.png\n```\nend"
            )
        );
        assert_eq!(rewrite_media_lines("no media", &media), "no media");
    }

    #[tokio::test]
    async fn a_second_delivery_stores_nothing_again() {
        let store = InMemoryObjectStore::default();
        let files = [NodeFile::new("a.pdf", "a.pdf", b"%PDF")];
        let first = store_report_media(Some(&store), &files, &[]).await;
        let key = first.stored["a.pdf"].clone();
        let etag = store.head(&key).await.unwrap().unwrap().etag;
        let second = store_report_media(Some(&store), &files, &[]).await;
        assert_eq!(first, second);
        assert_eq!(store.head(&key).await.unwrap().unwrap().etag, etag);
    }

    #[tokio::test]
    async fn the_backend_checks_uploads_again() {
        let store = InMemoryObjectStore::default();
        let big = NodeFile::new("big.bin", "big.bin", &vec![0_u8; 2 * 1024 * 1024 + 1]);
        let garbage = NodeFile {
            data_base64: "%%%".to_owned(),
            ..NodeFile::new("bad.png", "bad.png", b"")
        };
        let a = NodeFile::new("a.bin", "a.bin", &vec![1_u8; 2 * 1024 * 1024]);
        let b = NodeFile::new("b.bin", "b.bin", &vec![2_u8; 1024 * 1024 + 1]);
        let media = store_report_media(Some(&store), &[big, garbage, a, b], &[]).await;
        assert_eq!(media.stored.keys().collect::<Vec<_>>(), vec!["a.bin"]);
        assert_eq!(media.refused["big.bin"], "larger than 2 MB");
        assert_eq!(media.refused["bad.png"], "the upload was not valid base64");
        assert_eq!(
            media.refused["b.bin"],
            "over the 3 MB limit for one command's files"
        );
        let none = store_report_media(None, &[NodeFile::new("c", "c", b"c")], &[]).await;
        assert_eq!(none.refused["c"], "this deployment keeps no files");
    }
}
