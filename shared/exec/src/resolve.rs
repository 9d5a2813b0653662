//! Executable resolution (spec §7.4): which file a segment's first word names on a node.
//!
//! Owns the string path arithmetic the exec engine needs (home expansion, joining against a
//! working directory, lexical normalisation, base and folder names) and the PATH search. It
//! asks the node's filesystem only through [`NodeFs`]; it never reads this machine's disk.
//!
//! One difference from OpenClaw, stricter (deviation `relative-path-entry`): PATH entries
//! that are not absolute (an empty entry, `.`, `bin`) are skipped. Such an entry names no
//! fixed folder: OpenClaw's node looks in its own process folder, a shell in the command's
//! working folder, which the agent writes to; skipped, a bare `rg` cannot become the `./rg`
//! the agent just wrote.

use serde::Serialize;

use super::Platform;
use super::fs::NodeFs;

/// Extensions tried on Windows when the exec env names no `PATHEXT`.
const DEFAULT_PATHEXT: &[&str] = &[".com", ".exe", ".bat", ".cmd"];

/// Where a node searches for executables: its PATH, working directory and home.
#[derive(Debug, Clone, Copy)]
pub struct ResolveContext<'a> {
    /// The node's operating system family (path separators, PATHEXT, case).
    pub platform: Platform,
    /// The exec env's PATH, one folder per entry, in search order.
    pub path: &'a [String],
    /// The working directory relative executables are resolved against.
    pub cwd: &'a str,
    /// The node user's home folder, for `~` (none: `~` stays literal and does not resolve).
    pub home: Option<&'a str>,
    /// Windows only: the exec env's `PATHEXT` (`.COM;.EXE;…`); none uses the usual four.
    pub path_ext: Option<&'a str>,
}

/// What a segment's executable token resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutableResolution {
    /// The token as the command wrote it (after dispatch wrappers were unwrapped).
    pub raw_executable: String,
    /// The executable regular file it names, lexically normalised; none when nothing matched.
    pub resolved_path: Option<String>,
    /// `resolved_path` with every symlink followed.
    pub resolved_real_path: Option<String>,
    /// The base name of `resolved_path`, or of the raw token when unresolved.
    pub executable_name: String,
}

impl ExecutableResolution {
    /// The path a rebuilt command runs: the real path, unless its base name differs from the
    /// resolved one (a multiplexer such as busybox dispatches on its name, so `/bin/head ->
    /// busybox` must keep the `head` name), then the resolved path.
    pub fn run_path(&self) -> Option<&str> {
        let resolved = self.resolved_path.as_deref()?;
        match self.resolved_real_path.as_deref() {
            Some(real) if base_name(real) == base_name(resolved) => Some(real),
            _ => Some(resolved),
        }
    }
}

/// Resolves `raw` the way the node would run it: `~` expanded, a path-scoped token joined
/// to `cwd`, a bare name searched on PATH. Only executable regular files count.
pub fn resolve_executable(
    raw: &str, context: &ResolveContext<'_>, fs: &dyn NodeFs,
) -> ExecutableResolution {
    let resolved_path = resolved_path(raw, context, fs);
    let resolved_real_path = resolved_path.as_deref().and_then(|path| fs.real_path(path));
    let executable_name = match &resolved_path {
        Some(path) => base_name(path).to_owned(),
        None => base_name(raw).to_owned(),
    };
    ExecutableResolution {
        raw_executable: raw.to_owned(),
        resolved_path,
        resolved_real_path,
        executable_name,
    }
}

