//! Engine tests: the effect sequences of whole turns, and resumption after a crash at every
//! persistence point, with storage simulated by replaying commits into a stored session.

use std::collections::{BTreeMap, VecDeque};

use serde_json::json;

use super::events::{ApprovalDecision, ChatRef, InboundMessage};
use super::state::{self, CommandDispatch, PreparedMessage, SessionState, Step, StepBody};
use super::*;
use crate::session::{SessionKey, StoredSession};
use clawless_base::model::{ModelResponse, Usage};
use clawless_base::session_key::ChatType;
use clawless_base::transcript::{AssistantBlock, Message, StopReason, ToolCall};

fn key() -> SessionKey {
    SessionKey::parse("agent:main:main").unwrap()
}

fn message(id: &str, text: &str) -> PreparedMessage {
    PreparedMessage::plain(InboundMessage {
        message_id: id.to_owned(),
        chat: ChatRef {
            channel: "generic".to_owned(),
            chat_id: "c1".to_owned(),
            chat_type: ChatType::Direct,
        },
        sender_id: "u1".to_owned(),
        text: text.to_owned(),
        sender_is_owner: true,
        attachments: Vec::new(),
    })
}

fn text_response(text: &str) -> ModelResponse {
    ModelResponse {
        content: vec![AssistantBlock::Text {
            text: text.to_owned(),
        }],
        stop_reason: StopReason::EndTurn,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Usage::default()
        },
        model: "test/model".to_owned(),
    }
}

fn tool_response(id: &str, name: &str, input: serde_json::Value) -> ModelResponse {
    ModelResponse {
        content: vec![AssistantBlock::ToolCall(ToolCall {
            id: id.to_owned(),
            name: name.to_owned(),
            input,
        })],
        stop_reason: StopReason::ToolUse,
        usage: Usage::default(),
        model: "test/model".to_owned(),
    }
}

fn routing(offered: &[&str]) -> ToolRouting {
    ToolRouting {
        offered: offered.iter().map(|s| (*s).to_owned()).collect(),
        ..ToolRouting::default()
    }
}

/// Storage stand-in: applies commits the way a session store does (version check included),
/// and loads only the live part, as a turn does.
#[derive(Default, Clone)]
struct Stored {
    session: Option<StoredSession>,
}

impl Stored {
    fn commit(&mut self, state: &mut SessionState) {
        let commit = state.pending_commit().unwrap();
        let current = self.session.as_ref().map_or(0, |s| s.version);
        assert_eq!(commit.expected_version, current, "optimistic version check");
        let mut steps = self.session.take().map(|s| s.steps).unwrap_or_default();
        for step in &commit.steps {
            assert!(
                steps.iter().all(|s| s.seq != step.seq),
                "a step seq is written once"
            );
        }
        steps.extend(commit.steps);
        self.session = Some(StoredSession {
            version: current + 1,
            meta: commit.meta,
            steps,
            live_from: commit.live_from,
            last_seq: commit.last_seq,
        });
        state.mark_committed(current + 1);
    }

    fn load(&self) -> SessionState {
        match &self.session {
            Some(stored) => {
                let live = StoredSession {
                    steps: stored
                        .steps
                        .iter()
                        .filter(|step| step.seq >= stored.live_from)
                        .cloned()
                        .collect(),
                    ..stored.clone()
                };
                SessionState::from_stored(key(), &live).unwrap()
            }
            None => SessionState::new(key(), "s1".to_owned(), 0),
        }
    }

    /// Every stored step, archived generations and compacted history included.
    fn all_steps(&self) -> Vec<StepBody> {
        let stored = self.session.as_ref().expect("stored");
        stored
            .steps
            .iter()
            .map(|step| serde_json::from_str::<Step>(&step.body).unwrap().body)
            .collect()
    }
}

/// The outside world of a test run: scripted model, tools that count their runs, a chat.
#[derive(Default)]
struct World {
    stored: Stored,
    model: VecDeque<ModelResponse>,
    model_calls: usize,
    tool_runs: BTreeMap<String, usize>,
    delivered: Vec<(String, String)>,
    delivered_to: Vec<String>,
    approval_codes: Vec<Option<String>>,
    node_jobs: Vec<String>,
    persists: usize,
    compactions: usize,
}

enum Stop {
    Never,
    /// Crash right after the n-th persist of this delivery.
    AfterPersist(usize),
}

