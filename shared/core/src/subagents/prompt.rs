//! What a spawned child sees (spec §3.4): the extra system prompt that tells it it is a
//! sub-agent (placed by the system prompt builder under `## Subagent Context`, in the minimal
//! prompt mode sub-agent sessions get), and the first user message that carries its task.
//!
//! The sentences the spec quotes are exact; the rest is clawless's own wording of the same
//! rules. Which bootstrap files a child loads is the system prompt's business.

use super::config::non_blank;

/// The heading of the extra system prompt.
pub const SUBAGENT_PROMPT_HEADING: &str = "# Subagent Context";

/// Rule 3 of the extra system prompt.
pub const DONT_INITIATE_RULE: &str =
    "**Don't initiate** - No heartbeats, no proactive actions, no side quests";

/// What an orchestrator replies to a child completion that arrives after its final answer.
pub const LATE_COMPLETION_LINE: &str = "If a child completion event arrives AFTER you already sent your final answer, reply ONLY with NO_REPLY.";

/// The line of a nested child that may not spawn.
pub const LEAF_WORKER_LINE: &str =
    "You are a leaf worker and CANNOT spawn further sub-agents. Focus on your assigned task.";

/// The session-mode line of the first user message.
pub const PERSISTENT_SESSION_LINE: &str = "[Subagent Context] This subagent session is persistent and remains available for thread follow-up messages.";

/// The facts the child's prompt and first message are built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildPrompt<'a> {
    /// The task as the requester wrote it.
    pub task: &'a str,
    /// The spawn's label, if any.
    pub label: Option<&'a str>,
    /// The child's depth: 1 for a top-level agent's child.
    pub depth: u32,
    /// `maxSpawnDepth`.
    pub max_spawn_depth: u32,
    /// The session that spawned it.
    pub requester_session_key: &'a str,
    /// The channel the requester talks on, if known.
    pub requester_channel: Option<&'a str>,
    /// The child's own session.
    pub child_session_key: &'a str,
    /// Whether the child session stays open for follow-ups (`mode: "session"`).
    pub persistent: bool,
}

/// The child's extra system prompt.
pub fn subagent_system_prompt(prompt: &ChildPrompt<'_>) -> String {
    let parent = if prompt.depth >= 2 {
        "parent orchestrator"
    } else {
        "main agent"
    };
    let can_spawn = prompt.depth < prompt.max_spawn_depth;
    let mut sections = vec![
        SUBAGENT_PROMPT_HEADING.to_owned(),
        format!("You are a **subagent** spawned by the {parent} for a specific task."),
        format!(
            "## Your Role\n\
             - Your task: {}\n\
             - Do this one task. When it is done, so is your work.\n\
             - You are not the main agent: the {parent} that spawned you decides what to do \
             with your result.",
            collapse_whitespace(prompt.task)
        ),
        format!(
            "## Rules\n\
             1. **Stay on task** - Do what was asked; do not widen the scope.\n\
             2. **Your final message is the result** - It is reported to your requester \
             automatically, so make it complete on its own.\n\
             3. {DONT_INITIATE_RULE}\n\
             4. **Be ephemeral** - This session may be archived or deleted once you finish; \
             leave nothing in it that is needed later unless the task says to save it.\n\
             5. **Trust push-based completion** - Results of work you start arrive as messages; \
             never wait in a loop or sleep to check on them.\n\
             6. **Recover from truncated output** - When a tool result was cut short, fetch the \
             part you need in smaller pieces (an offset, a narrower search) instead of guessing."
        ),
        "## Output Format\n\
         End with one reply that gives:\n\
         - what you did or found, with the specifics your requester needs (names, numbers, \
         paths, links);\n\
         - anything you could not finish, and why.\n\
         Keep it concise: no greeting, no restating of the task."
            .to_owned(),
        "## What You DON'T Do\n\
         - NO conversations with the user: your requester relays what matters\n\
         - NO messages to outside channels or people unless the task asks for them\n\
         - NO cron jobs or persistent state\n\
         - NO `message` tool unless the task explicitly tells you to use it"
            .to_owned(),
    ];
    if can_spawn {
        sections.push(format!(
            "## Sub-Agent Spawning\n\
             You may spawn sub-agents of your own with `sessions_spawn` when parts of your task \
             can run independently or in parallel.\n\
             - Use `subagents` to list, steer or stop the sub-agents you spawned.\n\
             - Do not poll for their status (no `sessions_list`, `sessions_history` or sleep \
             loops): each child's result arrives as a message when it completes.\n\
             - Keep track of the children you expect, and send your final answer only after all \
             of their results have arrived.\n\
             - {LATE_COMPLETION_LINE}"
        ));
    } else if prompt.depth >= 2 {
        sections.push(LEAF_WORKER_LINE.to_owned());
    }
    let mut context = vec!["## Session Context".to_owned()];
    if let Some(label) = non_blank(prompt.label) {
        context.push(format!("- Label: {label}"));
    }
    context.push(format!(
        "- Requester session: {}.",
        prompt.requester_session_key
    ));
    if let Some(channel) = non_blank(prompt.requester_channel) {
        context.push(format!("- Requester channel: {channel}."));
    }
    context.push(format!("- Your session: {}.", prompt.child_session_key));
    sections.push(context.join("\n"));
    sections.join("\n\n")
}

