//! `MEDIA:` lines: a reply asks for a file to be attached by putting `MEDIA:<path-or-url>` on
//! a line of its own (spec `openclaw-tools.md` §3.7). [`extract_media_lines`] takes those lines
//! out of the text and sorts what they name into references the caller may load (a relative
//! workspace path, an `http(s)` URL) and refusals with a reason (absolute paths, `~`, `..`,
//! other schemes). Lines inside fenced code blocks are text, never requests.
//!
//! Pure: nothing is read or fetched here; whether URLs are fetched is the caller's decision.
//! Which lines are media lines is [`clawless_base::media_lines`]'s rule, shared with the node
//! host (which uploads the files a command printed) and the backend.

use clawless_base::media_lines::{MAX_MEDIA_CANDIDATE_CHARS, ScannedLine, scan_media_lines};
#[cfg(test)]
use clawless_base::media_lines::{MEDIA_TOKEN as TOKEN, fence_marker, media_candidate};

use crate::directives::strip_directives;

/// Longest candidate after `MEDIA:`, in characters; a longer one is refused.
pub const MAX_REFERENCE_CHARS: usize = MAX_MEDIA_CANDIDATE_CHARS;

/// A file a `MEDIA:` line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MediaRef {
    /// A path relative to the agent's workspace, normalised (`./` and empty segments dropped,
    /// `\` read as `/`), never with `..`.
    Workspace(String),
    /// An `http` or `https` URL, as written.
    Url(String),
}

/// A `MEDIA:` line whose candidate is not delivered, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedMedia {
    /// What followed `MEDIA:` (cut to [`MAX_REFERENCE_CHARS`] characters).
    pub candidate: String,
    /// Why it is refused, for a log line or a note to the model.
    pub reason: String,
}

/// What [`extract_media_lines`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MediaLines {
    /// The text without its `MEDIA:` lines, trimmed.
    pub text: String,
    /// The accepted references, in the order they appear.
    pub media: Vec<MediaRef>,
    /// The refused candidates, in the order they appear.
    pub refused: Vec<RefusedMedia>,
    /// The reply carries `[[audio_as_voice]]`: audio goes as a voice note.
    pub audio_as_voice: bool,
}

/// Takes the `MEDIA:` lines out of `text`: a line that starts (after blanks) with `MEDIA:` in
/// any case, outside fenced code blocks, names one file, optionally in backticks. `\r\n` line
/// ends are kept on the lines that stay.
pub fn extract_media_lines(text: &str) -> MediaLines {
    let mut found = MediaLines {
        audio_as_voice: strip_directives(text).1.audio_as_voice,
        ..MediaLines::default()
    };
    let mut kept = String::with_capacity(text.len());
    for scanned in scan_media_lines(text) {
        let candidate = match scanned {
            ScannedLine::Text(line) => {
                kept.push_str(line);
                continue;
            }
            ScannedLine::Media { candidate, .. } => candidate,
        };
        match check_reference(candidate) {
            Ok(reference) => found.media.push(reference),
            Err(reason) => found.refused.push(RefusedMedia {
                candidate: candidate.chars().take(MAX_REFERENCE_CHARS).collect(),
                reason,
            }),
        }
    }
    found.text = kept.trim().to_owned();
    found
}

