//! `clawless sessions list|show` run as the real binary against sessions written through the
//! real store adapters: the SQLite database and blob directory of a local state directory,
//! and (`--aws`) a DynamoDB table and S3 blob bucket on moto.
//!
//! Covered: a session with a tool call shows the user message, the call's name and arguments,
//! its result (a long one cut with a note, in full with `--full`, an offloaded one read back
//! from the blob store), the reply, timestamps, and a call awaiting approval with its
//! `/approve` code; `list` shows the key with its turns and last activity, and nothing that
//! is not a session; an unknown key fails clearly with a non-zero exit; a sub-agent result
//! the chat refused is marked undelivered, and a `sessions_send` awaiting its answer is shown
//! as such.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_table, moto_endpoint, moto_sdk_config, s3_client,
};
use clawless_aws::{DynamoInbox, DynamoSessionStore, S3ObjectStore};
use clawless_base::model::Usage;
use clawless_base::object_store::ObjectStore;
use clawless_base::session_key::ChatType;
use clawless_base::transcript::{AssistantBlock, StopReason, ToolCall};
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{Inbox, SessionCommit, SessionKey, SessionStore, StoredStep};
use clawless_core::turn::events::ChatRef;
use clawless_core::turn::state::{SessionMeta, Step, StepBody};
use clawless_local::DirObjectStore;
use clawless_local::sqlite::{SqliteDb, SqliteSessionStore};
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_clawless");
/// 2023-11-14 22:13:20 UTC.
const T0: u64 = 1_700_000_000_000;
const JOB: &str = "abcdef1234567890";

