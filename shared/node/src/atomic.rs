//! Atomic, private file writes: a temp file next to the target, fsynced, then renamed over it.
//!
//! Used for `node.json` (it holds the node's secret) and `exec-approvals.json`: a crash
//! mid-write leaves either the old file or the new one, never half of either.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Mode of every file this crate writes: the owner only.
pub(crate) const PRIVATE_FILE_MODE: u32 = 0o600;
/// Mode of the state dir when this crate creates it.
pub(crate) const PRIVATE_DIR_MODE: u32 = 0o700;

/// Distinguishes temp files of concurrent writers in one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Creates `dir` (and its parents) with mode 0700 when missing.
pub(crate) fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(dir)
}

/// Writes `bytes` to `path` atomically with mode 0600, creating the parent folder if needed.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    ensure_private_dir(parent)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "path has no file name"))?;
    let temp = parent.join(format!(
        ".{}.tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        // create_new: never write through a file (or symlink) someone else put there.
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(PRIVATE_FILE_MODE)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)
    })();
    if let Err(err) = written {
        if let Err(cleanup) = fs::remove_file(&temp)
            && cleanup.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %temp.display(), error = %cleanup, "could not remove a temp file");
        }
        return Err(err);
    }
    // The rename is durable only once the folder itself is synced.
    fs::File::open(parent)?.sync_all()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_write_replaces_the_file_with_mode_0600_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("file.json");
        write_private(&path, b"one").unwrap();
        write_private(&path, b"two").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("file.json")]);
    }
}
