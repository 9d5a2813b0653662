//! What reaches the turn engine: the events on the turn queue, and the messages they carry.

use std::hash::Hasher;

use serde::{Deserialize, Serialize};

pub use clawless_base::session_key::ChatRef;

use fnv::FnvHasher;

/// A normalised chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InboundMessage {
    /// The platform's message id, unique per channel.
    pub message_id: String,
    /// The conversation.
    pub chat: ChatRef,
    /// Who wrote it.
    pub sender_id: String,
    /// The text, as received.
    pub text: String,
    /// True when the sender is the agent's owner (owner-only tools need this).
    #[serde(default)]
    pub sender_is_owner: bool,
    /// Its attachments (photos, voice notes, files), stored in the blob store by ingress.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<clawless_base::media::Attachment>,
}

/// A person's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalDecision {
    /// Run this call once.
    AllowOnce,
    /// Run it, and remember the pattern.
    AllowAlways,
    /// Do not run it.
    Deny,
}

/// An event for one session, as carried by the turn queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum TurnEvent {
    /// A chat message arrived.
    Inbound(InboundMessage),
    /// An owner asked to stop the session's running turn (`/stop`, `stop`, `abort`). Queued in
    /// a group of its own ([`SessionEvent::queue_group`]), so it is handled while the turn it
    /// stops still runs.
    Stop(InboundMessage),
    /// A tool that ran elsewhere (a node host) finished.
    #[serde(rename_all = "camelCase")]
    ToolResult {
        /// The tool call it answers.
        call_id: String,
        /// Output text.
        text: String,
        /// True when the tool failed.
        #[serde(default)]
        is_error: bool,
        /// A note for the chat about the result (`Exec finished …` after an approval).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        notice: Option<String>,
    },
    /// A tool that ran elsewhere produced no result by its deadline.
    #[serde(rename_all = "camelCase")]
    ToolTimeout {
        /// The tool call that timed out.
        call_id: String,
        /// The job attempt the deadline belongs to (a later attempt has its own deadline).
        #[serde(default)]
        attempt: u32,
    },
    /// A node host (or the backend's pre-check) says a call needs a person's approval.
    #[serde(rename_all = "camelCase")]
    ApprovalNeeded {
        /// The pending call.
        call_id: String,
        /// The approval request shown in the chat (spec §7.8).
        text: String,
    },
    /// Nobody answered an approval request in time.
    #[serde(rename_all = "camelCase")]
    ApprovalTimeout {
        /// The call still awaiting approval.
        call_id: String,
    },
    /// A person answered an approval request.
    #[serde(rename_all = "camelCase")]
    Approval {
        /// The tool call awaiting approval.
        call_id: String,
        /// The answer.
        decision: ApprovalDecision,
    },
    /// A heartbeat firing (spec `openclaw-automation.md` §1) for the session's agent
    /// (`SessionEvent::agent_id`): the gates and the prompt are worked out when it is handled,
    /// from the config and `HEARTBEAT.md` of that moment. An event of the older shape (with a
    /// `prompt`) still parses: without a slot it is a wake outside the schedule.
    #[serde(rename_all = "camelCase")]
    Heartbeat {
        /// Unique id of this firing (`<agent>:<slot>`, plus `:retry<n>` for a busy retry):
        /// the turn queue's deduplication id.
        heartbeat_id: String,
        /// The slot of the agent's phase grid it fires for (epoch ms); each slot is handled
        /// once. Unset: a wake outside the schedule.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot_ms: Option<u64>,
        /// Why it fires, as OpenClaw spells it (`interval`, `retry`, `manual`, `cron:<id>`, …).
        #[serde(default = "requested_reason")]
        reason: String,
        /// How many times this slot was already retried because the session was busy.
        #[serde(default, skip_serializing_if = "is_zero")]
        attempt: u32,
    },
    /// A cron job's firing (spec `openclaw-automation.md` §2): for its scheduled slot, or a
    /// manual run. It goes to the FIFO group of the session the job runs in; the job is read
    /// when it is handled, and the firing starts a run only if it reserves its slot in the
    /// cron store, so a redelivery or a stale timer does nothing.
    #[serde(rename_all = "camelCase")]
    CronFire {
        /// The job.
        job_id: String,
        /// The scheduled slot (the job's `nextRunAtMs` it fires for), epoch ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot_ms: Option<u64>,
        /// For a manual run (`cron run`): when it was requested, epoch ms.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        manual_ms: Option<u64>,
        /// `cron run`'s mode `due`: run only if the job is due when handled.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        only_if_due: bool,
    },
    /// A cron run's time limit (`timeoutSeconds`; 60 minutes for an agent turn, 10 for a
    /// system event) came: if that run is still going in the session, its turn is closed
    /// without another step and the run fails with `cron: job execution timed out`; a run
    /// the session never recorded is failed on the job. Nothing happens if it had ended.
    CronTimeout(Box<clawless_automation::cron::run::CronRunMark>),
    /// A system event for the session (`cron` `wake`, `clawless cron wake`): queued as a
    /// pending event that the next heartbeat (or turn) sees; with `wake`, a heartbeat runs
    /// at once with reason `wake`.
    #[serde(rename_all = "camelCase")]
    SystemEvent {
        /// Unique id of the request: the turn queue's deduplication id.
        event_id: String,
        /// The event text.
        text: String,
        /// Run a heartbeat now rather than waiting for the next one.
        #[serde(default)]
        wake: bool,
    },
    /// A sub-agent's run (spec `openclaw-automation.md` §3), queued by the parent's
    /// `sessions_spawn` to the child's own session: children run in parallel with their
    /// parent, each in its FIFO group. The parent worked out everything the child sees.
    SubagentStart(Box<SubagentStart>),
    /// A child's completion for the session that spawned it: a turn carrying the announce
    /// message, taken once (its id is the message id).
    #[serde(rename_all = "camelCase")]
    SubagentAnnounce {
        /// `announce:v1:<childSessionKey>:<runId>`: the queue's and the session's dedup id.
        announce_id: String,
        /// The child's session.
        child_key: String,
        /// The child's run.
        run_id: String,
        /// How the run ended (`ok`, `error`, `timeout`, `killed`).
        status: String,
        /// The announce message (the internal completion event block).
        text: String,
        /// The child's result was silent (`ANNOUNCE_SKIP`, `NO_REPLY`): record it, run nothing.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        silent: bool,
    },
    /// A sub-agent's run reached its `runTimeoutSeconds`: it stops at its next step and is
    /// announced as timed out (nothing happens if it had ended).
    #[serde(rename_all = "camelCase")]
    SubagentTimeout {
        /// The run.
        run_id: String,
    },
    /// A finished sub-agent's `archiveAfterMinutes` passed: it is marked archived (its
    /// transcript stays).
    #[serde(rename_all = "camelCase")]
    SubagentArchive {
        /// The run.
        run_id: String,
    },
    /// One step of an agent-to-agent exchange (`sessions_send`, spec
    /// `openclaw-automation.md` §3.8) for the session that takes it: the request, a
    /// ping-pong reply step or the closing announce step. Each is a turn of its own, queued
    /// when the step before it ended; nobody waits for anybody.
    AgentMessage(Box<AgentMessage>),
    /// The turn function stopped before its deadline with work left, everything persisted;
    /// this picks the session up where the transcript says it stopped. Nothing new is
    /// recorded for it.
    #[serde(rename_all = "camelCase")]
    Continue {
        /// Unique per stop (the session version it stopped at), so a redelivered stop
        /// enqueues its continuation once.
        continuation_id: String,
    },
}

