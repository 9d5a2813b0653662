//! clawless automation: what makes the agent act without being asked.
//!
//! - [`cron`]: OpenClaw's cron jobs and reminders: schedules, the `cron` tool's validation and
//!   normalisation, the job store port, runs, outcomes, the run log and delivery.
//! - [`heartbeat`]: the periodic `HEARTBEAT.md` check: its config and schedule, the gate that
//!   decides whether a poll runs, the prompt, and what a reply means.
//!
//! Both are pure (sans-IO): they read time and session keys from `clawless-base` and never
//! depend on the turn engine; the runtime drives them.

pub mod cron;
pub mod heartbeat;

#[cfg(any(test, feature = "test-support"))]
pub mod testing;