impl World {
    /// Delivers one event and drives the engine until it waits or idles (or "crashes").
    fn deliver(
        &mut self, engine: &TurnEngine, routing: &ToolRouting, event: Incoming, stop: Stop,
    ) -> Option<Effect> {
        let mut state = self.stored.load();
        engine.accept(&mut state, event, 1);
        let mut persists_here = 0;
        loop {
            match engine.next(&mut state, routing, 2) {
                Effect::Persist => {
                    self.stored.commit(&mut state);
                    self.persists += 1;
                    persists_here += 1;
                    if matches!(stop, Stop::AfterPersist(n) if n == persists_here) {
                        return None;
                    }
                }
                Effect::CallModel => {
                    self.model_calls += 1;
                    let messages = state.messages();
                    assert!(matches!(messages.first(), Some(Message::User { .. })));
                    let response = self.model.pop_front().expect("model script exhausted");
                    engine.record_model_response(&mut state, response, 3);
                }
                Effect::RunTool(call) => {
                    *self.tool_runs.entry(call.id.clone()).or_default() += 1;
                    let output = ToolOutput::ok(format!("ran {} with {}", call.name, call.input));
                    engine.record_tool_result(&mut state, &call, output, 4);
                }
                Effect::SendToNode { job_id, .. } => {
                    self.node_jobs.push(job_id.clone());
                    state.mark_dispatched(&job_id);
                }
                Effect::SendReply(reply) => {
                    self.delivered
                        .push((reply.reply_id.clone(), reply.text.clone()));
                    self.delivered_to.push(reply.chat.chat_id.clone());
                    self.approval_codes.push(reply.approval_code.clone());
                    engine.record_reply_sent(&mut state, &reply.reply_id, 5);
                }
                Effect::Compact(request) => {
                    self.compactions += 1;
                    let text = format!("compacted: {:?}", request.instructions);
                    engine.finish_compact_command(&mut state, text, 6);
                }
                effect @ (Effect::Wait | Effect::Idle) => return Some(effect),
            }
        }
    }

    /// Delivers a chat message through the default engine, with no crash.
    fn say(&mut self, routing: &ToolRouting, id: &str, text: &str) -> Option<Effect> {
        let event = Incoming::Message(Box::new(message(id, text)));
        self.deliver(&engine(), routing, event, Stop::Never)
    }

    /// Delivers any event through the default engine, with no crash.
    fn send(&mut self, routing: &ToolRouting, event: Incoming) -> Option<Effect> {
        self.deliver(&engine(), routing, event, Stop::Never)
    }

    fn transcript(&self) -> Vec<StepBody> {
        self.stored
            .load()
            .steps
            .into_iter()
            .map(|s| s.body)
            .collect()
    }
}

fn engine() -> TurnEngine {
    TurnEngine::default()
}

