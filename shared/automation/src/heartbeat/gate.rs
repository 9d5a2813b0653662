//! Whether one heartbeat runs, and with which prompt: OpenClaw's gates in their order, over
//! facts the caller gathered (config, clock, lane state, pending events, `HEARTBEAT.md`, task
//! runs, visibility). Either a [`HeartbeatRunPlan`] to hand to the turn engine, or the
//! [`SkipReason`] to report.

use clawless_base::time::TimeZone;

use super::config::{HeartbeatConfig, HeartbeatVisibility};
use super::file::{
    HeartbeatFile, HeartbeatTaskState, context_outside_tasks, due_tasks, is_effectively_empty,
    parse_tasks,
};
use super::prompt::{
    HeartbeatPromptKind, PendingSystemEvent, cron_reminder_prompt, cron_reminder_texts,
    exec_completion_prompt, task_prompt, with_current_time, with_heartbeat_file_path,
};
use super::reason::HeartbeatReason;
use super::run::SkipReason;
use super::schedule::is_within_active_hours;

/// Everything the gates look at for one heartbeat of one agent.
#[derive(Debug, Clone, Copy)]
pub struct HeartbeatRunFacts<'a> {
    /// The global heartbeat switch (`system heartbeat enable|disable`).
    pub heartbeats_enabled: bool,
    /// The agent's effective settings when it runs heartbeats at all
    /// ([`super::config::heartbeat_agents`]); `None` when it does not.
    pub config: Option<&'a HeartbeatConfig>,
    /// Why the heartbeat was asked for.
    pub reason: &'a HeartbeatReason,
    /// Now, in epoch milliseconds.
    pub now_ms: u64,
    /// The user's zone (`agents.defaults.userTimezone`, UTC when unset): active hours in
    /// `user` time and the `Current time:` line.
    pub user_tz: &'a TimeZone,
    /// The agent's main command lane has queued or running work.
    pub main_lane_busy: bool,
    /// The heartbeat's own session ([`super::session::resolve_heartbeat_session`]) is busy.
    pub session_busy: bool,
    /// The session's pending system events.
    pub pending_events: &'a [PendingSystemEvent],
    /// `HEARTBEAT.md` of the agent's workspace. Not consulted when the reason or a
    /// `cron:`-tagged event bypasses it.
    pub heartbeat_file: HeartbeatFile<'a>,
    /// When each `HEARTBEAT.md` task last ran.
    pub task_state: &'a HeartbeatTaskState,
    /// What the target channel may show.
    pub visibility: HeartbeatVisibility,
    /// A target channel and a recipient were resolved: a reply could reach someone.
    pub delivery_resolved: bool,
    /// The workspace path the prompt points at for `HEARTBEAT.md`.
    pub workspace_dir: &'a str,
}

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatRunPlan {
    /// The user message of the heartbeat turn, time line included.
    pub prompt: String,
    /// What the prompt is about (the run's provider label follows from it).
    pub kind: HeartbeatPromptKind,
    /// The tasks due in this run: record them with [`super::file::record_task_runs`] once the
    /// run completes without being skipped.
    pub due_tasks: Vec<String>,
    /// The reply can reach the user; [`HeartbeatPromptKind::ExecCompletion`] and
    /// [`HeartbeatPromptKind::CronReminder`] prompts were worded for it.
    pub deliverable: bool,
}

/// The gates' verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatDecision {
    /// Call the model with this plan.
    Run(HeartbeatRunPlan),
    /// Do not; report this reason. After [`SkipReason::NoTasksDue`] the pending events that
    /// were looked at count as consumed.
    Skipped(SkipReason),
}

