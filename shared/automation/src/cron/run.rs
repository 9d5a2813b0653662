//! How one run of a job goes, up to the point where the runtime takes over: the session it
//! runs in, the user message of an isolated run, what a main-session job does with the
//! heartbeat (and how the heartbeat's answer becomes the run's status), and time limits.
//!
//! The heartbeat itself, the turn and the clock are the runtime's; the `Current time:` line
//! is passed in (see `clawless_base::time::current_time_line`).

use super::types::{CronJob, CronPayload, RunStatus, SessionTarget, WakeMode};
use clawless_base::session_key::normalize_agent_id;

/// A run in progress in a session: kept in the session's meta from the firing that started
/// it until the turn it started has ended and the job records the run. Its message id names
/// that turn's first step, so the run's outcome is read from the transcript.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CronRunMark {
    /// The job.
    pub job_id: String,
    /// The scheduled slot it runs for, or…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_ms: Option<u64>,
    /// …the manual run it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manual_ms: Option<u64>,
    /// When it started.
    pub started_at_ms: u64,
    /// The id of the message that starts its turn (`cron:<jobId>:<slot>`).
    pub message_id: String,
    /// The job's `toolsAllow`: the run is offered only these tools (and gets the minimal
    /// prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_allow: Option<Vec<String>>,
    /// The job's `lightContext`: no workspace files in the run's prompt.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub light_context: bool,
}

/// Who a cron run's turn is from, as its first step records it.
pub const CRON_SENDER_ID: &str = "cron";

/// The message id of a run's turn: `cron:<jobId>:<slot>` or `cron:<jobId>:manual:<ms>`.
pub fn run_message_id(job_id: &str, slot_ms: Option<u64>, manual_ms: Option<u64>) -> String {
    match (slot_ms, manual_ms) {
        (_, Some(manual)) => format!("cron:{job_id}:manual:{manual}"),
        (Some(slot), None) => format!("cron:{job_id}:{slot}"),
        (None, None) => format!("cron:{job_id}"),
    }
}

/// The first line of the error an exec call that needs approval gets in a cron run: nobody
/// is there to answer (spec `openclaw-behaviors.md`, exec approvals).
pub const HEADLESS_EXEC_DENIED: &str =
    "exec denied: Cron runs cannot wait for interactive exec approval.";

/// The whole error of such a call: [`HEADLESS_EXEC_DENIED`] and what to do about it.
pub fn headless_exec_denied_message(command_summary: &str) -> String {
    format!(
        "{HEADLESS_EXEC_DENIED}\nThe command needs a person's approval under the node's exec policy, and a scheduled run has nobody to ask: {command_summary}\nAllow it in the node's exec approvals (allowlist) or run it from a chat, then schedule the job again."
    )
}

/// Appended to an isolated run's message when its result is delivered.
pub const DELIVERY_INSTRUCTION: &str = "Return your summary as plain text; it will be delivered automatically. If the task explicitly calls for messaging a specific external recipient, note who/where it should go instead of sending it yourself.";

/// The `skipped` error of a main-session job whose text is blank.
pub const EMPTY_SYSTEM_EVENT_ERROR: &str = "main job requires non-empty systemEvent text";

/// The error of a run that hit its time limit.
pub const TIMEOUT_ERROR: &str = "cron: job execution timed out";

/// The heartbeat's skip reason when the session is busy.
pub const REQUESTS_IN_FLIGHT: &str = "requests-in-flight";

/// A one-shot main job polls a busy heartbeat this often…
pub const BUSY_POLL_MS: u64 = 250;

/// …for at most this long (2 minutes), then falls back to a wake request.
pub const BUSY_WAIT_MAX_MS: u64 = 120_000;

/// Time limit of an agent-turn run without `timeoutSeconds` (60 minutes).
pub const DEFAULT_AGENT_TURN_TIMEOUT_MS: u64 = 60 * 60_000;

/// Time limit of a system-event run (10 minutes).
pub const SYSTEM_EVENT_TIMEOUT_MS: u64 = 10 * 60_000;

