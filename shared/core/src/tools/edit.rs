//! The `edit` tool: replace one exact, unique occurrence of text in a workspace file.
//!
//! The write-back is conditional on the ETag that was read, so an edit never silently
//! overwrites a change made in between (another turn, the user, a sync); the model is told
//! to read the file again instead.

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;
use clawless_base::object_store::{PutCondition, StoreError};

use super::paths::resolve_write_path;
use super::read::{MAX_FILE_BYTES, decode_text, store_error_message};
use super::write::MAX_WRITE_BYTES;
use super::{Tool, ToolContext, ToolOutput, args};

/// `edit`: exact-text replacement in a workspace file.
#[derive(Debug, Clone, Copy, Default)]
pub struct EditTool;

#[async_trait]
impl Tool for EditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit".to_owned(),
            description: "Replace exact text in a workspace file. oldText must match exactly \
                          one place, whitespace included; add nearby lines to make it unique."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative to the workspace, or absolute inside it"},
                    "oldText": {"type": "string"},
                    "newText": {"type": "string"}
                },
                "required": ["path", "oldText", "newText"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(edit(input, context).await)
    }
}

async fn edit(input: &Value, context: &ToolContext) -> Result<String, String> {
    let path = args::required_string(input, &["path", "file_path"])?;
    let old_text = args::required_string(input, &["oldText", "old_string", "oldString"])?;
    let new_text = args::required_string(input, &["newText", "new_string", "newString"])?;
    if old_text.is_empty() {
        return Err("oldText must not be empty".to_owned());
    }
    let resolved = resolve_write_path(context, path).map_err(|error| error.to_string())?;
    let object = resolved
        .store
        .get(&resolved.key, MAX_FILE_BYTES)
        .await
        .map_err(|error| store_error_message(path, &error))?
        .ok_or_else(|| format!("File not found: {path}"))?;
    let etag = object.meta.etag.clone();
    let content = decode_text(object.bytes, path)?;
    let updated = replace_unique(&content, old_text, new_text, path)?;
    if updated.len() > MAX_WRITE_BYTES {
        return Err(format!(
            "The edited file would be {} bytes, over the {MAX_WRITE_BYTES}-byte limit",
            updated.len()
        ));
    }
    match resolved
        .store
        .put(
            &resolved.key,
            updated.into_bytes(),
            PutCondition::IfMatch(etag),
        )
        .await
    {
        Ok(_) => Ok(format!("Successfully replaced text in {path}.")),
        Err(StoreError::Conflict(_)) => Err(format!(
            "{path} was changed by someone else while it was being edited; nothing was written. \
             Read it again and retry the edit."
        )),
        Err(error) => Err(store_error_message(path, &error)),
    }
}

/// Replaces the single occurrence of `old` in `content`. A file with CRLF line endings also
/// matches LF-only text (models rarely reproduce `\r`), and keeps its CRLF endings.
fn replace_unique(content: &str, old: &str, new: &str, path: &str) -> Result<String, String> {
    let crlf = content.contains("\r\n");
    let (haystack, old, new) = if crlf && !old.contains('\r') {
        (
            content.replace("\r\n", "\n"),
            old.to_owned(),
            new.replace("\r\n", "\n"),
        )
    } else {
        (content.to_owned(), old.to_owned(), new.to_owned())
    };
    let positions = occurrences(&haystack, &old);
    let at = match positions.as_slice() {
        [] => {
            return Err(format!(
                "Could not find the exact text in {path}. The old text must match exactly \
                 including all whitespace and newlines."
            ));
        }
        [at] => *at,
        many => {
            return Err(format!(
                "Found {} occurrences of the text in {path}. The text must be unique. Please \
                 provide more context to make it unique.",
                many.len()
            ));
        }
    };
    if old == new {
        return Err(format!(
            "No changes made to {path}: oldText and newText are identical."
        ));
    }
    let mut updated = String::with_capacity(haystack.len() + new.len());
    updated.push_str(&haystack[..at]);
    updated.push_str(&new);
    updated.push_str(&haystack[at + old.len()..]);
    if crlf && haystack.len() != content.len() {
        updated = updated.replace('\n', "\r\n");
    }
    Ok(updated)
}

