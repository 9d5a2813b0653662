//! What the backend adds around a command run on a node host, in local mode: the whole local
//! system on 127.0.0.1 (SQLite, HTTP routes) and a real node worker polling it over HTTP,
//! running `true` (allowlisted) again and again.
//!
//! Printed, p50 and p99 over the runs:
//! - job sent → command started: from the backend's dispatch (job stored, queued, timer set)
//!   to the node starting the process (poll, signature and journal checks, policy);
//! - command finished → turn resumed: from the process ending to the result being recorded
//!   and the resume event queued (report signed, posted, checked, stored first-wins);
//! - the total round trip minus the command's own run time.
//!
//! Target: under 50 ms added in local mode. Usage: `cargo bench -p clawless --bench
//! exec_roundtrip [-- --quick]`.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_core::nodes::wire::ExecReport;
use clawless_core::transcript::ToolCall;
use clawless_node::client::BackendClient;
use clawless_node::state::{NodeConfig, StateDir};
use clawless_node::worker::{NodeWorker, facts_of};
use clawless_runtime::ClawlessConfig;
use clawless_runtime::local_mode::{LocalOptions, start_local};
use clawless_runtime::nodes_service::Dispatch;
use serde_json::json;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

fn report(name: &str, mut samples: Vec<f64>) {
    samples.sort_by(f64::total_cmp);
    println!(
        "{name:<34} p50 {:>7.2} ms   p99 {:>7.2} ms   (n={})",
        percentile(&samples, 0.5),
        percentile(&samples, 0.99),
        samples.len()
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::args().any(|arg| arg == "--quick");
    let runs = if quick { 30 } else { 200 };
    let root = tempfile::tempdir().expect("temp dir");
    let running = start_local(LocalOptions {
        config: ClawlessConfig::default(),
        state_dir: root.path().join("state"),
        listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        model: Arc::new(clawless_llm::offline::OfflineModel::new()),
    })
    .await
    .expect("local system");
    let url = format!("http://{}", running.addr);

    // Pair a node with a policy that allows exactly `true`.
    let state = StateDir::at(root.path().join("node"));
    state.ensure().expect("node state");
    let (code, _) = running.nodes.create_pairing_code().await.expect("code");
    let paired = BackendClient::new(&url)
        .expect("client")
        .pair(&code, &facts_of("/usr/bin:/bin", Vec::new(), None))
        .await
        .expect("pairing");
    state
        .save_config(&NodeConfig {
            node_id: paired.node_id,
            secret: paired.secret,
            url: url.clone(),
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
    let (_stop, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move { worker.run(stop_rx).await });

    let mut to_start = Vec::new();
    let mut to_resume = Vec::new();
    let mut added = Vec::new();
    for run in 0..runs {
        let job_id = format!("bench-{run:05}");
        let call = ToolCall {
            id: format!("call-{run}"),
            name: "exec".to_owned(),
            input: json!({"command": "true"}),
        };
        let sent_at = now_ms_f64();
        let started = Instant::now();
        let dispatched = running
            .nodes
            .dispatch("agent:main:bench", "main", &job_id, &call, None)
            .await
            .expect("dispatch");
        assert_eq!(dispatched, Dispatch::Sent);
        let (record, report) = loop {
            if let Some((record, _)) = running.nodes.job(&job_id).await.expect("job")
                && let Some(result) = &record.result
            {
                let report: ExecReport = serde_json::from_str(result).expect("report");
                break (record, report);
            }
            tokio::time::sleep(Duration::from_micros(200)).await;
        };
        let total = started.elapsed().as_secs_f64() * 1000.0;
        assert!(report.outcome.success, "{report:?}");
        let run_ms = report.duration_ms as f64;
        let command_started = report.sent_at_ms as f64 - run_ms;
        to_start.push((command_started - sent_at).max(0.0));
        let resumed = record.resolved_at_ms.unwrap_or(report.sent_at_ms) as f64;
        to_resume.push((resumed - report.sent_at_ms as f64).max(0.0));
        added.push((total - run_ms).max(0.0));
    }
    println!("exec round trip in local mode ({runs} runs of `true`; clock resolution 1 ms):");
    report("job sent -> command started", to_start);
    report("command finished -> turn resumed", to_resume);
    report("added by the backend (total)", added);
    running.stop().await;
}

fn now_ms_f64() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |elapsed| elapsed.as_secs_f64() * 1000.0)
}
