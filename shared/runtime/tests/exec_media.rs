//! Files a node host uploads with an exec report, on the backend (in-memory ports and blob
//! store): each is stored under `media/outbound/<sha256>.<ext>`, the tool result the turn gets
//! names that key instead of the node's path, refused lines say why, the job record keeps no
//! bytes, and a report delivered twice stores one object. Through the `nodes` routes, a report
//! of a few MB (over axum's default body limit) is taken.

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::Request;
use clawless_base::object_store::ObjectStore;
use clawless_base::transcript::ToolCall;
use clawless_core::nodes::testing::{InMemoryExecJobs, InMemoryExecQueue, InMemoryNodeRegistry};
use clawless_core::nodes::{ExecQueue, NodeFacts, NodeRecord};
use clawless_core::session::TurnQueue;
use clawless_core::testing::{InMemoryObjectStore, InMemoryTimers, InMemoryTurnQueue, ManualClock};
use clawless_core::turn::events::{SessionEvent, TurnEvent};
use clawless_exec::node::media::{NodeFile, OUTBOUND_MEDIA_PREFIX, RefusedFile};
use clawless_exec::node::wire::{
    Envelope, ExecOutcome, ExecReport, NodeMessage, secret_hash, signing_key,
};
use clawless_runtime::exec_media::is_outbound_media_key;
use clawless_runtime::node_routes::nodes_router;
use clawless_runtime::nodes_service::{
    Dispatch, ExecSettings, JobPlacement, NodesDeps, NodesService, PairRequest, ReportOutcome,
};
use serde_json::json;
use tower::ServiceExt;

struct Fixture {
    nodes: Arc<NodesService>,
    queues: Arc<InMemoryExecQueue>,
    turns: Arc<InMemoryTurnQueue>,
    blobs: InMemoryObjectStore,
}

fn fixture() -> Fixture {
    let queues = Arc::new(InMemoryExecQueue::new());
    let turns = Arc::new(InMemoryTurnQueue::new());
    let blobs = InMemoryObjectStore::new();
    let nodes = NodesService::new(NodesDeps {
        registry: Arc::new(InMemoryNodeRegistry::new()),
        jobs: Arc::new(InMemoryExecJobs::new()),
        queues: queues.clone(),
        timers: Arc::new(InMemoryTimers::new()),
        turns: turns.clone(),
        clock: Arc::new(ManualClock::at(1_000_000)),
        settings: ExecSettings::default(),
    })
    .with_media_store(Arc::new(blobs.clone()));
    Fixture {
        nodes: Arc::new(nodes),
        queues,
        turns,
        blobs,
    }
}

/// A paired node, its secret, and the id of the job an `exec` call sent it.
async fn node_with_job(fx: &Fixture, command: &str) -> (NodeRecord, String, String) {
    let (code, _) = fx.nodes.create_pairing_code().await.unwrap();
    let facts = NodeFacts {
        platform: "linux".to_owned(),
        path: vec!["/usr/bin".to_owned()],
        skill_bins: Vec::new(),
        display_name: None,
        exec: None,
    };
    let paired = fx.nodes.pair(&PairRequest { code, facts }).await.unwrap();
    let record = fx
        .nodes
        .authenticate(&paired.node_id, &paired.secret)
        .await
        .unwrap();
    let call = ToolCall {
        id: "call_media".to_owned(),
        name: "exec".to_owned(),
        input: json!({"command": command}),
    };
    let dispatched = fx
        .nodes
        .dispatch(
            "agent:main:main",
            "main",
            "job-media",
            &call,
            None,
            JobPlacement::Host,
        )
        .await
        .unwrap();
    assert_eq!(dispatched, Dispatch::Sent);
    let delivery = fx
        .queues
        .receive(&record.queue, 10, Duration::ZERO, Duration::from_secs(30))
        .await
        .unwrap()
        .remove(0);
    let message: NodeMessage = Envelope::parse(&delivery.body)
        .unwrap()
        .open(&signing_key(&record.secret_hash))
        .unwrap();
    let NodeMessage::Job(job) = message else {
        panic!("not a job")
    };
    (record, paired.secret, job.job_id)
}

fn report(record: &NodeRecord, job_id: &str, stdout: &str, files: Vec<NodeFile>) -> ExecReport {
    ExecReport {
        job_id: job_id.to_owned(),
        attempt: 0,
        node_id: record.node_id.clone(),
        outcome: ExecOutcome {
            exit_code: Some(0),
            success: true,
            stdout: stdout.to_owned(),
            ..ExecOutcome::default()
        },
        denial: None,
        interrupted: false,
        duration_ms: 5,
        allow_always_entries: Vec::new(),
        files,
        refused_files: vec![RefusedFile {
            path: "/etc/passwd".to_owned(),
            reason: "outside the command's directory".to_owned(),
        }],
        nonce: format!("r-{job_id}"),
        sent_at_ms: 0,
        running: None,
    }
}

