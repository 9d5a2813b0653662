//! The patch grammar (spec `openclaw-tools.md` §5.3): `*** Begin Patch`, then add, delete
//! and update hunks, then `*** End Patch`, optionally wrapped in a shell heredoc. Parsing
//! touches no file; every mistake is an error text naming the line.

/// One file operation of a patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Hunk {
    /// `*** Add File:` — create (or replace) a file with `contents`.
    Add {
        /// Path as written in the patch.
        path: String,
        /// The `+` lines, each ending in `\n`.
        contents: String,
    },
    /// `*** Delete File:`.
    Delete {
        /// Path as written in the patch.
        path: String,
    },
    /// `*** Update File:` — change lines, optionally moving the file.
    Update {
        /// Path as written in the patch.
        path: String,
        /// `*** Move to:` target, if any.
        move_to: Option<String>,
        /// The changes, in file order.
        chunks: Vec<UpdateChunk>,
    },
}

/// One `@@` section of an update.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct UpdateChunk {
    /// The line after `@@ `, found before the old lines are searched.
    pub(super) context: Option<String>,
    /// Context and `-` lines: what the file holds now.
    pub(super) old_lines: Vec<String>,
    /// Context and `+` lines: what it will hold.
    pub(super) new_lines: Vec<String>,
    /// `*** End of File` closed the chunk: the old lines end the file.
    pub(super) at_end_of_file: bool,
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE_TO: &str = "*** Move to: ";
const END_OF_FILE: &str = "*** End of File";

/// Parses a whole patch into its hunks.
pub(super) fn parse_patch(input: &str) -> Result<Vec<Hunk>, String> {
    let trimmed = input.trim();
    if trimmed.is_empty() {
        return Err("Invalid patch: input is empty.".to_owned());
    }
    let all: Vec<&str> = trimmed
        .split('\n')
        .map(|line| line.strip_suffix('\r').unwrap_or(line))
        .collect();
    let lines = strip_heredoc(&all);
    if lines.first().map(|line| line.trim()) != Some(BEGIN) {
        return Err(format!("The first line of the patch must be '{BEGIN}'"));
    }
    if lines.len() < 2 || lines.last().map(|line| line.trim()) != Some(END) {
        return Err(format!("The last line of the patch must be '{END}'"));
    }
    let body = &lines[1..lines.len() - 1];
    let mut hunks = Vec::new();
    let mut index = 0;
    while index < body.len() {
        // Line numbers count from the patch's first line (the Begin marker is line 1).
        let line_number = index + 2;
        let header = body[index].trim();
        if header.is_empty() {
            index += 1;
            continue;
        }
        if let Some(path) = header.strip_prefix(ADD) {
            let mut contents = String::new();
            index += 1;
            while let Some(added) = body.get(index).and_then(|line| line.strip_prefix('+')) {
                contents.push_str(added);
                contents.push('\n');
                index += 1;
            }
            hunks.push(Hunk::Add {
                path: path.trim().to_owned(),
                contents,
            });
        } else if let Some(path) = header.strip_prefix(DELETE) {
            hunks.push(Hunk::Delete {
                path: path.trim().to_owned(),
            });
            index += 1;
        } else if let Some(path) = header.strip_prefix(UPDATE) {
            let path = path.trim().to_owned();
            index += 1;
            let move_to = match body
                .get(index)
                .and_then(|line| line.trim().strip_prefix(MOVE_TO))
            {
                Some(target) => {
                    index += 1;
                    Some(target.trim().to_owned())
                }
                None => None,
            };
            let (chunks, next) = parse_update_chunks(body, index)?;
            if chunks.is_empty() {
                return Err(hunk_error(
                    line_number,
                    &format!("Update file hunk for path '{path}' is empty"),
                ));
            }
            hunks.push(Hunk::Update {
                path,
                move_to,
                chunks,
            });
            index = next;
        } else {
            return Err(hunk_error(
                line_number,
                &format!(
                    "'{header}' is not a valid hunk header. Valid hunk headers: \
                     '*** Add File: {{path}}', '*** Delete File: {{path}}', \
                     '*** Update File: {{path}}'"
                ),
            ));
        }
    }
    if hunks.is_empty() {
        return Err("No files were modified.".to_owned());
    }
    Ok(hunks)
}

