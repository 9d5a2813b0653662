//! clawless node host building blocks: the pieces of `clawless node` that touch the user's
//! machine.
//!
//! A node host runs real commands on the machine it is installed on, so everything here
//! errs on the side of refusing:
//! - [`runner`] runs one argv as a real process in its own process group, with a timeout
//!   that kills the whole group, a combined output cap and a scrubbed environment;
//! - [`journal`] is the node's local SQLite job journal, so a redelivered job never runs
//!   twice and a replayed message nonce is refused;
//! - [`approvals_file`] reads and writes `exec-approvals.json`, resolving an agent's rules
//!   and never falling back to anything looser than the file (an unreadable file is an error);
//! - [`skill_bins`] is the SkillBinsCache: the skills' declared binaries resolved on this
//!   node's PATH;
//! - [`state`] owns the state dir and `node.json` (the pairing: node id, secret, backend URL);
//! - [`jail`] is the bubblewrap jail a sandboxed session's commands run in (a node without a
//!   working one refuses them);
//! - [`local_fs`] answers the exec engine's [`clawless_exec::fs::NodeFs`] questions from
//!   this machine's disk.
//!
//! - [`client`] speaks HTTP to the backend (pairing, heartbeats, reports, queue credentials,
//!   local-mode jobs);
//! - [`sqs_jobs`] reads the node's own SQS queue with credentials the backend vends (AWS mode);
//! - [`policy`] decides, with the core's exec engine, whether this machine runs a job;
//! - [`exec_report`] describes this node's exec policy and the executables it names, for the
//!   backend's `exec check --node` and pre-check;
//! - [`outbound_media`] reads the files a command names on `MEDIA:` lines, for upload with
//!   its report (only from its working or temp directory, within size caps);
//! - [`process_table`] keeps the background commands (`exec` with `yieldMs`/`background`)
//!   on disk under a small supervisor, so their output and exits survive a node restart;
//! - [`process_actions`] carries out the `process` tool's actions on them;
//! - [`worker`] is `clawless node run`: poll, check, decide, run, report.
//!
//! Only [`sqs_jobs`] knows AWS, and only SQS with credentials the backend hands out.

pub mod approvals_file;
mod atomic;
pub mod client;
pub mod exec_report;
pub mod jail;
pub mod journal;
pub mod local_fs;
pub mod outbound_media;
pub mod policy;
pub mod process_actions;
pub mod process_table;
pub mod runner;
pub mod skill_bins;
pub mod sqs_jobs;
pub mod state;
pub mod worker;
