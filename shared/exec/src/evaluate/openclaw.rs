//! OpenClaw's node, replayed where it could decide differently: which
//! [`Deviation`] made clawless ask (or refuse) where OpenClaw would run the command.
//!
//! This is not a second policy engine. It reuses clawless's own analysis and only relaxes,
//! one at a time, the rules listed in [`deviation`](crate::deviation): OpenClaw ignores
//! argPatterns on POSIX, has no carriers, judges `su`/`pkexec`/`runuser` as plain binaries,
//! trusts a safe bin's resolved folder, has no `jq` module rule, accepts the skill prelude by
//! name, searches relative PATH entries, splits words on Unicode spaces and ends a comment at
//! the end of the text, honours `=command:<hash>` entries, runs allowed commands on Windows,
//! refuses fewer environment keys, and falls back to its allowlist when nobody answers.

use sha2::{Digest, Sha256};

use super::{
    ALLOW_ALWAYS_SOURCE, ExecEvaluation, ExecVerdict, NodeDecision, SatisfiedBy, SegmentVerdict,
    apply_skill_prelude, evaluate_exec, is_trusted_skill_bin,
};
use crate::Security;
use crate::carriers::{Carrier, CarrierKind};
use crate::deviation::Deviation;
use crate::fs::NodeFs;
use crate::policy::FallbackOutcome;
use crate::resolve::{
    ExecutableResolution, ResolveContext, resolve_executable, resolve_with_relative_entries,
};
use crate::shell::ShellHazard;
use crate::system_run::{
    env_assignments_refused_only_by_clawless, env_overrides_refused_only_by_clawless,
    format_exec_command,
};
use crate::wrappers::{PRIVILEGE_WRAPPERS, normalized_name, unwrap_dispatch};

/// Records on each segment the rule that leaves it unsatisfied although OpenClaw would
/// satisfy it. Call after clawless's own skill prelude pass.
pub(super) fn attribute_segments(
    segments: &mut [SegmentVerdict], request: &ExecEvaluation<'_>, context: &ResolveContext<'_>,
    fs: &dyn NodeFs,
) {
    for segment in segments.iter_mut() {
        segment.deviation = segment_deviation(segment, request, context, fs);
    }
    // The prelude as OpenClaw accepts it: `cat` and `printf` by name, wherever they live.
    let mut by_name = segments.to_vec();
    apply_skill_prelude(&mut by_name, request, false);
    for (segment, replay) in segments.iter_mut().zip(&by_name) {
        if segment.satisfied_by.is_none()
            && segment.deviation.is_none()
            && replay.satisfied_by == Some(SatisfiedBy::SkillPrelude)
        {
            segment.deviation = Some(Deviation::SkillPreludeBins);
        }
    }
}

/// The rule that changed this verdict's decision, if one did (see
/// [`deviation`](crate::deviation) for the order).
pub(super) fn verdict_deviation(
    verdict: &ExecVerdict, request: &ExecEvaluation<'_>, fs: &dyn NodeFs,
) -> Option<Deviation> {
    let policy = request.policy.policy();
    if policy.security == Security::Deny {
        return None;
    }
    if let NodeDecision::Denied { message, .. } = &verdict.node_decision {
        let env_refused = if message.contains("environment override rejected") {
            request
                .env
                .is_some_and(env_overrides_refused_only_by_clawless)
        } else if message.contains("command env assignment rejected") {
            std::iter::once(request.argv)
                .chain(
                    verdict
                        .segments
                        .iter()
                        .map(|segment| segment.argv.as_slice()),
                )
                .filter(|argv| crate::system_run::check_env_assignments(argv).is_err())
                .all(env_assignments_refused_only_by_clawless)
        } else {
            false
        };
        if env_refused {
            return Some(Deviation::EnvOverrideKeys);
        }
    }
    if policy.security != Security::Allowlist || request.approved {
        return None;
    }
    if !verdict.durable_approval_satisfied && matches_command_hash(verdict, request) {
        return Some(Deviation::CommandHashEntry);
    }
    if !verdict.analysis_ok {
        return comment_cut_deviation(verdict, request, fs);
    }
    if !verdict.allowlist_satisfied {
        let openclaw_satisfies = verdict
            .segments
            .iter()
            .all(|segment| segment.satisfied_by.is_some() || segment.deviation.is_some());
        return if openclaw_satisfies {
            verdict
                .segments
                .iter()
                .find_map(|segment| segment.deviation)
        } else {
            None
        };
    }
    if request.platform.is_windows()
        && verdict.enforced_command.is_none()
        && policy.ask != crate::Ask::Always
        && !verdict.durable_approval_satisfied
    {
        return Some(Deviation::WindowsNoRebuild);
    }
    // Satisfied, asked anyway (ask=always): OpenClaw's node falls back to its allowlist
    // (min(allowlist, full)) and would run it when nobody answers.
    if verdict.requires_approval
        && policy.ask_fallback == Security::Deny
        && matches!(verdict.on_approval_timeout, FallbackOutcome::Deny(_))
    {
        return Some(Deviation::AskFallbackDeny);
    }
    None
}

