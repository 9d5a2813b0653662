//! Background commands on a node host (spec §4, vectors 14–16), with real commands: an exec
//! job with `yieldMs`/`background` answers `running` with a word-slug session, the `process`
//! actions act on it with the spec's texts, and its exit is posted to a stand-in backend on
//! 127.0.0.1 exactly once per event id — also across a node restart and a backend that
//! refuses the first posts.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_exec::node::wire::JobSandbox;
use clawless_exec::node::wire::{
    Envelope, ExecJob, ExecReport, NodeMessage, NodeResult, ProcessExit, ProcessJob, ProcessReport,
    exit_event_text, running_text, secret_hash, signing_key,
};
use clawless_node::jail::JAIL_UID;
use clawless_node::state::{NodeConfig, StateDir};
use clawless_node::worker::{Handled, NodeWorker};
use serde_json::{Value, json};

const NODE_ID: &str = "node-bg-1";
const SECRET: &str = "node-secret-for-background-tests";
const SESSION: &str = "agent:main:main";

fn key() -> Vec<u8> {
    signing_key(&secret_hash(SECRET))
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// What the stand-in backend received, and whether it refuses exit events for now.
#[derive(Default)]
struct Backend {
    results: Mutex<Vec<NodeResult>>,
    refuse_exits: AtomicBool,
}

impl Backend {
    fn exits(&self) -> Vec<ProcessExit> {
        self.results
            .lock()
            .unwrap()
            .iter()
            .filter_map(|result| match result {
                NodeResult::Exit(exit) => Some(exit.clone()),
                _ => None,
            })
            .collect()
    }
}

async fn results(State(backend): State<Arc<Backend>>, body: String) -> (StatusCode, Json<Value>) {
    let result: NodeResult = Envelope::parse(&body).unwrap().open(&key()).unwrap();
    if matches!(result, NodeResult::Exit(_)) && backend.refuse_exits.load(Ordering::SeqCst) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"error": "busy"})),
        );
    }
    backend.results.lock().unwrap().push(result);
    (StatusCode::OK, Json(json!({"changed": true})))
}

async fn start_backend() -> (String, Arc<Backend>) {
    let backend = Arc::new(Backend::default());
    let app = Router::new()
        .route("/nodes/results", post(results))
        .route(
            "/nodes/heartbeat",
            post(|| async { Json(json!({"policyVersion": 0, "granted": []})) }),
        )
        .route("/skills/bins", get(|| async { Json(json!({"bins": []})) }))
        .route(
            "/nodes/jobs",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                Json(json!({"jobs": []}))
            }),
        )
        .with_state(Arc::clone(&backend));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, backend)
}

fn node_state(root: &Path, url: &str) -> StateDir {
    let state = StateDir::at(root.join("node"));
    state
        .save_config(&NodeConfig {
            node_id: NODE_ID.to_owned(),
            secret: SECRET.to_owned(),
            url: url.to_owned(),
            display_name: None,
            queue: None,
        })
        .unwrap();
    std::fs::write(
        state.approvals_path(),
        json!({"version": 1, "agents": {"*": {"security": "full"}}}).to_string(),
    )
    .unwrap();
    state
}

fn exec_job(id: &str, command: &str, yield_ms: Option<u64>, pty: bool) -> String {
    sealed(exec_job_of(id, command, yield_ms, pty))
}

fn sealed(job: ExecJob) -> String {
    Envelope::seal(&NodeMessage::Job(job), &key())
        .unwrap()
        .to_json()
}

fn exec_job_of(id: &str, command: &str, yield_ms: Option<u64>, pty: bool) -> ExecJob {
    let now = now_ms();
    ExecJob {
        job_id: format!("job-{id}"),
        attempt: 0,
        node_id: NODE_ID.to_owned(),
        agent_id: "main".to_owned(),
        session_key: SESSION.to_owned(),
        call_id: format!("call-{id}"),
        argv: ["/bin/sh", "-c", command].map(str::to_owned).to_vec(),
        raw_command: command.to_owned(),
        cwd: None,
        env: BTreeMap::new(),
        timeout_ms: 120_000,
        deadline_ms: now + 60_000,
        issued_at_ms: now,
        nonce: format!("nonce-{id}"),
        grant: None,
        sandbox: None,
        yield_ms,
        pty,
    }
}

