//! The harness of the sub-agent and session-tool tests: a turn service with sub-agents over
//! SQLite sessions, an in-memory turn queue the test pumps by hand, in-memory timers, a
//! scripted Anthropic server and a reply receiver; owner messages in, and readers for what
//! the model was sent and what reached the chats.

use std::sync::Arc;
use std::time::Duration;

use clawless_base::clock::{Clock, SystemClock};
use clawless_base::session_key::ChatType;
use clawless_core::session::{SessionKey, SessionStore, TurnQueue};
use clawless_core::testing::InMemoryTimers;
use clawless_core::testing::InMemoryTurnQueue;
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_core::turn::state::SessionState;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::nodes_service::NodesService;
use clawless_runtime::turn_service::TurnService;
use serde_json::Value;

use super::ReplyReceiver;

/// The model's endpoint.
pub const MESSAGES: &str = "/v1/messages";
/// The parent's session.
pub const MAIN: &str = "agent:main:main";

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub model: ScriptedServer,
    pub receiver: ReplyReceiver,
    pub sessions: Arc<dyn SessionStore>,
    pub queue: Arc<InMemoryTurnQueue>,
    pub timers: InMemoryTimers,
    pub turns: TurnService,
    sent: u64,
}

impl Harness {
    /// A turn service with sub-agents and their timers; `agents_yaml` goes under
    /// `agents.defaults` (and may open `agents.list`), `tools_yaml` under `tools` (and may
    /// open further top-level keys); `lister` adds the session listing.
    pub async fn new(agents_yaml: &str, tools_yaml: &str, lister: bool) -> Self {
        Self::build(agents_yaml, tools_yaml, lister, None).await
    }

    /// [`Harness::new`] whose turn service runs exec on the node hosts of `nodes`.
    pub async fn build(
        agents_yaml: &str, tools_yaml: &str, lister: bool, nodes: Option<Arc<NodesService>>,
    ) -> Self {
        let dir = tempfile::tempdir().expect("test fixture");
        std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
        std::fs::create_dir_all(dir.path().join("workspace")).expect("test fixture");
        let model = ScriptedServer::start().await;
        let receiver = ReplyReceiver::start().await;
        let db = SqliteDb::open(dir.path().join("state.db")).expect("test fixture");
        let sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db.clone()));
        let queue = Arc::new(InMemoryTurnQueue::new());
        let timers = InMemoryTimers::new();
        let yaml = format!(
            "skills:\n  bundled: {skills}\nagents:\n  defaults:\n    workspace: {workspace}\n\
             {agents_yaml}models:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  \
             providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {base}\n\
             tools:\n  deny: [web_fetch]\n{tools_yaml}",
            skills = dir.path().join("skills").display(),
            workspace = dir.path().join("workspace").display(),
            base = model.base_url(),
        );
        let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
        let mut turns = super::turn_service_with_nodes(
            &config,
            Arc::clone(&sessions),
            &receiver.url,
            Arc::new(SystemClock) as Arc<dyn Clock>,
            nodes,
        )
        .with_subagents(Arc::clone(&queue) as Arc<dyn TurnQueue>)
        .with_subagent_timers(Arc::new(timers.clone()));
        if lister {
            turns = turns.with_session_lister(Arc::new(SqliteSessionStore::new(db)));
        }
        Self {
            dir,
            model,
            receiver,
            sessions,
            queue,
            timers,
            turns,
            sent: 0,
        }
    }

    /// A message from the owner in session `key` (its chat is `c-<key>`).
    pub async fn say_in(&mut self, key: &str, text: &str) {
        self.say_as(key, "u-1", true, text).await;
    }

    /// A message from `sender` (an owner or not) in session `key`; a group chat when the key
    /// names one.
    pub async fn say_as(&mut self, key: &str, sender: &str, owner: bool, text: &str) {
        self.sent += 1;
        let event = SessionEvent {
            session_key: key.to_owned(),
            agent_id: "main".to_owned(),
            event: TurnEvent::Inbound(InboundMessage {
                message_id: format!("m-{}", self.sent),
                chat: ChatRef {
                    channel: "generic".to_owned(),
                    chat_id: format!("c-{key}"),
                    chat_type: if key.contains(":group:") {
                        ChatType::Group
                    } else {
                        ChatType::Direct
                    },
                },
                sender_id: sender.to_owned(),
                text: text.to_owned(),
                sender_is_owner: owner,
                attachments: Vec::new(),
            }),
        };
        self.turns.handle(&event).await.expect("turn");
    }

    /// A message from the owner in the main session.
    pub async fn say(&mut self, text: &str) {
        self.say_in(MAIN, text).await;
    }

    /// The events waiting on the turn queue (taken off it).
    pub async fn take_queued(&self) -> Vec<SessionEvent> {
        let mut events = Vec::new();
        loop {
            let delivered = self
                .queue
                .receive(10, Duration::from_millis(10))
                .await
                .expect("receive");
            if delivered.is_empty() {
                return events;
            }
            for delivery in delivered {
                events.push(serde_json::from_str(&delivery.body).expect("an event"));
                self.queue.delete(&delivery.receipt).await.expect("delete");
            }
        }
    }

    /// The model's next answer.
    pub fn script(&self, reply: Value) {
        self.model.push(MESSAGES, ScriptedReply::json(reply));
    }

    pub fn model_calls(&self) -> usize {
        self.model.requests_to(MESSAGES).len()
    }

    /// The raw body of the latest model request.
    pub fn last_request(&self) -> String {
        self.model
            .requests_to(MESSAGES)
            .last()
            .expect("a request")
            .raw_body
            .clone()
    }

    /// The system prompt of the model request at `index`.
    pub fn system_prompt(&self, index: usize) -> String {
        let system = &self.model.requests_to(MESSAGES)[index].body["system"];
        match system.as_str() {
            Some(text) => text.to_owned(),
            None => system.to_string(),
        }
    }

    /// The tools offered in the model request at `index`.
    pub fn offered(&self, index: usize) -> Vec<String> {
        self.model.requests_to(MESSAGES)[index].body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// The answer to tool call `id` as the model got it back (parsed), and whether it is an
    /// error.
    pub fn tool_result(&self, id: &str) -> (Value, bool) {
        for request in self.model.requests_to(MESSAGES) {
            for message in request.body["messages"].as_array().into_iter().flatten() {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] == "tool_result" && block["tool_use_id"] == id {
                        let text = block["content"].as_str().expect("a text result");
                        let answer = serde_json::from_str(text).expect("a JSON answer");
                        return (answer, block["is_error"] == true);
                    }
                }
            }
        }
        panic!("no result for tool call {id}");
    }

    /// The texts of the replies posted to chats so far.
    pub fn chat_texts(&self) -> Vec<String> {
        self.receiver
            .posted()
            .iter()
            .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Session `key` as stored.
    pub async fn state(&self, key: &str) -> SessionState {
        let key = SessionKey::parse(key).expect("key");
        let stored = self
            .sessions
            .load(&key)
            .await
            .expect("load")
            .expect("stored");
        SessionState::from_stored(key, &stored).expect("state")
    }
}