#[test]
fn a_simple_turn_calls_the_model_once_persists_and_replies_once() {
    // GIVEN a model that answers with text
    let mut world = World::default();
    world.model.push_back(text_response("Hello!"));
    // WHEN a message arrives
    let end = world.say(&routing(&[]), "m1", "hi");
    // THEN one model call, one reply, two commits (response + reply intent; delivery record)
    assert_eq!(end, Some(Effect::Idle));
    assert_eq!(world.model_calls, 1);
    assert_eq!(world.delivered.len(), 1);
    assert_eq!(world.delivered[0].1, "Hello!");
    assert_eq!(world.persists, 2);
    let kinds: Vec<&str> = world
        .transcript()
        .iter()
        .map(|b| match b {
            StepBody::Inbound { .. } => "inbound",
            StepBody::Assistant { .. } => "assistant",
            StepBody::Reply { .. } => "reply",
            StepBody::ReplySent { .. } => "sent",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["inbound", "assistant", "reply", "sent"]);
}

#[test]
fn a_tool_call_runs_once_and_its_result_reaches_the_next_model_call() {
    let mut world = World::default();
    world
        .model
        .push_back(tool_response("t1", "read", json!({"path": "SKILL.md"})));
    world.model.push_back(text_response("Done reading."));
    world.say(&routing(&["read"]), "m1", "read it");
    assert_eq!(world.tool_runs.get("t1"), Some(&1));
    assert_eq!(world.delivered.len(), 1);
    let state = world.stored.load();
    let messages = state.messages();
    assert!(
        matches!(&messages[2], Message::ToolResult { tool_call_id, is_error: false, .. } if tool_call_id == "t1")
    );
}

#[test]
fn a_call_to_a_tool_that_is_not_offered_is_never_run_and_gets_an_error_result() {
    let mut world = World::default();
    world
        .model
        .push_back(tool_response("t1", "exec", json!({"command": "rm -rf /"})));
    world
        .model
        .push_back(tool_response("t2", " READ", json!({"path": "x"})));
    world
        .model
        .push_back(tool_response("t3", "read*", json!({"path": "x"})));
    world.model.push_back(text_response("ok"));
    world.say(&routing(&["read"]), "m1", "go");
    assert!(
        world.tool_runs.is_empty(),
        "nothing ran: {:?}",
        world.tool_runs
    );
    let errors: Vec<String> = world
        .transcript()
        .into_iter()
        .filter_map(|b| match b {
            StepBody::ToolResult {
                text,
                is_error: true,
                ..
            } => Some(text),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 3);
    assert!(errors[0].contains("\"exec\" is not available"));
}

#[test]
fn silent_tokens_send_nothing() {
    for token in ["%%NO_REPLY%%", "HEARTBEAT_OK", "  NO_REPLY \n"] {
        let mut world = World::default();
        world.model.push_back(text_response(token));
        let end = world.say(&routing(&[]), "m1", "hi");
        assert_eq!(end, Some(Effect::Idle));
        assert!(world.delivered.is_empty(), "{token:?} must not be sent");
        assert!(!world.stored.load().meta.turn_open);
    }
}

#[test]
fn the_number_of_model_calls_in_a_turn_is_bounded() {
    let mut world = World::default();
    for i in 0..10 {
        world
            .model
            .push_back(tool_response(&format!("t{i}"), "read", json!({})));
    }
    let engine = TurnEngine::new(TurnSettings {
        max_model_calls: 3,
        ..TurnSettings::default()
    });
    world.deliver(
        &engine,
        &routing(&["read"]),
        Incoming::Message(Box::new(message("m1", "loop"))),
        Stop::Never,
    );
    assert_eq!(world.model_calls, 3);
    assert_eq!(world.delivered.len(), 1);
    assert!(world.delivered[0].1.contains("limit of 3 model calls"));
    assert!(!world.stored.load().meta.turn_open);
}

#[test]
fn a_redelivered_message_after_a_finished_turn_does_nothing() {
    let mut world = World::default();
    world.model.push_back(text_response("Hello!"));
    let r = routing(&[]);
    world.say(&r, "m1", "hi");
    let end = world.say(&r, "m1", "hi");
    assert_eq!(end, Some(Effect::Idle));
    assert_eq!(world.model_calls, 1);
    assert_eq!(world.delivered.len(), 1);
}

/// Runs a two-tool turn, crashing after persist `crash_at` and redelivering the message.
fn crash_run(crash_at: Option<usize>) -> World {
    let mut world = World::default();
    world
        .model
        .push_back(tool_response("t1", "read", json!({"path": "a"})));
    world
        .model
        .push_back(tool_response("t2", "write", json!({"path": "b"})));
    world.model.push_back(text_response("All done."));
    let r = routing(&["read", "write"]);
    let first = match crash_at {
        Some(n) => Stop::AfterPersist(n),
        None => Stop::Never,
    };
    let end = world.deliver(
        &engine(),
        &r,
        Incoming::Message(Box::new(message("m1", "work"))),
        first,
    );
    if end.is_none() {
        let end = world.say(&r, "m1", "work");
        assert_eq!(end, Some(Effect::Idle));
    }
    world
}

#[test]
fn a_turn_killed_after_any_persist_resumes_without_duplicates() {
    let clean = crash_run(None);
    for crash_at in 1..=clean.persists {
        let crashed = crash_run(Some(crash_at));
        assert_eq!(
            crashed.transcript(),
            clean.transcript(),
            "crash after persist {crash_at}"
        );
        assert_eq!(
            crashed.model_calls, clean.model_calls,
            "crash after persist {crash_at}"
        );
        assert!(
            crashed.tool_runs.values().all(|n| *n == 1),
            "crash after persist {crash_at}: {:?}",
            crashed.tool_runs
        );
        assert_eq!(
            crashed.delivered, clean.delivered,
            "crash after persist {crash_at}"
        );
    }
}

#[test]
fn a_message_arriving_while_a_node_call_is_pending_becomes_a_follow_up() {
    let mut world = World::default();
    world
        .model
        .push_back(tool_response("x1", "exec", json!({"command": "ls"})));
    world.model.push_back(text_response("Listed."));
    world.model.push_back(text_response("Second answer."));
    let mut r = routing(&["exec"]);
    r.remote.insert("exec".to_owned());
    let end = world.say(&r, "m1", "list");
    assert_eq!(end, Some(Effect::Wait));
    assert_eq!(world.node_jobs.len(), 1);
    // a second message waits
    let end = world.say(&r, "m2", "and then?");
    assert_eq!(end, Some(Effect::Wait));
    assert_eq!(world.model_calls, 1);
    assert_eq!(world.stored.load().meta.follow_ups.len(), 1);
    // the node's result resumes turn 1, then turn 2 runs
    let result = Incoming::ToolResult {
        call_id: "x1".to_owned(),
        output: ToolOutput::ok("a b c"),
        notice: None,
    };
    let end = world.send(&r, result.clone());
    assert_eq!(end, Some(Effect::Idle));
    let texts: Vec<&str> = world.delivered.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts, ["Listed.", "Second answer."]);
    assert_eq!(world.stored.load().meta.turn, 2);
    // a duplicate result changes nothing
    world.send(&r, result);
    assert_eq!(world.delivered.len(), 2);
}

#[test]
fn a_node_call_that_times_out_gets_an_error_result() {
    let mut world = World::default();
    world
        .model
        .push_back(tool_response("x1", "exec", json!({"command": "sleep 99"})));
    world.model.push_back(text_response("It timed out."));
    let mut r = routing(&["exec"]);
    r.remote.insert("exec".to_owned());
    world.say(&r, "m1", "wait");
    world.send(
        &r,
        Incoming::ToolTimeout {
            call_id: "x1".to_owned(),
        },
    );
    let timed_out = world.transcript().into_iter().any(|b| {
        matches!(b, StepBody::ToolResult { text, is_error: true, .. } if text == TOOL_TIMEOUT_TEXT)
    });
    assert!(timed_out);
    assert_eq!(world.delivered.last().unwrap().1, "It timed out.");
}

/// A turn whose model runs `exec` on a node; the node answers that approval is needed.
fn world_awaiting_approval(r: &ToolRouting) -> World {
    let mut world = World::default();
    world
        .model
        .push_back(tool_response("x1", "exec", json!({"command": "uname -a"})));
    world.model.push_back(text_response("It ran."));
    let end = world.say(r, "m1", "what system is this?");
    assert_eq!(end, Some(Effect::Wait));
    assert_eq!(world.node_jobs.len(), 1);
    let asked = Incoming::ApprovalNeeded {
        call_id: "x1".to_owned(),
        text: "Approval required (id abcd1234). Reply with: /approve abcd1234 allow-once|allow-always|deny".to_owned(),
    };
    let end = world.send(r, asked.clone());
    assert_eq!(end, Some(Effect::Wait));
    // a redelivered request changes nothing
    world.send(r, asked);
    let asks = world
        .delivered
        .iter()
        .filter(|(_, text)| text.starts_with("Approval required"))
        .count();
    assert_eq!(asks, 1, "{:?}", world.delivered);
    world
}

fn exec_routing() -> ToolRouting {
    let mut r = routing(&["exec"]);
    r.remote.insert("exec".to_owned());
    r
}

#[test]
fn a_call_needing_approval_is_sent_again_with_the_decision_only_after_it_is_allowed() {
    let r = exec_routing();
    let mut world = world_awaiting_approval(&r);
    let approval = Incoming::Approval {
        call_id: "x1".to_owned(),
        decision: ApprovalDecision::AllowAlways,
        notice: None,
    };
    let end = world.send(&r, approval.clone());
    assert_eq!(end, Some(Effect::Wait));
    assert_eq!(world.node_jobs.len(), 2, "re-sent once, with the grant");
    assert_eq!(world.node_jobs[0], world.node_jobs[1], "same job id");
    let pending = world.stored.load();
    assert_eq!(
        pending.latest_pending("x1").and_then(|p| p.approved),
        Some(ApprovalDecision::AllowAlways)
    );
    // a second /approve for the same call records nothing (the resumed turn may hand the
    // same job to the node again: its journal runs each attempt at most once)
    let steps = world.transcript().len();
    world.send(&r, approval);
    assert_eq!(world.transcript().len(), steps);
    assert!(world.node_jobs.iter().all(|job| *job == world.node_jobs[0]));
    let result = Incoming::ToolResult {
        call_id: "x1".to_owned(),
        output: ToolOutput::ok("Linux"),
        notice: Some("Exec finished (node=n1 id=x, code 0)\nLinux".to_owned()),
    };
    world.send(&r, result);
    let texts: Vec<&str> = world.delivered.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[1].starts_with("Exec finished"));
    assert_eq!(texts[2], "It ran.");
}

