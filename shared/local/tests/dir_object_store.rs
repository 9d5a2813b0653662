//! `DirObjectStore` against real directory trees: the shared object-store contract, plus the
//! rules only a file system needs (symlinks, special files, odd names, a missing root).

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::symlink;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use clawless_base::object_store::{
    ObjectStore, PutCondition, RefusalReason, RefusedEntry, StoreError,
};
use clawless_core::testing::{object_store_contract, object_store_if_absent_race};
use clawless_local::DirObjectStore;

/// A temporary tree and a store on it; the tree is removed on drop.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    store: DirObjectStore,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let base = fs::canonicalize(dir.path()).expect("canonicalise the temporary directory");
        let root = base.join("root");
        fs::create_dir(&root).expect("create the store root");
        let store = DirObjectStore::open(&root).expect("open the store");
        Self {
            _dir: dir,
            root,
            store,
        }
    }

    /// A directory beside the root (outside it), for escape tests.
    fn outside(&self) -> PathBuf {
        let outside = self.root.with_file_name("outside");
        fs::create_dir_all(&outside).expect("create a directory outside the root");
        outside
    }

    fn write(&self, relative: &str, content: &str) -> PathBuf {
        let path = self.root.join(relative);
        create_parent(&path);
        fs::write(&path, content).expect("write a fixture file");
        path
    }

    fn link(&self, relative: &str, target: &Path) {
        let path = self.root.join(relative);
        create_parent(&path);
        symlink(target, path).expect("create a fixture symlink");
    }

    async fn keys(&self, prefix: &str) -> Vec<String> {
        let listing = self.store.list(prefix, 1000).await.expect("list the tree");
        listing.objects.into_iter().map(|meta| meta.key).collect()
    }

    async fn refused(&self, prefix: &str) -> Vec<RefusedEntry> {
        self.store
            .list(prefix, 1000)
            .await
            .expect("list the tree")
            .refused
    }
}

fn create_parent(path: &Path) {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).expect("create fixture directories");
    }
}

fn refused(key: &str, reason: RefusalReason) -> RefusedEntry {
    RefusedEntry {
        key: key.to_owned(),
        reason,
    }
}

#[tokio::test]
async fn dir_store_passes_the_object_store_contract() {
    let tree = Tree::new();
    object_store_contract(&tree.store).await;
    let left: Vec<_> = fs::read_dir(&tree.root).unwrap().collect();
    assert!(left.is_empty(), "deletes prune empty directories: {left:?}");
}

