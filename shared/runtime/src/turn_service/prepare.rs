//! Turning a queued event into engine input: slash commands (the session's own `/new`,
//! `/reset`, `/compact`, `/status` and the sub-agent commands, then `/approve` and skill
//! commands), daily and idle resets found when a message arrives, node results and approval
//! timeouts.
//! What a command means is decided by core functions (`clawless_core::session::reset`,
//! `clawless_core::turn::prepare`); this module reads what they need (memory notes for a
//! bare reset's startup context, skill command specs) and builds the engine's event.

use clawless_base::session_key::ChatType;
use clawless_core::nodes::notices::exec_denied_text;
use clawless_core::session::reset::{
    self as resets, bare_reset_prompt, is_stale, match_reset_trigger, parse_compact_command,
    reset_type, resolve_policy, split_reset_model, startup_context, startup_note_dates,
    startup_note_path, strip_leading_mentions,
};
use clawless_core::tools::ToolOutput;
use clawless_core::turn::Incoming;
use clawless_core::turn::events::{ApprovalDecision, InboundMessage, TurnEvent};
use clawless_core::turn::model_command::{ModelChoices, ModelCommand, parse_model_command};
use clawless_core::turn::prepare::{
    ChatInput, approval_timeout_outcome, needs_skill_commands, prepare_chat_message,
};
use clawless_core::turn::state::{
    CommandDispatch, CompactRequest, PreparedMessage, ResetReason, ResetRequest, SessionState,
};
use clawless_exec::Security;
use clawless_skills::commands::normalize_command_body;

use super::{NodeScope, TurnError, TurnService};

/// Bytes read of one daily memory note for a bare reset's startup context.
const STARTUP_NOTE_READ_BYTES: u64 = 16 * 1024;

/// Days of memory notes a bare reset loads (today and yesterday).
const STARTUP_NOTE_DAYS: usize = 2;

impl TurnService {
    /// Turns a queued event into an engine event, resolving slash commands (spec §5).
    /// `None` when the event needs nothing here: an `/approve` from someone not the owner, or
    /// a continuation or heartbeat (handled before this).
    pub(super) async fn prepare(
        &self, agent_id: &str, event: &TurnEvent, state: &SessionState, scope: &NodeScope,
    ) -> Result<Option<Incoming>, TurnError> {
        Ok(Some(match event {
            TurnEvent::Inbound(message) => {
                return self.prepare_inbound(agent_id, message, state, scope).await;
            }
            TurnEvent::ToolResult {
                call_id,
                text,
                is_error,
                notice,
            } => Incoming::ToolResult {
                call_id: call_id.clone(),
                output: ToolOutput {
                    text: text.clone(),
                    is_error: *is_error,
                },
                notice: notice.clone(),
            },
            TurnEvent::ToolTimeout { call_id, attempt } => {
                // While a person is asked, the approval timeout governs, not the job's deadline.
                // Otherwise, of a node's result and the deadline, the first recorded wins.
                if let (Some(nodes), Some(pending)) =
                    (&self.deps.nodes, state.latest_pending(call_id))
                    && (pending.awaiting_approval
                        || !nodes.claim_timeout(pending.job_id, *attempt).await?)
                {
                    return Ok(None);
                }
                Incoming::ToolTimeout {
                    call_id: call_id.clone(),
                }
            }
            TurnEvent::Approval { call_id, decision } => Incoming::Approval {
                call_id: call_id.clone(),
                decision: *decision,
                notice: None,
            },
            TurnEvent::ApprovalNeeded { call_id, text } => {
                // A cron run has nobody to ask.
                match self.headless_approval(state, call_id) {
                    Some(denied) => denied,
                    None => Incoming::ApprovalNeeded {
                        call_id: call_id.clone(),
                        text: text.clone(),
                    },
                }
            }
            TurnEvent::ApprovalTimeout { call_id } => {
                // Nobody answered: askFallback decides (spec §7.8).
                let fallback = self
                    .deps
                    .nodes
                    .as_ref()
                    .map_or(Security::Deny, |nodes| nodes.settings().ask_fallback);
                let (decision, reason) = approval_timeout_outcome(fallback);
                let notice = match reason {
                    Some(reason) => self.denied_notice(state, call_id, reason).await?,
                    None => None,
                };
                Incoming::Approval {
                    call_id: call_id.clone(),
                    decision,
                    notice,
                }
            }
            // Handled before `prepare`: a continuation records nothing, a heartbeat goes
            // through its gates (`heartbeat.rs`), a cron firing through its job (`cron.rs`).
            TurnEvent::Continue { .. }
            | TurnEvent::Heartbeat { .. }
            | TurnEvent::CronFire { .. }
            | TurnEvent::SystemEvent { .. }
            | TurnEvent::SubagentStart(_)
            | TurnEvent::SubagentAnnounce { .. }
            | TurnEvent::SubagentTimeout { .. }
            | TurnEvent::SubagentArchive { .. }
            | TurnEvent::AgentMessage(_)
            | TurnEvent::Stop(_)
            | TurnEvent::CronTimeout(_) => return Ok(None),
        }))
    }

