//! [`InMemoryExecJobs`] and [`exec_jobs_contract`].

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{NodeStoreDeviations, short_label};
use crate::nodes::{ExecJobRecord, ExecJobs, NodeStoreError, ResolveOutcome};
use crate::testing::{join_all, lock_state, sized_json_body};

/// An in-memory [`ExecJobs`]. Clones share the same jobs.
#[derive(Debug, Clone, Default)]
pub struct InMemoryExecJobs {
    jobs: Arc<Mutex<HashMap<String, ExecJobRecord>>>,
}

impl InMemoryExecJobs {
    /// A store with no jobs.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ExecJobs for InMemoryExecJobs {
    async fn create(&self, job: &ExecJobRecord) -> Result<bool, NodeStoreError> {
        let mut jobs = lock_state(&self.jobs);
        if jobs.contains_key(&job.job_id) {
            return Ok(false);
        }
        jobs.insert(job.job_id.clone(), job.clone());
        Ok(true)
    }

    async fn get(&self, job_id: &str) -> Result<Option<ExecJobRecord>, NodeStoreError> {
        Ok(lock_state(&self.jobs).get(job_id).cloned())
    }

    async fn next_attempt(
        &self, job_id: &str, attempt: u32, envelope: &str, deadline_ms: u64,
    ) -> Result<bool, NodeStoreError> {
        let mut jobs = lock_state(&self.jobs);
        match jobs.get_mut(job_id) {
            Some(job) if job.accepts_attempt(attempt) => {
                job.attempt = attempt;
                envelope.clone_into(&mut job.envelope);
                job.deadline_ms = deadline_ms;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn resolve(
        &self, job_id: &str, attempt: u32, result: &str, now_ms: u64,
    ) -> Result<ResolveOutcome, NodeStoreError> {
        let mut jobs = lock_state(&self.jobs);
        let Some(job) = jobs.get_mut(job_id) else {
            return Ok(ResolveOutcome::Unknown);
        };
        let outcome = job.resolution_for(attempt);
        if outcome == ResolveOutcome::Recorded {
            job.result = Some(result.to_owned());
            job.resolved_at_ms = Some(now_ms);
        }
        Ok(outcome)
    }
}

/// Runs the [`ExecJobs`] contract against `jobs`, panicking with a description of the first
/// broken expectation. Job ids start with a label unique to this call, so the store may be
/// shared. Includes a race of 8 concurrent resolves of one job, unless `deviations` says the
/// backend cannot pass it.
pub async fn exec_jobs_contract(jobs: &dyn ExecJobs, deviations: NodeStoreDeviations) {
    let suite = JobsContract {
        jobs,
        run: short_label("j"),
    };
    suite.a_created_job_reads_back_whole().await;
    suite
        .creating_an_existing_id_returns_false_and_changes_nothing()
        .await;
    suite.the_first_result_for_the_current_attempt_wins().await;
    suite
        .results_for_unknown_jobs_or_other_attempts_are_dropped()
        .await;
    suite.a_later_attempt_replaces_envelope_and_deadline().await;
    suite
        .next_attempt_refuses_unknown_resolved_and_earlier_attempts()
        .await;
    if !deviations.conditional_writes_not_atomic {
        suite.concurrent_resolves_have_exactly_one_winner().await;
    }
    suite.large_and_unicode_documents_round_trip_exactly().await;
}

struct JobsContract<'a> {
    jobs: &'a dyn ExecJobs,
    run: String,
}

const T0: u64 = 1_700_000_000_000;

impl JobsContract<'_> {
    fn job(&self, name: &str) -> ExecJobRecord {
        ExecJobRecord {
            job_id: format!("{}-{name}", self.run),
            node_id: "node-1".into(),
            session_key: "agent:main:telegram:direct:42".into(),
            agent_id: "main".into(),
            call_id: format!("call-{name}"),
            attempt: 1,
            envelope: format!(r#"{{"jobId":"{name}","argv":["echo","hi"],"sig":"ab12"}}"#),
            created_at_ms: T0,
            deadline_ms: T0 + 60_000,
            result: None,
            resolved_at_ms: None,
        }
    }

    async fn create(&self, job: &ExecJobRecord) -> bool {
        self.jobs
            .create(job)
            .await
            .unwrap_or_else(|err| panic!("create {}: {err}", job.job_id))
    }

    async fn get(&self, job_id: &str) -> Option<ExecJobRecord> {
        self.jobs
            .get(job_id)
            .await
            .unwrap_or_else(|err| panic!("get {job_id}: {err}"))
    }

    async fn get_some(&self, job_id: &str) -> ExecJobRecord {
        self.get(job_id)
            .await
            .unwrap_or_else(|| panic!("job {job_id} should exist"))
    }

    async fn resolve(&self, job_id: &str, attempt: u32, result: &str, at: u64) -> ResolveOutcome {
        self.jobs
            .resolve(job_id, attempt, result, at)
            .await
            .unwrap_or_else(|err| panic!("resolve {job_id}: {err}"))
    }

    async fn next_attempt(
        &self, job_id: &str, attempt: u32, envelope: &str, deadline: u64,
    ) -> bool {
        self.jobs
            .next_attempt(job_id, attempt, envelope, deadline)
            .await
            .unwrap_or_else(|err| panic!("next attempt of {job_id}: {err}"))
    }

    async fn a_created_job_reads_back_whole(&self) {
        let job = self.job("whole");
        assert_eq!(self.get(&job.job_id).await, None, "before create");
        assert!(self.create(&job).await, "a new id is created");
        assert_eq!(self.get_some(&job.job_id).await, job);
    }

    async fn creating_an_existing_id_returns_false_and_changes_nothing(&self) {
        let job = self.job("twice");
        assert!(self.create(&job).await);
        let mut other = self.job("twice");
        other.envelope = r#"{"other":true}"#.into();
        other.attempt = 7;
        other.deadline_ms = T0 + 1;
        assert!(
            !self.create(&other).await,
            "the same id again is not created"
        );
        assert_eq!(self.get_some(&job.job_id).await, job, "the first stands");
    }

    async fn the_first_result_for_the_current_attempt_wins(&self) {
        let job = self.job("first-wins");
        self.create(&job).await;
        assert_eq!(
            self.resolve(&job.job_id, 1, r#"{"exitCode":0}"#, T0 + 10)
                .await,
            ResolveOutcome::Recorded
        );
        assert_eq!(
            self.resolve(&job.job_id, 1, r#"{"exitCode":1}"#, T0 + 20)
                .await,
            ResolveOutcome::AlreadyResolved,
            "a second result for the same attempt"
        );
        assert_eq!(
            self.resolve(&job.job_id, 2, r#"{"exitCode":2}"#, T0 + 30)
                .await,
            ResolveOutcome::AlreadyResolved,
            "a resolved job reports so whatever the attempt"
        );
        let mut expected = job;
        expected.result = Some(r#"{"exitCode":0}"#.into());
        expected.resolved_at_ms = Some(T0 + 10);
        assert_eq!(
            self.get_some(&expected.job_id).await,
            expected,
            "the first result and its time stand"
        );
    }

    async fn results_for_unknown_jobs_or_other_attempts_are_dropped(&self) {
        let unknown = format!("{}-unknown", self.run);
        assert_eq!(
            self.resolve(&unknown, 1, "{}", T0).await,
            ResolveOutcome::Unknown
        );
        assert_eq!(self.get(&unknown).await, None, "resolving creates nothing");
        let job = self.job("stale");
        self.create(&job).await;
        assert_eq!(
            self.resolve(&job.job_id, 2, "{}", T0).await,
            ResolveOutcome::StaleAttempt,
            "a result for an attempt not yet sent"
        );
        assert_eq!(
            self.resolve(&job.job_id, 0, "{}", T0).await,
            ResolveOutcome::StaleAttempt
        );
        assert_eq!(
            self.get_some(&job.job_id).await,
            job,
            "stale results change nothing"
        );
    }

    async fn a_later_attempt_replaces_envelope_and_deadline(&self) {
        let job = self.job("retry");
        self.create(&job).await;
        assert!(
            self.next_attempt(&job.job_id, 2, r#"{"attempt":2}"#, T0 + 120_000)
                .await
        );
        let mut expected = job.clone();
        expected.attempt = 2;
        expected.envelope = r#"{"attempt":2}"#.into();
        expected.deadline_ms = T0 + 120_000;
        assert_eq!(self.get_some(&job.job_id).await, expected);
        assert_eq!(
            self.resolve(&job.job_id, 1, r#"{"late":1}"#, T0 + 1).await,
            ResolveOutcome::StaleAttempt,
            "the old attempt's result is stale now"
        );
        assert_eq!(
            self.resolve(&job.job_id, 2, r#"{"ok":2}"#, T0 + 2).await,
            ResolveOutcome::Recorded
        );
        assert!(
            self.next_attempt(&job.job_id, 5, r#"{"attempt":5}"#, T0 + 1)
                .await
                .eq(&false),
            "a resolved job takes no more attempts"
        );
        let resolved = self.get_some(&job.job_id).await;
        assert_eq!(
            (resolved.attempt, resolved.result.as_deref()),
            (2, Some(r#"{"ok":2}"#))
        );
    }

    async fn next_attempt_refuses_unknown_resolved_and_earlier_attempts(&self) {
        let unknown = format!("{}-no-such-job", self.run);
        assert!(
            !self.next_attempt(&unknown, 2, "{}", T0).await,
            "an unknown job"
        );
        assert_eq!(self.get(&unknown).await, None, "and nothing is created");
        let job = self.job("attempts");
        self.create(&job).await;
        assert!(self.next_attempt(&job.job_id, 3, "{}", T0 + 3).await);
        for attempt in [3, 2, 1, 0] {
            assert!(
                !self
                    .next_attempt(&job.job_id, attempt, r#"{"no":1}"#, T0 + 9)
                    .await,
                "attempt {attempt} is not after 3"
            );
        }
        let current = self.get_some(&job.job_id).await;
        assert_eq!(
            (
                current.attempt,
                current.envelope.as_str(),
                current.deadline_ms
            ),
            (3, "{}", T0 + 3),
            "refused attempts change nothing"
        );
    }

    async fn concurrent_resolves_have_exactly_one_winner(&self) {
        let job = self.job("race");
        self.create(&job).await;
        let job_id = job.job_id.as_str();
        let attempts = (0..8u64)
            .map(|writer| {
                Box::pin(async move {
                    let result = format!(r#"{{"writer":{writer}}}"#);
                    (
                        writer,
                        self.jobs.resolve(job_id, 1, &result, T0 + writer).await,
                    )
                }) as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<(u64, Result<ResolveOutcome, NodeStoreError>)> = join_all(attempts).await;
        let winners: Vec<u64> = results
            .iter()
            .filter(|(_, result)| matches!(result, Ok(ResolveOutcome::Recorded)))
            .map(|(writer, _)| *writer)
            .collect();
        assert_eq!(winners.len(), 1, "exactly one resolve wins: {results:?}");
        assert!(
            results.iter().all(|(_, result)| matches!(
                result,
                Ok(ResolveOutcome::Recorded | ResolveOutcome::AlreadyResolved)
            )),
            "the others are told it was already resolved: {results:?}"
        );
        let stored = self.get_some(job_id).await;
        assert_eq!(
            stored.result,
            Some(format!(r#"{{"writer":{}}}"#, winners[0])),
            "the winner's result is stored"
        );
        assert_eq!(stored.resolved_at_ms, Some(T0 + winners[0]));
    }

    async fn large_and_unicode_documents_round_trip_exactly(&self) {
        let mut job = self.job("large");
        job.envelope = sized_json_body("envelope", 8 * 1024);
        job.session_key = "agent:main:generic:direct:+1 555/ünï".into();
        self.create(&job).await;
        let result = sized_json_body("result", 64 * 1024);
        assert_eq!(
            self.resolve(&job.job_id, 1, &result, T0).await,
            ResolveOutcome::Recorded
        );
        let stored = self.get_some(&job.job_id).await;
        assert!(
            stored.envelope == job.envelope,
            "the envelope is byte-exact"
        );
        assert!(
            stored.result.as_deref() == Some(result.as_str()),
            "a 64 KB result is byte-exact"
        );
        assert_eq!(stored.session_key, job.session_key);
    }
}