/// A candidate (what follows `MEDIA:`, or a `message` tool's `media`) as a reference, or why
/// it is refused.
pub fn check_reference(candidate: &str) -> Result<MediaRef, String> {
    if candidate.is_empty() {
        return Err("nothing follows MEDIA:".to_owned());
    }
    if candidate.chars().count() > MAX_REFERENCE_CHARS {
        return Err(format!("longer than {MAX_REFERENCE_CHARS} characters"));
    }
    if candidate.chars().any(char::is_control) {
        return Err("contains control characters".to_owned());
    }
    if let Some(scheme) = scheme_of(candidate) {
        if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
            return Err(format!(
                "only workspace paths and http(s) URLs are delivered, not {scheme}:"
            ));
        }
        return match url::Url::parse(candidate) {
            Ok(url) if url.host_str().is_some_and(|host| !host.is_empty()) => {
                Ok(MediaRef::Url(candidate.to_owned()))
            }
            _ => Err("not a valid http(s) URL".to_owned()),
        };
    }
    if candidate.starts_with('~') {
        return Err("paths under a home directory (~) are not delivered".to_owned());
    }
    if candidate.starts_with(['/', '\\']) || is_drive_path(candidate) {
        return Err("absolute paths are not delivered; name a path in the workspace".to_owned());
    }
    let mut segments = Vec::new();
    for segment in candidate.split(['/', '\\']) {
        match segment {
            ".." => return Err("paths with `..` segments are not delivered".to_owned()),
            "" | "." => {}
            other => segments.push(other),
        }
    }
    if segments.is_empty() {
        return Err("names no file".to_owned());
    }
    Ok(MediaRef::Workspace(segments.join("/")))
}

/// The URL scheme `candidate` starts with (`https` of `https://…`), if any; a Windows drive
/// letter is not one.
fn scheme_of(candidate: &str) -> Option<&str> {
    let (scheme, _) = candidate.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '+' | '-' | '.'))
        && !is_drive_path(candidate);
    valid.then_some(scheme)
}

