//! The pre-compaction memory flush: a silent model turn, before an automatic compaction
//! (once per compaction cycle), that may save durable notes. Its prompt, its extra system
//! prompt, and [`MemoryFlushWrite`], the only writing tool it gets: it appends to the day's
//! note `memory/YYYY-MM-DD.md` in the workspace and refuses every other path. Its output
//! never reaches the chat; `NO_REPLY` is the usual answer.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tools::paths::resolve_workspace_path;
use crate::tools::{Tool, ToolContext, ToolOutput};
use clawless_base::model::ToolSpec;
use clawless_base::object_store::PutCondition;

/// Most bytes one flush write may append.
pub const MAX_FLUSH_APPEND_BYTES: usize = 16 * 1024;

/// Most bytes a day's note may grow to through flushes.
pub const MAX_NOTE_BYTES: u64 = 512 * 1024;

/// The day's note the flush may append to.
pub fn note_path(date: &str) -> String {
    format!("memory/{date}.md")
}

/// The flush's user prompt for `date` (in the user's time zone), with the current-time line.
pub fn flush_prompt(date: &str, current_time_line: &str) -> String {
    let path = note_path(date);
    format!(
        "Pre-compaction memory flush. Store durable memories only in {path} (create memory/ \
         if needed). Treat workspace bootstrap/reference files such as MEMORY.md, SOUL.md, \
         TOOLS.md, and AGENTS.md as read-only during this flush; never overwrite, replace, or \
         edit them. If {path} already exists, APPEND new content only and do not overwrite \
         existing entries. Do NOT create timestamped variant files; always use the canonical \
         {path} filename. If nothing to store, reply with NO_REPLY.\n{current_time_line}"
    )
}

/// Added to the system prompt of the flush turn.
pub fn flush_system_addendum(date: &str) -> String {
    let path = note_path(date);
    format!(
        "\n\n## Memory flush\nPre-compaction memory flush turn. The session is near \
         auto-compaction; capture durable memories to disk. Write only to {path}, appending; \
         every other file is read-only now. Nothing you say in this turn reaches the user. You \
         may reply, but usually NO_REPLY is correct."
    )
}

/// True when a reply is the silent token (`NO_REPLY`, any case, surrounded by white space
/// only); `Done. NO_REPLY` is not silent.
pub fn is_silent_reply(text: &str) -> bool {
    text.trim().eq_ignore_ascii_case("NO_REPLY")
}

/// `write` during a memory flush: appends to `memory/<date>.md` only.
#[derive(Debug, Clone)]
pub struct MemoryFlushWrite {
    date: String,
}

impl MemoryFlushWrite {
    /// The tool for a flush on `date` (`YYYY-MM-DD` in the user's time zone).
    pub fn new(date: impl Into<String>) -> Self {
        Self { date: date.into() }
    }

    fn refusal(&self) -> String {
        let path = note_path(&self.date);
        format!("Memory flush writes are restricted to {path}; use that path only.")
    }
}

