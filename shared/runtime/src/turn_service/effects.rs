//! The effect loop: performs what the engine asks for (persist, call the model, compact,
//! run a tool through the registry, reply) until the turn waits, yields or is done. One
//! function per effect.

use std::sync::atomic::Ordering;

use clawless_base::transcript::ToolCall;
use clawless_core::session::SessionStoreError;
use clawless_core::turn::events::ApprovalDecision;
use clawless_core::turn::state::CompactRequest;
use clawless_core::turn::{Effect, OutboundReply};

use super::context_keeper::{ModelStep, OverflowAttempts};
use super::handlers::EventRun;
use super::tools::{PendingJob, ToolCallContext, ToolOutcome};
use super::{Deadline, PerTurn, TurnContext, TurnError, TurnService};

/// What the loop keeps between effects: the current turn's routing and prompt context
/// (rebuilt when a follow-up turn starts, since owner-only tools depend on the sender), and
/// the context-overflow retries.
#[derive(Default)]
struct LoopState {
    current: Option<PerTurn>,
    overflow: OverflowAttempts,
}

/// Whether the loop goes on after an effect.
enum Next {
    Continue,
    Stop,
}

impl TurnService {
    /// Performs the engine's effects for `run` until the turn waits, yields or is done.
    pub(super) async fn run_effects(
        &self, run: &mut EventRun<'_>, deadline: Option<&Deadline>,
    ) -> Result<(), TurnError> {
        let mut looped = LoopState::default();
        loop {
            let routing = &self
                .per_turn(
                    &run.agent_id,
                    &run.state,
                    &mut looped.current,
                    run.scope.exec,
                )
                .routing;
            let effect = run
                .engine
                .next(&mut run.state, routing, self.deps.clock.now_ms());
            let next = match effect {
                Effect::Persist => {
                    if self.persist_unless_stopped(run).await? {
                        Next::Continue
                    } else {
                        Next::Stop
                    }
                }
                Effect::CallModel => self.call_model(run, &mut looped, deadline).await?,
                Effect::Compact(request) => {
                    self.compact_now(run, &mut looped, &request, deadline)
                        .await?;
                    Next::Continue
                }
                Effect::RunTool(call) => {
                    self.tool_effect(run, &mut looped, &call, None).await?;
                    Next::Continue
                }
                Effect::SendToNode {
                    job_id,
                    call,
                    approved,
                } => {
                    let job = (job_id.as_str(), approved);
                    self.tool_effect(run, &mut looped, &call, Some(job)).await?;
                    Next::Continue
                }
                Effect::SendReply(reply) => {
                    self.send_reply(run, &reply).await?;
                    Next::Continue
                }
                Effect::Wait => {
                    run.report.waiting = true;
                    Next::Stop
                }
                Effect::Idle => {
                    self.on_idle(run).await?;
                    Next::Stop
                }
            };
            if let Next::Stop = next {
                return Ok(());
            }
        }
    }

    /// Commits what the session has not committed yet.
    async fn persist(&self, run: &mut EventRun<'_>) -> Result<(), TurnError> {
        let commit = run.state.pending_commit()?;
        let version = self.deps.sessions.commit(&run.key, &commit).await?;
        run.state.mark_committed(version);
        run.report.commits += 1;
        Ok(())
    }

    /// [`TurnService::persist`], unless `/stop` ended this turn meanwhile: the commit then
    /// loses to the stop's, the session is taken as stored, and `false` says the turn goes no
    /// further (no model call, tool or reply after it). Any other conflict is an error, as
    /// before, and the event is redelivered.
    async fn persist_unless_stopped(&self, run: &mut EventRun<'_>) -> Result<bool, TurnError> {
        match self.persist(run).await {
            Err(TurnError::Store(conflict @ SessionStoreError::Conflict { .. })) => {
                let stored = self.load_state(&run.key, run.now).await?;
                if !super::stop::ended_by_stop(&stored, &run.state) {
                    return Err(conflict.into());
                }
                tracing::info!(session = %run.key, turn = run.state.meta.turn, "turn stopped by /stop");
                run.state = stored;
                run.report.acceptance = Some("StoppedByStop".to_owned());
                Ok(false)
            }
            outcome => outcome.map(|()| true),
        }
    }

