//! The `find` tool: workspace files and folders whose name (or, for a pattern with `/`,
//! whose path) matches a glob, searched recursively under the ignore rules of
//! [`super::walk`].

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;

use super::paths::resolve_search_root;
use super::walk::{
    Located, PathGlob, join_capped, listing_cap_notice, locate, output_cap_notice, walk,
    with_notices,
};
use super::{Tool, ToolContext, ToolOutput, args};

/// Results returned when the model gives no `limit`.
pub const DEFAULT_LIMIT: usize = 1_000;

/// `find`: files and folders by glob.
#[derive(Debug, Clone, Copy, Default)]
pub struct FindTool;

#[async_trait]
impl Tool for FindTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "find".to_owned(),
            description: "Find files by glob. Folders too; '*.md' or 'src/**/*.rs'; skips .git, \
                          node_modules and .gitignore'd paths."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string"},
                    "limit": {"type": "integer"}
                },
                "required": ["pattern"]
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(find(input, context).await)
    }
}

async fn find(input: &Value, context: &ToolContext) -> Result<String, String> {
    let pattern = args::required_string(input, &["pattern", "glob"])?;
    let path = args::string(input, &["path"])?;
    let limit = args::positive(input, &["limit"])?.unwrap_or(DEFAULT_LIMIT);
    if pattern.trim().is_empty() {
        return Err("`pattern` must not be empty".to_owned());
    }
    let glob = PathGlob::new(pattern)?;
    let shown = path.unwrap_or(".");
    let root = resolve_search_root(context, path).map_err(|error| error.to_string())?;
    let listing = match locate(&root, shown).await? {
        Located::Dir(listing) => listing,
        Located::File(_) => return Err(format!("Not a directory: {shown}")),
    };
    let tree = walk(&root, listing).await;
    let mut found: Vec<String> = tree
        .dirs
        .iter()
        .filter(|dir| glob.matches(dir))
        .map(|dir| format!("{dir}/"))
        .chain(
            tree.files
                .iter()
                .filter(|file| glob.matches(&file.path))
                .map(|file| file.path.clone()),
        )
        .collect();
    found.sort();
    let mut notices = Vec::new();
    if tree.capped {
        notices.push(listing_cap_notice());
    }
    if found.is_empty() {
        return Ok(with_notices(
            "No files found matching pattern".to_owned(),
            &notices,
        ));
    }
    let mut shown_notices = Vec::new();
    if found.len() > limit {
        found.truncate(limit);
        shown_notices.push(format!(
            "{limit} results limit reached. Use limit={} for more, or refine pattern",
            limit.saturating_mul(2)
        ));
    }
    let (body, cut) = join_capped(&found);
    if cut {
        shown_notices.push(output_cap_notice());
    }
    shown_notices.extend(notices);
    Ok(with_notices(body, &shown_notices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::InMemoryObjectStore;
    use crate::tools::fixtures::{WS, context, workspace_with};

    async fn run(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        FindTool.run(&input, &context(store)).await
    }

    #[tokio::test]
    async fn find_matches_names_at_any_depth_and_honours_gitignore() {
        // GIVEN a tree with ignored folders, a root and a nested .gitignore
        let store = workspace_with(&[
            (".gitignore", "*.log\nbuild/\n!keep.log\n"),
            ("a.md", ""),
            ("docs/b.md", ""),
            ("docs/.gitignore", "draft.md\n"),
            ("docs/draft.md", ""),
            ("docs/notes.log", ""),
            ("docs/keep.log", ""),
            ("build/out.md", ""),
            (".git/HEAD.md", ""),
            ("node_modules/p/readme.md", ""),
            ("src/node_modules/q/readme.md", ""),
            (".sandboxes/g-1/copy.md", ""),
        ]);

        // WHEN find looks for markdown and logs
        let markdown = run(&store, json!({"pattern": "*.md"})).await;
        let logs = run(&store, json!({"pattern": "*.log"})).await;

        // THEN ignored, skipped and sandbox paths are left out
        assert_eq!(markdown, ToolOutput::ok("a.md\ndocs/b.md"));
        assert_eq!(logs, ToolOutput::ok("docs/keep.log"));
    }

    #[tokio::test]
    async fn find_lists_folders_with_a_slash_and_paths_relative_to_the_searched_folder() {
        let store = workspace_with(&[
            ("src/lib/a.rs", ""),
            ("src/main.rs", ""),
            ("src/lib/tests/t.rs", ""),
        ]);
        assert_eq!(
            run(&store, json!({"pattern": "lib*"})).await,
            ToolOutput::ok("src/lib/")
        );
        assert_eq!(
            run(&store, json!({"pattern": "**/*.rs", "path": "src"})).await,
            ToolOutput::ok("lib/a.rs\nlib/tests/t.rs\nmain.rs")
        );
        assert_eq!(
            run(&store, json!({"pattern": "lib/*.rs", "path": "src"})).await,
            ToolOutput::ok("lib/a.rs")
        );
        // the ignore file above the searched folder still applies
        store
            .insert(&format!("{WS}.gitignore"), "tests/\n")
            .unwrap();
        assert_eq!(
            run(&store, json!({"pattern": "*.rs", "path": "src/lib"})).await,
            ToolOutput::ok("a.rs")
        );
    }

    #[tokio::test]
    async fn find_reports_no_match_limits_and_bad_input() {
        let store = workspace_with(&[("a.txt", ""), ("b.txt", ""), ("c.txt", "")]);
        assert_eq!(
            run(&store, json!({"pattern": "*.md"})).await,
            ToolOutput::ok("No files found matching pattern")
        );
        assert_eq!(
            run(&store, json!({"pattern": "*.txt", "limit": 2}))
                .await
                .text,
            "a.txt\nb.txt\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
        );
        assert_eq!(
            run(&store, json!({"pattern": "*", "path": "missing"})).await,
            ToolOutput::error("Path not found: missing")
        );
        assert!(run(&store, json!({"pattern": "{a"})).await.is_error);
        assert!(run(&store, json!({})).await.is_error);
        assert!(
            run(&store, json!({"pattern": "*", "path": "../x"}))
                .await
                .is_error
        );
    }
}
