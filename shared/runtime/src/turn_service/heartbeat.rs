//! Heartbeats in the turn service (spec `openclaw-automation.md` §1): arming the durable
//! timer of each heartbeat agent, handling a firing (exactly once per slot), and the facts the
//! gates need (`HEARTBEAT.md` from the workspace, the session's state, the alert target).
//!
//! The rules, all over the durable [`Timers`] port (SQLite locally, a queue or EventBridge
//! Scheduler on AWS), with no polling:
//!
//! - **Slots.** An agent's heartbeats fall on its phase grid (`slot mod interval == phase`,
//!   the phase hashed from the deployment's seed and the agent id). A firing names its slot;
//!   the timer id is `heartbeat:<agent>:<slot>`, the event goes to the heartbeat session's
//!   FIFO group (the agent's main session, or `<key>:heartbeat` with `isolatedSession`).
//! - **Exactly once per slot.** The session's meta records the latest slot handled. A firing
//!   of that slot or an earlier one (a redelivery, a duplicate timer) does nothing but re-arm
//!   the next firing; a firing off the current grid (the interval changed) runs nothing and
//!   arms the current grid's next slot instead.
//! - **Chaining.** After a slot is handled (run or skipped) the next slot is armed, after the
//!   meta recording the handled slot is committed. A busy session (a turn waiting on a node or
//!   an approval) does not advance the schedule: the same slot is retried after 1 s, doubling
//!   up to a minute, until the next slot comes round.
//! - **Bootstrap.** `clawless local` arms every heartbeat agent at start
//!   ([`TurnService::arm_heartbeats`]). Any event for a heartbeat agent's main session whose
//!   meta knows of no firing ahead arms one too, which is how a deployment on AWS starts its
//!   chains (on its first message) and mends a chain that broke. Arming is idempotent: timer
//!   ids are deterministic, and a duplicate firing is a no-op.

use clawless_automation::heartbeat::file::{HeartbeatFile, record_task_runs};
use clawless_automation::heartbeat::gate::{
    HeartbeatDecision, HeartbeatRunFacts, HeartbeatRunPlan, decide_heartbeat_run,
};
use clawless_automation::heartbeat::schedule::HeartbeatSchedule;
use clawless_automation::heartbeat::state::{busy_retry_delay_ms, needs_arming};
use clawless_automation::heartbeat::{
    AlertTarget, DirectPolicy, Firing, HeartbeatAgent, HeartbeatConfig, HeartbeatDelivery,
    HeartbeatReason, HeartbeatRunRecord, HeartbeatState, HeartbeatTarget, SkipReason, judge_firing,
    resolve_heartbeat_session,
};
use clawless_base::session_key::ChatType;
use clawless_core::session::SessionKey;
use clawless_core::system_prompt::bootstrap::{HEARTBEAT_FILE_NAME, MAX_BOOTSTRAP_FILE_BYTES};
use clawless_core::timers::{Timer, Timers};
use clawless_core::turn::Incoming;
use clawless_core::turn::events::{ChatRef, SessionEvent, TurnEvent};
use clawless_core::turn::prepare::heartbeat_message;
use clawless_core::turn::state::{ResetReason, ResetRequest, SessionState};

use super::{TurnError, TurnService};

/// How many times a cron reminder's wake waits for a busy session (1 s, doubling up to a
/// minute: about a quarter of an hour) before its event is left for the next heartbeat.
const CRON_WAKE_ATTEMPTS: u32 = 20;

/// What heartbeats are scheduled with: the durable timers and the deployment's phase seed.
#[derive(Clone)]
pub struct HeartbeatTimers {
    /// Where firings wait.
    pub timers: std::sync::Arc<dyn Timers>,
    /// Fixed per deployment (the state directory locally, the session table on AWS): each
    /// agent keeps its phase across restarts, and deployments are spread out.
    pub seed: String,
}

impl std::fmt::Debug for HeartbeatTimers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeartbeatTimers")
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

/// One heartbeat firing as queued.
#[derive(Debug, Clone, Copy)]
pub(super) struct FiringEvent<'a> {
    pub heartbeat_id: &'a str,
    pub slot_ms: Option<u64>,
    pub reason: &'a str,
    pub attempt: u32,
}