    /// The turn's prompt context for `run`, built on first use and kept in `current`.
    async fn run_context<'a>(
        &self, run: &mut EventRun<'_>, current: &'a mut Option<PerTurn>,
    ) -> Result<&'a TurnContext, TurnError> {
        self.context(&run.agent_id, &mut run.state, current, &run.scope)
            .await
    }

    /// One model call (with its overflow handling), unless the invocation's deadline is too
    /// near: then the turn yields and the loop stops.
    async fn call_model(
        &self, run: &mut EventRun<'_>, looped: &mut LoopState, deadline: Option<&Deadline>,
    ) -> Result<Next, TurnError> {
        if let (Some(deadline), Some(policy)) = (deadline, &self.yield_policy)
            && deadline.must_yield(self.deps.clock.now_ms(), policy.threshold)
        {
            self.yield_turn(
                &run.key,
                &run.agent_id,
                &mut run.state,
                policy,
                &mut run.report,
            )
            .await?;
            return Ok(Next::Stop);
        }
        if let Some(chat) = &run.state.meta.chat
            && !run.state.is_heartbeat_turn()
            && let Err(err) = self.deps.outbox.typing(chat).await
        {
            tracing::debug!(error = %err, "typing indicator not shown");
        }
        let ctx = self.run_context(run, &mut looped.current).await?;
        let mut calls = 0;
        let step = self
            .advance_model(
                &run.engine,
                &mut run.state,
                ctx,
                &mut looped.overflow,
                &mut calls,
            )
            .await;
        count_model_calls(run, deadline, calls);
        let now = self.deps.clock.now_ms();
        let (engine, state) = (&run.engine, &mut run.state);
        match step? {
            ModelStep::Answered(response) => engine.record_model_response(state, response, now),
            ModelStep::Changed => {}
            ModelStep::TooLarge(text) => engine.record_context_overflow(state, &text, now),
            ModelStep::Failed(err) => {
                tracing::error!(error = ?err, session = %run.key, "model call failed");
                engine.record_model_failure(state, &err.to_string(), now);
            }
        }
        Ok(Next::Continue)
    }

    /// `/compact`: compacts the session now and reports the outcome for the chat.
    async fn compact_now(
        &self, run: &mut EventRun<'_>, looped: &mut LoopState, request: &CompactRequest,
        deadline: Option<&Deadline>,
    ) -> Result<(), TurnError> {
        let ctx = self.run_context(run, &mut looped.current).await?;
        let mut calls = 0;
        let instructions = request.instructions.as_deref();
        let text = self
            .compact_command(&run.engine, &mut run.state, ctx, instructions, &mut calls)
            .await;
        count_model_calls(run, deadline, calls);
        run.engine
            .finish_compact_command(&mut run.state, text, self.deps.clock.now_ms());
        Ok(())
    }

    /// Runs a tool call through the registry: in-process (`job` is `None`; the turn's prompt
    /// context is built first, since the core's tools read it), or as a pending job (a
    /// node's `exec`, `sessions_send`), which is marked dispatched when sent.
    async fn tool_effect(
        &self, run: &mut EventRun<'_>, looped: &mut LoopState, call: &ToolCall,
        job: Option<(&str, Option<ApprovalDecision>)>,
    ) -> Result<(), TurnError> {
        let routing = self
            .per_turn(
                &run.agent_id,
                &run.state,
                &mut looped.current,
                run.scope.exec,
            )
            .routing
            .clone();
        let mut tool_context = None;
        if job.is_none() {
            let ctx = self.run_context(run, &mut looped.current).await?;
            let mut fresh = ctx.tool_context.clone();
            fresh.session = self.session_facts(&run.state);
            tool_context = Some(fresh);
        }
        // Only a pending job has a placement (in-process tools never need one).
        let job = job.map(|(job_id, approved)| PendingJob {
            job_id,
            approved,
            placement: self.exec_placement(&run.agent_id, &run.state, call),
            background_allowed: routing.offered.contains("process"),
        });
        let pending_id = job.as_ref().map(|job| job.job_id);
        let loaded_before = run.state.meta.loaded_tools.len();
        let prompt = looped
            .current
            .as_ref()
            .and_then(|per_turn| per_turn.context.as_ref());
        let context = ToolCallContext {
            call,
            state: &mut run.state,
            session_key: &run.event.session_key,
            agent_id: &run.agent_id,
            tool_context: tool_context.as_ref(),
            prompt,
            job,
        };
        let outcome = self
            .run_tool(context, &routing, &mut run.report.tools_run)
            .await?;
        if run.state.meta.loaded_tools.len() != loaded_before
            && let Some(PerTurn {
                context: Some(ctx), ..
            }) = &mut looped.current
        {
            // A deferred tool was loaded: the turn's next requests carry its full schema.
            self.reoffer_tools(ctx, &routing, &run.state);
        }
        let now = self.deps.clock.now_ms();
        match (outcome, pending_id) {
            (ToolOutcome::Done(output), _) => {
                run.engine
                    .record_tool_result(&mut run.state, call, output, now);
            }
            (ToolOutcome::Pending, Some(job_id)) => run.state.mark_dispatched(job_id),
            (ToolOutcome::Pending, None) => {
                let text = clawless_core::turn::tool_not_available(&call.name);
                let output = clawless_core::tools::ToolOutput::error(text);
                run.engine
                    .record_tool_result(&mut run.state, call, output, now);
            }
        }
        Ok(())
    }

    /// Delivers a reply and records whether it was sent or refused for good.
    async fn send_reply(
        &self, run: &mut EventRun<'_>, reply: &OutboundReply,
    ) -> Result<(), TurnError> {
        let reply = &self.with_reply_media(run, reply).await?;
        let delivered = self.deliver(reply).await?;
        let now = self.deps.clock.now_ms();
        match delivered {
            None => {
                run.report.replies_sent += 1;
                run.engine
                    .record_reply_sent(&mut run.state, &reply.reply_id, now);
            }
            Some(reason) => {
                run.engine
                    .record_reply_rejected(&mut run.state, &reply.reply_id, &reason, now);
            }
        }
        Ok(())
    }

    /// The turn is done: a cron run's, an agent-to-agent step's and a sub-agent's ends are
    /// recorded (and what follows them queued), then committed.
    async fn on_idle(&self, run: &mut EventRun<'_>) -> Result<(), TurnError> {
        let cron_done = self.finish_cron_run(&mut run.state).await?;
        let a2a_done = self.finish_a2a_steps(&mut run.state).await?;
        let announced = self.announce_if_done(&mut run.state).await?;
        if announced && run.arm.is_none() {
            run.arm = self.archive_timer(&run.state, &run.event.agent_id);
        }
        if cron_done || a2a_done || announced {
            self.persist(run).await?;
        }
        Ok(())
    }
}

/// Counts `calls` model calls in the report and against the invocation's deadline.
fn count_model_calls(run: &mut EventRun<'_>, deadline: Option<&Deadline>, calls: u32) {
    run.report.model_calls += calls;
    if let Some(deadline) = deadline {
        deadline.model_calls.fetch_add(calls, Ordering::Relaxed);
    }
}
