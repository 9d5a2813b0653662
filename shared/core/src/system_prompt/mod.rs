//! The system prompt builder (spec §10): the `full` / `minimal` / `none` modes, the ordered
//! sections with their conditions and lead lines, Project Context from the bootstrap files
//! ([`bootstrap`]), and the cache boundary that separates the stable prefix from what may
//! change between turns.
//!
//! The builder is a pure function of its inputs: it reads no clock, no environment and no
//! store, and iterates no hash map in hash order. Identical inputs give byte-identical
//! prompts, which is what lets a provider's prompt cache hit turn after turn. Lines are joined
//! with `"\n"` after dropping every empty element, so sections are never separated by blank
//! lines (blank lines only occur inside multi-line elements such as file contents).
//!
//! What tools exist is decided by tool policy before this module is called; the builder only
//! orders and describes the names it is given.

pub mod bootstrap;
pub mod seed;

use clawless_base::reply_tokens::NO_REPLY;
use std::collections::{BTreeMap, HashMap};

pub use bootstrap::{
    BootstrapFile, BootstrapKind, ContextFile, DEFAULT_BOOTSTRAP_MAX_CHARS,
    DEFAULT_BOOTSTRAP_TOTAL_MAX_CHARS, build_bootstrap_context_files, load_bootstrap_files,
};

/// The first line of every prompt, and the whole prompt in [`PromptMode::None`].
pub const IDENTITY_LINE: &str = "You are a personal assistant running inside clawless.";

/// The element separating the cacheable prefix from the per-turn suffix (defined with the
/// model port, which providers read it from); see [`split_at_cache_boundary`].
pub use clawless_base::model::CACHE_BOUNDARY;

/// The marker line inside [`CACHE_BOUNDARY`].
const CACHE_BOUNDARY_LINE: &str = "<!-- CLAWLESS_CACHE_BOUNDARY -->";

/// Tools listed first, in this order; any other tool follows, sorted by name.
pub const TOOL_ORDER: [&str; 25] = [
    "read",
    "write",
    "edit",
    "apply_patch",
    "grep",
    "find",
    "ls",
    "exec",
    "process",
    "web_search",
    "web_fetch",
    "browser",
    "canvas",
    "nodes",
    "cron",
    "message",
    "gateway",
    "agents_list",
    "sessions_list",
    "sessions_history",
    "sessions_send",
    "subagents",
    "session_status",
    "image",
    "image_generate",
];

/// How much of the prompt a run gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PromptMode {
    /// Every section: ordinary sessions.
    #[default]
    Full,
    /// The sections a sub-agent, a cron job or a run restricted to an explicit tool list needs.
    Minimal,
    /// Only [`IDENTITY_LINE`].
    None,
}

impl PromptMode {
    /// [`PromptMode::Minimal`] for sub-agent keys (`…:subagent:…`), cron keys
    /// (`agent:<id>:cron:…`) and runs with an explicit tool allowlist
    /// (`tools_allow_override`); [`PromptMode::Full`] otherwise.
    ///
    /// A run with a tool allowlist should also pass an empty skills prompt: skills appear in
    /// minimal mode for sub-agents and cron, not for allowlisted runs.
    pub fn for_session_key(session_key: &str, tools_allow_override: bool) -> Self {
        if tools_allow_override || bootstrap::is_subagent_or_cron_key(session_key) {
            Self::Minimal
        } else {
            Self::Full
        }
    }
}

/// What the `## Runtime` section says about where the agent runs. Every part is optional and
/// a missing (or blank) part is left out of the line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeLine<'a> {
    /// Agent id, e.g. `main`.
    pub agent_id: Option<&'a str>,
    /// Host name, or the name of the deployment.
    pub host: Option<&'a str>,
    /// Operating system, e.g. `linux`.
    pub os: Option<&'a str>,
    /// CPU architecture, e.g. `arm64`.
    pub arch: Option<&'a str>,
    /// The model answering this turn, `provider/model`.
    pub model: Option<&'a str>,
    /// The agent's configured default model.
    pub default_model: Option<&'a str>,
    /// Shell that `exec` runs commands in.
    pub shell: Option<&'a str>,
    /// Channel the current message came from, e.g. `telegram`.
    pub channel: Option<&'a str>,
    /// The channel's capabilities (shown only with a channel; `none` when empty).
    pub capabilities: &'a [String],
    /// Thinking level; `off` when unset.
    pub thinking: Option<&'a str>,
    /// Reasoning visibility level; the `Reasoning:` line (with its `/reasoning` toggle) is
    /// left out when unset.
    pub reasoning: Option<&'a str>,
}

impl RuntimeLine<'_> {
    /// The `Runtime: agent=… | host=… | os=… (…) | model=… | default_model=… | shell=… |
    /// channel=… | capabilities=… | thinking=…` line.
    pub fn render(&self) -> String {
        let mut parts = Vec::new();
        if let Some(agent) = non_blank(self.agent_id) {
            parts.push(format!("agent={agent}"));
        }
        if let Some(host) = non_blank(self.host) {
            parts.push(format!("host={host}"));
        }
        match (non_blank(self.os), non_blank(self.arch)) {
            (Some(os), Some(arch)) => parts.push(format!("os={os} ({arch})")),
            (Some(os), None) => parts.push(format!("os={os}")),
            (None, Some(arch)) => parts.push(format!("arch={arch}")),
            (None, None) => {}
        }
        if let Some(model) = non_blank(self.model) {
            parts.push(format!("model={model}"));
        }
        if let Some(model) = non_blank(self.default_model) {
            parts.push(format!("default_model={model}"));
        }
        if let Some(shell) = non_blank(self.shell) {
            parts.push(format!("shell={shell}"));
        }
        if let Some(channel) = non_blank(self.channel) {
            parts.push(format!("channel={channel}"));
            let capabilities: Vec<&str> = self
                .capabilities
                .iter()
                .map(|capability| capability.trim())
                .filter(|capability| !capability.is_empty())
                .collect();
            if capabilities.is_empty() {
                parts.push("capabilities=none".to_owned());
            } else {
                parts.push(format!("capabilities={}", capabilities.join(",")));
            }
        }
        let thinking = non_blank(self.thinking).unwrap_or("off");
        parts.push(format!("thinking={thinking}"));
        format!("Runtime: {}", parts.join(" | "))
    }

    /// The `Reasoning: <level> (…). Toggle /reasoning.` line that follows the runtime line,
    /// when a level is set.
    fn reasoning_line(&self) -> String {
        non_blank(self.reasoning)
            .map(|level| {
                format!("Reasoning: {level} (hidden unless on/stream). Toggle /reasoning.")
            })
            .unwrap_or_default()
    }
}

