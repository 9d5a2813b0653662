//! `DynamoSessionStore` and `DynamoInbox` through the real AWS SDK against `moto_server` on
//! loopback (started by `infra/test`): the shared contracts, the offloading wrapper over
//! DynamoDB + S3, the table layout, the limits and the request counts. Each test has a table
//! of its own: moto does not isolate concurrent transactions on one table (see `MOTO`).
//! These tests fail, never skip, when the emulator is not there.

use std::collections::HashMap;
use std::sync::Arc;

use aws_sdk_dynamodb::types::AttributeValue;
use clawless_aws::testing::{
    dynamodb_client, dynamodb_client_counting, dynamodb_on_fresh_table, fresh_bucket, fresh_table,
    moto_sdk_config, s3_client,
};
use clawless_aws::{DynamoInbox, DynamoSessionStore, S3ObjectStore};
use clawless_base::object_store::ObjectStore;
use clawless_core::session::offload::OffloadingSessionStore;
use clawless_core::session::{Inbox, SessionCommit, SessionStore, SessionStoreError, StoredStep};
use clawless_core::testing::{
    SessionStoreDeviations, inbox_contract, sample_steps, session_key, session_lister_contract,
    session_store_contract, sized_json_body,
};

async fn store_on_fresh_table() -> (DynamoSessionStore, aws_sdk_dynamodb::Client) {
    let (client, table) = dynamodb_on_fresh_table().await;
    (DynamoSessionStore::new(client.clone(), table), client)
}

/// moto 5.x does not isolate concurrent `TransactWriteItems` on one table (see
/// [`SessionStoreDeviations::concurrent_commits_not_isolated`]): the contract's race of 8
/// writers on one version then ends with the losers' steps written beside the winner's. So
/// the race is skipped here, and every test gets a table of its own; real DynamoDB
/// serialises transactions, and every condition is checked one commit at a time.
const MOTO: SessionStoreDeviations = SessionStoreDeviations {
    concurrent_commits_not_isolated: true,
};

#[tokio::test]
async fn dynamo_session_store_passes_the_session_store_contract() {
    let (store, _) = store_on_fresh_table().await;
    session_store_contract(&store, MOTO).await;
}

#[tokio::test]
async fn dynamo_session_store_lists_sessions_and_nothing_else_of_the_table() {
    // GIVEN a table that also holds an inbox claim (other item kinds share it)
    let (store, client) = store_on_fresh_table().await;
    DynamoInbox::new(client, store.table())
        .claim("evt-1", std::time::Duration::from_secs(60), 1_000)
        .await
        .unwrap();
    // THEN listing passes the contract, which sees only the sessions it committed
    session_lister_contract(&store, &store).await;
    // AND the claim never shows up as a session
    let listed = clawless_core::session::SessionLister::list_sessions(&store)
        .await
        .unwrap();
    assert!(
        listed
            .iter()
            .all(|summary| summary.key.as_str().starts_with("agent:")),
        "{listed:?}"
    );
    assert_eq!(listed.len(), 2, "{listed:?}");
}

#[tokio::test]
async fn dynamo_inbox_passes_the_inbox_contract() {
    let (store, client) = store_on_fresh_table().await;
    inbox_contract(&DynamoInbox::new(client, store.table())).await;
}

#[tokio::test]
async fn the_offloading_wrapper_over_dynamodb_and_s3_passes_the_contract() {
    // GIVEN sessions in DynamoDB and large bodies in S3
    let config = moto_sdk_config().await;
    let (dynamo, _) = store_on_fresh_table().await;
    let s3 = s3_client(&config);
    let bucket = fresh_bucket(&s3, "sessions").await;
    let objects = Arc::new(S3ObjectStore::new(s3, bucket));
    let store = OffloadingSessionStore::new(Arc::new(dynamo.clone()), objects.clone(), "sessions/")
        .with_max_blob_bytes(2 * 1024 * 1024);

    // THEN it behaves like any session store
    session_store_contract(&store, MOTO).await;

    // AND a 1 MB step lands in S3 while its DynamoDB item stays small
    let session = session_key("agent:main:generic:group:42");
    let big = sized_json_body("tool output", 1024 * 1024);
    store
        .commit(
            &session,
            &SessionCommit {
                expected_version: 0,
                live_from: 0,
                last_seq: 0,
                meta: "{}".into(),
                steps: vec![StoredStep {
                    seq: 1,
                    body: big.clone(),
                }],
            },
        )
        .await
        .unwrap();
    let loaded = store.load(&session).await.unwrap().unwrap();
    assert!(loaded.steps[0].body == big);
    let raw = dynamo.load(&session).await.unwrap().unwrap();
    assert!(raw.steps[0].body.len() < 200, "{}", raw.steps[0].body);
    let listing = objects
        .list("sessions/agent:main:generic:group:42/steps/", 10)
        .await
        .unwrap();
    assert_eq!(listing.objects.len(), 1);
    assert_eq!(listing.objects[0].size, 1024 * 1024);
}

