//! `DynamoCronStore` through the real AWS SDK against `moto_server` on loopback (started by
//! `infra/test`): the shared contract, the item layout beside sessions and nodes, pruning
//! that really deletes, and the size limits. These tests fail, never skip, when the emulator
//! is not there.

use aws_sdk_dynamodb::types::AttributeValue;
use clawless_automation::cron::run_log::RunsQuery;
use clawless_automation::cron::store::MAX_CRON_JOB_BYTES;
use clawless_automation::cron::{CronStore, CronStoreError, Reservation, RunSlot};
use clawless_aws::testing::{dynamodb_client, dynamodb_on_fresh_table, moto_sdk_config};
use clawless_aws::{DynamoCronStore, DynamoNodeRegistry, DynamoSessionStore};
use clawless_core::nodes::NodeRegistry;
use clawless_core::session::{SessionCommit, SessionKey, SessionStore};
use clawless_core::testing::{
    CronStoreDeviations, cron_store_contract, sample_cron_job, sample_node, sample_run_entry,
};

/// moto 5.2.x checks a condition and then writes the item without a lock, on a threaded
/// server, so two concurrent reservations conditioned on one version can both be written.
/// The contract's race of concurrent reservers is skipped here; real DynamoDB serialises
/// writes to an item, and every condition is still checked one call at a time (see
/// `tests/dynamo_nodes.rs` for the same deviation).
const MOTO: CronStoreDeviations = CronStoreDeviations {
    conditional_writes_not_atomic: true,
};

#[tokio::test]
async fn dynamo_cron_store_passes_the_cron_store_contract() {
    let (client, table) = dynamodb_on_fresh_table().await;
    cron_store_contract(&DynamoCronStore::new(client, table), MOTO).await;
}

#[tokio::test]
async fn two_cron_contract_runs_can_share_one_table() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let store = DynamoCronStore::new(client, table);
    tokio::join!(
        cron_store_contract(&store, MOTO),
        cron_store_contract(&store, MOTO)
    );
}

#[tokio::test]
async fn cron_items_live_beside_sessions_and_nodes_without_meeting_them() {
    // GIVEN a session, a node, and a cron job with a reserved slot and a pruned run log,
    // all in one table; the job id looks like a session key
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
    DynamoNodeRegistry::new(client.clone(), &table)
        .register(&sample_node("n1"))
        .await
        .unwrap();
    let store = DynamoCronStore::new(client.clone(), &table);
    let id = "agent:main:main";
    store.put_job(&sample_cron_job(id), None).await.unwrap();
    store
        .reserve_run(id, RunSlot::Scheduled(60_000), 60_001, 1)
        .await
        .unwrap();
    for ts in 1..=4 {
        store
            .append_run(&sample_run_entry(id, ts), 2)
            .await
            .unwrap();
    }

    // THEN each item has the documented keys, and the pruned lines are gone from the table
    let scan = client.scan().table_name(&table).send().await.unwrap();
    let mut keys: Vec<(String, String)> = scan
        .items()
        .iter()
        .map(|item| {
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            (text("pk").unwrap(), text("sk").unwrap())
        })
        .collect();
    keys.sort();
    let pair = |pk: &str, sk: &str| (pk.to_owned(), sk.to_owned());
    assert_eq!(
        keys,
        vec![
            pair("agent:main:main", "tail"),
            pair("cron", "job#agent:main:main"),
            pair("cron", "runlog#agent:main:main"),
            pair("cronruns#agent:main:main", &format!("run#{:020}", 3)),
            pair("cronruns#agent:main:main", &format!("run#{:020}", 4)),
            pair("nodes", "node#n1"),
        ]
    );
    // AND the session and the job each read back as they were
    let loaded = sessions.load(&key).await.unwrap().unwrap();
    assert_eq!((loaded.version, loaded.meta.as_str()), (1, "{}"));
    let stored = store.get_job(id).await.unwrap().unwrap();
    assert_eq!(
        (stored.version, stored.job.name.as_str()),
        (2, "Job agent:main:main")
    );
    let ts: Vec<u64> = store
        .runs(None, &RunsQuery::default())
        .await
        .unwrap()
        .entries
        .iter()
        .map(|e| e.ts)
        .collect();
    assert_eq!(ts, [4, 3]);
}

