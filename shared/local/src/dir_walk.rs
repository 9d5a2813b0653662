//! Listing a directory tree as sorted object keys, deciding which entries are served.
//!
//! Owns the walk order (byte order of the `/`-joined keys), `max_keys` truncation, and the
//! symlink rules: a symlinked file is refused ([`RefusalReason::SymlinkedFile`]); a symlinked
//! directory is followed when its canonical target is inside the root
//! ([`RefusalReason::SymlinkEscape`] otherwise); broken symlinks, special files, names that are
//! not UTF-8 or not valid keys, unreadable directories and directory cycles are refused as
//! [`RefusalReason::Unreadable`].

use std::fs::{self, Metadata};
use std::io;
use std::path::{Path, PathBuf};

use clawless_base::object_store::{Listing, RefusalReason, RefusedEntry, StoreError, validate_key};

use crate::dir_entry::{TEMP_FILE_PREFIX, io_error, object_meta};

/// Deepest directory nesting followed; deeper directories are refused as unreadable. Guards
/// against symlink fan-out that is acyclic but explosive.
const MAX_DEPTH: usize = 64;

/// Lists the objects under `prefix` in the tree at `root` (canonical).
///
/// A prefix ending in `/` names a directory; otherwise its last segment filters the names in
/// its parent directory, so `skills/we` lists `skills/weather/…` and `skills/web.md`.
pub(crate) fn list(root: &Path, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
    if !prefix.is_empty() {
        validate_key(prefix.strip_suffix('/').unwrap_or(prefix))?;
    }
    let (dir_key, name_filter) = match prefix.rfind('/') {
        Some(slash) => prefix.split_at(slash + 1),
        None => ("", prefix),
    };
    let mut walk = Walk {
        root,
        max_keys,
        listing: Listing::default(),
        stopped: false,
    };
    let logical = root.join(dir_key.trim_end_matches('/'));
    let start = match fs::canonicalize(&logical) {
        Ok(start) => start,
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(walk.listing);
        }
        Err(err) => return Err(io_error("resolve", &logical, err)),
    };
    if !start.starts_with(root) {
        walk.refuse(dir_key.trim_end_matches('/'), RefusalReason::SymlinkEscape);
        return Ok(walk.listing);
    }
    match fs::metadata(&start) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => return Ok(walk.listing),
        Err(err) => return Err(io_error("inspect", &start, err)),
    }
    walk.directory(&start, dir_key, name_filter, 1)?;
    Ok(walk.listing)
}

/// What one directory entry turned out to be.
enum Kind {
    File(Metadata),
    /// A directory to descend into, by its canonical path.
    Directory(PathBuf),
    Refused(RefusalReason),
}

struct Child {
    name: String,
    kind: Kind,
}

impl Child {
    /// Sorting siblings by name, with directories as `name/`, yields keys in byte order.
    fn sort_key(&self) -> String {
        match self.kind {
            Kind::Directory(..) => format!("{}/", self.name),
            _ => self.name.clone(),
        }
    }
}

struct Walk<'a> {
    root: &'a Path,
    max_keys: usize,
    listing: Listing,
    stopped: bool,
}

