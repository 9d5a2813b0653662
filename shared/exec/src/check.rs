//! The JSON contract of `clawless exec check`: a request describing a node (platform, PATH,
//! cwd, home, policy, optionally its filesystem) and a command, and the policy's answer.
//! Nothing here runs a command; the caller picks the filesystem (the request's `fs` block
//! or the local disk) and, later, a paired node's reported facts ([`NodeExecFacts`]).
//!
//! Request (camelCase): `{"command": "<sh -lc payload>", "platform": "linux", "policy":
//! {...ExecPolicy}, "path": [...], "cwd", "home", "fs"?: {...DescribedFs}, "request"?:
//! {"command": [argv...], "rawCommand"?, "env"?}, "approved"?}`. Without `request` the argv
//! is `["/bin/sh","-lc",command]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::deviation::Deviation;
use super::evaluate::{
    ExecEvaluation, ExecPolicy, ExecVerdict, PreparedPolicy, SatisfiedBy, SegmentVerdict,
    evaluate_exec,
};
use super::fs::{DescribedFs, NodeFs};
use super::policy::{ApprovalDecision, FallbackOutcome};
use super::system_run::{
    SystemRunRequest, env_overrides_refused_only_by_clawless, prepare_system_run,
};
use super::{AllowlistEntry, Platform, Security};

/// A `clawless exec check` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckRequest {
    /// The shell command (the `sh -lc` payload); required unless `request` is given.
    #[serde(default)]
    pub command: Option<String>,
    /// The node's platform (default: linux).
    #[serde(default)]
    pub platform: Option<Platform>,
    /// The node's exec policy (default: clawless's secure node defaults).
    #[serde(default)]
    pub policy: ExecPolicy,
    /// The node's PATH.
    #[serde(default)]
    pub path: Vec<String>,
    /// The working directory (default `/`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// The node user's home folder.
    #[serde(default)]
    pub home: Option<String>,
    /// The node's filesystem; absent: the caller's (e.g. this machine's).
    #[serde(default)]
    pub fs: Option<DescribedFs>,
    /// A full `system.run` request instead of a bare command.
    #[serde(default)]
    pub request: Option<CheckSystemRun>,
    /// Whether a person already approved it.
    #[serde(default)]
    pub approved: bool,
}

/// The `system.run` part of a check request (§8.3).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckSystemRun {
    /// The argv (non-strings are coerced as the node does).
    #[serde(default)]
    pub command: Vec<serde_json::Value>,
    /// The formatted command the caller claims the argv is.
    #[serde(default)]
    pub raw_command: Option<String>,
    /// Env overrides.
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
}

/// What a paired node reported about itself, to check a command against it. The backend's
/// node registry fills this; [`CheckRequest::with_node_facts`] applies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeExecFacts {
    /// The node's platform.
    pub platform: Platform,
    /// The node's PATH.
    pub path: Vec<String>,
    /// The node user's home.
    pub home: Option<String>,
    /// The node's exec policy, with the entries granted from the chat.
    pub policy: ExecPolicy,
    /// What the node reported of its filesystem (probed bins, their real paths).
    pub fs: DescribedFs,
}

impl CheckRequest {
    /// This request, evaluated as on the node that reported `facts`: its platform, PATH,
    /// home, policy and filesystem replace the request's.
    pub fn with_node_facts(mut self, facts: NodeExecFacts) -> Self {
        self.platform = Some(facts.platform);
        self.path = facts.path;
        self.home = facts.home;
        self.policy = facts.policy;
        self.fs = Some(facts.fs);
        self
    }
}

/// Why a check request could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    /// Neither `command` nor `request.command` was given.
    #[error("the request needs a `command` string or a `request.command` argv")]
    MissingCommand,
}

/// The `systemRun` block of a response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemRunSummary {
    /// The request error's message, if it was refused.
    pub error: Option<String>,
    /// The request error's code.
    pub error_code: Option<String>,
    /// The formatted argv.
    pub command_text: Option<String>,
    /// The text shown to people (the shell payload when there is one).
    pub preview_text: Option<String>,
    /// The argv after coercion.
    pub argv: Option<Vec<String>>,
}

