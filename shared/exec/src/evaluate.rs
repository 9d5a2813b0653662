//! The exec-approval decision for one `system.run`: would this argv run on that node, under
//! which policy, and if not, what the node answers. One pure function,
//! [`evaluate_exec`], used by the node worker, the backend's pre-check and
//! `clawless exec check`.
//!
//! # Steps
//! 1. The `system.run` request rules of §8.3 (`rawCommand`, env overrides) via
//!    [`prepare_system_run`]; a refusal there is the node's answer.
//! 2. A shell transport (`/bin/sh -lc "<payload>"`, also behind `env NAME=value …`) is looked
//!    through: the payload is what the policy analyses (§7.3). Any other argv is one segment.
//! 3. Per segment: dispatch wrappers unwrapped (§7.4), the executable resolved on the node's
//!    PATH, then satisfied by the allowlist (§7.5), safe bins (§7.6) or skill bins (§7.7), in
//!    that order; then the skill display prelude (§7.7).
//! 4. Modes (§7.1, §7.8): does a person have to approve, and the node's decision.
//! 5. The enforced command (§7.6) and the entries an "allow always" would add.
//! 6. Which rule, if any, made the decision differ from OpenClaw's (the `openclaw` submodule).
//!
//! # Where clawless decides differently from OpenClaw, and why
//! Every difference is a rule in [`Deviation`](super::deviation::Deviation), with its id,
//! the attack it stops, and the table in `docs/exec.md`. Each makes a segment (or the
//! request) not satisfied, so it needs a person's approval (or, for the carrier rules, an
//! allowlist entry whose `argPattern` binds its arguments):
//! - **Code and exec carriers** (`inline-code`, `exec-carrier`; see
//!   [`carriers`](super::carriers)): shells, interpreters with inline code or a program on
//!   stdin, awk, sed `e`/`w`, xargs, `find -exec`, `make`, `tar --to-command`, `git -c`/aliases,
//!   tmux/screen, `ssh host cmd`, … An allowlisted binary that runs whatever its arguments say
//!   would otherwise allow everything; an `argPattern` pins those arguments, so only such an
//!   entry counts (not a path-only entry, not `*`, not safe bins, not skill bins).
//! - **Privilege wrappers** (`privilege-wrapper`): `su pkexec runuser` are policy-blocked like
//!   the spec's `sudo doas chrt ionice setsid taskset` (see [`wrappers`](super::wrappers)).
//! - **argPattern on every platform** (`arg-pattern`; OpenClaw: Windows only), and entries
//!   granted by "allow always" pin the exact arguments (`allow-always-argv`); OpenClaw's
//!   `=command:<hash>` entries are not honoured (`command-hash-entry`).
//! - **PATH shadowing** (`safe-bin-real-path`, `skill-prelude-bins`): a safe bin counts only
//!   when its real path is in a trusted folder, and the skill prelude's `cat`/`printf` must be
//!   trusted files too. A `jq` safe bin may not load modules (`jq-module`). Relative PATH
//!   entries are skipped (`relative-path-entry`).
//! - **Reading as `sh` reads** (`sh-parsing`, see [`shell`](super::shell)).
//! - **Windows** (`windows-no-rebuild`): nothing runs without approval, since no rebuilt
//!   command exists there.
//! - **Environment** (`env-override-keys`) and **defaults** (`ask-fallback-deny`, see
//!   [`policy`](super::policy)).
//!
//! Where no attack needed a difference, the engine follows the spec: an allowed command runs
//! as the enforced command rebuilt from the resolved argv (each word single-quoted, dispatch
//! wrappers dropped, heredoc bodies carried literally), so `$VAR` arguments, heredocs, `./`
//! and `..` in executable paths, a bare `*` for an executable that does not resolve, and
//! dispatch wrappers or shell transports outside trusted folders all decide as in OpenClaw:
//! what runs is exactly what was checked.
//!
//! The verdict names the rule that changed its decision in [`ExecVerdict::deviation`] (see
//! [`deviation`](super::deviation) for how it is attributed).
//!
//! **Allow always** never derives a path-only entry: every derived entry pins the exact
//! arguments, and none is derived for code carriers, blocked segments, heredocs, or when any
//! segment cannot be derived (then the person is asked every time).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::allowlist::PreparedEntry;
use super::carriers::{Carrier, CarrierKind, classify_carrier};
use super::deviation::Deviation;
use super::fs::NodeFs;
use super::policy::{
    ApprovalDecision, ExecDefaults, FallbackOutcome, NodeDenial, allowed_decisions,
    ask_fallback_outcome, enforcement_unavailable_warning, requires_exec_approval,
};
use super::resolve::{
    ExecutableResolution, ResolveContext, base_name, has_separator, is_absolute, join, normalize,
    resolve_executable,
};
use super::safe_bins::{SafeBinProfile, SafeBins};
use super::shell::{
    ShellHazard, ShellHeredoc, ShellOperator, analyze_shell_command, quote_shell_arg,
};
use super::system_run::{
    SystemRunRequest, check_env_assignments, extract_shell_payload, format_exec_command,
    prepare_system_run,
};
use super::wrappers::{is_assignment, normalized_name, unwrap_dispatch};
use super::{AllowlistEntry, Ask, Platform, Security, SkillBin};

