//! `DynamoNodeRegistry` and `DynamoExecJobs` through the real AWS SDK against `moto_server` on
//! loopback (started by `infra/test`): the shared contracts, the item layout beside sessions,
//! and the size limits. These tests fail, never skip, when the emulator is not there.

use aws_sdk_dynamodb::types::AttributeValue;
use clawless_aws::dynamo_nodes::{MAX_EXEC_REPORT_BYTES, MAX_JOB_DOCUMENT_BYTES};
use clawless_aws::testing::{dynamodb_client, dynamodb_on_fresh_table, moto_sdk_config};
use clawless_aws::{DynamoExecJobs, DynamoNodeRegistry, DynamoSessionStore};
use clawless_core::nodes::{
    ExecJobs, NodeExecReport, NodeFacts, NodeRegistry, NodeStoreError, ResolveOutcome,
};
use clawless_core::session::{SessionCommit, SessionKey, SessionStore};
use clawless_core::testing::{
    NodeStoreDeviations, exec_jobs_contract, node_registry_contract, sample_exec_job, sample_node,
    sized_json_body,
};
use clawless_exec::evaluate::ExecPolicy;
use clawless_exec::fs::DescribedFs;

/// moto 5.2.x checks a condition and then writes the item without a lock, on a threaded
/// server, so concurrent conditional writes to one item can both succeed (seen: two of eight
/// concurrent grants both written at one policy version). The contracts' races are skipped
/// here; real DynamoDB serialises writes to an item, and every condition is still checked one
/// call at a time. (The race shows in about one run in three, so no test pins it.)
const MOTO: NodeStoreDeviations = NodeStoreDeviations {
    conditional_writes_not_atomic: true,
};

#[tokio::test]
async fn dynamo_node_registry_passes_the_node_registry_contract() {
    let (client, table) = dynamodb_on_fresh_table().await;
    node_registry_contract(&DynamoNodeRegistry::new(client, table), MOTO).await;
}

#[tokio::test]
async fn two_registry_contract_runs_can_share_one_table() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let registry = DynamoNodeRegistry::new(client, table);
    tokio::join!(
        node_registry_contract(&registry, MOTO),
        node_registry_contract(&registry, MOTO)
    );
}

#[tokio::test]
async fn dynamo_exec_jobs_pass_the_exec_jobs_contract() {
    let (client, table) = dynamodb_on_fresh_table().await;
    exec_jobs_contract(&DynamoExecJobs::new(client, table), MOTO).await;
}

#[tokio::test]
async fn nodes_codes_and_jobs_live_beside_sessions_without_meeting_them() {
    // GIVEN a session, a node, a pairing code and a job in one table
    let (client, table) = dynamodb_on_fresh_table().await;
    let sessions = DynamoSessionStore::new(client.clone(), &table);
    let key = SessionKey::parse("agent:main:main").unwrap();
    sessions
        .commit(
            &key,
            &SessionCommit {
                expected_version: 0,
                live_from: 0,
                last_seq: 0,
                meta: "{}".into(),
                steps: vec![],
            },
        )
        .await
        .unwrap();
    let registry = DynamoNodeRegistry::new(client.clone(), &table);
    registry.register(&sample_node("n1")).await.unwrap();
    registry
        .create_pairing("c0ffee", 1_700_000_600_000)
        .await
        .unwrap();
    let jobs = DynamoExecJobs::new(client.clone(), &table);
    // A job id that looks like a session key must not touch the session.
    jobs.create(&sample_exec_job("agent:main:main"))
        .await
        .unwrap();

    // THEN each item has the documented keys and TTL
    let scan = client.scan().table_name(&table).send().await.unwrap();
    let mut keys: Vec<(String, String, Option<String>)> = scan
        .items()
        .iter()
        .map(|item| {
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            let ttl = item.get("expires_at").and_then(|v| v.as_n().ok()).cloned();
            (text("pk").unwrap(), text("sk").unwrap(), ttl)
        })
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        vec![
            ("agent:main:main".into(), "tail".into(), None),
            (
                "job#agent:main:main".into(),
                "job".into(),
                Some((1_700_000_060 + 30 * 86_400).to_string())
            ),
            ("nodes".into(), "node#n1".into(), None),
            (
                "pairing#c0ffee".into(),
                "code".into(),
                Some((1_700_000_600 + 86_400).to_string())
            ),
        ]
    );
    // AND the session still loads as it was
    let loaded = sessions.load(&key).await.unwrap().unwrap();
    assert_eq!((loaded.version, loaded.steps.len()), (1, 0));
    assert_eq!(registry.list().await.unwrap(), vec![sample_node("n1")]);
}

