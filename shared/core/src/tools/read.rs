//! The `read` tool: a text file from the workspace or a skill source, by line range, with
//! pi's per-call limits (2,000 lines or 50 KB, whichever comes first).
//!
//! Paths go through [`super::paths::resolve_read_path`]; this module only knows lines and
//! bytes. The line-window logic is shared with `memory_get`.

use async_trait::async_trait;
use serde_json::{Value, json};

use clawless_base::model::ToolSpec;
use clawless_base::object_store::StoreError;

use super::paths::resolve_read_path;
use super::{Tool, ToolContext, ToolOutput, args};

/// Lines returned per call at most (pi's `DEFAULT_MAX_LINES`).
pub const MAX_LINES: usize = 2_000;
/// Bytes returned per call at most (pi's `DEFAULT_MAX_BYTES`, 50 KB).
pub const MAX_BYTES: usize = 51_200;
/// Largest object `read` opens at all; anything bigger is refused without being loaded.
pub const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Which limit ended a window early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// [`MAX_LINES`] lines were shown.
    Lines,
    /// The next line would have crossed [`MAX_BYTES`].
    Bytes,
    /// The first line alone is over [`MAX_BYTES`]; only its head is shown.
    LongLine,
}

/// A slice of a text file, as one tool call returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineWindow {
    /// The lines shown, joined with `\n` (no notice).
    pub text: String,
    /// First line shown, 1-based.
    pub first_line: usize,
    /// Last line shown, 1-based.
    pub last_line: usize,
    /// Lines in the file (a trailing newline counts as an empty last line, as in pi).
    pub total_lines: usize,
    /// Last line the caller's `limit` asked for, 1-based.
    pub requested_last_line: usize,
    /// Set when a per-call limit cut the window short.
    pub cut: Option<Cut>,
}

impl LineWindow {
    /// The line a follow-up call should start at, if anything is left to read.
    pub fn next_offset(&self) -> Option<usize> {
        (self.last_line < self.total_lines).then_some(self.last_line + 1)
    }

    /// The window's text followed by a notice telling the model how to continue, if it must.
    pub fn render(&self) -> String {
        let mut out = self.text.clone();
        let next = self.last_line + 1;
        match self.cut {
            Some(Cut::LongLine) => {
                out.push_str(&format!(
                    "\n\n[Line {} is longer than the {MAX_BYTES}-byte limit; showing its first {} bytes.",
                    self.first_line,
                    self.text.len()
                ));
                if self.last_line < self.total_lines {
                    out.push_str(&format!(
                        " Use offset={next} to continue with the next line."
                    ));
                }
                out.push(']');
            }
            Some(cut) => {
                let by_bytes = if cut == Cut::Bytes {
                    format!(" ({MAX_BYTES}-byte limit)")
                } else {
                    String::new()
                };
                out.push_str(&format!(
                    "\n\n[Showing lines {}-{} of {}{by_bytes}. Use offset={next} to continue.]",
                    self.first_line, self.last_line, self.total_lines
                ));
            }
            None if self.requested_last_line < self.total_lines => {
                out.push_str(&format!(
                    "\n\n[{} more lines in file. Use offset={next} to continue.]",
                    self.total_lines - self.requested_last_line
                ));
            }
            None => {}
        }
        out
    }
}

/// Selects lines `offset..offset+limit` (1-based, both optional) within the per-call limits.
/// `Err` with a message for the model when `offset` lies past the end.
pub fn line_window(
    content: &str, offset: Option<usize>, limit: Option<usize>,
) -> Result<LineWindow, String> {
    let lines: Vec<&str> = content.split('\n').collect();
    let total_lines = lines.len();
    let start = offset.unwrap_or(1).saturating_sub(1);
    if start >= total_lines {
        return Err(format!(
            "Offset {} is beyond end of file ({total_lines} lines total)",
            start + 1
        ));
    }
    let requested_end = limit.map_or(total_lines, |limit| {
        start.saturating_add(limit).min(total_lines)
    });

    let mut text = String::new();
    let mut shown = 0;
    let mut cut = None;
    for line in &lines[start..requested_end] {
        if shown == MAX_LINES {
            cut = Some(Cut::Lines);
            break;
        }
        let separator = usize::from(shown > 0);
        if text.len() + separator + line.len() > MAX_BYTES {
            if shown == 0 {
                text.push_str(utf8_prefix(line, MAX_BYTES));
                shown = 1;
                cut = Some(Cut::LongLine);
            } else {
                cut = Some(Cut::Bytes);
            }
            break;
        }
        if separator == 1 {
            text.push('\n');
        }
        text.push_str(line);
        shown += 1;
    }
    Ok(LineWindow {
        text,
        first_line: start + 1,
        last_line: start + shown,
        total_lines,
        requested_last_line: requested_end,
        cut,
    })
}