/// The user message of an isolated run: `[cron:<jobId> <name>] <message>`, a newline, the
/// `Current time: …` line, and when the result is delivered a blank line and
/// [`DELIVERY_INSTRUCTION`].
pub fn isolated_run_message(
    job: &CronJob, message: &str, current_time_line: &str, delivery_requested: bool,
) -> String {
    let mut text = format!(
        "[cron:{} {}] {message}\n{current_time_line}",
        job.id, job.name
    );
    if delivery_requested {
        text.push_str("\n\n");
        text.push_str(DELIVERY_INSTRUCTION);
    }
    text
}

/// The session an isolated-like run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSession {
    /// The session key: `agent:<agentId>:cron:<jobId>` for isolated jobs, the target's key
    /// for `session:` jobs.
    pub session_key: String,
    /// The key of this run: `…:run:<sessionId>` for isolated jobs (a fresh session each
    /// run), the session key otherwise.
    pub run_key: String,
    /// Whether the run starts a new session (isolated jobs always do; `session:` targets
    /// keep theirs while the reset policy allows).
    pub fresh: bool,
}

/// The session of a run of `job` (`None` for main-session jobs). `new_session_id` names the
/// fresh session of an isolated run; an unresolved `current` target runs isolated. A
/// `session:` id that is not already an `agent:` key is scoped to the job's agent.
pub fn run_session(
    job: &CronJob, default_agent_id: &str, new_session_id: &str,
) -> Option<RunSession> {
    let agent = normalize_agent_id(job.agent_id.as_deref().unwrap_or(default_agent_id));
    match &job.session_target {
        SessionTarget::Main => None,
        SessionTarget::Isolated | SessionTarget::Current => {
            let session_key = format!("agent:{agent}:cron:{}", job.id).to_lowercase();
            Some(RunSession {
                run_key: format!("{session_key}:run:{new_session_id}"),
                session_key,
                fresh: true,
            })
        }
        SessionTarget::Session(id) => {
            let id = id.trim().to_lowercase();
            let session_key = if id.starts_with("agent:") {
                id
            } else {
                format!("agent:{agent}:{id}")
            };
            Some(RunSession {
                run_key: session_key.clone(),
                session_key,
                fresh: false,
            })
        }
    }
}

/// What a main-session job does when it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MainJobStart {
    /// Nothing: the run is `skipped` with this error ([`EMPTY_SYSTEM_EVENT_ERROR`]).
    Skip {
        /// The error to record.
        error: String,
    },
    /// Enqueue `text` as a system event (context key `cron:<jobId>`) in the job's session,
    /// then run a heartbeat right away with `reason` (target forced to `last`).
    WakeNow {
        /// The event text.
        text: String,
        /// `cron:<jobId>`.
        reason: String,
    },
    /// Enqueue `text`, request a (coalesced) heartbeat wake, and finish `ok` with the text
    /// as summary.
    NextHeartbeat {
        /// The event text.
        text: String,
        /// `cron:<jobId>`.
        reason: String,
    },
}

/// How a main-session job starts: its trimmed event text and wake mode.
pub fn start_main_job(job: &CronJob) -> MainJobStart {
    let text = match &job.payload {
        CronPayload::SystemEvent { text } => text.trim(),
        CronPayload::AgentTurn(_) => "",
    };
    if text.is_empty() {
        return MainJobStart::Skip {
            error: EMPTY_SYSTEM_EVENT_ERROR.to_owned(),
        };
    }
    let reason = format!("cron:{}", job.id);
    match job.wake_mode {
        WakeMode::Now => MainJobStart::WakeNow {
            text: text.to_owned(),
            reason,
        },
        WakeMode::NextHeartbeat => MainJobStart::NextHeartbeat {
            text: text.to_owned(),
            reason,
        },
    }
}

/// What a heartbeat run answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatAnswer {
    /// It ran.
    Ran,
    /// It did not run: `disabled`, `quiet-hours`, `requests-in-flight`, `alerts-disabled`, …
    Skipped(String),
    /// It failed with this message.
    Failed(String),
}

/// The next step of a `wakeMode: "now"` main job after its heartbeat answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MainJobStep {
    /// The run is over with this status, error and summary.
    Finish {
        /// `ok`, `error` or `skipped`.
        status: RunStatus,
        /// The heartbeat's skip reason or failure message.
        error: Option<String>,
        /// The event text, for `ok` runs.
        summary: Option<String>,
    },
    /// The session is busy: ask the heartbeat again after this long.
    RetryAfter {
        /// Milliseconds to wait.
        ms: u64,
    },
    /// The session stayed busy: request a coalesced wake (the event is queued) and finish
    /// `ok`.
    RequestWakeAndFinish,
}

