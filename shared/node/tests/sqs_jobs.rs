//! The node's SQS job source against moto (`CLAWLESS_TEST_AWS_ENDPOINT`, started by
//! `infra/test`), with a stand-in backend on 127.0.0.1 that vends credentials the way the real
//! one does (`POST /nodes/credentials`), counts the calls and can revoke the node.
//!
//! Covered: a job sent to the queue is received and gone once acknowledged; credentials are
//! cached while fresh and renewed when less than five minutes are left; credentials SQS
//! refuses are dropped and renewed; a wrong or revoked node gets `Unauthorized`; and the
//! worker, paired with an SQS queue URL, runs a signed job from the queue, reports it over
//! HTTP and deletes it. Jobs are held under leases: one a dead node held, or a long poll took
//! after its caller was gone, comes back after the lease; one still running is not handed out
//! again however long it runs. Nothing here reads AWS settings from the environment besides the
//! emulator's address (no profile, no instance metadata).

// Test helpers unwrap: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_sqs::types::QueueAttributeName;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clawless_aws::testing::{fresh_standard_queue, moto_endpoint, moto_sdk_config, sqs_client};
use clawless_exec::node::wire::{
    Envelope, ExecJob, ExecReport, NodeMessage, secret_hash, signing_key,
};
use clawless_node::client::{BackendClient, ClientError};
use clawless_node::sqs_jobs::SqsJobs;
use clawless_node::state::{NodeConfig, StateDir};
use clawless_node::worker::NodeWorker;
use serde_json::{Value, json};

const NODE_ID: &str = "node-sqs-1";
const SECRET: &str = "node-secret-for-tests";

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The stand-in backend's state.
struct Backend {
    queue_url: String,
    /// Endpoints handed out in order; the last one repeats.
    endpoints: Mutex<Vec<String>>,
    lifetime: Duration,
    credential_calls: AtomicUsize,
    revoked: AtomicBool,
    reports: Mutex<Vec<Value>>,
    /// When each heartbeat arrived (ms since the epoch).
    heartbeats: Mutex<Vec<u64>>,
}

impl Backend {
    fn authorized(&self, headers: &HeaderMap) -> bool {
        let expected = format!("Bearer {NODE_ID}:{SECRET}");
        !self.revoked.load(Ordering::SeqCst)
            && headers
                .get("authorization")
                .and_then(|value| value.to_str().ok())
                == Some(expected.as_str())
    }
}

async fn credentials(State(backend): State<Arc<Backend>>, headers: HeaderMap) -> Response {
    if !backend.authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    backend.credential_calls.fetch_add(1, Ordering::SeqCst);
    let endpoint = {
        let mut endpoints = backend.endpoints.lock().unwrap();
        if endpoints.len() > 1 {
            endpoints.remove(0)
        } else {
            endpoints[0].clone()
        }
    };
    let expires = now_ms() + u64::try_from(backend.lifetime.as_millis()).unwrap();
    Json(json!({
        "queueUrl": backend.queue_url,
        "region": "us-east-1",
        "endpointUrl": endpoint,
        "credentials": {
            "accessKeyId": "ASIATESTNODE",
            "secretAccessKey": "vended-secret",
            "sessionToken": "vended-token",
            "expiresAtMs": expires,
        }
    }))
    .into_response()
}

async fn heartbeat(State(backend): State<Arc<Backend>>, headers: HeaderMap) -> Response {
    if !backend.authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    backend.heartbeats.lock().unwrap().push(now_ms());
    Json(json!({"policyVersion": 0, "granted": []})).into_response()
}

async fn skills_bins() -> Json<Value> {
    Json(json!({"bins": []}))
}