/// The longest prefix of `text` of at most `max_bytes` bytes that ends on a char boundary.
pub fn utf8_prefix(text: &str, max_bytes: usize) -> &str {
    if text.len() <= max_bytes {
        return text;
    }
    let mut end = max_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Decodes file bytes as text, refusing binary content with a message for the model.
pub(crate) fn decode_text(bytes: Vec<u8>, path: &str) -> Result<String, String> {
    let not_text = || format!("Cannot read {path}: it is a binary or non-UTF-8 file");
    if bytes.iter().take(8_192).any(|byte| *byte == 0) {
        return Err(not_text());
    }
    String::from_utf8(bytes).map_err(|_| not_text())
}

/// Maps a store failure to a message for the model without leaking adapter details.
pub(crate) fn store_error_message(path: &str, error: &StoreError) -> String {
    match error {
        StoreError::TooLarge { size, limit, .. } => {
            format!("File {path} is too large to read ({size} bytes; the limit is {limit} bytes)")
        }
        StoreError::InvalidKey { .. } => format!("Refused path {path:?}: not a valid file path"),
        StoreError::Conflict(_) => format!("{path} was changed by someone else; read it again"),
        StoreError::Unavailable { .. } => {
            tracing::warn!(error = ?error, "file tool: object store failed");
            format!("Could not access {path}: storage is unavailable, try again")
        }
    }
}

/// `read`: a text file by line range.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadTool;

#[async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".to_owned(),
            description: format!(
                "Read a text file: in the workspace, or a skill's <location>. At most {MAX_LINES} \
                 lines or {} KB a call; page with offset and limit.",
                MAX_BYTES / 1024
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Relative to the workspace, or absolute"},
                    "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)"},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most lines to read"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput {
        ToolOutput::from(read(input, context).await)
    }
}

