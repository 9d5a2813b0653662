//! The [`Inbox`] contract: [`inbox_contract`].

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::session::{Claim, Inbox, InboxError};
use crate::testing::{join_all, run_label};

/// Runs the [`Inbox`] contract against `inbox`, panicking with a description of the first
/// broken expectation. Event ids are unique to this call, so the inbox may be shared; times
/// are around the real current time, as a TTL-managed table expects.
pub async fn inbox_contract(inbox: &dyn Inbox) {
    let suite = InboxContract {
        inbox,
        run: run_label("inbox"),
        now: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1_700_000_000, |elapsed| elapsed.as_secs()),
    };
    suite.a_first_claim_wins_and_a_second_is_a_duplicate().await;
    suite
        .a_claim_expires_after_its_ttl_and_can_be_claimed_again()
        .await;
    suite.a_ttl_is_rounded_up_to_whole_seconds().await;
    suite.a_released_claim_can_be_claimed_again().await;
    suite.event_ids_are_independent().await;
    suite.concurrent_claims_have_exactly_one_winner().await;
}

struct InboxContract<'a> {
    inbox: &'a dyn Inbox,
    run: String,
    now: u64,
}

const MINUTE: Duration = Duration::from_secs(60);

impl InboxContract<'_> {
    fn id(&self, name: &str) -> String {
        format!("{}:{name}", self.run)
    }

    async fn claim(&self, id: &str, ttl: Duration, now: u64) -> Claim {
        self.inbox
            .claim(id, ttl, now)
            .await
            .unwrap_or_else(|err| panic!("claim {id:?} at {now} failed: {err}"))
    }

    async fn release(&self, id: &str) {
        self.inbox
            .release(id)
            .await
            .unwrap_or_else(|err| panic!("release {id:?} failed: {err}"));
    }

    async fn a_first_claim_wins_and_a_second_is_a_duplicate(&self) {
        let id = self.id("once");
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Claimed);
        assert_eq!(
            self.claim(&id, MINUTE, self.now).await,
            Claim::Duplicate,
            "the same id again"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 30).await,
            Claim::Duplicate,
            "the same id later within the TTL"
        );
    }

    async fn a_claim_expires_after_its_ttl_and_can_be_claimed_again(&self) {
        let id = self.id("expiring");
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Claimed);
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 60).await,
            Claim::Duplicate,
            "a claim holds through its last second"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 61).await,
            Claim::Claimed,
            "an expired claim can be claimed again"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 62).await,
            Claim::Duplicate,
            "the renewed claim holds"
        );
        assert_eq!(
            self.claim(&id, MINUTE, self.now + 121).await,
            Claim::Duplicate,
            "the renewed claim runs from its own time"
        );
    }

    async fn a_ttl_is_rounded_up_to_whole_seconds(&self) {
        let id = self.id("rounded");
        let ttl = Duration::from_millis(1500);
        assert_eq!(self.claim(&id, ttl, self.now).await, Claim::Claimed);
        assert_eq!(self.claim(&id, ttl, self.now + 2).await, Claim::Duplicate);
        assert_eq!(self.claim(&id, ttl, self.now + 3).await, Claim::Claimed);
    }

    async fn a_released_claim_can_be_claimed_again(&self) {
        let id = self.id("released");
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Claimed);
        self.release(&id).await;
        assert_eq!(
            self.claim(&id, MINUTE, self.now).await,
            Claim::Claimed,
            "a released claim is free"
        );
        assert_eq!(self.claim(&id, MINUTE, self.now).await, Claim::Duplicate);
        self.release(&self.id("never-claimed")).await;
        self.release(&id).await;
        self.release(&id).await;
    }

    async fn event_ids_are_independent(&self) {
        let ids = [
            self.id("42"),
            self.id("4"),
            self.id("420"),
            self.id("Ev0 ünï/x"),
        ];
        for id in &ids {
            assert_eq!(
                self.claim(id, MINUTE, self.now).await,
                Claim::Claimed,
                "{id}"
            );
        }
        for id in &ids {
            assert_eq!(
                self.claim(id, MINUTE, self.now).await,
                Claim::Duplicate,
                "{id}"
            );
        }
        self.release(&ids[0]).await;
        assert_eq!(
            self.claim(&ids[1], MINUTE, self.now).await,
            Claim::Duplicate
        );
        assert_eq!(self.claim(&ids[0], MINUTE, self.now).await, Claim::Claimed);
    }

    async fn concurrent_claims_have_exactly_one_winner(&self) {
        let id = self.id("race");
        let attempts = (0..8)
            .map(|_| {
                let id = id.as_str();
                Box::pin(async move { self.inbox.claim(id, MINUTE, self.now).await })
                    as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<Result<Claim, InboxError>> = join_all(attempts).await;
        let claimed = results
            .iter()
            .filter(|result| matches!(result, Ok(Claim::Claimed)))
            .count();
        let duplicates = results
            .iter()
            .filter(|result| matches!(result, Ok(Claim::Duplicate)))
            .count();
        assert_eq!(
            (claimed, duplicates),
            (1, 7),
            "exactly one concurrent claim wins: {results:?}"
        );
    }
}