/// The rule that leaves `segment` unsatisfied although OpenClaw would satisfy it.
fn segment_deviation(
    segment: &SegmentVerdict, request: &ExecEvaluation<'_>, context: &ResolveContext<'_>,
    fs: &dyn NodeFs,
) -> Option<Deviation> {
    if segment.satisfied_by.is_some() || segment.effective_argv.is_empty() {
        return None;
    }
    let platform = request.platform;
    let args = &segment.effective_argv[1..];
    if segment.policy_blocked.is_some() {
        let name = normalized_name(&segment.effective_argv[0], platform);
        return (PRIVILEGE_WRAPPERS.contains(&name.as_str())
            && satisfies(&segment.resolution, args, request))
        .then_some(Deviation::PrivilegeWrapper);
    }
    if let Some(carrier) = &segment.carrier {
        return satisfies(&segment.resolution, args, request).then(|| carrier_rule(carrier));
    }
    if let Some(entry) = path_entry(&segment.resolution, args, request) {
        return Some(if entry.source.as_deref() == Some(ALLOW_ALWAYS_SOURCE) {
            Deviation::AllowAlwaysArgv
        } else {
            Deviation::ArgPattern
        });
    }
    if let Some(rule) = request
        .policy
        .safe_bins
        .stricter_rule(platform, &segment.resolution, args)
    {
        return Some(rule);
    }
    if let Some(resolution) =
        resolve_with_relative_entries(&segment.resolution.raw_executable, context, fs)
        && satisfies(&resolution, args, request)
    {
        return Some(Deviation::RelativePathEntry);
    }
    if segment.hazards.contains(&ShellHazard::NonAsciiWhitespace)
        && let Some(words) = openclaw_words(&segment.raw)
        && words != segment.argv
        && argv_satisfies(&words, request, context, fs)
    {
        return Some(Deviation::ShParsing);
    }
    None
}

/// A segment's words as OpenClaw's tokenizer reads them (§7.3 step 4): split on JavaScript
/// whitespace outside quotes, `'…'` literal, a backslash in `"…"` escaping only `\ " $ ``
/// and a newline, outside quotes escaping anything, and `#` starting a word ending the text.
/// `None` for an unterminated quote or escape.
fn openclaw_words(raw: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut quote: Option<char> = None;
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some('\'') if c == '\'' => quote = None,
            Some('"') if c == '"' => quote = None,
            Some('"')
                if c == '\\' && matches!(chars.peek(), Some('\\' | '"' | '$' | '`' | '\n')) =>
            {
                word.extend(chars.next());
            }
            Some(_) => word.push(c),
            None if c == '\\' => {
                word.push(chars.next()?);
                started = true;
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                started = true;
            }
            None if c == '#' && !started => break,
            None if is_js_space(c) => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            None => {
                word.push(c);
                started = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if started {
        words.push(word);
    }
    Some(words)
}

fn carrier_rule(carrier: &Carrier) -> Deviation {
    match carrier.kind {
        CarrierKind::Code => Deviation::InlineCode,
        CarrierKind::Exec => Deviation::ExecCarrier,
    }
}

/// The first entry OpenClaw would match: on POSIX by path alone (it ignores argPatterns),
/// on Windows with its argPattern.
fn path_entry<'a>(
    resolution: &ExecutableResolution, args: &[String], request: &'a ExecEvaluation<'_>,
) -> Option<&'a crate::AllowlistEntry> {
    let platform = request.platform;
    let resolved = resolution.resolved_path.as_deref();
    let real = resolution.resolved_real_path.as_deref();
    request
        .policy
        .entries
        .iter()
        .find(|entry| {
            if platform.is_windows() {
                entry.matches(
                    resolved,
                    real,
                    &|| format_exec_command(args),
                    platform,
                    request.home,
                )
            } else {
                entry.matches_path(resolved, real, platform, request.home)
            }
        })
        .map(|entry| entry.entry())
}

/// True when OpenClaw would satisfy an executable with these arguments: an entry by path, a
/// safe bin by its resolved folder, or a skill bin.
fn satisfies(
    resolution: &ExecutableResolution, args: &[String], request: &ExecEvaluation<'_>,
) -> bool {
    let policy = request.policy.policy();
    let safe_bins = &request.policy.safe_bins;
    path_entry(resolution, args, request).is_some()
        || safe_bins.check(request.platform, resolution, args).is_ok()
        || safe_bins
            .stricter_rule(request.platform, resolution, args)
            .is_some()
        || (policy.auto_allow_skills
            && is_trusted_skill_bin(resolution, &policy.skill_bins, request.platform))
}