/// What a firing comes to.
#[derive(Debug, Default)]
pub(super) struct HeartbeatStart {
    /// The heartbeat poll to run as a turn.
    pub incoming: Option<Incoming>,
    /// A timer to schedule once the session is committed (the next slot, or a busy retry).
    pub arm: Option<Timer>,
    /// The session's meta changed (a slot was recorded).
    pub changed: bool,
    /// Why the heartbeat did not run, when it was skipped.
    pub skipped: Option<SkipReason>,
}

/// The timer of `agent_id`'s firing of `slot_ms` (its `attempt`-th busy retry when above 0),
/// due at `due_at_ms`, for the session `run_key`.
pub fn heartbeat_timer(
    agent_id: &str, run_key: &SessionKey, slot_ms: u64, attempt: u32, due_at_ms: u64,
) -> Timer {
    let (run_id, reason) = if attempt == 0 {
        (format!("{agent_id}:{slot_ms}"), "interval")
    } else {
        (format!("{agent_id}:{slot_ms}:retry{attempt}"), "retry")
    };
    Timer {
        timer_id: format!("heartbeat:{run_id}"),
        due_at_ms,
        event: SessionEvent {
            session_key: run_key.to_string(),
            agent_id: agent_id.to_owned(),
            event: TurnEvent::Heartbeat {
                heartbeat_id: run_id,
                slot_ms: Some(slot_ms),
                reason: reason.to_owned(),
                attempt,
            },
        },
    }
}

impl TurnService {
    /// Arms the next firing of every heartbeat agent (`clawless local` calls it at start):
    /// the slot its session's schedule still has ahead when the interval and phase are
    /// unchanged, else the next slot from now. Reads sessions, writes none; scheduling a
    /// timer id that is pending already does nothing. Returns the timers scheduled.
    pub async fn arm_heartbeats(&self) -> Result<Vec<Timer>, TurnError> {
        let Some(heartbeats) = &self.heartbeats else {
            return Ok(Vec::new());
        };
        let now = self.deps.clock.now_ms();
        let mut armed = Vec::new();
        for agent in self.config().heartbeat_agents() {
            let Some(interval) = agent.config.interval_ms() else {
                tracing::info!(agent = %agent.agent_id, "heartbeats are off for this agent");
                continue;
            };
            let session = resolve_heartbeat_session(&agent.agent_id, &agent.config, None);
            let previous = match self.deps.sessions.load_live(&session.run_key).await? {
                Some(stored) => SessionState::from_stored(session.run_key.clone(), &stored)?
                    .meta
                    .heartbeat
                    .and_then(|state| state.schedule),
                None => None,
            };
            let schedule = HeartbeatSchedule::reconcile(
                previous.as_ref(),
                &heartbeats.seed,
                &agent.agent_id,
                interval,
                now,
            );
            let timer = heartbeat_timer(
                &agent.agent_id,
                &session.run_key,
                schedule.next_due_ms,
                0,
                schedule.next_due_ms,
            );
            self.schedule_timer(&timer).await?;
            tracing::info!(agent = %agent.agent_id, session = %session.run_key, due_at_ms = schedule.next_due_ms, "heartbeat armed");
            armed.push(timer);
        }
        Ok(armed)
    }

    /// Schedules a heartbeat's (or a sub-agent's time limit's) timer.
    pub(super) async fn schedule_timer(&self, timer: &Timer) -> Result<(), TurnError> {
        let Some(timers) = self.timers() else {
            return Ok(());
        };
        timers.schedule(timer).await.map_err(TurnError::Timer)
    }

    /// Where this service's timers wait: the heartbeats' timers, else the sub-agents'.
    pub(super) fn timers(&self) -> Option<&std::sync::Arc<dyn Timers>> {
        self.heartbeats
            .as_ref()
            .map(|heartbeats| &heartbeats.timers)
            .or(self.subagent_timers.as_ref())
    }

