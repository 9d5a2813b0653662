//! [`DynamoSessionStore`] and [`DynamoInbox`]: the session store and inbox ports on one
//! DynamoDB table.
//!
//! Owns the table layout and the translation to DynamoDB's API: one `TransactWriteItems` per
//! commit, one strongly consistent (paginated) `Query` per load, one conditional `PutItem` per
//! claim, a filtered, paginated `Scan` per session listing (operators only), and the mapping of cancelled transactions and failed conditions to the ports'
//! errors. SDK errors are kept as the source.
//!
//! # Table layout
//!
//! One table, string keys `pk` (partition) and `sk` (sort), TTL attribute `expires_at`:
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | session meta | session key, e.g. `agent:main:main` | `tail` (`meta` when written before single-query loads) | `version` (N), `body` (S), `live_from` (N), `last_seq` (N) |
//! | transcript step | session key | `step#<seq, 20 digits>` | `body` (S) |
//! | inbox claim | `inbox#<event id>` | `claim` | `expires_at` (N, Unix seconds) |
//! | node | `nodes` | `node#<node id>` | see [`dynamo_nodes`](crate::dynamo_nodes) |
//! | pairing code | `pairing#<code hash>` | `code` | see [`dynamo_nodes`](crate::dynamo_nodes) |
//! | exec job | `job#<job id>` | `job` | see [`dynamo_nodes`](crate::dynamo_nodes) |
//! | cron job | `cron` | `job#<job id>` | see [`dynamo_cron`](crate::dynamo_cron) |
//! | cron run-log head | `cron` | `runlog#<job id>` | see [`dynamo_cron`](crate::dynamo_cron) |
//! | cron run-log line | `cronruns#<job id>` | `run#<seq, 20 digits>` | see [`dynamo_cron`](crate::dynamo_cron) |
//!
//! Session keys always start with `agent:`, so they never meet the `inbox#`, `nodes`,
//! `pairing#`, `job#`, `cron` or `cronruns#` items. Zero-padded
//! step keys sort numerically, before `tail`, so one `Query` by `pk` returns every step in
//! `seq` order and the meta last. A turn reads only the live part, in one request: a
//! consistent, descending `Query` from `tail` that returns the meta and then the newest steps,
//! sized by what the process saw of the session last time, and continued only until it has
//! passed the meta's `live_from`; what it reads does not grow with the session's age. A meta
//! still at `meta` (written before) is read with a `GetItem` and a range `Query` as before, and
//! the session's next commit moves it to `tail` (a `Delete` on its version and a `Put`, in the
//! same transaction).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::delete_item::DeleteItemError;
use aws_sdk_dynamodb::operation::put_item::PutItemError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem};
use clawless_core::session::{
    Claim, Inbox, InboxError, SessionCommit, SessionKey, SessionLister, SessionStore,
    SessionStoreError, SessionSummary, StoredSession, StoredStep, claim_expires_at,
};
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

/// Partition key attribute.
pub(crate) const PK: &str = "pk";
/// Sort key attribute.
pub(crate) const SK: &str = "sk";
/// Sort key of a session's meta item as written before single-query loads: it sorts before
/// the steps. Still read; a commit moves it to [`TAIL_SK`].
const META_SK: &str = "meta";
/// Sort key of a session's meta item: it sorts after every step, so one descending `Query`
/// reads the meta and then the newest steps.
const TAIL_SK: &str = "tail";
/// Items a live load asks for per page when it knows nothing of the session.
const DEFAULT_LIVE_PAGE: i32 = 64;
/// Sessions whose live size a store remembers (a hint only; cleared when full).
const MAX_LIVE_HINTS: usize = 4_096;
/// Sort key prefix of a step item, followed by the zero-padded `seq`.
const STEP_SK_PREFIX: &str = "step#";
/// Sort key of an inbox claim.
const CLAIM_SK: &str = "claim";
/// Partition key prefix of an inbox claim, followed by the event id.
const INBOX_PK_PREFIX: &str = "inbox#";
/// The table's TTL attribute (Unix seconds).
pub const EXPIRES_AT: &str = "expires_at";

