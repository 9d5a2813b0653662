//! The `grep` tool: lines of workspace files matching a regex (or a literal), searched
//! recursively under the ignore rules of [`super::walk`].
//!
//! Every file is an object read, so the bytes scanned are bounded: files over
//! [`MAX_FILE_SCAN_BYTES`] are skipped, and the search stops once [`MAX_SCAN_BYTES`] have been
//! read; both are said in the result. Binary files (a NUL byte near the start) are skipped
//! silently, as ripgrep does.

use std::collections::BTreeSet;

use async_trait::async_trait;
use regex::{Regex, RegexBuilder};
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;

use super::paths::resolve_search_root;
use super::walk::{
    Located, PathGlob, TreeFile, format_size, join_capped, listing_cap_notice, locate,
    output_cap_notice, walk, with_notices,
};
use super::{Tool, ToolContext, ToolOutput, args};

/// Matches returned when the model gives no `limit`.
pub const DEFAULT_LIMIT: usize = 100;

/// Longest match or context line shown, in characters.
pub const MAX_LINE_CHARS: usize = 500;

/// Total bytes one search reads (8 MiB).
pub const MAX_SCAN_BYTES: u64 = 8 * 1024 * 1024;

/// Largest file one search reads (2 MiB); bigger ones are skipped and counted.
pub const MAX_FILE_SCAN_BYTES: u64 = 2 * 1024 * 1024;

/// Most context lines before and after a match.
const MAX_CONTEXT_LINES: usize = 20;

/// Compiled-regex size limit: generous for real patterns, refuses pathological ones.
const MAX_REGEX_BYTES: usize = 2 * 1024 * 1024;

/// Files read concurrently.
const READ_BATCH: usize = 16;

/// How many bytes at the start of a file are checked for a NUL.
const BINARY_SNIFF_BYTES: usize = 8 * 1024;

/// `grep`: searches file contents.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrepTool;

#[async_trait]
impl Tool for GrepTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "grep".to_owned(),
            description: "Search file contents. By regex, or literal; prints 'path:line: text'; \
                          skips .git, node_modules, .gitignore'd and binary files."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string"},
                    "glob": {"type": "string", "description": "e.g. '*.md'"},
                    "ignoreCase": {"type": "boolean"},
                    "literal": {"type": "boolean"},
                    "context": {"type": "integer"},
                    "limit": {"type": "integer"}
                },
                "required": ["pattern"]
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(grep(input, context).await)
    }
}

/// The parsed arguments of one search.
struct Search {
    matcher: Regex,
    context_lines: usize,
    limit: usize,
}

/// What a search found and what stopped it.
#[derive(Default)]
struct Findings {
    lines: Vec<String>,
    matches: usize,
    lines_cut: bool,
    scanned: u64,
    budget_spent: bool,
    skipped_large: usize,
}

async fn grep(input: &Value, context: &ToolContext) -> Result<String, String> {
    let pattern = args::required_string(input, &["pattern"])?;
    let path = args::string(input, &["path"])?;
    let glob = args::string(input, &["glob"])?
        .filter(|glob| !glob.trim().is_empty())
        .map(PathGlob::new)
        .transpose()?;
    let ignore_case = flag(input, &["ignoreCase", "ignore_case"])?;
    let literal = flag(input, &["literal"])?;
    let context_lines = context_count(input)?;
    let limit = args::positive(input, &["limit"])?.unwrap_or(DEFAULT_LIMIT);
    if pattern.is_empty() {
        return Err("`pattern` must not be empty".to_owned());
    }
    let source = if literal {
        regex::escape(pattern)
    } else {
        pattern.to_owned()
    };
    let matcher = RegexBuilder::new(&source)
        .case_insensitive(ignore_case)
        .size_limit(MAX_REGEX_BYTES)
        .build()
        .map_err(|error| {
            format!("Invalid regex {pattern:?}: {error}. Use literal: true to search plain text")
        })?;
    let search = Search {
        matcher,
        context_lines,
        limit,
    };

    let shown = path.unwrap_or(".");
    let root = resolve_search_root(context, path).map_err(|error| error.to_string())?;
    let (candidates, listing_capped) = match locate(&root, shown).await? {
        Located::File(file) => (vec![file], false),
        Located::Dir(listing) => {
            let tree = walk(&root, listing).await;
            let files = tree
                .files
                .into_iter()
                .filter(|file| glob.as_ref().is_none_or(|glob| glob.matches(&file.path)))
                .collect();
            (files, tree.capped)
        }
    };
    let findings = scan(&root.workspace, &candidates, &search).await;
    Ok(render(findings, &search, listing_capped))
}

