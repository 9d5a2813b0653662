//! Heartbeats (spec `openclaw-automation.md` §1): the periodic poll turn in which an agent
//! checks `HEARTBEAT.md` and either acknowledges with `HEARTBEAT_OK` or sends an alert.
//!
//! This module owns the pure logic, as plain functions over data: the settings and who runs
//! heartbeats ([`config`]), when they are due ([`schedule`]), why one was asked for
//! ([`reason`]), `HEARTBEAT.md` and its tasks ([`file`]), which session a heartbeat runs in
//! ([`session`]), the gates and the prompt ([`gate`], [`prompt`]), what becomes of the reply
//! ([`reply`]), keeping acknowledged polls out of later context ([`hygiene`]), and what a
//! session keeps between heartbeats and which timer firings count ([`state`]).
//!
//! It performs no I/O and reads no clock: the caller (the turn service) passes the time as
//! epoch milliseconds, the file's text, the lane state and the durable per-agent state
//! ([`schedule::HeartbeatSchedule`], [`file::HeartbeatTaskState`], the last alert), and arms
//! the timers and sends the messages the results ask for.
//!
//! One heartbeat, end to end:
//! 1. [`config::heartbeat_agents`] → the agent's merged [`config::HeartbeatConfig`];
//!    [`schedule::HeartbeatSchedule::is_due`] for interval wakes.
//! 2. [`session::resolve_heartbeat_session`] → where it runs.
//! 3. [`gate::decide_heartbeat_run`] → a [`gate::HeartbeatRunPlan`] (prompt, due tasks) or a
//!    [`run::SkipReason`].
//! 4. Run the turn; [`reply::decide_heartbeat_reply`] → a [`reply::HeartbeatOutcome`].
//! 5. [`file::record_task_runs`] unless skipped; [`schedule::HeartbeatSchedule::after_run`]
//!    and [`schedule::retry_delay_ms`] for the next wake.
//!
//! The turn service drives this from durable timers: each firing names a slot of the agent's
//! phase grid, [`state::judge_firing`] lets each slot act once, and the run's reply rules
//! travel with the turn as a [`state::HeartbeatDelivery`], so the turn engine decides the
//! reply ([`state::HeartbeatDelivery::decide`]) from persisted facts.

pub mod config;
pub mod file;
pub mod gate;
pub mod hygiene;
pub mod prompt;
pub mod reason;
pub mod reply;
pub mod run;
pub mod schedule;
pub mod session;
pub mod state;

pub use config::{
    ActiveHoursConfig, DirectPolicy, HeartbeatAgent, HeartbeatConfig, HeartbeatTarget,
    HeartbeatVisibility, HeartbeatVisibilityConfig, heartbeat_agents,
};
pub use file::{HeartbeatFile, HeartbeatTask, HeartbeatTaskState};
pub use gate::{HeartbeatDecision, HeartbeatRunFacts, HeartbeatRunPlan, decide_heartbeat_run};
pub use hygiene::drop_heartbeat_acks;
pub use prompt::{HeartbeatPromptKind, PendingSystemEvent, system_event_lines};
pub use reason::HeartbeatReason;
pub use reply::{
    DeliveryReadiness, HeartbeatOutcome, HeartbeatReplyFacts, NoTargetReason, ReplyPayload,
    StripMode, decide_heartbeat_reply, strip_heartbeat_token,
};
pub use run::{HeartbeatRunResult, SkipReason};
pub use schedule::HeartbeatSchedule;
pub use session::{HeartbeatSession, resolve_heartbeat_session};
pub use state::{
    AlertTarget, Firing, HeartbeatDelivery, HeartbeatRunRecord, HeartbeatState, SentAlert,
    judge_firing,
};
