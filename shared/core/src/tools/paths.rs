//! Turning the `path` a model passes to a file tool into a store and key, and refusing
//! anything that would leave the agent's roots.
//!
//! Three forms are accepted: a path relative to the workspace root, an absolute location
//! (a directory path or an `s3://` URI) inside the workspace, and, for `read` only, a skill
//! `<location>` from the skills prompt (including `~/`-compacted ones) inside one of the
//! agent's skill sources. Everything else is refused before any store is touched: `..`
//! segments, percent-encoded dots and separators, backslashes, NULs, empty paths and
//! absolute locations outside those roots. The object store validates keys again, so a
//! mistake here still cannot escape a store's root.

use std::fmt;
use std::sync::Arc;

use clawless_base::object_store::{ObjectStore, validate_key};
use clawless_skills::location::resolve_skill_location;

#[cfg(test)]
use super::SandboxView;
use super::{ToolContext, Workspace};

/// Why a path was refused. The message is shown to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    /// The path as the model gave it.
    pub path: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for PathError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Refused path {:?}: {}", self.path, self.reason)
    }
}

impl std::error::Error for PathError {}

/// A path resolved to an object.
#[derive(Debug, Clone)]
pub struct ResolvedPath {
    /// The store holding the object.
    pub store: Arc<dyn ObjectStore>,
    /// The object's key in `store`.
    pub key: String,
    /// For workspace objects, the key relative to the workspace root (e.g. `memory/a.md`);
    /// `None` for a skill file outside the workspace.
    pub workspace_relative: Option<String>,
}

/// Resolves `path` inside the workspace (write, edit, memory tools).
pub fn resolve_workspace_path(
    workspace: &Workspace, path: &str,
) -> Result<ResolvedPath, PathError> {
    let path = screen(path)?;
    if is_absolute(path) {
        return workspace_location(workspace, path).ok_or_else(|| refuse(path, OUTSIDE_WORKSPACE));
    }
    let relative = normalize_relative(path)?;
    let key = format!("{}{relative}", workspace.prefix);
    validate_key(&key).map_err(|_| refuse(path, "not a valid file path"))?;
    Ok(ResolvedPath {
        store: Arc::clone(&workspace.store),
        key,
        workspace_relative: Some(relative),
    })
}

/// Resolves `path` for `write` and `edit`: [`resolve_workspace_path`], with a sandboxed
/// session's `/workspace/…` taken as its own workspace.
pub fn resolve_write_path(context: &ToolContext, path: &str) -> Result<ResolvedPath, PathError> {
    let path = screen(path)?;
    match (&context.sandbox, jail_relative(path)) {
        (Some(_), Some(relative)) => resolve_workspace_path(&context.workspace, relative),
        _ => resolve_workspace_path(&context.workspace, path),
    }
}

/// Resolves `path` for `read`: the workspace first, then the skill sources (which is how a
/// skill `<location>`, `~/` form included, is opened). A sandboxed session's `/workspace/…`
/// is its own workspace, and `/agent/…` the agent's when its view has it (never memory).
pub fn resolve_read_path(context: &ToolContext, path: &str) -> Result<ResolvedPath, PathError> {
    let path = screen(path)?;
    if let Some(view) = &context.sandbox {
        if let Some(relative) = jail_relative(path) {
            return resolve_workspace_path(&context.workspace, relative);
        }
        if let Some(relative) = path
            .strip_prefix(AGENT_MOUNT)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        {
            let Some(agent) = &view.agent else {
                return Err(refuse(path, "the agent's workspace is not readable here"));
            };
            let relative = relative.trim_start_matches('/');
            let resolved = resolve_workspace_path(agent, relative)?;
            let memory = resolved
                .workspace_relative
                .as_deref()
                .is_some_and(hidden_from_sandbox);
            if memory {
                return Err(refuse(
                    path,
                    "memory and other sandboxes stay out of a sandbox",
                ));
            }
            return Ok(resolved);
        }
    }
    if !is_absolute(path) {
        return resolve_workspace_path(&context.workspace, path);
    }
    if let Some(resolved) = workspace_location(&context.workspace, path) {
        return Ok(resolved);
    }
    match resolve_skill_location(&context.skill_sources, path, &context.home_dirs) {
        Some(found) if validate_key(&found.key).is_ok() => Ok(ResolvedPath {
            store: found.store,
            key: found.key,
            workspace_relative: None,
        }),
        _ => Err(refuse(
            path,
            "it is outside the workspace and the skill directories",
        )),
    }
}