/// What we let one item grow to, well under DynamoDB's 400 KB item limit.
pub(crate) const ITEM_BUDGET: usize = 350_000;
/// Room reserved in [`ITEM_BUDGET`] for everything but the body: the partition key (at most
/// [`MAX_SESSION_KEY_BYTES`]), the sort key, attribute names and the version number.
const KEY_OVERHEAD: usize = 2_048;
/// Longest session key accepted, in UTF-8 bytes (DynamoDB allows 2048 for a partition key).
pub const MAX_SESSION_KEY_BYTES: usize = 1_024;
/// Steps one commit may carry: `TransactWriteItems` takes 100 actions, one is the meta.
pub const MAX_STEPS_PER_COMMIT: usize = 99;
/// Total bytes one commit may carry. DynamoDB caps a transaction at 4 MB; this leaves room
/// for keys and attribute names.
pub const MAX_COMMIT_BYTES: usize = 3_900_000;

// A record at the limit, with the longest key, stays well under DynamoDB's 400 KB items.
const _: () = assert!(ITEM_BUDGET - KEY_OVERHEAD + MAX_SESSION_KEY_BYTES + 100 < 400_000);

/// Attribute name placeholders shared by expressions.
pub(crate) const NAME_PK: &str = "#pk";
const NAME_VERSION: &str = "#version";
const NAME_SK: &str = "#sk";
const NAME_EXPIRES: &str = "#expires";

pub(crate) fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

pub(crate) fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

fn step_sk(seq: u64) -> String {
    format!("{STEP_SK_PREFIX}{seq:020}")
}

/// A session meta item's attributes besides its keys.
#[derive(Debug, Serialize, Deserialize)]
struct MetaItem {
    version: u64,
    body: String,
    /// Missing in items written before live loads: the whole transcript is live.
    #[serde(default)]
    live_from: u64,
    /// `None` for items written before live loads.
    last_seq: Option<u64>,
}

/// A transcript step item's attributes besides its keys.
#[derive(Debug, Serialize, Deserialize)]
struct StepItem {
    body: String,
}

/// The session store port on a DynamoDB table laid out as the [module docs](self) describe.
///
/// - **Commit** is one `TransactWriteItems`: the meta put is conditioned on
///   `attribute_not_exists(pk)` when creating (expected version 0) and on
///   `version = :expected` otherwise; each step put on `attribute_not_exists(pk)`. A failed
///   condition or a competing transaction cancels the whole write and is reported as
///   [`SessionStoreError::Conflict`].
/// - **Limits**, checked before any request: at most [`MAX_STEPS_PER_COMMIT`] steps and
///   [`MAX_COMMIT_BYTES`] in all per commit, and a session key of at most
///   [`MAX_SESSION_KEY_BYTES`] ([`SessionStoreError::Rejected`] otherwise); a meta or step
///   body of at most [`DynamoSessionStore::MAX_RECORD_BYTES`]
///   ([`SessionStoreError::TooLarge`] otherwise). Wrap the store in
///   [`OffloadingSessionStore`](clawless_core::session::offload::OffloadingSessionStore)
///   to hold larger content.
/// - **Load** is one strongly consistent `Query` on the session's partition, following
///   `LastEvaluatedKey` when a session exceeds DynamoDB's 1 MB page. **Live load** is one
///   consistent, descending `Query` from the tail meta through the steps back to its
///   `live_from` (steps after its `last_seq`, of a commit in flight, are left out); for a
///   session written before the meta moved to the tail, a `GetItem` of the meta and a `Query`
///   of the step keys between its `live_from` and `last_seq`.
#[derive(Debug, Clone)]
pub struct DynamoSessionStore {
    client: Client,
    table: String,
    /// What this process learned of each session it loaded.
    seen: Arc<Mutex<HashMap<String, SeenSession>>>,
}