    /// A chat message: a session command, an approval in words, or a message (with the
    /// automatic reset it may bring). Skill commands are resolved when the text asks for one.
    async fn prepare_inbound(
        &self, agent_id: &str, message: &InboundMessage, state: &SessionState, scope: &NodeScope,
    ) -> Result<Option<Incoming>, TurnError> {
        // Attachments first: a voice note's transcript may be a command.
        let understood = self.understand_media(message, state).await;
        let spoken_command = InboundMessage {
            text: understood.command_text.clone(),
            ..understood.message.clone()
        };
        let message = if spoken_command.text.trim_start().starts_with('/') {
            &spoken_command
        } else {
            &understood.message
        };
        if let Some(command) = self
            .session_command(agent_id, message, state, scope)
            .await?
        {
            return Ok(command);
        }
        let specs = if needs_skill_commands(message) {
            Some(
                self.deps
                    .skills
                    .commands(agent_id, &scope.eligibility)
                    .await?,
            )
        } else {
            None
        };
        // Discord had to rename some skill commands; map its name back.
        let discord_renamed = match &specs {
            Some(specs) if message.chat.channel == clawless_channels::discord::CHANNEL_ID => {
                clawless_channels::discord::skill_command_text(&message.text, specs).map(|text| {
                    InboundMessage {
                        text,
                        ..message.clone()
                    }
                })
            }
            _ => None,
        };
        let message = discord_renamed.as_ref().unwrap_or(message);
        Ok(Some(
            match prepare_chat_message(message, specs.as_deref()) {
                ChatInput::IgnoredApproval => {
                    tracing::warn!(sender = %message.sender_id, "approval from a non-owner ignored");
                    return Ok(None);
                }
                ChatInput::Approval { id, decision } => {
                    // The id is the short code or full job id shown in the chat (or a call id).
                    let call_id = state.call_awaiting_approval(&id).unwrap_or(id);
                    let notice = match decision {
                        ApprovalDecision::Deny => {
                            self.denied_notice(state, &call_id, "user-denied").await?
                        }
                        _ => None,
                    };
                    Incoming::Approval {
                        call_id,
                        decision,
                        notice,
                    }
                }
                ChatInput::Message(mut prepared) => {
                    prepared.reset = self.automatic_reset(state, message);
                    prepared.images = understood.images;
                    prepared.media_summary = understood.summary;
                    // `/think` and `/reasoning` count from those who may use commands
                    // (anyone in a direct chat, the owner in a group); others' are text.
                    let authorised =
                        message.chat.chat_type == ChatType::Direct || message.sender_is_owner;
                    if prepared.dispatch.is_none() && prepared.compact.is_none() {
                        self.apply_directives(state, &mut prepared, authorised);
                    }
                    Incoming::Message(prepared)
                }
            },
        ))
    }

    /// `Exec denied (node=… id=…, <reason>): <command>` for a call awaiting approval.
    async fn denied_notice(
        &self, state: &SessionState, call_id: &str, reason: &str,
    ) -> Result<Option<String>, TurnError> {
        let (Some(nodes), Some(pending)) = (&self.deps.nodes, state.latest_pending(call_id)) else {
            return Ok(None);
        };
        if !pending.awaiting_approval {
            return Ok(None);
        }
        Ok(nodes.job(pending.job_id).await?.map(|(record, job)| {
            exec_denied_text(&record.node_id, &record.job_id, reason, &job.raw_command)
        }))
    }

