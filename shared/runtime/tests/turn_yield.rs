//! A turn that would run past its invocation's deadline stops before its next model call,
//! queues a `continue` event for its session, and a later invocation finishes it: one model
//! call per step, the tool run once, one reply. With time to spare it never stops.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clawless_base::clock::SystemClock;
use clawless_base::session_key::ChatType;
use clawless_channels::{ChannelOutbox, HttpReplySender};
use clawless_core::session::{SessionStore, TurnQueue};
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore, SqliteTurnQueue};
use clawless_runtime::turn_service::{Deadline, HostFacts, TurnDeps, TurnService, YieldPolicy};
use clawless_runtime::turn_worker::{Processed, process_event_until};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use clawless_skills::eligibility::EligibilityContext;
use serde_json::json;
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";
/// The yield threshold of these tests: far more than the test's deadline leaves.
const THRESHOLD: Duration = Duration::from_secs(60);

struct Deployment {
    _fixture: Fixture,
    model_server: ScriptedServer,
    receiver: ReplyReceiver,
    queue: Arc<SqliteTurnQueue>,
    turns: TurnService,
}

/// A turn service whose model asks for one `read` and then answers, with its continuations
/// going to a SQLite turn queue.
async fn deployment() -> Deployment {
    let fixture = Fixture::new();
    let model_server = ScriptedServer::start().await;
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_1",
            "read",
            json!({"path": fixture.skill_location()}),
        )),
    );
    model_server.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("It is sunny.")),
    );
    let receiver = ReplyReceiver::start().await;
    let config = ClawlessConfig::from_yaml(
        &fixture.config_yaml(&model_server.base_url(), &receiver.url),
        "test",
    )
    .expect("test fixture");
    let stores = Arc::new(StoreFactory::new(|| unreachable!("no S3 in this test")));
    let skills = Arc::new(SkillsService::new(config.clone(), &stores).expect("test fixture"));
    let db = SqliteDb::open(fixture.path().join("state.db")).expect("test fixture");
    let sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db.clone()));
    let queue = Arc::new(SqliteTurnQueue::new(db));
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
        sessions,
        model: clawless_llm::build_model(&config.models, &|_| None).expect("test fixture"),
        outbox: Arc::new(outbox),
        web: None,
        clock: Arc::new(SystemClock),
        eligibility: EligibilityContext::empty(),
        home_dirs: Vec::new(),
        host: HostFacts::default(),
        nodes: None,
    })
    .with_yield(YieldPolicy {
        threshold: THRESHOLD,
        queue: queue.clone(),
    });
    Deployment {
        _fixture: fixture,
        model_server,
        receiver,
        queue,
        turns,
    }
}

fn inbound() -> String {
    serde_json::to_string(&SessionEvent {
        session_key: "agent:main:main".to_owned(),
        agent_id: "main".to_owned(),
        event: TurnEvent::Inbound(InboundMessage {
            message_id: "m-1".to_owned(),
            chat: ChatRef {
                channel: "generic".to_owned(),
                chat_id: "c-1".to_owned(),
                chat_type: ChatType::Direct,
            },
            sender_id: "u-1".to_owned(),
            text: "Weather?".to_owned(),
            sender_is_owner: true,
            attachments: Vec::new(),
        }),
    })
    .expect("test fixture")
}

fn deadline_in(left: Duration) -> Deadline {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("test fixture");
    Deadline::at_ms(u64::try_from((now + left).as_millis()).expect("test fixture"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_short_of_time_yields_and_its_continuation_finishes_it_with_one_reply() {
    // GIVEN a deployment whose yield threshold (60 s) is more than the invocation has left
    let deployment = deployment().await;
    let deadline = deadline_in(Duration::from_secs(5));

    // WHEN the message is processed within that deadline
    let first = process_event_until(&deployment.turns, &inbound(), Some(&deadline)).await;

    // THEN the first model call is still made (an invocation always advances), the tool runs,
    // and the turn stops before the second call, acknowledged, with no reply yet
    assert_eq!(first, Processed::Done);
    assert_eq!(deployment.model_server.requests_to(MESSAGES).len(), 1);
    assert_eq!(deadline.model_calls(), 1);
    assert_eq!(deployment.turns.tools_run(), 1);
    assert!(deployment.receiver.posted().is_empty());
    // AND the continuation for the session is on the turn queue
    let queued = deployment
        .queue
        .receive(10, Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(queued.len(), 1, "{queued:?}");
    assert_eq!(queued[0].group, "agent:main:main");
    let continuation: SessionEvent = serde_json::from_str(&queued[0].body).unwrap();
    assert!(
        matches!(continuation.event, TurnEvent::Continue { .. }),
        "{continuation:?}"
    );

    // WHEN a fresh invocation with time to spare processes the continuation
    let fresh = deadline_in(Duration::from_secs(600));
    let second = process_event_until(&deployment.turns, &queued[0].body, Some(&fresh)).await;
    deployment.queue.delete(&queued[0].receipt).await.unwrap();

    // THEN the turn finishes: the second model call, the tool not run again, one reply
    assert_eq!(second, Processed::Done);
    assert_eq!(deployment.model_server.requests_to(MESSAGES).len(), 2);
    assert_eq!(deployment.turns.tools_run(), 1);
    let posted = deployment.receiver.posted();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].body["text"], "It is sunny.");
    // AND nothing more is queued
    let rest = deployment
        .queue
        .receive(10, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(rest.is_empty(), "{rest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_with_time_to_spare_never_yields() {
    // GIVEN the same deployment and a deadline well beyond the threshold
    let deployment = deployment().await;
    let deadline = deadline_in(Duration::from_secs(600));

    // WHEN the message is processed
    let outcome = process_event_until(&deployment.turns, &inbound(), Some(&deadline)).await;

    // THEN the turn completes in this invocation and queues nothing
    assert_eq!(outcome, Processed::Done);
    assert_eq!(deployment.model_server.requests_to(MESSAGES).len(), 2);
    assert_eq!(deployment.receiver.posted().len(), 1);
    let queued = deployment
        .queue
        .receive(10, Duration::from_millis(100))
        .await
        .unwrap();
    assert!(queued.is_empty(), "{queued:?}");
}
