//! [`InMemoryNodeRegistry`] and [`node_registry_contract`].

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::{NodeStoreDeviations, short_label};
use crate::nodes::{
    GrantedEntry, NodeExecReport, NodeFacts, NodeRecord, NodeRegistry, NodeStoreError,
};
use crate::testing::{join_all, lock_state};
use clawless_exec::evaluate::ExecPolicy;
use clawless_exec::fs::DescribedFs;
use clawless_exec::node::report::MAX_REPORTED_PATHS;
use clawless_exec::{AllowlistEntry, Ask, Security, SkillBin};

#[derive(Debug, Default)]
struct RegistryState {
    /// Pairing code hash → (expiry, redeemed).
    pairings: HashMap<String, (u64, bool)>,
    nodes: BTreeMap<String, NodeRecord>,
}

/// An in-memory [`NodeRegistry`]. Clones share the same nodes and pairing codes.
#[derive(Debug, Clone, Default)]
pub struct InMemoryNodeRegistry {
    state: Arc<Mutex<RegistryState>>,
}

impl InMemoryNodeRegistry {
    /// A registry with no nodes and no pairing codes.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl NodeRegistry for InMemoryNodeRegistry {
    async fn create_pairing(
        &self, code_hash: &str, expires_at_ms: u64,
    ) -> Result<(), NodeStoreError> {
        let mut state = lock_state(&self.state);
        if state.pairings.contains_key(code_hash) {
            return Err(NodeStoreError::Conflict {
                what: "pairing code".into(),
            });
        }
        state
            .pairings
            .insert(code_hash.to_owned(), (expires_at_ms, false));
        Ok(())
    }