    /// The heartbeat schedule `agent` has from now on.
    fn fresh_schedule(&self, agent: &HeartbeatAgent, now_ms: u64) -> Option<HeartbeatSchedule> {
        let heartbeats = self.heartbeats.as_ref()?;
        let interval = agent.config.interval_ms()?;
        Some(HeartbeatSchedule::new(
            &heartbeats.seed,
            &agent.agent_id,
            interval,
            now_ms,
        ))
    }

    /// For an event of `state`'s session other than a heartbeat: when the session is a
    /// heartbeat agent's main session and its meta knows of no firing ahead, records a fresh
    /// schedule in it and returns the timer to arm (once the session is committed).
    pub(super) fn arm_if_needed(&self, agent_id: &str, state: &mut SessionState) -> Option<Timer> {
        let agent = self.config().heartbeat_agent(agent_id)?;
        let session = resolve_heartbeat_session(&agent.agent_id, &agent.config, None);
        if session.base_key != state.key {
            return None;
        }
        let now = self.deps.clock.now_ms();
        let fresh = self.fresh_schedule(&agent, now)?;
        // With `isolatedSession` this is only a marker in the main session: the heartbeat
        // session keeps its own schedule. It expires every interval, and re-arming an armed
        // slot is harmless.
        if !adopt_schedule(state, fresh, now) {
            return None;
        }
        Some(heartbeat_timer(
            &agent.agent_id,
            &session.run_key,
            fresh.next_due_ms,
            0,
            fresh.next_due_ms,
        ))
    }

    /// Handles a heartbeat firing for `state`'s session: judges the slot, runs the gates and
    /// either returns the poll to run or records the skip. See the module documentation.
    pub(super) async fn start_heartbeat(
        &self, agent_id: &str, state: &mut SessionState, firing: FiringEvent<'_>,
    ) -> Result<HeartbeatStart, TurnError> {
        let Some(agent) = self.config().heartbeat_agent(agent_id) else {
            tracing::info!(agent = %agent_id, "heartbeat for an agent that runs none; dropped");
            return Ok(HeartbeatStart::default());
        };
        let reason = HeartbeatReason::parse(firing.reason);
        // A cron job's wake reaches the last chat whatever the heartbeat's own target
        // (spec §1.8); its run key is the job's session (checked when the job fired).
        let forced;
        let config = if reason.is_cron() {
            forced = HeartbeatConfig {
                target: Some("last".to_owned()),
                ..agent.config.clone()
            };
            &forced
        } else {
            &agent.config
        };
        let session = if reason.is_cron() {
            resolve_heartbeat_session(&agent.agent_id, config, Some(state.key.as_str()))
        } else {
            resolve_heartbeat_session(&agent.agent_id, config, None)
        };
        if session.run_key != state.key {
            tracing::info!(session = %state.key, "heartbeat for a session heartbeats no longer run in; dropped");
            return Ok(HeartbeatStart::default());
        }
        let now = self.deps.clock.now_ms();
        if let Some(early) = self.judge_slot(&agent, state, firing.slot_ms, now) {
            return Ok(early);
        }
        let last_chat = if session.fresh_each_run {
            self.chat_of(&session.base_key).await?
        } else {
            state.meta.chat.clone()
        };
        let target = alert_target(config, last_chat.as_ref());
        let visibility = self.config().heartbeat_visibility();
        let workspace = self.workspace(agent_id)?;
        let file_text = read_heartbeat_file(&workspace).await;
        let heartbeat_file = match &file_text {
            Some(Some(text)) => HeartbeatFile::Present(text),
            Some(None) => HeartbeatFile::Missing,
            None => HeartbeatFile::Unreadable,
        };
        let tz = self.time_zone();
        let heartbeat_state = state.meta.heartbeat.clone().unwrap_or_default();
        let workspace_dir = workspace.display_root();
        let decision = decide_heartbeat_run(&HeartbeatRunFacts {
            heartbeats_enabled: true,
            config: Some(config),
            reason: &reason,
            now_ms: now,
            user_tz: &tz,
            // The session's FIFO group is its lane: while this event is handled nothing else
            // of it runs. A turn left open (waiting on a node or an approval) is gate 5.
            main_lane_busy: false,
            session_busy: state.meta.turn_open || !state.meta.follow_ups.is_empty(),
            pending_events: &state.meta.pending_events,
            heartbeat_file,
            task_state: &heartbeat_state.task_runs,
            visibility,
            delivery_resolved: target.chat().is_some(),
            workspace_dir: &workspace_dir,
        });
        let interval = config.interval_ms().unwrap_or_default();
        let plan = match decision {
            HeartbeatDecision::Skipped(SkipReason::RequestsInFlight)
                if firing
                    .slot_ms
                    .is_some_and(|slot| now < slot.saturating_add(interval)) =>
            {
                return Ok(slot_retry(firing, &state.key, &agent.agent_id, now));
            }
            // A cron reminder's wake in a busy session waits for it (the coalesced wake of
            // spec §2.7), backing off like a busy slot, for up to CRON_WAKE_ATTEMPTS tries;
            // its event stays pending meanwhile.
            HeartbeatDecision::Skipped(SkipReason::RequestsInFlight)
                if firing.slot_ms.is_none()
                    && reason.is_cron()
                    && firing.attempt < CRON_WAKE_ATTEMPTS =>
            {
                return Ok(cron_wake_retry(firing, &state.key, &agent.agent_id, now));
            }
            HeartbeatDecision::Skipped(skip) => {
                tracing::info!(session = %state.key, slot_ms = ?firing.slot_ms, reason = %skip, "heartbeat skipped");
                let arm = self.record_slot(&agent, state, firing.slot_ms, now, Some(skip));
                return Ok(HeartbeatStart {
                    arm,
                    changed: true,
                    incoming: None,
                    skipped: Some(skip),
                });
            }
            HeartbeatDecision::Run(plan) => plan,
        };
        let run = HeartbeatRunParts {
            config,
            visibility,
            target,
            last_chat,
            fresh_each_run: session.fresh_each_run,
            cron: reason.is_cron(),
        };
        Ok(self.heartbeat_run(&agent, state, firing, &plan, run, now))
    }

