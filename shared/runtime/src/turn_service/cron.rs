//! Cron in the turn service (spec `openclaw-automation.md` §2.7–§2.9): the `cron` tool, a
//! job's firing in the FIFO group of the session it runs in, and recording the run on the
//! job once the turn it started has ended.
//!
//! - **Exactly once.** A firing ([`TurnEvent::CronFire`]) reads the job and reserves its
//!   `(job, slot)` in the cron store ([`CronStore::reserve_run`]) before anything runs. A
//!   redelivered or duplicate firing, or one for a slot the job has moved past, finds the
//!   slot taken or stale and does nothing.
//! - **Main jobs** queue their text as a pending system event (context `cron:<jobId>`) in the
//!   heartbeat session and, with `wakeMode: now`, run a heartbeat at once with reason
//!   `cron:<jobId>` and the target forced to the last chat: the cron reminder prompt.
//! - **Isolated jobs** run `[cron:<id> <name>] <message>` as a fresh generation of
//!   `agent:<id>:cron:<jobId>` (`session:` targets in their session as it is). Their final
//!   answer is announced to the delivery target unless it is an acknowledgement or
//!   `NO_REPLY`; a webhook job's result is posted to its URL.
//! - **Recording.** The session's meta keeps a [`CronRunMark`] from the firing until the
//!   run's turn ends (an exec may keep it open across invocations). Then the outcome is
//!   read from the transcript and applied to the job (retries, backoff, one-shot removal),
//!   a run-log line is written, the next firing is armed, and the mark is cleared. A crash
//!   in between is repaired by the next event of the session: the job still shows the run
//!   as running at the mark's start, or it does not and only the mark is cleared.
//! - **Time limits.** Reserving a run arms its timer ([`job_timeout_ms`]); when it comes, a
//!   run still going is stopped at its next step and fails as timed out, and a run the
//!   session never recorded is failed on the job, so no job stays marked running.
//! - **Failures** send OpenClaw's failure notice for each failed run and, at the threshold,
//!   its failure alert (the core decides which; this module sends them once the job has
//!   recorded the run).
//! - **Headless exec.** Nobody can approve an exec in a cron run: a call that needs approval
//!   gets [`HEADLESS_EXEC_DENIED`] as its result.

use std::sync::Arc;

use clawless_automation::cron::delivery::{DeliveryPlan, LAST_CHANNEL, delivery_plan};
use clawless_automation::cron::outcome::{RunOutcome, apply_run_outcome};
use clawless_automation::cron::run::{
    CRON_SENDER_ID, CronRunMark, HEADLESS_EXEC_DENIED, MainJobStart, MainJobStep, TIMEOUT_ERROR,
    headless_exec_denied_message, isolated_run_message, job_timeout_ms, main_job_step,
    run_message_id, start_main_job,
};
use clawless_automation::cron::types::{
    CronJob, CronPayload, CronRunLogEntry, DeliveryMode, RunStatus, RunUsage, SessionTarget,
};
use clawless_automation::cron::{Reservation, RunSlot};
use clawless_automation::heartbeat::config::DEFAULT_HEARTBEAT_ACK_MAX_CHARS;
use clawless_automation::heartbeat::{AlertTarget, HeartbeatDelivery, PendingSystemEvent};
use clawless_base::session_key::ChatType;
use clawless_base::transcript::AssistantBlock;
use clawless_core::tools::ToolOutput;
use clawless_core::turn::Incoming;
use clawless_core::turn::events::{ChatRef, InboundMessage, dedup_token};
use clawless_core::turn::state::{
    PreparedMessage, ResetReason, ResetRequest, SessionState, StepBody,
};

use super::heartbeat::FiringEvent;
use super::{TurnError, TurnService};

/// One firing as queued.
#[derive(Debug, Clone, Copy)]
pub(super) struct CronFiring<'a> {
    pub job_id: &'a str,
    pub slot_ms: Option<u64>,
    pub manual_ms: Option<u64>,
    pub only_if_due: bool,
}

/// What a firing comes to.
#[derive(Debug, Default)]
pub(super) struct CronStart {
    /// The run's turn.
    pub incoming: Option<Incoming>,
    /// The session's meta changed (a mark, a pending event, a heartbeat record).
    pub changed: bool,
    /// A timer to schedule once the session is committed (a busy reminder's wake).
    pub arm: Option<clawless_core::timers::Timer>,
}

