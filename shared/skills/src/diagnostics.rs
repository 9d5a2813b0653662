//! Diagnostics: why a skill or a part of a source was skipped. Never fatal, always explained.

use std::fmt;

use serde::Serialize;

use super::source::SkillSourceKind;

/// What went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiagnosticKind {
    /// A symlink leaves the source's root.
    SymlinkEscape,
    /// `SKILL.md` is a symlink (only real files are read).
    SymlinkedSkillFile,
    /// An entry the store could not read.
    Unreadable,
    /// `SKILL.md` is over `maxSkillFileBytes`.
    TooLarge,
    /// `SKILL.md` is not UTF-8 text.
    Binary,
    /// `SKILL.md` has no frontmatter block.
    MissingFrontmatter,
    /// The frontmatter has no (non-empty) description.
    MissingDescription,
    /// The name could be used to escape a path (`/`, `\`, `..`) or holds control characters.
    InvalidName,
    /// The source had more entries than the limits allow; the rest was not examined.
    Truncated,
    /// `SKILL.md` disappeared between listing and reading.
    Vanished,
}

/// One skipped skill or truncated source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillDiagnostic {
    /// The source it belongs to.
    pub source: SkillSourceKind,
    /// Where (a `SKILL.md`, a directory, or the source root).
    pub location: String,
    /// Category.
    pub kind: DiagnosticKind,
    /// One line for people.
    pub message: String,
}

impl fmt::Display for SkillDiagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}: {}", self.source, self.location, self.message)
    }
}
