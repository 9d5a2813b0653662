//! [`DirObjectStore`]: the object store port over a local directory tree.
//!
//! Owns how keys map to paths under one root, how a file's ETag is derived from its metadata,
//! atomic conditional writes, and the rule that only regular files inside the root are served:
//! a symlinked file, a special file, or a path that leaves the root through a symlinked
//! directory is never read or written. Listing lives in [`crate::dir_walk`].
//!
//! All file-system work runs on tokio's blocking pool.

use std::collections::HashMap;
use std::fs::{self, File, Metadata};
use std::io::{self, Read, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::SystemTime;

use async_trait::async_trait;
use clawless_base::object_store::{
    Listing, Object, ObjectMeta, ObjectStore, PutCondition, StoreError, validate_key,
};

use crate::dir_entry::{TEMP_FILE_PREFIX, etag, io_error, object_meta};
use crate::dir_walk;

/// Bounded retries when a file is replaced between looking at it and opening it.
const READ_ATTEMPTS: usize = 3;

/// An [`ObjectStore`] over a directory tree: key `a/b/c.md` is the file `<root>/a/b/c.md`.
///
/// - **Only regular files inside the root are objects.** A key whose final component is a
///   symlink, a directory or a special file reads as absent (`Ok(None)`), is left alone by
///   `delete`, and is refused by `put` ([`StoreError::InvalidKey`]), so a user's symlink is
///   never replaced. A key reached through a symlinked directory is served only if the
///   directory's canonical target is inside the root; otherwise it reads as absent and `put`
///   refuses it. Listings report what they skip in [`Listing::refused`].
/// - **ETag** = size, modification time (ns), device and inode, in hex: it changes whenever the
///   file is rewritten, without reading it. `put` writes a new inode and stamps it with the
///   precise current time, so two writes never share an ETag even within one clock tick.
/// - **Writes** go to a temporary file in the target's directory and are renamed into place,
///   so readers see the old or the new content, never a mix. Conditions are checked under a
///   lock shared by every store on the same root in this process; other processes writing
///   the tree are not serialised with it.
/// - Empty directories left by `delete` are removed (up to, not including, the root), as S3
///   has no directories.
#[derive(Debug, Clone)]
pub struct DirObjectStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Canonical root (or, while it does not exist yet, its canonical existing ancestor joined
    /// with the missing tail).
    root: PathBuf,
    /// Serialises conditional writes and deletes on this root.
    write_lock: Arc<Mutex<()>>,
}

impl DirObjectStore {
    /// Opens the tree at `root`. The root need not exist yet: listings are then empty and the
    /// first `put` creates it. Fails if the root exists but is not a directory, or its path
    /// cannot be resolved.
    pub fn open(root: impl AsRef<Path>) -> Result<Self, StoreError> {
        let requested = root.as_ref();
        let absolute = std::path::absolute(requested).map_err(|err| {
            StoreError::unavailable(format!("cannot resolve {}", requested.display()), err)
        })?;
        let root = canonicalize_allowing_missing(&absolute)?;
        match fs::metadata(&root) {
            Ok(meta) if !meta.is_dir() => {
                return Err(StoreError::Unavailable {
                    message: format!("store root {} is not a directory", root.display()),
                    source: None,
                });
            }
            Ok(_) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => {}
            Err(err) => {
                return Err(StoreError::unavailable(
                    format!("cannot inspect store root {}", root.display()),
                    err,
                ));
            }
        }
        let write_lock = lock_for_root(&root);
        Ok(Self {
            inner: Arc::new(Inner { root, write_lock }),
        })
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    async fn blocking<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        match tokio::task::spawn_blocking(move || work(&inner)).await {
            Ok(result) => result,
            Err(join_error) if join_error.is_panic() => {
                std::panic::resume_unwind(join_error.into_panic())
            }
            Err(join_error) => Err(StoreError::Unavailable {
                message: format!("file-system task did not finish: {join_error}"),
                source: None,
            }),
        }
    }
}

/// One write lock per canonical root, so two stores opened on the same tree in this process
/// still serialise their conditional writes.
fn lock_for_root(root: &Path) -> Arc<Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = OnceLock::new();
    let mut locks = LOCKS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    Arc::clone(locks.entry(root.to_path_buf()).or_default())
}

