//! Regrouping the neutral conversation into strictly alternating user/assistant turns, as the
//! Anthropic Messages and Bedrock Converse APIs require: tool results become user content,
//! consecutive same-role messages merge, and empty text is dropped (both APIs reject it).
//! Images shown with a user message follow that message's text.

use clawless_base::media::ImageInput;
use clawless_base::model::UserImages;
use clawless_base::transcript::{AssistantBlock, Message, ToolCall};

/// Who speaks in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    User,
    Assistant,
}

/// One content block of a turn, still provider-neutral.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Part<'a> {
    Text(&'a str),
    ToolCall(&'a ToolCall),
    ToolResult {
        tool_call_id: &'a str,
        text: &'a str,
        is_error: bool,
    },
    Image(&'a ImageInput),
    /// Reasoning the provider wrote, resent as it was (see [`alternating_turns`]).
    Thinking {
        text: &'a str,
        signature: Option<&'a str>,
        redacted: Option<&'a str>,
    },
}

/// One merged turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Turn<'a> {
    pub(crate) role: Role,
    pub(crate) parts: Vec<Part<'a>>,
}

/// The images shown with the message at `index`, in order (entries naming the same message
/// are joined). Images attached to anything but a user message are never shown.
pub(crate) fn images_of<'a>(
    images: &'a [UserImages], messages: &[Message], index: usize,
) -> impl Iterator<Item = &'a ImageInput> {
    let is_user = matches!(messages.get(index), Some(Message::User { .. }));
    images
        .iter()
        .filter(move |entry| is_user && entry.message == index)
        .flat_map(|entry| entry.images.iter())
}

/// The index of the first message of the current tool-use turn: everything after the last
/// user message (tool results do not count). Reasoning before it belongs to completed turns.
pub(crate) fn current_turn_start(messages: &[Message]) -> usize {
    messages
        .iter()
        .rposition(|message| matches!(message, Message::User { .. }))
        .map_or(0, |index| index + 1)
}

/// True when an assistant message of the current tool-use turn called a tool without
/// reasoning from `api` before it: an API that demands the reasoning back (Anthropic,
/// Bedrock Claude with thinking on) would refuse the request, so thinking stays off for it.
pub(crate) fn current_turn_lacks_thinking(messages: &[Message], api: &str) -> bool {
    messages[current_turn_start(messages)..]
        .iter()
        .any(|message| match message {
            Message::Assistant { content, .. } => {
                content
                    .iter()
                    .any(|block| matches!(block, AssistantBlock::ToolCall(_)))
                    && !content.iter().any(
                        |block| matches!(block, AssistantBlock::Thinking { api: from, .. } if from == api),
                    )
            }
            _ => false,
        })
}

/// Groups messages into alternating turns, each user message followed by its `images`.
/// Inside a user turn, tool results come first: the APIs want them right after the
/// assistant's tool calls. Reasoning is kept only when `thinking_api` names the API that
/// wrote it, and only in the current tool-use turn (where the APIs need it back, signature
/// unchanged); completed turns' reasoning is dropped so it does not eat the window.
pub(crate) fn alternating_turns<'a>(
    messages: &'a [Message], images: &'a [UserImages], thinking_api: Option<&str>,
) -> Vec<Turn<'a>> {
    let mut turns: Vec<Turn<'a>> = Vec::new();
    let current = current_turn_start(messages);
    for (index, message) in messages.iter().enumerate() {
        let (role, parts): (Role, Vec<Part<'a>>) = match message {
            Message::User { text } => (
                Role::User,
                std::iter::once(Part::Text(text))
                    .chain(images_of(images, messages, index).map(Part::Image))
                    .collect(),
            ),
            Message::Assistant { content, .. } => (
                Role::Assistant,
                content
                    .iter()
                    .filter_map(|block| match block {
                        AssistantBlock::Text { text } => Some(Part::Text(text)),
                        AssistantBlock::ToolCall(call) => Some(Part::ToolCall(call)),
                        AssistantBlock::Thinking {
                            text,
                            signature,
                            redacted,
                            api,
                        } if index >= current && thinking_api == Some(api.as_str()) => {
                            Some(Part::Thinking {
                                text,
                                signature: signature.as_deref(),
                                redacted: redacted.as_deref(),
                            })
                        }
                        AssistantBlock::Thinking { .. } => None,
                    })
                    .collect(),
            ),
            Message::ToolResult {
                tool_call_id,
                text,
                is_error,
                ..
            } => (
                Role::User,
                vec![Part::ToolResult {
                    tool_call_id,
                    text,
                    is_error: *is_error,
                }],
            ),
        };
        let parts: Vec<Part<'a>> = parts
            .into_iter()
            .filter(|part| !matches!(part, Part::Text(text) if text.trim().is_empty()))
            .collect();
        if parts.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.parts.extend(parts),
            _ => turns.push(Turn { role, parts }),
        }
    }
    for turn in &mut turns {
        if turn.role == Role::User {
            // Stable: results keep their order, and so does the text after them.
            turn.parts
                .sort_by_key(|part| !matches!(part, Part::ToolResult { .. }));
        }
    }
    turns
}