/// What a live load from the tail found.
enum TailLoad {
    /// The session, its meta at the tail.
    Loaded(StoredSession),
    /// No session under the key.
    Absent,
    /// A session whose meta is still at the old key.
    Legacy,
}

/// What a store remembers of a session between its loads and commits.
#[derive(Debug, Clone, Copy, Default)]
struct SeenSession {
    /// Steps its last live load read (sizes the next load's first page).
    live_steps: usize,
    /// Its meta is still at the old sort key ([`META_SK`]): the next commit moves it.
    legacy: bool,
}

impl DynamoSessionStore {
    /// Largest meta or step body stored inline: a 350 000-byte item budget minus 2 048 bytes
    /// for keys, attribute names and the version.
    pub const MAX_RECORD_BYTES: usize = ITEM_BUDGET - KEY_OVERHEAD;

    /// A store on `table`, using `client` (built once per cold start).
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
            seen: Arc::default(),
        }
    }

    fn remember(&self, key: &SessionKey, seen: SeenSession) {
        let mut sessions = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() >= MAX_LIVE_HINTS && !sessions.contains_key(key.as_str()) {
            sessions.clear();
        }
        sessions.insert(key.to_string(), seen);
    }

    fn seen(&self, key: &SessionKey) -> SeenSession {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key.as_str())
            .copied()
            .unwrap_or_default()
    }

    /// The table this store reads and writes.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Checks the limits of one transaction before sending it.
    fn check_commit(key: &SessionKey, commit: &SessionCommit) -> Result<(), SessionStoreError> {
        let rejected = |reason: String| {
            Err(SessionStoreError::Rejected {
                key: key.to_string(),
                reason,
            })
        };
        if key.as_str().len() > MAX_SESSION_KEY_BYTES {
            return rejected(format!(
                "the session key has {} bytes; DynamoDB sessions allow {MAX_SESSION_KEY_BYTES}",
                key.as_str().len()
            ));
        }
        if commit.steps.len() > MAX_STEPS_PER_COMMIT {
            return rejected(format!(
                "{} steps in one commit; one DynamoDB transaction holds {MAX_STEPS_PER_COMMIT}",
                commit.steps.len()
            ));
        }
        let bodies =
            std::iter::once(&commit.meta).chain(commit.steps.iter().map(|step| &step.body));
        let mut total = 0usize;
        for body in bodies {
            if body.len() > Self::MAX_RECORD_BYTES {
                return Err(SessionStoreError::TooLarge {
                    key: key.to_string(),
                    bytes: body.len(),
                    limit: Self::MAX_RECORD_BYTES,
                });
            }
            total += body.len() + key.as_str().len() + 64;
        }
        if total > MAX_COMMIT_BYTES {
            return rejected(format!(
                "the commit carries {total} bytes; one DynamoDB transaction holds {MAX_COMMIT_BYTES}"
            ));
        }
        if commit.repeated_seq().is_some() {
            return Err(SessionStoreError::Conflict {
                key: key.to_string(),
                expected: commit.expected_version,
            });
        }
        Ok(())
    }

    /// The commit's transaction, and whether it moves a meta from the old key to the tail.
    fn transaction(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<(Vec<TransactWriteItem>, bool), SessionStoreError> {
        let built = |err| SessionStoreError::unavailable("building a DynamoDB transaction", err);
        let encoded = |err| SessionStoreError::unavailable("encoding a DynamoDB item", err);
        let meta = MetaItem {
            version: commit.expected_version.saturating_add(1),
            body: commit.meta.clone(),
            live_from: commit.live_from,
            last_seq: Some(
                commit
                    .steps
                    .iter()
                    .map(|step| step.seq)
                    .fold(commit.last_seq, u64::max),
            ),
        };
        // A meta still at the old key moves to the tail: deleted there on the version
        // condition, put at the tail on its absence (unless the transaction has no room for
        // the extra action; the next commit moves it then).
        let legacy = commit.expected_version > 0 && self.seen(key).legacy;
        let migrate = legacy && commit.steps.len() < MAX_STEPS_PER_COMMIT;
        let meta_sk = if legacy && !migrate { META_SK } else { TAIL_SK };
        let meta = Put::builder()
            .table_name(&self.table)
            .set_item(Some(to_item(&meta).map_err(encoded)?))
            .item(PK, s(key.as_str()))
            .item(SK, s(meta_sk));
        let meta = if commit.expected_version == 0 || migrate {
            meta.condition_expression(format!("attribute_not_exists({NAME_PK})"))
                .expression_attribute_names(NAME_PK, PK)
        } else {
            meta.condition_expression(format!("{NAME_VERSION} = :expected"))
                .expression_attribute_names(NAME_VERSION, "version")
                .expression_attribute_values(":expected", n(commit.expected_version))
        };
        let mut items = Vec::with_capacity(commit.steps.len() + 2);
        items.push(
            TransactWriteItem::builder()
                .put(meta.build().map_err(built)?)
                .build(),
        );
        if migrate {
            let old = Delete::builder()
                .table_name(&self.table)
                .key(PK, s(key.as_str()))
                .key(SK, s(META_SK))
                .condition_expression(format!("{NAME_VERSION} = :expected"))
                .expression_attribute_names(NAME_VERSION, "version")
                .expression_attribute_values(":expected", n(commit.expected_version))
                .build()
                .map_err(built)?;
            items.push(TransactWriteItem::builder().delete(old).build());
        }
        for step in &commit.steps {
            let item = StepItem {
                body: step.body.clone(),
            };
            let put = Put::builder()
                .table_name(&self.table)
                .set_item(Some(to_item(&item).map_err(encoded)?))
                .item(PK, s(key.as_str()))
                .item(SK, s(step_sk(step.seq)))
                .condition_expression(format!("attribute_not_exists({NAME_PK})"))
                .expression_attribute_names(NAME_PK, PK)
                .build()
                .map_err(built)?;
            items.push(TransactWriteItem::builder().put(put).build());
        }
        Ok((items, migrate))
    }
}

