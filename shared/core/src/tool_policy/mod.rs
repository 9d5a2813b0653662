//! Which tools the model may use (spec §11): the catalog of core tools with their groups and
//! profiles, allow/deny policies with `*` globs where deny wins, and the pipeline that layers
//! profiles, provider, agent, group, sandbox and sub-agent policies.
//!
//! A turn computes [`AllowedTools`] once with [`resolve_allowed_tools`], offers only
//! [`AllowedTools::names`] to the model, and asks [`AllowedTools::check`] before running any
//! tool call; a refused call gets a [`ToolNotAllowed`] tool error and never runs. This module
//! knows tool names only: it runs nothing and reads no config files itself.

pub mod catalog;
pub mod groups;
pub mod pipeline;
pub mod policy;

pub use catalog::{
    CORE_GROUP, CORE_GROUP_OPENCLAW_ALIAS, CORE_TOOLS, CoreTool, OWNER_ONLY_TOOLS, PLUGINS_GROUP,
    ToolProfile, ToolSection, expand_tool_groups, normalize_tool_name,
};
pub use groups::{GroupToolsConfig, group_tool_policy};
pub use pipeline::{
    AllowedTools, DEFAULT_MAX_SPAWN_DEPTH, PolicyContext, ToolNotAllowed, resolve_allowed_tools,
    sandbox_tool_policy,
};
pub use policy::{
    AgentToolsConfig, ProviderToolPolicy, SandboxToolsConfig, SubagentToolsConfig, ToolPolicy,
    ToolPolicyMatcher, ToolsConfig,
};