/// How a finished run's turn ended, read from the transcript.
#[derive(Debug, Default)]
struct TurnResult {
    status: Option<RunStatus>,
    error: Option<String>,
    summary: Option<String>,
    delivered: Option<bool>,
    model: Option<String>,
    usage: Option<RunUsage>,
}

impl TurnService {
    /// Handles a job's firing in `state`'s session: see the module documentation.
    pub(super) async fn start_cron_run(
        &self, agent_id: &str, state: &mut SessionState, firing: CronFiring<'_>,
    ) -> Result<CronStart, TurnError> {
        let Some(cron) = &self.cron else {
            tracing::info!(job_id = %firing.job_id, "cron firing without a cron store; dropped");
            return Ok(CronStart::default());
        };
        let store = cron.store();
        let Some(stored) = store
            .get_job(firing.job_id)
            .await
            .map_err(TurnError::Cron)?
        else {
            tracing::info!(job_id = %firing.job_id, "cron firing for a removed job; dropped");
            return Ok(CronStart::default());
        };
        let now = self.deps.clock.now_ms();
        let job = &stored.job;
        let slot = match (firing.slot_ms, firing.manual_ms) {
            (_, Some(manual)) => RunSlot::Manual(manual),
            (Some(slot), None) => {
                if !job.enabled || job.state.next_run_at_ms != Some(slot) {
                    tracing::info!(job_id = %job.id, slot_ms = slot, next_run_at_ms = ?job.state.next_run_at_ms, "cron firing for a slot the job no longer has; dropped");
                    return Ok(CronStart::default());
                }
                if !self.config().cron.enabled() {
                    tracing::info!(job_id = %job.id, "cron is disabled; the firing is dropped");
                    return Ok(CronStart::default());
                }
                RunSlot::Scheduled(slot)
            }
            (None, None) => return Ok(CronStart::default()),
        };
        if firing.only_if_due && !clawless_automation::cron::schedule::is_due(job, now) {
            tracing::info!(job_id = %job.id, "manual run in due mode: the job is not due");
            return Ok(CronStart::default());
        }
        if let Some(mark) = &state.meta.cron_run {
            if mark.job_id == job.id
                && mark.slot_ms == firing.slot_ms
                && mark.manual_ms == firing.manual_ms
            {
                // This firing's own run, redelivered after a failure: its turn goes on.
                tracing::info!(job_id = %job.id, "cron firing redelivered; resuming its run");
                return Ok(CronStart {
                    incoming: None,
                    changed: true,
                    arm: None,
                });
            }
            // One run per session at a time: the session's lane is busy with another run.
            tracing::warn!(job_id = %job.id, running = %mark.job_id, "a cron run is still in progress in this session; this firing is skipped");
            return Ok(CronStart::default());
        }
        let slot_value = match slot {
            RunSlot::Scheduled(ms) | RunSlot::Manual(ms) => ms,
        };
        let (job, started_at_ms) = match store
            .reserve_run(&job.id, slot, now, stored.version)
            .await
            .map_err(TurnError::Cron)?
        {
            Reservation::Reserved(reserved) => (reserved.job, now),
            // Reserved by an earlier delivery of this firing that failed before the session
            // recorded the run (the session's lane handles one event at a time, and a run
            // that was recorded clears the job's running marker): start it again.
            Reservation::AlreadyTaken { last_slot_ms }
                if last_slot_ms == slot_value && job.state.running_at_ms.is_some() =>
            {
                tracing::info!(job_id = %job.id, %slot, "cron run reserved but not started; starting it");
                let started = job.state.running_at_ms.unwrap_or(now);
                (job.clone(), started)
            }
            Reservation::AlreadyTaken { last_slot_ms } => {
                tracing::info!(job_id = %job.id, %slot, last_slot_ms, "cron slot already run; duplicate firing ignored");
                return Ok(CronStart::default());
            }
        };
        let message_id = run_message_id(&job.id, firing.slot_ms, firing.manual_ms);
        let mark = CronRunMark {
            job_id: job.id.clone(),
            slot_ms: firing.slot_ms,
            manual_ms: firing.manual_ms,
            started_at_ms,
            message_id: message_id.clone(),
            tools_allow: None,
            light_context: false,
        };
        tracing::info!(job_id = %job.id, %slot, session = %state.key, "cron run starts");
        // The run's time limit is armed as soon as the job has it reserved: even a firing
        // lost before the session recorded the run (dead-lettered) ends, and the job moves on.
        if let Some(limit) = job_timeout_ms(&job) {
            let timer = clawless_core::timers::Timer {
                timer_id: format!("cron-timeout:{}:{}", mark.job_id, mark.started_at_ms),
                due_at_ms: mark.started_at_ms.saturating_add(limit),
                event: clawless_core::turn::events::SessionEvent {
                    session_key: state.key.to_string(),
                    agent_id: agent_id.to_owned(),
                    event: clawless_core::turn::events::TurnEvent::CronTimeout(Box::new(
                        mark.clone(),
                    )),
                },
            };
            if let Err(err) = self.schedule_timer(&timer).await {
                tracing::warn!(job_id = %job.id, error = %err, "cron run has no time limit: its timer was not armed");
            }
        }
        match job.session_target {
            SessionTarget::Main => self.start_main_run(agent_id, state, &job, mark).await,
            _ => self.start_isolated_run(state, &job, mark).await,
        }
    }

