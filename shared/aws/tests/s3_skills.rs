//! The skills loader on S3 (moto): a warm reload of unchanged sources costs one request,
//! a changed `SKILL.md` is read again on the next load, and locations are `s3://` URIs.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::sync::Arc;

use clawless_aws::S3ObjectStore;
use clawless_aws::testing::{fresh_bucket, moto_sdk_config, s3_client_counting};
use clawless_base::object_store::{ObjectStore, PutCondition};
use clawless_skills::bins::collect_skill_bins;
use clawless_skills::{SkillLimits, SkillLoader, SkillSource, SkillSourceKind};

fn skill(name: &str, description: &str, bins: &[&str]) -> Vec<u8> {
    let bins = bins
        .iter()
        .map(|b| format!("\"{b}\""))
        .collect::<Vec<_>>()
        .join(",");
    format!(
        "---\nname: {name}\ndescription: {description}\nmetadata: {{\"openclaw\":{{\"requires\":{{\"bins\":[{bins}]}}}}}}\n---\nBody\n"
    )
    .into_bytes()
}

/// The conventional bucket layout: bundled and managed skills under `skills/`, the agent's
/// workspace (with its own skills) under `agents/main/workspace/`.
async fn seeded_store() -> (
    Arc<S3ObjectStore>,
    clawless_aws::testing::RequestCounter,
    String,
) {
    let config = moto_sdk_config().await;
    let (client, counter) = s3_client_counting(&config);
    let bucket = fresh_bucket(&client, "skills").await;
    let store = Arc::new(S3ObjectStore::new(client, bucket.clone()));
    for (key, bytes) in [
        (
            "skills/bundled/weather/SKILL.md",
            skill("weather", "Weather", &["curl"]),
        ),
        (
            "skills/bundled/github/SKILL.md",
            skill("github", "GitHub", &["gh"]),
        ),
        ("skills/bundled/github/references/api.md", b"notes".to_vec()),
        (
            "skills/managed/notes/SKILL.md",
            skill("notes", "Notes", &["jq"]),
        ),
        ("agents/main/workspace/AGENTS.md", b"# Agent".to_vec()),
        (
            "agents/main/workspace/.agents/skills/project/SKILL.md",
            skill("project", "Project", &[]),
        ),
        (
            "agents/main/workspace/skills/weather/SKILL.md",
            skill("weather", "Workspace weather", &["wget"]),
        ),
    ] {
        store.put(key, bytes, PutCondition::Always).await.unwrap();
    }
    (store, counter, bucket)
}

fn sources(store: &Arc<S3ObjectStore>) -> Vec<SkillSource> {
    let store: Arc<dyn ObjectStore> = store.clone();
    vec![
        SkillSource::new(SkillSourceKind::Bundled, store.clone(), "skills/bundled"),
        SkillSource::new(SkillSourceKind::Managed, store.clone(), "skills/managed"),
        SkillSource::new(
            SkillSourceKind::AgentsProject,
            store.clone(),
            "agents/main/workspace/.agents/skills",
        ),
        SkillSource::new(
            SkillSourceKind::Workspace,
            store,
            "agents/main/workspace/skills",
        ),
    ]
}

#[tokio::test]
async fn skills_load_from_s3_prefixes_in_precedence_order() {
    let (store, _, bucket) = seeded_store().await;
    let loaded = SkillLoader::new(SkillLimits::default())
        .load(&sources(&store))
        .await
        .unwrap();
    let names: Vec<&str> = loaded.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["github", "weather", "notes", "project"]);
    let weather = loaded.get("weather").unwrap();
    assert_eq!(weather.description, "Workspace weather");
    assert_eq!(
        weather.location,
        format!("s3://{bucket}/agents/main/workspace/skills/weather/SKILL.md")
    );
    assert_eq!(collect_skill_bins(&loaded.entries), ["gh", "jq", "wget"]);
    // the location resolves in the same store
    let object = store.get(&weather.key, 10_000).await.unwrap().unwrap();
    assert!(
        String::from_utf8(object.bytes)
            .unwrap()
            .contains("Workspace weather")
    );
}

