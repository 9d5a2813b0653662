//! [`InMemoryBackgroundProcesses`] and [`background_processes_contract`].

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{NodeStoreDeviations, short_label};
use crate::nodes::{
    BackgroundProcess, BackgroundProcesses, NodeStoreError, ProcessStatus, sort_newest_first,
};
use crate::testing::{join_all, lock_state};

/// An in-memory [`BackgroundProcesses`]. Clones share the same entries.
#[derive(Debug, Clone, Default)]
pub struct InMemoryBackgroundProcesses {
    entries: Arc<Mutex<BTreeMap<(String, String), BackgroundProcess>>>,
}

impl InMemoryBackgroundProcesses {
    /// An index with no entries.
    pub fn new() -> Self {
        Self::default()
    }
}

fn key_of(session_key: &str, session_id: &str) -> (String, String) {
    (session_key.to_owned(), session_id.to_owned())
}

#[async_trait]
impl BackgroundProcesses for InMemoryBackgroundProcesses {
    async fn record_running(&self, entry: &BackgroundProcess) -> Result<bool, NodeStoreError> {
        let mut entries = lock_state(&self.entries);
        let key = key_of(&entry.session_key, &entry.session_id);
        if entries.contains_key(&key) {
            return Ok(false);
        }
        entries.insert(key, entry.clone());
        Ok(true)
    }

    async fn get(
        &self, session_key: &str, session_id: &str,
    ) -> Result<Option<BackgroundProcess>, NodeStoreError> {
        Ok(lock_state(&self.entries)
            .get(&key_of(session_key, session_id))
            .cloned())
    }

    async fn list(&self, session_key: &str) -> Result<Vec<BackgroundProcess>, NodeStoreError> {
        let mut found: Vec<BackgroundProcess> = lock_state(&self.entries)
            .values()
            .filter(|entry| entry.session_key == session_key)
            .cloned()
            .collect();
        sort_newest_first(&mut found);
        Ok(found)
    }

    async fn finish(&self, ended: &BackgroundProcess) -> Result<bool, NodeStoreError> {
        let mut entries = lock_state(&self.entries);
        let key = key_of(&ended.session_key, &ended.session_id);
        match entries.get(&key) {
            Some(existing) if existing.status.is_ended() => Ok(false),
            _ => {
                entries.insert(key, ended.clone());
                Ok(true)
            }
        }
    }

    async fn remove(&self, session_key: &str, session_id: &str) -> Result<bool, NodeStoreError> {
        Ok(lock_state(&self.entries)
            .remove(&key_of(session_key, session_id))
            .is_some())
    }
}

/// Runs the [`BackgroundProcesses`] contract against `index`, panicking with a description
/// of the first broken expectation. Session keys carry a label unique to this call, so the
/// index may be shared. Includes a race of 8 concurrent `finish` calls of one entry, unless
/// `deviations` says the backend cannot pass it.
pub async fn background_processes_contract(
    index: &dyn BackgroundProcesses, deviations: NodeStoreDeviations,
) {
    let suite = ProcessesContract {
        index,
        scope: format!("agent:main:contract-{}", short_label("p")),
    };
    suite.a_running_entry_reads_back_whole().await;
    suite.recording_again_changes_nothing().await;
    suite.finish_passes_once().await;
    suite.finish_without_a_running_entry_passes_once().await;
    suite
        .a_late_running_report_does_not_revive_an_ended_entry()
        .await;
    suite.list_is_scoped_and_newest_first().await;
    suite.remove_deletes_once().await;
    if !deviations.conditional_writes_not_atomic {
        suite.concurrent_finishes_have_exactly_one_winner().await;
    }
}

struct ProcessesContract<'a> {
    index: &'a dyn BackgroundProcesses,
    scope: String,
}

const T0: u64 = 1_700_000_000_000;

