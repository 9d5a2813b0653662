//! In-memory [`ObjectStore`] fakes: [`InMemoryObjectStore`], the faithful fake the core's
//! tests use, and [`CountingObjectStore`], which counts the `list`/`get` calls reaching it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;

use crate::object_store::{
    Listing, Object, ObjectMeta, ObjectStore, PutCondition, StoreError, key_below_root,
    validate_key,
};
use crate::testing::next_id;

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
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
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
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{object_store_contract, object_store_if_absent_race};

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
