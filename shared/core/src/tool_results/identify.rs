//! Recognising tool calls and tool results in any provider's message format (spec §9.2), and
//! importing such transcripts as typed [`Message`]s.
//!
//! Formats understood by [`messages_from_raw`]:
//! - clawless's own serialised [`Message`] and pi/OpenClaw messages: assistant blocks of type
//!   `toolCall`, `toolUse` or `functionCall` with `input` or `arguments`; results with role
//!   `toolResult` or `tool` (or `type: "toolResult"`) and `toolCallId`, else `toolUseId`;
//! - Anthropic Messages: `tool_use` blocks, and `tool_result` blocks (`tool_use_id`) inside user
//!   messages;
//! - OpenAI Chat Completions: `tool_calls[].function` with string `arguments`, and role `tool`
//!   messages with `tool_call_id`;
//! - Bedrock Converse: `{toolUse: {toolUseId, name, input}}` and `{toolResult: {toolUseId,
//!   content, status}}` blocks, and `{text}` blocks without a `type`.
//!
//! System and developer messages are not part of a conversation and are skipped, as are
//! reasoning and image blocks, which the typed transcript cannot hold. Formats without call ids
//! (Gemini) cannot pair calls with results and yield no tool calls.

use std::collections::HashSet;

use serde_json::{Map, Value};

use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};

/// Longest tool name (in characters, after trimming) that is replayed to a model.
pub const MAX_TOOL_NAME_CHARS: usize = 64;

/// What [`sanitize_tool_call_id`] returns when nothing of the id survives in strict mode.
pub const SANITIZED_TOOL_CALL_ID: &str = "sanitizedtoolid";

/// Stands in for an id that is not a string at all (see [`sanitize_tool_call_id_value`]).
pub const DEFAULT_TOOL_CALL_ID: &str = "defaulttoolid";

/// Length of a `strict9` tool call id (Mistral requires exactly nine alphanumerics).
pub const STRICT9_ID_LEN: usize = 9;

/// Assistant content block `type`s that denote a tool call.
const TOOL_CALL_BLOCK_TYPES: [&str; 4] = ["toolCall", "toolUse", "functionCall", "tool_use"];

/// How provider-facing tool call ids are rewritten.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolCallIdMode {
    /// Keep only ASCII letters and digits.
    Strict,
    /// Exactly nine ASCII letters and digits (Mistral).
    Strict9,
}

/// Rewrites a tool call id for providers with strict id rules (spec §9.2).
///
/// - [`ToolCallIdMode::Strict`] keeps only `[a-zA-Z0-9]`; an id left empty becomes
///   [`SANITIZED_TOOL_CALL_ID`].
/// - [`ToolCallIdMode::Strict9`] keeps only `[a-zA-Z0-9]` too. Exactly nine are kept as they
///   are. Of more than nine, the *last* nine are kept: provider ids put their shared prefix first
///   (`toolu_01…`, `call_…`) and their random part last, so the first nine would collide. Fewer
///   than nine are padded with the hex digits of a 64-bit FNV-1a hash of the whole original id,
///   so short ids that differ only in punctuation still map apart.
///
/// The mapping is deterministic, so a call and its result stay paired when both are rewritten.
pub fn sanitize_tool_call_id(id: &str, mode: ToolCallIdMode) -> String {
    let alphanumeric: String = id.chars().filter(char::is_ascii_alphanumeric).collect();
    match mode {
        ToolCallIdMode::Strict if alphanumeric.is_empty() => SANITIZED_TOOL_CALL_ID.to_owned(),
        ToolCallIdMode::Strict => alphanumeric,
        ToolCallIdMode::Strict9 if alphanumeric.len() >= STRICT9_ID_LEN => {
            // ASCII only, so byte offsets are character offsets.
            alphanumeric[alphanumeric.len() - STRICT9_ID_LEN..].to_owned()
        }
        ToolCallIdMode::Strict9 => {
            let hash = format!("{:016x}", fnv1a64(id.as_bytes()));
            let missing = STRICT9_ID_LEN - alphanumeric.len();
            format!("{alphanumeric}{}", &hash[..missing])
        }
    }
}

