//! The background process index port: the backend's small record of every command a node
//! host backgrounded (spec §4.3, §4.8). The process table itself (output, stdin, the child)
//! lives on the node; this index lets `process list` answer while the node is offline, keeps
//! session ids across compaction, and is the once-gate for exit notifications: the write that
//! moves an entry from `running` to an ended status succeeds exactly once, so a node that
//! posts its exit twice, or a backend that restarts mid-way, wakes the agent once.
//!
//! Entries are keyed by (session key, process session id): a process is visible only to the
//! session that started it.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::NodeStoreError;

/// Where a background process stands, as far as the backend knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProcessStatus {
    /// Still running on its node.
    Running,
    /// Exited with code 0.
    Completed,
    /// Exited non-zero, or by a signal.
    Failed,
    /// Killed through `process kill` / `remove`.
    Killed,
    /// Its node forgot it (restarted without it, or the entry outlived the node's TTL).
    Lost,
}

impl ProcessStatus {
    /// The status as written (`running`, `completed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
            Self::Lost => "lost",
        }
    }

    /// Parses [`ProcessStatus::as_str`]'s text.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "running" => Self::Running,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "killed" => Self::Killed,
            "lost" => Self::Lost,
            _ => return None,
        })
    }

    /// True once the process no longer runs.
    pub fn is_ended(self) -> bool {
        self != Self::Running
    }
}

/// One backgrounded command as the backend indexes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BackgroundProcess {
    /// The session that started it (its scope).
    pub session_key: String,
    /// The node's word-slug id of the process (`swift-otter`).
    pub session_id: String,
    /// The node that runs it.
    pub node_id: String,
    /// The exec job that started it.
    pub exec_job_id: String,
    /// The command as the model wrote it.
    pub command: String,
    /// Where it stands.
    pub status: ProcessStatus,
    /// When it started (Unix milliseconds).
    pub started_at_ms: u64,
    /// When it ended, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<u64>,
    /// Its exit code, once it exited with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}

/// The background process index.
#[async_trait]
pub trait BackgroundProcesses: Send + Sync + std::fmt::Debug {
    /// Records a process the node reported `running`: `true` when created, `false` (changing
    /// nothing) when the entry exists, whatever its status, so a running report that arrives
    /// after the exit never makes an ended process run again.
    async fn record_running(&self, entry: &BackgroundProcess) -> Result<bool, NodeStoreError>;

    /// The entry of `session_id` in `session_key`'s scope, or `None`.
    async fn get(
        &self, session_key: &str, session_id: &str,
    ) -> Result<Option<BackgroundProcess>, NodeStoreError>;

    /// Every entry of `session_key`, newest start first (ties by session id).
    async fn list(&self, session_key: &str) -> Result<Vec<BackgroundProcess>, NodeStoreError>;

    /// The once-gate: writes `ended` (whose status must be an ended one) when its entry is
    /// missing or still `running`. `true` for exactly one of any number of calls, concurrent
    /// ones included; `false`, changing nothing, when the entry has already ended.
    async fn finish(&self, ended: &BackgroundProcess) -> Result<bool, NodeStoreError>;

    /// Deletes an entry (`process clear|remove`): `true` when there was one.
    async fn remove(&self, session_key: &str, session_id: &str) -> Result<bool, NodeStoreError>;
}

/// Sorts entries the way [`BackgroundProcesses::list`] returns them: newest start first,
/// then by session id.
pub fn sort_newest_first(entries: &mut [BackgroundProcess]) {
    entries.sort_by(|left, right| {
        right
            .started_at_ms
            .cmp(&left.started_at_ms)
            .then_with(|| left.session_id.cmp(&right.session_id))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip_through_their_text() {
        for status in [
            ProcessStatus::Running,
            ProcessStatus::Completed,
            ProcessStatus::Failed,
            ProcessStatus::Killed,
            ProcessStatus::Lost,
        ] {
            assert_eq!(ProcessStatus::parse(status.as_str()), Some(status));
            assert_eq!(
                serde_json::to_value(status).unwrap(),
                serde_json::json!(status.as_str())
            );
        }
        assert_eq!(ProcessStatus::parse("RUNNING"), None);
        assert!(!ProcessStatus::Running.is_ended());
        assert!(ProcessStatus::Lost.is_ended());
    }
}