#[test]
fn a_denied_call_is_not_run_and_the_chat_hears_why() {
    let r = exec_routing();
    let mut world = world_awaiting_approval(&r);
    let deny = Incoming::Approval {
        call_id: "x1".to_owned(),
        decision: ApprovalDecision::Deny,
        notice: Some("Exec denied (node=n1 id=x, user-denied): uname -a".to_owned()),
    };
    world.send(&r, deny);
    assert_eq!(world.node_jobs.len(), 1, "never re-sent");
    let denied = world.transcript().into_iter().any(|b| {
        matches!(b, StepBody::ToolResult { text, is_error: true, .. } if text == APPROVAL_DENIED_TEXT)
    });
    assert!(denied);
    let texts: Vec<&str> = world.delivered.iter().map(|(_, t)| t.as_str()).collect();
    assert!(texts[1].starts_with("Exec denied"), "{texts:?}");
    assert_eq!(texts.last(), Some(&"It ran."));
}

#[test]
fn an_approved_call_the_node_still_refuses_ends_with_an_error_instead_of_asking_again() {
    let r = exec_routing();
    let mut world = world_awaiting_approval(&r);
    world.send(
        &r,
        Incoming::Approval {
            call_id: "x1".to_owned(),
            decision: ApprovalDecision::AllowOnce,
            notice: None,
        },
    );
    world.send(
        &r,
        Incoming::ApprovalNeeded {
            call_id: "x1".to_owned(),
            text: "Approval required again".to_owned(),
        },
    );
    let refused = world.transcript().into_iter().any(|b| {
        matches!(b, StepBody::ToolResult { text, is_error: true, .. } if text.contains("refused the approved command"))
    });
    assert!(refused);
    let asks = world
        .delivered
        .iter()
        .filter(|(_, text)| text.contains("Approval required"))
        .count();
    assert_eq!(asks, 1);
}

