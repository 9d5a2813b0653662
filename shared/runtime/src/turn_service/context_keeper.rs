//! Keeps a turn's requests inside the model's context window, performing what the core's
//! `compaction` module decides: each request is built from the live view (old tool results
//! pruned, oversized ones shortened), checked against the budget, and sent; the memory flush
//! runs once per compaction cycle; a compaction asks the model for a summary (in stages when
//! the history is larger than one request, with the quality check) and records it as a step;
//! a provider's overflow error compacts and retries (three times at most) and teaches the
//! session the model's real window. When no summary can be had, the request is trimmed from
//! its oldest turns for that one call; when even the newest message alone is too large, the
//! chat is told so plainly.

use std::sync::Arc;

use clawless_base::model::{ModelError, ModelProvider, ModelRequest, ModelResponse, UserImages};
use clawless_base::transcript::{AssistantBlock, Message, ToolCall, assistant_text};
use clawless_core::compaction::flush::{
    MemoryFlushWrite, flush_prompt, flush_system_addendum, note_path,
};
use clawless_core::compaction::format::{format_context_usage_short, format_token_count};
use clawless_core::compaction::overflow::{
    is_likely_context_overflow, observed_prompt_tokens, stated_window,
};
use clawless_core::compaction::plan::{
    CompactionPlan, ContextBudget, ContextCheck, check_request, messages_tokens, plan_compaction,
    text_tokens, trim_oldest_turns,
};
use clawless_core::compaction::pruning::{prune_messages, pruning_due};
use clawless_core::compaction::summary::{
    SummaryVerdict, check_summary, stored_summary, summary_request, summary_stages, summary_tokens,
};
use clawless_core::tool_results::{repair_transcript, shorten_oversized_results};
use clawless_core::tools::{Tool, ToolOutput};
use clawless_core::turn::TurnEngine;
use clawless_core::turn::state::{CompactionTrigger, SessionState, StepBody};

use super::tools::{ToolCallContext, ToolOutcome, ToolRegistry};
use super::{TurnContext, TurnError, TurnService};

/// Overflow recoveries one turn may make before it gives up.
pub(super) const MAX_OVERFLOW_ATTEMPTS: u32 = 3;

/// Model calls one memory flush may make.
const MAX_FLUSH_CALLS: usize = 3;

/// What the chat is told when even a fresh context cannot hold the message.
pub(super) fn message_too_large_text(tokens: u64, window: u64) -> String {
    format!(
        "⚠️ This message is too large for the model: it needs about {} tokens, and the \
         model's context window holds {}. Nothing was lost. Send a shorter message (or split \
         it up), or use a model with a larger context window.",
        format_token_count(Some(tokens)),
        format_token_count(Some(window))
    )
}

/// What the chat is told when compaction could not bring a turn under the window.
pub(super) const CONTEXT_OVERFLOW_TEXT: &str = "⚠️ Context is too large for the model, and compacting \
could not bring it under its window. Your conversation is kept. Try again, use /compact, or \
use /new to start a fresh session.";

/// What [`TurnService::advance_model`] did.
pub(super) enum ModelStep {
    /// The model answered.
    Answered(ModelResponse),
    /// The session changed (a compaction or a memory flush was recorded): persist and ask
    /// the engine again.
    Changed,
    /// The request cannot be made to fit: end the turn with this text.
    TooLarge(String),
    /// The model failed for good (not an overflow).
    Failed(ModelError),
}

/// One turn's overflow recoveries and failed compactions within an invocation.
#[derive(Debug, Default)]
pub(super) struct OverflowAttempts {
    turn: u64,
    count: u32,
    compaction_failed: bool,
}

impl OverflowAttempts {
    fn for_turn(&mut self, turn: u64) -> &mut Self {
        if self.turn != turn {
            *self = Self {
                turn,
                ..Self::default()
            };
        }
        self
    }

    fn next(&mut self, turn: u64) -> u32 {
        let this = self.for_turn(turn);
        this.count += 1;
        this.count
    }

    fn compaction_failed(&mut self, turn: u64) -> bool {
        self.for_turn(turn).compaction_failed
    }

