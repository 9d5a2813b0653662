//! What becomes of a heartbeat's reply: the `HEARTBEAT_OK` strip (heartbeat mode, where a
//! short remainder is still an acknowledgement, and message mode for ordinary replies), the
//! `responsePrefix`, and the decision between staying silent, sending `HEARTBEAT_OK`, sending
//! an alert, or not sending it (duplicate within 24 h, no target, alerts hidden).

use clawless_base::reply_tokens::HEARTBEAT_OK_TOKEN;

use super::config::{HeartbeatConfig, HeartbeatVisibility};

/// How long an alert identical to the last one sent stays suppressed.
pub const DUPLICATE_ALERT_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;

/// The prefix marking a payload as the model's reasoning.
pub const REASONING_PREFIX: &str = "Reasoning:";

/// The most non-word characters after a trailing `HEARTBEAT_OK` that are stripped with it.
const MAX_TRAILING_PUNCTUATION: usize = 4;

/// Which rules the strip follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripMode {
    /// A heartbeat's reply: a remainder up to `ackMaxChars` long is still an acknowledgement.
    Heartbeat,
    /// An ordinary reply: only a reply that is nothing but the token is dropped.
    Message,
}

/// The outcome of [`strip_heartbeat_token`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrippedReply {
    /// Send nothing: the reply was empty, only the token, or (heartbeat mode) an
    /// acknowledgement with a short remainder.
    pub should_skip: bool,
    /// What is left to send (empty when skipping).
    pub text: String,
    /// The token was found at the start or end and removed.
    pub did_strip: bool,
}

/// Removes `HEARTBEAT_OK` from the edges of a reply.
///
/// 1. A missing or blank reply is skipped (`did_strip` false).
/// 2. The reply is trimmed, and a second copy is made with HTML tags turned into spaces,
///    `&nbsp;` into a space and leading and trailing `*`, `` ` ``, `~`, `_` removed, so
///    `<b>HEARTBEAT_OK</b>` and `**HEARTBEAT_OK**` count. If neither copy contains the token,
///    the trimmed reply is returned as is.
/// 3. From each copy the token is removed again and again at the start, or at the end when
///    followed by at most four non-word characters (not `[A-Za-z0-9_]`); that punctuation is
///    kept only when text precedes the token (`I should not respond HEARTBEAT_OK.` →
///    `I should not respond.`). Whitespace is then collapsed. A token in the middle stays.
/// 4. The plain copy's result is used when it stripped something and left text; otherwise
///    the marked-up copy's.
/// 5. Nothing left → skipped. In heartbeat mode a remainder of at most `ack_max_chars`
///    characters (Unicode scalar values) is skipped too; a longer one is the text to send.
pub fn strip_heartbeat_token(
    raw: Option<&str>, mode: StripMode, ack_max_chars: usize,
) -> StrippedReply {
    let trimmed = raw.map(str::trim).unwrap_or_default();
    if trimmed.is_empty() {
        return skip(false);
    }
    let normalized = strip_markup(trimmed);
    if !trimmed.contains(HEARTBEAT_OK_TOKEN) && !normalized.contains(HEARTBEAT_OK_TOKEN) {
        return unchanged(trimmed);
    }
    let plain = strip_token_at_edges(trimmed);
    let picked = if plain.1 && !plain.0.is_empty() {
        plain
    } else {
        strip_token_at_edges(&normalized)
    };
    let (rest, did_strip) = picked;
    if !did_strip {
        return unchanged(trimmed);
    }
    if rest.is_empty() {
        return skip(true);
    }
    if mode == StripMode::Heartbeat && rest.chars().count() <= ack_max_chars {
        return skip(true);
    }
    StrippedReply {
        should_skip: false,
        text: rest,
        did_strip: true,
    }
}

fn skip(did_strip: bool) -> StrippedReply {
    StrippedReply {
        should_skip: true,
        text: String::new(),
        did_strip,
    }
}

fn unchanged(text: &str) -> StrippedReply {
    StrippedReply {
        should_skip: false,
        text: text.to_owned(),
        did_strip: false,
    }
}

