//! The sample events in `events/` go through the code that handles them, so they cannot rot:
//! the HTTP API v2 requests are decoded by `lambda_http` (as the Lambda runtime does) and
//! answered by the real webhook, nodes and skills-bins routers, with the secrets of
//! `events/local.env` and the channels of `events/clawless.yaml`; the SQS batches decode into
//! the records and bodies the turn and timers handlers read. Every file must be covered.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsEvent;
use axum::Router;
use axum::http::StatusCode;
use clawless_base::clock::SystemClock;
use clawless_core::session::TurnQueue;
use clawless_core::testing::{InMemoryInbox, InMemoryTurnQueue};
use clawless_core::timers::Timer;
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use clawless_local::{SqliteDb, SqliteTurnQueue};
use clawless_runtime::channels::{ChannelSet, ChannelSetup};
use clawless_runtime::config::DEFAULT_AGENT_ID;
use clawless_runtime::ingress::{Ingress, webhook_router};
use clawless_runtime::local_mode::local_nodes_service;
use clawless_runtime::node_routes::{AdminToken, RegistryNodeAuth, admin_router, nodes_router};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use tower::ServiceExt;

fn events_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../events")
}

fn read(name: &str) -> String {
    std::fs::read_to_string(events_dir().join(name)).unwrap_or_else(|err| panic!("{name}: {err}"))
}

/// `events/local.env` as a map (comments and blank lines skipped).
fn local_env() -> BTreeMap<String, String> {
    read("local.env")
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let (name, value) = line.split_once('=').expect("NAME=value");
            (name.to_owned(), value.to_owned())
        })
        .collect()
}

fn sample_config() -> ClawlessConfig {
    ClawlessConfig::from_yaml(&read("clawless.yaml"), "events/clawless.yaml")
        .expect("events/clawless.yaml parses")
}