    fn mark_compaction_failed(&mut self, turn: u64) {
        self.for_turn(turn).compaction_failed = true;
    }
}

impl TurnService {
    /// Pruning of old tool results in requests: `agents.defaults.contextPruning`, with
    /// OpenClaw's defaults for Anthropic models (`cache-ttl`, 1 hour) where unset.
    fn pruning_settings(
        &self, state: &SessionState,
    ) -> Option<clawless_core::compaction::pruning::EffectivePruning> {
        let settings = self
            .config()
            .agents
            .defaults
            .context_pruning
            .clone()
            .unwrap_or_default();
        let settings = if self.model(state).model_ref().starts_with("anthropic/") {
            settings.with_anthropic_defaults()
        } else {
            settings
        };
        settings.resolve()
    }

    /// The context window and budget of this session's model.
    pub(super) fn budget(&self, state: &SessionState) -> ContextBudget {
        let defaults = &self.config().agents.defaults;
        // The session's current model's window (`agents.defaults.models.<ref>.contextTokens`).
        let configured =
            super::model_switch::context_window_of(self.config(), &self.model(state).model_ref());
        let window = state
            .meta
            .observed_window
            .map_or(configured, |observed| observed.min(configured));
        ContextBudget::new(window, &defaults.compaction)
    }

    /// The messages a request carries now: the live view without acknowledged heartbeat
    /// polls, repaired, with old tool results pruned when the cache has gone cold and
    /// oversized ones shortened.
    fn request_messages(&self, state: &SessionState, budget: &ContextBudget) -> Vec<Message> {
        // Heartbeat polls answered with an acknowledgement are left out (spec §1.7.9).
        let heartbeat = self
            .config()
            .heartbeat_agent(&state.meta.agent_id)
            .map(|agent| agent.config)
            .unwrap_or_default();
        let messages = clawless_automation::heartbeat::drop_heartbeat_acks(
            &state.messages(),
            heartbeat.prompt_body(),
            heartbeat.ack_max_chars(),
        );
        let repaired = repair_transcript(&messages);
        let pruning = self.pruning_settings(state);
        let last_call =
            state.view().steps.iter().rev().find_map(|step| {
                matches!(step.body, StepBody::Assistant { .. }).then_some(step.at_ms)
            });
        let pruned = match pruning {
            Some(settings) if pruning_due(self.deps.clock.now_ms(), last_call, settings.ttl_ms) => {
                prune_messages(&repaired, budget.window as usize, &settings)
            }
            _ => None,
        };
        shorten_oversized_results(&pruned.unwrap_or(repaired), budget.window as usize)
    }

    /// The current turn's images, for a model that sees them: read from the blob store,
    /// scaled down to `agents.defaults.imageMaxDimensionPx`, and shown with the turn's own
    /// user message (the last one in `messages`). An image that
    /// cannot be read is left out and logged; the message's media note still names it.
    async fn turn_images(&self, state: &SessionState, messages: &[Message]) -> Vec<UserImages> {
        let keys = match state.current_turn_steps().first().map(|step| &step.body) {
            Some(StepBody::Inbound { images, .. }) if !images.is_empty() => images,
            _ => return Vec::new(),
        };
        let Some(blobs) = &self.blobs else {
            return Vec::new();
        };
        if !self.model(state).sees_images() {
            return Vec::new();
        }
        let Some(message) = messages
            .iter()
            .rposition(|message| matches!(message, Message::User { .. }))
        else {
            return Vec::new();
        };
        let max_px = self.config().agents.defaults.image_max_dimension_px();
        let mut images = Vec::new();
        for key in keys {
            match blobs.get(key, crate::media_input::MAX_IMAGE_BYTES).await {
                Ok(Some(object)) => match crate::media_input::model_image(&object.bytes, max_px) {
                    Ok(image) => images.push(image),
                    Err(reason) => tracing::warn!(%key, %reason, "image not shown to the model"),
                },
                Ok(None) => tracing::warn!(%key, "stored image is gone"),
                Err(err) => tracing::warn!(%key, error = %err, "stored image unreadable"),
            }
        }
        if images.is_empty() {
            return Vec::new();
        }
        vec![UserImages { message, images }]
    }

