//! The catalog of core tool ids (spec §11): the section (and so the `group:<section>`) each
//! tool belongs to, the profiles that include it, the owner-only tools, and how tool names are
//! normalised before any comparison.
//!
//! The catalog only names tools. What a tool does, and whether this runtime has it at all, is
//! the runtime's business: it hands the policy pipeline the ids it can actually run.

/// A section of the catalog. Each section is also a group, `group:<id>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolSection {
    /// `group:fs`: files in the workspace.
    Fs,
    /// `group:runtime`: commands and code execution.
    Runtime,
    /// `group:web`: search and fetch.
    Web,
    /// `group:memory`: memory search and reads.
    Memory,
    /// `group:sessions`: other sessions and sub-agents.
    Sessions,
    /// `group:ui`: browser and canvas.
    Ui,
    /// `group:messaging`: sending messages to channels.
    Messaging,
    /// `group:automation`: cron jobs and the gateway.
    Automation,
    /// `group:nodes`: paired devices.
    Nodes,
    /// `group:agents`: agent listing and planning.
    Agents,
    /// `group:media`: image, audio and video.
    Media,
}

impl ToolSection {
    /// Every section, in catalog order.
    pub const ALL: [ToolSection; 11] = [
        ToolSection::Fs,
        ToolSection::Runtime,
        ToolSection::Web,
        ToolSection::Memory,
        ToolSection::Sessions,
        ToolSection::Ui,
        ToolSection::Messaging,
        ToolSection::Automation,
        ToolSection::Nodes,
        ToolSection::Agents,
        ToolSection::Media,
    ];

    /// The section id (`fs`, `runtime`, …).
    pub fn id(self) -> &'static str {
        match self {
            ToolSection::Fs => "fs",
            ToolSection::Runtime => "runtime",
            ToolSection::Web => "web",
            ToolSection::Memory => "memory",
            ToolSection::Sessions => "sessions",
            ToolSection::Ui => "ui",
            ToolSection::Messaging => "messaging",
            ToolSection::Automation => "automation",
            ToolSection::Nodes => "nodes",
            ToolSection::Agents => "agents",
            ToolSection::Media => "media",
        }
    }

    /// The group name that stands for this section in policies (`group:fs`, …).
    pub fn group_name(self) -> &'static str {
        match self {
            ToolSection::Fs => "group:fs",
            ToolSection::Runtime => "group:runtime",
            ToolSection::Web => "group:web",
            ToolSection::Memory => "group:memory",
            ToolSection::Sessions => "group:sessions",
            ToolSection::Ui => "group:ui",
            ToolSection::Messaging => "group:messaging",
            ToolSection::Automation => "group:automation",
            ToolSection::Nodes => "group:nodes",
            ToolSection::Agents => "group:agents",
            ToolSection::Media => "group:media",
        }
    }

    /// The tool ids in this section, in catalog order.
    pub fn tools(self) -> impl Iterator<Item = &'static str> {
        CORE_TOOLS
            .iter()
            .filter(move |tool| tool.section == self)
            .map(|tool| tool.id)
    }
}

/// A named tool profile (`tools.profile`): a base allowlist that the rest of the policy
/// pipeline narrows further.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ToolProfile {
    /// Only `session_status`.
    Minimal,
    /// Files, runtime, web, memory, sessions, cron, planning and media generation.
    Coding,
    /// Sessions and `message`.
    Messaging,
    /// No restriction.
    Full,
}

impl ToolProfile {
    /// Parses a profile name, ignoring case and surrounding whitespace. `None` for an unknown
    /// name (which, per the spec, restricts nothing).
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "minimal" => Some(ToolProfile::Minimal),
            "coding" => Some(ToolProfile::Coding),
            "messaging" => Some(ToolProfile::Messaging),
            "full" => Some(ToolProfile::Full),
            _ => None,
        }
    }

    /// The profile's name as written in config.
    pub fn id(self) -> &'static str {
        match self {
            ToolProfile::Minimal => "minimal",
            ToolProfile::Coding => "coding",
            ToolProfile::Messaging => "messaging",
            ToolProfile::Full => "full",
        }
    }

    /// The tools the profile allows, in catalog order; `None` when it restricts nothing.
    pub fn tools(self) -> Option<Vec<&'static str>> {
        if self == ToolProfile::Full {
            return None;
        }
        Some(
            CORE_TOOLS
                .iter()
                .filter(|tool| tool.profiles.contains(&self))
                .map(|tool| tool.id)
                .collect(),
        )
    }
}