/// Canonicalises the longest existing ancestor of `path` and appends the rest.
fn canonicalize_allowing_missing(path: &Path) -> Result<PathBuf, StoreError> {
    let mut missing_tail = Vec::new();
    let mut existing = path;
    loop {
        match fs::canonicalize(existing) {
            Ok(canonical) => {
                let mut root = canonical;
                for component in missing_tail.iter().rev() {
                    root.push(component);
                }
                return Ok(root);
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let (Some(parent), Some(Component::Normal(name))) =
                    (existing.parent(), existing.components().next_back())
                else {
                    return Err(StoreError::Unavailable {
                        message: format!(
                            "cannot resolve store root {}: `..` after a missing directory",
                            path.display()
                        ),
                        source: None,
                    });
                };
                missing_tail.push(name.to_owned());
                existing = parent;
            }
            Err(err) => {
                return Err(StoreError::unavailable(
                    format!("cannot resolve store root {}", path.display()),
                    err,
                ));
            }
        }
    }
}

fn invalid(key: &str, reason: &'static str) -> StoreError {
    StoreError::InvalidKey {
        key: key.to_owned(),
        reason,
    }
}

/// Not found, or a file where a directory was expected: the key has no object.
fn is_missing(err: &io::Error) -> bool {
    matches!(
        err.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
    )
}

/// Splits a validated key into its directory part (possibly empty) and file name.
fn split_key(key: &str) -> (&str, &str) {
    key.rsplit_once('/').unwrap_or(("", key))
}

/// Where a key's parent directory is, if it exists.
enum Parent {
    /// The canonical directory, inside the root.
    Inside(PathBuf),
    /// The directory (or the root) does not exist, or a file stands where a directory should.
    Missing,
    /// The directory resolves outside the root through a symlink.
    Escapes,
}

/// What stands at a key's path.
enum Entry {
    Absent,
    File(Metadata),
    /// A symlink, directory or special file: not an object.
    NotServed(&'static str),
}

impl Inner {
    fn existing_parent(&self, key: &str) -> Result<Parent, StoreError> {
        let (dir, _) = split_key(key);
        // Walk the key's directories from the canonical root with `lstat`: a key has no `.`
        // or `..` segments, so unless a segment is a symlink the path is inside the root.
        // Only symlinks are canonicalised, which keeps the common case at one call per level.
        let mut current = self.root.clone();
        for segment in dir.split('/').filter(|segment| !segment.is_empty()) {
            let next = current.join(segment);
            current = match fs::symlink_metadata(&next) {
                Ok(meta) if meta.is_dir() => next,
                Ok(meta) if meta.is_symlink() => match fs::canonicalize(&next) {
                    Ok(canonical) if !canonical.starts_with(&self.root) => {
                        tracing::debug!(key, target = %canonical.display(), "key leaves the store root");
                        return Ok(Parent::Escapes);
                    }
                    Ok(canonical) if canonical.is_dir() => canonical,
                    Ok(_) => return Ok(Parent::Missing),
                    Err(err) if is_missing(&err) => return Ok(Parent::Missing),
                    Err(err) => return Err(io_error("resolve", &next, err)),
                },
                Ok(_) => return Ok(Parent::Missing),
                Err(err) if is_missing(&err) => return Ok(Parent::Missing),
                Err(err) => return Err(io_error("inspect", &next, err)),
            };
        }
        if dir.is_empty() && !self.root.is_dir() {
            return Ok(Parent::Missing);
        }
        Ok(Parent::Inside(current))
    }

    /// The key's path, if its parent resolves inside the root.
    fn existing_path(&self, key: &str) -> Result<Option<PathBuf>, StoreError> {
        validate_key(key)?;
        let (_, name) = split_key(key);
        Ok(match self.existing_parent(key)? {
            Parent::Inside(dir) => Some(dir.join(name)),
            Parent::Missing | Parent::Escapes => None,
        })
    }