/// Reads `candidates` in order, in small concurrent batches, until the limit or the budget.
async fn scan(workspace: &super::Workspace, candidates: &[TreeFile], search: &Search) -> Findings {
    let mut findings = Findings::default();
    let mut pending = candidates.iter().peekable();
    while findings.matches < search.limit && !findings.budget_spent {
        let mut batch: Vec<&TreeFile> = Vec::new();
        let mut planned = findings.scanned;
        while batch.len() < READ_BATCH {
            let Some(file) = pending.peek() else { break };
            if file.size > MAX_FILE_SCAN_BYTES {
                findings.skipped_large += 1;
                pending.next();
                continue;
            }
            if planned + file.size > MAX_SCAN_BYTES {
                findings.budget_spent = true;
                break;
            }
            planned += file.size;
            batch.push(file);
            pending.next();
        }
        if batch.is_empty() {
            break;
        }
        let keys: Vec<String> = batch.iter().map(|file| file.key.clone()).collect();
        let reads = workspace.store.get_many(&keys, MAX_FILE_SCAN_BYTES).await;
        for (file, read) in batch.into_iter().zip(reads) {
            if findings.matches >= search.limit {
                break;
            }
            let object = match read {
                Ok(Some(object)) => object,
                // Vanished since the listing, grown past the cap, or unreadable: skip it,
                // as ripgrep skips a file it cannot open.
                Ok(None) => continue,
                Err(error) => {
                    tracing::debug!(key = %file.key, error = %error, "grep: skipped a file");
                    continue;
                }
            };
            findings.scanned += object.bytes.len() as u64;
            let sniff = &object.bytes[..object.bytes.len().min(BINARY_SNIFF_BYTES)];
            if sniff.contains(&0) {
                continue;
            }
            let text = String::from_utf8_lossy(&object.bytes);
            search_file(&file.path, &text, search, &mut findings);
        }
    }
    findings
}

/// Adds the matches of one file (and their context lines) to `findings`.
fn search_file(path: &str, text: &str, search: &Search, findings: &mut Findings) {
    let lines: Vec<&str> = text.lines().collect();
    let mut matched = BTreeSet::new();
    for (index, line) in lines.iter().enumerate() {
        if findings.matches >= search.limit {
            break;
        }
        if search.matcher.is_match(line) {
            matched.insert(index);
            findings.matches += 1;
        }
    }
    if matched.is_empty() {
        return;
    }
    let mut shown = BTreeSet::new();
    for &index in &matched {
        let first = index.saturating_sub(search.context_lines);
        let last = (index + search.context_lines).min(lines.len() - 1);
        shown.extend(first..=last);
    }
    for index in shown {
        let (text, cut) = clip_line(lines[index]);
        findings.lines_cut |= cut;
        let separator = if matched.contains(&index) { ':' } else { '-' };
        findings
            .lines
            .push(format!("{path}{separator}{}{separator} {text}", index + 1));
    }
}

/// A line cut to [`MAX_LINE_CHARS`] with `... [truncated]`, and whether it was cut.
fn clip_line(line: &str) -> (String, bool) {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((end, _)) => (format!("{}... [truncated]", &line[..end]), true),
        None => (line.to_owned(), false),
    }
}