#[tokio::test]
async fn a_job_item_keeps_its_json_as_a_string_and_versions_and_marks_as_numbers() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let store = DynamoCronStore::new(client.clone(), &table);
    store.put_job(&sample_cron_job("j1"), None).await.unwrap();
    store
        .reserve_run("j1", RunSlot::Manual(5), 6, 1)
        .await
        .unwrap();
    store
        .append_run(&sample_run_entry("j1", 9), 10)
        .await
        .unwrap();
    let get = |pk: &str, sk: &str| {
        client
            .get_item()
            .table_name(&table)
            .key("pk", AttributeValue::S(pk.into()))
            .key("sk", AttributeValue::S(sk.into()))
            .send()
    };
    let item = get("cron", "job#j1").await.unwrap().item.unwrap();
    assert_eq!(item["version"], AttributeValue::N("2".into()));
    assert_eq!(item["manual_slot_ms"], AttributeValue::N("5".into()));
    assert!(!item.contains_key("scheduled_slot_ms"));
    assert!(!item.contains_key("expires_at"), "jobs never expire by TTL");
    let body: serde_json::Value = serde_json::from_str(item["body"].as_s().unwrap()).unwrap();
    assert_eq!(body["state"]["runningAtMs"], 6, "OpenClaw's job JSON");
    let head = get("cron", "runlog#j1").await.unwrap().item.unwrap();
    assert_eq!(head["last_seq"], AttributeValue::N("1".into()));
    let line = get("cronruns#j1", &format!("run#{:020}", 1))
        .await
        .unwrap()
        .item
        .unwrap();
    assert_eq!(line["ts"], AttributeValue::N("9".into()));
    assert_eq!(
        line["body"].as_s().unwrap(),
        &serde_json::to_string(&sample_run_entry("j1", 9)).unwrap()
    );
}

#[tokio::test]
async fn sequential_duplicate_deliveries_through_two_clients_reserve_once() {
    // GIVEN one job and two separately built stores (two Lambda invocations)
    let (client, table) = dynamodb_on_fresh_table().await;
    let first = DynamoCronStore::new(client, &table);
    let second = DynamoCronStore::new(dynamodb_client(&moto_sdk_config().await), &table);
    first.put_job(&sample_cron_job("dup"), None).await.unwrap();
    // WHEN both deliveries of one firing reserve it, each having read version 1
    let won = first
        .reserve_run("dup", RunSlot::Scheduled(60_000), 60_001, 1)
        .await
        .unwrap();
    let lost = second
        .reserve_run("dup", RunSlot::Scheduled(60_000), 60_002, 1)
        .await
        .unwrap();
    // THEN only the first runs it
    assert!(matches!(won, Reservation::Reserved(_)), "{won:?}");
    assert_eq!(
        lost,
        Reservation::AlreadyTaken {
            last_slot_ms: 60_000
        }
    );
}

#[tokio::test]
async fn a_job_over_the_size_limit_is_rejected_before_any_request() {
    let (client, table) = dynamodb_on_fresh_table().await;
    let store = DynamoCronStore::new(client, &table);
    let mut big = sample_cron_job("big");
    big.description = Some("x".repeat(MAX_CRON_JOB_BYTES));
    let result = store.put_job(&big, None).await;
    assert!(
        matches!(&result, Err(CronStoreError::Rejected { reason, .. }) if reason.contains("65536")),
        "{result:?}"
    );
    assert_eq!(store.get_job("big").await.unwrap(), None);
}

#[tokio::test]
async fn a_missing_table_is_a_backend_error_with_the_sdk_error_as_source() {
    let config = moto_sdk_config().await;
    let store = DynamoCronStore::new(dynamodb_client(&config), "clawless-no-such-table");
    let err = store.get_job("j").await.unwrap_err();
    assert!(matches!(err, CronStoreError::Backend { .. }), "{err:?}");
    assert!(std::error::Error::source(&err).is_some(), "{err}");
    let err = store
        .append_run(&sample_run_entry("j", 1), 5)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("clawless-no-such-table"), "{err}");
}