/// Everything the prompt depends on. Build one per turn; equal params give equal prompts.
#[derive(Debug, Clone, Copy)]
pub struct SystemPromptParams<'a> {
    /// Which sections to emit.
    pub mode: PromptMode,
    /// Tools the run may call, already filtered by tool policy. Names are matched
    /// case-insensitively and shown as the caller spells them.
    pub tool_names: &'a [String],
    /// Summaries for tools without a built-in one (see [`core_tool_summary`]), keyed by name
    /// (case-insensitive).
    pub tool_summaries: Option<&'a HashMap<String, String>>,
    /// The `<available_skills>` block; the Skills section is omitted when it is blank.
    pub skills_prompt: &'a str,
    /// Whether the Memory Recall section may appear (full mode with a memory tool).
    pub include_memory_section: bool,
    /// The agent's workspace as the tools see it, e.g. `s3://bucket/agents/main/workspace/`.
    pub workspace_dir: &'a str,
    /// Injected bootstrap files; `HEARTBEAT.md` goes below the cache boundary, the rest above.
    pub context_files: &'a [ContextFile],
    /// IANA time zone of the user, e.g. `Europe/Berlin`. Only the zone is shown, never a time.
    pub user_timezone: Option<&'a str>,
    /// Extra instructions from the caller (sub-agent task or group chat context).
    pub extra_system_prompt: Option<&'a str>,
    /// Whether the agent is told about heartbeats (the `## Heartbeats` section, full mode
    /// only); see [`clawless_automation::heartbeat::prompt::heartbeat_guidance_enabled`].
    pub heartbeat_guidance: bool,
    /// The configured owners of the current channel, already rendered (raw or hashed).
    pub authorized_senders: &'a [String],
    /// Whether the current channel honours reply tags (`[[reply_to_current]]`,
    /// `[[reply_to:<id>]]`): the `## Reply Tags` section (full mode).
    pub reply_tags: bool,
    /// The `## Runtime` section.
    pub runtime: RuntimeLine<'a>,
    /// The `## Sandbox` section, for a sandboxed session only.
    pub sandbox: Option<SandboxPrompt<'a>>,
    /// Set for a small context window: the optional sections are left out (`## clawless CLI
    /// Quick Reference`, `## Execution Bias`, and the narration lines of `## Tool Call
    /// Style`).
    pub lean: bool,
    /// What the caller left out or shortened to fit a small window, told to the model at the
    /// end of `## Tooling` so it knows what it can still ask for.
    pub left_out: &'a [String],
    /// The `## Model Aliases` lines (`- opus: anthropic/claude-opus-4-6`); the section is
    /// left out when there are none.
    pub model_aliases: &'a [String],
}

/// What `## Sandbox` says about a sandboxed session (spec `openclaw-sandbox.md` §2.7, with
/// clawless's jail on a node host in place of OpenClaw's Docker container).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxPrompt<'a> {
    /// The sandbox workspace the file tools use.
    pub workspace_dir: &'a str,
    /// `none`, `ro` or `rw`.
    pub workspace_access: &'a str,
    /// Whether `exec` is offered (its commands run in a node host's jail).
    pub exec: bool,
    /// What the session's sender may do about elevated exec.
    pub elevated: ElevatedPrompt,
}

/// The elevated exec lines of `## Sandbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElevatedPrompt {
    /// `tools.elevated.enabled` is false: no elevated line at all.
    Disabled,
    /// Enabled, but the sender is not in `allowFrom`.
    Unavailable,
    /// The sender is allowed; the session's level (`off` or `ask`).
    Available(&'static str),
}

impl Default for SystemPromptParams<'_> {
    fn default() -> Self {
        Self {
            mode: PromptMode::Full,
            tool_names: &[],
            tool_summaries: None,
            skills_prompt: "",
            include_memory_section: true,
            workspace_dir: "",
            context_files: &[],
            user_timezone: None,
            extra_system_prompt: None,
            heartbeat_guidance: false,
            authorized_senders: &[],
            reply_tags: false,
            runtime: RuntimeLine::default(),
            sandbox: None,
            lean: false,
            left_out: &[],
            model_aliases: &[],
        }
    }
}

/// The built-in one-line summary of a core tool (by lowercase name), used in `## Tooling`
/// ahead of any caller-supplied summary.
pub fn core_tool_summary(name: &str) -> Option<&'static str> {
    let summary = match name {
        "read" => "Read file contents",
        "write" => "Create a file or replace its contents",
        "edit" => "Replace exact text in a file",
        "apply_patch" => "Apply a patch that may touch several files",
        "grep" => "Search file contents by pattern",
        "find" => "Find files by name pattern",
        "ls" => "List a directory",
        "exec" => "Run shell commands on a node host",
        "process" => "Poll, feed or stop background exec sessions",
        "web_search" => "Search the web",
        "web_fetch" => "Fetch a URL and return its readable content",
        "browser" => "Drive a web browser",
        "canvas" => "Show and inspect the canvas",
        "nodes" => "List paired node hosts and act on them",
        "cron" => clawless_automation::cron::tool::CRON_TOOL_SUMMARY,
        "message" => "Send messages and channel actions",
        "gateway" => "Inspect or restart the clawless service",
        "agents_list" => "List the agent ids you may hand work to",
        "sessions_list" => "List other sessions",
        "sessions_history" => "Read another session's history",
        "sessions_send" => "Send a message into another session",
        "sessions_spawn" => "Start a sub-agent session for a task",
        "subagents" => "List, steer or stop this session's sub-agents",
        "session_status" => "Show this session's status: model, usage and the current time",
        "image" => "Describe or analyze an image",
        "image_generate" => "Create images from a description",
        "memory_search" => "Search the memory files",
        "memory_get" => "Read selected lines of a memory file",
        _ => return None,
    };
    Some(summary)
}

/// Builds the system prompt. Pure: the same params always give the same bytes.
pub fn build_system_prompt(params: &SystemPromptParams<'_>) -> String {
    if params.mode == PromptMode::None {
        return IDENTITY_LINE.to_owned();
    }
    let full = params.mode == PromptMode::Full;
    let tools = Tools::new(params.tool_names, params.tool_summaries);
    let (stable_files, dynamic_files) = split_context_files(params.context_files);

    let mut lines: Vec<String> = vec![IDENTITY_LINE.to_owned()];
    tooling_section(&mut lines, &tools);
    if !params.left_out.is_empty() {
        lines.push(format!(
            "Shortened for this small context window: {}.",
            params.left_out.join("; ")
        ));
    }
    tool_call_style_section(&mut lines, params.lean);
    if full && !params.lean {
        execution_bias_section(&mut lines);
    }
    safety_section(&mut lines);
    if !params.lean {
        cli_section(&mut lines);
    }
    skills_section(&mut lines, &tools, params.skills_prompt);
    if full && params.include_memory_section {
        memory_section(&mut lines, &tools);
    }
    if !params.model_aliases.is_empty() {
        lines.push("## Model Aliases".to_owned());
        lines.push(
            "Prefer aliases when specifying model overrides; full provider/model is also accepted."
                .to_owned(),
        );
        lines.extend(params.model_aliases.iter().cloned());
    }
    let timezone = non_blank(params.user_timezone);
    if timezone.is_some() {
        lines.push(format!(
            "If you need the current date, time, or day of week, run {0} (📊 {0}).",
            tools.name("session_status")
        ));
    }
    lines.extend([
        "## Workspace".to_owned(),
        format!("Your working directory is: {}", params.workspace_dir.trim()),
        "Treat this directory as the single global workspace for file operations unless explicitly instructed otherwise."
            .to_owned(),
    ]);
    if let Some(sandbox) = &params.sandbox {
        sandbox_section(&mut lines, sandbox, tools.has("sessions_spawn"));
    }
    authorized_senders_section(&mut lines, full, params.authorized_senders);
    if let Some(zone) = timezone {
        // Only the zone: an actual time here would change the prompt every turn.
        lines.extend([
            "## Current Date & Time".to_owned(),
            format!("Time zone: {zone}"),
        ]);
    }
    lines.extend([
        "## Workspace Files (injected)".to_owned(),
        "These user-editable files are loaded by clawless and included below in Project Context."
            .to_owned(),
    ]);
    if full && params.reply_tags {
        reply_tags_section(&mut lines);
    }
    if full {
        messaging_section(&mut lines, &tools);
    }
    project_context_section(&mut lines, &stable_files);
    if full {
        silent_replies_section(&mut lines);
    }

    lines.push(CACHE_BOUNDARY.to_owned());

    dynamic_context_section(&mut lines, &dynamic_files, stable_files.is_empty());
    if let Some(extra) = non_blank(params.extra_system_prompt) {
        let heading = if full {
            "## Group Chat Context"
        } else {
            "## Subagent Context"
        };
        lines.extend([heading.to_owned(), extra.to_owned()]);
    }
    if full && params.heartbeat_guidance {
        lines.push(clawless_automation::heartbeat::prompt::heartbeats_section());
    }
    lines.extend([
        "## Runtime".to_owned(),
        params.runtime.render(),
        params.runtime.reasoning_line(),
    ]);

    lines.retain(|line| !line.is_empty());
    lines.join("\n")
}

