//! Splitting a reply into messages a platform accepts: at most `limit` characters each (Telegram
//! 4,096, Slack 4,000, Discord 2,000), cut at a paragraph break if one is close enough, else at a
//! line break, else at a space, else anywhere. A code fence that a cut leaves open is closed at
//! the end of its chunk and reopened (with its language) at the start of the next, so every
//! chunk renders on its own.

/// Shortest chunk (as a share of the limit) worth cutting at a paragraph or line break; below
/// it, a later and weaker boundary is used instead of sending a sliver.
const MIN_FILL_PERCENT: usize = 50;

/// `text` in chunks of at most `limit` characters (Unicode scalar values). Empty text gives no
/// chunk; a `limit` too small to hold a fence marker still never loops or panics.
pub fn chunk_text(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(1);
    if text.chars().count() <= limit {
        return if text.trim().is_empty() {
            Vec::new()
        } else {
            vec![text.to_owned()]
        };
    }
    let mut chunks = Vec::new();
    let mut rest: String = text.to_owned();
    // The fence opened in an earlier chunk and still open, e.g. "```rust".
    let mut carried_fence: Option<String> = None;
    while !rest.is_empty() {
        let prefix = carried_fence
            .as_ref()
            .map(|fence| format!("{fence}\n"))
            .unwrap_or_default();
        let room = limit.saturating_sub(prefix.chars().count()).max(1);
        let (mut head, mut tail) = split(&rest, room);
        let mut open = open_fence_after(carried_fence.as_deref(), head);
        if open.is_some() && !tail.is_empty() {
            // Make room for the closing fence this chunk needs.
            (head, tail) = split(&rest, room.saturating_sub(CLOSE_FENCE.len()).max(1));
            open = open_fence_after(carried_fence.as_deref(), head);
        }
        let mut chunk = format!("{prefix}{head}");
        if open.is_some() && !tail.is_empty() {
            let close = if chunk.ends_with('\n') {
                &CLOSE_FENCE[1..]
            } else {
                CLOSE_FENCE
            };
            chunk.push_str(close);
        }
        let trimmed = chunk.trim_end_matches([' ', '\n']).to_owned();
        if !trimmed.trim().is_empty() {
            chunks.push(trimmed);
        }
        carried_fence = if tail.is_empty() { None } else { open };
        rest = tail.trim_start_matches(['\n', ' ']).to_owned();
    }
    chunks
}

/// Closes a fence left open at the end of a chunk (its newline is left out when the chunk
/// already ends with one).
const CLOSE_FENCE: &str = "\n```";

/// `text` split so that the head has at most `room` characters, at the best boundary.
fn split(text: &str, room: usize) -> (&str, &str) {
    if text.chars().count() <= room {
        (text, "")
    } else {
        text.split_at(cut_point(text, room))
    }
}

/// Byte index at which to cut `text` so that the head has at most `budget` characters.
fn cut_point(text: &str, budget: usize) -> usize {
    let hard = text
        .char_indices()
        .nth(budget)
        .map_or(text.len(), |(index, _)| index);
    let window = &text[..hard];
    let floor = window.len() * MIN_FILL_PERCENT / 100;
    for boundary in ["\n\n", "\n", " "] {
        if let Some(found) = window.rfind(boundary)
            && found >= floor
            && found > 0
        {
            return found + boundary.len();
        }
    }
    hard
}

/// The fence still open at the end of `chunk`, given the one open at its start.
fn open_fence_after(open_at_start: Option<&str>, chunk: &str) -> Option<String> {
    let mut open = open_at_start.map(str::to_owned);
    for line in chunk.lines() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            open = match open {
                Some(_) => None,
                None => Some(format!("```{}", info.trim())),
            };
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fences_balanced(chunk: &str) -> bool {
        chunk
            .lines()
            .filter(|line| line.trim_start().starts_with("```"))
            .count()
            % 2
            == 0
    }

    #[test]
    fn short_text_is_one_chunk_and_blank_text_none() {
        assert_eq!(chunk_text("hello", 10), vec!["hello"]);
        assert!(chunk_text("  \n ", 10).is_empty());
    }

    #[test]
    fn ten_thousand_characters_split_at_paragraphs_within_the_limit() {
        let paragraph = "word ".repeat(60).trim_end().to_owned(); // 299 chars
        let text = vec![paragraph.as_str(); 34].join("\n\n"); // ~10,000 chars
        assert!(text.chars().count() >= 10_000);
        let chunks = chunk_text(&text, 4_096);
        assert_eq!(chunks.len(), 3);
        for chunk in &chunks {
            assert!(chunk.chars().count() <= 4_096);
            assert!(chunk.ends_with("word"), "cut at a paragraph end");
        }
        let rejoined = chunks.join("\n\n");
        assert_eq!(rejoined, text, "nothing lost or added");
    }

    #[test]
    fn a_code_fence_cut_in_two_is_closed_and_reopened_with_its_language() {
        let code: String = (0..200).map(|n| format!("let x{n} = {n};\n")).collect();
        let text = format!("Here:\n\n```rust\n{code}```\n\nDone.");
        let chunks = chunk_text(&text, 1_000);
        assert!(chunks.len() > 2);
        for (index, chunk) in chunks.iter().enumerate() {
            assert!(chunk.chars().count() <= 1_000, "chunk {index} too long");
            assert!(fences_balanced(chunk), "chunk {index}: {chunk}");
            if index > 0 && index + 1 < chunks.len() {
                assert!(chunk.starts_with("```rust\n"), "chunk {index}: {chunk}");
            }
        }
        assert!(chunks.last().unwrap().ends_with("Done."));
    }

    #[test]
    fn text_without_breaks_is_cut_anywhere_and_multibyte_characters_stay_whole() {
        let text = "é".repeat(25);
        let chunks = chunk_text(&text, 10);
        assert_eq!(chunks.len(), 3);
        assert!(chunks.iter().all(|chunk| chunk.chars().count() <= 10));
        assert_eq!(chunks.concat(), text);
    }

    #[test]
    fn tiny_limits_terminate() {
        let chunks = chunk_text("```\nabc\n```", 2);
        assert!(!chunks.is_empty());
    }
}
