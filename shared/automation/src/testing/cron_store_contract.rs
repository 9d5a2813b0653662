//! The [`CronStore`] contract: [`cron_store_contract`] and [`CronStoreDeviations`].

use std::future::Future;
use std::pin::Pin;

use crate::cron::run_log::{RunsQuery, SortDir};
use crate::cron::store::{MAX_CRON_JOB_BYTES, MAX_RUN_ENTRY_BYTES, TRUNCATION_MARKER};
use crate::cron::{
    AgentTurn, CronJob, CronJobState, CronPayload, CronRunLogEntry, CronSchedule, CronStore,
    CronStoreError, DeliveryStatus, Reservation, ReservedSlots, RunSlot, RunStatus, RunsPage,
    SessionTarget, StoredCronJob, WakeMode,
};
use clawless_base::testing::{join_all, run_label, sized_json_body};

/// How a cron-store backend may knowingly differ from a real database in
/// [`cron_store_contract`]. Each field relaxes one documented expectation; the default relaxes
/// nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CronStoreDeviations {
    /// Concurrent conditional writes to one item are not atomic (`moto_server` checks a
    /// condition and then writes without a lock, so two racing reservations can both pass).
    /// With this set, the race of concurrent reservers is skipped; every condition is still
    /// checked one call at a time.
    pub conditional_writes_not_atomic: bool,
}

/// Runs the [`CronStore`] contract against `store`, panicking with a description of the first
/// broken expectation. Job ids start with a label unique to this call (and run-log queries
/// filter on it), so the store may be shared with other runs.
pub async fn cron_store_contract(store: &dyn CronStore, deviations: CronStoreDeviations) {
    let suite = CronContract {
        store,
        run: run_label("cron"),
    };
    suite.a_created_job_reads_back_whole_at_version_one().await;
    suite
        .creating_an_existing_id_is_a_conflict_and_changes_nothing()
        .await;
    suite.a_replace_needs_the_version_it_read().await;
    suite.jobs_are_listed_whole_in_id_order().await;
    suite
        .a_delete_removes_the_job_once_and_respects_the_version()
        .await;
    suite
        .a_slot_is_reserved_once_and_earlier_slots_are_refused()
        .await;
    suite.a_replace_keeps_the_reserved_slots().await;
    suite.manual_runs_have_a_slot_series_of_their_own().await;
    suite.reserving_needs_the_job_at_the_version_read().await;
    if !deviations.conditional_writes_not_atomic {
        suite
            .concurrent_reservers_of_one_slot_have_exactly_one_winner()
            .await;
    }
    suite
        .a_run_log_pages_newest_first_and_filters_like_page_runs()
        .await;
    suite
        .a_run_log_keeps_its_newest_lines_in_append_order()
        .await;
    suite
        .runs_of_every_job_merge_the_logs_including_removed_jobs()
        .await;
    suite
        .ids_and_jobs_the_store_cannot_hold_are_rejected()
        .await;
    suite.an_oversized_run_line_is_cut_not_lost().await;
    suite.large_and_unicode_jobs_round_trip_exactly().await;
}

struct CronContract<'a> {
    store: &'a dyn CronStore,
    run: String,
}

const T0: u64 = 1_700_000_000_000;

