//! The memory tools: `memory_search` ranks chunks of the agent's memory files lexically
//! (BM25 over lowercase word tokens) and `memory_get` reads one of them by line range.
//!
//! Memory files are `MEMORY.md` (or `memory.md`) at the workspace root and Markdown files
//! under `memory/`. Nothing else in the workspace is reachable through these tools, and the
//! search reads a bounded number of bounded files, so a large workspace cannot make a turn slow.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;
use clawless_base::object_store::ObjectStore;

use super::paths::resolve_workspace_path;
use super::read::{decode_text, line_window, store_error_message};
use super::{Tool, ToolContext, ToolOutput, args};

/// Results `memory_search` returns when the model does not say.
pub const DEFAULT_MAX_RESULTS: usize = 6;
/// Results `memory_search` returns at most.
pub const MAX_RESULTS_CAP: usize = 50;
/// Memory files searched at most.
pub const MAX_SEARCH_FILES: usize = 500;
/// Largest memory file searched; bigger ones are skipped.
pub const MAX_SEARCH_FILE_BYTES: u64 = 1024 * 1024;
/// Bytes of memory searched in total; files past this budget are skipped.
pub const MAX_SEARCH_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
/// Longest snippet returned per result, in chars.
pub const SNIPPET_MAX_CHARS: usize = 700;
/// Lines per chunk at most; longer paragraphs are split into windows of this size.
pub const CHUNK_MAX_LINES: usize = 20;

const ROOT_FILES: [&str; 2] = ["MEMORY.md", "memory.md"];
const MEMORY_DIR: &str = "memory/";

/// True for a workspace-relative path the memory tools may open.
pub fn is_memory_path(relative: &str) -> bool {
    ROOT_FILES.contains(&relative)
        || relative
            .strip_prefix(MEMORY_DIR)
            .is_some_and(|rest| !rest.is_empty() && rest.ends_with(".md"))
}

/// `memory_get`: reads a memory file by line range.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryGetTool;

#[async_trait]
impl Tool for MemoryGetTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_get".to_owned(),
            description: "Read lines of MEMORY.md or memory/*.md, after memory_search.".to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "from": {"type": "integer", "minimum": 1, "description": "First line (1-based)"},
                    "lines": {"type": "integer", "minimum": 1}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(memory_get(input, context).await)
    }
}

async fn memory_get(input: &Value, context: &ToolContext) -> Result<String, String> {
    let path = args::required_string(input, &["path"])?;
    let from = args::positive(input, &["from"])?;
    let lines = args::positive(input, &["lines"])?;
    let resolved =
        resolve_workspace_path(&context.workspace, path).map_err(|error| error.to_string())?;
    let relative = resolved.workspace_relative.unwrap_or_default();
    if !is_memory_path(&relative) {
        return Err(format!(
            "memory_get only reads MEMORY.md and memory/*.md; {path:?} is not a memory file"
        ));
    }
    let object = resolved
        .store
        .get(&resolved.key, super::read::MAX_FILE_BYTES)
        .await
        .map_err(|error| store_error_message(path, &error))?;
    // A memory file that does not exist yet reads as empty, as in OpenClaw: the model
    // should write it rather than treat this as a failure.
    let Some(object) = object else {
        return Ok(json!({"path": relative, "text": ""}).to_string());
    };
    let content = decode_text(object.bytes, path)?;
    let window = line_window(&content, from, lines)?;
    let mut result = json!({
        "path": relative,
        "from": window.first_line,
        "to": window.last_line,
        "totalLines": window.total_lines,
        "text": window.text,
    });
    if window.cut.is_some() {
        result["truncated"] = Value::Bool(true);
        if let Some(next) = window.next_offset() {
            result["nextFrom"] = json!(next);
        }
    }
    Ok(result.to_string())
}

/// `memory_search`: lexical search over the memory files.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemorySearchTool;

