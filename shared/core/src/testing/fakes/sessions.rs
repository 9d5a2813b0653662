//! [`InMemorySessionStore`]: the in-memory [`SessionStore`] fake, with the same commit-shape
//! checks (record size, unique `seq`) every adapter applies.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::session::{
    SessionCommit, SessionKey, SessionLister, SessionStore, SessionStoreError, SessionSummary,
    StoredSession, StoredStep,
};
use crate::testing::lock_state;

/// Record limit of [`InMemorySessionStore::new`]: generous, but finite so that callers that
/// forget to offload large content fail in tests too.
pub const IN_MEMORY_MAX_RECORD_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone)]
struct MemSession {
    version: u64,
    meta: String,
    steps: BTreeMap<u64, String>,
    live_from: u64,
    last_seq: u64,
}

impl MemSession {
    fn stored(&self, from: u64) -> StoredSession {
        StoredSession {
            version: self.version,
            meta: self.meta.clone(),
            steps: self
                .steps
                .range(from..)
                .map(|(seq, body)| StoredStep {
                    seq: *seq,
                    body: body.clone(),
                })
                .collect(),
            live_from: from,
            last_seq: self.last_seq,
        }
    }
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
    key: &SessionKey, commit: &SessionCommit, max_record_bytes: usize,
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
        Ok(sessions.get(key.as_str()).map(|session| session.stored(0)))
    }

    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        let sessions = lock_state(&self.sessions);
        Ok(sessions
            .get(key.as_str())
            .map(|session| session.stored(session.live_from)))
    }

    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
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
                live_from: 0,
                last_seq: 0,
            });
        session.version = version;
        session.meta.clone_from(&commit.meta);
        for step in &commit.steps {
            session.steps.insert(step.seq, step.body.clone());
        }
        session.live_from = commit.live_from;
        session.last_seq = session.steps.keys().next_back().copied().unwrap_or(0);
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

#[async_trait]
impl SessionLister for InMemorySessionStore {
    async fn list_sessions(&self) -> Result<Vec<SessionSummary>, SessionStoreError> {
        let sessions = lock_state(&self.sessions);
        Ok(sessions
            .iter()
            .filter_map(|(key, session)| {
                Some(SessionSummary {
                    key: SessionKey::parse(key)?,
                    version: session.version,
                    meta: session.meta.clone(),
                })
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{SessionStoreDeviations, session_lister_contract, session_store_contract};

    #[tokio::test]
    async fn in_memory_session_store_passes_the_session_lister_contract() {
        let store = InMemorySessionStore::new();
        session_lister_contract(&store, &store).await;
    }

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
}
