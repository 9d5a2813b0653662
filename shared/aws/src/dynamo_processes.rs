//! [`DynamoBackgroundProcesses`]: the background process index on the sessions table
//! (one-table design, see [`dynamo`](crate::dynamo)).
//!
//! Owns the index items and the conditional writes that make an exit notify exactly once:
//! `finish` is a `PutItem` conditioned on the item being absent or still `running`, never a
//! read followed by a write.
//!
//! # Items
//!
//! | item | `pk` | `sk` | attributes |
//! |---|---|---|---|
//! | background process | `bgproc#<session key>` | `proc#<session id>` | `session_key`, `session_id`, `node_id`, `exec_job_id`, `command`, `status` (S); `started_at_ms` (N); `ended_at_ms`, `exit_code` (N, once ended); `expires_at` (N, TTL: 30 days after the start or the end) |
//!
//! A session's processes share one partition, so `list` is a single `Query`; session keys
//! start with `agent:`, so the `bgproc#` partitions never meet a session's.

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnValue};
use clawless_core::nodes::{
    BackgroundProcess, BackgroundProcesses, NodeStoreError, ProcessStatus, sort_newest_first,
};

use crate::dynamo::{EXPIRES_AT, Item, NAME_PK, PK, SK, attribute_str, n, put_condition_failed, s};

/// Partition key prefix of a session's background processes, followed by the session key.
const PROCESS_PK_PREFIX: &str = "bgproc#";
/// Sort key prefix of one process, followed by its session id.
const PROCESS_SK_PREFIX: &str = "proc#";
/// How long DynamoDB keeps an entry after its start or end.
const PROCESS_RETENTION_SECS: u64 = 30 * 24 * 60 * 60;

fn process_pk(session_key: &str) -> String {
    format!("{PROCESS_PK_PREFIX}{session_key}")
}

fn process_sk(session_id: &str) -> String {
    format!("{PROCESS_SK_PREFIX}{session_id}")
}

/// The item of `entry`, keys and TTL included.
fn item_of(entry: &BackgroundProcess) -> Item {
    let mut item = Item::new();
    item.insert(PK.to_owned(), s(process_pk(&entry.session_key)));
    item.insert(SK.to_owned(), s(process_sk(&entry.session_id)));
    for (name, value) in [
        ("session_key", &entry.session_key),
        ("session_id", &entry.session_id),
        ("node_id", &entry.node_id),
        ("exec_job_id", &entry.exec_job_id),
        ("command", &entry.command),
    ] {
        item.insert(name.to_owned(), s(value.clone()));
    }
    item.insert("status".to_owned(), s(entry.status.as_str()));
    item.insert("started_at_ms".to_owned(), n(entry.started_at_ms));
    if let Some(ended) = entry.ended_at_ms {
        item.insert("ended_at_ms".to_owned(), n(ended));
    }
    if let Some(code) = entry.exit_code {
        item.insert("exit_code".to_owned(), AttributeValue::N(code.to_string()));
    }
    let anchor = entry.ended_at_ms.unwrap_or(entry.started_at_ms);
    item.insert(
        EXPIRES_AT.to_owned(),
        n(anchor.div_ceil(1000).saturating_add(PROCESS_RETENTION_SECS)),
    );
    item
}

fn number<T: std::str::FromStr>(item: &Item, name: &str) -> Option<T> {
    item.get(name)?.as_n().ok()?.parse().ok()
}

fn entry_of(item: &Item, table: &str) -> Result<BackgroundProcess, NodeStoreError> {
    let text = |name: &str| {
        attribute_str(item, name).map(str::to_owned).ok_or_else(|| {
            NodeStoreError::corrupt(format!(
                "background process item in {table} lacks the string {name}"
            ))
        })
    };
    let status_text = text("status")?;
    let status = ProcessStatus::parse(&status_text).ok_or_else(|| {
        NodeStoreError::corrupt(format!(
            "background process item in {table} has status {status_text:?}"
        ))
    })?;
    Ok(BackgroundProcess {
        session_key: text("session_key")?,
        session_id: text("session_id")?,
        node_id: text("node_id")?,
        exec_job_id: text("exec_job_id")?,
        command: text("command")?,
        status,
        started_at_ms: number(item, "started_at_ms").ok_or_else(|| {
            NodeStoreError::corrupt(format!(
                "background process item in {table} lacks started_at_ms"
            ))
        })?,
        ended_at_ms: number(item, "ended_at_ms"),
        exit_code: number(item, "exit_code"),
    })
}

/// The background process index port on the sessions table.
///
/// - `record_running` is a `PutItem` conditioned on the item not existing.
/// - `finish` is a `PutItem` conditioned on the item not existing or being `running`: the
///   once-gate of exit notifications.
/// - `list` is one `Query` of the session's partition (paged), sorted newest first.
#[derive(Debug, Clone)]
pub struct DynamoBackgroundProcesses {
    client: Client,
    table: String,
}