#[cfg(test)]
mod deviations;
mod openclaw;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

/// Shells a `system.run` typically sends its command through (`sh -lc`); a node reports
/// where they resolve.
pub const TRANSPORT_SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash"];

/// Where Windows system binaries live (the skill prelude's `cat`/`printf` must be there).
const WINDOWS_TRUSTED_DIRS: &[&str] = &["c:/windows/system32"];

/// The `source` of entries granted by "allow always".
pub const ALLOW_ALWAYS_SOURCE: &str = "allow-always";

/// A node's exec-approval policy, as configured (spec §7.2; node defaults are secure).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecPolicy {
    /// How much may run.
    #[serde(default = "default_security")]
    pub security: Security,
    /// When a person is asked.
    #[serde(default = "default_ask")]
    pub ask: Ask,
    /// What an unanswered approval falls back to.
    #[serde(default = "default_ask_fallback")]
    pub ask_fallback: Security,
    /// Allowlist entries; a bare string is a path-only entry.
    #[serde(default, deserialize_with = "deserialize_allowlist")]
    pub allowlist: Vec<AllowlistEntry>,
    /// Safe bins; `None` is the default list, `Some([])` none.
    #[serde(default)]
    pub safe_bins: Option<Vec<String>>,
    /// Safe-bin profiles replacing or adding to the built-ins.
    #[serde(default)]
    pub safe_bin_profiles: BTreeMap<String, SafeBinProfile>,
    /// Folders trusted to hold safe bins, added to `/bin` and `/usr/bin`.
    #[serde(default)]
    pub safe_bin_trusted_dirs: Vec<String>,
    /// Whether skill binaries run without allowlist entries.
    #[serde(default)]
    pub auto_allow_skills: bool,
    /// The skill binaries the node resolved (§6).
    #[serde(default)]
    pub skill_bins: Vec<SkillBin>,
}

fn default_security() -> Security {
    ExecDefaults::NODE.security
}

fn default_ask() -> Ask {
    ExecDefaults::NODE.ask
}

fn default_ask_fallback() -> Security {
    ExecDefaults::NODE.ask_fallback
}

impl Default for ExecPolicy {
    fn default() -> Self {
        Self {
            security: ExecDefaults::NODE.security,
            ask: ExecDefaults::NODE.ask,
            ask_fallback: ExecDefaults::NODE.ask_fallback,
            allowlist: Vec::new(),
            safe_bins: None,
            safe_bin_profiles: BTreeMap::new(),
            safe_bin_trusted_dirs: Vec::new(),
            auto_allow_skills: ExecDefaults::NODE.auto_allow_skills,
            skill_bins: Vec::new(),
        }
    }
}

fn deserialize_allowlist<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<AllowlistEntry>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        Pattern(String),
        Entry(AllowlistEntry),
    }
    let items: Option<Vec<Item>> = Option::deserialize(deserializer)?;
    Ok(items
        .unwrap_or_default()
        .into_iter()
        .map(|item| match item {
            Item::Pattern(pattern) => AllowlistEntry::pattern(pattern),
            Item::Entry(entry) => entry,
        })
        .collect())
}

