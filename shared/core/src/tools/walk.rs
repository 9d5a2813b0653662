//! What `ls`, `find` and `grep` share: listing a directory of the workspace (an object-store
//! prefix, so directories are inferred from keys), the ignore rules of a recursive walk
//! (`.git/`, `node_modules/`, the sandbox copies, and `.gitignore` files at the root, above
//! the searched directory and nested in it), the glob dialect, and the output caps and
//! notices.
//!
//! The `.gitignore` support is the common subset of git's syntax: comments, blank lines, `!`
//! negation, a trailing `/` for directories only, a `/` at the start or in the middle
//! anchoring a pattern to the file's directory, `*`, `?`, `[…]` and `**`. As in git, the
//! last matching rule wins, deeper files override shallower ones, and nothing below an
//! ignored directory comes back.
//!
//! This module never resolves paths (that is `super::paths`) and never formats a tool's
//! result beyond the shared caps.

use std::collections::{BTreeSet, HashMap};

use regex::Regex;

use clawless_base::object_store::{ObjectMeta, StoreError, validate_key};

use super::paths::{SearchRoot, hidden_from_sandbox};

/// Most objects one listing reads; a bigger tree is searched in part, and says so.
pub const MAX_LISTED_OBJECTS: usize = 20_000;

/// Largest output of `ls`, `find` and `grep`, in bytes (50 KB).
pub const MAX_OUTPUT_BYTES: usize = 50 * 1024;

/// Most `.gitignore` files one walk reads.
const MAX_IGNORE_FILES: usize = 200;

/// Largest `.gitignore` file read; a bigger one is skipped.
const MAX_IGNORE_FILE_BYTES: u64 = 256 * 1024;

/// Directory names a recursive walk never enters, at any depth.
const ALWAYS_SKIPPED_DIRS: [&str; 2] = [".git", "node_modules"];

/// Where the sandbox workspaces live inside an agent's workspace: internal copies that a
/// walk of the agent's own workspace leaves out.
const SANDBOXES_DIR: &str = ".sandboxes";

/// One object below the searched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// Path relative to the searched directory (`src/main.rs`).
    pub path: String,
    /// The object's key in the workspace's store.
    pub key: String,
    /// Size in bytes, as listed.
    pub size: u64,
}

/// What a search path named.
#[derive(Debug, Clone)]
pub enum Located {
    /// A directory: the objects below it, sorted by key.
    Dir(DirListing),
    /// A single file.
    File(TreeFile),
}

/// The objects below a directory, before any ignore rule.
#[derive(Debug, Clone)]
pub struct DirListing {
    /// Objects below the directory (memory and sandbox copies left out for a sandbox's view of the agent).
    pub files: Vec<TreeFile>,
    /// True when the listing stopped at [`MAX_LISTED_OBJECTS`].
    pub capped: bool,
}

/// A recursive walk after the ignore rules.
#[derive(Debug, Clone, Default)]
pub struct Walk {
    /// Files kept, sorted by path.
    pub files: Vec<TreeFile>,
    /// Directories kept (paths relative to the searched directory, no trailing `/`), sorted.
    pub dirs: Vec<String>,
    /// True when the listing stopped at [`MAX_LISTED_OBJECTS`].
    pub capped: bool,
}

/// Finds what `root` names: a directory with objects below it, or a file. `shown` is the
/// path as the model gave it, for the error texts.
pub async fn locate(root: &SearchRoot, shown: &str) -> Result<Located, String> {
    let workspace = &root.workspace;
    let dir_prefix = dir_prefix(root);
    let listing = workspace
        .store
        .list(&dir_prefix, MAX_LISTED_OBJECTS)
        .await
        .map_err(|error| storage_failure(shown, &error))?;
    let files: Vec<TreeFile> = listing
        .objects
        .into_iter()
        .filter_map(|meta| tree_file(root, &dir_prefix, meta))
        .collect();
    if !files.is_empty() || root.relative.is_empty() {
        return Ok(Located::Dir(DirListing {
            files,
            capped: listing.truncated,
        }));
    }
    let key = format!("{}{}", workspace.prefix, root.relative);
    if validate_key(&key).is_err() {
        return Err(path_not_found(shown));
    }
    let hidden = root.seen_from_sandbox && hidden_from_sandbox(&root.relative);
    match workspace.store.head(&key).await {
        Ok(Some(meta)) if !hidden => Ok(Located::File(TreeFile {
            path: root
                .relative
                .rsplit('/')
                .next()
                .unwrap_or(&root.relative)
                .to_owned(),
            key: meta.key,
            size: meta.size,
        })),
        Ok(_) => Err(path_not_found(shown)),
        Err(error) => Err(storage_failure(shown, &error)),
    }
}