impl ProcessesContract<'_> {
    fn running(&self, session_id: &str, started_at_ms: u64) -> BackgroundProcess {
        BackgroundProcess {
            session_key: self.scope.clone(),
            session_id: session_id.to_owned(),
            node_id: "node-1".into(),
            exec_job_id: format!("job-{session_id}"),
            command: "sleep 2; echo \"héllo\" | tee /tmp/x".into(),
            status: ProcessStatus::Running,
            started_at_ms,
            ended_at_ms: None,
            exit_code: None,
        }
    }

    fn ended(entry: &BackgroundProcess, status: ProcessStatus, code: i32) -> BackgroundProcess {
        BackgroundProcess {
            status,
            ended_at_ms: Some(entry.started_at_ms + 2_000),
            exit_code: Some(code),
            ..entry.clone()
        }
    }

    async fn get(&self, session_id: &str) -> Option<BackgroundProcess> {
        self.index
            .get(&self.scope, session_id)
            .await
            .unwrap_or_else(|err| panic!("get {session_id}: {err}"))
    }

    async fn record(&self, entry: &BackgroundProcess) -> bool {
        self.index
            .record_running(entry)
            .await
            .unwrap_or_else(|err| panic!("record {}: {err}", entry.session_id))
    }

    async fn finish(&self, entry: &BackgroundProcess) -> bool {
        self.index
            .finish(entry)
            .await
            .unwrap_or_else(|err| panic!("finish {}: {err}", entry.session_id))
    }

    async fn a_running_entry_reads_back_whole(&self) {
        let entry = self.running("swift-otter", T0);
        assert_eq!(self.get("swift-otter").await, None, "before record");
        assert!(self.record(&entry).await, "a new entry is created");
        assert_eq!(self.get("swift-otter").await, Some(entry));
        assert_eq!(
            self.index
                .get("agent:main:someone-else", "swift-otter")
                .await
                .expect("the index answers"),
            None,
            "another session does not see it"
        );
    }

    async fn recording_again_changes_nothing(&self) {
        let entry = self.running("calm-river", T0 + 1);
        assert!(self.record(&entry).await);
        let mut other = entry.clone();
        other.command = "rm -rf /".into();
        other.started_at_ms = T0 + 99;
        assert!(!self.record(&other).await, "the same id again");
        assert_eq!(
            self.get("calm-river").await,
            Some(entry),
            "the first stands"
        );
    }

    async fn finish_passes_once(&self) {
        let entry = self.running("bold-hawk", T0 + 2);
        self.record(&entry).await;
        let completed = Self::ended(&entry, ProcessStatus::Completed, 0);
        assert!(self.finish(&completed).await, "running → completed passes");
        assert_eq!(self.get("bold-hawk").await, Some(completed.clone()));
        let failed = Self::ended(&entry, ProcessStatus::Failed, 1);
        assert!(!self.finish(&failed).await, "a second end is refused");
        assert!(!self.finish(&completed).await, "the same end again too");
        assert_eq!(self.get("bold-hawk").await, Some(completed), "unchanged");
    }

    async fn finish_without_a_running_entry_passes_once(&self) {
        let entry = self.running("lost-report", T0 + 3);
        let failed = Self::ended(&entry, ProcessStatus::Failed, 2);
        assert!(
            self.finish(&failed).await,
            "an end with no entry is written"
        );
        assert!(!self.finish(&failed).await, "once");
        assert_eq!(self.get("lost-report").await, Some(failed));
    }

    async fn a_late_running_report_does_not_revive_an_ended_entry(&self) {
        let entry = self.running("late-owl", T0 + 4);
        let completed = Self::ended(&entry, ProcessStatus::Completed, 0);
        assert!(self.finish(&completed).await);
        assert!(!self.record(&entry).await, "running after the end");
        assert_eq!(self.get("late-owl").await, Some(completed));
    }

    async fn list_is_scoped_and_newest_first(&self) {
        let scope = format!("{}-list", self.scope);
        let other_scope = format!("{}-other", self.scope);
        assert!(
            self.index
                .list(&scope)
                .await
                .expect("the index answers")
                .is_empty()
        );
        let mut made = Vec::new();
        for (id, start) in [("b-old", T0), ("a-new", T0 + 50), ("c-mid", T0 + 20)] {
            let entry = BackgroundProcess {
                session_key: scope.clone(),
                ..self.running(id, start)
            };
            self.index
                .record_running(&entry)
                .await
                .expect("the index answers");
            made.push(entry);
        }
        let elsewhere = BackgroundProcess {
            session_key: other_scope.clone(),
            ..self.running("a-new", T0 + 70)
        };
        self.index
            .record_running(&elsewhere)
            .await
            .expect("the index answers");
        let ids: Vec<String> = self
            .index
            .list(&scope)
            .await
            .expect("the index answers")
            .into_iter()
            .map(|entry| entry.session_id)
            .collect();
        assert_eq!(
            ids,
            ["a-new", "c-mid", "b-old"],
            "newest first, own scope only"
        );
        assert_eq!(
            self.index
                .list(&other_scope)
                .await
                .expect("the index answers"),
            vec![elsewhere]
        );
        // A scope that is a prefix of another sees only its own.
        assert!(
            self.index
                .list(&format!("{}-lis", self.scope))
                .await
                .expect("the index answers")
                .is_empty()
        );
    }

    async fn remove_deletes_once(&self) {
        let entry = self.running("gone-fox", T0 + 5);
        self.record(&entry).await;
        assert!(
            self.index
                .remove(&self.scope, "gone-fox")
                .await
                .expect("the index answers")
        );
        assert_eq!(self.get("gone-fox").await, None);
        assert!(
            !self
                .index
                .remove(&self.scope, "gone-fox")
                .await
                .expect("the index answers")
        );
    }

    async fn concurrent_finishes_have_exactly_one_winner(&self) {
        let entry = self.running("race-cat", T0 + 6);
        self.record(&entry).await;
        let ends: Vec<BackgroundProcess> = (0..8)
            .map(|code| Self::ended(&entry, ProcessStatus::Failed, code))
            .collect();
        let futures: Vec<Pin<Box<dyn Future<Output = bool> + Send + '_>>> = ends
            .iter()
            .map(|ended| Box::pin(self.finish(ended)) as Pin<Box<dyn Future<Output = bool> + Send>>)
            .collect();
        let wins = join_all(futures).await;
        assert_eq!(wins.iter().filter(|won| **won).count(), 1, "{wins:?}");
        let stored = self.get("race-cat").await.expect("the entry exists");
        let winner = wins.iter().position(|won| *won).expect("one winner");
        assert_eq!(stored, ends[winner], "the winner's end is stored");
    }
}