#[tokio::test]
async fn items_follow_the_documented_layout() {
    // GIVEN a session with two steps and one inbox claim
    let (store, client) = store_on_fresh_table().await;
    let session = session_key("agent:main:main");
    store
        .commit(
            &session,
            &SessionCommit {
                expected_version: 0,
                live_from: 7,
                last_seq: 0,
                meta: r#"{"m":1}"#.into(),
                steps: sample_steps([7, 12]),
            },
        )
        .await
        .unwrap();
    let inbox = DynamoInbox::new(client.clone(), store.table());
    inbox
        .claim(
            "telegram:99",
            std::time::Duration::from_secs(600),
            1_800_000_000,
        )
        .await
        .unwrap();

    // WHEN scanning the raw table
    let scan = client
        .scan()
        .table_name(store.table())
        .send()
        .await
        .unwrap();
    let mut items: Vec<HashMap<String, AttributeValue>> = scan.items().to_vec();
    items.sort_by_key(|item| {
        let text = |name: &str| item[name].as_s().unwrap().clone();
        (text("pk"), text("sk"))
    });

    // THEN keys and attributes are as documented
    let s = |value: &str| AttributeValue::S(value.into());
    let n = |value: &str| AttributeValue::N(value.into());
    assert_eq!(
        items,
        vec![
            HashMap::from([
                ("pk".into(), s("agent:main:main")),
                ("sk".into(), s("step#00000000000000000007")),
                ("body".into(), s(r#"{"seq":7}"#)),
            ]),
            HashMap::from([
                ("pk".into(), s("agent:main:main")),
                ("sk".into(), s("step#00000000000000000012")),
                ("body".into(), s(r#"{"seq":12}"#)),
            ]),
            HashMap::from([
                ("pk".into(), s("agent:main:main")),
                ("sk".into(), s("tail")),
                ("version".into(), n("1")),
                ("body".into(), s(r#"{"m":1}"#)),
                ("live_from".into(), n("7")),
                ("last_seq".into(), n("12")),
            ]),
            HashMap::from([
                ("pk".into(), s("inbox#telegram:99")),
                ("sk".into(), s("claim")),
                ("expires_at".into(), n("1800000600")),
            ]),
        ]
    );
    let ttl = client
        .describe_time_to_live()
        .table_name(store.table())
        .send()
        .await
        .unwrap();
    assert_eq!(
        ttl.time_to_live_description()
            .and_then(|description| description.attribute_name()),
        Some("expires_at")
    );
}

#[tokio::test]
async fn a_commit_is_one_request_and_a_load_one_query_per_page() {
    let config = moto_sdk_config().await;
    let (client, requests) = dynamodb_client_counting(&config);
    let table = fresh_table(&client).await;
    let store = DynamoSessionStore::new(client, table);
    let session = session_key("agent:main:main");

    requests.reset();
    store
        .commit(
            &session,
            &SessionCommit {
                expected_version: 0,
                live_from: 0,
                last_seq: 0,
                meta: "{}".into(),
                steps: sample_steps(1..=99),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        requests.count(),
        1,
        "one TransactWriteItems for meta + 99 steps"
    );

    requests.reset();
    let loaded = store.load(&session).await.unwrap().unwrap();
    assert_eq!(loaded.steps.len(), 99);
    assert_eq!(requests.count(), 1, "one Query for a small session");

    requests.reset();
    assert_eq!(
        store.load(&session_key("agent:main:none")).await.unwrap(),
        None
    );
    assert_eq!(requests.count(), 1);
}

#[tokio::test]
async fn a_session_larger_than_one_query_page_loads_completely() {
    // GIVEN about 3 MB of steps: more than DynamoDB's 1 MB per Query page
    let config = moto_sdk_config().await;
    let (client, requests) = dynamodb_client_counting(&config);
    let table = fresh_table(&client).await;
    let store = DynamoSessionStore::new(client, table);
    let session = session_key("agent:main:main");
    let body = sized_json_body("page filler", 300_000);
    let mut version = 0;
    for seq in 1..=10u64 {
        version = store
            .commit(
                &session,
                &SessionCommit {
                    expected_version: version,
                    live_from: 0,
                    last_seq: 0,
                    meta: format!(r#"{{"steps":{seq}}}"#),
                    steps: vec![StoredStep {
                        seq,
                        body: body.clone(),
                    }],
                },
            )
            .await
            .unwrap();
    }

    // WHEN loading it THEN every step comes back, over several pages
    requests.reset();
    let loaded = store.load(&session).await.unwrap().unwrap();
    let seqs: Vec<u64> = loaded.steps.iter().map(|step| step.seq).collect();
    assert_eq!(seqs, (1..=10).collect::<Vec<_>>());
    assert!(loaded.steps.iter().all(|step| step.body == body));
    assert_eq!(loaded.meta, r#"{"steps":10}"#);
    assert!(
        requests.count() >= 3,
        "paged: {} requests",
        requests.count()
    );
}

#[tokio::test]
async fn commits_over_the_transaction_limits_are_rejected_before_any_request() {
    let config = moto_sdk_config().await;
    let (client, requests) = dynamodb_client_counting(&config);
    let table = fresh_table(&client).await;
    let store = DynamoSessionStore::new(client, table);
    let session = session_key("agent:main:main");
    requests.reset();

    let too_many = SessionCommit {
        expected_version: 0,
        live_from: 0,
        last_seq: 0,
        meta: "{}".into(),
        steps: sample_steps(1..=100),
    };
    let result = store.commit(&session, &too_many).await;
    assert!(
        matches!(&result, Err(SessionStoreError::Rejected { reason, .. }) if reason.contains("100 steps")),
        "{result:?}"
    );

    let body = sized_json_body("bulk", DynamoSessionStore::MAX_RECORD_BYTES);
    let too_heavy = SessionCommit {
        expected_version: 0,
        live_from: 0,
        last_seq: 0,
        meta: "{}".into(),
        steps: (1..=12)
            .map(|seq| StoredStep {
                seq,
                body: body.clone(),
            })
            .collect(),
    };
    let result = store.commit(&session, &too_heavy).await;
    assert!(
        matches!(&result, Err(SessionStoreError::Rejected { reason, .. }) if reason.contains("bytes")),
        "{result:?}"
    );

    let long_key = session_key(&format!("agent:main:{}", "k".repeat(1100)));
    let result = store
        .commit(
            &long_key,
            &SessionCommit {
                expected_version: 0,
                live_from: 0,
                last_seq: 0,
                meta: "{}".into(),
                steps: vec![],
            },
        )
        .await;
    assert!(
        matches!(result, Err(SessionStoreError::Rejected { .. })),
        "{result:?}"
    );
    assert_eq!(requests.count(), 0, "refused before sending anything");
    assert_eq!(store.load(&session).await.unwrap(), None);
}

#[tokio::test]
async fn a_missing_table_is_unavailable_with_the_sdk_error_as_source() {
    let config = moto_sdk_config().await;
    let store = DynamoSessionStore::new(dynamodb_client(&config), "no-such-table");
    let err = store
        .load(&session_key("agent:main:main"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, SessionStoreError::Unavailable { .. }),
        "{err}"
    );
    let source = std::error::Error::source(&err).expect("the SDK error is kept");
    let chain = format!("{:?}", source);
    assert!(chain.contains("ResourceNotFound"), "{chain}");
}

#[tokio::test]
async fn a_meta_item_from_before_live_loads_loads_whole() {
    // GIVEN a session written before live loads: its meta has no live_from or last_seq
    let (store, client) = store_on_fresh_table().await;
    let item = |sk: &str, body: &str| {
        client
            .put_item()
            .table_name(store.table())
            .item("pk", AttributeValue::S("agent:main:main".into()))
            .item("sk", AttributeValue::S(sk.into()))
            .item("body", AttributeValue::S(body.into()))
    };
    item("meta", "{}")
        .item("version", AttributeValue::N("2".into()))
        .send()
        .await
        .unwrap();
    for seq in [1, 2] {
        item(&format!("step#{seq:020}"), "{}").send().await.unwrap();
    }
    // WHEN it is loaded live THEN every step is there
    let key = session_key("agent:main:main");
    let live = store.load_live(&key).await.unwrap().expect("the session");
    assert_eq!(
        live.steps.iter().map(|step| step.seq).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(live.version, 2);

    // AND its next commit moves the meta to the tail, after which one Query loads it
    let commit = SessionCommit {
        expected_version: 2,
        meta: r#"{"moved":true}"#.into(),
        steps: sample_steps(3..=3),
        live_from: 2,
        last_seq: 2,
    };
    assert_eq!(store.commit(&key, &commit).await.unwrap(), 3);
    let sort_keys = raw_sort_keys(&client, store.table()).await;
    assert_eq!(
        sort_keys,
        [
            format!("step#{:020}", 1),
            format!("step#{:020}", 2),
            format!("step#{:020}", 3),
            "tail".to_owned()
        ]
    );
    let fresh = DynamoSessionStore::new(client.clone(), store.table());
    let moved = fresh.load_live(&key).await.unwrap().expect("the session");
    assert_eq!(
        (moved.version, moved.meta.as_str()),
        (3, r#"{"moved":true}"#)
    );
    assert_eq!(
        moved.steps.iter().map(|step| step.seq).collect::<Vec<_>>(),
        vec![2, 3],
        "from live_from on"
    );
    // AND a writer that still expects the old meta's version loses
    let stale = SessionCommit {
        expected_version: 2,
        ..commit
    };
    assert!(matches!(
        store.commit(&key, &stale).await,
        Err(SessionStoreError::Conflict { .. })
    ));
}

/// The sort keys of every item in the table, in key order.
async fn raw_sort_keys(client: &aws_sdk_dynamodb::Client, table: &str) -> Vec<String> {
    let scan = client.scan().table_name(table).send().await.expect("scan");
    let mut keys: Vec<String> = scan
        .items()
        .iter()
        .map(|item| item["sk"].as_s().expect("a string sort key").clone())
        .collect();
    keys.sort();
    keys
}

/// A live load is one `Query` from the tail: for a session whose live part fits the first
/// page, and, once the process has seen the session, for a larger one too.
#[tokio::test]
async fn a_live_load_is_one_query_from_the_tail() {
    let config = moto_sdk_config().await;
    let (client, requests) = dynamodb_client_counting(&config);
    let table = fresh_table(&client).await;
    let writer = DynamoSessionStore::new(client.clone(), table.clone());
    let session = session_key("agent:main:main");
    let mut version = 0;
    for first in (1..=200u64).step_by(50) {
        version = writer
            .commit(
                &session,
                &SessionCommit {
                    expected_version: version,
                    live_from: 150,
                    last_seq: first - 1,
                    meta: format!("{{\"v\":{first}}}"),
                    steps: sample_steps(first..=first + 49),
                },
            )
            .await
            .unwrap();
    }
    // A cold process: 51 live steps fit the first page.
    let cold = DynamoSessionStore::new(client.clone(), table.clone());
    requests.reset();
    let live = cold.load_live(&session).await.unwrap().unwrap();
    assert_eq!(requests.count(), 1, "one Query");
    let seqs: Vec<u64> = live.steps.iter().map(|step| step.seq).collect();
    assert_eq!(seqs, (150..=200).collect::<Vec<_>>());
    assert_eq!((live.version, live.live_from, live.last_seq), (4, 150, 200));
    // A session that does not exist: the same one Query says so.
    requests.reset();
    assert!(
        cold.load_live(&session_key("agent:main:none"))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(requests.count(), 1);

    // A live part larger than the first page: pages until live_from, then one Query warm.
    writer
        .commit(
            &session,
            &SessionCommit {
                expected_version: version,
                live_from: 10,
                last_seq: 200,
                meta: "{}".into(),
                steps: Vec::new(),
            },
        )
        .await
        .unwrap();
    let fresh = DynamoSessionStore::new(client, table);
    requests.reset();
    let whole = fresh.load_live(&session).await.unwrap().unwrap();
    assert_eq!(whole.steps.len(), 191);
    assert!(requests.count() > 1, "a cold load of 191 steps pages");
    requests.reset();
    let again = fresh.load_live(&session).await.unwrap().unwrap();
    assert_eq!(again.steps.len(), 191);
    assert_eq!(requests.count(), 1, "warm: one Query");
    assert_eq!(again.steps.first().map(|step| step.seq), Some(10));
}
