//! What the `message` tool sent during the current turn, and the rule that keeps the turn's
//! final reply from repeating it (spec `openclaw-tools.md` §2.8).
//!
//! The tool records each successful `send` on the session's meta ([`SessionState::record_message_send`]),
//! so a turn resumed after a crash still knows; a new turn starts with none. When the turn
//! ends, [`suppresses_final_reply`] decides:
//! - a send that went to the turn's own conversation (the *resolved* chat, so also a send
//!   that relied on the implicit target) drops the final reply altogether: the user already
//!   has the answer there;
//! - otherwise a final reply that repeats a sent text (normalised: lower-case, whitespace
//!   collapsed, at least [`MIN_DEDUPE_CHARS`] characters, one containing the other) is dropped.
//!
//! This module knows nothing about channels or the tool's arguments: only chats and texts.

use super::events::ChatRef;
pub use super::state::MessageSend;
use super::state::SessionState;

/// Shortest normalised text the near-duplicate rule compares: shorter replies ("OK") are
/// too common to call a repeat.
pub const MIN_DEDUPE_CHARS: usize = 10;

/// Most sends remembered per turn; older ones are forgotten first.
const MAX_SENDS: usize = 32;

/// Longest text remembered per send, in characters (enough to recognise a repeat).
const MAX_TEXT_CHARS: usize = 4_000;

impl SessionState {
    /// Records a successful `message` send of the current turn (the caller commits the meta
    /// with the call's result). Recording the same send twice keeps one.
    pub fn record_message_send(&mut self, chat: ChatRef, text: &str) {
        let send = MessageSend {
            chat,
            text: text.chars().take(MAX_TEXT_CHARS).collect(),
        };
        if self.meta.message_sends.contains(&send) {
            return;
        }
        if self.meta.message_sends.len() >= MAX_SENDS {
            self.meta.message_sends.remove(0);
        }
        self.meta.message_sends.push(send);
        self.touch_meta();
    }
}

/// True when two chats are the same conversation (the chat type is not compared: a target
/// resolved from an id alone does not know it).
pub fn same_conversation(a: &ChatRef, b: &ChatRef) -> bool {
    a.channel == b.channel && a.chat_id == b.chat_id
}