    fn entry_at(path: &Path) -> Result<Entry, StoreError> {
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.is_file() => Ok(Entry::File(meta)),
            Ok(meta) if meta.is_symlink() => Ok(Entry::NotServed("a symlink stands at this key")),
            Ok(meta) if meta.is_dir() => Ok(Entry::NotServed("a directory stands at this key")),
            Ok(_) => Ok(Entry::NotServed("a special file stands at this key")),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Entry::Absent),
            Err(err) => Err(io_error("inspect", path, err)),
        }
    }

    fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        let Some(path) = self.existing_path(key)? else {
            return Ok(None);
        };
        Ok(match Self::entry_at(&path)? {
            Entry::File(meta) => Some(object_meta(key, &meta)),
            Entry::Absent | Entry::NotServed(_) => None,
        })
    }

    fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        let Some(path) = self.existing_path(key)? else {
            return Ok(None);
        };
        for _ in 0..READ_ATTEMPTS {
            let Entry::File(seen) = Self::entry_at(&path)? else {
                return Ok(None);
            };
            if seen.size() > max_bytes {
                return Err(StoreError::TooLarge {
                    key: key.to_owned(),
                    size: seen.size(),
                    limit: max_bytes,
                });
            }
            let file = match File::open(&path) {
                Ok(file) => file,
                Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(err) => return Err(io_error("open", &path, err)),
            };
            let opened = file
                .metadata()
                .map_err(|err| io_error("inspect", &path, err))?;
            // `open` follows symlinks: if the path was swapped since we looked (by a writer
            // renaming a new file into place, or for a symlink), look again.
            if (opened.dev(), opened.ino()) != (seen.dev(), seen.ino()) {
                continue;
            }
            return read_limited(key, &path, file, &opened, max_bytes).map(Some);
        }
        Err(StoreError::Unavailable {
            message: format!("{} kept changing while being read", path.display()),
            source: None,
        })
    }

    /// Creates the key's parent directories as needed, refusing to pass through a symlink
    /// that leaves the root or a file standing where a directory should be.
    fn prepare_parent(&self, key: &str) -> Result<PathBuf, StoreError> {
        fs::create_dir_all(&self.root).map_err(|err| io_error("create", &self.root, err))?;
        let (dir, _) = split_key(key);
        let mut current = self.root.clone();
        for segment in dir.split('/').filter(|segment| !segment.is_empty()) {
            let next = current.join(segment);
            current = match fs::symlink_metadata(&next) {
                Ok(meta) if meta.is_dir() => next,
                Ok(meta) if meta.is_symlink() => {
                    let target =
                        fs::canonicalize(&next).map_err(|err| io_error("resolve", &next, err))?;
                    if !target.starts_with(&self.root) {
                        return Err(invalid(key, "path leaves the store root through a symlink"));
                    }
                    if !target.is_dir() {
                        return Err(invalid(key, "a file stands where a directory should be"));
                    }
                    target
                }
                Ok(_) => return Err(invalid(key, "a file stands where a directory should be")),
                Err(err) if err.kind() == io::ErrorKind::NotFound => {
                    match fs::create_dir(&next) {
                        Ok(()) => {}
                        // Another writer (or process) created it meanwhile: fine.
                        Err(err) if err.kind() == io::ErrorKind::AlreadyExists && next.is_dir() => {
                        }
                        Err(err) => return Err(io_error("create", &next, err)),
                    }
                    next
                }
                Err(err) => return Err(io_error("inspect", &next, err)),
            };
        }
        Ok(current)
    }

    fn put(
        &self, key: &str, bytes: &[u8], condition: &PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        validate_key(key)?;
        let _write_guard = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let PutCondition::IfMatch(expected) = condition
            && self.head(key)?.map(|meta| meta.etag).as_ref() != Some(expected)
        {
            // Refuse before creating directories for a write that cannot happen.
            return Err(StoreError::Conflict(key.to_owned()));
        }
        let dir = self.prepare_parent(key)?;
        let (_, name) = split_key(key);
        let target = dir.join(name);
        let current = match Self::entry_at(&target)? {
            Entry::Absent => None,
            Entry::File(meta) => Some(etag(&meta)),
            Entry::NotServed(reason) => return Err(invalid(key, reason)),
        };
        let holds = match condition {
            PutCondition::Always => true,
            PutCondition::IfAbsent => current.is_none(),
            PutCondition::IfMatch(expected) => current.as_ref() == Some(expected),
        };
        if !holds {
            return Err(StoreError::Conflict(key.to_owned()));
        }
        let temp = dir.join(temp_file_name());
        match write_then_rename(&temp, &target, bytes) {
            Ok(meta) => Ok(object_meta(key, &meta)),
            Err(err) => {
                if let Err(cleanup) = fs::remove_file(&temp)
                    && cleanup.kind() != io::ErrorKind::NotFound
                {
                    // The write already failed; that error is what the caller needs. A stray
                    // temp file is skipped by listings, so only leave a trace for operators.
                    tracing::warn!(path = %temp.display(), error = %cleanup, "temp file left behind");
                }
                Err(io_error("write", &target, err))
            }
        }
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        validate_key(key)?;
        let _write_guard = self
            .write_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(path) = self.existing_path(key)? else {
            return Ok(());
        };
        if !matches!(Self::entry_at(&path)?, Entry::File(_)) {
            return Ok(());
        }
        match fs::remove_file(&path) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(err) => return Err(io_error("remove", &path, err)),
        }
        self.prune_empty_parents(key);
        Ok(())
    }

    /// Removes the key's now-empty parent directories, deepest first, stopping at the first
    /// one that is not empty (or is a symlink, which `remove_dir` refuses) and never removing
    /// the root. Best effort: a directory that cannot be removed is simply kept.
    fn prune_empty_parents(&self, key: &str) {
        let mut dir = split_key(key).0;
        while !dir.is_empty() {
            let path = self.root.join(dir);
            if let Err(err) = fs::remove_dir(&path) {
                tracing::trace!(path = %path.display(), error = %err, "kept directory");
                return;
            }
            dir = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
        }
    }
}