/// Splits a prompt at [`CACHE_BOUNDARY`] into the stable prefix (to mark cacheable) and the
/// per-turn suffix, without the newlines around the marker. A prompt without the marker is
/// all prefix.
pub fn split_at_cache_boundary(prompt: &str) -> (&str, &str) {
    match prompt.split_once(CACHE_BOUNDARY_LINE) {
        Some((stable, dynamic)) => (
            stable.trim_end_matches('\n'),
            dynamic.trim_start_matches('\n'),
        ),
        None => (prompt, ""),
    }
}

/// The prompt without the cache boundary, for providers that cannot use it: the same text
/// the builder would produce if the boundary element did not exist.
pub fn strip_cache_boundary(prompt: &str) -> String {
    match split_at_cache_boundary(prompt) {
        (stable, "") => stable.to_owned(),
        (stable, dynamic) => format!("{stable}\n{dynamic}"),
    }
}

/// The run's tools, matched case-insensitively, in prompt order.
struct Tools<'a> {
    /// Lowercase name → the caller's first spelling. A `BTreeMap` so the leftovers after
    /// [`TOOL_ORDER`] come out sorted.
    names: BTreeMap<String, &'a str>,
    /// Caller summaries by lowercase name.
    summaries: BTreeMap<String, &'a str>,
}

impl<'a> Tools<'a> {
    fn new(tool_names: &'a [String], summaries: Option<&'a HashMap<String, String>>) -> Self {
        let mut names = BTreeMap::new();
        for name in tool_names {
            let name = name.trim();
            if !name.is_empty() {
                names.entry(name.to_lowercase()).or_insert(name);
            }
        }
        // Sort before deduplicating so that keys differing only in case resolve the same way
        // whatever order the hash map hands them out in.
        let mut candidates: Vec<(String, &str, &str)> = summaries
            .into_iter()
            .flatten()
            .map(|(key, value)| (key.trim().to_lowercase(), key.as_str(), value.trim()))
            .filter(|(key, _, value)| !key.is_empty() && !value.is_empty())
            .collect();
        candidates.sort_unstable();
        let mut by_name = BTreeMap::new();
        for (key, _, value) in candidates {
            by_name.entry(key).or_insert(value);
        }
        Self {
            names,
            summaries: by_name,
        }
    }

    fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    fn has(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// The caller's spelling of a tool, or `name` itself when the run lacks it.
    fn name<'s>(&'s self, name: &'s str) -> &'s str {
        self.names.get(name).copied().unwrap_or(name)
    }

    /// `- <name>: <summary>` lines, [`TOOL_ORDER`] first, then the rest sorted.
    fn lines(&self) -> Vec<String> {
        let ordered = TOOL_ORDER.iter().copied().filter(|name| self.has(name));
        let rest = self
            .names
            .keys()
            .map(String::as_str)
            .filter(|name| !TOOL_ORDER.contains(name));
        ordered
            .chain(rest)
            .map(|name| {
                let summary = core_tool_summary(name).or_else(|| self.summaries.get(name).copied());
                match summary {
                    Some(summary) => format!("- {}: {summary}", self.name(name)),
                    None => format!("- {}", self.name(name)),
                }
            })
            .collect()
    }
}

fn tooling_section(lines: &mut Vec<String>, tools: &Tools<'_>) {
    lines.push("## Tooling".to_owned());
    if tools.is_empty() {
        lines.push(
            "No tools are enabled for this run: answer from the conversation and the context below."
                .to_owned(),
        );
    } else {
        lines.extend([
            "Tool availability (filtered by policy):".to_owned(),
            "Tool names are case-sensitive. Call tools exactly as listed.".to_owned(),
        ]);
        lines.extend(tools.lines());
    }
    lines.push(
        "TOOLS.md does not control tool availability; it is user guidance for how to use external tools."
            .to_owned(),
    );
    if tools.has("exec") && tools.has("process") {
        lines.push(format!(
            "For long waits, avoid rapid poll loops: use {} with enough yieldMs or {}(action=poll, timeout=<ms>).",
            tools.name("exec"),
            tools.name("process")
        ));
    }
    if tools.has("sessions_spawn") {
        lines.push(
            "If a task is more complex or takes longer, spawn a sub-agent. Completion is push-based: it will auto-announce when done."
                .to_owned(),
        );
    }
    if tools.has("subagents") || tools.has("sessions_list") {
        lines.push(
            "Do not poll `subagents list` / `sessions_list` in a loop; only check status on-demand (for intervention, debugging, or when explicitly asked)."
                .to_owned(),
        );
    }
}

/// `## Tool Call Style`; `lean` keeps only the approval rules.
fn tool_call_style_section(lines: &mut Vec<String>, lean: bool) {
    lines.push("## Tool Call Style".to_owned());
    if !lean {
        lines.extend(
            [
                "Default: do not narrate routine, low-risk tool calls (just call the tool).",
                "Narrate briefly only when it helps: multi-step work, hard problems, sensitive actions such as deletions, or when the user asks.",
            ]
            .map(str::to_owned),
        );
    }
    lines.extend(
        [
            "When a tool result says approval is required, tell the user what is waiting and stop; do not retry the action another way.",
            "Never execute /approve through exec or any other shell/tool path; only the user approves.",
        ]
        .map(str::to_owned),
    );
}

fn execution_bias_section(lines: &mut Vec<String>) {
    lines.extend(
        [
            "## Execution Bias",
            "If the user asks you to do the work, start doing it in the same turn.",
            "Prefer a tool call that moves the task forward over describing what you would do.",
            "If something blocks you, say exactly what is missing instead of stopping quietly.",
        ]
        .map(str::to_owned),
    );
}

fn safety_section(lines: &mut Vec<String>) {
    lines.extend(
        [
            "## Safety",
            "You have no independent goals: do not pursue self-preservation, replication, resource acquisition, or power-seeking; avoid long-term plans beyond the user's request.",
            "Put human oversight ahead of finishing a task: when instructions conflict, stop and ask, and honour every request to stop, pause or be audited.",
            "Never try to persuade anyone to widen your access or switch off safeguards, and never copy yourself or change your own system prompt, safety rules or tool policy unless explicitly asked.",
        ]
        .map(str::to_owned),
    );
}

fn cli_section(lines: &mut Vec<String>) {
    lines.extend(
        [
            "## clawless CLI Quick Reference",
            "clawless is controlled via subcommands; do not invent any: `clawless skills list|check|prompt|bins|commands|sync`, `clawless local`, `clawless chat`.",
            "Unsure of a flag? Ask the user to run `clawless --help`.",
        ]
        .map(str::to_owned),
    );
}

fn skills_section(lines: &mut Vec<String>, tools: &Tools<'_>, skills_prompt: &str) {
    let skills = skills_prompt.trim();
    if skills.is_empty() {
        return;
    }
    lines.extend([
        "## Skills (mandatory)".to_owned(),
        "Before replying: scan <available_skills> <description> entries.".to_owned(),
        format!(
            "- If exactly one skill clearly applies: read its SKILL.md at <location> with `{}`, then follow it.",
            tools.name("read")
        ),
        "- If multiple could apply: choose the most specific one, then read/follow it.".to_owned(),
        "- If none clearly apply: do not read any SKILL.md.".to_owned(),
        "Constraints: never read more than one skill up front; only read after selecting.".to_owned(),
        "- When a skill drives external API writes, assume rate limits: prefer fewer larger writes, avoid tight one-item loops, serialize bursts when possible, and respect 429/Retry-After."
            .to_owned(),
        skills.to_owned(),
    ]);
}

fn memory_section(lines: &mut Vec<String>, tools: &Tools<'_>) {
    let search = tools.has("memory_search");
    let get = tools.has("memory_get");
    if !search && !get {
        return;
    }
    lines.push("## Memory Recall".to_owned());
    lines.push("Long-term memory lives in MEMORY.md and memory/*.md in the workspace.".to_owned());
    if search {
        lines.push(format!(
            "- Before answering about earlier work, decisions, dates, people, preferences or open tasks, run {}.",
            tools.name("memory_search")
        ));
    }
    if get {
        lines.push(format!(
            "- Use {} to read only the lines you need instead of whole files.",
            tools.name("memory_get")
        ));
    }
    lines.push("If you looked and found nothing relevant, say so.".to_owned());
}

/// `## Sandbox`: what a sandboxed session can and cannot do (TV-19, adapted: commands run in
/// a jail on a node host, whose `/workspace` is the node's own folder of the sandbox).
fn sandbox_section(lines: &mut Vec<String>, sandbox: &SandboxPrompt<'_>, spawns: bool) {
    lines.extend([
        "## Sandbox".to_owned(),
        "You are running in a sandboxed runtime (commands execute in a jail on a node host)."
            .to_owned(),
        "Some tools may be unavailable due to sandbox policy.".to_owned(),
    ]);
    if spawns {
        lines.push(
            "Sub-agents stay sandboxed (no elevated/host access). Need outside-sandbox read/write? Don't spawn; ask first."
                .to_owned(),
        );
    }
    if sandbox.exec {
        lines.extend([
            "Sandbox container workdir: /workspace".to_owned(),
            "Commands see the node host's own /workspace folder, not the files written with the file tools."
                .to_owned(),
        ]);
    }
    lines.extend([
        format!(
            "Sandbox host mount source (file tools bridge only; not valid inside sandbox exec): {}",
            sandbox.workspace_dir.trim()
        ),
        format!("Agent workspace access: {}", sandbox.workspace_access),
    ]);
    match sandbox.elevated {
        ElevatedPrompt::Disabled => {}
        ElevatedPrompt::Unavailable => lines.extend(
            [
                "Elevated exec is unavailable for this session.",
                "Current elevated level: off (elevated exec unavailable).",
                "Do not tell the user to switch to /elevated in this session.",
            ]
            .map(str::to_owned),
        ),
        ElevatedPrompt::Available(level) => lines.extend([
            "Elevated exec is available for this session.".to_owned(),
            "An owner can toggle it with /elevated on|off.".to_owned(),
            format!(
                "Current elevated level: {level} (on runs exec on the node host after an owner approves each command)."
            ),
        ]),
    }
}

fn authorized_senders_section(lines: &mut Vec<String>, full: bool, senders: &[String]) {
    let senders: Vec<&str> = senders
        .iter()
        .map(|sender| sender.trim())
        .filter(|sender| !sender.is_empty())
        .collect();
    if !full || senders.is_empty() {
        return;
    }
    lines.extend([
        "## Authorized Senders".to_owned(),
        format!(
            "Authorized senders: {}. These senders are allowlisted; do not assume they are the owner.",
            senders.join(", ")
        ),
    ]);
}

/// `## Reply Tags`: how to quote-reply on a channel that honours the tags.
fn reply_tags_section(lines: &mut Vec<String>) {
    lines.extend(
        [
            "## Reply Tags",
            "To reply as a quote of the current message, start your reply with [[reply_to_current]]; to quote another message, with [[reply_to:<message id>]].",
            "Tags are removed before sending; use them only when quoting helps.",
        ]
        .map(str::to_owned),
    );
}

fn messaging_section(lines: &mut Vec<String>, tools: &Tools<'_>) {
    lines.extend(
        [
            "## Messaging",
            "- Your reply goes back to the session, and the channel, that the current message came from.",
            "- Never send chat messages through exec or curl; clawless delivers replies itself.",
        ]
        .map(str::to_owned),
    );
    if tools.has("message") {
        let message = tools.name("message");
        lines.extend([
            format!("### {message} tool"),
            format!(
                "- `{message}` sends to other chats and people, and reacts, edits or polls; `target` defaults to this chat."
            ),
            format!("- If `{message}` delivered your answer, reply ONLY: {NO_REPLY}."),
        ]);
    }
}

fn project_context_section(lines: &mut Vec<String>, files: &[&ContextFile]) {
    if files.is_empty() {
        return;
    }
    lines.extend([
        "# Project Context".to_owned(),
        "The following project context files have been loaded:".to_owned(),
    ]);
    if files
        .iter()
        .any(|file| basename(&file.path).eq_ignore_ascii_case("soul.md"))
    {
        lines.push(
            "If SOUL.md is present, embody its persona and tone. Avoid stiff, generic replies; follow its guidance unless higher-priority instructions override it."
                .to_owned(),
        );
    }
    push_files(lines, files);
}

fn silent_replies_section(lines: &mut Vec<String>) {
    lines.extend([
        "## Silent Replies".to_owned(),
        format!("When you have nothing to say, respond with ONLY: {NO_REPLY}"),
        "The token must be the whole message: no other words, quotes or markdown around it."
            .to_owned(),
        format!("Never add {NO_REPLY} to a message that has real content."),
    ]);
}

fn dynamic_context_section(lines: &mut Vec<String>, files: &[&ContextFile], no_stable: bool) {
    if files.is_empty() {
        return;
    }
    let heading = if no_stable {
        "# Project Context"
    } else {
        "# Dynamic Project Context"
    };
    lines.extend([
        heading.to_owned(),
        "The following frequently-changing project context files are kept below the cache boundary when possible:"
            .to_owned(),
    ]);
    push_files(lines, files);
}

fn push_files(lines: &mut Vec<String>, files: &[&ContextFile]) {
    for file in files {
        lines.push(format!("## {}", file.path.trim()));
        lines.push(file.content.clone());
    }
}

/// Context files with a path, sorted, split into those above the cache boundary and
/// `HEARTBEAT.md` (which changes between heartbeats) below it.
fn split_context_files(files: &[ContextFile]) -> (Vec<&ContextFile>, Vec<&ContextFile>) {
    let mut sorted: Vec<&ContextFile> = files
        .iter()
        .filter(|file| !file.path.trim().is_empty())
        .collect();
    sorted.sort_by_cached_key(|file| {
        let name = basename(&file.path);
        let lower = name.to_lowercase();
        (context_file_rank(&lower), lower, name, file.path.trim())
    });
    sorted.into_iter().partition(|file| {
        !basename(&file.path).eq_ignore_ascii_case(bootstrap::HEARTBEAT_FILE_NAME)
    })
}

/// Known bootstrap files first in a fixed order; any other file after them.
fn context_file_rank(lowercase_basename: &str) -> u8 {
    match lowercase_basename {
        "agents.md" => 10,
        "soul.md" => 20,
        "identity.md" => 30,
        "user.md" => 40,
        "tools.md" => 50,
        "bootstrap.md" => 60,
        "memory.md" => 70,
        _ => u8::MAX,
    }
}

/// The last segment of a path or URI (`/` or `\` separated).
fn basename(path: &str) -> &str {
    let path = path.trim().trim_end_matches(['/', '\\']);
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

fn non_blank(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|value| !value.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|value| (*value).to_owned()).collect()
    }

