//! `functions/skills-bins` as deployed code: the real Lambda binary under `cargo lambda watch`,
//! reading skills from S3 on moto, answering `GET /skills/bins`.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;
use std::time::Duration;

use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{fresh_bucket, moto_endpoint, moto_sdk_config, s3_client};
use clawless_core::object_store::{ObjectStore, PutCondition};
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
    let client = s3_client(&moto_sdk_config().await);
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

    let env = [
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
        // The first request waits for cargo lambda to build the function.
        let first = watch.get("skills-bins", "/skills/bins", Duration::from_secs(600));
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
        let after_change = watch.get("skills-bins", "/skills/bins", Duration::from_secs(60));
        let unknown = watch.get("skills-bins", "/skills/nope", Duration::from_secs(60));
        (first, after_change, unknown)
    })
    .await
    .unwrap();

    let (first, after_change, unknown) = outcome;
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
