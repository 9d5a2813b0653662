//! The credential vending port: [`QueueCredentials`] for one node queue. On AWS they come from
//! STS AssumeRole with a session policy naming that one queue; locally a node polls over HTTP
//! and needs none.

use std::time::Duration;

use async_trait::async_trait;

use clawless_exec::node::credentials::QueueCredentials;
#[cfg(doc)]
use clawless_exec::node::credentials::credential_lifetime;

clawless_base::port_error!(
    /// Failures of a [`QueueCredentialVendor`].
    CredentialError,
    "credential vending failed"
);

/// Vends credentials that allow receiving, deleting and changing the visibility of messages
/// on one queue, and nothing else.
#[async_trait]
pub trait QueueCredentialVendor: Send + Sync + std::fmt::Debug {
    /// Credentials for `node_id` on `queue` (the handle from
    /// [`ExecQueue::create_node_queue`](super::ExecQueue::create_node_queue)), living
    /// [`credential_lifetime`]`(lifetime)`.
    async fn vend(
        &self, node_id: &str, queue: &str, lifetime: Duration,
    ) -> Result<QueueCredentials, CredentialError>;
}
