//! Exec approvals: would this command run on that node, and what exactly runs.
//!
//! The engine is pure: it reads a node's filesystem only through [`fs::NodeFs`], so the same
//! code decides on a real node (a real filesystem) and against a node described by data
//! (`clawless exec check` with an `fs` block, or the backend's pre-check against a node's
//! reported facts).
//!
//! Layout:
//! - `shell`: shell analysis (chains, pipelines, heredocs, quoting) per spec §7.3;
//! - `system_run`: the `system.run` request rules of §8.3 (argv, `rawCommand`, env);
//! - `fs`: the filesystem port and a data-described node;
//! - `resolve`: executable resolution on a node's PATH (§7.4);
//! - `wrappers`: dispatch wrappers unwrapped or policy-blocked (§7.4);
//! - `allowlist`: path globs and argPatterns (§7.5);
//! - `safe_bins`: safe bins, profiles and argv validation (§7.6);
//! - `carriers`: binaries that run code their arguments choose (clawless only);
//! - `policy`: modes, decisions, fallbacks and the exact denial strings (§7.1, §7.2, §7.8);
//! - `evaluate`: [`evaluate::evaluate_exec`], the decision itself;
//! - `deviation`: every rule where clawless decides differently from OpenClaw, with a
//!   stable id (`docs/exec.md` has the table), and the attack each stops;
//! - `check`: the JSON contract of `clawless exec check`.

pub mod allowlist;
pub mod carriers;
pub mod check;
pub mod deviation;
pub mod evaluate;
pub mod fs;
pub mod node;
pub mod policy;
pub mod resolve;
pub mod safe_bins;
pub mod shell;
pub mod system_run;
pub mod wrappers;

use serde::{Deserialize, Serialize};

/// The operating system family of a node, as nodes report it (`linux`, `darwin`, `win32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    /// Linux.
    Linux,
    /// macOS.
    Darwin,
    /// Windows (`win32` on the wire).
    #[serde(rename = "win32")]
    Windows,
    /// Any other POSIX system.
    #[serde(other)]
    Other,
}

impl Platform {
    /// Parses a reported platform name (`linux`, `darwin`/`macos`, `win32`/`windows`, …).
    pub fn parse(name: &str) -> Self {
        let lower = name.trim().to_ascii_lowercase();
        if lower.starts_with("win") {
            Self::Windows
        } else if lower.contains("darwin") || lower.contains("mac") {
            Self::Darwin
        } else if lower.contains("linux") {
            Self::Linux
        } else {
            Self::Other
        }
    }

    /// The platform of the machine this code runs on.
    pub fn current() -> Self {
        Self::parse(std::env::consts::OS)
    }

    /// True for Windows.
    pub fn is_windows(self) -> bool {
        matches!(self, Self::Windows)
    }
}

/// How much a node lets run (spec §7.1), ordered from strictest to loosest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Security {
    /// Nothing runs.
    Deny,
    /// Only what the allowlist, safe bins or skill bins allow (or what a person approves).
    Allowlist,
    /// Anything runs.
    Full,
}

/// When a person is asked (spec §7.1), ordered from least to most asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ask {
    /// Never.
    Off,
    /// When the allowlist does not cover the command.
    OnMiss,
    /// Every time.
    Always,
}

/// One allowlist entry: a path glob (§7.5), optionally bound to its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AllowlistEntry {
    /// Glob over the resolved executable path (`/usr/bin/*`, `~/bin/tool`, `*`).
    pub pattern: String,
    /// A regex the command's arguments must match in full. clawless honours it on every
    /// platform (OpenClaw only on Windows; deviation `arg-pattern`): it is how an entry binds
    /// its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg_pattern: Option<String>,
    /// Where the entry came from (`allow-always` for entries granted from the chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl AllowlistEntry {
    /// An entry with only a path pattern.
    pub fn pattern(pattern: impl Into<String>) -> Self {
        Self {
            pattern: pattern.into(),
            arg_pattern: None,
            source: None,
        }
    }
}

/// A skill binary as a node resolved it on its PATH (spec §6).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillBin {
    /// The bare name declared by a skill.
    pub name: String,
    /// Where the node found it.
    pub resolved_path: String,
}