fn process_job(session_key: &str, session_id: Option<&str>, action: &str, args: Value) -> String {
    let now = now_ms();
    let wait_ms = args.get("timeout").and_then(Value::as_u64).unwrap_or(0);
    let job = ProcessJob {
        job_id: format!("proc-{}", fastrand_id()),
        node_id: NODE_ID.to_owned(),
        agent_id: "main".to_owned(),
        session_key: session_key.to_owned(),
        call_id: "call-p".to_owned(),
        session_id: session_id.map(str::to_owned),
        action: action.to_owned(),
        args,
        wait_ms,
        deadline_ms: now + 60_000,
        issued_at_ms: now,
        nonce: format!("pn-{}", fastrand_id()),
    };
    Envelope::seal(&NodeMessage::Process(job), &key())
        .unwrap()
        .to_json()
}

fn fastrand_id() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", now_ms(), NEXT.fetch_add(1, Ordering::SeqCst))
}

async fn exec(worker: &NodeWorker, id: &str, command: &str, yield_ms: Option<u64>) -> ExecReport {
    match worker
        .handle(&exec_job(id, command, yield_ms, false))
        .await
        .unwrap()
    {
        Handled::Reported(report) => *report,
        other => panic!("not reported: {other:?}"),
    }
}

async fn background(worker: &NodeWorker, id: &str, command: &str) -> String {
    let report = exec(worker, id, command, Some(0)).await;
    report.running.expect("backgrounded").session_id
}

async fn process(
    worker: &NodeWorker, session_id: Option<&str>, action: &str, args: Value,
) -> ProcessReport {
    process_as(worker, SESSION, session_id, action, args).await
}

async fn process_as(
    worker: &NodeWorker, session_key: &str, session_id: Option<&str>, action: &str, args: Value,
) -> ProcessReport {
    let body = process_job(session_key, session_id, action, args);
    match worker.handle(&body).await.unwrap() {
        Handled::ProcessAnswered(report) => *report,
        other => panic!("not answered: {other:?}"),
    }
}

/// Ticks the worker's process loop until `backend` holds `count` exits (or 10 s pass).
async fn wait_for_exits(worker: &NodeWorker, backend: &Backend, count: usize) -> Vec<ProcessExit> {
    let started = Instant::now();
    while backend.exits().len() < count && started.elapsed() < Duration::from_secs(10) {
        let _ = worker.tick_processes().await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    backend.exits()
}

/// Pids whose process group is `group`, from `/proc`.
fn group_members(group: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which may hold spaces) start after the last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // rest: state ppid pgrp …; a zombie (Z) has already died.
        if fields.get(2) == Some(&group.to_string().as_str()) && fields.first() != Some(&"Z") {
            members.push(pid);
        }
    }
    members
}

fn is_slug(id: &str) -> bool {
    let words: Vec<&str> = id.split('-').collect();
    words.len() >= 2
        && words
            .iter()
            .all(|word| !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric()))
}

#[tokio::test]
async fn a_background_command_answers_running_at_once_and_its_exit_wakes_the_session_once() {
    let (url, backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let started = Instant::now();
    let report = exec(&worker, "bg1", "sleep 1; echo hi", Some(0)).await;
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "returned at once"
    );
    let running = report.running.clone().expect("running");
    assert!(is_slug(&running.session_id), "{}", running.session_id);
    assert!(running.pid.is_some());
    assert_eq!(
        running_text(&running),
        format!(
            "Command still running (session {}, pid {}). Use process (list/poll/log/write/kill/clear/remove) for follow-up.",
            running.session_id,
            running.pid.unwrap()
        )
    );

    let exits = wait_for_exits(&worker, &backend, 1).await;
    assert_eq!(exits.len(), 1, "{exits:?}");
    let exit = &exits[0];
    assert_eq!(exit.session_id, running.session_id);
    assert_eq!(exit.session_key, SESSION);
    assert_eq!(exit.exit_code, Some(0));
    assert!(exit.success);
    assert_eq!(exit.tail, "hi\n");
    assert_eq!(exit.exec_job_id, "job-bg1");
    assert_eq!(
        exit.event_id,
        ProcessExit::event_id_for(NODE_ID, &running.session_id)
    );
    let short: String = running.session_id.chars().take(8).collect();
    assert_eq!(
        exit_event_text(exit, false).unwrap(),
        format!("Exec completed ({short}, code 0) :: hi")
    );

    // The output is still there for poll; the exit is not posted again.
    let polled = process(&worker, Some(&running.session_id), "poll", json!({})).await;
    assert!(polled.ok);
    assert_eq!(polled.text, "hi\n\nProcess exited with code 0.");
    assert_eq!(polled.details["status"], "completed");
    for _ in 0..3 {
        worker.tick_processes().await.unwrap();
    }
    assert_eq!(backend.exits().len(), 1);

    // A process answer travelled to the backend as a tagged result.
    let answered = backend
        .results
        .lock()
        .unwrap()
        .iter()
        .filter(|result| matches!(result, NodeResult::Process(_)))
        .count();
    assert_eq!(answered, 1);
}