#[test]
fn approval_ids_resolve_by_call_id_full_job_id_or_unambiguous_short_code() {
    let r = exec_routing();
    let world = world_awaiting_approval(&r);
    let state = world.stored.load();
    let job = state.latest_pending("x1").unwrap().job_id.to_owned();
    assert_eq!(state.call_awaiting_approval("x1").as_deref(), Some("x1"));
    assert_eq!(state.call_awaiting_approval(&job).as_deref(), Some("x1"));
    assert_eq!(
        state.call_awaiting_approval(&job[..8]).as_deref(),
        Some("x1")
    );
    assert_eq!(state.call_awaiting_approval(&job[..4]), None, "too short");
    assert_eq!(state.call_awaiting_approval("nope"), None);
    // The approval request, and only it, carries the code for a channel's buttons.
    let asks: Vec<&Option<String>> = world
        .delivered
        .iter()
        .zip(&world.approval_codes)
        .filter(|((_, text), _)| text.contains("Approval required"))
        .map(|(_, code)| code)
        .collect();
    assert_eq!(asks, [&Some(job[..8].to_owned())]);
    let others = world
        .delivered
        .iter()
        .zip(&world.approval_codes)
        .filter(|((_, text), _)| !text.contains("Approval required"));
    assert!(others.into_iter().all(|(_, code)| code.is_none()));
}

#[test]
fn a_dispatching_skill_command_runs_its_tool_without_the_model() {
    let mut world = World::default();
    let mut prepared = message("m1", "/deploy now");
    prepared.dispatch = Some(CommandDispatch {
        tool_name: "session_status".to_owned(),
        params: json!({"command": "now", "commandName": "deploy", "skillName": "deploy"}),
    });
    world.deliver(
        &engine(),
        &routing(&["session_status"]),
        Incoming::Message(Box::new(prepared.clone())),
        Stop::Never,
    );
    assert_eq!(world.model_calls, 0);
    assert_eq!(world.tool_runs.len(), 1);
    assert!(world.delivered[0].1.starts_with("ran session_status"));
    // the same command with the tool unavailable answers with the spec's error
    let mut world = World::default();
    prepared.message.message_id = "m2".to_owned();
    world.deliver(
        &engine(),
        &routing(&[]),
        Incoming::Message(Box::new(prepared)),
        Stop::Never,
    );
    assert_eq!(
        world.delivered[0].1,
        "❌ Tool not available: session_status"
    );
    assert!(world.tool_runs.is_empty());
}

fn reset_message(id: &str, text: &str, reason: state::ResetReason) -> PreparedMessage {
    let mut prepared = message(id, text);
    prepared.reset = Some(state::ResetRequest {
        reason,
        model: None,
    });
    prepared
}

