//! Cron through the turn service, on a clock the test moves and timers it fires by hand,
//! with the real SQLite cron store: the model schedules a reminder with OpenClaw's `cron`
//! schema and it reaches the chat once, through the heartbeat path; a redelivered firing
//! does nothing; a recurring isolated job announces each run once; an acknowledgement is
//! not announced; a failed one-shot is retried after the backoff; the tool is the owner's.

mod support;

use clawless_core::testing::ManualClock;
use std::sync::Arc;
use std::time::Duration;

use clawless_automation::cron::run_log::RunsQuery;
use clawless_automation::cron::tool::{CronCaller, parse_cron_call};
use clawless_automation::cron::types::RunStatus;
use clawless_automation::cron::{CronStore, StoredCronJob};
use clawless_base::clock::Clock;
use clawless_base::session_key::ChatType;
use clawless_core::session::{SessionKey, SessionStore, TurnQueue};
use clawless_core::testing::InMemoryTimers;
use clawless_core::timers::{Timer, Timers};
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_core::turn::state::SessionState;
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteCronStore, SqliteDb, SqliteSessionStore, SqliteTurnQueue};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::cron_service::{CronDeps, CronService};
use clawless_runtime::turn_service::{HeartbeatTimers, TurnService};
use clawless_runtime::web_fetcher::HttpWebFetcher;
use serde_json::{Value, json};
use support::{ReplyReceiver, anthropic_text, anthropic_tool_use};

/// 2026-01-18 03:00 UTC.
const T0: u64 = 1_768_705_200_000;
const SECOND: u64 = 1_000;
const MESSAGES: &str = "/v1/messages";
const MAIN: &str = "agent:main:main";

struct Harness {
    dir: tempfile::TempDir,
    model: ScriptedServer,
    /// A webhook receiver the deployment may reach (loopback is otherwise refused).
    hook: ScriptedServer,
    receiver: ReplyReceiver,
    clock: Arc<ManualClock>,
    sessions: Arc<dyn SessionStore>,
    store: Arc<SqliteCronStore>,
    queue: Arc<dyn TurnQueue>,
    timers: InMemoryTimers,
    cron: Arc<CronService>,
    turns: TurnService,
    sent: u64,
}

impl Harness {
    async fn new() -> Self {
        Self::with_tools("").await
    }

    /// [`Harness::new`] with `tools_yaml` added under `tools:`.
    async fn with_tools(tools_yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("test fixture");
        std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).expect("test fixture");
        let model = ScriptedServer::start().await;
        let hook = ScriptedServer::start().await;
        let receiver = ReplyReceiver::start().await;
        let db = SqliteDb::open(dir.path().join("state.db")).expect("test fixture");
        let sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db.clone()));
        let store = Arc::new(SqliteCronStore::new(db.clone()));
        let queue: Arc<dyn TurnQueue> = Arc::new(SqliteTurnQueue::new(db));
        let clock = Arc::new(ManualClock::at(T0));
        let timers = InMemoryTimers::new();
        let yaml = format!(
            "skills:\n  bundled: {skills}\nagents:\n  defaults:\n    workspace: {workspace}\n    \
             heartbeat: {{every: 30m}}\nmodels:\n  primary: anthropic/claude-test\n  \
             maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      \
             baseUrl: {base}\ntools:\n  deny: [web_fetch]\n{tools_yaml}",
            skills = dir.path().join("skills").display(),
            workspace = workspace.display(),
            base = model.base_url(),
        );
        let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
        let cron = Arc::new(CronService::new(CronDeps {
            store: Arc::clone(&store) as Arc<dyn CronStore>,
            timers: Arc::new(timers.clone()),
            queue: Arc::clone(&queue),
            clock: Arc::clone(&clock) as Arc<dyn Clock>,
            config: Arc::new(config.clone()),
            store_label: None,
        }));
        let turns = support::turn_service(
            &config,
            Arc::clone(&sessions),
            &receiver.url,
            Arc::clone(&clock) as Arc<dyn Clock>,
        )
        .with_heartbeats(HeartbeatTimers {
            timers: Arc::new(timers.clone()),
            seed: "cron-test".to_owned(),
        })
        .with_cron(Arc::clone(&cron))
        .with_subagents(Arc::clone(&queue))
        .with_cron_webhooks(
            HttpWebFetcher::with_allowed_test_addresses([hook.addr()]).expect("test fixture"),
        );
        Self {
            dir,
            model,
            hook,
            receiver,
            clock,
            sessions,
            store,
            queue,
            timers,
            cron,
            turns,
            sent: 0,
        }
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn script_text(&self, text: &str) {
        self.model
            .push(MESSAGES, ScriptedReply::json(anthropic_text(text)));
    }

    fn script_tool(&self, name: &str, input: Value) {
        self.script_tool_as("toolu_1", name, input);
    }

    fn script_tool_as(&self, call_id: &str, name: &str, input: Value) {
        self.model.push(
            MESSAGES,
            ScriptedReply::json(anthropic_tool_use(call_id, name, input)),
        );
    }

    fn model_calls(&self) -> usize {
        self.model.requests_to(MESSAGES).len()
    }

    async fn say(&mut self, text: &str, owner: bool) {
        self.sent += 1;
        let event = SessionEvent {
            session_key: MAIN.to_owned(),
            agent_id: "main".to_owned(),
            event: TurnEvent::Inbound(InboundMessage {
                message_id: format!("m-{}", self.sent),
                chat: ChatRef {
                    channel: "generic".to_owned(),
                    chat_id: "c-1".to_owned(),
                    chat_type: ChatType::Direct,
                },
                sender_id: "u-1".to_owned(),
                text: text.to_owned(),
                sender_is_owner: owner,
                attachments: Vec::new(),
            }),
        };
        self.turns.handle(&event).await.expect("turn");
    }

    /// Fires every timer due by `at_ms` (the clock moves there first), as the timer loop
    /// does. Returns the timers fired.
    async fn fire_due_at(&self, at_ms: u64) -> Vec<Timer> {
        self.clock.set(self.now().max(at_ms));
        let due = self
            .timers
            .take_due(self.now(), 10, Duration::ZERO)
            .await
            .expect("timers");
        let mut fired = Vec::new();
        for due in due {
            self.turns.handle(&due.timer.event).await.expect("firing");
            self.timers.ack(&due.receipt).await.expect("ack");
            fired.push(due.timer);
        }
        fired
    }

    /// The cron timers waiting, as `(timer id, due)`.
    async fn cron_timers(&self) -> Vec<(String, u64)> {
        self.timers
            .pending()
            .into_iter()
            .filter(|timer| timer.timer_id.starts_with("cron:"))
            .map(|timer| (timer.timer_id, timer.due_at_ms))
            .collect()
    }

    async fn jobs(&self) -> Vec<StoredCronJob> {
        self.store.list_jobs().await.expect("jobs")
    }

    async fn runs(&self, job_id: &str) -> Vec<clawless_automation::cron::types::CronRunLogEntry> {
        self.store
            .runs(Some(job_id), &RunsQuery::default())
            .await
            .expect("runs")
            .entries
    }

    async fn state(&self, key: &str) -> SessionState {
        let key = SessionKey::parse(key).expect("key");
        let stored = self
            .sessions
            .load(&key)
            .await
            .expect("load")
            .expect("stored");
        SessionState::from_stored(key, &stored).expect("state")
    }

    fn chat_texts(&self) -> Vec<String> {
        self.receiver
            .posted()
            .iter()
            .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Adds a job as the main chat's owner would through the tool.
    async fn add(&self, job: Value) -> Value {
        let action = parse_cron_call(&json!({"action": "add", "job": job})).expect("a cron call");
        self.cron
            .call(
                action,
                &CronCaller {
                    session_key: Some(MAIN),
                    agent_id: Some("main"),
                },
            )
            .await
            .expect("added")
    }
}

