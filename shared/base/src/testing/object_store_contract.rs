//! The [`ObjectStore`] contract: [`object_store_contract`], the one behavioural definition
//! every object store (in-memory, directory tree, S3) must pass, and
//! [`object_store_if_absent_race`] for stores that serialise conditional writes.

use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::object_store::{Listing, Object, ObjectMeta, ObjectStore, PutCondition, StoreError};
use crate::testing::{join_all, next_id};

/// Runs the [`ObjectStore`] contract against `store`, panicking with a description of the
/// first broken expectation.
///
/// Every adapter's test suite calls this once. All keys live under a prefix unique to this
/// call (`contract-<pid>-<time>-<n>/`), so the store may be shared with other tests running
/// at the same time; the suite deletes what it wrote on success.
pub async fn object_store_contract(store: &dyn ObjectStore) {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let root = format!("contract-{}-{nanos:x}-{}/", std::process::id(), next_id());
    let suite = Contract { store, root };

    suite.missing_objects_read_as_none().await;
    suite.put_get_head_round_trip().await;
    suite.etag_changes_with_content_and_only_then().await;
    suite.empty_and_binary_content_round_trip_byte_exact().await;
    suite.keys_with_spaces_and_unicode_work().await;
    suite.listing_is_recursive_sorted_and_prefix_scoped().await;
    suite.listing_truncates_at_max_keys().await;
    suite.if_absent_conflicts_when_the_key_exists().await;
    suite
        .if_match_conflicts_on_a_stale_etag_or_missing_key()
        .await;
    suite.get_over_max_bytes_is_too_large().await;
    suite.invalid_keys_are_rejected().await;
    suite.delete_removes_and_is_idempotent().await;
    suite.location_and_identity_name_the_object().await;
    suite.clean_up().await;
}

/// The contract's checks, each writing only under `root`.
struct Contract<'a> {
    store: &'a dyn ObjectStore,
    root: String,
}

/// Generous read limit for objects the suite wrote itself.
const ANY_SIZE: u64 = 1 << 20;