#[async_trait]
impl Tool for MemoryFlushWrite {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write".to_owned(),
            description: format!(
                "Append durable notes to {} (the only file writable now).",
                note_path(&self.date)
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": note_path(&self.date)},
                    "content": {"type": "string", "description": "Text to append."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        let path = input
            .get("path")
            .or_else(|| input.get("file_path"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let normalized = path.trim().trim_start_matches("./");
        if normalized != note_path(&self.date) {
            return ToolOutput::error(self.refusal());
        }
        let Some(content) = input.get("content").and_then(Value::as_str) else {
            return ToolOutput::error("Missing required parameter: content");
        };
        if content.len() > MAX_FLUSH_APPEND_BYTES {
            return ToolOutput::error(format!(
                "Content is {} bytes, over the {MAX_FLUSH_APPEND_BYTES}-byte limit of a flush",
                content.len()
            ));
        }
        let resolved = match resolve_workspace_path(&context.workspace, normalized) {
            Ok(resolved) => resolved,
            Err(error) => return ToolOutput::error(error.to_string()),
        };
        // Append with a conditional put, so a concurrent writer is never overwritten.
        for _ in 0..3 {
            let existing = match resolved.store.get(&resolved.key, MAX_NOTE_BYTES).await {
                Ok(existing) => existing,
                Err(error) => return ToolOutput::error(format!("Cannot read {path}: {error}")),
            };
            let (mut bytes, condition) = match existing {
                Some(object) => (object.bytes, PutCondition::IfMatch(object.meta.etag)),
                None => (Vec::new(), PutCondition::IfAbsent),
            };
            if !bytes.is_empty() && !bytes.ends_with(b"\n") {
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(content.as_bytes());
            if !content.ends_with('\n') {
                bytes.push(b'\n');
            }
            match resolved.store.put(&resolved.key, bytes, condition).await {
                Ok(_) => {
                    return ToolOutput::ok(format!(
                        "Appended content to {}.",
                        note_path(&self.date)
                    ));
                }
                Err(clawless_base::object_store::StoreError::Conflict { .. }) => continue,
                Err(error) => return ToolOutput::error(format!("Cannot write {path}: {error}")),
            }
        }
        ToolOutput::error(format!("{path} kept changing; nothing appended"))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::testing::InMemoryObjectStore;
    use crate::tools::{SessionFacts, Workspace};
    use clawless_base::object_store::ObjectStore;

    fn context(store: &InMemoryObjectStore) -> ToolContext {
        ToolContext {
            workspace: Workspace {
                store: Arc::new(store.clone()),
                prefix: "ws/".to_owned(),
            },
            skill_sources: Vec::new(),
            home_dirs: Vec::new(),
            web: None,
            session: SessionFacts::default(),
            sandbox: None,
        }
    }

    async fn note(store: &InMemoryObjectStore) -> String {
        let object = store.get("ws/memory/2026-04-13.md", 1 << 20).await.unwrap();
        String::from_utf8(object.unwrap().bytes).unwrap()
    }

    #[tokio::test]
    async fn the_flush_appends_to_the_days_note_only() {
        let store = InMemoryObjectStore::named("bucket");
        let tool = MemoryFlushWrite::new("2026-04-13");
        let ctx = context(&store);
        let first = tool
            .run(
                &json!({"path": "memory/2026-04-13.md", "content": "- likes tea"}),
                &ctx,
            )
            .await;
        assert!(!first.is_error, "{}", first.text);
        assert_eq!(first.text, "Appended content to memory/2026-04-13.md.");
        tool.run(
            &json!({"path": "./memory/2026-04-13.md", "content": "- lives in Lyon"}),
            &ctx,
        )
        .await;
        assert_eq!(note(&store).await, "- likes tea\n- lives in Lyon\n");
    }

    #[tokio::test]
    async fn every_other_path_is_refused() {
        let store = InMemoryObjectStore::named("bucket");
        let tool = MemoryFlushWrite::new("2026-04-13");
        for path in [
            "MEMORY.md",
            "SOUL.md",
            "memory/2026-04-12.md",
            "memory/2026-04-13-1200.md",
            "../memory/2026-04-13.md",
            "/etc/passwd",
            "memory/../SOUL.md",
        ] {
            let output = tool
                .run(&json!({"path": path, "content": "x"}), &context(&store))
                .await;
            assert!(output.is_error, "{path} must be refused");
            assert_eq!(
                output.text,
                "Memory flush writes are restricted to memory/2026-04-13.md; use that path only."
            );
        }
        assert!(
            store.list("", 10).await.unwrap().objects.is_empty(),
            "nothing written"
        );
    }

    #[test]
    fn only_a_bare_no_reply_is_silent() {
        assert!(is_silent_reply("NO_REPLY"));
        assert!(is_silent_reply("  no_reply\n"));
        assert!(!is_silent_reply("Done. NO_REPLY"));
    }

    #[test]
    fn the_prompt_names_the_days_note_and_the_time() {
        let prompt = flush_prompt("2026-04-13", "Current time: x");
        assert!(prompt.starts_with("Pre-compaction memory flush."));
        assert!(prompt.contains("only in memory/2026-04-13.md"));
        assert!(prompt.ends_with("\nCurrent time: x"));
    }
}
