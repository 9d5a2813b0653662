//! What the backend adds around a command run on a node host: a real node worker running
//! `true` (allowlisted) again and again, measured twice.
//!
//! - Local mode: the whole local system on 127.0.0.1 (SQLite, HTTP routes), the worker
//!   polling it over HTTP.
//! - On moto (the AWS emulator), when `CLAWLESS_TEST_AWS_ENDPOINT` is set: the AWS adapters
//!   (DynamoDB registry and jobs, per-node SQS queues, SQS timers and turn queue, STS queue
//!   credentials) behind the nodes service, its routes served in-process on 127.0.0.1, the
//!   worker reading its own SQS queue directly with the credentials it was vended. Otherwise
//!   one line says the half was skipped and how to run it (`infra/bench exec_roundtrip`
//!   starts moto).
//!
//! Printed for each, p50 and p99 over the runs:
//! - job sent → command started: from the backend's dispatch (job stored, queued, timer set)
//!   to the node starting the process (receive, signature and journal checks, policy);
//! - command finished → turn resumed: from the process ending to the result being recorded
//!   and the resume event queued (report signed, posted, checked, stored first-wins);
//! - the total round trip minus the command's own run time.
//!
//! Target: under 50 ms added in local mode. The moto figures are informational: moto is much
//! slower than AWS. The worker long-polls SQS, so a job sent while it waits is received at
//! once and the 20 s poll never shows in the figures. Usage: `cargo bench -p clawless --bench
//! exec_roundtrip [-- --quick]` (200 runs locally and 30 on moto; 30 and 10 with `--quick`).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_aws::testing::{
    ENDPOINT_ENV, TEST_REGION, dynamodb_client, fresh_fifo_queue, fresh_standard_queue,
    fresh_table, moto_endpoint, moto_sdk_config, sqs_client, sts_client, unique_queue_prefix,
};
use clawless_aws::{
    DynamoExecJobs, DynamoNodeRegistry, SqsExecQueue, SqsTimers, SqsTurnQueue, StsQueueCredentials,
};
use clawless_base::clock::SystemClock;
use clawless_base::transcript::ToolCall;
use clawless_exec::node::wire::ExecReport;
use clawless_node::client::BackendClient;
use clawless_node::state::{NodeConfig, StateDir};
use clawless_node::worker::{NodeWorker, facts_of};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, start_local};
use clawless_runtime::node_routes::{QueueAccess, nodes_router, queue_credentials_router};
use clawless_runtime::nodes_service::{Dispatch, JobPlacement, NodesDeps, NodesService};
use serde_json::json;
use tokio::sync::watch;

/// The role the moto STS "assumes" for the node's queue credentials (moto checks no IAM).
const NODE_QUEUE_ROLE: &str = "arn:aws:iam::123456789012:role/clawless-node-queue";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    println!(
        "{name:<41} p50 {:>7.2} ms   p99 {:>7.2} ms   (n={})",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.len()
    );
}

/// The three figures, one sample per run, in milliseconds.
#[derive(Default)]
struct Samples {
    to_start: Vec<f64>,
    to_resume: Vec<f64>,
    added: Vec<f64>,
}

impl Samples {
    fn print(self, label: &str) {
        report(
            &format!("job sent -> command started{label}"),
            self.to_start,
        );
        report(
            &format!("command finished -> turn resumed{label}"),
            self.to_resume,
        );
        report(&format!("added by the backend (total){label}"), self.added);
    }
}

/// Pairs a node with `nodes` (served at `url`) under `root`, with a policy that allows
/// exactly `true`, and runs its worker until the returned sender is dropped. The worker
/// reads whatever queue pairing named: the backend's routes locally, its SQS queue on AWS.
async fn start_worker(nodes: &NodesService, url: &str, root: &Path) -> watch::Sender<bool> {
    let state = StateDir::at(root.join("node"));
    state.ensure().expect("node state");
    let (code, _) = nodes.create_pairing_code().await.expect("code");
    let paired = BackendClient::new(url)
        .expect("client")
        .pair(&code, &facts_of("/usr/bin:/bin", Vec::new(), None))
        .await
        .expect("pairing");
    state
        .save_config(&NodeConfig {
            node_id: paired.node_id,
            secret: paired.secret,
            url: url.to_owned(),
            display_name: None,
            queue: Some(paired.queue),
        })
        .expect("node.json");
    std::fs::write(
        state.approvals_path(),
        json!({"version": 1, "agents": {"*": {"allowlist": [
            {"pattern": "/usr/bin/true", "argPattern": "^$"},
            {"pattern": "/bin/true", "argPattern": "^$"}
        ]}}})
        .to_string(),
    )
    .expect("approvals");
    let worker = NodeWorker::open(&state).expect("worker");
    worker.heartbeat().await.expect("heartbeat");
    let (stop, stop_rx) = watch::channel(false);
    tokio::spawn(async move { worker.run(stop_rx).await });
    stop
}