impl DynamoBackgroundProcesses {
    /// The index on `table` (the sessions table), using `client`.
    pub fn new(client: Client, table: impl Into<String>) -> Self {
        Self {
            client,
            table: table.into(),
        }
    }

    fn failed(
        &self, action: &str, err: impl std::error::Error + Send + Sync + 'static,
    ) -> NodeStoreError {
        NodeStoreError::unavailable(
            format!(
                "DynamoDB {action} of the background process index in {} failed",
                self.table
            ),
            err,
        )
    }

    /// Puts `entry` when `condition` holds: `Ok(false)` when it did not.
    async fn put_if(
        &self, entry: &BackgroundProcess, condition: &str, running: bool,
    ) -> Result<bool, NodeStoreError> {
        let mut put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item_of(entry)))
            .condition_expression(condition)
            .expression_attribute_names(NAME_PK, PK);
        if running {
            put = put
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":running", s(ProcessStatus::Running.as_str()));
        }
        match put.send().await {
            Ok(_) => Ok(true),
            Err(err) if put_condition_failed(&err) => Ok(false),
            Err(err) => Err(self.failed("PutItem", err)),
        }
    }
}

#[async_trait]
impl BackgroundProcesses for DynamoBackgroundProcesses {
    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session_id = %entry.session_id))]
    async fn record_running(&self, entry: &BackgroundProcess) -> Result<bool, NodeStoreError> {
        self.put_if(entry, &format!("attribute_not_exists({NAME_PK})"), false)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session_id))]
    async fn get(
        &self, session_key: &str, session_id: &str,
    ) -> Result<Option<BackgroundProcess>, NodeStoreError> {
        let output = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(PK, s(process_pk(session_key)))
            .key(SK, s(process_sk(session_id)))
            .consistent_read(true)
            .send()
            .await
            .map_err(|err| self.failed("GetItem", err))?;
        output
            .item
            .map(|item| entry_of(&item, &self.table))
            .transpose()
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table))]
    async fn list(&self, session_key: &str) -> Result<Vec<BackgroundProcess>, NodeStoreError> {
        let mut entries = Vec::new();
        let mut start: Option<Item> = None;
        loop {
            let output = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression(format!("{NAME_PK} = :pk"))
                .expression_attribute_names(NAME_PK, PK)
                .expression_attribute_values(":pk", s(process_pk(session_key)))
                .consistent_read(true)
                .set_exclusive_start_key(start.take())
                .send()
                .await
                .map_err(|err| self.failed("Query", err))?;
            for item in output.items() {
                entries.push(entry_of(item, &self.table)?);
            }
            match output.last_evaluated_key {
                Some(key) if !key.is_empty() => start = Some(key),
                _ => break,
            }
        }
        sort_newest_first(&mut entries);
        Ok(entries)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session_id = %ended.session_id))]
    async fn finish(&self, ended: &BackgroundProcess) -> Result<bool, NodeStoreError> {
        self.put_if(
            ended,
            &format!("attribute_not_exists({NAME_PK}) OR #status = :running"),
            true,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = %self.table, session_id))]
    async fn remove(&self, session_key: &str, session_id: &str) -> Result<bool, NodeStoreError> {
        let output = self
            .client
            .delete_item()
            .table_name(&self.table)
            .key(PK, s(process_pk(session_key)))
            .key(SK, s(process_sk(session_id)))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(|err| self.failed("DeleteItem", err))?;
        Ok(output.attributes.is_some_and(|old| !old.is_empty()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_round_trips_through_its_item_with_a_negative_exit_code() {
        let entry = BackgroundProcess {
            session_key: "agent:main:main".into(),
            session_id: "swift-otter".into(),
            node_id: "node-1".into(),
            exec_job_id: "job".into(),
            command: "false".into(),
            status: ProcessStatus::Failed,
            started_at_ms: 1_000,
            ended_at_ms: Some(2_500),
            exit_code: Some(-1),
        };
        let item = item_of(&entry);
        assert_eq!(attribute_str(&item, PK), Some("bgproc#agent:main:main"));
        assert_eq!(attribute_str(&item, SK), Some("proc#swift-otter"));
        assert_eq!(
            item.get(EXPIRES_AT),
            Some(&n(3 + PROCESS_RETENTION_SECS)),
            "TTL counts from the end, rounded up"
        );
        assert_eq!(entry_of(&item, "t").unwrap(), entry);
    }

    #[test]
    fn an_item_with_an_unknown_status_is_corrupt_not_a_panic() {
        let mut item = item_of(&BackgroundProcess {
            session_key: "agent:main:main".into(),
            session_id: "a".into(),
            node_id: "n".into(),
            exec_job_id: "j".into(),
            command: "c".into(),
            status: ProcessStatus::Running,
            started_at_ms: 1,
            ended_at_ms: None,
            exit_code: None,
        });
        item.insert("status".into(), s("zombie"));
        assert!(entry_of(&item, "t").is_err());
        item.remove("session_id");
        assert!(entry_of(&item, "t").is_err());
    }
}