    async fn redeem_pairing(&self, code_hash: &str, now_ms: u64) -> Result<bool, NodeStoreError> {
        let mut state = lock_state(&self.state);
        match state.pairings.get_mut(code_hash) {
            Some((expires_at_ms, redeemed)) if !*redeemed && now_ms < *expires_at_ms => {
                *redeemed = true;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn register(&self, record: &NodeRecord) -> Result<(), NodeStoreError> {
        let mut state = lock_state(&self.state);
        if state.nodes.contains_key(&record.node_id) {
            return Err(NodeStoreError::Conflict {
                what: format!("node {}", record.node_id),
            });
        }
        state.nodes.insert(record.node_id.clone(), record.clone());
        Ok(())
    }

    async fn get(&self, node_id: &str) -> Result<Option<NodeRecord>, NodeStoreError> {
        Ok(lock_state(&self.state).nodes.get(node_id).cloned())
    }

    async fn list(&self) -> Result<Vec<NodeRecord>, NodeStoreError> {
        Ok(lock_state(&self.state).nodes.values().cloned().collect())
    }

    async fn heartbeat(
        &self, node_id: &str, facts: &NodeFacts, now_ms: u64,
    ) -> Result<bool, NodeStoreError> {
        let mut state = lock_state(&self.state);
        match state.nodes.get_mut(node_id) {
            Some(node) if !node.revoked => {
                node.apply_heartbeat(facts, now_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn revoke(&self, node_id: &str, now_ms: u64) -> Result<bool, NodeStoreError> {
        let mut state = lock_state(&self.state);
        let Some(node) = state.nodes.get_mut(node_id) else {
            return Ok(false);
        };
        node.revoked = true;
        node.revoked_at_ms.get_or_insert(now_ms);
        Ok(true)
    }

    async fn grant(&self, node_id: &str, entry: &GrantedEntry) -> Result<u64, NodeStoreError> {
        let mut state = lock_state(&self.state);
        let Some(node) = state.nodes.get_mut(node_id) else {
            return Err(NodeStoreError::NotFound {
                what: format!("node {node_id}"),
            });
        };
        if node.revoked {
            return Err(NodeStoreError::Revoked {
                node_id: node_id.to_owned(),
            });
        }
        node.apply_grant(entry);
        Ok(node.policy_version)
    }
}

/// Runs the [`NodeRegistry`] contract against `registry`, panicking with a description of the
/// first broken expectation.
///
/// Node ids and code hashes start with a label unique to this call, and `list` is checked only
/// for those, so the registry may hold other nodes and be shared with other runs. Includes
/// races of 8 concurrent redeems and 8 concurrent grants, unless `deviations` says the backend
/// cannot pass them.
pub async fn node_registry_contract(registry: &dyn NodeRegistry, deviations: NodeStoreDeviations) {
    let suite = RegistryContract {
        registry,
        run: short_label("r"),
    };
    suite
        .a_pairing_code_is_redeemed_once_before_it_expires()
        .await;
    suite.a_pairing_code_cannot_be_created_twice().await;
    if !deviations.conditional_writes_not_atomic {
        suite
            .concurrent_redeems_of_one_code_have_exactly_one_winner()
            .await;
    }
    suite.a_registered_node_reads_back_whole().await;
    suite
        .exec_facts_of_a_full_report_round_trip_and_a_bare_heartbeat_clears_them()
        .await;
    suite
        .registering_an_existing_id_conflicts_and_changes_nothing()
        .await;
    suite.the_list_is_sorted_by_node_id().await;
    suite
        .a_heartbeat_updates_facts_and_last_seen_of_live_nodes_only()
        .await;
    suite
        .revoking_marks_the_node_and_keeps_the_first_time()
        .await;
    suite.grants_append_once_and_bump_the_policy_version().await;
    suite.grants_to_unknown_or_revoked_nodes_fail().await;
    if !deviations.conditional_writes_not_atomic {
        suite.concurrent_grants_are_all_kept().await;
    }
}

struct RegistryContract<'a> {
    registry: &'a dyn NodeRegistry,
    run: String,
}

/// A time in the suite's past and future; the registry only compares the numbers it is given.
const T0: u64 = 1_700_000_000_000;

fn skill_bin(name: &str, path: &str) -> SkillBin {
    SkillBin {
        name: name.into(),
        resolved_path: path.into(),
    }
}

/// An exec report with every kind of field set, `paths` executables long (plus a symlink each
/// for the first few).
fn exec_report(paths: usize) -> NodeExecReport {
    let executables: std::collections::BTreeSet<String> = (0..paths)
        .map(|n| format!("/Users/lena/My Tools/ünï 🦀/bin/tool-{n:04}"))
        .collect();
    let symlinks = executables
        .iter()
        .take(3)
        .enumerate()
        .map(|(n, real)| (format!("/usr/local/bin/link-{n}"), real.clone()))
        .collect();
    NodeExecReport {
        home: Some("/Users/lena".into()),
        default_policy: ExecPolicy {
            ask: Ask::Always,
            ..ExecPolicy::default()
        },
        agents: [(
            "ops".to_owned(),
            ExecPolicy {
                security: Security::Full,
                ask: Ask::Off,
                ask_fallback: Security::Allowlist,
                allowlist: vec![AllowlistEntry {
                    pattern: "~/bin/deploy".into(),
                    arg_pattern: Some("^--env \"(dev|stage)\"$".into()),
                    source: None,
                }],
                safe_bins: Some(vec!["sort".into()]),
                safe_bin_trusted_dirs: vec!["/opt/homebrew/bin".into()],
                auto_allow_skills: true,
                ..ExecPolicy::default()
            },
        )]
        .into(),
        fs: DescribedFs {
            executables,
            files: ["/etc/passwd".to_owned()].into(),
            symlinks,
        },
        truncated: paths >= MAX_REPORTED_PATHS,
        sandbox_backends: vec!["bwrap".to_owned()],
    }
}

fn grant(agent: &str, pattern: &str, at: u64) -> GrantedEntry {
    GrantedEntry {
        agent_id: agent.into(),
        entry: AllowlistEntry::pattern(pattern),
        granted_at_ms: at,
    }
}

impl RegistryContract<'_> {
    fn id(&self, name: &str) -> String {
        format!("{}-{name}", self.run)
    }

    fn record(&self, name: &str) -> NodeRecord {
        let node_id = self.id(name);
        NodeRecord {
            queue: format!("node-{node_id}"),
            node_id,
            display_name: None,
            secret_hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
            platform: "linux".into(),
            path: vec!["/usr/local/bin".into(), "/usr/bin".into()],
            skill_bins: vec![],
            paired_at_ms: T0,
            last_seen_ms: T0,
            revoked: false,
            revoked_at_ms: None,
            granted: vec![],
            policy_version: 0,
            exec: None,
        }
    }

    async fn register(&self, record: &NodeRecord) {
        self.registry
            .register(record)
            .await
            .unwrap_or_else(|err| panic!("register {}: {err}", record.node_id));
    }

    async fn get(&self, node_id: &str) -> Option<NodeRecord> {
        self.registry
            .get(node_id)
            .await
            .unwrap_or_else(|err| panic!("get {node_id}: {err}"))
    }

    async fn get_some(&self, node_id: &str) -> NodeRecord {
        self.get(node_id)
            .await
            .unwrap_or_else(|| panic!("node {node_id} should exist"))
    }

    async fn redeem(&self, code: &str, now_ms: u64) -> bool {
        self.registry
            .redeem_pairing(code, now_ms)
            .await
            .unwrap_or_else(|err| panic!("redeem {code}: {err}"))
    }

    async fn create_pairing(&self, code: &str, expires_at_ms: u64) {
        self.registry
            .create_pairing(code, expires_at_ms)
            .await
            .unwrap_or_else(|err| panic!("create pairing {code}: {err}"));
    }

    async fn grant(&self, node_id: &str, entry: &GrantedEntry) -> u64 {
        self.registry
            .grant(node_id, entry)
            .await
            .unwrap_or_else(|err| panic!("grant to {node_id}: {err}"))
    }

    async fn a_pairing_code_is_redeemed_once_before_it_expires(&self) {
        let code = self.id("code-once");
        self.create_pairing(&code, T0 + 60_000).await;
        assert!(
            !self.redeem(&self.id("code-unknown"), T0).await,
            "an unknown code is not redeemed"
        );
        assert!(
            self.redeem(&code, T0 + 59_999).await,
            "a code is redeemed before it expires"
        );
        assert!(
            !self.redeem(&code, T0 + 59_999).await,
            "a code is redeemed only once"
        );

        let expiring = self.id("code-expiring");
        self.create_pairing(&expiring, T0 + 60_000).await;
        assert!(
            !self.redeem(&expiring, T0 + 60_000).await,
            "a code is not redeemed at its expiry"
        );
        assert!(!self.redeem(&expiring, T0 + 120_000).await, "nor after it");
        assert!(
            self.redeem(&expiring, T0).await,
            "a failed late redeem does not use the code up"
        );
    }

    async fn a_pairing_code_cannot_be_created_twice(&self) {
        let code = self.id("code-twice");
        self.create_pairing(&code, T0 + 60_000).await;
        let again = self.registry.create_pairing(&code, T0 + 600_000).await;
        assert!(
            matches!(again, Err(NodeStoreError::Conflict { .. })),
            "a second create of one hash conflicts, got {again:?}"
        );
        assert!(
            !self.redeem(&code, T0 + 300_000).await,
            "the failed create did not extend the expiry"
        );
        assert!(self.redeem(&code, T0).await);
    }

    async fn concurrent_redeems_of_one_code_have_exactly_one_winner(&self) {
        let code = self.id("code-race");
        self.create_pairing(&code, T0 + 60_000).await;
        let attempts = (0..8)
            .map(|_| {
                let code = code.as_str();
                Box::pin(async move { self.registry.redeem_pairing(code, T0).await })
                    as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<Result<bool, NodeStoreError>> = join_all(attempts).await;
        let winners = results
            .iter()
            .filter(|result| matches!(result, Ok(true)))
            .count();
        let losers = results
            .iter()
            .filter(|result| matches!(result, Ok(false)))
            .count();
        assert_eq!(
            (winners, losers),
            (1, 7),
            "exactly one concurrent redeem wins: {results:?}"
        );
    }

    async fn a_registered_node_reads_back_whole(&self) {
        assert_eq!(self.get(&self.id("never")).await, None, "an unknown node");
        let mut record = self.record("whole");
        record.display_name = Some("Lena's MacBook — ünï 🦀 \"quoted\"".into());
        record.platform = "darwin".into();
        record.path = vec![
            "/opt/homebrew/bin".into(),
            "/Users/lena/My Tools/bin".into(),
            String::new(),
        ];
        record.skill_bins = vec![
            skill_bin("jq", "/opt/homebrew/bin/jq"),
            skill_bin("rg", "/Users/lena/My Tools/bin/rg"),
        ];
        record.queue = "https://sqs.us-east-1.amazonaws.com/123456789012/clawless-node-x".into();
        record.paired_at_ms = T0;
        record.last_seen_ms = T0 + 5;
        record.granted = vec![GrantedEntry {
            agent_id: "main".into(),
            entry: AllowlistEntry {
                pattern: "~/bin/deploy".into(),
                arg_pattern: Some("^--env (dev|stage)$".into()),
                source: Some("allow-always".into()),
            },
            granted_at_ms: T0 + 1,
        }];
        record.policy_version = 3;
        record.exec = Some(exec_report(5));
        self.register(&record).await;
        assert_eq!(
            self.get_some(&record.node_id).await,
            record,
            "every field reads back as registered"
        );
    }

    async fn exec_facts_of_a_full_report_round_trip_and_a_bare_heartbeat_clears_them(&self) {
        let record = self.record("exec");
        self.register(&record).await;
        assert_eq!(self.get_some(&record.node_id).await.exec, None);
        let facts = NodeFacts {
            platform: "darwin".into(),
            path: vec!["/opt/homebrew/bin".into()],
            skill_bins: vec![skill_bin("gh", "/opt/homebrew/bin/gh")],
            display_name: None,
            exec: Some(exec_report(MAX_REPORTED_PATHS)),
        };
        assert!(
            self.registry
                .heartbeat(&record.node_id, &facts, T0 + 1)
                .await
                .unwrap_or_else(|err| panic!("heartbeat: {err}"))
        );
        assert_eq!(
            self.get_some(&record.node_id).await.exec,
            facts.exec,
            "a report of {MAX_REPORTED_PATHS} paths reads back whole"
        );
        let bare = NodeFacts {
            exec: None,
            ..facts.clone()
        };
        assert!(
            self.registry
                .heartbeat(&record.node_id, &bare, T0 + 2)
                .await
                .unwrap_or_else(|err| panic!("heartbeat: {err}"))
        );
        let node = self.get_some(&record.node_id).await;
        assert_eq!(node.exec, None, "no exec facts clear the stored ones");
        assert_eq!(node.last_seen_ms, T0 + 2);
    }

    async fn registering_an_existing_id_conflicts_and_changes_nothing(&self) {
        let record = self.record("dup");
        self.register(&record).await;
        let mut other = self.record("dup");
        other.secret_hash = "other".into();
        other.platform = "win32".into();
        let again = self.registry.register(&other).await;
        assert!(
            matches!(again, Err(NodeStoreError::Conflict { .. })),
            "a second register of one id conflicts, got {again:?}"
        );
        assert_eq!(
            self.get_some(&record.node_id).await,
            record,
            "the first stands"
        );
    }

    async fn the_list_is_sorted_by_node_id(&self) {
        // Registered out of order. Byte order puts `10` before `9`, digits before uppercase
        // before lowercase, and a prefix before its extensions.
        let names = [
            "list-b", "list-9", "list-A", "list-10", "list-a_1", "list-a",
        ];
        for name in names {
            self.register(&self.record(name)).await;
        }
        let prefix = self.id("list-");
        let listed: Vec<String> = self
            .registry
            .list()
            .await
            .unwrap_or_else(|err| panic!("list: {err}"))
            .into_iter()
            .map(|node| node.node_id)
            .filter(|id| id.starts_with(&prefix))
            .collect();
        let expected: Vec<String> = [
            "list-10", "list-9", "list-A", "list-a", "list-a_1", "list-b",
        ]
        .iter()
        .map(|name| self.id(name))
        .collect();
        assert_eq!(listed, expected, "list is sorted by node id bytes");
    }

    async fn a_heartbeat_updates_facts_and_last_seen_of_live_nodes_only(&self) {
        let mut record = self.record("beat");
        record.display_name = Some("desk".into());
        self.register(&record).await;
        let facts = NodeFacts {
            platform: "darwin".into(),
            path: vec!["/opt/homebrew/bin".into()],
            skill_bins: vec![skill_bin("gh", "/opt/homebrew/bin/gh")],
            display_name: None,
            exec: Some(exec_report(2)),
        };
        let beat = self
            .registry
            .heartbeat(&record.node_id, &facts, T0 + 1_000)
            .await
            .unwrap_or_else(|err| panic!("heartbeat: {err}"));
        assert!(beat, "a live node's heartbeat is recorded");
        let mut expected = record.clone();
        expected.platform = "darwin".into();
        expected.path = facts.path.clone();
        expected.skill_bins = facts.skill_bins.clone();
        expected.exec = facts.exec.clone();
        expected.last_seen_ms = T0 + 1_000;
        assert_eq!(
            self.get_some(&record.node_id).await,
            expected,
            "facts and last_seen change; a missing name keeps the stored one"
        );

        let renamed = NodeFacts {
            display_name: Some("desk 2".into()),
            skill_bins: vec![],
            ..facts.clone()
        };
        assert!(
            self.registry
                .heartbeat(&record.node_id, &renamed, T0 + 2_000)
                .await
                .unwrap_or_else(|err| panic!("heartbeat: {err}"))
        );
        let node = self.get_some(&record.node_id).await;
        assert_eq!(node.display_name.as_deref(), Some("desk 2"));
        assert!(node.skill_bins.is_empty(), "an empty list replaces the old");

        let unknown = self
            .registry
            .heartbeat(&self.id("beat-unknown"), &facts, T0)
            .await
            .unwrap_or_else(|err| panic!("heartbeat: {err}"));
        assert!(!unknown, "an unknown node's heartbeat is refused");
        assert_eq!(
            self.get(&self.id("beat-unknown")).await,
            None,
            "and creates nothing"
        );

        self.registry
            .revoke(&record.node_id, T0 + 3_000)
            .await
            .unwrap_or_else(|err| panic!("revoke: {err}"));
        let before = self.get_some(&record.node_id).await;
        let revoked = self
            .registry
            .heartbeat(&record.node_id, &facts, T0 + 4_000)
            .await
            .unwrap_or_else(|err| panic!("heartbeat: {err}"));
        assert!(!revoked, "a revoked node's heartbeat is refused");
        assert_eq!(
            self.get_some(&record.node_id).await,
            before,
            "and changes nothing"
        );
    }

    async fn revoking_marks_the_node_and_keeps_the_first_time(&self) {
        let record = self.record("revoke");
        self.register(&record).await;
        let revoke = |node_id: String, at: u64| async move {
            self.registry
                .revoke(&node_id, at)
                .await
                .unwrap_or_else(|err| panic!("revoke {node_id}: {err}"))
        };
        assert!(revoke(record.node_id.clone(), T0 + 10).await);
        let node = self.get_some(&record.node_id).await;
        assert!(node.revoked);
        assert_eq!(node.revoked_at_ms, Some(T0 + 10));
        assert!(
            revoke(record.node_id.clone(), T0 + 20).await,
            "revoking again is harmless"
        );
        assert_eq!(
            self.get_some(&record.node_id).await.revoked_at_ms,
            Some(T0 + 10),
            "the first revocation time stays"
        );
        assert!(
            !revoke(self.id("revoke-unknown"), T0).await,
            "an unknown node is not revoked"
        );
        assert_eq!(self.get(&self.id("revoke-unknown")).await, None);
        let mut expected = record;
        expected.revoked = true;
        expected.revoked_at_ms = Some(T0 + 10);
        assert_eq!(
            self.get_some(&expected.node_id).await,
            expected,
            "nothing else changed"
        );
    }

    async fn grants_append_once_and_bump_the_policy_version(&self) {
        let record = self.record("grant");
        self.register(&record).await;
        let jq = grant("main", "/usr/bin/jq", T0 + 1);
        assert_eq!(self.grant(&record.node_id, &jq).await, 1);
        let rg = grant("main", "/usr/bin/rg", T0 + 2);
        assert_eq!(self.grant(&record.node_id, &rg).await, 2);
        assert_eq!(
            self.grant(&record.node_id, &grant("main", "/usr/bin/jq", T0 + 3))
                .await,
            2,
            "the same entry for the same agent changes nothing"
        );
        let ops = grant("ops", "/usr/bin/jq", T0 + 4);
        assert_eq!(
            self.grant(&record.node_id, &ops).await,
            3,
            "the same entry for another agent is its own grant"
        );
        let mut bound = grant("main", "/usr/bin/jq", T0 + 5);
        bound.entry.arg_pattern = Some("^-r .*$".into());
        assert_eq!(
            self.grant(&record.node_id, &bound).await,
            4,
            "an entry with other arguments is another entry"
        );
        let node = self.get_some(&record.node_id).await;
        assert_eq!(node.granted, vec![jq, rg, ops, bound], "in grant order");
        assert_eq!(node.policy_version, 4);
        assert_eq!(
            (node.platform.as_str(), node.last_seen_ms),
            ("linux", T0),
            "grants change nothing else"
        );
    }

    async fn grants_to_unknown_or_revoked_nodes_fail(&self) {
        let entry = grant("main", "/usr/bin/jq", T0);
        let unknown = self.registry.grant(&self.id("grant-unknown"), &entry).await;
        assert!(
            matches!(unknown, Err(NodeStoreError::NotFound { .. })),
            "a grant to an unknown node is NotFound, got {unknown:?}"
        );
        assert_eq!(self.get(&self.id("grant-unknown")).await, None);
        let record = self.record("grant-revoked");
        self.register(&record).await;
        self.registry
            .revoke(&record.node_id, T0 + 1)
            .await
            .unwrap_or_else(|err| panic!("revoke: {err}"));
        let revoked = self.registry.grant(&record.node_id, &entry).await;
        assert!(
            matches!(revoked, Err(NodeStoreError::Revoked { .. })),
            "a grant to a revoked node is Revoked, got {revoked:?}"
        );
        let node = self.get_some(&record.node_id).await;
        assert!(node.granted.is_empty() && node.policy_version == 0);
    }

    async fn concurrent_grants_are_all_kept(&self) {
        const GRANTS: u64 = 8;
        let record = self.record("grant-race");
        self.register(&record).await;
        let node_id = record.node_id.as_str();
        let attempts = (0..GRANTS)
            .map(|index| {
                Box::pin(async move {
                    let entry = grant("main", &format!("/usr/bin/tool-{index}"), T0 + index);
                    self.registry.grant(node_id, &entry).await
                }) as Pin<Box<dyn Future<Output = _> + Send + '_>>
            })
            .collect();
        let results: Vec<Result<u64, NodeStoreError>> = join_all(attempts).await;
        let mut versions: Vec<u64> = results
            .iter()
            .map(|result| match result {
                Ok(version) => *version,
                Err(err) => panic!("a concurrent grant failed: {err}"),
            })
            .collect();
        versions.sort_unstable();
        assert_eq!(
            versions,
            (1..=GRANTS).collect::<Vec<_>>(),
            "each grant got its own version"
        );
        let node = self.get_some(node_id).await;
        assert_eq!(node.policy_version, GRANTS);
        let mut patterns: Vec<String> = node
            .granted
            .into_iter()
            .map(|granted| granted.entry.pattern)
            .collect();
        patterns.sort();
        let expected: Vec<String> = (0..GRANTS)
            .map(|index| format!("/usr/bin/tool-{index}"))
            .collect();
        assert_eq!(patterns, expected, "no concurrent grant was lost");
    }
}
