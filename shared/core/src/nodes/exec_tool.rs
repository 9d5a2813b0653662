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
        description: "Run a shell command on a paired node host (the user's own machine). \
            The command runs as `/bin/sh -lc <command>` under the node's exec-approval policy: \
            commands the policy does not allow wait for the user's approval in the chat. \
            Returns stdout (or stderr, or the error) when the command ends."
            .to_owned(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "Shell command to run."},
                "node": {"type": "string", "description": "Node id or name; default: the agent's node."},
                "workdir": {"type": "string", "description": "Working directory on the node."},
                "env": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "Extra environment variables."
                },
                "timeout": {"type": "number", "description": "Timeout in seconds."}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    }
}