    /// The chat session `key` last talked on, if it exists.
    async fn chat_of(&self, key: &SessionKey) -> Result<Option<ChatRef>, TurnError> {
        Ok(match self.deps.sessions.load_live(key).await? {
            Some(stored) => SessionState::from_stored(key.clone(), &stored)?.meta.chat,
            None => None,
        })
    }

    /// Judges a slotted firing against the session's schedule: `Some` ends the firing here
    /// (a stale chain re-armed on the current schedule, a duplicate slot), `None` goes on.
    fn judge_slot(
        &self, agent: &HeartbeatAgent, state: &mut SessionState, slot_ms: Option<u64>, now: u64,
    ) -> Option<HeartbeatStart> {
        let fresh = self.fresh_schedule(agent, now);
        let (Some(slot_ms), Some(fresh)) = (slot_ms, fresh) else {
            return None;
        };
        {
            match judge_firing(
                state.meta.heartbeat.as_ref(),
                slot_ms,
                fresh.interval_ms,
                fresh.phase_ms,
            ) {
                Firing::Act => {}
                Firing::Stale => {
                    // A chain armed under another `every`: it ends here, and the current
                    // schedule's next slot is armed in its place (on AWS a redeployed config
                    // reaches the chain this way).
                    tracing::info!(session = %state.key, slot_ms, "heartbeat slot not on the current schedule; dropped");
                    if !adopt_schedule(state, fresh, now) {
                        return Some(HeartbeatStart::default());
                    }
                    return Some(HeartbeatStart {
                        arm: Some(heartbeat_timer(
                            &agent.agent_id,
                            &state.key,
                            fresh.next_due_ms,
                            0,
                            fresh.next_due_ms,
                        )),
                        changed: true,
                        incoming: None,
                        skipped: None,
                    });
                }
                Firing::Duplicate => {
                    tracing::info!(session = %state.key, slot_ms, "heartbeat slot handled already");
                    let arm = state
                        .meta
                        .heartbeat
                        .as_ref()
                        .and_then(|heartbeat| heartbeat.schedule)
                        .filter(|schedule| schedule.next_due_ms > now)
                        .map(|schedule| {
                            heartbeat_timer(
                                &agent.agent_id,
                                &state.key,
                                schedule.next_due_ms,
                                0,
                                schedule.next_due_ms,
                            )
                        });
                    return Some(HeartbeatStart {
                        arm,
                        ..HeartbeatStart::default()
                    });
                }
            }
        }
        None
    }

