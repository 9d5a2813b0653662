//! [`OffloadingSessionStore`]: keeps every session record small by moving large bodies to the
//! object store and leaving a pointer in their place.
//!
//! DynamoDB items stop at 400 KB and a transaction at 4 MB, while one tool result or model
//! response can be far larger. This wrapper sits in front of any [`SessionStore`]: on commit,
//! a meta or step body over the threshold is written to the [`ObjectStore`] first, and the
//! inner store receives a small JSON pointer instead; on load, pointers are hydrated with one
//! [`ObjectStore::get_many`]. It knows nothing of the backends on either side.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{SessionCommit, SessionKey, SessionStore, SessionStoreError, StoredSession};
use clawless_base::object_store::{ObjectStore, PutCondition, normalize_prefix};

/// Bodies larger than this go to the object store unless configured otherwise. At 32 KiB a
/// full DynamoDB commit (meta + 99 steps) stays under the 4 MB transaction limit.
pub const DEFAULT_THRESHOLD: usize = 32 * 1024;

/// Largest body the wrapper accepts (and reads back), unless configured otherwise.
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 16 * 1024 * 1024;

/// Every pointer starts with these bytes; so does every body the wrapper offloads whatever
/// its size, so that an inline body can never be mistaken for a pointer.
const POINTER_PREFIX: &str = "{\"$offloaded\":";

/// What the inner store holds in place of an offloaded body:
/// `{"$offloaded":"<object key>","bytes":<length>}`, in exactly this form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pointer {
    #[serde(rename = "$offloaded")]
    key: String,
    bytes: u64,
}

impl Pointer {
    /// The pointer `body` is, if it is exactly a pointer as [`Pointer::encode`] writes it.
    fn decode(body: &str) -> Option<Self> {
        if !body.starts_with(POINTER_PREFIX) {
            return None;
        }
        let pointer: Self = serde_json::from_str(body).ok()?;
        (pointer.encode().ok()? == body).then_some(pointer)
    }

