//! Test support: in-memory port implementations and the contract suites every adapter runs.
//!
//! [`InMemoryObjectStore`] is the fake the core's own tests use; [`object_store_contract`] is the
//! one behavioural definition of [`ObjectStore`] that this fake, the directory tree
//! (`clawless-local`) and S3 (`clawless-aws`) all have to pass, so they cannot drift apart.
//!
//! The same holds for the session storage ports: [`InMemorySessionStore`], [`InMemoryInbox`]
//! and [`InMemoryTurnQueue`] are checked by [`session_store_contract`], [`inbox_contract`] and
//! [`turn_queue_contract`], which the DynamoDB/SQS and SQLite adapters run too.
//! Compiled only for tests and with the `test-support` feature; nothing here touches disk or network.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;

use crate::object_store::{
    Listing, Object, ObjectMeta, ObjectStore, PutCondition, StoreError, key_below_root,
    validate_key,
};
use crate::session::{
    Claim, Delivery, Inbox, InboxError, QueueError, QueuedMessage, SessionCommit, SessionKey,
    SessionStore, SessionStoreError, StoredSession, StoredStep, TurnQueue, claim_expires_at,
};

/// Distinguishes stores created by [`InMemoryObjectStore::new`] and contract runs in one process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// Checks a listing prefix: `""`, or something that is a valid key once one trailing `/` is removed.
///
/// Adapters apply the same rule, so a prefix such as `../` is refused everywhere instead of
/// escaping a directory tree in one store and matching nothing in another.
fn validate_prefix(prefix: &str) -> Result<(), StoreError> {
    if prefix.is_empty() {
        return Ok(());
    }
    validate_key(prefix.strip_suffix('/').unwrap_or(prefix))
}

#[derive(Debug, Clone)]
struct StoredObject {
    bytes: Vec<u8>,
    etag: String,
}

impl StoredObject {
    fn meta(&self, key: &str) -> ObjectMeta {
        ObjectMeta {
            key: key.to_owned(),
            etag: self.etag.clone(),
            size: self.bytes.len() as u64,
        }
    }
}

#[derive(Debug, Default)]
struct InMemoryState {
    objects: BTreeMap<String, StoredObject>,
    /// Bumped on every write; the ETag of a write is derived from it, so it is never reused.
    generation: u64,
}

/// A faithful in-memory [`ObjectStore`]: sorted listings, `max_keys` truncation, conditional
/// writes and a fresh ETag on every write (even of identical bytes, as a directory tree does;
/// S3 would keep its MD5 ETag for identical bytes, and callers must not rely on either).
///
/// Clones share the same objects and identity, like two handles on one bucket.
#[derive(Debug, Clone)]
pub struct InMemoryObjectStore {
    name: String,
    state: Arc<Mutex<InMemoryState>>,
}

impl Default for InMemoryObjectStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryObjectStore {
    /// An empty store with a name unique in this process (`mem://store-<n>`).
    pub fn new() -> Self {
        Self::named(format!("store-{}", next_id()))
    }

    /// An empty store called `name`. Its identity is `mem://<name>`: give different stores
    /// different names, since equal identities claim to see the same objects.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            state: Arc::default(),
        }
    }

    /// Writes `bytes` at `key` unconditionally, for arranging test fixtures without `.await`.
    pub fn insert(&self, key: &str, bytes: impl Into<Vec<u8>>) -> Result<ObjectMeta, StoreError> {
        validate_key(key)?;
        Ok(self.write(key, bytes.into()))
    }

    /// Every key currently stored, sorted.
    pub fn keys(&self) -> Vec<String> {
        self.lock().objects.keys().cloned().collect()
    }

    fn lock(&self) -> MutexGuard<'_, InMemoryState> {
        // The state is only mutated by whole-statement updates, so a panic elsewhere cannot
        // leave it half-written: recovering from poisoning is safe.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self, key: &str, bytes: Vec<u8>) -> ObjectMeta {
        let mut state = self.lock();
        Self::write_locked(&mut state, key, bytes)
    }

    fn write_locked(state: &mut InMemoryState, key: &str, bytes: Vec<u8>) -> ObjectMeta {
        state.generation += 1;
        let stored = StoredObject {
            bytes,
            etag: format!("mem-{:016x}", state.generation),
        };
        let meta = stored.meta(key);
        state.objects.insert(key.to_owned(), stored);
        meta
    }
}

#[async_trait]
impl ObjectStore for InMemoryObjectStore {
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        validate_prefix(prefix)?;
        let state = self.lock();
        let mut matching = state
            .objects
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, stored)| stored.meta(key));
        let objects: Vec<ObjectMeta> = matching.by_ref().take(max_keys).collect();
        let truncated = matching.next().is_some();
        Ok(Listing {
            objects,
            refused: Vec::new(),
            truncated,
        })
    }

    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        validate_key(key)?;
        let state = self.lock();
        let Some(stored) = state.objects.get(key) else {
            return Ok(None);
        };
        let size = stored.bytes.len() as u64;
        if size > max_bytes {
            return Err(StoreError::TooLarge {
                key: key.to_owned(),
                size,
                limit: max_bytes,
            });
        }
        Ok(Some(Object {
            meta: stored.meta(key),
            bytes: stored.bytes.clone(),
        }))
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        validate_key(key)?;
        Ok(self.lock().objects.get(key).map(|stored| stored.meta(key)))
    }

    async fn put(
        &self,
        key: &str,
        bytes: Vec<u8>,
        condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        validate_key(key)?;
        let mut state = self.lock();
        let current = state.objects.get(key);
        let holds = match &condition {
            PutCondition::Always => true,
            PutCondition::IfAbsent => current.is_none(),
            PutCondition::IfMatch(etag) => current.is_some_and(|stored| &stored.etag == etag),
        };
        if !holds {
            return Err(StoreError::Conflict(key.to_owned()));
        }
        Ok(Self::write_locked(&mut state, key, bytes))
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        validate_key(key)?;
        self.lock().objects.remove(key);
        Ok(())
    }

    fn location(&self, key: &str) -> String {
        format!("mem://{}/{key}", self.name)
    }

    fn key_for_location(&self, location: &str) -> Option<String> {
        key_below_root(location, &self.identity())
    }

    fn identity(&self) -> String {
        format!("mem://{}", self.name)
    }
}

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

/// Polls every future to completion concurrently on the current task and returns their
/// outputs in order. Lets test suites race operations without depending on an executor.
pub async fn join_all<'a, T>(futures: Vec<Pin<Box<dyn Future<Output = T> + Send + 'a>>>) -> Vec<T> {
    let mut pending: Vec<Option<Pin<Box<dyn Future<Output = T> + Send + 'a>>>> =
        futures.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|context| {
        for (slot, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot
                && let Poll::Ready(value) = future.as_mut().poll(context)
            {
                *output = Some(value);
                *slot = None;
            }
        }
        if pending.iter().all(Option::is_none) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
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

// ---------------------------------------------------------------------------------------------
// Sessions, inbox and turn queue: fakes.
// ---------------------------------------------------------------------------------------------

/// Locks a test fake's state. Fakes mutate their state only in whole-statement updates, so a
/// panic elsewhere cannot leave it half-written: recovering from poisoning is safe.
pub(crate) fn lock_state<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sleeps for `duration` without an async runtime: a short-lived thread wakes the task.
/// Keeps the fakes and contract suites independent of any executor.
pub(crate) async fn sleep(duration: Duration) {
    #[derive(Default)]
    struct Alarm {
        rung: bool,
        waker: Option<Waker>,
    }
    let alarm = Arc::new(Mutex::new(Alarm::default()));
    let ringer = Arc::clone(&alarm);
    std::thread::spawn(move || {
        std::thread::sleep(duration);
        let mut alarm = lock_state(&ringer);
        alarm.rung = true;
        if let Some(waker) = alarm.waker.take() {
            waker.wake();
        }
    });
    std::future::poll_fn(|context| {
        let mut alarm = lock_state(&alarm);
        if alarm.rung {
            Poll::Ready(())
        } else {
            alarm.waker = Some(context.waker().clone());
            Poll::Pending
        }
    })
    .await;
}

/// Record limit of [`InMemorySessionStore::new`]: generous, but finite so that callers that
/// forget to offload large content fail in tests too.
pub const IN_MEMORY_MAX_RECORD_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone)]
struct MemSession {
    version: u64,
    meta: String,
    steps: BTreeMap<u64, String>,
}

