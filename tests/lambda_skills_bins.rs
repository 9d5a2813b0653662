//! `functions/skills-bins` as deployed code: the real Lambda binary under `cargo lambda watch`,
//! reading skills from S3 on moto, answering `GET /skills/bins` to paired nodes only (their
//! token checked against the registry in DynamoDB on moto).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::time::Duration;

use clawless_aws::testing::{
    dynamodb_client, fresh_bucket, fresh_fifo_queue, fresh_standard_queue, fresh_table,
    moto_endpoint, moto_sdk_config, s3_client, sqs_client, unique_queue_prefix,
};
use clawless_aws::{
    DynamoExecJobs, DynamoNodeRegistry, S3ObjectStore, SqsExecQueue, SqsTimers, SqsTurnQueue,
};
use clawless_base::clock::SystemClock;
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_core::nodes::NodeFacts;
use clawless_runtime::nodes_service::{NodesDeps, NodesService, PairRequest};
use clawless_system_tests::{LambdaWatch, repo_root};

/// Uploads the repository's bundled skills to `skills/bundled/` of `store`.
async fn upload_bundled_skills(store: &S3ObjectStore) {
    let skills = repo_root().join("skills");
    for entry in std::fs::read_dir(&skills).unwrap() {
        let dir = entry.unwrap().path();
        let skill_file = dir.join("SKILL.md");
        if skill_file.is_file() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            let key = format!("skills/bundled/{name}/SKILL.md");
            store
                .put(
                    &key,
                    std::fs::read(&skill_file).unwrap(),
                    PutCondition::Always,
                )
                .await
                .unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn skills_bins_lambda_serves_the_bins_of_every_skill_in_the_bucket() {
    let endpoint = moto_endpoint();
    let sdk = moto_sdk_config().await;
    let client = s3_client(&sdk);
    let bucket = fresh_bucket(&client, "lambda-bins").await;
    let store = Arc::new(S3ObjectStore::new(client, bucket.clone()));
    upload_bundled_skills(&store).await;
    store
        .put(
            "agents/main/workspace/skills/mine/SKILL.md",
            b"---\nname: mine\ndescription: Mine\nmetadata: {\"openclaw\":{\"requires\":{\"anyBins\":[\"rg\"]}}}\n---\n".to_vec(),
            PutCondition::Always,
        )
        .await
        .unwrap();

    // AND a node paired with the deployment's registry
    let dynamodb = dynamodb_client(&sdk);
    let sqs = sqs_client(&sdk);
    let table = fresh_table(&dynamodb).await;
    let turn_queue = fresh_fifo_queue(&sqs).await;
    let timer_queue = fresh_standard_queue(&sqs, Duration::from_secs(30)).await;
    let prefix = unique_queue_prefix();
    let nodes = NodesService::new(NodesDeps {
        registry: Arc::new(DynamoNodeRegistry::new(dynamodb.clone(), &table)),
        jobs: Arc::new(DynamoExecJobs::new(dynamodb.clone(), &table)),
        queues: Arc::new(SqsExecQueue::new(sqs.clone(), prefix.clone())),
        timers: Arc::new(SqsTimers::new(sqs.clone(), timer_queue.clone())),
        turns: Arc::new(SqsTurnQueue::new(sqs.clone(), turn_queue.clone())),
        clock: Arc::new(SystemClock),
        settings: Default::default(),
    });
    let (code, _) = nodes.create_pairing_code().await.unwrap();
    let paired = nodes
        .pair(&PairRequest {
            code,
            facts: NodeFacts {
                platform: "linux".to_owned(),
                path: vec!["/usr/bin".to_owned()],
                skill_bins: Vec::new(),
                display_name: None,
                exec: None,
            },
        })
        .await
        .unwrap();
    let token = format!("Bearer {}:{}", paired.node_id, paired.secret);
    let wrong_token = format!("Bearer {}:not-the-secret", paired.node_id);

    let env = [
        ("CLAWLESS_TABLE", table),
        ("CLAWLESS_TURN_QUEUE_URL", turn_queue),
        ("CLAWLESS_TIMER_QUEUE_URL", timer_queue),
        ("CLAWLESS_NODE_QUEUE_PREFIX", prefix),
        ("CLAWLESS_BUCKET", bucket.clone()),
        ("AWS_ENDPOINT_URL", endpoint),
        ("CLAWLESS_S3_FORCE_PATH_STYLE", "true".to_owned()),
        ("AWS_ACCESS_KEY_ID", "test".to_owned()),
        ("AWS_SECRET_ACCESS_KEY", "test".to_owned()),
        ("AWS_REGION", "us-east-1".to_owned()),
    ];
    let watch_store = Arc::clone(&store);
    let outcome = tokio::task::spawn_blocking(move || {
        let mut watch = LambdaWatch::start(&env);
        let bins = |watch: &mut LambdaWatch, auth: Option<&str>, patience: u64| {
            let headers: Vec<(&str, &str)> = auth.map(|auth| ("authorization", auth)).into_iter().collect();
            watch.call("GET", "skills-bins", "/skills/bins", &headers, &[], Duration::from_secs(patience))
        };
        // The first request waits for cargo lambda to build the function.
        let anonymous = bins(&mut watch, None, 600);
        let forged = bins(&mut watch, Some(&wrong_token), 60);
        let first = bins(&mut watch, Some(&token), 60);
        let handle = tokio::runtime::Handle::current();
        handle.block_on(async {
            watch_store
                .put(
                    "skills/managed/tmux/SKILL.md",
                    b"---\nname: tmux\ndescription: Tmux\nmetadata: {\"openclaw\":{\"requires\":{\"bins\":[\"tmux\"]}}}\n---\n"
                        .to_vec(),
                    PutCondition::Always,
                )
                .await
                .unwrap();
        });
        let after_change = bins(&mut watch, Some(&token), 60);
        let unknown = watch.get("skills-bins", "/skills/nope", Duration::from_secs(60));
        (anonymous, forged, first, after_change, unknown)
    })
    .await
    .unwrap();

    let (anonymous, forged, first, after_change, unknown) = outcome;
    assert_eq!(anonymous.0, 401, "no node token: {}", anonymous.1);
    assert_eq!(forged.0, 401, "a wrong secret: {}", forged.1);
    assert_eq!(first.0, 200, "{}", first.1);
    let json: serde_json::Value = serde_json::from_str(&first.1).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"bins": ["curl", "df", "gh", "rg", "uname", "wget"]})
    );
    let json: serde_json::Value = serde_json::from_str(&after_change.1).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"bins": ["curl", "df", "gh", "rg", "tmux", "uname", "wget"]}),
        "a warm function sees new skills"
    );
    assert_eq!(unknown.0, 404);
}