/// `C:\…` or `C:/…`.
fn is_drive_path(candidate: &str) -> bool {
    let bytes = candidate.as_bytes();
    bytes.len() >= 2
        && bytes[0].is_ascii_alphabetic()
        && bytes[1] == b':'
        && bytes.get(2).is_none_or(|b| *b == b'/' || *b == b'\\')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workspace(path: &str) -> MediaRef {
        MediaRef::Workspace(path.to_owned())
    }

    #[test]
    fn media_lines_are_taken_out_and_their_references_kept() {
        let found = extract_media_lines(
            "Here is the chart.\nMEDIA: out/chart.png\n  media:`./report.pdf`\n\
             MEDIA:https://example.com/a.jpg\nThanks.",
        );
        assert_eq!(found.text, "Here is the chart.\nThanks.");
        assert_eq!(
            found.media,
            vec![
                workspace("out/chart.png"),
                workspace("report.pdf"),
                MediaRef::Url("https://example.com/a.jpg".to_owned()),
            ]
        );
        assert!(found.refused.is_empty());
        assert!(!found.audio_as_voice);
    }

    #[test]
    fn escapes_from_the_workspace_are_refused_with_a_reason() {
        let found = extract_media_lines(
            "MEDIA:../secret.txt\nMEDIA: a/../../b.png\nMEDIA:~/notes.md\nMEDIA:/etc/passwd\n\
             MEDIA:C:\\x.png\nMEDIA:file:///etc/passwd\nMEDIA:\nMEDIA:`..\\up.png`\nok",
        );
        assert_eq!(found.text, "ok");
        assert!(found.media.is_empty());
        let reasons: Vec<(&str, &str)> = found
            .refused
            .iter()
            .map(|r| (r.candidate.as_str(), r.reason.as_str()))
            .collect();
        assert_eq!(reasons.len(), 8, "{reasons:?}");
        assert!(reasons[0].1.contains(".."));
        assert!(reasons[1].1.contains(".."));
        assert!(reasons[2].1.contains('~'));
        assert!(reasons[3].1.contains("absolute"));
        assert!(reasons[4].1.contains("absolute"));
        assert!(reasons[5].1.contains("file:"));
        assert_eq!(reasons[6].1, "nothing follows MEDIA:");
        assert_eq!(reasons[7].0, "..\\up.png");
        assert!(reasons[7].1.contains(".."));
    }

    #[test]
    fn lines_inside_code_fences_stay_text() {
        let text = "Example:\n```sh\necho MEDIA:out.png\nMEDIA:inside.png\n```\nMEDIA:after.png";
        let found = extract_media_lines(text);
        assert_eq!(
            found.text,
            "Example:\n```sh\necho MEDIA:out.png\nMEDIA:inside.png\n```"
        );
        assert_eq!(found.media, vec![workspace("after.png")]);
        // A tilde fence is not closed by backticks.
        let found = extract_media_lines("~~~\n```\nMEDIA:x.png\n~~~\nMEDIA:y.png");
        assert_eq!(found.media, vec![workspace("y.png")]);
    }

    #[test]
    fn crlf_lines_keep_their_ends_and_only_line_starts_count() {
        let found = extract_media_lines("one\r\nMEDIA:a b.png\r\ntwo MEDIA:c.png\r\nthree\r\n");
        assert_eq!(found.text, "one\r\ntwo MEDIA:c.png\r\nthree");
        assert_eq!(found.media, vec![workspace("a b.png")]);
    }

    #[test]
    fn long_candidates_are_refused_and_voice_is_noticed() {
        let long = "a".repeat(MAX_REFERENCE_CHARS + 1);
        let found = extract_media_lines(&format!("MEDIA:{long}\n[[audio_as_voice]]\nMEDIA:v.ogg"));
        assert_eq!(found.refused.len(), 1);
        assert_eq!(
            found.refused[0].candidate.chars().count(),
            MAX_REFERENCE_CHARS
        );
        assert!(found.refused[0].reason.contains("4096"));
        assert_eq!(found.media, vec![workspace("v.ogg")]);
        assert!(found.audio_as_voice);
        assert_eq!(found.text, "[[audio_as_voice]]");
        let exact = "b".repeat(MAX_REFERENCE_CHARS);
        assert_eq!(
            extract_media_lines(&format!("MEDIA:{exact}")).media,
            vec![workspace(&exact)]
        );
    }

    #[test]
    fn urls_must_be_http_with_a_host() {
        let found = extract_media_lines("MEDIA:HTTP://x.org/a.png\nMEDIA:https://\nMEDIA:data:x");
        assert_eq!(
            found.media,
            vec![MediaRef::Url("HTTP://x.org/a.png".to_owned())]
        );
        assert_eq!(found.refused.len(), 2);
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    use super::*;

    /// Lines made of pieces that matter to the parser: the token in two cases, separators,
    /// `..`, `~`, backticks, schemes, blanks.
    fn line() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "MEDIA:",
                "media:",
                " ",
                "a",
                "b.png",
                "/",
                "\\",
                "..",
                ".",
                "~",
                "`",
                "C:",
                "http://",
                "https://h",
                "file:",
                "x y",
            ]),
            0..8,
        )
        .prop_map(|pieces| pieces.concat())
        .prop_filter("no fences", |line| {
            fence_marker(line.trim_start()).is_none()
        })
    }

    proptest! {
        #[test]
        fn accepted_paths_stay_in_the_workspace_and_every_media_line_is_accounted_for(
            lines in prop::collection::vec(line(), 0..8),
            crlf in any::<bool>(),
        ) {
            let text = lines.join(if crlf { "\r\n" } else { "\n" });
            let found = extract_media_lines(&text);
            for reference in &found.media {
                if let MediaRef::Workspace(path) = reference {
                    prop_assert!(!path.is_empty());
                    prop_assert!(!path.starts_with(['/', '~']), "{path}");
                    prop_assert!(!path.contains('\\'), "{path}");
                    prop_assert!(path.split('/').all(|s| s != ".." && !s.is_empty()), "{path}");
                    prop_assert!(!is_drive_path(path), "{path}");
                }
            }
            // No fences in these lines: every line starting with the token is taken out and
            // either accepted or refused.
            let media_lines = lines
                .iter()
                .filter(|line| {
                    line.trim_start().get(..TOKEN.len())
                        .is_some_and(|head| head.eq_ignore_ascii_case(TOKEN))
                })
                .count();
            prop_assert_eq!(found.media.len() + found.refused.len(), media_lines);
            for kept in found.text.lines() {
                prop_assert!(media_candidate(kept.trim_start()).is_none(), "{kept:?}");
            }
        }
    }
}
