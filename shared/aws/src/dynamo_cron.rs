//! [`DynamoCronStore`]: the cron store port on the sessions table (one-table design, see
//! [`dynamo`](crate::dynamo)).
//!
//! Owns the cron job, run-log head and run-log line items, and the conditional writes that
//! make versions and reservations hold: every decision is a DynamoDB condition on the
//! version a caller read, never a read followed by an unconditional write. What to decide is
//! core's ([`StoredCronJob::reserve`], [`job_json`], [`fit_run_entry`]).
//!
//! # Items
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | job | `cron` | `job#<job id>` | `version` (N); `body` (S: the job's OpenClaw JSON, at most [`MAX_CRON_JOB_BYTES`]); `scheduled_slot_ms`, `manual_slot_ms` (N, once a slot of that kind is reserved) |
//! | run-log head | `cron` | `runlog#<job id>` | `last_seq` (N: lines ever appended to the log) |
//! | run-log line | `cronruns#<job id>` | `run#<seq, 20 digits>` | `body` (S: the line's JSON, at most [`MAX_RUN_ENTRY_BYTES`]); `ts` (N) |
//!
//! Jobs and log heads share the one partition `cron`, so listing the jobs, or finding every
//! log, is one `Query` in job-id order; a deployment has tens of jobs, far from any partition
//! limit. A log's lines have a partition each, keyed by their append counter rather than by
//! `ts`: the key order is the log's line order (as in upstream's JSONL file, where the newest
//! line is the last appended), and pruning to the newest `keep_lines` is a range below
//! `last_seq - keep_lines`, found without counting the log. Nothing here has a TTL: a log
//! outlives its job, as upstream's file does.

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    DeleteRequest, ReturnValue, ReturnValuesOnConditionCheckFailure, WriteRequest,
};
use clawless_automation::cron::run_log::{RunsQuery, page_runs};
use clawless_automation::cron::store::{
    MAX_CRON_JOB_BYTES, MAX_CRON_JOB_ID_BYTES, MAX_RUN_ENTRY_BYTES, fit_run_entry, job_from_json,
    job_json,
};
use clawless_automation::cron::{
    CronJob, CronRunLogEntry, CronStore, CronStoreError, Reservation, ReservedSlots, RunSlot,
    RunsPage, StoredCronJob,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_dynamo::aws_sdk_dynamodb_1::{from_item, to_item};

use crate::dynamo::{
    ITEM_BUDGET, Item, NAME_PK, PK, SK, attribute_str, delete_condition_failed, n,
    put_condition_failed, s, update_condition_failed,
};

/// Partition of every job and run-log head.
const CRON_PK: &str = "cron";
/// Sort key prefix of a job, followed by its id.
const JOB_SK_PREFIX: &str = "job#";
/// Sort key prefix of a run-log head, followed by the job id.
const RUNLOG_SK_PREFIX: &str = "runlog#";
/// Partition key prefix of a run log's lines, followed by the job id.
const RUNS_PK_PREFIX: &str = "cronruns#";
/// Sort key prefix of a run-log line, followed by its zero-padded append counter.
const RUN_SK_PREFIX: &str = "run#";
/// How often a prune re-sends the deletes DynamoDB left unprocessed. Lines still left are
/// found again by the next append's prune, which deletes its whole range.
const PRUNE_ATTEMPTS: usize = 3;
/// Deletes in one `BatchWriteItem` (DynamoDB's limit).
const BATCH_DELETES: usize = 25;

// A job or line at its limit, with the longest id in its keys, stays inside the item budget.
const _: () = assert!(MAX_CRON_JOB_BYTES + 2 * MAX_CRON_JOB_ID_BYTES + 1_024 < ITEM_BUDGET);
const _: () = assert!(MAX_RUN_ENTRY_BYTES + 2 * MAX_CRON_JOB_ID_BYTES + 1_024 < ITEM_BUDGET);

fn job_sk(job_id: &str) -> String {
    format!("{JOB_SK_PREFIX}{job_id}")
}

fn runlog_sk(job_id: &str) -> String {
    format!("{RUNLOG_SK_PREFIX}{job_id}")
}

fn runs_pk(job_id: &str) -> String {
    format!("{RUNS_PK_PREFIX}{job_id}")
}

fn run_sk(seq: u64) -> String {
    format!("{RUN_SK_PREFIX}{seq:020}")
}

/// The attribute holding the mark of `slot`'s kind.
fn mark_attribute(slot: RunSlot) -> &'static str {
    match slot {
        RunSlot::Scheduled(_) => "scheduled_slot_ms",
        RunSlot::Manual(_) => "manual_slot_ms",
    }
}