    /// A cron run's time limit came (see [`TurnEvent::CronTimeout`]): a run still going in
    /// `state` has its turn closed with no further step and fails with
    /// [`TIMEOUT_ERROR`]; one the session never recorded (its firing was lost after the job
    /// reserved it) is failed on the job, which gets its next firing. True when the meta
    /// changed.
    ///
    /// [`TurnEvent::CronTimeout`]: clawless_core::turn::events::TurnEvent::CronTimeout
    pub(super) async fn time_out_cron_run(
        &self, engine: &clawless_core::turn::TurnEngine, state: &mut SessionState,
        mark: &CronRunMark,
    ) -> Result<bool, TurnError> {
        let same_run = state.meta.cron_run.as_ref().is_some_and(|current| {
            current.job_id == mark.job_id && current.started_at_ms == mark.started_at_ms
        });
        if !same_run {
            // Recorded already, or never started here: the job says which.
            let result = TurnResult {
                status: Some(RunStatus::Error),
                error: Some(TIMEOUT_ERROR.to_owned()),
                ..TurnResult::default()
            };
            self.record_run(mark, result, state).await?;
            return Ok(false);
        }
        let message_id = state
            .meta
            .cron_run
            .as_ref()
            .map(|current| current.message_id.clone())
            .unwrap_or_default();
        let in_turn = current_cron_run(state).is_some() && state.meta.turn_open;
        let queued = state
            .meta
            .follow_ups
            .iter()
            .position(|message| message.message.message_id == message_id);
        if in_turn {
            tracing::warn!(job_id = %mark.job_id, session = %state.key, "cron run timed out; its turn stops here");
            engine.abandon_turn(state, TIMEOUT_ERROR, self.deps.clock.now_ms());
        } else if let Some(index) = queued {
            tracing::warn!(job_id = %mark.job_id, session = %state.key, "cron run timed out before its turn began");
            state.meta.follow_ups.remove(index);
            state.touch_meta();
        }
        if in_turn || queued.is_some() {
            let result = TurnResult {
                status: Some(RunStatus::Error),
                error: Some(TIMEOUT_ERROR.to_owned()),
                ..TurnResult::default()
            };
            self.record_run(mark, result, state).await?;
            state.meta.cron_run = None;
            state.touch_meta();
            return Ok(true);
        }
        // Its turn has ended: the next step of the session records it as it ended.
        self.finish_cron_run(state).await
    }