/// The marked-up copy of step 2.
fn strip_markup(text: &str) -> String {
    let mut without_tags = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('<') {
        without_tags.push_str(&rest[..open]);
        match rest[open..].find('>') {
            Some(close) => {
                without_tags.push(' ');
                rest = &rest[open + close + 1..];
            }
            None => {
                without_tags.push_str(&rest[open..]);
                rest = "";
            }
        }
    }
    without_tags.push_str(rest);
    let spaced = replace_ignore_ascii_case(&without_tags, "&nbsp;", " ");
    let wrappers: &[char] = &['*', '`', '~', '_'];
    spaced
        .trim_start_matches(wrappers)
        .trim_end_matches(wrappers)
        .to_owned()
}

fn replace_ignore_ascii_case(text: &str, needle: &str, replacement: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest
            .get(..needle.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(needle))
        {
            out.push_str(replacement);
            rest = &rest[needle.len()..];
        } else {
            let mut chars = rest.chars();
            if let Some(c) = chars.next() {
                out.push(c);
            }
            rest = chars.as_str();
        }
    }
    out
}

/// Step 3 on one copy: the remaining text (whitespace collapsed) and whether the token went.
fn strip_token_at_edges(raw: &str) -> (String, bool) {
    let mut text = raw.trim().to_owned();
    if text.is_empty() || !text.contains(HEARTBEAT_OK_TOKEN) {
        return (text, false);
    }
    let mut did_strip = false;
    loop {
        let current = text.trim();
        if let Some(after) = current.strip_prefix(HEARTBEAT_OK_TOKEN) {
            text = after.trim_start().to_owned();
            did_strip = true;
            continue;
        }
        let Some(at) = trailing_token_at(current) else {
            break;
        };
        let before = current[..at].trim_end();
        text = if before.is_empty() {
            String::new()
        } else {
            let punctuation = current[at + HEARTBEAT_OK_TOKEN.len()..].trim_start();
            format!("{before}{punctuation}").trim_end().to_owned()
        };
        did_strip = true;
    }
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    (collapsed, did_strip)
}

/// Where the token starts when only a few non-word characters follow it to the end.
fn trailing_token_at(text: &str) -> Option<usize> {
    let at = text.rfind(HEARTBEAT_OK_TOKEN)?;
    let tail = &text[at + HEARTBEAT_OK_TOKEN.len()..];
    let short = tail.chars().count() <= MAX_TRAILING_PUNCTUATION;
    let no_word = !tail.chars().any(|c| c.is_ascii_alphanumeric() || c == '_');
    (short && no_word).then_some(at)
}

/// A normal (non-heartbeat) reply with a stray `HEARTBEAT_OK` removed from its start or end:
/// `None` when nothing is left to send.
pub fn strip_stray_heartbeat_token(reply: &str) -> Option<String> {
    let stripped = strip_heartbeat_token(Some(reply), StripMode::Message, 0);
    (!stripped.should_skip).then_some(stripped.text)
}

/// `text` without a leading `responsePrefix` (for example `🤖`). The prefix is only removed
/// when the end of the text, whitespace or ASCII punctuation follows it, so a prefix that
/// happens to start a word stays.
pub fn strip_response_prefix<'a>(text: &'a str, prefix: Option<&str>) -> &'a str {
    let trimmed = text.trim_start();
    let Some(prefix) = prefix.map(str::trim).filter(|prefix| !prefix.is_empty()) else {
        return trimmed;
    };
    match trimmed.strip_prefix(prefix) {
        Some(rest)
            if rest
                .chars()
                .next()
                .is_none_or(|c| c.is_whitespace() || c.is_ascii_punctuation()) =>
        {
            rest.trim_start()
        }
        _ => trimmed,
    }
}

/// One payload of a heartbeat turn's reply, in the order produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplyPayload {
    /// Its text (may be empty for a media-only payload). A text starting with `Reasoning:`
    /// is the model's reasoning.
    pub text: String,
    /// It carries media (an image, a file).
    pub has_media: bool,
    /// It is a warning about a failed tool.
    pub is_tool_error_warning: bool,
}

impl ReplyPayload {
    fn is_reasoning(&self) -> bool {
        self.text.trim_start().starts_with(REASONING_PREFIX)
    }

