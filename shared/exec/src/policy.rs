//! Approval modes (spec §7.1, §7.2, §7.8): when a person is asked, what they may answer,
//! what happens when nobody answers, and the exact denial strings a node returns.
//!
//! clawless's node defaults are secure, like OpenClaw's node host and unlike its gateway:
//! security `allowlist`, ask `on-miss`, and askFallback `deny` (deviation `ask-fallback-deny`:
//! OpenClaw's node falls back to its allowlist, `min(allowlist, full)`), so an approval nobody
//! answers never runs the command. With `ask: always` that matters: the operator wants a
//! person for every command, and an agent could otherwise ask at night and wait the 30
//! minutes out.
//!
//! OpenClaw's gateway asks for every heredoc in allowlist mode; its node, which clawless's
//! node is, does not, and neither does clawless: the enforced command carries heredoc bodies
//! literally.

use serde::{Deserialize, Serialize};

use super::{Ask, Platform, Security};

/// The warning shown when an allowlisted command cannot be rebuilt for enforcement (§7.8).
pub fn enforcement_unavailable_warning(platform: Platform) -> String {
    format!(
        "Warning: allowlist auto-execution is unavailable on {}; explicit approval is required.",
        platform_name(platform)
    )
}

/// The name a node reports for its platform (`linux`, `darwin`, `win32`).
pub fn platform_name(platform: Platform) -> &'static str {
    match platform {
        Platform::Linux => "linux",
        Platform::Darwin => "darwin",
        Platform::Windows => "win32",
        Platform::Other => "unknown",
    }
}

/// `requiresExecApproval` (§7.1): ask=always always asks; a durable approval (allow-always
/// entries covering every segment) never asks otherwise; on-miss asks in allowlist mode
/// when the analysis failed or the allowlist is not satisfied.
pub fn requires_exec_approval(
    ask: Ask, security: Security, analysis_ok: bool, allowlist_satisfied: bool,
    durable_approval_satisfied: bool,
) -> bool {
    if ask == Ask::Always {
        return true;
    }
    if durable_approval_satisfied {
        return false;
    }
    ask == Ask::OnMiss && security == Security::Allowlist && (!analysis_ok || !allowlist_satisfied)
}

/// The stricter of two security levels (deny < allowlist < full).
pub fn min_security(a: Security, b: Security) -> Security {
    a.min(b)
}

/// The more asking of two ask modes (off < on-miss < always).
pub fn max_ask(a: Ask, b: Ask) -> Ask {
    a.max(b)
}

/// A person's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalDecision {
    /// Run this once.
    AllowOnce,
    /// Run this and remember it (allowlist entries are added).
    AllowAlways,
    /// Do not run it.
    Deny,
}

impl ApprovalDecision {
    /// The wire and chat form (`allow-once`, `allow-always`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllowOnce => "allow-once",
            Self::AllowAlways => "allow-always",
            Self::Deny => "deny",
        }
    }
}

/// The answers offered: ask=always cannot be made permanent, so it offers no allow-always.
pub fn allowed_decisions(ask: Ask) -> &'static [ApprovalDecision] {
    match ask {
        Ask::Always => &[ApprovalDecision::AllowOnce, ApprovalDecision::Deny],
        Ask::Off | Ask::OnMiss => &[
            ApprovalDecision::AllowOnce,
            ApprovalDecision::AllowAlways,
            ApprovalDecision::Deny,
        ],
    }
}

/// The policy knobs before any allowlist: where clawless starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecDefaults {
    /// How much may run.
    pub security: Security,
    /// When a person is asked.
    pub ask: Ask,
    /// What an unanswered approval falls back to.
    pub ask_fallback: Security,
    /// Whether skill binaries are allowed without entries.
    pub auto_allow_skills: bool,
}

impl ExecDefaults {
    /// A clawless node host: allowlist, ask on a miss, an unanswered approval is denied.
    pub const NODE: Self = Self {
        security: Security::Allowlist,
        ask: Ask::OnMiss,
        ask_fallback: Security::Deny,
        auto_allow_skills: false,
    };
}

/// Why a command did not run, as reported after an approval (§7.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum ExecDenialReason {
    /// The person denied it.
    #[serde(rename = "user-denied")]
    UserDenied,
    /// Nobody answered and the fallback denies.
    #[serde(rename = "approval-timeout")]
    ApprovalTimeout,
    /// Nobody answered; the allowlist fallback did not cover the command.
    #[serde(rename = "approval-timeout (allowlist-miss)")]
    ApprovalTimeoutAllowlistMiss,
    /// The allowlist did not cover it and nobody may be asked.
    #[serde(rename = "allowlist-miss")]
    AllowlistMiss,
}

impl ExecDenialReason {
    /// The exact reason text (`approval-timeout (allowlist-miss)`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserDenied => "user-denied",
            Self::ApprovalTimeout => "approval-timeout",
            Self::ApprovalTimeoutAllowlistMiss => "approval-timeout (allowlist-miss)",
            Self::AllowlistMiss => "allowlist-miss",
        }
    }
}

/// What happens when an approval times out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome", content = "reason")]
pub enum FallbackOutcome {
    /// The command runs.
    Run,
    /// The command does not run, for this reason.
    Deny(ExecDenialReason),
}