/// Applies the ignore rules to a directory listing: reads the `.gitignore` files that
/// apply (those above the directory, up to the workspace root, and those inside it).
pub async fn walk(root: &SearchRoot, listing: DirListing) -> Walk {
    let rules = load_ignore_rules(root, &listing).await;
    let base = if root.relative.is_empty() {
        String::new()
    } else {
        format!("{}/", root.relative)
    };
    let at_workspace_root = root.relative.is_empty();
    let mut verdicts: HashMap<String, bool> = HashMap::new();
    let mut dirs = BTreeSet::new();
    let mut files = Vec::with_capacity(listing.files.len());
    'files: for file in listing.files {
        let segments: Vec<&str> = file.path.split('/').collect();
        let mut dir = String::new();
        for (depth, name) in segments.iter().take(segments.len() - 1).enumerate() {
            if !dir.is_empty() {
                dir.push('/');
            }
            dir.push_str(name);
            let excluded = *verdicts.entry(dir.clone()).or_insert_with(|| {
                ALWAYS_SKIPPED_DIRS.contains(name)
                    || (at_workspace_root && depth == 0 && *name == SANDBOXES_DIR)
                    || rules.ignores(&format!("{base}{dir}"), true)
            });
            if excluded {
                continue 'files;
            }
        }
        if rules.ignores(&format!("{base}{}", file.path), false) {
            continue;
        }
        let mut ancestor = String::new();
        for name in segments.iter().take(segments.len() - 1) {
            if !ancestor.is_empty() {
                ancestor.push('/');
            }
            ancestor.push_str(name);
            dirs.insert(ancestor.clone());
        }
        files.push(file);
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Walk {
        files,
        dirs: dirs.into_iter().collect(),
        capped: listing.capped,
    }
}

/// The key prefix of the searched directory (the workspace prefix for the root).
fn dir_prefix(root: &SearchRoot) -> String {
    if root.relative.is_empty() {
        root.workspace.prefix.clone()
    } else {
        format!("{}{}/", root.workspace.prefix, root.relative)
    }
}

fn tree_file(root: &SearchRoot, dir_prefix: &str, meta: ObjectMeta) -> Option<TreeFile> {
    let path = meta.key.strip_prefix(dir_prefix)?.to_owned();
    if path.is_empty() {
        return None;
    }
    if root.seen_from_sandbox {
        let workspace_relative = meta.key.strip_prefix(&root.workspace.prefix)?;
        if hidden_from_sandbox(workspace_relative) {
            return None;
        }
    }
    Some(TreeFile {
        path,
        key: meta.key,
        size: meta.size,
    })
}

/// `Path not found: <path>`.
pub fn path_not_found(shown: &str) -> String {
    format!("Path not found: {shown}")
}

fn storage_failure(shown: &str, error: &StoreError) -> String {
    match error {
        StoreError::InvalidKey { .. } => path_not_found(shown),
        _ => {
            tracing::warn!(error = ?error, "search tool: object store failed");
            format!("Cannot read directory: {shown}: storage is unavailable, try again")
        }
    }
}

// ---------------------------------------------------------------------------------------
// .gitignore

/// One pattern line of a `.gitignore` file.
#[derive(Debug)]
struct IgnoreRule {
    matcher: Regex,
    negated: bool,
    dir_only: bool,
    /// Matched against the whole path below the file's directory, not just the last name.
    anchored: bool,
}

/// The rules of one `.gitignore` file.
#[derive(Debug)]
struct IgnoreFile {
    /// Workspace-relative directory of the file: `""` or ending in `/`.
    base: String,
    rules: Vec<IgnoreRule>,
}

/// Every `.gitignore` that applies to a walk, shallowest first.
#[derive(Debug, Default)]
pub struct IgnoreRules {
    files: Vec<IgnoreFile>,
}

impl IgnoreRules {
    /// Parses `text`, the `.gitignore` in workspace-relative directory `base` (`""` or
    /// ending in `/`). Lines that do not compile are skipped.
    pub fn add_file(&mut self, base: &str, text: &str) {
        let rules: Vec<IgnoreRule> = text.lines().filter_map(parse_ignore_line).collect();
        if !rules.is_empty() {
            self.files.push(IgnoreFile {
                base: base.to_owned(),
                rules,
            });
            self.files
                .sort_by_key(|file| file.base.matches('/').count());
        }
    }