#[tokio::test]
async fn a_command_that_ends_within_its_yield_is_a_normal_result_and_leaves_no_session() {
    let (url, backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let report = exec(&worker, "quick", "echo quick; exit 3", Some(200)).await;
    assert_eq!(report.running, None);
    assert_eq!(report.outcome.stdout, "quick\n");
    assert_eq!(report.outcome.exit_code, Some(3));
    assert!(!report.outcome.success);
    let listed = process(&worker, None, "list", json!({})).await;
    assert_eq!(listed.text, "No running or recent sessions.");
    worker.tick_processes().await.unwrap();
    assert!(backend.exits().is_empty(), "foreground runs send no exit");

    // Vector 14: yieldMs 5 is clamped to 10 ms, so `sleep 30` is backgrounded quickly.
    let started = Instant::now();
    let report = exec(&worker, "v14", "sleep 30", Some(5)).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    let running = report.running.expect("backgrounded after the 10 ms yield");
    let text = running_text(&running);
    assert!(
        text.starts_with(&format!(
            "Command still running (session {}, pid ",
            running.session_id
        )),
        "{text}"
    );
    let killed = process(&worker, Some(&running.session_id), "kill", json!({})).await;
    assert_eq!(
        killed.text,
        format!("Killed session {}.", running.session_id)
    );
}

#[tokio::test]
async fn poll_drains_new_output_then_says_so_and_waits_for_the_exit() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let id = background(&worker, "poll", "echo one; sleep 1; echo two").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = process(&worker, Some(&id), "poll", json!({})).await;
    assert_eq!(first.text, "one\n\nProcess still running.");
    assert_eq!(first.details["status"], "running");
    assert_eq!(first.details["retryInMs"], 5_000);
    let second = process(&worker, Some(&id), "poll", json!({})).await;
    assert_eq!(second.text, "(no new output)\n\nProcess still running.");

    let started = Instant::now();
    let waited = process(&worker, Some(&id), "poll", json!({"timeout": 10_000})).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "ends at the exit"
    );
    assert_eq!(waited.text, "two\n\nProcess exited with code 0.");
    assert_eq!(waited.details["aggregated"], "one\ntwo\n");

    // Finished: later polls return the stored tail.
    let again = process(&worker, Some(&id), "poll", json!({})).await;
    assert_eq!(again.text, "one\ntwo\n\nProcess exited with code 0.");

    // Vector 15: an unknown id answers at once, however long the wait asked for.
    let started = Instant::now();
    let unknown = process(&worker, Some("x"), "poll", json!({"timeout": 999_999})).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert!(!unknown.ok);
    assert_eq!(unknown.text, "No session found for x");
    assert_eq!(unknown.details["status"], "failed");
    let missing = process(&worker, None, "poll", json!({})).await;
    assert_eq!(missing.text, "sessionId is required for this action.");
    let bogus = process(&worker, Some(&id), "dance", json!({})).await;
    assert_eq!(bogus.text, "Unknown action dance");
}

#[tokio::test]
async fn log_pages_the_last_200_lines_by_default() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let id = background(&worker, "log", "seq 1 500").await;
    process(&worker, Some(&id), "poll", json!({"timeout": 5_000})).await;
    let log = process(&worker, Some(&id), "log", json!({})).await;
    let expected: Vec<String> = (301..=500).map(|n| n.to_string()).collect();
    assert_eq!(
        log.text,
        format!(
            "{}\n\n[showing last 200 of 500 lines; pass offset/limit to page]",
            expected.join("\n")
        )
    );
    let page = process(&worker, Some(&id), "log", json!({"offset": 0, "limit": 2})).await;
    assert_eq!(page.text, "1\n2");
    let last = process(&worker, Some(&id), "log", json!({"limit": 3})).await;
    assert_eq!(last.text, "498\n499\n500");
    let from = process(&worker, Some(&id), "log", json!({"offset": 498})).await;
    assert_eq!(from.text, "499\n500");

    let quiet = background(&worker, "quiet", "true").await;
    process(&worker, Some(&quiet), "poll", json!({"timeout": 5_000})).await;
    let empty = process(&worker, Some(&quiet), "log", json!({})).await;
    assert_eq!(empty.text, "(no output recorded)");
}