#[async_trait]
impl Tool for MemorySearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "memory_search".to_owned(),
            description: "Search MEMORY.md and memory/*.md (past work, decisions, people, \
                          preferences, todos); returns snippets with path and lines."
                .to_owned(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "maxResults": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS_CAP, "description": "Default 6"}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(memory_search(input, context).await)
    }
}

/// One ranked chunk of a memory file.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryHit {
    /// Workspace-relative path (`MEMORY.md`, `memory/2025-01-02.md`).
    pub path: String,
    /// First line of the chunk, 1-based.
    pub start_line: usize,
    /// Last line of the chunk, 1-based.
    pub end_line: usize,
    /// BM25 score, rounded to 4 decimals.
    pub score: f64,
    /// The chunk's text, at most [`SNIPPET_MAX_CHARS`] chars.
    pub snippet: String,
}

async fn memory_search(input: &Value, context: &ToolContext) -> Result<String, String> {
    let query = args::required_string(input, &["query"])?;
    let max_results = args::positive(input, &["maxResults", "max_results"])?
        .unwrap_or(DEFAULT_MAX_RESULTS)
        .min(MAX_RESULTS_CAP);
    if tokenize(query).is_empty() {
        return Err("query must contain at least one word".to_owned());
    }
    let (files, skipped) = load_memory_files(context).await?;
    let hits = rank(query, &files, max_results);
    let mut result = json!({ "results": hits });
    if skipped > 0 {
        result["skippedFiles"] = json!(skipped);
    }
    Ok(result.to_string())
}

/// Reads the memory files within the search bounds: `(files as (relative path, text), skipped)`.
async fn load_memory_files(
    context: &ToolContext,
) -> Result<(Vec<(String, String)>, usize), String> {
    let workspace = &context.workspace;
    let store: &dyn ObjectStore = workspace.store.as_ref();
    let prefix = &workspace.prefix;
    let mut skipped = 0;

    let mut candidates: Vec<(String, u64)> = Vec::new();
    for name in ROOT_FILES {
        match store.head(&format!("{prefix}{name}")).await {
            Ok(Some(meta)) => candidates.push((name.to_owned(), meta.size)),
            Ok(None) => {}
            Err(error) => return Err(store_error_message(name, &error)),
        }
    }
    let listing = store
        .list(&format!("{prefix}{MEMORY_DIR}"), MAX_SEARCH_FILES)
        .await
        .map_err(|error| store_error_message(MEMORY_DIR, &error))?;
    if listing.truncated {
        skipped += 1;
    }
    for meta in listing.objects {
        if let Some(relative) = meta.key.strip_prefix(prefix.as_str())
            && is_memory_path(relative)
        {
            candidates.push((relative.to_owned(), meta.size));
        }
    }

    let mut budget = MAX_SEARCH_TOTAL_BYTES;
    let mut chosen = Vec::new();
    for (relative, size) in candidates.into_iter().take(MAX_SEARCH_FILES) {
        if size > MAX_SEARCH_FILE_BYTES || size > budget {
            skipped += 1;
            continue;
        }
        budget -= size;
        chosen.push(relative);
    }
    let keys: Vec<String> = chosen.iter().map(|rel| format!("{prefix}{rel}")).collect();
    let reads = store.get_many(&keys, MAX_SEARCH_FILE_BYTES).await;

    let mut files: Vec<(String, String)> = Vec::new();
    for (relative, read) in chosen.into_iter().zip(reads) {
        let text = match read {
            Ok(Some(object)) => match decode_text(object.bytes, &relative) {
                Ok(text) => text,
                Err(_) => {
                    skipped += 1;
                    continue;
                }
            },
            // Deleted or grown since the listing: skip it rather than fail the search.
            Ok(None) | Err(clawless_base::object_store::StoreError::TooLarge { .. }) => {
                skipped += 1;
                continue;
            }
            Err(error) => return Err(store_error_message(&relative, &error)),
        };
        // On a case-insensitive store MEMORY.md and memory.md are one file.
        if ROOT_FILES.contains(&relative.as_str())
            && files
                .iter()
                .any(|(other, body)| ROOT_FILES.contains(&other.as_str()) && *body == text)
        {
            continue;
        }
        files.push((relative, text));
    }
    Ok((files, skipped))
}