#[tokio::test]
async fn dir_store_passes_the_contract_on_a_root_that_does_not_exist_yet() {
    // GIVEN a root two levels below an existing directory
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("not/yet");
    let store = DirObjectStore::open(&root).unwrap();
    // THEN it lists nothing and the first put creates it
    assert_eq!(store.list("", 10).await.unwrap().objects, vec![]);
    assert_eq!(store.get("x", 10).await.unwrap(), None);
    object_store_contract(&store).await;
    assert!(root.is_dir(), "put created the root");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_if_absent_writes_have_exactly_one_winner() {
    let tree = Tree::new();
    object_store_if_absent_race(&tree.store, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_stores_on_one_root_share_identity_and_serialise_writes() {
    let tree = Tree::new();
    fs::create_dir(tree.root.join("sub")).unwrap();
    let twin = DirObjectStore::open(tree.root.join("sub/..")).unwrap();
    assert_eq!(twin.identity(), tree.store.identity());
    assert_eq!(
        tree.store.identity(),
        format!("dir:{}", tree.root.display())
    );

    let key = "claims/one.txt";
    let (first, second) = tokio::join!(
        tree.store.put(key, b"a".to_vec(), PutCondition::IfAbsent),
        twin.put(key, b"b".to_vec(), PutCondition::IfAbsent),
    );
    assert!(
        first.is_ok() != second.is_ok(),
        "exactly one wins: {first:?} / {second:?}"
    );
}

#[tokio::test]
async fn root_is_canonicalised_and_location_is_the_absolute_path() {
    let tree = Tree::new();
    let alias = tree.root.parent().unwrap().join("alias");
    symlink(&tree.root, &alias).unwrap();
    let store = DirObjectStore::open(&alias).unwrap();
    assert_eq!(store.root(), tree.root);
    assert_eq!(store.identity(), format!("dir:{}", tree.root.display()));
    assert_eq!(
        store.location("skills/weather/SKILL.md"),
        tree.root
            .join("skills/weather/SKILL.md")
            .display()
            .to_string()
    );
}

#[test]
fn a_root_that_is_a_file_is_refused() {
    let tree = Tree::new();
    let file = tree.write("plain.txt", "not a dir");
    let err = DirObjectStore::open(&file).unwrap_err();
    assert!(err.to_string().contains("not a directory"), "{err}");
}

#[tokio::test]
async fn symlinked_files_are_refused_and_never_served_or_replaced() {
    // GIVEN a skill whose SKILL.md is a symlink (to a file inside the root and one outside)
    let tree = Tree::new();
    let real = tree.write("skills/real/SKILL.md", "real skill");
    tree.link("skills/linked/SKILL.md", &real);
    let secret = tree.outside().join("secret.md");
    fs::write(&secret, "secret").unwrap();
    tree.link("skills/stolen/SKILL.md", &secret);

    // WHEN listing THEN both links are refused and only the real file is served
    assert_eq!(tree.keys("skills/").await, vec!["skills/real/SKILL.md"]);
    assert_eq!(
        tree.refused("skills/").await,
        vec![
            refused("skills/linked/SKILL.md", RefusalReason::SymlinkedFile),
            refused("skills/stolen/SKILL.md", RefusalReason::SymlinkedFile),
        ]
    );
    // AND reading them directly finds nothing
    for key in ["skills/linked/SKILL.md", "skills/stolen/SKILL.md"] {
        assert_eq!(tree.store.get(key, 1000).await.unwrap(), None, "{key}");
        assert_eq!(tree.store.head(key).await.unwrap(), None, "{key}");
    }
    // AND writing over a link is refused rather than replacing the user's symlink
    let put = tree
        .store
        .put(
            "skills/stolen/SKILL.md",
            b"x".to_vec(),
            PutCondition::Always,
        )
        .await;
    assert!(matches!(put, Err(StoreError::InvalidKey { .. })), "{put:?}");
    tree.store.delete("skills/stolen/SKILL.md").await.unwrap();
    assert!(
        tree.root.join("skills/stolen/SKILL.md").is_symlink(),
        "delete leaves links alone"
    );
    assert_eq!(fs::read_to_string(&secret).unwrap(), "secret");
}

#[tokio::test]
async fn directory_symlinks_that_escape_the_root_are_refused() {
    // GIVEN a directory symlink to a tree outside the root
    let tree = Tree::new();
    let outside = tree.outside();
    fs::create_dir_all(outside.join("weather")).unwrap();
    fs::write(outside.join("weather/SKILL.md"), "outside").unwrap();
    tree.link("skills/escape", &outside);
    tree.write("skills/inside/SKILL.md", "inside");

    // THEN listing refuses it, and nothing below it can be read or written
    assert_eq!(tree.keys("").await, vec!["skills/inside/SKILL.md"]);
    assert_eq!(
        tree.refused("").await,
        vec![refused("skills/escape", RefusalReason::SymlinkEscape)]
    );
    assert_eq!(
        tree.store.list("skills/escape/", 10).await.unwrap().refused,
        vec![refused("skills/escape", RefusalReason::SymlinkEscape)]
    );
    assert_eq!(
        tree.store
            .get("skills/escape/weather/SKILL.md", 1000)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        tree.store
            .head("skills/escape/weather/SKILL.md")
            .await
            .unwrap(),
        None
    );
    let put = tree
        .store
        .put(
            "skills/escape/new/SKILL.md",
            b"x".to_vec(),
            PutCondition::Always,
        )
        .await;
    assert!(matches!(put, Err(StoreError::InvalidKey { .. })), "{put:?}");
    assert!(
        !outside.join("new").exists(),
        "nothing was created outside the root"
    );
    tree.store
        .delete("skills/escape/weather/SKILL.md")
        .await
        .unwrap();
    assert!(
        outside.join("weather/SKILL.md").exists(),
        "delete does not reach outside"
    );
}

#[tokio::test]
async fn directory_symlinks_inside_the_root_are_followed() {
    // GIVEN `skills/alias` pointing at `shared/pack` inside the root
    let tree = Tree::new();
    tree.write("shared/pack/weather/SKILL.md", "weather");
    tree.link("skills/alias", &tree.root.join("shared/pack"));

    // THEN its files are listed under both paths, and readable and writable through the link
    assert_eq!(
        tree.keys("").await,
        vec![
            "shared/pack/weather/SKILL.md",
            "skills/alias/weather/SKILL.md"
        ]
    );
    assert!(tree.refused("").await.is_empty());
    let object = tree
        .store
        .get("skills/alias/weather/SKILL.md", 100)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(object.bytes, b"weather");
    let direct = tree
        .store
        .head("shared/pack/weather/SKILL.md")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(object.meta.etag, direct.etag, "one file, one ETag");
    tree.store
        .put(
            "skills/alias/new/SKILL.md",
            b"new".to_vec(),
            PutCondition::Always,
        )
        .await
        .unwrap();
    assert_eq!(
        fs::read_to_string(tree.root.join("shared/pack/new/SKILL.md")).unwrap(),
        "new"
    );
    assert_eq!(
        tree.keys("skills/alias/n").await,
        vec!["skills/alias/new/SKILL.md"]
    );
}

#[tokio::test]
async fn symlink_cycles_do_not_hang_the_listing() {
    // GIVEN a directory containing a symlink to itself and one to its parent
    let tree = Tree::new();
    tree.write("a/file.md", "x");
    tree.write("a/b/deep.md", "y");
    tree.link("a/b/up", &tree.root.join("a"));
    tree.link("a/self", Path::new("."));

    let listing = tree.store.list("", 1000).await.unwrap();
    let keys: Vec<_> = listing
        .objects
        .iter()
        .map(|meta| meta.key.as_str())
        .collect();
    assert_eq!(keys, vec!["a/b/deep.md", "a/file.md"]);
    assert_eq!(
        listing.refused,
        vec![
            refused("a/b/up", RefusalReason::Unreadable),
            refused("a/self", RefusalReason::Unreadable)
        ]
    );
}

#[tokio::test]
async fn broken_symlinks_special_files_and_non_utf8_names_are_refused() {
    let tree = Tree::new();
    tree.write("dir/ok.md", "ok");
    tree.link("dir/broken", &tree.root.join("nowhere"));
    let _listener = UnixListener::bind(tree.root.join("dir/socket")).unwrap();
    fs::write(
        tree.root.join("dir").join(OsStr::from_bytes(b"bad\xff.md")),
        "x",
    )
    .unwrap();

    let listing = tree.store.list("dir/", 100).await.unwrap();
    let keys: Vec<_> = listing
        .objects
        .iter()
        .map(|meta| meta.key.as_str())
        .collect();
    assert_eq!(keys, vec!["dir/ok.md"]);
    let mut refusals = listing.refused.clone();
    refusals.sort_by(|left, right| left.key.cmp(&right.key));
    assert_eq!(
        refusals,
        vec![
            refused("dir/bad\u{fffd}.md", RefusalReason::Unreadable),
            refused("dir/broken", RefusalReason::Unreadable),
            refused("dir/socket", RefusalReason::Unreadable),
        ]
    );
    assert_eq!(tree.store.get("dir/socket", 100).await.unwrap(), None);
    assert_eq!(tree.store.get("dir/broken", 100).await.unwrap(), None);
    assert_eq!(
        tree.store.get("dir", 100).await.unwrap(),
        None,
        "a directory is not an object"
    );
}

#[tokio::test]
async fn an_external_edit_of_the_same_size_changes_the_etag() {
    let tree = Tree::new();
    let written = tree
        .store
        .put("notes.md", b"version 1".to_vec(), PutCondition::Always)
        .await
        .unwrap();
    fs::write(tree.root.join("notes.md"), "version 2").unwrap();
    let edited = tree.store.head("notes.md").await.unwrap().unwrap();
    assert_ne!(edited.etag, written.etag);
    let stale = tree
        .store
        .put(
            "notes.md",
            b"mine".to_vec(),
            PutCondition::IfMatch(written.etag),
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
}

#[tokio::test]
async fn a_file_standing_where_a_directory_should_be_is_refused() {
    let tree = Tree::new();
    tree.write("skills", "a file");
    let put = tree
        .store
        .put("skills/x/SKILL.md", b"x".to_vec(), PutCondition::Always)
        .await;
    assert!(matches!(put, Err(StoreError::InvalidKey { .. })), "{put:?}");
    assert_eq!(tree.store.get("skills/x/SKILL.md", 10).await.unwrap(), None);
    assert!(
        tree.store
            .list("skills/", 10)
            .await
            .unwrap()
            .objects
            .is_empty()
    );
}

#[tokio::test]
async fn a_failed_if_match_write_creates_no_directories() {
    let tree = Tree::new();
    let put = tree
        .store
        .put(
            "new/deep/SKILL.md",
            b"x".to_vec(),
            PutCondition::IfMatch("stale".into()),
        )
        .await;
    assert!(matches!(put, Err(StoreError::Conflict(_))), "{put:?}");
    assert!(!tree.root.join("new").exists());
}

#[tokio::test]
async fn deleting_the_last_file_prunes_empty_directories_but_keeps_the_root() {
    let tree = Tree::new();
    tree.store
        .put("a/b/c/one.md", b"1".to_vec(), PutCondition::Always)
        .await
        .unwrap();
    tree.store
        .put("a/two.md", b"2".to_vec(), PutCondition::Always)
        .await
        .unwrap();
    tree.store.delete("a/b/c/one.md").await.unwrap();
    assert!(
        !tree.root.join("a/b").exists(),
        "empty a/b/c and a/b were removed"
    );
    assert!(tree.root.join("a/two.md").exists());
    tree.store.delete("a/two.md").await.unwrap();
    assert!(!tree.root.join("a").exists());
    assert!(tree.root.is_dir(), "the root itself stays");
}