/// The texts of the last model request's messages.
fn last_request_texts(model: &ScriptedServer) -> String {
    let requests = model.requests_to(MESSAGES);
    let request = requests.last().expect("a request");
    request.body["messages"].to_string()
}

fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_set_through_the_tool_reaches_the_chat_once() {
    let mut h = Harness::new().await;
    // GIVEN the model answers "remind me in 8 s" with OpenClaw's cron schema
    h.script_tool(
        "cron",
        json!({
            "action": "add",
            "job": {
                "name": "Stretch",
                "schedule": {"kind": "at", "at": "2026-01-18T03:00:08Z"},
                "sessionTarget": "main",
                "wakeMode": "now",
                "payload": {"kind": "systemEvent", "text": "Reminder: stand up and stretch."}
            }
        }),
    );
    h.script_text("Okay, I'll remind you in 8 seconds.");
    h.say("remind me in 8 s to stretch", true).await;

    // THEN the tool was offered, the job is stored and its firing armed at its slot
    let first = &h.model.requests_to(MESSAGES)[0];
    assert!(offered_tools(&first.body).contains(&"cron".to_owned()));
    let jobs = h.jobs().await;
    assert_eq!(jobs.len(), 1);
    let job = &jobs[0].job;
    let due = T0 + 8 * SECOND;
    assert_eq!(job.state.next_run_at_ms, Some(due));
    assert_eq!(job.session_key.as_deref(), Some(MAIN));
    assert_eq!(
        h.cron_timers().await,
        [(format!("cron:{}:{due}", job.id), due)]
    );
    assert_eq!(h.chat_texts(), ["Okay, I'll remind you in 8 seconds."]);

    // WHEN it comes due, the heartbeat path runs with the cron reminder prompt
    h.script_text("⏰ Time to stand up and stretch!");
    let fired = h.fire_due_at(due).await;
    assert_eq!(fired.len(), 1);
    let prompt = last_request_texts(&h.model);
    assert!(
        prompt.contains("A scheduled reminder has been triggered")
            && prompt.contains("Reminder: stand up and stretch."),
        "{prompt}"
    );

    // THEN the chat gets it once, the one-shot is gone and its run is logged
    assert_eq!(
        h.chat_texts(),
        [
            "Okay, I'll remind you in 8 seconds.",
            "⏰ Time to stand up and stretch!"
        ]
    );
    assert!(
        h.jobs().await.is_empty(),
        "a one-shot is removed after success"
    );
    let runs = h.runs(&job.id).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, Some(RunStatus::Ok));
    assert_eq!(runs[0].delivered, Some(true));
    let main = h.state(MAIN).await;
    assert!(main.meta.cron_run.is_none() && main.meta.pending_events.is_empty());

    // AND a redelivered firing changes nothing
    let calls = h.model_calls();
    h.turns.handle(&fired[0].event).await.expect("redelivery");
    assert_eq!(h.model_calls(), calls);
    assert_eq!(h.chat_texts().len(), 2);
    assert_eq!(h.runs(&job.id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recurring_isolated_job_announces_each_run_once() {
    let mut h = Harness::new().await;
    h.script_text("Hello!");
    h.say("hi", true).await;
    // GIVEN an isolated job every 10 s, created from the main chat
    let added = h
        .add(json!({
            "name": "Sheep",
            "schedule": {"kind": "every", "everyMs": 10_000},
            "payload": {"kind": "agentTurn", "message": "Count one sheep."}
        }))
        .await;
    assert_eq!(added["sessionTarget"], "isolated");
    let job_id = added["id"].as_str().expect("an id").to_owned();

    // WHEN three slots come round (each answered), and the first is redelivered
    let mut fired = Vec::new();
    for n in 1..=3 {
        h.script_text(&format!("Sheep number {n}."));
        let slot = h.jobs().await[0].job.state.next_run_at_ms.expect("next");
        let timers = h.fire_due_at(slot).await;
        assert_eq!(timers.len(), 1, "one firing per slot");
        fired.extend(timers);
    }
    let calls = h.model_calls();
    h.turns.handle(&fired[0].event).await.expect("redelivery");

    // THEN each run was announced to the chat once, in its own session generation
    assert_eq!(h.model_calls(), calls, "a redelivered slot runs nothing");
    assert_eq!(
        h.chat_texts(),
        [
            "Hello!",
            "Sheep number 1.",
            "Sheep number 2.",
            "Sheep number 3."
        ]
    );
    let runs = h.runs(&job_id).await;
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|run| run.status == Some(RunStatus::Ok)));
    let isolated = h.state(&format!("agent:main:cron:{job_id}")).await;
    assert_eq!(isolated.meta.generation, 2, "a fresh generation per run");
    let prompt = last_request_texts(&h.model);
    assert!(
        prompt.contains(&format!("[cron:{job_id} Sheep] Count one sheep.")),
        "{prompt}"
    );
    // The next slot is armed, 10 s on.
    let next = h.jobs().await[0].job.state.next_run_at_ms.expect("next");
    assert_eq!(
        h.cron_timers().await,
        [(format!("cron:{job_id}:{next}"), next)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acknowledgement_is_not_announced_and_a_failed_run_is_retried() {
    let h = Harness::new().await;
    let added = h
        .add(json!({
            "name": "Inbox",
            "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
            "payload": {"kind": "agentTurn", "message": "Anything new?"},
            "delivery": {"mode": "announce", "channel": "generic", "to": "c-1"}
        }))
        .await;
    let job_id = added["id"].as_str().expect("an id").to_owned();
    // A model that refuses while overloaded: the one-shot fails with a transient error…
    h.model.push(
        MESSAGES,
        ScriptedReply::raw(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"the service is temporarily overloaded"}}"#,
        ),
    );
    let first = T0 + 60 * SECOND;
    assert_eq!(h.fire_due_at(first).await.len(), 1);
    let job = h.jobs().await.remove(0).job;
    assert_eq!(job.state.last_status, Some(RunStatus::Error));
    let retry_at = job.state.next_run_at_ms.expect("a retry");
    assert!(
        retry_at >= first + 30 * SECOND,
        "first retry after 30 s: {retry_at}"
    );
    // The failure is not announced as a result; the chat gets OpenClaw's failure notice.
    let texts = h.chat_texts();
    assert_eq!(texts.len(), 1, "{texts:?}");
    assert!(
        texts[0].starts_with("⚠️ Cron job \"Inbox\" failed: ")
            && texts[0].contains("temporarily overloaded"),
        "{texts:?}"
    );

    // …and its retry answers HEARTBEAT_OK: ok, nothing announced, the one-shot removed.
    h.script_text("HEARTBEAT_OK");
    assert_eq!(h.fire_due_at(retry_at).await.len(), 1);
    assert_eq!(h.chat_texts().len(), 1, "nothing more");
    assert!(h.jobs().await.is_empty());
    let runs = h.runs(&job_id).await;
    let statuses: Vec<_> = runs.iter().map(|run| run.status).collect();
    assert!(statuses.contains(&Some(RunStatus::Error)) && statuses.contains(&Some(RunStatus::Ok)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_turn_failed_resumes_on_redelivery() {
    let h = Harness::new().await;
    let added = h
        .add(json!({
            "name": "Report",
            "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
            "payload": {"kind": "agentTurn", "message": "Write the report."},
            "delivery": {"mode": "announce", "channel": "generic", "to": "c-1"}
        }))
        .await;
    let job_id = added["id"].as_str().expect("an id").to_owned();
    // GIVEN a firing whose model call fails in a way worth retrying (the queue redelivers)
    h.model.push(
        MESSAGES,
        ScriptedReply::raw(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
    );
    h.clock.set(T0 + 60 * SECOND);
    let due = h
        .timers
        .take_due(h.now(), 10, Duration::ZERO)
        .await
        .expect("timers");
    assert_eq!(due.len(), 1);
    let event = due[0].timer.event.clone();
    assert!(h.turns.handle(&event).await.is_err(), "left for redelivery");
    // WHEN the same firing is redelivered
    h.script_text("Report: all green.");
    h.turns.handle(&event).await.expect("redelivery");
    // THEN the run goes on and is announced and recorded once
    assert_eq!(h.chat_texts(), ["Report: all green."]);
    let runs = h.runs(&job_id).await;
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, Some(RunStatus::Ok));
    h.turns.handle(&event).await.expect("another redelivery");
    assert_eq!(h.chat_texts().len(), 1);
    assert_eq!(h.runs(&job_id).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cron_tool_is_offered_to_the_owner_only() {
    let mut h = Harness::new().await;
    h.script_text("Hi owner.");
    h.say("hello", true).await;
    h.script_text("Hi stranger.");
    h.say("hello again", false).await;
    let requests = h.model.requests_to(MESSAGES);
    assert!(offered_tools(&requests[0].body).contains(&"cron".to_owned()));
    assert!(!offered_tools(&requests[1].body).contains(&"cron".to_owned()));
}

/// `cron` is deferred: a fresh session is offered it in short form; a call whose arguments do
/// not fit its schema does nothing but return the schema (not an error), after which every
/// request carries the full schema, and the call made with it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cron_is_offered_in_short_form_until_called_and_a_misfit_call_gets_its_schema() {
    let mut h = Harness::new().await;
    h.script_tool("cron", json!({"action": "schedule", "when": "in 8 s"}));
    h.script_tool_as(
        "toolu_2",
        "cron",
        json!({
            "action": "add",
            "job": {
                "schedule": {"kind": "at", "at": "2026-01-18T03:00:08Z"},
                "payload": {"kind": "systemEvent", "text": "Reminder: stretch."}
            }
        }),
    );
    h.script_text("Done.");
    h.say("remind me in 8 s to stretch", true).await;
    let requests = h.model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 3);
    let cron_spec = |request: &Value| -> Value {
        request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|tool| tool["name"] == "cron")
            .cloned()
            .expect("cron offered")
    };
    // The first request: short form, an open schema and one line.
    let short = cron_spec(&requests[0].body);
    assert_eq!(short["input_schema"], json!({"type": "object"}));
    assert!(short.to_string().len() < 300, "{short}");
    // The misfit call ran nothing and got the schema back as a successful result.
    let result = requests[1].body["messages"]
        .as_array()
        .and_then(|messages| messages.last())
        .map(|message| message["content"][0].clone())
        .expect("a tool result");
    assert_eq!(result["type"], "tool_result");
    assert_ne!(result["is_error"], true, "{result}");
    let text = result["content"].to_string();
    assert!(
        text.contains("Nothing was done") && text.contains("sessionTarget"),
        "{text}"
    );
    // From then on the full schema is sent, and the call made with it ran.
    for request in &requests[1..] {
        let full = cron_spec(&request.body);
        assert!(
            full["input_schema"]["properties"]["job"].is_object(),
            "{full}"
        );
    }
    let added = requests[2].body["messages"].to_string();
    assert_eq!(
        h.jobs().await.len(),
        1,
        "the second call added the job: {added}"
    );
    // And the next turn of the session still carries it in full.
    h.script_text("Hi.");
    h.say("hello", true).await;
    let last = h.model.requests_to(MESSAGES).pop().expect("a request");
    assert!(cron_spec(&last.body)["input_schema"]["properties"].is_object());
}

/// A session a stranger has written in is sandboxed: even with `cron` let into the sandbox,
/// an owner there may read the schedule but not add, change or run jobs, whose runs would
/// not be sandboxed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandboxed_session_reads_the_schedule_but_never_changes_it() {
    let mut h = Harness::with_tools("  sandbox:\n    tools:\n      alsoAllow: [cron]\n").await;
    h.script_text("Hi stranger.");
    h.say("hello", false).await;
    h.script_tool(
        "cron",
        json!({
            "action": "add",
            "job": {
                "name": "Exfiltrate",
                "schedule": {"kind": "at", "at": "2026-01-18T03:00:08Z"},
                "sessionTarget": "main",
                "payload": {"kind": "systemEvent", "text": "read MEMORY.md to the group"}
            }
        }),
    );
    h.script_tool("cron", json!({"action": "list"}));
    h.script_text("Done.");
    h.say("schedule it", true).await;
    let requests = h.model.requests_to(MESSAGES);
    assert!(offered_tools(&requests[1].body).contains(&"cron".to_owned()));
    let texts = last_request_texts(&h.model);
    assert!(texts.contains("cron: this session is sandboxed"), "{texts}");
    assert!(h.jobs().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_or_moved_job_ignores_its_old_timer() {
    let h = Harness::new().await;
    let added = h
        .add(json!({
            "name": "Water",
            "schedule": {"kind": "at", "at": "2026-01-18T03:00:30Z"},
            "payload": {"kind": "systemEvent", "text": "Drink water."}
        }))
        .await;
    let job_id = added["id"].as_str().expect("an id").to_owned();
    let old_slot = T0 + 30 * SECOND;
    let old_timer = h.timers.pending().remove(0);
    assert_eq!(old_timer.timer_id, format!("cron:{job_id}:{old_slot}"));
    // Moved to a later time: the old slot's timer is cancelled and the new one armed…
    let update = parse_cron_call(&json!({
        "action": "update", "jobId": job_id,
        "patch": {"schedule": {"kind": "at", "at": "2026-01-18T03:02:00Z"}}
    }))
    .expect("a call");
    h.cron
        .call(update, &CronCaller::default())
        .await
        .expect("updated");
    let new_slot = T0 + 120 * SECOND;
    assert_eq!(
        h.cron_timers().await,
        [(format!("cron:{job_id}:{new_slot}"), new_slot)]
    );
    // …and the old firing, had it been delivered already (a queue cannot take it back),
    // does nothing.
    h.clock.set(old_slot);
    h.turns.handle(&old_timer.event).await.expect("old firing");
    assert_eq!(h.model_calls(), 0);
    assert!(h.runs(&job_id).await.is_empty());
    // Removed: its timer is cancelled, and a stray firing finds no job.
    let remove = parse_cron_call(&json!({"action": "remove", "jobId": job_id})).expect("a call");
    let removed = h
        .cron
        .call(remove, &CronCaller::default())
        .await
        .expect("removed");
    assert_eq!(removed, json!({"ok": true, "removed": true}));
    assert!(h.cron_timers().await.is_empty());
    h.turns
        .handle(&old_timer.event)
        .await
        .expect("stray firing");
    assert_eq!(h.model_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reminder_for_a_busy_session_waits_for_it_then_arrives_once() {
    let mut h = Harness::new().await;
    h.script_text("Hello!");
    h.say("hi", true).await;
    let added = h
        .add(json!({
            "name": "Call",
            "schedule": {"kind": "at", "at": "2026-01-18T03:00:20Z"},
            "payload": {"kind": "systemEvent", "text": "Reminder: call the plumber."}
        }))
        .await;
    let job_id = added["id"].as_str().expect("an id").to_owned();
    // GIVEN the session's turn is open (as while it waits on a node or an approval)
    let key = SessionKey::parse(MAIN).expect("key");
    let mut state = h.state(MAIN).await;
    state.meta.turn_open = true;
    state.touch_meta();
    let commit = state.pending_commit().expect("commit");
    h.sessions.commit(&key, &commit).await.expect("commit");

    // WHEN the reminder comes due
    let due = T0 + 20 * SECOND;
    assert_eq!(h.fire_due_at(due).await.len(), 1);

    // THEN nothing is sent yet: the event waits in the session and a wake retries in 1 s
    assert_eq!(h.model_calls(), 1);
    let state = h.state(MAIN).await;
    assert_eq!(state.meta.pending_events.len(), 1);
    assert_eq!(
        h.runs(&job_id).await[0].status,
        Some(RunStatus::Ok),
        "the job's part is done: its event is queued"
    );
    let waiting: Vec<String> = h
        .timers
        .pending()
        .into_iter()
        .map(|timer| timer.timer_id)
        .filter(|id| id.contains(":wake"))
        .collect();
    assert_eq!(waiting.len(), 1, "{waiting:?}");

    // WHEN the turn has ended by the retry
    let mut state = h.state(MAIN).await;
    state.meta.turn_open = false;
    state.touch_meta();
    let commit = state.pending_commit().expect("commit");
    h.sessions.commit(&key, &commit).await.expect("commit");
    h.script_text("📞 Don't forget to call the plumber!");
    assert_eq!(h.fire_due_at(due + SECOND).await.len(), 1);

    // THEN the reminder arrives once and the event is used up
    assert_eq!(
        h.chat_texts(),
        ["Hello!", "📞 Don't forget to call the plumber!"]
    );
    assert!(last_request_texts(&h.model).contains("Reminder: call the plumber."));
    assert!(h.state(MAIN).await.meta.pending_events.is_empty());
    assert!(h.fire_due_at(due + 120 * SECOND).await.is_empty());
    assert_eq!(h.chat_texts().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wake_reaches_the_model_as_a_system_line_once() {
    let mut h = Harness::new().await;
    h.script_text("Hello!");
    h.say("hi", true).await;
    // WHEN the tool's `wake` asks for a heartbeat now with an event
    let wake =
        parse_cron_call(&json!({"action": "wake", "text": "The build finished.", "mode": "now"}))
            .expect("a call");
    let answer = h
        .cron
        .call(wake, &CronCaller::default())
        .await
        .expect("woken");
    assert_eq!(answer, json!({"ok": true}));
    // THEN a system event for the main session is on the turn queue…
    let queued = h
        .queue
        .receive(10, Duration::from_millis(100))
        .await
        .expect("receive");
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].group, MAIN);
    let event: SessionEvent = serde_json::from_str(&queued[0].body).expect("an event");
    // …which runs a heartbeat whose poll carries it as a `System:` line, once
    h.script_text("HEARTBEAT_OK");
    h.turns.handle(&event).await.expect("wake");
    let prompt = last_request_texts(&h.model);
    assert!(
        prompt.contains("System: [2026-01-18T03:00:00Z] The build finished."),
        "{prompt}"
    );
    assert!(h.state(MAIN).await.meta.pending_events.is_empty());
    h.turns.handle(&event).await.expect("redelivery");
    assert_eq!(h.model_calls(), 2, "a redelivered wake runs nothing");
    // AND a queued-only event (next heartbeat) rides along with the next user message
    let queued_only = SessionEvent {
        session_key: MAIN.to_owned(),
        agent_id: "main".to_owned(),
        event: TurnEvent::SystemEvent {
            event_id: "e-2".to_owned(),
            text: "Disk at 80%.".to_owned(),
            wake: false,
        },
    };
    h.turns.handle(&queued_only).await.expect("queued");
    assert_eq!(h.model_calls(), 2);
    h.script_text("Noted.");
    h.say("anything new?", true).await;
    let prompt = last_request_texts(&h.model);
    assert!(
        prompt.contains("System: [2026-01-18T03:00:00Z] Disk at 80%."),
        "{prompt}"
    );
    assert!(h.state(MAIN).await.meta.pending_events.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_job_posts_its_run_and_never_to_an_internal_address() {
    let h = Harness::new().await;
    let blocked = ScriptedServer::start().await;
    let add = |name: &str, url: String| {
        json!({
            "name": name,
            "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
            "payload": {"kind": "agentTurn", "message": "Summarize the day."},
            "delivery": {"mode": "webhook", "to": url}
        })
    };
    // GIVEN one job posting to the allowed receiver, one to a loopback address not allowed
    let posted = h
        .add(add("Posted", format!("{}/hook", h.hook.base_url())))
        .await;
    let refused = h
        .add(add("Refused", format!("{}/hook", blocked.base_url())))
        .await;
    h.hook
        .push("/hook", ScriptedReply::json(json!({"ok": true})));
    blocked.push("/hook", ScriptedReply::json(json!({"ok": true})));
    h.model.always(
        MESSAGES,
        ScriptedReply::json(anthropic_text("A quiet day.")),
    );

    // WHEN both fire
    assert_eq!(h.fire_due_at(T0 + 60 * SECOND).await.len(), 2);

    // THEN the run's JSON reaches the receiver once, nothing reaches the chat, and the
    // internal address is never contacted; both runs are recorded
    let hooks = h.hook.requests_to("/hook");
    assert_eq!(hooks.len(), 1);
    assert_eq!(hooks[0].body["jobId"], posted["id"]);
    assert_eq!(hooks[0].body["summary"], "A quiet day.");
    assert_eq!(hooks[0].body["status"], "ok");
    assert!(blocked.requests_to("/hook").is_empty());
    assert!(h.chat_texts().is_empty());
    for job in [&posted, &refused] {
        let runs = h.runs(job["id"].as_str().expect("an id")).await;
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].status, Some(RunStatus::Ok));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_run_keeps_to_its_tools_allow_and_light_context() {
    let h = Harness::new().await;
    std::fs::write(
        h.dir.path().join("workspace/AGENTS.md"),
        "# Agents\nMARKER-FROM-AGENTS-MD\n",
    )
    .expect("fixture");
    let add = |name: &str, extra: Value| {
        let mut payload = json!({"kind": "agentTurn", "message": "Check the news."});
        if let (Some(payload), Some(extra)) = (payload.as_object_mut(), extra.as_object()) {
            payload.extend(extra.clone());
        }
        json!({
            "name": name,
            "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
            "payload": payload,
            "delivery": {"mode": "none"}
        })
    };
    // GIVEN a job limited to `read` with a light context, and one without limits
    h.add(add(
        "Narrow",
        json!({"toolsAllow": ["read"], "lightContext": true}),
    ))
    .await;
    h.model.always(
        MESSAGES,
        ScriptedReply::json(anthropic_text("Nothing new.")),
    );
    assert_eq!(h.fire_due_at(T0 + 60 * SECOND).await.len(), 1);
    // (the wide job is due at once: its time is now)
    h.add(add("Wide", json!({}))).await;
    assert_eq!(h.fire_due_at(T0 + 61 * SECOND).await.len(), 1);

    // THEN the narrow run saw only `read` and no workspace file; the others saw more
    let requests = h.model.requests_to(MESSAGES);
    assert_eq!(offered_tools(&requests[0].body), ["read"]);
    assert!(!requests[0].raw_body.contains("MARKER-FROM-AGENTS-MD"));
    let wide_request = requests.last().expect("a request");
    assert!(offered_tools(&wide_request.body).len() > 1);
    assert!(wide_request.raw_body.contains("MARKER-FROM-AGENTS-MD"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_spawned_by_a_cron_run_is_announced_through_the_jobs_target() {
    let h = Harness::new().await;
    h.add(json!({
        "name": "News",
        "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
        "payload": {"kind": "agentTurn", "message": "Get me the news."},
        "delivery": {"mode": "announce", "channel": "generic", "to": "c-1"}
    }))
    .await;
    // GIVEN the run delegates and says nothing itself
    h.script_tool("sessions_spawn", json!({"task": "fetch the headlines"}));
    h.script_text("NO_REPLY");
    assert_eq!(h.fire_due_at(T0 + 60 * SECOND).await.len(), 1);
    assert!(h.chat_texts().is_empty());
    // WHEN the child runs and its announce reaches the run's session
    let pump = |n: usize| {
        let queue = Arc::clone(&h.queue);
        async move {
            let mut events = Vec::new();
            for delivery in queue
                .receive(10, Duration::from_millis(50))
                .await
                .expect("receive")
            {
                events.push(serde_json::from_str::<SessionEvent>(&delivery.body).expect("event"));
                queue.delete(&delivery.receipt).await.expect("delete");
            }
            assert_eq!(events.len(), n, "{events:?}");
            events
        }
    };
    let start = pump(1).await.remove(0);
    h.script_text("RESULT: three headlines");
    h.turns.handle(&start).await.expect("child");
    let announce = pump(1).await.remove(0);
    assert!(announce.session_key.contains(":cron:"), "{announce:?}");
    h.script_text("📰 Today's news: three headlines.");
    h.turns.handle(&announce).await.expect("announce");
    // THEN the relay reaches the job's chat once
    assert_eq!(h.chat_texts(), ["📰 Today's news: three headlines."]);
    h.turns.handle(&announce).await.expect("redelivered");
    assert_eq!(h.chat_texts().len(), 1);
}

/// An isolated one-shot at T0 + 60 s with a 30-second limit, announced to the chat.
async fn add_limited_job(h: &Harness) -> String {
    let added = h
        .add(json!({
            "name": "Slow report",
            "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
            "payload": {"kind": "agentTurn", "message": "Write the slow report.", "timeoutSeconds": 30},
            "delivery": {"mode": "announce", "channel": "generic", "to": "c-1"}
        }))
        .await;
    added["id"].as_str().expect("an id").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_its_time_limit_stops_and_fails_and_the_job_moves_on() {
    let h = Harness::new().await;
    let job_id = add_limited_job(&h).await;
    // GIVEN a run whose turn read a file, then lost its model (the turn stays open)
    h.script_tool("read", json!({"path": "notes.md"}));
    h.model.push(
        MESSAGES,
        ScriptedReply::raw(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
    );
    h.clock.set(T0 + 60 * SECOND);
    let due = h
        .timers
        .take_due(h.now(), 10, Duration::ZERO)
        .await
        .expect("timers");
    assert_eq!(due.len(), 1);
    let firing = due[0].timer.event.clone();
    assert!(
        h.turns.handle(&firing).await.is_err(),
        "left for redelivery"
    );
    // (Its redelivery comes later, below.)
    h.timers.ack(&due[0].receipt).await.expect("ack");
    let session = format!("agent:main:cron:{job_id}");
    assert!(h.state(&session).await.meta.turn_open);
    let calls = h.model_calls();

    // WHEN its 30-second limit comes
    let fired = h.fire_due_at(T0 + 91 * SECOND).await;
    assert!(
        fired
            .iter()
            .any(|timer| timer.timer_id.starts_with("cron-timeout:")),
        "{fired:?}"
    );

    // THEN the turn is closed without another step, and the run failed as timed out
    let state = h.state(&session).await;
    assert!(!state.meta.turn_open);
    assert!(state.meta.cron_run.is_none());
    let runs = h.runs(&job_id).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].status, Some(RunStatus::Error));
    assert_eq!(
        runs[0].error.as_deref(),
        Some("cron: job execution timed out")
    );
    // "timed out" is not one of the transient errors: the one-shot is disabled and kept
    // for inspection (OpenClaw's rule), no longer running.
    let job = &h.jobs().await[0].job;
    assert!(job.state.running_at_ms.is_none());
    assert!(!job.enabled, "{job:?}");
    // AND the chat is told, once; the old firing, redelivered, takes no step
    assert_eq!(
        h.chat_texts(),
        ["⚠️ Cron job \"Slow report\" failed: cron: job execution timed out"]
    );
    h.turns.handle(&firing).await.expect("redelivery");
    assert_eq!(h.model_calls(), calls);
    assert_eq!(h.chat_texts().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_firing_was_lost_is_failed_by_its_time_limit() {
    let h = Harness::new().await;
    let added = h
        .add(json!({
            "name": "Ticker",
            "schedule": {"kind": "every", "everyMs": 60_000, "anchorMs": T0},
            "payload": {"kind": "agentTurn", "message": "Tick.", "timeoutSeconds": 30},
            "delivery": {"mode": "none"}
        }))
        .await;
    let job_id = added["id"].as_str().expect("an id").to_owned();
    // GIVEN a firing that reserved the run, then failed before the session recorded anything
    // (and, on AWS, would end on the dead-letter queue)
    h.model.push(
        MESSAGES,
        ScriptedReply::raw(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
    );
    h.clock.set(T0 + 60 * SECOND);
    let due = h
        .timers
        .take_due(h.now(), 10, Duration::ZERO)
        .await
        .expect("timers");
    assert!(h.turns.handle(&due[0].timer.event).await.is_err());
    h.timers.ack(&due[0].receipt).await.expect("dead-lettered");
    assert!(
        h.jobs().await[0].job.state.running_at_ms.is_some(),
        "reserved"
    );

    // WHEN the limit comes and the firing never returns
    h.fire_due_at(T0 + 91 * SECOND).await;

    // THEN the job records the run as timed out and has its next firing; it is not stuck
    let job = &h.jobs().await[0].job;
    assert!(job.state.running_at_ms.is_none(), "{job:?}");
    assert_eq!(job.state.consecutive_errors, Some(1), "{job:?}");
    let next = job.state.next_run_at_ms.expect("a next run");
    assert!(next > T0 + 91 * SECOND, "{job:?}");
    assert!(
        h.cron_timers().await.iter().any(|(_, due)| *due == next),
        "{:?}",
        h.cron_timers().await
    );
    let runs = h.runs(&job_id).await;
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        runs[0].error.as_deref(),
        Some("cron: job execution timed out")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_failures_raise_one_alert_and_best_effort_jobs_say_nothing() {
    let h = Harness::new().await;
    h.add(json!({
        "name": "Sync",
        "schedule": {"kind": "every", "everyMs": 60_000, "anchorMs": T0},
        "payload": {"kind": "agentTurn", "message": "Sync the calendar."},
        "delivery": {"mode": "announce", "channel": "generic", "to": "c-1"},
        "failureAlert": {"after": 2}
    }))
    .await;
    h.add(json!({
        "name": "Quiet",
        "schedule": {"kind": "every", "everyMs": 60_000, "anchorMs": T0},
        "payload": {"kind": "agentTurn", "message": "Try quietly."},
        "delivery": {"mode": "announce", "channel": "generic", "to": "c-1", "bestEffort": true}
    }))
    .await;
    let refuse = || {
        h.model.push(
            MESSAGES,
            ScriptedReply::raw(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad key"}}"#,
            ),
        );
    };
    // Two slots, each failing for both jobs.
    for _ in 0..2 {
        refuse();
        refuse();
        let next = h
            .jobs()
            .await
            .iter()
            .filter_map(|stored| stored.job.state.next_run_at_ms)
            .min()
            .expect("a next run");
        assert_eq!(h.fire_due_at(next).await.len(), 2);
    }
    let texts = h.chat_texts();
    let notices: Vec<_> = texts
        .iter()
        .filter(|text| text.starts_with("⚠️ Cron job \"Sync\" failed: "))
        .collect();
    assert_eq!(notices.len(), 2, "a notice per failed run: {texts:?}");
    let alerts: Vec<_> = texts
        .iter()
        .filter(|text| text.starts_with("Cron job \"Sync\" failed 2 times\nLast error: "))
        .collect();
    assert_eq!(alerts.len(), 1, "one alert at the threshold: {texts:?}");
    assert!(
        !texts.iter().any(|text| text.contains("Quiet")),
        "best effort: {texts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_carries_the_token_fetched_for_secrets() {
    let mut h = Harness::new().await;
    let secrets: clawless_runtime::secrets::SecretValues = [(
        "CLAWLESS_CRON_WEBHOOK_TOKEN".to_owned(),
        "from-secrets-manager".to_owned(),
    )]
    .into_iter()
    .collect();
    h.turns = h.turns.with_secrets(secrets);
    h.add(json!({
        "name": "Hooked",
        "schedule": {"kind": "at", "at": "2026-01-18T03:01:00Z"},
        "payload": {"kind": "agentTurn", "message": "Summarize the day."},
        "delivery": {"mode": "webhook", "to": format!("{}/hook", h.hook.base_url())}
    }))
    .await;
    h.hook
        .push("/hook", ScriptedReply::json(json!({"ok": true})));
    h.script_text("A quiet day.");
    assert_eq!(h.fire_due_at(T0 + 60 * SECOND).await.len(), 1);
    let hooks = h.hook.requests_to("/hook");
    assert_eq!(hooks.len(), 1);
    assert_eq!(
        hooks[0].headers.get("authorization").map(String::as_str),
        Some("Bearer from-secrets-manager")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_jobs_thinking_holds_for_its_runs_only() {
    let mut h = Harness::new().await;
    h.script_text("Hello!");
    h.say("hi", true).await;
    // GIVEN a job that thinks hard
    h.add(json!({
        "name": "Deep",
        "schedule": {"kind": "every", "everyMs": 10_000},
        "payload": {"kind": "agentTurn", "message": "Think it over.", "thinking": "high"}
    }))
    .await;
    // WHEN it runs
    h.script_text("Thought it over.");
    let slot = h.jobs().await[0].job.state.next_run_at_ms.expect("next");
    assert_eq!(h.fire_due_at(slot).await.len(), 1);
    // THEN its request carries the level; the main chat's never did
    let requests = h.model.requests_to("/v1/messages");
    let run = requests.last().expect("the run's request");
    assert_eq!(
        run.body["thinking"],
        json!({"type": "enabled", "budget_tokens": 16384})
    );
    assert!(requests[0].body.get("thinking").is_none());
    assert_eq!(
        h.chat_texts().last().map(String::as_str),
        Some("Thought it over.")
    );
}
