//! The `ls` tool: the entries of one workspace directory, dotfiles included, directories
//! marked with a trailing `/`, sorted case-insensitively. No recursion and no ignore rules
//! (that is `find`); the listing itself is [`super::walk`]'s.

use std::collections::BTreeSet;

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;

use super::paths::resolve_search_root;
use super::walk::{
    Located, join_capped, listing_cap_notice, locate, output_cap_notice, with_notices,
};
use super::{Tool, ToolContext, ToolOutput, args};

/// Entries listed when the model gives no `limit`.
pub const DEFAULT_LIMIT: usize = 500;

/// `ls`: lists a workspace directory.
#[derive(Debug, Clone, Copy, Default)]
pub struct LsTool;

#[async_trait]
impl Tool for LsTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "ls".to_owned(),
            description: "List a folder. Subfolders end in '/'.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "limit": {"type": "integer"}
                }
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(ls(input, context).await)
    }
}

async fn ls(input: &Value, context: &ToolContext) -> Result<String, String> {
    let path = args::string(input, &["path"])?;
    let limit = args::positive(input, &["limit"])?.unwrap_or(DEFAULT_LIMIT);
    let shown = path.unwrap_or(".");
    let root = resolve_search_root(context, path).map_err(|error| error.to_string())?;
    let listing = match locate(&root, shown).await? {
        Located::Dir(listing) => listing,
        Located::File(_) => return Err(format!("Not a directory: {shown}")),
    };
    let entries: BTreeSet<String> = listing
        .files
        .iter()
        .map(|file| match file.path.split_once('/') {
            Some((dir, _)) => format!("{dir}/"),
            None => file.path.clone(),
        })
        .collect();
    if entries.is_empty() {
        return Ok("(empty directory)".to_owned());
    }
    let mut entries: Vec<String> = entries.into_iter().collect();
    entries.sort_by(|a, b| a.to_lowercase().cmp(&b.to_lowercase()).then(a.cmp(b)));
    let mut notices = Vec::new();
    if entries.len() > limit {
        entries.truncate(limit);
        notices.push(format!(
            "{limit} entries limit reached. Use limit={} for more",
            limit.saturating_mul(2)
        ));
    }
    let (body, cut) = join_capped(&entries);
    if cut {
        notices.push(output_cap_notice());
    }
    if listing.capped {
        notices.push(listing_cap_notice());
    }
    Ok(with_notices(body, &notices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::InMemoryObjectStore;
    use crate::tools::fixtures::{WS, context, workspace_with};

    async fn run(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        LsTool.run(&input, &context(store)).await
    }

    fn store_with(files: &[&str]) -> InMemoryObjectStore {
        let files: Vec<(&str, &str)> = files.iter().map(|file| (*file, "x")).collect();
        workspace_with(&files)
    }

    #[tokio::test]
    async fn ls_lists_one_level_with_dirs_marked_and_case_insensitive_order() {
        let store = store_with(&[
            "b.md",
            "A.md",
            ".env",
            "src/main.rs",
            "src/lib/x.rs",
            "Docs/readme.md",
            "node_modules/p/index.js",
        ]);
        let output = run(&store, json!({})).await;
        assert_eq!(
            output,
            ToolOutput::ok(".env\nA.md\nb.md\nDocs/\nnode_modules/\nsrc/")
        );
        let nested = run(&store, json!({"path": "src"})).await;
        assert_eq!(nested, ToolOutput::ok("lib/\nmain.rs"));
        let trailing = run(&store, json!({"path": "./src/"})).await;
        assert_eq!(trailing, ToolOutput::ok("lib/\nmain.rs"));
    }

    #[tokio::test]
    async fn ls_reports_empty_missing_files_and_refused_paths() {
        let store = store_with(&["a.md"]);
        store.insert("outside/secret", "x").unwrap();
        assert_eq!(
            run(&InMemoryObjectStore::named("bucket"), json!({})).await,
            ToolOutput::ok("(empty directory)")
        );
        assert_eq!(
            run(&store, json!({"path": "nope"})).await,
            ToolOutput::error("Path not found: nope")
        );
        assert_eq!(
            run(&store, json!({"path": "a.md"})).await,
            ToolOutput::error("Not a directory: a.md")
        );
        for bad in ["..", "../outside", "/etc", "%2e%2e"] {
            let output = run(&store, json!({"path": bad})).await;
            assert!(output.is_error, "{bad}");
            assert!(output.text.starts_with("Refused path"), "{}", output.text);
        }
    }

    #[tokio::test]
    async fn a_sandbox_lists_its_own_workspace_and_the_agents_without_memory() {
        // GIVEN a sandboxed session with read-only access to the agent's workspace
        let store = store_with(&["SOUL.md", "MEMORY.md", "memory/today.md", "notes/a.md"]);
        store
            .insert(&format!("{WS}.sandboxes/s-1/mine.md"), "x")
            .unwrap();
        let mut ctx = context(&store);
        let agent = ctx.workspace.clone();
        ctx.workspace.prefix = format!("{WS}.sandboxes/s-1/");
        ctx.sandbox = Some(crate::tools::SandboxView { agent: Some(agent) });
        let ls = |input: Value| {
            let ctx = ctx.clone();
            async move { LsTool.run(&input, &ctx).await }
        };

        // THEN its own files are at the root and /workspace, the agent's at /agent, without
        // memory or the sandbox copies
        assert_eq!(ls(json!({})).await, ToolOutput::ok("mine.md"));
        assert_eq!(
            ls(json!({"path": "/workspace"})).await,
            ToolOutput::ok("mine.md")
        );
        assert_eq!(
            ls(json!({"path": "/agent"})).await,
            ToolOutput::ok("notes/\nSOUL.md")
        );
        for hidden in [
            "/agent/memory",
            "/agent/MEMORY.md",
            "/agent/memory/today.md",
        ] {
            assert!(ls(json!({"path": hidden})).await.is_error, "{hidden}");
        }
    }

    #[tokio::test]
    async fn ls_stops_at_the_limit_and_says_so() {
        let names: Vec<String> = (0..7).map(|n| format!("f{n}.txt")).collect();
        let store = store_with(&names.iter().map(String::as_str).collect::<Vec<_>>());
        let output = run(&store, json!({"limit": 3})).await;
        assert_eq!(
            output.text,
            "f0.txt\nf1.txt\nf2.txt\n\n[3 entries limit reached. Use limit=6 for more]"
        );
        let all = run(&store, json!({"path": "/workspace"})).await;
        assert!(all.is_error, "no sandbox mount outside a sandbox");
    }
}
