//! Crash tests: a turn is killed right after each kind of step is persisted (the model's
//! tool call, the tool's result, the final answer, the delivery record) or between sending a
//! reply and recording it, then the same event is delivered again. The transcript must come
//! out whole and identical to an uninterrupted run, the model must not be asked twice for a
//! persisted answer, the tool must not run twice, and the user must see one reply.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use clawless_base::clock::SystemClock;
use clawless_base::session_key::ChatType;
use clawless_channels::{ChannelOutbox, HttpReplySender};
use clawless_core::session::{
    SessionCommit, SessionKey, SessionStore, SessionStoreError, StoredSession,
};
use clawless_core::turn::events::{ChatRef, InboundMessage, SessionEvent, TurnEvent};
use clawless_core::turn::state::{SessionState, StepBody};
use clawless_llm::testing::{ScriptedReply, ScriptedServer};
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use clawless_runtime::turn_service::{HostFacts, TurnDeps, TurnService};
use clawless_runtime::{ClawlessConfig, SkillsService, StoreFactory};
use clawless_skills::eligibility::EligibilityContext;
use serde_json::json;
use support::{Fixture, ReplyReceiver, SECRET, anthropic_text, anthropic_tool_use};

const MESSAGES: &str = "/v1/messages";

/// When the simulated process dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    Never,
    /// Right after the n-th commit reached storage.
    AfterCommit(usize),
    /// Right before the n-th commit (it never reaches storage).
    BeforeCommit(usize),
}

/// A session store that "dies" at a chosen commit, once.
#[derive(Debug)]
struct Killable {
    inner: Arc<dyn SessionStore>,
    kill: Kill,
    commits: AtomicUsize,
}

#[async_trait]
impl SessionStore for Killable {
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        self.inner.load(key).await
    }

    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        self.inner.load_live(key).await
    }

    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        let n = self.commits.fetch_add(1, Ordering::SeqCst) + 1;
        let killed = || SessionStoreError::Unavailable {
            message: format!("killed at commit {n}"),
            source: None,
        };
        if self.kill == Kill::BeforeCommit(n) {
            return Err(killed());
        }
        let version = self.inner.commit(key, commit).await?;
        if self.kill == Kill::AfterCommit(n) {
            return Err(killed());
        }
        Ok(version)
    }

    fn max_record_bytes(&self) -> usize {
        self.inner.max_record_bytes()
    }
}

struct Run {
    /// The transcript as JSON, with the run's temporary directory and reply ids (derived from
    /// the session id, which embeds the creation time) replaced by placeholders.
    transcript: String,
    model_calls: usize,
    tools_run: u64,
    posted: Vec<support::Posted>,
    first_attempt_failed: bool,
}

async fn run(kill: Kill, refuse_first_reply: bool) -> Run {
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
    if refuse_first_reply {
        // More refusals than the turn's own retries: the event goes back to the queue.
        receiver.refuse_next(3);
    }
    let config = ClawlessConfig::from_yaml(
        &fixture.config_yaml(&model_server.base_url(), &receiver.url),
        "test",
    )
    .expect("test fixture");
    let stores = Arc::new(StoreFactory::new(|| unreachable!("no S3 in this test")));
    let skills = Arc::new(SkillsService::new(config.clone(), &stores).expect("test fixture"));
    let db = SqliteDb::open(fixture.path().join("sessions.db")).expect("test fixture");
    let sqlite: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
    let sessions = Arc::new(Killable {
        inner: Arc::clone(&sqlite),
        kill,
        commits: AtomicUsize::new(0),
    });
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
    });
    let event = SessionEvent {
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
    };
    let first = turns.handle(&event).await;
    let first_attempt_failed = first.is_err();
    // The queue redelivers until the event is handled.
    let mut attempts = 0;
    let mut outcome = first;
    while outcome.is_err() {
        attempts += 1;
        assert!(attempts < 5, "redelivery keeps failing: {outcome:?}");
        outcome = turns.handle(&event).await;
    }
    let key = SessionKey::parse("agent:main:main").expect("test fixture");
    let stored = sqlite
        .load(&key)
        .await
        .expect("test fixture")
        .expect("test fixture");
    let state = SessionState::from_stored(key, &stored).expect("test fixture");
    Run {
        transcript: normalized(&state, fixture.path()),
        model_calls: model_server.requests_to(MESSAGES).len(),
        tools_run: turns.tools_run(),
        posted: receiver.posted(),
        first_attempt_failed,
    }
}