#[tokio::test]
async fn a_warm_reload_of_unchanged_sources_costs_one_s3_request() {
    let (store, counter, _) = seeded_store().await;
    let loader = SkillLoader::new(SkillLimits::default());
    let sources = sources(&store);

    counter.reset();
    let cold = loader.load(&sources).await.unwrap();
    assert_eq!(
        counter.count(),
        1 + 5,
        "cold: one listing for four sources, one GET per SKILL.md"
    );

    counter.reset();
    let warm = loader.load(&sources).await.unwrap();
    assert_eq!(counter.count(), 1, "warm and unchanged: the listing only");
    assert!(Arc::ptr_eq(&cold, &warm));
}

#[tokio::test]
async fn a_changed_skill_file_is_picked_up_on_the_next_load() {
    let (store, counter, _) = seeded_store().await;
    let loader = SkillLoader::new(SkillLimits::default());
    let sources = sources(&store);
    loader.load(&sources).await.unwrap();

    store
        .put(
            "skills/managed/notes/SKILL.md",
            skill("notes", "Notes, edited", &["jq", "rg"]),
            PutCondition::Always,
        )
        .await
        .unwrap();
    counter.reset();
    let reloaded = loader.load(&sources).await.unwrap();
    assert_eq!(
        counter.count(),
        2,
        "the listing, then a GET of the one changed file"
    );
    assert_eq!(reloaded.get("notes").unwrap().description, "Notes, edited");
    assert_eq!(
        collect_skill_bins(&reloaded.entries),
        ["gh", "jq", "rg", "wget"]
    );

    store
        .delete("skills/bundled/github/SKILL.md")
        .await
        .unwrap();
    counter.reset();
    let after_delete = loader.load(&sources).await.unwrap();
    assert_eq!(counter.count(), 1);
    assert!(after_delete.get("github").is_none());
}

#[tokio::test]
async fn oversized_skill_files_in_s3_are_skipped_without_being_read() {
    let (store, counter, _) = seeded_store().await;
    let mut big = skill("big", "Big", &[]);
    big.extend(std::iter::repeat_n(b'x', 300_000));
    store
        .put("skills/managed/big/SKILL.md", big, PutCondition::Always)
        .await
        .unwrap();
    counter.reset();
    let loaded = SkillLoader::new(SkillLimits::default())
        .load(&sources(&store))
        .await
        .unwrap();
    assert!(loaded.get("big").is_none());
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.location.ends_with("skills/managed/big/SKILL.md"))
    );
    assert_eq!(counter.count(), 1 + 5, "the 300 KB file is never fetched");
}

#[tokio::test]
async fn odd_and_hostile_objects_in_s3_are_skipped_and_the_rest_loads() {
    let (store, _, _) = seeded_store().await;
    let config = moto_sdk_config().await;
    let raw = clawless_aws::testing::s3_client(&config);
    // A key the port's key rules refuse (empty segment), written with the raw SDK.
    raw.put_object()
        .bucket(store.bucket())
        .key("skills/managed//odd/SKILL.md")
        .body(skill("odd", "Odd", &[]).into())
        .send()
        .await
        .unwrap();
    store
        .put(
            "skills/managed/junk/SKILL.md",
            vec![0xff, 0x00, 0xfe, 0x01],
            PutCondition::Always,
        )
        .await
        .unwrap();
    store
        .put(
            "skills/managed/bad-name/SKILL.md",
            b"---\nname: ../escape\ndescription: x\n---\n".to_vec(),
            PutCondition::Always,
        )
        .await
        .unwrap();
    let loaded = SkillLoader::new(SkillLimits::default())
        .load(&sources(&store))
        .await
        .unwrap();
    let names: Vec<&str> = loaded.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["github", "weather", "notes", "project"]);
    let skipped: Vec<&str> = loaded
        .diagnostics
        .iter()
        .map(|d| d.location.as_str())
        .collect();
    assert!(
        skipped
            .iter()
            .any(|l| l.ends_with("skills/managed/junk/SKILL.md")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .any(|l| l.ends_with("skills/managed/bad-name/SKILL.md")),
        "{skipped:?}"
    );
    assert!(skipped.iter().any(|l| l.contains("odd")), "{skipped:?}");
}