/// [`sanitize_tool_call_id`] for a raw JSON id: a non-string id is treated as
/// [`DEFAULT_TOOL_CALL_ID`].
pub fn sanitize_tool_call_id_value(id: &Value, mode: ToolCallIdMode) -> String {
    sanitize_tool_call_id(id.as_str().unwrap_or(DEFAULT_TOOL_CALL_ID), mode)
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hasher = fnv::FnvHasher::default();
    std::hash::Hasher::write(&mut hasher, bytes);
    std::hash::Hasher::finish(&hasher)
}

/// Whether `name`, once trimmed, may be replayed as a tool name: 1–64 characters of
/// `[A-Za-z0-9_:.-]`, and a member of `allowed` when a set is given (exact match).
pub fn is_valid_tool_name(name: &str, allowed: Option<&HashSet<String>>) -> bool {
    let name = name.trim();
    !name.is_empty()
        && name.chars().count() <= MAX_TOOL_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '.' | '-'))
        && allowed.is_none_or(|set| set.contains(name))
}

/// The call id of a raw assistant content block, when the block is a tool call: a block of type
/// `toolCall`, `toolUse`, `functionCall` or `tool_use` with a non-empty string `id`, or a
/// Bedrock `{toolUse: {toolUseId}}` block. Name and arguments are not checked here.
pub fn tool_call_block_id(block: &Value) -> Option<&str> {
    let (id, _, _) = raw_call_parts(block)?;
    id.as_str().filter(|id| !id.is_empty())
}

/// Whether a raw assistant content block is a tool call (see [`tool_call_block_id`]).
pub fn is_tool_call_block(block: &Value) -> bool {
    tool_call_block_id(block).is_some()
}

/// Whether a raw message (or user content block) is a tool result: role `toolResult` or `tool`,
/// or type `toolResult` (Anthropic's `tool_result` block included).
pub fn is_tool_result_message(message: &Value) -> bool {
    let role = message.get("role").and_then(Value::as_str);
    let kind = message.get("type").and_then(Value::as_str);
    matches!(role, Some("toolResult" | "tool"))
        || matches!(kind, Some("toolResult" | "tool_result"))
}

/// The call id a raw tool result answers: the first non-empty string among `toolCallId`,
/// `toolUseId`, `tool_call_id` (OpenAI) and `tool_use_id` (Anthropic).
pub fn tool_result_id(message: &Value) -> Option<&str> {
    ["toolCallId", "toolUseId", "tool_call_id", "tool_use_id"]
        .iter()
        .filter_map(|key| message.get(key).and_then(Value::as_str))
        .find(|id| !id.is_empty())
}

/// Imports a transcript written in any supported provider format (see the module docs).
///
/// Same as [`messages_from_raw_with_allowed_tools`] without an allowed-names set.
pub fn messages_from_raw(values: &[Value]) -> Vec<Message> {
    messages_from_raw_with_allowed_tools(values, None)
}

/// Imports a transcript written in any supported provider format, keeping only tool calls that
/// can be replayed (spec §9.2).
///
/// A tool call is dropped when it has no non-empty id, no `input`/`arguments` (JSON `null`
/// counts as none), arguments given as a string that is not JSON (a blank string means `{}`),
/// or a name that fails [`is_valid_tool_name`] against `allowed`; kept names are trimmed. An
/// assistant message with nothing left (no text, no calls) is dropped. Tool results inside a
/// user message come out as [`Message::ToolResult`]s ahead of that message's text, which
/// becomes a [`Message::User`] only when it is not empty. Results without an id are dropped:
/// nothing could pair them. Pairing itself is left to [`super::repair_transcript`].
pub fn messages_from_raw_with_allowed_tools(
    values: &[Value], allowed: Option<&HashSet<String>>,
) -> Vec<Message> {
    let mut out = Vec::with_capacity(values.len());
    for value in values {
        import_message(value, allowed, &mut out);
    }
    out
}

