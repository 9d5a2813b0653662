//! `S3ObjectStore` through the real AWS SDK against `moto_server` on loopback (started by
//! `infra/test`): the shared object-store contract, pagination and the request counter.
//! These tests fail, never skip, when the emulator is not there.

use std::time::Instant;

use aws_sdk_s3::Client;
use aws_sdk_s3::primitives::ByteStream;
use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{fresh_bucket, moto_sdk_config, s3_client, s3_client_counting};
use clawless_base::object_store::{ObjectStore, PutCondition, RefusalReason, RefusedEntry};
use clawless_core::testing::object_store_contract;
use tokio::task::JoinSet;

async fn store_on_fresh_bucket(name: &str) -> (S3ObjectStore, Client) {
    let config = moto_sdk_config().await;
    let client = s3_client(&config);
    let bucket = fresh_bucket(&client, name).await;
    (S3ObjectStore::new(client.clone(), bucket), client)
}

/// Writes `count` small objects `<prefix><index:05>.md` concurrently.
async fn put_many(store: &S3ObjectStore, prefix: &str, count: usize) {
    let mut writers = JoinSet::new();
    for chunk in (0..count)
        .collect::<Vec<_>>()
        .chunks(count.div_ceil(16).max(1))
    {
        let store = store.clone();
        let prefix = prefix.to_owned();
        let indices = chunk.to_vec();
        writers.spawn(async move {
            for index in indices {
                let key = format!("{prefix}{index:05}.md");
                store
                    .put(&key, index.to_string().into_bytes(), PutCondition::Always)
                    .await
                    .unwrap_or_else(|err| panic!("put {key} failed: {err}"));
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.expect("writer task finished");
    }
}

#[tokio::test]
async fn s3_store_passes_the_object_store_contract() {
    let (store, _) = store_on_fresh_bucket("contract").await;
    object_store_contract(&store).await;
}

#[tokio::test]
async fn two_contract_runs_can_share_one_bucket() {
    let (store, _) = store_on_fresh_bucket("contract-shared").await;
    tokio::join!(object_store_contract(&store), object_store_contract(&store));
}

#[tokio::test]
async fn location_and_identity_name_the_bucket() {
    let (store, _) = store_on_fresh_bucket("where").await;
    let bucket = store.bucket().to_owned();
    assert_eq!(store.identity(), format!("s3://{bucket}"));
    assert_eq!(
        store.location("skills/a/SKILL.md"),
        format!("s3://{bucket}/skills/a/SKILL.md")
    );
}

#[tokio::test]
async fn listing_more_than_one_page_follows_continuation_tokens() {
    // GIVEN 25 objects and pages of 10 keys
    let (store, _) = store_on_fresh_bucket("pages").await;
    put_many(&store, "skills/", 25).await;
    let config = moto_sdk_config().await;
    let (counting_client, requests) = s3_client_counting(&config);
    let paged = S3ObjectStore::new(counting_client, store.bucket()).with_list_page_size(10);

    // WHEN listing everything THEN all 25 come back, sorted, in three requests
    let listing = paged.list("skills/", 1000).await.unwrap();
    let keys: Vec<_> = listing
        .objects
        .iter()
        .map(|meta| meta.key.clone())
        .collect();
    let expected: Vec<_> = (0..25)
        .map(|index| format!("skills/{index:05}.md"))
        .collect();
    assert_eq!(keys, expected);
    assert!(!listing.truncated);
    assert_eq!(requests.count(), 3);

    // WHEN stopping at 15 THEN only two pages are requested (10, then the 5 still wanted)
    requests.reset();
    let listing = paged.list("skills/", 15).await.unwrap();
    assert_eq!(listing.objects.len(), 15);
    assert_eq!(
        listing.objects.last().map(|meta| meta.key.as_str()),
        Some("skills/00014.md")
    );
    assert!(listing.truncated);
    assert_eq!(requests.count(), 2);

    // WHEN stopping exactly at a page boundary THEN the listing still knows it is truncated
    requests.reset();
    let listing = paged.list("skills/", 20).await.unwrap();
    assert_eq!(listing.objects.len(), 20);
    assert!(listing.truncated);
    assert_eq!(requests.count(), 2);
}

#[tokio::test]
async fn listing_1050_keys_pages_past_the_s3_maximum_of_1000() {
    let (store, _) = store_on_fresh_bucket("thousand").await;
    let started = Instant::now();
    put_many(&store, "bulk/", 1050).await;
    let config = moto_sdk_config().await;
    let (counting_client, requests) = s3_client_counting(&config);
    let counted = S3ObjectStore::new(counting_client, store.bucket());

    let listing = counted.list("bulk/", 5000).await.unwrap();
    assert_eq!(listing.objects.len(), 1050);
    assert!(
        listing
            .objects
            .windows(2)
            .all(|pair| pair[0].key < pair[1].key),
        "sorted"
    );
    assert!(!listing.truncated);
    assert_eq!(requests.count(), 2, "one full page of 1000, then 50");

    let listing = counted.list("bulk/", 1000).await.unwrap();
    assert_eq!(listing.objects.len(), 1000);
    assert!(listing.truncated);
    eprintln!("1050-key pagination test took {:?}", started.elapsed());
}

#[tokio::test]
async fn directory_markers_are_skipped_and_unreadable_keys_refused() {
    // GIVEN objects written by other tools: a console "folder" and a key the port rejects
    let (store, client) = store_on_fresh_bucket("foreign").await;
    for key in ["skills/", "skills/a//SKILL.md"] {
        client
            .put_object()
            .bucket(store.bucket())
            .key(key)
            .body(ByteStream::from_static(b""))
            .send()
            .await
            .unwrap();
    }
    store
        .put("skills/b/SKILL.md", b"b".to_vec(), PutCondition::Always)
        .await
        .unwrap();

    let listing = store.list("skills/", 100).await.unwrap();
    let keys: Vec<_> = listing
        .objects
        .iter()
        .map(|meta| meta.key.as_str())
        .collect();
    assert_eq!(keys, vec!["skills/b/SKILL.md"]);
    assert_eq!(
        listing.refused,
        vec![RefusedEntry {
            key: "skills/a//SKILL.md".into(),
            reason: RefusalReason::Unreadable
        }]
    );
}

#[tokio::test]
async fn the_request_counter_counts_every_request_a_client_sends() {
    let config = moto_sdk_config().await;
    let (client, requests) = s3_client_counting(&config);
    assert_eq!(requests.count(), 0);
    let bucket = fresh_bucket(&client, "counter").await;
    assert_eq!(requests.count(), 1, "CreateBucket");

    let store = S3ObjectStore::new(client, bucket);
    store
        .put("a.txt", b"a".to_vec(), PutCondition::Always)
        .await
        .unwrap();
    store.head("a.txt").await.unwrap().unwrap();
    store.get("a.txt", 10).await.unwrap().unwrap();
    assert_eq!(store.get("missing.txt", 10).await.unwrap(), None);
    store.delete("a.txt").await.unwrap();
    assert_eq!(
        requests.count(),
        6,
        "CreateBucket, Put, Head, Get, Get (404), Delete"
    );

    // An invalid key is refused before any request is made.
    assert!(store.get("../x", 10).await.is_err());
    assert_eq!(requests.count(), 6);

    // Clones share the count; reset starts over.
    let shared = requests.clone();
    requests.reset();
    assert_eq!(shared.count(), 0);
    store.list("", 10).await.unwrap();
    assert_eq!(shared.count(), 1);
}

#[tokio::test]
async fn a_get_over_the_limit_is_refused_before_the_body_is_read() {
    let config = moto_sdk_config().await;
    let (client, requests) = s3_client_counting(&config);
    let bucket = fresh_bucket(&client, "limit").await;
    let store = S3ObjectStore::new(client, bucket);
    store
        .put("big.bin", vec![7; 64 * 1024], PutCondition::Always)
        .await
        .unwrap();
    requests.reset();
    let err = store.get("big.bin", 1024).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("65536 bytes, over the 1024-byte limit"),
        "{err}"
    );
    assert_eq!(requests.count(), 1, "a single GetObject, no retry");
}