    /// A main job: its text becomes a pending system event; `now` runs the heartbeat.
    async fn start_main_run(
        &self, agent_id: &str, state: &mut SessionState, job: &CronJob, mark: CronRunMark,
    ) -> Result<CronStart, TurnError> {
        let now = mark.started_at_ms;
        let (text, wake_reason) = match start_main_job(job) {
            MainJobStart::Skip { error } => {
                let result = TurnResult {
                    status: Some(RunStatus::Skipped),
                    error: Some(error),
                    ..TurnResult::default()
                };
                self.record_run(&mark, result, state).await?;
                return Ok(CronStart::default());
            }
            MainJobStart::NextHeartbeat { text, .. } => (text, None),
            MainJobStart::WakeNow { text, reason } => (text, Some(reason)),
        };
        state.meta.pending_events.push(PendingSystemEvent {
            text: text.clone(),
            context_key: Some(format!("cron:{}", job.id)),
            exec_completion: false,
            at_ms: now,
        });
        state.touch_meta();
        let Some(reason) = wake_reason else {
            // Waits for the next heartbeat, which the pending event lets past an empty
            // HEARTBEAT.md.
            let result = TurnResult {
                status: Some(RunStatus::Ok),
                summary: Some(text),
                ..TurnResult::default()
            };
            self.record_run(&mark, result, state).await?;
            return Ok(CronStart {
                changed: true,
                ..CronStart::default()
            });
        };
        let heartbeat_id = mark.message_id.clone();
        let start = self
            .start_heartbeat(
                agent_id,
                state,
                FiringEvent {
                    heartbeat_id: &heartbeat_id,
                    slot_ms: None,
                    reason: &reason,
                    attempt: 0,
                },
            )
            .await?;
        if let Some(incoming) = start.incoming {
            let mut mark = mark;
            mark.message_id = format!("heartbeat:{heartbeat_id}");
            state.meta.cron_run = Some(mark);
            state.touch_meta();
            return Ok(CronStart {
                incoming: Some(incoming),
                changed: true,
                arm: None,
            });
        }
        let arm = start.arm;
        let skipped = start
            .skipped
            .map_or_else(|| "disabled".to_owned(), |skip| skip.as_str().to_owned());
        let answer = clawless_automation::cron::run::HeartbeatAnswer::Skipped(skipped);
        let result = match main_job_step(job, &text, &answer, u64::MAX / 2) {
            MainJobStep::Finish {
                status,
                error,
                summary,
            } => TurnResult {
                status: Some(status),
                error,
                summary,
                ..TurnResult::default()
            },
            // Busy: the event stays pending, and the wake armed above retries it.
            MainJobStep::RetryAfter { .. } | MainJobStep::RequestWakeAndFinish => TurnResult {
                status: Some(RunStatus::Ok),
                summary: Some(text),
                ..TurnResult::default()
            },
        };
        self.record_run(&mark, result, state).await?;
        Ok(CronStart {
            changed: true,
            arm,
            ..CronStart::default()
        })
    }

    /// An isolated (or `session:`) job: an agent turn whose answer is announced.
    async fn start_isolated_run(
        &self, state: &mut SessionState, job: &CronJob, mut mark: CronRunMark,
    ) -> Result<CronStart, TurnError> {
        let now = mark.started_at_ms;
        let CronPayload::AgentTurn(turn) = &job.payload else {
            let result = TurnResult {
                status: Some(RunStatus::Skipped),
                error: Some(
                    clawless_automation::cron::validate::ISOLATED_REQUIRES_AGENT_TURN.to_owned(),
                ),
                ..TurnResult::default()
            };
            self.record_run(&mark, result, state).await?;
            return Ok(CronStart::default());
        };
        mark.tools_allow.clone_from(&turn.tools_allow);
        mark.light_context = turn.light_context.unwrap_or(false);
        let plan = delivery_plan(job);
        let target = match plan.mode {
            DeliveryMode::Announce => self.announce_target(job, &plan).await?,
            DeliveryMode::None | DeliveryMode::Webhook => AlertTarget::TargetNone,
        };
        // A run that starts more than 3 hours after its slot delivers nothing (stale).
        let stale = mark.slot_ms.is_some_and(|slot| {
            now.saturating_sub(slot) > clawless_automation::cron::delivery::STALE_DELIVERY_MS
        });
        let target = if stale {
            AlertTarget::TargetNone
        } else {
            target
        };
        let chat = target.chat().cloned().unwrap_or_else(|| ChatRef {
            channel: CRON_SENDER_ID.to_owned(),
            chat_id: job.id.clone(),
            chat_type: ChatType::Direct,
        });
        let tz = self.time_zone();
        let text = isolated_run_message(
            job,
            &turn.message,
            &clawless_base::time::current_time_line(now, &tz),
            plan.requested(),
        );
        let message = InboundMessage {
            message_id: mark.message_id.clone(),
            chat,
            sender_id: CRON_SENDER_ID.to_owned(),
            text,
            sender_is_owner: true,
            attachments: Vec::new(),
        };
        let mut prepared = PreparedMessage::plain(message);
        prepared.heartbeat_delivery = Some(HeartbeatDelivery {
            slot_ms: None,
            ack_max_chars: DEFAULT_HEARTBEAT_ACK_MAX_CHARS,
            show_ok: false,
            show_alerts: true,
            target,
            cron_run: true,
            include_reasoning: false,
        });
        // The job's `thinking` holds for its run only (validated when the job was saved).
        prepared.turn_thinking = turn
            .thinking
            .as_deref()
            .and_then(clawless_base::thinking::ThinkingLevel::parse);
        let fresh = matches!(
            job.session_target,
            SessionTarget::Isolated | SessionTarget::Current
        );
        let model = turn.model.clone().filter(|model| !model.trim().is_empty());
        if fresh && state.meta.turn > 0 {
            prepared.reset = Some(ResetRequest {
                reason: ResetReason::Cron,
                model,
            });
        } else if fresh {
            state.meta.model_override = model;
        }
        state.meta.cron_run = Some(mark);
        state.touch_meta();
        Ok(CronStart {
            incoming: Some(Incoming::Message(Box::new(prepared))),
            changed: true,
            arm: None,
        })
    }