#[tokio::test]
async fn a_node_item_keeps_lists_as_json_and_flags_as_native_types() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let registry = DynamoNodeRegistry::new(client.clone(), &table);
    let mut record = sample_node("n2");
    record.display_name = Some("desk".into());
    registry.register(&record).await.unwrap();
    registry.revoke("n2", 42).await.unwrap();
    let item = client
        .get_item()
        .table_name(&table)
        .key("pk", AttributeValue::S("nodes".into()))
        .key("sk", AttributeValue::S("node#n2".into()))
        .send()
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(item["revoked"], AttributeValue::Bool(true));
    assert_eq!(item["revoked_at_ms"], AttributeValue::N("42".into()));
    assert_eq!(item["path"], AttributeValue::S(r#"["/usr/bin"]"#.into()));
    assert_eq!(item["granted"], AttributeValue::S("[]".into()));
    assert!(
        !item.contains_key("expires_at"),
        "nodes never expire by TTL"
    );
}

#[tokio::test]
async fn an_exec_report_over_its_budget_is_not_stored_and_the_heartbeat_still_counts() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let registry = DynamoNodeRegistry::new(client, &table);
    registry.register(&sample_node("n3")).await.unwrap();
    let report = |paths: usize| NodeExecReport {
        home: None,
        default_policy: ExecPolicy::default(),
        agents: Default::default(),
        fs: DescribedFs {
            executables: (0..paths)
                .map(|n| format!("/opt/a-rather-long-folder-name/bin/tool-{n:06}"))
                .collect(),
            ..DescribedFs::default()
        },
        truncated: false,
        sandbox_backends: Vec::new(),
    };
    let facts = |exec| NodeFacts {
        platform: "linux".into(),
        path: vec!["/usr/bin".into()],
        skill_bins: vec![],
        display_name: None,
        exec: Some(exec),
    };
    let small = facts(report(10));
    assert!(registry.heartbeat("n3", &small, 5).await.unwrap());
    assert_eq!(registry.get("n3").await.unwrap().unwrap().exec, small.exec);

    let huge = report(MAX_EXEC_REPORT_BYTES / 40);
    assert!(serde_json::to_string(&huge).unwrap().len() > MAX_EXEC_REPORT_BYTES);
    assert!(
        registry.heartbeat("n3", &facts(huge), 6).await.unwrap(),
        "the heartbeat is recorded"
    );
    let stored = registry.get("n3").await.unwrap().unwrap();
    assert_eq!(stored.last_seen_ms, 6);
    assert_eq!(
        stored.exec, None,
        "and the oversized report replaced by none"
    );
}

