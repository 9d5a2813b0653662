//! One handler per [`TurnEvent`]: [`TurnService::handle_inner`] loads the session, lets a
//! stopped sub-agent go no further, then matches the event to the function that turns it
//! into the engine's input (or handles it whole), and hands what follows to the effect loop
//! (`effects.rs`).
//!
//! A handler answers [`Flow::Run`] when the engine has something to do, or [`Flow::Done`]
//! when the event is fully handled (the report says what was recorded).

use clawless_core::session::SessionKey;
use clawless_core::timers::Timer;
use clawless_core::turn::events::{
    AgentMessage, SessionEvent, SubagentStart, TurnEvent, dedup_token,
};
use clawless_core::turn::state::SessionState;
use clawless_core::turn::{Acceptance, Incoming, TurnEngine, TurnSettings};

use super::{Deadline, NodeScope, TurnError, TurnReport, TurnService, cron, heartbeat, subagents};

/// An event being handled: its session, the engine and what the handlers record.
pub(super) struct EventRun<'a> {
    pub event: &'a SessionEvent,
    pub key: SessionKey,
    /// The agent, as configured.
    pub agent_id: String,
    /// When the event was taken.
    pub now: u64,
    pub engine: TurnEngine,
    pub scope: NodeScope,
    pub state: SessionState,
    pub report: TurnReport,
    /// The timer to arm once the session is committed.
    pub arm: Option<Timer>,
}

impl EventRun<'_> {
    /// Gives `incoming` to the engine, or records `otherwise` as the acceptance.
    fn accept_or(&mut self, incoming: Option<Incoming>, otherwise: &str) {
        match incoming {
            Some(incoming) => {
                self.accept(incoming);
            }
            None => self.report.acceptance = Some(otherwise.to_owned()),
        }
    }

    /// Gives `incoming` to the engine and records how it was taken.
    fn accept(&mut self, incoming: Incoming) -> Acceptance {
        let acceptance = self.engine.accept(&mut self.state, incoming, self.now);
        self.report.acceptance = Some(format!("{acceptance:?}"));
        acceptance
    }
}

/// What follows a handler.
pub(super) enum Flow {
    /// The engine has the event: run its effects.
    Run,
    /// Nothing more to do for this event.
    Done,
}

impl TurnService {
    /// [`TurnService::handle_until`] before arming `arm`, the timer the event asks for.
    pub(super) async fn handle_inner(
        &self, event: &SessionEvent, deadline: Option<&Deadline>, arm: &mut Option<Timer>,
    ) -> Result<TurnReport, TurnError> {
        let key = SessionKey::parse(&event.session_key).ok_or_else(|| {
            TurnError::BadEvent(format!("bad session key {:?}", event.session_key))
        })?;
        let agent_id = self
            .config()
            .agent(&event.agent_id)
            .ok_or_else(|| TurnError::BadEvent(format!("unknown agent {:?}", event.agent_id)))?
            .id;
        let now = self.deps.clock.now_ms();
        let mut state = self.load_state(&key, now).await?;
        if self.stopped_before(event, &key, &mut state).await? {
            return Ok(TurnReport::default());
        }
        let engine = TurnEngine::new(self.turn_settings(&agent_id));
        let mut run = EventRun {
            event,
            key,
            agent_id,
            now,
            engine,
            scope: self.node_scope().await?,
            state,
            report: TurnReport::default(),
            arm: None,
        };
        if let Flow::Run = self.route(&mut run).await? {
            self.run_effects(&mut run, deadline).await?;
        }
        *arm = run.arm;
        Ok(run.report)
    }

