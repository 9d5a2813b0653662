//! The workspace tools end to end in local mode: a signed message to `POST /webhook/generic`
//! → the model (a scripted Anthropic server) writes a note, finds it with `ls` and `grep`,
//! then adds one file and updates another with `apply_patch`; the files land in the
//! workspace directory and each tool's result reaches the model. A read-only sandbox is
//! offered the search tools but not `apply_patch`.

mod support;

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use clawless_channels::sign;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, RunningLocal, start_local};
use serde_json::{Value, json};
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";

/// The fixture's config with `write` allowed and the agent's sandbox settings `sandbox`.
fn config_yaml(
    fixture: &Fixture, model: &ScriptedServer, receiver: &ReplyReceiver, sandbox: &str,
) -> String {
    fixture
        .config_yaml(&model.base_url(), &receiver.url)
        .replace("deny: [web_fetch, write]", "deny: [web_fetch]")
        .replace(
            "  defaults:\n",
            &format!("  defaults:\n    sandbox: {sandbox}\n"),
        )
}

async fn start(fixture: &Fixture, yaml: &str) -> RunningLocal {
    let config = ClawlessConfig::from_yaml(yaml, "test").expect("test fixture");
    let model = clawless_llm::build_model(&config.models, &|_| None).expect("test fixture");
    start_local(LocalOptions {
        config,
        state_dir: fixture.state_dir(),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model,
        secrets: Default::default(),
    })
    .await
    .expect("test fixture")
}

/// Posts one signed generic-channel message and waits for the reply.
async fn say(running: &RunningLocal, receiver: &ReplyReceiver, text: &str) {
    let body = serde_json::to_vec(&json!({
        "message_id": "m-1", "chat_id": "chat-1", "sender_id": "user-1",
        "text": text, "chat_type": "direct"
    }))
    .expect("test fixture");
    let signature = sign(SECRET.as_bytes(), &body);
    let status = reqwest::Client::new()
        .post(format!("http://{}/webhook/generic", running.addr))
        .header("content-type", "application/json")
        .header("x-clawless-signature", signature)
        .body(body)
        .send()
        .await
        .expect("test fixture")
        .status();
    assert_eq!(status.as_u16(), 202);
    let posted = receiver.wait_for(1, Duration::from_secs(30)).await;
    assert_eq!(posted.len(), 1, "one reply");
}

/// The text and error flag of the `tool_result` answering call `id`, from any request.
fn tool_result(model: &ScriptedServer, id: &str) -> (String, bool) {
    for request in model.requests_to(MESSAGES) {
        let blocks = request.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|message| message["content"].as_array().into_iter().flatten());
        for block in blocks {
            if block["type"] == "tool_result" && block["tool_use_id"] == id {
                let text = match &block["content"] {
                    Value::String(text) => text.clone(),
                    Value::Array(parts) => parts
                        .iter()
                        .filter_map(|part| part["text"].as_str())
                        .collect(),
                    other => other.to_string(),
                };
                return (text, block["is_error"] == true);
            }
        }
    }
    panic!("no result for tool call {id}");
}