    fn encode(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// A [`SessionStore`] that offloads large bodies to an [`ObjectStore`].
///
/// - **On commit**, a body is offloaded when it is longer than the threshold, or when it
///   starts with `{"$offloaded":` (whatever its size): that is how an inline body that merely
///   looks like a pointer is escaped. Blobs are written (concurrently, `IfAbsent`) before the
///   inner commit, at `<prefix><encoded session key>/steps/<seq:020>-<nonce>.json` and
///   `<prefix><encoded session key>/meta/<new version:020>-<nonce>.json`. The random nonce
///   keeps a writer that loses the version race from overwriting the winner's blob.
/// - **On load**, a body is a pointer only if it is exactly `{"$offloaded":"<key>","bytes":N}`
///   as this type writes it; every pointer of the session is read with one `get_many`, and a
///   missing blob or one of the wrong length is an error, never an empty body.
/// - Blobs of failed commits and of superseded metas stay behind, unreferenced; a bucket
///   lifecycle rule on the prefix (or a sweep) may remove them after a while.
///
/// The threshold defaults to [`DEFAULT_THRESHOLD`] and never exceeds the inner store's
/// [`max_record_bytes`](SessionStore::max_record_bytes). This store's own
/// `max_record_bytes` is the blob limit, [`DEFAULT_MAX_BLOB_BYTES`] by default.
#[derive(Debug, Clone)]
pub struct OffloadingSessionStore {
    inner: Arc<dyn SessionStore>,
    objects: Arc<dyn ObjectStore>,
    prefix: String,
    threshold: usize,
    max_blob_bytes: u64,
}

impl OffloadingSessionStore {
    /// Wraps `inner`, offloading to `objects` under `prefix` (normalised to end in `/`, e.g.
    /// `sessions/`).
    pub fn new(
        inner: Arc<dyn SessionStore>, objects: Arc<dyn ObjectStore>, prefix: impl AsRef<str>,
    ) -> Self {
        let threshold = DEFAULT_THRESHOLD.min(inner.max_record_bytes());
        Self {
            inner,
            objects,
            prefix: normalize_prefix(prefix.as_ref()),
            threshold,
            max_blob_bytes: DEFAULT_MAX_BLOB_BYTES,
        }
    }

    /// Offloads bodies longer than `threshold` bytes (capped at the inner store's limit).
    pub fn with_threshold(mut self, threshold: usize) -> Self {
        self.threshold = threshold.min(self.inner.max_record_bytes());
        self
    }

    /// Accepts and reads back bodies of up to `max_blob_bytes`.
    pub fn with_max_blob_bytes(mut self, max_blob_bytes: u64) -> Self {
        self.max_blob_bytes = max_blob_bytes;
        self
    }

    /// Bodies longer than this are offloaded.
    pub fn threshold(&self) -> usize {
        self.threshold
    }

    fn must_offload(&self, body: &str) -> bool {
        body.len() > self.threshold || body.starts_with(POINTER_PREFIX)
    }

    fn blob_limit(&self) -> usize {
        usize::try_from(self.max_blob_bytes).unwrap_or(usize::MAX)
    }

    /// Replaces `body` by a pointer to `object_key` if it must be offloaded, queueing the
    /// blob for writing.
    fn offload(
        &self, session: &SessionKey, body: &str, object_key: String,
        blobs: &mut Vec<(String, Vec<u8>)>,
    ) -> Result<String, SessionStoreError> {
        if !self.must_offload(body) {
            return Ok(body.to_owned());
        }
        if body.len() > self.blob_limit() {
            return Err(SessionStoreError::TooLarge {
                key: session.to_string(),
                bytes: body.len(),
                limit: self.blob_limit(),
            });
        }
        let pointer = Pointer {
            key: object_key.clone(),
            bytes: body.len() as u64,
        }
        .encode()
        .map_err(|err| SessionStoreError::unavailable("encoding a blob pointer failed", err))?;
        blobs.push((object_key, body.as_bytes().to_vec()));
        Ok(pointer)
    }
}

/// Escapes a session key into one object-key segment: bytes outside `[A-Za-z0-9_:-]` become
/// `%XX`, so `/`, `.`, spaces and non-ASCII can neither add segments nor collide.
fn encode_session_key(key: &SessionKey) -> String {
    let mut encoded = String::with_capacity(key.as_str().len());
    for byte in key.as_str().bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b':' | b'-') {
            encoded.push(char::from(byte));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            encoded.push('%');
            encoded.push(char::from(HEX[usize::from(byte >> 4)]));
            encoded.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
    encoded
}

/// 128 random bits as hex, from the standard library's per-process OS-seeded hasher keys.
fn nonce() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut halves = [0u64; 2];
    for (index, half) in halves.iter_mut().enumerate() {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u128(nanos);
        hasher.write_u64(count);
        hasher.write_usize(index);
        *half = hasher.finish();
    }
    format!("{:016x}{:016x}", halves[0], halves[1])
}

/// Where a pointer sits in a loaded session.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Meta,
    Step(usize),
}

impl OffloadingSessionStore {
    /// Replaces every pointer in a loaded session with the body it points to.
    async fn hydrate(
        &self, key: &SessionKey, mut session: StoredSession,
    ) -> Result<StoredSession, SessionStoreError> {
        let mut pointers: Vec<(Slot, Pointer)> = Vec::new();
        if let Some(pointer) = Pointer::decode(&session.meta) {
            pointers.push((Slot::Meta, pointer));
        }
        for (index, step) in session.steps.iter().enumerate() {
            if let Some(pointer) = Pointer::decode(&step.body) {
                pointers.push((Slot::Step(index), pointer));
            }
        }
        if pointers.is_empty() {
            return Ok(session);
        }
        let keys: Vec<String> = pointers.iter().map(|(_, ptr)| ptr.key.clone()).collect();
        let blobs = self.objects.get_many(&keys, self.max_blob_bytes).await;
        tracing::debug!(blobs = keys.len(), "hydrated offloaded bodies");
        for ((slot, pointer), blob) in pointers.into_iter().zip(blobs) {
            let corrupt = |what: &str| SessionStoreError::Unavailable {
                message: format!("session {key}: offloaded body {}: {what}", pointer.key),
                source: None,
            };
            let object = blob
                .map_err(|err| {
                    SessionStoreError::unavailable(
                        format!("session {key}: reading offloaded body {}", pointer.key),
                        err,
                    )
                })?
                .ok_or_else(|| corrupt("missing"))?;
            if object.bytes.len() as u64 != pointer.bytes {
                return Err(corrupt(&format!(
                    "{} bytes where {} were written",
                    object.bytes.len(),
                    pointer.bytes
                )));
            }
            let body = String::from_utf8(object.bytes).map_err(|err| {
                SessionStoreError::unavailable(
                    format!("session {key}: offloaded body {} is not UTF-8", pointer.key),
                    err,
                )
            })?;
            match slot {
                Slot::Meta => session.meta = body,
                Slot::Step(index) => {
                    if let Some(step) = session.steps.get_mut(index) {
                        step.body = body;
                    }
                }
            }
        }
        Ok(session)
    }
}