    /// Whether the workspace-relative `path` is ignored by its own name (ancestors are the
    /// caller's business): the last matching rule decides.
    pub fn ignores(&self, path: &str, is_dir: bool) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        let mut ignored = false;
        for file in &self.files {
            let Some(below) = path.strip_prefix(&file.base) else {
                continue;
            };
            for rule in &file.rules {
                if rule.dir_only && !is_dir {
                    continue;
                }
                let subject = if rule.anchored { below } else { name };
                if rule.matcher.is_match(subject) {
                    ignored = !rule.negated;
                }
            }
        }
        ignored
    }
}

fn parse_ignore_line(line: &str) -> Option<IgnoreRule> {
    let line = line.trim_end();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let (negated, pattern) = match line.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    // `\#` and `\!` name files that start with those characters.
    let pattern = pattern.strip_prefix('\\').unwrap_or(pattern);
    let (dir_only, pattern) = match pattern.strip_suffix('/') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let anchored = pattern.contains('/');
    let pattern = pattern.strip_prefix('/').unwrap_or(pattern);
    if pattern.is_empty() {
        return None;
    }
    Some(IgnoreRule {
        matcher: glob_regex(pattern).ok()?,
        negated,
        dir_only,
        anchored,
    })
}

async fn load_ignore_rules(root: &SearchRoot, listing: &DirListing) -> IgnoreRules {
    let workspace = &root.workspace;
    // The files above the searched directory, up to the workspace root, then those inside.
    let mut bases: Vec<String> = vec![String::new()];
    if !root.relative.is_empty() {
        let mut base = String::new();
        for segment in root.relative.split('/') {
            base.push_str(segment);
            base.push('/');
            bases.push(base.clone());
        }
        bases.pop();
    }
    let mut keys: Vec<String> = if root.relative.is_empty() {
        Vec::new()
    } else {
        bases
            .iter()
            .map(|base| format!("{}{base}.gitignore", workspace.prefix))
            .collect()
    };
    for file in &listing.files {
        let skipped = file
            .path
            .split('/')
            .any(|segment| ALWAYS_SKIPPED_DIRS.contains(&segment));
        if !skipped && (file.path == ".gitignore" || file.path.ends_with("/.gitignore")) {
            keys.push(file.key.clone());
        }
    }
    keys.truncate(MAX_IGNORE_FILES);
    let mut rules = IgnoreRules::default();
    for (key, read) in keys
        .iter()
        .zip(workspace.store.get_many(&keys, MAX_IGNORE_FILE_BYTES).await)
    {
        let Ok(Some(object)) = read else {
            // Missing (an ancestor without one), too large or unreadable: no rules from it.
            continue;
        };
        let Some(relative) = key.strip_prefix(&workspace.prefix) else {
            continue;
        };
        let base = &relative[..relative.len() - ".gitignore".len()];
        rules.add_file(base, &String::from_utf8_lossy(&object.bytes));
    }
    rules
}

// ---------------------------------------------------------------------------------------
// Globs

/// Compiles a glob to a regex matching a whole `/`-separated path: `*` and `?` stay within
/// one segment, `**` crosses segments (`**/x` also matches `x`, `x/**` everything below
/// `x`), `[…]` is a character class (`[!…]` or `[^…]` negated), `{a,b}` an alternation, and
/// `\` escapes the next character.
pub fn glob_regex(glob: &str) -> Result<Regex, String> {
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::from("^");
    let mut index = 0;
    let mut braces = 0usize;
    while index < chars.len() {
        let c = chars[index];
        match c {
            '*' if chars.get(index + 1) == Some(&'*') => {
                let starts_segment = index == 0 || chars[index - 1] == '/';
                let after = chars.get(index + 2);
                if starts_segment && after == Some(&'/') {
                    out.push_str("(?:.*/)?");
                    index += 3;
                } else if starts_segment && after.is_none() {
                    out.push_str(".*");
                    index += 2;
                } else {
                    out.push_str("[^/]*");
                    index += 2;
                }
                continue;
            }
            '*' => out.push_str("[^/]*"),
            '?' => out.push_str("[^/]"),
            '[' => match class_end(&chars, index) {
                Some(end) => {
                    out.push('[');
                    let mut inner = index + 1;
                    if matches!(chars.get(inner), Some('!' | '^')) {
                        out.push('^');
                        inner += 1;
                    }
                    for &member in &chars[inner..end] {
                        if matches!(member, '\\' | '[' | ']' | '^' | '&' | '~') {
                            out.push('\\');
                        }
                        out.push(member);
                    }
                    out.push(']');
                    index = end + 1;
                    continue;
                }
                None => out.push_str(r"\["),
            },
            '{' => {
                braces += 1;
                out.push_str("(?:");
            }
            '}' if braces > 0 => {
                braces -= 1;
                out.push(')');
            }
            ',' if braces > 0 => out.push('|'),
            '\\' if index + 1 < chars.len() => {
                index += 1;
                out.push_str(&regex::escape(&chars[index].to_string()));
            }
            other => out.push_str(&regex::escape(&other.to_string())),
        }
        index += 1;
    }
    if braces > 0 {
        return Err(format!("Invalid glob {glob:?}: unclosed '{{'"));
    }
    out.push('$');
    Regex::new(&out).map_err(|error| format!("Invalid glob {glob:?}: {error}"))
}

