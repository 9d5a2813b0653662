//! Bootstrap files (spec §10.3): which workspace files are injected into the system prompt,
//! reading them from the agent's workspace prefix, and the per-file and total character caps
//! with their head/tail truncation marker and `[MISSING]` lines.
//!
//! Files are read through the [`ObjectStore`] port, so this module knows nothing of S3 or of a
//! local directory; it only sees keys under the workspace prefix and the locations the store
//! reports for them. Lengths and budgets are counted in `char`s and cuts never split one.

use crate::session::SessionKey;
use clawless_base::object_store::{ObjectStore, StoreError, normalize_prefix};

/// The bootstrap files every full session loads, in load order.
pub const BOOTSTRAP_FILE_NAMES: [&str; 7] = [
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "BOOTSTRAP.md",
];

/// The long-term memory file, loaded after [`BOOTSTRAP_FILE_NAMES`] when present.
pub const MEMORY_FILE_NAME: &str = "MEMORY.md";

/// The lowercase spelling, loaded only when [`MEMORY_FILE_NAME`] is absent.
pub const MEMORY_FILE_NAME_ALT: &str = "memory.md";

/// The only bootstrap files sub-agent and cron sessions keep.
pub const MINIMAL_BOOTSTRAP_FILE_NAMES: [&str; 5] =
    ["AGENTS.md", "TOOLS.md", "SOUL.md", "IDENTITY.md", "USER.md"];

/// The file that changes between heartbeats and therefore goes below the cache boundary.
pub const HEARTBEAT_FILE_NAME: &str = "HEARTBEAT.md";

/// Largest bootstrap file read, in bytes; a larger one is treated as missing.
pub const MAX_BOOTSTRAP_FILE_BYTES: u64 = 2 * 1024 * 1024;

/// Default per-file cap in characters (`agents.defaults.bootstrapMaxChars`).
pub const DEFAULT_BOOTSTRAP_MAX_CHARS: usize = 20_000;

/// Default cap on all injected bootstrap content (`agents.defaults.bootstrapTotalMaxChars`).
pub const DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS: usize = 150_000;

/// Below this many characters of remaining budget no further file is injected: a file cut
/// that short would be mostly truncation marker.
pub const MIN_BOOTSTRAP_FILE_BUDGET_CHARS: usize = 64;

/// Share of a file's cap kept from its start when it is truncated.
const HEAD_RATIO: f64 = 0.7;
/// Share of a file's cap kept from its end when it is truncated.
const TAIL_RATIO: f64 = 0.2;

/// Which bootstrap files a session loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootstrapKind {
    /// An ordinary session: every file of [`BOOTSTRAP_FILE_NAMES`], then the memory file.
    Full,
    /// A sub-agent or cron session: only [`MINIMAL_BOOTSTRAP_FILE_NAMES`].
    Minimal,
    /// A lightweight-context run: nothing, except `HEARTBEAT.md` when the run is a heartbeat.
    Lightweight {
        /// Whether the run is a heartbeat poll.
        heartbeat: bool,
    },
}

impl BootstrapKind {
    /// [`BootstrapKind::Minimal`] for sub-agent (`…:subagent:…`) and cron
    /// (`agent:<id>:cron:…`) session keys, [`BootstrapKind::Full`] otherwise.
    pub fn for_session_key(session_key: &str) -> Self {
        if is_subagent_or_cron_key(session_key) {
            Self::Minimal
        } else {
            Self::Full
        }
    }

    /// The fixed file names this kind reads, in order (the memory file is decided separately).
    fn file_names(self) -> Vec<&'static str> {
        match self {
            Self::Full => BOOTSTRAP_FILE_NAMES.to_vec(),
            // Keep the load order of the full list, not the order of the allowlist.
            Self::Minimal => BOOTSTRAP_FILE_NAMES
                .into_iter()
                .filter(|name| MINIMAL_BOOTSTRAP_FILE_NAMES.contains(name))
                .collect(),
            Self::Lightweight { heartbeat: true } => vec![HEARTBEAT_FILE_NAME],
            Self::Lightweight { heartbeat: false } => Vec::new(),
        }
    }
}

