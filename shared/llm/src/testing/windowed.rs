//! [`WindowedModel`]: a scripted model on `127.0.0.1` that speaks the Anthropic Messages wire
//! format and behaves like a small real model where size matters. It counts every request's
//! tokens (4 characters a token, over the system prompt, every content block and the tool
//! schemas, plus [`IMAGE_TOKENS`] for each image) and refuses one over its window with Anthropic's own overflow error (`400
//! invalid_request_error: prompt is too long: N tokens > M maximum`). Otherwise it answers by
//! what the request is:
//! - a summary request (the summariser's system prompt): a summary with the five required
//!   headings that lists the numbered messages it saw, carries the previous summary's list
//!   forward, and names itself `SUMMARY-<k>` so tests can follow it into later requests;
//!   optionally its first attempt of every summary is weak (no headings), to exercise the
//!   quality check;
//! - a memory-flush prompt: a `write` call appending a note to the day's file, then
//!   `NO_REPLY`;
//! - anything else: `Answer to message N.` for the newest `Message N:` in the last user
//!   message (`Greetings!` when there is none).
//!
//! Every request is recorded with its token count and kind.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::media::IMAGE_TOKENS;

/// What a request was, as the model understood it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// A summary request.
    Summary,
    /// A memory-flush turn.
    MemoryFlush,
    /// An ordinary turn.
    Chat,
}

/// One request as the model saw it.
#[derive(Debug, Clone)]
pub struct SeenRequest {
    /// Kind.
    pub kind: RequestKind,
    /// Tokens counted (4 characters a token).
    pub tokens: u64,
    /// True when it was refused as too large.
    pub refused: bool,
    /// The request body.
    pub body: Value,
}

#[derive(Debug, Default)]
struct ModelState {
    window: u64,
    weak_first_summary: bool,
    /// The first summary request waits this long before answering (to kill a process
    /// mid-compaction).
    stall_first_summary: Option<std::time::Duration>,
    summaries: u64,
    seen: Vec<SeenRequest>,
}

type Shared = Arc<Mutex<ModelState>>;

/// The windowed scripted model. Stops when dropped.
#[derive(Debug)]
pub struct WindowedModel {
    addr: SocketAddr,
    state: Shared,
    _shutdown: oneshot::Sender<()>,
}

fn lock(state: &Shared) -> std::sync::MutexGuard<'_, ModelState> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WindowedModel {
    /// Starts a model whose real window is `window` tokens; with `weak_first_summary`, the
    /// first attempt at each summary lacks the required headings.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support only).
    pub async fn start(window: u64, weak_first_summary: bool) -> Self {
        let state: Shared = Arc::new(Mutex::new(ModelState {
            window,
            weak_first_summary,
            ..ModelState::default()
        }));
        let app = Router::new()
            .route("/v1/messages", post(answer))
            .with_state(Arc::clone(&state));
        let (addr, shutdown) = super::serve_on_loopback(app, "windowed model").await;
        Self {
            addr,
            state,
            _shutdown: shutdown,
        }
    }

    /// Makes the first summary request wait `stall` before it is answered.
    pub fn stall_first_summary(&self, stall: std::time::Duration) {
        lock(&self.state).stall_first_summary = Some(stall);
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<SeenRequest> {
        lock(&self.state).seen.clone()
    }
}

/// Tokens of a request as this model counts them.
pub fn count_tokens(body: &Value) -> u64 {
    let mut chars = 0usize;
    let mut images = 0u64;
    match body.get("system") {
        Some(Value::String(text)) => chars += text.chars().count(),
        Some(Value::Array(blocks)) => {
            for block in blocks {
                chars += block["text"].as_str().map_or(0, |t| t.chars().count());
            }
        }
        _ => {}
    }
    for message in body["messages"].as_array().into_iter().flatten() {
        match &message["content"] {
            Value::String(text) => chars += text.chars().count(),
            Value::Array(blocks) => {
                for block in blocks {
                    chars += block_chars(block);
                    if block["type"] == "image" {
                        images += 1;
                    }
                }
            }
            _ => {}
        }
    }
    if let Some(tools) = body.get("tools") {
        chars += tools.to_string().chars().count();
    }
    (chars as u64).div_ceil(4) + images * IMAGE_TOKENS
}

fn block_chars(block: &Value) -> usize {
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().map_or(0, |t| t.chars().count()),
        Some("tool_use") => {
            block["name"].as_str().map_or(0, str::len) + block["input"].to_string().chars().count()
        }
        Some("tool_result") => match &block["content"] {
            Value::String(text) => text.chars().count(),
            Value::Array(parts) => parts
                .iter()
                .map(|part| part["text"].as_str().map_or(0, |t| t.chars().count()))
                .sum(),
            _ => 0,
        },
        _ => 0,
    }
}