#[tokio::test]
async fn write_submit_and_paste_reach_the_command_s_stdin() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let cat = background(&worker, "cat", "cat").await;
    let wrote = process(
        &worker,
        Some(&cat),
        "write",
        json!({"data": "hello\n", "eof": true}),
    )
    .await;
    assert_eq!(
        wrote.text,
        format!("Wrote 6 bytes to session {cat} (stdin closed).")
    );
    let polled = process(&worker, Some(&cat), "poll", json!({"timeout": 5_000})).await;
    assert_eq!(polled.text, "hello\n\nProcess exited with code 0.");
    let closed = process(&worker, Some(&cat), "write", json!({"data": "x"})).await;
    assert_eq!(closed.text, format!("No active session found for {cat}"));

    // 15 bytes: a bracketed paste of "ab" (14) and the submit's CR.
    let head = background(&worker, "head", "head -c 15; echo").await;
    let none = process(&worker, Some(&head), "send-keys", json!({})).await;
    assert_eq!(none.text, "No key data provided.");
    assert!(!none.ok);
    let nothing = process(&worker, Some(&head), "paste", json!({})).await;
    assert_eq!(nothing.text, "No paste text provided.");
    let pasted = process(&worker, Some(&head), "paste", json!({"text": "ab"})).await;
    assert_eq!(pasted.text, format!("Pasted 2 chars to session {head}."));
    let submitted = process(&worker, Some(&head), "submit", json!({})).await;
    assert_eq!(
        submitted.text,
        format!("Submitted session {head} (sent CR).")
    );
    let polled = process(&worker, Some(&head), "poll", json!({"timeout": 5_000})).await;
    assert_eq!(polled.details["aggregated"], "\u{1b}[200~ab\u{1b}[201~\r\n");
    assert!(polled.text.ends_with("Process exited with code 0."));

    // send-keys writes the encoded bytes.
    let keys = background(&worker, "keys", "head -c 4 | od -An -tx1").await;
    let sent = process(
        &worker,
        Some(&keys),
        "send-keys",
        json!({"keys": ["C-c", "Tab"], "hex": ["41"], "literal": "z"}),
    )
    .await;
    assert_eq!(sent.text, format!("Sent 4 bytes to session {keys}."));
    let polled = process(&worker, Some(&keys), "poll", json!({"timeout": 5_000})).await;
    assert_eq!(
        polled.text.trim_start(),
        "7a 03 09 41\n\nProcess exited with code 0."
    );
}

#[tokio::test]
async fn kill_stops_the_command_and_every_child_and_reports_the_signal() {
    let (url, backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let report = exec(&worker, "kill", "sleep 100 & sleep 100", Some(0)).await;
    let running = report.running.unwrap();
    let group = running.pid.unwrap();
    let started = Instant::now();
    while group_members(group).len() < 3 && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        group_members(group).len() >= 3,
        "supervisor, shell and sleeps run: {:?}",
        group_members(group)
    );

    let killed = process(&worker, Some(&running.session_id), "kill", json!({})).await;
    assert_eq!(
        killed.text,
        format!("Killed session {}.", running.session_id)
    );
    let started = Instant::now();
    while !group_members(group).is_empty() && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(group_members(group), Vec::<u32>::new(), "no survivors");

    let exits = wait_for_exits(&worker, &backend, 1).await;
    assert_eq!(exits[0].signal.as_deref(), Some("SIGKILL"));
    assert!(!exits[0].success);
    let polled = process(&worker, Some(&running.session_id), "poll", json!({})).await;
    assert_eq!(polled.details["status"], "killed");
    assert!(
        polled.text.ends_with("Process exited with signal SIGKILL."),
        "{}",
        polled.text
    );
    let again = process(&worker, Some(&running.session_id), "kill", json!({})).await;
    assert_eq!(
        again.text,
        format!("No active session found for {}", running.session_id)
    );
}

