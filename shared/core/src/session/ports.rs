//! Storage ports for sessions, inbox claims and the turn queue.
//!
//! Every adapter passes the same contract suites (`crate::testing::session_store_contract`,
//! `inbox_contract`, `turn_queue_contract`), so DynamoDB/SQS and SQLite behave alike.

use clawless_base::port_error::BoxError;

use std::time::Duration;

use async_trait::async_trait;

use super::SessionKey;

/// A persisted transcript step: its position and its JSON body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredStep {
    /// Position in the transcript, starting at 1, without gaps. Stores only check that a
    /// `seq` is new to its session; they return steps sorted by it, numerically.
    pub seq: u64,
    /// JSON document (the engine's `Step`), possibly a pointer to an offloaded blob.
    pub body: String,
}

/// A session as loaded: its meta at some version, and its steps in `seq` order: every step
/// for [`SessionStore::load`], the live part for [`SessionStore::load_live`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// Version of `meta`; each successful commit increments it by one. Starts at 1.
    pub version: u64,
    /// JSON document (the engine's `SessionMeta`).
    pub meta: String,
    /// Steps in ascending `seq`.
    pub steps: Vec<StoredStep>,
    /// The first `seq` the load asked for: 0 for a whole load, the committed
    /// [`SessionCommit::live_from`] for a live one. Earlier steps exist but were not read.
    pub live_from: u64,
    /// The transcript's last `seq` at this version (0 when it has no step yet), whether or
    /// not the load returned that step.
    pub last_seq: u64,
}

/// One atomic write: the new meta plus the steps appended since the last commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionCommit {
    /// The version the writer loaded; `0` creates the session and fails if it exists.
    pub expected_version: u64,
    /// The new meta document.
    pub meta: String,
    /// New steps; each `seq` must not exist yet, nor appear twice in the commit (either is a
    /// [`SessionStoreError::Conflict`]).
    pub steps: Vec<StoredStep>,
    /// Where the live part of the transcript starts after this commit: the first `seq`
    /// [`SessionStore::load_live`] returns (0 = from the start). Steps before it stay stored
    /// (archived generations, compacted history) and only [`SessionStore::load`] reads them.
    pub live_from: u64,
    /// The transcript's last `seq` once this commit is in (0 = no step yet). Stores that
    /// read a session's meta and steps in two requests bound the steps by it, so a load
    /// never mixes a meta with steps a later commit added.
    pub last_seq: u64,
}

impl SessionCommit {
    /// A commit of `meta` and `steps` over `expected_version`, with the whole transcript
    /// live and `last_seq` the largest `seq` in `steps` (right for a session's first commit
    /// and for any commit that carries the newest step).
    pub fn new(expected_version: u64, meta: String, steps: Vec<StoredStep>) -> Self {
        let last_seq = steps.iter().map(|step| step.seq).max().unwrap_or(0);
        Self {
            expected_version,
            meta,
            steps,
            live_from: 0,
            last_seq,
        }
    }

    /// The first `seq` that appears more than once in [`steps`](Self::steps), if any. Every
    /// adapter refuses such a commit as a [`SessionStoreError::Conflict`] before writing.
    pub fn repeated_seq(&self) -> Option<u64> {
        let mut seen = std::collections::HashSet::with_capacity(self.steps.len());
        self.steps
            .iter()
            .map(|step| step.seq)
            .find(|seq| !seen.insert(*seq))
    }
}

