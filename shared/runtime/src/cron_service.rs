//! The cron jobs of one deployment as the `cron` tool, `clawless cron` and the operator's
//! admin route manage them (spec `openclaw-automation.md` §2.1, §2.10, §2.11): one entry
//! point, [`CronService::call`], takes a parsed `cron` call and answers with OpenClaw's JSON.
//!
//! It owns the jobs' timers. Every enabled job with a next run has one durable timer,
//! `cron:<jobId>:<slotMs>`, due at that slot (SQLite locally; an SQS delay or a one-time
//! EventBridge Scheduler schedule on AWS), whose event is a [`TurnEvent::CronFire`] for the
//! session the job runs in. Nothing polls. A timer left behind by an edit or a removal is
//! harmless: its firing finds the job gone or at another slot and does nothing (see the turn
//! service's `cron` module, which runs firings and records their outcome).
//!
//! A manual run (`run`) and a wake (`wake`) go on the turn queue at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clawless_automation::cron::run_log::{ListQuery, RunsQuery, cron_status, page_jobs};
use clawless_automation::cron::schedule::{STUCK_RUN_MS, firing_slot};
use clawless_automation::cron::startup::{
    INTERRUPTED_ONE_SHOT_ERROR, ManualRunResponse, manual_run_id, plan_startup,
    preflight_manual_run,
};
use clawless_automation::cron::tool::{CronAction, CronCaller, prepare_add, prepare_patch};
use clawless_automation::cron::types::{CronJob, SessionTarget, WakeMode};
use clawless_automation::cron::validate::{ValidationContext, apply_patch, unknown_job_error};
use clawless_automation::cron::{CronInputError, CronStore, CronStoreError};
use clawless_automation::heartbeat::{HeartbeatConfig, resolve_heartbeat_session};
use clawless_base::session_key::normalize_agent_id;
use clawless_base::time::TimeZone;
use clawless_core::session::{QueueError, SessionKey, TurnQueue};
use clawless_core::timers::{Timer, Timers};
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use serde_json::{Value, json};

use crate::config::{ClawlessConfig, DEFAULT_AGENT_ID};
use clawless_base::clock::Clock;

/// Why a cron request failed.
#[derive(Debug, thiserror::Error)]
pub enum CronServiceError {
    /// The request itself is wrong: the exact sentence for the caller.
    #[error(transparent)]
    Input(#[from] CronInputError),
    /// The jobs could not be read or written (a lost race is [`CronStoreError::Conflict`]).
    #[error(transparent)]
    Store(#[from] CronStoreError),
    /// A job's timer could not be scheduled.
    #[error("cron timer not scheduled: {0}")]
    Timer(#[source] QueueError),
    /// A manual run or wake could not be queued.
    #[error("cron run not queued: {0}")]
    Queue(#[source] QueueError),
}

impl CronServiceError {
    /// True when the caller asked for something wrong (400 rather than 500).
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Self::Input(_)
                | Self::Store(CronStoreError::Rejected { .. } | CronStoreError::NotFound { .. })
        )
    }
}

/// What the service works over.
#[derive(Clone)]
pub struct CronDeps {
    /// Jobs and run logs.
    pub store: Arc<dyn CronStore>,
    /// Where firings wait.
    pub timers: Arc<dyn Timers>,
    /// Where manual runs and wakes go.
    pub queue: Arc<dyn TurnQueue>,
    /// Time.
    pub clock: Arc<dyn Clock>,
    /// The deployment's config (`cron:`, agents, time zone, heartbeats).
    pub config: Arc<ClawlessConfig>,
    /// Where the jobs are kept, as `status` names it (a path or a table).
    pub store_label: Option<String>,
}

/// The cron jobs of one deployment. Share one per process.
pub struct CronService {
    deps: CronDeps,
    manual_runs: AtomicU64,
}

impl std::fmt::Debug for CronService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CronService")
            .field("store", &self.deps.store)
            .field("store_label", &self.deps.store_label)
            .finish_non_exhaustive()
    }
}

/// What start-up did to the jobs (`clawless local`'s catch-up, spec §2.11).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartupReport {
    /// Timers armed (one per enabled job with a next run).
    pub armed: usize,
    /// Missed jobs made to fire now.
    pub caught_up: Vec<String>,
    /// One-shots interrupted by the last stop: not run again.
    pub interrupted: Vec<String>,
}

impl CronService {
    /// A service over `deps`.
    pub fn new(deps: CronDeps) -> Self {
        Self {
            deps,
            manual_runs: AtomicU64::new(0),
        }
    }

