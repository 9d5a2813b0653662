//! [`NodeStoreError`]: how the node registry and exec job stores fail.

use clawless_base::port_error::BoxError;

/// Failures of a [`NodeRegistry`](super::NodeRegistry) or [`ExecJobs`](super::ExecJobs).
///
/// Outcomes a caller expects in normal operation (a code already redeemed, a job already
/// resolved, a heartbeat from a revoked node) are `Ok` values of the operations, not errors.
#[derive(Debug, thiserror::Error)]
pub enum NodeStoreError {
    /// The record already exists (a node id registered twice, a pairing code created twice).
    /// Nothing was written.
    #[error("{what} already exists")]
    Conflict {
        /// What exists, e.g. `node abc`.
        what: String,
    },
    /// The record does not exist.
    #[error("{what} not found")]
    NotFound {
        /// What is missing, e.g. `node abc`.
        what: String,
    },
    /// The node was revoked; it can be granted nothing more.
    #[error("node {node_id} is revoked")]
    Revoked {
        /// The node.
        node_id: String,
    },
    /// A record is larger than the adapter can hold in one item. Nothing was written.
    #[error("{what}: {bytes} bytes exceed the {limit}-byte limit")]
    TooLarge {
        /// The record, e.g. `job abc`.
        what: String,
        /// Its size.
        bytes: usize,
        /// The adapter's limit.
        limit: usize,
    },
    /// The backing service failed, or returned a record it cannot read.
    #[error("node store unavailable: {message}")]
    Unavailable {
        /// Summary.
        message: String,
        /// The underlying error.
        #[source]
        source: Option<BoxError>,
    },
}

impl NodeStoreError {
    /// Wraps an adapter error as [`NodeStoreError::Unavailable`].
    pub fn unavailable(
        message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    /// [`NodeStoreError::Unavailable`] without an underlying error (a corrupt record).
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::Unavailable {
            message: message.into(),
            source: None,
        }
    }
}
