//! Where clawless decides differently from OpenClaw's node (spec §7, §8.3), each rule with a
//! stable id. `docs/exec.md` lists the same rules in one table (a test keeps the two equal),
//! and `clawless exec check` names the rule that changed a decision.
//!
//! Every rule here makes clawless ask (or refuse) where OpenClaw's node would run the
//! command, and names the attack it stops. Where no attack needed a difference, the policy
//! follows the spec instead. In particular these follow OpenClaw, because an allowed command
//! runs rebuilt from its resolved argv, each word single-quoted and dispatch wrappers dropped
//! (§7.6), so what runs is exactly what was checked: `$VAR` arguments, heredocs (their bodies
//! are carried literally), `./` and `..` in executable paths, a bare `*` entry for an
//! executable that does not resolve, untrusted dispatch wrappers and shell transports,
//! assignment words, and the words `sh` and OpenClaw's tokenizer agree on.
//!
//! How a decision is attributed: each segment that clawless leaves unsatisfied but OpenClaw
//! would satisfy records the first rule below that made the difference
//! ([`SegmentVerdict::deviation`](super::evaluate::SegmentVerdict::deviation)). The whole
//! verdict records one rule ([`ExecVerdict::deviation`](super::evaluate::ExecVerdict::deviation)),
//! the first that applies in this order: a request-level rule (`env-override-keys`), a
//! `command-hash-entry`, an analysis-level rule (`sh-parsing`), then the first segment's rule
//! when OpenClaw would have satisfied every segment, then `windows-no-rebuild`, then
//! `ask-fallback-deny`. None when the decision equals OpenClaw's.

use serde::{Serialize, Serializer};

/// One rule where clawless's exec policy departs from OpenClaw's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Deviation {
    /// A code carrier (shell, interpreter with inline code or a program on stdin, awk, sed
    /// `e`/`w`, xargs, editors, multiplexers, code-running builtins) is satisfied only by an
    /// allowlist entry whose argPattern binds its arguments.
    InlineCode,
    /// An exec carrier (`find -exec`, `tar --to-command`, `git -c`/aliases, build and package
    /// runners, container CLIs, busybox applets, …) likewise needs an argPattern entry.
    ExecCarrier,
    /// `su`, `pkexec` and `runuser` are policy-blocked like `sudo`.
    PrivilegeWrapper,
    /// An allowlist entry's argPattern is honoured on every platform (OpenClaw: Windows only),
    /// and an argPattern that does not compile matches nothing.
    ArgPattern,
    /// Entries granted by "allow always" pin the exact arguments (OpenClaw: the path only).
    AllowAlwaysArgv,
    /// `=command:<hash>` allowlist entries (OpenClaw's fallback for "allow always") are not
    /// honoured.
    CommandHashEntry,
    /// A safe bin's real path (symlinks followed) must be in a trusted folder.
    SafeBinRealPath,
    /// A `jq` safe-bin filter may not `import` or `include` modules.
    JqModule,
    /// The skill display prelude's `cat` and `printf` must be trusted system binaries.
    SkillPreludeBins,
    /// PATH entries that are not absolute are skipped.
    RelativePathEntry,
    /// The command is read as `sh` reads it where OpenClaw's tokenizer reads other words (a
    /// comment ends at the newline; Unicode spaces do not split words).
    ShParsing,
    /// On Windows no command runs without approval: there is no rebuilt command to run.
    WindowsNoRebuild,
    /// More environment keys are refused in `system.run` overrides and `env NAME=…`
    /// assignments, keys compare without case, and values may not contain NUL.
    EnvOverrideKeys,
    /// An approval nobody answers is denied (default `askFallback: deny`; OpenClaw's node
    /// falls back to its allowlist).
    AskFallbackDeny,
}

impl Deviation {
    /// Every rule, in the order of the table in `docs/exec.md`.
    pub const ALL: &'static [Deviation] = &[
        Self::InlineCode,
        Self::ExecCarrier,
        Self::PrivilegeWrapper,
        Self::ArgPattern,
        Self::AllowAlwaysArgv,
        Self::CommandHashEntry,
        Self::SafeBinRealPath,
        Self::JqModule,
        Self::SkillPreludeBins,
        Self::RelativePathEntry,
        Self::ShParsing,
        Self::WindowsNoRebuild,
        Self::EnvOverrideKeys,
        Self::AskFallbackDeny,
    ];

    /// The stable kebab-case id (`inline-code`, …), as `clawless exec check` prints it.
    pub fn id(self) -> &'static str {
        match self {
            Self::InlineCode => "inline-code",
            Self::ExecCarrier => "exec-carrier",
            Self::PrivilegeWrapper => "privilege-wrapper",
            Self::ArgPattern => "arg-pattern",
            Self::AllowAlwaysArgv => "allow-always-argv",
            Self::CommandHashEntry => "command-hash-entry",
            Self::SafeBinRealPath => "safe-bin-real-path",
            Self::JqModule => "jq-module",
            Self::SkillPreludeBins => "skill-prelude-bins",
            Self::RelativePathEntry => "relative-path-entry",
            Self::ShParsing => "sh-parsing",
            Self::WindowsNoRebuild => "windows-no-rebuild",
            Self::EnvOverrideKeys => "env-override-keys",
            Self::AskFallbackDeny => "ask-fallback-deny",
        }
    }

    /// The rule with this id.
    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|rule| rule.id() == id)
    }
}

impl std::fmt::Display for Deviation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl Serialize for Deviation {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_kebab_case_and_round_trip() {
        let mut seen = std::collections::BTreeSet::new();
        for rule in Deviation::ALL {
            let id = rule.id();
            assert!(seen.insert(id), "{id} twice");
            assert!(
                id.bytes().all(|c| c.is_ascii_lowercase() || c == b'-'),
                "{id}"
            );
            assert_eq!(Deviation::from_id(id), Some(*rule));
            assert_eq!(serde_json::to_value(rule).unwrap(), id);
        }
    }

    /// The rule ids of the table under `## Where clawless departs from OpenClaw`.
    fn table_ids(page: &str) -> Vec<String> {
        let section = page
            .split("## Where clawless departs from OpenClaw")
            .nth(1)
            .expect("docs/exec.md has the deviations section");
        let section = section.split("\n## ").next().unwrap_or(section);
        section
            .lines()
            .filter(|line| line.starts_with('|'))
            .skip(2) // header and separator
            .map(|line| {
                let first = line.trim_start_matches('|').split('|').next().unwrap_or("");
                first.trim().trim_matches('`').to_owned()
            })
            .collect()
    }

    #[test]
    fn the_docs_table_lists_exactly_the_rules_in_code() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/exec.md");
        let page = std::fs::read_to_string(path).expect("docs/exec.md is readable");
        let ids = table_ids(&page);
        let expected: Vec<String> = Deviation::ALL
            .iter()
            .map(|rule| rule.id().to_owned())
            .collect();
        assert_eq!(
            ids, expected,
            "docs/exec.md's table and Deviation::ALL differ"
        );
    }
}
