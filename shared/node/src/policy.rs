//! Whether this machine runs a job, and exactly what it runs: the core's exec engine applied
//! to the job with this node's approvals file, PATH, home and skill bins.
//!
//! - Allowed by the allowlist, safe bins or skill bins: the node runs the *enforced* command,
//!   rebuilt from the resolved argv (spec §7.6), never the raw payload, so globbing, `$VAR`
//!   and PATH lookups cannot make the shell run something other than what was checked.
//! - Approved by a person (a grant, already checked to be bound to this exact argv, cwd and
//!   env): the approved argv runs as approved. `security=deny` still wins.
//! - Otherwise the job is refused with the exact denial text, and with
//!   `approval_required` when a person's approval would let it run.

use std::collections::{BTreeMap, BTreeSet};

use clawless_exec::evaluate::{
    ExecEvaluation, ExecPolicy, NodeDecision, PreparedPolicy, evaluate_exec,
};
use clawless_exec::fs::NodeFs;
use clawless_exec::node::wire::{ExecDenial, ExecJob, Grant, GrantDecision};
use clawless_exec::system_run::{SystemRunRequest, prepare_system_run};
use clawless_exec::{AllowlistEntry, Ask, Platform, Security, SkillBin};

use crate::approvals_file::ResolvedApprovals;

/// What the node knows when it decides.
#[derive(Debug, Clone, Copy)]
pub struct JobContext<'a> {
    /// This machine's platform.
    pub platform: Platform,
    /// This machine's PATH.
    pub path_env: &'a str,
    /// The node user's home.
    pub home: &'a str,
    /// The agent's rules from the approvals file (and the chat's grants).
    pub approvals: &'a ResolvedApprovals,
    /// Skill bins as resolved here (only consulted under autoAllowSkills).
    pub skill_bins: &'a [SkillBin],
}

/// The node's decision on one job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run this argv with these env overrides.
    Run {
        /// What runs.
        argv: Vec<String>,
        /// Env overrides that passed the §8.3 rules.
        env: BTreeMap<String, String>,
        /// For an `allow-always` grant: argv-bound entries for the backend to record.
        allow_always_entries: Vec<AllowlistEntry>,
    },
    /// Refused, with the reason.
    Deny(ExecDenial),
}

/// The exec engine's policy for an agent's resolved rules, with `skill_bins` (pass none unless
/// autoAllowSkills is on). `Err` with the denial text when `safeBinProfiles` is invalid: then
/// the node refuses every job.
pub fn exec_policy(
    approvals: &ResolvedApprovals, skill_bins: &[SkillBin],
) -> Result<ExecPolicy, String> {
    let safe_bin_profiles = match approvals.safe_bin_profiles.clone() {
        None => BTreeMap::new(),
        Some(value) => serde_json::from_value(value)
            .map_err(|err| format!("SYSTEM_RUN_DENIED: safeBinProfiles is invalid: {err}"))?,
    };
    Ok(ExecPolicy {
        security: approvals.security,
        ask: approvals.ask,
        ask_fallback: approvals.ask_fallback,
        allowlist: approvals.allowlist.clone(),
        safe_bins: approvals.safe_bins.clone(),
        safe_bin_profiles,
        safe_bin_trusted_dirs: approvals.safe_bin_trusted_dirs.clone(),
        auto_allow_skills: approvals.auto_allow_skills,
        skill_bins: skill_bins.to_vec(),
    })
}

