//! The node filesystem port the exec engine asks, and a node described by data.
//!
//! The engine needs three facts about paths: is it an executable regular file, is it a
//! regular file, and where does it really point. A real node answers from its own disk
//! (the adapter lives outside the core); `clawless exec check` and the backend's pre-check
//! answer from a [`DescribedFs`] built from what the node reported.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// What the exec engine may ask of a node's filesystem. Paths are absolute and already
/// joined; implementations never read file contents.
pub trait NodeFs: Send + Sync {
    /// True when `path` (after following symlinks) is a regular file that may be executed.
    fn is_executable_file(&self, path: &str) -> bool;
    /// True when `path` (after following symlinks) is a regular file.
    fn is_file(&self, path: &str) -> bool;
    /// The canonical path with every symlink resolved, or `None` when it does not exist.
    fn real_path(&self, path: &str) -> Option<String>;
}

/// Longest symlink chain followed before a path counts as missing (loops end here too).
const MAX_SYMLINK_HOPS: usize = 40;

/// A node's filesystem described by data: the executables and plain files it has, and its
/// symlinks. This is the `fs` block of `clawless exec check`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribedFs {
    /// Absolute paths of executable regular files.
    #[serde(default)]
    pub executables: BTreeSet<String>,
    /// Absolute paths of regular files that are not executable.
    #[serde(default)]
    pub files: BTreeSet<String>,
    /// Symlinks: absolute link path to its target (absolute, or relative to the link's folder).
    #[serde(default)]
    pub symlinks: BTreeMap<String, String>,
}

impl DescribedFs {
    /// Follows symlinks, component by component, to a canonical path. Builds the path in
    /// one buffer (no per-component joins): the exec engine calls this for every PATH entry.
    fn resolve(&self, path: &str) -> Option<String> {
        let mut pending: Vec<&str> = components(path).rev().collect();
        let mut resolved = String::with_capacity(path.len() + 1);
        // Where each resolved component starts in `resolved`, to pop it for `..`.
        let mut starts: Vec<usize> = Vec::new();
        let mut hops = 0;
        while let Some(part) = pending.pop() {
            match part {
                "." => continue,
                ".." => {
                    if let Some(start) = starts.pop() {
                        resolved.truncate(start);
                    }
                    continue;
                }
                _ => {}
            }
            starts.push(resolved.len());
            resolved.push('/');
            resolved.push_str(part);
            if let Some(target) = self.symlinks.get(resolved.as_str()) {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return None;
                }
                if let Some(start) = starts.pop() {
                    resolved.truncate(start);
                }
                if target.starts_with('/') {
                    resolved.clear();
                    starts.clear();
                }
                pending.extend(components(target).rev());
            }
        }
        if resolved.is_empty() {
            resolved.push('/');
        }
        Some(resolved)
    }
}

fn components(path: &str) -> impl DoubleEndedIterator<Item = &str> {
    path.split('/').filter(|part| !part.is_empty())
}

impl NodeFs for DescribedFs {
    fn is_executable_file(&self, path: &str) -> bool {
        self.resolve(path)
            .is_some_and(|real| self.executables.contains(&real))
    }

    fn is_file(&self, path: &str) -> bool {
        self.resolve(path)
            .is_some_and(|real| self.executables.contains(&real) || self.files.contains(&real))
    }

    fn real_path(&self, path: &str) -> Option<String> {
        let real = self.resolve(path)?;
        let exists = self.executables.contains(&real)
            || self.files.contains(&real)
            || self
                .executables
                .iter()
                .chain(&self.files)
                .any(|known| known.starts_with(&format!("{real}/")));
        exists.then_some(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> DescribedFs {
        DescribedFs {
            executables: ["/usr/bin/rg", "/opt/tools/real-jq"]
                .map(str::to_owned)
                .into(),
            files: ["/etc/passwd"].map(str::to_owned).into(),
            symlinks: [
                ("/usr/local/bin/jq", "/opt/tools/real-jq"),
                ("/bin", "usr/bin"),
                ("/loop/a", "/loop/b"),
                ("/loop/b", "/loop/a"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .into(),
        }
    }

    #[test]
    fn symlinks_resolve_to_their_target_absolute_or_relative() {
        let fs = node();
        assert_eq!(
            fs.real_path("/usr/local/bin/jq").as_deref(),
            Some("/opt/tools/real-jq")
        );
        assert_eq!(fs.real_path("/bin/rg").as_deref(), Some("/usr/bin/rg"));
        assert!(fs.is_executable_file("/bin/rg"));
    }

    #[test]
    fn plain_files_are_files_but_not_executables() {
        let fs = node();
        assert!(fs.is_file("/etc/passwd"));
        assert!(!fs.is_executable_file("/etc/passwd"));
        assert!(!fs.is_file("/etc/shadow"));
        assert_eq!(fs.real_path("/etc/shadow"), None);
    }

    #[test]
    fn dot_dot_is_applied_after_symlinks_and_loops_end_as_missing() {
        let fs = node();
        assert_eq!(
            fs.real_path("/usr/bin/../bin/rg").as_deref(),
            Some("/usr/bin/rg")
        );
        assert!(!fs.is_executable_file("/loop/a"));
        assert_eq!(fs.real_path("/loop/a"), None);
    }
}