impl Contract<'_> {
    fn key(&self, relative: &str) -> String {
        format!("{}{relative}", self.root)
    }

    async fn put(&self, relative: &str, bytes: &[u8]) -> ObjectMeta {
        let key = self.key(relative);
        self.store
            .put(&key, bytes.to_vec(), PutCondition::Always)
            .await
            .unwrap_or_else(|err| panic!("put {key:?} failed: {err}"))
    }

    async fn get(&self, key: &str) -> Option<Object> {
        self.store
            .get(key, ANY_SIZE)
            .await
            .unwrap_or_else(|err| panic!("get {key:?} failed: {err}"))
    }

    async fn head(&self, key: &str) -> Option<ObjectMeta> {
        self.store
            .head(key)
            .await
            .unwrap_or_else(|err| panic!("head {key:?} failed: {err}"))
    }

    async fn list(&self, prefix: &str, max_keys: usize) -> Listing {
        self.store
            .list(prefix, max_keys)
            .await
            .unwrap_or_else(|err| panic!("list {prefix:?} failed: {err}"))
    }

    async fn listed_keys(&self, prefix: &str) -> Vec<String> {
        let listing = self.list(prefix, 10_000).await;
        assert!(
            !listing.truncated,
            "listing {prefix:?} should not be truncated"
        );
        listing.objects.into_iter().map(|meta| meta.key).collect()
    }

    fn keys(&self, relatives: &[&str]) -> Vec<String> {
        relatives
            .iter()
            .map(|relative| self.key(relative))
            .collect()
    }

    async fn missing_objects_read_as_none(&self) {
        let key = self.key("missing/nothing-here.txt");
        assert_eq!(self.get(&key).await, None, "get of a missing key");
        assert_eq!(self.head(&key).await, None, "head of a missing key");
        let listing = self.list(&self.key("missing/"), 10).await;
        assert_eq!(listing, Listing::default(), "listing an empty prefix");
    }

    async fn put_get_head_round_trip(&self) {
        let key = self.key("round-trip/SKILL.md");
        let written = self
            .put("round-trip/SKILL.md", b"---\nname: demo\n---\n")
            .await;
        assert_eq!(written.key, key, "put reports the key");
        assert_eq!(written.size, 19, "put reports the size");
        assert!(!written.etag.is_empty(), "put reports an ETag");
        assert!(
            !written.etag.contains('"'),
            "ETags are unquoted: {:?}",
            written.etag
        );

        let object = self
            .get(&key)
            .await
            .expect("object just written is readable");
        assert_eq!(object.bytes, b"---\nname: demo\n---\n");
        assert_eq!(object.meta, written, "get reports what put returned");
        assert_eq!(
            self.head(&key).await,
            Some(written.clone()),
            "head reports what put returned"
        );

        let listing = self.list(&self.key("round-trip/"), 10).await;
        assert_eq!(
            listing.objects,
            vec![written],
            "listing reports what put returned"
        );
    }

    async fn etag_changes_with_content_and_only_then(&self) {
        let key = self.key("etag/file.txt");
        let first = self.put("etag/file.txt", b"first version").await;
        let first_again = self.head(&key).await.expect("written object has metadata");
        assert_eq!(
            first_again.etag, first.etag,
            "ETag is stable while content is unchanged"
        );
        let read = self.get(&key).await.expect("written object is readable");
        assert_eq!(
            read.meta.etag, first.etag,
            "reading does not change the ETag"
        );

        // Same size, different bytes: a size-only version tag would miss this.
        let second = self.put("etag/file.txt", b"second versio").await;
        assert_ne!(second.etag, first.etag, "ETag changes when content changes");
        assert_eq!(
            self.head(&key).await.map(|meta| meta.etag),
            Some(second.etag.clone())
        );
        let third = self.put("etag/file.txt", b"a third, longer version").await;
        assert_ne!(
            third.etag, second.etag,
            "ETag changes when content changes again"
        );
        let read = self.get(&key).await.expect("rewritten object is readable");
        assert_eq!(read.bytes, b"a third, longer version");
        assert_eq!(read.meta, third);
    }

    async fn empty_and_binary_content_round_trip_byte_exact(&self) {
        let empty = self.put("binary/empty", b"").await;
        assert_eq!(empty.size, 0);
        let object = self
            .get(&empty.key)
            .await
            .expect("empty object is readable");
        assert!(object.bytes.is_empty(), "empty object reads back empty");

        let mut bytes: Vec<u8> = (0..=255u8).collect();
        bytes.extend_from_slice(&[0xff, 0xfe, 0x00, 0x00, 0xc3, 0x28, b'\r', b'\n', b'\r']);
        bytes.extend((0..5000u32).map(|index| (index.wrapping_mul(2_654_435_761) >> 24) as u8));
        let written = self.put("binary/blob.bin", &bytes).await;
        assert_eq!(written.size, bytes.len() as u64);
        let object = self
            .get(&written.key)
            .await
            .expect("binary object is readable");
        assert!(
            object.bytes == bytes,
            "binary content must round-trip byte-exact"
        );
    }

    async fn keys_with_spaces_and_unicode_work(&self) {
        let relative = "unicode/with space/naïve 文件 ✓ (1)+%20&=.md";
        let key = self.key(relative);
        let written = self.put(relative, "ünïcödé".as_bytes()).await;
        assert_eq!(written.key, key);
        let object = self.get(&key).await.expect("unicode key is readable");
        assert_eq!(object.bytes, "ünïcödé".as_bytes());
        assert_eq!(
            self.listed_keys(&self.key("unicode/")).await,
            vec![key.clone()]
        );
        assert_eq!(
            self.listed_keys(&self.key("unicode/with space/")).await,
            vec![key]
        );
    }

    async fn listing_is_recursive_sorted_and_prefix_scoped(&self) {
        // Written out of order; names chosen so that byte order of whole keys differs from
        // a naive per-directory sort ('-' < '.' < '/' < '0').
        let names = [
            "tree/ab/x",
            "tree/a/sub/deeper/3.txt",
            "tree/a0",
            "tree/a/1.txt",
            "tree/a.txt",
            "tree/a-b",
            "tree/a/sub/2.txt",
            "tree/b/SKILL.md",
        ];
        for name in names {
            self.put(name, name.as_bytes()).await;
        }

        let everything = self.listed_keys(&self.key("tree/")).await;
        let expected = self.keys(&[
            "tree/a-b",
            "tree/a.txt",
            "tree/a/1.txt",
            "tree/a/sub/2.txt",
            "tree/a/sub/deeper/3.txt",
            "tree/a0",
            "tree/ab/x",
            "tree/b/SKILL.md",
        ]);
        assert_eq!(
            everything, expected,
            "listing is recursive and sorted by key bytes"
        );

        let scoped = self.listed_keys(&self.key("tree/a/")).await;
        let expected = self.keys(&[
            "tree/a/1.txt",
            "tree/a/sub/2.txt",
            "tree/a/sub/deeper/3.txt",
        ]);
        assert_eq!(
            scoped, expected,
            "prefix `a/` lists only below `a/`, not `ab/` or `a.txt`"
        );

        let raw = self.listed_keys(&self.key("tree/a")).await;
        let expected = self.keys(&[
            "tree/a-b",
            "tree/a.txt",
            "tree/a/1.txt",
            "tree/a/sub/2.txt",
            "tree/a/sub/deeper/3.txt",
            "tree/a0",
            "tree/ab/x",
        ]);
        assert_eq!(
            raw, expected,
            "a prefix without `/` matches keys by string prefix"
        );

        let file_prefix = self.listed_keys(&self.key("tree/b/SKILL.md")).await;
        assert_eq!(
            file_prefix,
            self.keys(&["tree/b/SKILL.md"]),
            "a full key lists itself"
        );
        let nothing = self.listed_keys(&self.key("tree/c/")).await;
        assert!(nothing.is_empty(), "a prefix with no objects lists nothing");

        let listing = self.list(&self.key("tree/a/sub/"), 10).await;
        for meta in &listing.objects {
            let head = self.head(&meta.key).await;
            assert_eq!(head.as_ref(), Some(meta), "listing metadata matches head");
        }
        assert!(
            listing.refused.is_empty(),
            "nothing is refused in a plain tree"
        );
    }

    async fn listing_truncates_at_max_keys(&self) {
        for index in 0..5 {
            self.put(&format!("page/{index}.txt"), b"x").await;
        }
        let prefix = self.key("page/");
        let first_three = self.list(&prefix, 3).await;
        let keys: Vec<_> = first_three
            .objects
            .iter()
            .map(|meta| meta.key.clone())
            .collect();
        assert_eq!(keys, self.keys(&["page/0.txt", "page/1.txt", "page/2.txt"]));
        assert!(
            first_three.truncated,
            "stopping before the end sets truncated"
        );

        let exact = self.list(&prefix, 5).await;
        assert_eq!(exact.objects.len(), 5);
        assert!(
            !exact.truncated,
            "a listing that reaches the end is not truncated"
        );

        let none = self.list(&prefix, 0).await;
        assert!(none.objects.is_empty(), "max_keys 0 lists nothing");
        assert!(
            none.truncated,
            "max_keys 0 with objects present is truncated"
        );
        let none_empty = self.list(&self.key("page-empty/"), 0).await;
        assert!(
            !none_empty.truncated,
            "max_keys 0 on an empty prefix is not truncated"
        );
    }

    async fn if_absent_conflicts_when_the_key_exists(&self) {
        let key = self.key("conditions/absent.txt");
        let created = self
            .store
            .put(&key, b"created".to_vec(), PutCondition::IfAbsent)
            .await
            .expect("IfAbsent succeeds on a new key");
        let again = self
            .store
            .put(&key, b"overwritten".to_vec(), PutCondition::IfAbsent)
            .await;
        assert!(
            matches!(again, Err(StoreError::Conflict(_))),
            "IfAbsent on an existing key conflicts, got {again:?}"
        );
        let object = self.get(&key).await.expect("object still there");
        assert_eq!(
            object.bytes, b"created",
            "a failed IfAbsent write changes nothing"
        );
        assert_eq!(object.meta, created);
    }

    async fn if_match_conflicts_on_a_stale_etag_or_missing_key(&self) {
        let key = self.key("conditions/match.txt");
        let first = self.put("conditions/match.txt", b"one").await;
        let second = self
            .store
            .put(
                &key,
                b"two".to_vec(),
                PutCondition::IfMatch(first.etag.clone()),
            )
            .await
            .expect("IfMatch with the current ETag succeeds");
        assert_ne!(second.etag, first.etag);

        let stale = self
            .store
            .put(&key, b"three".to_vec(), PutCondition::IfMatch(first.etag))
            .await;
        assert!(
            matches!(stale, Err(StoreError::Conflict(_))),
            "IfMatch with a stale ETag conflicts, got {stale:?}"
        );
        let object = self.get(&key).await.expect("object still there");
        assert_eq!(
            object.bytes, b"two",
            "a failed IfMatch write changes nothing"
        );

        let missing = self.key("conditions/never-written.txt");
        let on_missing = self
            .store
            .put(&missing, b"x".to_vec(), PutCondition::IfMatch(second.etag))
            .await;
        assert!(
            matches!(on_missing, Err(StoreError::Conflict(_))),
            "IfMatch on a missing key conflicts, got {on_missing:?}"
        );
        assert_eq!(
            self.head(&missing).await,
            None,
            "a failed IfMatch write creates nothing"
        );
    }

    async fn get_over_max_bytes_is_too_large(&self) {
        let written = self.put("limits/ten.txt", b"0123456789").await;
        let over = self.store.get(&written.key, 9).await;
        match over {
            Err(StoreError::TooLarge { key, size, limit }) => {
                assert_eq!((key.as_str(), size, limit), (written.key.as_str(), 10, 9));
            }
            other => panic!("get over max_bytes should be TooLarge, got {other:?}"),
        }
        let exact = self
            .store
            .get(&written.key, 10)
            .await
            .expect("get at exactly max_bytes");
        assert_eq!(
            exact.map(|object| object.bytes),
            Some(b"0123456789".to_vec())
        );
    }

    async fn invalid_keys_are_rejected(&self) {
        let inside = self.key("../escape");
        for bad in ["../x", "/abs", "a/../b", "", "a//b", "./a", inside.as_str()] {
            let is_invalid = |result: Result<(), StoreError>| {
                matches!(result, Err(StoreError::InvalidKey { .. }))
            };
            let get = self.store.get(bad, ANY_SIZE).await.map(drop);
            assert!(is_invalid(get), "get {bad:?} must be rejected");
            let head = self.store.head(bad).await.map(drop);
            assert!(is_invalid(head), "head {bad:?} must be rejected");
            let put = self
                .store
                .put(bad, b"x".to_vec(), PutCondition::Always)
                .await
                .map(drop);
            assert!(is_invalid(put), "put {bad:?} must be rejected");
            let delete = self.store.delete(bad).await;
            assert!(is_invalid(delete), "delete {bad:?} must be rejected");
        }
        for bad_prefix in ["../", "/abs/", "a/../", "a//"] {
            let listing = self.store.list(bad_prefix, 10).await.map(drop);
            assert!(
                matches!(listing, Err(StoreError::InvalidKey { .. })),
                "list {bad_prefix:?} must be rejected"
            );
        }
    }

    async fn delete_removes_and_is_idempotent(&self) {
        let written = self.put("delete/gone.txt", b"bye").await;
        let kept = self.put("delete/kept.txt", b"stay").await;
        self.store
            .delete(&written.key)
            .await
            .expect("delete an existing object");
        assert_eq!(self.get(&written.key).await, None, "deleted object is gone");
        assert_eq!(
            self.head(&written.key).await,
            None,
            "deleted object has no metadata"
        );
        assert_eq!(self.listed_keys(&self.key("delete/")).await, vec![kept.key]);
        self.store
            .delete(&written.key)
            .await
            .expect("deleting a missing object is fine");
        let recreated = self
            .store
            .put(&written.key, b"back".to_vec(), PutCondition::IfAbsent)
            .await
            .expect("IfAbsent succeeds after delete");
        assert_eq!(recreated.size, 4);
    }

    async fn location_and_identity_name_the_object(&self) {
        let key = self.key("where/SKILL.md");
        let location = self.store.location(&key);
        assert!(
            location.ends_with(&key),
            "location {location:?} should end with the key"
        );
        assert!(
            !self.store.identity().is_empty(),
            "identity names the namespace"
        );
        assert_eq!(
            self.store.key_for_location(&location),
            Some(key.clone()),
            "a location resolves back to its key"
        );
        let traversal = format!("{location}/../../../../etc/passwd");
        assert_eq!(
            self.store.key_for_location(&traversal),
            None,
            "no traversal through locations"
        );
        assert_eq!(self.store.key_for_location("elsewhere/SKILL.md"), None);
        assert_eq!(
            self.store.key_for_location("s3://some-other-bucket/x"),
            None
        );
    }

    async fn clean_up(&self) {
        let listing = self.list(&self.root, 100_000).await;
        for meta in listing.objects {
            self.store
                .delete(&meta.key)
                .await
                .unwrap_or_else(|err| panic!("clean-up delete {:?} failed: {err}", meta.key));
        }
        assert!(
            self.listed_keys(&self.root).await.is_empty(),
            "clean-up removed every object"
        );
    }
}

