//! The [`SessionStore`] contract: [`session_store_contract`] and the
//! [`SessionStoreDeviations`] a backend may declare.

use std::future::Future;
use std::pin::Pin;

use crate::session::{
    SessionCommit, SessionKey, SessionLister, SessionStore, SessionStoreError, StoredSession,
    StoredStep,
};
use crate::testing::{join_all, run_label, sized_json_body};

/// How a session-store backend may knowingly differ from a real database in
/// [`session_store_contract`]. Each field relaxes one documented expectation; the default
/// relaxes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SessionStoreDeviations {
    /// Concurrent transactions are not isolated from each other. `moto_server` (5.x) applies
    /// a `TransactWriteItems`' puts to the live table even after a condition failed, and on
    /// cancellation restores a copy of the whole table taken when the transaction started;
    /// with several writers at once, one loser's restore can bring back another loser's
    /// steps or erase the winner's commit. With this set, the contract skips its race of
    /// concurrent commits; every condition is still checked one commit at a time, which on a
    /// serialisable backend (real DynamoDB) is what makes the race come out right.
    pub concurrent_commits_not_isolated: bool,
}

/// Runs the [`SessionStore`] contract against `store`, panicking with a description of the
/// first broken expectation.
///
/// Every adapter's suite calls this once. Sessions belong to an agent id unique to this call,
/// so the store may be shared with other tests running at the same time (unless the backend
/// is not isolated, see [`SessionStoreDeviations`]). The suite writes bodies of exactly
/// [`SessionStore::max_record_bytes`] (twice in one commit), a commit of 99 steps, and races
/// 8 writers on one version.
pub async fn session_store_contract(store: &dyn SessionStore, deviations: SessionStoreDeviations) {
    let suite = SessionContract {
        store,
        agent: run_label("contract"),
    };
    suite.a_session_never_committed_loads_as_none().await;
    suite
        .creating_with_version_zero_works_once_then_conflicts()
        .await;
    suite.each_commit_increments_the_version_by_one().await;
    suite.a_stale_version_conflicts_and_writes_nothing().await;
    suite
        .an_existing_step_seq_conflicts_and_writes_nothing()
        .await;
    suite.steps_load_in_numeric_seq_order().await;
    suite.a_live_load_reads_only_the_live_part().await;
    suite.sessions_are_isolated_by_key().await;
    suite.a_commit_of_99_steps_is_written_whole().await;
    if !deviations.concurrent_commits_not_isolated {
        suite
            .concurrent_commits_on_one_version_have_exactly_one_winner()
            .await;
    }
    suite
        .bodies_up_to_the_record_limit_round_trip_byte_exact()
        .await;
    suite
        .a_body_over_the_record_limit_is_too_large_and_writes_nothing()
        .await;
}