fn normalized(state: &SessionState, dir: &std::path::Path) -> String {
    let bodies: Vec<&StepBody> = state.steps.iter().map(|step| &step.body).collect();
    let mut text = serde_json::to_string(&bodies).expect("test fixture");
    text = text.replace(&dir.display().to_string(), "<dir>");
    for (index, body) in bodies.iter().enumerate() {
        if let StepBody::Reply { reply_id, .. } = body {
            text = text.replace(reply_id.as_str(), &format!("<reply-{index}>"));
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_after_each_kind_of_step_resumes_whole_and_sends_once() {
    let clean = run(Kill::Never, false).await;
    assert!(!clean.first_attempt_failed);
    assert_eq!(clean.model_calls, 2);
    assert_eq!(clean.tools_run, 1);
    assert_eq!(clean.posted.len(), 1);
    let kinds = [
        "model call (tool use)",
        "tool result",
        "model answer + reply intent",
        "reply delivered",
    ];
    for (index, kind) in kinds.iter().enumerate() {
        let crashed = run(Kill::AfterCommit(index + 1), false).await;
        assert!(crashed.first_attempt_failed, "killed after {kind}");
        assert_eq!(
            crashed.transcript, clean.transcript,
            "killed after {kind}: transcript"
        );
        assert_eq!(
            crashed.model_calls, 2,
            "killed after {kind}: no model call repeated"
        );
        assert_eq!(
            crashed.tools_run, 1,
            "killed after {kind}: the tool ran once"
        );
        assert_eq!(crashed.posted.len(), 1, "killed after {kind}: one reply");
        assert!(crashed.posted[0].signature_ok);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_between_sending_and_recording_a_reply_resends_it_under_the_same_id() {
    // The 4th commit records the delivery; dying before it means the reply went out but
    // nothing says so. The resend carries the same idempotency key, so the receiver drops it.
    let crashed = run(Kill::BeforeCommit(4), false).await;
    assert!(crashed.first_attempt_failed);
    assert_eq!(crashed.model_calls, 2);
    assert_eq!(crashed.posted.len(), 2);
    assert_eq!(
        crashed.posted[0].idempotency_key,
        crashed.posted[1].idempotency_key
    );
    assert_eq!(crashed.posted[0].body, crashed.posted[1].body);
    let clean = run(Kill::Never, false).await;
    assert_eq!(crashed.transcript, clean.transcript);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reply_is_retried_on_redelivery_without_asking_the_model_again() {
    let run = run(Kill::Never, true).await;
    assert!(run.first_attempt_failed);
    assert_eq!(run.model_calls, 2);
    assert_eq!(run.posted.len(), 1);
    assert_eq!(run.tools_run, 1);
}

/// What a long conversation left behind: its compactions, the inbound messages of every step
/// ever stored, and the distinct replies delivered.
struct LongRun {
    compactions: usize,
    flushes: usize,
    inbound: Vec<String>,
    distinct_replies: Vec<String>,
    commits: usize,
    crashed: bool,
}

/// Twelve numbered messages of ~1.2 KB through a 6k window (so the session compacts, with a
/// memory flush first), over SQLite behind a store that dies once at `kill`. Every failed
/// event is redelivered until it goes through, as the queue would.
async fn long_run(kill: Kill) -> LongRun {
    use clawless_llm::testing::windowed::WindowedModel;
    let dir = tempfile::tempdir().expect("test fixture");
    let model = WindowedModel::start(6_000, false).await;
    let receiver = ReplyReceiver::start().await;
    std::fs::create_dir_all(dir.path().join("skills")).expect("test fixture");
    let yaml = format!(
        "skills:\n  bundled: {skills}\nagents:\n  defaults:\n    workspace: {workspace}\n    \
         contextTokens: 6000\nmodels:\n  primary: anthropic/claude-test\n  maxRetries: 0\n  \
         providers:\n    anthropic:\n      apiKey: test-key\n      baseUrl: {base}\n",
        skills = dir.path().join("skills").display(),
        workspace = dir.path().join("workspace").display(),
        base = model.base_url(),
    );
    let config = ClawlessConfig::from_yaml(&yaml, "test").expect("test fixture");
    let db = SqliteDb::open(dir.path().join("sessions.db")).expect("test fixture");
    let sqlite: Arc<dyn SessionStore> = Arc::new(SqliteSessionStore::new(db));
    let sessions = Arc::new(Killable {
        inner: Arc::clone(&sqlite),
        kill,
        commits: AtomicUsize::new(0),
    });
    let turns = support::turn_service(
        &config,
        Arc::clone(&sessions) as Arc<dyn SessionStore>,
        &receiver.url,
        Arc::new(SystemClock),
    );
    let mut crashed = false;
    for n in 1..=12 {
        let filler = "Words to fill the context window of a small model. ".repeat(24);
        let event = SessionEvent {
            session_key: "agent:main:main".to_owned(),
            agent_id: "main".to_owned(),
            event: TurnEvent::Inbound(InboundMessage {
                message_id: format!("m-{n}"),
                chat: ChatRef {
                    channel: "generic".to_owned(),
                    chat_id: "c-1".to_owned(),
                    chat_type: ChatType::Direct,
                },
                sender_id: "u-1".to_owned(),
                text: format!("Message {n}: {filler}"),
                sender_is_owner: true,
                attachments: Vec::new(),
            }),
        };
        let mut attempts = 0;
        while let Err(err) = turns.handle(&event).await {
            crashed = true;
            attempts += 1;
            assert!(attempts < 5, "message {n}: redelivery keeps failing: {err}");
        }
    }
    let key = SessionKey::parse("agent:main:main").expect("test fixture");
    let stored = sqlite.load(&key).await.expect("load").expect("stored");
    let state = SessionState::from_stored(key, &stored).expect("test fixture");
    let mut replies: Vec<String> = receiver
        .posted()
        .iter()
        .map(|posted| posted.body["text"].as_str().unwrap_or_default().to_owned())
        .collect();
    replies.dedup();
    LongRun {
        compactions: state
            .steps
            .iter()
            .filter(|step| matches!(step.body, StepBody::Compaction { .. }))
            .count(),
        flushes: state
            .steps
            .iter()
            .filter(|step| matches!(step.body, StepBody::MemoryFlush { .. }))
            .count(),
        inbound: state
            .steps
            .iter()
            .filter_map(|step| match &step.body {
                StepBody::Inbound { message_id, .. } => Some(message_id.clone()),
                _ => None,
            })
            .collect(),
        distinct_replies: replies,
        commits: sessions.commits.load(Ordering::SeqCst),
        crashed,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_killed_at_any_commit_of_a_compacting_session_keeps_one_summary_and_every_step() {
    let clean = long_run(Kill::Never).await;
    assert!(clean.compactions >= 1, "the clean run compacts");
    assert!(clean.flushes >= 1, "the clean run flushes memory first");
    let expected: Vec<String> = (1..=12).map(|n| format!("m-{n}")).collect();
    assert_eq!(clean.inbound, expected);
    let answers: Vec<String> = (1..=12)
        .map(|n| format!("Answer to message {n}."))
        .collect();
    assert_eq!(clean.distinct_replies, answers);
    for n in 1..=clean.commits {
        for kill in [Kill::AfterCommit(n), Kill::BeforeCommit(n)] {
            let crashed = long_run(kill).await;
            assert!(crashed.crashed, "{kill:?} happened");
            assert_eq!(
                crashed.compactions, clean.compactions,
                "{kill:?}: one summary each"
            );
            assert_eq!(crashed.flushes, clean.flushes, "{kill:?}: flushes");
            assert_eq!(
                crashed.inbound, expected,
                "{kill:?}: no step lost or doubled"
            );
            assert_eq!(
                crashed.distinct_replies, answers,
                "{kill:?}: each answer once"
            );
        }
    }
}
