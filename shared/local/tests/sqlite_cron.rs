//! The SQLite cron store on real database files: the shared contract, plus what only a file
//! needs (races between separate connections, surviving a reopen, the rows as laid out,
//! upgrading a file from before the cron tables).

use clawless_automation::cron::run_log::RunsQuery;
use clawless_automation::cron::{CronStore, Reservation, RunSlot};
use clawless_core::session::{SessionKey, SessionStore};
use clawless_core::testing::{
    CronStoreDeviations, cron_store_contract, sample_cron_job, sample_run_entry,
};
use clawless_local::sqlite::{SqliteCronStore, SqliteDb, SqliteSessionStore};

mod support;
use support::DbFile;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_cron_store_passes_the_cron_store_contract() {
    let file = DbFile::new();
    cron_store_contract(
        &SqliteCronStore::new(file.open()),
        CronStoreDeviations::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_memory_database_passes_the_cron_store_contract() {
    let db = SqliteDb::open_in_memory().unwrap();
    cron_store_contract(&SqliteCronStore::new(db), CronStoreDeviations::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cron_contract_runs_share_one_file_through_two_connections() {
    let file = DbFile::new();
    let first = SqliteCronStore::new(file.open());
    let second = SqliteCronStore::new(file.open());
    tokio::join!(
        cron_store_contract(&first, CronStoreDeviations::default()),
        cron_store_contract(&second, CronStoreDeviations::default())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_reservations_through_separate_connections_have_exactly_one_winner() {
    // GIVEN a job and four connections to its file, each with a delivery of the same firing
    let file = DbFile::new();
    let stores: Vec<SqliteCronStore> = (0..4).map(|_| SqliteCronStore::new(file.open())).collect();
    stores[0]
        .put_job(&sample_cron_job("race"), None)
        .await
        .unwrap();

    // WHEN each reserves slot 60 000 at once, as spawned tasks
    let mut tasks = tokio::task::JoinSet::new();
    for (reserver, store) in stores.iter().enumerate() {
        let store = store.clone();
        tasks.spawn(async move {
            let now = 60_000 + u64::try_from(reserver).unwrap();
            let reservation = store
                .reserve_run("race", RunSlot::Scheduled(60_000), now, 1)
                .await
                .unwrap();
            (now, reservation)
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined.unwrap() {
            (now, Reservation::Reserved(_)) => winners.push(now),
            (_, Reservation::AlreadyTaken { last_slot_ms }) => assert_eq!(last_slot_ms, 60_000),
        }
    }

    // THEN exactly one took it, and its reservation is what is stored
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = stores[3].get_job("race").await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    assert_eq!(stored.job.state.running_at_ms, Some(winners[0]));
}

#[tokio::test]
async fn jobs_marks_and_run_logs_survive_reopening_the_file() {
    // GIVEN a job with a reserved slot and a run log, then closed
    let file = DbFile::new();
    {
        let store = SqliteCronStore::new(file.open());
        store.put_job(&sample_cron_job("j1"), None).await.unwrap();
        store
            .reserve_run("j1", RunSlot::Scheduled(60_000), 60_001, 1)
            .await
            .unwrap();
        store
            .append_run(&sample_run_entry("j1", 70_000), 10)
            .await
            .unwrap();
    }

    // WHEN the file is opened again
    let store = SqliteCronStore::new(file.open());

    // THEN the job, its mark and its log are still there
    let stored = store.get_job("j1").await.unwrap().unwrap();
    assert_eq!(stored.version, 2);
    assert_eq!(stored.job.state.running_at_ms, Some(60_001));
    assert_eq!(
        store
            .reserve_run("j1", RunSlot::Scheduled(60_000), 80_000, 2)
            .await
            .unwrap(),
        Reservation::AlreadyTaken {
            last_slot_ms: 60_000
        }
    );
    let runs = store.runs(Some("j1"), &RunsQuery::default()).await.unwrap();
    assert_eq!(runs.entries, vec![sample_run_entry("j1", 70_000)]);
}

#[tokio::test]
async fn rows_hold_the_job_json_beside_its_version_and_marks() {
    let file = DbFile::new();
    let store = SqliteCronStore::new(file.open());
    store.put_job(&sample_cron_job("j1"), None).await.unwrap();
    store
        .reserve_run("j1", RunSlot::Manual(5), 6, 1)
        .await
        .unwrap();
    for ts in 1..=3 {
        store
            .append_run(&sample_run_entry("j1", ts), 2)
            .await
            .unwrap();
    }
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    let (version, body, scheduled, manual): (i64, String, Option<i64>, Option<i64>) = raw
        .query_row(
            "SELECT version, body, scheduled_slot_ms, manual_slot_ms FROM cron_jobs
             WHERE job_id = 'j1'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
        .unwrap();
    assert_eq!((version, scheduled, manual), (2, None, Some(5)));
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["state"]["runningAtMs"], 6, "OpenClaw's job JSON");
    let lines: Vec<String> = raw
        .prepare("SELECT body FROM cron_runs WHERE job_id = 'j1' ORDER BY seq")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        lines,
        [
            serde_json::to_string(&sample_run_entry("j1", 2)).unwrap(),
            serde_json::to_string(&sample_run_entry("j1", 3)).unwrap()
        ],
        "pruned to the newest two, stored as JSONL lines"
    );
}

#[tokio::test]
async fn a_version_4_file_gains_the_cron_tables_and_keeps_its_sessions() {
    // GIVEN a file at schema version 4: no cron tables, one session
    let file = DbFile::new();
    let key = SessionKey::parse("agent:main:main").unwrap();
    {
        let sessions = SqliteSessionStore::new(file.open());
        sessions
            .commit(
                &key,
                &clawless_core::session::SessionCommit {
                    expected_version: 0,
                    live_from: 0,
                    last_seq: 0,
                    meta: "{}".into(),
                    steps: vec![],
                },
            )
            .await
            .unwrap();
    }
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    raw.execute_batch("DROP TABLE cron_jobs; DROP TABLE cron_runs; PRAGMA user_version = 4;")
        .unwrap();
    drop(raw);

    // WHEN it is opened
    let db = file.open();

    // THEN the session is there, cron jobs can be stored and the version is current
    let session = SqliteSessionStore::new(db.clone())
        .load(&key)
        .await
        .unwrap()
        .expect("the old session");
    assert_eq!(session.version, 1);
    let store = SqliteCronStore::new(db);
    assert_eq!(
        store.put_job(&sample_cron_job("new"), None).await.unwrap(),
        1
    );
    store
        .append_run(&sample_run_entry("new", 1), 10)
        .await
        .unwrap();
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, 6);
}