/// Failures of a [`SessionStore`].
#[derive(Debug, thiserror::Error)]
pub enum SessionStoreError {
    /// Another writer committed first (version moved on, or a step `seq` already exists).
    /// Nothing of the commit was written.
    #[error("session {key} changed concurrently (expected version {expected})")]
    Conflict {
        /// The session.
        key: String,
        /// The version the writer expected.
        expected: u64,
    },
    /// A document is larger than the adapter can hold in one record.
    #[error("session {key}: a record of {bytes} bytes exceeds the {limit}-byte limit")]
    TooLarge {
        /// The session.
        key: String,
        /// Size of the record.
        bytes: usize,
        /// The adapter's limit.
        limit: usize,
    },
    /// The adapter cannot write this commit in one atomic write, whatever other writers do:
    /// more steps or bytes than one transaction holds, or a session key or `seq` it cannot
    /// store. Nothing was written; retrying the same commit fails the same way.
    #[error("session {key}: commit rejected: {reason}")]
    Rejected {
        /// The session.
        key: String,
        /// What the adapter cannot do, with its limit.
        reason: String,
    },
    /// The backing service failed.
    #[error("session store unavailable: {message}")]
    Unavailable {
        /// Summary.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

impl SessionStoreError {
    /// Wraps an adapter error as [`SessionStoreError::Unavailable`].
    pub fn unavailable(
        message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

/// Sessions: meta with an optimistic version check, plus append-only transcript steps.
#[async_trait]
pub trait SessionStore: Send + Sync + std::fmt::Debug {
    /// Loads meta and all steps, or `None` for a session never committed. For operators and
    /// history views: a turn uses [`SessionStore::load_live`].
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError>;

    /// Loads meta and the live steps only: those from the last commit's
    /// [`SessionCommit::live_from`] to its [`SessionCommit::last_seq`], read as of one
    /// version. What it reads is bounded by the live part, not by the session's age.
    async fn load_live(&self, key: &SessionKey)
    -> Result<Option<StoredSession>, SessionStoreError>;

    /// Writes `commit` atomically: all of it or nothing. Returns the new version.
    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError>;

    /// Largest meta or step body, in bytes, the adapter stores inline. Larger bodies must be
    /// offloaded by the caller (see `crate::session::offload`).
    fn max_record_bytes(&self) -> usize;
}

/// One session as a listing shows it: its key, its meta's version and the meta document,
/// without the transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session.
    pub key: SessionKey,
    /// Version of `meta` (how many commits the session has had).
    pub version: u64,
    /// JSON document (the engine's `SessionMeta`), as stored: possibly a pointer to an
    /// offloaded blob, which a full [`SessionStore::load`] through the offloading wrapper
    /// hydrates.
    pub meta: String,
}

/// Every session of a store, for operators (`clawless sessions list`). Kept apart from
/// [`SessionStore`] because no turn ever lists sessions, and a listing may be far more
/// expensive than a load (on DynamoDB it scans the table).
#[async_trait]
pub trait SessionLister: Send + Sync + std::fmt::Debug {
    /// Every committed session, sorted by key. Items of other kinds the backing store holds
    /// beside sessions (inbox claims, nodes, jobs) never appear.
    async fn list_sessions(&self) -> Result<Vec<SessionSummary>, SessionStoreError>;
}

/// Outcome of claiming a platform event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// First time seen (or the earlier claim expired): process it.
    Claimed,
    /// Seen before within the TTL: drop it.
    Duplicate,
}

clawless_base::port_error!(
    /// Failures of an [`Inbox`].
    InboxError,
    "inbox unavailable"
);

/// When a claim made at `now_unix` with `ttl` expires: `ttl` is rounded up to whole seconds.
/// The claim holds through that second and expires after it. Every [`Inbox`] uses this, so a
/// claim made by one adapter expires when every other would say it does.
pub fn claim_expires_at(now_unix: u64, ttl: Duration) -> u64 {
    let ttl_secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
    now_unix.saturating_add(ttl_secs)
}

/// Deduplicates platform deliveries: each event id is claimed once per TTL.
#[async_trait]
pub trait Inbox: Send + Sync + std::fmt::Debug {
    /// Claims `event_id` until [`claim_expires_at`]`(now_unix, ttl)`, inclusive. A claim whose
    /// expiry is before `now_unix` has expired and may be claimed again.
    async fn claim(
        &self, event_id: &str, ttl: Duration, now_unix: u64,
    ) -> Result<Claim, InboxError>;

    /// Gives a claim back (the event could not be enqueued, so the platform's retry must pass).
    async fn release(&self, event_id: &str) -> Result<(), InboxError>;
}

/// A message for the turn queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    /// Ordering group: the session key. Messages of one group are delivered one at a time, in order.
    pub group: String,
    /// Deduplication id: a second send with the same id within the queue's window is dropped.
    pub dedup_id: String,
    /// JSON body (a `TurnEvent`).
    pub body: String,
}

/// A received message, invisible to other receivers until deleted or released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Handle for [`TurnQueue::delete`] / [`TurnQueue::release`].
    pub receipt: String,
    /// The message's group.
    pub group: String,
    /// The body as sent.
    pub body: String,
    /// How many times it has been received, this time included.
    pub receive_count: u32,
}

clawless_base::port_error!(
    /// Failures of a queue: the [`TurnQueue`], and the node ports'
    /// [`ExecQueue`](crate::nodes::ExecQueue) and [`Timers`](crate::timers::Timers).
    QueueError,
    "queue unavailable"
);

/// The FIFO turn queue: ordered per group, deduplicated by id, at-least-once delivery.
#[async_trait]
pub trait TurnQueue: Send + Sync + std::fmt::Debug {
    /// Enqueues a message.
    async fn send(&self, message: &QueuedMessage) -> Result<(), QueueError>;

    /// Receives up to `max` messages, waiting up to `wait` for the first. While a message of a
    /// group is in flight, no later message of that group is delivered.
    ///
    /// One batch may hold several messages of one group (SQS does this), always in order: a
    /// consumer handles a batch's messages of one group one after the other, and stops at the
    /// first it cannot finish (releasing it and those after it).
    async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<Delivery>, QueueError>;

    /// Acknowledges a delivery: it is never delivered again.
    async fn delete(&self, receipt: &str) -> Result<(), QueueError>;

    /// Makes a delivery visible again after `delay` so it is retried.
    async fn release(&self, receipt: &str, delay: Duration) -> Result<(), QueueError>;
}