/// True for sub-agent keys (`…:subagent:…`, or the legacy `subagent:…`) and cron keys
/// (`agent:<id>:cron:…`): the sessions that get the minimal prompt and bootstrap set.
pub(crate) fn is_subagent_or_cron_key(session_key: &str) -> bool {
    if session_key.trim().to_lowercase().starts_with("subagent:") {
        return true;
    }
    SessionKey::parse(session_key).is_some_and(|key| key.subagent_depth() > 0 || key.is_cron())
}

/// One bootstrap file as loaded from the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapFile {
    /// File name, e.g. `AGENTS.md`; used in truncation markers and warnings.
    pub name: String,
    /// Where the file is, as the model and the `read` tool see it
    /// ([`ObjectStore::location`]); used as the Project Context heading.
    pub path: String,
    /// The text, or `None` when the file is missing (or too large to read).
    pub content: Option<String>,
}

/// A file ready to be injected into the system prompt's Project Context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    /// Where the file is (shown as its `## <path>` heading).
    pub path: String,
    /// The (possibly truncated) text, or a `[MISSING] Expected at: <path>` line.
    pub content: String,
}

/// Reads the bootstrap files of `kind` from `workspace_prefix` in one batched read.
///
/// Files come back in [`BOOTSTRAP_FILE_NAMES`] order; a missing file is kept with
/// `content: None`, located where it was expected. `MEMORY.md` (else `memory.md`) is
/// appended for [`BootstrapKind::Full`] only when it exists. A file over
/// [`MAX_BOOTSTRAP_FILE_BYTES`] is treated as missing, as a guarded read that refused it
/// would be; any other store failure is returned.
pub async fn load_bootstrap_files(
    store: &dyn ObjectStore, workspace_prefix: &str, kind: BootstrapKind,
) -> Result<Vec<BootstrapFile>, StoreError> {
    let prefix = normalize_prefix(workspace_prefix);
    let mut names = kind.file_names();
    let with_memory = kind == BootstrapKind::Full;
    if with_memory {
        names.extend([MEMORY_FILE_NAME, MEMORY_FILE_NAME_ALT]);
    }
    let keys: Vec<String> = names.iter().map(|name| format!("{prefix}{name}")).collect();
    let results = store.get_many(&keys, MAX_BOOTSTRAP_FILE_BYTES).await;

    let mut fixed = Vec::with_capacity(names.len());
    for ((name, key), result) in names.iter().zip(&keys).zip(results) {
        let content = match result {
            Ok(Some(object)) => Some(String::from_utf8_lossy(&object.bytes).into_owned()),
            Ok(None) => None,
            Err(StoreError::TooLarge { size, limit, .. }) => {
                tracing::warn!(key = %key, size, limit, "bootstrap file too large; treated as missing");
                None
            }
            Err(err) => return Err(err),
        };
        fixed.push(BootstrapFile {
            name: (*name).to_owned(),
            path: store.location(key),
            content,
        });
    }

    if with_memory {
        // The last two entries are the memory candidates: keep the first that exists, and
        // neither when both are absent (memory is optional, so it is never reported missing).
        let candidates = fixed.split_off(fixed.len().saturating_sub(2));
        if let Some(memory) = candidates.into_iter().find(|file| file.content.is_some()) {
            fixed.push(memory);
        }
    }
    Ok(fixed)
}