    /// Calls the handler of `run`'s event.
    async fn route(&self, run: &mut EventRun<'_>) -> Result<Flow, TurnError> {
        match &run.event.event {
            TurnEvent::Continue { .. } => {
                // Nothing new to record: the transcript says what is left.
                run.report.acceptance = Some("Continued".to_owned());
                Ok(Flow::Run)
            }
            TurnEvent::Heartbeat {
                heartbeat_id,
                slot_ms,
                reason,
                attempt,
            } => {
                let firing = heartbeat::FiringEvent {
                    heartbeat_id,
                    slot_ms: *slot_ms,
                    reason,
                    attempt: *attempt,
                };
                self.on_heartbeat(run, firing).await
            }
            TurnEvent::SystemEvent {
                event_id,
                text,
                wake,
            } => self.on_system_event(run, event_id, text, *wake).await,
            TurnEvent::SubagentTimeout { run_id } => self.on_subagent_timeout(run, run_id).await,
            TurnEvent::CronTimeout(mark) => {
                // The session goes on with whatever waited behind the run.
                let changed = self
                    .time_out_cron_run(&run.engine, &mut run.state, mark)
                    .await?;
                if !changed && run.state.version == 0 {
                    return Ok(Flow::Done);
                }
                run.report.acceptance = Some("CronTimeoutHandled".to_owned());
                Ok(Flow::Run)
            }
            TurnEvent::SubagentStart(start) => Ok(self.on_subagent_start(run, start)),
            TurnEvent::SubagentAnnounce {
                announce_id,
                run_id,
                status,
                text,
                silent,
                ..
            } => {
                let facts = subagents::AnnounceFacts {
                    announce_id,
                    run_id,
                    status,
                    text,
                    silent: *silent,
                };
                let incoming = self.take_announce(&mut run.state, facts, run.now);
                run.accept_or(incoming, "AnnounceTaken");
                Ok(Flow::Run)
            }
            TurnEvent::AgentMessage(message) => Ok(self.on_agent_message(run, message)),
            TurnEvent::CronFire {
                job_id,
                slot_ms,
                manual_ms,
                only_if_due,
            } => {
                let firing = cron::CronFiring {
                    job_id,
                    slot_ms: *slot_ms,
                    manual_ms: *manual_ms,
                    only_if_due: *only_if_due,
                };
                self.on_cron_fire(run, firing).await
            }
            // Handled before the engine is built (see `stopped_before`).
            TurnEvent::SubagentArchive { .. } => Ok(Flow::Done),
            TurnEvent::Stop(message) => self.on_stop(run, message).await,
            TurnEvent::Inbound(_)
            | TurnEvent::ToolResult { .. }
            | TurnEvent::ToolTimeout { .. }
            | TurnEvent::Approval { .. }
            | TurnEvent::ApprovalNeeded { .. }
            | TurnEvent::ApprovalTimeout { .. } => self.on_chat_or_result(run).await,
        }
    }

    /// The session's live part (the latest summary and the steps after its cut), or a new
    /// session.
    pub(super) async fn load_state(
        &self, key: &SessionKey, now: u64,
    ) -> Result<SessionState, TurnError> {
        Ok(match self.deps.sessions.load_live(key).await? {
            Some(stored) => SessionState::from_stored(key.clone(), &stored)?,
            None => {
                let session_id = dedup_token(&format!("{key}-{now}"));
                SessionState::new(key.clone(), session_id, now)
            }
        })
    }

    /// The engine's settings from the config, for `agent_id`'s sessions.
    fn turn_settings(&self, agent_id: &str) -> TurnSettings {
        TurnSettings {
            max_model_calls: self
                .config()
                .agents
                .defaults
                .max_model_calls
                .unwrap_or(clawless_core::turn::DEFAULT_MAX_MODEL_CALLS),
            reasoning_default: super::thinking::configured_reasoning(self.config(), agent_id),
        }
    }

    /// Handles what comes before any engine: a sub-agent's archive, and a killed, timed-out
    /// or steered sub-agent, which takes no further step whatever the event (but the new run
    /// of a steer starts, and a time limit is still recorded). True when the event is done.
    async fn stopped_before(
        &self, event: &SessionEvent, key: &SessionKey, state: &mut SessionState,
    ) -> Result<bool, TurnError> {
        if let TurnEvent::SubagentArchive { run_id } = &event.event {
            if self.archive_subagent(state, run_id) {
                let commit = state.pending_commit()?;
                self.deps.sessions.commit(key, &commit).await?;
            }
            return Ok(true);
        }
        let steer_restart = match &event.event {
            TurnEvent::SubagentStart(start) => clawless_core::turn::subagent_run::is_steer_restart(
                state.meta.subagent.as_ref(),
                start,
            ),
            _ => false,
        };
        if matches!(event.event, TurnEvent::SubagentTimeout { .. })
            || steer_restart
            || !self.stop_if_ended(state)
        {
            return Ok(false);
        }
        if state.has_uncommitted() {
            let commit = state.pending_commit()?;
            self.deps.sessions.commit(key, &commit).await?;
        }
        Ok(true)
    }

    /// A heartbeat firing, through its gates: a poll turn, or a skip recorded in the meta.
    async fn on_heartbeat(
        &self, run: &mut EventRun<'_>, firing: heartbeat::FiringEvent<'_>,
    ) -> Result<Flow, TurnError> {
        let start = self
            .start_heartbeat(&run.agent_id, &mut run.state, firing)
            .await?;
        run.arm = start.arm;
        match start.incoming {
            Some(incoming) => {
                run.accept(incoming);
            }
            // Nothing to record in a session that does not exist.
            None if !start.changed && run.state.version == 0 => return Ok(Flow::Done),
            None => run.report.acceptance = Some("HeartbeatHandled".to_owned()),
        }
        Ok(Flow::Run)
    }