/// True when a cancelled transaction lost to another writer: a condition failed, or another
/// transaction held one of its items. Other reasons (throttling, validation) are failures.
fn cancelled_by_another_writer(err: &TransactWriteItemsError) -> bool {
    let TransactWriteItemsError::TransactionCanceledException(cancelled) = err else {
        return false;
    };
    let reasons = cancelled.cancellation_reasons();
    reasons.is_empty()
        || reasons.iter().any(|reason| {
            matches!(
                reason.code(),
                Some("ConditionalCheckFailed" | "TransactionConflict")
            )
        })
}

/// A DynamoDB item as the SDK hands it over.
pub(crate) type Item = HashMap<String, AttributeValue>;

/// True when a `PutItem` failed only because its condition did not hold.
pub(crate) fn put_condition_failed<R>(err: &SdkError<PutItemError, R>) -> bool {
    matches!(
        err,
        SdkError::ServiceError(context)
            if matches!(context.err(), PutItemError::ConditionalCheckFailedException(_))
    )
}

/// `Some(old item, if returned)` when an `UpdateItem` failed only because its condition did
/// not hold.
pub(crate) fn update_condition_failed<R>(
    err: &SdkError<UpdateItemError, R>,
) -> Option<Option<&Item>> {
    match err {
        SdkError::ServiceError(context) => match context.err() {
            UpdateItemError::ConditionalCheckFailedException(failed) => Some(failed.item()),
            _ => None,
        },
        _ => None,
    }
}

/// `Some(old item, if returned)` when a `DeleteItem` failed only because its condition did
/// not hold.
pub(crate) fn delete_condition_failed<R>(
    err: &SdkError<DeleteItemError, R>,
) -> Option<Option<&Item>> {
    match err {
        SdkError::ServiceError(context) => match context.err() {
            DeleteItemError::ConditionalCheckFailedException(failed) => Some(failed.item()),
            _ => None,
        },
        _ => None,
    }
}