    /// Advances a turn by one model call, compacting or flushing first when the budget says
    /// so, and recovering from a provider's overflow error.
    pub(super) async fn advance_model(
        &self, engine: &TurnEngine, state: &mut SessionState, context: &TurnContext,
        attempts: &mut OverflowAttempts, calls: &mut u32,
    ) -> Result<ModelStep, TurnError> {
        let budget = self.budget(state);
        let fixed = context.fixed_tokens;
        let messages = self.request_messages(state, &budget);
        let estimate = fixed + messages_tokens(&messages);
        let check = check_request(estimate, &budget);
        let turn = state.meta.turn;
        // Compact only when a compaction can happen; a failed one is not retried in the same
        // turn (the request is trimmed instead), so a turn never burns calls on summaries.
        // An automatic compaction leaves room for the next turns (no compaction thrash).
        let settling = budget.settling(fixed);
        let plan = (check == ContextCheck::CompactFirst
            && budget.auto_compaction
            && !attempts.compaction_failed(turn))
        .then(|| plan_compaction(state, &settling))
        .flatten();
        if (plan.is_some() || check == ContextCheck::FlushDue)
            && self.flush_due(state, context, &budget)
        {
            self.memory_flush(engine, state, context, &messages, fixed, &budget, calls)
                .await;
            return Ok(ModelStep::Changed);
        }
        if let Some(plan) = plan {
            match self
                .compact(
                    engine,
                    state,
                    plan,
                    &settling,
                    fixed,
                    CompactionTrigger::Threshold,
                    None,
                    calls,
                )
                .await
            {
                Ok(_) => return Ok(ModelStep::Changed),
                Err(reason) => {
                    attempts.mark_compaction_failed(turn);
                    tracing::warn!(session = %state.key, %reason, "no compaction; trimming this request");
                }
            }
        }
        let messages = if estimate > budget.prompt_limit() {
            match trim_oldest_turns(&messages, fixed, budget.prompt_limit()) {
                Some(trimmed) => trimmed,
                None => {
                    return Ok(ModelStep::TooLarge(message_too_large_text(
                        fixed + last_turn_tokens(&messages),
                        budget.window,
                    )));
                }
            }
        } else {
            messages
        };
        let sent = fixed + messages_tokens(&messages);
        let images = self.turn_images(state, &messages).await;
        let request = ModelRequest {
            system: context.system.clone(),
            messages,
            tools: context.tools.clone(),
            max_tokens: self.output_limit(&budget),
            images,
            thinking: self.thinking_level(state),
        };
        *calls += 1;
        match self.model(state).complete(&request).await {
            Ok(response) => {
                state.meta.last_prompt_tokens = Some(sent);
                Ok(ModelStep::Answered(response))
            }
            Err(err) if !err.is_retryable() && is_likely_context_overflow(&err.to_string()) => {
                let attempt = attempts.next(state.meta.turn);
                tracing::warn!(session = %state.key, attempt, error = %err, "context overflow; compacting");
                if attempt > MAX_OVERFLOW_ATTEMPTS {
                    return Ok(ModelStep::TooLarge(CONTEXT_OVERFLOW_TEXT.to_owned()));
                }
                self.learn_window(state, &err.to_string(), sent, &budget);
                let budget = self.budget(state).settling(fixed);
                let failed = match plan_compaction(state, &budget) {
                    Some(plan) => self
                        .compact(
                            engine,
                            state,
                            plan,
                            &budget,
                            fixed,
                            CompactionTrigger::Overflow,
                            None,
                            calls,
                        )
                        .await
                        .err(),
                    None => Some("nothing to compact".to_owned()),
                };
                if let Some(reason) = failed {
                    attempts.mark_compaction_failed(state.meta.turn);
                    tracing::warn!(session = %state.key, %reason, "overflow: no compaction; the smaller window trims the next request");
                }
                Ok(ModelStep::Changed)
            }
            Err(err) if err.is_retryable() => Err(err.into()),
            Err(err) => Ok(ModelStep::Failed(err)),
        }
    }

