//! Applying an update hunk's chunks to a file's text (spec `openclaw-tools.md` §5.4): each
//! chunk's old lines are found at or after the previous chunk, trying an exact match, then
//! ignoring trailing whitespace, then all surrounding whitespace, then typographic
//! punctuation; the replacements are applied bottom-up and the result ends with a newline.

use super::parse::UpdateChunk;

/// The new text of `original` after `chunks`; `path` names the file in error texts. A file
/// with CRLF line endings keeps them.
pub(super) fn apply_chunks(
    original: &str, chunks: &[UpdateChunk], path: &str,
) -> Result<String, String> {
    let crlf = original.contains("\r\n");
    let normalized;
    let text = if crlf {
        normalized = original.replace("\r\n", "\n");
        normalized.as_str()
    } else {
        original
    };
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let replacements = plan_replacements(&lines, chunks, path)?;
    for (start, removed, added) in replacements.into_iter().rev() {
        lines.splice(start..start + removed, added);
    }
    let mut updated = lines.join("\n");
    updated.push('\n');
    if crlf {
        updated = updated.replace('\n', "\r\n");
    }
    Ok(updated)
}

/// `(start line, lines removed, lines inserted)` for every chunk, in file order.
type Replacement = (usize, usize, Vec<String>);

fn plan_replacements(
    lines: &[String], chunks: &[UpdateChunk], path: &str,
) -> Result<Vec<Replacement>, String> {
    let mut replacements = Vec::with_capacity(chunks.len());
    let mut cursor = 0;
    for chunk in chunks {
        if let Some(context) = &chunk.context {
            let found = seek(lines, std::slice::from_ref(context), cursor, false)
                .ok_or_else(|| format!("Failed to find context '{context}' in {path}"))?;
            cursor = found + 1;
        }
        if chunk.old_lines.is_empty() {
            // A pure addition goes at the end of the file.
            replacements.push((lines.len(), 0, chunk.new_lines.clone()));
            continue;
        }
        let mut old: &[String] = &chunk.old_lines;
        let mut new: &[String] = &chunk.new_lines;
        let mut found = seek(lines, old, cursor, chunk.at_end_of_file);
        if found.is_none() && old.last().is_some_and(String::is_empty) {
            // The patch's trailing blank line often stands for the file's final newline.
            old = &old[..old.len() - 1];
            if new.last().is_some_and(String::is_empty) {
                new = &new[..new.len() - 1];
            }
            found = seek(lines, old, cursor, chunk.at_end_of_file);
        }
        let start = found.ok_or_else(|| {
            format!(
                "Failed to find expected lines in {path}:\n{}",
                chunk.old_lines.join("\n")
            )
        })?;
        replacements.push((start, old.len(), new.to_vec()));
        cursor = start + old.len();
    }
    replacements.sort_by_key(|(start, _, _)| *start);
    Ok(replacements)
}

/// The first line index at or after `from` where `pattern` matches, trying each pass over
/// the whole range before the next, looser one. An end-of-file chunk only tries the last
/// position.
fn seek(lines: &[String], pattern: &[String], from: usize, at_end_of_file: bool) -> Option<usize> {
    if pattern.is_empty() {
        return Some(from);
    }
    if pattern.len() > lines.len() {
        return None;
    }
    let last_start = lines.len() - pattern.len();
    let first_start = if at_end_of_file { last_start } else { from };
    // Never above the cursor, not even for an end-of-file chunk: replacements must not overlap.
    if first_start > last_start || first_start < from {
        return None;
    }
    let passes: [fn(&str) -> String; 4] = [
        str::to_owned,
        |line| line.trim_end().to_owned(),
        |line| line.trim().to_owned(),
        |line| normalize_punctuation(line.trim()),
    ];
    passes.iter().find_map(|canonical| {
        let wanted: Vec<String> = pattern.iter().map(|line| canonical(line)).collect();
        (first_start..=last_start).find(|&start| {
            lines[start..start + pattern.len()]
                .iter()
                .zip(&wanted)
                .all(|(line, wanted)| canonical(line) == *wanted)
        })
    })
}

