//! An exec in a cron run that the node says needs approval is denied with OpenClaw's
//! headless message: a scheduled run has nobody to ask, so it never waits on a person. The
//! model sees the denial as the call's result and the run finishes.

mod support;

use clawless_core::testing::ManualClock;
use std::sync::Arc;
use std::time::Duration;

use clawless_automation::cron::CronStore;
use clawless_automation::cron::run::HEADLESS_EXEC_DENIED;
use clawless_automation::cron::run_log::RunsQuery;
use clawless_automation::cron::tool::{CronCaller, parse_cron_call};
use clawless_automation::cron::types::RunStatus;
use clawless_base::clock::Clock;
use clawless_channels::{ChannelOutbox, HttpReplySender};
use clawless_core::nodes::NodeFacts;
use clawless_core::nodes::testing::{InMemoryExecJobs, InMemoryExecQueue, InMemoryNodeRegistry};
use clawless_core::testing::InMemoryTimers;
use clawless_core::testing::InMemoryTurnQueue;
use clawless_core::timers::Timers;
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteCronStore, SqliteDb, SqliteSessionStore};
use clawless_runtime::cron_service::{CronDeps, CronService};
use clawless_runtime::nodes_service::{NodesDeps, NodesService, PairRequest};
use clawless_runtime::turn_service::{HostFacts, TurnDeps, TurnService};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use clawless_skills::eligibility::EligibilityContext;
use serde_json::json;
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";
/// 2026-01-18 03:00 UTC.
const T0: u64 = 1_768_705_200_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_needing_approval_in_a_cron_run_is_denied_headless() {
    // GIVEN a paired node (so `exec` is offered) and an isolated job announcing to a chat
    let fixture = Fixture::new();
    let model = ScriptedServer::start().await;
    let receiver = ReplyReceiver::start().await;
    let config = ClawlessConfig::from_yaml(
        &fixture.config_yaml(&model.base_url(), &receiver.url),
        "test",
    )
    .expect("test fixture");
    let clock = Arc::new(ManualClock::at(T0));
    let stores = Arc::new(StoreFactory::new(|| unreachable!("no S3 in this test")));
    let skills = Arc::new(SkillsService::new(config.clone(), &stores).expect("test fixture"));
    let db = SqliteDb::open(fixture.path().join("state.db")).expect("test fixture");
    let timers = InMemoryTimers::new();
    let nodes = Arc::new(NodesService::new(NodesDeps {
        registry: Arc::new(InMemoryNodeRegistry::new()),
        jobs: Arc::new(InMemoryExecJobs::new()),
        queues: Arc::new(InMemoryExecQueue::new()),
        timers: Arc::new(InMemoryTimers::new()),
        turns: Arc::new(InMemoryTurnQueue::new()),
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        settings: Default::default(),
    }));
    let (code, _) = nodes.create_pairing_code().await.expect("code");
    nodes
        .pair(&PairRequest {
            code,
            facts: NodeFacts {
                platform: "linux".to_owned(),
                path: vec!["/usr/bin".to_owned()],
                skill_bins: Vec::new(),
                display_name: Some("box".to_owned()),
                exec: None,
            },
        })
        .await
        .expect("pairing");
    let store = Arc::new(SqliteCronStore::new(db.clone()));
    let cron = Arc::new(CronService::new(CronDeps {
        store: Arc::clone(&store) as Arc<dyn CronStore>,
        timers: Arc::new(timers.clone()),
        queue: Arc::new(InMemoryTurnQueue::new()),
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        config: Arc::new(config.clone()),
        store_label: None,
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
        clock: Arc::clone(&clock) as Arc<dyn Clock>,
        eligibility: EligibilityContext::empty(),
        home_dirs: Vec::new(),
        host: HostFacts::default(),
        nodes: Some(nodes),
    })
    .with_cron(Arc::clone(&cron));
    let add = parse_cron_call(&json!({
        "action": "add",
        "job": {
            "name": "Cleanup",
            "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
            "payload": {"kind": "agentTurn", "message": "Clean the temp folder."},
            "delivery": {"mode": "announce", "channel": "generic", "to": "c-1"}
        }
    }))
    .expect("a call");
    let added = cron.call(add, &CronCaller::default()).await.expect("added");
    let job_id = added["id"].as_str().expect("an id").to_owned();

    // WHEN it fires and the model runs a command on the node
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_tool_use(
            "toolu_rm",
            "exec",
            json!({"command": "rm -rf /tmp/scratch"}),
        )),
    );
    clock.set(T0 + 60_000);
    let due = timers
        .take_due(T0 + 60_000, 10, Duration::ZERO)
        .await
        .expect("timers");
    assert_eq!(due.len(), 1);
    let fired = due[0].timer.event.clone();
    let report = turns.handle(&fired).await.expect("firing");
    assert!(report.waiting, "the call went to the node: {report:?}");

    // AND the node says the command needs a person's approval
    model.push(
        MESSAGES,
        ScriptedReply::json(anthropic_text("I could not clean up: approval needed.")),
    );
    let approval = SessionEvent {
        session_key: fired.session_key.clone(),
        agent_id: fired.agent_id.clone(),
        event: TurnEvent::ApprovalNeeded {
            call_id: "toolu_rm".to_owned(),
            text: "Approve `rm -rf /tmp/scratch`? Reply /approve …".to_owned(),
        },
    };
    turns.handle(&approval).await.expect("approval needed");

    // THEN no approval request reaches the chat: the call is denied headless, the model
    // sees why, and the run ends with its answer announced
    let requests = model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].raw_body.contains(HEADLESS_EXEC_DENIED),
        "{}",
        requests[1].raw_body
    );
    let texts: Vec<String> = receiver
        .posted()
        .iter()
        .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(texts, ["I could not clean up: approval needed."]);
    let runs = store
        .runs(Some(&job_id), &RunsQuery::default())
        .await
        .expect("runs")
        .entries;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, Some(RunStatus::Ok));
}
