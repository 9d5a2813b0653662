//! A node command's `MEDIA:` files travel with its report: the worker runs a real command
//! (`sh -lc`) in a working directory, the command writes a file and prints `MEDIA:` lines, and
//! the report posted to a stand-in backend on 127.0.0.1 carries the file's bytes and, for the
//! lines it did not upload (`/etc/passwd`, a symlink to it, a folder, an oversized file), the
//! reason. The report is journaled with its files: a restarted worker given the same job
//! sends the same bytes without running the command again.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_exec::node::media::MAX_MEDIA_FILE_BYTES;
use clawless_exec::node::wire::{
    Envelope, ExecJob, ExecReport, NodeMessage, secret_hash, signing_key,
};
use clawless_node::state::{NodeConfig, StateDir};
use clawless_node::worker::{Handled, NodeWorker};
use serde_json::{Value, json};

const NODE_ID: &str = "node-media-1";
const SECRET: &str = "node-secret-for-media-tests";

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

type Reports = Arc<Mutex<Vec<ExecReport>>>;

async fn results(State(reports): State<Reports>, body: String) -> Json<Value> {
    let report: ExecReport = Envelope::parse(&body).unwrap().open(&key()).unwrap();
    reports.lock().unwrap().push(report);
    Json(json!({"changed": true}))
}

/// A stand-in backend taking reports; returns its URL and what it received.
async fn backend() -> (String, Reports) {
    let reports: Reports = Arc::default();
    let app = Router::new()
        .route("/nodes/results", post(results))
        .route(
            "/nodes/heartbeat",
            post(|| async { Json(json!({"policyVersion": 0, "granted": []})) }),
        )
        .route("/skills/bins", get(|| async { Json(json!({"bins": []})) }))
        .layer(DefaultBodyLimit::disable())
        .with_state(Arc::clone(&reports));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, reports)
}

/// A paired node's state (security=full) talking to `url` over HTTP.
fn node_state(root: &std::path::Path, url: &str) -> StateDir {
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

fn sealed_job(id: &str, command: &str, cwd: &std::path::Path) -> String {
    let now = now_ms();
    let job = ExecJob {
        job_id: format!("job-{id}"),
        attempt: 0,
        node_id: NODE_ID.to_owned(),
        agent_id: "main".to_owned(),
        session_key: "agent:main:main".to_owned(),
        call_id: format!("call-{id}"),
        argv: ["/bin/sh", "-lc", command].map(str::to_owned).to_vec(),
        raw_command: command.to_owned(),
        cwd: Some(cwd.display().to_string()),
        env: BTreeMap::new(),
        timeout_ms: 20_000,
        deadline_ms: now + 60_000,
        issued_at_ms: now,
        nonce: format!("nonce-{id}"),
        grant: None,
        sandbox: None,
        yield_ms: None,
        pty: false,
    };
    Envelope::seal(&NodeMessage::Job(job), &key())
        .unwrap()
        .to_json()
}

fn reported(handled: Handled) -> ExecReport {
    match handled {
        Handled::Reported(report) => *report,
        other => panic!("not reported: {other:?}"),
    }
}

#[tokio::test]
async fn a_file_the_command_prints_travels_with_the_report_and_the_rest_is_refused() {
    let (url, reports) = backend().await;
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    let state = node_state(root.path(), &url);
    let oversized = MAX_MEDIA_FILE_BYTES + 1;
    let command = format!(
        "printf '\\211PNG-chart' > chart.png; ln -s /etc/passwd passwd; mkdir folder; \
         head -c {oversized} /dev/zero > big.bin; \
         echo made; echo MEDIA:./chart.png; echo 'MEDIA: `{abs}`'; echo MEDIA:/etc/passwd; \
         echo MEDIA:passwd; echo MEDIA:folder; echo MEDIA:big.bin; echo MEDIA:../escape.png",
        abs = work.join("chart.png").display(),
    );
    let body = sealed_job("m1", &command, &work);

    let worker = NodeWorker::open(&state).unwrap();
    let report = reported(worker.handle(&body).await.unwrap());
    assert!(report.outcome.success, "{report:?}");
    assert!(report.outcome.stdout.contains("MEDIA:./chart.png"));
    let files: Vec<(&str, &str, Vec<u8>)> = report
        .files
        .iter()
        .map(|file| {
            (
                file.path.as_str(),
                file.name.as_str(),
                file.bytes(MAX_MEDIA_FILE_BYTES).unwrap(),
            )
        })
        .collect();
    let absolute = work.join("chart.png").display().to_string();
    assert_eq!(
        files,
        vec![
            ("./chart.png", "chart.png", b"\x89PNG-chart".to_vec()),
            (absolute.as_str(), "chart.png", b"\x89PNG-chart".to_vec()),
        ]
    );
    assert_eq!(report.files[0].mime, "image/png");
    let refused: Vec<(&str, &str)> = report
        .refused_files
        .iter()
        .map(|refused| (refused.path.as_str(), refused.reason.as_str()))
        .collect();
    assert_eq!(
        refused,
        vec![
            ("/etc/passwd", "outside the command's directory"),
            ("passwd", "outside the command's directory"),
            ("folder", "not a file"),
            ("big.bin", "larger than 2 MB"),
            ("../escape.png", "paths with `..` steps are not sent"),
        ]
    );
    // What the backend received is what the worker reported.
    assert_eq!(
        reports.lock().unwrap().as_slice(),
        std::slice::from_ref(&report)
    );

    // A restarted node given the same job answers from its journal: same bytes, no new run.
    drop(worker);
    std::fs::write(work.join("chart.png"), b"changed since").unwrap();
    let worker = NodeWorker::open(&state).unwrap();
    let again = reported(worker.handle(&body).await.unwrap());
    assert_eq!(again, report);
    assert_eq!(reports.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn output_without_media_lines_or_a_failed_command_uploads_nothing() {
    let (url, _reports) = backend().await;
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::write(work.join("chart.png"), b"png").unwrap();
    let state = node_state(root.path(), &url);
    let worker = NodeWorker::open(&state).unwrap();

    let plain = reported(
        worker
            .handle(&sealed_job("plain", "echo chart.png", &work))
            .await
            .unwrap(),
    );
    assert!(plain.files.is_empty() && plain.refused_files.is_empty());
    let json = serde_json::to_value(&plain).unwrap();
    assert!(
        json.get("files").is_none() && json.get("refusedFiles").is_none(),
        "{json}"
    );

    let failed = reported(
        worker
            .handle(&sealed_job("failed", "echo MEDIA:chart.png; exit 3", &work))
            .await
            .unwrap(),
    );
    assert_eq!(failed.outcome.exit_code, Some(3));
    assert!(failed.files.is_empty() && failed.refused_files.is_empty());

    // A report from a node that predates files parses on a newer backend, and the reverse.
    let mut old = json.clone();
    old.as_object_mut().unwrap().remove("files");
    let parsed: ExecReport = serde_json::from_value(old).unwrap();
    assert!(parsed.files.is_empty());
}
