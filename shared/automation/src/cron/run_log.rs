//! Reading run logs and job lists a page at a time (`runs`, `list`), and the `status`
//! summary.
//!
//! The runtime reads the entries (one job's log, or every job's with their names for
//! `scope: "all"`) and the jobs; this module filters, sorts and cuts the page.

use serde::{Deserialize, Serialize};

use super::CronInputError;
use super::config::CronConfig;
use super::schedule::next_wake_at;
use super::types::{CronJob, CronRunLogEntry, DeliveryStatus, JobsPage, RunStatus, RunsPage};

/// Entries of a `runs` page when no limit is given.
pub const DEFAULT_RUNS_LIMIT: usize = 50;

/// The largest page of `runs` and `list`.
pub const MAX_PAGE_LIMIT: usize = 200;

/// Jobs of a `list` page when no limit is given (all of them, up to the maximum).
pub const DEFAULT_LIST_LIMIT: usize = MAX_PAGE_LIMIT;

/// Sort direction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SortDir {
    /// Oldest (or earliest) first.
    Asc,
    /// Newest first.
    #[default]
    Desc,
}

/// The parameters of `runs`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunsQuery {
    /// Page size: 1 to 200, default 50.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Entries to skip.
    #[serde(default)]
    pub offset: Option<u64>,
    /// `desc` (newest first, the default) or `asc`.
    #[serde(default)]
    pub sort_dir: Option<SortDir>,
    /// One status, or `all`.
    #[serde(default)]
    pub status: Option<String>,
    /// Several statuses.
    #[serde(default)]
    pub statuses: Option<Vec<RunStatus>>,
    /// One delivery status.
    #[serde(default)]
    pub delivery_status: Option<DeliveryStatus>,
    /// Several delivery statuses.
    #[serde(default)]
    pub delivery_statuses: Option<Vec<DeliveryStatus>>,
    /// Text to find in the summary, the error or the job id (case-insensitive).
    #[serde(default)]
    pub query: Option<String>,
}

impl RunsQuery {
    /// The gateway's check of the parameters: `invalid cron.runs params: <detail>`.
    pub fn check(&self) -> Result<(), CronInputError> {
        let invalid =
            |detail: &str| CronInputError::new(format!("invalid cron.runs params: {detail}"));
        match self.limit {
            Some(0) => return Err(invalid("limit must be >= 1")),
            Some(limit) if limit > MAX_PAGE_LIMIT as u64 => {
                return Err(invalid(&format!("limit must be <= {MAX_PAGE_LIMIT}")));
            }
            _ => {}
        }
        match self.status.as_deref() {
            None | Some("all" | "ok" | "error" | "skipped") => Ok(()),
            Some(_) => Err(invalid(
                r#"status must be "all", "ok", "error" or "skipped""#,
            )),
        }
    }

    fn statuses(&self) -> Vec<RunStatus> {
        let mut statuses = self.statuses.clone().unwrap_or_default();
        match self.status.as_deref() {
            Some("ok") => statuses.push(RunStatus::Ok),
            Some("error") => statuses.push(RunStatus::Error),
            Some("skipped") => statuses.push(RunStatus::Skipped),
            _ => {}
        }
        statuses
    }

    fn delivery_statuses(&self) -> Vec<DeliveryStatus> {
        let mut statuses = self.delivery_statuses.clone().unwrap_or_default();
        statuses.extend(self.delivery_status);
        statuses
    }
}

