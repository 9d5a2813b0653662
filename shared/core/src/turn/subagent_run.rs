//! Pure decisions about a sub-agent's run in its own session: whether a start is the new run
//! of a steer, whether the run has ended (killed, timed out, steered), whether its announce
//! is due, and what its result is, read from its transcript. The runtime performs what
//! these decide (`turn_service/subagents.rs`).

use crate::subagents::A2A_SENDER_ID;
use crate::turn::events::SubagentStart;
use crate::turn::state::{SessionMeta, Step, StepBody, SubagentRun};
use clawless_base::transcript::assistant_text;

/// How a child's run ended, read from its transcript.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildResult {
    /// `ok`, `error` or `timeout`.
    pub status: String,
    /// The error, for `error`.
    pub error: Option<String>,
    /// The latest visible assistant text.
    pub text: Option<String>,
    /// Tokens in over the run.
    pub tokens_in: u64,
    /// Tokens out over the run.
    pub tokens_out: u64,
}

/// True when `start` is the new run of a steer: the session's current run was steered and
/// `start` is another run. It starts, though the steered run takes no further step.
pub fn is_steer_restart(current: Option<&SubagentRun>, start: &SubagentStart) -> bool {
    current.is_some_and(|run| run.status == "steered" && run.start.run_id != start.run_id)
}

/// True when the run was ended from outside (killed, timed out or steered): the session
/// takes no further step of it.
pub fn run_has_ended(run: &SubagentRun) -> bool {
    matches!(run.status.as_str(), "killed" | "timeout" | "steered")
}

/// Where a child's announce stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnounceState {
    /// Nothing to announce: not a sub-agent, already announced, killed or steered (those
    /// announce nothing), or its turn is still going.
    NotDue,
    /// The run is done, but children of its own still run: it waits for their announces.
    WaitsForChildren,
    /// The result goes up now.
    Due,
}

/// Where the announce of the run `meta` records stands.
pub fn announce_state(meta: &SessionMeta) -> AnnounceState {
    let Some(run) = &meta.subagent else {
        return AnnounceState::NotDue;
    };
    if run.announced
        || run.status == "killed"
        || run.status == "steered"
        || meta.turn_open
        || !meta.follow_ups.is_empty()
    {
        return AnnounceState::NotDue;
    }
    if run.status == "running" && meta.children.iter().any(|child| child.status == "running") {
        return AnnounceState::WaitsForChildren;
    }
    AnnounceState::Due
}

/// The status an announce carries (and the run records) for a result's status: `done` for
/// `ok`, else the same.
pub fn announced_status(result_status: &str) -> String {
    match result_status {
        "ok" => "done".to_owned(),
        other => other.to_owned(),
    }
}