/// A faithful in-memory [`SessionStore`]: atomic commits with the optimistic version check,
/// `seq` uniqueness, numeric step order and a per-record size limit
/// ([`SessionStoreError::TooLarge`] above it).
///
/// Clones share the same sessions. [`largest_record_bytes`](Self::largest_record_bytes) tells
/// tests how large a body ever reached the store.
#[derive(Debug, Clone)]
pub struct InMemorySessionStore {
    sessions: Arc<Mutex<BTreeMap<String, MemSession>>>,
    max_record_bytes: usize,
    largest_record: Arc<AtomicUsize>,
}

impl Default for InMemorySessionStore {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemorySessionStore {
    /// An empty store holding records up to [`IN_MEMORY_MAX_RECORD_BYTES`].
    pub fn new() -> Self {
        Self::with_max_record_bytes(IN_MEMORY_MAX_RECORD_BYTES)
    }

    /// An empty store refusing meta or step bodies over `max_record_bytes`.
    pub fn with_max_record_bytes(max_record_bytes: usize) -> Self {
        Self {
            sessions: Arc::default(),
            max_record_bytes,
            largest_record: Arc::default(),
        }
    }

    /// The largest meta or step body any successful commit wrote, in bytes.
    pub fn largest_record_bytes(&self) -> usize {
        self.largest_record.load(Ordering::SeqCst)
    }

    /// Keys of every committed session, sorted.
    pub fn keys(&self) -> Vec<String> {
        lock_state(&self.sessions).keys().cloned().collect()
    }
}

/// Checks what every adapter checks before touching storage: record sizes, and that no `seq`
/// appears twice in the commit.
fn check_commit_shape(
    key: &SessionKey,
    commit: &SessionCommit,
    max_record_bytes: usize,
) -> Result<(), SessionStoreError> {
    let bodies = std::iter::once(&commit.meta).chain(commit.steps.iter().map(|step| &step.body));
    for body in bodies {
        if body.len() > max_record_bytes {
            return Err(SessionStoreError::TooLarge {
                key: key.to_string(),
                bytes: body.len(),
                limit: max_record_bytes,
            });
        }
    }
    if commit.repeated_seq().is_some() {
        return Err(SessionStoreError::Conflict {
            key: key.to_string(),
            expected: commit.expected_version,
        });
    }
    Ok(())
}

#[async_trait]
impl SessionStore for InMemorySessionStore {
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        let sessions = lock_state(&self.sessions);
        Ok(sessions.get(key.as_str()).map(|session| StoredSession {
            version: session.version,
            meta: session.meta.clone(),
            steps: session
                .steps
                .iter()
                .map(|(seq, body)| StoredStep {
                    seq: *seq,
                    body: body.clone(),
                })
                .collect(),
        }))
    }

    async fn commit(
        &self,
        key: &SessionKey,
        commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        check_commit_shape(key, commit, self.max_record_bytes)?;
        let conflict = || SessionStoreError::Conflict {
            key: key.to_string(),
            expected: commit.expected_version,
        };
        let mut sessions = lock_state(&self.sessions);
        let current = sessions.get(key.as_str());
        if current.map_or(0, |session| session.version) != commit.expected_version {
            return Err(conflict());
        }
        if let Some(session) = current
            && commit
                .steps
                .iter()
                .any(|step| session.steps.contains_key(&step.seq))
        {
            return Err(conflict());
        }
        let version = commit.expected_version.saturating_add(1);
        let session = sessions
            .entry(key.as_str().to_owned())
            .or_insert_with(|| MemSession {
                version: 0,
                meta: String::new(),
                steps: BTreeMap::new(),
            });
        session.version = version;
        session.meta.clone_from(&commit.meta);
        for step in &commit.steps {
            session.steps.insert(step.seq, step.body.clone());
        }
        let largest = std::iter::once(commit.meta.len())
            .chain(commit.steps.iter().map(|step| step.body.len()))
            .max()
            .unwrap_or(0);
        self.largest_record.fetch_max(largest, Ordering::SeqCst);
        Ok(version)
    }

    fn max_record_bytes(&self) -> usize {
        self.max_record_bytes
    }
}

/// An in-memory [`Inbox`]: one expiry per event id, claimed again once it has passed.
/// Clones share the same claims.
#[derive(Debug, Clone, Default)]
pub struct InMemoryInbox {
    claims: Arc<Mutex<HashMap<String, u64>>>,
}

impl InMemoryInbox {
    /// An inbox with no claims.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Inbox for InMemoryInbox {
    async fn claim(
        &self,
        event_id: &str,
        ttl: Duration,
        now_unix: u64,
    ) -> Result<Claim, InboxError> {
        let mut claims = lock_state(&self.claims);
        if claims
            .get(event_id)
            .is_some_and(|expires_at| *expires_at >= now_unix)
        {
            return Ok(Claim::Duplicate);
        }
        claims.insert(event_id.to_owned(), claim_expires_at(now_unix, ttl));
        Ok(Claim::Claimed)
    }

    async fn release(&self, event_id: &str) -> Result<(), InboxError> {
        lock_state(&self.claims).remove(event_id);
        Ok(())
    }
}

/// Visibility timeout of [`InMemoryTurnQueue::new`], as on the SQS test queues.
pub const DEFAULT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long SQS FIFO (and every fake) remembers a deduplication id: five minutes from the send.
pub const DEDUP_WINDOW: Duration = Duration::from_secs(300);

/// How often a waiting [`InMemoryTurnQueue::receive`] looks again.
const IN_MEMORY_POLL: Duration = Duration::from_millis(10);

#[derive(Debug)]
struct MemMessage {
    id: u64,
    group: String,
    body: String,
    visible_at: Instant,
    receive_count: u32,
    receipt: Option<String>,
}

#[derive(Debug, Default)]
struct MemQueue {
    /// Undeleted messages in send order; the first of each group is its head.
    messages: Vec<MemMessage>,
    /// Deduplication ids and when they were first sent.
    dedup: HashMap<String, Instant>,
    next_id: u64,
}

/// An in-memory SQS FIFO queue for the [`TurnQueue`] port.
///
/// - Per group, only the oldest undeleted message (the head) can be delivered, and only while
///   it is visible: a group whose head is in flight, or released with a delay, is held back
///   while other groups flow. A receive returns at most one message per group.
/// - A received message stays invisible for the visibility timeout, then is delivered again
///   with its `receive_count` incremented, until it is deleted.
/// - A send whose deduplication id was seen within [`DEDUP_WINDOW`] is dropped, even if the
///   first message was deleted meanwhile (as SQS does). The scope is the whole queue.
/// - A receipt is valid until its message is received again; deleting or releasing with an
///   older receipt, or one of a deleted message, does nothing.
///
/// Clones share the same messages.
#[derive(Debug, Clone)]
pub struct InMemoryTurnQueue {
    state: Arc<Mutex<MemQueue>>,
    visibility_timeout: Duration,
    dedup_window: Duration,
}

impl Default for InMemoryTurnQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl InMemoryTurnQueue {
    /// An empty queue with a [`DEFAULT_VISIBILITY_TIMEOUT`] and a [`DEDUP_WINDOW`].
    pub fn new() -> Self {
        Self::with_timeouts(DEFAULT_VISIBILITY_TIMEOUT, DEDUP_WINDOW)
    }

