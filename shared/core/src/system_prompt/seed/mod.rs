//! The default bootstrap files a fresh workspace starts with, so that a new agent has an
//! identity instead of a row of `[MISSING]` lines, and [`seed_workspace`], which writes the
//! missing ones into a workspace prefix of any [`ObjectStore`].
//!
//! The texts live next to this file as Markdown (`AGENTS.md`, `SOUL.md`, …) and are compiled in
//! with `include_str!`. They are written for clawless and kept small on purpose: all seven
//! together stay under 4,000 characters, so even a 12k-token model keeps most of its window for
//! the conversation.
//!
//! Seeding never overwrites anything: each file is written with [`PutCondition::IfAbsent`], so
//! a file created by someone else between the check and the write is kept. `BOOTSTRAP.md`, the
//! one-time first-conversation ritual, is written only into a brand-new workspace (none of the
//! bootstrap files nor a memory file exists yet); a workspace someone already uses never gets
//! it, however many files it lacks.
//!
//! Finishing the ritual: no tool can delete a file, and none is added for it. The ritual ends by
//! overwriting `BOOTSTRAP.md` with empty content through the ordinary `write` tool, and the
//! bootstrap loader already leaves out files that are empty after trimming (spec §10.3), so the
//! ritual disappears from the prompt without widening any tool's powers. The emptied file also
//! stays behind as a marker: the workspace is no longer new, so seeding again does not bring
//! the ritual back.
//!
//! This module knows nothing of S3 or directories, nor of when to seed: `clawless local` seeds
//! its workspace on first start and `clawless workspace init` seeds a deployment's.

use clawless_base::object_store::{ObjectStore, PutCondition, StoreError, normalize_prefix};

use super::bootstrap::{BOOTSTRAP_FILE_NAMES, MEMORY_FILE_NAME, MEMORY_FILE_NAME_ALT};

/// The name of the one-time first-conversation file.
pub const BOOTSTRAP_RITUAL_FILE_NAME: &str = "BOOTSTRAP.md";

/// One default workspace file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeedFile {
    /// File name at the workspace root, e.g. `SOUL.md`.
    pub name: &'static str,
    /// The default content.
    pub content: &'static str,
}

/// Every default file, in bootstrap load order; the last is [`BOOTSTRAP_RITUAL_FILE_NAME`],
/// which [`seed_workspace`] writes only into a brand-new workspace.
pub const SEED_FILES: [SeedFile; 7] = [
    SeedFile {
        name: "AGENTS.md",
        content: include_str!("AGENTS.md"),
    },
    SeedFile {
        name: "SOUL.md",
        content: include_str!("SOUL.md"),
    },
    SeedFile {
        name: "TOOLS.md",
        content: include_str!("TOOLS.md"),
    },
    SeedFile {
        name: "IDENTITY.md",
        content: include_str!("IDENTITY.md"),
    },
    SeedFile {
        name: "USER.md",
        content: include_str!("USER.md"),
    },
    SeedFile {
        name: "HEARTBEAT.md",
        content: include_str!("HEARTBEAT.md"),
    },
    SeedFile {
        name: BOOTSTRAP_RITUAL_FILE_NAME,
        content: include_str!("BOOTSTRAP.md"),
    },
];

/// Which files [`seed_workspace`] may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedScope {
    /// Every missing default file (`BOOTSTRAP.md` still only into a brand-new workspace): for
    /// an operator who asks for it explicitly (`clawless workspace init`).
    MissingFiles,
    /// Nothing unless the workspace is brand new, then everything: for a start-up that must not
    /// bring back a file the user removed on purpose (`clawless local`).
    NewWorkspaceOnly,
}

/// What [`seed_workspace`] found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SeedReport {
    /// Whether the workspace was brand new: no bootstrap file and no memory file existed.
    pub brand_new: bool,
    /// Files written, in the order they were written.
    pub written: Vec<&'static str>,
    /// Default files left as they were because they already existed (including one that
    /// appeared between the check and the write).
    pub existing: Vec<&'static str>,
}