    /// A heartbeat that runs: its slot recorded, its due tasks marked, and its poll turn
    /// (pending system events in front of the prompt).
    fn heartbeat_run(
        &self, agent: &HeartbeatAgent, state: &mut SessionState, firing: FiringEvent<'_>,
        plan: &HeartbeatRunPlan, run: HeartbeatRunParts<'_>, now: u64,
    ) -> HeartbeatStart {
        tracing::info!(session = %state.key, slot_ms = ?firing.slot_ms, kind = ?plan.kind, "heartbeat runs");
        let arm = self.record_slot(agent, state, firing.slot_ms, now, None);
        if let Some(heartbeat) = state.meta.heartbeat.as_mut() {
            record_task_runs(&mut heartbeat.task_runs, &plan.due_tasks, now);
        }
        let mut delivery =
            HeartbeatDelivery::new(run.config, run.visibility, run.target, firing.slot_ms);
        delivery.cron_run = run.cron;
        // The events reach the model now: cron reminders in the prompt, the others as
        // `System:` lines before it. They are not repeated.
        let other_events: Vec<_> = state
            .meta
            .pending_events
            .iter()
            .filter(|event| !event.is_cron_tagged())
            .cloned()
            .collect();
        let system_lines = clawless_automation::heartbeat::system_event_lines(&other_events);
        if !state.meta.pending_events.is_empty() {
            state.meta.pending_events.clear();
            state.touch_meta();
        }
        let chat = run.last_chat.unwrap_or_else(|| ChatRef {
            channel: "heartbeat".to_owned(),
            chat_id: agent.agent_id.clone(),
            chat_type: ChatType::Direct,
        });
        let run_id = match firing.slot_ms {
            Some(slot_ms) => format!("{}:{slot_ms}", agent.agent_id),
            None => firing.heartbeat_id.to_owned(),
        };
        let prompt = if system_lines.is_empty() {
            plan.prompt.clone()
        } else {
            format!("{system_lines}\n\n{}", plan.prompt)
        };
        let mut prepared = heartbeat_message(chat, &run_id, &prompt, delivery);
        if run.fresh_each_run && state.meta.turn > 0 {
            prepared.reset = Some(ResetRequest {
                reason: ResetReason::Heartbeat,
                model: None,
            });
        }
        HeartbeatStart {
            incoming: Some(Incoming::Message(Box::new(prepared))),
            arm,
            changed: true,
            skipped: None,
        }
    }

    /// Records a handled heartbeat in the session's meta: the slot (when it had one), how it
    /// ended, and the schedule's next slot, whose timer is returned.
    fn record_slot(
        &self, agent: &HeartbeatAgent, state: &mut SessionState, slot_ms: Option<u64>, now: u64,
        skipped: Option<SkipReason>,
    ) -> Option<Timer> {
        let fresh = self.fresh_schedule(agent, now);
        let heartbeat: &mut HeartbeatState =
            state.meta.heartbeat.get_or_insert_with(Default::default);
        heartbeat.last_run = Some(HeartbeatRunRecord {
            at_ms: now,
            slot_ms,
            status: if skipped.is_some() { "skipped" } else { "ran" }.to_owned(),
            reason: skipped.map(|skip| skip.as_str().to_owned()),
        });
        let arm = match (slot_ms, fresh) {
            (Some(slot_ms), Some(fresh)) => {
                heartbeat.last_slot_ms = Some(slot_ms);
                heartbeat.schedule = Some(fresh);
                Some(heartbeat_timer(
                    &agent.agent_id,
                    &state.key,
                    fresh.next_due_ms,
                    0,
                    fresh.next_due_ms,
                ))
            }
            _ => None,
        };
        state.touch_meta();
        arm
    }