fn clawless(cwd: &Path, args: &[&str], env: &[(&str, String)]) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(cwd)
        .env_clear()
        .env("HOME", cwd)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("CLAWLESS_S3_FORCE_PATH_STYLE", "true");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run clawless")
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "failed: {}\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// A tool result of `lines` numbered lines.
fn listing(lines: usize) -> String {
    (1..=lines)
        .map(|n| format!("/dev/disk{n}  100G  {n}G  used"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn step(seq: u64, at_ms: u64, body: StepBody) -> StoredStep {
    let step = Step {
        seq,
        turn: 1,
        at_ms,
        body,
    };
    StoredStep {
        seq,
        body: serde_json::to_string(&step).unwrap(),
    }
}

fn assistant_calling(id: &str, command: &str) -> StepBody {
    StepBody::Assistant {
        content: vec![
            AssistantBlock::Text {
                text: "Let me look.".to_owned(),
            },
            AssistantBlock::ToolCall(ToolCall {
                id: id.to_owned(),
                name: "exec".to_owned(),
                input: json!({ "command": command }),
            }),
        ],
        stop_reason: StopReason::ToolUse,
        model: "offline/scripted".to_owned(),
        usage: Usage {
            input_tokens: 120,
            output_tokens: 30,
            ..Usage::default()
        },
    }
}

/// The meta of the sessions these tests write: a Telegram direct chat, turn 1 open.
fn session_meta() -> SessionMeta {
    SessionMeta {
        session_id: "s-1".to_owned(),
        agent_id: "main".to_owned(),
        chat: Some(ChatRef {
            channel: "telegram".to_owned(),
            chat_id: "4242".to_owned(),
            chat_type: ChatType::Direct,
        }),
        turn_message_id: Some("m-1".to_owned()),
        turn: 1,
        turn_open: true,
        follow_ups: VecDeque::new(),
        seen_message_ids: {
            let mut seen = clawless_core::turn::seen::SeenMessages::default();
            seen.remember("m-1");
            seen
        },
        sender_is_owner: true,
        untrusted: false,
        sandbox_key: None,
        sandbox_seeded: false,
        elevated: Default::default(),
        sender_id: None,
        group_scope: None,
        skills_snapshot: None,
        tokens_in: 360,
        tokens_out: 90,
        created_at_ms: T0,
        updated_at_ms: T0 + 9_000,
        generation: 0,
        generation_started_at_ms: T0,
        last_interaction_at_ms: T0,
        last_reset: None,
        compaction_count: 0,
        memory_flush_compaction_count: None,
        live_from: 0,
        last_prompt_tokens: None,
        observed_window: None,
        model_override: None,
        thinking_level: None,
        reasoning_level: None,
        turn_thinking: None,
        heartbeat: None,
        pending_events: Vec::new(),
        cron_run: None,
        subagent: None,
        children: Vec::new(),
        a2a_steps: Vec::new(),
        loaded_tools: Default::default(),
        stopped_at_ms: None,
        message_sends: Vec::new(),
        last_media: None,
    }
}

/// A session in which the model ran `df -h` (a long result), `ls` (a result large enough to
/// be offloaded) and replied, then asked for `rm` which waits for approval.
fn commit(big_result: &str) -> SessionCommit {
    let meta = session_meta();
    let steps = vec![
        step(
            1,
            T0,
            StepBody::Inbound {
                message_id: "m-1".to_owned(),
                sender_id: "lena".to_owned(),
                text: "how full is my disk?".to_owned(),
                dispatch: None,
                heartbeat: false,
                heartbeat_delivery: None,
                compact: None,
                images: Vec::new(),
            },
        ),
        step(2, T0 + 1_000, assistant_calling("call_df", "df -h")),
        step(
            3,
            T0 + 2_000,
            StepBody::ToolResult {
                call_id: "call_df".to_owned(),
                tool_name: "exec".to_owned(),
                text: listing(40),
                is_error: false,
            },
        ),
        step(4, T0 + 3_000, assistant_calling("call_ls", "ls -la /var")),
        step(
            5,
            T0 + 4_000,
            StepBody::ToolResult {
                call_id: "call_ls".to_owned(),
                tool_name: "exec".to_owned(),
                text: big_result.to_owned(),
                is_error: true,
            },
        ),
        step(
            6,
            T0 + 5_000,
            StepBody::Reply {
                reply_id: "r-1".to_owned(),
                text: "Your disk is 40% full.".to_owned(),
                to: None,
            },
        ),
        step(
            7,
            T0 + 6_000,
            StepBody::ReplySent {
                reply_id: "r-1".to_owned(),
                rejected: None,
            },
        ),
        step(
            8,
            T0 + 7_000,
            assistant_calling("call_rm", "rm -rf /tmp/cache"),
        ),
        step(
            9,
            T0 + 8_000,
            StepBody::ToolPending {
                call_id: "call_rm".to_owned(),
                job_id: JOB.to_owned(),
                awaiting_approval: true,
                approved: None,
            },
        ),
    ];
    SessionCommit {
        expected_version: 0,
        live_from: 0,
        last_seq: 0,
        meta: serde_json::to_string(&meta).unwrap(),
        steps,
    }
}

/// 40 KB of output: above the 32 KiB offloading threshold, so it lives in the blob store.
fn big_result() -> String {
    let mut text = "BIG-RESULT-FIRST-LINE\n".to_owned();
    text.push_str(&"x".repeat(40 * 1024));
    text
}

fn key() -> SessionKey {
    SessionKey::parse("agent:main:telegram:direct:4242").unwrap()
}

fn assert_transcript(text: &str) {
    for expected in [
        "session agent:main:telegram:direct:4242 (version 1)",
        "chat telegram 4242",
        "#1 2023-11-14 22:13:20Z turn 1 USER lena (message m-1)",
        "how full is my disk?",
        "ASSISTANT offline/scripted",
        r#"-> TOOL CALL exec [call_df] {"command":"df -h"}"#,
        "TOOL RESULT exec [call_df]",
        "/dev/disk1  100G  1G  used",
        "[cut:",
        "TOOL RESULT exec [call_ls] (error)",
        "BIG-RESULT-FIRST-LINE",
        "REPLY r-1",
        "Your disk is 40% full.",
        "REPLY SENT r-1",
        &format!("PENDING exec [call_rm] job {JOB}: awaiting approval"),
        "exec [call_rm] awaits approval: /approve abcdef12 allow-once|allow-always|deny",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    // The long result is cut: its last line is not shown.
    assert!(
        !text.contains("/dev/disk40 "),
        "the 40-line result should be cut:\n{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_prints_a_local_session_with_its_tool_calls_results_and_pending_approval() {
    // GIVEN a session written through the SQLite store and the blob directory, as
    // `clawless local` writes them
    let cwd = tempfile::tempdir().unwrap();
    let state = cwd.path().join(".clawless");
    std::fs::create_dir_all(&state).unwrap();
    let sqlite = Arc::new(SqliteSessionStore::new(
        SqliteDb::open(state.join("clawless.db")).unwrap(),
    ));
    let blobs: Arc<dyn ObjectStore> = Arc::new(DirObjectStore::open(state.join("blobs")).unwrap());
    let store = OffloadingSessionStore::new(sqlite, blobs, "sessions/");
    store.commit(&key(), &commit(&big_result())).await.unwrap();
    let offloaded = std::fs::read_dir(state.join("blobs/sessions"))
        .map(|entries| entries.count())
        .unwrap_or(0);
    assert!(
        offloaded > 0,
        "the 40 KB result should live in the blob directory"
    );

    // WHEN the operator shows it (default state dir .clawless)
    let shown = tokio::task::spawn_blocking({
        let cwd = cwd.path().to_owned();
        move || {
            clawless(
                &cwd,
                &["sessions", "show", "agent:main:telegram:direct:4242"],
                &[],
            )
        }
    })
    .await
    .unwrap();

    // THEN every step is there, the long result cut, the offloaded one read back
    assert_transcript(&stdout(&shown));

    // AND --full shows the whole result
    let full = clawless(
        cwd.path(),
        &[
            "sessions",
            "show",
            "--full",
            "agent:main:telegram:direct:4242",
        ],
        &[],
    );
    let full = stdout(&full);
    assert!(full.contains("/dev/disk40  100G  40G  used"), "{full}");
    assert!(!full.contains("[cut:"), "{full}");

    // AND list shows the key, its turns and last activity
    let listed = stdout(&clawless(cwd.path(), &["sessions", "list"], &[]));
    let row = listed
        .lines()
        .find(|line| line.starts_with("agent:main:telegram:direct:4242"))
        .unwrap_or_else(|| panic!("no row for the session in:\n{listed}"));
    assert!(row.contains("2023-11-14 22:13:29Z"), "{row}");
    assert!(row.contains("turn open"), "{row}");
    assert!(row.contains("360/90"), "{row}");
}

#[test]
fn show_of_an_unknown_key_fails_clearly() {
    let cwd = tempfile::tempdir().unwrap();
    let state = cwd.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    // An empty but real database.
    SqliteDb::open(state.join("clawless.db")).unwrap();
    let output = clawless(
        cwd.path(),
        &[
            "sessions",
            "--state-dir",
            "state",
            "show",
            "agent:main:nobody",
        ],
        &[],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no session agent:main:nobody") && stderr.contains("sessions list"),
        "{stderr}"
    );
    // A key that is not a session key at all is refused too.
    let output = clawless(
        cwd.path(),
        &["sessions", "--state-dir", "state", "show", "main"],
        &[],
    );
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not a session key"),
        "{output:?}"
    );
}

#[test]
fn without_local_state_the_commands_say_where_they_looked() {
    let cwd = tempfile::tempdir().unwrap();
    let output = clawless(cwd.path(), &["sessions", "list"], &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(".clawless/clawless.db") && stderr.contains("--aws"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_sessions_are_read_from_dynamodb_and_s3() {
    // GIVEN a session written through the DynamoDB store and S3 blobs, as the turn function
    // writes them, and an inbox claim in the same table
    let config = moto_sdk_config().await;
    let dynamodb = dynamodb_client(&config);
    let table = fresh_table(&dynamodb).await;
    let s3 = s3_client(&config);
    let bucket = fresh_bucket(&s3, "blobs").await;
    let store = OffloadingSessionStore::new(
        Arc::new(DynamoSessionStore::new(dynamodb.clone(), &table)),
        Arc::new(S3ObjectStore::new(s3, &bucket)),
        "sessions/",
    );
    store.commit(&key(), &commit(&big_result())).await.unwrap();
    DynamoInbox::new(dynamodb, &table)
        .claim("telegram:99", std::time::Duration::from_secs(600), 1_000)
        .await
        .unwrap();
    let env = vec![
        ("AWS_ENDPOINT_URL", moto_endpoint()),
        ("CLAWLESS_TABLE", table.clone()),
        ("CLAWLESS_BLOB_BUCKET", bucket),
    ];
    let cwd = tempfile::tempdir().unwrap();
    let dir = cwd.path().to_owned();

    // WHEN the operator lists and shows with --aws
    let (listed, shown) = tokio::task::spawn_blocking(move || {
        (
            clawless(&dir, &["sessions", "--aws", "list", "--json"], &env),
            clawless(
                &dir,
                &[
                    "sessions",
                    "--aws",
                    "show",
                    "agent:main:telegram:direct:4242",
                ],
                &env,
            ),
        )
    })
    .await
    .unwrap();

    // THEN the list holds the session, and only it
    let listed: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let keys: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec!["agent:main:telegram:direct:4242"]);
    assert_eq!(listed[0]["turns"], 1);
    assert_eq!(listed[0]["updatedAtMs"], T0 + 9_000);

    // AND the transcript reads as locally, the offloaded result fetched from S3
    assert_transcript(&stdout(&shown));
}

#[test]
fn aws_without_a_table_name_says_which_variable_to_set() {
    let cwd = tempfile::tempdir().unwrap();
    let output = clawless(cwd.path(), &["sessions", "--aws", "list"], &[]);
    assert!(!output.status.success());
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("CLAWLESS_TABLE"),
        "{output:?}"
    );
}

/// A session that was reset once and compacted in its second generation.
fn two_generations() -> SessionCommit {
    let mut commit = commit("short");
    let inbound = |id: &str, text: &str| StepBody::Inbound {
        message_id: id.to_owned(),
        sender_id: "lena".to_owned(),
        text: text.to_owned(),
        dispatch: None,
        heartbeat: false,
        heartbeat_delivery: None,
        compact: None,
        images: Vec::new(),
    };
    let next = commit.steps.len() as u64 + 1;
    commit.steps.extend([
        step(
            next,
            T0 + 20_000,
            StepBody::Reset {
                reason: clawless_core::turn::state::ResetReason::New,
                previous_session_id: "s-1".to_owned(),
                session_id: "s-2".to_owned(),
            },
        ),
        step(next + 1, T0 + 21_000, inbound("m-2", "a fresh start")),
        step(
            next + 2,
            T0 + 22_000,
            StepBody::MemoryFlush {
                path: "memory/2023-11-14.md".to_owned(),
                appended_bytes: 42,
                error: None,
            },
        ),
        step(
            next + 3,
            T0 + 23_000,
            StepBody::Compaction {
                summary: "## Decisions\n- a fresh start was made".to_owned(),
                first_kept_seq: next + 1,
                tokens_before: 9_000,
                tokens_after: 2_000,
                trigger: clawless_core::turn::state::CompactionTrigger::Threshold,
            },
        ),
    ]);
    commit
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_lists_generations_and_marks_resets_flushes_and_compactions() {
    // GIVEN a session with two generations, the second compacted after a memory flush
    let cwd = tempfile::tempdir().unwrap();
    let state = cwd.path().join(".clawless");
    std::fs::create_dir_all(&state).unwrap();
    let sqlite = Arc::new(SqliteSessionStore::new(
        SqliteDb::open(state.join("clawless.db")).unwrap(),
    ));
    let blobs: Arc<dyn ObjectStore> = Arc::new(DirObjectStore::open(state.join("blobs")).unwrap());
    let store = OffloadingSessionStore::new(sqlite, blobs, "sessions/");
    store.commit(&key(), &two_generations()).await.unwrap();
    let show = |extra: &'static [&'static str]| {
        let cwd = cwd.path().to_owned();
        move || {
            let mut args = vec!["sessions", "show", "agent:main:telegram:direct:4242"];
            args.extend_from_slice(extra);
            clawless(&cwd, &args, &[])
        }
    };

    // WHEN the operator shows it THEN the generations are listed and the current one shown
    let current = stdout(&tokio::task::spawn_blocking(show(&[])).await.unwrap());
    assert!(
        current.contains("generations (a reset starts one"),
        "{current}"
    );
    assert!(current.contains("  #0 the first, 9 step(s)"), "{current}");
    assert!(
        current.contains("  #1 began 2023-11-14 22:13:40Z by new, 3 step(s) (current)"),
        "{current}"
    );
    assert!(
        current.contains("=== RESET (new): session s-1 archived; s-2 begins"),
        "{current}"
    );
    assert!(current.contains("=== MEMORY FLUSH: 42 byte(s) appended to memory/2023-11-14.md"));
    assert!(
        current.contains("=== COMPACTION (Threshold): ~9000 -> ~2000 tokens"),
        "{current}"
    );
    assert!(current.contains("a fresh start was made"));
    assert!(
        !current.contains("how full is my disk?"),
        "the archived generation is not shown"
    );

    // AND the archived generation is still readable
    let first = stdout(
        &tokio::task::spawn_blocking(show(&["--generation", "0"]))
            .await
            .unwrap(),
    );
    assert!(first.contains("how full is my disk?"), "{first}");
    assert!(!first.contains("a fresh start"), "{first}");
    let all = stdout(
        &tokio::task::spawn_blocking(show(&["--generation", "all"]))
            .await
            .unwrap(),
    );
    assert!(all.contains("how full is my disk?") && all.contains("a fresh start"));
    let missing = tokio::task::spawn_blocking(show(&["--generation", "5"]))
        .await
        .unwrap();
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("there is no generation 5"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_marks_a_sub_agent_result_the_chat_refused_and_a_waiting_send() {
    // GIVEN a parent whose relay of a child's result was refused by the chat for good, and
    // which then sent a message to another session and waits for its answer
    let cwd = tempfile::tempdir().unwrap();
    let state = cwd.path().join(".clawless");
    std::fs::create_dir_all(&state).unwrap();
    let store = SqliteSessionStore::new(SqliteDb::open(state.join("clawless.db")).unwrap());
    let child = "agent:main:subagent:0b5c6a52-3f1e-4d8a-9c1b-2a7e5d4c3b21";
    let steps = vec![
        step(
            1,
            T0,
            StepBody::Inbound {
                message_id: format!("announce:v1:{child}:run-1"),
                sender_id: "subagent".to_owned(),
                text: "[Internal task completion event] status: completed successfully; result: 42"
                    .to_owned(),
                dispatch: None,
                heartbeat: false,
                heartbeat_delivery: None,
                compact: None,
                images: Vec::new(),
            },
        ),
        step(
            2,
            T0 + 1_000,
            StepBody::Reply {
                reply_id: "r-9".to_owned(),
                text: "Your helper found 42.".to_owned(),
                to: None,
            },
        ),
        step(
            3,
            T0 + 2_000,
            StepBody::ReplySent {
                reply_id: "r-9".to_owned(),
                rejected: Some("Forbidden: bot was blocked by the user".to_owned()),
            },
        ),
        step(
            4,
            T0 + 3_000,
            StepBody::Assistant {
                content: vec![AssistantBlock::ToolCall(ToolCall {
                    id: "call_send".to_owned(),
                    name: "sessions_send".to_owned(),
                    input: json!({"sessionKey": child, "message": "More?"}),
                })],
                stop_reason: StopReason::ToolUse,
                model: "offline/scripted".to_owned(),
                usage: Usage::default(),
            },
        ),
        step(
            5,
            T0 + 4_000,
            StepBody::ToolPending {
                call_id: "call_send".to_owned(),
                job_id: JOB.to_owned(),
                awaiting_approval: false,
                approved: None,
            },
        ),
    ];
    let commit = SessionCommit {
        expected_version: 0,
        live_from: 0,
        last_seq: 0,
        meta: serde_json::to_string(&session_meta()).unwrap(),
        steps,
    };
    store.commit(&key(), &commit).await.unwrap();

    // WHEN the operator shows it
    let shown = tokio::task::spawn_blocking({
        let cwd = cwd.path().to_owned();
        move || {
            clawless(
                &cwd,
                &["sessions", "show", "agent:main:telegram:direct:4242"],
                &[],
            )
        }
    })
    .await
    .unwrap();

    // THEN the undelivered result is marked, and the send is shown waiting, not on a node
    let shown = stdout(&shown);
    for expected in [
        "SUB-AGENT RESULT (announced)",
        "REPLY REJECTED r-9: Forbidden: bot was blocked by the user",
        "=== SUB-AGENT RESULT NOT DELIVERED: the chat refused the relay",
        "PENDING sessions_send [call_send]",
        "sessions_send [call_send] waits for the other session's answer",
    ] {
        assert!(
            shown.contains(expected),
            "missing {expected:?} in:\n{shown}"
        );
    }
    assert!(!shown.contains("runs on a node"), "{shown}");
}

/// The session store of a local state directory `.clawless` under `cwd`, as `clawless local`
/// opens it.
fn local_store(cwd: &Path) -> OffloadingSessionStore {
    let state = cwd.join(".clawless");
    std::fs::create_dir_all(&state).unwrap();
    let sqlite = Arc::new(SqliteSessionStore::new(
        SqliteDb::open(state.join("clawless.db")).unwrap(),
    ));
    let blobs: Arc<dyn ObjectStore> = Arc::new(DirObjectStore::open(state.join("blobs")).unwrap());
    OffloadingSessionStore::new(sqlite, blobs, "sessions/")
}

/// `clawless sessions context` builds the session's next request as `clawless local` would
/// (its config, skills and workspace) and lists what it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_lists_what_a_local_sessions_next_request_carries() {
    // GIVEN a local session and a config with a small window
    let cwd = tempfile::tempdir().unwrap();
    local_store(cwd.path())
        .commit(&key(), &commit(&big_result()))
        .await
        .unwrap();
    std::fs::write(
        cwd.path().join("clawless.yaml"),
        "agents:\n  defaults:\n    contextTokens: 5000\n",
    )
    .unwrap();

    // WHEN the operator asks for its context, in detail
    let output = tokio::task::spawn_blocking({
        let cwd = cwd.path().to_owned();
        move || {
            clawless(
                &cwd,
                &[
                    "sessions",
                    "context",
                    "--detail",
                    "agent:main:telegram:direct:4242",
                ],
                &[],
            )
        }
    })
    .await
    .unwrap();

    // THEN it lists the window, the prompt's sections, the tools and the transcript
    let text = stdout(&output);
    for part in [
        "Window: 5000 tok",
        "- Tooling: ",
        "- Safety: ",
        "- read: ",
        "Transcript: ~",
        "Shortened for the window: optional prompt sections left out",
    ] {
        assert!(text.contains(part), "{part:?} in:\n{text}");
    }

    // AND an unknown session fails clearly
    let unknown = clawless(
        cwd.path(),
        &["sessions", "context", "agent:main:nobody"],
        &[],
    );
    assert!(!unknown.status.success());
    let error = String::from_utf8_lossy(&unknown.stderr);
    assert!(error.contains("no session agent:main:nobody"), "{error}");
}