fn user_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|message| match message {
            Message::User { text } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_reset_starts_a_generation_whose_requests_carry_nothing_from_before() {
    // GIVEN a session with two answered turns
    let mut world = World::default();
    let routing = routing(&[]);
    for (id, text) in [
        ("m1", "remember the code 4711"),
        ("m2", "and the city Lyon"),
    ] {
        world.model.push_back(text_response("noted"));
        world.say(&routing, id, text);
    }
    let before = world.stored.load().meta;
    // WHEN /new arrives with a first message
    world.model.push_back(text_response("fresh start"));
    let event = Incoming::Message(Box::new(reset_message(
        "m3",
        "what do you know?",
        state::ResetReason::New,
    )));
    world.send(&routing, event);
    // THEN the model saw only the new message, and the reply went out
    let state = world.stored.load();
    assert_eq!(user_texts(&state.messages()), vec!["what do you know?"]);
    assert_eq!(world.delivered.last().unwrap().1, "fresh start");
    // AND the new generation has its own id and counters; the key's dedupe memory stays
    assert_eq!(state.meta.generation, 1);
    assert_ne!(state.meta.session_id, before.session_id);
    assert_eq!(
        state.meta.last_reset.as_ref().unwrap().reason,
        state::ResetReason::New
    );
    assert!(
        state.has_seen_message("m1"),
        "earlier ids are still deduplicated"
    );
    assert!(state.meta.turn > before.turn, "turn numbers go on");
    // AND the old generation is archived: stored, not loaded
    assert!(state.steps.iter().all(|step| !matches!(&step.body,
        StepBody::Inbound { text, .. } if text.contains("4711"))));
    let archived = world.stored.all_steps();
    assert!(archived.iter().any(|body| matches!(body,
        StepBody::Inbound { text, .. } if text.contains("4711"))));
    assert!(archived.iter().any(|body| matches!(body,
        StepBody::Reset { previous_session_id, .. } if *previous_session_id == before.session_id)));
}

#[test]
fn a_compaction_replaces_history_with_its_summary_and_moves_the_load_point() {
    // GIVEN three answered turns
    let mut world = World::default();
    let routing = routing(&[]);
    for index in 1..=3 {
        world
            .model
            .push_back(text_response(&format!("answer {index}")));
        world.say(&routing, &format!("m{index}"), &format!("question {index}"));
    }
    // WHEN a compaction keeps the third turn and summarises the rest
    let mut state = world.stored.load();
    let third = state
        .steps
        .iter()
        .rev()
        .find(|step| matches!(step.body, StepBody::Inbound { .. }))
        .unwrap()
        .seq;
    engine().record_compaction(
        &mut state,
        "## Decisions\n- questions 1 and 2 answered".into(),
        third,
        100,
        40,
        state::CompactionTrigger::Manual,
        9,
    );
    world.stored.commit(&mut state);
    // THEN the model sees the summary, then the kept turn verbatim
    let state = world.stored.load();
    let texts = user_texts(&state.messages());
    assert_eq!(texts.len(), 2);
    assert!(texts[0].starts_with(clawless_base::transcript::SUMMARY_MESSAGE_PREFIX));
    assert!(texts[0].contains("questions 1 and 2 answered"));
    assert_eq!(texts[1], "question 3");
    // AND a turn loads nothing before the kept turn, and new steps continue the numbering
    assert_eq!(state.steps.first().unwrap().seq, third);
    assert_eq!(state.meta.compaction_count, 1);
    world.model.push_back(text_response("answer 4"));
    world.say(&routing, "m4", "question 4");
    let all = world.stored.all_steps();
    assert_eq!(
        all.len(),
        world.stored.session.as_ref().unwrap().last_seq as usize
    );
}

#[test]
fn the_compact_command_compacts_and_replies_without_calling_the_model() {
    let mut world = World::default();
    let routing = routing(&[]);
    let mut prepared = message("m1", "/compact focus on names");
    prepared.compact = Some(state::CompactRequest {
        instructions: Some("focus on names".into()),
    });
    world.send(&routing, Incoming::Message(Box::new(prepared)));
    assert_eq!(world.compactions, 1);
    assert_eq!(world.model_calls, 0);
    assert_eq!(
        world.delivered.last().unwrap().1,
        "compacted: Some(\"focus on names\")"
    );
    assert!(!world.stored.load().meta.turn_open);
    assert!(
        user_texts(&world.stored.load().messages()).is_empty(),
        "the command is not for the model"
    );
}

#[test]
fn a_turn_killed_after_any_persist_of_a_reset_resumes_into_one_generation() {
    for crash_after in 1..=3 {
        let mut world = World::default();
        let routing = routing(&[]);
        world.model.push_back(text_response("old"));
        world.say(&routing, "m1", "old question");
        world.model.push_back(text_response("new"));
        world.model.push_back(text_response("new"));
        let event = || {
            Incoming::Message(Box::new(reset_message(
                "m2",
                "hello",
                state::ResetReason::Reset,
            )))
        };
        world.deliver(
            &engine(),
            &routing,
            event(),
            Stop::AfterPersist(crash_after),
        );
        world.deliver(&engine(), &routing, event(), Stop::Never);
        let resets = world
            .stored
            .all_steps()
            .iter()
            .filter(|body| matches!(body, StepBody::Reset { .. }))
            .count();
        assert_eq!(resets, 1, "crash after persist {crash_after}");
        assert_eq!(world.stored.load().meta.generation, 1);
        let replies: Vec<_> = world.delivered.iter().filter(|(_, t)| t == "new").collect();
        assert_eq!(replies.len(), 1, "one reply after crash {crash_after}");
    }
}

fn heartbeat(slot: u64, target: clawless_automation::heartbeat::AlertTarget) -> Incoming {
    let delivery = clawless_automation::heartbeat::HeartbeatDelivery::new(
        &clawless_automation::heartbeat::HeartbeatConfig::default(),
        clawless_automation::heartbeat::HeartbeatVisibility::default(),
        target,
        Some(slot),
    );
    let poll = prepare::heartbeat_message(
        message("unused", "").message.chat,
        &format!("main:{slot}"),
        "Read HEARTBEAT.md if it exists (workspace context).",
        delivery,
    );
    Incoming::Message(Box::new(poll))
}

fn alert_chat() -> clawless_automation::heartbeat::AlertTarget {
    clawless_automation::heartbeat::AlertTarget::Chat {
        chat: ChatRef {
            channel: "generic".to_owned(),
            chat_id: "alerts".to_owned(),
            chat_type: ChatType::Direct,
        },
    }
}

fn heartbeat_outcomes(world: &World) -> Vec<String> {
    world
        .stored
        .all_steps()
        .into_iter()
        .filter_map(|body| match body {
            StepBody::HeartbeatOutcome { status, .. } => Some(status),
            _ => None,
        })
        .collect()
}

#[test]
fn a_heartbeat_ack_is_recorded_and_never_sent_and_an_alert_goes_to_its_target_once() {
    let mut world = World::default();
    world.model.push_back(text_response("Hello!"));
    world.say(&routing(&[]), "m1", "hi");
    // An acknowledgement with a short remainder: recorded, not sent.
    world.model.push_back(text_response("HEARTBEAT_OK 🦞"));
    assert_eq!(
        world.send(&routing(&[]), heartbeat(1_000, alert_chat())),
        Some(Effect::Idle)
    );
    assert_eq!(world.delivered.len(), 1);
    // An alert: sent to the target chat, and remembered as the last alert.
    world.model.push_back(text_response("Disk almost full"));
    world.send(&routing(&[]), heartbeat(2_000, alert_chat()));
    assert_eq!(world.delivered.len(), 2);
    assert_eq!(world.delivered[1].1, "Disk almost full");
    assert_eq!(world.delivered_to, ["c1", "alerts"]);
    let state = world.stored.load();
    assert_eq!(
        state
            .meta
            .heartbeat
            .as_ref()
            .and_then(|h| h.last_alert.as_ref())
            .map(|a| a.text.as_str()),
        Some("Disk almost full")
    );
    // Heartbeats leave the session's chat and interaction time alone.
    assert_eq!(
        state.meta.chat.as_ref().map(|c| c.chat_id.as_str()),
        Some("c1")
    );
    // The same alert again (within 24 h): recorded as a duplicate, not sent.
    world.model.push_back(text_response("Disk almost full"));
    world.send(&routing(&[]), heartbeat(3_000, alert_chat()));
    assert_eq!(world.delivered.len(), 2);
    assert_eq!(heartbeat_outcomes(&world), ["ok-token", "sent", "skipped"]);
}

#[test]
fn a_heartbeat_alert_is_decided_once_across_crashes() {
    for crash_after in 1..=3 {
        // GIVEN a heartbeat whose alert delivery is interrupted after the n-th persist
        let mut world = World::default();
        world.model.push_back(text_response("Disk almost full"));
        world.deliver(
            &engine(),
            &routing(&[]),
            heartbeat(1_000, alert_chat()),
            Stop::AfterPersist(crash_after),
        );
        // WHEN the event is redelivered (the model would now say something else)
        world.model.push_back(text_response("HEARTBEAT_OK"));
        world.send(&routing(&[]), heartbeat(1_000, alert_chat()));
        // THEN the alert was decided once and sent once
        let sent: Vec<&str> = world
            .delivered
            .iter()
            .map(|(_, text)| text.as_str())
            .collect();
        assert_eq!(
            sent,
            ["Disk almost full"],
            "crash after persist {crash_after}"
        );
        assert_eq!(
            heartbeat_outcomes(&world),
            ["sent"],
            "crash after persist {crash_after}"
        );
    }
}

#[test]
fn a_heartbeat_with_nowhere_to_send_or_a_failed_model_stays_out_of_the_chat() {
    let mut world = World::default();
    world.model.push_back(text_response("Disk almost full"));
    world.send(
        &routing(&[]),
        heartbeat(
            1_000,
            clawless_automation::heartbeat::AlertTarget::TargetNone,
        ),
    );
    let mut failed = text_response("⚠️ The model could not be reached: down");
    failed.stop_reason = StopReason::Error;
    world.model.push_back(failed);
    world.send(&routing(&[]), heartbeat(2_000, alert_chat()));
    // A heartbeat that loops on tools stops quietly at the limit.
    for i in 0..3 {
        world
            .model
            .push_back(tool_response(&format!("t{i}"), "read", json!({})));
    }
    world.deliver(
        &TurnEngine::new(TurnSettings {
            max_model_calls: 2,
            ..TurnSettings::default()
        }),
        &routing(&["read"]),
        heartbeat(3_000, alert_chat()),
        Stop::Never,
    );
    assert!(world.delivered.is_empty(), "{:?}", world.delivered);
    assert_eq!(heartbeat_outcomes(&world), ["skipped", "failed", "failed"]);
    assert!(!world.stored.load().meta.turn_open);
}

#[test]
fn a_stray_heartbeat_token_is_stripped_from_an_ordinary_reply() {
    let mut world = World::default();
    world
        .model
        .push_back(text_response("All clear. HEARTBEAT_OK"));
    world.say(&routing(&[]), "m1", "anything new?");
    assert_eq!(world.delivered[0].1, "All clear.");
}

fn thinking_response(thinking: &str, text: &str) -> ModelResponse {
    let mut response = text_response(text);
    response.content.insert(
        0,
        AssistantBlock::Thinking {
            text: thinking.to_owned(),
            signature: Some("sig".to_owned()),
            redacted: None,
            api: "anthropic".to_owned(),
        },
    );
    response
}

fn with_directives(id: &str, text: &str) -> PreparedMessage {
    use clawless_base::thinking::{ReasoningLevel, ThinkingLevel};
    let found = super::directives::find_directives(text);
    let plan = super::directives::plan_directives(
        &found,
        super::directives::CurrentSettings {
            thinking: ThinkingLevel::Off,
            reasoning: ReasoningLevel::Off,
            model_ref: "anthropic/claude-sonnet-4-5",
        },
    )
    .expect("directives");
    let mut prepared = message(id, text);
    match &plan.text {
        Some(rest) => prepared.text.clone_from(rest),
        None => {
            prepared.dispatch = Some(state::CommandDispatch {
                tool_name: super::directives::DIRECTIVES_COMMAND.to_owned(),
                params: json!({"reply": plan.reply}),
            });
        }
    }
    prepared.directives = Some(plan);
    prepared
}

#[test]
fn directives_set_the_levels_survive_new_and_fall_to_an_idle_reset() {
    use clawless_base::thinking::{ReasoningLevel, ThinkingLevel};
    let mut world = World::default();
    let routing = routing(&[]);
    // A directive-only message: acknowledged, stored, no model call.
    let event = Incoming::Message(Box::new(with_directives("m1", "/think high /reasoning on")));
    world.send(&routing, event);
    assert_eq!(world.model_calls, 0);
    assert_eq!(
        world.delivered.last().unwrap().1,
        "Thinking level set to high. ⚙️ Reasoning visibility enabled."
    );
    let meta = world.stored.load().meta;
    assert_eq!(meta.thinking_level, Some(ThinkingLevel::High));
    assert_eq!(meta.reasoning_level, Some(ReasoningLevel::On));
    // `/new` keeps them.
    world.model.push_back(text_response("fresh"));
    let event = Incoming::Message(Box::new(reset_message("m2", "hi", state::ResetReason::New)));
    world.send(&routing, event);
    assert_eq!(
        world.stored.load().meta.thinking_level,
        Some(ThinkingLevel::High)
    );
    // An idle reset does not.
    world.model.push_back(text_response("later"));
    let event = Incoming::Message(Box::new(reset_message(
        "m3",
        "hi",
        state::ResetReason::Idle,
    )));
    world.send(&routing, event);
    let meta = world.stored.load().meta;
    assert_eq!((meta.thinking_level, meta.reasoning_level), (None, None));
}

#[test]
fn shown_reasoning_precedes_the_answer_once_and_hidden_reasoning_is_never_sent() {
    let mut world = World::default();
    let routing = routing(&[]);
    // Hidden (the default): only the answer.
    world
        .model
        .push_back(thinking_response("private musing", "Answer one."));
    world.say(&routing, "m1", "q1");
    assert_eq!(world.delivered.last().unwrap().1, "Answer one.");
    assert!(
        world
            .delivered
            .iter()
            .all(|(_, text)| !text.contains("musing"))
    );
    // Shown: `Reasoning:` first, as its own message, then the answer.
    let event = Incoming::Message(Box::new(with_directives("m2", "/reasoning on")));
    world.send(&routing, event);
    world
        .model
        .push_back(thinking_response("Step one.\nStep two.", "Answer two."));
    let sent_before = world.delivered.len();
    world.say(&routing, "m3", "q2");
    let texts: Vec<&str> = world.delivered[sent_before..]
        .iter()
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(
        texts,
        ["Reasoning:\n_Step one._\n_Step two._", "Answer two."]
    );
    // The model hears of the change with the next message.
    let meta = world.stored.load().meta;
    assert!(
        meta.pending_events
            .iter()
            .any(|event| event.text == "Reasoning ON - include <think>.")
    );
    // A heartbeat never shows reasoning.
    world
        .model
        .push_back(thinking_response("heartbeat musing", "Disk almost full"));
    world.send(&routing, heartbeat(1_000, alert_chat()));
    assert!(
        world
            .delivered
            .iter()
            .all(|(_, text)| !text.contains("heartbeat musing"))
    );
    // ...unless the heartbeat is configured with `includeReasoning`: then it goes first.
    world
        .model
        .push_back(thinking_response("checked the disk", "Disk full now"));
    let Incoming::Message(mut poll) = heartbeat(2_000, alert_chat()) else {
        unreachable!("a heartbeat is a message")
    };
    if let Some(delivery) = poll.heartbeat_delivery.as_mut() {
        delivery.include_reasoning = true;
    }
    let sent_before = world.delivered.len();
    world.send(&routing, Incoming::Message(poll));
    let texts: Vec<&str> = world.delivered[sent_before..]
        .iter()
        .map(|(_, text)| text.as_str())
        .collect();
    assert_eq!(texts, ["Reasoning:\n_checked the disk_", "Disk full now"]);
}