    /// The jobs and run logs.
    pub fn store(&self) -> &Arc<dyn CronStore> {
        &self.deps.store
    }

    /// The zone of cron expressions without `tz`: `agents.defaults.userTimezone`, else UTC.
    pub fn default_tz(&self) -> TimeZone {
        clawless_base::time::time_zone_or_utc(
            self.deps.config.agents.defaults.user_timezone.as_deref(),
        )
    }

    fn now(&self) -> u64 {
        self.deps.clock.now_ms()
    }

    /// Runs one `cron` call for `caller` and answers with OpenClaw's JSON.
    pub async fn call(
        &self, action: CronAction, caller: &CronCaller<'_>,
    ) -> Result<Value, CronServiceError> {
        self.call_with_context(action, caller, &[]).await
    }

    /// [`CronService::call`] with the caller's recent messages (`- User: …` lines, see
    /// `contextMessages`) to append to a new system event's text.
    pub async fn call_with_context(
        &self, action: CronAction, caller: &CronCaller<'_>, context: &[String],
    ) -> Result<Value, CronServiceError> {
        let tz = self.default_tz();
        let now = self.now();
        let ctx = ValidationContext {
            now_ms: now,
            default_agent_id: DEFAULT_AGENT_ID,
            default_tz: &tz,
        };
        match action {
            CronAction::Status => {
                let jobs = self.jobs().await?;
                let status =
                    cron_status(&self.deps.config.cron, &jobs, self.deps.store_label.clone());
                Ok(serde_json::to_value(status).unwrap_or(Value::Null))
            }
            CronAction::List { include_disabled } => {
                let jobs = self.jobs().await?;
                let page = page_jobs(
                    &jobs,
                    &ListQuery {
                        include_disabled,
                        ..ListQuery::default()
                    },
                );
                Ok(serde_json::to_value(page).unwrap_or(Value::Null))
            }
            CronAction::Add { job, .. } => {
                let mut create = prepare_add(&job, caller, &ctx)?;
                if create.takes_reminder_context() {
                    create.add_reminder_context(context);
                }
                let id = new_job_id();
                let job = create.into_job(id, &ctx);
                self.deps.store.put_job(&job, None).await?;
                self.arm(&job).await?;
                tracing::info!(job_id = %job.id, name = %job.name, next_run_at_ms = ?job.state.next_run_at_ms, "cron job added");
                Ok(serde_json::to_value(&job).unwrap_or(Value::Null))
            }
            CronAction::Update { job_id, patch } => {
                self.update_job(&job_id, &patch, caller, &ctx).await
            }
            CronAction::Remove { job_id } => {
                let stored = self.deps.store.get_job(&job_id).await?;
                let removed = self.deps.store.delete_job(&job_id, None).await?;
                if let Some(slot) = stored.as_ref().and_then(|stored| firing_slot(&stored.job)) {
                    // Best effort: a firing of a removed job does nothing anyway.
                    if let Err(err) = self.deps.timers.cancel(&slot.key()).await {
                        tracing::warn!(job_id = %job_id, error = %err, "the removed job's timer was not cancelled; its firing will find no job");
                    }
                }
                Ok(json!({"ok": true, "removed": removed}))
            }
            CronAction::Run { job_id, mode } => self.run_now(&job_id, mode, &ctx).await,
            CronAction::Runs { job_id } => {
                let page = self
                    .deps
                    .store
                    .runs(Some(&job_id), &RunsQuery::default())
                    .await?;
                Ok(serde_json::to_value(page).unwrap_or(Value::Null))
            }
            CronAction::Wake { text, mode } => self.wake(&text, mode, now).await,
        }
    }

    /// `update`: patches a job and re-arms it (the old slot's timer cancelled when it moved).
    async fn update_job(
        &self, job_id: &str, patch: &serde_json::Map<String, Value>, caller: &CronCaller<'_>,
        ctx: &ValidationContext<'_>,
    ) -> Result<Value, CronServiceError> {
        let now = ctx.now_ms;
        let patch = prepare_patch(patch, caller)?;
        let Some(stored) = self.deps.store.get_job(job_id).await? else {
            return Err(unknown_job_error(job_id).into());
        };
        let mut job = stored.job;
        let before = firing_slot(&job).filter(|_| job.enabled);
        apply_patch(&mut job, &patch, ctx)?;
        job.updated_at_ms = now;
        self.deps.store.put_job(&job, Some(stored.version)).await?;
        let armed = self.arm(&job).await?;
        if let Some(before) = before
            && armed
                .as_ref()
                .is_none_or(|timer| timer.timer_id != before.key())
        {
            // Best effort: the old slot's firing would find the job moved on anyway.
            if let Err(err) = self.deps.timers.cancel(&before.key()).await {
                tracing::warn!(job_id = %job.id, error = %err, "the old slot's timer was not cancelled; its firing will do nothing");
            }
        }
        Ok(serde_json::to_value(&job).unwrap_or(Value::Null))
    }

