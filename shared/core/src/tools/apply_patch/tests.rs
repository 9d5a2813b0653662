//! `apply_patch` over an in-memory workspace: the spec's vectors 17 and 18, moves, refused
//! paths, all-or-nothing planning, and a write conflict that leaves a patch applied in part.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use serde_json::json;

use super::*;
use crate::testing::InMemoryObjectStore;
use crate::tools::fixtures::{WS, context, context_over, workspace_with};
use clawless_base::object_store::{Listing, Object, ObjectMeta, ObjectStore};

async fn run(store: &InMemoryObjectStore, patch: &str) -> ToolOutput {
    ApplyPatchTool
        .run(&json!({ "input": patch }), &context(store))
        .await
}

async fn content(store: &dyn ObjectStore, path: &str) -> Option<String> {
    let object = store.get(&format!("{WS}{path}"), 1 << 20).await.unwrap()?;
    Some(String::from_utf8(object.bytes).unwrap())
}

#[tokio::test]
async fn a_patch_adds_updates_moves_and_deletes_files() {
    // GIVEN a workspace with three files
    let store = workspace_with(&[
        ("src/app.py", "import os\n\ndef main():\n    print('hi')\n"),
        ("old.txt", "bye\n"),
        ("notes/a.md", "# A\nbody\n"),
    ]);

    // WHEN one patch touches all of them and adds a fourth
    let output = run(
        &store,
        "*** Begin Patch\n\
         *** Add File: docs/new.md\n+# New\n+text\n\
         *** Update File: src/app.py\n@@ def main():\n-    print('hi')\n+    print('hello')\n\
         *** Delete File: old.txt\n\
         *** Update File: notes/a.md\n*** Move to: notes/b.md\n@@\n # A\n-body\n+moved body\n\
         *** End Patch",
    )
    .await;

    // THEN the result lists A, M, D lines and the workspace holds the new state
    assert_eq!(
        output,
        ToolOutput::ok(
            "Success. Updated the following files:\nA docs/new.md\nM src/app.py\nM notes/b.md\nD old.txt"
        )
    );
    assert_eq!(
        content(&store, "docs/new.md").await.as_deref(),
        Some("# New\ntext\n")
    );
    assert_eq!(
        content(&store, "src/app.py").await.as_deref(),
        Some("import os\n\ndef main():\n    print('hello')\n")
    );
    assert_eq!(content(&store, "old.txt").await, None);
    assert_eq!(content(&store, "notes/a.md").await, None);
    assert_eq!(
        content(&store, "notes/b.md").await.as_deref(),
        Some("# A\nmoved body\n")
    );
}

#[tokio::test]
async fn vector_17_a_patch_without_its_end_marker_is_refused() {
    let store = workspace_with(&[]);
    let output = run(&store, "*** Begin Patch\n*** Add File: a.md\n+x\n").await;
    assert_eq!(
        output,
        ToolOutput::error("The last line of the patch must be '*** End Patch'")
    );
    assert_eq!(content(&store, "a.md").await, None);
}

#[tokio::test]
async fn vector_18_an_en_dash_in_the_file_matches_a_hyphen_in_the_patch() {
    let store = workspace_with(&[("plan.md", "Phase 1 \u{2013} design\nPhase 2\n")]);
    let output = run(
        &store,
        "*** Begin Patch\n*** Update File: plan.md\n-Phase 1 - design\n+Phase 1 - done\n*** End Patch",
    )
    .await;
    assert!(!output.is_error, "{}", output.text);
    assert_eq!(
        content(&store, "plan.md").await.as_deref(),
        Some("Phase 1 - done\nPhase 2\n")
    );
}

#[tokio::test]
async fn a_patch_in_a_heredoc_with_an_end_of_file_chunk_applies() {
    let store = workspace_with(&[("a.txt", "x\ny\nx\n")]);
    let output = run(
        &store,
        "<<'EOF'\n*** Begin Patch\n*** Update File: a.txt\n@@\n-x\n+z\n*** End of File\n*** End Patch\nEOF",
    )
    .await;
    assert!(!output.is_error, "{}", output.text);
    assert_eq!(content(&store, "a.txt").await.as_deref(), Some("x\ny\nz\n"));
}

#[tokio::test]
async fn a_hunk_that_does_not_apply_changes_no_file_at_all() {
    // GIVEN three files, the third of which does not hold the patch's old lines
    let store = workspace_with(&[("a.md", "a\n"), ("b.md", "b\n"), ("c.md", "c\n")]);

    // WHEN the patch updates all three
    let output = run(
        &store,
        "*** Begin Patch\n\
         *** Update File: a.md\n-a\n+A\n\
         *** Update File: b.md\n-b\n+B\n\
         *** Update File: c.md\n-nope\n+C\n\
         *** End Patch",
    )
    .await;

    // THEN it fails naming the lines, and the first two files are untouched too
    assert!(output.is_error);
    assert!(
        output
            .text
            .starts_with("Failed to find expected lines in c.md:\nnope\n"),
        "{}",
        output.text
    );
    assert!(
        output.text.contains("No file was changed"),
        "{}",
        output.text
    );
    assert_eq!(content(&store, "a.md").await.as_deref(), Some("a\n"));
    assert_eq!(content(&store, "b.md").await.as_deref(), Some("b\n"));
}