fn resolved_path(raw: &str, context: &ResolveContext<'_>, fs: &dyn NodeFs) -> Option<String> {
    if raw.is_empty() {
        return None;
    }
    let platform = context.platform;
    let expanded = expand_home(raw, context.home)?;
    if has_separator(&expanded, platform) {
        let absolute = if is_absolute(&expanded, platform) {
            expanded
        } else {
            if !is_absolute(context.cwd, platform) {
                return None;
            }
            join(context.cwd, &expanded)
        };
        let normalized = normalize(&absolute, platform);
        return candidates(&normalized, context)
            .into_iter()
            .find(|candidate| fs.is_executable_file(candidate));
    }
    context
        .path
        .iter()
        .filter(|dir| is_absolute(dir, platform))
        .flat_map(|dir| candidates(&normalize(&join(dir, &expanded), platform), context))
        .find(|candidate| fs.is_executable_file(candidate))
}

/// How OpenClaw's node would resolve a bare name: PATH entries that are not absolute are
/// searched too (joined here to `cwd`, where a shell would look; OpenClaw looks in its own
/// process folder). `None` when that finds the same file as [`resolve_executable`], or
/// when the token is not a bare name.
pub(crate) fn resolve_with_relative_entries(
    raw: &str, context: &ResolveContext<'_>, fs: &dyn NodeFs,
) -> Option<ExecutableResolution> {
    let platform = context.platform;
    if raw.is_empty()
        || has_separator(raw, platform)
        || context.path.iter().all(|dir| is_absolute(dir, platform))
        || !is_absolute(context.cwd, platform)
    {
        return None;
    }
    let found = context
        .path
        .iter()
        .map(|dir| {
            if is_absolute(dir, platform) {
                dir.clone()
            } else if dir.is_empty() {
                context.cwd.to_owned()
            } else {
                join(context.cwd, dir)
            }
        })
        .flat_map(|dir| candidates(&normalize(&join(&dir, raw), platform), context))
        .find(|candidate| fs.is_executable_file(candidate))?;
    if resolved_path(raw, context, fs).as_deref() == Some(found.as_str()) {
        return None;
    }
    Some(ExecutableResolution {
        raw_executable: raw.to_owned(),
        resolved_real_path: fs.real_path(&found),
        executable_name: base_name(&found).to_owned(),
        resolved_path: Some(found),
    })
}

/// The files a name may stand for: itself, and on Windows with each PATHEXT extension.
fn candidates(path: &str, context: &ResolveContext<'_>) -> Vec<String> {
    if !context.platform.is_windows() {
        return vec![path.to_owned()];
    }
    let extensions: Vec<String> = match context.path_ext {
        Some(list) => list
            .split(';')
            .map(str::trim)
            .filter(|ext| !ext.is_empty())
            .map(str::to_ascii_lowercase)
            .collect(),
        None => DEFAULT_PATHEXT
            .iter()
            .map(|ext| (*ext).to_owned())
            .collect(),
    };
    let lower = path.to_ascii_lowercase();
    let mut out = Vec::with_capacity(extensions.len() + 1);
    if extensions.iter().any(|ext| lower.ends_with(ext.as_str())) {
        out.push(path.to_owned());
    }
    out.extend(extensions.iter().map(|ext| format!("{path}{ext}")));
    if !out.iter().any(|candidate| candidate == path) {
        out.push(path.to_owned());
    }
    out
}

/// `~` and `~/…` expanded with `home`; other tokens unchanged. `None` when the token needs a
/// home the node did not report.
pub(crate) fn expand_home(raw: &str, home: Option<&str>) -> Option<String> {
    if raw == "~" {
        return home.map(str::to_owned);
    }
    if let Some(rest) = raw.strip_prefix("~/") {
        return home.map(|home| join(home, rest));
    }
    Some(raw.to_owned())
}

/// True when the token names a path rather than a bare command (`/`, or `\` on Windows).
pub(crate) fn has_separator(token: &str, platform: Platform) -> bool {
    token.contains('/') || (platform.is_windows() && token.contains('\\'))
}

/// True for `/x`, and on Windows also `C:\x`, `C:/x` and `\\server\x`.
pub(crate) fn is_absolute(path: &str, platform: Platform) -> bool {
    if path.starts_with('/') {
        return true;
    }
    if !platform.is_windows() {
        return false;
    }
    let bytes = path.as_bytes();
    path.starts_with('\\')
        || (bytes.len() >= 3
            && bytes[0].is_ascii_alphabetic()
            && bytes[1] == b':'
            && matches!(bytes[2], b'\\' | b'/'))
}