/// A policy compiled once (argPatterns, safe-bin lists) and reused across evaluations.
#[derive(Debug, Clone)]
pub struct PreparedPolicy {
    policy: ExecPolicy,
    entries: Vec<PreparedEntry>,
    safe_bins: SafeBins,
}

impl PreparedPolicy {
    /// Compiles `policy`. Entries with an invalid argPattern match nothing (see
    /// [`warnings`](Self::warnings)).
    pub fn new(policy: ExecPolicy) -> Self {
        let entries = policy
            .allowlist
            .iter()
            .cloned()
            .map(PreparedEntry::new)
            .collect();
        let safe_bins = SafeBins::new(
            policy.safe_bins.as_deref(),
            &policy.safe_bin_profiles,
            &policy.safe_bin_trusted_dirs,
        );
        Self {
            policy,
            entries,
            safe_bins,
        }
    }

    /// The policy as configured.
    pub fn policy(&self) -> &ExecPolicy {
        &self.policy
    }

    /// Problems with the configuration (invalid argPatterns).
    pub fn warnings(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|entry| entry.error().map(str::to_owned))
            .collect()
    }

    /// True when `real_path` is a file in a trusted system folder of `platform`.
    fn is_trusted_file(&self, real_path: &str, platform: Platform) -> bool {
        if platform.is_windows() {
            let folded = real_path.replace('\\', "/").to_lowercase();
            let dir = super::resolve::dir_name(&folded);
            return WINDOWS_TRUSTED_DIRS.contains(&dir)
                || self
                    .safe_bins
                    .trusted_dirs()
                    .iter()
                    .any(|trusted| trusted.replace('\\', "/").to_lowercase() == dir);
        }
        self.safe_bins.is_trusted_file(real_path)
    }
}

/// One `system.run` to decide on a node.
#[derive(Debug, Clone, Copy)]
pub struct ExecEvaluation<'a> {
    /// The node's platform.
    pub platform: Platform,
    /// The node's policy, compiled.
    pub policy: &'a PreparedPolicy,
    /// The node's PATH (env PATH overrides are refused by §8.3, so this is the search path).
    pub path: &'a [String],
    /// The working directory the command runs in.
    pub cwd: &'a str,
    /// The node user's home folder.
    pub home: Option<&'a str>,
    /// Windows only: the node's `PATHEXT`.
    pub path_ext: Option<&'a str>,
    /// The argv to run (`["/bin/sh","-lc","<payload>"]` for a shell command).
    pub argv: &'a [String],
    /// The request's `rawCommand`, checked against the argv (§8.3).
    pub raw_command: Option<&'a str>,
    /// The request's env overrides, checked per §8.3.
    pub env: Option<&'a BTreeMap<String, String>>,
    /// True when a person already approved this exact request.
    pub approved: bool,
}

/// Which rule let a segment run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum SatisfiedBy {
    /// An allowlist entry.
    Allowlist,
    /// A safe bin with valid arguments.
    SafeBins,
    /// A skill binary under autoAllowSkills.
    Skills,
    /// Part of a skill's display prelude leading to a trusted skill command.
    SkillPrelude,
}

impl SatisfiedBy {
    /// The wire name (`allowlist`, `safeBins`, `skills`, `skillPrelude`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowlist => "allowlist",
            Self::SafeBins => "safeBins",
            Self::Skills => "skills",
            Self::SkillPrelude => "skillPrelude",
        }
    }
}

