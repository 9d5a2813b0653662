//! [`InMemoryCredentialVendor`]: a stand-in for STS that records what it vended.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use super::wall_ms;
use crate::nodes::credential_lifetime;
use crate::nodes::{CredentialError, QueueCredentialVendor, QueueCredentials};
use crate::testing::lock_state;

/// One call to [`InMemoryCredentialVendor::vend`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendedCall {
    /// The node.
    pub node_id: String,
    /// The queue the credentials are scoped to.
    pub queue: String,
    /// The lifetime granted (after clamping).
    pub lifetime: Duration,
}

/// A [`QueueCredentialVendor`] that vends recognisable fake credentials
/// (`MEM<n>` / `mem-secret-<n>` / `mem-token-<n>`), clamps lifetimes as every vendor must,
/// refuses an empty queue handle, and records each call. Clones share the record.
#[derive(Debug, Clone, Default)]
pub struct InMemoryCredentialVendor {
    calls: Arc<Mutex<Vec<VendedCall>>>,
}

impl InMemoryCredentialVendor {
    /// A vendor that has vended nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<VendedCall> {
        lock_state(&self.calls).clone()
    }
}

#[async_trait]
impl QueueCredentialVendor for InMemoryCredentialVendor {
    async fn vend(
        &self, node_id: &str, queue: &str, lifetime: Duration,
    ) -> Result<QueueCredentials, CredentialError> {
        if queue.is_empty() {
            return Err(CredentialError::bare(format!(
                "no queue to scope credentials for node {node_id} to"
            )));
        }
        let lifetime = credential_lifetime(lifetime);
        let mut calls = lock_state(&self.calls);
        calls.push(VendedCall {
            node_id: node_id.to_owned(),
            queue: queue.to_owned(),
            lifetime,
        });
        let serial = calls.len();
        Ok(QueueCredentials {
            access_key_id: format!("MEM{serial}"),
            secret_access_key: format!("mem-secret-{serial}"),
            session_token: format!("mem-token-{serial}"),
            expires_at_ms: wall_ms()
                .saturating_add(u64::try_from(lifetime.as_millis()).unwrap_or(u64::MAX)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_vend_is_recorded_with_its_clamped_lifetime() {
        let vendor = InMemoryCredentialVendor::new();
        let before = wall_ms();
        let first = vendor
            .vend("n1", "node-n1", Duration::from_secs(10))
            .await
            .unwrap();
        let second = vendor
            .vend("n1", "node-n1", Duration::from_secs(1_800))
            .await
            .unwrap();
        assert_ne!(first.access_key_id, second.access_key_id);
        assert!(first.expires_at_ms >= before + 900_000);
        assert_eq!(
            vendor
                .calls()
                .iter()
                .map(|call| call.lifetime.as_secs())
                .collect::<Vec<_>>(),
            vec![900, 1_800]
        );
        assert!(vendor.vend("n1", "", Duration::ZERO).await.is_err());
        assert_eq!(vendor.calls().len(), 2, "a refused call vends nothing");
    }
}