#[async_trait]
impl SessionStore for OffloadingSessionStore {
    #[tracing::instrument(level = "debug", skip_all, fields(session = %key))]
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        match self.inner.load(key).await? {
            Some(session) => self.hydrate(key, session).await.map(Some),
            None => Ok(None),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(session = %key))]
    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        match self.inner.load_live(key).await? {
            Some(session) => self.hydrate(key, session).await.map(Some),
            None => Ok(None),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(session = %key, steps = commit.steps.len()))]
    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        let base = format!("{}{}", self.prefix, encode_session_key(key));
        let nonce = nonce();
        let mut blobs = Vec::new();
        let meta_key = format!(
            "{base}/meta/{:020}-{nonce}.json",
            commit.expected_version.saturating_add(1)
        );
        let meta = self.offload(key, &commit.meta, meta_key, &mut blobs)?;
        let mut steps = Vec::with_capacity(commit.steps.len());
        for step in &commit.steps {
            let step_key = format!("{base}/steps/{:020}-{nonce}.json", step.seq);
            let body = self.offload(key, &step.body, step_key, &mut blobs)?;
            steps.push(super::StoredStep {
                seq: step.seq,
                body,
            });
        }
        if !blobs.is_empty() {
            tracing::debug!(blobs = blobs.len(), "offloading large bodies");
            let writes = blobs.into_iter().map(|(object_key, bytes)| async move {
                self.objects
                    .put(&object_key, bytes, PutCondition::IfAbsent)
                    .await
                    .map_err(|err| {
                        SessionStoreError::unavailable(
                            format!("session {key}: writing offloaded body {object_key}"),
                            err,
                        )
                    })
            });
            futures_util::future::try_join_all(writes).await?;
        }
        let inner_commit = SessionCommit {
            expected_version: commit.expected_version,
            meta,
            steps,
            live_from: commit.live_from,
            last_seq: commit.last_seq,
        };
        self.inner.commit(key, &inner_commit).await
    }

    fn max_record_bytes(&self) -> usize {
        self.blob_limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::StoredStep;
    use crate::testing::{
        InMemoryObjectStore, InMemorySessionStore, SessionStoreDeviations, session_store_contract,
        sized_json_body,
    };

    struct Fixture {
        inner: InMemorySessionStore,
        objects: InMemoryObjectStore,
        store: OffloadingSessionStore,
    }

    fn fixture(inner_limit: usize) -> Fixture {
        let inner = InMemorySessionStore::with_max_record_bytes(inner_limit);
        let objects = InMemoryObjectStore::new();
        let store = OffloadingSessionStore::new(
            Arc::new(inner.clone()),
            Arc::new(objects.clone()),
            "sessions",
        );
        Fixture {
            inner,
            objects,
            store,
        }
    }

    fn key(raw: &str) -> SessionKey {
        SessionKey::parse(raw).unwrap()
    }

    fn commit(expected_version: u64, meta: &str, steps: &[(u64, &str)]) -> SessionCommit {
        SessionCommit::new(
            expected_version,
            meta.to_owned(),
            steps
                .iter()
                .map(|(seq, body)| StoredStep {
                    seq: *seq,
                    body: (*body).to_owned(),
                })
                .collect(),
        )
    }

    #[tokio::test]
    async fn the_wrapper_passes_the_session_store_contract() {
        let fixture = fixture(350_000);
        let store = fixture.store.clone().with_max_blob_bytes(2 * 1024 * 1024);
        session_store_contract(&store, SessionStoreDeviations::default()).await;
        assert!(fixture.inner.largest_record_bytes() <= DEFAULT_THRESHOLD);
    }

    #[tokio::test]
    async fn a_one_megabyte_step_round_trips_while_the_inner_store_sees_only_small_bodies() {
        // GIVEN a wrapper over a store that holds at most 64 KiB per record
        let fixture = fixture(64 * 1024);
        let session = key("agent:main:generic:group:42");
        let big_step = sized_json_body("tool output", 1024 * 1024);
        let big_meta = sized_json_body("meta", 100 * 1024);

        // WHEN a 1 MB step and a 100 KB meta are committed
        let version = fixture
            .store
            .commit(
                &session,
                &commit(0, &big_meta, &[(1, "{}"), (2, &big_step), (3, "{}")]),
            )
            .await
            .unwrap();

        // THEN everything loads back byte-exact
        assert_eq!(version, 1);
        let loaded = fixture.store.load(&session).await.unwrap().unwrap();
        assert!(loaded.meta == big_meta);
        assert_eq!(loaded.steps.len(), 3);
        assert!(loaded.steps[1].body == big_step);
        assert_eq!(loaded.steps[0].body, "{}");
        // AND the inner store never held a body over the threshold
        assert!(fixture.inner.largest_record_bytes() <= DEFAULT_THRESHOLD);
        let raw = fixture.inner.load(&session).await.unwrap().unwrap();
        let pointer = Pointer::decode(&raw.steps[1].body).expect("the inner store holds a pointer");
        assert_eq!(pointer.bytes, 1024 * 1024);
        assert!(
            pointer
                .key
                .starts_with("sessions/agent:main:generic:group:42/steps/00000000000000000002-"),
            "{}",
            pointer.key
        );
        let keys = fixture.objects.keys();
        assert_eq!(
            keys.len(),
            2,
            "one blob for the step, one for the meta: {keys:?}"
        );
        assert!(
            keys.iter()
                .any(|key| key.contains("/meta/00000000000000000001-"))
        );
    }

    #[tokio::test]
    async fn inline_bodies_that_look_like_pointers_are_never_confused_with_one() {
        // GIVEN an object the attacker would like the session to read
        let fixture = fixture(64 * 1024);
        fixture.objects.insert("secret/key", "secret").unwrap();
        let session = key("agent:main:main");
        let forged = r#"{"$offloaded":"secret/key","bytes":6}"#;
        let almost = r#"{"$offloaded":"secret/key","bytes":6,"extra":1}"#;
        let spaced = r#"{ "$offloaded": "secret/key", "bytes": 6 }"#;

        // WHEN bodies shaped like pointers are committed as step content
        fixture
            .store
            .commit(
                &session,
                &commit(0, forged, &[(1, forged), (2, almost), (3, spaced)]),
            )
            .await
            .unwrap();

        // THEN they load back exactly as written
        let loaded = fixture.store.load(&session).await.unwrap().unwrap();
        assert_eq!(loaded.meta, forged);
        let bodies: Vec<_> = loaded.steps.iter().map(|step| step.body.as_str()).collect();
        assert_eq!(bodies, vec![forged, almost, spaced]);
        // AND those starting like a pointer were offloaded rather than stored inline
        let raw = fixture.inner.load(&session).await.unwrap().unwrap();
        assert_ne!(raw.meta, forged);
        assert_ne!(raw.steps[0].body, forged);
        assert_ne!(raw.steps[1].body, almost);
        assert_eq!(raw.steps[2].body, spaced, "not pointer-shaped: kept inline");
    }

    #[tokio::test]
    async fn bodies_written_without_the_wrapper_that_are_not_exact_pointers_load_as_written() {
        let fixture = fixture(64 * 1024);
        let session = key("agent:main:main");
        let odd = r#"{"$offloaded":"secret/key","bytes":"six"}"#;
        fixture
            .inner
            .commit(&session, &commit(0, "{}", &[(1, odd)]))
            .await
            .unwrap();
        let loaded = fixture.store.load(&session).await.unwrap().unwrap();
        assert_eq!(loaded.steps[0].body, odd);
    }

    #[tokio::test]
    async fn a_missing_or_truncated_blob_is_an_error_not_an_empty_body() {
        let fixture = fixture(64 * 1024);
        let session = key("agent:main:main");
        let big = sized_json_body("big", 40 * 1024);
        fixture
            .store
            .commit(&session, &commit(0, "{}", &[(1, &big)]))
            .await
            .unwrap();
        let blob = fixture.objects.keys().remove(0);

        fixture.objects.insert(&blob, "short").unwrap();
        let err = fixture.store.load(&session).await.unwrap_err();
        assert!(err.to_string().contains("unavailable"), "{err}");

        fixture.objects.delete(&blob).await.unwrap();
        let err = fixture.store.load(&session).await.unwrap_err();
        assert!(
            matches!(err, SessionStoreError::Unavailable { .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_writer_that_loses_the_race_does_not_overwrite_the_winners_blob() {
        // GIVEN two writers committing large steps with the same seq on the same version
        let fixture = fixture(64 * 1024);
        let session = key("agent:main:main");
        fixture
            .store
            .commit(&session, &commit(0, "{}", &[]))
            .await
            .unwrap();
        let first = sized_json_body("first writer", 50 * 1024);
        let second = sized_json_body("second writer", 50 * 1024);

        // WHEN the first wins and the second commits (and fails) afterwards
        fixture
            .store
            .commit(&session, &commit(1, "{}", &[(2, &first)]))
            .await
            .unwrap();
        let lost = fixture
            .store
            .commit(&session, &commit(1, "{}", &[(2, &second)]))
            .await;

        // THEN the loser conflicts and the winner's content is intact
        assert!(
            matches!(lost, Err(SessionStoreError::Conflict { .. })),
            "{lost:?}"
        );
        let loaded = fixture.store.load(&session).await.unwrap().unwrap();
        assert!(loaded.steps[0].body == first);
    }

    #[tokio::test]
    async fn a_body_over_the_blob_limit_is_too_large_before_anything_is_written() {
        let fixture = fixture(64 * 1024);
        let store = fixture.store.clone().with_max_blob_bytes(100 * 1024);
        let session = key("agent:main:main");
        let huge = sized_json_body("huge", 100 * 1024 + 1);
        let result = store
            .commit(&session, &commit(0, "{}", &[(1, "{}"), (2, &huge)]))
            .await;
        assert!(
            matches!(result, Err(SessionStoreError::TooLarge { bytes, limit, .. }) if bytes == 100 * 1024 + 1 && limit == 100 * 1024),
            "{result:?}"
        );
        assert!(fixture.objects.keys().is_empty());
        assert_eq!(store.load(&session).await.unwrap(), None);
        assert_eq!(store.max_record_bytes(), 100 * 1024);
    }

    #[test]
    fn the_threshold_never_exceeds_the_inner_limit() {
        let fixture = fixture(1000);
        assert_eq!(fixture.store.threshold(), 1000);
        assert_eq!(fixture.store.clone().with_threshold(5000).threshold(), 1000);
        assert_eq!(fixture.store.clone().with_threshold(10).threshold(), 10);
        let roomy = self::fixture(1 << 20);
        assert_eq!(roomy.store.threshold(), DEFAULT_THRESHOLD);
    }

    #[test]
    fn session_keys_become_one_valid_object_key_segment() {
        let cases = [
            ("agent:main:main", "agent:main:main"),
            ("agent:main:generic:group:42", "agent:main:generic:group:42"),
            (
                "agent:main:generic:direct:+1 555/../ünï",
                "agent:main:generic:direct:%2B1%20555%2F%2E%2E%2F%C3%BCn%C3%AF",
            ),
            ("agent:main:x%2f", "agent:main:x%252f"),
        ];
        for (raw, expected) in cases {
            let encoded = encode_session_key(&key(raw));
            assert_eq!(encoded, expected);
            clawless_base::object_store::validate_key(&format!("sessions/{encoded}/steps/1.json"))
                .unwrap();
        }
    }

    #[test]
    fn pointers_are_recognised_only_in_their_exact_form() {
        let pointer = Pointer {
            key: "sessions/a/steps/1.json".into(),
            bytes: 42,
        };
        let encoded = pointer.encode().unwrap();
        assert_eq!(
            encoded,
            r#"{"$offloaded":"sessions/a/steps/1.json","bytes":42}"#
        );
        assert_eq!(Pointer::decode(&encoded), Some(pointer));
        for not_a_pointer in [
            r#"{"bytes":42,"$offloaded":"sessions/a/steps/1.json"}"#,
            r#"{"$offloaded":"sessions/a/steps/1.json","bytes":42} "#,
            r#"{"$offloaded":"sessions/a/steps/1.json","bytes":42.0}"#,
            r#"{"$offloaded":"sessions/a/steps/1.json"}"#,
            r#"{"$offloaded": "sessions/a/steps/1.json","bytes":42}"#,
        ] {
            assert_eq!(Pointer::decode(not_a_pointer), None, "{not_a_pointer}");
        }
    }

    #[test]
    fn nonces_differ() {
        let nonces: std::collections::HashSet<_> = (0..1000).map(|_| nonce()).collect();
        assert_eq!(nonces.len(), 1000);
        assert!(nonces.iter().all(|nonce| nonce.len() == 32));
    }
}