    /// `run`: queues a manual firing of the job, reserved after the latest one.
    async fn run_now(
        &self, job_id: &str, mode: clawless_automation::cron::tool::RunMode,
        ctx: &ValidationContext<'_>,
    ) -> Result<Value, CronServiceError> {
        let now = ctx.now_ms;
        let Some(stored) = self.deps.store.get_job(job_id).await? else {
            return Err(unknown_job_error(job_id).into());
        };
        // Manual runs are reserved in increasing order: after the latest one.
        let manual_ms = now.max(stored.reserved.manual_ms.map_or(0, |last| last + 1));
        let mut job = stored.job;
        if let Err((reason, error)) = preflight_manual_run(&mut job, mode, ctx) {
            if let Some(error) = error {
                tracing::warn!(job_id = %job_id, %error, "manual run refused: invalid job");
            }
            return Ok(
                serde_json::to_value(ManualRunResponse::not_run(reason)).unwrap_or(Value::Null)
            );
        }
        let n = self.manual_runs.fetch_add(1, Ordering::Relaxed);
        let run_id = manual_run_id(job_id, now, n);
        let (session_key, agent_id) = self.run_session(&job);
        let event = SessionEvent {
            session_key: session_key.to_string(),
            agent_id,
            event: TurnEvent::CronFire {
                job_id: job_id.to_owned(),
                slot_ms: None,
                manual_ms: Some(manual_ms),
                only_if_due: mode == clawless_automation::cron::tool::RunMode::Due,
            },
        };
        crate::ingress::enqueue(self.deps.queue.as_ref(), &event)
            .await
            .map_err(CronServiceError::Queue)?;
        Ok(serde_json::to_value(ManualRunResponse::enqueued(run_id)).unwrap_or(Value::Null))
    }