/// Lower-case with runs of whitespace collapsed to one space and the ends trimmed.
pub fn normalize_for_dedupe(text: &str) -> String {
    text.split_whitespace()
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether the final reply `text` of a turn whose conversation is `origin` must be dropped
/// because of `sends` (see the module docs).
pub fn suppresses_final_reply(origin: Option<&ChatRef>, sends: &[MessageSend], text: &str) -> bool {
    if let Some(origin) = origin
        && sends
            .iter()
            .any(|send| same_conversation(&send.chat, origin))
    {
        return true;
    }
    let reply = normalize_for_dedupe(text);
    if reply.chars().count() < MIN_DEDUPE_CHARS {
        return false;
    }
    sends.iter().any(|send| {
        let sent = normalize_for_dedupe(&send.text);
        sent.chars().count() >= MIN_DEDUPE_CHARS && (sent.contains(&reply) || reply.contains(&sent))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clawless_base::session_key::ChatType;

    fn chat(channel: &str, id: &str) -> ChatRef {
        ChatRef {
            channel: channel.to_owned(),
            chat_id: id.to_owned(),
            chat_type: ChatType::Direct,
        }
    }

    fn sent(channel: &str, id: &str, text: &str) -> MessageSend {
        MessageSend {
            chat: chat(channel, id),
            text: text.to_owned(),
        }
    }

    #[test]
    fn a_send_to_the_turns_own_chat_drops_any_final_reply() {
        let origin = chat("telegram", "42");
        let sends = [sent("telegram", "42", "hi there friend")];
        assert!(suppresses_final_reply(
            Some(&origin),
            &sends,
            "Something else entirely."
        ));
        // The chat type does not matter, the channel does.
        let group_origin = ChatRef {
            chat_type: ChatType::Group,
            ..origin.clone()
        };
        assert!(suppresses_final_reply(Some(&group_origin), &sends, "x"));
        assert!(!suppresses_final_reply(
            Some(&chat("slack", "42")),
            &sends,
            "Something else entirely."
        ));
    }

    #[test]
    fn a_send_elsewhere_drops_only_a_near_duplicate_reply() {
        let origin = chat("telegram", "42");
        let sends = [sent("telegram", "99", "Hi  there\nFRIEND")];
        assert!(suppresses_final_reply(
            Some(&origin),
            &sends,
            "hi there friend"
        ));
        assert!(suppresses_final_reply(
            Some(&origin),
            &sends,
            "I said: hi there friend!"
        ));
        assert!(suppresses_final_reply(
            Some(&origin),
            &sends,
            "there friend"
        ));
        assert!(!suppresses_final_reply(
            Some(&origin),
            &sends,
            "Done, I told them."
        ));
    }

    #[test]
    fn short_texts_are_never_called_repeats() {
        let sends = [sent("generic", "b", "ok sent")];
        assert!(!suppresses_final_reply(
            Some(&chat("generic", "a")),
            &sends,
            "ok sent"
        ));
        let long = [sent("generic", "b", "a much longer message")];
        assert!(!suppresses_final_reply(None, &long, "OK"));
    }

    mod engine {
        //! Vector 7 through the engine: the final reply of a turn whose `message` call sent
        //! to its own chat never becomes a reply, also when the turn resumes from storage.

        use super::*;
        use crate::session::{SessionKey, StoredSession};
        use crate::tools::ToolOutput;
        use crate::turn::events::InboundMessage;
        use crate::turn::state::{PreparedMessage, StepBody};
        use crate::turn::{Effect, Incoming, ToolRouting, TurnEngine};
        use clawless_base::model::{ModelResponse, Usage};
        use clawless_base::transcript::{AssistantBlock, StopReason, ToolCall};

        const ORIGIN: &str = "42";

        fn response(block: AssistantBlock, stop_reason: StopReason) -> ModelResponse {
            ModelResponse {
                content: vec![block],
                stop_reason,
                usage: Usage::default(),
                model: "test/model".to_owned(),
            }
        }

        fn inbound(id: &str) -> Incoming {
            Incoming::Message(Box::new(PreparedMessage::plain(InboundMessage {
                message_id: id.to_owned(),
                chat: chat("telegram", ORIGIN),
                sender_id: "u1".to_owned(),
                text: "tell me".to_owned(),
                sender_is_owner: true,
                attachments: Vec::new(),
            })))
        }

        /// Reloads `state` from what it committed, as a redelivered event would.
        fn reload(state: &mut SessionState, stored: &mut Option<StoredSession>) -> SessionState {
            let commit = state.pending_commit().expect("encodes");
            let version = stored.as_ref().map_or(0, |s| s.version) + 1;
            let mut steps = stored.take().map(|s| s.steps).unwrap_or_default();
            steps.extend(commit.steps);
            let session = StoredSession {
                version,
                meta: commit.meta,
                steps,
                live_from: 0,
                last_seq: commit.last_seq,
            };
            let key = SessionKey::parse("agent:main:main").expect("key");
            let reloaded = SessionState::from_stored(key, &session).expect("loads");
            *stored = Some(session);
            reloaded
        }

        /// Runs a turn in which the model calls `message` (the test plays the tool: it
        /// records a send to `sent_to` with `sent_text`), then answers `final_text`; the
        /// session is reloaded from storage right after the tool's result. Returns the
        /// texts sent as replies.
        fn run_turn(sent_to: ChatRef, sent_text: &str, final_text: &str) -> Vec<String> {
            let engine = TurnEngine::default();
            let routing = ToolRouting {
                offered: ["message".to_owned()].into(),
                ..ToolRouting::default()
            };
            let key = SessionKey::parse("agent:main:main").expect("key");
            let mut state = SessionState::new(key, "s1".to_owned(), 0);
            let mut stored = None;
            engine.accept(&mut state, inbound("m-1"), 1);
            let mut model = vec![
                response(
                    AssistantBlock::ToolCall(ToolCall {
                        id: "toolu_1".to_owned(),
                        name: "message".to_owned(),
                        input: serde_json::json!({"action": "send", "message": sent_text}),
                    }),
                    StopReason::ToolUse,
                ),
                response(
                    AssistantBlock::Text {
                        text: final_text.to_owned(),
                    },
                    StopReason::EndTurn,
                ),
            ]
            .into_iter();
            let mut replies = Vec::new();
            for now in 2..100 {
                match engine.next(&mut state, &routing, now) {
                    Effect::Persist => state = reload(&mut state, &mut stored),
                    Effect::CallModel => {
                        let next = model.next().expect("the model is asked twice at most");
                        engine.record_model_response(&mut state, next, now);
                    }
                    Effect::RunTool(call) => {
                        state.record_message_send(sent_to.clone(), sent_text);
                        engine.record_tool_result(&mut state, &call, ToolOutput::ok("{}"), now);
                    }
                    Effect::SendReply(reply) => {
                        replies.push(reply.text.clone());
                        engine.record_reply_sent(&mut state, &reply.reply_id, now);
                    }
                    Effect::Idle => return replies,
                    other => panic!("unexpected effect {other:?}"),
                }
            }
            panic!("the turn did not end");
        }

        #[test]
        fn a_send_to_the_current_chat_drops_the_final_reply_after_a_reload() {
            let replies = run_turn(chat("telegram", ORIGIN), "hi there friend", "Sent it!");
            assert!(replies.is_empty(), "{replies:?}");
        }

        #[test]
        fn a_send_elsewhere_drops_only_a_repeating_final_reply() {
            let repeat = run_turn(chat("telegram", "7"), "hi there friend", "Hi there, friend");
            assert_eq!(
                repeat,
                ["Hi there, friend"],
                "punctuation makes it a new text"
            );
            let repeat = run_turn(chat("telegram", "7"), "hi there friend", "hi there friend");
            assert!(repeat.is_empty(), "{repeat:?}");
            let other = run_turn(chat("telegram", "7"), "hi there friend", "I told them.");
            assert_eq!(other, ["I told them."]);
        }

        #[test]
        fn the_next_turn_forgets_the_sends() {
            let key = SessionKey::parse("agent:main:main").expect("key");
            let mut state = SessionState::new(key, "s1".to_owned(), 0);
            engine_accept_and_record(&mut state);
            assert_eq!(state.meta.message_sends.len(), 1);
            // The turn ends; a new message starts the next one.
            state.meta.turn_open = false;
            TurnEngine::default().accept(&mut state, inbound("m-2"), 5);
            assert_eq!(state.meta.turn, 2);
            assert!(state.meta.message_sends.is_empty());
            assert!(matches!(
                state.steps.last().map(|step| &step.body),
                Some(StepBody::Inbound { .. })
            ));
        }

        fn engine_accept_and_record(state: &mut SessionState) {
            TurnEngine::default().accept(state, inbound("m-1"), 1);
            state.record_message_send(chat("telegram", ORIGIN), "hello");
            state.record_message_send(chat("telegram", ORIGIN), "hello");
        }
    }

    #[test]
    fn no_sends_suppress_nothing() {
        assert!(!suppresses_final_reply(
            Some(&chat("generic", "a")),
            &[],
            "hello there everyone"
        ));
    }
}