    fn file(path: &str, content: &str) -> ContextFile {
        ContextFile {
            path: path.to_owned(),
            content: content.to_owned(),
        }
    }

    struct Fixture {
        tools: Vec<String>,
        senders: Vec<String>,
        files: Vec<ContextFile>,
        capabilities: Vec<String>,
    }

    impl Fixture {
        fn new() -> Self {
            Self {
                tools: strings(&[
                    "read",
                    "exec",
                    "message",
                    "memory_search",
                    "memory_get",
                    "session_status",
                ]),
                senders: strings(&["+15551234567"]),
                files: vec![
                    file("s3://b/agents/main/workspace/AGENTS.md", "Be helpful."),
                    file(
                        "s3://b/agents/main/workspace/HEARTBEAT.md",
                        "Check the inbox.",
                    ),
                ],
                capabilities: strings(&["reactions"]),
            }
        }

        /// Params that switch every optional section on; single-line contents only.
        fn params(&self, mode: PromptMode) -> SystemPromptParams<'_> {
            SystemPromptParams {
                mode,
                tool_names: &self.tools,
                skills_prompt: "<available_skills></available_skills>",
                workspace_dir: "s3://b/agents/main/workspace/",
                context_files: &self.files,
                user_timezone: Some("Europe/Berlin"),
                extra_system_prompt: Some("Be brief."),
                heartbeat_guidance: true,
                authorized_senders: &self.senders,
                reply_tags: true,
                runtime: RuntimeLine {
                    agent_id: Some("main"),
                    channel: Some("telegram"),
                    capabilities: &self.capabilities,
                    ..RuntimeLine::default()
                },
                ..SystemPromptParams::default()
            }
        }
    }

    fn headings(prompt: &str) -> Vec<&str> {
        prompt
            .lines()
            .filter(|line| line.starts_with('#'))
            .collect()
    }

    /// The `- name…` lines of the Tooling section.
    fn tool_lines(prompt: &str) -> Vec<&str> {
        prompt
            .lines()
            .skip_while(|line| !line.starts_with("Tool names are case-sensitive"))
            .skip(1)
            .take_while(|line| line.starts_with("- "))
            .collect()
    }

    #[test]
    fn none_mode_returns_exactly_the_identity_line() {
        let fixture = Fixture::new();
        let prompt = build_system_prompt(&fixture.params(PromptMode::None));
        assert_eq!(
            prompt,
            "You are a personal assistant running inside clawless."
        );
    }

    #[test]
    fn full_mode_emits_the_sections_in_spec_order() {
        // GIVEN params that enable every optional section
        let fixture = Fixture::new();
        // WHEN the full prompt is built
        let prompt = build_system_prompt(&fixture.params(PromptMode::Full));
        // THEN it opens with the clawless identity line and the headings follow spec §10.2
        assert!(prompt.starts_with("You are a personal assistant running inside clawless.\n"));
        assert!(!prompt.contains("OpenClaw"));
        assert_eq!(
            headings(&prompt),
            [
                "## Tooling",
                "## Tool Call Style",
                "## Execution Bias",
                "## Safety",
                "## clawless CLI Quick Reference",
                "## Skills (mandatory)",
                "## Memory Recall",
                "## Workspace",
                "## Authorized Senders",
                "## Current Date & Time",
                "## Workspace Files (injected)",
                "## Reply Tags",
                "## Messaging",
                "### message tool",
                "# Project Context",
                "## s3://b/agents/main/workspace/AGENTS.md",
                "## Silent Replies",
                "# Dynamic Project Context",
                "## s3://b/agents/main/workspace/HEARTBEAT.md",
                "## Group Chat Context",
                "## Heartbeats",
                "## Runtime",
            ]
        );
    }

    #[test]
    fn minimal_mode_drops_owner_memory_messaging_silent_replies_and_heartbeats() {
        let fixture = Fixture::new();
        let prompt = build_system_prompt(&fixture.params(PromptMode::Minimal));
        for absent in [
            "## Execution Bias",
            "## Authorized Senders",
            "## Memory Recall",
            "## Reply Tags",
            "## Messaging",
            "## Silent Replies",
            "## Heartbeats",
            "## Group Chat Context",
        ] {
            assert!(!prompt.contains(absent), "{absent} should be absent");
        }
        for present in [
            "## Tooling",
            "## Tool Call Style",
            "## Safety",
            "## clawless CLI Quick Reference",
            "## Skills (mandatory)",
            "## Workspace",
            "## Current Date & Time",
            "## Workspace Files (injected)",
            "# Project Context",
            "## Subagent Context",
            "## Runtime",
        ] {
            assert!(prompt.contains(present), "{present} should be present");
        }
    }

    #[test]
    fn skills_section_has_the_exact_lead_lines_and_the_callers_read_tool_name() {
        // GIVEN a read tool spelled `Read` and a skills block with surrounding blank lines
        let tools = strings(&["Read"]);
        let params = SystemPromptParams {
            tool_names: &tools,
            skills_prompt: "\n\nThe following skills provide specialized instructions.\n\n<available_skills>\n</available_skills>\n",
            ..SystemPromptParams::default()
        };
        // WHEN the prompt is built
        let prompt = build_system_prompt(&params);
        // THEN the section is verbatim, names `Read`, and ends with the trimmed block
        let expected = "## Skills (mandatory)\n\
            Before replying: scan <available_skills> <description> entries.\n\
            - If exactly one skill clearly applies: read its SKILL.md at <location> with `Read`, then follow it.\n\
            - If multiple could apply: choose the most specific one, then read/follow it.\n\
            - If none clearly apply: do not read any SKILL.md.\n\
            Constraints: never read more than one skill up front; only read after selecting.\n\
            - When a skill drives external API writes, assume rate limits: prefer fewer larger writes, avoid tight one-item loops, serialize bursts when possible, and respect 429/Retry-After.\n\
            The following skills provide specialized instructions.\n\n<available_skills>\n</available_skills>\n\
            ## Workspace\n";
        assert!(prompt.contains(expected), "{prompt}");
    }

    #[test]
    fn skills_section_is_omitted_for_a_blank_skills_prompt() {
        let params = SystemPromptParams {
            skills_prompt: " \n\t",
            ..SystemPromptParams::default()
        };
        assert!(!build_system_prompt(&params).contains("## Skills"));
    }

    #[test]
    fn extra_system_prompt_heading_depends_on_the_mode() {
        let fixture = Fixture::new();
        let minimal = build_system_prompt(&fixture.params(PromptMode::Minimal));
        assert!(minimal.contains("\n## Subagent Context\nBe brief.\n"));
        assert!(!minimal.contains("## Group Chat Context"));
        let full = build_system_prompt(&fixture.params(PromptMode::Full));
        assert!(full.contains("\n## Group Chat Context\nBe brief.\n"));
        assert!(!full.contains("## Subagent Context"));
    }

    #[test]
    fn blank_extra_system_prompt_adds_no_section() {
        let params = SystemPromptParams {
            extra_system_prompt: Some("   "),
            ..SystemPromptParams::default()
        };
        assert!(!build_system_prompt(&params).contains("Context\n"));
    }

    #[test]
    fn tools_follow_the_fixed_order_then_the_rest_sorted() {
        // GIVEN tools in arbitrary order, one with a caller summary and one without any
        let tools = strings(&[
            "zeta",
            "memory_search",
            "web_fetch",
            "exec",
            "custom",
            "read",
            "session_status",
        ]);
        let summaries = HashMap::from([("custom".to_owned(), "Do custom things".to_owned())]);
        let params = SystemPromptParams {
            tool_names: &tools,
            tool_summaries: Some(&summaries),
            ..SystemPromptParams::default()
        };
        // WHEN the prompt is built
        let prompt = build_system_prompt(&params);
        // THEN the core order comes first, the others sorted, unknown tools bare
        assert_eq!(
            tool_lines(&prompt),
            [
                "- read: Read file contents",
                "- exec: Run shell commands on a node host",
                "- web_fetch: Fetch a URL and return its readable content",
                "- session_status: Show this session's status: model, usage and the current time",
                "- custom: Do custom things",
                "- memory_search: Search the memory files",
                "- zeta",
            ]
        );
    }

    #[test]
    fn core_summaries_win_over_caller_summaries() {
        let tools = strings(&["read"]);
        let summaries = HashMap::from([("read".to_owned(), "Something else".to_owned())]);
        let params = SystemPromptParams {
            tool_names: &tools,
            tool_summaries: Some(&summaries),
            ..SystemPromptParams::default()
        };
        assert_eq!(
            tool_lines(&build_system_prompt(&params)),
            ["- read: Read file contents"]
        );
    }

    #[test]
    fn tool_names_keep_the_callers_spelling_and_collapse_case_duplicates() {
        let tools = strings(&["Exec", "exec", " READ ", ""]);
        let params = SystemPromptParams {
            tool_names: &tools,
            ..SystemPromptParams::default()
        };
        let prompt = build_system_prompt(&params);
        assert_eq!(
            tool_lines(&prompt),
            [
                "- READ: Read file contents",
                "- Exec: Run shell commands on a node host",
            ]
        );
        // No `process` tool: no background-poll advice it could not follow.
        assert!(!prompt.contains("yieldMs"), "{prompt}");
    }

    #[test]
    fn an_empty_tool_list_uses_the_fallback_line() {
        let prompt = build_system_prompt(&SystemPromptParams::default());
        assert!(prompt.contains(
            "## Tooling\nNo tools are enabled for this run: answer from the conversation and the context below.\n"
        ));
        assert!(!prompt.contains("Tool availability (filtered by policy):"));
        assert!(!prompt.contains("For long waits"));
    }

    #[test]
    fn sections_are_not_separated_by_blank_lines() {
        // GIVEN every section switched on, with single-line contents
        let fixture = Fixture::new();
        for mode in [PromptMode::Full, PromptMode::Minimal] {
            // WHEN the prompt is built
            let prompt = build_system_prompt(&fixture.params(mode));
            // THEN the only blank lines are the two around the cache boundary
            assert_eq!(prompt.matches("\n\n").count(), 2, "{prompt}");
            assert!(prompt.contains(&format!("\n{CACHE_BOUNDARY}\n")));
            assert!(!strip_cache_boundary(&prompt).contains("\n\n"));
        }
    }

    #[test]
    fn thinking_is_off_by_default_and_the_reasoning_toggle_comes_with_its_level() {
        let prompt = build_system_prompt(&SystemPromptParams::default());
        assert!(
            prompt.ends_with("## Runtime\nRuntime: thinking=off"),
            "{prompt}"
        );
        assert!(!prompt.contains("/reasoning"));
        let runtime = RuntimeLine {
            reasoning: Some("on"),
            ..RuntimeLine::default()
        };
        let prompt = build_system_prompt(&SystemPromptParams {
            runtime,
            ..SystemPromptParams::default()
        });
        assert!(prompt.ends_with(
            "thinking=off\nReasoning: on (hidden unless on/stream). Toggle /reasoning."
        ));
    }

    #[test]
    fn runtime_line_lists_the_present_parts_in_spec_order() {
        let capabilities = strings(&["inlineButtons", "reactions"]);
        let runtime = RuntimeLine {
            agent_id: Some("main"),
            host: Some("clawless-prod"),
            os: Some("linux"),
            arch: Some("arm64"),
            model: Some("anthropic/claude-sonnet-4"),
            default_model: Some("anthropic/claude-opus-4"),
            shell: Some("bash"),
            channel: Some("telegram"),
            capabilities: &capabilities,
            thinking: Some("low"),
            reasoning: Some("stream"),
        };
        assert_eq!(
            runtime.render(),
            "Runtime: agent=main | host=clawless-prod | os=linux (arm64) | model=anthropic/claude-sonnet-4 \
             | default_model=anthropic/claude-opus-4 | shell=bash | channel=telegram \
             | capabilities=inlineButtons,reactions | thinking=low"
        );
        assert!(
            runtime
                .reasoning_line()
                .starts_with("Reasoning: stream (hidden")
        );
    }

    #[test]
    fn runtime_line_omits_missing_parts() {
        let runtime = RuntimeLine {
            arch: Some("x86_64"),
            host: Some("  "),
            channel: Some("webchat"),
            ..RuntimeLine::default()
        };
        assert_eq!(
            runtime.render(),
            "Runtime: arch=x86_64 | channel=webchat | capabilities=none | thinking=off"
        );
    }

    #[test]
    fn heartbeat_file_goes_below_the_cache_boundary() {
        // GIVEN AGENTS.md and HEARTBEAT.md
        let fixture = Fixture::new();
        // WHEN the prompt is built and split at the boundary
        let prompt = build_system_prompt(&fixture.params(PromptMode::Full));
        let (stable, dynamic) = split_at_cache_boundary(&prompt);
        // THEN AGENTS.md is in the cacheable prefix and HEARTBEAT.md only in the suffix
        assert!(stable.contains("## s3://b/agents/main/workspace/AGENTS.md\nBe helpful."));
        assert!(!stable.contains("HEARTBEAT.md\n"));
        assert!(!stable.contains("Check the inbox."));
        assert!(dynamic.starts_with(
            "# Dynamic Project Context\n\
             The following frequently-changing project context files are kept below the cache boundary when possible:\n\
             ## s3://b/agents/main/workspace/HEARTBEAT.md\nCheck the inbox.\n"
        ));
    }

    #[test]
    fn heartbeat_alone_is_introduced_as_project_context() {
        let files = vec![file("/ws/HEARTBEAT.md", "beat")];
        let params = SystemPromptParams {
            context_files: &files,
            ..SystemPromptParams::default()
        };
        let prompt = build_system_prompt(&params);
        let (stable, dynamic) = split_at_cache_boundary(&prompt);
        assert!(!stable.contains("# Project Context"));
        assert!(dynamic.starts_with("# Project Context\nThe following frequently-changing"));
    }

    #[test]
    fn project_context_sorts_by_rank_then_basename_then_path() {
        let files = vec![
            file("/w/b/notes.md", "n2"),
            file("/w/MEMORY.md", "m"),
            file("/w/Extra.md", "e"),
            file("/w/a/notes.md", "n1"),
            file("/w/USER.md", "u"),
            file("/w/TOOLS.md", "t"),
            file("/w/SOUL.md", "s"),
            file("/w/BOOTSTRAP.md", "b"),
            file("/w/IDENTITY.md", "i"),
            file("/w/AGENTS.md", "a"),
            file("  ", "no path"),
        ];
        let params = SystemPromptParams {
            context_files: &files,
            ..SystemPromptParams::default()
        };
        let prompt = build_system_prompt(&params);
        let file_headings: Vec<&str> = headings(&prompt)
            .into_iter()
            .filter(|heading| heading.starts_with("## /"))
            .collect();
        assert_eq!(
            file_headings,
            [
                "## /w/AGENTS.md",
                "## /w/SOUL.md",
                "## /w/IDENTITY.md",
                "## /w/USER.md",
                "## /w/TOOLS.md",
                "## /w/BOOTSTRAP.md",
                "## /w/MEMORY.md",
                "## /w/Extra.md",
                "## /w/a/notes.md",
                "## /w/b/notes.md",
            ]
        );
        assert!(!prompt.contains("no path"));
    }

    #[test]
    fn soul_line_appears_only_when_soul_md_is_loaded() {
        let soul_line = "If SOUL.md is present, embody its persona and tone.";
        let with_soul = vec![file("/w/soul.md", "Be warm.")];
        let without = vec![file("/w/AGENTS.md", "Be helpful.")];
        for (files, expected) in [(&with_soul, true), (&without, false)] {
            let params = SystemPromptParams {
                context_files: files,
                ..SystemPromptParams::default()
            };
            assert_eq!(build_system_prompt(&params).contains(soul_line), expected);
        }
    }

    #[test]
    fn building_twice_gives_identical_bytes() {
        let fixture = Fixture::new();
        let params = fixture.params(PromptMode::Full);
        let first = build_system_prompt(&params);
        let second = build_system_prompt(&params);
        assert_eq!(first.as_bytes(), second.as_bytes());
    }

    #[test]
    fn output_does_not_depend_on_hash_map_order() {
        // GIVEN the same summaries inserted in opposite orders into maps with fresh hash seeds,
        // including keys that differ only in case
        let entries: Vec<(String, String)> = (0..40)
            .map(|n| (format!("tool_{n:02}"), format!("Summary {n}")))
            .chain([
                ("Custom".to_owned(), "Upper".to_owned()),
                ("custom".to_owned(), "Lower".to_owned()),
            ])
            .collect();
        let mut tools: Vec<String> = entries.iter().map(|(name, _)| name.clone()).collect();
        tools.reverse();
        let build = |forward: bool| {
            let mut map = HashMap::new();
            let ordered: Vec<&(String, String)> = if forward {
                entries.iter().collect()
            } else {
                entries.iter().rev().collect()
            };
            for (key, value) in ordered {
                map.insert(key.clone(), value.clone());
            }
            build_system_prompt(&SystemPromptParams {
                tool_names: &tools,
                tool_summaries: Some(&map),
                ..SystemPromptParams::default()
            })
        };
        // WHEN the prompt is built from each of them
        let reference = build(true);
        // THEN every build is byte-identical
        for attempt in 0..16 {
            assert_eq!(build(attempt % 2 == 0), reference);
        }
        // The first spelling in the tool list is shown; the summary of the smallest key wins.
        assert!(reference.contains("- custom: Upper\n"));
    }

    #[test]
    fn time_zone_adds_the_date_hint_and_the_zone_but_no_clock() {
        let tools = strings(&["session_status"]);
        let params = SystemPromptParams {
            tool_names: &tools,
            user_timezone: Some("Europe/Berlin"),
            ..SystemPromptParams::default()
        };
        let prompt = build_system_prompt(&params);
        assert!(prompt.contains(
            "\nIf you need the current date, time, or day of week, run session_status (📊 session_status).\n## Workspace\n"
        ));
        assert!(prompt.contains(
            "\n## Current Date & Time\nTime zone: Europe/Berlin\n## Workspace Files (injected)\n"
        ));
        let without = build_system_prompt(&SystemPromptParams::default());
        assert!(!without.contains("## Current Date & Time"));
        assert!(!without.contains("If you need the current date"));
    }

    #[test]
    fn workspace_and_injected_files_sections_use_the_exact_lines() {
        let params = SystemPromptParams {
            workspace_dir: "s3://bucket/agents/main/workspace/",
            ..SystemPromptParams::default()
        };
        let prompt = build_system_prompt(&params);
        assert!(prompt.contains(
            "## Workspace\nYour working directory is: s3://bucket/agents/main/workspace/\n\
             Treat this directory as the single global workspace for file operations unless explicitly instructed otherwise.\n\
             ## Workspace Files (injected)\n\
             These user-editable files are loaded by clawless and included below in Project Context.\n"
        ));
    }

    #[test]
    fn authorized_senders_are_listed_in_full_mode_only_when_present() {
        let fixture = Fixture::new();
        let full = build_system_prompt(&fixture.params(PromptMode::Full));
        assert!(full.contains(
            "## Authorized Senders\nAuthorized senders: +15551234567. These senders are allowlisted; do not assume they are the owner.\n"
        ));
        let blank = strings(&[" "]);
        let params = SystemPromptParams {
            authorized_senders: &blank,
            ..SystemPromptParams::default()
        };
        assert!(!build_system_prompt(&params).contains("## Authorized Senders"));
    }

    /// TV-19, as clawless renders it: a sandboxed group with `workspaceAccess: none`, default
    /// elevated config (enabled, nobody allowed), `sessions_spawn` and `exec` offered.
    #[test]
    fn tv19_the_sandbox_section_of_a_sandboxed_group() {
        let fixture = Fixture::new();
        let tools = strings(&["read", "exec", "sessions_spawn"]);
        let dir = "s3://b/agents/main/workspace/.sandboxes/agent-main-f331f052/";
        let params = SystemPromptParams {
            tool_names: &tools,
            sandbox: Some(SandboxPrompt {
                workspace_dir: dir,
                workspace_access: "none",
                exec: true,
                elevated: ElevatedPrompt::Unavailable,
            }),
            ..fixture.params(PromptMode::Full)
        };
        let prompt = build_system_prompt(&params);
        let expected = format!(
            "## Sandbox\n\
             You are running in a sandboxed runtime (commands execute in a jail on a node host).\n\
             Some tools may be unavailable due to sandbox policy.\n\
             Sub-agents stay sandboxed (no elevated/host access). Need outside-sandbox read/write? Don't spawn; ask first.\n\
             Sandbox container workdir: /workspace\n\
             Commands see the node host's own /workspace folder, not the files written with the file tools.\n\
             Sandbox host mount source (file tools bridge only; not valid inside sandbox exec): {dir}\n\
             Agent workspace access: none\n\
             Elevated exec is unavailable for this session.\n\
             Current elevated level: off (elevated exec unavailable).\n\
             Do not tell the user to switch to /elevated in this session.\n\
             ## Authorized Senders\n"
        );
        assert!(prompt.contains(&expected), "{prompt}");
        // After `## Workspace`, before `## Authorized Senders`; absent when not sandboxed.
        assert!(
            prompt.find("## Workspace\n").unwrap_or(usize::MAX)
                < prompt.find("## Sandbox").unwrap_or(0)
        );
        assert!(!build_system_prompt(&fixture.params(PromptMode::Full)).contains("## Sandbox"));

        // An allowed sender is told the level; disabled elevated exec says nothing of it.
        let allowed = SystemPromptParams {
            sandbox: Some(SandboxPrompt {
                workspace_dir: dir,
                workspace_access: "ro",
                exec: false,
                elevated: ElevatedPrompt::Available("ask"),
            }),
            ..fixture.params(PromptMode::Full)
        };
        let prompt = build_system_prompt(&allowed);
        assert!(prompt.contains("Agent workspace access: ro\nElevated exec is available for this session.\nAn owner can toggle it with /elevated on|off.\nCurrent elevated level: ask (on runs exec on the node host after an owner approves each command).\n"), "{prompt}");
        assert!(!prompt.contains("Sandbox container workdir"));
        let disabled = SystemPromptParams {
            sandbox: Some(SandboxPrompt {
                workspace_dir: dir,
                workspace_access: "none",
                exec: false,
                elevated: ElevatedPrompt::Disabled,
            }),
            ..fixture.params(PromptMode::Full)
        };
        assert!(!build_system_prompt(&disabled).contains("levated"));
    }

    #[test]
    fn memory_section_mentions_only_the_memory_tools_present() {
        let tools = strings(&["memory_get"]);
        let params = SystemPromptParams {
            tool_names: &tools,
            ..SystemPromptParams::default()
        };
        let prompt = build_system_prompt(&params);
        assert!(prompt.contains("## Memory Recall"));
        assert!(prompt.contains("- Use memory_get to read only the lines you need"));
        assert!(!prompt.contains("run memory_search"));

        let disabled = SystemPromptParams {
            include_memory_section: false,
            ..params
        };
        assert!(!build_system_prompt(&disabled).contains("## Memory Recall"));
        assert!(!build_system_prompt(&SystemPromptParams::default()).contains("## Memory Recall"));
    }

    #[test]
    fn heartbeats_section_uses_the_exact_ack_lines() {
        let fixture = Fixture::new();
        let prompt = build_system_prompt(&fixture.params(PromptMode::Full));
        assert!(prompt.contains(
            "## Heartbeats\n\
             If the current user message is a heartbeat poll and nothing needs attention, reply exactly:\n\
             HEARTBEAT_OK\n\
             If something needs attention, do NOT include \"HEARTBEAT_OK\"; reply with the alert text instead.\n"
        ));
    }

    #[test]
    fn a_lean_prompt_drops_the_optional_sections_and_says_what_was_shortened() {
        let fixture = Fixture::new();
        let full = build_system_prompt(&fixture.params(PromptMode::Full));
        let left_out = strings(&["skill descriptions"]);
        let mut params = fixture.params(PromptMode::Full);
        params.lean = true;
        params.left_out = &left_out;
        let lean = build_system_prompt(&params);
        assert!(lean.len() < full.len());
        for heading in ["## clawless CLI Quick Reference", "## Execution Bias"] {
            assert!(
                full.contains(heading) && !lean.contains(heading),
                "{heading}"
            );
        }
        assert!(lean.contains("Never execute /approve"));
        assert!(!lean.contains("Default: do not narrate"));
        assert!(lean.contains("Shortened for this small context window: skill descriptions."));
        assert!(lean.contains("## Safety"));
    }

    #[test]
    fn silent_replies_use_the_no_reply_token() {
        let fixture = Fixture::new();
        let prompt = build_system_prompt(&fixture.params(PromptMode::Full));
        assert!(prompt.contains(
            "## Silent Replies\nWhen you have nothing to say, respond with ONLY: NO_REPLY\n"
        ));
    }

    #[test]
    fn prompt_mode_follows_the_session_key_and_the_tool_allowlist() {
        assert_eq!(
            PromptMode::for_session_key("agent:main:main", false),
            PromptMode::Full
        );
        assert_eq!(
            PromptMode::for_session_key("agent:main:main", true),
            PromptMode::Minimal
        );
        assert_eq!(
            PromptMode::for_session_key("agent:main:subagent:parent:subagent:child", false),
            PromptMode::Minimal
        );
        assert_eq!(
            PromptMode::for_session_key("agent:main:cron:job-1", false),
            PromptMode::Minimal
        );
        assert_eq!(
            PromptMode::for_session_key("agent:Main:CRON:job-1:run:7", false),
            PromptMode::Minimal
        );
        assert_eq!(
            PromptMode::for_session_key("cron:job-1", false),
            PromptMode::Full
        );
        assert_eq!(
            PromptMode::for_session_key("agent:main:telegram:direct:cron", false),
            PromptMode::Full
        );
    }

    #[test]
    fn split_at_cache_boundary_returns_the_stable_prefix_and_the_turn_suffix() {
        let prompt = build_system_prompt(&SystemPromptParams::default());
        let (stable, dynamic) = split_at_cache_boundary(&prompt);
        assert!(stable.starts_with(IDENTITY_LINE));
        assert!(stable.ends_with("Never add NO_REPLY to a message that has real content."));
        assert!(dynamic.starts_with("## Runtime\n"));
        assert_eq!(
            strip_cache_boundary(&prompt),
            format!("{stable}\n{dynamic}")
        );
        assert!(!strip_cache_boundary(&prompt).contains("CACHE_BOUNDARY"));
        assert_eq!(split_at_cache_boundary("no marker"), ("no marker", ""));
        assert_eq!(strip_cache_boundary("no marker"), "no marker");
    }
}