/// Lowercase runs of letters and digits.
pub fn tokenize(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// A chunk of a file: 1-based inclusive line range and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// First line, 1-based.
    pub start_line: usize,
    /// Last line, 1-based.
    pub end_line: usize,
    /// The lines, joined with `\n`.
    pub text: String,
}

/// Splits Markdown into paragraphs (runs of non-blank lines), a heading staying with the
/// paragraph after it, and paragraphs longer than [`CHUNK_MAX_LINES`] into windows.
pub fn chunk_markdown(content: &str) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let mut current: Vec<(usize, &str)> = Vec::new();
    let only_headings = |lines: &[(usize, &str)]| {
        lines
            .iter()
            .all(|(_, line)| line.trim_start().starts_with('#'))
    };
    let flush = |current: &mut Vec<(usize, &str)>, chunks: &mut Vec<Chunk>| {
        if let (Some(first), Some(last)) = (current.first(), current.last()) {
            chunks.push(Chunk {
                start_line: first.0,
                end_line: last.0,
                text: current
                    .iter()
                    .map(|(_, line)| *line)
                    .collect::<Vec<_>>()
                    .join("\n"),
            });
        }
        current.clear();
    };
    for (index, line) in content.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            if !current.is_empty() && !only_headings(&current) {
                flush(&mut current, &mut chunks);
            }
            continue;
        }
        current.push((index + 1, line));
        if current.len() == CHUNK_MAX_LINES {
            flush(&mut current, &mut chunks);
        }
    }
    flush(&mut current, &mut chunks);
    chunks
}