#[tokio::test]
async fn clear_remove_list_and_scope() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let long = background(&worker, "long", "sleep 30").await;
    let done = background(&worker, "done", "echo done").await;
    process(&worker, Some(&done), "poll", json!({"timeout": 5_000})).await;

    let listed = process(&worker, None, "list", json!({})).await;
    let lines: Vec<&str> = listed.text.lines().collect();
    assert_eq!(lines.len(), 2, "{}", listed.text);
    assert!(
        lines[0].starts_with(&format!("{done} completed ")) && lines[0].ends_with(":: echo done"),
        "newest first: {lines:?}"
    );
    assert!(
        lines[1].starts_with(&format!("{long} running   ")) && lines[1].ends_with(":: sleep 30"),
        "{lines:?}"
    );

    // Another session sees nothing, and cannot act on these ids.
    let other = "agent:main:other";
    let foreign = process_as(&worker, other, None, "list", json!({})).await;
    assert_eq!(foreign.text, "No running or recent sessions.");
    for action in ["poll", "log", "kill", "write", "remove"] {
        let refused = process_as(&worker, other, Some(&long), action, json!({"data": "x"})).await;
        assert_eq!(
            refused.text,
            format!("No session found for {long}"),
            "{action}"
        );
    }

    let not_finished = process(&worker, Some(&long), "clear", json!({})).await;
    assert_eq!(
        not_finished.text,
        format!("No finished session found for {long}")
    );
    let cleared = process(&worker, Some(&done), "clear", json!({})).await;
    assert_eq!(cleared.text, format!("Cleared session {done}."));
    let removed = process(&worker, Some(&long), "remove", json!({})).await;
    assert_eq!(
        removed.text,
        format!("Removed session {long} (termination requested).")
    );
    let gone = process(&worker, Some(&long), "poll", json!({})).await;
    assert_eq!(gone.text, format!("No session found for {long}"));
    let listed = process(&worker, None, "list", json!({})).await;
    assert_eq!(listed.text, "No running or recent sessions.");
}

#[tokio::test]
async fn output_is_capped_at_200k_aggregate_and_30k_pending() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let id = background(
        &worker,
        "caps",
        "head -c 250000 /dev/zero | tr '\\0' a; printf END",
    )
    .await;
    let polled = process(&worker, Some(&id), "poll", json!({"timeout": 5_000})).await;
    let (output, status) = polled.text.rsplit_once("\n\n").unwrap();
    assert_eq!(status, "Process exited with code 0.");
    assert_eq!(output.chars().count(), 30_000);
    assert!(output.ends_with("aaaEND"));
    assert_eq!(polled.details["truncated"], true);
    let aggregated = polled.details["aggregated"].as_str().unwrap();
    assert_eq!(aggregated.chars().count(), 200_000);
    assert!(aggregated.ends_with("END"));
}

#[tokio::test]
async fn finished_sessions_are_swept_after_the_cleanup_time_once_their_exit_is_accepted() {
    let (url, backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url))
        .unwrap()
        .with_process_cleanup_ms(60_000);
    assert_eq!(worker.processes().cleanup_ms(), 60_000);

    backend.refuse_exits.store(true, Ordering::SeqCst);
    let id = background(&worker, "ttl", "echo bye").await;
    process(&worker, Some(&id), "poll", json!({"timeout": 5_000})).await;
    assert!(
        worker.tick_processes().await.is_err(),
        "the backend refused"
    );
    // Not swept while its exit is unaccepted, however old.
    assert_eq!(worker.processes().sweep(now_ms() + 3_600_000), 0);
    backend.refuse_exits.store(false, Ordering::SeqCst);
    assert_eq!(worker.tick_processes().await.unwrap(), 1);
    assert_eq!(worker.processes().sweep(now_ms() + 30_000), 0, "too young");
    assert_eq!(worker.processes().sweep(now_ms() + 61_000), 1);
    let gone = process(&worker, Some(&id), "poll", json!({})).await;
    assert_eq!(gone.text, format!("No session found for {id}"));
    assert!(!root.path().join("node/processes").join(&id).exists());
}

