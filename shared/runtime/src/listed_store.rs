//! Reads that trust a fresh listing: an object absent from it is not requested, and one whose
//! ETag matches a cached copy is served from memory.
//!
//! A warm turn lists its skill sources once (one request); in the conventional layout that
//! listing also covers the agent's workspace, so the bootstrap files (AGENTS.md, SOUL.md, …)
//! cost no further request unless one changed. The cache lives as long as the warm process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use clawless_base::object_store::{
    Listing, Object, ObjectMeta, ObjectStore, PutCondition, StoreError,
};

/// Most objects kept; the cache is cleared when it would grow past this.
const MAX_CACHED_OBJECTS: usize = 512;

/// Objects read through a [`ListedStore`], by store identity and key.
#[derive(Debug, Default)]
pub struct ObjectCache {
    objects: Mutex<HashMap<(String, String), Object>>,
}

impl ObjectCache {
    fn lookup(&self, identity: &str, meta: &ObjectMeta) -> Option<Object> {
        let objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        objects
            .get(&(identity.to_owned(), meta.key.clone()))
            .filter(|object| object.meta.etag == meta.etag)
            .cloned()
    }

    fn keep(&self, identity: &str, object: &Object) {
        let mut objects = self.objects.lock().unwrap_or_else(PoisonError::into_inner);
        if objects.len() >= MAX_CACHED_OBJECTS {
            objects.clear();
        }
        objects.insert(
            (identity.to_owned(), object.meta.key.clone()),
            object.clone(),
        );
    }
}

/// A store seen through a complete listing of `prefix` taken moments ago.
#[derive(Debug)]
pub struct ListedStore {
    inner: Arc<dyn ObjectStore>,
    prefix: String,
    listing: Arc<Listing>,
    cache: Arc<ObjectCache>,
}

impl ListedStore {
    /// Wraps `inner`; `listing` must be a complete (untruncated) listing of `prefix`.
    pub fn new(
        inner: Arc<dyn ObjectStore>, prefix: &str, listing: Arc<Listing>, cache: Arc<ObjectCache>,
    ) -> Self {
        Self {
            inner,
            prefix: prefix.to_owned(),
            listing,
            cache,
        }
    }

    fn listed(&self, key: &str) -> Option<Option<&ObjectMeta>> {
        if !key.starts_with(&self.prefix) {
            return None;
        }
        let found = self
            .listing
            .objects
            .binary_search_by(|meta| meta.key.as_str().cmp(key))
            .ok()
            .map(|index| &self.listing.objects[index]);
        Some(found)
    }

    async fn read(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        let meta = match self.listed(key) {
            None => return self.inner.get(key, max_bytes).await,
            Some(None) => return Ok(None),
            Some(Some(meta)) => meta,
        };
        if meta.size > max_bytes {
            return Err(StoreError::TooLarge {
                key: key.to_owned(),
                size: meta.size,
                limit: max_bytes,
            });
        }
        let identity = self.inner.identity();
        if let Some(object) = self.cache.lookup(&identity, meta) {
            return Ok(Some(object));
        }
        let object = self.inner.get(key, max_bytes).await?;
        if let Some(object) = &object {
            self.cache.keep(&identity, object);
        }
        Ok(object)
    }
}

#[async_trait]
impl ObjectStore for ListedStore {
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        self.inner.list(prefix, max_keys).await
    }

    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        self.read(key, max_bytes).await
    }

    async fn get_many(
        &self, keys: &[String], max_bytes: u64,
    ) -> Vec<Result<Option<Object>, StoreError>> {
        futures_util::future::join_all(keys.iter().map(|key| self.read(key, max_bytes))).await
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

/// A store that calls `on_write` after every successful put or delete: the agent's workspace
/// as its tools see it, so that a file the agent writes is seen by the next turn even while
/// the skills listing (which also serves the bootstrap files) is within its refresh interval.
pub struct WriteWatchedStore {
    inner: Arc<dyn ObjectStore>,
    on_write: Box<dyn Fn() + Send + Sync>,
}

impl WriteWatchedStore {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ObjectStore>, on_write: impl Fn() + Send + Sync + 'static) -> Self {
        Self {
            inner,
            on_write: Box::new(on_write),
        }
    }
}