fn requested_reason() -> String {
    "requested".to_owned()
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

/// What a sub-agent's session is started with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStart {
    /// The run (unique per spawn; the same for a redelivered spawn).
    pub run_id: String,
    /// The session that spawned it, where its result is announced.
    pub parent_key: String,
    /// The task, as given.
    pub task: String,
    /// The label given to the spawn, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The child's spawn depth (1 for a child of a top-level session).
    pub depth: u32,
    /// `maxSpawnDepth` when it was spawned.
    pub max_depth: u32,
    /// The child's first user message (`[Subagent Context] …`, `[Subagent Task]: …`).
    pub first_message: String,
    /// The `## Subagent Context` part of its system prompt.
    pub extra_system_prompt: String,
    /// The model it runs on, when not the parent's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The thinking level it runs at (the spawn's `thinking`, the configured one, or the
    /// parent's own); unset: its agent's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<clawless_base::thinking::ThinkingLevel>,
    /// No workspace files in its prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub light_context: bool,
    /// Its run's time limit (ms), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Whether the parent is itself a sub-agent or a cron session (its announce is then an
    /// internal update, not a message for the user).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parent_is_internal: bool,
    /// `cleanup: "delete"`: the child is archived as soon as its result is announced (its
    /// transcript stays, never deleted: clawless loses nothing).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archive_when_announced: bool,
    /// Whether the parent is untrusted (a non-owner has started a turn in it): the child is
    /// too, so it runs sandboxed wherever its parent does.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parent_untrusted: bool,
    /// The session whose sandbox workspace the child shares (its root parent's), so a
    /// sandboxed child works on its parent's files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_key: Option<String>,
    /// The group whose tool policy the parent follows: the child follows it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_scope: Option<GroupScope>,
}

