//! Discovery (spec §1.2, §1.5): nested roots, root skills, skipped folders, grouping folders, limits and rejections.

use super::*;
use crate::DiagnosticKind;

#[tokio::test]
async fn nested_skills_dir_is_found_even_when_only_the_last_entry_holds_a_skill() {
    // GIVEN 30 directories under `skills/`, of which only entry-29 holds a SKILL.md
    let mut files: Vec<(String, String)> = (0..29)
        .map(|i| {
            (
                format!("repo/skills/entry-{i:02}/README.md"),
                "x".to_owned(),
            )
        })
        .collect();
    files.push((
        "repo/skills/entry-29/SKILL.md".to_owned(),
        skill_md("late", "Late skill", None),
    ));
    let files: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let store = store_with(&files);
    // WHEN the repo root is a source
    let loaded = load(
        &[source(SkillSourceKind::Extra, &store, "repo")],
        SkillLimits::default(),
    )
    .await;
    // THEN the nested skills root is used
    assert_eq!(names(&loaded), ["late"]);
}

#[tokio::test]
async fn a_root_that_is_itself_a_skill_loads_exactly_that_skill() {
    let store = store_with(&[
        ("one/SKILL.md", skill_md("root-skill", "Root", None)),
        ("one/child/SKILL.md", skill_md("child-skill", "Child", None)),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Extra, &store, "one")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["root-skill"]);
}