fn render(findings: Findings, search: &Search, listing_capped: bool) -> String {
    let mut notices = Vec::new();
    let body = if findings.lines.is_empty() {
        "No matches found".to_owned()
    } else {
        if findings.matches >= search.limit {
            notices.push(format!(
                "{} matches limit reached. Use limit={} for more, or refine pattern",
                search.limit,
                search.limit.saturating_mul(2)
            ));
        }
        let (body, cut) = join_capped(&findings.lines);
        if cut {
            notices.push(output_cap_notice());
        }
        if findings.lines_cut {
            notices.push(format!(
                "Some lines truncated to {MAX_LINE_CHARS} chars. Use read tool to see full lines"
            ));
        }
        body
    };
    if findings.budget_spent {
        notices.push(format!(
            "Search stopped after reading {} of files (the {} budget); narrow path or glob \
             to search the rest",
            format_size(findings.scanned as usize),
            format_size(MAX_SCAN_BYTES as usize)
        ));
    }
    if findings.skipped_large > 0 {
        notices.push(format!(
            "Skipped {} file(s) over {}; use read to page through them",
            findings.skipped_large,
            format_size(MAX_FILE_SCAN_BYTES as usize)
        ));
    }
    if listing_capped {
        notices.push(listing_cap_notice());
    }
    with_notices(body, &notices)
}

/// A boolean flag: `true`/`false`, or the strings `"true"`/`"false"`; absent is false.
fn flag(input: &Value, names: &[&str]) -> Result<bool, String> {
    for name in names {
        match input.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(value)) => return Ok(*value),
            Some(Value::String(text)) if text.trim().eq_ignore_ascii_case("true") => {
                return Ok(true);
            }
            Some(Value::String(text)) if text.trim().eq_ignore_ascii_case("false") => {
                return Ok(false);
            }
            Some(_) => return Err(format!("`{name}` must be true or false")),
        }
    }
    Ok(false)
}