#[cfg(test)]
mod tests {
    use clawless_base::transcript::StopReason;
    use serde_json::json;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.to_owned(),
            name: "read".to_owned(),
            input: json!({}),
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            tool_call_id: id.to_owned(),
            tool_name: "read".to_owned(),
            text: format!("result {id}"),
            is_error: false,
        }
    }

    #[test]
    fn tool_results_merge_into_one_user_turn_before_text() {
        // GIVEN two parallel tool calls, their results and a follow-up user message
        let messages = vec![
            Message::User { text: "hi".into() },
            Message::Assistant {
                content: vec![
                    AssistantBlock::ToolCall(call("a")),
                    AssistantBlock::ToolCall(call("b")),
                ],
                stop_reason: Default::default(),
            },
            Message::User {
                text: "also this".into(),
            },
            result("a"),
            result("b"),
        ];
        // WHEN grouped
        let turns = alternating_turns(&messages, &[], None);
        // THEN user, assistant, one user turn with both results first
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[2].role, Role::User);
        assert!(matches!(
            turns[2].parts[0],
            Part::ToolResult {
                tool_call_id: "a",
                ..
            }
        ));
        assert!(matches!(
            turns[2].parts[1],
            Part::ToolResult {
                tool_call_id: "b",
                ..
            }
        ));
        assert_eq!(turns[2].parts[2], Part::Text("also this"));
    }

    fn thinking(text: &str, api: &str) -> AssistantBlock {
        AssistantBlock::Thinking {
            text: text.to_owned(),
            signature: Some(format!("sig-{text}")),
            redacted: None,
            api: api.to_owned(),
        }
    }

    #[test]
    fn reasoning_is_resent_only_in_the_current_tool_use_turn_and_to_its_own_api() {
        // GIVEN a completed turn with reasoning, then a tool-use turn in progress
        let messages = vec![
            Message::User { text: "q1".into() },
            Message::Assistant {
                content: vec![
                    thinking("old", "anthropic"),
                    AssistantBlock::Text { text: "a1".into() },
                ],
                stop_reason: Default::default(),
            },
            Message::User { text: "q2".into() },
            Message::Assistant {
                content: vec![
                    thinking("new", "anthropic"),
                    AssistantBlock::ToolCall(call("a")),
                ],
                stop_reason: StopReason::ToolUse,
            },
            result("a"),
        ];
        // WHEN grouped for Anthropic
        let turns = alternating_turns(&messages, &[], Some("anthropic"));
        // THEN the old reasoning is gone and the current one leads its message, signed
        assert_eq!(turns[1].parts, vec![Part::Text("a1")]);
        assert_eq!(
            turns[3].parts[0],
            Part::Thinking {
                text: "new",
                signature: Some("sig-new"),
                redacted: None
            }
        );
        // AND another API is never sent it
        let other = alternating_turns(&messages, &[], Some("bedrock"));
        assert_eq!(other[3].parts, vec![Part::ToolCall(&call("a"))]);
        assert!(!current_turn_lacks_thinking(&messages, "anthropic"));
        assert!(current_turn_lacks_thinking(&messages, "bedrock"));
    }

    #[test]
    fn empty_text_is_dropped_and_same_roles_merge() {
        let messages = vec![
            Message::User { text: "one".into() },
            Message::User { text: "  ".into() },
            Message::User { text: "two".into() },
            Message::Assistant {
                content: vec![AssistantBlock::Text {
                    text: String::new(),
                }],
                stop_reason: Default::default(),
            },
        ];
        let turns = alternating_turns(&messages, &[], None);
        assert_eq!(turns.len(), 1);
        assert_eq!(turns[0].parts, vec![Part::Text("one"), Part::Text("two")]);
    }

    #[test]
    fn images_follow_their_user_message_and_nothing_else() {
        // GIVEN an image for a user message, one for an image-only message (blank text), and
        // one wrongly aimed at an assistant message
        let image = |byte: u8| ImageInput {
            media_type: "image/png".into(),
            data: vec![byte],
        };
        let messages = vec![
            Message::User {
                text: "look".into(),
            },
            Message::Assistant {
                content: vec![AssistantBlock::Text { text: "ok".into() }],
                stop_reason: Default::default(),
            },
            Message::User { text: " ".into() },
        ];
        let images = vec![
            UserImages {
                message: 0,
                images: vec![image(1)],
            },
            UserImages {
                message: 1,
                images: vec![image(9)],
            },
            UserImages {
                message: 2,
                images: vec![image(2), image(3)],
            },
        ];
        // WHEN grouped
        let turns = alternating_turns(&messages, &images, None);
        // THEN each image sits after its message's text; the assistant's is dropped
        assert_eq!(
            turns[0].parts,
            vec![Part::Text("look"), Part::Image(&images[0].images[0])]
        );
        assert_eq!(turns[1].parts, vec![Part::Text("ok")]);
        assert_eq!(
            turns[2].parts,
            vec![
                Part::Image(&images[2].images[0]),
                Part::Image(&images[2].images[1])
            ]
        );
    }
}