    /// The heartbeat settings of the agent of `state`'s current turn, when that turn is a
    /// heartbeat and the agent runs heartbeats.
    pub(super) fn heartbeat_turn_config(&self, state: &SessionState) -> Option<HeartbeatConfig> {
        if !state.is_heartbeat_turn() {
            return None;
        }
        self.config()
            .heartbeat_agent(&state.meta.agent_id)
            .map(|agent| agent.config)
    }
}

/// Where an alert goes (spec §1.8): nowhere for `target: none`; the session's last chat for
/// `last`; a channel's chat for a channel id (`to`, else the last chat when it is on that
/// channel). `to` names the recipient on the resolved channel. A direct chat is refused under
/// `directPolicy: block`.
fn alert_target(config: &HeartbeatConfig, last_chat: Option<&ChatRef>) -> AlertTarget {
    let to = config
        .to
        .as_deref()
        .map(str::trim)
        .filter(|to| !to.is_empty());
    let recipient = |channel: &str| -> Option<ChatRef> {
        match (to, last_chat) {
            (Some(to), Some(last)) if last.channel == channel && last.chat_id == to => {
                Some(last.clone())
            }
            (Some(to), _) => Some(ChatRef {
                channel: channel.to_owned(),
                chat_id: to.to_owned(),
                chat_type: ChatType::Direct,
            }),
            (None, Some(last)) if last.channel == channel => Some(last.clone()),
            (None, _) => None,
        }
    };
    let chat = match config.target() {
        HeartbeatTarget::None => return AlertTarget::TargetNone,
        HeartbeatTarget::Last => last_chat.and_then(|last| recipient(&last.channel)),
        HeartbeatTarget::Channel(channel) => recipient(&channel),
    };
    match chat {
        None => AlertTarget::NoTarget,
        Some(chat)
            if chat.chat_type == ChatType::Direct
                && config.direct_policy() == DirectPolicy::Block =>
        {
            AlertTarget::DmBlocked
        }
        Some(chat) => AlertTarget::Chat { chat },
    }
}

/// A cron wake in a busy session: tried again after a back-off, as the next attempt.
fn cron_wake_retry(
    firing: FiringEvent<'_>, run_key: &SessionKey, agent_id: &str, now: u64,
) -> HeartbeatStart {
    let delay = busy_retry_delay_ms(firing.attempt);
    tracing::info!(session = %run_key, reason = firing.reason, delay_ms = delay, "cron wake skipped: requests-in-flight; retrying");
    let base = firing
        .heartbeat_id
        .split(":wake")
        .next()
        .unwrap_or(firing.heartbeat_id);
    HeartbeatStart {
        skipped: Some(SkipReason::RequestsInFlight),
        arm: Some(Timer {
            timer_id: format!("heartbeat:{base}:wake{}", firing.attempt + 1),
            due_at_ms: now + delay,
            event: SessionEvent {
                session_key: run_key.to_string(),
                agent_id: agent_id.to_owned(),
                event: TurnEvent::Heartbeat {
                    heartbeat_id: format!("{base}:wake{}", firing.attempt + 1),
                    slot_ms: None,
                    reason: firing.reason.to_owned(),
                    attempt: firing.attempt + 1,
                },
            },
        }),
        ..HeartbeatStart::default()
    }
}

/// `HEARTBEAT.md` of `workspace`: `Some(None)` when missing, `None` when unreadable.
async fn read_heartbeat_file(
    workspace: &clawless_core::tools::Workspace,
) -> Option<Option<String>> {
    let file_key = format!("{}{HEARTBEAT_FILE_NAME}", workspace.prefix);
    match workspace
        .store
        .get(&file_key, MAX_BOOTSTRAP_FILE_BYTES)
        .await
    {
        Ok(object) => {
            Some(object.map(|object| String::from_utf8_lossy(&object.bytes).into_owned()))
        }
        Err(err) => {
            tracing::warn!(error = %err, "HEARTBEAT.md unreadable; the heartbeat runs as if it were missing");
            None
        }
    }
}