fn sealed(record: &NodeRecord, report: &ExecReport) -> String {
    Envelope::seal(report, &signing_key(&record.secret_hash))
        .unwrap()
        .to_json()
}

async fn tool_results(fx: &Fixture) -> Vec<String> {
    let mut texts = Vec::new();
    for delivery in fx.turns.receive(10, Duration::ZERO).await.unwrap() {
        let event: SessionEvent = serde_json::from_str(&delivery.body).unwrap();
        fx.turns.delete(&delivery.receipt).await.unwrap();
        if let TurnEvent::ToolResult { text, .. } = event.event {
            texts.push(text);
        }
    }
    texts
}

#[tokio::test]
async fn an_uploaded_file_is_stored_once_and_the_result_names_its_blob_key() {
    let fx = fixture();
    let (record, _, job_id) = node_with_job(&fx, "plot && echo MEDIA:./chart.png").await;
    let png = b"\x89PNG\r\n\x1a\nchart-bytes".to_vec();
    let stdout = "plotted\nMEDIA:./chart.png\nMEDIA:/etc/passwd\nMEDIA:/home/me/other.png\n";
    let report = report(
        &record,
        &job_id,
        stdout,
        vec![NodeFile::new("./chart.png", "chart.png", &png)],
    );
    let body = sealed(&record, &report);

    assert_eq!(
        fx.nodes.submit_report(&record, &body).await.unwrap(),
        ReportOutcome::Recorded
    );
    let texts = tool_results(&fx).await;
    assert_eq!(texts.len(), 1, "{texts:?}");
    let lines: Vec<&str> = texts[0].lines().collect();
    assert_eq!(lines[0], "plotted");
    let key = lines[1].strip_prefix("MEDIA:").unwrap();
    assert!(is_outbound_media_key(key) && key.ends_with(".png"), "{key}");
    assert_eq!(
        lines[2],
        "(MEDIA:/etc/passwd not sent: outside the command's directory)"
    );
    assert_eq!(
        lines[3],
        "(MEDIA:/home/me/other.png not sent: not uploaded by the node host)"
    );
    assert!(!texts[0].contains("MEDIA:./chart.png"));
    let stored = fx.blobs.get(key, 1_000).await.unwrap().unwrap();
    assert_eq!(stored.bytes, png);
    // The job record keeps the rewritten result, without the file's bytes.
    let (job_record, _) = fx.nodes.job(&job_id).await.unwrap().unwrap();
    let result = job_record.result.unwrap();
    assert!(result.contains(key), "{result}");
    assert!(!result.contains(&report.files[0].data_base64), "{result}");

    // The same report again (a node that never heard the answer): nothing changes, and the
    // blob is the one object under the prefix.
    let etag = stored.meta.etag;
    assert_eq!(
        fx.nodes.submit_report(&record, &body).await.unwrap(),
        ReportOutcome::Ignored
    );
    assert!(tool_results(&fx).await.is_empty());
    let listing = fx.blobs.list(OUTBOUND_MEDIA_PREFIX, 10).await.unwrap();
    assert_eq!(listing.objects.len(), 1, "{listing:?}");
    assert_eq!(fx.blobs.head(key).await.unwrap().unwrap().etag, etag);
}

#[tokio::test]
async fn a_report_of_a_few_megabytes_is_taken_over_http() {
    let fx = fixture();
    let (record, secret, job_id) = node_with_job(&fx, "make-pdf").await;
    let pdf = vec![b'%'; 2 * 1024 * 1024];
    let report = report(
        &record,
        &job_id,
        "MEDIA:report.pdf\n",
        vec![NodeFile::new("report.pdf", "report.pdf", &pdf)],
    );
    let body = sealed(&record, &report);
    assert!(body.len() > 2 * 1024 * 1024, "over axum's default limit");
    let router = nodes_router(Arc::clone(&fx.nodes), false);
    let response = router
        .oneshot(
            Request::post("/nodes/results")
                .header(
                    "authorization",
                    format!("Bearer {}:{secret}", record.node_id),
                )
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let texts = tool_results(&fx).await;
    let key = texts[0].trim().strip_prefix("MEDIA:").unwrap().to_owned();
    assert!(key.ends_with(".pdf"), "{key}");
    assert_eq!(
        fx.blobs
            .get(&key, 3 * 1024 * 1024)
            .await
            .unwrap()
            .unwrap()
            .bytes,
        pdf
    );
    assert_eq!(record.secret_hash, secret_hash(&secret));
}