/// Runs OpenClaw's gates, in order:
///
/// 1. heartbeats off globally, for the agent, or no interval → `disabled`;
/// 2. outside active hours → `quiet-hours`;
/// 3. the main lane busy → `requests-in-flight`;
/// 4. unless the reason ([`HeartbeatReason::bypasses_heartbeat_file`]) or a `cron:`-tagged
///    pending event bypasses it, a present but effectively empty `HEARTBEAT.md` without tasks
///    → `empty-heartbeat-file` (a missing or unreadable file runs);
/// 5. the heartbeat's session busy → `requests-in-flight`;
/// 6. the prompt, by precedence: due tasks; a finished command; a cron reminder; the
///    configured or default prompt. Tasks present but none due → `no-tasks-due`;
/// 7. nothing could be shown (`showOk`, `showAlerts` and `useIndicator` all off) →
///    `alerts-disabled`.
///
/// Pending events are only read for prompts when the file was bypassed; then the file's
/// tasks are not considered either.
pub fn decide_heartbeat_run(facts: &HeartbeatRunFacts<'_>) -> HeartbeatDecision {
    let config = match facts.config {
        Some(config) if facts.heartbeats_enabled && config.interval_ms().is_some() => config,
        _ => return HeartbeatDecision::Skipped(SkipReason::Disabled),
    };
    if !is_within_active_hours(config.active_hours.as_ref(), facts.now_ms, facts.user_tz) {
        return HeartbeatDecision::Skipped(SkipReason::QuietHours);
    }
    if facts.main_lane_busy {
        return HeartbeatDecision::Skipped(SkipReason::RequestsInFlight);
    }
    let bypass_file = facts.reason.bypasses_heartbeat_file()
        || facts
            .pending_events
            .iter()
            .any(PendingSystemEvent::is_cron_tagged);
    let file_text = match facts.heartbeat_file {
        HeartbeatFile::Present(text) if !bypass_file => Some(text),
        _ => None,
    };
    let tasks = file_text.map(parse_tasks).unwrap_or_default();
    if tasks.is_empty() && is_effectively_empty(file_text) {
        return HeartbeatDecision::Skipped(SkipReason::EmptyHeartbeatFile);
    }
    if facts.session_busy {
        return HeartbeatDecision::Skipped(SkipReason::RequestsInFlight);
    }

    let deliverable = facts.delivery_resolved && facts.visibility.show_alerts;
    let (body, kind, due_names) = if tasks.is_empty() {
        let (body, kind) = untasked_body(facts, config, bypass_file, deliverable);
        (body, kind, Vec::new())
    } else {
        let due = due_tasks(&tasks, facts.task_state, facts.now_ms);
        if due.is_empty() {
            return HeartbeatDecision::Skipped(SkipReason::NoTasksDue);
        }
        let context = file_text.map(context_outside_tasks).unwrap_or_default();
        let names = due.iter().map(|task| task.name.clone()).collect();
        (
            task_prompt(&due, &context),
            HeartbeatPromptKind::Tasks,
            names,
        )
    };
    if facts.visibility.shows_nothing() {
        return HeartbeatDecision::Skipped(SkipReason::AlertsDisabled);
    }
    HeartbeatDecision::Run(HeartbeatRunPlan {
        prompt: with_current_time(&body, facts.now_ms, facts.user_tz),
        kind,
        due_tasks: due_names,
        deliverable,
    })
}