#[tokio::test]
async fn a_node_restart_loses_no_output_and_no_exit_and_posts_each_exit_once() {
    let (url, backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let state = node_state(root.path(), &url);

    let worker = NodeWorker::open(&state).unwrap();
    let id = background(&worker, "restart", "echo before; sleep 1; echo after").await;
    let unposted = background(&worker, "unposted", "echo quick").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let first = process(&worker, Some(&id), "poll", json!({})).await;
    assert_eq!(first.text, "before\n\nProcess still running.");
    // The backend refuses `unposted`'s exit before the node goes down.
    backend.refuse_exits.store(true, Ordering::SeqCst);
    let _ = worker.tick_processes().await;
    drop(worker);

    // Down while the command goes on and ends.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    backend.refuse_exits.store(false, Ordering::SeqCst);
    let worker = NodeWorker::open(&state).unwrap();
    let exits = wait_for_exits(&worker, &backend, 2).await;
    assert_eq!(exits.len(), 2, "{exits:?}");
    let restarted = exits.iter().find(|exit| exit.session_id == id).unwrap();
    assert_eq!(restarted.tail, "before\nafter\n");
    assert_eq!(restarted.exit_code, Some(0));
    assert!(exits.iter().any(|exit| exit.session_id == unposted));
    let polled = process(&worker, Some(&id), "poll", json!({})).await;
    assert_eq!(polled.text, "after\n\nProcess exited with code 0.");

    // Once accepted, never again: not by this node, nor by the next one.
    worker.tick_processes().await.unwrap();
    drop(worker);
    let worker = NodeWorker::open(&state).unwrap();
    for _ in 0..3 {
        worker.tick_processes().await.unwrap();
    }
    let mut ids: Vec<String> = backend
        .exits()
        .iter()
        .map(|exit| exit.event_id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), backend.exits().len(), "each event id once");
    assert_eq!(ids.len(), 2);
}

#[tokio::test]
async fn a_pty_session_has_a_terminal_and_c_c_interrupts_it() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let body = exec_job(
        "pty",
        "test -t 0 && echo on-a-tty; sleep 30; echo never",
        Some(0),
        true,
    );
    let Handled::Reported(report) = worker.handle(&body).await.unwrap() else {
        panic!("not reported");
    };
    let id = report.running.expect("running").session_id;
    let started = Instant::now();
    let mut seen = String::new();
    while !seen.contains("on-a-tty") && started.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        seen.push_str(&process(&worker, Some(&id), "poll", json!({})).await.text);
    }
    assert!(seen.contains("on-a-tty"), "{seen}");
    let sent = process(&worker, Some(&id), "send-keys", json!({"keys": ["C-c"]})).await;
    assert_eq!(sent.text, format!("Sent 1 bytes to session {id}."));
    let polled = process(&worker, Some(&id), "poll", json!({"timeout": 5_000})).await;
    assert!(!polled.text.contains("never"), "{}", polled.text);
    assert!(
        polled.text.contains("Process exited with"),
        "interrupted: {}",
        polled.text
    );
    assert_ne!(polled.details["exitCode"], 0);
}

#[tokio::test]
async fn a_sandboxed_background_command_runs_in_the_jail_without_a_terminal() {
    let (url, _backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = NodeWorker::open(&node_state(root.path(), &url)).unwrap();

    let mut job = exec_job_of(
        "jailed",
        "id -u; test -t 0 && echo tty || echo no-tty; touch /workspace/made; sleep 0.3",
        Some(0),
        true,
    );
    job.sandbox = Some(JobSandbox::new("bg-jail"));
    let Handled::Reported(report) = worker.handle(&sealed(job)).await.unwrap() else {
        panic!("not reported");
    };
    assert_eq!(report.denial, None, "{:?}", report.outcome);
    let id = report.running.expect("running").session_id;
    let polled = process(&worker, Some(&id), "poll", json!({"timeout": 10_000})).await;
    assert_eq!(
        polled.text,
        format!("{JAIL_UID}\nno-tty\n\nProcess exited with code 0.")
    );
}

#[tokio::test]
async fn the_running_node_posts_exits_on_its_own() {
    let (url, backend) = start_backend().await;
    let root = tempfile::tempdir().unwrap();
    let worker = Arc::new(
        NodeWorker::open(&node_state(root.path(), &url))
            .unwrap()
            .with_heartbeat_interval(Duration::from_secs(60)),
    );
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let running = {
        let worker = Arc::clone(&worker);
        tokio::spawn(async move { worker.run(shutdown).await })
    };
    let id = background(&worker, "loop", "sleep 0.5; echo from-the-loop").await;
    let started = Instant::now();
    while backend.exits().is_empty() && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let exits = backend.exits();
    assert_eq!(exits.len(), 1, "{exits:?}");
    assert_eq!(exits[0].session_id, id);
    assert_eq!(exits[0].tail, "from-the-loop\n");
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
}
