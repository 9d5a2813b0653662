//! Output directives a model may put in a reply (`[[reply_to_current]]`, `[[reply_to:<id>]]`,
//! `[[audio_as_voice]]`) and silent tokens (`NO_REPLY`, `HEARTBEAT_OK`): taken out of the text
//! before it reaches a platform, with what they asked for kept for the sender.

use clawless_base::reply_tokens::SILENT_REPLIES;

/// The channels whose senders honour reply tags (`[[reply_to_current]]`, `[[reply_to:<id>]]`):
/// the prompt's `## Reply Tags` is sent only to their sessions. The generic channel passes a
/// reply's text through untouched.
pub const REPLY_TAG_CHANNELS: [&str; 3] = ["telegram", "slack", "discord"];

/// Whether `channel`'s sender honours reply tags.
pub fn honours_reply_tags(channel: &str) -> bool {
    REPLY_TAG_CHANNELS.contains(&channel)
}

/// What a reply's directives asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directives {
    /// `[[reply_to_current]]`: reply to the message that started the turn.
    pub reply_to_current: bool,
    /// `[[reply_to:<id>]]`: reply to that message.
    pub reply_to: Option<String>,
    /// `[[audio_as_voice]]` (no platform here sends audio; noted and dropped).
    pub audio_as_voice: bool,
}

/// The text without directives (and `None` when what is left is empty or a silent token), and
/// the directives found.
pub fn strip_directives(text: &str) -> (Option<String>, Directives) {
    let mut directives = Directives::default();
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        let Some(end) = rest[start..].find("]]") else {
            break;
        };
        let inner = rest[start + 2..start + end].trim();
        let known = if inner == "reply_to_current" {
            directives.reply_to_current = true;
            true
        } else if inner == "audio_as_voice" {
            directives.audio_as_voice = true;
            true
        } else if let Some(id) = inner.strip_prefix("reply_to:") {
            let id = id.trim();
            if !id.is_empty() && id.len() <= 128 && !id.chars().any(char::is_whitespace) {
                directives.reply_to = Some(id.to_owned());
                true
            } else {
                false
            }
        } else {
            false
        };
        if known {
            out.push_str(&rest[..start]);
        } else {
            out.push_str(&rest[..start + end + 2]);
        }
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    let cleaned = out.trim();
    let visible =
        (!cleaned.is_empty() && !SILENT_REPLIES.contains(&cleaned)).then(|| cleaned.to_owned());
    (visible, directives)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_are_taken_out_and_remembered() {
        let (text, directives) = strip_directives("[[reply_to_current]] Sure, done.");
        assert_eq!(text.as_deref(), Some("Sure, done."));
        assert!(directives.reply_to_current);
        let (text, directives) = strip_directives("Yes [[reply_to:4711]]\n[[audio_as_voice]]");
        assert_eq!(text.as_deref(), Some("Yes"));
        assert_eq!(directives.reply_to.as_deref(), Some("4711"));
        assert!(directives.audio_as_voice);
    }

    #[test]
    fn unknown_brackets_stay_and_silent_tokens_send_nothing() {
        let (text, _) = strip_directives("a [[not a directive]] b [[");
        assert_eq!(text.as_deref(), Some("a [[not a directive]] b [["));
        assert_eq!(strip_directives("[[reply_to_current]] NO_REPLY").0, None);
        assert_eq!(strip_directives("HEARTBEAT_OK").0, None);
        assert_eq!(strip_directives("  ").0, None);
    }
}