    /// The chat an announce goes to: the job's channel and `to`; `last` (or no `to`) is the
    /// last chat of the session that created the job, else of the agent's main session.
    async fn announce_target(
        &self, job: &CronJob, plan: &DeliveryPlan,
    ) -> Result<AlertTarget, TurnError> {
        let agent_id = job
            .agent_id
            .clone()
            .unwrap_or_else(|| crate::config::DEFAULT_AGENT_ID.to_owned());
        let mut last_chat = None;
        let origins = [
            job.session_key
                .as_deref()
                .and_then(clawless_core::session::SessionKey::parse),
            Some(clawless_core::session::SessionKey::main(&agent_id)),
        ];
        for key in origins.into_iter().flatten() {
            if let Some(stored) = self.deps.sessions.load_live(&key).await? {
                let origin = SessionState::from_stored(key, &stored)?;
                if let Some(chat) = origin
                    .meta
                    .chat
                    .filter(|chat| chat.channel != CRON_SENDER_ID)
                {
                    last_chat = Some(chat);
                    break;
                }
            }
        }
        let channel = plan
            .channel
            .clone()
            .filter(|channel| !channel.trim().is_empty() && channel != LAST_CHANNEL);
        let to = plan.to.clone().filter(|to| !to.trim().is_empty());
        let chat = match (channel, to) {
            (channel, Some(to)) => {
                let channel = channel
                    .or_else(|| last_chat.as_ref().map(|chat| chat.channel.clone()))
                    .unwrap_or_else(|| "generic".to_owned());
                match &last_chat {
                    Some(last) if last.channel == channel && last.chat_id == to => {
                        Some(last.clone())
                    }
                    _ => Some(ChatRef {
                        channel,
                        chat_id: to,
                        chat_type: ChatType::Direct,
                    }),
                }
            }
            (Some(channel), None) => last_chat.filter(|chat| chat.channel == channel),
            (None, None) => last_chat,
        };
        Ok(match chat {
            Some(chat) => AlertTarget::Chat { chat },
            None => AlertTarget::NoTarget,
        })
    }

    /// Queues a system event in `state`'s session (once per `event_id`); with `wake`, runs
    /// a heartbeat with reason `wake` at once and returns its poll.
    pub(super) async fn queue_system_event(
        &self, agent_id: &str, state: &mut SessionState, event_id: &str, text: &str, wake: bool,
    ) -> Result<Option<Incoming>, TurnError> {
        let message_id = format!("system:{event_id}");
        if state.has_seen_message(&message_id) {
            tracing::info!(session = %state.key, event_id, "system event already queued");
            return Ok(None);
        }
        state.remember_message_id(&message_id);
        // A background command's end (spec §4.5) wakes with reason `exec-event`.
        let exec_completion = event_id.starts_with(crate::nodes_service::EXEC_EXIT_EVENT_PREFIX);
        state.meta.pending_events.push(PendingSystemEvent {
            text: text.to_owned(),
            context_key: None,
            exec_completion,
            at_ms: self.deps.clock.now_ms(),
        });
        state.touch_meta();
        if !wake {
            return Ok(None);
        }
        let start = self
            .start_heartbeat(
                agent_id,
                state,
                FiringEvent {
                    heartbeat_id: event_id,
                    slot_ms: None,
                    reason: if exec_completion {
                        "exec-event"
                    } else {
                        "wake"
                    },
                    attempt: 0,
                },
            )
            .await?;
        Ok(start.incoming)
    }

    /// An exec that needs approval in a cron run is refused: nobody is there to answer.
    /// `Some` with the call's result when `state`'s current turn is a cron run.
    pub(super) fn headless_approval(
        &self, state: &SessionState, call_id: &str,
    ) -> Option<Incoming> {
        let mark = current_cron_run(state)?;
        tracing::warn!(job_id = %mark.job_id, call_id, "{HEADLESS_EXEC_DENIED}");
        let command = state
            .steps
            .iter()
            .rev()
            .find_map(|step| match &step.body {
                StepBody::Assistant { content, .. } => {
                    content.iter().find_map(|block| match block {
                        AssistantBlock::ToolCall(call) if call.id == call_id => Some(
                            call.input
                                .get("command")
                                .and_then(serde_json::Value::as_str)
                                .unwrap_or("exec")
                                .to_owned(),
                        ),
                        _ => None,
                    })
                }
                _ => None,
            })
            .unwrap_or_else(|| "exec".to_owned());
        Some(Incoming::ToolResult {
            call_id: call_id.to_owned(),
            output: ToolOutput::error(headless_exec_denied_message(&command)),
            notice: None,
        })
    }

