//! Test support for the node ports: in-memory fakes and the contract suites every adapter
//! runs, re-exported from [`crate::testing`].
//!
//! [`InMemoryNodeRegistry`], [`InMemoryExecJobs`] and [`InMemoryExecQueue`] are checked by
//! [`node_registry_contract`], [`exec_jobs_contract`] and [`exec_queue_contract`], which the SQLite (`clawless-local`) and
//! DynamoDB/SQS (`clawless-aws`) adapters run too, so none of them can drift.
//! [`InMemoryCredentialVendor`] stands in for STS. Nothing here touches disk or network.

mod credentials;
mod jobs;
mod processes;
mod queue;
mod registry;

pub use credentials::{InMemoryCredentialVendor, VendedCall};
pub use jobs::{InMemoryExecJobs, exec_jobs_contract};
pub use processes::{InMemoryBackgroundProcesses, background_processes_contract};
pub use queue::{InMemoryExecQueue, exec_queue_contract};
pub use registry::{InMemoryNodeRegistry, node_registry_contract};

use std::time::{SystemTime, UNIX_EPOCH};

/// How a node-store backend may knowingly differ from a real database in
/// [`node_registry_contract`] and [`exec_jobs_contract`]. Each field relaxes one documented
/// expectation; the default relaxes nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NodeStoreDeviations {
    /// Concurrent conditional writes to one item are not atomic. `moto_server` (5.2.x)
    /// evaluates an `UpdateItem`/`PutItem` condition against the item and then writes it
    /// without a lock, on a threaded server: two concurrent writers can both pass the same
    /// condition (two grants both written at one policy version, the second losing the first's
    /// entry). With this set, the contracts skip their races of concurrent redeems, grants and
    /// resolves; every condition is still checked one call at a time, which on a backend that
    /// serialises writes to an item (real DynamoDB, SQLite) is what makes the races come out
    /// right.
    pub conditional_writes_not_atomic: bool,
}

/// Wall-clock Unix milliseconds: the contracts run against real queues whose delays and
/// visibility timeouts follow the real clock.
pub(crate) fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX)
        })
}

/// A label unique to one contract run that is also a valid node id (short, `[a-z0-9-]`).
pub(crate) fn short_label(kind: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!(
        "{kind}{:x}{:x}{}",
        std::process::id() & 0xffff,
        nanos & 0xff_ffff_ffff,
        crate::testing::next_id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nodes::ExecQueue;

    #[tokio::test]
    async fn in_memory_node_registry_passes_the_node_registry_contract() {
        node_registry_contract(&InMemoryNodeRegistry::new(), NodeStoreDeviations::default()).await;
    }

    #[tokio::test]
    async fn two_registry_contract_runs_can_share_one_registry() {
        let registry = InMemoryNodeRegistry::new();
        tokio::join!(
            node_registry_contract(&registry, NodeStoreDeviations::default()),
            node_registry_contract(&registry, NodeStoreDeviations::default())
        );
    }

    #[tokio::test]
    async fn in_memory_exec_jobs_pass_the_exec_jobs_contract() {
        exec_jobs_contract(&InMemoryExecJobs::new(), NodeStoreDeviations::default()).await;
    }

    #[tokio::test]
    async fn in_memory_background_processes_pass_their_contract() {
        background_processes_contract(
            &InMemoryBackgroundProcesses::new(),
            NodeStoreDeviations::default(),
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn in_memory_exec_queue_passes_the_exec_queue_contract() {
        let queues = InMemoryExecQueue::new();
        exec_queue_contract(&queues).await;
    }

    #[tokio::test]
    async fn the_in_memory_queue_keeps_what_it_dead_letters() {
        // GIVEN a message received five times without a delete
        let queues = InMemoryExecQueue::new();
        let queue = queues.create_node_queue("n1").await.unwrap();
        queues.send(&queue, "poison").await.unwrap();
        for _ in 0..5 {
            let got = queues
                .receive(
                    &queue,
                    1,
                    std::time::Duration::ZERO,
                    std::time::Duration::ZERO,
                )
                .await
                .unwrap();
            assert_eq!(got.len(), 1);
        }
        // WHEN it would be received a sixth time THEN it is dead-lettered instead
        let sixth = queues
            .receive(
                &queue,
                1,
                std::time::Duration::ZERO,
                std::time::Duration::ZERO,
            )
            .await
            .unwrap();
        assert!(sixth.is_empty());
        assert_eq!(queues.dead_letters(&queue), vec!["poison".to_owned()]);
    }
}
