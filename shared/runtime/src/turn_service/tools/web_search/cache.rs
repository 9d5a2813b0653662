//! `web_search`'s result cache, in the state store's blobs (the blob bucket in AWS,
//! `.clawless/blobs` locally), so it holds across Lambda invocations and `clawless local`
//! restarts, and stays out of the agent's workspace. One object per entry, named by a 128-bit FNV-1a
//! hash of the lower-cased cache key, holding `{key, stored_at_ms, payload}`; the key is
//! compared on read, so a hash collision is a miss, never a wrong answer. An entry older than
//! the TTL is ignored (and overwritten by the fresh result). Failures to read or write are
//! logged and treated as misses: the cache never fails a search.

use clawless_base::object_store::{ObjectStore, PutCondition};
use serde_json::{Value, json};

/// Where entries go in the blob store.
pub(super) const CACHE_PREFIX: &str = "cache/web_search/";
/// Bytes of an entry read at most.
const MAX_ENTRY_BYTES: u64 = 8 * 1024 * 1024;

/// The cache over one store, at one time.
pub(super) struct SearchCache<'a> {
    pub store: &'a dyn ObjectStore,
    /// Where entries go in the store ([`CACHE_PREFIX`]; ends in `/` or is empty).
    pub prefix: &'a str,
    pub now_ms: u64,
    /// Entries older than this are stale; 0 disables the cache.
    pub ttl_ms: u64,
}

impl SearchCache<'_> {
    /// The payload stored under `key` (case-insensitive), if fresh.
    pub(super) async fn get(&self, key: &str) -> Option<Value> {
        if self.ttl_ms == 0 {
            return None;
        }
        let key = key.to_lowercase();
        let object = match self
            .store
            .get(&self.object_key(&key), MAX_ENTRY_BYTES)
            .await
        {
            Ok(Some(object)) => object,
            Ok(None) => return None,
            Err(error) => {
                tracing::warn!(%error, "web_search: cache unreadable; searching afresh");
                return None;
            }
        };
        let mut entry: Value = serde_json::from_slice(&object.bytes).ok()?;
        let stored_at = entry.get("stored_at_ms").and_then(Value::as_u64)?;
        let fresh = self.now_ms.saturating_sub(stored_at) < self.ttl_ms;
        (fresh && entry.get("key").and_then(Value::as_str) == Some(key.as_str()))
            .then(|| entry.get_mut("payload").map(Value::take))
            .flatten()
    }

    /// Stores `payload` under `key` (case-insensitive), replacing what was there.
    pub(super) async fn put(&self, key: &str, payload: &Value) {
        if self.ttl_ms == 0 {
            return;
        }
        let key = key.to_lowercase();
        let entry = json!({"key": key, "stored_at_ms": self.now_ms, "payload": payload});
        let bytes = match serde_json::to_vec(&entry) {
            Ok(bytes) => bytes,
            Err(error) => {
                tracing::warn!(%error, "web_search: result not cached");
                return;
            }
        };
        if let Err(error) = self
            .store
            .put(&self.object_key(&key), bytes, PutCondition::Always)
            .await
        {
            tracing::warn!(%error, "web_search: result not cached");
        }
    }

    fn object_key(&self, lower_key: &str) -> String {
        format!(
            "{}{:032x}.json",
            self.prefix,
            fnv1a_128(lower_key.as_bytes())
        )
    }
}

/// FNV-1a, 128-bit: stable across builds and processes, unlike the standard hasher.
fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;
    bytes.iter().fold(OFFSET, |hash, byte| {
        (hash ^ u128::from(*byte)).wrapping_mul(PRIME)
    })
}

#[cfg(test)]
mod tests {
    use clawless_core::testing::InMemoryObjectStore;

    use super::*;

    #[tokio::test]
    async fn an_entry_is_found_by_any_case_until_it_expires() {
        let store = InMemoryObjectStore::new();
        let cache = |now_ms| SearchCache {
            store: &store,
            prefix: CACHE_PREFIX,
            now_ms,
            ttl_ms: 1_000,
        };
        cache(10_000).put("brave:Rust", &json!({"n": 1})).await;
        assert_eq!(cache(10_500).get("BRAVE:rust").await, Some(json!({"n": 1})));
        assert_eq!(cache(11_000).get("brave:rust").await, None, "expired");
        assert_eq!(cache(10_500).get("brave:go").await, None);
        let listed = store.list("cache/web_search/", 10).await.expect("lists");
        assert_eq!(listed.objects.len(), 1);
    }

    #[tokio::test]
    async fn a_zero_ttl_neither_reads_nor_writes() {
        let store = InMemoryObjectStore::new();
        let cache = SearchCache {
            store: &store,
            prefix: "",
            now_ms: 1,
            ttl_ms: 0,
        };
        cache.put("k", &json!(1)).await;
        assert_eq!(cache.get("k").await, None);
        assert!(store.list("", 10).await.expect("lists").objects.is_empty());
    }

    #[test]
    fn the_hash_is_stable() {
        assert_eq!(fnv1a_128(b""), 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d);
        assert_ne!(fnv1a_128(b"a"), fnv1a_128(b"b"));
    }
}
