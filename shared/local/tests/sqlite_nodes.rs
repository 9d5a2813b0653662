//! The SQLite node registry, exec jobs, exec queues and timers on real database files: the
//! shared contracts, plus what only a file needs (surviving a reopen, races between separate
//! connections, upgrading a file from before the node tables).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use clawless_core::nodes::{
    ExecJobs, ExecQueue, NodeExecReport, NodeFacts, NodeRegistry, ResolveOutcome,
};
use clawless_core::testing::{
    CONTRACT_TIMER_VISIBILITY, NodeStoreDeviations, TimersDeviations, exec_jobs_contract,
    exec_queue_contract, node_registry_contract, sample_exec_job, sample_node,
    sample_session_event, timers_contract,
};
use clawless_core::timers::{Timer, Timers};
use clawless_exec::evaluate::ExecPolicy;
use clawless_local::sqlite::{SqliteExecJobs, SqliteExecQueue, SqliteNodeRegistry, SqliteTimers};

mod support;
use support::DbFile;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_node_registry_passes_the_node_registry_contract() {
    let file = DbFile::new();
    node_registry_contract(
        &SqliteNodeRegistry::new(file.open()),
        NodeStoreDeviations::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_registry_contract_runs_share_one_file_through_two_connections() {
    let file = DbFile::new();
    let first = SqliteNodeRegistry::new(file.open());
    let second = SqliteNodeRegistry::new(file.open());
    tokio::join!(
        node_registry_contract(&first, NodeStoreDeviations::default()),
        node_registry_contract(&second, NodeStoreDeviations::default())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_exec_jobs_pass_the_exec_jobs_contract() {
    let file = DbFile::new();
    exec_jobs_contract(
        &SqliteExecJobs::new(file.open()),
        NodeStoreDeviations::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_exec_queue_passes_the_exec_queue_contract() {
    let file = DbFile::new();
    exec_queue_contract(&SqliteExecQueue::new(file.open())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_timers_pass_the_timers_contract() {
    // Every timer set the contract asks for is a fresh name in one shared file.
    let file = DbFile::new();
    let db = file.open();
    let next = AtomicU64::new(0);
    timers_contract(
        || {
            let name = format!("contract-{}", next.fetch_add(1, Ordering::Relaxed));
            let timers = SqliteTimers::named(db.clone(), name)
                .with_visibility_timeout(CONTRACT_TIMER_VISIBILITY);
            async move { Box::new(timers) as Box<dyn Timers> }
        },
        TimersDeviations::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_resolves_through_separate_connections_have_exactly_one_winner() {
    // GIVEN a job and four connections to its file
    let file = DbFile::new();
    let stores: Vec<SqliteExecJobs> = (0..4).map(|_| SqliteExecJobs::new(file.open())).collect();
    assert!(stores[0].create(&sample_exec_job("race")).await.unwrap());

    // WHEN each resolves it at once
    let mut tasks = tokio::task::JoinSet::new();
    for (writer, store) in stores.iter().enumerate() {
        let store = store.clone();
        tasks.spawn(async move {
            let result = format!(r#"{{"writer":{writer}}}"#);
            (writer, store.resolve("race", 1, &result, 10).await.unwrap())
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (writer, outcome) = joined.unwrap();
        match outcome {
            ResolveOutcome::Recorded => winners.push(writer),
            ResolveOutcome::AlreadyResolved => {}
            other => panic!("writer {writer}: {other:?}"),
        }
    }

    // THEN exactly one wins and its result is stored
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = stores[3].get("race").await.unwrap().unwrap();
    assert_eq!(
        stored.result,
        Some(format!(r#"{{"writer":{}}}"#, winners[0]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_redeems_through_separate_connections_have_exactly_one_winner() {
    let file = DbFile::new();
    let registries: Vec<SqliteNodeRegistry> = (0..4)
        .map(|_| SqliteNodeRegistry::new(file.open()))
        .collect();
    registries[0].create_pairing("code", 100).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for registry in &registries {
        let registry = registry.clone();
        tasks.spawn(async move { registry.redeem_pairing("code", 50).await.unwrap() });
    }
    let mut redeemed = 0;
    while let Some(joined) = tasks.join_next().await {
        redeemed += usize::from(joined.unwrap());
    }
    assert_eq!(redeemed, 1);
}

#[tokio::test]
async fn nodes_jobs_queued_jobs_and_timers_survive_reopening_the_file() {
    // GIVEN a node, a resolved job, a queued exec message and a pending timer, then closed
    let file = DbFile::new();
    let queue_name;
    let due_at = 1_000;
    {
        let db = file.open();
        SqliteNodeRegistry::new(db.clone())
            .register(&sample_node("n1"))
            .await
            .unwrap();
        let jobs = SqliteExecJobs::new(db.clone());
        jobs.create(&sample_exec_job("j1")).await.unwrap();
        jobs.resolve("j1", 1, r#"{"exitCode":0}"#, 5).await.unwrap();
        let queues = SqliteExecQueue::new(db.clone());
        queue_name = queues.create_node_queue("n1").await.unwrap();
        queues.send(&queue_name, "job envelope").await.unwrap();
        SqliteTimers::new(db.clone())
            .schedule(&Timer {
                timer_id: "deadline:j1:1".into(),
                due_at_ms: due_at,
                event: sample_session_event("call-1"),
            })
            .await
            .unwrap();
    }

    // WHEN the file is opened again
    let db = file.open();

    // THEN all of it is still there
    assert_eq!(
        SqliteNodeRegistry::new(db.clone()).get("n1").await.unwrap(),
        Some(sample_node("n1"))
    );
    let stored = SqliteExecJobs::new(db.clone())
        .get("j1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.result.as_deref(), Some(r#"{"exitCode":0}"#));
    let queues = SqliteExecQueue::new(db.clone());
    let deliveries = queues
        .receive(&queue_name, 10, Duration::ZERO, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].body, "job envelope");
    let timers = SqliteTimers::new(db.clone());
    let due = timers.take_due(due_at, 10, Duration::ZERO).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].timer.event, sample_session_event("call-1"));
}

#[tokio::test]
async fn timers_follow_the_callers_clock_and_sets_are_independent() {
    // GIVEN two timer sets in one file, each with a timer due at 10 000
    let file = DbFile::new();
    let db = file.open();
    let deadlines = SqliteTimers::named(db.clone(), "deadlines");
    let approvals = SqliteTimers::named(db.clone(), "approvals");
    for timers in [&deadlines, &approvals] {
        timers
            .schedule(&Timer {
                timer_id: "same-id".into(),
                due_at_ms: 10_000,
                event: sample_session_event("c"),
            })
            .await
            .unwrap();
    }
    // WHEN taken just before and at the due time
    assert!(
        deadlines
            .take_due(9_999, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    let due = deadlines
        .take_due(10_000, 10, Duration::ZERO)
        .await
        .unwrap();
    // THEN only the due take finds it, and only in its own set
    assert_eq!(due.len(), 1);
    deadlines.ack(&due[0].receipt).await.unwrap();
    assert!(
        deadlines
            .take_due(20_000_000, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        approvals
            .take_due(10_000, 10, Duration::ZERO)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_poison_message_is_kept_as_a_dead_letter() {
    let file = DbFile::new();
    let queues = SqliteExecQueue::new(file.open());
    let queue = queues.create_node_queue("n1").await.unwrap();
    queues.send(&queue, "poison").await.unwrap();
    for _ in 0..5 {
        let got = queues
            .receive(&queue, 1, Duration::ZERO, Duration::ZERO)
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
    }
    assert!(
        queues
            .receive(&queue, 1, Duration::ZERO, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        queues.dead_letters(&queue).await.unwrap(),
        vec!["poison".to_owned()]
    );
}

#[tokio::test]
async fn receipts_that_are_not_ours_are_refused_and_stale_ones_delete_nothing() {
    let file = DbFile::new();
    let queues = SqliteExecQueue::new(file.open());
    let queue = queues.create_node_queue("n1").await.unwrap();
    assert!(queues.delete(&queue, "garbage").await.is_err());
    queues.send(&queue, "x").await.unwrap();
    let first = queues
        .receive(&queue, 1, Duration::ZERO, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    let second = queues
        .receive(&queue, 1, Duration::ZERO, Duration::from_secs(30))
        .await
        .unwrap()
        .remove(0);
    queues.delete(&queue, &first.receipt).await.unwrap();
    queues.delete(&queue, &second.receipt).await.unwrap();
    assert!(
        queues.dead_letters(&queue).await.unwrap().is_empty(),
        "deleted, not dead-lettered"
    );
    queues.send(&queue, "y").await.unwrap();
    let third = queues
        .receive(&queue, 1, Duration::ZERO, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    queues.delete(&queue, &first.receipt).await.unwrap();
    assert_eq!(
        queues
            .receive(&queue, 1, Duration::ZERO, Duration::ZERO)
            .await
            .unwrap()
            .len(),
        1,
        "a receipt of another message deletes nothing: {third:?}"
    );
}

#[test]
fn a_file_from_before_the_node_tables_is_upgraded() {
    // GIVEN a file at schema version 1 without the node tables
    let file = DbFile::new();
    drop(file.open());
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    raw.execute_batch(
        "DROP TABLE nodes; DROP TABLE node_pairings; DROP TABLE exec_jobs;
         DROP TABLE exec_queues; DROP TABLE exec_messages; DROP TABLE timers;
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(raw);
    // WHEN it is opened THEN the tables are there and the version is current
    drop(file.open());
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    let tables: i64 = raw
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'
             AND name IN ('nodes', 'node_pairings', 'exec_jobs', 'exec_queues', 'exec_messages', 'timers')",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(tables, 6);
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, 6);
}

#[tokio::test]
async fn a_version_2_nodes_table_gains_the_exec_column_and_keeps_its_nodes() {
    // GIVEN a file at schema version 2: the nodes table without `exec`, one node in it
    let file = DbFile::new();
    drop(file.open());
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    raw.execute_batch(
        "ALTER TABLE nodes DROP COLUMN exec;
         INSERT INTO nodes (node_id, display_name, secret_hash, platform, path, skill_bins,
             queue, paired_at_ms, last_seen_ms, revoked, revoked_at_ms, granted, policy_version)
         VALUES ('old', NULL, 'ab', 'linux', '[]', '[]', 'node-old', 1, 1, 0, NULL, '[]', 0);
         PRAGMA user_version = 2;",
    )
    .unwrap();
    drop(raw);
    // WHEN it is opened THEN the old node reads back without exec facts, and they can be stored
    let registry = SqliteNodeRegistry::new(file.open());
    let old = registry.get("old").await.unwrap().expect("the old node");
    assert_eq!(old.exec, None);
    let facts = NodeFacts {
        platform: "linux".into(),
        path: vec![],
        skill_bins: vec![],
        display_name: None,
        exec: Some(NodeExecReport {
            home: Some("/home/me".into()),
            default_policy: ExecPolicy::default(),
            agents: Default::default(),
            fs: Default::default(),
            truncated: false,
            sandbox_backends: Vec::new(),
        }),
    };
    assert!(registry.heartbeat("old", &facts, 2).await.unwrap());
    assert_eq!(registry.get("old").await.unwrap().unwrap().exec, facts.exec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_background_processes_pass_their_contract() {
    let file = DbFile::new();
    clawless_core::testing::background_processes_contract(
        &clawless_local::sqlite::SqliteBackgroundProcesses::new(file.open()),
        NodeStoreDeviations::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_process_ended_through_one_connection_is_ended_for_another() {
    use clawless_core::nodes::{BackgroundProcess, BackgroundProcesses, ProcessStatus};
    // GIVEN two connections to one file, and a running entry written through the first
    let file = DbFile::new();
    let first = clawless_local::sqlite::SqliteBackgroundProcesses::new(file.open());
    let second = clawless_local::sqlite::SqliteBackgroundProcesses::new(file.open());
    let running = BackgroundProcess {
        session_key: "agent:main:main".into(),
        session_id: "swift-otter".into(),
        node_id: "node-1".into(),
        exec_job_id: "job-1".into(),
        command: "sleep 2".into(),
        status: ProcessStatus::Running,
        started_at_ms: 1_000,
        ended_at_ms: None,
        exit_code: None,
    };
    assert!(first.record_running(&running).await.unwrap());
    let ended = BackgroundProcess {
        status: ProcessStatus::Completed,
        ended_at_ms: Some(3_000),
        exit_code: Some(0),
        ..running.clone()
    };
    // WHEN both finish it (a node posting its exit twice, to two backends)
    let (one, two) = tokio::join!(first.finish(&ended), second.finish(&ended));
    // THEN exactly one passes the gate, and a reopened file still knows it ended
    assert_eq!(u8::from(one.unwrap()) + u8::from(two.unwrap()), 1);
    let reopened = clawless_local::sqlite::SqliteBackgroundProcesses::new(file.open());
    assert_eq!(
        reopened
            .get("agent:main:main", "swift-otter")
            .await
            .unwrap(),
        Some(ended.clone())
    );
    assert!(!reopened.finish(&ended).await.unwrap());
}
