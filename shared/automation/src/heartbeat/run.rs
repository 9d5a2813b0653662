//! The result of one heartbeat (`ran` / `skipped` / `failed`) and OpenClaw's skip reasons,
//! as the scheduler, the wake retry and the status display see them.

use std::fmt;

/// Why a heartbeat did not call the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// Heartbeats are off (globally, for the agent, or `every` gives no interval).
    Disabled,
    /// Outside `activeHours`.
    QuietHours,
    /// The agent is busy (the main lane or the heartbeat's session has work); retried later.
    RequestsInFlight,
    /// `HEARTBEAT.md` exists but has nothing to act on.
    EmptyHeartbeatFile,
    /// `HEARTBEAT.md` has tasks, none of them due.
    NoTasksDue,
    /// The channel may show neither acknowledgements, alerts nor an indicator.
    AlertsDisabled,
}

impl SkipReason {
    /// The reason as OpenClaw spells it (`quiet-hours`, `requests-in-flight`, …).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Disabled => "disabled",
            Self::QuietHours => "quiet-hours",
            Self::RequestsInFlight => "requests-in-flight",
            Self::EmptyHeartbeatFile => "empty-heartbeat-file",
            Self::NoTasksDue => "no-tasks-due",
            Self::AlertsDisabled => "alerts-disabled",
        }
    }
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one heartbeat ended. A heartbeat whose reply was an acknowledgement, a duplicate or
/// had nowhere to go still `Ran`: the model was called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeartbeatRunResult {
    /// The model was called.
    Ran {
        /// How long the turn took.
        duration_ms: u64,
    },
    /// A gate stopped it before the model call.
    Skipped(SkipReason),
    /// The model or the runtime failed; the message says how.
    Failed(String),
}

impl HeartbeatRunResult {
    /// `ran`, `skipped` or `failed`.
    pub fn status(&self) -> &'static str {
        match self {
            Self::Ran { .. } => "ran",
            Self::Skipped(_) => "skipped",
            Self::Failed(_) => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skip_reasons_use_openclaw_spellings() {
        let all = [
            (SkipReason::Disabled, "disabled"),
            (SkipReason::QuietHours, "quiet-hours"),
            (SkipReason::RequestsInFlight, "requests-in-flight"),
            (SkipReason::EmptyHeartbeatFile, "empty-heartbeat-file"),
            (SkipReason::NoTasksDue, "no-tasks-due"),
            (SkipReason::AlertsDisabled, "alerts-disabled"),
        ];
        for (reason, text) in all {
            assert_eq!(reason.to_string(), text);
        }
        assert_eq!(HeartbeatRunResult::Ran { duration_ms: 1 }.status(), "ran");
        assert_eq!(
            HeartbeatRunResult::Skipped(SkipReason::Disabled).status(),
            "skipped"
        );
        assert_eq!(HeartbeatRunResult::Failed("x".into()).status(), "failed");
    }
}