/// The inside of `<<EOF … EOF` (also `<<'EOF'` and `<<"EOF"`), or `lines` unchanged.
fn strip_heredoc<'a>(lines: &'a [&'a str]) -> &'a [&'a str] {
    let opens = matches!(
        lines.first().map(|line| line.trim()),
        Some("<<EOF" | "<<'EOF'" | "<<\"EOF\"")
    );
    let closes = lines.len() >= 4
        && lines
            .last()
            .is_some_and(|line| line.trim().ends_with("EOF"));
    if opens && closes {
        &lines[1..lines.len() - 1]
    } else {
        lines
    }
}

fn hunk_error(line_number: usize, message: &str) -> String {
    format!("Invalid patch hunk at line {line_number}: {message}")
}

/// Parses the chunks of an update from `body[start..]`, up to the next `***` header;
/// returns them and the index of the first line after them.
fn parse_update_chunks(body: &[&str], start: usize) -> Result<(Vec<UpdateChunk>, usize), String> {
    let mut chunks: Vec<UpdateChunk> = Vec::new();
    let mut index = start;
    while index < body.len() {
        let line = body[index];
        let trimmed = line.trim();
        if trimmed.is_empty() && chunk_is_closed(body, index) {
            // Blank lines between chunks (not inside one) are skipped.
            index += 1;
            continue;
        }
        if trimmed.starts_with("***") && trimmed != END_OF_FILE {
            break;
        }
        let line_number = index + 2;
        let mut chunk = UpdateChunk::default();
        if trimmed == "@@" {
            index += 1;
        } else if let Some(context) = trimmed.strip_prefix("@@ ") {
            chunk.context = Some(context.to_owned());
            index += 1;
        } else if !chunks.is_empty() || !is_diff_line(line) {
            // Only the first chunk may go without its `@@`.
            return Err(hunk_error(
                line_number,
                &format!("Expected update hunk to start with a @@ context marker, got: '{line}'"),
            ));
        }
        let mut taken = 0;
        while index < body.len() {
            let line = body[index];
            if line.trim() == END_OF_FILE {
                chunk.at_end_of_file = true;
                index += 1;
                taken += 1;
                break;
            }
            if let Some(added) = line.strip_prefix('+') {
                chunk.new_lines.push(added.to_owned());
            } else if let Some(removed) = line.strip_prefix('-') {
                chunk.old_lines.push(removed.to_owned());
            } else if let Some(kept) = line.strip_prefix(' ') {
                chunk.old_lines.push(kept.to_owned());
                chunk.new_lines.push(kept.to_owned());
            } else if line.is_empty() {
                if chunk_is_closed(body, index) && taken > 0 {
                    break;
                }
                chunk.old_lines.push(String::new());
                chunk.new_lines.push(String::new());
            } else if taken == 0 {
                return Err(hunk_error(
                    index + 2,
                    &format!(
                        "Unexpected line found in update hunk: '{line}'. Every line should \
                         start with ' ' (context line), '+' (added line), or '-' (removed line)"
                    ),
                ));
            } else {
                break;
            }
            taken += 1;
            index += 1;
        }
        if taken == 0 {
            return Err(hunk_error(
                line_number,
                "Update hunk does not contain any lines",
            ));
        }
        chunks.push(chunk);
    }
    Ok((chunks, index))
}

/// True when the blank line at `index` is followed (after any more blank lines) by a new
/// chunk, a new hunk or the end: it separates chunks rather than being an empty context
/// line.
fn chunk_is_closed(body: &[&str], index: usize) -> bool {
    match body[index..].iter().find(|line| !line.trim().is_empty()) {
        None => true,
        Some(next) => {
            let next = next.trim();
            next.starts_with("@@") || (next.starts_with("***") && next != END_OF_FILE)
        }
    }
}

fn is_diff_line(line: &str) -> bool {
    line.starts_with([' ', '+', '-']) || line.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_with_every_hunk_kind_parses() {
        let patch = "*** Begin Patch\n*** Add File: new.md\n+hello\n+world\n*** Delete File: old.md\n\
                     *** Update File: a.rs\n*** Move to: b.rs\n@@ fn main\n-old\n+new\n keep\n\n\
                     @@\n-x\n+y\n*** End of File\n*** End Patch";
        let hunks = parse_patch(patch).unwrap();
        assert_eq!(
            hunks,
            vec![
                Hunk::Add {
                    path: "new.md".into(),
                    contents: "hello\nworld\n".into()
                },
                Hunk::Delete {
                    path: "old.md".into()
                },
                Hunk::Update {
                    path: "a.rs".into(),
                    move_to: Some("b.rs".into()),
                    chunks: vec![
                        UpdateChunk {
                            context: Some("fn main".into()),
                            old_lines: vec!["old".into(), "keep".into()],
                            new_lines: vec!["new".into(), "keep".into()],
                            at_end_of_file: false,
                        },
                        UpdateChunk {
                            context: None,
                            old_lines: vec!["x".into()],
                            new_lines: vec!["y".into()],
                            at_end_of_file: true,
                        },
                    ],
                },
            ]
        );
    }

    #[test]
    fn the_first_chunk_may_omit_its_marker_and_blank_lines_are_empty_context() {
        let patch =
            "*** Begin Patch\r\n*** Update File: a.md\r\n a\r\n\r\n-b\r\n+c\r\n*** End Patch\r\n";
        let hunks = parse_patch(patch).unwrap();
        let Hunk::Update { chunks, .. } = &hunks[0] else {
            panic!("an update")
        };
        assert_eq!(chunks[0].old_lines, ["a", "", "b"]);
        assert_eq!(chunks[0].new_lines, ["a", "", "c"]);
    }

    #[test]
    fn a_heredoc_wrapper_is_accepted() {
        for open in ["<<EOF", "<<'EOF'", "<<\"EOF\""] {
            let patch =
                format!("{open}\n*** Begin Patch\n*** Delete File: x\n*** End Patch\nEOF\n");
            assert_eq!(
                parse_patch(&patch).unwrap(),
                vec![Hunk::Delete { path: "x".into() }],
                "{open}"
            );
        }
    }

    #[test]
    fn malformed_patches_get_the_spec_errors() {
        let cases = [
            ("   ", "Invalid patch: input is empty."),
            (
                "*** Update File: a\n*** End Patch",
                "The first line of the patch must be '*** Begin Patch'",
            ),
            // vector 17
            (
                "*** Begin Patch\n*** Add File: a\n+x",
                "The last line of the patch must be '*** End Patch'",
            ),
            ("*** Begin Patch\n*** End Patch", "No files were modified."),
            (
                "*** Begin Patch\n*** Frobnicate: a\n*** End Patch",
                "Invalid patch hunk at line 2: '*** Frobnicate: a' is not a valid hunk header. \
                 Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', \
                 '*** Update File: {path}'",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n*** End Patch",
                "Invalid patch hunk at line 2: Update file hunk for path 'a' is empty",
            ),
            (
                "*** Begin Patch\n*** Update File: a\nbad\n*** End Patch",
                "Invalid patch hunk at line 3: Expected update hunk to start with a @@ context marker, got: 'bad'",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\n*** End Patch",
                "Invalid patch hunk at line 3: Update hunk does not contain any lines",
            ),
            (
                "*** Begin Patch\n*** Update File: a\n@@\nbad\n*** End Patch",
                "Invalid patch hunk at line 4: Unexpected line found in update hunk: 'bad'. Every \
                 line should start with ' ' (context line), '+' (added line), or '-' (removed line)",
            ),
        ];
        for (patch, expected) in cases {
            assert_eq!(parse_patch(patch), Err(expected.to_owned()), "{patch:?}");
        }
    }
}