impl Walk<'_> {
    fn refuse(&mut self, key: &str, reason: RefusalReason) {
        tracing::debug!(key, reason = reason.as_str(), "refused entry");
        self.listing.refused.push(RefusedEntry {
            key: key.to_owned(),
            reason,
        });
    }

    /// Walks `dir` (canonical; its key prefix is `dir_key`, empty or ending in `/`), visiting
    /// only children whose name starts with `name_filter`. `depth` is 1 for the first one.
    ///
    /// Every directory path handled here is canonical: real subdirectories extend a canonical
    /// path and followed symlinks are canonicalised. So a cycle, which only a symlink can
    /// make, shows as a symlink whose target is the current directory or one of its
    /// ancestors, and real directories need no `stat` of their own.
    fn directory(
        &mut self, dir: &Path, dir_key: &str, name_filter: &str, depth: usize,
    ) -> Result<(), StoreError> {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            // The top directory failing is the caller's problem; a nested one is skipped.
            Err(err) if depth == 1 && err.kind() != io::ErrorKind::NotFound => {
                return Err(io_error("read directory", dir, err));
            }
            Err(_) => {
                self.refuse(dir_key.trim_end_matches('/'), RefusalReason::Unreadable);
                return Ok(());
            }
        };
        let mut children = Vec::new();
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(_) => {
                    self.refuse(dir_key.trim_end_matches('/'), RefusalReason::Unreadable);
                    continue;
                }
            };
            let name = match entry.file_name().into_string() {
                Ok(name) => name,
                Err(raw) => {
                    let lossy = raw.to_string_lossy().into_owned();
                    if lossy.starts_with(name_filter) {
                        self.refuse(&format!("{dir_key}{lossy}"), RefusalReason::Unreadable);
                    }
                    continue;
                }
            };
            if !name.starts_with(name_filter) || name.starts_with(TEMP_FILE_PREFIX) {
                continue;
            }
            let kind = if name.contains('\\') {
                // A legal file name but not a legal key: it could never be read back.
                Kind::Refused(RefusalReason::Unreadable)
            } else {
                self.classify(&entry)
            };
            children.push(Child { name, kind });
        }
        children.sort_by_cached_key(Child::sort_key);

        for child in children {
            let key = format!("{dir_key}{}", child.name);
            match child.kind {
                Kind::File(meta) => {
                    if self.listing.objects.len() == self.max_keys {
                        self.listing.truncated = true;
                        self.stopped = true;
                        return Ok(());
                    }
                    self.listing.objects.push(object_meta(&key, &meta));
                }
                Kind::Refused(reason) => self.refuse(&key, reason),
                Kind::Directory(path) => {
                    if dir.starts_with(&path) || depth >= MAX_DEPTH {
                        // A symlink back to an ancestor (a cycle), or absurd nesting.
                        self.refuse(&key, RefusalReason::Unreadable);
                        continue;
                    }
                    self.directory(&path, &format!("{key}/"), "", depth + 1)?;
                    if self.stopped {
                        return Ok(());
                    }
                }
            }
        }
        Ok(())
    }

    fn classify(&self, entry: &fs::DirEntry) -> Kind {
        let Ok(file_type) = entry.file_type() else {
            return Kind::Refused(RefusalReason::Unreadable);
        };
        let path = entry.path();
        if file_type.is_dir() {
            // Known from the directory entry itself; a swap for something else before it is
            // read makes `read_dir` fail there, which is refused as unreadable.
            return Kind::Directory(path);
        }
        if file_type.is_file() {
            // `DirEntry::metadata` does not follow symlinks and, on Linux, stats relative to
            // the open directory instead of resolving the whole path again.
            return match entry.metadata() {
                Ok(meta) if meta.is_file() => Kind::File(meta),
                // Replaced by something else since the directory was read.
                Ok(_) | Err(_) => Kind::Refused(RefusalReason::Unreadable),
            };
        }
        if !file_type.is_symlink() {
            // FIFOs, sockets, devices: reading them could block or never end.
            return Kind::Refused(RefusalReason::Unreadable);
        }
        match fs::metadata(&path) {
            Ok(target) if target.is_dir() => match fs::canonicalize(&path) {
                Ok(canonical) if canonical.starts_with(self.root) => Kind::Directory(canonical),
                Ok(_) => Kind::Refused(RefusalReason::SymlinkEscape),
                Err(_) => Kind::Refused(RefusalReason::Unreadable),
            },
            Ok(_) => Kind::Refused(RefusalReason::SymlinkedFile),
            // Broken, or a loop of symlinks.
            Err(_) => Kind::Refused(RefusalReason::Unreadable),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(listing: &Listing) -> Vec<&str> {
        listing
            .objects
            .iter()
            .map(|meta| meta.key.as_str())
            .collect()
    }

    #[test]
    fn a_missing_root_lists_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let listing = list(&dir.path().join("absent"), "", 10).unwrap();
        assert_eq!(listing, Listing::default());
    }

    #[test]
    fn temp_files_of_writes_in_flight_are_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::write(root.join(format!("{TEMP_FILE_PREFIX}1-0.tmp")), "half").unwrap();
        fs::write(root.join("done.md"), "whole").unwrap();
        let listing = list(&root, "", 10).unwrap();
        assert_eq!(keys(&listing), vec!["done.md"]);
        assert!(listing.refused.is_empty());
    }

    #[test]
    fn names_that_are_not_valid_keys_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::write(root.join("back\\slash"), "x").unwrap();
        let listing = list(&root, "", 10).unwrap();
        assert!(listing.objects.is_empty());
        assert_eq!(
            listing.refused,
            vec![RefusedEntry {
                key: "back\\slash".into(),
                reason: RefusalReason::Unreadable
            }]
        );
    }
}