/// Applies the per-file (`max_chars`) and total (`total_max_chars`) caps to `files`, in order,
/// returning the files to inject and warnings about what was cut or dropped.
///
/// A missing file becomes `[MISSING] Expected at: <path>` (clamped to the remaining budget).
/// Once less than [`MIN_BOOTSTRAP_FILE_BUDGET_CHARS`] remain, no further file is injected.
/// A file longer than its cap (`min(max_chars, remaining)`) keeps its first 70% and last 20%
/// around a truncation marker; the result is then clamped to the remaining budget, ending in
/// `…`. Files that are empty after trimming trailing whitespace are skipped.
pub fn build_bootstrap_context_files(
    files: &[BootstrapFile], max_chars: usize, total_max_chars: usize,
) -> (Vec<ContextFile>, Vec<String>) {
    let mut remaining = total_max_chars;
    let mut injected = Vec::new();
    let mut warnings = Vec::new();
    for file in files {
        if remaining == 0 {
            break;
        }
        let path = file.path.trim();
        if path.is_empty() {
            warnings.push(format!(
                "bootstrap file {} has no path; not injected",
                file.name
            ));
            continue;
        }
        let Some(content) = &file.content else {
            let marker = clamp_to_budget(&format!("[MISSING] Expected at: {path}"), remaining);
            remaining = remaining.saturating_sub(char_len(&marker));
            injected.push(ContextFile {
                path: path.to_owned(),
                content: marker,
            });
            continue;
        };
        if remaining < MIN_BOOTSTRAP_FILE_BUDGET_CHARS {
            warnings.push(format!(
                "only {remaining} chars of bootstrap budget left (under {MIN_BOOTSTRAP_FILE_BUDGET_CHARS}); \
                 the remaining bootstrap files are not injected"
            ));
            break;
        }
        let file_max = max_chars.min(remaining).max(1);
        let trimmed = content.trim_end();
        let trimmed_len = char_len(trimmed);
        let capped = if trimmed_len > file_max {
            truncate_head_tail(trimmed, trimmed_len, &file.name, file_max)
        } else {
            trimmed.to_owned()
        };
        let within_budget = clamp_to_budget(&capped, remaining);
        if within_budget.is_empty() {
            continue;
        }
        if trimmed_len > file_max || within_budget != capped {
            warnings.push(format!(
                "bootstrap file {} has {trimmed_len} chars (limit {file_max}); injected truncated",
                file.name
            ));
        }
        remaining = remaining.saturating_sub(char_len(&within_budget));
        injected.push(ContextFile {
            path: path.to_owned(),
            content: within_budget,
        });
    }
    (injected, warnings)
}

/// Keeps the head and tail of `text` (`len` chars) around the marker that names `name`.
fn truncate_head_tail(text: &str, len: usize, name: &str, max: usize) -> String {
    // In f64, as the reference computes them, so `floor` lands on the same integers.
    let head_chars = (max as f64 * HEAD_RATIO).floor() as usize;
    let tail_chars = (max as f64 * TAIL_RATIO).floor() as usize;
    let head = take_chars(text, head_chars);
    let tail = last_chars(text, len, tail_chars);
    format!(
        "{head}\n\n[...truncated, read {name} for full content...]\n\
         …(truncated {name}: kept {head_chars}+{tail_chars} chars of {len})…\n\n{tail}"
    )
}

/// `text` if it fits `budget` chars, else its first `budget - 1` chars and `…`.
fn clamp_to_budget(text: &str, budget: usize) -> String {
    if budget == 0 {
        return String::new();
    }
    if char_len(text) <= budget {
        return text.to_owned();
    }
    format!("{}…", take_chars(text, budget - 1))
}

fn char_len(text: &str) -> usize {
    text.chars().count()
}

/// The first `count` chars of `text`.
fn take_chars(text: &str, count: usize) -> &str {
    let end = text
        .char_indices()
        .nth(count)
        .map_or(text.len(), |(index, _)| index);
    &text[..end]
}

