//! The `write` tool: create or overwrite a file in the workspace.
//!
//! Only the workspace is writable (its `skills/` folder included, since it lies under the
//! workspace prefix); skill sources elsewhere and absolute locations outside the workspace
//! are refused by [`super::paths::resolve_write_path`].

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;
use clawless_base::object_store::PutCondition;

use super::paths::resolve_write_path;
use super::read::store_error_message;
use super::{Tool, ToolContext, ToolOutput, args};

/// Largest content `write` stores in one call, in bytes (5 MiB).
pub const MAX_WRITE_BYTES: usize = 5 * 1024 * 1024;

/// `write`: creates or overwrites a workspace file.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteTool;

#[async_trait]
impl Tool for WriteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write".to_owned(),
            description: "Create or overwrite a workspace file (parent folders are created)."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative to the workspace, or absolute inside it"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(write(input, context).await)
    }
}

async fn write(input: &Value, context: &ToolContext) -> Result<String, String> {
    let path = args::required_string(input, &["path", "file_path"])?;
    let content = args::required_string(input, &["content"])?;
    if content.len() > MAX_WRITE_BYTES {
        return Err(format!(
            "Content is {} bytes, over the {MAX_WRITE_BYTES}-byte limit for one write",
            content.len()
        ));
    }
    let resolved = resolve_write_path(context, path).map_err(|error| error.to_string())?;
    resolved
        .store
        .put(
            &resolved.key,
            content.as_bytes().to_vec(),
            PutCondition::Always,
        )
        .await
        .map_err(|error| store_error_message(path, &error))?;
    Ok(format!(
        "Successfully wrote {} bytes to {path}",
        content.len()
    ))
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::testing::InMemoryObjectStore;
    use clawless_base::object_store::ObjectStore;

    use crate::tools::fixtures::{WS, context};

    async fn run(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        WriteTool.run(&input, &context(store)).await
    }

    async fn content(store: &InMemoryObjectStore, key: &str) -> Option<String> {
        let object = store.get(key, 1 << 20).await.unwrap()?;
        Some(String::from_utf8(object.bytes).unwrap())
    }

    #[tokio::test]
    async fn write_creates_and_overwrites_workspace_files() {
        let store = InMemoryObjectStore::named("bucket");
        let first = run(
            &store,
            json!({"path": "memory/today.md", "content": "héllo"}),
        )
        .await;
        assert_eq!(
            first,
            ToolOutput::ok("Successfully wrote 6 bytes to memory/today.md")
        );
        let second = run(&store, json!({"path": "memory/today.md", "content": "bye"})).await;
        assert!(!second.is_error);
        assert_eq!(
            content(&store, &format!("{WS}memory/today.md"))
                .await
                .as_deref(),
            Some("bye")
        );
    }

    #[tokio::test]
    async fn write_reaches_the_workspace_skills_folder_but_no_other_skill_source() {
        let store = InMemoryObjectStore::named("bucket");
        let own = run(
            &store,
            json!({"path": "skills/mine/SKILL.md", "content": "x"}),
        )
        .await;
        assert!(!own.is_error);
        assert!(
            content(&store, &format!("{WS}skills/mine/SKILL.md"))
                .await
                .is_some()
        );

        for path in [
            "~/bundled/weather/SKILL.md",
            "mem://bucket/skills/bundled/weather/SKILL.md",
        ] {
            let output = run(&store, json!({"path": path, "content": "pwned"})).await;
            assert!(output.is_error, "{path:?} was writable");
        }
        assert!(
            content(&store, "skills/bundled/weather/SKILL.md")
                .await
                .is_none()
        );
    }

    #[tokio::test]
    async fn write_refuses_traversal_and_writes_nothing() {
        let store = InMemoryObjectStore::named("bucket");
        for path in [
            "../x",
            "skills/../../secret",
            "/etc/passwd",
            "%2e%2e/x",
            "mem://bucket/agents/other/workspace/x",
            "s3://other-bucket/agents/main/workspace/x",
            "",
            "dir/",
        ] {
            let output = run(&store, json!({"path": path, "content": "pwned"})).await;
            assert!(output.is_error, "{path:?} was writable");
        }
        assert!(store.keys().is_empty(), "{:?}", store.keys());
    }

    #[tokio::test]
    async fn write_refuses_oversized_content_and_missing_arguments() {
        let store = InMemoryObjectStore::named("bucket");
        let big = "a".repeat(MAX_WRITE_BYTES + 1);
        assert!(
            run(&store, json!({"path": "big", "content": big}))
                .await
                .is_error
        );
        assert!(run(&store, json!({"path": "x"})).await.is_error);
        assert!(run(&store, json!({"content": "x"})).await.is_error);
        assert!(store.keys().is_empty());
    }
}
