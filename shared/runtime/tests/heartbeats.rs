//! Heartbeats through the turn service, on a clock the test moves and timers it fires by
//! hand: an effectively empty `HEARTBEAT.md` makes no model call; `HEARTBEAT_OK` (with or
//! without a short remainder) never reaches the chat; an alert reaches it once and its
//! repeat within 24 hours does not; a redelivered firing of a slot runs once; a busy session
//! retries the same slot without advancing the schedule; a user's message queued with a
//! heartbeat is answered either way round; `isolatedSession` keeps heartbeats out of the
//! conversation but still alerts its chat; a changed `every` ends the old chain of timers.

mod support;

use clawless_core::testing::ManualClock;
use std::sync::Arc;
use std::time::Duration;

use clawless_automation::heartbeat::HeartbeatState;
use clawless_base::clock::Clock;
use clawless_base::session_key::ChatType;
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::testing::InMemoryTimers;
use clawless_core::timers::{Timer, Timers};
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_core::turn::state::{SessionState, StepBody};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::turn_service::{HeartbeatTimers, TurnService};
use serde_json::Value;
use support::{ReplyReceiver, anthropic_text};

/// 2026-01-18 03:00 UTC.
const T0: u64 = 1_768_705_200_000;
const MINUTE: u64 = 60_000;
const HOUR: u64 = 60 * MINUTE;
const MESSAGES: &str = "/v1/messages";
const MAIN: &str = "agent:main:main";

struct Harness {
    dir: tempfile::TempDir,
    model: ScriptedServer,
    receiver: ReplyReceiver,
    clock: Arc<ManualClock>,
    sessions: Arc<dyn SessionStore>,
    timers: InMemoryTimers,
    turns: TurnService,
    sent: u64,
}

