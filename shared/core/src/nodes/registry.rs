//! The node registry port: paired node hosts (their records are
//! [`clawless_exec::node::record`]), and the one-time pairing codes that admit new nodes.
//!
//! Secrets never reach this port: a node's secret and a pairing code are stored only as their
//! hex SHA-256, hashed by the caller.

use async_trait::async_trait;

use super::NodeStoreError;
use clawless_exec::node::record::{GrantedEntry, NodeFacts, NodeRecord};

/// Paired nodes and pairing codes.
#[async_trait]
pub trait NodeRegistry: Send + Sync + std::fmt::Debug {
    /// Stores a pairing code (by its hash) that can be redeemed once before `expires_at_ms`.
    /// [`NodeStoreError::Conflict`] if that hash was stored before.
    async fn create_pairing(
        &self, code_hash: &str, expires_at_ms: u64,
    ) -> Result<(), NodeStoreError>;

    /// Redeems a pairing code: `true` exactly once, and only while `now_ms < expires_at_ms`;
    /// `false` for an unknown, expired or already redeemed code. Of concurrent redeems of one
    /// code, exactly one gets `true`.
    async fn redeem_pairing(&self, code_hash: &str, now_ms: u64) -> Result<bool, NodeStoreError>;

    /// Stores a new node. [`NodeStoreError::Conflict`] if the id exists (nothing changes).
    async fn register(&self, record: &NodeRecord) -> Result<(), NodeStoreError>;

    /// The node, or `None`.
    async fn get(&self, node_id: &str) -> Result<Option<NodeRecord>, NodeStoreError>;

    /// Every node, revoked ones included, sorted by `node_id` (byte order).
    async fn list(&self) -> Result<Vec<NodeRecord>, NodeStoreError>;

    /// Records a heartbeat ([`NodeRecord::apply_heartbeat`]). `false`, changing nothing, when
    /// the node is unknown or revoked.
    async fn heartbeat(
        &self, node_id: &str, facts: &NodeFacts, now_ms: u64,
    ) -> Result<bool, NodeStoreError>;

    /// Revokes the node: `revoked` becomes true and `revoked_at_ms` is set on the first
    /// revoke. `true` when the node exists (revoking again is harmless), `false` when unknown.
    async fn revoke(&self, node_id: &str, now_ms: u64) -> Result<bool, NodeStoreError>;

    /// Grants an entry ([`NodeRecord::apply_grant`]) and returns the policy version after it:
    /// incremented when the entry was appended, unchanged when the agent already held it.
    /// Concurrent grants are all kept. [`NodeStoreError::NotFound`] for an unknown node,
    /// [`NodeStoreError::Revoked`] for a revoked one.
    async fn grant(&self, node_id: &str, entry: &GrantedEntry) -> Result<u64, NodeStoreError>;
}
