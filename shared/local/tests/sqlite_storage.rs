//! The SQLite session store, inbox and turn queue on real database files: the shared
//! contracts, plus what only a file needs (surviving a reopen, two connections on one file,
//! the journal mode and the schema version).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clawless_core::session::{
    Claim, Inbox, SessionCommit, SessionStore, SessionStoreError, TurnQueue,
};
use clawless_core::testing::{
    QueueDeviations, SessionStoreDeviations, inbox_contract, queued_message, sample_steps,
    session_key, session_lister_contract, session_store_contract, turn_queue_contract,
};
use clawless_local::sqlite::{
    SqliteDb, SqliteError, SqliteInbox, SqliteSessionStore, SqliteTurnQueue,
};

mod support;
use support::DbFile;

fn commit(expected_version: u64, meta: &str, seqs: &[u64]) -> SessionCommit {
    SessionCommit {
        expected_version,
        live_from: 0,
        last_seq: 0,
        meta: meta.into(),
        steps: sample_steps(seqs.iter().copied()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_session_store_passes_the_session_store_contract() {
    let file = DbFile::new();
    session_store_contract(
        &SqliteSessionStore::new(file.open()),
        SessionStoreDeviations::default(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_session_store_passes_the_session_lister_contract() {
    let file = DbFile::new();
    let db = file.open();
    let store = SqliteSessionStore::new(db.clone());
    // An inbox claim in the same file is not a session.
    SqliteInbox::new(db)
        .claim("evt-1", Duration::from_secs(60), 1_000)
        .await
        .unwrap();
    session_lister_contract(&store, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_session_store_passes_the_contract_in_memory() {
    let store =
        SqliteSessionStore::new(SqliteDb::open_in_memory().unwrap()).with_max_record_bytes(350_000);
    session_store_contract(&store, SessionStoreDeviations::default()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_contract_runs_can_share_one_file_through_two_connections() {
    let file = DbFile::new();
    let first = SqliteSessionStore::new(file.open()).with_max_record_bytes(350_000);
    let second = SqliteSessionStore::new(file.open()).with_max_record_bytes(350_000);
    tokio::join!(
        session_store_contract(&first, SessionStoreDeviations::default()),
        session_store_contract(&second, SessionStoreDeviations::default()),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_commits_through_separate_connections_have_exactly_one_winner() {
    // GIVEN a session at version 1 and four connections to its file
    let file = DbFile::new();
    let stores: Vec<SqliteSessionStore> = (0..4)
        .map(|_| SqliteSessionStore::new(file.open()))
        .collect();
    let session = session_key("agent:main:main");
    stores[0]
        .commit(&session, &commit(0, "{}", &[1]))
        .await
        .unwrap();

    // WHEN each commits on version 1 at once
    let mut tasks = tokio::task::JoinSet::new();
    for (writer, store) in stores.iter().enumerate() {
        let store = store.clone();
        let session = session.clone();
        tasks.spawn(async move {
            let seq = 10 + writer as u64;
            (
                writer,
                store
                    .commit(&session, &commit(1, &format!("{writer}"), &[seq]))
                    .await,
            )
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (writer, result) = joined.unwrap();
        match result {
            Ok(version) => winners.push((writer, version)),
            Err(SessionStoreError::Conflict { .. }) => {}
            Err(other) => panic!("writer {writer}: {other}"),
        }
    }

    // THEN exactly one wins and only its step is there
    assert_eq!(winners.len(), 1, "{winners:?}");
    let (winner, version) = winners[0];
    assert_eq!(version, 2);
    let loaded = stores[3].load(&session).await.unwrap().unwrap();
    assert_eq!(loaded.meta, winner.to_string());
    let seqs: Vec<u64> = loaded.steps.iter().map(|step| step.seq).collect();
    assert_eq!(seqs, vec![1, 10 + winner as u64]);
}

#[tokio::test]
async fn sqlite_inbox_passes_the_inbox_contract() {
    let file = DbFile::new();
    inbox_contract(&SqliteInbox::new(file.open())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_turn_queue_passes_the_turn_queue_contract() {
    // Every queue the contract asks for is a fresh name in one shared file.
    let file = DbFile::new();
    let db = file.open();
    let next = AtomicU64::new(0);
    turn_queue_contract(
        |visibility| {
            let name = format!("contract-{}", next.fetch_add(1, Ordering::Relaxed));
            let queue =
                SqliteTurnQueue::named(db.clone(), name).with_visibility_timeout(visibility);
            async move { Box::new(queue) as Box<dyn TurnQueue> }
        },
        QueueDeviations::default(),
    )
    .await;
}

#[tokio::test]
async fn sessions_claims_and_queued_messages_survive_reopening_the_file() {
    // GIVEN a session, a claim, a queued message and one in flight, written and closed
    let file = DbFile::new();
    let session = session_key("agent:main:generic:group:42");
    {
        let db = file.open();
        let store = SqliteSessionStore::new(db.clone());
        store
            .commit(&session, &commit(0, r#"{"v":1}"#, &[9, 10, 100]))
            .await
            .unwrap();
        store
            .commit(&session, &commit(1, r#"{"v":2}"#, &[101]))
            .await
            .unwrap();
        let inbox = SqliteInbox::new(db.clone());
        assert_eq!(
            inbox
                .claim("telegram:1", Duration::from_secs(600), 1_000)
                .await
                .unwrap(),
            Claim::Claimed
        );
        let queue = SqliteTurnQueue::new(db.clone());
        queue
            .send(&queued_message("a", "a1", "in flight"))
            .await
            .unwrap();
        queue
            .send(&queued_message("b", "b1", "waiting"))
            .await
            .unwrap();
        let first = queue.receive(1, Duration::ZERO).await.unwrap();
        assert_eq!(first[0].body, "in flight");
    }

    // WHEN the file is opened again
    let db = file.open();

    // THEN everything is still there, in the same state
    let loaded = SqliteSessionStore::new(db.clone())
        .load(&session)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(loaded.version, 2);
    assert_eq!(loaded.meta, r#"{"v":2}"#);
    let seqs: Vec<u64> = loaded.steps.iter().map(|step| step.seq).collect();
    assert_eq!(seqs, vec![9, 10, 100, 101]);
    let inbox = SqliteInbox::new(db.clone());
    assert_eq!(
        inbox
            .claim("telegram:1", Duration::from_secs(600), 1_500)
            .await
            .unwrap(),
        Claim::Duplicate
    );
    let queue = SqliteTurnQueue::new(db.clone());
    let deliveries = queue.receive(10, Duration::ZERO).await.unwrap();
    let bodies: Vec<_> = deliveries
        .iter()
        .map(|delivery| delivery.body.as_str())
        .collect();
    assert_eq!(
        bodies,
        vec!["waiting"],
        "the message in flight stays hidden"
    );
    queue
        .send(&queued_message("a", "a1", "repeat"))
        .await
        .unwrap();
    queue.delete(&deliveries[0].receipt).await.unwrap();
    assert!(
        queue.receive(10, Duration::ZERO).await.unwrap().is_empty(),
        "the dedup window survives too"
    );
}

#[tokio::test]
async fn queues_in_one_file_are_independent() {
    let file = DbFile::new();
    let db = file.open();
    let turns = SqliteTurnQueue::new(db.clone());
    let exec = SqliteTurnQueue::named(db.clone(), "exec");
    turns
        .send(&queued_message("g", "same-id", "turn"))
        .await
        .unwrap();
    exec.send(&queued_message("g", "same-id", "exec"))
        .await
        .unwrap();
    let from_turns = turns.receive(10, Duration::ZERO).await.unwrap();
    let from_exec = exec.receive(10, Duration::ZERO).await.unwrap();
    assert_eq!(from_turns.len(), 1);
    assert_eq!(from_turns[0].body, "turn");
    assert_eq!(from_exec.len(), 1, "dedup ids and groups are per queue");
    assert_eq!(from_exec[0].body, "exec");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_receive_sees_a_send_from_another_connection() {
    // GIVEN a receiver and a sender on separate connections (as two processes would be)
    let file = DbFile::new();
    let receiver = SqliteTurnQueue::new(file.open());
    let sender = SqliteTurnQueue::new(file.open());
    let started = Instant::now();
    let waiting = tokio::spawn(async move { receiver.receive(1, Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;

    // WHEN the other connection sends
    sender
        .send(&queued_message("g", "d", "hello"))
        .await
        .unwrap();

    // THEN the receiver finds it at its next poll, long before its wait ends
    let deliveries = waiting.await.unwrap().unwrap();
    assert_eq!(deliveries.len(), 1);
    assert_eq!(deliveries[0].body, "hello");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn receipts_that_are_not_ours_are_refused_and_stale_ones_do_nothing() {
    let file = DbFile::new();
    let queue = SqliteTurnQueue::new(file.open());
    assert!(queue.delete("garbage").await.is_err());
    assert!(queue.release("", Duration::ZERO).await.is_err());
    queue.send(&queued_message("g", "d", "x")).await.unwrap();
    let first = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    queue.release(&first.receipt, Duration::ZERO).await.unwrap();
    let second = queue.receive(1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(second.receive_count, 2);
    queue.delete(&first.receipt).await.unwrap();
    queue.release(&first.receipt, Duration::ZERO).await.unwrap();
    assert!(
        queue.receive(1, Duration::ZERO).await.unwrap().is_empty(),
        "the stale receipt neither deleted nor released the message"
    );
    queue.delete(&second.receipt).await.unwrap();
}

#[test]
fn the_file_uses_a_write_ahead_log_and_records_its_schema_version() {
    let file = DbFile::new();
    let _db = file.open();
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    let mode: String = raw
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = raw
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .unwrap();
    assert_eq!(version, 6);
}

#[test]
fn a_file_from_a_newer_schema_is_refused() {
    let file = DbFile::new();
    drop(file.open());
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    raw.pragma_update(None, "user_version", 99).unwrap();
    drop(raw);
    let err = SqliteDb::open(&file.path).unwrap_err();
    assert!(
        matches!(err, SqliteError::NewerSchema { found: 99, .. }),
        "{err}"
    );
}

#[test]
fn a_path_that_cannot_be_a_database_is_an_open_error() {
    let file = DbFile::new();
    let err = SqliteDb::open(file.path.parent().unwrap()).unwrap_err();
    assert!(matches!(err, SqliteError::Open { .. }), "{err}");
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test]
async fn a_seq_beyond_sqlite_integers_is_rejected_and_nothing_is_written() {
    let file = DbFile::new();
    let store = SqliteSessionStore::new(file.open());
    let session = session_key("agent:main:main");
    let result = store
        .commit(&session, &commit(0, "{}", &[1, u64::MAX]))
        .await;
    assert!(
        matches!(result, Err(SessionStoreError::Rejected { .. })),
        "{result:?}"
    );
    assert_eq!(store.load(&session).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_checkpointed_in_the_background_not_by_a_request() {
    // GIVEN a database file taking a burst of writes (fewer than SQLite's automatic
    // checkpoint threshold of 1,000 pages, so only a background checkpoint moves them)
    let file = DbFile::new();
    let db = file.open();
    let inbox = SqliteInbox::new(db.clone());
    let before = std::fs::metadata(&file.path).unwrap().len();
    for n in 0..300 {
        let id = format!("telegram:{n}:{}", "x".repeat(200));
        assert_eq!(
            inbox
                .claim(&id, Duration::from_secs(600), 1_000)
                .await
                .unwrap(),
            Claim::Claimed
        );
    }
    let wal = file.path.with_extension("sqlite-wal");
    assert!(
        std::fs::metadata(&wal).unwrap().len() > 0,
        "the writes went to the WAL"
    );

    // THEN within a few checkpoint intervals they reach the database file, with no request
    // doing it
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let size = std::fs::metadata(&file.path).unwrap().len();
        if size > before + 50_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the database file stayed at {size} bytes (was {before})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_version_3_sessions_table_gains_live_from_and_loads_whole() {
    // GIVEN a file at schema version 3: the sessions table without `live_from`, one session
    let file = DbFile::new();
    drop(file.open());
    let raw = rusqlite::Connection::open(&file.path).unwrap();
    raw.execute_batch(
        "ALTER TABLE sessions DROP COLUMN live_from;
         INSERT INTO sessions (key, version, meta) VALUES ('agent:main:main', 2, '{\"m\":2}');
         INSERT INTO session_steps (key, seq, body) VALUES ('agent:main:main', 1, '{}');
         INSERT INTO session_steps (key, seq, body) VALUES ('agent:main:main', 2, '{}');
         PRAGMA user_version = 3;",
    )
    .unwrap();
    drop(raw);
    // WHEN it is opened THEN the whole transcript is live, and a cut can be committed
    let store = SqliteSessionStore::new(file.open());
    let session = session_key("agent:main:main");
    let live = store
        .load_live(&session)
        .await
        .unwrap()
        .expect("the old session");
    assert_eq!(live.steps.len(), 2);
    assert_eq!((live.version, live.live_from, live.last_seq), (2, 0, 2));
    let mut cut = commit(2, r#"{"m":3}"#, &[3]);
    cut.live_from = 3;
    store.commit(&session, &cut).await.unwrap();
    let live = store.load_live(&session).await.unwrap().unwrap();
    assert_eq!(
        live.steps.iter().map(|step| step.seq).collect::<Vec<_>>(),
        vec![3]
    );
}