    /// `/new`, `/reset`, `/compact`, `/status` and the sub-agent commands (`/subagents …`,
    /// `/kill`, `/steer`) from a sender allowed to use them (anyone
    /// in a direct chat, since ingress admits only authorised senders; the owner in groups).
    /// `Some(None)` for such a command from anyone else: ignored, without a reply.
    async fn session_command(
        &self, agent_id: &str, message: &InboundMessage, state: &SessionState, scope: &NodeScope,
    ) -> Result<Option<Option<Incoming>>, TurnError> {
        let group = message.chat.chat_type != ChatType::Direct;
        let normalized = normalize_command_body(&message.text, None);
        let body = if group {
            strip_leading_mentions(&normalized).trim()
        } else {
            normalized.trim()
        };
        if !body.starts_with('/') {
            return Ok(None);
        }
        let allowed = !group || message.sender_is_owner;
        let triggers = self.config().session.resets.triggers();
        let command = if let Some(rest) = match_reset_trigger(body, &triggers) {
            let reason = if body.to_ascii_lowercase().starts_with("/new") {
                ResetReason::New
            } else {
                ResetReason::Reset
            };
            if !allowed {
                return Ok(Some(None));
            }
            // `/new <model>` takes what `/model` may switch to, an alias too.
            let choices = self.model_choices();
            let rest = expand_model_alias(&rest, &choices);
            let models: Vec<&str> = choices.allowed.iter().map(String::as_str).collect();
            let mut providers: Vec<&str> = models
                .iter()
                .filter_map(|model| model.split_once('/').map(|(provider, _)| provider))
                .collect();
            providers.dedup();
            // Only models this deployment can build may be chosen.
            let (model, rest) = if self.model_factory.is_some() {
                split_reset_model(&rest, &models, &providers)
            } else {
                (None, rest)
            };
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.text = if rest.trim().is_empty() {
                self.greeting_prompt(agent_id, state).await
            } else {
                rest
            };
            prepared.reset = Some(ResetRequest { reason, model });
            prepared
        } else if let Some(instructions) = parse_compact_command(body) {
            if !allowed {
                return Ok(Some(None));
            }
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.compact = Some(CompactRequest { instructions });
            prepared.reset = self.automatic_reset(state, message);
            prepared
        } else if body.eq_ignore_ascii_case("/status") {
            if !allowed {
                return Ok(Some(None));
            }
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.dispatch = Some(CommandDispatch {
                tool_name: "session_status".to_owned(),
                params: serde_json::json!({}),
            });
            prepared
        } else if let Some(command) = self.model_command(agent_id, body, scope).await? {
            if !allowed {
                return Ok(Some(None));
            }
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.dispatch = Some(CommandDispatch {
                tool_name: super::tools::model::MODEL_COMMAND.to_owned(),
                params: command.to_params(),
            });
            prepared
        } else if let Some(mode) = parse_context_command(body) {
            if !allowed {
                return Ok(Some(None));
            }
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.dispatch = Some(CommandDispatch {
                tool_name: super::tools::context::CONTEXT_COMMAND.to_owned(),
                params: serde_json::json!({"mode": mode}),
            });
            prepared
        } else if let Some(level) = parse_elevated_command(body) {
            // Owners only, wherever they write: it decides whether commands leave the jail.
            if !message.sender_is_owner {
                return Ok(Some(None));
            }
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.dispatch = Some(CommandDispatch {
                tool_name: super::tools::elevated::ELEVATED_COMMAND.to_owned(),
                params: serde_json::json!({"level": level}),
            });
            prepared
        } else if let Some(params) =
            clawless_core::subagents::control::parse_subagents_command(body)
        {
            if !allowed {
                return Ok(Some(None));
            }
            let mut prepared = PreparedMessage::plain(message.clone());
            prepared.dispatch = Some(CommandDispatch {
                tool_name: clawless_core::subagents::control::SUBAGENTS_TOOL_NAME.to_owned(),
                params,
            });
            prepared
        } else {
            return Ok(None);
        };
        Ok(Some(Some(Incoming::Message(Box::new(command)))))
    }

    /// A daily or idle reset due for this message under `session.reset*` (evaluated now, when
    /// the message arrives: nothing runs at the reset hour itself).
    fn automatic_reset(
        &self, state: &SessionState, message: &InboundMessage,
    ) -> Option<ResetRequest> {
        if state.version == 0 {
            return None;
        }
        let config = &self.config().session.resets;
        let kind = reset_type(
            state.key.as_str(),
            false,
            message.chat.chat_type == ChatType::Direct,
        );
        let policy = resolve_policy(config, kind, &message.chat.channel);
        if policy.mode == resets::ResetMode::None {
            // The default: nothing to evaluate, and no time zone to look up.
            return None;
        }
        let tz = self.time_zone();
        let reason = is_stale(
            &policy,
            state.meta.generation_started(),
            Some(state.meta.last_interaction_at_ms).filter(|at| *at > 0),
            self.deps.clock.now_ms(),
            &tz,
        )?;
        Some(ResetRequest {
            reason: match reason {
                resets::ResetReason::Daily => ResetReason::Daily,
                resets::ResetReason::Idle => ResetReason::Idle,
            },
            model: None,
        })
    }

