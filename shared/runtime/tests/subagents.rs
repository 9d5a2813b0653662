//! Sub-agents through the turn service, with the turn queue pumped by hand: a spawn queues
//! the child's start once; the child runs with the sub-agent prompt, without
//! `sessions_spawn`, never seeing the parent's transcript; its result is announced to the
//! parent once whatever is redelivered; a silent result announces nothing; a failed child is
//! announced as failed; the depth gate refuses a grandchild; attachments are written to the
//! child's directory in the workspace, and a hostile or unwritable one queues nothing.

mod support;

use clawless_base::clock::{Clock, SystemClock};
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use clawless_llm::testing::ScriptedReply;
use serde_json::{Value, json};
use support::subagent_harness::{Harness, MAIN, MESSAGES};
use support::{anthropic_text, anthropic_tool_use};

const SECRET_WORD: &str = "parent-secret-4411";

impl Harness {
    /// The parent spawns one child for `task` (answering "On it." after the tool) and the
    /// child's start is taken off the queue.
    async fn spawn(&mut self, task: &str) -> SessionEvent {
        self.script(anthropic_tool_use(
            "toolu_spawn",
            "sessions_spawn",
            json!({"task": task, "label": "helper"}),
        ));
        self.script(anthropic_text("On it."));
        self.say(&format!("{SECRET_WORD}: please delegate {task}"))
            .await;
        let mut queued = self.take_queued().await;
        assert_eq!(queued.len(), 1, "{queued:?}");
        queued.remove(0)
    }
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_runs_alone_and_is_announced_to_its_parent_once() {
    let mut h = Harness::new("", "", false).await;
    std::fs::write(
        h.dir.path().join("workspace/AGENTS.md"),
        "AGENTS-MARKER rules\n",
    )
    .expect("fixture");
    std::fs::write(
        h.dir.path().join("workspace/SOUL.md"),
        "SOUL-MARKER persona\n",
    )
    .expect("fixture");
    // WHEN the parent spawns a child
    let start = h.spawn("count the files").await;
    assert!(
        start.session_key.starts_with("agent:main:subagent:"),
        "{start:?}"
    );
    let accepted = h.model.requests_to(MESSAGES)[1].raw_body.clone();
    assert!(
        accepted.contains("\\\"status\\\":\\\"accepted\\\""),
        "{accepted}"
    );
    assert!(accepted.contains(&start.session_key));
    assert_eq!(h.chat_texts(), ["On it."]);

    // AND the child's start is handled (and redelivered)
    h.script(anthropic_text("Done: 3 files"));
    h.turns.handle(&start).await.expect("child");
    h.turns.handle(&start).await.expect("child redelivered");

    // THEN the child ran once, with the sub-agent prompt, without sessions_spawn or cron, and
    // without the parent's conversation
    let requests = h.model.requests_to(MESSAGES);
    assert_eq!(requests.len(), 3);
    let child = &requests[2];
    assert!(child.raw_body.contains("[Subagent Task]: count the files"));
    assert!(child.raw_body.contains("Subagent Context"));
    assert!(!child.raw_body.contains(SECRET_WORD));
    assert!(
        child.raw_body.contains("AGENTS-MARKER"),
        "AGENTS.md is kept"
    );
    assert!(
        !child.raw_body.contains("SOUL-MARKER"),
        "only AGENTS.md and TOOLS.md"
    );
    assert!(
        h.model.requests_to(MESSAGES)[0]
            .raw_body
            .contains("SOUL-MARKER"),
        "the parent has its persona"
    );
    let tools = tool_names(&child.body);
    assert!(!tools.contains(&"sessions_spawn".to_owned()), "{tools:?}");
    assert!(!tools.contains(&"cron".to_owned()), "{tools:?}");
    assert_eq!(h.chat_texts(), ["On it."], "a child answers nobody");

    // AND exactly one announce is on the parent's queue
    let announces = h.take_queued().await;
    assert_eq!(announces.len(), 1, "{announces:?}");
    let announce = &announces[0];
    assert_eq!(announce.session_key, MAIN);
    let TurnEvent::SubagentAnnounce {
        text, announce_id, ..
    } = &announce.event
    else {
        panic!("{announce:?}");
    };
    assert_eq!(
        *announce_id,
        format!(
            "announce:v1:{}:{}",
            start.session_key,
            h.state(&start.session_key)
                .await
                .meta
                .subagent
                .expect("a run")
                .start
                .run_id
        )
    );
    assert!(text.contains("status: completed successfully"), "{text}");
    assert!(text.contains("Done: 3 files"), "{text}");

    // WHEN the parent takes it (twice: a redelivery)
    h.script(anthropic_text("Your helper counted 3 files."));
    h.turns.handle(announce).await.expect("announce");
    h.turns
        .handle(announce)
        .await
        .expect("announce redelivered");

    // THEN the chat hears of it once, and the child is recorded as done
    assert_eq!(h.chat_texts(), ["On it.", "Your helper counted 3 files."]);
    assert_eq!(h.model_calls(), 4);
    let parent = h.state(MAIN).await;
    assert_eq!(parent.meta.children.len(), 1);
    assert_eq!(parent.meta.children[0].status, "done");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_child_announces_nothing_and_a_failed_one_says_so() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("check quietly").await;
    h.script(anthropic_text("ANNOUNCE_SKIP"));
    h.turns.handle(&start).await.expect("child");
    let announces = h.take_queued().await;
    assert_eq!(announces.len(), 1);
    h.turns.handle(&announces[0]).await.expect("announce");
    assert_eq!(h.model_calls(), 3, "a silent result starts no parent turn");
    assert_eq!(h.state(MAIN).await.meta.children[0].status, "done");

    let start = h.spawn("break").await;
    h.model.push(
        MESSAGES,
        ScriptedReply::raw(
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}"#,
        ),
    );
    h.turns.handle(&start).await.expect("child");
    let announces = h.take_queued().await;
    let TurnEvent::SubagentAnnounce { text, status, .. } = &announces[0].event else {
        panic!("{announces:?}");
    };
    assert_eq!(status, "error");
    assert!(text.contains("status: failed: "), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_cannot_spawn_and_a_busy_parent_is_refused_past_its_limit() {
    let mut h = Harness::new("    subagents: { maxChildrenPerAgent: 1 }\n", "", false).await;
    let _first = h.spawn("first").await;
    // A second child while the first runs: refused by the active-children gate.
    h.script(anthropic_tool_use(
        "toolu_second",
        "sessions_spawn",
        json!({"task": "second"}),
    ));
    h.script(anthropic_text("Cannot."));
    h.say("another one").await;
    assert!(h.take_queued().await.is_empty());
    let refused = h.last_request();
    assert!(
        refused.contains("sessions_spawn has reached max active children for this session (1/1)"),
        "{refused}"
    );
}

/// Handles `start` with the child's turn left open and committed: it reads a file, then its
/// next model call fails in a way worth retrying (the queue would redeliver).
async fn leave_child_mid_turn(h: &Harness, start: &SessionEvent) {
    h.script(anthropic_tool_use(
        "toolu_read",
        "read",
        json!({"path": "notes.md"}),
    ));
    h.model.push(
        MESSAGES,
        ScriptedReply::raw(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        ),
    );
    assert!(h.turns.handle(start).await.is_err(), "left for redelivery");
    let child = h.state(&start.session_key).await;
    assert!(
        child.meta.turn_open,
        "the child's turn is open and committed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_child_takes_no_further_step_and_announces_nothing() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("a long job").await;
    leave_child_mid_turn(&h, &start).await;
    let calls = h.model_calls();

    // WHEN the parent kills it
    h.script(anthropic_tool_use(
        "toolu_kill",
        "subagents",
        json!({"action": "kill", "target": "last"}),
    ));
    h.script(anthropic_text("Stopped it."));
    h.say("stop the helper").await;
    let killed = h.last_request();
    assert!(killed.contains("killed helper."), "{killed}");

    // THEN the redelivered start takes no step, and nothing is announced
    h.turns.handle(&start).await.expect("redelivery");
    assert_eq!(h.model_calls(), calls + 2, "only the parent's two calls");
    assert!(h.take_queued().await.is_empty());
    let child = h.state(&start.session_key).await;
    assert!(!child.meta.turn_open);
    assert_eq!(child.meta.subagent.expect("a run").status, "killed");
    assert_eq!(h.state(MAIN).await.meta.children[0].status, "killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owners_stop_kills_the_running_children_and_says_so() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("a long job").await;
    leave_child_mid_turn(&h, &start).await;
    let calls = h.model_calls();

    // WHEN the owner says /stop in the parent's chat
    let stop = SessionEvent {
        session_key: MAIN.to_owned(),
        agent_id: "main".to_owned(),
        event: TurnEvent::Stop(clawless_core::turn::events::InboundMessage {
            message_id: "m-stop".to_owned(),
            chat: clawless_core::turn::events::ChatRef {
                channel: "generic".to_owned(),
                chat_id: format!("c-{MAIN}"),
                chat_type: clawless_base::session_key::ChatType::Direct,
            },
            sender_id: "u-1".to_owned(),
            text: "/stop".to_owned(),
            sender_is_owner: true,
            attachments: Vec::new(),
        }),
    };
    h.turns.handle(&stop).await.expect("stop");

    // THEN the child is killed without a model call, and the chat is told
    assert_eq!(h.model_calls(), calls, "no model call for a stop");
    assert_eq!(h.state(MAIN).await.meta.children[0].status, "killed");
    h.turns.handle(&start).await.expect("redelivery");
    assert_eq!(h.model_calls(), calls, "the killed child takes no step");
    let child = h.state(&start.session_key).await;
    assert_eq!(child.meta.subagent.expect("a run").status, "killed");
    let replies = h
        .receiver
        .wait_for(2, std::time::Duration::from_secs(5))
        .await;
    let stopped = replies.last().expect("the stop's answer");
    assert!(
        stopped.body["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("⏹️ Stopped.") && text.contains("killed")),
        "{:?}",
        stopped.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_past_its_time_limit_is_announced_as_timed_out() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("a slow job").await;
    leave_child_mid_turn(&h, &start).await;
    let run_id = h
        .state(&start.session_key)
        .await
        .meta
        .subagent
        .expect("a run")
        .start
        .run_id;
    let timeout = SessionEvent {
        session_key: start.session_key.clone(),
        agent_id: start.agent_id.clone(),
        event: TurnEvent::SubagentTimeout { run_id },
    };
    h.turns.handle(&timeout).await.expect("timeout");
    h.turns.handle(&timeout).await.expect("timeout redelivered");
    let announces = h.take_queued().await;
    assert_eq!(announces.len(), 1, "{announces:?}");
    let TurnEvent::SubagentAnnounce { text, status, .. } = &announces[0].event else {
        panic!("{announces:?}");
    };
    assert_eq!(status, "timeout");
    assert!(text.contains("status: timed out"), "{text}");
    let calls = h.model_calls();
    h.turns.handle(&start).await.expect("redelivery");
    assert_eq!(
        h.model_calls(),
        calls,
        "a timed-out child takes no further step"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_with_a_time_limit_arms_its_timeout_when_it_starts() {
    let mut h = Harness::new("", "", false).await;
    h.script(anthropic_tool_use(
        "toolu_spawn",
        "sessions_spawn",
        json!({"task": "quick", "runTimeoutSeconds": 30}),
    ));
    h.script(anthropic_text("On it."));
    h.say("delegate with a limit").await;
    let start = h.take_queued().await.remove(0);
    h.script(anthropic_text("Done."));
    let before = SystemClock.now_ms();
    h.turns.handle(&start).await.expect("child");
    let armed: Vec<_> = h
        .timers
        .pending()
        .into_iter()
        .filter(|timer| timer.timer_id.starts_with("subagent-timeout:"))
        .collect();
    assert_eq!(armed.len(), 1, "{armed:?}");
    let due = armed[0].due_at_ms;
    assert!(due >= before + 30_000 && due <= SystemClock.now_ms() + 30_000);
    assert_eq!(armed[0].event.session_key, start.session_key);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_child_is_archived_by_its_timer_and_stays_readable() {
    let mut h = Harness::new("    subagents: { archiveAfterMinutes: 60 }\n", "", false).await;
    let start = h.spawn("archive me").await;
    h.script(anthropic_text("Done."));
    let before = SystemClock.now_ms();
    h.turns.handle(&start).await.expect("child");
    let archive: Vec<_> = h
        .timers
        .pending()
        .into_iter()
        .filter(|timer| timer.timer_id.starts_with("subagent-archive:"))
        .collect();
    assert_eq!(archive.len(), 1, "{archive:?}");
    assert!(archive[0].due_at_ms >= before + 60 * 60_000);
    h.turns.handle(&archive[0].event).await.expect("archive");
    let child = h.state(&start.session_key).await;
    assert!(child.meta.subagent.expect("a run").archived);
    assert!(
        child.steps.len() >= 2,
        "the transcript stays: {} steps",
        child.steps.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_spawned_with_cleanup_delete_is_archived_when_it_reports() {
    let mut h = Harness::new("", "", false).await;
    h.script(anthropic_tool_use(
        "toolu_spawn",
        "sessions_spawn",
        json!({"task": "one-off", "cleanup": "delete"}),
    ));
    h.script(anthropic_text("On it."));
    h.say("delegate a one-off").await;
    let start = h.take_queued().await.remove(0);
    h.script(anthropic_text("Done."));
    h.turns.handle(&start).await.expect("child");
    let child = h.state(&start.session_key).await;
    let run = child.meta.subagent.expect("a run");
    assert!(run.announced && run.archived, "{run:?}");
    assert!(child.steps.len() >= 2, "its transcript stays");
    assert_eq!(h.take_queued().await.len(), 1, "and it was announced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steered_child_drops_its_run_and_starts_over_with_the_message() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("count the red cars").await;
    leave_child_mid_turn(&h, &start).await;

    // WHEN the parent steers it
    h.script(anthropic_tool_use(
        "toolu_steer",
        "subagents",
        json!({"action": "steer", "target": "helper", "message": "Count the blue cars instead."}),
    ));
    h.script(anthropic_text("Redirected."));
    h.say("make it blue cars").await;
    let answer = h.last_request();
    assert!(answer.contains("steered helper."), "{answer}");
    let restarts = h.take_queued().await;
    assert_eq!(restarts.len(), 1, "{restarts:?}");

    // THEN the old run's redelivery takes no step, the new run starts with the message, and
    // only the new run is announced
    let calls = h.model_calls();
    h.turns.handle(&start).await.expect("old run redelivered");
    assert_eq!(h.model_calls(), calls);
    h.script(anthropic_text("12 blue cars"));
    h.turns.handle(&restarts[0]).await.expect("new run");
    let child = h.last_request();
    assert!(child.contains("Count the blue cars instead."), "{child}");
    let announces = h.take_queued().await;
    assert_eq!(announces.len(), 1, "{announces:?}");
    let TurnEvent::SubagentAnnounce { text, .. } = &announces[0].event else {
        panic!("{announces:?}");
    };
    assert!(text.contains("12 blue cars"), "{text}");
    // A second steer within 2 s is refused.
    h.script(anthropic_tool_use(
        "toolu_steer2",
        "subagents",
        json!({"action": "steer", "target": "helper", "message": "Never mind."}),
    ));
    h.script(anthropic_text("Too soon."));
    h.say("again").await;
    let refused = h.last_request();
    assert!(refused.contains("rate_limited"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_killed_before_it_starts_never_runs() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("never mind").await;
    h.script(anthropic_tool_use(
        "toolu_kill",
        "subagents",
        json!({"action": "kill", "target": "all"}),
    ));
    h.script(anthropic_text("Cancelled."));
    h.say("cancel it").await;
    let calls = h.model_calls();
    h.turns
        .handle(&start)
        .await
        .expect("the start arrives late");
    assert_eq!(
        h.model_calls(),
        calls,
        "the killed child never calls the model"
    );
    assert!(h.take_queued().await.is_empty(), "nothing announced");
    let killed = h.model.requests_to(MESSAGES)[calls - 1].raw_body.clone();
    assert!(killed.contains("killed 1 subagents."), "{killed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_commands_list_inspect_and_kill_children_without_the_model() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("a long job").await;
    h.script(anthropic_text("Working on it."));
    h.turns.handle(&start).await.expect("child");
    let announce = h.take_queued().await.remove(0);
    h.script(anthropic_text("The helper is done."));
    h.turns.handle(&announce).await.expect("announce");
    let calls = h.model_calls();

    h.say("/subagents list").await;
    h.say("/subagents info 1").await;
    h.say("/subagents log helper").await;
    h.say("/subagents frobnicate").await;
    h.say("/kill all").await;

    assert_eq!(h.model_calls(), calls, "commands never reach the model");
    let texts = h.chat_texts();
    let answers = &texts[texts.len() - 5..];
    assert!(
        answers[0].contains("recent (last 30m):") && answers[0].contains("helper"),
        "{answers:?}"
    );
    assert!(
        answers[1].contains(&format!("session: {}", start.session_key)),
        "{answers:?}"
    );
    assert!(
        answers[2].contains("assistant: Working on it.")
            && answers[2].contains("[Subagent Task]: a long job"),
        "{answers:?}"
    );
    assert!(
        answers[3].starts_with("Usage: /subagents list"),
        "{answers:?}"
    );
    assert_eq!(answers[4], "no running subagents to kill.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orchestrators_announce_waits_for_its_own_children() {
    let mut h = Harness::new("    subagents: { maxSpawnDepth: 2 }\n", "", false).await;
    let start = h.spawn("orchestrate").await;
    // The child spawns a grandchild, then ends its turn.
    h.script(anthropic_tool_use(
        "toolu_grand",
        "sessions_spawn",
        json!({"task": "dig", "label": "digger"}),
    ));
    h.script(anthropic_text("Waiting for the digger."));
    h.turns.handle(&start).await.expect("child");
    let queued = h.take_queued().await;
    assert_eq!(queued.len(), 1, "only the grandchild's start: {queued:?}");
    let grand_start = &queued[0];
    assert!(matches!(grand_start.event, TurnEvent::SubagentStart(_)));

    // WHEN the grandchild finishes, its announce goes to the child
    h.script(anthropic_text("Found 7 holes."));
    h.turns.handle(grand_start).await.expect("grandchild");
    let announce = h.take_queued().await;
    assert_eq!(announce.len(), 1, "{announce:?}");
    assert_eq!(announce[0].session_key, start.session_key);

    // THEN the child's turn on it ends the wait, and its own announce goes up with it
    h.script(anthropic_text("All done: 7 holes."));
    h.turns
        .handle(&announce[0])
        .await
        .expect("child takes the announce");
    let up = h.take_queued().await;
    assert_eq!(up.len(), 1, "{up:?}");
    assert_eq!(up[0].session_key, MAIN);
    match &up[0].event {
        TurnEvent::SubagentAnnounce { text, .. } => {
            assert!(text.contains("All done: 7 holes."), "{text}");
        }
        other => panic!("not an announce: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_an_orchestrator_kills_its_children_too() {
    let mut h = Harness::new("    subagents: { maxSpawnDepth: 2 }\n", "", false).await;
    let start = h.spawn("orchestrate").await;
    h.script(anthropic_tool_use(
        "toolu_grand",
        "sessions_spawn",
        json!({"task": "dig", "label": "digger"}),
    ));
    h.script(anthropic_text("Waiting for the digger."));
    h.turns.handle(&start).await.expect("child");
    let grand_start = h.take_queued().await.remove(0);

    h.script(anthropic_tool_use(
        "toolu_kill",
        "subagents",
        json!({"action": "kill", "target": "helper"}),
    ));
    h.script(anthropic_text("Stopped."));
    h.say("stop everything").await;
    let killed = h.last_request();
    assert!(
        killed.contains("killed helper (+ 1 descendants)."),
        "{killed}"
    );

    // The grandchild, killed before it started, never runs.
    let calls = h.model_calls();
    h.turns
        .handle(&grand_start)
        .await
        .expect("grandchild start");
    assert_eq!(h.model_calls(), calls);
    let grandchild = h.state(&grand_start.session_key).await;
    assert_eq!(grandchild.meta.subagent.expect("a run").status, "killed");
    assert!(h.take_queued().await.is_empty(), "nothing announced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_to_a_running_child_does_not_replace_its_result() {
    let mut h = Harness::new("", "", false).await;
    let start = h.spawn("compute the answer").await;
    leave_child_mid_turn(&h, &start).await;
    h.script(anthropic_tool_use(
        "toolu_send",
        "sessions_send",
        json!({"label": "helper", "message": "How far along are you?", "timeoutSeconds": 0}),
    ));
    h.script(anthropic_text("Asked."));
    h.say("ask the helper how far it is").await;
    let request = h.take_queued().await.remove(0);
    assert_eq!(request.session_key, start.session_key);

    // The child's open turn finishes first, then it answers the message.
    h.script(anthropic_text("Task result: 42."));
    h.script(anthropic_text("Halfway there."));
    h.turns.handle(&request).await.expect("child");
    let queued = h.take_queued().await;
    let announce = queued
        .iter()
        .find_map(|event| match &event.event {
            TurnEvent::SubagentAnnounce { text, .. } => Some(text.clone()),
            _ => None,
        })
        .expect("the child's announce");
    assert!(announce.contains("Task result: 42."), "{announce}");
    assert!(!announce.contains("Halfway there."), "{announce}");
    assert!(
        queued
            .iter()
            .any(|event| matches!(&event.event, TurnEvent::AgentMessage(_))),
        "the exchange goes on: {queued:?}"
    );
}

/// Every file below `dir`, as paths relative to it.
fn files_below(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).expect("readable dir") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                pending.push(path);
            } else {
                let relative = path.strip_prefix(dir).expect("below dir");
                found.push(relative.display().to_string());
            }
        }
    }
    found.sort();
    found
}

/// The parent calls `sessions_spawn` with `args` as tool call `toolu_files`, then says "Ok.".
async fn spawn_with(h: &mut Harness, args: Value) {
    h.script(anthropic_tool_use("toolu_files", "sessions_spawn", args));
    h.script(anthropic_text("Ok."));
    h.say("hand the files to a helper").await;
}

const NOTES: &str = "line one\nline two\n";
const NOTES_SHA256: &str = "e9024f1a07d29d52ad3aa5e1a18e94db1f3a9fd32b89e39d47c472cd99071e13";
/// The bytes 00 01 02 fd fe ff.
const DATA_BASE64: &str = "AAEC/f7/";
const DATA_SHA256: &str = "3f2d1552cdc7483f40dd720c80b900225dfecfd5cae7cd168d79ab6ee5959885";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_land_in_the_child_directory_and_the_child_is_told_where() {
    let mut h = Harness::new("", "", false).await;
    // WHEN the parent spawns a child with a text file and a base64 one
    spawn_with(
        &mut h,
        json!({
            "task": "summarise the attached files",
            "label": "reader",
            "attachments": [
                {"name": "notes.txt", "content": NOTES},
                {"name": "data.bin", "content": DATA_BASE64, "encoding": "base64", "mimeType": "application/octet-stream"}
            ]
        }),
    )
    .await;
    let mut queued = h.take_queued().await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let start = queued.remove(0);
    let uuid = start
        .session_key
        .strip_prefix("agent:main:subagent:")
        .expect("a child key")
        .to_owned();
    let rel_dir = format!("attachments/{uuid}/");

    // THEN both files are in the workspace under attachments/<uuid>/, with their bytes
    let workspace = h.dir.path().join("workspace");
    assert_eq!(
        files_below(&workspace),
        [format!("{rel_dir}data.bin"), format!("{rel_dir}notes.txt")]
    );
    assert_eq!(
        std::fs::read(workspace.join(&rel_dir).join("notes.txt")).expect("notes"),
        NOTES.as_bytes()
    );
    assert_eq!(
        std::fs::read(workspace.join(&rel_dir).join("data.bin")).expect("data"),
        [0x00, 0x01, 0x02, 0xfd, 0xfe, 0xff]
    );

    // AND the accepted result reports them
    let (answer, is_error) = h.tool_result("toolu_files");
    assert!(!is_error, "{answer}");
    assert_eq!(answer["status"], "accepted");
    assert_eq!(answer["childSessionKey"], start.session_key);
    assert_eq!(
        answer["attachments"],
        json!({
            "count": 2,
            "totalBytes": NOTES.len() + 6,
            "files": [
                {"name": "notes.txt", "bytes": NOTES.len(), "sha256": NOTES_SHA256},
                {"name": "data.bin", "bytes": 6, "sha256": DATA_SHA256}
            ],
            "relDir": rel_dir
        })
    );

    // AND the child's first message names the directory and the files
    let TurnEvent::SubagentStart(child_start) = &start.event else {
        panic!("not a start: {start:?}");
    };
    let line = format!("[Subagent Attachments] 2 file(s) in {rel_dir}: notes.txt, data.bin");
    assert!(
        child_start.first_message.contains(&line),
        "{}",
        child_start.first_message
    );
    h.script(anthropic_text("Two files: notes and six bytes."));
    h.turns.handle(&start).await.expect("child");
    let child_request = h.last_request();
    assert!(child_request.contains(&line), "{child_request}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_attachment_name_is_refused_before_anything_is_written_or_queued() {
    let mut h = Harness::new("", "", false).await;
    let before = files_below(h.dir.path());
    spawn_with(
        &mut h,
        json!({
            "task": "install this",
            "attachments": [
                {"name": "harmless.txt", "content": "hi"},
                {"name": "../../etc/passwd", "content": "root::0:0:root:/root:/bin/sh\n"}
            ]
        }),
    )
    .await;
    let (answer, is_error) = h.tool_result("toolu_files");
    assert!(is_error, "{answer}");
    assert_eq!(answer["status"], "error");
    assert!(
        answer["error"]
            .as_str()
            .expect("a message")
            .starts_with(r#"Invalid attachment name "../../etc/passwd": "#),
        "{answer}"
    );
    assert!(h.take_queued().await.is_empty(), "nothing queued");
    assert!(h.state(MAIN).await.meta.children.is_empty(), "no child");
    let after = files_below(h.dir.path());
    let new_files: Vec<&String> = after
        .iter()
        .filter(|path| !before.contains(path) && !path.starts_with("state.db"))
        .collect();
    assert!(new_files.is_empty(), "written: {new_files:?}");
    assert!(!h.dir.path().join("workspace/attachments").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawn_whose_files_cannot_be_written_queues_nothing() {
    let mut h = Harness::new("", "", false).await;
    // A file where the attachments directory should be: no file can be written below it.
    std::fs::write(h.dir.path().join("workspace/attachments"), "in the way").expect("fixture");
    spawn_with(
        &mut h,
        json!({"task": "read it", "attachments": [{"name": "a.txt", "content": "a"}]}),
    )
    .await;
    let (answer, is_error) = h.tool_result("toolu_files");
    assert!(is_error, "{answer}");
    assert_eq!(answer["status"], "error");
    assert!(
        answer["error"]
            .as_str()
            .expect("a message")
            .starts_with("Failed to register subagent run: workspace unavailable: "),
        "{answer}"
    );
    assert!(h.take_queued().await.is_empty(), "nothing queued");
    assert!(h.state(MAIN).await.meta.children.is_empty(), "no child");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_children_keep_failing_is_not_spawned_a_fourth_time() {
    let mut h = Harness::new("", "", false).await;
    // GIVEN three children given the same task, each failing, each result taken
    for _ in 0..3 {
        let start = h.spawn("flaky job").await;
        h.model.push(
            MESSAGES,
            ScriptedReply::raw(
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}"#,
            ),
        );
        h.turns.handle(&start).await.expect("child");
        let announce = h.take_queued().await.remove(0);
        h.script(anthropic_text("It failed; trying again."));
        h.turns.handle(&announce).await.expect("announce");
    }

    // WHEN the parent tries once more
    h.script(anthropic_tool_use(
        "toolu_again",
        "sessions_spawn",
        json!({"task": "flaky job"}),
    ));
    h.script(anthropic_text("I will stop retrying."));
    h.say("try again").await;

    // THEN the breaker refuses it, and nothing is queued
    let refused = h.last_request();
    assert!(
        refused.contains("the last 3 sub-agents given this task failed"),
        "{refused}"
    );
    assert!(h.take_queued().await.is_empty());
    assert_eq!(h.state(MAIN).await.meta.children.len(), 3);
}