    /// An empty queue with the given visibility timeout and deduplication window.
    pub fn with_timeouts(visibility_timeout: Duration, dedup_window: Duration) -> Self {
        Self {
            state: Arc::default(),
            visibility_timeout,
            dedup_window,
        }
    }

    /// Messages not yet deleted (in flight or not).
    pub fn len(&self) -> usize {
        lock_state(&self.state).messages.len()
    }

    /// True when every message sent has been deleted (or none was sent).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn try_receive(&self, max: usize) -> Vec<Delivery> {
        let now = Instant::now();
        let mut state = lock_state(&self.state);
        let mut heads_seen = HashSet::new();
        let mut deliveries = Vec::new();
        for message in &mut state.messages {
            if deliveries.len() >= max {
                break;
            }
            if !heads_seen.insert(message.group.clone()) || message.visible_at > now {
                continue;
            }
            message.receive_count = message.receive_count.saturating_add(1);
            message.visible_at = now + self.visibility_timeout;
            let receipt = format!("mem-{}-{}", message.id, message.receive_count);
            message.receipt = Some(receipt.clone());
            deliveries.push(Delivery {
                receipt,
                group: message.group.clone(),
                body: message.body.clone(),
                receive_count: message.receive_count,
            });
        }
        deliveries
    }
}

#[async_trait]
impl TurnQueue for InMemoryTurnQueue {
    async fn send(&self, message: &QueuedMessage) -> Result<(), QueueError> {
        let now = Instant::now();
        let mut state = lock_state(&self.state);
        let window = self.dedup_window;
        state
            .dedup
            .retain(|_, sent_at| now.duration_since(*sent_at) < window);
        if state.dedup.contains_key(&message.dedup_id) {
            return Ok(());
        }
        state.dedup.insert(message.dedup_id.clone(), now);
        state.next_id += 1;
        let id = state.next_id;
        state.messages.push(MemMessage {
            id,
            group: message.group.clone(),
            body: message.body.clone(),
            visible_at: now,
            receive_count: 0,
            receipt: None,
        });
        Ok(())
    }

    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError> {
        let deadline = Instant::now() + wait;
        loop {
            let deliveries = self.try_receive(max);
            let now = Instant::now();
            if !deliveries.is_empty() || max == 0 || now >= deadline {
                return Ok(deliveries);
            }
            sleep(IN_MEMORY_POLL.min(deadline - now)).await;
        }
    }

    async fn delete(&self, receipt: &str) -> Result<(), QueueError> {
        lock_state(&self.state)
            .messages
            .retain(|message| message.receipt.as_deref() != Some(receipt));
        Ok(())
    }

    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError> {
        let visible_at = Instant::now() + delay;
        let mut state = lock_state(&self.state);
        if let Some(message) = state
            .messages
            .iter_mut()
            .find(|message| message.receipt.as_deref() == Some(receipt))
        {
            message.visible_at = visible_at;
        }
        Ok(())
    }
}
// ---------------------------------------------------------------------------------------------
// Sessions, inbox and turn queue: contract suites.
// ---------------------------------------------------------------------------------------------

/// A label unique to one contract run in this process and, by its time component, across
/// processes sharing a backend: lowercase letters, digits and `-`.
fn run_label(kind: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!(
        "{kind}-{:x}-{:x}-{}",
        std::process::id(),
        nanos & 0xffff_ffff_ffff,
        next_id()
    )
}

/// A JSON document of exactly `len` bytes with multi-byte characters, escapes and quotes in
/// it, so that any re-encoding or truncation shows.
///
/// # Panics
/// When `len` is too small to hold the document's frame (about 30 bytes plus the label).
pub fn sized_json_body(label: &str, len: usize) -> String {
    const PIECES: [&str; 6] = [
        "ünïcödé ",
        "文件 ",
        "🦀 ",
        "\\n\\t\\\"quoted\\\" ",
        "\\u0000 ",
        "plain ascii ",
    ];
    const TAIL: &str = "\"}";
    let mut body = format!("{{\"label\":\"{label}\",\"text\":\"");
    assert!(
        body.len() + TAIL.len() <= len,
        "a {len}-byte body cannot hold the label {label:?}"
    );
    for piece in PIECES.iter().cycle() {
        if body.len() + piece.len() + TAIL.len() > len {
            break;
        }
        body.push_str(piece);
    }
    while body.len() + TAIL.len() < len {
        body.push('.');
    }
    body.push_str(TAIL);
    body
}

/// How a session-store backend may knowingly differ from a real database in
/// [`session_store_contract`]. Each field relaxes one documented expectation; the default
/// relaxes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStoreDeviations {
    /// Concurrent transactions are not isolated from each other. `moto_server` (5.x) applies
    /// a `TransactWriteItems`' puts to the live table even after a condition failed, and on
    /// cancellation restores a copy of the whole table taken when the transaction started;
    /// with several writers at once, one loser's restore can bring back another loser's
    /// steps or erase the winner's commit. With this set, the contract skips its race of
    /// concurrent commits; every condition is still checked one commit at a time, which on a
    /// serialisable backend (real DynamoDB) is what makes the race come out right.
    pub concurrent_commits_not_isolated: bool,
}

/// Runs the [`SessionStore`] contract against `store`, panicking with a description of the
/// first broken expectation.
///
/// Every adapter's suite calls this once. Sessions belong to an agent id unique to this call,
/// so the store may be shared with other tests running at the same time (unless the backend
/// is not isolated, see [`SessionStoreDeviations`]). The suite writes bodies of exactly
/// [`SessionStore::max_record_bytes`] (twice in one commit), a commit of 99 steps, and races
/// 8 writers on one version.
pub async fn session_store_contract(store: &dyn SessionStore, deviations: SessionStoreDeviations) {
    let suite = SessionContract {
        store,
        agent: run_label("contract"),
    };
    suite.a_session_never_committed_loads_as_none().await;
    suite
        .creating_with_version_zero_works_once_then_conflicts()
        .await;
    suite.each_commit_increments_the_version_by_one().await;
    suite.a_stale_version_conflicts_and_writes_nothing().await;
    suite
        .an_existing_step_seq_conflicts_and_writes_nothing()
        .await;
    suite.steps_load_in_numeric_seq_order().await;
    suite.sessions_are_isolated_by_key().await;
    suite.a_commit_of_99_steps_is_written_whole().await;
    if !deviations.concurrent_commits_not_isolated {
        suite
            .concurrent_commits_on_one_version_have_exactly_one_winner()
            .await;
    }
    suite
        .bodies_up_to_the_record_limit_round_trip_byte_exact()
        .await;
    suite
        .a_body_over_the_record_limit_is_too_large_and_writes_nothing()
        .await;
}

struct SessionContract<'a> {
    store: &'a dyn SessionStore,
    agent: String,
}

fn step(seq: u64, body: impl Into<String>) -> StoredStep {
    StoredStep {
        seq,
        body: body.into(),
    }
}

fn seqs_of(session: &StoredSession) -> Vec<u64> {
    session.steps.iter().map(|step| step.seq).collect()
}