impl CronContract<'_> {
    fn id(&self, name: &str) -> String {
        format!("{}-{name}", self.run)
    }

    fn job(&self, name: &str) -> CronJob {
        CronJob {
            id: self.id(name),
            agent_id: Some("main".into()),
            session_key: Some("agent:main:telegram:direct:42".into()),
            name: format!("Job {name}"),
            description: None,
            enabled: true,
            delete_after_run: None,
            created_at_ms: T0,
            updated_at_ms: T0,
            schedule: CronSchedule::Cron {
                expr: "0 9 * * 1-5".into(),
                tz: Some("Europe/Berlin".into()),
                stagger_ms: None,
            },
            session_target: SessionTarget::Isolated,
            wake_mode: WakeMode::Now,
            payload: CronPayload::AgentTurn(AgentTurn {
                message: format!("Summarise {name}"),
                timeout_seconds: Some(120),
                ..AgentTurn::default()
            }),
            delivery: None,
            failure_alert: None,
            state: CronJobState {
                next_run_at_ms: Some(T0 + 60_000),
                ..CronJobState::default()
            },
        }
    }

    fn entry(&self, name: &str, ts: u64, status: RunStatus) -> CronRunLogEntry {
        CronRunLogEntry {
            ts,
            job_id: self.id(name),
            action: "finished".into(),
            status: Some(status),
            summary: Some(format!("run at {ts}")),
            delivery_status: Some(DeliveryStatus::NotRequested),
            run_at_ms: Some(ts - 10),
            duration_ms: Some(10),
            ..CronRunLogEntry::default()
        }
    }

    async fn create(&self, job: &CronJob) -> u64 {
        self.store
            .put_job(job, None)
            .await
            .unwrap_or_else(|err| panic!("create {}: {err}", job.id))
    }

    async fn replace(&self, job: &CronJob, expected: u64) -> u64 {
        self.store
            .put_job(job, Some(expected))
            .await
            .unwrap_or_else(|err| panic!("replace {} at {expected}: {err}", job.id))
    }

    async fn get(&self, job_id: &str) -> Option<StoredCronJob> {
        self.store
            .get_job(job_id)
            .await
            .unwrap_or_else(|err| panic!("get {job_id}: {err}"))
    }

    async fn get_some(&self, job_id: &str) -> StoredCronJob {
        self.get(job_id)
            .await
            .unwrap_or_else(|| panic!("job {job_id} should exist"))
    }

    async fn reserve(&self, job_id: &str, slot: RunSlot, now: u64, expected: u64) -> Reservation {
        self.store
            .reserve_run(job_id, slot, now, expected)
            .await
            .unwrap_or_else(|err| panic!("reserve {slot} of {job_id} at {expected}: {err}"))
    }

    async fn reserved(
        &self, job_id: &str, slot: RunSlot, now: u64, expected: u64,
    ) -> StoredCronJob {
        match self.reserve(job_id, slot, now, expected).await {
            Reservation::Reserved(stored) => *stored,
            other => panic!("{slot} of {job_id} should be reserved, got {other:?}"),
        }
    }

    async fn append(&self, entry: &CronRunLogEntry, keep_lines: usize) {
        self.store
            .append_run(entry, keep_lines)
            .await
            .unwrap_or_else(|err| panic!("append to {}: {err}", entry.job_id));
    }

    async fn runs(&self, job_id: Option<&str>, query: &RunsQuery) -> RunsPage {
        self.store
            .runs(job_id, query)
            .await
            .unwrap_or_else(|err| panic!("runs of {job_id:?}: {err}"))
    }

    async fn a_created_job_reads_back_whole_at_version_one(&self) {
        let job = self.job("whole");
        assert_eq!(self.get(&job.id).await, None, "before create");
        assert_eq!(self.create(&job).await, 1, "a new job is at version 1");
        assert_eq!(
            self.get_some(&job.id).await,
            StoredCronJob {
                job,
                version: 1,
                reserved: ReservedSlots::default()
            },
            "the job reads back whole, with no slot reserved"
        );
    }

    async fn creating_an_existing_id_is_a_conflict_and_changes_nothing(&self) {
        let job = self.job("twice");
        self.create(&job).await;
        let mut other = job.clone();
        other.name = "Other".into();
        let second = self.store.put_job(&other, None).await;
        assert!(
            matches!(
                &second,
                Err(CronStoreError::Conflict { job_id, expected: None }) if *job_id == job.id
            ),
            "a second create of one id: {second:?}"
        );
        let stored = self.get_some(&job.id).await;
        assert_eq!((stored.job, stored.version), (job, 1), "the first stands");
    }

    async fn a_replace_needs_the_version_it_read(&self) {
        let mut job = self.job("replace");
        self.create(&job).await;
        job.enabled = false;
        job.state.last_status = Some(RunStatus::Ok);
        assert_eq!(self.replace(&job, 1).await, 2, "a replace adds one");
        assert_eq!(self.replace(&job, 2).await, 3);
        let mut stale = job.clone();
        stale.name = "stale".into();
        let refused = self.store.put_job(&stale, Some(2)).await;
        assert!(
            matches!(
                refused,
                Err(CronStoreError::Conflict {
                    expected: Some(2),
                    ..
                })
            ),
            "a replace at a version that moved on: {refused:?}"
        );
        let stored = self.get_some(&job.id).await;
        assert_eq!(
            (stored.job, stored.version),
            (job, 3),
            "the stale write lost"
        );
        let missing = self.job("never-created");
        let replaced = self.store.put_job(&missing, Some(1)).await;
        assert!(
            matches!(replaced, Err(CronStoreError::NotFound { .. })),
            "a replace of a job that is not there: {replaced:?}"
        );
        assert_eq!(self.get(&missing.id).await, None, "and nothing is created");
    }

    async fn jobs_are_listed_whole_in_id_order(&self) {
        let names = ["list-b", "list-a", "list-c"];
        for name in names {
            self.create(&self.job(name)).await;
        }
        let mut second = self.job("list-b");
        second.description = Some("changed".into());
        self.replace(&second, 1).await;
        let prefix = self.id("list-");
        let listed: Vec<StoredCronJob> = self
            .store
            .list_jobs()
            .await
            .unwrap_or_else(|err| panic!("list: {err}"))
            .into_iter()
            .filter(|stored| stored.job.id.starts_with(&prefix))
            .collect();
        let ids: Vec<&str> = listed.iter().map(|stored| stored.job.id.as_str()).collect();
        assert_eq!(
            ids,
            [self.id("list-a"), self.id("list-b"), self.id("list-c")],
            "in id order"
        );
        assert_eq!(listed[1].job, second, "jobs are listed whole");
        assert_eq!(
            listed.iter().map(|s| s.version).collect::<Vec<_>>(),
            [1, 2, 1]
        );
    }

    async fn a_delete_removes_the_job_once_and_respects_the_version(&self) {
        let job = self.job("delete");
        let missing = self.id("delete-missing");
        let deleted = self.store.delete_job(&missing, Some(3)).await;
        assert!(
            matches!(deleted, Ok(false)),
            "deleting a job that is not there: {deleted:?}"
        );
        self.create(&job).await;
        self.replace(&job, 1).await;
        let stale = self.store.delete_job(&job.id, Some(1)).await;
        assert!(
            matches!(
                stale,
                Err(CronStoreError::Conflict {
                    expected: Some(1),
                    ..
                })
            ),
            "a delete at a version that moved on: {stale:?}"
        );
        assert!(self.get(&job.id).await.is_some(), "the job stays");
        let deleted = self.store.delete_job(&job.id, Some(2)).await;
        assert!(matches!(deleted, Ok(true)), "{deleted:?}");
        assert_eq!(self.get(&job.id).await, None);
        let again = self.store.delete_job(&job.id, None).await;
        assert!(matches!(again, Ok(false)), "a second delete: {again:?}");

        // A job created again under the id starts afresh: version 1, no slots reserved.
        assert_eq!(self.create(&job).await, 1);
        self.reserved(&job.id, RunSlot::Scheduled(T0), T0, 1).await;
        let unconditional = self.store.delete_job(&job.id, None).await;
        assert!(matches!(unconditional, Ok(true)), "{unconditional:?}");
        self.create(&job).await;
        let fresh = self.get_some(&job.id).await;
        assert_eq!(
            (fresh.version, fresh.reserved),
            (1, ReservedSlots::default())
        );
        self.reserved(&job.id, RunSlot::Scheduled(T0), T0, 1).await;
    }

    async fn a_slot_is_reserved_once_and_earlier_slots_are_refused(&self) {
        // GIVEN a job whose last run failed
        let mut job = self.job("slots");
        job.state.last_error = Some("timeout".into());
        self.create(&job).await;
        let slot = T0 + 60_000;

        // WHEN its slot is reserved
        let reserved = self
            .reserved(&job.id, RunSlot::Scheduled(slot), slot + 5, 1)
            .await;

        // THEN it runs since now, its error is cleared, the slot is recorded, one version on
        let mut running = job.clone();
        running.state.running_at_ms = Some(slot + 5);
        running.state.last_error = None;
        let expected = StoredCronJob {
            job: running,
            version: 2,
            reserved: ReservedSlots {
                scheduled_ms: Some(slot),
                manual_ms: None,
            },
        };
        assert_eq!(reserved, expected, "the reservation's answer");
        assert_eq!(self.get_some(&job.id).await, expected, "as stored");

        // AND the same firing delivered again, or an earlier one, changes nothing
        for (again, version) in [(slot, 2), (slot, 1), (slot - 1, 2), (0, 2)] {
            assert_eq!(
                self.reserve(&job.id, RunSlot::Scheduled(again), slot + 9, version)
                    .await,
                Reservation::AlreadyTaken { last_slot_ms: slot },
                "slot {again} at version {version}"
            );
        }
        assert_eq!(self.get_some(&job.id).await, expected, "unchanged");

        // AND the next slot is reserved at the current version
        let next = self
            .reserved(&job.id, RunSlot::Scheduled(slot + 60_000), slot + 60_001, 2)
            .await;
        assert_eq!(next.version, 3);
        assert_eq!(next.reserved.scheduled_ms, Some(slot + 60_000));
    }

    async fn a_replace_keeps_the_reserved_slots(&self) {
        // GIVEN a reserved slot, and the run's outcome written back as a replace
        let job = self.job("kept");
        self.create(&job).await;
        let slot = T0 + 60_000;
        let reserved = self
            .reserved(&job.id, RunSlot::Scheduled(slot), slot, 1)
            .await;
        let mut finished = reserved.job.clone();
        finished.state.running_at_ms = None;
        finished.state.last_status = Some(RunStatus::Ok);
        finished.state.next_run_at_ms = Some(slot + 60_000);
        assert_eq!(self.replace(&finished, reserved.version).await, 3);

        // WHEN the finished slot's firing arrives again THEN it is still refused
        assert_eq!(
            self.reserve(&job.id, RunSlot::Scheduled(slot), slot + 70_000, 3)
                .await,
            Reservation::AlreadyTaken { last_slot_ms: slot }
        );
        let stored = self.get_some(&job.id).await;
        assert_eq!(stored.job, finished);
        assert_eq!(stored.reserved.scheduled_ms, Some(slot));
    }

    async fn manual_runs_have_a_slot_series_of_their_own(&self) {
        // GIVEN a job whose scheduled slot at T0 + 10 min ran
        let job = self.job("manual");
        self.create(&job).await;
        let slot = T0 + 600_000;
        self.reserved(&job.id, RunSlot::Scheduled(slot), slot, 1)
            .await;

        // WHEN a manual run requested earlier than that slot is reserved
        let requested = T0 + 1_000;
        let manual = self
            .reserved(&job.id, RunSlot::Manual(requested), slot + 1, 2)
            .await;

        // THEN it runs, and both marks are kept
        assert_eq!(
            manual.reserved,
            ReservedSlots {
                scheduled_ms: Some(slot),
                manual_ms: Some(requested),
            }
        );
        // AND the same request again is a duplicate, but not the scheduled series' business
        assert_eq!(
            self.reserve(&job.id, RunSlot::Manual(requested), slot + 2, 3)
                .await,
            Reservation::AlreadyTaken {
                last_slot_ms: requested
            }
        );
        assert_eq!(
            self.reserve(&job.id, RunSlot::Scheduled(slot), slot + 2, 3)
                .await,
            Reservation::AlreadyTaken { last_slot_ms: slot }
        );
        let later = self
            .reserved(&job.id, RunSlot::Manual(requested + 1), slot + 3, 3)
            .await;
        assert_eq!(later.reserved.manual_ms, Some(requested + 1));
        assert_eq!(later.reserved.scheduled_ms, Some(slot));
        assert_eq!(later.job.state.running_at_ms, Some(slot + 3));
    }

    async fn reserving_needs_the_job_at_the_version_read(&self) {
        let missing = self.id("reserve-missing");
        let result = self
            .store
            .reserve_run(&missing, RunSlot::Scheduled(T0), T0, 1)
            .await;
        assert!(
            matches!(result, Err(CronStoreError::NotFound { .. })),
            "reserving a job that is not there: {result:?}"
        );
        assert_eq!(self.get(&missing).await, None, "creates nothing");

        let job = self.job("reserve-stale");
        self.create(&job).await;
        self.replace(&job, 1).await;
        let stale = self
            .store
            .reserve_run(&job.id, RunSlot::Scheduled(T0), T0, 1)
            .await;
        assert!(
            matches!(
                stale,
                Err(CronStoreError::Conflict {
                    expected: Some(1),
                    ..
                })
            ),
            "a reservation at a version that moved on: {stale:?}"
        );
        let stored = self.get_some(&job.id).await;
        assert_eq!(
            (
                stored.version,
                stored.reserved,
                stored.job.state.running_at_ms
            ),
            (2, ReservedSlots::default(), None),
            "a refused reservation writes nothing"
        );
        self.reserved(&job.id, RunSlot::Scheduled(T0), T0, 2).await;
    }

    async fn concurrent_reservers_of_one_slot_have_exactly_one_winner(&self) {
        // GIVEN one job and eight deliveries of its firing, all having read version 1
        let job = self.job("race");
        self.create(&job).await;
        let job_id = job.id.as_str();
        let slot = T0 + 60_000;
        // WHEN they all reserve at once
        let attempts = (0..8u64)
            .map(|reserver| {
                Box::pin(async move {
                    let result = self
                        .store
                        .reserve_run(job_id, RunSlot::Scheduled(slot), slot + reserver, 1)
                        .await;
                    (reserver, result)
                }) as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<(u64, Result<Reservation, CronStoreError>)> = join_all(attempts).await;
        // THEN exactly one reserved it, and the others were told it was taken
        let winners: Vec<u64> = results
            .iter()
            .filter(|(_, result)| matches!(result, Ok(Reservation::Reserved(_))))
            .map(|(reserver, _)| *reserver)
            .collect();
        assert_eq!(
            winners.len(),
            1,
            "exactly one reservation wins: {results:?}"
        );
        assert!(
            results.iter().all(|(_, result)| match result {
                Ok(Reservation::Reserved(_)) => true,
                Ok(Reservation::AlreadyTaken { last_slot_ms }) => *last_slot_ms == slot,
                Err(_) => false,
            }),
            "the others are duplicates: {results:?}"
        );
        let stored = self.get_some(job_id).await;
        assert_eq!(stored.version, 2, "one write happened");
        assert_eq!(
            stored.job.state.running_at_ms,
            Some(slot + winners[0]),
            "the winner's reservation is stored"
        );
    }

    async fn a_run_log_pages_newest_first_and_filters_like_page_runs(&self) {
        // GIVEN seven runs of one job, the third and sixth failed
        for n in 1..=7 {
            let status = if n % 3 == 0 {
                RunStatus::Error
            } else {
                RunStatus::Ok
            };
            self.append(&self.entry("log", T0 + n, status), 100).await;
        }
        let job_id = self.id("log");
        let ts = |page: &RunsPage| page.entries.iter().map(|e| e.ts - T0).collect::<Vec<_>>();

        // THEN the default page is all of them, newest first, as logged
        let all = self.runs(Some(&job_id), &RunsQuery::default()).await;
        assert_eq!(ts(&all), [7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(all.entries[0], self.entry("log", T0 + 7, RunStatus::Ok));
        // AND pages cut at offset and limit
        let page = self
            .runs(
                Some(&job_id),
                &RunsQuery {
                    limit: Some(3),
                    offset: Some(2),
                    ..RunsQuery::default()
                },
            )
            .await;
        assert_eq!(ts(&page), [5, 4, 3]);
        assert_eq!(
            (page.total, page.has_more, page.next_offset),
            (7, true, Some(5))
        );
        // AND filters and the ascending order apply
        let errors = self
            .runs(
                Some(&job_id),
                &RunsQuery {
                    status: Some("error".into()),
                    sort_dir: Some(SortDir::Asc),
                    ..RunsQuery::default()
                },
            )
            .await;
        assert_eq!(ts(&errors), [3, 6]);
        // AND a job with no log has an empty page
        let none = self
            .runs(Some(&self.id("no-log")), &RunsQuery::default())
            .await;
        assert_eq!((none.entries.len(), none.total), (0, 0));
    }

    async fn a_run_log_keeps_its_newest_lines_in_append_order(&self) {
        // GIVEN a log kept to three lines
        for n in 1..=5 {
            self.append(&self.entry("prune", T0 + n, RunStatus::Ok), 3)
                .await;
        }
        let job_id = self.id("prune");
        let ts = |page: RunsPage| page.entries.iter().map(|e| e.ts - T0).collect::<Vec<_>>();
        // THEN the newest three remain
        assert_eq!(
            ts(self.runs(Some(&job_id), &RunsQuery::default()).await),
            [5, 4, 3]
        );
        // AND "newest" is append order, as in a log file: a line with an older `ts`
        // appended last is kept, and the oldest appended goes
        self.append(&self.entry("prune", T0 + 1, RunStatus::Ok), 3)
            .await;
        assert_eq!(
            ts(self.runs(Some(&job_id), &RunsQuery::default()).await),
            [5, 4, 1]
        );
        // AND a keep of zero still keeps the line just written
        self.append(&self.entry("prune", T0 + 9, RunStatus::Error), 0)
            .await;
        assert_eq!(
            ts(self.runs(Some(&job_id), &RunsQuery::default()).await),
            [9]
        );
    }

    async fn runs_of_every_job_merge_the_logs_including_removed_jobs(&self) {
        // GIVEN logs of two jobs, one of them removed since, interleaved in time
        let kept = self.job("all-a");
        let removed = self.job("all-b");
        self.create(&kept).await;
        self.create(&removed).await;
        for (name, n) in [("all-a", 1), ("all-b", 2), ("all-a", 3), ("all-b", 4)] {
            self.append(&self.entry(name, T0 + n, RunStatus::Ok), 100)
                .await;
        }
        // Two lines with the same `ts` in different logs.
        self.append(&self.entry("all-b", T0 + 5, RunStatus::Ok), 100)
            .await;
        self.append(&self.entry("all-a", T0 + 5, RunStatus::Ok), 100)
            .await;
        assert!(matches!(
            self.store.delete_job(&removed.id, None).await,
            Ok(true)
        ));

        // WHEN every log is read (this run's lines only: the store may be shared)
        let query = RunsQuery {
            query: Some(self.id("all-")),
            sort_dir: Some(SortDir::Asc),
            ..RunsQuery::default()
        };
        let page = self.runs(None, &query).await;

        // THEN both logs are there, oldest first, equal `ts` ordered by job id
        let lines: Vec<(u64, String)> = page
            .entries
            .iter()
            .map(|e| (e.ts - T0, e.job_id.clone()))
            .collect();
        let (a, b) = (self.id("all-a"), self.id("all-b"));
        assert_eq!(
            lines,
            [
                (1, a.clone()),
                (2, b.clone()),
                (3, a.clone()),
                (4, b.clone()),
                (5, a.clone()),
                (5, b.clone()),
            ]
        );
        // AND the removed job's log is still its own
        let own = self.runs(Some(&b), &RunsQuery::default()).await;
        assert_eq!(own.total, 3);
    }

    async fn ids_and_jobs_the_store_cannot_hold_are_rejected(&self) {
        for bad in [
            String::new(),
            self.id("a/b"),
            self.id("a\\b"),
            self.id("nul\0"),
        ] {
            let mut job = self.job("bad");
            job.id = bad.clone();
            let result = self.store.put_job(&job, None).await;
            assert!(
                matches!(result, Err(CronStoreError::Rejected { .. })),
                "id {bad:?}: {result:?}"
            );
        }
        let mut big = self.job("too-big");
        big.description = Some("x".repeat(MAX_CRON_JOB_BYTES));
        let result = self.store.put_job(&big, None).await;
        assert!(
            matches!(&result, Err(CronStoreError::Rejected { reason, .. }) if reason.contains("bytes")),
            "a job over {MAX_CRON_JOB_BYTES} bytes: {result:?}"
        );
        assert_eq!(self.get(&big.id).await, None, "nothing was written");
        let mut entry = self.entry("bad", T0, RunStatus::Ok);
        entry.job_id = "a/b".into();
        let appended = self.store.append_run(&entry, 10).await;
        assert!(
            matches!(appended, Err(CronStoreError::Rejected { .. })),
            "a line for an id no log can have: {appended:?}"
        );
    }

    async fn an_oversized_run_line_is_cut_not_lost(&self) {
        let mut entry = self.entry("big-line", T0, RunStatus::Ok);
        entry.summary = Some("Ünïcödé summary 🦀 ".repeat(MAX_RUN_ENTRY_BYTES / 8));
        self.append(&entry, 10).await;
        let page = self.runs(Some(&entry.job_id), &RunsQuery::default()).await;
        assert_eq!(page.entries.len(), 1, "the run is recorded");
        let stored = &page.entries[0];
        let summary = stored.summary.as_deref().unwrap_or_default();
        assert!(
            summary.starts_with("Ünïcödé summary 🦀 ") && summary.ends_with(TRUNCATION_MARKER),
            "the summary keeps its start and says it was cut"
        );
        let json = serde_json::to_string(stored).unwrap_or_default();
        assert!(json.len() <= MAX_RUN_ENTRY_BYTES, "{} bytes", json.len());
        assert_eq!((stored.ts, stored.status), (entry.ts, entry.status));
    }

    async fn large_and_unicode_jobs_round_trip_exactly(&self) {
        let mut job = self.job("large");
        job.payload = CronPayload::AgentTurn(AgentTurn {
            message: sized_json_body("prompt", 40 * 1024),
            ..AgentTurn::default()
        });
        job.name = "Tägliche Übersicht 文件 🦀 \"quoted\"".into();
        job.session_key = Some("agent:main:generic:direct:+1 555/ünï".into());
        self.create(&job).await;
        let stored = self.get_some(&job.id).await;
        assert!(stored.job == job, "a 40 KB job is byte-exact");
    }
}