/// Decides one job. Pure apart from `fs`.
pub fn decide(job: &ExecJob, context: &JobContext<'_>, fs: &dyn NodeFs) -> Decision {
    let approvals = context.approvals;
    let policy = match exec_policy(approvals, context.skill_bins) {
        Ok(policy) => PreparedPolicy::new(policy),
        Err(message) => {
            return Decision::Deny(denial("approvals-file-invalid", message, false, Vec::new()));
        }
    };
    // The grant was verified with the job's signature: bound to this job and this command.
    let grant: Option<Grant> = job
        .grant
        .as_ref()
        .and_then(|grant| serde_json::from_str(&grant.0.payload).ok());
    let approved = grant.is_some();
    let path = path_dirs(context.path_env);
    let cwd = job.cwd.as_deref().unwrap_or(context.home);
    let verdict = evaluate_exec(
        &ExecEvaluation {
            platform: context.platform,
            policy: &policy,
            path: &path,
            cwd,
            home: Some(context.home),
            path_ext: None,
            argv: &job.argv,
            raw_command: Some(&job.raw_command),
            env: Some(&job.env),
            approved,
        },
        fs,
    );
    match verdict.node_decision {
        NodeDecision::Denied { message, .. } => {
            let approval_required = verdict.requires_approval && !approved;
            let decisions = if approval_required {
                verdict
                    .allowed_decisions
                    .iter()
                    .filter_map(|decision| {
                        serde_json::to_value(decision)
                            .ok()
                            .and_then(|value| value.as_str().map(str::to_owned))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            Decision::Deny(denial(
                reason_of(&message),
                message,
                approval_required,
                decisions,
            ))
        }
        NodeDecision::Allowed => {
            let prepared = match prepare_system_run(&SystemRunRequest {
                command: job
                    .argv
                    .iter()
                    .map(|arg| serde_json::Value::String(arg.clone()))
                    .collect(),
                raw_command: Some(job.raw_command.clone()),
                env: Some(job.env.clone()),
            }) {
                Ok(prepared) => prepared,
                Err(err) => {
                    return Decision::Deny(denial(
                        "invalid-request",
                        err.message,
                        false,
                        Vec::new(),
                    ));
                }
            };
            let argv = if approved || approvals.security == Security::Full {
                // A person approved exactly this argv, or the node trusts everything.
                prepared.argv
            } else if let Some(enforced) = &verdict.enforced_command {
                // Allowed by policy: run what was checked, rebuilt from resolved paths.
                vec!["/bin/sh".to_owned(), "-lc".to_owned(), enforced.clone()]
            } else {
                // Nothing checked can be rebuilt: a person must approve the raw command.
                return Decision::Deny(denial(
                    "approval-required",
                    "SYSTEM_RUN_DENIED: approval required".to_owned(),
                    approvals.ask != Ask::Off,
                    vec!["allow-once".to_owned(), "deny".to_owned()],
                ));
            };
            let allow_always = grant
                .as_ref()
                .is_some_and(|grant| grant.decision == GrantDecision::AllowAlways)
                && approvals.ask != Ask::Always;
            let allow_always_entries = if allow_always {
                argv_bound(verdict.allow_always.unwrap_or_default())
            } else {
                Vec::new()
            };
            Decision::Run {
                argv,
                env: prepared.env,
                allow_always_entries,
            }
        }
    }
}

/// The directories of a `PATH` value, in order, without empty entries.
pub(crate) fn path_dirs(path_env: &str) -> Vec<String> {
    path_env
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Keeps only entries bound to their arguments, each once.
fn argv_bound(entries: Vec<AllowlistEntry>) -> Vec<AllowlistEntry> {
    let mut seen = BTreeSet::new();
    entries
        .into_iter()
        .filter(|entry| entry.arg_pattern.is_some())
        .filter(|entry| seen.insert((entry.pattern.clone(), entry.arg_pattern.clone())))
        .collect()
}

fn denial(
    reason: &str, message: String, approval_required: bool, allowed_decisions: Vec<String>,
) -> ExecDenial {
    ExecDenial {
        reason: reason.to_owned(),
        message,
        approval_required,
        allowed_decisions,
    }
}

/// The short reason of a denial message (spec §7.8 `exec.denied` reasons).
fn reason_of(message: &str) -> &'static str {
    if message.contains("security=deny") {
        "security=deny"
    } else if message.contains("approval required") {
        "approval-required"
    } else if message.contains("allowlist miss") {
        "allowlist-miss"
    } else if message.contains("environment override") || message.contains("env assignment") {
        "env-rejected"
    } else {
        "invalid-request"
    }
}