/// Drops tool calls that cannot be replayed from typed messages (spec §9.2): an empty id, a
/// `null` input, or a name failing [`is_valid_tool_name`] against `allowed`. Kept names are
/// trimmed, and an assistant message left with no content by the dropping is removed.
pub fn sanitize_tool_calls_for_replay(
    messages: &[Message], allowed: Option<&HashSet<String>>,
) -> Vec<Message> {
    messages
        .iter()
        .filter_map(|message| {
            let Message::Assistant {
                content,
                stop_reason,
            } = message
            else {
                return Some(message.clone());
            };
            let kept: Vec<AssistantBlock> = content
                .iter()
                .filter_map(|block| match block {
                    AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => {
                        Some(block.clone())
                    }
                    AssistantBlock::ToolCall(call) => {
                        let replayable = !call.id.is_empty()
                            && !call.input.is_null()
                            && is_valid_tool_name(&call.name, allowed);
                        replayable.then(|| {
                            AssistantBlock::ToolCall(ToolCall {
                                name: call.name.trim().to_owned(),
                                ..call.clone()
                            })
                        })
                    }
                })
                .collect();
            if kept.is_empty() && !content.is_empty() {
                return None;
            }
            Some(Message::Assistant {
                content: kept,
                stop_reason: *stop_reason,
            })
        })
        .collect()
}

fn import_message(value: &Value, allowed: Option<&HashSet<String>>, out: &mut Vec<Message>) {
    let Some(object) = value.as_object() else {
        return;
    };
    if is_tool_result_message(value) {
        out.extend(import_result(value, object));
        return;
    }
    match object.get("role").and_then(Value::as_str) {
        Some("user") => import_user(object, out),
        Some("assistant" | "model") => out.extend(import_assistant(object, allowed)),
        _ => {}
    }
}

fn import_user(object: &Map<String, Value>, out: &mut Vec<Message>) {
    let content = object.get("content").or_else(|| object.get("text"));
    let mut texts = Vec::new();
    match content {
        Some(Value::String(text)) => texts.push(text.clone()),
        Some(Value::Array(blocks)) => {
            for block in blocks {
                if is_tool_result_message(block) {
                    out.extend(block.as_object().and_then(|obj| import_result(block, obj)));
                } else if let Some(inner) = block.get("toolResult").filter(|v| v.is_object()) {
                    out.extend(inner.as_object().and_then(|obj| import_result(inner, obj)));
                } else if let Some(text) = block_text(block) {
                    texts.push(text.to_owned());
                }
            }
        }
        _ => {}
    }
    let text = texts.join("\n");
    if !text.is_empty() {
        out.push(Message::User { text });
    }
}

fn import_result(value: &Value, object: &Map<String, Value>) -> Option<Message> {
    let tool_call_id = tool_result_id(value)?.to_owned();
    let tool_name = ["toolName", "tool_name", "name"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .unwrap_or_default()
        .to_owned();
    let text = ["content", "text", "output"]
        .iter()
        .find_map(|key| object.get(*key))
        .map(content_text)
        .unwrap_or_default();
    let is_error = ["isError", "is_error"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_bool))
        .unwrap_or_else(|| object.get("status").and_then(Value::as_str) == Some("error"));
    Some(Message::ToolResult {
        tool_call_id,
        tool_name,
        text,
        is_error,
    })
}

