//! Tools that run inside the turn function: the [`Tool`] trait, what a tool sees of the
//! session ([`ToolContext`]), and the catalog of built-in tools.
//!
//! Tools reach storage only through ports (the workspace and skill sources are object stores,
//! web access is a [`WebFetcher`]), so they behave the same in Lambda and local mode. Which
//! tools a model may call is decided by `crate::tool_policy`, never by a tool itself.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use clawless_base::model::ToolSpec;
use clawless_base::object_store::ObjectStore;
use clawless_skills::source::SkillSource;

/// What a tool returns: text for the model, and whether it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text the model sees (before the transcript cap).
    pub text: String,
    /// True when the tool failed or refused; the model sees the text as an error result.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: false,
        }
    }

    /// A failed result.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            is_error: true,
        }
    }
}

impl From<Result<String, String>> for ToolOutput {
    /// A tool's outcome: `Ok` text as a success, `Err` text as a failure the model sees.
    fn from(outcome: Result<String, String>) -> Self {
        match outcome {
            Ok(text) => Self::ok(text),
            Err(message) => Self::error(message),
        }
    }
}

/// The agent's workspace: a prefix in an object store (`agents/<id>/workspace/` in S3, a
/// directory in local mode).
#[derive(Debug, Clone)]
pub struct Workspace {
    /// Store holding the workspace.
    pub store: Arc<dyn ObjectStore>,
    /// Key prefix of the workspace root, `""` or ending in `/`.
    pub prefix: String,
}

impl Workspace {
    /// The workspace root as the model sees it (a path or an `s3://` URI), ending in `/`.
    pub fn display_root(&self) -> String {
        let location = self.store.location(&self.prefix);
        if location.ends_with('/') {
            location
        } else {
            format!("{location}/")
        }
    }
}

/// Facts about the session for `session_status`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionFacts {
    /// Session key.
    pub session_key: String,
    /// Session id (stable per session).
    pub session_id: String,
    /// Agent id.
    pub agent_id: String,
    /// `provider/model` in use.
    pub model: String,
    /// Channel the current message came from.
    pub channel: String,
    /// Number of steps in the transcript.
    pub transcript_steps: u64,
    /// Model calls made so far in the current turn.
    pub model_calls_this_turn: u32,
    /// Input and output tokens used in the session so far.
    pub tokens_in: u64,
    /// Output tokens used in the session so far.
    pub tokens_out: u64,
    /// How the session is sandboxed (`on (workspace access none)`, `off`); empty when
    /// unknown.
    pub sandbox: String,
    /// The user's time zone, if configured.
    pub timezone: Option<String>,
    /// Current time as RFC 3339 (UTC), supplied by the caller's clock.
    pub now_rfc3339: String,
    /// Estimated tokens of the session's last request.
    pub context_tokens: Option<u64>,
    /// The model's context window, in tokens.
    pub context_window: Option<u64>,
    /// Compactions in the current generation.
    pub compactions: u64,
    /// How long the current generation has lived (`3d 4h`, `12m`…).
    pub session_age: String,
    /// The reset that began the current generation (`/new at 2026-…Z`), if any.
    pub last_reset: Option<String>,
    /// What was done with the last message's attachments (`image shown · audio ok
    /// (openai/gpt-4o-mini-transcribe)`), if it had any.
    pub media: Option<String>,
}

/// A fetched web page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchedPage {
    /// Final URL after redirects.
    pub url: String,
    /// HTTP status.
    pub status: u16,
    /// `content-type` header, if any.
    pub content_type: Option<String>,
    /// Body bytes, at most the requested limit.
    pub body: Vec<u8>,
    /// True when the body was cut at the limit.
    pub truncated: bool,
}

/// Why a fetch failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL or one of its redirects points at a refused address (loopback, private, …).
    #[error("refused: {0}")]
    Refused(String),
    /// The URL is not http(s) or does not parse.
    #[error("invalid url: {0}")]
    InvalidUrl(String),
    /// The fetch took longer than allowed.
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    /// Network failure.
    #[error("fetch failed: {0}")]
    Failed(String),
}

/// HTTP GET for `web_fetch`. Implementations must resolve the host and refuse loopback,
/// private, link-local and metadata addresses for the URL and every redirect, using
/// `web_fetch::address_is_refused`.
#[async_trait]
pub trait WebFetcher: Send + Sync + std::fmt::Debug {
    /// Fetches `url`, reading at most `max_bytes` of body, giving up after `timeout`.
    async fn fetch(
        &self, url: &str, max_bytes: usize, timeout: Duration,
    ) -> Result<FetchedPage, FetchError>;
}