/// The string attribute `name` of `item` (a key, mostly).
pub(crate) fn attribute_str<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name)?.as_s().ok().map(String::as_str)
}

impl DynamoSessionStore {
    fn corrupt(&self, key: &SessionKey, what: String) -> SessionStoreError {
        SessionStoreError::Unavailable {
            message: format!("DynamoDB session {key} in {}: {what}", self.table),
            source: None,
        }
    }

    fn meta_of(&self, key: &SessionKey, item: Item) -> Result<MetaItem, SessionStoreError> {
        from_item(item).map_err(|err| self.corrupt(key, format!("unreadable meta: {err}")))
    }

    /// The step stored in `item`, whose sort key is `sk`.
    fn step_of(
        &self, key: &SessionKey, sk: &str, item: Item,
    ) -> Result<StoredStep, SessionStoreError> {
        let seq = sk
            .strip_prefix(STEP_SK_PREFIX)
            .and_then(|seq| seq.parse::<u64>().ok())
            .ok_or_else(|| self.corrupt(key, format!("unreadable step key {sk:?}")))?;
        let step: StepItem = from_item(item)
            .map_err(|err| self.corrupt(key, format!("unreadable item {sk:?}: {err}")))?;
        Ok(StoredStep {
            seq,
            body: step.body,
        })
    }