/// True when OpenClaw would satisfy a segment with these words (its own unwrapping).
fn argv_satisfies(
    argv: &[String], request: &ExecEvaluation<'_>, context: &ResolveContext<'_>, fs: &dyn NodeFs,
) -> bool {
    let plan = unwrap_dispatch(argv, request.platform);
    let Some(effective) = argv
        .get(plan.command_index..)
        .filter(|rest| !rest.is_empty())
    else {
        return false;
    };
    if plan.policy_blocked.is_some()
        && !PRIVILEGE_WRAPPERS.contains(&normalized_name(&effective[0], request.platform).as_str())
    {
        return false;
    }
    let resolution = resolve_executable(&effective[0], context, fs);
    satisfies(&resolution, &effective[1..], request)
}

/// JavaScript's `\s`: what OpenClaw's tokenizer splits words on.
fn is_js_space(c: char) -> bool {
    (c.is_whitespace() && c != '\u{85}') || c == '\u{feff}'
}

/// True when an `=command:<hash>` entry names this exact command (OpenClaw's "allow always"
/// fallback: the first 16 hex digits of the SHA-256 of the trimmed command text).
fn matches_command_hash(verdict: &ExecVerdict, request: &ExecEvaluation<'_>) -> bool {
    let text = match &verdict.shell_payload {
        Some(payload) => payload.trim().to_owned(),
        None => format_exec_command(request.argv),
    };
    let digest = hex::encode(Sha256::digest(text.as_bytes()));
    let wanted = format!("=command:{}", &digest[..16]);
    request
        .policy
        .policy()
        .allowlist
        .iter()
        .any(|entry| entry.pattern.trim() == wanted)
}

/// `sh-parsing` for a command refused for a newline that follows a comment: OpenClaw's
/// tokenizer ends the comment at the end of the text, so it judges only what precedes it.
fn comment_cut_deviation(
    verdict: &ExecVerdict, request: &ExecEvaluation<'_>, fs: &dyn NodeFs,
) -> Option<Deviation> {
    let payload = verdict.shell_payload.as_deref()?;
    if request.platform.is_windows()
        || !matches!(
            verdict.reason.as_deref(),
            Some("unsupported shell token: \n" | "unsupported shell token: \r")
        )
    {
        return None;
    }
    let cut = openclaw_comment_start(payload)?;
    let argv = vec![
        "/bin/sh".to_owned(),
        "-lc".to_owned(),
        payload[..cut].to_owned(),
    ];
    let replay = evaluate_exec(
        &ExecEvaluation {
            argv: &argv,
            raw_command: None,
            env: None,
            ..*request
        },
        fs,
    );
    let openclaw_satisfies = replay.analysis_ok
        && replay
            .segments
            .iter()
            .all(|segment| segment.satisfied_by.is_some() || segment.deviation.is_some());
    openclaw_satisfies.then_some(Deviation::ShParsing)
}

/// Where OpenClaw's chain splitter starts a comment (an unquoted `#` at the start of the text
/// or after whitespace), when that comes before the first unquoted newline.
fn openclaw_comment_start(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut previous: Option<char> = None;
    for (at, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if let Some(open) = quote {
            if c == open {
                quote = None;
            } else if c == '\\' && open == '"' {
                escaped = true;
            }
        } else {
            match c {
                '\\' => escaped = true,
                '\'' | '"' => quote = Some(c),
                '\n' | '\r' => return None,
                '#' if previous.is_none_or(is_js_space) => return Some(at),
                _ => {}
            }
        }
        previous = Some(c);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_comment_start_is_found_before_the_first_newline_only() {
        assert_eq!(openclaw_comment_start("ls # x\nrm -rf /"), Some(3));
        assert_eq!(openclaw_comment_start("# x\nrm"), Some(0));
        assert_eq!(openclaw_comment_start("ls\n# x"), None);
        assert_eq!(openclaw_comment_start("echo '# x'\nrm"), None);
        assert_eq!(openclaw_comment_start("echo a#b\nrm"), None);
    }

    #[test]
    fn openclaws_words_split_on_unicode_spaces_outside_quotes_only() {
        let words = |raw: &str| openclaw_words(raw).unwrap();
        assert_eq!(words("ls\u{a0}-la"), ["ls", "-la"]);
        assert_eq!(words("ls '\u{a0}x' \"a b\""), ["ls", "\u{a0}x", "a b"]);
        assert_eq!(words(r#"echo "a\"b" c\ d #x"#), ["echo", "a\"b", "c d"]);
        assert_eq!(openclaw_words("echo 'x"), None);
    }

    #[test]
    fn javascript_spaces_include_the_bom_and_no_break_space() {
        assert!(is_js_space('\u{a0}'));
        assert!(is_js_space('\u{feff}'));
        assert!(is_js_space('\u{3000}'));
        assert!(!is_js_space('\u{85}'));
        assert!(!is_js_space('x'));
    }
}