/// A group chat and the member whose message the turn answers: what the group step of the
/// tool policy is looked up by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupScope {
    /// The channel, e.g. `telegram`.
    pub channel: String,
    /// The group's chat id on that channel.
    pub group_id: String,
    /// The member, by platform id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_id: Option<String>,
}

/// One step of an agent-to-agent exchange, for the session that takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentMessage {
    /// `a2a:<exchange>:<step>`: the queue's and the session's dedup id.
    pub message_id: String,
    /// The exchange it belongs to, as far as it has come.
    pub exchange: A2aExchange,
    /// Which step this is.
    pub step: A2aStep,
    /// What the session's turn is given as its message.
    pub text: String,
}

/// An agent-to-agent exchange started by `sessions_send`, carried from step to step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct A2aExchange {
    /// Unique per `sessions_send` call (the same for a redone call).
    pub exchange_id: String,
    /// The session that sent (Agent 1).
    pub requester_key: String,
    /// Its agent.
    pub requester_agent_id: String,
    /// Its channel, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester_channel: Option<String>,
    /// The session sent to (Agent 2).
    pub target_key: String,
    /// Its agent.
    pub target_agent_id: String,
    /// Its channel, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_channel: Option<String>,
    /// The message sent.
    pub original: String,
    /// The target's answer to it, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_one_reply: Option<String>,
    /// The latest reply of the exchange, once known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_reply: Option<String>,
    /// `session.agentToAgent.maxPingPongTurns` when it was sent (0 for a session sending
    /// to itself).
    pub max_turns: u32,
    /// The requester's tool call waiting for the target's answer (`timeoutSeconds` > 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_call_id: Option<String>,
    /// `timeoutSeconds` as given.
    pub timeout_seconds: u64,
}

impl A2aExchange {
    /// The id of its step `step`.
    pub fn step_id(&self, step: &A2aStep) -> String {
        let name = match step {
            A2aStep::Request => "request".to_owned(),
            A2aStep::Reply { turn } => format!("reply{turn}"),
            A2aStep::Announce => "announce".to_owned(),
        };
        format!("a2a:{}:{name}", self.exchange_id)
    }
}

/// A step of an agent-to-agent exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum A2aStep {
    /// The target answers the message sent.
    Request,
    /// Ping-pong turn `turn` (from 1; odd turns are the requester's).
    Reply {
        /// The turn.
        turn: u32,
    },
    /// The target decides whether to post to its own chat.
    Announce,
}

/// A queued event with the session it belongs to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEvent {
    /// The session key (also the queue's ordering group).
    pub session_key: String,
    /// The agent answering.
    pub agent_id: String,
    /// What happened.
    pub event: TurnEvent,
}

/// What a stop request's queue group adds to the session key.
pub const STOP_GROUP_SUFFIX: &str = ":stop";

impl SessionEvent {
    /// The turn queue's ordering group: the session key, except for a stop request, which
    /// must not wait behind the turn it stops.
    pub fn queue_group(&self) -> String {
        match self.event {
            TurnEvent::Stop(_) => format!("{}{STOP_GROUP_SUFFIX}", self.session_key),
            _ => self.session_key.clone(),
        }
    }