/// Maps a heartbeat's answer to the job's next step. `ran` → `ok`; `skipped` → the run is
/// `skipped` with `error = <reason>` (e.g. `disabled`, `quiet-hours`; the queued event stays
/// for the next turn), except `requests-in-flight`: a recurring job falls back to a wake
/// request at once, a one-shot retries every 250 ms for up to 2 minutes (`waited_ms` so
/// far) first; `failed` → `error`.
pub fn main_job_step(
    job: &CronJob, text: &str, answer: &HeartbeatAnswer, waited_ms: u64,
) -> MainJobStep {
    match answer {
        HeartbeatAnswer::Ran => MainJobStep::Finish {
            status: RunStatus::Ok,
            error: None,
            summary: Some(text.to_owned()),
        },
        HeartbeatAnswer::Skipped(reason) if reason == REQUESTS_IN_FLIGHT => {
            if job.is_one_shot() && waited_ms + BUSY_POLL_MS <= BUSY_WAIT_MAX_MS {
                MainJobStep::RetryAfter { ms: BUSY_POLL_MS }
            } else {
                MainJobStep::RequestWakeAndFinish
            }
        }
        HeartbeatAnswer::Skipped(reason) => MainJobStep::Finish {
            status: RunStatus::Skipped,
            error: Some(reason.clone()),
            summary: None,
        },
        HeartbeatAnswer::Failed(message) => MainJobStep::Finish {
            status: RunStatus::Error,
            error: Some(message.clone()),
            summary: None,
        },
    }
}