    /// The output limit of a request: the configured one, never more than the reserve.
    fn output_limit(&self, budget: &ContextBudget) -> u32 {
        let reserve = u32::try_from(budget.reserve).unwrap_or(u32::MAX);
        self.config().models.max_tokens().min(reserve.max(256))
    }

    /// Remembers a smaller real window: the one the provider names, or else 15% below what
    /// was just refused.
    fn learn_window(
        &self, state: &mut SessionState, error: &str, sent: u64, budget: &ContextBudget,
    ) {
        let named = stated_window(error);
        let learned = match named {
            Some(maximum) => maximum,
            None => {
                let refused = observed_prompt_tokens(error).unwrap_or(sent).max(sent);
                refused.min(budget.window) * 85 / 100
            }
        };
        let learned = learned.max(1_024);
        if learned < budget.window {
            state.meta.observed_window = Some(learned);
        }
    }

    fn flush_due(
        &self, state: &SessionState, context: &TurnContext, budget: &ContextBudget,
    ) -> bool {
        budget.memory_flush
            && state.meta.memory_flush_compaction_count != Some(state.meta.compaction_count)
            && context.tools.iter().any(|tool| tool.name == "write")
            && !state.current_turn_steps().iter().any(|step| {
                matches!(
                    step.body,
                    StepBody::Inbound {
                        heartbeat: true,
                        ..
                    }
                )
            })
    }

    /// Runs one of the memory flush's tools through its registry; a name it does not hold
    /// is refused.
    async fn run_flush_tool(
        &self, flush_tools: &ToolRegistry, call: &ToolCall, state: &mut SessionState,
        session_key: &str, context: &TurnContext,
    ) -> ToolOutput {
        let Some(tool) = flush_tools.get(&call.name) else {
            return ToolOutput::error(format!(
                "Tool \"{}\" is not available during the memory flush.",
                call.name
            ));
        };
        let agent_id = state.key.agent_id().to_owned();
        let outcome = tool
            .call(ToolCallContext {
                call,
                state,
                session_key,
                agent_id: &agent_id,
                tool_context: Some(&context.tool_context),
                prompt: None,
                job: None,
            })
            .await;
        match outcome {
            Ok(ToolOutcome::Done(output)) => output,
            Ok(ToolOutcome::Pending) => ToolOutput::error("the memory flush runs no pending tools"),
            Err(error) => ToolOutput::error(error.to_string()),
        }
    }

