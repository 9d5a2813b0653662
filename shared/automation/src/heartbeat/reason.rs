//! Why a heartbeat was asked for (`interval`, `manual`, `cron:<jobId>`, …): parsing the
//! reason strings, which reasons skip the `HEARTBEAT.md` checks, and which of two pending
//! wakes for the same target wins.

use std::fmt;

/// The trigger of one heartbeat, parsed from its reason string.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HeartbeatReason {
    /// The agent's interval came round (`interval`).
    Interval,
    /// A wake re-fired after `requests-in-flight` or a failure (`retry`).
    Retry,
    /// A person asked for one (`manual`).
    Manual,
    /// A background command finished (`exec-event`).
    ExecEvent,
    /// The `wake` action of the cron tool or a system event with `--mode now` (`wake`).
    Wake,
    /// A cron job's main-session wake: everything after `cron:` (`<jobId>`,
    /// `<jobId>:failure-alert`, `<jobId>:auto-disabled`).
    Cron(String),
    /// A hook: everything after `hook:`.
    Hook(String),
    /// A spawned ACP session: everything after `acp:spawn:`.
    AcpSpawn(String),
    /// A request without a reason (`requested`).
    Requested,
    /// Any other reason string, kept as given.
    Other(String),
}

impl HeartbeatReason {
    /// Parses a reason string; blank means [`HeartbeatReason::Requested`].
    pub fn parse(raw: &str) -> Self {
        let reason = raw.trim();
        if let Some(job) = reason.strip_prefix("cron:") {
            return Self::Cron(job.to_owned());
        }
        if let Some(hook) = reason.strip_prefix("hook:") {
            return Self::Hook(hook.to_owned());
        }
        if let Some(spawn) = reason.strip_prefix("acp:spawn:") {
            return Self::AcpSpawn(spawn.to_owned());
        }
        match reason {
            "interval" => Self::Interval,
            "retry" => Self::Retry,
            "manual" => Self::Manual,
            "exec-event" => Self::ExecEvent,
            "wake" => Self::Wake,
            "" | "requested" => Self::Requested,
            other => Self::Other(other.to_owned()),
        }
    }

    /// True for the reasons that run the heartbeat without looking at `HEARTBEAT.md`: it is
    /// neither required to have content nor scanned for tasks, because the heartbeat carries
    /// its own news (`exec-event`, `cron:*`, `wake`, `hook:*`, `acp:spawn:*`).
    pub fn bypasses_heartbeat_file(&self) -> bool {
        matches!(
            self,
            Self::ExecEvent | Self::Cron(_) | Self::Wake | Self::Hook(_) | Self::AcpSpawn(_)
        )
    }

    /// True for a cron job's wake.
    pub fn is_cron(&self) -> bool {
        matches!(self, Self::Cron(_))
    }

    /// Which of two pending wakes for one target is kept: the higher number (`retry` 0,
    /// `interval` 1, actions 3 (`manual`, `exec-event`, `hook:*`), anything else 2).
    pub fn priority(&self) -> u8 {
        match self {
            Self::Retry => 0,
            Self::Interval => 1,
            Self::Manual | Self::ExecEvent | Self::Hook(_) => 3,
            Self::Wake | Self::Cron(_) | Self::AcpSpawn(_) | Self::Requested | Self::Other(_) => 2,
        }
    }
}

impl fmt::Display for HeartbeatReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Interval => f.write_str("interval"),
            Self::Retry => f.write_str("retry"),
            Self::Manual => f.write_str("manual"),
            Self::ExecEvent => f.write_str("exec-event"),
            Self::Wake => f.write_str("wake"),
            Self::Cron(job) => write!(f, "cron:{job}"),
            Self::Hook(hook) => write!(f, "hook:{hook}"),
            Self::AcpSpawn(spawn) => write!(f, "acp:spawn:{spawn}"),
            Self::Requested => f.write_str("requested"),
            Self::Other(other) => f.write_str(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_strings_round_trip() {
        for raw in [
            "interval",
            "retry",
            "manual",
            "exec-event",
            "wake",
            "cron:job-1",
            "cron:job-1:failure-alert",
            "hook:gmail",
            "acp:spawn:abc",
            "requested",
            "something-else",
        ] {
            assert_eq!(HeartbeatReason::parse(raw).to_string(), raw);
        }
        assert_eq!(HeartbeatReason::parse("  "), HeartbeatReason::Requested);
        assert_eq!(
            HeartbeatReason::parse("cron:job-1:auto-disabled"),
            HeartbeatReason::Cron("job-1:auto-disabled".into())
        );
    }

    #[test]
    fn exec_cron_wake_hook_and_acp_reasons_bypass_the_heartbeat_file() {
        for raw in ["exec-event", "cron:j", "wake", "hook:x", "acp:spawn:y"] {
            assert!(
                HeartbeatReason::parse(raw).bypasses_heartbeat_file(),
                "{raw}"
            );
        }
        for raw in ["interval", "retry", "manual", "requested", "other"] {
            assert!(
                !HeartbeatReason::parse(raw).bypasses_heartbeat_file(),
                "{raw}"
            );
        }
    }

    #[test]
    fn actions_outrank_other_wakes_which_outrank_interval_and_retry() {
        let priority = |raw: &str| HeartbeatReason::parse(raw).priority();
        assert!(priority("retry") < priority("interval"));
        assert!(priority("interval") < priority("cron:j"));
        assert_eq!(priority("cron:j"), priority("wake"));
        assert!(priority("wake") < priority("manual"));
        assert_eq!(priority("manual"), priority("exec-event"));
        assert_eq!(priority("manual"), priority("hook:x"));
    }
}