#[tokio::test]
async fn a_root_skill_without_a_name_is_named_after_the_root_directory() {
    let store = store_with(&[(
        "fallback-root/SKILL.md",
        "---\ndescription: Root skill\n---\n".to_owned(),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Extra, &store, "fallback-root")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["fallback-root"]);
}

#[tokio::test]
async fn dot_directories_and_node_modules_are_skipped() {
    let store = store_with(&[
        ("s/.hidden/SKILL.md", skill_md("hidden", "Hidden", None)),
        (
            "s/node_modules/SKILL.md",
            skill_md("nm", "Node modules", None),
        ),
        (
            "s/node_modules/pkg/SKILL.md",
            skill_md("nm-pkg", "Node modules pkg", None),
        ),
        ("s/visible/SKILL.md", skill_md("visible", "Visible", None)),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["visible"]);
}

#[tokio::test]
async fn children_are_loaded_in_utf16_order() {
    // U+FF21 (fullwidth A) sorts after U+1F600 in UTF-8 byte order but before it in UTF-16.
    let store = store_with(&[
        ("s/\u{1F600}/SKILL.md", skill_md("emoji", "Emoji", None)),
        (
            "s/\u{FF21}/SKILL.md",
            skill_md("fullwidth", "Fullwidth", None),
        ),
        ("s/b/SKILL.md", skill_md("b", "B", None)),
        ("s/a/SKILL.md", skill_md("a", "A", None)),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["a", "b", "emoji", "fullwidth"]);
}

#[tokio::test]
async fn grouping_folders_are_scanned_up_to_six_levels_deep() {
    let store = store_with(&[
        (
            "s/group/inner/SKILL.md",
            skill_md("grouped", "Grouped", None),
        ),
        (
            "s/l1/l2/l3/l4/l5/l6/SKILL.md",
            skill_md("six-deep", "Six deep", None),
        ),
        (
            "s/m1/m2/m3/m4/m5/m6/m7/SKILL.md",
            skill_md("seven-deep", "Seven deep", None),
        ),
        ("s/flat/SKILL.md", skill_md("flat", "Flat", None)),
        (
            "s/flat/nested/SKILL.md",
            skill_md("under-a-skill", "Inside another skill", None),
        ),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["flat", "grouped", "six-deep"]);
}

#[tokio::test]
async fn oversized_skill_files_are_skipped_and_small_ones_kept() {
    let big = format!(
        "---\nname: big-skill\ndescription: Big\n---\n{}",
        "x".repeat(5_000)
    );
    let store = store_with(&[
        ("s/big-skill/SKILL.md", big),
        (
            "s/small-skill/SKILL.md",
            skill_md("small-skill", "Small", None),
        ),
    ]);
    let limits = SkillLimits {
        max_skill_file_bytes: 1_000,
        ..SkillLimits::default()
    };
    let loaded = load(&[source(SkillSourceKind::Workspace, &store, "s")], limits).await;
    assert_eq!(names(&loaded), ["small-skill"]);
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.kind == DiagnosticKind::TooLarge && d.location.contains("big-skill"))
    );
}

#[tokio::test]
async fn the_root_skill_obeys_the_size_cap_too() {
    let big = format!(
        "---\nname: big-root\ndescription: Big\n---\n{}",
        "x".repeat(5_000)
    );
    let store = store_with(&[("root/SKILL.md", big)]);
    let limits = SkillLimits {
        max_skill_file_bytes: 1_000,
        ..SkillLimits::default()
    };
    let loaded = load(&[source(SkillSourceKind::Extra, &store, "root")], limits).await;
    assert!(loaded.entries.is_empty());
    assert_eq!(loaded.diagnostics[0].kind, DiagnosticKind::TooLarge);
}

#[tokio::test]
async fn candidate_and_per_source_limits_bound_discovery() {
    let files: Vec<(String, String)> = (0..10)
        .map(|i| {
            (
                format!("repo/repo-skill-{i:02}/SKILL.md"),
                skill_md(&format!("repo-skill-{i:02}"), "Repo", None),
            )
        })
        .collect();
    let files: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let store = store_with(&files);
    let limits = SkillLimits {
        max_candidates_per_root: 5,
        max_skills_loaded_per_source: 5,
        ..SkillLimits::default()
    };
    let loaded = load(&[source(SkillSourceKind::Extra, &store, "repo")], limits).await;
    let loaded_names = names(&loaded);
    assert!(loaded_names.len() <= 5);
    assert!(loaded_names.contains(&"repo-skill-00"));
    assert!(!loaded_names.contains(&"repo-skill-07"));
    assert!(
        loaded
            .diagnostics
            .iter()
            .any(|d| d.kind == DiagnosticKind::Truncated)
    );
}

#[tokio::test]
async fn per_source_cap_counts_loaded_skills_not_broken_candidates() {
    // GIVEN three broken candidates ahead of two good ones and a cap of 2 loaded skills
    let mut files: Vec<(String, String)> = (0..3)
        .map(|i| {
            (
                format!("s/a-broken-{i}/SKILL.md"),
                "no frontmatter".to_owned(),
            )
        })
        .collect();
    for name in ["b-good", "c-good", "d-good"] {
        files.push((format!("s/{name}/SKILL.md"), skill_md(name, "Good", None)));
    }
    let files: Vec<(&str, String)> = files.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    let store = store_with(&files);
    let limits = SkillLimits {
        max_skills_loaded_per_source: 2,
        ..SkillLimits::default()
    };
    let loaded = load(&[source(SkillSourceKind::Workspace, &store, "s")], limits).await;
    assert_eq!(names(&loaded), ["b-good", "c-good"]);
    let kinds: Vec<DiagnosticKind> = loaded.diagnostics.iter().map(|d| d.kind).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == DiagnosticKind::MissingFrontmatter)
            .count(),
        3
    );
    assert!(kinds.contains(&DiagnosticKind::Truncated));
}

#[tokio::test]
async fn a_skill_without_a_name_falls_back_to_its_directory_name() {
    let store = store_with(&[(
        "s/fallback-name/SKILL.md",
        "---\ndescription: No name here\n---\n".to_owned(),
    )]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["fallback-name"]);
}