/// One core tool in the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreTool {
    /// The canonical (normalised) id the model calls it by.
    pub id: &'static str,
    /// The section, and so the `group:<section>`, it belongs to.
    pub section: ToolSection,
    /// The restricting profiles that include it (`full` includes everything and is not listed).
    pub profiles: &'static [ToolProfile],
}

const NONE: &[ToolProfile] = &[];
const CODING: &[ToolProfile] = &[ToolProfile::Coding];
const CODING_MESSAGING: &[ToolProfile] = &[ToolProfile::Coding, ToolProfile::Messaging];
const MESSAGING: &[ToolProfile] = &[ToolProfile::Messaging];
const EVERY_PROFILE: &[ToolProfile] = &[
    ToolProfile::Minimal,
    ToolProfile::Coding,
    ToolProfile::Messaging,
];

const fn tool(
    id: &'static str, section: ToolSection, profiles: &'static [ToolProfile],
) -> CoreTool {
    CoreTool {
        id,
        section,
        profiles,
    }
}

/// Every core tool, grouped by section, in catalog order.
pub const CORE_TOOLS: &[CoreTool] = &[
    tool("read", ToolSection::Fs, CODING),
    tool("write", ToolSection::Fs, CODING),
    tool("edit", ToolSection::Fs, CODING),
    tool("apply_patch", ToolSection::Fs, CODING),
    tool("grep", ToolSection::Fs, CODING),
    tool("find", ToolSection::Fs, CODING),
    tool("ls", ToolSection::Fs, CODING),
    tool("exec", ToolSection::Runtime, CODING),
    tool("process", ToolSection::Runtime, CODING),
    tool("code_execution", ToolSection::Runtime, CODING),
    tool("web_search", ToolSection::Web, CODING),
    tool("web_fetch", ToolSection::Web, CODING),
    tool("x_search", ToolSection::Web, CODING),
    tool("memory_search", ToolSection::Memory, CODING),
    tool("memory_get", ToolSection::Memory, CODING),
    tool("sessions_list", ToolSection::Sessions, CODING_MESSAGING),
    tool("sessions_history", ToolSection::Sessions, CODING_MESSAGING),
    tool("sessions_send", ToolSection::Sessions, CODING_MESSAGING),
    tool("sessions_spawn", ToolSection::Sessions, CODING),
    tool("sessions_yield", ToolSection::Sessions, CODING),
    tool("subagents", ToolSection::Sessions, CODING),
    tool("session_status", ToolSection::Sessions, EVERY_PROFILE),
    tool("browser", ToolSection::Ui, NONE),
    tool("canvas", ToolSection::Ui, NONE),
    tool("message", ToolSection::Messaging, MESSAGING),
    tool("cron", ToolSection::Automation, CODING),
    tool("gateway", ToolSection::Automation, NONE),
    tool("nodes", ToolSection::Nodes, NONE),
    tool("agents_list", ToolSection::Agents, NONE),
    tool("update_plan", ToolSection::Agents, CODING),
    tool("image", ToolSection::Media, CODING),
    tool("image_generate", ToolSection::Media, CODING),
    tool("music_generate", ToolSection::Media, CODING),
    tool("video_generate", ToolSection::Media, CODING),
    tool("tts", ToolSection::Media, NONE),
];

/// Tools only the owner of the deployment may use; they are removed for every other sender
/// (and for senders whose ownership is unknown).
pub const OWNER_ONLY_TOOLS: &[&str] = &["cron", "gateway", "nodes", "whatsapp_login"];

/// The group of every core tool except the ones that touch files or run commands
/// (`read write edit apply_patch grep find ls exec process`). OpenClaw's group leaves out
/// its coding tools; `grep`, `find` and `ls` are coding tools it never builds, so clawless
/// leaves them out too.
pub const CORE_GROUP: &str = "group:clawless";

/// OpenClaw's name for [`CORE_GROUP`], accepted so existing configs keep working.
pub const CORE_GROUP_OPENCLAW_ALIAS: &str = "group:openclaw";

/// The group of plugin tools. clawless has no plugins yet, so it names no tools.
pub const PLUGINS_GROUP: &str = "group:plugins";

/// The tools [`CORE_GROUP`] leaves out.
const OUTSIDE_CORE_GROUP: &[&str] = &[
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "exec",
    "process",
];