/// Everything a tool may touch while it runs.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The agent's workspace (read, write, edit, memory).
    pub workspace: Workspace,
    /// The agent's skill sources, so `read` can open the `<location>`s of the skills prompt.
    pub skill_sources: Vec<SkillSource>,
    /// Home directories used to expand `~/` in skill locations.
    pub home_dirs: Vec<String>,
    /// Web access for `web_fetch`; `None` disables the tool.
    pub web: Option<Arc<dyn WebFetcher>>,
    /// Facts for `session_status`.
    pub session: SessionFacts,
    /// Set for a sandboxed session: `/workspace/…` names its own workspace, and (with
    /// `workspaceAccess: ro`) `/agent/…` the agent's, read-only.
    pub sandbox: Option<SandboxView>,
}

/// What a sandboxed session's file tools see besides their own workspace (spec
/// `openclaw-sandbox.md` §5.1 item 3).
#[derive(Debug, Clone, Default)]
pub struct SandboxView {
    /// The agent's own workspace, for `read` at `/agent/…` (`workspaceAccess: ro`); its
    /// memory (`MEMORY.md`, `memory/`) stays out of reach.
    pub agent: Option<Workspace>,
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync + std::fmt::Debug {
    /// Name, description and argument schema, as offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs the tool. Failures are returned as [`ToolOutput::error`], never panics.
    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput;
}

#[cfg(test)]
mod fixtures;

pub mod apply_patch;
pub mod edit;
pub mod find;
pub mod grep;
pub mod ls;
pub mod memory;
pub mod paths;
pub mod read;
pub mod session_status;
pub mod walk;
pub mod web_fetch;
pub mod write;

/// Every built-in tool, in the order the system prompt lists them: `read`, `write`, `edit`,
/// `apply_patch`, `grep`, `find`, `ls`, `web_fetch`, `session_status`, `memory_search`,
/// `memory_get`.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read::ReadTool),
        Arc::new(write::WriteTool),
        Arc::new(edit::EditTool),
        Arc::new(apply_patch::ApplyPatchTool),
        Arc::new(grep::GrepTool),
        Arc::new(find::FindTool),
        Arc::new(ls::LsTool),
        Arc::new(web_fetch::WebFetchTool),
        Arc::new(session_status::SessionStatusTool),
        Arc::new(memory::MemorySearchTool),
        Arc::new(memory::MemoryGetTool),
    ]
}

/// Argument helpers shared by the tools: models send slightly different shapes (aliases,
/// numbers as strings), and every mistake becomes a readable tool error.
pub(crate) mod args {
    use serde_json::Value;

    /// The first of `names` present as a string; `Err` when one is present with another type.
    pub(crate) fn string<'a>(input: &'a Value, names: &[&str]) -> Result<Option<&'a str>, String> {
        for name in names {
            match input.get(name) {
                None | Some(Value::Null) => {}
                Some(Value::String(text)) => return Ok(Some(text)),
                Some(_) => return Err(format!("`{name}` must be a string")),
            }
        }
        Ok(None)
    }

    /// Like [`string`], but missing is an error naming the first alias.
    pub(crate) fn required_string<'a>(input: &'a Value, names: &[&str]) -> Result<&'a str, String> {
        string(input, names)?.ok_or_else(|| {
            format!(
                "missing required argument `{}`",
                names.first().copied().unwrap_or("?")
            )
        })
    }

    /// A positive integer (a JSON number or a numeric string), if present.
    pub(crate) fn positive(input: &Value, names: &[&str]) -> Result<Option<usize>, String> {
        for name in names {
            let parsed = match input.get(name) {
                None | Some(Value::Null) => continue,
                Some(Value::Number(number)) => number.as_u64().or_else(|| {
                    number
                        .as_f64()
                        .filter(|f| f.fract() == 0.0 && *f >= 0.0)
                        .map(|f| f as u64)
                }),
                Some(Value::String(text)) => text.trim().parse::<u64>().ok(),
                Some(_) => None,
            };
            return match parsed.and_then(|value| usize::try_from(value).ok()) {
                Some(value) if value > 0 => Ok(Some(value)),
                _ => Err(format!("`{name}` must be a positive integer")),
            };
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_tools_are_the_eleven_turn_tools_with_object_schemas() {
        let names: Vec<String> = builtin_tools()
            .iter()
            .map(|tool| tool.spec().name)
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(
            sorted,
            [
                "apply_patch",
                "edit",
                "find",
                "grep",
                "ls",
                "memory_get",
                "memory_search",
                "read",
                "session_status",
                "web_fetch",
                "write"
            ]
        );
        for tool in builtin_tools() {
            let spec = tool.spec();
            assert_eq!(spec.input_schema["type"], "object", "{}", spec.name);
            assert!(!spec.description.is_empty());
        }
    }
}
