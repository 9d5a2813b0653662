//! The `exec` tool as the model sees it. It never runs in the turn function: a call becomes a
//! signed job on a node host's queue, and its result comes back as a turn event.

use serde_json::json;

use clawless_base::model::ToolSpec;

/// The tool's name.
pub const EXEC_TOOL: &str = "exec";

/// The `exec` tool's spec: `command` (a `sh -lc` payload), optional `node`, `workdir`, `env`
/// and `timeout` (seconds).
pub fn exec_tool_spec() -> ToolSpec {
    ToolSpec {
        name: EXEC_TOOL.to_owned(),
        description: "Run `/bin/sh -lc <command>` on a paired node host (the user's machine), \
            under its exec-approval policy: other commands wait for the user's approval in the \
            chat. Returns the output when it ends."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "node": {"type": "string", "description": "Node id or name (default: the agent's)"},
                "workdir": {"type": "string"},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "timeout": {"type": "number", "description": "Seconds"}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}