async fn results(
    State(backend): State<Arc<Backend>>, headers: HeaderMap, body: String,
) -> Response {
    if !backend.authorized(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let envelope = Envelope::parse(&body).unwrap();
    let report: ExecReport = envelope.open(&key()).unwrap();
    backend
        .reports
        .lock()
        .unwrap()
        .push(serde_json::to_value(report).unwrap());
    Json(json!({})).into_response()
}

/// Anything else is "SQS" refusing the credentials, as AWS does for expired session tokens.
async fn refusing_sqs() -> Response {
    (
        StatusCode::FORBIDDEN,
        [
            ("content-type", "application/x-amz-json-1.0"),
            ("x-amzn-query-error", "ExpiredToken;Sender"),
        ],
        r#"{"__type":"com.amazon.coral.service#ExpiredTokenException","message":"The security token included in the request is expired"}"#,
    )
        .into_response()
}

struct Fixture {
    backend: Arc<Backend>,
    url: String,
    sqs: aws_sdk_sqs::Client,
}

impl Fixture {
    /// A fresh moto queue and a stand-in backend vending credentials that live `lifetime`.
    async fn start(lifetime: Duration) -> Self {
        let sqs = sqs_client(&moto_sdk_config().await);
        let queue_url = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
        let backend = Arc::new(Backend {
            queue_url,
            endpoints: Mutex::new(vec![moto_endpoint()]),
            lifetime,
            credential_calls: AtomicUsize::new(0),
            revoked: AtomicBool::new(false),
            reports: Mutex::new(Vec::new()),
            heartbeats: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/nodes/credentials", post(credentials))
            .route("/nodes/heartbeat", post(heartbeat))
            .route("/nodes/results", post(results))
            .route("/skills/bins", get(skills_bins))
            .fallback(refusing_sqs)
            .with_state(backend.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { backend, url, sqs }
    }

    fn config(&self, secret: &str) -> NodeConfig {
        NodeConfig {
            node_id: NODE_ID.to_owned(),
            secret: secret.to_owned(),
            url: self.url.clone(),
            display_name: None,
            queue: Some(self.backend.queue_url.clone()),
        }
    }

    fn jobs(&self) -> SqsJobs {
        SqsJobs::new(BackendClient::for_node(&self.config(SECRET)).unwrap())
    }

    fn credential_calls(&self) -> usize {
        self.backend.credential_calls.load(Ordering::SeqCst)
    }

    async fn send(&self, body: &str) {
        self.sqs
            .send_message()
            .queue_url(&self.backend.queue_url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }

    /// Waits (up to 10 s) until the queue holds no message, visible or in flight.
    async fn await_emptied(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.counts().await != (0, 0) {
            assert!(tokio::time::Instant::now() < deadline, "job never deleted");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// (visible, in flight) messages on the queue.
    async fn counts(&self) -> (u64, u64) {
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(&self.backend.queue_url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
            .send()
            .await
            .unwrap();
        let map = attributes.attributes().unwrap();
        let read = |name: &QueueAttributeName| map.get(name).unwrap().parse::<u64>().unwrap();
        (
            read(&QueueAttributeName::ApproximateNumberOfMessages),
            read(&QueueAttributeName::ApproximateNumberOfMessagesNotVisible),
        )
    }
}

fn key() -> Vec<u8> {
    signing_key(&secret_hash(SECRET))
}

const FRESH: Duration = Duration::from_secs(60 * 60);

#[tokio::test]
async fn a_job_on_the_node_queue_is_received_with_vended_credentials_and_gone_once_acked() {
    let fixture = Fixture::start(FRESH).await;
    fixture.send("signed-envelope-1").await;
    let jobs = fixture.jobs();

    let received = jobs.receive(Duration::from_secs(2)).await.unwrap();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0].body, "signed-envelope-1");
    assert_eq!(received[0].receive_count, 1);
    // Received but not acknowledged: hidden from other receives, still on the queue.
    assert!(jobs.receive(Duration::ZERO).await.unwrap().is_empty());
    assert_eq!(fixture.counts().await, (0, 1));

    jobs.ack(&received[0].receipt).await.unwrap();
    assert_eq!(fixture.counts().await, (0, 0));
    assert!(jobs.receive(Duration::ZERO).await.unwrap().is_empty());
    // Fresh credentials were asked for once and reused by every later call.
    assert_eq!(fixture.credential_calls(), 1);
}

#[tokio::test]
async fn credentials_with_less_than_five_minutes_left_are_renewed_before_the_next_call() {
    let fixture = Fixture::start(Duration::from_secs(4 * 60)).await;
    fixture.send("signed-envelope-2").await;
    let jobs = fixture.jobs();

    let received = jobs.receive(Duration::from_secs(2)).await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(fixture.credential_calls(), 1);
    jobs.ack(&received[0].receipt).await.unwrap();
    assert_eq!(fixture.credential_calls(), 2);
    assert!(jobs.receive(Duration::ZERO).await.unwrap().is_empty());
    assert_eq!(fixture.credential_calls(), 3);
    assert_eq!(fixture.counts().await, (0, 0));
}

#[tokio::test]
async fn credentials_sqs_refuses_are_dropped_and_fresh_ones_are_asked_for() {
    let fixture = Fixture::start(FRESH).await;
    // The first credentials point at an endpoint that refuses them, the next at moto.
    *fixture.backend.endpoints.lock().unwrap() =
        vec![format!("{}/refusing-sqs", fixture.url), moto_endpoint()];
    fixture.send("signed-envelope-3").await;
    let jobs = fixture.jobs();

    let refused = jobs.receive(Duration::ZERO).await.unwrap_err();
    assert!(
        matches!(
            refused,
            ClientError::Queue {
                operation: "ReceiveMessage",
                ..
            }
        ),
        "{refused:?}"
    );
    let received = jobs.receive(Duration::from_secs(2)).await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].body, "signed-envelope-3");
    assert_eq!(fixture.credential_calls(), 2);
}

#[tokio::test]
async fn a_node_with_a_wrong_secret_or_revoked_gets_unauthorized_and_no_jobs() {
    let fixture = Fixture::start(Duration::from_secs(60)).await;
    fixture.send("signed-envelope-4").await;

    let stranger = SqsJobs::new(BackendClient::for_node(&fixture.config("guessed")).unwrap());
    assert!(matches!(
        stranger.receive(Duration::ZERO).await,
        Err(ClientError::Unauthorized)
    ));

    // Credentials close to expiry make the next call go to the backend, which now refuses.
    let jobs = fixture.jobs();
    assert!(jobs.receive(Duration::ZERO).await.is_ok());
    fixture.backend.revoked.store(true, Ordering::SeqCst);
    assert!(matches!(
        jobs.receive(Duration::from_secs(1)).await,
        Err(ClientError::Unauthorized)
    ));
    assert_eq!(fixture.credential_calls(), 1);
}

/// A node state directory paired with `fixture`'s backend, whose policy runs anything.
fn node_state(fixture: &Fixture) -> (tempfile::TempDir, StateDir) {
    let temp = tempfile::tempdir().unwrap();
    let state = StateDir::at(temp.path().join("node"));
    state.save_config(&fixture.config(SECRET)).unwrap();
    std::fs::write(
        state.approvals_path(),
        json!({"version": 1, "agents": {"*": {"security": "full"}}}).to_string(),
    )
    .unwrap();
    (temp, state)
}

/// A job running `command` with `sh -lc`, sealed for the node's queue.
fn sealed_job(id: &str, command: &str, timeout_ms: u64) -> String {
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
        cwd: None,
        env: BTreeMap::new(),
        timeout_ms,
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

/// A fresh fixture with a paired node's state and one sealed job on its queue.
async fn fixture_with_job(
    id: &str, command: &str, timeout_ms: u64,
) -> (Fixture, tempfile::TempDir, StateDir) {
    let fixture = Fixture::start(FRESH).await;
    let (temp, state) = node_state(&fixture);
    fixture.send(&sealed_job(id, command, timeout_ms)).await;
    (fixture, temp, state)
}

type RunningWorker = tokio::task::JoinHandle<Result<(), clawless_node::worker::WorkerError>>;

/// Runs `worker` until the returned sender says stop.
fn spawn_worker(worker: NodeWorker) -> (tokio::sync::watch::Sender<bool>, RunningWorker) {
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    (stop, tokio::spawn(async move { worker.run(stop_rx).await }))
}

#[tokio::test]
async fn a_worker_paired_with_a_queue_url_runs_a_job_from_sqs_reports_it_and_deletes_it() {
    let (fixture, _temp, state) = fixture_with_job("sqs-1", "echo ran-from-sqs", 10_000).await;

    let worker = NodeWorker::open(&state).unwrap();
    assert!(worker.reads_sqs());
    let (stop, running) = spawn_worker(worker);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while fixture.backend.reports.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no report");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let report = fixture.backend.reports.lock().unwrap()[0].clone();
    assert_eq!(report["jobId"], "job-sqs-1");
    assert_eq!(report["outcome"]["success"], true, "{report}");
    assert_eq!(report["outcome"]["stdout"], "ran-from-sqs\n", "{report}");
    // Acknowledged after the report: the queue empties.
    fixture.await_emptied().await;
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_node_running_a_long_command_keeps_heartbeating_and_keeps_its_job() {
    // GIVEN a worker heartbeating every second and holding jobs under two-second leases, and
    // a job that runs for five seconds: longer than the backend's offline threshold (two
    // heartbeat intervals) and than its lease, several times over
    let (fixture, _temp, state) = fixture_with_job("long-1", "sleep 5; echo slept", 30_000).await;
    let worker = NodeWorker::open(&state)
        .unwrap()
        .with_heartbeat_interval(Duration::from_secs(1))
        .with_job_lease(Duration::from_secs(2));

    // WHEN it runs the job
    let (stop, running) = spawn_worker(worker);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut queue_samples = Vec::new();
    while fixture.backend.reports.lock().unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no report");
        queue_samples.push(fixture.counts().await);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reported_at = now_ms();

    // THEN the job stays hidden (in flight) from the moment the worker took it, never handed
    // out again, and is deleted once reported
    let taken = queue_samples
        .iter()
        .position(|counts| *counts == (0, 1))
        .expect("never taken");
    assert!(
        queue_samples.len() - taken > 10
            && queue_samples[taken..]
                .iter()
                .all(|counts| *counts == (0, 1)),
        "the running job became visible again: {queue_samples:?}"
    );
    fixture.await_emptied().await;
    stop.send(true).unwrap();
    running.await.unwrap().unwrap();

    // AND the job ran once, and heartbeats never paused for long while it did
    let reports = fixture.backend.reports.lock().unwrap().clone();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert_eq!(reports[0]["outcome"]["stdout"], "slept\n", "{reports:?}");
    let beats: Vec<u64> = fixture
        .backend
        .heartbeats
        .lock()
        .unwrap()
        .iter()
        .copied()
        .filter(|at| *at <= reported_at)
        .collect();
    let longest_pause = beats
        .windows(2)
        .map(|pair| pair[1] - pair[0])
        .chain(beats.last().map(|last| reported_at - last))
        .max()
        .unwrap_or(u64::MAX);
    assert!(
        beats.len() >= 4 && longest_pause < 3_000,
        "heartbeats at {beats:?}, reported at {reported_at}: a pause of {longest_pause} ms"
    );
}

#[tokio::test]
async fn a_job_held_by_a_node_that_died_comes_back_after_its_lease() {
    // GIVEN a node that took a job under a two-second lease and died before acknowledging it
    let fixture = Fixture::start(FRESH).await;
    fixture.send("signed-envelope-lease").await;
    let dead = fixture.jobs().with_lease(Duration::from_secs(2));
    let taken = dead.receive(Duration::from_secs(2)).await.unwrap();
    assert_eq!(taken.len(), 1, "{taken:?}");
    drop(dead);

    // WHEN the node restarts and polls
    let restarted = fixture.jobs();
    assert!(
        restarted.receive(Duration::ZERO).await.unwrap().is_empty(),
        "handed out again within its lease"
    );

    // THEN it gets the job once the lease has run out
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let back = loop {
        let received = restarted.receive(Duration::from_secs(1)).await.unwrap();
        if let Some(delivery) = received.into_iter().next() {
            break delivery;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job never came back"
        );
    };
    assert_eq!(back.body, "signed-envelope-lease");
    assert_eq!(back.receive_count, 2);
}

#[tokio::test]
async fn a_job_a_long_poll_took_after_its_node_left_comes_back_after_its_lease() {
    // GIVEN a node killed in the middle of a long poll (the request is dropped; SQS may still
    // hand the next message to it)
    let fixture = Fixture::start(FRESH).await;
    let dead = Arc::new(fixture.jobs().with_lease(Duration::from_secs(2)));
    let polling = tokio::spawn({
        let dead = dead.clone();
        async move { dead.receive(Duration::from_secs(20)).await }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    polling.abort();
    let _ = polling.await;

    // WHEN a job arrives and the restarted node polls
    fixture.send("signed-envelope-after-death").await;
    let restarted = fixture.jobs();

    // THEN it gets the job, at the latest once the lease of whatever took it has run out
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    let delivery = loop {
        let received = restarted.receive(Duration::from_secs(1)).await.unwrap();
        if let Some(delivery) = received.into_iter().next() {
            break delivery;
        }
        assert!(tokio::time::Instant::now() < deadline, "the job never came");
    };
    assert_eq!(delivery.body, "signed-envelope-after-death");
}
