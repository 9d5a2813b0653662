//! The typed view of a skill's frontmatter: `metadata.openclaw` (and the legacy `clawdbot`
//! / `moltbot` keys), install specs, invocation flags and command dispatch (spec §2.3–§2.4).

use serde::Serialize;

use super::frontmatter::Frontmatter;

/// `metadata.openclaw` of a skill, after OpenClaw's lenient per-field rules.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillMetadata {
    /// `always: true` skips the `requires` checks (but not `os`). Only a JSON boolean counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub always: Option<bool>,
    /// Display emoji.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub emoji: Option<String>,
    /// Homepage shown by status views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
    /// Key for `skills.entries.<key>` and `allowBundled` (defaults to the skill name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_key: Option<String>,
    /// The env var an entry's `apiKey` satisfies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_env: Option<String>,
    /// Platforms the skill runs on (`darwin`, `linux`, `win32`…); empty means any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// Requirements; `None` when the block has no `requires` object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requires: Option<Requirements>,
    /// Valid install specs (invalid ones are dropped).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub install: Vec<InstallSpec>,
}

/// `metadata.openclaw.requires`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Requirements {
    /// Every one of these must be on PATH.
    pub bins: Vec<String>,
    /// At least one of these must be on PATH.
    pub any_bins: Vec<String>,
    /// Each must be set (env, entry env, or entry apiKey for `primaryEnv`).
    pub env: Vec<String>,
    /// Dotted config paths that must be truthy.
    pub config: Vec<String>,
}

/// Accepted install kinds; anything else drops the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum InstallKind {
    /// Homebrew formula or cask.
    Brew,
    /// npm package.
    Node,
    /// `go install` module.
    Go,
    /// `uv tool install` package.
    Uv,
    /// Direct download URL.
    Download,
}

/// One valid `metadata.openclaw.install[]` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallSpec {
    /// Installer kind.
    pub kind: InstallKind,
    /// Optional id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Optional label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Binaries the install provides.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<String>,
    /// Platforms this spec applies to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub os: Vec<String>,
    /// Brew formula (or cask).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// npm or uv package spec.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// Go module.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub module: Option<String>,
    /// Download URL (http or https).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Archive type, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archive: Option<String>,
    /// Whether to extract, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extract: Option<bool>,
    /// Path components to strip, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strip_components: Option<f64>,
    /// Target directory, passed through.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_dir: Option<String>,
}

/// Who may invoke a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillInvocation {
    /// `user-invocable` (default true): the skill gets a slash command.
    pub user_invocable: bool,
    /// `disable-model-invocation` (default false): hidden from the model's skills block.
    pub disable_model_invocation: bool,
}

/// `command-dispatch: tool`: the slash command calls a tool directly, without the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolDispatch {
    /// Tool to call (`command-tool`).
    pub tool_name: String,
    /// How arguments are passed; only `raw` exists.
    pub arg_mode: ArgMode,
}

/// Argument passing for tool-dispatched commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgMode {
    /// The trimmed argument text, as one string.
    Raw,
}

/// OpenClaw's boolean words: `true/1/yes/on`, `false/0/no/off`, anything else → `default`.
pub fn parse_frontmatter_bool(value: Option<&str>, default: bool) -> bool {
    let _ = (value, default);
    unimplemented!("owned by the frontmatter helper")
}

/// Reads `metadata` as JSON5 and resolves the `openclaw` (or legacy) block.
pub fn resolve_metadata(frontmatter: &Frontmatter) -> Option<SkillMetadata> {
    let _ = frontmatter;
    unimplemented!("owned by the frontmatter helper")
}

/// Reads `user-invocable` and `disable-model-invocation`.
pub fn resolve_invocation(frontmatter: &Frontmatter) -> SkillInvocation {
    let _ = frontmatter;
    unimplemented!("owned by the frontmatter helper")
}

/// Reads `command-dispatch` / `command-tool` / `command-arg-mode` (and their `_` spellings).
pub fn resolve_tool_dispatch(frontmatter: &Frontmatter) -> Option<ToolDispatch> {
    let _ = frontmatter;
    unimplemented!("owned by the frontmatter helper")
}

/// `metadata.homepage ?? homepage ?? website ?? url`.
pub fn resolve_homepage(
    frontmatter: &Frontmatter,
    metadata: Option<&SkillMetadata>,
) -> Option<String> {
    let _ = (frontmatter, metadata);
    unimplemented!("owned by the frontmatter helper")
}
