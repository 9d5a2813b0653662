//! The exec job port: one record per exec tool call sent to a node, with the signed job as
//! sent, its attempt and deadline, and the result once one arrives. The first result for the
//! current attempt wins; everything after it is told why it lost.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::NodeStoreError;

/// An exec job as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecJobRecord {
    /// Idempotent id, derived from session, turn and tool call.
    pub job_id: String,
    /// The node it was sent to.
    pub node_id: String,
    /// The session waiting for it.
    pub session_key: String,
    /// The agent that asked.
    pub agent_id: String,
    /// The tool call it answers.
    pub call_id: String,
    /// Which send this is, starting at 1; a re-send after an approval or a lost delivery
    /// increments it, and only a result for the current attempt is recorded.
    pub attempt: u32,
    /// The signed job JSON as sent to the node.
    pub envelope: String,
    /// When the job was created (Unix milliseconds).
    pub created_at_ms: u64,
    /// When the current attempt times out (Unix milliseconds).
    pub deadline_ms: u64,
    /// The result JSON, once resolved.
    pub result: Option<String>,
    /// When it was resolved (Unix milliseconds).
    pub resolved_at_ms: Option<u64>,
}

/// What became of a result handed to [`ExecJobs::resolve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolveOutcome {
    /// It was the first result for the current attempt: it is now the job's result.
    Recorded,
    /// The job already had a result; this one was dropped.
    AlreadyResolved,
    /// There is no such job.
    Unknown,
    /// The job is unresolved but at another attempt; this result was dropped.
    StaleAttempt,
}

impl ExecJobRecord {
    /// What resolving this job with a result for `attempt` does, given the job as it is:
    /// a resolved job stays resolved, a result for another attempt is stale. Every adapter
    /// classifies the same way.
    pub fn resolution_for(&self, attempt: u32) -> ResolveOutcome {
        if self.result.is_some() {
            ResolveOutcome::AlreadyResolved
        } else if attempt != self.attempt {
            ResolveOutcome::StaleAttempt
        } else {
            ResolveOutcome::Recorded
        }
    }

    /// True when [`ExecJobs::next_attempt`] may move this job to `attempt`: it is unresolved
    /// and `attempt` is later than the current one.
    pub fn accepts_attempt(&self, attempt: u32) -> bool {
        self.result.is_none() && attempt > self.attempt
    }
}

/// Exec jobs: created once, re-sent with a higher attempt, resolved once.
#[async_trait]
pub trait ExecJobs: Send + Sync + std::fmt::Debug {
    /// Stores a new job: `true` when created, `false` (changing nothing) when the id exists,
    /// so a redelivered turn event can create its job again harmlessly.
    async fn create(&self, job: &ExecJobRecord) -> Result<bool, NodeStoreError>;

    /// The job, or `None`.
    async fn get(&self, job_id: &str) -> Result<Option<ExecJobRecord>, NodeStoreError>;

    /// Moves an unresolved job to a later `attempt` with a new envelope and deadline.
    /// `false`, changing nothing, when the job is unknown, resolved, or not behind `attempt`.
    async fn next_attempt(
        &self, job_id: &str, attempt: u32, envelope: &str, deadline_ms: u64,
    ) -> Result<bool, NodeStoreError>;

    /// Records `result` for `attempt` if it is the first result for the current attempt (a
    /// conditional write: of concurrent resolves, exactly one is [`ResolveOutcome::Recorded`]).
    async fn resolve(
        &self, job_id: &str, attempt: u32, result: &str, now_ms: u64,
    ) -> Result<ResolveOutcome, NodeStoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(attempt: u32, result: Option<&str>) -> ExecJobRecord {
        ExecJobRecord {
            job_id: "j".into(),
            node_id: "n".into(),
            session_key: "agent:main:main".into(),
            agent_id: "main".into(),
            call_id: "c".into(),
            attempt,
            envelope: "{}".into(),
            created_at_ms: 0,
            deadline_ms: 10,
            result: result.map(str::to_owned),
            resolved_at_ms: result.map(|_| 5),
        }
    }

    #[test]
    fn a_resolved_job_reports_already_resolved_whatever_the_attempt() {
        assert_eq!(
            job(2, Some("r")).resolution_for(1),
            ResolveOutcome::AlreadyResolved
        );
        assert_eq!(
            job(2, Some("r")).resolution_for(2),
            ResolveOutcome::AlreadyResolved
        );
    }

    #[test]
    fn only_the_current_attempt_is_recorded() {
        assert_eq!(job(2, None).resolution_for(2), ResolveOutcome::Recorded);
        assert_eq!(job(2, None).resolution_for(1), ResolveOutcome::StaleAttempt);
        assert_eq!(job(2, None).resolution_for(3), ResolveOutcome::StaleAttempt);
    }

    #[test]
    fn only_a_later_attempt_of_an_unresolved_job_is_accepted() {
        assert!(job(1, None).accepts_attempt(2));
        assert!(!job(2, None).accepts_attempt(2));
        assert!(!job(2, None).accepts_attempt(1));
        assert!(!job(1, Some("r")).accepts_attempt(2));
    }
}