/// How the child's run ended, from its transcript: an error when its model failed, the
/// latest visible assistant text as its result; `timeout` when `run` timed out. Turns
/// answering another session's `sessions_send` are not the run's: their answers went to
/// that session.
pub fn child_result(run: &SubagentRun, steps: &[Step]) -> ChildResult {
    let mut result = ChildResult {
        status: "ok".to_owned(),
        ..ChildResult::default()
    };
    let mut agent_to_agent_turn = false;
    for step in steps {
        if let StepBody::Inbound { sender_id, .. } = &step.body {
            agent_to_agent_turn = sender_id == A2A_SENDER_ID;
        }
        if agent_to_agent_turn {
            continue;
        }
        match &step.body {
            StepBody::Assistant { content, usage, .. } => {
                result.tokens_in += usage.input_tokens;
                result.tokens_out += usage.output_tokens;
                let text = assistant_text(content);
                if !text.trim().is_empty() {
                    result.text = Some(text.trim().to_owned());
                }
            }
            StepBody::HeartbeatOutcome { status, reason } if status == "failed" => {
                result.status = "error".to_owned();
                result.error = reason.clone();
                result.text = None;
            }
            _ => {}
        }
    }
    if run.status == "timeout" {
        result.status = "timeout".to_owned();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::SessionKey;
    use crate::turn::state::{ChildRun, SessionState};
    use clawless_base::model::Usage;
    use clawless_base::transcript::{AssistantBlock, StopReason};

    fn start(run_id: &str) -> SubagentStart {
        SubagentStart {
            run_id: run_id.to_owned(),
            parent_key: "agent:main:main".to_owned(),
            task: "task".to_owned(),
            label: None,
            depth: 1,
            max_depth: 1,
            first_message: "go".to_owned(),
            extra_system_prompt: String::new(),
            model: None,
            thinking: None,
            light_context: false,
            timeout_ms: None,
            parent_is_internal: false,
            archive_when_announced: false,
            parent_untrusted: false,
            group_scope: None,
            sandbox_key: None,
        }
    }

    fn run(status: &str) -> SubagentRun {
        SubagentRun {
            start: start("run-1"),
            started_at_ms: 0,
            ended_at_ms: None,
            status: status.to_owned(),
            announced: false,
            archived: false,
        }
    }

    fn child_session(status: &str) -> SessionState {
        let key = SessionKey::parse("agent:main:subagent:c1").expect("key");
        let mut state = SessionState::new(key, "s1".to_owned(), 0);
        state.meta.subagent = Some(run(status));
        state
    }

    fn inbound(sender: &str) -> StepBody {
        StepBody::Inbound {
            message_id: format!("m-{sender}"),
            sender_id: sender.to_owned(),
            text: "hi".to_owned(),
            dispatch: None,
            heartbeat: false,
            heartbeat_delivery: None,
            compact: None,
            images: Vec::new(),
        }
    }

    fn answer(text: &str, tokens: u64) -> StepBody {
        StepBody::Assistant {
            content: vec![AssistantBlock::Text {
                text: text.to_owned(),
            }],
            stop_reason: StopReason::EndTurn,
            model: "test/model".to_owned(),
            usage: Usage {
                input_tokens: tokens,
                output_tokens: tokens,
                ..Usage::default()
            },
        }
    }

    #[test]
    fn only_another_run_after_a_steer_is_a_steer_restart() {
        let steered = run("steered");
        assert!(is_steer_restart(Some(&steered), &start("run-2")));
        assert!(!is_steer_restart(Some(&steered), &start("run-1")));
        assert!(!is_steer_restart(Some(&run("running")), &start("run-2")));
        assert!(!is_steer_restart(None, &start("run-2")));
    }

    #[test]
    fn a_run_ended_from_outside_takes_no_further_step() {
        for status in ["killed", "timeout", "steered"] {
            assert!(run_has_ended(&run(status)), "{status}");
        }
        for status in ["running", "done", "error"] {
            assert!(!run_has_ended(&run(status)), "{status}");
        }
    }

    #[test]
    fn an_announce_is_due_once_the_turn_is_over_and_waits_for_running_children() {
        let mut state = child_session("running");
        assert_eq!(announce_state(&state.meta), AnnounceState::Due);
        state.meta.children.push(ChildRun {
            run_id: "grandchild".to_owned(),
            child_key: "agent:main:subagent:g1".to_owned(),
            task: "t".to_owned(),
            label: None,
            started_at_ms: 0,
            ended_at_ms: None,
            status: "running".to_owned(),
            last_steer_at_ms: None,
        });
        assert_eq!(announce_state(&state.meta), AnnounceState::WaitsForChildren);
        state.meta.turn_open = true;
        assert_eq!(announce_state(&state.meta), AnnounceState::NotDue);
    }

    #[test]
    fn killed_steered_or_announced_runs_announce_nothing() {
        for status in ["killed", "steered"] {
            assert_eq!(
                announce_state(&child_session(status).meta),
                AnnounceState::NotDue
            );
        }
        let mut announced = child_session("done");
        if let Some(run) = announced.meta.subagent.as_mut() {
            run.announced = true;
        }
        assert_eq!(announce_state(&announced.meta), AnnounceState::NotDue);
        let plain = SessionState::new(
            SessionKey::parse("agent:main:main").expect("key"),
            "s".to_owned(),
            0,
        );
        assert_eq!(announce_state(&plain.meta), AnnounceState::NotDue);
    }

    #[test]
    fn a_childs_result_is_its_latest_answer_outside_agent_to_agent_turns() {
        let mut state = child_session("running");
        state.push(inbound("subagent"), 1);
        state.push(answer("first", 1), 2);
        state.push(answer("final result", 2), 3);
        state.push(inbound(A2A_SENDER_ID), 4);
        state.push(answer("answer to another session", 5), 5);
        let run = state.meta.subagent.clone().expect("run");
        let result = child_result(&run, &state.steps);
        assert_eq!(result.status, "ok");
        assert_eq!(result.text.as_deref(), Some("final result"));
        assert_eq!((result.tokens_in, result.tokens_out), (3, 3));
    }

    #[test]
    fn a_failed_model_or_a_time_limit_sets_the_result_status() {
        let mut state = child_session("running");
        state.push(answer("partial", 1), 1);
        state.push(
            StepBody::HeartbeatOutcome {
                status: "failed".to_owned(),
                reason: Some("model down".to_owned()),
            },
            2,
        );
        let failed = child_result(&run("running"), &state.steps);
        assert_eq!(failed.status, "error");
        assert_eq!(failed.error.as_deref(), Some("model down"));
        assert_eq!(failed.text, None);
        assert_eq!(
            child_result(&run("timeout"), &state.steps).status,
            "timeout"
        );
        assert_eq!(announced_status("ok"), "done");
        assert_eq!(announced_status("timeout"), "timeout");
    }
}
