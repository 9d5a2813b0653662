//! Sessions: the storage ports a turn needs: the session store, the inbox
//! that claims platform message ids once, and the ordered turn queue.
//!
//! The ports move opaque JSON strings; what a session's meta and steps contain is the turn
//! engine's business (`crate::turn`). Adapters: DynamoDB and SQS in `clawless-aws`, SQLite in
//! `clawless-local`, in-memory in `crate::testing`. [`offload`] wraps any session store so
//! that large bodies go to the object store and every record stays small. [`reset`] decides
//! when a key starts a new session (`/new`, daily and idle resets).

pub mod offload;
pub mod ports;
pub mod reset;

pub use clawless_base::session_key::{SessionKey, normalize_agent_id};
pub use ports::{
    Claim, Delivery, Inbox, InboxError, QueueError, QueuedMessage, SessionCommit, SessionLister,
    SessionStore, SessionStoreError, SessionSummary, StoredSession, StoredStep, TurnQueue,
    claim_expires_at,
};