/// A page of run-log entries: filtered, sorted by `ts` (newest first unless `asc`), cut at
/// `offset` and `limit` (clamped to 1…200, default 50).
pub fn page_runs(entries: &[CronRunLogEntry], query: &RunsQuery) -> RunsPage {
    let statuses = query.statuses();
    let delivery_statuses = query.delivery_statuses();
    let needle = query
        .query
        .as_deref()
        .map(str::trim)
        .filter(|needle| !needle.is_empty())
        .map(str::to_lowercase);
    let mut matching: Vec<&CronRunLogEntry> = entries
        .iter()
        .filter(|entry| {
            statuses.is_empty()
                || entry
                    .status
                    .is_some_and(|status| statuses.contains(&status))
        })
        .filter(|entry| {
            delivery_statuses.is_empty()
                || entry
                    .delivery_status
                    .is_some_and(|status| delivery_statuses.contains(&status))
        })
        .filter(|entry| {
            needle.as_deref().is_none_or(|needle| {
                [
                    entry.summary.as_deref(),
                    entry.error.as_deref(),
                    Some(&entry.job_id),
                ]
                .into_iter()
                .flatten()
                .any(|text| text.to_lowercase().contains(needle))
            })
        })
        .collect();
    // Stable: entries with the same `ts` keep their log order (reversed for `desc`).
    matching.sort_by_key(|entry| entry.ts);
    if query.sort_dir.unwrap_or_default() == SortDir::Desc {
        matching.reverse();
    }
    let limit = clamp_limit(query.limit, DEFAULT_RUNS_LIMIT);
    let (offset, page, has_more) = cut(&matching, query.offset, limit);
    RunsPage {
        entries: page.iter().map(|entry| (*entry).clone()).collect(),
        total: matching.len(),
        offset,
        limit,
        has_more,
        next_offset: has_more.then_some(offset + page.len()),
    }
}

/// The parameters of `list`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Include disabled jobs.
    pub include_disabled: bool,
    /// Page size: 1 to 200, default 200.
    pub limit: Option<u64>,
    /// Jobs to skip.
    pub offset: Option<u64>,
}

/// A page of jobs: enabled ones only unless `include_disabled`, soonest `nextRunAtMs` first
/// (jobs without one last, then by name).
pub fn page_jobs(jobs: &[CronJob], query: &ListQuery) -> JobsPage {
    let mut matching: Vec<&CronJob> = jobs
        .iter()
        .filter(|job| query.include_disabled || job.enabled)
        .collect();
    matching.sort_by(|a, b| {
        let key = |job: &CronJob| job.state.next_run_at_ms.unwrap_or(u64::MAX);
        key(a).cmp(&key(b)).then_with(|| a.name.cmp(&b.name))
    });
    let limit = clamp_limit(query.limit, DEFAULT_LIST_LIMIT);
    let (offset, page, has_more) = cut(&matching, query.offset, limit);
    JobsPage {
        jobs: page.iter().map(|job| (*job).clone()).collect(),
        total: matching.len(),
        offset,
        limit,
        has_more,
        next_offset: has_more.then_some(offset + page.len()),
    }
}

/// What `status` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CronStatus {
    /// Whether scheduled jobs fire (`cron.enabled`).
    pub enabled: bool,
    /// Where the jobs are kept (a path, table or URI), if the runtime names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_path: Option<String>,
    /// How many jobs there are.
    pub jobs: usize,
    /// When the scheduler next wakes.
    pub next_wake_at_ms: Option<u64>,
}

/// The `status` answer for `jobs`.
pub fn cron_status(
    config: &CronConfig, jobs: &[CronJob], store_path: Option<String>,
) -> CronStatus {
    CronStatus {
        enabled: config.enabled(),
        store_path,
        jobs: jobs.len(),
        next_wake_at_ms: next_wake_at(jobs),
    }
}

fn clamp_limit(limit: Option<u64>, default: usize) -> usize {
    limit
        .map_or(default, |limit| {
            usize::try_from(limit).unwrap_or(MAX_PAGE_LIMIT)
        })
        .clamp(1, MAX_PAGE_LIMIT)
}