impl SessionContract<'_> {
    /// `agent:<run agent>:<rest>`.
    fn key(&self, rest: &str) -> SessionKey {
        let raw = format!("agent:{}:{rest}", self.agent);
        SessionKey::parse(&raw).unwrap_or_else(|| panic!("{raw:?} should be a session key"))
    }

    async fn commit(
        &self,
        key: &SessionKey,
        expected_version: u64,
        meta: &str,
        steps: Vec<StoredStep>,
    ) -> Result<u64, SessionStoreError> {
        self.store
            .commit(
                key,
                &SessionCommit {
                    expected_version,
                    meta: meta.to_owned(),
                    steps,
                },
            )
            .await
    }

    async fn commit_ok(
        &self,
        key: &SessionKey,
        expected_version: u64,
        meta: &str,
        steps: Vec<StoredStep>,
    ) -> u64 {
        self.commit(key, expected_version, meta, steps)
            .await
            .unwrap_or_else(|err| panic!("commit to {key} at version {expected_version}: {err}"))
    }

    async fn load(&self, key: &SessionKey) -> Option<StoredSession> {
        self.store
            .load(key)
            .await
            .unwrap_or_else(|err| panic!("load {key} failed: {err}"))
    }

    async fn load_some(&self, key: &SessionKey) -> StoredSession {
        self.load(key)
            .await
            .unwrap_or_else(|| panic!("session {key} should exist"))
    }

    fn assert_conflict(result: Result<u64, SessionStoreError>, what: &str) {
        assert!(
            matches!(result, Err(SessionStoreError::Conflict { .. })),
            "{what} should conflict, got {result:?}"
        );
    }

    async fn a_session_never_committed_loads_as_none(&self) {
        let key = self.key("never:committed");
        assert_eq!(self.load(&key).await, None, "load of a missing session");
        let result = self.commit(&key, 5, r#"{"m":1}"#, vec![]).await;
        Self::assert_conflict(result, "a commit expecting version 5 of a missing session");
        assert_eq!(
            self.load(&key).await,
            None,
            "a failed commit creates nothing"
        );
    }

    async fn creating_with_version_zero_works_once_then_conflicts(&self) {
        let key = self.key("create:once");
        let version = self
            .commit_ok(&key, 0, r#"{"m":"first"}"#, vec![step(1, r#"{"s":1}"#)])
            .await;
        assert_eq!(version, 1, "creating a session yields version 1");
        let second = self
            .commit(&key, 0, r#"{"m":"second"}"#, vec![step(2, r#"{"s":2}"#)])
            .await;
        Self::assert_conflict(second, "a second create");
        let session = self.load_some(&key).await;
        assert_eq!(
            session,
            StoredSession {
                version: 1,
                meta: r#"{"m":"first"}"#.into(),
                steps: vec![step(1, r#"{"s":1}"#)],
            },
            "the first create stands, untouched by the second"
        );
    }

    async fn each_commit_increments_the_version_by_one(&self) {
        let key = self.key("versions");
        let mut expected = 0;
        for round in 1..=4u64 {
            let meta = format!(r#"{{"round":{round}}}"#);
            let version = self
                .commit_ok(&key, expected, &meta, vec![step(round, "{}")])
                .await;
            assert_eq!(
                version,
                expected + 1,
                "commit {round} returns the next version"
            );
            let session = self.load_some(&key).await;
            assert_eq!(
                session.version, version,
                "load reports the committed version"
            );
            assert_eq!(session.meta, meta, "load reports the latest meta");
            expected = version;
        }
        let meta_only = self
            .commit_ok(&key, expected, r#"{"round":"meta only"}"#, vec![])
            .await;
        assert_eq!(meta_only, 5, "a commit without steps still increments");
        assert_eq!(seqs_of(&self.load_some(&key).await), vec![1, 2, 3, 4]);
    }

    async fn a_stale_version_conflicts_and_writes_nothing(&self) {
        let key = self.key("stale");
        self.commit_ok(&key, 0, r#"{"v":1}"#, vec![step(10, "{}")])
            .await;
        self.commit_ok(&key, 1, r#"{"v":2}"#, vec![step(11, "{}")])
            .await;
        let before = self.load_some(&key).await;
        for expected in [0, 1, 3, 99] {
            let result = self
                .commit(
                    &key,
                    expected,
                    r#"{"v":"stale"}"#,
                    vec![step(12, r#"{"stale":true}"#), step(13, "{}")],
                )
                .await;
            Self::assert_conflict(
                result,
                &format!("a commit expecting version {expected} of 2"),
            );
            assert_eq!(
                self.load_some(&key).await,
                before,
                "a conflicting commit (expected {expected}) writes neither meta nor steps"
            );
        }
    }

    async fn an_existing_step_seq_conflicts_and_writes_nothing(&self) {
        let key = self.key("duplicate:seq");
        self.commit_ok(&key, 0, r#"{"v":1}"#, vec![step(10, r#"{"original":10}"#)])
            .await;
        let before = self.load_some(&key).await;
        let result = self
            .commit(
                &key,
                1,
                r#"{"v":"dup"}"#,
                vec![step(11, "{}"), step(10, r#"{"overwrite":10}"#)],
            )
            .await;
        Self::assert_conflict(result, "a commit re-using seq 10");
        assert_eq!(
            self.load_some(&key).await,
            before,
            "a commit with an existing seq writes neither meta nor its other steps"
        );
        let result = self
            .commit(
                &key,
                1,
                r#"{"v":"twice"}"#,
                vec![step(12, r#"{"a":1}"#), step(12, r#"{"b":2}"#)],
            )
            .await;
        Self::assert_conflict(result, "a commit carrying seq 12 twice");
        assert_eq!(
            self.load_some(&key).await,
            before,
            "a commit carrying one seq twice writes nothing"
        );
        let version = self
            .commit_ok(&key, 1, r#"{"v":2}"#, vec![step(11, "{}")])
            .await;
        assert_eq!(version, 2, "the session is still writable at its version");
    }

    async fn steps_load_in_numeric_seq_order(&self) {
        // Chosen so that text order (100 < 11 < 9) differs from numeric order, and written
        // out of order within and across commits.
        let key = self.key("order");
        self.commit_ok(
            &key,
            0,
            "{}",
            vec![step(100, "100"), step(9, "9"), step(10, "10")],
        )
        .await;
        self.commit_ok(
            &key,
            1,
            "{}",
            vec![
                step(1_000_000_000_000, "1e12"),
                step(11, "11"),
                step(99, "99"),
                step(1000, "1000"),
            ],
        )
        .await;
        let session = self.load_some(&key).await;
        assert_eq!(
            seqs_of(&session),
            vec![9, 10, 11, 99, 100, 1000, 1_000_000_000_000],
            "steps come back in numeric seq order"
        );
        for loaded in &session.steps {
            let expected = if loaded.seq == 1_000_000_000_000 {
                "1e12".to_owned()
            } else {
                loaded.seq.to_string()
            };
            assert_eq!(loaded.body, expected, "step {} keeps its body", loaded.seq);
        }
    }

    async fn sessions_are_isolated_by_key(&self) {
        // `group:4` is a prefix of `group:42`, and `main` a prefix of `main:thread:1`; the
        // last key has characters that need care in object keys and URLs.
        let keys = [
            self.key("main"),
            self.key("generic:group:42"),
            self.key("generic:group:4"),
            self.key("main:thread:1"),
            self.key("generic:direct:+1 555/ünï%2f..\\x"),
        ];
        for (index, key) in keys.iter().enumerate() {
            let meta = format!(r#"{{"session":{index}}}"#);
            let steps = (1..=3)
                .map(|seq| step(seq, format!(r#"{{"session":{index},"seq":{seq}}}"#)))
                .collect();
            self.commit_ok(key, 0, &meta, steps).await;
        }
        for (index, key) in keys.iter().enumerate() {
            let session = self.load_some(key).await;
            assert_eq!(session.version, 1, "{key} has its own version");
            assert_eq!(
                session.meta,
                format!(r#"{{"session":{index}}}"#),
                "{key} meta"
            );
            let bodies: Vec<_> = session.steps.iter().map(|step| step.body.clone()).collect();
            let expected: Vec<_> = (1..=3)
                .map(|seq| format!(r#"{{"session":{index},"seq":{seq}}}"#))
                .collect();
            assert_eq!(bodies, expected, "{key} sees only its own steps");
        }
        // A commit to one session does not move another's version.
        self.commit_ok(&keys[1], 1, r#"{"session":"moved"}"#, vec![])
            .await;
        assert_eq!(self.load_some(&keys[2]).await.version, 1);
        assert_eq!(self.load_some(&keys[0]).await.version, 1);
        assert_eq!(self.load(&self.key("generic:group")).await, None);
    }

    async fn a_commit_of_99_steps_is_written_whole(&self) {
        let key = self.key("many:steps");
        let steps: Vec<_> = (1..=99)
            .map(|seq| step(seq, format!(r#"{{"seq":{seq}}}"#)))
            .collect();
        let version = self.commit_ok(&key, 0, "{}", steps.clone()).await;
        assert_eq!(version, 1);
        assert_eq!(
            self.load_some(&key).await.steps,
            steps,
            "all 99 steps, in order"
        );
    }

    async fn concurrent_commits_on_one_version_have_exactly_one_winner(&self) {
        const WRITERS: u64 = 8;
        let key = self.key("race");
        self.commit_ok(&key, 0, r#"{"writer":"creator"}"#, vec![step(1, "{}")])
            .await;
        let attempts = (0..WRITERS)
            .map(|writer| {
                let key = &key;
                Box::pin(async move {
                    let meta = format!(r#"{{"writer":{writer}}}"#);
                    let steps = vec![step(100 + writer, format!(r#"{{"writer":{writer}}}"#))];
                    self.commit(key, 1, &meta, steps).await
                }) as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<Result<u64, SessionStoreError>> = join_all(attempts).await;
        let winners: Vec<u64> = (0..WRITERS)
            .zip(&results)
            .filter(|(_, result)| result.is_ok())
            .map(|(writer, _)| writer)
            .collect();
        assert_eq!(winners.len(), 1, "exactly one writer wins: {results:?}");
        for result in &results {
            assert!(
                matches!(result, Ok(2) | Err(SessionStoreError::Conflict { .. })),
                "the winner gets version 2, the others conflict: {results:?}"
            );
        }
        let winner = winners[0];
        let session = self.load_some(&key).await;
        assert_eq!(session.version, 2);
        assert_eq!(
            session.meta,
            format!(r#"{{"writer":{winner}}}"#),
            "the winner's meta"
        );
        assert_eq!(
            seqs_of(&session),
            vec![1, 100 + winner],
            "only the winner's step was written"
        );
    }

    async fn bodies_up_to_the_record_limit_round_trip_byte_exact(&self) {
        let limit = self.store.max_record_bytes();
        let key = self.key("large");
        let meta = sized_json_body("meta at the limit", limit);
        let big_step = sized_json_body("step at the limit", limit);
        let small_step = sized_json_body("small", 64);
        assert_eq!((meta.len(), big_step.len()), (limit, limit));
        self.commit_ok(
            &key,
            0,
            &meta,
            vec![step(1, big_step.clone()), step(2, small_step.clone())],
        )
        .await;
        let session = self.load_some(&key).await;
        assert!(
            session.meta == meta,
            "meta of {limit} bytes must round-trip byte-exact"
        );
        assert_eq!(seqs_of(&session), vec![1, 2]);
        assert!(
            session.steps[0].body == big_step,
            "a step of {limit} bytes must round-trip byte-exact"
        );
        assert_eq!(session.steps[1].body, small_step);
        let unicode = r#"{"text":"ünïcödé 文件 🦀 \" \\ \n \u2028 \t"}"#;
        self.commit_ok(&key, 1, unicode, vec![step(3, unicode)])
            .await;
        let session = self.load_some(&key).await;
        assert_eq!(session.meta, unicode);
        assert_eq!(session.steps[2].body, unicode);
    }

    async fn a_body_over_the_record_limit_is_too_large_and_writes_nothing(&self) {
        let limit = self.store.max_record_bytes();
        let key = self.key("too:large");
        let over = sized_json_body("over the limit", limit + 1);
        let result = self.commit(&key, 0, &over, vec![]).await;
        assert!(
            matches!(result, Err(SessionStoreError::TooLarge { bytes, .. }) if bytes == limit + 1),
            "meta of {} bytes is TooLarge, got {result:?}",
            limit + 1
        );
        assert_eq!(self.load(&key).await, None, "nothing was created");
        self.commit_ok(&key, 0, "{}", vec![step(1, "{}")]).await;
        let before = self.load_some(&key).await;
        let result = self
            .commit(&key, 1, r#"{"v":2}"#, vec![step(2, "{}"), step(3, over)])
            .await;
        assert!(
            matches!(result, Err(SessionStoreError::TooLarge { .. })),
            "a step over the limit is TooLarge, got {result:?}"
        );
        assert_eq!(
            self.load_some(&key).await,
            before,
            "nothing of the commit was written"
        );
    }
}

/// Runs the [`Inbox`] contract against `inbox`, panicking with a description of the first
/// broken expectation. Event ids are unique to this call, so the inbox may be shared; times
/// are around the real current time, as a TTL-managed table expects.
pub async fn inbox_contract(inbox: &dyn Inbox) {
    let suite = InboxContract {
        inbox,
        run: run_label("inbox"),
        now: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1_700_000_000, |elapsed| elapsed.as_secs()),
    };
    suite.a_first_claim_wins_and_a_second_is_a_duplicate().await;
    suite
        .a_claim_expires_after_its_ttl_and_can_be_claimed_again()
        .await;
    suite.a_ttl_is_rounded_up_to_whole_seconds().await;
    suite.a_released_claim_can_be_claimed_again().await;
    suite.event_ids_are_independent().await;
    suite.concurrent_claims_have_exactly_one_winner().await;
}

struct InboxContract<'a> {
    inbox: &'a dyn Inbox,
    run: String,
    now: u64,
}

const MINUTE: Duration = Duration::from_secs(60);

impl InboxContract<'_> {
    fn id(&self, name: &str) -> String {
        format!("{}:{name}", self.run)
    }

    async fn claim(&self, id: &str, ttl: Duration, now: u64) -> Claim {
        self.inbox
            .claim(id, ttl, now)
            .await
            .unwrap_or_else(|err| panic!("claim {id:?} at {now} failed: {err}"))
    }

    async fn release(&self, id: &str) {
        self.inbox
            .release(id)
            .await
            .unwrap_or_else(|err| panic!("release {id:?} failed: {err}"));
    }

    async fn a_first_claim_wins_and_a_second_is_a_duplicate(&self) {
        let id = self.id("once");
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Claimed);
        assert_eq!(
            self.claim(&id, MINUTE, self.now).await,
            Claim::Duplicate,
            "the same id again"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 30).await,
            Claim::Duplicate,
            "the same id later within the TTL"
        );
    }

    async fn a_claim_expires_after_its_ttl_and_can_be_claimed_again(&self) {
        let id = self.id("expiring");
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Claimed);
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 60).await,
            Claim::Duplicate,
            "a claim holds through its last second"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 61).await,
            Claim::Claimed,
            "an expired claim can be claimed again"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 62).await,
            Claim::Duplicate,
            "the renewed claim holds"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 121).await,
            Claim::Duplicate,
            "the renewed claim runs from its own time"
        );
    }

    async fn a_ttl_is_rounded_up_to_whole_seconds(&self) {
        let id = self.id("rounded");
        let ttl = Duration::from_millis(1500);
        assert_eq!(self.claim(&id, ttl, self.now).await, Claim::Claimed);
        assert_eq!(self.claim(&id, ttl, self.now + 2).await, Claim::Duplicate);
        assert_eq!(self.claim(&id, ttl, self.now + 3).await, Claim::Claimed);
    }

    async fn a_released_claim_can_be_claimed_again(&self) {
        let id = self.id("released");
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Claimed);
        self.release(&id).await;
        assert_eq!(
            self.claim(&id, MINUTE, self.now).await,
            Claim::Claimed,
            "a released claim is free"
        );
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Duplicate);
        self.release(&self.id("never-claimed")).await;
        self.release(&id).await;
        self.release(&id).await;
    }

    async fn event_ids_are_independent(&self) {
        let ids = [
            self.id("42"),
            self.id("4"),
            self.id("420"),
            self.id("Ev0 ünï/x"),
        ];
        for id in &ids {
            assert_eq!(
                self.claim(id, MINUTE, self.now).await,
                Claim::Claimed,
                "{id}"
            );
        }
        for id in &ids {
            assert_eq!(
                self.claim(id, MINUTE, self.now).await,
                Claim::Duplicate,
                "{id}"
            );
        }
        self.release(&ids[0]).await;
        assert_eq!(
            self.claim(&ids[1], MINUTE, self.now).await,
            Claim::Duplicate
        );
        assert_eq!(self.claim(&ids[0], MINUTE, self.now).await, Claim::Claimed);
    }

    async fn concurrent_claims_have_exactly_one_winner(&self) {
        let id = self.id("race");
        let attempts = (0..8)
            .map(|_| {
                let id = id.as_str();
                Box::pin(async move { self.inbox.claim(id, MINUTE, self.now).await })
                    as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<Result<Claim, InboxError>> = join_all(attempts).await;
        let claimed = results
            .iter()
            .filter(|result| matches!(result, Ok(Claim::Claimed)))
            .count();
        let duplicates = results
            .iter()
            .filter(|result| matches!(result, Ok(Claim::Duplicate)))
            .count();
        assert_eq!(
            (claimed, duplicates),
            (1, 7),
            "exactly one concurrent claim wins: {results:?}"
        );
    }
}

/// Visibility timeout of the queues most queue checks use: longer than any check runs, so a
/// message in flight stays in flight.
pub const CONTRACT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(30);

/// Visibility timeout of the queue the redelivery check uses.
pub const CONTRACT_SHORT_VISIBILITY_TIMEOUT: Duration = Duration::from_secs(2);

/// How a queue backend may knowingly differ from SQS FIFO in [`turn_queue_contract`]. Each
/// field relaxes one documented expectation; the default relaxes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueDeviations {
    /// The backend forgets a deduplication id as soon as its message is deleted, instead of
    /// for five minutes after the send. `moto_server` (5.x) does: it deduplicates only
    /// against messages still in the queue. With this set, the contract still checks that a
    /// repeat is dropped while the first is queued or in flight, but not after deletion.
    pub dedup_forgets_deleted_messages: bool,
}

/// Runs the [`TurnQueue`] contract, panicking with a description of the first broken
/// expectation. Takes about 20 seconds: it waits for visibility timeouts and release delays.
///
/// `fresh_queue(visibility_timeout)` must return an empty queue of its own whose messages
/// stay invisible for `visibility_timeout` after a receive (whole seconds are enough: the
/// suite asks for [`CONTRACT_VISIBILITY_TIMEOUT`] and [`CONTRACT_SHORT_VISIBILITY_TIMEOUT`]).
/// `deviations` names what the backend knowingly does differently from SQS FIFO.
pub async fn turn_queue_contract<F, Fut>(fresh_queue: F, deviations: QueueDeviations)
where
    F: Fn(Duration) -> Fut,
    Fut: Future<Output = Box<dyn TurnQueue>>,
{
    let suite = QueueContract {
        run: run_label("queue"),
        deviations,
    };
    let long = CONTRACT_VISIBILITY_TIMEOUT;
    suite
        .an_empty_queue_waits_then_returns_nothing(&*fresh_queue(long).await)
        .await;
    suite
        .messages_of_one_group_arrive_in_send_order(&*fresh_queue(long).await)
        .await;
    suite
        .a_group_in_flight_is_held_back_until_deleted_or_released(&*fresh_queue(long).await)
        .await;
    suite
        .a_held_back_group_does_not_block_other_groups(&*fresh_queue(long).await)
        .await;
    suite
        .a_repeated_dedup_id_is_dropped(&*fresh_queue(long).await)
        .await;
    suite
        .a_released_message_returns_after_its_delay_with_a_higher_count(&*fresh_queue(long).await)
        .await;
    suite
        .an_unacknowledged_message_returns_after_the_visibility_timeout(
            &*fresh_queue(CONTRACT_SHORT_VISIBILITY_TIMEOUT).await,
        )
        .await;
    suite
        .a_waiting_receive_returns_when_a_message_arrives(&*fresh_queue(long).await)
        .await;
    suite
        .odd_groups_dedup_ids_and_bodies_round_trip_exactly(&*fresh_queue(long).await)
        .await;
}

struct QueueContract {
    run: String,
    deviations: QueueDeviations,
}

/// Long enough for a long poll to find a message that is there.
const FIND_WAIT: Duration = Duration::from_secs(5);

/// How long a receive waits before the suite concludes that nothing is deliverable.
const NOTHING_WAIT: Duration = Duration::from_secs(1);

impl QueueContract {
    /// A session-key-like group unique to this run.
    fn group(&self, rest: &str) -> String {
        format!("agent:{}:{rest}", self.run)
    }

    fn dedup(&self, name: &str) -> String {
        format!("{}-{name}", self.run)
    }

    async fn send(&self, queue: &dyn TurnQueue, group: &str, dedup: &str, body: &str) {
        let message = QueuedMessage {
            group: group.to_owned(),
            dedup_id: self.dedup(dedup),
            body: body.to_owned(),
        };
        queue
            .send(&message)
            .await
            .unwrap_or_else(|err| panic!("send {body:?} to {group:?} failed: {err}"));
    }

    async fn receive(queue: &dyn TurnQueue, max: usize, wait: Duration) -> Vec<Delivery> {
        queue
            .receive(max, wait)
            .await
            .unwrap_or_else(|err| panic!("receive failed: {err}"))
    }

    async fn receive_one(queue: &dyn TurnQueue, what: &str) -> Delivery {
        let mut deliveries = Self::receive(queue, 1, FIND_WAIT).await;
        assert_eq!(deliveries.len(), 1, "expected {what}, got {deliveries:?}");
        deliveries.remove(0)
    }

    async fn expect_nothing(queue: &dyn TurnQueue, why: &str) {
        let deliveries = Self::receive(queue, 10, NOTHING_WAIT).await;
        assert!(deliveries.is_empty(), "{why}, but got {deliveries:?}");
    }

    async fn delete(queue: &dyn TurnQueue, delivery: &Delivery) {
        queue
            .delete(&delivery.receipt)
            .await
            .unwrap_or_else(|err| panic!("delete {:?} failed: {err}", delivery.body));
    }

    async fn release(queue: &dyn TurnQueue, delivery: &Delivery, delay: Duration) {
        queue
            .release(&delivery.receipt, delay)
            .await
            .unwrap_or_else(|err| panic!("release {:?} failed: {err}", delivery.body));
    }

    /// Receives and deletes until `count` messages came, in arrival order.
    async fn drain(queue: &dyn TurnQueue, count: usize) -> Vec<Delivery> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut received = Vec::new();
        while received.len() < count {
            assert!(
                Instant::now() < deadline,
                "only {} of {count} messages arrived: {received:?}",
                received.len()
            );
            for delivery in Self::receive(queue, 10, Duration::from_secs(2)).await {
                Self::delete(queue, &delivery).await;
                received.push(delivery);
            }
        }
        assert_eq!(
            received.len(),
            count,
            "more messages than sent: {received:?}"
        );
        received
    }

    fn bodies(deliveries: &[Delivery]) -> Vec<&str> {
        deliveries
            .iter()
            .map(|delivery| delivery.body.as_str())
            .collect()
    }

    async fn an_empty_queue_waits_then_returns_nothing(&self, queue: &dyn TurnQueue) {
        let started = Instant::now();
        let deliveries = Self::receive(queue, 10, NOTHING_WAIT).await;
        assert!(deliveries.is_empty(), "an empty queue delivers nothing");
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "a receive on an empty queue waits for `wait` (returned after {:?})",
            started.elapsed()
        );
    }

    async fn messages_of_one_group_arrive_in_send_order(&self, queue: &dyn TurnQueue) {
        let group = self.group("main");
        let sent: Vec<String> = (0..12).map(|index| format!(r#"{{"n":{index}}}"#)).collect();
        for (index, body) in sent.iter().enumerate() {
            self.send(queue, &group, &format!("order-{index}"), body)
                .await;
        }
        let received = Self::drain(queue, sent.len()).await;
        assert_eq!(
            Self::bodies(&received),
            sent,
            "one group arrives in send order"
        );
        for delivery in &received {
            assert_eq!(delivery.group, group, "deliveries name their group");
            assert_eq!(
                delivery.receive_count, 1,
                "first delivery of {:?}",
                delivery.body
            );
        }
        Self::expect_nothing(queue, "deleted messages are gone").await;
    }

    async fn a_group_in_flight_is_held_back_until_deleted_or_released(
        &self,
        queue: &dyn TurnQueue,
    ) {
        let group = self.group("generic:group:42");
        self.send(queue, &group, "held-1", "g1").await;
        self.send(queue, &group, "held-2", "g2").await;
        let first = Self::receive_one(queue, "the group's first message").await;
        assert_eq!((first.body.as_str(), first.receive_count), ("g1", 1));
        Self::expect_nothing(queue, "g2 must wait while g1 is in flight").await;
        Self::delete(queue, &first).await;
        let second = Self::receive_one(queue, "g2 once g1 is deleted").await;
        assert_eq!(second.body, "g2");

        self.send(queue, &group, "held-3", "g3").await;
        Self::expect_nothing(queue, "g3 must wait while g2 is in flight").await;
        Self::release(queue, &second, Duration::ZERO).await;
        let again = Self::receive_one(queue, "g2 again after its release").await;
        assert_eq!(
            (again.body.as_str(), again.receive_count),
            ("g2", 2),
            "a released message comes back before later ones of its group"
        );
        Self::delete(queue, &again).await;
        let third = Self::receive_one(queue, "g3 once g2 is deleted").await;
        assert_eq!((third.body.as_str(), third.receive_count), ("g3", 1));
        Self::delete(queue, &third).await;
        Self::expect_nothing(queue, "every message was deleted").await;
    }

    async fn a_held_back_group_does_not_block_other_groups(&self, queue: &dyn TurnQueue) {
        let a = self.group("generic:group:4");
        let b = self.group("generic:group:42");
        self.send(queue, &a, "a1", "a1").await;
        self.send(queue, &a, "a2", "a2").await;
        self.send(queue, &b, "b1", "b1").await;
        self.send(queue, &b, "b2", "b2").await;
        let first = Self::receive_one(queue, "the head of one group").await;
        let (blocked, blocked_next, other, other_bodies) = if first.group == a {
            assert_eq!(first.body, "a1", "a group's head comes first");
            (&a, "a2", &b, ["b1", "b2"])
        } else {
            assert_eq!(
                (first.group.as_str(), first.body.as_str()),
                (b.as_str(), "b1")
            );
            (&b, "b2", &a, ["a1", "a2"])
        };
        // With `first` in flight, the other group still flows, in its own order.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut flowed = Vec::new();
        while flowed.len() < 2 {
            assert!(
                Instant::now() < deadline,
                "the other group is stuck: {flowed:?}"
            );
            for delivery in Self::receive(queue, 10, Duration::from_secs(2)).await {
                assert_eq!(
                    &delivery.group, other,
                    "nothing of {blocked} while {:?} is in flight: {delivery:?}",
                    first.body
                );
                Self::delete(queue, &delivery).await;
                flowed.push(delivery);
            }
        }
        assert_eq!(Self::bodies(&flowed), other_bodies);
        Self::delete(queue, &first).await;
        let rest = Self::drain(queue, 1).await;
        assert_eq!(Self::bodies(&rest), vec![blocked_next]);
    }

    async fn a_repeated_dedup_id_is_dropped(&self, queue: &dyn TurnQueue) {
        let group = self.group("main");
        let other = self.group("generic:group:7");
        self.send(queue, &group, "same", "first").await;
        self.send(queue, &group, "same", "repeat while queued")
            .await;
        self.send(queue, &other, "same", "same id, other group")
            .await;
        self.send(queue, &group, "different", "second").await;
        let received = Self::drain(queue, 2).await;
        assert_eq!(
            Self::bodies(&received),
            vec!["first", "second"],
            "a repeated dedup id is dropped queue-wide"
        );
        Self::expect_nothing(queue, "repeats were dropped").await;

        self.send(queue, &group, "in-flight", "third").await;
        let third = Self::receive_one(queue, "third").await;
        self.send(queue, &group, "in-flight", "repeat while in flight")
            .await;
        Self::delete(queue, &third).await;
        Self::expect_nothing(queue, "a repeat of a message in flight was dropped").await;

        if !self.deviations.dedup_forgets_deleted_messages {
            self.send(queue, &group, "same", "repeat after delete")
                .await;
            Self::expect_nothing(
                queue,
                "a dedup id is remembered for five minutes, even after its message is deleted",
            )
            .await;
        }
    }

    async fn a_released_message_returns_after_its_delay_with_a_higher_count(
        &self,
        queue: &dyn TurnQueue,
    ) {
        let group = self.group("main");
        self.send(queue, &group, "retry", "retry me").await;
        let first = Self::receive_one(queue, "the message").await;
        assert_eq!(first.receive_count, 1);
        Self::release(queue, &first, Duration::ZERO).await;
        let second = Self::receive_one(queue, "the message after a release without delay").await;
        assert_eq!(
            (second.body.as_str(), second.receive_count),
            ("retry me", 2)
        );

        let delay = Duration::from_secs(3);
        Self::release(queue, &second, delay).await;
        let released_at = Instant::now();
        Self::expect_nothing(queue, "a message released with a delay stays hidden").await;
        let third = Self::receive(queue, 1, Duration::from_secs(10)).await;
        assert_eq!(third.len(), 1, "the message returns after its delay");
        assert!(
            released_at.elapsed() >= delay - Duration::from_millis(500),
            "it came back after {:?}, before the {delay:?} delay",
            released_at.elapsed()
        );
        assert_eq!(
            (third[0].body.as_str(), third[0].receive_count),
            ("retry me", 3)
        );
        Self::delete(queue, &third[0]).await;
        Self::expect_nothing(queue, "a deleted message is gone").await;
    }

    async fn an_unacknowledged_message_returns_after_the_visibility_timeout(
        &self,
        queue: &dyn TurnQueue,
    ) {
        let group = self.group("main");
        self.send(queue, &group, "forgotten", "forgotten").await;
        let first = Self::receive_one(queue, "the message").await;
        let received_at = Instant::now();
        let again = Self::receive(queue, 1, Duration::from_secs(10)).await;
        assert_eq!(
            again.len(),
            1,
            "an unacknowledged message is delivered again"
        );
        assert!(
            received_at.elapsed() >= CONTRACT_SHORT_VISIBILITY_TIMEOUT - Duration::from_millis(500),
            "it came back after {:?}, inside the visibility timeout",
            received_at.elapsed()
        );
        assert_eq!(
            (again[0].body.as_str(), again[0].receive_count),
            ("forgotten", 2)
        );
        assert_eq!(first.body, again[0].body);
        Self::delete(queue, &again[0]).await;
        let after = Self::receive(
            queue,
            10,
            CONTRACT_SHORT_VISIBILITY_TIMEOUT + Duration::from_secs(1),
        )
        .await;
        assert!(
            after.is_empty(),
            "a deleted message never comes back: {after:?}"
        );
    }

    async fn a_waiting_receive_returns_when_a_message_arrives(&self, queue: &dyn TurnQueue) {
        let group = self.group("main");
        let started = Instant::now();
        let receiver =
            Box::pin(async move { Some(Self::receive(queue, 1, Duration::from_secs(15)).await) })
                as Pin<Box<dyn Future<Output = Option<Vec<Delivery>>> + Send + '_>>;
        let group_ref = group.as_str();
        let sender = Box::pin(async move {
            sleep(Duration::from_millis(500)).await;
            self.send(queue, group_ref, "late", "late").await;
            None
        }) as Pin<Box<dyn Future<Output = Option<Vec<Delivery>>> + Send + '_>>;
        let mut outputs = join_all(vec![receiver, sender]).await;
        let received = outputs.remove(0).unwrap_or_default();
        assert_eq!(Self::bodies(&received), vec!["late"]);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "a waiting receive returns once a message arrives, not at the end of its wait \
             (took {:?})",
            started.elapsed()
        );
        Self::delete(queue, &received[0]).await;
    }

    async fn odd_groups_dedup_ids_and_bodies_round_trip_exactly(&self, queue: &dyn TurnQueue) {
        // Longer than SQS's 128-character ids, with characters SQS does not allow in them,
        // and differing only at the end.
        let stem = format!(
            "{}:generic:group:ünï code/{}",
            self.group("x"),
            "x".repeat(140)
        );
        let groups = [format!("{stem}-1"), format!("{stem}-2")];
        let dedup_stem = format!("Ev ünï/{}", "d".repeat(140));
        let bodies = [
            sized_json_body("first body", 64 * 1024),
            sized_json_body("second body", 1000),
        ];
        for (index, (group, body)) in groups.iter().zip(&bodies).enumerate() {
            self.send(queue, group, &format!("{dedup_stem}-{index}"), body)
                .await;
        }
        let mut received = Self::drain(queue, 2).await;
        received.sort_by(|left, right| left.group.cmp(&right.group));
        for ((delivery, group), body) in received.iter().zip(&groups).zip(&bodies) {
            assert_eq!(&delivery.group, group, "the group comes back exactly");
            assert!(&delivery.body == body, "the body comes back byte-exact");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_memory_session_store_passes_the_session_store_contract() {
        let store = InMemorySessionStore::new();
        session_store_contract(&store, SessionStoreDeviations::default()).await;
        assert!(store.largest_record_bytes() >= IN_MEMORY_MAX_RECORD_BYTES);
    }

    #[tokio::test]
    async fn in_memory_session_store_passes_the_contract_at_a_small_record_limit() {
        session_store_contract(
            &InMemorySessionStore::with_max_record_bytes(300),
            SessionStoreDeviations::default(),
        )
        .await;
    }

    #[tokio::test]
    async fn in_memory_inbox_passes_the_inbox_contract() {
        inbox_contract(&InMemoryInbox::new()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_memory_turn_queue_passes_the_turn_queue_contract() {
        turn_queue_contract(
            |visibility| async move {
                Box::new(InMemoryTurnQueue::with_timeouts(visibility, DEDUP_WINDOW))
                    as Box<dyn TurnQueue>
            },
            QueueDeviations::default(),
        )
        .await;
    }

    #[tokio::test]
    async fn the_in_memory_queue_forgets_a_dedup_id_after_its_window() {
        // GIVEN a queue with a short deduplication window
        let queue =
            InMemoryTurnQueue::with_timeouts(Duration::from_secs(30), Duration::from_millis(50));
        let message = |body: &str| QueuedMessage {
            group: "agent:main:main".into(),
            dedup_id: "update-1".into(),
            body: body.into(),
        };
        queue.send(&message("first")).await.unwrap();
        queue.send(&message("dropped")).await.unwrap();
        assert_eq!(queue.len(), 1);
        // WHEN the window has passed THEN the same id is accepted again
        sleep(Duration::from_millis(80)).await;
        queue.send(&message("accepted")).await.unwrap();
        assert_eq!(queue.len(), 2);
    }

    #[tokio::test]
    async fn stale_receipts_do_nothing() {
        // GIVEN a message received twice (released in between)
        let queue = InMemoryTurnQueue::new();
        let message = QueuedMessage {
            group: "g".into(),
            dedup_id: "d".into(),
            body: "b".into(),
        };
        queue.send(&message).await.unwrap();
        let first = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
        queue.release(&first.receipt, Duration::ZERO).await.unwrap();
        let second = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
        // WHEN the first receipt is used THEN nothing happens; the current one works
        queue.delete(&first.receipt).await.unwrap();
        assert_eq!(queue.len(), 1, "a stale receipt deletes nothing");
        queue.delete(&second.receipt).await.unwrap();
        assert!(queue.is_empty());
    }

    #[test]
    fn sized_bodies_have_exactly_the_requested_length() {
        for len in [40, 41, 42, 43, 44, 100, 1000, 65_536] {
            let body = sized_json_body("x", len);
            assert_eq!(body.len(), len);
            let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(parsed["label"], "x");
        }
    }

    #[tokio::test]
    async fn in_memory_store_passes_the_object_store_contract() {
        let store = InMemoryObjectStore::new();
        object_store_contract(&store).await;
        assert!(
            store.keys().is_empty(),
            "the contract cleans up after itself"
        );
    }

    #[tokio::test]
    async fn in_memory_store_passes_the_contract_when_shared_by_concurrent_runs() {
        // GIVEN one store shared by two suites running at once
        let store = InMemoryObjectStore::new();
        // WHEN both run interleaved THEN neither sees the other's keys
        tokio::join!(object_store_contract(&store), object_store_contract(&store));
    }

    #[tokio::test]
    async fn in_memory_if_absent_race_has_exactly_one_winner() {
        object_store_if_absent_race(&InMemoryObjectStore::new(), 8).await;
    }

    #[tokio::test]
    async fn clones_share_objects_and_identity_but_new_stores_do_not() {
        let store = InMemoryObjectStore::new();
        let handle = store.clone();
        store.insert("skills/a/SKILL.md", "a").unwrap();
        assert_eq!(handle.keys(), vec!["skills/a/SKILL.md".to_owned()]);
        assert_eq!(handle.identity(), store.identity());

        let other = InMemoryObjectStore::new();
        assert_ne!(other.identity(), store.identity());
        assert_eq!(other.head("skills/a/SKILL.md").await.unwrap(), None);
        assert_eq!(
            store.location("skills/a/SKILL.md"),
            format!("{}/skills/a/SKILL.md", store.identity())
        );
    }

    #[tokio::test]
    async fn rewriting_identical_bytes_still_yields_a_fresh_etag() {
        let store = InMemoryObjectStore::named("etags");
        let first = store.insert("k", "same").unwrap();
        let second = store.insert("k", "same").unwrap();
        assert_ne!(first.etag, second.etag);
        assert_eq!(store.location("k"), "mem://etags/k");
    }
}

/// Counts the `list` and `get` calls that reach a wrapped in-memory store (tests of caches).
#[derive(Debug)]
pub struct CountingObjectStore {
    inner: Arc<InMemoryObjectStore>,
    lists: AtomicUsize,
    gets: AtomicUsize,
}

impl CountingObjectStore {
    /// Wraps `inner` with both counters at zero.
    pub fn new(inner: Arc<InMemoryObjectStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            lists: AtomicUsize::new(0),
            gets: AtomicUsize::new(0),
        })
    }

    /// `(lists, gets)` since the last call, resetting both.
    pub fn take(&self) -> (usize, usize) {
        (
            self.lists.swap(0, Ordering::SeqCst),
            self.gets.swap(0, Ordering::SeqCst),
        )
    }

    /// The wrapped store, for writes the counters should not see.
    pub fn inner(&self) -> &InMemoryObjectStore {
        &self.inner
    }
}

#[async_trait]
impl ObjectStore for CountingObjectStore {
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        self.lists.fetch_add(1, Ordering::SeqCst);
        self.inner.list(prefix, max_keys).await
    }

    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key, max_bytes).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        self.inner.head(key).await
    }

    async fn put(
        &self,
        key: &str,
        bytes: Vec<u8>,
        condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        self.inner.put(key, bytes, condition).await
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await
    }

    fn location(&self, key: &str) -> String {
        self.inner.location(key)
    }

    fn key_for_location(&self, location: &str) -> Option<String> {
        self.inner.key_for_location(location)
    }

    fn identity(&self) -> String {
        self.inner.identity()
    }
}

// Node-host storage ports: fakes and contract suites live in `crate::nodes::testing`.
pub use crate::nodes::testing::*;