/// Start offsets of every occurrence of `needle`, overlapping ones included (`aa` occurs
/// twice in `aaa`, which is ambiguous for an edit).
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(relative) = haystack.get(from..).and_then(|rest| rest.find(needle)) {
        let at = from + relative;
        found.push(at);
        // Step one char past the match start so overlapping matches are seen.
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
    }
    found
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;
    use crate::testing::InMemoryObjectStore;
    use clawless_base::object_store::{Listing, Object, ObjectMeta, ObjectStore};

    use crate::tools::fixtures::{WS, context_over};

    async fn run(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        EditTool
            .run(
                &input,
                &context_over(Arc::new(store.clone()), String::new()),
            )
            .await
    }

    async fn content(store: &InMemoryObjectStore, key: &str) -> String {
        let object = store.get(key, 1 << 20).await.unwrap().unwrap();
        String::from_utf8(object.bytes).unwrap()
    }

    #[tokio::test]
    async fn edit_replaces_a_unique_occurrence() {
        let store = InMemoryObjectStore::named("bucket");
        store
            .insert(&format!("{WS}a.md"), "one\ntwo\nthree")
            .unwrap();
        let output = run(
            &store,
            json!({"path": "a.md", "oldText": "two", "newText": "2"}),
        )
        .await;
        assert_eq!(
            output,
            ToolOutput::ok("Successfully replaced text in a.md.")
        );
        assert_eq!(content(&store, &format!("{WS}a.md")).await, "one\n2\nthree");
    }

    #[tokio::test]
    async fn edit_accepts_old_string_and_new_string_aliases() {
        let store = InMemoryObjectStore::named("bucket");
        store.insert(&format!("{WS}a.md"), "x = 1").unwrap();
        let output = run(
            &store,
            json!({"file_path": "a.md", "old_string": "1", "new_string": "2"}),
        )
        .await;
        assert!(!output.is_error, "{}", output.text);
        assert_eq!(content(&store, &format!("{WS}a.md")).await, "x = 2");
    }

    #[tokio::test]
    async fn edit_refuses_missing_and_ambiguous_text() {
        let store = InMemoryObjectStore::named("bucket");
        store.insert(&format!("{WS}a.md"), "ab ab aaa").unwrap();

        let missing = run(
            &store,
            json!({"path": "a.md", "oldText": "zz", "newText": "y"}),
        )
        .await;
        assert!(missing.is_error);
        assert!(
            missing
                .text
                .starts_with("Could not find the exact text in a.md")
        );

        let twice = run(
            &store,
            json!({"path": "a.md", "oldText": "ab", "newText": "y"}),
        )
        .await;
        assert!(twice.is_error);
        assert!(
            twice.text.starts_with("Found 2 occurrences"),
            "{}",
            twice.text
        );
        assert!(twice.text.contains("more context"));

        // overlapping occurrences count too
        let overlapping = run(
            &store,
            json!({"path": "a.md", "oldText": "aa", "newText": "y"}),
        )
        .await;
        assert!(
            overlapping.text.starts_with("Found 2 occurrences"),
            "{}",
            overlapping.text
        );

        assert_eq!(content(&store, &format!("{WS}a.md")).await, "ab ab aaa");
    }

    #[tokio::test]
    async fn edit_keeps_crlf_line_endings() {
        let store = InMemoryObjectStore::named("bucket");
        store.insert(&format!("{WS}w.txt"), "a\r\nb\r\nc").unwrap();
        let output = run(
            &store,
            json!({"path": "w.txt", "oldText": "a\nb", "newText": "a\nB"}),
        )
        .await;
        assert!(!output.is_error, "{}", output.text);
        assert_eq!(content(&store, &format!("{WS}w.txt")).await, "a\r\nB\r\nc");
    }

    #[tokio::test]
    async fn edit_errors_on_missing_files_identical_text_and_traversal() {
        let store = InMemoryObjectStore::named("bucket");
        store.insert(&format!("{WS}a.md"), "x").unwrap();
        store.insert("secret", "x").unwrap();
        assert_eq!(
            run(
                &store,
                json!({"path": "b.md", "oldText": "x", "newText": "y"})
            )
            .await,
            ToolOutput::error("File not found: b.md")
        );
        assert!(
            run(
                &store,
                json!({"path": "a.md", "oldText": "x", "newText": "x"})
            )
            .await
            .is_error
        );
        assert!(
            run(
                &store,
                json!({"path": "a.md", "oldText": "", "newText": "y"})
            )
            .await
            .is_error
        );
        for path in ["../../../secret", "mem://bucket/secret", "/etc/passwd"] {
            let output = run(
                &store,
                json!({"path": path, "oldText": "x", "newText": "y"}),
            )
            .await;
            assert!(output.is_error, "{path:?}");
        }
        assert_eq!(content(&store, "secret").await, "x");
    }

    /// A store where someone else rewrites the object right after our read.
    #[derive(Debug)]
    struct RacingStore {
        inner: InMemoryObjectStore,
        raced: AtomicBool,
    }

    #[async_trait]
    impl ObjectStore for RacingStore {
        async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
            self.inner.list(prefix, max_keys).await
        }
        async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
            let object = self.inner.get(key, max_bytes).await;
            if !self.raced.swap(true, Ordering::SeqCst) {
                self.inner.insert(key, "changed elsewhere: two").unwrap();
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
    async fn edit_detects_a_concurrent_change_and_writes_nothing() {
        // GIVEN a file that changes between the edit's read and its write
        let inner = InMemoryObjectStore::named("bucket");
        inner.insert(&format!("{WS}a.md"), "one two").unwrap();
        let racing = Arc::new(RacingStore {
            inner: inner.clone(),
            raced: AtomicBool::new(false),
        });

        // WHEN the edit runs
        let output = EditTool
            .run(
                &json!({"path": "a.md", "oldText": "one", "newText": "1"}),
                &context_over(racing, String::new()),
            )
            .await;

        // THEN it reports the conflict and the other writer's content survives
        assert!(output.is_error);
        assert!(
            output.text.contains("changed by someone else"),
            "{}",
            output.text
        );
        assert_eq!(
            content(&inner, &format!("{WS}a.md")).await,
            "changed elsewhere: two"
        );
    }

    #[test]
    fn occurrences_handles_multibyte_text() {
        assert_eq!(occurrences("ééé", "éé"), vec![0, 2]);
        assert_eq!(occurrences("abc", "d"), Vec::<usize>::new());
    }
}