/// What the policy found for one segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentVerdict {
    /// The segment's text.
    pub raw: String,
    /// Its words, as the shell analysis read them.
    pub argv: Vec<String>,
    /// The operator joining it to the previous segment.
    pub joined_by: Option<ShellOperator>,
    /// The dispatch wrappers unwrapped, as written.
    pub wrappers: Vec<String>,
    /// The command inside the wrappers: what the policy judged.
    pub effective_argv: Vec<String>,
    /// Where its executable resolved.
    #[serde(flatten)]
    pub resolution: ExecutableResolution,
    /// Why it can never be allowlist-satisfied (`sudo`, `env -S`, …).
    pub policy_blocked: Option<String>,
    /// Why it carries code, if it does.
    pub carrier: Option<Carrier>,
    /// Places where a simple tokenizer and `sh` could read other words (for people; they do
    /// not change the decision, since the enforced command runs these words literally).
    pub hazards: Vec<ShellHazard>,
    /// The heredocs it reads; the enforced command carries their bodies literally.
    pub heredocs: Vec<ShellHeredoc>,
    /// Which rule satisfied it, if any.
    pub satisfied_by: Option<SatisfiedBy>,
    /// The allowlist entry that matched, when `satisfied_by` is `allowlist`.
    pub matched_entry: Option<AllowlistEntry>,
    /// The rule that leaves it unsatisfied although OpenClaw would satisfy it.
    pub deviation: Option<Deviation>,
}

impl SegmentVerdict {
    /// True when nothing stops an allowlist rule from satisfying the segment.
    fn satisfiable(&self) -> bool {
        self.policy_blocked.is_none()
    }
}

/// The node's answer to a `system.run`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeDecision {
    /// The command runs.
    Allowed,
    /// The command does not run.
    Denied {
        /// The error code (`UNAVAILABLE` for policy refusals, the request error's otherwise).
        code: String,
        /// The exact message (`SYSTEM_RUN_DENIED: approval required`, …).
        message: String,
    },
}

impl NodeDecision {
    fn policy(denial: NodeDenial) -> Self {
        Self::Denied {
            code: "UNAVAILABLE".into(),
            message: denial.message().into(),
        }
    }

    /// `allowed`, or the denial message.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied { message, .. } => message,
        }
    }
}

impl Serialize for NodeDecision {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Everything the policy decided about one `system.run`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecVerdict {
    /// True when the command was understood (shell analysis ok, argv non-empty).
    pub analysis_ok: bool,
    /// Why it was not understood.
    pub reason: Option<String>,
    /// The shell payload that was analysed, when the argv was a trusted shell transport.
    pub shell_payload: Option<String>,
    /// True when every segment is satisfied.
    pub allowlist_satisfied: bool,
    /// True when every segment is satisfied by `allow-always` entries.
    pub durable_approval_satisfied: bool,
    /// True when a person must approve before it runs.
    pub requires_approval: bool,
    /// What the node answers now (with `approved` as given).
    pub node_decision: NodeDecision,
    /// True when any segment reads a heredoc.
    pub has_heredoc: bool,
    /// Per segment.
    pub segments: Vec<SegmentVerdict>,
    /// The command rebuilt from resolved argv (§7.6): what an allowlisted run executes.
    pub enforced_command: Option<String>,
    /// Warnings shown with an approval request.
    pub warnings: Vec<String>,
    /// The answers a person may give.
    pub allowed_decisions: Vec<ApprovalDecision>,
    /// The entries "allow always" would add; none when nothing safe can be derived.
    pub allow_always: Option<Vec<AllowlistEntry>>,
    /// What happens if an approval request times out.
    pub on_approval_timeout: FallbackOutcome,
    /// The rule that made this decision differ from OpenClaw's node, if one did.
    pub deviation: Option<Deviation>,
}

impl ExecVerdict {
    /// Each segment's first word as written.
    pub fn heads(&self) -> Vec<String> {
        self.segments
            .iter()
            .map(|segment| segment.argv.first().cloned().unwrap_or_default())
            .collect()
    }

