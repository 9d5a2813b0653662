//! Finding `MEDIA:` lines in text (spec `openclaw-tools.md` §3.7): a line that starts (after
//! blanks) with `MEDIA:` in any case, outside fenced code blocks, names one file, optionally in
//! backticks. Pure and shared: the reply side sorts what the lines name
//! (`clawless_channels::media_lines`), a node host uploads the files a command printed, and the
//! backend rewrites those lines in the command's result. All of them must read the same lines
//! the same way, so the scanning lives here once.

/// The token that starts a media line (matched without regard to case).
pub const MEDIA_TOKEN: &str = "MEDIA:";

/// Longest candidate after `MEDIA:`, in characters; callers refuse a longer one.
pub const MAX_MEDIA_CANDIDATE_CHARS: usize = 4_096;

/// One line of a text, as [`scan_media_lines`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScannedLine<'a> {
    /// A line that is not a media request (inside a fence, a fence marker, or plain text),
    /// with its line end.
    Text(&'a str),
    /// A media line: the whole line (with its line end) and what follows `MEDIA:`, trimmed
    /// and out of its backticks (possibly empty).
    Media {
        /// The line as it was, line end included.
        line: &'a str,
        /// The candidate it names.
        candidate: &'a str,
    },
}

/// Every line of `text` in order (line ends kept, so the lines concatenate back to `text`),
/// each marked as text or as a media line.
pub fn scan_media_lines(text: &str) -> impl Iterator<Item = ScannedLine<'_>> {
    // The open fence's character and length, while inside one.
    let mut fence: Option<(char, usize)> = None;
    text.split_inclusive('\n').map(move |line| {
        let start = line.trim_end_matches(['\n', '\r']).trim_start();
        if let Some(marker) = fence_marker(start) {
            fence = match fence {
                None => Some(marker),
                Some((ch, len)) if ch == marker.0 && marker.1 >= len => None,
                open => open,
            };
            return ScannedLine::Text(line);
        }
        if fence.is_some() {
            return ScannedLine::Text(line);
        }
        match media_candidate(start) {
            Some(candidate) => ScannedLine::Media { line, candidate },
            None => ScannedLine::Text(line),
        }
    })
}

/// The candidates of `text`'s media lines, in order (empty ones included).
pub fn media_candidates(text: &str) -> Vec<&str> {
    scan_media_lines(text)
        .filter_map(|line| match line {
            ScannedLine::Media { candidate, .. } => Some(candidate),
            ScannedLine::Text(_) => None,
        })
        .collect()
}

/// True when `text` contains `MEDIA:` in any case anywhere: a cheap test before scanning.
pub fn mentions_media(text: &str) -> bool {
    text.as_bytes()
        .windows(MEDIA_TOKEN.len())
        .any(|window| window.eq_ignore_ascii_case(MEDIA_TOKEN.as_bytes()))
}

/// The fence a line (without its leading blanks) opens or closes: three or more backticks or
/// tildes.
pub fn fence_marker(line: &str) -> Option<(char, usize)> {
    let ch = line.chars().next().filter(|ch| *ch == '`' || *ch == '~')?;
    let len = line.chars().take_while(|c| *c == ch).count();
    (len >= 3).then_some((ch, len))
}

/// What follows `MEDIA:` at the start of `line` (without its leading blanks), trimmed and out
/// of its backticks; `None` when the line does not start with the token.
pub fn media_candidate(line: &str) -> Option<&str> {
    let head = line.get(..MEDIA_TOKEN.len())?;
    if !head.eq_ignore_ascii_case(MEDIA_TOKEN) {
        return None;
    }
    let rest = line[MEDIA_TOKEN.len()..].trim();
    let rest = rest.strip_prefix('`').unwrap_or(rest);
    let rest = rest.strip_suffix('`').unwrap_or(rest);
    Some(rest.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_lines_outside_fences_are_found_and_lines_concatenate_back() {
        let text = "chart:\r\nMEDIA: `./a.png`\n```\nMEDIA:inside.png\n```\n  media:/tmp/b.pdf\nsay MEDIA:x";
        let lines: Vec<ScannedLine<'_>> = scan_media_lines(text).collect();
        let rebuilt: String = lines
            .iter()
            .map(|line| match line {
                ScannedLine::Text(line) | ScannedLine::Media { line, .. } => *line,
            })
            .collect();
        assert_eq!(rebuilt, text);
        assert_eq!(media_candidates(text), vec!["./a.png", "/tmp/b.pdf"]);
    }

    #[test]
    fn the_cheap_test_sees_the_token_in_any_case() {
        assert!(mentions_media("x\nmedia:y"));
        assert!(mentions_media("MeDiA:"));
        assert!(!mentions_media("MEDIA ; nothing"));
        assert!(!mentions_media(""));
    }
}