/// askFallback on an approval timeout (§7.8): `full` runs; `deny` is `approval-timeout`;
/// `allowlist` runs only an analysed, allowlist-satisfied command, else
/// `approval-timeout (allowlist-miss)`.
pub fn ask_fallback_outcome(
    ask_fallback: Security, analysis_ok: bool, allowlist_satisfied: bool,
) -> FallbackOutcome {
    match ask_fallback {
        Security::Full => FallbackOutcome::Run,
        Security::Deny => FallbackOutcome::Deny(ExecDenialReason::ApprovalTimeout),
        Security::Allowlist if analysis_ok && allowlist_satisfied => FallbackOutcome::Run,
        Security::Allowlist => {
            FallbackOutcome::Deny(ExecDenialReason::ApprovalTimeoutAllowlistMiss)
        }
    }
}

/// A node host's refusal of a `system.run` on policy grounds (§7.8, §8.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeDenial {
    /// security=deny: nothing runs.
    SecurityDeny,
    /// A person must approve and has not.
    ApprovalRequired,
    /// allowlist mode, not covered, and nobody may be asked.
    AllowlistMiss,
}

impl NodeDenial {
    /// The invoke error message, exactly.
    pub fn message(self) -> &'static str {
        match self {
            Self::SecurityDeny => "SYSTEM_RUN_DISABLED: security=deny",
            Self::ApprovalRequired => "SYSTEM_RUN_DENIED: approval required",
            Self::AllowlistMiss => "SYSTEM_RUN_DENIED: allowlist miss",
        }
    }

    /// The `exec.denied` event reason.
    pub fn reason(self) -> &'static str {
        match self {
            Self::SecurityDeny => "security=deny",
            Self::ApprovalRequired => "approval-required",
            Self::AllowlistMiss => "allowlist-miss",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requires_exec_approval_spec_vectors_hold() {
        use Ask::*;
        use Security::*;
        assert!(requires_exec_approval(Always, Allowlist, true, true, false));
        assert!(requires_exec_approval(Always, Full, true, true, true));
        assert!(!requires_exec_approval(Off, Allowlist, true, false, false));
        assert!(!requires_exec_approval(
            OnMiss, Allowlist, true, true, false
        ));
        assert!(requires_exec_approval(
            OnMiss, Allowlist, false, false, false
        ));
        assert!(!requires_exec_approval(OnMiss, Full, false, false, false));
    }

    #[test]
    fn a_durable_approval_skips_on_miss_but_not_always() {
        assert!(!requires_exec_approval(
            Ask::OnMiss,
            Security::Allowlist,
            true,
            false,
            true
        ));
        assert!(requires_exec_approval(
            Ask::Always,
            Security::Allowlist,
            true,
            false,
            true
        ));
    }

    #[test]
    fn min_security_and_max_ask_follow_their_orders() {
        assert_eq!(
            min_security(Security::Full, Security::Allowlist),
            Security::Allowlist
        );
        assert_eq!(min_security(Security::Deny, Security::Full), Security::Deny);
        assert_eq!(max_ask(Ask::Off, Ask::OnMiss), Ask::OnMiss);
        assert_eq!(max_ask(Ask::Always, Ask::OnMiss), Ask::Always);
    }

    #[test]
    fn ask_always_offers_no_allow_always() {
        let strings = |ask| {
            allowed_decisions(ask)
                .iter()
                .map(|d| d.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(strings(Ask::Always), ["allow-once", "deny"]);
        assert_eq!(strings(Ask::OnMiss), ["allow-once", "allow-always", "deny"]);
        assert_eq!(strings(Ask::Off), ["allow-once", "allow-always", "deny"]);
    }

    #[test]
    fn node_defaults_are_secure() {
        assert_eq!(ExecDefaults::NODE.security, Security::Allowlist);
        assert_eq!(ExecDefaults::NODE.ask, Ask::OnMiss);
        assert_eq!(ExecDefaults::NODE.ask_fallback, Security::Deny);
        let node = ExecDefaults::NODE;
        assert!(!node.auto_allow_skills);
    }

    #[test]
    fn ask_fallback_follows_the_spec() {
        assert_eq!(
            ask_fallback_outcome(Security::Full, false, false),
            FallbackOutcome::Run
        );
        assert_eq!(
            ask_fallback_outcome(Security::Deny, true, true),
            FallbackOutcome::Deny(ExecDenialReason::ApprovalTimeout)
        );
        assert_eq!(
            ask_fallback_outcome(Security::Allowlist, true, true),
            FallbackOutcome::Run
        );
        let miss = FallbackOutcome::Deny(ExecDenialReason::ApprovalTimeoutAllowlistMiss);
        assert_eq!(ask_fallback_outcome(Security::Allowlist, true, false), miss);
        assert_eq!(ask_fallback_outcome(Security::Allowlist, false, true), miss);
        assert_eq!(
            ExecDenialReason::ApprovalTimeoutAllowlistMiss.as_str(),
            "approval-timeout (allowlist-miss)"
        );
    }

    #[test]
    fn node_denials_use_the_exact_strings() {
        assert_eq!(
            NodeDenial::SecurityDeny.message(),
            "SYSTEM_RUN_DISABLED: security=deny"
        );
        assert_eq!(
            NodeDenial::ApprovalRequired.message(),
            "SYSTEM_RUN_DENIED: approval required"
        );
        assert_eq!(
            NodeDenial::AllowlistMiss.message(),
            "SYSTEM_RUN_DENIED: allowlist miss"
        );
        assert_eq!(NodeDenial::ApprovalRequired.reason(), "approval-required");
    }

    #[test]
    fn warnings_use_the_exact_strings() {
        assert_eq!(
            enforcement_unavailable_warning(Platform::Windows),
            "Warning: allowlist auto-execution is unavailable on win32; explicit approval is required."
        );
    }
}