fn slot_ms(slot: RunSlot) -> u64 {
    match slot {
        RunSlot::Scheduled(ms) | RunSlot::Manual(ms) => ms,
    }
}

/// A job item's attributes besides its keys.
#[derive(Debug, Serialize, Deserialize)]
struct JobItem {
    version: u64,
    /// The job's OpenClaw JSON.
    body: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    scheduled_slot_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    manual_slot_ms: Option<u64>,
}

/// A run-log head's attribute.
#[derive(Debug, Deserialize)]
struct HeadItem {
    last_seq: u64,
}

/// A run-log line's attributes besides its keys.
#[derive(Debug, Serialize, Deserialize)]
struct LineItem {
    ts: u64,
    /// The line's JSON.
    body: String,
}

/// The cron store port on the sessions table, laid out as the [module docs](self) say.
///
/// - `put_job` creates with a `PutItem` conditioned on `attribute_not_exists(pk)` and
///   replaces with an `UpdateItem` of `body` and `version` conditioned on `version =
///   expected` (so the slot marks stay); a failed condition returns the old item
///   (`ALL_OLD`), which tells a moved-on version from a missing job without another read.
/// - `delete_job` is a `DeleteItem`, conditioned on the version when one is given.
/// - `reserve_run` reads the job (strongly consistent), decides with
///   [`StoredCronJob::reserve`], and writes the new body, version and mark in one
///   `UpdateItem` conditioned on the version it read: of concurrent reservers of one slot,
///   one write passes and the others find the slot taken in the returned old item.
/// - `append_run` adds one to the log head's `last_seq` (`UpdateItem ADD`, which is atomic),
///   puts the line under that number, then deletes the lines at or below
///   `last_seq - keep_lines` (a keys-only `Query` and `BatchWriteItem`s).
/// - `list_jobs` and `runs` are strongly consistent, paginated `Query`s; `runs(None)` reads
///   the log heads, then each log.
#[derive(Debug, Clone)]
pub struct DynamoCronStore {
    client: Client,
    table: String,
}

impl DynamoCronStore {
    /// A cron store on `table` (the sessions table), using `client`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn failed(
        &self, action: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> CronStoreError {
        CronStoreError::backend(format!("DynamoDB {action} in {} failed", self.table), err)
    }

    fn corrupt(&self, what: &str, problem: &str) -> CronStoreError {
        CronStoreError::corrupt(format!("DynamoDB item {what} in {}: {problem}", self.table))
    }

    /// `item`'s attributes.
    fn write(&self, item: &impl Serialize) -> Result<Item, CronStoreError> {
        to_item(item).map_err(|err| self.failed("encoding an item", err))
    }

    /// The attributes of `item` (named `what` in errors) as a `T`.
    fn read<T: DeserializeOwned>(&self, item: Item, what: &str) -> Result<T, CronStoreError> {
        from_item(item).map_err(|err| self.corrupt(what, &err.to_string()))
    }

    /// A job item read back.
    fn job_from_item(&self, item: Item) -> Result<StoredCronJob, CronStoreError> {
        let what = attribute_str(&item, SK).unwrap_or_default().to_owned();
        let item: JobItem = self.read(item, &what)?;
        Ok(StoredCronJob {
            job: job_from_json(&item.body, &format!("{what} in {}", self.table))?,
            version: item.version,
            reserved: ReservedSlots {
                scheduled_ms: item.scheduled_slot_ms,
                manual_ms: item.manual_slot_ms,
            },
        })
    }