    /// `wake`: a system event for the default agent's heartbeat session, now or at its next beat.
    async fn wake(&self, text: &str, mode: WakeMode, now: u64) -> Result<Value, CronServiceError> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(json!({"ok": false}));
        }
        let agent_id = DEFAULT_AGENT_ID.to_owned();
        let heartbeat = self.heartbeat_config(&agent_id);
        let session = resolve_heartbeat_session(&agent_id, &heartbeat, None);
        let n = self.manual_runs.fetch_add(1, Ordering::Relaxed);
        let event = SessionEvent {
            session_key: session.run_key.to_string(),
            agent_id,
            event: TurnEvent::SystemEvent {
                event_id: format!("wake:{now}:{n}"),
                text: text.to_owned(),
                wake: mode == WakeMode::Now,
            },
        };
        crate::ingress::enqueue(self.deps.queue.as_ref(), &event)
            .await
            .map_err(CronServiceError::Queue)?;
        Ok(json!({"ok": true}))
    }

    /// The agent's heartbeat settings (the defaults when it has none).
    fn heartbeat_config(&self, agent_id: &str) -> HeartbeatConfig {
        self.deps
            .config
            .heartbeat_agent(agent_id)
            .map(|agent| agent.config)
            .unwrap_or_default()
    }

    /// Every job, without versions.
    async fn jobs(&self) -> Result<Vec<CronJob>, CronServiceError> {
        Ok(self
            .deps
            .store
            .list_jobs()
            .await?
            .into_iter()
            .map(|stored| stored.job)
            .collect())
    }

    /// The session a firing of `job` is handled in, and its agent: the heartbeat session of
    /// the job's session (main jobs, spec §2.7), `agent:<id>:cron:<jobId>` (isolated jobs,
    /// and `current` without a session), or the `session:` target.
    pub fn run_session(&self, job: &CronJob) -> (SessionKey, String) {
        let agent_id = normalize_agent_id(job.agent_id.as_deref().unwrap_or(DEFAULT_AGENT_ID));
        let key = match &job.session_target {
            SessionTarget::Main => {
                let heartbeat = self.heartbeat_config(&agent_id);
                resolve_heartbeat_session(&agent_id, &heartbeat, job.session_key.as_deref()).run_key
            }
            _ => clawless_automation::cron::run::run_session(job, &agent_id, "")
                .and_then(|session| SessionKey::parse(&session.session_key))
                .unwrap_or_else(|| SessionKey::main(&agent_id)),
        };
        (key, agent_id)
    }

    /// The timer of `job`'s firing of `slot_ms`.
    pub fn timer(&self, job: &CronJob, slot_ms: u64) -> Timer {
        let (session_key, agent_id) = self.run_session(job);
        Timer {
            timer_id: format!("cron:{}:{slot_ms}", job.id),
            due_at_ms: slot_ms,
            event: SessionEvent {
                session_key: session_key.to_string(),
                agent_id,
                event: TurnEvent::CronFire {
                    job_id: job.id.clone(),
                    slot_ms: Some(slot_ms),
                    manual_ms: None,
                    only_if_due: false,
                },
            },
        }
    }

    /// Schedules the firing of `job`'s next run, if it is enabled and has one. Scheduling a
    /// pending timer id again does nothing, so this is safe to repeat.
    pub async fn arm(&self, job: &CronJob) -> Result<Option<Timer>, CronServiceError> {
        let Some(slot) = job.state.next_run_at_ms.filter(|_| job.enabled) else {
            return Ok(None);
        };
        if !self.deps.config.cron.enabled() {
            tracing::info!(job_id = %job.id, "cron is disabled (cron.enabled: false); the job is not armed");
            return Ok(None);
        }
        let timer = self.timer(job, slot);
        self.deps
            .timers
            .schedule(&timer)
            .await
            .map_err(CronServiceError::Timer)?;
        Ok(Some(timer))
    }

    /// Start-up (spec §2.11), for a process that was stopped (`clawless local`): missed
    /// jobs fire now (several missed slots of one job once; beyond five, 5 s apart), and
    /// every job's next firing is armed.
    ///
    /// Unlike OpenClaw, a run the last process left running is not cut off: its turn is in
    /// the session and resumes from there, and records itself on the job when it ends. So
    /// jobs running for less than the stuck limit (2 h) are left alone, and only older
    /// markers go through OpenClaw's rule (cleared; a one-shot is not run again). On AWS
    /// nothing stops, so nothing calls this.
    pub async fn start_up(&self) -> Result<StartupReport, CronServiceError> {
        let now = self.now();
        let stored: Vec<_> = self
            .deps
            .store
            .list_jobs()
            .await?
            .into_iter()
            .filter(|stored| {
                stored
                    .job
                    .state
                    .running_at_ms
                    .is_none_or(|started| now.saturating_sub(started) >= STUCK_RUN_MS)
            })
            .collect();
        let mut jobs: Vec<CronJob> = stored.iter().map(|stored| stored.job.clone()).collect();
        let plan = plan_startup(&mut jobs, now, &self.default_tz());
        let mut report = StartupReport {
            interrupted: plan.interrupted_one_shots.clone(),
            ..StartupReport::default()
        };
        for (before, job) in stored.iter().zip(&jobs) {
            if before.job != *job {
                match self.deps.store.put_job(job, Some(before.version)).await {
                    Ok(_) => {}
                    // A job changed meanwhile (another process): it keeps its own state.
                    Err(CronStoreError::Conflict { .. } | CronStoreError::NotFound { .. }) => {
                        continue;
                    }
                    Err(err) => return Err(err.into()),
                }
            }
            if plan.interrupted_one_shots.contains(&job.id) {
                tracing::warn!(job_id = %job.id, "{INTERRUPTED_ONE_SHOT_ERROR}");
                continue;
            }
            if self.arm(job).await?.is_some() {
                report.armed += 1;
            }
        }
        report.caught_up = plan
            .run_now
            .iter()
            .map(|slot| slot.job_id.clone())
            .collect();
        Ok(report)
    }
}

/// A new job id: a random UUID v4.
fn new_job_id() -> String {
    clawless_base::ids::new_uuid().unwrap_or_else(|_| {
        // No randomness from the system: the clock and a counter still give a unique id.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos())
            ^ u128::from(COUNTER.fetch_add(1, Ordering::Relaxed));
        clawless_base::ids::uuid_from_bytes(seed.to_be_bytes())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_uuid_v4() {
        let id = new_job_id();
        assert_eq!(id.len(), 36);
        assert_eq!(&id[14..15], "4");
        assert!(matches!(&id[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(id, new_job_id());
    }
}
