//! The session tools through the turn service (spec `openclaw-automation.md` §3.7–§3.9), with
//! the model scripted and the turn queue pumped by hand: a parent lists itself and the child
//! it spawned (visibility `tree`) and reads the child's history; a session outside its tree,
//! and another agent's, are refused with OpenClaw's messages; `agent` visibility with a
//! session listing sees the agent's other sessions; a leaf sub-agent is not offered the
//! session tools; `agents_list` names the caller first. `sessions_send` waits for the
//! target's answer as queued turns (never in-process), goes on with the ping-pong and
//! announce steps to their limits, posts a non-silent announce to the target's chat, and
//! answers `timeout` from its timer.

mod support;

use clawless_core::turn::events::{SessionEvent, TurnEvent};
use serde_json::{Value, json};
use support::subagent_harness::{Harness, MAIN};
use support::{anthropic_text, anthropic_tool_use};

/// A session of the same agent outside the parent's tree (another chat).
const OTHER: &str = "agent:main:generic:direct:u-2";

impl Harness {
    /// The parent spawns a child labelled `helper` for `task`, the child answers `result`,
    /// and the parent takes the announce. Returns the child's key.
    async fn spawn_and_finish(&mut self, task: &str, result: &str) -> String {
        self.script(anthropic_tool_use(
            "toolu_spawn",
            "sessions_spawn",
            json!({"task": task, "label": "helper"}),
        ));
        self.script(anthropic_text("On it."));
        self.say(&format!("please delegate {task}")).await;
        let mut queued = self.take_queued().await;
        assert_eq!(queued.len(), 1, "{queued:?}");
        let start = queued.remove(0);
        self.script(anthropic_text(result));
        self.turns.handle(&start).await.expect("child");
        let announces = self.take_queued().await;
        assert_eq!(announces.len(), 1, "{announces:?}");
        self.script(anthropic_text("Your helper is done."));
        self.turns.handle(&announces[0]).await.expect("announce");
        start.session_key
    }

    /// The parent calls `calls` (name, input) one after the other, then answers "ok".
    async fn call_tools(&mut self, calls: &[(&str, &str, Value)]) {
        for (id, name, input) in calls {
            self.script(anthropic_tool_use(id, name, input.clone()));
        }
        self.script(anthropic_text("ok"));
        self.say("check on things").await;
    }
}

/// The `sessions_list` row of `key`.
fn row<'a>(listed: &'a Value, key: &str) -> &'a Value {
    listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .find(|row| row["key"] == key)
        .unwrap_or_else(|| panic!("{key} not listed: {listed}"))
}

fn keys(listed: &Value) -> Vec<String> {
    let mut keys: Vec<String> = listed["sessions"]
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|row| row["key"].as_str().map(str::to_owned))
        .collect();
    keys.sort();
    keys
}