/// The prompt body when `HEARTBEAT.md` has no tasks: a finished command, else a cron reminder
/// (both only when pending events are read), else the configured prompt with its file path.
fn untasked_body(
    facts: &HeartbeatRunFacts<'_>, config: &HeartbeatConfig, read_events: bool, deliverable: bool,
) -> (String, HeartbeatPromptKind) {
    if read_events {
        if facts
            .pending_events
            .iter()
            .any(|event| event.exec_completion)
        {
            return (
                exec_completion_prompt(deliverable),
                HeartbeatPromptKind::ExecCompletion,
            );
        }
        let cron_texts = cron_reminder_texts(facts.pending_events, facts.reason.is_cron());
        if !cron_texts.is_empty() || facts.reason.is_cron() {
            return (
                cron_reminder_prompt(&cron_texts, deliverable),
                HeartbeatPromptKind::CronReminder,
            );
        }
    }
    (
        with_heartbeat_file_path(config.prompt_body(), facts.workspace_dir),
        HeartbeatPromptKind::Poll,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::heartbeat::config::{ActiveHoursConfig, DEFAULT_HEARTBEAT_PROMPT};

    const MINUTE: u64 = 60_000;
    /// 2026-11-26T13:05:00Z, a Thursday.
    const NOW: u64 = 1_795_698_300_000;
    const TIME_LINE: &str =
        "Current time: Thursday, November 26th, 2026 — 13:05 (UTC) / 2026-11-26 13:05 UTC";
    const INBOX: &str = "tasks:\n  - name: inbox\n    interval: 30m\n    prompt: \"Check mail\"";

    struct Scenario {
        config: HeartbeatConfig,
        reason: HeartbeatReason,
        events: Vec<PendingSystemEvent>,
        task_state: HeartbeatTaskState,
        file: Option<&'static str>,
        main_lane_busy: bool,
        session_busy: bool,
        visibility: HeartbeatVisibility,
        delivery_resolved: bool,
    }

    impl Scenario {
        fn new() -> Self {
            Self {
                config: HeartbeatConfig::default(),
                reason: HeartbeatReason::Interval,
                events: Vec::new(),
                task_state: HeartbeatTaskState::new(),
                file: None,
                main_lane_busy: false,
                session_busy: false,
                visibility: HeartbeatVisibility::default(),
                delivery_resolved: false,
            }
        }

        fn decide(&self) -> HeartbeatDecision {
            decide_heartbeat_run(&HeartbeatRunFacts {
                heartbeats_enabled: true,
                config: Some(&self.config),
                reason: &self.reason,
                now_ms: NOW,
                user_tz: &TimeZone::UTC,
                main_lane_busy: self.main_lane_busy,
                session_busy: self.session_busy,
                pending_events: &self.events,
                heartbeat_file: self
                    .file
                    .map_or(HeartbeatFile::Missing, HeartbeatFile::Present),
                task_state: &self.task_state,
                visibility: self.visibility,
                delivery_resolved: self.delivery_resolved,
                workspace_dir: "/ws",
            })
        }

        fn plan(&self) -> HeartbeatRunPlan {
            match self.decide() {
                HeartbeatDecision::Run(plan) => plan,
                HeartbeatDecision::Skipped(reason) => panic!("skipped: {reason}"),
            }
        }
    }

    fn cron_event(text: &str) -> PendingSystemEvent {
        PendingSystemEvent {
            text: text.into(),
            context_key: Some("cron:job-1".into()),
            exec_completion: false,
            at_ms: 0,
        }
    }

    #[test]
    fn a_busy_main_lane_skips_as_requests_in_flight() {
        // Spec §6 vector 12 (the gate; the schedule and retry side are in `schedule`).
        let mut scenario = Scenario::new();
        scenario.main_lane_busy = true;
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::RequestsInFlight)
        );
        let mut session_busy = Scenario::new();
        session_busy.session_busy = true;
        assert_eq!(
            session_busy.decide(),
            HeartbeatDecision::Skipped(SkipReason::RequestsInFlight)
        );
    }

    #[test]
    fn nothing_visible_skips_before_any_model_call() {
        // Spec §6 vector 15.
        let mut scenario = Scenario::new();
        scenario.visibility = HeartbeatVisibility {
            show_ok: false,
            show_alerts: false,
            use_indicator: false,
        };
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::AlertsDisabled)
        );
    }

    #[test]
    fn a_tasks_file_with_nothing_due_skips_and_a_due_task_gets_the_task_prompt() {
        // Spec §6 vector 16.
        let mut scenario = Scenario::new();
        scenario.file = Some(INBOX);
        scenario.task_state = HeartbeatTaskState::from([("inbox".into(), NOW - 10 * MINUTE)]);
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::NoTasksDue)
        );

        scenario.task_state.clear();
        let plan = scenario.plan();
        assert_eq!(
            plan.prompt,
            format!(
                "Run the following periodic tasks (only those due based on their intervals):\n\n- inbox: Check mail\n\nAfter completing all due tasks, reply HEARTBEAT_OK.\n{TIME_LINE}"
            )
        );
        assert_eq!(plan.kind, HeartbeatPromptKind::Tasks);
        assert_eq!(plan.due_tasks, ["inbox"]);
    }

    #[test]
    fn disabled_comes_first() {
        let off = HeartbeatConfig {
            every: Some("0m".into()),
            ..HeartbeatConfig::default()
        };
        let mut scenario = Scenario::new();
        scenario.config = off;
        scenario.main_lane_busy = true;
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::Disabled)
        );

        let config = HeartbeatConfig::default();
        for (enabled, config) in [(false, Some(&config)), (true, None)] {
            let facts = HeartbeatRunFacts {
                heartbeats_enabled: enabled,
                config,
                reason: &HeartbeatReason::Manual,
                now_ms: NOW,
                user_tz: &TimeZone::UTC,
                main_lane_busy: false,
                session_busy: false,
                pending_events: &[],
                heartbeat_file: HeartbeatFile::Missing,
                task_state: &HeartbeatTaskState::new(),
                visibility: HeartbeatVisibility::default(),
                delivery_resolved: false,
                workspace_dir: "/ws",
            };
            assert_eq!(
                decide_heartbeat_run(&facts),
                HeartbeatDecision::Skipped(SkipReason::Disabled)
            );
        }
    }

    #[test]
    fn quiet_hours_come_before_a_busy_lane() {
        let mut scenario = Scenario::new();
        scenario.config.active_hours = Some(ActiveHoursConfig {
            start: Some("22:00".into()),
            end: Some("06:00".into()),
            timezone: None,
        });
        scenario.main_lane_busy = true;
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::QuietHours)
        );
    }

    #[test]
    fn an_empty_heartbeat_file_skips_but_a_missing_one_runs_the_default_prompt() {
        let mut scenario = Scenario::new();
        scenario.file = Some("# Heartbeat\n\n- [ ]\n");
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::EmptyHeartbeatFile)
        );
        // The empty file is checked before the session lane.
        scenario.session_busy = true;
        assert_eq!(
            scenario.decide(),
            HeartbeatDecision::Skipped(SkipReason::EmptyHeartbeatFile)
        );

        let missing = Scenario::new().plan();
        assert_eq!(missing.kind, HeartbeatPromptKind::Poll);
        assert_eq!(
            missing.prompt,
            format!(
                "{DEFAULT_HEARTBEAT_PROMPT}\nWhen reading HEARTBEAT.md, use workspace file /ws/HEARTBEAT.md (exact case). Do not read docs/heartbeat.md.\n{TIME_LINE}"
            )
        );
        let unreadable = decide_heartbeat_run(&HeartbeatRunFacts {
            heartbeats_enabled: true,
            config: Some(&HeartbeatConfig::default()),
            reason: &HeartbeatReason::Interval,
            now_ms: NOW,
            user_tz: &TimeZone::UTC,
            main_lane_busy: false,
            session_busy: false,
            pending_events: &[],
            heartbeat_file: HeartbeatFile::Unreadable,
            task_state: &HeartbeatTaskState::new(),
            visibility: HeartbeatVisibility::default(),
            delivery_resolved: false,
            workspace_dir: "/ws",
        });
        assert!(matches!(unreadable, HeartbeatDecision::Run(_)));
    }

    #[test]
    fn cron_exec_wake_and_hook_reasons_bypass_an_empty_heartbeat_file() {
        for reason in [
            "cron:job-1",
            "exec-event",
            "wake",
            "hook:gmail",
            "acp:spawn:s",
        ] {
            let mut scenario = Scenario::new();
            scenario.file = Some("# nothing");
            scenario.reason = HeartbeatReason::parse(reason);
            assert!(
                matches!(scenario.decide(), HeartbeatDecision::Run(_)),
                "{reason}"
            );
        }
        // So does a pending cron-tagged event on a plain interval tick.
        let mut tagged = Scenario::new();
        tagged.file = Some("# nothing");
        tagged.events = vec![cron_event("Stand-up in 5 minutes")];
        assert_eq!(tagged.plan().kind, HeartbeatPromptKind::CronReminder);
    }

    #[test]
    fn a_bypassing_reason_ignores_the_files_tasks() {
        let mut scenario = Scenario::new();
        scenario.file = Some(INBOX);
        scenario.reason = HeartbeatReason::Wake;
        scenario.task_state = HeartbeatTaskState::from([("inbox".into(), NOW)]);
        let plan = scenario.plan();
        assert_eq!(plan.kind, HeartbeatPromptKind::Poll);
        assert!(plan.due_tasks.is_empty());
    }

    #[test]
    fn prompt_precedence_is_tasks_then_exec_then_cron_then_the_configured_prompt() {
        let exec = PendingSystemEvent {
            text: "Exec finished (code 0)".into(),
            context_key: None,
            exec_completion: true,
            at_ms: 0,
        };
        // Exec beats cron.
        let mut scenario = Scenario::new();
        scenario.reason = HeartbeatReason::parse("cron:job-1");
        scenario.events = vec![cron_event("Call mom"), exec.clone()];
        assert_eq!(scenario.plan().kind, HeartbeatPromptKind::ExecCompletion);
        // Cron beats the configured prompt, and is worded for delivery when it can reach the
        // user.
        scenario.events = vec![cron_event("Call mom")];
        scenario.delivery_resolved = true;
        let plan = scenario.plan();
        assert_eq!(plan.kind, HeartbeatPromptKind::CronReminder);
        assert!(plan.deliverable);
        assert_eq!(
            plan.prompt,
            format!(
                "A scheduled reminder has been triggered. The reminder content is:\n\nCall mom\n\nPlease relay this reminder to the user in a helpful and friendly way.\n{TIME_LINE}"
            )
        );
        // Without showAlerts the reminder is handled internally.
        scenario.visibility.show_alerts = false;
        let internal = scenario.plan();
        assert!(!internal.deliverable);
        assert!(internal.prompt.contains("Handle this reminder internally."));
        // A cron wake whose event is gone still gets the (empty) cron prompt.
        scenario.events.clear();
        assert!(
            scenario.plan().prompt.starts_with(
                "A scheduled cron event was triggered, but no event content was found."
            )
        );
        // Due tasks beat pending events on an interval tick (events are not read there).
        let mut tasks = Scenario::new();
        tasks.file = Some(INBOX);
        tasks.events = vec![exec];
        assert_eq!(tasks.plan().kind, HeartbeatPromptKind::Tasks);
        // A configured prompt replaces the default one; no HEARTBEAT.md mention, no path line.
        let mut custom = Scenario::new();
        custom.config.prompt = Some("Anything new?".into());
        assert_eq!(custom.plan().prompt, format!("Anything new?\n{TIME_LINE}"));
    }

    #[test]
    fn exec_events_only_count_when_the_file_is_bypassed() {
        let mut scenario = Scenario::new();
        scenario.events = vec![PendingSystemEvent {
            text: "Exec finished".into(),
            context_key: None,
            exec_completion: true,
            at_ms: 0,
        }];
        assert_eq!(scenario.plan().kind, HeartbeatPromptKind::Poll);
        scenario.reason = HeartbeatReason::ExecEvent;
        assert_eq!(scenario.plan().kind, HeartbeatPromptKind::ExecCompletion);
    }
}