    /// Each segment's satisfying rule.
    pub fn satisfied_by(&self) -> Vec<Option<SatisfiedBy>> {
        self.segments
            .iter()
            .map(|segment| segment.satisfied_by)
            .collect()
    }
}

/// A segment before policy: what the analysis produced.
struct InputSegment {
    raw: String,
    argv: Vec<String>,
    joined_by: Option<ShellOperator>,
    hazards: Vec<ShellHazard>,
    heredocs: Vec<ShellHeredoc>,
}

struct Analysis {
    ok: bool,
    reason: Option<String>,
    payload: Option<String>,
    segments: Vec<InputSegment>,
    has_heredoc: bool,
}

/// Decides one `system.run` (see the module docs for the steps and the stricter rules).
/// Pure: reads the node's filesystem only through `fs`; never panics.
pub fn evaluate_exec(request: &ExecEvaluation<'_>, fs: &dyn NodeFs) -> ExecVerdict {
    let policy = request.policy.policy();
    let context = ResolveContext {
        platform: request.platform,
        path: request.path,
        cwd: request.cwd,
        home: request.home,
        path_ext: request.path_ext,
    };
    let prepared = prepare_system_run(&SystemRunRequest {
        command: request
            .argv
            .iter()
            .map(|word| serde_json::Value::String(word.clone()))
            .collect(),
        raw_command: request.raw_command.map(str::to_owned),
        env: request.env.cloned(),
    });

    let analysis = analyse(request);
    let mut segments: Vec<SegmentVerdict> = analysis
        .segments
        .into_iter()
        .map(|segment| evaluate_segment(segment, request, &context, fs))
        .collect();
    apply_skill_prelude(&mut segments, request, true);
    openclaw::attribute_segments(&mut segments, request, &context, fs);

    let ok = analysis.ok && !segments.is_empty();
    let satisfied = ok
        && segments
            .iter()
            .all(|segment| segment.satisfied_by.is_some());
    let durable = satisfied
        && segments.iter().all(|segment| {
            segment
                .matched_entry
                .as_ref()
                .is_some_and(|entry| entry.source.as_deref() == Some(ALLOW_ALWAYS_SOURCE))
        });
    let enforced_command = if ok {
        enforced_command(&segments, request.platform)
    } else {
        None
    };

    let mut warnings = request.policy.warnings();
    let mut requires = requires_exec_approval(policy.ask, policy.security, ok, satisfied, durable);
    if policy.security == Security::Allowlist && satisfied && enforced_command.is_none() {
        requires = true;
        warnings.push(enforcement_unavailable_warning(request.platform));
    }

    let env_assignment = std::iter::once(request.argv)
        .chain(segments.iter().map(|segment| segment.argv.as_slice()))
        .find_map(|argv| check_env_assignments(argv).err());
    let node_decision = match prepared {
        Err(err) => NodeDecision::Denied {
            code: err.code,
            message: err.message,
        },
        Ok(_) if policy.security == Security::Deny => {
            NodeDecision::policy(NodeDenial::SecurityDeny)
        }
        Ok(_) => match env_assignment {
            Some(message) => NodeDecision::Denied {
                code: "UNAVAILABLE".into(),
                message,
            },
            None if requires && !request.approved => {
                NodeDecision::policy(NodeDenial::ApprovalRequired)
            }
            None if policy.security == Security::Allowlist && !satisfied && !request.approved => {
                NodeDecision::policy(NodeDenial::AllowlistMiss)
            }
            None => NodeDecision::Allowed,
        },
    };

    let allow_always = if ok && !analysis.has_heredoc && policy.ask != Ask::Always {
        derive_allow_always(&segments)
    } else {
        None
    };
    let on_approval_timeout = ask_fallback_outcome(policy.ask_fallback, ok, satisfied);

    let mut verdict = ExecVerdict {
        analysis_ok: ok,
        reason: if ok {
            None
        } else {
            analysis.reason.or_else(|| Some("empty command".into()))
        },
        shell_payload: analysis.payload,
        allowlist_satisfied: satisfied,
        durable_approval_satisfied: durable,
        requires_approval: requires,
        node_decision,
        has_heredoc: analysis.has_heredoc,
        segments,
        enforced_command,
        warnings,
        allowed_decisions: allowed_decisions(policy.ask).to_vec(),
        allow_always,
        on_approval_timeout,
        deviation: None,
    };
    verdict.deviation = openclaw::verdict_deviation(&verdict, request, fs);
    verdict
}

/// Step 2: the payload of a shell transport, analysed; any other argv as one segment.
fn analyse(request: &ExecEvaluation<'_>) -> Analysis {
    let argv = request.argv;
    if argv.is_empty() {
        return Analysis {
            ok: false,
            reason: Some("empty command".into()),
            payload: None,
            segments: Vec::new(),
            has_heredoc: false,
        };
    }
    // Whatever the transport is, an allowed command runs as `/bin/sh -lc <enforced command>`
    // on the node, so only the payload's words matter.
    if let Some(payload) = shell_transport_payload(argv) {
        let shell = analyze_shell_command(&payload, request.platform);
        let segments = shell
            .segments
            .into_iter()
            .map(|segment| InputSegment {
                raw: segment.raw,
                argv: segment.argv,
                joined_by: segment.joined_by,
                hazards: segment.hazards,
                heredocs: segment.heredocs,
            })
            .collect();
        return Analysis {
            ok: shell.ok,
            reason: shell.reason,
            payload: Some(payload),
            segments,
            has_heredoc: shell.has_heredoc,
        };
    }
    Analysis {
        ok: true,
        reason: None,
        payload: None,
        segments: vec![InputSegment {
            raw: format_exec_command(argv),
            argv: argv.to_vec(),
            joined_by: None,
            hazards: Vec::new(),
            heredocs: Vec::new(),
        }],
        has_heredoc: false,
    }
}

/// The payload of `sh -lc <payload>` (also behind `env`, or behind `env NAME=value …` as
/// OpenClaw reads it: the assignments' keys are checked by §8.3, and the enforced command
/// does not carry them).
fn shell_transport_payload(argv: &[String]) -> Option<String> {
    extract_shell_payload(argv).or_else(|| {
        let first = argv.first()?;
        if normalized_name(first, Platform::Linux) != "env" {
            return None;
        }
        let assignments = argv[1..]
            .iter()
            .take_while(|word| is_assignment(word))
            .count();
        (assignments > 0)
            .then(|| extract_shell_payload(&argv[1 + assignments..]))
            .flatten()
    })
}

/// Step 3 for one segment: unwrap, resolve, classify and match.
fn evaluate_segment(
    segment: InputSegment, request: &ExecEvaluation<'_>, context: &ResolveContext<'_>,
    fs: &dyn NodeFs,
) -> SegmentVerdict {
    let platform = request.platform;
    let prepared = request.policy;
    let policy = prepared.policy();
    let plan = unwrap_dispatch(&segment.argv, platform);
    let effective: Vec<String> = segment
        .argv
        .get(plan.command_index..)
        .unwrap_or_default()
        .to_vec();
    let raw_executable = effective.first().cloned().unwrap_or_default();
    let resolution = resolve_executable(&raw_executable, context, fs);
    let wrappers: Vec<String> = plan
        .wrapper_indices
        .iter()
        .map(|index| segment.argv[*index].clone())
        .collect();
    let args = effective.get(1..).unwrap_or_default();
    let carrier = if plan.policy_blocked.is_some() {
        None
    } else {
        let mut names: Vec<&str> = vec![raw_executable.as_str()];
        names.extend(resolution.resolved_path.as_deref());
        names.extend(resolution.resolved_real_path.as_deref());
        classify_carrier(&names, args, platform)
    };

    let mut verdict = SegmentVerdict {
        raw: segment.raw,
        argv: segment.argv,
        joined_by: segment.joined_by,
        wrappers,
        effective_argv: Vec::new(),
        resolution,
        policy_blocked: plan.policy_blocked,
        carrier,
        hazards: segment.hazards,
        heredocs: segment.heredocs,
        satisfied_by: None,
        matched_entry: None,
        deviation: None,
    };
    if verdict.satisfiable() && !effective.is_empty() {
        let rendered = || format_exec_command(args);
        let matched = prepared.entries.iter().find(|entry| {
            (verdict.carrier.is_none() || entry.binds_args())
                && entry.matches(
                    verdict.resolution.resolved_path.as_deref(),
                    verdict.resolution.resolved_real_path.as_deref(),
                    &rendered,
                    platform,
                    request.home,
                )
        });
        if let Some(entry) = matched {
            verdict.satisfied_by = Some(SatisfiedBy::Allowlist);
            verdict.matched_entry = Some(entry.entry().clone());
        } else if verdict.carrier.is_none() {
            if prepared
                .safe_bins
                .check(platform, &verdict.resolution, args)
                .is_ok()
            {
                verdict.satisfied_by = Some(SatisfiedBy::SafeBins);
            } else if policy.auto_allow_skills
                && is_trusted_skill_bin(&verdict.resolution, &policy.skill_bins, platform)
            {
                verdict.satisfied_by = Some(SatisfiedBy::Skills);
            }
        }
    }
    verdict.effective_argv = effective;
    verdict
}

/// §7.7: a bare name resolving to exactly the path the node reported for that skill bin.
fn is_trusted_skill_bin(
    resolution: &ExecutableResolution, skill_bins: &[SkillBin], platform: Platform,
) -> bool {
    if has_separator(&resolution.raw_executable, platform) {
        return false;
    }
    let Some(resolved) = resolution.resolved_path.as_deref() else {
        return false;
    };
    let name = resolution.executable_name.to_lowercase();
    skill_bins.iter().any(|bin| {
        bin.name.trim().to_lowercase() == name
            && is_absolute(&bin.resolved_path, platform)
            && normalize(&bin.resolved_path, platform) == resolved
    })
}

/// What a prelude segment is: `cat …/skills/<id>/SKILL.md` (with the id) or the marker.
enum Prelude {
    Cat(String),
    Marker,
}

/// The prelude part `segment` is, if any. clawless requires its `cat`/`printf` to be files in
/// a trusted folder (`trusted_bins`); OpenClaw goes by the name alone.
fn prelude_kind(
    segment: &SegmentVerdict, request: &ExecEvaluation<'_>, trusted_bins: bool,
) -> Option<Prelude> {
    if !segment.satisfiable() || !segment.wrappers.is_empty() || segment.satisfied_by.is_some() {
        return None;
    }
    let trusted = segment
        .resolution
        .resolved_real_path
        .as_deref()
        .is_some_and(|real| request.policy.is_trusted_file(real, request.platform));
    if trusted_bins && !trusted {
        return None;
    }
    match (
        segment.resolution.executable_name.as_str(),
        segment.effective_argv.as_slice(),
    ) {
        ("printf", [_, marker]) if marker == "\\n---CMD---\\n" || marker == "\n---CMD---\n" => {
            Some(Prelude::Marker)
        }
        ("cat", [_, path]) => {
            // The path as the shell would open it, lexically resolved against cwd.
            let platform = request.platform;
            let absolute = if is_absolute(path, platform) {
                path.clone()
            } else {
                join(request.cwd, path)
            };
            let resolved = normalize(&absolute, platform);
            let rest = resolved.strip_suffix("/SKILL.md")?;
            let id = base_name(rest);
            let skills_dir = &rest[..rest.len() - id.len()];
            (!id.is_empty() && skills_dir.ends_with("/skills/"))
                .then(|| Prelude::Cat(id.to_owned()))
        }
        _ => None,
    }
}

/// §7.7: prelude segments joined by `&&` to a later trusted skill command are satisfied.
fn apply_skill_prelude(
    segments: &mut [SegmentVerdict], request: &ExecEvaluation<'_>, trusted_bins: bool,
) {
    let kinds: Vec<Option<Prelude>> = segments
        .iter()
        .map(|segment| prelude_kind(segment, request, trusted_bins))
        .collect();
    let mut start = 0;
    while start < segments.len() {
        if kinds[start].is_none() {
            start += 1;
            continue;
        }
        // The run of prelude segments from `start`, each joined to the next by `&&`.
        let mut end = start;
        let mut ids: Vec<&str> = Vec::new();
        let mut chained = true;
        while end < segments.len() && kinds[end].is_some() {
            if let Some(Prelude::Cat(id)) = &kinds[end] {
                ids.push(id);
            }
            if end + 1 < segments.len() && segments[end + 1].joined_by != Some(ShellOperator::And) {
                chained = false;
                end += 1;
                break;
            }
            end += 1;
        }
        let accepted = chained
            && segments.get(end).is_some_and(|target| {
                kinds[end].is_none()
                    && target.joined_by == Some(ShellOperator::And)
                    && match target.satisfied_by {
                        Some(SatisfiedBy::Skills) => true,
                        Some(SatisfiedBy::Allowlist) => {
                            !ids.is_empty()
                                && ids.iter().all(|id| {
                                    target.resolution.executable_name == format!("{id}-wrapper")
                                })
                        }
                        _ => false,
                    }
            });
        if accepted {
            for segment in &mut segments[start..end] {
                segment.satisfied_by = Some(SatisfiedBy::SkillPrelude);
            }
        }
        start = end.max(start + 1);
    }
}

/// §7.6: the command to execute. Every satisfied segment is rebuilt as single-quoted argv
/// with argv[0] the resolved file (the word as written when a bare `*` entry allowed an
/// executable that does not resolve) and dispatch wrappers dropped, so globs and `$` become
/// literal and PATH cannot change what runs. Its heredocs follow with a fresh quoted
/// delimiter, so their bodies are literal too (an unquoted body's `\$`, `` \` `` and `\\` are
/// unescaped first, as `sh` would; `$NAME` stays as written). Other segments (which a person
/// approved) stay as written; operators are kept. `None` on Windows (POSIX quoting does not
/// apply), and when an unsatisfied segment reads a heredoc.
pub fn enforced_command(segments: &[SegmentVerdict], platform: Platform) -> Option<String> {
    if platform.is_windows() || segments.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut bodies = String::new();
    for segment in segments {
        if let Some(operator) = segment.joined_by {
            out.push(' ');
            out.push_str(operator.as_str());
            out.push(' ');
        }
        if segment.satisfied_by.is_none() {
            if !segment.heredocs.is_empty() {
                return None;
            }
            out.push_str(&segment.raw);
            continue;
        }
        let program = segment
            .resolution
            .run_path()
            .unwrap_or(&segment.resolution.raw_executable);
        out.push_str(&quote_shell_arg(program));
        for arg in segment.effective_argv.iter().skip(1) {
            out.push(' ');
            out.push_str(&quote_shell_arg(arg));
        }
        for heredoc in &segment.heredocs {
            let body = literal_heredoc_body(heredoc);
            let delimiter = fresh_delimiter(&body);
            out.push_str(" <<'");
            out.push_str(&delimiter);
            out.push('\'');
            bodies.push_str(&body);
            bodies.push_str(&delimiter);
            bodies.push('\n');
        }
    }
    if !bodies.is_empty() {
        out.push('\n');
        out.push_str(&bodies);
    }
    Some(out)
}

/// A heredoc's body as its program reads it, with `$NAME` left unexpanded.
fn literal_heredoc_body(heredoc: &ShellHeredoc) -> String {
    if heredoc.quoted {
        return heredoc.body.clone();
    }
    let mut out = String::with_capacity(heredoc.body.len());
    let mut chars = heredoc.body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('$' | '`' | '\\')) {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// A heredoc delimiter that is no line of `body`.
fn fresh_delimiter(body: &str) -> String {
    let mut delimiter = String::from("CLAWLESS_EOF");
    let mut n = 0;
    while body.split('\n').any(|line| line == delimiter) {
        n += 1;
        delimiter = format!("CLAWLESS_EOF_{n}");
    }
    delimiter
}

/// §7.8 allow-always, clawless style: for every segment not yet satisfied, an entry pinning
/// its resolved executable and its exact arguments. `None` when any such segment cannot get
/// one (unresolved, blocked, refused, a code carrier, a path the glob syntax cannot spell),
/// or when nothing is left to allow.
pub fn derive_allow_always(segments: &[SegmentVerdict]) -> Option<Vec<AllowlistEntry>> {
    let mut entries: Vec<AllowlistEntry> = Vec::new();
    for segment in segments
        .iter()
        .filter(|segment| segment.satisfied_by.is_none())
    {
        if !segment.satisfiable()
            || segment
                .carrier
                .as_ref()
                .is_some_and(|carrier| carrier.kind == CarrierKind::Code)
        {
            return None;
        }
        let path = segment.resolution.resolved_path.as_deref()?;
        if path.contains(['*', '?']) || !path.contains(['/', '\\']) {
            return None;
        }
        let args = format_exec_command(segment.effective_argv.get(1..).unwrap_or_default());
        let entry = AllowlistEntry {
            pattern: path.to_owned(),
            arg_pattern: Some(format!("^{}$", regex::escape(&args))),
            source: Some(ALLOW_ALWAYS_SOURCE.to_owned()),
        };
        if !entries.contains(&entry) {
            entries.push(entry);
        }
    }
    (!entries.is_empty()).then_some(entries)
}