fn cut<T>(items: &[T], offset: Option<u64>, limit: usize) -> (usize, &[T], bool) {
    let offset = offset
        .and_then(|offset| usize::try_from(offset).ok())
        .unwrap_or(0)
        .min(items.len());
    let end = offset.saturating_add(limit).min(items.len());
    (offset, &items[offset..end], end < items.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cron::schedule::tests::job;
    use crate::cron::types::CronSchedule;

    fn entry(ts: u64, status: RunStatus) -> CronRunLogEntry {
        CronRunLogEntry {
            ts,
            job_id: "j".into(),
            action: "finished".into(),
            status: Some(status),
            summary: Some(format!("run {ts}")),
            ..CronRunLogEntry::default()
        }
    }

    fn log(count: u64) -> Vec<CronRunLogEntry> {
        (1..=count)
            .map(|ts| {
                entry(
                    ts,
                    if ts % 10 == 0 {
                        RunStatus::Error
                    } else {
                        RunStatus::Ok
                    },
                )
            })
            .collect()
    }

    #[test]
    fn the_default_page_is_the_fifty_newest() {
        // Vector 37.
        let page = page_runs(&log(120), &RunsQuery::default());
        assert_eq!(page.entries.len(), 50);
        assert_eq!(page.entries.first().map(|e| e.ts), Some(120));
        assert_eq!(page.entries.last().map(|e| e.ts), Some(71));
        assert_eq!(
            (
                page.total,
                page.offset,
                page.limit,
                page.has_more,
                page.next_offset
            ),
            (120, 0, 50, true, Some(50))
        );
        let last = page_runs(
            &log(120),
            &RunsQuery {
                offset: Some(100),
                ..RunsQuery::default()
            },
        );
        assert_eq!(
            (last.entries.len(), last.has_more, last.next_offset),
            (20, false, None)
        );
        let json = serde_json::to_value(&last).expect("json");
        assert_eq!(json["nextOffset"], serde_json::Value::Null);
        assert_eq!(json["hasMore"], false);
    }

    #[test]
    fn limits_above_two_hundred_are_refused_by_the_check_and_clamped_by_the_reader() {
        // Vector 37.
        let big = RunsQuery {
            limit: Some(500),
            ..RunsQuery::default()
        };
        assert_eq!(
            big.check().map_err(|e| e.to_string()),
            Err("invalid cron.runs params: limit must be <= 200".to_owned())
        );
        assert_eq!(page_runs(&log(300), &big).entries.len(), 200);
        let zero = RunsQuery {
            limit: Some(0),
            ..RunsQuery::default()
        };
        assert!(zero.check().is_err());
        assert_eq!(page_runs(&log(3), &zero).entries.len(), 1);
    }

    #[test]
    fn runs_filter_by_status_delivery_and_text_and_sort_either_way() {
        let mut entries = log(30);
        entries[4].delivery_status = Some(DeliveryStatus::NotDelivered);
        entries[6].error = Some("Rate LIMIT hit".into());
        let errors = page_runs(
            &entries,
            &RunsQuery {
                status: Some("error".into()),
                sort_dir: Some(SortDir::Asc),
                ..RunsQuery::default()
            },
        );
        let ts: Vec<u64> = errors.entries.iter().map(|e| e.ts).collect();
        assert_eq!(ts, [10, 20, 30]);
        let undelivered = page_runs(
            &entries,
            &RunsQuery {
                delivery_statuses: Some(vec![DeliveryStatus::NotDelivered]),
                ..RunsQuery::default()
            },
        );
        assert_eq!(undelivered.total, 1);
        let found = page_runs(
            &entries,
            &RunsQuery {
                query: Some("rate limit".into()),
                ..RunsQuery::default()
            },
        );
        assert_eq!(found.entries.iter().map(|e| e.ts).collect::<Vec<_>>(), [7]);
        let by_summary = page_runs(
            &entries,
            &RunsQuery {
                query: Some("RUN 2".into()),
                ..RunsQuery::default()
            },
        );
        assert_eq!(by_summary.total, 11, "run 2 and run 20-29");
        assert!(
            RunsQuery {
                status: Some("bad".into()),
                ..RunsQuery::default()
            }
            .check()
            .is_err()
        );
    }

    #[test]
    fn lists_show_enabled_jobs_soonest_first() {
        let mut a = job(
            "a",
            CronSchedule::Every {
                every_ms: 1,
                anchor_ms: None,
            },
        );
        a.state.next_run_at_ms = Some(30);
        let mut b = a.clone();
        b.id = "b".into();
        b.name = "b".into();
        b.state.next_run_at_ms = Some(10);
        let mut c = a.clone();
        c.id = "c".into();
        c.enabled = false;
        let jobs = [a, b, c];
        let ids = |page: JobsPage| page.jobs.into_iter().map(|j| j.id).collect::<Vec<_>>();
        assert_eq!(ids(page_jobs(&jobs, &ListQuery::default())), ["b", "a"]);
        assert_eq!(
            ids(page_jobs(
                &jobs,
                &ListQuery {
                    include_disabled: true,
                    ..ListQuery::default()
                }
            )),
            ["b", "a", "c"]
        );
        let status = cron_status(&CronConfig::default(), &jobs, None);
        assert_eq!(
            serde_json::to_value(status).expect("json"),
            serde_json::json!({"enabled": true, "jobs": 3, "nextWakeAtMs": 10})
        );
    }
}