async fn read(input: &Value, context: &ToolContext) -> Result<String, String> {
    let path = args::required_string(input, &["path", "file_path"])?;
    let offset = args::positive(input, &["offset"])?;
    let limit = args::positive(input, &["limit"])?;
    let resolved = resolve_read_path(context, path).map_err(|error| error.to_string())?;
    let object = resolved
        .store
        .get(&resolved.key, MAX_FILE_BYTES)
        .await
        .map_err(|error| store_error_message(path, &error))?
        .ok_or_else(|| format!("File not found: {path}"))?;
    let content = decode_text(object.bytes, path)?;
    let window = line_window(&content, offset, limit)?;
    Ok(window.render())
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::testing::InMemoryObjectStore;
    use clawless_base::object_store::ObjectStore;

    use crate::tools::fixtures::{WS, context};

    async fn run(store: &InMemoryObjectStore, input: Value) -> ToolOutput {
        ReadTool.run(&input, &context(store)).await
    }

    fn numbered(lines: usize) -> String {
        (1..=lines)
            .map(|n| format!("line {n}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[tokio::test]
    async fn reads_a_workspace_file_relative_or_absolute() {
        let store = InMemoryObjectStore::named("bucket");
        store
            .insert(&format!("{WS}notes.md"), "hello\nworld")
            .unwrap();

        let relative = run(&store, json!({"path": "notes.md"})).await;
        assert_eq!(relative, ToolOutput::ok("hello\nworld"));
        let absolute = run(
            &store,
            json!({"path": store.location(&format!("{WS}notes.md"))}),
        )
        .await;
        assert_eq!(absolute, ToolOutput::ok("hello\nworld"));
    }

    #[tokio::test]
    async fn reads_a_skill_file_by_location_and_by_home_relative_location() {
        let store = InMemoryObjectStore::named("bucket");
        store
            .insert("skills/bundled/weather/SKILL.md", "# Weather")
            .unwrap();

        let direct = run(
            &store,
            json!({"path": store.location("skills/bundled/weather/SKILL.md")}),
        )
        .await;
        assert_eq!(direct, ToolOutput::ok("# Weather"));
        let home = run(&store, json!({"path": "~/bundled/weather/SKILL.md"})).await;
        assert_eq!(home, ToolOutput::ok("# Weather"));
    }

    #[tokio::test]
    async fn traversal_and_outside_locations_are_refused_without_reading() {
        // GIVEN a secret next to the workspace and the skills
        let store = InMemoryObjectStore::named("bucket");
        store.insert("secret", "s3cr3t").unwrap();
        store
            .insert("agents/other/workspace/MEMORY.md", "s3cr3t")
            .unwrap();
        store.insert("skills/managed/x/SKILL.md", "s3cr3t").unwrap();

        for path in [
            "../x",
            "../../../secret",
            "skills/../../secret",
            "%2e%2e/%2e%2e/%2e%2e/secret",
            "/etc/passwd",
            "~/../secret",
            "~/managed/x/SKILL.md",
            "mem://bucket/secret",
            "mem://bucket/agents/other/workspace/MEMORY.md",
            "mem://bucket/skills/bundled/../managed/x/SKILL.md",
            "s3://other-bucket/skills/bundled/weather/SKILL.md",
            "",
            "a\0b",
        ] {
            // WHEN the model asks for it THEN it gets an error, never the content
            let output = run(&store, json!({ "path": path })).await;
            assert!(output.is_error, "{path:?} was not refused");
            assert!(!output.text.contains("s3cr3t"), "{path:?} leaked");
        }
    }

    #[tokio::test]
    async fn missing_files_and_bad_arguments_are_errors() {
        let store = InMemoryObjectStore::named("bucket");
        assert_eq!(
            run(&store, json!({"path": "nope.md"})).await,
            ToolOutput::error("File not found: nope.md")
        );
        assert!(run(&store, json!({})).await.is_error);
        assert!(run(&store, json!({"path": 3})).await.is_error);
        store.insert(&format!("{WS}a.md"), "x").unwrap();
        assert!(
            run(&store, json!({"path": "a.md", "offset": 0}))
                .await
                .is_error
        );
        assert!(
            run(&store, json!({"path": "a.md", "limit": -1}))
                .await
                .is_error
        );
    }

    #[tokio::test]
    async fn binary_and_non_utf8_files_are_refused() {
        let store = InMemoryObjectStore::named("bucket");
        store
            .insert(&format!("{WS}img.png"), vec![0x89, b'P', 0, 1])
            .unwrap();
        store
            .insert(&format!("{WS}latin1.txt"), vec![b'c', 0xe9])
            .unwrap();
        for path in ["img.png", "latin1.txt"] {
            let output = run(&store, json!({ "path": path })).await;
            assert!(output.is_error);
            assert!(
                output.text.contains("binary or non-UTF-8"),
                "{}",
                output.text
            );
        }
    }

    #[tokio::test]
    async fn oversized_objects_are_refused_before_loading() {
        let store = InMemoryObjectStore::named("bucket");
        let big = vec![b'a'; usize::try_from(MAX_FILE_BYTES).unwrap() + 1];
        store.insert(&format!("{WS}big.txt"), big).unwrap();
        let output = run(&store, json!({"path": "big.txt"})).await;
        assert!(output.is_error);
        assert!(output.text.contains("too large"), "{}", output.text);
    }

    #[tokio::test]
    async fn offset_and_limit_select_lines_and_say_how_to_continue() {
        let store = InMemoryObjectStore::named("bucket");
        store.insert(&format!("{WS}f.txt"), numbered(10)).unwrap();

        let output = run(&store, json!({"path": "f.txt", "offset": 3, "limit": 2})).await;
        assert_eq!(
            output,
            ToolOutput::ok("line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]")
        );
        let tail = run(&store, json!({"path": "f.txt", "offset": "9"})).await;
        assert_eq!(tail, ToolOutput::ok("line 9\nline 10"));
        let past = run(&store, json!({"path": "f.txt", "offset": 11})).await;
        assert_eq!(
            past,
            ToolOutput::error("Offset 11 is beyond end of file (10 lines total)")
        );
    }

    #[tokio::test]
    async fn output_stops_at_two_thousand_lines() {
        let store = InMemoryObjectStore::named("bucket");
        store
            .insert(&format!("{WS}long.txt"), numbered(2_500))
            .unwrap();

        let output = run(&store, json!({"path": "long.txt"})).await;
        assert!(!output.is_error);
        assert!(output.text.starts_with("line 1\n"));
        assert!(output.text.contains(
            "\nline 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
        ));
        assert!(!output.text.contains("line 2001"));

        let next = run(&store, json!({"path": "long.txt", "offset": 2001})).await;
        assert!(next.text.starts_with("line 2001\n"));
        assert!(next.text.ends_with("line 2500"));
    }

    #[tokio::test]
    async fn output_stops_at_fifty_kilobytes_on_a_line_boundary() {
        let store = InMemoryObjectStore::named("bucket");
        // 100 lines of 1,000 bytes: 51 lines (51,050 bytes with newlines) fit, the 52nd does not
        let line = "é".repeat(500);
        let content = vec![line.as_str(); 100].join("\n");
        store.insert(&format!("{WS}wide.txt"), content).unwrap();

        let output = run(&store, json!({"path": "wide.txt"})).await;
        let (body, notice) = output.text.split_once("\n\n[").unwrap();
        assert!(body.len() <= MAX_BYTES);
        assert_eq!(body.lines().count(), 51);
        assert_eq!(
            notice,
            format!(
                "Showing lines 1-51 of 100 ({MAX_BYTES}-byte limit). Use offset=52 to continue.]"
            )
        );
    }

    #[tokio::test]
    async fn a_single_huge_line_is_cut_on_a_char_boundary() {
        let store = InMemoryObjectStore::named("bucket");
        // 3-byte chars: 51,200 is not a multiple of 3, so a naive cut would split one
        let content = format!("{}\nsecond", "€".repeat(40_000));
        store.insert(&format!("{WS}one.txt"), content).unwrap();

        let output = run(&store, json!({"path": "one.txt"})).await;
        let (body, notice) = output.text.split_once("\n\n[").unwrap();
        assert_eq!(body.len(), 51_198);
        assert!(body.chars().all(|c| c == '€'));
        assert!(notice.contains("Use offset=2 to continue"), "{notice}");
    }

    #[test]
    fn utf8_prefix_never_splits_a_char() {
        assert_eq!(utf8_prefix("aé", 2), "a");
        assert_eq!(utf8_prefix("aé", 3), "aé");
        assert_eq!(utf8_prefix("", 0), "");
        assert_eq!(utf8_prefix("😀", 3), "");
    }
}