    /// One consistent, paginated `Query` of the partition: every item (`steps` `None`), or
    /// the step keys from `steps.0` through `steps.1` only.
    async fn query_items(
        &self, key: &SessionKey, steps: Option<(u64, u64)>,
    ) -> Result<(Option<MetaItem>, Vec<StoredStep>), SessionStoreError> {
        let mut meta = None;
        let mut legacy = false;
        let mut found = Vec::new();
        let mut start_key = None;
        let mut pages = 0usize;
        loop {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_names(NAME_PK, PK)
                .expression_attribute_values(":pk", s(key.as_str()))
                .consistent_read(true)
                .set_exclusive_start_key(start_key.take());
            let query = match steps {
                None => query.key_condition_expression(format!("{NAME_PK} = :pk")),
                Some((from, to)) => query
                    .key_condition_expression(format!(
                        "{NAME_PK} = :pk AND {NAME_SK} BETWEEN :from AND :to"
                    ))
                    .expression_attribute_names(NAME_SK, SK)
                    .expression_attribute_values(":from", s(step_sk(from)))
                    .expression_attribute_values(":to", s(step_sk(to))),
            };
            let page = query.send().await.map_err(|err| {
                SessionStoreError::unavailable(
                    format!("DynamoDB Query of session {key} in {} failed", self.table),
                    err,
                )
            })?;
            pages += 1;
            for item in page.items.unwrap_or_default() {
                let sk = attribute_str(&item, SK).unwrap_or_default().to_owned();
                if sk == META_SK || sk == TAIL_SK {
                    if sk == META_SK {
                        legacy = true;
                    }
                    meta = Some(self.meta_of(key, item)?);
                } else if sk.starts_with(STEP_SK_PREFIX) {
                    found.push(self.step_of(key, &sk, item)?);
                }
            }
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() => start_key = Some(last),
                _ => break,
            }
        }
        tracing::debug!(pages, steps = found.len(), "queried session");
        if meta.is_some() {
            let mut seen = self.seen(key);
            seen.legacy = legacy;
            self.remember(key, seen);
        }
        Ok((meta, found))
    }

    /// A live load in one request for a session whose meta is at the tail: a consistent,
    /// descending `Query` from the tail that reads the meta, then the newest steps, until it
    /// has passed the meta's `live_from` (a further page only when the first was too small).
    /// The range also covers the old meta key, so a session that does not exist is known
    /// from the same request.
    async fn load_live_from_tail(&self, key: &SessionKey) -> Result<TailLoad, SessionStoreError> {
        let hint = self.seen(key).live_steps;
        let mut limit = match hint {
            0 => DEFAULT_LIVE_PAGE,
            known => i32::try_from(known + 16).unwrap_or(i32::MAX),
        };
        let mut meta: Option<MetaItem> = None;
        let mut newest_first: Vec<StoredStep> = Vec::new();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(format!(
                    "{NAME_PK} = :pk AND {NAME_SK} BETWEEN :first AND :tail"
                ))
                .expression_attribute_names(NAME_PK, PK)
                .expression_attribute_names(NAME_SK, SK)
                .expression_attribute_values(":pk", s(key.as_str()))
                .expression_attribute_values(":first", s(META_SK))
                .expression_attribute_values(":tail", s(TAIL_SK))
                .scan_index_forward(false)
                .consistent_read(true)
                .limit(limit)
                .set_exclusive_start_key(start_key.take())
                .send()
                .await
                .map_err(|err| {
                    SessionStoreError::unavailable(
                        format!("DynamoDB Query of session {key} in {} failed", self.table),
                        err,
                    )
                })?;
            for item in page.items.unwrap_or_default() {
                let sk = attribute_str(&item, SK).unwrap_or_default().to_owned();
                if sk == TAIL_SK {
                    meta = Some(self.meta_of(key, item)?);
                    continue;
                }
                if meta.is_none() {
                    // The newest item is a step or the old meta: written before the tail.
                    return Ok(TailLoad::Legacy);
                }
                if sk == META_SK {
                    return Err(self.corrupt(key, "a meta at both the old key and the tail".into()));
                }
                newest_first.push(self.step_of(key, &sk, item)?);
            }
            let Some(found) = &meta else {
                return Ok(TailLoad::Absent);
            };
            let passed = newest_first
                .last()
                .is_some_and(|step| step.seq <= found.live_from)
                || found.last_seq.is_some_and(|last| last < found.live_from);
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() && !passed => {
                    start_key = Some(last);
                    limit = limit.saturating_mul(2);
                }
                _ => break,
            }
        }
        let Some(meta) = meta else {
            return Ok(TailLoad::Absent);
        };
        let until = meta.last_seq.unwrap_or(u64::MAX);
        let mut steps: Vec<StoredStep> = newest_first
            .into_iter()
            .filter(|step| step.seq >= meta.live_from && step.seq <= until)
            .collect();
        steps.reverse();
        self.remember(
            key,
            SeenSession {
                live_steps: steps.len(),
                legacy: false,
            },
        );
        let last_seq = meta
            .last_seq
            .unwrap_or_else(|| steps.last().map_or(0, |step| step.seq));
        Ok(TailLoad::Loaded(StoredSession {
            version: meta.version,
            meta: meta.body,
            steps,
            live_from: meta.live_from,
            last_seq,
        }))
    }
}