/// The last `count` chars of `text`, which is `len` chars long.
fn last_chars(text: &str, len: usize, count: usize) -> &str {
    let start = text
        .char_indices()
        .nth(len.saturating_sub(count))
        .map_or(text.len(), |(index, _)| index);
    &text[start..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::InMemoryObjectStore;

    fn present(name: &str, content: &str) -> BootstrapFile {
        BootstrapFile {
            name: name.to_owned(),
            path: format!("/tmp/{name}"),
            content: Some(content.to_owned()),
        }
    }

    fn missing(name: &str) -> BootstrapFile {
        BootstrapFile {
            name: name.to_owned(),
            path: format!("/tmp/{name}"),
            content: None,
        }
    }

    #[test]
    fn oversized_file_keeps_head_and_tail_around_the_truncation_marker() {
        // GIVEN a 910-char TOOLS.md and a 200-char cap
        let long = format!("HEAD-{}{}-TAIL", "a".repeat(600), "b".repeat(300));
        // WHEN the caps are applied
        let (files, warnings) = build_bootstrap_context_files(
            &[present("TOOLS.md", &long)],
            200,
            DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
        );
        // THEN 140 head chars and 40 tail chars surround the marker, and a warning names the cap
        assert_eq!(files.len(), 1);
        let content = &files[0].content;
        assert!(content.contains("[...truncated, read TOOLS.md for full content...]"));
        assert!(content.contains("…(truncated TOOLS.md: kept 140+40 chars of 910)…"));
        assert!(content.starts_with(&long[..120]));
        assert!(content.ends_with(&long[long.len() - 40..]));
        let expected = format!(
            "{}\n\n[...truncated, read TOOLS.md for full content...]\n\
             …(truncated TOOLS.md: kept 140+40 chars of 910)…\n\n{}",
            &long[..140],
            &long[long.len() - 40..]
        );
        assert_eq!(content, &expected);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("limit 200"), "{}", warnings[0]);
    }

    #[test]
    fn missing_file_becomes_a_missing_marker() {
        let (files, warnings) = build_bootstrap_context_files(
            &[missing("AGENTS.md")],
            DEFAULT_BOOTSTRAP_MAX_CHARS,
            DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
        );
        assert_eq!(
            files,
            vec![ContextFile {
                path: "/tmp/AGENTS.md".to_owned(),
                content: "[MISSING] Expected at: /tmp/AGENTS.md".to_owned(),
            }]
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn whitespace_only_file_is_skipped() {
        let (files, warnings) = build_bootstrap_context_files(
            &[present("SOUL.md", "  \n\t\n  ")],
            DEFAULT_BOOTSTRAP_MAX_CHARS,
            DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
        );
        assert!(files.is_empty());
        assert!(warnings.is_empty());
    }

    #[test]
    fn total_budget_under_the_minimum_injects_nothing() {
        let long = "x".repeat(500);
        let (files, warnings) =
            build_bootstrap_context_files(&[present("AGENTS.md", &long)], 200, 40);
        assert!(files.is_empty());
        assert_eq!(warnings.len(), 1);
    }

    #[test]
    fn missing_marker_is_clamped_to_the_remaining_budget() {
        let (files, _) = build_bootstrap_context_files(&[missing("AGENTS.md")], 200, 10);
        assert_eq!(files[0].content, "[MISSING]…");
        assert_eq!(char_len(&files[0].content), 10);
    }

    #[test]
    fn later_files_are_clamped_to_what_the_total_budget_leaves() {
        // GIVEN a total budget of 200, a 100-char file and a 150-char file
        let files = [
            present("AGENTS.md", &"a".repeat(100)),
            present("SOUL.md", &"s".repeat(150)),
            present("USER.md", "never reached"),
        ];
        // WHEN the caps are applied
        let (injected, warnings) = build_bootstrap_context_files(&files, 1_000, 200);
        // THEN the second is truncated to the 100 chars left, and nothing is left for the third
        assert_eq!(injected.len(), 2);
        assert_eq!(injected[0].content, "a".repeat(100));
        assert!(injected[1].content.starts_with(&"s".repeat(70)));
        assert!(injected[1].content.ends_with('…'));
        assert_eq!(char_len(&injected[1].content), 100);
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("SOUL.md") && warnings[0].contains("limit 100"));
    }

    #[test]
    fn truncation_counts_chars_and_never_splits_one() {
        let text = "é".repeat(300);
        let (files, _) = build_bootstrap_context_files(&[present("USER.md", &text)], 100, 10_000);
        let content = &files[0].content;
        assert!(content.starts_with(&"é".repeat(70)));
        assert!(content.contains("kept 70+20 chars of 300"));
        assert!(content.ends_with(&format!("\n\n{}", "é".repeat(20))));
    }

    #[test]
    fn trailing_whitespace_is_trimmed_before_measuring() {
        let (files, warnings) =
            build_bootstrap_context_files(&[present("USER.md", "hello\n\n\n   ")], 5, 10_000);
        assert_eq!(files[0].content, "hello");
        assert!(warnings.is_empty());
    }

    #[test]
    fn session_keys_choose_the_bootstrap_kind() {
        for (key, kind) in [
            ("agent:main:main", BootstrapKind::Full),
            ("agent:main:subagent:worker", BootstrapKind::Minimal),
            ("agent:main:cron:job-1", BootstrapKind::Minimal),
            ("cron:job-1", BootstrapKind::Full),
        ] {
            assert_eq!(BootstrapKind::for_session_key(key), kind, "{key}");
        }
    }

    const WORKSPACE: &str = "agents/main/workspace/";

    fn store_with(files: &[(&str, &str)]) -> InMemoryObjectStore {
        let store = InMemoryObjectStore::named("ws");
        for (name, content) in files {
            store
                .insert(&format!("{WORKSPACE}{name}"), *content)
                .unwrap();
        }
        store
    }

    fn summary(files: &[BootstrapFile]) -> Vec<(&str, Option<&str>)> {
        files
            .iter()
            .map(|file| (file.name.as_str(), file.content.as_deref()))
            .collect()
    }

    #[tokio::test]
    async fn loading_keeps_the_fixed_order_and_marks_missing_files() {
        // GIVEN a workspace with only AGENTS.md and HEARTBEAT.md
        let store = store_with(&[("AGENTS.md", "agents"), ("HEARTBEAT.md", "beat")]);
        // WHEN a full session loads its bootstrap files
        let files = load_bootstrap_files(&store, "agents/main/workspace", BootstrapKind::Full)
            .await
            .unwrap();
        // THEN all seven fixed files come back in order, missing ones located where expected
        assert_eq!(
            summary(&files),
            vec![
                ("AGENTS.md", Some("agents")),
                ("SOUL.md", None),
                ("TOOLS.md", None),
                ("IDENTITY.md", None),
                ("USER.md", None),
                ("HEARTBEAT.md", Some("beat")),
                ("BOOTSTRAP.md", None),
            ]
        );
        assert_eq!(files[1].path, "mem://ws/agents/main/workspace/SOUL.md");
    }

    #[tokio::test]
    async fn uppercase_memory_file_wins_over_lowercase() {
        let store = store_with(&[("MEMORY.md", "upper"), ("memory.md", "lower")]);
        let files = load_bootstrap_files(&store, WORKSPACE, BootstrapKind::Full)
            .await
            .unwrap();
        assert_eq!(files.len(), 8);
        assert_eq!(files[7].name, "MEMORY.md");
        assert_eq!(files[7].content.as_deref(), Some("upper"));
    }

    #[tokio::test]
    async fn lowercase_memory_file_is_used_when_uppercase_is_absent() {
        let store = store_with(&[("memory.md", "lower")]);
        let files = load_bootstrap_files(&store, WORKSPACE, BootstrapKind::Full)
            .await
            .unwrap();
        assert_eq!(files.len(), 8);
        assert_eq!(files[7].name, "memory.md");
        assert_eq!(files[7].path, "mem://ws/agents/main/workspace/memory.md");
    }

    /// TV-21, clawless's way: `MEMORY.md` holding a canary reaches none of a Discord channel,
    /// a sub-agent or a cron run (OpenClaw injects it into the channel).
    #[tokio::test]
    async fn tv21_memory_reaches_no_channel_sub_agent_or_cron_session() {
        let store = store_with(&[("MEMORY.md", "CANARY")]);
        let memory = crate::sandbox::MemoryConfig::default();
        for key in [
            "agent:main:discord:channel:1",
            "agent:main:subagent:x",
            "agent:main:cron:J:run:R",
        ] {
            let files =
                load_bootstrap_files(&store, WORKSPACE, BootstrapKind::for_session_key(key))
                    .await
                    .expect("loads");
            let loaded = files
                .iter()
                .any(|file| file.content.as_deref() == Some("CANARY"));
            // Sub-agents and cron runs never load it; a channel loads it only where memory
            // reaches, and by default it does not reach a channel.
            assert!(!loaded || !memory.reaches(key, false, false), "{key}");
        }
        assert!(!memory.reaches("agent:main:discord:channel:1", false, false));
        assert!(memory.reaches("agent:main:main", false, false));
    }

    #[tokio::test]
    async fn absent_memory_file_is_not_reported_missing() {
        let store = store_with(&[]);
        let files = load_bootstrap_files(&store, WORKSPACE, BootstrapKind::Full)
            .await
            .unwrap();
        assert_eq!(files.len(), BOOTSTRAP_FILE_NAMES.len());
    }

    #[tokio::test]
    async fn subagent_and_cron_sessions_keep_only_five_files() {
        let store = store_with(&[
            ("HEARTBEAT.md", "beat"),
            ("MEMORY.md", "mem"),
            ("SOUL.md", "soul"),
        ]);
        let files = load_bootstrap_files(&store, WORKSPACE, BootstrapKind::Minimal)
            .await
            .unwrap();
        let names: Vec<&str> = files.iter().map(|file| file.name.as_str()).collect();
        assert_eq!(
            names,
            ["AGENTS.md", "SOUL.md", "TOOLS.md", "IDENTITY.md", "USER.md"]
        );
    }

    #[tokio::test]
    async fn lightweight_runs_load_only_heartbeat_for_heartbeats() {
        let store = store_with(&[("HEARTBEAT.md", "beat"), ("AGENTS.md", "agents")]);
        let none = load_bootstrap_files(
            &store,
            WORKSPACE,
            BootstrapKind::Lightweight { heartbeat: false },
        )
        .await
        .unwrap();
        assert!(none.is_empty());
        let beat = load_bootstrap_files(
            &store,
            WORKSPACE,
            BootstrapKind::Lightweight { heartbeat: true },
        )
        .await
        .unwrap();
        assert_eq!(summary(&beat), vec![("HEARTBEAT.md", Some("beat"))]);
    }

    #[tokio::test]
    async fn file_over_the_read_limit_is_treated_as_missing() {
        let huge = vec![b'x'; usize::try_from(MAX_BOOTSTRAP_FILE_BYTES).unwrap() + 1];
        let store = InMemoryObjectStore::named("ws");
        store
            .insert(&format!("{WORKSPACE}AGENTS.md"), huge)
            .unwrap();
        let files = load_bootstrap_files(&store, WORKSPACE, BootstrapKind::Minimal)
            .await
            .unwrap();
        assert_eq!(files[0].name, "AGENTS.md");
        assert_eq!(files[0].content, None);
    }

    #[tokio::test]
    async fn invalid_workspace_prefix_is_an_error() {
        let store = store_with(&[]);
        let result = load_bootstrap_files(&store, "../escape", BootstrapKind::Full).await;
        assert!(matches!(result, Err(StoreError::InvalidKey { .. })));
    }
}