/// Canonical form of a tool name or policy entry: trimmed, lowercased, with the aliases
/// `bash` → `exec` and `apply-patch` → `apply_patch` resolved.
pub fn normalize_tool_name(raw: &str) -> String {
    let name = raw.trim().to_lowercase();
    match name.as_str() {
        "bash" => "exec".to_owned(),
        "apply-patch" => "apply_patch".to_owned(),
        _ => name,
    }
}

/// The catalog entry for a tool, looked up by its normalised name.
pub fn core_tool(name: &str) -> Option<&'static CoreTool> {
    let name = normalize_tool_name(name);
    CORE_TOOLS.iter().find(|tool| tool.id == name)
}

/// Whether the (normalised) name is a core tool.
pub fn is_core_tool(name: &str) -> bool {
    core_tool(name).is_some()
}

/// Whether the (normalised) name is an owner-only tool.
pub fn is_owner_only(name: &str) -> bool {
    let name = normalize_tool_name(name);
    OWNER_ONLY_TOOLS.contains(&name.as_str())
}

/// The members of a group, looked up by its normalised name; `None` when the name is not a
/// group. `group:plugins` is a group with no members.
pub fn tool_group(name: &str) -> Option<Vec<&'static str>> {
    let name = normalize_tool_name(name);
    if name == CORE_GROUP || name == CORE_GROUP_OPENCLAW_ALIAS {
        return Some(
            CORE_TOOLS
                .iter()
                .map(|tool| tool.id)
                .filter(|id| !OUTSIDE_CORE_GROUP.contains(id))
                .collect(),
        );
    }
    if name == PLUGINS_GROUP {
        return Some(Vec::new());
    }
    ToolSection::ALL
        .into_iter()
        .find(|section| section.group_name() == name)
        .map(|section| section.tools().collect())
}