#[async_trait]
impl SessionStore for DynamoSessionStore {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session = %key))]
    async fn load(&self, key: &SessionKey) -> Result<Option<StoredSession>, SessionStoreError> {
        let (meta, steps) = self.query_items(key, None).await?;
        let last_seq = steps.last().map_or(0, |step| step.seq);
        Ok(meta.map(|meta| StoredSession {
            version: meta.version,
            meta: meta.body,
            steps,
            live_from: 0,
            last_seq,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session = %key))]
    async fn load_live(
        &self, key: &SessionKey,
    ) -> Result<Option<StoredSession>, SessionStoreError> {
        match self.load_live_from_tail(key).await? {
            TailLoad::Loaded(stored) => return Ok(Some(stored)),
            TailLoad::Absent => return Ok(None),
            TailLoad::Legacy => {}
        }
        // A session written before the meta moved to the tail (or none): its meta, then the
        // steps it names.
        let item = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(key.as_str()))
            .key(SK, s(META_SK))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| {
                SessionStoreError::unavailable(
                    format!("DynamoDB GetItem of session {key} in {} failed", self.table),
                    err,
                )
            })?;
        let Some(item) = item.item else {
            return Ok(None);
        };
        let meta = self.meta_of(key, item)?;
        let mut seen = self.seen(key);
        seen.legacy = true;
        self.remember(key, seen);
        let until = meta.last_seq.unwrap_or(u64::MAX);
        let steps = if meta.live_from > until {
            Vec::new()
        } else {
            self.query_items(key, Some((meta.live_from, until)))
                .await?
                .1
        };
        let last_seq = meta
            .last_seq
            .unwrap_or_else(|| steps.last().map_or(0, |step| step.seq));
        Ok(Some(StoredSession {
            version: meta.version,
            meta: meta.body,
            steps,
            live_from: meta.live_from,
            last_seq,
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session = %key, expected = commit.expected_version, steps = commit.steps.len()))]
    async fn commit(
        &self, key: &SessionKey, commit: &SessionCommit,
    ) -> Result<u64, SessionStoreError> {
        Self::check_commit(key, commit)?;
        let (items, migrated) = self.transaction(key, commit)?;
        match self
            .client
            .transact_write_items()
            .set_transact_items(Some(items))
            .send()
            .await
        {
            Ok(_) => {
                if migrated {
                    let mut seen = self.seen(key);
                    seen.legacy = false;
                    self.remember(key, seen);
                }
                Ok(commit.expected_version.saturating_add(1))
            }
            Err(SdkError::ServiceError(context)) if cancelled_by_another_writer(context.err()) => {
                tracing::debug!(error = ?context.err(), "commit lost to another writer");
                Err(SessionStoreError::Conflict {
                    key: key.to_string(),
                    expected: commit.expected_version,
                })
            }
            Err(err) => Err(SessionStoreError::unavailable(
                format!(
                    "DynamoDB TransactWriteItems for session {key} in {} failed",
                    self.table
                ),
                err,
            )),
        }
    }

    fn max_record_bytes(&self) -> usize {
        Self::MAX_RECORD_BYTES
    }
}

/// Lists sessions with a `Scan` of the whole table, filtered to meta items of session
/// partitions (`begins_with(pk, "agent:") AND sk = "meta"`) and following `LastEvaluatedKey`.
/// A scan reads (and bills) every item of the table, steps included; that is acceptable for
/// an operator command (`clawless sessions list`) and is why no function ever calls this.
/// A secondary index would make it a query, at the cost of a write per commit.
#[async_trait]
impl SessionLister for DynamoSessionStore {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table))]
    async fn list_sessions(&self) -> Result<Vec<SessionSummary>, SessionStoreError> {
        let mut sessions = Vec::new();
        let mut start_key = None;
        loop {
            let page = self
                .client
                .scan()
                .table_name(&self.table)
                .filter_expression(format!(
                    "begins_with({NAME_PK}, :agent) AND {NAME_SK} IN (:meta, :tail)"
                ))
                .projection_expression(format!("{NAME_PK}, {NAME_VERSION}, #body"))
                .expression_attribute_names(NAME_PK, PK)
                .expression_attribute_names(NAME_SK, SK)
                .expression_attribute_names(NAME_VERSION, "version")
                .expression_attribute_names("#body", "body")
                .expression_attribute_values(":agent", s("agent:"))
                .expression_attribute_values(":meta", s(META_SK))
                .expression_attribute_values(":tail", s(TAIL_SK))
                .set_exclusive_start_key(start_key.take())
                .send()
                .await
                .map_err(|err| {
                    SessionStoreError::unavailable(
                        format!("DynamoDB Scan of sessions in {} failed", self.table),
                        err,
                    )
                })?;
            for item in page.items.unwrap_or_default() {
                let pk = attribute_str(&item, PK).unwrap_or_default().to_owned();
                match (SessionKey::parse(&pk), from_item::<MetaItem>(item)) {
                    (Some(key), Ok(meta)) => sessions.push(SessionSummary {
                        key,
                        version: meta.version,
                        meta: meta.body,
                    }),
                    _ => tracing::warn!(pk, "skipping an unreadable session meta item"),
                }
            }
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() => start_key = Some(last),
                _ => break,
            }
        }
        sessions.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(sessions)
    }
}

