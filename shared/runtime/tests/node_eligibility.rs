//! Skills and node hosts in a turn (spec §3.3): the backend runs no commands itself, so a
//! skill that needs a platform or binary the backend lacks becomes eligible once an active
//! node reports them; a macOS node adds the note to the skills prompt; `exec` is offered only
//! while a node is active. A revoked node takes all of it away again.

mod support;

use std::sync::Arc;

use clawless_base::clock::SystemClock;
use clawless_base::session_key::ChatType;
use clawless_channels::{ChannelOutbox, HttpReplySender};
use clawless_core::nodes::NodeFacts;
use clawless_core::nodes::testing::{InMemoryExecJobs, InMemoryExecQueue, InMemoryNodeRegistry};
use clawless_core::testing::InMemoryTimers;
use clawless_core::testing::InMemoryTurnQueue;
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_exec::SkillBin;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::nodes_service::{NodesDeps, NodesService, PairRequest};
use clawless_runtime::turn_service::{HostFacts, TurnDeps, TurnService};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use clawless_skills::eligibility::EligibilityContext;
use serde_json::Value;
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text};

const MESSAGES: &str = "/v1/messages";
const NOTE: &str =
    "Remote macOS node available (Studio). Run macOS-only skills via exec host=node on that node.";

fn message(id: &str) -> SessionEvent {
    SessionEvent {
        session_key: "agent:main:main".to_owned(),
        agent_id: "main".to_owned(),
        event: TurnEvent::Inbound(InboundMessage {
            message_id: id.to_owned(),
            chat: ChatRef {
                channel: "generic".to_owned(),
                chat_id: "c-1".to_owned(),
                chat_type: ChatType::Direct,
            },
            sender_id: "u-1".to_owned(),
            text: "What can you do?".to_owned(),
            sender_is_owner: true,
            attachments: Vec::new(),
        }),
    }
}

fn system_prompt(request: &Value) -> String {
    request["system"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|block| block["text"].as_str().unwrap_or_default())
        .collect()
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_macos_node_makes_its_skills_eligible_and_is_named_in_the_prompt() {
    // GIVEN a backend on Linux with no binaries, a macOS-only skill that needs `memo`, and
    // a registry with no node yet
    let fixture = Fixture::new();
    let skill = fixture.path().join("skills/apple-notes");
    std::fs::create_dir_all(&skill).expect("test fixture");
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: apple-notes\ndescription: Manage Apple Notes with memo.\nmetadata: {\"openclaw\":{\"os\":[\"darwin\"],\"requires\":{\"bins\":[\"memo\"]}}}\n---\n# Notes\n",
    )
    .expect("test fixture");
    let model_server = ScriptedServer::start().await;
    model_server.always(MESSAGES, ScriptedReply::json(anthropic_text("Hello.")));
    let receiver = ReplyReceiver::start().await;
    let config = ClawlessConfig::from_yaml(
        &fixture.config_yaml(&model_server.base_url(), &receiver.url),
        "test",
    )
    .expect("test fixture");
    let stores = Arc::new(StoreFactory::new(|| unreachable!("no S3 in this test")));
    let skills = Arc::new(SkillsService::new(config.clone(), &stores).expect("test fixture"));
    let db = SqliteDb::open(fixture.path().join("sessions.db")).expect("test fixture");
    let nodes = Arc::new(NodesService::new(NodesDeps {
        registry: Arc::new(InMemoryNodeRegistry::new()),
        jobs: Arc::new(InMemoryExecJobs::new()),
        queues: Arc::new(InMemoryExecQueue::new()),
        timers: Arc::new(InMemoryTimers::new()),
        turns: Arc::new(InMemoryTurnQueue::new()),
        clock: Arc::new(SystemClock),
        settings: Default::default(),
    }));
    let outbox = ChannelOutbox::new().with_channel(
        "generic",
        Arc::new(HttpReplySender::new(
            reqwest::Client::new(),
            receiver.url.clone(),
            SECRET.as_bytes(),
        )),
    );
    let turns = TurnService::new(TurnDeps {
        skills,
        stores,
        sessions: Arc::new(SqliteSessionStore::new(db)),
        model: clawless_llm::build_model(&config.models, &|_| None).expect("test fixture"),
        outbox: Arc::new(outbox),
        web: None,
        clock: Arc::new(SystemClock),
        eligibility: EligibilityContext {
            platforms: ["linux".to_owned()].into_iter().collect(),
            ..EligibilityContext::empty()
        },
        home_dirs: Vec::new(),
        host: HostFacts::default(),
        nodes: Some(Arc::clone(&nodes)),
    });

    // WHEN a message arrives with no node paired
    turns.handle(&message("m-1")).await.expect("turn");
    // THEN the macOS skill is not offered, there is no note and no exec
    let requests = model_server.requests_to(MESSAGES);
    let first = &requests.last().expect("a model call").body;
    assert!(!system_prompt(first).contains("apple-notes"));
    assert!(!system_prompt(first).contains("Remote macOS node"));
    assert!(!tool_names(first).contains(&"exec".to_owned()));

    // WHEN a macOS node that has `memo` pairs
    let (code, _) = nodes.create_pairing_code().await.expect("code");
    let paired = nodes
        .pair(&PairRequest {
            code,
            facts: NodeFacts {
                platform: "darwin".to_owned(),
                path: vec!["/opt/homebrew/bin".to_owned()],
                skill_bins: vec![SkillBin {
                    name: "memo".to_owned(),
                    resolved_path: "/opt/homebrew/bin/memo".to_owned(),
                }],
                display_name: Some("Studio".to_owned()),
                exec: None,
            },
        })
        .await
        .expect("pairing");
    turns.handle(&message("m-2")).await.expect("turn");
    // THEN the skill is listed, the prompt names the node first, and exec is offered
    let requests = model_server.requests_to(MESSAGES);
    let second = &requests.last().expect("a model call").body;
    let prompt = system_prompt(second);
    assert!(prompt.contains("<name>apple-notes</name>"), "{prompt}");
    assert!(prompt.contains(NOTE), "{prompt}");
    assert!(
        prompt.find(NOTE) < prompt.find("<name>apple-notes</name>"),
        "the note comes before the skills block: {prompt}"
    );
    assert!(tool_names(second).contains(&"exec".to_owned()));

    // WHEN the node is revoked
    nodes.revoke(&paired.node_id).await.expect("revoke");
    turns.handle(&message("m-3")).await.expect("turn");
    // THEN the prompt and tools are back to the backend's own
    let requests = model_server.requests_to(MESSAGES);
    let third = &requests.last().expect("a model call").body;
    assert!(!system_prompt(third).contains("apple-notes"));
    assert!(!system_prompt(third).contains("Remote macOS node"));
    assert!(!tool_names(third).contains(&"exec".to_owned()));
}