/// Ranks every chunk of `files` against `query` with BM25 (k1 = 1.2, b = 0.75) and returns
/// the best `max_results` that match at least one query word. Ties go to the earlier path,
/// then the earlier line, so results are deterministic.
pub fn rank(query: &str, files: &[(String, String)], max_results: usize) -> Vec<MemoryHit> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;

    let query_terms: BTreeSet<String> = tokenize(query).into_iter().collect();
    let mut docs: Vec<(&str, Chunk, BTreeMap<String, usize>, usize)> = Vec::new();
    for (path, content) in files {
        for chunk in chunk_markdown(content) {
            let tokens = tokenize(&chunk.text);
            let length = tokens.len();
            let mut frequencies = BTreeMap::new();
            for token in tokens {
                if query_terms.contains(&token) {
                    *frequencies.entry(token).or_insert(0) += 1;
                }
            }
            docs.push((path, chunk, frequencies, length));
        }
    }
    if docs.is_empty() {
        return Vec::new();
    }
    let count = docs.len() as f64;
    let average_length = (docs.iter().map(|doc| doc.3).sum::<usize>() as f64 / count).max(1.0);
    let idf: BTreeMap<&str, f64> = query_terms
        .iter()
        .map(|term| {
            let with_term = docs.iter().filter(|doc| doc.2.contains_key(term)).count() as f64;
            let idf = (1.0 + (count - with_term + 0.5) / (with_term + 0.5)).ln();
            (term.as_str(), idf)
        })
        .collect();

    let mut scored: Vec<(f64, &str, Chunk)> = docs
        .into_iter()
        .filter(|doc| !doc.2.is_empty())
        .map(|(path, chunk, frequencies, length)| {
            let norm = K1 * (1.0 - B + B * length as f64 / average_length);
            let score = frequencies
                .iter()
                .map(|(term, tf)| {
                    let tf = *tf as f64;
                    idf.get(term.as_str()).copied().unwrap_or(0.0) * tf * (K1 + 1.0) / (tf + norm)
                })
                .sum::<f64>();
            (score, path, chunk)
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then_with(|| a.1.cmp(b.1))
            .then_with(|| a.2.start_line.cmp(&b.2.start_line))
    });
    scored
        .into_iter()
        .take(max_results)
        .map(|(score, path, chunk)| MemoryHit {
            path: path.to_owned(),
            start_line: chunk.start_line,
            end_line: chunk.end_line,
            score: (score * 10_000.0).round() / 10_000.0,
            snippet: chunk.text.chars().take(SNIPPET_MAX_CHARS).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::testing::InMemoryObjectStore;

    use crate::tools::fixtures::{WS, context};

    fn put(store: &InMemoryObjectStore, relative: &str, text: &str) {
        store.insert(&format!("{WS}{relative}"), text).unwrap();
    }

    async fn get(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        MemoryGetTool.run(&input, &context(store)).await
    }

    async fn search(store: &InMemoryObjectStore, input: Value) -> (ToolOutput, Value) {
        let output = MemorySearchTool.run(&input, &context(store)).await;
        let parsed = serde_json::from_str(&output.text).unwrap_or(Value::Null);
        (output, parsed)
    }

    #[test]
    fn only_memory_md_and_markdown_under_memory_are_memory_paths() {
        for ok in ["MEMORY.md", "memory.md", "memory/a.md", "memory/2025/01.md"] {
            assert!(is_memory_path(ok), "{ok}");
        }
        for bad in [
            "AGENTS.md",
            "memory/",
            "memory/a.txt",
            "memory.txt",
            "notes/memory/a.md",
            "Memory.md",
        ] {
            assert!(!is_memory_path(bad), "{bad}");
        }
    }

    #[tokio::test]
    async fn memory_get_reads_line_ranges_of_memory_files() {
        let store = InMemoryObjectStore::named("bucket");
        put(&store, "memory/2025-01-02.md", "a\nb\nc\nd");
        let output = get(
            &store,
            json!({"path": "memory/2025-01-02.md", "from": 2, "lines": 2}),
        )
        .await;
        assert!(!output.is_error, "{}", output.text);
        let value: Value = serde_json::from_str(&output.text).unwrap();
        assert_eq!(value["text"], "b\nc");
        assert_eq!(value["from"], 2);
        assert_eq!(value["to"], 3);
        assert_eq!(value["path"], "memory/2025-01-02.md");
    }

    #[tokio::test]
    async fn memory_get_reads_a_missing_memory_file_as_empty() {
        let store = InMemoryObjectStore::named("bucket");
        let output = get(&store, json!({"path": "MEMORY.md"})).await;
        assert_eq!(output, ToolOutput::ok(r#"{"path":"MEMORY.md","text":""}"#));
    }

    #[tokio::test]
    async fn memory_get_refuses_everything_but_memory_files() {
        let store = InMemoryObjectStore::named("bucket");
        put(&store, "AGENTS.md", "secret");
        put(&store, "memory/notes.txt", "secret");
        store
            .insert("agents/other/workspace/MEMORY.md", "secret")
            .unwrap();
        for path in [
            "AGENTS.md",
            "memory/notes.txt",
            "memory/../AGENTS.md",
            "../other/workspace/MEMORY.md",
            "mem://bucket/agents/other/workspace/MEMORY.md",
            "/etc/passwd",
            "memory/",
        ] {
            let output = get(&store, json!({ "path": path })).await;
            assert!(output.is_error, "{path:?} was readable");
            assert!(!output.text.contains("secret"));
        }
        // an absolute location inside the workspace is fine
        put(&store, "MEMORY.md", "ok");
        let absolute = get(
            &store,
            json!({"path": store.location(&format!("{WS}MEMORY.md"))}),
        )
        .await;
        assert!(!absolute.is_error, "{}", absolute.text);
    }

    #[tokio::test]
    async fn memory_search_ranks_the_most_relevant_chunk_first() {
        // GIVEN memory with one chunk about the dentist, one mentioning it in passing
        let store = InMemoryObjectStore::named("bucket");
        put(
            &store,
            "MEMORY.md",
            "# People\nAlice likes tea.\n\n# Health\nDentist appointment: dentist is Dr. Who, dentist on Main St.\n",
        );
        put(
            &store,
            "memory/2025-01-02.md",
            "Talked about the weather.\n\nMaybe call the dentist.\n",
        );
        put(
            &store,
            "notes/dentist.md",
            "dentist dentist dentist (not memory)",
        );

        // WHEN searching
        let (output, value) = search(&store, json!({"query": "Dentist appointment"})).await;

        // THEN the dense chunk comes first, the passing mention second, non-memory files never
        assert!(!output.is_error, "{}", output.text);
        let results = value["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!(results[0]["path"], "MEMORY.md");
        assert_eq!(results[0]["startLine"], 4);
        assert_eq!(results[0]["endLine"], 5);
        assert!(
            results[0]["snippet"]
                .as_str()
                .unwrap()
                .starts_with("# Health\nDentist")
        );
        assert_eq!(results[1]["path"], "memory/2025-01-02.md");
        assert_eq!(results[1]["startLine"], 3);
        assert!(results[0]["score"].as_f64() > results[1]["score"].as_f64());
    }

    #[tokio::test]
    async fn memory_search_breaks_ties_by_path_then_line_and_honours_max_results() {
        let store = InMemoryObjectStore::named("bucket");
        put(&store, "memory/b.md", "kiwi\n\nkiwi");
        put(&store, "memory/a.md", "kiwi");
        let (_, value) = search(&store, json!({"query": "kiwi", "maxResults": 2})).await;
        let results = value["results"].as_array().unwrap();
        let order: Vec<(String, u64)> = results
            .iter()
            .map(|hit| {
                (
                    hit["path"].as_str().unwrap().to_owned(),
                    hit["startLine"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            order,
            [("memory/a.md".to_owned(), 1), ("memory/b.md".to_owned(), 1)]
        );
    }

    #[tokio::test]
    async fn memory_search_refuses_an_empty_query_and_finds_nothing_in_empty_memory() {
        let store = InMemoryObjectStore::named("bucket");
        for query in ["", "   ", "?!"] {
            let (output, _) = search(&store, json!({ "query": query })).await;
            assert!(output.is_error, "{query:?}");
        }
        let (output, _) = search(&store, json!({})).await;
        assert!(output.is_error);
        let (output, _) = search(&store, json!({"query": "anything"})).await;
        assert_eq!(output, ToolOutput::ok(r#"{"results":[]}"#));
    }

    #[tokio::test]
    async fn memory_search_skips_oversized_and_binary_files() {
        let store = InMemoryObjectStore::named("bucket");
        let big = "needle ".repeat(usize::try_from(MAX_SEARCH_FILE_BYTES).unwrap() / 7 + 1);
        put(&store, "memory/big.md", &big);
        store
            .insert(&format!("{WS}memory/bin.md"), vec![0u8, 1, 2])
            .unwrap();
        put(&store, "memory/small.md", "needle");
        let (output, value) = search(&store, json!({"query": "needle"})).await;
        assert!(!output.is_error);
        assert_eq!(value["results"].as_array().unwrap().len(), 1);
        assert_eq!(value["results"][0]["path"], "memory/small.md");
        assert_eq!(value["skippedFiles"], 2);
    }

    #[test]
    fn chunks_follow_paragraphs_keep_headings_and_split_long_runs() {
        let chunks = chunk_markdown("# Title\n\nfirst para\nstill first\n\n\nsecond\n");
        let ranges: Vec<(usize, usize)> =
            chunks.iter().map(|c| (c.start_line, c.end_line)).collect();
        assert_eq!(ranges, [(1, 4), (7, 7)]);
        assert_eq!(chunks[0].text, "# Title\nfirst para\nstill first");

        let long = (1..=45)
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let ranges: Vec<(usize, usize)> = chunk_markdown(&long)
            .iter()
            .map(|c| (c.start_line, c.end_line))
            .collect();
        assert_eq!(ranges, [(1, 20), (21, 40), (41, 45)]);
    }

    #[test]
    fn tokens_are_lowercase_unicode_words() {
        assert_eq!(
            tokenize("Hello, Wörld! x2-y"),
            ["hello", "wörld", "x2", "y"]
        );
    }
}
