//! Snapshots (spec §4.6–§4.7): contents, serialisation and when they are rebuilt.

use super::*;
use crate::loader::bump_version;
use crate::snapshot::{
    build_snapshot, should_refresh_snapshot_for_version, skills_prompt_for_run,
    snapshot_fingerprint, snapshot_is_stale,
};
use crate::{EligibilityContext, EligibilityInputs, SkillSnapshot, SnapshotOptions};

async fn loaded_with_hidden() -> (Arc<InMemoryObjectStore>, Arc<LoadedSkills>) {
    let store = store_with(&[
        (
            "s/visible/SKILL.md",
            skill_md(
                "visible",
                "Visible skill",
                Some(r#"{"openclaw":{"primaryEnv":"VIS_KEY","requires":{"env":[]}}}"#),
            ),
        ),
        (
            "s/hidden/SKILL.md",
            "---\nname: hidden\ndescription: Hidden skill\ndisable-model-invocation: yes\n---\n"
                .to_owned(),
        ),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    (store, loaded)
}

fn options<'a>(filter: Option<&'a [String]>, homes: &'a [String]) -> SnapshotOptions<'a> {
    SnapshotOptions {
        filter,
        home_dirs: homes,
        node_note: None,
        limits: SkillLimits::default(),
    }
}

#[tokio::test]
async fn hidden_skills_are_eligible_but_not_in_the_prompt() {
    let (_, loaded) = loaded_with_hidden().await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    let snapshot = build_snapshot(&loaded, inputs, &options(None, &[]));
    let listed: Vec<&str> = snapshot.skills.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(listed, ["hidden", "visible"]);
    assert_eq!(snapshot.skills[1].primary_env.as_deref(), Some("VIS_KEY"));
    assert_eq!(snapshot.resolved_skills.len(), 1);
    assert!(snapshot.prompt.contains("<name>visible</name>"));
    assert!(!snapshot.prompt.contains("hidden"));
    assert_eq!(snapshot.version, loaded.version);
}

#[tokio::test]
async fn resolved_skills_keep_canonical_locations_while_the_prompt_is_compacted() {
    let (store, loaded) = loaded_with_hidden().await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    let home = vec![store.location("s")];
    let snapshot = build_snapshot(&loaded, inputs, &options(None, &home));
    assert!(
        snapshot
            .prompt
            .contains("<location>~/visible/SKILL.md</location>")
    );
    assert_eq!(
        snapshot.resolved_skills[0].location,
        store.location("s/visible/SKILL.md")
    );
}

#[tokio::test]
async fn an_empty_filter_gives_an_empty_prompt() {
    let (_, loaded) = loaded_with_hidden().await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    let snapshot = build_snapshot(&loaded, inputs, &options(Some(&[]), &[]));
    assert_eq!(snapshot.prompt, "");
    assert_eq!(snapshot.skill_filter, Some(vec![]));
}

#[tokio::test]
async fn snapshots_round_trip_through_json() {
    let (_, loaded) = loaded_with_hidden().await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    let snapshot = build_snapshot(&loaded, inputs, &options(None, &[]));
    let text = serde_json::to_string(&snapshot).unwrap();
    assert!(text.contains("\"resolvedSkills\""));
    assert!(
        !text.contains("skillFilter"),
        "absent filter is not serialised"
    );
    let back: SkillSnapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(back, snapshot);
}

#[test]
fn version_bumps_follow_the_clock_or_increment() {
    assert_eq!(bump_version(0, 1_000), 1_000);
    assert_eq!(bump_version(1_000, 1_000), 1_001);
    assert_eq!(bump_version(2_000, 1_000), 2_001);
}

#[test]
fn version_staleness_matches_openclaw() {
    assert!(should_refresh_snapshot_for_version(None, 5));
    assert!(should_refresh_snapshot_for_version(Some(4), 5));
    assert!(!should_refresh_snapshot_for_version(Some(5), 5));
    assert!(!should_refresh_snapshot_for_version(Some(6), 5));
    assert!(should_refresh_snapshot_for_version(Some(3), 0));
    assert!(!should_refresh_snapshot_for_version(None, 0));
}

#[tokio::test]
async fn a_snapshot_is_rebuilt_when_skills_context_or_filter_change() {
    let (store, loaded) = loaded_with_hidden().await;
    let setting = Setting::default();
    let inputs = setting.inputs();
    let opts = options(None, &[]);
    let snapshot = build_snapshot(&loaded, inputs, &opts);
    let fingerprint = snapshot_fingerprint(&loaded, inputs, &opts);

    assert!(
        snapshot_is_stale(None, loaded.version, &fingerprint, None),
        "missing"
    );
    assert!(
        !snapshot_is_stale(Some(&snapshot), loaded.version, &fingerprint, None),
        "unchanged"
    );
    assert!(
        snapshot_is_stale(Some(&snapshot), loaded.version, &fingerprint, Some(&[])),
        "filter changed"
    );
    assert!(
        snapshot_is_stale(Some(&snapshot), loaded.version + 1, &fingerprint, None),
        "newer version"
    );

    let mut with_bin = EligibilityContext::empty();
    with_bin.bins.insert("gh".into());
    let changed_context = EligibilityInputs {
        context: &with_bin,
        ..inputs
    };
    let other = snapshot_fingerprint(&loaded, changed_context, &opts);
    assert!(
        snapshot_is_stale(Some(&snapshot), loaded.version, &other, None),
        "node bins changed"
    );

    store
        .insert(
            "s/visible/SKILL.md",
            skill_md("visible", "Edited", None).into_bytes(),
        )
        .unwrap();
    let reloaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    let edited = snapshot_fingerprint(&reloaded, inputs, &opts);
    assert!(
        snapshot_is_stale(Some(&snapshot), loaded.version, &edited, None),
        "skill edited"
    );
}

#[test]
fn the_run_prompt_is_the_trimmed_snapshot_prompt() {
    let snapshot = SkillSnapshot {
        prompt: "  SNAPSHOT \n".into(),
        skills: vec![],
        skill_filter: None,
        resolved_skills: vec![],
        version: 1,
        fingerprint: String::new(),
    };
    assert_eq!(skills_prompt_for_run(Some(&snapshot)), "SNAPSHOT");
    assert_eq!(skills_prompt_for_run(None), "");
}