/// `dir` and `rest` joined by one separator.
pub(crate) fn join(dir: &str, rest: &str) -> String {
    let separator = if dir.contains('\\') && !dir.contains('/') {
        '\\'
    } else {
        '/'
    };
    let trimmed = dir.trim_end_matches(['/', '\\']);
    format!("{trimmed}{separator}{rest}")
}

/// Removes `.` and `..` components and repeated separators, lexically (like `path.resolve`).
pub(crate) fn normalize(path: &str, platform: Platform) -> String {
    let (prefix, body) = split_root(path, platform);
    let separator = if platform.is_windows() && path.contains('\\') {
        '\\'
    } else {
        '/'
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in split_components(body, platform) {
        match part {
            "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = prefix.to_owned();
    out.push_str(&parts.join(&separator.to_string()));
    out
}

/// The root of an absolute path (`/`, `C:\`, `\\`) and the rest.
fn split_root(path: &str, platform: Platform) -> (&str, &str) {
    if platform.is_windows() {
        let bytes = path.as_bytes();
        if bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
            return path.split_at(3);
        }
        if let Some(rest) = path.strip_prefix("\\\\") {
            return ("\\\\", rest);
        }
    }
    match path.strip_prefix('/') {
        Some(rest) => ("/", rest),
        None => ("", path),
    }
}

fn split_components(path: &str, platform: Platform) -> impl Iterator<Item = &str> {
    let windows = platform.is_windows();
    path.split(move |c| c == '/' || (windows && c == '\\'))
        .filter(|part| !part.is_empty())
}

/// The last component of a path (`/usr/bin/rg` -> `rg`), accepting both separators.
pub fn base_name(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    match trimmed.rfind(['/', '\\']) {
        Some(index) => &trimmed[index + 1..],
        None => trimmed,
    }
}

/// Everything before the last component (`/usr/bin/rg` -> `/usr/bin`, `/rg` -> `/`).
pub fn dir_name(path: &str) -> &str {
    let trimmed = path.trim_end_matches(['/', '\\']);
    match trimmed.rfind(['/', '\\']) {
        Some(0) => &trimmed[..1],
        Some(index) => &trimmed[..index],
        None => ".",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::DescribedFs;

    fn node() -> DescribedFs {
        DescribedFs {
            executables: [
                "/usr/bin/rg",
                "/usr/local/bin/rg",
                "/home/me/bin/tool",
                "/work/proj/build.sh",
                "/opt/real/jq-1.7",
                "/tmp/rg",
            ]
            .map(str::to_owned)
            .into(),
            files: ["/usr/bin/notes.txt", "/work/proj/README"]
                .map(str::to_owned)
                .into(),
            symlinks: [("/usr/bin/jq", "/opt/real/jq-1.7")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .into(),
        }
    }

    fn context<'a>(path: &'a [String], cwd: &'a str) -> ResolveContext<'a> {
        ResolveContext {
            platform: Platform::Linux,
            path,
            cwd,
            home: Some("/home/me"),
            path_ext: None,
        }
    }

    fn path(dirs: &[&str]) -> Vec<String> {
        dirs.iter().map(|dir| (*dir).to_owned()).collect()
    }

    #[test]
    fn a_bare_name_is_found_in_the_first_path_folder_that_has_it() {
        let fs = node();
        let dirs = path(&["/usr/local/bin", "/usr/bin"]);
        let found = resolve_executable("rg", &context(&dirs, "/work"), &fs);
        assert_eq!(found.resolved_path.as_deref(), Some("/usr/local/bin/rg"));
        assert_eq!(found.executable_name, "rg");
    }

    #[test]
    fn relative_and_empty_path_entries_are_never_searched() {
        let fs = node();
        let dirs = path(&["", ".", "tmp", "/usr/bin"]);
        let found = resolve_executable("rg", &context(&dirs, "/tmp"), &fs);
        assert_eq!(found.resolved_path.as_deref(), Some("/usr/bin/rg"));
    }

    #[test]
    fn home_relative_and_cwd_relative_tokens_resolve_to_absolute_paths() {
        let fs = node();
        let dirs = path(&["/usr/bin"]);
        let tilde = resolve_executable("~/bin/tool", &context(&dirs, "/work"), &fs);
        assert_eq!(tilde.resolved_path.as_deref(), Some("/home/me/bin/tool"));
        let relative = resolve_executable("./build.sh", &context(&dirs, "/work/proj"), &fs);
        assert_eq!(
            relative.resolved_path.as_deref(),
            Some("/work/proj/build.sh")
        );
    }

    #[test]
    fn plain_files_and_missing_files_do_not_resolve_and_keep_the_raw_name() {
        let fs = node();
        let dirs = path(&["/usr/bin"]);
        let plain = resolve_executable("notes.txt", &context(&dirs, "/work"), &fs);
        assert_eq!(plain.resolved_path, None);
        assert_eq!(plain.executable_name, "notes.txt");
        let readme = resolve_executable("./README", &context(&dirs, "/work/proj"), &fs);
        assert_eq!(readme.resolved_path, None);
    }

    #[test]
    fn the_real_path_follows_symlinks_and_the_name_stays_the_resolved_one() {
        let fs = node();
        let dirs = path(&["/usr/bin"]);
        let found = resolve_executable("jq", &context(&dirs, "/work"), &fs);
        assert_eq!(found.resolved_path.as_deref(), Some("/usr/bin/jq"));
        assert_eq!(
            found.resolved_real_path.as_deref(),
            Some("/opt/real/jq-1.7")
        );
        assert_eq!(found.executable_name, "jq");
        assert_eq!(found.run_path(), Some("/usr/bin/jq"));
    }

    #[test]
    fn tilde_without_a_reported_home_does_not_resolve() {
        let fs = node();
        let dirs = path(&["/usr/bin"]);
        let mut ctx = context(&dirs, "/work");
        ctx.home = None;
        assert_eq!(
            resolve_executable("~/bin/tool", &ctx, &fs).resolved_path,
            None
        );
    }

    #[test]
    fn windows_tokens_accept_backslashes_drive_roots_and_pathext() {
        // DescribedFs speaks POSIX paths; a Windows node is described by exact names here.
        struct WindowsNode;
        impl NodeFs for WindowsNode {
            fn is_executable_file(&self, path: &str) -> bool {
                path == "C:/Tools/rg.exe"
            }
            fn is_file(&self, path: &str) -> bool {
                self.is_executable_file(path)
            }
            fn real_path(&self, path: &str) -> Option<String> {
                self.is_file(path).then(|| path.to_owned())
            }
        }
        let fs = WindowsNode;
        let dirs = path(&["C:/Tools"]);
        let ctx = ResolveContext {
            platform: Platform::Windows,
            path: &dirs,
            cwd: "C:/work",
            home: None,
            path_ext: None,
        };
        assert!(is_absolute("C:\\x", Platform::Windows));
        assert!(!is_absolute("C:\\x", Platform::Linux));
        assert_eq!(
            resolve_executable("rg", &ctx, &fs).resolved_path.as_deref(),
            Some("C:/Tools/rg.exe")
        );
    }

    #[test]
    fn base_and_dir_names_split_on_the_last_separator() {
        assert_eq!(base_name("/usr/bin/rg"), "rg");
        assert_eq!(dir_name("/usr/bin/rg"), "/usr/bin");
        assert_eq!(dir_name("/rg"), "/");
        assert_eq!(base_name("rg"), "rg");
        assert_eq!(normalize("/a/./b/../c//d", Platform::Linux), "/a/c/d");
    }
}