#[tokio::test]
async fn skills_without_description_or_frontmatter_are_skipped_with_diagnostics() {
    let store = store_with(&[
        ("s/no-desc/SKILL.md", "---\nname: no-desc\n---\n".to_owned()),
        (
            "s/canvas/SKILL.md",
            "# Canvas\n\nNo frontmatter at all.\n".to_owned(),
        ),
        ("s/ok/SKILL.md", skill_md("ok", "Fine", None)),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Bundled, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["ok"]);
    let kinds: Vec<DiagnosticKind> = loaded.diagnostics.iter().map(|d| d.kind).collect();
    assert!(kinds.contains(&DiagnosticKind::MissingDescription));
    assert!(kinds.contains(&DiagnosticKind::MissingFrontmatter));
}

#[tokio::test]
async fn names_that_look_like_paths_are_refused() {
    let store = store_with(&[
        (
            "s/a/SKILL.md",
            skill_md("../../etc/passwd", "Traversal", None),
        ),
        ("s/b/SKILL.md", skill_md("..", "Dots", None)),
        ("s/c/SKILL.md", skill_md("back\\slash", "Backslash", None)),
        (
            "s/d/SKILL.md",
            "---\nname: \"bell\\u0007\"\ndescription: Control char\n---\n".to_owned(),
        ),
        (
            "s/e/SKILL.md",
            skill_md("Fine Name With Spaces", "Allowed", None),
        ),
    ]);
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert_eq!(names(&loaded), ["Fine Name With Spaces"]);
    let invalid = loaded
        .diagnostics
        .iter()
        .filter(|d| d.kind == DiagnosticKind::InvalidName)
        .count();
    assert_eq!(invalid, 4, "{:#?}", loaded.diagnostics);
}

#[tokio::test]
async fn binary_skill_files_are_skipped() {
    let store = Arc::new(InMemoryObjectStore::named("bin"));
    store
        .insert(
            "s/nul/SKILL.md",
            b"---\nname: nul\ndescription: x\0y\n---\n".to_vec(),
        )
        .unwrap();
    store
        .insert(
            "s/latin1/SKILL.md",
            b"---\nname: latin\ndescription: caf\xe9\n---\n".to_vec(),
        )
        .unwrap();
    let loaded = load(
        &[source(SkillSourceKind::Workspace, &store, "s")],
        SkillLimits::default(),
    )
    .await;
    assert!(loaded.entries.is_empty());
    assert_eq!(
        loaded
            .diagnostics
            .iter()
            .filter(|d| d.kind == DiagnosticKind::Binary)
            .count(),
        2
    );
}

#[tokio::test]
async fn refused_entries_become_diagnostics() {
    use crate::discovery::discover;
    use clawless_base::object_store::{Listing, ObjectMeta, RefusalReason, RefusedEntry};
    let store = store_with(&[]);
    let src = source(SkillSourceKind::Bundled, &store, "b");
    let listing = Listing {
        objects: vec![ObjectMeta {
            key: "b/ok/SKILL.md".into(),
            etag: "1".into(),
            size: 10,
        }],
        refused: vec![
            RefusedEntry {
                key: "b/escape".into(),
                reason: RefusalReason::SymlinkEscape,
            },
            RefusedEntry {
                key: "b/linked/SKILL.md".into(),
                reason: RefusalReason::SymlinkedFile,
            },
        ],
        truncated: false,
    };
    let found = discover(
        &src,
        &listing.objects,
        &listing.refused,
        &SkillLimits::default(),
    );
    assert_eq!(found.candidates.len(), 1);
    let messages: Vec<&str> = found
        .diagnostics
        .iter()
        .map(|d| d.message.as_str())
        .collect();
    assert!(messages[0].starts_with("Skipping escaped skill path outside its configured root:"));
    assert!(messages[0].contains(
        "reason=bundled-symlink-escape hint=likely-stray-local-symlink-or-checkout-mutation"
    ));
    assert_eq!(
        found.diagnostics[1].kind,
        DiagnosticKind::SymlinkedSkillFile
    );
}