/// A place `ls`, `find` or `grep` starts from: a directory or a file inside a workspace.
#[derive(Debug, Clone)]
pub struct SearchRoot {
    /// The workspace searched (a sandboxed session's own, or the agent's at `/agent`).
    pub workspace: Workspace,
    /// The path below the workspace root, without a trailing `/`; `""` for the root itself.
    pub relative: String,
    /// True for the agent's workspace seen from a sandbox: its memory and the other
    /// sandboxes stay hidden ([`hidden_from_sandbox`]).
    pub seen_from_sandbox: bool,
}

/// Resolves the `path` of a search tool: `None`, `""`, `.` and `./` name the workspace root;
/// otherwise the forms [`resolve_read_path`] accepts for workspace files, directories
/// included, with one leading `@` dropped (as models sometimes quote paths). Skill sources
/// are not searchable.
pub fn resolve_search_root(
    context: &ToolContext, path: Option<&str>,
) -> Result<SearchRoot, PathError> {
    let given = path.map(str::trim).unwrap_or_default();
    let given = given.strip_prefix('@').unwrap_or(given);
    let root_of = |workspace: &Workspace, relative: String, seen_from_sandbox| SearchRoot {
        workspace: workspace.clone(),
        relative,
        seen_from_sandbox,
    };
    if given.is_empty() || given == "." || given == "./" {
        return Ok(root_of(&context.workspace, String::new(), false));
    }
    let path = screen(given)?;
    if let Some(view) = &context.sandbox {
        if let Some(relative) = jail_relative(path) {
            return Ok(root_of(&context.workspace, relative_dir(relative), false));
        }
        if let Some(relative) = path
            .strip_prefix(AGENT_MOUNT)
            .filter(|rest| rest.is_empty() || rest.starts_with('/'))
        {
            let Some(agent) = &view.agent else {
                return Err(refuse(path, "the agent's workspace is not readable here"));
            };
            let relative = relative_dir(relative);
            if hidden_from_sandbox(&relative) {
                return Err(refuse(
                    path,
                    "memory and other sandboxes stay out of a sandbox",
                ));
            }
            return Ok(root_of(agent, relative, true));
        }
    }
    if !is_absolute(path) {
        return Ok(root_of(&context.workspace, relative_dir(path), false));
    }
    let workspace = &context.workspace;
    let root = workspace.display_root();
    if path.trim_end_matches('/') == root.trim_end_matches('/') {
        return Ok(root_of(workspace, String::new(), false));
    }
    let key = workspace
        .store
        .key_for_location(path.trim_end_matches('/'))
        .ok_or_else(|| refuse(path, OUTSIDE_WORKSPACE))?;
    match key.strip_prefix(&workspace.prefix) {
        Some(relative) if !relative.is_empty() => {
            Ok(root_of(workspace, relative.to_owned(), false))
        }
        _ => Err(refuse(path, OUTSIDE_WORKSPACE)),
    }
}

/// `./a//b/` becomes `a/b`; `""` names the root.
fn relative_dir(path: &str) -> String {
    path.split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect::<Vec<_>>()
        .join("/")
}

const OUTSIDE_WORKSPACE: &str = "it is outside the workspace";

/// Where a sandboxed session sees its own workspace (as its commands do, in the jail).
const JAIL_MOUNT: &str = "/workspace";

/// Where a sandboxed session with `workspaceAccess: ro` sees the agent's workspace.
const AGENT_MOUNT: &str = "/agent";

/// `rest` of `/workspace/rest` (or `""` for `/workspace` itself).
fn jail_relative(path: &str) -> Option<&str> {
    let rest = path.strip_prefix(JAIL_MOUNT)?;
    (rest.is_empty() || rest.starts_with('/')).then(|| rest.trim_start_matches('/'))
}

/// What a sandbox never sees of the agent's workspace at `/agent`: its memory, and the
/// other sandboxes' workspaces kept under `.sandboxes/`.
pub(crate) fn hidden_from_sandbox(relative: &str) -> bool {
    is_memory_path(relative)
        || relative.eq_ignore_ascii_case("memory")
        || relative == ".sandboxes"
        || relative.starts_with(".sandboxes/")
}

/// `MEMORY.md`, `memory.md` and anything under `memory/`: the agent's memory.
fn is_memory_path(relative: &str) -> bool {
    let lower = relative.to_ascii_lowercase();
    lower == "memory.md" || lower.starts_with("memory/")
}