/// What a running heartbeat's turn is built from, beside its plan.
struct HeartbeatRunParts<'a> {
    config: &'a HeartbeatConfig,
    visibility: clawless_automation::heartbeat::HeartbeatVisibility,
    target: AlertTarget,
    last_chat: Option<ChatRef>,
    fresh_each_run: bool,
    cron: bool,
}

/// A busy session at a slot's firing: the slot is tried again after a back-off, while it is
/// still the current one.
fn slot_retry(
    firing: FiringEvent<'_>, run_key: &SessionKey, agent_id: &str, now: u64,
) -> HeartbeatStart {
    let slot_ms = firing.slot_ms.unwrap_or_default();
    let delay = busy_retry_delay_ms(firing.attempt);
    tracing::info!(session = %run_key, slot_ms, delay_ms = delay, "heartbeat skipped: requests-in-flight; retrying");
    HeartbeatStart {
        skipped: Some(SkipReason::RequestsInFlight),
        arm: Some(heartbeat_timer(
            agent_id,
            run_key,
            slot_ms,
            firing.attempt + 1,
            now + delay,
        )),
        ..HeartbeatStart::default()
    }
}

/// Keeps `fresh` as the session's heartbeat schedule unless the stored one still stands
/// ([`needs_arming`]); whether it was kept, i.e. whether a timer is to be armed for it.
fn adopt_schedule(state: &mut SessionState, fresh: HeartbeatSchedule, now: u64) -> bool {
    if !needs_arming(state.meta.heartbeat.as_ref(), &fresh, now) {
        return false;
    }
    state
        .meta
        .heartbeat
        .get_or_insert_with(Default::default)
        .schedule = Some(fresh);
    state.touch_meta();
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(channel: &str, id: &str, chat_type: ChatType) -> ChatRef {
        ChatRef {
            channel: channel.into(),
            chat_id: id.into(),
            chat_type,
        }
    }

    fn config(target: Option<&str>, to: Option<&str>) -> HeartbeatConfig {
        HeartbeatConfig {
            target: target.map(str::to_owned),
            to: to.map(str::to_owned),
            ..HeartbeatConfig::default()
        }
    }

    #[test]
    fn targets_resolve_to_the_last_chat_a_channel_or_nowhere() {
        let last = chat("telegram", "42", ChatType::Direct);
        assert_eq!(
            alert_target(&config(None, None), Some(&last)),
            AlertTarget::TargetNone
        );
        assert_eq!(
            alert_target(&config(Some("last"), None), Some(&last)),
            AlertTarget::Chat { chat: last.clone() }
        );
        assert_eq!(
            alert_target(&config(Some("last"), None), None),
            AlertTarget::NoTarget
        );
        assert_eq!(
            alert_target(&config(Some("slack"), None), Some(&last)),
            AlertTarget::NoTarget,
            "no recipient on slack"
        );
        assert_eq!(
            alert_target(&config(Some("slack"), Some("C1")), Some(&last)),
            AlertTarget::Chat {
                chat: chat("slack", "C1", ChatType::Direct)
            }
        );
        let blocked = HeartbeatConfig {
            direct_policy: Some(DirectPolicy::Block),
            ..config(Some("last"), None)
        };
        assert_eq!(alert_target(&blocked, Some(&last)), AlertTarget::DmBlocked);
        let group = chat("telegram", "-100", ChatType::Group);
        assert_eq!(
            alert_target(&blocked, Some(&group)),
            AlertTarget::Chat { chat: group }
        );
    }

    #[test]
    fn timers_are_named_by_agent_and_slot() {
        let key = SessionKey::main("main");
        let timer = heartbeat_timer("main", &key, 1_000, 0, 1_000);
        assert_eq!(timer.timer_id, "heartbeat:main:1000");
        assert_eq!(timer.event.session_key, "agent:main:main");
        let retry = heartbeat_timer("main", &key, 1_000, 2, 5_000);
        assert_eq!(retry.timer_id, "heartbeat:main:1000:retry2");
        assert_ne!(retry.event.dedup_id(), timer.event.dedup_id());
        assert!(matches!(
            retry.event.event,
            TurnEvent::Heartbeat { slot_ms: Some(1_000), attempt: 2, ref reason, .. } if reason == "retry"
        ));
    }
}