    fn has_content(&self) -> bool {
        self.has_media || !self.text.trim().is_empty()
    }
}

/// Why an alert has nowhere to go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoTargetReason {
    /// `target` is `none` (the default).
    TargetNone,
    /// The target resolved to no channel or no recipient.
    NoTarget,
    /// `accountId` is not an account of the channel.
    UnknownAccount,
    /// The recipient is a direct chat and `directPolicy` is `block`.
    DmBlocked,
}

impl NoTargetReason {
    /// `target-none`, `no-target`, `unknown-account` or `dm-blocked`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::TargetNone => "target-none",
            Self::NoTarget => "no-target",
            Self::UnknownAccount => "unknown-account",
            Self::DmBlocked => "dm-blocked",
        }
    }
}

/// Whether the heartbeat's delivery target can take a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeliveryReadiness {
    /// A channel and recipient are resolved and the channel is ready.
    Ready,
    /// There is no usable target.
    NoTarget(NoTargetReason),
    /// The target resolved but its channel is not ready; the reason is reported as is.
    ChannelNotReady(String),
}

/// The last alert a session's heartbeats sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LastHeartbeatAlert<'a> {
    /// Its text (`lastHeartbeatText`).
    pub text: &'a str,
    /// When it was sent (`lastHeartbeatSentAt`).
    pub sent_at_ms: u64,
}

/// Everything [`decide_heartbeat_reply`] looks at.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatReplyFacts<'a> {
    /// The turn's reply payloads, in order.
    pub payloads: &'a [ReplyPayload],
    /// The agent's effective heartbeat settings (`ackMaxChars`, `includeReasoning`,
    /// `suppressToolErrorWarnings`).
    pub config: &'a HeartbeatConfig,
    /// The configured `responsePrefix`, if any.
    pub response_prefix: Option<&'a str>,
    /// The heartbeat reported a finished background command: its reply is never an
    /// acknowledgement.
    pub exec_completion: bool,
    /// What the target channel may show.
    pub visibility: HeartbeatVisibility,
    /// Whether the target can take a message.
    pub delivery: &'a DeliveryReadiness,
    /// The session's last heartbeat alert.
    pub last_alert: Option<LastHeartbeatAlert<'a>>,
    /// Now, in epoch milliseconds.
    pub now_ms: u64,
}

/// Which acknowledgement a reply was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// Nothing to send at all (`ok-empty`).
    Empty,
    /// `HEARTBEAT_OK`, possibly with a short remainder (`ok-token`).
    Token,
}

/// What to do with a heartbeat's reply. Every variant is a heartbeat that `ran`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatOutcome {
    /// An acknowledgement; send nothing. The session's `updatedAt` goes back to its value
    /// before the heartbeat (heartbeats do not keep sessions alive).
    AckSilent(AckKind),
    /// An acknowledgement the channel shows (`showOk`): send `text` (`HEARTBEAT_OK`, after
    /// the `responsePrefix` and a space when one is set). `updatedAt` is restored as well.
    AckShowOk {
        /// Which acknowledgement.
        kind: AckKind,
        /// What to send.
        text: String,
    },
    /// Send the alert (the reasoning payloads first), then store `text` and now as the
    /// session's last heartbeat alert.
    Alert {
        /// The alert text.
        text: String,
        /// `Reasoning:` payloads to send before it (only with `includeReasoning`).
        reasoning: Vec<String>,
        /// The main payload's media go with it.
        has_media: bool,
    },
    /// The same alert was sent less than 24 hours ago; send nothing.
    Duplicate,
    /// The alert has nowhere to go.
    NoTarget(NoTargetReason),
    /// The channel hides alerts (`showAlerts: false`); send nothing.
    AlertsDisabled,
    /// The target channel is not ready; send nothing.
    ChannelNotReady(String),
}