/// The tool names offered in the first model request.
fn offered_tools(model: &ScriptedServer) -> Vec<String> {
    model.requests_to(MESSAGES)[0].body["tools"]
        .as_array()
        .expect("tools offered")
        .iter()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_writes_finds_and_patches_workspace_files() {
    // GIVEN an unsandboxed agent whose model writes a note, lists, greps, then patches
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    let patch = "*** Begin Patch\n\
                 *** Add File: notes/done.md\n+# Done\n+- nothing yet\n\
                 *** Update File: notes/todo.md\n@@\n # Todo\n-- TODO call the plumber\n+- called the plumber\n\
                 *** End Patch";
    for (id, name, input) in [
        (
            "t_write",
            "write",
            json!({"path": "notes/todo.md", "content": "# Todo\n- TODO call the plumber\n- buy milk\n"}),
        ),
        ("t_ls", "ls", json!({"path": "notes"})),
        ("t_grep", "grep", json!({"pattern": "TODO", "glob": "*.md"})),
        ("t_patch", "apply_patch", json!({"input": patch})),
    ] {
        model.push(
            MESSAGES,
            ScriptedReply::json(anthropic_tool_use(id, name, input)),
        );
    }
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("All done.")));
    let receiver = ReplyReceiver::start().await;
    let running = start(
        &fixture,
        &config_yaml(&fixture, &model, &receiver, "{mode: \"off\"}"),
    )
    .await;

    // WHEN a message starts the turn
    say(&running, &receiver, "Tidy my notes").await;

    // THEN every tool succeeded and its result reached the model
    let tools = offered_tools(&model);
    for name in ["apply_patch", "grep", "find", "ls"] {
        assert!(tools.iter().any(|tool| tool == name), "{name}: {tools:?}");
    }
    let (write, _) = tool_result(&model, "t_write");
    assert!(write.starts_with("Successfully wrote"), "{write}");
    assert_eq!(tool_result(&model, "t_ls"), ("todo.md".to_owned(), false));
    assert_eq!(
        tool_result(&model, "t_grep"),
        ("notes/todo.md:2: - TODO call the plumber".to_owned(), false)
    );
    assert_eq!(
        tool_result(&model, "t_patch"),
        (
            "Success. Updated the following files:\nA notes/done.md\nM notes/todo.md".to_owned(),
            false
        )
    );

    // AND the workspace directory holds the patched files
    let workspace = fixture.path().join("workspace");
    let read =
        |path: &str| std::fs::read_to_string(workspace.join(path)).expect("a workspace file");
    assert_eq!(read("notes/done.md"), "# Done\n- nothing yet\n");
    assert_eq!(
        read("notes/todo.md"),
        "# Todo\n- called the plumber\n- buy milk\n"
    );
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_sandbox_searches_the_agents_files_but_gets_no_apply_patch() {
    // GIVEN an untrusted sender's session, sandboxed with read-only access to the agent's
    // workspace, whose model lists the agent's files and then tries to patch one
    let fixture = Fixture::new();
    let workspace = fixture.path().join("workspace");
    std::fs::write(workspace.join("MEMORY.md"), "private").expect("test fixture");
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use("t_ls", "ls", json!({"path": "/agent"}))),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "t_patch",
            "apply_patch",
            json!({"input": "*** Begin Patch\n*** Add File: x.md\n+x\n*** End Patch"}),
        )),
    );
    model.push(MESSAGES, ScriptedReply::json(anthropic_text("Looked.")));
    let receiver = ReplyReceiver::start().await;
    let running = start(
        &fixture,
        &config_yaml(&fixture, &model, &receiver, "{workspaceAccess: ro}"),
    )
    .await;

    // WHEN the message is handled
    say(&running, &receiver, "What is in your workspace?").await;

    // THEN the search tools are offered and apply_patch is not, and never runs
    let tools = offered_tools(&model);
    assert!(tools.iter().any(|tool| tool == "ls"), "{tools:?}");
    assert!(tools.iter().any(|tool| tool == "grep"), "{tools:?}");
    assert!(!tools.iter().any(|tool| tool == "apply_patch"), "{tools:?}");
    assert!(!tools.iter().any(|tool| tool == "write"), "{tools:?}");
    let (listing, is_error) = tool_result(&model, "t_ls");
    assert!(!is_error, "{listing}");
    assert!(listing.contains("AGENTS.md"), "{listing}");
    assert!(
        !listing.contains("MEMORY.md"),
        "memory stays hidden: {listing}"
    );
    let (refused, is_error) = tool_result(&model, "t_patch");
    assert!(is_error, "{refused}");
    assert!(!workspace.join("x.md").exists());
    running.stop().await;
}
