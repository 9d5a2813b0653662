//! Daily and idle resets through the turn service, on a clock the test moves: a message that
//! arrives after the idle timeout or past the daily hour (in the user's time zone) starts a
//! new generation first; the default config never resets; heartbeats never reset. The old
//! generation stays stored.

mod support;

use clawless_core::testing::ManualClock;
use std::sync::Arc;

use clawless_base::clock::Clock;
use clawless_base::session_key::ChatType;
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_core::turn::state::{ResetReason, SessionState, StepBody};
use clawless_llm::testing::windowed::WindowedModel;
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::turn_service::TurnService;
use support::ReplyReceiver;

/// 2026-01-18 03:00 UTC.
const T0: u64 = 1_768_705_200_000;
const MINUTE: u64 = 60_000;

struct Harness {
    _dir: tempfile::TempDir,
    _model: WindowedModel,
    _receiver: ReplyReceiver,
    clock: Arc<ManualClock>,
    sessions: Arc<dyn SessionStore>,
    turns: TurnService,
    sent: u64,
}

impl Harness {
    async fn new(session_yaml: &str) -> Self {
        let dir = tempfile::tempdir().expect("test fixture");
        std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
        let model = WindowedModel::start(32_000, false).await;
        let receiver = ReplyReceiver::start().await;
        let yaml = format!(
            "skills:\n  bundled: {skills}\nagents:\n  defaults:\n    workspace: {workspace}\n    \
             userTimezone: Europe/Berlin\nmodels:\n  primary: anthropic/claude-test\n  \
             maxRetries: 0\n  providers:\n    anthropic:\n      apiKey: test-key\n      \
             baseUrl: {base}\n{session_yaml}",
            skills = dir.path().join("skills").display(),
            workspace = dir.path().join("workspace").display(),
            base = model.base_url(),
        );
        let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
        let db = SqliteDb::open(dir.path().join("sessions.db")).expect("test fixture");
        let sessions: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
        let clock = Arc::new(ManualClock::at(T0));
        let turns = support::turn_service(
            &config,
            Arc::clone(&sessions),
            &receiver.url,
            Arc::clone(&clock) as Arc<dyn Clock>,
        );
        Self {
            _dir: dir,
            _model: model,
            _receiver: receiver,
            clock,
            sessions,
            turns,
            sent: 0,
        }
    }

    async fn say_at(&mut self, at_ms: u64, text: &str) {
        self.clock.set(at_ms);
        self.sent += 1;
        let event = SessionEvent {
            session_key: "agent:main:main".to_owned(),
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
        };
        self.turns.handle(&event).await.expect("turn");
    }

    async fn heartbeat_at(&mut self, at_ms: u64) {
        self.clock.set(at_ms);
        self.sent += 1;
        let event = SessionEvent {
            session_key: "agent:main:main".to_owned(),
            agent_id: "main".to_owned(),
            event: TurnEvent::Heartbeat {
                heartbeat_id: format!("h-{}", self.sent),
                slot_ms: None,
                reason: "manual".to_owned(),
                attempt: 0,
            },
        };
        self.turns.handle(&event).await.expect("heartbeat");
    }

    /// The resets stored, oldest first.
    async fn resets(&self) -> Vec<ResetReason> {
        let key = SessionKey::parse("agent:main:main").expect("key");
        let stored = self
            .sessions
            .load(&key)
            .await
            .expect("load")
            .expect("stored");
        let state = SessionState::from_stored(key, &stored).expect("state");
        state
            .steps
            .iter()
            .filter_map(|step| match &step.body {
                StepBody::Reset { reason, .. } => Some(*reason),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_config_never_resets() {
    let mut harness = Harness::new("").await;
    harness.say_at(T0, "Message 1: hi").await;
    harness
        .say_at(T0 + 3 * 24 * 60 * MINUTE, "Message 2: hi again")
        .await;
    assert!(harness.resets().await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_starts_a_new_generation_when_the_next_message_arrives() {
    let mut harness = Harness::new("session:\n  reset: { mode: idle, idleMinutes: 30 }\n").await;
    harness.say_at(T0, "Message 1: hi").await;
    harness
        .say_at(T0 + 20 * MINUTE, "Message 2: still here")
        .await;
    assert!(harness.resets().await.is_empty(), "20 minutes is not idle");
    // A heartbeat neither resets nor counts as interaction.
    harness.heartbeat_at(T0 + 45 * MINUTE).await;
    assert!(harness.resets().await.is_empty(), "heartbeats never reset");
    harness.say_at(T0 + 51 * MINUTE, "Message 3: back").await;
    assert_eq!(harness.resets().await, vec![ResetReason::Idle]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daily_hour_is_in_the_users_time_zone() {
    // 03:00 UTC is 04:00 in Berlin (winter): the session began before that boundary.
    let mut harness = Harness::new("session:\n  reset: { mode: daily, atHour: 4 }\n").await;
    harness
        .say_at(T0 - 30 * MINUTE, "Message 1: late night")
        .await;
    harness
        .say_at(T0 - 10 * MINUTE, "Message 2: still before four")
        .await;
    assert!(harness.resets().await.is_empty(), "before 04:00 Berlin");
    harness.say_at(T0 + MINUTE, "Message 3: after four").await;
    assert_eq!(harness.resets().await, vec![ResetReason::Daily]);
}