/// A `clawless exec check` response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckResponse {
    /// True when the command was understood.
    pub analysis_ok: bool,
    /// Why not.
    pub reason: Option<String>,
    /// True when every segment is satisfied.
    pub allowlist_satisfied: bool,
    /// True when a person must approve.
    pub requires_approval: bool,
    /// `allowed`, or the node's exact denial.
    pub node_decision: String,
    /// Each segment's first word as written.
    pub heads: Vec<String>,
    /// Per segment, the rule that satisfied it.
    pub satisfied_by: Vec<Option<SatisfiedBy>>,
    /// The `system.run` request as the node reads it (when `request` was given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_run: Option<SystemRunSummary>,
    /// The command an allowlisted run executes.
    pub enforced_command: Option<String>,
    /// Warnings shown with an approval request.
    pub warnings: Vec<String>,
    /// The answers a person may give.
    pub allowed_decisions: Vec<ApprovalDecision>,
    /// The entries "allow always" would add.
    pub allow_always: Option<Vec<AllowlistEntry>>,
    /// What happens if nobody answers.
    pub on_approval_timeout: Option<FallbackOutcome>,
    /// The analysed shell payload.
    pub shell_payload: Option<String>,
    /// True when any segment reads a heredoc.
    pub has_heredoc: bool,
    /// Per-segment details (resolution, wrappers, carriers, hazards, deviation).
    pub segments: Vec<SegmentVerdict>,
    /// The rule (its id, see `docs/exec.md`) that made this decision differ from OpenClaw's
    /// node; null when the decision is OpenClaw's.
    pub deviation: Option<Deviation>,
}

impl CheckResponse {
    fn from_verdict(verdict: ExecVerdict, system_run: Option<SystemRunSummary>) -> Self {
        Self {
            analysis_ok: verdict.analysis_ok,
            reason: verdict.reason.clone(),
            allowlist_satisfied: verdict.allowlist_satisfied,
            requires_approval: verdict.requires_approval,
            node_decision: verdict.node_decision.as_str().to_owned(),
            heads: verdict.heads(),
            satisfied_by: verdict.satisfied_by(),
            system_run,
            enforced_command: verdict.enforced_command,
            warnings: verdict.warnings,
            allowed_decisions: verdict.allowed_decisions,
            allow_always: verdict.allow_always,
            on_approval_timeout: Some(verdict.on_approval_timeout),
            shell_payload: verdict.shell_payload,
            has_heredoc: verdict.has_heredoc,
            segments: verdict.segments,
            deviation: verdict.deviation,
        }
    }
}

/// Evaluates a check request against `fs` (the caller's choice when the request has no `fs`
/// block; the request's block wins when present).
pub fn run_check(request: &CheckRequest, fs: &dyn NodeFs) -> Result<CheckResponse, CheckError> {
    let described = request.fs.as_ref();
    let fs: &dyn NodeFs = match described {
        Some(described) => described,
        None => fs,
    };
    let platform = request.platform.unwrap_or(Platform::Linux);
    let (argv, raw_command, env, summary) = match &request.request {
        Some(system_run) => {
            let prepared = prepare_system_run(&SystemRunRequest {
                command: system_run.command.clone(),
                raw_command: system_run.raw_command.clone(),
                env: system_run.env.clone(),
            });
            match prepared {
                Ok(run) => {
                    let summary = SystemRunSummary {
                        error: None,
                        error_code: None,
                        command_text: Some(run.command_text.clone()),
                        preview_text: Some(run.preview_text.clone()),
                        argv: Some(run.argv.clone()),
                    };
                    (
                        run.argv,
                        system_run.raw_command.clone(),
                        system_run.env.clone(),
                        Some(summary),
                    )
                }
                Err(err) => {
                    return Ok(refused_request(request, err.code, err.message));
                }
            }
        }
        None => {
            let command = request.command.clone().ok_or(CheckError::MissingCommand)?;
            (shell_argv(platform, command), None, None, None)
        }
    };
    let policy = PreparedPolicy::new(request.policy.clone());
    let evaluation = ExecEvaluation {
        platform,
        policy: &policy,
        path: &request.path,
        cwd: request.cwd.as_deref().unwrap_or("/"),
        home: request.home.as_deref(),
        path_ext: None,
        argv: &argv,
        raw_command: raw_command.as_deref(),
        env: env.as_ref(),
        approved: request.approved,
    };
    let verdict = evaluate_exec(&evaluation, fs);
    Ok(CheckResponse::from_verdict(verdict, summary))
}

/// The argv the exec tool sends for a shell command (§8.3).
pub fn shell_argv(platform: Platform, command: String) -> Vec<String> {
    if platform.is_windows() {
        ["cmd.exe", "/d", "/s", "/c"]
            .into_iter()
            .map(str::to_owned)
            .chain([command])
            .collect()
    } else {
        vec!["/bin/sh".to_owned(), "-lc".to_owned(), command]
    }
}