/// Writes the missing default files of `scope` into `workspace_prefix` of `store`, never
/// overwriting a file.
///
/// The workspace is brand new when none of the bootstrap files (`AGENTS.md` … `BOOTSTRAP.md`)
/// nor `MEMORY.md` / `memory.md` exists; only then is `BOOTSTRAP.md` written, and it is written
/// first, so that a seeding interrupted half-way and run again still leaves the ritual in place.
/// Store failures (and an invalid prefix) are returned; files written before a failure stay.
pub async fn seed_workspace(
    store: &dyn ObjectStore, workspace_prefix: &str, scope: SeedScope,
) -> Result<SeedReport, StoreError> {
    let prefix = normalize_prefix(workspace_prefix);
    let probed: Vec<&str> = BOOTSTRAP_FILE_NAMES
        .iter()
        .copied()
        .chain([MEMORY_FILE_NAME, MEMORY_FILE_NAME_ALT])
        .collect();
    let keys: Vec<String> = probed
        .iter()
        .map(|name| format!("{prefix}{name}"))
        .collect();
    // A plain loop rather than a closure over `&String`: see `ObjectStore::get_many`.
    let mut heads = Vec::with_capacity(keys.len());
    for key in &keys {
        heads.push(store.head(key));
    }
    let mut present = Vec::with_capacity(probed.len());
    for (name, head) in probed
        .iter()
        .zip(futures_util::future::join_all(heads).await)
    {
        if head?.is_some() {
            present.push(*name);
        }
    }
    let brand_new = present.is_empty();
    let mut report = SeedReport {
        brand_new,
        ..SeedReport::default()
    };
    if !brand_new && scope == SeedScope::NewWorkspaceOnly {
        report.existing = SEED_FILES
            .iter()
            .map(|file| file.name)
            .filter(|name| present.contains(name))
            .collect();
        return Ok(report);
    }

    // The ritual goes first (see above); the rest follow in load order.
    let (ritual, others): (Vec<&SeedFile>, Vec<&SeedFile>) = SEED_FILES
        .iter()
        .partition(|file| file.name == BOOTSTRAP_RITUAL_FILE_NAME);
    for file in ritual.into_iter().chain(others) {
        if present.contains(&file.name) {
            report.existing.push(file.name);
            continue;
        }
        if file.name == BOOTSTRAP_RITUAL_FILE_NAME && !brand_new {
            continue;
        }
        let key = format!("{prefix}{}", file.name);
        match store
            .put(
                &key,
                file.content.as_bytes().to_vec(),
                PutCondition::IfAbsent,
            )
            .await
        {
            Ok(_) => report.written.push(file.name),
            Err(StoreError::Conflict(_)) => report.existing.push(file.name),
            Err(err) => return Err(err),
        }
    }
    if !report.written.is_empty() {
        tracing::info!(
            workspace = %store.location(&prefix),
            written = ?report.written,
            brand_new,
            "seeded the workspace's default bootstrap files"
        );
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::json;

    use super::*;

    #[test]
    fn the_seeded_heartbeat_file_is_effectively_empty_so_heartbeats_cost_no_model_call() {
        let seeded = SEED_FILES
            .iter()
            .find(|file| file.name == "HEARTBEAT.md")
            .expect("a seeded HEARTBEAT.md")
            .content;
        assert!(clawless_automation::heartbeat::file::is_effectively_empty(
            Some(seeded)
        ));
    }
    use crate::system_prompt::bootstrap::BootstrapKind;
    use crate::system_prompt::{
        DEFAULT_BOOTSTRAP_MAX_CHARS, DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS, PromptMode,
        SystemPromptParams, build_bootstrap_context_files, build_system_prompt,
        load_bootstrap_files,
    };
    use crate::testing::InMemoryObjectStore;
    use crate::tools::write::WriteTool;
    use crate::tools::{SessionFacts, Tool, ToolContext, Workspace};
    use clawless_base::object_store::{Listing, Object, ObjectMeta};

    const WS: &str = "agents/main/workspace/";

    async fn text(store: &InMemoryObjectStore, name: &str) -> Option<String> {
        let object = store.get(&format!("{WS}{name}"), 1 << 20).await.unwrap()?;
        Some(String::from_utf8(object.bytes).unwrap())
    }

    fn seed_text(name: &str) -> &'static str {
        SEED_FILES
            .iter()
            .find(|file| file.name == name)
            .map(|file| file.content)
            .unwrap()
    }

    /// The full system prompt a main session of the workspace in `store` gets.
    async fn prompt_for(store: &InMemoryObjectStore) -> String {
        let files = load_bootstrap_files(store, WS, BootstrapKind::Full)
            .await
            .unwrap();
        let (context_files, warnings) = build_bootstrap_context_files(
            &files,
            DEFAULT_BOOTSTRAP_MAX_CHARS,
            DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS,
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        let tool_names: Vec<String> = ["read", "write", "edit", "memory_search", "memory_get"]
            .map(str::to_owned)
            .to_vec();
        let workspace_dir = store.location(WS);
        build_system_prompt(&SystemPromptParams {
            mode: PromptMode::Full,
            tool_names: &tool_names,
            workspace_dir: &workspace_dir,
            context_files: &context_files,
            ..SystemPromptParams::default()
        })
    }

    #[test]
    fn the_seed_files_are_the_bootstrap_files_and_stay_small() {
        // The defaults must fit a 12k-token window with room to talk: the module promises
        // under 4,000 chars (well under the 6,000 budget).
        let names: Vec<&str> = SEED_FILES.iter().map(|file| file.name).collect();
        assert_eq!(names, BOOTSTRAP_FILE_NAMES);
        assert_eq!(
            SEED_FILES.last().map(|file| file.name),
            Some(BOOTSTRAP_RITUAL_FILE_NAME)
        );
        let total: usize = SEED_FILES
            .iter()
            .map(|file| file.content.chars().count())
            .sum();
        assert!(total < 4_000, "the seed files hold {total} chars");
        for file in SEED_FILES {
            assert!(!file.content.trim().is_empty(), "{} is blank", file.name);
            // The offline model finds skills by this tag; a seed file must never contain it.
            assert!(
                !file.content.contains("<available_skills>"),
                "{}",
                file.name
            );
        }
    }

    #[test]
    fn the_ritual_ends_with_the_write_call_that_retires_it() {
        // The ritual's last step is the exact call the loader treats as removal (tested below).
        let ritual = seed_text(BOOTSTRAP_RITUAL_FILE_NAME);
        assert!(
            ritual.contains("call `write` with path `BOOTSTRAP.md` and content `\"\"`"),
            "{ritual}"
        );
        assert!(ritual.contains("IDENTITY.md") && ritual.contains("USER.md"));
    }

    #[tokio::test]
    async fn a_brand_new_workspace_gets_every_file_with_the_ritual_first() {
        let store = InMemoryObjectStore::named("ws");
        let report = seed_workspace(&store, "agents/main/workspace", SeedScope::MissingFiles)
            .await
            .unwrap();
        assert!(report.brand_new);
        assert_eq!(
            report.written,
            [
                "BOOTSTRAP.md",
                "AGENTS.md",
                "SOUL.md",
                "TOOLS.md",
                "IDENTITY.md",
                "USER.md",
                "HEARTBEAT.md"
            ]
        );
        assert!(report.existing.is_empty());
        for file in SEED_FILES {
            assert_eq!(text(&store, file.name).await.as_deref(), Some(file.content));
        }
        assert_eq!(store.keys().len(), SEED_FILES.len(), "{:?}", store.keys());
    }

    #[tokio::test]
    async fn a_used_workspace_keeps_its_files_and_never_gets_the_ritual() {
        // GIVEN a workspace whose user already wrote USER.md
        let store = InMemoryObjectStore::named("ws");
        store.insert(&format!("{WS}USER.md"), "Ada, UTC+1").unwrap();
        // WHEN it is seeded
        let report = seed_workspace(&store, WS, SeedScope::MissingFiles)
            .await
            .unwrap();
        // THEN USER.md is untouched, the other defaults are added, and no BOOTSTRAP.md
        assert!(!report.brand_new);
        assert_eq!(report.existing, ["USER.md"]);
        assert_eq!(
            report.written,
            [
                "AGENTS.md",
                "SOUL.md",
                "TOOLS.md",
                "IDENTITY.md",
                "HEARTBEAT.md"
            ]
        );
        assert_eq!(text(&store, "USER.md").await.as_deref(), Some("Ada, UTC+1"));
        assert_eq!(text(&store, "BOOTSTRAP.md").await, None);
    }

    #[tokio::test]
    async fn a_memory_file_alone_makes_a_workspace_used() {
        for memory in ["MEMORY.md", "memory.md"] {
            let store = InMemoryObjectStore::named("ws");
            store.insert(&format!("{WS}{memory}"), "likes tea").unwrap();
            let report = seed_workspace(&store, WS, SeedScope::MissingFiles)
                .await
                .unwrap();
            assert!(!report.brand_new, "{memory}");
            assert!(!report.written.contains(&"BOOTSTRAP.md"), "{memory}");
            assert_eq!(report.written.len(), 6, "{memory}");
        }
    }

    #[tokio::test]
    async fn seeding_again_writes_nothing_and_an_emptied_ritual_stays_empty() {
        let store = InMemoryObjectStore::named("ws");
        seed_workspace(&store, WS, SeedScope::MissingFiles)
            .await
            .unwrap();
        store.insert(&format!("{WS}BOOTSTRAP.md"), "").unwrap();
        for scope in [SeedScope::MissingFiles, SeedScope::NewWorkspaceOnly] {
            let report = seed_workspace(&store, WS, scope).await.unwrap();
            assert!(report.written.is_empty(), "{scope:?}: {report:?}");
            assert_eq!(report.existing.len(), SEED_FILES.len(), "{scope:?}");
            assert_eq!(text(&store, "BOOTSTRAP.md").await.as_deref(), Some(""));
        }
    }

    #[tokio::test]
    async fn new_workspace_only_leaves_a_used_workspace_alone() {
        // GIVEN a workspace where the user removed everything but AGENTS.md
        let store = InMemoryObjectStore::named("ws");
        store.insert(&format!("{WS}AGENTS.md"), "mine").unwrap();
        // WHEN a start-up seeds it
        let report = seed_workspace(&store, WS, SeedScope::NewWorkspaceOnly)
            .await
            .unwrap();
        // THEN nothing is written back
        assert!(!report.brand_new);
        assert!(report.written.is_empty());
        assert_eq!(report.existing, ["AGENTS.md"]);
        assert_eq!(store.keys(), [format!("{WS}AGENTS.md")]);

        // AND an empty workspace is seeded in full
        let fresh = InMemoryObjectStore::named("fresh");
        let report = seed_workspace(&fresh, WS, SeedScope::NewWorkspaceOnly)
            .await
            .unwrap();
        assert_eq!(report.written.len(), SEED_FILES.len());
    }

    /// Answers every `head` with "absent", as if each file appeared right after the check.
    #[derive(Debug)]
    struct LateWriter(InMemoryObjectStore);

    #[async_trait]
    impl ObjectStore for LateWriter {
        async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
            self.0.list(prefix, max_keys).await
        }
        async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
            self.0.get(key, max_bytes).await
        }
        async fn head(&self, _key: &str) -> Result<Option<ObjectMeta>, StoreError> {
            Ok(None)
        }
        async fn put(
            &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
        ) -> Result<ObjectMeta, StoreError> {
            self.0.put(key, bytes, condition).await
        }
        async fn delete(&self, key: &str) -> Result<(), StoreError> {
            self.0.delete(key).await
        }
        fn location(&self, key: &str) -> String {
            self.0.location(key)
        }
        fn key_for_location(&self, location: &str) -> Option<String> {
            self.0.key_for_location(location)
        }
        fn identity(&self) -> String {
            self.0.identity()
        }
    }

    #[tokio::test]
    async fn a_file_created_after_the_check_is_kept_not_overwritten() {
        let inner = InMemoryObjectStore::named("ws");
        inner
            .insert(&format!("{WS}SOUL.md"), "written by someone else")
            .unwrap();
        let store = LateWriter(inner.clone());
        let report = seed_workspace(&store, WS, SeedScope::MissingFiles)
            .await
            .unwrap();
        assert_eq!(report.existing, ["SOUL.md"]);
        assert!(!report.written.contains(&"SOUL.md"));
        assert_eq!(
            text(&inner, "SOUL.md").await.as_deref(),
            Some("written by someone else")
        );
    }

    #[tokio::test]
    async fn an_invalid_prefix_is_an_error_and_writes_nothing() {
        let store = InMemoryObjectStore::named("ws");
        let result = seed_workspace(&store, "../escape", SeedScope::MissingFiles).await;
        assert!(
            matches!(result, Err(StoreError::InvalidKey { .. })),
            "{result:?}"
        );
        assert!(store.keys().is_empty());
    }

    #[tokio::test]
    async fn a_fresh_agents_prompt_has_no_missing_lines_and_carries_its_identity() {
        // GIVEN a freshly seeded workspace
        let store = InMemoryObjectStore::named("ws");
        seed_workspace(&store, WS, SeedScope::MissingFiles)
            .await
            .unwrap();
        // WHEN a main session builds its system prompt
        let prompt = prompt_for(&store).await;
        // THEN no file is reported missing and every default file is injected
        assert!(!prompt.contains("[MISSING]"), "{prompt}");
        for file in SEED_FILES {
            assert!(
                prompt.contains(&format!(
                    "## {}",
                    store.location(&format!("{WS}{}", file.name))
                )),
                "{} is not injected",
                file.name
            );
        }
        assert!(prompt.contains("If SOUL.md is present, embody its persona and tone."));
        assert!(prompt.contains(seed_text("SOUL.md").trim_end()));
    }

    #[tokio::test]
    async fn emptying_the_ritual_with_write_removes_it_from_the_prompt() {
        // GIVEN a fresh workspace whose prompt carries the ritual
        let store = InMemoryObjectStore::named("ws");
        seed_workspace(&store, WS, SeedScope::MissingFiles)
            .await
            .unwrap();
        let heading = format!("## {}", store.location(&format!("{WS}BOOTSTRAP.md")));
        let ritual_line = seed_text("BOOTSTRAP.md").lines().nth(2).unwrap();
        let before = prompt_for(&store).await;
        assert!(before.contains(&heading) && before.contains(ritual_line));

        // WHEN the agent finishes the ritual as it says: `write` BOOTSTRAP.md with ""
        let context = ToolContext {
            workspace: Workspace {
                store: Arc::new(store.clone()),
                prefix: WS.to_owned(),
            },
            skill_sources: Vec::new(),
            home_dirs: Vec::new(),
            web: None,
            session: SessionFacts::default(),
            sandbox: None,
        };
        let output = WriteTool
            .run(&json!({"path": "BOOTSTRAP.md", "content": ""}), &context)
            .await;
        assert!(!output.is_error, "{output:?}");

        // THEN the next prompt has neither the ritual nor a missing-file line for it
        let after = prompt_for(&store).await;
        assert!(!after.contains(&heading), "{after}");
        assert!(!after.contains(ritual_line));
        assert!(!after.contains("[MISSING]"));
        assert!(after.contains(seed_text("SOUL.md").trim_end()));
        // AND seeding again does not bring it back
        let report = seed_workspace(&store, WS, SeedScope::MissingFiles)
            .await
            .unwrap();
        assert!(report.written.is_empty());
        assert_eq!(prompt_for(&store).await, after);
    }
}
