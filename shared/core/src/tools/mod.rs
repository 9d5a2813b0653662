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

use crate::model::ToolSpec;
use crate::object_store::ObjectStore;
use crate::skills::source::SkillSource;

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
    /// The user's time zone, if configured.
    pub timezone: Option<String>,
    /// Current time as RFC 3339 (UTC), supplied by the caller's clock.
    pub now_rfc3339: String,
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
        &self,
        url: &str,
        max_bytes: usize,
        timeout: Duration,
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
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync + std::fmt::Debug {
    /// Name, description and argument schema, as offered to the model.
    fn spec(&self) -> ToolSpec;

    /// Runs the tool. Failures are returned as [`ToolOutput::error`], never panics.
    async fn run(&self, input: &Value, context: &ToolContext) -> ToolOutput;
}
