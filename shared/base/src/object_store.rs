//! The object store port: keys, bytes and ETags, as S3 and a directory tree both provide them.
//!
//! Keys are `/`-separated, relative to the store's root, never start with `/` and never
//! contain `.` or `..` segments. A store may refuse to expose some entries (a directory
//! tree refuses symlinked files and symlinks that leave its root); those are reported in
//! [`Listing::refused`] so callers can explain what they skipped.

use std::fmt;

use async_trait::async_trait;

use crate::port_error::BoxError;

/// What a listing knows about one object without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Key relative to the store root, e.g. `skills/bundled/weather/SKILL.md`.
    pub key: String,
    /// Opaque version tag, without quotes: changes whenever the content changes and stays
    /// the same while it does not. Rewriting identical bytes may or may not change it
    /// (S3 keeps its MD5, a directory tree and the in-memory store issue a new one).
    pub etag: String,
    /// Size in bytes.
    pub size: u64,
}

/// An object's bytes and the version they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// Key, ETag and size of the bytes below.
    pub meta: ObjectMeta,
    /// The content.
    pub bytes: Vec<u8>,
}

/// Why a store would not expose an entry it saw while listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalReason {
    /// A symlink whose target lies outside the store root.
    SymlinkEscape,
    /// A file that is itself a symlink (only real files are served).
    SymlinkedFile,
    /// The entry could not be read (permissions, a vanished file, a special file).
    Unreadable,
}

impl RefusalReason {
    /// Stable machine-readable name used in diagnostics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SymlinkEscape => "symlink-escape",
            Self::SymlinkedFile => "symlinked-file",
            Self::Unreadable => "unreadable",
        }
    }
}

/// An entry the store saw but will not serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedEntry {
    /// Key the entry would have had.
    pub key: String,
    /// Why it was refused.
    pub reason: RefusalReason,
}

/// The result of listing a prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Objects under the prefix, sorted by key (byte order).
    pub objects: Vec<ObjectMeta>,
    /// Entries seen but not served.
    pub refused: Vec<RefusedEntry>,
    /// True when the listing stopped at the caller's `max_keys` before reaching the end.
    pub truncated: bool,
}

/// Precondition for a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutCondition {
    /// Write unconditionally.
    Always,
    /// Write only if no object exists at the key.
    IfAbsent,
    /// Write only if the current object has this ETag.
    IfMatch(String),
}

/// Failures of an object store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The key is not acceptable to the store (empty, absolute, `..`, …).
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey {
        /// The offending key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A conditional write found a different state than it required.
    #[error("precondition failed for {0}")]
    Conflict(String),
    /// The object is larger than the caller allowed.
    #[error("object {key} is {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// The key read.
        key: String,
        /// Its size.
        size: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// The backing service or file system failed.
    #[error("object store unavailable: {message}")]
    Unavailable {
        /// Human-readable summary.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

impl StoreError {
    /// Wraps an adapter error as [`StoreError::Unavailable`], keeping it as the source.
    pub fn unavailable(
        message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Reads in flight at once in the default [`ObjectStore::get_many`].
const CONCURRENT_GETS: usize = 16;

/// Objects addressed by key: S3 in AWS, a directory tree in local mode.
#[async_trait]
pub trait ObjectStore: Send + Sync + fmt::Debug {
    /// Lists every object whose key starts with `prefix` (recursively), sorted by key,
    /// stopping after `max_keys` objects with [`Listing::truncated`] set.
    ///
    /// The match is by string prefix, as in S3: `a/` lists `a/x` but not `ab/x`, while `a`
    /// lists both (pass the result of [`normalize_prefix`] to list a "directory"). A non-empty
    /// prefix must be a valid key once one trailing `/` is removed ([`StoreError::InvalidKey`]
    /// otherwise). With `max_keys == 0` no object is returned and `truncated` tells whether
    /// any exists.
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError>;

    /// Reads an object, refusing with [`StoreError::TooLarge`] if it exceeds `max_bytes`.
    /// `Ok(None)` when there is no object at the key.
    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError>;

    /// Reads several objects: one result per key, in order. The default reads them
    /// concurrently with [`ObjectStore::get`]; stores with a cheaper batch path override it.
    async fn get_many(
        &self, keys: &[String], max_bytes: u64,
    ) -> Vec<Result<Option<Object>, StoreError>> {
        // Plain loops rather than stream combinators: a closure over `&String` here trips the
        // compiler's higher-ranked lifetime check once the future must be `Send`.
        let mut results = Vec::with_capacity(keys.len());
        for chunk in keys.chunks(CONCURRENT_GETS) {
            let mut reads = Vec::with_capacity(chunk.len());
            for key in chunk {
                reads.push(self.get(key, max_bytes));
            }
            results.extend(futures_util::future::join_all(reads).await);
        }
        results
    }

    /// Reads an object's metadata without its content.
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError>;

    /// Writes an object if `condition` holds; [`StoreError::Conflict`] otherwise.
    async fn put(
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError>;

    /// Removes an object; removing a missing object is not an error.
    async fn delete(&self, key: &str) -> Result<(), StoreError>;

    /// Where the object at `key` is, as the model and the `read` tool see it:
    /// an absolute path for a directory tree, an `s3://bucket/key` URI for S3.
    fn location(&self, key: &str) -> String;

    /// The key that `location` names in this store: the inverse of [`ObjectStore::location`].
    /// `None` when the location is not in this store or does not name a valid key.
    fn key_for_location(&self, location: &str) -> Option<String>;

    /// Identifies the backing namespace (bucket or root directory). Two stores with the same
    /// identity see the same objects, so one listing can serve sources in both.
    fn identity(&self) -> String;
}

/// Checks that a key is relative, `/`-separated and free of `.`/`..` segments and NULs.
pub fn validate_key(key: &str) -> Result<(), StoreError> {
    let invalid = |reason| {
        Err(StoreError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    if key.is_empty() {
        return invalid("empty key");
    }
    if key.starts_with('/') {
        return invalid("keys are relative");
    }
    if key.contains('\0') || key.contains('\\') {
        return invalid("NUL or backslash in key");
    }
    if key
        .split('/')
        .any(|segment| segment.is_empty() || segment == "." || segment == "..")
    {
        return invalid("empty, '.' or '..' segment");
    }
    Ok(())
}

/// The key `location` names below a URI-style store root such as `s3://bucket`: the inverse
/// of `format!("{root}/{key}")`. `None` outside the root or for an invalid key.
pub fn key_below_root(location: &str, root: &str) -> Option<String> {
    let key = location.strip_prefix(root)?.strip_prefix('/')?;
    validate_key(key).ok().map(|()| key.to_owned())
}

/// Normalises a prefix to either `""` or a string ending in `/` with no leading `/`.
pub fn normalize_prefix(prefix: &str) -> String {
    let trimmed = prefix.trim_matches('/');
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("{trimmed}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_with_traversal_or_absolute_paths_are_rejected() {
        for bad in [
            "",
            "/etc/passwd",
            "a/../b",
            "./a",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
        ] {
            assert!(validate_key(bad).is_err(), "{bad:?} should be rejected");
        }
        validate_key("skills/weather/SKILL.md").unwrap();
        validate_key("..hidden/x").unwrap();
    }

    #[test]
    fn prefixes_are_normalised_to_a_trailing_slash() {
        assert_eq!(normalize_prefix(""), "");
        assert_eq!(normalize_prefix("/"), "");
        assert_eq!(normalize_prefix("skills/bundled"), "skills/bundled/");
        assert_eq!(normalize_prefix("/skills/bundled/"), "skills/bundled/");
    }
}