/// The response for a `system.run` request the node refuses before any policy runs.
fn refused_request(request: &CheckRequest, code: String, message: String) -> CheckResponse {
    let policy = PreparedPolicy::new(request.policy.clone());
    // Refused env overrides OpenClaw's node would have accepted.
    let deviation = (request.policy.security != Security::Deny
        && message.contains("environment override rejected")
        && request
            .request
            .as_ref()
            .and_then(|run| run.env.as_ref())
            .is_some_and(env_overrides_refused_only_by_clawless))
    .then_some(Deviation::EnvOverrideKeys);
    CheckResponse {
        analysis_ok: false,
        reason: Some(message.clone()),
        allowlist_satisfied: false,
        requires_approval: false,
        node_decision: message.clone(),
        heads: Vec::new(),
        satisfied_by: Vec::new(),
        system_run: Some(SystemRunSummary {
            error: Some(message),
            error_code: Some(code),
            command_text: None,
            preview_text: None,
            argv: None,
        }),
        enforced_command: None,
        warnings: policy.warnings(),
        allowed_decisions: Vec::new(),
        allow_always: None,
        on_approval_timeout: None,
        shell_payload: None,
        has_heredoc: false,
        segments: Vec::new(),
        deviation,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: serde_json::Value) -> CheckRequest {
        serde_json::from_value(json).unwrap()
    }

    fn node_fs() -> DescribedFs {
        DescribedFs {
            executables: ["/usr/bin/ls", "/usr/bin/dash"].map(str::to_owned).into(),
            symlinks: [("/bin/sh", "/usr/bin/dash")]
                .map(|(a, b)| (a.to_owned(), b.to_owned()))
                .into(),
            ..DescribedFs::default()
        }
    }

    #[test]
    fn string_and_object_allowlist_entries_both_parse() {
        let request = parse(serde_json::json!({
            "command": "ls",
            "policy": {"allowlist": ["/usr/bin/ls", {"pattern": "/usr/bin/git", "argPattern": "status"}]},
        }));
        assert_eq!(
            request.policy.allowlist[0],
            AllowlistEntry::pattern("/usr/bin/ls")
        );
        assert_eq!(
            request.policy.allowlist[1].arg_pattern.as_deref(),
            Some("status")
        );
    }

    #[test]
    fn an_absent_policy_is_the_secure_node_default() {
        let request = parse(serde_json::json!({"command": "ls"}));
        assert_eq!(request.policy, ExecPolicy::default());
        let response = run_check(&request, &node_fs()).unwrap();
        assert_eq!(
            response.node_decision,
            "SYSTEM_RUN_DENIED: approval required"
        );
    }

    #[test]
    fn the_request_fs_block_wins_over_the_callers_fs() {
        let request = parse(serde_json::json!({
            "command": "ls", "path": ["/usr/bin"], "policy": {"allowlist": ["/usr/bin/ls"]},
            "fs": {"executables": ["/usr/bin/ls", "/usr/bin/dash"], "symlinks": {"/bin/sh": "/usr/bin/dash"}},
        }));
        let response = run_check(&request, &DescribedFs::default()).unwrap();
        assert!(response.allowlist_satisfied);
        assert_eq!(response.node_decision, "allowed");
    }

    #[test]
    fn a_refused_system_run_request_reports_its_error() {
        let request = parse(serde_json::json!({"request": {"command": [], "rawCommand": "ls"}}));
        let response = run_check(&request, &node_fs()).unwrap();
        let summary = response.system_run.unwrap();
        assert!(summary.error.is_some());
        assert_eq!(response.node_decision, summary.error.unwrap());
        assert!(!response.allowlist_satisfied);
    }

    #[test]
    fn a_request_with_no_command_is_an_error() {
        assert_eq!(
            run_check(&CheckRequest::default(), &node_fs()),
            Err(CheckError::MissingCommand)
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let parsed: Result<CheckRequest, _> =
            serde_json::from_value(serde_json::json!({"command": "ls", "polcy": {}}));
        assert!(parsed.is_err());
    }

    #[test]
    fn node_facts_replace_the_requests_node_description() {
        let facts = NodeExecFacts {
            platform: Platform::Linux,
            path: vec!["/usr/bin".into()],
            home: None,
            policy: ExecPolicy {
                allowlist: vec![AllowlistEntry::pattern("/usr/bin/ls")],
                ..ExecPolicy::default()
            },
            fs: node_fs(),
        };
        let request = parse(serde_json::json!({"command": "ls", "path": ["/nowhere"]}))
            .with_node_facts(facts);
        let response = run_check(&request, &DescribedFs::default()).unwrap();
        assert!(response.allowlist_satisfied);
    }
}