    /// Runs the silent memory flush and records it (also when it fails: it is tried once per
    /// compaction cycle). Nothing of it reaches the chat.
    #[allow(clippy::too_many_arguments)]
    async fn memory_flush(
        &self, engine: &TurnEngine, state: &mut SessionState, context: &TurnContext,
        messages: &[Message], fixed: u64, budget: &ContextBudget, calls: &mut u32,
    ) {
        let now = self.deps.clock.now_ms();
        let tz = self.time_zone();
        let date = clawless_base::time::local_date(now, &tz);
        let path = note_path(&date);
        let writer = MemoryFlushWrite::new(date.clone());
        // Only what the turn's policy offers: `read` if it is offered, and `write` (offered,
        // or there would be no flush) narrowed to the day's note.
        let read = context
            .tools
            .iter()
            .any(|tool| tool.name == "read")
            .then_some(clawless_core::tools::read::ReadTool);
        let mut tools = vec![writer.spec()];
        tools.extend(read.iter().map(|tool| tool.spec()));
        let write_name = writer.spec().name;
        let flush_tools = ToolRegistry::of_core_tools(
            std::iter::once(Arc::new(writer) as Arc<dyn Tool>)
                .chain(read.map(|tool| Arc::new(tool) as Arc<dyn Tool>)),
        );
        let session_key = state.key.to_string();
        let prompt = flush_prompt(&date, &clawless_base::time::current_time_line(now, &tz));
        let room = budget
            .prompt_limit()
            .saturating_sub(text_tokens(&prompt) + 200);
        // A turn of its own, before the pending one (spec `openclaw-sessions.md` §3): the
        // chat message this turn answers is neither shown to the flush nor answered by it.
        let settled = before_pending_turn(messages);
        let mut conversation = trim_oldest_turns(settled, fixed, room).unwrap_or_default();
        conversation.push(Message::User { text: prompt });
        let mut appended: u64 = 0;
        let mut error = None;
        for _ in 0..MAX_FLUSH_CALLS {
            let request = ModelRequest {
                system: format!("{}{}", context.system, flush_system_addendum(&date)),
                messages: conversation.clone(),
                tools: tools.clone(),
                max_tokens: self.output_limit(budget),
                images: Vec::new(),
                thinking: Default::default(),
            };
            *calls += 1;
            let response = match self.model(state).complete(&request).await {
                Ok(response) => response,
                Err(err) => {
                    tracing::warn!(session = %state.key, error = %err, "memory flush failed; the turn goes on");
                    error = Some(err.to_string());
                    break;
                }
            };
            let tool_calls: Vec<_> = response
                .content
                .iter()
                .filter_map(|block| match block {
                    AssistantBlock::ToolCall(call) => Some(call.clone()),
                    AssistantBlock::Text { .. } | AssistantBlock::Thinking { .. } => None,
                })
                .collect();
            conversation.push(Message::Assistant {
                content: response.content.clone(),
                stop_reason: response.stop_reason,
            });
            if tool_calls.is_empty() {
                break;
            }
            for call in tool_calls {
                let output = self
                    .run_flush_tool(&flush_tools, &call, state, &session_key, context)
                    .await;
                if call.name == write_name && !output.is_error {
                    appended += call.input["content"]
                        .as_str()
                        .map_or(0, |content| content.len() as u64);
                }
                conversation.push(Message::ToolResult {
                    tool_call_id: call.id,
                    tool_name: call.name,
                    text: output.text,
                    is_error: output.is_error,
                });
            }
        }
        tracing::info!(session = %state.key, %path, appended, "memory flush ran");
        engine.record_memory_flush(state, path, appended, error, self.deps.clock.now_ms());
    }

