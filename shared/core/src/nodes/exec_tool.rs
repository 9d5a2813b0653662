//! The `exec` tool as the model sees it. It never runs in the turn function: a call becomes a
//! signed job on a node host's queue, and its result comes back as a turn event.

use serde_json::json;

use clawless_base::model::ToolSpec;

/// The tool's name.
pub const EXEC_TOOL: &str = "exec";

/// The `exec` tool's spec: `command` (a `sh -lc` payload), optional `node`, `workdir`, `env`,
/// `timeout` (seconds), `yieldMs` / `background` (spec §4.1: return `running` with a
/// session id and go on; the `process` tool follows up) and `pty`.
pub fn exec_tool_spec() -> ToolSpec {
    ToolSpec {
        name: EXEC_TOOL.to_owned(),
        description: "Run `/bin/sh -lc <command>` on a paired node host (the user's machine), \
            under its exec-approval policy: other commands wait for the user's approval in the \
            chat. Returns the output when it ends, or after `yieldMs` (default 10 s; `background`: \
            at once) a session id for the `process` tool while it keeps running."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "node": {"type": "string", "description": "Node id or name (default: the agent's)"},
                "workdir": {"type": "string"},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "timeout": {"type": "number", "description": "Seconds"},
                "yieldMs": {"type": "number"},
                "background": {"type": "boolean"},
                "pty": {"type": "boolean"}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}