/// Decodes an HTTP API v2 event as the Lambda runtime does and answers it with `router`.
async fn answer(router: &Router, name: &str) -> (StatusCode, String) {
    let request = lambda_http::request::from_str(&read(name))
        .unwrap_or_else(|err| panic!("{name} is not an API Gateway request: {err}"));
    let request = request.map(|body| axum::body::Body::from(body.to_vec()));
    let response = router.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let body = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .expect("body");
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn sqs_event(name: &str) -> SqsEvent {
    serde_json::from_str(&read(name))
        .unwrap_or_else(|err| panic!("{name} is not an SQS event: {err}"))
}

/// The turn events of a turn-queue sample, checked the way SQS FIFO delivers them.
fn turn_events(name: &str) -> Vec<SessionEvent> {
    let event = sqs_event(name);
    assert!(!event.records.is_empty(), "{name} has no records");
    event
        .records
        .iter()
        .map(|record| {
            assert!(
                record
                    .event_source_arn
                    .as_deref()
                    .is_some_and(|arn| arn.ends_with(".fifo")),
                "{name}: the turn queue is FIFO"
            );
            let body = record.body.as_deref().expect("a body");
            let event: SessionEvent = serde_json::from_str(body)
                .unwrap_or_else(|err| panic!("{name}: not a turn event: {err}"));
            assert_eq!(
                record.attributes.get("MessageGroupId"),
                Some(&event.session_key),
                "{name}: the ordering group is the session key"
            );
            event
        })
        .collect()
}

#[tokio::test]
async fn the_webhook_samples_are_accepted_and_the_generic_one_enqueues_the_turn_sample() {
    // GIVEN the webhook router with the sample channels and secrets, over in-memory ports
    let env = local_env();
    let config = sample_config();
    let lookup = |name: &str| env.get(name).cloned();
    let channels = ChannelSet::build(&ChannelSetup {
        config: &config,
        env: &lookup,
        http: reqwest::Client::new(),
        generic_secret: None,
        generic_reply_url: None,
        generic_owners: Vec::new(),
        sent_chunks: Arc::new(InMemoryInbox::new()),
    });
    let queue = Arc::new(InMemoryTurnQueue::new());
    let router = webhook_router(Arc::new(Ingress {
        inbox: Arc::new(InMemoryInbox::new()),
        queue: queue.clone(),
        channels: channels.inbound,
        agent_id: DEFAULT_AGENT_ID.to_owned(),
        dm_scope: config.session.dm_scope,
        clock: Arc::new(SystemClock),
    }));

    // WHEN the generic sample arrives
    let (status, body) = answer(&router, "webhook-generic.json").await;
    // THEN it is accepted, and what it enqueues is exactly the turn function's sample
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let queued = queue
        .receive(10, Duration::from_millis(10))
        .await
        .expect("receive");
    assert_eq!(queued.len(), 1);
    let enqueued: SessionEvent = serde_json::from_str(&queued[0].body).expect("a turn event");
    assert_eq!(vec![enqueued], turn_events("turn-inbound.json"));
    // Direct chats share the main session, whose group stays blocked while this is in flight.
    queue.delete(&queued[0].receipt).await.expect("delete");

    // WHEN the Telegram sample arrives
    let (status, body) = answer(&router, "webhook-telegram.json").await;
    // THEN its secret token is accepted and a turn event for the Telegram chat is queued
    assert!(status.is_success(), "{status}: {body}");
    let queued = queue
        .receive(10, Duration::from_millis(10))
        .await
        .expect("receive");
    assert_eq!(queued.len(), 1);
    let event: SessionEvent = serde_json::from_str(&queued[0].body).expect("a turn event");
    match event.event {
        TurnEvent::Inbound(message) => {
            assert_eq!(message.chat.channel, "telegram");
            assert_eq!(message.text, "What's the weather in Paris?");
        }
        other => panic!("not an inbound message: {other:?}"),
    }
}

#[tokio::test]
async fn the_nodes_and_skills_bins_samples_reach_their_routes() {
    // GIVEN the nodes routers (operator routes with the sample admin token) and skills-bins,
    // over the SQLite adapters
    let env = local_env();
    let dir = tempfile::tempdir().expect("temp dir");
    let db = SqliteDb::open(dir.path().join("state.db")).expect("sqlite");
    let turns: Arc<dyn TurnQueue> = Arc::new(SqliteTurnQueue::new(db.clone()));
    let nodes = Arc::new(local_nodes_service(
        &db,
        turns,
        Arc::new(SystemClock),
        Default::default(),
    ));
    let token = AdminToken::known("CLAWLESS_ADMIN_TOKEN", &env["CLAWLESS_ADMIN_TOKEN"])
        .expect("the sample token is long enough");
    let nodes_api =
        nodes_router(Arc::clone(&nodes), false).merge(admin_router(Arc::clone(&nodes), token));
    let stores = Arc::new(StoreFactory::new(|| unreachable!("no S3 here")));
    let skills = Arc::new(SkillsService::new(ClawlessConfig::default(), &stores).expect("skills"));
    let skills_api = clawless_runtime::routes::skills_bins_router(
        skills,
        Arc::new(RegistryNodeAuth::new(Arc::clone(&nodes))),
    );

    // THEN the operator samples carry a token the routes take
    let (status, body) = answer(&nodes_api, "nodes-admin-list.json").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = answer(&nodes_api, "nodes-admin-pairing-code.json").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // AND the pairing sample parses (its code was never issued here, so it is refused as
    // unauthorised: not a malformed body, not an unknown route)
    let (status, body) = answer(&nodes_api, "nodes-pair.json").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // AND the skills-bins sample reaches node authentication (that node is not paired here)
    let (status, body) = answer(&skills_api, "skills-bins.json").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
}

#[test]
fn the_turn_samples_are_turn_events_of_the_kinds_they_are_named_for() {
    let kinds = |name: &str| {
        turn_events(name)
            .into_iter()
            .map(|event| match event.event {
                TurnEvent::Inbound(_) => "inbound",
                TurnEvent::ToolResult { .. } => "toolResult",
                TurnEvent::Continue { .. } => "continue",
                _ => "other",
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(kinds("turn-inbound.json"), ["inbound"]);
    assert_eq!(kinds("turn-tool-result.json"), ["toolResult"]);
    assert_eq!(kinds("turn-continue.json"), ["continue"]);
}

#[test]
fn the_timer_samples_are_timers_for_the_turn_queue() {
    for (name, expected) in [
        ("timers-approval-timeout.json", "approvalTimeout"),
        ("timers-job-deadline.json", "toolTimeout"),
    ] {
        let event = sqs_event(name);
        assert_eq!(event.records.len(), 1, "{name}");
        let body = event.records[0].body.as_deref().expect("a body");
        let timer: Timer =
            serde_json::from_str(body).unwrap_or_else(|err| panic!("{name}: not a timer: {err}"));
        let kind = serde_json::to_value(&timer.event.event).expect("serialises")["kind"].clone();
        assert_eq!(kind, expected, "{name}");
    }
}

#[test]
fn every_sample_event_is_checked_by_a_test_here() {
    let checked = [
        "webhook-generic.json",
        "webhook-telegram.json",
        "nodes-pair.json",
        "nodes-admin-list.json",
        "nodes-admin-pairing-code.json",
        "skills-bins.json",
        "turn-inbound.json",
        "turn-tool-result.json",
        "turn-continue.json",
        "timers-approval-timeout.json",
        "timers-job-deadline.json",
    ];
    let mut present: Vec<String> = std::fs::read_dir(events_dir())
        .expect("events/")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".json"))
        .collect();
    present.sort();
    let mut checked: Vec<String> = checked.iter().map(|name| (*name).to_owned()).collect();
    checked.sort();
    assert_eq!(present, checked);
}
