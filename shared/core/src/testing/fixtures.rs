//! Sample records the adapter tests build on, one of each, so the DynamoDB/SQS and SQLite
//! tests store the same thing: session keys and steps, queued messages, a cron job and a line
//! of its run log, a node and an exec job. A test that depends on a value sets it itself
//! (`CronJob { enabled: false, ..sample_cron_job("a") }`).

use crate::nodes::{ExecJobRecord, NodeRecord};
use crate::session::{QueuedMessage, SessionKey, StoredStep};
use clawless_automation::cron::{
    CronJob, CronJobState, CronPayload, CronRunLogEntry, CronSchedule, SessionTarget, WakeMode,
};

/// `raw` as a session key.
///
/// # Panics
/// When `raw` is not a valid session key (a mistake in the test).
pub fn session_key(raw: &str) -> SessionKey {
    SessionKey::parse(raw).expect("a valid session key")
}

/// One step per `seq`, each with the body `{"seq":<seq>}`.
pub fn sample_steps(seqs: impl IntoIterator<Item = u64>) -> Vec<StoredStep> {
    seqs.into_iter()
        .map(|seq| StoredStep {
            seq,
            body: format!(r#"{{"seq":{seq}}}"#),
        })
        .collect()
}

/// A turn-queue message of `group` with `dedup_id` and `body`.
pub fn queued_message(group: &str, dedup_id: &str, body: &str) -> QueuedMessage {
    QueuedMessage {
        group: group.into(),
        dedup_id: dedup_id.into(),
        body: body.into(),
    }
}

/// An enabled job `id` for the main agent: every minute, a system event, next due at 60 s.
pub fn sample_cron_job(id: &str) -> CronJob {
    CronJob {
        id: id.into(),
        agent_id: Some("main".into()),
        session_key: None,
        name: format!("Job {id}"),
        description: None,
        enabled: true,
        delete_after_run: None,
        created_at_ms: 1,
        updated_at_ms: 1,
        schedule: CronSchedule::Every {
            every_ms: 60_000,
            anchor_ms: None,
        },
        session_target: SessionTarget::Main,
        wake_mode: WakeMode::Now,
        payload: CronPayload::SystemEvent {
            text: "stand up".into(),
        },
        delivery: None,
        failure_alert: None,
        state: CronJobState {
            next_run_at_ms: Some(60_000),
            ..CronJobState::default()
        },
    }
}

/// A `finished` line of `job_id`'s run log at `ts`, summarised as `run <ts>`.
pub fn sample_run_entry(job_id: &str, ts: u64) -> CronRunLogEntry {
    CronRunLogEntry {
        ts,
        job_id: job_id.into(),
        action: "finished".into(),
        summary: Some(format!("run {ts}")),
        ..CronRunLogEntry::default()
    }
}

/// A paired Linux node `node_id` named `desk`, with `/usr/bin` on its PATH, queue
/// `node-<node_id>`, nothing granted and no exec report.
pub fn sample_node(node_id: &str) -> NodeRecord {
    NodeRecord {
        node_id: node_id.into(),
        display_name: Some("desk".into()),
        secret_hash: "ab".repeat(32),
        platform: "linux".into(),
        path: vec!["/usr/bin".into()],
        skill_bins: vec![],
        queue: format!("node-{node_id}"),
        paired_at_ms: 1,
        last_seen_ms: 1,
        revoked: false,
        revoked_at_ms: None,
        granted: vec![],
        policy_version: 0,
        exec: None,
    }
}

/// An unresolved first attempt of exec job `job_id` on node `n1`, created at
/// 1 700 000 000 000 ms with a deadline a minute later.
pub fn sample_exec_job(job_id: &str) -> ExecJobRecord {
    ExecJobRecord {
        job_id: job_id.into(),
        node_id: "n1".into(),
        session_key: "agent:main:main".into(),
        agent_id: "main".into(),
        call_id: "call-1".into(),
        attempt: 1,
        envelope: "{}".into(),
        created_at_ms: 1_700_000_000_000,
        deadline_ms: 1_700_000_060_000,
        result: None,
        resolved_at_ms: None,
    }
}
