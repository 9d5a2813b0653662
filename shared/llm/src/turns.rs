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

/// Groups messages into alternating turns, each user message followed by its `images`.
/// Inside a user turn, tool results come first: the APIs want them right after the
/// assistant's tool calls.
pub(crate) fn alternating_turns<'a>(
    messages: &'a [Message], images: &'a [UserImages],
) -> Vec<Turn<'a>> {
    let mut turns: Vec<Turn<'a>> = Vec::new();
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
                    .map(|block| match block {
                        AssistantBlock::Text { text } => Part::Text(text),
                        AssistantBlock::ToolCall(call) => Part::ToolCall(call),
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
        let turns = alternating_turns(&messages, &[]);
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
        let turns = alternating_turns(&messages, &[]);
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
        let turns = alternating_turns(&messages, &images);
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