/// The index of the `]` closing the class opened at `open`, if any (a `]` right after the
/// opening, or after its `!`/`^`, is a member).
fn class_end(chars: &[char], open: usize) -> Option<usize> {
    let mut index = open + 1;
    if matches!(chars.get(index), Some('!' | '^')) {
        index += 1;
    }
    if chars.get(index) == Some(&']') {
        index += 1;
    }
    while index < chars.len() {
        if chars[index] == ']' {
            return Some(index);
        }
        index += 1;
    }
    None
}

/// A `find`/`grep` glob: one without `/` matches a file's name at any depth, one with `/`
/// the path relative to the searched directory.
#[derive(Debug)]
pub struct PathGlob {
    matcher: Regex,
    whole_path: bool,
}

impl PathGlob {
    /// Compiles `glob`.
    pub fn new(glob: &str) -> Result<Self, String> {
        let glob = glob.trim();
        let whole_path = glob.contains('/');
        let glob = glob.strip_prefix("./").unwrap_or(glob);
        Ok(Self {
            matcher: glob_regex(glob.strip_prefix('/').unwrap_or(glob))?,
            whole_path,
        })
    }

    /// Whether `path` (relative to the searched directory, no trailing `/`) matches.
    pub fn matches(&self, path: &str) -> bool {
        if self.whole_path {
            self.matcher.is_match(path)
        } else {
            self.matcher
                .is_match(path.rsplit('/').next().unwrap_or(path))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Output

/// Pi's size format: `512B`, `50.0KB`, `8.0MB`.
pub fn format_size(bytes: usize) -> String {
    const KIB: usize = 1024;
    if bytes < KIB {
        format!("{bytes}B")
    } else if bytes < KIB * KIB {
        format!("{:.1}KB", bytes as f64 / KIB as f64)
    } else {
        format!("{:.1}MB", bytes as f64 / (KIB * KIB) as f64)
    }
}

/// Joins `lines` with `\n`, stopping before the line that would take the text over
/// [`MAX_OUTPUT_BYTES`]; the flag says whether any line was left out.
pub fn join_capped(lines: &[String]) -> (String, bool) {
    let mut text = String::new();
    for (index, line) in lines.iter().enumerate() {
        let extra = line.len() + usize::from(index > 0);
        if text.len() + extra > MAX_OUTPUT_BYTES {
            return (text, true);
        }
        if index > 0 {
            text.push('\n');
        }
        text.push_str(line);
    }
    (text, false)
}

/// The notice for a cut output: `50.0KB limit reached`.
pub fn output_cap_notice() -> String {
    format!("{} limit reached", format_size(MAX_OUTPUT_BYTES))
}

/// The notice for a listing stopped at [`MAX_LISTED_OBJECTS`].
pub fn listing_cap_notice() -> String {
    format!(
        "Only the first {MAX_LISTED_OBJECTS} files of this directory were looked at; \
         name a subdirectory to see the rest"
    )
}

/// `body`, then the notices as `\n\n[a. b]` when there are any.
pub fn with_notices(body: String, notices: &[String]) -> String {
    if notices.is_empty() {
        body
    } else {
        format!("{body}\n\n[{}]", notices.join(". "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(files: &[(&str, &str)]) -> IgnoreRules {
        let mut rules = IgnoreRules::default();
        for (base, text) in files {
            rules.add_file(base, text);
        }
        rules
    }

    #[test]
    fn globs_keep_star_within_a_segment_and_double_star_across() {
        let cases = [
            ("*.rs", "main.rs", true),
            ("*.rs", "src/main.rs", false),
            ("src/*.rs", "src/main.rs", true),
            ("**/*.rs", "main.rs", true),
            ("**/*.rs", "a/b/main.rs", true),
            ("a/**", "a/b/c", true),
            ("a/**/z", "a/z", true),
            ("a/**/z", "a/b/c/z", true),
            ("a/**/z", "ab/z", false),
            ("?.md", "a.md", true),
            ("?.md", "ab.md", false),
            ("[ab].txt", "b.txt", true),
            ("[!ab].txt", "b.txt", false),
            ("[!ab].txt", "c.txt", true),
            ("*.{ts,tsx}", "x.tsx", true),
            ("*.{ts,tsx}", "x.js", false),
            ("a.b", "axb", false),
            ("(x)+", "(x)+", true),
            ("\\*", "*", true),
            ("\\*", "a", false),
        ];
        for (glob, path, expected) in cases {
            assert_eq!(
                glob_regex(glob).unwrap().is_match(path),
                expected,
                "{glob} vs {path}"
            );
        }
        assert!(glob_regex("{a,b").is_err());
    }

    #[test]
    fn path_globs_match_names_anywhere_unless_they_contain_a_slash() {
        let by_name = PathGlob::new("*.md").unwrap();
        assert!(by_name.matches("docs/deep/a.md"));
        let by_path = PathGlob::new("docs/*.md").unwrap();
        assert!(by_path.matches("docs/a.md"));
        assert!(!by_path.matches("x/docs/a.md"));
        assert!(
            PathGlob::new("**/*.spec.ts")
                .unwrap()
                .matches("a/b.spec.ts")
        );
    }

    #[test]
    fn gitignore_negation_anchoring_and_dir_only_rules_apply_last_match_wins() {
        let rules = rules(&[(
            "",
            "# build output\n\n*.log\n!keep.log\n/build\ntmp/\ndocs/*.pdf\n\\#hash\n",
        )]);
        assert!(rules.ignores("a.log", false));
        assert!(rules.ignores("deep/x/a.log", false));
        assert!(!rules.ignores("keep.log", false));
        assert!(!rules.ignores("deep/keep.log", false));
        assert!(rules.ignores("build", true));
        assert!(!rules.ignores("src/build", true), "anchored to the root");
        assert!(rules.ignores("tmp", true));
        assert!(rules.ignores("a/tmp", true));
        assert!(!rules.ignores("tmp", false), "dir-only");
        assert!(rules.ignores("docs/a.pdf", false));
        assert!(!rules.ignores("docs/sub/a.pdf", false));
        assert!(rules.ignores("#hash", false));
        assert!(!rules.ignores("# build output", false));
    }

    #[test]
    fn nested_gitignore_files_apply_below_their_directory_and_override_the_root() {
        let rules = rules(&[("", "*.gen\n"), ("pkg/", "!keep.gen\n/local.txt\n")]);
        assert!(rules.ignores("x.gen", false));
        assert!(rules.ignores("pkg/x.gen", false));
        assert!(!rules.ignores("pkg/keep.gen", false));
        assert!(
            rules.ignores("keep.gen", false),
            "the negation is pkg's only"
        );
        assert!(rules.ignores("pkg/local.txt", false));
        assert!(!rules.ignores("local.txt", false));
        assert!(!rules.ignores("pkg/sub/local.txt", false));
    }

    #[test]
    fn double_star_gitignore_patterns() {
        let rules = rules(&[("", "**/cache\nlogs/**\na/**/b.txt\n")]);
        assert!(rules.ignores("cache", true));
        assert!(rules.ignores("x/y/cache", false));
        assert!(rules.ignores("logs/a/b", false));
        assert!(rules.ignores("a/b.txt", false));
        assert!(rules.ignores("a/x/y/b.txt", false));
        assert!(!rules.ignores("b/a/b.txt", false));
    }

    #[test]
    fn output_is_cut_on_a_line_boundary_under_the_cap() {
        let lines: Vec<String> = (0..2000).map(|n| format!("{n:0>40}")).collect();
        let (text, cut) = join_capped(&lines);
        assert!(cut);
        assert!(text.len() <= MAX_OUTPUT_BYTES);
        assert!(text.ends_with(&lines[text.lines().count() - 1]));
        assert_eq!(output_cap_notice(), "50.0KB limit reached");
        assert_eq!(format_size(8 * 1024 * 1024), "8.0MB");
        assert_eq!(format_size(12), "12B");
        assert_eq!(with_notices("x".into(), &[]), "x");
        assert_eq!(
            with_notices("x".into(), &["a".into(), "b".into()]),
            "x\n\n[a. b]"
        );
    }
}
