//! [`LocalNodeFs`]: the exec engine's [`NodeFs`] port on this machine's own disk, for
//! `clawless exec check` without an `fs` block and for a node host deciding its own runs.
//!
//! Only metadata is read (never file contents). A path that cannot be read counts as
//! missing: the engine then treats the executable as unresolved, which never allows more.

use std::path::Path;

use clawless_core::exec::fs::NodeFs;

/// This machine's filesystem, as the exec engine sees it.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalNodeFs;

impl NodeFs for LocalNodeFs {
    fn is_executable_file(&self, path: &str) -> bool {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_file() => is_executable(&meta),
            _ => false,
        }
    }

    fn is_file(&self, path: &str) -> bool {
        std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
    }

    fn real_path(&self, path: &str) -> Option<String> {
        let real = std::fs::canonicalize(Path::new(path)).ok()?;
        real.to_str().map(str::to_owned)
    }
}

#[cfg(unix)]
fn is_executable(meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    meta.permissions().mode() & 0o111 != 0
}

#[cfg(not(unix))]
fn is_executable(_meta: &std::fs::Metadata) -> bool {
    // Windows has no execute bit; PATHEXT decides what runs, and the engine tries it.
    true
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn write(path: &Path, mode: u32) {
        std::fs::write(path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_regular_files_with_an_execute_bit_are_executables() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        let notes = dir.path().join("notes");
        write(&tool, 0o755);
        write(&notes, 0o644);
        let fs = LocalNodeFs;
        assert!(fs.is_executable_file(tool.to_str().unwrap()));
        assert!(!fs.is_executable_file(notes.to_str().unwrap()));
        assert!(fs.is_file(notes.to_str().unwrap()));
        assert!(!fs.is_executable_file(dir.path().to_str().unwrap()));
        assert!(!fs.is_file(dir.path().join("missing").to_str().unwrap()));
    }

    #[test]
    fn real_paths_follow_symlinks_and_missing_paths_have_none() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        write(&target, 0o755);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let fs = LocalNodeFs;
        let real = fs.real_path(link.to_str().unwrap()).unwrap();
        assert_eq!(real, std::fs::canonicalize(&target).unwrap().to_str().unwrap());
        assert!(fs.is_executable_file(link.to_str().unwrap()));
        assert_eq!(fs.real_path(dir.path().join("missing").to_str().unwrap()), None);
    }
}
