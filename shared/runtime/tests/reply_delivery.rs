//! Reply delivery failures: a platform's permanent refusal (bot blocked, chat gone) is
//! recorded and does not hold back the session's later messages; a failure worth retrying is
//! tried again in the same turn before the event is given back to the queue.

mod support;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use clawless_base::clock::SystemClock;
use clawless_base::session_key::ChatType;
use clawless_core::outbox::{Outbox, OutboxError};
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::turn::OutboundReply;
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_core::turn::state::{SessionState, StepBody};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::turn_service::{HostFacts, TurnDeps, TurnService};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use clawless_skills::eligibility::EligibilityContext;
use support::{Fixture, anthropic_text};

const MESSAGES: &str = "/v1/messages";

/// What the fake platform answers, in order; `Ok` once the script is used up.
#[derive(Debug, Default)]
struct ScriptedOutbox {
    script: Mutex<VecDeque<&'static str>>,
    attempts: Mutex<Vec<String>>,
}

#[async_trait]
impl Outbox for ScriptedOutbox {
    async fn send(&self, reply: &OutboundReply) -> Result<(), OutboxError> {
        self.attempts.lock().expect("lock").push(reply.text.clone());
        match self.script.lock().expect("lock").pop_front() {
            Some("rejected") => Err(OutboxError::Rejected {
                message: "403 Forbidden: bot was blocked by the user".to_owned(),
            }),
            Some("failed") => Err(OutboxError::Failed {
                message: "502 Bad Gateway".to_owned(),
                source: None,
            }),
            _ => Ok(()),
        }
    }
}

fn message(id: &str, text: &str) -> SessionEvent {
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
            text: text.to_owned(),
            sender_is_owner: true,
            attachments: Vec::new(),
        }),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reply_is_recorded_and_a_failing_one_is_retried() {
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("First answer.")),
    );
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Second answer.")),
    );
    let config = ClawlessConfig::from_yaml(
        &fixture.config_yaml(&model.base_url(), "http://127.0.0.1:9/unused"),
        "test",
    )
    .expect("test fixture");
    let stores = Arc::new(StoreFactory::new(|| unreachable!("no S3 in this test")));
    let skills = Arc::new(SkillsService::new(config.clone(), &stores).expect("test fixture"));
    let db = SqliteDb::open(fixture.path().join("sessions.db")).expect("test fixture");
    let sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
    // The first reply is refused for good; the second fails once, then goes through.
    let outbox = Arc::new(ScriptedOutbox {
        script: Mutex::new(VecDeque::from(["rejected", "failed"])),
        attempts: Mutex::default(),
    });
    let turns = TurnService::new(TurnDeps {
        skills,
        stores,
        sessions: Arc::clone(&sessions),
        model: clawless_llm::build_model(&config.models, &|_| None).expect("test fixture"),
        outbox: outbox.clone(),
        web: None,
        clock: Arc::new(SystemClock),
        eligibility: EligibilityContext::empty(),
        home_dirs: Vec::new(),
        host: HostFacts::default(),
        nodes: None,
    });

    // A refused reply ends its turn: the event is handled, not given back to the queue.
    turns.handle(&message("m-1", "Hello?")).await.expect("turn");
    // The next message is answered, its reply delivered on the second attempt.
    turns
        .handle(&message("m-2", "Still there?"))
        .await
        .expect("turn");

    assert_eq!(
        *outbox.attempts.lock().expect("lock"),
        ["First answer.", "Second answer.", "Second answer."]
    );
    let key = SessionKey::parse("agent:main:main").expect("key");
    let stored = sessions.load(&key).await.expect("load").expect("stored");
    let state = SessionState::from_stored(key, &stored).expect("state");
    let outcomes: Vec<Option<String>> = state
        .steps
        .iter()
        .filter_map(|step| match &step.body {
            StepBody::ReplySent { rejected, .. } => Some(rejected.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            Some("403 Forbidden: bot was blocked by the user".to_owned()),
            None
        ]
    );
}