    pub(super) fn time_zone(&self) -> clawless_base::time::TimeZone {
        clawless_base::time::time_zone_or_utc(
            self.config().agents.defaults.user_timezone.as_deref(),
        )
    }

    /// The prompt of a bare `/new` or `/reset`: the last days' memory notes as startup
    /// context, then the greeting request with the current time.
    async fn greeting_prompt(&self, agent_id: &str, state: &SessionState) -> String {
        let now = self.deps.clock.now_ms();
        let tz = self.time_zone();
        let mut notes = Vec::new();
        // Memory reaches only a session that is not sandboxed, whose files are the agent's.
        let sandboxed = self.sandbox_of(agent_id, state).is_some();
        let workspace = self
            .memory_reaches(state, sandboxed)
            .then(|| self.workspace(agent_id));
        if let Some(Ok(workspace)) = workspace {
            for date in startup_note_dates(now, &tz, STARTUP_NOTE_DAYS) {
                let path = startup_note_path(&date);
                let key = format!("{}{path}", workspace.prefix);
                match workspace.store.get(&key, STARTUP_NOTE_READ_BYTES).await {
                    Ok(Some(object)) => {
                        notes.push((path, String::from_utf8_lossy(&object.bytes).into_owned()));
                    }
                    Ok(None) => {}
                    Err(err) => tracing::warn!(%path, error = %err, "startup note unreadable"),
                }
            }
        }
        let prompt = bare_reset_prompt(&clawless_base::time::current_time_line(now, &tz));
        match startup_context(&notes) {
            Some(context) => format!("{context}\n\n{prompt}"),
            None => prompt,
        }
    }
}

impl TurnService {
    /// `/model …`, `/models …`, or `/<alias>` when no skill command has that name.
    async fn model_command(
        &self, agent_id: &str, body: &str, scope: &NodeScope,
    ) -> Result<Option<ModelCommand>, TurnError> {
        let choices = self.model_choices();
        let Some(command) = parse_model_command(body, &choices) else {
            return Ok(None);
        };
        let word = body.split_whitespace().next().unwrap_or_default();
        let by_alias = !word.eq_ignore_ascii_case("/model")
            && !word.eq_ignore_ascii_case("/models")
            && !word.to_ascii_lowercase().starts_with("/model:");
        if by_alias {
            // A skill's own command keeps its name.
            let name = word.trim_start_matches('/');
            let skills = self
                .deps
                .skills
                .commands(agent_id, &scope.eligibility)
                .await?;
            if skills
                .iter()
                .any(|skill| skill.name.eq_ignore_ascii_case(name))
            {
                return Ok(None);
            }
        }
        Ok(Some(command))
    }
}

/// `rest` of a `/new` with a leading alias replaced by the model it names.
fn expand_model_alias(rest: &str, choices: &ModelChoices) -> String {
    let trimmed = rest.trim_start();
    let word = trimmed.split_whitespace().next().unwrap_or_default();
    match choices.model_of_alias(word) {
        Some(model) if !word.is_empty() => format!("{model}{}", &trimmed[word.len()..]),
        _ => rest.to_owned(),
    }
}

/// `/context [list|detail]`: the mode asked for (`list` when bare).
fn parse_context_command(body: &str) -> Option<&'static str> {
    let mut words = body.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("/context") {
        return None;
    }
    match words.next().map(str::to_ascii_lowercase).as_deref() {
        None | Some("list") => Some("list"),
        Some("detail") => Some("detail"),
        Some(_) => None,
    }
}

/// `/elevated [level]` (or `/elev`): the level asked for, empty for a bare command.
fn parse_elevated_command(body: &str) -> Option<String> {
    let mut words = body.split_whitespace();
    let command = words.next()?.to_ascii_lowercase();
    if command != "/elevated" && command != "/elev" {
        return None;
    }
    Some(words.next().unwrap_or_default().to_owned())
}