/// Races `writers` `IfAbsent` puts of the same fresh key and checks that exactly one wins and
/// the rest conflict. Stores whose backend serialises conditional writes (in-memory, directory
/// tree, real S3) run it; an emulator that checks then writes without a lock may not pass.
pub async fn object_store_if_absent_race(store: &dyn ObjectStore, writers: usize) {
    let key = format!("race-{}-{}/claimed.txt", std::process::id(), next_id());
    let attempts = (0..writers)
        .map(|writer| {
            let key = key.as_str();
            Box::pin(async move {
                store
                    .put(
                        key,
                        format!("writer {writer}").into_bytes(),
                        PutCondition::IfAbsent,
                    )
                    .await
            }) as Pin<Box<dyn Future<Output = _> + Send + '_>>
        })
        .collect();
    let results: Vec<Result<ObjectMeta, StoreError>> = join_all(attempts).await;
    let winners = results.iter().filter(|result| result.is_ok()).count();
    let conflicts = results
        .iter()
        .filter(|result| matches!(result, Err(StoreError::Conflict(_))))
        .count();
    assert_eq!(winners, 1, "exactly one IfAbsent writer wins: {results:?}");
    assert_eq!(
        conflicts,
        writers - 1,
        "every other writer conflicts: {results:?}"
    );
    store
        .delete(&key)
        .await
        .unwrap_or_else(|err| panic!("clean-up delete {key:?} failed: {err}"));
}