#[tokio::test]
async fn documents_over_the_item_budget_are_too_large_and_write_nothing() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let jobs = DynamoExecJobs::new(client, table);
    let mut big = sample_exec_job("big");
    big.envelope = sized_json_body("envelope", MAX_JOB_DOCUMENT_BYTES + 1);
    let created = jobs.create(&big).await;
    assert!(
        matches!(created, Err(NodeStoreError::TooLarge { .. })),
        "{created:?}"
    );
    assert_eq!(jobs.get("big").await.unwrap(), None);

    assert!(jobs.create(&sample_exec_job("ok")).await.unwrap());
    let result = jobs
        .resolve(
            "ok",
            1,
            &sized_json_body("result", MAX_JOB_DOCUMENT_BYTES + 1),
            5,
        )
        .await;
    assert!(
        matches!(result, Err(NodeStoreError::TooLarge { .. })),
        "{result:?}"
    );
    let at_limit = sized_json_body("result", MAX_JOB_DOCUMENT_BYTES);
    let mut envelope_at_limit = sample_exec_job("both");
    envelope_at_limit.envelope = sized_json_body("envelope", MAX_JOB_DOCUMENT_BYTES);
    assert!(jobs.create(&envelope_at_limit).await.unwrap());
    assert_eq!(
        jobs.resolve("both", 1, &at_limit, 5).await.unwrap(),
        ResolveOutcome::Recorded,
        "an envelope and a result at the limit fit one item"
    );
    assert_eq!(
        jobs.get("both").await.unwrap().unwrap().result.as_deref(),
        Some(at_limit.as_str())
    );
}

#[tokio::test]
async fn a_missing_table_is_unavailable_with_the_sdk_error_as_source() {
    let config = moto_sdk_config().await;
    let client = dynamodb_client(&config);
    let registry = DynamoNodeRegistry::new(client.clone(), "clawless-no-such-table");
    let err = registry.get("n1").await.unwrap_err();
    assert!(matches!(err, NodeStoreError::Unavailable { .. }), "{err:?}");
    assert!(std::error::Error::source(&err).is_some());
    let jobs = DynamoExecJobs::new(client, "clawless-no-such-table");
    let err = jobs.resolve("j", 1, "{}", 1).await.unwrap_err();
    assert!(std::error::Error::source(&err).is_some(), "{err}");
}

#[tokio::test]
async fn dynamo_background_processes_pass_their_contract() {
    let (client, table) = dynamodb_on_fresh_table().await;
    clawless_core::testing::background_processes_contract(
        &clawless_aws::DynamoBackgroundProcesses::new(client, table),
        MOTO,
    )
    .await;
}

#[tokio::test]
async fn a_background_process_entry_never_touches_the_session_of_its_key() {
    use clawless_core::nodes::{BackgroundProcess, BackgroundProcesses, ProcessStatus};
    // GIVEN a session and a background process entry of the same session key
    let (client, table) = dynamodb_on_fresh_table().await;
    let sessions = DynamoSessionStore::new(client.clone(), &table);
    let key = SessionKey::parse("agent:main:main").unwrap();
    sessions
        .commit(
            &key,
            &SessionCommit {
                expected_version: 0,
                live_from: 0,
                last_seq: 0,
                meta: "{}".into(),
                steps: vec![],
            },
        )
        .await
        .unwrap();
    let index = clawless_aws::DynamoBackgroundProcesses::new(client.clone(), &table);
    let entry = BackgroundProcess {
        session_key: "agent:main:main".into(),
        session_id: "swift-otter".into(),
        node_id: "node-1".into(),
        exec_job_id: "job-1".into(),
        command: "sleep 2; echo done".into(),
        status: ProcessStatus::Running,
        started_at_ms: 1_700_000_000_000,
        ended_at_ms: None,
        exit_code: None,
    };
    assert!(index.record_running(&entry).await.unwrap());
    // WHEN it ends, twice
    let ended = BackgroundProcess {
        status: ProcessStatus::Completed,
        ended_at_ms: Some(1_700_000_002_000),
        exit_code: Some(0),
        ..entry.clone()
    };
    assert!(index.finish(&ended).await.unwrap());
    assert!(!index.finish(&ended).await.unwrap());
    // THEN the session still loads as it was, and the index lists the ended entry
    assert!(sessions.load(&key).await.unwrap().is_some());
    assert_eq!(index.list("agent:main:main").await.unwrap(), vec![ended]);
}
