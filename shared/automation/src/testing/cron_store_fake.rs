//! [`InMemoryCronStore`]: the in-memory [`CronStore`] fake (jobs and run logs in maps).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::cron::run_log::{RunsQuery, page_runs};
use crate::cron::store::{fit_run_entry, job_json};
use crate::cron::{
    CronJob, CronRunLogEntry, CronStore, CronStoreError, Reservation, RunSlot, RunsPage,
    StoredCronJob,
};
use clawless_base::testing::lock_state;

#[derive(Debug, Default)]
struct State {
    /// Jobs by id; a `BTreeMap` lists them in id order, as the port asks.
    jobs: BTreeMap<String, StoredCronJob>,
    /// Run logs by job id, each line as the JSON a real store keeps, in append order.
    logs: BTreeMap<String, Vec<String>>,
}

/// An in-memory [`CronStore`]: every operation runs under one lock, so reservations are
/// trivially atomic. Lines are kept as the JSON [`fit_run_entry`] produces, so the fake cuts
/// oversized lines exactly as the real stores do. Clones share the same jobs and logs.
#[derive(Debug, Clone, Default)]
pub struct InMemoryCronStore {
    state: Arc<Mutex<State>>,
}

impl InMemoryCronStore {
    /// A store with no jobs and no logs.
    pub fn new() -> Self {
        Self::default()
    }
}

fn entry_from_json(json: &str) -> Result<CronRunLogEntry, CronStoreError> {
    serde_json::from_str(json)
        .map_err(|err| CronStoreError::backend("unreadable in-memory run-log line", err))
}

#[async_trait]
impl CronStore for InMemoryCronStore {
    async fn list_jobs(&self) -> Result<Vec<StoredCronJob>, CronStoreError> {
        Ok(lock_state(&self.state).jobs.values().cloned().collect())
    }

    async fn get_job(&self, job_id: &str) -> Result<Option<StoredCronJob>, CronStoreError> {
        Ok(lock_state(&self.state).jobs.get(job_id).cloned())
    }

    async fn put_job(&self, job: &CronJob, expected: Option<u64>) -> Result<u64, CronStoreError> {
        job_json(job)?;
        let mut state = lock_state(&self.state);
        let current = state.jobs.get_mut(&job.id);
        match (current, expected) {
            (None, None) => {
                state
                    .jobs
                    .insert(job.id.clone(), StoredCronJob::created(job.clone()));
                Ok(1)
            }
            (Some(_), None) => Err(CronStoreError::Conflict {
                job_id: job.id.clone(),
                expected: None,
            }),
            (None, Some(_)) => Err(CronStoreError::NotFound {
                job_id: job.id.clone(),
            }),
            (Some(stored), Some(version)) if stored.version == version => {
                stored.job = job.clone();
                stored.version = version.saturating_add(1);
                Ok(stored.version)
            }
            (Some(_), Some(version)) => Err(CronStoreError::Conflict {
                job_id: job.id.clone(),
                expected: Some(version),
            }),
        }
    }

    async fn delete_job(
        &self, job_id: &str, expected: Option<u64>,
    ) -> Result<bool, CronStoreError> {
        let mut state = lock_state(&self.state);
        match (state.jobs.get(job_id), expected) {
            (None, _) => Ok(false),
            (Some(stored), Some(version)) if stored.version != version => {
                Err(CronStoreError::Conflict {
                    job_id: job_id.to_owned(),
                    expected: Some(version),
                })
            }
            (Some(_), _) => Ok(state.jobs.remove(job_id).is_some()),
        }
    }

    async fn reserve_run(
        &self, job_id: &str, slot: RunSlot, now_ms: u64, expected_version: u64,
    ) -> Result<Reservation, CronStoreError> {
        let mut state = lock_state(&self.state);
        let Some(stored) = state.jobs.get_mut(job_id) else {
            return Err(CronStoreError::NotFound {
                job_id: job_id.to_owned(),
            });
        };
        let reservation = stored.reserve(slot, now_ms, expected_version)?;
        if let Reservation::Reserved(reserved) = &reservation {
            *stored = (**reserved).clone();
        }
        Ok(reservation)
    }

    async fn append_run(
        &self, entry: &CronRunLogEntry, keep_lines: usize,
    ) -> Result<(), CronStoreError> {
        let line = fit_run_entry(entry)?;
        let mut state = lock_state(&self.state);
        let log = state.logs.entry(entry.job_id.clone()).or_default();
        log.push(line);
        let excess = log.len().saturating_sub(keep_lines.max(1));
        log.drain(..excess);
        Ok(())
    }

    async fn runs(
        &self, job_id: Option<&str>, query: &RunsQuery,
    ) -> Result<RunsPage, CronStoreError> {
        let lines: Vec<String> = {
            let state = lock_state(&self.state);
            match job_id {
                Some(job_id) => state.logs.get(job_id).cloned().unwrap_or_default(),
                None => state.logs.values().flatten().cloned().collect(),
            }
        };
        let entries = lines
            .iter()
            .map(|line| entry_from_json(line))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(page_runs(&entries, query))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{CronStoreDeviations, cron_store_contract};

    #[tokio::test]
    async fn in_memory_cron_store_passes_the_cron_store_contract() {
        cron_store_contract(&InMemoryCronStore::new(), CronStoreDeviations::default()).await;
    }

    #[tokio::test]
    async fn two_cron_contract_runs_can_share_one_store() {
        let store = InMemoryCronStore::new();
        tokio::join!(
            cron_store_contract(&store, CronStoreDeviations::default()),
            cron_store_contract(&store, CronStoreDeviations::default())
        );
    }
}