fn temp_file_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{TEMP_FILE_PREFIX}{}-{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes `bytes` to a new file at `temp`, stamps it, flushes it to disk and renames it over
/// `target`; returns the new file's metadata (a rename keeps inode and times).
fn write_then_rename(temp: &Path, target: &Path, bytes: &[u8]) -> io::Result<Metadata> {
    let mut file = File::options().write(true).create_new(true).open(temp)?;
    file.write_all(bytes)?;
    // The kernel stamps files with a coarse clock; the precise time keeps ETags of quick
    // successive writes apart.
    file.set_modified(SystemTime::now())?;
    file.sync_all()?;
    let meta = file.metadata()?;
    drop(file);
    fs::rename(temp, target)?;
    Ok(meta)
}

fn read_limited(
    key: &str, path: &Path, file: File, meta: &Metadata, max_bytes: u64,
) -> Result<Object, StoreError> {
    if meta.size() > max_bytes {
        return Err(StoreError::TooLarge {
            key: key.to_owned(),
            size: meta.size(),
            limit: max_bytes,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.size()).unwrap_or(0));
    // Read one byte past the limit so a file growing under us is still refused.
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|err| io_error("read", path, err))?;
    let read = bytes.len() as u64;
    if read > max_bytes {
        return Err(StoreError::TooLarge {
            key: key.to_owned(),
            size: read,
            limit: max_bytes,
        });
    }
    Ok(Object {
        meta: object_meta(key, meta),
        bytes,
    })
}

#[async_trait]
impl ObjectStore for DirObjectStore {
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        let prefix = prefix.to_owned();
        self.blocking(move |inner| dir_walk::list(&inner.root, &prefix, max_keys))
            .await
    }

    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |inner| inner.get(&key, max_bytes)).await
    }

    async fn get_many(
        &self, keys: &[String], max_bytes: u64,
    ) -> Vec<Result<Option<Object>, StoreError>> {
        // A few trips to the blocking pool for the whole batch instead of one per file,
        // spread over the cores: reading is mostly system calls, which run in parallel.
        let lanes = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 4);
        let per_lane = keys.len().div_ceil(lanes).max(1);
        let mut batches = Vec::with_capacity(lanes);
        for chunk in keys.chunks(per_lane) {
            let chunk = chunk.to_vec();
            let count = chunk.len();
            let batch = self.blocking(move |inner| {
                Ok(chunk
                    .iter()
                    .map(|key| inner.get(key, max_bytes))
                    .collect::<Vec<_>>())
            });
            batches.push(async move {
                batch.await.unwrap_or_else(|err| {
                    let message = err.to_string();
                    (0..count)
                        .map(|_| {
                            Err(StoreError::Unavailable {
                                message: message.clone(),
                                source: None,
                            })
                        })
                        .collect()
                })
            });
        }
        futures_util::future::join_all(batches)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        let key = key.to_owned();
        self.blocking(move |inner| inner.head(&key)).await
    }

    async fn put(
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        let key = key.to_owned();
        self.blocking(move |inner| inner.put(&key, &bytes, &condition))
            .await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        let key = key.to_owned();
        self.blocking(move |inner| inner.delete(&key)).await
    }

    fn location(&self, key: &str) -> String {
        self.inner.root.join(key).display().to_string()
    }

    fn key_for_location(&self, location: &str) -> Option<String> {
        let relative = std::path::Path::new(location)
            .strip_prefix(&self.inner.root)
            .ok()?;
        let key = relative.to_str()?;
        validate_key(key).ok().map(|()| key.to_owned())
    }

    fn identity(&self) -> String {
        format!("dir:{}", self.inner.root.display())
    }
}
