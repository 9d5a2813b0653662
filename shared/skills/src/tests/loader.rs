//! Loading: precedence and merge order (spec §1.1), locations, and what a warm reload reads.

use super::*;
use clawless_base::testing::CountingObjectStore as CountingStore;

#[tokio::test]
async fn workspace_beats_managed_beats_bundled() {
    let store = store_with(&[
        (
            "bundled/demo-skill/SKILL.md",
            skill_md("demo-skill", "Bundled version", None),
        ),
        (
            "managed/demo-skill/SKILL.md",
            skill_md("demo-skill", "Managed version", None),
        ),
        (
            "ws/skills/demo-skill/SKILL.md",
            skill_md("demo-skill", "Workspace version", None),
        ),
    ]);
    let loaded = load(
        &[
            source(SkillSourceKind::Workspace, &store, "ws/skills"),
            source(SkillSourceKind::Bundled, &store, "bundled"),
            source(SkillSourceKind::Managed, &store, "managed"),
        ],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(loaded.entries.len(), 1);
    assert_eq!(loaded.entries[0].description, "Workspace version");
    assert_eq!(loaded.entries[0].source, SkillSourceKind::Workspace);
}

#[tokio::test]
async fn project_agents_dir_beats_managed_and_loses_to_workspace() {
    let store = store_with(&[
        ("managed/dup/SKILL.md", skill_md("dup", "Managed", None)),
        (
            "ws/.agents/skills/dup/SKILL.md",
            skill_md("dup", "Project", None),
        ),
    ]);
    let mut sources = vec![
        source(SkillSourceKind::Managed, &store, "managed"),
        source(SkillSourceKind::AgentsProject, &store, "ws/.agents/skills"),
    ];
    assert_eq!(
        load(&sources, SkillLimits::default()).await.entries[0].description,
        "Project"
    );
    store
        .insert(
            "ws/skills/dup/SKILL.md",
            skill_md("dup", "Workspace", None).into_bytes(),
        )
        .unwrap();
    sources.push(source(SkillSourceKind::Workspace, &store, "ws/skills"));
    assert_eq!(
        load(&sources, SkillLimits::default()).await.entries[0].description,
        "Workspace"
    );
}

#[tokio::test]
async fn extra_sources_have_the_lowest_precedence() {
    let store = store_with(&[
        ("extra/shared/SKILL.md", skill_md("shared", "Extra", None)),
        (
            "bundled/shared/SKILL.md",
            skill_md("shared", "Bundled", None),
        ),
    ]);
    let loaded = load(
        &[
            source(SkillSourceKind::Bundled, &store, "bundled"),
            source(SkillSourceKind::Extra, &store, "extra"),
        ],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(loaded.entries[0].description, "Bundled");
}

#[tokio::test]
async fn merged_order_is_first_seen_with_the_last_writers_content() {
    // GIVEN bundled {alpha, beta} and workspace {beta, gamma}
    let store = store_with(&[
        ("b/alpha/SKILL.md", skill_md("alpha", "Bundled alpha", None)),
        ("b/beta/SKILL.md", skill_md("beta", "Bundled beta", None)),
        ("w/beta/SKILL.md", skill_md("beta", "Workspace beta", None)),
        (
            "w/gamma/SKILL.md",
            skill_md("gamma", "Workspace gamma", None),
        ),
    ]);
    let loaded = load(
        &[
            source(SkillSourceKind::Bundled, &store, "b"),
            source(SkillSourceKind::Workspace, &store, "w"),
        ],
        SkillLimits::default(),
    )
    .await;
    // THEN beta keeps its bundled position but has workspace content
    assert_eq!(names(&loaded), ["alpha", "beta", "gamma"]);
    assert_eq!(loaded.entries[1].description, "Workspace beta");
}

#[tokio::test]
async fn locations_resolve_in_the_same_store() {
    let store = store_with(&[(
        "skills/bundled/weather/SKILL.md",
        skill_md("weather", "Weather", None),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Bundled, &store, "skills/bundled")],
        SkillLimits::default(),
    )
    .await;
    let entry = &loaded.entries[0];
    assert_eq!(entry.key, "skills/bundled/weather/SKILL.md");
    assert_eq!(entry.location, store.location(&entry.key));
    let object = store.get(&entry.key, 1_000).await.unwrap().unwrap();
    assert!(
        String::from_utf8(object.bytes)
            .unwrap()
            .contains("name: weather")
    );
}

fn counted_sources(store: &Arc<CountingStore>) -> Vec<SkillSource> {
    let dyn_store: Arc<dyn ObjectStore> = store.clone();
    vec![
        SkillSource::new(
            SkillSourceKind::Bundled,
            dyn_store.clone(),
            "skills/bundled",
        ),
        SkillSource::new(
            SkillSourceKind::Managed,
            dyn_store.clone(),
            "skills/managed",
        ),
        SkillSource::new(
            SkillSourceKind::Workspace,
            dyn_store,
            "skills/agents/main/skills",
        ),
    ]
}

#[tokio::test]
async fn a_warm_reload_of_unchanged_sources_lists_once_and_reads_nothing() {
    let inner = store_with(&[
        (
            "skills/bundled/weather/SKILL.md",
            skill_md("weather", "Weather", None),
        ),
        (
            "skills/managed/notes/SKILL.md",
            skill_md("notes", "Notes", None),
        ),
        (
            "skills/agents/main/skills/mine/SKILL.md",
            skill_md("mine", "Mine", None),
        ),
        ("sessions/blob", "not a skill".to_owned()),
    ]);
    let store = CountingStore::new(inner);
    let loader = SkillLoader::new(SkillLimits::default());
    let sources = counted_sources(&store);

    let cold = loader.load(&sources).await.unwrap();
    assert_eq!(
        store.take(),
        (1, 3),
        "cold: one listing for three co-located sources, one read per skill"
    );

    let warm = loader.load(&sources).await.unwrap();
    assert_eq!(store.take(), (1, 0), "warm: one listing, no reads");
    assert!(
        Arc::ptr_eq(&cold, &warm),
        "unchanged sources give the same result"
    );
}

#[tokio::test]
async fn a_changed_skill_file_is_picked_up_on_the_next_load_and_only_it_is_read() {
    let inner = store_with(&[
        (
            "skills/bundled/weather/SKILL.md",
            skill_md("weather", "Weather v1", None),
        ),
        (
            "skills/managed/notes/SKILL.md",
            skill_md("notes", "Notes", None),
        ),
    ]);
    let store = CountingStore::new(inner.clone());
    let loader = SkillLoader::with_clock(SkillLimits::default(), || 1_000);
    let sources = counted_sources(&store);
    let first = loader.load(&sources).await.unwrap();
    store.take();

    inner
        .insert(
            "skills/bundled/weather/SKILL.md",
            skill_md("weather", "Weather v2", None).into_bytes(),
        )
        .unwrap();
    let second = loader.load(&sources).await.unwrap();
    assert_eq!(
        store.take(),
        (1, 1),
        "only the changed SKILL.md is read again"
    );
    assert_eq!(second.get("weather").unwrap().description, "Weather v2");
    assert_ne!(first.fingerprint, second.fingerprint);
    assert!(
        second.version > first.version,
        "version bumps even when the clock stands still"
    );
}

#[tokio::test]
async fn deleted_and_added_skills_change_the_result() {
    let inner = store_with(&[("skills/bundled/a/SKILL.md", skill_md("a", "A", None))]);
    let store = CountingStore::new(inner.clone());
    let loader = SkillLoader::new(SkillLimits::default());
    let sources = counted_sources(&store);
    assert_eq!(names(&loader.load(&sources).await.unwrap()), ["a"]);
    inner.delete("skills/bundled/a/SKILL.md").await.unwrap();
    inner
        .insert(
            "skills/managed/b/SKILL.md",
            skill_md("b", "B", None).into_bytes(),
        )
        .unwrap();
    assert_eq!(names(&loader.load(&sources).await.unwrap()), ["b"]);
}

#[tokio::test]
async fn changing_a_non_skill_file_keeps_the_cached_result() {
    let inner = store_with(&[
        ("skills/bundled/a/SKILL.md", skill_md("a", "A", None)),
        ("skills/bundled/a/scripts/run.sh", "echo 1".to_owned()),
    ]);
    let store = CountingStore::new(inner.clone());
    let loader = SkillLoader::new(SkillLimits::default());
    let sources = counted_sources(&store);
    let first = loader.load(&sources).await.unwrap();
    inner
        .insert("skills/bundled/a/scripts/run.sh", b"echo 2".to_vec())
        .unwrap();
    let second = loader.load(&sources).await.unwrap();
    assert!(Arc::ptr_eq(&first, &second));
}

#[tokio::test]
async fn sources_in_different_stores_are_listed_separately() {
    let one = CountingStore::new(store_with(&[("a/SKILL.md", skill_md("a", "A", None))]));
    let two = CountingStore::new(Arc::new(InMemoryObjectStore::named("other")));
    two.inner()
        .insert("b/x/SKILL.md", skill_md("b", "B", None).into_bytes())
        .unwrap();
    let sources = vec![
        SkillSource::new(
            SkillSourceKind::Bundled,
            one.clone() as Arc<dyn ObjectStore>,
            "a",
        ),
        SkillSource::new(
            SkillSourceKind::Workspace,
            two.clone() as Arc<dyn ObjectStore>,
            "b",
        ),
    ];
    let loaded = load(&sources, SkillLimits::default()).await;
    assert_eq!(names(&loaded), ["a", "b"]);
    assert_eq!(one.take().0 + two.take().0, 2);
}

#[tokio::test]
async fn prompt_locations_resolve_back_to_their_skill_files_and_nothing_else() {
    use crate::location::resolve_skill_location;
    use crate::prompt::compact_location;

    let store = store_with(&[
        (
            "skills/bundled/weather/SKILL.md",
            skill_md("weather", "Weather", None),
        ),
        ("agents/main/workspace/MEMORY.md", "private".to_owned()),
    ]);
    let sources = [source(SkillSourceKind::Bundled, &store, "skills/bundled")];
    let loaded = load(&sources, SkillLimits::default()).await;
    let entry = &loaded.entries[0];
    let home = vec![store.location("skills")];

    let found = resolve_skill_location(&sources, &entry.location, &home).unwrap();
    assert_eq!(found.key, entry.key);
    assert!(found.store.get(&found.key, 10_000).await.unwrap().is_some());

    let compacted = compact_location(&entry.location, &home);
    assert!(compacted.starts_with("~/"));
    assert_eq!(
        resolve_skill_location(&sources, &compacted, &home)
            .unwrap()
            .key,
        entry.key
    );

    // the same bucket, outside every skill source
    assert!(
        resolve_skill_location(
            &sources,
            &store.location("agents/main/workspace/MEMORY.md"),
            &home
        )
        .is_none()
    );
    let traversal = format!(
        "{}/../../../agents/main/workspace/MEMORY.md",
        entry.location
    );
    assert!(resolve_skill_location(&sources, &traversal, &home).is_none());
}

/// The clock of [`a_debounced_load_lists_once_per_interval_unless_marked_stale`].
static DEBOUNCE_NOW_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[tokio::test]
async fn a_debounced_load_lists_once_per_interval_unless_marked_stale() {
    use std::sync::atomic::Ordering;
    let inner = store_with(&[("skills/bundled/a/SKILL.md", skill_md("a", "A", None))]);
    let store = CountingStore::new(inner.clone());
    let loader = SkillLoader::with_clock(SkillLimits::default(), || {
        DEBOUNCE_NOW_MS.load(Ordering::SeqCst)
    });
    let sources = counted_sources(&store);
    DEBOUNCE_NOW_MS.store(100_000, Ordering::SeqCst);
    loader.load_within(&sources, 30_000).await.unwrap();
    assert_eq!(store.take().0, 1, "the first load lists");
    // A skill added elsewhere is not seen within the interval: no request at all.
    inner
        .insert(
            "skills/managed/b/SKILL.md",
            skill_md("b", "B", None).into_bytes(),
        )
        .unwrap();
    DEBOUNCE_NOW_MS.store(129_999, Ordering::SeqCst);
    let within = loader.load_within(&sources, 30_000).await.unwrap();
    assert_eq!(store.take().0, 0, "within the interval: no listing");
    assert_eq!(names(&within), ["a"]);
    // Once the interval is over, it is.
    DEBOUNCE_NOW_MS.store(130_000, Ordering::SeqCst);
    let after = loader.load_within(&sources, 30_000).await.unwrap();
    assert_eq!(store.take().0, 1);
    assert_eq!(names(&after), ["a", "b"]);
    // A write marked stale is seen at once; a zero interval always lists.
    inner.delete("skills/bundled/a/SKILL.md").await.unwrap();
    loader.mark_stale();
    assert_eq!(
        names(&loader.load_within(&sources, 30_000).await.unwrap()),
        ["b"]
    );
    assert_eq!(store.take().0, 1);
    loader.load_within(&sources, 0).await.unwrap();
    assert_eq!(store.take().0, 1);
}