fn refuse(path: &str, reason: &'static str) -> PathError {
    PathError {
        path: path.to_owned(),
        reason,
    }
}

/// Checks that apply to every form; returns the trimmed path.
fn screen(path: &str) -> Result<&str, PathError> {
    let trimmed = path.trim();
    if trimmed.is_empty() {
        return Err(refuse(path, "the path is empty"));
    }
    if trimmed.contains('\0') {
        return Err(refuse(path, "the path contains a NUL character"));
    }
    if trimmed.contains('\\') {
        return Err(refuse(path, "use '/' as the path separator"));
    }
    let lower = trimmed.to_ascii_lowercase();
    // Some layer (an S3 console, a proxy, a future decoder) might decode these; refusing
    // them keeps `%2e%2e/` from ever turning into `../`.
    if ["%2e", "%2f", "%5c", "%00"]
        .iter()
        .any(|encoded| lower.contains(encoded))
    {
        return Err(refuse(
            path,
            "percent-encoded dots or separators are not accepted",
        ));
    }
    if trimmed.split('/').any(|segment| segment == "..") {
        return Err(refuse(path, "'..' segments are not allowed"));
    }
    Ok(trimmed)
}

/// A directory path, a URI or a `~/` path: anything that names a location rather than a
/// path below the workspace.
fn is_absolute(path: &str) -> bool {
    path.starts_with('/') || path.starts_with('~') || path.contains("://")
}

fn workspace_location(workspace: &Workspace, location: &str) -> Option<ResolvedPath> {
    let key = workspace.store.key_for_location(location)?;
    let relative = key.strip_prefix(&workspace.prefix)?;
    if relative.is_empty() || validate_key(&key).is_err() {
        return None;
    }
    Some(ResolvedPath {
        store: Arc::clone(&workspace.store),
        workspace_relative: Some(relative.to_owned()),
        key,
    })
}