#[tokio::test]
async fn missing_files_and_input_get_the_spec_errors() {
    let store = workspace_with(&[]);
    assert_eq!(
        ApplyPatchTool.run(&json!({}), &context(&store)).await,
        ToolOutput::error("Provide a patch input.")
    );
    let missing = run(
        &store,
        "*** Begin Patch\n*** Update File: gone.md\n-a\n+b\n*** End Patch",
    )
    .await;
    assert!(
        missing
            .text
            .starts_with("Failed to read file to update gone.md: file not found"),
        "{}",
        missing.text
    );
    let context_missing = run(
        &store,
        "*** Begin Patch\n*** Add File: x.md\n+a\n*** Update File: x.md\n@@ zzz\n-a\n+b\n*** End Patch",
    )
    .await;
    assert!(
        context_missing
            .text
            .starts_with("Failed to find context 'zzz' in x.md"),
        "{}",
        context_missing.text
    );
    assert_eq!(content(&store, "x.md").await, None);
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused_before_anything_is_written() {
    let store = workspace_with(&[("a.md", "a\n")]);
    store.insert("agents/other/secret.md", "s\n").unwrap();
    for target in [
        "../../other/secret.md",
        "/etc/passwd",
        "mem://bucket/agents/other/secret.md",
        "%2e%2e/x",
    ] {
        let add = run(
            &store,
            &format!("*** Begin Patch\n*** Add File: ok.md\n+x\n*** Add File: {target}\n+x\n*** End Patch"),
        )
        .await;
        assert!(add.is_error, "{target}");
        assert!(add.text.starts_with("Refused path"), "{}", add.text);
        let moved = run(
            &store,
            &format!(
                "*** Begin Patch\n*** Update File: a.md\n*** Move to: {target}\n-a\n+b\n*** End Patch"
            ),
        )
        .await;
        assert!(moved.is_error, "{target}");
    }
    assert_eq!(content(&store, "ok.md").await, None);
    assert_eq!(content(&store, "a.md").await.as_deref(), Some("a\n"));
    let secret = store
        .get("agents/other/secret.md", 1024)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(secret.bytes, b"s\n");
}

/// A store where someone else rewrites `raced_key` right after the patch reads it.
#[derive(Debug)]
struct RacingStore {
    inner: InMemoryObjectStore,
    raced_key: String,
    raced: AtomicBool,
}

#[async_trait]
impl ObjectStore for RacingStore {
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        self.inner.list(prefix, max_keys).await
    }
    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        let object = self.inner.get(key, max_bytes).await;
        if key == self.raced_key && !self.raced.swap(true, Ordering::SeqCst) {
            self.inner.insert(key, "someone else's text\n").unwrap();
        }
        object
    }
    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        self.inner.head(key).await
    }
    async fn put(
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        self.inner.put(key, bytes, condition).await
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }
    fn location(&self, key: &str) -> String {
        self.inner.location(key)
    }
    fn key_for_location(&self, location: &str) -> Option<String> {
        self.inner.key_for_location(location)
    }
    fn identity(&self) -> String {
        self.inner.identity()
    }
}

#[tokio::test]
async fn a_concurrent_change_fails_that_file_and_the_result_says_what_was_written() {
    // GIVEN three files, the second of which someone else rewrites after the patch reads it
    let inner = workspace_with(&[("a.md", "a\n"), ("b.md", "b\n"), ("c.md", "c\n")]);
    let racing = Arc::new(RacingStore {
        inner: inner.clone(),
        raced_key: format!("{WS}b.md"),
        raced: AtomicBool::new(false),
    });

    // WHEN one patch updates all three
    let output = ApplyPatchTool
        .run(
            &json!({"input": "*** Begin Patch\n\
                *** Update File: a.md\n-a\n+A\n\
                *** Update File: b.md\n-b\n+B\n\
                *** Delete File: c.md\n\
                *** End Patch"}),
            &context_over(racing, String::new()),
        )
        .await;

    // THEN the first file is written, the second fails with the reason, the third is left
    assert!(output.is_error);
    assert_eq!(
        output.text,
        "b.md was changed by someone else while the patch was being applied, so it was not \
         written.\nThe patch was applied in part (nothing was rolled back). Written:\nM a.md\n\
         Failed:\nM b.md\nNot written:\nD c.md\n\
         Read the files that were not written and send a patch for them alone."
    );
    assert_eq!(content(&inner, "a.md").await.as_deref(), Some("A\n"));
    assert_eq!(
        content(&inner, "b.md").await.as_deref(),
        Some("someone else's text\n")
    );
    assert_eq!(content(&inner, "c.md").await.as_deref(), Some("c\n"));
}

#[tokio::test]
async fn adding_a_file_that_appears_meanwhile_is_a_conflict_not_an_overwrite() {
    // GIVEN a file that does not exist when the patch reads it, then appears
    let inner = workspace_with(&[]);
    let racing = Arc::new(RacingStore {
        inner: inner.clone(),
        raced_key: format!("{WS}new.md"),
        raced: AtomicBool::new(false),
    });
    let output = ApplyPatchTool
        .run(
            &json!({"input": "*** Begin Patch\n*** Add File: new.md\n+mine\n*** End Patch"}),
            &context_over(racing, String::new()),
        )
        .await;
    assert!(output.is_error);
    assert!(
        output.text.contains("No file was changed."),
        "{}",
        output.text
    );
    assert_eq!(
        content(&inner, "new.md").await.as_deref(),
        Some("someone else's text\n")
    );
}