/// The inbox port on the same DynamoDB table: one item per event id (`pk = inbox#<id>`,
/// `sk = claim`) whose `expires_at` is also the table's TTL attribute, so DynamoDB deletes
/// old claims by itself (within days; the condition below never relies on that).
///
/// A claim is one `PutItem` conditioned on `attribute_not_exists(pk) OR expires_at < :now`:
/// a failed condition is [`Claim::Duplicate`]. Release is a `DeleteItem`.
#[derive(Debug, Clone)]
pub struct DynamoInbox {
    client: Client,
    table: String,
}

impl DynamoInbox {
    /// An inbox on `table`, using `client`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn pk(event_id: &str) -> String {
        format!("{INBOX_PK_PREFIX}{event_id}")
    }
}

#[async_trait]
impl Inbox for DynamoInbox {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, event_id))]
    async fn claim(
        &self, event_id: &str, ttl: Duration, now_unix: u64,
    ) -> Result<Claim, InboxError> {
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .item(PK, s(Self::pk(event_id)))
            .item(SK, s(CLAIM_SK))
            .item(EXPIRES_AT, n(claim_expires_at(now_unix, ttl)))
            .condition_expression(format!(
                "attribute_not_exists({NAME_PK}) OR {NAME_EXPIRES} < :now"
            ))
            .expression_attribute_names(NAME_PK, PK)
            .expression_attribute_names(NAME_EXPIRES, EXPIRES_AT)
            .expression_attribute_values(":now", n(now_unix))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Claim::Claimed),
            Err(SdkError::ServiceError(context))
                if matches!(
                    context.err(),
                    PutItemError::ConditionalCheckFailedException(_)
                ) =>
            {
                Ok(Claim::Duplicate)
            }
            Err(err) => Err(InboxError::new(
                format!(
                    "DynamoDB PutItem claiming {event_id:?} in {} failed",
                    self.table
                ),
                err,
            )),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, event_id))]
    async fn release(&self, event_id: &str) -> Result<(), InboxError> {
        self.client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(Self::pk(event_id)))
            .key(SK, s(CLAIM_SK))
            .send()
            .await
            .map_err(|err| {
                InboxError::new(
                    format!(
                        "DynamoDB DeleteItem releasing {event_id:?} in {} failed",
                        self.table
                    ),
                    err,
                )
            })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_keys_sort_numerically_between_the_old_meta_and_the_tail() {
        let mut keys = vec![
            step_sk(100),
            step_sk(9),
            META_SK.to_owned(),
            step_sk(10),
            step_sk(u64::MAX),
            TAIL_SK.to_owned(),
        ];
        keys.sort();
        assert_eq!(
            keys,
            vec![
                "meta".to_owned(),
                "step#00000000000000000009".into(),
                "step#00000000000000000010".into(),
                "step#00000000000000000100".into(),
                "step#18446744073709551615".into(),
                "tail".into(),
            ]
        );
    }

    #[test]
    fn a_meta_item_from_before_live_loads_reads_as_live_from_zero() {
        let item = Item::from([("version".into(), n(2)), ("body".into(), s("{}"))]);
        let meta: MetaItem = from_item(item).unwrap();
        assert_eq!((meta.version, meta.live_from, meta.last_seq), (2, 0, None));
        let written = MetaItem {
            last_seq: Some(4),
            ..meta
        };
        assert_eq!(
            to_item(&written).unwrap(),
            Item::from([
                ("version".into(), n(2)),
                ("body".into(), s("{}")),
                ("live_from".into(), n(0)),
                ("last_seq".into(), n(4)),
            ])
        );
    }

    #[test]
    fn the_record_limit_leaves_room_for_keys_under_the_item_limit() {
        assert_eq!(DynamoSessionStore::MAX_RECORD_BYTES, 347_952);
    }
}