/// Typographic dashes as `-`, curly quotes as straight ones, unusual spaces as a space.
fn normalize_punctuation(line: &str) -> String {
    line.chars()
        .map(|c| match c {
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{00A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            other => other,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(context: Option<&str>, old: &[&str], new: &[&str], eof: bool) -> UpdateChunk {
        UpdateChunk {
            context: context.map(str::to_owned),
            old_lines: old.iter().map(|line| (*line).to_owned()).collect(),
            new_lines: new.iter().map(|line| (*line).to_owned()).collect(),
            at_end_of_file: eof,
        }
    }

    #[test]
    fn chunks_apply_in_order_after_their_context() {
        let original = "fn a() {\n    x\n}\nfn b() {\n    x\n}\n";
        let updated = apply_chunks(
            original,
            &[chunk(Some("fn b() {"), &["    x"], &["    y"], false)],
            "f.rs",
        )
        .unwrap();
        assert_eq!(updated, "fn a() {\n    x\n}\nfn b() {\n    y\n}\n");
    }

    #[test]
    fn an_en_dash_in_the_file_still_matches_a_hyphen_in_the_patch() {
        // vector 18: the fourth pass normalizes punctuation
        let original = "title: a \u{2013} b\nnext\n";
        let updated = apply_chunks(
            original,
            &[chunk(None, &["title: a - b"], &["title: a and b"], false)],
            "n.md",
        )
        .unwrap();
        assert_eq!(updated, "title: a and b\nnext\n");
    }

    #[test]
    fn whitespace_passes_and_trailing_blank_lines_are_forgiven() {
        let original = "  one  \ntwo";
        let updated = apply_chunks(
            original,
            &[chunk(None, &["one", "two", ""], &["1", "two", ""], false)],
            "w.txt",
        )
        .unwrap();
        assert_eq!(
            updated, "1\ntwo\n",
            "indentation of replaced lines comes from the patch"
        );
    }

    #[test]
    fn pure_additions_go_to_the_end_and_eof_chunks_match_only_the_end() {
        let original = "a\nb\na\n";
        let appended =
            apply_chunks(original, &[chunk(Some("a"), &[], &["z"], false)], "f").unwrap();
        assert_eq!(appended, "a\nb\na\nz\n");
        let at_end = apply_chunks(original, &[chunk(None, &["a"], &["A"], true)], "f").unwrap();
        assert_eq!(at_end, "a\nb\nA\n");
    }

    #[test]
    fn crlf_files_keep_their_line_endings() {
        let updated =
            apply_chunks("a\r\nb\r\n", &[chunk(None, &["b"], &["c"], false)], "f").unwrap();
        assert_eq!(updated, "a\r\nc\r\n");
    }

    #[test]
    fn missing_context_and_lines_are_reported() {
        assert_eq!(
            apply_chunks("a\n", &[chunk(Some("zzz"), &["a"], &["b"], false)], "f.md"),
            Err("Failed to find context 'zzz' in f.md".to_owned())
        );
        assert_eq!(
            apply_chunks("a\n", &[chunk(None, &["x", "y"], &["b"], false)], "f.md"),
            Err("Failed to find expected lines in f.md:\nx\ny".to_owned())
        );
        // an end-of-file chunk whose end lies inside an earlier chunk does not apply
        assert!(
            apply_chunks(
                "a\nb\nc\n",
                &[
                    chunk(None, &["b", "c"], &["B"], false),
                    chunk(None, &["c"], &["C"], true)
                ],
                "f"
            )
            .is_err()
        );
        // a later chunk never matches above an earlier one
        assert!(
            apply_chunks(
                "a\nb\n",
                &[
                    chunk(None, &["b"], &["B"], false),
                    chunk(None, &["a"], &["A"], false)
                ],
                "f"
            )
            .is_err()
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, ..Default::default() })]

        /// Any patch text parses or fails with a message, and any parsed update either applies
        /// (ending the file with a newline) or fails with a message, over any file: never a
        /// panic.
        #[test]
        fn any_patch_over_any_file_applies_or_errs_without_panicking(
            body in proptest::collection::vec("(@@( [a-c]{0,2})?|[ +-][a-c\u{2013} ]{0,3}|\\*\\*\\* End of File|)", 0..12),
            file in "([a-c\u{2013} ]{0,3}\n){0,8}",
        ) {
            let patch = format!("*** Begin Patch\n*** Update File: f\n{}\n*** End Patch", body.join("\n"));
            if let Ok(hunks) = super::super::parse::parse_patch(&patch) {
                for hunk in hunks {
                    if let super::super::parse::Hunk::Update { chunks, .. } = hunk
                        && let Ok(updated) = apply_chunks(&file, &chunks, "f")
                    {
                        proptest::prop_assert!(updated.ends_with('\n'));
                    }
                }
            }
        }
    }
}
