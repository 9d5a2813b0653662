//! This machine's filesystem behind the exec engine's [`NodeFs`] port.
//!
//! The engine decides from three facts about a path; on a real node they come from here.
//! "Executable" means a regular file (after following symlinks) with any execute bit set:
//! the mode bits, not an `access(2)` check for the current user.

use std::os::unix::fs::PermissionsExt;

use clawless_exec::fs::NodeFs;

/// The node's own disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFs;

impl NodeFs for LocalFs {
    fn is_executable_file(&self, path: &str) -> bool {
        std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    }

    fn is_file(&self, path: &str) -> bool {
        std::fs::metadata(path).is_ok_and(|meta| meta.is_file())
    }

    fn real_path(&self, path: &str) -> Option<String> {
        // A path that is not UTF-8 can't be matched against patterns: treat it as missing.
        std::fs::canonicalize(path)
            .ok()
            .and_then(|real| real.into_os_string().into_string().ok())
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::symlink;

    use super::*;

    fn make(path: &std::path::Path, mode: u32) {
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn only_regular_files_with_an_execute_bit_are_executable() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        let plain = dir.path().join("plain");
        make(&tool, 0o755);
        make(&plain, 0o644);
        let fs = LocalFs;
        assert!(fs.is_executable_file(tool.to_str().unwrap()));
        assert!(!fs.is_executable_file(plain.to_str().unwrap()));
        assert!(fs.is_file(plain.to_str().unwrap()));
        assert!(!fs.is_executable_file(dir.path().to_str().unwrap()));
        assert!(!fs.is_file(dir.path().to_str().unwrap()));
        assert!(!fs.is_file(dir.path().join("missing").to_str().unwrap()));
    }

    #[test]
    fn symlinks_are_followed_to_their_target() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        make(&tool, 0o700);
        let link = dir.path().join("link");
        symlink(&tool, &link).unwrap();
        let fs = LocalFs;
        assert!(fs.is_executable_file(link.to_str().unwrap()));
        assert_eq!(
            fs.real_path(link.to_str().unwrap()),
            Some(
                fs::canonicalize(&tool)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned()
            )
        );
        assert_eq!(
            fs.real_path(dir.path().join("nope").to_str().unwrap()),
            None
        );
    }
}