impl Harness {
    /// A deployment whose heartbeats (`heartbeat_yaml`, under `agents.defaults.heartbeat`)
    /// read `heartbeat_md` (no file when `None`).
    async fn new(heartbeat_yaml: &str, heartbeat_md: Option<&str>) -> Self {
        let dir = tempfile::tempdir().expect("test fixture");
        std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).expect("test fixture");
        if let Some(text) = heartbeat_md {
            std::fs::write(workspace.join("HEARTBEAT.md"), text).expect("test fixture");
        }
        let model = ScriptedServer::start().await;
        let receiver = ReplyReceiver::start().await;
        let db = SqliteDb::open(dir.path().join("sessions.db")).expect("test fixture");
        let sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
        let clock = Arc::new(ManualClock::at(T0));
        let timers = InMemoryTimers::new();
        let turns = build_turns(
            dir.path(),
            &model,
            &receiver,
            &sessions,
            &clock,
            &timers,
            heartbeat_yaml,
        );
        Self {
            dir,
            model,
            receiver,
            clock,
            sessions,
            timers,
            turns,
            sent: 0,
        }
    }

    /// The same deployment restarted with other heartbeat settings.
    fn reconfigure(&mut self, heartbeat_yaml: &str) {
        self.turns = build_turns(
            self.dir.path(),
            &self.model,
            &self.receiver,
            &self.sessions,
            &self.clock,
            &self.timers,
            heartbeat_yaml,
        );
    }

    fn set_time(&self, at_ms: u64) {
        self.clock.set(at_ms);
    }

    fn now(&self) -> u64 {
        self.clock.now_ms()
    }

    fn write_heartbeat_md(&self, text: &str) {
        std::fs::write(self.dir.path().join("workspace/HEARTBEAT.md"), text).expect("fixture");
    }

    /// The model answers the next call with `text`.
    fn script(&self, text: &str) {
        self.model
            .push(MESSAGES, ScriptedReply::json(anthropic_text(text)));
    }

    fn model_calls(&self) -> usize {
        self.model.requests_to(MESSAGES).len()
    }

    fn user_event(&mut self, text: &str) -> SessionEvent {
        self.sent += 1;
        SessionEvent {
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
                sender_is_owner: true,
                attachments: Vec::new(),
            }),
        }
    }

    /// A message from the user, answered with `answer`.
    async fn say(&mut self, text: &str, answer: &str) {
        self.script(answer);
        let event = self.user_event(text);
        self.turns.handle(&event).await.expect("turn");
    }

    /// Fires every timer due at `at_ms` (the clock moves there first) as the local timer loop
    /// does: the event to the turn service, then the ack. Returns the timers fired.
    async fn fire_due_at(&self, at_ms: u64) -> Vec<Timer> {
        self.set_time(self.now().max(at_ms));
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

    /// The slot the heartbeat session's schedule is armed for.
    async fn next_slot(&self, key: &str) -> u64 {
        self.heartbeat_state(key)
            .await
            .schedule
            .expect("a schedule")
            .next_due_ms
    }

    /// Fires the next heartbeat slot of `key`'s schedule; exactly one timer must fire.
    async fn fire_next(&self, key: &str) -> Timer {
        let slot = self.next_slot(key).await;
        let mut fired = self.fire_due_at(slot).await;
        assert_eq!(fired.len(), 1, "one firing per slot: {fired:?}");
        fired.remove(0)
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

    async fn heartbeat_state(&self, key: &str) -> HeartbeatState {
        self.state(key)
            .await
            .meta
            .heartbeat
            .expect("heartbeat state")
    }

    fn chat_texts(&self) -> Vec<String> {
        self.receiver
            .posted()
            .iter()
            .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

/// The turn service of the deployment in `dir` with `heartbeat_yaml` as
/// `agents.defaults.heartbeat`.
fn build_turns(
    dir: &std::path::Path, model: &ScriptedServer, receiver: &ReplyReceiver,
    sessions: &Arc<dyn SessionStore>, clock: &Arc<ManualClock>, timers: &InMemoryTimers,
    heartbeat_yaml: &str,
) -> TurnService {
    let yaml = format!(
        "skills:\n  bundled: {skills}\nagents:\n  defaults:\n    workspace: {workspace}\n    \
         heartbeat: {heartbeat_yaml}\nmodels:\n  primary: anthropic/claude-test\n  \
         maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      \
         baseUrl: {base}\ntools:\n  deny: [web_fetch]\n",
        skills = dir.join("skills").display(),
        workspace = dir.join("workspace").display(),
        base = model.base_url(),
    );
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    support::turn_service(
        &config,
        Arc::clone(sessions),
        &receiver.url,
        Arc::clone(clock) as Arc<dyn Clock>,
    )
    .with_heartbeats(HeartbeatTimers {
        timers: Arc::new(timers.clone()),
        seed: "heartbeat-test".to_owned(),
    })
}

fn seeded_heartbeat_md() -> &'static str {
    clawless_core::system_prompt::seed::SEED_FILES
        .iter()
        .find(|file| file.name == "HEARTBEAT.md")
        .expect("a seeded HEARTBEAT.md")
        .content
}

/// The statuses of the heartbeat outcomes recorded in a transcript, in order.
fn outcomes(state: &SessionState) -> Vec<String> {
    state
        .steps
        .iter()
        .filter_map(|step| match &step.body {
            StepBody::HeartbeatOutcome { status, reason } => Some(match reason {
                Some(reason) => format!("{status} ({reason})"),
                None => status.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// The texts of the messages a model request carried.
fn request_texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|message| match &message["content"] {
            Value::String(text) => text.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|block| block["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        })
        .collect()
}

const DISK_TASK: &str = "# Checks\n- Tell me when the disk is almost full.\n";
const ALERT: &str = "Disk almost full: 97% used on /.";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effectively_empty_heartbeat_file_makes_no_model_call() {
    // GIVEN the seeded HEARTBEAT.md (only headings) and a conversation
    let mut h = Harness::new("{every: 30m, target: last}", Some(seeded_heartbeat_md())).await;
    h.say("hi", "Hello!").await;
    assert_eq!(h.model_calls(), 1);

    // WHEN three heartbeat slots come round
    let mut slots = Vec::new();
    for _ in 0..3 {
        slots.push(h.fire_next(MAIN).await.due_at_ms);
    }

    // THEN no model call is made, nothing is sent, and each slot is skipped once
    assert_eq!(
        h.model_calls(),
        1,
        "no model call for an empty HEARTBEAT.md"
    );
    assert_eq!(h.chat_texts(), ["Hello!"]);
    assert_eq!(slots[1] - slots[0], 30 * MINUTE);
    assert_eq!(slots[2] - slots[1], 30 * MINUTE);
    let state = h.heartbeat_state(MAIN).await;
    let last = state.last_run.expect("a last run");
    assert_eq!(
        (last.status.as_str(), last.reason.as_deref()),
        ("skipped", Some("empty-heartbeat-file"))
    );
    assert_eq!(state.last_slot_ms, Some(slots[2]));
    assert_eq!(
        state.schedule.expect("schedule").next_due_ms,
        slots[2] + 30 * MINUTE
    );
    assert!(
        outcomes(&h.state(MAIN).await).is_empty(),
        "a skipped heartbeat leaves no step"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_never_reach_the_chat_and_an_alert_reaches_it_once_a_day() {
    // GIVEN a HEARTBEAT.md with a check, alerts to the last chat, and a conversation
    let mut h = Harness::new("{every: 30m, target: last}", Some(DISK_TASK)).await;
    h.say("hi", "Hello!").await;

    // WHEN the model acknowledges twice, then reports the same alert twice
    for reply in ["HEARTBEAT_OK", "HEARTBEAT_OK 🦞", ALERT, ALERT] {
        h.script(reply);
        h.fire_next(MAIN).await;
    }

    // THEN only the first alert reached the chat
    assert_eq!(h.model_calls(), 5);
    assert_eq!(h.chat_texts(), ["Hello!", ALERT]);
    let state = h.state(MAIN).await;
    assert_eq!(
        outcomes(&state),
        ["ok-token", "ok-token", "sent", "skipped (duplicate)"]
    );
    // AND acknowledged polls left the model's context; the alert stayed in it
    let requests = h.model.requests_to(MESSAGES);
    let third = request_texts(&requests[3].body);
    assert_eq!(third.len(), 3, "hi, Hello!, the poll: {third:?}");
    assert!(third[2].starts_with("Read HEARTBEAT.md if it exists"));
    assert!(third[2].contains("Current time: "));
    let fourth = request_texts(&requests[4].body);
    assert_eq!(fourth.len(), 5, "the alert pair stays: {fourth:?}");
    assert_eq!(fourth[3], ALERT);
    // AND every heartbeat request has the Heartbeats section and HEARTBEAT.md
    let system = requests[1].body["system"].to_string();
    assert!(system.contains("## Heartbeats"), "{system}");
    assert!(system.contains("Tell me when the disk is almost full."));

    // WHEN the same alert comes 25 hours after it was sent
    let sent_at = h
        .heartbeat_state(MAIN)
        .await
        .last_alert
        .expect("a last alert")
        .sent_at_ms;
    h.script(ALERT);
    let fired = h.fire_due_at(sent_at + 25 * HOUR).await;

    // THEN it is sent again, once
    assert_eq!(fired.len(), 1, "the overdue slot fires once: {fired:?}");
    assert_eq!(h.chat_texts(), ["Hello!", ALERT, ALERT]);
    let alert = h.receiver.posted().into_iter().nth(1).expect("the alert");
    assert_eq!(alert.body["chat_id"], "c-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_firing_runs_once_and_stale_slots_do_nothing() {
    let mut h = Harness::new("{every: 30m, target: last}", Some(DISK_TASK)).await;
    h.say("hi", "Hello!").await;
    let slot = h.next_slot(MAIN).await;
    h.set_time(slot);
    let due = h
        .timers
        .take_due(slot, 10, Duration::ZERO)
        .await
        .expect("timers");
    assert_eq!(due.len(), 1, "one timer for the slot: {due:?}");
    let firing = due[0].timer.clone();
    assert_eq!(firing.timer_id, format!("heartbeat:main:{slot}"));
    assert_eq!(firing.event.session_key, MAIN);

    // WHEN the firing is delivered twice (a redelivery after the first was handled)
    h.script(ALERT);
    h.turns.handle(&firing.event).await.expect("first delivery");
    h.turns.handle(&firing.event).await.expect("redelivery");
    h.timers.ack(&due[0].receipt).await.expect("ack");

    // THEN the heartbeat ran once and alerted once
    assert_eq!(h.model_calls(), 2);
    assert_eq!(h.chat_texts(), ["Hello!", ALERT]);
    assert_eq!(outcomes(&h.state(MAIN).await), ["sent"]);

    // WHEN a firing of an earlier slot, or of a slot off the schedule, arrives
    let off_grid = |slot_ms: u64| SessionEvent {
        session_key: MAIN.to_owned(),
        agent_id: "main".to_owned(),
        event: TurnEvent::Heartbeat {
            heartbeat_id: format!("main:{slot_ms}"),
            slot_ms: Some(slot_ms),
            reason: "interval".to_owned(),
            attempt: 0,
        },
    };
    h.turns
        .handle(&off_grid(slot - 30 * MINUTE))
        .await
        .expect("older slot");
    h.turns
        .handle(&off_grid(slot + 1))
        .await
        .expect("stale slot");

    // THEN nothing runs, and the next slot is armed exactly once
    assert_eq!(h.model_calls(), 2);
    let state = h.heartbeat_state(MAIN).await;
    assert_eq!(state.last_slot_ms, Some(slot));
    let next = h
        .timers
        .take_due(slot + 30 * MINUTE, 10, Duration::ZERO)
        .await
        .expect("timers");
    let ids: Vec<&str> = next.iter().map(|due| due.timer.timer_id.as_str()).collect();
    assert_eq!(ids, [format!("heartbeat:main:{}", slot + 30 * MINUTE)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_session_retries_the_same_slot_without_advancing_the_schedule() {
    let mut h = Harness::new("{every: 30m, target: last}", Some(DISK_TASK)).await;
    h.say("hi", "Hello!").await;
    let slot = h.next_slot(MAIN).await;
    // GIVEN the session's turn is open (as while it waits on a node or an approval)
    let mut state = h.state(MAIN).await;
    state.meta.turn_open = true;
    state.touch_meta();
    let commit = state.pending_commit().expect("commit");
    let key = SessionKey::parse(MAIN).expect("key");
    h.sessions.commit(&key, &commit).await.expect("commit");

    // WHEN its heartbeat slot comes
    let fired = h.fire_due_at(slot).await;
    assert_eq!(fired.len(), 1);

    // THEN no model call; the slot is not recorded; a retry of the same slot is armed 1 s on
    assert_eq!(h.model_calls(), 1);
    let heartbeat = h.heartbeat_state(MAIN).await;
    assert_eq!(heartbeat.last_slot_ms, None);
    assert_eq!(heartbeat.schedule.expect("schedule").next_due_ms, slot);
    let retry = h.timers.take_due(slot + 999, 10, Duration::ZERO).await;
    assert!(retry.expect("timers").is_empty(), "not before 1 s");

    // WHEN the retry comes (the turn has ended meanwhile)
    h.script("HEARTBEAT_OK");
    let fired = h.fire_due_at(slot + 1_000).await;

    // THEN the slot runs then, once, and the next slot is armed
    let ids: Vec<&str> = fired.iter().map(|timer| timer.timer_id.as_str()).collect();
    assert_eq!(ids, [format!("heartbeat:main:{slot}:retry1")]);
    assert_eq!(h.model_calls(), 2);
    let heartbeat = h.heartbeat_state(MAIN).await;
    assert_eq!(heartbeat.last_slot_ms, Some(slot));
    assert_eq!(
        heartbeat.schedule.expect("schedule").next_due_ms,
        slot + 30 * MINUTE
    );
    assert_eq!(h.chat_texts(), ["Hello!"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_message_queued_with_a_heartbeat_is_answered_either_way_round() {
    let mut h = Harness::new("{every: 30m, target: last}", Some(DISK_TASK)).await;
    h.say("hi", "Hello!").await;

    // WHEN a heartbeat and a message are queued together, the heartbeat first
    let slot = h.next_slot(MAIN).await;
    h.set_time(slot);
    let due = h
        .timers
        .take_due(slot, 10, Duration::ZERO)
        .await
        .expect("timers");
    let firing = due[0].timer.event.clone();
    let message = h.user_event("What is 6 x 7?");
    h.script("HEARTBEAT_OK");
    h.script("42.");
    h.turns.handle(&firing).await.expect("heartbeat");
    h.turns.handle(&message).await.expect("message");
    h.timers.ack(&due[0].receipt).await.expect("ack");

    // AND at the next slot, the message first
    let slot = h.next_slot(MAIN).await;
    h.set_time(slot);
    let due = h
        .timers
        .take_due(slot, 10, Duration::ZERO)
        .await
        .expect("timers");
    assert_eq!(due.len(), 1, "{due:?}");
    let firing = due[0].timer.event.clone();
    let message = h.user_event("And 6 x 8?");
    h.script("48.");
    h.script("HEARTBEAT_OK");
    h.turns.handle(&message).await.expect("message");
    h.turns.handle(&firing).await.expect("heartbeat");

    // THEN both messages are answered, both heartbeats ran, and no ack reached the chat
    assert_eq!(h.chat_texts(), ["Hello!", "42.", "48."]);
    assert_eq!(h.model_calls(), 5);
    assert_eq!(outcomes(&h.state(MAIN).await), ["ok-token", "ok-token"]);
    let heartbeat = h.heartbeat_state(MAIN).await;
    assert_eq!(heartbeat.last_slot_ms, Some(slot));
    assert_eq!(
        heartbeat.schedule.expect("schedule").next_due_ms,
        slot + 30 * MINUTE
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_heartbeat_session_alerts_the_main_chat_and_starts_afresh() {
    const ISOLATED: &str = "agent:main:main:heartbeat";
    let mut h = Harness::new(
        "{every: 30m, target: last, isolatedSession: true}",
        Some(DISK_TASK),
    )
    .await;
    h.say("hi", "Hello!").await;

    // WHEN two heartbeats run: an acknowledgement, then an alert
    h.script("HEARTBEAT_OK");
    let first = h.fire_next(MAIN).await;
    assert_eq!(first.event.session_key, ISOLATED);
    h.script(ALERT);
    h.fire_next(ISOLATED).await;

    // THEN the alert reached the main session's chat
    assert_eq!(h.chat_texts(), ["Hello!", ALERT]);
    // AND the conversation never saw a heartbeat, while the heartbeat session started over
    let main = h.state(MAIN).await;
    assert!(outcomes(&main).is_empty());
    let isolated = h.state(ISOLATED).await;
    assert_eq!(outcomes(&isolated), ["ok-token", "sent"]);
    assert!(
        isolated
            .steps
            .iter()
            .any(|step| matches!(step.body, StepBody::Reset { .. })),
        "a fresh generation per run"
    );
    let requests = h.model.requests_to(MESSAGES);
    assert_eq!(request_texts(&requests[2].body).len(), 1, "only the poll");

    // WHEN HEARTBEAT.md is emptied
    h.write_heartbeat_md("# HEARTBEAT.md\n");
    h.fire_next(ISOLATED).await;
    // THEN the next heartbeat costs nothing
    assert_eq!(h.model_calls(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_interval_drops_the_old_chain_and_arms_the_new_one() {
    // GIVEN heartbeats every 30 minutes, armed by a conversation
    let mut h = Harness::new("{every: 30m, target: last}", Some(DISK_TASK)).await;
    h.say("hi", "Hello!").await;
    let old_slot = h.next_slot(MAIN).await;

    // WHEN the deployment restarts with every 7 minutes (not a divisor of 30), arming itself,
    // and the old chain's firing arrives
    h.reconfigure("{every: 7m, target: last}");
    let armed = h.turns.arm_heartbeats().await.expect("arm");
    let new_slot = armed[0].due_at_ms;
    assert_eq!(armed[0].timer_id, format!("heartbeat:main:{new_slot}"));
    assert!(new_slot > T0 && new_slot <= T0 + 7 * MINUTE);
    h.script("HEARTBEAT_OK");
    let fired = h.fire_due_at(new_slot.max(old_slot)).await;

    // THEN the old slot ran nothing and only the new grid's slots run from now on
    assert_eq!(fired.len(), if new_slot == old_slot { 1 } else { 2 });
    assert_eq!(h.model_calls(), 2, "one heartbeat ran: the new slot's");
    let heartbeat = h.heartbeat_state(MAIN).await;
    assert_eq!(heartbeat.last_slot_ms, Some(new_slot));
    let schedule = heartbeat.schedule.expect("schedule");
    assert_eq!(schedule.interval_ms, 7 * MINUTE);
    assert_eq!(schedule.next_due_ms % (7 * MINUTE), new_slot % (7 * MINUTE));
}