impl HeartbeatOutcome {
    /// The heartbeat event's status: `ok-empty`, `ok-token`, `sent` or `skipped`.
    pub fn event_status(&self) -> &'static str {
        match self {
            Self::AckSilent(AckKind::Empty)
            | Self::AckShowOk {
                kind: AckKind::Empty,
                ..
            } => "ok-empty",
            Self::AckSilent(AckKind::Token)
            | Self::AckShowOk {
                kind: AckKind::Token,
                ..
            } => "ok-token",
            Self::Alert { .. } => "sent",
            Self::Duplicate
            | Self::NoTarget(_)
            | Self::AlertsDisabled
            | Self::ChannelNotReady(_) => "skipped",
        }
    }

    /// The heartbeat event's reason, for the skipped outcomes.
    pub fn event_reason(&self) -> Option<&str> {
        match self {
            Self::Duplicate => Some("duplicate"),
            Self::NoTarget(reason) => Some(reason.as_str()),
            Self::AlertsDisabled => Some("alerts-disabled"),
            Self::ChannelNotReady(reason) => Some(reason),
            Self::AckSilent(_) | Self::AckShowOk { .. } | Self::Alert { .. } => None,
        }
    }

    /// True when nothing is sent to the chat.
    pub fn is_silent(&self) -> bool {
        !matches!(self, Self::AckShowOk { .. } | Self::Alert { .. })
    }

    /// True for acknowledgements: the session's `updatedAt` is restored.
    pub fn is_ack(&self) -> bool {
        matches!(self, Self::AckSilent(_) | Self::AckShowOk { .. })
    }
}

/// Decides what happens to a heartbeat's reply:
///
/// 1. The main payload is the last one with text or media, leaving out `Reasoning:` payloads
///    and, with `suppressToolErrorWarnings`, tool-error warnings. None → `ok-empty`.
/// 2. A leading `responsePrefix` is removed, then `HEARTBEAT_OK` is stripped in heartbeat
///    mode ([`strip_heartbeat_token`]). A skip without media is an acknowledgement: `showOk`
///    with a ready target sends `HEARTBEAT_OK`, otherwise silence. After a finished
///    background command the reply is never an acknowledgement: the alert is the reply with
///    a stray token removed (message mode), or the reply as written when that leaves nothing.
/// 3. An alert without media equal (trimmed) to the session's last alert sent under 24 hours
///    ago → `duplicate`; then no target → its reason; then `showAlerts: false` →
///    `alerts-disabled`; then a channel that is not ready → its reason; else send.
pub fn decide_heartbeat_reply(facts: &HeartbeatReplyFacts<'_>) -> HeartbeatOutcome {
    let config = facts.config;
    let kept: Vec<&ReplyPayload> = facts
        .payloads
        .iter()
        .filter(|payload| !(config.suppress_tool_error_warnings() && payload.is_tool_error_warning))
        .collect();
    let main = kept
        .iter()
        .rev()
        .find(|payload| !payload.is_reasoning() && payload.has_content());
    let Some(main) = main else {
        return acknowledge(AckKind::Empty, facts);
    };

    let text = strip_response_prefix(&main.text, facts.response_prefix).trim();
    let alert_text = if facts.exec_completion {
        // Never an acknowledgement: only a stray token is removed, and a reply that was
        // nothing but the token goes out as written.
        let stripped = strip_heartbeat_token(Some(text), StripMode::Message, 0);
        if stripped.text.is_empty() {
            text.to_owned()
        } else {
            stripped.text
        }
    } else {
        let stripped =
            strip_heartbeat_token(Some(text), StripMode::Heartbeat, config.ack_max_chars());
        if !stripped.should_skip || main.has_media {
            stripped.text
        } else {
            let kind = if text.is_empty() {
                AckKind::Empty
            } else {
                AckKind::Token
            };
            return acknowledge(kind, facts);
        }
    };

    let duplicate = !main.has_media
        && facts.last_alert.is_some_and(|last| {
            last.text.trim() == alert_text.trim()
                && facts.now_ms.saturating_sub(last.sent_at_ms) < DUPLICATE_ALERT_WINDOW_MS
        });
    if duplicate {
        return HeartbeatOutcome::Duplicate;
    }
    match facts.delivery {
        DeliveryReadiness::NoTarget(reason) => return HeartbeatOutcome::NoTarget(*reason),
        _ if !facts.visibility.show_alerts => return HeartbeatOutcome::AlertsDisabled,
        DeliveryReadiness::ChannelNotReady(reason) => {
            return HeartbeatOutcome::ChannelNotReady(reason.clone());
        }
        DeliveryReadiness::Ready => {}
    }
    let reasoning = if config.include_reasoning() {
        kept.iter()
            .filter(|payload| payload.is_reasoning())
            .map(|payload| payload.text.trim().to_owned())
            .collect()
    } else {
        Vec::new()
    };
    HeartbeatOutcome::Alert {
        text: alert_text,
        reasoning,
        has_media: main.has_media,
    }
}