/// Normalises policy entries and replaces each group name by its members. Blank entries are
/// dropped and duplicates kept once, first occurrence first. Other entries (globs, unknown
/// names) pass through normalised.
pub fn expand_tool_groups<I>(entries: I) -> Vec<String>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    let mut expanded: Vec<String> = Vec::new();
    let mut push = |name: String| {
        if !name.is_empty() && !expanded.contains(&name) {
            expanded.push(name);
        }
    };
    for entry in entries {
        let name = normalize_tool_name(entry.as_ref());
        match tool_group(&name) {
            Some(members) => members.into_iter().map(str::to_owned).for_each(&mut push),
            None => push(name),
        }
    }
    expanded
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn group(name: &str) -> BTreeSet<String> {
        tool_group(name)
            .expect("is a group")
            .into_iter()
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn normalize_trims_lowercases_and_resolves_aliases() {
        assert_eq!(normalize_tool_name(" BASH "), "exec");
        assert_eq!(normalize_tool_name("Apply-Patch"), "apply_patch");
        assert_eq!(normalize_tool_name("\tWeb_Fetch\n"), "web_fetch");
        // Only the whole name is an alias: a prefix or suffix is just another name.
        assert_eq!(normalize_tool_name("bash2"), "bash2");
        assert_eq!(normalize_tool_name("bash*"), "bash*");
    }

    #[test]
    fn catalog_ids_are_unique_and_canonical() {
        let ids: BTreeSet<&str> = CORE_TOOLS.iter().map(|tool| tool.id).collect();
        assert_eq!(ids.len(), CORE_TOOLS.len());
        assert_eq!(ids.len(), 35);
        for tool in CORE_TOOLS {
            assert_eq!(normalize_tool_name(tool.id), tool.id);
        }
    }

    #[test]
    fn sections_match_the_spec_groups() {
        assert_eq!(
            group("group:fs"),
            set(&["read", "write", "edit", "apply_patch", "grep", "find", "ls"])
        );
        assert_eq!(
            group("group:runtime"),
            set(&["exec", "process", "code_execution"])
        );
        assert_eq!(
            group("group:web"),
            set(&["web_search", "web_fetch", "x_search"])
        );
        assert_eq!(group("group:memory"), set(&["memory_search", "memory_get"]));
        assert_eq!(
            group("group:sessions"),
            set(&[
                "sessions_list",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
                "sessions_yield",
                "subagents",
                "session_status",
            ])
        );
        assert_eq!(group("group:ui"), set(&["browser", "canvas"]));
        assert_eq!(group("group:messaging"), set(&["message"]));
        assert_eq!(group("group:automation"), set(&["cron", "gateway"]));
        assert_eq!(group("group:nodes"), set(&["nodes"]));
        assert_eq!(group("group:agents"), set(&["agents_list", "update_plan"]));
        assert_eq!(
            group("group:media"),
            set(&[
                "image",
                "image_generate",
                "music_generate",
                "video_generate",
                "tts"
            ])
        );
    }

    #[test]
    fn core_group_is_everything_but_files_and_commands_under_both_names() {
        let core = group(CORE_GROUP);
        assert_eq!(core, group(CORE_GROUP_OPENCLAW_ALIAS));
        assert_eq!(core, group(" GROUP:OpenClaw "));
        assert_eq!(core.len(), CORE_TOOLS.len() - 9);
        for outside in [
            "read",
            "write",
            "edit",
            "apply_patch",
            "grep",
            "find",
            "ls",
            "exec",
            "process",
        ] {
            assert!(!core.contains(outside), "{outside}");
        }
        assert!(core.contains("browser") && core.contains("code_execution"));
    }

    #[test]
    fn plugins_group_names_no_tools_and_unknown_groups_are_not_groups() {
        assert_eq!(tool_group("group:plugins"), Some(Vec::new()));
        assert_eq!(tool_group("group:nope"), None);
        assert_eq!(tool_group("group:*"), None);
        assert_eq!(tool_group("fs"), None);
    }

    #[test]
    fn profiles_match_the_spec() {
        assert_eq!(ToolProfile::Minimal.tools(), Some(vec!["session_status"]));
        let coding: BTreeSet<String> = ToolProfile::Coding
            .tools()
            .expect("restricting")
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            coding,
            set(&[
                "read",
                "write",
                "edit",
                "apply_patch",
                "grep",
                "find",
                "ls",
                "exec",
                "process",
                "code_execution",
                "web_search",
                "web_fetch",
                "x_search",
                "memory_search",
                "memory_get",
                "sessions_list",
                "sessions_history",
                "sessions_send",
                "sessions_spawn",
                "sessions_yield",
                "subagents",
                "session_status",
                "cron",
                "update_plan",
                "image",
                "image_generate",
                "music_generate",
                "video_generate",
            ])
        );
        let messaging: BTreeSet<String> = ToolProfile::Messaging
            .tools()
            .expect("restricting")
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(
            messaging,
            set(&[
                "sessions_list",
                "sessions_history",
                "sessions_send",
                "session_status",
                "message",
            ])
        );
        assert_eq!(ToolProfile::Full.tools(), None);
    }

    #[test]
    fn tools_outside_every_profile_match_the_spec() {
        let outside: BTreeSet<String> = CORE_TOOLS
            .iter()
            .filter(|tool| tool.profiles.is_empty())
            .map(|tool| tool.id.to_owned())
            .collect();
        assert_eq!(
            outside,
            set(&[
                "browser",
                "canvas",
                "gateway",
                "nodes",
                "agents_list",
                "tts"
            ])
        );
    }

    #[test]
    fn profile_names_parse_loosely_and_unknown_names_are_none() {
        assert_eq!(ToolProfile::parse(" Coding "), Some(ToolProfile::Coding));
        assert_eq!(ToolProfile::parse("FULL"), Some(ToolProfile::Full));
        assert_eq!(ToolProfile::parse("everything"), None);
        for profile in [
            ToolProfile::Minimal,
            ToolProfile::Coding,
            ToolProfile::Messaging,
            ToolProfile::Full,
        ] {
            assert_eq!(ToolProfile::parse(profile.id()), Some(profile));
        }
    }

    #[test]
    fn owner_only_lookup_normalises() {
        assert!(is_owner_only("cron"));
        assert!(is_owner_only(" GATEWAY "));
        assert!(is_owner_only("whatsapp_login"));
        assert!(!is_owner_only("read"));
        assert!(is_core_tool("Nodes"));
        assert!(!is_core_tool("whatsapp_login"));
    }

    #[test]
    fn expansion_normalises_dedupes_and_keeps_globs() {
        assert_eq!(
            expand_tool_groups(["group:fs", "READ", " BASH ", "", "web_*", "group:plugins"]),
            vec![
                "read",
                "write",
                "edit",
                "apply_patch",
                "grep",
                "find",
                "ls",
                "exec",
                "web_*"
            ]
        );
    }
}
