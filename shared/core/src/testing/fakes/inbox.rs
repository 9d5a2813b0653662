//! [`InMemoryInbox`]: the in-memory [`Inbox`] fake (one claim expiry per event id).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::session::{Claim, Inbox, InboxError, claim_expires_at};
use crate::testing::lock_state;

/// An in-memory [`Inbox`]: one expiry per event id, claimed again once it has passed.
/// Clones share the same claims.
#[derive(Debug, Clone, Default)]
pub struct InMemoryInbox {
    claims: Arc<Mutex<HashMap<String, u64>>>,
}

impl InMemoryInbox {
    /// An inbox with no claims.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Inbox for InMemoryInbox {
    async fn claim(
        &self, event_id: &str, ttl: Duration, now_unix: u64,
    ) -> Result<Claim, InboxError> {
        let mut claims = lock_state(&self.claims);
        if claims
            .get(event_id)
            .is_some_and(|expires_at| *expires_at >= now_unix)
        {
            return Ok(Claim::Duplicate);
        }
        claims.insert(event_id.to_owned(), claim_expires_at(now_unix, ttl));
        Ok(Claim::Claimed)
    }

    async fn release(&self, event_id: &str) -> Result<(), InboxError> {
        lock_state(&self.claims).remove(event_id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::inbox_contract;

    #[tokio::test]
    async fn in_memory_inbox_passes_the_inbox_contract() {
        inbox_contract(&InMemoryInbox::new()).await;
    }
}
