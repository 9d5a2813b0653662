//! A corpus of hostile skills on a real directory tree: every one is skipped with a
//! diagnostic, the good skill next to them still loads, and nothing panics.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clawless_base::object_store::ObjectStore;
use clawless_local::DirObjectStore;
use clawless_skills::{DiagnosticKind, SkillLimits, SkillLoader, SkillSource, SkillSourceKind};

fn write(root: &Path, relative: &str, content: impl AsRef<[u8]>) {
    let path = root.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

fn good(name: &str) -> String {
    format!("---\nname: {name}\ndescription: A well-formed skill\n---\nBody\n")
}

fn yaml_bomb() -> String {
    let mut text = String::from(
        "---\nname: bomb\ndescription: Billion laughs\nlol0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for level in 1..10 {
        let refs = vec![format!("*l{}", level - 1); 10].join(", ");
        text.push_str(&format!("lol{level}: &l{level} [{refs}]\n"));
    }
    text.push_str("---\n");
    text
}

#[tokio::test]
async fn hostile_skills_are_skipped_with_diagnostics_and_good_ones_load() {
    let outside = tempfile::tempdir().unwrap();
    write(outside.path(), "stolen/SKILL.md", good("stolen"));
    write(outside.path(), "secret.md", good("secret"));

    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    write(root, "fine/SKILL.md", good("fine"));
    // a directory symlink that leaves the root
    symlink(outside.path().join("stolen"), root.join("escape")).unwrap();
    // a SKILL.md that is itself a symlink (to a file outside, and to one inside)
    std::fs::create_dir_all(root.join("linked-out")).unwrap();
    symlink(
        outside.path().join("secret.md"),
        root.join("linked-out/SKILL.md"),
    )
    .unwrap();
    std::fs::create_dir_all(root.join("linked-in")).unwrap();
    symlink(root.join("fine/SKILL.md"), root.join("linked-in/SKILL.md")).unwrap();
    // 300 KB SKILL.md
    write(
        root,
        "huge/SKILL.md",
        format!("{}{}", good("huge"), "x".repeat(300_000)),
    );
    // a YAML bomb: YAML fails within its budget; the line parser still finds name and
    // description, so it loads as an ordinary skill — the point is that it returns quickly
    write(root, "bomb/SKILL.md", yaml_bomb());
    // binary junk
    let junk: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    write(root, "junk/SKILL.md", &junk);
    // missing frontmatter, and a description-less one
    write(root, "plain/SKILL.md", "# Just markdown\n");
    write(root, "nodesc/SKILL.md", "---\nname: nodesc\n---\n");
    // path-like names
    write(
        root,
        "dotdot/SKILL.md",
        "---\nname: ../../../etc/cron.d/evil\ndescription: Traversal\n---\n",
    );
    write(
        root,
        "slash/SKILL.md",
        "---\nname: a/b\ndescription: Slash\n---\n",
    );
    // deeply nested structures in YAML and in metadata JSON5
    write(
        root,
        "deep-yaml/SKILL.md",
        format!(
            "---\nname: deep-yaml\ndescription: Deep\nx: {}\n---\n",
            "[".repeat(100_000)
        ),
    );
    write(
        root,
        "deep-json/SKILL.md",
        format!(
            "---\nname: deep-json\ndescription: Deep metadata\nmetadata: {}\n---\n",
            "{\"a\":".repeat(50_000)
        ),
    );
    // a symlink cycle
    symlink(root, root.join("loop")).unwrap();

    let store: Arc<dyn ObjectStore> = Arc::new(DirObjectStore::open(root).unwrap());
    let source = SkillSource::new(SkillSourceKind::Workspace, store, "");
    let started = Instant::now();
    let loaded = SkillLoader::new(SkillLimits::default())
        .load(&[source])
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "hostile input must not stall loading"
    );

    let mut names: Vec<&str> = loaded.entries.iter().map(|e| e.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["bomb", "deep-json", "deep-yaml", "fine"],
        "{:#?}",
        loaded.diagnostics
    );
    let deep_json = loaded
        .entries
        .iter()
        .find(|e| e.name == "deep-json")
        .unwrap();
    assert!(
        deep_json.metadata.is_none(),
        "over-deep metadata is ignored"
    );

    let kinds_at = |dir: &str| -> Vec<DiagnosticKind> {
        loaded
            .diagnostics
            .iter()
            .filter(|d| d.location.contains(&format!("/{dir}")))
            .map(|d| d.kind)
            .collect()
    };
    assert_eq!(kinds_at("escape"), [DiagnosticKind::SymlinkEscape]);
    assert_eq!(kinds_at("linked-out"), [DiagnosticKind::SymlinkedSkillFile]);
    assert_eq!(kinds_at("linked-in"), [DiagnosticKind::SymlinkedSkillFile]);
    assert_eq!(kinds_at("huge"), [DiagnosticKind::TooLarge]);
    assert_eq!(kinds_at("junk"), [DiagnosticKind::Binary]);
    assert_eq!(kinds_at("plain"), [DiagnosticKind::MissingFrontmatter]);
    assert_eq!(kinds_at("nodesc"), [DiagnosticKind::MissingDescription]);
    assert_eq!(kinds_at("dotdot"), [DiagnosticKind::InvalidName]);
    assert_eq!(kinds_at("slash"), [DiagnosticKind::InvalidName]);
    let escape = loaded
        .diagnostics
        .iter()
        .find(|d| d.kind == DiagnosticKind::SymlinkEscape)
        .unwrap();
    assert!(
        escape
            .message
            .contains("Skipping escaped skill path outside its configured root:")
    );
    assert!(escape.message.contains("reason=symlink-escape"));
    assert!(
        loaded.entries.iter().all(|e| !e
            .location
            .starts_with(&outside.path().display().to_string())),
        "nothing outside the root was loaded"
    );
}

#[tokio::test]
async fn a_symlinked_skill_directory_inside_the_root_is_followed() {
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    write(root, "real/inner/SKILL.md", good("inner"));
    symlink(root.join("real/inner"), root.join("alias")).unwrap();
    let store: Arc<dyn ObjectStore> = Arc::new(DirObjectStore::open(root).unwrap());
    let loaded = SkillLoader::new(SkillLimits::default())
        .load(&[SkillSource::new(SkillSourceKind::Workspace, store, "")])
        .await
        .unwrap();
    // both the grouping folder `real` and the symlink `alias` lead to the same skill
    assert_eq!(loaded.entries.len(), 1);
    assert_eq!(loaded.entries[0].name, "inner");
    assert!(loaded.diagnostics.is_empty(), "{:#?}", loaded.diagnostics);
}

#[tokio::test]
async fn a_missing_source_directory_is_empty_not_an_error() {
    let tree = tempfile::tempdir().unwrap();
    let store: Arc<dyn ObjectStore> =
        Arc::new(DirObjectStore::open(tree.path().join("absent")).unwrap());
    let loaded = SkillLoader::new(SkillLimits::default())
        .load(&[SkillSource::new(SkillSourceKind::Managed, store, "")])
        .await
        .unwrap();
    assert!(loaded.entries.is_empty());
}