/// The child's first user message: where it runs, and its task.
pub fn child_task_message(prompt: &ChildPrompt<'_>) -> String {
    let mut blocks = vec![format!(
        "[Subagent Context] You are running as a subagent (depth {}/{}). Results auto-announce to your requester; do not busy-poll for status.",
        prompt.depth, prompt.max_spawn_depth
    )];
    if prompt.persistent {
        blocks.push(PERSISTENT_SESSION_LINE.to_owned());
    }
    blocks.push(format!("[Subagent Task]: {}", prompt.task));
    blocks.join("\n\n")
}

/// Every run of white space (newlines included) as one space, trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(depth: u32, max: u32) -> ChildPrompt<'static> {
        ChildPrompt {
            task: "Summarise\n  the   logs",
            label: Some("logs"),
            depth,
            max_spawn_depth: max,
            requester_session_key: "agent:main:main",
            requester_channel: Some("telegram"),
            child_session_key: "agent:main:subagent:u1",
            persistent: false,
        }
    }

    #[test]
    fn a_first_level_leaf_is_told_its_task_rules_and_session() {
        let prompt = subagent_system_prompt(&child(1, 1));
        assert!(prompt.starts_with(
            "# Subagent Context\n\nYou are a **subagent** spawned by the main agent for a specific task.\n\n## Your Role\n- Your task: Summarise the logs\n"
        ));
        for exact in [
            "3. **Don't initiate** - No heartbeats, no proactive actions, no side quests\n",
            "## Output Format\n",
            "- NO cron jobs or persistent state\n",
            "## Session Context\n- Label: logs\n- Requester session: agent:main:main.\n- Requester channel: telegram.\n- Your session: agent:main:subagent:u1.",
        ] {
            assert!(prompt.contains(exact), "{exact}");
        }
        assert!(!prompt.contains("## Sub-Agent Spawning"));
        assert!(
            !prompt.contains(LEAF_WORKER_LINE),
            "a depth-1 leaf gets no leaf line"
        );
        assert!(prompt.ends_with("- Your session: agent:main:subagent:u1."));
    }

    #[test]
    fn an_orchestrator_gets_spawning_guidance() {
        let prompt = subagent_system_prompt(&child(1, 2));
        assert!(prompt.contains("## Sub-Agent Spawning\n"));
        assert!(prompt.contains(&format!("- {LATE_COMPLETION_LINE}\n\n## Session Context")));
        assert!(!prompt.contains(LEAF_WORKER_LINE));
    }

    #[test]
    fn a_nested_leaf_names_its_parent_orchestrator_and_cannot_spawn() {
        let prompt = subagent_system_prompt(&ChildPrompt {
            label: None,
            requester_channel: None,
            ..child(2, 2)
        });
        assert!(prompt.contains("spawned by the parent orchestrator for a specific task."));
        assert!(prompt.contains(&format!("\n\n{LEAF_WORKER_LINE}\n\n## Session Context\n- Requester session: agent:main:main.\n- Your session:")));
        assert!(!prompt.contains("## Sub-Agent Spawning") && !prompt.contains("- Label:"));
    }

    #[test]
    fn the_first_message_gives_depth_and_the_task_as_written() {
        assert_eq!(
            child_task_message(&child(1, 1)),
            "[Subagent Context] You are running as a subagent (depth 1/1). Results auto-announce to your requester; do not busy-poll for status.\n\n[Subagent Task]: Summarise\n  the   logs"
        );
        let persistent = child_task_message(&ChildPrompt {
            persistent: true,
            ..child(2, 3)
        });
        assert!(
            persistent.starts_with("[Subagent Context] You are running as a subagent (depth 2/3).")
        );
        assert!(persistent.contains(&format!(
            "\n\n{PERSISTENT_SESSION_LINE}\n\n[Subagent Task]: "
        )));
    }
}
