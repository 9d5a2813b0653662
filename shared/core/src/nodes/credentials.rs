//! The credential vending port: [`QueueCredentials`] for one node queue. On AWS they come from
//! STS AssumeRole with a session policy naming that one queue; locally a node polls over HTTP
//! and needs none.

use std::time::Duration;

use async_trait::async_trait;

use clawless_exec::node::credentials::QueueCredentials;
#[cfg(doc)]
use clawless_exec::node::credentials::credential_lifetime;

/// Failures of a [`QueueCredentialVendor`].
#[derive(Debug, thiserror::Error)]
#[error("credential vending failed: {message}")]
pub struct CredentialError {
    /// Summary.
    pub message: String,
    /// The underlying error.
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl CredentialError {
    /// Wraps an adapter error.
    pub fn new(
        message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// An error with no underlying cause (a queue handle the vendor cannot scope to).
    pub fn refused(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }
}

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