fn texts(message: &Value) -> String {
    message["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parent_lists_itself_and_its_child_and_reads_the_childs_history() {
    let mut h = Harness::new("", "", false).await;
    // GIVEN another chat of the same agent, and a child the main session spawned
    h.script(anthropic_text("Hello other."));
    h.say_in(OTHER, "hi from elsewhere").await;
    let child = h.spawn_and_finish("count the files", "Done: 3 files").await;

    // WHEN the parent lists its sessions and reads the child's history
    h.call_tools(&[
        ("toolu_list", "sessions_list", json!({"messageLimit": 2})),
        (
            "toolu_history",
            "sessions_history",
            json!({"sessionKey": child}),
        ),
    ])
    .await;

    // THEN it sees itself and its child (tree), not the other chat
    let (listed, is_error) = h.tool_result("toolu_list");
    assert!(!is_error, "{listed}");
    assert_eq!(listed["count"], 2, "{listed}");
    let mut expected = vec![MAIN.to_owned(), child.clone()];
    expected.sort();
    assert_eq!(keys(&listed), expected);
    let parent = row(&listed, MAIN);
    assert_eq!(parent["kind"], "main");
    assert_eq!(parent["channel"], "generic");
    assert_eq!(parent["childSessions"], json!([child]));
    assert!(parent.get("spawnedBy").is_none());
    let kid = row(&listed, &child);
    assert_eq!(kid["spawnedBy"], MAIN);
    assert_eq!(kid["label"], "helper");
    assert_eq!(kid["status"], "done");
    assert_eq!(kid["channel"], "internal");
    assert_eq!(kid["totalTokens"], 128);
    assert!(
        kid["endedAt"].is_u64() && kid["updatedAt"].is_u64(),
        "{kid}"
    );
    let messages = kid["messages"].as_array().expect("messages");
    assert_eq!(messages.len(), 2, "{kid}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(texts(&messages[1]), "Done: 3 files");

    // AND the child's history: its task and its answer
    let (history, is_error) = h.tool_result("toolu_history");
    assert!(!is_error, "{history}");
    assert_eq!(history["sessionKey"], child.as_str());
    assert_eq!(history["truncated"], false);
    let messages = history["messages"].as_array().expect("messages");
    assert!(
        texts(&messages[0]).contains("[Subagent Task]: count the files"),
        "{history}"
    );
    assert_eq!(texts(messages.last().expect("a message")), "Done: 3 files");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_outside_the_tree_and_other_agents_are_refused() {
    let mut h = Harness::new("", "", false).await;
    h.script(anthropic_text("Hello other."));
    h.say_in(OTHER, "hi from elsewhere").await;
    h.call_tools(&[
        (
            "toolu_other",
            "sessions_history",
            json!({"sessionKey": OTHER}),
        ),
        (
            "toolu_ops",
            "sessions_history",
            json!({"sessionKey": "agent:ops:main"}),
        ),
        (
            "toolu_self",
            "sessions_history",
            json!({"sessionKey": "main"}),
        ),
    ])
    .await;
    let (refused, is_error) = h.tool_result("toolu_other");
    assert!(is_error);
    assert_eq!(
        refused,
        json!({
            "status": "forbidden",
            "error": "Session history visibility is restricted to the current session tree (tools.sessions.visibility=tree)."
        })
    );
    let (refused, _) = h.tool_result("toolu_ops");
    assert_eq!(
        refused["error"],
        "Session history visibility is restricted. Set tools.sessions.visibility=all to allow cross-agent access."
    );
    // Its own session, by the `main` alias, is always visible.
    let (own, is_error) = h.tool_result("toolu_self");
    assert!(!is_error, "{own}");
    assert_eq!(own["sessionKey"], MAIN);
    assert!(
        texts(&own["messages"][0]).contains("check on things"),
        "the caller's own turn, read from memory: {own}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_visibility_with_a_listing_sees_the_agents_other_sessions() {
    let mut h = Harness::new("", "  sessions: { visibility: agent }\n", true).await;
    h.script(anthropic_text("Hello other."));
    h.say_in(OTHER, "hi from elsewhere").await;
    h.call_tools(&[
        ("toolu_list", "sessions_list", json!({})),
        ("toolu_mains", "sessions_list", json!({"kinds": ["main"]})),
        (
            "toolu_other",
            "sessions_history",
            json!({"sessionKey": OTHER, "limit": 1}),
        ),
    ])
    .await;
    let (listed, _) = h.tool_result("toolu_list");
    assert_eq!(keys(&listed), [OTHER, MAIN], "{listed}");
    assert_eq!(row(&listed, OTHER)["kind"], "other");
    let (mains, _) = h.tool_result("toolu_mains");
    assert_eq!(keys(&mains), [MAIN], "{mains}");
    let (history, is_error) = h.tool_result("toolu_other");
    assert!(!is_error, "{history}");
    assert_eq!(history["messages"].as_array().map(Vec::len), Some(1));
    assert_eq!(texts(&history["messages"][0]), "Hello other.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leaf_subagent_is_not_offered_the_session_tools() {
    let session_tools = ["agents_list", "sessions_list", "sessions_history"];
    let mut h = Harness::new("", "", false).await;
    h.spawn_and_finish("count the files", "Done: 3 files").await;
    // Requests: the parent's two, the child's one, the parent's announce turn.
    let parent = h.offered(0);
    for tool in session_tools {
        assert!(parent.contains(&tool.to_owned()), "{tool}: {parent:?}");
    }
    let leaf = h.offered(2);
    for tool in session_tools {
        assert!(!leaf.contains(&tool.to_owned()), "{tool}: {leaf:?}");
    }

    // A child that may spawn its own keeps the list and history tools, never agents_list.
    let mut h = Harness::new("    subagents: { maxSpawnDepth: 2 }\n", "", false).await;
    h.spawn_and_finish("orchestrate", "Done.").await;
    let orchestrator = h.offered(2);
    assert!(
        orchestrator.contains(&"sessions_list".to_owned()),
        "{orchestrator:?}"
    );
    assert!(orchestrator.contains(&"sessions_history".to_owned()));
    assert!(!orchestrator.contains(&"agents_list".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_list_names_the_caller_first_then_the_allowed_agents() {
    let agents = "    subagents: { allowAgents: [\"*\"] }\n  list:\n    - id: research\n    - id: main\n    - id: ops\n";
    let mut h = Harness::new(agents, "", false).await;
    h.call_tools(&[("toolu_agents", "agents_list", json!({}))])
        .await;
    let (listed, is_error) = h.tool_result("toolu_agents");
    assert!(!is_error, "{listed}");
    assert_eq!(
        listed,
        json!({
            "requester": "main",
            "allowAny": true,
            "agents": [
                {"id": "main", "configured": true},
                {"id": "ops", "configured": true},
                {"id": "research", "configured": true}
            ]
        })
    );

    let mut h = Harness::new("    subagents: { allowAgents: [ops] }\n", "", false).await;
    h.call_tools(&[("toolu_agents", "agents_list", json!({}))])
        .await;
    let (listed, _) = h.tool_result("toolu_agents");
    assert_eq!(
        listed["agents"],
        json!([{"id": "main", "configured": true}, {"id": "ops", "configured": false}])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tree_reaches_grandchildren_through_the_child() {
    let mut h = Harness::new("    subagents: { maxSpawnDepth: 2 }\n", "", false).await;
    // GIVEN a child that spawns a grandchild of its own
    h.script(anthropic_tool_use(
        "toolu_spawn",
        "sessions_spawn",
        json!({"task": "orchestrate", "label": "lead"}),
    ));
    h.script(anthropic_text("On it."));
    h.say("please delegate").await;
    let start = h.take_queued().await.remove(0);
    h.script(anthropic_tool_use(
        "toolu_spawn",
        "sessions_spawn",
        json!({"task": "dig", "label": "digger"}),
    ));
    h.script(anthropic_text("Waiting on the digger."));
    h.turns.handle(&start).await.expect("child");
    let grandchild_start = h
        .take_queued()
        .await
        .into_iter()
        .find(|event| matches!(event.event, TurnEvent::SubagentStart(_)))
        .expect("the grandchild's start");
    h.script(anthropic_text("Dug."));
    h.turns.handle(&grandchild_start).await.expect("grandchild");
    let child = start.session_key;
    let grandchild = grandchild_start.session_key;

    // WHEN the top-level session lists and reads
    h.call_tools(&[
        ("toolu_list", "sessions_list", json!({})),
        (
            "toolu_history",
            "sessions_history",
            json!({"sessionKey": grandchild}),
        ),
    ])
    .await;

    // THEN the grandchild is in its tree, spawned by the child
    let (listed, _) = h.tool_result("toolu_list");
    assert_eq!(listed["count"], 3, "{listed}");
    assert_eq!(row(&listed, &grandchild)["spawnedBy"], child.as_str());
    assert_eq!(row(&listed, &child)["childSessions"], json!([grandchild]));
    let (history, is_error) = h.tool_result("toolu_history");
    assert!(!is_error, "{history}");
    assert_eq!(
        texts(
            history["messages"]
                .as_array()
                .and_then(|m| m.last())
                .expect("a message")
        ),
        "Dug."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archived_child_is_no_longer_listed_but_its_history_stays() {
    let mut h = Harness::new("", "", false).await;
    let child = h.spawn_and_finish("count the files", "Done: 3 files").await;
    let run_id = h
        .state(&child)
        .await
        .meta
        .subagent
        .expect("a run")
        .start
        .run_id;
    let archive = SessionEvent {
        session_key: child.clone(),
        agent_id: "main".to_owned(),
        event: TurnEvent::SubagentArchive { run_id },
    };
    h.turns.handle(&archive).await.expect("archive");
    h.call_tools(&[
        ("toolu_list", "sessions_list", json!({})),
        (
            "toolu_history",
            "sessions_history",
            json!({"sessionKey": child}),
        ),
    ])
    .await;
    let (listed, _) = h.tool_result("toolu_list");
    assert_eq!(keys(&listed), [MAIN], "{listed}");
    assert!(
        row(&listed, MAIN).get("childSessions").is_none(),
        "{listed}"
    );
    let (history, is_error) = h.tool_result("toolu_history");
    assert!(!is_error, "{history}");
    assert_eq!(
        texts(
            history["messages"]
                .as_array()
                .and_then(|m| m.last())
                .expect("a message")
        ),
        "Done: 3 files"
    );
}

fn agent_message_step(event: &SessionEvent) -> Option<String> {
    match &event.event {
        TurnEvent::AgentMessage(message) => Some(message.message_id.clone()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_is_answered_then_ping_pong_and_announce_run_as_queued_turns() {
    let mut h = Harness::new(
        "",
        "session:\n  agentToAgent: { maxPingPongTurns: 2 }\n",
        false,
    )
    .await;
    let child = h.spawn_and_finish("count the files", "Done: 3 files").await;
    let before_send = h.model_calls();

    // WHEN the parent sends its child a message by label and waits for the answer
    h.script(anthropic_tool_use(
        "toolu_send",
        "sessions_send",
        json!({"label": "helper", "message": "Which files?", "timeoutSeconds": 30}),
    ));
    h.say("ask the helper which files").await;

    // THEN its turn waits (one model call), with a timeout armed, and the request is queued
    assert_eq!(h.model_calls(), before_send + 1);
    let armed: Vec<_> = h
        .timers
        .pending()
        .into_iter()
        .filter(|timer| timer.timer_id.starts_with("a2a-timeout:"))
        .collect();
    assert_eq!(armed.len(), 1, "{armed:?}");
    assert_eq!(armed[0].event.session_key, MAIN);
    let mut queued = h.take_queued().await;
    assert_eq!(queued.len(), 1, "{queued:?}");
    let request = queued.remove(0);
    assert_eq!(request.session_key, child);
    assert!(agent_message_step(&request).is_some_and(|id| id.ends_with(":request")));

    // WHEN the child answers it
    h.script(anthropic_text("a.txt, b.txt and c.txt"));
    h.turns.handle(&request).await.expect("request step");
    let child_prompt = h.system_prompt(before_send + 1);
    assert!(
        child_prompt.contains("Agent-to-agent message context:")
            && child_prompt.contains(&format!("Agent 2 (target) session: {child}.")),
        "{child_prompt}"
    );
    assert!(
        !h.offered(before_send + 1)
            .contains(&"sessions_send".to_owned())
    );
    // A redelivered request is taken once.
    h.turns.handle(&request).await.expect("redelivered request");
    assert_eq!(h.model_calls(), before_send + 2);

    // THEN the answer goes back to the waiting call, and the first reply step to the parent
    let queued = h.take_queued().await;
    assert_eq!(queued.len(), 2, "{queued:?}");
    assert!(queued.iter().all(|event| event.session_key == MAIN));
    assert!(matches!(queued[0].event, TurnEvent::ToolResult { .. }));
    assert!(agent_message_step(&queued[1]).is_some_and(|id| id.ends_with(":reply1")));
    h.script(anthropic_text("The helper counted a.txt, b.txt and c.txt."));
    h.turns.handle(&queued[0]).await.expect("answer");
    let (answer, is_error) = h.tool_result("toolu_send");
    assert!(!is_error, "{answer}");
    assert_eq!(answer["status"], "ok");
    assert_eq!(answer["reply"], "a.txt, b.txt and c.txt");
    assert_eq!(answer["sessionKey"], child.as_str());
    assert_eq!(
        answer["delivery"],
        json!({"status": "pending", "mode": "announce"})
    );

    // WHEN the ping-pong goes on: the parent's turn 1, the child's turn 2 (the last)
    h.script(anthropic_text("Are they all text files?"));
    h.turns.handle(&queued[1]).await.expect("reply step 1");
    let index = h.model_calls() - 1;
    let prompt = h.system_prompt(index);
    assert!(
        prompt.contains("Current agent: Agent 1 (requester).") && prompt.contains("Turn 1 of 2."),
        "{prompt}"
    );
    let step2 = h.take_queued().await;
    assert_eq!(step2.len(), 1, "{step2:?}");
    assert_eq!(step2[0].session_key, child);
    h.script(anthropic_text("Yes, all three."));
    h.turns.handle(&step2[0]).await.expect("reply step 2");
    let prompt = h.system_prompt(index + 1);
    assert!(prompt.contains("Turn 2 of 2."), "{prompt}");

    // THEN the turn limit ends it with the announce step in the child, which stays silent
    let announce = h.take_queued().await;
    assert_eq!(announce.len(), 1, "{announce:?}");
    assert!(agent_message_step(&announce[0]).is_some_and(|id| id.ends_with(":announce")));
    h.script(anthropic_text("ANNOUNCE_SKIP"));
    h.turns.handle(&announce[0]).await.expect("announce step");
    let prompt = h.system_prompt(index + 2);
    assert!(
        prompt.contains("Original request: Which files?")
            && prompt.contains("Round 1 reply: a.txt, b.txt and c.txt")
            && prompt.contains("Latest reply: Yes, all three."),
        "{prompt}"
    );
    assert!(h.take_queued().await.is_empty(), "the exchange is over");
    // Nothing a step said reached a chat; the parent's own answers did.
    let posted = h.chat_texts();
    assert!(
        posted.contains(&"The helper counted a.txt, b.txt and c.txt.".to_owned()),
        "{posted:?}"
    );
    for said in [
        "Are they all text files?",
        "Yes, all three.",
        "ANNOUNCE_SKIP",
    ] {
        assert!(!posted.contains(&said.to_owned()), "{said}: {posted:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_without_waiting_is_accepted_and_the_targets_announce_reaches_its_chat() {
    let mut h = Harness::new(
        "",
        "  sessions: { visibility: agent }\nsession:\n  agentToAgent: { maxPingPongTurns: 1 }\n",
        true,
    )
    .await;
    h.script(anthropic_text("Hello other."));
    h.say_in(OTHER, "hi from elsewhere").await;
    h.call_tools(&[(
        "toolu_send",
        "sessions_send",
        json!({"sessionKey": OTHER, "message": "Tell them the build is green.", "timeoutSeconds": 0}),
    )])
    .await;
    let (answer, is_error) = h.tool_result("toolu_send");
    assert!(!is_error, "{answer}");
    assert_eq!(answer["status"], "accepted");
    assert_eq!(answer["sessionKey"], OTHER);
    assert!(h.timers.pending().is_empty(), "nothing waits");

    // The target answers; the requester's one reply step says REPLY_SKIP.
    let request = h.take_queued().await.remove(0);
    h.script(anthropic_text("Noted."));
    h.turns.handle(&request).await.expect("request step");
    let step = h.take_queued().await;
    assert_eq!(
        step.len(),
        1,
        "no waiting call, only the reply step: {step:?}"
    );
    assert_eq!(step[0].session_key, MAIN);
    h.script(anthropic_text("REPLY_SKIP"));
    h.turns.handle(&step[0]).await.expect("reply step");

    // The announce step's reply is posted to the target's own chat, once.
    let announce = h.take_queued().await;
    assert_eq!(announce.len(), 1, "{announce:?}");
    assert_eq!(announce[0].session_key, OTHER);
    h.script(anthropic_text("The build is green!"));
    h.turns.handle(&announce[0]).await.expect("announce step");
    h.turns.handle(&announce[0]).await.expect("redelivered");
    let posted: Vec<_> = h
        .receiver
        .posted()
        .into_iter()
        .filter(|posted| posted.body["text"] == "The build is green!")
        .collect();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(
        posted[0].body["chat_id"],
        format!("c-{OTHER}"),
        "{:?}",
        posted[0].body
    );
    assert!(!h.chat_texts().contains(&"Noted.".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_that_is_not_answered_in_time_says_timeout_and_a_late_answer_changes_nothing() {
    let mut h = Harness::new("", "", false).await;
    let child = h.spawn_and_finish("count the files", "Done: 3 files").await;
    h.script(anthropic_tool_use(
        "toolu_send",
        "sessions_send",
        json!({"sessionKey": child, "message": "Still there?", "timeoutSeconds": 5}),
    ));
    h.say("ping the helper").await;
    let request = h.take_queued().await.remove(0);

    // WHEN the timer fires before the child answers
    let timer = h
        .timers
        .pending()
        .into_iter()
        .find(|timer| timer.timer_id.starts_with("a2a-timeout:"))
        .expect("a timeout timer");
    h.script(anthropic_text("The helper did not answer in time."));
    h.turns.handle(&timer.event).await.expect("timeout");
    let (answer, is_error) = h.tool_result("toolu_send");
    assert!(!is_error, "{answer}");
    assert_eq!(answer["status"], "timeout");
    assert_eq!(answer["sessionKey"], child.as_str());

    // THEN the child's late answer is not a second result for the call
    h.script(anthropic_text("Yes!"));
    h.turns.handle(&request).await.expect("request step");
    let late = h.take_queued().await;
    let calls = h.model_calls();
    let result = late
        .iter()
        .find(|event| matches!(event.event, TurnEvent::ToolResult { .. }))
        .expect("the late answer");
    h.turns.handle(result).await.expect("late answer");
    assert_eq!(h.model_calls(), calls, "no model call");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_outside_the_tree_to_itself_or_to_an_unknown_label_are_refused() {
    let mut h = Harness::new("", "", false).await;
    h.script(anthropic_text("Hello other."));
    h.say_in(OTHER, "hi from elsewhere").await;
    h.call_tools(&[
        (
            "toolu_other",
            "sessions_send",
            json!({"sessionKey": OTHER, "message": "hi"}),
        ),
        (
            "toolu_self",
            "sessions_send",
            json!({"sessionKey": "main", "message": "hi"}),
        ),
        (
            "toolu_label",
            "sessions_send",
            json!({"label": "nobody", "message": "hi"}),
        ),
        (
            "toolu_both",
            "sessions_send",
            json!({"label": "x", "sessionKey": OTHER, "message": "hi"}),
        ),
    ])
    .await;
    let (refused, is_error) = h.tool_result("toolu_other");
    assert!(is_error);
    assert_eq!(
        refused["error"],
        "Session send visibility is restricted to the current session tree (tools.sessions.visibility=tree)."
    );
    let (refused, _) = h.tool_result("toolu_self");
    assert!(
        refused["error"]
            .as_str()
            .is_some_and(|error| error.contains("cannot target the calling session")),
        "{refused}"
    );
    let (refused, _) = h.tool_result("toolu_label");
    assert_eq!(refused["error"], "No session found with label: nobody");
    let (refused, _) = h.tool_result("toolu_both");
    assert_eq!(
        refused["error"],
        "Provide either sessionKey or label (not both)."
    );
    assert!(h.take_queued().await.is_empty(), "nothing was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_yield_ends_the_turn_and_the_childs_result_is_the_next_message() {
    let mut h = Harness::new("", "", false).await;
    // WHEN the parent spawns a child and yields in the same turn
    h.script(anthropic_tool_use(
        "toolu_spawn",
        "sessions_spawn",
        json!({"task": "count the files", "label": "helper"}),
    ));
    h.script(anthropic_tool_use(
        "toolu_yield",
        "sessions_yield",
        json!({"message": "waiting for the helper"}),
    ));
    h.say("count my files, then tell me").await;

    // THEN the turn ends after the yield: no third model call, nothing said to the chat
    assert_eq!(h.model_calls(), 2);
    assert!(h.chat_texts().is_empty(), "{:?}", h.chat_texts());
    assert!(!h.state(MAIN).await.meta.turn_open);

    // AND the child's result arrives as the next turn, answered in the chat
    let start = h.take_queued().await.remove(0);
    h.script(anthropic_text("Done: 3 files"));
    h.turns.handle(&start).await.expect("child");
    let announce = h.take_queued().await.remove(0);
    h.script(anthropic_text("You have 3 files."));
    h.turns.handle(&announce).await.expect("announce");
    assert_eq!(h.chat_texts(), ["You have 3 files."]);
    let (yielded, is_error) = h.tool_result("toolu_yield");
    assert!(!is_error);
    assert_eq!(yielded["status"], "yielded");
}
