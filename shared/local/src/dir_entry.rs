//! What the directory store and its walker both say about a file on disk: its ETag and object
//! metadata, the prefix of writes in flight, and how an I/O failure reads as a store error.

use std::fs::Metadata;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use clawless_base::object_store::{ObjectMeta, StoreError};

/// Prefix of the temporary files `put` writes next to their target before renaming them into
/// place. Listings skip names starting with it, so a write in flight is never listed.
pub(crate) const TEMP_FILE_PREFIX: &str = ".clawless-put-";

/// The ETag of a file: changes with its size, modification time or identity (a rename-replace).
pub(crate) fn etag(meta: &Metadata) -> String {
    format!(
        "{:x}-{:x}.{:08x}-{:x}.{:x}",
        meta.size(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.dev(),
        meta.ino()
    )
}

pub(crate) fn object_meta(key: &str, meta: &Metadata) -> ObjectMeta {
    ObjectMeta {
        key: key.to_owned(),
        etag: etag(meta),
        size: meta.size(),
    }
}

pub(crate) fn io_error(action: &str, path: &Path, err: io::Error) -> StoreError {
    StoreError::unavailable(format!("cannot {action} {}", path.display()), err)
}