    /// Deduplication id for the queue: stable for redeliveries of the same event.
    pub fn dedup_id(&self) -> String {
        let raw = match &self.event {
            TurnEvent::Inbound(message) => {
                format!("in:{}:{}", message.chat.channel, message.message_id)
            }
            TurnEvent::Stop(message) => {
                format!("stop:{}:{}", message.chat.channel, message.message_id)
            }
            TurnEvent::ToolResult { call_id, .. } => format!("result:{call_id}"),
            TurnEvent::ToolTimeout { call_id, attempt } => format!("timeout:{call_id}:{attempt}"),
            TurnEvent::ApprovalNeeded { call_id, .. } => format!("ask:{call_id}"),
            TurnEvent::ApprovalTimeout { call_id } => format!("ask-timeout:{call_id}"),
            TurnEvent::Approval { call_id, .. } => format!("approval:{call_id}"),
            TurnEvent::Heartbeat { heartbeat_id, .. } => format!("heartbeat:{heartbeat_id}"),
            TurnEvent::Continue { continuation_id } => format!("continue:{continuation_id}"),
            TurnEvent::SystemEvent { event_id, .. } => format!("system:{event_id}"),
            TurnEvent::SubagentStart(start) => format!("subagent:{}", start.run_id),
            TurnEvent::SubagentAnnounce { announce_id, .. } => announce_id.clone(),
            TurnEvent::SubagentTimeout { run_id } => format!("subagent-timeout:{run_id}"),
            TurnEvent::SubagentArchive { run_id } => format!("subagent-archive:{run_id}"),
            TurnEvent::AgentMessage(message) => message.message_id.clone(),
            TurnEvent::CronTimeout(mark) => {
                format!("cron-timeout:{}:{}", mark.job_id, mark.started_at_ms)
            }
            TurnEvent::CronFire {
                job_id,
                slot_ms,
                manual_ms,
                ..
            } => match (slot_ms, manual_ms) {
                (_, Some(manual)) => format!("cron:{job_id}:manual:{manual}"),
                (Some(slot), None) => format!("cron:{job_id}:{slot}"),
                (None, None) => format!("cron:{job_id}"),
            },
        };
        dedup_token(&format!("{}|{raw}", self.session_key))
    }
}

/// An SQS-safe deduplication token (≤ 128 chars of `[A-Za-z0-9_-]`) derived from `raw`.
/// Short, safe inputs are kept readable; anything else is hashed.
pub fn dedup_token(raw: &str) -> String {
    let safe = raw.len() <= 100
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if safe {
        raw.to_owned()
    } else {
        let mut first = FnvHasher::default();
        first.write(raw.as_bytes());
        let mut second = FnvHasher::default();
        second.write(b"clawless-dedup");
        second.write(raw.as_bytes());
        let prefix: String = raw
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .take(60)
            .collect();
        format!("{prefix}-{:016x}{:016x}", first.finish(), second.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn continuation(id: &str) -> SessionEvent {
        SessionEvent {
            session_key: "agent:main:main".to_owned(),
            agent_id: "main".to_owned(),
            event: TurnEvent::Continue {
                continuation_id: id.to_owned(),
            },
        }
    }

    #[test]
    fn a_continuation_travels_as_a_kind_with_its_id() {
        let json = serde_json::to_value(continuation("v7")).unwrap();
        assert_eq!(
            json["event"],
            serde_json::json!({"kind": "continue", "continuationId": "v7"})
        );
        let back: SessionEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, continuation("v7"));
    }

    #[test]
    fn a_heartbeat_carries_its_slot_and_reason_and_the_old_shape_still_parses() {
        let event = TurnEvent::Heartbeat {
            heartbeat_id: "main:1000".into(),
            slot_ms: Some(1_000),
            reason: "interval".into(),
            attempt: 0,
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"kind": "heartbeat", "heartbeatId": "main:1000", "slotMs": 1000, "reason": "interval"})
        );
        let old: TurnEvent = serde_json::from_value(
            serde_json::json!({"kind": "heartbeat", "heartbeatId": "h-1", "prompt": "Read HEARTBEAT.md"}),
        )
        .unwrap();
        assert_eq!(
            old,
            TurnEvent::Heartbeat {
                heartbeat_id: "h-1".into(),
                slot_ms: None,
                reason: "requested".into(),
                attempt: 0,
            }
        );
    }

    #[test]
    fn each_stop_gets_its_own_dedup_id_and_a_repeated_stop_the_same() {
        assert_eq!(continuation("v7").dedup_id(), continuation("v7").dedup_id());
        assert_ne!(continuation("v7").dedup_id(), continuation("v9").dedup_id());
    }
}
