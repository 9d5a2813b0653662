//! A loaded skill (`SkillEntry`) and how one `SKILL.md` becomes one (spec §1.5–§1.6).

use serde::Serialize;

use super::diagnostics::DiagnosticKind;
use super::frontmatter::{Frontmatter, parse_frontmatter};
use super::metadata::{
    SkillInvocation, SkillMetadata, ToolDispatch, resolve_homepage, resolve_invocation,
    resolve_metadata, resolve_tool_dispatch,
};
use super::source::SkillSourceKind;

/// A merged, parsed skill.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillEntry {
    /// `name:` or the directory name.
    pub name: String,
    /// `description:` (never empty).
    pub description: String,
    /// The source it came from (the last writer for its name).
    pub source: SkillSourceKind,
    /// Where its `SKILL.md` is, as the model and the `read` tool see it.
    pub location: String,
    /// Object key of its `SKILL.md` in its store.
    pub key: String,
    /// Every frontmatter value, as strings.
    pub frontmatter: Frontmatter,
    /// The `metadata.openclaw` block, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<SkillMetadata>,
    /// Who may invoke it.
    pub invocation: SkillInvocation,
    /// Direct tool dispatch for its slash command.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispatch: Option<ToolDispatch>,
    /// Homepage for status views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
}

impl SkillEntry {
    /// `metadata.skillKey`, else the name: the key for `skills.entries` and `allowBundled`.
    pub fn skill_key(&self) -> &str {
        self.metadata
            .as_ref()
            .and_then(|m| m.skill_key.as_deref())
            .unwrap_or(&self.name)
    }

    /// Whether the model sees it in `<available_skills>`.
    pub fn visible_to_model(&self) -> bool {
        !self.invocation.disable_model_invocation
    }
}

/// A `SKILL.md` that parsed, before it is placed in a source.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParsedSkill {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) frontmatter: Frontmatter,
    pub(crate) metadata: Option<SkillMetadata>,
    pub(crate) invocation: SkillInvocation,
    pub(crate) dispatch: Option<ToolDispatch>,
    pub(crate) homepage: Option<String>,
}

impl ParsedSkill {
    pub(crate) fn into_entry(
        self, source: SkillSourceKind, key: String, location: String,
    ) -> SkillEntry {
        SkillEntry {
            name: self.name,
            description: self.description,
            source,
            location,
            key,
            frontmatter: self.frontmatter,
            metadata: self.metadata,
            invocation: self.invocation,
            dispatch: self.dispatch,
            homepage: self.homepage,
        }
    }
}

/// Why a `SKILL.md` did not become a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rejection {
    pub(crate) kind: DiagnosticKind,
    pub(crate) message: String,
}

impl Rejection {
    fn new(kind: DiagnosticKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
        }
    }
}

/// Parses one `SKILL.md`; `dir_name` is the fallback name.
pub(crate) fn parse_skill(bytes: &[u8], dir_name: &str) -> Result<ParsedSkill, Rejection> {
    if bytes.contains(&0) {
        return Err(Rejection::new(
            DiagnosticKind::Binary,
            "SKILL.md holds NUL bytes: not a text file",
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|err| {
        Rejection::new(
            DiagnosticKind::Binary,
            format!("SKILL.md is not valid UTF-8 ({err})"),
        )
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let frontmatter = parse_frontmatter(text);
    if frontmatter.is_empty() {
        return Err(Rejection::new(
            DiagnosticKind::MissingFrontmatter,
            "SKILL.md has no frontmatter (a `---` block with name and description)",
        ));
    }
    let name = match frontmatter
        .get("name")
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
    {
        Some(name) => name.to_owned(),
        None => dir_name.trim().to_owned(),
    };
    if let Some(problem) = unsafe_name_problem(&name) {
        return Err(Rejection::new(
            DiagnosticKind::InvalidName,
            format!("skill name {name:?} {problem}"),
        ));
    }
    let description = frontmatter
        .get("description")
        .map(|d| d.trim())
        .unwrap_or_default();
    if description.is_empty() {
        return Err(Rejection::new(
            DiagnosticKind::MissingDescription,
            "frontmatter has no description",
        ));
    }
    let metadata = resolve_metadata(&frontmatter);
    let homepage = resolve_homepage(&frontmatter, metadata.as_ref());
    Ok(ParsedSkill {
        name,
        description: description.to_owned(),
        invocation: resolve_invocation(&frontmatter),
        dispatch: resolve_tool_dispatch(&frontmatter),
        metadata,
        homepage,
        frontmatter,
    })
}

/// OpenClaw accepts any name; clawless refuses the few that could be used as a path or
/// that would corrupt a one-line listing, since names end up in keys, commands and logs.
fn unsafe_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("is empty")
    } else if name.contains('/') || name.contains('\\') {
        Some("contains a path separator")
    } else if name.contains("..") {
        Some("contains '..'")
    } else if name.chars().any(char::is_control) {
        Some("contains control characters")
    } else {
        None
    }
}