    /// Every item of partition `pk` whose sort key starts with `prefix` (or is at most
    /// `up_to`), strongly consistent, following `LastEvaluatedKey`.
    async fn query_all(
        &self, pk: &str, sort_key: SortKeyRange<'_>, keys_only: bool,
    ) -> Result<Vec<Item>, CronStoreError> {
        let mut items = Vec::new();
        let mut start_key = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(&self.table)
                .expression_attribute_names(NAME_PK, PK)
                .expression_attribute_names("#sk", SK)
                .expression_attribute_values(":pk", s(pk))
                .consistent_read(true)
                .set_exclusive_start_key(start_key.take());
            query = match sort_key {
                SortKeyRange::Prefix(prefix) => query
                    .key_condition_expression(format!("{NAME_PK} = :pk AND begins_with(#sk, :sk)"))
                    .expression_attribute_values(":sk", s(prefix)),
                SortKeyRange::AtMost(last) => query
                    .key_condition_expression(format!("{NAME_PK} = :pk AND #sk <= :sk"))
                    .expression_attribute_values(":sk", s(last)),
            };
            if keys_only {
                query = query.projection_expression(format!("{NAME_PK}, #sk"));
            }
            let page = query
                .send()
                .await
                .map_err(|err| self.failed(&format!("Query of {pk}"), err))?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key {
                Some(last) if !last.is_empty() => start_key = Some(last),
                _ => break,
            }
        }
        Ok(items)
    }

    /// The lines of one log, in append order.
    async fn log_lines(&self, job_id: &str) -> Result<Vec<CronRunLogEntry>, CronStoreError> {
        let items = self
            .query_all(&runs_pk(job_id), SortKeyRange::Prefix(RUN_SK_PREFIX), false)
            .await?;
        items
            .into_iter()
            .map(|item| {
                let what = format!(
                    "{}/{}",
                    runs_pk(job_id),
                    attribute_str(&item, SK).unwrap_or_default()
                );
                let line: LineItem = self.read(item, &what)?;
                serde_json::from_str(&line.body).map_err(|err| {
                    CronStoreError::backend(
                        format!("unreadable run-log line {what} in {}", self.table),
                        err,
                    )
                })
            })
            .collect()
    }

    /// Deletes the lines of `job_id`'s log at or below `last_seq`.
    async fn prune(&self, job_id: &str, last_seq: u64) -> Result<(), CronStoreError> {
        let pk = runs_pk(job_id);
        let stale = self
            .query_all(&pk, SortKeyRange::AtMost(&run_sk(last_seq)), true)
            .await?;
        for chunk in stale.chunks(BATCH_DELETES) {
            let mut requests = chunk
                .iter()
                .map(|item| {
                    let delete = DeleteRequest::builder()
                        .set_key(Some(
                            [PK, SK]
                                .iter()
                                .filter_map(|name| {
                                    item.get(*name).map(|v| ((*name).to_owned(), v.clone()))
                                })
                                .collect(),
                        ))
                        .build()
                        .map_err(|err| self.failed("building a run-log delete", err))?;
                    Ok(WriteRequest::builder().delete_request(delete).build())
                })
                .collect::<Result<Vec<_>, CronStoreError>>()?;
            for _ in 0..PRUNE_ATTEMPTS {
                let output = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests)
                    .send()
                    .await
                    .map_err(|err| self.failed(&format!("BatchWriteItem pruning {pk}"), err))?;
                requests = output
                    .unprocessed_items()
                    .and_then(|unprocessed| unprocessed.get(&self.table))
                    .cloned()
                    .unwrap_or_default();
                if requests.is_empty() {
                    break;
                }
            }
            if !requests.is_empty() {
                tracing::debug!(
                    left = requests.len(),
                    "run-log prune left lines for the next append"
                );
            }
        }
        Ok(())
    }
}