/// `context`: a non-negative integer, at most [`MAX_CONTEXT_LINES`].
fn context_count(input: &Value) -> Result<usize, String> {
    let parsed = match input.get("context") {
        None | Some(Value::Null) => return Ok(0),
        Some(Value::Number(number)) => number.as_u64(),
        Some(Value::String(text)) => text.trim().parse::<u64>().ok(),
        Some(_) => None,
    };
    parsed
        .map(|lines| {
            usize::try_from(lines)
                .unwrap_or(usize::MAX)
                .min(MAX_CONTEXT_LINES)
        })
        .ok_or_else(|| "`context` must be a non-negative integer".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::InMemoryObjectStore;
    use crate::tools::fixtures::{WS, context, workspace_with};

    async fn run(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        GrepTool.run(&input, &context(store)).await
    }

    #[tokio::test]
    async fn grep_prints_matches_relative_to_the_searched_folder() {
        let store = workspace_with(&[
            ("notes/a.md", "alpha\nTODO: one\nbeta\n"),
            ("notes/deep/b.md", "TODO two\n"),
            ("other.txt", "TODO three"),
        ]);
        assert_eq!(
            run(&store, json!({"pattern": "TODO", "path": "notes"})).await,
            ToolOutput::ok("a.md:2: TODO: one\ndeep/b.md:1: TODO two")
        );
        assert_eq!(
            run(
                &store,
                json!({"pattern": "todo", "ignoreCase": true, "glob": "*.txt"})
            )
            .await,
            ToolOutput::ok("other.txt:1: TODO three")
        );
        assert_eq!(
            run(&store, json!({"pattern": "TODO", "path": "notes/a.md"})).await,
            ToolOutput::ok("a.md:2: TODO: one")
        );
        assert_eq!(
            run(&store, json!({"pattern": "nothing here"})).await,
            ToolOutput::ok("No matches found")
        );
    }

    #[tokio::test]
    async fn grep_shows_merged_context_lines_and_literal_patterns() {
        let store = workspace_with(&[("f.txt", "1\n2\na.b\n4\na.b\n6\n7\n8\n")]);
        let output = run(
            &store,
            json!({"pattern": "a.b", "literal": true, "context": 1}),
        )
        .await;
        assert_eq!(
            output.text,
            "f.txt-2- 2\nf.txt:3: a.b\nf.txt-4- 4\nf.txt:5: a.b\nf.txt-6- 6"
        );
        let regex = run(&store, json!({"pattern": "^[0-9]$", "limit": 2})).await;
        assert_eq!(
            regex.text,
            "f.txt:1: 1\nf.txt:2: 2\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]"
        );
        let bad = run(&store, json!({"pattern": "("})).await;
        assert!(
            bad.is_error && bad.text.contains("literal: true"),
            "{}",
            bad.text
        );
    }

    #[tokio::test]
    async fn grep_skips_binary_ignored_and_vendored_files() {
        let store = workspace_with(&[
            (".gitignore", "secret/\n"),
            ("bin.dat", "needle\0\x01"),
            ("secret/x.txt", "needle"),
            ("node_modules/m/i.js", "needle"),
            (".git/config", "needle"),
            ("ok.txt", "needle"),
        ]);
        assert_eq!(
            run(&store, json!({"pattern": "needle"})).await,
            ToolOutput::ok("ok.txt:1: needle")
        );
    }

    #[tokio::test]
    async fn grep_cuts_long_lines_and_says_so() {
        let long = format!("needle {}", "é".repeat(600));
        let store = workspace_with(&[("long.txt", long.as_str())]);
        let output = run(&store, json!({"pattern": "needle"})).await;
        let (first, notice) = output.text.split_once("\n\n").unwrap();
        assert!(first.ends_with("... [truncated]"));
        assert_eq!(
            first.trim_start_matches("long.txt:1: ").chars().count(),
            MAX_LINE_CHARS + "... [truncated]".len()
        );
        assert_eq!(
            notice,
            "[Some lines truncated to 500 chars. Use read tool to see full lines]"
        );
    }

    #[tokio::test]
    async fn grep_stops_at_the_scan_budget_and_skips_oversized_files() {
        // GIVEN five 1.9 MiB files (8 MiB budget: four fit) and one over the per-file cap
        let chunk = "x".repeat(1_900 * 1024);
        let files: Vec<(String, String)> = (0..5)
            .map(|n| (format!("f{n}.txt"), format!("{chunk}\nneedle {n}\n")))
            .chain([(
                "big.txt".to_owned(),
                "y".repeat(MAX_FILE_SCAN_BYTES as usize + 1),
            )])
            .collect();
        let store = InMemoryObjectStore::named("bucket");
        for (name, content) in &files {
            store
                .insert(&format!("{WS}{name}"), content.as_str())
                .unwrap();
        }

        // WHEN grep searches everything
        let output = run(&store, json!({"pattern": "needle"})).await;

        // THEN the first four files are searched, the fifth is not, and both limits are said
        assert!(!output.is_error);
        for n in 0..4 {
            assert!(
                output.text.contains(&format!("f{n}.txt:")),
                "{}",
                output.text
            );
        }
        assert!(!output.text.contains("f4.txt:"), "{}", output.text);
        assert!(
            output.text.contains("(the 8.0MB budget)"),
            "{}",
            output.text
        );
        assert!(
            output.text.contains("Skipped 1 file(s) over 2.0MB"),
            "{}",
            output.text
        );
    }

    #[tokio::test]
    async fn grep_caps_output_at_50_kb() {
        let content: String = (0..2_000).map(|n| format!("needle {n:0>60}\n")).collect();
        let store = workspace_with(&[("many.txt", content.as_str())]);
        let output = run(&store, json!({"pattern": "needle", "limit": 5000})).await;
        let (body, notice) = output.text.rsplit_once("\n\n").unwrap();
        assert!(body.len() <= 50 * 1024);
        assert_eq!(notice, "[50.0KB limit reached]");
    }

    #[tokio::test]
    async fn grep_refuses_paths_outside_the_workspace() {
        let store = workspace_with(&[("a.txt", "x")]);
        store.insert("elsewhere/b.txt", "x").unwrap();
        for path in ["../elsewhere", "/etc", "mem://bucket/elsewhere"] {
            let output = run(&store, json!({"pattern": "x", "path": path})).await;
            assert!(output.is_error, "{path}");
        }
        assert_eq!(
            run(&store, json!({"pattern": "x", "path": "nope"})).await,
            ToolOutput::error("Path not found: nope")
        );
    }
}