fn import_assistant(
    object: &Map<String, Value>, allowed: Option<&HashSet<String>>,
) -> Option<Message> {
    let mut content = Vec::new();
    match object.get("content") {
        Some(Value::String(text)) if !text.is_empty() => {
            content.push(AssistantBlock::Text { text: text.clone() });
        }
        Some(Value::Array(blocks)) => {
            for block in blocks {
                if let Some((id, name, input)) = raw_call_parts(block) {
                    content.extend(
                        build_call(Some(id), name, input, allowed).map(AssistantBlock::ToolCall),
                    );
                } else if let Some(text) = block_text(block) {
                    content.push(AssistantBlock::Text {
                        text: text.to_owned(),
                    });
                }
            }
        }
        _ => {}
    }
    // OpenAI Chat Completions keeps calls beside the content.
    for call in object
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let function = call.get("function");
        let call = build_call(
            call.get("id"),
            function.and_then(|f| f.get("name")),
            function.and_then(|f| f.get("arguments")),
            allowed,
        );
        content.extend(call.map(AssistantBlock::ToolCall));
    }
    if content.is_empty() {
        return None;
    }
    let stop_reason = ["stopReason", "stop_reason", "finish_reason", "stop"]
        .iter()
        .find_map(|key| object.get(*key).and_then(Value::as_str))
        .map_or(StopReason::EndTurn, parse_stop_reason);
    Some(Message::Assistant {
        content,
        stop_reason,
    })
}

fn parse_stop_reason(reason: &str) -> StopReason {
    match reason {
        "error" => StopReason::Error,
        "aborted" => StopReason::Aborted,
        "toolUse" | "tool_use" | "tool_calls" | "function_call" => StopReason::ToolUse,
        "length" | "max_tokens" | "maxTokens" => StopReason::MaxTokens,
        _ => StopReason::EndTurn,
    }
}

/// `(id, name, input)` of a raw block in one of the tool-call shapes, each possibly absent.
type RawCallParts<'a> = (&'a Value, Option<&'a Value>, Option<&'a Value>);

fn raw_call_parts(block: &Value) -> Option<RawCallParts<'_>> {
    let kind = block.get("type").and_then(Value::as_str);
    if kind.is_some_and(|kind| TOOL_CALL_BLOCK_TYPES.contains(&kind)) {
        let input = block.get("input").or_else(|| block.get("arguments"));
        return Some((
            block.get("id").unwrap_or(&Value::Null),
            block.get("name"),
            input,
        ));
    }
    if kind.is_none()
        && let Some(call) = block.get("toolUse").filter(|v| v.is_object())
    {
        let id = call.get("toolUseId").unwrap_or(&Value::Null);
        return Some((id, call.get("name"), call.get("input")));
    }
    None
}

fn build_call(
    id: Option<&Value>, name: Option<&Value>, input: Option<&Value>,
    allowed: Option<&HashSet<String>>,
) -> Option<ToolCall> {
    let id = id?.as_str().filter(|id| !id.is_empty())?;
    let name = name?
        .as_str()
        .filter(|name| is_valid_tool_name(name, allowed))?;
    let input = match input? {
        Value::Null => return None,
        Value::String(text) if text.trim().is_empty() => Value::Object(Map::new()),
        // Providers that stream arguments as text; unparsable text cannot be replayed.
        Value::String(text) => serde_json::from_str(text).ok()?,
        other => other.clone(),
    };
    Some(ToolCall {
        id: id.to_owned(),
        name: name.trim().to_owned(),
        input,
    })
}

/// The text of a raw text block: `type` `text`/`input_text`/`output_text`, or a Bedrock block
/// with a string `text` and no `type`.
fn block_text(block: &Value) -> Option<&str> {
    match block {
        Value::String(text) => Some(text),
        Value::Object(object) => {
            let kind = object.get("type").and_then(Value::as_str);
            let texty = matches!(kind, None | Some("text" | "input_text" | "output_text"));
            texty
                .then(|| object.get("text").and_then(Value::as_str))
                .flatten()
        }
        _ => None,
    }
}