    /// When the cron run marked in `state` has finished its turn, records it on the job and
    /// clears the mark. True when the meta changed.
    pub(super) async fn finish_cron_run(
        &self, state: &mut SessionState,
    ) -> Result<bool, TurnError> {
        let Some(mark) = state.meta.cron_run.clone() else {
            return Ok(false);
        };
        let pending = state
            .meta
            .follow_ups
            .iter()
            .any(|message| message.message.message_id == mark.message_id);
        let turn = state.steps.iter().find_map(|step| match &step.body {
            StepBody::Inbound { message_id, .. } if *message_id == mark.message_id => {
                Some(step.turn)
            }
            _ => None,
        });
        let running = match turn {
            Some(turn) => state.meta.turn_open && state.meta.turn == turn,
            None => pending,
        };
        if running {
            return Ok(false);
        }
        let result = match turn {
            Some(turn) => turn_result(state, turn),
            None => TurnResult {
                status: Some(RunStatus::Error),
                error: Some("the run's turn was not recorded".to_owned()),
                ..TurnResult::default()
            },
        };
        self.record_run(&mark, result, state).await?;
        state.meta.cron_run = None;
        state.touch_meta();
        Ok(true)
    }

    /// Records a finished run on its job (retries, backoff, removal), writes its run-log
    /// line, arms the next firing and posts a webhook delivery.
    async fn record_run(
        &self, mark: &CronRunMark, result: TurnResult, state: &SessionState,
    ) -> Result<(), TurnError> {
        let Some(cron) = &self.cron else {
            return Ok(());
        };
        let store = cron.store();
        let now = self.deps.clock.now_ms();
        let tz = self.time_zone();
        let config = &self.config().cron;
        for _ in 0..3 {
            let Some(stored) = store.get_job(&mark.job_id).await.map_err(TurnError::Cron)? else {
                tracing::info!(job_id = %mark.job_id, "cron job removed during its run; nothing to record");
                return Ok(());
            };
            if stored.job.state.running_at_ms != Some(mark.started_at_ms) {
                tracing::info!(job_id = %mark.job_id, "cron run already recorded");
                return Ok(());
            }
            let mut job = stored.job.clone();
            let outcome = RunOutcome {
                status: result.status,
                error: result.error.clone(),
                error_reason: None,
                delivered: result.delivered,
                delivery_error: None,
                started_at_ms: mark.started_at_ms,
                ended_at_ms: now,
                keep_series: mark.manual_ms.is_some(),
            };
            let applied = apply_run_outcome(&mut job, &outcome, config, &tz);
            let written = if applied.remove_job {
                store
                    .delete_job(&job.id, Some(stored.version))
                    .await
                    .map(|_| ())
            } else {
                store.put_job(&job, Some(stored.version)).await.map(|_| ())
            };
            match written {
                Ok(()) => {}
                Err(clawless_automation::cron::CronStoreError::Conflict { .. }) => continue,
                Err(err) => return Err(TurnError::Cron(err)),
            }
            let entry = CronRunLogEntry {
                ts: now,
                job_id: job.id.clone(),
                action: clawless_automation::cron::types::RUN_LOG_ACTION_FINISHED.to_owned(),
                status: Some(result.status.unwrap_or(RunStatus::Ok)),
                error: result.error.clone(),
                summary: result.summary.clone(),
                delivered: result.delivered,
                delivery_status: job.state.last_delivery_status,
                delivery_error: None,
                session_id: Some(state.meta.session_id.clone()),
                session_key: Some(state.key.to_string()),
                run_at_ms: Some(mark.started_at_ms),
                duration_ms: Some(now.saturating_sub(mark.started_at_ms)),
                next_run_at_ms: job.state.next_run_at_ms,
                model: result.model.clone(),
                provider: None,
                usage: result.usage.clone(),
                job_name: None,
            };
            let keep = usize::try_from(
                config
                    .run_log
                    .keep_lines
                    .unwrap_or(clawless_automation::cron::config::DEFAULT_RUN_LOG_KEEP_LINES),
            )
            .unwrap_or(usize::MAX)
            .max(1);
            if let Err(err) = store.append_run(&entry, keep).await {
                tracing::warn!(job_id = %job.id, error = %err, "cron run-log line not written");
            }
            tracing::info!(job_id = %job.id, status = ?entry.status, removed = applied.remove_job, next_run_at_ms = ?job.state.next_run_at_ms, "cron run recorded");
            if !applied.remove_job {
                cron.arm(&job).await.map_err(|err| match err {
                    crate::cron_service::CronServiceError::Timer(err) => TurnError::Timer(err),
                    other => TurnError::BadEvent(other.to_string()),
                })?;
            }
            if let Some(summary) = result.summary.as_deref().filter(|s| !s.trim().is_empty())
                && let Some(delivery) = &job.delivery
                && delivery.mode == DeliveryMode::Webhook
                && let Some(url) = &delivery.to
            {
                self.post_webhook(url, &entry, summary).await;
            }
            self.send_failure_messages(&job, &applied, &entry).await;
            return Ok(());
        }
        Err(TurnError::Cron(
            clawless_automation::cron::CronStoreError::Conflict {
                job_id: mark.job_id.clone(),
                expected: None,
            },
        ))
    }