    /// A system event (a cron reminder for the main session): queued, or a turn at once.
    async fn on_system_event(
        &self, run: &mut EventRun<'_>, event_id: &str, text: &str, wake: bool,
    ) -> Result<Flow, TurnError> {
        let incoming = self
            .queue_system_event(&run.agent_id, &mut run.state, event_id, text, wake)
            .await?;
        run.accept_or(incoming, "SystemEventQueued");
        Ok(Flow::Run)
    }

    /// A sub-agent's time limit: its run stops and its end is announced.
    async fn on_subagent_timeout(
        &self, run: &mut EventRun<'_>, run_id: &str,
    ) -> Result<Flow, TurnError> {
        if self.time_out_subagent(&mut run.state, run_id).await? {
            let commit = run.state.pending_commit()?;
            self.deps.sessions.commit(&run.key, &commit).await?;
            run.report.commits += 1;
        }
        Ok(Flow::Done)
    }

    /// A child's run starts in its session (its time limit armed).
    fn on_subagent_start(&self, run: &mut EventRun<'_>, start: &SubagentStart) -> Flow {
        run.arm =
            subagents::timeout_timer(start, &run.event.session_key, &run.event.agent_id, run.now);
        let incoming = self.start_subagent(&mut run.state, start, run.now);
        run.accept_or(incoming, "SubagentStartRedelivered");
        Flow::Run
    }

    /// A step of an agent-to-agent exchange.
    fn on_agent_message(&self, run: &mut EventRun<'_>, message: &AgentMessage) -> Flow {
        let incoming = self.take_agent_message(&mut run.state, message);
        run.accept_or(incoming, "AgentMessageTaken");
        Flow::Run
    }

    /// A cron job's firing: its run's turn, or what the firing recorded.
    async fn on_cron_fire(
        &self, run: &mut EventRun<'_>, firing: cron::CronFiring<'_>,
    ) -> Result<Flow, TurnError> {
        let start = self
            .start_cron_run(&run.agent_id, &mut run.state, firing)
            .await?;
        run.arm = start.arm;
        match start.incoming {
            Some(incoming) => {
                run.accept(incoming);
            }
            None if !start.changed => return Ok(Flow::Done),
            None => run.report.acceptance = Some("CronHandled".to_owned()),
        }
        Ok(Flow::Run)
    }

    /// A chat message, a node's result or timeout, or an approval: prepared (slash commands,
    /// resets, approvals) into the engine's input. Pending system events reach the model with
    /// the next message, once.
    async fn on_chat_or_result(&self, run: &mut EventRun<'_>) -> Result<Flow, TurnError> {
        if let TurnEvent::Inbound(message) = &run.event.event
            && !message.sender_is_owner
            && !run.state.meta.untrusted
        {
            // A chat message from anyone but an owner: the session is untrusted from now on
            // (under the default sandbox mode, sandboxed), before anything is prepared for it.
            run.state.meta.untrusted = true;
            run.state.touch_meta();
        }
        run.arm = self.arm_if_needed(&run.agent_id, &mut run.state);
        let Some(mut incoming) = self
            .prepare(&run.agent_id, &run.event.event, &run.state, &run.scope)
            .await?
        else {
            tracing::info!(session = %run.key, "nothing to do for this event; skipped");
            run.report = TurnReport::default();
            return Ok(Flow::Done);
        };
        let state = &mut run.state;
        if matches!(run.event.event, TurnEvent::Inbound(_)) {
            self.revert_disallowed_model(state);
        }
        // A command's text never reaches the model, so its events wait for the next message.
        if let Incoming::Message(prepared) = &mut incoming
            && !state.meta.pending_events.is_empty()
            && prepared.compact.is_none()
            && prepared.dispatch.is_none()
            && !state.has_seen_message(&prepared.message.message_id)
        {
            let lines =
                clawless_automation::heartbeat::system_event_lines(&state.meta.pending_events);
            if !lines.is_empty() {
                prepared.text = format!("{lines}\n\n{}", prepared.text);
            }
            state.meta.pending_events.clear();
            state.touch_meta();
        }
        if run.accept(incoming) == Acceptance::AlreadyHandled {
            tracing::info!(session = %run.key, "event already handled; resuming");
        }
        Ok(Flow::Run)
    }
}