/// Text of a tool result's content: a string, or the text (and Bedrock `json`) of its blocks
/// joined with newlines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| {
                block_text(block)
                    .map(str::to_owned)
                    .or_else(|| block.get("json").map(Value::to_string))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str, name: &str, input: Value) -> AssistantBlock {
        AssistantBlock::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            input,
        })
    }

    fn result(id: &str, name: &str, text: &str, is_error: bool) -> Message {
        Message::ToolResult {
            tool_call_id: id.into(),
            tool_name: name.into(),
            text: text.into(),
            is_error,
        }
    }

    #[test]
    fn call_blocks_of_every_call_type_with_an_id_are_tool_calls() {
        for kind in ["toolCall", "toolUse", "functionCall", "tool_use"] {
            assert!(
                is_tool_call_block(&json!({"type": kind, "id": "c1", "name": "x"})),
                "{kind}"
            );
        }
        assert!(is_tool_call_block(
            &json!({"toolUse": {"toolUseId": "b1", "name": "x"}})
        ));
    }

    #[test]
    fn call_blocks_without_a_non_empty_string_id_are_not_tool_calls() {
        assert!(!is_tool_call_block(
            &json!({"type": "toolCall", "name": "x"})
        ));
        assert!(!is_tool_call_block(&json!({"type": "toolCall", "id": ""})));
        assert!(!is_tool_call_block(&json!({"type": "toolCall", "id": 7})));
        assert!(!is_tool_call_block(&json!({"type": "text", "id": "c1"})));
    }

    #[test]
    fn result_id_prefers_tool_call_id_over_tool_use_id() {
        let message = json!({"role": "toolResult", "toolCallId": "a", "toolUseId": "b"});
        assert_eq!(tool_result_id(&message), Some("a"));
        assert_eq!(tool_result_id(&json!({"toolUseId": "b"})), Some("b"));
        assert_eq!(tool_result_id(&json!({"tool_call_id": "c"})), Some("c"));
        assert_eq!(tool_result_id(&json!({"tool_use_id": "d"})), Some("d"));
        assert_eq!(tool_result_id(&json!({"role": "tool"})), None);
    }

    #[test]
    fn results_are_recognised_by_role_or_type() {
        assert!(is_tool_result_message(&json!({"role": "toolResult"})));
        assert!(is_tool_result_message(&json!({"role": "tool"})));
        assert!(is_tool_result_message(&json!({"type": "toolResult"})));
        assert!(is_tool_result_message(&json!({"type": "tool_result"})));
        assert!(!is_tool_result_message(&json!({"role": "user"})));
    }

    #[test]
    fn tool_names_are_trimmed_and_limited_to_64_safe_chars() {
        assert!(is_valid_tool_name("  read  ", None));
        assert!(is_valid_tool_name("ns:tool.v1-beta_2", None));
        assert!(is_valid_tool_name(&"a".repeat(64), None));
        assert!(!is_valid_tool_name(&"a".repeat(65), None));
        assert!(!is_valid_tool_name("", None));
        assert!(!is_valid_tool_name("   ", None));
        assert!(!is_valid_tool_name("read file", None));
        assert!(!is_valid_tool_name("lire/é", None));
    }

    #[test]
    fn tool_names_must_be_in_the_allowed_set_when_one_is_given() {
        let allowed: HashSet<String> = ["read".to_owned()].into();
        assert!(is_valid_tool_name(" read", Some(&allowed)));
        assert!(!is_valid_tool_name("exec", Some(&allowed)));
    }

    #[test]
    fn strict_ids_keep_only_ascii_alphanumerics() {
        assert_eq!(
            sanitize_tool_call_id("call_ab-12|x", ToolCallIdMode::Strict),
            "callab12x"
        );
        assert_eq!(
            sanitize_tool_call_id("__--", ToolCallIdMode::Strict),
            "sanitizedtoolid"
        );
        assert_eq!(
            sanitize_tool_call_id("é", ToolCallIdMode::Strict),
            "sanitizedtoolid"
        );
    }

    #[test]
    fn non_string_ids_become_the_default_id() {
        assert_eq!(
            sanitize_tool_call_id_value(&json!(42), ToolCallIdMode::Strict),
            "defaulttoolid"
        );
        assert_eq!(
            sanitize_tool_call_id_value(&json!("a_b"), ToolCallIdMode::Strict),
            "ab"
        );
    }

    #[test]
    fn strict9_ids_keep_the_last_nine_alphanumerics() {
        assert_eq!(
            sanitize_tool_call_id("toolu_01ABCDEFGHJK", ToolCallIdMode::Strict9),
            "BCDEFGHJK"
        );
        assert_eq!(
            sanitize_tool_call_id("abc_def_ghi", ToolCallIdMode::Strict9),
            "abcdefghi"
        );
    }

    #[test]
    fn strict9_pads_short_ids_with_a_deterministic_hash() {
        let a = sanitize_tool_call_id("ab", ToolCallIdMode::Strict9);
        let b = sanitize_tool_call_id("a_b", ToolCallIdMode::Strict9);
        assert_eq!(a.len(), 9);
        assert!(a.starts_with("ab") && b.starts_with("ab"));
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, b, "ids differing in punctuation stay apart");
        assert_eq!(a, sanitize_tool_call_id("ab", ToolCallIdMode::Strict9));
        assert_eq!(sanitize_tool_call_id("", ToolCallIdMode::Strict9).len(), 9);
    }

    #[test]
    fn pi_format_transcripts_import_as_typed_messages() {
        // Arrange
        let raw = vec![
            json!({"role": "user", "content": [{"type": "text", "text": "read it"}]}),
            json!({"role": "assistant", "stopReason": "toolUse", "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "text", "text": "ok"},
                {"type": "toolCall", "id": "call_1", "name": " read ", "arguments": {"path": "a"}}
            ]}),
            json!({"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
                   "content": [{"type": "text", "text": "body"}], "isError": false}),
        ];

        // Act
        let messages = messages_from_raw(&raw);

        // Assert
        assert_eq!(
            messages,
            vec![
                Message::User {
                    text: "read it".into()
                },
                Message::Assistant {
                    content: vec![
                        AssistantBlock::Text { text: "ok".into() },
                        call("call_1", "read", json!({"path": "a"})),
                    ],
                    stop_reason: StopReason::ToolUse,
                },
                result("call_1", "read", "body", false),
            ]
        );
    }

    #[test]
    fn anthropic_format_transcripts_import_as_typed_messages() {
        let raw = vec![
            json!({"role": "assistant", "stop_reason": "tool_use", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "exec", "input": {"cmd": "ls"}}
            ]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "is_error": true,
                 "content": [{"type": "text", "text": "denied"}]},
                {"type": "text", "text": "why?"}
            ]}),
        ];
        assert_eq!(
            messages_from_raw(&raw),
            vec![
                Message::Assistant {
                    content: vec![call("toolu_1", "exec", json!({"cmd": "ls"}))],
                    stop_reason: StopReason::ToolUse,
                },
                result("toolu_1", "", "denied", true),
                Message::User {
                    text: "why?".into()
                },
            ]
        );
    }

    #[test]
    fn openai_format_transcripts_import_as_typed_messages() {
        let raw = vec![
            json!({"role": "system", "content": "be nice"}),
            json!({"role": "assistant", "content": null, "finish_reason": "tool_calls", "tool_calls": [
                {"id": "call_a", "type": "function", "function": {"name": "read", "arguments": "{\"p\":1}"}},
                {"id": "call_b", "type": "function", "function": {"name": "ls", "arguments": ""}}
            ]}),
            json!({"role": "tool", "tool_call_id": "call_a", "content": "one"}),
        ];
        assert_eq!(
            messages_from_raw(&raw),
            vec![
                Message::Assistant {
                    content: vec![
                        call("call_a", "read", json!({"p": 1})),
                        call("call_b", "ls", json!({}))
                    ],
                    stop_reason: StopReason::ToolUse,
                },
                result("call_a", "", "one", false),
            ]
        );
    }

    #[test]
    fn bedrock_converse_transcripts_import_as_typed_messages() {
        let raw = vec![
            json!({"role": "assistant", "content": [
                {"text": "checking"},
                {"toolUse": {"toolUseId": "tu_1", "name": "web_fetch", "input": {"url": "u"}}}
            ]}),
            json!({"role": "user", "content": [
                {"toolResult": {"toolUseId": "tu_1", "status": "error",
                                "content": [{"text": "404"}, {"json": {"code": 404}}]}}
            ]}),
        ];
        assert_eq!(
            messages_from_raw(&raw),
            vec![
                Message::Assistant {
                    content: vec![
                        AssistantBlock::Text {
                            text: "checking".into()
                        },
                        call("tu_1", "web_fetch", json!({"url": "u"})),
                    ],
                    stop_reason: StopReason::EndTurn,
                },
                result("tu_1", "", "404\n{\"code\":404}", true),
            ]
        );
    }

    #[test]
    fn clawless_serialised_messages_round_trip_through_the_importer() {
        let messages = vec![
            Message::User { text: "hi".into() },
            Message::Assistant {
                content: vec![call("c1", "read", json!({}))],
                stop_reason: StopReason::Aborted,
            },
            result("c1", "read", "x", true),
        ];
        let raw: Vec<Value> = messages
            .iter()
            .map(|m| serde_json::to_value(m).expect("serialises"))
            .collect();
        assert_eq!(messages_from_raw(&raw), messages);
    }

    #[test]
    fn calls_without_arguments_id_or_valid_name_are_dropped() {
        let raw = vec![json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": "c1", "name": "read"},
            {"type": "toolCall", "id": "c2", "name": "read", "input": null},
            {"type": "toolCall", "name": "read", "input": {}},
            {"type": "toolCall", "id": "c4", "name": "bad name", "input": {}},
            {"type": "toolCall", "id": "c5", "name": "read", "arguments": "{not json"},
            {"type": "toolCall", "id": "c6", "name": "read", "input": {}}
        ]})];
        assert_eq!(
            messages_from_raw(&raw),
            vec![Message::Assistant {
                content: vec![call("c6", "read", json!({}))],
                stop_reason: StopReason::EndTurn,
            }]
        );
    }

    #[test]
    fn calls_outside_the_allowed_set_are_dropped_and_an_emptied_assistant_goes_too() {
        let allowed: HashSet<String> = ["read".to_owned()].into();
        let raw = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "content": [
                {"type": "toolCall", "id": "c1", "name": "exec", "input": {}}
            ]}),
        ];
        assert_eq!(
            messages_from_raw_with_allowed_tools(&raw, Some(&allowed)),
            vec![Message::User { text: "go".into() }]
        );
    }

    #[test]
    fn results_without_an_id_and_unknown_roles_are_skipped() {
        let raw = vec![
            json!({"role": "tool", "content": "lost"}),
            json!({"role": "developer", "content": "rules"}),
            json!("not an object"),
        ];
        assert!(messages_from_raw(&raw).is_empty());
    }

    #[test]
    fn replay_sanitising_drops_bad_typed_calls_and_trims_names() {
        let messages = vec![
            Message::Assistant {
                content: vec![
                    call("", "read", json!({})),
                    call("c2", " read ", json!({})),
                    call("c3", "read", Value::Null),
                ],
                stop_reason: StopReason::ToolUse,
            },
            Message::Assistant {
                content: vec![call("c4", "no way", json!({}))],
                stop_reason: StopReason::ToolUse,
            },
        ];
        assert_eq!(
            sanitize_tool_calls_for_replay(&messages, None),
            vec![Message::Assistant {
                content: vec![call("c2", "read", json!({}))],
                stop_reason: StopReason::ToolUse,
            }]
        );
    }
}