/// Runs the [`SessionLister`] contract: sessions committed through `store` are listed by
/// `lister` (the same backend), sorted by key, each once, with its latest version and meta.
/// Sessions belong to an agent id unique to this call, so other sessions in the store are
/// ignored.
pub async fn session_lister_contract(store: &dyn SessionStore, lister: &dyn SessionLister) {
    let suite = SessionContract {
        store,
        agent: run_label("lister"),
    };
    let mine = |listed: Vec<crate::session::SessionSummary>| -> Vec<(String, u64, String)> {
        let prefix = format!("agent:{}:", suite.agent);
        listed
            .into_iter()
            .filter(|summary| summary.key.as_str().starts_with(&prefix))
            .map(|summary| (summary.key.to_string(), summary.version, summary.meta))
            .collect()
    };
    let listed = lister
        .list_sessions()
        .await
        .unwrap_or_else(|err| panic!("listing sessions failed: {err}"));
    assert!(
        mine(listed).is_empty(),
        "a fresh agent should have no sessions"
    );

    let (b, a) = (suite.key("telegram:group:b"), suite.key("main"));
    suite
        .commit_ok(&b, 0, r#"{"m":"b1"}"#, vec![step(1, "{}"), step(2, "{}")])
        .await;
    suite
        .commit_ok(&a, 0, r#"{"m":"a1"}"#, vec![step(1, "{}")])
        .await;
    suite
        .commit_ok(&a, 1, r#"{"m":"a2"}"#, vec![step(2, "{}")])
        .await;

    let listed = lister
        .list_sessions()
        .await
        .unwrap_or_else(|err| panic!("listing sessions failed: {err}"));
    let all_keys: Vec<String> = listed.iter().map(|s| s.key.to_string()).collect();
    let mut sorted = all_keys.clone();
    sorted.sort();
    assert_eq!(all_keys, sorted, "sessions should be listed sorted by key");
    assert_eq!(
        mine(listed),
        vec![
            (a.to_string(), 2, r#"{"m":"a2"}"#.to_owned()),
            (b.to_string(), 1, r#"{"m":"b1"}"#.to_owned()),
        ],
        "each session once, with its latest version and meta"
    );
}

struct SessionContract<'a> {
    store: &'a dyn SessionStore,
    agent: String,
}

fn step(seq: u64, body: impl Into<String>) -> StoredStep {
    StoredStep {
        seq,
        body: body.into(),
    }
}

fn seqs_of(session: &StoredSession) -> Vec<u64> {
    session.steps.iter().map(|step| step.seq).collect()
}

impl SessionContract<'_> {
    /// `agent:<run agent>:<rest>`.
    fn key(&self, rest: &str) -> SessionKey {
        let raw = format!("agent:{}:{rest}", self.agent);
        SessionKey::parse(&raw).unwrap_or_else(|| panic!("{raw:?} should be a session key"))
    }

    async fn commit(
        &self, key: &SessionKey, expected_version: u64, meta: &str, steps: Vec<StoredStep>,
    ) -> Result<u64, SessionStoreError> {
        self.store
            .commit(
                key,
                &SessionCommit::new(expected_version, meta.to_owned(), steps),
            )
            .await
    }

    async fn commit_ok(
        &self, key: &SessionKey, expected_version: u64, meta: &str, steps: Vec<StoredStep>,
    ) -> u64 {
        self.commit(key, expected_version, meta, steps)
            .await
            .unwrap_or_else(|err| panic!("commit to {key} at version {expected_version}: {err}"))
    }

    async fn load(&self, key: &SessionKey) -> Option<StoredSession> {
        self.store
            .load(key)
            .await
            .unwrap_or_else(|err| panic!("load {key} failed: {err}"))
    }

    async fn load_some(&self, key: &SessionKey) -> StoredSession {
        self.load(key)
            .await
            .unwrap_or_else(|| panic!("session {key} should exist"))
    }

    fn assert_conflict(result: Result<u64, SessionStoreError>, what: &str) {
        assert!(
            matches!(result, Err(SessionStoreError::Conflict { .. })),
            "{what} should conflict, got {result:?}"
        );
    }

    async fn a_session_never_committed_loads_as_none(&self) {
        let key = self.key("never:committed");
        assert_eq!(self.load(&key).await, None, "load of a missing session");
        let result = self.commit(&key, 5, r#"{"m":1}"#, vec![]).await;
        Self::assert_conflict(result, "a commit expecting version 5 of a missing session");
        assert_eq!(
            self.load(&key).await,
            None,
            "a failed commit creates nothing"
        );
    }

    async fn creating_with_version_zero_works_once_then_conflicts(&self) {
        let key = self.key("create:once");
        let version = self
            .commit_ok(&key, 0, r#"{"m":"first"}"#, vec![step(1, r#"{"s":1}"#)])
            .await;
        assert_eq!(version, 1, "creating a session yields version 1");
        let second = self
            .commit(&key, 0, r#"{"m":"second"}"#, vec![step(2, r#"{"s":2}"#)])
            .await;
        Self::assert_conflict(second, "a second create");
        let session = self.load_some(&key).await;
        assert_eq!(
            session,
            StoredSession {
                version: 1,
                meta: r#"{"m":"first"}"#.into(),
                steps: vec![step(1, r#"{"s":1}"#)],
                live_from: 0,
                last_seq: 1,
            },
            "the first create stands, untouched by the second"
        );
    }

    async fn each_commit_increments_the_version_by_one(&self) {
        let key = self.key("versions");
        let mut expected = 0;
        for round in 1..=4u64 {
            let meta = format!(r#"{{"round":{round}}}"#);
            let version = self
                .commit_ok(&key, expected, &meta, vec![step(round, "{}")])
                .await;
            assert_eq!(
                version,
                expected + 1,
                "commit {round} returns the next version"
            );
            let session = self.load_some(&key).await;
            assert_eq!(
                session.version, version,
                "load reports the committed version"
            );
            assert_eq!(session.meta, meta, "load reports the latest meta");
            expected = version;
        }
        let meta_only = self
            .commit_ok(&key, expected, r#"{"round":"meta only"}"#, vec![])
            .await;
        assert_eq!(meta_only, 5, "a commit without steps still increments");
        assert_eq!(seqs_of(&self.load_some(&key).await), vec![1, 2, 3, 4]);
    }

    async fn a_stale_version_conflicts_and_writes_nothing(&self) {
        let key = self.key("stale");
        self.commit_ok(&key, 0, r#"{"v":1}"#, vec![step(10, "{}")])
            .await;
        self.commit_ok(&key, 1, r#"{"v":2}"#, vec![step(11, "{}")])
            .await;
        let before = self.load_some(&key).await;
        for expected in [0, 1, 3, 99] {
            let result = self
                .commit(
                    &key,
                    expected,
                    r#"{"v":"stale"}"#,
                    vec![step(12, r#"{"stale":true}"#), step(13, "{}")],
                )
                .await;
            Self::assert_conflict(
                result,
                &format!("a commit expecting version {expected} of 2"),
            );
            assert_eq!(
                self.load_some(&key).await,
                before,
                "a conflicting commit (expected {expected}) writes neither meta nor steps"
            );
        }
    }

    async fn an_existing_step_seq_conflicts_and_writes_nothing(&self) {
        let key = self.key("duplicate:seq");
        self.commit_ok(&key, 0, r#"{"v":1}"#, vec![step(10, r#"{"original":10}"#)])
            .await;
        let before = self.load_some(&key).await;
        let result = self
            .commit(
                &key,
                1,
                r#"{"v":"dup"}"#,
                vec![step(11, "{}"), step(10, r#"{"overwrite":10}"#)],
            )
            .await;
        Self::assert_conflict(result, "a commit re-using seq 10");
        assert_eq!(
            self.load_some(&key).await,
            before,
            "a commit with an existing seq writes neither meta nor its other steps"
        );
        let result = self
            .commit(
                &key,
                1,
                r#"{"v":"twice"}"#,
                vec![step(12, r#"{"a":1}"#), step(12, r#"{"b":2}"#)],
            )
            .await;
        Self::assert_conflict(result, "a commit carrying seq 12 twice");
        assert_eq!(
            self.load_some(&key).await,
            before,
            "a commit carrying one seq twice writes nothing"
        );
        let version = self
            .commit_ok(&key, 1, r#"{"v":2}"#, vec![step(11, "{}")])
            .await;
        assert_eq!(version, 2, "the session is still writable at its version");
    }

    async fn steps_load_in_numeric_seq_order(&self) {
        // Chosen so that text order (100 < 11 < 9) differs from numeric order, and written
        // out of order within and across commits.
        let key = self.key("order");
        self.commit_ok(
            &key,
            0,
            "{}",
            vec![step(100, "100"), step(9, "9"), step(10, "10")],
        )
        .await;
        self.commit_ok(
            &key,
            1,
            "{}",
            vec![
                step(1_000_000_000_000, "1e12"),
                step(11, "11"),
                step(99, "99"),
                step(1000, "1000"),
            ],
        )
        .await;
        let session = self.load_some(&key).await;
        assert_eq!(
            seqs_of(&session),
            vec![9, 10, 11, 99, 100, 1000, 1_000_000_000_000],
            "steps come back in numeric seq order"
        );
        for loaded in &session.steps {
            let expected = if loaded.seq == 1_000_000_000_000 {
                "1e12".to_owned()
            } else {
                loaded.seq.to_string()
            };
            assert_eq!(loaded.body, expected, "step {} keeps its body", loaded.seq);
        }
    }

    async fn a_live_load_reads_only_the_live_part(&self) {
        let key = self.key("live:part");
        let steps = (1..=5).map(|seq| step(seq, format!(r#"{{"s":{seq}}}"#)));
        self.commit_ok(&key, 0, r#"{"m":1}"#, steps.collect()).await;
        let live = |session: Option<StoredSession>| {
            session.unwrap_or_else(|| panic!("session {key} should load live"))
        };
        let whole = live(self.store.load_live(&key).await.expect("live load"));
        assert_eq!(seqs_of(&whole), vec![1, 2, 3, 4, 5], "live from the start");
        assert_eq!(whole.last_seq, 5, "last seq of a first commit");

        let mut commit = SessionCommit::new(1, r#"{"m":2}"#.into(), vec![step(6, "{}")]);
        commit.live_from = 4;
        self.store.commit(&key, &commit).await.expect("commit");
        let session = live(self.store.load_live(&key).await.expect("live load"));
        assert_eq!(
            seqs_of(&session),
            vec![4, 5, 6],
            "only steps from live_from on"
        );
        assert_eq!(
            (
                session.version,
                session.meta.as_str(),
                session.live_from,
                session.last_seq
            ),
            (2, r#"{"m":2}"#, 4, 6),
            "a live load carries the version, meta and bounds of the last commit"
        );
        assert_eq!(
            seqs_of(&self.load_some(&key).await),
            vec![1, 2, 3, 4, 5, 6],
            "a whole load still reads the steps before the live part"
        );

        let mut reset = SessionCommit::new(2, r#"{"m":3}"#.into(), vec![]);
        reset.live_from = 7;
        reset.last_seq = 6;
        self.store.commit(&key, &reset).await.expect("commit");
        let session = live(self.store.load_live(&key).await.expect("live load"));
        assert!(
            session.steps.is_empty(),
            "nothing is live after a cut past the end"
        );
        assert_eq!(
            (session.version, session.last_seq),
            (3, 6),
            "the last seq is kept"
        );
        assert_eq!(
            self.store
                .load_live(&self.key("live:none"))
                .await
                .expect("load"),
            None,
            "a missing session loads live as none"
        );
    }

    async fn sessions_are_isolated_by_key(&self) {
        // `group:4` is a prefix of `group:42`, and `main` a prefix of `main:thread:1`; the
        // last key has characters that need care in object keys and URLs.
        let keys = [
            self.key("main"),
            self.key("generic:group:42"),
            self.key("generic:group:4"),
            self.key("main:thread:1"),
            self.key("generic:direct:+1 555/ünï%2f..\\x"),
        ];
        for (index, key) in keys.iter().enumerate() {
            let meta = format!(r#"{{"session":{index}}}"#);
            let steps = (1..=3)
                .map(|seq| step(seq, format!(r#"{{"session":{index},"seq":{seq}}}"#)))
                .collect();
            self.commit_ok(key, 0, &meta, steps).await;
        }
        for (index, key) in keys.iter().enumerate() {
            let session = self.load_some(key).await;
            assert_eq!(session.version, 1, "{key} has its own version");
            assert_eq!(
                session.meta,
                format!(r#"{{"session":{index}}}"#),
                "{key} meta"
            );
            let bodies: Vec<_> = session.steps.iter().map(|step| step.body.clone()).collect();
            let expected: Vec<_> = (1..=3)
                .map(|seq| format!(r#"{{"session":{index},"seq":{seq}}}"#))
                .collect();
            assert_eq!(bodies, expected, "{key} sees only its own steps");
        }
        // A commit to one session does not move another's version.
        self.commit_ok(&keys[1], 1, r#"{"session":"moved"}"#, vec![])
            .await;
        assert_eq!(self.load_some(&keys[2]).await.version, 1);
        assert_eq!(self.load_some(&keys[0]).await.version, 1);
        assert_eq!(self.load(&self.key("generic:group")).await, None);
    }

    async fn a_commit_of_99_steps_is_written_whole(&self) {
        let key = self.key("many:steps");
        let steps: Vec<_> = (1..=99)
            .map(|seq| step(seq, format!(r#"{{"seq":{seq}}}"#)))
            .collect();
        let version = self.commit_ok(&key, 0, "{}", steps.clone()).await;
        assert_eq!(version, 1);
        assert_eq!(
            self.load_some(&key).await.steps,
            steps,
            "all 99 steps, in order"
        );
    }

    async fn concurrent_commits_on_one_version_have_exactly_one_winner(&self) {
        const WRITERS: u64 = 8;
        let key = self.key("race");
        self.commit_ok(&key, 0, r#"{"writer":"creator"}"#, vec![step(1, "{}")])
            .await;
        let attempts = (0..WRITERS)
            .map(|writer| {
                let key = &key;
                Box::pin(async move {
                    let meta = format!(r#"{{"writer":{writer}}}"#);
                    let steps = vec![step(100 + writer, format!(r#"{{"writer":{writer}}}"#))];
                    self.commit(key, 1, &meta, steps).await
                }) as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<Result<u64, SessionStoreError>> = join_all(attempts).await;
        let winners: Vec<u64> = (0..WRITERS)
            .zip(&results)
            .filter(|(_, result)| result.is_ok())
            .map(|(writer, _)| writer)
            .collect();
        assert_eq!(winners.len(), 1, "exactly one writer wins: {results:?}");
        for result in &results {
            assert!(
                matches!(result, Ok(2) | Err(SessionStoreError::Conflict { .. })),
                "the winner gets version 2, the others conflict: {results:?}"
            );
        }
        let winner = winners[0];
        let session = self.load_some(&key).await;
        assert_eq!(session.version, 2);
        assert_eq!(
            session.meta,
            format!(r#"{{"writer":{winner}}}"#),
            "the winner's meta"
        );
        assert_eq!(
            seqs_of(&session),
            vec![1, 100 + winner],
            "only the winner's step was written"
        );
    }

    async fn bodies_up_to_the_record_limit_round_trip_byte_exact(&self) {
        let limit = self.store.max_record_bytes();
        let key = self.key("large");
        let meta = sized_json_body("meta at the limit", limit);
        let big_step = sized_json_body("step at the limit", limit);
        let small_step = sized_json_body("small", 64);
        assert_eq!((meta.len(), big_step.len()), (limit, limit));
        self.commit_ok(
            &key,
            0,
            &meta,
            vec![step(1, big_step.clone()), step(2, small_step.clone())],
        )
        .await;
        let session = self.load_some(&key).await;
        assert!(
            session.meta == meta,
            "meta of {limit} bytes must round-trip byte-exact"
        );
        assert_eq!(seqs_of(&session), vec![1, 2]);
        assert!(
            session.steps[0].body == big_step,
            "a step of {limit} bytes must round-trip byte-exact"
        );
        assert_eq!(session.steps[1].body, small_step);
        let unicode = r#"{"text":"ünïcödé 文件 🦀 \" \\ \n \u2028 \t"}"#;
        self.commit_ok(&key, 1, unicode, vec![step(3, unicode)])
            .await;
        let session = self.load_some(&key).await;
        assert_eq!(session.meta, unicode);
        assert_eq!(session.steps[2].body, unicode);
    }

    async fn a_body_over_the_record_limit_is_too_large_and_writes_nothing(&self) {
        let limit = self.store.max_record_bytes();
        let key = self.key("too:large");
        let over = sized_json_body("over the limit", limit + 1);
        let result = self.commit(&key, 0, &over, vec![]).await;
        assert!(
            matches!(result, Err(SessionStoreError::TooLarge { bytes, .. }) if bytes == limit + 1),
            "meta of {} bytes is TooLarge, got {result:?}",
            limit + 1
        );
        assert_eq!(self.load(&key).await, None, "nothing was created");
        self.commit_ok(&key, 0, "{}", vec![step(1, "{}")]).await;
        let before = self.load_some(&key).await;
        let result = self
            .commit(&key, 1, r#"{"v":2}"#, vec![step(2, "{}"), step(3, over)])
            .await;
        assert!(
            matches!(result, Err(SessionStoreError::TooLarge { .. })),
            "a step over the limit is TooLarge, got {result:?}"
        );
        assert_eq!(
            self.load_some(&key).await,
            before,
            "nothing of the commit was written"
        );
    }
}