fn text_of(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn system_text(body: &Value) -> String {
    match body.get("system") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|block| block["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The numbers of every `Message N:` in `text`.
fn message_numbers(text: &str) -> BTreeSet<u64> {
    let mut numbers = BTreeSet::new();
    let mut rest = text;
    while let Some(found) = rest.find("Message ") {
        rest = &rest[found + "Message ".len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if !digits.is_empty() && rest[digits.len()..].starts_with(':') {
            numbers.insert(digits.parse().unwrap_or(0));
        }
    }
    numbers
}

/// The numbers a previous summary listed (`- Message N: answered`).
fn summarized_numbers(text: &str) -> BTreeSet<u64> {
    message_numbers(text)
}

async fn answer(State(state): State<Shared>, body: axum::body::Bytes) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return (StatusCode::BAD_REQUEST, "bad json").into_response();
    };
    let tokens = count_tokens(&body);
    let system = system_text(&body);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .map(text_of)
        .unwrap_or_default();
    let last_is_tool_result = messages.last().is_some_and(|message| {
        message["content"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| b["type"] == "tool_result"))
    });
    let kind = if system.starts_with("You are a context summarization assistant") {
        RequestKind::Summary
    } else if messages.iter().any(|message| {
        message["role"] == "user"
            && text_of(message)
                .lines()
                .any(|line| line.starts_with("Pre-compaction memory flush."))
    }) {
        RequestKind::MemoryFlush
    } else {
        RequestKind::Chat
    };
    let (refused, stall) = {
        let mut model = lock(&state);
        let refused = tokens > model.window;
        model.seen.push(SeenRequest {
            kind,
            tokens,
            refused,
            body: body.clone(),
        });
        let stall = match kind {
            RequestKind::Summary if !refused => model.stall_first_summary.take(),
            _ => None,
        };
        (refused, stall)
    };
    // Recorded first, so a test sees the request while it is held.
    if let Some(stall) = stall {
        tokio::time::sleep(stall).await;
    }
    let mut model = lock(&state);
    if refused {
        let message = format!(
            "prompt is too long: {tokens} tokens > {} maximum",
            model.window
        );
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({
                "type": "error",
                "error": {"type": "invalid_request_error", "message": message}
            })),
        )
            .into_response();
    }
    let usage = json!({"input_tokens": tokens, "output_tokens": 20});
    let text = match kind {
        RequestKind::Summary => {
            let weak = model.weak_first_summary && !last_user.contains("failed quality checks");
            if !weak {
                model.summaries += 1;
            }
            let (conversation, previous) = match last_user.split_once("<previous-summary>") {
                Some((conversation, previous)) => (conversation, previous),
                None => (last_user.as_str(), ""),
            };
            let mut numbers = summarized_numbers(previous);
            numbers.extend(message_numbers(conversation));
            let listed: Vec<String> = numbers
                .iter()
                .map(|n| format!("- Message {n}: answered"))
                .collect();
            let latest: String = conversation
                .rsplit("[User]: ")
                .next()
                .unwrap_or_default()
                .chars()
                .take(120)
                .collect();
            if weak {
                format!("We covered messages {numbers:?}.")
            } else {
                format!(
                    "## Decisions\n- SUMMARY-{k}\n{listed}\n- latest request handled: {latest}\n\
                     ## Open TODOs\nNone.\n\
                     ## Constraints/Rules\nNone.\n## Pending user asks\nNone.\n\
                     ## Exact identifiers\n- SUMMARY-{k}",
                    k = model.summaries,
                    listed = listed.join("\n")
                )
            }
        }
        RequestKind::MemoryFlush if !last_is_tool_result => {
            let path = last_user
                .split_whitespace()
                .find(|word| word.starts_with("memory/") && word.ends_with(".md"))
                .unwrap_or("memory/unknown.md")
                .to_owned();
            let id = format!("toolu_flush_{}", model.seen.len());
            return axum::Json(json!({
                "id": format!("msg_{id}"),
                "type": "message",
                "role": "assistant",
                "model": "windowed",
                "content": [{"type": "tool_use", "id": id, "name": "write",
                             "input": {"path": path, "content": "- the user sends numbered messages"}}],
                "stop_reason": "tool_use",
                "usage": usage
            }))
            .into_response();
        }
        RequestKind::MemoryFlush => "NO_REPLY".to_owned(),
        RequestKind::Chat => match message_numbers(&last_user).last() {
            Some(n) => format!("Answer to message {n}."),
            None => "Greetings!".to_owned(),
        },
    };
    axum::Json(json!({
        "id": format!("msg_{}", model.seen.len()),
        "type": "message",
        "role": "assistant",
        "model": "windowed",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "usage": usage
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_from_message_markers_only() {
        assert_eq!(
            message_numbers("Message 3: hi. Message 12: more. Message x: no. Message 4 no"),
            BTreeSet::from([3, 12])
        );
    }

    #[test]
    fn tokens_count_every_part_of_a_request() {
        let body = json!({
            "system": "abcd",
            "messages": [{"role": "user", "content": [{"type": "text", "text": "efgh"}]}],
        });
        assert_eq!(count_tokens(&body), 2);
    }

    #[test]
    fn an_image_counts_its_fixed_share_not_its_base64() {
        let image = json!({
            "type": "image",
            "source": { "type": "base64", "media_type": "image/png", "data": "A".repeat(40_000) },
        });
        let body = json!({
            "messages": [{"role": "user", "content": [{"type": "text", "text": "efgh"}, image.clone(), image]}],
        });
        assert_eq!(count_tokens(&body), 1 + 2 * IMAGE_TOKENS);
    }
}