    /// Sends what a failed run calls for (spec §2.8), after the job recorded it: the failure
    /// notice (`⚠️ Cron job "<name>" failed: <error>`, to the failure destination or the
    /// job's announce target, or POSTed to a webhook) and, at the threshold and outside the
    /// cooldown, the failure alert. Each chat message has an id of its run, so a redone
    /// recording sends it once; a send that fails is logged (the run stays recorded).
    async fn send_failure_messages(
        &self, job: &CronJob, applied: &clawless_automation::cron::outcome::AppliedRun,
        entry: &CronRunLogEntry,
    ) {
        use clawless_automation::cron::delivery::{FailureWebhookBody, NoticeTarget};
        use clawless_automation::cron::types::AlertMode;
        let run = entry.run_at_ms.unwrap_or(entry.ts);
        if let Some(notice) = &applied.failure_notice {
            match &notice.target {
                NoticeTarget::Announce { channel, to, .. } => {
                    let text = notice.announce_text();
                    let id = format!("cron-failure-{}-{run}", job.id);
                    self.send_to_job_chat(job, channel, to.as_deref(), &id, &text)
                        .await;
                }
                NoticeTarget::Webhook { url } => {
                    let body = FailureWebhookBody {
                        job_id: job.id.clone(),
                        job_name: job.name.clone(),
                        message: notice.message.clone(),
                        status: RunStatus::Error,
                        error: entry.error.clone().unwrap_or_default(),
                        run_at_ms: run,
                        duration_ms: entry.duration_ms.unwrap_or(0),
                        next_run_at_ms: job.state.next_run_at_ms,
                    };
                    let body = serde_json::to_value(&body).unwrap_or_default();
                    self.post_json_logged(url, &body, &job.id, "cron failure notice")
                        .await;
                }
            }
        }
        if let Some(alert) = &applied.failure_alert {
            match alert.mode {
                AlertMode::Announce => {
                    let id = format!("cron-alert-{}-{run}", job.id);
                    self.send_to_job_chat(
                        job,
                        &alert.channel,
                        alert.to.as_deref(),
                        &id,
                        &alert.text,
                    )
                    .await;
                }
                AlertMode::Webhook => {
                    if let Some(url) = alert.to.as_deref() {
                        let body = serde_json::json!({
                            "jobId": job.id,
                            "jobName": job.name,
                            "message": alert.text,
                            "consecutiveErrors": job.state.consecutive_errors,
                        });
                        self.post_json_logged(url, &body, &job.id, "cron failure alert")
                            .await;
                    }
                }
            }
        }
    }