/// A run's time limit: an agent turn's `timeoutSeconds` (0 = none, unset = 60 minutes), 10
/// minutes for a system event. On expiry the run fails with [`TIMEOUT_ERROR`].
pub fn job_timeout_ms(job: &CronJob) -> Option<u64> {
    match &job.payload {
        CronPayload::SystemEvent { .. } => Some(SYSTEM_EVENT_TIMEOUT_MS),
        CronPayload::AgentTurn(turn) => match turn.timeout_seconds {
            None => Some(DEFAULT_AGENT_TURN_TIMEOUT_MS),
            Some(0) => None,
            Some(seconds) => Some(seconds.saturating_mul(1_000)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::schedule::tests::{at, job};
    use crate::cron::types::{AgentTurn, CronSchedule};
    use clawless_base::time::{TimeZone, current_time_line};

    fn isolated(id: &str, name: &str, message: &str) -> CronJob {
        let mut job = job(
            id,
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        job.name = name.to_owned();
        job.session_target = SessionTarget::Isolated;
        job.payload = CronPayload::AgentTurn(AgentTurn {
            message: message.to_owned(),
            ..AgentTurn::default()
        });
        job
    }

    #[test]
    fn isolated_runs_get_a_tagged_message_with_the_time_and_delivery_note() {
        // Vector 31.
        let job = isolated("J", "N", "M");
        let line = current_time_line(at("2026-11-26T13:05:00Z"), &TimeZone::UTC);
        assert_eq!(
            isolated_run_message(&job, "M", &line, true),
            "[cron:J N] M\nCurrent time: Thursday, November 26th, 2026 — 13:05 (UTC) / 2026-11-26 13:05 UTC\n\nReturn your summary as plain text; it will be delivered automatically. If the task explicitly calls for messaging a specific external recipient, note who/where it should go instead of sending it yourself."
        );
        assert_eq!(
            isolated_run_message(&job, "M", "Current time: x", false),
            "[cron:J N] M\nCurrent time: x"
        );
        let session = run_session(&job, "main", "6f1c-uuid").expect("isolated");
        assert_eq!(session.run_key, "agent:main:cron:j:run:6f1c-uuid");
        assert_eq!(session.session_key, "agent:main:cron:j");
        assert!(session.fresh);
    }

    #[test]
    fn session_targets_reuse_their_session() {
        let mut job = isolated("j", "n", "m");
        job.agent_id = Some("ops".into());
        job.session_target = SessionTarget::Session("agent:main:telegram:direct:1".into());
        let session = run_session(&job, "main", "x").expect("session");
        assert_eq!(
            (session.session_key.as_str(), session.fresh),
            ("agent:main:telegram:direct:1", false)
        );
        job.session_target = SessionTarget::Session("Project-X".into());
        assert_eq!(
            run_session(&job, "main", "x").map(|s| s.session_key),
            Some("agent:ops:project-x".into())
        );
        job.session_target = SessionTarget::Main;
        assert_eq!(run_session(&job, "main", "x"), None);
    }

    fn main_job(text: &str, wake_mode: WakeMode, schedule: CronSchedule) -> CronJob {
        let mut job = job("J", schedule);
        job.payload = CronPayload::SystemEvent {
            text: text.to_owned(),
        };
        job.wake_mode = wake_mode;
        job
    }

    #[test]
    fn main_jobs_wake_now_or_wait_and_skip_blank_text() {
        let every = CronSchedule::Every {
            every_ms: 1,
            anchor_ms: None,
        };
        assert_eq!(
            start_main_job(&main_job(" Stretch ", WakeMode::Now, every.clone())),
            MainJobStart::WakeNow {
                text: "Stretch".into(),
                reason: "cron:J".into()
            }
        );
        assert_eq!(
            start_main_job(&main_job("Stretch", WakeMode::NextHeartbeat, every.clone())),
            MainJobStart::NextHeartbeat {
                text: "Stretch".into(),
                reason: "cron:J".into()
            }
        );
        assert_eq!(
            start_main_job(&main_job("  ", WakeMode::Now, every)),
            MainJobStart::Skip {
                error: EMPTY_SYSTEM_EVENT_ERROR.into()
            }
        );
    }

    #[test]
    fn heartbeat_skips_become_skipped_runs_with_the_reason() {
        // Vectors 29 and 30.
        let job = main_job(
            "t",
            WakeMode::Now,
            CronSchedule::At {
                at: "2026-01-01T00:00:00.000Z".into(),
            },
        );
        for reason in ["disabled", "quiet-hours"] {
            assert_eq!(
                main_job_step(&job, "t", &HeartbeatAnswer::Skipped(reason.into()), 0),
                MainJobStep::Finish {
                    status: RunStatus::Skipped,
                    error: Some(reason.into()),
                    summary: None
                }
            );
        }
        assert_eq!(
            main_job_step(&job, "t", &HeartbeatAnswer::Ran, 0),
            MainJobStep::Finish {
                status: RunStatus::Ok,
                error: None,
                summary: Some("t".into())
            }
        );
        assert_eq!(
            main_job_step(&job, "t", &HeartbeatAnswer::Failed("model down".into()), 0),
            MainJobStep::Finish {
                status: RunStatus::Error,
                error: Some("model down".into()),
                summary: None
            }
        );
    }

    #[test]
    fn a_busy_session_makes_one_shots_wait_and_recurring_jobs_wake_later() {
        let busy = HeartbeatAnswer::Skipped(REQUESTS_IN_FLIGHT.into());
        let once = main_job(
            "t",
            WakeMode::Now,
            CronSchedule::At {
                at: "2026-01-01T00:00:00.000Z".into(),
            },
        );
        assert_eq!(
            main_job_step(&once, "t", &busy, 0),
            MainJobStep::RetryAfter { ms: 250 }
        );
        assert_eq!(
            main_job_step(&once, "t", &busy, 119_750),
            MainJobStep::RetryAfter { ms: 250 }
        );
        assert_eq!(
            main_job_step(&once, "t", &busy, 119_751),
            MainJobStep::RequestWakeAndFinish
        );
        let every = main_job(
            "t",
            WakeMode::Now,
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        assert_eq!(
            main_job_step(&every, "t", &busy, 0),
            MainJobStep::RequestWakeAndFinish
        );
    }

    #[test]
    fn time_limits_follow_the_payload() {
        let mut turn = isolated("j", "n", "m");
        assert_eq!(job_timeout_ms(&turn), Some(3_600_000));
        if let CronPayload::AgentTurn(agent) = &mut turn.payload {
            agent.timeout_seconds = Some(0);
        }
        assert_eq!(job_timeout_ms(&turn), None);
        if let CronPayload::AgentTurn(agent) = &mut turn.payload {
            agent.timeout_seconds = Some(90);
        }
        assert_eq!(job_timeout_ms(&turn), Some(90_000));
        let event = main_job(
            "t",
            WakeMode::Now,
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        assert_eq!(job_timeout_ms(&event), Some(600_000));
    }
}