    /// Carries out `plan` (from [`plan_compaction`]): asks for a summary (in stages if
    /// needed, with the quality check), and records it. Nothing is recorded when no usable
    /// summary comes back.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn compact(
        &self, engine: &TurnEngine, state: &mut SessionState, plan: CompactionPlan,
        budget: &ContextBudget, fixed: u64, trigger: CompactionTrigger, focus: Option<&str>,
        calls: &mut u32,
    ) -> Result<(u64, u64), String> {
        let focus = focus.or(self
            .config()
            .agents
            .defaults
            .compaction
            .custom_instructions
            .as_deref());
        let model = self.model(state);
        let summary = match self
            .summarize(model.as_ref(), &plan, budget, focus, calls)
            .await
        {
            Ok(summary) => summary,
            Err(reason) => return Err(reason),
        };
        let before = fixed + plan.tokens_before;
        let after = fixed + summary_tokens(&summary) + plan.tokens_kept;
        engine.record_compaction(
            state,
            summary,
            plan.first_kept_seq,
            before,
            after,
            trigger,
            self.deps.clock.now_ms(),
        );
        tracing::info!(session = %state.key, ?trigger, before, after, count = state.meta.compaction_count, "compacted");
        Ok((before, after))
    }

    async fn summarize(
        &self, model: &dyn ModelProvider, plan: &CompactionPlan, budget: &ContextBudget,
        focus: Option<&str>, calls: &mut u32,
    ) -> Result<String, String> {
        let previous_tokens = plan.previous_summary.as_deref().map_or(0, summary_tokens);
        let mut summary = plan.previous_summary.clone();
        for stage in summary_stages(&plan.to_summarize, budget, previous_tokens) {
            let latest_ask = stage.iter().rev().find_map(|message| match message {
                Message::User { text } => Some(text.as_str()),
                _ => None,
            });
            let mut feedback: Option<String> = None;
            let mut best: Option<String> = None;
            for _ in 0..=budget.quality_retries {
                let request = summary_request(
                    &stage,
                    summary.as_deref(),
                    focus,
                    feedback.as_deref(),
                    budget,
                );
                *calls += 1;
                let response = model
                    .complete(&request)
                    .await
                    .map_err(|err| format!("the summary call failed: {err}"))?;
                let text = assistant_text(&response.content);
                match check_summary(&text, latest_ask) {
                    SummaryVerdict::Good => {
                        best = Some(text);
                        break;
                    }
                    SummaryVerdict::Weak(reasons) => {
                        tracing::info!(?reasons, "summary quality check asks for a better one");
                        feedback = Some(reasons.join("; "));
                        best = Some(text);
                    }
                    SummaryVerdict::Unusable(reason) => {
                        tracing::warn!(%reason, "unusable summary");
                        feedback = Some(reason);
                    }
                }
            }
            summary = Some(best.ok_or_else(|| "no usable summary came back".to_owned())?);
        }
        summary
            .map(|summary| stored_summary(&summary))
            .ok_or_else(|| "nothing to summarize".to_owned())
    }

    /// `/compact`: compacts now and words the outcome for the chat. A redelivered command
    /// whose compaction was already recorded reports that one instead of compacting again.
    pub(super) async fn compact_command(
        &self, engine: &TurnEngine, state: &mut SessionState, context: &TurnContext,
        instructions: Option<&str>, calls: &mut u32,
    ) -> String {
        let budget = self.budget(state);
        let fixed = context.fixed_tokens;
        let recorded = state
            .current_turn_steps()
            .iter()
            .find_map(|step| match step.body {
                StepBody::Compaction {
                    tokens_before,
                    tokens_after,
                    ..
                } => Some((tokens_before, tokens_after)),
                _ => None,
            });
        // `/compact` is a checkpoint: everything before the command is summarised.
        let checkpoint = ContextBudget {
            keep_recent: 0,
            ..budget
        };
        let outcome = match (recorded, plan_compaction(state, &checkpoint)) {
            (Some(recorded), _) => Some(Ok(recorded)),
            (None, Some(plan)) => Some(
                self.compact(
                    engine,
                    state,
                    plan,
                    &checkpoint,
                    fixed,
                    CompactionTrigger::Manual,
                    instructions,
                    calls,
                )
                .await,
            ),
            (None, None) => None,
        };
        match outcome {
            Some(Ok((before, after))) => format!(
                "⚙️ Compacted ({} → {}) • {}",
                format_token_count(Some(before)),
                format_token_count(Some(after)),
                format_context_usage_short(Some(after), Some(budget.window))
            ),
            failed => {
                let used = fixed + messages_tokens(&state.messages());
                let usage = format_context_usage_short(Some(used), Some(budget.window));
                match failed {
                    Some(Err(reason)) => format!("⚙️ Compaction failed: {reason} • {usage}"),
                    _ => format!(
                        "⚙️ Compaction skipped: nothing compactable in this session yet • {usage}"
                    ),
                }
            }
        }
    }
}

/// Estimated tokens of the last turn of `messages` (from its last user message on).
fn last_turn_tokens(messages: &[Message]) -> u64 {
    let start = messages
        .iter()
        .rposition(|message| matches!(message, Message::User { .. }))
        .unwrap_or(0);
    messages_tokens(&messages[start..])
}

/// `messages` without the turn in progress: everything before its last user message (the
/// pending chat message), so the conversation ends with an answered turn. Unchanged when
/// that would leave nothing.
fn before_pending_turn(messages: &[Message]) -> &[Message] {
    match messages
        .iter()
        .rposition(|message| matches!(message, Message::User { .. }))
    {
        Some(0) | None => messages,
        Some(pending) => &messages[..pending],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_attempts_count_per_turn() {
        let mut attempts = OverflowAttempts::default();
        assert_eq!(attempts.next(1), 1);
        assert_eq!(attempts.next(1), 2);
        assert_eq!(attempts.next(2), 1, "a new turn starts over");
    }
}