impl std::fmt::Debug for WriteWatchedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteWatchedStore")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ObjectStore for WriteWatchedStore {
    async fn list(&self, prefix: &str, max_keys: usize) -> Result<Listing, StoreError> {
        self.inner.list(prefix, max_keys).await
    }

    async fn get(&self, key: &str, max_bytes: u64) -> Result<Option<Object>, StoreError> {
        self.inner.get(key, max_bytes).await
    }

    async fn get_many(
        &self, keys: &[String], max_bytes: u64,
    ) -> Vec<Result<Option<Object>, StoreError>> {
        self.inner.get_many(keys, max_bytes).await
    }

    async fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StoreError> {
        self.inner.head(key).await
    }

    async fn put(
        &self, key: &str, bytes: Vec<u8>, condition: PutCondition,
    ) -> Result<ObjectMeta, StoreError> {
        let written = self.inner.put(key, bytes, condition).await?;
        (self.on_write)();
        Ok(written)
    }

    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        self.inner.delete(key).await?;
        (self.on_write)();
        Ok(())
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
    use clawless_core::testing::{CountingObjectStore, InMemoryObjectStore};

    use super::*;

    async fn listed(store: &Arc<CountingObjectStore>, cache: &Arc<ObjectCache>) -> ListedStore {
        let listing = store.inner().list("ws/", 1000).await.expect("list");
        let inner: Arc<dyn ObjectStore> = store.clone();
        ListedStore::new(inner, "ws/", Arc::new(listing), Arc::clone(cache))
    }

    fn gets(store: &CountingObjectStore) -> usize {
        store.take().1
    }

    #[tokio::test]
    async fn absent_objects_cost_nothing_and_unchanged_ones_come_from_the_cache() {
        let store = CountingObjectStore::new(Arc::new(InMemoryObjectStore::new()));
        store.inner().insert("ws/AGENTS.md", "v1").expect("insert");
        let cache = Arc::new(ObjectCache::default());

        // First turn: the listed file is read once, the missing one not at all.
        let first = listed(&store, &cache).await;
        let got = first
            .get("ws/AGENTS.md", 1024)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(got.bytes, b"v1");
        assert!(first.get("ws/SOUL.md", 1024).await.expect("get").is_none());
        assert_eq!(gets(&store), 1);

        // Next turn, nothing changed: served from the cache.
        let second = listed(&store, &cache).await;
        let again = second
            .get("ws/AGENTS.md", 1024)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(again.bytes, b"v1");
        assert_eq!(gets(&store), 0);

        // The file changes: its new ETag in the next listing forces a read.
        store.inner().insert("ws/AGENTS.md", "v2").expect("insert");
        let third = listed(&store, &cache).await;
        let changed = third
            .get("ws/AGENTS.md", 1024)
            .await
            .expect("get")
            .expect("exists");
        assert_eq!(changed.bytes, b"v2");
        assert_eq!(gets(&store), 1);

        // Keys outside the listed prefix go to the store as usual.
        assert!(third.get("elsewhere/x", 1024).await.expect("get").is_none());
        assert_eq!(gets(&store), 1);
    }

    #[tokio::test]
    async fn a_listed_object_over_the_limit_is_refused_without_reading_it() {
        let store = CountingObjectStore::new(Arc::new(InMemoryObjectStore::new()));
        store
            .inner()
            .insert("ws/big.md", vec![b'x'; 100])
            .expect("insert");
        let cache = Arc::new(ObjectCache::default());
        let view = listed(&store, &cache).await;
        let err = view.get("ws/big.md", 10).await.expect_err("too large");
        assert!(matches!(
            err,
            StoreError::TooLarge {
                size: 100,
                limit: 10,
                ..
            }
        ));
        assert_eq!(gets(&store), 0);
    }
}