/// Dispatches `true` `runs` times, one at a time, each once the previous result is in;
/// `check_every` is how often the job record is read while waiting for it.
async fn measure(nodes: &NodesService, runs: usize, check_every: Duration) -> Samples {
    let mut samples = Samples::default();
    for run in 0..runs {
        let job_id = format!("bench-{run:05}");
        let call = ToolCall {
            id: format!("call-{run}"),
            name: "exec".to_owned(),
            input: json!({"command": "true"}),
        };
        let sent_at = now_ms_f64();
        let started = Instant::now();
        let dispatched = nodes
            .dispatch(
                "agent:main:bench",
                "main",
                &job_id,
                &call,
                None,
                JobPlacement::Host,
            )
            .await
            .expect("dispatch");
        assert_eq!(dispatched, Dispatch::Sent);
        let (record, report) = loop {
            if let Some((record, _)) = nodes.job(&job_id).await.expect("job")
                && let Some(result) = &record.result
            {
                let report: ExecReport = serde_json::from_str(result).expect("report");
                break (record, report);
            }
            tokio::time::sleep(check_every).await;
        };
        let total = started.elapsed().as_secs_f64() * 1000.0;
        assert!(report.outcome.success, "{report:?}");
        // The report carries when it was sent and how long the command ran, so the command
        // started `duration_ms` before `sent_at_ms` (both on the node's clock, this machine's).
        let run_ms = report.duration_ms as f64;
        let command_started = report.sent_at_ms as f64 - run_ms;
        samples.to_start.push((command_started - sent_at).max(0.0));
        let resumed = record.resolved_at_ms.unwrap_or(report.sent_at_ms) as f64;
        samples
            .to_resume
            .push((resumed - report.sent_at_ms as f64).max(0.0));
        samples.added.push((total - run_ms).max(0.0));
    }
    samples
}

async fn local_half(runs: usize) {
    let root = tempfile::tempdir().expect("temp dir");
    let running = start_local(LocalOptions {
        config: ClawlessConfig::default(),
        state_dir: root.path().join("state"),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: Arc::new(clawless_llm::offline::OfflineModel::new()),
        secrets: Default::default(),
    })
    .await
    .expect("local system");
    let url = format!("http://{}", running.addr);
    let stop = start_worker(&running.nodes, &url, root.path()).await;
    let samples = measure(&running.nodes, runs, Duration::from_micros(200)).await;
    println!("exec round trip in local mode ({runs} runs of `true`; clock resolution 1 ms):");
    samples.print("");
    drop(stop);
    running.stop().await;
}

/// The nodes service wired as the `nodes` function wires it, on moto.
async fn moto_nodes() -> NodesService {
    let sdk = moto_sdk_config().await;
    let dynamodb = dynamodb_client(&sdk);
    let sqs = sqs_client(&sdk);
    let table = fresh_table(&dynamodb).await;
    let timer_queue = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
    let turn_queue = fresh_fifo_queue(&sqs).await;
    NodesService::new(NodesDeps {
        registry: Arc::new(DynamoNodeRegistry::new(dynamodb.clone(), &table)),
        jobs: Arc::new(DynamoExecJobs::new(dynamodb, &table)),
        queues: Arc::new(SqsExecQueue::new(sqs.clone(), unique_queue_prefix())),
        timers: Arc::new(SqsTimers::new(sqs.clone(), timer_queue)),
        turns: Arc::new(SqsTurnQueue::new(sqs, turn_queue)),
        clock: Arc::new(SystemClock),
        settings: ClawlessConfig::default().exec,
    })
}

async fn moto_half(runs: usize) {
    let root = tempfile::tempdir().expect("temp dir");
    let nodes = Arc::new(moto_nodes().await);
    let access = QueueAccess {
        vendor: Arc::new(StsQueueCredentials::new(
            sts_client(&moto_sdk_config().await),
            NODE_QUEUE_ROLE,
        )),
        region: TEST_REGION.to_owned(),
        endpoint_url: Some(moto_endpoint()),
    };
    let router = nodes_router(Arc::clone(&nodes), false)
        .merge(queue_credentials_router(Arc::clone(&nodes), access));
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("listener");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    let stop = start_worker(&nodes, &url, root.path()).await;
    // Each check is a DynamoDB read on moto; checking too often would slow moto down for the
    // worker being measured.
    let samples = measure(&nodes, runs, Duration::from_millis(2)).await;
    println!("exec round trip on moto ({runs} runs of `true`; clock resolution 1 ms):");
    samples.print(" (moto)");
    drop(stop);
    server.abort();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    local_half(if quick { 30 } else { 200 }).await;
    if std::env::var(ENDPOINT_ENV).is_ok_and(|endpoint| !endpoint.trim().is_empty()) {
        moto_half(if quick { 10 } else { 30 }).await;
    } else {
        println!(
            "exec round trip on moto: skipped, {ENDPOINT_ENV} is not set (run `infra/bench \
             exec_roundtrip`, which starts moto, or start `moto_server -H 127.0.0.1 -p PORT` \
             and export {ENDPOINT_ENV}=http://127.0.0.1:PORT)"
        );
    }
}

fn now_ms_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64() * 1000.0)
}