/// `./a//b` becomes `a/b`; a path naming the root itself is refused.
fn normalize_relative(path: &str) -> Result<String, PathError> {
    let segments: Vec<&str> = path
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect();
    if segments.is_empty() {
        return Err(refuse(
            path,
            "the path names the workspace root, not a file",
        ));
    }
    if path.ends_with('/') {
        return Err(refuse(path, "the path names a directory, not a file"));
    }
    Ok(segments.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::InMemoryObjectStore;
    use crate::tools::SessionFacts;
    use clawless_skills::source::{SkillSource, SkillSourceKind};

    fn context() -> (InMemoryObjectStore, ToolContext) {
        let store = InMemoryObjectStore::named("bucket");
        let shared: Arc<dyn ObjectStore> = Arc::new(store.clone());
        let context = ToolContext {
            workspace: Workspace {
                store: Arc::clone(&shared),
                prefix: "agents/main/workspace/".to_owned(),
            },
            skill_sources: vec![SkillSource::new(
                SkillSourceKind::Bundled,
                shared,
                "skills/bundled",
            )],
            home_dirs: vec!["mem://bucket/skills".to_owned()],
            web: None,
            session: SessionFacts::default(),
            sandbox: None,
        };
        (store, context)
    }

    /// A sandboxed session's context: its workspace is the sandbox copy, and `agent` (for
    /// `workspaceAccess: ro`) the agent's own.
    fn sandboxed(agent: bool) -> ToolContext {
        let (_, mut ctx) = context();
        let agent_workspace = ctx.workspace.clone();
        ctx.workspace.prefix = "agents/main/workspace/.sandboxes/g-1/".to_owned();
        ctx.sandbox = Some(SandboxView {
            agent: agent.then_some(agent_workspace),
        });
        ctx
    }

    #[test]
    fn a_sandbox_maps_workspace_and_agent_mounts_and_nothing_else() {
        let ro = sandboxed(true);
        let key = |result: Result<ResolvedPath, PathError>| result.map(|resolved| resolved.key);
        let own = "agents/main/workspace/.sandboxes/g-1/";
        assert_eq!(
            key(resolve_read_path(&ro, "/workspace/notes.txt")).as_deref(),
            Ok(format!("{own}notes.txt").as_str())
        );
        assert_eq!(
            key(resolve_write_path(&ro, "/workspace/a/b.md")).as_deref(),
            Ok(format!("{own}a/b.md").as_str())
        );
        assert_eq!(
            key(resolve_read_path(&ro, "/agent/SOUL.md")).as_deref(),
            Ok("agents/main/workspace/SOUL.md")
        );
        // Memory, escapes and look-alike mounts stay refused.
        for path in [
            "/agent/MEMORY.md",
            "/agent/memory.md",
            "/agent/memory/2026-11-28.md",
            "/agent/Memory/x.md",
            "/agent/.sandboxes/other-group/notes.md",
            "/agent/../MEMORY.md",
            "/workspace/../../MEMORY.md",
            "/workspace/%2e%2e/MEMORY.md",
            "/agentx/SOUL.md",
            "/workspaces/x.md",
            "/etc/passwd",
        ] {
            assert!(resolve_read_path(&ro, path).is_err(), "{path}");
        }
        // Writes never reach the agent's workspace through `/agent`.
        assert!(resolve_write_path(&ro, "/agent/SOUL.md").is_err());
        // Without `ro`, `/agent` is not readable at all.
        let none = sandboxed(false);
        assert!(resolve_read_path(&none, "/agent/SOUL.md").is_err());
        // Outside a sandbox, `/workspace` is just a path outside the workspace.
        let (_, owner) = context();
        assert!(resolve_read_path(&owner, "/workspace/notes.txt").is_err());
    }

    #[test]
    fn relative_paths_land_under_the_workspace_prefix() {
        let (_, ctx) = context();
        for (path, key) in [
            ("MEMORY.md", "agents/main/workspace/MEMORY.md"),
            ("./notes//a.md", "agents/main/workspace/notes/a.md"),
            (
                "  skills/x/SKILL.md ",
                "agents/main/workspace/skills/x/SKILL.md",
            ),
        ] {
            let resolved = resolve_workspace_path(&ctx.workspace, path).unwrap();
            assert_eq!(resolved.key, key, "{path}");
        }
    }

    #[test]
    fn absolute_workspace_locations_resolve_to_the_same_key() {
        let (_, ctx) = context();
        let resolved = resolve_workspace_path(
            &ctx.workspace,
            "mem://bucket/agents/main/workspace/memory/a.md",
        )
        .unwrap();
        assert_eq!(resolved.key, "agents/main/workspace/memory/a.md");
        assert_eq!(resolved.workspace_relative.as_deref(), Some("memory/a.md"));
    }

    #[test]
    fn traversal_and_escapes_are_refused_for_writes() {
        let (_, ctx) = context();
        for bad in [
            "",
            "   ",
            "../x",
            "a/../../x",
            "skills/../../secret",
            "/etc/passwd",
            "%2e%2e/secret",
            "%2E%2e%2fsecret",
            "a%2fb",
            "..\\x",
            "a\0b",
            ".",
            "./",
            "notes/",
            "~/bundled/weather/SKILL.md",
            "mem://bucket/agents/other/workspace/MEMORY.md",
            "mem://bucket/agents/main/workspace/../other/MEMORY.md",
            "mem://bucket/agents/main/workspace/",
            "mem://other-bucket/agents/main/workspace/MEMORY.md",
            "s3://other-bucket/agents/main/workspace/MEMORY.md",
            "mem://bucket/skills/bundled/weather/SKILL.md",
        ] {
            assert!(
                resolve_workspace_path(&ctx.workspace, bad).is_err(),
                "{bad:?} should be refused"
            );
        }
    }

    #[test]
    fn reads_also_accept_skill_locations_but_nothing_else_outside() {
        let (_, ctx) = context();
        let direct =
            resolve_read_path(&ctx, "mem://bucket/skills/bundled/weather/SKILL.md").unwrap();
        assert_eq!(direct.key, "skills/bundled/weather/SKILL.md");
        assert!(direct.workspace_relative.is_none());
        let home = resolve_read_path(&ctx, "~/bundled/weather/SKILL.md").unwrap();
        assert_eq!(home.key, "skills/bundled/weather/SKILL.md");

        for bad in [
            "~/../agents/main/workspace/MEMORY.md",
            "~/managed/x/SKILL.md",
            "mem://bucket/skills/managed/x/SKILL.md",
            "mem://bucket/skills/bundled/../../agents/other/MEMORY.md",
            "s3://other-bucket/skills/bundled/weather/SKILL.md",
            "/etc/passwd",
            "file:///etc/passwd",
        ] {
            let err = resolve_read_path(&ctx, bad).unwrap_err();
            assert_eq!(err.path, bad);
        }
    }
}