    /// Sends `text` to the chat `channel`/`to` names for `job` (`last`: the chat the job was
    /// made in, else the agent's main chat); nothing when no chat is known.
    async fn send_to_job_chat(
        &self, job: &CronJob, channel: &str, to: Option<&str>, reply_id: &str, text: &str,
    ) {
        let plan = DeliveryPlan {
            mode: DeliveryMode::Announce,
            channel: Some(channel.to_owned()),
            to: to.map(str::to_owned),
            account_id: None,
            best_effort: false,
        };
        let chat = match self.announce_target(job, &plan).await {
            Ok(AlertTarget::Chat { chat }) => chat,
            Ok(_) => {
                tracing::warn!(job_id = %job.id, "cron failure message has no chat to go to");
                return;
            }
            Err(err) => {
                tracing::warn!(job_id = %job.id, error = %err, "cron failure message not sent");
                return;
            }
        };
        let reply = clawless_core::turn::OutboundReply {
            reply_id: dedup_token(reply_id),
            chat,
            text: text.to_owned(),
            approval_code: None,
            in_reply_to: None,
            media: Vec::new(),
        };
        match self.deliver(&reply).await {
            Ok(None) => tracing::info!(job_id = %job.id, "cron failure message sent"),
            Ok(Some(reason)) => {
                tracing::warn!(job_id = %job.id, %reason, "cron failure message refused");
            }
            Err(err) => {
                tracing::warn!(job_id = %job.id, error = %err, "cron failure message not sent")
            }
        }
    }

    /// POSTs `body` to `url` under the webhook address policy, logging the outcome.
    async fn post_json_logged(
        &self, url: &str, body: &serde_json::Value, job_id: &str, what: &str,
    ) {
        let Some(poster) = self.webhook_poster() else {
            return;
        };
        let env = |name: &str| self.secrets.lookup(name);
        let token = self.config().cron.webhook_token(&env);
        match poster
            .post_json(url, body, token.as_deref(), WEBHOOK_TIMEOUT)
            .await
        {
            Ok(status) if (200..300).contains(&status) => {
                tracing::info!(job_id, status, "{what} delivered");
            }
            Ok(status) => tracing::warn!(job_id, status, "{what} refused"),
            Err(err) => tracing::warn!(job_id, error = %err, "{what} failed"),
        }
    }

    /// The webhook poster, built at its first use.
    fn webhook_poster(&self) -> Option<&Arc<crate::web_fetcher::HttpWebFetcher>> {
        self.webhooks
            .get_or_init(|| {
                crate::web_fetcher::HttpWebFetcher::new()
                    .map_err(|err| tracing::warn!(error = %err, "cron webhook deliveries are off"))
                    .ok()
                    .map(Arc::new)
            })
            .as_ref()
    }

    /// Posts a webhook job's finished run (spec §2.8): 10 s timeout, bearer token when set,
    /// no internal addresses. A failure is logged; the run stays recorded.
    async fn post_webhook(&self, url: &str, entry: &CronRunLogEntry, summary: &str) {
        let mut body = serde_json::to_value(entry).unwrap_or_default();
        body["summary"] = summary.into();
        self.post_json_logged(url, &body, &entry.job_id, "cron webhook")
            .await;
    }
}

/// How long a webhook delivery may take.
const WEBHOOK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The cron run whose turn is `state`'s current turn, if any.
pub(super) fn current_cron_run(state: &SessionState) -> Option<&CronRunMark> {
    let mark = state.meta.cron_run.as_ref()?;
    match &state.current_turn_steps().first()?.body {
        StepBody::Inbound { message_id, .. } if *message_id == mark.message_id => Some(mark),
        _ => None,
    }
}

/// The outcome of the run whose turn is `turn`: an error when the model failed, the final
/// answer as summary, delivered when an announce was sent.
fn turn_result(state: &SessionState, turn: u64) -> TurnResult {
    let mut result = TurnResult::default();
    let mut usage = RunUsage::default();
    for step in state.steps.iter().filter(|step| step.turn == turn) {
        match &step.body {
            StepBody::Assistant {
                content,
                model,
                usage: used,
                ..
            } => {
                let text: String = content
                    .iter()
                    .filter_map(|block| match block {
                        AssistantBlock::Text { text } => Some(text.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n");
                if !text.trim().is_empty() {
                    result.summary = Some(text.trim().to_owned());
                }
                if !model.is_empty() {
                    result.model = Some(model.clone());
                }
                usage.input_tokens = Some(usage.input_tokens.unwrap_or(0) + used.input_tokens);
                usage.output_tokens = Some(usage.output_tokens.unwrap_or(0) + used.output_tokens);
            }
            StepBody::HeartbeatOutcome { status, reason } => match status.as_str() {
                "failed" => {
                    result.status = Some(RunStatus::Error);
                    result.error = reason.clone();
                }
                "sent" => {
                    result.status = Some(RunStatus::Ok);
                    result.delivered = Some(true);
                }
                _ => {
                    result.status = Some(RunStatus::Ok);
                    result.delivered = Some(false);
                }
            },
            _ => {}
        }
    }
    if usage.input_tokens.is_some() {
        result.usage = Some(usage);
    }
    result
}