fn acknowledge(kind: AckKind, facts: &HeartbeatReplyFacts<'_>) -> HeartbeatOutcome {
    if !facts.visibility.show_ok || *facts.delivery != DeliveryReadiness::Ready {
        return HeartbeatOutcome::AckSilent(kind);
    }
    let text = match facts.response_prefix.map(str::trim) {
        Some(prefix) if !prefix.is_empty() => format!("{prefix} {HEARTBEAT_OK_TOKEN}"),
        _ => HEARTBEAT_OK_TOKEN.to_owned(),
    };
    HeartbeatOutcome::AckShowOk { kind, text }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: u64 = 3_600_000;

    fn strip(raw: &str, mode: StripMode) -> StrippedReply {
        strip_heartbeat_token(Some(raw), mode, 300)
    }

    fn skipped(did_strip: bool) -> StrippedReply {
        StrippedReply {
            should_skip: true,
            text: String::new(),
            did_strip,
        }
    }

    fn kept(text: &str, did_strip: bool) -> StrippedReply {
        StrippedReply {
            should_skip: false,
            text: text.to_owned(),
            did_strip,
        }
    }

    fn payload(text: &str) -> ReplyPayload {
        ReplyPayload {
            text: text.to_owned(),
            has_media: false,
            is_tool_error_warning: false,
        }
    }

    struct Reply<'a> {
        payloads: Vec<ReplyPayload>,
        config: HeartbeatConfig,
        response_prefix: Option<&'a str>,
        exec_completion: bool,
        visibility: HeartbeatVisibility,
        delivery: DeliveryReadiness,
        last_alert: Option<LastHeartbeatAlert<'a>>,
        now_ms: u64,
    }

    impl<'a> Reply<'a> {
        fn new(texts: &[&str]) -> Self {
            Self {
                payloads: texts.iter().map(|text| payload(text)).collect(),
                config: HeartbeatConfig::default(),
                response_prefix: None,
                exec_completion: false,
                visibility: HeartbeatVisibility::default(),
                delivery: DeliveryReadiness::Ready,
                last_alert: None,
                now_ms: 100 * HOUR,
            }
        }

        fn decide(&self) -> HeartbeatOutcome {
            decide_heartbeat_reply(&HeartbeatReplyFacts {
                payloads: &self.payloads,
                config: &self.config,
                response_prefix: self.response_prefix,
                exec_completion: self.exec_completion,
                visibility: self.visibility,
                delivery: &self.delivery,
                last_alert: self.last_alert,
                now_ms: self.now_ms,
            })
        }
    }

    fn alert(text: &str) -> HeartbeatOutcome {
        HeartbeatOutcome::Alert {
            text: text.to_owned(),
            reasoning: Vec::new(),
            has_media: false,
        }
    }

    #[test]
    fn the_bare_token_is_skipped_and_stripped_while_blank_is_skipped_unstripped() {
        // Spec §6 vector 1.
        assert_eq!(strip("HEARTBEAT_OK", StripMode::Heartbeat), skipped(true));
        assert_eq!(
            strip_heartbeat_token(None, StripMode::Heartbeat, 300),
            skipped(false)
        );
        assert_eq!(strip("  ", StripMode::Heartbeat), skipped(false));
    }

    #[test]
    fn a_short_remainder_around_the_token_is_still_an_ack() {
        // Spec §6 vector 2: "ALERT" is 5 characters, within ackMaxChars 300.
        assert_eq!(
            strip("HEARTBEAT_OK 🦞", StripMode::Heartbeat),
            skipped(true)
        );
        assert_eq!(
            strip("ALERT HEARTBEAT_OK", StripMode::Heartbeat),
            skipped(true)
        );
    }

    #[test]
    fn a_remainder_longer_than_ack_max_chars_is_an_alert() {
        // Spec §6 vector 3.
        let long = "A".repeat(301);
        assert_eq!(
            strip(&format!("{long} HEARTBEAT_OK"), StripMode::Heartbeat),
            kept(&long, true)
        );
        // Exactly at the limit is still an ack.
        let at_limit = "A".repeat(300);
        assert_eq!(
            strip(&format!("{at_limit} HEARTBEAT_OK"), StripMode::Heartbeat),
            skipped(true)
        );
        assert_eq!(
            strip_heartbeat_token(Some("ok HEARTBEAT_OK"), StripMode::Heartbeat, 0),
            kept("ok", true)
        );
    }

    #[test]
    fn message_mode_strips_the_token_at_the_edges_only() {
        // Spec §6 vector 4.
        assert_eq!(
            strip("HEARTBEAT_OK hello", StripMode::Message),
            kept("hello", true)
        );
        assert_eq!(
            strip("hello HEARTBEAT_OK there", StripMode::Message),
            kept("hello HEARTBEAT_OK there", false)
        );
    }

    #[test]
    fn markup_and_trailing_punctuation_around_the_token_still_ack() {
        // Spec §6 vector 5.
        for raw in [
            "<b>HEARTBEAT_OK</b>",
            "**HEARTBEAT_OK**",
            "HEARTBEAT_OK.",
            "HEARTBEAT_OK!!!",
            "HEARTBEAT_OK---",
        ] {
            let stripped = strip(raw, StripMode::Heartbeat);
            assert!(
                stripped.should_skip && stripped.did_strip,
                "{raw}: {stripped:?}"
            );
        }
    }

    #[test]
    fn text_before_the_token_keeps_its_punctuation_in_message_mode() {
        // Spec §6 vector 6.
        assert_eq!(
            strip("I should not respond HEARTBEAT_OK.", StripMode::Message),
            kept("I should not respond.", true)
        );
        assert_eq!(
            strip("All clear. HEARTBEAT_OK", StripMode::Message),
            kept("All clear.", true)
        );
        assert_eq!(
            strip("<code>HEARTBEAT_OK</code> all good", StripMode::Message),
            kept("all good", true)
        );
    }

    #[test]
    fn strip_edge_cases() {
        // No token anywhere: the trimmed text as is.
        assert_eq!(
            strip("  all fine \n", StripMode::Heartbeat),
            kept("all fine", false)
        );
        // Repeated tokens at both ends go; whitespace inside collapses.
        assert_eq!(
            strip(
                "HEARTBEAT_OK HEARTBEAT_OK disk\n\n  full HEARTBEAT_OK",
                StripMode::Message
            ),
            kept("disk full", true)
        );
        // More than four characters after the token, or a word character: not at the end.
        assert_eq!(
            strip("note HEARTBEAT_OK.....", StripMode::Message),
            kept("note HEARTBEAT_OK.....", false)
        );
        assert_eq!(
            strip("note HEARTBEAT_OKx", StripMode::Message),
            kept("note HEARTBEAT_OKx", false)
        );
        // Only punctuation after a lone token: it goes too.
        assert_eq!(
            strip("HEARTBEAT_OK !?", StripMode::Message),
            kept("!?", true)
        );
        assert_eq!(strip(" HEARTBEAT_OK ", StripMode::Message), skipped(true));
        // `&nbsp;` (any case) counts as a space in the marked-up copy; an unclosed tag stays.
        assert_eq!(
            strip("&NBSP;HEARTBEAT_OK&nbsp;", StripMode::Message),
            skipped(true)
        );
        assert_eq!(
            strip("<i HEARTBEAT_OK", StripMode::Message),
            kept("<i", true)
        );
        // Lowercase is not the token.
        assert_eq!(
            strip("heartbeat_ok", StripMode::Heartbeat),
            kept("heartbeat_ok", false)
        );
    }

    #[test]
    fn stray_tokens_in_normal_replies_are_removed_and_a_bare_token_is_dropped() {
        assert_eq!(strip_stray_heartbeat_token("HEARTBEAT_OK"), None);
        assert_eq!(
            strip_stray_heartbeat_token("Done. HEARTBEAT_OK").as_deref(),
            Some("Done.")
        );
        assert_eq!(
            strip_stray_heartbeat_token("Say HEARTBEAT_OK when idle").as_deref(),
            Some("Say HEARTBEAT_OK when idle")
        );
    }

    #[test]
    fn the_response_prefix_goes_only_before_a_break() {
        assert_eq!(
            strip_response_prefix("🤖 HEARTBEAT_OK", Some("🤖")),
            "HEARTBEAT_OK"
        );
        assert_eq!(strip_response_prefix("[bot]: hi", Some("[bot]")), ": hi");
        assert_eq!(strip_response_prefix("Bot", Some("Bot")), "");
        assert_eq!(
            strip_response_prefix("Botany facts", Some("Bot")),
            "Botany facts"
        );
        assert_eq!(strip_response_prefix(" hi", None), "hi");
        assert_eq!(strip_response_prefix("hi", Some("  ")), "hi");
    }

    #[test]
    fn an_identical_alert_within_a_day_is_a_duplicate_and_after_a_day_is_sent() {
        // Spec §6 vector 13.
        let sent_at = 10 * HOUR;
        let mut reply = Reply::new(&["Disk almost full"]);
        reply.last_alert = Some(LastHeartbeatAlert {
            text: "Disk almost full",
            sent_at_ms: sent_at,
        });
        reply.now_ms = sent_at + 23 * HOUR;
        assert_eq!(reply.decide(), HeartbeatOutcome::Duplicate);
        assert_eq!(reply.decide().event_status(), "skipped");
        assert_eq!(reply.decide().event_reason(), Some("duplicate"));
        reply.now_ms = sent_at + 25 * HOUR;
        assert_eq!(reply.decide(), alert("Disk almost full"));
        assert_eq!(reply.decide().event_status(), "sent");
        // A different text is not a duplicate.
        reply.now_ms = sent_at + HOUR;
        reply.payloads = vec![payload("Disk full")];
        assert_eq!(reply.decide(), alert("Disk full"));
    }

    #[test]
    fn show_ok_sends_the_prefixed_token_and_otherwise_an_ack_is_silent() {
        // Spec §6 vector 14.
        let mut reply = Reply::new(&["HEARTBEAT_OK"]);
        reply.response_prefix = Some("🤖");
        reply.visibility.show_ok = true;
        assert_eq!(
            reply.decide(),
            HeartbeatOutcome::AckShowOk {
                kind: AckKind::Token,
                text: "🤖 HEARTBEAT_OK".into()
            }
        );
        reply.visibility.show_ok = false;
        let outcome = reply.decide();
        assert_eq!(outcome, HeartbeatOutcome::AckSilent(AckKind::Token));
        assert_eq!(outcome.event_status(), "ok-token");
        assert!(outcome.is_silent() && outcome.is_ack());
    }

    #[test]
    fn show_ok_needs_a_ready_target_and_sends_the_bare_token_without_prefix() {
        let mut reply = Reply::new(&["HEARTBEAT_OK"]);
        reply.visibility.show_ok = true;
        assert_eq!(
            reply.decide(),
            HeartbeatOutcome::AckShowOk {
                kind: AckKind::Token,
                text: "HEARTBEAT_OK".into()
            }
        );
        reply.delivery = DeliveryReadiness::NoTarget(NoTargetReason::TargetNone);
        assert_eq!(reply.decide(), HeartbeatOutcome::AckSilent(AckKind::Token));
    }

    #[test]
    fn no_reply_at_all_is_ok_empty() {
        for texts in [&[][..], &["", "  "][..], &["🤖"][..]] {
            let mut reply = Reply::new(texts);
            reply.response_prefix = Some("🤖");
            let outcome = reply.decide();
            assert_eq!(
                outcome,
                HeartbeatOutcome::AckSilent(AckKind::Empty),
                "{texts:?}"
            );
            assert_eq!(outcome.event_status(), "ok-empty");
        }
    }

    #[test]
    fn the_last_payload_with_content_is_the_reply() {
        let reply = Reply::new(&["Disk almost full", "HEARTBEAT_OK", ""]);
        assert_eq!(reply.decide(), HeartbeatOutcome::AckSilent(AckKind::Token));
        let reply = Reply::new(&["HEARTBEAT_OK", "Disk almost full"]);
        assert_eq!(reply.decide(), alert("Disk almost full"));
    }

    #[test]
    fn media_turns_an_ack_into_an_alert_and_is_never_a_duplicate() {
        let mut reply = Reply::new(&[]);
        reply.payloads = vec![ReplyPayload {
            text: "HEARTBEAT_OK".into(),
            has_media: true,
            is_tool_error_warning: false,
        }];
        reply.last_alert = Some(LastHeartbeatAlert {
            text: "",
            sent_at_ms: reply.now_ms,
        });
        assert_eq!(
            reply.decide(),
            HeartbeatOutcome::Alert {
                text: String::new(),
                reasoning: Vec::new(),
                has_media: true
            }
        );
    }

    #[test]
    fn an_exec_completion_reply_is_never_an_ack() {
        let mut reply = Reply::new(&["Build passed. HEARTBEAT_OK"]);
        reply.exec_completion = true;
        assert_eq!(reply.decide(), alert("Build passed."));
        reply.payloads = vec![payload("HEARTBEAT_OK")];
        assert_eq!(reply.decide(), alert("HEARTBEAT_OK"));
    }

    #[test]
    fn undeliverable_alerts_report_why_in_order() {
        let mut reply = Reply::new(&["Disk almost full"]);
        reply.delivery = DeliveryReadiness::NoTarget(NoTargetReason::DmBlocked);
        reply.visibility.show_alerts = false;
        assert_eq!(
            reply.decide(),
            HeartbeatOutcome::NoTarget(NoTargetReason::DmBlocked)
        );
        assert_eq!(reply.decide().event_reason(), Some("dm-blocked"));
        reply.delivery = DeliveryReadiness::ChannelNotReady("not-linked".into());
        assert_eq!(reply.decide(), HeartbeatOutcome::AlertsDisabled);
        assert_eq!(reply.decide().event_reason(), Some("alerts-disabled"));
        reply.visibility.show_alerts = true;
        assert_eq!(
            reply.decide(),
            HeartbeatOutcome::ChannelNotReady("not-linked".into())
        );
        assert_eq!(reply.decide().event_reason(), Some("not-linked"));
        for (reason, text) in [
            (NoTargetReason::TargetNone, "target-none"),
            (NoTargetReason::NoTarget, "no-target"),
            (NoTargetReason::UnknownAccount, "unknown-account"),
            (NoTargetReason::DmBlocked, "dm-blocked"),
        ] {
            assert_eq!(reason.as_str(), text);
        }
    }

    #[test]
    fn reasoning_goes_first_only_with_include_reasoning_and_tool_warnings_can_be_dropped() {
        let mut reply = Reply::new(&["Reasoning: the disk grew", "Disk almost full"]);
        assert_eq!(reply.decide(), alert("Disk almost full"));
        reply.config.include_reasoning = Some(true);
        assert_eq!(
            reply.decide(),
            HeartbeatOutcome::Alert {
                text: "Disk almost full".into(),
                reasoning: vec!["Reasoning: the disk grew".into()],
                has_media: false
            }
        );
        let mut warned = Reply::new(&["HEARTBEAT_OK"]);
        warned.payloads.push(ReplyPayload {
            text: "⚠️ exec failed: exit 1".into(),
            has_media: false,
            is_tool_error_warning: true,
        });
        assert_eq!(warned.decide(), alert("⚠️ exec failed: exit 1"));
        warned.config.suppress_tool_error_warnings = Some(true);
        assert_eq!(warned.decide(), HeartbeatOutcome::AckSilent(AckKind::Token));
    }

    #[test]
    fn ack_max_chars_from_the_config_decides_the_ack() {
        let mut reply = Reply::new(&["Nothing new HEARTBEAT_OK"]);
        assert_eq!(reply.decide(), HeartbeatOutcome::AckSilent(AckKind::Token));
        reply.config.ack_max_chars = Some(5);
        assert_eq!(reply.decide(), alert("Nothing new"));
    }
}