/// Which sort keys of a partition a query reads.
#[derive(Debug, Clone, Copy)]
enum SortKeyRange<'a> {
    /// Those starting with this.
    Prefix(&'a str),
    /// Those at or before this.
    AtMost(&'a str),
}

#[async_trait]
impl CronStore for DynamoCronStore {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table))]
    async fn list_jobs(&self) -> Result<Vec<StoredCronJob>, CronStoreError> {
        let items = self
            .query_all(CRON_PK, SortKeyRange::Prefix(JOB_SK_PREFIX), false)
            .await?;
        items
            .into_iter()
            .map(|item| self.job_from_item(item))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id))]
    async fn get_job(&self, job_id: &str) -> Result<Option<StoredCronJob>, CronStoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(CRON_PK))
            .key(SK, s(job_sk(job_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.failed(&format!("GetItem of cron job {job_id}"), err))?;
        output.item.map(|item| self.job_from_item(item)).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id = %job.id, ?expected))]
    async fn put_job(&self, job: &CronJob, expected: Option<u64>) -> Result<u64, CronStoreError> {
        let body = job_json(job)?;
        let Some(version) = expected else {
            let item = JobItem {
                version: 1,
                body,
                scheduled_slot_ms: None,
                manual_slot_ms: None,
            };
            let created = self
                .client
                .put_item()
                .table_name(&self.table)
                .set_item(Some(self.write(&item)?))
                .item(PK, s(CRON_PK))
                .item(SK, s(job_sk(&job.id)))
                .condition_expression(format!("attribute_not_exists({NAME_PK})"))
                .expression_attribute_names(NAME_PK, PK)
                .send()
                .await;
            return match created {
                Ok(_) => Ok(1),
                Err(err) if put_condition_failed(&err) => Err(CronStoreError::Conflict {
                    job_id: job.id.clone(),
                    expected: None,
                }),
                Err(err) => Err(self.failed(&format!("PutItem of cron job {}", job.id), err)),
            };
        };
        let new_version = version.saturating_add(1);
        let replaced = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(CRON_PK))
            .key(SK, s(job_sk(&job.id)))
            .update_expression("SET #body = :body, #version = :new")
            .condition_expression("#version = :expected")
            .expression_attribute_names("#body", "body")
            .expression_attribute_names("#version", "version")
            .expression_attribute_values(":body", s(body))
            .expression_attribute_values(":new", n(new_version))
            .expression_attribute_values(":expected", n(version))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match replaced {
            Ok(_) => return Ok(new_version),
            Err(err) => err,
        };
        match update_condition_failed(&err) {
            Some(None) => Err(CronStoreError::NotFound {
                job_id: job.id.clone(),
            }),
            Some(Some(_)) => Err(CronStoreError::Conflict {
                job_id: job.id.clone(),
                expected: Some(version),
            }),
            None => Err(self.failed(&format!("UpdateItem of cron job {}", job.id), err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id, ?expected))]
    async fn delete_job(
        &self, job_id: &str, expected: Option<u64>,
    ) -> Result<bool, CronStoreError> {
        let mut request = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(CRON_PK))
            .key(SK, s(job_sk(job_id)))
            .return_values(ReturnValue::AllOld);
        if let Some(version) = expected {
            request = request
                .condition_expression("#version = :expected")
                .expression_attribute_names("#version", "version")
                .expression_attribute_values(":expected", n(version))
                .return_values_on_condition_check_failure(
                    ReturnValuesOnConditionCheckFailure::AllOld,
                );
        }
        let err = match request.send().await {
            Ok(output) => return Ok(output.attributes().is_some_and(|old| !old.is_empty())),
            Err(err) => err,
        };
        match delete_condition_failed(&err) {
            Some(None) => Ok(false),
            Some(Some(_)) => Err(CronStoreError::Conflict {
                job_id: job_id.to_owned(),
                expected,
            }),
            None => Err(self.failed(&format!("DeleteItem of cron job {job_id}"), err)),
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id, %slot, expected_version))]
    async fn reserve_run(
        &self, job_id: &str, slot: RunSlot, now_ms: u64, expected_version: u64,
    ) -> Result<Reservation, CronStoreError> {
        let Some(current) = self.get_job(job_id).await? else {
            return Err(CronStoreError::NotFound {
                job_id: job_id.to_owned(),
            });
        };
        let reservation = current.reserve(slot, now_ms, expected_version)?;
        let Reservation::Reserved(reserved) = &reservation else {
            return Ok(reservation);
        };
        let written = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(CRON_PK))
            .key(SK, s(job_sk(job_id)))
            .update_expression("SET #body = :body, #version = :new, #mark = :slot")
            .condition_expression("#version = :read")
            .expression_attribute_names("#body", "body")
            .expression_attribute_names("#version", "version")
            .expression_attribute_names("#mark", mark_attribute(slot))
            .expression_attribute_values(":body", s(job_json(&reserved.job)?))
            .expression_attribute_values(":new", n(reserved.version))
            .expression_attribute_values(":slot", n(slot_ms(slot)))
            .expression_attribute_values(":read", n(current.version))
            .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
            .send()
            .await;
        let err = match written {
            Ok(_) => return Ok(reservation),
            Err(err) => err,
        };
        // Another write got in since the read: the item as it is now says what it was.
        match update_condition_failed(&err) {
            None => Err(self.failed(&format!("UpdateItem reserving cron job {job_id}"), err)),
            Some(None) => Err(CronStoreError::NotFound {
                job_id: job_id.to_owned(),
            }),
            Some(Some(old)) => {
                match self
                    .job_from_item(old.clone())?
                    .reserve(slot, now_ms, expected_version)?
                {
                    Reservation::Reserved(_) => Err(CronStoreError::corrupt(format!(
                        "DynamoDB refused to reserve {slot} of cron job {job_id} in {}, yet the job \
                     accepts it",
                        self.table
                    ))),
                    taken => Ok(taken),
                }
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id = %entry.job_id, keep_lines))]
    async fn append_run(
        &self, entry: &CronRunLogEntry, keep_lines: usize,
    ) -> Result<(), CronStoreError> {
        let line = fit_run_entry(entry)?;
        let job_id = entry.job_id.as_str();
        let head = self
            .client
            .update_item()
            .table_name(&self.table)
            .key(PK, s(CRON_PK))
            .key(SK, s(runlog_sk(job_id)))
            .update_expression("ADD #last :one")
            .expression_attribute_names("#last", "last_seq")
            .expression_attribute_values(":one", n(1))
            .return_values(ReturnValue::UpdatedNew)
            .send()
            .await
            .map_err(|err| {
                self.failed(&format!("UpdateItem of the run-log head of {job_id}"), err)
            })?;
        let seq = self
            .read::<HeadItem>(head.attributes.unwrap_or_default(), &runlog_sk(job_id))?
            .last_seq;
        let line = LineItem {
            ts: entry.ts,
            body: line,
        };
        self.client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(self.write(&line)?))
            .item(PK, s(runs_pk(job_id)))
            .item(SK, s(run_sk(seq)))
            .send()
            .await
            .map_err(|err| self.failed(&format!("PutItem of a run-log line of {job_id}"), err))?;
        let keep = u64::try_from(keep_lines.max(1)).unwrap_or(u64::MAX);
        if let Some(last_stale) = seq.checked_sub(keep).filter(|last| *last > 0) {
            self.prune(job_id, last_stale).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, job_id))]
    async fn runs(
        &self, job_id: Option<&str>, query: &RunsQuery,
    ) -> Result<RunsPage, CronStoreError> {
        let entries = match job_id {
            Some(job_id) => self.log_lines(job_id).await?,
            None => {
                let heads = self
                    .query_all(CRON_PK, SortKeyRange::Prefix(RUNLOG_SK_PREFIX), true)
                    .await?;
                let mut entries = Vec::new();
                for head in &heads {
                    let sk = attribute_str(head, SK).unwrap_or_default();
                    let job_id = sk.strip_prefix(RUNLOG_SK_PREFIX).unwrap_or(sk);
                    entries.extend(self.log_lines(job_id).await?);
                }
                entries
            }
        };
        Ok(page_runs(&entries, query))
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::types::AttributeValue;

    use super::*;

    #[test]
    fn cron_keys_never_meet_session_inbox_node_or_exec_job_keys() {
        // Session keys start with `agent:`; the other partitions are `inbox#`, `nodes`,
        // `pairing#` and `job#`.
        for key in [CRON_PK.to_owned(), runs_pk("agent:main:main"), runs_pk("x")] {
            assert!(
                !key.starts_with("agent:")
                    && !key.starts_with("inbox#")
                    && !key.starts_with("job#")
                    && !key.starts_with("pairing#")
                    && key != "nodes",
                "{key}"
            );
        }
        assert!(!job_sk("a").starts_with(RUNLOG_SK_PREFIX));
        assert!(!runlog_sk("a").starts_with(JOB_SK_PREFIX));
    }

    #[test]
    fn job_and_line_items_keep_numbers_as_n_and_json_as_s() {
        let job = JobItem {
            version: 1,
            body: "{}".into(),
            scheduled_slot_ms: None,
            manual_slot_ms: Some(5),
        };
        let number = |text: &str| AttributeValue::N(text.into());
        assert_eq!(
            to_item(&job).unwrap(),
            Item::from([
                ("version".into(), number("1")),
                ("body".into(), AttributeValue::S("{}".into())),
                ("manual_slot_ms".into(), number("5")),
            ])
        );
        let line = LineItem {
            ts: 9,
            body: "{}".into(),
        };
        assert_eq!(
            to_item(&line).unwrap(),
            Item::from([
                ("ts".into(), number("9")),
                ("body".into(), AttributeValue::S("{}".into())),
            ])
        );
    }

    #[test]
    fn run_keys_sort_like_append_counters() {
        let mut seqs = [10, 9, 1, 100, 99_999_999_999, u64::MAX];
        let mut keys: Vec<String> = seqs.iter().map(|seq| run_sk(*seq)).collect();
        seqs.sort_unstable();
        keys.sort();
        assert_eq!(
            keys,
            seqs.iter().map(|seq| run_sk(*seq)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn job_sort_keys_sort_like_job_ids() {
        let mut ids = vec!["b", "A", "a-1", "10", "9", "a", "ü"];
        let mut keys: Vec<String> = ids.iter().map(|id| job_sk(id)).collect();
        ids.sort_unstable();
        keys.sort();
        let from_keys: Vec<&str> = keys
            .iter()
            .map(|key| key.strip_prefix(JOB_SK_PREFIX).unwrap())
            .collect();
        assert_eq!(from_keys, ids);
    }
}
